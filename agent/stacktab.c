/*
 * stacktab.c - lock-free call-stack table (DESIGN.md 1.3, "spatial
 * similarity").
 *
 * Stacks share their outer frames, so each frame is stored once as a node
 * (parent id, address) and a stack is the id of its leaf node.  Interning
 * happens on the captured thread: in a hook or in the sampler's signal
 * handler.  Hence no lock and no allocation:
 *
 *  - ids are handed out by an atomic counter; the node is filled in, marked
 *    ready (release), and only then published in the hash by a CAS on an
 *    empty slot.  A slot is therefore either empty or names a complete node:
 *    there is no "claimed but not yet written" state another thread (or a
 *    signal handler on this one) could spin on.
 *  - two threads racing to insert the same (parent, addr) both allocate an
 *    id; the loser's CAS fails, it sees the winner's equal key and uses the
 *    winner's id.  The loser's node stays in the array as an orphan that no
 *    stack refers to: it costs 16 bytes in the file, and saves a lock.
 *  - the writer thread streams nodes to the file in id order up to the first
 *    node not yet ready, so a node always reaches the file before any sample
 *    that refers to it is written (samples are emitted after interning).
 *
 * Memory is mmap'ed with MAP_NORESERVE and touched lazily (see touch()).
 * The table never grows: when full, interning returns 0 and the sample is
 * recorded without a stack (counted in `full`, shown by `rhea report`).  Limits: max_nodes <
 * 2^31; the hash is linear probing at load factor <= 1/2.
 *
 * A node's slot is found by hashing its address with its parent's hash
 * value (hv, kept per node), not with the parent's id.  Each frame's
 * lookup reads a slot and then the node it names, two cache misses in a
 * table of megabytes, and with ids in the hash each frame's slot was known
 * only once its parent's id was found: a stack of 60 new-to-the-cache
 * frames cost 120 misses one after the other (the hook that captured it
 * stalled for 10 us; the top agent function of an allocation storm).
 * With hash values, every frame's slot follows from the addresses alone:
 * stacktab_intern computes them all first, fetches the slots together,
 * then the nodes they name, and then walks the frames with them in cache.
 */
#include "stacktab.h"
#include "salvage.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

/* Slots of a 4 KB page (larger pages: touched in 4 KB steps, harmless). */
#define SLOTS_PER_PAGE (4096 / sizeof(uint32_t))

/*
 * Before the first access to a page of slots, write to it, so that the
 * kernel maps a private page at once.  The probes read a slot before
 * they CAS it: on an untouched page the read maps the shared zero page and
 * the CAS then takes a copy-on-write fault with a TLB shootdown, once per
 * page, for as long as new stacks appear (11% of an allocation storm's CPU
 * on the bench machine).  Pre-faulting the whole hash (4 MB by default)
 * instead cost every traced program 2.2 ms of its start, half of the
 * agent's start-up.  An atomic OR of 0 is a write that changes nothing, so
 * it is safe against a concurrent CAS on the same slot.
 */
static inline void touch(struct stacktab *t, uint32_t i)
{
	uint32_t page = (uint32_t)(i / SLOTS_PER_PAGE);
	uint64_t bit = 1ull << (page & 63);
	uint64_t *w = &t->touched[page >> 6];
	if (__builtin_expect((__atomic_load_n(w, __ATOMIC_RELAXED) & bit) != 0, 1))
		return;
	__atomic_fetch_or(&t->slots[i], 0, __ATOMIC_RELAXED);
	__atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
}

/* Bytes of the slots' mapping: the slots, then one bit per page of them. */
static size_t slots_map_bytes(uint32_t nslots, size_t *touched_off)
{
	*touched_off = (size_t)nslots * sizeof(uint32_t);
	return *touched_off + ((size_t)nslots / SLOTS_PER_PAGE + 63) / 64 * sizeof(uint64_t);
}

/* The hash value of a node: its address with its parent's hash value. */
static inline uint32_t hash(uint32_t parent_hv, uint64_t addr)
{
	uint64_t h = addr * 0x9e3779b97f4a7c15ull ^ ((uint64_t)parent_hv * 0xc2b2ae3d27d4eb4full);
	h ^= h >> 29;
	return (uint32_t)h;
}

#define ROOT_HV 0x6a09e667u /* hv[0]: the root's */

_Static_assert(sizeof(struct stacktab_node) == sizeof(struct rhea_salvage_node) &&
		       offsetof(struct stacktab_node, ready) == offsetof(struct rhea_salvage_node, ready),
	       "a node is what rhea record salvages");

int stacktab_init_at(struct stacktab *t, void *n, uint32_t max_nodes)
{
	memset(t, 0, sizeof(*t));
	if (max_nodes < 16 || max_nodes > (1u << 30) || !n)
		return -EINVAL;
	void *hv = mmap(NULL, (size_t)max_nodes * sizeof(uint32_t), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (hv == MAP_FAILED)
		return -errno;
	uint32_t nslots = 1;
	while (nslots < 2 * max_nodes)
		nslots <<= 1;
	/* The bits saying which pages of slots were touched (touch()) come
	 * after the slots, written at once: 128 bytes for the default table. */
	size_t toff, mbytes = slots_map_bytes(nslots, &toff);
	void *s = mmap(NULL, mbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s == MAP_FAILED) {
		int e = errno;
		munmap(hv, (size_t)max_nodes * sizeof(uint32_t));
		return -e;
	}
	t->nodes = n;
	t->hv = hv;
	t->hv[0] = ROOT_HV;
	t->slots = s;
	t->touched = (uint64_t *)((char *)s + toff);
	memset(t->touched, 0, mbytes - toff); /* written first: private pages at once */
	t->max_nodes = max_nodes;
	t->nslots = nslots;
	t->next_id = 1;
	t->written = 1;
	return 0;
}

int stacktab_init(struct stacktab *t, uint32_t max_nodes)
{
	if (max_nodes > (1u << 30))
		return -EINVAL; /* before sizing a mapping by it */
	size_t nbytes = (size_t)max_nodes * sizeof(struct stacktab_node);
	void *n = mmap(NULL, nbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (n == MAP_FAILED)
		return -errno;
	int r = stacktab_init_at(t, n, max_nodes);
	if (r < 0)
		munmap(n, nbytes);
	else
		t->nodes_owned = 1;
	return r;
}

void stacktab_destroy(struct stacktab *t)
{
	if (t->nodes && t->nodes_owned)
		munmap(t->nodes, (size_t)t->max_nodes * sizeof(struct stacktab_node));
	size_t toff;
	if (t->slots)
		munmap(t->slots, slots_map_bytes(t->nslots, &toff));
	if (t->hv)
		munmap(t->hv, (size_t)t->max_nodes * sizeof(uint32_t));
	t->nodes = NULL;
	t->slots = NULL;
	t->hv = NULL;
}

static inline int key_eq(const struct stacktab_node *n, uint32_t parent, uint64_t addr)
{
	return n->addr == addr && n->parent == parent;
}

uint32_t stacktab_find(const struct stacktab *t, uint32_t parent, uint64_t addr)
{
	uint32_t mask = t->nslots - 1;
	if (parent >= t->max_nodes)
		return 0;
	for (uint32_t i = hash(t->hv[parent], addr) & mask, probes = 0; probes < t->nslots;
	     i = (i + 1) & mask, probes++) {
		uint32_t id = __atomic_load_n(&t->slots[i], __ATOMIC_ACQUIRE);
		if (id == 0)
			return 0;
		if (key_eq(&t->nodes[id], parent, addr))
			return id;
	}
	return 0;
}

/* (parent, addr), whose hash value is h. */
static uint32_t intern_one(struct stacktab *t, uint32_t parent, uint64_t addr, uint32_t h)
{
	uint32_t mask = t->nslots - 1;
	uint32_t mine = 0; /* id allocated by us, once we know we need one */
	uint32_t i = h & mask;
	for (uint32_t probes = 0; probes < t->nslots; i = (i + 1) & mask, probes++) {
		touch(t, i);
		uint32_t id = __atomic_load_n(&t->slots[i], __ATOMIC_ACQUIRE);
		if (id != 0) {
			if (key_eq(&t->nodes[id], parent, addr))
				return id; /* mine (if any) becomes an orphan */
			continue;
		}
		if (mine == 0) {
			mine = __atomic_fetch_add(&t->next_id, 1, __ATOMIC_RELAXED);
			if (mine >= t->max_nodes) {
				/* Keep next_id from wrapping on repeated failures. */
				__atomic_store_n(&t->next_id, t->max_nodes, __ATOMIC_RELAXED);
				__atomic_fetch_add(&t->full, 1, __ATOMIC_RELAXED);
				return 0;
			}
			t->nodes[mine].addr = addr;
			t->nodes[mine].parent = parent;
			t->hv[mine] = h; /* published with the node */
			__atomic_store_n(&t->nodes[mine].ready, 1, __ATOMIC_RELEASE);
		}
		uint32_t expected = 0;
		if (__atomic_compare_exchange_n(&t->slots[i], &expected, mine, 0,
						__ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			return mine;
		/* Lost the slot: look at who won it, then go on probing. */
		if (key_eq(&t->nodes[expected], parent, addr))
			return expected;
	}
	__atomic_fetch_add(&t->full, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Frames looked up together: their slots, then their nodes, fetched at
 * once (a few dozen misses in flight is what a core sustains). */
#define BATCH 32

uint32_t stacktab_intern(struct stacktab *t, uint32_t parent,
			 const uint64_t *addrs, int n, uint32_t *ids)
{
	if (parent >= t->max_nodes)
		return 0;
	uint32_t mask = t->nslots - 1, h[BATCH];
	uint32_t hv = t->hv[parent];
	for (int base = 0; base < n; base += BATCH) {
		int k = n - base < BATCH ? n - base : BATCH;
		for (int j = 0; j < k; j++) {
			hv = hash(hv, addrs[base + j]);
			h[j] = hv;
			__builtin_prefetch(&t->slots[hv & mask]);
		}
		/* (a hint only, for more than one frame: intern_one reads the
		 * slot again; a page of slots is written before it is first
		 * read: touch) */
		for (int j = 0; k > 1 && j < k; j++) {
			touch(t, h[j] & mask);
			uint32_t id = __atomic_load_n(&t->slots[h[j] & mask], __ATOMIC_RELAXED);
			if (id != 0)
				__builtin_prefetch(&t->nodes[id]);
		}
		for (int j = 0; j < k; j++) {
			parent = intern_one(t, parent, addrs[base + j], h[j]);
			if (parent == 0)
				return 0;
			if (ids)
				ids[base + j] = parent;
		}
	}
	return parent;
}

uint32_t stacktab_ready_upto(const struct stacktab *t, uint32_t from)
{
	uint32_t end = __atomic_load_n(&t->next_id, __ATOMIC_ACQUIRE);
	if (end > t->max_nodes)
		end = t->max_nodes;
	uint32_t i = from;
	while (i < end && __atomic_load_n(&t->nodes[i].ready, __ATOMIC_ACQUIRE))
		i++;
	return i;
}

void stacktab_after_fork(struct stacktab *t)
{
	uint32_t end = t->next_id < t->max_nodes ? t->next_id : t->max_nodes;
	for (uint32_t i = 1; i < end; i++)
		if (!t->nodes[i].ready)
			t->nodes[i].ready = 1; /* orphan: never published */
	t->written = 1; /* the child's file needs every node again */
}

/*
 * nodepack.c - the call-stack table's nodes, coded small.
 *
 * The agent writes nodes as fixed 16-byte structs (an address, the parent's
 * id, padding): the cheapest thing to fill while the program runs.  A deep
 * recording is mostly nodes: W1 (allocations from many call sites at
 * depths 10 to 60, 16 threads) has 45k of them, 723 KB before zstd, 119 KB
 * after it at level 9, 143 KB of its 143 KB file, and compressing them
 * was most of rhea record's work after the program had exited (46-61 ms of
 * a 0.4 s run).
 *
 * What the structs hide is that a node's parent is almost always the node
 * made just before it (a new stack's frames are interned leaf-last, one
 * after the other), and that its address is one of a few hundred return
 * addresses the program's code has (252 on W1).  So the entry gives:
 *
 *  - the distinct addresses once, in the order they first occur, each a
 *    zigzag varint of its difference to the one before (code of one
 *    module lies close together);
 *  - each node's parent as a zigzag varint of id - parent (1, one byte,
 *    almost always);
 *  - each node's address as its index among the distinct ones.
 *
 * Parents before indices, in columns: zstd finds more in each alone (W1:
 * 34.4 KB at level 3 against 36.8 KB interleaved).  Measured on W1's nodes:
 * 723 KB -> 95 KB before zstd, 34 KB after it at level 3 (against 119 KB
 * for the structs at level 9), in a millisecond or two rather than 50.
 * Context models (the index among the addresses seen after the parent's
 * address) gave nothing more through zstd.
 */
#include "nodepack.h"

#include <string.h>

#include "varint.h"

#ifndef RHEA_AGENT
#include <stdlib.h>
#endif

/* addr -> index+1 (0: empty), open addressing in w */
static uint32_t *addrmap_slot(struct nodepack_work *w, uint64_t addr)
{
	uint32_t mask = w->map_size - 1;
	uint32_t i = (uint32_t)((addr * 0x9e3779b97f4a7c15ull) >> 40) & mask;
	while (w->vals[i] && w->keys[i] != addr)
		i = (i + 1) & mask;
	w->keys[i] = addr;
	return &w->vals[i];
}

size_t nodepack_encode_in(uint32_t first_id, const struct rhea_node *n, uint32_t count, void *out, size_t cap,
			  struct nodepack_work *w)
{
	struct rhea_nodes2 *h = out;
	if (cap < sizeof(*h) || w->map_size < 2 * (uint64_t)count || (w->map_size & (w->map_size - 1)))
		return 0;
	memset(w->vals, 0, (size_t)w->map_size * sizeof(*w->vals));

	/* the distinct addresses, in the order they first occur */
	struct cursor c = {(uint8_t *)(h + 1), (uint8_t *)out + cap, 0, 0};
	uint32_t naddrs = 0;
	uint64_t prev = 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t *v = addrmap_slot(w, n[i].addr);
		if (!*v) {
			*v = ++naddrs;
			put(&c, zz((int64_t)(n[i].addr - prev)));
			prev = n[i].addr;
		}
		w->index[i] = *v - 1;
	}
	for (uint32_t i = 0; i < count; i++)
		put(&c, zz((int64_t)(first_id + i) - (int64_t)n[i].parent));
	for (uint32_t i = 0; i < count; i++)
		put(&c, w->index[i]);
	size_t total = (sizeof(*h) + c.len + 7) & ~(size_t)7;
	if (c.err || total > cap || total > UINT32_MAX)
		return 0;
	memset((uint8_t *)out + sizeof(*h) + c.len, 0, total - sizeof(*h) - c.len);
	*h = (struct rhea_nodes2){{RHEA_E_NODES2, 0, (uint32_t)total}, first_id, count, naddrs, (uint32_t)c.len};
	return total;
}

#ifndef RHEA_AGENT
size_t nodepack_encode(uint32_t first_id, const struct rhea_node *n, uint32_t count, void *out, size_t cap)
{
	uint32_t size = 16;
	while (size < 2 * (uint64_t)count && size < (1u << 31))
		size *= 2;
	struct nodepack_work w = {malloc(size * sizeof(uint64_t)), malloc(size * sizeof(uint32_t)),
				  malloc((count ? count : 1) * sizeof(uint32_t)), size};
	size_t len = w.keys && w.vals && w.index ? nodepack_encode_in(first_id, n, count, out, cap, &w) : 0;
	free(w.keys);
	free(w.vals);
	free(w.index);
	return len;
}

int nodepack_decode(const struct rhea_entry *e, struct rhea_node *out)
{
	const struct rhea_nodes2 *h = (const void *)e;
	if (e->kind != RHEA_E_NODES2 || e->size < sizeof(*h) || h->coded_len > e->size - sizeof(*h) ||
	    h->naddrs > h->count)
		return -1;
	uint64_t *addrs = malloc((h->naddrs ? h->naddrs : 1) * sizeof(uint64_t));
	if (!addrs)
		return -1;
	const uint8_t *p = (const uint8_t *)(h + 1);
	struct rcursor c = {p, p + h->coded_len, 0};
	uint64_t a = 0;
	for (uint32_t i = 0; i < h->naddrs; i++)
		addrs[i] = a += (uint64_t)unzz(get(&c));
	for (uint32_t i = 0; i < h->count && !c.bad; i++) {
		int64_t self = (int64_t)h->first_id + i, d = unzz(get(&c));
		if (d > self || d < self - (int64_t)UINT32_MAX)
			c.bad = 1;
		out[i] = (struct rhea_node){0, (uint32_t)(self - d), 0};
	}
	for (uint32_t i = 0; i < h->count && !c.bad; i++) {
		uint64_t k = get(&c);
		if (k >= h->naddrs)
			c.bad = 1;
		else
			out[i].addr = addrs[k];
	}
	free(addrs);
	return c.bad || c.p != c.end ? -1 : 0;
}
#endif

/*
 * buf.c - record buffers (DESIGN.md 1.3, "concurrent writers").
 *
 * One locked buffer would serialise every thread of the program; a buffer
 * per thread wastes memory in programs with thousands of threads.  As in
 * btrace, one pool of chunks is filled through a few shards: a writer picks
 * the shard of its thread id and only ever *try*-locks it; if that shard is
 * busy it tries the next one, and when every shard is busy (or no chunk is
 * free because the writer thread is behind) the entry is dropped and
 * counted.  Nobody waits, so this is safe in a signal handler that
 * interrupted a thread holding a shard: the handler just uses another shard
 * or drops.  A shard lock is held only for a memcpy of one entry.
 *
 * A chunk goes FREE -> FILLING (owned by a shard) -> FULL (sealed, numbered)
 * -> WRITING (the drainer) -> FREE.  Entries of one thread can land in
 * different chunks out of order; the reader sorts each thread's samples by
 * time, so order across chunks does not matter.
 *
 * When half the pool is full the emitter wakes the writer thread with a
 * futex (a syscall, async-signal-safe) instead of waiting for its next
 * period.
 */
#include "buf.h"
#include "salvage.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct buf_chunk) == sizeof(struct rhea_salvage_chunk) &&
		       __builtin_offsetof(struct buf_chunk, used) == __builtin_offsetof(struct rhea_salvage_chunk, used) &&
		       __builtin_offsetof(struct buf_chunk, data) == __builtin_offsetof(struct rhea_salvage_chunk, data),
	       "a chunk is what rhea record salvages");
_Static_assert((int)BUF_DRAINED == (int)RHEA_SALVAGE_CHUNK_DRAINED &&
		       (int)BUF_WRITING == (int)RHEA_SALVAGE_CHUNK_WRITING &&
		       (int)BUF_FULL == (int)RHEA_SALVAGE_CHUNK_FULL && (int)BUF_FILLING == (int)RHEA_SALVAGE_CHUNK_FILLING,
	       "chunk states are what rhea record salvages");

static size_t meta_bytes(uint32_t nchunks)
{
	return ((size_t)nchunks * sizeof(struct buf_chunk) + 4095) & ~(size_t)4095;
}

size_t buf_bytes(uint32_t nchunks, uint32_t chunk_size)
{
	return meta_bytes(nchunks) + (size_t)nchunks * chunk_size;
}

int buf_init_at(struct buf *b, void *mem, uint32_t nchunks, uint32_t chunk_size, uint32_t nshards)
{
	memset(b, 0, sizeof(*b));
	if (nchunks < 2 || chunk_size < 4096 || (chunk_size & 7) || nshards < 1 || !mem)
		return -EINVAL;
	if (nshards > BUF_MAX_SHARDS)
		nshards = BUF_MAX_SHARDS;
	char *m = mem;
	size_t meta = meta_bytes(nchunks);
	b->chunks = (struct buf_chunk *)m;
	for (uint32_t i = 0; i < nchunks; i++)
		b->chunks[i].data = m + meta + (size_t)i * chunk_size;
	b->nchunks = nchunks;
	b->chunk_size = chunk_size;
	b->nshards = nshards;
	return 0;
}

int buf_init(struct buf *b, uint32_t nchunks, uint32_t chunk_size, uint32_t nshards)
{
	size_t bytes = buf_bytes(nchunks, chunk_size);
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		memset(b, 0, sizeof(*b));
		return -errno;
	}
	int r = buf_init_at(b, m, nchunks, chunk_size, nshards);
	if (r < 0)
		munmap(m, bytes);
	else
		b->owned = 1;
	return r;
}

void buf_destroy(struct buf *b)
{
	if (!b->chunks)
		return;
	if (b->owned)
		munmap(b->chunks, buf_bytes(b->nchunks, b->chunk_size));
	b->chunks = NULL;
}

/*
 * The free chunk with the lowest index: the chunks in use stay the few that
 * were used before, already faulted in and maybe cached.  (Taking the next
 * one round the pool touched every page of it in turn: on the server-like
 * bench W2 the page faults of fresh chunk memory were a quarter of the cost
 * of emitting, and a long recording's RSS grew to the whole pool.)
 */
static struct buf_chunk *grab_free(struct buf *b)
{
	for (uint32_t i = 0; i < b->nchunks; i++) {
		uint32_t expected = BUF_FREE;
		if (__atomic_load_n(&b->chunks[i].state, __ATOMIC_RELAXED) == BUF_FREE &&
		    __atomic_compare_exchange_n(&b->chunks[i].state, &expected, BUF_FILLING, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			b->chunks[i].used = 0;
			return &b->chunks[i];
		}
	}
	return NULL;
}

static void seal(struct buf *b, struct buf_chunk *c)
{
	c->seq = __atomic_fetch_add(&b->seq, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->state, BUF_FULL, __ATOMIC_RELEASE);
	uint32_t nfull = __atomic_add_fetch(&b->nfull, 1, __ATOMIC_RELAXED);
	if (nfull == b->nchunks / 2)
		buf_wake_writer(b);
}

void buf_wake_writer(struct buf *b)
{
	__atomic_add_fetch(&b->wake, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &b->wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline int try_lock(uint32_t *l)
{
	return __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) == 0;
}

static inline void unlock(uint32_t *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

int buf_emit(struct buf *b, uint32_t tid, const void *entry, size_t len)
{
	if (len > b->chunk_size || !b->chunks)
		goto drop;
	for (uint32_t k = 0; k < b->nshards; k++) {
		struct buf_shard *s = &b->shards[(tid + k) % b->nshards];
		if (!try_lock(&s->lock))
			continue;
		struct buf_chunk *c = s->cur;
		if (c && c->used + len > b->chunk_size) {
			seal(b, c);
			c = s->cur = NULL;
		}
		if (!c)
			c = s->cur = grab_free(b);
		if (!c) {
			unlock(&s->lock);
			goto drop;
		}
		memcpy(c->data + c->used, entry, len);
		/* after the bytes: what a SIGKILL leaves is whole entries */
		__atomic_store_n(&c->used, c->used + (uint32_t)len, __ATOMIC_RELEASE);
		unlock(&s->lock);
		__atomic_fetch_add(&b->emitted, 1, __ATOMIC_RELAXED);
		return 0;
	}
drop:
	__atomic_fetch_add(&b->dropped, 1, __ATOMIC_RELAXED);
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void buf_seal_all(struct buf *b, uint64_t spin_ns)
{
	if (!b->chunks)
		return;
	uint64_t deadline = now_ns() + spin_ns;
	for (uint32_t i = 0; i < b->nshards; i++) {
		struct buf_shard *s = &b->shards[i];
		while (!try_lock(&s->lock)) {
			if (now_ns() > deadline)
				goto next;
		}
		if (s->cur && s->cur->used > 0) {
			seal(b, s->cur);
			s->cur = NULL;
		}
		unlock(&s->lock);
	next:;
	}
}

int buf_drain(struct buf *b, int (*fn)(void *arg, const void *data, size_t len), void *arg)
{
	int ret = 0;
	if (!b->chunks)
		return 0;
	for (;;) {
		/* The lowest sequence number first: chunks are few, scan them. */
		struct buf_chunk *best = NULL;
		for (uint32_t i = 0; i < b->nchunks; i++) {
			struct buf_chunk *c = &b->chunks[i];
			if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == BUF_FULL &&
			    (!best || c->seq < best->seq))
				best = c;
		}
		if (!best)
			break;
		__atomic_store_n(&best->state, BUF_WRITING, __ATOMIC_RELAXED);
		if (ret == 0)
			ret = fn(arg, best->data, best->used);
		__atomic_sub_fetch(&b->nfull, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&best->state, b->keep_drained ? BUF_DRAINED : BUF_FREE, __ATOMIC_RELEASE);
	}
	return ret;
}

void buf_release_drained(struct buf *b)
{
	for (uint32_t i = 0; b->chunks && i < b->nchunks; i++)
		if (__atomic_load_n(&b->chunks[i].state, __ATOMIC_ACQUIRE) == BUF_DRAINED)
			__atomic_store_n(&b->chunks[i].state, BUF_FREE, __ATOMIC_RELEASE);
}

void buf_reset(struct buf *b)
{
	if (!b->chunks)
		return;
	for (uint32_t i = 0; i < b->nchunks; i++) {
		b->chunks[i].state = BUF_FREE;
		b->chunks[i].used = 0;
	}
	for (uint32_t i = 0; i < b->nshards; i++) {
		b->shards[i].lock = 0;
		b->shards[i].cur = NULL;
	}
	b->nfull = 0;
	b->dropped = 0;
	b->emitted = 0;
}

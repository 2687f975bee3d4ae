/*
 * compact.c - rewrite a finished recording smaller.
 *
 * The agent writes for safety: a chunk every 100 ms, compressed fast (zstd
 * level 3), each thread's samples of a flush in their own PACKED2 entry
 * whose coding starts afresh, counters exact.  Once the recording has its
 * END nothing writes to it any more, and rhea record rewrites it for size:
 *
 *  - each thread's samples in one run of PACKED4 entries of up to
 *    ENTRY_SAMPLES samples, in the order of their ends, so that the coding
 *    of one sample learns from all before it (on W2, 11.6 bytes of file a
 *    sample -> 10.0 with exact counters, as PACKED2 through zstd);
 *  - the CPU time in steps of at most 1/16 of the difference expected
 *    (core/packed.h: it never goes down, is never above the truth, by less
 *    than a step below it, and every entry's last sample is exact):
 *    10.0 -> 9.35 bytes a sample on W2.  getrusage itself knows it only to
 *    a tick.  The bytes allocated likewise (PACKED4 on W2: 6.5 -> 5.5
 *    bytes a sample; their sizes vary from job to job, which no guess
 *    knows; each thread's total stays exact, as the sites' counts and
 *    bytes), but exact where a thread allocates blocks of one size
 *    (PACKED4's near-exact, core/packed.c: 0.6% on W2), as the tests'
 *    4000 x 64 B.  The other counters stay exact: with the allocation counts
 *    in steps too W2 came 4% smaller again, but a slice's allocation
 *    count is a number users and the tests hold rhea to (4000
 *    allocations, not 3993);
 *  - range coded (PACKED4) rather than as varints through zstd, with the
 *    times on the capture grid: about 9.3 -> 6.7 bytes a sample on W2 (the
 *    whole file 10.2 -> 7.2);
 *  - the allocation sites' and the short calls' periodic snapshots
 *    reduced to the last one per site or call (what a reader keeps);
 *  - the stack nodes gathered and coded small (NODES2, core/nodepack.c):
 *    most of a deep recording, and most of this rewrite's time when zstd
 *    had them as structs (W1: 117 -> 51 KB, 50 -> 17 ms);
 *  - zstd at a high level over large chunks.
 *
 * The rest (modules, threads, metadata, statistics, the ends) is copied as
 * it was, in its order, the ends last.  The new file is written beside the
 * old one and renamed over it only after it has been read back with as
 * many samples and captures, and the same nodes: a failure at any point
 * (full disk, a bug) leaves the recording as it was.
 *
 * Memory is bounded whatever the recording's size: at most a window of
 * samples (COMPACT_WINDOW, 152 bytes each) is held.  When the samples read
 * so far pass it, the thread holding the most is encoded at once into
 * PACKED4 entries that wait in a spill file beside the recording (they must
 * follow the stack nodes, which the rest of the file may still bring), and
 * its window starts afresh.  A recording that fits the window (about 5 MB
 * of the agent's file on W2) is compacted in one go, each thread's samples in the
 * fewest entries; a larger one gets a thread's samples in several runs of
 * entries, each in the order of their ends (a reader sorts them).
 */
#include "compact.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli.h"
#include "nodepack.h"
#include "packed.h"
#include "recording.h"
#include "rfile.h"
#include "symbolize.h"
#include "vec.h"

#define CHUNK_RAW (4u << 20)   /* payload of the new chunks, at most */
#define ENTRY_SAMPLES 65536u   /* samples in one PACKED4 entry, at most */
#define SITES_PER_ENTRY 4096u
#define NODES_PER_ENTRY 65536u /* (at most 1.3 MB coded: nodepack_bound) */
#define PERF_MAP_KEY "perf_map"     /* (the NUL included: a key of its own) */
#define PERF_MAP_MAX (CHUNK_RAW / 2) /* the lines kept, at most */
#define CODE_NAMES_KEY "code_names"   /* (as PERF_MAP_KEY) */

struct tsamples {
	uint32_t tid;
	struct rhea_sample *s;
	size_t n, cap;
	uint64_t *starts; /* of the tid's lives (THREAD START), as read */
	size_t nstarts, starts_cap;
};

/* Samples and the captures they hold (a merged sample holds 1 + merged);
 * stack nodes, and a sum of a hash of each (id, address, parent). */
struct tally {
	uint64_t samples, captures;
	uint64_t nodes, nodes_sum;
};

static void tally_node(struct tally *t, uint32_t id, const struct rhea_node *n)
{
	uint64_t h = (n->addr ^ ((uint64_t)n->parent << 32 | id)) * 0x9e3779b97f4a7c15ull;
	t->nodes++;
	t->nodes_sum += h ^ h >> 29;
}

static int tally_sample(void *arg, const struct rhea_sample *s)
{
	struct tally *t = arg;
	t->samples++;
	t->captures += 1u + s->merged;
	return 0;
}

struct compactor {
	struct tsamples *threads;
	size_t nthreads, threads_cap, last;
	size_t held, window; /* samples held in the threads' windows, at most */
	int spill_fd;        /* runs of entries encoded early (-1: none yet) */
	const char *dir_of;  /* the recording: its directory takes the spill */
	uint64_t spilled;    /* bytes in the spill */
	struct tally read; /* of the old file */
	struct rhea_site *sites;
	size_t nsites, sites_cap;
	struct rhea_short *shorts;
	size_t nshorts, shorts_cap;
	struct rhea_node *nodes; /* the call-stack table, by id */
	uint8_t *nodes_known;
	size_t nodes_cap;
	uint8_t *other, *ends; /* entries copied as they were */
	size_t other_len, other_cap, ends_len, ends_cap;
	int oom;
	/* the new file */
	struct rfile_writer w;
	uint8_t *chunk;
	size_t chunk_len;
	int werr;
	int to_spill; /* full chunks go to the spill (while reading) */
	uint64_t period_us; /* the capture interval: the samples' grid */
	int has_perf_map;   /* the old file keeps one already */
	int has_code_names; /* the same for code_names */
};

static struct tsamples *thread_of(struct compactor *c, uint32_t tid)
{
	if (c->last < c->nthreads && c->threads[c->last].tid == tid)
		return &c->threads[c->last];
	for (size_t i = 0; i < c->nthreads; i++)
		if (c->threads[i].tid == tid)
			return &c->threads[c->last = i];
	if (vec_grow((void **)&c->threads, &c->threads_cap, c->nthreads + 1, sizeof(*c->threads)))
		return NULL;
	struct tsamples *t = &c->threads[c->last = c->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

static int spill_largest(struct compactor *c);

/* -1, having noted that memory ran out (read_old says so). */
static int oom(struct compactor *c)
{
	c->oom = 1;
	return -1;
}

static int take_sample(void *arg, const struct rhea_sample *s)
{
	struct compactor *c = arg;
	if (c->held >= c->window && spill_largest(c) != 0)
		return -1;
	struct tsamples *t = thread_of(c, s->tid);
	if (!t || vec_grow((void **)&t->s, &t->cap, t->n + 1, sizeof(*t->s)))
		return oom(c);
	t->s[t->n] = *s;
	t->n++;
	c->held++;
	return tally_sample(&c->read, s);
}

/* Entry e, as it is, at the end of buf. */
static int append(struct compactor *c, uint8_t **buf, size_t *len, size_t *cap, const struct rhea_entry *e)
{
	if (vec_grow((void **)buf, cap, *len + e->size, 1))
		return oom(c);
	memcpy(*buf + *len, e, e->size);
	*len += e->size;
	return 0;
}

/* Room for nodes first_id .. first_id + count - 1 in the table: where
 * they go, or NULL (-1 from the caller: malformed, out of memory). */
static struct rhea_node *nodes_room(struct compactor *c, uint32_t first_id, uint32_t count)
{
	uint64_t end = (uint64_t)first_id + count;
	if (end > (1u << 31))
		return NULL;
	size_t cap = c->nodes_cap, cap2 = c->nodes_cap;
	if (vec_grow((void **)&c->nodes, &cap, end, sizeof(*c->nodes)) ||
	    vec_grow((void **)&c->nodes_known, &cap2, end, 1)) {
		oom(c);
		return NULL;
	}
	if (cap2 > c->nodes_cap)
		memset(c->nodes_known + c->nodes_cap, 0, cap2 - c->nodes_cap);
	c->nodes_cap = cap2;
	return c->nodes + first_id;
}

/* Snapshots of cumulative counts (sites, short calls), kept to be reduced
 * to the last of each as the new file is written. */
static int take_snapshots(struct compactor *c, void **v, size_t *n, size_t *cap, const void *from, uint32_t count,
			  size_t elem)
{
	if (!count)
		return 0;
	if (vec_grow(v, cap, *n + count, elem))
		return oom(c);
	memcpy((char *)*v + *n * elem, from, (size_t)count * elem);
	*n += count;
	return 0;
}

/* One entry of the old file into the compactor.  0, or -1 (malformed,
 * out of memory). */
static int take_entry(void *arg, const struct rhea_entry *e)
{
	struct compactor *c = arg;
	int ok = rfile_entry_check(e);
	if (ok < 0)
		return -1;
	if (ok == 0)
		switch (e->kind) {
		case RHEA_E_SAMPLE:
			return take_sample(c, (const void *)e);
		case RHEA_E_PACKED:
		case RHEA_E_PACKED2:
		case RHEA_E_PACKED3:
		case RHEA_E_PACKED4:
			return packed_decode(e, take_sample, c);
		case RHEA_E_SITES: {
			const struct rhea_sites *h = (const void *)e;
			if (c->nsites + h->count > c->sites_cap && c->nsites >= 65536) /* snapshots pile up */
				c->nsites = recording_reduce_sites(c->sites, c->nsites);
			return take_snapshots(c, (void **)&c->sites, &c->nsites, &c->sites_cap, h + 1, h->count,
					      sizeof(*c->sites));
		}
		case RHEA_E_SHORTS: {
			const struct rhea_shorts *h = (const void *)e;
			if (c->nshorts + h->count > c->shorts_cap && c->nshorts >= 4096)
				c->nshorts = recording_reduce_shorts(c->shorts, c->nshorts);
			return take_snapshots(c, (void **)&c->shorts, &c->nshorts, &c->shorts_cap, h + 1, h->count,
					      sizeof(*c->shorts));
		}
		case RHEA_E_NODES:
		case RHEA_E_NODES2: {
			const struct rhea_nodes *h = (const void *)e; /* (the same first fields) */
			struct rhea_node *to = nodes_room(c, h->first_id, h->count);
			if (!to)
				return -1;
			if (e->kind == RHEA_E_NODES)
				memcpy(to, h + 1, (size_t)h->count * sizeof(*to));
			else if (nodepack_decode(e, to) != 0)
				return -1;
			memset(c->nodes_known + h->first_id, 1, h->count);
			return 0;
		}
		case RHEA_E_THREAD: {
			const struct rhea_thread *x = (const void *)e;
			struct tsamples *t = x->h.flags == RHEA_T_START ? thread_of(c, x->tid) : NULL;
			if (t) {
				if (vec_grow((void **)&t->starts, &t->starts_cap, t->nstarts + 1, sizeof(*t->starts)))
					return oom(c);
				t->starts[t->nstarts++] = x->time_ns;
			}
			break;
		}
		case RHEA_E_END:
			return append(c, &c->ends, &c->ends_len, &c->ends_cap, e);
		case RHEA_E_META:
			if (e->size >= sizeof(struct rhea_meta) + sizeof(PERF_MAP_KEY) &&
			    memcmp(e + 1, PERF_MAP_KEY, sizeof(PERF_MAP_KEY)) == 0)
				c->has_perf_map = 1;
			if (e->size >= sizeof(struct rhea_meta) + sizeof(CODE_NAMES_KEY) &&
			    memcmp(e + 1, CODE_NAMES_KEY, sizeof(CODE_NAMES_KEY)) == 0)
				c->has_code_names = 1;
			break;
		}
	return append(c, &c->other, &c->other_len, &c->other_cap, e);
}

/* ---- writing ------------------------------------------------------------ */

/*
 * Entries are gathered in c->chunk.  While the old file is read (c->to_spill)
 * a full chunk goes to the spill file as a block (its length, then its
 * entries); afterwards, into the new file as a chunk.
 */
static int spill_write(struct compactor *c, const void *p, size_t len)
{
	if (c->spill_fd < 0) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s", c->dir_of);
		c->spill_fd = open(dirname(dir), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (c->spill_fd < 0) { /* (a file system without O_TMPFILE) */
			char tmp[PATH_MAX + 32];
			snprintf(tmp, sizeof(tmp), "%s.spill-XXXXXX", c->dir_of);
			c->spill_fd = mkostemp(tmp, O_CLOEXEC);
			if (c->spill_fd >= 0)
				unlink(tmp);
		}
		if (c->spill_fd < 0)
			return -errno;
	}
	uint32_t n = (uint32_t)len;
	const struct iovec iov[2] = {{&n, sizeof(n)}, {(void *)p, len}};
	ssize_t w = writev(c->spill_fd, iov, 2);
	if (w < 0)
		return -errno;
	if ((size_t)w != sizeof(n) + len)
		return -ENOSPC;
	c->spilled += (uint64_t)w;
	return 0;
}

static void chunk_flush(struct compactor *c)
{
	if (c->chunk_len && !c->werr)
		c->werr = c->to_spill ? spill_write(c, c->chunk, c->chunk_len)
				      : rfile_write_chunk(&c->w, c->chunk, c->chunk_len, 1);
	c->chunk_len = 0;
}

/* Room for n more bytes in the chunk (flushing it first if need be). */
static uint8_t *chunk_room(struct compactor *c, size_t n)
{
	if (n > CHUNK_RAW)
		return NULL;
	if (c->chunk_len + n > CHUNK_RAW)
		chunk_flush(c);
	return c->chunk + c->chunk_len;
}

/* Copied entries (a run of whole entries) into chunks. */
static void put_entries(struct compactor *c, const uint8_t *p, size_t len)
{
	size_t off = 0;
	const struct rhea_entry *e;
	while (!c->werr && rfile_next_entry(p, len, &off, &e) == 1) {
		uint8_t *to = chunk_room(c, e->size);
		if (!to) {
			c->werr = -EFBIG;
			return;
		}
		memcpy(to, e, e->size);
		c->chunk_len += e->size;
	}
}

/* The spill's blocks into the new file's chunks, in the order written. */
static void put_spill(struct compactor *c)
{
	if (c->spill_fd < 0 || c->werr)
		return;
	uint8_t *block = malloc(CHUNK_RAW);
	if (!block) {
		c->werr = -ENOMEM;
		return;
	}
	off_t at = 0;
	while (!c->werr && (uint64_t)at < c->spilled) {
		uint32_t n;
		if (pread(c->spill_fd, &n, sizeof(n), at) != (ssize_t)sizeof(n) || n > CHUNK_RAW ||
		    pread(c->spill_fd, block, n, at + (off_t)sizeof(n)) != (ssize_t)n) {
			c->werr = -EIO;
			break;
		}
		put_entries(c, block, n);
		at += (off_t)sizeof(n) + n;
	}
	free(block);
}

/* By end, then begin, then the order they came in (their place in the
 * array): pointers are sorted, the samples stay where they are. */
static int cmp_end(const void *a, const void *b)
{
	const struct rhea_sample *x = *(const struct rhea_sample *const *)a, *y = *(const struct rhea_sample *const *)b;
	if (x->end_ns != y->end_ns)
		return x->end_ns < y->end_ns ? -1 : 1;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns ? -1 : 1;
	return (x > y) - (x < y);
}

/*
 * Whether sample b, after a in the order of ends, begins another life of
 * its tid (a new thread that reused it): a START of the tid between their
 * begins (where a reader splits the lives, recording.c), or counters that
 * went down (its own, from zero: a START the window did not see yet).  An
 * entry ends there, so that the life's last sample, an entry's last, keeps
 * its counters exact (the thread's totals, which tests and users compare).
 */
static int new_life(const struct tsamples *t, const struct rhea_sample *a, const struct rhea_sample *b)
{
	if (b->c_end.cpu_ns < a->c_end.cpu_ns || b->c_end.alloc_count < a->c_end.alloc_count ||
	    b->c_end.alloc_bytes < a->c_end.alloc_bytes)
		return 1;
	size_t lo = 0, hi = t->nstarts; /* the first START after a's begin (starts sorted) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->starts[mid] <= a->begin_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nstarts && t->starts[lo] <= b->begin_ns;
}

/* A thread's samples held, in the order of their ends, as PACKED4 entries
 * (one life of its tid to an entry); its window is then empty. */
static void put_samples(struct compactor *c, struct tsamples *t)
{
	const struct rhea_sample **ptrs = malloc((t->n ? t->n : 1) * sizeof(*ptrs));
	if (!ptrs) {
		c->werr = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < t->n; i++)
		ptrs[i] = &t->s[i];
	vec_sort(ptrs, t->n, sizeof(*ptrs), cmp_end);
	vec_sort(t->starts, t->nstarts, sizeof(*t->starts), vec_cmp_u64);
	size_t done = 0;
	while (done < t->n && !c->werr) {
		uint32_t n = t->n - done > ENTRY_SAMPLES ? ENTRY_SAMPLES : (uint32_t)(t->n - done);
		for (uint32_t i = 1; i < n; i++)
			if (new_life(t, ptrs[done + i - 1], ptrs[done + i])) {
				n = i;
				break;
			}
		size_t len = packed_encode_rc(ptrs + done, n, COMPACT_SHIFT, COMPACT_STEPPED, c->period_us,
					      c->chunk + c->chunk_len, CHUNK_RAW - c->chunk_len);
		if (!len && c->chunk_len) { /* the chunk is full: the next one */
			chunk_flush(c);
			continue;
		}
		while (!len && n > 1) { /* does not fit a chunk: fewer */
			n /= 2;
			len = packed_encode_rc(ptrs + done, n, COMPACT_SHIFT, COMPACT_STEPPED, c->period_us, c->chunk,
					       CHUNK_RAW);
		}
		if (!len) {
			c->werr = -EFBIG;
			break;
		}
		c->chunk_len += len;
		done += n;
	}
	free(ptrs);
	c->held -= t->n;
	t->n = 0;
}

/* The window is full: the thread holding the most samples goes to the
 * spill.  0, or -1 (c->werr says why). */
static int spill_largest(struct compactor *c)
{
	struct tsamples *big = NULL;
	for (size_t i = 0; i < c->nthreads; i++)
		if (!big || c->threads[i].n > big->n)
			big = &c->threads[i];
	if (!c->chunk && !(c->chunk = malloc(CHUNK_RAW)))
		c->werr = -ENOMEM;
	if (big && !c->werr) {
		put_samples(c, big);
		free(big->s); /* (its capacity would count twice) */
		big->s = NULL;
		big->cap = 0;
	}
	return c->werr ? -1 : 0;
}

/* The call-stack table as NODES2 entries, runs of known ids of up to
 * NODES_PER_ENTRY nodes each; what they hold goes into *t. */
static void put_nodes(struct compactor *c, struct tally *t)
{
	for (size_t id = 0; id < c->nodes_cap && !c->werr;) {
		if (!c->nodes_known[id]) {
			id++;
			continue;
		}
		uint32_t n = 0;
		while (id + n < c->nodes_cap && c->nodes_known[id + n] && n < NODES_PER_ENTRY)
			n++;
		uint8_t *to = chunk_room(c, nodepack_bound(n));
		size_t len = to ? nodepack_encode((uint32_t)id, c->nodes + id, n, to, nodepack_bound(n)) : 0;
		if (!len) {
			c->werr = -ENOMEM;
			return;
		}
		c->chunk_len += len;
		for (uint32_t i = 0; i < n; i++)
			tally_node(t, (uint32_t)id + i, &c->nodes[id + i]);
		id += n;
	}
}

/* The snapshots v[0..o) (the last of each site or call, as a reader keeps
 * them) in entries of kind: a struct rhea_sites or rhea_shorts header (the
 * same fields), then the records. */
static void put_snapshots(struct compactor *c, uint16_t kind, const void *v, size_t o, size_t elem)
{
	_Static_assert(sizeof(struct rhea_sites) == sizeof(struct rhea_shorts), "one header layout");
	for (size_t i = 0; i < o && !c->werr; i += SITES_PER_ENTRY) {
		uint32_t n = o - i > SITES_PER_ENTRY ? SITES_PER_ENTRY : (uint32_t)(o - i);
		size_t size = sizeof(struct rhea_sites) + (size_t)n * elem;
		uint8_t *to = chunk_room(c, size); /* (128 KB at most: it fits) */
		struct rhea_sites h = {{kind, 0, (uint32_t)size}, n, 0};
		memcpy(to, &h, sizeof(h));
		memcpy(to + sizeof(h), (const char *)v + i * elem, (size_t)n * elem);
		c->chunk_len += size;
	}
}

/* zstd's level for payloads this large: one that keeps the end of a run
 * short.  Measured here on W2's recordings: 30 KB of payload, level 19
 * 4 ms of CPU, level 9 1.5 ms and 1.7% larger; 100 KB, 17 ms against 5
 * (3% larger); 700 KB, 150 ms against 40 (4%); level 3 27 ms.  Small
 * recordings used level 19 until a build showed what it costs: make -j2
 * of 24 files, 79 recordings of 1-25 KB, 300 ms of compaction at 19,
 * 145 ms at 9, for 1.7% more bytes (7.7 KB in all). */
static int level_for(uint64_t raw)
{
	return raw <= (16u << 20) ? 9 : 3;
}

/* ---- reading ------------------------------------------------------------ */

/* Every entry of r to fn, in order.  0; 1 when fn refused one or an entry
 * is malformed (in chunk *chunk); -1 when the file does not read (see
 * rfile_error). */
static int each_entry(struct rfile_reader *r, int (*fn)(void *arg, const struct rhea_entry *e), void *arg,
		      uint64_t *chunk)
{
	const void *p;
	size_t len;
	int st;
	while ((st = rfile_next_chunk(r, &p, &len)) == RFILE_OK) {
		size_t off = 0;
		const struct rhea_entry *e;
		int k;
		while ((k = rfile_next_entry(p, len, &off, &e)) == 1)
			if (fn(arg, e) != 0)
				break;
		if (k != 0) {
			*chunk = rfile_chunk_index(r) - 1;
			return 1;
		}
	}
	return st == RFILE_END_OF_FILE ? 0 : -1;
}

/* What the new file is read back for: its samples and captures, its END. */
struct readback {
	struct tally n;
	int has_end;
};

static int readback_entry(void *arg, const struct rhea_entry *e)
{
	struct readback *b = arg;
	int ok = rfile_entry_check(e);
	if (ok != 0)
		return ok < 0 ? -1 : 0;
	if (e->kind == RHEA_E_END)
		b->has_end = 1;
	else if (e->kind == RHEA_E_SAMPLE)
		tally_sample(&b->n, (const void *)e);
	else if (e->kind == RHEA_E_NODES2) {
		const struct rhea_nodes2 *h = (const void *)e;
		struct rhea_node *v = malloc((h->count ? h->count : 1) * sizeof(*v));
		int bad = !v || nodepack_decode(e, v) != 0;
		for (uint32_t i = 0; !bad && i < h->count; i++)
			tally_node(&b->n, h->first_id + i, &v[i]);
		free(v);
		return bad ? -1 : 0;
	}
	else if (rhea_kind_packed(e->kind))
		return packed_decode(e, tally_sample, &b->n);
	return 0;
}

/* Whether the file at path reads back whole with these samples and
 * captures, and its END. */
static int reads_back(const char *path, const struct tally *want)
{
	struct rfile_reader *r = NULL;
	struct readback b = {{0, 0, 0, 0}, 0};
	uint64_t chunk;
	int ok = rfile_open(path, &r) == RFILE_OK && each_entry(r, readback_entry, &b, &chunk) == 0;
	rfile_close(r);
	return ok && b.has_end && b.n.samples == want->samples && b.n.captures == want->captures &&
	       b.n.nodes == want->nodes && b.n.nodes_sum == want->nodes_sum;
}

/* ---- JIT code's names ---------------------------------------------------- */

/*
 * A JIT's perf map (/tmp/perf-PID.map: node --perf-basic-prof, the JVM's
 * perf-map agents, python3.12 -X perf) names code no module holds, but it
 * lives in /tmp: a recording read on another machine, or after a reboot or
 * a tmp cleaner, lost those names.  The lines that name code on the
 * recording's stacks are kept in it as META "perf_map" (the file's path
 * as "perf_map_source"), in the file's order, which decides between
 * overlapping lines (symbolize.h); node's maps hold tens of thousands of
 * lines, a recording's stacks touch a few hundred of them.  The process
 * has ended (or, rhea attach gone, still runs: any map of it is its own),
 * so the map is complete.
 */
static int put_meta(struct compactor *c, const char *key, const char *value, size_t vlen)
{
	size_t klen = strlen(key), size = rhea_meta_size(klen, vlen);
	if (vec_grow((void **)&c->other, &c->other_cap, c->other_len + size, 1))
		return oom(c);
	rhea_meta_put(c->other + c->other_len, key, klen, value, vlen);
	c->other_len += size;
	return 0;
}

/*
 * The perf map of a process in another mount namespace, that rhea attach
 * has just left (root: /proc/PID/root): in its own /tmp, under its pid
 * there (the recording's), ours, root's or its own user's (the owner of
 * /proc/PID).  1 with its path in buf, else 0.
 */
static int perf_map_in(const char *root, uint32_t pid, char *buf, size_t len)
{
	char proc[PATH_MAX];
	struct stat st, pst;
	size_t rl = strlen(root);
	if (rl < 5 || strcmp(root + rl - 5, "/root") != 0 || rl - 5 >= sizeof(proc) ||
	    snprintf(buf, len, "%s/tmp/perf-%" PRIu32 ".map", root, pid) >= (int)len)
		return 0;
	memcpy(proc, root, rl - 5);
	proc[rl - 5] = 0;
	return stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
	       (st.st_uid == geteuid() || st.st_uid == 0 || (stat(proc, &pst) == 0 && pst.st_uid == st.st_uid));
}

/* 0, or -1 out of memory; a map that cannot be read is left out.  root:
 * the process's own, when it has one (rhea attach of a container). */
static int keep_perf_map(struct compactor *c, const struct rhea_file_header *hdr, const char *root)
{
	const struct rhea_end *end = NULL;
	for (size_t o = 0; o + sizeof(*end) <= c->ends_len; o += ((const struct rhea_entry *)(c->ends + o))->size)
		end = (const void *)(c->ends + o);
	int alive = end && end->reason == RHEA_END_DETACH && hdr->pid &&
		    (kill((pid_t)hdr->pid, 0) == 0 || errno == EPERM);
	char path[PATH_MAX];
	if (c->has_perf_map || !(root ? perf_map_in(root, hdr->pid, path, sizeof(path))
				      : sym_perf_map_of(hdr->pid, hdr->start_realtime_ns, alive, path, sizeof(path))))
		return 0;
	size_t n = 0;
	uint64_t *addrs = malloc((c->nodes_cap ? c->nodes_cap : 1) * sizeof(*addrs));
	if (!addrs)
		return oom(c);
	for (size_t id = 0; id < c->nodes_cap; id++)
		if (c->nodes_known[id])
			addrs[n++] = c->nodes[id].addr;
	vec_sort(addrs, n, sizeof(*addrs), vec_cmp_u64);
	char *text;
	size_t len, kept;
	int e = sym_perf_map_keep(path, addrs, n, &text, &len, &kept);
	free(addrs);
	if (e == -ENOMEM)
		return oom(c);
	if (e == 0 && kept && len <= PERF_MAP_MAX &&
	    (put_meta(c, "perf_map_source", path, strlen(path)) || put_meta(c, PERF_MAP_KEY, text, len))) {
		free(text);
		return -1;
	}
	free(text);
	return 0;
}

/*
 * A process in another mount namespace (rhea attach of a container) maps
 * files of its own, which a report made later, or on another machine,
 * cannot read: its functions would be module+offset.  rhea attach
 * compacts right after it leaves the process, which still runs: its files
 * are read through its root (root: /proc/PID/root, sym_set_root), and the
 * functions on the recording's stacks and allocation sites that the
 * files here do not name (another file at that path, or none) but the
 * process's do (a stripped file: by their unwind entries) are kept as
 * META "code_names", lines of a perf map ("START SIZE name", hexadecimal;
 * a function without a size: its one address), which the report uses for
 * a module it cannot read (symbolize.c).  Names only: no source lines, no
 * inlined frames.
 */
struct code_name {
	uint64_t lo, size;
	const char *name; /* the rooted symbolizer's, or */
	int owned;        /* made here (a stripped file's) */
};

static int cmp_code_name(const void *a, const void *b)
{
	const struct code_name *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void add_modules(struct symbolizer *s, const struct compactor *c)
{
	for (size_t o = 0; o + sizeof(struct rhea_entry) <= c->other_len;) {
		const struct rhea_entry *e = (const void *)(c->other + o);
		if (e->size < sizeof(*e) || o + e->size > c->other_len)
			break;
		const struct rhea_module *m = (const void *)e;
		if (e->kind == RHEA_E_MODULE && e->size >= sizeof(*m) + m->path_len && m->path_len > 0 &&
		    m->build_id_len <= sizeof(m->build_id) && ((const char *)(m + 1))[m->path_len - 1] == 0) {
			struct sym_module sm = {(const char *)(m + 1), m->bias, m->lo, m->hi, m->build_id,
						m->build_id_len};
			sym_add_module(s, &sm);
		}
		o += e->size;
	}
}

/* 0, or -1 out of memory; names that cannot be had are left out. */
static int keep_code_names(struct compactor *c, const char *root)
{
	if (!root || c->has_code_names)
		return 0;
	struct symbolizer *here = sym_new(), *there = sym_new();
	struct code_name *v = NULL;
	size_t n = 0, cap = 0;
	char *text = NULL;
	size_t len = 0, tcap = 0;
	int rc = -1;
	if (!here || !there)
		goto out;
	if (sym_set_root(there, root) != 0) {
		rc = 0; /* the process is gone: nothing to read */
		goto out;
	}
	add_modules(here, c);
	add_modules(there, c);
	/* the stacks' addresses, then the allocation sites' (their callers) */
	for (size_t k = 0; k < c->nodes_cap + c->nsites; k++) {
		struct sym_frame f;
		uint64_t addr = k < c->nodes_cap ? (c->nodes_known[k] ? c->nodes[k].addr : 0) : c->sites[k - c->nodes_cap].pc;
		if (addr <= 1)
			continue;
		if (sym_file_in_use(here, addr))
			continue; /* the file here serves (a stripped one too) */
		sym_resolve(there, addr, &f);
		/* a stripped file: its functions by their unwind entries
		 * ("prog+0x1230", as the report names them beside the file) */
		char stripped[512];
		const char *name = f.resolved ? f.func : f.func_off_known && f.func_size
								 ? sym_frame_name(&f, stripped, sizeof(stripped))
								 : NULL;
		if (!name || strchr(name, '\n'))
			continue;
		if (vec_grow((void **)&v, &cap, n + 1, sizeof(*v)) || (!f.resolved && !(name = strdup(name))))
			goto out;
		v[n++] = f.func_size ? (struct code_name){f.func_lo, f.func_size, name, !f.resolved}
				     : (struct code_name){addr, 1, name, 0};
	}
	vec_sort(v, n, sizeof(*v), cmp_code_name);
	for (size_t i = 0; i < n; i++) {
		if (i && v[i].lo == v[i - 1].lo)
			continue; /* one function, several addresses */
		char line[64];
		int hl = snprintf(line, sizeof(line), "%" PRIx64 " %" PRIx64 " ", v[i].lo, v[i].size);
		size_t nl = strlen(v[i].name);
		if (vec_grow((void **)&text, &tcap, len + (size_t)hl + nl + 2, 1))
			goto out;
		memcpy(text + len, line, (size_t)hl);
		memcpy(text + len + hl, v[i].name, nl);
		len += (size_t)hl + nl;
		text[len++] = '\n';
		text[len] = 0;
	}
	rc = 0;
	if (len && len <= PERF_MAP_MAX &&
	    (put_meta(c, "code_names_source", root, strlen(root)) || put_meta(c, CODE_NAMES_KEY, text, len)))
		rc = -1;
out:
	for (size_t i = 0; i < n; i++)
		if (v[i].owned)
			free((char *)v[i].name);
	free(v);
	free(text);
	sym_free(here);
	sym_free(there);
	return rc == 0 ? 0 : oom(c);
}

/* ---- the whole ------------------------------------------------------------ */

static void say(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void compactor_free(struct compactor *c)
{
	for (size_t i = 0; i < c->nthreads; i++) {
		free(c->threads[i].s);
		free(c->threads[i].starts);
	}
	free(c->threads);
	free(c->sites);
	free(c->shorts);
	free(c->nodes);
	free(c->nodes_known);
	free(c->other);
	free(c->ends);
	free(c->chunk);
	if (c->spill_fd >= 0)
		close(c->spill_fd);
	rfile_writer_destroy(&c->w);
}

/* Read the old file whole into c.  COMPACT_DONE, COMPACT_SKIPPED (no END),
 * or COMPACT_FAILED with err set. */
static int read_old(struct compactor *c, struct rfile_reader *r, char *err, size_t errlen)
{
	uint64_t chunk;
	c->to_spill = 1;
	int st = each_entry(r, take_entry, c, &chunk);
	if (st == 0)
		chunk_flush(c); /* the spill's last block, if anything went there */
	c->to_spill = 0;
	if (c->werr)
		say(err, errlen, "cannot set samples aside in a file beside the recording: %s", strerror(-c->werr));
	else if (st > 0 && c->oom)
		say(err, errlen, "out of memory");
	else if (st > 0)
		say(err, errlen, "a malformed entry in chunk %llu", (unsigned long long)chunk);
	else if (st < 0)
		say(err, errlen, "%s", rfile_error(r));
	if (st != 0 || c->werr)
		return COMPACT_FAILED;
	return c->ends_len ? COMPACT_DONE : COMPACT_SKIPPED;
}

/* Write the new file on fd; *written: the nodes it holds.  0 or -errno. */
static int write_new(struct compactor *c, const struct rhea_file_header *hdr, int fd, struct tally *written)
{
	uint64_t nodes = 0;
	for (size_t i = 0; i < c->nodes_cap; i++)
		nodes += c->nodes_known[i];
	/* (what zstd gets: about 2 bytes a node on W1, 7 a sample on W2) */
	uint64_t raw = c->other_len + c->ends_len + c->nsites * sizeof(struct rhea_site) +
		       c->nshorts * sizeof(struct rhea_short) + c->read.samples * 16 +
		       nodes * 2;
	int e = rfile_writer_init(&c->w, fd, level_for(raw), CHUNK_RAW);
	if (e == 0)
		e = rfile_write_header(&c->w, hdr);
	if (!c->chunk)
		c->chunk = malloc(CHUNK_RAW);
	if (e || !c->chunk)
		return e ? e : -ENOMEM;
	c->chunk_len = 0;
	/* stack nodes, modules, threads... first: a sample's nodes come
	 * before it */
	put_nodes(c, written);
	put_entries(c, c->other, c->other_len);
	put_snapshots(c, RHEA_E_SITES, c->sites, recording_reduce_sites(c->sites, c->nsites), sizeof(*c->sites));
	put_snapshots(c, RHEA_E_SHORTS, c->shorts, recording_reduce_shorts(c->shorts, c->nshorts),
		      sizeof(*c->shorts));
	put_spill(c);
	for (size_t i = 0; i < c->nthreads && !c->werr; i++)
		put_samples(c, &c->threads[i]);
	put_entries(c, c->ends, c->ends_len);
	chunk_flush(c);
	return c->werr;
}

static int compact_at(const char *path, size_t window, const char *root, struct compact_result *res, char *err,
		      size_t errlen);

int compact_recording(const char *path, struct compact_result *res, char *err, size_t errlen)
{
	return compact_at(path, COMPACT_WINDOW, NULL, res, err, errlen);
}

int compact_recording_window(const char *path, size_t window, struct compact_result *res, char *err,
			     size_t errlen)
{
	return compact_at(path, window, NULL, res, err, errlen);
}

int compact_recording_root(const char *path, const char *root, struct compact_result *res, char *err,
			   size_t errlen)
{
	return compact_at(path, COMPACT_WINDOW, root, res, err, errlen);
}

static int compact_at(const char *path, size_t window, const char *root, struct compact_result *res, char *err,
		      size_t errlen)
{
	memset(res, 0, sizeof(*res));
	err[0] = 0;
	struct stat st;
	if (lstat(path, &st) != 0) {
		say(err, errlen, "%s", strerror(errno));
		return COMPACT_FAILED;
	}
	if (!S_ISREG(st.st_mode))
		return COMPACT_SKIPPED;
	res->bytes_before = res->bytes_after = (uint64_t)st.st_size;

	struct compactor c;
	memset(&c, 0, sizeof(c));
	c.window = window ? window : 1;
	c.spill_fd = -1;
	c.dir_of = path;
	struct rfile_reader *r = NULL;
	int rc;
	if (rfile_open(path, &r) != RFILE_OK) {
		say(err, errlen, "%s", rfile_error(r));
		rfile_close(r);
		return COMPACT_FAILED;
	}
	struct rhea_file_header hdr = *rfile_header(r);
	c.period_us = (hdr.interval_ns + 500) / 1000;
	rc = read_old(&c, r, err, errlen);
	rfile_close(r);
	if (rc == COMPACT_DONE && (keep_perf_map(&c, &hdr, root) != 0 || keep_code_names(&c, root) != 0)) {
		say(err, errlen, "out of memory");
		rc = COMPACT_FAILED;
	}
	if (rc != COMPACT_DONE) {
		compactor_free(&c);
		return rc;
	}

	char tmp[PATH_MAX + 32];
	if (snprintf(tmp, sizeof(tmp), "%s.compact-XXXXXX", path) >= (int)sizeof(tmp)) {
		compactor_free(&c);
		return COMPACT_SKIPPED;
	}
	int fd = mkstemp(tmp);
	if (fd < 0) {
		say(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		compactor_free(&c);
		return COMPACT_FAILED;
	}
	struct tally read = c.read; /* and the nodes written, to be read back */
	int e = write_new(&c, &hdr, fd, &read);
	if (e == 0 && fchmod(fd, st.st_mode & 07777) != 0)
		e = -errno;
	if (close(fd) != 0 && e == 0)
		e = -errno;
	compactor_free(&c);
	if (e == 0 && !reads_back(tmp, &read))
		e = -EIO; /* a bug, not the disk: keep the old file */
	struct stat nst;
	if (e == 0 && stat(tmp, &nst) != 0)
		e = -errno;
	if (e == 0 && rename(tmp, path) != 0)
		e = -errno;
	if (e != 0) {
		unlink(tmp);
		say(err, errlen, "%s", e == -EIO ? "the rewritten file did not read back the same" : strerror(-e));
		return COMPACT_FAILED;
	}
	res->bytes_after = (uint64_t)nst.st_size;
	res->samples = read.samples;
	return COMPACT_DONE;
}

void cli_compact(const char *path, const char *root)
{
	struct compact_result res;
	char err[512];
	if (compact_recording_root(path, root, &res, err, sizeof(err)) == COMPACT_FAILED)
		cli_err("%s: left as written (could not compact it: %s)", path, err);
}

void cli_compact_tallied(const char *path, struct compact_tally *t)
{
	struct compact_result res;
	char err[512];
	if (compact_recording(path, &res, err, sizeof(err)) != COMPACT_FAILED)
		return;
	if (++t->failed <= COMPACT_SAID)
		cli_err("%s: left as written (could not compact it: %s)", path, err);
	snprintf(t->last_err, sizeof(t->last_err), "%s", err);
}

void cli_compact_said(const struct compact_tally *t)
{
	if (t->failed > COMPACT_SAID)
		cli_err("... and %d more recordings left as written (the last could not be compacted: %s)",
			t->failed - COMPACT_SAID, t->last_err);
}

/*
 * recording.c - read a .rhea file into memory: modules, threads with their
 * samples sorted by time, the call-stack table, allocation sites, metadata,
 * statistics and the END entry.
 *
 * Entries arrive in chunk order, which is not time order (the agent's
 * shards fill chunks independently); each thread's samples are sorted once
 * everything is read.  Unknown entry kinds are skipped (forward
 * compatibility inside a major version); malformed entries make the chunk
 * corrupt.  Allocation sites are cumulative snapshots: the largest count
 * per (thread serial, pc) is kept.
 */
#include "recording.h"
#include "vec.h"
#include "nodepack.h"
#include "packed.h"
#include "rfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (vec_grow(&p, cap, need, elem) != 0) {
		fprintf(stderr, "rhea: out of memory\n");
		exit(1);
	}
	return p;
}

struct rec_thread *recording_thread(struct recording *r, uint32_t tid)
{
	/* Threads are few; a linear scan with a one-entry cache. */
	if (r->last_thread < r->nthreads && r->threads[r->last_thread].tid == tid)
		return &r->threads[r->last_thread];
	for (size_t i = 0; i < r->nthreads; i++)
		if (r->threads[i].tid == tid) {
			r->last_thread = i;
			return &r->threads[i];
		}
	return NULL;
}

static struct rec_thread *thread_get(struct recording *r, uint32_t tid)
{
	struct rec_thread *t = recording_thread(r, tid);
	if (t)
		return t;
	r->threads = grow(r->threads, &r->threads_cap, r->nthreads + 1, sizeof(*r->threads));
	t = &r->threads[r->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

static void take_sample(struct recording *r, const struct rhea_sample *s)
{
	struct rec_thread *t = thread_get(r, s->tid);
	if (!r->counts_only) {
		t->samples = grow(t->samples, &t->cap, t->nsamples + 1, sizeof(*t->samples));
		t->samples[t->nsamples] = *s;
	}
	t->nsamples++;
	r->nsamples++;
	r->nmerged += s->merged;
	if (!r->first_ns || s->begin_ns < r->first_ns)
		r->first_ns = s->begin_ns;
	if (s->end_ns > r->last_ns)
		r->last_ns = s->end_ns;
}

static int take_decoded(void *arg, const struct rhea_sample *s)
{
	take_sample(arg, s);
	return 0;
}

/* Room in the node table for nodes first_id .. first_id + count - 1:
 * where they go, NULL when past what a table may hold. */
static struct rhea_node *nodes_room(struct recording *r, uint32_t first_id, uint32_t count)
{
	uint64_t end = (uint64_t)first_id + count;
	if (end > (1u << 31))
		return NULL;
	if (end > r->nnodes) {
		uint32_t cap = r->nnodes ? r->nnodes : 1024;
		while (cap < end)
			cap *= 2;
		r->nodes = realloc(r->nodes, (size_t)cap * sizeof(*r->nodes));
		r->nodes_known = realloc(r->nodes_known, cap);
		if (!r->nodes || !r->nodes_known) {
			fprintf(stderr, "rhea: out of memory\n");
			exit(1);
		}
		memset(r->nodes_known + r->nnodes, 0, cap - r->nnodes);
		r->nnodes = cap;
	}
	return &r->nodes[first_id];
}

static int take_entry(struct recording *r, const struct rhea_entry *e)
{
	const char *p = (const char *)e;
	switch (e->kind) {
	case RHEA_E_PACKED:
	case RHEA_E_PACKED2:
	case RHEA_E_PACKED3:
	case RHEA_E_PACKED4:
		return packed_decode(e, take_decoded, r);
	case RHEA_E_SAMPLE:
		if (e->size < sizeof(struct rhea_sample))
			return -1;
		take_sample(r, (const void *)p);
		break;
	case RHEA_E_THREAD: {
		if (e->size < sizeof(struct rhea_thread))
			return -1;
		const struct rhea_thread *th = (const void *)p;
		struct rec_thread *t = thread_get(r, th->tid);
		/* Entries reach the file in the order their chunks were sealed,
		 * not the order they were made: a thread whose shard was busy
		 * writes through another one.  The latest name by time wins
		 * (a START, named from /proc, may come after the NAME the
		 * thread set itself a moment later). */
		if (th->name[0] && th->time_ns >= t->name_ns) {
			memcpy(t->name, th->name, 15);
			t->name[15] = 0;
			t->name_ns = th->time_ns;
		}
		if (e->flags == RHEA_T_START) {
			if (!t->start_ns || th->time_ns < t->start_ns)
				t->start_ns = th->time_ns;
			if (th->parent_tid)
				t->parent_tid = th->parent_tid;
		} else if (e->flags == RHEA_T_EXIT) {
			if (th->time_ns > t->exit_ns)
				t->exit_ns = th->time_ns;
		}
		break;
	}
	case RHEA_E_MODULE: {
		if (e->size < sizeof(struct rhea_module))
			return -1;
		const struct rhea_module *m = (const void *)p;
		if (m->path_len == 0 || m->path_len > e->size - sizeof(*m) ||
		    m->build_id_len > sizeof(m->build_id))
			return -1;
		const char *path = p + sizeof(*m);
		if (memchr(path, 0, m->path_len) == NULL)
			return -1;
		if (e->flags == 2) {
			for (size_t i = 0; i < r->nmods; i++)
				if (r->mods[i].lo == m->lo && r->mods[i].bias == m->bias && !r->mods[i].unload_ns)
					r->mods[i].unload_ns = m->time_ns;
			break;
		}
		for (size_t i = 0; i < r->nmods; i++)
			if (r->mods[i].lo == m->lo && r->mods[i].bias == m->bias &&
			    strcmp(r->mods[i].path, path) == 0)
				return 0; /* re-announced (after fork) */
		r->mods = grow(r->mods, &r->mods_cap, r->nmods + 1, sizeof(*r->mods));
		struct rec_module *rm = &r->mods[r->nmods++];
		memset(rm, 0, sizeof(*rm));
		rm->bias = m->bias;
		rm->lo = m->lo;
		rm->hi = m->hi;
		rm->path = strdup(path);
		rm->build_id_len = m->build_id_len;
		memcpy(rm->build_id, m->build_id, m->build_id_len);
		rm->load_ns = m->time_ns;
		break;
	}
	case RHEA_E_NODES: {
		if (e->size < sizeof(struct rhea_nodes))
			return -1;
		const struct rhea_nodes *n = (const void *)p;
		if ((uint64_t)n->count * sizeof(struct rhea_node) > e->size - sizeof(*n))
			return -1;
		struct rhea_node *to = nodes_room(r, n->first_id, n->count);
		if (!to)
			return -1;
		memcpy(to, n + 1, (size_t)n->count * sizeof(*to));
		memset(&r->nodes_known[n->first_id], 1, n->count);
		break;
	}
	case RHEA_E_NODES2: {
		const struct rhea_nodes2 *n = (const void *)p;
		struct rhea_node *to;
		if (rfile_entry_check(e) != 0 || !(to = nodes_room(r, n->first_id, n->count)) ||
		    nodepack_decode(e, to) != 0)
			return -1;
		memset(&r->nodes_known[n->first_id], 1, n->count);
		break;
	}
	case RHEA_E_SITES: {
		if (e->size < sizeof(struct rhea_sites))
			return -1;
		const struct rhea_sites *s = (const void *)p;
		if ((uint64_t)s->count * sizeof(struct rhea_site) > e->size - sizeof(*s))
			return -1;
		if (s->count) {
			r->sites = grow(r->sites, &r->sites_cap, r->nsites + s->count, sizeof(*r->sites));
			memcpy(r->sites + r->nsites, s + 1, (size_t)s->count * sizeof(*r->sites));
			r->nsites += s->count;
		}
		break;
	}
	case RHEA_E_META: {
		size_t len = e->size - sizeof(struct rhea_meta);
		const char *k = p + sizeof(struct rhea_meta);
		const char *kend = memchr(k, 0, len);
		if (!kend)
			return -1;
		const char *v = kend + 1;
		const char *vend = memchr(v, 0, len - (size_t)(v - k));
		if (!vend)
			return -1;
		r->meta = grow(r->meta, &r->meta_cap, r->nmeta + 1, sizeof(*r->meta));
		r->meta[r->nmeta].key = strdup(k);
		r->meta[r->nmeta].value = strdup(v);
		r->nmeta++;
		break;
	}
	case RHEA_E_RELEASE:
		if (e->size < sizeof(struct rhea_release))
			return -1;
		if (!r->counts_only) {
			r->releases = grow(r->releases, &r->releases_cap, r->nreleases + 1, sizeof(*r->releases));
			memcpy(&r->releases[r->nreleases++], p, sizeof(*r->releases));
		}
		break;
	case RHEA_E_STATS:
		if (e->size < sizeof(struct rhea_stats))
			return -1;
		memcpy(&r->stats, p, sizeof(r->stats));
		r->have_stats = 1;
		break;
	case RHEA_E_END:
		if (e->size < sizeof(struct rhea_end))
			return -1;
		if (e->flags & RHEA_END_F_OUTSIDE) {
			memcpy(&r->oend, p, sizeof(r->oend));
			r->end_outside = 1;
			r->end_recovered = (e->flags & RHEA_END_F_SALVAGED) != 0;
			break;
		}
		memcpy(&r->end, p, sizeof(r->end));
		r->have_end = 1;
		break;
	default:
		break; /* a newer kind: skip */
	}
	return 0;
}

static int cmp_release(const void *a, const void *b)
{
	const struct rhea_release *x = a, *y = b;
	return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

static int cmp_sample(const void *a, const void *b)
{
	const struct rhea_sample *x = a, *y = b;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns ? -1 : 1;
	return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

/* Whether samples are already in cmp_sample's order, as a thread's
 * usually are (out of it: a wait, written at its end, and the captures
 * taken from outside while it lasted).  glibc's qsort, a merge sort,
 * compares and copies (152 bytes a sample) all the same: 8% of a
 * conversion to Perfetto of a million samples. */
static int in_order(const struct rhea_sample *s, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (cmp_sample(&s[i - 1], &s[i]) > 0)
			return 0;
	return 1;
}

/*
 * A wait so far (BLOCK and ASYNC: taken from outside while a thread was
 * blocked in a hooked call, by the sampler's forced capture or at the end
 * of the recording) is superseded by a sample that covers the same wait:
 * another one taken later, or the call's own BLOCK sample written at its
 * return.  Same trigger and object, begins within a millisecond (the
 * agent converts the begin from the TSC with the calibration of the
 * moment), ends no earlier.
 *
 * Sorted by begin, the two are near, not always neighbours: a thread
 * blocked for a second under --force-after 2ms left 270 so-fars, their
 * begins 1 us apart in two groups, and the call's own sample between the
 * groups; the last so-far of the later group was kept, the wait counted
 * twice (fdlowest on a loaded machine).  So a so-far looks for its cover
 * among up to COVER_WINDOW samples on either side.  Returns the samples
 * kept, in place.
 */
#define SAME_WAIT_NS 1000000ull
#define COVER_WINDOW 64
static int covers(const struct rhea_sample *w, const struct rhea_sample *p)
{
	uint64_t d = w->begin_ns > p->begin_ns ? w->begin_ns - p->begin_ns : p->begin_ns - w->begin_ns;
	return (w->h.flags & RHEA_S_BLOCK) && w->trigger == p->trigger && w->object == p->object &&
	       d <= SAME_WAIT_NS && w->end_ns >= p->end_ns;
}

static int wait_so_far(const struct rhea_sample *s)
{
	return (s->h.flags & (RHEA_S_BLOCK | RHEA_S_ASYNC)) == (RHEA_S_BLOCK | RHEA_S_ASYNC);
}

/* Whether s[i], a so-far, is covered by one of s[i + 1 ..] (as they came)
 * or of kept[0 .. k - 1] (those kept so far; of two equal so-fars the
 * first goes, by the first test). */
static int superseded(const struct rhea_sample *s, size_t n, size_t i, const struct rhea_sample *kept, size_t k)
{
	for (size_t j = i + 1; j < n && j <= i + COVER_WINDOW; j++)
		if (covers(&s[j], &s[i]))
			return 1;
	for (size_t j = k; j > 0 && j + COVER_WINDOW > k; j--) {
		const struct rhea_sample *p = &kept[j - 1];
		if (covers(p, &s[i]) && !(wait_so_far(p) && p->end_ns == s[i].end_ns))
			return 1;
	}
	return 0;
}

static size_t drop_superseded_waits(struct rhea_sample *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (wait_so_far(&s[i]) && superseded(s, n, i, s, k))
			continue;
		if (k != i)
			s[k] = s[i];
		k++;
	}
	return k;
}

static int cmp_site(const void *a, const void *b)
{
	const struct rhea_site *x = a, *y = b;
	if (x->serial != y->serial)
		return x->serial < y->serial ? -1 : 1;
	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	return (x->count > y->count) - (x->count < y->count);
}

size_t recording_reduce_sites(struct rhea_site *s, size_t n)
{
	if (!n)
		return 0;
	qsort(s, n, sizeof(*s), cmp_site);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (o > 0 && s[o - 1].serial == s[i].serial && s[o - 1].pc == s[i].pc)
			s[o - 1] = s[i]; /* sorted by count: the last is largest */
		else
			s[o++] = s[i];
	}
	return o;
}

static int load(const char *path, struct recording *r, int salvage, int counts_only, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->counts_only = counts_only;
	r->path = strdup(path);
	struct rfile_reader *rd = NULL;
	int st = rfile_open(path, &rd);
	if (st != RFILE_OK) {
		snprintf(err, errlen, "%s", rd ? rfile_error(rd) : strerror(ENOMEM));
		rfile_close(rd);
		return st < 0 ? st : RFILE_ERR_IO;
	}
	r->hdr = *rfile_header(rd);
	for (;;) {
		const void *payload;
		size_t len;
		st = rfile_next_chunk(rd, &payload, &len);
		if (st == RFILE_END_OF_FILE)
			break;
		if (st != RFILE_OK) {
			if (!salvage || st == RFILE_ERR_IO) {
				snprintf(err, errlen, "%s", rfile_error(rd));
				rfile_close(rd);
				return st;
			}
			snprintf(r->problem, sizeof(r->problem), "%s", rfile_error(rd));
			r->salvaged = 1;
			break;
		}
		r->nchunks++;
		size_t off = 0;
		const struct rhea_entry *e;
		int k;
		while ((k = rfile_next_entry(payload, len, &off, &e)) == 1) {
			if (take_entry(r, e) < 0) {
				k = -1;
				break;
			}
		}
		if (k < 0) {
			char msg[256];
			snprintf(msg, sizeof(msg), "corrupt: malformed entry in chunk %llu",
				 (unsigned long long)(r->nchunks - 1));
			if (!salvage) {
				snprintf(err, errlen, "%s", msg);
				rfile_close(rd);
				return RFILE_ERR_CORRUPT;
			}
			snprintf(r->problem, sizeof(r->problem), "%s", msg);
			r->salvaged = 1;
			break;
		}
	}
	r->file_bytes = rfile_offset(rd);
	rfile_close(rd);
	if (r->nreleases > 1)
		qsort(r->releases, r->nreleases, sizeof(*r->releases), cmp_release);
	for (size_t i = 0; i < r->nthreads && !counts_only; i++) {
		struct rec_thread *t = &r->threads[i];
		if (!in_order(t->samples, t->nsamples)) /* (usually they are) */
			qsort(t->samples, t->nsamples, sizeof(*t->samples), cmp_sample);
		size_t kept = drop_superseded_waits(t->samples, t->nsamples);
		r->nsamples -= t->nsamples - kept;
		t->nsamples = kept;
	}
	r->nsites = recording_reduce_sites(r->sites, r->nsites);
	return 0;
}

int recording_load(const char *path, struct recording *r, int salvage, char *err, size_t errlen)
{
	return load(path, r, salvage, 0, err, errlen);
}

int recording_load_counts(const char *path, struct recording *r, int salvage, char *err, size_t errlen)
{
	return load(path, r, salvage, 1, err, errlen);
}

void recording_free(struct recording *r)
{
	for (size_t i = 0; i < r->nmods; i++)
		free(r->mods[i].path);
	free(r->mods);
	for (size_t i = 0; i < r->nthreads; i++)
		free(r->threads[i].samples);
	free(r->threads);
	free(r->nodes);
	free(r->nodes_known);
	free(r->sites);
	free(r->releases);
	for (size_t i = 0; i < r->nmeta; i++) {
		free(r->meta[i].key);
		free(r->meta[i].value);
	}
	free(r->meta);
	free(r->path);
	memset(r, 0, sizeof(*r));
}

int recording_stack(const struct recording *r, uint32_t leaf, uint64_t *out, int max, int *broken)
{
	int n = 0;
	*broken = 0;
	/* Walk leaf to root into the end of out, then move to the front. */
	uint32_t id = leaf;
	int guard = 0;
	while (id != 0) {
		if (id >= r->nnodes || !r->nodes_known[id] || ++guard > 100000) {
			*broken = 1;
			break;
		}
		if (n < max)
			out[max - 1 - n] = r->nodes[id].addr;
		n++;
		id = r->nodes[id].parent;
	}
	if (n > max)
		n = max;
	memmove(out, out + (max - n), (size_t)n * sizeof(*out));
	return n;
}

const char *recording_meta(const struct recording *r, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i < r->nmeta; i++)
		if (strcmp(r->meta[i].key, key) == 0)
			v = r->meta[i].value;
	return v;
}

uint64_t recording_start(const struct recording *r)
{
	uint64_t s = r->hdr.start_ns;
	return !s || (r->first_ns && r->first_ns < s) ? r->first_ns : s;
}

static int by_start(const void *a, const void *b)
{
	uint64_t x = recording_start(a), y = recording_start(b);
	return (x > y) - (x < y);
}

void recording_sort_by_start(struct recording *recs, size_t n)
{
	qsort(recs, n, sizeof(*recs), by_start);
}

/* The latest release of obj in r within [begin, end] not by (self, tid). */
static const struct rhea_release *latest_release(const struct recording *r, uint64_t obj, uint64_t begin,
						 uint64_t end, int self, uint32_t tid)
{
	size_t lo = 0, hi = r->nreleases;
	while (lo < hi) { /* the first release after end */
		size_t mid = lo + (hi - lo) / 2;
		if (r->releases[mid].time_ns <= end)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0 && r->releases[i].time_ns >= begin;)
		if (r->releases[i].object == obj && !(self && r->releases[i].tid == tid))
			return &r->releases[i];
	return NULL;
}

long recording_xwakes(const struct recording *recs, size_t n, struct xwake **out)
{
	struct xwake *v = NULL;
	size_t nv = 0, cap = 0;
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < recs[k].nthreads; i++) {
			const struct rec_thread *t = &recs[k].threads[i];
			for (size_t x = 0; x < t->nsamples; x++) {
				const struct rhea_sample *s = &t->samples[x];
				if ((s->h.flags & (RHEA_S_BLOCK | RHEA_S_SHARED)) != (RHEA_S_BLOCK | RHEA_S_SHARED) ||
				    s->waker_tid)
					continue;
				struct xwake w = {k, i, s, 0, NULL};
				for (size_t j = 0; j < n; j++) {
					const struct rhea_release *r =
						latest_release(&recs[j], s->object, s->begin_ns, s->end_ns, j == k, s->tid);
					if (r && (!w.rel || r->time_ns > w.rel->time_ns)) {
						w.rrec = j;
						w.rel = r;
					}
				}
				if (nv == cap) {
					size_t nc = cap ? cap * 2 : 64;
					struct xwake *nw = realloc(v, nc * sizeof(*v));
					if (!nw) {
						free(v);
						return -1;
					}
					v = nw;
					cap = nc;
				}
				v[nv++] = w;
			}
		}
	*out = v;
	return (long)nv;
}

void recording_program(const struct recording *r, char *buf, size_t len)
{
	const char *exe = recording_meta(r, "exe");
	const char *p = exe ? exe : recording_meta(r, "cmdline");
	if (!p)
		p = "?";
	size_t w = exe ? strlen(p) : strcspn(p, " ");
	const char *slash = memrchr(p, '/', w);
	if (slash) {
		w -= (size_t)(slash + 1 - p);
		p = slash + 1;
	}
	snprintf(buf, len, "%.*s", (int)w, p);
}

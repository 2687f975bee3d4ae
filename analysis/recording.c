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

/*
 * A THREAD entry into its thread (a life of it: split_lives).  Entries
 * reach the file in the order their chunks were sealed, not the order they
 * were made: a thread whose shard was busy writes through another one.
 * The latest name by time wins (a START, named from /proc, may come after
 * the NAME the thread set itself a moment later).
 */
static void apply_tev(struct rec_thread *t, const struct rec_tev *v)
{
	if (v->name[0] && v->time_ns >= t->name_ns) {
		memcpy(t->name, v->name, sizeof(t->name));
		t->name_ns = v->time_ns;
	}
	if (v->event == RHEA_T_START) {
		if (!t->start_ns || v->time_ns < t->start_ns)
			t->start_ns = v->time_ns;
		if (v->parent_tid)
			t->parent_tid = v->parent_tid;
	} else if (v->event == RHEA_T_EXIT && v->time_ns > t->exit_ns) {
		t->exit_ns = v->time_ns;
	}
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
		r->tevs = grow(r->tevs, &r->tevs_cap, r->ntevs + 1, sizeof(*r->tevs));
		struct rec_tev *v = &r->tevs[r->ntevs++];
		*v = (struct rec_tev){th->tid, th->parent_tid, th->time_ns, e->flags, {0}};
		memcpy(v->name, th->name, 15);
		apply_tev(thread_get(r, th->tid), v);
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
	case RHEA_E_SHORTS: {
		const struct rhea_shorts *s = (const void *)p;
		if (rfile_entry_check(e) != 0)
			return -1;
		if (s->count) {
			if (r->nshorts + s->count > r->shorts_cap && r->nshorts >= 4096) /* snapshots pile up */
				r->nshorts = recording_reduce_shorts(r->shorts, r->nshorts);
			r->shorts = grow(r->shorts, &r->shorts_cap, r->nshorts + s->count, sizeof(*r->shorts));
			memcpy(r->shorts + r->nshorts, s + 1, (size_t)s->count * sizeof(*r->shorts));
			r->nshorts += s->count;
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

/*
 * A thread's CPU readings made consistent with its clock.  The agent
 * reads the kernel's count (getrusage), which a tick-accounting kernel
 * brings up to date only at a tick or a context switch: a reading may lag
 * the truth by up to a tick, never lead it (agent/capture.c).  The lag
 * then turns up in the interval where the count caught up, usually one
 * with a context switch in it: short slices ending at a pthread_create, a
 * coroutine switch or a wait came out with more CPU than wall time (86 us
 * in 43, 200%; 362% in a C++ thread pool).  The CPU time of one thread
 * grows no faster than the wall clock, so a reading at t_i is at least the
 * next one less the time in between: each reading, from the last back, is
 * raised to that bound where it is below it.  That is closer to the truth
 * whenever the later reading is not ahead of it, no interval keeps more
 * CPU than wall, and the excess goes to the intervals before, where the
 * lag had taken it from.  The last reading, and so the thread's total,
 * stays as read.
 */
struct cpu_reading {
	uint64_t t;
	uint64_t *cpu;
};

static int cmp_reading(const void *a, const void *b)
{
	const struct cpu_reading *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->cpu > y->cpu) - (x->cpu < y->cpu); /* begin before end, sample by sample */
}

void recording_bound_cpu(struct rhea_sample *s, size_t n)
{
	if (n == 0)
		return;
	struct cpu_reading *rd = malloc(2 * n * sizeof(*rd));
	if (!rd)
		return; /* (left as read) */
	int sorted = 1;
	for (size_t i = 0; i < n; i++) {
		rd[2 * i] = (struct cpu_reading){s[i].begin_ns, &s[i].c_begin.cpu_ns};
		rd[2 * i + 1] = (struct cpu_reading){s[i].end_ns, &s[i].c_end.cpu_ns};
		sorted &= (i == 0 || s[i - 1].end_ns <= s[i].begin_ns) && s[i].begin_ns <= s[i].end_ns;
	}
	if (!sorted) /* (a wait and the captures from outside while it lasted) */
		vec_sort(rd, 2 * n, sizeof(*rd), cmp_reading);
	for (size_t i = 2 * n - 1; i > 0; i--) {
		uint64_t next = *rd[i].cpu, gap = rd[i].t - rd[i - 1].t;
		if (next > gap && *rd[i - 1].cpu < next - gap)
			*rd[i - 1].cpu = next - gap;
	}
	free(rd);
}

const struct rhea_sample *recording_last_sample(const struct rec_thread *t)
{
	const struct rhea_sample *last = NULL;
	for (size_t k = 0; k < t->nsamples; k++)
		if (!last || t->samples[k].end_ns >= last->end_ns)
			last = &t->samples[k];
	return last;
}

size_t recording_life_at(const struct recording *r, uint32_t tid, uint64_t t)
{
	size_t at = r->nthreads;
	for (size_t j = 0; j < r->nthreads; j++) {
		const struct rec_thread *x = &r->threads[j];
		if (x->tid != tid)
			continue;
		if (at == r->nthreads) {
			at = j;
			continue;
		}
		uint64_t xs = x->start_ns, as = r->threads[at].start_ns;
		int x_begun = xs <= t, a_begun = as <= t;
		if (x_begun != a_begun ? x_begun : x_begun ? xs > as : xs < as)
			at = j; /* begun by t over not; then the later, else the earlier */
	}
	return at;
}

/*
 * A process killed (SIGKILL) or gone by a raw exit_group, the agent's
 * unwritten records recovered from its memory by rhea record: nothing it
 * recorded is missing.  A thread whose last sample is then a wait so far
 * (the sampler's forced capture, up to --force-after before the end) was
 * still in that call when the process died, since a return would have
 * left the call's own sample: its wait lasts to the end rhea record saw
 * (when waitpid told it), not to that capture, up to a second earlier.
 * A thread that ended before is left alone.
 */
static void waits_to_the_death(struct recording *r)
{
	if (r->have_end || !r->end_outside || !r->end_recovered ||
	    (r->oend.reason != RHEA_END_SIGNAL && r->oend.reason != RHEA_END_EXIT))
		return;
	const unsigned so_far = RHEA_S_BLOCK | RHEA_S_ASYNC;
	for (size_t i = 0; i < r->nthreads; i++) {
		struct rec_thread *t = &r->threads[i];
		struct rhea_sample *last = (struct rhea_sample *)recording_last_sample(t);
		if (!last || t->exit_ns || (last->h.flags & so_far) != so_far || last->end_ns >= r->oend.time_ns)
			continue;
		last->end_ns = r->oend.time_ns;
		if (last->end_ns > r->last_ns)
			r->last_ns = last->end_ns;
	}
}

/*
 * One thread per life.  The kernel gives a tid again once it has gone
 * round pid_max (32768 where nothing raised it), and a program starting
 * threads by the thousand gets a tid back within the recording: loaded
 * under its tid alone, the two threads were one, their samples together,
 * their wall from the first one's start to the second one's exit (17920
 * threads made under pid_max 16384 were 16068 in the report).  A START
 * after an EXIT of the same tid begins another life; each sample goes to
 * the life it began in, each life gets its own start, exit, parent and
 * latest name.
 */
static int cmp_tev(const void *a, const void *b)
{
	const struct rec_tev *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return (x->event > y->event) - (x->event < y->event); /* START, NAME, EXIT */
}

/* The life (0..n-1) that time t falls in, lives beginning at begin[1..n-1]. */
static size_t life_at(const uint64_t *begin, size_t n, uint64_t t)
{
	size_t lo = 1, hi = n; /* the first life beginning after t, in [lo, hi] */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (begin[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

struct tid_index {
	uint32_t tid;
	uint32_t i;
};

static int cmp_tid_index(const void *a, const void *b)
{
	const struct tid_index *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* The thread of tid (its first life) through the index ix of n threads
 * sorted by tid, NULL when it has none. */
static struct rec_thread *indexed(struct recording *r, const struct tid_index *ix, size_t n, uint32_t tid)
{
	struct tid_index key = {tid, 0};
	const struct tid_index *hit = bsearch(&key, ix, n, sizeof(*ix), cmp_tid_index);
	return hit ? &r->threads[hit->i] : NULL;
}

static void split_lives(struct recording *r)
{
	if (r->ntevs > 1)
		vec_sort(r->tevs, r->ntevs, sizeof(*r->tevs), cmp_tev);
	uint64_t *begin = NULL;
	size_t begin_cap = 0, ix_n = 0, life_cap = 0;
	struct tid_index *ix = NULL; /* made when a tid has two lives */
	struct rec_thread **life = NULL;
	for (size_t a = 0, b; a < r->ntevs; a = b) {
		uint32_t tid = r->tevs[a].tid;
		size_t n = 1;
		int exited = 0;
		begin = grow(begin, &begin_cap, 1, sizeof(*begin));
		begin[0] = 0;
		for (b = a; b < r->ntevs && r->tevs[b].tid == tid; b++) {
			if (r->tevs[b].event == RHEA_T_START && exited) {
				begin = grow(begin, &begin_cap, n + 1, sizeof(*begin));
				begin[n++] = r->tevs[b].time_ns;
				exited = 0;
			} else if (r->tevs[b].event == RHEA_T_EXIT) {
				exited = 1;
			}
		}
		if (n == 1)
			continue;
		if (!ix) {
			ix_n = r->nthreads;
			ix = grow(NULL, &(size_t){0}, ix_n ? ix_n : 1, sizeof(*ix));
			for (size_t i = 0; i < ix_n; i++)
				ix[i] = (struct tid_index){r->threads[i].tid, (uint32_t)i};
			vec_sort(ix, ix_n, sizeof(*ix), cmp_tid_index);
		}
		struct rec_thread *t0 = indexed(r, ix, ix_n, tid);
		if (!t0)
			continue;
		size_t first = r->nthreads, i0 = (size_t)(t0 - r->threads);
		r->threads = grow(r->threads, &r->threads_cap, r->nthreads + n - 1, sizeof(*r->threads));
		r->nthreads += n - 1;
		life = grow(life, &life_cap, n, sizeof(*life));
		life[0] = &r->threads[i0];
		struct rec_thread all = *life[0];
		memset(life[0], 0, sizeof(*life[0]));
		for (size_t j = 1; j < n; j++) {
			life[j] = &r->threads[first + j - 1];
			memset(life[j], 0, sizeof(*life[j]));
		}
		for (size_t j = 0; j < n; j++)
			life[j]->tid = tid;
		for (size_t k = a; k < b; k++)
			apply_tev(life[life_at(begin, n, r->tevs[k].time_ns)], &r->tevs[k]);
		/* the samples (counted only, under counts_only: all to the first) */
		for (size_t k = 0; k < all.nsamples; k++) {
			struct rec_thread *t = all.samples ? life[life_at(begin, n, all.samples[k].begin_ns)] : life[0];
			if (all.samples) {
				t->samples = grow(t->samples, &t->cap, t->nsamples + 1, sizeof(*t->samples));
				t->samples[t->nsamples] = all.samples[k];
			}
			t->nsamples++;
		}
		free(all.samples);
	}
	free(begin);
	free(ix);
	free(life);
	free(r->tevs);
	r->tevs = NULL;
	r->ntevs = r->tevs_cap = 0;
	r->last_thread = 0;
}

/* Snapshots of cumulative counts: sorted by key, then count, the last of
 * each key is the latest (counts only grow); returns how many remain. */
static size_t reduce_to_last(void *base, size_t n, size_t elem, int (*cmp)(const void *, const void *),
			     int (*same_key)(const void *, const void *))
{
	if (!n)
		return 0;
	vec_sort(base, n, elem, cmp);
	char *b = base;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (o > 0 && same_key(b + (o - 1) * elem, b + i * elem))
			memcpy(b + (o - 1) * elem, b + i * elem, elem);
		else {
			if (o != i)
				memcpy(b + o * elem, b + i * elem, elem);
			o++;
		}
	}
	return o;
}

static int same_site(const void *a, const void *b)
{
	const struct rhea_site *x = a, *y = b;
	return x->serial == y->serial && x->pc == y->pc;
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
	return reduce_to_last(s, n, sizeof(*s), cmp_site, same_site);
}

static int same_short(const void *a, const void *b)
{
	const struct rhea_short *x = a, *y = b;
	return x->serial == y->serial && x->fn == y->fn;
}

static int cmp_short(const void *a, const void *b)
{
	const struct rhea_short *x = a, *y = b;
	if (x->serial != y->serial)
		return x->serial < y->serial ? -1 : 1;
	if (x->fn != y->fn)
		return x->fn < y->fn ? -1 : 1;
	return (x->count > y->count) - (x->count < y->count);
}

size_t recording_reduce_shorts(struct rhea_short *s, size_t n)
{
	return reduce_to_last(s, n, sizeof(*s), cmp_short, same_short);
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
	split_lives(r);
	if (r->nreleases > 1)
		vec_sort(r->releases, r->nreleases, sizeof(*r->releases), cmp_release);
	for (size_t i = 0; i < r->nthreads && !counts_only; i++) {
		struct rec_thread *t = &r->threads[i];
		if (!in_order(t->samples, t->nsamples)) /* (usually they are) */
			vec_sort(t->samples, t->nsamples, sizeof(*t->samples), cmp_sample);
		size_t kept = drop_superseded_waits(t->samples, t->nsamples);
		r->nsamples -= t->nsamples - kept;
		t->nsamples = kept;
		recording_bound_cpu(t->samples, t->nsamples);
	}
	if (!counts_only)
		waits_to_the_death(r);
	r->nsites = recording_reduce_sites(r->sites, r->nsites);
	r->nshorts = recording_reduce_shorts(r->shorts, r->nshorts);
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
	free(r->shorts);
	free(r->releases);
	for (size_t i = 0; i < r->nmeta; i++) {
		free(r->meta[i].key);
		free(r->meta[i].value);
	}
	free(r->meta);
	free(r->tevs);
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

const char *recording_write_error(const struct recording *r)
{
	return r->have_end ? NULL : recording_meta(r, "write_error");
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
	vec_sort(recs, n, sizeof(*recs), by_start);
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

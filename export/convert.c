/*
 * convert.c - what every `rhea convert` format shares: the filters, the
 * walk of the model's slices with their arguments, process-wide rates over
 * time, and the per-stack values of pprof and folded stacks.
 *
 * The slices are the model's (analysis/model.c), never recomputed here:
 * convert_walk() hands model_walk_thread() the thread's samples inside the
 * time window and turns its begin/end callbacks into convert_slice events.
 *
 * Filters:
 *   --thread   threads by tid or name (several allowed);
 *   --from/--to  the samples that begin inside the window, relative to the
 *              recording's start, feed the model; a slice open at --from
 *              starts at the first sample after it and the last slice ends
 *              with the last sample of the window, so every counter delta
 *              stays exact (no interpolation);
 *   --min-dur  slices shorter than the duration are dropped.  A slice's
 *              children are never longer than it, so a dropped slice's
 *              children are dropped too and what remains nests.  The
 *              decision is taken at a slice's end; a kept slice's ancestors
 *              are kept as well (they are at least as long), so their begin
 *              events are emitted, late but in order, just before it: no
 *              output event goes back in time and memory stays bounded by
 *              the stack depth, not by the length of the recording.
 *
 * Arguments of a slice (btrace's names in the writers): wall time, CPU time,
 * self time and self CPU time (minus the direct children, as the report
 * counts them), allocations and bytes inside (inclusive and self), page
 * faults and context switches - all differences of the thread's counters at
 * the slice's begin and end samples, hence exact for the span the model
 * gives the slice.
 *
 * Totals: the self times of all slices of a thread add up to the time its
 * outermost slices cover, likewise CPU and allocations.  Allocations made
 * outside every slice (before the thread's first sample, during samples
 * without a stack, in the gaps --end last leaves) are returned as
 * "unattributed" so that pprof and folded totals equal the report's
 * per-thread allocation counts exactly.
 */
#include "convert.h"
#include "stalls.h"
#include "hookfn.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "rhea: out of memory\n");
		exit(1);
	}
	return p;
}

void convert_clean_string(const char *s, char *out, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	if (n == 0)
		return;
	while (*p && o + 1 < n) {
		unsigned c = *p;
		int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		int ok = len > 0;
		for (int i = 1; ok && i < len; i++)
			ok = (p[i] & 0xc0) == 0x80;
		if (ok && len == 2 && c < 0xc2)
			ok = 0; /* overlong */
		if (!ok) {
			out[o++] = '?';
			p++;
			continue;
		}
		if (len == 1) {
			out[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
			p++;
			continue;
		}
		if (o + (size_t)len >= n)
			break;
		memcpy(out + o, p, (size_t)len);
		o += (size_t)len;
		p += len;
	}
	out[o] = 0;
}

int convert_stalls(struct convert_ctx *c, struct stalls *st)
{
	if (stalls_find(c->m, c->o->stall_ns ? c->o->stall_ns : STALLS_DEFAULT_NS, st) < 0)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < st->n; i++) {
		const struct stall *x = &st->v[i];
		if (!c->selected[x->t - c->r->threads] ||
		    (c->windowed && (x->begin_ns < c->win_lo || x->begin_ns >= c->win_hi)))
			continue;
		st->v[k++] = *x; /* causes keep counting every stall: unused here */
	}
	st->n = k;
	return 0;
}

static const char *cleaned_name(void *arg, uint32_t func)
{
	return convert_func_name(arg, func);
}

const char *convert_cause_name(struct convert_ctx *c, const struct stall_cause *k, char *buf, size_t len)
{
	return stalls_cause_line(k, cleaned_name, c, buf, len);
}

const char *convert_func_name(struct convert_ctx *c, uint32_t func)
{
	if (func >= c->m->nfuncs)
		return "[unknown]";
	if (!c->names[func]) {
		const char *name = c->m->funcs[func].name;
		size_t n = strlen(name) + 1;
		char *s = malloc(n);
		if (!s)
			return "[unknown]";
		convert_clean_string(name, s, n);
		c->names[func] = s;
	}
	return c->names[func];
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

int convert_init(struct convert_ctx *c, struct model *m, const struct convert_opts *o, char *err,
		 size_t errlen)
{
	struct recording *r = m->rec;
	memset(c, 0, sizeof(*c));
	c->m = m;
	c->r = r;
	c->o = o;
	/* Before the per-function arrays: it adds a function. */
	c->unattributed = model_func_intern(m, "[unattributed]", NULL, NULL, 0, MODEL_SPECIAL);

	c->origin_ns = recording_start(r);
	if (o->origin_ns && (!c->origin_ns || o->origin_ns < c->origin_ns))
		c->origin_ns = o->origin_ns;
	c->windowed = o->from_ns > 0 || o->to_ns >= 0;
	c->win_lo = c->origin_ns + (uint64_t)(o->from_ns > 0 ? o->from_ns : 0);
	c->win_hi = o->to_ns >= 0 ? c->origin_ns + (uint64_t)o->to_ns : UINT64_MAX;
	if (c->win_hi <= c->win_lo) {
		snprintf(err, errlen, "--from must come before --to");
		return -1;
	}

	c->selected = xcalloc(r->nthreads, 1);
	for (size_t i = 0; i < r->nthreads; i++)
		c->selected[i] = o->nthreads == 0;
	for (size_t k = 0; k < o->nthreads; k++) {
		const char *sel = o->threads[k];
		int hit = 0;
		for (size_t i = 0; i < r->nthreads; i++) {
			const struct rec_thread *t = &r->threads[i];
			if ((all_digits(sel) && strtoul(sel, NULL, 10) == t->tid) || strcmp(sel, t->name) == 0) {
				c->selected[i] = 1;
				hit = 1;
			}
		}
		if (o->thread_hits) {
			o->thread_hits[k] |= (uint8_t)hit;
			continue;
		}
		if (!hit) {
			size_t len = (size_t)snprintf(err, errlen, "--thread %s: no thread with that id or name (threads:", sel);
			for (size_t i = 0; i < r->nthreads && len < errlen; i++)
				len += (size_t)snprintf(err + len, errlen - len, "%s %u %s", i ? "," : "",
							r->threads[i].tid, r->threads[i].name[0] ? r->threads[i].name : "?");
			if (len < errlen)
				snprintf(err + len, errlen - len, ")");
			return -1;
		}
	}

	c->names = xcalloc(m->nfuncs, sizeof(char *));
	c->func_addr = xcalloc(m->nfuncs, sizeof(uint64_t));
	c->func_mod = xcalloc(m->nfuncs, sizeof(int32_t));
	for (uint32_t id = 1; id < r->nnodes; id++) {
		if (!r->nodes_known[id] || r->nodes[id].addr <= 1)
			continue;
		uint32_t f = m->node_func[id];
		if (f < m->nfuncs && !c->func_addr[f])
			c->func_addr[f] = r->nodes[id].addr;
	}
	for (uint32_t f = 0; f < m->nfuncs; f++) {
		c->func_mod[f] = -1;
		uint64_t a = c->func_addr[f];
		if (!a)
			continue;
		for (size_t i = 0; i < r->nmods; i++)
			if (a >= r->mods[i].lo && a < r->mods[i].hi) {
				c->func_mod[f] = (int32_t)i;
				break;
			}
	}
	return 0;
}

void convert_free(struct convert_ctx *c)
{
	if (c->names)
		for (uint32_t i = 0; i < c->m->nfuncs; i++)
			free(c->names[i]);
	free(c->names);
	free(c->func_addr);
	free(c->func_mod);
	free(c->selected);
	memset(c, 0, sizeof(*c));
}

static size_t lower_bound(const struct rec_thread *t, uint64_t ns)
{
	size_t lo = 0, hi = t->nsamples;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->samples[mid].begin_ns < ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void convert_range(const struct convert_ctx *c, const struct rec_thread *t, size_t *lo, size_t *hi)
{
	if (!c->windowed) {
		*lo = 0;
		*hi = t->nsamples;
		return;
	}
	*lo = lower_bound(t, c->win_lo);
	*hi = c->win_hi == UINT64_MAX ? t->nsamples : lower_bound(t, c->win_hi);
	if (*hi < *lo)
		*hi = *lo;
}

/* ---- the walk ---------------------------------------------------------- */

struct frame {
	struct convert_slice cs;
	int emitted;
	uint64_t child_allocs, child_bytes, child_end;
};

struct walk {
	struct convert_ctx *c;
	const struct convert_sink *k;
	const struct rec_thread *t; /* the caller's thread (the model sees a window of it) */
	struct frame *st;
	int cap;
	uint64_t root_allocs, root_bytes;
	uint64_t last_ts; /* of the last event emitted */
};

/* Emit a begin or an end, never before the previous event: the model's
 * slices are in time order, but samples that overlap in time (a sampler's
 * capture during a blocking call) must not make a writer go back. */
static void emit_begin(struct walk *w, struct frame *f)
{
	if (f->cs.begin_ns < w->last_ts)
		f->cs.begin_ns = w->last_ts;
	w->last_ts = f->cs.begin_ns;
	w->k->begin(w->k->arg, w->t, &f->cs);
	f->emitted = 1;
}

static void emit_end(struct walk *w, struct frame *f)
{
	if (f->cs.end_ns < w->last_ts)
		f->cs.end_ns = w->last_ts;
	w->last_ts = f->cs.end_ns;
	w->k->end(w->k->arg, w->t, &f->cs);
}

/* An array indexed by slice depth, grown (doubling) to hold index depth. */
static void *grow_for_depth(void *p, int *cap, int depth, size_t elem)
{
	if (depth < *cap)
		return p;
	int n = *cap ? *cap * 2 : 64;
	while (n <= depth)
		n *= 2;
	p = realloc(p, (size_t)n * elem);
	if (!p) {
		fprintf(stderr, "rhea: out of memory\n");
		exit(1);
	}
	*cap = n;
	return p;
}

static inline uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static void on_begin(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)t;
	struct walk *w = arg;
	w->st = grow_for_depth(w->st, &w->cap, s->depth, sizeof(*w->st));
	struct frame *f = &w->st[s->depth];
	memset(f, 0, sizeof(*f));
	f->cs.func = s->func;
	f->cs.depth = s->depth;
	f->cs.begin_ns = s->begin_ns;
	f->cs.msgid = s->msgid;
	f->cs.sample = s->sample;
	f->cs.trigger = s->sample ? s->sample->trigger : 0;
	f->child_end = s->begin_ns;
	if (w->c->o->min_dur_ns == 0)
		emit_begin(w, f);
}

static void on_end(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)t;
	struct walk *w = arg;
	struct frame *f = &w->st[s->depth];
	struct convert_slice *cs = &f->cs;
	/* Drawn end: never before a child's end (the model ends children
	 * first; this only guards against samples that overlap in time). */
	uint64_t end = s->end_ns > f->child_end ? s->end_ns : f->child_end;
	cs->end_ns = end;
	cs->wall = sub0(s->end_ns, s->begin_ns);
	cs->self = sub0(cs->wall, s->child_ns);
	cs->cpu = sub0(s->ce.cpu_ns, s->cb.cpu_ns);
	cs->self_cpu = sub0(cs->cpu, s->child_cpu_ns);
	cs->allocs = sub0(s->ce.alloc_count, s->cb.alloc_count);
	cs->alloc_bytes = sub0(s->ce.alloc_bytes, s->cb.alloc_bytes);
	cs->self_allocs = sub0(cs->allocs, f->child_allocs);
	cs->self_alloc_bytes = sub0(cs->alloc_bytes, f->child_bytes);
	cs->minflt = sub0(s->ce.minflt, s->cb.minflt);
	cs->majflt = sub0(s->ce.majflt, s->cb.majflt);
	cs->nvcsw = sub0(s->ce.nvcsw, s->cb.nvcsw);
	cs->nivcsw = sub0(s->ce.nivcsw, s->cb.nivcsw);
	if (s->depth > 0) {
		struct frame *p = &w->st[s->depth - 1];
		p->child_allocs += cs->allocs;
		p->child_bytes += cs->alloc_bytes;
		if (end > p->child_end)
			p->child_end = end;
	} else {
		w->root_allocs += cs->allocs;
		w->root_bytes += cs->alloc_bytes;
	}
	int keep = end - cs->begin_ns >= w->c->o->min_dur_ns;
	if (keep)
		for (int d = 0; d <= s->depth; d++)
			if (!w->st[d].emitted)
				emit_begin(w, &w->st[d]);
	if (f->emitted)
		emit_end(w, f);
}

void convert_walk(struct convert_ctx *c, const struct rec_thread *t, const struct convert_sink *k,
		  struct convert_thread_info *info)
{
	size_t lo, hi;
	convert_range(c, t, &lo, &hi);
	struct rec_thread sub = *t;
	sub.samples = t->samples + lo;
	sub.nsamples = hi - lo;
	if (hi < t->nsamples)
		sub.exit_ns = 0; /* the window ends before the thread: no slice lasts to its exit */
	struct walk w = {c, k, t, NULL, 0, 0, 0, 0};
	struct model_cb cb = {on_begin, on_end, &w};
	model_walk_thread(c->m, &sub, &cb);
	free(w.st);
	c->records += hi - lo;
	if (!info)
		return;
	memset(info, 0, sizeof(*info));
	info->samples = hi - lo;
	if (c->windowed || c->o->min_dur_ns)
		return;
	/* The thread's allocations as the report counts them. */
	uint64_t count = 0, bytes = 0;
	for (size_t i = 0; i < t->nsamples; i++)
		if (t->samples[i].c_end.alloc_count > count) {
			count = t->samples[i].c_end.alloc_count;
			bytes = t->samples[i].c_end.alloc_bytes;
		}
	info->unattributed_allocs = sub0(count, w.root_allocs);
	info->unattributed_bytes = sub0(bytes, w.root_bytes);
}

/* ---- process-wide rates ----------------------------------------------- */

static void spread(const struct convert_series *s, double *arr, uint64_t a, uint64_t b, double v)
{
	if (v <= 0)
		return;
	if (a < s->t0)
		a = s->t0;
	if (b < a)
		b = a;
	size_t i = (size_t)((a - s->t0) / s->width);
	if (b == a || i + 1 >= s->n) {
		arr[i < s->n ? i : s->n - 1] += v;
		return;
	}
	double per_ns = v / (double)(b - a);
	while (a < b && i < s->n) {
		uint64_t edge = s->t0 + (uint64_t)(i + 1) * s->width;
		uint64_t stop = edge < b ? edge : b;
		arr[i] += per_ns * (double)(stop - a);
		a = stop;
		i++;
	}
}

static void spread_counters(const struct convert_series *s, uint64_t a, uint64_t b,
			    const struct rhea_counters *ca, const struct rhea_counters *cb)
{
	spread(s, s->cpu_cores, a, b, (double)sub0(cb->cpu_ns, ca->cpu_ns));
	spread(s, s->allocs_per_s, a, b, (double)sub0(cb->alloc_count, ca->alloc_count));
	spread(s, s->bytes_per_s, a, b, (double)sub0(cb->alloc_bytes, ca->alloc_bytes));
}

int convert_series_build(struct convert_ctx *c, struct convert_series *s)
{
	struct recording *r = c->r;
	memset(s, 0, sizeof(*s));
	uint64_t lo_ns = UINT64_MAX, hi_ns = 0;
	for (size_t i = 0; i < r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		const struct rec_thread *t = &r->threads[i];
		size_t lo, hi;
		convert_range(c, t, &lo, &hi);
		for (size_t k = lo; k < hi; k++) {
			if (t->samples[k].begin_ns < lo_ns)
				lo_ns = t->samples[k].begin_ns;
			if (t->samples[k].end_ns > hi_ns)
				hi_ns = t->samples[k].end_ns;
		}
	}
	if (lo_ns >= hi_ns)
		return 0;
	/* About 2000 points, never finer than the capture interval or 1 ms:
	 * a rate over a shorter span than the interval is mostly noise. */
	uint64_t span = hi_ns - lo_ns;
	uint64_t width = span / 2000;
	if (width < r->hdr.interval_ns)
		width = r->hdr.interval_ns;
	if (width < 1000000)
		width = 1000000;
	s->t0 = lo_ns;
	s->width = width;
	s->n = (size_t)(span / width) + 1;
	s->cpu_cores = calloc(s->n, sizeof(double));
	s->allocs_per_s = calloc(s->n, sizeof(double));
	s->bytes_per_s = calloc(s->n, sizeof(double));
	if (!s->cpu_cores || !s->allocs_per_s || !s->bytes_per_s) {
		convert_series_free(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		const struct rec_thread *t = &r->threads[i];
		size_t lo, hi;
		convert_range(c, t, &lo, &hi);
		const struct rhea_sample *prev = NULL;
		for (size_t k = lo; k < hi; k++) {
			const struct rhea_sample *x = &t->samples[k];
			if (prev)
				spread_counters(s, prev->end_ns, x->begin_ns, &prev->c_end, &x->c_begin);
			spread_counters(s, x->begin_ns, x->end_ns, &x->c_begin, &x->c_end);
			prev = x;
		}
	}
	double per_s = 1e9 / (double)width;
	for (size_t i = 0; i < s->n; i++) {
		s->cpu_cores[i] /= (double)width;
		s->allocs_per_s[i] *= per_s;
		s->bytes_per_s[i] *= per_s;
	}
	return 0;
}

void convert_series_free(struct convert_series *s)
{
	free(s->cpu_cores);
	free(s->allocs_per_s);
	free(s->bytes_per_s);
	memset(s, 0, sizeof(*s));
}

/* ---- per-stack values --------------------------------------------------- */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static void trie_rehash(struct convert_trie *tr)
{
	uint32_t n = tr->nslots ? tr->nslots * 2 : 4096;
	free(tr->slots);
	tr->slots = xcalloc(n, sizeof(uint32_t));
	tr->nslots = n;
	for (uint32_t id = 1; id < tr->n; id++) {
		uint64_t key = (uint64_t)tr->parent[id] << 32 | tr->func[id];
		uint32_t i = (uint32_t)mix(key) & (n - 1);
		while (tr->slots[i])
			i = (i + 1) & (n - 1);
		tr->slots[i] = id;
	}
}

static uint32_t trie_child(struct convert_trie *tr, uint32_t parent, uint32_t func)
{
	uint64_t key = (uint64_t)parent << 32 | func;
	uint32_t mask = tr->nslots - 1;
	uint32_t i = (uint32_t)mix(key) & mask;
	for (; tr->slots[i]; i = (i + 1) & mask) {
		uint32_t id = tr->slots[i];
		if (tr->parent[id] == parent && tr->func[id] == func)
			return id;
	}
	if (tr->n == tr->cap) {
		uint32_t cap = tr->cap * 2;
		tr->parent = realloc(tr->parent, cap * sizeof(uint32_t));
		tr->func = realloc(tr->func, cap * sizeof(uint32_t));
		tr->val = realloc(tr->val, cap * sizeof(*tr->val));
		if (!tr->parent || !tr->func || !tr->val) {
			fprintf(stderr, "rhea: out of memory\n");
			exit(1);
		}
		tr->cap = cap;
	}
	uint32_t id = tr->n++;
	tr->parent[id] = parent;
	tr->func[id] = func;
	memset(tr->val[id], 0, sizeof(tr->val[id]));
	if ((uint64_t)tr->n * 2 > tr->nslots)
		trie_rehash(tr);
	else
		tr->slots[i] = id;
	return id;
}

struct tbuild {
	struct convert_trie *tr;
	uint32_t root;
	uint32_t *node;
	int cap;
};

static void tb_begin(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct tbuild *b = arg;
	b->node = grow_for_depth(b->node, &b->cap, s->depth, sizeof(uint32_t));
	b->node[s->depth] = trie_child(b->tr, s->depth ? b->node[s->depth - 1] : b->root, s->func);
}

static void tb_end(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct tbuild *b = arg;
	uint64_t *v = b->tr->val[b->node[s->depth]];
	v[CONVERT_V_WALL] += s->self;
	v[CONVERT_V_CPU] += s->self_cpu;
	v[CONVERT_V_ALLOC_COUNT] += s->self_allocs;
	v[CONVERT_V_ALLOC_BYTES] += s->self_alloc_bytes;
}

/*
 * The sampler's captures of thread t under root: each is worth the CPU
 * periods it stands for, at its own call path.  The slices' CPU is the
 * model's, which holds a stack from one capture to the next, so a short
 * function called often next to a hooked call gets the time around it;
 * these are not drawn to hooked calls (rhea report's CPU profile).
 */
static void trie_add_sampled(struct convert_ctx *c, struct convert_trie *tr, uint32_t root,
			     const struct rec_thread *t)
{
	uint32_t *frames = xcalloc(MODEL_MAX_FRAMES, sizeof(uint32_t));
	for (size_t k = 0; k < t->nsamples; k++) {
		const struct rhea_sample *s = &t->samples[k];
		uint64_t periods = model_cpu_periods(s);
		if (!periods || (c->windowed && (s->begin_ns < c->win_lo || s->begin_ns > c->win_hi)))
			continue;
		int n = model_frames(c->m, s, frames, MODEL_MAX_FRAMES);
		uint32_t node = n ? root : trie_child(tr, root, c->unattributed); /* no stack: still CPU */
		for (int j = 0; j < n; j++)
			node = trie_child(tr, node, frames[j]);
		tr->val[node][CONVERT_V_CPU_SAMPLES] += periods;
	}
	free(frames);
}

int convert_trie_build(struct convert_ctx *c, struct convert_trie *tr, int per_thread)
{
	memset(tr, 0, sizeof(*tr));
	tr->cap = 1024;
	tr->parent = xcalloc(tr->cap, sizeof(uint32_t));
	tr->func = xcalloc(tr->cap, sizeof(uint32_t));
	tr->val = xcalloc(tr->cap, sizeof(*tr->val));
	tr->n = 1; /* node 0: the root */
	trie_rehash(tr);
	struct tbuild b = {tr, 0, NULL, 0};
	struct convert_sink k = {tb_begin, tb_end, &b};
	for (size_t i = 0; i < c->r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		b.root = per_thread ? trie_child(tr, 0, CONVERT_THREAD_NODE | (uint32_t)i) : 0;
		struct convert_thread_info info;
		convert_walk(c, &c->r->threads[i], &k, &info);
		trie_add_sampled(c, tr, b.root, &c->r->threads[i]);
		if (info.unattributed_allocs || info.unattributed_bytes) {
			uint32_t n = trie_child(tr, b.root, c->unattributed);
			tr->val[n][CONVERT_V_ALLOC_COUNT] += info.unattributed_allocs;
			tr->val[n][CONVERT_V_ALLOC_BYTES] += info.unattributed_bytes;
		}
	}
	free(b.node);
	return 0;
}

void convert_trie_free(struct convert_trie *tr)
{
	free(tr->parent);
	free(tr->func);
	free(tr->val);
	free(tr->slots);
	memset(tr, 0, sizeof(*tr));
}

void convert_part_end(struct convert_part *part)
{
	if (part->state && part->free_state)
		part->free_state(part->state);
	part->state = NULL;
	part->free_state = NULL;
}

uint64_t convert_origin_realtime(const struct convert_ctx *c)
{
	const struct rhea_file_header *h = &c->r->hdr;
	if (c->origin_ns >= h->start_ns)
		return h->start_realtime_ns + (c->origin_ns - h->start_ns);
	uint64_t before = h->start_ns - c->origin_ns;
	return h->start_realtime_ns >= before ? h->start_realtime_ns - before : 0;
}

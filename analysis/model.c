/*
 * model.c - samples to nested slices (DESIGN.md 1.5), the single model
 * behind `rhea report` and every `rhea convert` format.
 *
 * Symbolization first: every distinct node address is resolved once
 * (symbolize.c caches by address) and mapped to a function id, so that two
 * samples at different lines of the same function continue the same slice.
 * Unresolved addresses become functions named module+0xoffset.
 *
 * Then, per thread, consecutive samples are compared from the root:
 *
 *   - frames common to the open slices and the new sample continue;
 *   - open slices beyond the common prefix end, new frames begin, at the new
 *     sample's begin time (policy NEXT: the time between two samples belongs
 *     to the earlier stack, as a sampling profiler weights a sample by the
 *     interval after it) or at the end of the last sample that saw them
 *     (policy LAST: never longer than observed);
 *   - a change of message id (the thread came back from its event-loop wait)
 *     ends every open slice even when the stack is the same, so that two
 *     executions of the same handler are two slices, not one;
 *   - a BLOCK sample (a lock wait, sleep, poll, blocking read...) adds a
 *     pseudo-frame named after the call under its caller, from the call to
 *     its return.
 *
 * Counters (CPU time, allocations, faults, switches) are read at slice
 * boundaries from the samples' counter snapshots, so a slice's deltas are
 * exact for the span the model gives it.
 */
#include "model.h"
#include "hookfn.h"
#include "symbolize.h"
#include "vec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The analysis has no way on without its tables. */
/*
 * The stacks model_frames walked, root first, in one pool: a conversion
 * asks for each sample's frames four or five times (the timeline, the CPU
 * tally, the correction, the converter), and a walk is a chain of
 * dependent loads from the leaf up, 8% of a Perfetto conversion.  A copy
 * of a stack walked before is a short sequential read.  The pool is
 * bounded (MEMO_MAX words): past it, stacks are walked every time.
 */
struct model_memo {
	uint32_t *at;    /* stack (leaf node id) -> 1 + its place in pool, 0 none */
	uint32_t *pool;  /* per stack: n | MEMO_CUT when the walk stopped at the limit, then n frames */
	size_t len, cap;
};
#define MEMO_MAX (16u << 20)
#define MEMO_CUT 0x80000000u

static void oom(void)
{
	fprintf(stderr, "rhea: out of memory\n");
	exit(1);
}

#define MAX_FRAMES MODEL_MAX_FRAMES

struct index {
	uint32_t *slots;
	uint32_t nslots;
};

static uint64_t hash_str(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603ull;
	for (; *a; a++)
		h = (h ^ (unsigned char)*a) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (; b && *b; b++)
		h = (h ^ (unsigned char)*b) * 1099511628211ull;
	return h;
}

static int same_func(const struct model_func *f, const char *name, const char *module)
{
	return strcmp(f->name, name) == 0 &&
	       strcmp(f->module ? f->module : "", module ? module : "") == 0;
}

static void index_put(struct model *m, uint32_t id);

static void index_grow(struct model *m)
{
	struct index *ix = m->index;
	uint32_t n = ix->nslots ? ix->nslots * 2 : 1024;
	free(ix->slots);
	ix->slots = calloc(n, sizeof(uint32_t));
	if (!ix->slots)
		oom();
	ix->nslots = n;
	for (uint32_t i = 1; i < m->nfuncs; i++)
		index_put(m, i);
}

static void index_put(struct model *m, uint32_t id)
{
	struct index *ix = m->index;
	const struct model_func *f = &m->funcs[id];
	uint32_t mask = ix->nslots - 1;
	for (uint32_t i = (uint32_t)hash_str(f->name, f->module) & mask;; i = (i + 1) & mask)
		if (ix->slots[i] == 0) {
			ix->slots[i] = id;
			return;
		}
}

uint32_t model_func_intern(struct model *m, const char *name, const char *module,
			   const char *file, int line, int kind)
{
	struct index *ix = m->index;
	if (ix->nslots) {
		uint32_t mask = ix->nslots - 1;
		for (uint32_t i = (uint32_t)hash_str(name, module) & mask; ix->slots[i]; i = (i + 1) & mask)
			if (same_func(&m->funcs[ix->slots[i]], name, module))
				return ix->slots[i];
	}
	if (m->nfuncs + 1 > m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->funcs = realloc(m->funcs, m->cap * sizeof(*m->funcs));
		if (!m->funcs)
			oom();
	}
	uint32_t id = m->nfuncs++;
	struct model_func *f = &m->funcs[id];
	memset(f, 0, sizeof(*f));
	f->name = strdup(name);
	f->module = module ? strdup(module) : NULL;
	f->file = file ? strdup(file) : NULL;
	f->line = line;
	f->kind = kind;
	static const char *const roots[] = {"main", "__libc_start_main", "__libc_start_call_main",
					    "start_thread", "clone", "clone3", "_start"};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		if (strcmp(name, roots[i]) == 0)
			f->root = 1;
	if (id == 0)
		return 0;
	if ((m->nfuncs) * 2 > ix->nslots)
		index_grow(m);
	else
		index_put(m, id);
	return id;
}

/*
 * JIT code's names: the perf map the recording keeps (rhea record's
 * compaction put in it the lines that name its stacks' code, see
 * cli/compact.c), else the one the process wrote (/tmp/perf-PID.map, see
 * sym_perf_map_of), or the file RHEA_PERF_MAP names ("none": no map).
 */
static void add_perf_map(struct model *m, const struct recording *r)
{
	/* the names of a container's functions that rhea attach kept (its
	 * files are the container's: cli/compact.c, keep_code_names) */
	const char *names = recording_meta(r, "code_names");
	if (names)
		sym_add_perf_map_text(m->sym, names, strlen(names), "the recording's code names");
	const char *env = getenv("RHEA_PERF_MAP");
	if (env && strcmp(env, "none") == 0)
		return;
	const char *kept = recording_meta(r, "perf_map");
	if ((!env || !*env) && kept) {
		const char *from = recording_meta(r, "perf_map_source");
		if (!from)
			from = "perf map";
		if (sym_add_perf_map_text(m->sym, kept, strlen(kept), from) == 0) {
			m->perf_map = strdup(from);
			m->perf_map_kept = 1;
		}
		return;
	}
	char path[64];
	if (!env || !*env) {
		if (!sym_perf_map_of(r->hdr.pid, r->hdr.start_realtime_ns, 0, path, sizeof(path)))
			return;
		env = path;
	}
	int err = sym_add_perf_map(m->sym, env);
	if (err == 0)
		m->perf_map = strdup(env);
	else if (err != -ENOENT || env != path)
		fprintf(stderr, "rhea: perf map %s: %s (JIT code stays unnamed)\n", env, strerror(-err));
}

/*
 * Addresses no module claims (JIT code without a perf map) have no
 * function to group them: one "?+0x..." function per address split a hot
 * JIT loop into as many functions as it had sampled instructions (node:
 * 14%, 3.4% and 3.4% for three instructions 49 bytes apart).  Addresses
 * within UNCLAIMED_GAP bytes of the previous one are taken for one piece
 * of code, named after the lowest: an approximation (two small functions
 * side by side can merge), said in the report's JIT note.
 */
#define UNCLAIMED_GAP 64

/* The start of addr's group in the sorted unique addresses v[0..n). */
static uint64_t unclaimed_group(const uint64_t *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) { /* first >= addr */
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == n || v[lo] != addr)
		return addr;
	while (lo > 0 && v[lo] - v[lo - 1] <= UNCLAIMED_GAP)
		lo--;
	return v[lo];
}

int model_funcs_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->index = calloc(1, sizeof(struct index));
	if (!m->index)
		return -ENOMEM;
	model_func_intern(m, "[unknown]", NULL, NULL, 0, MODEL_SPECIAL);
	return 0;
}

int model_build(struct model *m, struct recording *r, int policy)
{
	return model_build_shared(m, r, policy, NULL);
}

int model_build_shared(struct model *m, struct recording *r, int policy, struct symbolizer *sym)
{
	memset(m, 0, sizeof(*m));
	m->rec = r;
	m->policy = policy;
	m->index = calloc(1, sizeof(struct index));
	m->sym_shared = sym != NULL;
	if (sym)
		sym_begin_process(sym);
	m->sym = sym ? sym : sym_new();
	if (!m->index || !m->sym)
		return -ENOMEM;
	model_func_intern(m, "[unknown]", NULL, NULL, 0, MODEL_SPECIAL);
	add_perf_map(m, r); /* first: a module whose file is unusable says whether it names it */
	for (size_t i = 0; i < r->nmods; i++) {
		const struct rec_module *rm = &r->mods[i];
		struct sym_module sm = {rm->path, rm->bias, rm->lo, rm->hi, rm->build_id, rm->build_id_len};
		sym_add_module(m->sym, &sm);
	}
	m->node_func = calloc(r->nnodes ? r->nnodes : 1, sizeof(uint32_t));
	m->memo = calloc(1, sizeof(*m->memo));
	if (!m->node_func || !m->memo || !(m->memo->at = calloc(r->nnodes ? r->nnodes : 1, sizeof(uint32_t))))
		return -ENOMEM;
	uint32_t trunc = model_func_intern(m, "[truncated]", NULL, NULL, 0, MODEL_SPECIAL);
	/* named in one pass; addresses no module claims wait for their group */
	uint32_t *unc_id = malloc((r->nnodes ? r->nnodes : 1) * sizeof(uint32_t));
	uint64_t *unc = malloc((r->nnodes ? r->nnodes : 1) * sizeof(uint64_t));
	size_t nun = 0;
	if (!unc_id || !unc) {
		free(unc_id);
		free(unc);
		return -ENOMEM;
	}
	for (uint32_t id = 1; id < r->nnodes; id++) {
		if (!r->nodes_known[id])
			continue;
		uint64_t addr = r->nodes[id].addr;
		if (addr == 1) {
			m->node_func[id] = trunc;
			continue;
		}
		struct sym_frame f;
		char buf[512];
		sym_resolve(m->sym, addr, &f);
		if (!f.func && f.module && strcmp(f.module, "?") == 0) {
			unc_id[nun] = id;
			unc[nun++] = addr;
			continue;
		}
		const char *name = sym_frame_name(&f, buf, sizeof(buf));
		m->node_func[id] = model_func_intern(m, name, f.module, f.file, f.line, MODEL_CODE);
	}
	uint64_t *sorted = malloc((nun ? nun : 1) * sizeof(uint64_t));
	if (!sorted) {
		free(unc_id);
		free(unc);
		return -ENOMEM;
	}
	memcpy(sorted, unc, nun * sizeof(uint64_t));
	vec_sort(sorted, nun, sizeof(*sorted), vec_cmp_u64);
	size_t ns = 0;
	for (size_t i = 0; i < nun; i++)
		if (ns == 0 || sorted[i] != sorted[ns - 1])
			sorted[ns++] = sorted[i];
	for (size_t i = 0; i < nun; i++) {
		struct sym_frame f;
		char buf[64];
		memset(&f, 0, sizeof(f));
		f.module = "?";
		f.module_off = unclaimed_group(sorted, ns, unc[i]);
		m->node_func[unc_id[i]] =
			model_func_intern(m, sym_frame_name(&f, buf, sizeof(buf)), f.module, NULL, 0, MODEL_CODE);
	}
	free(sorted);
	free(unc_id);
	free(unc);
	for (unsigned fn = 0; fn < RHEA_FN_COUNT && fn < 256; fn++) {
		if (!rhea_fn_blocking(fn))
			continue;
		uint32_t id = model_func_intern(m, rhea_fn_name(fn), "[blocked]", NULL, 0, MODEL_WAIT);
		m->funcs[id].trigger = fn;
		m->wait_func[fn] = id;
	}
	return 0;
}

const char *model_object_name(const struct model *m, unsigned trigger, uint64_t obj, char *buf, size_t len)
{
	if (rhea_fn_class(trigger) != RHEA_C_LOCK || !m->sym || sym_data_name(m->sym, obj, buf, len) != 0)
		return NULL;
	return buf;
}

void model_free(struct model *m)
{
	for (uint32_t i = 0; i < m->nfuncs; i++) {
		free(m->funcs[i].name);
		free(m->funcs[i].module);
		free(m->funcs[i].file);
	}
	free(m->funcs);
	free(m->node_func);
	if (m->memo) {
		free(m->memo->at);
		free(m->memo->pool);
		free(m->memo);
	}
	free(m->perf_map);
	if (m->index) {
		free(((struct index *)m->index)->slots);
		free(m->index);
	}
	if (m->sym && !m->sym_shared)
		sym_free(m->sym);
	memset(m, 0, sizeof(*m));
}


/* The frames of stack id, root first, into out: at most max - 1 (the
 * innermost), their number, or an [unknown] root where the chain breaks. */
static int walk_frames(const struct model *m, uint32_t id, uint32_t *out, int max, int *cut)
{
	const struct recording *r = m->rec;
	int n = 0;
	int guard = 0;
	/* Leaf to root into the tail of out, then to the front. */
	while (id != 0 && n < max - 1) {
		if (id >= r->nnodes || !r->nodes_known[id] || ++guard > MAX_FRAMES) {
			out[max - 1 - n++] = 0; /* [unknown] root: the rest is missing */
			id = 0;
			break;
		}
		out[max - 1 - n++] = m->node_func[id];
		id = r->nodes[id].parent;
	}
	*cut = id != 0;
	memmove(out, out + (max - n), (size_t)n * sizeof(*out));
	return n;
}

/* walk_frames through the memo: the same result. */
static int memo_frames(const struct model *m, uint32_t id, uint32_t *out, int max)
{
	struct model_memo *mm = m->memo;
	int cut;
	if (!mm || id == 0 || id >= m->rec->nnodes)
		return walk_frames(m, id, out, max, &cut);
	uint32_t at = mm->at[id];
	if (at) {
		uint32_t h = mm->pool[at - 1], n = h & ~MEMO_CUT;
		/* (a walk stopped at the limit says nothing of a longer one) */
		if ((int)n <= max - 1 && (!(h & MEMO_CUT) || max == MAX_FRAMES)) {
			memcpy(out, mm->pool + at, n * sizeof(*out));
			return (int)n;
		}
		return walk_frames(m, id, out, max, &cut);
	}
	if (max != MAX_FRAMES)
		return walk_frames(m, id, out, max, &cut);
	int n = walk_frames(m, id, out, max, &cut);
	if (mm->len + 1 + (size_t)n <= MEMO_MAX &&
	    vec_grow((void **)&mm->pool, &mm->cap, mm->len + 1 + (size_t)n, sizeof(*mm->pool)) == 0) {
		mm->pool[mm->len] = (uint32_t)n | (cut ? MEMO_CUT : 0);
		memcpy(mm->pool + mm->len + 1, out, (size_t)n * sizeof(*out));
		mm->at[id] = (uint32_t)mm->len + 1;
		mm->len += 1 + (size_t)n;
	}
	return n;
}

int model_frames(const struct model *m, const struct rhea_sample *s, uint32_t *out, int max)
{
	int n = memo_frames(m, s->stack, out, max);
	if (m->corrected && s->reserved && (int)s->reserved < n)
		n = (int)s->reserved; /* ends above a thinned function (model_correct) */
	if ((s->h.flags & RHEA_S_BLOCK) && n < max && s->trigger < 256 && m->wait_func[s->trigger])
		out[n++] = m->wait_func[s->trigger];
	return n;
}

struct walk {
	struct model_slice open[MAX_FRAMES];
	int depth;
	uint32_t *active; /* per func: open slices of it */
	const struct rec_thread *t;
	const struct model_cb *cb;
};

static void close_to(struct walk *w, int depth, uint64_t t, const struct rhea_counters *c)
{
	while (w->depth > depth) {
		struct model_slice *s = &w->open[--w->depth];
		s->end_ns = t < s->begin_ns ? s->begin_ns : t;
		s->ce = *c;
		w->active[s->func]--;
		if (w->depth > 0) {
			w->open[w->depth - 1].child_ns += s->end_ns - s->begin_ns;
			w->open[w->depth - 1].child_cpu_ns +=
				s->ce.cpu_ns > s->cb.cpu_ns ? s->ce.cpu_ns - s->cb.cpu_ns : 0; /* (counters that went down: none) */
		}
		if (w->cb->end)
			w->cb->end(w->cb->arg, w->t, s);
	}
}

static void open_frame(struct walk *w, uint32_t func, uint64_t t, const struct rhea_counters *c,
		       const struct rhea_sample *sample)
{
	struct model_slice *s = &w->open[w->depth];
	memset(s, 0, sizeof(*s));
	s->func = func;
	s->depth = w->depth;
	s->begin_ns = t;
	s->cb = *c;
	s->msgid = sample->msgid;
	s->sample = sample;
	s->outermost = w->active[func] == 0;
	w->active[func]++;
	w->depth++;
	if (w->cb->begin)
		w->cb->begin(w->cb->arg, w->t, s);
}

void model_walk_thread(struct model *m, const struct rec_thread *t, const struct model_cb *cb)
{
	struct walk *w = calloc(1, sizeof(*w));
	uint32_t *frames = malloc(MAX_FRAMES * sizeof(uint32_t));
	if (!w || !frames)
		oom();
	w->active = calloc(m->nfuncs, sizeof(uint32_t));
	w->t = t;
	w->cb = cb;
	uint64_t cursor = 0;                 /* time of the last boundary */
	const struct rhea_counters *cursor_c = NULL; /* the thread's counters then */
	const struct rhea_sample *prev = NULL;
	for (size_t i = 0; i < t->nsamples; i++) {
		const struct rhea_sample *s = &t->samples[i];
		/* A sample taken from outside while a recorded blocking call was
		 * in progress says nothing the BLOCK sample does not. */
		if ((s->h.flags & RHEA_S_ASYNC) && prev && (prev->h.flags & RHEA_S_BLOCK) &&
		    s->begin_ns <= prev->end_ns)
			continue;
		int n = model_frames(m, s, frames, MAX_FRAMES);
		/* A capture inside the previous sample's time (a hook run in a
		 * wait's call after it woke: the free in pthread_join) starts
		 * where that one ends, with the counters read there: its own,
		 * read earlier, would count the time in between twice (88 us of
		 * CPU in 77 of wall). */
		uint64_t at = s->begin_ns;
		const struct rhea_counters *c_at = &s->c_begin;
		int inside = s->begin_ns < cursor;
		if (inside) {
			at = cursor;
			c_at = cursor_c;
		}
		/* (under LAST, what ends, ends at the last boundary: the end of
		 * the previous sample, or where it was moved to) */
		if (prev && prev->msgid != s->msgid)
			close_to(w, 0, m->policy == MODEL_END_LAST ? cursor : at,
				 m->policy == MODEL_END_LAST ? cursor_c : c_at);
		int k = 0;
		int cont = (s->h.flags & RHEA_S_BLOCK) ? n - 1 : n; /* a wait never continues */
		while (k < w->depth && k < cont && w->open[k].func == frames[k])
			k++;
		if (w->depth > k) {
			if (m->policy == MODEL_END_LAST && prev)
				close_to(w, k, cursor, cursor_c);
			else
				close_to(w, k, at, c_at);
		}
		for (int j = k; j < n; j++)
			open_frame(w, frames[j], at, c_at, s);
		if (!inside || s->end_ns > at) {
			cursor = s->end_ns > at ? s->end_ns : at;
			cursor_c = &s->c_end;
		}
		if ((s->h.flags & RHEA_S_BLOCK) && n > 0)
			close_to(w, n - 1, s->end_ns, &s->c_end);
		prev = s;
	}
	/* The thread's exit is its last event: under NEXT, its open frames
	 * last until then (a thread computing to its end is not cut at its
	 * last sample).  Its counters there are unknown: the last ones. */
	if (prev) {
		uint64_t end = cursor;
		if (m->policy == MODEL_END_NEXT && t->exit_ns > end && t->exit_ns - end < 10000000000ull)
			end = t->exit_ns;
		close_to(w, 0, end, cursor_c);
	}
	free(w->active);
	free(w);
	free(frames);
}

/* ---- the hook-site correction (model.h, model_correct) -------------------- */

struct tally {
	double *cpu;      /* per func: the thread's timeline CPU (ns), outermost slices */
	double thread_cpu; /* the thread's CPU on the timeline (depth-0 slices) */
};

static void tally_end(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)t;
	struct tally *y = arg;
	double cpu = (double)(s->ce.cpu_ns - s->cb.cpu_ns);
	if (s->ce.cpu_ns < s->cb.cpu_ns)
		return;
	if (s->outermost)
		y->cpu[s->func] += cpu;
	if (s->depth == 0)
		y->thread_cpu += cpu;
}

double model_wilson_hi(double p, double n, double z)
{
	double z2 = z * z;
	return (p + z2 / (2 * n) + z * sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n);
}

uint64_t model_cpu_tally(const struct model *m, const struct rec_thread *t, int rooted, uint64_t *incl,
			 uint64_t *self, uint32_t *ids, uint8_t *seen)
{
	uint64_t total = 0;
	for (size_t k = 0; k < t->nsamples; k++) {
		const struct rhea_sample *s = &t->samples[k];
		uint64_t w = model_cpu_periods(s);
		if (!w)
			continue;
		int n = model_frames(m, s, ids, MAX_FRAMES);
		if (rooted && !model_reaches_root(m, ids, n))
			continue;
		total += w;
		if (n == 0)
			continue;
		if (self)
			self[ids[n - 1]] += w;
		for (int j = 0; j < n; j++)
			if (!seen[ids[j]]) {
				seen[ids[j]] = 1;
				incl[ids[j]] += w;
			}
		for (int j = 0; j < n; j++)
			seen[ids[j]] = 0;
	}
	return total;
}

/* Pass 2 of model_correct: which hooks' captures keep each thinned function
 * (keep[f] < 1), into their reserved field. */
static void decide_cuts(struct model *m, const double *keep, uint32_t *ids, uint8_t *seen)
{
	const struct recording *r = m->rec;
	uint32_t nf = m->nfuncs;
	double *target = calloc(nf, sizeof(double)), *kept = calloc(nf, sizeof(double));
	if (!target || !kept)
		oom();
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		for (size_t k = 0; k < t->nsamples; k++) {
			struct rhea_sample *s = (struct rhea_sample *)&t->samples[k];
			if (s->h.flags & (RHEA_S_BLOCK | RHEA_S_ASYNC))
				continue;
			int n = model_frames(m, s, ids, MAX_FRAMES);
			double w = 1.0 + s->merged;
			uint32_t cut = 0;
			for (int j = 1; j < n; j++) {
				uint32_t f = ids[j];
				if (keep[f] >= 1 || seen[f])
					continue;
				seen[f] = 1;
				target[f] += w * keep[f];
				if (cut)
					continue; /* counts toward f's share all the same */
				if (kept[f] + w / 2 <= target[f])
					kept[f] += w;
				else
					cut = (uint32_t)j;
			}
			for (int j = 1; j < n; j++)
				seen[ids[j]] = 0;
			s->reserved = cut;
		}
	}
	free(target);
	free(kept);
}

/* The smallest share of the CPU the timeline may give a function before it
 * is thinned: below, a distortion matters little.  (It was 10%, when
 * every process was corrected on its own evidence; pooled, a build's
 * allocation wrappers at 6-8% each are told apart clearly.) */
#define CUT_MIN_SHARE 0.03

/* Work arrays of pass 1, as large as the largest model's functions. */
struct evidence {
	double *tl, *sp;       /* per key: the timeline's CPU, the sampler's estimate of it (ns) */
	double cpu_all, periods_all;
	double *thr_cpu;       /* per func of the model at hand */
	uint64_t *periods;
	uint32_t *ids;
	uint8_t *seen;
};

/* Pass 1 for one model: each sampled thread's timeline CPU per function
 * and the sampler's share of it, as CPU of that thread (a thread sampled
 * at another period weighs by its CPU, not by its number of periods),
 * added under the functions' keys. */
static void gather(struct model *m, const uint32_t *key, struct evidence *ev)
{
	const struct recording *r = m->rec;
	uint32_t nf = m->nfuncs;
	memset(ev->periods, 0, nf * sizeof(uint64_t));
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		/* The sampler's captures that reach a root: periods per func. */
		double total = (double)model_cpu_tally(m, t, 1, ev->periods, NULL, ev->ids, ev->seen);
		if (total == 0)
			continue;
		/* The timeline's CPU per func on this thread. */
		memset(ev->thr_cpu, 0, nf * sizeof(double));
		struct tally y = {ev->thr_cpu, 0};
		struct model_cb cb = {NULL, tally_end, &y};
		model_walk_thread(m, t, &cb);
		if (y.thread_cpu > 0) {
			for (uint32_t f = 0; f < nf; f++) {
				ev->tl[key[f]] += ev->thr_cpu[f];
				ev->sp[key[f]] += (double)ev->periods[f] / total * y.thread_cpu;
			}
			ev->cpu_all += y.thread_cpu;
			ev->periods_all += total;
		}
		memset(ev->periods, 0, nf * sizeof(uint64_t));
	}
}

int model_correct(struct model *m, struct model_cut *out, int max)
{
	return model_correct_pooled(&m, 1, out, max);
}

/*
 * The functions of all n models under one key each, by (name, module): a
 * function thinned in one process of a program is thinned in all of them,
 * on the evidence of all (a build's 40 compiler runs of half a second
 * each: none has the sampler's periods to tell alone, together they have
 * a thousand).  Key 0: never thinned (not code, or a root).
 */
int model_correct_pooled(struct model *const *ms, size_t n, struct model_cut *out, int max)
{
	struct model names;
	uint32_t **key = calloc(n ? n : 1, sizeof(*key));
	uint32_t maxf = 1;
	if (!key || model_funcs_init(&names) < 0)
		oom();
	for (size_t k = 0; k < n; k++) {
		struct model *m = ms[k];
		m->corrected = 0;
		key[k] = malloc((m->nfuncs ? m->nfuncs : 1) * sizeof(uint32_t));
		if (!key[k])
			oom();
		for (uint32_t f = 0; f < m->nfuncs; f++) {
			const struct model_func *fn = &m->funcs[f];
			key[k][f] = fn->kind == MODEL_CODE && !fn->root
					    ? model_func_intern(&names, fn->name, fn->module, NULL, 0, MODEL_CODE)
					    : 0;
		}
		if (m->nfuncs > maxf)
			maxf = m->nfuncs;
	}
	uint32_t nk = names.nfuncs;
	struct evidence ev = {calloc(nk, sizeof(double)), calloc(nk, sizeof(double)), 0, 0,
			      calloc(maxf, sizeof(double)), calloc(maxf, sizeof(uint64_t)),
			      malloc(MAX_FRAMES * sizeof(uint32_t)), calloc(maxf, 1)};
	double *keep = malloc(maxf > nk ? maxf * sizeof(double) : nk * sizeof(double));
	if (!ev.tl || !ev.sp || !ev.thr_cpu || !ev.periods || !ev.ids || !ev.seen || !keep)
		oom();
	for (size_t k = 0; k < n; k++)
		gather(ms[k], key[k], &ev);
	/* keep[j]: the share of its captures key j keeps */
	int ncut = 0;
	double *keep_key = ev.tl; /* reused, read before written */
	for (uint32_t j = 0; j < nk; j++) {
		double t = ev.cpu_all > 0 ? ev.tl[j] / ev.cpu_all : 0, s = ev.cpu_all > 0 ? ev.sp[j] / ev.cpu_all : 0;
		keep_key[j] = 1;
		if (j == 0 || ev.periods_all < 50 || t < CUT_MIN_SHARE || model_wilson_hi(s, ev.periods_all, 3.0) >= t * 2 / 3)
			continue;
		keep_key[j] = s / t;
		/* out keeps the largest max, sorted (insertion: max is small) */
		int at = ncut < max ? ncut : max;
		while (at > 0 && out[at - 1].timeline < t) {
			if (at < max)
				out[at] = out[at - 1];
			at--;
		}
		if (at < max) {
			/* named by the first model that has it */
			size_t k = 0;
			uint32_t f = 0;
			for (; k < n; k++) {
				for (f = 0; f < ms[k]->nfuncs && key[k][f] != j; f++)
					;
				if (f < ms[k]->nfuncs)
					break;
			}
			out[at] = (struct model_cut){f, ms[k], t, s};
		}
		ncut++;
	}
	for (size_t k = 0; k < n; k++) {
		struct model *m = ms[k];
		const struct recording *r = m->rec;
		for (size_t i = 0; i < r->nthreads; i++)
			for (size_t x = 0; x < r->threads[i].nsamples; x++)
				((struct rhea_sample *)&r->threads[i].samples[x])->reserved = 0;
		int any = 0;
		for (uint32_t f = 0; f < m->nfuncs; f++) {
			keep[f] = keep_key[key[k][f]];
			any |= keep[f] < 1;
		}
		if (any) {
			decide_cuts(m, keep, ev.ids, ev.seen);
			m->corrected = 1;
		}
		free(key[k]);
	}
	free(key);
	free(ev.tl);
	free(ev.sp);
	free(ev.thr_cpu);
	free(ev.periods);
	free(ev.ids);
	free(ev.seen);
	free(keep);
	model_free(&names);
	return ncut;
}

int model_cut_note(const struct model *m, const struct model_cut *c, int n, char *buf, size_t len)
{
	if (n <= 0 || !c)
		return 0;
	int w = snprintf(buf, len, "the timeline is corrected for hooked call sites: ");
	int shown = n < 4 ? n : 4;
	for (int i = 0; i < shown && w > 0 && (size_t)w < len; i++)
		w += snprintf(buf + w, len - (size_t)w, "%s%s %.0f%% of the CPU as captured, %.0f%% by the "
			      "sampler", i ? "; " : "", (c[i].model ? c[i].model : m)->funcs[c[i].func].name, 100 * c[i].timeline,
			      100 * c[i].sampler);
	if (w > 0 && (size_t)w < len && n > shown)
		w += snprintf(buf + w, len - (size_t)w, "; and %d more", n - shown);
	if (w > 0 && (size_t)w < len)
		snprintf(buf + w, len - (size_t)w, ". Each stays on the sampler's share of the hooks' "
			 "captures; on the others the stack ends at its caller, which gets the time "
			 "(--timeline raw: every stack as captured)");
	return 1;
}

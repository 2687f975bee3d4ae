/*
 * report.c - `rhea report`: what every thread did and where the time went,
 * from the slice model (model.c), in an 80-column text layout or as JSON
 * carrying the same data (tests assert on the JSON).
 *
 * Tables: threads; functions by inclusive and by self time (wall, CPU,
 * allocations inside); exact allocation sites (the agent counts every
 * allocation per calling site); time per hook class (captures, blocked
 * time); blocking calls; recording statistics (samples, merges, drops,
 * truncated stacks, unwind failures, how many stacks reach a root such as
 * main or start_thread).
 */
#include "report.h"
#include "convert.h"
#include "stalls.h"
#include "hookfn.h"
#include "json.h"
#include "symbolize.h"
#include "vec.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct fstat {
	uint64_t incl_ns, self_ns, incl_cpu, self_cpu;
	uint64_t alloc_count, alloc_bytes, slices;
	uint64_t minflt, majflt, nvcsw, nivcsw;
};

struct tstat {
	uint64_t captures, first_ns, last_ns, cpu_ns, alloc_count, alloc_bytes;
	uint64_t sampled, sampled_periods, forced, blocks;
};

struct site_row {
	char *name;
	const char *module, *file;
	int line;
	uint64_t count, bytes;
};

struct agg {
	struct model *m;
	struct fstat *f;
};

static void on_end(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)t;
	struct agg *a = arg;
	struct fstat *f = &a->f[s->func];
	uint64_t dur = s->end_ns - s->begin_ns;
	uint64_t cpu = s->ce.cpu_ns >= s->cb.cpu_ns ? s->ce.cpu_ns - s->cb.cpu_ns : 0;
	uint64_t self = dur >= s->child_ns ? dur - s->child_ns : 0;
	uint64_t self_cpu = cpu >= s->child_cpu_ns ? cpu - s->child_cpu_ns : 0;
	f->self_ns += self;
	f->self_cpu += self_cpu;
	if (s->outermost) {
		f->incl_ns += dur;
		f->incl_cpu += cpu;
		f->alloc_count += s->ce.alloc_count - s->cb.alloc_count;
		f->alloc_bytes += s->ce.alloc_bytes - s->cb.alloc_bytes;
		f->minflt += s->ce.minflt - s->cb.minflt;
		f->majflt += s->ce.majflt - s->cb.majflt;
		f->nvcsw += s->ce.nvcsw - s->cb.nvcsw;
		f->nivcsw += s->ce.nivcsw - s->cb.nivcsw;
		f->slices++;
	}
}

static const struct fstat *sort_f;
static int by_incl(const void *a, const void *b)
{
	uint64_t x = sort_f[*(const uint32_t *)a].incl_ns, y = sort_f[*(const uint32_t *)b].incl_ns;
	return (x < y) - (x > y);
}
static int by_self(const void *a, const void *b)
{
	uint64_t x = sort_f[*(const uint32_t *)a].self_ns, y = sort_f[*(const uint32_t *)b].self_ns;
	return (x < y) - (x > y);
}
static int by_site(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;
	if (x->count != y->count)
		return (x->count < y->count) - (x->count > y->count);
	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}
static int by_site_bytes(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;
	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* "1.23 s", "45.6 ms", "789 us", "12 ns": 4 significant-ish digits, each
 * unit from where the value rounds to its first step (9.996 s is "10.0 s",
 * not "10.00 s"; 999.96 ms is "1.00 s", not "1000.0 ms"). */
static const char *fmt_ns(uint64_t ns, char *buf)
{
	if (ns >= 9995000000ull)
		sprintf(buf, "%.1f s", ns / 1e9);
	else if (ns >= 999950000ull)
		sprintf(buf, "%.2f s", ns / 1e9);
	else if (ns >= 999950)
		sprintf(buf, "%.1f ms", ns / 1e6);
	else if (ns >= 1000)
		sprintf(buf, "%.1f us", ns / 1e3);
	else
		sprintf(buf, "%" PRIu64 " ns", ns);
	return buf;
}

static const char *fmt_count(uint64_t v, char *buf)
{
	if (v >= 9999950000ull)
		sprintf(buf, "%.1fG", v / 1e9);
	else if (v >= 9999950)
		sprintf(buf, "%.1fM", v / 1e6);
	else if (v >= 100000)
		sprintf(buf, "%.1fk", v / 1e3);
	else
		sprintf(buf, "%" PRIu64, v);
	return buf;
}

static const char *fmt_bytes(uint64_t v, char *buf)
{
	if (v >= (10ull << 30))
		sprintf(buf, "%.1f GiB", v / 1073741824.0);
	else if (v >= (10ull << 20))
		sprintf(buf, "%.1f MiB", v / 1048576.0);
	else if (v >= (10ull << 10))
		sprintf(buf, "%.1f KiB", v / 1024.0);
	else
		sprintf(buf, "%" PRIu64 " B", v);
	return buf;
}

/* "s" unless n is 1: "%s wait%s", fmt_count(n, b), PLURAL(n) */
#define PLURAL(n) ((n) == 1 ? "" : "s")

/* Fit a name into w columns, eliding the middle. */
static const char *fit(const char *s, int w, char *buf)
{
	int n = (int)strlen(s);
	if (n <= w || w < 8)
		return s;
	int head = (w - 3) / 2, tail = w - 3 - head;
	memcpy(buf, s, (size_t)head);
	memcpy(buf + head, "...", 3);
	memcpy(buf + head + 3, s + n - tail, (size_t)tail + 1);
	return buf;
}

/* Fit a stack line ("inner < outer < ...") into w columns by leaving out
 * its outermost frames, the innermost kept whole; fit() when even the
 * first frame is too long. */
static const char *fit_frames(const char *s, int w, char *buf)
{
	int n = (int)strlen(s);
	if (n <= w || w < 8)
		return s;
	const char *cut = NULL;
	for (const char *p = strstr(s, " < "); p && p - s + 6 <= w; p = strstr(p + 3, " < "))
		cut = p;
	if (!cut)
		return fit(s, w, buf);
	memcpy(buf, s, (size_t)(cut - s));
	memcpy(buf + (cut - s), " < ...", 7);
	return buf;
}

/* A thread's CPU time counts from 0 when it was created under the agent;
 * one that was running already (the main thread, every thread of a
 * process rhea attach joined) counts from its first sample, so that the
 * time it ran before the recording is left out. */
static void thread_stats(const struct recording *r, const struct rec_thread *t, struct tstat *ts)
{
	memset(ts, 0, sizeof(*ts));
	uint64_t cpu_base = t->parent_tid ? 0 : UINT64_MAX;
	for (size_t i = 0; i < t->nsamples; i++) {
		const struct rhea_sample *s = &t->samples[i];
		ts->captures += 1u + s->merged;
		if (s->trigger == RHEA_FN_SAMPLER) {
			ts->sampled += 1u + s->merged;
			ts->sampled_periods += s->object; /* (with the timer's overruns) */
		} else if (s->trigger == RHEA_FN_FORCED)
			ts->forced += 1u + s->merged;
		if (s->h.flags & RHEA_S_BLOCK)
			ts->blocks++;
		if (!ts->first_ns || s->begin_ns < ts->first_ns)
			ts->first_ns = s->begin_ns;
		if (s->end_ns > ts->last_ns)
			ts->last_ns = s->end_ns;
		if (s->c_end.cpu_ns > ts->cpu_ns)
			ts->cpu_ns = s->c_end.cpu_ns;
		if (s->c_begin.cpu_ns < cpu_base)
			cpu_base = s->c_begin.cpu_ns;
		if (s->c_end.alloc_count > ts->alloc_count) {
			ts->alloc_count = s->c_end.alloc_count;
			ts->alloc_bytes = s->c_end.alloc_bytes;
		}
	}
	if (cpu_base != UINT64_MAX)
		ts->cpu_ns = ts->cpu_ns > cpu_base ? ts->cpu_ns - cpu_base : 0;
	if (t->start_ns && (!ts->first_ns || t->start_ns < ts->first_ns))
		ts->first_ns = t->start_ns;
	/* Not before the recording's first sample, where its time starts:
	 * rhea attach's agent names every thread while the process is still
	 * stopped for it (tens of ms, 200 for a first load), and a thread's
	 * wall came out longer than the recording (1.21 s in 1.09). */
	if (r->first_ns && ts->first_ns < r->first_ns)
		ts->first_ns = r->first_ns;
	if (t->exit_ns > ts->last_ns)
		ts->last_ns = t->exit_ns;
	/* A thread seen start but never captured (registered as the process
	 * ended): no span, not a negative one. */
	if (ts->last_ns < ts->first_ns)
		ts->last_ns = ts->first_ns;
	/* After a SIGKILL the sites rhea record recovered (from the tables the
	 * threads counted in) are newer than the thread's last sample, which
	 * may be milliseconds older (one capture an interval at most): both
	 * count at most what the thread allocated, the larger is the nearer.
	 * (By tid: a tid that came back in the recording would add its two
	 * lives' sites, which only such an end can show.) */
	if (!r->have_end && r->end_outside && r->end_recovered) {
		uint64_t n = 0, bytes = 0;
		for (size_t i = 0; i < r->nsites; i++)
			if (r->sites[i].tid == t->tid) {
				n += r->sites[i].count;
				bytes += r->sites[i].bytes;
			}
		if (n > ts->alloc_count) {
			ts->alloc_count = n;
			ts->alloc_bytes = bytes;
		}
	}
}

struct trow {
	size_t i;
	struct tstat ts;
};

static int by_thread_cpu(const void *a, const void *b)
{
	const struct tstat *x = &((const struct trow *)a)->ts, *y = &((const struct trow *)b)->ts;
	if (x->cpu_ns != y->cpu_ns)
		return x->cpu_ns < y->cpu_ns ? 1 : -1;
	uint64_t wx = x->last_ns - x->first_ns, wy = y->last_ns - y->first_ns;
	if (wx != wy)
		return wx < wy ? 1 : -1;
	const struct trow *p = a, *q = b;
	return (p->i > q->i) - (p->i < q->i);
}

static size_t build_sites(struct model *m, struct site_row **out, uint64_t *total_count,
			  uint64_t *total_bytes)
{
	struct recording *r = m->rec;
	struct site_row *rows = calloc(r->nsites + 1, sizeof(*rows));
	size_t n = 0;
	*total_count = *total_bytes = 0;
	for (size_t i = 0; i < r->nsites; i++) {
		const struct rhea_site *s = &r->sites[i];
		char buf[600], nb[512];
		struct sym_frame f = {0};
		if (s->pc == 0) {
			snprintf(buf, sizeof(buf), "[other sites]");
		} else {
			sym_resolve(m->sym, s->pc, &f);
			sym_frame_name(&f, nb, sizeof(nb));
			snprintf(buf, sizeof(buf), "%s", nb);
		}
		*total_count += s->count;
		*total_bytes += s->bytes;
		size_t j;
		for (j = 0; j < n; j++)
			if (strcmp(rows[j].name, buf) == 0 && rows[j].line == f.line)
				break;
		if (j == n) {
			rows[n].name = strdup(buf);
			rows[n].module = f.module;
			rows[n].file = f.file;
			rows[n].line = f.line;
			n++;
		}
		rows[j].count += s->count;
		rows[j].bytes += s->bytes;
	}
	vec_sort(rows, n, sizeof(*rows), by_site);
	*out = rows;
	return n;
}

static const char *base(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : p;
}

static void print_sites(FILE *out, const char *title, const struct site_row *sites, size_t n,
			size_t rows, int W)
{
	char b1[64], b2[64], nb[700], loc[700];
	fprintf(out, "  %s:\n  %10s %12s  %s\n", title, "COUNT", "BYTES", "CALLER");
	for (size_t i = 0; i < n && i < rows; i++) {
		if (sites[i].file)
			snprintf(loc, sizeof(loc), "%s (%s:%d)", sites[i].name, base(sites[i].file), sites[i].line);
		else
			snprintf(loc, sizeof(loc), "%s", sites[i].name);
		fprintf(out, "  %10s %12s  %s\n", fmt_count(sites[i].count, b1), fmt_bytes(sites[i].bytes, b2),
			fit(loc, W - 28, nb));
	}
}

/* The end as the agent wrote it, or as rhea record saw it, or NULL. */
static const struct rhea_end *end_of(const struct recording *r)
{
	return r->have_end ? &r->end : r->end_outside ? &r->oend : NULL;
}

#define END_TEXT_MAX 256
/* The process's CPU time when the agent started in it (META
 * cpu_before_agent_ns, written by agents since 2026-11-27), 0 unknown. */
static uint64_t cpu_before_agent(const struct recording *r)
{
	const char *v = recording_meta(r, "cpu_before_agent_ns");
	return v ? strtoull(v, NULL, 10) : 0;
}

static const char *end_text(const struct recording *r, char buf[END_TEXT_MAX])
{
	const struct rhea_end *e = end_of(r);
	if (!e)
		return "cut short: no end marker (the program was killed, the disk filled up, or it is still running)";
	const char *outside = r->have_end ? "" : " (as rhea record saw it)";
	switch (e->reason) {
	case RHEA_END_EXIT:
		snprintf(buf, END_TEXT_MAX, "exit, status %d%s", e->status, outside);
		return buf;
	case RHEA_END_SIGNAL:
		snprintf(buf, END_TEXT_MAX, "killed by signal %d (%s)%s", e->status, strsignal(e->status), outside);
		return buf;
	case RHEA_END_EXEC:
		return "exec (the process went on as another program)";
	case RHEA_END_DETACH:
		return "detached";
	case RHEA_END_DISABLED:
		return "agent switched itself off";
	case RHEA_END_GONE:
		/* rhea attach leaves the program's signals alone: any that
		 * kills goes unseen, not SIGKILL only */
		if (recording_meta(r, "attached"))
			return "gone: the process ended while attached, unseen by the agent (killed by a signal, or a raw "
			       "exit); rhea saw it go, not how";
		return "gone: the process ended unseen by the agent (SIGKILL?); rhea saw it go, not how";
	case RHEA_END_SANDBOXED:
		return "sandboxed: the program put all its threads under a seccomp filter; tracing stopped there, "
		       "the process went on";
	}
	return "unknown";
}

static const char *end_reason_key(const struct recording *r)
{
	const struct rhea_end *e = end_of(r);
	if (!e)
		return NULL;
	switch (e->reason) {
	case RHEA_END_EXIT: return "exit";
	case RHEA_END_SIGNAL: return "signal";
	case RHEA_END_EXEC: return "exec";
	case RHEA_END_DETACH: return "detach";
	case RHEA_END_GONE: return "gone";
	case RHEA_END_SANDBOXED: return "sandboxed";
	default: return "disabled";
	}
}

/* ---- blocking analysis: waits grouped by (call, object, waiter stack) ---- */

struct who {
	uint32_t tid, stack; /* stack: releaser's stack (releasers only) */
	uint64_t count;
};

struct wgroup {
	unsigned trigger;
	uint64_t object;
	uint32_t stack; /* the waiter's stack */
	struct who waiters[8]; /* the threads that waited there, 8 at most (the first seen first) */
	int nwaiters;
	uint64_t count, total, max, attributed;
	uint64_t slept, slept_attributed; /* waits that blocked (voluntary switch) */
	uint64_t unknown_sleep; /* no counters at the call: slept or not unknown */
	uint64_t shared; /* on a process-shared object (RHEA_S_SHARED) */
	struct who owners[8], releasers[8];
	int nowners, nreleasers;
};


static void add_who(struct who *w, int *n, uint32_t tid, uint32_t stack)
{
	for (int i = 0; i < *n; i++)
		if (w[i].tid == tid && w[i].stack == stack) {
			w[i].count++;
			return;
		}
	if (*n < 8) {
		w[*n].tid = tid;
		w[*n].stack = stack;
		w[*n].count = 1;
		(*n)++;
	}
}

static int cmp_wgroup(const void *a, const void *b)
{
	const struct wgroup *x = a, *y = b;
	return (x->total < y->total) - (x->total > y->total);
}

/* All BLOCK samples grouped; *n groups returned, sorted by total time. */
static struct wgroup *build_waits(struct recording *r, size_t *n_out)
{
	size_t n = 0, gcap = 0;
	struct wgroup *g = NULL;
	for (size_t i = 0; i < r->nthreads; i++)
		for (size_t k = 0; k < r->threads[i].nsamples; k++) {
			const struct rhea_sample *s = &r->threads[i].samples[k];
			if (!(s->h.flags & RHEA_S_BLOCK))
				continue;
			size_t j;
			for (j = 0; j < n; j++)
				if (g[j].trigger == s->trigger && g[j].object == s->object && g[j].stack == s->stack)
					break;
			if (j == n) {
				if (n == gcap) {
					gcap = gcap ? gcap * 2 : 64;
					g = realloc(g, gcap * sizeof(*g));
				}
				memset(&g[n], 0, sizeof(g[n]));
				g[n].trigger = s->trigger;
				g[n].object = s->object;
				g[n].stack = s->stack;
				n++;
			}
			uint64_t d = s->end_ns - s->begin_ns;
			g[j].count++;
			add_who(g[j].waiters, &g[j].nwaiters, s->tid, 0);
			g[j].total += d;
			if (d > g[j].max)
				g[j].max = d;
			if (s->owner_tid)
				add_who(g[j].owners, &g[j].nowners, s->owner_tid, 0);
			int known = (s->h.flags & RHEA_S_AT_CALL) != 0;
			int slept = known && s->c_end.nvcsw > s->c_begin.nvcsw;
			g[j].unknown_sleep += !known;
			g[j].shared += (s->h.flags & RHEA_S_SHARED) != 0;
			g[j].slept += slept;
			g[j].slept_attributed += slept && s->waker_tid;
			if (s->waker_tid) {
				g[j].attributed++;
				add_who(g[j].releasers, &g[j].nreleasers, s->waker_tid, s->waker_stack);
			}
		}
	if (n > 1) /* (g is NULL when nothing blocked) */
		vec_sort(g, n, sizeof(*g), cmp_wgroup);
	*n_out = n;
	return g;
}

/* Function names of a stack, root first (at most max). */
/* The names of a sample's frames, root first (a wait ends with its call),
 * the innermost `max` of them. */
static int sample_names(struct model *m, const struct rhea_sample *s, const char **names, int max)
{
	uint32_t ids[512];
	int n = model_frames(m, s, ids, 512);
	int first = n > max ? n - max : 0;
	for (int i = first; i < n; i++)
		names[i - first] = m->funcs[ids[i]].name;
	return n - first;
}

static int stack_names(struct model *m, uint32_t stack, const char **names, int max)
{
	struct rhea_sample s;
	memset(&s, 0, sizeof(s));
	s.stack = stack;
	return sample_names(m, &s, names, max);
}

static void json_stack(struct json *j, const char *key, struct model *m, uint32_t stack)
{
	const char *names[512];
	int n = stack_names(m, stack, names, 512);
	json_arr_begin(j, key);
	for (int i = 0; i < n; i++)
		json_str(j, NULL, names[i]);
	json_arr_end(j);
}

/* "leaf < caller < caller" with at most `depth` frames, into buf. */
static const char *names_line(const char **names, int n, int depth, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = n - 1, k = 0; i >= 0 && k < depth; i--, k++)
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", k ? " < " : "", names[i]);
	if (n == 0)
		snprintf(buf, len, "[no stack]");
	return buf;
}

static const char *stack_line(struct model *m, uint32_t stack, int depth, char *buf, size_t len)
{
	const char *names[512];
	return names_line(names, stack_names(m, stack, names, 512), depth, buf, len);
}

static const char *sample_line(struct model *m, const struct rhea_sample *s, int depth, char *buf, size_t len)
{
	const char *names[512];
	return names_line(names, s ? sample_names(m, s, names, 512) : 0, depth, buf, len);
}

/*
 * The threads whose last sample is a wait so far (BLOCK and ASYNC: the
 * agent cut it at the end of the recording, or its last forced capture saw
 * it when nothing ended the recording: SIGKILL): what a hung program's
 * threads were waiting for when it was stopped.  Longest first.
 */
struct hung {
	const struct rec_thread *t;
	const struct rhea_sample *s;
};

static int by_hung_begin(const void *a, const void *b)
{
	const struct hung *x = a, *y = b;
	if (x->s->begin_ns != y->s->begin_ns)
		return x->s->begin_ns < y->s->begin_ns ? -1 : 1;
	return (x->t->tid > y->t->tid) - (x->t->tid < y->t->tid);
}

static size_t blocked_at_end(const struct recording *r, struct hung **out)
{
	size_t n = 0;
	struct hung *h = calloc(r->nthreads ? r->nthreads : 1, sizeof(*h));
	*out = h;
	if (!h)
		return 0; /* (the section is left out) */
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		const struct rhea_sample *last = recording_last_sample(t);
		const unsigned so_far = RHEA_S_BLOCK | RHEA_S_ASYNC;
		if (last && (last->h.flags & so_far) == so_far)
			h[n++] = (struct hung){t, last};
	}
	if (n > 1)
		vec_sort(h, n, sizeof(*h), by_hung_begin);
	return n;
}

/* A column of call names: w, or fn's name's width if wider. */
static int name_width(int w, unsigned fn)
{
	int n = (int)strlen(rhea_fn_name(fn));
	return n > w ? n : w;
}

/* A wait group's threads (waiters, owners): tid and count each. */
static void json_whos(struct json *j, const char *name, const struct who *w, int n)
{
	json_arr_begin(j, name);
	for (int k = 0; k < n; k++) {
		json_obj_begin(j, NULL);
		json_u64(j, "tid", w[k].tid);
		json_u64(j, "count", w[k].count);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_waits(struct json *j, struct model *m, struct wgroup *g, size_t n)
{
	json_arr_begin(j, "waits");
	for (size_t i = 0; i < n; i++) {
		char obj[32], oname[256];
		snprintf(obj, sizeof(obj), "0x%" PRIx64, g[i].object);
		json_obj_begin(j, NULL);
		json_str(j, "function", rhea_fn_name(g[i].trigger));
		json_str(j, "class", rhea_class_name(rhea_fn_class(g[i].trigger)));
		json_str(j, "object", obj);
		if (model_object_name(m, g[i].trigger, g[i].object, oname, sizeof(oname)))
			json_str(j, "object_name", oname);
		json_u64(j, "tid", g[i].waiters[0].tid);
		json_whos(j, "waiters", g[i].waiters, g[i].nwaiters);
		json_u64(j, "count", g[i].count);
		json_u64(j, "total_ns", g[i].total);
		json_u64(j, "max_ns", g[i].max);
		json_u64(j, "attributed", g[i].attributed);
		json_u64(j, "slept", g[i].slept);
		json_u64(j, "slept_attributed", g[i].slept_attributed);
		json_u64(j, "sleep_unknown", g[i].unknown_sleep);
		json_u64(j, "process_shared", g[i].shared);
		json_stack(j, "stack", m, g[i].stack);
		json_whos(j, "owners", g[i].owners, g[i].nowners);
		json_arr_begin(j, "releasers");
		for (int k = 0; k < g[i].nreleasers; k++) {
			json_obj_begin(j, NULL);
			json_u64(j, "tid", g[i].releasers[k].tid);
			json_u64(j, "count", g[i].releasers[k].count);
			json_stack(j, "stack", m, g[i].releasers[k].stack);
			json_obj_end(j);
		}
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* ---- stalls (analysis/stalls.c) ------------------------------------------ */

struct other {
	const struct rec_thread *t;
	const struct rhea_sample *s;
	uint64_t ns;
};

static int by_other_ns(const void *a, const void *b)
{
	const struct other *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->t->tid < y->t->tid ? -1 : x->t->tid > y->t->tid;
}

/* What the other threads did most during a stall, the busiest first: those
 * that ran during it (a sample there), and the owner and the waker of the
 * lock it waited for.  *idle counts the others. */
static size_t stall_others(const struct recording *r, const struct stall *x, struct other *o, size_t max,
			   size_t *idle)
{
	size_t n = 0;
	*idle = 0;
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		if (t == x->t)
			continue;
		int involved = x->top && (t->tid == x->top->owner_tid || t->tid == x->top->waker_tid);
		if (!involved && !stalls_sampled_during(t, x->begin_ns, x->end_ns)) {
			*idle += t->start_ns < x->end_ns && (!t->exit_ns || t->exit_ns > x->begin_ns);
			continue;
		}
		uint64_t ns;
		const struct rhea_sample *s = stalls_top_during(t, x->begin_ns, x->end_ns, &ns);
		if (s)
			o[n++] = (struct other){t, s, ns};
	}
	vec_sort(o, n, sizeof(*o), by_other_ns);
	return n < max ? n : max;
}

static void json_sample_stack(struct json *j, const char *key, struct model *m, const struct rhea_sample *s)
{
	const char *names[512];
	int n = s ? sample_names(m, s, names, 512) : 0;
	json_arr_begin(j, key);
	for (int i = 0; i < n; i++)
		json_str(j, NULL, names[i]);
	json_arr_end(j);
}

static void json_causes(struct json *j, const char *key, struct model *m, const struct stall_cause *c, size_t n)
{
	json_arr_begin(j, key);
	for (size_t i = 0; i < n; i++) {
		json_obj_begin(j, NULL);
		json_arr_begin(j, "frames"); /* innermost first */
		for (int k = 0; k < c[i].depth; k++)
			json_str(j, NULL, m->funcs[c[i].funcs[k]].name);
		json_arr_end(j);
		json_u64(j, "count", c[i].count);
		json_u64(j, "total_ns", c[i].total_ns);
		json_u64(j, "max_ns", c[i].max_ns);
		json_u64(j, "worst", c[i].worst);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_stalls(struct json *j, struct model *m, const struct stalls *st)
{
	const struct recording *r = m->rec;
	struct other *o = malloc((r->nthreads ? r->nthreads : 1) * sizeof(*o));
	json_obj_begin(j, "stalls");
	json_u64(j, "threshold_ns", st->threshold_ns);
	json_u64(j, "loop_threads", st->loop_threads);
	json_u64(j, "iterations", st->iterations);
	json_arr_begin(j, "list");
	for (size_t i = 0; i < st->n; i++) {
		const struct stall *x = &st->v[i];
		json_obj_begin(j, NULL);
		json_u64(j, "tid", x->t->tid);
		json_str(j, "thread", x->t->name);
		json_u64(j, "msgid", x->msgid);
		json_u64(j, "begin_ns", x->begin_ns - r->hdr.start_ns);
		json_u64(j, "duration_ns", x->end_ns - x->begin_ns);
		json_bool(j, "begin_exact", x->begin_exact);
		json_bool(j, "end_exact", x->end_exact);
		json_bool(j, "fatal", x->fatal);
		json_u64(j, "samples", x->samples);
		json_u64(j, "cpu_ns", x->ce.cpu_ns >= x->cb.cpu_ns ? x->ce.cpu_ns - x->cb.cpu_ns : 0);
		json_u64(j, "alloc_count", x->ce.alloc_count - x->cb.alloc_count);
		json_u64(j, "alloc_bytes", x->ce.alloc_bytes - x->cb.alloc_bytes);
		json_u64(j, "faults", (uint64_t)(x->ce.minflt - x->cb.minflt) + (x->ce.majflt - x->cb.majflt));
		json_u64(j, "nvcsw", x->ce.nvcsw - x->cb.nvcsw);
		json_u64(j, "nivcsw", x->ce.nivcsw - x->cb.nivcsw);
		json_u64(j, "top_ns", x->top_ns);
		json_sample_stack(j, "top_stack", m, x->top);
		json_u64(j, "cause", x->cause);
		json_u64(j, "subcause", x->subcause);
		size_t idle = 0, no = o ? stall_others(r, x, o, 8, &idle) : 0;
		json_u64(j, "others_idle", idle);
		json_arr_begin(j, "others");
		for (size_t k = 0; k < no; k++) {
			json_obj_begin(j, NULL);
			json_u64(j, "tid", o[k].t->tid);
			json_str(j, "thread", o[k].t->name);
			json_u64(j, "ns", o[k].ns);
			json_sample_stack(j, "stack", m, o[k].s);
			json_obj_end(j);
		}
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_causes(j, "causes", m, st->causes, st->ncauses);
	json_causes(j, "subcauses", m, st->subcauses, st->nsubcauses);
	json_obj_end(j);
	free(o);
}

static const char *func_name(void *arg, uint32_t func)
{
	return ((struct model *)arg)->funcs[func].name;
}

static void text_causes(FILE *out, struct model *m, const char *title, const struct stall_cause *c, size_t n,
			int top, int W)
{
	char b1[64], b2[64], b3[64], line[1024], nb[1024];
	fprintf(out, "  %s\n    %6s %10s %10s  %s\n", title, "COUNT", "TOTAL", "WORST", "CAUSE");
	for (size_t i = 0; i < n && i < (size_t)top; i++)
		fprintf(out, "    %6s %10s %10s  %s\n", fmt_count(c[i].count, b1), fmt_ns(c[i].total_ns, b2),
			fmt_ns(c[i].max_ns, b3), fit(stalls_cause_line(&c[i], func_name, m, line, sizeof(line)), W - 34, nb));
}

static const char *thread_tag(const struct rec_thread *t, char *buf)
{
	sprintf(buf, "%.15s/%u", t->name[0] ? t->name : "?", t->tid);
	return buf;
}

/* The summary's table: the longest stalls, in time order. */
static void text_stalls(FILE *out, struct model *m, const struct stalls *st, int top, int W)
{
	const struct recording *r = m->rec;
	char b1[64], b2[64], b3[64], b4[64], tb[64], line[1024], nb[1024];
	fprintf(out, "\nStalls: event-loop iterations longer than %s (%s of %s on %zu thread%s)\n",
		fmt_ns(st->threshold_ns, b1), fmt_count(st->n, b2), fmt_count(st->iterations, b3),
		st->loop_threads, PLURAL(st->loop_threads));
	if (st->n == 0)
		return;
	/* the `top` longest, shown in time order */
	size_t *ix = malloc(st->n * sizeof(*ix)), k = 0;
	if (!ix)
		return;
	for (size_t i = 0; i < st->n; i++)
		ix[i] = i;
	for (size_t i = 0; i < st->n && i < (size_t)top; i++) /* partial selection */
		for (size_t j = i + 1; j < st->n; j++) {
			const struct stall *a = &st->v[ix[i]], *b = &st->v[ix[j]];
			if (b->end_ns - b->begin_ns > a->end_ns - a->begin_ns) {
				size_t t = ix[i];
				ix[i] = ix[j];
				ix[j] = t;
			}
		}
	k = st->n < (size_t)top ? st->n : (size_t)top;
	for (size_t i = 1; i < k; i++) /* back to time order */
		for (size_t j = i; j > 0 && ix[j] < ix[j - 1]; j--) {
			size_t t = ix[j];
			ix[j] = ix[j - 1];
			ix[j - 1] = t;
		}
	fprintf(out, "  %9s %9s %9s %-20s %s\n", "AT", "LENGTH", "CPU", "THREAD", "MOST TIME IN");
	for (size_t i = 0; i < k; i++) {
		const struct stall *x = &st->v[ix[i]];
		uint64_t cpu = x->ce.cpu_ns >= x->cb.cpu_ns ? x->ce.cpu_ns - x->cb.cpu_ns : 0;
		snprintf(b4, sizeof(b4), "%s%s", fmt_ns(x->end_ns - x->begin_ns, b3), x->fatal ? "!" : "");
		fprintf(out, "  %9s %9s %9s %-20s %s\n", fmt_ns(x->begin_ns - r->hdr.start_ns, b1), b4,
			fmt_ns(cpu, b2), thread_tag(x->t, tb),
			fit(sample_line(m, x->top, 2, line, sizeof(line)), W - 54 > 16 ? W - 54 : 16, nb));
	}
	if (st->n > k)
		fprintf(out, "  ... and %s more (rhea report --stalls lists them)\n", fmt_count(st->n - k, b1));
	for (size_t i = 0; i < st->n; i++)
		if (st->v[i].fatal) {
			fprintf(out, "  ! the process died during this iteration\n");
			break;
		}
	free(ix);
	text_causes(out, m, "by cause (the innermost two frames of where each stall's time went)", st->causes,
		    st->ncauses, top < 5 ? top : 5, W);
}

/* rhea report --stalls: every stall with its stack and the other threads. */
static void text_stalls_detail(FILE *out, struct model *m, const struct stalls *st, int top, int W)
{
	const struct recording *r = m->rec;
	char b1[64], b2[64], b3[64], b4[64], b5[64], tb[64], line[1024], nb[1024];
	fprintf(out, "Stalls: event-loop iterations longer than %s: %s of %s on %zu thread%s\n",
		fmt_ns(st->threshold_ns, b1), fmt_count(st->n, b2), fmt_count(st->iterations, b3),
		st->loop_threads, PLURAL(st->loop_threads));
	if (st->loop_threads == 0)
		fprintf(out, "  (no thread waited in poll, select or epoll_wait: no event loop to watch)\n");
	struct other *o = malloc((r->nthreads ? r->nthreads : 1) * sizeof(*o));
	for (size_t i = 0; i < st->n; i++) {
		const struct stall *x = &st->v[i];
		uint64_t cpu = x->ce.cpu_ns >= x->cb.cpu_ns ? x->ce.cpu_ns - x->cb.cpu_ns : 0;
		fprintf(out, "\n#%zu %s, iteration %u, at %s: %s%s%s\n", i + 1, thread_tag(x->t, tb), x->msgid,
			fmt_ns(x->begin_ns - r->hdr.start_ns, b1), x->begin_exact && x->end_exact ? "" : "about ",
			fmt_ns(x->end_ns - x->begin_ns, b2), x->fatal ? ", unfinished: the process died in it" : "");
		fprintf(out, "   CPU %s, allocations %s (%s), faults %s, context switches %s/%s\n", fmt_ns(cpu, b1),
			fmt_count(x->ce.alloc_count - x->cb.alloc_count, b2),
			fmt_bytes(x->ce.alloc_bytes - x->cb.alloc_bytes, b3),
			fmt_count((uint64_t)(x->ce.minflt - x->cb.minflt) + (x->ce.majflt - x->cb.majflt), b4),
			fmt_count(x->ce.nvcsw - x->cb.nvcsw, b5), fmt_count(x->ce.nivcsw - x->cb.nivcsw, nb));
		const char *names[512];
		int n = x->top ? sample_names(m, x->top, names, 512) : 0;
		fprintf(out, "   most time (%s) in:\n", fmt_ns(x->top_ns, b1));
		for (int k = n - 1, shown = 0; k >= 0 && shown < 12; k--, shown++)
			fprintf(out, "     %s\n", fit(names[k], W - 6, nb));
		if (n > 12)
			fprintf(out, "     ... %d more frames\n", n - 12);
		if (n == 0)
			fprintf(out, "     [no stack]\n");
		size_t idle = 0, no = o ? stall_others(r, x, o, 6, &idle) : 0;
		if (no)
			fprintf(out, "   other threads meanwhile (most of their time in):\n");
		for (size_t k = 0; k < no; k++)
			fprintf(out, "     %-20s %9s  %s\n", thread_tag(o[k].t, tb), fmt_ns(o[k].ns, b1),
				fit(sample_line(m, o[k].s, 3, line, sizeof(line)), W - 38 > 16 ? W - 38 : 16, nb));
		if (idle)
			fprintf(out, "   %s other thread%s waited all along (no sample during it)\n",
				fmt_count(idle, b1), PLURAL(idle));
	}
	free(o);
	if (st->n) {
		fputc('\n', out);
		text_causes(out, m, "Causes: the innermost two frames of where each stall's time went", st->causes,
			    st->ncauses, top, W);
		fputc('\n', out);
		text_causes(out, m, "The same, by the innermost four frames", st->subcauses, st->nsubcauses, top, W);
	}
}

/* A blocking call and what it was on: "read fd 42" for the calls on a
 * descriptor (the I/O and network classes' object, but open's and
 * openat's), else the call's name alone. */
static const char *call_on(const struct wgroup *g, char *buf, size_t len)
{
	int c = rhea_fn_class(g->trigger);
	if ((c == RHEA_C_IO || c == RHEA_C_NET) && g->trigger != RHEA_FN_OPEN && g->trigger != RHEA_FN_OPENAT)
		snprintf(buf, len, "%s fd %" PRIu64, rhea_fn_name(g->trigger), g->object);
	else
		snprintf(buf, len, "%s", rhea_fn_name(g->trigger));
	return buf;
}

/* The recording's min_block ("1.0 ms"), in buf (64 bytes). */
static const char *min_block_text(const struct recording *r, char *buf)
{
	const char *mb = recording_meta(r, "min_block_ns");
	return mb ? fmt_ns(strtoull(mb, NULL, 10), buf) : "--min-block";
}

static int by_short_ns(const void *a, const void *b)
{
	const struct rhea_short *x = a, *y = b;
	return (x->ns < y->ns) - (x->ns > y->ns);
}

/* --blocking: the calls too short for a slice, each thread's by function
 * (SHORTS), the longest in total first. */
static void text_shorts(FILE *out, const struct recording *r, int top)
{
	if (!r->nshorts)
		return;
	struct rhea_short *s = malloc(r->nshorts * sizeof(*s));
	if (!s)
		return;
	memcpy(s, r->shorts, r->nshorts * sizeof(*s));
	vec_sort(s, r->nshorts, sizeof(*s), by_short_ns);
	int cw = 4;
	for (size_t i = 0; i < r->nshorts && (int)i < top; i++)
		cw = name_width(cw, s[i].fn);
	char b1[64], b2[64], b3[64];
	fprintf(out, "\nShorter calls (under %s each, so no slice; by total time)\n  %10s %10s %10s  %-*s %8s\n",
		min_block_text(r, b1), "TOTAL", "COUNT", "MEAN", cw, "CALL", "THREAD");
	for (size_t i = 0; i < r->nshorts && (int)i < top; i++)
		fprintf(out, "  %10s %10s %10s  %-*s %8u\n", fmt_ns(s[i].ns, b1), fmt_count(s[i].count, b2),
			fmt_ns(s[i].count ? s[i].ns / s[i].count : 0, b3), cw, rhea_fn_name(s[i].fn), s[i].tid);
	if (r->nshorts > (size_t)top)
		fprintf(out, "  ... and %zu more (--json: each thread's short_calls)\n", r->nshorts - (size_t)top);
	free(s);
}

/*
 * The thread that spent the largest share of its time in blocking calls
 * too short for a slice, when that is a quarter or more: the timeline
 * holds that time on their callers (on redis-server under load, 2.7 s of
 * its event loop's 3 s went to a connection write function as its own,
 * at 43% CPU; it was in write, epoll_wait and read).  Names its three
 * largest; says whether other threads are so too.
 */
static int shorts_note(const struct recording *r, const struct trow *rows, char *buf, size_t len)
{
	const struct rec_thread *best = NULL;
	uint64_t best_ns = 0, best_wall = 0;
	size_t many = 0; /* threads a quarter or more in them */
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[rows[i].i];
		uint64_t wall = rows[i].ts.last_ns - rows[i].ts.first_ns, ns = 0;
		for (size_t k = 0; k < r->nshorts; k++)
			ns += r->shorts[k].tid == t->tid ? r->shorts[k].ns : 0;
		if (wall < 10000000 || ns * 4 < wall)
			continue;
		many++;
		if (!best || ns * best_wall > best_ns * wall) {
			best = t;
			best_ns = ns;
			best_wall = wall;
		}
	}
	struct rhea_short *mine = best ? malloc(r->nshorts * sizeof(*mine)) : NULL;
	if (!mine)
		return 0;
	size_t n = 0;
	for (size_t k = 0; k < r->nshorts; k++)
		if (r->shorts[k].tid == best->tid && r->shorts[k].fn < RHEA_FN_COUNT)
			mine[n++] = r->shorts[k];
	vec_sort(mine, n, sizeof(*mine), by_short_ns);
	char b1[64], b2[64], b3[64], list[256] = "";
	for (size_t q = 0; q < 3 && q < n; q++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s %s", q ? ", " : "",
			 rhea_fn_name(mine[q].fn), fmt_ns(mine[q].ns, b1));
	free(mine);
	snprintf(buf, len, "thread %u (%s) spent %.0f%% of its %s in blocking calls shorter than %s each, which "
		 "are no slices: %s; on the timeline that time is their callers' (their CPU/WALL says how much of it "
		 "ran; rhea report --blocking lists them)%s",
		 best->tid, best->name[0] ? best->name : "?", 100.0 * (double)best_ns / (double)best_wall,
		 fmt_ns(best_wall, b2), min_block_text(r, b3), list, many > 1 ? "; other threads too" : "");
	return 1;
}

static void text_waits(FILE *out, struct model *m, struct wgroup *g, size_t n, int top, int W)
{
	char b1[64], b2[64], b3[64], line[1024], nb[1024];
	int shown = 0;
	fprintf(out, "Waits on locks, conditions and semaphores (by total time blocked)\n");
	for (size_t i = 0; i < n && shown < top; i++) {
		if (rhea_fn_class(g[i].trigger) != RHEA_C_LOCK)
			continue;
		shown++;
		char oname[256], on[300];
		if (model_object_name(m, g[i].trigger, g[i].object, oname, sizeof(oname)))
			snprintf(on, sizeof(on), "%s (0x%" PRIx64 ")", oname, g[i].object);
		else
			snprintf(on, sizeof(on), "0x%" PRIx64, g[i].object);
		fprintf(out, "\n%2d. %s on %s: %s wait%s, total %s, max %s\n", shown, rhea_fn_name(g[i].trigger), on,
			fmt_count(g[i].count, b1), PLURAL(g[i].count), fmt_ns(g[i].total, b2), fmt_ns(g[i].max, b3));
		/* (every thread that waited from that stack, with its count:
		 * "waiter" named the first alone, and two threads' waits read
		 * as one's, woken by itself) */
		char who[256];
		int at = snprintf(who, sizeof(who), "%s", g[i].nwaiters > 1 ? "s" : "");
		uint64_t listed = 0;
		for (int k = 0; k < g[i].nwaiters; k++) {
			char cnt[80] = ""; /* (a count once there are several) */
			if (g[i].nwaiters > 1)
				snprintf(cnt, sizeof(cnt), " (%s)", fmt_count(g[i].waiters[k].count, b1));
			at += snprintf(who + at, sizeof(who) - (size_t)at, "%s%u%s", k ? ", " : " ", g[i].waiters[k].tid,
				       cnt);
			listed += g[i].waiters[k].count;
		}
		if (listed < g[i].count) /* (more than 8 threads) */
			snprintf(who + at, sizeof(who) - (size_t)at, ", others (%s)", fmt_count(g[i].count - listed, b1));
		fprintf(out, "    waiter%s: %s\n", who,
			fit(stack_line(m, g[i].stack, 6, line, sizeof(line)), W - 12 - (int)strlen(who) > 20
			    ? W - 12 - (int)strlen(who) : 20, nb));
		for (int k = 0; k < g[i].nowners; k++)
			fprintf(out, "    owner when the wait began: thread %u (%s time%s)\n", g[i].owners[k].tid,
				fmt_count(g[i].owners[k].count, b1), PLURAL(g[i].owners[k].count));
		for (int k = 0; k < g[i].nreleasers; k++)
			fprintf(out, "    woken by thread %u (%s time%s) at: %s\n", g[i].releasers[k].tid,
				fmt_count(g[i].releasers[k].count, b1), PLURAL(g[i].releasers[k].count),
				fit(stack_line(m, g[i].releasers[k].stack, 5, line, sizeof(line)), W - 40, nb));
		if (g[i].attributed < g[i].count)
			fprintf(out, "    %s wait%s without a known releaser, %s of which slept on it\n"
				     "    (the others were preempted or spun in the call, or are not known)\n",
				fmt_count(g[i].count - g[i].attributed, b1), PLURAL(g[i].count - g[i].attributed),
				fmt_count(g[i].slept - g[i].slept_attributed, b2));
		if (g[i].shared)
			fprintf(out, "    process-shared (%s of the waits): a releaser in another process is named by\n"
				     "    rhea report of both processes' recordings\n",
				fmt_count(g[i].shared, b1));
	}
	if (!shown)
		fprintf(out, "  none recorded\n");
	/* The other calls are grouped by thread and descriptor as well: each
	 * row says which (two clients' reads from one function are two rows),
	 * the CALL column as wide as its longest entry. */
	char call[64];
	int cw = 4;
	shown = 0;
	for (size_t i = 0; i < n && shown < top; i++)
		if (rhea_fn_class(g[i].trigger) != RHEA_C_LOCK) {
			int k = (int)strlen(call_on(&g[i], call, sizeof(call)));
			cw = k > cw ? k : cw;
			shown++;
		}
	fprintf(out, "\nOther blocking calls (by total time)\n  %10s %6s %10s  %-*s %8s  %s\n", "TOTAL", "COUNT",
		"MAX", cw, "CALL", "THREAD", "WHERE");
	int ww = W - (2 + 10 + 1 + 6 + 1 + 10 + 2 + cw + 1 + 8 + 2);
	shown = 0;
	for (size_t i = 0; i < n && shown < top; i++) {
		if (rhea_fn_class(g[i].trigger) == RHEA_C_LOCK)
			continue;
		shown++;
		fprintf(out, "  %10s %6s %10s  %-*s %8u  %s\n", fmt_ns(g[i].total, b1), fmt_count(g[i].count, b2),
			fmt_ns(g[i].max, b3), cw, call_on(&g[i], call, sizeof(call)), g[i].waiters[0].tid,
			fit_frames(stack_line(m, g[i].stack, 4, line, sizeof(line)), ww > 24 ? ww : 24, nb));
	}
	if (!shown)
		fprintf(out, "  none recorded\n");
	text_shorts(out, m->rec, top);
}

/* ---- CPU profile: the sampler's captures only, each worth one period ---- */

struct cpuprof {
	uint64_t *self, *incl, total;
};

static void build_cpuprof(struct model *m, struct cpuprof *p)
{
	struct recording *r = m->rec;
	p->self = calloc(m->nfuncs, sizeof(uint64_t));
	p->incl = calloc(m->nfuncs, sizeof(uint64_t));
	uint8_t *seen = calloc(m->nfuncs, 1);
	uint32_t *ids = malloc(MODEL_MAX_FRAMES * sizeof(uint32_t));
	p->total = 0;
	for (size_t i = 0; i < r->nthreads; i++)
		p->total += model_cpu_tally(m, &r->threads[i], 0, p->incl, p->self, ids, seen);
	free(seen);
	free(ids);
}

/*
 * The timeline holds each capture's stack until the next capture.  A short
 * function that a computing thread calls often, and that calls a hooked
 * one, is captured at nearly every interval, so its slices cover time the
 * thread spent elsewhere; the sampler's captures are not drawn to it.
 * model_correct thins such functions when the sampler has enough periods;
 * whatever disagreement is left is said here, in one note (the larger):
 *
 *  - inclusive: a function with a quarter of the CPU or more on the
 *    timeline, under a third of that in the CPU profile;
 *  - self: a function whose own CPU on the timeline is a quarter or more,
 *    under a third of that in the profile, while the profile's hottest
 *    function has under a third of its share on the timeline, or the
 *    function has under a tenth of its timeline share in the profile: the
 *    hooks' captures end at the first function, its callees that call
 *    nothing hooked are never on them (the demo's handle_request and
 *    hash_block; a callee reached by a tail call leaves no frame at all;
 *    xz -T2's worker loop, which takes its mutex between blocks of
 *    compression: 58% of the CPU as its own on the timeline, 0% in the
 *    profile, whose hottest function still had 20% of its 45% there);
 *
 * with 50 sampling periods at least, or 10 when chance cannot explain the
 * profile's share (half the timeline's above the top of its 3-sigma
 * Wilson interval: xz compressing a megabyte, 29 periods, its I/O loop 83%
 * of the CPU on the timeline, none in the profile, said nothing).  0, or 1
 * with the note in buf.
 */
/*
 * Code that no module claims and no perf map names (JIT code) shows as
 * "?+0x..." functions, addresses close together as one (model.c).  When
 * the CPU profile spends a tenth or more there, say how to get names.  0,
 * or 1 with the note.
 */
static int jit_note(const struct model *m, const struct cpuprof *cp, char *buf, size_t len)
{
	uint64_t unk = 0;
	for (uint32_t i = 0; i < m->nfuncs; i++)
		if (cp->self[i] && m->funcs[i].module && strcmp(m->funcs[i].module, "?") == 0)
			unk += cp->self[i];
	if (cp->total < 10 || unk * 10 < cp->total)
		return 0;
	snprintf(buf, len,
		 "%.0f%% of the CPU profile is in code no module claims, shown as ?+address (its "
		 "addresses within 64 bytes of each other as one function): JIT "
		 "code, most likely. node --perf-basic-prof, python3.12 -X perf and, for a "
		 "running JVM, jcmd PID Compiler.perfmap write /tmp/perf-PID.map, which names it here%s",
		 100.0 * (double)unk / (double)cp->total,
		 m->perf_map ? " (this one's map did not cover it)" : "");
	return 1;
}

/* The profile's share s of a function with share t on the timeline, in n
 * periods, is under a third of it, and with few periods surely under half
 * of it. */
static int profile_says_less(double t, double s, double n)
{
	return s < t / 3 && (n >= 50 || model_wilson_hi(s, n, 3.0) < t / 2);
}

/* The timeline's share t of a function with share s in the profile of n
 * periods is under a third of it, and with few periods surely under half
 * of it (the lower end of s's 3-sigma Wilson interval over twice t). */
static int timeline_says_less(double s, double t, double n)
{
	return t < s / 3 && (n >= 50 || 1 - model_wilson_hi(1 - s, n, 3.0) > 2 * t);
}

/*
 * Several such functions together: the hooks of a compiler capture in its
 * four allocation wrappers (cc1 compiling a small file: xrealloc,
 * xcalloc, xmalloc and operator new 30, 23, 22 and 18% of the CPU as their
 * own time on the timeline, none of the 32 sampling periods), none of which
 * alone is beyond what chance explains, while together they are.  Own
 * (self) times are disjoint, so their shares add up.  A function is a
 * member with 3% of the CPU on the timeline and under a third of that in
 * the profile; the four that differ most are kept.
 */
#define GROUP_MAX 4
struct bias_group {
	uint32_t id[GROUP_MAX];
	double tl[GROUP_MAX], sp[GROUP_MAX];
	int n;
};

static void group_offer(struct bias_group *g, uint32_t id, double t, double s)
{
	if (t < 0.03 || s >= t / 3)
		return;
	int at = g->n < GROUP_MAX ? g->n : GROUP_MAX;
	while (at > 0 && g->tl[at - 1] - g->sp[at - 1] < t - s) {
		if (at < GROUP_MAX) {
			g->id[at] = g->id[at - 1];
			g->tl[at] = g->tl[at - 1];
			g->sp[at] = g->sp[at - 1];
		}
		at--;
	}
	if (at < GROUP_MAX) {
		g->id[at] = id;
		g->tl[at] = t;
		g->sp[at] = s;
		if (g->n < GROUP_MAX)
			g->n++;
	}
}

/* What a note weighs of one function: its share of the CPU on the timeline
 * and of the profile's periods, inclusive and its own.  0: no code. */
struct shares {
	const char *name;
	double tl_incl, sp_incl, tl_self, sp_self;
};
typedef int (*shares_fn)(const void *ctx, uint32_t i, struct shares *sh);

/* The note on a group, when two or more members hold a quarter of the CPU
 * on the timeline and the profile, of n periods, surely gives them less.
 * 0, or 1 with the note. */
static int group_note(const struct bias_group *g, double n, const void *ctx, shares_fn get, const char *where,
		      char *buf, size_t len)
{
	double t = 0, s = 0;
	for (int i = 0; i < g->n; i++) {
		t += g->tl[i];
		s += g->sp[i];
	}
	if (g->n < 2 || t < 0.25 || !profile_says_less(t, s, n))
		return 0;
	size_t w = 0;
	for (int i = 0; i < g->n && w < len; i++) {
		struct shares sh;
		get(ctx, g->id[i], &sh);
		w += (size_t)snprintf(buf + w, len - w, "%s%s", i == 0 ? "" : i + 1 < g->n ? ", " : " and ", sh.name);
	}
	for (int i = 0; i < g->n && w < len; i++)
		w += (size_t)snprintf(buf + w, len - w, "%s%.0f%%", i ? ", " : " have, as their own time on the timeline, ",
				      100 * g->tl[i]);
	if (w < len)
		snprintf(buf + w, len - w,
			 " of the CPU (%.0f%% together) but %.0f%% in the CPU profile of %.0f sampling periods: "
			 "the hooks capture at the hooked calls they make, and each capture's stack lasts until "
			 "the next one; the CPU profile%s, and Perfetto's flame graph with `rhea convert "
			 "--samples cpu`, are the unbiased view",
			 100 * t, 100 * s, n, where);
	return 1;
}

static int timeline_note_of(const void *ctx, uint32_t nf, shares_fn get, double n, const char *where, char *buf,
			    size_t len)
{
	struct bias_group g = {.n = 0};
	double worst = 0, tl = 0, sp = 0, worst_self = 0, tl_self = 0, sp_self = 0, hot = 0, hot_tl = 0;
	double over_self = 0, over_tl = 0, over_sp = 0; /* the most overstated own time */
	uint32_t which = 0, which_self = 0, which_hot = 0, which_over = 0;
	struct shares a, b, c;
	for (uint32_t i = 0; i < nf; i++) {
		struct shares sh;
		if (!get(ctx, i, &sh))
			continue;
		double t = sh.tl_incl, s = sh.sp_incl;
		if (t >= 0.25 && profile_says_less(t, s, n) && t - s > worst) {
			worst = t - s;
			which = i;
			tl = t;
			sp = s;
		}
		t = sh.tl_self;
		s = sh.sp_self;
		group_offer(&g, i, t, s);
		if (t >= 0.25 && profile_says_less(t, s, n) && t - s > worst_self) {
			worst_self = t - s;
			which_self = i;
			tl_self = t;
			sp_self = s;
		}
		if (s > hot) {
			hot = s;
			hot_tl = t;
			which_hot = i;
		}
		if (t >= 0.25 && t - s > over_self) {
			over_self = t - s;
			over_tl = t;
			over_sp = s;
			which_over = i;
		}
	}
	if (worst >= worst_self && worst > 0) {
		get(ctx, which, &a);
		snprintf(buf, len, "%s has %.0f%% of the CPU on the timeline but %.0f%% in the CPU profile: it "
			 "is captured at a hooked call it makes often, and each capture's stack lasts until the "
			 "next one; the CPU profile%s, and Perfetto's flame graph with `rhea convert "
			 "--samples cpu`, are the unbiased view", a.name, 100 * tl, 100 * sp, where);
		return 1;
	}
	if (worst_self > 0 && (hot_tl < hot / 3 || sp_self * 10 < tl_self) && which_hot != which_self) {
		get(ctx, which_self, &b);
		get(ctx, which_hot, &c);
		snprintf(buf, len, "%s has %.0f%% of the CPU as its own time on the timeline but %.0f%% in the "
			 "CPU profile, which puts %.0f%% in %s (%.0f%% on the timeline): the hooks' captures "
			 "stop at %s, and callees that call nothing hooked (or are reached by a tail call) are "
			 "never on them; the CPU profile%s, and Perfetto's flame graph with `rhea convert "
			 "--samples cpu`, show where that time goes", b.name, 100 * tl_self,
			 100 * sp_self, 100 * hot, c.name, 100 * hot_tl, b.name, where);
		return 1;
	}
	if (group_note(&g, n, ctx, get, where, buf, len))
		return 1;
	/* The other way round: the profile's hottest function, nearly absent
	 * from the timeline, its time on a caller's (gzip -6: its match
	 * finder 41% of the profile, 2% on the timeline; deflate 77% on the
	 * timeline, 30% in the profile: neither under a third of the other
	 * by the timeline's own excess).  The function that has its time is
	 * named when one has a quarter of the CPU as its own there; where the
	 * time went to several callers, none with a quarter (gzip -6 once the
	 * timeline was corrected: gzip+0x4290 32% of the profile as its own,
	 * 2% on the timeline), the note says so without a name (it used to
	 * say nothing). */
	if (hot >= 0.25 && timeline_says_less(hot, hot_tl, n)) {
		char where_tl[256] = "";
		get(ctx, which_hot, &b);
		if (over_self > 0 && which_over != which_hot) {
			get(ctx, which_over, &c);
			snprintf(where_tl, sizeof(where_tl), ", where %s has %.0f%% (%.0f%% in the profile)", c.name,
				 100 * over_tl, 100 * over_sp);
		}
		snprintf(buf, len, "%s has %.0f%% of the CPU in the CPU profile but %.0f%% as its own time on the "
			 "timeline%s: the hooks' captures stop at %s, and callees that call nothing hooked (or are "
			 "reached by a tail call) are never on them; the CPU profile%s, and Perfetto's flame graph "
			 "with `rhea convert --samples cpu`, show where that time goes", b.name, 100 * hot,
			 100 * hot_tl, where_tl, *where_tl ? "the latter" : "its callers", where);
		return 1;
	}
	return 0;
}

struct model_shares {
	const struct model *m;
	const struct fstat *f;
	const struct cpuprof *cp;
	double cpu, periods;
};

static int model_shares_of(const void *ctx, uint32_t i, struct shares *sh)
{
	const struct model_shares *x = ctx;
	if (x->m->funcs[i].kind != MODEL_CODE)
		return 0;
	sh->name = x->m->funcs[i].name;
	sh->tl_incl = (double)x->f[i].incl_cpu / x->cpu;
	sh->sp_incl = (double)x->cp->incl[i] / x->periods;
	sh->tl_self = (double)x->f[i].self_cpu / x->cpu;
	sh->sp_self = (double)x->cp->self[i] / x->periods;
	return 1;
}

static int timeline_note(const struct model *m, const struct fstat *f, const struct cpuprof *cp,
			 uint64_t cpu_total, char *buf, size_t len)
{
	if (cp->total < 10 || !cpu_total)
		return 0;
	struct model_shares x = {m, f, cp, (double)cpu_total, (double)cp->total};
	return timeline_note_of(&x, m->nfuncs, model_shares_of, x.periods, " (below)", buf, len);
}

/* text after prefix, wrapped at width columns, continued under its start */
static void print_wrapped(FILE *out, const char *prefix, const char *text, int width)
{
	int indent = (int)strlen(prefix), col = indent;
	fputs(prefix, out);
	while (*text) {
		int n = (int)strcspn(text, " ");
		if (col > indent && col + 1 + n > width) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fwrite(text, 1, (size_t)n, out);
		col += n;
		text += n;
		while (*text == ' ')
			text++;
	}
	fputc('\n', out);
}

static const uint64_t *sort_cp;
static int by_cp(const void *a, const void *b)
{
	uint64_t x = sort_cp[*(const uint32_t *)a], y = sort_cp[*(const uint32_t *)b];
	return (x < y) - (x > y);
}

struct cls {
	uint64_t captures, blocks, blocked_ns;
};
struct blk {
	uint64_t count, total, max;
	uint64_t short_count, short_ns; /* calls under min_block (SHORTS) */
};

/* r's blocking calls into blk, by function: its BLOCK samples (slices)
 * and the shorter calls its agent counted. */
static void blk_add(const struct recording *r, struct blk *blk)
{
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		for (size_t k = 0; k < t->nsamples; k++) {
			const struct rhea_sample *s = &t->samples[k];
			if (!(s->h.flags & RHEA_S_BLOCK) || s->trigger >= RHEA_FN_COUNT)
				continue;
			uint64_t d = s->end_ns - s->begin_ns;
			blk[s->trigger].count++;
			blk[s->trigger].total += d;
			if (d > blk[s->trigger].max)
				blk[s->trigger].max = d;
		}
	}
	for (size_t i = 0; i < r->nshorts; i++)
		if (r->shorts[i].fn < RHEA_FN_COUNT) {
			blk[r->shorts[i].fn].short_count += r->shorts[i].count;
			blk[r->shorts[i].fn].short_ns += r->shorts[i].ns;
		}
}

/* The "Blocking calls" table; shorts: with the shorter calls' columns,
 * min_block the slices' threshold as text. */
static void blk_print(FILE *out, const struct blk *blk, int shorts, const char *min_block, const char *whose)
{
	char b1[64], b2[64], b3[64];
	/* (the call column as wide as its longest name:
	 * pthread_rwlock_timedwrlock is 26) */
	int callw = 4;
	for (unsigned fn = 0; fn < RHEA_FN_COUNT; fn++)
		if (blk[fn].count || blk[fn].short_count)
			callw = name_width(callw, fn);
	int any = 0;
	for (unsigned fn = 0; fn < RHEA_FN_COUNT; fn++)
		if (blk[fn].count || blk[fn].short_count) {
			if (!any++)
				fprintf(out, "\nBlocking calls%s\n  %-*s %8s %12s %12s%s\n", whose, callw, "CALL", "COUNT",
					"TOTAL", "MAX", shorts ? "    SHORTER   THEIR TIME" : "");
			fprintf(out, "  %-*s %8s %12s %12s", callw, rhea_fn_name(fn), fmt_count(blk[fn].count, b1),
				fmt_ns(blk[fn].total, b2), blk[fn].count ? fmt_ns(blk[fn].max, b3) : "-");
			if (shorts)
				fprintf(out, " %10s %12s", fmt_count(blk[fn].short_count, b1),
					fmt_ns(blk[fn].short_ns, b2));
			fputc('\n', out);
		}
	if (any && shorts)
		fprintf(out, "\n  COUNT: calls of %s or more, each a slice on the timeline; SHORTER: the\n"
			     "  others, each counted, their time partly sampled (one in 16 while the\n"
			     "  ticker ticks: README, \"Short calls\")\n",
			min_block);
}

static void blk_json(struct json *j, const struct blk *blk)
{
	json_arr_begin(j, "blocking");
	for (unsigned fn = 0; fn < RHEA_FN_COUNT; fn++) {
		if (!blk[fn].count && !blk[fn].short_count)
			continue;
		json_obj_begin(j, NULL);
		json_str(j, "function", rhea_fn_name(fn));
		json_str(j, "class", rhea_class_name(rhea_fn_class(fn)));
		json_u64(j, "count", blk[fn].count);
		json_u64(j, "total_ns", blk[fn].total);
		json_u64(j, "max_ns", blk[fn].max);
		json_u64(j, "shorter_count", blk[fn].short_count);
		json_u64(j, "shorter_ns", blk[fn].short_ns);
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* Recordings of the process's programs or children, "path: command" a
 * line, up to max of them. */
static void text_images(FILE *out, const struct report_image *im, size_t n, size_t max, int W)
{
	char clean[256], line[PATH_MAX + 300], nb[sizeof(line)]; /* (fit writes at most w + 1 < sizeof(line)) */
	for (size_t k = 0; k < n && k < max; k++) {
		convert_clean_string(im[k].command ? im[k].command : "?", clean, sizeof(clean));
		/* the recording whole (its file name, when the path is too
		 * long: they are the report's siblings), the command cut to
		 * what is left: a middle cut took the separator with it */
		const char *path = im[k].path, *slash = strrchr(path, '/');
		if ((int)(strlen(path) + 2 + strlen(clean)) > W - 12 && slash)
			path = slash + 1;
		int left = W - 12 - (int)strlen(path) - 2;
		if (left < 16) {
			snprintf(line, sizeof(line), "%s: %s", path, clean);
			fprintf(out, "            %s\n", fit(line, W - 12, nb));
		} else {
			fprintf(out, "            %s: %s\n", path, fit(clean, left, nb));
		}
	}
	if (n > max)
		fprintf(out, "            ... and %zu more\n", n - max);
}

static void json_images(struct json *j, const char *key, const struct report_image *im, size_t n)
{
	json_arr_begin(j, key);
	for (size_t k = 0; k < n; k++) {
		json_obj_begin(j, NULL);
		json_str(j, "path", im[k].path);
		json_str(j, "command", im[k].command);
		json_u64(j, "pid", im[k].pid);
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* The programs the process ran before this one (a wrapper's exec), one a
 * line: which recording has each, and how to see the first alone. */
static void text_exec_before(FILE *out, const struct report_opts *o, int W)
{
	fprintf(out, "  exec'd:   the process ran %zu program%s before this one, each in its own\n"
		     "            recording (rhea report --no-follow-exec %s: the first alone):\n",
		o->nbefore, PLURAL(o->nbefore), o->before[0].path);
	text_images(out, o->before, o->nbefore, o->nbefore, W);
}

/* The processes it started (a shell's, make's): up to CHILDREN_SHOWN of
 * them, and how to report them all. */
#define CHILDREN_SHOWN 5
static void text_children(FILE *out, const struct report_opts *o, int W)
{
	size_t procs = 0; /* (a child that exec'ed has a recording per program) */
	for (size_t k = 0; k < o->nchildren; k++) {
		size_t i = 0;
		while (i < k && o->children[i].pid != o->children[k].pid)
			i++;
		procs += i == k;
	}
	fprintf(out, "  children: %zu process%s it started, ", procs, procs == 1 ? "" : "es");
	if (procs == o->nchildren)
		fprintf(out, "each in its own recording%s\n", o->all_hint ? "" : ":");
	else
		fprintf(out, "in %zu recordings%s\n", o->nchildren, o->all_hint ? "" : ":");
	if (o->all_hint)
		fprintf(out, "            (all of them: rhea report %s):\n", o->all_hint);
	text_images(out, o->children, o->nchildren, CHILDREN_SHOWN, W);
}

int report_write(struct model *m, FILE *out, const struct report_opts *o)
{
	struct recording *r = m->rec;
	struct agg a = {m, calloc(m->nfuncs, sizeof(struct fstat))};
	struct model_cb cb = {NULL, on_end, &a};
	struct cls cls[RHEA_C_COUNT] = {{0}};
	struct blk blk[RHEA_FN_COUNT] = {{0}};
	uint64_t stacks_total = 0, stacks_rooted = 0, captures = 0;
	uint32_t *frames = malloc(4096 * sizeof(uint32_t));
	struct hung *hung;
	size_t nhung = blocked_at_end(r, &hung);
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		model_walk_thread(m, t, &cb);
		for (size_t k = 0; k < t->nsamples; k++) {
			const struct rhea_sample *s = &t->samples[k];
			unsigned c = rhea_fn_class(s->trigger);
			cls[c].captures += 1u + s->merged;
			captures += 1u + s->merged;
			if (s->stack) {
				stacks_total++;
				int n = model_frames(m, s, frames, 4096);
				stacks_rooted += model_reaches_root(m, frames, n);
			}
		}
	}
	free(frames);
	blk_add(r, blk);
	for (unsigned fn = 0; fn < RHEA_FN_COUNT; fn++) { /* each class's waits: its calls' slices */
		cls[rhea_fn_class(fn)].blocks += blk[fn].count;
		cls[rhea_fn_class(fn)].blocked_ns += blk[fn].total;
	}
	uint32_t *order = malloc(m->nfuncs * sizeof(uint32_t));
	uint32_t nf = 0;
	for (uint32_t i = 0; i < m->nfuncs; i++)
		if (a.f[i].incl_ns || a.f[i].self_ns || a.f[i].alloc_count)
			order[nf++] = i;
	sort_f = a.f;
	struct site_row *sites;
	uint64_t site_count, site_bytes;
	size_t nsites = build_sites(m, &sites, &site_count, &site_bytes);
	size_t nwaits;
	struct wgroup *waits = build_waits(r, &nwaits);
	struct stalls st;
	if (stalls_find(m, o->stall_ns ? o->stall_ns : STALLS_DEFAULT_NS, &st) < 0)
		memset(&st, 0, sizeof(st)); /* out of memory: no stalls shown */
	struct cpuprof cp;
	build_cpuprof(m, &cp);
	uint32_t *cporder = malloc(m->nfuncs * sizeof(uint32_t));
	uint32_t ncp = 0;
	for (uint32_t i = 0; i < m->nfuncs; i++)
		if (cp.incl[i])
			cporder[ncp++] = i;
	sort_cp = cp.self;
	vec_sort(cporder, ncp, sizeof(uint32_t), by_cp);
	/* per thread, in the recording's order (the text sorts them later) */
	struct trow *rows = calloc(r->nthreads ? r->nthreads : 1, sizeof(*rows));
	uint64_t cpu_total = 0;
	for (size_t i = 0; i < r->nthreads; i++) {
		rows[i].i = i;
		thread_stats(r, &r->threads[i], &rows[i].ts);
		cpu_total += rows[i].ts.cpu_ns;
	}
	char note[512], cutnote[1024], jitnote[512];
	int noted = timeline_note(m, a.f, &cp, cpu_total, note, sizeof(note));
	int jitnoted = jit_note(m, &cp, jitnote, sizeof(jitnote));
	int cutnoted = model_cut_note(m, o->cuts, o->ncuts, cutnote, sizeof(cutnote));
	char shortnote[768];
	int shortnoted = shorts_note(r, rows, shortnote, sizeof(shortnote));
	/* to the end, when the agent or rhea record saw one after the last sample */
	uint64_t last = end_of(r) && end_of(r)->time_ns > r->last_ns ? end_of(r)->time_ns : r->last_ns;
	/* (from the first sample; without any, from the agent's start: a
	 * recording of /bin/true said it lasted the machine's uptime) */
	uint64_t first = r->first_ns ? r->first_ns : recording_start(r);
	uint64_t duration = last > first ? last - first : 0;
	const char *cmd = recording_meta(r, "cmdline");
	char b1[64], b2[64], b3[64], b4[64], b5[64], nb[256], eb[END_TEXT_MAX];
	uint64_t nodes = 0;
	for (uint32_t i = 0; i < r->nnodes; i++)
		nodes += r->nodes_known[i];

	if (o->json) {
		struct json j;
		json_init(&j, out, 1);
		json_obj_begin(&j, NULL);
		json_obj_begin(&j, "recording");
		json_str(&j, "path", r->path);
		json_u64(&j, "pid", r->hdr.pid);
		json_u64(&j, "ppid", r->hdr.ppid);
		json_str(&j, "command", cmd);
		json_str(&j, "exe", recording_meta(r, "exe"));
		json_bool(&j, "complete", r->have_end && !r->salvaged);
		json_bool(&j, "cut_short", !r->have_end);
		json_str(&j, "problem", r->problem[0] ? r->problem : NULL);
		json_str(&j, "end_reason", end_reason_key(r));
		json_i64(&j, "end_status", end_of(r) ? end_of(r)->status : 0);
		json_str(&j, "end_seen_by", r->have_end		? "agent"
					    : !r->end_outside		? NULL
					    : r->oend.reason == RHEA_END_GONE ? "rhea"
									: "rhea record");
		json_bool(&j, "end_recovered", !r->have_end && r->end_outside && r->end_recovered);
		json_str(&j, "write_error", recording_write_error(r));
		/* the programs the process ran before this one, when the report
		 * followed it through its execs; the processes it started */
		json_images(&j, "exec_before", o->before, o->nbefore);
		json_images(&j, "children", o->children, o->nchildren);
		json_u64(&j, "start_monotonic_ns", r->hdr.start_ns); /* the other *_ns count from it */
		json_u64(&j, "start_realtime_ns", r->hdr.start_realtime_ns);
		json_u64(&j, "duration_ns", duration);
		json_u64(&j, "interval_ns", r->hdr.interval_ns);
		json_str(&j, "unwind", recording_meta(r, "unwind"));
		json_str(&j, "hooks", recording_meta(r, "hooks"));
		json_u64(&j, "cpu_before_agent_ns", cpu_before_agent(r));
		json_str(&j, "perf_map", m->perf_map);
		json_bool(&j, "perf_map_kept", m->perf_map_kept);
		json_obj_end(&j);
		json_obj_begin(&j, "stats");
		json_u64(&j, "samples", r->nsamples);
		json_u64(&j, "captures", captures);
		json_u64(&j, "merged", r->nmerged);
		json_u64(&j, "dropped", r->stats.dropped);
		json_u64(&j, "truncated", r->stats.truncated);
		json_u64(&j, "unwind_errors", r->stats.unwind_errors);
		json_u64(&j, "stack_full", r->stats.stack_full);
		json_u64(&j, "write_errors", r->stats.write_errors);
		json_u64(&j, "waits_unattributed", r->stats.waits_unattributed);
		json_u64(&j, "agent_cpu_ns", r->stats.agent_cpu_ns);
		json_u64(&j, "ticker_wakes", r->stats.ticker_wakes);
		json_u64(&j, "ticker_coast_ns", r->stats.ticker_coast_ns);
		json_u64(&j, "sample_blocked", r->stats.sample_blocked);
		json_u64(&j, "cfi_build_ns", r->stats.cfi_build_ns);
		json_u64(&j, "chunks", r->nchunks);
		json_u64(&j, "file_bytes", r->file_bytes);
		json_u64(&j, "bytes_raw", r->stats.bytes_raw);
		json_u64(&j, "stack_nodes", nodes);
		json_u64(&j, "stacks", stacks_total);
		json_u64(&j, "stacks_reaching_root", stacks_rooted);
		json_obj_end(&j);
		json_arr_begin(&j, "threads");
		for (size_t i = 0; i < r->nthreads; i++) {
			const struct rec_thread *t = &r->threads[i];
			const struct tstat ts = rows[i].ts;
			json_obj_begin(&j, NULL);
			json_u64(&j, "tid", t->tid);
			json_str(&j, "name", t->name);
			json_u64(&j, "parent_tid", t->parent_tid);
			json_u64(&j, "start_ns", ts.first_ns ? ts.first_ns - r->hdr.start_ns : 0);
			json_u64(&j, "end_ns", ts.last_ns ? ts.last_ns - r->hdr.start_ns : 0);
			json_u64(&j, "wall_ns", ts.last_ns - ts.first_ns);
			json_u64(&j, "cpu_ns", ts.cpu_ns);
			json_u64(&j, "samples", t->nsamples);
			json_u64(&j, "captures", ts.captures);
			json_u64(&j, "sampled", ts.sampled);
			json_u64(&j, "sampled_periods", ts.sampled_periods);
			json_u64(&j, "forced", ts.forced);
			json_u64(&j, "waits", ts.blocks);
			json_u64(&j, "alloc_count", ts.alloc_count);
			json_u64(&j, "alloc_bytes", ts.alloc_bytes);
			json_bool(&j, "exited", t->exit_ns != 0);
			/* its calls too short for a slice (SHORTS), by function */
			json_arr_begin(&j, "short_calls");
			for (size_t k = 0; k < r->nshorts; k++)
				if (r->shorts[k].tid == t->tid && r->shorts[k].fn < RHEA_FN_COUNT) {
					json_obj_begin(&j, NULL);
					json_str(&j, "function", rhea_fn_name(r->shorts[k].fn));
					json_u64(&j, "count", r->shorts[k].count);
					json_u64(&j, "ns", r->shorts[k].ns);
					json_obj_end(&j);
				}
			json_arr_end(&j);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		vec_sort(order, nf, sizeof(uint32_t), by_incl);
		json_arr_begin(&j, "functions");
		for (uint32_t i = 0; i < nf; i++) {
			const struct model_func *f = &m->funcs[order[i]];
			const struct fstat *s = &a.f[order[i]];
			json_obj_begin(&j, NULL);
			json_str(&j, "name", f->name);
			json_str(&j, "module", f->module);
			json_str(&j, "file", f->file);
			json_i64(&j, "line", f->line);
			json_str(&j, "kind", f->kind == MODEL_WAIT ? "wait" : f->kind == MODEL_SPECIAL ? "special" : "code");
			json_u64(&j, "inclusive_ns", s->incl_ns);
			json_u64(&j, "self_ns", s->self_ns);
			json_u64(&j, "cpu_ns", s->incl_cpu);
			json_u64(&j, "self_cpu_ns", s->self_cpu);
			json_u64(&j, "alloc_count", s->alloc_count);
			json_u64(&j, "alloc_bytes", s->alloc_bytes);
			json_u64(&j, "minflt", s->minflt);
			json_u64(&j, "majflt", s->majflt);
			json_u64(&j, "nvcsw", s->nvcsw);
			json_u64(&j, "nivcsw", s->nivcsw);
			json_u64(&j, "slices", s->slices);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_begin(&j, "alloc_totals");
		json_u64(&j, "count", site_count);
		json_u64(&j, "bytes", site_bytes);
		json_obj_end(&j);
		json_arr_begin(&j, "alloc_sites");
		for (size_t i = 0; i < nsites; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "function", sites[i].name);
			json_str(&j, "module", sites[i].module);
			json_str(&j, "file", sites[i].file);
			json_i64(&j, "line", sites[i].line);
			json_u64(&j, "count", sites[i].count);
			json_u64(&j, "bytes", sites[i].bytes);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_arr_begin(&j, "classes");
		for (int c = 1; c < RHEA_C_COUNT; c++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "class", rhea_class_name(c));
			json_u64(&j, "captures", cls[c].captures);
			json_u64(&j, "waits", cls[c].blocks);
			json_u64(&j, "blocked_ns", cls[c].blocked_ns);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		blk_json(&j, blk);
		json_waits(&j, m, waits, nwaits);
		json_arr_begin(&j, "blocked_at_end");
		for (size_t i = 0; i < nhung; i++) {
			const struct rhea_sample *s = hung[i].s;
			char obj[32];
			snprintf(obj, sizeof(obj), "0x%" PRIx64, s->object);
			json_obj_begin(&j, NULL);
			json_u64(&j, "tid", hung[i].t->tid);
			json_str(&j, "function", rhea_fn_name(s->trigger));
			json_str(&j, "object", obj);
			json_u64(&j, "owner", s->owner_tid);
			json_u64(&j, "since_ns", s->begin_ns > r->hdr.start_ns ? s->begin_ns - r->hdr.start_ns : 0);
			json_u64(&j, "until_ns", s->end_ns > r->hdr.start_ns ? s->end_ns - r->hdr.start_ns : 0);
			json_u64(&j, "blocked_ns", s->end_ns - s->begin_ns);
			json_sample_stack(&j, "stack", m, s);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_stalls(&j, m, &st);
		json_obj_begin(&j, "cpu_profile");
		json_u64(&j, "samples", cp.total);
		json_arr_begin(&j, "functions");
		for (uint32_t i = 0; i < ncp; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "name", m->funcs[cporder[i]].name);
			json_str(&j, "module", m->funcs[cporder[i]].module);
			json_u64(&j, "self", cp.self[cporder[i]]);
			json_u64(&j, "inclusive", cp.incl[cporder[i]]);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_end(&j);
		json_arr_begin(&j, "warnings");
		const char *w;
		for (size_t i = 0; (w = sym_warning(m->sym, i)) != NULL; i++)
			json_str(&j, NULL, w);
		json_arr_end(&j);
		json_arr_begin(&j, "timeline_corrections");
		for (int k = 0; o->cuts && k < o->ncuts && k < 8; k++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "function", m->funcs[o->cuts[k].func].name);
			json_dbl(&j, "captured_cpu_share", o->cuts[k].timeline);
			json_dbl(&j, "sampler_cpu_share", o->cuts[k].sampler);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_arr_begin(&j, "notes");
		if (cutnoted)
			json_str(&j, NULL, cutnote);
		if (noted)
			json_str(&j, NULL, note);
		if (jitnoted)
			json_str(&j, NULL, jitnote);
		if (shortnoted)
			json_str(&j, NULL, shortnote);
		json_arr_end(&j);
		json_obj_end(&j);
		goto out;
	}

	int W = o->width > 40 ? o->width : 80;
	int top = o->top > 0 ? o->top : 15;
	if (o->blocking) {
		fprintf(out, "rhea report --blocking: %s\n\n", r->path);
		text_waits(out, m, waits, nwaits, top, W);
		goto out;
	}
	if (o->stalls) {
		fprintf(out, "rhea report --stalls: %s\n\n", r->path);
		text_stalls_detail(out, m, &st, top, W);
		goto out;
	}
	fprintf(out, "rhea report: %s\n", r->path);
	if (cmd) {
		char clean[256];
		convert_clean_string(cmd, clean, sizeof(clean)); /* an argument's newlines and tabs */
		fprintf(out, "  command:  %s\n", fit(clean, W - 12, nb));
	}
	fprintf(out, "  process:  pid %u, %s recorded, interval %s, unwind %s\n", r->hdr.pid,
		fmt_ns(duration, b1), fmt_ns(r->hdr.interval_ns, b2),
		recording_meta(r, "unwind") ? recording_meta(r, "unwind") : "?");
	fprintf(out, "  ended:    %s\n", end_text(r, eb));
	if (o->nbefore)
		text_exec_before(out, o, W);
	if (o->nchildren)
		text_children(out, o, W);
	uint64_t before = cpu_before_agent(r);
	if (before >= 10000000) /* (loading libc and the agent alone: 1-2 ms) */
		fprintf(out, "  before:   the process had used %s of CPU when rhea's agent started in it (loading\n"
			     "            its libraries, their constructors run first; an exec'ed program: also\n"
			     "            the time before the exec): not in this recording\n",
			fmt_ns(before, b1));
	if (recording_write_error(r))
		fprintf(out, "  warning:  the agent stopped writing the recording %s in: %s\n"
			     "            (what the program did after that is missing%s)\n",
			fmt_ns(r->last_ns > first ? r->last_ns - first : 0, b1), recording_write_error(r),
			r->end_outside && r->end_recovered ? "; what it held unwritten, recovered" : "");
	else if (!r->have_end && r->end_outside && r->end_recovered)
		fprintf(out, "  note:     the agent did not write the end (killed by SIGKILL, a raw exit_group\n"
			     "            as Go's runtime makes): rhea recovered the records it had not\n"
			     "            written yet from its buffers' memory\n");
	else if (!r->have_end && r->end_outside)
		fprintf(out, "  warning:  the agent did not write the end (killed by SIGKILL, a raw exit_group\n"
			     "            as Go's runtime makes, or the disk filled up): the records it had\n"
			     "            not written yet are missing (its last 100 ms, or since the disk filled)\n");
	if (m->perf_map)
		fprintf(out, "  jit:      code named from %s%s\n", m->perf_map,
			m->perf_map_kept ? " (its lines for these stacks, kept in the recording)" : "");
	if (r->problem[0])
		fprintf(out, "  warning:  %s (the report shows what precedes it)\n", r->problem);
	const char *w;
	for (size_t i = 0; (w = sym_warning(m->sym, i)) != NULL; i++)
		fprintf(out, "  warning:  %s\n", w);
	if (r->stats.sample_blocked)
		fprintf(out, "  warning:  %s thread%s blocked the sampling signal (with the raw system call,\n"
			     "            or before rhea attach): what %s ran between hooks was not sampled\n",
			fmt_count(r->stats.sample_blocked, b1), PLURAL(r->stats.sample_blocked),
			r->stats.sample_blocked == 1 ? "it" : "they");

	/* (captures: how often the thread was seen; identical ones in a
	 * row are one sample in the file) */
	fprintf(out, "\nThreads\n  %-8s %-16s %10s %10s %9s %10s\n", "TID", "NAME", "WALL", "CPU",
		"CAPTURES", "ALLOCS");
	/* The busiest threads first (CPU, then wall); the rest summed up. */
	vec_sort(rows, r->nthreads, sizeof(*rows), by_thread_cpu);
	size_t shown_threads = r->nthreads <= (size_t)top + 5 ? r->nthreads : (size_t)top;
	uint64_t rest_cpu = 0, rest_caps = 0;
	for (size_t k = 0; k < r->nthreads; k++) {
		const struct rec_thread *t = &r->threads[rows[k].i];
		const struct tstat *ts = &rows[k].ts;
		if (k >= shown_threads) {
			rest_cpu += ts->cpu_ns;
			rest_caps += ts->captures;
			continue;
		}
		fprintf(out, "  %-8u %-16s %10s %10s %9s %10s\n", t->tid, t->name[0] ? t->name : "?",
			fmt_ns(ts->last_ns - ts->first_ns, b1), fmt_ns(ts->cpu_ns, b2),
			fmt_count(ts->captures, b3), fmt_count(ts->alloc_count, b4));
	}
	if (shown_threads < r->nthreads)
		fprintf(out, "  ... and %zu more threads: %s CPU, %s captures (--json lists them all)\n",
			r->nthreads - shown_threads, fmt_ns(rest_cpu, b1), fmt_count(rest_caps, b2));

	int namew = W - 2 - 4 * 11;
	vec_sort(order, nf, sizeof(uint32_t), by_incl);
	fprintf(out, "\nTop functions by inclusive time (all threads; faults = minor+major page\n"
		     "faults, csw = voluntary/involuntary context switches inside)\n"
		     "  %9s %9s %4s %7s %7s %9s %s\n",
		"WALL", "CPU", "CPU%", "ALLOCS", "FAULTS", "CSW", "FUNCTION");
	for (uint32_t i = 0, shown = 0; i < nf && shown < (uint32_t)top; i++) {
		const struct model_func *f = &m->funcs[order[i]];
		const struct fstat *s = &a.f[order[i]];
		if (f->kind == MODEL_SPECIAL && s->incl_ns == 0)
			continue;
		shown++;
		char csw[32];
		snprintf(csw, sizeof(csw), "%s/%s", fmt_count(s->nvcsw, b4), fmt_count(s->nivcsw, b5));
		fprintf(out, "  %9s %9s %3.0f%% %7s %7s %9s %s\n", fmt_ns(s->incl_ns, b1), fmt_ns(s->incl_cpu, b2),
			s->incl_ns ? 100.0 * (double)s->incl_cpu / (double)s->incl_ns : 0.0,
			fmt_count(s->alloc_count, b3), fmt_count(s->minflt + s->majflt, b5), csw,
			fit(f->name, W - 54 > 16 ? W - 54 : 16, nb));
	}
	vec_sort(order, nf, sizeof(uint32_t), by_self);
	fprintf(out, "\nTop functions by self time\n  %10s %10s %10s %10s %s\n", "SELF", "SELF CPU",
		"INCL", "CPU/WALL", "FUNCTION");
	for (uint32_t i = 0; i < nf && i < (uint32_t)top; i++) {
		const struct model_func *f = &m->funcs[order[i]];
		const struct fstat *s = &a.f[order[i]];
		if (!s->self_ns)
			break;
		sprintf(b4, "%.0f%%", s->self_ns ? 100.0 * (double)s->self_cpu / (double)s->self_ns : 0.0);
		fprintf(out, "  %10s %10s %10s %10s %s\n", fmt_ns(s->self_ns, b1), fmt_ns(s->self_cpu, b2),
			fmt_ns(s->incl_ns, b3), b4, fit(f->name, namew, nb));
	}

	if (cutnoted)
		print_wrapped(out, "  note: ", cutnote, W);
	if (noted)
		print_wrapped(out, "  note: ", note, W);
	if (jitnoted)
		print_wrapped(out, "  note: ", jitnote, W);
	if (shortnoted)
		print_wrapped(out, "  note: ", shortnote, W);

	if (cp.total) {
		fprintf(out, "\nCPU profile (%s sampling periods of threads' CPU)\n"
			     "  %7s %7s %s\n", fmt_count(cp.total, b1), "SELF", "INCL", "FUNCTION");
		for (uint32_t i = 0; i < ncp && i < (uint32_t)top && cp.self[cporder[i]]; i++)
			fprintf(out, "  %6.1f%% %6.1f%% %s\n", 100.0 * (double)cp.self[cporder[i]] / (double)cp.total,
				100.0 * (double)cp.incl[cporder[i]] / (double)cp.total,
				fit(m->funcs[cporder[i]].name, W - 20, nb));
	}

	fprintf(out, "\nAllocation sites (every allocation counted: %s allocations, %s)\n",
		fmt_count(site_count, b1), fmt_bytes(site_bytes, b2));
	print_sites(out, "by count", sites, nsites, (size_t)top, W);
	vec_sort(sites, nsites, sizeof(*sites), by_site_bytes);
	print_sites(out, "by bytes", sites, nsites, (size_t)(top < 8 ? top : 8), W);

	fprintf(out, "\nTime per hook class\n  %-8s %10s %10s %12s\n", "CLASS", "CAPTURES", "WAITS", "BLOCKED");
	for (int c = 1; c < RHEA_C_COUNT; c++)
		if (cls[c].captures)
			fprintf(out, "  %-8s %10s %10s %12s\n", rhea_class_name(c), fmt_count(cls[c].captures, b1),
				fmt_count(cls[c].blocks, b2), fmt_ns(cls[c].blocked_ns, b3));
	blk_print(out, blk, r->nshorts > 0, min_block_text(r, b1), "");

	if (nhung) {
		char line[1024], fitted[1024];
		int hungw = 4;
		for (size_t i = 0; i < nhung && (int)i < top; i++)
			hungw = name_width(hungw, hung[i].s->trigger);
		fprintf(out, "\nBlocked at the end (threads in a call when the recording ended, or last seen so)\n"
			     "  %-8s %-*s %10s  %s\n", "TID", hungw, "CALL", "FOR", "ON, WHERE");
		for (size_t i = 0; i < nhung && (int)i < top; i++) {
			const struct rhea_sample *s = hung[i].s;
			char on[64] = "";
			if (s->object && rhea_fn_class(s->trigger) == RHEA_C_LOCK)
				snprintf(on, sizeof(on), "0x%" PRIx64 "%s", s->object, s->owner_tid ? " held by " : "");
			if (s->owner_tid && rhea_fn_class(s->trigger) == RHEA_C_LOCK)
				snprintf(on + strlen(on), sizeof(on) - strlen(on), "%u", s->owner_tid);
			else if (s->object && rhea_fn_class(s->trigger) != RHEA_C_LOCK)
				snprintf(on, sizeof(on), "fd %" PRIu64, s->object);
			const char *names[512];
			int nn = sample_names(m, s, names, 512);
			if (nn > 1)
				nn--; /* (its leaf: the call, named already) */
			int wherew = W - 26 - hungw;
			fprintf(out, "  %-8u %-*s %10s  %s%s%s\n", hung[i].t->tid, hungw, rhea_fn_name(s->trigger),
				fmt_ns(s->end_ns - s->begin_ns, b1), on, on[0] ? ", in " : "in ",
				fit(names_line(names, nn, 3, line, sizeof(line)), wherew > 20 ? wherew : 20, fitted));
		}
		if (nhung > (size_t)top)
			fprintf(out, "  ... and %zu more\n", nhung - (size_t)top);
	}

	if (st.loop_threads)
		text_stalls(out, m, &st, top, W);

	fprintf(out, "\nRecording\n");
	fprintf(out, "  samples %s (%s captures, %s merged away), dropped %s\n", fmt_count(r->nsamples, b1),
		fmt_count(captures, b2), fmt_count(r->nmerged, b3), fmt_count(r->stats.dropped, b4));
	/* (truncated stacks and failed walks are counted per capture, as the
	 * agent took them; the roots per sample) */
	fprintf(out, "  stacks: %s truncated, %s unwind failures (of the captures); %s of %s samples reach"
		     " main/start_thread\n",
		fmt_count(r->stats.truncated, b1), fmt_count(r->stats.unwind_errors, b2),
		fmt_count(stacks_rooted, b3), fmt_count(stacks_total, b4));
	/* (a frame-pointer walk through code built without them ends early
	 * without failing: xz under --unwind fp, 0 failures, 0 of 574 rooted) */
	const char *uw = recording_meta(r, "unwind");
	if (uw && strcmp(uw, "fp") == 0 && stacks_total >= 20 && stacks_rooted * 2 < stacks_total)
		fprintf(out, "  note: most stacks end before main/start_thread: under --unwind fp that is code built\n"
			     "        without frame pointers (Debian's are); the default, --unwind dwarf, walks it\n");
	fprintf(out, "  file: %s in %s chunk%s, %s stack nodes%s\n", fmt_bytes(r->file_bytes, b1),
		fmt_count(r->nchunks, b2), PLURAL(r->nchunks), fmt_count(nodes, b5),
		r->stats.stack_full ? " (stack table full: some stacks missing)" : "");
	if (r->stats.write_errors)
		fprintf(out, "  write errors: %s (the recording may miss data)\n", fmt_count(r->stats.write_errors, b1));
	if (r->stats.agent_cpu_ns)
		fprintf(out, "  agent: its own threads (ticker, writer, sampler) used %s of CPU, %.2f%% of the "
			"program's\n", fmt_ns(r->stats.agent_cpu_ns, b1),
			cpu_total ? 100.0 * (double)r->stats.agent_cpu_ns / (double)cpu_total : 0.0);
	/* (on the program's threads, its time is in the program's slices:
	 * where it is, the first time a library is seen, is said here) */
	if (r->stats.cfi_build_ns >= 1000000)
		fprintf(out, "  agent: building unwind tables for libraries new to its cache took %s on the program's\n"
			"         threads (at the start and in dlopen; later runs read them from the cache)\n",
			fmt_ns(r->stats.cfi_build_ns, b1));
	if (r->stats.ticker_wakes) {
		/* the statistics' time: the agent's span up to its last entry */
		uint64_t span = r->stats.time_ns > r->hdr.start_ns ? r->stats.time_ns - r->hdr.start_ns : 0;
		fprintf(out, "  ticker: woke %s times, coasted %s (%.0f%% of the recording)\n",
			fmt_count(r->stats.ticker_wakes, b1), fmt_ns(r->stats.ticker_coast_ns, b2),
			span ? 100.0 * (double)r->stats.ticker_coast_ns / (double)span : 0.0);
	}
out:
	free(rows);
	free(hung);
	stalls_free(&st);
	free(waits);
	free(cp.self);
	free(cp.incl);
	free(cporder);
	for (size_t i = 0; i < nsites; i++)
		free(sites[i].name);
	free(sites);
	free(order);
	free(a.f);
	return ferror(out) ? -1 : 0;
}

/* ---- several recordings: one row per process (image) ---------------------- */

struct prow {
	const struct recording *r;
	uint64_t start_ns, end_ns, cpu_ns, captures, allocs, alloc_bytes;
};

static int by_row_cpu(const void *a, const void *b)
{
	const struct prow *x = a, *y = b;
	if (x->cpu_ns != y->cpu_ns)
		return x->cpu_ns < y->cpu_ns ? 1 : -1;
	return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* "exit 0", "signal 9", "exec", "gone", "cut short"... */
static const char *end_short(const struct recording *r, char *buf, size_t len)
{
	const struct rhea_end *e = end_of(r);
	const char *k = end_reason_key(r);
	if (!e)
		return "cut short";
	if (e->reason == RHEA_END_EXIT || e->reason == RHEA_END_SIGNAL)
		snprintf(buf, len, "%s %d", k, e->status);
	else
		snprintf(buf, len, "%s", k);
	return buf;
}

/* Processes of one program, added up. */
struct prog {
	char name[64];
	uint32_t procs;
	uint64_t cpu_ns, wall_ns, allocs;
};

static int by_prog_cpu(const void *a, const void *b)
{
	const struct prog *x = a, *y = b;
	return (x->cpu_ns < y->cpu_ns) - (x->cpu_ns > y->cpu_ns);
}

/* Functions of several processes, merged by (name, module). */
struct xfunc {
	const char *name, *module; /* the first model's strings */
	uint64_t self_ns, self_cpu, incl_ns, incl_cpu;
	uint64_t cp_self, cp_incl; /* the sampler's periods (the CPU profile) */
	uint32_t procs;            /* processes (recordings) it ran in */
	uint32_t last_proc;        /* + 1: the last recording counted in procs */
	int code;                  /* code (MODEL_CODE), not a wait or a thread's root */
};

struct xfunc_shares {
	const struct xfunc *v;
	double cpu, periods;
};

static int xfunc_shares_of(const void *ctx, uint32_t i, struct shares *sh)
{
	const struct xfunc_shares *x = ctx;
	const struct xfunc *f = &x->v[i];
	if (!f->code || !f->procs)
		return 0;
	sh->name = f->name;
	sh->tl_incl = (double)f->incl_cpu / x->cpu;
	sh->sp_incl = (double)f->cp_incl / x->periods;
	sh->tl_self = (double)f->self_cpu / x->cpu;
	sh->sp_self = (double)f->cp_self / x->periods;
	return 1;
}

struct xtab {
	struct model names; /* the functions, interned by (name, module) as a model interns them */
	struct xfunc *v;    /* by id in names; sorted once every model is in */
	size_t n, cap;
	uint64_t cp_total;  /* the sampler's periods, all processes */
};

static struct xfunc *xtab_get(struct xtab *t, const char *name, const char *module)
{
	uint32_t id = model_func_intern(&t->names, name, module, NULL, 0, MODEL_CODE);
	if (id >= t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 512;
		while (nc <= id)
			nc *= 2;
		struct xfunc *nv = realloc(t->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		memset(nv + t->cap, 0, (nc - t->cap) * sizeof(*nv));
		t->v = nv;
		t->cap = nc;
	}
	if (id >= t->n)
		t->n = id + 1;
	struct xfunc *x = &t->v[id];
	x->name = t->names.funcs[id].name; /* strings that stay put when funcs grows */
	x->module = t->names.funcs[id].module;
	return x;
}

/* Walk model k's slices and add its functions to t. */
static int xtab_add(struct xtab *t, struct model *m, uint32_t k)
{
	struct agg a = {m, calloc(m->nfuncs ? m->nfuncs : 1, sizeof(struct fstat))};
	struct cpuprof cp;
	build_cpuprof(m, &cp);
	int rc = a.f && cp.self && cp.incl ? 0 : -1;
	struct model_cb cb = {NULL, on_end, &a};
	for (size_t i = 0; rc == 0 && i < m->rec->nthreads; i++)
		model_walk_thread(m, &m->rec->threads[i], &cb);
	for (uint32_t i = 0; rc == 0 && i < m->nfuncs; i++) {
		const struct fstat *f = &a.f[i];
		if (!f->self_ns && !f->incl_ns && !cp.incl[i])
			continue;
		struct xfunc *x = xtab_get(t, m->funcs[i].name, m->funcs[i].module);
		if (!x) {
			rc = -1;
			break;
		}
		x->self_ns += f->self_ns;
		x->self_cpu += f->self_cpu;
		x->incl_ns += f->incl_ns;
		x->incl_cpu += f->incl_cpu;
		x->cp_self += cp.self[i];
		x->cp_incl += cp.incl[i];
		x->code = m->funcs[i].kind == MODEL_CODE;
		if (x->last_proc != k + 1) {
			x->last_proc = k + 1;
			x->procs++;
		}
	}
	t->cp_total += cp.total;
	free(a.f);
	free(cp.self);
	free(cp.incl);
	return rc;
}

/* The profile's order: by the sampler's periods, self then inclusive. */
static int by_xcp(const void *a, const void *b)
{
	const struct xfunc *x = *(const struct xfunc *const *)a, *y = *(const struct xfunc *const *)b;
	if (x->cp_self != y->cp_self)
		return (x->cp_self < y->cp_self) - (x->cp_self > y->cp_self);
	return (x->cp_incl < y->cp_incl) - (x->cp_incl > y->cp_incl);
}

static int by_xself_cpu(const void *a, const void *b)
{
	const struct xfunc *x = a, *y = b;
	if (!x->procs != !y->procs) /* the unused ids (id 0) last */
		return x->procs ? -1 : 1;
	if (x->self_cpu != y->self_cpu)
		return (x->self_cpu < y->self_cpu) - (x->self_cpu > y->self_cpu);
	return (x->self_ns < y->self_ns) - (x->self_ns > y->self_ns);
}

/* Waits on process-shared objects woken from another process
 * (recording_xwakes), grouped by the waiter's innermost frames and the
 * releaser's program and frames. */
struct xgroup {
	unsigned trigger, rtrigger;
	char wline[400], rline[400], rprog[64];
	struct model *wm, *rm; /* for the JSON stacks: a representative pair */
	const struct rhea_sample *wait;
	uint32_t rstack;
	uint64_t count, total, max;
	uint32_t wprocs, rprocs;
	uint8_t *wseen, *rseen; /* per recording */
};

static int by_xgroup_total(const void *a, const void *b)
{
	const struct xgroup *x = a, *y = b;
	return (x->total < y->total) - (x->total > y->total);
}

static void xgroups_free(struct xgroup *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(g[i].wseen);
		free(g[i].rseen);
	}
	free(g);
}

/* The groups (by total waited, *ngroups of them), and how many shared
 * waits found no release (*unpaired).  NULL with *ngroups 0: none, or out
 * of memory. */
static struct xgroup *build_xgroups(struct recording *recs, struct model *models, size_t n, size_t *ngroups,
				    uint64_t *unpaired)
{
	struct xwake *w = NULL;
	long nw = recording_xwakes(recs, n, &w);
	struct xgroup *g = NULL;
	size_t ng = 0;
	*unpaired = 0;
	for (long i = 0; i < nw; i++) {
		if (!w[i].rel) {
			(*unpaired)++;
			continue;
		}
		struct model *wm = &models[w[i].wrec], *rm = &models[w[i].rrec];
		char wline[400], rline[400], rprog[64];
		stack_line(wm, w[i].wait->stack, 4, wline, sizeof(wline));
		stack_line(rm, w[i].rel->stack, 4, rline, sizeof(rline));
		recording_program(&recs[w[i].rrec], rprog, sizeof(rprog));
		size_t k = 0;
		while (k < ng && !(g[k].trigger == w[i].wait->trigger && g[k].rtrigger == w[i].rel->trigger &&
				   strcmp(g[k].wline, wline) == 0 && strcmp(g[k].rline, rline) == 0 &&
				   strcmp(g[k].rprog, rprog) == 0))
			k++;
		if (k == ng) {
			struct xgroup *ng_ = realloc(g, (ng + 1) * sizeof(*g));
			if (ng_) {
				g = ng_;
				memset(&g[ng], 0, sizeof(*g));
				g[ng].wseen = calloc(n, 1);
				g[ng].rseen = calloc(n, 1);
				ng++;
			}
			if (!ng_ || !g[k].wseen || !g[k].rseen) { /* out of memory: none shown */
				xgroups_free(g, ng);
				free(w);
				*ngroups = 0;
				return NULL;
			}
			g[k].trigger = w[i].wait->trigger;
			g[k].rtrigger = w[i].rel->trigger;
			snprintf(g[k].wline, sizeof(g[k].wline), "%s", wline);
			snprintf(g[k].rline, sizeof(g[k].rline), "%s", rline);
			snprintf(g[k].rprog, sizeof(g[k].rprog), "%s", rprog);
			g[k].wm = wm;
			g[k].rm = rm;
			g[k].wait = w[i].wait;
			g[k].rstack = w[i].rel->stack;
		}
		uint64_t d = w[i].wait->end_ns - w[i].wait->begin_ns;
		g[k].count++;
		g[k].total += d;
		if (d > g[k].max)
			g[k].max = d;
		g[k].wprocs += !g[k].wseen[w[i].wrec];
		g[k].wseen[w[i].wrec] = 1;
		g[k].rprocs += !g[k].rseen[w[i].rrec];
		g[k].rseen[w[i].rrec] = 1;
	}
	free(w);
	if (ng > 1)
		vec_sort(g, ng, sizeof(*g), by_xgroup_total);
	*ngroups = ng;
	return g;
}

int report_processes(struct recording *recs, struct model *models, size_t n, FILE *out,
		     const struct report_opts *o)
{
	struct prow *rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return -1;
	uint64_t t0 = UINT64_MAX, t1 = 0, cpu = 0, allocs = 0, threads = 0;
	for (size_t k = 0; k < n; k++) {
		const struct recording *r = &recs[k];
		struct prow *p = &rows[k];
		p->r = r;
		p->start_ns = recording_start(r);
		p->end_ns = end_of(r) && end_of(r)->time_ns > r->last_ns ? end_of(r)->time_ns : r->last_ns;
		for (size_t i = 0; i < r->nthreads; i++) {
			struct tstat ts;
			thread_stats(r, &r->threads[i], &ts);
			p->cpu_ns += ts.cpu_ns;
			p->captures += ts.captures;
			p->allocs += ts.alloc_count;
			p->alloc_bytes += ts.alloc_bytes;
		}
		if (p->start_ns && p->start_ns < t0)
			t0 = p->start_ns;
		if (p->end_ns > t1)
			t1 = p->end_ns;
		cpu += p->cpu_ns;
		allocs += p->allocs;
		threads += r->nthreads;
	}
	if (t0 == UINT64_MAX)
		t0 = 0;
	/* the blocking calls of all of them; the slices' threshold of the
	 * first that counted shorter ones (they share rhea record's options) */
	struct blk blk[RHEA_FN_COUNT] = {{0}};
	const struct recording *with_shorts = NULL;
	for (size_t k = 0; k < n; k++) {
		blk_add(&recs[k], blk);
		if (!with_shorts && recs[k].nshorts)
			with_shorts = &recs[k];
	}
	/* the same program's processes added up (a build's cc1 runs) */
	struct prog *progs = calloc(n ? n : 1, sizeof(*progs));
	size_t nprogs = 0;
	for (size_t k = 0; progs && k < n; k++) {
		char name[sizeof(progs->name)];
		recording_program(rows[k].r, name, sizeof(name));
		size_t i = 0;
		while (i < nprogs && strcmp(progs[i].name, name) != 0)
			i++;
		if (i == nprogs)
			memcpy(progs[nprogs++].name, name, sizeof(name));
		progs[i].procs++;
		progs[i].cpu_ns += rows[k].cpu_ns;
		progs[i].wall_ns += rows[k].end_ns > rows[k].start_ns ? rows[k].end_ns - rows[k].start_ns : 0;
		progs[i].allocs += rows[k].allocs;
	}
	if (nprogs > 1)
		vec_sort(progs, nprogs, sizeof(*progs), by_prog_cpu);
	/* the functions of all of them, when the caller symbolized them */
	struct xtab xt;
	memset(&xt, 0, sizeof(xt));
	int bad = models && model_funcs_init(&xt.names) < 0;
	for (size_t k = 0; models && !bad && k < n; k++)
		bad = xtab_add(&xt, &models[k], (uint32_t)k) < 0;
	if (bad) {
		free(rows);
		free(progs);
		free(xt.v);
		model_free(&xt.names);
		return -1;
	}
	if (xt.n > 1)
		vec_sort(xt.v, xt.n, sizeof(*xt.v), by_xself_cpu);
	/* waits on process-shared objects woken from another process */
	size_t nxg = 0;
	uint64_t xunpaired = 0;
	struct xgroup *xg = models ? build_xgroups(recs, models, n, &nxg, &xunpaired) : NULL;
	/* the CPU profile of all of them: the functions the sampler found */
	const struct xfunc **cpv = calloc(xt.n ? xt.n : 1, sizeof(*cpv));
	size_t ncp = 0;
	for (size_t i = 0; cpv && i < xt.n; i++)
		if (xt.v[i].cp_incl)
			cpv[ncp++] = &xt.v[i];
	if (ncp > 1)
		vec_sort(cpv, ncp, sizeof(*cpv), by_xcp);
	/* what the timeline of all of them still overstates (timeline_note) */
	char bias[1024];
	struct xfunc_shares xs = {xt.v, (double)cpu, (double)xt.cp_total};
	int biased = cpu && xt.cp_total >= 10 &&
		     timeline_note_of(&xs, (uint32_t)xt.n, xfunc_shares_of, xs.periods, "", bias, sizeof(bias));
	char b1[64], b2[64], b3[64], b4[64], eb[64], nb[512];
	if (o->json) {
		struct json j;
		json_init(&j, out, 1);
		json_obj_begin(&j, NULL);
		json_arr_begin(&j, "processes"); /* in the order given (the CLI sorts them by start) */
		for (size_t k = 0; k < n; k++) {
			const struct prow *p = &rows[k];
			const struct recording *r = p->r;
			json_obj_begin(&j, NULL);
			json_str(&j, "path", r->path);
			json_u64(&j, "pid", r->hdr.pid);
			json_u64(&j, "ppid", r->hdr.ppid);
			json_str(&j, "command", recording_meta(r, "cmdline"));
			json_str(&j, "exe", recording_meta(r, "exe"));
			json_u64(&j, "start_ns", p->start_ns > t0 ? p->start_ns - t0 : 0);
			json_u64(&j, "wall_ns", p->end_ns > p->start_ns ? p->end_ns - p->start_ns : 0);
			json_u64(&j, "cpu_ns", p->cpu_ns);
			json_u64(&j, "threads", r->nthreads);
			json_u64(&j, "samples", r->nsamples);
			json_u64(&j, "captures", p->captures);
			json_u64(&j, "allocs", p->allocs);
			json_u64(&j, "alloc_bytes", p->alloc_bytes);
			json_bool(&j, "complete", r->have_end && !r->salvaged);
			json_str(&j, "end_reason", end_reason_key(r));
			json_i64(&j, "end_status", end_of(r) ? end_of(r)->status : 0);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_arr_begin(&j, "programs"); /* the processes of each program added up, by CPU */
		for (size_t i = 0; i < nprogs; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "program", progs[i].name);
			json_u64(&j, "processes", progs[i].procs);
			json_u64(&j, "cpu_ns", progs[i].cpu_ns);
			json_u64(&j, "wall_ns", progs[i].wall_ns);
			json_u64(&j, "allocs", progs[i].allocs);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_arr_begin(&j, "functions"); /* all processes', by self CPU */
		for (size_t i = 0; i < xt.n && xt.v[i].procs; i++) {
			const struct xfunc *x = &xt.v[i];
			json_obj_begin(&j, NULL);
			json_str(&j, "name", x->name);
			json_str(&j, "module", x->module);
			json_u64(&j, "self_cpu_ns", x->self_cpu);
			json_u64(&j, "self_ns", x->self_ns);
			json_u64(&j, "inclusive_cpu_ns", x->incl_cpu);
			json_u64(&j, "inclusive_ns", x->incl_ns);
			json_u64(&j, "processes", x->procs);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_begin(&j, "cpu_profile"); /* the sampler's periods of all processes */
		json_u64(&j, "samples", xt.cp_total);
		json_arr_begin(&j, "functions");
		for (size_t i = 0; i < ncp; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "name", cpv[i]->name);
			json_str(&j, "module", cpv[i]->module);
			json_u64(&j, "self", cpv[i]->cp_self);
			json_u64(&j, "inclusive", cpv[i]->cp_incl);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_obj_end(&j);
		json_arr_begin(&j, "shared_wakes"); /* by total time waited */
		for (size_t i = 0; i < nxg; i++) {
			json_obj_begin(&j, NULL);
			json_str(&j, "function", rhea_fn_name(xg[i].trigger));
			json_u64(&j, "waits", xg[i].count);
			json_u64(&j, "processes", xg[i].wprocs);
			json_u64(&j, "total_ns", xg[i].total);
			json_u64(&j, "max_ns", xg[i].max);
			json_stack(&j, "stack", xg[i].wm, xg[i].wait->stack);
			json_str(&j, "waker_program", xg[i].rprog);
			json_u64(&j, "waker_processes", xg[i].rprocs);
			json_str(&j, "waker_function", rhea_fn_name(xg[i].rtrigger));
			json_stack(&j, "waker_stack", xg[i].rm, xg[i].rstack);
			json_obj_end(&j);
		}
		json_arr_end(&j);
		json_u64(&j, "shared_waits_unpaired", xunpaired);
		blk_json(&j, blk); /* all processes' */
		json_arr_begin(&j, "notes");
		for (size_t i = 0; o->notes && o->notes[i]; i++)
			json_str(&j, NULL, o->notes[i]);
		if (biased)
			json_str(&j, NULL, bias);
		json_arr_end(&j);
		json_obj_begin(&j, "total");
		json_u64(&j, "recordings", n);
		json_u64(&j, "threads", threads);
		json_u64(&j, "cpu_ns", cpu);
		json_u64(&j, "allocs", allocs);
		json_u64(&j, "span_ns", t1 > t0 ? t1 - t0 : 0);
		json_obj_end(&j);
		json_obj_end(&j);
		fputc('\n', out);
		free(rows);
		free(progs);
		free(cpv);
		xgroups_free(xg, nxg);
		free(xt.v);
		model_free(&xt.names);
		return ferror(out) ? -1 : 0;
	}
	int W = o->width;
	const char *cmd = n ? recording_meta(&recs[0], "cmdline") : NULL;
	fprintf(out, "rhea report: %zu recordings, %s from the first start to the last end\n", n,
		fmt_ns(t1 > t0 ? t1 - t0 : 0, b1));
	if (cmd)
		fprintf(out, "  first:    pid %u, %s\n", recs[0].hdr.pid, fit(cmd, W - 20, nb));
	fprintf(out, "  total:    %s CPU in %" PRIu64 " threads, %s allocations\n\n", fmt_ns(cpu, b1), threads,
		fmt_count(allocs, b2));
	vec_sort(rows, n, sizeof(*rows), by_row_cpu);
	size_t shown = n < (size_t)o->top ? n : (size_t)o->top;
	fprintf(out, "Processes by CPU (%zu of %zu; a process that exec'ed has a row per program; START from\n"
		     "the first start)\n", shown, n);
	fprintf(out, "  %-8s %-8s %9s %10s %10s %7s %8s %-10s %s\n", "PID", "PPID", "START", "WALL", "CPU",
		"THREADS", "ALLOCS", "ENDED", "COMMAND");
	for (size_t k = 0; k < shown; k++) {
		const struct prow *p = &rows[k];
		const struct recording *r = p->r;
		/* the program's name without its directory, then its arguments,
		 * cut at the end: their start tells processes apart */
		const char *c = recording_meta(r, "cmdline");
		char cb[512];
		if (c) {
			size_t w0 = strcspn(c, " ");
			const char *slash = memrchr(c, '/', w0);
			snprintf(cb, sizeof(cb), "%s", slash ? slash + 1 : c);
			int cw = W - 80 > 20 ? W - 80 : 20;
			if ((int)strlen(cb) > cw)
				snprintf(cb + cw - 3, sizeof(cb) - (size_t)cw + 3, "...");
			c = cb;
		}
		fprintf(out, "  %-8u %-8u %9s %10s %10s %7zu %8s %-10s %s\n", r->hdr.pid, r->hdr.ppid,
			fmt_ns(p->start_ns > t0 ? p->start_ns - t0 : 0, b1),
			fmt_ns(p->end_ns > p->start_ns ? p->end_ns - p->start_ns : 0, b2), fmt_ns(p->cpu_ns, b3),
			r->nthreads, fmt_count(p->allocs, b4), end_short(r, eb, sizeof(eb)),
			c ? c : fit(base(r->path), W - 80 > 20 ? W - 80 : 20, nb));
	}
	if (nprogs > 1) {
		size_t m = nprogs < (size_t)o->top ? nprogs : (size_t)o->top;
		fprintf(out, "\nPrograms by CPU (%zu of %zu; the processes of each added up)\n  %-24s %5s %10s %10s %8s\n", m,
			nprogs, "PROGRAM", "PROCS", "CPU", "WALL", "ALLOCS");
		for (size_t i = 0; i < m; i++)
			fprintf(out, "  %-24s %5u %10s %10s %8s\n", fit(progs[i].name, 24, nb), progs[i].procs,
				fmt_ns(progs[i].cpu_ns, b1), fmt_ns(progs[i].wall_ns, b2), fmt_count(progs[i].allocs, b3));
	}
	if (xt.n) {
		size_t m = xt.n < (size_t)o->top ? xt.n : (size_t)o->top;
		fprintf(out, "\nTop functions by self CPU, all processes\n  %10s %10s %10s %5s %s\n", "SELF CPU",
			"SELF", "INCL CPU", "PROCS", "FUNCTION");
		for (size_t i = 0; i < m && xt.v[i].self_cpu; i++) {
			const struct xfunc *x = &xt.v[i];
			char fn[600];
			snprintf(fn, sizeof(fn), "%s%s%s%s", x->name, x->module ? " (" : "", x->module ? x->module : "",
				 x->module ? ")" : "");
			fprintf(out, "  %10s %10s %10s %5u %s\n", fmt_ns(x->self_cpu, b1), fmt_ns(x->self_ns, b2),
				fmt_ns(x->incl_cpu, b3), x->procs, fit(fn, W - 43 > 16 ? W - 43 : 16, nb));
		}
	}
	if (ncp && cpv[0]->cp_self) {
		fprintf(out, "\nCPU profile, all processes (%s sampling periods of threads' CPU)\n  %7s %7s %5s %s\n",
			fmt_count(xt.cp_total, b1), "SELF", "INCL", "PROCS", "FUNCTION");
		for (size_t i = 0; i < ncp && i < (size_t)o->top && cpv[i]->cp_self; i++) {
			const struct xfunc *x = cpv[i];
			char fn[600];
			snprintf(fn, sizeof(fn), "%s%s%s%s", x->name, x->module ? " (" : "", x->module ? x->module : "",
				 x->module ? ")" : "");
			fprintf(out, "  %6.1f%% %6.1f%% %5u %s\n", 100.0 * (double)x->cp_self / (double)xt.cp_total,
				100.0 * (double)x->cp_incl / (double)xt.cp_total, x->procs,
				fit(fn, W - 25 > 16 ? W - 25 : 16, nb));
		}
	}
	blk_print(out, blk, with_shorts != NULL, with_shorts ? min_block_text(with_shorts, b1) : "", ", all processes");
	if (nxg || xunpaired)
		fprintf(out, "\nWaits on process-shared objects, woken from another process (by total time)\n");
	for (size_t i = 0; i < nxg && i < (size_t)o->top; i++) {
		char line[512];
		fprintf(out, " %2zu. %s: %s wait%s in %u process%s, total %s, max %s\n", i + 1,
			rhea_fn_name(xg[i].trigger), fmt_count(xg[i].count, b1), PLURAL(xg[i].count), xg[i].wprocs,
			xg[i].wprocs == 1 ? "" : "es", fmt_ns(xg[i].total, b2), fmt_ns(xg[i].max, b3));
		fprintf(out, "    waiter:   %s\n", fit(xg[i].wline, W - 14, nb));
		snprintf(line, sizeof(line), "%s in %s (%u process%s), at:", rhea_fn_name(xg[i].rtrigger), xg[i].rprog,
			 xg[i].rprocs, xg[i].rprocs == 1 ? "" : "es");
		fprintf(out, "    woken by: %s\n              %s\n", fit(line, W - 14, nb), fit(xg[i].rline, W - 14, nb));
	}
	if (xunpaired)
		fprintf(out, "  %s waits on process-shared objects found no release in these recordings (a\n"
			     "  releaser not recorded, or one that maps the object at another address)\n",
			fmt_count(xunpaired, b1));
	if ((o->notes && o->notes[0]) || biased)
		fputc('\n', out);
	for (size_t i = 0; o->notes && o->notes[i]; i++)
		print_wrapped(out, "note: ", o->notes[i], W);
	if (biased)
		print_wrapped(out, "note: ", bias, W);
	fprintf(out, "\n(rhea report FILE for one of them; rhea convert FILE... for one Perfetto trace of all)\n");
	free(rows);
	free(progs);
	free(cpv);
	xgroups_free(xg, nxg);
	free(xt.v);
	model_free(&xt.names);
	return ferror(out) ? -1 : 0;
}

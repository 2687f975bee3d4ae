/*
 * stalls.c - event-loop iterations that ran too long (see stalls.h).
 *
 * Where an iteration begins and ends.  The agent increments a thread's
 * message id right after a loop wait returns, so every sample of one
 * iteration carries its id, and the wait that ends it carries it too:
 *
 *   - that wait, when it lasted at least --min-block, is a BLOCK sample
 *     whose begin is the exact end of the busy part, and whose end is the
 *     exact start of the next iteration;
 *   - a shorter wait leaves at most a capture taken as it returned (the
 *     epoch moved meanwhile): its time is that of the return, within
 *     --min-block of the call;
 *   - otherwise the nearest captures bound the iteration: it began before
 *     its first sample and ended after its last.  Those are the bounds
 *     taken, so a stall is never made longer than it was (it can look
 *     shorter by up to the time between captures: the interval while the
 *     thread calls hooked functions, the sampler's period when it only
 *     computes).
 *
 * The message before the first loop wait (0: the program starting) is not
 * an iteration.  Neither is a thread's last message when the process ended
 * normally (the loop was left, or the thread exited); when it died of a
 * signal or the recording was cut short (SIGKILL), an unfinished
 * iteration longer than the threshold is a fatal stall, ending where the
 * recording does.
 *
 * Where the time went: each sample holds the thread until the next one
 * begins (the model's default, MODEL_END_NEXT), a sampler capture taken
 * during a recorded wait adds nothing to it (as in model.c); samples with
 * the same stack, and for waits the same call, add up; the largest total
 * wins, the latest among equals (Matrix's rule: the stack seen most, not the
 * one seen last).
 */
#include "stalls.h"
#include "hookfn.h"
#include "vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stack that took the most time ---------------------------------- */

struct part {
	uint32_t stack, trigger; /* trigger: BLOCK samples only, else 0 */
	int block;
	uint64_t ns;
	size_t idx; /* the latest sample of this stack */
};

static int part_key_cmp(const void *a, const void *b)
{
	const struct part *x = a, *y = b;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	if (x->block != y->block)
		return x->block < y->block ? -1 : 1;
	if (x->trigger != y->trigger)
		return x->trigger < y->trigger ? -1 : 1;
	return 0;
}

/* A sampler capture taken while the sample before it was a recorded wait
 * says nothing more than the wait (model.c skips it the same way). */
static int adds_nothing(const struct rhea_sample *s, const struct rhea_sample *prev)
{
	return prev && (s->h.flags & RHEA_S_ASYNC) && (prev->h.flags & RHEA_S_BLOCK) &&
	       s->begin_ns <= prev->end_ns;
}

/*
 * Samples s[i0..i1) of one thread, each holding the thread from its begin
 * to the next one's (the last: to `until`), seen through [begin, end).
 * Returns the index of the sample whose stack held the most, or (size_t)-1.
 */
static size_t top_of(const struct rhea_sample *s, size_t i0, size_t i1, uint64_t until, uint64_t begin,
		     uint64_t end, uint64_t *ns)
{
	*ns = 0;
	if (i0 >= i1)
		return (size_t)-1;
	struct part *p = malloc((i1 - i0) * sizeof(*p));
	if (!p)
		return (size_t)-1;
	size_t n = 0, cur = (size_t)-1;
	for (size_t k = i0; k <= i1; k++) {
		/* k == i1: close the current sample at `until` */
		if (k < i1 && cur != (size_t)-1 && adds_nothing(&s[k], &s[cur]))
			continue;
		if (cur != (size_t)-1) {
			uint64_t a = s[cur].begin_ns > begin ? s[cur].begin_ns : begin;
			uint64_t b = k < i1 ? s[k].begin_ns : until;
			if (b > end)
				b = end;
			int block = (s[cur].h.flags & RHEA_S_BLOCK) != 0;
			struct part x = {s[cur].stack, block ? s[cur].trigger : 0u, block, b > a ? b - a : 0, cur};
			p[n++] = x;
		}
		cur = k;
	}
	vec_sort(p, n, sizeof(*p), part_key_cmp);
	size_t best = (size_t)-1;
	uint64_t best_ns = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t sum = 0, last = 0;
		for (; j < n && part_key_cmp(&p[i], &p[j]) == 0; j++) {
			sum += p[j].ns;
			if (p[j].idx + 1 > last)
				last = p[j].idx + 1;
		}
		if (best == (size_t)-1 || sum > best_ns || (sum == best_ns && last - 1 > best)) {
			best = last - 1;
			best_ns = sum;
		}
		i = j;
	}
	free(p);
	*ns = best_ns;
	return best;
}

const struct rhea_sample *stalls_top_during(const struct rec_thread *t, uint64_t begin, uint64_t end,
					    uint64_t *ns)
{
	*ns = 0;
	const struct rhea_sample *s = t->samples;
	size_t n = t->nsamples;
	if (n == 0 || end <= begin)
		return NULL;
	/* the first sample still holding the thread at `begin`: the last one
	 * that began by then (binary search: samples are sorted by begin) */
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s[mid].begin_ns <= begin)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t i0 = lo > 0 ? lo - 1 : 0, i1 = i0;
	while (i1 < n && s[i1].begin_ns < end)
		i1++;
	if (i1 == i0)
		return NULL;
	/* a thread's last sample holds it until it exits (or to the end) */
	uint64_t until = i1 < n ? s[i1].begin_ns : (t->exit_ns ? t->exit_ns : end);
	if (until < s[i1 - 1].end_ns)
		until = s[i1 - 1].end_ns;
	size_t k = top_of(s, i0, i1, until, begin, end, ns);
	return k == (size_t)-1 || *ns == 0 ? NULL : &s[k];
}

int stalls_sampled_during(const struct rec_thread *t, uint64_t begin, uint64_t end)
{
	size_t lo = 0, hi = t->nsamples;
	while (lo < hi) { /* the first sample that begins at begin or later */
		size_t mid = lo + (hi - lo) / 2;
		if (t->samples[mid].begin_ns < begin)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nsamples && t->samples[lo].begin_ns < end;
}

/* ---- causes ---------------------------------------------------------------- */

static size_t cause_of(struct stall_cause **v, size_t *n, const uint32_t *ids, int nids, int depth,
		       uint64_t dur, size_t stall)
{
	int d = nids < depth ? nids : depth;
	uint32_t key[STALL_CAUSE_DEPTH];
	for (int i = 0; i < d; i++)
		key[i] = ids[nids - 1 - i]; /* innermost first */
	size_t i = 0;
	for (; i < *n; i++)
		if ((*v)[i].depth == d && memcmp((*v)[i].funcs, key, (size_t)d * sizeof(key[0])) == 0)
			break;
	if (i == *n) {
		struct stall_cause *nv = realloc(*v, (*n + 1) * sizeof(**v));
		if (!nv)
			return (size_t)-1;
		*v = nv;
		memset(&nv[i], 0, sizeof(nv[i]));
		memcpy(nv[i].funcs, key, (size_t)d * sizeof(key[0]));
		nv[i].depth = d;
		(*n)++;
	}
	struct stall_cause *c = &(*v)[i];
	c->count++;
	c->total_ns += dur;
	if (dur > c->max_ns) {
		c->max_ns = dur;
		c->worst = stall;
	}
	return i;
}

static int by_total(const void *a, const void *b, void *arg)
{
	const struct stall_cause *v = arg;
	const struct stall_cause *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return x->worst < y->worst ? -1 : x->worst > y->worst; /* the earlier first */
}

/* Sort causes by total time and point the stalls at their new places. */
static int sort_causes(struct stalls *st, struct stall_cause *v, size_t n, int sub)
{
	if (n == 0)
		return 0;
	size_t *ord = malloc(n * sizeof(*ord)), *was = malloc(n * sizeof(*was));
	struct stall_cause *sorted = malloc(n * sizeof(*sorted));
	if (!ord || !was || !sorted) {
		free(ord);
		free(was);
		free(sorted);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, n, sizeof(*ord), by_total, v);
	for (size_t i = 0; i < n; i++) {
		sorted[i] = v[ord[i]];
		was[ord[i]] = i;
	}
	memcpy(v, sorted, n * sizeof(*v));
	for (size_t i = 0; i < st->n; i++) {
		size_t *c = sub ? &st->v[i].subcause : &st->v[i].cause;
		*c = was[*c];
	}
	free(ord);
	free(was);
	free(sorted);
	return 0;
}

/* ---- iterations -------------------------------------------------------------- */

static int is_loop_wait(const struct rhea_sample *s)
{
	return rhea_fn_is_loop(s->trigger) && !(s->h.flags & RHEA_S_ASYNC);
}

/*
 * The end of the samples [i, j) of one message that count: without the
 * sampler's captures taken inside or at the return of its last loop wait.
 * The sampler's CPU timer can fire as a long wait returns, before the hook
 * counts the next message: that capture sorts after the wait's BLOCK
 * sample and would stretch the iteration over the whole wait (an idle
 * 95 ms in redis's epoll_wait showed as a stall).
 */
static size_t message_end(const struct rhea_sample *s, size_t i, size_t j)
{
	size_t k = j;
	while (k > i && !is_loop_wait(&s[k - 1]))
		k--;
	if (k == i || k == j)
		return j; /* no loop wait, or it is the last sample already */
	const struct rhea_sample *w = &s[k - 1];
	for (size_t q = k; q < j; q++)
		if (!(s[q].h.flags & RHEA_S_ASYNC) || s[q].begin_ns < w->begin_ns || s[q].begin_ns > w->end_ns)
			return j;
	return k;
}

static int add_stall(struct stalls *st, size_t *cap, const struct stall *x)
{
	if (st->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct stall *nv = realloc(st->v, nc * sizeof(*nv));
		if (!nv)
			return -1;
		st->v = nv;
		*cap = nc;
	}
	st->v[st->n++] = *x;
	return 0;
}

static int by_begin(const void *a, const void *b)
{
	const struct stall *x = a, *y = b;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns ? -1 : 1;
	return x->t->tid < y->t->tid ? -1 : x->t->tid > y->t->tid;
}

/* The stalls of one thread. */
static int thread_stalls(struct model *m, const struct rec_thread *t, struct stalls *st, size_t *cap)
{
	const struct recording *r = m->rec;
	const struct rhea_sample *s = t->samples;
	size_t n = t->nsamples;
	int died = !r->have_end || r->end.reason == RHEA_END_SIGNAL;
	uint64_t rec_end = r->have_end && r->end.time_ns > r->last_ns ? r->end.time_ns : r->last_ns;
	/* prev: the previous message's last sample that counts */
	const struct rhea_sample *prev = NULL;
	for (size_t i = 0, j, e; i < n; prev = &s[e - 1], i = j) {
		j = i;
		while (j < n && s[j].msgid == s[i].msgid)
			j++;
		/* samples [i, j) are one message; [i, e) count */
		e = message_end(s, i, j);
		if (s[i].msgid == 0)
			continue;
		struct stall x;
		memset(&x, 0, sizeof(x));
		x.t = t;
		x.msgid = s[i].msgid;
		x.samples = (uint32_t)(e - i);
		const struct rhea_sample *last = &s[e - 1];
		if (prev && is_loop_wait(prev)) {
			x.begin_ns = prev->end_ns; /* the return of the wait */
			x.begin_exact = (prev->h.flags & RHEA_S_BLOCK) != 0;
			x.cb = prev->c_end;
		} else {
			x.begin_ns = s[i].begin_ns;
			x.cb = s[i].c_begin;
		}
		int finished = j < n || is_loop_wait(last);
		if (!finished && (!died || t->exit_ns))
			continue; /* the loop was left; or the thread exited */
		if (is_loop_wait(last)) {
			x.end_ns = last->begin_ns; /* the call of the wait (or its return) */
			x.end_exact = (last->h.flags & RHEA_S_BLOCK) != 0;
			x.ce = last->c_begin;
		} else {
			x.end_ns = last->end_ns;
			x.ce = last->c_end;
		}
		if (!finished) {
			x.fatal = 1;
			if (rec_end > x.end_ns)
				x.end_ns = rec_end;
		}
		if (x.end_ns < x.begin_ns)
			x.end_ns = x.begin_ns;
		if (x.end_ns - x.begin_ns >= st->threshold_ns && x.end_ns > x.begin_ns) {
			size_t k = top_of(s, i, e, x.end_ns, x.begin_ns, x.end_ns, &x.top_ns);
			x.top = k == (size_t)-1 ? NULL : &s[k];
			if (add_stall(st, cap, &x) < 0)
				return -1;
		}
	}
	/* messages 1 .. last-1 ended, the last too if a loop wait ended it
	 * (ids count the iterations without a sample too) */
	if (n && s[n - 1].msgid > 0)
		st->iterations += s[n - 1].msgid - 1u + (is_loop_wait(prev) ? 1u : 0u);
	return 0;
}

int stalls_find(struct model *m, uint64_t threshold_ns, struct stalls *out)
{
	memset(out, 0, sizeof(*out));
	out->threshold_ns = threshold_ns ? threshold_ns : 1;
	const struct recording *r = m->rec;
	size_t cap = 0;
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct rec_thread *t = &r->threads[i];
		int loop = 0;
		for (size_t k = 0; k < t->nsamples && !loop; k++)
			loop = t->samples[k].msgid != 0;
		if (!loop)
			continue;
		out->loop_threads++;
		if (thread_stalls(m, t, out, &cap) < 0)
			goto oom;
	}
	if (out->n)
		vec_sort(out->v, out->n, sizeof(*out->v), by_begin);
	uint32_t ids[512];
	for (size_t i = 0; i < out->n; i++) {
		struct stall *x = &out->v[i];
		int nids = x->top ? model_frames(m, x->top, ids, 512) : 0;
		uint64_t dur = x->end_ns - x->begin_ns;
		x->cause = cause_of(&out->causes, &out->ncauses, ids, nids, 2, dur, i);
		x->subcause = cause_of(&out->subcauses, &out->nsubcauses, ids, nids, STALL_CAUSE_DEPTH, dur, i);
		if (x->cause == (size_t)-1 || x->subcause == (size_t)-1)
			goto oom;
	}
	if (sort_causes(out, out->causes, out->ncauses, 0) < 0 ||
	    sort_causes(out, out->subcauses, out->nsubcauses, 1) < 0)
		goto oom;
	return 0;
oom:
	stalls_free(out);
	return -1;
}

const char *stalls_cause_line(const struct stall_cause *k, const char *(*name)(void *arg, uint32_t func),
			      void *arg, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < k->depth && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? " < " : "", name(arg, k->funcs[i]));
	if (k->depth == 0)
		snprintf(buf, len, "[no stack]");
	return buf;
}

void stalls_free(struct stalls *s)
{
	free(s->v);
	free(s->causes);
	free(s->subcauses);
	memset(s, 0, sizeof(*s));
}

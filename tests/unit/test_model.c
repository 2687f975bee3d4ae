/* Unit tests of analysis/model.c on hand-made recordings: stacks compared
 * from the root, merged samples, message ids splitting identical stacks,
 * blocking calls as pseudo-frames, the two end policies, counters. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hookfn.h"
#include "model.h"
#include "fixture_nodes.h"

#define MS 1000000ull

static struct recording rec;
static struct rec_thread th;

/* Nodes: fixture_nodes.h (A, B under A, C under B, E under A). */
static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	memset(&th, 0, sizeof(th));
	fixture_nodes(&rec);
	th.tid = 42;
	th.samples = calloc(16, sizeof(struct rhea_sample));
	rec.threads = &th;
	rec.nthreads = 1;
}

static void teardown(void)
{
	free(rec.nodes);
	free(rec.nodes_known);
	free(th.samples);
}

static void add(uint32_t stack, uint64_t b, uint64_t e, uint32_t msgid, unsigned flags, unsigned trig,
		uint64_t cpu_b, uint64_t cpu_e, uint64_t allocs_b, uint64_t allocs_e)
{
	struct rhea_sample *s = &th.samples[th.nsamples++];
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.flags = (uint16_t)flags;
	s->tid = 42;
	s->stack = stack;
	s->begin_ns = b;
	s->end_ns = e;
	s->msgid = msgid;
	s->trigger = (uint16_t)trig;
	s->c_begin.cpu_ns = cpu_b;
	s->c_end.cpu_ns = cpu_e;
	s->c_begin.alloc_count = allocs_b;
	s->c_end.alloc_count = allocs_e;
}

struct got {
	char name[64];
	int depth;
	uint64_t b, e, cpu, allocs;
};
static struct got slices[4096];
static int nslices;
static struct model *cur;

static void on_end(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)arg;
	(void)t;
	cr_assert_lt(nslices, 4096, "more slices than the test keeps");
	struct got *g = &slices[nslices++];
	snprintf(g->name, sizeof(g->name), "%s", cur->funcs[s->func].name);
	g->depth = s->depth;
	g->b = s->begin_ns;
	g->e = s->end_ns;
	g->cpu = s->ce.cpu_ns - s->cb.cpu_ns;
	g->allocs = s->ce.alloc_count - s->cb.alloc_count;
}

static void walk(int policy)
{
	static struct model m;
	nslices = 0;
	cr_assert_eq(model_build(&m, &rec, policy), 0);
	cur = &m;
	struct model_cb cb = {NULL, on_end, NULL};
	model_walk_thread(&m, &th, &cb);
	/* Names: unresolved addresses are "?+0x<addr>"; map them to letters. */
	for (int i = 0; i < nslices; i++) {
		const char *n = slices[i].name;
		const char *x = strstr(n, "0x");
		if (x) {
			unsigned long a = strtoul(x, NULL, 16);
			snprintf(slices[i].name, sizeof(slices[i].name), "%c", "?ABCE"[a / 0x100]);
		}
	}
	model_free(&m);
}

static const struct got *find(const char *name, int nth)
{
	for (int i = 0; i < nslices; i++)
		if (strcmp(slices[i].name, name) == 0 && nth-- == 0)
			return &slices[i];
	return NULL;
}

TestSuite(model, .init = setup, .fini = teardown);

Test(model, frames_compared_from_root)
{
	add(3, 0, 0, 0, 0, RHEA_FN_MALLOC, 0, 0, 0, 0);       /* A>B>C at 0 */
	add(3, 1 * MS, 5 * MS, 0, 0, RHEA_FN_MALLOC, 1, 5, 1, 5); /* merged: 1..5 ms */
	add(4, 6 * MS, 6 * MS, 0, 0, RHEA_FN_FREE, 6, 6, 6, 6);  /* A>E at 6 */
	add(4, 8 * MS, 8 * MS, 0, 0, RHEA_FN_FREE, 8, 8, 9, 9);
	walk(MODEL_END_NEXT);
	cr_assert_eq(nslices, 4, "A, B, C, E: got %d", nslices);
	const struct got *a = find("A", 0), *b = find("B", 0), *c = find("C", 0), *e = find("E", 0);
	cr_assert(a && b && c && e);
	cr_assert_eq(a->b, 0);
	cr_assert_eq(a->e, 8 * MS, "A spans every sample");
	cr_assert_eq(b->e, 6 * MS, "B ends when the next sample without it begins");
	cr_assert_eq(c->e, 6 * MS);
	cr_assert_eq(e->b, 6 * MS);
	cr_assert_eq(e->e, 8 * MS);
	cr_assert_eq(b->allocs, 6, "allocation counters at the slice's ends");
	cr_assert_eq(a->allocs, 9);
	cr_assert_eq(a->depth, 0);
	cr_assert_eq(c->depth, 2);
}

Test(model, end_policy_last)
{
	add(3, 0, 5 * MS, 0, 0, RHEA_FN_MALLOC, 0, 5, 0, 0);
	add(4, 6 * MS, 8 * MS, 0, 0, RHEA_FN_FREE, 6, 8, 0, 0);
	walk(MODEL_END_LAST);
	cr_assert_eq(find("B", 0)->e, 5 * MS, "B ends with the last sample that saw it");
	cr_assert_eq(find("E", 0)->b, 6 * MS);
}

Test(model, message_id_splits_identical_stacks)
{
	/* Two messages handled by the same stack, an event-loop wait between. */
	add(3, 0, 2 * MS, 1, 0, RHEA_FN_MALLOC, 0, 2, 0, 0);
	add(3, 5 * MS, 7 * MS, 2, 0, RHEA_FN_MALLOC, 2, 4, 0, 0);
	walk(MODEL_END_LAST);
	cr_assert_not_null(find("C", 1), "two slices of C, not one");
	cr_assert_eq(find("C", 0)->e, 2 * MS);
	cr_assert_eq(find("C", 1)->b, 5 * MS);
	cr_assert_not_null(find("A", 1), "every frame ends, the root too");
}

Test(model, same_message_merges)
{
	add(3, 0, 2 * MS, 1, 0, RHEA_FN_MALLOC, 0, 2, 0, 0);
	add(3, 5 * MS, 7 * MS, 1, 0, RHEA_FN_MALLOC, 2, 4, 0, 0);
	walk(MODEL_END_NEXT);
	cr_assert_null(find("C", 1), "one message: one slice");
	cr_assert_eq(find("C", 0)->e, 7 * MS);
}

Test(model, blocking_call_is_a_pseudo_frame)
{
	add(2, 0, 0, 0, 0, RHEA_FN_MALLOC, 0, 0, 0, 0);                          /* A>B */
	add(2, 1 * MS, 51 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP, 1, 1, 0, 0); /* B sleeps 50 ms */
	add(3, 52 * MS, 52 * MS, 0, 0, RHEA_FN_MALLOC, 2, 2, 0, 0);
	walk(MODEL_END_NEXT);
	const struct got *w = find("nanosleep", 0);
	cr_assert_not_null(w);
	cr_assert_eq(w->b, 1 * MS);
	cr_assert_eq(w->e, 51 * MS, "the wait lasts from the call to its return");
	cr_assert_eq(w->depth, 2, "under its caller B");
	cr_assert_eq(w->cpu, 0);
	cr_assert_null(find("B", 1), "B continues across the wait");
	cr_assert_eq(find("B", 0)->e, 52 * MS);
}

Test(model, repeated_blocking_calls_are_separate)
{
	add(2, 0, 10 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP, 0, 0, 0, 0);
	add(2, 10 * MS, 20 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP, 0, 0, 0, 0);
	walk(MODEL_END_NEXT);
	cr_assert_not_null(find("nanosleep", 1), "two sleeps, two slices");
	cr_assert_null(find("B", 1));
}

/* A hook's capture inside a wait's call, after it woke (the free in
 * pthread_join): its slice starts where the wait's ends, with the counters
 * read there, not its own read earlier (which counted 8..10 ms twice: 2.5
 * ms of CPU in a 2 ms slice). */
Test(model, capture_inside_a_wait_starts_at_its_end)
{
	add(2, 0, 10 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP, 0, 1 * MS, 0, 3);
	add(3, 8 * MS, 8 * MS, 0, 0, RHEA_FN_FREE, MS / 2, MS / 2, 2, 2);
	add(4, 12 * MS, 12 * MS, 0, 0, RHEA_FN_FREE, 3 * MS, 3 * MS, 5, 5);
	walk(MODEL_END_NEXT);
	const struct got *c = find("C", 0), *a = find("A", 0);
	cr_assert(c && a);
	cr_assert_eq(c->b, 10 * MS);
	cr_assert_eq(c->e, 12 * MS);
	cr_assert_eq(c->cpu, 2 * MS, "C's CPU: %llu ns", (unsigned long long)c->cpu);
	cr_assert_eq(c->allocs, 2, "the allocations in C: %llu", (unsigned long long)c->allocs);
	cr_assert_eq(find("nanosleep", 0)->cpu, 1 * MS);
	cr_assert_eq(a->cpu, 3 * MS);
}

/* The same capture as a thread's last: what it opened at the wait's end
 * closes with the counters read there, not the capture's own, earlier
 * (2 allocations less: a difference of nearly 2^64), under both policies. */
Test(model, capture_inside_a_wait_as_the_last)
{
	add(2, 0, 10 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP, 0, 1 * MS, 0, 3);
	add(3, 8 * MS, 8 * MS, 0, 0, RHEA_FN_FREE, MS / 2, MS / 2, 2, 2);
	for (int policy = MODEL_END_NEXT; policy <= MODEL_END_LAST; policy++) {
		walk(policy);
		const struct got *c = find("C", 0), *a = find("A", 0);
		cr_assert(c && a);
		cr_assert_eq(c->b, 10 * MS);
		cr_assert_eq(c->allocs, 0, "policy %d: C's allocations %llu", policy, (unsigned long long)c->allocs);
		cr_assert_eq(c->cpu, 0);
		cr_assert_eq(a->allocs, 3, "policy %d: A's allocations %llu", policy, (unsigned long long)a->allocs);
		cr_assert_eq(a->cpu, 1 * MS);
	}
}

Test(model, missing_node_becomes_unknown_root)
{
	add(7, 0, 1 * MS, 0, 0, RHEA_FN_MALLOC, 0, 0, 0, 0); /* node 7 never written */
	walk(MODEL_END_NEXT);
	cr_assert_eq(nslices, 1);
	cr_assert_str_eq(slices[0].name, "[unknown]");
}

/* ---- model_correct: the hook-site correction ------------------------------ */

/*
 * One thread computing for 600 ms (1 ms of CPU per ms): a hook's capture
 * every ms at A>B>C (C: a helper that calls a hooked function), and every
 * 10 ms, half-way to the next hook's capture, one of the sampler's: the
 * first `nsampler` of them, at A>B>C for the first `at_c` and at A>B for
 * the rest.  A is the root (main).  Returns C's and B's CPU on the
 * timeline after model_correct (raw = 0) or as captured (raw = 1), in ms,
 * and what model_correct reported.
 */
struct corr {
	double c_ms, b_ms;
	int ncut;
	struct model_cut cut[4];
	int block_kept; /* the wait at C kept its stack */
};

/* th: a thread computing for `ms` ms (1 ms of CPU per ms), a hook's
 * capture every ms at A>B>C and, every 10 ms, half-way to the next, one of
 * the sampler's, at the stack sampler_at(k, arg) gives for the k-th (0:
 * none).  Room is left for one more sample. */
static void computing_thread(int ms, uint32_t (*sampler_at)(int k, const int *arg), const int *arg)
{
	free(th.samples);
	th.samples = calloc((size_t)ms + (size_t)ms / 10 + 2, sizeof(struct rhea_sample));
	th.nsamples = 0;
	for (int i = 0; i < ms; i++) {
		uint64_t t = (uint64_t)i * MS;
		add(3, t, t, 0, 0, RHEA_FN_MALLOC, t, t, 0, 0);
		uint32_t at = i % 10 == 5 ? sampler_at(i / 10, arg) : 0;
		if (at) {
			uint64_t ts = t + MS / 2;
			add(at, ts, ts, 0, RHEA_S_ASYNC | RHEA_S_LEAF_EXACT, RHEA_FN_SAMPLER, ts, ts, 0, 0);
			th.samples[th.nsamples - 1].object = 1;
		}
	}
}

/* arg: {periods, how many of them at A>B>C (the rest at A>B)} */
static uint32_t first_at_c(int k, const int *arg)
{
	return k >= arg[0] ? 0 : k < arg[1] ? 3 : 2;
}

static struct corr run_correct(int nsampler, int at_c, int raw)
{
	struct corr out = {0};
	const int arg[2] = {nsampler, at_c};
	computing_thread(600, first_at_c, arg);
	/* a wait at C, 10 ms, at the end */
	add(3, 600 * MS, 610 * MS, 0, RHEA_S_BLOCK, RHEA_FN_MUTEX_LOCK, 600 * MS, 600 * MS, 0, 0);
	static struct model m;
	cr_assert_eq(model_build(&m, &rec, MODEL_END_NEXT), 0);
	cur = &m;
	uint32_t fa = m.node_func[1], fc = m.node_func[3];
	m.funcs[fa].root = 1;
	if (!raw)
		out.ncut = model_correct(&m, out.cut, 4);
	for (int k = 0; k < out.ncut && k < 4; k++)
		cr_assert_eq(out.cut[k].func, fc, "only C may be thinned");
	nslices = 0;
	struct model_cb cb = {NULL, on_end, NULL};
	model_walk_thread(&m, &th, &cb);
	uint32_t ids[16];
	int n = model_frames(&m, &th.samples[th.nsamples - 1], ids, 16);
	out.block_kept = n == 4 && ids[2] == fc; /* A B C, then the wait's pseudo-frame */
	for (int i = 0; i < nslices; i++) {
		double ms = (double)slices[i].cpu / MS;
		if (strstr(slices[i].name, "0x300"))
			out.c_ms += ms;
		else if (strstr(slices[i].name, "0x200"))
			out.b_ms += ms;
	}
	model_free(&m);
	return out;
}

Test(model, correct_moves_a_helpers_time_to_its_caller)
{
	/* The sampler never finds C: as captured, C has the thread's CPU. */
	struct corr raw = run_correct(60, 0, 1);
	cr_assert_geq(raw.c_ms, 560, "as captured, C has %.1f ms of 600", raw.c_ms);
	struct corr c = run_correct(60, 0, 0);
	cr_assert_eq(c.ncut, 1, "C must be thinned");
	cr_assert_gt(c.cut[0].timeline, 0.9);
	cr_assert_lt(c.cut[0].sampler, 0.01);
	cr_assert_leq(c.c_ms, 6, "corrected, C keeps %.1f ms of 600", c.c_ms);
	cr_assert_geq(c.b_ms, 594, "corrected, B (C's caller) has %.1f ms of 600", c.b_ms);
	cr_assert(c.block_kept, "a wait is never cut");
}

Test(model, correct_keeps_the_samplers_share)
{
	/* The sampler finds C in 20 of 60 periods: C keeps about a third. */
	struct corr c = run_correct(60, 20, 0);
	cr_assert_eq(c.ncut, 1);
	cr_assert(c.c_ms >= 170 && c.c_ms <= 240, "C has %.1f ms of 600, want about 200", c.c_ms);
}

Test(model, correct_leaves_an_agreeing_or_unsampled_timeline)
{
	/* The sampler agrees (C in 55 of 60): nothing to correct. */
	struct corr a = run_correct(60, 55, 0);
	cr_assert_eq(a.ncut, 0);
	cr_assert_geq(a.c_ms, 560);
	/* Too few periods to judge (40 < 50): left as captured. */
	struct corr b = run_correct(40, 0, 0);
	cr_assert_eq(b.ncut, 0);
	cr_assert_geq(b.c_ms, 560);
}

/*
 * Nested helpers: the hooks' captures are all at A>B>C, the sampler finds
 * the thread in C in a quarter of its periods, in B (not C) in another
 * quarter, in A alone in half.  Both B and C are thinned; C can keep its
 * place only in the captures that kept B, and those count for it: B ends
 * with about half of the CPU, C with about a quarter (not an eighth).
 */
static uint32_t quarter_c_quarter_b(int k, const int *arg)
{
	(void)arg;
	return k % 4 == 0 ? 3 : k % 4 == 1 ? 2 : 1;
}

Test(model, correct_nested_helpers_keep_the_samplers_shares)
{
	/* 200 periods: enough for B's half to be told from its 95% */
	computing_thread(2000, quarter_c_quarter_b, NULL);
	static struct model m;
	cr_assert_eq(model_build(&m, &rec, MODEL_END_NEXT), 0);
	cur = &m;
	m.funcs[m.node_func[1]].root = 1;
	struct model_cut cut[4];
	cr_assert_eq(model_correct(&m, cut, 4), 2, "B and C thinned");
	nslices = 0;
	struct model_cb cb = {NULL, on_end, NULL};
	model_walk_thread(&m, &th, &cb);
	double b = 0, c = 0;
	for (int i = 0; i < nslices; i++) {
		if (strstr(slices[i].name, "0x200"))
			b += (double)slices[i].cpu / MS;
		else if (strstr(slices[i].name, "0x300"))
			c += (double)slices[i].cpu / MS;
	}
	model_free(&m);
	cr_assert(b >= 850 && b <= 1150, "B has %.1f ms of 2000, want about 1000", b);
	cr_assert(c >= 400 && c <= 600, "C has %.1f ms of 2000, want about 500", c);
}

/* C's CPU on model m's timeline, in ms. */
static double c_cpu_ms(struct model *m, struct rec_thread *t)
{
	cur = m;
	nslices = 0;
	struct model_cb cb = {NULL, on_end, NULL};
	model_walk_thread(m, t, &cb);
	double c = 0;
	for (int i = 0; i < nslices; i++)
		if (strstr(slices[i].name, "0x300"))
			c += (double)slices[i].cpu / MS;
	return c;
}

/*
 * Three processes of one program (a build's compiler runs), each computing
 * 300 ms with 30 of the sampler's periods, none of them in C: too few for
 * one process to tell (30 < 50), enough together (90).  Pooled, C is
 * thinned in each; the shares reported are the pooled ones.
 */
Test(model, correct_pooled_over_processes)
{
	const int arg[2] = {30, 0};
	computing_thread(300, first_at_c, arg);
	static struct recording recs[3];
	static struct rec_thread ths[3];
	static struct model ms[3];
	struct model *group[3];
	for (int k = 0; k < 3; k++) {
		ths[k] = th;
		ths[k].samples = malloc(th.nsamples * sizeof(struct rhea_sample));
		memcpy(ths[k].samples, th.samples, th.nsamples * sizeof(struct rhea_sample));
		recs[k] = rec;
		recs[k].threads = &ths[k];
		cr_assert_eq(model_build(&ms[k], &recs[k], MODEL_END_NEXT), 0);
		ms[k].funcs[ms[k].node_func[1]].root = 1;
		group[k] = &ms[k];
	}
	struct model_cut cut[4];
	cr_assert_eq(model_correct(&ms[0], cut, 4), 0, "one process alone: too few periods");
	cr_assert_geq(c_cpu_ms(&ms[0], &ths[0]), 280);
	cr_assert_eq(model_correct_pooled(group, 3, cut, 4), 1, "pooled: C thinned");
	cr_assert_eq(cut[0].model, &ms[0]);
	cr_assert_eq(cut[0].func, ms[0].node_func[3]);
	cr_assert_gt(cut[0].timeline, 0.9);
	cr_assert_lt(cut[0].sampler, 0.01);
	for (int k = 0; k < 3; k++) {
		double c = c_cpu_ms(&ms[k], &ths[k]);
		cr_assert_leq(c, 6, "process %d: C keeps %.1f ms of 300", k, c);
	}
	/* and again with one process left out: 60 periods, still enough */
	cr_assert_eq(model_correct_pooled(group + 1, 2, cut, 4), 1);
	cr_assert_eq(cut[0].model, &ms[1]);
	for (int k = 0; k < 3; k++) {
		model_free(&ms[k]);
		free(ths[k].samples);
	}
}

/* Addresses no module claims (JIT code without a perf map): those within
 * 64 bytes of the previous one are one function, named after the lowest
 * (0x5030 -> 0x5070 is 64: joined); farther ones (0x50b1, 65 bytes on) are
 * functions of their own. */
Test(model, unclaimed_addresses_close_together_are_one_function)
{
	static const uint64_t addr[] = {0x5000, 0x5030, 0x5070, 0x50b1, 0x6000};
	for (int i = 0; i < 5; i++) {
		rec.nodes[i + 1].addr = addr[i];
		rec.nodes[i + 1].parent = 0;
		rec.nodes_known[i + 1] = 1;
	}
	static struct model mm;
	cr_assert_eq(model_build(&mm, &rec, MODEL_END_NEXT), 0);
	const char *want[] = {"?+0x5000", "?+0x5000", "?+0x5000", "?+0x50b1", "?+0x6000"};
	for (int i = 0; i < 5; i++)
		cr_assert_str_eq(mm.funcs[mm.node_func[i + 1]].name, want[i], "node %d (0x%lx): %s", i + 1,
				 (unsigned long)addr[i], mm.funcs[mm.node_func[i + 1]].name);
	model_free(&mm);
}

/* ---- model_frames: stacks walked once, then copied -------------------- */

/* The frames of a stack asked for again, with another room (max), come
 * out as a first walk would give them: a chain longer than any room (cut
 * to its innermost frames), a short one, one that breaks at a node never
 * written ([unknown] root). */
Test(model, frames_asked_again_are_the_same)
{
	enum { DEEP = 3000 };
	free(rec.nodes);
	free(rec.nodes_known);
	rec.nnodes = DEEP + 16;
	rec.nodes = calloc(rec.nnodes, sizeof(struct rhea_node));
	rec.nodes_known = calloc(rec.nnodes, 1);
	for (uint32_t id = 1; id <= DEEP; id++) { /* a chain, 7 functions in turn */
		rec.nodes[id].addr = 0x1000 + (id % 7) * 0x100;
		rec.nodes[id].parent = id - 1;
		rec.nodes_known[id] = 1;
	}
	rec.nodes[DEEP + 1] = (struct rhea_node){0x2000, DEEP + 5, 0}; /* parent never written */
	rec.nodes_known[DEEP + 1] = 1;
	const uint32_t stacks[] = {DEEP, 100, 1, DEEP + 1, DEEP + 9 /* never written */};
	const int rooms[] = {MODEL_MAX_FRAMES, 512, 4096, 50, 2, MODEL_MAX_FRAMES, 100, 101, 102};
	enum { NS = sizeof(stacks) / sizeof(stacks[0]), NR = sizeof(rooms) / sizeof(rooms[0]) };
	static uint32_t want[4096], got[4096];
	struct model once, again;
	cr_assert_eq(model_build(&again, &rec, MODEL_END_NEXT), 0);
	for (int k = 0; k < NS; k++) {
		struct rhea_sample s = {.stack = stacks[k]};
		for (int r = 0; r < NR; r++) {
			/* a first walk: a model that never saw the stack */
			cr_assert_eq(model_build(&once, &rec, MODEL_END_NEXT), 0);
			int nw = model_frames(&once, &s, want, rooms[r]);
			model_free(&once);
			int ng = model_frames(&again, &s, got, rooms[r]);
			cr_assert_eq(ng, nw, "stack %u room %d: %d frames, not %d", stacks[k], rooms[r], ng, nw);
			cr_assert_eq(memcmp(got, want, (size_t)nw * sizeof(*got)), 0, "stack %u room %d", stacks[k],
				     rooms[r]);
			cr_assert_leq(nw, rooms[r] - 1);
		}
	}
	/* what the rooms give: the innermost frames, or all of them */
	struct rhea_sample deep = {.stack = DEEP}, shortst = {.stack = 100}, broken = {.stack = DEEP + 1};
	cr_assert_eq(model_frames(&again, &deep, got, MODEL_MAX_FRAMES), MODEL_MAX_FRAMES - 1);
	/* (more than MODEL_MAX_FRAMES nodes up: a loop, taken for a break) */
	cr_assert_eq(model_frames(&again, &deep, got, 4096), MODEL_MAX_FRAMES + 1);
	cr_assert_eq(got[0], 0);
	cr_assert_eq(model_frames(&again, &shortst, got, 512), 100);
	cr_assert_eq(model_frames(&again, &broken, got, 512), 2);
	cr_assert_eq(got[0], 0, "[unknown] root");
	model_free(&again);
}

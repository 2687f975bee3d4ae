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
static struct got slices[64];
static int nslices;
static struct model *cur;

static void on_end(void *arg, const struct rec_thread *t, const struct model_slice *s)
{
	(void)arg;
	(void)t;
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

Test(model, missing_node_becomes_unknown_root)
{
	add(7, 0, 1 * MS, 0, 0, RHEA_FN_MALLOC, 0, 0, 0, 0); /* node 7 never written */
	walk(MODEL_END_NEXT);
	cr_assert_eq(nslices, 1);
	cr_assert_str_eq(slices[0].name, "[unknown]");
}

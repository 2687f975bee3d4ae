/* Unit tests of analysis/stalls.c on hand-made recordings: iteration bounds
 * from the loop's waits (exact) or from captures, the threshold, where the
 * time went (the most, not the last), sampler captures inside a wait, fatal
 * and unfinished last iterations, threads that are not loops, causes, and
 * what another thread did meanwhile. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "hookfn.h"
#include "stalls.h"
#include "fixture_nodes.h"

#define MS 1000000ull

static struct recording rec;
static struct rec_thread th[2];
static struct model m;
static struct stalls st;

/* Nodes: fixture_nodes.h (A, B under A, C under B, E under A). */
static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	memset(th, 0, sizeof(th));
	memset(&st, 0, sizeof(st));
	fixture_nodes(&rec);
	for (int i = 0; i < 2; i++) {
		th[i].tid = 42 + (uint32_t)i;
		th[i].samples = calloc(32, sizeof(struct rhea_sample));
	}
	rec.threads = th;
	rec.nthreads = 1;
	rec.have_end = 1;
	rec.end.reason = RHEA_END_EXIT;
}

static void teardown(void)
{
	stalls_free(&st);
	model_free(&m);
	free(rec.nodes);
	free(rec.nodes_known);
	free(th[0].samples);
	free(th[1].samples);
}

static struct rhea_sample *add(int t, uint32_t stack, uint64_t b, uint64_t e, uint32_t msgid, unsigned flags,
			       unsigned trig)
{
	struct rhea_sample *s = &th[t].samples[th[t].nsamples++];
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.flags = (uint16_t)flags;
	s->tid = th[t].tid;
	s->stack = stack;
	s->begin_ns = b;
	s->end_ns = e;
	s->msgid = msgid;
	s->trigger = (uint16_t)trig;
	s->c_begin.cpu_ns = b; /* a thread computing all the time */
	s->c_end.cpu_ns = e;
	if (b > rec.last_ns || e > rec.last_ns)
		rec.last_ns = b > e ? b : e;
	return s;
}

/* A loop wait of thread t from b to e, ending message msgid. */
static struct rhea_sample *poll_wait(int t, uint64_t b, uint64_t e, uint32_t msgid)
{
	return add(t, 2, b, e, msgid, RHEA_S_BLOCK, RHEA_FN_POLL);
}

static void find(uint64_t threshold)
{
	cr_assert_eq(model_build(&m, &rec, MODEL_END_NEXT), 0);
	cr_assert_eq(stalls_find(&m, threshold, &st), 0);
}

TestSuite(stalls, .init = setup, .fini = teardown);

Test(stalls, exact_bounds_from_the_loop_waits)
{
	poll_wait(0, 0, 10 * MS, 0);                /* ends message 0 (start-up) */
	add(0, 3, 11 * MS, 70 * MS, 1, 0, RHEA_FN_MALLOC); /* C, merged 11..70 ms */
	poll_wait(0, 75 * MS, 90 * MS, 1);           /* ends message 1 */
	add(0, 4, 91 * MS, 91 * MS, 2, 0, RHEA_FN_MALLOC);
	poll_wait(0, 92 * MS, 100 * MS, 2);          /* message 2: 90..92 ms, short */
	add(0, 4, 101 * MS, 101 * MS, 3, 0, RHEA_FN_WRITE); /* after the loop */
	find(50 * MS);
	cr_assert_eq(st.loop_threads, 1);
	cr_assert_eq(st.iterations, 2, "messages 1 and 2 ended; got %lu", (unsigned long)st.iterations);
	cr_assert_eq(st.n, 1, "one stall, got %zu", st.n);
	const struct stall *x = &st.v[0];
	cr_assert_eq(x->msgid, 1);
	cr_assert_eq(x->begin_ns, 10 * MS, "begins when poll returned");
	cr_assert_eq(x->end_ns, 75 * MS, "ends when poll was called again");
	cr_assert(x->begin_exact && x->end_exact);
	cr_assert_not(x->fatal);
	cr_assert_eq(x->top, &th[0].samples[1]);
	cr_assert_eq(x->top_ns, 64 * MS, "C holds 11..75 ms; got %lu", (unsigned long)x->top_ns);
	cr_assert_eq(x->ce.cpu_ns - x->cb.cpu_ns, 65 * MS);
	cr_assert_eq(st.ncauses, 1);
	cr_assert_eq(st.causes[0].depth, 2);
	cr_assert_eq(st.causes[0].count, 1);
	cr_assert_eq(st.causes[0].funcs[0], m.node_func[3], "innermost first: C");
	cr_assert_eq(st.causes[0].funcs[1], m.node_func[2], "then B");
	cr_assert_eq(st.subcauses[0].depth, 3, "a three-frame stack has three frames of cause");
}

Test(stalls, threshold_is_inclusive_and_short_ones_are_not_stalls)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 11 * MS, 11 * MS, 1, 0, RHEA_FN_MALLOC);
	poll_wait(0, 60 * MS, 70 * MS, 1); /* 50 ms exactly */
	add(0, 3, 71 * MS, 71 * MS, 2, 0, RHEA_FN_MALLOC);
	poll_wait(0, 119 * MS, 130 * MS, 2); /* 49 ms */
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	cr_assert_eq(st.v[0].msgid, 1);
	stalls_free(&st);
	cr_assert_eq(stalls_find(&m, 49 * MS, &st), 0);
	cr_assert_eq(st.n, 2);
}

Test(stalls, most_time_not_the_last_stack)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 4, 10 * MS, 40 * MS, 1, 0, RHEA_FN_MALLOC); /* E, 10..40 */
	add(0, 3, 45 * MS, 55 * MS, 1, 0, RHEA_FN_MALLOC); /* C, 45..70 */
	add(0, 3, 60 * MS, 65 * MS, 1, 0, RHEA_FN_FREE);   /* C again (other trigger: same stack) */
	poll_wait(0, 70 * MS, 80 * MS, 1);
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	cr_assert_eq(st.v[0].top, &th[0].samples[1], "E holds 35 ms, C 25: E wins");
	cr_assert_eq(st.v[0].top_ns, 35 * MS);
}

Test(stalls, equal_times_the_latest_wins)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 10 * MS, 10 * MS, 1, 0, RHEA_FN_MALLOC); /* C 10..40 */
	add(0, 4, 40 * MS, 40 * MS, 1, 0, RHEA_FN_MALLOC); /* E 40..70 */
	poll_wait(0, 70 * MS, 80 * MS, 1);
	find(50 * MS);
	cr_assert_eq(st.v[0].top, &th[0].samples[2], "E, the later of the two");
	stalls_free(&st);
	model_free(&m);
	th[0].samples[1].stack = 4; /* and the other way round */
	th[0].samples[2].stack = 3;
	find(50 * MS);
	cr_assert_eq(st.v[0].top, &th[0].samples[2], "C, the later of the two");
}

Test(stalls, a_wait_with_sampler_captures_inside)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 10 * MS, 90 * MS, 1, RHEA_S_BLOCK, RHEA_FN_MUTEX_LOCK); /* waits 80 ms */
	add(0, 4, 30 * MS, 30 * MS, 1, RHEA_S_ASYNC, RHEA_FN_SAMPLER);   /* says nothing more */
	add(0, 4, 60 * MS, 60 * MS, 1, RHEA_S_ASYNC, RHEA_FN_SAMPLER);
	add(0, 4, 91 * MS, 91 * MS, 1, 0, RHEA_FN_MALLOC);
	poll_wait(0, 95 * MS, 99 * MS, 1);
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	const struct stall *x = &st.v[0];
	cr_assert_eq(x->top, &th[0].samples[1]);
	cr_assert_eq(x->top_ns, 81 * MS, "the wait holds 10..91 ms; got %lu", (unsigned long)x->top_ns);
	cr_assert_eq(st.causes[0].funcs[0], m.wait_func[RHEA_FN_MUTEX_LOCK], "innermost: the wait");
	cr_assert_eq(st.causes[0].funcs[1], m.node_func[3], "then its caller");
}

/* The sampler's CPU timer can fire as a long loop wait returns: its capture
 * (in the wait's libc function, taken before the hook counts the new
 * message) sorts after the wait's BLOCK sample.  The wait still ends the
 * iteration: an idle 95 ms in epoll_wait is no stall (seen on redis under
 * load). */
Test(stalls, a_sampler_capture_at_the_return_of_the_loop_wait)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 11 * MS, 12 * MS, 1, 0, RHEA_FN_MALLOC);
	poll_wait(0, 13 * MS, 108 * MS, 1);                          /* idle 95 ms */
	add(0, 2, 108 * MS, 108 * MS, 1, RHEA_S_ASYNC, RHEA_FN_SAMPLER); /* at its return */
	add(0, 4, 109 * MS, 109 * MS, 2, 0, RHEA_FN_MALLOC);
	poll_wait(0, 110 * MS, 120 * MS, 2);
	find(50 * MS);
	cr_assert_eq(st.iterations, 2);
	cr_assert_eq(st.n, 0, "the wait is not a stall; got %zu, the first %lu..%lu ms", st.n,
		     st.n ? (unsigned long)(st.v[0].begin_ns / MS) : 0, st.n ? (unsigned long)(st.v[0].end_ns / MS) : 0);
	/* and the next iteration begins at the wait's return, exactly */
	stalls_free(&st);
	model_free(&m);
	find(1 * MS);
	cr_assert_eq(st.n, 2, "both iterations are over 1 ms: got %zu", st.n);
	cr_assert_eq(st.v[1].msgid, 2);
	cr_assert_eq(st.v[1].begin_ns, 108 * MS);
	cr_assert(st.v[1].begin_exact);
	cr_assert_eq(st.v[0].end_ns, 13 * MS, "message 1 ends when the wait was called");
}

Test(stalls, bounds_from_captures_without_recorded_waits)
{
	add(0, 3, 5 * MS, 5 * MS, 1, 0, RHEA_FN_MALLOC);   /* message 1: no wait recorded */
	add(0, 3, 60 * MS, 70 * MS, 1, 0, RHEA_FN_MALLOC); /* ... last capture at 70 ms */
	add(0, 4, 80 * MS, 80 * MS, 2, 0, RHEA_FN_MALLOC);
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	const struct stall *x = &st.v[0];
	cr_assert_eq(x->begin_ns, 5 * MS, "no later than its first capture");
	cr_assert_eq(x->end_ns, 70 * MS, "no earlier than its last");
	cr_assert_not(x->begin_exact);
	cr_assert_not(x->end_exact);
}

Test(stalls, unfinished_last_iteration)
{
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 11 * MS, 200 * MS, 1, 0, RHEA_FN_MALLOC);
	find(50 * MS);
	cr_assert_eq(st.n, 0, "the process exited normally: the loop was left");
	stalls_free(&st);
	model_free(&m);
	rec.have_end = 0; /* cut short: SIGKILL */
	rec.last_ns = 250 * MS;
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	cr_assert(st.v[0].fatal);
	cr_assert_eq(st.v[0].end_ns, 250 * MS, "ends where the recording does");
	stalls_free(&st);
	model_free(&m);
	rec.have_end = 1;
	rec.end.reason = RHEA_END_SIGNAL;
	rec.end.time_ns = 300 * MS;
	find(50 * MS);
	cr_assert_eq(st.n, 1);
	cr_assert(st.v[0].fatal);
	cr_assert_eq(st.v[0].end_ns, 300 * MS);
}

Test(stalls, not_a_loop_and_the_others_meanwhile)
{
	rec.nthreads = 2;
	poll_wait(0, 0, 10 * MS, 0);
	add(0, 3, 11 * MS, 11 * MS, 1, RHEA_S_BLOCK, RHEA_FN_MUTEX_LOCK);
	th[0].samples[1].end_ns = 100 * MS;
	poll_wait(0, 101 * MS, 110 * MS, 1);
	/* thread 43: no loop; holds the lock, asleep in E, then computes in C */
	add(1, 4, 5 * MS, 80 * MS, 0, RHEA_S_BLOCK, RHEA_FN_NANOSLEEP);
	add(1, 3, 80 * MS, 80 * MS, 0, 0, RHEA_FN_MUTEX_UNLOCK);
	add(1, 3, 120 * MS, 120 * MS, 0, 0, RHEA_FN_MALLOC);
	find(50 * MS);
	cr_assert_eq(st.loop_threads, 1);
	cr_assert_eq(st.n, 1);
	uint64_t ns;
	const struct rhea_sample *o = stalls_top_during(&th[1], st.v[0].begin_ns, st.v[0].end_ns, &ns);
	cr_assert_eq(o, &th[1].samples[0], "asleep 10..80 ms beats computing 80..101 ms");
	cr_assert_eq(ns, 70 * MS, "got %lu", (unsigned long)ns);
	o = stalls_top_during(&th[1], 200 * MS, 300 * MS, &ns);
	cr_assert_eq(o, &th[1].samples[2], "after its last sample, a thread that did not exit stays there");
	cr_assert_eq(ns, 100 * MS);
	th[1].exit_ns = 150 * MS;
	cr_assert_null(stalls_top_during(&th[1], 200 * MS, 300 * MS, &ns), "nor after it exited");
}

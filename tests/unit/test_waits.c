/* Unit tests of agent/waits.c: a waiter names the thread whose release
 * ended its wait, with stack and time only when the wait may have been long
 * enough to be recorded; releases before the wait and waits nobody ended
 * name nobody; a full set is counted, not guessed; many threads waiting
 * and releasing at once never get a waker that did not release. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "agent.h"

/* What waits.c needs from the rest of the agent. */
struct rhea_agent rhea_g;
static uint32_t stacks_taken;
uint32_t capture_release_stack(struct rhea_tstate *t, uint64_t site, uint64_t now)
{
	(void)now;
	__atomic_fetch_add(&stacks_taken, 1, __ATOMIC_RELAXED);
	return (uint32_t)(t->tid * 1000 + site);
}
static uint32_t releasing_tid;
uint32_t thread_find_releasing(uint64_t obj, uint32_t self)
{
	(void)obj;
	(void)self;
	return releasing_tid;
}

static void setup(void)
{
	memset(&rhea_g, 0, sizeof(rhea_g));
	rhea_g.epoch = 1;
	rhea_g.cfg.interval_ns = 1000000;
	rhea_g.cfg.min_block_ns = 1000000;
	rhea_g.cfg.epoch_gate = 1;
	stacks_taken = 0;
	waits_after_fork(); /* empty table */
}

TestSuite(waits, .init = setup);

static struct rhea_tstate *thread_state(uint32_t tid)
{
	struct rhea_tstate *t = calloc(1, sizeof(*t));
	cr_assert_not_null(t);
	t->tid = tid;
	return t;
}

Test(waits, release_after_registration_names_the_releaser)
{
	struct rhea_tstate *r = thread_state(42);
	uint64_t obj = 0x1000, snap = 0;
	uint64_t t0 = rhea_now();
	int way = waits_begin(obj, &snap);
	cr_assert_geq(way, 0);
	rhea_g.epoch++; /* a tick: the waiter may now be old enough */
	cr_assert_eq(waits_release(r, obj, 7, 1), 1);
	struct block_info b;
	memset(&b, 0, sizeof(b));
	waits_end(way, obj, snap, t0, 1, &b);
	cr_assert_eq(b.waker, 42);
	cr_assert_eq(b.waker_stack, 42007);
	cr_assert_geq(b.release_ns + 1000, t0, "release dated before the wait");
	cr_assert_leq(b.release_ns, rhea_now());
	free(r);
}

Test(waits, young_waiters_get_tid_without_clock_or_stack)
{
	struct rhea_tstate *r = thread_state(43);
	uint64_t obj = 0x2000, snap = 0;
	int way = waits_begin(obj, &snap);
	/* same epoch as the registration: no waiter can be old */
	cr_assert_eq(waits_release(r, obj, 1, 1), 1);
	struct block_info b;
	memset(&b, 0, sizeof(b));
	waits_end(way, obj, snap, rhea_now(), 1, &b);
	cr_assert_eq(b.waker, 43);
	cr_assert_eq(b.waker_stack, 0);
	cr_assert_eq(b.release_ns, 0);
	cr_assert_eq(stacks_taken, 0);
	free(r);
}

Test(waits, release_before_the_wait_is_not_the_waker)
{
	struct rhea_tstate *r = thread_state(44);
	uint64_t obj = 0x3000, snap = 0, snap2 = 0;
	/* someone else waits, a release happens, then we register */
	int w1 = waits_begin(obj, &snap);
	cr_assert_eq(waits_release(r, obj, 1, 1), 1);
	int w2 = waits_begin(obj, &snap2);
	cr_assert_eq(w1, w2);
	struct block_info b;
	memset(&b, 0, sizeof(b));
	waits_end(w2, obj, snap2, rhea_now(), 1, &b);
	cr_assert_eq(b.waker, 0, "a release before the registration named as waker");
	waits_end(w1, obj, snap, rhea_now(), 1, &b);
	cr_assert_eq(b.waker, 44);
	free(r);
}

Test(waits, nobody_waiting_records_nothing)
{
	struct rhea_tstate *r = thread_state(45);
	cr_assert_eq(waits_release(r, 0x4000, 1, 1), 0); /* nobody has waited yet */
	uint64_t snap = 0;
	int way = waits_begin(0x5000, &snap); /* a wait elsewhere */
	cr_assert_eq(waits_release(r, 0x4000, 1, 1), 0);
	struct block_info b;
	memset(&b, 0, sizeof(b));
	waits_end(way, 0x5000, snap, rhea_now(), 1, &b);
	cr_assert_eq(b.waker, 0);
	/* the way is free again: a release on its old object finds no waiter */
	cr_assert_eq(waits_release(r, 0x5000, 1, 1), 0);
	free(r);
}

/* Objects that land in one set: found by trying addresses. */
static int same_set(uint64_t a, uint64_t b)
{
	uint64_t ha = a * 0x9e3779b97f4a7c15ull, hb = b * 0x9e3779b97f4a7c15ull;
	return (ha >> 40) % 1024 == (hb >> 40) % 1024;
}

Test(waits, a_full_set_is_counted)
{
	uint64_t objs[5] = {0x10000};
	int n = 1;
	for (uint64_t a = 0x10008; n < 5; a += 8)
		if (same_set(objs[0], a))
			objs[n++] = a;
	uint64_t snap[5], missed0 = rhea_waits_missed;
	int ways[5];
	for (int i = 0; i < 5; i++)
		ways[i] = waits_begin(objs[i], &snap[i]);
	for (int i = 0; i < 4; i++)
		cr_assert_geq(ways[i], 0);
	cr_assert_eq(ways[4], -1);
	cr_assert_eq(rhea_waits_missed, missed0 + 1);
	struct block_info b;
	for (int i = 0; i < 5; i++)
		waits_end(ways[i], objs[i], snap[i], rhea_now(), 1, &b);
}

/* Several threads wait on and release a few objects at once; every waker a
 * waiter reports must be a thread that released that object. */
#define NT 6
#define ROUNDS 20000
static uint64_t released_by[NT + 1]; /* bit per object a tid released */

static void *worker(void *arg)
{
	uint32_t tid = (uint32_t)(uintptr_t)arg;
	struct rhea_tstate *t = thread_state(tid);
	uint64_t bad = 0;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t obj = 0x100 + (uint64_t)((i + tid) % 3) * 64;
		if ((i + tid) % 2) {
			uint64_t snap;
			int way = waits_begin(obj, &snap);
			struct block_info b;
			memset(&b, 0, sizeof(b));
			waits_end(way, obj, snap, rhea_now(), 1, &b);
			if (b.waker && (b.waker < 1 || b.waker > NT))
				bad++;
			else if (b.waker &&
				 !(__atomic_load_n(&released_by[b.waker], __ATOMIC_ACQUIRE) &
				   (1ull << ((obj - 0x100) / 64))))
				bad++;
		} else {
			__atomic_fetch_or(&released_by[tid], 1ull << ((obj - 0x100) / 64), __ATOMIC_RELEASE);
			if (!waits_release(t, obj, 1, 1))
				waits_release(t, obj, 1, 1);
		}
		if (i % 500 == 0)
			__atomic_fetch_add(&rhea_g.epoch, 1, __ATOMIC_RELAXED);
	}
	free(t);
	return (void *)(uintptr_t)bad;
}

Test(waits, concurrent_waiters_name_only_releasers)
{
	pthread_t th[NT];
	for (uintptr_t i = 0; i < NT; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, worker, (void *)(i + 1)), 0);
	uint64_t bad = 0;
	for (int i = 0; i < NT; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (uint64_t)(uintptr_t)r;
	}
	cr_assert_eq(bad, 0, "%lu wakers that never released the object", (unsigned long)bad);
}

/* A releaser between its release and its record: a long wait that finds no
 * record names the thread whose slot says it is releasing the object; a
 * short one does not look. */
Test(waits, releaser_caught_between_release_and_record)
{
	uint64_t obj = 0x6000, snap = 0;
	int way = waits_begin(obj, &snap);
	releasing_tid = 99;
	struct block_info b;
	memset(&b, 0, sizeof(b));
	waits_end(way, obj, snap, rhea_now() - 2000000, 1, &b);
	cr_assert_eq(b.waker, 99);
	cr_assert_eq(b.release_ns, 0);
	way = waits_begin(obj, &snap);
	memset(&b, 0, sizeof(b));
	waits_end(way, obj, snap, rhea_now(), 1, &b);
	cr_assert_eq(b.waker, 0, "a short wait looked for releasers");
}

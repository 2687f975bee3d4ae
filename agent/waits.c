/*
 * waits.c - who woke whom (DESIGN.md 1.6, "blocking attribution").
 *
 * btrace links a main-thread lock wait to the thread that released the
 * lock; rhea does it for every thread and every primitive it hooks (mutex,
 * rwlock, condition variable, semaphore).  A small table maps an object's
 * address to the number of threads waiting on it and to its latest release
 * (releasing thread, its stack, time):
 *
 *  - a thread that has to wait (the hooks already know: the trylock failed,
 *    or it is a condition wait) registers on the object before waiting and
 *    unregisters when the wait returns, picking up the latest release
 *    recorded since it registered: that thread is its waker;
 *  - a releaser (unlock, post, signal, broadcast) first reads one global
 *    flag, set by the program's first wait and never cleared.  Until then
 *    (a program whose locks are never contended) that load is all it
 *    costs.  Otherwise it looks its object up: a few loads of one set's
 *    cache line, written only by the waiters and releasers of the objects
 *    of that set.  (It used to be a global count of registered waits: on a
 *    server with always some thread waiting somewhere, every waiter wrote
 *    that line twice per wait and every releaser missed it.)  If someone
 *    waits on its object, the release is recorded *before* the real unlock
 *    (so the woken thread cannot return before the record exists), and
 *    checked again right after it (a waiter may register and fall asleep
 *    between the check and the unlock).
 *
 * The waiter's BLOCK sample then carries the releaser's tid, stack and the
 * release time: no record is written for the release itself.  The
 * releaser's stack is taken only when a waiter has waited long enough for
 * its wait to be recorded, and reused per call site within the interval
 * (the first design captured and emitted a sample per release: 240k/s and
 * most of the CPU with 64 threads on 8 mutexes).
 *
 * No locks.  The second design put a futex lock on each set of the table:
 * all waiters and releasers of one hot mutex met on it, and a server-like
 * benchmark got 60% more futex calls and twice the context switches.  Now:
 *
 *  - a way is claimed for an object by a CAS on its `object` field, only
 *    while nobody waits on the object it held; a waiter then increments
 *    `waiters` and re-reads `object`: if a claimer took the way meanwhile it
 *    backs out and looks again (a claimer's CAS and a waiter's increment can
 *    cross; the re-check settles who owns the way);
 *  - the latest release is one 64-bit word, written and read atomically:
 *    the releaser's tid and the release time in microseconds (32 bits,
 *    compared modulo 2^32 with the waiter's registration time: fine for
 *    waits under an hour), plus the releaser's stack in a word of its own,
 *    stored before it.  Writers never wait for each other, readers never
 *    retry (a sequence lock here lost attributions whenever a writer was
 *    preempted in the middle).  Two releases racing may pair one's time
 *    with the other's stack: both released the object.
 *
 * Everything is async-signal-safe, so sem_post from a program's signal
 * handler is fine.  The table has 1024 sets of 4 ways; a fifth object with
 * waiters in one set goes unattributed (counted).
 */
#include "agent.h"

#include <string.h>

#define SETS 1024
#define WAYS 4

struct wslot {
	uint64_t object;   /* atomic */
	uint32_t waiters;  /* atomic */
	uint32_t stack;    /* atomic: the latest releaser's stack */
	uint64_t since;    /* atomic: when waiters last went from 0 to 1 */
	uint64_t release;  /* atomic: releaser tid << 32 | release time (us, mod 2^32) */
};

static inline uint32_t us32(uint64_t ns)
{
	return (uint32_t)(ns / 1000);
}

static struct wslot slots[SETS * WAYS];
uint32_t rhea_waits_seen; /* some thread has waited (sticky) */
uint64_t rhea_waits_missed;

static inline struct wslot *set_of(uint64_t obj)
{
	uint64_t h = obj * 0x9e3779b97f4a7c15ull;
	return &slots[((h >> 40) % SETS) * WAYS];
}

int waits_begin(uint64_t obj)
{
	if (!__atomic_load_n(&rhea_waits_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&rhea_waits_seen, 1, __ATOMIC_SEQ_CST);
	struct wslot *set = set_of(obj);
	for (int attempt = 0; attempt < 8; attempt++) {
		int way = -1;
		for (int i = 0; i < WAYS && way < 0; i++)
			if (__atomic_load_n(&set[i].object, __ATOMIC_ACQUIRE) == obj)
				way = i;
		for (int i = 0; i < WAYS && way < 0; i++) {
			uint64_t old = __atomic_load_n(&set[i].object, __ATOMIC_ACQUIRE);
			if (__atomic_load_n(&set[i].waiters, __ATOMIC_ACQUIRE) == 0 &&
			    __atomic_compare_exchange_n(&set[i].object, &old, obj, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				way = i;
		}
		if (way < 0)
			break;
		struct wslot *w = &set[way];
		if (__atomic_fetch_add(&w->waiters, 1, __ATOMIC_ACQ_REL) == 0)
			__atomic_store_n(&w->since, rhea_now(), __ATOMIC_RELEASE);
		if (__atomic_load_n(&w->object, __ATOMIC_ACQUIRE) == obj)
			return way;
		__atomic_fetch_sub(&w->waiters, 1, __ATOMIC_ACQ_REL); /* lost the way */
	}
	__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
	return -1;
}

void waits_end(int way, uint64_t obj, uint64_t t0, struct block_info *b)
{
	b->waker = 0;
	b->waker_stack = 0;
	b->release_ns = 0;
	if (way < 0)
		return;
	struct wslot *w = &set_of(obj)[way];
	uint64_t rel = __atomic_load_n(&w->release, __ATOMIC_ACQUIRE);
	uint32_t who = (uint32_t)(rel >> 32);
	int32_t after = (int32_t)((uint32_t)rel - us32(t0)); /* us since we registered */
	if (who && after >= 0) {
		b->waker = who;
		b->waker_stack = __atomic_load_n(&w->stack, __ATOMIC_RELAXED);
		b->release_ns = t0 - t0 % 1000 + (uint64_t)after * 1000;
	}
	__atomic_fetch_sub(&w->waiters, 1, __ATOMIC_ACQ_REL);
}

int waits_release_slow(struct rhea_tstate *t, uint64_t obj, uint64_t site, int may_block)
{
	(void)may_block; /* nothing here blocks */
	struct wslot *set = set_of(obj), *w = NULL;
	for (int i = 0; i < WAYS; i++)
		if (__atomic_load_n(&set[i].object, __ATOMIC_ACQUIRE) == obj &&
		    __atomic_load_n(&set[i].waiters, __ATOMIC_ACQUIRE) > 0)
			w = &set[i];
	if (!w)
		return 0;
	uint64_t now = rhea_now();
	/* A waiter younger than min_block ends a wait too short to record: its
	 * release needs no stack.  Under contention most waits are short. */
	uint32_t stack = 0;
	if (now - __atomic_load_n(&w->since, __ATOMIC_ACQUIRE) >= rhea_g.cfg.min_block_ns)
		stack = capture_release_stack(t, site);
	__atomic_store_n(&w->stack, stack, __ATOMIC_RELAXED);
	__atomic_store_n(&w->release, (uint64_t)t->tid << 32 | us32(now), __ATOMIC_RELEASE);
	return 1;
}

void waits_after_fork(void)
{
	memset(slots, 0, sizeof(slots));
}

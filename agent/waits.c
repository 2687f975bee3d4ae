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
 *    unregisters when the wait returns, picking up the latest release that
 *    happened after it began to wait: that thread is its waker;
 *  - a releaser (unlock, post, signal, broadcast) first reads one global
 *    counter of registered waits.  When nobody waits anywhere (the common
 *    case) that load is all it costs: the counter's cache line is only
 *    written by threads entering or leaving a wait.  Otherwise it looks its
 *    object up; if someone waits on it, the release is recorded *before* the
 *    real unlock (so the woken thread cannot return before the record
 *    exists), with the releaser's stack, whatever its interval says.
 *
 * The waiter's BLOCK sample then carries the releaser's tid, stack and the
 * release time: no record is written for the release itself.  Under heavy
 * contention every unlock has a waiter, so the releaser's stack is unwound
 * at most once per call site per 50 us and reused in between (the first
 * design captured and emitted a sample per release: 240k/s and most of the
 * CPU with 64 threads on 8 mutexes).
 *
 * The table is 1024 sets of 4 ways, each set behind a lock held for a few
 * instructions.  That lock must not spin: with more threads than cores a
 * holder can be preempted inside it, and spinners then burn their whole
 * time slice (the first version did, and turned 64 threads contending on
 * 8 mutexes into milliseconds of spinning inside rhea).  So it is a futex
 * lock (Drepper's three-state mutex): waiters and releasers sleep on it,
 * except sem_post, which a program's signal handler may call while this
 * very thread holds the lock: it only tries a few times and on failure
 * skips the attribution, counted.  A set whose 4 ways are all in use by other objects
 * with waiters cannot take a fifth: that wait goes unattributed (counted).
 */
#include "agent.h"

#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SETS 1024
#define WAYS 4

struct wslot {
	uint64_t object;
	uint32_t waiters;
	uint32_t releaser;
	uint64_t release_ns;
	uint64_t since;  /* when waiters last went from 0 to 1 */
	uint32_t stack;  /* the releaser's stack */
	uint32_t pad;
};

struct wset {
	uint32_t lock;
	uint32_t pad;
	struct wslot way[WAYS];
};

static struct wset sets[SETS];
uint32_t rhea_waits_active; /* registered waits, all objects */
uint64_t rhea_waits_missed;

static inline struct wset *set_of(uint64_t obj)
{
	uint64_t h = obj * 0x9e3779b97f4a7c15ull;
	return &sets[(h >> 40) % SETS];
}

/* lock: 0 free, 1 locked, 2 locked and someone may sleep on it. */
static int lock_set(struct wset *s, int bounded)
{
	uint32_t c = 0;
	for (int i = 0; i < 64; i++) {
		c = 0;
		if (__atomic_compare_exchange_n(&s->lock, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
		__builtin_ia32_pause();
	}
	if (bounded)
		return 0;
	if (c != 2)
		c = __atomic_exchange_n(&s->lock, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		syscall(SYS_futex, &s->lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
		c = __atomic_exchange_n(&s->lock, 2, __ATOMIC_ACQUIRE);
	}
	return 1;
}

static inline void unlock_set(struct wset *s)
{
	if (__atomic_exchange_n(&s->lock, 0, __ATOMIC_RELEASE) == 2)
		syscall(SYS_futex, &s->lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int waits_begin(uint64_t obj)
{
	struct wset *s = set_of(obj);
	lock_set(s, 0);
	int free_way = -1, way = -1;
	for (int i = 0; i < WAYS; i++) {
		if (s->way[i].object == obj) {
			way = i;
			break;
		}
		if (free_way < 0 && s->way[i].waiters == 0)
			free_way = i;
	}
	if (way < 0 && free_way >= 0) {
		way = free_way;
		memset(&s->way[way], 0, sizeof(s->way[way]));
		s->way[way].object = obj;
	}
	if (way >= 0 && s->way[way].waiters++ == 0)
		s->way[way].since = rhea_now();
	unlock_set(s);
	if (way < 0) {
		__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
		return -1;
	}
	__atomic_fetch_add(&rhea_waits_active, 1, __ATOMIC_RELAXED);
	return way;
}

void waits_end(int way, uint64_t obj, uint64_t t0, struct block_info *b)
{
	b->waker = 0;
	b->waker_stack = 0;
	b->release_ns = 0;
	if (way < 0)
		return;
	struct wset *s = set_of(obj);
	lock_set(s, 0);
	struct wslot *w = &s->way[way];
	if (w->object == obj) {
		if (w->release_ns >= t0 && w->releaser) {
			b->waker = w->releaser;
			b->waker_stack = w->stack;
			b->release_ns = w->release_ns;
		}
		if (w->waiters)
			w->waiters--;
	}
	unlock_set(s);
	__atomic_fetch_sub(&rhea_waits_active, 1, __ATOMIC_RELAXED);
}

/*
 * Does obj have a registered waiter, and has one waited long enough that
 * its wait may be recorded (min_block)?  Racy reads, to decide what the
 * release is worth; the record below is made under the lock.  Returns 0
 * (nobody waits), 1 (only young waiters: record who released, skip the
 * stack) or 2 (take the stack too).
 */
static int waiters_state(uint64_t obj, uint64_t now)
{
	struct wset *s = set_of(obj);
	for (int i = 0; i < WAYS; i++)
		if (__atomic_load_n(&s->way[i].object, __ATOMIC_RELAXED) == obj &&
		    __atomic_load_n(&s->way[i].waiters, __ATOMIC_RELAXED) > 0)
			return now - __atomic_load_n(&s->way[i].since, __ATOMIC_RELAXED) >=
					       rhea_g.cfg.min_block_ns
				       ? 2
				       : 1;
	return 0;
}

int waits_release_slow(struct rhea_tstate *t, uint64_t obj, uint64_t site, int may_block)
{
	uint64_t now = rhea_now();
	int st = waiters_state(obj, now);
	if (st == 0)
		return 0;
	/* A waiter younger than min_block ends a wait too short to record: its
	 * release needs no stack.  Under contention most waits are short. */
	uint32_t stack = st == 2 ? capture_release_stack(t, site) : 0;
	struct wset *s = set_of(obj);
	if (!lock_set(s, !may_block)) {
		__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	for (int i = 0; i < WAYS; i++) {
		struct wslot *w = &s->way[i];
		if (w->object == obj && w->waiters > 0) {
			w->releaser = t->tid;
			w->release_ns = now;
			w->stack = stack;
			break;
		}
	}
	unlock_set(s);
	return 1;
}

void waits_after_fork(void)
{
	memset(sets, 0, sizeof(sets));
	rhea_waits_active = 0;
}

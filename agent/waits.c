/*
 * waits.c - who woke whom (DESIGN.md 1.6, "blocking attribution").
 *
 * btrace links a main-thread lock wait to the thread that released the
 * lock; rhea does it for every thread and every primitive it hooks (mutex,
 * rwlock, condition variable, semaphore).  A small table maps an object's
 * address to the number of threads waiting on it and to its latest release
 * (releasing thread, time, a flow id):
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
 *    exists) and the releaser's stack is captured right after, whatever its
 *    interval says.
 *
 * The table is 1024 sets of 4 ways, each set behind a spin lock held for a
 * few instructions.  Releasers only spin a bounded number of times (a
 * program's signal handler may sem_post while this very thread holds the
 * set lock); on failure the attribution is skipped and counted.  A set
 * whose 4 ways are all in use by other objects with waiters cannot take a
 * fifth: that wait goes unattributed (counted too).
 */
#include "agent.h"

#include <string.h>

#define SETS 1024
#define WAYS 4

struct wslot {
	uint64_t object;
	uint32_t waiters;
	uint32_t releaser;
	uint64_t release_ns;
	uint64_t flow;
};

struct wset {
	uint32_t lock;
	uint32_t pad;
	struct wslot way[WAYS];
};

static struct wset sets[SETS];
uint32_t rhea_waits_active; /* registered waits, all objects */
static uint64_t flow_seq;
uint64_t rhea_waits_missed;

static inline struct wset *set_of(uint64_t obj)
{
	uint64_t h = obj * 0x9e3779b97f4a7c15ull;
	return &sets[(h >> 40) % SETS];
}

static int lock_set(struct wset *s, int bounded)
{
	for (int i = 0; !bounded || i < 4096; i++) {
		if (!__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
			return 1;
		__builtin_ia32_pause();
	}
	return 0;
}

static inline void unlock_set(struct wset *s)
{
	__atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
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
	if (way >= 0)
		s->way[way].waiters++;
	unlock_set(s);
	if (way < 0) {
		__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
		return -1;
	}
	__atomic_fetch_add(&rhea_waits_active, 1, __ATOMIC_RELAXED);
	return way;
}

void waits_end(int way, uint64_t obj, uint64_t t0, uint32_t *waker, uint64_t *flow)
{
	*waker = 0;
	*flow = 0;
	if (way < 0)
		return;
	struct wset *s = set_of(obj);
	lock_set(s, 0);
	struct wslot *w = &s->way[way];
	if (w->object == obj) {
		if (w->release_ns >= t0 && w->releaser) {
			*waker = w->releaser;
			*flow = w->flow;
		}
		if (w->waiters)
			w->waiters--;
	}
	unlock_set(s);
	__atomic_fetch_sub(&rhea_waits_active, 1, __ATOMIC_RELAXED);
}

uint64_t waits_release_slow(uint64_t obj, uint32_t tid)
{
	struct wset *s = set_of(obj);
	if (!lock_set(s, 1)) {
		__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	uint64_t flow = 0;
	for (int i = 0; i < WAYS; i++) {
		struct wslot *w = &s->way[i];
		if (w->object == obj && w->waiters > 0) {
			flow = __atomic_add_fetch(&flow_seq, 1, __ATOMIC_RELAXED);
			w->releaser = tid;
			w->release_ns = rhea_now();
			w->flow = flow;
			break;
		}
	}
	unlock_set(s);
	return flow;
}

void waits_after_fork(void)
{
	memset(sets, 0, sizeof(sets));
	rhea_waits_active = 0;
}

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
 *    looked up and recorded again right after it: a waiter may register
 *    (and fall asleep) between the first record and the unlock, be woken
 *    by that unlock, and take the first record for one older than its
 *    wait.
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
 *  - a way's object and its number of waiters are one 64-bit word (user
 *    addresses fit in 48 bits, the count in 16), changed only by CAS: a
 *    way is claimed for a new object only while its count is 0, a waiter
 *    joins only while the word still names its object.  (They were two
 *    words: a claimer that had seen no waiters could still swap the object
 *    under a waiter that had just joined, whose releases then went
 *    elsewhere: 1 in 15000 contended waits on a loaded machine.);
 *  - the latest release is one 64-bit word, written and read atomically:
 *    the releaser's tid and its own count of releases, unique per release.
 *    A waiter reads that word right after registering and again when its
 *    wait returns: if it changed, somebody released the object meanwhile,
 *    and the latest one is the waker.  The release's stack and time (in
 *    microseconds, 32 bits, compared modulo 2^32 with the wait's start)
 *    are stored before it in words of their own.  Writers never wait for
 *    each other, readers never retry (a sequence lock here lost
 *    attributions whenever a writer was preempted in the middle).  Two
 *    releases racing may pair one's time with the other's stack: both
 *    released the object;
 *  - stack and time are only needed for a wait long enough to be recorded.
 *    The waiters' set remembers the epoch in which it last went from empty
 *    to non-empty (the waiter has just read the clock, which brings the
 *    epoch up to date: clock.c); while that is the current epoch (while
 *    the ticker coasts the epoch may lag, and the release reads the clock
 *    first), every waiter is younger than an interval (<= min_block), and
 *    the release skips the stack, and the clock while the ticker ticks:
 *    tid and count only.  (A waiter woken after more than
 *    the rest of min_block then names its waker without stack or time.)
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
	uint64_t key;         /* atomic: object << 16 | waiters */
	uint32_t since_epoch; /* atomic: epoch when waiters last went from 0 to 1 */
	uint32_t stack;       /* atomic: the latest release's stack, 0 none */
	uint64_t release;     /* atomic: releaser tid << 32 | its release count */
	uint32_t when_us;     /* atomic: its time (us, mod 2^32), 0 unknown */
	uint32_t pad;
};

#define KEY_BITS 16
#define KEY_MAX_WAITERS 0xffffu
static inline uint64_t key_object(uint64_t k)
{
	return k >> KEY_BITS;
}
static inline uint32_t key_waiters(uint64_t k)
{
	return (uint32_t)(k & KEY_MAX_WAITERS);
}

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

int waits_begin(uint64_t obj, uint64_t *snap)
{
	if (!__atomic_load_n(&rhea_waits_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&rhea_waits_seen, 1, __ATOMIC_SEQ_CST);
	struct wslot *set = set_of(obj);
	if (obj >> (64 - KEY_BITS) == 0) {
		for (int attempt = 0; attempt < 16; attempt++) {
			/* join the way that holds obj, else claim a free one */
			int way = -1, claim = -1;
			uint64_t k = 0;
			for (int i = 0; i < WAYS; i++) {
				uint64_t ki = __atomic_load_n(&set[i].key, __ATOMIC_ACQUIRE);
				if (key_object(ki) == obj && key_waiters(ki) > 0) {
					way = i;
					k = ki;
					break;
				}
				if (claim < 0 && key_waiters(ki) == 0) {
					claim = i;
					k = ki;
				}
			}
			if (way < 0)
				way = claim;
			if (way < 0 || key_waiters(k) == KEY_MAX_WAITERS)
				break;
			uint64_t want = key_waiters(k) == 0 ? obj << KEY_BITS | 1 : k + 1;
			struct wslot *w = &set[way];
			if (!__atomic_compare_exchange_n(&w->key, &k, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue; /* somebody else changed the way: look again */
			if (key_waiters(want) == 1)
				__atomic_store_n(&w->since_epoch, __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED),
						 __ATOMIC_RELEASE);
			*snap = __atomic_load_n(&w->release, __ATOMIC_ACQUIRE);
			return way;
		}
	}
	__atomic_fetch_add(&rhea_waits_missed, 1, __ATOMIC_RELAXED);
	return -1;
}

void waits_end(int way, uint64_t obj, uint64_t snap, uint64_t t0, uint32_t self, struct block_info *b)
{
	b->waker = 0;
	b->waker_stack = 0;
	b->release_ns = 0;
	if (way < 0)
		return;
	struct wslot *w = &set_of(obj)[way];
	uint64_t rel = __atomic_load_n(&w->release, __ATOMIC_ACQUIRE);
	if (rel == snap && rhea_now() - t0 >= rhea_g.cfg.min_block_ns) {
		/* A long wait nobody recorded a release for: the releaser may be
		 * between its release and its record (see RELEASE_HOOK).  Then
		 * its slot says so; once it has cleared that, its record is
		 * there. */
		uint32_t who = thread_find_releasing(obj, self);
		if (who) {
			b->waker = who;
			goto out;
		}
		rel = __atomic_load_n(&w->release, __ATOMIC_ACQUIRE);
	}
	if (rel != snap && (rel >> 32) != 0) {
		b->waker = (uint32_t)(rel >> 32);
		b->waker_stack = __atomic_load_n(&w->stack, __ATOMIC_RELAXED);
		uint32_t when = __atomic_load_n(&w->when_us, __ATOMIC_RELAXED);
		if (when) {
			/* us since the wait began; a release that raced with the
			 * registration is dated at the start */
			int32_t after = (int32_t)(when - us32(t0));
			b->release_ns = after >= 0 ? t0 - t0 % 1000 + (uint64_t)after * 1000 : t0;
		}
	}
out:
	__atomic_fetch_sub(&w->key, 1, __ATOMIC_ACQ_REL); /* the count: obj stays */
}

int waits_release_slow(struct rhea_tstate *t, uint64_t obj, uint64_t site, int may_block)
{
	(void)may_block; /* nothing here blocks */
	struct wslot *set = set_of(obj);
	int found = 0;
	uint32_t seq = 0, stack = 0, when = 0;
	/* Usually one way holds obj; two waiters claiming ways at the same time
	 * can make it two, and each has its waiters: all are told. */
	for (int i = 0; i < WAYS; i++) {
		struct wslot *w = &set[i];
		uint64_t k = __atomic_load_n(&w->key, __ATOMIC_ACQUIRE);
		if (key_object(k) != obj || key_waiters(k) == 0)
			continue;
		if (!found) {
			found = 1;
			seq = ++t->rel_seq;
			if (seq == 0)
				seq = t->rel_seq = 1;
			/* While the ticker coasts the epoch may lag: the clock
			 * read brings it up to date (clock.c), and the test is
			 * exact again. */
			int blind = rhea_g.ticker_coasting && !rhea_tsc(); /* no TSC: no telling */
			if (!rhea_g.cfg.epoch_gate || blind ||
			    __atomic_load_n(&w->since_epoch, __ATOMIC_ACQUIRE) !=
				    __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED)) {
				/* a waiter may have waited long enough to be recorded */
				uint64_t now = rhea_now();
				stack = capture_release_stack(t, site, now);
				when = us32(now) ? us32(now) : 1;
			}
		}
		__atomic_store_n(&w->stack, stack, __ATOMIC_RELAXED);
		__atomic_store_n(&w->when_us, when, __ATOMIC_RELAXED);
		__atomic_store_n(&w->release, (uint64_t)t->tid << 32 | seq, __ATOMIC_RELEASE);
	}
	return found;
}

void waits_after_fork(void)
{
	memset(slots, 0, sizeof(slots));
}

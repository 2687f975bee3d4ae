/*
 * fastpath.c - malloc and free as the program calls them, millions of
 * times a second (DESIGN.md 1.1: "the check on the hot path must cost
 * about as much as a load and a compare").
 *
 * The common case of malloc is: the same allocation site as the thread's
 * previous allocation, no capture due, the agent not running on this
 * thread.  That is two compares (the return address against the latest
 * site, one 64-bit TLS word holding the recursion guard and the epoch of
 * the thread's last capture against the global epoch), two adds (the site's
 * count and bytes, from which the thread's totals are derived) and a jump
 * to the real malloc.  Everything else - a new site, a capture, a thread
 * not registered yet, a class switched off - is hooks_malloc_other's job.
 * free's common case is one compare, the boot arena check and the jump.
 * Every CLOCK_RUN-th allocation of a site's run leaves the fast path as
 * well: the slow path may read the TSC then (alloc_clock), which moves the
 * epoch for a thread that only allocates, without the ticker.
 *
 * This file is compiled without frame pointers, unlike the rest of the
 * agent: these functions never capture (they leave that to hooks.c by a
 * tail call, with their frame already gone), so no unwinder walks through
 * them, and without the frame the return address is read straight off the
 * stack.  The fast path then saves no register and pushes nothing: on the
 * allocation storm W1 (16 threads, a malloc or free every 30 ns of the
 * program's own work) the hook went from 45 instructions with 7 pushes and
 * 7 pops, when it counted after calling the real malloc, to 11.
 *
 * An allocation that fails is counted all the same: the hook does not see
 * the result (only a program out of memory would notice).
 */
#include "agent.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)

extern void *(*real_malloc)(size_t) __attribute__((visibility("hidden")));
extern void (*real_free)(void *) __attribute__((visibility("hidden")));

EXPORT void *malloc(size_t n)
{
	uint64_t ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
	if (likely(rhea_hot.site_pc == ret) && likely(hot_gate_open()) && likely(!site_clock_due())) {
		site_note_same(n);
		return real_malloc(n);
	}
	return hooks_malloc_other(n, ret);
}

EXPORT void free(void *p)
{
	void (*f)(void *) = real_free;
	if (likely(hot_gate_open()) && likely(!rhea_is_boot(p)) && likely(f != NULL)) {
		f(p);
		return;
	}
	hooks_free_other(p);
}

/*
 * pthread_mutex_lock and pthread_mutex_unlock, the same way, while no
 * thread of the program has ever waited (waits_any: until then no release
 * has anyone to tell, and the wait table is never looked at): no capture
 * due, the class on, the thread registered, not a hook in 64 that reads
 * the TSC (untimed_note), and for the lock a mutex that is free.  In
 * hooks.c the two hooks saved five registers and made a frame for their
 * slow paths on every call, and the lock called the real trylock and
 * came back: an uncontended lock/unlock pair cost 12-13 ns more than bare
 * on the bench machine of 2026-11-28 (bench/hookloop.c, bare 12.5 ns),
 * 6-7 ns from here.  Everything else is hooks.c's
 * (hooks_mutex_lock_other tries the lock first and times the wait when
 * it is held; hooks_mutex_unlock_other tells the wait table).
 *
 * The price: a lock found free here but taken by another thread before
 * the real lock's own atomic exchange, nanoseconds later, waits untimed
 * and unregistered.  That race can only come before the program's first
 * timed wait: the first wait that is seen (a held lock is seen here
 * unless it is taken in those nanoseconds) ends this fast path for good.
 */
extern int (*real_pthread_mutex_lock)(pthread_mutex_t *) __attribute__((visibility("hidden")));
extern int (*real_pthread_mutex_unlock)(pthread_mutex_t *) __attribute__((visibility("hidden")));

/* The untimed_note count, when this call is not the one that reads the
 * TSC (that one takes the slow path, which counts it). */
static inline int untimed_step(void)
{
	uint32_t u = rhea_hot.untimed + 1;
	if ((u & (CLOCK_EVERY - 1)) == 0)
		return 0;
	rhea_hot.untimed = u;
	return 1;
}

static inline int lock_fast_open(void)
{
	return likely(hot_gate_open()) && likely(rhea_hot.self != NULL) && likely(rhea_g.on[RHEA_C_LOCK]) &&
	       likely(!waits_any());
}

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	int (*f)(pthread_mutex_t *) = real_pthread_mutex_lock;
	if (lock_fast_open() && likely(f != NULL) &&
	    likely(__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0) && likely(untimed_step()))
		return f(m);
	return hooks_mutex_lock_other(m);
}

EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	int (*f)(pthread_mutex_t *) = real_pthread_mutex_unlock;
	if (lock_fast_open() && likely(f != NULL) &&
	    likely(!(__atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) & GLIBC_MUTEX_PSHARED)) &&
	    likely(untimed_step()))
		return f(m);
	return hooks_mutex_unlock_other(m);
}

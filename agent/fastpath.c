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

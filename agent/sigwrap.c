/*
 * sigwrap.c - the program's signal handlers, run inside one of ours.
 *
 * A hooked call that may block notes itself in the thread's slot (hooks.c,
 * call_enter): the end of the recording cuts a wait so far from it, and the
 * sampler's forced captures take one.  A signal handler breaks that note
 * two ways:
 *
 *  - a handler that leaves by siglongjmp leaves the blocking call with it,
 *    and its note stayed: an old-style timeout (alarm, then longjmp out of
 *    a read) left a thread "blocked in read" until its next blocking hook,
 *    and if the program ended first, the end cut a wait of the whole time
 *    since, walked from a frame long gone (a stack of garbage);
 *  - a handler that blocks itself (a usleep, a write) noted its own call
 *    over the one it interrupted, and cleared the note as it returned: the
 *    interrupted call, which goes on, was no longer seen.
 *
 * So the handlers the program installs through sigaction (and signal) run
 * inside on_signal, which takes the thread's note off for the handler's
 * time and puts it back when the handler returns: a siglongjmp out of it
 * leaves the note off, with the call it left.  Before the handler runs, a
 * call blocked for min_block or more is taken as a wait so far (as the
 * end would take it): the wait a jump ends is recorded up to the signal.  The program sees its own
 * actions (sigaction's old action, a query), never on_signal.  Handlers
 * installed before the agent, with the raw system call (Go's runtime), or
 * while rhea attach records (which must leave the process as it was) are
 * left alone.  on_signal costs a few loads and stores per signal (and a
 * capture, when the handler interrupts a long wait).
 */
#include "agent.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

int hooks_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The program's actions on_signal stands for, by signal: written under
 * lock, read by on_signal as they are (a signal that comes while the
 * program changes the action sees the old one or the new, as the kernel's
 * would). */
static struct sigaction acts[NSIG];
static uint32_t lock;
__thread int rhea_in_handler; /* (a handler that jumps out leaves it raised: safe) */

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	struct rhea_tstate *t = rhea_hot.self;
	uint64_t since = t ? __atomic_load_n(&t->call_since, __ATOMIC_ACQUIRE) : 0;
	uint64_t object = 0, frame = 0;
	uint32_t fn = 0, owner = 0;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	if (since && !rhea_guard && rhea_hot.last_epoch != rhea_g.epoch && sp >= t->stack_lo && sp < t->stack_hi) {
		/* the wait so far, should the handler jump out of the call (a
		 * later sample of the whole wait supersedes it: readers drop
		 * it); at most once an interval, as any capture.  Only on the
		 * thread's own stack: a program's alternate signal stack
		 * (SA_ONSTACK) may be 4 KB, most of it the kernel's frame (a
		 * libc call made there, bound lazily, overflowed it into the
		 * heap below; a capture needs more) */
		int e = errno;
		capture_wait_so_far(t, rhea_now(), 0);
		errno = e;
	}
	if (since) {
		fn = t->call_fn;
		object = t->call_object;
		owner = t->call_owner;
		frame = t->call_frame;
		__atomic_store_n(&t->call_since, 0, __ATOMIC_RELEASE);
	}
	const struct sigaction *a = &acts[sig];
	rhea_in_handler++;
	if (a->sa_handler == SIG_DFL || a->sa_handler == SIG_IGN)
		; /* (never installed so) */
	else if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, si, uc);
	else
		a->sa_handler(sig);
	rhea_in_handler--;
	if (since) { /* the handler returned: the call goes on (or returns EINTR) */
		t->call_fn = fn;
		t->call_object = object;
		t->call_owner = owner;
		t->call_frame = frame;
		__atomic_store_n(&t->call_since, since, __ATOMIC_RELEASE);
	}
}

static int is_ours(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_signal;
}

void sigwrap_translate(int sig, struct sigaction *a)
{
	if (a && sig > 0 && sig < NSIG && is_ours(a))
		*a = acts[sig];
}

/* A handler of the program's (not a default, not ignored), to wrap. */
static int wants_wrap(int sig, const struct sigaction *act)
{
	if (!act || rhea_attached || sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return 0;
	/* (one field: SIG_DFL and SIG_IGN are what the kernel looks for,
	 * whatever the flags say) */
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN && !is_ours(act);
}

/* A handler's mask is a signal mask too (hooks.c filters those): one of
 * every signal would hold the sampler's while the handler runs.
 * PostgreSQL's postmaster works in such handlers; a handler that spun for
 * 0.5 s showed 0 ns of CPU, and one that ended the process from inside
 * left the sampling signal blocked for good.  The kernel gets the mask
 * without it; the program, asking, sees its own. */
static const struct sigaction *mask_filtered(const struct sigaction *act, struct sigaction *copy)
{
	sigset_t m;
	const sigset_t *f = act && !rhea_guard ? sampler_filter_set(&act->sa_mask, &m) : NULL;
	if (!f || f == &act->sa_mask)
		return act;
	*copy = *act;
	copy->sa_mask = *f;
	return copy;
}

/* sigaction for the program: its handler wrapped, its old action as it
 * set it. */
int sigwrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!wants_wrap(sig, act)) {
		struct sigaction copy;
		int r = hooks_real_sigaction(sig, mask_filtered(act, &copy), old);
		if (r == 0)
			sigwrap_translate(sig, old);
		return r;
	}
	/* acts[sig] and the kernel's action change together: nothing else on
	 * this thread (a handler calling sigaction) while the lock is held */
	struct sigaction w, was;
	w = *mask_filtered(act, &w);
	sigset_t all, mask;
	sigfillset(&all);
	hooks_real_sigmask(SIG_SETMASK, &all, &mask);
	while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	struct sigaction prev = acts[sig];
	acts[sig] = *act;
	w.sa_flags |= SA_SIGINFO;
	w.sa_sigaction = on_signal;
	int r = hooks_real_sigaction(sig, &w, &was);
	int e = errno;
	if (r != 0)
		acts[sig] = prev;
	__atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
	hooks_real_sigmask(SIG_SETMASK, &mask, NULL);
	if (r == 0 && old) {
		*old = is_ours(&was) ? prev : was;
	}
	errno = e;
	return r;
}

/*
 * sampler.c - never blind: captures of threads that hit no hook
 * (DESIGN.md 1.4, issue "never blind").
 *
 * Running threads: each thread gets a kernel timer on its own CPU-time clock
 * (timer_create on the thread's CPU clock, SIGEV_THREAD_ID), firing every
 * `sample_ns` of CPU the thread consumes.  The kernel therefore interrupts
 * only threads that are running, at a rate proportional to the CPU they
 * use: a sleeping thread is never signalled, so its nanosleep/poll/
 * epoll_wait never return EINTR because of rhea.  Every expiry is captured,
 * so sampled captures alone are an unbiased CPU profile.  This replaces the
 * "sampler thread scans, tgkills the busy ones" loop of earlier designs,
 * and with it Sliver's sampler groups: no thread waits for another one's
 * sample, the kernel delivers each timer on its own.
 *
 * Blocked threads: the sampler thread wakes every 100-400 ms (SCAN_MIN_NS),
 * and a thread not captured for `force_ns` (1 s) whose state is blocked in
 * a syscall is
 * captured from outside, without a signal: /proc/self/task/TID/syscall
 * gives the user-space sp and pc frozen at the syscall, and the stack is
 * walked with guarded reads (the thread may wake and change it; reads then
 * see garbage, never a fault).  Such samples are marked FORCED.
 *
 * The sampler thread also discovers threads the hooks never saw (created
 * before the agent was loaded, or that never call a hooked function) by
 * listing /proc/self/task, registers them and arms their timers, and
 * notices threads that vanished without our exit hook running.
 *
 * The signal: a real-time signal the program leaves at SIG_DFL (from
 * SIGRTMAX-1 down), or --signal.  If the program later installs a handler
 * for it, the sigaction hook moves rhea to another free signal first.
 *
 * The sampler thread reads /proc often (the task list, each blocked
 * thread's syscall file, TracerPid, the names of threads it registers),
 * and an open takes the lowest free descriptor: a program that closed its
 * stdout to open a log file in its place, or a daemon reopening 0-2 on
 * /dev/null, got 3 instead now and then, the sampler's file in the slot it
 * counted on.  So the sampler gives itself a descriptor table of its own,
 * empty (close_range with CLOSE_RANGE_UNSHARE: nothing of the program's
 * is copied, so it holds none of its files open), before anything else
 * (sampler_own_fds).  Its opens then touch nothing of the program's.
 *
 * What the signal handler does is async-signal-safe: it unwinds with the
 * prepared CFI tables, interns in the lock-free stack table, emits into the
 * try-locked buffers.  It never runs while the thread is inside the agent
 * (the recursion guard), so it never waits for itself.
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TIMED 8192
/* The scan's period: 100 ms after a scan that found threads come or go,
 * doubling up to 400 ms while none do.  Each wake-up of the sampler costs
 * ~0.2 ms of CPU on the bench VM (the /proc reads and the wake-up itself),
 * at 100 ms most of what rhea cost a mostly idle server (bench W5) once
 * the ticker learned to coast.  Threads made with pthread_create register
 * and arm themselves (hooks.c), so the scan mostly finds nothing. */
#define SCAN_MIN_NS 100000000ull
#define SCAN_MAX_NS 400000000ull

int hooks_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Threads the sampler knows, to notice them vanish.  Their timers live in
 * their registry slots (timer_id). */
struct timed {
	uint32_t tid;
	struct rhea_tstate *t;
	uint32_t serial; /* t's life when it was found (thread_release) */
	uint32_t seen;   /* scan generation */
};

static struct timed *timed;
static uint32_t ntimed;
static int sample_sig;
static pthread_t sampler_th;
static int sampler_running;
static volatile int sampler_fds_private; /* the sampler's table is its own */
static volatile int stop;
static volatile int rearm; /* the signal changed: re-create the timers */
static uint32_t sampler_wake; /* futex: rearm or stop, do it now */

static void sampler_kick(void)
{
	__atomic_store_n(&sampler_wake, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &sampler_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
/* The sampler thread, now (agent.c, agent_share_caps). */
void sampler_wake_up(void)
{
	if (sampler_running)
		sampler_kick();
}

int sampler_is_running(void)
{
	return sampler_running;
}

volatile uint32_t rhea_agent_tids[8];

static int is_agent_tid(uint32_t tid)
{
	for (int i = 0; i < 8; i++)
		if (rhea_agent_tids[i] == tid)
			return 1;
	return 0;
}

/*
 * Room for a capture on the stack this handler runs on.  That is the
 * thread's own stack, unless the signal came while the thread ran on an
 * alternate stack (the program's own signal handler): then the capture
 * needs SAMPLE_ROOM below us on it, else it is skipped.  (One system call,
 * only then.)
 */
#define SAMPLE_ROOM (16u << 10)

static int stack_room(const struct rhea_tstate *t)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	if (!t->stack_hi || (sp >= t->stack_lo && sp < t->stack_hi))
		return 1;
	stack_t cur;
	if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_ONSTACK))
		return 1; /* the main thread's stack grew below what we knew */
	return sp - (uintptr_t)cur.ss_sp >= SAMPLE_ROOM;
}

/*
 * Sharing the signal.  A Go program's runtime installs its handler on
 * every signal, the real-time ones included, so there is no free one to
 * move to: sampling went off, and a Go program's goroutines call nothing
 * hooked.  Then the sampler keeps the signal and the program's action is
 * kept aside: our timers' signals (SI_TIMER, with our cookie) are samples,
 * any other is passed to that action as the kernel would have, on the
 * alternate stack when the action asks for it (Go's handler insists).
 * sigaction on the signal reads and sets the action kept aside.
 */
#define TIMER_COOKIE 0x72686561 /* "rhea" */
static volatile int shared;
static struct sigaction prog_act; /* the program's action while shared */

static void on_sample(int sig, siginfo_t *si, void *uc);

static int ours(const siginfo_t *si)
{
	return si && si->si_code == SI_TIMER && si->si_value.sival_int == TIMER_COOKIE;
}

static void forward(int sig, siginfo_t *si, void *uc)
{
	struct sigaction a = prog_act;
	if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN)
		return;
	if ((a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_sample)
		return; /* never: the program's action is not ours */
	if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL) {
		/* a real-time signal's default action: the process ends */
		hooks_real_sigaction(sig, &a, NULL);
		syscall(SYS_tgkill, rhea_g.pid, thread_gettid(), sig); /* delivered on return */
		return;
	}
	sigset_t old;
	hooks_real_sigmask(SIG_BLOCK, &a.sa_mask, &old);
	if (a.sa_flags & SA_SIGINFO)
		a.sa_sigaction(sig, si, uc);
	else
		a.sa_handler(sig);
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_sample_body(int sig, siginfo_t *si, void *uc);

static void on_sample(int sig, siginfo_t *si, void *uc)
{
	struct rhea_tstate *self = rhea_hot.self;
	if (self)
		__atomic_fetch_add(&self->handler_seq, 1, __ATOMIC_ACQ_REL);
	on_sample_body(sig, si, uc);
	if (self)
		__atomic_fetch_add(&self->handler_seq, 1, __ATOMIC_ACQ_REL);
}

static void on_sample_body(int sig, siginfo_t *si, void *uc)
{
	if (shared && !ours(si)) {
		forward(sig, si, uc);
		return;
	}
	int e = errno;
	if (rhea_guard || !rhea_g.active || rhea_g.finished)
		goto out;
	struct rhea_tstate *t = rhea_hot.self;
	if (!t) {
		/* guarded: a handler of the program's that interrupts the claim
		 * and calls a hook must not wait for this very claim */
		rhea_guard++;
		t = thread_register_tid(thread_gettid(), 1);
		rhea_guard--;
	}
	if (!t || __atomic_load_n(&t->in_capture, __ATOMIC_RELAXED))
		goto out;
	if (!stack_room(t))
		goto out;
	/* Always taken, even right after a hook's capture: the sampled captures
	 * alone form an unbiased CPU profile (one per sample_ns of CPU), which
	 * captures at hook points are not. */
	/* CPU-clock timers are checked on scheduler ticks (4 ms at HZ=250):
	 * a shorter period expires several times per delivery, and the kernel
	 * counts the extra expiries as overruns.  The sample stands for all. */
	capture_async(t, uc, 1u + (si && si->si_overrun > 0 ? (unsigned)si->si_overrun : 0));
out:
	errno = e;
}

static int sig_is_free(int sig)
{
	struct sigaction cur;
	if (hooks_real_sigaction(sig, NULL, &cur) != 0)
		return 0;
	return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}

/* Our handler on sig.  Not SA_ONSTACK unless flags say so: a program's
 * alternate signal stack is small (4 KB with the kernel's AVX-512 frame on
 * it left too little for a capture: the program died of SIGSEGV), and a
 * sample needs none of it.  Shared with an action that wants it (Go's),
 * it is: stack_room then guards the capture. */
static int install(int sig, int flags)
{
	struct sigaction act;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = on_sample;
	act.sa_flags = SA_SIGINFO | SA_RESTART | flags;
	sigemptyset(&act.sa_mask);
	return hooks_real_sigaction(sig, &act, NULL);
}

/* A free signal other than avoid and the members of avoid_set (may be
 * NULL), 0 if none. */
static int pick_signal_but(int avoid, const sigset_t *avoid_set)
{
	int want = rhea_g.cfg.signal;
	if (want > 0 && want != avoid && !(avoid_set && sigismember(avoid_set, want)) && sig_is_free(want))
		return want;
	for (int sig = SIGRTMAX - 1; sig >= SIGRTMIN + 4; sig--)
		if (sig != avoid && !(avoid_set && sigismember(avoid_set, sig)) && sig_is_free(sig))
			return sig;
	return 0;
}

static int pick_signal(int avoid)
{
	return pick_signal_but(avoid, NULL);
}

static int arm_timer(uint32_t tid, int *id)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = sample_sig;
	sev.sigev_value.sival_int = TIMER_COOKIE;
	sev._sigev_un._tid = (int)tid;
	int kid;
	if (syscall(SYS_timer_create, rhea_thread_clock(tid), &sev, &kid) != 0)
		return -errno;
	uint64_t p = tid == (uint32_t)rhea_g.pid ? rhea_g.cfg.sample_main_ns : rhea_g.cfg.sample_ns;
	/* The first expiry comes after one interval of CPU, so that a thread
	 * that starts computing shows from (nearly) its start. */
	uint64_t first = rhea_g.cfg.interval_ns < p ? rhea_g.cfg.interval_ns : p;
	struct itimerspec its = {{(time_t)(p / 1000000000ull), (long)(p % 1000000000ull)},
				 {(time_t)(first / 1000000000ull), (long)(first % 1000000000ull)}};
	if (syscall(SYS_timer_settime, kid, 0, &its, NULL) != 0) {
		int e = -errno;
		syscall(SYS_timer_delete, kid);
		return e;
	}
	*id = kid;
	return 0;
}

/*
 * rhea attach starts the agent on a program thread stopped in a wait (a
 * sleep, a poll) that the kernel restarts from the thread's restart block
 * once the agent is loaded.  A signal handled on that thread meanwhile
 * (our timer's first expiry comes after 1 ms of CPU, and the start takes
 * about that) resets the block on its return: the program's sleep would
 * then end early with EINTR.  So that thread's timer is armed only at the
 * end of the start (agent_init), or by a scan after it.
 */
uint32_t sampler_hold_tid;

/*
 * A debugger.  A process that gdb runs or attaches to is ptraced, and the
 * tracer sees each signal before the program: gdb stopped the program at
 * every sampler signal ("received signal SIG63"), and `rhea record -- gdb
 * ./prog` never got to the program's end.  So while a tracer is attached
 * (TracerPid in /proc/self/status, read at start and at each scan) no
 * timer is armed: the sampler pauses, the hooks' captures (no signal) go
 * on.  strace is a tracer too.
 */
static volatile int paused;
static uint32_t attach_tracer; /* rhea attach itself, while it loads us */

static uint32_t tracer_pid(void)
{
	char buf[2048];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strstr(buf, "\nTracerPid:");
	if (!p)
		return 0;
	p += sizeof("\nTracerPid:") - 1;
	while (*p == ' ' || *p == '\t')
		p++;
	uint32_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint32_t)(*p++ - '0');
	return v;
}

static void disarm_one(struct rhea_tstate *t, void *arg);

/* Pause or resume the sampler as a tracer comes or goes (sampler thread). */
static void follow_tracer(void)
{
	uint32_t tracer = tracer_pid();
	if (tracer == attach_tracer)
		tracer = 0;
	if (!tracer == !paused)
		return;
	paused = tracer != 0;
	if (paused) {
		agent_warn("a debugger traces the process, which would stop at each sampler signal: "
			   "sampling pauses while it does; tracer pid",
			   tracer);
		thread_foreach(disarm_one, NULL);
	} else {
		rearm = 1;
	}
}

void sampler_arm(struct rhea_tstate *t)
{
	if (paused)
		return;
	if (!sample_sig || !rhea_g.cfg.sample_ns || __atomic_load_n(&t->timer_id, __ATOMIC_RELAXED) >= 0 ||
	    t->tid == __atomic_load_n(&sampler_hold_tid, __ATOMIC_ACQUIRE))
		return;
	int id = -1, e = arm_timer(t->tid, &id);
	if (e != 0) {
		/* A thread that ended meanwhile (the sampler's scan arms the
		 * threads it finds, and a short one may be gone) fails with
		 * EINVAL: nothing to say.  Else a seccomp filter failing
		 * timer_create, a timer limit. */
		if (syscall(SYS_tgkill, rhea_g.pid, t->tid, 0) != 0 && errno == ESRCH)
			return;
		agent_warn("cannot arm a thread's sampling timer: threads that hit no hook are not sampled; errno", e);
		return;
	}
	int none = -1;
	if (!__atomic_compare_exchange_n(&t->timer_id, &none, id, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		syscall(SYS_timer_delete, id); /* armed meanwhile by the other side */
}

void sampler_disarm(struct rhea_tstate *t)
{
	int id = __atomic_exchange_n(&t->timer_id, -1, __ATOMIC_ACQ_REL);
	if (id >= 0)
		syscall(SYS_timer_delete, id);
}

static struct timed *find_timed(uint32_t tid)
{
	for (uint32_t i = 0; i < ntimed; i++)
		if (timed[i].tid == tid)
			return &timed[i];
	return NULL;
}

/*
 * Whether thread tid sleeps in a system call, and where.  The registers
 * come from /proc/self/task/TID/syscall ("nr a1 a2 a3 a4 a5 a6 sp pc"):
 * RHEA_ASLEEP_AT.  But a process that gave up root (a daemon's setuid to
 * its user: memcached -u, nginx's and postgres's workers) is no longer
 * dumpable, its /proc files then belong to root and that one is 0400: the
 * process itself may not open it any more.  stat, which anyone may read,
 * still says that the thread sleeps: RHEA_ASLEEP, without registers.  A
 * thread asleep in a hooked call needs none (the hook noted its frame:
 * capture_wait_so_far); one asleep elsewhere cannot be walked.  Before
 * this, such a process's sleeping threads were never taken from outside:
 * no forced captures, no wait at the end (memcached -u: its idle threads
 * showed 35 us of their 4 s).  Making the process dumpable for a moment
 * to open the file would let any process of its new user open its memory
 * in that moment.
 */
int sampler_blocked(uint32_t tid, uint64_t *pc, uint64_t *sp, long *nr)
{
	char buf[256];
	if (thread_read_task_file(tid, "syscall", buf, sizeof(buf)) <= 0) {
		char c = thread_task_state_letter(tid);
		return c == 'S' || c == 'D' ? RHEA_ASLEEP : RHEA_NOT_ASLEEP;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return RHEA_NOT_ASLEEP; /* "running", or "-1 sp pc": not in a syscall */
	char *s = buf;
	uint64_t f[9];
	for (int i = 0; i < 9; i++) {
		while (*s == ' ')
			s++;
		if (!*s)
			return RHEA_NOT_ASLEEP;
		f[i] = strtoull(s, &s, i == 0 ? 10 : 16);
	}
	*nr = (long)f[0];
	*sp = f[7];
	*pc = f[8];
	return RHEA_ASLEEP_AT;
}

/* Returns whether a thread came or went. */
static int scan(uint32_t gen)
{
	int changed = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			uint32_t tid = (uint32_t)strtoul(d->d_name, NULL, 10);
			if (is_agent_tid(tid))
				continue;
			struct timed *tm = find_timed(tid);
			if (!tm && ntimed < MAX_TIMED) {
				struct rhea_tstate *t = thread_register_tid(tid, 0);
				if (!t)
					continue;
				tm = &timed[ntimed++];
				tm->tid = tid;
				tm->t = t;
				tm->serial = __atomic_load_n(&t->serial, __ATOMIC_RELAXED);
				sampler_arm(t); /* unless it armed itself */
				changed = 1;
			}
			if (tm)
				tm->seen = gen;
		}
	}
	syscall(SYS_close, fd);
	/* Threads gone: disarm; release a slot whose exit we did not see. */
	for (uint32_t i = 0; i < ntimed;) {
		struct timed *tm = &timed[i];
		if (tm->seen == gen) {
			i++;
			continue;
		}
		struct rhea_tstate *t = thread_find(tm->tid);
		if (t && t == tm->t)
			thread_release(t, tm->serial);
		thread_gone(tm->tid);
		timed[i] = timed[--ntimed];
		changed = 1;
	}
	return changed;
}

static void force_blocked(void)
{
	uint64_t now = rhea_now();
	for (uint32_t i = 0; i < ntimed; i++) {
		struct rhea_tstate *t = timed[i].t;
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TS_LIVE || t->tid != timed[i].tid)
			continue;
		if (now - t->last_capture_ns < rhea_g.cfg.force_ns)
			continue;
		uint64_t pc = 0, sp = 0;
		long nr = 0;
		int asleep = sampler_blocked(t->tid, &pc, &sp, &nr);
		if (asleep == RHEA_NOT_ASLEEP)
			continue;
		/* In a hooked call: the wait so far, walked from the hook's
		 * caller (a SIGKILL leaves it; the call's own sample, or the
		 * end's, supersedes it: analysis/recording.c) */
		if (!capture_wait_so_far(t, now, sp) && asleep == RHEA_ASLEEP_AT)
			capture_forced(t, pc, sp, nr);
	}
}

/*
 * The sampler's own, empty descriptor table.  Not under a seccomp filter
 * already (close_range is not among the calls the agent judges filters
 * by, so a filter may forbid it): one inherited leaves the table shared.
 * A filter for every thread (TSYNC) that comes later waits for this first
 * (sampler_fds_settle).  Under a private table this thread has no stderr:
 * what the agent says from here waits for the writer (agent.c, say).
 */
static uint32_t fds_settled; /* futex: 1 once sampler_own_fds is done */

static void sampler_own_fds(void)
{
	if (syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == 0 &&
	    syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) == 0)
		rhea_fds_private = 1;
	__atomic_store_n(&fds_settled, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &fds_settled, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* A filter for the whole process is about to come (hooks.c): the sampler
 * thread must have its table (or have given up on it) before, or its
 * close_range would come under the filter.  At most a second. */
void sampler_fds_settle(void)
{
	if (!sampler_running)
		return;
	for (int i = 0; i < 100 && !__atomic_load_n(&fds_settled, __ATOMIC_ACQUIRE); i++) {
		struct timespec ts = {0, 10000000};
		syscall(SYS_futex, &fds_settled, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	}
}

/*
 * The main thread died without pthread_exit (a raw exit system call, a
 * seccomp filter's SECCOMP_RET_KILL_THREAD), and no thread of the
 * program's is left: the writer ends the process (agent.c,
 * end_as_leader).  Or main called pthread_exit and the program's last
 * thread is gone: the writer exits as glibc would have.  Asked here (once
 * a second, and at each scan after a pthread_exit of main, every 100 ms
 * then), where /proc is read without touching the program's descriptors;
 * by the writer itself when this thread has no table of its own.
 */
static volatile int leader_dead, program_gone;
static uint64_t leader_checked_ns;

static void check_leader(void)
{
	if (rhea_g.leader_gone) {
		if (!thread_program_left())
			program_gone = 1;
		return;
	}
	uint64_t now = rhea_now();
	if (now - leader_checked_ns < 1000000000ull || rhea_attached)
		return;
	leader_checked_ns = now;
	if (thread_task_state((uint32_t)rhea_g.pid) == 0 && !thread_program_left())
		leader_dead = 1;
}

/* v, or -1 when the sampler does not watch (the writer asks itself). */
static int watched(int v)
{
	return sampler_running && sampler_fds_private ? v : -1;
}

/* Whether the leader died so. */
int sampler_leader_dead(void)
{
	return watched(leader_dead);
}

/* Whether main's pthread_exit left no program thread. */
int sampler_program_gone(void)
{
	return watched(program_gone);
}

static void *sampler_main(void *arg)
{
	(void)arg;
	rhea_guard = 1;
	sampler_own_fds();
	sampler_fds_private = rhea_fds_private;
	rhea_agent_tids[2] = thread_gettid();
	/* The ticker and the writer must be known before the first scan, or
	 * it would take them for the program's (and record them).  Waited
	 * for here, not where they are started: under rhea attach that is a
	 * program thread, which must not sleep (agent_init says why).  They
	 * run at once but for a loaded machine; 5 s at most all the same. */
	for (int i = 0; i < 5000 && !(rhea_agent_tids[0] && rhea_agent_tids[1]) && !stop; i++) {
		rhea_sleep_ns(1000000);
		agent_caps_follow();
	}
	uint32_t gen = 0;
	uint64_t period = SCAN_MIN_NS;
	while (!stop && !rhea_g.finished) {
		if (rearm) {
			rearm = 0;
			for (uint32_t i = 0; i < ntimed; i++) {
				struct rhea_tstate *t = timed[i].t;
				if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TS_LIVE || t->tid != timed[i].tid)
					continue;
				sampler_disarm(t);
				sampler_arm(t);
			}
		}
		follow_tracer();
		check_leader();
		if (scan(++gen) || rhea_g.leader_gone)
			period = SCAN_MIN_NS;
		else if ((period *= 2) > SCAN_MAX_NS)
			period = SCAN_MAX_NS;
		if (rhea_g.cfg.force_ns && period > rhea_g.cfg.force_ns / 2)
			period = rhea_g.cfg.force_ns / 2 > 1000000 ? rhea_g.cfg.force_ns / 2 : 1000000;
		if (rhea_g.cfg.force_ns)
			force_blocked();
		struct timespec ts = {0, (long)period};
		if (!__atomic_exchange_n(&sampler_wake, 0, __ATOMIC_ACQ_REL))
			syscall(SYS_futex, &sampler_wake, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
		__atomic_store_n(&sampler_wake, 0, __ATOMIC_RELAXED);
		agent_caps_follow();
	}
	ntimed = 0;
	agent_thread_cpu_note(2);
	return NULL;
}

/*
 * The signal an earlier rhea attach's sampling left ignored (sampler_stop),
 * when this copy records again (agent.c, agent_restart) and the program
 * left it so: taken again rather than another free one, of which each
 * attach used to leave one more ignored.
 */
static int spent_sig;

static int spent_again(void)
{
	struct sigaction cur;
	if (!spent_sig || (rhea_g.cfg.signal > 0 && rhea_g.cfg.signal != spent_sig) ||
	    hooks_real_sigaction(spent_sig, NULL, &cur) != 0)
		return 0;
	return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN;
}

int sampler_start(void)
{
	if (!timed) {
		timed = calloc(MAX_TIMED, sizeof(*timed));
		if (!timed)
			return -ENOMEM;
	}
	ntimed = 0;
	stop = 0;
	paused = 0;
	fds_settled = 0;
	sampler_fds_private = 0;
	leader_dead = program_gone = 0;
	leader_checked_ns = 0;
	const char *at = rhea_attached ? attach_getenv("RHEA_ATTACH_TRACER") : NULL;
	attach_tracer = at ? (uint32_t)strtoul(at, NULL, 10) : 0;
	follow_tracer(); /* gdb's program is traced from its exec */
	/* a forked child keeps the signal its parent shared, and its action */
	int inherited = shared ? sample_sig : 0;
	sample_sig = 0;
	if (rhea_g.cfg.sample_ns) {
		sample_sig = inherited ? inherited : spent_again() ? spent_sig : pick_signal(0);
		if (!sample_sig) {
			/* every one taken (rhea attach to a Go program): share */
			int sig = rhea_g.cfg.signal > 0 ? rhea_g.cfg.signal : SIGRTMAX - 1;
			if (hooks_real_sigaction(sig, NULL, &prog_act) == 0) {
				shared = 1;
				sample_sig = sig;
			}
		}
		if (!sample_sig || install(sample_sig, shared ? prog_act.sa_flags & SA_ONSTACK : 0) != 0) {
			shared = 0;
			agent_warn("no free real-time signal: sampling of threads that hit no hook is off", 0);
			sample_sig = 0;
		}
	}
	if (!sample_sig && !rhea_g.cfg.force_ns)
		return 0;
	sigset_t all, old;
	sigfillset(&all);
	hooks_real_sigmask(SIG_SETMASK, &all, &old);
	rhea_guard++;
	int r = pthread_create(&sampler_th, agent_thread_attr(), sampler_main, NULL);
	rhea_guard--;
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
	if (r == 0) {
		sampler_running = 1;
		pthread_setname_np(sampler_th, "rhea-sampler");
	}
	return -r;
}

static void disarm_one(struct rhea_tstate *t, void *arg)
{
	(void)arg;
	sampler_disarm(t);
}

/*
 * Stop sampling for good (rhea attach's detach): no new timer (sample_sig
 * 0 first), the sampler thread joined, every thread's timer deleted, and the
 * signal ignored, which also discards any still pending.  It stays ignored:
 * a timer a hook armed at the very last moment must not kill the process
 * with the signal's default action.
 */
static void note_blocked_one(struct rhea_tstate *t, void *arg)
{
	(void)arg;
	sampler_note_blocked(t);
}

void sampler_stop(void)
{
	thread_foreach(note_blocked_one, NULL); /* (rhea attach leaving) */
	int sig = sample_sig;
	__atomic_store_n(&sample_sig, 0, __ATOMIC_SEQ_CST);
	stop = 1;
	sampler_kick();
	if (sampler_running) {
		pthread_join(sampler_th, NULL);
		sampler_running = 0;
	}
	thread_foreach(disarm_one, NULL);
	if (sig && shared) {
		/* the program's own action back (a signal of ours still
		 * pending goes to it: SI_TIMER, which Go ignores) */
		shared = 0;
		hooks_real_sigaction(sig, &prog_act, NULL);
	} else if (sig) {
		struct sigaction ign;
		memset(&ign, 0, sizeof(ign));
		ign.sa_handler = SIG_IGN;
		if (hooks_real_sigaction(sig, &ign, NULL) == 0)
			spent_sig = sig;
	}
}

void sampler_after_fork(void)
{
	/* Timers are not inherited; the child arms its own. */
	ntimed = 0;
}

/* Sample with next from now on (0: no free signal left). */
static void move_to(int next, int old)
{
	if (next && install(next, 0) == 0) {
		sample_sig = next;
		rearm = 1;
		sampler_kick(); /* the old signal is the program's now */
	} else {
		sample_sig = 0;
		agent_warn("the program took the sampling signal and none is free: sampling is off", old);
	}
}

/*
 * A program that blocks signals and takes them with sigwait, sigwaitinfo,
 * sigtimedwait or a signalfd would take the sampler's too: a server's
 * signal thread waiting on a full set got "Real-time signal 29", which
 * the program never sent.  A thread that blocks every signal is never
 * sampled: its timer's signal stays pending.  So the sets the program
 * waits on and blocks (hooks.c) go through here.  A set that holds every
 * real-time signal is a catch-all: the program waits, or blocks, without
 * the sampling signal (to wait, it stays pending, blocked in threads that
 * block everything but never blocked for good in any, as the program never
 * knew it).  A set that names the sampling signal among others wants that
 * very signal: the sampler moves to one outside the set, as when the
 * program installs a handler for it.  Returns the set to use (set itself,
 * or copy).
 */
const sigset_t *sampler_filter_set(const sigset_t *set, sigset_t *copy)
{
	int sig = __atomic_load_n(&sample_sig, __ATOMIC_RELAXED);
	if (!set || !sig || sigismember(set, sig) != 1)
		return set;
	int all = 1;
	for (int s = SIGRTMIN; s <= SIGRTMAX && all; s++)
		all = sigismember(set, s) == 1;
	if (all) {
		*copy = *set;
		sigdelset(copy, sig);
		return copy;
	}
	move_to(pick_signal_but(sig, set), sig);
	return set;
}

/* The calling thread takes the sampling signal, if it started with it
 * blocked: made with pthread_attr_setsigmask_np, by a thread that blocked
 * it with the raw system call (which no hook sees), or a process started
 * so.  One system call. */
void sampler_unblock_self(void)
{
	int sig = __atomic_load_n(&sample_sig, __ATOMIC_RELAXED);
	if (!sig)
		return;
	uint64_t set = 1ull << (sig - 1);
	syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, sizeof(set));
}

static uint64_t blocked_threads;

/* A /proc status line's hexadecimal signal set ("\nSigBlk:"): 0 and
 * *set, or -1. */
static int status_set(const char *buf, const char *key, uint64_t *set)
{
	const char *s = strstr(buf, key);
	if (!s)
		return -1;
	s += strlen(key);
	while (*s == ' ' || *s == '\t')
		s++;
	uint64_t v = 0;
	int digits = 0;
	for (; (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'); s++, digits++)
		v = v << 4 | (uint64_t)(*s <= '9' ? *s - '0' : *s - 'a' + 10);
	*set = v;
	return digits ? 0 : -1;
}

/*
 * Whether thread tid holds sig off: blocks it with a timer's signal of
 * ours pending (its CPU timer expired, the kernel could not deliver): 1,
 * 0, -1 unknown.  A thread that blocks the signal but has not computed a
 * sampling period since lost no sample; one caught in the sampler's own
 * handler (the kernel blocks the signal for its time) has none pending,
 * the period's expiry taken.  The calling thread asks the kernel; another's
 * sets are in /proc (SigBlk, SigPnd: its own pending signals, where a
 * SIGEV_THREAD_ID timer's go).
 */
static int sig_held_in(uint32_t tid, int sig)
{
	uint64_t mask = 0, pend = 0, bit = 1ull << (sig - 1);
	if (tid == thread_gettid()) {
		if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, sizeof(mask)) != 0 ||
		    syscall(SYS_rt_sigpending, &pend, sizeof(pend)) != 0)
			return -1;
		return (mask & pend & bit) != 0;
	}
	char buf[4096]; /* (1.5 KB today; SigBlk at 0.7) */
	if (thread_read_task_file(tid, "status", buf, sizeof(buf)) <= 0 || status_set(buf, "\nSigBlk:", &mask) != 0 ||
	    status_set(buf, "\nSigPnd:", &pend) != 0)
		return -1;
	return (mask & pend & bit) != 0;
}

/* One look at another thread t, as sig_held_in, for the program's mask:
 * -1 also when t ran the sampler's handler meanwhile (whose mask the
 * kernel sets). */
static int blocked_look(struct rhea_tstate *t, int sig)
{
	uint32_t before = __atomic_load_n(&t->handler_seq, __ATOMIC_ACQUIRE);
	int b = sig_held_in(t->tid, sig);
	uint32_t after = __atomic_load_n(&t->handler_seq, __ATOMIC_ACQUIRE);
	return (before & 1) || before != after ? -1 : b;
}

/* While a thread runs the sampler's own handler, the kernel blocks the
 * signal there: a thread caught in it at the end (a program spinning
 * while a SIGTERM ends it) was counted as blocking it, and reading its
 * mask twice, 200 us apart, was not enough on a busy machine (the handler
 * preempted in between: hangs/term failed so in CI).  So a thread counts
 * when it blocks the signal with one of our timer's pending (which the
 * handler, having taken it, has not), a look made while the thread was in
 * that handler (handler_seq odd, or moved) tells nothing, and another
 * thread counts when two looks that tell, 200 us apart, say so, within
 * five looks.  (A program's action that the handler forwards to, should
 * it jump out, leaves the count odd: that thread is not counted again;
 * Go's does not jump.) */
void sampler_note_blocked(struct rhea_tstate *t)
{
	int sig = __atomic_load_n(&sample_sig, __ATOMIC_RELAXED);
	if (!sig || __atomic_load_n(&t->sig_blocked, __ATOMIC_RELAXED))
		return;
	if (t->tid == thread_gettid()) {
		if (sig_held_in(t->tid, sig) != 1)
			return;
	} else {
		int told = 0;
		for (int look = 0; look < 5 && told < 2; look++) {
			if (look)
				rhea_sleep_ns(200000);
			int b = blocked_look(t, sig);
			if (b == 0)
				return;
			told += b == 1;
		}
		if (told < 2)
			return;
	}
	if (!__atomic_exchange_n(&t->sig_blocked, 1, __ATOMIC_ACQ_REL))
		__atomic_fetch_add(&blocked_threads, 1, __ATOMIC_RELAXED);
}

void sampler_blocked_reset(void)
{
	__atomic_store_n(&blocked_threads, 0, __ATOMIC_RELAXED);
}

uint64_t sampler_blocked_threads(void)
{
	return __atomic_load_n(&blocked_threads, __ATOMIC_RELAXED);
}

/* The program wants our sampling signal: move to another one first, or
 * share it when none is free (see on_sample).  *handled = 1 when the
 * call was answered here. */
int sampler_filter_sigaction(int sig, const struct sigaction *act, struct sigaction *old, int *handled)
{
	*handled = 0;
	if (!sample_sig || sig != sample_sig)
		return 0;
	if (!shared && !act)
		return 0;
	if (!shared) {
		int next = pick_signal(sig);
		if (next) {
			/* Timers still aimed at the old signal may fire before the
			 * sampler thread re-creates them (within 100 ms): the
			 * program's new handler could see one such signal.
			 * Documented in the README's limits. */
			move_to(next, sig);
			return 0; /* the hook then installs the program's action */
		}
		memset(&prog_act, 0, sizeof(prog_act)); /* what it had: SIG_DFL */
		prog_act.sa_handler = SIG_DFL;
	}
	*handled = 1;
	struct sigaction was = prog_act;
	if (act) {
		prog_act = *act;
		if (install(sig, act->sa_flags & SA_ONSTACK) == 0)
			__atomic_store_n(&shared, 1, __ATOMIC_RELEASE);
	}
	if (old)
		*old = was;
	return 0;
}

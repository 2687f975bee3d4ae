/*
 * hooks.c - the libc functions the agent interposes (DESIGN.md 1.1).
 *
 * Each hook calls the real function (found with dlsym(RTLD_NEXT), so a
 * program that preloads its own allocator keeps it) and, on the fast path,
 * does only: a TLS load of the recursion guard, a load of the class switch,
 * a TLS load of the thread's state, counter increments in memory only this
 * thread writes, and a compare of the thread's last capture epoch with the
 * global epoch, which moves at each interval's end (clock.c: the agent's
 * clock reads move it, and the ticker thread when those are not enough,
 * agent.c).  No clock read, no syscall, no atomic read-modify-write: a
 * capture happens at most once per interval per thread, in capture.c.  The allocation hooks do it
 * before the real call, which is then a jump; malloc's and free's fast
 * paths live in fastpath.c, the rest of them here.
 *
 * Calls that can block are timed (a TSC read at the call, another at the
 * return only when a tick passed meanwhile) and recorded as BLOCK samples
 * when they took at least min_block (default: the interval).  Locks first
 * try the lock: an uncontended lock costs no clock read at all, only a
 * contended one is timed, with the owner (glibc's __owner) read before
 * waiting.
 *
 * The guard makes every hook a plain call-through while the agent itself
 * runs on this thread (libdw, dlsym, pthread internals all allocate).
 * dlsym itself may call calloc before the real calloc is known: a small
 * static arena serves those few calls, and free() ignores its pointers.
 *
 * Fortified variants (__read_chk ...) and the LFS names (open64, pread64 ...)
 * are hooked too: Debian builds with _FORTIFY_SOURCE, and a program built
 * with -D_FILE_OFFSET_BITS=64 calls the 64 names.
 */
#include "agent.h"
#include "seccompbpf.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/syscall.h>
#include <grp.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define CALLER ((uint64_t)(uintptr_t)__builtin_return_address(0) - 1)
/* The return address itself: what allocation sites are counted by (the
 * fast path in fastpath.c compares it as it finds it on the stack). */
#define RET ((uint64_t)(uintptr_t)__builtin_return_address(0))

/* ---- the real functions ------------------------------------------------ */

#define REAL_LIST(X)                                                             \
	X(malloc, void *, (size_t))                                              \
	X(calloc, void *, (size_t, size_t))                                      \
	X(realloc, void *, (void *, size_t))                                     \
	X(free, void, (void *))                                                  \
	X(posix_memalign, int, (void **, size_t, size_t))                        \
	X(aligned_alloc, void *, (size_t, size_t))                               \
	X(memalign, void *, (size_t, size_t))                                    \
	X(pthread_mutex_lock, int, (pthread_mutex_t *))                          \
	X(pthread_mutex_trylock, int, (pthread_mutex_t *))                       \
	X(pthread_mutex_unlock, int, (pthread_mutex_t *))                        \
	X(pthread_rwlock_rdlock, int, (pthread_rwlock_t *))                      \
	X(pthread_rwlock_tryrdlock, int, (pthread_rwlock_t *))                   \
	X(pthread_rwlock_wrlock, int, (pthread_rwlock_t *))                      \
	X(pthread_rwlock_trywrlock, int, (pthread_rwlock_t *))                   \
	X(pthread_rwlock_unlock, int, (pthread_rwlock_t *))                      \
	X(pthread_cond_signal, int, (pthread_cond_t *))                          \
	X(pthread_cond_broadcast, int, (pthread_cond_t *))                       \
	X(sem_wait, int, (sem_t *))                                              \
	X(sem_trywait, int, (sem_t *))                                           \
	X(sem_timedwait, int, (sem_t *, const struct timespec *))                \
	X(sem_clockwait, int, (sem_t *, clockid_t, const struct timespec *))     \
	X(pthread_mutex_timedlock, int, (pthread_mutex_t *, const struct timespec *)) \
	X(pthread_mutex_clocklock, int, (pthread_mutex_t *, clockid_t, const struct timespec *)) \
	X(pthread_rwlock_timedrdlock, int, (pthread_rwlock_t *, const struct timespec *)) \
	X(pthread_rwlock_timedwrlock, int, (pthread_rwlock_t *, const struct timespec *)) \
	X(pthread_rwlock_clockrdlock, int, (pthread_rwlock_t *, clockid_t, const struct timespec *)) \
	X(pthread_rwlock_clockwrlock, int, (pthread_rwlock_t *, clockid_t, const struct timespec *)) \
	X(pthread_cond_clockwait, int, (pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *)) \
	X(pthread_barrier_wait, int, (pthread_barrier_t *))                      \
	X(sem_post, int, (sem_t *))                                              \
	X(read, ssize_t, (int, void *, size_t))                                  \
	X(write, ssize_t, (int, const void *, size_t))                           \
	X(pread, ssize_t, (int, void *, size_t, off_t))                          \
	X(pwrite, ssize_t, (int, const void *, size_t, off_t))                   \
	X(readv, ssize_t, (int, const struct iovec *, int))                      \
	X(writev, ssize_t, (int, const struct iovec *, int))                     \
	X(open, int, (const char *, int, ...))                                   \
	X(openat, int, (int, const char *, int, ...))                            \
	X(close, int, (int))                                                     \
	X(close_range, int, (unsigned, unsigned, int))                           \
	X(closefrom, void, (int))                                                \
	X(dup2, int, (int, int))                                                 \
	X(dup3, int, (int, int, int))                                            \
	X(fsync, int, (int))                                                     \
	X(fdatasync, int, (int))                                                 \
	X(recv, ssize_t, (int, void *, size_t, int))                             \
	X(recvfrom, ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *)) \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                         \
	X(send, ssize_t, (int, const void *, size_t, int))                       \
	X(sendto, ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                   \
	X(accept, int, (int, struct sockaddr *, socklen_t *))                    \
	X(accept4, int, (int, struct sockaddr *, socklen_t *, int))              \
	X(connect, int, (int, const struct sockaddr *, socklen_t))               \
	X(poll, int, (struct pollfd *, nfds_t, int))                             \
	X(ppoll, int, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)) \
	X(select, int, (int, fd_set *, fd_set *, fd_set *, struct timeval *))    \
	X(pselect, int, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)) \
	X(epoll_wait, int, (int, struct epoll_event *, int, int))                \
	X(epoll_pwait, int, (int, struct epoll_event *, int, int, const sigset_t *)) \
	X(epoll_pwait2, int, (int, struct epoll_event *, int, const struct timespec *, const sigset_t *)) \
	X(nanosleep, int, (const struct timespec *, struct timespec *))          \
	X(clock_nanosleep, int, (clockid_t, int, const struct timespec *, struct timespec *)) \
	X(usleep, int, (useconds_t))                                             \
	X(sleep, unsigned, (unsigned))                                           \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                  \
	X(munmap, int, (void *, size_t))                                         \
	X(mprotect, int, (void *, size_t, int))                                  \
	X(madvise, int, (void *, size_t, int))                                   \
	X(clock_gettime, int, (clockid_t, struct timespec *))                    \
	X(gettimeofday, int, (struct timeval *, void *))                         \
	X(__read_chk, ssize_t, (int, void *, size_t, size_t))                    \
	X(__pread_chk, ssize_t, (int, void *, size_t, off_t, size_t))            \
	X(__recv_chk, ssize_t, (int, void *, size_t, size_t, int))               \
	X(__recvfrom_chk, ssize_t, (int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *)) \
	X(__poll_chk, int, (struct pollfd *, nfds_t, int, size_t))               \
	X(__open_2, int, (const char *, int))                                    \
	X(__openat_2, int, (int, const char *, int))                             \
	X(pthread_create, int, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)) \
	X(pthread_setname_np, int, (pthread_t, const char *))                    \
	X(prctl, int, (int, unsigned long, unsigned long, unsigned long, unsigned long)) \
	X(pthread_join, int, (pthread_t, void **))                               \
	X(pthread_timedjoin_np, int, (pthread_t, void **, const struct timespec *)) \
	X(pthread_clockjoin_np, int, (pthread_t, void **, clockid_t, const struct timespec *)) \
	X(waitpid, pid_t, (pid_t, int *, int))                                   \
	X(wait, pid_t, (int *))                                                  \
	X(wait3, pid_t, (int *, int, struct rusage *))                           \
	X(wait4, pid_t, (pid_t, int *, int, struct rusage *))                    \
	X(waitid, int, (idtype_t, id_t, siginfo_t *, int))                       \
	X(dlopen, void *, (const char *, int))                                   \
	X(dlclose, int, (void *))                                                \
	X(execve, int, (const char *, char *const[], char *const[]))             \
	X(execvp, int, (const char *, char *const[]))                            \
	X(execvpe, int, (const char *, char *const[], char *const[]))            \
	X(fexecve, int, (int, char *const[], char *const[]))                     \
	X(_exit, void, (int))                                                    \
	X(setuid, int, (uid_t))                                                  \
	X(setgid, int, (gid_t))                                                  \
	X(seteuid, int, (uid_t))                                                 \
	X(setegid, int, (gid_t))                                                 \
	X(setreuid, int, (uid_t, uid_t))                                         \
	X(setregid, int, (gid_t, gid_t))                                         \
	X(setresuid, int, (uid_t, uid_t, uid_t))                                 \
	X(setresgid, int, (gid_t, gid_t, gid_t))                                 \
	X(setgroups, int, (size_t, const gid_t *))                               \
	X(initgroups, int, (const char *, gid_t))                                \
	X(chroot, int, (const char *))                                           \
	X(_Exit, void, (int))                                                    \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *))   \
	X(signal, sighandler_t, (int, sighandler_t))                             \
	X(sigwait, int, (const sigset_t *, int *))                               \
	X(sigwaitinfo, int, (const sigset_t *, siginfo_t *))                     \
	X(sigtimedwait, int, (const sigset_t *, siginfo_t *, const struct timespec *)) \
	X(signalfd, int, (int, const sigset_t *, int))                           \
	X(pthread_sigmask, int, (int, const sigset_t *, sigset_t *))             \
	X(sigprocmask, int, (int, const sigset_t *, sigset_t *))                 \
	X(_Znwm, void *, (size_t))                                               \
	X(_Znam, void *, (size_t))                                               \
	X(_ZnwmRKSt9nothrow_t, void *, (size_t, const void *))                   \
	X(_ZnamRKSt9nothrow_t, void *, (size_t, const void *))

/* Not static: fastpath.c calls real_malloc and real_free (hidden all the same). */
#define REAL_DECL(name, ret, args) ret(*real_##name) args;
REAL_LIST(REAL_DECL)
/* Versioned: the old pthread_cond_* of GLIBC_2.2.5 use another layout. */
static int (*real_pthread_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *,
					  const struct timespec *);

static int resolving;
static int resolved;
/* Where the real functions are looked up: after us (LD_PRELOAD), or in the
 * program's own scope when we were loaded into it late (attach.c). */
static void *resolve_from = RTLD_NEXT;

static void *real_of(const char *name, void *p)
{
	return rhea_attached ? attach_real(name, p) : p;
}

/* A pthread_cond_* at the GLIBC_2.3.2 layout (the old one is another). */
static void *real_cond(const char *name)
{
	void *f = dlvsym(resolve_from, name, "GLIBC_2.3.2");
	return real_of(name, f ? f : dlsym(resolve_from, name));
}

/*
 * Stand-ins for the real functions an older glibc lacks (epoll_pwait2 came
 * in 2.35, the joins with a deadline in 2.31, the clock variants of the
 * lock waits in 2.30): a program that looked ours up there gets the error
 * a missing function would give (ENOSYS), and the hooks call their real
 * function without asking whether there is one.
 */
#define LATER_LIST(X)                                                            \
	X(epoll_pwait2, ERRNO, (int fd, struct epoll_event *e, int n, const struct timespec *ts, const sigset_t *m)) \
	X(pthread_timedjoin_np, RET, (pthread_t th, void **ret, const struct timespec *ts)) \
	X(pthread_clockjoin_np, RET, (pthread_t th, void **ret, clockid_t clk, const struct timespec *ts)) \
	X(pthread_mutex_clocklock, RET, (pthread_mutex_t * m, clockid_t clk, const struct timespec *ts)) \
	X(pthread_rwlock_clockrdlock, RET, (pthread_rwlock_t * l, clockid_t clk, const struct timespec *ts)) \
	X(pthread_rwlock_clockwrlock, RET, (pthread_rwlock_t * l, clockid_t clk, const struct timespec *ts)) \
	X(pthread_cond_clockwait, RET, (pthread_cond_t * c, pthread_mutex_t * m, clockid_t clk, const struct timespec *ts)) \
	X(sem_clockwait, ERRNO, (sem_t * s, clockid_t clk, const struct timespec *ts))
/* (RET: the error is the result, as pthread functions return it; ERRNO:
 * -1 and errno, as the others) */
#define MISSING_RET return ENOSYS
#define MISSING_ERRNO \
	errno = ENOSYS; \
	return -1
#define MISSING_DEF(name, how, params) \
	static int missing_##name params  \
	{                                 \
		MISSING_##how;            \
	}
LATER_LIST(MISSING_DEF)

static void resolve(void)
{
	if (resolved || resolving)
		return;
	resolving = 1;
#define REAL_SET(name, ret, args) real_##name = (ret(*) args)real_of(#name, dlsym(resolve_from, #name));
	REAL_LIST(REAL_SET)
#define MISSING_SET(name, how, params) \
	if (!real_##name)              \
		real_##name = missing_##name;
	LATER_LIST(MISSING_SET)
	real_pthread_cond_wait = (int (*)(pthread_cond_t *, pthread_mutex_t *))real_cond("pthread_cond_wait");
	real_pthread_cond_timedwait = (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))real_cond(
		"pthread_cond_timedwait");
	resolved = 1;
	resolving = 0;
}

void hooks_resolve(void)
{
	if (rhea_attached && resolve_from != RTLD_DEFAULT) {
		resolve_from = RTLD_DEFAULT;
		resolved = 0;
	}
	resolve();
}

/* dlsym's own allocations before the real allocator is known. */
char rhea_boot_arena[RHEA_BOOT_ARENA] __attribute__((aligned(64)));
static size_t boot_used;

static void *boot_alloc(size_t n, int zero)
{
	(void)zero; /* the arena is zero-filled and never reused */
	size_t off = __atomic_fetch_add(&boot_used, (n + 63) & ~(size_t)63, __ATOMIC_RELAXED);
	if (off + n > sizeof(rhea_boot_arena))
		return NULL;
	return rhea_boot_arena + off;
}

/* ---- common paths ------------------------------------------------------- */

/* The thread state when hooks of this class are on and we are not inside
 * the agent; NULL means: just call through. */
static inline struct rhea_tstate *enter(enum rhea_class cls)
{
	if (unlikely(rhea_guard) || !rhea_g.on[cls])
		return NULL;
	return thread_self();
}

static inline void tick_as(struct rhea_tstate *t, unsigned fn, int clocked)
{
	if (unlikely(rhea_hot.last_epoch != rhea_g.epoch)) {
		int e = errno;
		capture_sync(t, fn, clocked);
		errno = e;
	}
}

/* Maybe capture, at the end of a hook that read no clock (and now and
 * then read one: untimed_note)... */
static inline void tick(struct rhea_tstate *t, unsigned fn)
{
	untimed_note();
	tick_as(t, fn, 0);
}

/* ...or of a timed one, which kept the epoch current itself (clock.c): its
 * capture does not call the coasting ticker back (agent.c). */
static inline void tick_clocked(struct rhea_tstate *t, unsigned fn)
{
	tick_as(t, fn, 1);
}

static inline uint32_t epoch_now(void)
{
	return __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED);
}

/*
 * The call the thread may now block in, for the end of the recording: a
 * program stopped (Ctrl-C, a SIGTERM, rhea attach leaving) while threads
 * hang in a read, a lock or a sleep gets for each of them a BLOCK sample
 * from the call's start to the end (agent.c, end_blocked), where it used
 * to lose all their time since their last capture; the sampler's forced
 * captures take the wait so far (sampler.c, force_blocked).  Five stores
 * at the call, one at its return.  (A signal handler of the program's
 * runs without it, and gets it back as it returns: sigwrap.c.)
 */
static inline void call_enter_at(struct rhea_tstate *t, unsigned fn, uint64_t stamp, uint64_t object, uint32_t owner,
				 void *frame)
{
	t->call_fn = fn;
	t->call_object = object;
	t->call_owner = owner;
	t->call_frame = (uint64_t)(uintptr_t)frame;
	__atomic_store_n(&t->call_since, stamp, __ATOMIC_RELEASE);
}
/* (the hook's own frame: the agent keeps frame pointers, so it holds the
 * caller's rbp and return address, where the stack is walked from) */
#define call_enter(t, fn, stamp, object, owner) \
	call_enter_at(t, fn, stamp, object, owner, __builtin_frame_address(0))

static inline void call_leave(struct rhea_tstate *t)
{
	__atomic_store_n(&t->call_since, 0, __ATOMIC_RELAXED);
}

/*
 * After a call that may have blocked since b->begin: a BLOCK sample when it
 * took long enough, else an ordinary tick.  Returns 1 for a BLOCK.
 *
 * While the ticker ticks, the end clock is read only when the epoch moved
 * during the call: it moves at every interval's end, so a call it did not
 * move during was shorter than min_block (when min_block >= interval, the
 * default).  On a server doing a read or a write every few microseconds
 * that is one clock read of two saved per call (rdtsc is ~10 ns in a VM).
 * The begin time stays exact.  A ticker delayed by a saturated machine can
 * hide a block slightly longer than min_block that fits between two late
 * ticks; event loop waits and sleeps, a few thousand calls a second at
 * most, always read the clock (b->timed): an event loop's waits bound its
 * iterations, and a long wait hidden so would make its iteration look like
 * a stall.  While the ticker coasts (agent.c: a program whose captures
 * need no ticks, and whose timed calls are few enough that one more clock
 * read each costs less than the ticks) the epoch may stand still while
 * time passes, and the clock is read.
 */
static inline int epoch_says_short(uint32_t e, uint32_t e0)
{
	return e == e0 && rhea_g.cfg.epoch_gate && !rhea_g.ticker_coasting;
}

/*
 * A call shorter than min_block, which no BLOCK sample will show: counted,
 * and its time summed where it is known.  While the ticker ticks, the end
 * of a call the epoch did not move during is not read (above), so those
 * calls are timed one in SHORT_SAMPLE, chosen at random, each standing
 * for SHORT_SAMPLE of them: their sum is then right on average whatever
 * the calls' lengths, where an interval for each call the epoch moved
 * during fell 40% short (the epoch moves late, at the next clock read
 * after the interval's end: a wait that ends first never sees it; e2e
 * shortcalls).  A program of many short waits (an event loop that blocks
 * for 50 us at a time, redis under load) showed that time nowhere.
 *
 * At random: by the top bits of a per-thread linear congruential
 * sequence, which nothing in the program can be in step with.  The calls
 * were chosen by bits of their start time before (a 64 ns window in
 * every 1024 ns, or 64 TSC ticks in 1024), and the choice was not
 * independent of the calls' lengths.  Two threads ping-ponging over pipes
 * in step, ~1.9 us a read (beside two CPU hogs, or both on one CPU): the
 * rule applied to the program's own start times of every read counted
 * 0.66-0.74 of their time in the runs where no read took 150 us, and the
 * agent counted 0.55-0.75 on one CPU (e2e shortcalls/onecpu, 6 runs;
 * /notsc beside the hogs failed 7 runs of 12, /tick 1 of 4, at 1.49).  A
 * multiplicative hash of the start time gave 0.78-1.01.  With the
 * sequence: 0.97-1.08 in 14 runs beside the hogs, 0.98-1.05 in 6 on one
 * CPU.  (Its cost: a multiply and an add, in a line the hook writes
 * anyway.)
 */
#define SHORT_SAMPLE 16
static inline int short_sampled(struct rhea_tstate *t)
{
	uint64_t r = t->short_draws * 6364136223846793005ull + 1442695040888963407ull;
	t->short_draws = r;
	return r >> 60 == 0;
}

static inline void short_call(struct rhea_tstate *t, unsigned fn, const struct block_info *b, uint64_t weight)
{
	struct rhea_short_calls *s = &t->shorts[fn];
	s->n++;
	if (b->end)
		s->ns += weight * (b->end - b->begin);
}

static int after_block(struct rhea_tstate *t, unsigned fn, struct block_info *b)
{
	call_leave(t);
	uint32_t e = epoch_now();
	int blocked = 0;
	rhea_hot.timed += !b->timed;
	int sampled = 0;
	if (b->timed || !epoch_says_short(e, b->epoch0) || (sampled = short_sampled(t))) {
		b->end = rhea_now();
		blocked = b->end - b->begin >= rhea_g.cfg.min_block_ns;
	}
	if (!blocked)
		short_call(t, fn, b, sampled ? SHORT_SAMPLE : 1);
	if (blocked) {
		int err = errno;
		capture_block(t, fn, b);
		errno = err;
	} else if (rhea_hot.last_epoch != e) {
		int err = errno;
		capture_sync(t, fn, 1);
		errno = err;
	}
	return blocked;
}

/* The same for an I/O call begun at stamp (rhea_stamp): its block_info is
 * only built (120 bytes), and the stamp converted, when the epoch moved.
 * Inlined into the hook for its common case, a call the epoch did not move
 * during; the rest is out of line (io_short_timed, after_io_moved), whose
 * frames (the block_info, five saved registers) the hook then no longer
 * makes for every call (W2: the I/O hooks 0.66 -> 0.60% of its CPU). */
static __attribute__((noinline)) void io_short_timed(struct rhea_tstate *t, unsigned fn, uint64_t stamp);
static __attribute__((noinline)) void after_io_moved(struct rhea_tstate *t, unsigned fn, uint64_t stamp, uint32_t e0,
						     uint64_t object);

static inline __attribute__((always_inline)) void after_io(struct rhea_tstate *t, unsigned fn, uint64_t stamp,
							   uint32_t e0, uint64_t object)
{
	call_leave(t);
	rhea_hot.timed++;
	if (likely(epoch_says_short(epoch_now(), e0))) {
		t->shorts[fn].n++;
		if (unlikely(short_sampled(t)))
			io_short_timed(t, fn, stamp);
		tick_clocked(t, fn);
		return;
	}
	after_io_moved(t, fn, stamp, e0, object);
}

/* One of the SHORT_SAMPLE (short_call): in ns whatever the stamp (one in
 * ns, where there is no TSC or no calibration yet, had its time dropped). */
static void io_short_timed(struct rhea_tstate *t, unsigned fn, uint64_t stamp)
{
	uint64_t now = rhea_now(), begin = rhea_stamp_ns(stamp);
	if (now > begin)
		t->shorts[fn].ns += SHORT_SAMPLE * (now - begin);
}

static void after_io_moved(struct rhea_tstate *t, unsigned fn, uint64_t stamp, uint32_t e0, uint64_t object)
{
	if (rhea_g.ticker_coasting && !(stamp & RHEA_STAMP_NS)) {
		/* the ticker coasts: the clock tells, in ticks, unconverted */
		uint64_t now = rhea_tsc();
		if (likely(now && now - stamp < rhea_g.min_block_tsc)) {
			t->shorts[fn].n++;
			t->shorts[fn].tsc += now - stamp;
			tick_clocked(t, fn);
			return;
		}
	}
	/* timed: the epoch moved or means nothing, the end clock is read */
	struct block_info b = {.begin = rhea_stamp_ns(stamp), .epoch0 = e0, .timed = 1, .object = object};
	after_block(t, fn, &b);
}

/*
 * Process-shared objects, as glibc marks them (2.25 on): a mutex by a
 * kind bit, a condition variable in bit 0 of __wrefs, a semaphore by the
 * int that follows its 64-bit value ("private": 0 for a private one,
 * FUTEX_PRIVATE_FLAG for a shared one, sem_open's too, which glibc's futex
 * calls turn around).  Their releaser may be in another process, whose
 * releases this process's wait table never sees: the wait says so
 * (RHEA_S_SHARED), and the releaser writes a RELEASE entry
 * (capture_shared_release) that a reader of both recordings pairs with it.
 */
static inline int cond_is_shared(pthread_cond_t *c)
{
	return (__atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) & 1) != 0;
}

static inline int sem_is_shared(sem_t *s)
{
	const int *w = (const int *)(const void *)s;
	return __atomic_load_n(&w[2], __ATOMIC_RELAXED) != 0;
}

/* Threads wait on it: the high half of its 64-bit value word. */
static inline int sem_has_waiters(sem_t *s)
{
	const uint64_t *d = (const uint64_t *)(const void *)s;
	return (__atomic_load_n(d, __ATOMIC_RELAXED) >> 32) != 0;
}

/*
 * A wait on a synchronization object that is known to wait: registered in
 * the wait table so that the releaser can be named, and timed.  While this
 * thread's recent waits were long enough to be recorded, its counters are
 * read at the call too (a getrusage): CPU then tells a spin from a sleep,
 * and voluntary switches a wait that slept on the lock from one that was
 * preempted.  In phases of short waits that syscall is skipped (a server's
 * condition-variable pipeline made 24 of them per request otherwise); the
 * first long wait of a phase is then recorded without begin counters.
 */
#define SYNC_WAIT(t, FN, obj, owner_expr, shared_expr, call)                     \
	({                                                                       \
		struct block_info b_ = {0};                                      \
		b_.object = (uint64_t)(uintptr_t)(obj);                          \
		b_.owner = (owner_expr);                                         \
		b_.shared = (shared_expr);                                       \
		b_.begin = rhea_now(); /* before registering: any release    \
					  recorded after it may wake us */ \
		b_.epoch0 = epoch_now();                                         \
		uint64_t snap_ = 0;                                              \
		int way_ = waits_begin(b_.object, &snap_);                       \
		call_enter(t, FN, b_.begin | RHEA_STAMP_NS, b_.object, b_.owner); \
		if (t->long_waits) {                                             \
			capture_counters(t, &b_.c_begin, b_.begin);          \
			b_.have_begin = 1;                                       \
		}                                                                \
		int r_ = (call);                                                 \
		int e_ = errno;                                                  \
		waits_end(way_, b_.object, snap_, b_.begin, t->tid, &b_);        \
		if (after_block(t, FN, &b_))                                     \
			t->long_waits = 8;                                       \
		else if (t->long_waits)                                          \
			t->long_waits--;                                         \
		errno = e_;                                                      \
		r_;                                                              \
	})


static inline void alloc_done(struct rhea_tstate *t, unsigned fn, uint64_t site, size_t n)
{
	site_note(t, site, n);
	alloc_clock(t);
	tick_as(t, fn, 0);
}

/*
 * The allocation hooks count first and then call the real function as
 * their last act, a tail call: nothing is kept across it, so the hook has
 * no registers to save and no frame to return through.  Counting after
 * the call, the way the other hooks work, made malloc's hook 45
 * instructions (7 pushes and 7 pops of them) and cost an allocation storm
 * (bench W1) 5 points more than an empty interposer.  The price: an
 * allocation that fails is counted all the same (the hook does not see
 * the result), which only a program out of memory shows.
 *
 * Counting first is for a thread already registered, outside the agent,
 * with the class on (alloc_fast); anything else (the thread's first call,
 * dlsym's calls before the real functions are known, the agent's own
 * allocations) goes through the *_slow functions, which call first and
 * count after.
 */
static inline struct rhea_tstate *alloc_fast(void)
{
	struct rhea_tstate *t = rhea_hot.self;
	if (likely(t != NULL) && likely(!rhea_guard) && likely(rhea_g.on[RHEA_C_ALLOC]))
		return t;
	return NULL;
}

/* A capture from an allocation hook, before the real call. */
static __attribute__((noinline)) void alloc_capture(struct rhea_tstate *t, unsigned fn)
{
	int e = errno;
	capture_sync(t, fn, 0);
	errno = e;
}

static inline void alloc_count(struct rhea_tstate *t, unsigned fn, uint64_t site, size_t n)
{
	site_note(t, site, n);
	alloc_clock(t);
	if (unlikely(rhea_hot.last_epoch != rhea_g.epoch))
		alloc_capture(t, fn);
}

/* ---- alloc --------------------------------------------------------------- */

static __attribute__((noinline)) void *malloc_slow(size_t n, uint64_t site)
{
	if (unlikely(!real_malloc)) {
		resolve();
		if (!real_malloc)
			return boot_alloc(n, 0);
	}
	void *p = real_malloc(n);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && p)
		alloc_done(t, RHEA_FN_MALLOC, site, n);
	return p;
}

/* malloc when fastpath.c's check failed: anything but the commonest case
 * (the thread's latest allocation site again, no capture due).  The
 * agent's own calls and a switched-off class (or agent) pass straight
 * through.  ret: the return address into the program. */
void *hooks_malloc_other(size_t n, uint64_t ret)
{
	struct rhea_tstate *t = alloc_fast();
	if (likely(t != NULL)) {
		alloc_count(t, RHEA_FN_MALLOC, ret, n);
		return real_malloc(n);
	}
	if (likely(real_malloc != NULL) && (rhea_guard || !rhea_g.on[RHEA_C_ALLOC]))
		return real_malloc(n);
	return malloc_slow(n, ret);
}

static __attribute__((noinline)) void *calloc_slow(size_t n, size_t m, uint64_t site)
{
	if (unlikely(!real_calloc)) {
		resolve();
		if (!real_calloc)
			return boot_alloc(n * m, 1);
	}
	void *p = real_calloc(n, m);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && p)
		alloc_done(t, RHEA_FN_CALLOC, site, n * m);
	return p;
}

EXPORT void *calloc(size_t n, size_t m)
{
	struct rhea_tstate *t = alloc_fast();
	size_t bytes;
	/* an overflowing size fails in calloc: not counted (slow path) */
	if (unlikely(!t) || unlikely(__builtin_mul_overflow(n, m, &bytes)))
		return calloc_slow(n, m, RET);
	alloc_count(t, RHEA_FN_CALLOC, RET, bytes);
	return real_calloc(n, m);
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t n, uint64_t site)
{
	if (unlikely(rhea_is_boot(old))) {
		void *p = malloc(n);
		if (p)
			memcpy(p, old, n); /* the arena is big enough to read from */
		return p;
	}
	if (unlikely(!real_realloc))
		resolve();
	void *p = real_realloc(old, n);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && p && n)
		alloc_done(t, RHEA_FN_REALLOC, site, n);
	return p;
}

/* realloc(p, 0) frees: not an allocation. */
EXPORT void *realloc(void *old, size_t n)
{
	struct rhea_tstate *t = alloc_fast();
	if (unlikely(!t) || unlikely(rhea_is_boot(old)))
		return realloc_slow(old, n, RET);
	if (n)
		alloc_count(t, RHEA_FN_REALLOC, RET, n);
	return real_realloc(old, n);
}

/* free when fastpath.c's check failed: the boot arena's blocks (never
 * freed), the first calls (the real free not yet known), a capture due
 * (before the real free). */
void hooks_free_other(void *p)
{
	if (unlikely(rhea_is_boot(p)))
		return;
	if (unlikely(!real_free)) {
		resolve();
		if (!real_free)
			return; /* dlsym failed: leak rather than crash */
	}
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t)
		tick(t, RHEA_FN_FREE);
	real_free(p);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (unlikely(!real_posix_memalign))
		resolve();
	int r = real_posix_memalign(out, align, n);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && r == 0)
		alloc_done(t, RHEA_FN_POSIX_MEMALIGN, RET, n);
	return r;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (unlikely(!real_aligned_alloc))
		resolve();
	void *p = real_aligned_alloc(align, n);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && p)
		alloc_done(t, RHEA_FN_ALIGNED_ALLOC, RET, n);
	return p;
}

EXPORT void *memalign(size_t align, size_t n)
{
	if (unlikely(!real_memalign))
		resolve();
	void *p = real_memalign(align, n);
	struct rhea_tstate *t = enter(RHEA_C_ALLOC);
	if (t && p)
		alloc_done(t, RHEA_FN_MEMALIGN, RET, n);
	return p;
}

/*
 * operator new is libstdc++'s (or libc++'s), and a C program has one only
 * once it loads C++ code with dlopen, after resolve() looked for it: the
 * JVM's launcher is such a program (libjvm is C++), and its first new
 * jumped to address 0.  So a new whose real function is unknown looks
 * again: dlsym(RTLD_NEXT) finds a library loaded
 * RTLD_GLOBAL, and agent_first_definition one loaded RTLD_LOCAL (whose
 * calls still bind to the agent's export, which comes first).  Found
 * nowhere (only a program calling new through dlsym could get here), new
 * is malloc from then on.
 */
static void *late_real(const char *name, void *fallback)
{
	void *f = dlsym(resolve_from, name);
	if (!f)
		f = agent_first_definition(name);
	return f ? real_of(name, f) : fallback;
}

static void *new_by_malloc(size_t n)
{
	return real_malloc(n ? n : 1);
}

static void *new_nothrow_by_malloc(size_t n, const void *tag)
{
	(void)tag;
	return real_malloc(n ? n : 1);
}

/* operator new: counted once, at the caller of new (the malloc it makes
 * inside libstdc++ runs under the guard). */
#define NEW_HOOK(sym, params, args, fallback)                                    \
	EXPORT void *sym params                                                  \
	{                                                                        \
		rhea_guard++;                                                    \
		if (unlikely(!real_##sym)) {                                     \
			resolve();                                               \
			if (!real_##sym)                                         \
				real_##sym = (void *(*)params)late_real(#sym, (void *)fallback); \
		}                                                                \
		void *p = real_##sym args;                                       \
		rhea_guard--;                                                    \
		struct rhea_tstate *t = enter(RHEA_C_ALLOC);                     \
		if (t && p)                                                      \
			alloc_done(t, RHEA_FN_OPERATOR_NEW, RET, n);             \
		return p;                                                        \
	}
NEW_HOOK(_Znwm, (size_t n), (n), new_by_malloc)
NEW_HOOK(_Znam, (size_t n), (n), new_by_malloc)
NEW_HOOK(_ZnwmRKSt9nothrow_t, (size_t n, const void *tag), (n, tag), new_nothrow_by_malloc)
NEW_HOOK(_ZnamRKSt9nothrow_t, (size_t n, const void *tag), (n, tag), new_nothrow_by_malloc)

/* ---- locks --------------------------------------------------------------- */

/* A lock taken through obj: tried first (taken at once, a tick), else a
 * wait for it (trycall: the try; call: the real lock). */
#define TRY_THEN_WAIT(t, FN, obj, trycall, owner_expr, shared_expr, call)        \
	({                                                                       \
		int try_ = (trycall);                                            \
		if (likely(try_ != EBUSY))                                       \
			tick(t, FN);                                             \
		else                                                             \
			try_ = SYNC_WAIT(t, FN, obj, owner_expr, shared_expr, call); \
		try_;                                                            \
	})
#define MUTEX_OWNER(m) ((uint32_t)__atomic_load_n(&(m)->__data.__owner, __ATOMIC_RELAXED))
#define MUTEX_SHARED(m) (((m)->__data.__kind & GLIBC_MUTEX_PSHARED) != 0)
#define RWLOCK_OWNER(l) ((uint32_t)__atomic_load_n(&(l)->__data.__cur_writer, __ATOMIC_RELAXED))
#define RWLOCK_SHARED(l) ((l)->__data.__shared != 0)

/* A lock's hook: name(params) locks obj, tryname(obj) tries it. */
#define LOCK_HOOK(name, obj, tryname, FN, OWNER, SHARED, params, args)            \
	EXPORT int name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		struct rhea_tstate *t = enter(RHEA_C_LOCK);                      \
		if (!t)                                                          \
			return real_##name args;                                 \
		return TRY_THEN_WAIT(t, FN, obj, real_##tryname(obj), OWNER(obj), SHARED(obj), \
				     real_##name args);                          \
	}

/* pthread_mutex_lock when fastpath.c's check failed: a capture due, the
 * thread's first call, some thread has waited, the mutex is held... */
int hooks_mutex_lock_other(pthread_mutex_t *m)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_pthread_mutex_lock(m);
	return TRY_THEN_WAIT(t, RHEA_FN_MUTEX_LOCK, m, real_pthread_mutex_trylock(m), MUTEX_OWNER(m), MUTEX_SHARED(m),
			     real_pthread_mutex_lock(m));
}

/*
 * The waits with a deadline, as the ones without: C++'s
 * std::timed_mutex::try_lock_for and std::shared_timed_mutex's come here
 * (libstdc++ calls the clock variants), as std::condition_variable's
 * wait_for and wait_until on the steady clock come to
 * pthread_cond_clockwait (below); without these hooks those waits were
 * not recorded, nor their wakers.
 */
LOCK_HOOK(pthread_mutex_timedlock, m, pthread_mutex_trylock, RHEA_FN_MUTEX_TIMEDLOCK, MUTEX_OWNER, MUTEX_SHARED,
	  (pthread_mutex_t * m, const struct timespec *ts), (m, ts))
LOCK_HOOK(pthread_mutex_clocklock, m, pthread_mutex_trylock, RHEA_FN_MUTEX_CLOCKLOCK, MUTEX_OWNER, MUTEX_SHARED,
	  (pthread_mutex_t * m, clockid_t clk, const struct timespec *ts), (m, clk, ts))

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	if (unlikely(!resolved))
		resolve();
	int r = real_pthread_mutex_trylock(m);
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (t)
		tick(t, RHEA_FN_MUTEX_TRYLOCK);
	return r;
}

/* Releases: the wait table is told before the real release, so that the
 * woken thread finds the record when it returns.
 *
 * Where glibc's own object says nobody sleeps on it, the table is looked at
 * once instead of twice: its cache line is written by the waiters of the
 * object and was the costliest miss of a server's unlocks.  A condition
 * variable counts its waiters (__wrefs >> 3, the test glibc's signal makes
 * itself): none, and the signal wakes nobody, so the table is not looked
 * at at all (a waiter registered with us but not yet with glibc is not
 * woken by this signal).  A mutex of the plain kinds (not robust,
 * priority-inheriting or -protecting) holds 2 once a thread has gone or is
 * about to go to sleep on it; at 1 nobody sleeps yet and neither look is
 * needed, unless the releaser itself was held up between that test and
 * its unlock: a thread that sets 2 and goes to sleep in between is woken
 * by this unlock, and waited as long as the releaser was held up.  So the
 * look after the unlock is made when the epoch moved during the hook (a
 * releaser held up for an interval or more; while the ticker coasts the
 * epoch may stand still, and it always looks).  It used to look every
 * time: on a server (bench W2) 94% of all unlocks, each a likely
 * miss of the set's cache line, 0.18% of the program's CPU.  What that
 * look also found is left out: a waiter preempted for a millisecond between
 * registering with us and telling glibc, whose wait then ends at once or
 * at an unlock that did not know of it; and a waiter that sets 2 and goes
 * to sleep between this test and the unlock right after it (nanoseconds),
 * is woken by the unlock, and then waits for a CPU past min_block (64
 * threads on 2 cores).  Its own scheduling made that wait long, not the
 * lock; it names no releaser (the report shows the lock's owner when it
 * began).  The thread still says in its slot what it
 * releases, so a waiter woken before the look after names it all the
 * same (thread_find_releasing). */

static inline int mutex_may_have_sleepers(pthread_mutex_t *m)
{
	int kind = __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);
	if (kind & (GLIBC_MUTEX_ROBUST | GLIBC_MUTEX_PRIO_INHERIT | GLIBC_MUTEX_PRIO_PROTECT))
		return 1;
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) > 1;
}

static inline int cond_has_waiters(pthread_cond_t *c)
{
	return (__atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) >> 3) != 0;
}

/* DECL: what is defined, `EXPORT int name` or the slow half of a fast path
 * in fastpath.c, which jumps to it (so that CALLER is still the program's
 * call site).  BEFORE: look before the release; AFTER (may use before_):
 * look after it too, if the releaser was held up.
 *
 * The look after is for a waiter that registers between the look before
 * (if any) and the release: it takes a record made before for an older one
 * (it was there when it registered), and, woken by this release, would
 * find none newer.  But its wait began after that look, so it lasted about
 * as long as the release took: long enough to be recorded only when the
 * releaser was held up meanwhile, which the epoch tells as for a timed
 * call (epoch_says_short: it cannot while the ticker coasts, or when
 * min_block is shorter than an interval; then it always looks).  Unless
 * held up, one look, not two (W2: 4.8 looks a request down to 2.4, each a
 * likely miss of the set's cache line).  A waiter that registered then and
 * is not woken by this release is told by the next one, which sees it.
 * Each release that may look after, once the program has waited, counts as
 * a timed call in the ticker's cost model (agent.c): while it coasts,
 * every one of them looks, and a program that unlocks millions of times a
 * second has it tick instead (bench/hookloop.c's mutex_waited: the pair
 * 44-46 ns coasting, 19-36 ticking, bare 13).
 *
 * And while it releases, the thread says so in its slot: a releaser
 * preempted for milliseconds between its look before (nobody waited yet)
 * and the release, whose wake-up then runs the woken thread before its
 * look after, is found there by a waiter that finds no record (1 in 15000
 * contended mutex waits on a loaded machine went unattributed without
 * it). */
/* The look after a release of obj begun in epoch e0, from site. */
static inline void look_after(struct rhea_tstate *t, uint64_t obj, uint32_t e0, uint64_t site, int may_block)
{
	if (waits_any()) {
		rhea_hot.timed++;
		if (!epoch_says_short(epoch_now(), e0))
			rhea_hot.timed += waits_release_slow(t, obj, site, may_block);
	}
}

#define RELEASE_HOOK(DECL, name, T, FN, MAY_BLOCK, BEFORE, AFTER, SHARED)       \
	DECL(T *o)                                                               \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		struct rhea_tstate *t = enter(RHEA_C_LOCK);                      \
		if (!t)                                                          \
			return real_##name(o);                                   \
		uint32_t e0_ = epoch_now();                                      \
		int before_ = (BEFORE);                                          \
		int after_ = (AFTER);                                            \
		/* (dated before the release: the woken waiter of another   \
		 * process may run before this thread reads a clock after it) */ \
		uint64_t shared_ns_ = unlikely(SHARED) ? rhea_now() : 0;         \
		uint64_t prev_ = waits_releasing(t, (uint64_t)(uintptr_t)o, after_); \
		/* (each look that finds a waiter reads the clock while the  \
		 * ticker coasts: counted for its cost model) */             \
		if (before_)                                                     \
			rhea_hot.timed += waits_release(t, (uint64_t)(uintptr_t)o, CALLER, MAY_BLOCK); \
		int r = real_##name(o);                                          \
		if (after_)                                                      \
			look_after(t, (uint64_t)(uintptr_t)o, e0_, CALLER, MAY_BLOCK); \
		waits_released(t, prev_, after_);                                \
		if (unlikely(shared_ns_)) /* the waiter may be another process */ \
			capture_shared_release(t, FN, (uint64_t)(uintptr_t)o, CALLER, shared_ns_); \
		tick(t, FN);                                                     \
		return r;                                                        \
	}
/* (pthread_mutex_unlock when fastpath.c's check failed.) */
RELEASE_HOOK(int hooks_mutex_unlock_other, pthread_mutex_unlock, pthread_mutex_t, RHEA_FN_MUTEX_UNLOCK, 1, mutex_may_have_sleepers(o), 1,
	     (o->__data.__kind & GLIBC_MUTEX_PSHARED) && before_)
RELEASE_HOOK(EXPORT int pthread_rwlock_unlock, pthread_rwlock_unlock, pthread_rwlock_t, RHEA_FN_RWLOCK_UNLOCK, 1, 1, 1,
	     o->__data.__shared != 0)
RELEASE_HOOK(EXPORT int pthread_cond_signal, pthread_cond_signal, pthread_cond_t, RHEA_FN_COND_SIGNAL, 1, cond_has_waiters(o), before_,
	     before_ && cond_is_shared(o))
RELEASE_HOOK(EXPORT int pthread_cond_broadcast, pthread_cond_broadcast, pthread_cond_t, RHEA_FN_COND_BROADCAST, 1, cond_has_waiters(o), before_,
	     before_ && cond_is_shared(o))
RELEASE_HOOK(EXPORT int sem_post, sem_post, sem_t, RHEA_FN_SEM_POST, 0, 1, 1, sem_is_shared(o) && sem_has_waiters(o))
/* (sem_post: async-signal-safe, may not block) */

LOCK_HOOK(pthread_rwlock_rdlock, l, pthread_rwlock_tryrdlock, RHEA_FN_RWLOCK_RDLOCK, RWLOCK_OWNER, RWLOCK_SHARED,
	  (pthread_rwlock_t * l), (l))
LOCK_HOOK(pthread_rwlock_wrlock, l, pthread_rwlock_trywrlock, RHEA_FN_RWLOCK_WRLOCK, RWLOCK_OWNER, RWLOCK_SHARED,
	  (pthread_rwlock_t * l), (l))
LOCK_HOOK(pthread_rwlock_timedrdlock, l, pthread_rwlock_tryrdlock, RHEA_FN_RWLOCK_TIMEDRDLOCK, RWLOCK_OWNER,
	  RWLOCK_SHARED, (pthread_rwlock_t * l, const struct timespec *ts), (l, ts))
LOCK_HOOK(pthread_rwlock_timedwrlock, l, pthread_rwlock_trywrlock, RHEA_FN_RWLOCK_TIMEDWRLOCK, RWLOCK_OWNER,
	  RWLOCK_SHARED, (pthread_rwlock_t * l, const struct timespec *ts), (l, ts))
LOCK_HOOK(pthread_rwlock_clockrdlock, l, pthread_rwlock_tryrdlock, RHEA_FN_RWLOCK_CLOCKRDLOCK, RWLOCK_OWNER,
	  RWLOCK_SHARED, (pthread_rwlock_t * l, clockid_t clk, const struct timespec *ts), (l, clk, ts))
LOCK_HOOK(pthread_rwlock_clockwrlock, l, pthread_rwlock_trywrlock, RHEA_FN_RWLOCK_CLOCKWRLOCK, RWLOCK_OWNER,
	  RWLOCK_SHARED, (pthread_rwlock_t * l, clockid_t clk, const struct timespec *ts), (l, clk, ts))

/* Calls that are quick or never block: call, then AFTER, then maybe
 * capture. */
#define PLAIN_HOOK_AFTER(ret, name, cls, FN, params, args, AFTER)               \
	EXPORT ret name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		ret r = real_##name args;                                        \
		AFTER;                                                           \
		struct rhea_tstate *t = enter(cls);                              \
		if (t)                                                           \
			tick(t, FN);                                             \
		return r;                                                        \
	}
#define PLAIN_HOOK(ret, name, cls, FN, params, args) PLAIN_HOOK_AFTER(ret, name, cls, FN, params, args, (void)0)

/* Calls that may block: timed. */
#define TIMED_HOOK(ret, name, cls, FN, obj, params, args)                       \
	EXPORT ret name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		struct rhea_tstate *t = enter(cls);                              \
		if (!t)                                                          \
			return real_##name args;                                 \
		uint64_t t0 = rhea_stamp();                                      \
		uint32_t e0 = epoch_now();                                       \
		call_enter(t, FN, t0, (uint64_t)(obj), 0);                       \
		ret r = real_##name args;                                        \
		after_io(t, FN, t0, e0, (uint64_t)(obj));                        \
		return r;                                                        \
	}

/* Sleeps (and the wait family, below): timed, with the CPU clock (a sleep
 * is long anyway).  The thread state when the wait class is traced. */
static inline struct rhea_tstate *sleep_begin(struct block_info *b)
{
	struct rhea_tstate *t = enter(RHEA_C_WAIT);
	if (t) {
		b->begin = rhea_now();
		b->epoch0 = epoch_now();
		b->timed = 1;
		b->cpu_begin = thread_cpu_now(t, b->begin);
	}
	return t;
}

#define SLEEP_HOOK(ret, name, FN, params, args)                                  \
	EXPORT ret name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		struct block_info bi_ = {0};                                     \
		struct rhea_tstate *t = sleep_begin(&bi_);                       \
		if (!t)                                                          \
			return real_##name args;                                 \
		call_enter(t, FN, bi_.begin | RHEA_STAMP_NS, 0, 0);              \
		ret r = real_##name args;                                        \
		after_block(t, FN, &bi_);                                        \
		return r;                                                        \
	}

/* Event-loop waits: timed, and the return starts a new message. */
#define LOOP_HOOK(ret, name, FN, params, args)                                   \
	EXPORT ret name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		struct rhea_tstate *t = enter(RHEA_C_WAIT);                      \
		if (!t)                                                          \
			return real_##name args;                                 \
		struct block_info b_ = {.begin = rhea_now(), .epoch0 = epoch_now(), \
					.timed = 1};                             \
		call_enter(t, FN, b_.begin | RHEA_STAMP_NS, 0, 0);               \
		ret r = real_##name args;                                        \
		after_block(t, FN, &b_);                                         \
		t->msgid++;                                                      \
		return r;                                                        \
	}

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_pthread_cond_wait(c, m);
	return SYNC_WAIT(t, RHEA_FN_COND_WAIT, c, 0, cond_is_shared(c), real_pthread_cond_wait(c, m));
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_pthread_cond_timedwait(c, m, ts);
	return SYNC_WAIT(t, RHEA_FN_COND_TIMEDWAIT, c, 0, cond_is_shared(c),
			 real_pthread_cond_timedwait(c, m, ts));
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *ts)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_pthread_cond_clockwait(c, m, clk, ts);
	return SYNC_WAIT(t, RHEA_FN_COND_CLOCKWAIT, c, 0, cond_is_shared(c),
			 real_pthread_cond_clockwait(c, m, clk, ts));
}

/*
 * A barrier: every thread that arrives may be the one that lets the others
 * go, so each records itself as the barrier's latest releaser before it
 * waits; a waiter, woken, names the latest it had not seen when it began:
 * the last to arrive.  (Its own wait, the last arrival's, is short.)
 */
EXPORT int pthread_barrier_wait(pthread_barrier_t *b)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_pthread_barrier_wait(b);
	rhea_hot.timed += waits_release(t, (uint64_t)(uintptr_t)b, CALLER, 1);
	return SYNC_WAIT(t, RHEA_FN_BARRIER_WAIT, b, 0, 0, real_pthread_barrier_wait(b));
}

EXPORT int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *ts)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_sem_clockwait(s, clk, ts);
	return SYNC_WAIT(t, RHEA_FN_SEM_CLOCKWAIT, s, 0, sem_is_shared(s), real_sem_clockwait(s, clk, ts));
}

EXPORT int sem_timedwait(sem_t *s, const struct timespec *ts)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_sem_timedwait(s, ts);
	return SYNC_WAIT(t, RHEA_FN_SEM_TIMEDWAIT, s, 0, sem_is_shared(s), real_sem_timedwait(s, ts));
}

EXPORT int sem_wait(sem_t *s)
{
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_LOCK);
	if (!t)
		return real_sem_wait(s);
	int e = errno;
	if (real_sem_trywait(s) == 0) {
		tick(t, RHEA_FN_SEM_WAIT);
		return 0;
	}
	errno = e;
	return SYNC_WAIT(t, RHEA_FN_SEM_WAIT, s, 0, sem_is_shared(s), real_sem_wait(s));
}

/* ---- io and net ---------------------------------------------------------- */

/*
 * The agent's own descriptors.  A daemon that closes every descriptor above
 * 2 (close in a loop, close_range, closefrom) and then opens a file of its
 * own got the number of the agent's recording, and the agent's next chunk
 * went into the program's file.  So the agent's descriptors (the
 * recording, attach's control FIFO) are not the program's to close:
 * closing one fails with EBADF, as it would without the agent (the
 * program never opened it); a range skips them; a dup2 or dup3 onto one
 * moves the agent's to another number first.  The writer still checks,
 * before each chunk, that its descriptor is its file (agent.c): a raw
 * close system call gets past these hooks.
 */
EXPORT int close(int fd)
{
	if (unlikely(!resolved))
		resolve();
	if (unlikely(agent_owns_fd(fd))) {
		errno = EBADF;
		return -1;
	}
	struct rhea_tstate *t = enter(RHEA_C_IO);
	if (!t)
		return real_close(fd);
	uint64_t t0 = rhea_stamp();
	uint32_t e0 = epoch_now();
	int r = real_close(fd);
	after_io(t, RHEA_FN_CLOSE, t0, e0, (uint64_t)fd);
	return r;
}

/* [first, last] but the agent's descriptors: at most four ranges. */
EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (unlikely(!resolved))
		resolve();
	if (!real_close_range) {
		errno = ENOSYS;
		return -1;
	}
	unsigned own[3];
	int n = 0;
	int fds[3] = {__atomic_load_n(&rhea_g.spare_fd, __ATOMIC_ACQUIRE), __atomic_load_n(&rhea_g.fd, __ATOMIC_ACQUIRE),
		      rhea_g.control_fd}; /* in agent_owns_fd's order */
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0 && (unsigned)fds[i] >= first && (unsigned)fds[i] <= last)
			own[n++] = (unsigned)fds[i];
	if (n == 0)
		return real_close_range(first, last, flags);
	for (int i = 1; i < n; i++) /* in order */
		for (int j = i; j > 0 && own[j - 1] > own[j]; j--) {
			unsigned x = own[j];
			own[j] = own[j - 1];
			own[j - 1] = x;
		}
	int r = 0, err = 0;
	int64_t lo = first;
	for (int i = 0; i <= n; i++) {
		int64_t hi = i < n ? (int64_t)own[i] - 1 : (int64_t)last;
		if (lo <= hi && real_close_range((unsigned)lo, (unsigned)hi, flags) < 0 && !err) {
			err = errno;
			r = -1;
		}
		if (i < n)
			lo = (int64_t)own[i] + 1;
	}
	if (err)
		errno = err;
	return r;
}

EXPORT void closefrom(int lowfd)
{
	if (unlikely(!resolved))
		resolve();
	if (lowfd < 0)
		lowfd = 0;
	if (rhea_g.fd < 0 && rhea_g.control_fd < 0 && rhea_g.spare_fd < 0 && real_closefrom) {
		real_closefrom(lowfd);
		return;
	}
	if (close_range((unsigned)lowfd, ~0u, 0) == 0)
		return;
	/* No close_range in this kernel: one by one up to the limit. */
	long max = sysconf(_SC_OPEN_MAX);
	for (long fd = lowfd; fd < max; fd++)
		if (!agent_owns_fd((int)fd))
			syscall(SYS_close, (int)fd);
}

EXPORT int dup2(int oldfd, int newfd)
{
	if (unlikely(!resolved))
		resolve();
	if (unlikely(agent_owns_fd(newfd)) && oldfd != newfd && fcntl(oldfd, F_GETFD) >= 0)
		agent_move_fd(newfd);
	return real_dup2(oldfd, newfd);
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (unlikely(!resolved))
		resolve();
	if (unlikely(agent_owns_fd(newfd)) && oldfd != newfd && fcntl(oldfd, F_GETFD) >= 0)
		agent_move_fd(newfd);
	return real_dup3(oldfd, newfd, flags);
}

TIMED_HOOK(ssize_t, read, RHEA_C_IO, RHEA_FN_READ, fd, (int fd, void *b, size_t n), (fd, b, n))
TIMED_HOOK(ssize_t, write, RHEA_C_IO, RHEA_FN_WRITE, fd, (int fd, const void *b, size_t n), (fd, b, n))
TIMED_HOOK(ssize_t, pread, RHEA_C_IO, RHEA_FN_PREAD, fd, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
TIMED_HOOK(ssize_t, pwrite, RHEA_C_IO, RHEA_FN_PWRITE, fd, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
TIMED_HOOK(ssize_t, readv, RHEA_C_IO, RHEA_FN_READV, fd, (int fd, const struct iovec *v, int n), (fd, v, n))
TIMED_HOOK(ssize_t, writev, RHEA_C_IO, RHEA_FN_WRITEV, fd, (int fd, const struct iovec *v, int n), (fd, v, n))
TIMED_HOOK(int, fsync, RHEA_C_IO, RHEA_FN_FSYNC, fd, (int fd), (fd))
TIMED_HOOK(int, fdatasync, RHEA_C_IO, RHEA_FN_FDATASYNC, fd, (int fd), (fd))
TIMED_HOOK(ssize_t, __read_chk, RHEA_C_IO, RHEA_FN_READ, fd,
	   (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl))
TIMED_HOOK(ssize_t, __pread_chk, RHEA_C_IO, RHEA_FN_PREAD, fd,
	   (int fd, void *b, size_t n, off_t o, size_t bl), (fd, b, n, o, bl))
TIMED_HOOK(int, __open_2, RHEA_C_IO, RHEA_FN_OPEN, 0, (const char *p, int f), (p, f))
TIMED_HOOK(int, __openat_2, RHEA_C_IO, RHEA_FN_OPENAT, d, (int d, const char *p, int f), (d, p, f))
TIMED_HOOK(ssize_t, recv, RHEA_C_NET, RHEA_FN_RECV, fd, (int fd, void *b, size_t n, int f), (fd, b, n, f))
TIMED_HOOK(ssize_t, __recv_chk, RHEA_C_NET, RHEA_FN_RECV, fd,
	   (int fd, void *b, size_t n, size_t bl, int f), (fd, b, n, bl, f))
TIMED_HOOK(ssize_t, recvfrom, RHEA_C_NET, RHEA_FN_RECVFROM, fd,
	   (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l), (fd, b, n, f, a, l))
TIMED_HOOK(ssize_t, __recvfrom_chk, RHEA_C_NET, RHEA_FN_RECVFROM, fd,
	   (int fd, void *b, size_t n, size_t bl, int f, struct sockaddr *a, socklen_t *l),
	   (fd, b, n, bl, f, a, l))
TIMED_HOOK(ssize_t, recvmsg, RHEA_C_NET, RHEA_FN_RECVMSG, fd, (int fd, struct msghdr *m, int f), (fd, m, f))
TIMED_HOOK(ssize_t, send, RHEA_C_NET, RHEA_FN_SEND, fd, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
TIMED_HOOK(ssize_t, sendto, RHEA_C_NET, RHEA_FN_SENDTO, fd,
	   (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l), (fd, b, n, f, a, l))
TIMED_HOOK(ssize_t, sendmsg, RHEA_C_NET, RHEA_FN_SENDMSG, fd, (int fd, const struct msghdr *m, int f), (fd, m, f))
TIMED_HOOK(int, accept, RHEA_C_NET, RHEA_FN_ACCEPT, fd, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
TIMED_HOOK(int, accept4, RHEA_C_NET, RHEA_FN_ACCEPT4, fd,
	   (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f))
TIMED_HOOK(int, connect, RHEA_C_NET, RHEA_FN_CONNECT, fd,
	   (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))

EXPORT ssize_t pread64(int fd, void *b, size_t n, off_t o) __attribute__((alias("pread")));
EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) __attribute__((alias("pwrite")));
EXPORT ssize_t __pread64_chk(int fd, void *b, size_t n, off_t o, size_t bl)
	__attribute__((alias("__pread_chk")));
EXPORT int __open64_2(const char *p, int f) __attribute__((alias("__open_2")));
EXPORT int __openat64_2(int d, const char *p, int f) __attribute__((alias("__openat_2")));

static inline mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_IO);
	if (!t)
		return real_open(path, flags, mode);
	uint64_t t0 = rhea_stamp();
	uint32_t e0 = epoch_now();
	int r = real_open(path, flags, mode);
	after_io(t, RHEA_FN_OPEN, t0, e0, 0);
	return r;
}

EXPORT int openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	if (unlikely(!resolved))
		resolve();
	struct rhea_tstate *t = enter(RHEA_C_IO);
	if (!t)
		return real_openat(dir, path, flags, mode);
	uint64_t t0 = rhea_stamp();
	uint32_t e0 = epoch_now();
	int r = real_openat(dir, path, flags, mode);
	after_io(t, RHEA_FN_OPENAT, t0, e0, (uint64_t)dir);
	return r;
}

EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));
EXPORT int openat64(int dir, const char *path, int flags, ...) __attribute__((alias("openat")));

/* ---- waits --------------------------------------------------------------- */

LOOP_HOOK(int, poll, RHEA_FN_POLL, (struct pollfd *f, nfds_t n, int ms), (f, n, ms))
LOOP_HOOK(int, __poll_chk, RHEA_FN_POLL, (struct pollfd *f, nfds_t n, int ms, size_t l), (f, n, ms, l))
LOOP_HOOK(int, ppoll, RHEA_FN_PPOLL,
	  (struct pollfd *f, nfds_t n, const struct timespec *ts, const sigset_t *m), (f, n, ts, m))
LOOP_HOOK(int, select, RHEA_FN_SELECT,
	  (int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv), (n, rd, wr, ex, tv))
LOOP_HOOK(int, pselect, RHEA_FN_PSELECT,
	  (int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts, const sigset_t *m),
	  (n, rd, wr, ex, ts, m))
LOOP_HOOK(int, epoll_wait, RHEA_FN_EPOLL_WAIT,
	  (int fd, struct epoll_event *e, int n, int ms), (fd, e, n, ms))
LOOP_HOOK(int, epoll_pwait, RHEA_FN_EPOLL_PWAIT,
	  (int fd, struct epoll_event *e, int n, int ms, const sigset_t *m), (fd, e, n, ms, m))
SLEEP_HOOK(int, nanosleep, RHEA_FN_NANOSLEEP, (const struct timespec *a, struct timespec *b), (a, b))
SLEEP_HOOK(int, clock_nanosleep, RHEA_FN_CLOCK_NANOSLEEP,
	   (clockid_t c, int f, const struct timespec *a, struct timespec *b), (c, f, a, b))
SLEEP_HOOK(int, usleep, RHEA_FN_USLEEP, (useconds_t u), (u))
SLEEP_HOOK(unsigned, sleep, RHEA_FN_SLEEP, (unsigned s), (s))
SLEEP_HOOK(int, pthread_join, RHEA_FN_PTHREAD_JOIN, (pthread_t th, void **ret), (th, ret))

/* The waits glibc added later (on an older one: LATER_LIST). */
LOOP_HOOK(int, epoll_pwait2, RHEA_FN_EPOLL_PWAIT2,
	  (int fd, struct epoll_event *e, int n, const struct timespec *ts, const sigset_t *m), (fd, e, n, ts, m))
SLEEP_HOOK(int, pthread_timedjoin_np, RHEA_FN_PTHREAD_TIMEDJOIN, (pthread_t th, void **ret, const struct timespec *ts),
	   (th, ret, ts))
SLEEP_HOOK(int, pthread_clockjoin_np, RHEA_FN_PTHREAD_CLOCKJOIN,
	   (pthread_t th, void **ret, clockid_t clk, const struct timespec *ts), (th, ret, clk, ts))

/*
 * The wait family: timed like the sleeps, and the status of a child it
 * reaped goes to rhea record, traced or not: only the parent learns how a
 * child ended, and a child killed before it could write its end (SIGKILL,
 * a raw exit_group) gets its recording finished with that status instead
 * of `gone` (salvage.c).  A caller that passes no status gets one of ours
 * to the real call; a caller's own is read only after the call wrote it.
 */
static inline void reap_end(struct rhea_tstate *t, unsigned fn, struct block_info *b, pid_t pid, int wstatus)
{
	int e = errno;
	if (t)
		after_block(t, fn, b);
	if (pid > 0 && !rhea_guard)
		salvage_note_reaped(pid, wstatus);
	errno = e;
}

#define REAP_HOOK(name, FN, params, args)                                       \
	EXPORT pid_t name params                                                 \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		int own_ = 0, *sp = st ? st : &own_;                             \
		struct block_info b_ = {0};                                      \
		struct rhea_tstate *t = sleep_begin(&b_);                         \
		if (t)                                                           \
			call_enter(t, FN, b_.begin | RHEA_STAMP_NS, 0, 0);      \
		pid_t r = real_##name args;                                      \
		reap_end(t, FN, &b_, r, r > 0 ? *sp : 0);                        \
		return r;                                                        \
	}

REAP_HOOK(waitpid, RHEA_FN_WAITPID, (pid_t p, int *st, int o), (p, sp, o))
REAP_HOOK(wait, RHEA_FN_WAIT, (int *st), (sp))
REAP_HOOK(wait3, RHEA_FN_WAIT3, (int *st, int o, struct rusage *ru), (sp, o, ru))
REAP_HOOK(wait4, RHEA_FN_WAIT4, (pid_t p, int *st, int o, struct rusage *ru), (p, sp, o, ru))

EXPORT int waitid(idtype_t idt, id_t id, siginfo_t *ip, int o)
{
	if (unlikely(!resolved))
		resolve();
	siginfo_t own;
	siginfo_t *sp = ip ? ip : &own;
	if (!ip)
		memset(&own, 0, sizeof(own));
	struct block_info b_ = {0};
	struct rhea_tstate *t = sleep_begin(&b_);
	if (t)
		call_enter(t, RHEA_FN_WAITID, b_.begin | RHEA_STAMP_NS, 0, 0);
	int r = real_waitid(idt, id, sp, o);
	pid_t pid = 0;
	int ws = 0;
	if (r == 0 && !(o & WNOWAIT) && sp->si_pid > 0) {
		pid = sp->si_pid;
		if (sp->si_code == CLD_EXITED)
			ws = W_EXITCODE(sp->si_status & 0xff, 0);
		else if (sp->si_code == CLD_KILLED)
			ws = W_EXITCODE(0, sp->si_status & 0x7f);
		else if (sp->si_code == CLD_DUMPED)
			ws = W_EXITCODE(0, sp->si_status & 0x7f) | WCOREFLAG;
		else
			pid = 0; /* stopped, continued: not reaped */
	}
	reap_end(t, RHEA_FN_WAITID, &b_, pid, ws);
	return r;
}

/* ---- mmap and time ------------------------------------------------------- */

/* Code made at run time (a JIT's mmap or mprotect with PROT_EXEC): what
 * the unwinder knew of which pages hold code is out of date
 * (modules_pc_executable). */
#define EXEC_CHANGED(p) ((p) & PROT_EXEC ? modules_exec_changed() : (void)0)
PLAIN_HOOK_AFTER(void *, mmap, RHEA_C_MMAP, RHEA_FN_MMAP, (void *a, size_t n, int p, int f, int fd, off_t o),
		 (a, n, p, f, fd, o), EXEC_CHANGED(p))
PLAIN_HOOK_AFTER(int, mprotect, RHEA_C_MMAP, RHEA_FN_MPROTECT, (void *a, size_t n, int p), (a, n, p), EXEC_CHANGED(p))
PLAIN_HOOK(int, munmap, RHEA_C_MMAP, RHEA_FN_MUNMAP, (void *a, size_t n), (a, n))
PLAIN_HOOK(int, madvise, RHEA_C_MMAP, RHEA_FN_MADVISE, (void *a, size_t n, int adv), (a, n, adv))
EXPORT void *mmap64(void *a, size_t n, int p, int f, int fd, off_t o) __attribute__((alias("mmap")));

EXPORT int clock_gettime(clockid_t c, struct timespec *ts)
{
	if (unlikely(!real_clock_gettime)) {
		/* Needed by the agent itself before resolve(): go to the kernel. */
		if (!resolved && !resolving)
			resolve();
		if (!real_clock_gettime)
			return (int)syscall(SYS_clock_gettime, c, ts);
	}
	int r = real_clock_gettime(c, ts);
	if (likely(!rhea_g.on[RHEA_C_TIME]) || rhea_guard)
		return r;
	struct rhea_tstate *t = thread_self();
	if (t)
		tick(t, RHEA_FN_CLOCK_GETTIME);
	return r;
}

PLAIN_HOOK(int, gettimeofday, RHEA_C_TIME, RHEA_FN_GETTIMEOFDAY, (struct timeval *tv, void *tz), (tv, tz))

/* ---- threads, modules, processes ---------------------------------------- */

/* (sealed: created by a thread that installed a seccomp filter, which the
 * new thread has too: it is sealed before it runs a line, agent.c,
 * agent_seal_thread) */
struct start_arg {
	void *(*fn)(void *);
	void *arg;
	uint32_t parent;
	int sealed;
};

static void *thread_start(void *p)
{
	struct start_arg a = *(struct start_arg *)p;
	if (a.sealed)
		agent_seal_thread();
	rhea_guard++;
	real_free(p);
	rhea_guard--;
	struct rhea_tstate *t = rhea_g.active && !a.sealed ? thread_self() : NULL;
	if (t)
		sampler_unblock_self(); /* started with it blocked: never sampled */
	return a.fn(a.arg);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	if (unlikely(!resolved))
		resolve();
	int sealed = rhea_sealed;
	if (!sealed && (rhea_guard || !rhea_g.active))
		return real_pthread_create(th, attr, fn, arg);
	rhea_guard++;
	struct start_arg *a = real_malloc(sizeof(*a));
	rhea_guard--;
	if (!a)
		return sealed ? EAGAIN : real_pthread_create(th, attr, fn, arg);
	a->fn = fn;
	a->arg = arg;
	a->sealed = sealed;
	struct rhea_tstate *self = sealed ? NULL : thread_self();
	a->parent = self ? self->tid : 0;
	int r = real_pthread_create(th, attr, thread_start, a);
	if (r != 0) {
		rhea_guard++;
		real_free(a);
		rhea_guard--;
	}
	return r;
}

/* The calling thread took a name: into the recording now (errno kept). */
static void named_self(const char *name)
{
	if (rhea_guard || !rhea_g.active)
		return;
	int e = errno;
	struct rhea_tstate *t = thread_self();
	if (t) {
		rhea_guard++;
		thread_set_name(t, name);
		rhea_guard--;
	}
	errno = e;
}

/*
 * A seccomp filter (or strict mode) the program installs on itself:
 * through prctl(PR_SET_SECCOMP), as sshd's sandbox does, or through
 * syscall(SYS_seccomp), glibc having no wrapper: libseccomp's seccomp_load
 * (man-db's helpers, tor, qemu -sandbox).  The filter is run first on
 * every system call the agent makes (core/seccompbpf.c): one that lets
 * them all through or only makes some fail (a deny list returning EPERM)
 * changes nothing.  Else, before it is in force, the agent stops making
 * system calls where it will apply (agent.c): on this thread, or
 * everywhere for a filter synchronized to every thread (TSYNC), which
 * ends the recording.  A filter the kernel refuses unseals the thread.
 * libseccomp probes the kernel's flags with a NULL filter (EFAULT): no
 * filter, nothing to do.
 */
enum { SECCOMP_NONE, SECCOMP_THREAD, SECCOMP_PROCESS };

/* Would the filter at prog (a struct sock_fprog of the program's) let
 * every call of the agent's through, or only make it fail?  Read with
 * process_vm_readv (a bad pointer is the kernel's EFAULT to give, not a
 * fault of ours); one that cannot be read is taken as harmful. */
static int filter_harmless(long prog)
{
	struct sock_fprog fp;
	if (rhea_read_own((uint64_t)prog, &fp, sizeof(fp)) != 0 || fp.len == 0 || fp.len > BPF_MAXINSNS)
		return 0;
	size_t size = (size_t)fp.len * sizeof(struct sock_filter);
	void *mem = (void *)syscall(SYS_mmap, NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 0;
	int harmless = 0;
	if (rhea_read_own((uint64_t)(uintptr_t)fp.filter, mem, size) == 0) {
		uint32_t worst[SECCOMP_AGENT_CALLS_MAX];
		for (size_t c = 0; c < seccomp_agent_ncalls; c++)
			worst[c] = SECCOMP_RET_ALLOW;
		seccomp_bpf_fold(mem, fp.len, worst);
		harmless = seccomp_bpf_first_harmful(worst) < 0;
		if (harmless)
			__atomic_store_n(&agent_harmless_filter_seen, 1, __ATOMIC_RELAXED);
	}
	syscall(SYS_munmap, mem, size);
	return harmless;
}

static int seccomp_scope(long nr, long a1, long a2, long a3)
{
	if (rhea_sealed || agent_in_vfork_child())
		return SECCOMP_NONE; /* (no system call of ours here) */
	if (nr == SYS_prctl) {
		if (a1 != PR_SET_SECCOMP)
			return SECCOMP_NONE;
		if (a2 == SECCOMP_MODE_STRICT)
			return SECCOMP_THREAD;
		return a2 == SECCOMP_MODE_FILTER && a3 && !filter_harmless(a3) ? SECCOMP_THREAD : SECCOMP_NONE;
	}
	if (nr != SYS_seccomp)
		return SECCOMP_NONE;
	if (a1 == SECCOMP_SET_MODE_FILTER && (a2 & SECCOMP_FILTER_FLAG_TSYNC))
		sampler_fds_settle(); /* (its close_range comes first: sampler.c) */
	if (a1 == SECCOMP_SET_MODE_STRICT)
		return SECCOMP_THREAD;
	if (a1 != SECCOMP_SET_MODE_FILTER || !a3 || filter_harmless(a3))
		return SECCOMP_NONE;
	return (a2 & SECCOMP_FILTER_FLAG_TSYNC) ? SECCOMP_PROCESS : SECCOMP_THREAD;
}

/* Before the call: what the after needs to know (0: nothing done). */
static int seccomp_before(int scope)
{
	if (scope == SECCOMP_NONE)
		return SECCOMP_NONE;
	if (scope == SECCOMP_PROCESS)
		agent_seal_process();
	else
		agent_seal_thread(); /* agent.c says why */
	return scope;
}

static void seccomp_after(int done, long r)
{
	if (done == SECCOMP_THREAD && r != 0) {
		int e = errno;
		agent_unseal_thread();
		errno = e;
	}
}

/* prctl(PR_SET_NAME) names the calling thread too: the way a program's
 * main thread usually takes a name of its own.  Without this hook the name
 * reached the recording only when the thread ended (read back from /proc),
 * never for a process killed with SIGKILL. */
EXPORT int prctl(int option, ...)
{
	if (unlikely(!resolved))
		resolve();
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	int sealed = seccomp_before(seccomp_scope(SYS_prctl, option, (long)a2, (long)a3));
	int r = real_prctl(option, a2, a3, a4, a5);
	seccomp_after(sealed, r);
	if (r == 0 && option == PR_SET_NAME && a2)
		named_self((const char *)a2); /* thread_set_name takes 15 bytes at most */
	return r;
}

/*
 * futex(2) through syscall(): the locks of programs that do not use
 * pthreads' wait and wake with it directly - Rust's std (its Mutex,
 * Condvar, RwLock and thread parking), Abseil, QEMU, liburcu.  Without
 * this their threads' lock waits were invisible: a thread blocked on one
 * showed on the timeline as still running its last captured stack.  A
 * wait on a futex word (FUTEX_WAIT, _BITSET, the PI locks) is a lock wait
 * on that word, trigger "futex wait", registered in the wait table like a
 * mutex's; a wake (FUTEX_WAKE, _BITSET, _OP's two words, the requeues'
 * first, UNLOCK_PI) is a release of it that names its waiters' releaser,
 * looking before the call and, when it was held up, after it, as
 * RELEASE_HOOK does.  A futex word means what the program makes of it, so
 * a wait has no owner; every wake looks (most come with a waiter: Rust's
 * Mutex wakes only when contended).  Both part of the lock class.  The
 * agent's own futex calls never come here (sys.h), nor glibc's, which
 * make the system call themselves.
 */
static inline __attribute__((always_inline)) long futex_call(long a1, long a2, long a3, long a4, long a5,
							     long a6)
{
	switch ((int)a2 & FUTEX_CMD_MASK) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_WAIT_REQUEUE_PI: {
		struct rhea_tstate *t = enter(RHEA_C_LOCK);
		if (!t)
			break;
		return SYNC_WAIT(t, RHEA_FN_FUTEX_WAIT, (uintptr_t)a1, 0, 0,
				 rhea_syscall6(SYS_futex, a1, a2, a3, a4, a5, a6));
	}
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
	case FUTEX_WAKE_OP:
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
	case FUTEX_CMP_REQUEUE_PI:
	case FUTEX_UNLOCK_PI: {
		struct rhea_tstate *t = enter(RHEA_C_LOCK);
		if (!t)
			break;
		uint64_t o = (uint64_t)a1, o2 = ((int)a2 & FUTEX_CMD_MASK) == FUTEX_WAKE_OP ? (uint64_t)a5 : 0;
		uint32_t e0 = epoch_now();
		uint64_t prev = waits_releasing(t, o, 1);
		rhea_hot.timed += waits_release(t, o, CALLER, 0);
		if (o2)
			rhea_hot.timed += waits_release(t, o2, CALLER, 0);
		long r = rhea_syscall6(SYS_futex, a1, a2, a3, a4, a5, a6);
		int err = errno;
		look_after(t, o, e0, CALLER, 0);
		if (o2)
			look_after(t, o2, e0, CALLER, 0);
		waits_released(t, prev, 1);
		tick(t, RHEA_FN_FUTEX_WAKE);
		errno = err;
		return r;
	}
	}
	return rhea_syscall6(SYS_futex, a1, a2, a3, a4, a5, a6);
}

/* syscall() itself: for the filters it installs, and futex (above).  The
 * agent's own calls never come here (sys.h). */
EXPORT long syscall_hook(long nr, ...) __asm__("syscall");
long syscall_hook(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_futex) {
		if (unlikely(!resolved))
			resolve();
		return futex_call(a1, a2, a3, a4, a5, a6);
	}
	if (likely(nr != SYS_seccomp && nr != SYS_prctl))
		return rhea_syscall6(nr, a1, a2, a3, a4, a5, a6);
	int sealed = seccomp_before(seccomp_scope(nr, a1, a2, a3));
	long r = rhea_syscall6(nr, a1, a2, a3, a4, a5, a6);
	seccomp_after(sealed, r);
	return r;
}

EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	if (unlikely(!resolved))
		resolve();
	int r = real_pthread_setname_np(th, name);
	if (r == 0 && pthread_equal(th, pthread_self()))
		named_self(name);
	/* Other threads' names are read from /proc when they exit. */
	return r;
}

/*
 * The scan after a dlopen builds the unwind tables of the libraries new to
 * the cache, on this thread (modules.c): 0.4 s for LLVM's 100 MB, the first
 * time.  That time is rhea's: it is recorded as a wait of its own, trigger
 * "rhea: unwind tables", under dlopen's caller.  Without it the capture
 * before (in the library's constructors) held the thread for it - each
 * sample holds the thread until the next - and the report of ar loading
 * the LLVM plugin had 446 ms of self time in a std::map insert of LLVM's
 * static initializers.
 */
static void scan_after_dlopen(void)
{
	struct rhea_tstate *t = thread_self();
	uint64_t built0 = __atomic_load_n(&rhea_g.cfi_build_ns, __ATOMIC_RELAXED);
	struct block_info b = {.timed = 1};
	if (t)
		rhea_thread_cpu_ns(t->tid, &b.cpu_begin);
	b.begin = rhea_now();
	modules_scan();
	if (t && __atomic_load_n(&rhea_g.cfi_build_ns, __ATOMIC_RELAXED) != built0) {
		b.end = rhea_now();
		capture_block(t, RHEA_FN_UNWIND_TABLES, &b);
	}
}

EXPORT void *dlopen(const char *file, int flags)
{
	if (unlikely(!resolved))
		resolve();
	rhea_in_dlopen++; /* its constructors' captures catch up (modules.c) */
	void *h = real_dlopen(file, flags);
	rhea_in_dlopen--;
	if (h && rhea_g.active && !rhea_guard) {
		int err = errno;
		scan_after_dlopen();
		errno = err;
	}
	return h;
}

EXPORT int dlclose(void *h)
{
	if (unlikely(!resolved))
		resolve();
	int r = real_dlclose(h);
	if (rhea_g.active && !rhea_guard)
		modules_scan();
	return r;
}

/*
 * vfork: the child runs on its parent's thread's memory, TLS included,
 * until it execs or exits, and spawners run hooked calls there (Python's
 * subprocess: close, sigaction, close_range, execve; shells: open, dup2,
 * close).  Their hooks took the parent's thread state for the child's: a
 * capture there read the child's counters as the parent's, which then
 * went back (163 G page faults in a report of 300 subprocess.run calls on
 * a loaded machine), and a parent thread not yet registered was
 * registered under the child's tid for the rest of the run.  So vfork
 * raises the thread's recursion guard before the system call and the
 * parent lowers it after: every hook in the child calls straight through,
 * at no cost to any hook outside it.
 *
 * This cannot be C: the child returns first, and any frame of ours on the
 * stack they share would be gone when the parent returns through it.  As
 * glibc's own vfork does, the return address waits in a register (the
 * child has a copy of its own) and goes back on the stack after the call.
 * The hooks that act on the whole process (sigaction, exec, _exit) also
 * ask getpid (agent_in_vfork_child), and a thread's counts never go back
 * (capture.c, read_counters): a clone(CLONE_VM | CLONE_VFORK) made without
 * vfork gets past this one.
 */
_Static_assert(offsetof(struct rhea_hot, guard) == 0 && sizeof(rhea_hot.guard) == 4,
	       "vfork's addl and subl: the guard is rhea_hot's first 32 bits");

__attribute__((used, visibility("hidden"))) pid_t rhea_vfork_failed(long r)
{
	errno = (int)-r;
	return -1;
}

__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	movq rhea_hot@gottpoff(%rip), %rax\n"
	"	addl $1, %fs:(%rax)\n"   /* rhea_hot.guard: the child's hooks pass */
	"	popq %rdi\n"             /* the return address, off the shared stack */
	"	.cfi_adjust_cfa_offset -8\n"
	"	.cfi_register rip, rdi\n"
	"	movl $58, %eax\n"        /* SYS_vfork */
	"	syscall\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	.cfi_rel_offset rip, 0\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"                 /* the child: the guard stays up */
	"	movq rhea_hot@gottpoff(%rip), %rcx\n"
	"	subl $1, %fs:(%rcx)\n"   /* the parent, once the child is gone */
	"	cmpq $-4095, %rax\n"
	"	jae 2f\n"
	"1:	ret\n"
	"2:	movq %rax, %rdi\n"
	"	jmp rhea_vfork_failed\n"
	"	.cfi_endproc\n"
	".size vfork, .-vfork\n");

/* Changes of user or groups, and of the root directory: the recording is
 * created first (agent.c, agent_before_setid).  After a chroot its path
 * led nowhere: a forked daemon child that jails itself (sshd's privilege
 * separation, vsftpd) switched its agent off, "cannot create the
 * recording". */
#define SETID_HOOK(name, params, args)                                           \
	EXPORT int name params                                                   \
	{                                                                        \
		if (unlikely(!resolved))                                         \
			resolve();                                               \
		agent_before_setid();                                            \
		agent_share_caps();                                              \
		return real_##name args;                                         \
	}
SETID_HOOK(setuid, (uid_t u), (u))
SETID_HOOK(setgid, (gid_t g), (g))
SETID_HOOK(seteuid, (uid_t u), (u))
SETID_HOOK(setegid, (gid_t g), (g))
SETID_HOOK(setreuid, (uid_t r, uid_t e), (r, e))
SETID_HOOK(setregid, (gid_t r, gid_t e), (r, e))
SETID_HOOK(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
SETID_HOOK(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
SETID_HOOK(setgroups, (size_t n, const gid_t *list), (n, list))
SETID_HOOK(initgroups, (const char *user, gid_t g), (user, g))
EXPORT int chroot(const char *path)
{
	if (unlikely(!resolved))
		resolve();
	agent_before_setid(); /* (no change of ids: the threads' rights stay) */
	return real_chroot(path);
}

/*
 * A program the agent cannot be loaded into: one for another dynamic
 * loader than glibc's x86-64 one (musl's stops at the agent's glibc
 * symbols, "Error relocating", and the program never ran: exit 127), or a
 * 32-bit one (glibc's i386 loader skips it with an error line).  A traced
 * process that execs one passes an environment without librhea.so in
 * LD_PRELOAD: that program runs untraced, as it would without rhea.
 * Static programs ignore LD_PRELOAD anyway; scripts are left to their
 * interpreter.  Read with raw system calls: the hook may run in a vfork
 * child, on its parent's stack.
 */
static int foreign_elf(int fd)
{
	unsigned char h[64];
	if (syscall(SYS_pread64, fd, h, sizeof(h), 0) != (long)sizeof(h) || memcmp(h, ELFMAG, SELFMAG) != 0)
		return 0;
	if (h[EI_CLASS] != ELFCLASS64)
		return 1;
	Elf64_Ehdr eh;
	memcpy(&eh, h, sizeof(eh));
	if (eh.e_machine != EM_X86_64)
		return 1;
	for (unsigned i = 0; i < eh.e_phnum && i < 64; i++) {
		Elf64_Phdr ph;
		if (syscall(SYS_pread64, fd, &ph, sizeof(ph), (long)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    (long)sizeof(ph))
			return 0;
		if (ph.p_type != PT_INTERP)
			continue;
		char interp[256] = "";
		size_t n = ph.p_filesz < sizeof(interp) - 1 ? ph.p_filesz : sizeof(interp) - 1;
		if (syscall(SYS_pread64, fd, interp, n, (long)ph.p_offset) != (long)n)
			return 0;
		interp[n] = 0;
		const char *base = strrchr(interp, '/');
		return strncmp(base ? base + 1 : interp, "ld-linux-x86-64.so", 18) != 0;
	}
	return 0; /* static */
}

static int foreign_path(const char *path)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int r = foreign_elf(fd);
	syscall(SYS_close, fd);
	return r;
}

/* What execvp would run for file: the first executable in PATH. */
static int foreign_search(const char *file)
{
	if (strchr(file, '/'))
		return foreign_path(file);
	const char *path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	char cand[4096];
	size_t fl = strlen(file);
	for (const char *p = path;; p++) {
		const char *e = strchr(p, ':');
		size_t dl = e ? (size_t)(e - p) : strlen(p);
		if (dl + fl + 2 < sizeof(cand)) {
			memcpy(cand, dl ? p : ".", dl ? dl : 1);
			size_t at = dl ? dl : 1;
			cand[at] = '/';
			memcpy(cand + at + 1, file, fl + 1);
			if (syscall(SYS_faccessat, AT_FDCWD, cand, X_OK, 0) == 0)
				return foreign_path(cand);
		}
		if (!e)
			return 0;
		p = e;
	}
}

static size_t env_count(char *const envp[])
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n;
}

/* The elements of an LD_PRELOAD value (separated by colons or spaces, as
 * the loader takes them): the one at *p, its length in *n, *p moved past
 * it and its separators; NULL at the end. */
static const char *preload_next(const char **p, size_t *n)
{
	while (**p == ':' || **p == ' ')
		(*p)++;
	if (!**p)
		return NULL;
	const char *e = *p;
	*n = strcspn(e, ": ");
	*p = e + *n;
	return e;
}

/* Whether the element e (n bytes) names librhea.so. */
static int preload_is_agent(const char *e, size_t n)
{
	const char *slash = memrchr(e, '/', n);
	const char *base = slash ? slash + 1 : e;
	size_t bl = (size_t)(e + n - base);
	return bl == sizeof("librhea.so") - 1 && memcmp(base, "librhea.so", bl) == 0;
}

/* envp with librhea.so taken out of LD_PRELOAD (the variable gone when
 * nothing else is in it), in out (env_count + 1 pointers) and buf; envp
 * itself when it holds no librhea.so. */
static char *const *env_without_agent(char *const envp[], char **out, char *buf, size_t cap)
{
	size_t j = 0;
	int changed = 0;
	for (size_t i = 0; envp && envp[i]; i++) {
		const char *v = envp[i];
		if (strncmp(v, "LD_PRELOAD=", 11) != 0) {
			out[j++] = (char *)v;
			continue;
		}
		size_t len = 11, n;
		memcpy(buf, v, 11);
		for (const char *p = v + 11, *e; (e = preload_next(&p, &n)) != NULL;) {
			if (preload_is_agent(e, n))
				changed = 1;
			else if (len + n + 2 < cap) {
				if (len > 11)
					buf[len++] = ':';
				memcpy(buf + len, e, n);
				len += n;
			}
		}
		buf[len] = 0;
		if (len > 11)
			out[j++] = buf;
		else if (!changed)
			out[j++] = (char *)v;
	}
	out[j] = NULL;
	return changed ? out : envp;
}

/* envp with RHEA_SECCOMP_BASE raised to base (agent_exec_seccomp_base),
 * in out (env_count + 1 pointers) and buf; envp itself when it has no
 * lower one. */
static char *const *env_with_base(char *const envp[], char **out, char *buf, size_t cap, long base)
{
	static const char key[] = "RHEA_SECCOMP_BASE=";
	size_t j = 0;
	int changed = 0;
	for (size_t i = 0; envp && envp[i]; i++) {
		out[j++] = envp[i];
		if (strncmp(envp[i], key, sizeof(key) - 1) != 0 || strtol(envp[i] + sizeof(key) - 1, NULL, 10) >= base ||
		    cap < sizeof(key) + 24)
			continue;
		memcpy(buf, key, sizeof(key) - 1);
		u64_to_str((uint64_t)base, buf + sizeof(key) - 1);
		out[j - 1] = buf;
		changed = 1;
	}
	out[j] = NULL;
	return changed ? out : envp;
}

/*
 * An image exec'ed with an environment that lost the agent's (`env -i
 * prog`, a program that cleans its children's environment, or takes
 * librhea.so out of LD_PRELOAD) ran untraced, and `rhea record -- env -i
 * ./prog` recorded env's 400 us without a word.  Children are followed:
 * what it lacks of the RHEA_* settings the agent started with goes back
 * in (a setting the program gave a value of its own keeps it), and
 * librhea.so goes first in LD_PRELOAD, before what the program put there,
 * as rhea record does.  Not under rhea attach (the process's own
 * environment has none of them: an exec ends the attach) nor with
 * --no-follow.  Saved at the agent's start (agent.c), into static memory:
 * the hook may run in a vfork child, on its parent's stack.
 */
#define ENV_SAVED_MAX 64
static char env_saved_buf[8192];
static char *env_saved[ENV_SAVED_MAX];
static size_t env_nsaved;
static char agent_preload[1024]; /* LD_PRELOAD's element naming librhea.so */

/* The element of LD_PRELOAD's value v that names librhea.so (its length
 * in *n), or NULL. */
static const char *preload_agent(const char *v, size_t *n)
{
	for (const char *e; (e = preload_next(&v, n)) != NULL;)
		if (preload_is_agent(e, *n))
			return e;
	return NULL;
}

void hooks_env_save(void)
{
	extern char **environ;
	size_t used = 0;
	env_nsaved = 0;
	agent_preload[0] = 0;
	for (char **e = environ; e && *e; e++) {
		const char *elem;
		size_t n = strlen(*e), elen;
		if (strncmp(*e, "LD_PRELOAD=", 11) == 0 && (elem = preload_agent(*e + 11, &elen)) != NULL &&
		    elen < sizeof(agent_preload)) {
			memcpy(agent_preload, elem, elen);
			agent_preload[elen] = 0;
		}
		if (strncmp(*e, "RHEA_", 5) != 0 || !strchr(*e, '=') || env_nsaved == ENV_SAVED_MAX ||
		    used + n + 1 > sizeof(env_saved_buf))
			continue;
		memcpy(env_saved_buf + used, *e, n + 1);
		env_saved[env_nsaved++] = env_saved_buf + used;
		used += n + 1;
	}
}

static int env_has_key(char *const envp[], const char *kv)
{
	size_t k = (size_t)(strchr(kv, '=') - kv) + 1;
	for (size_t i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], kv, k) == 0)
			return 1;
	return 0;
}

/* envp with the agent's environment put back (above), in out (env_count
 * + ENV_SAVED_MAX + 2 pointers) and buf; envp itself when it lacks
 * nothing. */
static char *const *env_with_agent(char *const envp[], char **out, char *buf, size_t cap)
{
	if (rhea_attached || !rhea_g.cfg.follow || !agent_preload[0])
		return envp;
	const char *pre = NULL;
	for (size_t i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0)
			pre = envp[i] + 11;
	size_t unused;
	int has_out = env_has_key(envp, "RHEA_OUTPUT="), has_pre = pre && preload_agent(pre, &unused);
	size_t al = strlen(agent_preload), pl = pre ? strlen(pre) : 0;
	if ((has_out && has_pre) || 11 + al + 1 + pl + 1 > cap)
		return envp;
	size_t j = 0;
	for (size_t i = 0; envp && envp[i]; i++)
		if (has_pre || strncmp(envp[i], "LD_PRELOAD=", 11) != 0)
			out[j++] = envp[i];
	for (size_t i = 0; !has_out && i < env_nsaved; i++)
		if (!env_has_key(envp, env_saved[i]))
			out[j++] = env_saved[i];
	if (!has_pre) {
		memcpy(buf, "LD_PRELOAD=", 11);
		memcpy(buf + 11, agent_preload, al);
		size_t len = 11 + al;
		if (pl) {
			buf[len++] = ':';
			memcpy(buf + len, pre, pl);
			len += pl;
		}
		buf[len] = 0;
		out[j++] = buf;
	}
	out[j] = NULL;
	return out;
}

/* The environment an exec'ed image gets: without librhea.so for a
 * foreign one (foreign_elf), else with the agent's own put back (a child
 * is followed) and the seccomp filters this thread runs under, all judged
 * harmless, as its base (base >= 0).  bufs: the two arrays and buffers
 * of EXEC_ENV_BUFS. */
struct exec_bufs {
	char **full, **out;
	char *pbuf, *buf;
	size_t cap;
};
#define EXEC_ENV_BUFS(b, envp)                                                   \
	char *full_[env_count(envp) + ENV_SAVED_MAX + 2], *out_[env_count(envp) + ENV_SAVED_MAX + 2]; \
	char pbuf_[4096], buf_[4096];                                            \
	struct exec_bufs b = {full_, out_, pbuf_, buf_, sizeof(buf_)}

static char *const *exec_env(char *const envp[], struct exec_bufs *b, int foreign, long base)
{
	if (foreign)
		return env_without_agent(envp, b->out, b->buf, b->cap);
	char *const *e = env_with_agent(envp, b->full, b->pbuf, b->cap);
	return base >= 0 ? env_with_base(e, b->out, b->buf, b->cap, base) : e;
}

/* (the execl* and execv hooks call these, not the exported names: in a
 * library rhea attach loaded, those would bind to libc's, past the hooks) */
static int exec_path(const char *path, char *const argv[], char *const envp[])
{
	if (unlikely(!resolved))
		resolve();
	long base = agent_exec_seccomp_base();
	agent_before_exec();
	EXEC_ENV_BUFS(b, envp);
	return real_execve(path, argv, exec_env(envp, &b, foreign_path(path), base));
}

static int exec_search_env(const char *file, char *const argv[], char *const envp[])
{
	if (unlikely(!resolved))
		resolve();
	long base = agent_exec_seccomp_base();
	agent_before_exec();
	EXEC_ENV_BUFS(b, envp);
	return real_execvpe(file, argv, exec_env(envp, &b, foreign_search(file), base));
}

static int exec_search(const char *file, char *const argv[])
{
	extern char **environ;
	return exec_search_env(file, argv, environ);
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_path(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	extern char **environ;
	return exec_path(path, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_search_env(file, argv, envp);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_search(file, argv);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (unlikely(!resolved))
		resolve();
	long base = agent_exec_seccomp_base();
	agent_before_exec();
	EXEC_ENV_BUFS(b, envp);
	return real_fexecve(fd, argv, exec_env(envp, &b, foreign_elf(fd), base));
}

/* execl* build an argv on the stack and go through the hooks above. */
#define COLLECT_ARGS(first, last, argv)                                          \
	size_t argc_ = 1;                                                        \
	va_list ap_;                                                             \
	va_start(ap_, first);                                                    \
	while (va_arg(ap_, char *))                                              \
		argc_++;                                                         \
	va_end(ap_);                                                             \
	char *argv[argc_ + 1];                                                   \
	va_start(ap_, first);                                                    \
	argv[0] = (char *)first;                                                 \
	for (size_t i_ = 1; i_ <= argc_; i_++)                                   \
		argv[i_] = va_arg(ap_, char *);                                  \
	last = va_arg(ap_, char **);                                             \
	va_end(ap_);

EXPORT int execl(const char *path, const char *arg0, ...)
{
	char **unused;
	COLLECT_ARGS(arg0, unused, argv);
	(void)unused;
	extern char **environ;
	return exec_path(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg0, ...)
{
	char **unused;
	COLLECT_ARGS(arg0, unused, argv);
	(void)unused;
	return exec_search(file, argv);
}

EXPORT int execle(const char *path, const char *arg0, ...)
{
	char **envp;
	COLLECT_ARGS(arg0, envp, argv);
	return exec_path(path, argv, envp);
}

EXPORT void _exit(int status)
{
	if (unlikely(!resolved))
		resolve();
	agent_finish(RHEA_END_EXIT, status);
	real__exit(status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	if (unlikely(!resolved))
		resolve();
	agent_finish(RHEA_END_EXIT, status);
	real__Exit(status);
	__builtin_unreachable();
}

/* ---- signals: see agent.c (crash flush stays out of the program's way) --- */

int agent_sigaction_filter(int sig, const struct sigaction *act, struct sigaction *old, int *handled);

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (unlikely(!resolved))
		resolve();
	if (agent_in_vfork_child()) /* the child's handlers are its own */
		return real_sigaction(sig, act, old);
	int handled = 0;
	int r = sampler_filter_sigaction(sig, act, old, &handled);
	if (!handled)
		r = agent_sigaction_filter(sig, act, old, &handled);
	if (handled)
		return r;
	return sigwrap_sigaction(sig, act, old);
}

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = h;
	act.sa_flags = SA_RESTART; /* BSD semantics, as glibc's signal() */
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* Waits for signals: never on the sampler's (sampler_filter_set). */
EXPORT int sigwait(const sigset_t *set, int *sig)
{
	if (unlikely(!resolved))
		resolve();
	sigset_t copy;
	return real_sigwait(sampler_filter_set(set, &copy), sig);
}

EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	if (unlikely(!resolved))
		resolve();
	sigset_t copy;
	return real_sigwaitinfo(sampler_filter_set(set, &copy), info);
}

EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout)
{
	if (unlikely(!resolved))
		resolve();
	sigset_t copy;
	return real_sigtimedwait(sampler_filter_set(set, &copy), info, timeout);
}

EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	if (unlikely(!resolved))
		resolve();
	sigset_t copy;
	return real_signalfd(fd, sampler_filter_set(mask, &copy), flags);
}

/*
 * Signal masks: never the sampler's signal (sampler_filter_set).  A thread
 * that blocks every signal (xz -T's workers, a server's threads that leave
 * signals to one signal thread) still takes it: it was never sampled, and
 * xz -T2 compressing for 20 s of CPU on two threads gave its CPU profile
 * 13 samples, all of the main thread.  The agent's own masks go to the
 * real function (hooks_real_sigmask), as does a vfork child's.
 */
static inline const sigset_t *mask_filtered(int how, const sigset_t *set, sigset_t *copy)
{
	if (unlikely(!resolved))
		resolve();
	return how != SIG_UNBLOCK && !rhea_guard ? sampler_filter_set(set, copy) : set;
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;
	return real_pthread_sigmask(how, mask_filtered(how, set, &copy), old);
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t copy;
	return real_sigprocmask(how, mask_filtered(how, set, &copy), old);
}

/* For agent.c: the real functions it must not go through hooks for. */
int hooks_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (unlikely(!resolved))
		resolve();
	return real_pthread_sigmask(how, set, old);
}

int hooks_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (unlikely(!resolved))
		resolve();
	return real_sigaction(sig, act, old);
}

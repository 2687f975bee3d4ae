/*
 * hookfn.h - the functions the agent hooks, their ids (the `trigger` of a
 * sample) and their classes.  One X-macro list so that the agent, the file
 * format and the CLI can never disagree on a number.  Ids are part of the
 * file format: append only, never renumber.
 *
 * X(id-suffix, name, class, blocking)
 *   blocking: 1 when a call can wait; such calls are timed and recorded as
 *   BLOCK samples when they waited long enough.
 */
#ifndef RHEA_HOOKFN_H
#define RHEA_HOOKFN_H

enum rhea_class {
	RHEA_C_NONE = 0,
	RHEA_C_ALLOC = 1,
	RHEA_C_LOCK = 2,
	RHEA_C_IO = 3,
	RHEA_C_NET = 4,
	RHEA_C_WAIT = 5,
	RHEA_C_MMAP = 6,
	RHEA_C_TIME = 7,
	RHEA_C_SAMPLER = 8,
	RHEA_C_COUNT
};

#define RHEA_FN_LIST(X)                                            \
	X(NONE, "none", RHEA_C_NONE, 0)                            \
	X(SAMPLER, "sampler", RHEA_C_SAMPLER, 0)                   \
	X(MALLOC, "malloc", RHEA_C_ALLOC, 0)                       \
	X(CALLOC, "calloc", RHEA_C_ALLOC, 0)                       \
	X(REALLOC, "realloc", RHEA_C_ALLOC, 0)                     \
	X(FREE, "free", RHEA_C_ALLOC, 0)                           \
	X(POSIX_MEMALIGN, "posix_memalign", RHEA_C_ALLOC, 0)       \
	X(ALIGNED_ALLOC, "aligned_alloc", RHEA_C_ALLOC, 0)         \
	X(MEMALIGN, "memalign", RHEA_C_ALLOC, 0)                   \
	X(MUTEX_LOCK, "pthread_mutex_lock", RHEA_C_LOCK, 1)        \
	X(MUTEX_TRYLOCK, "pthread_mutex_trylock", RHEA_C_LOCK, 0)  \
	X(MUTEX_UNLOCK, "pthread_mutex_unlock", RHEA_C_LOCK, 0)    \
	X(RWLOCK_RDLOCK, "pthread_rwlock_rdlock", RHEA_C_LOCK, 1)  \
	X(RWLOCK_WRLOCK, "pthread_rwlock_wrlock", RHEA_C_LOCK, 1)  \
	X(RWLOCK_UNLOCK, "pthread_rwlock_unlock", RHEA_C_LOCK, 0)  \
	X(COND_WAIT, "pthread_cond_wait", RHEA_C_LOCK, 1)          \
	X(COND_TIMEDWAIT, "pthread_cond_timedwait", RHEA_C_LOCK, 1) \
	X(COND_SIGNAL, "pthread_cond_signal", RHEA_C_LOCK, 0)      \
	X(COND_BROADCAST, "pthread_cond_broadcast", RHEA_C_LOCK, 0) \
	X(SEM_WAIT, "sem_wait", RHEA_C_LOCK, 1)                    \
	X(SEM_TIMEDWAIT, "sem_timedwait", RHEA_C_LOCK, 1)          \
	X(SEM_POST, "sem_post", RHEA_C_LOCK, 0)                    \
	X(READ, "read", RHEA_C_IO, 1)                              \
	X(WRITE, "write", RHEA_C_IO, 1)                            \
	X(PREAD, "pread", RHEA_C_IO, 1)                            \
	X(PWRITE, "pwrite", RHEA_C_IO, 1)                          \
	X(READV, "readv", RHEA_C_IO, 1)                            \
	X(WRITEV, "writev", RHEA_C_IO, 1)                          \
	X(OPEN, "open", RHEA_C_IO, 1)                              \
	X(OPENAT, "openat", RHEA_C_IO, 1)                          \
	X(CLOSE, "close", RHEA_C_IO, 1)                            \
	X(FSYNC, "fsync", RHEA_C_IO, 1)                            \
	X(FDATASYNC, "fdatasync", RHEA_C_IO, 1)                    \
	X(RECV, "recv", RHEA_C_NET, 1)                             \
	X(RECVFROM, "recvfrom", RHEA_C_NET, 1)                     \
	X(RECVMSG, "recvmsg", RHEA_C_NET, 1)                       \
	X(SEND, "send", RHEA_C_NET, 1)                             \
	X(SENDTO, "sendto", RHEA_C_NET, 1)                         \
	X(SENDMSG, "sendmsg", RHEA_C_NET, 1)                       \
	X(ACCEPT, "accept", RHEA_C_NET, 1)                         \
	X(ACCEPT4, "accept4", RHEA_C_NET, 1)                       \
	X(CONNECT, "connect", RHEA_C_NET, 1)                       \
	X(POLL, "poll", RHEA_C_WAIT, 1)                            \
	X(PPOLL, "ppoll", RHEA_C_WAIT, 1)                          \
	X(SELECT, "select", RHEA_C_WAIT, 1)                        \
	X(PSELECT, "pselect", RHEA_C_WAIT, 1)                      \
	X(EPOLL_WAIT, "epoll_wait", RHEA_C_WAIT, 1)                \
	X(EPOLL_PWAIT, "epoll_pwait", RHEA_C_WAIT, 1)              \
	X(NANOSLEEP, "nanosleep", RHEA_C_WAIT, 1)                  \
	X(CLOCK_NANOSLEEP, "clock_nanosleep", RHEA_C_WAIT, 1)      \
	X(USLEEP, "usleep", RHEA_C_WAIT, 1)                        \
	X(SLEEP, "sleep", RHEA_C_WAIT, 1)                          \
	X(MMAP, "mmap", RHEA_C_MMAP, 0)                            \
	X(MUNMAP, "munmap", RHEA_C_MMAP, 0)                        \
	X(MPROTECT, "mprotect", RHEA_C_MMAP, 0)                    \
	X(MADVISE, "madvise", RHEA_C_MMAP, 0)                      \
	X(CLOCK_GETTIME, "clock_gettime", RHEA_C_TIME, 0)          \
	X(GETTIMEOFDAY, "gettimeofday", RHEA_C_TIME, 0)            \
	X(OPERATOR_NEW, "operator new", RHEA_C_ALLOC, 0)           \
	X(OPERATOR_DELETE, "operator delete", RHEA_C_ALLOC, 0)     \
	X(FORCED, "forced", RHEA_C_SAMPLER, 0)                     \
	X(PTHREAD_JOIN, "pthread_join", RHEA_C_WAIT, 1)            \
	X(WAITPID, "waitpid", RHEA_C_WAIT, 1)                      \
	X(WAIT, "wait", RHEA_C_WAIT, 1)                            \
	X(WAIT3, "wait3", RHEA_C_WAIT, 1)                          \
	X(WAIT4, "wait4", RHEA_C_WAIT, 1)                          \
	X(WAITID, "waitid", RHEA_C_WAIT, 1)                        \
	X(THREAD_END, "thread end", RHEA_C_NONE, 0)                \
	X(UNWIND_TABLES, "rhea: unwind tables", RHEA_C_NONE, 1)   \
	X(FUTEX_WAIT, "futex wait", RHEA_C_LOCK, 1)                \
	X(FUTEX_WAKE, "futex wake", RHEA_C_LOCK, 0)                \
	X(COND_CLOCKWAIT, "pthread_cond_clockwait", RHEA_C_LOCK, 1) \
	X(MUTEX_TIMEDLOCK, "pthread_mutex_timedlock", RHEA_C_LOCK, 1) \
	X(MUTEX_CLOCKLOCK, "pthread_mutex_clocklock", RHEA_C_LOCK, 1) \
	X(RWLOCK_TIMEDRDLOCK, "pthread_rwlock_timedrdlock", RHEA_C_LOCK, 1) \
	X(RWLOCK_TIMEDWRLOCK, "pthread_rwlock_timedwrlock", RHEA_C_LOCK, 1) \
	X(RWLOCK_CLOCKRDLOCK, "pthread_rwlock_clockrdlock", RHEA_C_LOCK, 1) \
	X(RWLOCK_CLOCKWRLOCK, "pthread_rwlock_clockwrlock", RHEA_C_LOCK, 1) \
	X(SEM_CLOCKWAIT, "sem_clockwait", RHEA_C_LOCK, 1)          \
	X(BARRIER_WAIT, "pthread_barrier_wait", RHEA_C_LOCK, 1)    \
	X(EPOLL_PWAIT2, "epoll_pwait2", RHEA_C_WAIT, 1)            \
	X(PTHREAD_TIMEDJOIN, "pthread_timedjoin_np", RHEA_C_WAIT, 1) \
	X(PTHREAD_CLOCKJOIN, "pthread_clockjoin_np", RHEA_C_WAIT, 1)

enum rhea_fn {
#define RHEA_FN_ENUM(id, name, cls, blk) RHEA_FN_##id,
	RHEA_FN_LIST(RHEA_FN_ENUM)
#undef RHEA_FN_ENUM
	RHEA_FN_COUNT
};

/* Name, class and blocking flag of a trigger id (NULL/0 when out of range). */
const char *rhea_fn_name(unsigned fn);
enum rhea_class rhea_fn_class(unsigned fn);
int rhea_fn_blocking(unsigned fn);
/* 1 for the event-loop waits (poll, select, epoll_wait...): the agent starts
 * a new message id when one returns. */
int rhea_fn_is_loop(unsigned fn);
/* "alloc", "lock", ... and the reverse (-1 when unknown). */
const char *rhea_class_name(enum rhea_class c);
int rhea_class_parse(const char *name);

#endif

/*
 * lateunlock: a releaser held up between the agent's look at the mutex and
 * the unlock itself, as a preemption there would.
 *
 * Built twice: as the program, and with -DSHIM as a library preloaded
 * after the agent (rhea record keeps the program's LD_PRELOAD after its
 * own), whose pthread_mutex_unlock is what the agent's hook calls as the
 * real one.  Armed by the program, the shim holds one unlock of m for
 * 30 ms before passing it on to glibc's.
 *
 * The main thread holds m and unlocks it, held up by the shim.  When the
 * agent's hook looks, nobody sleeps on m (glibc's lock word is 1).  Thread
 * W starts waiting in wait_late() 5 ms into the hold-up, sleeps on m, and
 * is woken by that unlock.
 * Before that, a first contended wait (on another mutex, in warm_up())
 * tells the agent that this program waits: until one has, a release does
 * not say in its thread's slot what it releases, and W, if it ran before
 * the look after the unlock, would find neither slot nor record (a race
 * only the program's very first wait can lose).
 * Ground truth: one pthread_mutex_lock wait in wait_late() of about 25 ms,
 * woken by the main thread (its tid is printed).
 *
 * `lateunlock cond`: the same with a condition variable that has a waiter
 * when the agent looks (thread E, in wait_early()), so that it looks
 * before the broadcast, held up 30 ms by the shim; W starts waiting in
 * wait_late() 5 ms into the hold-up, after that look, and the broadcast
 * wakes both.  Ground truth: two pthread_cond_wait waits, about 35 ms in
 * wait_early() and 25 ms in wait_late(), both woken by the main thread.
 *
 * `lateunlock rwlock`: the main thread holds a read-write lock to write and
 * unlocks it, held up 30 ms by the shim after the agent's look (which an
 * rwlock unlock always makes); W starts waiting to read in wait_late() 5 ms
 * into the hold-up.  Ground truth: one pthread_rwlock_rdlock wait of about
 * 25 ms, woken by the main thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef SHIM

static void *held;
static long held_ms;

void lateunlock_arm(void *object, long ms)
{
	held_ms = ms;
	__atomic_store_n(&held, object, __ATOMIC_RELEASE);
}

/* Hold up the release of object if armed for it. */
static void hold_up(void *object)
{
	void *want = object;
	if (__atomic_compare_exchange_n(&held, &want, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		/* (the system call itself: no hooked sleep reads a clock here) */
		struct timespec ts = {0, held_ms * 1000000L};
		syscall(SYS_nanosleep, &ts, NULL);
	}
}

int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	static int (*next)(pthread_rwlock_t *);
	if (!next)
		next = (int (*)(pthread_rwlock_t *))dlsym(RTLD_NEXT, "pthread_rwlock_unlock");
	hold_up(l);
	return next(l);
}

int pthread_cond_broadcast(pthread_cond_t *c)
{
	static int (*next)(pthread_cond_t *);
	if (!next)
		next = (int (*)(pthread_cond_t *))dlvsym(RTLD_NEXT, "pthread_cond_broadcast", "GLIBC_2.3.2");
	hold_up(c);
	return next(c);
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int (*next)(pthread_mutex_t *);
	if (!next)
		next = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	hold_up(m);
	return next(m);
}

#else

void lateunlock_arm(void *object, long ms) __attribute__((weak));

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int go;

static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rl = PTHREAD_RWLOCK_INITIALIZER;
static int on_cond, on_rwlock; /* `lateunlock cond`, `lateunlock rwlock` */

/* One wait, no predicate: nothing else wakes it in this program. */
__attribute__((noinline)) static void wait_cond(void)
{
	pthread_mutex_lock(&cm);
	pthread_cond_wait(&c, &cm);
	pthread_mutex_unlock(&cm);
}

__attribute__((noinline)) static void wait_late(void)
{
	if (on_cond) {
		wait_cond();
	} else if (on_rwlock) {
		pthread_rwlock_rdlock(&rl);
		pthread_rwlock_unlock(&rl);
	} else {
		pthread_mutex_lock(&m);
		pthread_mutex_unlock(&m);
	}
	__asm__ volatile("");
}

__attribute__((noinline)) static void *wait_early(void *arg)
{
	(void)arg;
	wait_cond();
	__asm__ volatile("");
	return NULL;
}

static void *thread_w(void *arg)
{
	(void)arg;
	while (!go)
		;
	struct timespec ts = {0, 5000000};
	syscall(SYS_nanosleep, &ts, NULL);
	wait_late();
	return NULL;
}

static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER;

static void *thread_first(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&first);
	pthread_mutex_unlock(&first);
	return NULL;
}

static void warm_up(void)
{
	pthread_t x;
	pthread_mutex_lock(&first);
	pthread_create(&x, NULL, thread_first, NULL);
	struct timespec ts = {0, 3000000};
	syscall(SYS_nanosleep, &ts, NULL);
	pthread_mutex_unlock(&first);
	pthread_join(x, NULL);
}

__attribute__((noinline)) static void release_late(void)
{
	go = 1;
	if (on_cond)
		pthread_cond_broadcast(&c);
	else if (on_rwlock)
		pthread_rwlock_unlock(&rl);
	else
		pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

/* Until thread E waits on c: glibc counts it in __wrefs. */
static void until_waiting(void)
{
	while ((__atomic_load_n(&c.__data.__wrefs, __ATOMIC_ACQUIRE) >> 3) == 0) {
		struct timespec ts = {0, 1000000};
		syscall(SYS_nanosleep, &ts, NULL);
	}
	pthread_mutex_lock(&cm); /* (E is asleep: it let go of cm) */
	pthread_mutex_unlock(&cm);
}

int main(int argc, char **argv)
{
	if (!lateunlock_arm) {
		fprintf(stderr, "lateunlock: the shim is not preloaded\n");
		return 2;
	}
	on_cond = argc > 1 && strcmp(argv[1], "cond") == 0;
	on_rwlock = argc > 1 && strcmp(argv[1], "rwlock") == 0;
	warm_up();
	pthread_t w, e;
	if (on_cond) {
		pthread_create(&e, NULL, wait_early, NULL);
		until_waiting();
		lateunlock_arm(&c, 30);
	} else if (on_rwlock) {
		pthread_rwlock_wrlock(&rl);
		lateunlock_arm(&rl, 30);
	} else {
		pthread_mutex_lock(&m);
		lateunlock_arm(&m, 30);
	}
	pthread_create(&w, NULL, thread_w, NULL);
	release_late();
	pthread_join(w, NULL);
	if (on_cond)
		pthread_join(e, NULL);
	printf("%ld\n", (long)syscall(SYS_gettid));
	return 0;
}

#endif

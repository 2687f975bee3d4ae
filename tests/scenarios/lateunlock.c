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
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef SHIM

static pthread_mutex_t *held_m;
static long held_ms;

void lateunlock_arm(pthread_mutex_t *m, long ms)
{
	held_ms = ms;
	__atomic_store_n(&held_m, m, __ATOMIC_RELEASE);
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	static int (*next)(pthread_mutex_t *);
	if (!next)
		next = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_unlock");
	pthread_mutex_t *want = m;
	if (__atomic_compare_exchange_n(&held_m, &want, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		/* (the system call itself: no hooked sleep reads a clock here) */
		struct timespec ts = {0, held_ms * 1000000L};
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return next(m);
}

#else

void lateunlock_arm(pthread_mutex_t *m, long ms) __attribute__((weak));

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int go;

__attribute__((noinline)) static void wait_late(void)
{
	pthread_mutex_lock(&m);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
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
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

int main(void)
{
	if (!lateunlock_arm) {
		fprintf(stderr, "lateunlock: the shim is not preloaded\n");
		return 2;
	}
	warm_up();
	pthread_t w;
	pthread_mutex_lock(&m);
	pthread_create(&w, NULL, thread_w, NULL);
	lateunlock_arm(&m, 30);
	release_late();
	pthread_join(w, NULL);
	printf("%ld\n", (long)syscall(SYS_gettid));
	return 0;
}

#endif

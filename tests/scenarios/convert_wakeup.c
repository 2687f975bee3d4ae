/*
 * convert_wakeup (a copy of lockhold for the convert suite): thread B holds a mutex for 50 ms inside hold_lock(); the main
 * thread waits for it in wait_for_lock().
 * Ground truth: one pthread_mutex_lock wait of 50 ms (within 5 ms) whose
 * stack contains wait_for_lock; owner recorded = B; woken by B, whose
 * releasing stack contains hold_lock.  Prints B's tid and how long the
 * main thread itself measured its wait (a loaded machine can delay main
 * after it saw the lock taken: then the measurement is disturbed).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int held;
static volatile long b_tid;

__attribute__((noinline)) static void hold_lock(void)
{
	pthread_mutex_lock(&m);
	held = 1;
	usleep(50000);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = syscall(SYS_gettid);
	hold_lock();
	return NULL;
}

__attribute__((noinline)) static void wait_for_lock(void)
{
	pthread_mutex_lock(&m);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

int main(void)
{
	pthread_t b;
	pthread_create(&b, NULL, thread_b, NULL);
	while (!held)
		;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wait_for_lock();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(b, NULL);
	printf("%ld %ld\n", b_tid,
	       (long)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec)));
	return 0;
}

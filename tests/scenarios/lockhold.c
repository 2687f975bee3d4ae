/*
 * lockhold: thread B holds a mutex for 50 ms inside hold_lock(); the main
 * thread waits for it in wait_for_lock().
 * Ground truth: one pthread_mutex_lock wait of 50 ms (within 5 ms) whose
 * stack contains wait_for_lock; owner recorded = B; woken by B, whose
 * releasing stack contains hold_lock.  Prints B's tid.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
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
	wait_for_lock();
	pthread_join(b, NULL);
	printf("%ld\n", b_tid);
	return 0;
}

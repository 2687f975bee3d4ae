/*
 * barrier: three threads meet at a pthread barrier.  The main thread (in
 * meet_main) and A (in meet_a) arrive at once; B arrives 40 ms later, from
 * arrive_late, and lets them go.
 *
 * Ground truth: two pthread_barrier_wait waits of 40 ms (within 5), on
 * `bar`, one in meet_main and one in meet_a, each named by B with
 * arrive_late on its stack.  Prints B's tid and the main thread's wait as
 * it measured it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t bar;
static volatile long b_tid;
static volatile int go, met_a, met_main; /* (told apart: GCC folds identical functions) */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void arrive_late(void)
{
	usleep(40000);
	pthread_barrier_wait(&bar);
	__asm__ volatile("");
}

__attribute__((noinline)) static void meet_a(void)
{
	pthread_barrier_wait(&bar);
	met_a = 1;
}

__attribute__((noinline)) static void meet_main(void)
{
	pthread_barrier_wait(&bar);
	met_main = 2;
}

static void *thread_a(void *arg)
{
	(void)arg;
	while (!go)
		usleep(100);
	meet_a();
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = syscall(SYS_gettid);
	while (!go)
		usleep(100);
	arrive_late();
	return NULL;
}

int main(void)
{
	pthread_barrier_init(&bar, NULL, 3);
	pthread_t a, b;
	pthread_create(&a, NULL, thread_a, NULL);
	pthread_create(&b, NULL, thread_b, NULL);
	while (!b_tid)
		usleep(100);
	uint64_t t0 = now_ns();
	go = 1;
	meet_main();
	uint64_t t1 = now_ns();
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("%ld %llu\n", b_tid, (unsigned long long)(t1 - t0));
	return 0;
}

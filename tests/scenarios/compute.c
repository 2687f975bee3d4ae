/*
 * compute: a thread spins 300 ms (wall) in pure_compute() without calling
 * any hooked function (the clock is read through the vDSO, and rhea's time
 * hooks are off by default).  With argv[1] = N (default 0), N more threads
 * sleep the whole time and 4 more compute, for the sampler's cadence test.
 * Ground truth: pure_compute's slices total 300 ms within 10%; sleeping
 * threads get no sampled captures (only forced ones, at most one per
 * second each).
 *
 * stdout: "ok", then "ticker N": the voluntary context switches of rhea's
 * ticker thread (its wake-ups) when the program ends, -1 without one.
 * Only the sampler captures this program's computation, and the sampler
 * does not need the epoch: the ticker must sleep through it instead of
 * waking every millisecond.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ticker_wakeups.h"

static volatile uint64_t sink;
static volatile int done;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void pure_compute(uint64_t ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	while (now_ns() < end)
		for (int i = 0; i < 2000; i++)
			sink += (uint64_t)i * 7;
	__asm__ volatile("");
}

static void *computer(void *arg)
{
	pure_compute((uint64_t)(uintptr_t)arg);
	return NULL;
}

__attribute__((noinline)) static void sleeper_wait(void)
{
	while (!done)
		usleep(200000);
	__asm__ volatile("");
}

static void *sleeper(void *arg)
{
	(void)arg;
	sleeper_wait();
	return NULL;
}

int main(int argc, char **argv)
{
	int nsleep = argc > 1 ? atoi(argv[1]) : 0;
	pthread_t s[256], c[4], t;
	if (nsleep > 256)
		nsleep = 256;
	for (int i = 0; i < nsleep; i++)
		pthread_create(&s[i], NULL, sleeper, NULL);
	int ncomp = nsleep ? 4 : 0;
	for (int i = 0; i < ncomp; i++)
		pthread_create(&c[i], NULL, computer, (void *)(uintptr_t)600);
	pthread_create(&t, NULL, computer, (void *)(uintptr_t)300);
	pthread_join(t, NULL);
	for (int i = 0; i < ncomp; i++)
		pthread_join(c[i], NULL);
	done = 1;
	for (int i = 0; i < nsleep; i++)
		pthread_join(s[i], NULL);
	printf("ok\nticker %ld\n", ticker_wakeups());
	return 0;
}

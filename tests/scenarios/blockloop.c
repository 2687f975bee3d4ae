/*
 * blockloop: a worker that takes its mutex between blocks of computation,
 * as xz -T2's workers do between blocks of compression.
 *
 *   blockloop [BLOCKS] [MS]
 *
 * worker_loop() runs BLOCKS (default 100) rounds of: lock, count, unlock,
 * then crunch() for MS (default 10) ms of its CPU; crunch calls nothing
 * hooked (it reads its CPU clock every 4096 steps, a system call rhea does
 * not hook).  Ground truth: crunch holds nearly all of the worker's CPU;
 * worker_loop's own is a few microseconds a round.  On the timeline each
 * capture at the lock holds the thread until the sampler's next capture in
 * crunch (every 10 ms of CPU by default), so worker_loop has about half
 * the CPU as its own there and crunch about half: the report must say so
 * (its note on self time).  Prints "blockloop N".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long rounds;
static volatile uint64_t sink;

__attribute__((noinline)) static void crunch(uint64_t ns)
{
	uint64_t x = 88172645463325252ull, end = thread_cpu_ns() + ns;
	for (long i = 1;; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 4095) == 0 && thread_cpu_ns() >= end)
			break;
	}
	sink = x;
}

static long blocks = 100, ms = 10;

__attribute__((noinline)) static void worker_loop(void)
{
	for (long b = 0; b < blocks; b++) {
		pthread_mutex_lock(&m);
		rounds++;
		pthread_mutex_unlock(&m);
		crunch((uint64_t)ms * 1000000u);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	worker_loop();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		blocks = atol(argv[1]);
	if (argc > 2)
		ms = atol(argv[2]);
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	printf("blockloop %ld\n", rounds);
	return 0;
}

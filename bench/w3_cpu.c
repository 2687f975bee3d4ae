/*
 * w3_cpu.c - workload W3, pure computation: THREADS threads (default 8)
 * each evaluate a recursive function a fixed number of times, calling no
 * hooked function at all between start and exit.  Only a sampler (rhea's
 * per-thread CPU timers, perf, gperftools) sees these threads; built
 * without frame pointers, so only a CFI unwinder gets full stacks.
 *
 *   w3_cpu [-t THREADS] [-n WORK]
 *
 * WORK (default 24) scales the number of recursive evaluations per thread
 * linearly.  The recursion has two functions calling each other through a
 * table at depths 20..40, so stacks are deep and varied.  Prints a checksum.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef uint64_t (*step_fn)(uint64_t x, int depth);
static const step_fn steps[2];

static __attribute__((noinline)) uint64_t mix(uint64_t x)
{
	/* a few dozen cycles of dependent arithmetic */
	for (int i = 0; i < 24; i++)
		x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull + (uint64_t)i;
	return x;
}

static __attribute__((noinline)) uint64_t step_a(uint64_t x, int depth)
{
	if (depth == 0)
		return mix(x);
	uint64_t l = steps[x & 1](x * 3 + 1, depth - 1);
	return l ^ mix(x + l);
}

static __attribute__((noinline)) uint64_t step_b(uint64_t x, int depth)
{
	if (depth == 0)
		return mix(~x);
	uint64_t l = steps[(x >> 1) & 1](x + 0x9e3779b97f4a7c15ull, depth - 1);
	return (l + x) * 5;
}

static const step_fn steps[2] = {step_a, step_b};

struct arg {
	long iters;
	uint64_t seed, out;
};

static void *run(void *p)
{
	struct arg *a = p;
	uint64_t x = a->seed;
	for (long i = 0; i < a->iters; i++)
		x += steps[x & 1](x, 20 + (int)(i % 21));
	a->out = x;
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 8, opt;
	long work = 24;
	while ((opt = getopt(argc, argv, "t:n:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'n':
			work = atol(optarg);
			break;
		default:
			fprintf(stderr, "usage: w3_cpu [-t THREADS] [-n WORK]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 256 || work < 1) {
		fprintf(stderr, "w3_cpu: bad arguments\n");
		return 2;
	}
	pthread_t th[256];
	struct arg args[256];
	for (int i = 0; i < nthreads; i++) {
		args[i].iters = work * 1000;
		args[i].seed = (uint64_t)i * 0x51ed27ull + 1;
		pthread_create(&th[i], NULL, run, &args[i]);
	}
	uint64_t sum = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		sum ^= args[i].out;
	}
	printf("w3_cpu: threads=%d checksum=%llu\n", nthreads, (unsigned long long)sum);
	return 0;
}

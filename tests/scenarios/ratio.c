/*
 * ratio - relative time of two CPU-bound functions.
 *
 * Ground truth: work_a() and work_b() run the same loop body (a xorshift
 * step, plus a malloc/free of a small block every 256 iterations so that
 * the agent's allocation hooks capture stacks while they run); work_a runs
 * exactly twice as many iterations as work_b.  Both are noinline and do
 * something after their last call, so neither is inlined into main nor
 * reduced to a tail call that would hide it from the stack.  Total runtime
 * is about 0.6-1 s on a current x86-64 core.
 *
 * Expected in the recording: inclusive_ns(work_a) / inclusive_ns(work_b)
 * within 15% of 2.0.  Prints "ratio A B CHECKSUM", A and B being the wall
 * time of each call by the program's own monotonic clock: on a machine
 * busy enough to run the same work at different speeds, A/B drifts from
 * 2.0 and the test knows that run measured the machine, not rhea.
 * Exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERS_B 150000000L
#define ITERS_A (2 * ITERS_B)

volatile uint64_t sink;

/* Same body for both functions; a macro so that each function owns its
 * loop (no shared helper frame between them and the allocator). */
#define WORK_LOOP(iters)                                                        \
	do {                                                                    \
		uint64_t x = sink | 1;                                          \
		for (long i = 0; i < (iters); i++) {                            \
			x ^= x << 13;                                           \
			x ^= x >> 7;                                            \
			x ^= x << 17;                                           \
			if ((i & 255) == 0) {                                   \
				void *p = malloc(16 + (x & 63));                \
				__asm__ volatile("" : : "r"(p) : "memory");     \
				free(p);                                        \
			}                                                       \
		}                                                               \
		sink += x;                                                      \
	} while (0)

__attribute__((noinline)) void work_a(void)
{
	WORK_LOOP(ITERS_A);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void work_b(void)
{
	WORK_LOOP(ITERS_B);
	__asm__ volatile("" ::: "memory");
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int main(void)
{
	long long t0 = now_ns();
	work_a();
	long long t1 = now_ns();
	sink++;
	work_b();
	long long t2 = now_ns();
	sink++;
	printf("ratio %lld %lld %llu\n", t1 - t0, t2 - t1, (unsigned long long)(sink & 0xffff));
	return 0;
}

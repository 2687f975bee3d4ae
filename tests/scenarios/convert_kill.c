/*
 * convert_kill - killed without warning, for `rhea convert` (tests/convert/):
 * a recording cut short still converts.
 *
 * Ground truth: busy_before_kill() computes for 250 ms, calling malloc/free
 * every 256 iterations, then the process sends itself SIGKILL (status 137
 * through rhea record).  The recording has no end marker; `rhea convert`
 * must write what it holds (busy_before_kill among the slices) and say so
 * in one warning line.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void busy_before_kill(void)
{
	uint64_t t0 = now_ns(), x = sink | 1;
	for (long i = 0; now_ns() < t0 + 250000000u; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 255) == 0) {
			void *p = malloc(16 + (x & 63));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
		}
	}
	sink = x;
}

int main(void)
{
	busy_before_kill();
	kill(getpid(), SIGKILL);
	return 0;
}

/*
 * convert_kill - killed without warning, for `rhea convert` (tests/convert/):
 * a recording cut short still converts.
 *
 * Ground truth: busy_before_kill() computes for 250 ms, calling malloc/free
 * every 256 iterations, then the process sends itself SIGKILL (status 137
 * through rhea record).  The agent writes no end marker; rhea record
 * recovers what it had not written from its memory and ends the recording:
 * `rhea convert` converts it as a whole one (busy_before_kill nearly all of
 * its 250 ms), without a warning.
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

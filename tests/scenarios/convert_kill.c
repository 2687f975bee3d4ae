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

#include "spin.h"

static volatile uint64_t sink;

__attribute__((noinline)) void busy_before_kill(void)
{
	uint64_t t0 = now_ns(), x = sink | 1;
	for (long i = 0; now_ns() < t0 + 250000000u; i++)
		spin_step(&x, i);
	sink = x;
}

int main(void)
{
	busy_before_kill();
	kill(getpid(), SIGKILL);
	return 0;
}

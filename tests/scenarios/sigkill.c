/*
 * sigkill - killed without warning.
 *
 * Ground truth: work_before_kill() computes for 300 ms (by the monotonic
 * clock), calling malloc/free on a small block every 256 iterations so that
 * the agent captures it, then the process sends itself SIGKILL, which no
 * handler can catch (status 128 + 9 = 137 through rhea record).
 *
 * The main thread first sleeps 2 ms (a hooked call: the agent registers it
 * under the program's name), then names itself "killme" with
 * prctl(PR_SET_NAME), the way programs usually name their main thread.
 *
 * Expected: the recording is readable but cut short (no end marker); since
 * the agent's writer flushes every 100 ms, work_before_kill appears with at
 * least 100 ms of inclusive time (300 ms of work minus at most ~100 ms
 * unflushed, minus 100 ms of allowance for a slow writer on a busy machine).
 */
#include <signal.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void work_before_kill(void)
{
	uint64_t t0 = now_ns(), x = sink | 1;
	for (long i = 0;; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 255) == 0) {
			void *p = malloc(16 + (x & 63));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
			if (now_ns() - t0 > 300000000u)
				break;
		}
	}
	sink = x;
}

int main(void)
{
	usleep(2000); /* a hooked call first: the agent knows the thread by then */
	prctl(PR_SET_NAME, "killme");
	work_before_kill();
	fflush(stdout);
	kill(getpid(), SIGKILL);
	puts("not reached");
	return 0;
}

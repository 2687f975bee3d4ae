/*
 * attachee.c - the attach benchmark's program: one thread, an event loop's
 * rhythm, and how long it ever stood still.
 *
 *   attachee SECONDS
 *
 * The main thread (the only one: `rhea attach` loads the agent through it)
 * runs for SECONDS of wall time a loop of a malloc/free of 64 B and a
 * nanosleep of 200 us, and prints the longest time between two of its
 * iterations ("maxgap_us N") and how many took over 5 ms ("slow N").  Bare,
 * the longest is the sleep's lateness (a millisecond or two on a busy VM);
 * under `rhea attach -d 1s` made meanwhile (bench/run.sh, part "attach"),
 * it is the time the attach stopped the thread for: the ptrace stop, the
 * agent's load and start run on it, and the detach.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 4;
	long long start = now_us(), end = start + (long long)(secs * 1e6), last = start, maxgap = 0, slow = 0;
	volatile char *keep;
	while (last < end) {
		keep = malloc(64);
		keep[0] = 1;
		free((void *)keep);
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
		long long t = now_us();
		if (t - last > maxgap)
			maxgap = t - last;
		slow += t - last > 5000;
		last = t;
	}
	printf("maxgap_us %lld slow %lld\n", maxgap, slow);
	return 0;
}

/*
 * idlewake: a quiet spell, then a busy one.  The main thread sleeps 300 ms
 * (long enough for rhea's ticker to go to sleep: nothing is captured), then
 * allocates and frees in a loop for 200 ms of wall time, then sleeps
 * 300 ms again and repeats the busy loop once more.
 * Ground truth: exits 0, prints the number of loop iterations.  Under rhea
 * each busy spell must be captured at about the interval (the first capture
 * wakes the ticker), not once per second; both sleeps are recorded waits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static __attribute__((noinline, noclone)) unsigned long busy(double secs)
{
	unsigned long n = 0;
	double end = now() + secs;
	while (now() < end) {
		for (int i = 0; i < 1000; i++, n++) {
			void *p = malloc(64 + (n & 255));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
		}
	}
	return n;
}

int main(void)
{
	struct timespec quiet = {0, 300000000};
	unsigned long n = 0;
	for (int round = 0; round < 2; round++) {
		nanosleep(&quiet, NULL);
		n += busy(0.2);
	}
	printf("%lu\n", n);
	return 0;
}

/*
 * coast: a mostly idle server, then a thread whose hooks read no clock.
 *
 * Phase 1 (400 ms): the main thread serves a request every 5 ms: it sleeps
 * to the request's time (clock_nanosleep, absolute), then allocates and
 * frees 20 blocks and writes a byte to /dev/null.  Under rhea every one of
 * its captures follows a clock read (the sleep's end), so the ticker's
 * ticks are not needed: it must coast instead of waking every millisecond.
 *
 * Phase 2 (200 ms): the requests go on, and a second thread allocates and
 * frees in a loop for 200 ms of wall time (it reads the time through the
 * vDSO, which rhea does not hook by default): its hooks read no clock, and
 * only a moving epoch lets them capture at the interval (1 ms).  They read
 * the TSC once in 64 calls to move it themselves, so the ticker may go on
 * coasting; without a TSC grid (RHEA_NO_TSC=1) the ticker must notice (a
 * probe) and tick again.
 *
 * stdout: "requests N", "wakes1 W" (the ticker's voluntary context switches
 * during phase 1, -1 without a ticker), "loops L" (phase 2's iterations).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ticker_wakeups.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void serve(int fd)
{
	void *p[20];
	for (int i = 0; i < 20; i++)
		p[i] = malloc(32 + 16 * i);
	for (int i = 0; i < 20; i++)
		free(p[i]);
	if (write(fd, "x", 1) != 1)
		abort();
	__asm__ volatile("");
}

static unsigned long loops;

__attribute__((noinline)) static void *alloc_loop(void *arg)
{
	(void)arg;
	uint64_t end = now_ns() + 200000000ull;
	while (now_ns() < end)
		for (int i = 0; i < 100; i++, loops++) {
			void *p = malloc(64 + (loops & 127));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
		}
	return NULL;
}

int main(void)
{
	int fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		return 1;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	long requests = 0, w0 = -1, w1 = -1;
	pthread_t t;
	for (int i = 0; i < 120; i++) {
		next.tv_nsec += 5000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		serve(fd);
		requests++;
		if (i == 20) /* 100 ms in: the ticker has had time to settle */
			w0 = ticker_wakeups();
		if (i == 80) { /* 400 ms in */
			w1 = ticker_wakeups();
			if (pthread_create(&t, NULL, alloc_loop, NULL) != 0)
				return 1;
		}
	}
	pthread_join(t, NULL);
	printf("requests %ld\nwakes1 %ld\nloops %lu\n", requests, w0 < 0 || w1 < 0 ? -1 : w1 - w0, loops);
	return 0;
}

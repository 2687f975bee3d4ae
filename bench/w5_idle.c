/*
 * w5_idle.c - workload W5, a mostly idle server: one short request every
 * PERIOD microseconds, asleep in between.
 *
 *   w5_idle [-p PERIOD_US] [-s SECONDS] [-w WORK]
 *
 * The main thread sleeps until the next request time (absolute deadlines,
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), PERIOD default 10000 us)
 * and then handles one request: 20 malloc/free of 16 B .. 8 KB from a few
 * call sites (parse, build the reply), a little computation (WORK rounds of
 * dependent arithmetic, default 12000: about 20 us here) and one write() of a
 * few bytes to /dev/null.  It runs for SECONDS (default 3; fractions allowed)
 * of wall time, so the program itself uses well under 1 % of a CPU.  A second
 * thread blocks in read() on a pipe that gets no data until the end (a
 * listener, a signal thread: real servers are multi-threaded); closing the
 * pipe's write end wakes it and it exits before main returns.
 *
 * What it measures: what a tool costs a process that mostly sleeps.  Ratios
 * are of little use here (a tiny bare CPU time makes any fixed cost a big
 * factor); bench/run.sh reports the tool's extra CPU per second of run
 * instead.  A tool thread waking on a fixed period (rhea's ticker used to
 * wake every 1 ms, 10-20 us of CPU a wake on a VM) shows up there as several
 * ms a second.
 *
 * A wake-up more than a period late is not caught up in a burst: the
 * schedule restarts from then.  Prints the requests handled, the late
 * ones (> 1 ms) and a checksum so that nothing is optimised away.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NALLOC 20

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* 16 B .. 8 KB, log-uniform */
static size_t pick_size(void)
{
	uint64_t r = next_rand();
	unsigned shift = 4 + (unsigned)(r % 10);
	size_t base = (size_t)1 << shift;
	return base + (size_t)((r >> 8) & (base - 1)) / 2;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static __attribute__((noinline)) void *parse_alloc(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, (int)(n & 0x7f), n < 64 ? n : 64);
	return p;
}

static __attribute__((noinline)) void *reply_alloc(size_t n)
{
	char *p = malloc(n);
	if (p)
		p[n - 1] = (char)n;
	return p;
}

static __attribute__((noinline)) uint64_t compute(uint64_t x, long work)
{
	for (long i = 0; i < work; i++)
		x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull + (uint64_t)i;
	return x;
}

/* One request: allocations, computation, one small write. */
static __attribute__((noinline)) uint64_t handle_request(int out, long work, uint64_t seq)
{
	void *blk[NALLOC];
	uint64_t sum = seq;
	for (int i = 0; i < NALLOC; i++) {
		size_t n = pick_size();
		blk[i] = i % 3 == 2 ? reply_alloc(n) : parse_alloc(n);
		sum += (uint64_t)(blk[i] != NULL) * n;
		if (i % 4 == 3) { /* free some early, not all in reverse order */
			free(blk[i - 2]);
			blk[i - 2] = NULL;
		}
	}
	sum = compute(sum, work);
	for (int i = 0; i < NALLOC; i++)
		free(blk[(i * 7) % NALLOC]); /* 7 is prime to 20: each once */
	char msg[32];
	int len = snprintf(msg, sizeof(msg), "ok %llu\n", (unsigned long long)(sum & 0xffff));
	if (write(out, msg, (size_t)len) != len)
		sum ^= 1;
	return sum;
}

static void *idle_main(void *arg)
{
	int fd = *(int *)arg;
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) > 0) /* no data until the end: EOF */
		;
	return NULL;
}

int main(int argc, char **argv)
{
	long period_us = 10000, work = 12000;
	double seconds = 3;
	int opt;
	while ((opt = getopt(argc, argv, "p:s:w:")) != -1) {
		switch (opt) {
		case 'p':
			period_us = atol(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'w':
			work = atol(optarg);
			break;
		default:
			fprintf(stderr, "usage: w5_idle [-p PERIOD_US] [-s SECONDS] [-w WORK]\n");
			return 2;
		}
	}
	if (period_us < 1 || period_us > 10000000 || !(seconds > 0 && seconds < 86400) || work < 0) {
		fprintf(stderr, "w5_idle: bad arguments\n");
		return 2;
	}
	int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int pfd[2];
	if (out < 0 || pipe2(pfd, O_CLOEXEC) != 0) {
		perror("w5_idle");
		return 1;
	}
	pthread_t idle;
	if (pthread_create(&idle, NULL, idle_main, &pfd[0]) != 0) {
		fprintf(stderr, "w5_idle: pthread_create failed\n");
		return 1;
	}

	const uint64_t period = (uint64_t)period_us * 1000;
	struct timespec now, next;
	clock_gettime(CLOCK_MONOTONIC, &now);
	const uint64_t end = ts_ns(&now) + (uint64_t)(seconds * 1e9);
	uint64_t deadline = ts_ns(&now), requests = 0, late = 0, sum = 0;
	for (;;) {
		deadline += period;
		if (deadline >= end)
			break;
		next.tv_sec = (time_t)(deadline / 1000000000ull);
		next.tv_nsec = (long)(deadline % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			; /* a profiler's signal: sleep on */
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t t = ts_ns(&now);
		if (t > deadline + 1000000) {
			late++;
			if (t > deadline + period)
				deadline = t; /* no catch-up burst */
		}
		sum += handle_request(out, work, requests++);
	}
	/* sleep out the rest of the run, so its length is SECONDS */
	next.tv_sec = (time_t)(end / 1000000000ull);
	next.tv_nsec = (long)(end % 1000000000ull);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
		;

	close(pfd[1]); /* EOF for the idle thread */
	pthread_join(idle, NULL);
	close(pfd[0]);
	close(out);
	printf("w5_idle: period=%ldus requests=%llu late=%llu checksum=%llu\n", period_us,
	       (unsigned long long)requests, (unsigned long long)late, (unsigned long long)sum);
	return 0;
}

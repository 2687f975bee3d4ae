/*
 * stalls - an event loop with three iterations that run too long, for
 * `rhea report --stalls` (analysis/stalls.c).
 *
 *   stalls          three stalls, then the loop ends and the program exits 0
 *   stalls fatal    one iteration that never ends: the process kills itself
 *                   (SIGKILL) 300 ms into it
 *
 * The main thread ("loop") polls a pipe and handles one command byte per
 * poll() return.  A feeder thread ("feeder") writes the commands, 20 ms
 * apart (and after a stall is over), so that every poll() blocks long
 * enough to be recorded: the iterations' bounds are then exact:
 *
 *   'a' x 10   quick(): about 50 us of computation;
 *   'C'        stall_compute(): computes for 120 ms, allocating a small
 *              block every few microseconds (the agent captures it there);
 *   'a' x 3
 *   'S'        stall_sleep(): nanosleep of 150 ms;
 *   'a' x 3
 *   'L'        stall_lock(): locks a mutex that the feeder took before it
 *              wrote the 'L' and holds for 130 ms (in feeder_hold(), asleep);
 *   'a' x 3, 'Q' (the loop ends).
 *
 * Ground truth (threshold 50 ms): exactly three stalls, all on "loop", in
 * that order; each at least as long as its handler (the program prints each
 * handler's own measure: "C <ns>", "S <ns>", "L <ns>") and at most a few ms
 * longer (the poll() return, the read); where their time went:
 * stall_compute, the nanosleep wait under stall_sleep, the mutex wait under
 * stall_lock; during the lock stall the feeder was in feeder_hold.  No quick
 * iteration is a stall.
 *
 * "fatal": 'a' x 3, then 'F': stall_forever() computes (allocating as
 * above) for 300 ms and sends the process SIGKILL: one stall, marked fatal,
 * at least 250 ms long (what the writer flushed before the kill).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;
static int fds[2];
static int fatal_mode;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
}

/* Computes for ns nanoseconds, allocating on the way (inlined: the
 * allocations' caller is the stall function itself). */
static inline __attribute__((always_inline)) void compute(uint64_t ns)
{
	uint64_t t0 = now_ns(), x = sink | 1;
	for (long i = 0;; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if ((i & 63) == 0) {
			void *p = malloc(32 + (x & 31));
			__asm__ volatile("" : : "r"(p) : "memory");
			free(p);
			if (now_ns() - t0 >= ns)
				break;
		}
	}
	sink = x;
}

NOINLINE void quick(void)
{
	compute(50000);
}

NOINLINE void stall_compute(void)
{
	compute(120000000);
}

NOINLINE void stall_sleep(void)
{
	sleep_ms(150);
}

NOINLINE void stall_lock(void)
{
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
}

NOINLINE void stall_forever(void)
{
	compute(300000000);
	fflush(stdout);
	kill(getpid(), SIGKILL);
}

static void put(char c)
{
	if (write(fds[1], &c, 1) != 1)
		abort();
}

NOINLINE void feeder_hold(void)
{
	sleep_ms(130);
}

static void *feeder(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "feeder");
	const char *script = fatal_mode ? "aaaF" : "aaaaaaaaaaCaaaSaaaLaaaQ";
	for (const char *p = script; *p; p++) {
		sleep_ms(20);
		if (*p == 'L') {
			pthread_mutex_lock(&held);
			put('L');
			feeder_hold();
			pthread_mutex_unlock(&held);
			sleep_ms(30);
			continue;
		}
		put(*p);
		if (*p == 'C' || *p == 'S')
			sleep_ms(180); /* the stall is over before the next command */
	}
	return NULL;
}

NOINLINE static int handle(char c)
{
	uint64_t t0 = now_ns();
	switch (c) {
	case 'a': quick(); return 1;
	case 'C': stall_compute(); break;
	case 'S': stall_sleep(); break;
	case 'L': stall_lock(); break;
	case 'F': stall_forever(); break;
	case 'Q': return 0;
	}
	printf("%c %llu\n", c, (unsigned long long)(now_ns() - t0));
	return 1;
}

NOINLINE static void event_loop(void)
{
	struct pollfd pf = {fds[0], POLLIN, 0};
	for (;;) {
		if (poll(&pf, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			abort();
		}
		char c;
		if (read(fds[0], &c, 1) != 1)
			abort();
		if (!handle(c))
			return;
	}
}

int main(int argc, char **argv)
{
	fatal_mode = argc > 1 && strcmp(argv[1], "fatal") == 0;
	prctl(PR_SET_NAME, "loop");
	if (pipe(fds) != 0)
		return 1;
	pthread_t th;
	if (pthread_create(&th, NULL, feeder, NULL) != 0)
		return 1;
	event_loop();
	pthread_join(th, NULL);
	puts("stalls done");
	return 0;
}

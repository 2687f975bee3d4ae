/*
 * convert_loop - an event loop whose handler runs three times with the same
 * stack, for `rhea convert` (tests/convert/): the trace must show three
 * handle_msg slices, not one long one.
 *
 * The main thread ("loop") polls a pipe; per byte read it calls
 * handle_msg(), which first waits 3 ms for the request's "data" (a
 * nanosleep: a blocking sample, taken at the call with the thread's
 * counters, opens the handler's slice at a known time), then computes for
 * 20 ms, allocating 200 blocks of 48 bytes on the way.  The bytes are read
 * with a raw read system call, which rhea does not hook, so between two
 * messages the only hooked call is poll().
 *
 * A feeder thread writes "AB" at once: the second poll() returns at once,
 * and the two handlers' samples have identical stacks; only the message id
 * (incremented when the thread comes back from poll) can tell the two
 * executions apart.  Once the loop has handled both, the feeder waits
 * 40 ms and writes "C": that poll() blocks about 40 ms (a wait slice "poll"
 * under event_loop), then the third handler runs.  20 ms after it, "Q"
 * ends the loop.
 *
 * Ground truth: 3 slices named handle_msg on thread "loop", each about
 * 23 ms long (the program prints each handler's measured duration in ns),
 * each with AllocatedObjects = 200 exactly (the next handler's nanosleep,
 * or the poll() that follows, closes it after its last allocation), with
 * three different MessageIds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;
static int fds[2];
static int handled; /* messages handled so far (atomic) */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

NOINLINE void handle_msg(char c)
{
	struct timespec req = {0, 3 * 1000000L}, rem;
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
	uint64_t t0 = now_ns(), x = sink | (unsigned char)c;
	for (int i = 0; i < 200; i++) {
		void *p = malloc(48);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		while (now_ns() < t0 + (uint64_t)(i + 1) * 100000u)
			for (int k = 0; k < 200; k++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
			}
	}
	sink = x;
}

NOINLINE void event_loop(void)
{
	uint64_t took[8];
	int n = 0;
	for (;;) {
		struct pollfd p = {fds[0], POLLIN, 0};
		if (poll(&p, 1, 5000) <= 0)
			break;
		char c;
		if (syscall(SYS_read, fds[0], &c, 1) != 1 || c == 'Q')
			break;
		uint64_t t = now_ns();
		handle_msg(c);
		__atomic_add_fetch(&handled, 1, __ATOMIC_RELEASE);
		if (n < 8)
			took[n++] = now_ns() - t;
	}
	for (int i = 0; i < n; i++)
		printf("handle_msg %llu\n", (unsigned long long)took[i]);
}

static void sleep_ms(long ms)
{
	struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
}

static void wait_handled(int n)
{
	while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) < n)
		sleep_ms(1);
}

static void *feeder(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "feeder");
	if (write(fds[1], "AB", 2) != 2)
		return NULL;
	/* The loop is back in poll() after the second handler: make it wait. */
	wait_handled(2);
	sleep_ms(40);
	if (write(fds[1], "C", 1) != 1)
		return NULL;
	wait_handled(3);
	sleep_ms(20);
	if (write(fds[1], "Q", 1) != 1)
		return NULL;
	return NULL;
}

int main(void)
{
	pthread_setname_np(pthread_self(), "loop");
	if (pipe(fds) != 0)
		return 1;
	pthread_t th;
	if (pthread_create(&th, NULL, feeder, NULL) != 0)
		return 1;
	event_loop();
	pthread_join(th, NULL);
	return 0;
}

/*
 * newwaits: the waits glibc added later.
 *
 *   loop_wait      epoll_pwait2 on an epoll set with nothing in it, 30 ms
 *                  timeout (an event loop's wait: it ends an iteration)
 *   join_timed     pthread_timedjoin_np of a thread that ends 40 ms later
 *   join_clock     pthread_clockjoin_np (CLOCK_MONOTONIC) of one that ends
 *                  20 ms later
 *
 * Ground truth: one wait of each, 30, 40 and 20 ms, each under the
 * function named above.  Prints the three as the program measured them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *sleeper(void *arg)
{
	usleep((useconds_t)(uintptr_t)arg);
	return NULL;
}

static struct timespec in_5s(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	ts.tv_sec += 5;
	return ts;
}

__attribute__((noinline)) static void loop_wait(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev;
	struct timespec ts = {0, 30000000};
	epoll_pwait2(ep, &ev, 1, &ts, NULL);
	close(ep);
}

__attribute__((noinline)) static void join_timed(void)
{
	pthread_t t;
	pthread_create(&t, NULL, sleeper, (void *)(uintptr_t)40000);
	struct timespec ts = in_5s(CLOCK_REALTIME);
	pthread_timedjoin_np(t, NULL, &ts);
}

__attribute__((noinline)) static void join_clock(void)
{
	pthread_t t;
	pthread_create(&t, NULL, sleeper, (void *)(uintptr_t)20000);
	struct timespec ts = in_5s(CLOCK_MONOTONIC);
	pthread_clockjoin_np(t, NULL, CLOCK_MONOTONIC, &ts);
}

int main(void)
{
	void (*f[])(void) = {loop_wait, join_timed, join_clock};
	for (int i = 0; i < 3; i++) {
		uint64_t t0 = now_ns();
		f[i]();
		printf("%s%llu", i ? " " : "", (unsigned long long)(now_ns() - t0));
	}
	printf("\n");
	return 0;
}

/*
 * sleeper - a blocking call of known length on a second thread.
 *
 * Ground truth: a thread named "sleeper" calls sleepy(), which calls
 * nanosleep() once for exactly 200 ms (retrying on EINTR with the remaining
 * time, which does not happen in practice).  No other code in the program
 * calls nanosleep.  The main thread only creates and joins that thread.
 *
 * Expected in the recording: the blocking table has a "nanosleep" entry
 * with count 1 and total_ns in [200 ms, 200 ms + 15 ms] (the kernel never
 * wakes a sleeper early; 15 ms is the allowance for a late wakeup on a busy
 * machine); a pseudo-function "nanosleep" of kind "wait" with inclusive
 * time of about 200 ms, whose caller sleepy() includes it.
 * Prints "slept N ns", N being how long the call took by the program's own
 * monotonic clock (the test uses it to tell a machine too busy to wake the
 * thread on time from a rhea bug), and exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

volatile int after_sleep;
static long long slept_ns;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

__attribute__((noinline)) void sleepy(void)
{
	struct timespec req = {0, 200 * 1000 * 1000}, rem;
	long long t0 = now_ns();
	while (nanosleep(&req, &rem) != 0 && errno == EINTR)
		req = rem;
	slept_ns = now_ns() - t0;
	after_sleep++;
}

static void *sleeper_thread(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "sleeper");
	sleepy();
	after_sleep++;
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, sleeper_thread, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	printf("slept %lld ns\n", slept_ns);
	return 0;
}

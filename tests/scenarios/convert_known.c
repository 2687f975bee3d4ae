/*
 * convert_known - ground truth for `rhea convert` (tests/convert/): phases
 * of known length with exact allocation counts.
 *
 * Main thread ("known"), in order; every phase starts and ends with a
 * 5 ms nanosleep, so that a blocking sample (taken at the call, with the
 * thread's counters at the call) opens the phase's slice and the next
 * phase's one closes it: the slice's counter deltas then hold exactly the
 * phase's allocations.
 *
 *   phase_alloc()  sleep 5 ms, then ALLOC_N = 4000 malloc(64) (each freed)
 *                  spread over 100 ms of spinning: AllocatedObjects = 4000,
 *                  AllocatedBytes = 256000, exactly;
 *   phase_sleep()  one nanosleep of 60 ms (a wait slice "nanosleep" under
 *                  it, BlockTime about 60 ms); no allocation;
 *   phase_spin()   sleep 5 ms, then 80 ms of pure computation: no allocation
 *                  (AllocatedObjects = 0), CPUTime close to its wall time.
 *
 * Thread "allocator", started first: sleeps 5 ms, then alloc_burst() sleeps
 * 5 ms and makes BURST_N = 10000 malloc(32) (each freed) in about 50 ms:
 * AllocatedObjects = 10000 and AllocatedBytes = 320000 exactly; then the
 * thread sleeps 5 ms and exits.
 *
 * stdout: one line per phase, "<name> <wall ns>" as the program measured it
 * (from entering the phase function to leaving it), which the test compares
 * with the slices' durations (within one capture interval plus 10%).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ALLOC_N 4000
#define BURST_N 10000
#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;

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

static void spin_until(uint64_t t)
{
	uint64_t x = sink | 1;
	while (now_ns() < t)
		for (int i = 0; i < 1000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	sink = x;
}

NOINLINE void phase_alloc(void)
{
	sleep_ms(5);
	uint64_t t0 = now_ns();
	for (int i = 0; i < ALLOC_N; i++) {
		void *p = malloc(64);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		spin_until(t0 + (uint64_t)(i + 1) * 100000000u / ALLOC_N);
	}
}

NOINLINE void phase_sleep(void)
{
	sleep_ms(60);
}

NOINLINE void phase_spin(void)
{
	sleep_ms(5);
	spin_until(now_ns() + 80000000u);
}

NOINLINE void alloc_burst(void)
{
	sleep_ms(5);
	uint64_t t0 = now_ns();
	for (int i = 0; i < BURST_N; i++) {
		void *p = malloc(32);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		if (i % 100 == 99)
			spin_until(t0 + (uint64_t)(i + 1) * 50000000u / BURST_N);
	}
}

static uint64_t burst_ns;

static void *allocator(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "allocator");
	sleep_ms(5);
	uint64_t t = now_ns();
	alloc_burst();
	burst_ns = now_ns() - t;
	sleep_ms(5);
	return NULL;
}

int main(void)
{
	pthread_setname_np(pthread_self(), "known");
	pthread_t th;
	if (pthread_create(&th, NULL, allocator, NULL) != 0)
		return 1;
	pthread_join(th, NULL);
	uint64_t t[4];
	t[0] = now_ns();
	phase_alloc();
	t[1] = now_ns();
	phase_sleep();
	t[2] = now_ns();
	phase_spin();
	t[3] = now_ns();
	sleep_ms(5);
	printf("alloc_burst %llu\n", (unsigned long long)burst_ns);
	printf("phase_alloc %llu\n", (unsigned long long)(t[1] - t[0]));
	printf("phase_sleep %llu\n", (unsigned long long)(t[2] - t[1]));
	printf("phase_spin %llu\n", (unsigned long long)(t[3] - t[2]));
	return 0;
}

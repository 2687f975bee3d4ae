/*
 * unlockloop: a program that has waited once, then takes and releases a
 * free mutex as fast as it can.
 *
 * Phase 1: a helper thread holds mutex `held` for 20 ms; the main thread
 * waits for it (one contended wait: from then on every unlock under rhea
 * tells the wait table, agent/hooks.c).  Phase 2 (400 ms of wall time):
 * the main thread locks and unlocks mutex `m` in a loop, no other hooked
 * call (the time comes from the vDSO, which rhea does not hook by
 * default).  Its unlocks are the only calls the ticker's cost model can
 * weigh (agent.c): millions a second, each of which would look at the
 * table while the ticker coasts; it must tick instead.
 *
 * stdout: "loops N" (phase 2's lock/unlock pairs).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER, m = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *holder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held);
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&held);
	return NULL;
}

__attribute__((noinline)) static uint64_t unlock_loop(uint64_t ns)
{
	uint64_t end = now_ns() + ns, n = 0;
	do {
		for (int i = 0; i < 4096; i++) {
			pthread_mutex_lock(&m);
			sink++;
			pthread_mutex_unlock(&m);
		}
		n += 4096;
	} while (now_ns() < end);
	return n;
}

int main(void)
{
	pthread_t h;
	if (pthread_create(&h, NULL, holder, NULL) != 0)
		return 1;
	struct timespec ts = {0, 5000000};
	nanosleep(&ts, NULL); /* the holder has it by now */
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
	pthread_join(h, NULL);
	printf("loops %llu\n", (unsigned long long)unlock_loop(400000000ull));
	return 0;
}

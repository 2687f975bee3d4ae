/*
 * threads32 - many threads allocating at once.
 *
 * Ground truth: main starts NTHREADS = 32 threads; they wait on a barrier so
 * that all 32 are alive together, then each calls thread_work(), which makes
 * exactly PER_THREAD = 1000 allocations of 32 bytes (kept in a per-thread
 * array, freed afterwards by another function).  Main joins them all.
 *
 * Expected in the recording: at least 33 threads (32 workers + main); the
 * alloc_sites entries for thread_work sum to exactly 32 * 1000 = 32000
 * allocations and 32000 * 32 = 1024000 bytes; nothing dropped; exit 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 32
#define PER_THREAD 1000
#define SIZE 32

static pthread_barrier_t barrier;

__attribute__((noinline)) void thread_work(void **keep)
{
	for (int i = 0; i < PER_THREAD; i++) {
		keep[i] = malloc(SIZE);
		__asm__ volatile("" : : "r"(keep[i]) : "memory");
	}
}

__attribute__((noinline)) void thread_release(void **keep)
{
	for (int i = 0; i < PER_THREAD; i++)
		free(keep[i]);
}

static void *worker(void *arg)
{
	void **keep = arg;
	pthread_barrier_wait(&barrier);
	thread_work(keep);
	thread_release(keep);
	return NULL;
}

static void *keeps[NTHREADS][PER_THREAD];

int main(void)
{
	pthread_t t[NTHREADS];
	pthread_barrier_init(&barrier, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, worker, keeps[i]) != 0)
			return 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	puts("threads done");
	return 0;
}

/*
 * mainexit - the main thread leaves with pthread_exit; the process ends
 * when its last thread does.
 *
 * Ground truth: main starts a worker, makes MAIN_N = 2000 allocations of
 * 24 bytes in main_work() and calls pthread_exit.  The worker makes
 * WORKER_N = 20000 allocations of 40 bytes in worker_work(), spread over
 * about 200 ms, prints "worker done" and returns: glibc then ends the
 * process with status 0, as the last thread is gone.
 *
 * Expected under a tracer: the process ends as soon as the worker does
 * (a tracer's own threads keep glibc from seeing the last thread go, and
 * the process lived on forever), its recording ends with exit 0 and counts
 * both functions' allocations exactly.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAIN_N 2000
#define WORKER_N 20000

volatile unsigned long sink;

__attribute__((noinline)) void main_work(void)
{
	for (int i = 0; i < MAIN_N; i++) {
		void *p = malloc(24);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

__attribute__((noinline)) void worker_work(void)
{
	for (int i = 0; i < WORKER_N; i++) {
		void *p = malloc(40);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		if (i % 100 == 0) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

static void *worker(void *arg)
{
	(void)arg;
	worker_work();
	printf("worker done\n");
	fflush(stdout);
	return NULL;
}

int main(void)
{
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	main_work();
	pthread_exit(NULL);
}

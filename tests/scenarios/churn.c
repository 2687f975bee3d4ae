/*
 * churn: 64 threads created and destroyed continuously for argv[1]
 * seconds (default 2), each computing and allocating a little.
 * Ground truth: exits 0 and prints how many threads it ran; under rhea
 * with 1 ms sampling: no crash, no deadlock, the recording is complete.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static void *worker(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < 20000 + n % 5000; i++) {
		sink += (unsigned long)i * 7;
		if (i % 4096 == 0)
			free(malloc(64));
	}
	if (n % 3 == 0)
		usleep(100);
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	long made = 0;
	for (;;) {
		pthread_t t[64];
		for (int i = 0; i < 64; i++)
			pthread_create(&t[i], NULL, worker, (void *)(made + i));
		for (int i = 0; i < 64; i++)
			pthread_join(t[i], NULL);
		made += 64;
		clock_gettime(CLOCK_MONOTONIC, &b);
		if ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9 > secs)
			break;
	}
	printf("%ld\n", made);
	return 0;
}

/*
 * threadstorm.c - many short threads, started as fast as the program can.
 *
 *   threadstorm [N]
 *
 * Starts N threads (default 3000, 64 KB stacks), each making exactly 2000
 * x malloc(64) + free, taking a shared mutex around a counter, with a 1 ms
 * sleep every 500 iterations; joins them.  Prints "threadstorm N total T"
 * with T = 2000 x N.  Under the agent every thread must be seen, every
 * allocation counted, and nothing said about timers of threads that ended
 * before the sampler armed them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static void *volatile escape;

static void *work(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2000; i++) {
		void *p = malloc(64);
		escape = p;
		pthread_mutex_lock(&lock);
		total++;
		pthread_mutex_unlock(&lock);
		free(p);
		if (i % 500 == 0)
			usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3000;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], &at, work, NULL) != 0) {
			fprintf(stderr, "threadstorm: pthread_create %d failed\n", i);
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("threadstorm %d total %ld\n", n, total);
	return 0;
}

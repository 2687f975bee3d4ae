/*
 * hammer: 64 threads hammer 8 mutexes for `secs` seconds (argv[1],
 * default 3), holding each briefly.
 * Ground truth: exits 0 (no crash, no deadlock), prints the number of
 * lock acquisitions; every recorded mutex wait has a releaser.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m[8];
static volatile int stop;
static unsigned long counts[64];

static void *worker(void *arg)
{
	long id = (long)arg;
	unsigned long n = 0, x = (unsigned long)id;
	while (!stop) {
		int k = (int)((x = x * 6364136223846793005ul + 1) >> 60) % 8;
		pthread_mutex_lock(&m[k]);
		for (volatile int i = 0; i < 200; i++)
			;
		pthread_mutex_unlock(&m[k]);
		n++;
	}
	counts[id] = n;
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	for (int i = 0; i < 8; i++)
		pthread_mutex_init(&m[i], NULL);
	pthread_t t[64];
	for (long i = 0; i < 64; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	struct timespec ts = {(time_t)secs, (long)((secs - (long)secs) * 1e9)};
	nanosleep(&ts, NULL);
	stop = 1;
	unsigned long total = 0;
	for (int i = 0; i < 64; i++) {
		pthread_join(t[i], NULL);
		total += counts[i];
	}
	printf("%lu\n", total);
	return 0;
}

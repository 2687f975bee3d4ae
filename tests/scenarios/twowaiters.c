/*
 * twowaiters: two threads wait on one mutex from one function.
 *
 * Ground truth: the main thread holds mutex m for 20 ms in each of 7
 * rounds; thread A takes it (in take(), the same call for both) in the
 * first 3 rounds, thread B in all 7, each let go by a semaphore just after
 * main took m.  So take()'s pthread_mutex_lock waits 10 times on m, 3 of
 * them A's and 7 B's, each of about 20 ms (in the rounds both wait, the
 * second is woken by the first's unlock).  Prints "A tid B tid".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static sem_t go[2], done, named;
static volatile long tids[2];

__attribute__((noinline)) void take(void)
{
	pthread_mutex_lock(&m);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

static void *waiter(void *arg)
{
	long id = (long)arg;
	tids[id] = syscall(SYS_gettid);
	sem_post(&named);
	for (int i = 0; i < (id ? 7 : 3); i++) {
		sem_wait(&go[id]);
		take();
		sem_post(&done);
	}
	return NULL;
}

int main(void)
{
	sem_init(&go[0], 0, 0);
	sem_init(&go[1], 0, 0);
	sem_init(&done, 0, 0);
	sem_init(&named, 0, 0);
	pthread_t a, b;
	pthread_create(&a, NULL, waiter, (void *)0L);
	pthread_create(&b, NULL, waiter, (void *)1L);
	sem_wait(&named);
	sem_wait(&named);
	for (int r = 0; r < 7; r++) {
		pthread_mutex_lock(&m);
		if (r < 3)
			sem_post(&go[0]);
		sem_post(&go[1]);
		usleep(20000);
		pthread_mutex_unlock(&m);
		for (int k = 0; k < (r < 3 ? 2 : 1); k++)
			sem_wait(&done);
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("A %ld B %ld\n", tids[0], tids[1]);
	return 0;
}

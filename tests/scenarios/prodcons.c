/*
 * prodcons: two producers and one consumer on a condition variable.
 * Producer P1 produces 20 items, P2 20 items, each after sleeping 3 ms in
 * produce(); the consumer waits in consume() for each item.
 * Ground truth: every recorded pthread_cond_wait of the consumer that
 * lasted >= 1 ms was woken by P1 or P2 (their tids are printed), with a
 * releasing stack containing produce; 40 items consumed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int items, consumed;
static long tids[2];

__attribute__((noinline)) static void produce(void)
{
	usleep(3000);
	pthread_mutex_lock(&m);
	items++;
	pthread_cond_signal(&c);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

static void *producer(void *arg)
{
	tids[(long)arg] = syscall(SYS_gettid);
	for (int i = 0; i < 20; i++)
		produce();
	return NULL;
}

__attribute__((noinline)) static void consume(void)
{
	pthread_mutex_lock(&m);
	while (items == 0)
		pthread_cond_wait(&c, &m);
	items--;
	consumed++;
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

int main(void)
{
	pthread_t p[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&p[i], NULL, producer, (void *)i);
	for (int i = 0; i < 40; i++)
		consume();
	for (int i = 0; i < 2; i++)
		pthread_join(p[i], NULL);
	printf("%ld %ld %d\n", tids[0], tids[1], consumed);
	return 0;
}

/*
 * rwhold: waits on a read-write lock, both ways.  Thread B write-locks l
 * and holds it 40 ms in hold_write(), while the main thread waits to
 * read-lock it in wait_to_read(); then B read-locks it and holds it 40 ms
 * in hold_read(), while the main thread waits to write-lock it in
 * wait_to_write().
 * Ground truth: one pthread_rwlock_rdlock wait in wait_to_read() and one
 * pthread_rwlock_wrlock wait in wait_to_write(), each of 40 ms (within
 * 5 ms), each woken by B, whose releasing stack holds hold_write() and
 * hold_read() respectively.  Prints B's tid and the two waits as the main
 * thread itself measured them (a loaded machine can delay the main thread
 * after it saw the lock taken: then the run is disturbed).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER;
static volatile int phase; /* 1: B holds it to write, 2: to read */
static volatile int next_phase;
static volatile long b_tid;

__attribute__((noinline)) static void hold_write(void)
{
	pthread_rwlock_wrlock(&l);
	phase = 1;
	usleep(40000);
	pthread_rwlock_unlock(&l);
	__asm__ volatile("");
}

__attribute__((noinline)) static void hold_read(void)
{
	pthread_rwlock_rdlock(&l);
	phase = 2;
	usleep(40000);
	pthread_rwlock_unlock(&l);
	__asm__ volatile("");
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = syscall(SYS_gettid);
	hold_write();
	while (!next_phase)
		;
	hold_read();
	return NULL;
}

__attribute__((noinline)) static void wait_to_read(void)
{
	pthread_rwlock_rdlock(&l);
	pthread_rwlock_unlock(&l);
	__asm__ volatile("");
}

__attribute__((noinline)) static void wait_to_write(void)
{
	pthread_rwlock_wrlock(&l);
	pthread_rwlock_unlock(&l);
	__asm__ volatile("");
}

static long since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (long)((t1.tv_sec - t0->tv_sec) * 1000000000L + (t1.tv_nsec - t0->tv_nsec));
}

int main(void)
{
	pthread_t b;
	struct timespec t0;
	pthread_create(&b, NULL, thread_b, NULL);
	while (phase != 1)
		;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wait_to_read();
	long read_ns = since(&t0);
	next_phase = 1;
	while (phase != 2)
		;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wait_to_write();
	long write_ns = since(&t0);
	pthread_join(b, NULL);
	printf("%ld %ld %ld\n", b_tid, read_ns, write_ns);
	return 0;
}

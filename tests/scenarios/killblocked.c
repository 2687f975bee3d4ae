/*
 * killblocked - killed while two threads are blocked.
 *
 * Ground truth: reader() blocks in read(2) on a pipe nobody writes to,
 * locker() in pthread_mutex_lock on a mutex the main thread holds, both
 * from their start.  The main thread computes for 2.5 s (with malloc and
 * free every 256 iterations, so that the agent captures it) and sends the
 * process SIGKILL (status 128 + 9 through rhea record).
 *
 * Expected: both threads blocked at the end, in read (the pipe's read end)
 * and pthread_mutex_lock (owner: the main thread), each for the whole
 * 2.5 s up to the kill: rhea record recovers the agent's unwritten records,
 * and a wait that no return ended lasts to the end it saw, not to the
 * sampler's last forced capture of it (up to --force-after before).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;

static void *reader(void *arg)
{
	char c;
	if (read(fds[0], &c, 1) < 0)
		perror("read");
	return arg;
}

static void *locker(void *arg)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_unlock(&lock);
	return arg;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void __attribute__((noinline)) compute_until_killed(double secs)
{
	double end = now() + secs;
	for (unsigned long i = 0;; i++) {
		sink += i * 7;
		if (i % 256 == 0) {
			free(malloc(64));
			if (now() >= end)
				break;
		}
	}
}

int main(void)
{
	if (pipe(fds) != 0) {
		perror("pipe");
		return 1;
	}
	pthread_mutex_lock(&lock);
	pthread_t a, b;
	pthread_create(&a, NULL, reader, NULL);
	pthread_create(&b, NULL, locker, NULL);
	printf("blocked\n");
	fflush(stdout);
	compute_until_killed(2.5);
	kill(getpid(), SIGKILL);
	return 0;
}

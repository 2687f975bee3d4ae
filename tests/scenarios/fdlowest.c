/*
 * fdlowest - a program that counts on open() returning the lowest free
 * descriptor (POSIX says it must), while many of its threads sit blocked.
 *
 *   fdlowest [threads] [ms]
 *
 * Ground truth: `threads` (default 40) threads block in read() on a pipe
 * nobody writes until the end; under rhea record --force-after 2ms the
 * sampler reads each one's /proc syscall file every few milliseconds, and
 * lists /proc/self/task every millisecond.  Meanwhile main opens and
 * closes /dev/null for `ms` (default 1000) ms, the way a daemon reopens
 * its standard descriptors, and counts the opens that did not get the
 * lowest free number: none may (the agent reads /proc from a descriptor
 * table of its own: sampler.c).  Prints "opens N, not lowest M".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static int gate[2];
static int ready;

static void *blocked(void *arg)
{
	char c;
	/* its first allocation makes glibc's arena for the thread, which
	 * opens a /sys file of its own (the number of CPUs): before the loop */
	free(malloc(16));
	__atomic_add_fetch(&ready, 1, __ATOMIC_RELEASE);
	while (read(gate[0], &c, 1) < 0)
		;
	return arg;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 40;
	long ms = argc > 2 ? atol(argv[2]) : 1000;
	if (threads < 0 || threads > 1000 || ms < 0 || pipe(gate) != 0)
		return 2;
	pthread_t *th = calloc((size_t)threads, sizeof(*th));
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, blocked, NULL) != 0)
			return 2;
	while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < threads)
		usleep(1000);
	usleep(50000); /* all in their read by now */
	long opens = 0, not_lowest = 0;
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
	while (now_ns() < end) {
		/* the lowest free one now: probed with dup, which takes it too */
		int lowest = dup(0);
		if (lowest < 0)
			return 2;
		close(lowest);
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0)
			return 2;
		opens++;
		not_lowest += fd != lowest;
		close(fd);
	}
	close(gate[1]); /* end of file for every reader */
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	printf("opens %ld, not lowest %ld\n", opens, not_lowest);
	return 0;
}

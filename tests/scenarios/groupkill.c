/*
 * groupkill - a program killed together with rhea record.
 *
 * Ground truth: main forks one child; each of the two computes in its own
 * function (parent_work, child_work: memory churn by the monotonic clock,
 * forever) and writes the time it last came round its loop into its own
 * slot of progress.bin (tid, then CLOCK_MONOTONIC ns: a file that outlives
 * it).  main prints "child <pid>".  The test kills the whole process group,
 * rhea record included, with SIGKILL: the keeper rhea record left in a
 * process group of its own must finish both recordings from their memory, each
 * up to close to the last progress its process noted.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spin.h"

static inline __attribute__((always_inline)) void churn(volatile uint64_t *progress)
{
	uint64_t x = 1;
	for (long i = 0;; i++) {
		if (spin_step(&x, i) && progress) {
			progress[0] = (uint64_t)gettid();
			progress[1] = now_ns();
		}
	}
}

__attribute__((noinline)) void parent_work(volatile uint64_t *progress)
{
	churn(progress);
}

__attribute__((noinline)) void child_work(volatile uint64_t *progress)
{
	churn(progress);
}

int main(void)
{
	volatile uint64_t *progress = NULL;
	int fd = open("progress.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && ftruncate(fd, 32) == 0) {
		void *m = mmap(NULL, 32, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED)
			progress = m;
	}
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		child_work(progress ? progress + 2 : NULL);
	printf("child %d\n", (int)pid);
	fflush(stdout);
	parent_work(progress);
	return 0;
}

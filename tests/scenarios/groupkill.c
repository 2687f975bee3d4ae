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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "spin.h"

__attribute__((noinline)) void parent_work(volatile uint64_t *progress)
{
	compute_noting(progress, (uint64_t)gettid());
}

__attribute__((noinline)) void child_work(volatile uint64_t *progress)
{
	compute_noting(progress, (uint64_t)gettid());
}

int main(void)
{
	volatile uint64_t *progress = progress_file(32);
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

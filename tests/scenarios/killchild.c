/*
 * killchild - a child process killed with SIGKILL by its parent.
 *
 * Ground truth: the parent forks a child that runs victim_work() (memory
 * churn by the monotonic clock, forever), writing the time it last came
 * round its loop into progress.bin (tid, then CLOCK_MONOTONIC ns: a file
 * that outlives it).  After 300 ms the parent kills it with SIGKILL, reaps
 * it and exits with 0.  The child's agent wrote no end; its memory went to
 * rhea record, which must finish the child's recording from it: the child's
 * last capture close to the last progress it noted.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

__attribute__((noinline)) void victim_work(volatile uint64_t *progress)
{
	compute_noting(progress, (uint64_t)gettid());
}

int main(void)
{
	volatile uint64_t *progress = progress_file(16);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		victim_work(progress);
		_exit(0);
	}
	printf("child %d\n", (int)pid);
	fflush(stdout);
	usleep(300000);
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	printf("child killed: %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
	return 0;
}

/*
 * orphans - a program that ends and leaves its children running.
 *
 * Ground truth: main forks two children, prints their pids and exits with
 * 0 at once.
 *  - the stayer sleeps 100 ms (its parent is gone by then), computes in
 *    stayer_work() for 200 ms and exits with status 3: its agent writes
 *    its end;
 *  - the victim computes in victim_work() for 250 ms, then kills itself
 *    with SIGKILL: its agent writes nothing more, and only the process that
 *    reaps it learns how it ended.
 * With the argument "long": one child that sleeps 30 s instead (the test
 * stops rhea record's waiting, then kills it).
 * rhea record, their subreaper, must wait for both, finish the victim's
 * recording from its memory with signal 9, and return 0.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"

__attribute__((noinline)) void stayer_work(void)
{
	compute_for(200000000);
}

__attribute__((noinline)) void victim_work(void)
{
	compute_for(250000000);
}

int main(int argc, char **argv)
{
	int lng = argc > 1 && strcmp(argv[1], "long") == 0;
	pid_t stayer = fork();
	if (stayer == 0) {
		if (lng) {
			sleep(30);
			_exit(0);
		}
		usleep(100000);
		stayer_work();
		_exit(3);
	}
	if (lng) {
		printf("sleeper %d\n", (int)stayer);
		return 0;
	}
	pid_t victim = fork();
	if (victim == 0) {
		victim_work();
		raise(SIGKILL);
		_exit(1);
	}
	printf("stayer %d\nvictim %d\n", (int)stayer, (int)victim);
	return 0;
}

/*
 * helpers - short processes of one program, each computing in a function
 * that never calls a hooked one and calling an allocation wrapper often:
 * what a build's compiler runs look like to the hooks.
 *
 *   helpers [CHILDREN] [MS]
 *
 * Ground truth: the parent forks CHILDREN (default 8) children, two at a
 * time, and waits for them.  Each child spends MS (default 150) ms of CPU
 * in loops of crunch() (arithmetic, about 20 us, no call out of it) and
 * alloc_helper() (one malloc and one free): crunch() has nearly all of the
 * child's CPU, alloc_helper() under 1%.  Every capture of the hooks is
 * taken in alloc_helper()'s malloc (the first hooked call after each
 * tick), so the timeline as captured gives alloc_helper() nearly all of it
 * instead; the sampler (one period per 10 ms of CPU) finds crunch().  One
 * child has 15 periods, too few to correct its timeline on its own; the
 * children of the program together have CHILDREN times that.
 * Prints "children N" and exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t sink;

static long long cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

__attribute__((noinline)) static void crunch(void)
{
	uint64_t x = sink;
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

__attribute__((noinline)) static void alloc_helper(void)
{
	char *p = malloc(64);
	if (p)
		p[0] = (char)sink;
	free(p);
}

__attribute__((noinline)) static void child_main(long ms)
{
	long long end = cpu_ns() + ms * 1000000ll;
	while (cpu_ns() < end)
		for (int i = 0; i < 20; i++) {
			crunch();
			alloc_helper();
		}
}

int main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 8;
	long ms = argc > 2 ? atol(argv[2]) : 150;
	int running = 0;
	for (int i = 0; i < children; i++) {
		if (running == 2 && wait(NULL) > 0)
			running--;
		pid_t p = fork();
		if (p == 0) {
			child_main(ms);
			_exit(0);
		}
		if (p > 0)
			running++;
	}
	while (wait(NULL) > 0)
		;
	printf("children %d\n", children);
	return 0;
}

/*
 * forkwalk - a fork while another thread of the program walks the loader's
 * list: the child inherits the loader's write lock, held for ever (fork
 * does not take it; glibc resets only the load lock in the child).
 *
 *   forkwalk
 *
 * A thread of the parent calls dl_iterate_phdr and, from its first
 * callback, says so and sleeps 300 ms (a C++ unwinder's or a profiler's
 * walk, caught by the fork).  Meanwhile the main thread forks.  The child
 * makes exactly CHILD_N = 2000 allocations of 48 bytes in child_work(),
 * forks a grandchild that makes exactly GRAND_N = 1500 allocations of 80
 * bytes in grandchild_work() and exits 3, and exits 5 with "grandchild
 * status 3".  The parent joins its walker, prints "child status 5" and
 * "forkwalk done", and exits 0.  None of them calls dlopen, throws or
 * walks after the fork: those would hang without rhea too.
 *
 * Expected under rhea record: no hang; three recordings (parent, child,
 * grandchild), each ending in its exit, with the counts above: the
 * agent's own walks in the child and the grandchild must not wait for the
 * lock, nor its fork handlers for a walk of its own caught by the fork.
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_N 2000
#define GRAND_N 1500

void *volatile sink;
static volatile int walking;

static int slow_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info, (void)size, (void)arg;
	walking = 1;
	usleep(300000);
	return 1; /* (the first object only) */
}

static void *walker(void *arg)
{
	(void)arg;
	dl_iterate_phdr(slow_cb, NULL);
	return NULL;
}

__attribute__((noinline)) void child_work(void)
{
	for (int i = 0; i < CHILD_N; i++) {
		sink = malloc(48);
		free(sink);
	}
}

__attribute__((noinline)) void grandchild_work(void)
{
	for (int i = 0; i < GRAND_N; i++) {
		sink = malloc(80);
		free(sink);
	}
}

static int wait_status(pid_t p)
{
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, walker, NULL) != 0) {
		fprintf(stderr, "forkwalk: pthread_create failed\n");
		return 1;
	}
	while (!walking)
		usleep(1000);
	fflush(stdout);
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		return 1;
	}
	if (c == 0) {
		child_work();
		pid_t g = fork();
		if (g < 0)
			_exit(1);
		if (g == 0) {
			grandchild_work();
			_exit(3);
		}
		printf("grandchild status %d\n", wait_status(g));
		fflush(stdout);
		_exit(5);
	}
	printf("child status %d\n", wait_status(c));
	pthread_join(t, NULL);
	printf("forkwalk done\n");
	return 0;
}

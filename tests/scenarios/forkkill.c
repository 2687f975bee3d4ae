/*
 * forkkill - children killed with SIGKILL moments after their work starts.
 *
 *   forkkill self [N]   N (default 10) children one after the other, each
 *                       makes exactly CHILD_N = 1000 allocations of 48
 *                       bytes in child_work(), then SIGKILLs itself;
 *   forkkill ext [N]    N (default 40) children that allocate in
 *                       child_loop() until the parent SIGKILLs them, after
 *                       0, 0.15, ... 2.85 ms (i % 20 steps of 150 us).
 *
 * The parent reaps each with waitpid, checks it died of SIGKILL, prints
 * "forkkill done N" and exits 0.
 *
 * Expected under rhea record: for self, every child's recording, ended by
 * its signal 9, with child_work's allocations as counted in the site
 * tables at the kill: all 1000 but for the run of one site still in the
 * thread's TLS (at most 127: README, limits); for ext, a recording for
 * each child that captured anything, each readable and ended by signal
 * 9, and no empty file: a child killed while its recording was being
 * created leaves none or a whole one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_N 1000

void *volatile sink;

__attribute__((noinline)) void child_work(void)
{
	for (int i = 0; i < CHILD_N; i++) {
		sink = malloc(48);
		free(sink);
	}
}

__attribute__((noreturn, noinline)) void child_loop(void)
{
	for (;;) {
		sink = malloc(48);
		free(sink);
	}
}

int main(int argc, char **argv)
{
	int self = argc > 1 && strcmp(argv[1], "self") == 0;
	int n = argc > 2 ? atoi(argv[2]) : self ? 10 : 40;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			return 1;
		}
		if (p == 0) {
			if (!self)
				child_loop();
			child_work();
			kill(getpid(), SIGKILL);
			_exit(1);
		}
		if (!self) {
			struct timespec ts = {0, (i % 20) * 150000L};
			nanosleep(&ts, NULL);
			kill(p, SIGKILL);
		}
		int st;
		if (waitpid(p, &st, 0) != p || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			fprintf(stderr, "forkkill: child %d did not die of SIGKILL\n", i);
			return 1;
		}
	}
	printf("forkkill done %d\n", n);
	return 0;
}

/*
 * forkexec - fork, work in the child, exec another program.
 *
 * Ground truth: the parent forks once and waits for the child.  The child
 * calls child_work(), which makes exactly CHILD_N = 5000 allocations of
 * CHILD_SIZE = 64 bytes (kept, so none can be elided), then execs the
 * program named by argv[1] (the allocs scenario, which makes exactly 20000
 * allocations of 48 bytes in make_allocs()).  The parent prints
 * "child <pid>" then "child status <status>" and exits 0 if the child
 * exited 0.
 *
 * Expected: the parent's recording ends with exit 0; the forked child's
 * recording ends with "exec" and shows child_work's 5000 allocations; the
 * exec'd image writes a recording of its own in which make_allocs has
 * count 20000, bytes 960000.  With --no-follow only the parent's file is
 * written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_N 5000
#define CHILD_SIZE 64

void *kept[CHILD_N];

__attribute__((noinline)) void child_work(void)
{
	for (int i = 0; i < CHILD_N; i++) {
		kept[i] = malloc(CHILD_SIZE);
		__asm__ volatile("" : : "r"(kept[i]) : "memory");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: forkexec /path/to/allocs\n");
		return 2;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_work();
		execv(argv[1], (char *[]){argv[1], NULL});
		perror("execv");
		_exit(127);
	}
	printf("child %d\n", (int)pid);
	int status = 0;
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	printf("child status %d\n", status);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/*
 * forkquick - children that do nothing of their own: a shell's fork and
 * exec of a command, a daemon's double fork.
 *
 *   forkquick [N]
 *
 * Forks N (default 40) children one after the other and waits for each:
 * the even ones exec /bin/true at once, the odd ones _exit(0) at once.
 * Neither calls a hooked function before it goes.  Then the parent makes
 * exactly PARENT_N = 3000 allocations of 32 bytes in parent_work() and
 * prints "forkquick done N".
 *
 * Expected under rhea record: the parent's recording (with parent_work's
 * allocations), and none for the children: a forked child that records
 * nothing writes nothing, and the agent's own start in the child (its
 * threads, its buffers) is not the child's work.  /bin/true itself
 * captures nothing and leaves none either.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define PARENT_N 3000

void *volatile sink;

__attribute__((noinline)) void parent_work(void)
{
	for (int i = 0; i < PARENT_N; i++) {
		sink = malloc(32);
		free(sink);
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 40;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p < 0) {
			perror("fork");
			return 1;
		}
		if (p == 0) {
			if (i % 2 == 0)
				execl("/bin/true", "true", (char *)NULL);
			_exit(0);
		}
		int st;
		if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "forkquick: child %d failed\n", i);
			return 1;
		}
	}
	parent_work();
	printf("forkquick done %d\n", n);
	return 0;
}

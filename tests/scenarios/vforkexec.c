/*
 * vforkexec - vfork and exec, as Python's subprocess and many spawners do.
 *
 * A vfork child runs in its parent's memory until it execs or calls
 * _exit: whatever a tracer's hooks do there, they do to the parent's
 * state.
 *
 * Ground truth: before_work() makes BEFORE_N = 1000 allocations of 32
 * bytes; the process then vforks a child that execs argv[1] (the allocs
 * scenario: 20000 allocations of 48 bytes in make_allocs()), and vforks a
 * second child whose exec fails and which calls _exit(127); then
 * after_work() makes AFTER_N = 5000 allocations of 80 bytes.  Prints
 * "child <pid> status <status>" for the first child, "failed status
 * <status>" for the second, and exits 0.
 *
 * Expected: the parent's recording ends with exit 0 and counts before_work
 * and after_work exactly (neither the exec nor the _exit of a vfork child
 * ends it); the exec'd child writes a recording of its own (make_allocs:
 * 20000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define BEFORE_N 1000
#define AFTER_N 5000

void *kept[AFTER_N];

__attribute__((noinline)) void before_work(void)
{
	for (int i = 0; i < BEFORE_N; i++) {
		kept[i] = malloc(32);
		__asm__ volatile("" : : "r"(kept[i]) : "memory");
	}
}

__attribute__((noinline)) void after_work(void)
{
	for (int i = 0; i < AFTER_N; i++) {
		kept[i] = malloc(80);
		__asm__ volatile("" : : "r"(kept[i]) : "memory");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: vforkexec /path/to/allocs\n");
		return 2;
	}
	before_work();
	fflush(stdout);
	pid_t pid = vfork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		execv(argv[1], (char *[]){argv[1], NULL});
		_exit(127);
	}
	int status = 0, failed = 0;
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	pid_t bad = vfork();
	if (bad < 0)
		return 1;
	if (bad == 0) {
		execv("/nonexistent/vforkexec-target", (char *[]){"x", NULL});
		_exit(127);
	}
	if (waitpid(bad, &failed, 0) != bad)
		return 1;
	after_work();
	printf("child %d status %d\nfailed status %d\n", (int)pid, status, failed);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

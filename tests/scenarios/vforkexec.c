/*
 * vforkexec - vfork and exec, as Python's subprocess and many spawners do.
 *
 * A vfork child runs in its parent's memory until it execs or calls
 * _exit: whatever a tracer's hooks do there, they do to the parent's
 * state.
 *
 * Ground truth: the process vforks a child that, as shells and Python's
 * subprocess do, spins for CHILD_SPIN_MS (more than an interval: a hook
 * would capture after it), opens, dup2s and closes a descriptor, and
 * execs argv[1] (the allocs scenario: 20000 allocations of 48 bytes in
 * make_allocs()); then before_work() makes BEFORE_N = 1000 allocations of
 * 32 bytes, touches TOUCH_PAGES new pages and sleeps 2 ms; then it vforks
 * a second child that spins and opens as well, whose exec fails and which
 * calls _exit(127); then a third child made by clone(CLONE_VM |
 * CLONE_VFORK) on a stack of its own (the parent's memory and TLS, as a
 * vfork child, but no vfork call for a tracer to see) spins and opens as
 * well, and exits; then after_work() makes AFTER_N = 5000 allocations of
 * 80 bytes.  Prints "child <pid> status <status>" for the first child,
 * "failed status <status>" for the second, and exits 0.
 *
 * Expected: the parent's recording ends with exit 0 and counts before_work
 * and after_work exactly (neither the exec nor the _exit of a vfork child
 * ends it); it holds one thread, the main one (tid = pid), whose page
 * faults and context switches are the process's own, a few thousand at
 * most; the exec'd child writes a recording of its own (make_allocs:
 * 20000).  A vfork child runs on its parent's thread state: its hooks,
 * taken as the parent's, registered the parent under the first child's
 * tid when it had not registered yet, and read the second child's
 * counts, fewer than the parent's, as the parent's, which then went back
 * by nearly 2^32.  The third child's hooks do run on the parent's state:
 * its counts must still never go back.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BEFORE_N 1000
#define AFTER_N 5000
#define CHILD_SPIN_MS 5
#define TOUCH_PAGES 2000

void *kept[AFTER_N];

__attribute__((noinline)) void before_work(void)
{
	for (int i = 0; i < BEFORE_N; i++) {
		kept[i] = malloc(32);
		__asm__ volatile("" : : "r"(kept[i]) : "memory");
	}
}

__attribute__((noinline)) void touch_pages(void)
{
	char *p = malloc(TOUCH_PAGES * 4096);
	for (int i = 0; p && i < TOUCH_PAGES; i++)
		p[(size_t)i * 4096] = 1;
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
}

/* What a spawner's child does between vfork and exec. */
static void child_prepares(void)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < CHILD_SPIN_MS);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		close(fd);
	}
}

static int clone_child(void *arg)
{
	(void)arg;
	child_prepares();
	syscall(SYS_exit, 0); /* not exit(): the parent's atexit and stdio */
	return 0;
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
	fflush(stdout);
	pid_t pid = vfork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_prepares();
		execv(argv[1], (char *[]){argv[1], NULL});
		_exit(127);
	}
	int status = 0, failed = 0;
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	before_work();
	touch_pages();
	nanosleep(&(struct timespec){0, 2000000}, NULL);
	pid_t bad = vfork();
	if (bad < 0)
		return 1;
	if (bad == 0) {
		child_prepares();
		execv("/nonexistent/vforkexec-target", (char *[]){"x", NULL});
		_exit(127);
	}
	if (waitpid(bad, &failed, 0) != bad)
		return 1;
	static char stack[256 << 10] __attribute__((aligned(16)));
	pid_t cl = clone(clone_child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	int cl_status = 0;
	if (cl < 0 || waitpid(cl, &cl_status, 0) != cl || cl_status != 0)
		return 1;
	after_work();
	printf("child %d status %d\nfailed status %d\n", (int)pid, status, failed);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

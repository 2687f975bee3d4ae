/*
 * tracer.c - a debugger in miniature: the program it runs is ptraced, and
 * every signal that program gets stops it in front of the tracer first, as
 * under gdb (which by default stops there and waits for the user).
 *
 *   tracer          fork, PTRACE_TRACEME, exec itself as "tracer work";
 *                   pass each signal on and count them; prints
 *                   "tracer: work exited S, signals seen N (list)"
 *   tracer work     compute for about 300 ms of CPU (nothing hooked)
 *
 * Ground truth: the work raises no signal, so the tracer sees none (the
 * exec's SIGTRAP aside).  Under rhea the work's agent must keep its
 * sampler's signals away while a tracer is attached: under gdb each one
 * stopped the program ("received signal SIG63").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static double work(void)
{
	double t0 = cpu_s(), x = 1;
	while (cpu_s() - t0 < 0.3)
		for (int i = 0; i < 100000; i++)
			x = x * 1.0000001 + 1e-9;
	return x;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "work") == 0) {
		printf("work done %d\n", work() > 0);
		return 0;
	}
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execl("/proc/self/exe", "tracer", "work", (char *)NULL);
		_exit(127);
	}
	int st, seen = 0;
	char list[256] = "";
	while (waitpid(pid, &st, 0) == pid) {
		if (WIFEXITED(st) || WIFSIGNALED(st))
			break;
		int sig = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
		if (sig == SIGTRAP) {
			sig = 0; /* the exec */
		} else if (sig) {
			seen++;
			size_t l = strlen(list);
			if (l < sizeof(list) - 8)
				snprintf(list + l, sizeof(list) - l, " %d", sig);
		}
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
	}
	printf("tracer: work exited %d, signals seen %d (%s)\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, seen,
	       list[0] ? list + 1 : "none");
	return 0;
}

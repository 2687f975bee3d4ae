/*
 * reapers - children that end without writing their end, reaped by their
 * parent through each call of the wait family.
 *
 * Ground truth: main forks four children, each computing in a function of
 * its own, and prints "<name> <pid>" for each:
 *  - killed:  killed_work() until main kills it with SIGKILL at 300 ms;
 *             reaped with waitpid(pid, &st, 0);
 *  - exiter:  exiter_work() for 60 ms, then a raw exit_group(7) (no libc
 *             exit, no hook: its agent writes nothing more); reaped with
 *             wait4(pid, &st, 0, &ru);
 *  - idkill:  idkill_work() until main kills it with SIGKILL at 300 ms;
 *             reaped with waitid(P_PID, pid, &si, WEXITED);
 *  - nostat:  nostat_work() for 60 ms, then raise(SIGKILL); reaped with
 *             wait(NULL), which gives the caller no status at all.
 * main checks each status the calls gave it, prints "ok" when all are as
 * above, and exits with 0.  rhea record must end every child's recording
 * with that status (told by main's agent), not `gone`.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spin.h"

__attribute__((noinline)) void killed_work(void)
{
	compute_for(0);
}

__attribute__((noinline)) void exiter_work(void)
{
	compute_for(60000000);
}

__attribute__((noinline)) void idkill_work(void)
{
	compute_for(0);
}

__attribute__((noinline)) void nostat_work(void)
{
	compute_for(60000000);
}

static pid_t child(const char *name, void (*work)(void), int how)
{
	pid_t pid = fork();
	if (pid == 0) {
		work();
		if (how == 1)
			syscall(SYS_exit_group, 7);
		if (how == 2)
			raise(SIGKILL);
		_exit(0);
	}
	printf("%s %d\n", name, (int)pid);
	return pid;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	pid_t killed = child("killed", killed_work, 0);
	pid_t exiter = child("exiter", exiter_work, 1);
	pid_t idkill = child("idkill", idkill_work, 0);
	pid_t nostat = child("nostat", nostat_work, 2);
	usleep(300000);
	kill(killed, SIGKILL);
	kill(idkill, SIGKILL);
	int ok = 1, st = 0;
	if (waitpid(killed, &st, 0) != killed || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		ok = 0, printf("killed: status %#x\n", st);
	struct rusage ru;
	if (wait4(exiter, &st, 0, &ru) != exiter || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		ok = 0, printf("exiter: status %#x\n", st);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)idkill, &si, WEXITED) != 0 || si.si_pid != idkill || si.si_code != CLD_KILLED ||
	    si.si_status != SIGKILL)
		ok = 0, printf("idkill: code %d status %d\n", si.si_code, si.si_status);
	if (wait(NULL) != nostat)
		ok = 0, printf("nostat: not reaped\n");
	puts(ok ? "ok" : "not ok");
	return 0;
}

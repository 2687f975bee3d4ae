/*
 * seccomp.c - would the agent's system calls survive the process's
 * seccomp filters?  (rhea attach)
 *
 * A process may run under a seccomp filter (systemd's SystemCallFilter=,
 * a container's profile, a sandbox).  A call the filter does not allow
 * fails (ERRNO: the agent copes, and says what it had to turn off) or
 * kills the process (KILL, or TRAP: SIGSYS).  Loading the agent into a
 * service that then dies of it is the one thing rhea attach must never
 * do, so the filters of the thread that will load it (its own threads
 * inherit them) are read with PTRACE_SECCOMP_GET_FILTER, run on every
 * system call dlopen and the agent make (core/seccompbpf.c), and the
 * attach is refused when one of them would kill, trap or wait for a
 * supervisor.
 */
#include "seccomp.h"
#include "inject.h"
#include "seccompbpf.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

#define MAX_INSNS 4096 /* BPF_MAXINSNS */

/* 0 none, 1 strict, 2 filters. */
static long seccomp_mode(pid_t tid)
{
	return inject_status_number(tid, "Seccomp", 0);
}

long seccomp_filters(pid_t tid)
{
	return inject_status_number(tid, "Seccomp_filters", -1);
}

int seccomp_check(pid_t tid, char *why, size_t len)
{
	long mode = seccomp_mode(tid);
	if (mode == 0)
		return 0;
	if (mode == 1) {
		snprintf(why, len, "thread %d runs in seccomp's strict mode (only read, write and exit)", (int)tid);
		return 1;
	}
	static struct sock_filter prog[MAX_INSNS];
	uint32_t worst[SECCOMP_AGENT_CALLS_MAX];
	for (size_t c = 0; c < seccomp_agent_ncalls; c++)
		worst[c] = SECCOMP_RET_ALLOW;
	int filters = 0;
	for (unsigned long idx = 0;; idx++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)idx, NULL);
		if (n < 0 && errno == ENOENT && filters > 0)
			break; /* past the oldest */
		if (n <= 0 || n > MAX_INSNS || ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)idx, prog) != n) {
			snprintf(why, len, "thread %d runs under a seccomp filter that cannot be read (%s%s): a "
				 "system call of the agent's might kill the process", (int)tid, strerror(errno),
				 errno == EACCES || errno == EPERM ? ", run as root" : "");
			return 1;
		}
		filters++;
		seccomp_bpf_fold(prog, (int)n, worst); /* every filter runs */
	}
	int c = seccomp_bpf_first_harmful(worst);
	if (c >= 0) {
		snprintf(why, len, "thread %d's seccomp filter would %s the process at the agent's %s()", (int)tid,
			 (worst[c] & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF ? "hold up" : "kill",
			 seccomp_agent_calls[c].name);
		return 1;
	}
	return 0;
}

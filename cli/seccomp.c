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
 * system call dlopen and the agent make, with no arguments, and the attach
 * is refused when one of them would kill, trap or wait for a supervisor.
 * The filters are classic BPF programs over struct seccomp_data; the few
 * instructions they use are interpreted here.  Arguments are taken as 0:
 * filters that look at them (clone's flags, socket families) are judged
 * on the common case.
 */
#include "seccomp.h"
#include "inject.h"

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

/* What dlopen of the agent and the agent's life make: strace of rhea
 * record, and every SYS_ the agent's sources name (grep SYS_ agent/). */
static const struct {
	int nr;
	const char *name;
} calls[] = {
	{SYS_read, "read"}, {SYS_write, "write"}, {SYS_openat, "openat"}, {SYS_close, "close"},
	{SYS_newfstatat, "newfstatat"}, {SYS_fstat, "fstat"}, {SYS_lseek, "lseek"}, {SYS_pread64, "pread64"},
	{SYS_mmap, "mmap"}, {SYS_mprotect, "mprotect"}, {SYS_munmap, "munmap"}, {SYS_madvise, "madvise"},
	{SYS_brk, "brk"}, {SYS_readlink, "readlink"}, {SYS_getdents64, "getdents64"}, {SYS_mkdir, "mkdir"},
	{SYS_rename, "rename"}, {SYS_unlink, "unlink"}, {SYS_rmdir, "rmdir"}, {SYS_access, "access"},
	{SYS_futex, "futex"}, {SYS_nanosleep, "nanosleep"}, {SYS_clock_nanosleep, "clock_nanosleep"},
	{SYS_sched_yield, "sched_yield"}, {SYS_getrusage, "getrusage"}, {SYS_gettid, "gettid"},
	{SYS_getpid, "getpid"}, {SYS_getppid, "getppid"}, {SYS_uname, "uname"}, {SYS_prctl, "prctl"},
	{SYS_clone3, "clone3"}, {SYS_clone, "clone"}, {SYS_set_robust_list, "set_robust_list"},
	{SYS_rseq, "rseq"}, {SYS_rt_sigaction, "rt_sigaction"}, {SYS_rt_sigprocmask, "rt_sigprocmask"},
	{SYS_rt_sigreturn, "rt_sigreturn"}, {SYS_timer_create, "timer_create"},
	{SYS_timer_settime, "timer_settime"}, {SYS_timer_delete, "timer_delete"}, {SYS_getrandom, "getrandom"},
	{SYS_fcntl, "fcntl"}, {SYS_exit, "exit"}, {SYS_tgkill, "tgkill"}, {SYS_clock_gettime, "clock_gettime"},
	{SYS_sched_getaffinity, "sched_getaffinity"}, {SYS_statx, "statx"},
	{SYS_memfd_create, "memfd_create"}, {SYS_process_vm_readv, "process_vm_readv"}, {SYS_mremap, "mremap"},
	{SYS_pipe2, "pipe2"}, {SYS_sysinfo, "sysinfo"}, {SYS_prlimit64, "prlimit64"},
};

/* Run one filter on (nr, x86-64, no arguments): its return value, or
 * SECCOMP_RET_KILL_PROCESS for an instruction this does not know. */
static uint32_t run(const struct sock_filter *f, int n, int nr)
{
	struct seccomp_data d;
	memset(&d, 0, sizeof(d));
	d.nr = nr;
	d.arch = AUDIT_ARCH_X86_64;
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
	for (int pc = 0; pc >= 0 && pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;
			if (BPF_MODE(i->code) == BPF_ABS && BPF_SIZE(i->code) == BPF_W && i->k % 4 == 0 &&
			    i->k + 4 <= sizeof(d))
				memcpy(&v, (const char *)&d + i->k, 4);
			else if (BPF_MODE(i->code) == BPF_IMM)
				v = i->k;
			else if (BPF_MODE(i->code) == BPF_MEM && i->k < BPF_MEMWORDS)
				v = mem[i->k];
			else if (BPF_MODE(i->code) == BPF_LEN)
				v = sizeof(d);
			else
				return SECCOMP_RET_KILL_PROCESS;
			if (BPF_CLASS(i->code) == BPF_LD)
				a = v;
			else
				x = v;
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (i->k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			mem[i->k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV: if (!src) return SECCOMP_RET_KILL_PROCESS; a /= src; break;
			case BPF_MOD: if (!src) return SECCOMP_RET_KILL_PROCESS; a %= src; break;
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_JMP: {
			int taken;
			switch (BPF_OP(i->code)) {
			case BPF_JA: pc += (int)i->k; continue;
			case BPF_JEQ: taken = a == src; break;
			case BPF_JGT: taken = a > src; break;
			case BPF_JGE: taken = a >= src; break;
			case BPF_JSET: taken = (a & src) != 0; break;
			default: return SECCOMP_RET_KILL_PROCESS;
			}
			pc += taken ? i->jt : i->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(i->code) == BPF_A ? a : i->k;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS; /* fell off the end: invalid */
}

/* Would this action harm the process (or hang the call)? */
static int harmful(uint32_t ret)
{
	uint32_t action = ret & SECCOMP_RET_ACTION_FULL;
	return action == SECCOMP_RET_KILL_PROCESS || action == SECCOMP_RET_KILL_THREAD ||
	       action == SECCOMP_RET_TRAP || action == SECCOMP_RET_USER_NOTIF;
}

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
	uint32_t worst[sizeof(calls) / sizeof(calls[0])];
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++)
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
		/* every filter runs; the action of the lowest signed value wins
		 * (KILL_PROCESS, 0x80000000, before all) */
		for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
			uint32_t r = run(prog, (int)n, calls[c].nr);
			if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) < (int32_t)(worst[c] & SECCOMP_RET_ACTION_FULL))
				worst[c] = r;
		}
	}
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++)
		if (harmful(worst[c])) {
			snprintf(why, len, "thread %d's seccomp filter would %s the process at the agent's %s()", (int)tid,
				 (worst[c] & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF ? "hold up" : "kill",
				 calls[c].name);
			return 1;
		}
	return 0;
}

/*
 * seccompbpf.c - a seccomp filter run on the agent's system calls.
 *
 * A filter is a classic BPF program over struct seccomp_data (the call's
 * number, the architecture, the instruction pointer, six argument words);
 * it returns an action: let the call through (ALLOW, LOG), make it fail
 * (ERRNO, TRACE when nobody traces), or kill the thread or the process,
 * send it SIGSYS (TRAP) or hold it for a supervisor (USER_NOTIF).  The
 * agent must never make a call of the last kind.  The few instructions
 * filters use (loads, stores to scratch memory, ALU, jumps, returns) are
 * interpreted here; anything else counts as a kill, as does a program
 * that would fall off its end (the kernel would have refused it).
 *
 * What the agent's calls pass is not known here (and differs from call
 * to call), so each runs twice: with every argument word 0 and with every
 * bit set.  A filter that kills write() but to descriptors 0 to 2 (the
 * agent's are high) is caught by the second run; one that kills mmap with
 * PROT_EXEC too, though the agent never asks for it: it errs on the side
 * of the program.
 */
#include "seccompbpf.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/syscall.h>

/* strace of rhea record and rhea attach, and every SYS_ and system call
 * wrapper the agent's sources name. */
const struct seccomp_agent_call seccomp_agent_calls[] = {
	{SYS_read, "read"}, {SYS_write, "write"}, {SYS_openat, "openat"}, {SYS_close, "close"},
	{SYS_newfstatat, "newfstatat"}, {SYS_fstat, "fstat"}, {SYS_lseek, "lseek"}, {SYS_pread64, "pread64"},
	{SYS_mmap, "mmap"}, {SYS_mprotect, "mprotect"}, {SYS_munmap, "munmap"}, {SYS_madvise, "madvise"},
	{SYS_mremap, "mremap"}, {SYS_brk, "brk"}, {SYS_readlink, "readlink"}, {SYS_getdents64, "getdents64"},
	{SYS_mkdir, "mkdir"}, {SYS_rename, "rename"}, {SYS_unlink, "unlink"}, {SYS_rmdir, "rmdir"},
	{SYS_access, "access"}, {SYS_faccessat, "faccessat"}, {SYS_linkat, "linkat"},
	{SYS_ftruncate, "ftruncate"}, {SYS_futex, "futex"}, {SYS_nanosleep, "nanosleep"},
	{SYS_clock_nanosleep, "clock_nanosleep"}, {SYS_sched_yield, "sched_yield"}, {SYS_getrusage, "getrusage"},
	{SYS_gettid, "gettid"}, {SYS_getpid, "getpid"}, {SYS_getppid, "getppid"}, {SYS_geteuid, "geteuid"},
	{SYS_uname, "uname"}, {SYS_prctl, "prctl"}, {SYS_clone3, "clone3"}, {SYS_clone, "clone"},
	{SYS_set_robust_list, "set_robust_list"}, {SYS_rseq, "rseq"}, {SYS_rt_sigaction, "rt_sigaction"},
	{SYS_rt_sigprocmask, "rt_sigprocmask"}, {SYS_rt_sigreturn, "rt_sigreturn"},
	{SYS_sigaltstack, "sigaltstack"}, {SYS_timer_create, "timer_create"}, {SYS_timer_settime, "timer_settime"},
	{SYS_timer_delete, "timer_delete"}, {SYS_getrandom, "getrandom"}, {SYS_fcntl, "fcntl"},
	{SYS_dup2, "dup2"}, {SYS_dup3, "dup3"}, {SYS_exit, "exit"}, {SYS_tgkill, "tgkill"},
	{SYS_clock_gettime, "clock_gettime"}, {SYS_sched_getaffinity, "sched_getaffinity"}, {SYS_statx, "statx"},
	{SYS_memfd_create, "memfd_create"}, {SYS_process_vm_readv, "process_vm_readv"}, {SYS_pipe2, "pipe2"},
	{SYS_sysinfo, "sysinfo"}, {SYS_prlimit64, "prlimit64"}, {SYS_socket, "socket"}, {SYS_connect, "connect"},
	{SYS_sendmsg, "sendmsg"}, {SYS_fstatfs, "fstatfs"},
};
const size_t seccomp_agent_ncalls = sizeof(seccomp_agent_calls) / sizeof(seccomp_agent_calls[0]);
_Static_assert(sizeof(seccomp_agent_calls) / sizeof(seccomp_agent_calls[0]) <= SECCOMP_AGENT_CALLS_MAX,
	       "SECCOMP_AGENT_CALLS_MAX");

uint32_t seccomp_bpf_run(const struct sock_filter *f, int n, int nr, uint64_t arg)
{
	struct seccomp_data d;
	memset(&d, 0, sizeof(d));
	d.nr = nr;
	d.arch = AUDIT_ARCH_X86_64;
	d.instruction_pointer = arg;
	for (int i = 0; i < 6; i++)
		d.args[i] = arg;
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
	for (int pc = 0; pc >= 0 && pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;
			if (BPF_MODE(i->code) == BPF_ABS && BPF_SIZE(i->code) == BPF_W && i->k % 4 == 0 &&
			    i->k <= sizeof(d) - 4) /* (not k + 4: it wraps) */
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
			case BPF_JA:
				/* forward only, as the kernel checks (later: a
				 * program not yet checked could loop forever) */
				if (i->k >= (uint32_t)(n - pc - 1))
					return SECCOMP_RET_KILL_PROCESS;
				pc += (int)i->k;
				continue;
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
	return SECCOMP_RET_KILL_PROCESS;
}

int seccomp_bpf_harmful(uint32_t ret)
{
	uint32_t action = ret & SECCOMP_RET_ACTION_FULL;
	return action == SECCOMP_RET_KILL_PROCESS || action == SECCOMP_RET_KILL_THREAD ||
	       action == SECCOMP_RET_TRAP || action == SECCOMP_RET_USER_NOTIF;
}

/* The kernel's precedence: the lowest action as a signed number wins
 * (KILL_PROCESS, 0x80000000, before all). */
static void keep_worst(uint32_t *worst, uint32_t r)
{
	if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) < (int32_t)(*worst & SECCOMP_RET_ACTION_FULL))
		*worst = r;
}

void seccomp_bpf_fold(const struct sock_filter *f, int n, uint32_t *worst)
{
	for (size_t c = 0; c < seccomp_agent_ncalls; c++) {
		keep_worst(&worst[c], seccomp_bpf_run(f, n, seccomp_agent_calls[c].nr, 0));
		keep_worst(&worst[c], seccomp_bpf_run(f, n, seccomp_agent_calls[c].nr, ~(uint64_t)0));
	}
}

int seccomp_bpf_first_harmful(const uint32_t *worst)
{
	for (size_t c = 0; c < seccomp_agent_ncalls; c++)
		if (seccomp_bpf_harmful(worst[c]))
			return (int)c;
	return -1;
}

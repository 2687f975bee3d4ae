/* Unit tests of core/seccompbpf.c: seccomp filters run on the agent's
 * system calls (which rhea attach and the agent's seccomp hooks trust to
 * tell a harmless filter from one that would kill the process). */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>

#include "seccompbpf.h"
#include "xorshift.h"

/* The fuzz entry point, run below on random programs. */
#include "../fuzz/fuzz_seccomp.c"

#define N(f) ((int)(sizeof(f) / sizeof((f)[0])))
#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static int call_index(int nr)
{
	for (size_t c = 0; c < seccomp_agent_ncalls; c++)
		if (seccomp_agent_calls[c].nr == nr)
			return (int)c;
	return -1;
}

/* worst[] of the agent's calls under these filters */
static int judge(const struct sock_filter *f1, int n1, const struct sock_filter *f2, int n2)
{
	uint32_t worst[SECCOMP_AGENT_CALLS_MAX];
	for (size_t c = 0; c < seccomp_agent_ncalls; c++)
		worst[c] = SECCOMP_RET_ALLOW;
	seccomp_bpf_fold(f1, n1, worst);
	if (f2)
		seccomp_bpf_fold(f2, n2, worst);
	return seccomp_bpf_first_harmful(worst);
}

Test(seccomp, allow_all_and_deny_lists_of_other_calls_are_harmless)
{
	struct sock_filter all[] = {RET(SECCOMP_RET_ALLOW)};
	cr_expect_eq(judge(all, N(all), NULL, 0), -1);
	struct sock_filter deny[] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mount, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrusage, 2, 0),
		RET(SECCOMP_RET_ALLOW),
		RET(SECCOMP_RET_KILL_PROCESS),
		RET(SECCOMP_RET_ERRNO | EPERM),
	};
	/* mount: no call of the agent's; getrusage only fails */
	cr_expect_eq(judge(deny, N(deny), NULL, 0), -1);
	cr_expect_eq(seccomp_bpf_run(deny, N(deny), SYS_mount, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(deny, N(deny), SYS_getrusage, 0), SECCOMP_RET_ERRNO | EPERM);
	cr_expect_eq(seccomp_bpf_run(deny, N(deny), SYS_read, 0), SECCOMP_RET_ALLOW);
}

Test(seccomp, kill_trap_and_supervisor_are_harmful)
{
	static const uint32_t bad[] = {SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_KILL_THREAD, SECCOMP_RET_TRAP,
				       SECCOMP_RET_USER_NOTIF};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sock_filter f[] = {
			LD_NR,
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_timer_create, 0, 1),
			RET(bad[i]),
			RET(SECCOMP_RET_ALLOW),
		};
		cr_expect_eq(judge(f, N(f), NULL, 0), call_index(SYS_timer_create), "action %#x", bad[i]);
	}
	static const uint32_t fine[] = {SECCOMP_RET_ERRNO | 1, SECCOMP_RET_TRACE, SECCOMP_RET_LOG};
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		struct sock_filter f[] = {RET(fine[i])};
		cr_expect_eq(judge(f, N(f), NULL, 0), -1, "action %#x", fine[i]);
	}
}

Test(seccomp, an_argument_check_is_judged_on_both_ends)
{
	/* write() only to descriptors 0..2 */
	struct sock_filter f[] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
		RET(SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 1),
		RET(SECCOMP_RET_KILL_PROCESS),
		RET(SECCOMP_RET_ALLOW),
	};
	cr_expect_eq(seccomp_bpf_run(f, N(f), SYS_write, 0), SECCOMP_RET_ALLOW);
	cr_expect_eq(seccomp_bpf_run(f, N(f), SYS_write, ~(uint64_t)0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(judge(f, N(f), NULL, 0), call_index(SYS_write));
}

Test(seccomp, filters_combine_by_precedence)
{
	struct sock_filter eperm[] = {RET(SECCOMP_RET_ERRNO | EPERM)};
	struct sock_filter kill_rusage[] = {
		LD_NR,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrusage, 0, 1),
		RET(SECCOMP_RET_KILL_THREAD),
		RET(SECCOMP_RET_ALLOW),
	};
	/* KILL_THREAD (0) wins over ERRNO, whichever came first */
	cr_expect_eq(judge(eperm, N(eperm), kill_rusage, N(kill_rusage)), call_index(SYS_getrusage));
	cr_expect_eq(judge(kill_rusage, N(kill_rusage), eperm, N(eperm)), call_index(SYS_getrusage));
	cr_expect_eq(judge(eperm, N(eperm), eperm, N(eperm)), -1);
}

Test(seccomp, the_architecture_check_passes_on_x86_64)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		RET(SECCOMP_RET_KILL_PROCESS),
		LD_NR,
		/* x32's calls (bit 30) killed, as libseccomp's filters do */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
		RET(SECCOMP_RET_KILL_PROCESS),
		RET(SECCOMP_RET_ALLOW),
	};
	cr_expect_eq(judge(f, N(f), NULL, 0), -1);
}

Test(seccomp, scratch_memory_and_alu)
{
	/* A = nr; M[3] = A; A = (A * 4 + 6) & 0xff; X = A; A = M[3]; return X if nr == 39 */
	struct sock_filter f[] = {
		LD_NR,
		BPF_STMT(BPF_ST, 3),
		BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 4),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 6),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
		BPF_STMT(BPF_MISC | BPF_TAX, 0),
		BPF_STMT(BPF_LD | BPF_MEM, 3),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 39, 0, 2),
		BPF_STMT(BPF_MISC | BPF_TXA, 0),
		BPF_STMT(BPF_RET | BPF_A, 0),
		RET(SECCOMP_RET_ALLOW),
	};
	cr_expect_eq(seccomp_bpf_run(f, N(f), 39, 0), (39 * 4 + 6) & 0xff);
	cr_expect_eq(seccomp_bpf_run(f, N(f), 40, 0), SECCOMP_RET_ALLOW);
}

Test(seccomp, what_cannot_be_run_counts_as_a_kill)
{
	/* an unknown instruction class, a division by zero, no return */
	struct sock_filter bad_op[] = {BPF_STMT(BPF_LD | BPF_W | BPF_IND, 0), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter div0[] = {BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter no_ret[] = {LD_NR};
	cr_expect_eq(seccomp_bpf_run(bad_op, N(bad_op), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(div0, N(div0), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(no_ret, N(no_ret), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(judge(no_ret, N(no_ret), NULL, 0), 0);
}

Test(seccomp, a_load_past_seccomp_data_counts_as_a_kill)
{
	/* the agent judges a filter before the kernel checks it: offset
	 * 0xfffffffc passed a test of k + 4 <= the size (it wrapped to 0),
	 * and the load read 4 GB away (libFuzzer: SEGV) */
	struct sock_filter wrap[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0xfffffffcu), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter past[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)),
				     RET(SECCOMP_RET_ALLOW)};
	struct sock_filter last[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data) - 4),
				     BPF_STMT(BPF_RET | BPF_A, 0)};
	cr_expect_eq(seccomp_bpf_run(wrap, N(wrap), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(past, N(past), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	/* the high word of the sixth argument */
	cr_expect_eq(seccomp_bpf_run(last, N(last), SYS_read, ~(uint64_t)0), 0xffffffffu);
	cr_expect_eq(seccomp_bpf_run(last, N(last), SYS_read, 0), 0);
}

Test(seccomp, a_jump_backwards_or_past_the_end_ends_the_run, .timeout = 10)
{
	/* the agent judges a filter before the kernel checks it: a jump of
	 * -1 (0xffffffff) looped forever on its own instruction */
	struct sock_filter back[] = {BPF_STMT(BPF_JMP | BPF_JA, 0xffffffffu), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter far[] = {BPF_STMT(BPF_JMP | BPF_JA, 1), RET(SECCOMP_RET_ALLOW)};
	struct sock_filter skip[] = {BPF_STMT(BPF_JMP | BPF_JA, 1), RET(SECCOMP_RET_KILL_THREAD), RET(SECCOMP_RET_ALLOW)};
	cr_expect_eq(seccomp_bpf_run(back, N(back), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(far, N(far), SYS_read, 0), SECCOMP_RET_KILL_PROCESS);
	cr_expect_eq(seccomp_bpf_run(skip, N(skip), SYS_read, 0), SECCOMP_RET_ALLOW);
}

/* Random programs through the fuzz entry point: every instruction class,
 * jump offsets and constants drawn from the edges (offsets that wrap, the
 * last word of seccomp_data, -1) as often as at random.  It must return:
 * a crash or a hang fails the test. */
Test(seccomp, fuzz_entry_on_random_programs, .timeout = 60)
{
	static const uint32_t edges[] = {0, 1, 2, 3, 4, 0x3c, 0x40, 0xfffffffcu, 0xfffffffeu, 0xffffffffu,
					  SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW, BPF_MEMWORDS, 0x7fffffff};
	struct sock_filter f[64];
	int returned = 0;
	for (int round = 0; round < 20000; round++) {
		int n = 1 + (int)(rng() % 64);
		for (int i = 0; i < n; i++) {
			uint64_t r = rng();
			f[i].code = (uint16_t)(r & 0xffff);
			f[i].jt = (uint8_t)(r >> 16);
			f[i].jf = (uint8_t)(r >> 24);
			f[i].k = (r >> 32) & 1 ? edges[(r >> 33) % (sizeof(edges) / sizeof(edges[0]))] : (uint32_t)rng();
		}
		int r = seccomp_fuzz_one((const uint8_t *)f, (size_t)n * sizeof(f[0]));
		cr_assert(r >= -1 && r < (int)seccomp_agent_ncalls, "round %d: %d", round, r);
		returned++;
	}
	cr_expect_eq(returned, 20000);
}

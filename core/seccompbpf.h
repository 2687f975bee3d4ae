/* seccompbpf.h - would a seccomp filter let the agent's system calls
 * through?  Shared by rhea attach (the filters a process runs under,
 * cli/seccomp.c) and the agent (a filter the program installs on itself,
 * agent/hooks.c).  Pure computation: no allocation, no system call. */
#ifndef RHEA_SECCOMPBPF_H
#define RHEA_SECCOMPBPF_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

/* The system calls dlopen of the agent and the agent's life make. */
struct seccomp_agent_call {
	int nr;
	const char *name;
};
#define SECCOMP_AGENT_CALLS_MAX 96 /* room for a worst[] of them */
extern const struct seccomp_agent_call seccomp_agent_calls[];
extern const size_t seccomp_agent_ncalls;

/* One filter (n instructions) run on x86-64 system call nr with every
 * argument word, and the instruction pointer, set to arg: the filter's
 * return value, SECCOMP_RET_KILL_PROCESS for an instruction this does not
 * know or a program that falls off its end. */
uint32_t seccomp_bpf_run(const struct sock_filter *f, int n, int nr, uint64_t arg);

/* Would this return value kill the caller, trap it or wait for a
 * supervisor?  (ERRNO, TRACE without a tracer, LOG and ALLOW only make
 * the call fail or let it through.) */
int seccomp_bpf_harmful(uint32_t ret);

/* Folds one filter into worst[SECCOMP_AGENT_CALLS_MAX] (start them at
 * SECCOMP_RET_ALLOW): for each of the agent's calls, the action of
 * highest precedence, as the kernel combines filters, over arguments all
 * 0 and all ones (a filter that judges by an argument is judged on both
 * ends: the agent's descriptors are high, its flags not the program's). */
void seccomp_bpf_fold(const struct sock_filter *f, int n, uint32_t *worst);

/* The first of the agent's calls worst[] says is harmful: its index, or -1. */
int seccomp_bpf_first_harmful(const uint32_t *worst);

#endif

/* seccomp.h - would the agent's system calls survive the process's
 * seccomp filters?  (rhea attach; see seccomp.c) */
#ifndef RHEA_SECCOMP_H
#define RHEA_SECCOMP_H

#include <stddef.h>
#include <sys/types.h>

/* Thread tid, stopped by the caller with ptrace: 0 when every system call
 * the agent makes is allowed or merely fails, 1 (why in why) when one
 * would kill the process, trap or wait for a supervisor, or when its
 * filters cannot be read. */
int seccomp_check(pid_t tid, char *why, size_t len);

/* How many seccomp filters thread tid runs under (-1: the kernel does
 * not say, before Linux 5.9).  rhea record passes its own to the agent,
 * which stays off in a process that starts under more (agent.c,
 * born_sandboxed). */
long seccomp_filters(pid_t tid);

#endif

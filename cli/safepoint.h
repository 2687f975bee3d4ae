/*
 * safepoint.h - may a thread stopped by ptrace be made to call dlopen?
 * Decided from its stack (rhea attach; see safepoint.c).
 */
#ifndef RHEA_SAFEPOINT_H
#define RHEA_SAFEPOINT_H

#include <stddef.h>
#include <sys/types.h>

enum safepoint_verdict {
	SAFEPOINT_UNKNOWN = 0, /* the stack could not be read to the end */
	SAFEPOINT_YES = 1,     /* in a wait, or code, that holds no lock of libc's */
	SAFEPOINT_NO = 2,      /* inside a libc function that may hold one */
};

struct safepoint;

/* A reader of pid's stacks (libdwfl, through ptrace): NULL when it cannot
 * be set up (the caller then decides without it). */
struct safepoint *safepoint_open(pid_t pid);

/* The verdict on thread tid of the process, which the caller has stopped
 * with ptrace: in a system call, or (running) in the middle of its code.
 * what (len bytes) gets the libc function the program called
 * ("pthread_cond_wait"), the function it was running, or why there is no
 * verdict. */
enum safepoint_verdict safepoint_check(struct safepoint *sp, pid_t tid, int running, char *what, size_t len);

void safepoint_close(struct safepoint *sp);

#endif

/* inject.h - make a running process load a library (rhea attach). */
#ifndef RHEA_INJECT_H
#define RHEA_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Make one thread of pid call dlopen(lib, RTLD_NOW), at a safe point
 * (inject.c says which), trying for up to timeout_ms, or until *cancel
 * (a signal handler's flag; NULL: none) is set between two tries.  0
 * (which thread, stopped where, in via), or -1 with one line in err. */
int inject_dlopen(pid_t pid, const char *lib, int timeout_ms, const volatile int *cancel, char *via, size_t vialen,
		  char *err, size_t errlen);

/* The same, calling fn(arg) (an int function at that address in pid, such
 * as the agent's rhea_attach_restart) instead of dlopen: its result in
 * *ret.  A process that exec'ed meanwhile is not tried again: -1. */
int inject_call(pid_t pid, uint64_t fn, const char *arg, int timeout_ms, const volatile int *cancel, char *via,
		size_t vialen, int *ret, char *err, size_t errlen);

/* Each line of /proc/PID/maps to fn until it returns non-zero: that value,
 * 0, or -1 when the file cannot be read. */
int inject_maps_each(pid_t pid, int (*fn)(const char *line, void *arg), void *arg);

/* len bytes at addr in pid's memory into buf: 0, or -1 (not all there). */
int inject_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Thread tid of pid is gone, or a zombie (as is a process that has ended
 * but was not reaped yet). */
int inject_task_gone(pid_t pid, pid_t tid);
/* The task's state letter from /proc/PID/task/TID/stat, 0 when gone. */
char inject_task_state(pid_t pid, pid_t tid);
/* Its stat's fields from the state on (past the name, which may hold
 * anything), read into buf (len bytes); NULL when gone. */
const char *inject_task_stat(pid_t pid, pid_t tid, char *buf, size_t len);
/* A number field ("TracerPid", "Seccomp"...) of /proc/TID/status; def
 * when it has none or cannot be read. */
long inject_status_number(pid_t tid, const char *key, long def);
/* Why the kernel would not let rhea trace pid (opening its memory or
 * PTRACE_ATTACH failed with EPERM, pid not another user's): yama's
 * ptrace_scope, capabilities pid holds and rhea lacks, or else a security
 * module or sandbox, as far as rhea can tell; a clause into why. */
void inject_ptrace_denied(pid_t pid, char *why, size_t n);
/* A thread other than the main one is alive (the main one may have
 * called pthread_exit). */
int inject_other_task_alive(pid_t pid);

#endif

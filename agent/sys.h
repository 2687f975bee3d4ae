/*
 * sys.h - the agent's system calls, never through syscall().
 *
 * librhea.so interposes syscall() (hooks.c): libseccomp installs its
 * filters with syscall(SYS_seccomp, ...), glibc having no wrapper, and the
 * agent must know before the filter is in force.  An interposed symbol is
 * also what the agent's own calls to syscall() bind to, so the agent is
 * built with -Dsyscall=rhea_syscall (Makefile): its own calls come here,
 * straight to the kernel, before the hooks are resolved, in signal
 * handlers, on a sealed thread.
 */
#ifndef RHEA_SYS_H
#define RHEA_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static inline long rhea_raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* syscall(2)'s contract: the result, or -1 with errno set.  Six argument
 * words are passed whatever the call takes, as glibc's syscall() does. */
long rhea_syscall(long nr, ...);

/* The same with its six words given (the syscall() hook's way through). */
long rhea_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6);

/* Copies len bytes at addr of our own address space (process_vm_readv:
 * an unmapped byte fails, no fault); -1 if any is unmapped.  Inline: the
 * unwinder reads stack words past its stack's bounds with it. */
static inline int rhea_read_own(uint64_t addr, void *buf, size_t len)
{
	if (addr < 4096 || addr + len < addr)
		return -1;
	struct iovec local = {buf, len};
	struct iovec remote = {(void *)(uintptr_t)addr, len};
	long pid = rhea_raw_syscall6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	long n = rhea_raw_syscall6(SYS_process_vm_readv, pid, (long)&local, 1, (long)&remote, 1, 0);
	return n == (long)len ? 0 : -1;
}

/* Sleep ns (under a second) by the raw system call: nanosleep is a hook,
 * and the agent sleeps in signal handlers and forked children too. */
static inline void rhea_sleep_ns(long ns)
{
	struct timespec ts = {0, ns};
	syscall(SYS_nanosleep, &ts, NULL);
}

/* fd moved up out of the program's way (or fd itself): see sys.c. */
int rhea_fd_high(int fd);
/* open(path, flags) put high at once; -1 and errno. */
int rhea_open_high(const char *path, int flags);

#endif

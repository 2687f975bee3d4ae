/*
 * sys.c - the agent's syscall() (sys.h says why it has its own), and where
 * its descriptors go.
 */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

long rhea_syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	return rhea_syscall6(nr, a1, a2, a3, a4, a5, a6);
}

long rhea_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long r = rhea_raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * The agent's descriptors live high, at half the soft limit on open files
 * (at most 1000: the kernel sizes a process's table to its highest
 * descriptor), out of the way of the low numbers programs pick and assume
 * (a shell's `exec 3>file`, a daemon's sockets from 3 up).  fd itself when
 * nothing higher is free.
 */
int rhea_fd_high(int fd)
{
	struct rlimit rl;
	long floor = 1000;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < 1000)
		floor = (long)rl.rlim_cur / 2;
	if (floor <= fd)
		return fd;
	int n = fcntl(fd, F_DUPFD_CLOEXEC, (int)floor);
	if (n < 0)
		return fd;
	syscall(SYS_close, fd);
	return n;
}

/* For a file held while the program runs on (the CFI compiler reads a
 * library for milliseconds, on the writer thread under rhea attach): a
 * low number taken so long is one another thread of the program may be
 * about to get from its own open, and find taken. */
int rhea_open_high(const char *path, int flags)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags);
	return fd < 0 ? fd : rhea_fd_high(fd);
}

/*
 * sys.c - the agent's syscall() (sys.h says why it has its own).
 */
#include "sys.h"

#include <errno.h>
#include <stdarg.h>

long rhea_syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	long r = rhea_raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * capdance - a process that keeps its capabilities across a change of
 * user and changes its groups after, as setpriv --reuid=N --regid=N and
 * libcap-ng's capng_change_id do.
 *
 *   capdance WAIT_MS
 *
 * Ground truth: the process sleeps WAIT_MS (nanosleep), then sets
 * PR_SET_KEEPCAPS, raises every capability it has (capset on its own
 * thread), changes to uid 65534 (setresuid), raises them again (the
 * change cleared the effective set), changes to gid 65534 (setresgid) and
 * drops its supplementary groups (setgroups); then it makes 5000
 * allocations of 48 bytes in dance_work(), prints "capdance uid 65534 gid
 * 65534" and exits 0.  glibc has every thread of the process make each
 * change, and aborts the process when one thread's fails: a tracer's
 * threads that keep no capability kill it.  Needs root (status 2 else).
 */
#define _GNU_SOURCE
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void dance_work(void)
{
	for (int i = 0; i < 5000; i++) {
		sink = malloc(48);
		free(sink);
	}
}

/* the permitted set made effective, on this thread */
static int raise_all(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	d[0].effective = d[0].permitted;
	d[1].effective = d[1].permitted;
	return (int)syscall(SYS_capset, &h, d);
}

int main(int argc, char **argv)
{
	if (argc != 2 || geteuid() != 0)
		return 2;
	long ms = atol(argv[1]);
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
	nanosleep(&ts, NULL);
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 || raise_all() != 0 || setresuid(65534, 65534, 65534) != 0 ||
	    raise_all() != 0 || setresgid(65534, 65534, 65534) != 0 || setgroups(0, NULL) != 0) {
		perror("capdance");
		return 1;
	}
	dance_work();
	printf("capdance uid %d gid %d\n", (int)getuid(), (int)getgid());
	return 0;
}

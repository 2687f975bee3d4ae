/*
 * daemonize - the classic daemon start: fork, setsid, fork again, close
 * every descriptor, open /dev/null as 0 and dup it to 1 and 2.
 *
 *   daemonize RESULT [N]
 *
 * The daemon then makes 2000 allocations of 56 bytes in daemon_work() and
 * checks that descriptors 0, 1 and 2 are /dev/null; it writes "fds ok"
 * (or what it found instead) to the file RESULT, and exits 0.  The first
 * two processes exit 0 at once.  A tracer that opens a descriptor of its
 * own in the daemon while it runs can take 0 from under it (its stdin,
 * and the stderr dup'ed from it, become the tracer's file).
 *
 * With N > 1 the daemon then forks N - 1 more, and each of the N closes
 * every descriptor from 3 up, over and over, for 300 ms, with 100
 * allocations of 24 bytes in storm_work() between two rounds; each
 * appends "PID COUNT" (its allocations there) to RESULT.  A tracer that
 * opens its file while the program runs, and leaves it unprotected for a
 * moment, loses it to one of these rounds.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void daemon_work(void)
{
	for (int i = 0; i < 2000; i++) {
		sink = malloc(56);
		free(sink);
	}
}

__attribute__((noinline)) void storm_work(void)
{
	for (int i = 0; i < 100; i++) {
		sink = malloc(24);
		free(sink);
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int storm(const char *result, int n, int limit)
{
	for (int i = 1; i < n; i++)
		if (fork() == 0)
			break;
	long count = 0;
	for (double t0 = now_ms(); now_ms() - t0 < 300;) {
		storm_work();
		count += 100;
		for (int fd = 3; fd < limit; fd++)
			close(fd);
	}
	FILE *f = fopen(result, "a");
	if (!f)
		return 1;
	fprintf(f, "%d %ld\n", (int)getpid(), count);
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3)
		return 2;
	int procs = argc == 3 ? atoi(argv[2]) : 1;
	fflush(stdout);
	if (fork() != 0)
		_exit(0);
	setsid();
	if (fork() != 0)
		_exit(0);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1;
	for (int fd = 0; fd < (int)rl.rlim_cur && fd < 65536; fd++)
		close(fd);
	int in = open("/dev/null", O_RDWR), out = dup(0), err = dup(0);
	daemon_work();
	struct stat null, st;
	char what[256] = "";
	size_t n = 0;
	if (stat("/dev/null", &null) != 0)
		return 1;
	for (int fd = 0; fd < 3; fd++)
		if (fstat(fd, &st) != 0 || st.st_rdev != null.st_rdev || !S_ISCHR(st.st_mode))
			n += (size_t)snprintf(what + n, sizeof(what) - n, " %d is not /dev/null", fd);
	if (in != 0 || out != 1 || err != 2)
		n += (size_t)snprintf(what + n, sizeof(what) - n, " open/dup gave %d %d %d", in, out, err);
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "%s\n", n ? what + 1 : "fds ok");
	fclose(f);
	return procs > 1 ? storm(argv[1], procs, (int)(rl.rlim_cur < 65536 ? rl.rlim_cur : 65536)) : 0;
}

/*
 * tidreuse - two threads, one after the other, under the same tid.
 *
 * Run as root in a pid namespace of its own (unshare --pid --fork
 * --mount-proc): after the first thread ("first": 1000 allocations of 100
 * bytes) ends, the namespace's last pid is set to the one before its tid
 * (/proc/sys/kernel/ns_last_pid), so that the second ("second": 2000 of
 * 200 bytes) gets the same tid, as the kernel gives tids again once it has
 * gone round pid_max.  Prints "reused TID" when it did, "not reused A B"
 * when the namespace would not.
 *
 * Expected: two threads of that tid in the recording, one per life, each
 * with its own name, allocations and span (they were one thread, the
 * allocations summed, the wall from the first's start to the second's
 * end).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t tids[2];
static void *volatile sink;

static void __attribute__((noinline)) allocate(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(size);
		sink = p;
		free(p);
		if (i % 100 == 0) {
			struct timespec ts = {0, 200000};
			nanosleep(&ts, NULL);
		}
	}
}

static void *first(void *arg)
{
	pthread_setname_np(pthread_self(), "first");
	tids[0] = (pid_t)syscall(SYS_gettid);
	allocate(1000, 100);
	return arg;
}

static void *second(void *arg)
{
	pthread_setname_np(pthread_self(), "second");
	tids[1] = (pid_t)syscall(SYS_gettid);
	allocate(2000, 200);
	return arg;
}

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, first, NULL);
	pthread_join(t, NULL);
	/* (let the agent's sampler see it gone: it scans every 100 ms) */
	struct timespec ts = {0, 300000000};
	nanosleep(&ts, NULL);
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "%d", (int)tids[0] - 1);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		perror("ns_last_pid");
	if (fd >= 0)
		close(fd);
	pthread_create(&t, NULL, second, NULL);
	pthread_join(t, NULL);
	if (tids[0] == tids[1])
		printf("reused %d\n", (int)tids[0]);
	else
		printf("not reused %d %d\n", (int)tids[0], (int)tids[1]);
	return 0;
}

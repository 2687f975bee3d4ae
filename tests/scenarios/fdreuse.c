/*
 * fdreuse - a program that closes every descriptor, gets the number of the
 * memfd rhea record shared with the agent back for a file of its own,
 * forks, and is then killed with SIGKILL.
 *
 * Ground truth: after close_range(3, ~0) the program opens /dev/null until
 * it holds the number RHEA_SALVAGE_FD names (the agent's memory stays
 * mapped: closing the descriptor does not unmap it).  That descriptor is
 * the program's now: the agent must never close it (in the forked child)
 * nor change its close-on-exec flag.  Prints "child: open" from the child
 * and "parent: flags 0" from the parent, then runs final_spin() for 40 ms
 * and kills itself: the recording must still be recovered.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void spin(int ms)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		void *p = malloc(64);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

__attribute__((noinline)) void final_spin(void)
{
	spin(40);
	__asm__ volatile("");
}

int main(void)
{
	const char *v = getenv("RHEA_SALVAGE_FD");
	int want = v ? atoi(v) : -1;
	if (want < 3) {
		puts("no RHEA_SALVAGE_FD");
		return 2;
	}
	close_range(3, ~0U, 0);
	int fd = -1;
	while (fd < want) {
		fd = open("/dev/null", O_RDONLY);
		if (fd < 0) {
			perror("open");
			return 2;
		}
	}
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		printf("child: %s\n", fcntl(want, F_GETFD) >= 0 ? "open" : "closed");
		fflush(stdout);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	printf("parent: flags %d\n", fcntl(want, F_GETFD));
	fflush(stdout);
	final_spin();
	kill(getpid(), SIGKILL);
	return 0;
}

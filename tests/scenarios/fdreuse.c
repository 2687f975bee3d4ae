/*
 * fdreuse - a program that looks at its descriptors, closes every one of
 * them, forks, and is then killed with SIGKILL.
 *
 * Ground truth: the agent maps the memfd rhea record shares with it
 * through /proc and keeps no descriptor of it: the program sees none
 * ("salvage fds: 0") that could collide with its own numbers, leak into
 * what it execs or be closed by it.  After close_range(3, ~0) and a fork
 * (the child's copy of the agent's memory is its own), final_spin() runs
 * for 40 ms and the process kills itself: the recording must still be
 * recovered, the memory mapped whatever the descriptors.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Descriptors of this process that name a memfd called rhea-salvage. */
static int salvage_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char path[300], link[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l > 0) {
			link[l] = 0;
			n += strstr(link, "memfd:rhea-salvage") != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	printf("salvage fds: %d\n", salvage_fds());
	fflush(stdout);
	close_range(3, ~0U, 0);
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	final_spin();
	kill(getpid(), SIGKILL);
	return 0;
}

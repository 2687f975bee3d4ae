/*
 * chrooter - a process that jails itself with chroot, as a daemon's
 * worker does (sshd's privilege separation child in /run/sshd, vsftpd's
 * sessions, bind -t).
 *
 *   chrooter JAIL self|fork
 *
 * Ground truth.  self: the program chroots into JAIL (made if missing),
 * makes 3000 allocations of 40 bytes in jailed_work(), prints "self ok"
 * and returns 0 from main.  fork: the program forks a child that chroots
 * into JAIL and does the same work; that child forks a grandchild, inside
 * the jail, which makes 500 allocations of 16 bytes in grandchild_work()
 * and exits 0; the child waits for it and exits with 0 when it did, else
 * 1.  The parent makes 1000 allocations of 24 bytes in parent_work(),
 * waits, prints "child PID grandchild PID status 0" and exits 0.  Needs
 * root (chroot); status 2 otherwise.
 *
 * Expected under rhea record: the jailed process's recording exists, made
 * where asked before the chroot (its path outside leads nowhere inside),
 * with its 3000 allocations; the grandchild, born inside the jail, where
 * it cannot make one, has one that rhea record made for it, with its 500.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

__attribute__((noinline)) void jailed_work(void)
{
	for (int i = 0; i < 3000; i++) {
		sink = malloc(40);
		free(sink);
	}
}

__attribute__((noinline)) void grandchild_work(void)
{
	for (int i = 0; i < 500; i++) {
		sink = malloc(16);
		free(sink);
	}
}

__attribute__((noinline)) void parent_work(void)
{
	for (int i = 0; i < 1000; i++) {
		sink = malloc(24);
		free(sink);
	}
}

static int jail_in(const char *jail)
{
	return chroot(jail) == 0 && chdir("/") == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[2], "self") && strcmp(argv[2], "fork")))
		return 2;
	if (geteuid() != 0)
		return 2;
	mkdir(argv[1], 0755);
	if (strcmp(argv[2], "self") == 0) {
		if (jail_in(argv[1]) != 0)
			return 1;
		jailed_work();
		printf("self ok\n");
		return 0;
	}
	int pfd[2];
	if (pipe(pfd) != 0)
		return 1;
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		/* at once: a hooked call before would have the agent name its
		 * file now and then, before the chroot, by chance */
		if (jail_in(argv[1]) != 0)
			_exit(1);
		close(pfd[0]);
		jailed_work();
		pid_t g = fork();
		if (g == 0) {
			grandchild_work();
			_exit(0);
		}
		int st = 0;
		if (g < 0 || waitpid(g, &st, 0) != g)
			_exit(1);
		if (write(pfd[1], &g, sizeof(g)) != (ssize_t)sizeof(g))
			_exit(1);
		_exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
	}
	close(pfd[1]);
	parent_work();
	pid_t g = 0;
	if (read(pfd[0], &g, sizeof(g)) != (ssize_t)sizeof(g))
		g = 0;
	int st;
	if (waitpid(child, &st, 0) != child)
		return 1;
	printf("child %d grandchild %d status %d\n", (int)child, (int)g, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}

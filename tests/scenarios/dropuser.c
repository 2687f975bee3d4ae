/*
 * dropuser - a server's worker as nginx, apache or postfix make them: the
 * process forks, and the child gives up root (setgroups, setgid, setuid
 * to nobody) before it works.
 *
 * Ground truth: the child makes N = 20000 allocations of 40 bytes in
 * worker_work(), prints "worker uid 65534" and exits 0; the parent waits
 * for it, makes N allocations of 24 bytes in parent_work() and prints
 * "parent ok".  Run as root (it fails with status 2 otherwise).
 *
 * Expected under rhea record (as root, its output in a directory nobody
 * may write to): the child's recording exists, created before the child
 * gave up its rights, and counts its N allocations; the child ends with
 * status 0.
 *
 * With the argument "exec", the child execs this program again (argument
 * "worker") once it is nobody, as su's child runs the user's shell (or
 * gosu, setpriv, su-exec a container's server): that program may not
 * create its own recording there; rhea record creates it for it, and it
 * counts the worker's N allocations.
 *
 * With the argument "block", the child, once nobody, also retitles itself
 * "dropuser: worker" (as setproctitle does: the title over its argument
 * area, NUL-padded) and starts reader_thread, which blocks in read() on a
 * pipe nobody writes to; after its work the child sleeps BLOCK_MS = 1200 ms
 * in nanosleep and ends by _exit(0), the reader still blocked.  Its
 * process is no longer dumpable (it gave up root): its /proc files belong
 * to root.  Expected: the child's recording has the new title as its
 * command line, and the reader's read as a wait of about the child's life
 * (>= BLOCK_MS) among what was blocked at the end, in reader_thread.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 20000
#define NOBODY 65534
#define BLOCK_MS 1200

volatile unsigned long sink;

__attribute__((noinline)) void worker_work(void)
{
	for (int i = 0; i < N; i++) {
		void *p = malloc(40);
		sink += (unsigned long)p;
		free(p);
	}
}

__attribute__((noinline)) void parent_work(void)
{
	for (int i = 0; i < N; i++) {
		void *p = malloc(24);
		sink += (unsigned long)p;
		free(p);
	}
}

static int pipe_fds[2];

__attribute__((noinline)) void *reader_thread(void *arg)
{
	(void)arg;
	char c;
	if (read(pipe_fds[0], &c, 1) != 0) /* nobody writes: blocks for good */
		perror("read");
	return NULL;
}

/* The title over the whole argument area, NUL-padded (setproctitle). */
static void retitle(int argc, char **argv, const char *title)
{
	char *end = argv[argc - 1] + strlen(argv[argc - 1]);
	size_t room = (size_t)(end - argv[0]);
	memset(argv[0], 0, room);
	memcpy(argv[0], title, strlen(title) < room ? strlen(title) : room);
}

/* The child's life in "block" mode, once nobody. */
static void blocked_worker(int argc, char **argv)
{
	retitle(argc, argv, "dropuser: worker");
	pthread_t th;
	if (pipe(pipe_fds) != 0 || pthread_create(&th, NULL, reader_thread, NULL) != 0) {
		perror("reader");
		_exit(1);
	}
	worker_work();
	printf("worker uid %d\n", (int)getuid());
	fflush(stdout);
	struct timespec ts = {BLOCK_MS / 1000, (BLOCK_MS % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "worker") == 0) { /* exec'ed as nobody */
		worker_work();
		printf("worker uid %d\n", (int)getuid());
		fflush(stdout);
		return 0;
	}
	int exec_worker = argc > 1 && strcmp(argv[1], "exec") == 0;
	if (geteuid() != 0) {
		fprintf(stderr, "dropuser: run as root\n");
		return 2;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		gid_t none[1] = {NOBODY};
		if (setgroups(1, none) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0) {
			perror("dropping root");
			_exit(1);
		}
		if (argc > 1 && strcmp(argv[1], "block") == 0)
			blocked_worker(argc, argv);
		if (exec_worker) {
			execl("/proc/self/exe", argv[0], "worker", (char *)NULL);
			perror("exec");
			_exit(1);
		}
		worker_work();
		printf("worker uid %d\n", (int)getuid());
		fflush(stdout);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "dropuser: the worker failed\n");
		return 1;
	}
	parent_work();
	printf("parent ok\n");
	return 0;
}

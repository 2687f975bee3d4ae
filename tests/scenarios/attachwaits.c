/*
 * attachwaits - a process for rhea attach to find its safe point in while
 * it goes on.
 *
 *   attachwaits eintr
 *   attachwaits exec SECONDS
 *   attachwaits sleepexec SECONDS
 *
 * Prints "ready PID" first, then its main thread reads a line from stdin
 * (inside fgets: no place to load a library).
 *
 * eintr: two threads wait without a time limit, one in epoll_wait (on an
 * epoll set a pipe is in), one in semop on a System V semaphore; Linux
 * never restarts either when it is interrupted.  Each counts the EINTRs
 * it sees and waits again.  Once main has its line it wakes both (a byte
 * into the pipe, a semaphore post), joins them and prints "epoll_wait
 * EINTR N" and "semop EINTR M"; exit 0.
 *
 * exec: once main has its line it execs /bin/sleep SECONDS (in the middle
 * of a tracer's search for a safe point: the new image must not be given
 * the old one's addresses).
 *
 * sleepexec: no line is read; main sleeps 1.5 s in nanosleep (a place to
 * load a library), then execs /bin/sleep SECONDS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2], ep, sem;
static int epoll_eintr, semop_eintr;

static void *epoll_thread(void *arg)
{
	(void)arg;
	struct epoll_event ev;
	for (;;) {
		int n = epoll_wait(ep, &ev, 1, -1);
		if (n > 0)
			return NULL;
		if (n < 0 && errno == EINTR)
			epoll_eintr++;
	}
}

static void *semop_thread(void *arg)
{
	(void)arg;
	struct sembuf down = {0, -1, 0};
	for (;;) {
		if (semop(sem, &down, 1) == 0)
			return NULL;
		if (errno == EINTR)
			semop_eintr++;
		else
			return NULL;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "sleepexec") == 0) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		struct timespec ts = {1, 500000000};
		nanosleep(&ts, NULL);
		execl("/bin/sleep", "sleep", argc > 2 ? argv[2] : "1", (char *)NULL);
		return 1;
	}
	int exec_mode = strcmp(argv[1], "exec") == 0;
	pthread_t a, b;
	if (!exec_mode) {
		struct epoll_event ev = {.events = EPOLLIN};
		if (pipe(pipe_fds) != 0 || (ep = epoll_create1(0)) < 0 ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, pipe_fds[0], &ev) != 0 ||
		    (sem = semget(IPC_PRIVATE, 1, 0600)) < 0 || pthread_create(&a, NULL, epoll_thread, NULL) != 0 ||
		    pthread_create(&b, NULL, semop_thread, NULL) != 0)
			return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (exec_mode) {
		execl("/bin/sleep", "sleep", argc > 2 ? argv[2] : "1", (char *)NULL);
		return 1;
	}
	struct sembuf up = {0, 1, 0};
	if (write(pipe_fds[1], "x", 1) != 1 || semop(sem, &up, 1) != 0)
		return 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	semctl(sem, 0, IPC_RMID);
	printf("epoll_wait EINTR %d\nsemop EINTR %d\n", epoll_eintr, semop_eintr);
	return 0;
}

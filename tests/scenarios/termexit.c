/*
 * termexit - SIGTERM taken as the process exits, on the very thread that
 * is ending the recording.
 *
 * main makes 1000 allocations in exiting_work, starts a thread that waits
 * 50 ms and sends SIGTERM to main's thread (tgkill: no other thread can
 * take it), and calls _exit(0) at once.  Run with RHEA_TEST_FINISH_SLOW=1
 * the agent's end pauses 200 ms just after it claimed the end, so the
 * signal lands there, as a pool's SIGTERM did on a loaded machine when
 * Python's multiprocessing workers exited.
 *
 * Expected: the process dies of SIGTERM (the program's own end: _exit
 * then the pending signal) and its recording is whole, its end the exit's
 * with status 0, the 1000 allocations in it.  The end was once cut: the
 * handler waited a second for an end nobody else was writing, then died.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pid_t main_tid;
static void *volatile sink;

static void __attribute__((noinline)) exiting_work(void)
{
	for (int i = 0; i < 1000; i++) {
		void *p = malloc(64 + (size_t)i);
		sink = p;
		free(p);
	}
}

static void *terminator(void *arg)
{
	(void)arg;
	struct timespec ts = {0, 50000000};
	nanosleep(&ts, NULL);
	syscall(SYS_tgkill, getpid(), main_tid, SIGTERM);
	return NULL;
}

int main(void)
{
	main_tid = (pid_t)syscall(SYS_gettid);
	exiting_work();
	pthread_t th;
	if (pthread_create(&th, NULL, terminator, NULL) != 0)
		return 2;
	_exit(0);
}

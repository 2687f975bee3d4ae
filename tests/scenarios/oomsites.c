/*
 * oomsites - a program that leaks and is killed, as the OOM killer kills.
 *
 *   oomsites [fork]
 *
 * Ground truth: a second thread runs leak_b(), 700 x malloc(24) kept, then
 * one malloc(8) in last_b() (a site of its own, which ends leak_b's run),
 * and waits forever.  The main thread, once the worker is waiting, runs
 * leak_a(), 3000 x malloc(1000) kept, one malloc(8) in last_a(), says so
 * on stdout with write(2) (no allocation) and sends itself SIGKILL.  Everything takes a few milliseconds: no periodic
 * snapshot of the sites (once a second) comes before the kill.
 *
 * Expected: rhea record recovers the sites from the tables the threads
 * counted in (core/salvage.h): leak_a exactly 3000 allocations of
 * 3,000,000 bytes, leak_b exactly 700 of 16,800.  last_a's and last_b's
 * single allocations were the threads' latest runs, counted in their TLS
 * only: each is there with 1 or missing, never more.
 *
 * fork: the process first makes 50 x malloc(100) in leak_p(), then forks
 * a child that does all of the above (its own recording,
 * <base>.<pid>.rhea) and exits 0 once it has reaped it.  The child's
 * sites are its own: leak_a and leak_b as above, no leak_p (its table
 * starts empty, in a memfd of its own, never the parent's); the parent's
 * recording, ended normally, has leak_p 50 x 100 B and no leak_a or leak_b.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_A 3000
#define N_B 700

static void *volatile keep; /* the leaks stay reachable for nobody */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int worker_done;

static __attribute__((noinline)) void leak_a(void)
{
	for (int i = 0; i < N_A; i++)
		keep = malloc(1000);
}

static __attribute__((noinline)) void leak_b(void)
{
	for (int i = 0; i < N_B; i++)
		keep = malloc(24);
}

static __attribute__((noinline)) void leak_p(void)
{
	for (int i = 0; i < 50; i++)
		keep = malloc(100);
}

static __attribute__((noinline)) void last_a(void)
{
	keep = malloc(8);
}

static __attribute__((noinline)) void last_b(void)
{
	keep = malloc(8);
}

static void *worker(void *arg)
{
	(void)arg;
	leak_b();
	last_b();
	pthread_mutex_lock(&mu);
	worker_done = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	for (;;)
		pause();
	return NULL;
}

static int leak_and_die(void);

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "fork") == 0) {
		leak_p();
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			return leak_and_die();
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
			return 2;
		printf("oomsites: child %d killed\n", (int)pid);
		return 0;
	}
	return leak_and_die();
}

static int leak_and_die(void)
{
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	pthread_mutex_lock(&mu);
	while (!worker_done)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	leak_a();
	last_a();
	/* (write, not printf: stdio's first use would allocate its buffer,
	 * 4 KB, a thread's latest allocation counted in TLS only, which a
	 * sample taken in that write could count and the sites not) */
	static const char msg[] = "oomsites: killing myself\n";
	if (write(1, msg, sizeof(msg) - 1) != (ssize_t)sizeof(msg) - 1)
		return 3;
	raise(SIGKILL);
	return 0;
}

/*
 * sigwaiter - a program that blocks every signal and takes them itself,
 * with sigtimedwait and a signalfd, as servers with a signal thread do.
 *
 * Ground truth: nobody sends this process a signal.  The main thread
 * blocks all signals (the worker it starts inherits the mask); both
 * compute for COMPUTE_S seconds of their own CPU time (allocating, so
 * that the hooks see them), then each waits WAIT_MS for any signal with
 * sigtimedwait on a full set, and main then polls a signalfd of a full set
 * for WAIT_MS.  Prints "<who>: none" for each wait that timed out, or
 * "<who>: signal <n>" for a signal it received; exits 0 when none came.
 *
 * A third thread, the dozer, only sleeps, in the raw system call (no
 * hooked function, no CPU to sample), until the process ends.
 *
 * Expected under a tracer: the same output as without it.  A sampler that
 * fires its real-time signal at a thread that blocks it leaves it pending,
 * and the program's own wait then took it ("signal 63").
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COMPUTE_S 0.3
#define WAIT_MS 200

volatile unsigned long sink;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void compute(void)
{
	double t0 = cpu_s();
	while (cpu_s() - t0 < COMPUTE_S) {
		for (int i = 0; i < 20000; i++)
			sink += (unsigned long)i;
		void *p = malloc(32);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

/* 1 when a signal came. */
static int wait_any(const char *who)
{
	sigset_t all;
	sigfillset(&all);
	struct timespec to = {0, WAIT_MS * 1000000L};
	siginfo_t si;
	int sig = sigtimedwait(&all, &si, &to);
	if (sig < 0) {
		printf("%s: none\n", who);
		return 0;
	}
	printf("%s: signal %d\n", who, sig);
	return 1;
}

static int worker_got;

static void *worker(void *arg)
{
	(void)arg;
	compute();
	worker_got = wait_any("worker");
	return NULL;
}

static void *dozer(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {10, 0};
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return NULL;
}

int main(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_t th, dz;
	if (pthread_create(&th, NULL, worker, NULL) != 0 || pthread_create(&dz, NULL, dozer, NULL) != 0)
		return 1;
	compute();
	int got = wait_any("main");
	pthread_join(th, NULL);
	fflush(stdout);
	int fd = signalfd(-1, &all, SFD_CLOEXEC);
	if (fd < 0)
		return 1;
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, WAIT_MS) > 0) {
		struct signalfd_siginfo ssi;
		if (read(fd, &ssi, sizeof(ssi)) == (ssize_t)sizeof(ssi))
			printf("signalfd: signal %u\n", ssi.ssi_signo);
		got = 1;
	} else {
		printf("signalfd: none\n");
	}
	return got || worker_got;
}

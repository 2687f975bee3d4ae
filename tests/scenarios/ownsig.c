/*
 * ownsig: a program with its own SIGPROF and SIGALRM handlers driven by
 * setitimer, which also sleeps with nanosleep and checks for EINTR.
 * Ground truth: the output is the same with and without rhea: the number
 * of SIGALRM ticks within bounds, SIGPROF ticks counted, and every
 * interrupted nanosleep resumed to its full length (total sleep >= 200 ms).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t alrm, prof;

static void on_alrm(int sig) { (void)sig; alrm++; }
static void on_prof(int sig) { (void)sig; prof++; }

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_prof;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval it = {{0, 10000}, {0, 10000}};
	setitimer(ITIMER_REAL, &it, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	/* 200 ms of sleep in 20 ms naps, resumed after each signal. */
	int eintr = 0;
	for (int i = 0; i < 10; i++) {
		struct timespec req = {0, 20000000}, rem;
		while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
			eintr++;
			req = rem;
		}
	}
	/* 100 ms of CPU for ITIMER_PROF. */
	volatile unsigned long x = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 100);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	setitimer(ITIMER_PROF, &off, NULL);
	/* Coarse buckets so the output is the same on a noisy machine. */
	printf("alrm>=15:%d prof>=3:%d eintr>0:%d\n", alrm >= 15, prof >= 3, eintr > 0);
	return 0;
}

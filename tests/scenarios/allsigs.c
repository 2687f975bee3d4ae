/*
 * allsigs.c - a program that takes every real-time signal, as Go's
 * runtime does: no signal is left for rhea's sampler to move to.
 *
 *   allsigs [ms]
 *
 * Installs one SA_SIGINFO | SA_ONSTACK handler (an alternate stack set)
 * on every signal from SIGRTMIN to SIGRTMAX, then computes in spin() for
 * about `ms` (default 400) of CPU without calling anything hooked,
 * raising each real-time signal 3 times along the way.  Prints how many
 * signals it got, how many with SI_TKILL (raise) and any other si_code:
 * "allsigs got N raised N other 0" with N = 3 x the real-time signals.
 * Under rhea: the same line (the sampler's timer signals never reach the
 * program's handler), and the sampler still samples spin().
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile long got, raised, other;

static void on_sig(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	got++;
	if (si->si_code == SI_TKILL)
		raised++;
	else
		other++;
}

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static double spin(long n)
{
	double x = 1.0;
	for (long i = 0; i < n; i++)
		x = x * 1.0000001 + 1e-9;
	return x;
}

int main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 400;
	static char altstack[64 << 10];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
	sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sig;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	int nsig = 0;
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++, nsig++)
		if (sigaction(s, &sa, NULL) != 0) {
			perror("sigaction");
			return 1;
		}
	double t0 = cpu_ms(), x = 0;
	int round = 0;
	while (cpu_ms() - t0 < ms || round < 3) {
		x += spin(2000000);
		if (round < 3) {
			for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
				raise(s);
			round++;
		}
	}
	printf("allsigs got %ld raised %ld other %ld (%d signals)%s\n", got, raised, other, nsig,
	       x > 0 ? "" : "?");
	return 0;
}

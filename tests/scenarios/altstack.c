/*
 * altstack - a program with a small alternate signal stack, ended by a
 * signal it does not handle.
 *
 * Usage: altstack SIZE.  Ground truth: the program sets an alternate
 * signal stack of SIZE bytes (8192 is the traditional SIGSTKSZ; Rust and
 * libsigsegv programs set stacks that small, MINSIGSTKSZ-sized ones are
 * smaller), computes for COMPUTE_S seconds of CPU without calling anything
 * (only a sampler sees it), makes ALLOCS allocations of 64 bytes in work()
 * over about 200 ms, then sends itself SIGTERM, which it leaves at its
 * default action: it dies of signal 15.
 *
 * Expected under a tracer: the process still dies of SIGTERM, and the
 * recording ends "killed by signal 15" with work's allocations counted
 * exactly.  A tracer whose handlers ran on that stack (SA_ONSTACK) died
 * there: its fatal-signal handler compressing the last chunk (at 16 KB and
 * below), its sampler capturing a stack (at 4 KB, with the kernel's
 * AVX-512 signal frame on it); the process died of SIGSEGV.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ALLOCS 20000

#define COMPUTE_S 0.3

static char altstack[1 << 16];
volatile double sink;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void compute(void)
{
	double t0 = cpu_s(), x = 1;
	while (cpu_s() - t0 < COMPUTE_S)
		for (int i = 0; i < 100000; i++)
			x = x * 1.0000001 + 1e-9;
	sink = x;
}

__attribute__((noinline)) void work(void)
{
	for (int i = 0; i < ALLOCS; i++) {
		void *p = malloc(64);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		if (i % 100 == 0) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? (size_t)atol(argv[1]) : 8192;
	if (size > sizeof(altstack))
		size = sizeof(altstack);
	stack_t ss = {.ss_sp = altstack, .ss_size = size, .ss_flags = 0};
	if (sigaltstack(&ss, NULL) != 0) {
		perror("sigaltstack");
		return 1;
	}
	compute();
	work();
	fflush(stdout);
	kill(getpid(), SIGTERM);
	pause();
	return 0;
}

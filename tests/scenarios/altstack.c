/*
 * altstack - a program with a small alternate signal stack, ended by a
 * signal it does not handle.
 *
 * Usage: altstack SIZE.  Ground truth: the program sets an alternate
 * signal stack of SIZE bytes (8192 is the traditional SIGSTKSZ; Rust and
 * libsigsegv programs set stacks that small), makes ALLOCS allocations of
 * 64 bytes in work() over about 200 ms, then sends itself SIGTERM, which
 * it leaves at its default action: it dies of signal 15.
 *
 * Expected under a tracer whose handler for SIGTERM runs on that stack
 * (SA_ONSTACK): the process still dies of SIGTERM (a tracer that compressed
 * its last chunk there overflowed the stack and the process died of
 * SIGSEGV instead), and the recording ends "killed by signal 15" with
 * work's allocations counted exactly.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ALLOCS 20000

static char altstack[1 << 16];

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
	work();
	fflush(stdout);
	kill(getpid(), SIGTERM);
	pause();
	return 0;
}

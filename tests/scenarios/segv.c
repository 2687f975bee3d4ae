/*
 * segv - a crash after some work.
 *
 * Ground truth: pre_crash_work() runs PRE_N * PRE_EVERY = 60 million
 * xorshift steps (about 100 ms of CPU on a current x86-64 core), calling
 * malloc(PRE_SIZE) every PRE_EVERY steps: exactly PRE_N = 3000 allocations
 * of 40 bytes, spread over the whole run (kept, never freed, so none can
 * be elided).  Then crash() writes through a NULL pointer.  The program
 * installs no signal handler, so it dies of SIGSEGV (status 128 + 11 = 139
 * through rhea record).
 *
 * Expected in the recording: complete, end_reason "signal", end_status 11;
 * pre_crash_work appears among the functions and its allocation site has
 * count 3000, bytes 120000.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PRE_N 3000
#define PRE_SIZE 40
#define PRE_EVERY 20000

void *kept[PRE_N];
volatile uint64_t sink;
int *volatile null_ptr;

__attribute__((noinline)) void pre_crash_work(void)
{
	uint64_t x = sink | 88172645463325252ull;
	for (int n = 0; n < PRE_N; n++) {
		for (int i = 0; i < PRE_EVERY; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		kept[n] = malloc(PRE_SIZE);
		__asm__ volatile("" : : "r"(kept[n]) : "memory");
	}
	sink = x;
}

__attribute__((noinline)) void crash(void)
{
	*null_ptr = 42;
	sink++;
}

int main(void)
{
	pre_crash_work();
	puts("crashing");
	fflush(stdout);
	crash();
	puts("not reached");
	return 0;
}

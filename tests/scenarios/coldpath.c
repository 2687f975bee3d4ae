/*
 * coldpath - a function whose work is all on the part GCC splits off as
 * cold (a branch that calls a function marked cold goes to "work.cold",
 * placed apart, jumped to in work's own frame).
 *
 * Ground truth: work() runs N = 200000 iterations; each takes the "rare"
 * branch, which allocates 64 bytes once and spins a little.  Prints the
 * sum.  Built with gcc -O2, the binary has a local symbol work.cold.
 *
 * Expected: one function "work", no "work.cold": its inclusive time is the
 * loop's (the cold part's time counted in it) and its allocation site
 * counts all N allocations.
 */
#include <stdio.h>
#include <stdlib.h>

#define N 200000

volatile unsigned long sink;
volatile int flags[1024];

__attribute__((cold, noinline)) void note_rare(int i)
{
	sink += (unsigned long)i;
}

__attribute__((noinline)) unsigned long work(int n)
{
	unsigned long s = 0;
	for (int i = 0; i < n; i++) {
		if (flags[i & 1023]) {
			note_rare(i);
			void *p = malloc(64);
			sink += (unsigned long)p;
			free(p);
			for (volatile int k = 0; k < 1000; k++)
				sink += (unsigned long)k;
		}
		s += (unsigned long)i * 3;
	}
	return s;
}

int main(void)
{
	for (int i = 0; i < 1024; i++)
		flags[i] = 1;
	printf("%lu\n", work(N));
	return 0;
}

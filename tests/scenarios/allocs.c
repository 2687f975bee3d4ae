/*
 * allocs - exact allocation counting.
 *
 * Ground truth: make_allocs() calls malloc(ALLOC_SIZE) exactly ALLOC_N times
 * (N = 20000, S = 48 bytes) and nothing else in the program allocates from
 * make_allocs.  The pointers are kept in a global array and freed by another
 * function, so the compiler cannot pair and elide the malloc/free calls.
 *
 * Expected in the recording: an alloc_sites entry whose function is
 * "make_allocs" with count == 20000 and bytes == 20000 * 48 == 960000
 * exactly (the agent counts every allocation, not only sampled ones).
 * The program prints "allocs done" and exits 0.
 *
 * forkexec execs this program: keep it free of arguments.
 */
#include <stdio.h>
#include <stdlib.h>

#define ALLOC_N 20000
#define ALLOC_SIZE 48

void *slots[ALLOC_N];

__attribute__((noinline)) void make_allocs(void)
{
	for (int i = 0; i < ALLOC_N; i++) {
		slots[i] = malloc(ALLOC_SIZE);
		__asm__ volatile("" : : "r"(slots[i]) : "memory");
	}
}

__attribute__((noinline)) void free_allocs(void)
{
	for (int i = 0; i < ALLOC_N; i++)
		free(slots[i]);
}

int main(void)
{
	make_allocs();
	free_allocs();
	puts("allocs done");
	return 0;
}

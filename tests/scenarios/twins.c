/*
 * twins - two call paths that reach one allocation with the same stack
 * pointer and the same pc: only a return address differs.
 *
 * path_a() and path_b() have the same frame (they differ in a constant, so
 * that no compiler folds them into one) and main calls them alternately,
 * A B A B..., from one place.  Each call runs leaf(), which computes for
 * a while and then allocates: at the malloc hook the registers are the same
 * whichever path it is, and the two stacks differ only in the word that
 * holds leaf's return address.  A capture that took a thread's previous
 * stack for the current one whenever the registers match (without
 * checking what the stack holds) would give every capture the first
 * path's stack.
 *
 * Ground truth: path_a and path_b each run half of the calls, with the
 * same work on average (each call's length is drawn from its seed); each
 * has about half of their summed inclusive time.  Prints
 * "twins CHECKSUM".  Exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CALLS 6000
#define SPIN 40000

volatile uint64_t sink;

__attribute__((noinline)) static uint64_t leaf(uint64_t seed, int tag)
{
	uint64_t x = seed | 1;
	/* SPIN on average, each call a different count (from the seed, not
	 * the path): calls of one length would alias with the 1 ms capture
	 * grid (20 calls a millisecond: the captures fall on one path for a
	 * stretch), and the share would move far more than 350 independent
	 * captures let it (0.35 and 0.65 were seen) */
	int spin = SPIN / 2 + (int)((seed * 0x9e3779b97f4a7c15ull) >> 40) % SPIN;
	for (int i = 0; i < spin; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	char *p = malloc(16 + (x & 63));
	__asm__ volatile("" : : "r"(p) : "memory");
	p[0] = (char)tag;
	x += (uint64_t)p[0];
	free(p);
	return x;
}

__attribute__((noinline)) uint64_t path_a(uint64_t seed)
{
	uint64_t r = leaf(seed, 1);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

__attribute__((noinline)) uint64_t path_b(uint64_t seed)
{
	uint64_t r = leaf(seed, 2);
	__asm__ volatile("" ::: "memory");
	return r + 2;
}

int main(void)
{
	uint64_t (*const paths[2])(uint64_t) = {path_a, path_b};
	uint64_t s = 0;
	for (int i = 0; i < CALLS; i++)
		s += paths[i & 1](s + (uint64_t)i);
	sink = s;
	printf("twins %llu\n", (unsigned long long)(s & 0xffff));
	return 0;
}

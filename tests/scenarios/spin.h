/*
 * spin.h - for scenario programs: a clock and one step of busy work.
 * Static, header-only, always inlined (each scenario is one C file built
 * on its own, and the tests look for the caller's name on the stack).
 */
#ifndef SPIN_H
#define SPIN_H
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Step i of a computation on *x (xorshift); every 256th step also
 * allocates and frees a small block, so the hooks see it.  Returns 1 on
 * those steps. */
static inline __attribute__((always_inline)) int spin_step(uint64_t *x, long i)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	if ((i & 255) != 0)
		return 0;
	void *p = malloc(16 + (*x & 63));
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
	return 1;
}

#endif

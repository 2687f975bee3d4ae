/* xorshift.h - the unit tests' repeatable random numbers (xorshift64).
 * A test file may #define RNG_SEED before including it. */
#ifndef RHEA_TEST_XORSHIFT_H
#define RHEA_TEST_XORSHIFT_H

#include <stdint.h>

#ifndef RNG_SEED
#define RNG_SEED 88172645463325252ull
#endif

static uint64_t rng_state = RNG_SEED;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#endif

/*
 * micro_chain.c - a call chain of a chosen depth for bench/micro.c, compiled
 * twice: with -fno-omit-frame-pointer (CHAIN = chain_fp) and without
 * (CHAIN = chain_nofp), so that both unwinders can be measured on both kinds
 * of code.  Each level does a little work after the call (no tail call) and
 * calls the next through a volatile pointer (no inlining, no loop).
 */
#include <stdint.h>

#ifndef CHAIN
#error "build with -DCHAIN=chain_fp or -DCHAIN=chain_nofp"
#endif

typedef uint64_t (*chain_leaf_fn)(void *arg);

uint64_t CHAIN(int depth, chain_leaf_fn leaf, void *arg);

static uint64_t (*volatile next_level)(int, chain_leaf_fn, void *) = CHAIN;

__attribute__((noinline)) uint64_t CHAIN(int depth, chain_leaf_fn leaf, void *arg)
{
	volatile uint64_t local[4] = {(uint64_t)depth, 1, 2, 3}; /* a real frame */
	if (depth <= 1)
		return leaf(arg) + local[0];
	uint64_t r = next_level(depth - 1, leaf, arg);
	return r + local[1] + local[3];
}

/*
 * fuzz_seccomp.c - feed arbitrary seccomp filters to the judge the agent
 * runs on a filter before the kernel has checked it (core/seccompbpf.c).
 *
 * The input is taken as struct sock_filter instructions (up to 512); the
 * judge must return for every one of them, with no read outside its
 * scratch memory and struct seccomp_data, and no endless loop (the kernel
 * refuses backward jumps, but only after the agent has run the program).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 \
 *     -D_GNU_SOURCE -Icore tests/fuzz/fuzz_seccomp.c core/seccompbpf.c \
 *     -o build/fuzz_seccomp
 *   mkdir -p build/fuzz_seccomp_corpus
 *   build/fuzz_seccomp -max_total_time=300 -timeout=2 build/fuzz_seccomp_corpus
 *
 * tests/unit/test_seccomp.c includes this file and runs seccomp_fuzz_one
 * on random programs, so the entry point is built and run by make test.
 */
#include "seccompbpf.h"

#include <linux/seccomp.h>
#include <string.h>

int seccomp_fuzz_one(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* The index of the first harmful call, -1 none, -2 no instruction. */
int seccomp_fuzz_one(const uint8_t *data, size_t len)
{
	struct sock_filter f[512];
	size_t n = len / sizeof(f[0]);
	if (n == 0)
		return -2;
	if (n > sizeof(f) / sizeof(f[0]))
		n = sizeof(f) / sizeof(f[0]);
	memcpy(f, data, n * sizeof(f[0]));
	uint32_t worst[SECCOMP_AGENT_CALLS_MAX];
	for (size_t c = 0; c < seccomp_agent_ncalls; c++)
		worst[c] = SECCOMP_RET_ALLOW;
	seccomp_bpf_fold(f, (int)n, worst);
	return seccomp_bpf_first_harmful(worst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	seccomp_fuzz_one(data, len);
	return 0;
}

/*
 * deepstack - work at the bottom of a main-thread stack far deeper than
 * the kernel maps at exec (~132 KB: the stack grows as it is used).
 *
 *   deepstack [DEPTH]
 *
 * main calls descend() DEPTH times (default 3000), each frame holding a
 * 200-byte array (about 700 KB of stack at -O2); at the bottom, 50 times,
 * deep_work() makes exactly 60 allocations of 80 bytes (3000 in all) and
 * computes for about 2 ms.  Prints "deepstack CHECKSUM".
 *
 * A tracer that takes the stack's extent at start for its bounds finds
 * every frame down there outside it: frame-pointer walks stopped at the
 * hook, and the work had no stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *volatile sink;
static volatile unsigned long spin_sink;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) unsigned long deep_work(void)
{
	for (int i = 0; i < 60; i++) {
		sink = malloc(80);
		free(sink);
	}
	unsigned long x = 1;
	double t0 = now_ms();
	while (now_ms() - t0 < 2.0)
		for (int k = 0; k < 1000; k++)
			x = x * 6364136223846793005ul + 1442695040888963407ul;
	spin_sink = x;
	return x & 0xff;
}

__attribute__((noinline)) unsigned long descend(int n)
{
	volatile char frame[200];
	frame[0] = (char)n;
	frame[199] = (char)(n >> 8);
	if (n == 0) {
		unsigned long s = 0;
		for (int i = 0; i < 50; i++)
			s += deep_work();
		return s + (unsigned char)frame[0];
	}
	/* not a tail call: the frame stays while the callee runs */
	return descend(n - 1) + (unsigned char)frame[199];
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 3000;
	printf("deepstack %lu\n", descend(depth));
	return 0;
}

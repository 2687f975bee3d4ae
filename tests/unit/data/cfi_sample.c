/*
 * cfi_sample.c - a small program for tests/unit/test_cfi.c, compiled at run
 * time with unusual CFI layouts: without .eh_frame for its own functions
 * (-fno-asynchronous-unwind-tables -g: their CFI is in .debug_frame only,
 * compressed with -gz), and linked without .eh_frame_hdr.
 */
#include <stdio.h>

__attribute__((noinline)) int sample_leaf(int x)
{
	volatile int a[16];
	a[x & 15] = x;
	printf("%d\n", a[x & 15]);
	return a[x & 15] + 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	return sample_leaf(argc);
}

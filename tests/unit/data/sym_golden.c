/*
 * sym_golden.c - a small program for test_symbolize.c, compiled at test time
 * (cc -g -O0, as PIE, as non-PIE, and stripped with -rdynamic).  Its answers
 * come from nm and addr2line on the built binary; nothing here is run.
 *
 * The order of definitions matters: at -O0 gcc and clang emit functions and
 * top-level asm in source order, so golden_after_label directly follows the
 * size-0 label golden_sizeless, and golden_static follows golden_leaf.
 */
#include <stdio.h>
#include <stdlib.h>

int golden_leaf(int x)
{
	int y = x * 3;
	y += 1;
	return y;
}

/* Not exported: in the stripped build nothing names it. */
static int golden_static(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i * x;
	return s;
}

static inline __attribute__((always_inline)) int golden_inl(int x)
{
	int z = x + 7;
	z *= golden_leaf(z);
	return z;
}

int golden_caller(int x)
{
	int r = golden_inl(x); /* the call site addr2line -i reports */
	return golden_static(r);
}

/* A hand-written function without .size and without CFI: a size-0 symbol. */
__asm__(".text\n"
	".globl golden_sizeless\n"
	".type golden_sizeless, @function\n"
	"golden_sizeless:\n"
	"\tnop\n"
	"\tnop\n"
	"\tret\n");

static int golden_after_label(int x)
{
	int t = x;
	for (int i = 0; i < 3; i++)
		t = t * 5 + i;
	return t;
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d\n", golden_caller(argc) + golden_after_label(argc));
	return 0;
}

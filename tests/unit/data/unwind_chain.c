/*
 * unwind_chain.c - a known call chain for tests/unit/test_unwind.c, built by
 * the test at run time into a shared object, once with -fomit-frame-pointer
 * and once with -fno-omit-frame-pointer, whatever flags the test itself was
 * built with:
 *
 *   chain_start -> chain_a -> chain_b -> chain_c -> chain_d -> chain_e
 *
 * chain_e either captures its own registers (UNWIND_HERE) and hands them to
 * the test's callback, or, without a callback, spins until told to stop so
 * that a signal can interrupt it.  Every function keeps a live local array
 * and does work after its call: no inlining (exported from a -fPIC object,
 * so interposable), no tail calls, and a real stack frame to unwind.
 */
#include "unwind.h"

typedef int (*chain_cb)(const struct unwind_regs *r, void *arg);

struct chain_spin {
	volatile int spinning; /* set by chain_e once it spins */
	volatile int stop;     /* set by the test to end the spin */
};

#define CHAIN_FN __attribute__((noinline, visibility("default")))

CHAIN_FN int chain_e(int d, chain_cb cb, void *arg)
{
	volatile int pad[8];
	pad[d & 7] = d;
	if (cb) {
		struct unwind_regs r;
		UNWIND_HERE(&r);
		return cb(&r, arg) + pad[d & 7];
	}
	struct chain_spin *s = arg;
	s->spinning = 1;
	while (!s->stop)
		pad[0]++;
	return pad[d & 7];
}

#define CHAIN_STEP(name, next)                          \
	CHAIN_FN int name(int d, chain_cb cb, void *arg) \
	{                                               \
		volatile int pad[8];                    \
		pad[d & 7] = d;                         \
		int r = next(d + 1, cb, arg);           \
		return r + pad[d & 7];                  \
	}

CHAIN_STEP(chain_d, chain_e)
CHAIN_STEP(chain_c, chain_d)
CHAIN_STEP(chain_b, chain_c)
CHAIN_STEP(chain_a, chain_b)

CHAIN_FN int chain_start(chain_cb cb, void *arg)
{
	volatile int pad[4];
	pad[1] = 1;
	int r = chain_a(1, cb, arg);
	return r + pad[1];
}

/*
 * Two functions in assembly, for layouts a C compiler does not produce on
 * demand:
 *  - chain_noreturn(arg, cb) makes a 24-byte frame and calls cb, which never
 *    returns, as its very last instruction: the return address is the first
 *    byte of chain_after_noreturn, whose CFI (CFA = rsp+8) is not the
 *    caller's (CFA = rsp+32).  Only the row of ra - 1 is right.
 *  - chain_nocfi(arg, cb) keeps a frame-pointer frame and has no CFI at all:
 *    the walker must guess one frame through rbp.
 */
__asm__(".text\n"
	".globl chain_noreturn\n"
	".type chain_noreturn, @function\n"
	"chain_noreturn:\n"
	".cfi_startproc\n"
	"	sub $24, %rsp\n"
	".cfi_adjust_cfa_offset 24\n"
	"	call *%rsi\n"
	".cfi_endproc\n"
	".size chain_noreturn, .-chain_noreturn\n"
	".globl chain_after_noreturn\n"
	".type chain_after_noreturn, @function\n"
	"chain_after_noreturn:\n"
	".cfi_startproc\n"
	"	ret\n"
	".cfi_endproc\n"
	".size chain_after_noreturn, .-chain_after_noreturn\n"
	".globl chain_nocfi\n"
	".type chain_nocfi, @function\n"
	"chain_nocfi:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call *%rsi\n"
	"	pop %rbp\n"
	"	ret\n"
	".size chain_nocfi, .-chain_nocfi\n");

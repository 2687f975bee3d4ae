/*
 * unwind.h - stack walking that is safe in any context, signal handlers
 * included (x86-64).  Two walkers: frame pointers, and CFI tables compiled
 * by cfi.c.  See unwind.c for the rules they follow.
 *
 * Output convention: out[0] is the exact pc of the first frame; every later
 * entry is a return address as read from memory (not minus one), except the
 * pc of code interrupted by a signal, which is exact too (see unwind.c).
 */
#ifndef RHEA_UNWIND_H
#define RHEA_UNWIND_H

#include <stdint.h>

#include "cfi.h"

struct unwind_regs {
	uint64_t ip, sp, bp;
};

/*
 * What a walk depended on, so that a later walk can be known to give the
 * same frames without being made: every word it read from the stack (with
 * its value) and whether it used the starting rbp.  A walk is a function
 * of its starting registers, the words it reads and the CFI tables; when
 * the registers it used are the same and every word still holds its value
 * (unwind_trace_holds), it would find the same frames.  A read outside the
 * known stack range (a guarded read) is not recorded: such a walk is not
 * replayable (outside = 1), nor is one that read more than UNWIND_TRACE_MAX
 * words (overflow = 1).
 */
#define UNWIND_TRACE_MAX 128
struct unwind_trace {
	int n;
	int bp_used;  /* the starting rbp was used (not only words read later) */
	int outside;  /* a read outside the stack range */
	int overflow; /* more than UNWIND_TRACE_MAX words */
	uint64_t addr[UNWIND_TRACE_MAX], val[UNWIND_TRACE_MAX];
};

/* Readable stack range [lo, hi) of the thread being walked.  Words inside
 * are read directly (the range must be mapped); anything else goes through
 * a guarded read.  lo >= hi (or a NULL pointer) means unknown.  trace
 * (may be NULL): where the walk records what it read. */
struct unwind_stack {
	uint64_t lo, hi;
	struct unwind_trace *trace;
};

/* Does every word t recorded still hold its value?  (The caller compares
 * the registers.)  The words must still be mapped: t's walk ran on this
 * thread's stack, from a stack pointer at or below the current one. */
int unwind_trace_holds(const struct unwind_trace *t);

/* Find the CFI table and load bias (runtime address - ELF vaddr) of the
 * module holding pc; NULL if unknown.  Called from the walker, so it must be
 * async-signal-safe when the walk is (the agent provides it). */
typedef const struct cfi_table *(*unwind_find_fn)(uint64_t pc, uint64_t *bias, void *arg);

/* Walk the frame-pointer chain from r.  Fills out[0..max-1], returns the
 * number of frames; *truncated (may be NULL) = 1 when max stopped a walk
 * that would have gone on.  A frame record outside a known stack ends the
 * walk (no signal frames).  Async-signal-safe, never faults. */
int unwind_fp(const struct unwind_regs *r, const struct unwind_stack *st, uint64_t *out, int max,
	      int *truncated);

/* Walk with CFI tables found through find(pc, &bias, arg); same output and
 * guarantees as unwind_fp.  Continues through signal frames (the sigreturn
 * trampoline) into the interrupted code. */
int unwind_cfi(const struct unwind_regs *r, const struct unwind_stack *st, unwind_find_fn find,
	       void *arg, uint64_t *out, int max, int *truncated);

/*
 * The rows a thread's walks found, by pc: a thread's stacks repeat their
 * frames from one capture to the next, and a hit skips the module search
 * and the table search (two binary searches per frame).  Direct mapped.
 * Rows stay valid as long as the module map does: the cache belongs to one
 * generation of it (gen), and is emptied when the caller's is another.
 * One cache per thread, never used by two walks at once.
 */
#define UNWIND_CACHE_SIZE 256 /* a power of two */
struct unwind_cache {
	uint32_t gen;
	struct {
		uint64_t pc; /* the pc the row was looked up at; 0: empty */
		const struct cfi_row *row;
	} e[UNWIND_CACHE_SIZE];
};

/* unwind_cfi with a row cache of module map generation gen (c may be NULL). */
int unwind_cfi_cached(const struct unwind_regs *r, const struct unwind_stack *st, unwind_find_fn find,
		      void *arg, struct unwind_cache *c, uint32_t gen, uint64_t *out, int max,
		      int *truncated);

/* Read the 8 bytes at addr without ever faulting: directly when inside st,
 * else with process_vm_readv on ourselves.  0 and *val set, or -1. */
int unwind_read(const struct unwind_stack *st, uint64_t addr, uint64_t *val);

/* Registers of the code a signal interrupted, from the handler's third
 * argument (a ucontext_t *). */
void unwind_regs_from_ucontext(const void *ucontext, struct unwind_regs *r);

/*
 * UNWIND_HERE(struct unwind_regs *): the registers of the code using the
 * macro, to walk the current thread synchronously.  ip is the address right
 * after the asm, where rsp and rbp still hold the values read.  rbp is read
 * first: the compiler may give one of the other outputs rbp itself.
 */
#define UNWIND_HERE(regsp)                                                          \
	do {                                                                        \
		struct unwind_regs *unwind_here_r_ = (regsp);                       \
		uint64_t unwind_here_ip_, unwind_here_sp_, unwind_here_bp_;         \
		__asm__ volatile("mov %%rbp, %2\n\t"                                \
				 "mov %%rsp, %1\n\t"                                \
				 "lea 0f(%%rip), %0\n"                              \
				 "0:"                                               \
				 : "=&r"(unwind_here_ip_), "=&r"(unwind_here_sp_),  \
				   "=&r"(unwind_here_bp_));                         \
		unwind_here_r_->ip = unwind_here_ip_;                               \
		unwind_here_r_->sp = unwind_here_sp_;                               \
		unwind_here_r_->bp = unwind_here_bp_;                               \
	} while (0)

#endif

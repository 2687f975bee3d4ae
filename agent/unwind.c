/*
 * unwind.c - frame-pointer and CFI stack walkers for any context.
 *
 * What.  The agent captures stacks inside hooks (malloc, locks, ...) and
 * from a signal handler that interrupts arbitrary code, maybe in the middle
 * of malloc, a prologue, or a program that has just smashed its stack.  So
 * the walkers here call nothing but raw syscalls (no libc, no malloc, no
 * locks, no errno) and survive any register values.
 *
 * Design.
 *  - unwind_fp follows the rbp chain ([rbp] = caller's rbp, [rbp+8] =
 *    return address).  Cheap, and right only for code built with frame
 *    pointers, which Debian's is not.
 *  - unwind_cfi uses the tables of cfi.c: per frame, find() gives the table
 *    and load bias of the module, a binary search gives the row, the row
 *    gives the CFA (rsp/rbp + offset, or the PLT formula), the return
 *    address is at CFA-8 and the caller's rsp is the CFA.  For frames after
 *    the first the row of (ra - 1) is used: a call may be the last
 *    instruction of a noreturn function, and ra then points into the next
 *    function.
 *  - Memory safety: a read inside the thread's stack range is a plain load;
 *    anything else (a stack we were not told about, the code bytes at a pc)
 *    goes through process_vm_readv on our own pid, which returns EFAULT
 *    instead of raising SIGSEGV.  Garbage cannot loop: rsp must grow
 *    strictly from frame to frame (signal frames excepted: sigaltstack
 *    moves to another stack), and the walk stops at pc 0, at CFI_OUTERMOST,
 *    at a pc no module claims, and at max.
 *  - Signal frames: the kernel makes a handler return into the libc
 *    trampoline __restore_rt (mov $15,%rax; syscall).  glibc describes it
 *    with DWARF expressions that the table does not keep, so the trampoline
 *    is recognised by its 9 code bytes and the interrupted registers are
 *    taken from the ucontext that the kernel's rt_sigframe puts right where
 *    rsp points once the handler has returned (arch/x86/include/asm/
 *    sigframe.h: pretcode, then struct ucontext).  The interrupted pc is
 *    exact, so its row is looked up at pc, not pc - 1.
 *
 * Limits.  The pc of interrupted code is stored as is; a symbolizer that
 * subtracts one from every frame but the first will be one byte off there
 * (harmless unless the instruction is the first of a function).  Code with
 * no CFI is walked by one frame-pointer guess per frame (see step_guess_fp).
 * So is JIT code, which no module claims (V8 keeps frame pointers, so does
 * HotSpot's interpreter, not its compiled code): the guesses through it
 * are kept only when they lead back to code a module claims, so that a
 * garbage rbp adds no invented frames at the end of a stack.  process_vm_readv may be denied
 * by a seccomp policy; reads outside the stack range then fail and the walk
 * just stops earlier (signal frames are no longer crossed).  The address of
 * the last trampoline seen is cached: a libc unmapped and replaced by other
 * code at the same address would fool it (libc is never unloaded).
 */
#include "unwind.h"
#include "sys.h"

#include <stddef.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>

/* The reads below look at other frames' memory, redzones included; keep the
 * sanitizers (make SANITIZE=1 builds tests with them) out of it. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define UNWIND_NOSAN __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#ifndef UNWIND_NOSAN
#define UNWIND_NOSAN
#endif

typedef uint64_t __attribute__((aligned(1), may_alias)) unaligned_u64;

/* struct ucontext as the kernel writes it (glibc's ucontext_t starts the
 * same way): uc_flags, uc_link, uc_stack (24 bytes), then the gregs. */
#define UC_GREG(i) (offsetof(ucontext_t, uc_mcontext) + (size_t)(i) * sizeof(greg_t))
_Static_assert(UC_GREG(REG_RBP) == 120 && UC_GREG(REG_RSP) == 160 && UC_GREG(REG_RIP) == 168,
	       "x86-64 kernel ucontext layout");

/* mov $0xf,%rax (rt_sigreturn); syscall */
static const uint8_t sigreturn_code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

/* Address of the last trampoline recognised (0: none yet). */
static uint64_t known_sigreturn;

struct frame {
	uint64_t pc, sp, bp;
	int exact;  /* pc is not a return address: look its row up at pc */
	int bp_reg; /* bp is the starting register's value (not read from the stack) */
};

/* Does ra follow a call instruction (the code bytes before it): call
 * rel32 (E8), or call through a register or memory (FF /2, 2 to 7 bytes
 * with its ModRM, SIB, displacement)?  0 also when they cannot be read. */
static int after_call(uint64_t ra)
{
	uint8_t b[8];
	if (ra < 8 || rhea_read_own(ra - 8, b, sizeof(b)) != 0)
		return 0;
	if (b[3] == 0xe8)
		return 1;
	for (int k = 2; k <= 7; k++)
		if (b[8 - k] == 0xff && ((b[9 - k] >> 3) & 7) == 2)
			return 1;
	return 0;
}

static inline int stack_known(const struct unwind_stack *st)
{
	return st && st->lo < st->hi;
}

static inline int in_stack(const struct unwind_stack *st, uint64_t addr, uint64_t len)
{
	return stack_known(st) && addr >= st->lo && addr < st->hi && st->hi - addr >= len;
}

UNWIND_NOSAN int unwind_read(const struct unwind_stack *st, uint64_t addr, uint64_t *val)
{
	struct unwind_trace *t = st ? st->trace : NULL;
	if (in_stack(st, addr, 8)) {
		*val = *(const volatile unaligned_u64 *)(uintptr_t)addr;
		if (t) {
			if (t->n < UNWIND_TRACE_MAX) {
				t->addr[t->n] = addr;
				t->val[t->n++] = *val;
			} else {
				t->overflow = 1;
			}
		}
		return 0;
	}
	if (t)
		t->outside = 1;
	return rhea_read_own(addr, val, 8);
}

UNWIND_NOSAN int unwind_trace_holds(const struct unwind_trace *t)
{
	if (t->outside || t->overflow)
		return 0;
	for (int i = 0; i < t->n; i++)
		if (*(const volatile unaligned_u64 *)(uintptr_t)t->addr[i] != t->val[i])
			return 0;
	return 1;
}

static void trace_start(const struct unwind_stack *st)
{
	if (st && st->trace) {
		st->trace->n = 0;
		st->trace->bp_used = st->trace->outside = st->trace->overflow = 0;
	}
}

/* The walk uses rbp's value: if it is still the starting register's, the
 * walk depends on that register. */
static inline void bp_use(const struct unwind_stack *st, int bp_reg)
{
	if (bp_reg && st->trace)
		st->trace->bp_used = 1;
}

void unwind_regs_from_ucontext(const void *ucontext, struct unwind_regs *r)
{
	const ucontext_t *uc = ucontext;

	r->ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	r->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	r->bp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
}

/* The stack range to read directly: nothing below the first sp is part of a
 * live frame, and below it the main thread's stack may not be mapped yet. */
static struct unwind_stack narrow(const struct unwind_stack *st, uint64_t sp)
{
	struct unwind_stack s = {0, 0, st ? st->trace : NULL};

	if (stack_known(st)) {
		s = *st;
		if (sp > s.lo && sp < s.hi)
			s.lo = sp & ~7ull;
	}
	return s;
}

static int is_sigreturn(uint64_t pc)
{
	uint8_t code[sizeof(sigreturn_code)];

	if (pc == __atomic_load_n(&known_sigreturn, __ATOMIC_RELAXED) && pc)
		return 1;
	if (rhea_read_own(pc, code, sizeof(code)) < 0)
		return 0;
	for (size_t i = 0; i < sizeof(code); i++)
		if (code[i] != sigreturn_code[i])
			return 0;
	__atomic_store_n(&known_sigreturn, pc, __ATOMIC_RELAXED);
	return 1;
}

/* At the trampoline rsp points at the ucontext: continue with the
 * interrupted registers. */
static int step_sigframe(const struct unwind_stack *st, struct frame *f)
{
	uint64_t pc, sp, bp;

	if (unwind_read(st, f->sp + UC_GREG(REG_RIP), &pc) < 0 ||
	    unwind_read(st, f->sp + UC_GREG(REG_RSP), &sp) < 0 ||
	    unwind_read(st, f->sp + UC_GREG(REG_RBP), &bp) < 0 || sp == 0)
		return -1;
	*f = (struct frame){pc, sp, bp, 1, 0};
	return 0;
}

/*
 * One frame-pointer step for a pc without CFI (hand-written asm, a gap
 * between FDEs).  This is a guess: code built without frame pointers uses
 * rbp as an ordinary register, and a value that happens to point into the
 * stack at or above sp (a local array, a saved pointer) is taken for a frame
 * record.  What keeps it cheap to be wrong: rbp must be aligned and inside
 * the known stack, and the next step needs a pc some module claims and an
 * rsp above this one.  (rbp == sp is a frame with no locals: push %rbp;
 * mov %rsp,%rbp; call.)
 */
static int step_guess_fp(const struct unwind_stack *st, struct frame *f)
{
	uint64_t ra, bp;

	bp_use(st, f->bp_reg);
	if (f->bp < f->sp || (f->bp & 7) || !in_stack(st, f->bp, 16))
		return -1;
	if (unwind_read(st, f->bp + 8, &ra) < 0 || unwind_read(st, f->bp, &bp) < 0)
		return -1;
	*f = (struct frame){ra, f->bp + 16, bp, 0, 0};
	return 0;
}

static inline uint32_t cache_slot(uint64_t pc)
{
	return (uint32_t)((pc ^ (pc >> 9)) * 0x9e3779b1u >> 24) & (UNWIND_CACHE_SIZE - 1);
}

/* One step from frame f to its caller.  *claimed: some module's table
 * covers f's pc (else it is code no module claims: JIT code). */
static int step_cfi(const struct unwind_stack *st, unwind_find_fn find, void *arg,
		    struct unwind_cache *c, struct frame *f, int *claimed)
{
	uint64_t lpc = f->exact ? f->pc : f->pc - 1, bias = 0, cfa, ra, bp = f->bp;
	const struct cfi_row *row;
	int known; /* a module's table covers lpc */
	uint32_t k = cache_slot(lpc);
	if (c && c->e[k].pc == lpc) {
		row = c->e[k].row;
		known = 1;
	} else {
		const struct cfi_table *t = find(lpc, &bias, arg);
		row = t ? cfi_lookup(t, lpc - bias) : NULL;
		known = t != NULL;
		if (c && row) {
			c->e[k].pc = lpc;
			c->e[k].row = row;
		}
	}

	*claimed = known;
	if (!row || row->kind == CFI_NONE) {
		if (!known && st->trace)
			st->trace->outside = 1; /* code no module claims (JIT?) may change */
		if (is_sigreturn(f->pc)) {
			*claimed = 1; /* the kernel's frame: no guess */
			return step_sigframe(st, f);
		}
		return step_guess_fp(st, f);
	}
	switch (row->kind) {
	case CFI_RSP:
		cfa = f->sp + (uint64_t)(int64_t)row->cfa_off;
		break;
	case CFI_RBP:
		bp_use(st, f->bp_reg);
		cfa = f->bp + (uint64_t)(int64_t)row->cfa_off;
		break;
	case CFI_PLT: /* exact pc: a PLT entry never calls */
		cfa = f->sp + 8 + ((f->pc & 15) >= (uint64_t)row->cfa_off ? 8 : 0);
		break;
	default: /* CFI_OUTERMOST */
		return -1;
	}
	if (unwind_read(st, cfa - 8, &ra) < 0)
		return -1;
	int bp_reg = f->bp_reg;
	if (row->rbp_off) {
		if (unwind_read(st, cfa + (uint64_t)(int64_t)row->rbp_off, &bp) < 0)
			return -1;
		bp_reg = 0;
	}
	*f = (struct frame){ra, cfa, bp, 0, bp_reg};
	return 0;
}

int unwind_cfi(const struct unwind_regs *r, const struct unwind_stack *st, unwind_find_fn find,
	       void *arg, uint64_t *out, int max, int *truncated)
{
	return unwind_cfi_cached(r, st, find, arg, NULL, 0, out, max, truncated);
}

int unwind_cfi_cached(const struct unwind_regs *r, const struct unwind_stack *st, unwind_find_fn find,
		      void *arg, struct unwind_cache *c, uint32_t gen, uint64_t *out, int max,
		      int *truncated)
{
	int n = 0;

	if (truncated)
		*truncated = 0;
	if (!r || !out || !find || r->ip == 0)
		return 0;
	if (max <= 0) {
		if (truncated)
			*truncated = 1;
		return 0;
	}
	if (c && c->gen != gen) {
		for (int i = 0; i < UNWIND_CACHE_SIZE; i++)
			c->e[i].pc = 0;
		c->gen = gen;
	}
	trace_start(st);
	struct unwind_stack s = narrow(st, r->sp);
	struct frame f = {r->ip, r->sp, r->bp, 1, 1};
	out[n++] = f.pc;
	/* Frames out[guessed..] were found by frame-pointer guesses from code no
	 * module claims; -1: none since the last claimed pc. */
	int guessed = -1;
	for (;;) {
		uint64_t prev_sp = f.sp;
		int claimed = 1;
		int step = step_cfi(&s, find, arg, c, &f, &claimed);
		if (claimed)
			guessed = -1; /* a claimed pc: the guesses that led to it hold */
		if (step < 0 || f.pc == 0)
			break;
		if (f.sp <= prev_sp && !f.exact) /* only a signal frame may change stacks */
			break;
		if (n >= max) {
			if (truncated)
				*truncated = 1;
			guessed = -1; /* a chain that long is no accident */
			break;
		}
		if (!claimed && guessed < 0)
			guessed = n;
		out[n++] = f.pc;
	}
	/* A walk that ends in unclaimed code keeps its first unclaimed pc (the
	 * caller's CFI led there) but none of the guesses after it; and that
	 * pc only if it follows a call.  A stack switched under the CFI's feet
	 * (Go's runtime, on its way between goroutine and system stacks) led
	 * to a word that is no return address: 0x7fffff, an address in Go's
	 * heap, reported as functions that took the program's CPU. */
	int keep = guessed >= 0 ? guessed : n;
	uint64_t bias;
	if (keep >= 2 && !find(out[keep - 1] - 1, &bias, arg) && !after_call(out[keep - 1]))
		keep--;
	return keep;
}

int unwind_fp(const struct unwind_regs *r, const struct unwind_stack *st, uint64_t *out, int max,
	      int *truncated)
{
	int n = 0;

	if (truncated)
		*truncated = 0;
	if (!r || !out || r->ip == 0)
		return 0;
	if (max <= 0) {
		if (truncated)
			*truncated = 1;
		return 0;
	}
	trace_start(st);
	struct unwind_stack s = narrow(st, r->sp);
	bp_use(&s, 1);
	uint64_t sp = r->sp, bp = r->bp, ra, next;
	out[n++] = r->ip;
	/* The frame record [bp] must sit at or above sp, inside the stack when
	 * we know it, and each record above the previous one.  A walk that
	 * starts on another stack (the agent's own, where the recording ends:
	 * agent.c; a program's alternate signal stack) follows the chain
	 * there, each read guarded (unwind_read), until it reaches the
	 * thread's stack, and never leaves it again: it stopped at the first
	 * frame, and every fp recording ended with an unwind failure. */
	int inside = !stack_known(&s) || in_stack(&s, sp, 8);
	while (bp >= sp && !(bp & 7)) {
		if (stack_known(&s) && !in_stack(&s, bp, 16)) {
			if (inside)
				break;
		} else {
			inside = 1;
		}
		if (unwind_read(&s, bp + 8, &ra) < 0 || unwind_read(&s, bp, &next) < 0 || ra == 0)
			break;
		if (n >= max) {
			if (truncated)
				*truncated = 1;
			break;
		}
		out[n++] = ra;
		sp = bp + 16;
		bp = next;
	}
	return n;
}

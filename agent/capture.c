/*
 * capture.c - taking a stack on the calling thread and turning it into
 * records (DESIGN.md 1.1-1.3).
 *
 * A capture unwinds the thread's own stack from inside the hook (no signal,
 * no suspension), drops the agent's own frames, interns the stack in the
 * call-stack table and emits a SAMPLE entry.  Two savings:
 *
 *  - the stack of the previous capture is kept with its node ids; the new
 *    stack is compared from the root and only the differing tail is looked
 *    up in the shared table (most captures share all but a few leaf frames);
 *  - consecutive captures with the same stack, trigger and message id are
 *    merged into one pending sample (begin, end, counters at both ends),
 *    emitted when a different one comes, when it is older than a second
 *    (so that a SIGKILL loses at most that), or when the thread or the
 *    process ends.  Blocking calls are never merged: each is one wait.
 *    The end of a run is read at most every 4 ms (QUIET_MERGE_NS): the
 *    captures in between are only counted in it.
 *
 * Everything here may run in a signal handler (the sampler): no malloc, no
 * stdio, no locks.  Work buffers live in the thread's registry slot.
 */
#include "agent.h"
#include "cfi.h"
#include "unwind.h"

#include <string.h>
#include <sys/resource.h>

#define PENDING_MAX_AGE_NS 1000000000ull
#define SITES_EVERY_NS 1000000000ull

/*
 * The thread's counters with one system call: getrusage(RUSAGE_THREAD)
 * carries the CPU time too (user + system, in microseconds), so the CPU
 * clock is not read separately (that was a second syscall per capture: 841
 * ns the pair on the bench machine).  CPU time never goes backwards within
 * a thread: readings from another source (a forced capture reads the
 * thread's CPU clock in ns) are clamped to the last one.
 */
static uint64_t rusage_cpu_ns(const struct rusage *ru)
{
	return ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru->ru_utime.tv_usec + (uint64_t)ru->ru_stime.tv_usec) * 1000ull;
}

/*
 * But getrusage's CPU time is the kernel's runtime as of its last update,
 * and a kernel that accounts on ticks (Debian's, on any CPU that is not
 * nohz_full) updates it at a tick or a context switch: while a thread
 * computes, the value moves by whole ticks (4 ms at HZ=250).  Taken as it
 * came, a thread computing through functions shorter than a tick had
 * several ticks of CPU in some and none in others (CPU/wall 0 and 1.6 on
 * tests/scenarios/cpusplit.c; 0 ns and 148% in a compiler).  The clock
 * that is exact (clock_gettime of the thread's CPU clock, which brings the
 * kernel's count up to date) costs 530 ns more per capture.
 *
 * Instead: a thread whose two switch counts did not move since its last
 * reading was on a CPU all the time in between, so its CPU time grew by
 * the wall time.  The estimate is the larger of the kernel's value (never
 * ahead of the truth) and, in that case, the last estimate plus the wall
 * time, but at most STALE_MAX past the kernel's value (a tick at the
 * lowest HZ: time the hypervisor stole, which the kernel does not count,
 * cannot pile up).  After a switch the kernel's value is used; it is
 * behind by what the thread ran since it was switched back in.
 */
#define STALE_MAX_NS 10000000ull

static uint64_t cpu_estimate(struct rhea_tstate *t, uint64_t kernel_ns, uint64_t switches, uint64_t now)
{
	uint64_t est = kernel_ns;
	if (t->cpu_est_at && switches == t->cpu_est_sw && now > t->cpu_est_at) {
		uint64_t run = t->cpu_est_ns + (now - t->cpu_est_at);
		if (run > kernel_ns + STALE_MAX_NS)
			run = kernel_ns + STALE_MAX_NS;
		if (run > est)
			est = run;
	}
	if (est < t->cpu_est_ns)
		est = t->cpu_est_ns;
	t->cpu_est_ns = est;
	t->cpu_est_at = now;
	t->cpu_est_sw = switches;
	return est;
}

/* *v, or last when *v is behind it (by less than half the range). */
static inline void back32(uint32_t *v, uint32_t last)
{
	if ((int32_t)(*v - last) < 0)
		*v = last;
}

/* The thread's counters at `now` (its own: from the thread itself). */
static void read_counters(struct rhea_tstate *t, struct rhea_counters *c, uint64_t now)
{
	struct rusage ru;
	session_check(t);
	c->alloc_count = hot_alloc_count();
	c->alloc_bytes = hot_alloc_bytes();
	rhea_guard++; /* the estimate's state: no sampler signal in between */
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		c->minflt = (uint32_t)ru.ru_minflt;
		c->majflt = (uint32_t)ru.ru_majflt;
		c->nvcsw = (uint32_t)ru.ru_nvcsw;
		c->nivcsw = (uint32_t)ru.ru_nivcsw;
		c->cpu_ns = cpu_estimate(t, rusage_cpu_ns(&ru), (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw,
					 now);
	} else {
		*c = t->last_c;
		c->alloc_count = hot_alloc_count();
		c->alloc_bytes = hot_alloc_bytes();
	}
	rhea_guard--;
	if (c->cpu_ns < t->last_c.cpu_ns)
		c->cpu_ns = t->last_c.cpu_ns;
	/* A thread's own counts never go back: one that did was read by some
	 * other task on this thread's state (a raw clone(CLONE_VFORK) child:
	 * the vfork hook keeps glibc's out), and a step back would reach the
	 * converters as a difference of nearly 2^32.  (A count that wraps
	 * goes forward by its difference modulo 2^32: kept.) */
	back32(&c->minflt, t->last_c.minflt);
	back32(&c->majflt, t->last_c.majflt);
	back32(&c->nvcsw, t->last_c.nvcsw);
	back32(&c->nivcsw, t->last_c.nivcsw);
}

void capture_counters(struct rhea_tstate *t, struct rhea_counters *c, uint64_t now)
{
	read_counters(t, c, now);
}

static void emit(struct rhea_tstate *t, const void *e, size_t len)
{
	buf_emit(&rhea_g.buf, t->tid, e, len);
}

/*
 * Would a walk from regs find the frames of one of this thread's recent
 * walks?  Yes when it starts from the same registers (rbp only if the walk
 * used it), the module map is the same generation and every stack word the
 * walk read still holds its value (unwind.h, struct unwind_trace): the walk
 * is a function of those.  A thread captured again at the same call path,
 * the common case (70% of the sync captures of the server-like bench W2),
 * then costs a few loads per frame instead of a walk and a stack-table
 * lookup.  Returns the memo, or NULL.
 */
static const struct rhea_memo *memo_find(struct rhea_tstate *t, const struct unwind_regs *regs,
					 int exact_leaf, uint32_t gen)
{
	for (int i = 0; i < RHEA_MEMOS; i++) {
		const struct rhea_memo *m = &t->memo[i];
		if (!(t->memo_ok & (1u << i)) || m->regs.ip != regs->ip || m->regs.sp != regs->sp ||
		    m->gen != gen || m->exact != exact_leaf || (m->trace.bp_used && m->regs.bp != regs->bp))
			continue;
		if (unwind_trace_holds(&m->trace))
			return m;
	}
	return NULL;
}

/*
 * The frames of a walk that are code: those a module claims, and those in
 * executable memory no module claims (JIT code); the stack ends before the
 * first that is neither.  A stack that the program switched under the
 * CFI's feet (Go's runtime, between goroutine and system stacks) led the
 * walk to words that are no return addresses: 0x7fffff, addresses in Go's
 * heap or in a stack, a non-canonical number, each reported as a function
 * that took the program's time.  Asked only of walks that stepped through
 * code no module claims (their trace says so, or there is none).
 */
static int code_frames(const uint64_t *pc, int n)
{
	for (int i = 1; i < n; i++) {
		uint64_t bias;
		if (pc[i] >> 47)
			return i; /* not a user-space address */
		if (!modules_find_cfi(pc[i] - 1, &bias, NULL) && !modules_pc_executable(pc[i]))
			return i;
	}
	return n;
}

/*
 * Unwind from regs into t->scratch, skip the agent's own frames, intern the
 * rest.  Returns the leaf node id (0: no stack) and ORs RHEA_S_* into flags.
 * foreign: regs are another thread's (t is that thread's state).
 */
static uint32_t take_stack(struct rhea_tstate *t, const struct unwind_regs *regs,
			   int exact_leaf, int foreign, unsigned *flags)
{
	uint32_t gen = __atomic_load_n(&rhea_modules_gen, __ATOMIC_ACQUIRE);
	const struct rhea_memo *hit = foreign ? NULL : memo_find(t, regs, exact_leaf, gen);
	if (hit) {
		if (hit->flags & RHEA_S_TRUNCATED)
			__atomic_fetch_add(&rhea_g.truncated, 1, __ATOMIC_RELAXED);
		*flags |= hit->flags;
		return hit->leaf;
	}
	int exact_arg = exact_leaf;
	unsigned flags_in = *flags;
	/* This walk replaces the older memo.  Another thread's stack may
	 * change under us: every read guarded, and its walk not remembered. */
	unsigned mi = t->memo_next % RHEA_MEMOS;
	struct rhea_memo *memo = foreign ? NULL : &t->memo[mi];
	if (memo) {
		t->memo_ok &= ~(1u << mi);
		t->memo_next = mi + 1;
	}
	struct unwind_stack st = {foreign ? 0 : t->stack_lo, foreign ? 0 : t->stack_hi,
				  memo ? &memo->trace : NULL};
	int max = (int)rhea_g.cfg.max_depth + 8;
	int truncated = 0, n;
	if (rhea_g.cfg.unwind_fp)
		n = unwind_fp(regs, &st, t->scratch, max, &truncated);
	else
		n = unwind_cfi_cached(regs, &st, modules_find_cfi, NULL, foreign ? NULL : &t->ucache,
				      gen, t->scratch, max, &truncated);
	if (n >= 2 && !rhea_g.cfg.unwind_fp && (!memo || memo->trace.outside))
		n = code_frames(t->scratch, n);
	/* Drop the agent's own frames: the leading ones (the hook that is
	 * capturing) and any further up (a hook that called back into the
	 * program: dlopen running constructors, our thread start routine). */
	int skip = 0;
	while (skip < n && t->scratch[skip] >= rhea_g.agent_lo && t->scratch[skip] < rhea_g.agent_hi)
		skip++;
	if (skip > 0)
		exact_leaf = 0; /* the first frame left is a return address */
	int kept = skip;
	for (int i = skip; i < n; i++)
		if (!(t->scratch[i] >= rhea_g.agent_lo && t->scratch[i] < rhea_g.agent_hi))
			t->scratch[kept++] = t->scratch[i];
	n = kept;
	int depth = n - skip;
	if (depth <= 0) {
		__atomic_fetch_add(&rhea_g.unwind_errors, 1, __ATOMIC_RELAXED);
		*flags |= RHEA_S_NOSTACK;
		return 0;
	}
	if (depth > (int)rhea_g.cfg.max_depth) {
		depth = (int)rhea_g.cfg.max_depth;
		truncated = 1;
	}
	/* Root first, return addresses minus one so that they name the call
	 * (a call can be a function's last instruction), plus a marker root
	 * when frames were cut off. */
	int m = 0, common = 0, same = 1;
	uint64_t *a = t->cache_addrs;
	if (truncated) {
		*flags |= RHEA_S_TRUNCATED;
		__atomic_fetch_add(&rhea_g.truncated, 1, __ATOMIC_RELAXED);
		same = t->cache_n > 0 && a[0] == RHEA_ADDR_TRUNCATED;
		a[m++] = RHEA_ADDR_TRUNCATED;
		common = same;
	}
	for (int i = skip + depth - 1; i >= skip; i--, m++) {
		uint64_t v = t->scratch[i];
		if (!(i == skip && exact_leaf))
			v -= 1;
		if (same && m < t->cache_n && a[m] == v) {
			common = m + 1;
			continue;
		}
		same = 0;
		a[m] = v;
	}
	if (exact_leaf)
		*flags |= RHEA_S_LEAF_EXACT;
	uint32_t parent = common ? t->cache_ids[common - 1] : 0;
	uint32_t leaf = parent;
	if (common < m)
		leaf = stacktab_intern(&rhea_g.st, parent, a + common, m - common, t->cache_ids + common);
	if (leaf == 0) {
		t->cache_n = 0;
		*flags |= RHEA_S_NOSTACK;
		return 0;
	}
	t->cache_n = m;
	if (memo && !memo->trace.outside && !memo->trace.overflow) {
		memo->regs = *regs;
		memo->exact = exact_arg;
		memo->gen = gen;
		memo->leaf = leaf;
		memo->flags = *flags & ~flags_in;
		t->memo_ok |= 1u << mi;
	}
	return leaf;
}

static void fill_sample(struct rhea_sample *s, struct rhea_tstate *t, unsigned fn,
			unsigned flags, uint32_t stack)
{
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.flags = (uint16_t)flags;
	s->h.size = sizeof(*s);
	s->tid = t->tid;
	s->stack = stack;
	s->trigger = (uint16_t)fn;
	s->msgid = t->msgid;
}

static inline int try_own_pending(struct rhea_tstate *t)
{
	return __atomic_exchange_n(&t->pend->busy, 1, __ATOMIC_ACQUIRE) == 0;
}

static inline void release_pending(struct rhea_tstate *t)
{
	__atomic_store_n(&t->pend->busy, 0, __ATOMIC_RELEASE);
}

/* Whether a capture s at s->end_ns continues the pending sample p: the
 * same stack, trigger, message and flags, and p not yet a second old. */
static inline int continues(const struct rhea_tstate *t, const struct rhea_sample *p, const struct rhea_sample *s)
{
	return t->pend->valid && p->stack == s->stack && p->trigger == s->trigger && p->msgid == s->msgid &&
	       p->h.flags == s->h.flags && s->end_ns - p->begin_ns < PENDING_MAX_AGE_NS;
}

/* s is one more capture of the pending sample p. */
static inline void count_in(struct rhea_sample *p, const struct rhea_sample *s)
{
	if (p->merged < 0xffff)
		p->merged++;
	if (s->trigger == RHEA_FN_SAMPLER)
		p->object += s->object; /* periods add up */
}

/* Merge a non-blocking capture into the pending sample, or replace it. */
static void merge_or_emit(struct rhea_tstate *t, const struct rhea_sample *s)
{
	if (!try_own_pending(t)) {
		/* The exit path took over the pending sample: no merging now. */
		emit(t, s, sizeof(*s));
		return;
	}
	struct rhea_sample *p = &t->pend->s;
	if (continues(t, p, s)) {
		p->end_ns = s->end_ns;
		p->c_end = s->c_end;
		count_in(p, s);
	} else {
		if (t->pend->valid)
			emit(t, p, sizeof(*p));
		*p = *s;
		t->pend->valid = 1;
	}
	release_pending(t);
}

static void maybe_emit_counts(struct rhea_tstate *t, uint64_t now)
{
	if (now - t->sites_emitted_ns >= SITES_EVERY_NS) {
		t->sites_emitted_ns = now;
		capture_emit_counts(t);
	}
}

/* Registers of this function's frame: the unwind starts here and skips the
 * agent's frames.  noinline keeps that frame alive during the walk. */
static __attribute__((noinline)) uint32_t stack_here(struct rhea_tstate *t, unsigned *flags)
{
	struct unwind_regs regs;
	UNWIND_HERE(&regs);
	return take_stack(t, &regs, 0, 0, flags);
}

/*
 * A forked child opens its recording only once it captures (one that only
 * execs leaves no file).  Its memfd goes to rhea record when the file is
 * open (salvage.c): a child killed with SIGKILL or ending by a raw
 * exit_group before then leaves no recording at all.  So its first
 * capture (captures is reset at the fork) asks for the file: a hook's
 * capture opens it on its own thread as it ends (open_if_due, agent.c's
 * agent_open_due); the writer is called at once too, instead of at its
 * next round, up to 100 ms later, for captures that cannot (the
 * sampler's, a signal handler's).
 */
static void note_capture(struct rhea_tstate *t, const struct rhea_sample *s)
{
	t->last_capture_ns = s->end_ns;
	t->last_c = s->c_end;
	if (__builtin_expect(__atomic_fetch_add(&rhea_g.captures, 1, __ATOMIC_RELAXED) == 0, 0) &&
	    __atomic_load_n(&rhea_g.fd, __ATOMIC_RELAXED) < 0) {
		__atomic_store_n(&rhea_open_due, 1, __ATOMIC_RELEASE);
		buf_wake_writer(&rhea_g.buf);
	}
}

/* At the end of a hook's capture, with its guard dropped. */
static inline void open_if_due(void)
{
	if (__builtin_expect(__atomic_load_n(&rhea_open_due, __ATOMIC_RELAXED), 0))
		agent_open_due();
}

/*
 * A capture that continues the pending sample, whose end (time and
 * counters together) was taken less than QUIET_MERGE_NS ago, is only
 * counted in it: its counters are not read, and the sample's end stays
 * where it was.  The counters were a getrusage per capture, a third of
 * what a capture costs (~0.9 us of 2.9 on the server-like bench W2, whose
 * captures merge for more than half), and a thread that stays at one
 * stack has them read every QUIET_MERGE_NS instead of every interval.
 * The end and its counters move together, so every span the converters
 * spread counters over (a sample, the gap after it) keeps its own exact
 * deltas; what is lost is at most QUIET_MERGE_NS of a run's observed end
 * (the model's default, policy NEXT, ends a slice at the next sample
 * anyway; --end last may end it that much earlier).  4 ms: a tick at
 * HZ=250, the grain of the kernel's own CPU accounting.
 */
#define QUIET_MERGE_NS 4000000ull

/* (Owned here, released, and owned again by merge_or_emit when the
 * capture does not merge quietly, rather than held across the getrusage:
 * the exit path flushing the pending sample from another thread spins on
 * it only a bounded while.) */
static int merge_quietly(struct rhea_tstate *t, struct rhea_sample *s)
{
	if (!try_own_pending(t))
		return 0;
	struct rhea_sample *p = &t->pend->s;
	int quiet = continues(t, p, s) && s->end_ns >= p->end_ns && s->end_ns - p->end_ns < QUIET_MERGE_NS;
	if (quiet)
		count_in(p, s);
	release_pending(t);
	return quiet;
}

/* A capture at one point in time (hook or signal) with its counters c,
 * read at its time (end_ns): merged or emitted. */
static void point_sample_counted(struct rhea_tstate *t, struct rhea_sample *s, const struct rhea_counters *c)
{
	s->c_begin = s->c_end = *c;
	note_capture(t, s);
	merge_or_emit(t, s);
}

/* The capture over: the thread's capture flag cleared (set by the caller
 * with the guard raised). */
static void point_sample_release(struct rhea_tstate *t, uint64_t now)
{
	maybe_emit_counts(t, now);
	rhea_guard--;
	__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
}

/* The end of a capture at one point in time: time and counters now (none
 * read for one that merges quietly), then the capture over. */
static void point_sample_done(struct rhea_tstate *t, struct rhea_sample *s)
{
	s->begin_ns = s->end_ns = rhea_now();
	if (merge_quietly(t, s)) {
		t->last_capture_ns = s->end_ns;
		__atomic_fetch_add(&rhea_g.captures, 1, __ATOMIC_RELAXED);
	} else {
		struct rhea_counters c;
		read_counters(t, &c, s->end_ns);
		point_sample_counted(t, s, &c);
	}
	point_sample_release(t, s->end_ns);
}

/* The thread's timed calls so far, for the ticker's cost model (agent.c). */
static inline void timed_flush(void)
{
	if (rhea_hot.timed) {
		__atomic_fetch_add(&rhea_g.timed_calls, rhea_hot.timed, __ATOMIC_RELAXED);
		rhea_hot.timed = 0;
	}
}

void capture_sync(struct rhea_tstate *t, unsigned fn, int clocked)
{
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return;
	rhea_guard++;
	rhea_hot.last_epoch = rhea_g.epoch;
	epoch_consumed(rhea_hot.last_epoch, clocked);
	timed_flush();
	unsigned flags = 0;
	struct rhea_sample s;
	uint32_t stack = stack_here(t, &flags);
	if (__builtin_expect(rhea_in_dlopen, 0) && rhea_guard == 1 && modules_catch_up()) {
		flags = 0; /* a library's constructor: walked again, its table known */
		stack = stack_here(t, &flags);
	}
	fill_sample(&s, t, fn, flags, stack);
	point_sample_done(t, &s);
	open_if_due();
}

/*
 * The thread's last sample, taken on itself as it ends (its exit, or the
 * end of the recording on the thread that ends it): what it did since its
 * last capture was in no sample, so that a thread allocating to its end
 * lost its last interval's allocations from the threads table, the
 * functions and the slices (three threads of 100000 allocations in 4 ms:
 * 65 to 98 thousand counted; the sites table had them all).  Taken only
 * when it allocated or ran 100 us since, and not in a hooked call.
 * Async-signal-safe, as a hook's capture: the end may come in a fatal
 * signal's handler.
 */
void capture_at_end(struct rhea_tstate *t)
{
	/* in a hooked call (a fatal signal interrupted it): the end's wait so
	 * far is its last sample, which says where it was blocked */
	if (__atomic_load_n(&t->call_since, __ATOMIC_ACQUIRE))
		return;
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return; /* interrupted in a capture of its own */
	rhea_guard++;
	struct rhea_counters c;
	uint64_t now = rhea_now();
	read_counters(t, &c, now);
	uint64_t exact = c.cpu_ns;
	if (c.alloc_count == t->last_c.alloc_count && c.cpu_ns >= t->last_c.cpu_ns + 100000)
		rhea_thread_cpu_ns(t->tid, &exact); /* the estimate may run ahead */
	if (c.alloc_count == t->last_c.alloc_count && exact < t->last_c.cpu_ns + 100000) {
		rhea_guard--;
		__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
		return;
	}
	unsigned flags = 0;
	struct rhea_sample s;
	uint32_t stack = stack_here(t, &flags);
	fill_sample(&s, t, RHEA_FN_THREAD_END, flags, stack);
	s.begin_ns = s.end_ns = now;
	point_sample_counted(t, &s, &c); /* (its counters read once) */
	point_sample_release(t, now);
}

/*
 * A forked child's counters start from zero, and its agent's start in it
 * (copying the buffers, three threads started, /proc read) is some
 * hundreds of microseconds of its CPU before the program runs a line.
 * The thread-end sample above took that for the child's own work: every
 * child that only exec'ed, or only _exit'ed, captured at its end and left
 * a recording (a shell loop running /bin/true 200 times: 200 files of
 * nothing, 4.9 ms per fork and exec instead of ~1).  Its last counters
 * are read once the agent is up, as a capture would read them; nothing is
 * emitted.  The CPU time from the thread's CPU clock, which is exact: the
 * kernel's count that getrusage gives lags until the next tick or switch,
 * and a tick in the child's short life (1 in 20 of them) brought the
 * agent's start-up in at the end, as 100 us and more of the child's own.
 */
void capture_counters_baseline(struct rhea_tstate *t)
{
	struct rhea_counters c;
	uint64_t now = rhea_now(), cpu;
	read_counters(t, &c, now);
	if (rhea_thread_cpu_ns(t->tid, &cpu) == 0 && cpu > c.cpu_ns) {
		c.cpu_ns = cpu;
		t->cpu_est_ns = cpu;
		t->cpu_est_at = now;
	}
	t->last_c = c;
}

uint64_t thread_cpu_now(struct rhea_tstate *t, uint64_t now)
{
	struct rhea_counters c;
	read_counters(t, &c, now);
	return c.cpu_ns;
}

/* Emit s right away, after the pending sample (s must not merge). */
static void emit_now(struct rhea_tstate *t, const struct rhea_sample *s)
{
	if (try_own_pending(t)) {
		if (t->pend->valid)
			emit(t, &t->pend->s, sizeof(t->pend->s));
		t->pend->valid = 0;
		release_pending(t);
	}
	emit(t, s, sizeof(*s));
}

/* A wait's begin, from the recording's start at the earliest: a thread
 * of a process rhea attach joins again may still be in a hooked wait it
 * began while an earlier attach recorded (a redis-server's background
 * threads wait on their condition variables for good); its sample covers
 * what this recording saw of it. */
static inline uint64_t recording_clamp(uint64_t begin)
{
	return begin < rhea_g.start_ns ? rhea_g.start_ns : begin;
}

void capture_block(struct rhea_tstate *t, unsigned fn, const struct block_info *b)
{
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return;
	rhea_guard++;
	rhea_hot.last_epoch = rhea_g.epoch;
	epoch_consumed(rhea_hot.last_epoch, 1); /* a timed call */
	timed_flush();
	unsigned flags = RHEA_S_BLOCK;
	struct rhea_sample s;
	uint32_t stack = stack_here(t, &flags);
	fill_sample(&s, t, fn, flags, stack);
	s.begin_ns = recording_clamp(b->begin);
	s.end_ns = b->end;
	s.object = b->object;
	s.owner_tid = b->owner;
	s.waker_tid = b->waker;
	s.waker_stack = b->waker_stack;
	s.release_ns = b->release_ns;
	read_counters(t, &s.c_end, s.end_ns);
	/* Nothing is allocated while blocked.  When the CPU clock was read at
	 * the call, the kernel's time in the call is the wait's own; else it
	 * shows in the enclosing slice. */
	s.c_begin = s.c_end;
	/* (none from a wait begun while an earlier attach recorded: its
	 * counters at the call are that recording's) */
	int ours = b->begin >= rhea_g.start_ns;
	if (ours && b->have_begin) {
		s.c_begin = b->c_begin;
		s.h.flags |= RHEA_S_AT_CALL;
	} else if (ours && b->cpu_begin && b->cpu_begin <= s.c_end.cpu_ns) {
		s.c_begin.cpu_ns = b->cpu_begin;
	}
	if (b->shared)
		s.h.flags |= RHEA_S_SHARED;
	note_capture(t, &s);
	emit_now(t, &s);
	maybe_emit_counts(t, b->end);
	rhea_guard--;
	__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
	open_if_due();
}

uint32_t capture_release_stack(struct rhea_tstate *t, uint64_t site, uint64_t now)
{
	/* The release's call site identifies the stack well enough to reuse
	 * one taken there within the interval: a small per-thread cache, since
	 * a worker alternates between a few release sites. */
	for (int i = 0; i < 4; i++)
		if (t->rel[i].stack && t->rel[i].site == site && now - t->rel[i].ns < rhea_g.cfg.interval_ns)
			return t->rel[i].stack;
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return 0;
	rhea_guard++;
	unsigned flags = 0;
	uint32_t stack = stack_here(t, &flags);
	rhea_guard--;
	__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
	uint32_t k = t->rel_next++ % 4;
	t->rel[k].site = site;
	t->rel[k].ns = now;
	t->rel[k].stack = stack;
	return stack;
}

void capture_shared_release(struct rhea_tstate *t, unsigned fn, uint64_t obj, uint64_t site, uint64_t now)
{
	struct rhea_release e;
	memset(&e, 0, sizeof(e));
	e.h.kind = RHEA_E_RELEASE;
	e.h.size = sizeof(e);
	e.tid = t->tid;
	e.stack = capture_release_stack(t, site, now);
	e.object = obj;
	e.time_ns = now;
	e.trigger = (uint16_t)fn;
	emit(t, &e, sizeof(e));
}

void capture_async(struct rhea_tstate *t, const void *ucontext, unsigned periods)
{
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return;
	rhea_guard++;
	/* Neither the thread's epoch nor the ticker's: the sampler's captures
	 * do not need the epoch, and a program that computes without calling
	 * any hook (its threads sampled every 10 ms of CPU) used to keep the
	 * ticker waking every interval for nothing.  (Taking the epoch here
	 * while the ticker sleeps would also keep this thread's hooks from
	 * capturing, and so from waking it.) */
	unsigned flags = RHEA_S_ASYNC;
	struct unwind_regs regs;
	unwind_regs_from_ucontext(ucontext, &regs);
	struct rhea_sample s;
	uint32_t stack = take_stack(t, &regs, 1, 0, &flags);
	fill_sample(&s, t, RHEA_FN_SAMPLER, flags, stack);
	s.object = periods; /* sampling periods of CPU this capture stands for */
	point_sample_done(t, &s);
}

/*
 * Where to walk a thread blocked in the hooked call it began at since
 * from: the hook's caller (its return address, the hook's CFA, the
 * caller's rbp), read from the hook's frame.  From the system call's
 * registers (/proc/.../syscall: no rbp) a walk stopped at the hook, whose
 * frame is found through rbp.  The system call's own stack pointer must
 * lie below the hook's frame: a thread that left the call without its
 * return (a signal handler's longjmp, a cancellation) and blocks higher
 * up the stack now is not in it.  (sp 0: not known, a process that gave up
 * root may not read its registers, sampler.c; taken as in the call, as
 * the note says, which only a cancelled call's cleanup that blocks again
 * would belie.)  0, or -1 (not in that call any more).
 */
static int capture_call_regs(struct rhea_tstate *t, uint64_t since, uint64_t sp, struct unwind_regs *regs)
{
	struct unwind_stack st = {0, 0, NULL}; /* another thread's stack: guarded reads */
	uint64_t frame = __atomic_load_n(&t->call_frame, __ATOMIC_RELAXED);
	regs->sp = frame + 16;
	if (!frame || (sp && sp >= frame) || unwind_read(&st, frame, &regs->bp) < 0 ||
	    unwind_read(&st, frame + 8, &regs->ip) < 0)
		return -1;
	return __atomic_load_n(&t->call_since, __ATOMIC_ACQUIRE) == since ? 0 : -1;
}

/* Counters of another thread: CPU from its clock, the rest as of its last
 * capture (they only grow; its allocation counters live in its TLS, which
 * another thread must not touch).  c_begin = c_end. */
static void counters_from_outside(struct rhea_tstate *t, struct rhea_sample *s)
{
	s->c_end = t->last_c;
	uint64_t cpu;
	if (rhea_thread_cpu_ns(t->tid, &cpu) == 0) {
		cpu -= cpu % 1000; /* to the microsecond, as getrusage gives it */
		if (cpu > s->c_end.cpu_ns)
			s->c_end.cpu_ns = cpu;
	}
	s->c_begin = s->c_end;
}

int capture_forced(struct rhea_tstate *t, uint64_t pc, uint64_t sp, long sysno)
{
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return 0;
	unsigned flags = RHEA_S_ASYNC;
	struct unwind_regs regs = {pc, sp, 0};
	struct rhea_sample s;
	uint32_t stack = take_stack(t, &regs, 0, 1, &flags);
	fill_sample(&s, t, RHEA_FN_FORCED, flags, stack);
	s.object = (uint64_t)sysno;
	s.begin_ns = s.end_ns = rhea_now();
	counters_from_outside(t, &s);
	note_capture(t, &s);
	merge_or_emit(t, &s);
	__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
	return 1;
}

/*
 * t's wait so far in the hooked call it is blocked in (call_since), at
 * now: a BLOCK sample from the call's start, if that is min_block or more
 * ago, walked from the hook's caller (ASYNC: taken from outside).  Its
 * counters are those of its last capture, with the CPU time from its
 * clock; none for the call itself (c_begin = c_end), as for a BLOCK sample
 * without counters at the call: its CPU goes to the slice around it.
 */
int capture_wait_so_far(struct rhea_tstate *t, uint64_t now, uint64_t sp)
{
	uint64_t since = __atomic_load_n(&t->call_since, __ATOMIC_ACQUIRE);
	if (!since)
		return 0;
	unsigned fn = t->call_fn;
	uint32_t owner = t->call_owner;
	uint64_t object = t->call_object, begin = recording_clamp(rhea_stamp_ns(since));
	struct unwind_regs regs;
	if (begin > now || now - begin < rhea_g.cfg.min_block_ns || capture_call_regs(t, since, sp, &regs) < 0)
		return 0;
	if (__atomic_exchange_n(&t->in_capture, 1, __ATOMIC_ACQUIRE))
		return 0;
	unsigned flags = RHEA_S_BLOCK | RHEA_S_ASYNC;
	struct rhea_sample s;
	uint32_t stack = take_stack(t, &regs, 0, 1, &flags);
	fill_sample(&s, t, fn, flags, stack);
	s.object = object;
	s.owner_tid = owner;
	s.begin_ns = begin;
	s.end_ns = now;
	counters_from_outside(t, &s);
	note_capture(t, &s);
	emit_now(t, &s);
	__atomic_store_n(&t->in_capture, 0, __ATOMIC_RELEASE);
	return 1;
}

void capture_flush_pending(struct rhea_tstate *t)
{
	/* From another thread this may race with the owner: bounded tries. */
	for (int i = 0; i < 1000; i++) {
		if (try_own_pending(t)) {
			if (t->pend->valid)
				emit(t, &t->pend->s, sizeof(t->pend->s));
			t->pend->valid = 0;
			release_pending(t);
			return;
		}
		__builtin_ia32_pause();
	}
}

/* The slot where a site's search starts. */
static inline uint32_t site_home(uint64_t pc)
{
	return (uint32_t)((pc >> 4) ^ (pc >> 13)) & (RHEA_SITES - 1);
}

/* (The table may be read by rhea record after a SIGKILL at any point:
 * a new slot is listed in used[] only once it holds its site, and the
 * count is written before the bytes; core/salvage.h.) */
static void site_add(struct rhea_tstate *t, uint64_t pc, uint64_t count, uint64_t bytes)
{
	struct rhea_salvage_sites *st = t->sites;
	uint32_t i = site_home(pc);
	for (uint32_t k = 0; k < 16; k++) {
		uint32_t j = (i + k) & (RHEA_SITES - 1);
		struct rhea_salvage_site *s = &st->site[j];
		if (s->pc == 0) {
			s->pc = pc;
			st->used[st->nused] = (uint16_t)j;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			st->nused++;
		}
		if (s->pc == pc) {
			s->count += count;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			s->bytes += bytes;
			return;
		}
	}
	st->overflow += count;
	st->overflow_bytes += bytes;
}

/* The call instruction of a site kept as its return address (struct
 * rhea_hot's site_pc), as site tables and the file name it; 0 stays 0. */
static inline uint64_t site_call(uint64_t ret)
{
	return ret ? ret - 1 : 0;
}

void site_fold(struct rhea_tstate *t)
{
	if (rhea_hot.site_pc && rhea_hot.site_count)
		site_add(t, site_call(rhea_hot.site_pc), rhea_hot.site_count, rhea_hot.site_bytes);
	/* the totals stay what they were (hot_alloc_count) */
	rhea_hot.folded_count += rhea_hot.site_count;
	rhea_hot.folded_bytes += rhea_hot.site_bytes;
	rhea_hot.site_count = rhea_hot.site_bytes = 0;
}

void site_note_switch(struct rhea_tstate *t, uint64_t ret, uint64_t bytes)
{
	site_fold(t);
	rhea_hot.site_pc = ret;
	rhea_hot.site_count = 1;
	rhea_hot.site_bytes = bytes;
	/* This site is folded into its slot when the next one comes: fetch
	 * the slot now, while the program allocates here (in an allocation
	 * storm that fold was a cache miss: 85% of its time). */
	__builtin_prefetch(&t->sites->site[site_home(site_call(ret))], 1);
}

/* An entry of n records of elem bytes after a header h of the SITES
 * layout (SHORTS' is the same), filled in here, then emitted. */
static void emit_counted(struct rhea_tstate *t, void *h, uint16_t kind, uint32_t n, size_t elem)
{
	_Static_assert(sizeof(struct rhea_sites) == sizeof(struct rhea_shorts), "one header layout");
	struct rhea_sites x = {{kind, 0, (uint32_t)(sizeof(x) + n * elem)}, n, 0};
	memcpy(h, &x, sizeof(x)); /* (no access through the other type) */
	emit(t, h, x.h.size);
}

/* (noinline, as emit_shorts: a hook's stack holds one batch at a time) */
static __attribute__((noinline)) void emit_sites(struct rhea_tstate *t)
{
	enum { BATCH = 128 };
	/* The latest site's counts are in the thread's TLS line: folded in
	 * when it is this thread; another thread's (the process exiting while
	 * it runs) are read from there and added to what is emitted. */
	uint64_t ppc = 0, pcount = 0, pbytes = 0;
	if (t == rhea_hot.self) {
		session_check(t); /* (a thread that ends before its first hook of this recording) */
		site_fold(t);
	} else if (t->hot && t->session == rhea_g.session) { /* (else its run is an earlier recording's) */
		/* Read without a fault: the thread may have ended unseen (no
		 * key destructor: first met in a signal, or there before an
		 * attach), its TLS unmapped with its stack, its slot waiting
		 * for the sampler's scan (its tid may be another thread's by
		 * now).  Where the kernel refuses the read (a seccomp filter),
		 * that run of allocations goes uncounted in the sites. */
		uint64_t v[3];
		_Static_assert(offsetof(struct rhea_hot, site_bytes) == offsetof(struct rhea_hot, site_pc) + 16,
			       "the latest site's three words in a row");
		if (rhea_read_own((uint64_t)(uintptr_t)&t->hot->site_pc, v, sizeof(v)) == 0) {
			ppc = site_call(v[0]);
			pcount = v[1];
			pbytes = v[2];
		}
	}
	struct {
		struct rhea_sites h;
		struct rhea_site s[BATCH];
	} e;
	const struct rhea_salvage_sites *st = t->sites;
	uint32_t n = 0, used = st->nused;
	if (used > RHEA_SITES)
		used = RHEA_SITES;
	/* The slots in use, then the latest site if it has no slot, then the
	 * overflow bucket as pc 0. */
	for (uint32_t i = 0; i <= used + 1; i++) {
		uint64_t pc, count, bytes;
		if (i < used) {
			const struct rhea_salvage_site *s = &st->site[st->used[i] & (RHEA_SITES - 1)];
			pc = s->pc;
			count = s->count;
			bytes = s->bytes;
			if (pc == ppc) {
				count += pcount;
				bytes += pbytes;
				pcount = 0;
			}
		} else if (i == used) {
			pc = ppc;
			count = ppc ? pcount : 0;
			bytes = pbytes;
		} else {
			pc = 0;
			count = st->overflow;
			bytes = st->overflow_bytes;
		}
		if (count > 0) {
			e.s[n].pc = pc;
			e.s[n].count = count;
			e.s[n].bytes = bytes;
			e.s[n].tid = t->tid;
			e.s[n].serial = t->serial;
			n++;
		}
		if (n == BATCH || (i == used + 1 && n > 0)) {
			emit_counted(t, &e.h, RHEA_E_SITES, n, sizeof(e.s[0]));
			n = 0;
		}
	}
}

/* The thread's short calls (struct rhea_short_calls), when any came since
 * the last emission: their time in ns, the ticks converted now. */
static __attribute__((noinline)) void emit_shorts(struct rhea_tstate *t)
{
	struct {
		struct rhea_shorts h;
		struct rhea_short s[RHEA_FN_COUNT];
	} e;
	const struct rhea_cal *cal = __atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE);
	uint64_t all = 0;
	uint32_t n = 0;
	for (unsigned fn = 0; fn < RHEA_FN_COUNT; fn++) {
		const struct rhea_short_calls *c = &t->shorts[fn];
		uint64_t calls = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
		if (!calls)
			continue;
		uint64_t tsc = __atomic_load_n(&c->tsc, __ATOMIC_RELAXED);
		struct rhea_short *o = &e.s[n++];
		memset(o, 0, sizeof(*o));
		o->tid = t->tid;
		o->serial = t->serial;
		o->fn = (uint16_t)fn;
		o->count = calls;
		o->ns = __atomic_load_n(&c->ns, __ATOMIC_RELAXED) +
			(cal ? (uint64_t)(((unsigned __int128)tsc * cal->mult) >> 32) : 0);
		all += calls;
	}
	if (!n || all == t->shorts_emitted)
		return;
	t->shorts_emitted = all;
	emit_counted(t, &e.h, RHEA_E_SHORTS, n, sizeof(e.s[0]));
}

void capture_emit_counts(struct rhea_tstate *t)
{
	emit_sites(t);
	emit_shorts(t);
}

void capture_emit_thread_at(struct rhea_tstate *t, unsigned event, uint32_t parent, uint64_t time_ns,
			    const char *name)
{
	struct rhea_thread e;
	memset(&e, 0, sizeof(e));
	e.h.kind = RHEA_E_THREAD;
	e.h.flags = (uint16_t)event;
	e.h.size = sizeof(e);
	e.tid = t->tid;
	e.parent_tid = parent;
	e.time_ns = time_ns;
	memcpy(e.name, name, sizeof(e.name));
	e.name[15] = 0;
	emit(t, &e, sizeof(e));
}

void capture_emit_thread(struct rhea_tstate *t, unsigned event, uint32_t parent)
{
	char name[16];
	memcpy(name, t->name, sizeof(name));
	capture_emit_thread_at(t, event, parent, rhea_now(), name);
}

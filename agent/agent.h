/*
 * agent.h - state shared by the pieces of librhea.so (the agent that lives
 * inside the traced process).  Nothing here is exported: the library hides
 * every symbol but the interposed libc functions.
 */
#ifndef RHEA_AGENT_H
#define RHEA_AGENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "cfi.h"
#include "format.h"
#include "hookfn.h"
#include "salvage.h"
#include "stacktab.h"
#include "sys.h"
#include "unwind.h"

#define RHEA_MAX_DEPTH 1024
#define RHEA_SITES RHEA_SALVAGE_SITES /* per-thread allocation-site table (salvage.h) */

/*
 * A recent walk on a thread and what it found (capture.c, take_stack): a
 * capture whose walk provably gives the same frames reuses them.  Four per
 * thread: a thread alternates between a few call paths and the release
 * stacks its unlocks take (waits.c).  Of W2's sync captures, one memo
 * served 48%, two 64%, four 70%.
 */
#define RHEA_MEMOS 4
struct rhea_memo {
	int exact;    /* take_stack's exact_leaf argument */
	uint32_t gen; /* module map generation of the walk */
	uint32_t leaf;
	unsigned flags; /* RHEA_S_TRUNCATED, RHEA_S_LEAF_EXACT */
	struct unwind_regs regs;
	struct unwind_trace trace;
};

/*
 * Per-thread state.  Lives in a registry slot (not in TLS) so that other
 * threads (the writer, the exit path, the sampler) can read it; TLS holds a
 * pointer to it.  Fields used on the hook fast path come first.
 */
struct rhea_tstate {
	uint32_t state;      /* TS_*; first: a new owner clears what follows */
	uint32_t msgid;
	uint32_t tid;
	uint32_t serial;     /* unique per thread instance */
	uint32_t in_capture; /* set while capturing (signal handler skips) */
	/* the release path: in the line of tid, which it reads too */
	uint32_t rel_seq;   /* releases recorded in the wait table (waits.c) */
	uint64_t releasing; /* atomic: object this thread is releasing, 0 none */
	/* The pending (merged) sample: busy (atomic: owner vs. exit flusher),
	 * valid, the sample.  In the salvage region when there is one (a
	 * SIGKILL leaves it to rhea record, core/salvage.h), else own_pend. */
	struct rhea_salvage_pend *pend;
	/* The allocation sites, counted by site_add (capture.c): in the
	 * salvage region for the first RHEA_SALVAGE_SITE_THREADS slots (a
	 * SIGKILL leaves them to rhea record too), else own_sites. */
	struct rhea_salvage_sites *sites;
	uint64_t stack_lo, stack_hi;
	uint64_t last_capture_ns; /* any capture: sync, sampled or forced */
	uint32_t long_waits; /* recent sync waits that lasted >= min_block (decays) */
	/* The hooked call that may block the thread now, for the end of the
	 * recording (agent.c, end_blocked) and the sampler's forced captures:
	 * its start as a rhea_stamp (0: in none), trigger and object.  Written
	 * by the thread, read by the one ending the recording and the sampler. */
	uint64_t call_since;
	uint64_t call_object;
	uint64_t call_frame; /* the hook's frame: its caller's pc, sp and rbp */
	uint32_t call_fn;
	uint32_t call_owner; /* a lock's owner when the wait began */
	/* which of the short calls below are timed (hooks.c, short_sampled):
	 * in the line the hooks write at every call (after the shorts, a line
	 * of its own, the hooks cost W2 3.3% of its CPU against 3.05) */
	uint64_t short_draws;
	int timer_id; /* atomic: the sampling timer, -1 none; whoever exchanges
			 it for -1 deletes it (the thread at exit, the sampler) */
	int sig_blocked; /* atomic: counted among the threads that blocked the
			    sampling signal (sampler_note_blocked) */
	uint32_t handler_seq; /* atomic: odd while the thread runs the sampler's
				 handler, whose mask (the kernel's, for its
				 time) blocks the signal: not the program's */
	struct rhea_counters last_c; /* counters at that capture */
	uint64_t cpu_est_ns, cpu_est_at, cpu_est_sw; /* CPU time estimate (capture.c) */
	char name[16];
	struct rhea_hot *hot; /* the thread's TLS line, once it ran a hook */
	uint32_t memo_ok; /* bit i: memo[i] holds a walk (see struct rhea_memo) */
	uint32_t memo_next; /* the memo the next walk replaces */
	int cache_n; /* root-first stack of the last capture and its node ids */
	uint64_t cache_addrs[RHEA_MAX_DEPTH];
	uint32_t cache_ids[RHEA_MAX_DEPTH];
	uint64_t scratch[RHEA_MAX_DEPTH + 16]; /* unwinder output, leaf first */
	struct unwind_cache ucache; /* CFI rows of this thread's frames */
	struct rhea_memo memo[RHEA_MEMOS];
	uint64_t sites_emitted_ns;
	struct {
		uint64_t site, ns; /* release-stack cache: call site, when */
		uint32_t stack;
	} rel[4];
	uint32_t rel_next;
	uint64_t clock_at; /* the allocation count at the last alloc_clock read */
	uint32_t session;  /* rhea_g.session its TLS allocation counts are of (beside
			      clock_at: the allocation slow paths read both) */
	uint32_t populated; /* the slot's pages were made writable (thread.c) */
	uint32_t index;     /* the slot's number in the registry */
	struct rhea_salvage_pend own_pend; /* when there is no salvage region */
	struct rhea_salvage_sites own_sites; /* when the region has none for this slot */
	/* The hooked calls that may block but returned before min_block (no
	 * BLOCK sample has them), per trigger: how many, and their time, in
	 * ns, and in TSC ticks (unconverted) where an I/O hook compared
	 * ticks; partly sampled while the ticker ticks (hooks.c,
	 * short_call).  Written by the thread, read by whoever emits them
	 * (capture.c, emit_shorts: SHORTS entries); shorts_emitted: their
	 * count then. */
	struct rhea_short_calls {
		uint64_t n, ns, tsc;
	} shorts[RHEA_FN_COUNT];
	uint64_t shorts_emitted;
};

/* Synthetic addresses in the stack table (never code addresses). */
#define RHEA_ADDR_TRUNCATED 1ull /* root of a stack cut at max_depth */

enum { TS_FREE = 0, TS_LIVE = 1, TS_INIT = 2 };

struct rhea_config {
	uint64_t interval_ns;
	uint64_t min_block_ns; /* a blocking call at least this long is recorded */
	int epoch_gate;        /* min_block_ns >= interval_ns: a call during which
				  the epoch did not move was short (no end clock) */
	uint32_t max_depth;
	int unwind_fp;         /* 1: frame pointers, 0: CFI */
	uint32_t class_mask;   /* 1 << enum rhea_class */
	int follow;
	uint64_t sample_ns;      /* async sampling period of CPU time, 0 = off */
	uint64_t sample_main_ns; /* the same for the main thread */
	uint64_t force_ns;       /* capture a thread not captured this long */
	int signal;              /* sampling signal, 0 = pick a free one */
	size_t buffer_bytes;
	uint32_t max_nodes;
	int quiet;
	int no_tsc; /* RHEA_NO_TSC=1, for tests: time from clock_gettime, as
		       where the clocksource is not the TSC (no epoch grid) */
	uint64_t attach_for_ns; /* rhea attach -d: when the word to stop is due
				   (agent.c, attach_poll_from); 0: none */
};

struct rhea_agent {
	/* read on every hook: one cache line */
	volatile int on[RHEA_C_COUNT]; /* class hooks active */
	union {
		struct {
			uint32_t epoch_zero;     /* always 0: see epoch_shifted */
			volatile uint32_t epoch; /* moved at interval ends (clock.c) */
		};
		/* (uint64_t)epoch << 32 in one load (little-endian), what the
		 * fast paths compare their TLS gate word with */
		volatile uint64_t epoch_shifted;
	};
	/* atomic: the TSC at which the current epoch's interval ends, on a
	 * grid of whole intervals (clock.c, epoch_cross); UINT64_MAX until
	 * the TSC is calibrated (then only the ticker advances the epoch) */
	volatile uint64_t epoch_end_tsc;
	volatile int active;
	/* the ticker coasts (agent.c): the epoch may stand still while time
	 * passes, so a call that did not see it move is not known to be short */
	volatile uint32_t ticker_coasting;
	/* (end of the hot line) */
	uint32_t epoch_used;   /* atomic: a capture in an epoch the ticker made */
	uint32_t ticker_epoch; /* atomic: the latest epoch the ticker made, 0 none */
	uint32_t ticker_wake;  /* futex: why a capture woke the coasting ticker (TICKER_*) */
	/* atomic: while the ticker coasts, the first capture in an interval
	 * ending after this TSC asks it for a probe (agent.c); UINT64_MAX: not now */
	uint64_t probe_after_tsc;
	uint64_t interval_tsc; /* the interval in TSC ticks, 0 until calibrated */
	uint64_t min_block_tsc; /* cfg.min_block_ns in TSC ticks, 0 until calibrated */
	uint64_t timed_calls;   /* atomic: the threads' rhea_hot.timed, as of their captures */
	struct rhea_config cfg;
	/* the recordings an attached copy made before this one (agent.c,
	 * agent_restart): a thread's allocation counts of an earlier one are
	 * not this one's (thread_session_begin).  Read by the allocation
	 * hooks' slow paths: beside the configuration, which nothing writes
	 * while recording */
	uint32_t session;
	uint64_t start_ns;
	int fd;         /* the recording, -1 none (see agent_owns_fd) */
	int control_fd; /* rhea attach's control FIFO, -1 none */
	int spare_fd;   /* the recording to be, unnamed yet (agent.c), -1 none */
	pid_t pid;
	struct buf buf;
	struct stacktab st;
	uint64_t agent_lo, agent_hi; /* our own code, skipped in stacks */
	/* statistics (atomics) */
	uint64_t captures, truncated, unwind_errors, write_errors;
	uint64_t cfi_build_ns; /* building unwind tables the cache lacked (modules.c) */
	uint64_t threads_seen;
	uint32_t finished; /* atomic: the recording has been closed */
	volatile int leader_gone; /* the main thread exited, the process did not */
	char path[4096];
};

extern struct rhea_agent rhea_g;
_Static_assert(offsetof(struct rhea_agent, ticker_coasting) < 64, "the hooks' fields share one cache line");
_Static_assert(offsetof(struct rhea_agent, epoch_shifted) % 8 == 0 &&
		       offsetof(struct rhea_agent, epoch) == offsetof(struct rhea_agent, epoch_shifted) + 4,
	       "epoch_shifted: one aligned 64-bit word whose high half is the epoch");

/*
 * What the hook fast path touches, in one TLS cache line: the recursion
 * guard, the epoch of the last capture, the allocation counters and the
 * thread's slot.  They used to live in the slot, a separate line that an
 * allocation-heavy program evicts between two mallocs: the first load of
 * it was most of the hook's cost there.  Only the thread itself reads or
 * writes these; other threads see the counters as of its last capture
 * (last_c in the slot).
 */
struct rhea_hot {
	union {
		struct {
			int guard;           /* set while the agent itself runs on this thread */
			uint32_t last_epoch; /* epoch of the last capture */
		};
		/* both at once: equal to (uint64_t)epoch << 32 exactly when the
		 * agent is not running on this thread and no capture is due
		 * (x86-64 is little-endian: guard is the low half) */
		uint64_t gate;
	};
	/* allocations before the latest site's run; the thread's totals are
	 * these plus site_count and site_bytes (hot_alloc_count...) */
	uint64_t folded_count, folded_bytes;
	struct rhea_tstate *self;
	/* the allocation site of the latest allocations, counted here until a
	 * different site comes (then folded into the slot's site table): its
	 * return address as the hook sees it (site tables hold it minus one,
	 * the call instruction); 0 until the thread's first counted
	 * allocation, which keeps unregistered threads off the fast path */
	uint64_t site_pc, site_count, site_bytes;
	/* timed calls (and releases someone waits for) since the thread's
	 * last capture: each would read the clock at its end were the ticker
	 * coasting; added to rhea_g.timed_calls at captures (agent.c's cost
	 * model) */
	uint32_t timed;
	/* hooks that read no clock, counted for untimed_note */
	uint32_t untimed;
};
_Static_assert(sizeof(struct rhea_hot) <= 64, "rhea_hot: one cache line");

extern __thread struct rhea_hot rhea_hot;
#define rhea_guard (rhea_hot.guard)

/* The fast paths' check: see struct rhea_hot's gate. */
static inline int hot_gate_open(void)
{
	return rhea_hot.gate == rhea_g.epoch_shifted;
}

/* The calling thread's allocations so far. */
static inline uint64_t hot_alloc_count(void)
{
	return rhea_hot.folded_count + rhea_hot.site_count;
}

static inline uint64_t hot_alloc_bytes(void)
{
	return rhea_hot.folded_bytes + rhea_hot.site_bytes;
}

/* thread.c */
struct rhea_tstate *thread_register(void);
/* This thread's state; registers the thread on first use (NULL: untraced). */
static inline struct rhea_tstate *thread_self(void)
{
	struct rhea_tstate *t = rhea_hot.self;
	if (__builtin_expect(t != NULL, 1))
		return t;
	return thread_register();
}
void thread_set_name(struct rhea_tstate *t, const char *name);
void thread_exit_current(void);
void thread_registry_init(void);
#define RHEA_MAX_THREADS 8192 /* registry slots at most */
extern struct rhea_salvage_pend *rhea_pends; /* RHEA_MAX_THREADS, one per slot, or NULL */
extern struct rhea_salvage_sites *rhea_site_tables; /* RHEA_SALVAGE_SITE_THREADS, from slot 0, or NULL */
/* Claim a slot for a thread that is not the caller (sampler) or from a
 * signal handler: no stack bounds, no exit destructor. */
struct rhea_tstate *thread_register_tid(uint32_t tid, int self);
struct rhea_tstate *thread_find(uint32_t tid);
/* A live thread other than `self` in the middle of releasing obj: its tid,
 * else 0 (scans the registry: for the rare unattributed long wait). */
uint32_t thread_find_releasing(uint64_t obj, uint32_t self);
void thread_release(struct rhea_tstate *t, uint32_t serial);
/* The sampler's scan saw tid vanish: a thread of it that ended its own
 * slot is gone, the tid is the next thread's to have (thread.c,
 * TID_ENDED; a raw clone() thread that gets the tid before the scan saw
 * the last one go is registered by its first hook, not by the scan). */
void thread_gone(uint32_t tid);
void thread_after_fork(void);
/* rhea attach again (agent.c, agent_restart): every live thread's slot
 * starts the new recording, its site table empty, a START entry. */
void thread_restart(void);
/* Call fn on every live thread's state (writer / exit path). */
void thread_foreach(void (*fn)(struct rhea_tstate *t, void *arg), void *arg);
uint32_t thread_gettid(void);

/* capture.c */
/* A synchronous capture on the calling thread, if its interval elapsed. */
/* clocked: the hook read the clock (see epoch_consumed) */
void capture_sync(struct rhea_tstate *t, unsigned fn, int clocked);
/* A blocking call that returned: record [begin, end] with the stack now. */
struct block_info {
	uint64_t begin, end;
	uint32_t epoch0;    /* rhea_g.epoch when the call began */
	int timed;          /* read the end clock whatever the epoch says */
	uint64_t cpu_begin; /* thread CPU at begin, 0 when not read */
	int have_begin;     /* c_begin below was read at the call */
	struct rhea_counters c_begin;
	uint64_t object;
	uint32_t owner, waker, waker_stack;
	uint64_t release_ns;
	int shared; /* a process-shared object: its releaser may be another process's */
};
void capture_block(struct rhea_tstate *t, unsigned fn, const struct block_info *b);
/* Why the coasting ticker is woken: a capture used an epoch it made, or
 * captures began again after a quiet spell (agent.c). */
enum { TICKER_TICK = 1, TICKER_PROBE = 2 };
void ticker_wake_up(uint32_t why);
/* A capture in epoch e.  clocked: right after the hook read the clock,
 * which kept the epoch current (clock.c).  Otherwise, if the ticker made
 * e, the ticker is needed: told, and woken if it coasts. */
static inline void epoch_consumed(uint32_t e, int clocked)
{
	if (!clocked && e == __atomic_load_n(&rhea_g.ticker_epoch, __ATOMIC_ACQUIRE)) {
		if (!__atomic_load_n(&rhea_g.epoch_used, __ATOMIC_RELAXED))
			__atomic_store_n(&rhea_g.epoch_used, 1, __ATOMIC_RELAXED);
		/* checked even when the epoch was used: the ticker may have
		 * begun to coast since, having missed that use */
		if (__builtin_expect(rhea_g.ticker_coasting, 0))
			ticker_wake_up(TICKER_TICK);
		return;
	}
	if (__builtin_expect(rhea_g.ticker_coasting, 0)) {
		uint64_t p = __atomic_load_n(&rhea_g.probe_after_tsc, __ATOMIC_RELAXED);
		if (p < __atomic_load_n(&rhea_g.epoch_end_tsc, __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&rhea_g.probe_after_tsc, &p, UINT64_MAX, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			ticker_wake_up(TICKER_PROBE);
	}
}
/* The calling thread's stack now, for a release someone waits on: unwound
 * at most once per call site per 50 us, else the cached one.  0: none. */
uint32_t capture_release_stack(struct rhea_tstate *t, uint64_t site, uint64_t now);
/* A RELEASE entry for a process-shared object someone may wait on. */
void capture_shared_release(struct rhea_tstate *t, unsigned fn, uint64_t obj, uint64_t site, uint64_t when);
uint64_t thread_cpu_now(struct rhea_tstate *t, uint64_t now);
/* The calling thread's counters now (CPU, allocations, faults, switches). */
void capture_counters(struct rhea_tstate *t, struct rhea_counters *c, uint64_t now);
/* A capture from a signal handler that interrupted the thread. */
void capture_async(struct rhea_tstate *t, const void *ucontext, unsigned periods);
/* A capture of another thread, blocked in a syscall at (pc, sp), taken by
 * the sampler thread.  Returns 1 when taken. */
int capture_forced(struct rhea_tstate *t, uint64_t pc, uint64_t sp, long sysno);
/* t's wait so far in the hooked call it is blocked in, if any, at now: a
 * BLOCK sample (ASYNC) from the call's start, its stack walked from the
 * hook's caller, from another thread (or t itself, in a signal handler that
 * interrupted the call: sp 0); t blocked in a system call at sp.  Returns 1
 * when taken, 0 when t is in no such call (or left it), or not long. */
int capture_wait_so_far(struct rhea_tstate *t, uint64_t now, uint64_t sp);
void capture_counters_baseline(struct rhea_tstate *t);
/* Emit the thread's pending (merged) sample; from another thread too. */
void capture_flush_pending(struct rhea_tstate *t);
/* The thread's last sample as it ends, on itself (capture.c). */
void capture_at_end(struct rhea_tstate *t);
/* Emit the thread's allocation sites (SITES) and short calls (SHORTS): at
 * most once a second as it captures, as it ends, at the end. */
void capture_emit_counts(struct rhea_tstate *t);
void capture_emit_thread(struct rhea_tstate *t, unsigned event, uint32_t parent);
/* The same with the time and name given: a START is dated before the name
 * was read from /proc, so that a rename the thread makes meanwhile, dated
 * after it, wins (thread.c, claim_slot). */
void capture_emit_thread_at(struct rhea_tstate *t, unsigned event, uint32_t parent, uint64_t time_ns,
			    const char *name);

/* cficache.c: compiled CFI tables on disk, by build-id (cfi.h) */

/* modules.c */
extern uint32_t rhea_modules_gen; /* the module map's generation (unwind.h's cache) */
int modules_scan(void); /* (re)read the loaded modules; new ones are recorded */
/* Inside dlopen (a library's constructors): new modules, with the tables
 * the cache has, before dlopen returns (modules.c).  1: some were added. */
int modules_catch_up(void);
/* The loader's count of objects ever added (dl_phdr_info's dlpi_adds). */
unsigned long long modules_loader_adds(void);
/* dl_iterate_phdr, for the agent: never under way at a fork (modules.c);
 * the fork's handlers, first in agent_prefork, then in its parent's and
 * child's (the child's at once: its other handlers may walk). */
struct dl_phdr_info;
int modules_walk(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);
void modules_fork_prepare(void);
void modules_fork_parent(void);
void modules_fork_child(void);
extern __thread int rhea_in_dlopen;  /* this thread is in the dlopen hook */
/* This thread installed a seccomp filter: the agent makes no system call
 * on it any more (agent.c, agent_seal_thread). */
extern __thread int rhea_sealed;
/* This thread's descriptor table is its own, without the program's stderr
 * (the sampler's: sampler.c): what the agent says waits for the writer. */
extern __thread int rhea_fds_private;
void agent_say_deferred(void);
void agent_seal_thread(void);
void agent_unseal_thread(void);
/* ... a filter on every thread: tracing ends first (agent_seal_process) */
void agent_seal_process(void);
extern __thread int rhea_in_handler; /* ... in a program's signal handler we wrap */
int modules_maps_each(int (*fn)(const char *line, void *arg), void *arg); /* /proc/self/maps, line by line */
/* pc in executable memory? (the last frame no module claims: capture.c) */
int modules_pc_executable(uint64_t pc);
void modules_exec_changed(void); /* code made at run time: the above's verdicts go */
void modules_after_fork(void);
const struct cfi_table *modules_find_cfi(uint64_t pc, uint64_t *bias, void *arg);
void modules_emit_all(void); /* after fork: the child's file needs them all */

/* waits.c */
extern uint32_t rhea_waits_seen;
extern uint64_t rhea_waits_missed;
/* Register a wait on obj: the way (-1: table full), *snap for waits_end. */
int waits_begin(uint64_t obj, uint64_t *snap);
void waits_end(int way, uint64_t obj, uint64_t snap, uint64_t t0, uint32_t self, struct block_info *b);
int waits_release_slow(struct rhea_tstate *t, uint64_t obj, uint64_t site, int may_block);
void waits_after_fork(void);
/* Whether the program has ever waited (see waits.c): until then, no
 * release has anyone to tell. */
static inline int waits_any(void)
{
	return __builtin_expect(__atomic_load_n(&rhea_waits_seen, __ATOMIC_RELAXED) != 0, 0);
}

/* Releasing obj (called from site): if someone waits on it, record this
 * thread as the releaser, with its stack (before the release, and after it
 * for a waiter that came in between: RELEASE_HOOK, hooks.c).  One load
 * until the program has waited for the first time (see waits.c). */
static inline int waits_release(struct rhea_tstate *t, uint64_t obj, uint64_t site, int may_block)
{
	if (!waits_any())
		return 0;
	return waits_release_slow(t, obj, site, may_block);
}

/* Around a release of obj that may wake somebody (on): say so in the
 * thread's slot (see thread_find_releasing); the previous value is
 * restored after (a signal handler's sem_post inside an unlock). */
static inline uint64_t waits_releasing(struct rhea_tstate *t, uint64_t obj, int on)
{
	if (!on || !waits_any())
		return 0;
	uint64_t prev = t->releasing;
	/* ordered before the release itself, which the woken thread then
	 * acquires: a plain store on x86 */
	__atomic_store_n(&t->releasing, obj, __ATOMIC_RELEASE);
	return prev;
}

static inline void waits_released(struct rhea_tstate *t, uint64_t prev, int on)
{
	if (on && t->releasing)
		__atomic_store_n(&t->releasing, prev, __ATOMIC_RELEASE);
}

/* sampler.c */
int sampler_start(void);
void sampler_arm(struct rhea_tstate *t); /* this thread's CPU timer, now */
/* Under rhea attach, the program thread the agent is starting on: its
 * timer waits until the start is over (sampler.c says why); 0 after. */
extern uint32_t sampler_hold_tid;
void sampler_disarm(struct rhea_tstate *t);
/* Whether thread tid sleeps in a system call: with its registers and the
 * call's number (from /proc), without them (a process that gave up root
 * may not read them: sampler.c), or not (running, gone, unknown). */
enum { RHEA_NOT_ASLEEP, RHEA_ASLEEP, RHEA_ASLEEP_AT };
int sampler_blocked(uint32_t tid, uint64_t *pc, uint64_t *sp, long *nr);
void sampler_stop(void);
void sampler_after_fork(void);
void sampler_fds_settle(void);
int sampler_leader_dead(void);
int sampler_program_gone(void);
int sampler_filter_sigaction(int sig, const struct sigaction *act, struct sigaction *old, int *handled);
const sigset_t *sampler_filter_set(const sigset_t *set, sigset_t *copy);
void sampler_unblock_self(void);
/* t blocks the sampling signal (with the raw system call, or since before
 * rhea attach): counted, once, for the statistics.  At t's exit (t the
 * calling thread) and at the end.  Their number so far. */
void sampler_note_blocked(struct rhea_tstate *t);
/* rhea attach again (agent.c, agent_restart): the new recording counts its
 * own (the threads' sig_blocked are cleared by thread_restart). */
void sampler_blocked_reset(void);
uint64_t sampler_blocked_threads(void);
/* sigwrap.c: the program's handlers run inside the agent's, which keeps a
 * blocking call's note (call_since) right across them; sigaction as the
 * program sees it; an action read from the kernel as the program set it. */
int sigwrap_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
void sigwrap_translate(int sig, struct sigaction *a);
/* hooks.c: pthread_sigmask without the hook's filter, for the agent's own masks */
int hooks_real_sigmask(int how, const sigset_t *set, sigset_t *old);
/* thread.c: /proc/self/task/<tid>/<leaf>; a task's state (1 alive, 0
 * zombie, -1 gone); whether any thread of the program's is still alive. */
void thread_refresh_name(struct rhea_tstate *t);
void thread_task_path(char path[64], uint32_t tid, const char *leaf);
/* Up to cap - 1 bytes of that file, NUL-terminated (raw system calls):
 * their number, or -1. */
ssize_t thread_read_task_file(uint32_t tid, const char *leaf, char *buf, size_t cap);
int thread_task_state(uint32_t tid);
int thread_stat_fields(uint32_t tid, int first, int n, uint64_t *out);
char thread_task_state_letter(uint32_t tid);
int thread_task_exit_code(uint32_t tid); /* a dead task's, waitpid's form; 0 unknown */
int thread_program_left(void);
extern volatile uint32_t rhea_agent_tids[8];

/* The CPU-time clock of thread tid of this process, as glibc's
 * pthread_getcpuclockid encodes it (per-thread, scheduler time). */
static inline clockid_t rhea_thread_clock(uint32_t tid)
{
	return (clockid_t)((~tid << 3) | 6);
}

/* Thread tid's CPU time in ns: 0 and *ns set, or -1 (it has exited). */
static inline int rhea_thread_cpu_ns(uint32_t tid, uint64_t *ns)
{
	struct timespec ts;
	if (clock_gettime(rhea_thread_clock(tid), &ts) != 0)
		return -1;
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}
/* agent.c: agent thread i (rhea_agent_tids) notes its CPU time as it ends */
void agent_thread_cpu_note(int i);

/* attach.c: loaded into a running process by rhea attach */
extern int rhea_attached;
extern uintptr_t attach_self_base; /* where this copy of the agent is loaded (attach mode) */
int attach_detect(void);
const char *attach_getenv(const char *name); /* the configuration: environment, or the attach file */
int attach_patch(void);
/* rhea attach again: the new attach's directory and its configuration
 * (read as attach_detect reads the first one's).  0, or -1. */
int attach_reconfigure(const char *dir);
int attach_rescan(void);
void *attach_real(const char *name, void *p);
void *agent_first_definition(const char *name);
const pthread_attr_t *agent_thread_attr(void);
void attach_unpatch(void);
void attach_unpatch_forked(void); /* in a forked child: without the loader */
int attach_open_control(void);
int attach_should_stop(void);
void attach_status(const char *msg);
void attach_note(const char *const *parts, int n);
void attach_cleanup(void);

/* salvage.c: the buffers in memory rhea record can read after a SIGKILL */
extern struct rhea_salvage *rhea_salvage;
/* Map the region: header, buffers (buf_bytes), nodes, npend pending
 * samples, nsites site tables; *buf, *nodes, *pend, *sites point into it.
 * NULL when nothing maps.
 * mode: SALVAGE_PRIVATE (anonymous memory), SALVAGE_INHERITED (rhea
 * record's memfd when it is ours to take), SALVAGE_OWN (a memfd of our
 * own, which rhea attach opens through /proc). */
enum { SALVAGE_PRIVATE = 0, SALVAGE_INHERITED = 1, SALVAGE_OWN = 2 };
void *salvage_region(int mode, size_t buf_bytes, size_t node_bytes, uint32_t npend, uint32_t nsites, void **buf,
		     void **nodes, struct rhea_salvage_pend **pend, struct rhea_salvage_sites **sites);
/* Before the file is named (the memfd to rhea record), then once named. */
void salvage_publish(const struct buf *b, uint32_t max_nodes);
void salvage_name(const char *output, dev_t dev, ino_t ino);
int salvage_shared(void); /* the region is a memfd */
/* The recording at path, created by rhea record's keeper for a process
 * that may not create it (salvage.c): its descriptor, or -1 and errno. */
int salvage_ask_file(const char *path);
int salvage_fd_number(void); /* the memfd's descriptor, -1 none */
void salvage_close_fd(void); /* rhea attach detached: no descriptor left behind */
void salvage_set_state(uint32_t state);
/* The agent could not write its recording (err, an errno) and stopped:
 * rhea record adds what it can, and says why (after agent_disable). */
void salvage_write_failed(int err);
/* A child was reaped with wstatus: tell rhea record (async-signal-safe). */
void salvage_note_reaped(pid_t pid, int wstatus);
void salvage_round(int begin, uint64_t file_offset);
void salvage_nodes_in_file(uint32_t written);
/* In a forked child (traced: it records, its memory may go to rhea
 * record): 0, or -1: the agent must stop. */
int salvage_after_fork(const struct buf *b, uint32_t next_id, int traced);
/* rhea attach again: the region in a memfd of its own once more (the last
 * attach closed its descriptor), what it holds kept as after a fork.  0,
 * or -1 (the region is as it was, private to the process). */
int salvage_renew(const struct buf *b, uint32_t next_id);

/* agent.c */
/* v in decimal at out, NUL-terminated; its length (async-signal-safe). */
size_t u64_to_str(uint64_t v, char *out);
void agent_warn(const char *msg, long value);
void agent_disable(const char *why, int err);
void agent_finish(unsigned reason, int status);
/* The agent's own file descriptors, which the program must not close or
 * replace (hooks.c, "the agent's own descriptors"). */
static inline int agent_owns_fd(int fd)
{
	/* the spare before the recording: open_output hands the one to the
	 * other in the opposite order, so that a look from another thread
	 * while it does sees the descriptor in one of them */
	return fd >= 0 && (fd == __atomic_load_n(&rhea_g.spare_fd, __ATOMIC_ACQUIRE) ||
			   fd == __atomic_load_n(&rhea_g.fd, __ATOMIC_ACQUIRE) || fd == rhea_g.control_fd);
}
/* Before the program makes fd (one of the agent's) name something else:
 * the agent's moves to another number.  0, or -errno (then the agent has
 * let go of it). */
int agent_move_fd(int fd);
int agent_in_vfork_child(void);
void agent_before_exec(void);
/* A harmless seccomp filter went in (hooks.c): 1. */
extern int agent_harmless_filter_seen;
/* The RHEA_SECCOMP_BASE an image this thread execs gets (agent.c), or -1:
 * its own. */
long agent_exec_seccomp_base(void);
/* A process about to change its user or groups, or its root directory:
 * its recording is created now, while it still may (agent.c). */
void agent_before_setid(void);
/* A forked child's first capture asks for its recording at once (capture.c):
 * made by agent_open_due, at the end of a hook's capture. */
extern uint32_t rhea_open_due;
void agent_open_due(void);
/* Before a change of ids: the agent's threads take the calling thread's
 * capabilities (agent.c); each of them looks for a request in its loop. */
void agent_share_caps(void);
void agent_caps_follow(void);
void sampler_wake_up(void);
int sampler_is_running(void);
void agent_prefork(void);
void agent_postfork_parent(void);
void agent_postfork_child(void);
void agent_ensure_init(void);

/* clock.c: CLOCK_MONOTONIC nanoseconds, from the TSC when the kernel
 * keeps time with it (see clock.c), else from clock_gettime. */
struct rhea_cal {
	uint64_t base_tsc, base_ns, mult; /* ns = base_ns + (dtsc * mult) >> 32 */
};
extern struct rhea_cal *volatile rhea_cal;
void clock_init(void);
void clock_calibrate(void);
uint64_t rhea_now_slow(void);
int clock_tsc_usable(void); /* the kernel keeps time with the TSC, and rhea reads it */
/* The epoch (clock.c): past the end of the current interval at tsc, the
 * epoch advances (once, whoever notices first).  by_ticker: the ticker
 * makes it (epoch_consumed).  Returns 1 when this call advanced it. */
int epoch_cross(uint64_t tsc, int by_ticker);
/* Whether the ticker should coast (1) or tick (0), by what each costs a
 * second: calls_per_s timed calls reading their end clock (read_ns each)
 * against a wake-up of wake_ns per interval; coasting: what it does now. */
int epoch_coast_pays(uint64_t calls_per_s, uint64_t read_ns, uint64_t wake_ns, uint64_t interval_ns,
		     int coasting);
/* What a timed call's end clock read costs (epoch_coast_pays). */
uint64_t clock_read_ns(void);
/* Advance the epoch by one now, off the grid (never to 0); by_ticker as
 * above.  Returns the new epoch. */
uint32_t epoch_bump(int by_ticker);
static inline void epoch_note(uint64_t tsc)
{
	if (__builtin_expect(tsc >= __atomic_load_n(&rhea_g.epoch_end_tsc, __ATOMIC_RELAXED), 0))
		epoch_cross(tsc, 0);
}

/* Every TSC read the agent makes keeps the epoch current on its way. */
static inline uint64_t rhea_now(void)
{
	const struct rhea_cal *c = __atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE);
	if (__builtin_expect(c == NULL, 0))
		return rhea_now_slow();
	uint64_t tsc = __builtin_ia32_rdtsc();
	epoch_note(tsc);
	uint64_t d = tsc - c->base_tsc;
	return c->base_ns + (uint64_t)(((unsigned __int128)d * c->mult) >> 32);
}

/* The TSC now, for comparisons with rhea_stamp()s in ticks (min_block_tsc):
 * 0 without a calibrated TSC. */
static inline uint64_t rhea_tsc(void)
{
	if (__builtin_expect(__atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE) == NULL, 0))
		return 0;
	uint64_t tsc = __builtin_ia32_rdtsc();
	epoch_note(tsc);
	return tsc;
}

/*
 * A time taken before a call that is timed only when it turns out long
 * (the I/O hooks): the TSC as read, converted by rhea_stamp_ns() only when
 * needed, so that the read's latency overlaps the call instead of stalling
 * the hook before it (a third of a hooked read's own cost on the bench VM)
 * and most calls never convert.  Converted with the calibration current
 * then (signed: it may be newer than the stamp).  Bit 63 set: nanoseconds
 * already (no calibration yet, or no usable TSC).
 */
#define RHEA_STAMP_NS (1ull << 63)
static inline uint64_t rhea_stamp(void)
{
	if (__builtin_expect(__atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE) == NULL, 0))
		return rhea_now_slow() | RHEA_STAMP_NS;
	uint64_t tsc = __builtin_ia32_rdtsc();
	epoch_note(tsc);
	return tsc & ~RHEA_STAMP_NS;
}

static inline uint64_t rhea_stamp_ns(uint64_t stamp)
{
	const struct rhea_cal *c = __atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE);
	if (stamp & RHEA_STAMP_NS)
		return stamp & ~RHEA_STAMP_NS;
	if (__builtin_expect(c == NULL, 0))
		return rhea_now_slow(); /* recalibrating from scratch (fork): about now */
	__int128 d = (__int128)(int64_t)(stamp - c->base_tsc);
	return c->base_ns + (uint64_t)(int64_t)((d * (__int128)c->mult) >> 32);
}

/* hooks.c: what fastpath.c's malloc and free leave to it (ret: the
 * return address into the program), and the arena that serves dlsym's
 * allocations before the real malloc is known (free ignores its blocks). */
void *hooks_malloc_other(size_t n, uint64_t ret);
void hooks_free_other(void *p);
/* glibc's internal mutex kind bits (nptl/pthreadP.h): robust, PI, PP,
 * shared */
#define GLIBC_MUTEX_ROBUST 16
#define GLIBC_MUTEX_PRIO_INHERIT 32
#define GLIBC_MUTEX_PRIO_PROTECT 64
#define GLIBC_MUTEX_PSHARED 128
/* ...and what its pthread_mutex_lock and _unlock leave to it. */
int hooks_mutex_lock_other(pthread_mutex_t *m);
int hooks_mutex_unlock_other(pthread_mutex_t *m);
#define RHEA_BOOT_ARENA (64 * 1024)
extern char rhea_boot_arena[RHEA_BOOT_ARENA] __attribute__((visibility("hidden")));
static inline int rhea_is_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)rhea_boot_arena < RHEA_BOOT_ARENA;
}

/* The thread's first allocation hook or capture in a recording rhea
 * attach started again (agent.c, agent_restart): its allocation counts in
 * TLS, and its run of allocations from one site, are the last recording's
 * (thread.c).  On the thread itself, before anything is counted or read:
 * in site_note (the allocation hooks' slow paths; malloc's fast path is
 * closed to the thread until it captures, as the restart moved the
 * epoch), read_counters (every capture that reads counters) and
 * emit_sites (its own, at its end). */
void thread_session_begin(struct rhea_tstate *t);
static inline void session_check(struct rhea_tstate *t)
{
	if (__builtin_expect(t->session != rhea_g.session, 0))
		thread_session_begin(t);
}

/* Another site than the latest: fold the latest into the site table. */
void site_note_switch(struct rhea_tstate *t, uint64_t pc, uint64_t bytes);
/* Fold the thread's latest-site counts into its site table (the thread
 * itself, before reading the table). */
void site_fold(struct rhea_tstate *t);

/*
 * Count one allocation of `bytes` made from call site pc (hot path).
 *
 * Allocations come in runs from one site (a loop, a parser, a container
 * growing): those are counted in the TLS line the hook touches anyway, and
 * the thread's totals are derived from them (two adds per allocation, not
 * four).  The site table (512 slots in the thread's slot) is touched only
 * when the site changes; with it on every call, its line missed the cache
 * in an allocation-heavy program and was most of the hook's cost.
 *
 * Plain 64-bit read-modify-writes: gcc pairs these into one 16-byte SSE
 * load/add/store, which on the bench machine (AMD EPYC) stalled on the
 * load (the previous call's 16-byte store to the same place): 70% of the
 * hook's samples, 4.5 ns per malloc.  The empty asm keeps the pair apart.
 */
static inline void site_note_same(uint64_t bytes)
{
	rhea_hot.site_count++;
	__asm__ volatile("" ::: "memory");
	rhea_hot.site_bytes += bytes;
}

/*
 * A thread whose hooks read no clock (it allocates, it takes free locks)
 * would capture only when someone else moved the epoch: the ticker, waking
 * every interval at 10-20 us of CPU a wake-up in the bench VM (1.5% of a
 * CPU, a third of the agent's cost on sqlite3, W4).  Instead it reads the
 * TSC itself once in CLOCK_EVERY such hooks (epoch_note, about 10 ns: a
 * sixth of a nanosecond a hook), so the epoch moves within 64 to 256 of
 * its hooks of an interval's end (microseconds in an allocation storm),
 * its captures follow its own clock reads, and the ticker, whose
 * epochs nobody uses then, coasts (agent.c).  The other hooks that read
 * no clock (locks, releases: hooks.c, tick) count in untimed_note.  The
 * allocation hooks count allocations anyway: their
 * slow path, which every change of allocation site takes, reads the clock
 * when CLOCK_EVERY of them passed since the last read (alloc_clock), and
 * malloc's fast path leaves a site's run every CLOCK_RUN allocations for
 * it (site_clock_due).  (With CLOCK_EVERY there, W1's runs of 64
 * allocations from one site took the slow path twice each: 0.4% of its CPU.)
 */
#define CLOCK_EVERY 64
#define CLOCK_RUN 128
static inline int site_clock_due(void)
{
	return ((rhea_hot.site_count + 1) & (CLOCK_RUN - 1)) == 0;
}

static inline void untimed_note(void)
{
	if (__builtin_expect((++rhea_hot.untimed & (CLOCK_EVERY - 1)) == 0, 0))
		epoch_note(__builtin_ia32_rdtsc());
}

/* After site_note, in the allocation hooks' slow paths. */
static inline void alloc_clock(struct rhea_tstate *t)
{
	uint64_t n = hot_alloc_count();
	if (__builtin_expect(n - t->clock_at >= CLOCK_EVERY, 0)) {
		t->clock_at = n;
		epoch_note(__builtin_ia32_rdtsc());
	}
}

static inline void site_note(struct rhea_tstate *t, uint64_t pc, uint64_t bytes)
{
	session_check(t);
	if (__builtin_expect(rhea_hot.site_pc == pc, 1)) {
		site_note_same(bytes);
		/* A long run is folded into the table every CLOCK_RUN
		 * allocations (malloc's fast path leaves it for this): the
		 * table, which outlives a SIGKILL (core/salvage.h), is never
		 * further behind. */
		if (__builtin_expect((rhea_hot.site_count & (CLOCK_RUN - 1)) == 0, 0))
			site_fold(t);
		return;
	}
	site_note_switch(t, pc, bytes);
}


#endif

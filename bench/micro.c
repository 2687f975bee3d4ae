/*
 * micro.c - micro-benchmarks of the agent's capture path, linked with the
 * agent's own objects (build/librhea_core.a: unwind.c, cfi.c, stacktab.c,
 * buf.c), outside any traced program:
 *
 *   capture   per stack at depth 10/30/60: unwind_fp, unwind_cfi and
 *             unwind_cfi_cached ("cfi+rc": with the per-thread row cache
 *             the agent uses, warm after the first capture) on a
 *             call chain built with and without frame pointers
 *             (micro_chain.c), then stacktab_intern of the whole stack,
 *             root first (every node already present after the first
 *             capture: the steady state of a program in a loop).  Median
 *             and p99 per capture, timed with the TSC.  `frames` is what the
 *             unwinder found (the fp walker stops early in code without
 *             frame pointers).  The last rows repeat depth 30 with the
 *             caches evicted before each capture (16 MB written, untimed),
 *             as they are when a program runs for an interval in between.
 *   sync      a replica of one whole synchronous capture as capture.c does
 *             it: UNWIND_HERE + unwind_cfi_cached, compare with the previous stack
 *             and intern only the new tail, clock_gettime(CLOCK_MONOTONIC),
 *             the counters below, buf_emit of the sample; on a 10- and a
 *             30-frame stack (no-fp code), the stack alternating between two
 *             leaves so that one node is interned and a record emitted each
 *             time (the agent merges identical captures instead)
 *   counters  what capture.c reads on every capture besides the stack:
 *             clock_gettime(CLOCK_THREAD_CPUTIME_ID) + getrusage(RUSAGE_THREAD)
 *   emit      buf_emit of one 128-byte record (the size of a SAMPLE)
 *   stacktab  interning throughput: 100000 stacks of depth 30 that share a
 *             random prefix with the previous one (about 5 new nodes each),
 *             interned whole, root first; then the same stacks again (every
 *             node a hit); then two threads at once on one table.
 *
 *   micro [-n SAMPLES]     (default 20000 captures per configuration)
 *
 * CFI tables are compiled with cfi_build() for /proc/self/exe and the
 * modules the chain runs through (libc), found with dl_iterate_phdr; lookup
 * is a binary search over the modules, as in agent/modules.c.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "agent.h"
#include "buf.h"
#include "cfi.h"
#include "stacktab.h"
#include "unwind.h"
#include "vec.h"

typedef uint64_t (*chain_leaf_fn)(void *arg);
uint64_t chain_fp(int depth, chain_leaf_fn leaf, void *arg);
uint64_t chain_nofp(int depth, chain_leaf_fn leaf, void *arg);

#define MAXF 256

/* The agent's state, which agent.h's inline clock (rhea_now -> epoch_note)
 * and clock.c read: defined here as in the unit tests, zero but for the
 * interval set before the clock rows (the default, 1 ms). */
struct rhea_agent rhea_g;

/* ---- time --------------------------------------------------------------- */

static double ns_per_tick = 1.0;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks(void)
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static void calibrate(void)
{
	uint64_t n0 = now_ns(), t0 = ticks();
	while (now_ns() - n0 < 100000000ull)
		;
	uint64_t n1 = now_ns(), t1 = ticks();
	ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
}

/* Median and p99 of v[0..n) ticks, in ns (sorts v). */
static void stats(uint64_t *v, int n, double *med, double *p99)
{
	qsort(v, (size_t)n, sizeof(*v), vec_cmp_u64);
	*med = (double)v[n / 2] * ns_per_tick;
	*p99 = (double)v[(int)((double)n * 0.99)] * ns_per_tick;
}

/* ---- modules and CFI ---------------------------------------------------- */

struct module {
	uint64_t lo, hi, bias;
	struct cfi_table *cfi;
	char path[512];
};
static struct module mods[16];
static int nmods;

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (nmods >= 16)
		return 1;
	const char *name = info->dlpi_name;
	struct module *m = &mods[nmods];
	if (!name || !*name)
		snprintf(m->path, sizeof(m->path), "/proc/self/exe");
	else if (strstr(name, "libc.so"))
		snprintf(m->path, sizeof(m->path), "%s", name);
	else
		return 0; /* the chain runs through our executable and libc only */
	m->lo = UINT64_MAX;
	m->hi = 0;
	m->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (lo < m->lo)
			m->lo = lo;
		if (hi > m->hi)
			m->hi = hi;
	}
	int r = cfi_build(m->path, &m->cfi);
	if (r < 0) {
		fprintf(stderr, "micro: cfi_build %s: %s\n", m->path, strerror(-r));
		return 0;
	}
	nmods++;
	return 0;
}

static int cmp_mod(const void *a, const void *b)
{
	const struct module *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static const struct cfi_table *find_cfi(uint64_t pc, uint64_t *bias, void *arg)
{
	(void)arg;
	int lo = 0, hi = nmods;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (pc < mods[mid].lo)
			hi = mid;
		else if (pc >= mods[mid].hi)
			lo = mid + 1;
		else {
			*bias = mods[mid].bias;
			return mods[mid].cfi;
		}
	}
	return NULL;
}

/* ---- capture ------------------------------------------------------------ */

static struct unwind_stack main_stack;
static struct stacktab tab;

struct job {
	int use_cfi; /* 0 fp, 1 cfi, 2 cfi with the row cache (as the agent) */
	int reps;
	uint64_t *t_unwind, *t_intern;
	int frames;
	int cold; /* evict the caches before each capture (not timed) */
	int prefix; /* intern as capture.c does: only what differs from the
		     * previous capture; the last 3 frames alternate */
};

/* Between two captures a real program runs for about an interval and
 * evicts the agent's tables from the caches: write over 16 MB. */
static char *scrub_buf;
#define SCRUB_BYTES (16u << 20)
static void scrub(void)
{
	if (!scrub_buf && !(scrub_buf = malloc(SCRUB_BYTES)))
		return;
	for (size_t i = 0; i < SCRUB_BYTES; i += 64)
		scrub_buf[i]++;
}

static __attribute__((noinline)) uint64_t capture_leaf(void *arg)
{
	struct job *j = arg;
	uint64_t out[MAXF], root_first[MAXF];
	uint32_t ids[MAXF];
	for (int k = 0; k < j->reps; k++) {
		struct unwind_regs r;
		if (j->cold)
			scrub();
		uint64_t t0 = ticks();
		UNWIND_HERE(&r);
		static struct unwind_cache rcache;
		int n = j->use_cfi == 2 ? unwind_cfi_cached(&r, &main_stack, find_cfi, NULL, &rcache, 1, out, MAXF, NULL)
			: j->use_cfi ? unwind_cfi(&r, &main_stack, find_cfi, NULL, out, MAXF, NULL)
				     : unwind_fp(&r, &main_stack, out, MAXF, NULL);
		uint64_t t1 = ticks();
		/* as capture.c: root first, return addresses minus one */
		for (int i = 0; i < n; i++)
			root_first[i] = out[n - 1 - i] - (i == n - 1 ? 0 : 1);
		if (j->prefix) {
			/* capture.c's per-thread prefix cache: compare with the
			 * previous capture from the root, intern the rest */
			static uint64_t prev[MAXF];
			static uint32_t prev_ids[MAXF];
			static int prev_n;
			for (int i = n - 3; i < n; i++)
				if (i >= 0)
					root_first[i] += (uint64_t)(k & 1) * 4096;
			int common = 0;
			while (common < n && common < prev_n && prev[common] == root_first[common])
				common++;
			uint32_t parent = common ? prev_ids[common - 1] : 0;
			if (common < n)
				stacktab_intern(&tab, parent, root_first + common, n - common,
						prev_ids + common);
			memcpy(prev + common, root_first + common, (size_t)(n - common) * sizeof(prev[0]));
			prev_n = n;
		} else {
			stacktab_intern(&tab, 0, root_first, n, ids);
		}
		uint64_t t2 = ticks();
		if (j->t_unwind) {
			j->t_unwind[k] = t1 - t0;
			j->t_intern[k] = t2 - t1;
		}
		j->frames = n;
	}
	return (uint64_t)j->frames;
}

/* One table row: medians and p99 of unwind, intern and their sum. */
static void capture_row(int cfi, const char *code, int depth, int frames, uint64_t *tu,
			uint64_t *ti, uint64_t *tt, int reps, const char *note)
{
	for (int k = 0; k < reps; k++)
		tt[k] = tu[k] + ti[k];
	double um, up, im, ip, sm, sp;
	stats(tu, reps, &um, &up);
	stats(ti, reps, &im, &ip);
	stats(tt, reps, &sm, &sp);
	printf("  %-6s %-14s %5d %6d | %8.0f %8.0f | %8.0f %8.0f | %8.0f %8.0f%s\n",
	       cfi == 2 ? "cfi+rc" : cfi ? "cfi" : "fp", code,
	       depth, frames, um, up, im, ip, sm, sp, note);
}

static void run_capture(int reps)
{
	static const int depths[] = {10, 30, 60};
	uint64_t *tu = calloc((size_t)reps, sizeof(uint64_t));
	uint64_t *ti = calloc((size_t)reps, sizeof(uint64_t));
	uint64_t *tt = calloc((size_t)reps, sizeof(uint64_t));
	if (!tu || !ti || !tt)
		exit(1);
	printf("capture: unwind + stacktab_intern per stack (ns)\n");
	printf("  %-6s %-14s %5s %6s | %8s %8s | %8s %8s | %8s %8s\n", "unwind", "code", "depth",
	       "frames", "unw med", "unw p99", "int med", "int p99", "tot med", "tot p99");
	for (int b = 0; b < 2; b++) {
		uint64_t (*chain)(int, chain_leaf_fn, void *) = b == 0 ? chain_nofp : chain_fp;
		const char *code = b == 0 ? "no-fp (-O2)" : "-fno-omit-fp";
		for (int u = 0; u < 3; u++) {
			/* frames outside the chain: measured with a CFI walk at depth 1 */
			struct job probe = {1, 1, NULL, NULL, 0, 0, 0};
			chain(1, capture_leaf, &probe);
			int outside = probe.frames - 1;
			for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
				int levels = depths[d] - outside;
				if (levels < 1)
					levels = 1;
				struct job j = {u, reps, tu, ti, 0, 0, 0};
				chain(levels, capture_leaf, &j);
				capture_row(u, code, depths[d], j.frames, tu, ti, tt, reps, "");
			}
		}
	}
	/* the same with cold caches, as between two captures 1 ms apart */
	int creps = reps / 10 > 200 ? reps / 10 : 200;
	struct job probe = {1, 1, NULL, NULL, 0, 0, 0};
	chain_nofp(1, capture_leaf, &probe);
	for (int u = 0; u < 3; u++) {
		for (int pfx = 1; pfx >= 0; pfx--) {
			struct job j = {u, creps, tu, ti, 0, 1, pfx};
			chain_nofp(30 - (probe.frames - 1), capture_leaf, &j);
			capture_row(u, "no-fp (-O2)", 30, j.frames, tu, ti, tt, creps,
				    pfx ? "  cold caches, prefix cache (as the agent; last 3 frames new)"
					: "  cold caches, no prefix cache (every frame looked up)");
		}
	}
	free(tu);
	free(ti);
	free(tt);
}

/* ---- a whole synchronous capture ------------------------------------------ */

static struct buf sync_buf;

struct sync_job {
	int reps;
	uint64_t *t;
	int frames;
	uint64_t cache[MAXF];
	uint32_t cache_ids[MAXF];
	int cache_n;
};

static int drain_nop(void *arg, const void *data, size_t len);

static __attribute__((noinline)) void sync_capture(struct sync_job *j, int k)
{
	uint64_t out[MAXF], a[MAXF];
	struct unwind_regs r;
	UNWIND_HERE(&r);
	static struct unwind_cache rcache; /* as the agent's per-thread one */
	int n = unwind_cfi_cached(&r, &main_stack, find_cfi, NULL, &rcache, 1, out, MAXF, NULL);
	/* root first, minus one; the leaf alternates (k & 1) as two call sites would */
	int common = 0, same = 1;
	for (int i = 0; i < n; i++) {
		a[i] = out[n - 1 - i] - 1 + (i == n - 1 ? (uint64_t)(k & 1) : 0);
		if (same && i < j->cache_n && j->cache[i] == a[i])
			common = i + 1;
		else
			same = 0;
	}
	uint32_t parent = common ? j->cache_ids[common - 1] : 0;
	stacktab_intern(&tab, parent, a + common, n - common, j->cache_ids + common);
	for (int i = common; i < n; i++)
		j->cache[i] = a[i];
	j->cache_n = n;
	struct timespec ts;
	struct rusage ru;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	getrusage(RUSAGE_THREAD, &ru); /* CPU, faults, switches: the agent's one read */
	uint64_t rec[16] = {(uint64_t)ts.tv_nsec, (uint64_t)ru.ru_utime.tv_usec, (uint64_t)ru.ru_minflt,
			    j->cache_ids[n - 1]};
	buf_emit(&sync_buf, 1, rec, sizeof(rec));
	j->frames = n;
}

static __attribute__((noinline)) uint64_t sync_leaf(void *arg)
{
	struct sync_job *j = arg;
	for (int k = 0; k < j->reps; k++) {
		uint64_t t0 = ticks();
		sync_capture(j, k);
		j->t[k] = ticks() - t0;
		if ((k & 255) == 255) {
			buf_seal_all(&sync_buf, 0);
			buf_drain(&sync_buf, drain_nop, NULL);
		}
	}
	return 0;
}

static void run_sync(int reps)
{
	uint64_t *t = calloc((size_t)reps, sizeof(uint64_t));
	if (!t || buf_init(&sync_buf, 64, 64u << 10, 8) < 0)
		exit(1);
	struct job probe = {1, 1, NULL, NULL, 0, 0, 0};
	chain_nofp(1, capture_leaf, &probe);
	for (int depth = 10; depth <= 30; depth += 20) {
		struct sync_job *j = calloc(1, sizeof(*j));
		if (!j)
			exit(1);
		j->reps = reps;
		j->t = t;
		int levels = depth - probe.frames; /* sync_capture is one more frame */
		chain_nofp(levels > 1 ? levels : 1, sync_leaf, j);
		double m, p;
		stats(t, reps, &m, &p);
		printf("sync:     whole capture replica, %d frames (CFI, no-fp code): median %.0f ns, p99 %.0f ns\n",
		       j->frames, m, p);
		free(j);
	}
	buf_destroy(&sync_buf);
	free(t);
}

/* ---- a capture at the same call path again -------------------------------- */

/* capture.c reuses a thread's earlier walk when it starts from the same
 * registers and every stack word that walk read still holds its value: the
 * cost of that check, against the walk it replaces. */
struct memo_job {
	int reps;
	uint64_t *t;
	int frames, words, held;
	struct unwind_regs r0;
	struct unwind_trace tr;
};

/* As capture.c: the registers taken in one function that is always called
 * from the same place (there stack_here, from the hook), so that a second
 * capture on the same call path starts from the same sp.  take: walk and
 * remember; else: does the remembered walk still hold? */
static __attribute__((noinline)) int memo_here(struct memo_job *j, int take)
{
	static struct unwind_cache rcache;
	struct unwind_regs r;
	UNWIND_HERE(&r);
	if (take) {
		uint64_t out[MAXF];
		struct unwind_stack st = main_stack;
		st.trace = &j->tr;
		j->r0 = r;
		j->frames = unwind_cfi_cached(&r, &st, find_cfi, NULL, &rcache, 1, out, MAXF, NULL);
		j->words = j->tr.n;
		return 1;
	}
	/* capture.c's memo_find: registers, then the words */
	return r.ip == j->r0.ip && r.sp == j->r0.sp && (!j->tr.bp_used || r.bp == j->r0.bp) &&
	       unwind_trace_holds(&j->tr);
}

static __attribute__((noinline)) uint64_t memo_leaf(void *arg)
{
	struct memo_job *j = arg;
	j->held = 0;
	for (int k = -1; k < j->reps; k++) {
		uint64_t t0 = ticks();
		int hit = memo_here(j, k < 0);
		uint64_t t1 = ticks();
		if (k >= 0) {
			j->t[k] = t1 - t0;
			j->held += hit;
		}
	}
	return (uint64_t)j->frames;
}

static void run_memo(int reps)
{
	uint64_t *t = calloc((size_t)reps, sizeof(uint64_t));
	if (!t)
		exit(1);
	struct job probe = {1, 1, NULL, NULL, 0, 0, 0};
	chain_nofp(1, capture_leaf, &probe);
	static const int depths[] = {10, 30, 60};
	for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
		int depth = depths[d];
		static struct memo_job j;
		memset(&j, 0, sizeof(j));
		j.reps = reps;
		j.t = t;
		chain_nofp(depth - (probe.frames - 1), memo_leaf, &j);
		double m, p;
		stats(t, reps, &m, &p);
		printf("memo:     same call path again, %d frames (CFI, no-fp code): check of %d stack words: "
		       "median %.0f ns, p99 %.0f ns (%d of %d held)\n",
		       j.frames, j.words, m, p, j.held, reps);
	}
	free(t);
}

/* ---- counters and emit -------------------------------------------------- */

static void run_counters(int reps)
{
	uint64_t *t = calloc((size_t)reps, sizeof(uint64_t));
	if (!t)
		exit(1);
	for (int k = 0; k < reps; k++) {
		struct rusage ru;
		uint64_t t0 = ticks();
		getrusage(RUSAGE_THREAD, &ru);
		t[k] = ticks() - t0;
	}
	double m, p;
	stats(t, reps, &m, &p);
	printf("counters: getrusage(THREAD) (CPU, faults, switches: one per capture): median %.0f ns, p99 %.0f ns\n",
	       m, p);
	for (int k = 0; k < reps; k++) {
		struct timespec ts;
		uint64_t t0 = ticks();
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t[k] = ticks() - t0;
	}
	stats(t, reps, &m, &p);
	printf("clock:    clock_gettime(CLOCK_MONOTONIC) (vDSO; the agent's fallback): median %.0f ns, p99 %.0f ns\n",
	       m, p);
	rhea_g.cfg.interval_ns = 1000000; /* the epoch's grid at the default interval */
	clock_init(); /* then a calibration over 20 ms, as the ticker makes one */
	struct timespec cal_wait = {0, 20000000};
	nanosleep(&cal_wait, NULL);
	clock_calibrate();
	uint64_t sink = 0;
	for (int k = 0; k < reps; k++) {
		uint64_t t0 = ticks();
		for (int i = 0; i < 100; i++)
			sink += rhea_now();
		t[k] = ticks() - t0;
	}
	stats(t, reps, &m, &p);
	printf("clock:    rhea_now() (%s; 1 per timed hook, 2 when a tick passed during the call): "
	       "median %.1f ns, p99 %.1f ns%s\n",
	       rhea_cal ? "TSC scaled to CLOCK_MONOTONIC" : "no usable TSC: CLOCK_MONOTONIC", m / 100, p / 100,
	       sink == 1 ? " " : "");
	free(t);
}

static int drain_nop(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return 0;
}

static void run_emit(void)
{
	struct buf b;
	if (buf_init(&b, 64, 64u << 10, 8) < 0) {
		printf("emit: buf_init failed\n");
		return;
	}
	uint64_t rec[16];
	memset(rec, 0, sizeof(rec));
	const int batch = 4096, rounds = 200;
	uint64_t best = UINT64_MAX, sum = 0;
	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = ticks();
		for (int i = 0; i < batch; i++) {
			rec[0] = (uint64_t)i;
			buf_emit(&b, 1234, rec, sizeof(rec));
		}
		uint64_t dt = ticks() - t0;
		sum += dt;
		if (dt < best)
			best = dt;
		buf_seal_all(&b, 0);
		buf_drain(&b, drain_nop, NULL);
	}
	printf("emit:     buf_emit of a 128-byte record: mean %.1f ns, best batch %.1f ns (dropped %llu)\n",
	       (double)sum * ns_per_tick / ((double)batch * rounds),
	       (double)best * ns_per_tick / batch, (unsigned long long)b.dropped);
	buf_destroy(&b);
}

/* ---- stack table throughput ----------------------------------------------- */

#define ST_DEPTH 30

struct intern_job {
	uint64_t seed;
	int nstacks;
	uint64_t ns, nodes;
};

static inline uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *intern_run(void *arg)
{
	struct intern_job *j = arg;
	uint64_t rng = j->seed, stack[ST_DEPTH];
	uint32_t ids[ST_DEPTH];
	for (int i = 0; i < ST_DEPTH; i++)
		stack[i] = 0x400000 + (xorshift(&rng) & 0xfffff);
	uint64_t t0 = now_ns();
	for (int s = 0; s < j->nstacks; s++) {
		/* keep a random prefix of 20..29 frames, new addresses below */
		int keep = 20 + (int)(xorshift(&rng) % 10);
		for (int i = keep; i < ST_DEPTH; i++)
			stack[i] = 0x400000 + (xorshift(&rng) & 0xfffff);
		stacktab_intern(&tab, 0, stack, ST_DEPTH, ids);
	}
	j->ns = now_ns() - t0;
	j->nodes = (uint64_t)j->nstacks * ST_DEPTH;
	return NULL;
}

static void run_stacktab(int nstacks)
{
	stacktab_destroy(&tab);
	if (stacktab_init(&tab, 1u << 22) < 0) {
		printf("stacktab: init failed\n");
		return;
	}
	struct intern_job a = {0x1234567, nstacks, 0, 0};
	intern_run(&a);
	uint32_t new_nodes = tab.next_id - 1;
	printf("stacktab: %d stacks x %d frames, first pass: %.1f ns per frame, %u new nodes "
	       "(%.0f ns per new node, %.2f M new nodes/s)\n",
	       nstacks, ST_DEPTH, (double)a.ns / (double)a.nodes, new_nodes,
	       (double)a.ns / new_nodes, new_nodes / ((double)a.ns / 1e3));
	/* best of two passes: one descheduling should not decide */
	struct intern_job b = {0x1234567, nstacks, 0, 0}, b2 = b;
	intern_run(&b);
	intern_run(&b2);
	if (b2.ns < b.ns)
		b = b2;
	printf("stacktab: same stacks again (all hits): %.1f ns per frame, %.1f M frames/s\n",
	       (double)b.ns / (double)b.nodes, (double)b.nodes / ((double)b.ns / 1e3));
	struct intern_job c[2] = {{0xabcdef1, nstacks, 0, 0}, {0x7777777, nstacks, 0, 0}};
	pthread_t th;
	uint32_t before = tab.next_id;
	uint64_t t0 = now_ns();
	pthread_create(&th, NULL, intern_run, &c[1]);
	intern_run(&c[0]);
	pthread_join(th, NULL);
	uint64_t wall = now_ns() - t0;
	printf("stacktab: 2 threads at once, new stacks: %.1f ns per frame per thread, "
	       "%.2f M new nodes/s in all (%u new)\n",
	       (double)(c[0].ns + c[1].ns) / (double)(c[0].nodes + c[1].nodes),
	       (tab.next_id - before) / ((double)wall / 1e3), tab.next_id - before);
}

int main(int argc, char **argv)
{
	int reps = 20000, opt;
	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt == 'n')
			reps = atoi(optarg);
		else {
			fprintf(stderr, "usage: micro [-n SAMPLES]\n");
			return 2;
		}
	}
	if (reps < 100)
		reps = 100;
	calibrate();
	dl_iterate_phdr(add_module, NULL);
	qsort(mods, (size_t)nmods, sizeof(mods[0]), cmp_mod);
	pthread_attr_t at;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &at) == 0 &&
	    pthread_attr_getstack(&at, &addr, &size) == 0) {
		main_stack.lo = (uint64_t)(uintptr_t)addr;
		main_stack.hi = main_stack.lo + size;
		pthread_attr_destroy(&at);
	}
	if (stacktab_init(&tab, 1u << 16) < 0)
		return 1;
	printf("(TSC: %.4f ns per tick; CFI tables:", ns_per_tick);
	for (int i = 0; i < nmods; i++) {
		const char *b = strrchr(mods[i].path, '/');
		printf(" %s %u rows %u KB%s", b ? b + 1 : mods[i].path, mods[i].cfi->n,
		       (unsigned)((size_t)mods[i].cfi->n * sizeof(struct cfi_row) / 1024), i + 1 < nmods ? "," : ")\n");
	}
	run_capture(reps);
	run_sync(reps);
	run_memo(reps);
	run_counters(reps);
	run_emit();
	run_stacktab(reps * 5);
	stacktab_destroy(&tab);
	for (int i = 0; i < nmods; i++)
		cfi_free(mods[i].cfi);
	return 0;
}

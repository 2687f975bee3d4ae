/*
 * thread.c - the agent's thread registry.
 *
 * Every thread that enters a hook gets a slot the first time (lazily, so
 * threads created before the agent was loaded, or by raw clone(), are
 * covered too).  Slots live in one mmap'ed array so that other threads can
 * reach them: the writer and the exit path flush a thread's pending merged
 * sample, the sampler (later) reads its stack bounds.  TLS holds only a
 * pointer and the recursion guard: small initial-exec TLS works both when
 * preloaded and when injected later (glibc keeps some static TLS surplus
 * for dlopen'ed libraries).
 *
 * Thread exit is seen through a pthread key destructor, which runs on every
 * exit path of a pthread (return, pthread_exit, cancellation).  The main
 * thread's end is the process's end, handled by agent.c.
 *
 * A thread is registered by itself (its first hook, or the sampler's signal
 * landing on it) or by the sampler thread, which arms a timer for every
 * thread it finds in /proc, hooked or not.  Both can do so at the same
 * moment: a map from tid to slot, claimed with a compare-and-swap, makes
 * sure one slot is made per thread (two slots for one tid gave a thread
 * two lives in the recording, one of them under a stale name).  The map
 * is indexed by tid directly (PID_MAX_LIMIT entries of 2 bytes, 8 MB of
 * address space, a page touched per 2048 tids in use) and also answers
 * thread_find in one load instead of a scan of the registry.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <unistd.h>

#define MAX_THREADS RHEA_MAX_THREADS

__thread struct rhea_hot rhea_hot __attribute__((aligned(64)));
static __thread int tls_dead; /* the thread is past its exit: pass through */

/*
 * The slots, in chunks of CHUNK_SLOTS mapped as threads come: the whole
 * registry at once was 376 MB of address space (VmSize 432 MB for a
 * program of 2.5 MB), which a program that lowers its own RLIMIT_AS later
 * found counted against it.  A chunk is claimed with a compare-and-swap
 * (a thread registering from the sampler's signal may race another); the
 * walkers see only slots below nslots_used, whose chunks exist.
 */
#define CHUNK_SLOTS 64u
#define NCHUNKS ((MAX_THREADS + CHUNK_SLOTS - 1) / CHUNK_SLOTS)
static struct rhea_tstate *chunks[NCHUNKS]; /* atomic */
static int registry_ready;
struct rhea_salvage_pend *rhea_pends; /* one per slot, in the salvage region */
struct rhea_salvage_sites *rhea_site_tables; /* the first slots', in the salvage region */
static uint32_t max_slots;   /* slots there may be: MAX_THREADS, fewer under RLIMIT_AS */
static uint32_t nslots_used; /* atomic: high-water mark */

/* Slot i, of a chunk that exists (i below nslots_used, or claimed). */
static inline struct rhea_tstate *slot_at(uint32_t i)
{
	return &__atomic_load_n(&chunks[i / CHUNK_SLOTS], __ATOMIC_ACQUIRE)[i % CHUNK_SLOTS];
}

/* Slot i's chunk, mapped if it is not yet; NULL when that fails. */
static struct rhea_tstate *chunk_of(uint32_t i)
{
	struct rhea_tstate **c = &chunks[i / CHUNK_SLOTS], *have = __atomic_load_n(c, __ATOMIC_ACQUIRE);
	if (have)
		return have;
	size_t len = CHUNK_SLOTS * sizeof(struct rhea_tstate);
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (!__atomic_compare_exchange_n(c, &have, (struct rhea_tstate *)m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		munmap(m, len); /* another thread mapped it first */
		return have;
	}
	return m;
}

/* tid -> slot index + 1, 0 none, TID_PENDING while someone claims a slot
 * for that tid (the others leave it alone: the sampler retries at its next
 * scan, the thread itself waits for the claim, see thread_register). */
#define TID_MAP_SIZE (1u << 22) /* PID_MAX_LIMIT on 64-bit Linux */
#define TID_PENDING 0xffffu
/* The thread of that tid ended its slot itself and is on its way out:
 * the sampler's scan, which may still find it in /proc for a moment, must
 * not give it a slot again (a second life, of nothing, ended only when
 * the scan saw it gone); a new thread of the tid claims one itself. */
#define TID_ENDED 0xfffeu
_Static_assert(MAX_THREADS < TID_ENDED, "slot index + 1 must fit the tid map");
static uint16_t *tid_map;
static uint32_t serials;     /* atomic */
static pthread_key_t exit_key;
static int key_ok;

uint32_t thread_gettid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

static void on_thread_exit(void *arg)
{
	(void)arg;
	thread_exit_current();
}

void thread_registry_init(void)
{
	if (registry_ready)
		return;
	/* 46 KB a slot, mapped 64 at a time as threads come.  A process
	 * under an address-space limit (ulimit -v) may not have room for all
	 * 8192: then a sixty-fourth of the limit, at least 64 threads. */
	uint32_t n = MAX_THREADS;
	struct rlimit as;
	if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
		uint64_t fit = as.rlim_cur / 64 / sizeof(struct rhea_tstate);
		n = fit < 64 ? 64 : fit < MAX_THREADS ? (uint32_t)fit : MAX_THREADS;
	}
	if (!chunk_of(0)) {
		agent_disable("cannot map the thread registry", errno);
		return;
	}
	registry_ready = 1;
	max_slots = n;
	void *m = mmap(NULL, (size_t)TID_MAP_SIZE * sizeof(*tid_map), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	tid_map = m == MAP_FAILED ? NULL : m; /* without it: scans, as a fallback */
	key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

/* Read this thread's name from the kernel (raw syscalls, guard is set). */
/* "/proc/self/task/<tid>/<leaf>" into path (64 bytes), without stdio. */
void thread_task_path(char path[64], uint32_t tid, const char *leaf)
{
	static const char dir[] = "/proc/self/task/";
	char num[12];
	int n = 0;
	for (uint32_t v = tid; v || n == 0; v /= 10)
		num[n++] = (char)('0' + v % 10);
	size_t p = sizeof(dir) - 1, l = strlen(leaf);
	memcpy(path, dir, p);
	while (n)
		path[p++] = num[--n];
	path[p++] = '/';
	if (l > 64 - 1 - p)
		l = 64 - 1 - p;
	memcpy(path + p, leaf, l);
	path[p + l] = 0;
}

/* Up to cap - 1 bytes of /proc/self/task/<tid>/<leaf>, NUL-terminated:
 * their number, or -1. */
ssize_t thread_read_task_file(uint32_t tid, const char *leaf, char *buf, size_t cap)
{
	char path[64];
	thread_task_path(path, tid, leaf);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = syscall(SYS_read, fd, buf, cap - 1);
	syscall(SYS_close, fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* A thread's name.  Its own is asked of the kernel (prctl): a program
 * thread opening its comm file would take the lowest free descriptor for a
 * moment, one the program may be about to count on (sampler.c). */
static void read_comm(uint32_t tid, char name[16])
{
	char buf[32];
	if (tid == thread_gettid() && syscall(SYS_prctl, PR_GET_NAME, buf, 0, 0, 0) == 0) {
		buf[15] = 0;
		memcpy(name, buf, strlen(buf) + 1);
		return;
	}
	ssize_t r = thread_read_task_file(tid, "comm", buf, sizeof(buf));
	if (r <= 0)
		return;
	if (buf[r - 1] == '\n')
		r--;
	if (r > 15)
		r = 15;
	memcpy(name, buf, (size_t)r);
	name[r] = 0;
}

/* Field n (numbered as proc(5) does, n >= 3) of the stat line st: after
 * the name, which may hold ')' itself.  NULL when it has no such field. */
static const char *stat_field(const char *st, int n)
{
	const char *p = strrchr(st, ')');
	for (int field = 2; p && *p && field < n; p++)
		if (*p == ' ')
			field++;
	return p && *p ? p : NULL;
}

/* The task's state letter in /proc (R, S, D, Z...), '?' when the line
 * cannot tell, 0 when it is gone.  Anyone may read stat, unlike syscall
 * (sampler.c says when that counts). */
char thread_task_state_letter(uint32_t tid)
{
	char st[512];
	if (thread_read_task_file(tid, "stat", st, sizeof(st)) <= 0)
		return 0;
	const char *f = stat_field(st, 3);
	return f ? *f : '?';
}

/* A dead task's exit code, in waitpid's form (stat field 52), 0 unknown. */
int thread_task_exit_code(uint32_t tid)
{
	char st[1024];
	if (thread_read_task_file(tid, "stat", st, sizeof(st)) <= 0)
		return 0;
	const char *f = stat_field(st, 52);
	return f && *f >= '0' && *f <= '9' ? (int)strtol(f, NULL, 10) : 0;
}

/* Fields first .. first + n - 1 of the task's stat line into out:
 * 0, -1 when the line has not as many. */
int thread_stat_fields(uint32_t tid, int first, int n, uint64_t *out)
{
	char st[1024];
	if (thread_read_task_file(tid, "stat", st, sizeof(st)) <= 0)
		return -1;
	const char *f = stat_field(st, first);
	for (int i = 0; i < n; i++) {
		if (!f || *f < '0' || *f > '9')
			return -1;
		char *end;
		out[i] = strtoull(f, &end, 10);
		f = *end == ' ' ? end + 1 : NULL;
		if (!f && i + 1 < n)
			return -1;
	}
	return 0;
}

/* 1: the task is alive, 0: a zombie, -1: gone. */
int thread_task_state(uint32_t tid)
{
	char c = thread_task_state_letter(tid);
	return c == 0 ? -1 : c != 'Z' && c != 'X';
}

/*
 * Is a thread of the program's still running?  glibc ends a process when
 * its last thread exits, counting the agent's threads: a program whose
 * main thread called pthread_exit would never end once its own threads
 * had, the agent's ticker, writer and sampler holding it up (the writer
 * asks this, agent.c).  Any task that is neither the agent's nor a zombie
 * (the leader stays one until the process ends) counts.  1 also when
 * /proc cannot tell.
 */
int thread_program_left(void)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	char buf[2048];
	int left = 0;
	long n;
	while (!left && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && !left;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			uint32_t tid = 0;
			const char *c = d->d_name;
			if (*c < '0' || *c > '9')
				continue;
			for (; *c >= '0' && *c <= '9'; c++)
				tid = tid * 10 + (uint32_t)(*c - '0');
			int agent = 0;
			for (int i = 0; i < 8; i++)
				agent |= rhea_agent_tids[i] == tid;
			if (agent)
				continue;
			left = thread_task_state(tid) > 0;
		}
	}
	syscall(SYS_close, fd);
	return left || n < 0;
}

extern uint64_t rhea_main_stack_lo, rhea_main_stack_hi;

static void stack_bounds(struct rhea_tstate *t)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;
	if (t->tid == (uint32_t)rhea_g.pid)
		return; /* main thread: bounds set by agent.c from /proc/self/maps */
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
		t->stack_lo = (uint64_t)addr;
		t->stack_hi = (uint64_t)addr + size;
	}
	pthread_attr_destroy(&attr);
}


/* Forget the previous owner's allocation sites: only the slots it used.
 * The table names no thread meanwhile (a reader after a SIGKILL skips
 * it), then t's. */
static void clear_sites(struct rhea_tstate *t)
{
	struct rhea_salvage_sites *st = t->sites;
	__atomic_store_n(&st->tid, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint32_t used = st->nused < RHEA_SITES ? st->nused : RHEA_SITES;
	for (uint32_t i = 0; i < used; i++)
		memset(&st->site[st->used[i] & (RHEA_SITES - 1)], 0, sizeof(st->site[0]));
	st->nused = 0;
	st->overflow = st->overflow_bytes = 0;
	st->serial = t->serial;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&st->tid, t->tid, __ATOMIC_RELAXED);
}

/* The counts a slot's thread starts a recording (or its life) with: no
 * sites, no short calls. */
static void clear_counts(struct rhea_tstate *t)
{
	clear_sites(t);
	memset(t->shorts, 0, sizeof(t->shorts));
	t->shorts_emitted = 0;
}

/* The thread is gone and its sites are in the recording: its table names
 * no thread. */
static void sites_done(struct rhea_tstate *t)
{
	__atomic_store_n(&t->sites->tid, 0, __ATOMIC_RELAXED);
}

/* Claim and initialize a free slot for tid; NULL when the registry is full.
 * The slot is TS_INIT while being filled so that walkers skip it. */
/*
 * A slot is 46 KB, mostly caches its thread reads before it writes them.
 * A page first read is the kernel's shared zero page, and replacing it at
 * the first write flushes the TLB of every CPU that runs the process: an
 * interrupt to each, per page.  A program starting 3000 threads ran 3.5x
 * slower under the agent, most of it in those flushes.  So a slot's pages
 * are made writable at once, the first time it is claimed: one madvise
 * (Linux 5.14), else a write to each page.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static void populate(struct rhea_tstate *t)
{
	if (t->populated)
		return;
	uintptr_t page = 4096, lo = (uintptr_t)t & ~(page - 1), hi = (uintptr_t)(t + 1);
	if (syscall(SYS_madvise, lo, hi - lo, MADV_POPULATE_WRITE) != 0)
		for (uintptr_t p = lo; p < hi; p += page)
			__atomic_fetch_or((volatile char *)(p < (uintptr_t)t ? (uintptr_t)t : p), 0,
					  __ATOMIC_RELAXED);
	t->populated = 1;
}

static struct rhea_tstate *claim_slot(uint32_t tid)
{
	struct rhea_tstate *t = NULL;
	for (uint32_t i = 0; i < max_slots; i++) {
		struct rhea_tstate *c = chunk_of(i);
		if (!c)
			break; /* no memory for more */
		uint32_t expected = TS_FREE;
		if (__atomic_compare_exchange_n(&c[i % CHUNK_SLOTS].state, &expected, TS_INIT, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			t = &c[i % CHUNK_SLOTS];
			t->index = i;
			uint32_t hw = __atomic_load_n(&nslots_used, __ATOMIC_RELAXED);
			while (hw < i + 1 && !__atomic_compare_exchange_n(&nslots_used, &hw, i + 1, 0,
									  __ATOMIC_RELEASE, __ATOMIC_RELAXED))
				;
			break;
		}
	}
	if (!t) {
		agent_warn("thread registry full; threads beyond it are not traced", max_slots);
		return NULL;
	}
	_Static_assert(offsetof(struct rhea_tstate, state) == 0, "state must come first");
	populate(t);
	memset((char *)t + sizeof(t->state), 0,
	       offsetof(struct rhea_tstate, cache_addrs) - sizeof(t->state));
	t->pend = rhea_pends ? &rhea_pends[t->index] : &t->own_pend; /* max_slots <= RHEA_MAX_THREADS */
	t->pend->busy = 0;
	t->pend->valid = 0;
	t->sites = rhea_site_tables && t->index < RHEA_SALVAGE_SITE_THREADS ? &rhea_site_tables[t->index]
									   : &t->own_sites;
	t->tid = tid;
	t->timer_id = -1;
	t->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
	t->session = __atomic_load_n(&rhea_g.session, __ATOMIC_ACQUIRE);
	clear_counts(t);
	t->last_capture_ns = rhea_now();
	if (tid == (uint32_t)rhea_g.pid) {
		t->stack_lo = rhea_main_stack_lo;
		t->stack_hi = rhea_main_stack_hi;
	}
	/* The START is dated before the name is read: the sampler's scan may
	 * claim a thread that renames itself meanwhile, and its NAME, dated
	 * after, must win (a thread named "loop" showed as its program's
	 * name now and then). */
	uint64_t seen = t->last_capture_ns;
	char name[16] = {0};
	read_comm(tid, name);
	memcpy(t->name, name, sizeof(name));
	__atomic_fetch_add(&rhea_g.threads_seen, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&t->state, TS_LIVE, __ATOMIC_RELEASE);
	capture_emit_thread_at(t, RHEA_T_START, 0, seen, name);
	return t;
}

static inline int mapped(uint32_t tid)
{
	return tid_map && tid < TID_MAP_SIZE;
}

/* The live slot of tid that map value v points to, else NULL. */
static struct rhea_tstate *map_slot(uint32_t tid, uint16_t v)
{
	if (v == 0 || v == TID_PENDING || v == TID_ENDED)
		return NULL;
	struct rhea_tstate *t = slot_at(v - 1u);
	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == TS_LIVE && t->tid == tid)
		return t;
	return NULL;
}

/* Before a slot is freed: tid no longer maps to it (to TID_ENDED: its
 * thread ended it itself). */
static void map_forget_as(struct rhea_tstate *t, uint16_t to)
{
	if (!mapped(t->tid))
		return;
	uint16_t v = (uint16_t)(t->index + 1);
	__atomic_compare_exchange_n(&tid_map[t->tid], &v, to, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static void map_forget(struct rhea_tstate *t)
{
	map_forget_as(t, 0);
}

void thread_gone(uint32_t tid)
{
	uint16_t v = TID_ENDED;
	if (mapped(tid))
		__atomic_compare_exchange_n(&tid_map[tid], &v, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static struct rhea_tstate *scan_find(uint32_t tid)
{
	uint32_t n = __atomic_load_n(&nslots_used, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&slot_at(i)->state, __ATOMIC_ACQUIRE) == TS_LIVE && slot_at(i)->tid == tid)
			return slot_at(i);
	return NULL;
}

struct rhea_tstate *thread_find(uint32_t tid)
{
	if (!registry_ready)
		return NULL;
	if (!mapped(tid))
		return scan_find(tid);
	return map_slot(tid, __atomic_load_n(&tid_map[tid], __ATOMIC_ACQUIRE));
}

/*
 * The slot of tid, claimed if it has none.  NULL with *busy set when
 * another thread is claiming one for tid right now (try again later), NULL
 * alone when the registry is full, or when the sampler asks (self 0) for
 * a thread that ended its slot itself (TID_ENDED).
 */
static struct rhea_tstate *slot_of(uint32_t tid, int self, int *busy)
{
	*busy = 0;
	if (!mapped(tid)) {
		struct rhea_tstate *t = scan_find(tid);
		return t ? t : claim_slot(tid);
	}
	uint16_t v = __atomic_load_n(&tid_map[tid], __ATOMIC_ACQUIRE);
	for (;;) {
		if (v == TID_PENDING) {
			*busy = 1;
			return NULL;
		}
		struct rhea_tstate *t = map_slot(tid, v);
		if (t)
			return t;
		if (v == TID_ENDED && !self)
			return NULL;
		/* none, or left by an earlier thread of this tid */
		if (__atomic_compare_exchange_n(&tid_map[tid], &v, TID_PENDING, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			break;
	}
	struct rhea_tstate *t = claim_slot(tid);
	__atomic_store_n(&tid_map[tid], t ? (uint16_t)(t->index + 1) : 0, __ATOMIC_RELEASE);
	return t;
}

uint32_t thread_find_releasing(uint64_t obj, uint32_t self)
{
	if (!registry_ready)
		return 0;
	uint32_t n = __atomic_load_n(&nslots_used, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		struct rhea_tstate *t = slot_at(i);
		if (__atomic_load_n(&t->releasing, __ATOMIC_ACQUIRE) == obj &&
		    __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == TS_LIVE && t->tid != self)
			return t->tid;
	}
	return 0;
}

struct rhea_tstate *thread_register(void)
{
	if (!registry_ready || tls_dead || !rhea_g.active)
		return NULL;
	rhea_guard++;
	uint32_t tid = thread_gettid();
	/* The sampler may have registered us already (a thread it saw first),
	 * or be doing it now: then wait for it (it takes microseconds unless
	 * preempted; nothing it does waits for us), so that no allocation of
	 * the thread goes uncounted.  Bounded all the same: a hook must never
	 * hang its thread. */
	int busy;
	struct rhea_tstate *t = slot_of(tid, 1, &busy);
	for (int i = 0; !t && busy && i < 100000; i++) {
		syscall(SYS_sched_yield);
		t = slot_of(tid, 1, &busy);
	}
	if (!t) {
		if (!busy)
			tls_dead = 1; /* no slot: this thread is not traced (said once) */
		rhea_guard--;
		return NULL;
	}
	if (tid != (uint32_t)rhea_g.pid && t->stack_hi == 0)
		stack_bounds(t);
	rhea_hot.self = t;
	t->hot = &rhea_hot;
	rhea_hot.last_epoch = rhea_g.epoch - 1; /* the first hook captures */
	if (key_ok)
		pthread_setspecific(exit_key, t);
	/* Sampled from its first CPU interval on, not from the sampler's next
	 * scan of /proc (up to 100 ms later). */
	sampler_arm(t);
	rhea_guard--;
	return t;
}

struct rhea_tstate *thread_register_tid(uint32_t tid, int self)
{
	if (!registry_ready || !rhea_g.active || (self && tls_dead))
		return NULL;
	int busy;
	struct rhea_tstate *t = slot_of(tid, self, &busy);
	if (t && self) {
		rhea_hot.self = t;
		t->hot = &rhea_hot;
	}
	return t;
}

void thread_release(struct rhea_tstate *t, uint32_t serial)
{
	/* The thread is gone (the sampler saw its tid vanish) without ending
	 * its slot itself.  Unless it did after all, and a new thread took
	 * the slot since: the first free one, under the same tid, which the
	 * kernel gives again within seconds when threads come and go by the
	 * thousand (pid_max 32768).  Released then, the slot went on being
	 * used by its new thread and claimed by a third one.  So the slot is
	 * taken out of LIVE first, then its life checked (claim_slot sets the
	 * serial before LIVE); a new life's goes back to LIVE, unless its
	 * thread ended meanwhile. */
	uint32_t live = TS_LIVE;
	if (__atomic_load_n(&t->serial, __ATOMIC_RELAXED) != serial ||
	    !__atomic_compare_exchange_n(&t->state, &live, TS_INIT, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&t->serial, __ATOMIC_RELAXED) != serial) {
		uint32_t init = TS_INIT;
		__atomic_compare_exchange_n(&t->state, &init, TS_LIVE, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		return;
	}
	/* Nobody else touches the slot now, and the thread's TLS (the latest
	 * allocation site's counts) may be unmapped. */
	t->hot = NULL;
	sampler_disarm(t);
	if (rhea_g.active) {
		capture_flush_pending(t);
		capture_emit_counts(t);
		capture_emit_thread(t, RHEA_T_EXIT, 0);
		sites_done(t);
	}
	map_forget(t);
	__atomic_store_n(&t->state, TS_FREE, __ATOMIC_RELEASE);
}

void thread_set_name(struct rhea_tstate *t, const char *name)
{
	size_t n = strnlen(name, 15);
	memcpy(t->name, name, n);
	t->name[n] = 0;
	capture_emit_thread(t, RHEA_T_NAME, 0);
}

/* A name the thread took without pthread_setname_np (prctl, a write to
 * its comm file) is read back as it ends, and for those still running
 * when the recording ends. */
void thread_refresh_name(struct rhea_tstate *t)
{
	char name[16] = {0};
	read_comm(t->tid, name);
	if (name[0] && strcmp(name, t->name) != 0)
		thread_set_name(t, name);
}

void thread_exit_current(void)
{
	struct rhea_tstate *t = rhea_hot.self;
	if (!t || rhea_sealed) /* (its slot goes when the sampler sees it gone) */
		return;
	rhea_guard++;
	if (rhea_g.active)
		sampler_note_blocked(t);
	sampler_disarm(t);
	if (rhea_g.active) {
		thread_refresh_name(t);
		capture_at_end(t);
		capture_flush_pending(t);
		capture_emit_counts(t);
		capture_emit_thread(t, RHEA_T_EXIT, 0);
		sites_done(t);
	}
	if (t->tid == (uint32_t)rhea_g.pid)
		rhea_g.leader_gone = 1; /* pthread_exit of main: see thread_program_left */
	rhea_hot.self = NULL;
	tls_dead = 1;
	map_forget_as(t, TID_ENDED);
	__atomic_store_n(&t->state, TS_FREE, __ATOMIC_RELEASE);
	rhea_guard--;
}

void thread_foreach(void (*fn)(struct rhea_tstate *t, void *arg), void *arg)
{
	if (!registry_ready)
		return;
	uint32_t n = __atomic_load_n(&nslots_used, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&slot_at(i)->state, __ATOMIC_ACQUIRE) == TS_LIVE)
			fn(slot_at(i), arg);
}

void thread_restart(void)
{
	if (!registry_ready)
		return;
	uint64_t now = rhea_now();
	uint32_t n = __atomic_load_n(&nslots_used, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++) {
		struct rhea_tstate *t = slot_at(i);
		if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != TS_LIVE)
			continue;
		t->pend->valid = 0;
		t->pend->busy = 0;
		clear_counts(t);
		t->sites_emitted_ns = 0;
		t->sig_blocked = 0;
		/* what a capture from outside gives it (its TLS counts are reset
		 * by the thread itself: thread_session_begin) */
		t->last_c.alloc_count = t->last_c.alloc_bytes = 0;
		t->last_capture_ns = now;
		__atomic_fetch_add(&rhea_g.threads_seen, 1, __ATOMIC_RELAXED);
		capture_emit_thread_at(t, RHEA_T_START, 0, now, t->name);
	}
}

void thread_session_begin(struct rhea_tstate *t)
{
	/* its allocations count from 0 again, as in a copy loaded afresh
	 * (whose TLS starts zeroed) */
	rhea_hot.folded_count = rhea_hot.folded_bytes = 0;
	rhea_hot.site_pc = rhea_hot.site_count = rhea_hot.site_bytes = 0;
	t->last_c.alloc_count = t->last_c.alloc_bytes = 0;
	t->clock_at = 0;
	t->session = rhea_g.session;
}

void thread_after_fork(void)
{
	/* Only the forking thread survives; it starts a new life. */
	if (!registry_ready)
		return;
	struct rhea_tstate *self = rhea_hot.self;
	uint32_t n = nslots_used;
	for (uint32_t i = 0; i < n; i++) {
		struct rhea_tstate *t = slot_at(i);
		if (t != self && t->state != TS_FREE) {
			map_forget(t);
			t->state = TS_FREE;
		}
	}
	/* A tid the parent's other threads were claiming a slot for at the
	 * fork stays TID_PENDING here: should the child get a thread with that
	 * tid, it goes untraced (the window is a few microseconds). */
	if (self) {
		map_forget(self);
		self->tid = thread_gettid();
		if (mapped(self->tid))
			tid_map[self->tid] = (uint16_t)(self->index + 1);
		self->timer_id = -1; /* timers are not inherited */
		/* the child's own counters start from zero */
		memset(&self->last_c, 0, sizeof(self->last_c));
		self->cpu_est_ns = self->cpu_est_at = self->cpu_est_sw = 0;
		self->pend->valid = 0;
		self->pend->busy = 0;
		self->in_capture = 0;
		rhea_hot.folded_count = rhea_hot.folded_bytes = 0;
		rhea_hot.site_pc = rhea_hot.site_count = rhea_hot.site_bytes = 0;
		self->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
		clear_counts(self);
		rhea_hot.last_epoch = rhea_g.epoch - 1;
	}
}

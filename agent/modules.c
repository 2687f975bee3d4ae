/*
 * modules.c - the module map of the traced process and the unwind tables
 * that go with it (DESIGN.md 1.2: the recording keeps what is needed to
 * symbolize later, possibly elsewhere: path, load bias, build-id).
 *
 * Modules are read with dl_iterate_phdr at start, after every dlopen and
 * dlclose (hooks.c), never from a signal handler (it takes the loader's
 * lock).  For each new module the CFI of its file is compiled into a table
 * (cfi.c) right away, in normal context, so that unwinding later - in hooks
 * and signal handlers - only does binary searches over prepared memory.
 *
 * Lookup structure: an array of module records that only grows (a module
 * unloaded by dlclose is marked, its table kept: a thread may be unwinding
 * through it at that moment), and a sorted index of the loaded ones,
 * rebuilt on change and published with one atomic pointer store.  Old
 * indexes are leaked on purpose (a reader may still hold one); they are a
 * few KiB per dlopen.
 */
#include "agent.h"
#include "paths.h"
#include "cfi.h"
#include "unwind.h"

#include <elf.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MODULES 4096

struct module {
	uint64_t bias, lo, hi;
	struct cfi_table *cfi;
	int loaded;
	int emitted;
	int cfi_later; /* its table is to be built by the next full scan */
	uint32_t build_id_len;
	uint8_t build_id[36];
	char path[512];
};

struct index {
	uint32_t n;
	struct module *m[]; /* sorted by lo */
};

static struct module *mods;
static uint32_t nmods;
static struct index *volatile cur_index;
uint32_t rhea_modules_gen; /* atomic: bumped when the map changes */
static uint32_t scan_gen;

static void *map_mem(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

const struct cfi_table *modules_find_cfi(uint64_t pc, uint64_t *bias, void *arg)
{
	(void)arg;
	const struct index *ix = __atomic_load_n(&cur_index, __ATOMIC_ACQUIRE);
	if (!ix)
		return NULL;
	uint32_t lo = 0, hi = ix->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct module *m = ix->m[mid];
		if (pc < m->lo)
			hi = mid;
		else if (pc >= m->hi)
			lo = mid + 1;
		else {
			*bias = m->bias;
			return m->cfi;
		}
	}
	return NULL;
}

static void emit_module(struct module *m, int loaded)
{
	struct {
		struct rhea_module h;
		char path[sizeof(m->path) + 8];
	} e;
	memset(&e, 0, sizeof(e));
	size_t plen = strlen(m->path) + 1;
	e.h.h.kind = RHEA_E_MODULE;
	e.h.h.flags = (uint16_t)(loaded ? 1 : 2);
	e.h.h.size = (uint32_t)((sizeof(e.h) + plen + 7) & ~(size_t)7);
	e.h.time_ns = rhea_now();
	e.h.bias = m->bias;
	e.h.lo = m->lo;
	e.h.hi = m->hi;
	e.h.build_id_len = m->build_id_len;
	memcpy(e.h.build_id, m->build_id, m->build_id_len);
	e.h.path_len = (uint32_t)plen;
	memcpy(e.path, m->path, plen);
	buf_emit(&rhea_g.buf, 0, &e, e.h.h.size);
}

static void read_build_id(struct dl_phdr_info *info, struct module *m)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof(*nh);
			const char *desc = name + ((nh->n_namesz + 3) & ~3u);
			if (desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && nh->n_descsz <= sizeof(m->build_id)) {
				memcpy(m->build_id, desc, nh->n_descsz);
				m->build_id_len = nh->n_descsz;
				return;
			}
			p = desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
}

static char exe_path[512];

/*
 * Each line of /proc/self/maps, NUL-terminated, to fn until it returns
 * non-zero (then that value is returned; else 0), read through buf (cap
 * bytes: a longer line ends the reading).  Raw system calls.
 */
static int maps_each_in(char *buf, size_t cap, int (*fn)(const char *line, void *arg), void *arg)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int r = 0;
	size_t have = 0;
	for (;;) {
		ssize_t n = syscall(SYS_read, fd, buf + have, cap - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while (!r && (nl = strchr(line, '\n')) != NULL) {
			*nl = 0;
			r = fn(line, arg);
			line = nl + 1;
		}
		if (r)
			break;
		have = strlen(line);
		memmove(buf, line, have);
	}
	syscall(SYS_close, fd);
	return r;
}

/* The same with a static 64 KB buffer: for the agent's start and its
 * writer thread (rhea attach's rescans), which never run it at the same
 * time (a thread's stack may be too small for 64 KB). */
int modules_maps_each(int (*fn)(const char *line, void *arg), void *arg)
{
	static char buf[1 << 16];
	return maps_each_in(buf, sizeof(buf), fn, arg);
}

/*
 * Is pc in executable memory?  Asked of the last frame of a walk when no
 * module claims it (capture.c): JIT code is, the words a stack switched
 * under the CFI's feet leads to are not (Go's runtime: addresses in its
 * heap, in a stack).  A verdict per page, kept in a small table until code
 * is made at run time (an mmap or mprotect with PROT_EXEC: the hooks call
 * modules_exec_changed); a miss reads /proc/self/maps, on the capturing
 * thread (any thread, a signal handler: a buffer on its stack).
 */
#define EXEC_PAGES 64
static uint64_t exec_pages[EXEC_PAGES]; /* page number << 20 | generation << 1 | executable */
static uint32_t exec_gen;

void modules_exec_changed(void)
{
	__atomic_fetch_add(&exec_gen, 1, __ATOMIC_RELEASE);
}

/* A maps line's range: where its permissions start (" rwxp"), NULL when
 * addr is not in it. */
static const char *line_holds(const char *line, uint64_t addr)
{
	char *e;
	uint64_t lo = strtoull(line, &e, 16), hi = *e == '-' ? strtoull(e + 1, &e, 16) : 0;
	return addr >= lo && addr < hi ? e : NULL;
}

struct exec_query {
	uint64_t pc;
	int lines, x;
};

static int exec_line(const char *line, void *arg)
{
	struct exec_query *q = arg;
	q->lines++;
	const char *perms = line_holds(line, q->pc);
	if (!perms)
		return 0;
	q->x = perms[0] == ' ' && perms[3] == 'x';
	return 1;
}

int modules_pc_executable(uint64_t pc)
{
	uint64_t page = pc >> 12;
	uint32_t gen = __atomic_load_n(&exec_gen, __ATOMIC_ACQUIRE) & 0x7ffff;
	uint64_t *slot = &exec_pages[(page * 0x9e3779b97f4a7c15ull) >> 58];
	uint64_t v = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (v >> 20 == page && ((v >> 1) & 0x7ffff) == gen)
		return (int)(v & 1);
	char buf[1536];
	struct exec_query q = {pc, 0, 0};
	if (maps_each_in(buf, sizeof(buf), exec_line, &q) != 1 && q.lines == 0)
		return 1; /* cannot tell: keep the frame */
	/* (in no mapping: not code) */
	__atomic_store_n(slot, page << 20 | (uint64_t)gen << 1 | (uint64_t)q.x, __ATOMIC_RELAXED);
	return q.x;
}

/*
 * The file mapped at addr, as /proc/self/maps names it (absolute), into
 * path (cap bytes): 0, or -1.  The loader names a library by what it was
 * asked for: dlopen("./lib.so"), or a search of LD_LIBRARY_PATH=. gives
 * "./lib.so", which names nothing once the directory changes, and whose
 * unwind table was never built (stacks through it ended at its first
 * frame, and no unwind failure was counted).  Called by scans only, under
 * scan_lock: a buffer of its own.
 */
struct mapped_query {
	uint64_t addr;
	char *path;
	size_t cap;
};

static int mapped_line(const char *line, void *arg)
{
	struct mapped_query *q = arg;
	/* "lo-hi perms offset dev inode   path" */
	const char *perms = line_holds(line, q->addr);
	if (!perms)
		return 0;
	const char *f = strchr(perms, '/');
	if (!f || strlen(f) >= q->cap)
		return -1;
	memcpy(q->path, f, strlen(f) + 1);
	return 1;
}

static int mapped_file(uint64_t addr, char *path, size_t cap)
{
	static char buf[8192];
	struct mapped_query q = {addr, path, cap};
	return maps_each_in(buf, sizeof(buf), mapped_line, &q) == 1 ? 0 : -1;
}

static unsigned long long scanned_adds; /* the loader's count of objects added, at the last scan */

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uint32_t *seen = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		__atomic_store_n(&scanned_adds, info->dlpi_adds, __ATOMIC_RELAXED);
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;
			if (a < lo)
				lo = a;
			if (a + ph->p_memsz > hi)
				hi = a + ph->p_memsz;
		}
	}
	if (hi == 0)
		return 0;
	const char *name = info->dlpi_name;
	if (!name || !name[0])
		name = exe_path; /* the main program */
	if (rhea_attached && strncmp(name, RHEA_ATTACH_DIR_PREFIX, sizeof(RHEA_ATTACH_DIR_PREFIX) - 1) == 0) {
		/* rhea attach loaded us from a copy in a directory it removes:
		 * the recording names the file copied (same build id).  Copies
		 * of earlier attaches, spent, are left out: nothing of theirs
		 * is captured. */
		const char *file = attach_getenv("RHEA_AGENT_FILE");
		if (info->dlpi_addr != attach_self_base)
			return 0;
		if (file && file[0] == '/')
			name = file;
	}
	for (uint32_t i = 0; i < nmods; i++) {
		struct module *m = &mods[i];
		if (m->loaded && m->lo == lo && m->bias == info->dlpi_addr) {
			seen[i] = scan_gen;
			return 0;
		}
	}
	if (nmods >= MAX_MODULES)
		return 0;
	struct module *m = &mods[nmods];
	memset(m, 0, sizeof(*m));
	m->bias = info->dlpi_addr;
	m->lo = lo;
	m->hi = hi;
	m->loaded = 1;
	/* (a name without '/' is no file's: the vDSO's "linux-vdso.so.1") */
	if (name[0] == '/' || !strchr(name, '/') || mapped_file(lo, m->path, sizeof(m->path)) < 0) {
		size_t nl = strnlen(name, sizeof(m->path) - 1);
		memcpy(m->path, name, nl);
		m->path[nl] = 0;
	}
	read_build_id(info, m);
	seen[nmods] = scan_gen;
	nmods++;
	return 0;
}

static int cmp_lo(const void *a, const void *b)
{
	const struct module *x = *(struct module *const *)a, *y = *(struct module *const *)b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* qsort is not hooked and does not allocate for small arrays in practice,
 * but keep it simple and certain: insertion sort, n is small. */
static void sort_index(struct module **a, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		struct module *x = a[i];
		uint32_t j = i;
		while (j > 0 && cmp_lo(&a[j - 1], &x) > 0) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = x;
	}
}

static uint32_t *seen_gen;

static uint32_t scan_lock; /* serializes scans (dlopen on several threads) */

/* m's unwind table: from the cache, else built (compile) or left for the
 * next full scan (cfi_later). */
static void module_table(struct module *m, int compile)
{
	int is_vdso = m->bias == getauxval(AT_SYSINFO_EHDR);
	m->cfi_later = 0;
	if (rhea_g.cfg.unwind_fp || !(m->path[0] == '/' || is_vdso))
		return;
	/* the vDSO's too: its build-id names it, and a cached table spares
	 * loading libdw (cfi.c) */
	struct cfi_table *t = m->build_id_len ? cficache_load(m->build_id, m->build_id_len) : NULL;
	if (!t && !compile) {
		m->cfi_later = 1;
		return;
	}
	if (!t) {
		/* (timed: the program's thread waits for it, the first time a
		 * library is seen; the report says how long) */
		uint64_t t0 = rhea_now();
		int err = is_vdso ? cfi_build_vdso(&t) : cfi_build(m->path, &t);
		__atomic_fetch_add(&rhea_g.cfi_build_ns, rhea_now() - t0, __ATOMIC_RELAXED);
		if (err == -ELIBACC)
			agent_warn("libdw.so.1 (elfutils) cannot be loaded: stacks through code "
				   "without frame pointers end early", 0);
		if (err < 0)
			t = NULL;
		else if (m->build_id_len)
			cficache_store(m->build_id, m->build_id_len, t);
	}
	__atomic_store_n(&m->cfi, t, __ATOMIC_RELEASE);
}

/*
 * The agent's walks of the loader's list, apart from fork.  dl_iterate_phdr
 * holds the loader's lock while it walks, and fork does not take that
 * lock: a fork while another thread walks leaves the child with the lock
 * held for ever, and the child's first dlopen, C++ exception or walk of
 * its own hangs (the attach-fork test's child, forked while the writer
 * looked for new objects, hung in the agent's own unpatching).  The
 * agent's walks count themselves in; the fork's prepare handler stops new
 * ones and waits for those under way (microseconds), for at most
 * WALK_WAIT_NS (a walk waiting for the lock of a dlopen that waits for
 * the forking thread: the fork then goes on, as it would without us).
 * The program's own walks and dlopens are as fork leaves them.
 */
#define WALK_WAIT_NS 200000000ull
static uint32_t walkers, forking; /* atomics */
static __thread int forking_self; /* (its own walks, should any come, go on) */

int modules_walk(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	for (;;) {
		while (__atomic_load_n(&forking, __ATOMIC_ACQUIRE) && !forking_self)
			rhea_sleep_ns(50000);
		__atomic_add_fetch(&walkers, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&forking, __ATOMIC_SEQ_CST) || forking_self)
			break;
		__atomic_sub_fetch(&walkers, 1, __ATOMIC_SEQ_CST);
	}
	int r = dl_iterate_phdr(cb, arg);
	__atomic_sub_fetch(&walkers, 1, __ATOMIC_RELEASE);
	return r;
}

void modules_fork_prepare(void)
{
	forking_self = 1;
	__atomic_add_fetch(&forking, 1, __ATOMIC_SEQ_CST);
	if (rhea_sealed) /* (no system call there: no wait either) */
		return;
	uint64_t until = rhea_now_slow() + WALK_WAIT_NS;
	while (__atomic_load_n(&walkers, __ATOMIC_SEQ_CST) && rhea_now_slow() < until)
		rhea_sleep_ns(20000);
}

void modules_fork_parent(void)
{
	__atomic_sub_fetch(&forking, 1, __ATOMIC_RELEASE);
	forking_self = 0;
}

/* The scan, with the lock held (compile: build the tables the cache
 * lacks, else leave them to a later full scan). */
static void scan_locked(int compile)
{
	if (!mods) {
		mods = map_mem(sizeof(struct module) * MAX_MODULES);
		seen_gen = map_mem(sizeof(uint32_t) * MAX_MODULES);
		ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
		exe_path[n > 0 ? n : 0] = 0;
	}
	if (!mods || !seen_gen)
		return;
	uint32_t before = nmods;
	scan_gen++;
	modules_walk(scan_cb, seen_gen);
	int changed = nmods != before;
	for (uint32_t i = 0; i < before; i++) {
		if (mods[i].loaded && seen_gen[i] != scan_gen) {
			mods[i].loaded = 0;
			changed = 1;
			emit_module(&mods[i], 0);
		}
		if (mods[i].loaded && mods[i].cfi_later && compile) {
			module_table(&mods[i], 1);
			changed = 1; /* (threads' rows and walks: of the map without it) */
		}
	}
	for (uint32_t i = before; i < nmods; i++) {
		struct module *m = &mods[i];
		module_table(m, compile);
		if (m->lo <= (uint64_t)(uintptr_t)&modules_scan &&
		    (uint64_t)(uintptr_t)&modules_scan < m->hi) {
			rhea_g.agent_lo = m->lo;
			rhea_g.agent_hi = m->hi;
		}
		emit_module(m, 1);
		m->emitted = 1;
	}
	if (changed) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < nmods; i++)
			n += mods[i].loaded;
		struct index *ix = map_mem(sizeof(*ix) + n * sizeof(ix->m[0]));
		if (ix) {
			ix->n = 0;
			for (uint32_t i = 0; i < nmods; i++)
				if (mods[i].loaded)
					ix->m[ix->n++] = &mods[i];
			sort_index(ix->m, ix->n);
			__atomic_store_n(&cur_index, ix, __ATOMIC_RELEASE);
			/* rows the threads cached are of the old map (unwind.h) */
			__atomic_add_fetch(&rhea_modules_gen, 1, __ATOMIC_RELEASE);
		}
	}
}

int modules_scan(void)
{
	uint32_t *lock = &scan_lock;
	while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	rhea_guard++;
	scan_locked(1);
	rhea_guard--;
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return 0;
}

/*
 * A library's constructors run inside dlopen, before dlopen returns and
 * the hook scans: their hooks' captures walked code no module claimed
 * yet, and the stacks ended there (a plugin's static initializers, the
 * libraries it pulls in: 3 of 19 stacks of ar loading the LLVM plugin).
 * So a capture made inside dlopen first asks the loader whether objects
 * were added since the last scan (one dl_iterate_phdr, that stops at the
 * first object), and if so the scan is made there, with the tables the
 * cache has; the rest are built by the scan after dlopen, as before.
 * Never in a handler of the program's signals (the loader's lists may be
 * half changed under it, and its lock is the interrupted code's): those
 * the agent wraps say so (sigwrap.c), and under rhea attach, which wraps
 * none, never.  Nor while another thread scans.  1 when modules were
 * added.
 */
__thread int rhea_in_dlopen;

static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

unsigned long long modules_loader_adds(void)
{
	unsigned long long adds = 0;
	modules_walk(adds_cb, &adds);
	return adds;
}

int modules_catch_up(void)
{
	if (rhea_attached || rhea_in_handler || !mods)
		return 0;
	unsigned long long adds = modules_loader_adds();
	if (adds == 0 || adds == __atomic_load_n(&scanned_adds, __ATOMIC_RELAXED))
		return 0;
	uint32_t *lock = &scan_lock;
	if (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		return 0;
	rhea_guard++;
	uint32_t before = nmods;
	scan_locked(0);
	int added = nmods != before;
	rhea_guard--;
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return added;
}

void modules_emit_all(void)
{
	for (uint32_t i = 0; i < nmods; i++)
		if (mods[i].loaded)
			emit_module(&mods[i], 1);
}

void modules_fork_child(void)
{
	walkers = forking = 0; /* the parent's */
	forking_self = 0;
}

void modules_after_fork(void)
{
	scan_lock = 0; /* a thread of the parent may have held it */
	modules_emit_all();
}


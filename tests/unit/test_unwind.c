/*
 * test_unwind.c - agent/unwind.c walking real stacks.
 *
 * The call chains come from tests/unit/data/unwind_chain.c, compiled here at
 * run time with the system cc into two shared objects, one without and one
 * with frame pointers, so that what is tested does not depend on the flags
 * this file was built with (make SANITIZE=1 adds -fno-omit-frame-pointer,
 * clang has no per-function attribute for it).  Each test checks its premise
 * (the chain really has no frame pointers: its CFI rows are rsp-based) and
 * then the walk, by resolving every address to a function name: dladdr for
 * shared objects, the executable's own .symtab for its static functions.
 *
 * A find callback over dl_iterate_phdr (built before walking, read-only
 * afterwards, so usable from a signal handler) maps a pc to the module's
 * table and load bias, as the agent's will.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cfi.h"
#include "unwind.h"

#define MAXF 256
#define NAMELEN 64

/* ---- modules: pc -> (table, bias) ---------------------------------------- */

struct mod {
	uint64_t lo[4], hi[4];
	int nseg;
	uint64_t bias;
	struct cfi_table *t;
};

static struct mod mods[64];
static int nmods;
static uint64_t exe_bias;

static int add_mod(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (nmods == 64)
		return 0;
	struct mod *m = &mods[nmods];
	const char *path = info->dlpi_name;
	memset(m, 0, sizeof(*m));
	if (nmods == 0 && (!path || !*path)) { /* the main program comes first */
		path = "/proc/self/exe";
		exe_bias = info->dlpi_addr;
	}
	m->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum && m->nseg < 4; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			m->lo[m->nseg] = info->dlpi_addr + ph->p_vaddr;
			m->hi[m->nseg] = m->lo[m->nseg] + ph->p_memsz;
			m->nseg++;
		}
	}
	if (path && *path && cfi_build(path, &m->t) != 0) /* the vdso has no file */
		m->t = NULL;
	nmods++;
	return 0;
}

static void modules_reload(void)
{
	for (int i = 0; i < nmods; i++)
		cfi_free(mods[i].t);
	nmods = 0;
	dl_iterate_phdr(add_mod, NULL);
	cr_assert(nmods > 2 && mods[0].t, "no modules or no table for the executable");
}

/* The find callback: async-signal-safe (reads a table filled beforehand). */
static const struct cfi_table *find_table(uint64_t pc, uint64_t *bias, void *arg)
{
	(void)arg;
	for (int i = 0; i < nmods; i++)
		for (int s = 0; s < mods[i].nseg; s++)
			if (pc >= mods[i].lo[s] && pc < mods[i].hi[s]) {
				*bias = mods[i].bias;
				return mods[i].t;
			}
	return NULL;
}

static const struct cfi_row *row_at(uint64_t pc)
{
	uint64_t bias = 0;
	const struct cfi_table *t = find_table(pc, &bias, NULL);
	return t ? cfi_lookup(t, pc - bias) : NULL;
}

/* ---- symbols ------------------------------------------------------------ */

struct fsym {
	uint64_t lo, hi;
	char name[NAMELEN];
};

static struct fsym *exe_syms;
static size_t exe_nsyms;

static void exe_symtab_load(void)
{
	if (exe_syms)
		return;
	elf_version(EV_CURRENT);
	int fd = open("/proc/self/exe", O_RDONLY);
	cr_assert(fd >= 0);
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	cr_assert(elf);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		exe_syms = calloc(n, sizeof(*exe_syms));
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_size == 0)
				continue;
			struct fsym *f = &exe_syms[exe_nsyms++];
			f->lo = s.st_value;
			f->hi = s.st_value + s.st_size;
			snprintf(f->name, sizeof(f->name), "%s", elf_strptr(elf, sh.sh_link, s.st_name));
			f->name[strcspn(f->name, ".")] = '\0'; /* run_chain.isra.0 -> run_chain */
		}
	}
	elf_end(elf);
	close(fd);
	cr_assert(exe_nsyms > 0, "the test binary has no .symtab");
}

/* Name of the function holding addr ("?" if none). */
static void name_of(uint64_t addr, char *buf)
{
	Dl_info info;

	exe_symtab_load();
	for (size_t i = 0; i < exe_nsyms; i++)
		if (addr - exe_bias >= exe_syms[i].lo && addr - exe_bias < exe_syms[i].hi) {
			snprintf(buf, NAMELEN, "%s", exe_syms[i].name);
			return;
		}
	if (!dladdr((void *)(uintptr_t)addr, &info))
		snprintf(buf, NAMELEN, "?%#lx", (unsigned long)addr);
	else if (info.dli_sname)
		snprintf(buf, NAMELEN, "%s", info.dli_sname);
	else /* a static function of a library: "?libc.so.6+0x27249" */
		snprintf(buf, NAMELEN, "?%s+%#lx", strrchr(info.dli_fname, '/') + 1,
			 (unsigned long)(addr - (uint64_t)(uintptr_t)info.dli_fbase));
}

/* Names of a walk; return addresses are resolved at ra - 1 (the call). */
static void names_of(const uint64_t *pc, int n, char names[][NAMELEN], char *joined, size_t len)
{
	size_t used = 0;
	joined[0] = '\0';
	for (int i = 0; i < n; i++) {
		name_of(i ? pc[i] - 1 : pc[i], names[i]);
		if (used < len)
			used += (size_t)snprintf(joined + used, len - used, "%s%s", i ? " < " : "",
						 names[i]);
	}
}

static int index_of(char names[][NAMELEN], int n, const char *name, int from)
{
	for (int i = from; i < n; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

/* ---- the thread's stack ---------------------------------------------------- */

static struct unwind_stack stack_of(const volatile void *p)
{
	struct unwind_stack st = {0};
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			st.lo = lo;
			st.hi = hi;
		}
	}
	fclose(f);
	cr_assert(st.lo < st.hi);
	return st;
}

/* ---- the chain shared objects ------------------------------------------- */

typedef int (*chain_cb)(const struct unwind_regs *r, void *arg);
typedef int (*chain_start_fn)(chain_cb cb, void *arg);

struct chain_spin { /* as in data/unwind_chain.c */
	volatile int spinning;
	volatile int stop;
};

static char tmpdir[64];

static void cleanup_tmp(void)
{
	char cmd[128];
	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
}

/* Directory of this source file, whether run from the tree's root (make
 * test) or from elsewhere (then found relative to build/tests/test_unwind). */
static void source_dir(char *out, size_t len)
{
	char buf[PATH_MAX], exe[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", __FILE__);
	snprintf(out, len, "%s", dirname(buf));
	if (out[0] == '/' || access(out, R_OK) == 0)
		return;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert(n > 0);
	exe[n] = '\0';
	snprintf(buf, sizeof(buf), "%s/../../%s", dirname(exe), __FILE__);
	snprintf(out, len, "%s", dirname(buf));
}

static void *chain_handle;

/* Build data/unwind_chain.c with or without frame pointers, dlopen it. */
static chain_start_fn load_chain(int frame_pointers)
{
	char dir[PATH_MAX], cmd[4 * PATH_MAX], so[PATH_MAX + 64];

	source_dir(dir, sizeof(dir));
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/rhea-unwind-XXXXXX");
		cr_assert(mkdtemp(tmpdir));
		atexit(cleanup_tmp);
	}
	snprintf(so, sizeof(so), "%s/chain_%s.so", tmpdir, frame_pointers ? "fp" : "nofp");
	snprintf(cmd, sizeof(cmd),
		 "cc -std=gnu11 -O2 -fPIC -shared %s -I'%s/../../agent' -o '%s' '%s/data/unwind_chain.c'",
		 frame_pointers ? "-fno-omit-frame-pointer" : "-fomit-frame-pointer", dir, so, dir);
	cr_assert_eq(system(cmd), 0, "could not build the chain library: %s", cmd);
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	cr_assert(h, "dlopen %s: %s", so, dlerror());
	chain_handle = h;
	modules_reload();
	chain_start_fn start = (chain_start_fn)(uintptr_t)dlsym(h, "chain_start");
	cr_assert(start);
	return start;
}

static const char *const chain_names[] = {"chain_e", "chain_d", "chain_c",
					  "chain_b", "chain_a", "chain_start"};
#define NCHAIN 6

/* The chain's names from frame `at` on. */
static void assert_chain(char names[][NAMELEN], int n, int at, const char *joined)
{
	cr_assert(n >= at + NCHAIN, "too short: %s", joined);
	for (int i = 0; i < NCHAIN; i++)
		cr_assert_str_eq(names[at + i], chain_names[i], "frame %d: %s", at + i, joined);
}

/*
 * main reached, and the walk ended at _start's CFI_OUTERMOST row.  Criterion
 * runs each test in a child that BoxFort starts from its own entry function
 * (no "main" there), so __libc_start_main counts too; __libc_start_call_main,
 * static in libc, has no name for dladdr.
 */
static void assert_reaches_start(char names[][NAMELEN], int n, int truncated, const char *joined)
{
	cr_assert(index_of(names, n, "main", 0) >= 0 ||
		      index_of(names, n, "__libc_start_main", 0) >= 0,
		  "main not reached: %s", joined);
	cr_assert_str_eq(names[n - 1], "_start", "did not end at _start: %s", joined);
	cr_assert_eq(truncated, 0);
}

/* The chain functions of a walk use the expected kind of CFA. */
static void assert_chain_rows(const uint64_t *pc, int from, int kind)
{
	for (int i = from; i < from + NCHAIN - 1; i++) {
		const struct cfi_row *row = row_at(pc[i + 1] - 1);
		cr_assert(row, "no CFI row for frame %d", i + 1);
		cr_assert_eq(row->kind, kind, "frame %d: CFA kind %d, want %d", i + 1, row->kind,
			     kind);
	}
}

/* ---- capture callbacks ---------------------------------------------------- */

struct capture {
	int use_fp;
	struct unwind_cache *cache; /* CFI walks through unwind_cfi_cached */
	uint32_t gen;
	int max;
	uint64_t pc[MAXF];
	int n, truncated;
	struct unwind_stack st;
};

static int capture_cb(const struct unwind_regs *r, void *arg)
{
	struct capture *c = arg;
	if (c->use_fp)
		c->n = unwind_fp(r, &c->st, c->pc, c->max, &c->truncated);
	else if (c->cache)
		c->n = unwind_cfi_cached(r, &c->st, find_table, NULL, c->cache, c->gen, c->pc, c->max,
					 &c->truncated);
	else
		c->n = unwind_cfi(r, &c->st, find_table, NULL, c->pc, c->max, &c->truncated);
	return 1;
}

/* Run the chain from start down to cb(arg), with *st set to this
 * thread's stack (cb's walks read it). */
__attribute__((noinline)) static int run_on_chain(chain_start_fn start, chain_cb cb,
						  void *arg, struct unwind_stack *st)
{
	volatile int keep = 1;
	*st = stack_of(&keep);
	int r = start(cb, arg);
	return r + keep;
}

static int run_chain(chain_start_fn start, struct capture *c)
{
	return run_on_chain(start, capture_cb, c, &c->st);
}

/* ---- tests ---------------------------------------------------------------- */

Test(unwind, cfi_through_chain_without_frame_pointers)
{
	chain_start_fn start = load_chain(0);
	struct capture c = {.max = MAXF};
	char names[MAXF][NAMELEN], joined[4096];

	run_chain(start, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	assert_chain(names, c.n, 0, joined);
	assert_chain_rows(c.pc, 0, CFI_RSP); /* premise: no frame pointers */
	cr_assert_str_eq(names[NCHAIN], "run_on_chain", "%s", joined);
	assert_reaches_start(names, c.n, c.truncated, joined);
}

Test(unwind, fp_through_chain_with_frame_pointers)
{
	chain_start_fn start = load_chain(1);
	struct capture c = {.max = MAXF, .use_fp = 1};
	char names[MAXF][NAMELEN], joined[4096];

	run_chain(start, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	assert_chain(names, c.n, 0, joined);
	assert_chain_rows(c.pc, 0, CFI_RBP); /* premise: frame pointers */
	/* chain_start's frame record still holds the return into run_on_chain
	 * (built without frame pointers: the chain may or may not go on). */
	cr_assert_str_eq(names[NCHAIN], "run_on_chain", "%s", joined);
}

Test(unwind, cfi_through_chain_with_frame_pointers)
{
	chain_start_fn start = load_chain(1);
	struct capture c = {.max = MAXF};
	char names[MAXF][NAMELEN], joined[4096];

	run_chain(start, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	assert_chain(names, c.n, 0, joined);
	cr_assert_str_eq(names[NCHAIN], "run_on_chain", "%s", joined);
	assert_reaches_start(names, c.n, c.truncated, joined);
}

/* The row cache changes nothing but the speed: the same walk with an empty
 * cache, with a warm one, and with one full of wrong rows from another
 * generation of the module map (which must be dropped, not used). */
Test(unwind, cfi_row_cache_gives_the_same_walk)
{
	chain_start_fn start = load_chain(0);
	static struct unwind_cache cache;
	static struct capture walks[4]; /* plain, cold cache, warm, stale */
	for (int w = 0; w < 4; w++) {
		walks[w] = (struct capture){.max = MAXF, .cache = w ? &cache : NULL, .gen = w < 3 ? 7 : 8};
		if (w == 3) {
			/* poison: every entry claims one wrong row, under generation 7 */
			const struct cfi_row *wrong = row_at(walks[0].pc[1] - 1);
			cr_assert(wrong);
			for (int i = 0; i < UNWIND_CACHE_SIZE; i++)
				if (cache.e[i].pc)
					cache.e[i].row = wrong;
		}
		run_chain(start, &walks[w]); /* one call site: the same stack */
		if (w == 1) {
			int used = 0;
			for (int i = 0; i < UNWIND_CACHE_SIZE; i++)
				used += cache.e[i].pc != 0;
			cr_assert_gt(used, NCHAIN / 2, "the walk filled %d cache entries", used);
		}
	}
	cr_assert_eq(cache.gen, 8);
	/* the same frames: the same addresses up to run_on_chain (the compiler
	 * may peel the loop's last turn: the return address into this test
	 * can differ), the same functions everywhere */
	static char names0[MAXF][NAMELEN], names[MAXF][NAMELEN], joined[4096];
	names_of(walks[0].pc, walks[0].n, names0, joined, sizeof(joined));
	for (int w = 1; w < 4; w++) {
		cr_assert_eq(walks[w].n, walks[0].n, "walk %d: %d frames, plain %d", w, walks[w].n, walks[0].n);
		names_of(walks[w].pc, walks[w].n, names, joined, sizeof(joined));
		for (int i = 0; i < walks[0].n; i++) {
			cr_assert_str_eq(names[i], names0[i], "walk %d frame %d: %s", w, i, joined);
			if (i <= NCHAIN)
				cr_assert_eq(walks[w].pc[i], walks[0].pc[i], "walk %d frame %d", w, i);
		}
	}
}

static struct capture qsort_capture;

static int cmp_capture(const void *a, const void *b)
{
	if (qsort_capture.n == 0) {
		struct unwind_regs r;
		UNWIND_HERE(&r);
		capture_cb(&r, &qsort_capture);
	}
	return *(const int *)a - *(const int *)b;
}

typedef void (*qsort_fn)(void *, size_t, size_t, int (*)(const void *, const void *));

/* libc's own qsort: under make SANITIZE=1 the plain symbol is ASan's
 * interceptor, which calls the comparator itself. */
static qsort_fn libc_qsort(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	cr_assert(libc);
	qsort_fn fn = (qsort_fn)(uintptr_t)dlsym(libc, "qsort");
	cr_assert(fn);
	return fn;
}

__attribute__((noinline)) static int run_qsort(qsort_fn sort)
{
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort_capture.st = stack_of(v);
	sort(v, 64, sizeof(v[0]), cmp_capture);
	return v[5];
}

Test(unwind, cfi_through_libc_qsort)
{
	char names[MAXF][NAMELEN], joined[4096];
	qsort_fn sort = libc_qsort();
	Dl_info qi;

	modules_reload();
	qsort_capture.max = MAXF;
	cr_assert_eq(run_qsort(sort), 5);
	struct capture *c = &qsort_capture;
	names_of(c->pc, c->n, names, joined, sizeof(joined));
	cr_assert_str_eq(names[0], "cmp_capture", "%s", joined);
	/* Between the comparator and run_qsort: only libc frames (qsort_r and
	 * its static helpers), at least qsort_r itself. */
	int at = index_of(names, c->n, "run_qsort", 1);
	cr_assert_geq(at, 2, "%s", joined);
	cr_assert(dladdr((void *)(uintptr_t)sort, &qi));
	for (int i = 1; i < at; i++) {
		Dl_info fi;
		cr_assert(dladdr((void *)(uintptr_t)(c->pc[i] - 1), &fi), "%s", joined);
		cr_assert_str_eq(fi.dli_fname, qi.dli_fname, "frame %d not in libc: %s", i, joined);
	}
	cr_assert(index_of(names, at, "qsort_r", 1) > 0 || index_of(names, at, "qsort", 1) > 0,
		  "%s", joined);
	assert_reaches_start(names, c->n, c->truncated, joined);
}

Test(unwind, max_depth_sets_truncated)
{
	chain_start_fn start = load_chain(0);
	struct capture full = {.max = MAXF}, cut = {.max = 3};

	run_chain(start, &full);
	cr_assert_gt(full.n, 8);
	cr_assert_eq(full.truncated, 0);
	run_chain(start, &cut);
	cr_assert_eq(cut.n, 3);
	cr_assert_eq(cut.truncated, 1);
	for (int i = 1; i < 3; i++) /* frame 0 is the same code, maybe not the same pc */
		cr_assert_eq(cut.pc[i], full.pc[i]);

	/* Exactly as deep as the stack: not truncated. */
	struct capture exact = {.max = full.n};
	run_chain(start, &exact);
	cr_assert_eq(exact.n, full.n);
	cr_assert_eq(exact.truncated, 0);

	chain_start_fn fp_start = load_chain(1);
	struct capture fp = {.max = 2, .use_fp = 1};
	run_chain(fp_start, &fp);
	cr_assert_eq(fp.n, 2);
	cr_assert_eq(fp.truncated, 1);
}

/* ---- the assembly functions of data/unwind_chain.c ----------------------- */

typedef void (*asm_cb)(void *arg);
typedef void (*asm_fn)(void *arg, asm_cb cb);

static jmp_buf noreturn_jmp;

static void capture_then_jump(void *arg)
{
	struct unwind_regs r;
	UNWIND_HERE(&r);
	capture_cb(&r, arg);
	longjmp(noreturn_jmp, 1);
}

static void capture_then_return(void *arg)
{
	struct unwind_regs r;
	UNWIND_HERE(&r);
	capture_cb(&r, arg);
}

__attribute__((noinline)) static int run_asm(asm_fn fn, asm_cb cb, struct capture *c)
{
	volatile int keep = 1;
	c->st = stack_of(&keep);
	if (!setjmp(noreturn_jmp))
		fn(c, cb);
	return keep;
}

static asm_fn asm_sym(const char *name)
{
	asm_fn fn = (asm_fn)(uintptr_t)dlsym(chain_handle, name);
	cr_assert(fn, "%s not found", name);
	return fn;
}

Test(unwind, cfi_uses_row_of_return_address_minus_one)
{
	struct capture c = {.max = MAXF};
	char names[MAXF][NAMELEN], joined[4096];

	load_chain(0);
	run_asm(asm_sym("chain_noreturn"), capture_then_jump, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	cr_assert_geq(c.n, 3, "%s", joined);
	/* premise: the return address starts another function, other CFI */
	cr_assert_eq(c.pc[1], (uint64_t)(uintptr_t)asm_sym("chain_after_noreturn"));
	cr_assert(row_at(c.pc[1])->cfa_off != row_at(c.pc[1] - 1)->cfa_off);
	cr_assert_str_eq(names[0], "capture_then_jump", "%s", joined);
	cr_assert_str_eq(names[1], "chain_noreturn", "%s", joined);
	cr_assert_str_eq(names[2], "run_asm", "%s", joined);
	assert_reaches_start(names, c.n, c.truncated, joined);
}

Test(unwind, cfi_guesses_through_code_without_cfi)
{
	struct capture c = {.max = MAXF};
	char names[MAXF][NAMELEN], joined[4096];

	load_chain(0);
	run_asm(asm_sym("chain_nocfi"), capture_then_return, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	cr_assert_geq(c.n, 3, "%s", joined);
	const struct cfi_row *row = row_at(c.pc[1] - 1); /* premise: no CFI there */
	cr_assert(!row || row->kind == CFI_NONE);
	cr_assert_str_eq(names[0], "capture_then_return", "%s", joined);
	cr_assert_str_eq(names[1], "chain_nocfi", "%s", joined);
	cr_assert_str_eq(names[2], "run_asm", "%s", joined);
	assert_reaches_start(names, c.n, c.truncated, joined);
}

/* ---- hand-made stacks ------------------------------------------------- */

/* A libc row of the given kind at least 3 bytes long: runtime pc of its
 * start + 1 (so that pc and pc + 1 are both inside). */
static uint64_t libc_row_pc(int kind, const struct cfi_row **rowp)
{
	uint64_t bias = 0;
	const struct cfi_table *t = find_table((uint64_t)(uintptr_t)qsort, &bias, NULL);
	cr_assert(t);
	for (uint32_t i = 0; i + 1 < t->n; i++)
		if (t->rows[i].kind == kind && t->rows[i + 1].pc - t->rows[i].pc >= 3) {
			*rowp = &t->rows[i];
			return t->rows[i].pc + bias + 1;
		}
	cr_assert_fail("no row of kind %d in libc", kind);
	return 0;
}

/* JIT code: two functions in an anonymous executable mapping no module
 * claims, with frame pointers as V8 keeps them.  outer(arg, cb) calls
 * inner(arg, cb), which calls cb(arg). */
static const uint8_t jit_code[] = {
	/* outer, at 0 */
	0x55,                         /* push %rbp */
	0x48, 0x89, 0xe5,             /* mov %rsp,%rbp */
	0xe8, 0x17, 0x00, 0x00, 0x00, /* call inner (32 - 9) */
	0x5d,                         /* pop %rbp */
	0xc3,                         /* ret */
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	/* inner, at 32 */
	0x55,             /* push %rbp */
	0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
	0xff, 0xd6,       /* call *%rsi */
	0x5d,             /* pop %rbp */
	0xc3,             /* ret */
};

static uint8_t *jit_map(void)
{
	uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED);
	memcpy(p, jit_code, sizeof(jit_code));
	cr_assert_eq(mprotect(p, 4096, PROT_READ | PROT_EXEC), 0);
	return p;
}

Test(unwind, cfi_walks_jit_code_by_its_frame_pointers)
{
	struct capture c = {.max = MAXF};
	char names[MAXF][NAMELEN], joined[4096];

	modules_reload();
	uint8_t *jit = jit_map();
	uint64_t base = (uint64_t)(uintptr_t)jit;
	uint64_t bias;
	cr_assert_null(find_table(base + 32, &bias, NULL)); /* premise: no module claims it */
	run_asm((asm_fn)(uintptr_t)jit, capture_then_return, &c);
	names_of(c.pc, c.n, names, joined, sizeof(joined));
	cr_assert_geq(c.n, 5, "%s", joined);
	cr_assert_str_eq(names[0], "capture_then_return", "%s", joined);
	cr_assert(c.pc[1] > base + 32 && c.pc[1] <= base + 40, "inner's return address: %s", joined);
	cr_assert(c.pc[2] > base && c.pc[2] <= base + 9, "outer's return address: %s", joined);
	cr_assert_str_eq(names[3], "run_asm", "%s", joined);
	assert_reaches_start(names, c.n, c.truncated, joined);
	munmap(jit, 4096);
}

/* Frame-pointer guesses through unclaimed code that never get back to a
 * claimed pc are garbage for all the walk knows: the stack ends at the
 * first unclaimed pc, as when nothing was guessed. */
Test(unwind, cfi_drops_guesses_that_end_in_unclaimed_code)
{
	uint64_t fake[16], out[64];
	int tr;

	modules_reload();
	uint8_t *jit = jit_map();
	uint64_t base = (uint64_t)(uintptr_t)jit;
	struct unwind_stack st = stack_of(fake);
	/* pc in the JIT page; rbp -> {rbp2, unclaimed ra}; rbp2 -> {0, unclaimed ra} */
	fake[4] = (uint64_t)(uintptr_t)&fake[8];
	fake[5] = base + 100;
	fake[8] = 0;
	fake[9] = base + 200;
	struct unwind_regs r = {base + 34, (uint64_t)(uintptr_t)fake, (uint64_t)(uintptr_t)&fake[4]};
	int n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_eq(n, 1, "%d frames", n);
	cr_assert_eq(out[0], base + 34);

	/* The same chain ending at a libc return address: every frame holds. */
	const struct cfi_row *row;
	uint64_t libc_pc = libc_row_pc(CFI_RSP, &row);
	fake[9] = libc_pc + 1;
	n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_geq(n, 3, "%d frames", n);
	cr_assert_eq(out[1], base + 100);
	cr_assert_eq(out[2], libc_pc + 1);
	munmap(jit, 4096);
}

/* The CFI of a claimed frame leads to an unclaimed word: kept only when
 * it follows a call instruction (JIT code's return address), not when it
 * is no code at all (unmapped; Go's heap, where a stack switch under the
 * CFI's feet led). */
Test(unwind, cfi_keeps_an_unclaimed_caller_only_after_a_call)
{
	uint64_t fake[64], out[64];
	int tr;

	modules_reload();
	uint8_t *jit = jit_map();
	uint64_t base = (uint64_t)(uintptr_t)jit;
	const struct cfi_row *row;
	uint64_t pc = libc_row_pc(CFI_RSP, &row);
	cr_assert(row->cfa_off >= 8 && row->cfa_off % 8 == 0 && row->cfa_off <= 8 * 32, "cfa_off %d", row->cfa_off);
	memset(fake, 0, sizeof(fake));
	struct unwind_stack st = stack_of(fake);
	struct unwind_regs r = {pc, (uint64_t)(uintptr_t)fake, 0};
	uint64_t *ra = &fake[(row->cfa_off - 8) / 8];

	*ra = base + 9; /* right after outer's call */
	int n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_eq(n, 2, "after a call: %d frames", n);
	cr_assert_eq(out[1], base + 9);

	*ra = 0x7fffff; /* nothing mapped there */
	n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_eq(n, 1, "unmapped: %d frames", n);

	uint8_t *heap = malloc(256);
	cr_assert(heap);
	memset(heap, 0x90, 256);
	*ra = (uint64_t)(uintptr_t)heap + 128; /* data, no call before it */
	n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_eq(n, 1, "heap: %d frames", n);
	free(heap);
	munmap(jit, 4096);
}

Test(unwind, cfi_plt_entry_before_and_after_its_push)
{
	const struct cfi_row *row;
	uint64_t fake[4], out[4], ret = (uint64_t)(uintptr_t)run_qsort + 5;
	int tr;

	modules_reload();
	uint64_t entry = libc_row_pc(CFI_PLT, &row) - 1; /* first lazy entry */
	cr_assert_eq(row->cfa_off, 11);
	struct unwind_stack st = stack_of(fake);

	/* At the entry's first jmp: nothing pushed yet, ra at [rsp]. */
	fake[0] = ret;
	fake[1] = 0;
	struct unwind_regs r = {entry, (uint64_t)(uintptr_t)fake, 0};
	cr_assert_eq(unwind_cfi(&r, &st, find_table, NULL, out, 2, &tr), 2);
	cr_assert_eq(out[1], ret);

	/* At the jmp to PLT0 (offset 11): the relocation index is pushed. */
	fake[0] = 7;
	fake[1] = ret;
	r.ip = entry + 11;
	cr_assert_eq(unwind_cfi(&r, &st, find_table, NULL, out, 2, &tr), 2);
	cr_assert_eq(out[1], ret);
}

Test(unwind, cfi_stops_when_the_stack_does_not_grow)
{
	const struct cfi_row *row;
	uint64_t fake[8], out[64];
	int tr;

	modules_reload();
	/* An rbp-based row; a frame record that points at itself, and a return
	 * address into the same row: without the rule it would cycle. */
	uint64_t pc = libc_row_pc(CFI_RBP, &row);
	cr_assert_eq(row->rbp_off, -row->cfa_off, "unusual rbp row: cfa %d, rbp %d", row->cfa_off,
		     row->rbp_off);
	uint64_t *bp = &fake[8] - row->cfa_off / 8;
	cr_assert(bp >= fake);
	bp[0] = (uint64_t)(uintptr_t)bp; /* saved rbp at CFA + rbp_off */
	bp[row->cfa_off / 8 - 1] = pc + 1; /* ra at CFA - 8 */
	struct unwind_stack st = stack_of(fake);
	struct unwind_regs r = {pc, (uint64_t)(uintptr_t)fake, (uint64_t)(uintptr_t)bp};
	int n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr);
	cr_assert_eq(n, 2, "%d frames", n);
	cr_assert_eq(out[1], pc + 1);
	cr_assert_eq(tr, 0);
}

/* A trace lists the words a walk read, says whether it used the starting
 * rbp, and holds exactly while those words do. */
Test(unwind, trace_records_the_words_read_and_rbp_use)
{
	const struct cfi_row *row;
	uint64_t fake[8], out[64];
	struct unwind_trace tr;
	int truncated;

	modules_reload();
	/* An rbp-based row: CFA from the starting rbp, then rbp from the stack. */
	uint64_t pc = libc_row_pc(CFI_RBP, &row);
	uint64_t *bp = &fake[8] - row->cfa_off / 8;
	bp[0] = (uint64_t)(uintptr_t)bp;
	bp[row->cfa_off / 8 - 1] = pc + 1;
	struct unwind_stack st = stack_of(fake);
	st.trace = &tr;
	struct unwind_regs r = {pc, (uint64_t)(uintptr_t)fake, (uint64_t)(uintptr_t)bp};
	int n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &truncated);
	cr_assert_eq(n, 2);
	cr_assert_eq(tr.bp_used, 1);
	cr_assert_eq(tr.outside, 0);
	cr_assert_eq(tr.overflow, 0);
	cr_assert_eq(tr.n, 4, "%d words", tr.n); /* ra and rbp, twice */
	for (int i = 0; i < tr.n; i++)
		cr_assert(tr.addr[i] >= (uintptr_t)fake && tr.addr[i] < (uintptr_t)(fake + 8));
	cr_assert(unwind_trace_holds(&tr));
	uint64_t saved = bp[row->cfa_off / 8 - 1];
	bp[row->cfa_off / 8 - 1] = pc + 2; /* another return address */
	cr_assert(!unwind_trace_holds(&tr));
	bp[row->cfa_off / 8 - 1] = saved;
	cr_assert(unwind_trace_holds(&tr));
	bp[0] ^= 8; /* another saved rbp */
	cr_assert(!unwind_trace_holds(&tr));
	bp[0] ^= 8;

	/* An rsp-based row: the starting rbp is never used. */
	pc = libc_row_pc(CFI_RSP, &row);
	memset(fake, 0, sizeof(fake));
	r = (struct unwind_regs){pc, (uint64_t)(uintptr_t)fake, 12345};
	n = unwind_cfi(&r, &st, find_table, NULL, out, 64, &truncated);
	cr_assert_eq(n, 1); /* the return address read is 0: the end */
	cr_assert_eq(tr.bp_used, 0);
	cr_assert_eq(tr.n, 1);
	cr_assert_eq(tr.addr[0], (uintptr_t)fake + (uint64_t)row->cfa_off - 8);

	/* Frame pointers: always the starting rbp. */
	r.bp = (uint64_t)(uintptr_t)fake;
	unwind_fp(&r, &st, out, 64, &truncated);
	cr_assert_eq(tr.bp_used, 1);

	/* A stack not known: every read guarded, the walk not replayable. */
	struct unwind_stack unknown = {0, 0, &tr};
	r = (struct unwind_regs){pc, (uint64_t)(uintptr_t)fake, 0};
	fake[row->cfa_off / 8 - 1] = 0;
	unwind_cfi(&r, &unknown, find_table, NULL, out, 64, &truncated);
	cr_assert_eq(tr.outside, 1);
	cr_assert(!unwind_trace_holds(&tr));
}

/* A real walk (no frame pointers, through the chain into libc's start):
 * its trace holds while its frames are live, and the same walk again
 * gives the same frames and the same trace. */
struct traced {
	struct unwind_trace tr, tr2;
	uint64_t pc[MAXF], pc2[MAXF];
	int n, n2, held;
	struct unwind_stack st;
};

static int traced_cb(const struct unwind_regs *r, void *arg)
{
	struct traced *c = arg;
	int truncated;
	c->st.trace = &c->tr;
	c->n = unwind_cfi(r, &c->st, find_table, NULL, c->pc, MAXF, &truncated);
	c->held = unwind_trace_holds(&c->tr);
	c->st.trace = &c->tr2;
	c->n2 = unwind_cfi(r, &c->st, find_table, NULL, c->pc2, MAXF, &truncated);
	return 1;
}

Test(unwind, trace_of_a_real_walk_holds_while_its_frames_live)
{
	static struct traced c;
	run_on_chain(load_chain(0), traced_cb, &c, &c.st);
	cr_assert_gt(c.n, NCHAIN);
	cr_assert(c.held);
	cr_assert_eq(c.tr.outside, 0);
	cr_assert_eq(c.n2, c.n);
	cr_assert_arr_eq(c.pc2, c.pc, (size_t)c.n * sizeof(uint64_t));
	cr_assert_eq(c.tr2.n, c.tr.n);
	cr_assert_arr_eq(c.tr2.addr, c.tr.addr, (size_t)c.tr.n * sizeof(uint64_t));
	cr_assert_eq(c.tr.n >= c.n - 1, 1, "%d words for %d frames", c.tr.n, c.n);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

Test(unwind, garbage_registers_are_harmless)
{
	uint64_t out[64], seed = 0x9e3779b97f4a7c15ull;
	uint64_t garbage[512];
	int n, tr;
	volatile int local = 0;

	modules_reload();
	struct unwind_stack st = stack_of(&local), unknown = {0};
	uint64_t libc_pc = (uint64_t)(uintptr_t)qsort;
	uint64_t libc_lo = 0, libc_hi = 0, bias = 0;
	const struct cfi_table *libc = find_table(libc_pc, &bias, NULL);
	cr_assert(libc);
	libc_lo = libc->lo + bias;
	libc_hi = libc->hi + bias;

	/* sp and bp in memory that is not mapped: one frame, nothing read. */
	void *hole = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(hole != MAP_FAILED);
	munmap(hole, 4096);
	struct unwind_regs r = {libc_pc, (uint64_t)(uintptr_t)hole + 64,
				(uint64_t)(uintptr_t)hole + 128};
	cr_assert_eq(unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr), 1);
	cr_assert_eq(unwind_cfi(&r, &unknown, find_table, NULL, out, 64, &tr), 1);
	cr_assert_eq(unwind_fp(&r, &st, out, 64, &tr), 1);
	cr_assert_eq(unwind_fp(&r, &unknown, out, 64, &tr), 1);
	cr_assert_eq(out[0], libc_pc);

	/* ip 0: nothing. */
	r = (struct unwind_regs){0, st.hi - 64, st.hi - 32};
	cr_assert_eq(unwind_cfi(&r, &st, find_table, NULL, out, 64, &tr), 0);
	cr_assert_eq(unwind_fp(&r, &st, out, 64, &tr), 0);

	double t0 = now_s();
	long frames_random = 0, walks_random = 0;
	for (int i = 0; i < 40000; i++) {
		int mode = i % 4;
		for (int k = 0; k < 512; k += 8) { /* refresh some of the fake stack */
			uint64_t x = xorshift(&seed);
			garbage[(k + (x >> 40)) % 512] =
				x % 3 == 0   ? x
				: x % 3 == 1 ? libc_lo + x % (libc_hi - libc_lo)
					     : (uint64_t)(uintptr_t)&garbage[x % 512];
		}
		uint64_t a = xorshift(&seed), b = xorshift(&seed), c = xorshift(&seed);
		switch (mode) {
		case 0: /* anything */
			r = (struct unwind_regs){a, b, c};
			break;
		case 1: /* a libc pc over our real stack */
			r = (struct unwind_regs){libc_lo + a % (libc_hi - libc_lo),
						 (st.lo + b % (st.hi - st.lo)) & ~7ull,
						 st.lo + c % (st.hi - st.lo)};
			break;
		case 2: /* small values, near NULL */
			r = (struct unwind_regs){a & 0xffff, b & 0xfffff, c & 0xff};
			break;
		default: /* a libc pc over a stack full of plausible garbage */
			r = (struct unwind_regs){libc_lo + a % (libc_hi - libc_lo),
						 (uint64_t)(uintptr_t)&garbage[b % 256],
						 (uint64_t)(uintptr_t)&garbage[c % 512]};
			break;
		}
		const struct unwind_stack *s = (i / 4) % 2 ? &st : &unknown;
		n = unwind_cfi(&r, s, find_table, NULL, out, 64, &tr);
		cr_assert(n >= 0 && n <= 64);
		if (mode == 0 || mode == 2) {
			frames_random += n;
			walks_random++;
			cr_assert_leq(n, 2, "mode %d: %d frames from garbage", mode, n);
		}
		n = unwind_fp(&r, s, out, 64, &tr);
		cr_assert(n >= 0 && n <= 64);
		if (mode == 0 || mode == 2)
			cr_assert_leq(n, 2, "fp mode %d: %d frames from garbage", mode, n);
	}
	double dt = now_s() - t0;
	cr_assert_lt(dt, 5.0, "80000 garbage walks took %.2f s", dt);
	cr_log_info("garbage: 80000 walks in %.3f s, %.2f frames per random walk", dt,
		    (double)frames_random / (double)walks_random);
}

/* A frame-pointer walk that starts on a stack it was not told about (the
 * agent's own, where a recording ends; a program's alternate signal
 * stack) follows the chain there until it reaches the thread's stack,
 * and stops where the chain leaves that stack again.  It used to stop at
 * the first frame. */
Test(unwind, fp_walks_from_another_stack_into_the_threads)
{
	/* one array, two fake stacks: the low half where the walk starts,
	 * the high half above it; frame records [bp] = caller's bp, [bp + 8]
	 * = return address, the chain climbing from one into the other */
	static uint64_t mem[128];
	uint64_t out[16], *low = mem, *high = mem + 64;
	int truncated;
	uint64_t *f0 = &low[4], *f1 = &low[20], *f2 = &high[4], *f3 = &high[20];
	f0[0] = (uint64_t)(uintptr_t)f1, f0[1] = 0x1001;
	f1[0] = (uint64_t)(uintptr_t)f2, f1[1] = 0x1002;
	f2[0] = (uint64_t)(uintptr_t)f3, f2[1] = 0x1003;
	f3[0] = 0, f3[1] = 0x1004; /* bp 0: the end */
	struct unwind_regs r = {0x1000, (uint64_t)(uintptr_t)&low[2], (uint64_t)(uintptr_t)f0};

	/* the thread's stack is the high half: from the other into it, every
	 * frame */
	struct unwind_stack st = {(uint64_t)(uintptr_t)high, (uint64_t)(uintptr_t)(high + 64), NULL};
	int n = unwind_fp(&r, &st, out, 16, &truncated);
	cr_assert_eq(n, 5, "%d frames", n);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(out[i], 0x1000u + (unsigned)i);
	cr_assert_eq(truncated, 0);

	/* the thread's stack is the low half: the chain leaves it, the walk
	 * stops there */
	st = (struct unwind_stack){(uint64_t)(uintptr_t)low, (uint64_t)(uintptr_t)(low + 64), NULL};
	n = unwind_fp(&r, &st, out, 16, &truncated);
	cr_assert_eq(n, 3, "%d frames", n);
	cr_assert_eq(truncated, 0);
}

Test(unwind, read_never_faults)
{
	volatile uint64_t word = 0x1122334455667788ull;
	uint64_t *heap = malloc(sizeof(*heap)), v = 0;
	struct unwind_stack st = stack_of(&word);

	cr_assert(heap);
	*heap = 42;
	cr_assert_eq(unwind_read(&st, (uint64_t)(uintptr_t)&word, &v), 0);
	cr_assert_eq(v, 0x1122334455667788ull);
	cr_assert_eq(unwind_read(&st, (uint64_t)(uintptr_t)heap, &v), 0); /* guarded path */
	cr_assert_eq(v, 42);
	cr_assert_eq(unwind_read(NULL, (uint64_t)(uintptr_t)heap, &v), 0);
	cr_assert_eq(unwind_read(&st, 0, &v), -1);
	cr_assert_eq(unwind_read(&st, 8, &v), -1);
	cr_assert_eq(unwind_read(&st, ~0ull - 3, &v), -1);
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_eq(unwind_read(&st, (uint64_t)(uintptr_t)hole, &v), -1); /* PROT_NONE */
	munmap(hole, 4096);
	cr_assert_eq(unwind_read(&st, (uint64_t)(uintptr_t)hole, &v), -1); /* unmapped */
	free(heap);
}

/* ---- from a signal handler -------------------------------------------------- */

static struct {
	struct chain_spin spin;
	volatile int captured;
	pthread_t target;
	struct unwind_stack st;
	uint64_t a[MAXF], b[MAXF]; /* from the ucontext; from inside the handler */
	int na, nb, ta, tb;
	uint64_t handler_sp;
} sig;

static void on_sigprof(int signo, siginfo_t *si, void *uc)
{
	struct unwind_regs r;

	(void)signo;
	(void)si;
	if (!sig.spin.spinning || sig.captured)
		return;
	unwind_regs_from_ucontext(uc, &r);
	sig.na = unwind_cfi(&r, &sig.st, find_table, NULL, sig.a, MAXF, &sig.ta);
	UNWIND_HERE(&r);
	sig.nb = unwind_cfi(&r, &sig.st, find_table, NULL, sig.b, MAXF, &sig.tb);
	sig.handler_sp = r.sp;
	sig.captured = 1;
	sig.spin.stop = 1;
}

static void *kicker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5000 && !sig.captured; i++) {
		pthread_kill(sig.target, SIGPROF);
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	sig.spin.stop = 1; /* give up: the test then fails, it does not hang */
	return NULL;
}

__attribute__((noinline)) static int run_spin(chain_start_fn start)
{
	volatile int keep = 1;
	sig.st = stack_of(&keep);
	int r = start(NULL, &sig.spin);
	return r + keep;
}

static void signal_walk(int altstack)
{
	chain_start_fn start = load_chain(0);
	struct sigaction sa = {0};
	pthread_t th;
	char na[MAXF][NAMELEN], nb[MAXF][NAMELEN], ja[4096], jb[4096];
	static const uint8_t restore_rt[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
	stack_t ss = {.ss_size = 1 << 16};

	if (altstack) {
		ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		cr_assert(ss.ss_sp != MAP_FAILED);
		cr_assert_eq(sigaltstack(&ss, NULL), 0);
	}
	sa.sa_sigaction = on_sigprof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | (altstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGPROF, &sa, NULL), 0);
	sig.target = pthread_self();
	cr_assert_eq(pthread_create(&th, NULL, kicker, NULL), 0);
	run_spin(start);
	pthread_join(th, NULL);
	cr_assert(sig.captured, "no SIGPROF caught while spinning");
	if (altstack) /* premise: the handler ran off the thread's stack */
		cr_assert(sig.handler_sp - (uint64_t)(uintptr_t)ss.ss_sp < ss.ss_size);
	else
		cr_assert(sig.handler_sp >= sig.st.lo && sig.handler_sp < sig.st.hi);

	/* From the interrupted registers: the spinning chain, down to _start. */
	names_of(sig.a, sig.na, na, ja, sizeof(ja));
	assert_chain(na, sig.na, 0, ja);
	assert_chain_rows(sig.a, 0, CFI_RSP); /* premise: no frame pointers */
	cr_assert_str_eq(na[NCHAIN], "run_spin", "%s", ja);
	assert_reaches_start(na, sig.na, sig.ta, ja);

	/* From inside the handler: handler, trampoline, then the same walk. */
	names_of(sig.b, sig.nb, nb, jb, sizeof(jb));
	cr_assert_str_eq(nb[0], "on_sigprof", "%s", jb);
	cr_assert_eq(sig.nb, sig.na + 2, "handler walk: %s\ninterrupted walk: %s", jb, ja);
	cr_assert(!memcmp((const void *)(uintptr_t)sig.b[1], restore_rt, sizeof(restore_rt)),
		  "frame 1 is not __restore_rt: %s", jb);
	for (int i = 0; i < sig.na; i++)
		cr_assert_eq(sig.b[i + 2], sig.a[i], "frame %d differs: %s", i + 2, jb);
	cr_assert_eq(sig.tb, 0);
}

Test(unwind, from_signal_handler_into_interrupted_code)
{
	signal_walk(0);
}

Test(unwind, from_signal_handler_on_sigaltstack)
{
	signal_walk(1);
}

/*
 * test_symbolize.c - tests of symbolize/symbolize.c.
 *
 * Ground truth comes from outside the symbolizer: the live process (its own
 * functions, module map from dl_iterate_phdr and build-ids from PT_NOTE), nm
 * and addr2line from binutils on a program compiled at test time
 * (tests/unit/data/sym_golden.c), and raw libdwfl for the symbol-table rules.
 * Tests that need libc's debug info (libc6-dbg) or python3.11 skip without.
 */
#include <criterion/criterion.h>

#include "symbolize.h"
#include "cfi.h"

#include <dlfcn.h>
#include <pthread.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__clang__)
#define NOIPA __attribute__((noinline, used))
#else
#define NOIPA __attribute__((noinline, noipa, used))
#endif

/* ---- functions of this binary that the tests resolve ---- */

NOIPA uintptr_t symtest_where(void)
{
	uintptr_t r = (uintptr_t)__builtin_return_address(0) - 1;
	__asm__ volatile("" : "+r"(r));
	return r;
}

enum { CALLER_BEGIN = __LINE__ };
NOIPA uintptr_t symtest_caller(int *line)
{
	*line = __LINE__; uintptr_t r = symtest_where();
	__asm__ volatile("" : "+r"(r)); /* no tail call: keep this frame */
	return r;
}
enum { CALLER_END = __LINE__ };

static uintptr_t (*volatile caller_fp)(int *) = symtest_caller;

/* ---- the live module map ---- */

struct live_mod {
	char path[PATH_MAX];
	uint64_t bias, lo, hi;
	uint8_t bid[64];
	size_t bidlen;
};

struct live_map {
	struct live_mod m[512];
	size_t n;
};

static void note_build_id(struct dl_phdr_info *info, const ElfW(Phdr) *ph,
			  struct live_mod *lm)
{
	const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
	const uint8_t *end = p + ph->p_memsz;
	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
		const uint8_t *name = p + sizeof(*nh);
		const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof(lm->bid)) {
			memcpy(lm->bid, desc, nh->n_descsz);
			lm->bidlen = nh->n_descsz;
			return;
		}
		p = desc + ((nh->n_descsz + 3) & ~3u);
	}
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct live_map *map = arg;
	if (map->n == sizeof(map->m) / sizeof(map->m[0]))
		return 1;
	struct live_mod *lm = &map->m[map->n];
	memset(lm, 0, sizeof(*lm));
	if (!info->dlpi_name || !info->dlpi_name[0]) {
		ssize_t k = readlink("/proc/self/exe", lm->path, sizeof(lm->path) - 1);
		if (k <= 0)
			return 0;
		lm->path[k] = 0;
	} else {
		snprintf(lm->path, sizeof(lm->path), "%s", info->dlpi_name);
	}
	lm->bias = info->dlpi_addr;
	lm->lo = UINT64_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uint64_t a = info->dlpi_addr + ph->p_vaddr;
			if (a < lm->lo)
				lm->lo = a;
			if (a + ph->p_memsz > lm->hi)
				lm->hi = a + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !lm->bidlen) {
			note_build_id(info, ph, lm);
		}
	}
	if (lm->hi)
		map->n++;
	return 0;
}

static struct live_map *live_map(void)
{
	struct live_map *map = calloc(1, sizeof(*map));
	cr_assert_not_null(map);
	dl_iterate_phdr(phdr_cb, map);
	cr_assert_gt(map->n, 2, "dl_iterate_phdr found %zu modules", map->n);
	return map;
}

static const struct live_mod *live_find(const struct live_map *map, uint64_t addr)
{
	for (size_t i = 0; i < map->n; i++)
		if (addr >= map->m[i].lo && addr < map->m[i].hi)
			return &map->m[i];
	return NULL;
}

static struct sym_module to_sym(const struct live_mod *lm)
{
	struct sym_module m = { lm->path, lm->bias, lm->lo, lm->hi,
				lm->bidlen ? lm->bid : NULL, lm->bidlen };
	return m;
}

/* A symbolizer loaded with the whole live module map. */
static struct symbolizer *live_symbolizer(const struct live_map *map)
{
	struct symbolizer *s = sym_new();
	cr_assert_not_null(s);
	for (size_t i = 0; i < map->n; i++) {
		struct sym_module m = to_sym(&map->m[i]);
		cr_assert_eq(sym_add_module(s, &m), 0, "%s", map->m[i].path);
	}
	return s;
}

static const char *base_of(const char *p)
{
	const char *b = p ? strrchr(p, '/') : NULL;
	return b ? b + 1 : p;
}

static bool has_warning(struct symbolizer *s, const char *a, const char *b)
{
	for (size_t i = 0; sym_warning(s, i); i++)
		if (strstr(sym_warning(s, i), a) && (!b || strstr(sym_warning(s, i), b)))
			return true;
	return false;
}

static size_t count_warnings(struct symbolizer *s)
{
	size_t i = 0;
	while (sym_warning(s, i))
		i++;
	return i;
}

/* Executable PT_LOAD range [lo, hi) of an ELF file, in vaddrs; 0 on success. */
static int file_xrange(const char *path, uint64_t *lo, uint64_t *hi, int *type)
{
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t n = 0;
	GElf_Ehdr eh;
	if (!e || elf_getphdrnum(e, &n) || !gelf_getehdr(e, &eh)) {
		if (e)
			elf_end(e);
		close(fd);
		return -EINVAL;
	}
	*type = eh.e_type;
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr p;
		if (gelf_getphdr(e, (int)i, &p) && p.p_type == PT_LOAD && (p.p_flags & PF_X)) {
			if (p.p_vaddr < *lo)
				*lo = p.p_vaddr;
			if (p.p_vaddr + p.p_memsz > *hi)
				*hi = p.p_vaddr + p.p_memsz;
		}
	}
	elf_end(e);
	close(fd);
	return *hi ? 0 : -ENOENT;
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static const char *libc_path(const struct live_map *map)
{
	for (size_t i = 0; i < map->n; i++)
		if (!strcmp(base_of(map->m[i].path), "libc.so.6"))
			return map->m[i].path;
	return NULL;
}

/* ---- tests on this process ---- */

Test(symbolize, own_function_name_file_line)
{
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	int call_line = 0;
	uintptr_t site = caller_fp(&call_line);
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, site, &f), 0);
	const struct live_mod *self = live_find(map, site);
	cr_assert_not_null(self);
	cr_assert_eq(f.resolved, 1);
	cr_assert_str_eq(f.func, "symtest_caller");
	cr_assert_str_eq(f.module, base_of(self->path));
	cr_assert_eq(f.module_off, site - self->bias);
	cr_assert_not_null(f.file, "the test binary is built with -g");
	cr_assert_str_eq(base_of(f.file), "test_symbolize.c");
	cr_assert_eq(f.line, call_line, "call site line %d, got %d", call_line, f.line);

	/* The entry address: same function, a line inside its definition. */
	uintptr_t entry = (uintptr_t)&symtest_caller;
	cr_assert_eq(sym_resolve(s, entry, &f), 0);
	cr_assert_str_eq(f.func, "symtest_caller");
	cr_assert(f.line > CALLER_BEGIN && f.line < CALLER_END, "line %d", f.line);

	uintptr_t w = (uintptr_t)&symtest_where + 2;
	cr_assert_eq(sym_resolve(s, w, &f), 0);
	cr_assert_str_eq(f.func, "symtest_where");
	cr_assert(f.line > 0 && f.line < CALLER_BEGIN, "line %d", f.line);
	cr_assert_eq(count_warnings(s), 0, "unexpected: %s", sym_warning(s, 0));
	sym_free(s);
	free(map);
}

/* Variables, as a lock's address names them in the report: a global, a
 * static, a member by offset; heap and stack addresses and code name
 * none. */
struct symtest_pair {
	long first, second;
};
struct symtest_pair symtest_global_pair;
static int symtest_static_word;
struct symtest_holder {
	int head;
	struct symtest_pair pairs[4];
	pthread_mutex_t lock;
};
struct symtest_holder symtest_holder;

Test(symbolize, data_names)
{
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	char buf[128];
	/* by the variable's type (the test is built with -g): its members, at
	 * offset 0 too, array elements; never inside pthread_mutex_t */
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_global_pair, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_global_pair.first");
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_global_pair.second, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_global_pair.second");
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_holder.pairs[2].second, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_holder.pairs[2].second");
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_holder.lock, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_holder.lock");
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_holder.lock + 4, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_holder.lock+0x4");
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_static_word, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "symtest_static_word");
	long *heap = malloc(sizeof(*heap)), on_stack = 0;
	cr_assert_eq(sym_data_name(s, (uintptr_t)heap, buf, sizeof(buf)), -ENOENT);
	cr_assert_eq(sym_data_name(s, (uintptr_t)&on_stack, buf, sizeof(buf)), -ENOENT);
	cr_assert_eq(sym_data_name(s, (uintptr_t)&symtest_caller, buf, sizeof(buf)), -ENOENT, "code is no variable");
	free(heap);
	sym_free(s);
	free(map);
}

/* A second "process" maps the test binary elsewhere: after
 * sym_begin_process the old mapping is gone and the new one resolves to
 * the same function and line, from the file opened for the first. */
Test(symbolize, second_process_shares_the_files)
{
	struct live_map *map = live_map();
	uintptr_t site = (uintptr_t)&symtest_caller + 1;
	const struct live_mod *self = live_find(map, site);
	cr_assert_not_null(self);
	struct symbolizer *s = sym_new();
	struct sym_module m = to_sym(self);
	cr_assert_eq(sym_add_module(s, &m), 0);
	struct sym_frame a, b;
	cr_assert_eq(sym_resolve(s, site, &a), 0);
	cr_assert_str_eq(a.func, "symtest_caller");
	int line = a.line;
	sym_begin_process(s);
	cr_assert_eq(sym_resolve(s, site, &b), 0);
	cr_assert_str_eq(b.module, "?", "the first process's mapping is forgotten");
	const uint64_t shift = 0x100000000ull;
	struct sym_module moved = m;
	moved.bias += shift;
	moved.lo += shift;
	moved.hi += shift;
	cr_assert_eq(sym_add_module(s, &moved), 0);
	cr_assert_eq(sym_resolve(s, site + shift, &b), 0);
	cr_assert_str_eq(b.func, "symtest_caller");
	cr_assert_eq(b.line, line);
	cr_assert_eq(b.module_off, site - self->bias);
	cr_assert_eq(count_warnings(s), 0, "unexpected: %s", sym_warning(s, 0));
	sym_free(s);
	free(map);
}

Test(symbolize, results_are_cached)
{
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	struct sym_frame a, b;
	uintptr_t addr = (uintptr_t)&symtest_caller + 1;
	cr_assert_eq(sym_resolve(s, addr, &a), 0);
	cr_assert_eq(sym_resolve(s, addr, &b), 0);
	cr_assert_eq(a.func, b.func, "a cached result hands out the same string");
	cr_assert_eq(a.file, b.file);
	cr_assert_eq(a.line, b.line);
	struct sym_stats st;
	sym_get_stats(s, &st);
	cr_assert_eq(st.lookups, 2);
	cr_assert_eq(st.hits, 1, "the second lookup is a cache hit");
	cr_assert_eq(st.modules, map->n);
	cr_assert_geq(st.readable, map->n - 1, "all but the vdso");
	char buf[64];
	cr_assert_str_eq(sym_frame_name(&a, buf, sizeof(buf)), "symtest_caller");
	cr_assert_str_eq(sym_frame_name(&a, buf, 8), "symtest");
	cr_assert_str_eq(sym_frame_name(&a, buf, 0), "");
	sym_free(s);
	free(map);
}

Test(symbolize, demangle_helper)
{
	char *d = sym_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
	cr_assert_not_null(d);
	cr_assert_str_eq(d, "std::vector<int, std::allocator<int> >::push_back(int const&)");
	free(d);
	d = sym_demangle("_ZN4core3fmt5write17h0123456789abcdefE"); /* Rust legacy */
	cr_assert_not_null(d);
	cr_assert(!strncmp(d, "core::fmt::write", 16), "%s", d);
	free(d);
	cr_assert_null(sym_demangle("malloc"));
	cr_assert_null(sym_demangle("_RNvCs1234_7mycrate4main")); /* Rust v0: left as is */
	cr_assert_null(sym_demangle("_Z")); /* not a valid mangled name */
	cr_assert_null(sym_demangle(NULL));
}

Test(symbolize, libstdcxx_function_is_demangled)
{
	/* the symbolizer loads libstdc++ for its demangler; so does this test,
	 * for a C++ function to resolve */
	void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
	cr_assert_not_null(lib, "libstdc++.so.6: %s", dlerror());
	void *fn = dlsym(lib, "_ZSt17__throw_bad_allocv");
	cr_assert_not_null(fn);
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, (uintptr_t)fn + 4, &f), 0);
	cr_assert_eq(f.resolved, 1);
	cr_assert_str_eq(f.func, "std::__throw_bad_alloc()");
	cr_assert(!strncmp(f.module, "libstdc++.so", 12), "%s", f.module);
	struct sym_frame g;
	cr_assert_eq(sym_resolve(s, (uintptr_t)fn + 8, &g), 0);
	cr_assert_eq(g.func, f.func, "one demangled string per symbol");
	sym_free(s);
	free(map);
}

Test(symbolize, libc_malloc)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	cr_assert_not_null(h);
	/* libc's own malloc, not an interposed one (ASan builds). */
	uintptr_t fn = (uintptr_t)dlsym(h, "malloc");
	cr_assert(fn);
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	for (int off = 0; off <= 8; off += 8) {
		struct sym_frame f;
		cr_assert_eq(sym_resolve(s, fn + off, &f), 0);
		cr_assert_eq(f.resolved, 1);
		cr_assert(!strcmp(f.func, "malloc") || !strcmp(f.func, "__libc_malloc"),
			  "malloc resolved to %s", f.func);
		cr_assert_str_eq(f.module, "libc.so.6");
		if (f.file) /* with libc6-dbg */
			cr_assert_str_eq(base_of(f.file), "malloc.c");
	}
	dlclose(h);
	sym_free(s);
	free(map);
}

/* glibc's .symtab spells versions into names (pthread_create@GLIBC_2.2.5
 * next to pthread_create@@GLIBC_2.34): one function must have one name. */
Test(symbolize, symbol_versions_stripped)
{
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	cr_assert_not_null(h);
	const char *names[] = {"pthread_create", "__libc_start_main", "pthread_cond_wait"};
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		uintptr_t fn = (uintptr_t)dlsym(h, names[i]);
		cr_assert(fn);
		struct sym_frame f;
		cr_assert_eq(sym_resolve(s, fn + 4, &f), 0);
		cr_assert_eq(f.resolved, 1);
		cr_assert_null(strchr(f.func, '@'), "%s resolved to %s", names[i], f.func);
	}
	dlclose(h);
	sym_free(s);
	free(map);
}

Test(symbolize, address_outside_any_module)
{
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	uint64_t addrs[] = { 0x1000, 0xffffffffff600000ull + 0x1000, UINT64_MAX };
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		struct sym_frame f;
		cr_assert_eq(sym_resolve(s, addrs[i], &f), 0);
		cr_assert_str_eq(f.module, "?");
		cr_assert_eq(f.resolved, 0);
		cr_assert_null(f.func);
		cr_assert_null(f.file);
		cr_assert_eq(f.module_off, addrs[i]);
	}
	struct sym_frame f;
	char buf[64];
	sym_resolve(s, 0x1000, &f);
	cr_assert_str_eq(sym_frame_name(&f, buf, sizeof(buf)), "?+0x1000");
	sym_free(s);
	free(map);
}

Test(symbolize, wrong_build_id)
{
	struct live_map *map = live_map();
	uintptr_t addr = (uintptr_t)&symtest_caller + 1;
	const struct live_mod *self = live_find(map, addr);
	cr_assert_not_null(self);
	cr_assert_gt(self->bidlen, 0, "the test binary has a build-id");
	struct live_mod bad = *self;
	bad.bid[0] ^= 0xff;
	struct symbolizer *s = sym_new();
	struct sym_module m = to_sym(&bad);
	cr_assert_eq(sym_add_module(s, &m), 0);
	cr_assert_eq(sym_add_module(s, &m), 0); /* the same module twice: one warning */
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, addr, &f), 0);
	cr_assert_eq(f.resolved, 0);
	cr_assert_null(f.func);
	cr_assert_null(f.file);
	cr_assert_str_eq(f.module, base_of(self->path));
	cr_assert_eq(f.module_off, addr - self->bias);
	char want[PATH_MAX + 32], buf[PATH_MAX + 32];
	snprintf(want, sizeof(want), "%s+0x%" PRIx64, base_of(self->path), (uint64_t)(addr - self->bias));
	cr_assert_str_eq(sym_frame_name(&f, buf, sizeof(buf)), want);
	cr_assert(has_warning(s, "build-id differs", self->path), "warning: %s", sym_warning(s, 0));
	cr_assert_eq(count_warnings(s), 1);
	sym_free(s);

	/* The right build-id resolves. */
	s = sym_new();
	m = to_sym(self);
	cr_assert_eq(sym_add_module(s, &m), 0);
	cr_assert_eq(sym_resolve(s, addr, &f), 0);
	cr_assert_str_eq(f.func, "symtest_caller");
	cr_assert_null(sym_warning(s, 0));
	sym_free(s);
	free(map);
}

static const char *make_tmpdir(void);

/* A module whose file is elsewhere than its path says (a container's,
 * seen through /proc/PID/root): looked for under the root first, used
 * when its build-id is the recorded one; its function's range comes with
 * the name.  Then the names a recording kept (a perf map's lines) for a
 * module whose file is not there at all. */
Test(symbolize, root_and_kept_names)
{
	struct live_map *map = live_map();
	uintptr_t addr = (uintptr_t)&symtest_caller + 1;
	const struct live_mod *self = live_find(map, addr);
	cr_assert_not_null(self);
	const char *root = make_tmpdir();
	cr_assert_eq(run("mkdir -p '%s/inside/bin' && cp '%s' '%s/inside/bin/prog'", root, self->path, root), 0);
	struct live_mod moved = *self;
	snprintf(moved.path, sizeof(moved.path), "/inside/bin/prog");

	struct symbolizer *s = sym_new();
	cr_assert_eq(sym_set_root(s, root), 0);
	struct sym_module m = to_sym(&moved);
	cr_assert_eq(sym_add_module(s, &m), 0);
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, addr, &f), 0);
	cr_assert_str_eq(f.func, "symtest_caller");
	cr_assert_str_eq(f.module, "prog");
	cr_assert_eq(f.func_lo, (uint64_t)(uintptr_t)&symtest_caller, "function start %#" PRIx64, f.func_lo);
	cr_assert_gt(f.func_size, 1);
	cr_assert_eq(count_warnings(s), 0, "unexpected: %s", sym_warning(s, 0));
	cr_assert(sym_file_in_use(s, addr));
	cr_assert(!sym_file_in_use(s, 8), "no module there");
	sym_free(s);

	/* Under the root, a file of another build-id: not used. */
	struct live_mod other = moved;
	other.bid[0] ^= 0xff;
	s = sym_new();
	cr_assert_eq(sym_set_root(s, root), 0);
	m = to_sym(&other);
	cr_assert_eq(sym_add_module(s, &m), 0);
	cr_assert_eq(sym_resolve(s, addr, &f), 0);
	cr_assert_eq(f.resolved, 0);
	cr_assert(has_warning(s, "/inside/bin/prog", "module+offset"), "warning: %s", sym_warning(s, 0));
	sym_free(s);
	s = sym_new();
	cr_assert_lt(sym_set_root(s, "/nonexistent/root"), 0);
	sym_free(s);

	/* No root: the names kept, for the module that cannot be read. */
	char kept[128];
	snprintf(kept, sizeof(kept), "%" PRIx64 " 40 kept_name\n", (uint64_t)(uintptr_t)&symtest_caller);
	s = sym_new();
	cr_assert_eq(sym_add_perf_map_text(s, kept, strlen(kept), "kept"), 0);
	m = to_sym(&moved);
	cr_assert_eq(sym_add_module(s, &m), 0);
	cr_assert_eq(sym_resolve(s, addr, &f), 0);
	cr_assert_str_eq(f.func, "kept_name");
	cr_assert_str_eq(f.module, "prog", "the module's name, not [jit]");
	cr_assert(!sym_file_in_use(s, addr), "no file: named from the kept names only");
	cr_assert(has_warning(s, "/inside/bin/prog", "named from the names the recording kept"), "warning: %s",
		  sym_warning(s, 0));
	/* an address of it the names do not cover: module+offset */
	cr_assert_eq(sym_resolve(s, (uintptr_t)&symtest_where + 2, &f), 0);
	cr_assert_eq(f.resolved, 0);
	cr_assert_str_eq(f.module, "prog");
	sym_free(s);
	free(map);
}

Test(symbolize, missing_file)
{
	struct symbolizer *s = sym_new();
	struct sym_module m = { "/nonexistent/dir/libgone.so.1", 0x7f0000000000ull,
				0x7f0000001000ull, 0x7f0000009000ull, NULL, 0 };
	cr_assert_eq(sym_add_module(s, &m), 0);
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, 0x7f0000001234ull, &f), 0);
	cr_assert_eq(f.resolved, 0);
	cr_assert_str_eq(f.module, "libgone.so.1");
	cr_assert_eq(f.module_off, 0x1234);
	char buf[64];
	cr_assert_str_eq(sym_frame_name(&f, buf, sizeof(buf)), "libgone.so.1+0x1234");
	cr_assert(has_warning(s, "/nonexistent/dir/libgone.so.1", "module+offset"),
		  "warning: %s", sym_warning(s, 0));
	cr_assert_eq(count_warnings(s), 1);
	cr_assert_null(sym_warning(s, 1));
	sym_free(s);
}

Test(symbolize, vdso)
{
	struct live_map *map = live_map();
	struct symbolizer *s = live_symbolizer(map);
	const struct live_mod *v = NULL;
	for (size_t i = 0; i < map->n; i++)
		if (!strcmp(map->m[i].path, "linux-vdso.so.1"))
			v = &map->m[i];
	if (v) {
		struct sym_frame f;
		char buf[64], want[64];
		cr_assert_eq(sym_resolve(s, v->lo + 0x10, &f), 0);
		cr_assert_str_eq(f.module, "[vdso]");
		cr_assert_eq(f.resolved, 0);
		snprintf(want, sizeof(want), "[vdso]+0x%" PRIx64, v->lo + 0x10 - v->bias);
		cr_assert_str_eq(sym_frame_name(&f, buf, sizeof(buf)), want);
	}
	cr_assert_eq(count_warnings(s), 0, "vdso is no warning: %s", sym_warning(s, 0));
	sym_free(s);

	s = sym_new();
	struct sym_module m = { "[vdso]", 0x7fff0000, 0x7fff0000, 0x7fff2000, NULL, 0 };
	cr_assert_eq(sym_add_module(s, &m), 0);
	struct sym_frame f;
	char buf[64];
	cr_assert_eq(sym_resolve(s, 0x7fff0abc, &f), 0);
	cr_assert_str_eq(sym_frame_name(&f, buf, sizeof(buf)), "[vdso]+0xabc");
	cr_assert_null(sym_warning(s, 0));
	sym_free(s);
	free(map);
}

Test(symbolize, overlapping_modules_and_late_add)
{
	struct symbolizer *s = sym_new();
	struct sym_module a = { "/nonexistent/a.so", 0x10000, 0x10000, 0x20000, NULL, 0 };
	struct sym_module b = { "/nonexistent/b.so", 0x18000, 0x18000, 0x19000, NULL, 0 };
	struct sym_module c = { "/nonexistent/c.so", 0x30000, 0x30000, 0x31000, NULL, 0 };
	cr_assert_eq(sym_add_module(s, &a), 0);
	cr_assert_eq(sym_add_module(s, &b), 0);
	struct sym_frame f;
	sym_resolve(s, 0x18800, &f);
	cr_assert_str_eq(f.module, "b.so");
	cr_assert_eq(f.module_off, 0x800);
	sym_resolve(s, 0x1c000, &f); /* after b ends, still inside a */
	cr_assert_str_eq(f.module, "a.so");
	cr_assert_eq(f.module_off, 0xc000);
	sym_resolve(s, 0x17000, &f);
	cr_assert_str_eq(f.module, "a.so");
	sym_resolve(s, 0x30010, &f);
	cr_assert_str_eq(f.module, "?");
	/* Adding a module drops cached results. */
	cr_assert_eq(sym_add_module(s, &c), 0);
	sym_resolve(s, 0x30010, &f);
	cr_assert_str_eq(f.module, "c.so");
	cr_assert_eq(f.module_off, 0x10);
	cr_assert_eq(count_warnings(s), 3);
	sym_free(s);
}

Test(symbolize, bad_arguments)
{
	struct symbolizer *s = sym_new();
	struct sym_frame f;
	struct sym_module m = { NULL, 0, 0, 0, NULL, 0 };
	cr_assert_eq(sym_add_module(s, NULL), -EINVAL);
	cr_assert_eq(sym_add_module(s, &m), -EINVAL);
	m.path = "/x";
	m.build_id_len = 20; /* length without bytes */
	cr_assert_eq(sym_add_module(s, &m), -EINVAL);
	cr_assert_eq(sym_resolve(NULL, 1, &f), -EINVAL);
	cr_assert_eq(sym_resolve(s, 1, NULL), -EINVAL);
	cr_assert_null(sym_warning(s, 0));
	cr_assert_null(sym_warning(NULL, 0));
	sym_free(s);
	sym_free(NULL);
}

/* ---- golden: a program built now, checked against nm and addr2line ---- */

struct gsym {
	char name[64];
	uint64_t value, size;
};

struct golden {
	char dir[64];
	char bin[128];  /* with symbols and DWARF */
	char run[128];  /* the file given to the symbolizer */
	struct gsym syms[32];
	size_t nsyms;
	uint64_t bias, lo, hi;
	int type;
};

static const char *golden_src(void)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", __FILE__);
	char *slash = strrchr(p, '/');
	size_t keep = slash ? (size_t)(slash - p + 1) : 0;
	snprintf(p + keep, sizeof(p) - keep, "data/sym_golden.c");
	if (access(p, R_OK) == 0)
		return p;
	return "tests/unit/data/sym_golden.c";
}

/* Temporary directories of the running test (one process per test). */
static char tmpdirs[4][64];

static void remove_tmpdirs(void)
{
	for (size_t i = 0; i < 4; i++)
		if (tmpdirs[i][0])
			run("rm -rf '%s'", tmpdirs[i]);
}

TestSuite(symbolize, .fini = remove_tmpdirs);

static const char *make_tmpdir(void)
{
	for (size_t i = 0; i < 4; i++) {
		if (tmpdirs[i][0])
			continue;
		snprintf(tmpdirs[i], sizeof(tmpdirs[i]), "/tmp/rhea_symtest_XXXXXX");
		cr_assert_not_null(mkdtemp(tmpdirs[i]));
		return tmpdirs[i];
	}
	cr_assert_fail("too many temporary directories");
	return NULL;
}

static void golden_build(struct golden *g, const char *cc, const char *flags, bool strip)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->dir, sizeof(g->dir), "%s", make_tmpdir());
	snprintf(g->bin, sizeof(g->bin), "%s/golden", g->dir);
	cr_assert_eq(run("%s -g -O0 %s -o %s %s", cc, flags, g->bin, golden_src()), 0,
		     "%s failed on %s", cc, golden_src());
	snprintf(g->run, sizeof(g->run), "%s", g->bin);
	if (strip) {
		snprintf(g->run, sizeof(g->run), "%s/golden_stripped", g->dir);
		cr_assert_eq(run("strip -o %s %s", g->run, g->bin), 0);
	}
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only %s", g->bin);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p) && g->nsyms < 32) {
		unsigned long long v, sz = 0;
		char t, name[256];
		if (sscanf(line, "%llx %llx %c %255s", &v, &sz, &t, name) != 4) {
			sz = 0;
			if (sscanf(line, "%llx %c %255s", &v, &t, name) != 3)
				continue;
		}
		if ((t != 'T' && t != 't') || (strncmp(name, "golden_", 7) && strcmp(name, "main")))
			continue;
		struct gsym *gs = &g->syms[g->nsyms++];
		snprintf(gs->name, sizeof(gs->name), "%.63s", name);
		gs->value = v;
		gs->size = sz;
	}
	cr_assert_eq(pclose(p), 0);
	cr_assert_eq(g->nsyms, 6, "nm found %zu golden functions", g->nsyms);
	cr_assert_eq(file_xrange(g->run, &g->lo, &g->hi, &g->type), 0);
	g->bias = g->type == ET_DYN ? 0x555555554000ull : 0;
}


static const struct gsym *gsym(const struct golden *g, const char *name)
{
	for (size_t i = 0; i < g->nsyms; i++)
		if (!strcmp(g->syms[i].name, name))
			return &g->syms[i];
	cr_assert_fail("no symbol %s", name);
	return NULL;
}

static struct symbolizer *golden_symbolizer(const struct golden *g)
{
	struct symbolizer *s = sym_new();
	struct sym_module m = { g->run, g->bias, g->lo + g->bias, g->hi + g->bias, NULL, 0 };
	cr_assert_eq(sym_add_module(s, &m), 0);
	cr_assert_null(sym_warning(s, 0), "%s", sym_warning(s, 0));
	return s;
}

/* addr2line's outermost frame for one address. */
struct a2l {
	uint64_t vaddr;
	char func[256];
	char file[PATH_MAX];
	int line;
	int frames;
};

/* Run addr2line -i over addrs; fills out[] (same order). */
static void addr2line_batch(const char *bin, const uint64_t *addrs, size_t n, struct a2l *out)
{
	char tmp[PATH_MAX], cmd[PATH_MAX * 2];
	snprintf(tmp, sizeof(tmp), "%s/addr2line.out", make_tmpdir());
	snprintf(cmd, sizeof(cmd), "addr2line -a -i -f -e %s > %s", bin, tmp);
	FILE *p = popen(cmd, "w");
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		fprintf(p, "0x%" PRIx64 "\n", addrs[i]);
	cr_assert_eq(pclose(p), 0, "addr2line failed");
	FILE *f = fopen(tmp, "r");
	cr_assert_not_null(f);
	char l1[PATH_MAX + 64], l2[PATH_MAX + 64];
	long cur = -1;
	while (fgets(l1, sizeof(l1), f)) {
		l1[strcspn(l1, "\n")] = 0;
		if (!strncmp(l1, "0x", 2)) {
			cur++;
			cr_assert_lt((size_t)cur, n);
			memset(&out[cur], 0, sizeof(out[cur]));
			out[cur].vaddr = strtoull(l1, NULL, 16);
			continue;
		}
		cr_assert_geq(cur, 0);
		cr_assert_not_null(fgets(l2, sizeof(l2), f));
		l2[strcspn(l2, "\n")] = 0;
		char *d = strstr(l2, " (discriminator");
		if (d)
			*d = 0;
		char *colon = strrchr(l2, ':');
		cr_assert_not_null(colon);
		*colon = 0;
		struct a2l *a = &out[cur];
		snprintf(a->func, sizeof(a->func), "%.255s", l1);
		snprintf(a->file, sizeof(a->file), "%.4000s", l2);
		a->line = colon[1] == '?' ? 0 : atoi(colon + 1);
		a->frames++;
	}
	fclose(f);
	unlink(tmp);
	cr_assert_eq((size_t)(cur + 1), n);
}

/* Every other byte of every golden function against nm and addr2line. */
static void golden_check(const char *cc, const char *flags)
{
	struct golden g;
	golden_build(&g, cc, flags, false);
	struct symbolizer *s = golden_symbolizer(&g);
	uint64_t *addrs = calloc(4096, sizeof(*addrs));
	size_t n = 0;
	for (size_t i = 0; i < g.nsyms; i++) {
		uint64_t sz = g.syms[i].size ? g.syms[i].size : 3;
		for (uint64_t o = 0; o < sz && n < 4096; o += 2)
			addrs[n++] = g.syms[i].value + o;
	}
	struct a2l *want = calloc(n, sizeof(*want));
	addr2line_batch(g.bin, addrs, n, want);
	int inlined = 0, lines = 0;
	for (size_t i = 0; i < n; i++) {
		struct sym_frame f;
		cr_assert_eq(sym_resolve(s, addrs[i] + g.bias, &f), 0);
		const struct a2l *w = &want[i];
		cr_assert_str_eq(f.module, "golden");
		cr_assert_eq(f.module_off, addrs[i]);
		/* nm: the function that contains the address */
		const char *nm_name = NULL;
		for (size_t k = 0; k < g.nsyms; k++) {
			uint64_t sz = g.syms[k].size ? g.syms[k].size : 3;
			if (addrs[i] >= g.syms[k].value && addrs[i] < g.syms[k].value + sz)
				nm_name = g.syms[k].name;
		}
		cr_assert_eq(f.resolved, 1, "0x%" PRIx64 " unresolved", addrs[i]);
		cr_assert_str_eq(f.func, nm_name, "0x%" PRIx64, addrs[i]);
		cr_assert_str_eq(f.func, w->func, "0x%" PRIx64 ": addr2line says %s", addrs[i], w->func);
		if (w->line) {
			lines++;
			cr_assert_not_null(f.file, "0x%" PRIx64, addrs[i]);
			cr_assert_str_eq(base_of(f.file), base_of(w->file), "0x%" PRIx64, addrs[i]);
			cr_assert_eq(f.line, w->line, "0x%" PRIx64 ": line %d, addr2line %d",
				     addrs[i], f.line, w->line);
		}
		cr_assert_eq(f.inlined_depth, w->frames - 1, "0x%" PRIx64, addrs[i]);
		inlined += f.inlined_depth > 0;
	}
	cr_assert_gt(inlined, 0, "golden_inl is inlined into golden_caller");
	cr_assert_gt(lines, (int)n / 2);
	free(addrs);
	free(want);
	sym_free(s);
}

Test(symbolize, golden_pie, .timeout = 60)
{
	golden_check("cc", "-pie -fPIE");
}

Test(symbolize, golden_non_pie, .timeout = 60)
{
	struct golden g;
	golden_build(&g, "cc", "-no-pie -fno-PIE", false);
	cr_assert_eq(g.type, ET_EXEC);
	golden_check("cc", "-no-pie -fno-PIE");
}

/*
 * clang emits no .debug_aranges, where libdwfl 0.188 looks CUs up: lines
 * must come from the CUs' own ranges.
 */
Test(symbolize, golden_clang_without_aranges, .timeout = 60)
{
	if (run("command -v clang >/dev/null 2>&1") != 0)
		cr_skip_test("clang not installed");
	golden_check("clang", "-pie -fPIE");
}

/*
 * Stripped, with -rdynamic: only exported functions remain (.dynsym).  An
 * address in a static function must not take the name of the exported one
 * before it, nor of the size-0 label before it.
 */
Test(symbolize, golden_stripped_no_far_attribution, .timeout = 60)
{
	struct golden g;
	golden_build(&g, "cc", "-rdynamic", true);
	const struct gsym *label = gsym(&g, "golden_sizeless");
	const struct gsym *after = gsym(&g, "golden_after_label");
	const struct gsym *leaf = gsym(&g, "golden_leaf");
	const struct gsym *stat = gsym(&g, "golden_static");
	cr_assert_eq(label->size, 0);
	cr_assert(after->value > label->value && after->value - label->value < 16,
		  "cc kept source order: the label directly precedes golden_after_label");
	cr_assert(stat->value >= leaf->value + leaf->size);

	/* Precondition: plain libdwfl does attribute it to the label. */
	Dwfl_Callbacks cb = { .find_elf = dwfl_build_id_find_elf,
			      .find_debuginfo = dwfl_standard_find_debuginfo,
			      .section_address = dwfl_offline_section_address };
	Dwfl *d = dwfl_begin(&cb);
	Dwfl_Module *dm = dwfl_report_elf(d, "g", g.run, -1, g.bias, true);
	cr_assert_not_null(dm);
	dwfl_report_end(d, NULL, NULL);
	GElf_Off off;
	GElf_Sym sym;
	const char *raw = dwfl_module_addrinfo(dm, g.bias + after->value + 4, &off, &sym,
					       NULL, NULL, NULL);
	cr_assert(raw && !strcmp(raw, "golden_sizeless"), "libdwfl says %s", raw ? raw : "(null)");
	dwfl_end(d);

	struct symbolizer *s = golden_symbolizer(&g);
	struct sym_frame f;
	for (uint64_t o = 0; o < after->size; o++) {
		cr_assert_eq(sym_resolve(s, g.bias + after->value + o, &f), 0);
		cr_assert_eq(f.resolved, 0, "golden_after_label+%" PRIu64 " -> %s", o, f.func);
		cr_assert_str_eq(f.module, "golden_stripped");
		cr_assert_eq(f.module_off, after->value + o);
	}
	for (uint64_t o = 0; o < stat->size; o++) {
		cr_assert_eq(sym_resolve(s, g.bias + stat->value + o, &f), 0);
		cr_assert_eq(f.resolved, 0, "golden_static+%" PRIu64 " -> %s", o, f.func);
	}
	/* The label itself (no CFI there) and the exported functions resolve. */
	for (uint64_t o = 0; o < 3; o++) {
		cr_assert_eq(sym_resolve(s, g.bias + label->value + o, &f), 0);
		cr_assert_str_eq(f.func, "golden_sizeless");
	}
	const char *exported[] = { "golden_leaf", "golden_caller", "main" };
	for (size_t i = 0; i < 3; i++) {
		const struct gsym *e = gsym(&g, exported[i]);
		for (uint64_t o = 0; o < e->size; o++) {
			cr_assert_eq(sym_resolve(s, g.bias + e->value + o, &f), 0);
			cr_assert_str_eq(f.func, exported[i]);
			cr_assert_null(f.file, "no DWARF left after strip");
		}
	}
	sym_free(s);
}

/* ---- distribution binaries ---- */

#include "xorshift.h"

/*
 * libc with libc6-dbg: file:line and inline depth of the outermost frame
 * against addr2line -i.  File names are not compared: binutils 2.40
 * misnames DWARF 5 header files (it reports bsearch.c:35 where the line
 * table and libdw say stdlib-bsearch.h:35).
 */
Test(symbolize, libc_lines_match_addr2line, .timeout = 120)
{
	struct live_map *map = live_map();
	const char *libc = libc_path(map);
	cr_assert_not_null(libc);
	const struct live_mod *lm = NULL;
	for (size_t i = 0; i < map->n; i++)
		if (map->m[i].path == libc)
			lm = &map->m[i];
	struct symbolizer *s = sym_new();
	struct sym_module m = to_sym(lm);
	sym_add_module(s, &m);
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	struct sym_frame f;
	sym_resolve(s, (uintptr_t)dlsym(h, "malloc"), &f);
	dlclose(h);
	if (!f.file) {
		sym_free(s);
		free(map);
		cr_skip_test("no debug info for libc (install libc6-dbg)");
	}
	enum { N = 3000 };
	uint64_t *addrs = malloc(N * sizeof(*addrs));
	for (size_t i = 0; i < N; i++)
		addrs[i] = lm->lo - lm->bias + rng() % (lm->hi - lm->lo);
	struct a2l *want = calloc(N, sizeof(*want));
	addr2line_batch(libc, addrs, N, want);
	int compared = 0, inlined = 0;
	for (size_t i = 0; i < N; i++) {
		cr_assert_eq(sym_resolve(s, addrs[i] + lm->bias, &f), 0);
		if (!want[i].line)
			continue;
		compared++;
		inlined += f.inlined_depth > 0;
		cr_assert_eq(f.line, want[i].line, "libc+0x%" PRIx64 ": %s:%d, addr2line %s:%d",
			     addrs[i], f.file, f.line, want[i].file, want[i].line);
		cr_assert_eq(f.inlined_depth, want[i].frames - 1, "libc+0x%" PRIx64, addrs[i]);
	}
	cr_assert_gt(compared, N / 2);
	cr_assert_gt(inlined, 0);
	free(addrs);
	free(want);
	sym_free(s);
	free(map);
}

/* Our symbol index follows libdwfl's rules: compare with dwfl_module_addrinfo. */
Test(symbolize, symbol_index_matches_libdwfl, .timeout = 120)
{
	struct live_map *map = live_map();
	const char *paths[2] = { libc_path(map), "/usr/bin/python3.11" };
	uint64_t biases[2] = { 0, 0 };
	for (size_t i = 0; i < map->n; i++)
		if (map->m[i].path == paths[0])
			biases[0] = map->m[i].bias;
	int checked = 0;
	for (int k = 0; k < 2; k++) {
		uint64_t lo, hi;
		int type;
		if (!paths[k] || file_xrange(paths[k], &lo, &hi, &type))
			continue;
		struct symbolizer *s = sym_new();
		struct sym_module m = { paths[k], biases[k], lo + biases[k], hi + biases[k], NULL, 0 };
		sym_add_module(s, &m);
		Dwfl_Callbacks cb = { .find_elf = dwfl_build_id_find_elf,
				      .find_debuginfo = dwfl_standard_find_debuginfo,
				      .section_address = dwfl_offline_section_address };
		Dwfl *d = dwfl_begin(&cb);
		Dwfl_Module *dm = dwfl_report_elf(d, "m", paths[k], -1, biases[k], true);
		cr_assert_not_null(dm);
		dwfl_report_end(d, NULL, NULL);
		for (int i = 0; i < 4000; i++) {
			uint64_t a = lo + biases[k] + rng() % (hi - lo);
			GElf_Off off;
			GElf_Sym sym;
			const char *raw = dwfl_module_addrinfo(dm, a, &off, &sym, NULL, NULL, NULL);
			struct sym_frame f;
			sym_resolve(s, a, &f);
			if (raw && f.func) {
				/* Names lose their ELF symbol version ("x@GLIBC_2.2.5"). */
				const char *at = strchr(raw, '@');
				char *base = at && at != raw ? strndup(raw, (size_t)(at - raw)) : strdup(raw);
				char *dem = sym_demangle(base);
				/* and a local symbol its cold part's mark ("f.cold",
				 * "f.cold.1", "f() [clone .cold]"): it is f */
				char *want = dem ? dem : base;
				if (GELF_ST_BIND(sym.st_info) == STB_LOCAL) {
					char *c = strstr(want, " [clone .cold]");
					if (c && !c[14])
						*c = 0;
					else if ((c = strstr(want, ".cold")) && c != want &&
						 (!c[5] || (c[5] == '.' && c[6] && strspn(c + 6, "0123456789") == strlen(c + 6))))
						*c = 0;
				}
				cr_assert_str_eq(f.func, want, "%s+0x%" PRIx64, paths[k], a - biases[k]);
				free(dem);
				free(base);
			} else if (raw) {
				/* Only a size-0 symbol may be refused (FDE says: another function). */
				cr_assert_eq(sym.st_size, 0, "%s+0x%" PRIx64 ": lost %s",
					     paths[k], a - biases[k], raw);
			} else if (f.func) {
				/* Only DWARF may name what the symbol table does not. */
				cr_assert_not_null(f.file, "%s+0x%" PRIx64 ": invented %s",
						   paths[k], a - biases[k], f.func);
			}
			checked++;
		}
		dwfl_end(d);
		sym_free(s);
	}
	cr_assert_gt(checked, 0);
	free(map);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 100k distinct addresses over libc and python3.11 (or libc alone). */
Test(symbolize, throughput, .timeout = 120)
{
	struct live_map *map = live_map();
	const char *paths[2] = { libc_path(map), "/usr/bin/python3.11" };
	uint64_t lo[2], hi[2], bias[2] = { 0x7f1200000000ull, 0 };
	int type, nmods = 0;
	struct symbolizer *s = sym_new();
	for (int k = 0; k < 2; k++) {
		if (!paths[k] || file_xrange(paths[k], &lo[k], &hi[k], &type))
			break;
		if (type == ET_DYN && !bias[k])
			bias[k] = 0x7f3400000000ull;
		struct sym_module m = { paths[k], bias[k], lo[k] + bias[k], hi[k] + bias[k], NULL, 0 };
		cr_assert_eq(sym_add_module(s, &m), 0);
		nmods++;
	}
	cr_assert_gt(nmods, 0);
	enum { N = 100000 };
	uint64_t *a = malloc(N * sizeof(*a));
	for (size_t i = 0; i < N; i++) { /* distinct: one per stride */
		int k = (int)(i % (size_t)nmods);
		uint64_t per = N / (uint64_t)nmods + 1, step = (hi[k] - lo[k]) / per;
		a[i] = bias[k] + lo[k] + (i / (size_t)nmods) * step + rng() % step;
	}
	size_t resolved = 0, withline = 0;
	double t0 = now_s();
	for (size_t i = 0; i < N; i++) {
		struct sym_frame f;
		cr_assert_eq(sym_resolve(s, a[i], &f), 0);
		resolved += (size_t)f.resolved;
		withline += f.line > 0;
	}
	double t1 = now_s();
	for (size_t i = 0; i < N; i++) {
		struct sym_frame f;
		sym_resolve(s, a[i], &f);
	}
	double t2 = now_s();
	fprintf(stderr, "symbolize: %d distinct addresses in %s%s: %.0f addresses/s "
		"(%zu named, %zu with line), cached %.0f/s\n",
		N, base_of(paths[0]), nmods > 1 ? " + python3.11" : "",
		N / (t1 - t0), resolved, withline, N / (t2 - t1));
	cr_assert_gt(resolved, N / 4);
	cr_assert_gt(N / (t1 - t0), 5000.0, "far below the measured ~500k/s");
	free(a);
	sym_free(s);
	free(map);
}

/* A stripped binary (Debian's gzip): addresses without a symbol are named
 * after the .eh_frame FDE that covers them, so one function is one name. */
Test(symbolize, stripped_functions_named_by_fde)
{
	const char *path = "/usr/bin/gzip";
	if (access(path, R_OK) != 0)
		cr_skip_test("no %s", path);
	struct cfi_range *fdes;
	size_t n;
	cr_assert_eq(cfi_fde_ranges(path, &fdes, &n), 0);
	cr_assert_gt(n, 50);
	struct symbolizer *s = sym_new();
	struct sym_module m = {path, 0, fdes[0].lo, fdes[n - 1].hi, NULL, 0};
	sym_add_module(s, &m);
	int checked = 0;
	for (size_t i = 0; i < n && checked < 20; i++) {
		if (fdes[i].hi - fdes[i].lo < 32)
			continue;
		struct sym_frame a, b;
		sym_resolve(s, fdes[i].lo + 3, &a);
		sym_resolve(s, fdes[i].hi - 2, &b);
		if (a.resolved || b.resolved)
			continue; /* an exported function: named by its symbol */
		char na[128], nb[128], want[128];
		sym_frame_name(&a, na, sizeof(na));
		sym_frame_name(&b, nb, sizeof(nb));
		snprintf(want, sizeof(want), "gzip+0x%" PRIx64, fdes[i].lo);
		cr_assert_str_eq(na, want);
		cr_assert_str_eq(nb, want, "two addresses of one function, one name");
		cr_assert_eq(a.module_off, fdes[i].lo + 3, "module_off stays the address's own");
		checked++;
	}
	cr_assert_gt(checked, 5);
	free(fdes);
	sym_free(s);
}

/* A file of text at a new path made from the template path. */
static void temp_file(char *path, const char *text)
{
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A perf map names addresses no module covers; of overlapping entries the
 * file's later one wins; malformed lines are skipped with one warning. */
Test(symbolize, perf_map_names_jit_code)
{
	char path[] = "/tmp/rhea-perfmap-XXXXXX";
	temp_file(path, "7f0000001000 100 JS:*hot app.js:1\n"
			"7f0000002000 40 LazyCompile:~cold app.js:9\n"
			"not a line\n"
			"7f0000001080 20 JS:*inner app.js:3\n"
			"7f0000003000 0 zero-sized\n");
	struct symbolizer *s = sym_new();
	struct sym_frame f;
	cr_assert_eq(sym_resolve(s, 0x7f0000001010, &f), 0); /* cached before the map */
	cr_assert_str_eq(f.module, "?");
	cr_assert_eq(sym_add_perf_map(s, path), 0);
	unlink(path);
	cr_assert_eq(sym_resolve(s, 0x7f0000001010, &f), 0);
	cr_assert_str_eq(f.func, "JS:*hot app.js:1");
	cr_assert_str_eq(f.module, "[jit]");
	cr_assert_eq(f.resolved, 1);
	cr_assert_eq(sym_resolve(s, 0x7f0000001090, &f), 0); /* inside both: the later line */
	cr_assert_str_eq(f.func, "JS:*inner app.js:3");
	cr_assert_eq(sym_resolve(s, 0x7f00000010a0, &f), 0); /* past inner, still in hot */
	cr_assert_str_eq(f.func, "JS:*hot app.js:1");
	cr_assert_eq(sym_resolve(s, 0x7f000000203f, &f), 0);
	cr_assert_str_eq(f.func, "LazyCompile:~cold app.js:9");
	cr_assert_eq(sym_resolve(s, 0x7f0000002040, &f), 0); /* one past its end */
	cr_assert_null(f.func);
	cr_assert_eq(sym_resolve(s, 0x7f0000003000, &f), 0);
	cr_assert_null(f.func);
	cr_assert(has_warning(s, "2 of 5 lines", NULL), "warnings: %zu", count_warnings(s));
	cr_assert_eq(sym_add_perf_map(s, "/nonexistent/perf-1.map"), -ENOENT);
	sym_free(s);
}

/* What a recording keeps of a perf map (cli/compact.c): the lines naming
 * code at one of its stacks' addresses, or ending right before one (a
 * return address), in the file's order; read back from that text, they
 * name those addresses as the whole file does. */
Test(symbolize, perf_map_lines_kept_name_the_same)
{
	char path[] = "/tmp/rhea-perfmap-XXXXXX";
	temp_file(path, "7f0000001000 100 JS:*hot app.js:1\n"
			"7f0000002000 40 LazyCompile:~cold app.js:9\n"
			"not a line\n"
			"7f0000001080 20 JS:*inner app.js:3\n"
			"7f0000005000 10 JS:*unused\n"
			"7f0000006000 10 JS:*ends-before\n");
	const uint64_t addrs[] = {0x401000, 0x7f0000001090, 0x7f000000200a, 0x7f0000006010, 0x7f0000009000};
	char *kept;
	size_t len, n;
	cr_assert_eq(sym_perf_map_keep(path, addrs, 5, &kept, &len, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(kept, "7f0000001000 100 JS:*hot app.js:1\n"
			       "7f0000002000 40 LazyCompile:~cold app.js:9\n"
			       "7f0000001080 20 JS:*inner app.js:3\n"
			       "7f0000006000 10 JS:*ends-before\n");
	cr_assert_eq(len, strlen(kept));
	struct symbolizer *whole = sym_new(), *part = sym_new();
	cr_assert_eq(sym_add_perf_map(whole, path), 0);
	cr_assert_eq(sym_add_perf_map_text(part, kept, len, "kept"), 0);
	const uint64_t look[] = {0x7f0000001090, 0x7f0000001010, 0x7f0000002009, 0x7f000000600f};
	for (int i = 0; i < 4; i++) {
		struct sym_frame a, b;
		cr_assert_eq(sym_resolve(whole, look[i], &a), 0);
		cr_assert_eq(sym_resolve(part, look[i], &b), 0);
		cr_assert_not_null(a.func);
		cr_assert_not_null(b.func, "%#lx unnamed from the kept lines", (unsigned long)look[i]);
		cr_assert_str_eq(a.func, b.func);
	}
	free(kept);
	/* no line names any of them: nothing kept */
	const uint64_t none[] = {0x10};
	cr_assert_eq(sym_perf_map_keep(path, none, 1, &kept, &len, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_null(kept);
	cr_assert_eq(sym_perf_map_keep("/nonexistent/perf-1.map", none, 1, &kept, &len, &n), -ENOENT);
	unlink(path);
	sym_free(whole);
	sym_free(part);
}

/* A process's map is /tmp/perf-PID.map when it was written since a second
 * before the recording began, or at any time while the process still
 * runs (rhea attach left it). */
Test(symbolize, perf_map_of_a_recording)
{
	const uint32_t pid = 3999998; /* (a pid unlikely to be in use) */
	char want[64], got[64];
	snprintf(want, sizeof(want), "/tmp/perf-%u.map", pid);
	unlink(want);
	cr_assert_eq(sym_perf_map_of(pid, 0, 0, got, sizeof(got)), 0);
	FILE *f = fopen(want, "w");
	cr_assert_not_null(f);
	fputs("7f0000001000 100 JS:*hot\n", f);
	fclose(f);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	cr_assert_eq(sym_perf_map_of(pid, ns - 5000000000ull, 0, got, sizeof(got)), 1);
	cr_assert_str_eq(got, want);
	cr_assert_eq(sym_perf_map_of(pid, ns + 500000000ull, 0, got, sizeof(got)), 1); /* within the second */
	cr_assert_eq(sym_perf_map_of(pid, ns + 5000000000ull, 0, got, sizeof(got)), 0); /* an older process's */
	cr_assert_eq(sym_perf_map_of(pid, ns + 5000000000ull, 1, got, sizeof(got)), 1);
	/* someone else's file (made for a pid to come): not the process's */
	if (geteuid() == 0) {
		cr_assert_eq(chown(want, 12345, 12345), 0);
		cr_assert_eq(sym_perf_map_of(pid, ns - 5000000000ull, 0, got, sizeof(got)), 0);
		cr_assert_eq(sym_perf_map_of(pid, ns - 5000000000ull, 1, got, sizeof(got)), 0); /* no such process */
	}
	unlink(want);
}

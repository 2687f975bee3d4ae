/*
 * test_cfi.c - agent/cfi.c on real binaries: libc, python3.11 (a non-PIE
 * executable), this test program, and small programs compiled here with
 * unusual CFI layouts (.debug_frame only, compressed, no .eh_frame_hdr).
 *
 * Ground truth comes from outside the table: function entry points (CFA is
 * rsp+8 there, by the x86-64 call convention), the PLT section's addresses
 * from the section headers, and libdw evaluated at sampled addresses one by
 * one (the table is built by stepping row to row; the oracle does not step).
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cfi.h"

#define PYTHON "/usr/bin/python3.11"

extern char _start[];

__attribute__((noinline, used)) static int cfi_probe(int x)
{
	volatile int a[4];
	a[x & 3] = x;
	return a[x & 3] * 3;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Load bias and file of the module holding addr. */
static uint64_t module_of(const void *addr, char *path, size_t len)
{
	Dl_info info;
	struct link_map *lm = NULL;

	cr_assert(dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm);
	snprintf(path, len, "%s", lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe");
	return lm->l_addr;
}

/* Look a section (sym == NULL) or a symbol (.symtab, then .dynsym) up in
 * the file at path: 1 and its address, or 0 if absent. */
static int elf_find(const char *path, const char *section, const char *sym, uint64_t *addr)
{
	int found = 0;
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	cr_assert(elf && elf_getshdrstrndx(elf, &shstrndx) == 0);
	for (int pass = 0; pass < 2 && !found; pass++) {
		while ((scn = elf_nextscn(elf, scn)) != NULL && !found) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh))
				continue;
			if (section) {
				const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
				if (name && !strcmp(name, section)) {
					*addr = sh.sh_addr;
					found = 1;
				}
				continue;
			}
			if (sh.sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB))
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym s;
				const char *name;
				if (gelf_getsym(d, (int)i, &s) && s.st_value &&
				    (name = elf_strptr(elf, sh.sh_link, s.st_name)) &&
				    !strcmp(name, sym)) {
					*addr = s.st_value;
					found = 1;
					break;
				}
			}
		}
		scn = NULL;
	}
	elf_end(elf);
	close(fd);
	return found;
}

/* Address of a section or symbol that must exist. */
static uint64_t elf_addr(const char *path, const char *section, const char *sym)
{
	uint64_t a = 0;
	cr_assert(elf_find(path, section, sym, &a), "%s: no %s", path, section ? section : sym);
	return a;
}

static void assert_entry(const struct cfi_table *t, uint64_t vaddr, const char *what)
{
	const struct cfi_row *row = cfi_lookup(t, vaddr);
	cr_assert(row, "%s (%#lx): no row", what, (unsigned long)vaddr);
	cr_assert_eq(row->kind, CFI_RSP, "%s: kind %d", what, row->kind);
	cr_assert_eq(row->cfa_off, 8, "%s: cfa_off %d", what, row->cfa_off);
	cr_assert_eq(row->rbp_off, 0, "%s: rbp_off %d", what, row->rbp_off);
}

/* Invariants every table has. */
static void assert_well_formed(const struct cfi_table *t)
{
	size_t bytes = sizeof(*t) + (size_t)t->n * sizeof(t->rows[0]);
	cr_assert_gt(t->n, 0);
	cr_assert_lt(t->lo, t->hi);
	cr_assert_leq(t->hi, UINT32_MAX);
	cr_assert_eq(t->rows[0].pc, t->lo);
	cr_assert_neq(t->rows[0].kind, CFI_NONE);
	cr_assert_geq(t->mapped_size, bytes);
	cr_assert_eq(t->mapped_size % (uint32_t)sysconf(_SC_PAGESIZE), 0);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct cfi_row *r = &t->rows[i];
		cr_assert_leq(r->kind, CFI_OUTERMOST);
		if (i == 0)
			continue;
		const struct cfi_row *p = &t->rows[i - 1];
		cr_assert_gt(r->pc, p->pc, "row %u not sorted", i);
		cr_assert(r->kind != p->kind || r->cfa_off != p->cfa_off ||
			      r->rbp_off != p->rbp_off,
			  "rows %u and %u not merged", i - 1, i);
		cr_assert_lt(r->pc, t->hi);
	}
}

static struct cfi_table *build_timed(const char *path, double *seconds)
{
	struct cfi_table *t = NULL;
	double t0 = now_s();
	int err = cfi_build(path, &t);
	*seconds = now_s() - t0;
	cr_assert_eq(err, 0, "cfi_build(%s) = %d", path, err);
	cr_assert(t);
	return t;
}

Test(cfi, libc)
{
	char libc[PATH_MAX];
	double s;
	uint64_t bias = module_of((const void *)(uintptr_t)qsort, libc, sizeof(libc));
	struct cfi_table *t = build_timed(libc, &s);

	assert_well_formed(t);
	cr_assert_gt(t->n_fde, 1000);
	cr_assert_gt(t->n, 10000);
	cr_assert_lt(t->n_unsupported, t->n / 100, "%u unsupported rows", t->n_unsupported);
	cr_assert_lt(s, 1.0, "libc table took %.3f s", s);
	cr_log_info("libc: %u rows, %u FDEs, %u bytes, %u unsupported, %.1f ms", t->n, t->n_fde,
		    t->mapped_size, t->n_unsupported, s * 1e3);

	assert_entry(t, (uint64_t)(uintptr_t)qsort - bias, "qsort");
	assert_entry(t, (uint64_t)(uintptr_t)malloc - bias, "malloc");
	assert_entry(t, (uint64_t)(uintptr_t)free - bias, "free");
	assert_entry(t, (uint64_t)(uintptr_t)fopen - bias, "fopen");
	assert_entry(t, (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "memcpy") - bias, "memcpy ifunc");

	/* Lazy PLT: the expression row (threshold 11), and PLT0 before it. */
	uint64_t plt = elf_addr(libc, ".plt", NULL);
	const struct cfi_row *r = cfi_lookup(t, plt + 16);
	cr_assert(r && r->kind == CFI_PLT && r->cfa_off == 11);
	cr_assert_eq(cfi_lookup(t, plt + 16 + 15), r);
	r = cfi_lookup(t, plt);
	cr_assert(r && r->kind == CFI_RSP && r->cfa_off == 16); /* after PLT0's push */
	cfi_free(t);
}

Test(cfi, python_non_pie)
{
	double s;
	struct cfi_table *t = build_timed(PYTHON, &s);

	assert_well_formed(t);
	cr_assert_geq(t->lo, 0x400000, "not the non-PIE python3.11? lo=%#lx",
		      (unsigned long)t->lo);
	cr_assert_gt(t->n, 20000);
	cr_assert_lt(s, 2.0, "python3.11 table took %.3f s", s);
	cr_log_info("python3.11: %u rows, %u FDEs, %u bytes, %u unsupported, %.1f ms", t->n,
		    t->n_fde, t->mapped_size, t->n_unsupported, s * 1e3);
	static const char *const fns[] = {"PyList_New", "PyObject_GetAttr", "Py_Initialize",
					  "_PyEval_EvalFrameDefault"};
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		assert_entry(t, elf_addr(PYTHON, NULL, fns[i]), fns[i]);
	const struct cfi_row *r = cfi_lookup(t, elf_addr(PYTHON, ".plt", NULL) + 16);
	cr_assert(r && r->kind == CFI_PLT);
	cr_assert_eq(cfi_lookup(t, t->lo - 1), NULL);
	cfi_free(t);
}

Test(cfi, this_program)
{
	char self[PATH_MAX];
	uint64_t bias = module_of((const void *)(uintptr_t)cfi_probe, self, sizeof(self));
	struct cfi_table *t = NULL;

	cr_assert_eq(cfi_build(self, &t), 0);
	assert_well_formed(t);
	assert_entry(t, (uint64_t)(uintptr_t)cfi_probe - bias, "cfi_probe");
	const struct cfi_row *r = cfi_lookup(t, (uint64_t)(uintptr_t)_start - bias);
	cr_assert(r && r->kind == CFI_OUTERMOST, "_start is not outermost");

	/* The same through a descriptor. */
	struct cfi_table *t2 = NULL;
	int fd = open(self, O_RDONLY);
	cr_assert_eq(cfi_build_fd(fd, &t2), 0);
	close(fd);
	cr_assert_eq(t2->n, t->n);
	cr_assert(!memcmp(t2->rows, t->rows, t->n * sizeof(t->rows[0])));
	cfi_free(t2);
	cfi_free(t);
}

Test(cfi, lookup_covers_every_address_once)
{
	char libc[PATH_MAX];
	struct cfi_table *t = NULL;

	module_of((const void *)(uintptr_t)qsort, libc, sizeof(libc));
	cr_assert_eq(cfi_build(libc, &t), 0);
	cr_assert_eq(cfi_lookup(NULL, t->lo), NULL);
	cr_assert_eq(cfi_lookup(t, 0), NULL);
	cr_assert_eq(cfi_lookup(t, t->lo - 1), NULL);
	cr_assert_eq(cfi_lookup(t, t->hi), NULL);
	cr_assert_eq(cfi_lookup(t, UINT64_MAX), NULL);
	cr_assert_eq(cfi_lookup(t, t->lo + (1ull << 32)), NULL);
	cr_assert_eq(cfi_lookup(t, t->hi - 1), &t->rows[t->n - 1]);
	uint32_t gaps = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t end = i + 1 < t->n ? t->rows[i + 1].pc : t->hi;
		cr_assert_eq(cfi_lookup(t, t->rows[i].pc), &t->rows[i]);
		cr_assert_eq(cfi_lookup(t, end - 1), &t->rows[i]);
		cr_assert_eq(cfi_lookup(t, t->rows[i].pc + (end - t->rows[i].pc) / 2), &t->rows[i]);
		gaps += t->rows[i].kind == CFI_NONE;
	}
	cr_assert_gt(gaps, 0, "no CFI_NONE gap between FDEs in libc?");
	cfi_free(t);
}

/* libdw's answer at one address, reduced the way the table should be. */
static struct cfi_row oracle(Dwarf_CFI *cfi, uint64_t a)
{
	struct cfi_row want = {0};
	Dwarf_Frame *f;
	Dwarf_Op mem[3], *ops;
	size_t n;
	Dwarf_Addr s, e;
	bool sig;

	if (dwarf_cfi_addrframe(cfi, a, &f) != 0)
		return want;
	int ra = dwarf_frame_info(f, &s, &e, &sig);
	if (ra == 16 && !sig && dwarf_frame_register(f, 16, mem, &ops, &n) == 0) {
		if (n == 0 && ops == mem) {
			want.kind = CFI_OUTERMOST;
		} else if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
			   (int64_t)ops[1].number == -8 && dwarf_frame_cfa(f, &ops, &n) == 0) {
			if (n == 1 && ops[0].atom == DW_OP_bregx &&
			    (ops[0].number == 7 || ops[0].number == 6)) {
				want.kind = ops[0].number == 7 ? CFI_RSP : CFI_RBP;
				want.cfa_off = (int32_t)ops[0].number2;
			} else if (n == 9 && ops[1].atom == DW_OP_breg16) {
				want.kind = CFI_PLT;
				want.cfa_off = ops[4].atom - DW_OP_lit0;
			}
			if (want.kind && dwarf_frame_register(f, 6, mem, &ops, &n) == 0) {
				if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa)
					want.rbp_off = (int16_t)ops[1].number;
				else if (!(n == 0 && ops == NULL))
					want = (struct cfi_row){0};
			}
		}
	}
	free(f);
	return want;
}

static void agree_with_libdw(const char *path, uint64_t step)
{
	struct cfi_table *t = NULL;
	uint64_t checked = 0, none = 0;

	cr_assert_eq(cfi_build(path, &t), 0);
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	cr_assert(cfi);
	for (uint64_t a = t->lo - 64; a < t->hi + 64; a += step) {
		const struct cfi_row *got = cfi_lookup(t, a);
		struct cfi_row want = oracle(cfi, a);
		if (a < t->lo || a >= t->hi) {
			cr_assert_eq(got, NULL);
			cr_assert_eq(want.kind, CFI_NONE, "%#lx: CFI outside the table",
				     (unsigned long)a);
			continue;
		}
		cr_assert(got);
		cr_assert(got->kind == want.kind && got->cfa_off == want.cfa_off &&
			      got->rbp_off == want.rbp_off,
			  "%s %#lx: table %d/%d/%d, libdw %d/%d/%d", path, (unsigned long)a,
			  got->kind, got->cfa_off, got->rbp_off, want.kind, want.cfa_off,
			  want.rbp_off);
		checked++;
		none += want.kind == CFI_NONE;
	}
	cr_assert_gt(checked, 1000);
	cr_assert_lt(none, checked / 2);
	dwarf_cfi_end(cfi);
	elf_end(elf);
	close(fd);
	cfi_free(t);
}

Test(cfi, agrees_with_libdw_address_by_address)
{
	char libc[PATH_MAX];

	module_of((const void *)(uintptr_t)qsort, libc, sizeof(libc));
	agree_with_libdw(libc, 3);
	agree_with_libdw(PYTHON, 17);
}

/* The mapping's permissions as /proc/self/maps shows them ("r--p"). */
static void perms_of(const void *p, char perms[5])
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	cr_assert(f);
	perms[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)p >= lo &&
		    (uintptr_t)p < hi)
			break;
		perms[0] = '\0';
	}
	fclose(f);
}

Test(cfi, table_is_read_only_and_unmapped_by_free)
{
	char libc[PATH_MAX], perms[5];
	struct cfi_table *t = NULL;

	module_of((const void *)(uintptr_t)qsort, libc, sizeof(libc));
	cr_assert_eq(cfi_build(libc, &t), 0);
	perms_of(t, perms);
	cr_assert_str_eq(perms, "r--p"); /* stray writes fault, even under ASan */
	perms_of((const char *)t + t->mapped_size - 1, perms);
	cr_assert_str_eq(perms, "r--p");
	cfi_free(t);
	unsigned char vec[1];
	cr_assert_eq(mincore(t, 1, vec), -1); /* unmapped */
	cr_assert_eq(errno, ENOMEM);
}

Test(cfi, errors)
{
	char path[] = "/tmp/rhea-cfi-XXXXXX", libc[PATH_MAX];
	struct cfi_table *t = (struct cfi_table *)1;
	uint8_t head[4096];

	cr_assert_eq(cfi_build("/nonexistent/libfoo.so", &t), -ENOENT);
	cr_assert_eq(t, NULL);
	cr_assert_eq(cfi_build_fd(-1, &t), -EBADF);
	cr_assert_eq(cfi_build("/tmp", &t), -EISDIR);

	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(cfi_build(path, &t), -ENOEXEC); /* empty */
	cr_assert_eq(write(fd, "#!/bin/sh\necho hello\n", 21), 21);
	cr_assert_eq(cfi_build(path, &t), -ENOEXEC); /* not ELF */

	/* The first page of libc: an ELF header pointing past the end. */
	module_of((const void *)(uintptr_t)qsort, libc, sizeof(libc));
	int lfd = open(libc, O_RDONLY);
	cr_assert_eq(read(lfd, head, sizeof(head)), (ssize_t)sizeof(head));
	close(lfd);
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(pwrite(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	cr_assert_eq(cfi_build(path, &t), -ENOEXEC);

	/* Another machine. */
	((Elf64_Ehdr *)head)->e_machine = EM_AARCH64;
	cr_assert_eq(pwrite(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	cr_assert_eq(cfi_build_fd(fd, &t), -ENOEXEC);
	close(fd);
	unlink(path);
	cr_assert_eq(t, NULL);
	cfi_free(NULL);
}

/* Directory of this source file, from the tree's root or from build/tests. */
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

/* Compile data/cfi_sample.c with extra flags, build its table, check that
 * sample_leaf (CFI in .debug_frame only when asked) is covered. */
static char sample_out[] = "/tmp/rhea-cfi-sample-XXXXXX";

static void sample_cleanup(void)
{
	unlink(sample_out); /* also when an assertion ended the test */
}

static void sample(const char *flags, int expect_debug_frame)
{
	char dir[PATH_MAX], cmd[2 * PATH_MAX + 256], *out = sample_out;
	struct cfi_table *t = NULL;

	source_dir(dir, sizeof(dir));
	int fd = mkstemp(out);
	cr_assert(fd >= 0);
	close(fd);
	atexit(sample_cleanup);
	snprintf(cmd, sizeof(cmd), "cc -O2 %s -o '%s' '%s/data/cfi_sample.c'", flags, out, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	uint64_t unused;
	cr_assert_eq(elf_find(out, ".debug_frame", NULL, &unused), expect_debug_frame, "%s", cmd);
	cr_assert_eq(cfi_build(out, &t), 0, "%s", cmd);
	assert_well_formed(t);
	uint64_t leaf = elf_addr(out, NULL, "sample_leaf");
	assert_entry(t, leaf, "sample_leaf");
	const struct cfi_row *r = cfi_lookup(t, leaf + 24); /* past the prologue */
	cr_assert(r && r->kind == CFI_RSP && r->cfa_off > 8, "%s: no frame inside sample_leaf",
		  flags);
	cr_assert(cfi_lookup(t, elf_addr(out, NULL, "_start"))->kind == CFI_OUTERMOST);
	cfi_free(t);
}

Test(cfi, debug_frame_only)
{
	sample("-g -fno-asynchronous-unwind-tables -fno-unwind-tables", 1);
}

Test(cfi, debug_frame_compressed)
{
	sample("-g -gz=zlib -fno-asynchronous-unwind-tables -fno-unwind-tables", 1);
}

Test(cfi, without_eh_frame_hdr_and_non_pie)
{
	sample("-no-pie -fno-pie -Wl,--no-eh-frame-hdr", 0);
}

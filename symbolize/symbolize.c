/*
 * symbolize.c - batch symbolization of recorded code addresses with libdwfl.
 *
 * What: after a recording, the CLI hands over the module map of the traced
 * process (path, load bias, executable range, build-id per module) and then
 * asks for every distinct address once.  Each address becomes a function
 * name (demangled), a source file and line when debug info exists, and
 * always a module name and an offset that `addr2line -e module` understands.
 *
 * Design:
 * - One Dwfl in offline mode (dwfl_standard_find_debuginfo,
 *   dwfl_offline_section_address).  Every file is reported once, with
 *   dwfl_report_elf at the recorded bias of its first mapping.  Addresses
 *   are translated through the ELF vaddr (addr - recorded bias + the bias
 *   libdwfl chose), which also covers an ET_EXEC whose base libdwfl
 *   ignores, a file mapped again elsewhere, and another process's mapping
 *   of it (sym_begin_process: converting a program's and its children's
 *   recordings together read libc's compressed debug info once, not once
 *   per process: 103 recordings of gzip and sh in 0.06 s instead of 3.7 s,
 *   the output byte for byte the same).
 * - Module lookup uses our own table sorted by start address, not
 *   dwfl_addrmodule: it also holds the modules libdwfl does not know (vdso,
 *   missing files, build-id mismatches, which all resolve to module+offset)
 *   and it copes with overlapping ranges (a library unloaded and another
 *   loaded at the same place during the recording; the module with the
 *   highest start, then the last added, wins).
 * - Symbol lookup uses a per-module index sorted by address, built once from
 *   dwfl_module_getsym_info, instead of dwfl_module_addrinfo: in elfutils
 *   0.188 that function scans the whole symbol table on every call (10,000
 *   symbols for libc with its debug file); measured at 12,000 lookups/s on
 *   libc + python3.11, against 400,000-550,000 addresses/s for this whole
 *   symbolizer, lines included.  libdwfl still decides which table is used
 *   (.symtab of the file or of its separate debug file, .dynsym otherwise,
 *   plus MiniDebugInfo) and the index keeps dwfl_module_addrinfo's rules
 *   (the tests compare both on libc and python3.11): a symbol with a size
 *   covers only [value, value + size); among covering symbols the closest
 *   start wins, then GLOBAL over WEAK over LOCAL, then the smaller size,
 *   then table order.
 * - Symbols of size 0 (assembly labels, hand-written functions) are the
 *   trap in stripped binaries: the nearest one below an address may be far
 *   away, past internal functions that the stripped table no longer names.
 *   As in libdwfl, a sizeless symbol is used only when no sized symbol
 *   covers the address, no symbol ends between it and the address, and it
 *   lies in the address's section.  On top of that, the .eh_frame FDE
 *   covering the address (present for nearly all compiled code, stripped or
 *   not) must not start above the symbol: if it does, the address is in
 *   another function that begins after the label, and it stays unresolved
 *   rather than misattributed (libdwfl alone names it after the label:
 *   tests/unit/data/sym_golden.c reproduces that).
 * - Lines: the CU comes from dwfl_module_addrdie, which in 0.188 knows only
 *   .debug_aranges; clang and rustc do not emit that section, so when it
 *   fails the CU is found in a table of the CUs' own ranges (built once per
 *   module).  The line is the CU line table's row (dwarf_getsrc_die).
 * - Inlined code: the reported file:line is the call site, in the function
 *   the symbol names, of the outermost inlined call (DW_AT_call_file/line),
 *   so func and file:line always agree, as the last line of `addr2line -i`;
 *   inlined_depth counts the inlined calls folded.  It comes from a per-CU
 *   index of subprogram and inlined-call ranges, built by one walk of the
 *   CU's DIE tree on its first lookup.  dwarf_getscopes per address was 10x
 *   slower (55,000 addresses/s) and does not lead to the caller (after an
 *   inlined instance it continues in the abstract origin).  When the symbol
 *   table has no name but DWARF has the enclosing subprogram, that is used.
 * - Caches: results by address (open addressing hash, the same addresses
 *   come back many times; per process), per file (struct dfile, for the
 *   symbolizer's life) the Dwfl_Module, the symbol index, the CU indexes
 *   and the FDE ranges, demangled names per mangled name.
 * - Names: __cxa_demangle for "_Z" names (C++, Rust legacy); anything it
 *   rejects (Rust v0 "_R" names) is shown as is.
 *
 * Limits:
 * - Addresses are resolved as given (the caller subtracts 1 from return
 *   addresses).  One frame per address: inlined frames are not expanded.
 * - A module whose file is missing, unreadable or has another build-id than
 *   recorded is shown as module+offset; a warning says so.  Files are not
 *   searched by build-id elsewhere (no /usr/lib/debug/.build-id/xx/yyy
 *   executables, no debuginfod for the binary itself).
 * - The vdso: a recording's is read from this process's own, when its
 *   build-id is the recorded one (the same kernel: a report on the machine
 *   that recorded); else "[vdso]+0x..".
 * - debuginfod: see symbolize.h.  Not thread-safe; no global state.
 */
#include "symbolize.h"
#include "cfi.h"
#include "vec.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * __cxa_demangle comes from libstdc++, loaded the first time a C++ name
 * needs it, not linked: libstdc++ and its start-up (locale, iostreams)
 * were a third of the CLI's start, paid by every `rhea record` for a
 * function only the report and the converters call.  Without libstdc++
 * names stay mangled.
 */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn demangler(void)
{
	static demangle_fn fn;
	static int tried;
	if (!tried) {
		tried = 1;
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			fn = (demangle_fn)dlsym(h, "__cxa_demangle");
	}
	return fn;
}

#define MAX_BUILD_ID 64

/* One entry of a module's symbol index. */
struct ksym {
	uint64_t lo;     /* start, in Dwfl addresses */
	uint64_t size;   /* 0: sizeless */
	uint64_t secend; /* sizeless only: end of its section, Dwfl addresses */
	const char *name;
	uint32_t order;  /* dwfl's search order: globals first, then locals */
	uint8_t bind;    /* 3 GLOBAL, 2 WEAK, 1 other */
};

struct symidx {
	struct ksym *v;
	uint64_t *maxend; /* maxend[i] = max(v[0..i].lo + size) */
	size_t n;
	bool built;
};

/* A file as libdwfl opened it, and what is built from it on demand: one per
 * path for the symbolizer's life, whatever the processes that mapped it
 * (sym_begin_process) and wherever they did (addresses are translated). */
struct dfile {
	char *path;       /* owned copy */
	Dwfl_Module *dm;  /* as reported to libdwfl; NULL: could not be opened */
	char *err;        /* why not, when it could not */
	struct symidx idx;
	struct cuidx *cus; /* hash by CU offset */
	size_t ncus, cucap;
	struct curange *cur; /* CUs by their ranges, see cu_by_ranges */
	size_t ncur;
	uint64_t cur_bias;
	bool cur_built;
	struct cfi_range *fdes; /* functions by .eh_frame, for stripped code */
	size_t nfde;
	bool fdes_loaded;
};

/* A mapping of the current process. */
struct mod {
	char *path;       /* owned copy */
	const char *name; /* basename of path, or a static string */
	uint64_t bias, lo, hi;
	struct dfile *d;  /* NULL for the vdso */
	Dwfl_Module *dm;  /* d->dm when usable (build-id matches); NULL: shown as module+offset */
	uint64_t dwbias;  /* Dwfl address = ELF vaddr + dwbias */
	size_t seq;       /* order of addition */
};

struct curange {
	uint64_t lo, hi; /* DWARF addresses */
	Dwarf_Die *cu;   /* owned by libdwfl */
};

struct entry {
	uint64_t addr;
	bool used;
	struct sym_frame f;
};

struct dataname {
	uint64_t addr;
	char *name; /* NULL: none */
	bool used;
};

struct dmentry {
	const char *key; /* mangled name, pointer into ELF string data */
	char *val;       /* demangled, NULL when demangling failed */
};

/* A function of JIT code, from a perf map: [lo, hi) is name. */
struct jitsym {
	uint64_t lo, hi;
	char *name;
	size_t line; /* in the file: a later line wins where two overlap */
};

struct symbolizer {
	Dwfl_Callbacks cb; /* must outlive dwfl */
	Dwfl *dwfl;
	bool reporting;    /* modules reported since the last dwfl_report_end */

	struct mod *mods;
	size_t nmods, capmods;
	struct dfile **files; /* every file opened, for the symbolizer's life */
	size_t nfiles, capfiles;
	uint64_t *maxhi;   /* prefix max of mods[].hi, valid when sorted */
	bool sorted;

	struct entry *tab; /* address cache, capacity a power of two */
	size_t tabcap, tabn;

	struct dmentry *dmtab;
	size_t dmcap, dmn;

	struct dataname *dntab; /* sym_data_name's answers by address (power of two) */
	size_t dncap, dnn;

	char **warn;
	size_t nwarn, capwarn;

	size_t lookups, hits;

	struct jitsym *jit; /* from a perf map, sorted by lo (sym_add_perf_map) */
	size_t njit;

	char *root; /* sym_set_root: module files are looked for under it first */
	int rootfd; /* its O_PATH descriptor, -1 without one */
};

static char *default_root; /* sym_set_default_root: every new symbolizer's */

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Keep a warning once per distinct text.  Allocation failure drops it. */
static void add_warning(struct symbolizer *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_warning(struct symbolizer *s, const char *fmt, ...)
{
	char *w;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&w, fmt, ap);
	va_end(ap);
	if (r < 0)
		return;
	for (size_t i = 0; i < s->nwarn; i++) {
		if (!strcmp(s->warn[i], w)) {
			free(w);
			return;
		}
	}
	if (vec_grow((void **)&s->warn, &s->capwarn, s->nwarn + 1, sizeof(*s->warn))) {
		free(w);
		return;
	}
	s->warn[s->nwarn++] = w;
}

struct symbolizer *sym_new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = NULL; /* default: ":.debug:/usr/lib/debug" */
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->dwfl) {
		free(s);
		return NULL;
	}
	s->sorted = true;
	s->rootfd = -1;
	if (default_root && sym_set_root(s, default_root) != 0)
		add_warning(s, "%s: cannot use it as the files' root (%s)", default_root, strerror(errno));
	return s;
}

int sym_set_root(struct symbolizer *s, const char *dir)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *copy = fd >= 0 ? strdup(dir) : NULL;
	if (!copy) {
		int e = fd >= 0 ? ENOMEM : errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		return -e;
	}
	if (s->rootfd >= 0)
		close(s->rootfd);
	free(s->root);
	s->root = copy;
	s->rootfd = fd;
	return 0;
}

int sym_set_default_root(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	char *copy = strdup(dir);
	if (!copy)
		return -ENOMEM;
	free(default_root);
	default_root = copy;
	return 0;
}

/*
 * The module file path under the symbolizer's root, when there is one and
 * it holds a file of the recorded build-id (any file when none was
 * recorded): its descriptor, name (root + path) into name; else -1.  The
 * path is resolved inside the root (an absolute symbolic link in a
 * container's root stays in it).
 */
int sym_open_in_root(int rootfd, const char *root, const char *path)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) { /* before Linux 5.6 */
		char full[PATH_MAX + 64];
		if ((size_t)snprintf(full, sizeof(full), "%s%s", root, path) >= sizeof(full)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		fd = open(full, O_RDONLY | O_CLOEXEC);
	}
	return fd;
}

static int rooted_file(struct symbolizer *s, const struct sym_module *m, char *name, size_t cap)
{
	if (s->rootfd < 0 || m->path[0] != '/' ||
	    (size_t)snprintf(name, cap, "%s%s", s->root, m->path) >= cap)
		return -1;
	int fd = sym_open_in_root(s->rootfd, s->root, m->path);
	if (fd < 0 || !m->build_id_len)
		return fd;
	unsigned char id[MAX_BUILD_ID];
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t len = e ? sym_elf_build_id(e, id, sizeof(id), NULL) : 0;
	if (e)
		elf_end(e);
	if (len == m->build_id_len && memcmp(id, m->build_id, len) == 0)
		return fd;
	close(fd);
	add_warning(s, "%s: build-id differs from the recording: not used (the file at %s instead)", name, m->path);
	return -1;
}

static void clear_cache(struct symbolizer *s)
{
	if (s->tabn) {
		memset(s->tab, 0, s->tabcap * sizeof(*s->tab));
		s->tabn = 0;
	}
	for (size_t i = 0; i < s->dncap; i++)
		free(s->dntab[i].name);
	if (s->dnn)
		memset(s->dntab, 0, s->dncap * sizeof(*s->dntab));
	s->dnn = 0;
}

static bool is_vdso(const char *path)
{
	return !strcmp(path, "[vdso]") || !strcmp(path, "linux-vdso.so.1") ||
	       !strcmp(path, "linux-vdso.so");
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* The file at path, opened (reported to libdwfl at bias) the first time it
 * is asked for; NULL when out of memory.  A file that cannot be opened is
 * kept too (dm NULL), so that it is tried and warned about once. */
static struct dfile *file_of(struct symbolizer *s, const char *path, uint64_t bias, int fd)
{
	for (size_t i = 0; i < s->nfiles; i++)
		if (!strcmp(s->files[i]->path, path)) {
			if (fd >= 0)
				close(fd);
			return s->files[i];
		}
	struct dfile *d = NULL;
	if (vec_grow((void **)&s->files, &s->capfiles, s->nfiles + 1, sizeof(*s->files)) ||
	    !(d = calloc(1, sizeof(*d))) || !(d->path = strdup(path))) {
		free(d);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!s->reporting) {
		dwfl_report_begin_add(s->dwfl);
		s->reporting = true;
	}
	/* ET_DYN with add_p_vaddr: base is the load bias.  ET_EXEC: ignored.
	 * (fd, when given, is libdwfl's once it succeeds) */
	d->dm = dwfl_report_elf(s->dwfl, d->path, d->path, fd, bias, true);
	if (!d->dm && fd >= 0)
		close(fd);
	if (!d->dm)
		d->err = strdup(dwfl_errmsg(-1));
	s->files[s->nfiles++] = d;
	return d;
}

/* Whether a perf map's names (a recording's code_names) cover some of
 * md's recorded range: then resolve names its addresses from them when its
 * file is unusable. */
static bool named_by_map(const struct symbolizer *s, const struct mod *md)
{
	for (size_t i = 0; i < s->njit; i++)
		if (s->jit[i].lo < md->hi && s->jit[i].hi > md->lo)
			return true;
	return false;
}

/*
 * md's file, as libdwfl opened it (file_of), if its build-id is the
 * recorded one.  NULL when unusable.
 */
static Dwfl_Module *open_module(struct symbolizer *s, struct mod *md, const struct sym_module *m, const char *file,
			       int fd)
{
	md->d = file_of(s, file, m->bias, fd);
	Dwfl_Module *dm = md->d ? md->d->dm : NULL;
	const char *then = named_by_map(s, md) ? "its functions are named from the names the recording kept"
					       : "its frames are shown as module+offset";
	if (!dm) {
		if (md->d)
			add_warning(s, "%s: cannot open (%s); %s", file, md->d->err ? md->d->err : "?", then);
		return NULL;
	}
	if (m->build_id_len) {
		const unsigned char *bits = NULL;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(dm, &bits, &vaddr);
		if (n <= 0 || (size_t)n != m->build_id_len ||
		    memcmp(bits, m->build_id, m->build_id_len)) {
			add_warning(s, "%s: build-id differs from the recording: binary changed since recording; %s",
				    md->path, then);
			return NULL;
		}
	}
	Dwarf_Addr bias = 0;
	if (!dwfl_module_getelf(dm, &bias)) {
		add_warning(s, "%s: cannot read ELF (%s); %s", md->path, dwfl_errmsg(-1), then);
		return NULL;
	}
	md->dwbias = bias;
	if (md->hi <= md->lo) {
		/* No range recorded: take the whole module from libdwfl. */
		Dwarf_Addr start, end;
		dwfl_module_info(dm, NULL, &start, &end, NULL, NULL, NULL, NULL);
		md->lo = start - bias + md->bias;
		md->hi = end - bias + md->bias;
	}
	return dm;
}

size_t sym_elf_build_id(void *elf, unsigned char *id, size_t cap, uint64_t *vaddr)
{
	Elf *e = elf;
	size_t nph = 0;
	if (!e || elf_getphdrnum(e, &nph) != 0)
		return 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		GElf_Nhdr nh;
		size_t off = 0, name, desc;
		while (d && (off = gelf_getnote(d, off, &nh, &name, &desc)) > 0)
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp((const char *)d->d_buf + name, "GNU", 4) == 0 && nh.n_descsz <= cap) {
				memcpy(id, (const char *)d->d_buf + desc, nh.n_descsz);
				if (vaddr)
					*vaddr = ph.p_vaddr + desc;
				return nh.n_descsz;
			}
	}
	return 0;
}

/*
 * This process's vDSO as a file libdwfl can open (a memfd, through
 * /proc/self/fd), and its build-id; NULL when there is none.  Made once:
 * the vDSO is the kernel's, the same for every process of this boot.
 */
static const char *own_vdso(const unsigned char **bid, size_t *bidlen)
{
	static int done;
	static char path[64];
	static unsigned char id[64];
	static size_t idlen;
	if (!done) {
		done = 1;
		const unsigned char *img = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
		size_t size = eh ? eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize : 0;
		Elf *e = NULL;
		if (eh && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && size > 0 && size <= (1u << 20) &&
		    elf_version(EV_CURRENT) != EV_NONE && (e = elf_memory((char *)img, size)) != NULL) {
			idlen = sym_elf_build_id(e, id, sizeof(id), NULL);
			elf_end(e);
		}
		int fd = idlen ? memfd_create("rhea-own-vdso", 0) : -1;
		if (fd >= 0 && write(fd, img, size) == (ssize_t)size)
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		else if (fd >= 0)
			close(fd);
	}
	*bid = id;
	*bidlen = idlen;
	return path[0] ? path : NULL;
}

int sym_add_module(struct symbolizer *s, const struct sym_module *m)
{
	if (!s || !m || !m->path || (m->build_id_len && !m->build_id) ||
	    m->build_id_len > MAX_BUILD_ID)
		return -EINVAL;
	if (vec_grow((void **)&s->mods, &s->capmods, s->nmods + 1, sizeof(*s->mods)))
		return -ENOMEM;
	struct mod *md = &s->mods[s->nmods];
	memset(md, 0, sizeof(*md));
	md->path = strdup(m->path);
	if (!md->path)
		return -ENOMEM;
	md->bias = m->bias;
	md->lo = m->lo;
	md->hi = m->hi;
	md->seq = s->nmods;
	if (is_vdso(m->path))
		md->name = "[vdso]";
	else if (!*base_name(m->path))
		md->name = "[anon]";
	else
		md->name = base_name(md->path);
	const unsigned char *id;
	size_t idlen;
	const char *vdso = is_vdso(m->path) && m->build_id_len ? own_vdso(&id, &idlen) : NULL;
	char rooted[PATH_MAX];
	int fd = is_vdso(m->path) ? -1 : rooted_file(s, m, rooted, sizeof(rooted));
	if (fd >= 0)
		md->dm = open_module(s, md, m, rooted, fd);
	else if (!is_vdso(m->path))
		md->dm = open_module(s, md, m, md->path, -1);
	else if (vdso && idlen == m->build_id_len && memcmp(id, m->build_id, idlen) == 0)
		md->dm = open_module(s, md, m, vdso, -1); /* the kernel that recorded */
	s->nmods++;
	s->sorted = false;
	clear_cache(s);
	return 0;
}

void sym_begin_process(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++)
		free(s->mods[i].path);
	s->nmods = 0;
	s->sorted = false;
	for (size_t i = 0; i < s->njit; i++)
		free(s->jit[i].name);
	free(s->jit);
	s->jit = NULL;
	s->njit = 0;
	clear_cache(s);
}

static int cmp_mod(const void *a, const void *b)
{
	const struct mod *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int sort_mods(struct symbolizer *s)
{
	uint64_t *mh = realloc(s->maxhi, (s->nmods ? s->nmods : 1) * sizeof(*mh));
	if (!mh)
		return -ENOMEM;
	s->maxhi = mh;
	if (s->nmods > 1)
		vec_sort(s->mods, s->nmods, sizeof(*s->mods), cmp_mod);
	uint64_t m = 0;
	for (size_t i = 0; i < s->nmods; i++) {
		if (s->mods[i].hi > m)
			m = s->mods[i].hi;
		mh[i] = m;
	}
	s->sorted = true;
	return 0;
}

/* The covering module with the highest start (then the last added), or NULL. */
static struct mod *find_mod(struct symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nmods;
	while (lo < hi) { /* first module with lo > addr */
		size_t mid = lo + (hi - lo) / 2;
		if (s->mods[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j-- > 0;) {
		if (s->maxhi[j] <= addr)
			break;
		if (addr < s->mods[j].hi)
			return &s->mods[j];
	}
	return NULL;
}

static uint8_t bind_rank(unsigned char info)
{
	switch (GELF_ST_BIND(info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	default:
		return 1;
	}
}

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Build md's sorted symbol index from whatever table libdwfl selected. */
static int build_index(struct mod *md)
{
	struct symidx *ix = &md->d->idx;
	ix->built = true;
	int n = dwfl_module_getsymtab(md->dm);
	if (n <= 1)
		return 0;
	int first_global = dwfl_module_getsymtab_first_global(md->dm);
	if (first_global < 0)
		first_global = 0;
	ix->v = malloc((size_t)n * sizeof(*ix->v));
	ix->maxend = malloc((size_t)n * sizeof(*ix->maxend));
	if (!ix->v || !ix->maxend) {
		free(ix->v);
		free(ix->maxend);
		ix->v = NULL;
		ix->maxend = NULL;
		return -ENOMEM;
	}
	size_t k = 0;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr val;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name = dwfl_module_getsym_info(md->dm, i, &sym, &val,
							   &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF ||
		    type == STT_SECTION || type == STT_FILE || type == STT_TLS)
			continue;
		struct ksym *e = &ix->v[k];
		e->lo = val;
		e->size = sym.st_size;
		e->name = name;
		e->bind = bind_rank(sym.st_info);
		e->order = i >= first_global ? (uint32_t)(i - first_global)
					     : (uint32_t)(n + i);
		e->secend = val + 1; /* absolute and odd symbols: exact match only */
		if (!e->size && shndx != SHN_UNDEF && shndx < SHN_LORESERVE && elf) {
			GElf_Shdr shm, *sh = gelf_getshdr(elf_getscn(elf, shndx), &shm);
			uint64_t delta = val - sym.st_value;
			if (sh && sym.st_value >= sh->sh_addr &&
			    sym.st_value < sh->sh_addr + sh->sh_size)
				e->secend = sh->sh_addr + sh->sh_size + delta;
		}
		k++;
	}
	if (k > 1)
		vec_sort(ix->v, k, sizeof(*ix->v), cmp_ksym);
	uint64_t m = 0;
	for (size_t i = 0; i < k; i++) {
		if (ix->v[i].lo + ix->v[i].size > m)
			m = ix->v[i].lo + ix->v[i].size;
		ix->maxend[i] = m;
	}
	ix->n = k;
	return 0;
}

static bool better(const struct ksym *a, const struct ksym *b)
{
	if (!b)
		return true;
	if (a->lo != b->lo)
		return a->lo > b->lo;
	if (a->bind != b->bind)
		return a->bind > b->bind;
	if (a->size != b->size)
		return a->size < b->size;
	return a->order < b->order;
}

/* Does the FDE covering a (if any) start at or below the label at lo? */
static bool fde_allows(Dwfl_Module *dm, uint64_t a, uint64_t lo)
{
	Dwarf_Addr cbias = 0;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi(dm, &cbias);
	if (!cfi)
		cfi = dwfl_module_dwarf_cfi(dm, &cbias);
	if (!cfi)
		return true;
	Dwarf_Frame *fr = NULL;
	if (dwarf_cfi_addrframe(cfi, a - cbias, &fr) != 0)
		return true; /* no FDE: hand-written code without CFI */
	Dwarf_Addr start = 0, end = 0;
	bool ok = true;
	if (dwarf_frame_info(fr, &start, &end, NULL) >= 0)
		ok = start + cbias <= lo;
	free(fr);
	return ok;
}

/* The symbol a (Dwfl address) belongs to in md, or NULL. */
static const struct ksym *lookup_sym(struct mod *md, uint64_t a)
{
	struct symidx *ix = &md->d->idx;
	if (!ix->built)
		build_index(md);
	size_t lo = 0, hi = ix->n;
	while (lo < hi) { /* first symbol with lo > a */
		size_t mid = lo + (hi - lo) / 2;
		if (ix->v[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	size_t top = lo - 1;
	const struct ksym *best = NULL;
	for (size_t j = top + 1; j-- > 0;) {
		const struct ksym *e = &ix->v[j];
		if (ix->maxend[j] <= a || (best && e->lo < best->lo))
			break;
		if (e->size && a - e->lo < e->size && better(e, best))
			best = e;
	}
	if (best)
		return best;
	/*
	 * No sized symbol covers a.  A sizeless one may, if nothing ends above
	 * it before a (so it is the last thing that starts below a), it is in
	 * a's section, and a's FDE does not start after it.
	 */
	uint64_t label = ix->maxend[top];
	for (size_t j = top + 1; j-- > 0 && ix->v[j].lo == label;) {
		const struct ksym *e = &ix->v[j];
		if (!e->size && a < e->secend && better(e, best))
			best = e;
	}
	if (best && best->lo != a && !fde_allows(md->dm, a, best->lo))
		best = NULL;
	return best;
}

/*
 * The length of name without the mark of the cold part GCC splits off a
 * function (-freorder-blocks-and-partition, on at -O2): "work.cold",
 * "work.cold.3", demangled "worker(int) [clone .cold]".  That part runs in
 * the function's own frame (it is jumped to, not called), so it is the
 * function: named apart, a C++ function's exception path or a C function's
 * error path made a second function that the first one's inclusive time
 * left out (a loop whose work was all on its cold path: 0.9 ms of 507).
 */
static size_t without_cold(const char *name)
{
	size_t n = strlen(name);
	static const char clone[] = " [clone .cold]";
	if (n > sizeof(clone) - 1 && strcmp(name + n - (sizeof(clone) - 1), clone) == 0)
		return n - (sizeof(clone) - 1);
	const char *c = strstr(name, ".cold");
	if (!c || c == name)
		return n;
	const char *p = c + 5;
	if (*p == '.' && p[1]) /* .cold.N */
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	return *p ? n : (size_t)(c - name);
}

/*
 * A name for people: without the ELF symbol version that some symbol tables
 * spell into the name ("pthread_create@GLIBC_2.2.5", "__libc_start_main@@
 * GLIBC_2.34": glibc's .symtab has both forms, which would otherwise split
 * one function in two), demangled, without a cold part's mark (above) when
 * the symbol is local, as GCC makes a cold part's (a Go function may be
 * named "pkg.cold", a global one).  malloc'd, NULL when name is fine.
 */
static char *clean_name(const char *name, int local)
{
	const char *at = strchr(name, '@');
	char *base = at && at != name ? strndup(name, (size_t)(at - name)) : NULL;
	char *d = sym_demangle(base ? base : name);
	if (d)
		free(base);
	else
		d = base;
	const char *is = d ? d : name;
	size_t n = local ? without_cold(is) : strlen(is);
	if (is[n]) {
		char *cut = strndup(is, n);
		if (cut) {
			free(d);
			d = cut;
		}
	}
	return d;
}

/* Clean form of name (cached per name pointer: a symbol's, which is local
 * or not for good), or name itself. */
static const char *demangled(struct symbolizer *s, const char *name, int local)
{
	if ((name[0] != '_' || name[1] != 'Z') && !strchr(name, '@') && !(local && strstr(name, ".cold")))
		return name;
	if (s->dmn * 2 >= s->dmcap) {
		size_t ncap = s->dmcap ? s->dmcap * 2 : 256;
		struct dmentry *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return name;
		for (size_t i = 0; i < s->dmcap; i++) {
			if (!s->dmtab[i].key)
				continue;
			size_t h = hash64((uintptr_t)s->dmtab[i].key) & (ncap - 1);
			while (nt[h].key)
				h = (h + 1) & (ncap - 1);
			nt[h] = s->dmtab[i];
		}
		free(s->dmtab);
		s->dmtab = nt;
		s->dmcap = ncap;
	}
	size_t h = hash64((uintptr_t)name) & (s->dmcap - 1);
	while (s->dmtab[h].key) {
		if (s->dmtab[h].key == name)
			return s->dmtab[h].val ? s->dmtab[h].val : name;
		h = (h + 1) & (s->dmcap - 1);
	}
	s->dmtab[h].key = name;
	s->dmtab[h].val = clean_name(name, local);
	s->dmn++;
	return s->dmtab[h].val ? s->dmtab[h].val : name;
}

char *sym_demangle(const char *name)
{
	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	demangle_fn dm = demangler();
	if (!dm)
		return NULL;
	int status = -1;
	char *d = dm(name, NULL, NULL, &status);
	if (status != 0) {
		free(d);
		return NULL;
	}
	return d;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &at));
	return n;
}

/* Ranges of one subprogram or inlined call, from a CU's DIE tree. */
struct irange {
	uint64_t lo, hi;  /* DWARF addresses */
	const char *name; /* subprogram name (depth 0) */
	const char *file; /* call site (depth > 0) */
	int line;
	int depth;        /* 0: subprogram; n: n-th nested inlined call */
};

/* Per-CU index of irange, built on the CU's first lookup. */
struct cuidx {
	Dwarf_Off key; /* CU DIE offset; 0: empty slot */
	struct irange *v;
	uint64_t *maxend;
	size_t n, cap;
};

struct walk {
	struct cuidx *ci;
	Dwarf_Files *files;
	size_t nfiles;
	int err;
};

static void add_ranges(struct walk *w, Dwarf_Die *die, int depth,
		       const char *name, const char *file, int line)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		if (end <= start)
			continue;
		struct cuidx *ci = w->ci;
		if (vec_grow((void **)&ci->v, &ci->cap, ci->n + 1, sizeof(*ci->v))) {
			w->err = -ENOMEM;
			return;
		}
		ci->v[ci->n++] = (struct irange){ start, end, name, file, line, depth };
	}
}

/*
 * Collect subprograms and inlined calls under parent.  Only scopes that can
 * hold code are entered (namespaces for clang's C++ output, lexical blocks),
 * not types: libc's DWARF has 236,000 struct members and 8,000 inlined calls.
 */
static void walk_dies(struct walk *w, Dwarf_Die *parent, int depth)
{
	Dwarf_Die c;
	if (dwarf_child(parent, &c) != 0)
		return;
	do {
		switch (dwarf_tag(&c)) {
		case DW_TAG_subprogram:
			add_ranges(w, &c, 0, die_name(&c), NULL, 0);
			walk_dies(w, &c, 0);
			break;
		case DW_TAG_inlined_subroutine: {
			Dwarf_Attribute at;
			Dwarf_Word fidx = 0, cline = 0;
			const char *file = NULL;
			if (dwarf_formudata(dwarf_attr(&c, DW_AT_call_file, &at), &fidx) == 0 &&
			    w->files && fidx < w->nfiles)
				file = dwarf_filesrc(w->files, fidx, NULL, NULL);
			if (dwarf_formudata(dwarf_attr(&c, DW_AT_call_line, &at), &cline) != 0)
				cline = 0;
			add_ranges(w, &c, depth + 1, NULL, file, (int)cline);
			walk_dies(w, &c, depth + 1);
			break;
		}
		case DW_TAG_lexical_block:
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
			walk_dies(w, &c, depth);
			break;
		default:
			break;
		}
	} while (!w->err && dwarf_siblingof(&c, &c) == 0);
}

static int cmp_irange(const void *a, const void *b)
{
	const struct irange *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->depth - y->depth;
}

/* The index of cu in md, built on first use; NULL when out of memory. */
static struct cuidx *cu_index(struct mod *md, Dwarf_Die *cu)
{
	Dwarf_Off key = dwarf_dieoffset(cu) + 1; /* + 1: 0 marks empty slots */
	if (md->d->ncus * 2 >= md->d->cucap) {
		size_t ncap = md->d->cucap ? md->d->cucap * 2 : 64;
		struct cuidx *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < md->d->cucap; i++) {
			if (!md->d->cus[i].key)
				continue;
			size_t h = hash64(md->d->cus[i].key) & (ncap - 1);
			while (nt[h].key)
				h = (h + 1) & (ncap - 1);
			nt[h] = md->d->cus[i];
		}
		free(md->d->cus);
		md->d->cus = nt;
		md->d->cucap = ncap;
	}
	size_t h = hash64(key) & (md->d->cucap - 1);
	while (md->d->cus[h].key) {
		if (md->d->cus[h].key == key)
			return &md->d->cus[h];
		h = (h + 1) & (md->d->cucap - 1);
	}
	struct cuidx *ci = &md->d->cus[h];
	ci->key = key;
	md->d->ncus++;
	struct walk w = { .ci = ci };
	if (dwarf_getsrcfiles(cu, &w.files, &w.nfiles) != 0)
		w.files = NULL;
	walk_dies(&w, cu, 0);
	if (ci->n > 1)
		vec_sort(ci->v, ci->n, sizeof(*ci->v), cmp_irange);
	ci->maxend = ci->n ? malloc(ci->n * sizeof(*ci->maxend)) : NULL;
	if (w.err || (ci->n && !ci->maxend)) {
		free(ci->v);
		free(ci->maxend);
		ci->v = NULL;
		ci->maxend = NULL;
		ci->n = ci->cap = 0; /* keep the slot: no inline info for this CU */
		return ci;
	}
	uint64_t m = 0;
	for (size_t i = 0; i < ci->n; i++) {
		if (ci->v[i].hi > m)
			m = ci->v[i].hi;
		ci->maxend[i] = m;
	}
	return ci;
}

static int cmp_curange(const void *a, const void *b)
{
	const struct curange *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * The CU covering a (Dwfl address) by the CUs' own ranges.  libdwfl 0.188
 * finds CUs through .debug_aranges only, which clang and rustc do not emit:
 * without this, nothing they build would get a line.  The table is built
 * on the first address libdwfl cannot place, once per module.
 */
static Dwarf_Die *cu_by_ranges(struct mod *md, uint64_t a, Dwarf_Addr *dbias)
{
	if (!md->d->cur_built) {
		md->d->cur_built = true;
		Dwarf_Die *cu = NULL;
		Dwarf_Addr b = 0;
		size_t cap = 0;
		while ((cu = dwfl_module_nextcu(md->dm, cu, &b)) != NULL) {
			Dwarf_Addr base, start, end;
			ptrdiff_t off = 0;
			md->d->cur_bias = b;
			while ((off = dwarf_ranges(cu, off, &base, &start, &end)) > 0) {
				if (end <= start)
					continue;
				if (vec_grow((void **)&md->d->cur, &cap, md->d->ncur + 1, sizeof(*md->d->cur)))
					goto done;
				md->d->cur[md->d->ncur++] = (struct curange){ start, end, cu };
			}
		}
	done:
		if (md->d->ncur > 1)
			vec_sort(md->d->cur, md->d->ncur, sizeof(*md->d->cur), cmp_curange);
	}
	uint64_t pc = a - md->d->cur_bias;
	size_t lo = 0, hi = md->d->ncur;
	while (lo < hi) { /* first range with lo > pc */
		size_t mid = lo + (hi - lo) / 2;
		if (md->d->cur[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* CUs do not overlap; the few ranges before are enough to look at. */
	for (size_t j = lo, k = 0; j-- > 0 && k < 8; k++) {
		if (pc < md->d->cur[j].hi) {
			*dbias = md->d->cur_bias;
			return md->d->cur[j].cu;
		}
	}
	return NULL;
}

/*
 * DWARF view of a (Dwfl address): the innermost line, replaced by the call
 * site in the enclosing real function when a is in inlined code; and that
 * function's name.
 */
static void dwarf_info(struct mod *md, uint64_t a, struct sym_frame *f,
		       const char **subname)
{
	Dwarf_Addr dbias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(md->dm, a, &dbias);
	if (!cu)
		cu = cu_by_ranges(md, a, &dbias);
	if (!cu)
		return;
	uint64_t pc = a - dbias;
	Dwarf_Line *ln = dwarf_getsrc_die(cu, pc);
	int line = 0;
	const char *file = ln ? dwarf_linesrc(ln, NULL, NULL) : NULL;
	if (file && dwarf_lineno(ln, &line) == 0) {
		f->file = file;
		f->line = line;
	}
	struct cuidx *ci = cu_index(md, cu);
	if (!ci || !ci->n)
		return;
	size_t lo = 0, hi = ci->n;
	while (lo < hi) { /* first range with lo > pc */
		size_t mid = lo + (hi - lo) / 2;
		if (ci->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct irange *sub = NULL, *call = NULL;
	int depth = 0;
	for (size_t j = lo; j-- > 0 && ci->maxend[j] > pc;) {
		const struct irange *r = &ci->v[j];
		if (pc >= r->hi)
			continue;
		if (r->depth == 0) {
			if (!sub || r->lo > sub->lo)
				sub = r;
		} else {
			if (r->depth == 1 && (!call || r->lo > call->lo))
				call = r;
			if (r->depth > depth)
				depth = r->depth;
		}
	}
	if (sub)
		*subname = sub->name;
	if (call && call->file) {
		f->file = call->file;
		f->line = call->line;
		f->inlined_depth = depth;
	}
}

/* The perf map's function at addr: of those covering it, the one its
 * file names last (JIT code is freed and its addresses reused). */
static const struct jitsym *find_jit(const struct symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi = s->njit;
	while (lo < hi) { /* first entry starting above addr */
		size_t mid = (lo + hi) / 2;
		if (s->jit[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct jitsym *best = NULL;
	/* entries are short and rarely overlap: look back a little */
	for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
		const struct jitsym *j = &s->jit[i - 1];
		if (addr < j->hi && (!best || j->line > best->line))
			best = j;
	}
	return best;
}

static void resolve(struct symbolizer *s, uint64_t addr, struct sym_frame *f)
{
	memset(f, 0, sizeof(*f));
	struct mod *md = find_mod(s, addr);
	if (!md) {
		const struct jitsym *j = s->njit ? find_jit(s, addr) : NULL;
		f->module = j ? "[jit]" : "?";
		f->module_off = addr;
		if (j) {
			f->func = j->name;
			f->resolved = 1;
		}
		return;
	}
	f->module = md->name;
	f->module_off = addr - md->bias;
	if (!md->dm) {
		/* its file unusable here: the names the recording kept, if any
		 * (a container's files: cli/compact.c, keep_code_names) */
		const struct jitsym *j = s->njit ? find_jit(s, addr) : NULL;
		if (j) {
			f->func = j->name;
			f->resolved = 1;
			f->func_lo = j->lo;
			f->func_size = j->hi - j->lo;
		}
		return;
	}
	uint64_t a = f->module_off + md->dwbias;
	const struct ksym *k = lookup_sym(md, a);
	const char *subname = NULL;
	dwarf_info(md, a, f, &subname);
	const char *name = k ? k->name : subname;
	if (name) {
		f->func = demangled(s, name, k ? k->bind == 1 : 0);
		f->resolved = 1;
		if (k && k->size) {
			f->func_lo = k->lo - md->dwbias + md->bias;
			f->func_size = k->size;
		}
		return;
	}
	/* Stripped: name the address after the function that contains it, the
	 * FDE covering it, so that all its addresses are one function. */
	if (!md->d->fdes_loaded) {
		md->d->fdes_loaded = true;
		if (cfi_fde_ranges(md->d->path, &md->d->fdes, &md->d->nfde) < 0) {
			md->d->fdes = NULL;
			md->d->nfde = 0;
		}
	}
	size_t lo = 0, hi = md->d->nfde;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f->module_off < md->d->fdes[mid].lo)
			hi = mid;
		else if (f->module_off >= md->d->fdes[mid].hi)
			lo = mid + 1;
		else {
			f->func_off = md->d->fdes[mid].lo;
			f->func_off_known = 1;
			f->func_lo = md->bias + md->d->fdes[mid].lo;
			f->func_size = md->d->fdes[mid].hi - md->d->fdes[mid].lo;
			break;
		}
	}
}

static int cache_put(struct symbolizer *s, uint64_t addr, const struct sym_frame *f)
{
	if ((s->tabn + 1) * 2 > s->tabcap) {
		size_t ncap = s->tabcap ? s->tabcap * 2 : 1024;
		struct entry *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		for (size_t i = 0; i < s->tabcap; i++) {
			if (!s->tab[i].used)
				continue;
			size_t h = hash64(s->tab[i].addr) & (ncap - 1);
			while (nt[h].used)
				h = (h + 1) & (ncap - 1);
			nt[h] = s->tab[i];
		}
		free(s->tab);
		s->tab = nt;
		s->tabcap = ncap;
	}
	size_t h = hash64(addr) & (s->tabcap - 1);
	while (s->tab[h].used)
		h = (h + 1) & (s->tabcap - 1);
	s->tab[h].used = true;
	s->tab[h].addr = addr;
	s->tab[h].f = *f;
	s->tabn++;
	return 0;
}

int sym_file_in_use(struct symbolizer *s, uint64_t addr)
{
	if (s->reporting) {
		dwfl_report_end(s->dwfl, NULL, NULL);
		s->reporting = false;
	}
	if (!s->sorted && sort_mods(s))
		return 0;
	const struct mod *md = find_mod(s, addr);
	return md && md->dm;
}

int sym_resolve(struct symbolizer *s, uint64_t addr, struct sym_frame *out)
{
	if (!s || !out)
		return -EINVAL;
	s->lookups++;
	if (s->tabcap) {
		size_t h = hash64(addr) & (s->tabcap - 1);
		while (s->tab[h].used) {
			if (s->tab[h].addr == addr) {
				*out = s->tab[h].f;
				s->hits++;
				return 0;
			}
			h = (h + 1) & (s->tabcap - 1);
		}
	}
	if (s->reporting) {
		dwfl_report_end(s->dwfl, NULL, NULL);
		s->reporting = false;
	}
	if (!s->sorted && sort_mods(s)) {
		memset(out, 0, sizeof(*out));
		out->module = "?";
		out->module_off = addr;
		return -ENOMEM;
	}
	resolve(s, addr, out);
	return cache_put(s, addr, out);
}

/* t without its typedefs and qualifiers; 0, or -1 when a type is missing. */
static int peel_type(Dwarf_Die *t)
{
	for (int i = 0; i < 16; i++) {
		int tag = dwarf_tag(t);
		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type &&
		    tag != DW_TAG_atomic_type && tag != DW_TAG_restrict_type)
			return 0;
		Dwarf_Attribute a;
		if (!dwarf_attr_integrate(t, DW_AT_type, &a) || !dwarf_formref_die(&a, t))
			return -1;
	}
	return -1;
}

/* Into buf (at *w of len): the members and elements of a variable of type
 * t down to byte off of it (".cond", "[3].lock"; at offset 0 too, the
 * first member: a lock at the start of a struct), as far as its type
 * tells, never into members with reserved names (__x, _X: a library's
 * internals); the bytes left over are returned. */
static uint64_t name_member(Dwarf_Die t, uint64_t off, char *buf, size_t len, size_t *w)
{
	for (int depth = 0; depth < 8 && *w < len; depth++) {
		if (peel_type(&t) != 0)
			return off;
		int tag = dwarf_tag(&t);
		Dwarf_Die c, mt;
		Dwarf_Attribute a;
		if (tag == DW_TAG_array_type) {
			Dwarf_Word esize;
			if (!dwarf_attr_integrate(&t, DW_AT_type, &a) || !dwarf_formref_die(&a, &mt) ||
			    dwarf_aggregate_size(&mt, &esize) != 0 || esize == 0)
				return off;
			*w += (size_t)snprintf(buf + *w, len - *w, "[%" PRIu64 "]", off / esize);
			off %= esize;
			t = mt;
			continue;
		}
		if (tag != DW_TAG_structure_type && tag != DW_TAG_class_type && tag != DW_TAG_union_type)
			return off;
		int found = 0;
		if (dwarf_child(&t, &c) == 0)
			do {
				Dwarf_Word at, size;
				const char *name = dwarf_diename(&c);
				/* (not into a library's own layout: pthread_mutex_t's
				 * __data, libstdc++'s _M_ members: reserved names) */
				if (dwarf_tag(&c) != DW_TAG_member || !name ||
				    (name[0] == '_' && (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z'))) ||
				    !dwarf_attr(&c, DW_AT_data_member_location, &a) || dwarf_formudata(&a, &at) != 0 ||
				    !dwarf_attr_integrate(&c, DW_AT_type, &a) || !dwarf_formref_die(&a, &mt) ||
				    dwarf_aggregate_size(&mt, &size) != 0 || off < at || off >= at + size)
					continue;
				*w += (size_t)snprintf(buf + *w, len - *w, ".%s", name);
				off -= at;
				t = mt;
				found = 1;
				break;
			} while (dwarf_siblingof(&c, &c) == 0);
		if (!found)
			return off;
	}
	return off;
}

/* The DWARF type of the variable that symbol name defines at Dwfl address
 * a of module md: a top-level DW_TAG_variable of some CU with that name (or
 * linkage name) and a location at a.  0 with *type, or -1. */
static int variable_type(struct mod *md, const char *name, uint64_t a, Dwarf_Die *type)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr cubias;
	while ((cu = dwfl_module_nextcu(md->dm, cu, &cubias)) != NULL) {
		Dwarf_Die d;
		if (dwarf_child(cu, &d) != 0)
			continue;
		do {
			Dwarf_Attribute at;
			const char *n = dwarf_diename(&d);
			if (dwarf_tag(&d) != DW_TAG_variable)
				continue;
			if (!n || strcmp(n, name) != 0) {
				const char *ln = dwarf_attr(&d, DW_AT_linkage_name, &at) ? dwarf_formstring(&at) : NULL;
				if (!ln || strcmp(ln, name) != 0)
					continue;
			}
			Dwarf_Op *ops;
			size_t nops;
			if (!dwarf_attr(&d, DW_AT_location, &at) || dwarf_getlocation(&at, &ops, &nops) != 0 ||
			    nops < 1 || ops[0].atom != DW_OP_addr || ops[0].number + cubias != a)
				continue;
			if (!dwarf_attr_integrate(&d, DW_AT_type, &at) || !dwarf_formref_die(&at, type))
				return -1;
			return 0;
		} while (dwarf_siblingof(&d, &d) == 0);
	}
	return -1;
}

static int data_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len);

/* The slot of addr in the cache of data names (grown as needed), NULL when
 * memory runs out. */
static struct dataname *dn_slot(struct symbolizer *s, uint64_t addr)
{
	if ((s->dnn + 1) * 2 > s->dncap) {
		size_t ncap = s->dncap ? s->dncap * 2 : 64;
		struct dataname *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < s->dncap; i++)
			if (s->dntab[i].used) {
				size_t h = hash64(s->dntab[i].addr) & (ncap - 1);
				while (nt[h].used)
					h = (h + 1) & (ncap - 1);
				nt[h] = s->dntab[i];
			}
		free(s->dntab);
		s->dntab = nt;
		s->dncap = ncap;
	}
	size_t h = hash64(addr) & (s->dncap - 1);
	while (s->dntab[h].used && s->dntab[h].addr != addr)
		h = (h + 1) & (s->dncap - 1);
	return &s->dntab[h];
}

int sym_data_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len)
{
	if (!s || !buf || !len)
		return -EINVAL;
	struct dataname *d = dn_slot(s, addr);
	if (d && d->used) {
		if (!d->name)
			return -ENOENT;
		snprintf(buf, len, "%s", d->name);
		return 0;
	}
	char name[512];
	int r = data_name(s, addr, name, sizeof(name));
	if (d) {
		d->used = true;
		d->addr = addr;
		d->name = r == 0 ? strdup(name) : NULL;
		s->dnn++;
	}
	if (r == 0)
		snprintf(buf, len, "%s", name);
	return r;
}

static int data_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len)
{
	if (s->reporting) {
		dwfl_report_end(s->dwfl, NULL, NULL);
		s->reporting = false;
	}
	for (size_t i = 0; i < s->nmods; i++) {
		struct mod *md = &s->mods[i];
		Dwarf_Addr start, end;
		if (!md->dm || !dwfl_module_info(md->dm, NULL, &start, &end, NULL, NULL, NULL, NULL))
			continue;
		uint64_t a = addr - md->bias + md->dwbias;
		if (a < start || a >= end || (addr >= md->lo && addr < md->hi))
			continue; /* (code is a function's, not a variable's) */
		const struct ksym *k = lookup_sym(md, a);
		/* a variable has a size: a sizeless label (__bss_start, _edata
		 * of a stripped file) names nothing */
		if (!k || !k->size || a >= k->lo + k->size)
			return -ENOENT;
		const char *name = demangled(s, k->name, k->bind == 1);
		size_t w = (size_t)snprintf(buf, len, "%s", name);
		uint64_t off = a - k->lo;
		Dwarf_Die type;
		/* inside it: the member, by the variable's type when there is
		 * debug info ("work_q.cond"), else the offset ("work_q+0x28") */
		if (w < len && variable_type(md, k->name, k->lo, &type) == 0)
			off = name_member(type, off, buf, len, &w);
		if (off && w < len)
			snprintf(buf + w, len - w, "+0x%" PRIx64, off);
		return 0;
	}
	return -ENOENT;
}

static int jit_cmp(const void *a, const void *b)
{
	const struct jitsym *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* One line of a perf map, its newline gone: "START SIZE name" with START
 * and SIZE in hexadecimal, SIZE not 0.  1 with *lo, *size and *name (in
 * line), 0 for a malformed line. */
static int perf_map_line(const char *line, uint64_t *lo, uint64_t *size, const char **name)
{
	char *end, *p;
	*lo = strtoull(line, &end, 16);
	if (end == line || *end != ' ')
		return 0;
	*size = strtoull(end + 1, &p, 16);
	if (p == end + 1 || *p != ' ' || !p[1] || *size == 0 || *lo + *size < *lo)
		return 0;
	*name = p + 1;
	return 1;
}

/* getline without the line's end; -1 at the end of f. */
static ssize_t map_getline(char **line, size_t *cap, FILE *f)
{
	ssize_t len = getline(line, cap, f);
	while (len > 0 && ((*line)[len - 1] == '\n' || (*line)[len - 1] == '\r'))
		(*line)[--len] = 0;
	return len;
}

/* The map's lines from f into s; label names it in the warning. */
static int add_perf_map_from(struct symbolizer *s, FILE *f, const char *label)
{
	char *line = NULL;
	size_t cap = 0, n = s->njit, lines = 0, bad = 0;
	int err = 0;
	while (map_getline(&line, &cap, f) >= 0) {
		lines++;
		uint64_t lo, size;
		const char *name;
		if (!perf_map_line(line, &lo, &size, &name)) {
			bad++;
			continue;
		}
		if (s->njit == n) {
			size_t ncap = n ? 2 * n : 256;
			struct jitsym *nj = realloc(s->jit, ncap * sizeof(*nj));
			if (!nj) {
				err = -ENOMEM;
				break;
			}
			s->jit = nj;
			n = ncap;
		}
		char *copy = strdup(name);
		if (!copy) {
			err = -ENOMEM;
			break;
		}
		s->jit[s->njit++] = (struct jitsym){lo, lo + size, copy, lines};
	}
	free(line);
	vec_sort(s->jit, s->njit, sizeof(*s->jit), jit_cmp);
	if (bad)
		add_warning(s, "%s: %zu of %zu lines are not \"START SIZE name\" (ignored)", label, bad, lines);
	s->tabn = 0; /* addresses cached before now may have names now */
	if (s->tab)
		memset(s->tab, 0, s->tabcap * sizeof(*s->tab));
	return err;
}

int sym_add_perf_map(struct symbolizer *s, const char *path)
{
	if (!s || !path)
		return -EINVAL;
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int err = add_perf_map_from(s, f, path);
	fclose(f);
	return err;
}

int sym_add_perf_map_text(struct symbolizer *s, const char *text, size_t len, const char *label)
{
	if (!s || !text || !label)
		return -EINVAL;
	if (len == 0)
		return 0;
	FILE *f = fmemopen((void *)(uintptr_t)text, len, "r");
	if (!f)
		return -errno;
	int err = add_perf_map_from(s, f, label);
	fclose(f);
	return err;
}

int sym_perf_map_of(uint32_t pid, uint64_t start_realtime_ns, int alive, char *buf, size_t len)
{
	if (snprintf(buf, len, "/tmp/perf-%" PRIu32 ".map", pid) >= (int)len)
		return 0;
	struct stat st, proc;
	if (stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	/* Anyone may create a file in /tmp under a pid to come: as perf does,
	 * a map counts when ours or root's (or, alive, the process's own). */
	char dir[32];
	snprintf(dir, sizeof(dir), "/proc/%" PRIu32, pid);
	if (st.st_uid != geteuid() && st.st_uid != 0 && !(alive && stat(dir, &proc) == 0 && proc.st_uid == st.st_uid))
		return 0;
	uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	return alive || mtime + 1000000000ull >= start_realtime_ns;
}

/* Whether one of the sorted addrs[0..n) is in [lo, hi]: a return
 * address just past a function's end is its call's. */
static int any_in(const uint64_t *addrs, size_t n, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = n;
	while (a < b) { /* the first address at lo or above */
		size_t mid = a + (b - a) / 2;
		if (addrs[mid] < lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a < n && addrs[a] <= hi;
}

int sym_perf_map_keep(const char *path, const uint64_t *addrs, size_t n, char **text, size_t *len, size_t *kept)
{
	*text = NULL;
	*len = *kept = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char *line = NULL, *out = NULL;
	size_t cap = 0, out_len = 0, out_cap = 0;
	ssize_t ll;
	int err = 0;
	while ((ll = map_getline(&line, &cap, f)) >= 0) {
		uint64_t lo, size;
		const char *name;
		if (memchr(line, 0, (size_t)ll) || !perf_map_line(line, &lo, &size, &name) ||
		    !any_in(addrs, n, lo, lo + size))
			continue; /* (a NUL would end the recording's text there) */
		if (vec_grow((void **)&out, &out_cap, out_len + (size_t)ll + 2, 1)) {
			err = -ENOMEM;
			break;
		}
		memcpy(out + out_len, line, (size_t)ll);
		out_len += (size_t)ll;
		out[out_len++] = '\n';
		out[out_len] = 0;
		(*kept)++;
	}
	if (!err && ferror(f))
		err = -EIO;
	free(line);
	fclose(f);
	if (err) {
		free(out);
		return err;
	}
	*text = out;
	*len = out_len;
	return 0;
}

const char *sym_warning(struct symbolizer *s, size_t i)
{
	return s && i < s->nwarn ? s->warn[i] : NULL;
}

void sym_get_stats(const struct symbolizer *s, struct sym_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!s)
		return;
	st->lookups = s->lookups;
	st->hits = s->hits;
	st->modules = s->nmods;
	for (size_t i = 0; i < s->nmods; i++)
		st->readable += s->mods[i].dm != NULL;
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++)
		free(s->mods[i].path);
	free(s->mods);
	for (size_t i = 0; i < s->nfiles; i++) {
		struct dfile *d = s->files[i];
		free(d->path);
		free(d->err);
		free(d->idx.v);
		free(d->idx.maxend);
		for (size_t j = 0; j < d->cucap; j++) {
			free(d->cus[j].v);
			free(d->cus[j].maxend);
		}
		free(d->cus);
		free(d->cur);
		free(d->fdes);
		free(d);
	}
	free(s->files);
	for (size_t i = 0; i < s->njit; i++)
		free(s->jit[i].name);
	free(s->jit);
	free(s->root);
	if (s->rootfd >= 0)
		close(s->rootfd);
	for (size_t i = 0; i < s->dncap; i++)
		free(s->dntab[i].name);
	free(s->dntab);
	free(s->maxhi);
	free(s->tab);
	for (size_t i = 0; i < s->dmcap; i++)
		free(s->dmtab[i].val);
	free(s->dmtab);
	for (size_t i = 0; i < s->nwarn; i++)
		free(s->warn[i]);
	free(s->warn);
	dwfl_end(s->dwfl);
	free(s);
}

const char *sym_frame_name(const struct sym_frame *f, char *buf, size_t len)
{
	if (!buf || !len)
		return "";
	if (f->func)
		snprintf(buf, len, "%s", f->func);
	else
		snprintf(buf, len, "%s+0x%" PRIx64, f->module ? f->module : "?",
			 f->func_off_known ? f->func_off : f->module_off);
	return buf;
}

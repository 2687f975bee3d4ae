/*
 * symbolize.h - turn recorded code addresses into function, file and line.
 *
 * The agent stores raw addresses and, for every module of the traced process,
 * its path, load bias, executable address range and GNU build-id.  After the
 * recording the CLI creates one symbolizer, adds every module, then resolves
 * each distinct address once.  The implementation (symbolize.c) uses elfutils
 * libdwfl in offline mode; its top comment explains the design and limits.
 *
 * Ownership: every string a sym_frame points to belongs to the symbolizer and
 * stays valid until sym_free().  Nothing here is thread-safe; there is no
 * global state, so one symbolizer per thread works.
 *
 * Debug info is looked for next to the binary (.gnu_debuglink), under
 * /usr/lib/debug and in /usr/lib/debug/.build-id (install the -dbg/-dbgsym
 * packages for full names and lines in stripped distribution binaries).
 * debuginfod: when DEBUGINFOD_URLS is set in the environment, libdwfl
 * (dwfl_standard_find_debuginfo) asks those servers for the debug info of
 * every module it cannot find locally, and caches what it gets under
 * ~/.cache/debuginfod_client.  Without network a refused connection fails at
 * once, but an unanswered one waits up to DEBUGINFOD_TIMEOUT (default 90 s)
 * per module.  This library never changes the caller's environment; a
 * caller that wants symbolization to stay offline unsets DEBUGINFOD_URLS
 * before the first sym_resolve().
 */
#ifndef RHEA_SYMBOLIZE_H
#define RHEA_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

/* One module of the traced process, as recorded. */
struct sym_module {
	const char *path;        /* file path; "[vdso]" or "linux-vdso.so.1" for the vdso */
	uint64_t bias;           /* load bias: runtime address = ELF vaddr + bias */
	uint64_t lo, hi;         /* runtime range [lo, hi) of executable segments;
	                          * hi <= lo: the file's whole range */
	const uint8_t *build_id; /* recorded GNU build-id, or NULL */
	size_t build_id_len;     /* 0 when none was recorded */
};

/* What one address resolves to. */
struct sym_frame {
	const char *func;    /* demangled function name, NULL if unknown */
	const char *file;    /* source file (full path as in DWARF) or NULL */
	int line;            /* 0 if unknown */
	const char *module;  /* module basename ("libc.so.6"); "[jit]" for a perf map's
	                      * function, "?" if nothing covers addr */
	uint64_t module_off; /* addr - module's load bias (the ELF vaddr); addr itself for "?" */
	int resolved;        /* 1 when func is known */
	int inlined_depth;   /* inlined calls at addr (file:line is then the outermost call site) */
	uint64_t func_off;   /* unresolved: start of the enclosing function (its .eh_frame FDE), */
	int func_off_known;  /* so that a stripped function is one name: module+0xSTART */
	uint64_t func_lo;    /* resolved from a sized symbol (or a perf map's line), or */
	uint64_t func_size;  /* func_off_known: the function's runtime address range;
	                      * 0 when not known */
};

struct symbolizer;

/* New empty symbolizer.  Returns NULL on allocation failure. */
struct symbolizer *sym_new(void);

/*
 * Add a module of the recording.  The file is opened now and its build-id
 * checked against m->build_id (when one was recorded).  A missing file, an
 * unreadable one or a build-id mismatch is not an error: the module's
 * addresses then resolve to module+offset and a warning is kept (see
 * sym_warning).  Adding a module drops the results cached so far.
 * Returns 0, -EINVAL on bad arguments, -ENOMEM.
 */
int sym_add_module(struct symbolizer *s, const struct sym_module *m);

/*
 * Look for the modules' files under dir first (a container's root, through
 * /proc/PID/root while it runs, or a copy of another machine's files), as
 * perf's --symfs does: a module's path P is opened as dir/P, resolved
 * inside dir, and used when its build-id is the recorded one; else P
 * itself.  For modules added from here on.  0, or -errno (the directory
 * cannot be opened; errno set too).
 */
int sym_set_root(struct symbolizer *s, const char *dir);
/* path (absolute) opened read-only inside the directory rootfd (root its
 * name), as a process whose root it is would (openat2 RESOLVE_IN_ROOT: an
 * absolute symbolic link in it stays in it; before Linux 5.6, root + path).
 * A descriptor, or -1 and errno.  (Also rhea attach's, cli/cfiprebuild.c.) */
int sym_open_in_root(int rootfd, const char *root, const char *path);
/* The same for every symbolizer sym_new makes from here on (rhea report
 * and convert --sysroot).  0, or -errno (-ENOTDIR: not a directory). */
int sym_set_default_root(const char *dir);

/*
 * Another process (another recording) from here on: forget the modules
 * added, the perf map's names and the results cached, keep the files opened
 * and what was read from them (symbol indexes, CU indexes, decompressed
 * debug info), so that a second recording mapping the same libraries does
 * not read them again.
 */
void sym_begin_process(struct symbolizer *s);

/*
 * Names for JIT code, from a perf map: the text file of "START SIZE name"
 * lines (hexadecimal START and SIZE) that perf reads from
 * /tmp/perf-PID.map, written by node --perf-basic-prof, the JVM's perf-map
 * agents, python3.12 -X perf, LuaJIT...  Addresses that no module covers
 * are looked up there, and those of a module whose file is unusable here
 * (the names a recording of a container kept: cli/compact.c); where
 * entries overlap, the file's later line wins.
 * Malformed lines are skipped (one warning).  Returns 0, -errno when the
 * file cannot be read, -ENOMEM.
 */
int sym_add_perf_map(struct symbolizer *s, const char *path);
/* The same from a map's text (len bytes, as a recording keeps it; see
 * sym_perf_map_keep): label names it in the warning. */
int sym_add_perf_map_text(struct symbolizer *s, const char *text, size_t len, const char *label);

/*
 * The perf map of process pid for a recording that began at
 * start_realtime_ns: /tmp/perf-PID.map, if written since a second before
 * that start (a map an older process of the same pid left is not its) or,
 * alive (the process still runs: rhea attach left it), whenever; and
 * owned by us or root (or, alive, by the process's user): anyone may
 * create a file in /tmp under a pid to come.  1 with its path in buf,
 * else 0.
 */
int sym_perf_map_of(uint32_t pid, uint64_t start_realtime_ns, int alive, char *buf, size_t len);

/*
 * The lines of the perf map at path that name code at one of the sorted
 * addresses addrs[0..n) (or that ends right before one: a return
 * address), in the file's order, each ended by a newline: *text
 * (malloc'ed, NUL-terminated, NULL when none), *len bytes, *kept lines.
 * Malformed lines are left out.  0, or -errno (-ENOMEM).
 */
int sym_perf_map_keep(const char *path, const uint64_t *addrs, size_t n, char **text, size_t *len, size_t *kept);

/*
 * Resolve a code address (already "return address - 1" for call sites) into
 * *out.  Results are cached by address.  Returns 0, -EINVAL on NULL arguments,
 * or -ENOMEM when the result could not be cached (*out is filled anyway).
 */
int sym_resolve(struct symbolizer *s, uint64_t addr, struct sym_frame *out);

/* Whether a module covers addr and its file is the one recorded, read here
 * (not: no module, no file, another build-id), without resolving addr. */
int sym_file_in_use(struct symbolizer *s, uint64_t addr);

/*
 * The variable at data address addr (a lock's, say): a global or static
 * one of a module with symbols, as "name" or "name+0xoff" into buf.  0, or
 * -ENOENT when no module's image holds addr (heap, stacks, code) or no
 * symbol covers it.
 */
int sym_data_name(struct symbolizer *s, uint64_t addr, char *buf, size_t len);

/* The i-th warning collected so far (each distinct text once), NULL past the end. */
const char *sym_warning(struct symbolizer *s, size_t i);

/* Free the symbolizer and every string it handed out. */
void sym_free(struct symbolizer *s);

/* Counters, for reports and tests. */
struct sym_stats {
	size_t lookups;   /* sym_resolve calls */
	size_t hits;      /* of which answered from the address cache */
	size_t modules;   /* modules added */
	size_t readable;  /* of which symbolized (file opened, build-id matched) */
};

/* Fill *st with s's counters. */
void sym_get_stats(const struct symbolizer *s, struct sym_stats *st);

/*
 * Format a frame as "func" or "module+0xoff" into buf (truncated to len - 1
 * bytes).  Returns buf, or "" when len is 0.
 */
const char *sym_frame_name(const struct sym_frame *f, char *buf, size_t len);

/*
 * Demangle a C++ (Itanium ABI, also Rust legacy) symbol name.  Returns a
 * malloc'd string the caller frees, or NULL when name is not mangled or
 * cannot be demangled (Rust v0 names, for instance).
 */
char *sym_demangle(const char *name);

/*
 * The GNU build-id of an ELF file or image opened with libelf (e, an Elf
 * *), from its PT_NOTE segments: its length (0 when it has none), its
 * bytes into id (cap of them at most), and where they are once loaded into
 * *vaddr (relative to the load bias; vaddr may be NULL).
 */
size_t sym_elf_build_id(void *e, unsigned char *id, size_t cap, uint64_t *vaddr);

#endif /* RHEA_SYMBOLIZE_H */

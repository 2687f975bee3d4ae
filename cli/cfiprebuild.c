/*
 * cfiprebuild.c - the unwind tables of a process rhea attach is about to
 * join, built before the agent is loaded into it.
 *
 * The agent compiles the CFI of each module its cache lacks as it starts
 * (agent/modules.c), on the thread it starts on.  Under rhea attach that
 * is a thread of the running program, held meanwhile: the first attach to
 * redis-server held its event loop 0.5 s so, and a process with LLVM
 * loaded would wait seconds.  So rhea attach first reads the process's
 * executable mappings and builds, with the agent's own code (agent/cfi.c,
 * agent/cficache.c, linked into the CLI too), the tables the cache lacks;
 * the agent then only maps them.  The same cache, by build-id: the
 * directory rhea attach hands the agent (RHEA_CACHE_DIR).
 *
 * Built: the files the process maps executable, each read as the kernel
 * mapped it (/proc/PID/map_files, root only: the very file, even one
 * replaced on disk since, or on an overlay) or else by its path if that
 * still names the file mapped (same device and inode); the agent itself,
 * the libraries it needs (as the process's loader would find them), and
 * the vDSO (the kernel's, this process's the same).  (The agent's
 * libraries: those it needs, and libzstd, which it takes with dlopen.)
 * A table the agent lacked made it load libdw as well: 100 ms of
 * redis-server's event loop for the vDSO's alone, 76 ms for libz's.
 * Nothing here is an error: whatever fails is built by the agent as
 * before.
 *
 * A process in another mount namespace (a container) cannot see our cache,
 * and its files are its own.  Its paths are resolved inside its root
 * (/proc/PID/root, openat2's RESOLVE_IN_ROOT: an absolute symbolic link
 * stays in it), the libraries the agent needs are looked for in its
 * library directories, the tables are built into our cache (by build-id:
 * the same as ours where the files are) and copied into a cache directory
 * of the attach, in its /tmp, which the agent is given.  Until 2026-11-29
 * such an agent had no cache and built every table itself: 213 ms of the
 * only thread of a small program, with libc and its own libraries.
 */
#include "cli.h"
#include "cfi.h"
#include "symbolize.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 4096

struct mapped {
	dev_t dev;
	ino_t ino;
	char *path;     /* as the process names it (ours: the agent's file) */
	char range[48]; /* its mapping in /proc/PID/map_files, "" for none */
	int ours;       /* a file of our own namespace */
};

/* The process, and its root when it has one of its own. */
struct proc {
	pid_t pid;
	int rootfd; /* O_PATH of /proc/PID/root, -1: the same root as ours */
};

/* path as the process sees it, opened read-only: -1 if it cannot be. */
static int open_in(const struct proc *p, const char *path)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)p->pid);
	return p->rootfd < 0 ? open(path, O_RDONLY | O_CLOEXEC) : sym_open_in_root(p->rootfd, root, path);
}

/* The executable file mappings of /proc/PID/maps, each file once. */
static size_t read_mapped(const struct proc *p, struct mapped *out, size_t cap)
{
	char path[64], line[4096 + 128];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = 0;
	while (n < cap && fgets(line, sizeof(line), f)) {
		char perms[8], range[48];
		unsigned maj, min;
		unsigned long long ino;
		int off = 0;
		if (sscanf(line, "%47s %7s %*x %x:%x %llu %n", range, perms, &maj, &min, &ino, &off) != 5 ||
		    perms[2] != 'x' || ino == 0 || line[off] != '/')
			continue;
		char *name = line + off;
		name[strcspn(name, "\n")] = 0;
		size_t nl = strlen(name);
		if (nl > 10 && strcmp(name + nl - 10, " (deleted)") == 0)
			name[nl - 10] = 0; /* map_files still has it */
		dev_t dev = makedev(maj, min);
		size_t i;
		for (i = 0; i < n && !(out[i].dev == dev && out[i].ino == (ino_t)ino); i++)
			;
		if (i < n)
			continue;
		if (!(out[n].path = strdup(name)))
			break;
		out[n].dev = dev;
		out[n].ino = (ino_t)ino;
		snprintf(out[n].range, sizeof(out[n].range), "%s", range);
		out[n].ours = 0;
		n++;
	}
	fclose(f);
	return n;
}

/* The file m names, as mapped: a descriptor, or -1. */
static int open_mapped(const struct proc *p, const struct mapped *m)
{
	int fd = -1;
	if (m->range[0]) {
		char mf[128];
		snprintf(mf, sizeof(mf), "/proc/%d/map_files/%s", (int)p->pid, m->range);
		if ((fd = open(mf, O_RDONLY | O_CLOEXEC)) >= 0)
			return fd;
	}
	fd = m->ours ? open(m->path, O_RDONLY | O_CLOEXEC) : open_in(p, m->path);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != m->dev || st.st_ino != m->ino)) {
		close(fd); /* another file now: the agent reads the loaded image */
		fd = -1;
	}
	return fd;
}

/* The build-id of the ELF file fd: its length, else 0. */
static size_t fd_build_id(int fd, unsigned char *id, size_t cap)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t len = e ? sym_elf_build_id(e, id, cap, NULL) : 0;
	if (e)
		elf_end(e);
	return len;
}

/* Room a container's /tmp keeps after the tables: its recording goes
 * there too, and so may the program's own files. */
#define EXPORT_SPARE (64ull << 20)

/* The table of build-id id (len) into the agent's cache directory export
 * (given to user uid, -1: ours), from ours; NULL export: nothing.  Not
 * when the file system would keep less than EXPORT_SPARE free (a table
 * is up to some 13 MB, libLLVM's): the agent then builds it, if it can;
 * a copy cut short is removed. */
static void export_table(const char *export, int uid, const unsigned char *id, size_t len)
{
	char src[PATH_MAX], dst[PATH_MAX + 64];
	struct stat st;
	struct statvfs fs;
	if (!export || cficache_file(id, (uint32_t)len, src, sizeof(src)) != 0 || !cficache_has(id, (uint32_t)len) ||
	    stat(src, &st) != 0 || statvfs(export, &fs) != 0 ||
	    (unsigned long long)fs.f_bavail * fs.f_frsize < (unsigned long long)st.st_size + EXPORT_SPARE)
		return;
	snprintf(dst, sizeof(dst), "%s/%s", export, strrchr(src, '/') + 1);
	int in = open(src, O_RDONLY | O_CLOEXEC);
	cli_fs_enter(); /* (a rootless container's: made as its user) */
	int copied = cli_copy_file(in, dst, 0644) == 0;
	if (!copied && errno != EEXIST)
		unlink(dst);
	cli_fs_leave();
	if (!copied)
		return;
	if (uid >= 0 && chown(dst, (uid_t)uid, (gid_t)-1) != 0) {
		/* readable all the same */
	}
}

/* Build and store the table of the file fd (the vDSO's when -1), build-id
 * id (len), unless the cache has it: 1 when built. */
static int build_one(int fd, const unsigned char *id, size_t len)
{
	if (len == 0 || cficache_has(id, (uint32_t)len))
		return 0;
	struct cfi_table *t = NULL;
	int err = fd >= 0 ? cfi_build_fd(fd, &t) : cfi_build_vdso(&t);
	if (err == 0)
		cficache_store(id, (uint32_t)len, t);
	cfi_free(t);
	return err == 0;
}

/* This process's vDSO, by its build-id (into *id, *len). */
static int build_vdso(unsigned char *id, size_t *len)
{
	const char *base = (const char *)getauxval(AT_SYSINFO_EHDR);
	*len = 0;
	if (!base || memcmp(base, ELFMAG, SELFMAG) != 0)
		return 0;
	const GElf_Ehdr *eh = (const GElf_Ehdr *)(const void *)base;
	Elf *e = elf_memory((char *)(uintptr_t)base, eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize);
	if (e) {
		*len = sym_elf_build_id(e, id, 40, NULL);
		elf_end(e);
	}
	return build_one(-1, id, *len);
}

/* Where the process's loader would find library name (a DT_NEEDED of the
 * agent): into out, 0; -1 when not found.  Ours: as our loader does; a
 * process with its own root: the usual library directories in it. */
static int find_library(const struct proc *p, const char *name, char *out, size_t cap)
{
	if (p->rootfd < 0) {
		void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
		struct link_map *lm = NULL;
		int ok = h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0] == '/' &&
			 (size_t)snprintf(out, cap, "%s", lm->l_name) < cap;
		if (h)
			dlclose(h);
		return ok ? 0 : -1;
	}
	static const char *const dirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
					   "/lib64",
					   "/usr/lib64",
					   "/lib",
					   "/usr/lib",
					   "/usr/local/lib"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if ((size_t)snprintf(out, cap, "%s/%s", dirs[i], name) >= cap)
			continue;
		int fd = open_in(p, out);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
	}
	return -1;
}

/* Add to m (n so far, cap) the agent's file and the libraries it needs,
 * as the process's loader would find them. */
static size_t add_agent(const struct proc *p, const char *agent, struct mapped *m, size_t n, size_t cap)
{
	char *paths[64];
	size_t np = 0;
	if (!agent || !(paths[np] = strdup(agent)))
		return n;
	np++;
	int fd = open(agent, O_RDONLY | O_CLOEXEC);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
	Elf_Scn *scn = NULL;
	while (e && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		GElf_Dyn dyn;
		for (int i = 0; d && gelf_getdyn(d, i, &dyn) && dyn.d_tag != DT_NULL && np < 64; i++) {
			const char *need = dyn.d_tag == DT_NEEDED ? elf_strptr(e, sh.sh_link, dyn.d_un.d_val) : NULL;
			char lib[PATH_MAX];
			if (need && find_library(p, need, lib, sizeof(lib)) == 0)
				paths[np] = strdup(lib), np += paths[np] != NULL;
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	/* and the one it takes with dlopen (core/rfile.c) */
	char zstd[PATH_MAX];
	if (np < 64 && find_library(p, "libzstd.so.1", zstd, sizeof(zstd)) == 0)
		paths[np] = strdup(zstd), np += paths[np] != NULL;
	for (size_t k = 0; k < np; k++) {
		int ours = k == 0; /* the agent's file is ours, its libraries the process's */
		int lfd = ours ? open(paths[k], O_RDONLY | O_CLOEXEC) : open_in(p, paths[k]);
		struct stat st;
		size_t i = n;
		if (lfd >= 0 && fstat(lfd, &st) == 0)
			for (i = 0; i < n && !(m[i].dev == st.st_dev && m[i].ino == st.st_ino); i++)
				;
		if (lfd >= 0)
			close(lfd);
		if (lfd >= 0 && i == n && n < cap) {
			m[n] = (struct mapped){.dev = st.st_dev, .ino = st.st_ino, .path = paths[k], .ours = ours};
			n++;
			continue;
		}
		free(paths[k]);
	}
	return n;
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int cli_prebuild_cfi(pid_t pid, const char *agent, const char *export, int export_uid, int quiet)
{
	struct mapped *m = calloc(MAX_FILES, sizeof(*m));
	if (!m)
		return 0;
	elf_version(EV_CURRENT);
	cficache_settings(cli_getenv);
	if (!cficache_usable()) {
		free(m);
		return 0;
	}
	struct proc p = {pid, -1};
	if (export) {
		char root[64];
		snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
		p.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (p.rootfd < 0) {
			free(m);
			return 0;
		}
	}
	size_t n = add_agent(&p, agent, m, read_mapped(&p, m, MAX_FILES), MAX_FILES);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned char id[40];
	size_t len;
	int built = build_vdso(id, &len);
	export_table(export, export_uid, id, len);
	for (size_t i = 0; i < n; i++) {
		int fd = open_mapped(&p, &m[i]);
		if (fd < 0)
			continue;
		len = fd_build_id(fd, id, sizeof(id));
		built += build_one(fd, id, len);
		close(fd);
		if (len)
			export_table(export, export_uid, id, len);
	}
	double s = seconds_since(&t0);
	if (built && !quiet && s >= 0.5)
		fprintf(stderr, "rhea: built the unwind tables of %d librar%s new to the cache in %.1f s, before "
			"attaching (the agent reads them from there)\n", built, built == 1 ? "y" : "ies", s);
	for (size_t i = 0; i < n; i++)
		free(m[i].path);
	free(m);
	if (p.rootfd >= 0)
		close(p.rootfd);
	return built;
}

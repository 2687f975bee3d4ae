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
 * Built: the files named by /proc/PID/maps that still exist as mapped
 * (same device and inode: a library replaced on disk since it was loaded
 * is left to the agent, which reads the loaded image's build-id), the
 * agent itself, the libraries it needs (as this process's loader finds
 * them: libz, libzstd), and the vDSO (the kernel's, this process's the
 * same).  A table the agent lacked made it load libdw as well: 100 ms of
 * redis-server's event loop for the vDSO's alone, 76 ms for libz's.  Nothing here is an error: whatever fails is built by the agent
 * as before.
 */
#include "cli.h"
#include "cfi.h"
#include "symbolize.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 4096

struct mapped {
	dev_t dev;
	ino_t ino;
	char *path;
};

/* The executable file mappings of /proc/PID/maps, each file once. */
static size_t read_mapped(pid_t pid, struct mapped *out, size_t cap)
{
	char p[64], line[4096 + 128];
	snprintf(p, sizeof(p), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return 0;
	size_t n = 0;
	while (n < cap && fgets(line, sizeof(line), f)) {
		char perms[8];
		unsigned maj, min;
		unsigned long long ino;
		int off = 0;
		if (sscanf(line, "%*x-%*x %7s %*x %x:%x %llu %n", perms, &maj, &min, &ino, &off) != 4 ||
		    perms[2] != 'x' || ino == 0 || line[off] != '/')
			continue;
		char *path = line + off;
		path[strcspn(path, "\n")] = 0;
		size_t pl = strlen(path);
		if (pl > 10 && strcmp(path + pl - 10, " (deleted)") == 0)
			continue;
		dev_t dev = makedev(maj, min);
		size_t i;
		for (i = 0; i < n && !(out[i].dev == dev && out[i].ino == (ino_t)ino); i++)
			;
		if (i < n)
			continue;
		if (!(out[n].path = strdup(path)))
			break;
		out[n].dev = dev;
		out[n].ino = (ino_t)ino;
		n++;
	}
	fclose(f);
	return n;
}

/* path's build-id when it is still the file mapped (dev, ino): its length,
 * else 0. */
static size_t file_build_id(const struct mapped *m, unsigned char *id, size_t cap)
{
	int fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	size_t len = 0;
	if (fstat(fd, &st) == 0 && st.st_dev == m->dev && st.st_ino == m->ino) {
		Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		if (e) {
			len = sym_elf_build_id(e, id, cap, NULL);
			elf_end(e);
		}
	}
	close(fd);
	return len;
}

/* Build and store path's table (the vDSO's when NULL), build-id id (len),
 * unless the cache has it: 1 when built. */
static int build_one(const char *path, const unsigned char *id, size_t len)
{
	if (len == 0 || cficache_has(id, (uint32_t)len))
		return 0;
	struct cfi_table *t = NULL;
	int err = path ? cfi_build(path, &t) : cfi_build_vdso(&t);
	if (err == 0)
		cficache_store(id, (uint32_t)len, t);
	cfi_free(t);
	return err == 0;
}

/* This process's vDSO, by its build-id. */
static int build_vdso(void)
{
	const char *base = (const char *)getauxval(AT_SYSINFO_EHDR);
	if (!base || memcmp(base, ELFMAG, SELFMAG) != 0)
		return 0;
	const GElf_Ehdr *eh = (const GElf_Ehdr *)(const void *)base;
	unsigned char id[40];
	size_t len = 0;
	Elf *e = elf_memory((char *)(uintptr_t)base, eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize);
	if (e) {
		len = sym_elf_build_id(e, id, sizeof(id), NULL);
		elf_end(e);
	}
	return build_one(NULL, id, len);
}

/* Add to m (n so far, cap) the agent's file and the libraries it needs,
 * as this process's loader resolves them. */
static size_t add_agent(const char *agent, struct mapped *m, size_t n, size_t cap)
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
			void *h = need ? dlopen(need, RTLD_LAZY | RTLD_LOCAL) : NULL;
			struct link_map *lm = NULL;
			if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0] == '/')
				paths[np] = strdup(lm->l_name), np += paths[np] != NULL;
			if (h)
				dlclose(h);
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	for (size_t k = 0; k < np; k++) {
		struct stat st;
		size_t i;
		for (i = 0; i < n && !(stat(paths[k], &st) == 0 && m[i].dev == st.st_dev && m[i].ino == st.st_ino); i++)
			;
		if (i == n && n < cap && stat(paths[k], &st) == 0) {
			m[n] = (struct mapped){st.st_dev, st.st_ino, paths[k]};
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

int cli_prebuild_cfi(pid_t pid, const char *agent, int quiet)
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
	size_t n = add_agent(agent, m, read_mapped(pid, m, MAX_FILES), MAX_FILES);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int built = build_vdso();
	for (size_t i = 0; i < n; i++) {
		unsigned char id[40];
		built += build_one(m[i].path, id, file_build_id(&m[i], id, sizeof(id)));
	}
	double s = seconds_since(&t0);
	if (built && !quiet && s >= 0.5)
		fprintf(stderr, "rhea: built the unwind tables of %d librar%s new to the cache in %.1f s, before "
			"attaching (the agent reads them from there)\n", built, built == 1 ? "y" : "ies", s);
	for (size_t i = 0; i < n; i++)
		free(m[i].path);
	free(m);
	return built;
}

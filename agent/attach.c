/*
 * attach.c - the agent loaded into a running process by `rhea attach`
 * (DESIGN.md 1.8).
 *
 * `rhea attach PID` makes a directory of its own, puts there a copy of
 * librhea.so (a new file each time: dlopen of a name already loaded would
 * hand back that copy, without running its constructor), the
 * configuration (rhea-attach.conf: the RHEA_* settings
 * `rhea record` passes in the environment, one KEY=VALUE a line), a FIFO
 * (control) and a status file, and makes one thread of the process call
 * dlopen() on the copy (cli/inject.c).  The constructor finds the
 * configuration next to its own file: that is attach mode.
 *
 * What differs from LD_PRELOAD:
 *
 *  - a library loaded late does not interpose: the program's calls are
 *    already bound to libc.  The hooks go in by rewriting the import slots
 *    (GOT) of every loaded object that imports a hooked function, the
 *    read-only ones (RELRO) made writable for the store; every slot's old
 *    value is kept, and put back on detach.  Objects the program loads
 *    afterwards are found by the writer within a flush period and hooked
 *    the same way (their first calls are missed);
 *  - the real functions are the ones the program's symbols resolve to
 *    (dlsym RTLD_DEFAULT): RTLD_NEXT from a library loaded last would find
 *    libc's malloc even where the program runs jemalloc's;
 *  - nothing of the program's signal handling changes (no crash flush: a
 *    crash loses at most the last flush period, as a SIGKILL does); the
 *    process's own exit still ends the recording (on_exit);
 *  - the writer thread watches the FIFO: a byte from the CLI, or the CLI
 *    gone (end of file), detaches: the slots are restored, the sampler
 *    stops (its signal stays ignored), the recording is flushed and ended
 *    (END_DETACH), the agent's threads exit.  The library itself stays
 *    mapped: a thread may still be inside a hook, and a function pointer the
 *    program took meanwhile may still lead into one (hooks then only pass
 *    the call on).
 *
 * The next `rhea attach` of the same build does not load another copy: it
 * calls this one's rhea_attach_restart (agent.c) with its own directory,
 * through a thread it stopped as it would have called dlopen, and this
 * copy reads that directory's configuration (attach_reconfigure) and
 * records again.
 */
#include "agent.h"
#include "paths.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int rhea_attached;
static char dir[PATH_MAX];
static char conf[4096];
static const char *keys[64], *vals[64];
static int nconf;
uintptr_t attach_self_base; /* our own load address (this copy's) */
static char self_file[PATH_MAX];

/* ---- configuration --------------------------------------------------------- */

static int read_conf(void);

static int read_file(const char *path, char *buf, size_t cap)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = syscall(SYS_read, fd, buf, cap - 1);
	syscall(SYS_close, fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return (int)n;
}

int attach_detect(void)
{
	if (getenv("RHEA_OUTPUT"))
		return 0; /* rhea record's environment: LD_PRELOAD */
	Dl_info di;
	if (!dladdr((void *)attach_detect, &di) || !di.dli_fname)
		return 0;
	attach_self_base = (uintptr_t)di.dli_fbase;
	snprintf(self_file, sizeof(self_file), "%s", di.dli_fname);
	const char *slash = strrchr(di.dli_fname, '/');
	size_t len = slash ? (size_t)(slash - di.dli_fname) : 0;
	if (!slash || len + sizeof("/" RHEA_ATTACH_CONF) > sizeof(dir))
		return 0;
	memcpy(dir, di.dli_fname, len);
	dir[len] = 0;
	if (read_conf() != 0)
		return 0;
	rhea_attached = 1;
	return 1;
}

/* dir's configuration into conf, keys and vals: 0, or -1 (unread). */
static int read_conf(void)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_CONF, dir);
	nconf = 0;
	if (read_file(path, conf, sizeof(conf)) < 0)
		return -1;
	for (char *line = conf, *nl; *line && nconf < 64; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		char *eq = strchr(line, '=');
		if (eq) {
			*eq = 0;
			keys[nconf] = line;
			vals[nconf++] = eq + 1;
		}
		if (!nl)
			break;
	}
	return 0;
}

static int control_open, cli_gone; /* (below: control) */

int attach_reconfigure(const char *newdir)
{
	size_t len = strlen(newdir);
	if (len + sizeof("/" RHEA_ATTACH_CONF) > sizeof(dir))
		return -1;
	memcpy(dir, newdir, len + 1);
	control_open = cli_gone = 0;
	return read_conf();
}

const char *attach_getenv(const char *name)
{
	if (!rhea_attached)
		return getenv(name);
	for (int i = 0; i < nconf; i++)
		if (strcmp(keys[i], name) == 0)
			return vals[i];
	return NULL;
}

void attach_status(const char *msg)
{
	if (!rhea_attached)
		return;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_STATUS, dir);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return;
	if (syscall(SYS_write, fd, msg, strlen(msg)) < 0) {
		/* nothing to do: the CLI times out and says so */
	}
	syscall(SYS_close, fd);
}

/* A line for the CLI to show (the agent's warnings: under rhea attach the
 * process's stderr, a service's log, is not ours to write to).  Parts are
 * joined, then a newline. */
void attach_note(const char *const *parts, int n)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_WARNINGS, dir);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	for (int i = 0; i < n; i++)
		if (parts[i] && syscall(SYS_write, fd, parts[i], strlen(parts[i])) < 0)
			break;
	if (syscall(SYS_write, fd, "\n", 1) < 0) {
		/* the CLI shows what arrived */
	}
	syscall(SYS_close, fd);
}

/* ---- the real functions --------------------------------------------------------- */

static long page_size(void);

/* The addresses an object's loadable segments span: [*lo, *hi). */
static void object_span(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < *lo)
			*lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > *hi)
			*hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
}

struct objnames {
	char names[256][256];
	int n;
	uintptr_t exe_base;
};

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct objnames *o = arg;
	if (!info->dlpi_name || !info->dlpi_name[0]) {
		/* the executable: where dladdr says it starts (its first
		 * segment; a non-PIE one has a load bias of 0) */
		uintptr_t lo, hi;
		object_span(info, &lo, &hi);
		if (!o->exe_base && hi)
			o->exe_base = lo & ~(uintptr_t)(page_size() - 1);
		return 0;
	}
	if (o->n < 256 && !strstr(info->dlpi_name, "linux-vdso"))
		snprintf(o->names[o->n++], sizeof(o->names[0]), "%s", info->dlpi_name);
	return 0;
}

/* The first definition of name in o's libraries (dlsym on a handle looks
 * in that library, then in its dependencies), neither in the executable
 * nor at self_base. */
static void *first_definition(const struct objnames *o, const char *name, uintptr_t self_base)
{
	Dl_info di;
	for (int i = 0; i < o->n; i++) {
		void *h = dlopen(o->names[i], RTLD_NOW | RTLD_NOLOAD);
		if (!h)
			continue;
		void *q = dlsym(h, name);
		dlclose(h);
		if (q && dladdr(q, &di) && (uintptr_t)di.dli_fbase != o->exe_base &&
		    (uintptr_t)di.dli_fbase != self_base)
			return q;
	}
	return NULL;
}

/*
 * What the program's symbol `name` resolves to, given dlsym(RTLD_DEFAULT)'s
 * answer p.  A non-PIE executable that takes a library function's address
 * exports a "canonical PLT" entry for it, and dlsym finds that entry: a
 * stub jumping through the executable's own import slot, which we rewrite
 * (python3 does this for malloc: the hook then jumped to itself, forever).
 * Such an answer lies in the executable, at a symbol that is undefined
 * there; the real function is then the first definition in the other
 * objects, in load order.  NULL when there is none (not hooked then).
 */
void *attach_real(const char *name, void *p)
{
	static struct objnames o;
	if (!p)
		return p;
	if (!o.exe_base)
		modules_walk(collect, &o); /* names copied: dlopen is not called inside */
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	/* (dladdr names the stub after the function: its symbol is an
	 * undefined one with a value, the PLT entry's address) */
	if (!dladdr1(p, &di, (void **)&sym, RTLD_DL_SYMENT) || (uintptr_t)di.dli_fbase != o.exe_base ||
	    (sym && sym->st_shndx != SHN_UNDEF))
		return p;
	return first_definition(&o, name, attach_self_base);
}

/*
 * The first definition of `name` in the libraries loaded now, in load
 * order, not counting the executable and this agent; NULL when there is
 * none.  For a hook whose real function arrived after the agent started
 * (hooks.c, late_real): the list is taken afresh, into a mapping of its
 * own (rare, and any thread may ask).
 */
void *agent_first_definition(const char *name)
{
	struct objnames *o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (o == MAP_FAILED)
		return NULL;
	modules_walk(collect, o);
	Dl_info self;
	void *q = NULL;
	if (dladdr((void *)agent_first_definition, &self))
		q = first_definition(o, name, (uintptr_t)self.dli_fbase);
	munmap(o, sizeof(*o));
	return q;
}

/* ---- import slots ------------------------------------------------------------ */

/* The hooks that go into the slots: tracing, and what keeps the agent's
 * descriptors and sampling signal from the program, and its thread states
 * from a vfork child's hooks; exec, which ends the recording (the CLI
 * waited 10 s for a stop the new image could not confirm, and the
 * recording came out cut short), seccomp filters (prctl, syscall), and
 * changes of ids, before which the agent's threads take the caller's
 * capabilities (agent.c, agent_share_caps: glibc aborts the process when
 * one thread's change fails); not fork, exit, signal handlers or dlopen:
 * attach mode leaves those to the program. */
static const char *const hooked[] = {
	"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
	"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
	"pthread_mutex_lock", "pthread_mutex_trylock", "pthread_mutex_unlock", "pthread_rwlock_rdlock",
	"pthread_rwlock_wrlock", "pthread_rwlock_unlock", "pthread_cond_wait", "pthread_cond_timedwait",
	"pthread_cond_signal", "pthread_cond_broadcast", "sem_wait", "sem_timedwait", "sem_post",
	"pthread_cond_clockwait", "pthread_mutex_timedlock", "pthread_mutex_clocklock", "pthread_rwlock_timedrdlock",
	"pthread_rwlock_timedwrlock", "pthread_rwlock_clockrdlock", "pthread_rwlock_clockwrlock", "sem_clockwait",
	"pthread_barrier_wait", "epoll_pwait2", "pthread_timedjoin_np", "pthread_clockjoin_np",
	"read", "write", "pread", "pwrite", "pread64", "pwrite64", "readv", "writev", "open", "open64",
	"openat", "openat64", "close", "close_range", "closefrom", "dup2", "dup3", "fsync", "fdatasync", "recv", "recvfrom", "recvmsg", "send",
	"sendto", "sendmsg", "accept", "accept4", "connect", "poll", "ppoll", "select", "pselect",
	"epoll_wait", "epoll_pwait", "nanosleep", "clock_nanosleep", "usleep", "sleep", "mmap", "mmap64",
	"munmap", "mprotect", "madvise", "clock_gettime", "gettimeofday", "__read_chk", "__pread_chk",
	"__recv_chk", "__recvfrom_chk", "__poll_chk", "__open_2", "__openat_2", "pthread_create",
	"pthread_setname_np", "prctl", "sigwait", "sigwaitinfo", "sigtimedwait", "signalfd", "vfork",
	"pthread_sigmask", "sigprocmask", "execve", "execv", "execvp", "execvpe", "fexecve", "execl", "execlp",
	"execle", "syscall", "setuid", "setgid", "seteuid", "setegid", "setreuid", "setregid", "setresuid",
	"setresgid", "setgroups", "initgroups",
};
#define NHOOKED (sizeof(hooked) / sizeof(hooked[0]))
static void *hook_fn[NHOOKED];

struct patch {
	uint64_t *slot; /* NULL once restored */
	uint64_t old, want;
	uintptr_t base; /* the object's load address */
	int relro;
};
static struct patch *patches;
static size_t npatches, cap_patches;

static long page_size(void)
{
	static long ps;
	if (!ps)
		ps = sysconf(_SC_PAGESIZE);
	return ps;
}

/* Store v in a slot, making its page writable for the store when it is in
 * a read-only (RELRO) region. */
static int store_slot(uint64_t *slot, uint64_t v, int relro)
{
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(page_size() - 1);
	if (relro && syscall(SYS_mprotect, page, page_size(), PROT_READ | PROT_WRITE) != 0)
		return -1;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (relro)
		syscall(SYS_mprotect, page, page_size(), PROT_READ);
	return 0;
}

/*
 * Whether the page holding addr is read-only now (/proc/self/maps).  An
 * object another thread is still loading is already on the loader's list,
 * its RELRO not yet protected: storing into it and protecting the page
 * again would make the loader's own relocation fault.  Its slots wait for
 * the next rescan, when the loader has made them read-only.
 */
static int readonly_line(const char *line, void *arg)
{
	uintptr_t addr = *(uintptr_t *)arg;
	unsigned long lo, hi;
	char perms[8];
	if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || addr < lo || addr >= hi)
		return 0;
	return perms[0] == 'r' && perms[1] == '-' ? 1 : 2;
}

static int page_readonly(uintptr_t addr)
{
	return modules_maps_each(readonly_line, &addr) == 1;
}

static int rescanning, incomplete;

static int hook_index(const char *name)
{
	for (size_t i = 0; i < NHOOKED; i++)
		if (hook_fn[i] && strcmp(hooked[i], name) == 0)
			return (int)i;
	return -1;
}

static void patch_relocs(uintptr_t base, const Elf64_Rela *r, size_t n, const Elf64_Sym *sym, const char *str,
			 uintptr_t relro_lo, uintptr_t relro_hi)
{
	for (size_t i = 0; i < n; i++) {
		unsigned type = (unsigned)ELF64_R_TYPE(r[i].r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		const Elf64_Sym *s = &sym[ELF64_R_SYM(r[i].r_info)];
		if (s->st_name == 0 || s->st_shndx != SHN_UNDEF)
			continue; /* the object's own definition: not an import */
		int h = hook_index(str + s->st_name);
		if (h < 0)
			continue;
		uint64_t *slot = (uint64_t *)(base + r[i].r_offset);
		uint64_t want = (uint64_t)(uintptr_t)hook_fn[h], old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (old == want)
			continue;
		if (npatches == cap_patches) {
			size_t nc = cap_patches ? cap_patches * 2 : 256;
			struct patch *np = realloc(patches, nc * sizeof(*np));
			if (!np)
				return;
			patches = np;
			cap_patches = nc;
		}
		int relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
		if (store_slot(slot, want, relro) == 0)
			patches[npatches++] = (struct patch){slot, old, want, base, relro};
	}
}

/* A dynamic-section pointer: glibc relocates them in place on x86-64
 * (absolute), the vDSO's are not (relative). */
static uintptr_t dyn_ptr(uintptr_t base, uint64_t v)
{
	return v < base ? base + v : v;
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t base = info->dlpi_addr;
	if (base == attach_self_base || (info->dlpi_name && strstr(info->dlpi_name, "linux-vdso")))
		return 0;
	const Elf64_Dyn *dyn = NULL;
	uintptr_t relro_lo = 0, relro_hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const Elf64_Phdr *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = (base + ph->p_vaddr) & ~(uintptr_t)(page_size() - 1);
			relro_hi = (base + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(page_size() - 1);
		}
	}
	if (!dyn)
		return 0;
	const Elf64_Sym *sym = NULL;
	const char *str = NULL;
	const Elf64_Rela *jmprel = NULL, *rela = NULL;
	size_t njmprel = 0, nrela = 0;
	int pltrel_rela = 1;
	for (const Elf64_Dyn *d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: sym = (const Elf64_Sym *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: str = (const char *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_JMPREL: jmprel = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: njmprel = d->d_un.d_val / sizeof(Elf64_Rela); break;
		case DT_RELA: rela = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: nrela = d->d_un.d_val / sizeof(Elf64_Rela); break;
		case DT_PLTREL: pltrel_rela = d->d_un.d_val == DT_RELA; break;
		}
	}
	if (!sym || !str || !pltrel_rela)
		return 0;
	if (rescanning && relro_hi > relro_lo && !page_readonly(relro_lo)) {
		incomplete = 1; /* still being loaded: next time */
		return 0;
	}
	if (jmprel)
		patch_relocs(base, jmprel, njmprel, sym, str, relro_lo, relro_hi);
	if (rela)
		patch_relocs(base, rela, nrela, sym, str, relro_lo, relro_hi);
	return 0;
}

static unsigned long long last_adds; /* objects loaded so far (dl_phdr_info) */

/* From the writer, every flush: objects the program loaded since are
 * hooked too (their imports rewritten, once: slots already ours are left).
 * Not a dlopen hook: glibc's dlopen takes its caller's object for $ORIGIN
 * and the namespace, which a hook in between would change.  1 when
 * something was loaded (the module list wants a rescan). */
int attach_rescan(void)
{
	unsigned long long adds = modules_loader_adds();
	if (adds == last_adds)
		return 0;
	rescanning = 1;
	incomplete = 0;
	modules_walk(patch_object, NULL);
	rescanning = 0;
	if (!incomplete)
		last_adds = adds;
	return 1;
}

int attach_patch(void)
{
	void *self = dlopen(self_file, RTLD_NOW | RTLD_NOLOAD);
	if (!self)
		return -1;
	for (size_t i = 0; i < NHOOKED; i++) {
		void *f = dlsym(self, hooked[i]);
		Dl_info fi;
		/* ours only (a name we do not define would be found elsewhere),
		 * and only where the real function is known (the hook calls it) */
		if (f && dladdr(f, &fi) && (uintptr_t)fi.dli_fbase == attach_self_base &&
		    attach_real(hooked[i], dlsym(RTLD_DEFAULT, hooked[i])))
			hook_fn[i] = f;
	}
	dlclose(self);
	last_adds = modules_loader_adds();
	modules_walk(patch_object, NULL);
	return npatches ? 0 : -1;
}

/*
 * Put back the slots of one loaded object.  Run under dl_iterate_phdr, so
 * that the object cannot be unloaded meanwhile.  Slots of objects unloaded
 * while attached are gone with them and are not touched; a slot that no
 * longer holds our hook (an object unloaded, another loaded at the same
 * address) is left as it is.  Newest first: a slot patched twice gets its
 * first value back.
 */
static int unpatch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uintptr_t lo, hi;
	object_span(info, &lo, &hi);
	for (size_t i = npatches; i-- > 0;) {
		struct patch *p = &patches[i];
		if (!p->slot || p->base != info->dlpi_addr || (uintptr_t)p->slot < lo || (uintptr_t)p->slot >= hi)
			continue;
		if (__atomic_load_n(p->slot, __ATOMIC_ACQUIRE) == p->want)
			store_slot(p->slot, p->old, p->relro);
		p->slot = NULL;
	}
	return 0;
}

void attach_unpatch(void)
{
	modules_walk(unpatch_object, NULL);
	npatches = 0;
}

/*
 * The same in a forked child, without the loader: a thread of the parent
 * may have held its lock at the fork (the program's own dlopen or C++
 * exception, which the agent cannot hold off), and the child's walk would
 * wait for it for ever.  The objects are the ones the parent had at the
 * fork, and nothing unloads one here before this returns, so a slot is
 * put back where its page is still mapped (an object unloaded while
 * attached: its pages may be gone) and it still holds our hook.
 */
void attach_unpatch_forked(void)
{
	long ps = page_size();
	for (size_t i = npatches; i-- > 0;) {
		struct patch *p = &patches[i];
		unsigned char in_core;
		if (!p->slot)
			continue;
		uintptr_t page = (uintptr_t)p->slot & ~(uintptr_t)(ps - 1);
		if (syscall(SYS_mincore, page, ps, &in_core) == 0 && __atomic_load_n(p->slot, __ATOMIC_ACQUIRE) == p->want)
			store_slot(p->slot, p->old, p->relro);
		p->slot = NULL;
	}
	npatches = 0;
}

/* ---- control ------------------------------------------------------------------- */

/* control_open: the FIFO was opened (rhea_g.control_fd, if still ours) */
static dev_t control_dev;
static ino_t control_ino;

int attach_open_control(void)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_CONTROL, dir);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	fd = rhea_fd_high(fd);
	struct stat st;
	if (fstat(fd, &st) == 0) {
		control_dev = st.st_dev;
		control_ino = st.st_ino;
	}
	rhea_g.control_fd = fd;
	control_open = 1;
	return 0;
}

/* The CLI wrote to the FIFO, or is gone (end of file: no writer left). */
int attach_should_stop(void)
{
	if (!control_open)
		return 0;
	/* Lost (agent_move_fd found no other number) or closed behind the
	 * hooks' back: nobody can tell the agent to stop any more, so it does. */
	struct stat st;
	if (rhea_g.control_fd < 0 || fstat(rhea_g.control_fd, &st) != 0 || st.st_dev != control_dev ||
	    st.st_ino != control_ino) {
		rhea_g.control_fd = -1;
		control_open = 0;
		return 1;
	}
	char c;
	ssize_t n = syscall(SYS_read, rhea_g.control_fd, &c, 1);
	if (n == 1 || n == 0) {
		syscall(SYS_close, rhea_g.control_fd);
		rhea_g.control_fd = -1;
		control_open = 0;
		cli_gone = n == 0;
		return 1;
	}
	return 0;
}

/* After the detach: when the CLI is gone (killed), nobody else removes its
 * directory. */
void attach_cleanup(void)
{
	if (!cli_gone)
		return;
	static const char *const files[] = {RHEA_ATTACH_FILES};
	char path[PATH_MAX + 32];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		syscall(SYS_unlink, path);
	}
	syscall(SYS_rmdir, dir);
}

/*
 * safepoint.c - may a thread stopped in a system call, or in the middle
 * of its own code, be made to call dlopen?  (rhea attach)
 *
 * dlopen and the agent's start take libc's locks: the loader's, malloc's.
 * A thread made to call dlopen while it holds one of them deadlocks the
 * process.  The system call a thread is blocked in does not say enough:
 * a read may come from fgets, which holds its FILE's lock, or from the
 * program's own dlopen; a futex wait may be pthread_cond_wait (no lock of
 * libc's held) or malloc waiting for an arena (maybe holding another).
 * What does say it is the libc function the program called.  So the
 * thread's stack is unwound (libdwfl, reading the stopped thread through
 * ptrace, with the CFI of each object: no frame pointers needed), and:
 *
 *   - the innermost frames must be libc's (or the loader's), and the
 *     outermost of them, the function the program called (the "entry"),
 *     must be a wait that holds no lock while it blocks: pthread_cond_wait,
 *     pthread_join, sem_wait, poll, read, nanosleep...;
 *   - further out, no frame may be libc's again except the thread's own
 *     bottom (__libc_start_main and its helper, start_thread and clone3:
 *     the last 3 frames): a wait inside a callback that libc made (from
 *     dl_iterate_phdr, pthread_once, qsort...) may be inside libc's lock;
 *   - the unwind must reach the bottom of the stack, else there is no
 *     verdict (SAFEPOINT_UNKNOWN: the caller decides).
 *
 * A thread stopped while it computes (in no system call) is safe when no
 * frame of its stack is libc's or the loader's (again but for its
 * bottom), nor in an object that brings its own malloc (a thread inside
 * jemalloc's malloc, linked into the program and interposed on libc's,
 * would hold the lock that dlopen's first malloc waits for); an
 * allocator under other names (redis's je_malloc) is never called by
 * dlopen or the agent.  The program's own locks do not matter: neither
 * takes them.
 *
 * Names come from each object's symbol tables (.dynsym is enough: every
 * entry a program can call is exported); a frame counts as a function
 * only inside that symbol's size.  No debug information is looked for
 * (nothing is downloaded, nothing waits on the network).
 */
#include "safepoint.h"
#include "inject.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FRAMES 256
#define BOTTOM_FRAMES 3

#define MAX_MODULES 256

struct safepoint {
	Dwfl *dwfl;
	pid_t pid;
	int nmods;
	struct {
		Dwfl_Module *m;
		int allocator;
	} mods[MAX_MODULES]; /* objects looked at for their own malloc */
};

/* The libc functions a thread may be stopped in when it is used: waits
 * and system calls that hold none of libc's locks while in the kernel.
 * Names without their leading underscores ("__read" is "read"). */
static const char *const waits[] = {
	"poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"nanosleep", "clock_nanosleep", "usleep", "sleep", "pause",
	"accept", "accept4", "read", "readv", "recv", "recvfrom", "recvmsg",
	"pread", "pread64", "preadv", "preadv2", "write", "writev", "pwrite", "pwrite64", "pwritev", "pwritev2",
	"send", "sendto", "sendmsg", "fsync", "fdatasync",
	"wait", "waitpid", "wait4", "waitid", "sigtimedwait", "sigwaitinfo", "sigwait", "sigsuspend",
	"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait",
	"pthread_join", "pthread_timedjoin_np", "pthread_clockjoin_np",
	"sem_wait", "sem_timedwait", "sem_clockwait", "pthread_barrier_wait",
	"pthread_mutex_lock", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
	"pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "pthread_rwlock_timedrdlock",
	"pthread_rwlock_timedwrlock", "pthread_rwlock_clockrdlock", "pthread_rwlock_clockwrlock",
	"syscall", /* syscall(SYS_futex, ...) of a program's own locks: libc's are never taken so */
};

/* A libc name without what glibc puts before its public one: "__read",
 * "__libc_read", "__GI___read" and "_IO_fgets" are read and fgets. */
static const char *plain_name(const char *n)
{
	static const char *const prefixes[] = {"GI_", "libc_", "IO_"};
	for (int again = 1; again;) {
		again = 0;
		while (*n == '_')
			n++;
		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
			if (strncmp(n, prefixes[i], strlen(prefixes[i])) == 0) {
				n += strlen(prefixes[i]);
				again = 1;
			}
	}
	return n;
}

static int is_wait(const char *name)
{
	const char *n = plain_name(name);
	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
		if (strcmp(n, waits[i]) == 0)
			return 1;
	return 0;
}

/* libc's objects and the dynamic loader's: where the locks are. */
static int libc_object(Dwfl_Module *m)
{
	const char *path = m ? dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
	if (!path)
		return 0;
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0 || strncmp(b, "ld-linux", 8) == 0 ||
	       strncmp(b, "libpthread", 10) == 0;
}

/* Does m, not libc, define malloc or free (an allocator interposed on
 * libc's)?  Remembered per object. */
static int allocator_object(struct safepoint *sp, Dwfl_Module *m)
{
	for (int i = 0; i < sp->nmods; i++)
		if (sp->mods[i].m == m)
			return sp->mods[i].allocator;
	int found = 0, n = dwfl_module_getsymtab(m);
	for (int i = 1; i < n && !found; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(m, i, &sym, &addr, NULL, NULL, NULL);
		found = name && sym.st_shndx != SHN_UNDEF && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
			GELF_ST_BIND(sym.st_info) != STB_LOCAL && (strcmp(name, "malloc") == 0 || strcmp(name, "free") == 0);
	}
	if (n < 0)
		found = 1; /* cannot tell: as if it did */
	if (sp->nmods < MAX_MODULES) {
		sp->mods[sp->nmods].m = m;
		sp->mods[sp->nmods++].allocator = found;
	}
	return found;
}

/* The function that holds pc, or NULL (pc outside any sized symbol). */
static const char *function_at(Dwfl_Module *m, uint64_t pc)
{
	GElf_Off off;
	GElf_Sym sym;
	const char *n = m ? dwfl_module_addrinfo(m, pc, &off, &sym, NULL, NULL, NULL) : NULL;
	if (!n || (sym.st_size && off >= sym.st_size) || (!sym.st_size && off))
		return NULL;
	return n;
}

/* A jump through a GOT slot (a PLT entry: [endbr64] [bnd] jmp *slot(%rip)),
 * or a call through one (call *slot(%rip), code built with -fno-plt): the
 * address in the slot, else 0.  ip is the address after the instruction
 * that starts at code + at. */
static uint64_t through_slot(pid_t pid, const unsigned char *code, int at, uint64_t ip)
{
	int32_t disp;
	uint64_t target;
	memcpy(&disp, code + at + 2, 4);
	return inject_read(pid, ip + (uint64_t)(int64_t)disp, &target, 8) == 0 ? target : 0;
}

/* The function that the call before return address ret went to: a direct
 * call (through the PLT, whose slot is read) or a call through the GOT.
 * 0 when it cannot be told (a call through a register...).  This is how a
 * function that left through a tail call (pthread_join jumps into an
 * internal function of libc's, leaving no frame) is still known. */
static uint64_t call_target(pid_t pid, uint64_t ret)
{
	unsigned char c[6], plt[11];
	if (inject_read(pid, ret - 6, c, 6) != 0)
		return 0;
	if (c[0] == 0xff && c[1] == 0x15)
		return through_slot(pid, c, 0, ret);
	if (c[1] != 0xe8)
		return 0;
	int32_t rel;
	memcpy(&rel, c + 2, 4);
	uint64_t t = ret + (uint64_t)(int64_t)rel;
	if (inject_read(pid, t, plt, sizeof(plt)) != 0)
		return t;
	int at = memcmp(plt, "\xf3\x0f\x1e\xfa", 4) == 0 ? 4 : 0; /* endbr64 */
	if (plt[at] == 0xf2)
		at++; /* bnd */
	if (plt[at] == 0xff && plt[at + 1] == 0x25) {
		uint64_t slot_target = through_slot(pid, plt, at, t + (uint64_t)at + 6);
		return slot_target ? slot_target : t;
	}
	return t;
}

struct walk {
	int n;
	uint64_t pc[MAX_FRAMES];
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	/* a return address: look up the call instruction before it */
	w->pc[w->n++] = activation ? pc : pc - 1;
	return w->n < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	return -1;
}

/* The process whose modules mapped_find_elf opens (find_elf has no
 * argument of its own for it; the CLI looks at one process at a time). */
static pid_t find_pid;

/*
 * A module's file as the kernel mapped it: /proc/PID/map_files/START-END
 * of the mapping at base (root only), the very file even when another one
 * is at its path now (replaced on disk), or when its path names another
 * file here or none (a process in a container: judged by our libc's
 * symbols, its own libc's functions would have been misnamed, and a
 * program of its own had no name at all, which left a computing thread no
 * safe point).  Else libdwfl's way: the path, or the image in memory.
 */
static int mapped_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			   char **file_name, Elf **elfp)
{
	char dir[64], want[32];
	snprintf(dir, sizeof(dir), "/proc/%d/map_files", (int)find_pid);
	int wl = snprintf(want, sizeof(want), "%" PRIx64 "-", (uint64_t)base);
	DIR *d = modname[0] == '/' ? opendir(dir) : NULL;
	int fd = -1;
	for (struct dirent *e; d && fd < 0 && (e = readdir(d)) != NULL;)
		if (strncmp(e->d_name, want, (size_t)wl) == 0) {
			char path[sizeof(dir) + sizeof(e->d_name) + 1];
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 && !(*file_name = strdup(path))) {
				close(fd);
				fd = -1;
			}
		}
	if (d)
		closedir(d);
	if (fd >= 0) {
		*elfp = NULL;
		return fd;
	}
	return dwfl_linux_proc_find_elf(mod, userdata, modname, base, file_name, elfp);
}

struct safepoint *safepoint_open(pid_t pid)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = mapped_find_elf,
		.find_debuginfo = no_debuginfo,
	};
	struct safepoint *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->pid = pid;
	find_pid = pid;
	sp->dwfl = dwfl_begin(&cb);
	if (!sp->dwfl || dwfl_linux_proc_report(sp->dwfl, pid) != 0 ||
	    dwfl_report_end(sp->dwfl, NULL, NULL) != 0 ||
	    dwfl_linux_proc_attach(sp->dwfl, pid, true) != 0) {
		safepoint_close(sp);
		return NULL;
	}
	return sp;
}

void safepoint_close(struct safepoint *sp)
{
	if (!sp)
		return;
	if (sp->dwfl)
		dwfl_end(sp->dwfl);
	free(sp);
}

/* The name of the first frame from frame `from` on that is libc's (or
 * the loader's), the thread's own bottom apart ("internals" when it has
 * none), or NULL when there is none. */
static const char *libc_frame_from(const struct safepoint *sp, const struct walk *w, int from)
{
	for (int j = from; j < w->n - BOTTOM_FRAMES; j++) {
		Dwfl_Module *m = dwfl_addrmodule(sp->dwfl, w->pc[j]);
		if (libc_object(m)) {
			const char *f = function_at(m, w->pc[j]);
			return f ? plain_name(f) : "internals";
		}
	}
	return NULL;
}

/* A thread stopped in the middle of its own code (see the top). */
static enum safepoint_verdict check_running(struct safepoint *sp, const struct walk *w, int done, char *what,
					    size_t len)
{
	if (done != 0) {
		snprintf(what, len, "a stack that could not be read to its end");
		return SAFEPOINT_UNKNOWN;
	}
	const char *inside = libc_frame_from(sp, w, 0);
	if (inside) {
		snprintf(what, len, "libc's %s", inside);
		return SAFEPOINT_NO;
	}
	for (int j = 0; j < w->n; j++) {
		Dwfl_Module *m = dwfl_addrmodule(sp->dwfl, w->pc[j]);
		if (!m) {
			snprintf(what, len, "code outside any object");
			return SAFEPOINT_UNKNOWN;
		}
		if (!libc_object(m) && allocator_object(sp, m)) {
			snprintf(what, len, "%s, which has its own malloc", dwfl_module_info(m, NULL, NULL, NULL, NULL,
											 NULL, NULL, NULL));
			return SAFEPOINT_NO;
		}
	}
	const char *leaf = function_at(dwfl_addrmodule(sp->dwfl, w->pc[0]), w->pc[0]);
	snprintf(what, len, "%s", leaf ? leaf : "the program's code");
	return SAFEPOINT_YES;
}

enum safepoint_verdict safepoint_check(struct safepoint *sp, pid_t tid, int running, char *what, size_t len)
{
	static struct walk w; /* 2 KB: not on the stack; one caller at a time */
	w.n = 0;
	int done = dwfl_getthread_frames(sp->dwfl, tid, frame_cb, &w);
	if (w.n == 0) {
		snprintf(what, len, "no stack: %s", dwfl_errmsg(-1));
		return SAFEPOINT_UNKNOWN;
	}
	if (running)
		return check_running(sp, &w, done, what, len);
	int i = 0;
	while (i < w.n && libc_object(dwfl_addrmodule(sp->dwfl, w.pc[i])))
		i++;
	if (i == 0) {
		snprintf(what, len, "a system call made outside libc");
		return SAFEPOINT_UNKNOWN;
	}
	if (i == w.n) {
		snprintf(what, len, "a stack that does not leave libc");
		return done == 0 ? SAFEPOINT_NO : SAFEPOINT_UNKNOWN;
	}
	/* the function the program called: the target of its call, when that
	 * is one of libc's, else the outermost of libc's frames */
	uint64_t called = call_target(sp->pid, w.pc[i] + 1);
	Dwfl_Module *cm = called ? dwfl_addrmodule(sp->dwfl, called) : NULL;
	const char *entry = cm && libc_object(cm) ? function_at(cm, called) : NULL;
	if (!entry)
		entry = function_at(dwfl_addrmodule(sp->dwfl, w.pc[i - 1]), w.pc[i - 1]);
	snprintf(what, len, "%s", entry ? plain_name(entry) : "an internal function of libc");
	if (!entry || !is_wait(entry))
		return SAFEPOINT_NO;
	if (done != 0)
		return SAFEPOINT_UNKNOWN; /* not seen to the bottom */
	const char *caller = libc_frame_from(sp, &w, i);
	if (caller) {
		snprintf(what, len, "%s, called back from libc's %s", plain_name(entry), caller);
		return SAFEPOINT_NO;
	}
	return SAFEPOINT_YES;
}

/*
 * inject.c - make a running process load a library (rhea attach).
 *
 * One thread of the process is stopped with ptrace (PTRACE_SEIZE +
 * PTRACE_INTERRUPT, which unlike SIGSTOP leaves no trace in the process),
 * and made to call dlopen(path, RTLD_NOW) on its own stack, returning to a
 * stub of ours that stops it again at a system call, where its registers
 * are put back as they were and it goes on; should rhea attach be gone by
 * then, the stub puts them back itself (stub_make).  The short calls
 * around it (errno's address, mmap for the stub) return to address 0: the
 * fault stops the thread.
 *
 * Only a thread in a call that holds no lock of libc's, with room on its
 * stack (the main thread on its own stack, or another with 512 KB left),
 * is used: blocked in an event loop's poll or epoll_wait, a sleep, an
 * accept, a read, a condition wait, a join, or stopped as a read or a
 * write returns.  A thread stopped in the middle of malloc (or of the
 * program's own dlopen, or of fgets) holds locks that dlopen needs:
 * calling it there would deadlock the process.  Which call it is comes
 * from its stack (safepoint.c: the libc function the program called);
 * when the stack cannot be read, only a thread blocked in one of a few
 * system calls (poll, read, nanosleep... never a futex, which may be one
 * of libc's locks) is used.  When no thread is in such a call for a
 * second, a thread stopped in the middle of its own computation is used
 * too, if its stack shows no frame of libc's (safepoint.c): a process that
 * only computes can be attached.  Threads in any other state are let go
 * at once and tried again later.
 *
 * Everything the call may change is put back: the general registers, the
 * x87/SSE/AVX state (PTRACE_GETREGSET NT_X86_XSTATE: a thread stopped in
 * its own floating-point loop has live values in vector registers, which
 * dlopen's memcpy would otherwise leave changed), and errno (read through
 * the thread's own __errno_location() before, written back after).
 *
 * A system call interrupted by the stop is restarted as the kernel would
 * after a signal: the saved registers (rax = -ERESTART..., orig_rax = the
 * call) are what its restart logic reads once the thread resumes.  While
 * dlopen runs, orig_rax is -1 so that nothing is restarted then.
 *
 * dlopen's address in the process is its libc's load address (from
 * /proc/PID/maps) plus the symbol's offset in that libc's dynamic symbol
 * table (read with libelf), so the process's libc need not be ours.
 */
#include "cli.h"
#include "inject.h"
#include "safepoint.h"
#include "seccomp.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <elf.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	return (uint64_t)cli_now_ns() / 1000000;
}

/* The system calls a thread may be stopped in when it is made to call
 * dlopen: waits that hold none of libc's locks. */
static int safe_call(long nr)
{
	switch (nr) {
	case SYS_poll:
	case SYS_ppoll:
	case SYS_select:
	case SYS_pselect6:
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_pause:
	case SYS_accept:
	case SYS_accept4:
	case SYS_read:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_wait4:
	case SYS_rt_sigtimedwait:
	case SYS_rt_sigsuspend:
		return 1;
	}
	return 0;
}

static int interrupted(long long rax)
{
	return rax == -EINTR || rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND ||
	       rax == -ERESTART_RESTARTBLOCK;
}

/*
 * Waits Linux never restarts: stopped by the injector's PTRACE_INTERRUPT
 * (as by SIGSTOP), they return EINTR to the program, which it never asked
 * for (signal(7)), and every round of the safe-point search interrupts
 * every thread again: a thread in semop got a hundred EINTRs in 5 s.
 * Those waiting without a time limit are made to wait again: their system
 * call instruction is run once more with the same arguments (rip back
 * over the 2-byte `syscall`, rax the call's number), which is what the
 * kernel does for the calls it restarts.  One with a time limit keeps its
 * EINTR: waiting again would start the whole time anew, at every round of
 * the search.
 */
/* The system call instruction before r's rip runs again, as call nr (the
 * kernel's own restart: rip back over the 2-byte `syscall`). */
static void run_again(struct user_regs_struct *r, long nr)
{
	r->rax = (unsigned long long)nr;
	r->rip -= 2;
}

static int wait_again(struct user_regs_struct *r)
{
	if ((long long)r->orig_rax < 0 || (long long)r->rax != -EINTR)
		return 0;
	int forever;
	switch ((long)r->orig_rax) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		forever = (int)r->r10 < 0;
		break;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_semtimedop:
		forever = r->r10 == 0;
		break;
	case SYS_rt_sigtimedwait:
		forever = r->rdx == 0;
		break;
	case SYS_semop:
		forever = 1;
		break;
	default:
		forever = 0;
	}
	if (!forever)
		return 0;
	run_again(r, (long)r->orig_rax);
	return 1;
}

int inject_maps_each(pid_t pid, int (*fn)(const char *line, void *arg), void *arg)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int r = 0;
	while (!r && fgets(line, sizeof(line), f))
		r = fn(line, arg);
	fclose(f);
	return r;
}

struct libc_at {
	uint64_t base;
	char lib[4096];
};

static int libc_line(const char *line, void *arg)
{
	struct libc_at *a = arg;
	unsigned long lo, off;
	char file[4096];
	if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %4095s", &lo, &off, file) != 3 || off != 0)
		return 0;
	const char *b = strrchr(file, '/');
	if (!b || strncmp(b + 1, "libc.so", 7) != 0)
		return 0;
	a->base = lo;
	snprintf(a->lib, sizeof(a->lib), "%s", file);
	return 1;
}

/* The libc functions the injector calls in the process. */
struct libc_fns {
	uint64_t dlopen, dlerror, errno_location; /* 0: not found (only dlopen is needed) */
	uint64_t mmap, mprotect, munmap;          /* for the return stub (0: none) */
	uint64_t base;                            /* where that libc was */
};

/* Their addresses in pid: its libc's base plus each symbol's value (one
 * pass over that libc's dynamic symbols).  0, or -1 with one line in err. */
static int libc_functions(pid_t pid, struct libc_fns *f, char *err, size_t errlen)
{
	static struct libc_at at;
	at.base = 0;
	memset(f, 0, sizeof(*f));
	if (inject_maps_each(pid, libc_line, &at) < 0) {
		say(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(errno));
		return -1;
	}
	if (!at.base) {
		say(err, errlen, "process %d has no libc.so loaded (a static or non-glibc program?)", (int)pid);
		return -1;
	}
	f->base = at.base;
	/* the process's own view of the file (another mount namespace) */
	char root[4200];
	snprintf(root, sizeof(root), "/proc/%d/root%s", (int)pid, at.lib);
	int fd = open(root, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open(at.lib, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say(err, errlen, "cannot open the process's %s: %s", at.lib, strerror(errno));
		return -1;
	}
	struct {
		const char *name;
		uint64_t *addr;
	} want[] = {{"dlopen", &f->dlopen},     {"dlerror", &f->dlerror},   {"__errno_location", &f->errno_location},
		    {"mmap", &f->mmap},         {"mprotect", &f->mprotect}, {"munmap", &f->munmap}};
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	uint64_t first_load = UINT64_MAX;
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < first_load)
				first_load = ph.p_vaddr & ~(uint64_t)0xfff;
		}
	for (Elf_Scn *scn = NULL; e && first_load != UINT64_MAX && (scn = elf_nextscn(e, scn)) != NULL;) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / (sh.sh_entsize ? sh.sh_entsize : 24); i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC)
				continue;
			const char *n = elf_strptr(e, sh.sh_link, sym.st_name);
			for (size_t k = 0; n && k < sizeof(want) / sizeof(want[0]); k++)
				if (!*want[k].addr && strcmp(n, want[k].name) == 0)
					*want[k].addr = at.base - first_load + sym.st_value;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	if (!f->dlopen) {
		say(err, errlen, "no dlopen in %s (glibc older than 2.34?)", at.lib);
		return -1;
	}
	return 0;
}

/* Is libc still where fns found it?  A process that execs while the
 * search goes on runs another image, with its libc elsewhere: calling the
 * old dlopen's address crashed it (SIGSEGV in the new program). */
static int libc_moved(pid_t pid, const struct libc_fns *fns)
{
	static struct libc_at at;
	at.base = 0;
	return inject_maps_each(pid, libc_line, &at) < 0 || at.base != fns->base;
}

/* Wait up to ms for tid to stop; its status in *st.  0, or -1 (timeout,
 * or it is gone). */
static int wait_stop(pid_t tid, int *st, int ms)
{
	/* A stop sends SIGCHLD to its tracer: blocked, it waits in
	 * sigtimedwait for us (taken or not, waitpid says what came).  Until
	 * 2026-12-01 this looked every millisecond: each of the ~100 system
	 * calls of an agent's start, stopped at twice, cost about one, and
	 * the process stood still 150-300 ms, all of it in the recording. */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &old);
	int64_t end = cli_now_ns() + (int64_t)ms * 1000000;
	int rc = -1;
	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | WNOHANG);
		if (r == tid) {
			rc = WIFSTOPPED(*st) ? 0 : -1;
			break;
		}
		int64_t left = end - cli_now_ns();
		if (r < 0 || left <= 0)
			break;
		struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
		sigtimedwait(&chld, NULL, &ts); /* (EINTR: Ctrl-C's handler ran; look again) */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int inject_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int write_mem(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = {(void *)buf, len}, remote = {(void *)(uintptr_t)addr, len};
	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Room below sp in the mapping that holds it, bytes (0 when not found);
 * *main_stack set when that mapping is the process's [stack].  dlopen and
 * the agent's start run there: the main thread's stack grows as needed,
 * but it must be on it (not on a coroutine's stack in the heap); another
 * thread needs 512 KB left (some programs make 64 KB stacks). */
struct room {
	uint64_t sp;
	int main_stack;
};

static int room_line(const char *line, void *arg)
{
	struct room *r = arg;
	unsigned long lo, hi;
	if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || r->sp < lo || r->sp >= hi)
		return 0;
	r->sp -= lo;
	r->main_stack = strstr(line, " [stack]") != NULL;
	return 1;
}

static uint64_t stack_room(pid_t pid, uint64_t sp, int *main_stack)
{
	struct room r = {sp, 0};
	int found = inject_maps_each(pid, room_line, &r) == 1;
	*main_stack = found && r.main_stack;
	return found ? r.sp : 0;
}

#define MIN_STACK_ROOM (512u << 10)

/* The task's state letter from /proc (R, S, D, T, t, Z, X...), 0 when it
 * is gone. */
const char *inject_task_stat(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

char inject_task_state(pid_t pid, pid_t tid)
{
	char buf[512];
	const char *f = inject_task_stat(pid, tid, buf, sizeof(buf));
	return f ? f[0] : 0;
}

/* The field key of /proc/TID/status in base (10; 16 for the Cap* masks)
 * into *v: 0, or -1 when it has none or cannot be read. */
static int status_field(pid_t tid, const char *key, int base, unsigned long long *v)
{
	char path[64], line[256];
	int found = -1;
	size_t klen = strlen(key);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "re");
	while (f && found < 0 && fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			*v = strtoull(line + klen + 1, NULL, base);
			found = 0;
		}
	if (f)
		fclose(f);
	return found;
}

long inject_status_number(pid_t tid, const char *key, long def)
{
	unsigned long long v;
	return status_field(tid, key, 10, &v) == 0 ? (long)v : def;
}

#define CAP_BIT_SYS_PTRACE 19

void inject_ptrace_denied(pid_t pid, char *why, size_t n)
{
	unsigned long long mine = 0, theirs = 0;
	int have_caps = status_field(getpid(), "CapEff", 16, &mine) == 0;
	int may_ptrace = have_caps && (mine >> CAP_BIT_SYS_PTRACE & 1);
	long scope = -1;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%ld", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	if (scope == 3)
		snprintf(why, n, "kernel.yama.ptrace_scope is 3: no process may be traced until reboot");
	else if (scope == 2 && !may_ptrace)
		snprintf(why, n, "kernel.yama.ptrace_scope is 2: only with CAP_SYS_PTRACE (as root)");
	else if (scope == 1 && !may_ptrace)
		snprintf(why, n, "kernel.yama.ptrace_scope is 1: only its parent, or root, may trace it");
	else if (have_caps && !may_ptrace && status_field(pid, "CapPrm", 16, &theirs) == 0 && (theirs & ~mine))
		snprintf(why, n, "it holds capabilities rhea lacks (mask %#llx), and rhea has no CAP_SYS_PTRACE",
			 theirs & ~mine);
	else
		/* yama (if any) and the capabilities allow it: what refused is
		 * another security module (Landlock, SELinux, AppArmor) or the
		 * sandbox or container rhea itself runs in */
		snprintf(why, n, "the kernel refused although %s: a security module, or the sandbox rhea runs in, "
			 "forbids it", may_ptrace ? "rhea holds CAP_SYS_PTRACE"
				   : scope < 0 ? "there is no yama and it is rhea's user's"
					       : "yama allows it and it is rhea's user's");
}

/* The task is gone or a zombie (ptrace then fails with EPERM, not ESRCH). */
int inject_task_gone(pid_t pid, pid_t tid)
{
	char st = inject_task_state(pid, tid);
	return st == 0 || st == 'Z' || st == 'X';
}

/* A thread other than the main one still runs (the main one called
 * pthread_exit). */
int inject_other_task_alive(pid_t pid)
{
	char task[64];
	snprintf(task, sizeof(task), "/proc/%d/task", (int)pid);
	DIR *d = opendir(task);
	int any = 0;
	for (struct dirent *de; d && !any && (de = readdir(d)) != NULL;) {
		long t = atol(de->d_name);
		any = t > 0 && t != pid && !inject_task_gone(pid, (pid_t)t);
	}
	if (d)
		closedir(d);
	return any;
}

enum { TRY_AGAIN = 1, TRY_AGAIN_MOVED = 2 /* the process exec'ed */, TRY_AGAIN_STOPPED = 3 /* in a group stop */ };

/* the return stub (below): its code, and where its system call returns */
extern const unsigned char rhea_stub_start[], rhea_stub_syscalled[], rhea_stub_end[];
#define STUB_SYSCALLED ((uint64_t)(rhea_stub_syscalled - rhea_stub_start))

/* Make the stopped thread tid call fn(a[0..5]) on its stack, below the
 * address `below`, returning to address 0: the fault stops it again; or,
 * with a stub (below), returning to it, run with PTRACE_SYSCALL until it
 * stops at the stub's system call.  0 with the result in *ret; TRY_AGAIN
 * when it could not be started, or fn is not there (registers as they
 * were); -2 when it did not come back within 10 s (its state unknown).
 * Signals that come meanwhile are passed on. */
static int remote_call6(pid_t tid, const struct user_regs_struct *saved, uint64_t fn, const uint64_t a[6],
			uint64_t below, uint64_t stub, uint64_t *ret)
{
	struct user_regs_struct r = *saved;
	uint64_t at = (below & ~(uint64_t)15) - 8; /* entry: rsp + 8 aligned */
	if (write_mem(tid, at, &stub, 8) != 0)
		return TRY_AGAIN;
	r.rsp = at;
	r.rip = fn;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1; /* no restart of the interrupted call now */
	int resume = stub ? PTRACE_SYSCALL : PTRACE_CONT;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) != 0 || ptrace(resume, tid, 0, 0) != 0) {
		ptrace(PTRACE_SETREGS, tid, 0, saved);
		return TRY_AGAIN;
	}
	/* (the test suite's way to kill rhea attach while the thread is in
	 * dlopen: tests/e2e, attach/cli-killed) */
	if (stub && getenv("RHEA_TEST_DIE_IN_DLOPEN"))
		kill(getpid(), SIGKILL);
	/* (and to stop the process while the thread is in dlopen, which it
	 * finishes all the same: attach/stopped/in-dlopen) */
	if (stub && getenv("RHEA_TEST_STOP_IN_DLOPEN"))
		kill(tid, SIGSTOP);
	uint64_t end = now_ms() + 10000;
	for (;;) {
		int st;
		if (wait_stop(tid, &st, (int)(end > now_ms() ? end - now_ms() : 0)) != 0)
			return -2;
		int sig = WSTOPSIG(st);
		struct user_regs_struct now;
		int regs = ptrace(PTRACE_GETREGS, tid, 0, &now) == 0;
		if (regs && !stub && sig == SIGSEGV && now.rip == 0) {
			*ret = now.rax;
			return 0;
		}
		if (regs && stub && sig == (SIGTRAP | 0x80) && now.rip == stub + STUB_SYSCALLED) {
			*ret = now.rdi; /* (the stub keeps fn's result there) */
			return 0;
		}
		if (regs && sig == SIGSEGV && now.rip == fn) {
			/* nothing there to call (the process exec'ed): the fault
			 * is ours, not the program's, and nothing ran */
			ptrace(PTRACE_SETREGS, tid, 0, saved);
			return TRY_AGAIN;
		}
		if ((st >> 16) == PTRACE_EVENT_STOP || sig == (SIGTRAP | 0x80))
			sig = 0; /* (a stop, or one of fn's own system calls) */
		ptrace(resume, tid, 0, sig);
	}
}

static int remote_call(pid_t tid, const struct user_regs_struct *saved, uint64_t fn, uint64_t a0, uint64_t a1,
		       uint64_t below, uint64_t *ret)
{
	const uint64_t a[6] = {a0, a1, 0, 0, 0, 0};
	return remote_call6(tid, saved, fn, a, below, 0, ret);
}

/*
 * Where dlopen returns: a stub of our own in the process, not address 0,
 * should rhea attach die while the thread is in dlopen (tens of ms, more
 * with a cold CFI cache).  Its tracer gone, the thread went on, returned
 * to 0 and the process died of SIGSEGV (4 targets of 8 when the CLI was
 * killed with SIGKILL in the first 80 ms).  The stub first makes a system
 * call (getpid), where rhea attach, running the thread with
 * PTRACE_SYSCALL, takes over as before; with nobody there, the stub puts
 * the thread back as it was by itself: its x87/SSE/AVX state (XRSTOR),
 * errno, the general registers and flags, and jumps to where it was (its
 * interrupted system call restarted as the kernel would: resumed()).  The
 * page is mapped in the process for the call (mmap, mprotect: return to 0,
 * a few microseconds each) and unmapped after it.
 *
 * The page: the code, then the state it restores at fixed offsets, the
 * XSAVE image 64-byte aligned at STUB_XSAVE.
 */
#define STUB_SIZE 16384
#define STUB_REGS 512     /* r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi */
#define STUB_RSP 632      /* the stack pointer below the flags and the return address */
#define STUB_ERRNO_AT 640
#define STUB_ERRNO 648
#define STUB_HAVE_X 656
#define STUB_XSAVE 1024
#define STUB_STR_(x) #x
#define STUB_STR(x) STUB_STR_(x)
#define STUB_AT(off) "rhea_stub_start+" STUB_STR(off) "(%rip)"
#define STUB_REG(k, reg) "	mov rhea_stub_start+" STUB_STR(STUB_REGS) "+8*" #k "(%rip), %" #reg "\n"
__asm__(".pushsection .text\n"
	".p2align 6\n"
	".globl rhea_stub_start, rhea_stub_syscalled, rhea_stub_end\n"
	".hidden rhea_stub_start, rhea_stub_syscalled, rhea_stub_end\n"
	"rhea_stub_start:\n"
	"	mov %rax, %rdi\n"
	"	mov $39, %eax\n" /* getpid */
	"	syscall\n"
	"rhea_stub_syscalled:\n"
	"	cmpq $0, " STUB_AT(STUB_HAVE_X) "\n"
	"	je 1f\n"
	"	mov $-1, %eax\n"
	"	mov $-1, %edx\n"
	"	xrstor64 " STUB_AT(STUB_XSAVE) "\n"
	"1:	mov " STUB_AT(STUB_ERRNO_AT) ", %rcx\n"
	"	test %rcx, %rcx\n"
	"	je 2f\n"
	"	mov " STUB_AT(STUB_ERRNO) ", %edx\n"
	"	mov %edx, (%rcx)\n"
	"2:	mov " STUB_AT(STUB_RSP) ", %rsp\n"
	"	popfq\n"
	STUB_REG(0, r15) STUB_REG(1, r14) STUB_REG(2, r13) STUB_REG(3, r12) STUB_REG(4, rbp)
	STUB_REG(5, rbx) STUB_REG(6, r11) STUB_REG(7, r10) STUB_REG(8, r9) STUB_REG(9, r8)
	STUB_REG(10, rax) STUB_REG(11, rcx) STUB_REG(12, rdx) STUB_REG(13, rsi) STUB_REG(14, rdi)
	"	ret $128\n" /* the return address at rsp - 136, then rsp */
	"rhea_stub_end:\n"
	".popsection\n");
_Static_assert(STUB_RSP == STUB_REGS + 15 * 8, "the stack pointer follows the 15 registers");
/* The stub in tid's process for a thread to go on with regs f (xstate:
 * its XSAVE image, len bytes, or none; errno at eloc, 0 none): its
 * address, or 0 (then dlopen returns to 0, as before). */
static uint64_t stub_make(pid_t tid, const struct user_regs_struct *saved, const struct libc_fns *fns,
			  const struct user_regs_struct *f, const void *xstate, size_t len, uint64_t eloc, int errno_was,
			  uint64_t below)
{
	if (!fns->mmap || !fns->mprotect || !fns->munmap || rhea_stub_end - rhea_stub_start > STUB_REGS)
		return 0;
	static unsigned char page[STUB_SIZE] __attribute__((aligned(64)));
	memset(page, 0, sizeof(page));
	memcpy(page, rhea_stub_start, (size_t)(rhea_stub_end - rhea_stub_start));
	const uint64_t gpr[15] = {f->r15, f->r14, f->r13, f->r12, f->rbp, f->rbx, f->r11, f->r10,
				  f->r9,  f->r8,  f->rax, f->rcx, f->rdx, f->rsi, f->rdi};
	memcpy(page + STUB_REGS, gpr, sizeof(gpr));
	uint64_t top = f->rsp - 136, frame[2] = {f->eflags, f->rip}, sp = top - 8;
	memcpy(page + STUB_RSP, &sp, 8);
	memcpy(page + STUB_ERRNO_AT, &eloc, 8);
	memcpy(page + STUB_ERRNO, &errno_was, 4);
	uint64_t have_x = xstate && len <= STUB_SIZE - STUB_XSAVE;
	memcpy(page + STUB_HAVE_X, &have_x, 8);
	if (have_x)
		memcpy(page + STUB_XSAVE, xstate, len);
	uint64_t addr = 0;
	const uint64_t m[6] = {0, STUB_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0};
	if (remote_call6(tid, saved, fns->mmap, m, below, 0, &addr) != 0 || addr == 0 || addr >= (uint64_t)-4096)
		return 0;
	uint64_t r = 0;
	const uint64_t p[6] = {addr, STUB_SIZE, PROT_READ | PROT_EXEC, 0, 0, 0};
	if (write_mem(tid, sp, frame, sizeof(frame)) != 0 || write_mem(tid, addr, page, sizeof(page)) != 0 ||
	    remote_call6(tid, saved, fns->mprotect, p, below, 0, &r) != 0 || r != 0) {
		const uint64_t u[6] = {addr, STUB_SIZE, 0, 0, 0, 0};
		remote_call6(tid, saved, fns->munmap, u, below, 0, &r);
		return 0;
	}
	return addr;
}

/* How the thread goes on from saved: a system call the stop interrupted
 * restarted here, as the kernel's signal code restarts it (then it owes
 * the kernel nothing: orig_rax -1), for the stub to do alone. */
static struct user_regs_struct resumed(const struct user_regs_struct *r)
{
	struct user_regs_struct f = *r;
	long long rax = (long long)f.rax;
	if ((long long)f.orig_rax >= 0 && (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND))
		run_again(&f, (long)f.orig_rax);
	else if ((long long)f.orig_rax >= 0 && rax == -ERESTART_RESTARTBLOCK)
		run_again(&f, SYS_restart_syscall);
	f.orig_rax = (unsigned long long)-1;
	return f;
}

/*
 * May the stopped thread tid (its status st, registers r) load the agent
 * now?  1 yes (how it was stopped, for the user, in via), 0 not now (when
 * its stack said why, that in seen), with *pass a signal on its way to it
 * to hand back on detach.  spt may be NULL; a thread stopped while it
 * computes is considered only with allow_running, and only on its stack's
 * word.
 */
static int at_safe_point(pid_t pid, pid_t tid, int st, const struct user_regs_struct *r, struct safepoint *spt,
			 int allow_running, int *pass, char *seen, size_t seenlen, char *via, size_t vialen)
{
	if ((st >> 16) != PTRACE_EVENT_STOP || WSTOPSIG(st) != SIGTRAP) {
		/* a signal on its way to the thread, or the process stopped by
		 * SIGSTOP: not now */
		if ((st >> 16) != PTRACE_EVENT_STOP)
			*pass = WSTOPSIG(st);
		return 0;
	}
	/* computing; blocked in a call (interrupted by the stop); or stopped
	 * as a call that did not block returned (a read from the page cache):
	 * that one only on its stack's word, nothing to restart */
	int running = (long long)r->orig_rax < 0;
	int returned = !running && !interrupted((long long)r->rax);
	if ((running && !allow_running) || ((running || returned) && !spt))
		return 0;
	int listed = !running && !returned && safe_call((long)r->orig_rax);
	if (!spt && !listed)
		return 0; /* a call that may hold a lock, and no stack to say */
	int main_stack;
	uint64_t room = stack_room(pid, r->rsp, &main_stack);
	if (tid == pid ? !main_stack : room < MIN_STACK_ROOM)
		return 0; /* not on a stack that has room for dlopen */
	char what[160];
	enum safepoint_verdict v = spt ? safepoint_check(spt, tid, running, what, sizeof(what)) : SAFEPOINT_UNKNOWN;
	if (v == SAFEPOINT_NO)
		snprintf(seen, seenlen, "thread %d %s %s", (int)tid, running ? "running in" : "in", what);
	if (v == SAFEPOINT_NO || (v == SAFEPOINT_UNKNOWN && (!listed || returned)))
		return 0;
	if (v == SAFEPOINT_YES)
		snprintf(via, vialen, "thread %d, %s %s", (int)tid, running ? "running in" : "stopped in", what);
	else
		snprintf(via, vialen, "thread %d, stopped in system call %lld", (int)tid, (long long)r->orig_rax);
	return 1;
}

/*
 * The stopped thread tid calls dlopen(lib, RTLD_NOW) on its stack below
 * saved's; errno is put back after (dlopen sets it: a path of the library
 * search that is not there, and the thread may be between `errno = 0` and
 * the call whose errno it then reads).  0 (*handle set), TRY_AGAIN (not
 * started), -1 error (said), -2 the thread did not come back (said).
 */
static int load_through(pid_t pid, pid_t tid, const struct user_regs_struct *saved,
			const struct user_regs_struct *final, const void *xstate, size_t xlen, const struct libc_fns *fns,
			uint64_t fn, const char *lib, uint64_t *handle, char *err, size_t errlen)
{
	size_t len = strlen(lib) + 1;
	uint64_t sp = (saved->rsp - 4096) & ~(uint64_t)15; /* well below the red zone */
	uint64_t str = sp - ((len + 15) & ~(size_t)15);
	if (write_mem(tid, str, lib, len) != 0) {
		say(err, errlen, "cannot write into process %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	uint64_t eloc = 0;
	int errno_was, have_errno = fns->errno_location &&
				    remote_call(tid, saved, fns->errno_location, 0, 0, str, &eloc) == 0 && eloc &&
				    inject_read(tid, eloc, &errno_was, sizeof(errno_was)) == 0;
	uint64_t stub = stub_make(tid, saved, fns, final, xstate, xlen, have_errno ? eloc : 0,
				  have_errno ? errno_was : 0, str);
	const uint64_t a[6] = {str, fn ? 0 : RTLD_NOW, 0, 0, 0, 0};
	int rc = remote_call6(tid, saved, fn ? fn : fns->dlopen, a, str, stub, handle);
	if (rc == 0 && !*handle && !fn) {
		/* why: dlerror()'s message, read from the process */
		uint64_t msg = 0;
		char text[256] = "";
		if (fns->dlerror && remote_call(tid, saved, fns->dlerror, 0, 0, str, &msg) == 0 && msg) {
			struct iovec local = {text, sizeof(text) - 1}, remote = {(void *)(uintptr_t)msg, sizeof(text) - 1};
			if (process_vm_readv(pid, &local, 1, &remote, 1, 0) <= 0) /* may end before 255 bytes do */
				text[0] = 0;
		}
		say(err, errlen, "dlopen of the agent failed in process %d%s%s%s", (int)pid, text[0] ? ": " : "",
		    text, strstr(text, "static TLS") ? " (each attach takes some of it: this process was attached "
						       "too many times)" : "");
		rc = -1;
	}
	if (rc == -2) {
		say(err, errlen, "process %d did not come back from %s the agent", (int)pid,
		    fn ? "restarting" : "loading");
		return rc; /* (the stub stays: the thread may still need it) */
	}
	if (stub) {
		uint64_t r;
		const uint64_t u[6] = {stub, STUB_SIZE, 0, 0, 0, 0};
		remote_call6(tid, saved, fns->munmap, u, str, 0, &r);
	}
	if (have_errno)
		write_mem(tid, eloc, &errno_was, sizeof(errno_was));
	return rc;
}

/* Try tid: 0 done (*handle set, where it was stopped in via), TRY_AGAIN
 * not at a safe point (why, when its stack said so, in seen),
 * TRY_AGAIN_STOPPED not either, in a group stop, -1 error. */
static int try_thread(pid_t pid, pid_t tid, const struct libc_fns *fns, uint64_t fn, const char *lib,
		      struct safepoint *spt, int allow_running, uint64_t *handle, char *seen, size_t seenlen, char *via,
		      size_t vialen, char *err, size_t errlen)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) != 0) {
		if (errno == ESRCH || inject_task_gone(pid, tid))
			return TRY_AGAIN; /* gone meanwhile */
		int e = errno;
		long tracer = e == EPERM ? inject_status_number(pid, "TracerPid", -1) : 0;
		if (tracer > 0) {
			char comm[64] = "?", path[64];
			snprintf(path, sizeof(path), "/proc/%ld/comm", tracer);
			FILE *f = fopen(path, "r");
			if (f) {
				if (fgets(comm, sizeof(comm), f))
					comm[strcspn(comm, "\n")] = 0;
				fclose(f);
			}
			say(err, errlen, "process %d is traced by process %ld (%s)%s: one tracer at a time", (int)pid,
			    tracer, comm, strcmp(comm, "rhea") == 0 ? ", another rhea attach" : "");
			return -1;
		}
		char why[256] = "";
		if (e == EPERM)
			inject_ptrace_denied(pid, why, sizeof(why));
		say(err, errlen, "cannot trace process %d: %s%s%s%s", (int)pid, strerror(e), *why ? " (" : "", why,
		    *why ? ")" : "");
		return -1;
	}
	int st, rc = TRY_AGAIN, pass = 0;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0 || wait_stop(tid, &st, 1000) != 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return TRY_AGAIN;
	}
	struct user_regs_struct stopped, saved;
	if (ptrace(PTRACE_GETREGS, tid, 0, &stopped) != 0)
		goto out;
	saved = stopped; /* what it goes on with */
	if ((st >> 16) == PTRACE_EVENT_STOP && wait_again(&saved))
		ptrace(PTRACE_SETREGS, tid, 0, &saved);
	if (!at_safe_point(pid, tid, st, &stopped, spt, allow_running, &pass, seen, seenlen, via, vialen)) {
		/* a stop signal's stop, or on its way to it (passed on) */
		int sig = WSTOPSIG(st);
		if (((st >> 16) == PTRACE_EVENT_STOP || (st >> 16) == 0) &&
		    (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU))
			rc = TRY_AGAIN_STOPPED;
		goto out; /* untouched, but for a wait made to wait again */
	}
	if (libc_moved(pid, fns)) {
		rc = TRY_AGAIN_MOVED;
		goto out;
	}
	char why[256];
	if (seccomp_check(tid, why, sizeof(why)) != 0) {
		say(err, errlen, "%s: not attached", why);
		rc = -1;
		goto out;
	}
	/* Everything the call may change goes back: the general registers
	 * and the x87/SSE/AVX state, which dlopen uses (a thread stopped in
	 * the middle of its own code has live values in vector registers). */
	static unsigned char xstate[16384] __attribute__((aligned(64)));
	struct iovec xs = {xstate, sizeof(xstate)};
	struct user_fpregs_struct fp;
	int have_x = ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &xs) == 0;
	if (!have_x && ptrace(PTRACE_GETFPREGS, tid, 0, &fp) != 0)
		goto out;
	struct user_regs_struct final = resumed(&saved);
	rc = load_through(pid, tid, &saved, &final, have_x ? xstate : NULL, have_x ? xs.iov_len : 0, fns, fn, lib,
			  handle, err, errlen);
	if (rc == -2) {
		rc = -1;
		goto out; /* cannot tell what state it is in: let it go */
	}
	ptrace(PTRACE_SETREGS, tid, 0, &final);
	if (have_x)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &xs);
	else
		ptrace(PTRACE_SETFPREGS, tid, 0, &fp);
out:
	ptrace(PTRACE_DETACH, tid, 0, pass);
	return rc;
}

#define RUNNING_AFTER_MS 1000

/* fn 0: dlopen(lib, RTLD_NOW), else fn(lib) (a string all the same: the
 * agent's directory); its result in *ret. */
static int inject_run(pid_t pid, uint64_t fn, const char *lib, int timeout_ms, const volatile int *cancel, char *via,
		      size_t vialen, uint64_t *ret, char *err, size_t errlen)
{
	struct libc_fns fns;
	if (libc_functions(pid, &fns, err, errlen) != 0)
		return -1;
	uint64_t start = now_ms(), end = start + (uint64_t)timeout_ms;
	struct safepoint *sp = safepoint_open(pid);
	char task[64], seen[200] = "";
	int rc = -1;
	snprintf(task, sizeof(task), "/proc/%d/task", (int)pid);
	int moved = 0;
	do {
		if (cancel && *cancel) {
			say(err, errlen, "stopped before the agent was loaded: process %d untouched", (int)pid);
			goto done;
		}
		if (!moved && libc_moved(pid, &fns))
			moved = 1; /* exec'ed between two rounds */
		if (moved && fn) {
			say(err, errlen, "process %d exec'ed another program meanwhile: try again", (int)pid);
			goto done;
		}
		if (moved) {
			if (libc_functions(pid, &fns, err, errlen) != 0) {
				if (inject_task_gone(pid, pid) || now_ms() >= end)
					goto done;
				struct timespec ts = {0, 20000000};
				nanosleep(&ts, NULL);
				continue;
			}
			moved = 0;
			err[0] = 0;
			safepoint_close(sp);
			sp = safepoint_open(pid);
		}
		/* (the test suite's way to stop the process in the middle of
		 * the search: tests/e2e, attach/stopped/in-search) */
		if (getenv("RHEA_TEST_STOP_IN_SEARCH") && kill(pid, SIGSTOP) == 0)
			for (int i = 0; i < 100 && inject_task_state(pid, pid) != 'T'; i++) {
				struct timespec ts = {0, 10000000};
				nanosleep(&ts, NULL);
			}
		/* the main thread first: an event loop, most often */
		static pid_t tids[4096];
		int n = 0;
		tids[n++] = pid;
		DIR *d = opendir(task);
		if (!d || inject_task_gone(pid, pid)) {
			if (d)
				closedir(d);
			say(err, errlen, "process %d ended", (int)pid);
			goto done;
		}
		for (struct dirent *de; (de = readdir(d)) != NULL;) {
			long t = atol(de->d_name);
			if (t > 0 && t != pid && n < 4096)
				tids[n++] = (pid_t)t;
		}
		closedir(d);
		int stopped = 0;
		for (int i = 0; i < n; i++) {
			uint64_t h = 0;
			/* waits first; a thread in the middle of its work after a
			 * second without one (a process that only computes) */
			int r = try_thread(pid, tids[i], &fns, fn, lib, sp, now_ms() >= start + RUNNING_AFTER_MS, &h,
					   seen, sizeof(seen), via, vialen, err, errlen);
			if (r == TRY_AGAIN_MOVED) {
				/* it exec'ed: another image, its own libc and stacks
				 * (which it may still be loading) */
				moved = 1;
				break;
			}
			if (r < 0)
				goto done;
			if (r == 0) {
				*ret = h;
				rc = 0;
				goto done;
			}
			stopped += r == TRY_AGAIN_STOPPED;
		}
		/* Stopped meanwhile (SIGSTOP, Ctrl-Z): no thread of it can
		 * load the agent until it goes on, and each round would find
		 * it the same for the rest of the search.  Said now, as the
		 * CLI says it of a process stopped before the search; every
		 * thread is let go (still stopped), the process untouched.
		 * (By the stops ptrace reports, every thread's a stop
		 * signal's: /proc's state T is R for a while after each
		 * detach, until the thread, woken, stops again, and on a busy
		 * machine that while was every round of a 5 s search.) */
		if (n > 0 && stopped == n) {
			say(err, errlen, "process %d was stopped (SIGSTOP or Ctrl-Z) before the agent was loaded: it is "
				"untouched; let it go on (kill -CONT %d) and attach again", (int)pid, (int)pid);
			goto done;
		}
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	} while (now_ms() < end);
	say(err, errlen, "no thread of process %d was at a safe point (waiting in poll, epoll_wait, a sleep, "
		"accept, read, a condition wait or a join, or running its own code outside libc), with room on "
		"its stack, within %d ms%s%s: try again",
	    (int)pid, timeout_ms, seen[0] ? "; last seen: " : "", seen);
done:
	safepoint_close(sp);
	return rc;
}

int inject_dlopen(pid_t pid, const char *lib, int timeout_ms, const volatile int *cancel, char *via, size_t vialen,
		  char *err, size_t errlen)
{
	uint64_t handle;
	return inject_run(pid, 0, lib, timeout_ms, cancel, via, vialen, &handle, err, errlen);
}

int inject_call(pid_t pid, uint64_t fn, const char *arg, int timeout_ms, const volatile int *cancel, char *via,
		size_t vialen, int *ret, char *err, size_t errlen)
{
	uint64_t r = 0;
	int rc = inject_run(pid, fn, arg, timeout_ms, cancel, via, vialen, &r, err, errlen);
	*ret = (int)(uint32_t)r;
	return rc;
}

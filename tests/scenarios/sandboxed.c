/*
 * sandboxed - a program that puts itself in a seccomp sandbox, as sshd's
 * pre-authentication child does, and one whose main thread leaves by the
 * raw exit system call.
 *
 *   sandboxed kill-thread|kill-process [fork] [raw|tsync] [exec]
 *   sandboxed work
 *   sandboxed rawexit
 *   sandboxed groupexit
 *   sandboxed refused
 *   sandboxed lenient|stdio-only [raw|tsync] [exec]
 *
 * kill-thread / kill-process: the process (or, with "fork", a child it
 * forks and waits for) installs a filter with prctl(PR_SET_SECCOMP) that
 * kills the thread (or the process) at any getrusage, timer_create or
 * nanosleep (the raw call: glibc's sleeps make clock_nanosleep), calls the
 * program never makes, then does the work: 50 x (malloc, free,
 * usleep(2 ms)) and prints "work done"; with fork the parent then prints
 * "child status 0".  Exit status 0.  Under a tracer that makes system
 * calls on the program's threads (rhea's captures read getrusage), the
 * thread dies of SIGSYS.
 *   raw: the filter goes in with syscall(SYS_seccomp), as libseccomp
 *   installs it (glibc has no wrapper);
 *   tsync: the same, with SECCOMP_FILTER_FLAG_TSYNC: every thread of the
 *   process is under it, a tracer's own threads too (rhea's ticker sleeps
 *   with nanosleep);
 *   exec: once sandboxed, the program execs itself as "sandboxed work",
 *   which starts under the filter (as man-db runs col and groff).
 *
 * work: the work alone.
 *
 * rawexit: 1000 x (malloc, free), prints "bye", and the only thread of the
 * program leaves with syscall(SYS_exit, 3): the process ends with status 3.
 * A tracer whose own threads stay behind keeps it alive.
 *
 * groupexit: 1000 x (malloc, free), then at once syscall(SYS_exit_group,
 * 7), as Go's runtime leaves: the process ends with status 7, long before
 * a tracer's writer thread would have written anything.
 *
 * lenient [raw|tsync] [exec]: a deny list (kill at mount, ptrace,
 * kexec_load, close_range, which the agent's sampler must then never call;
 * EPERM at personality), then lenient_work() makes 20000
 * allocations of 40 bytes, personality must fail with EPERM, and "lenient
 * done" is printed: a tracer whose calls the filter lets through goes on
 * tracing.  exec: then the program execs itself as "sandboxed
 * lenient-after", which starts under the filter, runs lenient_work()
 * again, sleeps 100 ms (the agent's threads start meanwhile, under the
 * filter) and prints "after done".
 *
 * stdio-only [raw|tsync]: write() kills the process unless to descriptor
 * 0, 1 or 2, then the work: a tracer that writes its recording from this
 * thread (its end, at exit) kills it.
 *
 * refused: a filter the kernel refuses (no instruction: EINVAL), then
 * refused_work() makes 20000 allocations of 48 bytes and "refused done"
 * is printed: the thread is not sandboxed, and a tracer goes on seeing it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

enum how { BY_PRCTL, BY_SYSCALL, BY_SYSCALL_TSYNC };

static int install(struct sock_filter *f, unsigned short n, enum how how)
{
	struct sock_fprog prog = {n, f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("no_new_privs");
		return -1;
	}
	long r = how == BY_PRCTL ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
				 : syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
					   how == BY_SYSCALL_TSYNC ? SECCOMP_FILTER_FLAG_TSYNC : 0, &prog);
	if (r != 0) {
		perror("seccomp");
		return -1;
	}
	return 0;
}

static int sandbox(unsigned action, enum how how)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrusage, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_timer_create, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_nanosleep, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, action),
	};
	return install(f, sizeof(f) / sizeof(f[0]), how);
}

/* A deny list: kills at mount, ptrace or kexec_load, EPERM at personality,
 * lets the rest through. */
static int lenient(enum how how)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mount, 5, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kexec_load, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_personality, 2, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	return install(f, sizeof(f) / sizeof(f[0]), how);
}

/* write() to descriptors 0 to 2 only (the first argument's low word):
 * a write elsewhere kills the process; the rest goes through.  Judged
 * with the arguments 0, it would look harmless. */
static int stdio_only(enum how how)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	return install(f, sizeof(f) / sizeof(f[0]), how);
}

__attribute__((noinline)) void lenient_work(void)
{
	for (int i = 0; i < 20000; i++) {
		sink = malloc(40);
		free(sink);
	}
}

static void work(void)
{
	for (int i = 0; i < 50; i++) {
		sink = malloc(100 + (size_t)i);
		free(sink);
		usleep(2000);
	}
	printf("work done\n");
	fflush(stdout);
}

__attribute__((noinline)) void refused_work(void)
{
	for (int i = 0; i < 20000; i++) {
		sink = malloc(48);
		free(sink);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sandboxed kill-thread|kill-process [fork] | rawexit\n");
		return 2;
	}
	if (strcmp(argv[1], "work") == 0) {
		work();
		return 0;
	}
	if (strcmp(argv[1], "rawexit") == 0) {
		for (int i = 0; i < 1000; i++) {
			sink = malloc(64);
			free(sink);
		}
		printf("bye\n");
		fflush(stdout);
		syscall(SYS_exit, 3);
		return 1; /* not reached */
	}
	if (strcmp(argv[1], "groupexit") == 0) {
		for (int i = 0; i < 1000; i++) {
			sink = malloc(64);
			free(sink);
		}
		syscall(SYS_exit_group, 7);
		return 1; /* not reached */
	}
	if (strcmp(argv[1], "refused") == 0) {
		struct sock_fprog none = {0, NULL};
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &none) == 0)
			return 1; /* accepted: not what this mode is for */
		refused_work();
		printf("refused done\n");
		return 0;
	}
	if (strcmp(argv[1], "lenient-after") == 0) {
		lenient_work();
		usleep(100000); /* the agent's threads run, under the filter */
		printf("after done\n");
		return 0;
	}
	if (strcmp(argv[1], "lenient") == 0 || strcmp(argv[1], "stdio-only") == 0) {
		enum how how = BY_PRCTL;
		int exec_after = 0;
		for (int i = 2; i < argc; i++)
			if (strcmp(argv[i], "tsync") == 0)
				how = BY_SYSCALL_TSYNC;
			else if (strcmp(argv[i], "raw") == 0)
				how = BY_SYSCALL;
			else if (strcmp(argv[i], "exec") == 0)
				exec_after = 1;
			else
				return 2;
		if (argv[1][0] == 's') {
			if (stdio_only(how) != 0)
				return 1;
			work();
			return 0;
		}
		if (lenient(how) != 0)
			return 1;
		lenient_work();
		if (syscall(SYS_personality, 0xffffffffUL) != -1 || errno != EPERM)
			return 1;
		printf("lenient done\n");
		if (exec_after) {
			fflush(stdout);
			char *args[] = {argv[0], "lenient-after", NULL};
			execv("/proc/self/exe", args);
			perror("exec");
			return 1;
		}
		return 0;
	}
	unsigned action = strcmp(argv[1], "kill-process") == 0 ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_KILL_THREAD;
	int fork_first = 0, exec_after = 0;
	enum how how = BY_PRCTL;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "fork") == 0)
			fork_first = 1;
		else if (strcmp(argv[i], "raw") == 0)
			how = BY_SYSCALL;
		else if (strcmp(argv[i], "tsync") == 0)
			how = BY_SYSCALL_TSYNC;
		else if (strcmp(argv[i], "exec") == 0)
			exec_after = 1;
		else
			return 2;
	}
	fflush(stdout);
	pid_t pid = fork_first ? fork() : 0;
	if (pid < 0)
		return 1;
	if (pid == 0) {
		if (sandbox(action, how) != 0)
			_exit(1);
		if (exec_after) {
			char *args[] = {argv[0], "work", NULL};
			execv("/proc/self/exe", args);
			perror("exec");
			_exit(1);
		}
		work();
		if (!fork_first)
			return 0;
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return 1;
	printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}

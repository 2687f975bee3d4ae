/* Unit tests of cli/safepoint.c: a child process is left blocked in one
 * known place, stopped with ptrace as rhea attach stops it, and the
 * verdict on its main thread is checked: waits that hold no lock of
 * libc's are safe (pthread_join, which leaves libc's exported function
 * through a tail call, included), a read inside fgets or inside a qsort
 * comparator is not, a system call made outside libc has no verdict. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "safepoint.h"

static int pipefd[2];

/* Fork a child running fn (which blocks, or computes, for good); wait
 * until its main thread is in system call nr (-1: running). */
static pid_t start_in(void (*fn)(void), long nr)
{
	cr_assert_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(path, "r");
		long cur = -2;
		if (f && fgets(buf, sizeof(buf), f))
			cur = strncmp(buf, "running", 7) == 0 ? -1 : strtol(buf, NULL, 10);
		if (f)
			fclose(f);
		if (cur == nr) {
			struct timespec ts = {0, 20000000}; /* settled in its wait */
			nanosleep(&ts, NULL);
			return pid;
		}
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	cr_assert_fail("the child never blocked in system call %ld", nr);
	return -1;
}

/* Stop pid's main thread as inject.c does, ask for the verdict (on a
 * thread in a system call, or running), let it go and kill it. */
static enum safepoint_verdict verdict_of(pid_t pid, int running, char *what, size_t len)
{
	int st;
	cr_assert_eq(ptrace(PTRACE_SEIZE, pid, 0, 0), 0);
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, pid, 0, 0), 0);
	cr_assert_eq(waitpid(pid, &st, __WALL), pid);
	struct safepoint *sp = safepoint_open(pid);
	cr_assert_not_null(sp, "no libdwfl session on the child");
	enum safepoint_verdict v = safepoint_check(sp, pid, running, what, len);
	safepoint_close(sp);
	ptrace(PTRACE_DETACH, pid, 0, 0);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(pipefd[0]);
	close(pipefd[1]);
	return v;
}

static void *forever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void in_join(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, forever, NULL) == 0)
		pthread_join(t, NULL);
}

static void in_cond_wait(void)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	pthread_mutex_lock(&m);
	for (;;)
		pthread_cond_wait(&c, &m);
}

static void in_read(void)
{
	char b;
	if (read(pipefd[0], &b, 1) < 0)
		_exit(1);
}

static void in_sleep(void)
{
	sleep(100);
}

static void in_fgets(void)
{
	char line[64];
	dup2(pipefd[0], 0);
	if (!fgets(line, sizeof(line), stdin))
		_exit(1);
}

static int compare_reading(const void *a, const void *b)
{
	char c;
	if (read(pipefd[0], &c, 1) < 0)
		_exit(1);
	return *(const int *)a - *(const int *)b;
}

static void in_qsort_callback(void)
{
	int v[2] = {2, 1};
	qsort(v, 2, sizeof(int), compare_reading);
}

static volatile uint64_t spun;

__attribute__((noinline)) static void spin_forever(void)
{
	for (;;)
		spun++;
}

static int compare_spinning(const void *a, const void *b)
{
	spin_forever();
	return *(const int *)a - *(const int *)b;
}

static void in_qsort_spinning(void)
{
	int v[2] = {2, 1};
	qsort(v, 2, sizeof(int), compare_spinning);
}

static void in_raw_syscall(void)
{
	char b;
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_read), "D"((long)pipefd[0]), "S"(&b), "d"(1L)
			 : "rcx", "r11", "memory");
	(void)r;
}

/* The verdict on a child blocked by fn in system call nr is want, and
 * what it says is says (a safe wait's name), or contains it (NULL:
 * anything). */
static void expect_verdict(void (*fn)(void), long nr, enum safepoint_verdict want, const char *says)
{
	char what[200];
	pid_t pid = start_in(fn, nr);
	enum safepoint_verdict v = verdict_of(pid, nr < 0, what, sizeof(what));
	cr_expect_eq(v, want, "verdict %d (%s), want %d", v, what, want);
	if (says && want == SAFEPOINT_YES)
		cr_expect_str_eq(what, says);
	else if (says)
		cr_expect(strstr(what, says) != NULL, "it says %s, want %s", what, says);
}

/* Under ASan the children's calls to pthread_join and qsort go through
 * libasan's interceptors first: what those cases assert is not there. */
#if defined(__SANITIZE_ADDRESS__)
#define NOT_UNDER_ASAN .disabled = 1
#else
#define NOT_UNDER_ASAN .disabled = 0
#endif

Test(safepoint, join_through_its_tail_call, NOT_UNDER_ASAN)
{
	expect_verdict(in_join, SYS_futex, SAFEPOINT_YES, "pthread_join");
}

Test(safepoint, condition_wait)
{
	expect_verdict(in_cond_wait, SYS_futex, SAFEPOINT_YES, "pthread_cond_wait");
}

Test(safepoint, read_and_sleep)
{
	expect_verdict(in_read, SYS_read, SAFEPOINT_YES, "read");
	expect_verdict(in_sleep, SYS_clock_nanosleep, SAFEPOINT_YES, "sleep");
}

Test(safepoint, read_inside_fgets_holds_the_file_lock)
{
	expect_verdict(in_fgets, SYS_read, SAFEPOINT_NO, "fgets");
}

Test(safepoint, wait_inside_a_callback_from_libc, NOT_UNDER_ASAN)
{
	expect_verdict(in_qsort_callback, SYS_read, SAFEPOINT_NO, "called back from libc");
}

Test(safepoint, running_its_own_code)
{
	expect_verdict(spin_forever, -1, SAFEPOINT_YES, "spin_forever");
}

Test(safepoint, running_inside_a_callback_from_libc, NOT_UNDER_ASAN)
{
	expect_verdict(in_qsort_spinning, -1, SAFEPOINT_NO, "libc's");
}

Test(safepoint, system_call_outside_libc)
{
	expect_verdict(in_raw_syscall, SYS_read, SAFEPOINT_UNKNOWN, NULL);
}

/*
 * sigjump - signal handlers that leave a blocking call by siglongjmp, or
 * block themselves inside one, as old-style timeouts (alarm + longjmp)
 * and handlers that sleep or write do.
 *
 * Ground truth:
 *
 *  - main blocks in read() on a pipe nobody writes; SIGALRM comes after
 *    JUMP_MS and its handler siglongjmps out of the read.  Main then sleeps
 *    AFTER_MS in jumped_away() with the raw nanosleep system call (no hook
 *    sees it) and ends the process (exit 0).  So main's read lasted JUMP_MS,
 *    and at the end main is in no hooked call.
 *  - the reader thread blocks in read() on another pipe for the whole run
 *    (SA_RESTART); SIGUSR1, sent to it at JUMP_MS, runs a handler that
 *    sleeps NESTED_MS with usleep (a hooked, blocking call) and returns:
 *    the read goes on.  So at the end the reader is still in its read,
 *    begun at its start, about JUMP_MS + AFTER_MS before the end.
 *    Before that, while it waits, it gets SIGUSR2 three times, each once the last was handled:
 *    a handler that only counts, on an alternate signal stack of 4 KB
 *    (SA_ONSTACK), with 4 KB of canary below it.  The kernel's signal frame
 *    fills most of it: a tracer that did more there overflowed below it
 *    (from the heap, the process died at the thread's exit: "free():
 *    invalid pointer").  Main prints "usr2 3" when the canary is whole.
 *
 * The program also reads its actions back (a query, the old action of a
 * change): they must be the handlers and flags it set.
 *
 * stdout: "jumped", "done", "usr2 3".  Exit status 0.
 *
 * Expected under a tracer that lists the calls threads were blocked in
 * when the program ended: the reader's read (in reader_thread, ~450 ms),
 * not main's read, which ended when the handler jumped out of it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define JUMP_MS 150
#define NESTED_MS 20
#define AFTER_MS 300

static sigjmp_buf env;
static int main_pipe[2], reader_pipe[2];
static volatile int reader_ready, usr2s;

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void on_usr2(int sig)
{
	(void)sig;
	usr2s++;
}

static void on_usr1(int sig)
{
	(void)sig;
	usleep(NESTED_MS * 1000);
}

__attribute__((noinline)) static void reader_read(void)
{
	char c;
	reader_ready = 1;
	while (read(reader_pipe[0], &c, 1) < 0)
		; /* (EINTR, should SA_RESTART not apply) */
	__asm__ volatile("");
}

#define CANARY 4096
static unsigned char alt[CANARY + 4096] __attribute__((aligned(64)));

static void *reader_thread(void *arg)
{
	(void)arg;
	memset(alt, 0xa5, CANARY);
	stack_t ss = {.ss_sp = alt + CANARY, .ss_size = 4096, .ss_flags = 0};
	if (sigaltstack(&ss, NULL) != 0)
		return NULL;
	reader_read();
	return NULL;
}

static int canary_whole(void)
{
	for (int i = 0; i < CANARY; i++)
		if (alt[i] != 0xa5)
			return 0;
	return 1;
}

__attribute__((noinline)) static void jumped_away(void)
{
	struct timespec ts = {AFTER_MS / 1000, (AFTER_MS % 1000) * 1000000L};
	syscall(SYS_nanosleep, &ts, NULL);
	__asm__ volatile("");
}

__attribute__((noinline)) static void main_read(void)
{
	char c;
	if (read(main_pipe[0], &c, 1) == 1)
		printf("unexpected data\n");
	__asm__ volatile("");
}

int main(void)
{
	if (pipe(main_pipe) != 0 || pipe(reader_pipe) != 0)
		return 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART | SA_ONSTACK;
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = on_alarm;
	sa.sa_flags = 0;
	sigaction(SIGALRM, &sa, NULL);
	/* the program sees its own actions, whoever runs them */
	struct sigaction q, was;
	sigaction(SIGALRM, NULL, &q);
	signal(SIGURG, SIG_IGN);
	sigaction(SIGUSR1, &sa, &was);
	sigaction(SIGUSR1, &was, NULL);
	if (q.sa_handler != on_alarm || (q.sa_flags & SA_SIGINFO) || was.sa_handler != on_usr1 ||
	    !(was.sa_flags & SA_RESTART) || signal(SIGURG, SIG_DFL) != SIG_IGN)
		printf("the actions read back are not the program's\n");

	pthread_t th;
	pthread_create(&th, NULL, reader_thread, NULL);
	while (!reader_ready)
		usleep(1000);
	usleep(5000); /* in its read by now */
	for (int i = 0; i < 3; i++) {
		/* one at a time: two sent before the reader ran would be one */
		int before = usr2s;
		pthread_kill(th, SIGUSR2);
		for (int w = 0; usr2s == before && w < 2000; w++)
			usleep(1000);
	}

	if (sigsetjmp(env, 1) == 0) {
		struct itimerval it = {{0, 0}, {0, JUMP_MS * 1000}};
		setitimer(ITIMER_REAL, &it, NULL);
		main_read();
		return 1; /* never: nobody writes */
	}
	printf("jumped\n");
	fflush(stdout);
	pthread_kill(th, SIGUSR1);
	jumped_away();
	printf("done\n");
	if (canary_whole())
		printf("usr2 %d\n", usr2s);
	else
		printf("the alternate signal stack overflowed\n");
	fflush(stdout);
	exit(0);
}

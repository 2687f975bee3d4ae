/*
 * sigblocked - threads that block every signal and compute, calling
 * nothing hooked, as xz -T's and many servers' worker threads do.
 *
 * Ground truth: four threads each compute for COMPUTE_MS of their own CPU
 * time in pure_compute(), which calls no hooked function (the CPU clock
 * is read with clock_gettime, and rhea's time hooks are off by default):
 *
 *  - "blocker" blocks every signal with pthread_sigmask, then computes;
 *  - "inheritor" is created while main blocks every signal with
 *    sigprocmask (a new thread inherits its creator's mask);
 *  - "attrmask" is created with pthread_attr_setsigmask_np(full set);
 *  - "rawmask" blocks every signal with the raw rt_sigprocmask system call,
 *    which no hook sees;
 *  - "handler" computes inside a SIGUSR1 handler installed with every
 *    signal in its sa_mask (PostgreSQL's postmaster works so), raised on
 *    itself.
 *
 * Then each checks that the signals it blocked (all but the sampler's,
 * which the program does not know) are still blocked: a tracer that
 * unblocked the program's own signals would change what it does.  The
 * first three print "NAME: ok", rawmask prints "rawmask: ok" as well,
 * handler prints "handler: ok" (checked inside the handler: the signals
 * its sa_mask names are blocked there); exit status 0.
 *
 * Expected under a sampling tracer: every thread's CPU sampled, about one
 * sample per sampling period of its CPU.  A sampler whose signal the thread
 * blocks sees nothing of it (xz -T2 compressing for 20 s of CPU on two
 * threads gave its CPU profile 13 samples, all of the main thread).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COMPUTE_MS 300

static volatile uint64_t sink;

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void pure_compute(void)
{
	uint64_t end = cpu_ns() + COMPUTE_MS * 1000000ull;
	while (cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			sink += (uint64_t)i * 7;
	__asm__ volatile("");
}

/* "NAME: ok" when the standard signals and the first real-time ones,
 * which the program blocked, are still blocked. */
static void check_mask(const char *name)
{
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	int bad = 0;
	for (int s = 1; s < 32; s++)
		if (s != SIGKILL && s != SIGSTOP && sigismember(&cur, s) != 1)
			bad = s;
	if (bad)
		printf("%s: signal %d no longer blocked\n", name, bad);
	else
		printf("%s: ok\n", name);
}

static void *blocker(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "blocker");
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pure_compute();
	check_mask("blocker");
	return NULL;
}

static void *inheritor(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "inheritor");
	pure_compute();
	check_mask("inheritor");
	return NULL;
}

static void *attrmask(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "attrmask");
	pure_compute();
	check_mask("attrmask");
	return NULL;
}

static void *rawmask(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "rawmask");
	uint64_t all = ~0ull;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof(all));
	pure_compute();
	check_mask("rawmask");
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	pure_compute();
	check_mask("handler");
}

static void *handler(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "handler");
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigfillset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_kill(pthread_self(), SIGUSR1);
	return NULL;
}

int main(void)
{
	pthread_t th[5];
	sigset_t all, old;
	sigfillset(&all);
	pthread_create(&th[0], NULL, blocker, NULL);
	sigprocmask(SIG_SETMASK, &all, &old);
	pthread_create(&th[1], NULL, inheritor, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setsigmask_np(&attr, &all);
	pthread_create(&th[2], &attr, attrmask, NULL);
	pthread_attr_destroy(&attr);
	pthread_create(&th[3], NULL, rawmask, NULL);
	pthread_create(&th[4], NULL, handler, NULL);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	fflush(stdout);
	return 0;
}

/*
 * cpusplit - CPU time per function, in short visits, in a process and in
 * its forked child.
 *
 * Ground truth: one thread visits visit_0() .. visit_7() in turn, ROUNDS
 * times; each visit computes for VISIT_NS of wall time (the vDSO's
 * CLOCK_MONOTONIC, no system call) and allocates every 64 steps, so the
 * hooks capture inside every visit.  The thread never sleeps: unless the
 * machine takes the CPU away, every function's CPU time equals its wall
 * time.  Then the process forks and the child does the same.  Each
 * process prints "<who> <cpu_ns> <wall_ns>": the thread CPU time and the
 * wall time of its visits, by its own clocks, read once around them (a
 * read of the thread's CPU clock inside the visits would make the kernel
 * bring its accounting up to date, and hide what the test looks for).
 *
 * Expected in each recording: the visits' CPU time as the program measured
 * it; every visit_N's CPU/wall near 1.  Visits of 1.25 ms are shorter than
 * a scheduler tick: a tracer that took the kernel's tick-granular thread
 * times as they come gives some functions several ticks and others none.
 * The forked child's CPU time starts again from its own: a tracer that kept
 * the parent's counters shows the child's CPU as 0.
 * Exits 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 40
#define VISIT_NS 1250000L

volatile uint64_t sink;

static long long now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

#define VISIT(n)                                                                       \
	__attribute__((noinline)) void visit_##n(void)                                 \
	{                                                                              \
		long long end = now_ns(CLOCK_MONOTONIC) + VISIT_NS;                    \
		uint64_t x = sink | 1;                                                 \
		for (long i = 1;; i++) {                                               \
			x ^= x << 13;                                                  \
			x ^= x >> 7;                                                   \
			x ^= x << 17;                                                  \
			if ((i & 63) == 0) {                                           \
				void *p = malloc(16 + (x & 63));                       \
				__asm__ volatile("" : : "r"(p) : "memory");            \
				free(p);                                               \
				if (now_ns(CLOCK_MONOTONIC) >= end)                    \
					break;                                         \
			}                                                              \
		}                                                                      \
		sink += x;                                                             \
	}

VISIT(0)
VISIT(1)
VISIT(2)
VISIT(3)
VISIT(4)
VISIT(5)
VISIT(6)
VISIT(7)

static void (*const visits[])(void) = {visit_0, visit_1, visit_2, visit_3,
				       visit_4, visit_5, visit_6, visit_7};

static void run(const char *who)
{
	long long c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);
	for (int r = 0; r < ROUNDS; r++)
		for (int v = 0; v < 8; v++)
			visits[v]();
	long long c1 = now_ns(CLOCK_THREAD_CPUTIME_ID), w1 = now_ns(CLOCK_MONOTONIC);
	printf("%s %lld %lld\n", who, c1 - c0, w1 - w0);
	fflush(stdout);
}

int main(void)
{
	run("parent");
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		run("child");
		_exit(0);
	}
	int status = 0;
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	printf("child %d status %d\n", (int)pid, status);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

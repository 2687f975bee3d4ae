/*
 * hookloop.c - the cost of rhea's hooks seen from the program: tight loops
 * of hooked libc calls, timed from inside.  bench/run.sh runs it bare and
 * under `rhea record` (several settings, interleaved) and reports
 * (t_with - t_without) / calls.
 *
 *   hookloop [-n ITERS] [-r REPS] [-l LOOP]
 *
 * For each loop, REPS (default 15) repetitions of ITERS iterations (default
 * 2000000); prints one line per loop: name, median ns per iteration, the
 * number of hooked calls per iteration, and the CPU time of this thread over
 * the loop (warm-up included, in ns).  The median of the repetitions
 * keeps a descheduling on this noisy machine from counting.  -l runs only
 * the loop named LOOP (bench/run.sh uses it to measure the cost of one
 * synchronous capture from the process's CPU time).
 *
 *   malloc_free   p = malloc(32); free(p)         2 hooked calls (alloc)
 *   mutex         lock; unlock, uncontended       2 hooked calls (lock)
 *   cond_signal   pthread_cond_signal, no waiter  1 hooked call  (lock)
 *   write_null    write(fd of /dev/null, 1 byte)  1 timed call   (io)
 *   clock_mono    clock_gettime(CLOCK_MONOTONIC)  1 call, class `time`
 *                                                 off by default
 *   mutex_waited  the mutex loop again, after     2 hooked calls (lock)
 *                 one wait on a held mutex (run last: rhea's lock hooks
 *                 take their fast path only until the program first waits)
 *
 * The program starts an idle thread first, bare or not.  Under rhea it has
 * the agent's threads, and glibc's system-call wrappers (write here) take
 * their multi-threaded path: the cancellation state is switched around the
 * call with two atomic operations.  Measured on the bench VM: a process
 * with one idle thread more writes to /dev/null in 241-263 ns instead of
 * 200; a single-threaded bare run made rhea's write hook look 70-80 ns
 * dearer than it is.  The idle thread makes the bare run pay that too.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;
static volatile uint64_t sink64;

static void *idle_main(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static __attribute__((noinline)) void loop_malloc_free(long n)
{
	for (long i = 0; i < n; i++) {
		void *p = malloc(32);
		sink = p; /* the compiler may not drop the pair */
		free(p);
	}
}

static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cnd = PTHREAD_COND_INITIALIZER;
static int null_fd = -1;

static __attribute__((noinline)) void loop_mutex(long n)
{
	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&mtx);
		sink64++;
		pthread_mutex_unlock(&mtx);
	}
}

/* One wait on a mutex another thread holds for 20 ms, once. */
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static void *holder_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held);
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&held);
	return NULL;
}

static __attribute__((noinline)) void loop_mutex_waited(long n)
{
	static int waited;
	if (!waited) {
		pthread_t h;
		if (pthread_create(&h, NULL, holder_main, NULL) != 0)
			abort();
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL); /* (the holder has it by now) */
		pthread_mutex_lock(&held);
		pthread_mutex_unlock(&held);
		pthread_join(h, NULL);
		waited = 1;
	}
	loop_mutex(n);
}

static __attribute__((noinline)) void loop_cond_signal(long n)
{
	for (long i = 0; i < n; i++)
		pthread_cond_signal(&cnd);
}

static __attribute__((noinline)) void loop_write_null(long n)
{
	char c = 0;
	for (long i = 0; i < n; i++)
		if (write(null_fd, &c, 1) != 1)
			abort();
}

static __attribute__((noinline)) void loop_clock(long n)
{
	struct timespec ts;
	for (long i = 0; i < n; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink64 += (uint64_t)ts.tv_nsec;
	}
}

struct loop {
	const char *name;
	void (*fn)(long);
	int calls;   /* hooked calls per iteration */
	long scale;  /* divide ITERS by this (syscalls are slower) */
};

int main(int argc, char **argv)
{
	long iters = 2000000;
	int reps = 15, opt;
	const char *only = NULL;
	while ((opt = getopt(argc, argv, "n:r:l:")) != -1) {
		switch (opt) {
		case 'n':
			iters = atol(optarg);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'l':
			only = optarg;
			break;
		default:
			fprintf(stderr, "usage: hookloop [-n ITERS] [-r REPS] [-l LOOP]\n");
			return 2;
		}
	}
	if (iters < 1000 || reps < 1 || reps > 1000)
		return 2;
	pthread_t idle;
	if (pthread_create(&idle, NULL, idle_main, NULL) != 0) {
		fprintf(stderr, "hookloop: cannot start a thread\n");
		return 1;
	}
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0) {
		perror("/dev/null");
		return 1;
	}
	const struct loop loops[] = {
		{"malloc_free", loop_malloc_free, 2, 1},
		{"mutex", loop_mutex, 2, 1},
		{"cond_signal", loop_cond_signal, 1, 1},
		{"write_null", loop_write_null, 1, 20},
		{"clock_mono", loop_clock, 1, 4},
		{"mutex_waited", loop_mutex_waited, 2, 1}, /* last: see above */
	};
	double *t = calloc((size_t)reps, sizeof(double));
	if (!t)
		return 1;
	for (size_t l = 0; l < sizeof(loops) / sizeof(loops[0]); l++) {
		if (only && strcmp(only, loops[l].name) != 0)
			continue;
		long n = iters / loops[l].scale;
		uint64_t cpu0 = thread_cpu_ns();
		loops[l].fn(n / 10); /* warm up: caches, lazy binding, first capture */
		for (int r = 0; r < reps; r++) {
			uint64_t t0 = now_ns();
			loops[l].fn(n);
			t[r] = (double)(now_ns() - t0) / (double)n;
		}
		qsort(t, (size_t)reps, sizeof(double), cmp_double);
		uint64_t cpu = thread_cpu_ns() - cpu0;
		printf("%s %.3f %d %llu\n", loops[l].name, t[reps / 2], loops[l].calls,
		       (unsigned long long)cpu);
	}
	free(t);
	close(null_fd);
	return 0;
}

/*
 * spin.h - for scenario programs: clocks and one step of busy work.
 * Static, header-only, always inlined (each scenario is one C file built
 * on its own, and the tests look for the caller's name on the stack).
 */
#ifndef SPIN_H
#define SPIN_H
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time (a system call: not in a tight loop). */
static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Step i of a computation on *x (xorshift); every 256th step also
 * allocates and frees a small block, so the hooks see it.  Returns 1 on
 * those steps. */
static inline __attribute__((always_inline)) int spin_step(uint64_t *x, long i)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	if ((i & 255) != 0)
		return 0;
	void *p = malloc(16 + (*x & 63));
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
	return 1;
}

/* Computes for ns of wall time (0: forever). */
static inline __attribute__((always_inline)) void compute_for(uint64_t ns)
{
	uint64_t x = 1, end = ns ? now_ns() + ns : UINT64_MAX;
	for (long i = 0;; i++)
		if (spin_step(&x, i) && now_ns() >= end)
			return;
}

/* `bytes` of progress.bin in the current directory, shared: what a
 * process notes there outlives it.  NULL when it cannot be made. */
static inline volatile uint64_t *progress_file(size_t bytes)
{
	int fd = open("progress.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	void *m = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, (off_t)bytes) == 0)
		m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* Computes forever, noting tid and the time each time round (progress[0],
 * progress[1]; NULL: not noted) in memory that outlives the process (a
 * shared mapping of a file): where it really got when it was killed. */
static inline __attribute__((always_inline)) void compute_noting(volatile uint64_t *progress, uint64_t tid)
{
	uint64_t x = 1;
	for (long i = 0;; i++) {
		if (spin_step(&x, i) && progress) {
			progress[0] = tid;
			progress[1] = now_ns();
		}
	}
}

#endif

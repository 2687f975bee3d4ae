/*
 * sleepspin: sleep_100() sleeps 100 ms; spin_100() spins 100 ms of wall
 * time calling no hooked function; fault_pages() touches 2000 fresh pages
 * of an mmap'ed region.
 * Ground truth: sleep_100 inclusive ~100 ms with CPU near 0 (< 10 ms);
 * spin_100 inclusive ~100 ms with CPU near its wall time (> 50% of it, the
 * machine is shared); fault_pages has at least 2000 minor faults.
 * spin_100 and fault_pages begin and end with a 2 ms sleep: a capture at
 * a hooked call is what tells the tracer a function started, and the
 * counters are exact over the span the slice covers.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void sleep_100(void)
{
	usleep(100000);
	__asm__ volatile("");
}

__attribute__((noinline)) static void spin_100(void)
{
	usleep(2000);
	uint64_t end = now_ns() + 100000000ull;
	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			sink += (uint64_t)i * 3;
	usleep(2000);
	__asm__ volatile("");
}

__attribute__((noinline)) static void fault_pages(void)
{
	size_t n = 2000, page = 4096;
	usleep(2000);
	char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < n; i++)
		p[i * page] = 1;
	sink += (uint64_t)p[page];
	usleep(2000);
	munmap(p, n * page);
	__asm__ volatile("");
}

int main(void)
{
	sleep_100();
	usleep(2000);
	spin_100();
	usleep(2000);
	fault_pages();
	usleep(2000);
	printf("ok\n");
	return 0;
}

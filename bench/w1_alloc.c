/*
 * w1_alloc.c - workload W1, an allocation storm.
 *
 *   w1_alloc [-t THREADS] [-d DEPTHS] [-n ALLOCS]
 *
 * THREADS threads (default 4) share ALLOCS allocations (default 8000000,
 * total, so that every thread count does the same work).  Each thread walks
 * down a call chain of a given depth (DEPTHS: comma-separated list cycled
 * through, default 10,30,60), and at the bottom makes a batch of 64
 * malloc/free pairs of 16 B to 4 KB from one of 32 distinct call sites,
 * keeping a ring of 256 live blocks so that frees are not simply the last
 * malloc undone.  The chain is built from 8 different functions chosen by a
 * per-thread pseudo-random walk, so stacks differ from descent to descent
 * (what a stack table has to absorb) while sharing their outer frames.
 *
 * Built twice by bench/run.sh: -O2 (no frame pointers, like distribution
 * binaries) and -O2 -fno-omit-frame-pointer (for rhea --unwind fp and perf -g).
 * Prints a checksum so that nothing is optimised away.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RING 256
#define BATCH 64

struct ctx {
	uint64_t rng;
	void *ring[RING];
	unsigned pos;
	uint64_t left; /* allocations still to make */
	uint64_t sum;
	int ndepths;
	const int *depths;
	unsigned descent;
};

static inline uint64_t next_rand(struct ctx *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng;
}

/* 16 B .. 4 KB, log-uniform: as many small blocks as big ones per octave. */
static inline size_t pick_size(struct ctx *c)
{
	uint64_t r = next_rand(c);
	unsigned shift = 4 + (unsigned)(r % 9); /* 16 .. 4096 */
	size_t base = (size_t)1 << shift;
	return base + (size_t)((r >> 8) & (base - 1)) / 2;
}

/* One call site: malloc here, free an older block of the ring. */
#define SITE(i)                                                                  \
	static __attribute__((noinline)) void site_##i(struct ctx *c)            \
	{                                                                        \
		for (int k = 0; k < BATCH && c->left > 0; k++, c->left--) {      \
			size_t n = pick_size(c) + (i);                           \
			char *p = malloc(n);                                     \
			if (!p)                                                  \
				abort();                                         \
			p[0] = (char)n;                                          \
			p[n - 1] = (char)(i);                                    \
			unsigned slot = c->pos++ % RING;                         \
			if (c->ring[slot]) {                                     \
				c->sum += (unsigned char)((char *)c->ring[slot])[0]; \
				free(c->ring[slot]);                             \
			}                                                        \
			c->ring[slot] = p;                                       \
		}                                                                \
	}
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(0)
SITES8(1)
SITES8(2)
SITES8(3)

#define SITE_REF(i) site_##i,
#define SITE_REFS8(a) SITE_REF(a##0) SITE_REF(a##1) SITE_REF(a##2) SITE_REF(a##3) \
	SITE_REF(a##4) SITE_REF(a##5) SITE_REF(a##6) SITE_REF(a##7)
static void (*const sites[32])(struct ctx *) = {SITE_REFS8(0) SITE_REFS8(1) SITE_REFS8(2)
							 SITE_REFS8(3)};

/* The call chain: 8 functions calling each other through a table, so that
 * the compiler can neither inline nor turn the recursion into a loop, each
 * doing a little work after the call (no tail calls). */
typedef uint64_t (*link_fn)(struct ctx *, int);
static const link_fn links[8];

#define LINK(i)                                                                  \
	static __attribute__((noinline)) uint64_t link_##i(struct ctx *c, int d) \
	{                                                                        \
		volatile uint64_t pad = (uint64_t)d * (i + 1);                   \
		if (d <= 1) {                                                    \
			sites[next_rand(c) % 32](c);                             \
			return pad;                                              \
		}                                                                \
		uint64_t r = links[next_rand(c) % 8](c, d - 1);                  \
		return r + pad;                                                  \
	}
LINK(0)
LINK(1)
LINK(2)
LINK(3)
LINK(4)
LINK(5)
LINK(6)
LINK(7)
static const link_fn links[8] = {link_0, link_1, link_2, link_3, link_4, link_5, link_6, link_7};

static void *worker(void *arg)
{
	struct ctx *c = arg;
	/* main -> worker -> links...: the chain adds depth-1 link frames. */
	while (c->left > 0) {
		int d = c->depths[c->descent++ % (unsigned)c->ndepths];
		c->sum += links[next_rand(c) % 8](c, d - 2 > 1 ? d - 2 : 1);
	}
	for (int i = 0; i < RING; i++)
		free(c->ring[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 4, opt;
	uint64_t total = 8000000;
	int depths[16], nd = 0;
	const char *dspec = "10,30,60";

	while ((opt = getopt(argc, argv, "t:d:n:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'd':
			dspec = optarg;
			break;
		case 'n':
			total = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: w1_alloc [-t THREADS] [-d D1,D2,..] [-n ALLOCS]\n");
			return 2;
		}
	}
	for (const char *p = dspec; *p && nd < 16;) {
		int d = atoi(p);
		depths[nd++] = d < 3 ? 3 : d;
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	if (nthreads < 1 || nthreads > 1024 || nd == 0) {
		fprintf(stderr, "w1_alloc: bad arguments\n");
		return 2;
	}

	struct ctx *cs = calloc((size_t)nthreads, sizeof(*cs));
	pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
	if (!cs || !th)
		return 1;
	for (int i = 0; i < nthreads; i++) {
		cs[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		cs[i].left = total / (uint64_t)nthreads + ((uint64_t)i < total % (uint64_t)nthreads);
		cs[i].depths = depths;
		cs[i].ndepths = nd;
		cs[i].descent = (unsigned)i;
	}
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, worker, &cs[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	worker(&cs[0]);
	uint64_t sum = cs[0].sum;
	for (int i = 1; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		sum += cs[i].sum;
	}
	printf("w1_alloc: threads=%d allocs=%llu checksum=%llu\n", nthreads,
	       (unsigned long long)total, (unsigned long long)sum);
	free(cs);
	free(th);
	return 0;
}

/* Unit tests of core/packed.c: random samples survive encoding exactly,
 * the encoding is small for typical runs, and damaged entries are refused
 * without reading past their end. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static struct rhea_sample *make(uint32_t n, int wild)
{
	struct rhea_sample *v = calloc(n, sizeof(*v));
	uint64_t t = 1000000000ull + rng() % 1000000;
	struct rhea_counters c = {0};
	for (uint32_t i = 0; i < n; i++) {
		struct rhea_sample *s = &v[i];
		s->h.kind = RHEA_E_SAMPLE;
		s->h.size = sizeof(*s);
		s->h.flags = (uint16_t)(rng() % 128);
		s->tid = 4242;
		s->stack = (uint32_t)(wild ? rng() : 100 + rng() % 50);
		s->trigger = (uint16_t)(rng() % 60);
		s->merged = (uint16_t)(rng() % 3 == 0 ? rng() % 70000 : 0);
		s->msgid = (uint32_t)(i / 7);
		t += wild ? rng() % (1ull << 40) : 1000000 + rng() % 50000;
		s->begin_ns = t;
		s->end_ns = t + (s->merged ? rng() % 5000000 : 0);
		t = s->end_ns;
		if (rng() % 4 == 0) {
			s->object = wild ? rng() : 0x7f0000001000ull + rng() % 4096;
			s->waker_tid = (uint32_t)rng();
			s->owner_tid = (uint32_t)rng();
			s->waker_stack = (uint32_t)rng();
			s->release_ns = s->begin_ns + rng() % 1000000;
		}
		c.cpu_ns += rng() % 2000000;
		c.alloc_count += rng() % 100;
		c.alloc_bytes += rng() % 10000;
		c.minflt += (uint32_t)(rng() % 3);
		c.nvcsw += (uint32_t)(rng() % 2);
		if (wild)
			c.nivcsw = (uint32_t)rng(); /* may go down: zigzag must cope */
		s->c_end = c;
		s->c_begin = c;
		if (rng() % 3 == 0) {
			s->c_begin.cpu_ns -= rng() % 1000;
			s->c_begin.nvcsw -= (uint32_t)(rng() % 2);
		}
	}
	return v;
}

struct check {
	const struct rhea_sample *want;
	uint32_t n;
};

static int compare(void *arg, const struct rhea_sample *s)
{
	struct check *c = arg;
	cr_assert_eq(memcmp(s, &c->want[c->n], sizeof(*s)), 0, "sample %u differs after the round trip", c->n);
	c->n++;
	return 0;
}

static void round_trip(int wild)
{
	enum { N = 3000 };
	struct rhea_sample *v = make(N, wild);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	size_t cap = N * 200;
	uint8_t *buf = malloc(cap);
	size_t len = packed_encode(p, N, buf, cap);
	cr_assert_gt(len, 0);
	cr_assert_eq(len % 8, 0);
	struct check c = {v, 0};
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, compare, &c), 0);
	cr_assert_eq(c.n, N);
	if (!wild)
		cr_assert_lt(len, N * sizeof(struct rhea_sample) / 4, "%zu bytes for %d samples", len, N);
	/* Too small a buffer: 0, never an overflow. */
	cr_assert_eq(packed_encode(p, N, buf, len / 2), 0);
	free(buf);
	free(v);
}

Test(packed, round_trip_typical) { round_trip(0); }
Test(packed, round_trip_extreme_values) { round_trip(1); }

static int count(void *arg, const struct rhea_sample *s)
{
	(void)s;
	(*(int *)arg)++;
	return 0;
}

Test(packed, damaged_entries_refused)
{
	enum { N = 200 };
	struct rhea_sample *v = make(N, 0);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	uint8_t *buf = malloc(N * 200);
	size_t len = packed_encode(p, N, buf, N * 200);
	struct rhea_packed *h = (struct rhea_packed *)buf;
	/* Claims more samples than it holds: refused, and nothing read past
	 * the entry (run under ASan to check). */
	h->count = N * 100;
	int n = 0;
	cr_assert_eq(packed_decode(&h->h, count, &n), -1);
	h->count = N;
	/* Truncated by the entry size. */
	uint32_t size = h->h.size;
	h->h.size = (uint32_t)sizeof(struct rhea_packed) + 16;
	cr_assert_eq(packed_decode(&h->h, count, &n), -1);
	h->h.size = size;
	/* Random damage never crashes. */
	for (int k = 0; k < 2000; k++) {
		uint8_t *d = malloc(len);
		memcpy(d, buf, len);
		d[sizeof(struct rhea_packed) + rng() % (len - sizeof(struct rhea_packed))] ^= (uint8_t)(1 + rng() % 255);
		n = 0;
		packed_decode((const struct rhea_entry *)d, count, &n);
		cr_assert_leq(n, N);
		free(d);
	}
	free(buf);
	free(v);
}

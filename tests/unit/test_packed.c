/* Unit tests of core/packed.c: random samples survive encoding (PACKED
 * exactly, PACKED2 and PACKED4 with times and CPU time rounded down to the
 * microsecond, PACKED3 and PACKED4 with counters in steps that keep their
 * promises), the encoding is small for typical runs, the encoder never
 * writes past its buffer, and damaged entries are refused without reading
 * past their end. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "packed.h"

#include "xorshift.h"

/* Samples of one thread: typical ones (small moves, a few stacks, BLOCK
 * samples now and then) or wild ones (any value, counters going down). */
static struct rhea_sample *make(uint32_t n, int wild)
{
	struct rhea_sample *v = calloc(n, sizeof(*v));
	uint64_t t = 1000000000ull + rng() % 1000000;
	struct rhea_counters c = {0};
	for (uint32_t i = 0; i < n; i++) {
		struct rhea_sample *s = &v[i];
		s->h.kind = RHEA_E_SAMPLE;
		s->h.size = sizeof(*s);
		s->h.flags = (uint16_t)(wild ? rng() : rng() % 4 ? 0 : rng() % 128);
		s->tid = 4242;
		s->stack = (uint32_t)(wild ? rng() : 100 + rng() % 12);
		s->trigger = (uint16_t)(wild ? rng() : s->stack % 60);
		s->merged = (uint16_t)(rng() % 3 == 0 ? wild ? rng() : rng() % 70 : 0);
		s->msgid = (uint32_t)(wild ? rng() : i / 7);
		t += wild ? rng() % (1ull << 40) : 1000000 + rng() % 50000;
		s->begin_ns = t;
		s->end_ns = t + (s->merged ? rng() % 5000000 : 0);
		t = s->end_ns;
		if (rng() % 4 == 0) {
			s->object = wild ? rng() : 0x7f0000001000ull + rng() % 4096;
			s->waker_tid = (uint32_t)rng();
			s->owner_tid = (uint32_t)rng();
			s->waker_stack = (uint32_t)rng();
			s->release_ns = wild ? rng() : s->begin_ns + rng() % 1000000;
		}
		c.cpu_ns += wild ? rng() : rng() % 2000000;
		c.alloc_count += rng() % 100;
		c.alloc_bytes += wild ? rng() : rng() % 10000;
		c.minflt += (uint32_t)(rng() % 3);
		c.nvcsw += (uint32_t)(rng() % 2);
		if (wild)
			c.nivcsw = (uint32_t)rng(); /* may go down: zigzag must cope */
		s->c_end = c;
		s->c_begin = c;
		if (rng() % 3 == 0) {
			s->c_begin.cpu_ns -= wild ? rng() : rng() % 1000000;
			s->c_begin.alloc_count -= rng() % 50;
			s->c_begin.nvcsw -= (uint32_t)(rng() % 2);
			if (wild)
				s->c_begin.majflt = (uint32_t)rng();
		}
	}
	return v;
}

/* What PACKED2 keeps of a sample: times and CPU time floor(x / 1000) * 1000. */
static struct rhea_sample quantized(const struct rhea_sample *s)
{
	struct rhea_sample q = *s;
	q.begin_ns = s->begin_ns / 1000 * 1000;
	q.end_ns = s->end_ns / 1000 * 1000;
	q.release_ns = s->release_ns / 1000 * 1000;
	q.c_begin.cpu_ns = s->c_begin.cpu_ns / 1000 * 1000;
	q.c_end.cpu_ns = s->c_end.cpu_ns / 1000 * 1000;
	return q;
}

struct check {
	const struct rhea_sample *want;
	uint32_t n;
	int exact; /* PACKED: to the nanosecond */
};

static int compare(void *arg, const struct rhea_sample *s)
{
	struct check *c = arg;
	struct rhea_sample w = c->exact ? c->want[c->n] : quantized(&c->want[c->n]);
	cr_assert_eq(memcmp(s, &w, sizeof(*s)), 0, "sample %u differs after the round trip", c->n);
	c->n++;
	return 0;
}

typedef size_t (*encoder)(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap);

/* PACKED4: exact (but for microseconds), on no grid and on a 1 ms one;
 * with all counters in steps of 1/16. */
static size_t encode_rc(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	return packed_encode_rc(s, n, 0, 0, 0, out, cap);
}

static size_t encode_rc_grid(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	return packed_encode_rc(s, n, 0, 0, 1000, out, cap);
}

static size_t encode_rc_steps(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	return packed_encode_rc(s, n, 4, 0x7f, 1000, out, cap);
}

static uint16_t kind_of(encoder enc)
{
	if (enc == encode_rc || enc == encode_rc_grid || enc == encode_rc_steps)
		return RHEA_E_PACKED4;
	return enc == packed_encode_v1 ? RHEA_E_PACKED : RHEA_E_PACKED2;
}

static size_t round_trip(encoder enc, int wild, int exact)
{
	enum { N = 3000 };
	struct rhea_sample *v = make(N, wild);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	size_t cap = N * 300;
	uint8_t *buf = malloc(cap);
	size_t len = enc(p, N, buf, cap);
	cr_assert_gt(len, 0);
	cr_assert_eq(len % 8, 0);
	cr_assert_eq(((struct rhea_entry *)buf)->size, len);
	cr_assert_eq(((struct rhea_entry *)buf)->kind, kind_of(enc));
	struct check c = {v, 0, exact};
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, compare, &c), 0);
	cr_assert_eq(c.n, N);
	/* Too small a buffer: 0, never an overflow. */
	cr_assert_eq(enc(p, N, buf, len / 2), 0);
	cr_assert_eq(enc(p, N, buf, len - 1), 0);
	free(buf);
	free(v);
	return len;
}

Test(packed, round_trip_typical)
{
	size_t v2 = round_trip(packed_encode, 0, 0);
	size_t v1 = round_trip(packed_encode_v1, 0, 1);
	cr_assert_lt(v1, 3000 * sizeof(struct rhea_sample) / 4, "PACKED: %zu bytes for 3000 samples", v1);
	cr_assert_lt(v2, v1 * 3 / 4, "PACKED2: %zu bytes for 3000 samples, PACKED %zu", v2, v1);
}

Test(packed, round_trip_wild_values)
{
	round_trip(packed_encode, 1, 0);
	round_trip(packed_encode_v1, 1, 1);
}

/* PACKED4 keeps what PACKED2 keeps, in less: the same samples in at most
 * 3/4 of PACKED2's bytes before zstd (typical W2 samples: about 60%). */
Test(packed4, round_trip)
{
	size_t v2 = round_trip(packed_encode, 0, 0);
	size_t plain = round_trip(encode_rc, 0, 0), grid = round_trip(encode_rc_grid, 0, 0);
	cr_assert_lt(plain, v2 * 3 / 4, "PACKED4 %zu bytes, PACKED2 %zu", plain, v2);
	cr_assert_lt(grid, v2 * 3 / 4, "PACKED4 on a grid %zu bytes, PACKED2 %zu", grid, v2);
	round_trip(encode_rc, 1, 0);
	round_trip(encode_rc_grid, 1, 0);
}

/* Samples on the capture grid (a few us past each ms), runs ending on it,
 * waits off it, samples overlapping the previous one: all exact, and
 * much smaller on the grid than off it. */
Test(packed4, grid_times)
{
	enum { N = 4000 };
	struct rhea_sample *v = calloc(N, sizeof(*v));
	const struct rhea_sample *p[N];
	uint64_t t = 7000000000ull + 291000;
	for (int i = 0; i < N; i++) {
		struct rhea_sample *s = &v[i];
		s->h = (struct rhea_entry){RHEA_E_SAMPLE, 0, sizeof(*s)};
		s->tid = 9;
		s->stack = 1 + (uint32_t)(rng() % 5);
		t += 1000000 * (1 + (rng() % 8 == 0));
		s->begin_ns = t + rng() % 40000;
		s->end_ns = s->begin_ns;
		if (rng() % 5 == 0) { /* a run of merged samples */
			s->merged = (uint16_t)(1 + rng() % 9);
			t += 1000000ull * s->merged;
			s->end_ns = t + rng() % 40000;
		} else if (rng() % 7 == 0) { /* a wait, anywhere */
			s->h.flags = RHEA_S_BLOCK;
			s->end_ns = s->begin_ns + rng() % 3000000;
			t = s->end_ns / 1000000 * 1000000 + 291000;
		} else if (i && rng() % 50 == 0) { /* overlapping the previous one */
			s->begin_ns = v[i - 1].end_ns - rng() % 2000000;
			s->end_ns = v[i - 1].end_ns + 1000;
		}
		p[i] = s;
	}
	size_t cap = N * 64;
	uint8_t *buf = malloc(cap);
	size_t on = encode_rc_grid(p, N, buf, cap);
	cr_assert_gt(on, 0);
	struct check c = {v, 0, 0};
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, compare, &c), 0);
	cr_assert_eq(c.n, N);
	size_t off = encode_rc(p, N, buf, cap);
	cr_assert_gt(off, 0);
	c.n = 0;
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, compare, &c), 0);
	cr_assert_lt(on, off * 9 / 10, "on the grid %zu bytes, off it %zu", on, off);
	/* a period of more than 2^20 us: no grid, still exact */
	size_t slow = packed_encode_rc(p, N, 0, 0, 1u << 21, buf, cap);
	cr_assert_eq(slow, off);
	free(buf);
	free(v);
}

/* Every field at its extremes, alone and next to its opposite. */
Test(packed, round_trip_extreme_values)
{
	enum { N = 8 };
	struct rhea_sample v[N];
	const struct rhea_sample *p[N];
	memset(v, 0, sizeof(v));
	for (int i = 0; i < N; i++) {
		struct rhea_sample *s = &v[i];
		int hi = i % 2 == 0;
		s->h.kind = RHEA_E_SAMPLE;
		s->h.size = sizeof(*s);
		s->h.flags = hi ? UINT16_MAX : 0;
		s->tid = UINT32_MAX;
		s->stack = hi ? UINT32_MAX : 0;
		s->trigger = hi ? UINT16_MAX : 0;
		s->merged = hi ? UINT16_MAX : 0;
		s->msgid = hi ? UINT32_MAX : 0;
		s->begin_ns = hi ? UINT64_MAX - 1 : 0;
		s->end_ns = hi ? UINT64_MAX : 999;
		s->object = hi ? UINT64_MAX : 1;
		s->waker_tid = hi ? UINT32_MAX : 0;
		s->owner_tid = hi ? 0 : UINT32_MAX;
		s->waker_stack = hi ? UINT32_MAX : 1;
		s->release_ns = hi ? 0 : UINT64_MAX;
		uint64_t big = hi ? UINT64_MAX : 0;
		uint32_t big32 = hi ? UINT32_MAX : 0;
		s->c_end = (struct rhea_counters){big, big, big, big32, big32, big32, big32};
		s->c_begin = (struct rhea_counters){~big, ~big, ~big, ~big32, ~big32, ~big32, ~big32};
		if (i >= 4) /* and counters equal at the extremes */
			s->c_begin = s->c_end;
		p[i] = s;
	}
	uint8_t buf[8192] __attribute__((aligned(8)));
	encoder encs[] = {packed_encode, packed_encode_v1, encode_rc, encode_rc_grid};
	for (int k = 0; k < 4; k++) {
		encoder enc = encs[k];
		size_t len = enc(p, N, buf, sizeof(buf));
		cr_assert_gt(len, 0, "encoder %d", k);
		struct check c = {v, 0, enc == packed_encode_v1};
		cr_assert_eq(packed_decode((const struct rhea_entry *)buf, compare, &c), 0);
		cr_assert_eq(c.n, N);
	}
}

/* Rounding down keeps a thread's order: a.end <= b.begin stays true. */
static int check_order(void *arg, const struct rhea_sample *s)
{
	uint64_t *last_end = arg;
	cr_assert_leq(*last_end, s->begin_ns);
	cr_assert_leq(s->begin_ns, s->end_ns);
	*last_end = s->end_ns;
	return 0;
}

Test(packed, microseconds_keep_order)
{
	enum { N = 2000 };
	struct rhea_sample *v = calloc(N, sizeof(*v));
	const struct rhea_sample *p[N];
	uint64_t t = 5000000000ull;
	for (int i = 0; i < N; i++) {
		t += rng() % 1500; /* often inside the same microsecond */
		v[i].begin_ns = t;
		t += rng() % 3 ? 0 : rng() % 1500;
		v[i].end_ns = t;
		v[i].tid = 1;
		p[i] = &v[i];
	}
	uint8_t *buf = malloc(N * 64);
	encoder encs[] = {packed_encode, encode_rc, encode_rc_grid};
	for (int k = 0; k < 3; k++) {
		size_t len = encs[k](p, N, buf, N * 64);
		cr_assert_gt(len, 0);
		uint64_t last_end = 0;
		cr_assert_eq(packed_decode((const struct rhea_entry *)buf, check_order, &last_end), 0);
	}
	free(buf);
	free(v);
}

/* The encoder writes nothing past cap, whatever cap is. */
static void stays_in_buffer(encoder enc)
{
	enum { N = 50 };
	struct rhea_sample *v = make(N, 0);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	uint8_t buf[N * 300];
	size_t full = enc(p, N, buf, sizeof(buf));
	cr_assert_gt(full, 0);
	for (size_t cap = 0; cap <= full; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		size_t len = enc(p, N, buf, cap);
		cr_assert(len == 0 || (len == full && cap == full), "cap %zu: %zu", cap, len);
		for (size_t i = cap; i < sizeof(buf); i++)
			cr_assert_eq(buf[i], 0xa5, "cap %zu: byte %zu written", cap, i);
	}
	free(v);
}

Test(packed, encoder_stays_in_its_buffer) { stays_in_buffer(packed_encode); }
Test(packed4, encoder_stays_in_its_buffer) { stays_in_buffer(encode_rc_steps); }

static int count(void *arg, const struct rhea_sample *s)
{
	(void)s;
	(*(int *)arg)++;
	return 0;
}

/* The samples an entry decodes to. */
struct collect {
	struct rhea_sample *s;
	uint32_t n, cap;
};

static int collect(void *arg, const struct rhea_sample *s)
{
	struct collect *c = arg;
	if (c->n < c->cap)
		c->s[c->n] = *s;
	c->n++;
	return 0;
}

static void damaged(encoder enc)
{
	enum { N = 200 };
	struct rhea_sample *v = make(N, 0);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	uint8_t *buf = malloc(N * 300);
	size_t len = enc(p, N, buf, N * 300);
	struct rhea_packed *h = (struct rhea_packed *)buf;
	int n = 0;
	cr_assert_eq(packed_decode(&h->h, count, &n), 0);
	cr_assert_eq(n, N);
	struct rhea_sample good[N], got[N];
	struct collect cg = {good, 0, N};
	cr_assert_eq(packed_decode(&h->h, collect, &cg), 0);
	/* Claims more samples than it holds: refused, and nothing read past
	 * the entry (run under ASan to check). */
	h->count = N * 100;
	cr_assert_eq(packed_decode(&h->h, count, &n), -1);
	h->count = UINT32_MAX;
	cr_assert_eq(packed_decode(&h->h, count, &n), -1);
	h->count = N;
	/* Truncated by the entry size, at every multiple of 8. */
	uint32_t size = h->h.size;
	for (uint32_t cut = (uint32_t)sizeof(*h); cut < size; cut += 8) {
		uint8_t *d = malloc(cut); /* exactly the entry: ASan sees any overread */
		memcpy(d, buf, cut);
		((struct rhea_entry *)d)->size = cut;
		n = 0;
		cr_assert_eq(packed_decode((const struct rhea_entry *)d, count, &n), -1, "cut at %u", cut);
		cr_assert_lt(n, N);
		free(d);
	}
	/* Random damage never crashes nor reports more than there is. */
	for (int k = 0; k < 3000; k++) {
		uint8_t *d = malloc(len);
		memcpy(d, buf, len);
		int nd = 1 + (int)(rng() % 4);
		for (int j = 0; j < nd; j++)
			d[sizeof(struct rhea_packed) + rng() % (len - sizeof(struct rhea_packed))] ^=
				(uint8_t)(1 + rng() % 255);
		if (k % 4 == 0) /* the fixed part too */
			d[8 + rng() % 16] ^= (uint8_t)(1 + rng() % 255);
		struct collect c = {got, 0, N};
		int r = packed_decode((const struct rhea_entry *)d, collect, &c);
		cr_assert_leq(c.n, ((struct rhea_packed *)d)->count);
		/* PACKED4's hash finds damage to its stream: nothing reported,
		 * unless the damage was to bits the decoding does not depend on
		 * (the last bytes of the flush) */
		if (kind_of(enc) == RHEA_E_PACKED4 && k % 4 != 0) {
			if (r == 0)
				cr_assert_eq(memcmp(got, good, sizeof(good)), 0, "damage %d went unnoticed", k);
			else
				cr_assert_eq(c.n, 0);
		}
		free(d);
	}
	free(buf);
	free(v);
}

static size_t encode_steps4(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	return packed_encode_steps(s, n, 4, 0x7f, out, cap);
}

Test(packed, damaged_entries_refused) { damaged(packed_encode); }
Test(packed, damaged_steps_entries_refused) { damaged(encode_steps4); }
Test(packed, damaged_v1_entries_refused) { damaged(packed_encode_v1); }
Test(packed4, damaged_entries_refused) { damaged(encode_rc_grid); }
Test(packed4, damaged_steps_entries_refused) { damaged(encode_rc_steps); }

/*
 * One hand-made PACKED2 sample: stack 5 (new: control code 8 + z(5) = 18),
 * everything else 0.  data = control_size 3, control {header 0, code 18,
 * counter mask 0}, values {z(begin gap) 0}, padding.
 */
static const uint8_t one[32] = {
	10, 0, 0, 0, 32, 0, 0, 0,  /* kind 10, flags 0, size 32 */
	7, 0, 0, 0, 1, 0, 0, 0,    /* tid 7, count 1 */
	0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, /* base_us 1000000 */
	3, 0x00, 18, 0x00, 0x00,   /* control_size, control, values */
	0, 0, 0,                   /* padding */
};

static int decode_one(const uint8_t *e, struct rhea_sample *out)
{
	uint8_t d[64] __attribute__((aligned(8)));
	memcpy(d, e, ((const struct rhea_entry *)e)->size);
	int n = 0;
	int r = packed_decode((const struct rhea_entry *)d, count, &n);
	if (out && r == 0) {
		struct check c = {out, 0, 1};
		packed_decode((const struct rhea_entry *)d, compare, &c);
	}
	return r;
}

static void expect_refused(int at, uint8_t value, const char *what)
{
	uint8_t e[32];
	memcpy(e, one, sizeof(e));
	e[at] = value;
	cr_expect_eq(decode_one(e, NULL), -1, "%s accepted", what);
}

Test(packed, undefined_bits_and_garbage_refused)
{
	struct rhea_sample want = {.h = {RHEA_E_SAMPLE, 0, sizeof(want)}, .tid = 7, .stack = 5,
				   .begin_ns = 1000000000, .end_ns = 1000000000};
	cr_assert_eq(decode_one(one, &want), 0);
	expect_refused(25, 0x80, "header bit 7");
	expect_refused(26, 3, "a stack position the list does not have");
	expect_refused(27, 0x80, "counter mask bit 7");
	expect_refused(24, 4, "a control stream longer than the samples need");
	expect_refused(24, 2, "a control stream shorter than the samples need");
	expect_refused(24, 200, "a control stream past the entry");
	expect_refused(29, 1, "non-zero padding");
	expect_refused(31, 0x80, "non-zero padding at the end");
	expect_refused(25, 0x20, "a presence byte that is not there");
	expect_refused(12, 2, "two samples where there is one");
	expect_refused(23, 0x80, "a base beyond the microseconds of 64-bit ns");

	/* H_EXTRA with a presence byte of undefined bits. */
	uint8_t e[32];
	memcpy(e, one, sizeof(e));
	uint8_t with_extra[] = {4, 0x20, 18, 0x20, 0x00, 0x00}; /* control_size 4, X byte 0x20 */
	memcpy(e + 24, with_extra, sizeof(with_extra));
	cr_expect_eq(decode_one(e, NULL), -1, "presence bit 5 accepted");
	e[27] = 0x00; /* no extra at all: fine */
	cr_expect_eq(decode_one(e, NULL), 0);

	/* A value varint running off the entry. */
	memcpy(e, one, sizeof(e));
	memset(e + 28, 0x80, 4);
	cr_expect_eq(decode_one(e, NULL), -1, "a varint running off the entry accepted");

	/* Eight more bytes of zeros: more than padding. */
	uint8_t big[40] = {0};
	memcpy(big, one, sizeof(one));
	((struct rhea_entry *)big)->size = 40;
	cr_expect_eq(decode_one(big, NULL), -1, "8 bytes of trailing zeros accepted");

	/* A varint longer than 64 bits (the counter mask position gets
	 * 10 continuation bytes). */
	uint8_t lv[48] = {0};
	memcpy(lv, one, 24);
	((struct rhea_entry *)lv)->size = 48;
	uint8_t body[] = {13, 0x00, 18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00};
	memcpy(lv + 24, body, sizeof(body));
	cr_expect_eq(decode_one(lv, NULL), -1, "an 11-byte varint accepted");

	/* A kind that is neither PACKED nor PACKED2. */
	memcpy(e, one, sizeof(e));
	e[0] = RHEA_E_SAMPLE;
	cr_expect_eq(decode_one(e, NULL), -1);
}

/* ---- PACKED3: counters in steps ------------------------------------------ */

static void counters_us(uint64_t v[7], const struct rhea_counters *c)
{
	uint64_t x[7] = {c->cpu_ns / 1000, c->alloc_count, c->alloc_bytes, c->minflt, c->majflt, c->nvcsw, c->nivcsw};
	memcpy(v, x, sizeof(x));
}

struct steps {
	const struct rhea_sample *want;
	uint32_t n, total;
	uint64_t prev_end[7]; /* decoded */
	uint64_t max_diff[7]; /* the largest true difference between samples */
	uint64_t max_err[7];
};

static int check_steps(void *arg, const struct rhea_sample *s)
{
	struct steps *c = arg;
	struct rhea_sample w = quantized(&c->want[c->n]);
	/* everything but the counters as PACKED2 keeps it */
	struct rhea_sample a = *s, b = w;
	memset(&a.c_begin, 0, 2 * sizeof(a.c_begin));
	memset(&b.c_begin, 0, 2 * sizeof(b.c_begin));
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "sample %u differs beyond its counters", c->n);
	uint64_t te[7], tb[7], de[7], db[7];
	counters_us(te, &w.c_end);
	counters_us(tb, &w.c_begin);
	counters_us(de, &s->c_end);
	counters_us(db, &s->c_begin);
	for (int j = 0; j < 7; j++) {
		cr_assert_geq(de[j], c->prev_end[j], "sample %u counter %d went down", c->n, j);
		cr_assert_leq(de[j], te[j], "sample %u counter %d above the truth", c->n, j);
		cr_assert_geq(db[j], c->prev_end[j], "sample %u c_begin %d before the previous c_end", c->n, j);
		cr_assert_leq(db[j], de[j], "sample %u c_begin %d after its c_end", c->n, j);
		if (c->n + 1 == c->total) {
			cr_assert_eq(de[j], te[j], "the last sample's counter %d is not exact", j);
			cr_assert_eq(db[j], tb[j], "the last sample's c_begin %d is not exact", j);
		}
		uint64_t e = te[j] - de[j], eb = db[j] > tb[j] ? db[j] - tb[j] : tb[j] - db[j];
		if (e > c->max_err[j])
			c->max_err[j] = e;
		if (eb > c->max_err[j])
			c->max_err[j] = eb;
		c->prev_end[j] = de[j];
	}
	c->n++;
	return 0;
}

/* Typical samples whose counters only grow and whose c_begin lies
 * between the previous c_end and its own, as a thread's do, in p[]; c to
 * check them against, with their largest differences. */
static struct rhea_sample *make_ordered(uint32_t n, const struct rhea_sample **p, struct steps *c)
{
	struct rhea_sample *v = make(n, 0);
	*c = (struct steps){v, 0, n, {0}, {0}, {0}};
	uint64_t prev[7] = {0};
	for (uint32_t i = 0; i < n; i++) {
		p[i] = &v[i];
		struct rhea_sample w = quantized(&v[i]);
		uint64_t e[7], b[7];
		counters_us(e, &w.c_end);
		counters_us(b, &w.c_begin);
		for (int j = 0; j < 7; j++) {
			if (b[j] < prev[j])
				v[i].c_begin = i ? v[i - 1].c_end : (struct rhea_counters){0};
			if (e[j] - prev[j] > c->max_diff[j])
				c->max_diff[j] = e[j] - prev[j];
		}
		counters_us(prev, &w.c_end);
	}
	return v;
}

/* Errors within a step: an eighth of the largest difference here; and
 * something was stepped. */
static void errors_within_a_step(const struct steps *c)
{
	for (int j = 0; j < 7; j++)
		cr_assert_leq(c->max_err[j] * 8, c->max_diff[j] + 8, "counter %d: error %llu, differences up to %llu", j,
			      (unsigned long long)c->max_err[j], (unsigned long long)c->max_diff[j]);
	cr_assert_gt(c->max_err[0], 0, "nothing was stepped: the test tests nothing");
}

/* The entry in buf is of `kind`, at shift 4 with every counter in steps,
 * and decodes to n samples whose errors stay within a step. */
static void decodes_within_a_step(const uint8_t *buf, uint16_t kind, struct steps *c, uint32_t n)
{
	cr_assert_eq(((const struct rhea_entry *)buf)->kind, kind);
	cr_assert_eq(((const struct rhea_entry *)buf)->flags, 4 | 0x7f << 8);
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, check_steps, c), 0);
	cr_assert_eq(c->n, n);
	errors_within_a_step(c);
}

/* Typical samples (counters that only grow, c_begin between the previous
 * c_end and its own) through PACKED3: the promises of packed.h hold, the
 * errors stay within a step (an eighth of the largest difference here),
 * and the entry is smaller than PACKED2's. */
Test(packed, steps_keep_their_promises)
{
	enum { N = 3000 };
	const struct rhea_sample *p[N];
	struct steps c;
	struct rhea_sample *v = make_ordered(N, p, &c);
	size_t cap = N * 300;
	uint8_t *buf = malloc(cap), *buf2 = malloc(cap);
	size_t len = packed_encode_steps(p, N, 4, 0x7f, buf, cap);
	cr_assert_gt(len, 0);
	decodes_within_a_step(buf, RHEA_E_PACKED3, &c, N);
	size_t len2 = packed_encode(p, N, buf2, cap);
	cr_assert_lt(len, len2 * 9 / 10, "PACKED3 %zu bytes, PACKED2 %zu", len, len2);
	/* shift 0 is PACKED2 */
	cr_assert_eq(packed_encode_steps(p, N, 0, 0x7f, buf, cap), len2);
	cr_assert_eq(packed_encode_steps(p, N, 4, 0, buf, cap), len2);
	cr_assert_eq(memcmp(buf, buf2, len2), 0);
	cr_assert_eq(packed_encode_steps(p, N, PACKED_SHIFT_MAX + 1, 0x7f, buf, cap), 0);
	cr_assert_eq(packed_encode_steps(p, N, 4, 0x80, buf, cap), 0);
	/* too small a buffer: 0 */
	cr_assert_eq(packed_encode_steps(p, N, 4, 0x7f, buf, len - 1), 0);
	free(buf);
	free(buf2);
	free(v);
}

/* PACKED4 with counters in steps keeps PACKED3's promises (its guesses
 * differ, its steps are the same), in fewer bytes. */
Test(packed4, steps_keep_their_promises)
{
	enum { N = 3000 };
	const struct rhea_sample *p[N];
	struct steps c;
	struct rhea_sample *v = make_ordered(N, p, &c);
	size_t cap = N * 300;
	uint8_t *buf = malloc(cap);
	size_t len3 = packed_encode_steps(p, N, 4, 0x7f, buf, cap);
	size_t len = encode_rc_steps(p, N, buf, cap);
	cr_assert_gt(len, 0);
	decodes_within_a_step(buf, RHEA_E_PACKED4, &c, N);
	cr_assert_lt(len, len3, "PACKED4 %zu bytes, PACKED3 %zu", len, len3);
	cr_assert_eq(packed_encode_rc(p, N, PACKED_SHIFT_MAX + 1, 0x7f, 1000, buf, cap), 0);
	cr_assert_eq(packed_encode_rc(p, N, 4, 0x80, 1000, buf, cap), 0);
	cr_assert_eq(encode_rc_steps(p, N, buf, len - 1), 0);
	/* undefined flag bits refused (bit 5, near-exact, is PACKED4's) */
	len = encode_rc_steps(p, N, buf, cap);
	int n = 0;
	((struct rhea_entry *)buf)->flags |= 0x40;
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), -1);
	len3 = packed_encode_steps(p, N, 4, 0x7f, buf, cap);
	((struct rhea_entry *)buf)->flags |= 0x20;
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), -1, "PACKED3 has no near-exact bit");
	cr_assert_eq(packed_encode_steps(p, N, 4, 0x7f | PACKED_NEAR, buf, cap), 0);
	free(buf);
	free(v);
}

/* PACKED4 near-exact: the bytes in steps, but exact where a thread's
 * allocations are all of one size (64 B, then 48 B), within a step where
 * their sizes vary; in about as many bytes as without it. */
Test(packed4, bytes_of_one_size_stay_exact)
{
	enum { N = 3000, PHASE = 1000 };
	const struct rhea_sample *p[N];
	struct steps c;
	struct rhea_sample *v = make_ordered(N, p, &c);
	struct rhea_counters k = {0};
	for (uint32_t i = 0; i < N; i++) {
		uint64_t n = 1 + rng() % 60, size = i < PHASE ? 64 : i < 2 * PHASE ? 0 : 48, bytes = 0, nb = n / 3;
		for (uint64_t a = 0; a < n; a++)
			bytes += size ? size : 16 + rng() % 4000;
		/* c_begin a third of the way in: for the sizes that vary, the
		 * bytes it holds are a third too */
		v[i].c_begin.alloc_count = k.alloc_count + nb;
		v[i].c_begin.alloc_bytes = k.alloc_bytes + (size ? nb * size : bytes / 3);
		k.alloc_count += n;
		k.alloc_bytes += bytes;
		v[i].c_end.alloc_count = k.alloc_count;
		v[i].c_end.alloc_bytes = k.alloc_bytes;
	}
	size_t cap = N * 300;
	uint8_t *buf = malloc(cap);
	struct collect h = {calloc(N, sizeof(*h.s)), 0, N};
	unsigned stepped = PACKED_STEP_CPU | PACKED_STEP_ALLOC_BYTES;
	size_t plain = packed_encode_rc(p, N, 4, stepped, 1000, buf, cap);
	cr_assert_gt(plain, 0);
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, collect, &h), 0);
	uint32_t off_plain = 0;
	for (uint32_t i = 0; i < N; i++)
		off_plain += (i < PHASE || i >= 2 * PHASE) && h.s[i].c_end.alloc_bytes != v[i].c_end.alloc_bytes;
	cr_assert_gt(off_plain, PHASE / 2, "without near-exact, %u of one size off: the test tests nothing", off_plain);

	size_t len = packed_encode_rc(p, N, 4, stepped | PACKED_NEAR, 1000, buf, cap);
	cr_assert_gt(len, 0);
	cr_assert_eq(((const struct rhea_entry *)buf)->flags, 4 | 0x05 << 8 | 0x20);
	cr_assert_leq(len, plain + plain / 50, "near-exact %zu bytes, without %zu", len, plain);
	h.n = 0;
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, collect, &h), 0);
	cr_assert_eq(h.n, N);
	uint32_t off = 0;
	uint64_t prev = 0;
	for (uint32_t i = 0; i < N; i++) {
		const struct rhea_counters *ge = &h.s[i].c_end, *gb = &h.s[i].c_begin, *we = &v[i].c_end,
					   *wb = &v[i].c_begin;
		cr_assert_eq(ge->alloc_count, we->alloc_count);
		cr_assert_eq(gb->alloc_count, wb->alloc_count);
		cr_assert_leq(ge->alloc_bytes, we->alloc_bytes, "sample %u above the truth", i);
		cr_assert_geq(ge->alloc_bytes, prev, "sample %u went down", i);
		cr_assert_geq(gb->alloc_bytes, prev, "sample %u: c_begin before the previous c_end", i);
		cr_assert_leq(gb->alloc_bytes, ge->alloc_bytes, "sample %u: c_begin after its c_end", i);
		cr_assert_eq(ge->cpu_ns / 1000, h.s[i].c_end.cpu_ns / 1000);
		prev = ge->alloc_bytes;
		/* one size: exact from the phase's second sample (the first's
		 * bytes per allocation are the previous phase's) */
		if ((i > 0 && i < PHASE) || i > 2 * PHASE) {
			cr_assert_eq(ge->alloc_bytes, we->alloc_bytes, "sample %u: %llu bytes, not %llu", i,
				     (unsigned long long)ge->alloc_bytes, (unsigned long long)we->alloc_bytes);
			cr_assert_eq(gb->alloc_bytes, wb->alloc_bytes, "sample %u: c_begin's bytes", i);
		} else if (i >= PHASE && i < 2 * PHASE) {
			off += ge->alloc_bytes != we->alloc_bytes;
			/* within a step: 1/16 of at most 60 x 4015 bytes */
			cr_assert_leq(we->alloc_bytes - ge->alloc_bytes, 60 * 4015 / 16, "sample %u", i);
		}
	}
	cr_assert_gt(off, PHASE / 2, "sizes that vary: %u of %u samples stepped", off, PHASE);
	free(h.s);
	free(buf);
	free(v);
}

/* Any input (counters going down, c_begin anywhere) decodes, with
 * everything but the counters as PACKED2 keeps it; a shift above the
 * largest is refused. */
Test(packed, steps_take_wild_values)
{
	enum { N = 2000 };
	struct rhea_sample *v = make(N, 1);
	const struct rhea_sample *p[N];
	for (int i = 0; i < N; i++)
		p[i] = &v[i];
	uint8_t *buf = malloc(N * 300);
	size_t len = packed_encode_steps(p, N, 4, 0x7f, buf, N * 300);
	cr_assert_gt(len, 0);
	int n = 0;
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), 0);
	cr_assert_eq(n, N);
	uint16_t flags = ((struct rhea_entry *)buf)->flags;
	((struct rhea_entry *)buf)->flags = (uint16_t)((flags & ~0x1fu) | (PACKED_SHIFT_MAX + 1));
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), -1, "a shift too large accepted");
	((struct rhea_entry *)buf)->flags = (uint16_t)(flags | 0x20);
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), -1, "undefined flag bit 5 accepted");
	((struct rhea_entry *)buf)->flags = (uint16_t)(flags | 0x8000);
	cr_assert_eq(packed_decode((const struct rhea_entry *)buf, count, &n), -1, "undefined flag bit 15 accepted");
	free(buf);
	free(v);
}

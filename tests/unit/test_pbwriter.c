/*
 * test_pbwriter.c - the protobuf encoder (export/pbwriter.c).
 *
 * What is proved here: varints, zigzag, fixed64/double, strings and tags
 * encode as the protobuf encoding spec's own examples say; nested messages
 * get their exact, minimal length whatever its size (1, 2 and 3 length
 * bytes: the content is moved right when the reserved byte is not enough)
 * and nest to any allowed depth; packed fields; and randomly generated
 * nested messages decode back to what was written (fixed seed).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pbwriter.h"

static struct pbwriter w;

static void setup(void)
{
	pbwriter_init(&w);
}

static void teardown(void)
{
	pbwriter_free(&w);
}

TestSuite(pbwriter, .init = setup, .fini = teardown);

static void expect(const char *what, const uint8_t *want, size_t n)
{
	cr_assert_eq(w.oom, 0, "%s: out of memory", what);
	cr_assert_eq(w.len, n, "%s: %zu bytes, want %zu", what, w.len, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(w.buf[i], want[i], "%s: byte %zu is %02x, want %02x", what, i, w.buf[i], want[i]);
}

Test(pbwriter, spec_examples)
{
	/* developers.google.com/protocol-buffers/docs/encoding */
	pbwriter_varint(&w, 1, 150);
	expect("field 1 = 150", (const uint8_t[]){0x08, 0x96, 0x01}, 3);
	pbwriter_reset(&w);
	pbwriter_string(&w, 2, "testing");
	expect("field 2 = \"testing\"", (const uint8_t[]){0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}, 9);
	pbwriter_reset(&w);
	pbwriter_begin(&w, 3);
	pbwriter_varint(&w, 1, 150);
	pbwriter_end(&w);
	expect("embedded message", (const uint8_t[]){0x1a, 0x03, 0x08, 0x96, 0x01}, 5);
	pbwriter_reset(&w);
	pbwriter_begin(&w, 4);
	pbwriter_raw_varint(&w, 3);
	pbwriter_raw_varint(&w, 270);
	pbwriter_raw_varint(&w, 86942);
	pbwriter_end(&w);
	expect("packed", (const uint8_t[]){0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}, 8);
}

Test(pbwriter, varints)
{
	static const struct {
		uint64_t v;
		int n;
		uint8_t b[10];
	} cases[] = {
		{0, 1, {0x00}},
		{1, 1, {0x01}},
		{127, 1, {0x7f}},
		{128, 2, {0x80, 0x01}},
		{300, 2, {0xac, 0x02}},
		{16383, 2, {0xff, 0x7f}},
		{16384, 3, {0x80, 0x80, 0x01}},
		{1ull << 32, 5, {0x80, 0x80, 0x80, 0x80, 0x10}},
		{UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pbwriter_reset(&w);
		pbwriter_raw_varint(&w, cases[i].v);
		expect("varint", cases[i].b, (size_t)cases[i].n);
		cr_assert_eq(pbwriter_varint_size(cases[i].v), cases[i].n);
	}
}

Test(pbwriter, zigzag_and_signed)
{
	cr_assert_eq(pbwriter_zigzag(0), 0);
	cr_assert_eq(pbwriter_zigzag(-1), 1);
	cr_assert_eq(pbwriter_zigzag(1), 2);
	cr_assert_eq(pbwriter_zigzag(-2), 3);
	cr_assert_eq(pbwriter_zigzag(2147483647), 4294967294u);
	cr_assert_eq(pbwriter_zigzag(-2147483648LL), 4294967295u);
	cr_assert_eq(pbwriter_zigzag(INT64_MIN), UINT64_MAX);
	pbwriter_sint(&w, 1, -2);
	expect("sint -2", (const uint8_t[]){0x08, 0x03}, 2);
	pbwriter_reset(&w);
	pbwriter_int(&w, 1, -1); /* int64: ten bytes */
	expect("int64 -1", (const uint8_t[]){0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 11);
}

Test(pbwriter, fixed_and_double)
{
	pbwriter_fixed64(&w, 1, 0x0102030405060708ull);
	expect("fixed64", (const uint8_t[]){0x09, 8, 7, 6, 5, 4, 3, 2, 1}, 9);
	pbwriter_reset(&w);
	pbwriter_double(&w, 44, 1.0);
	/* field 44, wire type 1: tag 44 << 3 | 1 = 353 = 0xe1 0x02 */
	expect("double", (const uint8_t[]){0xe1, 0x02, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 10);
}

/* A nested message holding one bytes field of n bytes: content length
 * 1 + size(n) + n, whose own length takes lenbytes bytes. */
static void nested_of(size_t n, int lenbytes)
{
	pbwriter_reset(&w);
	char *blob = malloc(n);
	for (size_t i = 0; i < n; i++)
		blob[i] = (char)(i * 7);
	pbwriter_begin(&w, 5);
	pbwriter_bytes(&w, 1, blob, n);
	pbwriter_end(&w);
	size_t content = 1 + (size_t)pbwriter_varint_size(n) + n;
	cr_assert_eq(w.len, 1 + (size_t)lenbytes + content, "content %zu: total %zu", content, w.len);
	cr_assert_eq(w.buf[0], 0x2a);
	uint64_t len = 0;
	int shift = 0, i = 1;
	for (;; i++, shift += 7) {
		len |= (uint64_t)(w.buf[i] & 0x7f) << shift;
		if (w.buf[i] < 0x80)
			break;
	}
	cr_assert_eq(i, lenbytes, "content %zu: length takes %d bytes, want %d", content, i, lenbytes);
	cr_assert_eq(len, content);
	cr_assert_eq(memcmp(w.buf + w.len - n, blob, n), 0, "content intact after the move");
	free(blob);
}

Test(pbwriter, nested_lengths)
{
	nested_of(100, 1);     /* content 102 */
	nested_of(125, 1);     /* 127: the largest one-byte length */
	nested_of(126, 2);     /* 128 */
	nested_of(16000, 2);
	nested_of(16379, 2);   /* 16382 */
	nested_of(16381, 3);   /* 16384 */
	nested_of(3000000, 4);
}

Test(pbwriter, deep_nesting_and_overflow)
{
	for (int i = 0; i < PBWRITER_MAX_DEPTH; i++)
		pbwriter_begin(&w, 1);
	for (int i = 0; i < 300; i++)
		pbwriter_varint(&w, 2, (uint64_t)i); /* innermost grows past 128 */
	for (int i = 0; i < PBWRITER_MAX_DEPTH; i++)
		pbwriter_end(&w);
	cr_assert_eq(w.depth, 0);
	cr_assert_eq(w.oom, 0);
	pbwriter_reset(&w);
	for (int i = 0; i <= PBWRITER_MAX_DEPTH; i++)
		pbwriter_begin(&w, 1);
	cr_assert_eq(w.oom, 1, "nesting deeper than the maximum is an error, not an overflow");
}

/* ---- round trip ---------------------------------------------------------- */

struct node {
	int kind; /* 0 varint, 1 fixed64, 2 bytes, 3 message */
	uint32_t field;
	uint64_t v;
	char bytes[40];
	size_t nbytes;
	struct node *kids;
	int nkids;
};

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	seed ^= seed >> 12;
	seed ^= seed << 25;
	seed ^= seed >> 27;
	return seed * 0x2545F4914F6CDD1DULL;
}

static void gen(struct node *n, int depth)
{
	n->kind = depth > 5 ? (int)(rnd() % 3) : (int)(rnd() % 4);
	n->field = 1 + (uint32_t)(rnd() % 3000);
	n->v = rnd() >> (rnd() % 64);
	n->nbytes = rnd() % sizeof(n->bytes);
	for (size_t i = 0; i < n->nbytes; i++)
		n->bytes[i] = (char)rnd();
	n->nkids = 0;
	n->kids = NULL;
	if (n->kind == 3) {
		n->nkids = (int)(rnd() % 12);
		n->kids = calloc((size_t)n->nkids + 1, sizeof(struct node));
		for (int i = 0; i < n->nkids; i++)
			gen(&n->kids[i], depth + 1);
	}
}

static void put(const struct node *n)
{
	switch (n->kind) {
	case 0: pbwriter_varint(&w, n->field, n->v); break;
	case 1: pbwriter_fixed64(&w, n->field, n->v); break;
	case 2: pbwriter_bytes(&w, n->field, n->bytes, n->nbytes); break;
	default:
		pbwriter_begin(&w, n->field);
		for (int i = 0; i < n->nkids; i++)
			put(&n->kids[i]);
		pbwriter_end(&w);
	}
}

static uint64_t get_varint(const uint8_t *p, size_t *i, size_t end)
{
	uint64_t v = 0;
	for (int shift = 0;; shift += 7) {
		cr_assert_lt(*i, end, "varint past the end");
		uint8_t b = p[(*i)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80)
			return v;
	}
}

/* Check that p[*i..end) holds n's encoding; advance *i. */
static void check(const struct node *n, const uint8_t *p, size_t *i, size_t end)
{
	uint64_t tag = get_varint(p, i, end);
	cr_assert_eq(tag >> 3, n->field);
	switch (n->kind) {
	case 0:
		cr_assert_eq(tag & 7, 0);
		cr_assert_eq(get_varint(p, i, end), n->v);
		break;
	case 1: {
		cr_assert_eq(tag & 7, 1);
		uint64_t v = 0;
		for (int k = 0; k < 8; k++)
			v |= (uint64_t)p[*i + (size_t)k] << (8 * k);
		*i += 8;
		cr_assert_eq(v, n->v);
		break;
	}
	case 2: {
		cr_assert_eq(tag & 7, 2);
		uint64_t len = get_varint(p, i, end);
		cr_assert_eq(len, n->nbytes);
		cr_assert_eq(memcmp(p + *i, n->bytes, n->nbytes), 0);
		*i += n->nbytes;
		break;
	}
	default: {
		cr_assert_eq(tag & 7, 2);
		size_t lenpos = *i;
		uint64_t len = get_varint(p, i, end);
		cr_assert_eq((size_t)pbwriter_varint_size(len), *i - lenpos, "length not minimal");
		size_t stop = *i + len;
		cr_assert_leq(stop, end);
		for (int k = 0; k < n->nkids; k++)
			check(&n->kids[k], p, i, stop);
		cr_assert_eq(*i, stop, "message length matches its content");
	}
	}
}

static void drop(struct node *n)
{
	for (int i = 0; i < n->nkids; i++)
		drop(&n->kids[i]);
	free(n->kids);
}

Test(pbwriter, random_round_trip)
{
	for (int round = 0; round < 200; round++) {
		struct node top;
		gen(&top, 0);
		pbwriter_reset(&w);
		put(&top);
		cr_assert_eq(w.oom, 0);
		cr_assert_eq(w.depth, 0);
		size_t i = 0;
		check(&top, w.buf, &i, w.len);
		cr_assert_eq(i, w.len, "round %d: trailing bytes", round);
		drop(&top);
	}
}

/* pbwriter_pair writes what the general calls write: a nested message of
 * two varint fields, whatever the values (1 to 10 bytes each), inside an
 * open message or at the top. */
Test(pbwriter, pair_as_the_general_calls)
{
	static const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, 1ull << 35, UINT64_MAX - 1, UINT64_MAX};
	struct pbwriter ref;
	pbwriter_init(&ref);
	for (int depth = 0; depth < 2; depth++)
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
			for (size_t j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
				pbwriter_reset(&w);
				pbwriter_reset(&ref);
				if (depth) {
					pbwriter_begin(&w, 9);
					pbwriter_begin(&ref, 9);
				}
				pbwriter_pair(&w, 4, 1, vals[i], 15, vals[j]);
				pbwriter_begin(&ref, 4);
				pbwriter_varint(&ref, 1, vals[i]);
				pbwriter_varint(&ref, 15, vals[j]);
				pbwriter_end(&ref);
				if (depth) {
					pbwriter_end(&w);
					pbwriter_end(&ref);
				}
				cr_assert_eq(w.len, ref.len, "values %zu %zu", i, j);
				cr_assert_eq(memcmp(w.buf, ref.buf, w.len), 0, "values %zu %zu", i, j);
			}
	pbwriter_free(&ref);
}

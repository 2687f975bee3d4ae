/* Unit tests of core/rcoder.h: whatever mix of adaptive bits and direct
 * bits goes in comes out, the decoder reads exactly the bytes the encoder
 * wrote and notices reading past them, the encoder never writes past its
 * buffer, and a long run of one bit costs next to nothing. */
#include <criterion/criterion.h>
#include <string.h>

#include "rcoder.h"

#define RNG_SEED 0x9e3779b97f4a7c15ull
#include "xorshift.h"

enum { N = 20000 };
static uint8_t buf[1 << 18];
static unsigned kinds[N], widths[N];
static uint64_t values[N];

/* N symbols: bits of 4 contexts with their own odds (1/2 to 1/1000), and
 * direct fields of 1 to 64 bits. */
static size_t encode_mix(uint8_t *out, size_t cap, int *err)
{
	struct rc_enc e;
	rc_enc_init(&e, out, out + cap);
	rc_prob p[4] = {RC_PROB_INIT, RC_PROB_INIT, RC_PROB_INIT, RC_PROB_INIT};
	static const unsigned odds[4] = {2, 10, 100, 1000};
	for (int i = 0; i < N; i++) {
		kinds[i] = (unsigned)(rng() % 5);
		if (kinds[i] == 4) {
			widths[i] = 1 + (unsigned)(rng() % 64);
			values[i] = widths[i] == 64 ? rng() : rng() & ((1ull << widths[i]) - 1);
			rc_direct(&e, values[i], widths[i]);
		} else {
			values[i] = rng() % odds[kinds[i]] == 0;
			rc_bit(&e, &p[kinds[i]], (unsigned)values[i]);
		}
	}
	rc_flush(&e);
	*err = e.err;
	return e.len;
}

Test(rcoder, round_trip)
{
	for (int round = 0; round < 20; round++) {
		int err;
		size_t len = encode_mix(buf, sizeof(buf), &err);
		cr_assert_eq(err, 0);
		struct rc_dec d;
		cr_assert_eq(rc_dec_init(&d, buf, buf + len), 0);
		rc_prob p[4] = {RC_PROB_INIT, RC_PROB_INIT, RC_PROB_INIT, RC_PROB_INIT};
		for (int i = 0; i < N; i++) {
			uint64_t v = kinds[i] == 4 ? rc_ddirect(&d, widths[i]) : rc_dbit(&d, &p[kinds[i]]);
			cr_assert_eq(v, values[i], "round %d, symbol %d", round, i);
		}
		/* every byte read, none past them */
		cr_assert_eq(d.p, buf + len);
		cr_assert_eq(d.bad, 0);
		/* one byte fewer: the decoder notices it read past the end */
		cr_assert_eq(rc_dec_init(&d, buf, buf + len - 1), 0);
		memset(p, 0, sizeof(p));
		for (int k = 0; k < 4; k++)
			p[k] = RC_PROB_INIT;
		for (int i = 0; i < N; i++)
			kinds[i] == 4 ? rc_ddirect(&d, widths[i]) : rc_dbit(&d, &p[kinds[i]]);
		cr_assert_eq(d.bad, 1);
	}
}

Test(rcoder, encoder_stays_in_its_buffer)
{
	uint64_t seed = rng_state;
	int err;
	size_t full = encode_mix(buf, sizeof(buf), &err);
	static uint8_t small[1 << 18];
	for (size_t cap = 0; cap < full; cap += 1 + full / 50) {
		rng_state = seed;
		memset(small, 0xa5, sizeof(small));
		encode_mix(small, cap, &err);
		cr_assert_eq(err, 1, "cap %zu of %zu: no error", cap, full);
		for (size_t i = cap; i < sizeof(small); i++)
			cr_assert_eq(small[i], 0xa5, "cap %zu: byte %zu written", cap, i);
	}
}

/* The first byte of a stream is 0: anything else is not one. */
Test(rcoder, foreign_start_refused)
{
	struct rc_dec d;
	uint8_t b[5] = {1, 0, 0, 0, 0};
	cr_assert_eq(rc_dec_init(&d, b, b + 5), -1);
	cr_assert_eq(rc_dec_init(&d, b + 1, b + 3), -1);
}

/* 100000 zeros in one context: a few bytes (the probabilities are fine
 * enough that a certain bit costs about a thousandth of a bit). */
Test(rcoder, certain_bits_cost_little)
{
	struct rc_enc e;
	rc_enc_init(&e, buf, buf + sizeof(buf));
	rc_prob p = RC_PROB_INIT;
	for (int i = 0; i < 100000; i++)
		rc_bit(&e, &p, 0);
	rc_flush(&e);
	cr_assert_lt(e.len, 40, "%zu bytes", e.len);
}

/*
 * rcoder.h - a binary range coder with adaptive probabilities, for
 * PACKED4's samples (core/packed.c).
 *
 * Why not zstd alone: zstd sees bytes.  A sample's values are small
 * numbers whose likely sizes depend on which field they are and on what
 * the same field was a sample earlier; coded bit by bit against
 * probabilities learnt per field, they take about a third less than the
 * same values as varints through zstd (measured on W2, see packed.c).  No
 * library offers an entropy coder driven by the caller's own contexts, so
 * this is the classic carry-propagating range coder (Subbotin; the
 * arrangement LZMA made common): 32-bit range, adaptive 16-bit
 * probabilities.
 *
 * The decoder reads untrusted bytes: it reads exactly the bytes the
 * encoder wrote (its first is always 0), and past the end zeros, noting
 * the overrun (rc_dec.bad): damage costs wrong values, never a read out of
 * bounds.  (What detects wrong values is the caller's: PACKED4 ends with a
 * hash of what it coded.)
 */
#ifndef RHEA_RCODER_H
#define RHEA_RCODER_H

#include <stddef.h>
#include <stdint.h>

#define RC_PROB_BITS 16
#define RC_SLOW 32 /* the slowest a probability moves: 1/32 of the way */
#define RC_PROB_INIT ((1u << (RC_PROB_BITS - 1)) << 8) /* 1/2, nothing seen */
#define RC_TOP (1u << 24)

/* A probability that the next bit is 0, in RC_PROB_BITS bits (fine enough
 * that a bit seen thousands of times costs next to nothing), and in the
 * low 8 bits how many bits it has seen (up to 255).  It moves 1/(n + 2) of
 * the way towards the n-th bit (rounded down), at most RC_SLOW: the first bits teach it
 * quickly (an entry may hold only a few hundred samples; this is the
 * Krichevsky-Trofimov estimate), later ones follow a drift.  Measured on
 * a W2 recording: 1/32 beats 1/64 and 1/256 by 0.4 and 0.8%; a fixed 1/32
 * from the start, as LZMA's 11-bit probabilities move, made the file 25%
 * larger. */
typedef uint32_t rc_prob;

static inline uint32_t rc_p(rc_prob p)
{
	return p >> 8;
}

/* 65536 / q for q = 2 .. RC_SLOW, rounded down: a multiplication instead
 * of a division per bit. */
static const uint16_t rc_recip[RC_SLOW + 1] = {
	0, 0, 32768, 21845, 16384, 13107, 10922, 9362, 8192, 7281, 6553, 5957,
	5461, 5041, 4681, 4369, 4096, 3855, 3640, 3449, 3276, 3120, 2978, 2849,
	2730, 2621, 2520, 2427, 2340, 2259, 2184, 2114, 2048,
};

static inline void rc_learn(rc_prob *p, unsigned bit)
{
	uint32_t v = *p >> 8, n = *p & 255, r = rc_recip[n + 2 < RC_SLOW ? n + 2 : RC_SLOW];
	/* (without branches: the bits are what cannot be predicted) */
	uint32_t down = v - (v * r >> 16), up = v + (((1u << RC_PROB_BITS) - v) * r >> 16);
	v = bit ? down : up;
	v = v < 1 ? 1 : v;
	v = v >= 1u << RC_PROB_BITS ? (1u << RC_PROB_BITS) - 1 : v;
	*p = (rc_prob)(v << 8 | (n < 255 ? n + 1 : 255));
}

struct rc_enc {
	uint64_t low;
	uint32_t range;
	uint8_t cache;
	uint64_t pending; /* bytes held back: cache, then pending - 1 0xff */
	uint8_t *p, *end; /* NULL p: only count */
	size_t len;       /* bytes out */
	int err;          /* did not fit */
};

struct rc_dec {
	uint32_t range, code;
	const uint8_t *p, *end;
	int bad; /* read past the end */
};

static inline void rc_enc_init(struct rc_enc *e, uint8_t *p, uint8_t *end)
{
	e->low = 0;
	e->range = UINT32_MAX;
	e->cache = 0;
	e->pending = 1;
	e->p = p;
	e->end = end;
	e->len = 0;
	e->err = 0;
}

static inline void rc_out(struct rc_enc *e, uint8_t b)
{
	e->len++;
	if (!e->p)
		return;
	if (e->p >= e->end) {
		e->err = 1;
		return;
	}
	*e->p++ = b;
}

/* The top byte of low leaves, unless a carry may still reach it. */
static inline void rc_shift_low(struct rc_enc *e)
{
	if ((uint32_t)e->low < 0xff000000u || (e->low >> 32) != 0) {
		uint8_t carry = (uint8_t)(e->low >> 32);
		uint8_t b = e->cache;
		do {
			rc_out(e, (uint8_t)(b + carry));
			b = 0xff;
		} while (--e->pending != 0);
		e->cache = (uint8_t)(e->low >> 24);
	}
	e->pending++;
	e->low = (e->low & 0x00ffffffu) << 8;
}

static inline void rc_bit(struct rc_enc *e, rc_prob *p, unsigned bit)
{
	uint32_t bound = (e->range >> RC_PROB_BITS) * rc_p(*p);
	e->low += bit ? bound : 0;
	e->range = bit ? e->range - bound : bound;
	rc_learn(p, bit);
	while (e->range < RC_TOP) {
		e->range <<= 8;
		rc_shift_low(e);
	}
}

/* n bits of v, high first, each with probability 1/2. */
static inline void rc_direct(struct rc_enc *e, uint64_t v, unsigned n)
{
	while (n--) {
		e->range >>= 1;
		if ((v >> n) & 1)
			e->low += e->range;
		while (e->range < RC_TOP) {
			e->range <<= 8;
			rc_shift_low(e);
		}
	}
}

/* The last bytes: after this, e->len bytes make the stream. */
static inline void rc_flush(struct rc_enc *e)
{
	for (int i = 0; i < 5; i++)
		rc_shift_low(e);
}

static inline uint8_t rc_in(struct rc_dec *d)
{
	if (d->p >= d->end) {
		d->bad = 1;
		return 0;
	}
	return *d->p++;
}

/* 0, or -1 when the stream cannot start (its first byte is always 0). */
static inline int rc_dec_init(struct rc_dec *d, const uint8_t *p, const uint8_t *end)
{
	d->p = p;
	d->end = end;
	d->bad = 0;
	d->range = UINT32_MAX;
	d->code = 0;
	if (rc_in(d) != 0)
		return -1;
	for (int i = 0; i < 4; i++)
		d->code = d->code << 8 | rc_in(d);
	return d->bad ? -1 : 0;
}

static inline unsigned rc_dbit(struct rc_dec *d, rc_prob *p)
{
	uint32_t bound = (d->range >> RC_PROB_BITS) * rc_p(*p);
	unsigned bit = d->code >= bound;
	uint32_t mask = 0u - bit;
	d->code -= bound & mask;
	d->range = bit ? d->range - bound : bound;
	rc_learn(p, bit);
	while (d->range < RC_TOP) {
		d->range <<= 8;
		d->code = d->code << 8 | rc_in(d);
	}
	return bit;
}

static inline uint64_t rc_ddirect(struct rc_dec *d, unsigned n)
{
	uint64_t v = 0;
	while (n--) {
		d->range >>= 1;
		unsigned bit = d->code >= d->range;
		if (bit)
			d->code -= d->range;
		v = v << 1 | bit;
		while (d->range < RC_TOP) {
			d->range <<= 8;
			d->code = d->code << 8 | rc_in(d);
		}
	}
	return v;
}

#endif

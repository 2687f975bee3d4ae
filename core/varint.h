/*
 * varint.h - LEB128 varints and zigzag, for the file's compact entries
 * (packed.c: samples; nodepack.c: stack nodes).  No allocation:
 * async-signal-safe, usable in the agent.
 */
#ifndef RHEA_VARINT_H
#define RHEA_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Where put() writes; p == NULL: it only counts. */
struct cursor {
	uint8_t *p, *end;
	size_t len; /* bytes put */
	int err;    /* did not fit */
};

static inline void put(struct cursor *c, uint64_t v)
{
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		c->len++;
		if (!c->p)
			continue;
		if (c->p >= c->end) {
			c->err = 1;
			return;
		}
		*c->p++ = (uint8_t)(b | (v ? 0x80 : 0));
	} while (v);
}

static inline uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

struct rcursor {
	const uint8_t *p, *end;
	int bad;
};

/* A LEB128 varint of at most 64 bits: a 10th byte above 1, or an 11th
 * byte, is malformed (as is running off the end). */
static inline uint64_t get(struct rcursor *c)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (c->p >= c->end) {
			c->bad = 1;
			return 0;
		}
		uint8_t b = *c->p++;
		if (shift == 63 && b > 1)
			break;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

#endif

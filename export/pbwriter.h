/*
 * pbwriter.h - a minimal streaming protocol-buffers encoder: varints,
 * zigzag, fixed64/double, length-delimited fields and nested messages, into
 * one growable buffer that the caller flushes between top-level messages.
 * Used by the Perfetto and pprof converters (export/perfetto.c, pprof.c);
 * pbwriter.c says why it is hand-written.
 *
 * Usage: pbwriter_begin(w, field) opens a nested message, pbwriter_end(w)
 * closes the innermost one; fields written in between belong to it.  Packed
 * repeated scalars are a nested "message" of raw varints:
 * pbwriter_begin(w, f); pbwriter_raw_varint(w, v)...; pbwriter_end(w).
 * Memory errors are sticky: w->oom is set and later calls do nothing.
 */
#ifndef RHEA_PBWRITER_H
#define RHEA_PBWRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PBWRITER_MAX_DEPTH 16

struct pbwriter {
	uint8_t *buf;
	size_t len, cap;
	size_t open[PBWRITER_MAX_DEPTH]; /* content start of each open message */
	int depth;
	int oom;
};

void pbwriter_init(struct pbwriter *w);
void pbwriter_free(struct pbwriter *w);
/* Forget the buffered bytes (all messages must be closed). */
void pbwriter_reset(struct pbwriter *w);

/* int32/int64 fields: negative values take 10 bytes, as the spec says. */
void pbwriter_int(struct pbwriter *w, uint32_t field, int64_t v);
/* sint32/sint64 fields: zigzag. */
void pbwriter_sint(struct pbwriter *w, uint32_t field, int64_t v);
void pbwriter_fixed64(struct pbwriter *w, uint32_t field, uint64_t v);
void pbwriter_double(struct pbwriter *w, uint32_t field, double v);
/* Wire type 2. */
void pbwriter_bytes(struct pbwriter *w, uint32_t field, const void *p, size_t n);
void pbwriter_string(struct pbwriter *w, uint32_t field, const char *s);


/* Bytes a varint takes (1..10). */
int pbwriter_varint_size(uint64_t v);
/* Zigzag-encode a signed value. */
uint64_t pbwriter_zigzag(int64_t v);

/*
 * The calls a converter makes for every field (a million samples are some
 * ten million of them) are inline: most tags are constants, and a call
 * each was a quarter of a conversion to Perfetto.  The slow paths (a
 * larger buffer, a message of 128 bytes or more) are not.
 */
enum { PBWRITER_VARINT = 0, PBWRITER_I64 = 1, PBWRITER_LEN = 2 };

/* Room for n more bytes, after the buffered ones; -1 (oom set) if none. */
int pbwriter_grow(struct pbwriter *w, size_t n);
/* Close the innermost message, whose length takes more than a byte. */
void pbwriter_end_long(struct pbwriter *w, size_t start, size_t n);

static inline int pbwriter_reserve(struct pbwriter *w, size_t n)
{
	if (__builtin_expect(!w->oom && w->len + n <= w->cap, 1))
		return 0;
	return pbwriter_grow(w, n);
}

/* v at the end of the buffer, which has room for it. */
static inline void pbwriter_put(struct pbwriter *w, uint64_t v)
{
	uint8_t *p = w->buf + w->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	w->len = (size_t)(p - w->buf);
}

/* Wire type 0: unsigned varint (also enums, bools, and int32/int64 >= 0). */
static inline void pbwriter_varint(struct pbwriter *w, uint32_t field, uint64_t v)
{
	if (pbwriter_reserve(w, 20) == 0) {
		pbwriter_put(w, ((uint64_t)field << 3) | PBWRITER_VARINT);
		pbwriter_put(w, v);
	}
}

/* A bare varint (inside a packed field). */
static inline void pbwriter_raw_varint(struct pbwriter *w, uint64_t v)
{
	if (pbwriter_reserve(w, 10) == 0)
		pbwriter_put(w, v);
}

static inline void pbwriter_begin(struct pbwriter *w, uint32_t field)
{
	if (w->depth >= PBWRITER_MAX_DEPTH) {
		w->oom = 1; /* a programming error; make it visible as a failure */
		return;
	}
	if (pbwriter_reserve(w, 11) != 0)
		return;
	pbwriter_put(w, ((uint64_t)field << 3) | PBWRITER_LEN);
	w->buf[w->len++] = 0; /* the length, one byte until we know better */
	w->open[w->depth++] = w->len;
}

static inline void pbwriter_end(struct pbwriter *w)
{
	if (w->oom || w->depth == 0)
		return;
	size_t start = w->open[--w->depth];
	size_t n = w->len - start;
	if (__builtin_expect(n < 0x80, 1))
		w->buf[start - 1] = (uint8_t)n;
	else
		pbwriter_end_long(w, start, n);
}

/* A nested message of two varint fields, all three field numbers below 16
 * (one-byte tags): what a converter writes most (a Perfetto debug
 * annotation: its name's iid and its value), in one go. */
static inline void pbwriter_pair(struct pbwriter *w, uint32_t field, uint32_t f1, uint64_t v1, uint32_t f2,
				 uint64_t v2)
{
	if (pbwriter_reserve(w, 24) != 0)
		return;
	uint8_t *p = w->buf + w->len;
	p[0] = (uint8_t)(field << 3 | PBWRITER_LEN);
	p[2] = (uint8_t)(f1 << 3 | PBWRITER_VARINT);
	w->len += 3;
	pbwriter_put(w, v1);
	w->buf[w->len++] = (uint8_t)(f2 << 3 | PBWRITER_VARINT);
	pbwriter_put(w, v2);
	p[1] = (uint8_t)(w->buf + w->len - p - 2); /* at most 22 */
}

#endif

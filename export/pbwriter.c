/*
 * pbwriter.c - the protobuf encoder behind `rhea convert -f perfetto` and
 * `-f pprof` (see pbwriter.h for the interface).
 *
 * Why hand-written and not generated (protobuf-c, nanopb): rhea writes a
 * handful of fields of a few messages (TracePacket, TrackEvent, interned
 * data, PerfSample; pprof's Profile), streams them out packet by packet, and
 * never reads protobuf back.  Code generated from perfetto_trace.proto
 * (18k lines of schema) would be far larger than rhea itself, would build a
 * message tree in memory before serializing it, and would add a build
 * dependency; the wire format needed here is four rules (varint tags and
 * values, zigzag, fixed 64-bit, length-delimited), about 150 lines.
 *
 * Nested messages: a length-delimited field must carry its length before
 * its content, which is not known until the message is closed.  The writer
 * reserves one byte for the length when a message is opened (most rhea
 * messages are < 128 bytes) and, on close, moves the content right when the
 * length needs more bytes.  The output is canonical (minimal varints), so
 * every decoder, strict or not, reads it; the cost is one memmove per large
 * message, each byte moved at most once per nesting level that is large.
 * (Perfetto's own protozero instead reserves four bytes and writes
 * redundant varints; that is valid protobuf but not minimal.)
 */
#include "pbwriter.h"

#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

void pbwriter_init(struct pbwriter *w)
{
	memset(w, 0, sizeof(*w));
}

void pbwriter_free(struct pbwriter *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

void pbwriter_reset(struct pbwriter *w)
{
	w->len = 0;
	w->depth = 0;
}

/* The slow path of reserve(). */
static __attribute__((noinline)) int grow(struct pbwriter *w, size_t n)
{
	if (w->oom)
		return -1;
	if (w->len + n <= w->cap)
		return 0;
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < w->len + n)
		cap *= 2;
	uint8_t *p = realloc(w->buf, cap);
	if (!p) {
		w->oom = 1;
		return -1;
	}
	w->buf = p;
	w->cap = cap;
	return 0;
}

/* Make room for n more bytes; 0 or -1 (then oom is set). */
static inline int reserve(struct pbwriter *w, size_t n)
{
	if (__builtin_expect(!w->oom && w->len + n <= w->cap, 1))
		return 0;
	return grow(w, n);
}

int pbwriter_varint_size(uint64_t v)
{
	int n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

uint64_t pbwriter_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline void put_varint(struct pbwriter *w, uint64_t v)
{
	uint8_t *p = w->buf + w->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	w->len = (size_t)(p - w->buf);
}

void pbwriter_raw_varint(struct pbwriter *w, uint64_t v)
{
	if (reserve(w, 10) == 0)
		put_varint(w, v);
}

void pbwriter_varint(struct pbwriter *w, uint32_t field, uint64_t v)
{
	if (reserve(w, 20) == 0) {
		put_varint(w, ((uint64_t)field << 3) | WT_VARINT);
		put_varint(w, v);
	}
}

void pbwriter_int(struct pbwriter *w, uint32_t field, int64_t v)
{
	pbwriter_varint(w, field, (uint64_t)v);
}

void pbwriter_sint(struct pbwriter *w, uint32_t field, int64_t v)
{
	pbwriter_varint(w, field, pbwriter_zigzag(v));
}

void pbwriter_fixed64(struct pbwriter *w, uint32_t field, uint64_t v)
{
	if (reserve(w, 18) != 0)
		return;
	put_varint(w, ((uint64_t)field << 3) | WT_I64);
	for (int i = 0; i < 8; i++)
		w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

void pbwriter_double(struct pbwriter *w, uint32_t field, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof(u));
	pbwriter_fixed64(w, field, u);
}

void pbwriter_bytes(struct pbwriter *w, uint32_t field, const void *p, size_t n)
{
	if (reserve(w, 20 + n) != 0)
		return;
	put_varint(w, ((uint64_t)field << 3) | WT_LEN);
	put_varint(w, n);
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void pbwriter_string(struct pbwriter *w, uint32_t field, const char *s)
{
	pbwriter_bytes(w, field, s, strlen(s));
}

void pbwriter_begin(struct pbwriter *w, uint32_t field)
{
	if (w->depth >= PBWRITER_MAX_DEPTH) {
		w->oom = 1; /* a programming error; make it visible as a failure */
		return;
	}
	if (reserve(w, 11) != 0)
		return;
	put_varint(w, ((uint64_t)field << 3) | WT_LEN);
	w->buf[w->len++] = 0; /* the length, one byte until we know better */
	w->open[w->depth++] = w->len;
}

void pbwriter_end(struct pbwriter *w)
{
	if (w->oom || w->depth == 0)
		return;
	size_t start = w->open[--w->depth];
	size_t n = w->len - start;
	int extra = pbwriter_varint_size(n) - 1;
	if (extra > 0) {
		if (reserve(w, (size_t)extra) != 0)
			return;
		memmove(w->buf + start + extra, w->buf + start, n);
	}
	size_t save = w->len + (size_t)extra;
	w->len = start - 1;
	put_varint(w, n);
	w->len = save;
}

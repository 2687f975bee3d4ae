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

int pbwriter_grow(struct pbwriter *w, size_t n)
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
	if (pbwriter_reserve(w, 18) != 0)
		return;
	pbwriter_put(w, ((uint64_t)field << 3) | PBWRITER_I64);
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
	if (pbwriter_reserve(w, 20 + n) != 0)
		return;
	pbwriter_put(w, ((uint64_t)field << 3) | PBWRITER_LEN);
	pbwriter_put(w, n);
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void pbwriter_string(struct pbwriter *w, uint32_t field, const char *s)
{
	pbwriter_bytes(w, field, s, strlen(s));
}

void pbwriter_end_long(struct pbwriter *w, size_t start, size_t n)
{
	int extra = pbwriter_varint_size(n) - 1;
	if (pbwriter_reserve(w, (size_t)extra) != 0)
		return;
	memmove(w->buf + start + extra, w->buf + start, n);
	size_t save = w->len + (size_t)extra;
	w->len = start - 1;
	pbwriter_put(w, n);
	w->len = save;
}

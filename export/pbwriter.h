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

/* Wire type 0: unsigned varint (also enums, bools, and int32/int64 >= 0). */
void pbwriter_varint(struct pbwriter *w, uint32_t field, uint64_t v);
/* int32/int64 fields: negative values take 10 bytes, as the spec says. */
void pbwriter_int(struct pbwriter *w, uint32_t field, int64_t v);
/* sint32/sint64 fields: zigzag. */
void pbwriter_sint(struct pbwriter *w, uint32_t field, int64_t v);
void pbwriter_fixed64(struct pbwriter *w, uint32_t field, uint64_t v);
void pbwriter_double(struct pbwriter *w, uint32_t field, double v);
/* Wire type 2. */
void pbwriter_bytes(struct pbwriter *w, uint32_t field, const void *p, size_t n);
void pbwriter_string(struct pbwriter *w, uint32_t field, const char *s);

void pbwriter_begin(struct pbwriter *w, uint32_t field);
void pbwriter_end(struct pbwriter *w);
/* A bare varint (inside a packed field). */
void pbwriter_raw_varint(struct pbwriter *w, uint64_t v);

/* Bytes a varint takes (1..10). */
int pbwriter_varint_size(uint64_t v);
/* Zigzag-encode a signed value. */
uint64_t pbwriter_zigzag(int64_t v);

#endif

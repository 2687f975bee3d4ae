/*
 * packed.h - compact encoding of a thread's samples in the file
 * (entry RHEA_E_PACKED, see format.h and doc/format.md).
 */
#ifndef RHEA_PACKED_H
#define RHEA_PACKED_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Encode n samples of one thread (in the order given) after a struct
 * rhea_packed header into out (cap bytes).  Returns the entry's size
 * (a multiple of 8) or 0 when it does not fit.  No allocation. */
size_t packed_encode(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap);

/* Decode a RHEA_E_PACKED entry: calls fn for each sample.  Returns 0, or
 * -1 on a malformed entry (nothing past the error is reported). */
int packed_decode(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s),
		  void *arg);

#endif

/*
 * packed.h - compact encoding of a thread's samples in the file
 * (entries RHEA_E_PACKED2, and RHEA_E_PACKED of older recordings; see
 * format.h and doc/format.md).
 */
#ifndef RHEA_PACKED_H
#define RHEA_PACKED_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Encode n samples of one thread (in the order given) as a RHEA_E_PACKED2
 * entry into out (cap bytes): times and CPU time are stored in
 * microseconds, rounded down.  Returns the entry's size (a multiple of 8)
 * or 0 when it does not fit.  No allocation; async-signal-safe. */
size_t packed_encode(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap);

#ifndef RHEA_AGENT
/* The same as a RHEA_E_PACKED (kind 9) entry, exact to the nanosecond: the
 * format older writers wrote, kept to test its decoder. */
size_t packed_encode_v1(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap);
#endif

/* Decode a RHEA_E_PACKED or RHEA_E_PACKED2 entry: calls fn for each sample
 * (as a struct rhea_sample entry).  Returns 0, or -1 on a malformed entry
 * or an entry of another kind (samples before the damage have been
 * reported, nothing past it), or when fn returns non-zero. */
int packed_decode(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s),
		  void *arg);

#endif

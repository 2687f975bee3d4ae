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

/* The same with the differences of some counters in steps of about
 * 2^-shift of their size (see packed.c), as a RHEA_E_PACKED3 entry:
 * `counters` says which (bit j: counter j in the order of the file, 0 CPU
 * time, 1 allocations, 2 bytes, 3 minor and 4 major faults, 5 voluntary
 * and 6 involuntary switches).  Decoded, the counters in steps never go
 * down, a c_begin lies between the previous sample's c_end and its own
 * c_end, a c_end is at most the true one and more than it minus one step,
 * and the entry's last sample is exact (where the input kept that order).
 * Shift 0 or no counters: the exact RHEA_E_PACKED2.  0 when it does not
 * fit, or for a shift above PACKED_SHIFT_MAX. */
#define PACKED_SHIFT_MAX 16
#define PACKED_STEP_CPU 0x01u         /* counter 0, cpu_ns */
#define PACKED_STEP_ALLOC_BYTES 0x04u /* counter 2, alloc_bytes */
/* packed_encode_rc() only, with PACKED_STEP_ALLOC_BYTES: the bytes of
 * allocations of one size are coded exact (PACKED4's near-exact, packed.c). */
#define PACKED_NEAR 0x100u
size_t packed_encode_steps(const struct rhea_sample *const *s, uint32_t n, unsigned shift, unsigned counters,
			   void *out, size_t cap);

#ifndef RHEA_AGENT
/* The same samples as packed_encode_steps() as a RHEA_E_PACKED4 entry:
 * range coded, with better guesses, about a third smaller (what rhea
 * record's compaction writes).  It allocates (its probabilities): not for
 * the agent. */
size_t packed_encode_rc(const struct rhea_sample *const *s, uint32_t n, unsigned shift, unsigned counters,
			uint64_t period_us, void *out, size_t cap);

/* The same as a RHEA_E_PACKED (kind 9) entry, exact to the nanosecond: the
 * format older writers wrote, kept to test its decoder. */
size_t packed_encode_v1(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap);
#endif

/* Decode a RHEA_E_PACKED, RHEA_E_PACKED2, RHEA_E_PACKED3 or (not in the
 * agent) RHEA_E_PACKED4 entry: calls fn for each sample
 * (as a struct rhea_sample entry).  Returns 0, or -1 on a malformed entry
 * or an entry of another kind (samples before the damage have been
 * reported, nothing past it), or when fn returns non-zero. */
int packed_decode(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s),
		  void *arg);

#endif

/*
 * compact.h - rewrite a finished recording smaller, once nothing writes to
 * it any more (rhea record and rhea attach do it last).
 */
#ifndef RHEA_CLI_COMPACT_H
#define RHEA_CLI_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "packed.h"

/* The compacted samples' CPU times are in steps (PACKED3, core/packed.h)
 * of at most 2^-4 of the differences expected; the other counters are
 * exact. */
#define COMPACT_SHIFT 4
#define COMPACT_STEPPED PACKED_STEP_CPU

/* Files larger than this are left as they are (the samples are held in
 * memory, 152 bytes each, while they are re-encoded: about 1.2M samples,
 * 180 MB, and half a second of CPU at this size). */
#define COMPACT_MAX_FILE (16u << 20)

struct compact_result {
	uint64_t bytes_before, bytes_after;
	uint64_t samples;
};

enum compact_status {
	COMPACT_DONE = 0,
	COMPACT_SKIPPED = 1, /* not finished (no END), too large, not a regular file */
	COMPACT_FAILED = -1, /* unreadable, or the new file could not be written:
				the recording is as it was; err says why */
};

/*
 * Rewrite the recording at path: its samples re-encoded per thread in
 * large PACKED3 entries (CPU time differences in steps of at most 1/16
 * of the one expected, see core/packed.h), the allocation sites'
 * snapshots reduced to the last
 * ones, everything else as it was, compressed with a stronger zstd level,
 * into a new file that replaces path only when it reads back with as
 * many samples and captures.  Only for a recording that has its END.
 */
int compact_recording(const char *path, struct compact_result *res, char *err, size_t errlen);

#endif

/*
 * compact.h - rewrite a finished recording smaller, once nothing writes to
 * it any more (rhea record and rhea attach do it last).
 */
#ifndef RHEA_CLI_COMPACT_H
#define RHEA_CLI_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "packed.h"

/* The compacted samples' CPU times and allocated bytes are in steps
 * (PACKED3, core/packed.h) of at most 2^-4 of the differences expected,
 * the bytes exact where the allocations are of one size (PACKED_NEAR);
 * the other counters are exact. */
#define COMPACT_SHIFT 4
#define COMPACT_STEPPED (PACKED_STEP_CPU | PACKED_STEP_ALLOC_BYTES | PACKED_NEAR)

/* Samples held in memory at most while they are re-encoded (152 bytes
 * each: 80 MB), about 5 MB of the agent's file on a server-like workload;
 * beyond it, threads' samples are encoded in several runs (compact.c).
 * Measured on a synthetic 64 MB recording of 3M samples: 2.1 s and 220 MB
 * peak with a window of 1M samples, against 2.5 s and 460 MB for all of
 * them in memory, and 0.01% smaller. */
#define COMPACT_WINDOW (1u << 19)

struct compact_result {
	uint64_t bytes_before, bytes_after;
	uint64_t samples;
};

enum compact_status {
	COMPACT_DONE = 0,
	COMPACT_SKIPPED = 1, /* not finished (no END), not a regular file */
	COMPACT_FAILED = -1, /* unreadable, or the new file could not be written:
				the recording is as it was; err says why */
};

/*
 * Rewrite the recording at path: its samples re-encoded per thread in
 * large PACKED4 entries (CPU time differences in steps of at most 1/16
 * of the one expected, see core/packed.h), the allocation sites'
 * snapshots reduced to the last
 * ones, everything else as it was, compressed with a stronger zstd level,
 * into a new file that replaces path only when it reads back with as
 * many samples and captures.  Only for a recording that has its END.
 */
int compact_recording(const char *path, struct compact_result *res, char *err, size_t errlen);
/* The same for a process that runs in another mount namespace, whose
 * files are reached through root (/proc/PID/root): the names of its
 * functions that the files here do not give are kept in the recording
 * (META code_names). */
int compact_recording_root(const char *path, const char *root, struct compact_result *res, char *err,
			   size_t errlen);
/* The same holding at most `window` samples in memory (tests). */
int compact_recording_window(const char *path, size_t window, struct compact_result *res, char *err,
			     size_t errlen);

#endif

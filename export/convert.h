/*
 * convert.h - `rhea convert`: a recording as a Perfetto trace, Chrome JSON,
 * a pprof profile, folded stacks or a Nanoscope trace.
 *
 * Every format reads the same slices: the model's (analysis/model.c),
 * walked thread by thread through convert_walk(), which applies the filters
 * shared by all formats (threads, time window, minimum duration) and
 * computes each slice's arguments.  The formats differ only in how they
 * write them:
 *
 *   perfetto.c   TracePacket stream: tracks, interned names, slice begin/end
 *                events with debug annotations, process counter tracks, and
 *                the samples themselves as PerfSample callstacks
 *   chrome.c     Chrome trace-event JSON (B/E events, metadata, counters)
 *   pprof.c      gzipped profile.proto, per-stack self values
 *   folded.c     "frame;frame;frame value" lines (flamegraph.pl, speedscope)
 *   nanoscope.c  Nanoscope's text format ("ts:+name" / "ts:POP")
 */
#ifndef RHEA_CONVERT_H
#define RHEA_CONVERT_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

enum convert_format {
	CONVERT_PERFETTO = 0,
	CONVERT_CHROME,
	CONVERT_PPROF,
	CONVERT_FOLDED,
	CONVERT_NANOSCOPE,
};

/* Values every slice carries, and the order of pprof's sample types. */
enum convert_value {
	CONVERT_V_WALL = 0,   /* ns */
	CONVERT_V_CPU,        /* ns */
	CONVERT_V_ALLOC_COUNT,
	CONVERT_V_ALLOC_BYTES,
	CONVERT_V_CPU_SAMPLES, /* the sampler's captures: sampling periods of CPU
				  at each call path (an unbiased CPU profile) */
	CONVERT_NVALUES
};

struct convert_opts {
	int format;     /* enum convert_format */
	int policy;     /* enum model_end_policy */
	int weight;     /* folded: enum convert_value */
	const char *const *threads; /* --thread selectors: tid or name; NULL = all */
	size_t nthreads;
	int64_t from_ns, to_ns;     /* window relative to the recording start; to_ns < 0: no end */
	uint64_t min_dur_ns;        /* drop slices shorter than this */
	uint64_t stall_ns;          /* perfetto: event-loop iterations this long on a "stalls" track (0: default) */
	int cpu_samples;            /* perfetto: only the sampler's captures as PerfSamples, one per
				       period of CPU (an unbiased CPU flame graph) */
	uint64_t origin_ns;         /* time 0 (absolute monotonic ns); 0: the recording's start.
				       Several recordings in one trace share the earliest start */
	uint8_t *thread_hits;       /* NULL: a --thread selector no thread matches is an error;
				       else per selector, set to 1 when one matches (no error) */
};

/* What one converter run shares: the model, filters, names, statistics. */
struct convert_ctx {
	struct model *m;
	struct recording *r;
	const struct convert_opts *o;
	uint64_t origin_ns;         /* the recording's start: time 0 of --from/--to and of relative timestamps */
	uint64_t win_lo, win_hi;    /* absolute window: samples that begin in [win_lo, win_hi) */
	int windowed;               /* --from/--to given */
	uint8_t *selected;          /* per r->threads index: thread passes --thread */
	char **names;               /* per func: printable name (valid UTF-8, no controls), lazily */
	uint64_t *func_addr;        /* per func: one address in it (0: none, a pseudo-frame) */
	int32_t *func_mod;          /* per func: index in r->mods, -1 when none */
	uint32_t unattributed;      /* func id of "[unattributed]" */
	uint64_t records;           /* sample records read by convert_walk */
};

/* One slice as the formats see it. */
struct convert_slice {
	uint32_t func;
	int depth;                  /* 0 = outermost; every ancestor was emitted first */
	uint64_t begin_ns, end_ns;  /* absolute monotonic ns; end_ns set at end */
	uint32_t msgid;
	unsigned trigger;           /* hook of the sample that opened it (enum rhea_fn) */
	const struct rhea_sample *sample; /* the sample that opened it */
	/* Filled at end (counter deltas between the slice's begin and end): */
	uint64_t wall, cpu, self, self_cpu;
	uint64_t allocs, alloc_bytes, self_allocs, self_alloc_bytes;
	uint64_t minflt, majflt, nvcsw, nivcsw;
};

struct convert_sink {
	/* Slices of one thread, in time order, properly nested: begin is
	 * called for a slice before any of its children, end after them. */
	void (*begin)(void *arg, const struct rec_thread *t, const struct convert_slice *s);
	void (*end)(void *arg, const struct rec_thread *t, const struct convert_slice *s);
	void *arg;
};

/* Per-thread facts convert_walk() returns. */
struct convert_thread_info {
	uint64_t samples;           /* records walked */
	/* Allocations the thread made (as the report's threads table counts
	 * them) that no slice holds: before the first sample, in spans
	 * without a stack, in the gaps of --end last.  0 with filters. */
	uint64_t unattributed_allocs, unattributed_bytes;
};

/*
 * Prepare a run: resolve --thread selectors and the window, add the
 * "[unattributed]" pseudo-function.  0, or -1 with a one-line message in err
 * (a --thread that matches nothing, a window past the end).
 */
int convert_init(struct convert_ctx *c, struct model *m, const struct convert_opts *o, char *err,
		 size_t errlen);
void convert_free(struct convert_ctx *c);

/* The wall-clock time (CLOCK_REALTIME ns) of the origin, time 0. */
uint64_t convert_origin_realtime(const struct convert_ctx *c);

/* Printable name of a function (never NULL). */
const char *convert_func_name(struct convert_ctx *c, uint32_t func);

/* The stalls (--stall, default STALLS_DEFAULT_NS) of the selected threads
 * that begin inside the window, for the timeline formats.  0 or -1. */
struct stalls;
struct stall_cause;
int convert_stalls(struct convert_ctx *c, struct stalls *st);
/* "inner < outer ..." of a stall cause's frames, into buf. */
const char *convert_cause_name(struct convert_ctx *c, const struct stall_cause *k, char *buf, size_t len);

/* Index range [*lo, *hi) of t's samples inside the window. */
void convert_range(const struct convert_ctx *c, const struct rec_thread *t, size_t *lo, size_t *hi);

/* Walk one thread's slices through the model, filtered; info may be NULL. */
void convert_walk(struct convert_ctx *c, const struct rec_thread *t, const struct convert_sink *k,
		  struct convert_thread_info *info);

/*
 * Process-wide rates over time, summed over the selected threads: CPU in
 * use (cores), allocations and allocated bytes per second, in buckets of
 * `width` ns from t0.  Counters between two snapshots of a thread are
 * spread evenly over the time between them.
 */
struct convert_series {
	uint64_t t0, width;
	size_t n;
	double *cpu_cores, *allocs_per_s, *bytes_per_s;
};
int convert_series_build(struct convert_ctx *c, struct convert_series *s);
void convert_series_free(struct convert_series *s);

/*
 * Per-stack self values (pprof, folded): a trie of call paths, node 0 the
 * root.  With per_thread, each selected thread has its own subtree whose
 * first node has func = CONVERT_THREAD_NODE | thread index.
 */
#define CONVERT_THREAD_NODE 0x80000000u
struct convert_trie {
	uint32_t *parent, *func;
	uint64_t (*val)[CONVERT_NVALUES];
	uint32_t n, cap;
	uint32_t *slots; /* hash of (parent, func) -> node, 0 = free (node 0 is no child) */
	uint32_t nslots;
};
int convert_trie_build(struct convert_ctx *c, struct convert_trie *tr, int per_thread);
void convert_trie_free(struct convert_trie *tr);

/* Writers: 0, or -1 when writing failed (errno set by stdio or zlib). */
int perfetto_write(struct convert_ctx *c, FILE *out);
int chrome_write(struct convert_ctx *c, FILE *out);

/*
 * Several recordings (a program and its children: one process each) into
 * one timeline: the writers are called once per recording, in order, with
 * the same part, which carries what must stay unique or be written once
 * across them.  Zero-initialize it, set count.
 */
struct convert_part {
	unsigned index, count;      /* this recording's position (the writer advances it), of count */
	uint32_t next_seq;          /* perfetto: the first sequence id still free */
	int wrote_event;            /* chrome: an event was written (the next needs a comma) */
	void *state;                /* pprof: the profile being written, until the last part */
	void (*free_state)(void *); /* frees it when the parts stop early (convert_part_end) */
};
int perfetto_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part);
/* A release in recording rpart's thread rthread (indexes of the parts, in
 * the order written, and of the recordings' threads) that ended a wait of
 * recording wpart's thread wthread. */
struct perfetto_xflow {
	uint64_t release_ns, end_ns;
	unsigned rpart, wpart;
	size_t rthread, wthread;
};
int perfetto_write_xflows(FILE *out, struct convert_part *part, const struct perfetto_xflow *v, size_t n);
int chrome_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part);
int folded_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part);
int pprof_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part);
/* After the last part, or instead of it when a part failed. */
void convert_part_end(struct convert_part *part);
int pprof_write(struct convert_ctx *c, FILE *out);
int folded_write(struct convert_ctx *c, FILE *out);
int nanoscope_write(struct convert_ctx *c, FILE *out);

/* Copy s into out (size n) as valid UTF-8 without control characters. */
void convert_clean_string(const char *s, char *out, size_t n);

#endif

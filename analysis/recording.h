/*
 * recording.h - a .rhea recording loaded into memory for analysis.
 */
#ifndef RHEA_RECORDING_H
#define RHEA_RECORDING_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

struct rec_module {
	uint64_t bias, lo, hi;
	char *path;
	uint8_t build_id[36];
	uint32_t build_id_len;
	uint64_t load_ns, unload_ns; /* unload_ns 0: still loaded at the end */
};

struct rec_thread {
	uint32_t tid;
	uint32_t parent_tid;
	char name[16];
	uint64_t name_ns;           /* time of the entry the name came from */
	uint64_t start_ns, exit_ns; /* 0 when not seen */
	struct rhea_sample *samples; /* sorted by begin_ns; each one's reserved
					field (0 in the file) belongs to the model:
					model_correct's cut (model.h) */
	size_t nsamples, cap;
};

struct rec_meta {
	char *key, *value;
};

/* A THREAD entry as loaded (threads' lives are told apart after). */
struct rec_tev {
	uint32_t tid, parent_tid;
	uint64_t time_ns;
	uint32_t event; /* enum rhea_thread_event */
	char name[16];
};

struct recording {
	char *path;
	struct rhea_file_header hdr;
	struct rec_module *mods;
	size_t nmods;
	struct rec_thread *threads;
	size_t nthreads;
	struct rhea_node *nodes; /* indexed by id; nodes_known[id] says set */
	uint8_t *nodes_known;
	uint32_t nnodes;
	struct rhea_site *sites; /* the last snapshot of each (serial, pc) */
	size_t nsites;
	struct rhea_short *shorts; /* short calls: the last snapshot of each (serial, fn) */
	size_t nshorts, shorts_cap;
	struct rhea_release *releases; /* of process-shared objects, by time */
	size_t nreleases, releases_cap;
	struct rec_meta *meta;
	size_t nmeta;
	struct rec_tev *tevs; /* every THREAD entry, until the load ends */
	size_t ntevs, tevs_cap;
	struct rhea_stats stats;
	int have_stats;
	struct rhea_end end;
	int have_end;       /* 0: the recording was cut short */
	int end_outside;    /* cut short, but rhea record saw the end: oend */
	struct rhea_end oend;
	int end_recovered;  /* with end_outside: rhea record recovered the agent's
			       unwritten buffers from its memory (RHEA_END_F_SALVAGED) */
	int salvaged;       /* stopped at a bad chunk (salvage mode) */
	char problem[512];  /* what stopped the reading early, if anything */
	uint64_t nsamples, nmerged, nchunks, file_bytes;
	uint64_t missing_nodes; /* samples whose stack refers to unknown nodes */
	uint64_t first_ns, last_ns;
	size_t threads_cap, mods_cap, sites_cap, meta_cap; /* allocated */
	size_t last_thread; /* recording_thread's one-entry cache */
	int counts_only;    /* recording_load_counts: samples counted, not kept */
};

/*
 * Load path.  Returns 0, or a negative rfile status with a one-line message
 * in err.  With salvage, a truncated or corrupt chunk ends the reading with
 * what came before it (r->problem says what happened) instead of failing.
 */
int recording_load(const char *path, struct recording *r, int salvage, char *err, size_t errlen);
/* The same without keeping the samples: everything else is loaded, and
 * the counts (nsamples, nmerged, first_ns, last_ns, each thread's
 * nsamples) are those of a full load; every thread's samples is NULL.  In
 * memory whatever the recording's length (rhea record's summary line). */
int recording_load_counts(const char *path, struct recording *r, int salvage, char *err, size_t errlen);
void recording_free(struct recording *r);

/* Allocation sites reduced to the last (largest) snapshot of each
 * (serial, pc), what a recording keeps of them (rhea record's compaction
 * too): sorts s[0..n) and returns how many remain at its start. */
size_t recording_reduce_sites(struct rhea_site *s, size_t n);
/* The same for short calls, by (serial, fn). */
size_t recording_reduce_shorts(struct rhea_short *s, size_t n);

/* A thread's samples (in time order), their CPU readings raised where a
 * later one shows the thread's CPU grew faster than the clock: a lagging
 * reading's (recording_load does it). */
void recording_bound_cpu(struct rhea_sample *s, size_t n);

/* Root-first addresses of the stack whose leaf node is `leaf`; returns the
 * depth (<= max), 0 for no stack.  Sets *broken when a node is missing. */
int recording_stack(const struct recording *r, uint32_t leaf, uint64_t *out, int max, int *broken);

const char *recording_meta(const struct recording *r, const char *key);
/* The thread's sample that ends last (the latest of equals), NULL none. */
const struct rhea_sample *recording_last_sample(const struct rec_thread *t);
/* The index of tid's life at time t (a tid the kernel gave again has
 * several: split_lives): the latest begun by t, else the first to begin;
 * r->nthreads when there is none. */
size_t recording_life_at(const struct recording *r, uint32_t tid, uint64_t t);
/* Why the agent stopped writing a recording it could not finish (rhea
 * record read it from the agent's memory: "No space left on device"),
 * NULL when it finished it or did not say. */
const char *recording_write_error(const struct recording *r);

/* When the recording starts: its header's start, or its first sample if
 * earlier (absolute monotonic ns, 0 when it has neither). */
uint64_t recording_start(const struct recording *r);

/* The program a recording is of, for people: its executable's name, else
 * its command's first word, without the directory ("?" when neither). */
void recording_program(const struct recording *r, char *buf, size_t len);

/*
 * A wait on a process-shared object (RHEA_S_SHARED) that names no waker,
 * and the release that ended it: of the same address, in another
 * recording (or another thread of its own), the latest between the wait's
 * begin and end.  The processes must see the object at the same address
 * (memory shared before a fork: PostgreSQL's backends); rel is NULL when
 * no recording has such a release.
 */
struct xwake {
	size_t wrec, wthread;             /* the waiter's recording, its thread there */
	const struct rhea_sample *wait;
	size_t rrec;                      /* the releaser's, when rel */
	const struct rhea_release *rel;
};
/* Every such wait of recs[0..n), paired where it can be: *out (malloc'ed),
 * the count returned; -1 out of memory. */
long recording_xwakes(const struct recording *recs, size_t n, struct xwake **out);

/* Sort recordings (of one program's processes) by recording_start. */
void recording_sort_by_start(struct recording *recs, size_t n);
struct rec_thread *recording_thread(struct recording *r, uint32_t tid);

#endif

/*
 * model.h - the one model of how samples become nested function slices over
 * time (DESIGN.md 1.5).  The report and every converter read it.
 */
#ifndef RHEA_MODEL_H
#define RHEA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "hookfn.h"
#include "recording.h"

struct symbolizer;

enum model_func_kind {
	MODEL_CODE = 0,    /* a function of the program or a library */
	MODEL_WAIT = 1,    /* a blocking call (pseudo-frame under its caller) */
	MODEL_SPECIAL = 2, /* [truncated], [unknown] */
};

struct model_func {
	char *name;   /* demangled name, or module+0xoffset */
	char *module; /* basename */
	char *file;   /* source file or NULL */
	int line;     /* line of the first address seen in it, 0 unknown */
	int kind;     /* enum model_func_kind */
	unsigned trigger; /* MODEL_WAIT: the hooked function (enum rhea_fn) */
	int root;     /* main, start_thread, ...: a stack that reaches it is whole */
};

enum model_end_policy { /* the values --end next|last parses to */
	MODEL_END_NEXT = 0, /* a vanished frame ends when the next sample starts */
	MODEL_END_LAST = 1, /* ... when the last sample that saw it ended */
};

struct model {
	struct recording *rec;
	struct symbolizer *sym;
	int sym_shared;          /* sym is the caller's (model_build_shared): not freed here */
	char *perf_map; /* the perf map JIT code was named from, NULL none */
	int perf_map_kept; /* ...as the recording keeps it (its lines that name stack code) */
	struct model_func *funcs; /* funcs[0] = [unknown] */
	uint32_t nfuncs, cap;
	uint32_t *node_func; /* node id -> func id */
	uint32_t wait_func[256]; /* trigger -> func id of its wait pseudo-frame */
	void *index;         /* name -> func id */
	int policy;
	int corrected; /* model_correct ran: a sample's reserved field says where
			  its stack is cut (0: not) */
	struct model_memo *memo; /* model_frames' stacks walked before (model.c) */
};

struct model_slice {
	uint32_t func;
	int depth;
	uint64_t begin_ns, end_ns;
	struct rhea_counters cb, ce; /* thread counters at begin and end */
	uint64_t child_ns, child_cpu_ns; /* time of the direct children */
	uint32_t msgid;
	int outermost; /* no other open slice of the same function below it */
	const struct rhea_sample *sample; /* the sample that opened it */
};

struct model_cb {
	void (*begin)(void *arg, const struct rec_thread *t, const struct model_slice *s);
	void (*end)(void *arg, const struct rec_thread *t, const struct model_slice *s);
	void *arg;
};

/* Symbolize the recording's stacks (one batch over distinct addresses) and
 * prepare the function table.  0 or -errno. */
int model_build(struct model *m, struct recording *r, int policy);
/* The same with the caller's symbolizer, which keeps what it read of the
 * files for the next recording (sym_begin_process): several recordings of
 * one program's processes are symbolized once per library. */
int model_build_shared(struct model *m, struct recording *r, int policy, struct symbolizer *sym);
/* The variable a lock wait (trigger) was on, obj, when it is a global or
 * static one of a module with symbols: "stats_lock", "work_q.cond" into
 * buf, returned; NULL for another class's object (a descriptor) or an
 * unnamed one (heap, stack). */
const char *model_object_name(const struct model *m, unsigned trigger, uint64_t obj, char *buf, size_t len);

void model_free(struct model *m);

/* The sampling periods of CPU a capture of the sampler stands for (its
 * object; a merged run, one each), 0 for every other capture: the CPU
 * profile's weights (rhea report, pprof's cpu_samples, Perfetto's
 * --samples cpu). */
static inline uint64_t model_cpu_periods(const struct rhea_sample *s)
{
	if (!(s->h.flags & RHEA_S_ASYNC) || s->trigger != RHEA_FN_SAMPLER)
		return 0;
	return s->object ? s->object : 1u + s->merged;
}

/*
 * Correct the timeline's bias toward hooked call sites (DESIGN.md 1.5).
 * A capture in a hook is taken at the first hooked call after each tick,
 * and its stack lasts until the next capture: a function that a computing
 * thread calls often and that calls a hooked one (sqlite3_free calling
 * free) is on nearly every such stack, and is given the time the thread
 * spent around it.  The sampler's captures are taken on CPU time, wherever
 * the thread is: the unbiased view.
 *
 * A function that the timeline gives at least 10% of the sampled threads'
 * CPU and the sampler's captures clearly less (the upper end of its
 * 3-sigma interval under two thirds of that), with 50 sampling periods at
 * least, keeps its place in only that share of the hooks' captures (the
 * sampler's over the timeline's): in the others the stack ends at its
 * caller, which gets the time.  Which captures keep it is decided once,
 * in time order, so that the kept ones are spread evenly (the captures'
 * weights are the captures they stand for); a capture cut above a
 * function still counts toward that function's share, so a function
 * under another one that was thinned keeps more of the captures that
 * reach it.  Waits and the sampler's own captures are never cut.  Only
 * sampler stacks that reach main or a thread's start count (a walk cut
 * short could make a caller look absent), and the shares are CPU-weighted
 * per thread, so threads sampled at other periods mix rightly.
 *
 * The decision is kept in each sample's reserved field (the recording in
 * memory; never written to a file), which model_frames then reads.  Fills
 * out (up to max) with the thinned functions, largest timeline share
 * first; returns how many (0: the timeline stands as taken).
 */
struct model_cut {
	uint32_t func;
	const struct model *model; /* whose function func is */
	double timeline, sampler;  /* shares of the sampled threads' CPU */
};
int model_correct(struct model *m, struct model_cut *out, int max);

/* The same over the n models of one program's processes (a build's
 * compiler runs): their evidence added up, a function matched by name and
 * module, and thinned alike in each (the shares in out are the pooled
 * ones).  A short process has too few of the sampler's periods to tell on
 * its own. */
int model_correct_pooled(struct model *const *ms, size_t n, struct model_cut *out, int max);

/* The top of the Wilson interval (z standard deviations) of a share p
 * measured in n trials: what the sampler's periods can still mean. */
double model_wilson_hi(double p, double n, double z);

/* What model_correct did (n of its cuts), as one sentence for a note.
 * 0, or 1 with the note in buf. */
int model_cut_note(const struct model *m, const struct model_cut *c, int n, char *buf, size_t len);

/* The deepest call path the model builds (frames beyond are cut). */
#define MODEL_MAX_FRAMES 2048

/* Function ids of a sample's frames, root first (a BLOCK sample ends with
 * its wait pseudo-frame).  Returns the depth (<= max). */
int model_frames(const struct model *m, const struct rhea_sample *s, uint32_t *out, int max);

/*
 * The sampler's captures of thread t (model_cpu_periods), their periods
 * added to incl[f] of every function on each one's stack (once per
 * capture) and, when self is not NULL, to self[f] of its innermost one.
 * rooted: only stacks that reach main or a thread's start count at all.
 * ids: room for MODEL_MAX_FRAMES; seen: nfuncs bytes of 0, left so.
 * Returns the periods counted (a capture without a stack included, unless
 * rooted).  The CPU profile of rhea report and model_correct's shares.
 */
uint64_t model_cpu_tally(const struct model *m, const struct rec_thread *t, int rooted, uint64_t *incl,
			 uint64_t *self, uint32_t *ids, uint8_t *seen);

/* Does a call path (model_frames) reach main or a thread's start? */
static inline int model_reaches_root(const struct model *m, const uint32_t *ids, int n)
{
	for (int j = 0; j < n; j++)
		if (m->funcs[ids[j]].root)
			return 1;
	return 0;
}

/* Walk one thread's samples, calling cb as slices begin and end (ends in
 * order, innermost first). */
void model_walk_thread(struct model *m, const struct rec_thread *t, const struct model_cb *cb);

/* A model with nothing but its function table (id 0 "[unknown]"), for
 * interning the functions of several models together; model_free frees
 * it.  0 or -ENOMEM. */
int model_funcs_init(struct model *m);

/* Find or add a function by name (used for pseudo-frames). */
uint32_t model_func_intern(struct model *m, const char *name, const char *module,
			   const char *file, int line, int kind);

#endif

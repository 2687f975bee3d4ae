/*
 * stalls.h - event-loop iterations that ran too long (DESIGN.md 1.7), found
 * in a recording after the fact.
 *
 * A thread that waits in poll, select or epoll_wait is an event loop: the
 * agent starts a new message id each time such a wait returns, so a message
 * is one iteration.  Its busy part runs from the return of the wait that
 * began it to the call of the wait that ended it; longer than a threshold,
 * it is a stall.  For each stall: where the time went (the stack that held
 * the most of it, not the one seen last, which may be innocent), what the
 * thread's counters did meanwhile, and a cause: the innermost two frames of
 * that stack (same cause), refined by the innermost four (same cause,
 * different way in).  An iteration still running when the process died of a
 * signal, or was killed before the recording could end, is a fatal stall.
 *
 * A watchdog in the agent (Matrix's way) keeps a ring of recent stacks
 * because it has nothing else; a recording has every capture of the
 * iteration, so the answer here is exact to the capture interval.
 */
#ifndef RHEA_STALLS_H
#define RHEA_STALLS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum { STALL_CAUSE_DEPTH = 4 };

/* The default threshold: servers want tens of milliseconds (Matrix's 2 s
 * is for phones). */
#define STALLS_DEFAULT_NS 50000000ull

struct stall {
	const struct rec_thread *t;
	uint32_t msgid;
	uint64_t begin_ns, end_ns; /* the iteration's busy part */
	int begin_exact, end_exact; /* bounded by a recorded loop wait (else by
				       the nearest capture: up to an interval) */
	struct rhea_counters cb, ce; /* the thread's counters at begin and end */
	const struct rhea_sample *top; /* the sample whose stack took the most time */
	uint64_t top_ns;               /* the time it took */
	uint32_t samples;
	int fatal; /* the process died (or was killed) inside it */
	size_t cause, subcause; /* indexes into stalls.causes and .subcauses */
};

/* Stalls with the same innermost frames (function ids, innermost first). */
struct stall_cause {
	uint32_t funcs[STALL_CAUSE_DEPTH];
	int depth;
	uint64_t count, total_ns, max_ns;
	size_t worst; /* index of its longest stall */
};

struct stalls {
	uint64_t threshold_ns;
	size_t loop_threads;   /* threads that ran an event loop */
	uint64_t iterations;   /* iterations that ended on them */
	struct stall *v;       /* by begin time */
	size_t n;
	struct stall_cause *causes, *subcauses; /* innermost 2 and 4 frames, most total time first */
	size_t ncauses, nsubcauses;
};

/* "inner < outer ..." of a cause's frames into buf, each function named by
 * name(arg, func id) (the report's names, or a converter's cleaned ones). */
const char *stalls_cause_line(const struct stall_cause *k, const char *(*name)(void *arg, uint32_t func),
			      void *arg, char *buf, size_t len);

/* Find the stalls of every event-loop thread.  0, or -1 (out of memory). */
int stalls_find(struct model *m, uint64_t threshold_ns, struct stalls *out);
void stalls_free(struct stalls *s);

/* What thread t did most during [begin, end): the sample whose stack held
 * the most of that time (NULL if t has no sample there), and that time. */
const struct rhea_sample *stalls_top_during(const struct rec_thread *t, uint64_t begin, uint64_t end,
					    uint64_t *ns);

/* Whether thread t has a sample that begins in [begin, end): it ran (a
 * thread with none there called no hooked function after a tick and used
 * less than a sampling period of CPU: it waited). */
int stalls_sampled_during(const struct rec_thread *t, uint64_t begin, uint64_t end);

#endif

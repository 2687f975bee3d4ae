/* report.h - `rhea report`: text and JSON summaries of a recording. */
#ifndef RHEA_REPORT_H
#define RHEA_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* A program the process ran before the one reported, when the report
 * followed it through its execs, or a process it started (cmd_report.c):
 * that program's recording and command line, oldest first. */
struct report_image {
	const char *path, *command;
	uint32_t pid;
};

struct report_opts {
	int json;
	int top;      /* rows per table (text); JSON lists every function */
	int width;    /* terminal columns, 80 by default */
	int blocking; /* text: the blocking analysis instead of the summary */
	int stalls;   /* text: every stall in detail instead of the summary */
	uint64_t stall_ns; /* an event-loop iteration this long is a stall (0: STALLS_DEFAULT_NS) */
	const struct model_cut *cuts; /* what model_correct marked (a note says so) */
	int ncuts;
	char *const *notes; /* several recordings: notes for the end, NULL-terminated (or NULL) */
	const struct report_image *before; /* the programs before this one in its process (execs) */
	size_t nbefore;
	const struct report_image *children; /* the processes it started, recorded on their own */
	size_t nchildren;
	const char *all_hint; /* the files that make "all its processes" (rhea report A B...) */
};

int report_write(struct model *m, FILE *out, const struct report_opts *o);

/* Several recordings (a program and its children): one row per recording,
 * by CPU (text) or in the order given (JSON, "processes"); with models
 * (one per recording, may be NULL: no symbols then), the functions of all
 * of them merged by name and module, by self CPU.  o->json, o->top and
 * o->width apply. */
struct recording;
int report_processes(struct recording *recs, struct model *models, size_t n, FILE *out,
		     const struct report_opts *o);

#endif

/* report.h - `rhea report`: text and JSON summaries of a recording. */
#ifndef RHEA_REPORT_H
#define RHEA_REPORT_H

#include <stdio.h>

#include "model.h"

struct report_opts {
	int json;
	int top;      /* rows per table (text); JSON lists every function */
	int width;    /* terminal columns, 80 by default */
	int blocking; /* text: the blocking analysis instead of the summary */
};

int report_write(struct model *m, FILE *out, const struct report_opts *o);

#endif

/*
 * nanoscope.c - `rhea convert -f nanoscope`: the text format of Uber's
 * Nanoscope (the format Sliver also writes), one event per line:
 *
 *   <ns>:+<function>    the function was entered
 *   <ns>:POP            the innermost open function returned
 *
 * with <ns> nanoseconds from the recording's start (Nanoscope's converter
 * counts from its first event; rhea keeps the recording's time base so
 * that several threads' files line up).  A Nanoscope trace describes one
 * thread: the one --thread names, else the main thread (tid = pid).
 * Slices come from the model like every other format's, so every "+" has
 * its POP and a dropped (--min-dur) slice has neither.
 */
#include "convert.h"

#include <inttypes.h>

struct ns {
	struct convert_ctx *c;
	FILE *f;
};

static uint64_t rel(const struct ns *n, uint64_t t)
{
	return t > n->c->origin_ns ? t - n->c->origin_ns : 0;
}

static void ns_begin(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct ns *n = arg;
	fprintf(n->f, "%" PRIu64 ":+%s\n", rel(n, s->begin_ns), convert_func_name(n->c, s->func));
}

static void ns_end(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct ns *n = arg;
	fprintf(n->f, "%" PRIu64 ":POP\n", rel(n, s->end_ns));
}

int nanoscope_write(struct convert_ctx *c, FILE *out)
{
	struct recording *r = c->r;
	size_t pick = r->nthreads;
	for (size_t i = 0; i < r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		if (pick == r->nthreads || r->threads[i].tid == r->hdr.pid)
			pick = i;
		if (r->threads[i].tid == r->hdr.pid)
			break;
	}
	if (pick < r->nthreads) {
		struct ns n = {c, out};
		struct convert_sink k = {ns_begin, ns_end, &n};
		convert_walk(c, &r->threads[pick], &k, NULL);
	}
	return ferror(out) ? -1 : 0;
}

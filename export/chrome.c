/*
 * chrome.c - `rhea convert -f chrome`: the Chrome trace-event JSON format
 * (chrome://tracing, ui.perfetto.dev, speedscope), one event per line.
 *
 * The same slices and arguments as the Perfetto output, as B/E duration
 * events written while the model walks (the E event carries the arguments
 * known at the end; viewers merge B and E arguments), thread and process
 * names as M metadata events, and the process counters as C events.
 *
 * Timestamps: the format's unit is the microsecond; rhea writes them
 * relative to the recording's start with three decimals, printed from the
 * integer nanoseconds (no floating point), so no precision is lost and a
 * long recording's timestamps do not exceed a double's exact range.
 */
#include "convert.h"
#include "hookfn.h"
#include "json.h"
#include "stalls.h"

#include <inttypes.h>
#include <string.h>

struct ch {
	struct convert_ctx *c;
	FILE *f;
	unsigned pid;
	int first;
	char buf[256];
};

static void sep(struct ch *h)
{
	fputs(h->first ? "\n" : ",\n", h->f);
	h->first = 0;
}

static void put_ts(struct ch *h, uint64_t ns)
{
	uint64_t rel = ns > h->c->origin_ns ? ns - h->c->origin_ns : 0;
	fprintf(h->f, "\"ts\":%" PRIu64 ".%03u", rel / 1000, (unsigned)(rel % 1000));
}

static void put_u(struct ch *h, const char *key, uint64_t v, int comma)
{
	fprintf(h->f, "%s\"%s\":%" PRIu64, comma ? "," : "", key, v);
}

static void put_name(struct ch *h, const struct convert_slice *s)
{
	fputs(",\"name\":", h->f);
	json_write_string(h->f, convert_func_name(h->c, s->func));
	fputs(",\"cat\":", h->f);
	const struct model_func *mf = &h->c->m->funcs[s->func];
	fputs(mf->kind == MODEL_WAIT ? "\"wait\"" : mf->kind == MODEL_SPECIAL ? "\"rhea\"" : "\"function\"",
	      h->f);
}

static void slice_begin(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	struct ch *h = arg;
	sep(h);
	fprintf(h->f, "{\"ph\":\"B\",\"pid\":%u,\"tid\":%u,", h->pid, t->tid);
	put_ts(h, s->begin_ns);
	put_name(h, s);
	fputs(",\"args\":{", h->f);
	put_u(h, "MessageId", s->msgid, 0);
	const char *trig = rhea_fn_name(s->trigger);
	if (trig)
		fprintf(h->f, ",\"Trigger\":\"%s\"", trig);
	fputs("}}", h->f);
}

static void slice_end(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	struct ch *h = arg;
	sep(h);
	fprintf(h->f, "{\"ph\":\"E\",\"pid\":%u,\"tid\":%u,", h->pid, t->tid);
	put_ts(h, s->end_ns);
	put_name(h, s);
	fputs(",\"args\":{", h->f);
	put_u(h, "WallTime", s->wall, 0);
	put_u(h, "CPUTime", s->cpu, 1);
	put_u(h, "SelfTime", s->self, 1);
	put_u(h, "SelfCpuTime", s->self_cpu, 1);
	put_u(h, "AllocatedObjects", s->allocs, 1);
	put_u(h, "AllocatedBytes", s->alloc_bytes, 1);
	put_u(h, "SelfAllocatedObjects", s->self_allocs, 1);
	put_u(h, "SelfAllocatedBytes", s->self_alloc_bytes, 1);
	put_u(h, "MinFlt", s->minflt, 1);
	put_u(h, "MajFlt", s->majflt, 1);
	put_u(h, "NvCsw", s->nvcsw, 1);
	put_u(h, "NivCsw", s->nivcsw, 1);
	if (h->c->m->funcs[s->func].kind == MODEL_WAIT && s->sample) {
		put_u(h, "BlockTime", s->wall, 1);
		if (s->sample->object) {
			fprintf(h->f, ",\"BlockedOn\":\"0x%" PRIx64 "\"", s->sample->object);
			char name[256];
			if (model_object_name(h->c->m, s->sample->trigger, s->sample->object, name, sizeof(name))) {
				fputs(",\"BlockedOnName\":", h->f);
				json_write_string(h->f, name);
			}
		}
		if (s->sample->waker_tid)
			put_u(h, "WakeUpBy", s->sample->waker_tid, 1);
		if (s->sample->owner_tid)
			put_u(h, "LockOwner", s->sample->owner_tid, 1);
	}
	fputs("}}", h->f);
}

/* Stalls as async events ("b"/"e", category "stall"): viewers draw them on a
 * track of their own, beside the thread's nested slices. */
static int write_stalls(struct ch *h)
{
	struct convert_ctx *c = h->c;
	struct stalls st;
	if (convert_stalls(c, &st) < 0)
		return -1;
	char cause[1024], sub[1024];
	for (size_t i = 0; i < st.n; i++) {
		const struct stall *x = &st.v[i];
		convert_cause_name(c, &st.causes[x->cause], cause, sizeof(cause));
		convert_cause_name(c, &st.subcauses[x->subcause], sub, sizeof(sub));
		for (int end = 0; end < 2; end++) {
			sep(h);
			fprintf(h->f, "{\"ph\":\"%s\",\"cat\":\"stall\",\"id\":%zu,\"pid\":%u,\"tid\":%u,",
				end ? "e" : "b", i + 1, h->pid, x->t->tid);
			put_ts(h, end ? x->end_ns : x->begin_ns);
			fputs(",\"name\":", h->f);
			char name[sizeof(cause) + 16];
			snprintf(name, sizeof(name), "stall: %s", cause);
			json_write_string(h->f, name);
			if (end) {
				fputs(",\"args\":{", h->f);
				put_u(h, "CPUTime", x->ce.cpu_ns >= x->cb.cpu_ns ? x->ce.cpu_ns - x->cb.cpu_ns : 0, 0);
				put_u(h, "Fatal", (uint64_t)x->fatal, 1);
				fputs("}}", h->f);
				continue;
			}
			fputs(",\"args\":{", h->f);
			put_u(h, "MessageId", x->msgid, 0);
			fputs(",\"Cause\":", h->f);
			json_write_string(h->f, sub);
			fputs("}}", h->f);
		}
	}
	stalls_free(&st);
	return 0;
}

static void meta(struct ch *h, const char *what, unsigned tid, const char *name)
{
	sep(h);
	fprintf(h->f, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"args\":{\"name\":", h->pid, tid,
		what);
	convert_clean_string(name, h->buf, sizeof(h->buf));
	json_write_string(h->f, h->buf);
	fputs("}}", h->f);
}

static void counter(struct ch *h, const char *name, const char *key, uint64_t ts, double v)
{
	sep(h);
	fprintf(h->f, "{\"ph\":\"C\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",", h->pid, h->pid, name);
	put_ts(h, ts);
	fprintf(h->f, ",\"args\":{\"%s\":%.6g}}", key, v);
}

int chrome_write(struct convert_ctx *c, FILE *f)
{
	struct convert_part one = {0, 1, 0, 0, NULL, NULL};
	return chrome_write_part(c, f, &one);
}

/* The first part opens the JSON object, the last closes it; every part
 * writes its process's events (its pid on each) in between. */
int chrome_write_part(struct convert_ctx *c, FILE *f, struct convert_part *part)
{
	struct recording *r = c->r;
	struct ch h = {c, f, r->hdr.pid, !part->wrote_event, {0}};
	if (part->index == 0)
		fputs("{\"traceEvents\":[", f);
	if (recording_meta(r, "exe") || recording_meta(r, "cmdline")) {
		char name[256];
		recording_program(r, name, sizeof(name));
		meta(&h, "process_name", h.pid, name);
	}
	for (size_t i = 0; i < r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		const struct rec_thread *t = &r->threads[i];
		char name[32];
		snprintf(name, sizeof(name), "%s", t->name[0] ? t->name : "?");
		meta(&h, "thread_name", t->tid, name);
	}
	struct convert_sink k = {slice_begin, slice_end, &h};
	for (size_t i = 0; i < r->nthreads; i++)
		if (c->selected[i])
			convert_walk(c, &r->threads[i], &k, NULL);
	if (write_stalls(&h) < 0)
		return -1;
	struct convert_series s;
	if (convert_series_build(c, &s) < 0)
		return -1;
	for (size_t i = 0; i < s.n; i++) {
		uint64_t at = s.t0 + (uint64_t)i * s.width;
		counter(&h, "CPU use", "cores", at, s.cpu_cores[i]);
		counter(&h, "Allocations/s", "allocations", at, s.allocs_per_s[i]);
		counter(&h, "Allocated bytes/s", "bytes", at, s.bytes_per_s[i]);
	}
	convert_series_free(&s);
	part->wrote_event = !h.first;
	if (++part->index < part->count)
		return ferror(f) ? -1 : 0;
	fputs("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tool\":\"rhea convert\",", f);
	if (part->count == 1) {
		fputs("\"recording\":", f);
		convert_clean_string(r->path, h.buf, sizeof(h.buf));
		json_write_string(f, h.buf);
		fprintf(f, ",\"pid\":%u,", h.pid);
	} else {
		fprintf(f, "\"processes\":%u,", part->count);
	}
	fprintf(f, "\"end_policy\":\"%s\",\"start_realtime_ns\":%" PRIu64 "}}\n",
		c->o->policy == MODEL_END_LAST ? "last" : "next", convert_origin_realtime(c));
	return ferror(f) ? -1 : 0;
}

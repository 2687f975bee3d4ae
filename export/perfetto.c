/*
 * perfetto.c - `rhea convert -f perfetto`: a Perfetto protobuf trace
 * (a stream of TracePacket, perfetto_trace.proto) that ui.perfetto.dev and
 * trace_processor open.
 *
 * Layout of the trace:
 *
 *   sequence 1: the track descriptors - the process (pid, name, command
 *     line), one track per thread (tid, name; grouped under the process by
 *     their pid), three process counter tracks (CPU in use in cores,
 *     allocations/s, allocated bytes/s, from convert_series_build) - and
 *     the counter values;
 *   sequence 2+2i: thread i's slices, TrackEvent SLICE_BEGIN / SLICE_END on
 *     its track, names interned (EventName), arguments as debug annotations
 *     with interned names.  Arguments known when a slice begins (MessageId,
 *     Trigger) ride on the begin event, the others (times, counters) on the
 *     end event: trace_processor merges both into the slice's args, and the
 *     writer never has to hold a slice back until it ends;
 *   sequence 3+2i: thread i's samples as PerfSample packets with interned
 *     callstacks, frames, function names and mappings (with build-ids), so
 *     that selecting a time range in the UI shows a flame graph of the
 *     samples in it.  A merged record (one stack seen by several consecutive
 *     captures) becomes as many PerfSamples, spread over its span, so that
 *     the flame graph weighs stacks by captures as a sampling profiler does.
 *     With --samples cpu, only the sampler's captures, each as many times
 *     as the periods of CPU it stands for: captures at hooks are drawn to
 *     hooked calls, these are not (README, Limits);
 *
 * Why separate sequences: interned data is scoped to a sequence and every
 * sequence must be in time order; with --min-dur a slice's begin event can
 * be written only once a long-enough descendant has ended, after samples
 * that came later, so slices and samples go to different sequences.  Each
 * sequence starts with SEQ_INCREMENTAL_STATE_CLEARED and defines an
 * interned id in the packet that first uses it or earlier.
 *
 * Timestamps are the recording's CLOCK_MONOTONIC nanoseconds, given without
 * a clock id: trace_processor then takes them as its trace time as they are.
 *
 * Memory: one packet is built at a time and flushed every megabyte; per
 * thread, the set of names and callstacks already interned on its sequence.
 */
#include "convert.h"
#include "hookfn.h"
#include "pbwriter.h"
#include "stalls.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

/* perfetto_trace.proto field numbers. */
enum {
	TRACE_PACKET = 1,
	/* TracePacket */
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,
	TP_TRACK_EVENT = 11,
	TP_INTERNED = 12,
	TP_SEQ_FLAGS = 13,
	TP_TRACK_DESCRIPTOR = 60,
	TP_PERF_SAMPLE = 66,
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	SEQ_NEEDS_INCREMENTAL_STATE = 2,
	/* TrackDescriptor */
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	TD_DESCRIPTION = 14,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT = 3,
	CD_UNIT_NAME = 6,
	UNIT_COUNT = 2,
	UNIT_SIZE_BYTES = 3,
	/* TrackEvent */
	TE_DEBUG = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK = 11,
	TE_DOUBLE_COUNTER = 44,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
	TYPE_COUNTER = 4,
	TE_NAME = 23,
	TE_FLOW_IDS = 47,
	TE_TERMINATING_FLOW_IDS = 48,
	/* DebugAnnotation */
	DA_NAME_IID = 1,
	DA_UINT = 3,
	DA_STRING = 6,
	DA_POINTER = 7,
	/* InternedData */
	ID_EVENT_NAMES = 2,
	ID_DEBUG_NAMES = 3,
	ID_FUNCTION_NAMES = 5,
	ID_FRAMES = 6,
	ID_CALLSTACKS = 7,
	ID_BUILD_IDS = 16,
	ID_MAPPING_PATHS = 17,
	ID_SOURCE_PATHS = 18,
	ID_MAPPINGS = 19,
	/* EventName, DebugAnnotationName, InternedString */
	IN_IID = 1,
	IN_NAME = 2,
	/* Mapping */
	MP_IID = 1,
	MP_BUILD_ID = 2,
	MP_START = 4,
	MP_END = 5,
	MP_LOAD_BIAS = 6,
	MP_PATH_IDS = 7,
	/* Frame */
	FR_IID = 1,
	FR_FUNCTION = 2,
	FR_MAPPING = 3,
	FR_REL_PC = 4,
	FR_SOURCE = 5,
	FR_LINE = 6,
	/* Callstack */
	CS_IID = 1,
	CS_FRAMES = 2,
	/* PerfSample */
	PS_PID = 2,
	PS_TID = 3,
	PS_CALLSTACK = 4,
	PS_CPU_MODE = 5,
	PS_UNWIND_ERROR = 16,
	MODE_USER = 2,
	UNWIND_ERROR_MAX_FRAMES_EXCEEDED = 6,
};

#define UUID_PROCESS 1
#define UUID_CPU 2
#define UUID_ALLOCS 3
#define UUID_BYTES 4
#define UUID_THREAD0 100

/* Debug annotation names (btrace's where it has one), iid = index + 1. */
enum {
	A_MESSAGE_ID = 1,
	A_TRIGGER,
	A_WALL,
	A_CPU,
	A_SELF,
	A_SELF_CPU,
	A_ALLOCS,
	A_BYTES,
	A_SELF_ALLOCS,
	A_SELF_BYTES,
	A_MINFLT,
	A_MAJFLT,
	A_NVCSW,
	A_NIVCSW,
	A_BLOCK,
	A_OBJECT,
	A_WAKER,
	A_OWNER,
	A_OBJECT_NAME,
	A_COUNT
};
static const char *const annotation_names[A_COUNT] = {
	NULL, "MessageId", "Trigger", "WallTime", "CPUTime", "SelfTime", "SelfCpuTime",
	"AllocatedObjects", "AllocatedBytes", "SelfAllocatedObjects", "SelfAllocatedBytes",
	"MinFlt", "MajFlt", "NvCsw", "NivCsw", "BlockTime", "BlockedOn", "WakeUpBy", "LockOwner",
	"BlockedOnName",
};

#define MAX_FRAMES MODEL_MAX_FRAMES
#define FLUSH_BYTES (1u << 20)

struct pf {
	struct convert_ctx *c;
	FILE *out;
	struct pbwriter w;
	int err;
	uint32_t seq;
	uint32_t seq_base;     /* this recording's sequences: seq_base + 1.. */
	uint64_t uuid_base;    /* its tracks' (and flows') uuids: uuid_base + UUID_... */
	int seq_first;         /* next packet is the sequence's first */
	uint64_t track;        /* current thread's track uuid */
	uint8_t *name_done;    /* per func: EventName interned on this sequence */
	uint8_t *frame_done;   /* per func: Frame + function name interned */
	uint8_t *file_done;    /* per func: its source path interned */
	/* callstack key -> iid, per sample sequence */
	uint64_t *cs_keys;
	uint32_t *cs_iids;
	uint32_t cs_n, cs_slots;
	uint32_t *frames;
	char namebuf[1024];
};

static void flush(struct pf *p, int force)
{
	if (p->w.oom) {
		p->err = 1;
		return;
	}
	if (p->w.depth == 0 && p->w.len && (force || p->w.len >= FLUSH_BYTES)) {
		if (fwrite(p->w.buf, 1, p->w.len, p->out) != p->w.len)
			p->err = 1;
		pbwriter_reset(&p->w);
	}
}

/* Where the uuids (tracks, flows) of a trace's part-th recording start. */
static inline uint64_t part_uuid_base(unsigned part)
{
	return (uint64_t)part << 40;
}

/* A track uuid of this recording's (several go into one trace). */
static inline uint64_t track_uuid(const struct pf *p, uint64_t u)
{
	return p->uuid_base + u;
}

/* Open a TracePacket on the current sequence. */
static void packet_begin(struct pf *p, uint64_t ts, int have_ts)
{
	pbwriter_begin(&p->w, TRACE_PACKET);
	if (have_ts)
		pbwriter_varint(&p->w, TP_TIMESTAMP, ts);
	pbwriter_varint(&p->w, TP_SEQ_ID, p->seq);
	pbwriter_varint(&p->w, TP_SEQ_FLAGS,
			p->seq_first ? SEQ_INCREMENTAL_STATE_CLEARED : SEQ_NEEDS_INCREMENTAL_STATE);
	p->seq_first = 0;
}

static void packet_end(struct pf *p)
{
	pbwriter_end(&p->w);
	flush(p, 0);
}

static void start_sequence(struct pf *p, uint32_t seq)
{
	p->seq = p->seq_base + seq;
	p->seq_first = 1;
}

/* ---- descriptors and counters (sequence 1) ----------------------------- */

static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

static void clean(struct pf *p, const char *s)
{
	convert_clean_string(s ? s : "", p->namebuf, sizeof(p->namebuf));
}

static void counter_track(struct pf *p, uint64_t uuid, const char *name, const char *desc, int unit,
			  const char *unit_name, uint64_t ts)
{
	packet_begin(p, ts, 1);
	pbwriter_begin(&p->w, TP_TRACK_DESCRIPTOR);
	pbwriter_varint(&p->w, TD_UUID, uuid);
	pbwriter_varint(&p->w, TD_PARENT, track_uuid(p, UUID_PROCESS));
	pbwriter_string(&p->w, TD_NAME, name);
	pbwriter_string(&p->w, TD_DESCRIPTION, desc);
	pbwriter_begin(&p->w, TD_COUNTER);
	if (unit)
		pbwriter_varint(&p->w, CD_UNIT, (uint64_t)unit);
	if (unit_name)
		pbwriter_string(&p->w, CD_UNIT_NAME, unit_name);
	pbwriter_end(&p->w);
	pbwriter_end(&p->w);
	packet_end(p);
}

static void counter_value(struct pf *p, uint64_t uuid, uint64_t ts, double v)
{
	packet_begin(p, ts, 1);
	pbwriter_begin(&p->w, TP_TRACK_EVENT);
	pbwriter_varint(&p->w, TE_TYPE, TYPE_COUNTER);
	pbwriter_varint(&p->w, TE_TRACK, uuid);
	pbwriter_double(&p->w, TE_DOUBLE_COUNTER, v);
	pbwriter_end(&p->w);
	packet_end(p);
}

static void write_process(struct pf *p)
{
	struct convert_ctx *c = p->c;
	struct recording *r = c->r;
	uint64_t ts = c->origin_ns;
	start_sequence(p, 1);

	packet_begin(p, ts, 1);
	pbwriter_begin(&p->w, TP_TRACK_DESCRIPTOR);
	pbwriter_varint(&p->w, TD_UUID, track_uuid(p, UUID_PROCESS));
	pbwriter_begin(&p->w, TD_PROCESS);
	pbwriter_varint(&p->w, PD_PID, r->hdr.pid);
	const char *cmd = recording_meta(r, "cmdline");
	const char *exe = recording_meta(r, "exe");
	if (cmd) {
		clean(p, cmd);
		pbwriter_string(&p->w, PD_CMDLINE, p->namebuf);
	}
	char pname[64];
	if (exe || cmd) {
		clean(p, base(exe ? exe : cmd));
		char *sp = exe ? NULL : strchr(p->namebuf, ' ');
		if (sp)
			*sp = 0;
		pbwriter_string(&p->w, PD_NAME, p->namebuf);
	} else {
		snprintf(pname, sizeof(pname), "pid %u", r->hdr.pid);
		pbwriter_string(&p->w, PD_NAME, pname);
	}
	pbwriter_end(&p->w);
	pbwriter_end(&p->w);
	packet_end(p);

	for (size_t i = 0; i < r->nthreads; i++) {
		if (!c->selected[i])
			continue;
		const struct rec_thread *t = &r->threads[i];
		packet_begin(p, ts, 1);
		pbwriter_begin(&p->w, TP_TRACK_DESCRIPTOR);
		pbwriter_varint(&p->w, TD_UUID, track_uuid(p, UUID_THREAD0 + i));
		pbwriter_begin(&p->w, TD_THREAD);
		pbwriter_varint(&p->w, THD_PID, r->hdr.pid);
		pbwriter_varint(&p->w, THD_TID, t->tid);
		if (t->name[0]) {
			clean(p, t->name);
			pbwriter_string(&p->w, THD_NAME, p->namebuf);
		}
		pbwriter_end(&p->w);
		pbwriter_end(&p->w);
		packet_end(p);
	}

	struct convert_series s;
	if (convert_series_build(c, &s) < 0) {
		p->err = 1;
		return;
	}
	if (s.n == 0)
		return;
	counter_track(p, track_uuid(p, UUID_CPU), "CPU use (cores)",
		      "CPU time of the recorded threads per unit of wall time", 0, "cores", ts);
	counter_track(p, track_uuid(p, UUID_ALLOCS), "Allocations/s",
		      "allocations per second (every allocation counted)", UNIT_COUNT, NULL, ts);
	counter_track(p, track_uuid(p, UUID_BYTES), "Allocated bytes/s", "bytes requested per second",
		      UNIT_SIZE_BYTES, NULL, ts);
	for (size_t i = 0; i < s.n; i++) {
		uint64_t at = s.t0 + (uint64_t)i * s.width;
		counter_value(p, track_uuid(p, UUID_CPU), at, s.cpu_cores[i]);
		counter_value(p, track_uuid(p, UUID_ALLOCS), at, s.allocs_per_s[i]);
		counter_value(p, track_uuid(p, UUID_BYTES), at, s.bytes_per_s[i]);
	}
	uint64_t last = s.t0 + (uint64_t)s.n * s.width;
	counter_value(p, track_uuid(p, UUID_CPU), last, 0);
	counter_value(p, track_uuid(p, UUID_ALLOCS), last, 0);
	counter_value(p, track_uuid(p, UUID_BYTES), last, 0);
	convert_series_free(&s);
}

/* ---- slices ------------------------------------------------------------ */

static inline void annotation_u(struct pf *p, int name, uint64_t v)
{
	pbwriter_pair(&p->w, TE_DEBUG, DA_NAME_IID, (uint64_t)name, DA_UINT, v);
}

static void slice_begin(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct pf *p = arg;
	packet_begin(p, s->begin_ns, 1);
	pbwriter_begin(&p->w, TP_TRACK_EVENT);
	pbwriter_varint(&p->w, TE_TYPE, TYPE_SLICE_BEGIN);
	pbwriter_varint(&p->w, TE_TRACK, p->track);
	pbwriter_varint(&p->w, TE_NAME_IID, (uint64_t)s->func + 1);
	annotation_u(p, A_MESSAGE_ID, s->msgid);
	const char *trig = rhea_fn_name(s->trigger);
	if (trig) {
		pbwriter_begin(&p->w, TE_DEBUG);
		pbwriter_varint(&p->w, DA_NAME_IID, A_TRIGGER);
		pbwriter_string(&p->w, DA_STRING, trig);
		pbwriter_end(&p->w);
	}
	pbwriter_end(&p->w);
	if (!p->name_done[s->func]) {
		p->name_done[s->func] = 1;
		pbwriter_begin(&p->w, TP_INTERNED);
		pbwriter_begin(&p->w, ID_EVENT_NAMES);
		pbwriter_varint(&p->w, IN_IID, (uint64_t)s->func + 1);
		pbwriter_string(&p->w, IN_NAME, convert_func_name(p->c, s->func));
		pbwriter_end(&p->w);
		pbwriter_end(&p->w);
	}
	packet_end(p);
}

static void slice_end(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)t;
	struct pf *p = arg;
	packet_begin(p, s->end_ns, 1);
	pbwriter_begin(&p->w, TP_TRACK_EVENT);
	pbwriter_varint(&p->w, TE_TYPE, TYPE_SLICE_END);
	pbwriter_varint(&p->w, TE_TRACK, p->track);
	annotation_u(p, A_WALL, s->wall);
	annotation_u(p, A_CPU, s->cpu);
	annotation_u(p, A_SELF, s->self);
	annotation_u(p, A_SELF_CPU, s->self_cpu);
	annotation_u(p, A_ALLOCS, s->allocs);
	annotation_u(p, A_BYTES, s->alloc_bytes);
	annotation_u(p, A_SELF_ALLOCS, s->self_allocs);
	annotation_u(p, A_SELF_BYTES, s->self_alloc_bytes);
	annotation_u(p, A_MINFLT, s->minflt);
	annotation_u(p, A_MAJFLT, s->majflt);
	annotation_u(p, A_NVCSW, s->nvcsw);
	annotation_u(p, A_NIVCSW, s->nivcsw);
	if (p->c->m->funcs[s->func].kind == MODEL_WAIT && s->sample) {
		annotation_u(p, A_BLOCK, s->wall);
		if (s->sample->object) {
			pbwriter_begin(&p->w, TE_DEBUG);
			pbwriter_varint(&p->w, DA_NAME_IID, A_OBJECT);
			pbwriter_varint(&p->w, DA_POINTER, s->sample->object);
			pbwriter_end(&p->w);
			char name[256];
			if (model_object_name(p->c->m, s->sample->trigger, s->sample->object, name, sizeof(name))) {
				pbwriter_begin(&p->w, TE_DEBUG);
				pbwriter_varint(&p->w, DA_NAME_IID, A_OBJECT_NAME);
				pbwriter_string(&p->w, DA_STRING, name);
				pbwriter_end(&p->w);
			}
		}
		if (s->sample->waker_tid)
			annotation_u(p, A_WAKER, s->sample->waker_tid);
		if (s->sample->owner_tid)
			annotation_u(p, A_OWNER, s->sample->owner_tid);
	}
	pbwriter_end(&p->w);
	packet_end(p);
}

/* A sequence's first packet, at ts: its debug annotation names, iid = index
 * (names[0] unused). */
static void intern_debug_names(struct pf *p, uint64_t ts, const char *const *names, int n)
{
	packet_begin(p, ts, 1);
	pbwriter_begin(&p->w, TP_INTERNED);
	for (int a = 1; a < n; a++) {
		pbwriter_begin(&p->w, ID_DEBUG_NAMES);
		pbwriter_varint(&p->w, IN_IID, (uint64_t)a);
		pbwriter_string(&p->w, IN_NAME, names[a]);
		pbwriter_end(&p->w);
	}
	pbwriter_end(&p->w);
	packet_end(p);
}

static void write_slices(struct pf *p, size_t ti)
{
	struct convert_ctx *c = p->c;
	const struct rec_thread *t = &c->r->threads[ti];
	size_t lo, hi;
	convert_range(c, t, &lo, &hi);
	start_sequence(p, 2 + 2 * (uint32_t)ti);
	p->track = track_uuid(p, UUID_THREAD0 + ti);
	memset(p->name_done, 0, c->m->nfuncs);
	intern_debug_names(p, lo < hi ? t->samples[lo].begin_ns : c->origin_ns, annotation_names, A_COUNT);
	struct convert_sink k = {slice_begin, slice_end, p};
	convert_walk(c, t, &k, NULL);
}

/* ---- wakeups: flow arrows from a release to the end of the wait -------- */

struct flow_ev {
	uint64_t ts, track, id;
	int end; /* 0: the release (source), 1: the wait's end (destination) */
};

static int cmp_flow_ev(const void *a, const void *b)
{
	const struct flow_ev *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->end - y->end;
}

/*
 * For every recorded wait whose releaser is known, an instant "release" on
 * the releasing thread's track when it released, and an instant "woken" on
 * the waiter's track when the wait ended, joined by one flow id: the UI
 * draws the arrow between them.  They go on a sequence of their own, in
 * time order (instants on another sequence's track are allowed: tracks are
 * global).
 */
/* The instants of ev[0..n) on the current sequence, in time order; frees ev. */
static void put_flows(struct pf *p, struct flow_ev *ev, size_t n)
{
	if (n > 1)
		vec_sort(ev, n, sizeof(*ev), cmp_flow_ev);
	for (size_t i = 0; i < n; i++) {
		packet_begin(p, ev[i].ts, 1);
		pbwriter_begin(&p->w, TP_TRACK_EVENT);
		pbwriter_varint(&p->w, TE_TYPE, TYPE_INSTANT);
		pbwriter_varint(&p->w, TE_TRACK, ev[i].track);
		pbwriter_string(&p->w, TE_NAME, ev[i].end ? "woken" : "release");
		pbwriter_fixed64(&p->w, ev[i].end ? TE_TERMINATING_FLOW_IDS : TE_FLOW_IDS, ev[i].id);
		pbwriter_end(&p->w);
		packet_end(p);
	}
	free(ev);
}

static void write_flows(struct pf *p)
{
	struct convert_ctx *c = p->c;
	size_t n = 0, cap = 0;
	struct flow_ev *ev = NULL;
	uint64_t id = p->uuid_base; /* flow ids are global too */
	for (size_t ti = 0; ti < c->r->nthreads; ti++) {
		if (!c->selected[ti])
			continue;
		const struct rec_thread *t = &c->r->threads[ti];
		size_t lo, hi;
		convert_range(c, t, &lo, &hi);
		for (size_t k = lo; k < hi; k++) {
			const struct rhea_sample *s = &t->samples[k];
			if (!(s->h.flags & RHEA_S_BLOCK) || !s->waker_tid || !s->release_ns ||
			    s->release_ns > s->end_ns)
				continue;
			/* the waker's life then (a tid may have several) */
			size_t wi = recording_life_at(c->r, s->waker_tid, s->release_ns);
			if (wi == c->r->nthreads || !c->selected[wi])
				continue;
			if (n + 2 > cap) {
				cap = cap ? cap * 2 : 256;
				ev = realloc(ev, cap * sizeof(*ev));
				if (!ev)
					return;
			}
			id++;
			ev[n++] = (struct flow_ev){s->release_ns, track_uuid(p, UUID_THREAD0 + wi), id, 0};
			ev[n++] = (struct flow_ev){s->end_ns, track_uuid(p, UUID_THREAD0 + ti), id, 1};
		}
	}
	start_sequence(p, 2 + 2 * (uint32_t)c->r->nthreads + 1);
	put_flows(p, ev, n);
}

/* ---- stalls: event-loop iterations that ran too long (analysis/stalls.c) --- */

#define UUID_STALLS0 (UUID_THREAD0 + (1ull << 32)) /* + thread index */

/* The stall sequence's debug annotation names. */
enum { SA_MESSAGE_ID = 1, SA_CPU, SA_CAUSE, SA_FATAL, SA_COUNT };
static const char *const stall_annotation_names[SA_COUNT] = {NULL, "MessageId", "CPUTime", "Cause", "Fatal"};

struct stall_ev {
	uint64_t ts;
	size_t stall, thread;
	int end;
};

static int cmp_stall_ev(const void *a, const void *b)
{
	const struct stall_ev *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->end != y->end)
		return x->end ? -1 : 1; /* one ends before the next begins */
	return x->stall < y->stall ? -1 : x->stall > y->stall;
}

/*
 * Each stall as a slice on a track of its own under its thread's ("stalls"),
 * named after its cause (the innermost two frames of where its time went),
 * with the message id, the thread's CPU time in it, the four-frame cause and
 * whether the process died in it.  Its own sequence, in time order.
 */
static void write_stalls(struct pf *p)
{
	struct convert_ctx *c = p->c;
	struct recording *r = c->r;
	struct stalls st;
	if (convert_stalls(c, &st) < 0) {
		p->err = 1;
		return;
	}
	struct stall_ev *ev = malloc((2 * st.n + 1) * sizeof(*ev));
	uint8_t *has = calloc(r->nthreads + 1, 1);
	size_t n = 0;
	for (size_t i = 0; ev && has && i < st.n; i++) {
		size_t ti = (size_t)(st.v[i].t - r->threads);
		has[ti] = 1;
		ev[n++] = (struct stall_ev){st.v[i].begin_ns, i, ti, 0};
		ev[n++] = (struct stall_ev){st.v[i].end_ns, i, ti, 1};
	}
	if (!ev || !has || n == 0) {
		if (!ev || !has)
			p->err = 1;
		goto out;
	}
	vec_sort(ev, n, sizeof(*ev), cmp_stall_ev);
	start_sequence(p, 4 + 2 * (uint32_t)r->nthreads);
	intern_debug_names(p, ev[0].ts, stall_annotation_names, SA_COUNT);
	for (size_t ti = 0; ti < r->nthreads; ti++) {
		if (!has[ti])
			continue;
		packet_begin(p, ev[0].ts, 1);
		pbwriter_begin(&p->w, TP_TRACK_DESCRIPTOR);
		pbwriter_varint(&p->w, TD_UUID, track_uuid(p, UUID_STALLS0 + ti));
		pbwriter_varint(&p->w, TD_PARENT, track_uuid(p, UUID_THREAD0 + ti));
		pbwriter_string(&p->w, TD_NAME, "stalls");
		pbwriter_end(&p->w);
		packet_end(p);
	}
	for (size_t i = 0; i < n; i++) {
		const struct stall *x = &st.v[ev[i].stall];
		packet_begin(p, ev[i].ts, 1);
		pbwriter_begin(&p->w, TP_TRACK_EVENT);
		pbwriter_varint(&p->w, TE_TYPE, ev[i].end ? TYPE_SLICE_END : TYPE_SLICE_BEGIN);
		pbwriter_varint(&p->w, TE_TRACK, track_uuid(p, UUID_STALLS0 + ev[i].thread));
		if (!ev[i].end) {
			char name[sizeof(p->namebuf) + 16];
			snprintf(name, sizeof(name), "stall: %s",
				 convert_cause_name(c, &st.causes[x->cause], p->namebuf, sizeof(p->namebuf)));
			pbwriter_string(&p->w, TE_NAME, name);
			annotation_u(p, SA_MESSAGE_ID, x->msgid);
			convert_cause_name(c, &st.subcauses[x->subcause], p->namebuf, sizeof(p->namebuf));
			pbwriter_begin(&p->w, TE_DEBUG);
			pbwriter_varint(&p->w, DA_NAME_IID, SA_CAUSE);
			pbwriter_string(&p->w, DA_STRING, p->namebuf);
			pbwriter_end(&p->w);
		} else {
			annotation_u(p, SA_CPU, x->ce.cpu_ns >= x->cb.cpu_ns ? x->ce.cpu_ns - x->cb.cpu_ns : 0);
			annotation_u(p, SA_FATAL, (uint64_t)x->fatal);
		}
		pbwriter_end(&p->w);
		packet_end(p);
	}
out:
	free(ev);
	free(has);
	stalls_free(&st);
}

/* ---- samples ----------------------------------------------------------- */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

static void cs_clear(struct pf *p)
{
	if (p->cs_slots)
		memset(p->cs_keys, 0, p->cs_slots * sizeof(uint64_t));
	p->cs_n = 0;
}

static void cs_grow(struct pf *p)
{
	uint32_t n = p->cs_slots ? p->cs_slots * 2 : 1024;
	uint64_t *keys = calloc(n, sizeof(uint64_t));
	uint32_t *iids = calloc(n, sizeof(uint32_t));
	if (!keys || !iids) {
		fprintf(stderr, "rhea: out of memory\n");
		exit(1);
	}
	for (uint32_t i = 0; i < p->cs_slots; i++) {
		if (!p->cs_keys[i])
			continue;
		uint32_t j = (uint32_t)mix(p->cs_keys[i]) & (n - 1);
		while (keys[j])
			j = (j + 1) & (n - 1);
		keys[j] = p->cs_keys[i];
		iids[j] = p->cs_iids[i];
	}
	free(p->cs_keys);
	free(p->cs_iids);
	p->cs_keys = keys;
	p->cs_iids = iids;
	p->cs_slots = n;
}

/* The callstack iid of key, or 0 with *slot where to put it. */
static uint32_t cs_find(struct pf *p, uint64_t key, uint32_t *slot)
{
	if ((p->cs_n + 1) * 2 > p->cs_slots)
		cs_grow(p);
	uint32_t mask = p->cs_slots - 1;
	uint32_t i = (uint32_t)mix(key) & mask;
	for (; p->cs_keys[i]; i = (i + 1) & mask)
		if (p->cs_keys[i] == key)
			return p->cs_iids[i];
	*slot = i;
	return 0;
}

static uint64_t mapping_iid(const struct pf *p, uint32_t func)
{
	int32_t mod = p->c->func_mod[func];
	return mod >= 0 ? (uint64_t)mod + 1 : (uint64_t)p->c->r->nmods + 1;
}

/* Interned data for a new callstack: its frames (and their function
 * names, source paths) not yet on this sequence, then the callstack. */
static void intern_callstack(struct pf *p, uint32_t iid, const uint32_t *frames, int n)
{
	struct convert_ctx *c = p->c;
	pbwriter_begin(&p->w, TP_INTERNED);
	for (int i = 0; i < n; i++) {
		uint32_t f = frames[i];
		if (p->frame_done[f])
			continue;
		p->frame_done[f] = 1;
		const struct model_func *mf = &c->m->funcs[f];
		pbwriter_begin(&p->w, ID_FUNCTION_NAMES);
		pbwriter_varint(&p->w, IN_IID, (uint64_t)f + 1);
		pbwriter_string(&p->w, IN_NAME, convert_func_name(c, f));
		pbwriter_end(&p->w);
		if (mf->file && !p->file_done[f]) {
			p->file_done[f] = 1;
			pbwriter_begin(&p->w, ID_SOURCE_PATHS);
			pbwriter_varint(&p->w, IN_IID, (uint64_t)f + 1);
			clean(p, mf->file);
			pbwriter_string(&p->w, IN_NAME, p->namebuf);
			pbwriter_end(&p->w);
		}
		pbwriter_begin(&p->w, ID_FRAMES);
		pbwriter_varint(&p->w, FR_IID, (uint64_t)f + 1);
		pbwriter_varint(&p->w, FR_FUNCTION, (uint64_t)f + 1);
		pbwriter_varint(&p->w, FR_MAPPING, mapping_iid(p, f));
		int32_t mod = c->func_mod[f];
		/* rel_pc: the function's first address seen, relative to its
		 * module's executable range; pseudo-frames get their id (a frame
		 * is keyed by mapping, rel_pc and name). */
		pbwriter_varint(&p->w, FR_REL_PC, mod >= 0 ? c->func_addr[f] - c->r->mods[mod].lo : f);
		if (mf->file)
			pbwriter_varint(&p->w, FR_SOURCE, (uint64_t)f + 1);
		if (mf->line > 0)
			pbwriter_varint(&p->w, FR_LINE, (uint64_t)mf->line);
		pbwriter_end(&p->w);
	}
	pbwriter_begin(&p->w, ID_CALLSTACKS);
	pbwriter_varint(&p->w, CS_IID, iid);
	for (int i = 0; i < n; i++) /* not packed: the schema (proto2) says so */
		pbwriter_varint(&p->w, CS_FRAMES, (uint64_t)frames[i] + 1);
	pbwriter_end(&p->w);
	pbwriter_end(&p->w);
}

static void write_mappings(struct pf *p)
{
	struct recording *r = p->c->r;
	pbwriter_begin(&p->w, TP_INTERNED);
	for (size_t i = 0; i <= r->nmods; i++) {
		const struct rec_module *rm = i < r->nmods ? &r->mods[i] : NULL;
		pbwriter_begin(&p->w, ID_MAPPING_PATHS);
		pbwriter_varint(&p->w, IN_IID, i + 1);
		clean(p, rm ? rm->path : "[rhea]");
		pbwriter_string(&p->w, IN_NAME, p->namebuf);
		pbwriter_end(&p->w);
		if (rm && rm->build_id_len) {
			pbwriter_begin(&p->w, ID_BUILD_IDS);
			pbwriter_varint(&p->w, IN_IID, i + 1);
			pbwriter_bytes(&p->w, IN_NAME, rm->build_id, rm->build_id_len);
			pbwriter_end(&p->w);
		}
		pbwriter_begin(&p->w, ID_MAPPINGS);
		pbwriter_varint(&p->w, MP_IID, i + 1);
		if (rm && rm->build_id_len)
			pbwriter_varint(&p->w, MP_BUILD_ID, i + 1);
		if (rm) {
			pbwriter_varint(&p->w, MP_START, rm->lo);
			pbwriter_varint(&p->w, MP_END, rm->hi > rm->lo ? rm->hi : rm->lo);
			pbwriter_varint(&p->w, MP_LOAD_BIAS, rm->bias);
		}
		pbwriter_varint(&p->w, MP_PATH_IDS, i + 1);
		pbwriter_end(&p->w);
	}
	pbwriter_end(&p->w);
}

static void write_samples(struct pf *p, size_t ti)
{
	struct convert_ctx *c = p->c;
	struct recording *r = c->r;
	const struct rec_thread *t = &r->threads[ti];
	size_t lo, hi;
	convert_range(c, t, &lo, &hi);
	if (lo == hi)
		return;
	start_sequence(p, 3 + 2 * (uint32_t)ti);
	memset(p->frame_done, 0, c->m->nfuncs);
	memset(p->file_done, 0, c->m->nfuncs);
	cs_clear(p);
	packet_begin(p, t->samples[lo].begin_ns, 1);
	write_mappings(p);
	packet_end(p);
	const struct rhea_sample *prev = NULL;
	uint64_t last_ts = t->samples[lo].begin_ns;
	for (size_t k = lo; k < hi; k++) {
		const struct rhea_sample *s = &t->samples[k];
		int block = (s->h.flags & RHEA_S_BLOCK) != 0;
		/* As the model does: a sample taken from outside during a
		 * recorded blocking call repeats what the BLOCK sample says.
		 * Not the sampler's own: its signal came while the thread ran,
		 * between the call's return and the hook's reading of the end
		 * (a period of CPU the CPU profile counts: --samples cpu gave
		 * one sample fewer than rhea report's periods, now and then). */
		if ((s->h.flags & RHEA_S_ASYNC) && s->trigger != RHEA_FN_SAMPLER && prev &&
		    (prev->h.flags & RHEA_S_BLOCK) && s->begin_ns <= prev->end_ns)
			continue;
		prev = s;
		uint64_t periods = model_cpu_periods(s);
		if ((!s->stack && !block) || (c->o->cpu_samples && !periods))
			continue;
		uint64_t key = (uint64_t)s->stack << 20 | (block ? ((uint64_t)s->trigger << 1 | 1) : 0);
		uint32_t slot = 0;
		uint32_t iid = cs_find(p, key, &slot);
		int fresh = 0;
		int n = 0;
		if (!iid) {
			n = model_frames(c->m, s, p->frames, MAX_FRAMES);
			if (n == 0)
				continue;
			iid = ++p->cs_n;
			p->cs_keys[slot] = key;
			p->cs_iids[slot] = iid;
			fresh = 1;
		}
		/* with --samples cpu, as many as the periods of CPU it stands for */
		unsigned count = block ? 1u : c->o->cpu_samples ? (unsigned)(periods < 1000 ? periods : 1000) : 1u + s->merged;
		uint64_t span = s->end_ns > s->begin_ns ? s->end_ns - s->begin_ns : 0;
		for (unsigned j = 0; j < count; j++) {
			uint64_t ts = s->begin_ns + (count > 1 ? span * j / (count - 1) : 0);
			if (ts < last_ts) /* a merged record overlapping the next one */
				ts = last_ts;
			last_ts = ts;
			packet_begin(p, ts, 1);
			pbwriter_begin(&p->w, TP_PERF_SAMPLE);
			pbwriter_varint(&p->w, PS_PID, r->hdr.pid);
			pbwriter_varint(&p->w, PS_TID, t->tid);
			pbwriter_varint(&p->w, PS_CALLSTACK, iid);
			pbwriter_varint(&p->w, PS_CPU_MODE, MODE_USER);
			if (s->h.flags & RHEA_S_TRUNCATED)
				pbwriter_varint(&p->w, PS_UNWIND_ERROR, UNWIND_ERROR_MAX_FRAMES_EXCEEDED);
			pbwriter_end(&p->w);
			if (fresh) {
				intern_callstack(p, iid, p->frames, n);
				fresh = 0;
			}
			packet_end(p);
		}
	}
}

/*
 * After the parts of several recordings: flow arrows between processes,
 * from a release of a process-shared object (a RELEASE entry) to the end
 * of the wait in another process it ended (recording_xwakes), on a
 * sequence of their own.  Tracks are the parts' (part index << 40 +
 * thread track); flow ids after every part's.
 */
int perfetto_write_xflows(FILE *out, struct convert_part *part, const struct perfetto_xflow *v, size_t n)
{
	if (n == 0)
		return 0;
	struct pf *p = calloc(1, sizeof(*p));
	struct flow_ev *ev = malloc(2 * n * sizeof(*ev));
	if (!p || !ev) {
		free(p);
		free(ev);
		return -1;
	}
	p->out = out;
	p->seq_base = part->next_seq++;
	pbwriter_init(&p->w);
	uint64_t id = part_uuid_base(part->index);
	for (size_t i = 0; i < n; i++) {
		id++;
		ev[2 * i] = (struct flow_ev){v[i].release_ns, part_uuid_base(v[i].rpart) + UUID_THREAD0 + v[i].rthread,
					     id, 0};
		ev[2 * i + 1] = (struct flow_ev){v[i].end_ns, part_uuid_base(v[i].wpart) + UUID_THREAD0 + v[i].wthread,
						 id, 1};
	}
	start_sequence(p, 1);
	put_flows(p, ev, 2 * n);
	flush(p, 1);
	int rc = p->err ? -1 : 0;
	pbwriter_free(&p->w);
	free(p);
	return rc;
}

int perfetto_write(struct convert_ctx *c, FILE *out)
{
	struct convert_part one = {0, 1, 0, 0, NULL, NULL};
	return perfetto_write_part(c, out, &one);
}

/* A recording's sequences are part->next_seq + 1 .. + 4 + 2 x threads (see
 * the top), its uuids and flow ids part->index << 40 + ...: a trace
 * processor sees each process's tracks and interned data apart. */
int perfetto_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part)
{
	struct pf *p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	p->c = c;
	p->out = out;
	p->seq_base = part->next_seq;
	p->uuid_base = part_uuid_base(part->index);
	part->next_seq += 5 + 2 * (uint32_t)c->r->nthreads;
	part->index++;
	pbwriter_init(&p->w);
	p->name_done = calloc(c->m->nfuncs, 1);
	p->frame_done = calloc(c->m->nfuncs, 1);
	p->file_done = calloc(c->m->nfuncs, 1);
	p->frames = malloc(MAX_FRAMES * sizeof(uint32_t));
	int rc = -1;
	if (!p->name_done || !p->frame_done || !p->file_done || !p->frames)
		goto out;
	write_process(p);
	for (size_t i = 0; i < c->r->nthreads && !p->err; i++) {
		if (!c->selected[i])
			continue;
		write_slices(p, i);
		write_samples(p, i);
	}
	if (!p->err)
		write_flows(p);
	if (!p->err)
		write_stalls(p);
	flush(p, 1);
	rc = p->err ? -1 : 0;
out:
	pbwriter_free(&p->w);
	free(p->name_done);
	free(p->frame_done);
	free(p->file_done);
	free(p->frames);
	free(p->cs_keys);
	free(p->cs_iids);
	free(p);
	return rc;
}

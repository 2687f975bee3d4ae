/*
 * test_convert.c - the walk every `rhea convert` format shares
 * (export/convert.c) and the writers, on hand-made recordings.
 *
 * What is proved here: slices reach the formats nested and in time order;
 * self values add up to the outermost slices' and allocations no slice
 * holds are returned as unattributed; --min-dur keeps exactly the slices
 * that are long enough, emitting a kept slice's ancestors late but in
 * order; the time window feeds the model only the samples inside it; two
 * executions with identical stacks and different message ids are two
 * slices in the output; each writer's output is well formed (Chrome JSON
 * timestamps keep nanoseconds, pprof is gzip + protobuf with the right
 * totals, Perfetto packets parse, folded and Nanoscope lines add up);
 * names are cleaned to valid UTF-8.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "convert.h"
#include "hookfn.h"

#define MS 1000000ull
#define T0 1000000000ull /* the recording's start */

static struct recording rec;
static struct rec_thread th;
static struct model m;
static struct convert_ctx cx;
static struct convert_opts opts;

/* Nodes: 1=A(0x100) 2=B(0x200, parent A) 3=C(0x300, parent B)
 * 4=E(0x400, parent A) 5=D(0x500, parent C) */
static void setup(void)
{
	memset(&rec, 0, sizeof(rec));
	memset(&th, 0, sizeof(th));
	memset(&opts, 0, sizeof(opts));
	opts.to_ns = -1;
	rec.path = "test.rhea";
	rec.hdr.pid = 42;
	rec.hdr.start_ns = T0;
	rec.hdr.interval_ns = MS;
	rec.nnodes = 8;
	rec.nodes = calloc(8, sizeof(struct rhea_node));
	rec.nodes_known = calloc(8, 1);
	uint64_t addr[] = {0, 0x100, 0x200, 0x300, 0x400, 0x500};
	uint32_t parent[] = {0, 0, 1, 2, 1, 3};
	for (int i = 1; i <= 5; i++) {
		rec.nodes[i].addr = addr[i];
		rec.nodes[i].parent = parent[i];
		rec.nodes_known[i] = 1;
	}
	th.tid = 42;
	strcpy(th.name, "main");
	th.samples = calloc(64, sizeof(struct rhea_sample));
	rec.threads = &th;
	rec.nthreads = 1;
}

static void teardown(void)
{
	free(rec.nodes);
	free(rec.nodes_known);
	free(th.samples);
}

TestSuite(convert, .init = setup, .fini = teardown);

static void add(uint32_t stack, uint64_t b, uint64_t e, uint32_t msgid, unsigned flags, uint64_t allocs_b,
		uint64_t allocs_e)
{
	struct rhea_sample *s = &th.samples[th.nsamples++];
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.flags = (uint16_t)flags;
	s->tid = 42;
	s->stack = stack;
	s->begin_ns = T0 + b;
	s->end_ns = T0 + e;
	s->msgid = msgid;
	s->trigger = (flags & RHEA_S_BLOCK) ? RHEA_FN_NANOSLEEP : RHEA_FN_MALLOC;
	s->c_begin.alloc_count = allocs_b;
	s->c_end.alloc_count = allocs_e;
	s->c_begin.alloc_bytes = allocs_b * 16;
	s->c_end.alloc_bytes = allocs_e * 16;
	s->c_begin.cpu_ns = b / 2;
	s->c_end.cpu_ns = e / 2;
	if (rec.first_ns == 0 || s->begin_ns < rec.first_ns)
		rec.first_ns = s->begin_ns;
	if (s->end_ns > rec.last_ns)
		rec.last_ns = s->end_ns;
	rec.nsamples++;
}

static void build(void)
{
	char err[256];
	cr_assert_eq(model_build(&m, &rec, opts.policy), 0);
	cr_assert_eq(convert_init(&cx, &m, &opts, err, sizeof(err)), 0, "%s", err);
}

static void done(void)
{
	convert_free(&cx);
	model_free(&m);
}

/* Letter of a function named "?+0x<addr>". */
static char letter(uint32_t func)
{
	const char *x = strstr(m.funcs[func].name, "0x");
	return x ? "?ABCED"[strtoul(x, NULL, 16) / 0x100] : m.funcs[func].name[0];
}

struct ev {
	char what; /* 'B' or 'E' */
	char name;
	int depth;
	uint64_t ts;
	struct convert_slice s;
};
static struct ev evs[256];
static int nev;

static void rec_begin(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)arg;
	(void)t;
	evs[nev++] = (struct ev){'B', letter(s->func), s->depth, s->begin_ns, *s};
}

static void rec_end(void *arg, const struct rec_thread *t, const struct convert_slice *s)
{
	(void)arg;
	(void)t;
	evs[nev++] = (struct ev){'E', letter(s->func), s->depth, s->end_ns, *s};
}

static struct convert_thread_info walk(void)
{
	struct convert_sink k = {rec_begin, rec_end, NULL};
	struct convert_thread_info info;
	nev = 0;
	convert_walk(&cx, &th, &k, &info);
	return info;
}

/* Events nest (each E closes the innermost open B, depths match) and
 * never go back in time. */
static void check_nesting(void)
{
	char open[64];
	int depth = 0;
	for (int i = 0; i < nev; i++) {
		if (i)
			cr_assert_geq(evs[i].ts, evs[i - 1].ts, "event %d goes back in time", i);
		if (evs[i].what == 'B') {
			cr_assert_eq(evs[i].depth, depth, "begin of %c at depth %d, %d open", evs[i].name,
				     evs[i].depth, depth);
			open[depth++] = evs[i].name;
		} else {
			cr_assert_gt(depth, 0);
			cr_assert_eq(open[--depth], evs[i].name, "end of %c closes %c", evs[i].name, open[depth]);
		}
	}
	cr_assert_eq(depth, 0, "every slice ends");
}

Test(convert, slices_nest_and_self_values_add_up)
{
	add(3, 0, 0, 0, 0, 5, 5);            /* A>B>C at 0, 5 allocations before */
	add(3, 1 * MS, 5 * MS, 0, 0, 5, 10); /* merged */
	add(4, 6 * MS, 6 * MS, 0, 0, 12, 12); /* A>E */
	add(4, 8 * MS, 8 * MS, 0, 0, 15, 15);
	build();
	struct convert_thread_info info = walk();
	check_nesting();
	cr_assert_eq(nev, 8, "A, B, C, E begin and end");
	uint64_t self_allocs = 0, self_wall = 0, root_wall = 0;
	for (int i = 0; i < nev; i++) {
		if (evs[i].what != 'E')
			continue;
		self_allocs += evs[i].s.self_allocs;
		self_wall += evs[i].s.self;
		if (evs[i].depth == 0)
			root_wall += evs[i].s.wall;
		if (evs[i].name == 'B') {
			cr_assert_eq(evs[i].s.allocs, 7, "B: allocations 5..12");
			cr_assert_eq(evs[i].s.alloc_bytes, 7 * 16);
			cr_assert_eq(evs[i].s.wall, 6 * MS);
			cr_assert_eq(evs[i].s.self, 0, "C covers all of B");
			cr_assert_eq(evs[i].s.cpu, 3 * MS);
		}
	}
	cr_assert_eq(self_allocs, 10, "self allocations add up to the root's");
	cr_assert_eq(self_wall, root_wall);
	cr_assert_eq(info.unattributed_allocs, 5, "the 5 allocations before the first sample");
	cr_assert_eq(info.unattributed_bytes, 5 * 16);
	done();
}

Test(convert, min_dur_keeps_long_slices_nested)
{
	add(5, 0, 0, 0, 0, 0, 0);             /* A>B>C>D */
	add(3, 1 * MS, 1 * MS, 0, 0, 0, 0);   /* D ends: 1 ms */
	add(2, 4 * MS, 4 * MS, 0, 0, 0, 0);   /* C ends: 4 ms */
	add(4, 5 * MS, 5 * MS, 0, 0, 0, 0);   /* B ends: 5 ms; E 5..6 */
	add(1, 6 * MS, 6 * MS, 0, 0, 0, 0);   /* E ends: 1 ms */
	add(4, 7 * MS, 20 * MS, 0, 0, 0, 0);  /* E again, 7..20 */
	build();
	walk();
	check_nesting();
	struct ev all[64];
	int nall = nev;
	memcpy(all, evs, sizeof(all));
	opts.min_dur_ns = 3 * MS;
	convert_free(&cx);
	char err[256];
	cr_assert_eq(convert_init(&cx, &m, &opts, err, sizeof(err)), 0);
	walk();
	check_nesting();
	/* Exactly the unfiltered slices of >= 3 ms, in the same order. */
	int k = 0;
	for (int i = 0; i < nall; i++) {
		if (all[i].what != 'E' || all[i].s.end_ns - all[i].s.begin_ns < 3 * MS)
			continue;
		while (k < nev && evs[k].what != 'E')
			k++;
		cr_assert_lt(k, nev, "slice %c missing", all[i].name);
		cr_assert_eq(evs[k].name, all[i].name);
		cr_assert_eq(evs[k].s.begin_ns, all[i].s.begin_ns);
		cr_assert_eq(evs[k].s.end_ns, all[i].s.end_ns);
		k++;
	}
	for (; k < nev; k++)
		cr_assert_neq(evs[k].what, 'E', "an extra slice %c", evs[k].name);
	for (int i = 0; i < nev; i++)
		cr_assert(evs[i].name != 'D', "D (1 ms) is dropped");
	done();
}

Test(convert, window_feeds_only_its_samples)
{
	for (int i = 0; i < 10; i++)
		add(i % 2 ? 3 : 4, (uint64_t)i * MS, (uint64_t)i * MS, 0, 0, (uint64_t)i, (uint64_t)i);
	opts.from_ns = 3 * MS;
	opts.to_ns = 6 * MS;
	build();
	walk();
	check_nesting();
	cr_assert_gt(nev, 0);
	for (int i = 0; i < nev; i++) {
		cr_assert_geq(evs[i].ts, T0 + 3 * MS);
		cr_assert_leq(evs[i].ts, T0 + 6 * MS);
	}
	cr_assert_eq(cx.records, 3, "samples at 3, 4 and 5 ms");
	done();
}

/* Run a writer into memory. */
static char *run_writer(int (*fn)(struct convert_ctx *, FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	cr_assert_not_null(f);
	cr_assert_eq(fn(&cx, f), 0);
	fclose(f);
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

Test(convert, message_ids_split_identical_stacks)
{
	add(3, 0, 2 * MS, 1, 0, 0, 0);
	add(3, 2 * MS, 4 * MS, 2, 0, 0, 0); /* same stack, next message, no gap */
	build();
	size_t len;
	char *out = run_writer(chrome_write, &len);
	cr_assert_eq(count(out, "\"ph\":\"B\""), 6, "A, B, C twice:\n%s", out);
	cr_assert_eq(count(out, "\"MessageId\":2"), 3);
	free(out);
	done();
}

Test(convert, chrome_keeps_nanoseconds)
{
	add(3, 1234567, 1234567, 0, 0, 0, 0);
	add(4, 2 * MS + 1, 2 * MS + 1, 0, 0, 0, 0);
	build();
	size_t len;
	char *out = run_writer(chrome_write, &len);
	cr_assert(strstr(out, "\"ts\":1234.567") != NULL, "%s", out);
	cr_assert(strstr(out, "\"ts\":2000.001") != NULL, "%s", out);
	cr_assert(strstr(out, "\"thread_name\"") != NULL);
	cr_assert_eq(count(out, "\"ph\":\"B\""), count(out, "\"ph\":\"E\""));
	free(out);
	done();
}

static uint64_t rd_varint(const uint8_t *p, size_t *i, size_t n)
{
	uint64_t v = 0;
	for (int s = 0; *i < n; s += 7) {
		uint8_t b = p[(*i)++];
		v |= (uint64_t)(b & 0x7f) << s;
		if (b < 0x80)
			return v;
	}
	cr_assert_fail("varint past the end");
	return 0;
}

Test(convert, perfetto_packets_parse)
{
	add(3, 0, 0, 0, 0, 0, 0);
	add(2, 1 * MS, 3 * MS, 0, RHEA_S_BLOCK, 0, 0);
	add(4, 4 * MS, 4 * MS, 0, 0, 0, 0);
	build();
	size_t len;
	uint8_t *out = (uint8_t *)run_writer(perfetto_write, &len);
	size_t i = 0;
	int packets = 0, events = 0, samples = 0;
	while (i < len) {
		cr_assert_eq(rd_varint(out, &i, len), (1 << 3) | 2, "Trace.packet");
		uint64_t plen = rd_varint(out, &i, len);
		size_t end = i + plen;
		cr_assert_leq(end, len);
		while (i < end) {
			uint64_t tag = rd_varint(out, &i, end);
			uint64_t f = tag >> 3;
			if ((tag & 7) == 0)
				rd_varint(out, &i, end);
			else if ((tag & 7) == 2)
				i += rd_varint(out, &i, end);
			else if ((tag & 7) == 1)
				i += 8;
			else
				cr_assert_fail("wire type %d", (int)(tag & 7));
			events += f == 11;
			samples += f == 66;
		}
		cr_assert_eq(i, end);
		packets++;
	}
	cr_assert_eq(events % 2, 0);
	cr_assert_geq(events, 2 * 5, "A, B, C, nanosleep, E begin and end (+ counters)");
	cr_assert_eq(samples, 3);
	free(out);
	done();
}

/* PerfSample packets in a Perfetto trace written now. */
static int perf_samples(void)
{
	size_t len;
	uint8_t *out = (uint8_t *)run_writer(perfetto_write, &len);
	size_t i = 0;
	int samples = 0;
	while (i < len) {
		rd_varint(out, &i, len);
		size_t end = i + rd_varint(out, &i, len);
		while (i < end) {
			uint64_t tag = rd_varint(out, &i, end);
			if ((tag & 7) == 0)
				rd_varint(out, &i, end);
			else if ((tag & 7) == 2)
				i += rd_varint(out, &i, end);
			else
				i += 8;
			samples += (tag >> 3) == 66;
		}
	}
	free(out);
	return samples;
}

/* A capture from outside the hooks at time ns (stack 4): trigger
 * sampler (object: its periods of CPU) or forced. */
static void add_async(uint64_t ns, unsigned trigger, uint64_t object)
{
	add(4, ns, ns, 0, RHEA_S_ASYNC, 0, 0);
	th.samples[th.nsamples - 1].trigger = (uint16_t)trigger;
	th.samples[th.nsamples - 1].object = object;
}

/* The trace built with --samples cpu: its perf samples. */
static int cpu_perf_samples(void)
{
	opts.cpu_samples = 1;
	build();
	int n = perf_samples();
	opts.cpu_samples = 0;
	return n;
}

Test(convert, perfetto_cpu_samples_only)
{
	add(3, 0, 0, 0, 0, 0, 0);
	add_async(2 * MS, RHEA_FN_SAMPLER, 5); /* 5 periods of CPU */
	add(3, 4 * MS, 4 * MS, 0, 0, 0, 0);
	cr_assert_eq(cpu_perf_samples(), 5, "the sampler's capture, once per period; the hooks' left out");
	done();
}

Test(convert, perfetto_cpu_samples_at_a_wait_end)
{
	/* The sampler's signal came between a wait's return and the hook's
	 * reading of its end: its capture is dated inside the wait.  It is
	 * CPU all the same: counted, as rhea report's CPU profile does. */
	add(3, 0, 0, 0, 0, 0, 0);
	add(2, 1 * MS, 3 * MS, 0, RHEA_S_BLOCK, 0, 0);
	add_async(3 * MS - 4000, RHEA_FN_SAMPLER, 1);
	add_async(3 * MS - 2000, RHEA_FN_FORCED, 0); /* from outside: repeats the wait */
	add(3, 5 * MS, 5 * MS, 0, 0, 0, 0);
	cr_assert_eq(cpu_perf_samples(), 1, "the sampler's period inside the wait's span");
	done();
}

Test(convert, pprof_and_folded_totals)
{
	add(3, 0, 0, 0, 0, 2, 2);
	add(3, 1 * MS, 5 * MS, 0, 0, 2, 10);
	add(4, 6 * MS, 6 * MS, 0, RHEA_S_ASYNC, 12, 12);
	th.samples[th.nsamples - 1].trigger = RHEA_FN_SAMPLER; /* the sampler's, for 3 periods of CPU */
	th.samples[th.nsamples - 1].object = 3;
	add(4, 8 * MS, 8 * MS, 0, 0, 15, 15);
	build();
	size_t len;
	char *gz = run_writer(pprof_write, &len);
	cr_assert_eq((uint8_t)gz[0], 0x1f);
	cr_assert_eq((uint8_t)gz[1], 0x8b);
	uint8_t *raw = malloc(1 << 20);
	z_stream z = {0};
	cr_assert_eq(inflateInit2(&z, 31), Z_OK);
	z.next_in = (uint8_t *)gz;
	z.avail_in = (uInt)len;
	z.next_out = raw;
	z.avail_out = 1 << 20;
	cr_assert_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	size_t n = (1 << 20) - z.avail_out;
	inflateEnd(&z);
	/* Sum the values of every Sample (field 2, values field 2 packed). */
	uint64_t tot[CONVERT_NVALUES] = {0};
	size_t i = 0;
	int strings = 0;
	while (i < n) {
		uint64_t tag = rd_varint(raw, &i, n);
		if ((tag & 7) == 0) {
			rd_varint(raw, &i, n);
			continue;
		}
		cr_assert_eq(tag & 7, 2);
		uint64_t l = rd_varint(raw, &i, n);
		size_t end = i + l;
		if (tag >> 3 == 6)
			strings++;
		if (tag >> 3 == 2) {
			while (i < end) {
				uint64_t t2 = rd_varint(raw, &i, end);
				uint64_t l2 = rd_varint(raw, &i, end);
				if (t2 >> 3 == 2) {
					size_t e2 = i + l2;
					for (int k = 0; i < e2; k++) {
						cr_assert_lt(k, CONVERT_NVALUES, "more values than sample types");
						tot[k] += rd_varint(raw, &i, e2);
					}
				} else {
					i += l2;
				}
			}
		}
		i = end;
	}
	cr_assert_gt(strings, 5);
	cr_assert_eq(tot[0], 8 * MS, "wall: the root covers 0..8 ms");
	cr_assert_eq(tot[1], 4 * MS, "cpu: half of it in this recording");
	cr_assert_eq(tot[2], 15, "every allocation, the 2 before the first sample too");
	cr_assert_eq(tot[3], 15 * 16);
	cr_assert_eq(tot[CONVERT_V_CPU_SAMPLES], 3, "cpu_samples: the one sampler capture's 3 periods");
	free(raw);
	free(gz);

	opts.weight = CONVERT_V_ALLOC_COUNT;
	char *fo = run_writer(folded_write, &len);
	uint64_t sum = 0;
	for (char *line = strtok(fo, "\n"); line; line = strtok(NULL, "\n"))
		sum += strtoull(strrchr(line, ' ') + 1, NULL, 10);
	cr_assert_eq(sum, 15);
	free(fo);
	done();
}

Test(convert, nanoscope_lines)
{
	add(3, 0, 0, 0, 0, 0, 0);
	add(4, 2 * MS, 2 * MS, 0, 0, 0, 0);
	build();
	size_t len;
	char *out = run_writer(nanoscope_write, &len);
	cr_assert_eq(count(out, ":+"), 4, "%s", out);
	cr_assert_eq(count(out, ":POP"), 4);
	cr_assert(strncmp(out, "0:+", 3) == 0, "%s", out);
	free(out);
	done();
}

Test(convert, clean_string)
{
	char out[64];
	convert_clean_string("ok\tname\n", out, sizeof(out));
	cr_assert_str_eq(out, "ok name ");
	convert_clean_string("bad\xff\xfe utf8 \xc3\xa9t\xc3", out, sizeof(out));
	cr_assert_str_eq(out, "bad?? utf8 \xc3\xa9t?");
	convert_clean_string("truncated", out, 5);
	cr_assert_str_eq(out, "trun");
	convert_clean_string("\xe2\x82\xac", out, 3); /* no room for the whole character */
	cr_assert_str_eq(out, "");
}

Test(convert, unknown_thread_is_an_error)
{
	const char *sel[] = {"nosuch"};
	opts.threads = sel;
	opts.nthreads = 1;
	add(3, 0, 0, 0, 0, 0, 0);
	char err[256];
	cr_assert_eq(model_build(&m, &rec, 0), 0);
	cr_assert_eq(convert_init(&cx, &m, &opts, err, sizeof(err)), -1);
	cr_assert(strstr(err, "nosuch") && strstr(err, "42 main"), "%s", err);
	convert_free(&cx);
	model_free(&m);
}

/*
 * test_compact.c - rewriting a finished recording smaller (cli/compact.c).
 *
 * What is proved here: a compacted recording holds the same threads,
 * samples (times, stacks, triggers, merged counts, BLOCK fields), nodes,
 * metadata and end as the one the agent wrote, its CPU times within a step
 * and exact at each thread's last sample, its other counters exact, its allocation sites reduced to
 * the last snapshot of each; it is smaller.  A recording that has no END
 * (still being written), a damaged one, or something that is not a regular
 * file, is left exactly as it was.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compact.h"
#include "hookfn.h"
#include "packed.h"
#include "recording.h"
#include "rfile.h"

#define RNG_SEED 0x9e3779b97f4a7c15ull
#include "xorshift.h"

enum { THREADS = 3, PER_THREAD = 1200, PIECE = 100 };

/* A thread's samples a millisecond apart, as the agent takes them:
 * counters that grow, now and then a merged run or a BLOCK sample. */
static void make_thread(struct rhea_sample *v, uint32_t tid)
{
	uint64_t t = 5000000000ull;
	struct rhea_counters c = {0};
	for (int i = 0; i < PER_THREAD; i++) {
		struct rhea_sample *s = &v[i];
		memset(s, 0, sizeof(*s));
		s->h.kind = RHEA_E_SAMPLE;
		s->h.size = sizeof(*s);
		s->tid = tid;
		s->stack = 1 + (uint32_t)(rng() % 6);
		s->trigger = (uint16_t)(2 + s->stack);
		s->msgid = (uint32_t)(i / 3);
		t += 1000000 + rng() % 200000;
		s->begin_ns = t;
		s->c_begin = c;
		if (rng() % 5 == 0) { /* a merged run, or a wait */
			s->merged = (uint16_t)(1 + rng() % 5);
			t += rng() % 3000000;
			if (rng() % 2) {
				s->h.flags = RHEA_S_BLOCK;
				s->object = 0x7f0000001000ull + rng() % 64;
				s->waker_tid = tid + 1;
				s->release_ns = t - 1000;
			}
			c.cpu_ns += rng() % 400000;
			c.alloc_count += rng() % 100;
			c.alloc_bytes += rng() % 20000;
			c.nvcsw += (uint32_t)(rng() % 4);
			s->c_begin = c;
		}
		s->end_ns = t;
		c.cpu_ns += 100000 + rng() % 800000;
		uint64_t n = rng() % 300;
		c.alloc_count += n;
		c.alloc_bytes += n * (16 + rng() % 64);
		c.minflt += (uint32_t)(rng() % 8 == 0);
		c.nvcsw += (uint32_t)(rng() % 20);
		c.nivcsw += (uint32_t)(rng() % 3);
		s->c_end = c;
		if (!s->merged && !(s->h.flags & RHEA_S_BLOCK))
			s->c_begin = c;
	}
}

static struct rhea_sample samples[THREADS][PER_THREAD];
static uint32_t rec_pid = 200; /* the recording's process */

static size_t put_meta(uint8_t *p, const char *k, const char *v)
{
	size_t kl = strlen(k) + 1, vl = strlen(v) + 1, size = (8 + kl + vl + 7) & ~(size_t)7;
	memset(p, 0, size);
	struct rhea_entry h = {RHEA_E_META, 0, (uint32_t)size};
	memcpy(p, &h, 8);
	memcpy(p + 8, k, kl);
	memcpy(p + 8 + kl, v, vl);
	return size;
}

/* The recording as the agent writes it: chunk 0 metadata, threads and
 * nodes; then pieces of PIECE samples per thread (thread 1's pieces in
 * reverse order of chunks, as a busy shard can make them) with a SITES
 * snapshot each; then, with_end, the END. */
static void write_recording(const char *path, int with_end)
{
	for (int t = 0; t < THREADS; t++)
		make_thread(samples[t], 200 + (uint32_t)t);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	cr_assert(fd >= 0);
	struct rhea_file_header h = {.clock = RHEA_CLOCK_MONOTONIC, .pid = rec_pid, .start_ns = 1000,
				     .interval_ns = 1000000, .max_depth = 256};
	struct rfile_writer w;
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 1 << 20), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	static uint8_t buf[1 << 20] __attribute__((aligned(8)));
	size_t len = put_meta(buf, "command", "./demo --compact");
	for (int t = 0; t < THREADS; t++) {
		struct rhea_thread th = {{RHEA_E_THREAD, RHEA_T_START, sizeof(th)}, 200 + (uint32_t)t, 200, 1000, "worker"};
		memcpy(buf + len, &th, sizeof(th));
		len += sizeof(th);
	}
	struct rhea_nodes nh = {{RHEA_E_NODES, 0, sizeof(nh) + 6 * sizeof(struct rhea_node)}, 1, 6};
	memcpy(buf + len, &nh, sizeof(nh));
	len += sizeof(nh);
	for (uint32_t i = 1; i <= 6; i++) {
		struct rhea_node n = {0x401000 + i * 16, i > 1 ? i - 1 : 0, 0};
		memcpy(buf + len, &n, sizeof(n));
		len += sizeof(n);
	}
	cr_assert_eq(rfile_write_chunk(&w, buf, len, 1), 0);
	for (int k = 0; k < PER_THREAD / PIECE; k++) {
		len = 0;
		for (int t = 0; t < THREADS; t++) {
			int piece = t == 1 ? PER_THREAD / PIECE - 1 - k : k;
			const struct rhea_sample *p[PIECE];
			for (int i = 0; i < PIECE; i++)
				p[i] = &samples[t][piece * PIECE + i];
			size_t n = packed_encode(p, PIECE, buf + len, sizeof(buf) - len);
			cr_assert_gt(n, 0);
			len += n;
		}
		struct {
			struct rhea_sites h;
			struct rhea_site s[2];
		} sites = {{{RHEA_E_SITES, 0, sizeof(sites)}, 2, 0},
			   {{0x401234, 10u * (k + 1), 320u * (k + 1), 200, 1}, {0x405678, 3u * (k + 1), 90u * (k + 1), 201, 2}}};
		memcpy(buf + len, &sites, sizeof(sites));
		len += sizeof(sites);
		/* short calls: thread 200's reads grow each piece, its epoll_waits
		 * are in the first snapshot only */
		struct {
			struct rhea_shorts h;
			struct rhea_short s[2];
		} shorts = {{{RHEA_E_SHORTS, 0, sizeof(shorts)}, k ? 1 : 2, 0},
			    {{200, 1, RHEA_FN_READ, 0, 0, 100u * (k + 1), 7000u * (k + 1)},
			     {200, 1, RHEA_FN_EPOLL_WAIT, 0, 0, 5, 900}}};
		shorts.h.h.size = (uint32_t)(sizeof(shorts.h) + shorts.h.count * sizeof(shorts.s[0]));
		memcpy(buf + len, &shorts, shorts.h.h.size);
		len += shorts.h.h.size;
		if (k == 3) { /* more nodes later: 10..12 (7..9 never written) */
			struct rhea_nodes more = {{RHEA_E_NODES, 0, sizeof(more) + 3 * sizeof(struct rhea_node)}, 10, 3};
			memcpy(buf + len, &more, sizeof(more));
			len += sizeof(more);
			for (uint32_t i = 10; i <= 12; i++) {
				struct rhea_node n = {0x7f0000002000ull - i * 40, i == 10 ? 3 : i - 1, 0};
				memcpy(buf + len, &n, sizeof(n));
				len += sizeof(n);
			}
		}
		cr_assert_eq(rfile_write_chunk(&w, buf, len, 1), 0);
	}
	if (with_end) {
		struct rhea_end e = {{RHEA_E_END, 0, sizeof(e)}, 9000000000ull, RHEA_END_EXIT, 0};
		cr_assert_eq(rfile_write_chunk(&w, &e, sizeof(e), 1), 0);
	}
	rfile_writer_destroy(&w);
	close(fd);
}

static void load(const char *path, struct recording *r)
{
	char err[512];
	cr_assert_eq(recording_load(path, r, 0, err, sizeof(err)), 0, "%s: %s", path, err);
}

static void counters_us(uint64_t v[7], const struct rhea_counters *c)
{
	uint64_t x[7] = {c->cpu_ns / 1000, c->alloc_count, c->alloc_bytes, c->minflt, c->majflt, c->nvcsw, c->nivcsw};
	memcpy(v, x, sizeof(x));
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	char *b = malloc(*len + 1);
	cr_assert_eq(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

/* Entries of this kind in the file at path; for PACKED4, *most: the most
 * samples in one. */
static int kind_entries(const char *path, uint16_t kind, uint32_t *most)
{
	struct rfile_reader *r;
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	const void *pl;
	size_t len;
	int entries = 0;
	while (rfile_next_chunk(r, &pl, &len) == RFILE_OK) {
		size_t off = 0;
		const struct rhea_entry *en;
		while (rfile_next_entry(pl, len, &off, &en) == 1)
			if (en->kind == kind) {
				entries++;
				uint32_t n = ((const struct rhea_packed2 *)en)->count;
				if (kind == RHEA_E_PACKED4)
					*most = n > *most ? n : *most;
			}
	}
	rfile_close(r);
	return entries;
}

/* b, compacted from a, holds what a holds: the end, the threads and their
 * samples (the CPU time and the bytes allocated within a step, never
 * going down, exact at each thread's last sample; the rest exact),
 * nodes, metadata, sites.  Returns how many counters were stepped. */
static uint64_t check_same(struct recording *a, struct recording *b)
{
	cr_assert(b->have_end);
	cr_assert_eq(b->end.reason, RHEA_END_EXIT);
	cr_assert_eq(b->nthreads, THREADS);
	cr_assert_eq(b->nsamples, a->nsamples);
	cr_assert_eq(b->nmerged, a->nmerged);
	cr_assert_lt(b->nchunks, a->nchunks);
	cr_assert_eq(b->nmeta, 1);
	cr_assert_str_eq(recording_meta(b, "command"), "./demo --compact");
	cr_assert_eq(b->nsites, 2);
	cr_assert_eq(b->nsites, a->nsites);
	for (size_t i = 0; i < b->nsites; i++) {
		cr_assert_eq(b->sites[i].pc, a->sites[i].pc);
		cr_assert_eq(b->sites[i].count, a->sites[i].count);
		cr_assert_eq(b->sites[i].bytes, a->sites[i].bytes);
	}
	/* the short calls: the last snapshot of each (serial, fn) */
	cr_assert_eq(a->nshorts, 2);
	cr_assert_eq(b->nshorts, 2);
	for (size_t i = 0; i < b->nshorts; i++) {
		cr_assert_eq(b->shorts[i].fn, a->shorts[i].fn);
		cr_assert_eq(b->shorts[i].count, a->shorts[i].count);
		cr_assert_eq(b->shorts[i].ns, a->shorts[i].ns);
		cr_assert_eq(b->shorts[i].tid, 200);
	}
	cr_assert_eq(b->shorts[0].fn, RHEA_FN_READ);
	cr_assert_eq(b->shorts[0].count, 100u * (PER_THREAD / PIECE));
	cr_assert_eq(b->shorts[0].ns, 7000u * (PER_THREAD / PIECE));
	cr_assert_eq(b->shorts[1].fn, RHEA_FN_EPOLL_WAIT);
	cr_assert_eq(b->shorts[1].count, 5);
	for (uint32_t id = 0; id < 16; id++) {
		int known = (id >= 1 && id <= 6) || (id >= 10 && id <= 12);
		cr_assert_eq(a->nodes_known[id], known, "node %u", id);
		cr_assert_eq(b->nodes_known[id], known, "node %u", id);
		if (known) {
			cr_assert_eq(b->nodes[id].addr, a->nodes[id].addr, "node %u", id);
			cr_assert_eq(b->nodes[id].parent, a->nodes[id].parent, "node %u", id);
		}
	}
	uint64_t stepped = 0;
	for (int t = 0; t < THREADS; t++) {
		struct rec_thread *x = recording_thread(a, 200 + (uint32_t)t), *y = recording_thread(b, 200 + (uint32_t)t);
		cr_assert_not_null(y);
		cr_assert_str_eq(y->name, "worker");
		cr_assert_eq(y->nsamples, PER_THREAD);
		/* both sorted by begin (recording_load) */
		uint64_t prev[7] = {0};
		for (size_t i = 0; i < PER_THREAD; i++) {
			struct rhea_sample p = x->samples[i], q = y->samples[i];
			uint64_t te[7], de[7], tb[7], db[7];
			counters_us(te, &p.c_end);
			counters_us(de, &q.c_end);
			counters_us(tb, &p.c_begin);
			counters_us(db, &q.c_begin);
			for (int j = 0; j < 7; j++) {
				cr_assert_leq(de[j], te[j], "thread %d sample %zu counter %d above the truth", t, i, j);
				cr_assert_geq(de[j], prev[j], "thread %d sample %zu counter %d went down", t, i, j);
				cr_assert_geq(db[j], prev[j]);
				cr_assert_leq(db[j], de[j]);
				/* the CPU time and the bytes allocated within a
				 * step: 1/16 of differences of 1.2 ms and 44000
				 * bytes at most here; the others exact */
				uint64_t tol = j == 0 ? 1200 / 16 : j == 2 ? 44000 / 16 : 0;
				cr_assert_leq(te[j] - de[j], tol, "thread %d sample %zu counter %d off by %llu", t, i, j,
					      (unsigned long long)(te[j] - de[j]));
				/* (c_begin's step is 1/16 of the span it lies in;
				 * at an entry's first sample that is the whole
				 * counter, and it rounds to one end of its wait:
				 * off by at most the wait's own difference) */
				if (j == 2)
					cr_assert_leq(db[j] > tb[j] ? db[j] - tb[j] : tb[j] - db[j],
						      tol > te[j] - tb[j] ? tol : te[j] - tb[j],
						      "thread %d sample %zu c_begin %d off by more than a step", t, i, j);
				else if (j > 0)
					cr_assert_eq(db[j], tb[j], "thread %d sample %zu c_begin %d not exact", t, i, j);
				stepped += te[j] != de[j];
				prev[j] = de[j];
			}
			if (i + 1 == PER_THREAD)
				cr_assert_eq(memcmp(te, de, sizeof(te)), 0, "the thread's last counters are exact");
			memset(&p.c_begin, 0, 2 * sizeof(p.c_begin));
			memset(&q.c_begin, 0, 2 * sizeof(q.c_begin));
			cr_assert_eq(memcmp(&p, &q, sizeof(p)), 0, "thread %d sample %zu differs beyond its counters", t, i);
		}
	}
	return stepped;
}

Test(compact, same_recording_smaller)
{
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	write_recording(path, 1);
	cr_assert_eq(chmod(path, 0640), 0);
	struct recording a, b;
	load(path, &a);
	struct compact_result res;
	char err[512];
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	cr_assert_lt(res.bytes_after, res.bytes_before * 9 / 10, "%llu -> %llu bytes",
		     (unsigned long long)res.bytes_before, (unsigned long long)res.bytes_after);
	cr_assert_eq(res.samples, THREADS * PER_THREAD);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0640, "the file's mode is kept");
	cr_assert_eq((uint64_t)st.st_size, res.bytes_after);
	load(path, &b);
	/* the nodes coded small, one entry per run of ids */
	cr_assert_eq(kind_entries(path, RHEA_E_NODES, NULL), 0);
	cr_assert_eq(kind_entries(path, RHEA_E_NODES2, NULL), 2);

	uint64_t stepped = check_same(&a, &b);
	cr_assert_gt(stepped, 0, "no counter was stepped: the test tests nothing");

	/* Again: still whole, no bigger. */
	uint64_t once = res.bytes_after;
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	cr_assert_leq(res.bytes_after, once + 64);
	recording_free(&a);
	recording_free(&b);
	unlink(path);
}

/* A JIT's perf map (/tmp/perf-PID.map) written while the process ran: the
 * lines that name code on the recording's stacks are kept in it (META
 * perf_map, in the file's order, its path as perf_map_source), the others
 * are not; a recording that keeps one keeps it when compacted again. */
Test(compact, keeps_the_perf_map_lines_of_its_stacks)
{
	rec_pid = 3999997; /* (a pid unlikely to be in use) */
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%u.map", rec_pid);
	FILE *f = fopen(map, "w");
	cr_assert_not_null(f);
	/* nodes 10, 11, 12 are at ...1e70, ...1e48, ...1e20 (write_recording) */
	fputs("7f0000001e40 10 JS:*eleven\n"
	      "7f0000001e00 20 JS:*twelve\n" /* ends at node 12: its call */
	      "7f0000003000 40 JS:*unused\n"
	      "7f0000001e70 8 JS:*ten\n", f);
	fclose(f);
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	write_recording(path, 1);
	struct compact_result res;
	char err[512];
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	struct recording r;
	load(path, &r);
	const char *kept = recording_meta(&r, "perf_map");
	cr_assert_not_null(kept, "no perf map kept");
	cr_assert_str_eq(kept, "7f0000001e40 10 JS:*eleven\n7f0000001e00 20 JS:*twelve\n7f0000001e70 8 JS:*ten\n");
	cr_assert_str_eq(recording_meta(&r, "perf_map_source"), map);
	cr_assert_eq(recording_meta(&r, "command") != NULL, 1, "the other metadata is kept");
	recording_free(&r);
	/* the map changes (a later process of the same pid): kept as it was */
	f = fopen(map, "a");
	cr_assert_not_null(f);
	fputs("7f0000001e70 8 JS:*later\n", f);
	fclose(f);
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	load(path, &r);
	cr_assert_str_eq(recording_meta(&r, "perf_map"),
			 "7f0000001e40 10 JS:*eleven\n7f0000001e00 20 JS:*twelve\n7f0000001e70 8 JS:*ten\n");
	recording_free(&r);
	unlink(path);
	/* no map: nothing kept */
	unlink(map);
	write_recording(path, 1);
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	load(path, &r);
	cr_assert_null(recording_meta(&r, "perf_map"));
	recording_free(&r);
	unlink(path);
	rec_pid = 200;
}

/* Left exactly as it was: without an END, damaged, not a regular file. */
Test(compact, leaves_alone_what_it_must)
{
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	struct compact_result res;
	char err[512];
	size_t l1, l2;

	write_recording(path, 0);
	char *before = read_all(path, &l1);
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_SKIPPED);
	char *after = read_all(path, &l2);
	cr_assert(l1 == l2 && memcmp(before, after, l1) == 0, "a recording without its END was changed");
	free(before);
	free(after);

	write_recording(path, 1);
	before = read_all(path, &l1);
	before[l1 / 2] ^= 0x5a; /* a chunk in the middle */
	FILE *f = fopen(path, "wb");
	fwrite(before, 1, l1, f);
	fclose(f);
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_FAILED);
	cr_assert_neq(err[0], 0, "no reason given");
	after = read_all(path, &l2);
	cr_assert(l1 == l2 && memcmp(before, after, l1) == 0, "a damaged recording was changed");
	free(before);
	free(after);
	unlink(path);

	cr_assert_eq(compact_recording("/tmp", &res, err, sizeof(err)), COMPACT_SKIPPED);
	cr_assert_eq(compact_recording("/tmp/rhea-test-compact-none", &res, err, sizeof(err)), COMPACT_FAILED);
	/* and no temporary file left behind */
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ls %s.compact-* 2>/dev/null | grep -q .", path);
	cr_assert_neq(system(cmd), 0, "a temporary file was left behind");
}

/* Compact path, whose n samples must all stay: its PACKED4 entries, and
 * in *most the most samples in one. */
static int compact_counting(const char *path, uint64_t n, uint32_t *most)
{
	struct compact_result res;
	char err[512];
	cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	cr_assert_eq(res.samples, n);
	return kind_entries(path, RHEA_E_PACKED4, most);
}

/* The file the agent would write of one thread's samples v[0..n): a
 * PACKED2 entry of `piece` samples per chunk (zstd when compress), then
 * the END at end_ns. */
static void write_one_thread(const char *path, const struct rhea_sample *v, int n, int piece, int compress,
			     uint64_t end_ns)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	struct rhea_file_header h = {.clock = RHEA_CLOCK_MONOTONIC, .pid = v[0].tid, .interval_ns = 1000000};
	struct rfile_writer w;
	cr_assert_eq(rfile_writer_init(&w, fd, 1, 1 << 20), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	static uint8_t buf[1 << 20] __attribute__((aligned(8)));
	const struct rhea_sample **p = calloc((size_t)piece, sizeof(*p));
	for (int k = 0; k < n / piece; k++) {
		for (int i = 0; i < piece; i++)
			p[i] = &v[k * piece + i];
		size_t len = packed_encode(p, (uint32_t)piece, buf, sizeof(buf));
		cr_assert_gt(len, 0);
		cr_assert_eq(rfile_write_chunk(&w, buf, len, compress), 0);
	}
	struct rhea_end e = {{RHEA_E_END, 0, sizeof(e)}, end_ns, RHEA_END_EXIT, 0};
	cr_assert_eq(rfile_write_chunk(&w, &e, sizeof(e), compress), 0);
	rfile_writer_destroy(&w);
	close(fd);
	free(p);
}

/* A thread with more samples than one entry holds: several PACKED4
 * entries, every sample kept, the counters still in order across the
 * entries' seams. */
Test(compact, long_thread_in_several_entries)
{
	enum { N = 140000, PIECE2 = 1000 };
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	struct rhea_sample *v = calloc(N, sizeof(*v));
	struct rhea_counters c = {0};
	for (int i = 0; i < N; i++) {
		v[i].h = (struct rhea_entry){RHEA_E_SAMPLE, 0, sizeof(v[i])};
		v[i].tid = 300;
		v[i].stack = 1 + (uint32_t)(rng() % 4);
		v[i].begin_ns = v[i].end_ns = 1000000000ull + (uint64_t)i * 1000000;
		c.cpu_ns += 200000 + rng() % 600000;
		c.alloc_count += rng() % 50;
		v[i].c_begin = v[i].c_end = c;
	}
	write_one_thread(path, v, N, PIECE2, 1, 2000000000000ull);

	uint32_t most = 0;
	int entries = compact_counting(path, N, &most);
	cr_assert_eq(entries, (N + 65535) / 65536, "%d PACKED4 entries", entries);
	cr_assert_eq(most, 65536);
	struct recording b;
	load(path, &b);
	struct rec_thread *t = recording_thread(&b, 300);
	cr_assert_eq(t->nsamples, N);
	for (int i = 1; i < N; i++) {
		cr_assert_geq(t->samples[i].c_end.cpu_ns, t->samples[i - 1].c_end.cpu_ns, "sample %d went back", i);
		cr_assert_leq(t->samples[i].c_end.cpu_ns, v[i].c_end.cpu_ns / 1000 * 1000);
		/* within a step: differences of 0.8 ms at most, steps of 32 us
		 * at most, in every entry (each starts from the thread's whole
		 * CPU time, which says nothing of the next difference) */
		cr_assert_leq(v[i].c_end.cpu_ns / 1000 * 1000 - t->samples[i].c_end.cpu_ns, 32000,
			      "sample %d: CPU time %llu us below the truth", i,
			      (unsigned long long)(v[i].c_end.cpu_ns / 1000 - t->samples[i].c_end.cpu_ns / 1000));
		cr_assert_eq(t->samples[i].c_end.alloc_count, v[i].c_end.alloc_count);
	}
	cr_assert_eq(t->samples[N - 1].c_end.cpu_ns, v[N - 1].c_end.cpu_ns / 1000 * 1000);
	recording_free(&b);
	free(v);
	unlink(path);
}

/* Two threads of one tid, one after the other (the kernel reused it):
 * each life ends exact, its totals the truth.  Tid 400's second life
 * starts past the first's counters, which only its START tells; tid
 * 401's has no THREAD entries at all, its counters going back to zero
 * tell. */
Test(compact, each_life_of_a_reused_tid_ends_exact)
{
	enum { PER_LIFE = 300 };
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	struct rhea_file_header h = {.clock = RHEA_CLOCK_MONOTONIC, .pid = 400, .interval_ns = 1000000};
	struct rfile_writer w;
	cr_assert_eq(rfile_writer_init(&w, fd, 1, 1 << 20), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	static uint8_t buf[1 << 20] __attribute__((aligned(8)));
	static struct rhea_sample v[2][2][PER_LIFE]; /* [tid 400, 401][life] */
	const struct rhea_sample *p[PER_LIFE];
	for (int k = 0; k < 2; k++) {
		uint32_t tid = 400 + (uint32_t)k;
		for (int life = 0; life < 2; life++) {
			uint64_t t0 = 1000000000ull + (uint64_t)life * 2000000000ull;
			struct rhea_counters c = {0};
			if (life == 1 && k == 0) /* above all of the first life's */
				c = (struct rhea_counters){.cpu_ns = 900000000ull, .alloc_count = 90000,
							   .alloc_bytes = 90000000ull};
			struct rhea_thread ts = {{RHEA_E_THREAD, RHEA_T_START, sizeof(ts)}, tid, 1, t0 - 1000, "life"};
			struct rhea_thread te = {{RHEA_E_THREAD, RHEA_T_EXIT, sizeof(te)}, tid, 0,
						 t0 + (PER_LIFE + 1) * 1000000ull, "life"};
			if (k == 0)
				cr_assert_eq(rfile_write_chunk(&w, &ts, sizeof(ts), 1), 0);
			for (int i = 0; i < PER_LIFE; i++) {
				struct rhea_sample *x = &v[k][life][i];
				x->h = (struct rhea_entry){RHEA_E_SAMPLE, 0, sizeof(*x)};
				x->tid = tid;
				x->stack = 1 + (uint32_t)(rng() % 4);
				x->begin_ns = x->end_ns = t0 + (uint64_t)i * 1000000 + rng() % 300000;
				c.cpu_ns += 200000 + rng() % 600000;
				c.alloc_count += rng() % 50;
				c.alloc_bytes += (rng() % 50) * (16 + rng() % 4000);
				x->c_begin = x->c_end = c;
				p[i] = x;
			}
			size_t len = packed_encode(p, PER_LIFE, buf, sizeof(buf));
			cr_assert_gt(len, 0);
			cr_assert_eq(rfile_write_chunk(&w, buf, len, 1), 0);
			if (k == 0)
				cr_assert_eq(rfile_write_chunk(&w, &te, sizeof(te), 1), 0);
		}
	}
	struct rhea_end e = {{RHEA_E_END, 0, sizeof(e)}, 9000000000ull, RHEA_END_EXIT, 0};
	cr_assert_eq(rfile_write_chunk(&w, &e, sizeof(e), 1), 0);
	rfile_writer_destroy(&w);
	close(fd);

	uint32_t most = 0;
	cr_assert_eq(compact_counting(path, 4 * PER_LIFE, &most), 4, "one PACKED4 entry a life");
	struct recording b;
	load(path, &b);
	for (int k = 0; k < 2; k++)
		for (int life = 0; life < 2; life++) {
			const struct rhea_sample *want = &v[k][life][PER_LIFE - 1], *got = NULL;
			for (size_t j = 0; j < b.nthreads; j++) {
				const struct rec_thread *t = &b.threads[j];
				for (size_t i = 0; t->tid == want->tid && i < t->nsamples; i++)
					if (t->samples[i].begin_ns / 1000 == want->begin_ns / 1000)
						got = &t->samples[i];
			}
			cr_assert_not_null(got, "tid %u life %d: its last sample", want->tid, life);
			cr_assert_eq(got->c_end.cpu_ns, want->c_end.cpu_ns / 1000 * 1000, "tid %u life %d", want->tid, life);
			cr_assert_eq(got->c_end.alloc_count, want->c_end.alloc_count, "tid %u life %d", want->tid, life);
			cr_assert_eq(got->c_end.alloc_bytes, want->c_end.alloc_bytes, "tid %u life %d: %llu bytes, not %llu",
				     want->tid, life, (unsigned long long)got->c_end.alloc_bytes,
				     (unsigned long long)want->c_end.alloc_bytes);
		}
	recording_free(&b);
	unlink(path);
}

/* Samples so unlike each other that ENTRY_SAMPLES of them do not fit one
 * 4 MB chunk: the entry is split until it does, and every sample stays. */
Test(compact, entries_larger_than_a_chunk_are_split)
{
	enum { N = 70000, PIECE2 = 500 };
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	struct rhea_sample *v = calloc(N, sizeof(*v));
	struct rhea_counters c = {0};
	uint64_t t = 1000000000ull;
	for (int i = 0; i < N; i++) {
		v[i].h = (struct rhea_entry){RHEA_E_SAMPLE, (uint16_t)(rng() % 2 ? RHEA_S_BLOCK : 0), sizeof(v[i])};
		v[i].tid = 400;
		v[i].stack = (uint32_t)(rng() >> 33);
		v[i].trigger = (uint16_t)(rng() % 60);
		v[i].msgid = (uint32_t)rng();
		v[i].merged = (uint16_t)(rng() % 1000);
		t += rng() % (1ull << 36);
		v[i].begin_ns = t;
		t += rng() % (1ull << 30);
		v[i].end_ns = t;
		v[i].object = rng();
		v[i].waker_tid = (uint32_t)rng();
		v[i].owner_tid = (uint32_t)rng();
		v[i].waker_stack = (uint32_t)rng();
		v[i].c_begin = c;
		c.cpu_ns += rng() % (1ull << 40);
		c.alloc_count += rng() >> 2; /* (these two may wrap) */
		c.alloc_bytes += rng() >> 1;
		c.minflt += (uint32_t)(rng() % 60000);
		c.nvcsw += (uint32_t)(rng() % 60000);
		c.nivcsw += (uint32_t)(rng() % 60000);
		v[i].c_end = c;
	}
	write_one_thread(path, v, N, PIECE2, 0, t);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_gt(st.st_size, 4 << 20, "the samples take %lld bytes: too few to need a split",
		     (long long)st.st_size);

	uint32_t most = 0;
	int entries = compact_counting(path, N, &most);
	cr_assert_gt(entries, 1, "%d PACKED4 entries", entries);
	cr_assert_lt(most, 65536, "an entry of %u samples: the first was not split", most);
	struct recording b;
	load(path, &b);
	cr_assert_eq(recording_thread(&b, 400)->nsamples, N);
	recording_free(&b);
	free(v);
	unlink(path);
}

/* Compacted holding at most a window of samples in memory: threads whose
 * samples pass it go to the spill early, in several runs of entries; the
 * recording holds what it held, about as small as compacted in one go. */
Test(compact, window_spills_and_keeps_everything)
{
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	write_recording(path, 1);
	struct recording a, b, one;
	load(path, &a);
	char copy[sizeof(path) + 8];
	snprintf(copy, sizeof(copy), "%s.one", path);
	size_t len;
	char *bytes = read_all(path, &len);
	FILE *f = fopen(copy, "wb");
	cr_assert_eq(fwrite(bytes, 1, len, f), len);
	fclose(f);
	free(bytes);
	struct compact_result res, res1;
	char err[512];
	cr_assert_eq(compact_recording(copy, &res1, err, sizeof(err)), COMPACT_DONE, "%s", err);
	/* 3600 samples through a window of 500: seven spills at least */
	cr_assert_eq(compact_recording_window(path, 500, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	cr_assert_eq(res.samples, THREADS * PER_THREAD);
	load(path, &b);
	uint64_t stepped = check_same(&a, &b);
	cr_assert_gt(stepped, 0, "no counter was stepped: the test tests nothing");
	load(copy, &one);
	cr_assert_eq(one.nsamples, b.nsamples);
	cr_assert_lt(res.bytes_after, res.bytes_before * 9 / 10, "%llu -> %llu bytes",
		     (unsigned long long)res.bytes_before, (unsigned long long)res.bytes_after);
	cr_assert_lt(res.bytes_after, res1.bytes_after * 6 / 5, "windowed %llu bytes, in one go %llu",
		     (unsigned long long)res.bytes_after, (unsigned long long)res1.bytes_after);
	uint32_t most = 0;
	int entries = kind_entries(path, RHEA_E_PACKED4, &most);
	cr_assert_geq(entries, 7, "%d PACKED4 entries: the window did not spill", entries);
	cr_assert_leq(most, 500, "an entry of %u samples, more than the window", most);
	recording_free(&a);
	recording_free(&b);
	recording_free(&one);
	unlink(path);
	unlink(copy);
}

/* rhea record's summary line loads the counts alone: the same counts as a
 * full load, no samples kept (in memory whatever the length). */
Test(compact, counts_only_load_counts_the_same)
{
	char path[] = "/tmp/rhea-test-compact.XXXXXX";
	close(mkstemp(path));
	write_recording(path, 1);
	for (int pass = 0; pass < 2; pass++) { /* as the agent wrote it, then compacted */
		struct recording a, c;
		char err[512];
		load(path, &a);
		cr_assert_eq(recording_load_counts(path, &c, 1, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(c.nsamples, a.nsamples);
		cr_assert_eq(c.nsamples, THREADS * PER_THREAD);
		cr_assert_eq(c.nmerged, a.nmerged);
		cr_assert_eq(c.first_ns, a.first_ns);
		cr_assert_eq(c.last_ns, a.last_ns);
		cr_assert_eq(c.nthreads, a.nthreads);
		cr_assert_eq(c.have_end, a.have_end);
		for (size_t i = 0; i < c.nthreads; i++) {
			struct rec_thread *x = recording_thread(&a, c.threads[i].tid);
			cr_assert_not_null(x);
			cr_assert_eq(c.threads[i].nsamples, x->nsamples);
			cr_assert_null(c.threads[i].samples);
		}
		recording_free(&a);
		recording_free(&c);
		struct compact_result res;
		cr_assert_eq(compact_recording(path, &res, err, sizeof(err)), COMPACT_DONE, "%s", err);
	}
	unlink(path);
}

/*
 * test_recording.c - loading a recording (analysis/recording.c).
 *
 * What is proved here: entries are taken by their times, not by where they
 * sit in the file.  The agent's shards seal chunks in any order (a thread
 * whose own shard is busy writes through another), so a thread's NAME can
 * reach the file before its START; the CI saw exactly that on a loaded
 * machine ("allocator" reported under its parent's name).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recording.h"
#include "rfile.h"

static void thread_entry(struct rhea_thread *e, unsigned event, uint32_t tid, uint64_t t,
			 const char *name)
{
	memset(e, 0, sizeof(*e));
	e->h.kind = RHEA_E_THREAD;
	e->h.flags = (uint16_t)event;
	e->h.size = sizeof(*e);
	e->tid = tid;
	e->time_ns = t;
	snprintf(e->name, sizeof(e->name), "%s", name);
}

/* Entries of any kinds, one chunk each, in the order given. */
static void load_mixed(const void *const *es, const size_t *sizes, int n, struct recording *r)
{
	char path[64] = "/tmp/rhea-test-recording.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	struct rhea_file_header h = {
		.clock = RHEA_CLOCK_MONOTONIC, .pid = 100, .start_ns = 1000, .interval_ns = 1000000, .max_depth = 256,
	};
	struct rfile_writer w;
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 4096), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(rfile_write_chunk(&w, es[i], sizes[i], i & 1), 0); /* stored and compressed */
	rfile_writer_destroy(&w);
	close(fd);
	char err[512];
	int st = recording_load(path, r, 0, err, sizeof(err));
	unlink(path);
	cr_assert_eq(st, 0, "recording_load: %s", err);
}

/* Load a recording of chunks, each holding one entry (n of them, size
 * bytes apart), in the order given. */
static void load_any(const void *es, size_t size, int n, struct recording *r)
{
	const void **ptrs = calloc((size_t)n + 1, sizeof(*ptrs));
	size_t *sizes = calloc((size_t)n + 1, sizeof(*sizes));
	cr_assert(ptrs && sizes);
	for (int i = 0; i < n; i++) {
		ptrs[i] = (const char *)es + (size_t)i * size;
		sizes[i] = size;
	}
	load_mixed(ptrs, sizes, n, r);
	free(ptrs);
	free(sizes);
}

static void load_entries(const struct rhea_thread *es, int n, struct recording *r)
{
	load_any(es, sizeof(*es), n, r);
}

Test(recording, thread_name_by_time_not_file_order)
{
	struct rhea_thread es[4];
	/* tid 101 renamed itself (NAME at 3000) right after it started and
	 * exited; its START (named after the parent, as /proc showed it)
	 * landed last. */
	thread_entry(&es[0], RHEA_T_NAME, 101, 3000, "allocator");
	thread_entry(&es[1], RHEA_T_EXIT, 101, 9000, "allocator");
	thread_entry(&es[2], RHEA_T_START, 100, 1000, "known");
	thread_entry(&es[3], RHEA_T_START, 101, 2000, "known");
	struct recording r;
	load_entries(es, 4, &r);
	struct rec_thread *t = recording_thread(&r, 101);
	cr_assert_not_null(t);
	cr_assert_str_eq(t->name, "allocator");
	cr_assert_eq(t->start_ns, 2000);
	cr_assert_eq(t->exit_ns, 9000);
	cr_assert_str_eq(recording_thread(&r, 100)->name, "known");
	recording_free(&r);
}

Test(recording, later_rename_wins_in_either_order)
{
	struct rhea_thread es[3];
	thread_entry(&es[0], RHEA_T_NAME, 7, 5000, "second");
	thread_entry(&es[1], RHEA_T_NAME, 7, 4000, "first");
	thread_entry(&es[2], RHEA_T_START, 7, 3000, "parent");
	struct recording r;
	load_entries(es, 3, &r);
	cr_assert_str_eq(recording_thread(&r, 7)->name, "second");
	recording_free(&r);
}

static void wait_sample(struct rhea_sample *s, unsigned flags, uint64_t begin, uint64_t end)
{
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.flags = (uint16_t)flags;
	s->h.size = sizeof(*s);
	s->tid = 100;
	s->trigger = 22; /* read */
	s->object = 3;
	s->begin_ns = begin;
	s->end_ns = end;
}

/* What fdlowest left on a loaded machine (--force-after 2ms, a read of a
 * second): so-fars every few ms, their begins converted 1 us apart in two
 * groups, the call's own sample sorted between the groups.  The last
 * so-far of the later group was kept, its neighbours no cover of it: the
 * wait counted twice.  One wait; a so-far of a later wait, cut short by
 * the end, stays. */
Test(recording, wait_so_far_superseded_across_begin_groups)
{
	struct rhea_sample s[12];
	int n = 0;
	for (int i = 0; i < 5; i++) /* begin 25.000 ms, ends 100, 200 .. 500 ms */
		wait_sample(&s[n++], RHEA_S_BLOCK | RHEA_S_ASYNC, 25000000, 100000000ull * (unsigned)(i + 1));
	wait_sample(&s[n++], RHEA_S_BLOCK, 25000000, 1100000000); /* the call's own */
	for (int i = 0; i < 5; i++) /* begin 25.001 ms, ends 600 .. 1000 ms */
		wait_sample(&s[n++], RHEA_S_BLOCK | RHEA_S_ASYNC, 25001000, 100000000ull * (unsigned)(i + 6));
	wait_sample(&s[n++], RHEA_S_BLOCK | RHEA_S_ASYNC, 1200000000, 1300000000);
	struct recording r;
	load_any(s, sizeof(s[0]), n, &r);
	struct rec_thread *t = recording_thread(&r, 100);
	cr_assert_not_null(t);
	cr_assert_eq(t->nsamples, 2, "%zu samples kept, want the call's own and the last wait's", t->nsamples);
	cr_assert_eq(t->samples[0].h.flags, RHEA_S_BLOCK);
	cr_assert_eq(t->samples[0].end_ns, 1100000000);
	cr_assert_eq(t->samples[1].begin_ns, 1200000000);
	recording_free(&r);
}

/* A so-far 2 ms from any cover is another wait: kept. */
Test(recording, wait_so_far_kept_when_far)
{
	struct rhea_sample s[2];
	wait_sample(&s[0], RHEA_S_BLOCK, 25000000, 1100000000);
	wait_sample(&s[1], RHEA_S_BLOCK | RHEA_S_ASYNC, 27000000, 1068000000);
	struct recording r;
	load_any(s, sizeof(s[0]), 2, &r);
	cr_assert_eq(recording_thread(&r, 100)->nsamples, 2);
	recording_free(&r);
}

/* A sample of one capture at t (ns) whose CPU reading is cpu (ns). */
static void cpu_sample(struct rhea_sample *s, uint64_t begin, uint64_t end, uint64_t cpu_begin, uint64_t cpu_end)
{
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_SAMPLE;
	s->h.size = sizeof(*s);
	s->tid = 100;
	s->begin_ns = begin;
	s->end_ns = end;
	s->c_begin.cpu_ns = cpu_begin;
	s->c_end.cpu_ns = cpu_end;
}

/* A thread computing all along, its count lagging 3 ms until a context
 * switch at 10 ms brought it up to date: the interval with the switch had
 * 4 ms of CPU in 1 ms.  The excess goes back to the readings before it,
 * each interval gets no more CPU than wall, the last reading stays. */
Test(recording, cpu_lag_moved_back_to_where_it_was_spent)
{
	struct rhea_sample s[4];
	const uint64_t ms = 1000000;
	cpu_sample(&s[0], 1 * ms, 3 * ms, 0, 0);          /* lag: read 0 at 1 ms and 3 ms */
	cpu_sample(&s[1], 5 * ms, 9 * ms, 2 * ms, 6 * ms); /* 3 ms behind */
	cpu_sample(&s[2], 10 * ms, 10 * ms, 10 * ms, 10 * ms); /* caught up */
	cpu_sample(&s[3], 12 * ms, 12 * ms, 12 * ms, 12 * ms);
	recording_bound_cpu(s, 4);
	cr_assert_eq(s[3].c_end.cpu_ns, 12 * ms);
	cr_assert_eq(s[2].c_begin.cpu_ns, 10 * ms);
	cr_assert_eq(s[1].c_end.cpu_ns, 9 * ms, "%llu", (unsigned long long)s[1].c_end.cpu_ns);
	cr_assert_eq(s[1].c_begin.cpu_ns, 5 * ms);
	cr_assert_eq(s[0].c_end.cpu_ns, 3 * ms);
	cr_assert_eq(s[0].c_begin.cpu_ns, 1 * ms);
}

/* Readings that are consistent (a thread that waited, then computed)
 * are left as they were; out of order samples (a wait and a capture from
 * outside while it lasted) are bounded in time order. */
Test(recording, cpu_consistent_readings_untouched)
{
	struct rhea_sample s[3];
	const uint64_t ms = 1000000;
	cpu_sample(&s[0], 1 * ms, 8 * ms, 1 * ms, 1 * ms); /* a wait of 7 ms */
	cpu_sample(&s[1], 4 * ms, 4 * ms, 1 * ms, 1 * ms); /* taken from outside during it */
	cpu_sample(&s[2], 9 * ms, 9 * ms, 2 * ms, 2 * ms);
	recording_bound_cpu(s, 3);
	cr_assert_eq(s[0].c_begin.cpu_ns, 1 * ms);
	cr_assert_eq(s[0].c_end.cpu_ns, 1 * ms);
	cr_assert_eq(s[1].c_begin.cpu_ns, 1 * ms);
	cr_assert_eq(s[2].c_begin.cpu_ns, 2 * ms);
	/* the same wait ending in a reading 5 ms ahead of the one from
	 * outside at 4 ms: that one is raised (6 ms in 4 ms of the clock) */
	cpu_sample(&s[0], 1 * ms, 8 * ms, 1 * ms, 6 * ms);
	cpu_sample(&s[1], 4 * ms, 4 * ms, 1 * ms, 1 * ms);
	recording_bound_cpu(s, 3);
	cr_assert_eq(s[1].c_begin.cpu_ns, 2 * ms);
	cr_assert_eq(s[0].c_begin.cpu_ns, 1 * ms);
}

/* Tid 200 twice (the kernel gave it again): two threads, each with its
 * name, span and samples, whatever the order of the entries in the file;
 * tid 300, one life, stays one. */
Test(recording, a_reused_tid_is_two_threads)
{
	const uint64_t ms = 1000000;
	struct rhea_thread th[7];
	thread_entry(&th[0], RHEA_T_START, 200, 1 * ms, "first");
	thread_entry(&th[1], RHEA_T_EXIT, 200, 3 * ms, "first");
	thread_entry(&th[2], RHEA_T_START, 200, 10 * ms, "second");
	thread_entry(&th[3], RHEA_T_NAME, 200, 11 * ms, "renamed");
	thread_entry(&th[4], RHEA_T_EXIT, 200, 13 * ms, "renamed");
	thread_entry(&th[5], RHEA_T_START, 300, 1 * ms, "other");
	thread_entry(&th[6], RHEA_T_NAME, 300, 12 * ms, "other2");
	struct rhea_sample s[4];
	for (int i = 0; i < 4; i++)
		wait_sample(&s[i], 0, 0, 0);
	s[0].tid = 200, s[0].begin_ns = s[0].end_ns = 2 * ms;
	s[1].tid = 200, s[1].begin_ns = 12 * ms, s[1].end_ns = 12500000;
	s[2].tid = 200, s[2].begin_ns = s[2].end_ns = 11 * ms;
	s[3].tid = 300, s[3].begin_ns = s[3].end_ns = 5 * ms;
	/* the second life's entries first, as shards may seal them */
	const void *es[] = {&th[2], &s[1], &th[3], &th[4], &th[0], &s[0], &s[2], &th[1], &th[5], &s[3], &th[6]};
	size_t sizes[11];
	for (int i = 0; i < 11; i++)
		sizes[i] = ((const struct rhea_entry *)es[i])->size;
	struct recording r;
	load_mixed(es, sizes, 11, &r);
	cr_assert_eq(r.nthreads, 3, "%zu threads, want 200 twice and 300", r.nthreads);
	const struct rec_thread *a = NULL, *b = NULL, *o = NULL;
	for (size_t i = 0; i < r.nthreads; i++) {
		const struct rec_thread *t = &r.threads[i];
		if (t->tid == 300)
			o = t;
		else if (t->start_ns == 1 * ms)
			a = t;
		else
			b = t;
	}
	cr_assert(a && b && o);
	cr_assert_str_eq(a->name, "first");
	cr_assert_eq(a->exit_ns, 3 * ms);
	cr_assert_eq(a->nsamples, 1);
	cr_assert_eq(a->samples[0].begin_ns, 2 * ms);
	cr_assert_str_eq(b->name, "renamed");
	cr_assert_eq(b->start_ns, 10 * ms);
	cr_assert_eq(b->exit_ns, 13 * ms);
	cr_assert_eq(b->nsamples, 2);
	cr_assert_eq(b->samples[0].begin_ns, 11 * ms, "the second life's samples in time order");
	cr_assert_str_eq(o->name, "other2");
	cr_assert_eq(o->nsamples, 1);
	/* which life a tid is at a moment (a wake's waker): the latest begun
	 * by then, else the first */
	cr_assert_eq(&r.threads[recording_life_at(&r, 200, 0)], a, "before both: the first");
	cr_assert_eq(&r.threads[recording_life_at(&r, 200, 5 * ms)], a, "between: the first, ended");
	cr_assert_eq(&r.threads[recording_life_at(&r, 200, 10 * ms)], b);
	cr_assert_eq(&r.threads[recording_life_at(&r, 200, 20 * ms)], b);
	cr_assert_eq(&r.threads[recording_life_at(&r, 300, 20 * ms)], o);
	cr_assert_eq(recording_life_at(&r, 400, 5 * ms), r.nthreads, "no such tid");
	recording_free(&r);
}

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

/* Load a recording of chunks, each holding one entry (n of them, size
 * bytes apart), in the order given. */
static void load_any(const void *es, size_t size, int n, struct recording *r)
{
	char path[64] = "/tmp/rhea-test-recording.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	struct rhea_file_header h = {
		.clock = RHEA_CLOCK_MONOTONIC,
		.pid = 100,
		.start_ns = 1000,
		.interval_ns = 1000000,
		.max_depth = 256,
	};
	struct rfile_writer w;
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 4096), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(rfile_write_chunk(&w, (const char *)es + (size_t)i * size, size, i & 1), 0);
	rfile_writer_destroy(&w);
	close(fd);
	char err[512];
	int st = recording_load(path, r, 0, err, sizeof(err));
	unlink(path);
	cr_assert_eq(st, 0, "recording_load: %s", err);
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

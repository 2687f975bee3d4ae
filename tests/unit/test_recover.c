/*
 * Unit tests of the salvage region end to end in one process: the agent's
 * side (agent/salvage.c, buf.c, stacktab.c lay it out in a memfd named as
 * rhea record names it) and rhea record's (cli/recover.c reads it back into
 * a recording).  What the agent had buffered comes back exactly once;
 * what the region says is already in the file does not; a region a program
 * scribbled on is read up to the damage without crashing.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "paths.h"
#include "recover.h"
#include "rfile.h"

struct region {
	int memfd;
	char path[64];
	int fd;
	struct rfile_writer w;
	struct buf b;
	struct stacktab st;
	struct rhea_salvage_pend *pend;
	struct rhea_salvage_sites *sites; /* 4 tables */
	uint64_t at; /* where the file ends */
};

/* path into the region, as the name of the file open on fd. */
static void name_in_region(const char *path, int fd)
{
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	salvage_name(path, st.st_dev, st.st_ino);
}

/* A recording file with a header and one chunk, and a fresh region. */
static void setup(struct region *r)
{
	memset(r, 0, sizeof(*r));
	r->memfd = memfd_create(RHEA_SALVAGE_NAME, 0);
	cr_assert_geq(r->memfd, 0);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), r->memfd);
	setenv(RHEA_SALVAGE_ENV, path, 1);
	void *bm, *nm;
	cr_assert_not_null(salvage_region(SALVAGE_INHERITED, buf_bytes(4, 4096), 64 * sizeof(struct stacktab_node), 8, 4,
					  &bm, &nm, &r->pend, &r->sites));
	cr_assert(salvage_shared(), "the region is not the memfd");
	cr_assert_eq(buf_init_at(&r->b, bm, 4, 4096, 1), 0);
	r->b.keep_drained = 1;
	cr_assert_eq(stacktab_init_at(&r->st, nm, 64), 0);
	snprintf(r->path, sizeof(r->path), "/tmp/rhea-recover-XXXXXX");
	r->fd = mkstemp(r->path);
	cr_assert_geq(r->fd, 0);
	cr_assert_eq(rfile_writer_init(&r->w, r->fd, 0, 1u << 20), 0);
	struct rhea_file_header h;
	memset(&h, 0, sizeof(h));
	cr_assert_eq(rfile_write_header(&r->w, &h), 0);
	struct rhea_meta m;
	memset(&m, 0, sizeof(m));
	m.h.kind = RHEA_E_META;
	m.h.size = sizeof(m);
	cr_assert_eq(rfile_write_chunk(&r->w, &m, sizeof(m), 0), 0);
	r->at = (uint64_t)lseek(r->fd, 0, SEEK_CUR);
	salvage_publish(&r->b, 64);
	name_in_region(r->path, r->fd);
}

static void teardown(struct region *r)
{
	rfile_writer_destroy(&r->w);
	close(r->fd);
	unlink(r->path);
	close(r->memfd);
	unsetenv(RHEA_SALVAGE_ENV);
}

static void emit_sample(struct region *r, uint32_t tid, uint64_t t, uint32_t stack)
{
	struct rhea_sample s;
	memset(&s, 0, sizeof(s));
	s.h.kind = RHEA_E_SAMPLE;
	s.h.size = sizeof(s);
	s.tid = tid;
	s.begin_ns = s.end_ns = t;
	s.stack = stack;
	cr_assert_eq(buf_emit(&r->b, tid, &s, sizeof(s)), 0);
}

struct counts {
	long samples, nodes, node_entries;
	long sites;                         /* sites in SITES entries */
	uint64_t site_count, site_bytes;    /* their sums */
	uint64_t site_pc_sum, site_tid_sum; /* (tid + serial per site) */
	uint64_t times; /* sum of begin_ns */
	uint64_t node_addr_sum;
};

static int drop(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return 0;
}

/* Recover into the file, then count what this recovery added. */
static long recover(struct region *r, struct counts *c)
{
	struct recover_view v;
	cr_assert_eq(recover_open(r->memfd, getpid(), &v), 0);
	cr_assert(recover_is_for(&v, r->path));
	uint64_t from = r->at;
	lseek(r->fd, (off_t)from, SEEK_SET);
	long n = recover_append(&v, &r->w, from);
	recover_close(&v);
	memset(c, 0, sizeof(*c));
	struct rfile_reader *rd;
	cr_assert_eq(rfile_open(r->path, &rd), RFILE_OK);
	const void *p;
	size_t len;
	for (;;) {
		uint64_t off_chunk = rfile_offset(rd);
		if (rfile_next_chunk(rd, &p, &len) != RFILE_OK)
			break;
		if (off_chunk < from)
			continue;
		size_t off = 0;
		const struct rhea_entry *e;
		while (rfile_next_entry(p, len, &off, &e) == 1) {
			if (e->kind == RHEA_E_SAMPLE) {
				c->samples++;
				c->times += ((const struct rhea_sample *)e)->begin_ns;
			} else if (e->kind == RHEA_E_SITES) {
				const struct rhea_sites *ss = (const void *)e;
				const struct rhea_site *st = (const void *)(ss + 1);
				cr_assert_eq(e->size, sizeof(*ss) + ss->count * sizeof(*st));
				for (uint32_t i = 0; i < ss->count; i++) {
					c->sites++;
					c->site_count += st[i].count;
					c->site_bytes += st[i].bytes;
					c->site_pc_sum += st[i].pc;
					c->site_tid_sum += st[i].tid + st[i].serial;
				}
			} else if (e->kind == RHEA_E_NODES) {
				const struct rhea_nodes *ns = (const void *)e;
				const struct rhea_node *nd = (const void *)(ns + 1);
				c->node_entries++;
				c->nodes += ns->count;
				for (uint32_t i = 0; i < ns->count; i++)
					c->node_addr_sum += nd[i].addr;
			}
		}
	}
	rfile_close(rd);
	/* the next recovery appends after this one */
	r->at = (uint64_t)lseek(r->fd, 0, SEEK_END);
	return n;
}

/* A site table as a thread fills it (capture.c, site_add). */
static void put_site(struct rhea_salvage_sites *t, uint16_t slot, uint64_t pc, uint64_t count, uint64_t bytes)
{
	t->site[slot] = (struct rhea_salvage_site){pc, count, bytes};
	t->used[t->nused++] = slot;
}

/* The stack 0x1000 -> 0x2000 -> 0x3000 interned: its leaf (3 nodes). */
static uint32_t three_frames(struct region *r)
{
	uint64_t addrs[3] = {0x1000, 0x2000, 0x3000};
	uint32_t ids[3];
	uint32_t leaf = stacktab_intern(&r->st, 0, addrs, 3, ids);
	cr_assert_neq(leaf, 0);
	return leaf;
}

/* Thread slot i's pending sample, begun at begin, valid. */
static void set_pending(struct region *r, int i, uint64_t begin)
{
	r->pend[i].s.h.kind = RHEA_E_SAMPLE;
	r->pend[i].s.h.size = sizeof(struct rhea_sample);
	r->pend[i].s.begin_ns = begin;
	r->pend[i].valid = 1;
}

Test(recover, buffered_nodes_and_pending_once)
{
	struct region r;
	setup(&r);
	uint32_t leaf = three_frames(&r);
	for (uint64_t t = 1; t <= 5; t++)
		emit_sample(&r, 7, t, leaf);
	/* a pending sample, and one being changed when the thread died */
	set_pending(&r, 0, 100);
	r.pend[1] = r.pend[0];
	r.pend[1].busy = 1;
	struct counts c;
	cr_assert_eq(recover(&r, &c), 6);
	cr_assert_eq(c.samples, 6);
	cr_assert_eq(c.times, 1 + 2 + 3 + 4 + 5 + 100);
	cr_assert_eq(c.nodes, 3);
	cr_assert_eq(c.node_addr_sum, 0x6000);
	teardown(&r);
}

/* rhea attach again (agent.c, agent_restart): the region moves into a new
 * memfd at the same address.  What a recovery from that memfd finds is
 * the stack table's nodes (kept: the new recording writes them all), the
 * samples buffered since and nothing of before: no old sample, pending
 * sample or site table. */
Test(recover, renewed_region_keeps_the_nodes_alone)
{
	struct region r;
	setup(&r);
	uint32_t leaf = three_frames(&r);
	for (uint64_t t = 1; t <= 4; t++)
		emit_sample(&r, 7, t, leaf);
	set_pending(&r, 0, 100);
	r.sites[0].tid = 7;
	put_site(&r.sites[0], 3, 0x4242, 9, 90);
	struct rhea_salvage_pend *pend_at = r.pend;
	struct stat before, after;
	cr_assert_eq(fstat(r.memfd, &before), 0);
	salvage_close_fd(); /* as the detach leaves it */
	cr_assert_eq(salvage_renew(&r.b, r.st.next_id), 0);
	int fd = salvage_fd_number();
	cr_assert_geq(fd, 0, "no memfd of its own after the renewal");
	cr_assert_eq(fstat(fd, &after), 0);
	cr_assert_neq(after.st_ino, before.st_ino, "the renewed region is still in the old memfd");
	cr_assert_eq(r.pend, pend_at);
	cr_assert_eq(r.pend[0].valid, 0, "the old pending sample survived the renewal");
	cr_assert_eq(r.sites[0].nused, 0, "the old site table survived the renewal");
	/* the same stack interns to the same node: the table is whole */
	cr_assert_eq(three_frames(&r), leaf);
	buf_reset(&r.b);
	salvage_publish(&r.b, 64);
	name_in_region(r.path, r.fd);
	for (uint64_t t = 10; t <= 12; t++)
		emit_sample(&r, 7, t, leaf);
	close(r.memfd);
	r.memfd = dup(fd);
	struct counts c;
	recover(&r, &c);
	cr_assert_eq(c.samples, 3, "%ld samples recovered, want the 3 after the renewal", c.samples);
	cr_assert_eq(c.times, 10 + 11 + 12);
	cr_assert_eq(c.nodes, 3);
	cr_assert_eq(c.node_addr_sum, 0x6000);
	cr_assert_eq(c.sites, 0, "%ld sites recovered, want none", c.sites);
	salvage_close_fd();
	teardown(&r);
}


Test(recover, allocation_sites_of_the_threads_tables)
{
	struct region r;
	setup(&r);
	/* table 0: two sites and the overflow bucket */
	r.sites[0].tid = 100;
	r.sites[0].serial = 1;
	put_site(&r.sites[0], 5, 0x4000, 10, 1000);
	put_site(&r.sites[0], 300, 0x5000, 3, 30);
	r.sites[0].overflow = 2;
	r.sites[0].overflow_bytes = 20;
	/* table 1: no thread (it ended, its sites are in the file) */
	put_site(&r.sites[1], 7, 0x6000, 99, 99);
	/* table 2: a slot being filled when the thread died (no count yet), a
	 * used[] entry a program scribbled on, and a good one */
	r.sites[2].tid = 200;
	r.sites[2].serial = 2;
	put_site(&r.sites[2], 9, 0x7000, 0, 0);
	put_site(&r.sites[2], 10, 0x7100, 4, 40);
	r.sites[2].used[r.sites[2].nused++] = 60000;
	/* table 3: a count past the table's size: all of it ignored */
	r.sites[3].tid = 300;
	put_site(&r.sites[3], 1, 0x8000, 1, 1);
	r.sites[3].nused = RHEA_SALVAGE_SITES + 1;
	struct counts c;
	cr_assert_eq(recover(&r, &c), 0);
	cr_assert_eq(c.sites, 4);
	cr_assert_eq(c.site_count, 10 + 3 + 2 + 4);
	cr_assert_eq(c.site_bytes, 1000 + 30 + 20 + 40);
	cr_assert_eq(c.site_pc_sum, 0x4000 + 0x5000 + 0 + 0x7100);
	cr_assert_eq(c.site_tid_sum, 3 * 101 + 202);
	teardown(&r);
}

Test(recover, nodes_already_in_the_file_are_not_repeated)
{
	struct region r;
	setup(&r);
	uint64_t a[2] = {0x10, 0x20};
	uint32_t ids[2];
	stacktab_intern(&r.st, 0, a, 2, ids);
	salvage_nodes_in_file(3); /* nodes 1 and 2 written */
	uint64_t b[1] = {0x30};
	stacktab_intern(&r.st, ids[1], b, 1, ids);
	struct counts c;
	cr_assert_eq(recover(&r, &c), 0);
	cr_assert_eq(c.nodes, 1);
	cr_assert_eq(c.node_addr_sum, 0x30);
	teardown(&r);
}

Test(recover, drained_chunks_only_when_the_round_wrote_nothing)
{
	struct region r;
	setup(&r);
	emit_sample(&r, 1, 10, 0);
	buf_seal_all(&r.b, 0);
	salvage_round(1, r.at); /* a round begins where the file ends... */
	buf_drain(&r.b, drop, NULL);
	emit_sample(&r, 1, 20, 0); /* ...and the thread goes on meanwhile */
	struct counts c;
	cr_assert_eq(recover(&r, &c), 2, "the round had written nothing: both samples");
	cr_assert_eq(c.times, 30);
	/* the same state, but the round's write reached the file: only the
	 * sample that came after the drain */
	salvage_round(1, r.at - 1);
	cr_assert_eq(recover(&r, &c), 1);
	cr_assert_eq(c.times, 20);
	/* the round ended: what it drained is in the file */
	salvage_round(0, 0);
	cr_assert_eq(recover(&r, &c), 1);
	buf_release_drained(&r.b);
	cr_assert_eq(recover(&r, &c), 1);
	teardown(&r);
}

Test(recover, scribbled_region)
{
	struct region r;
	setup(&r);
	emit_sample(&r, 1, 10, 0);
	emit_sample(&r, 1, 20, 0);
	struct rhea_salvage *h = rhea_salvage;
	/* a chunk that claims more than it holds: skipped */
	struct buf_chunk *ch = &r.b.chunks[0];
	uint32_t used = ch->used;
	ch->used = 1u << 30;
	struct counts c;
	cr_assert_eq(recover(&r, &c), 0);
	/* an entry whose size runs past the data: the chunk ends before it */
	ch->used = used;
	((struct rhea_entry *)(ch->data + sizeof(struct rhea_sample)))->size = 4096;
	cr_assert_eq(recover(&r, &c), 1);
	/* descriptors and nodes pointing outside the region: nothing from them */
	uint64_t chunks = h->chunks, nodes = h->nodes;
	h->chunks = h->base + h->size - 8;
	h->nodes = 12;
	cr_assert_eq(recover(&r, &c), 0);
	h->chunks = chunks;
	h->nodes = nodes;
	/* not this process's, or ended by the agent: not opened */
	struct recover_view v;
	cr_assert_neq(recover_open(r.memfd, getpid() + 1, &v), 0);
	salvage_set_state(RHEA_SALVAGE_DONE);
	cr_assert_neq(recover_open(r.memfd, getpid(), &v), 0);
	salvage_set_state(RHEA_SALVAGE_ACTIVE);
	h->magic ^= 1;
	cr_assert_neq(recover_open(r.memfd, getpid(), &v), 0);
	h->magic ^= 1;
	cr_assert_eq(recover_open(r.memfd, getpid(), &v), 0);
	recover_close(&v);
	teardown(&r);
}

/* ---- rhea record's collector of the other processes' memory ------------- */

/* In a forked child: its memory sent to the collector (as a process rhea
 * record did not start does it), then a recording at path, named in the
 * region as name says, one sample buffered and never written; then
 * SIGKILL.  NAME_NONE: killed before it named its file; NAME_OTHER: it
 * named path for a file of its own that never took the name (the agent
 * names its spare before it links it), and what is at path is another's. */
enum { NAME_NONE, NAME_IT, NAME_OTHER };

static void child_killed_with_sample(const char *path, int name)
{
	void *bm, *nm;
	struct rhea_salvage_pend *pm;
	struct rhea_salvage_sites *sm;
	unsetenv(RHEA_SALVAGE_ENV);
	if (!salvage_region(SALVAGE_INHERITED, buf_bytes(4, 4096), 64 * sizeof(struct stacktab_node), 8, 0, &bm, &nm,
			    &pm, &sm))
		_exit(3);
	struct buf b;
	struct stacktab st;
	if (buf_init_at(&b, bm, 4, 4096, 1) != 0 || stacktab_init_at(&st, nm, 64) != 0)
		_exit(4);
	salvage_publish(&b, 64); /* sends the memfd */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct rfile_writer w;
	struct rhea_file_header h;
	memset(&h, 0, sizeof(h));
	if (fd < 0 || rfile_writer_init(&w, fd, 0, 1u << 20) != 0 || rfile_write_header(&w, &h) != 0)
		_exit(5);
	if (name == NAME_IT) {
		name_in_region(path, fd);
	} else if (name == NAME_OTHER) {
		char dir[192];
		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = 0;
		int spare = open(dir, O_TMPFILE | O_WRONLY, 0644);
		if (spare < 0)
			_exit(6);
		name_in_region(path, spare);
	}
	struct rhea_sample s;
	memset(&s, 0, sizeof(s));
	s.h.kind = RHEA_E_SAMPLE;
	s.h.size = sizeof(s);
	s.tid = (uint32_t)getpid();
	s.begin_ns = s.end_ns = 42;
	buf_emit(&b, s.tid, &s, sizeof(s));
	raise(SIGKILL);
}

static off_t size_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

Test(recover, collector_finishes_only_its_own_recordings)
{
	char dir[] = "/tmp/rhea-collect-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char base[128], sock[64];
	snprintf(base, sizeof(base), "%s/out.rhea", dir);
	struct recover_collector *c = recover_collect_start(sock, sizeof(sock), -1, 0);
	cr_assert_not_null(c);
	setenv(RHEA_SALVAGE_SOCK_ENV, sock, 1);
	/* one child writes where rhea record named it; another names a file
	 * it has no business in; the third died before it named its file in
	 * its memory (whatever is at that path is not known to be its own);
	 * the fourth named a path that another file holds */
	char good[192], evil[192], unnamed[192], other[192];
	pid_t a = fork();
	if (a == 0) {
		rhea_derived_name(good, sizeof(good), base, (unsigned long)getpid(), 0);
		child_killed_with_sample(good, NAME_IT);
	}
	snprintf(evil, sizeof(evil), "%s/not-derived.rhea", dir);
	pid_t e = fork();
	if (e == 0)
		child_killed_with_sample(evil, NAME_IT);
	pid_t u = fork();
	if (u == 0) {
		rhea_derived_name(unnamed, sizeof(unnamed), base, (unsigned long)getpid(), 0);
		child_killed_with_sample(unnamed, NAME_NONE);
	}
	pid_t o = fork();
	if (o == 0) {
		rhea_derived_name(other, sizeof(other), base, (unsigned long)getpid(), 0);
		child_killed_with_sample(other, NAME_OTHER);
	}
	int st;
	cr_assert_eq(waitpid(a, &st, 0), a);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child a: status %d", st);
	cr_assert_eq(waitpid(e, &st, 0), e);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child e: status %d", st);
	cr_assert_eq(waitpid(u, &st, 0), u);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child u: status %d", st);
	cr_assert_eq(waitpid(o, &st, 0), o);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child o: status %d", st);
	unsetenv(RHEA_SALVAGE_SOCK_ENV);
	rhea_derived_name(good, sizeof(good), base, (unsigned long)a, 0);
	rhea_derived_name(unnamed, sizeof(unnamed), base, (unsigned long)u, 0);
	rhea_derived_name(other, sizeof(other), base, (unsigned long)o, 0);
	off_t evil_before = size_of(evil), unnamed_before = size_of(unnamed), other_before = size_of(other);
	cr_assert_gt(unnamed_before, 0, "child u made no file");
	cr_assert_gt(other_before, 0, "child o made no file");
	long samples = 0;
	int by_record = -1, by_parent = -1;
	cr_assert_eq(recover_collect_finish(c, base, 0, &samples, &by_record, &by_parent), 1);
	cr_assert_eq(by_parent, 0);
	cr_assert_eq(samples, 1);
	cr_assert_eq(by_record, 0);
	cr_assert_eq(size_of(evil), evil_before, "the file not named after the base was written to");
	cr_assert_eq(size_of(unnamed), unnamed_before, "the file of a child that named none was written to");
	cr_assert_eq(size_of(other), other_before, "a file the child named but never had was written to");
	/* the good one now ends, recovered */
	struct rfile_reader *rd;
	cr_assert_eq(rfile_open(good, &rd), RFILE_OK);
	const void *p;
	size_t len;
	int found_end = 0, found_sample = 0;
	while (rfile_next_chunk(rd, &p, &len) == RFILE_OK) {
		size_t off = 0;
		const struct rhea_entry *en;
		while (rfile_next_entry(p, len, &off, &en) == 1) {
			if (en->kind == RHEA_E_END)
				found_end = ((const struct rhea_end *)en)->reason == RHEA_END_GONE &&
					    (en->flags & RHEA_END_F_SALVAGED);
			if (en->kind == RHEA_E_SAMPLE && ((const struct rhea_sample *)en)->begin_ns == 42)
				found_sample = 1;
		}
	}
	rfile_close(rd);
	cr_assert(found_sample && found_end, "sample %d, end %d", found_sample, found_end);
	unlink(good);
	unlink(evil);
	unlink(unnamed);
	unlink(other);
	rmdir(dir);
}

/* The END of a recording, or 0 reason when it has none. */
static struct rhea_end end_of(const char *path)
{
	struct rhea_end end;
	memset(&end, 0, sizeof(end));
	struct rfile_reader *rd;
	if (rfile_open(path, &rd) == RFILE_OK) {
		const void *p;
		size_t len;
		while (rfile_next_chunk(rd, &p, &len) == RFILE_OK) {
			size_t off = 0;
			const struct rhea_entry *en;
			while (rfile_next_entry(p, len, &off, &en) == 1)
				if (en->kind == RHEA_E_END)
					memcpy(&end, en, sizeof(end));
		}
	}
	rfile_close(rd);
	return end;
}

/* A collector and a child that sent it its memory, then was killed with
 * SIGKILL (reaped: status in st). */
struct killed {
	char dir[32], base[128], sock[64];
	struct recover_collector *c;
	pid_t pid;
	int st;
};

static void killed_start(struct killed *k)
{
	snprintf(k->dir, sizeof(k->dir), "/tmp/rhea-collect-XXXXXX");
	cr_assert_not_null(mkdtemp(k->dir));
	snprintf(k->base, sizeof(k->base), "%s/out.rhea", k->dir);
	k->c = recover_collect_start(k->sock, sizeof(k->sock), -1, 0);
	cr_assert_not_null(k->c);
	setenv(RHEA_SALVAGE_SOCK_ENV, k->sock, 1);
	k->pid = fork();
	if (k->pid == 0) {
		char path[192];
		rhea_derived_name(path, sizeof(path), k->base, (unsigned long)getpid(), 0);
		child_killed_with_sample(path, NAME_IT);
	}
	cr_assert_eq(waitpid(k->pid, &k->st, 0), k->pid);
	unsetenv(RHEA_SALVAGE_SOCK_ENV);
	cr_assert(WIFSIGNALED(k->st) && WTERMSIG(k->st) == SIGKILL, "status %d", k->st);
}

/* Finish: the child's recording ended from its memory; its END. */
static struct rhea_end killed_finish(struct killed *k, int want_by_parent)
{
	long samples = 0;
	int by_record = -1, by_parent = -1;
	cr_assert_eq(recover_collect_finish(k->c, k->base, 0, &samples, &by_record, &by_parent), 1);
	cr_assert_eq(samples, 1);
	cr_assert_eq(by_record + by_parent, 1);
	cr_assert_eq(by_parent, want_by_parent);
	char path[192];
	rhea_derived_name(path, sizeof(path), k->base, (unsigned long)k->pid, 0);
	struct rhea_end end = end_of(path);
	cr_assert(end.h.flags & RHEA_END_F_OUTSIDE && end.h.flags & RHEA_END_F_SALVAGED, "flags %u", end.h.flags);
	unlink(path);
	rmdir(k->dir);
	return end;
}

/* A process rhea record reaped (as its subreaper) ends with what waitpid
 * said, not GONE. */
Test(recover, collector_ends_a_reaped_process_with_its_status)
{
	struct killed k;
	killed_start(&k);
	recover_collect_reaped(k.c, k.pid, k.st);
	struct rhea_end end = killed_finish(&k, 0);
	cr_assert_eq(end.reason, RHEA_END_SIGNAL);
	cr_assert_eq(end.status, SIGKILL);
}

/* One message to the collector's socket, as an agent sends it. */
static void send_to_collector(const char *sock, const void *m, size_t len)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, sock, strlen(sock));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	cr_assert_eq(connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sock))), 0);
	cr_assert_eq(send(s, m, len, MSG_NOSIGNAL), (ssize_t)len);
	close(s);
}

/* A process its parent reaped ends with the status the parent's agent
 * sent (here another than the real one, to tell them apart); messages
 * that are not well-formed, and statuses of pids that sent no memfd, are
 * ignored. */
Test(recover, collector_ends_a_process_with_its_parents_status)
{
	struct killed k;
	killed_start(&k);
	struct rhea_salvage_reaped m = {.magic = RHEA_SALVAGE_REAPED_MAGIC, .pid = k.pid, .status = 5 << 8};
	struct rhea_salvage_reaped bad = m, other = m;
	bad.magic ^= 1;
	bad.status = 6 << 8;
	other.pid = k.pid + 100000; /* no memfd: nothing to finish */
	pid_t parent = fork(); /* the collector takes rhea record's own calls for its own */
	if (parent == 0) {
		send_to_collector(k.sock, &bad, sizeof(bad));
		send_to_collector(k.sock, &m, sizeof(m) - 4); /* too short */
		send_to_collector(k.sock, &other, sizeof(other));
		send_to_collector(k.sock, &m, sizeof(m));
		_exit(0);
	}
	int st;
	cr_assert_eq(waitpid(parent, &st, 0), parent);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct rhea_end end = killed_finish(&k, 1);
	cr_assert_eq(end.reason, RHEA_END_EXIT);
	cr_assert_eq(end.status, 5);
}

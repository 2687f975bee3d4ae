/*
 * recover.c - read a dead program's last buffers from the memfd it shared
 * with rhea record, and append them to its recording (core/salvage.h).
 *
 * The region was written by the program, which may have scribbled on it
 * before it died: every offset, count and entry is checked against the
 * region's bounds, and an entry that does not check out ends its chunk.
 *
 * What is appended, in new chunks after the file's last whole one:
 *  - NODES for the call-stack table's ready nodes from nodes_in_file on
 *    (a node a thread was adding when it died is not ready: skipped);
 *  - every entry of the chunks the writer had not written: FILLING and FULL
 *    ones, and WRITING and DRAINED ones when the writer's round wrote
 *    nothing of them (the file still ends where the round began);
 *  - each thread's pending sample, unless the thread was changing it;
 *  - each thread's allocation sites, from the tables the threads count in.
 */
#include "recover.h"
#include "cli.h"
#include "paths.h"
#include "fdpass.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The agent did not end its recording: it is running, or ended unseen,
 * or stopped when it could not write the file (FAILED: rhea record adds
 * the end, and why). */
static int unfinished(const struct rhea_salvage *h)
{
	return h->state == RHEA_SALVAGE_ACTIVE || h->state == RHEA_SALVAGE_FAILED;
}

int recover_open(int memfd, pid_t pid, struct recover_view *v)
{
	memset(v, 0, sizeof(*v));
	struct stat st;
	if (memfd < 0 || fstat(memfd, &st) != 0 || (uint64_t)st.st_size < sizeof(struct rhea_salvage))
		return -1;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, memfd, 0);
	if (m == MAP_FAILED)
		return -1;
	v->map = m;
	v->size = (size_t)st.st_size;
	v->h = m;
	const struct rhea_salvage *h = v->h;
	if (h->magic != RHEA_SALVAGE_MAGIC || h->version != RHEA_SALVAGE_VERSION ||
	    h->header_size < sizeof(*h) || !unfinished(h) || h->pid != pid ||
	    h->size != v->size || memchr(h->output, 0, sizeof(h->output)) == NULL) {
		recover_close(v);
		return -1;
	}
	return 0;
}

void recover_close(struct recover_view *v)
{
	if (v->map)
		munmap((void *)v->map, v->size);
	memset(v, 0, sizeof(*v));
}

/* The file at path is the one the region h names: the agent names it
 * before the file takes the name (core/salvage.h, output_ino). */
static int names_file(const struct rhea_salvage *h, const char *path)
{
	struct stat st;
	return h->output[0] && path[0] && stat(path, &st) == 0 && (uint64_t)st.st_dev == h->output_dev &&
	       (uint64_t)st.st_ino == h->output_ino;
}

int recover_is_for(const struct recover_view *v, const char *path)
{
	return v->h && names_file(v->h, path);
}

/* The region's bytes at agent address addr, n of them, or NULL when they
 * are not all inside it. */
static const char *at_addr(const struct recover_view *v, uint64_t addr, uint64_t n)
{
	uint64_t base = v->h->base;
	if (addr < base || addr - base > v->size || n > v->size - (addr - base))
		return NULL;
	return v->map + (addr - base);
}

/* Entries are gathered into one payload and written as a chunk when full. */
struct out {
	struct rfile_writer *w;
	char *buf;
	size_t used, cap;
	long samples;
	int err;
};

static void out_flush(struct out *o)
{
	if (o->used && !o->err && rfile_write_chunk(o->w, o->buf, o->used, 1) != 0)
		o->err = 1;
	o->used = 0;
}

/* Room for len bytes (len <= cap). */
static void *out_reserve(struct out *o, size_t len)
{
	if (o->used + len > o->cap)
		out_flush(o);
	void *p = o->buf + o->used;
	o->used += len;
	return p;
}

static void out_entry(struct out *o, const struct rhea_entry *e)
{
	if (e->size > o->cap)
		return;
	memcpy(out_reserve(o, e->size), e, e->size);
	if (e->kind == RHEA_E_SAMPLE)
		o->samples++;
}

static void nodes(const struct recover_view *v, struct out *o)
{
	const struct rhea_salvage *h = v->h;
	const struct rhea_salvage_node *n =
		(const void *)at_addr(v, h->nodes, (uint64_t)h->max_nodes * sizeof(*n));
	if (!n)
		return;
	enum { PER_ENTRY = 4096, GIVE_UP = 4096 };
	uint32_t i = h->nodes_in_file ? h->nodes_in_file : 1, idle = 0;
	while (i < h->max_nodes && idle < GIVE_UP) {
		if (!n[i].ready) { /* being added at the end, or never handed out */
			i++;
			idle++;
			continue;
		}
		idle = 0;
		uint32_t first = i, count = 0;
		while (i < h->max_nodes && n[i].ready && count < PER_ENTRY) {
			i++;
			count++;
		}
		size_t len = sizeof(struct rhea_nodes) + (size_t)count * sizeof(struct rhea_node);
		struct rhea_nodes *e = out_reserve(o, len);
		memset(e, 0, len);
		e->h.kind = RHEA_E_NODES;
		e->h.size = (uint32_t)len;
		e->first_id = first;
		e->count = count;
		struct rhea_node *d = (struct rhea_node *)(e + 1);
		for (uint32_t k = 0; k < count; k++) {
			d[k].addr = n[first + k].addr;
			d[k].parent = n[first + k].parent;
		}
	}
}

static void chunks(const struct recover_view *v, struct out *o, uint64_t at)
{
	const struct rhea_salvage *h = v->h;
	const struct rhea_salvage_chunk *c =
		(const void *)at_addr(v, h->chunks, (uint64_t)h->nchunks * sizeof(*c));
	if (!c)
		return;
	/* The round in progress wrote nothing yet: what it drained is not in
	 * the file.  Once it wrote something, its chunks count as written (a
	 * round that needed two writes may lose a part; never duplicates). */
	int round_unwritten = h->in_round && h->round_start == at;
	for (uint32_t i = 0; i < h->nchunks; i++) {
		uint32_t state = c[i].state;
		if (state != RHEA_SALVAGE_CHUNK_FILLING && state != RHEA_SALVAGE_CHUNK_FULL &&
		    !(round_unwritten &&
		      (state == RHEA_SALVAGE_CHUNK_WRITING || state == RHEA_SALVAGE_CHUNK_DRAINED)))
			continue;
		uint32_t used = c[i].used;
		const char *d = used <= h->chunk_size ? at_addr(v, c[i].data, used) : NULL;
		if (!d || ((uintptr_t)d & 7))
			continue;
		size_t off = 0;
		const struct rhea_entry *e;
		while (rfile_next_entry(d, used, &off, &e) == 1 && rfile_entry_check(e) >= 0)
			out_entry(o, e);
	}
}

static void pending(const struct recover_view *v, struct out *o)
{
	const struct rhea_salvage *h = v->h;
	const struct rhea_salvage_pend *p =
		(const void *)at_addr(v, h->pend, (uint64_t)h->npend * sizeof(*p));
	if (!p)
		return;
	for (uint32_t i = 0; i < h->npend; i++) {
		if (!p[i].valid || p[i].busy || p[i].s.h.kind != RHEA_E_SAMPLE ||
		    p[i].s.h.size != sizeof(struct rhea_sample))
			continue;
		out_entry(o, &p[i].s.h);
	}
}

/* Each thread's allocation sites as its table held them: newer than the
 * last snapshot the agent wrote (up to a second older), and what a reader
 * keeps (the largest count of each site of each thread). */
static void sites(const struct recover_view *v, struct out *o)
{
	const struct rhea_salvage *h = v->h;
	const struct rhea_salvage_sites *t =
		h->nsites ? (const void *)at_addr(v, h->sites, (uint64_t)h->nsites * sizeof(*t)) : NULL;
	size_t cap = sizeof(struct rhea_sites) + (RHEA_SALVAGE_SITES + 1) * sizeof(struct rhea_site);
	struct rhea_sites *e = t ? malloc(cap) : NULL;
	if (!e)
		return;
	struct rhea_site *d = (struct rhea_site *)(e + 1);
	for (uint32_t i = 0; i < h->nsites; i++) {
		uint32_t tid = t[i].tid, serial = t[i].serial, used = t[i].nused, n = 0;
		if (!tid || used > RHEA_SALVAGE_SITES)
			continue;
		for (uint32_t k = 0; k < used; k++) {
			uint16_t j = t[i].used[k];
			if (j >= RHEA_SALVAGE_SITES || !t[i].site[j].pc || !t[i].site[j].count)
				continue;
			d[n++] = (struct rhea_site){t[i].site[j].pc, t[i].site[j].count, t[i].site[j].bytes, tid, serial};
		}
		if (t[i].overflow) /* the bucket of sites that found no slot: pc 0 */
			d[n++] = (struct rhea_site){0, t[i].overflow, t[i].overflow_bytes, tid, serial};
		if (!n)
			continue;
		memset(e, 0, sizeof(*e));
		e->h.kind = RHEA_E_SITES;
		e->h.size = (uint32_t)(sizeof(*e) + n * sizeof(*d));
		e->count = n;
		out_entry(o, &e->h);
	}
	free(e);
}

long recover_append(const struct recover_view *v, struct rfile_writer *w, uint64_t at)
{
	struct out o = {.w = w, .cap = w->max_chunk};
	o.buf = malloc(o.cap);
	if (!o.buf)
		return -1;
	/* nodes first: a reader resolves the samples' stacks whatever the
	 * order, but a reader cut short here keeps what it read whole */
	nodes(v, &o);
	chunks(v, &o, at);
	pending(v, &o);
	sites(v, &o);
	out_flush(&o);
	free(o.buf);
	return o.err ? -1 : o.samples;
}

/* A META entry of key and value into buf (cap bytes): its size, 0 when
 * it does not fit. */
static size_t meta_entry(void *buf, size_t cap, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value), size = rhea_meta_size(kl, vl);
	if (size > cap)
		return 0;
	rhea_meta_put(buf, key, kl, value, vl);
	return size;
}

/* The END rhea record writes, in a chunk of its own; after why the agent
 * stopped (err, an errno) when it could not write the file. */
static int end_chunk(struct rfile_writer *w, unsigned flags, unsigned reason, int status, int err)
{
	w->keep_free = 0; /* the room kept was for this */
	uint64_t buf[(sizeof(struct rhea_meta) + 256 + sizeof(struct rhea_end)) / 8 + 1];
	memset(buf, 0, sizeof(buf));
	size_t len = err ? meta_entry(buf, sizeof(buf) - sizeof(struct rhea_end), "write_error", strerror(err)) : 0;
	struct rhea_end *end = (struct rhea_end *)((char *)buf + len);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	end->h.kind = RHEA_E_END;
	end->h.flags = (uint16_t)flags;
	end->h.size = sizeof(*end);
	end->time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	end->reason = reason;
	end->status = status;
	return rfile_write_chunk(w, buf, len + sizeof(*end), 0);
}

/* The file back to at, chunk seq next: what was appended after it, cut
 * off. */
static int rewind_to(struct rfile_writer *w, int fd, uint64_t at, uint64_t seq)
{
	if (ftruncate(fd, (off_t)at) != 0 || lseek(fd, (off_t)at, SEEK_SET) != (off_t)at)
		return -1;
	w->error = 0;
	w->offset = at;
	w->seq = seq;
	return 0;
}

long recover_end(const char *path, unsigned reason, int status, const struct recover_view *sv)
{
	struct rfile_reader *rd = NULL;
	int st = rfile_open(path, &rd);
	const void *pl;
	size_t len;
	int ended = 0, exec_end = 0;
	while (st == RFILE_OK && (st = rfile_next_chunk(rd, &pl, &len)) == RFILE_OK) {
		size_t off = 0;
		const struct rhea_entry *e;
		while (rfile_next_entry(pl, len, &off, &e) == 1) {
			if (e->kind == RHEA_E_END && e->size >= sizeof(struct rhea_end)) {
				ended = 1;
				exec_end = ((const struct rhea_end *)e)->reason == RHEA_END_EXEC;
			} else if (e->kind == RHEA_E_META && exec_end) {
				ended = exec_end = 0; /* the image after the exec */
			}
		}
	}
	uint64_t at = rd ? rfile_offset(rd) : 0, seq = rd ? rfile_chunk_index(rd) : 0;
	rfile_close(rd);
	if (ended || (st != RFILE_END_OF_FILE && st != RFILE_ERR_TRUNCATED))
		return RECOVER_END_NONE;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return RECOVER_END_NONE;
	long ret = RECOVER_END_FAILED;
	struct rfile_writer w;
	memset(&w, 0, sizeof(w)); /* rfile_writer_destroy is safe on it */
	if ((st == RFILE_END_OF_FILE || ftruncate(fd, (off_t)at) == 0) && lseek(fd, (off_t)at, SEEK_SET) == (off_t)at &&
	    rfile_writer_init(&w, fd, 3, 1u << 20) == 0) {
		w.seq = seq;
		w.keep_free = RFILE_END_ROOM; /* what was not written: short of the end's room */
		long n = sv ? recover_append(sv, &w, at) : -1;
		int err = sv && sv->h->state == RHEA_SALVAGE_FAILED ? sv->h->write_errno : 0;
		/* The end after what the agent had not written; when the two do
		 * not fit (a full disk), the end alone, where what was appended
		 * began. */
		if (n >= 0 && end_chunk(&w, RHEA_END_F_OUTSIDE | RHEA_END_F_SALVAGED, reason, status, err) == 0)
			ret = n;
		else if ((!sv || rewind_to(&w, fd, at, seq) == 0) &&
			 end_chunk(&w, RHEA_END_F_OUTSIDE, reason, status, err) == 0)
			ret = 0;
	}
	rfile_writer_destroy(&w);
	close(fd);
	return ret;
}

/* ---- the other processes' memory: the keeper -------------------------- */

/*
 * The memfds live in a process of their own, the keeper, in a process group of
 * its own: a SIGKILL sent to rhea record's process group (`timeout -s KILL
 * rhea record ...`, `kill -9 -PGID`) kills rhea record and the program
 * together, and with rhea record holding them, what the
 * agents had not written yet (their last 100 ms, and the ends) died too.
 * The keeper notices rhea record's death (its pipe's end closes), waits for
 * the processes whose memory it holds to end, finishes their recordings,
 * the program's own included, compacts them as rhea record would have
 * (unless --no-compact), and leaves.  Normally rhea record asks it to
 * finish (a message on the socket, after every message queued before it)
 * and reads the totals from a pipe.  It is no child of rhea record (two
 * forks), so rhea record's waiting for its descendants does not wait for
 * it.  Under --no-wait rhea record asks it to linger instead: it answers
 * for what ended, then stays, as if orphaned, for the processes still
 * running.  Alone, it also compacts the recordings the agents end
 * themselves (sweep), which rhea record would have compacted.
 */
#define COLLECT_MAX 4096 /* memfds held at once; more are let go */
#define RHEA_COLLECT_ROOT_MAGIC 0x54524852u   /* "RHRT": the program's pid and file */
#define RHEA_COLLECT_FINISH_MAGIC 0x4e464852u /* "RHFN": finish, with the base */
#define RHEA_COLLECT_LINGER_MAGIC 0x474c4852u /* "RHLG": finish what ended, stay for the rest */

struct collect_path_msg {
	uint32_t magic;
	int32_t pid;
	char path[4096 + 64];
};

struct collect_totals {
	int ended, by_parent, by_record, pad;
	long samples;
};

enum { TOLD_BY_PARENT = 1, TOLD_BY_RECORD = 2 };

struct recover_collector {
	int lfd;
	struct sockaddr_un addr;
	socklen_t addr_len;
	int ctl;        /* rhea record: the write end the keeper watches; keeper: its read end */
	int res;        /* rhea record: the totals' read end; keeper: its write end */
	pid_t record;   /* rhea record's pid */
	pid_t keeper_pgid; /* the keeper's process group */
	/* the keeper's */
	int root_fd;    /* the program's memfd (rhea record's own), -1 none */
	pid_t root_pid; /* the program, once rhea record says */
	char base[4096 + 64];
	int fds[COLLECT_MAX];
	pid_t pids[COLLECT_MAX]; /* who sent each: the pid its header must name */
	int status[COLLECT_MAX]; /* how it ended... */
	char have_status[COLLECT_MAX]; /* ...when known: TOLD_BY_PARENT or TOLD_BY_RECORD */
	int n;
	int compact; /* alone, compact what it ends */
	int alone;   /* rhea record is gone (or has returned, --no-wait): the keeper
			finishes what remains itself, and compacts the recordings it
			ends and those the agents end, as rhea record would have */
};

static int header_of(int fd, struct rhea_salvage *h)
{
	return pread(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) && h->magic == RHEA_SALVAGE_MAGIC ? 0 : -1;
}

static int derived_from(const char *base, const char *path, pid_t pid);

/* Let go of the memfds of processes that wrote their end themselves;
 * without rhea record, compact their recordings first, as it would have. */
static void sweep(struct recover_collector *c)
{
	int k = 0;
	for (int i = 0; i < c->n; i++) {
		struct rhea_salvage h;
		if (header_of(c->fds[i], &h) == 0 && h.state == RHEA_SALVAGE_DONE) {
			char path[sizeof(h.output)];
			memcpy(path, h.output, sizeof(path));
			path[sizeof(path) - 1] = 0;
			if (c->alone && c->compact && c->base[0] && h.pid == c->pids[i] &&
			    derived_from(c->base, path, h.pid))
				cli_compact(path, NULL);
			close(c->fds[i]);
		} else {
			c->pids[k] = c->pids[i];
			c->status[k] = c->status[i];
			c->have_status[k] = c->have_status[i];
			c->fds[k++] = c->fds[i];
		}
	}
	c->n = k;
}

/* One message: its length (*fd: the descriptor it carried, else -1), or -1. */
static ssize_t recv_msg(int s, void *buf, size_t cap, int *fd)
{
	struct iovec iov = {buf, cap};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union fdpass_buf u;
	fdpass_expect(&msg, &u);
	ssize_t n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
	*fd = n >= 0 ? fdpass_take(&msg) : -1;
	if (n < 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return n;
}

/* A parent (or rhea record, by_record) reaped pid: its status goes with the
 * latest memfd pid sent (the child sent it before it died, so it came
 * first).  A pid that sent none left nothing to finish. */
static void note_reaped(struct recover_collector *c, const struct rhea_salvage_reaped *m, int by_record)
{
	for (int i = c->n - 1; i >= 0; i--)
		if (c->pids[i] == m->pid) {
			c->status[i] = m->status;
			c->have_status[i] = by_record ? TOLD_BY_RECORD : TOLD_BY_PARENT;
			break;
		}
}

/* path is one of the names the process pid's recordings take (agent.c,
 * open_output): nothing but those recordings is ever written to. */
static int derived_from(const char *base, const char *path, pid_t pid)
{
	char name[4096 + 64];
	for (unsigned n = 0; n < 1000; n++) {
		rhea_derived_name(name, sizeof(name), base, (unsigned long)pid, n);
		if (strcmp(name, path) == 0)
			return 1;
	}
	return 0;
}

/* pid's stat line past its name (" S ppid ..."), in buf; NULL when it
 * cannot be read. */
static const char *stat_fields(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t k = read(fd, buf, cap - 1);
	close(fd);
	if (k <= 0)
		return NULL;
	buf[k] = 0;
	const char *rp = strrchr(buf, ')'); /* the name may hold anything */
	return rp ? rp + 1 : NULL;
}

/* The process is gone: no such pid, or a zombie its parent has not reaped. */
static int gone(pid_t pid)
{
	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	char buf[512];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	return f && f[0] == ' ' && f[1] == 'Z';
}

long recover_end_waited(const char *path, int wstatus, const struct recover_view *sv)
{
	if (WIFSIGNALED(wstatus))
		return recover_end(path, RHEA_END_SIGNAL, WTERMSIG(wstatus), sv);
	return recover_end(path, RHEA_END_EXIT, WEXITSTATUS(wstatus), sv);
}

/* The processes whose memory the keeper holds have all ended (or ended
 * their recordings themselves). */
static int all_ended(struct recover_collector *c)
{
	struct rhea_salvage h;
	if (c->root_fd >= 0 && c->root_pid > 0 && header_of(c->root_fd, &h) == 0 && unfinished(&h) &&
	    !gone(c->root_pid))
		return 0;
	for (int i = 0; i < c->n; i++)
		if (header_of(c->fds[i], &h) == 0 && unfinished(&h) && !gone(c->pids[i]))
			return 0;
	return 1;
}

/* End the recordings of the processes that ended without writing their
 * end, from their memory.  keep_running: hold on to the memory of those
 * still running (the keeper stays for them), else let go of it all. */
static void finish_all(struct recover_collector *c, int keep_running, struct collect_totals *t)
{
	memset(t, 0, sizeof(*t));
	struct rhea_salvage h;
	struct recover_view v;
	/* the program: rhea record ends it with its status, unless it died
	 * first; then it ended unseen (GONE), in whichever image it was */
	if (c->alone && c->root_fd >= 0 && c->root_pid > 0 && c->base[0] && gone(c->root_pid) &&
	    recover_open(c->root_fd, c->root_pid, &v) == 0) {
		char path[sizeof(v.h->output)];
		memcpy(path, v.h->output, sizeof(path));
		if ((strcmp(path, c->base) == 0 || derived_from(c->base, path, c->root_pid)) && names_file(v.h, path)) {
			long n = recover_end(path, RHEA_END_GONE, 0, &v);
			if (n >= 0) {
				t->ended++;
				t->samples += n;
			}
			recover_close(&v);
			if (n >= 0 && c->compact)
				cli_compact(path, NULL);
		} else {
			recover_close(&v);
		}
	}
	int k = 0;
	for (int i = 0; i < c->n; i++) {
		/* its parent told how it ended, or rhea record reaped it */
		int status = c->status[i], told = c->have_status[i];
		if (c->base[0] && header_of(c->fds[i], &h) == 0 && unfinished(&h) &&
		    h.pid == c->pids[i] && (told || gone(h.pid)) && recover_open(c->fds[i], h.pid, &v) == 0) {
			char path[sizeof(h.output)];
			memcpy(path, v.h->output, sizeof(path));
			long n = -1;
			if (derived_from(c->base, path, h.pid) && names_file(v.h, path)) {
				n = told ? recover_end_waited(path, status, &v) : recover_end(path, RHEA_END_GONE, 0, &v);
				if (n >= 0) {
					t->ended++;
					t->by_parent += told == TOLD_BY_PARENT;
					t->by_record += told == TOLD_BY_RECORD;
					t->samples += n;
				}
			}
			recover_close(&v);
			if (n >= 0 && c->alone && c->compact)
				cli_compact(path, NULL);
		} else if (keep_running && header_of(c->fds[i], &h) == 0 && unfinished(&h) &&
			   !gone(c->pids[i])) {
			c->pids[k] = c->pids[i];
			c->status[k] = c->status[i];
			c->have_status[k] = c->have_status[i];
			c->fds[k++] = c->fds[i];
			continue;
		}
		close(c->fds[i]);
	}
	c->n = k;
}

/* pid's parent, from its stat line; 0 when it cannot be read. */
static pid_t parent_of(pid_t pid)
{
	char buf[512];
	const char *f = stat_fields(pid, buf, sizeof(buf));
	int ppid = 0;
	return f && sscanf(f, " %*c %d", &ppid) == 1 ? (pid_t)ppid : 0;
}

/* pid is rhea record's descendant (rhea record is the subreaper of what it
 * starts: an orphan's parent is it). */
static int descends_from(pid_t pid, pid_t ancestor)
{
	for (int i = 0; i < 256 && pid > 0; i++) {
		if (pid == ancestor)
			return 1; /* (rhea record may be a container's init, pid 1) */
		if (pid == 1)
			break;
		pid = parent_of(pid);
	}
	return 0;
}

/* The recording an agent may not create itself (core/salvage.h,
 * rhea_salvage_open), created here and handed over on s. */
static void open_for(struct recover_collector *c, int s, const struct rhea_salvage_open *m, pid_t peer)
{
	struct rhea_salvage_opened r = {RHEA_SALVAGE_OPENED_MAGIC, 0};
	char path[sizeof(m->path)];
	memcpy(path, m->path, sizeof(path));
	path[sizeof(path) - 1] = 0;
	int fd = -1;
	if (!c->base[0])
		r.err = EAGAIN; /* rhea record has not said where yet */
	else if (m->pid != peer || peer == c->record || !descends_from(peer, c->record) ||
		 !(derived_from(c->base, path, peer) || (peer == c->root_pid && strcmp(path, c->base) == 0)))
		r.err = EPERM;
	else if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
		r.err = errno;
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union fdpass_buf u;
	fdpass_attach(&msg, &u, fd);
	if (sendmsg(s, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(r) && fd >= 0)
		unlink(path); /* (the agent never got it: nothing left behind) */
	if (fd >= 0)
		close(fd);
}

/* One connection: an agent's memfd (one byte and the descriptor), how a
 * child it reaped ended, or its request for its file (answered on s);
 * from rhea record, a child it reaped, the program it started, or the
 * call to finish (1: then the totals are written). */
static int keeper_take(struct recover_collector *c, int s)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int ok = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0;
	/* from a process of ours only (the socket's name is no secret) */
	static union {
		char byte;
		struct rhea_salvage_reaped reaped;
		struct collect_path_msg path;
		struct rhea_salvage_open open;
	} m;
	int fd = -1;
	ssize_t len = -1;
	if (ok && (cred.uid == geteuid() || geteuid() == 0))
		len = recv_msg(s, &m, sizeof(m), &fd);
	if (len == (ssize_t)sizeof(m.open) && fd < 0 && m.open.magic == RHEA_SALVAGE_OPEN_MAGIC)
		open_for(c, s, &m.open, cred.pid);
	close(s);
	int own = ok && cred.pid == c->record;
	if (len == (ssize_t)sizeof(m.reaped) && fd < 0 && m.reaped.magic == RHEA_SALVAGE_REAPED_MAGIC) {
		note_reaped(c, &m.reaped, own);
		return 0;
	}
	if (own && len == (ssize_t)sizeof(m.path) && fd < 0 && memchr(m.path.path, 0, sizeof(m.path.path))) {
		if (m.path.magic == RHEA_COLLECT_ROOT_MAGIC) {
			c->root_pid = m.path.pid;
			memcpy(c->base, m.path.path, sizeof(c->base));
		} else if (m.path.magic == RHEA_COLLECT_FINISH_MAGIC || m.path.magic == RHEA_COLLECT_LINGER_MAGIC) {
			memcpy(c->base, m.path.path, sizeof(c->base));
			return m.path.magic == RHEA_COLLECT_FINISH_MAGIC ? 1 : 2;
		}
		return 0;
	}
	if (fd < 0)
		return 0;
	if (len != 1 || own) {
		close(fd);
		return 0;
	}
	sweep(c);
	if (c->n < COLLECT_MAX) {
		c->pids[c->n] = cred.pid;
		c->have_status[c->n] = 0;
		c->fds[c->n++] = fd;
	} else {
		close(fd);
	}
	return 0;
}

static void __attribute__((noreturn)) keeper_main(struct recover_collector *c)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = c->lfd, .events = POLLIN}, {.fd = c->ctl, .events = POLLIN}};
		int r = poll(p, c->alone ? 1 : 2, c->alone ? 200 : 1000);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0) {
			/* each second, let go of what processes that ended left;
			 * without rhea record, finish once they all ended */
			sweep(c);
			if (c->alone && all_ended(c))
				break;
			continue;
		}
		if (!c->alone && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			c->alone = 1; /* rhea record is gone: only its end closes the pipe */
			close(c->ctl);
			continue;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		int s = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (s < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			break;
		}
		int call = keeper_take(c, s);
		if (call) {
			/* the connections queued before the call, all the agents
			 * that sent theirs in time, were taken */
			struct collect_totals t;
			finish_all(c, call == 2, &t);
			if (write(c->res, &t, sizeof(t)) != (ssize_t)sizeof(t))
				_exit(1);
			if (call == 1)
				_exit(0);
			/* rhea record --no-wait returns: the keeper stays for the
			 * processes still running, ends and compacts their
			 * recordings as they end (the program's is rhea record's) */
			close(c->res);
			if (c->root_fd >= 0)
				close(c->root_fd);
			c->root_fd = -1;
			c->root_pid = 0;
			c->alone = 1;
			close(c->ctl);
		}
	}
	struct collect_totals t;
	c->alone = 1;
	/* a process that wrote its end between the last sweep and all_ended
	 * (which counts it ended) is compacted too, not just let go */
	sweep(c);
	finish_all(c, 0, &t);
	_exit(0);
}

pid_t recover_keeper_group(const struct recover_collector *c)
{
	return c ? c->keeper_pgid : 0;
}

struct recover_collector *recover_collect_start(char *name, size_t cap, int root_memfd, int compact)
{
	struct recover_collector *c = calloc(1, sizeof(*c));
	unsigned char rnd[8];
	if (!c || cap < 64 || getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		free(c);
		return NULL;
	}
	c->compact = compact;
	snprintf(name, cap, "rhea-salvage-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(), rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	size_t n = strlen(name);
	memcpy(a.sun_path + 1, name, n);
	c->addr = a;
	c->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	c->record = getpid();
	c->root_fd = root_memfd;
	int ctl[2], res[2];
	c->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&c->addr, c->addr_len) != 0 || listen(c->lfd, 64) != 0 ||
	    pipe2(ctl, O_CLOEXEC) != 0) {
		if (c->lfd >= 0)
			close(c->lfd);
		free(c);
		return NULL;
	}
	if (pipe2(res, O_CLOEXEC) != 0) {
		close(ctl[0]);
		close(ctl[1]);
		close(c->lfd);
		free(c);
		return NULL;
	}
	pid_t mid = fork();
	if (mid == 0) {
		/* a process group of its own (the same session: a job of the same terminal), and no child of rhea record */
		setpgid(0, 0);
		if (fork() != 0)
			_exit(0);
		signal(SIGPIPE, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; null >= 0 && fd < 3; fd++)
			dup2(null, fd);
		close(ctl[1]);
		close(res[0]);
		/* nothing else of rhea record's: a pipe it inherited (a
		 * harness reading its output) must not stay open in here */
		int keep[4] = {c->lfd, ctl[0], res[1], root_memfd}, from = 3;
		for (;;) {
			int next = INT_MAX;
			for (int i = 0; i < 4; i++)
				if (keep[i] >= from && keep[i] < next)
					next = keep[i];
			if (next > from)
				close_range((unsigned)from, next == INT_MAX ? ~0u : (unsigned)next - 1, 0);
			if (next == INT_MAX)
				break;
			from = next + 1;
		}
		c->ctl = ctl[0];
		c->res = res[1];
		keeper_main(c);
	}
	close(ctl[0]);
	close(res[1]);
	close(c->lfd); /* the keeper listens */
	c->lfd = -1;
	c->ctl = ctl[1];
	c->res = res[0];
	c->keeper_pgid = mid; /* (mid made the group, the keeper is in it) */
	int st;
	if (mid < 0 || waitpid(mid, &st, 0) != mid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		close(c->ctl);
		close(c->res);
		free(c);
		return NULL;
	}
	return c;
}

/* One message to the keeper; 0, or -1. */
static int collect_send(struct recover_collector *c, const void *m, size_t len)
{
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ok = s >= 0 && connect(s, (struct sockaddr *)&c->addr, c->addr_len) == 0 &&
		 send(s, m, len, MSG_NOSIGNAL) == (ssize_t)len;
	if (s >= 0)
		close(s);
	return ok ? 0 : -1;
}

static void collect_send_path(struct recover_collector *c, uint32_t magic, pid_t pid, const char *path)
{
	static struct collect_path_msg m;
	memset(&m, 0, sizeof(m));
	m.magic = magic;
	m.pid = pid;
	snprintf(m.path, sizeof(m.path), "%s", path);
	collect_send(c, &m, sizeof(m));
}

void recover_collect_root(struct recover_collector *c, pid_t pid, const char *path)
{
	if (c)
		collect_send_path(c, RHEA_COLLECT_ROOT_MAGIC, pid, path);
}

/* Through the socket like the agents' messages, so that the status comes
 * after the memfd pid sent while it lived (a process may send it and die
 * before the keeper takes it) and goes with that one, never with an
 * earlier process's that had the same pid. */
void recover_collect_reaped(struct recover_collector *c, pid_t pid, int status)
{
	struct rhea_salvage_reaped m = {.magic = RHEA_SALVAGE_REAPED_MAGIC, .pid = pid, .status = status};
	if (c)
		collect_send(c, &m, sizeof(m));
}

int recover_collect_finish(struct recover_collector *c, const char *base, int linger, long *samples,
			   int *by_record, int *by_parent)
{
	*samples = 0;
	*by_record = 0;
	*by_parent = 0;
	if (!c)
		return 0;
	collect_send_path(c, linger ? RHEA_COLLECT_LINGER_MAGIC : RHEA_COLLECT_FINISH_MAGIC, 0, base);
	struct collect_totals t;
	memset(&t, 0, sizeof(t));
	ssize_t k;
	while ((k = read(c->res, &t, sizeof(t))) < 0 && errno == EINTR)
		;
	if (k != (ssize_t)sizeof(t))
		memset(&t, 0, sizeof(t)); /* the keeper died: nothing was ended */
	close(c->res);
	close(c->ctl);
	free(c);
	*samples = t.samples;
	*by_record = t.by_record;
	*by_parent = t.by_parent;
	return t.ended;
}

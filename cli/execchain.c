/*
 * execchain.c - one process's recordings across its execs, and those of
 * the processes it started.
 *
 * A process that execs ends its recording there (END, reason exec), and
 * the agent of the program it became starts another, named as a derived
 * recording of the same pid (core/paths.h, rhea_derived_name:
 * <base>.<pid>[.<n>].rhea, the first free n).  A wrapper (`env`, a shell
 * script ending in `exec`, pyenv's and nvm's shims, `nice`, `taskset`)
 * thus left the program the user ran in the last of several files, and
 * `rhea report out.rhea` showed the wrapper: 300 us of `env` for a
 * python3 run of a second.  rhea report and rhea convert follow the chain
 * (cmd_report.c, cmd_convert.c), rhea record names it (cmd_record.c).
 *
 * Which file comes next is not written anywhere (the agent before the exec
 * cannot know the name the next one will take), so it is found: of the
 * derived names of the recording's pid, the one of that pid whose agent
 * started first after the exec, within EXEC_GAP_MAX_NS of it.  Both times
 * are CLOCK_MONOTONIC; a file left by an earlier boot with the same pid
 * would have to agree with the wall clock as well (the headers' realtime
 * starts), which it does not.
 */
#include "cli.h"
#include "recording.h"
#include "rfile.h"
#include "paths.h"
#include "report.h"
#include "vec.h"

#include <stdlib.h>

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* From an exec to the next program's agent start: the kernel's exec, the
 * loader, the libraries' constructors (a large C++ program on a cold disk:
 * seconds). */
#define EXEC_GAP_MAX_NS (60ull * 1000000000ull)
/* Derived names probed past the last one that exists (a name freed by a
 * user's rm leaves a hole; rhea never removes one). */
#define MISSES_MAX 16

/* The name rhea record gave the process's first recording: path without
 * its ".<pid>[.<n>]" when it has one (a derived name), else path. */
static void base_of(const char *path, uint32_t pid, char *base, size_t cap)
{
	snprintf(base, cap, "%s", path);
	size_t len = strlen(base);
	if (len < 5 || strcmp(base + len - 5, ".rhea") != 0)
		return;
	char tail[48];
	for (unsigned n = 0; n < 1000; n++) {
		if (n)
			snprintf(tail, sizeof(tail), ".%u.%u.rhea", pid, n);
		else
			snprintf(tail, sizeof(tail), ".%u.rhea", pid);
		size_t tl = strlen(tail);
		if (len > tl && strcmp(base + len - tl, tail) == 0) {
			strcpy(base + len - tl, ".rhea");
			return;
		}
	}
}

void cli_all_processes(const char *path, uint32_t pid, char *out, size_t cap)
{
	char base[PATH_MAX];
	base_of(path, pid, base, sizeof(base));
	size_t n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".rhea") == 0)
		n -= 5;
	snprintf(out, cap, "%s %.*s.*.rhea", base, (int)n, base);
}

int cli_header_of(const char *path, struct rhea_file_header *h)
{
	struct rfile_reader *rd;
	if (rfile_open(path, &rd) != 0)
		return -1;
	*h = *rfile_header(rd);
	rfile_close(rd);
	return 0;
}

/* Two agent starts, each by the monotonic and the wall clock, on the same
 * boot: as far apart by one as by the other, to a second (NTP's steps). */
static int same_boot(uint64_t mono_a, uint64_t real_a, uint64_t mono_b, uint64_t real_b)
{
	int64_t by_mono = (int64_t)(mono_b - mono_a), by_real = (int64_t)(real_b - real_a);
	int64_t off = by_real - by_mono;
	return off < 1000000000ll && off > -1000000000ll;
}

int cli_each_derived(const char *base_path, const struct timespec *since, void (*fn)(const char *path, void *arg),
		     void *arg, int *stale)
{
	char dirb[PATH_MAX + 64], fileb[PATH_MAX + 64];
	snprintf(dirb, sizeof(dirb), "%s", base_path);
	snprintf(fileb, sizeof(fileb), "%s", base_path);
	const char *d = dirname(dirb);
	char *b = basename(fileb);
	size_t bl = strlen(b);
	if (bl > 5 && strcmp(b + bl - 5, ".rhea") == 0)
		b[bl -= 5] = 0;
	*stale = 0;
	DIR *dp = opendir(d);
	if (!dp)
		return 0;
	int n = 0, here = strcmp(d, ".") == 0;
	for (struct dirent *de; (de = readdir(dp)) != NULL;) {
		const char *name = de->d_name;
		size_t nl = strlen(name);
		if (nl <= bl + 6 || strncmp(name, b, bl) != 0 || name[bl] != '.' || strcmp(name + nl - 5, ".rhea") != 0 ||
		    name[bl + 1] < '0' || name[bl + 1] > '9')
			continue;
		size_t i = bl + 1; /* <base>.<digits>[.<digits>].rhea */
		while (i < nl - 5 && ((name[i] >= '0' && name[i] <= '9') || name[i] == '.'))
			i++;
		char full[PATH_MAX + 300];
		snprintf(full, sizeof(full), "%s%s%s", here ? "" : d, here ? "" : "/", name);
		struct stat st;
		if (i != nl - 5 || stat(full, &st) != 0)
			continue;
		if (since && (st.st_mtim.tv_sec < since->tv_sec ||
			      (st.st_mtim.tv_sec == since->tv_sec && st.st_mtim.tv_nsec < since->tv_nsec))) {
			(*stale)++;
			continue;
		}
		fn(full, arg);
		n++;
	}
	closedir(dp);
	return n;
}

int cli_exec_next(const char *path, const struct recording *r, char *next, size_t cap)
{
	if (!r->have_end || r->end.reason != RHEA_END_EXEC || cap < 64)
		return 0;
	uint32_t pid = r->hdr.pid;
	uint64_t exec_ns = r->end.time_ns;
	/* the exec on the wall clock, as this recording's header puts it */
	uint64_t exec_real = r->hdr.start_realtime_ns + (exec_ns > r->hdr.start_ns ? exec_ns - r->hdr.start_ns : 0);
	char base[PATH_MAX], name[PATH_MAX + 64];
	base_of(path, pid, base, sizeof(base));
	struct stat self;
	if (stat(path, &self) != 0)
		return 0;
	uint64_t best = UINT64_MAX;
	for (unsigned n = 0, misses = 0; n < 1000 && misses < MISSES_MAX; n++) {
		rhea_derived_name(name, sizeof(name), base, pid, n);
		struct stat st;
		if (stat(name, &st) != 0) {
			misses++;
			continue;
		}
		misses = 0;
		struct rhea_file_header h;
		if ((st.st_dev == self.st_dev && st.st_ino == self.st_ino) || cli_header_of(name, &h) != 0 ||
		    h.pid != pid || h.start_ns < exec_ns || h.start_ns - exec_ns > EXEC_GAP_MAX_NS)
			continue;
		if (!same_boot(exec_ns, exec_real, h.start_ns, h.start_realtime_ns) || h.start_ns >= best)
			continue;
		best = h.start_ns;
		snprintf(next, cap, "%s", name);
	}
	return best != UINT64_MAX;
}

void cli_free_images(struct report_image *im, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free((char *)im[k].path);
		free((char *)im[k].command);
	}
	free(im);
}

int cli_follow_exec(struct recording *r, struct report_image **before, size_t *n, int salvage)
{
	char next[PATH_MAX + 64], err[600];
	*before = NULL;
	*n = 0;
	while (cli_exec_next(r->path, r, next, sizeof(next))) {
		struct recording nr;
		if (recording_load(next, &nr, salvage, err, sizeof(err)) != 0) {
			cli_err("%s (the program %s exec'ed into): %s; the report is of %s", next, r->path, err,
				r->path);
			recording_free(&nr);
			return 0;
		}
		const char *cmd = recording_meta(r, "cmdline");
		struct report_image *more = realloc(*before, (*n + 1) * sizeof(**before));
		if (more)
			*before = more;
		char *p = more ? strdup(r->path) : NULL, *c = p && cmd ? strdup(cmd) : NULL;
		if (!p || (cmd && !c)) {
			free(p);
			recording_free(&nr);
			cli_err("out of memory");
			return -1;
		}
		more[(*n)++] = (struct report_image){p, c, r->hdr.pid};
		recording_free(r);
		*r = nr;
	}
	return 0;
}

/*
 * The recordings of the processes a recording's process started (forked
 * children, rhea record names them <base>.<pid>[.<n>].rhea): those next to
 * it of the same base whose header names its pid as their parent and
 * whose agent started while it was recorded (and on the same boot).  A
 * shell, make or a launcher's own recording is mostly its wait for them
 * (`sh -c 'python3 t.py; true'`: 259 ms in wait3, 0.25 ms of CPU), so the
 * report names them (cmd_report.c).  Their command lines come from their
 * first chunk's META, where the agent puts them (none read: NULL).  Sorted
 * by start; *n of them, cli_free_images.
 */
static char *first_cmdline(const char *path)
{
	struct rfile_reader *rd;
	if (rfile_open(path, &rd) != 0)
		return NULL;
	const void *p;
	size_t len, off = 0;
	char *cmd = NULL;
	const struct rhea_entry *e;
	if (rfile_next_chunk(rd, &p, &len) == RFILE_OK)
		while (!cmd && rfile_next_entry(p, len, &off, &e) == 1) {
			if (e->kind != RHEA_E_META || rfile_entry_check(e) != 0)
				continue;
			const char *k = (const char *)e + sizeof(struct rhea_meta);
			if (strcmp(k, "cmdline") == 0)
				cmd = strdup(k + strlen(k) + 1);
		}
	rfile_close(rd);
	return cmd;
}

struct child {
	uint64_t start;
	char *path;
	uint32_t pid;
};

static int by_start(const void *a, const void *b)
{
	const struct child *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* One recording of the directory for cli_children: kept when it is a child's. */
struct children_scan {
	const struct recording *r;
	uint64_t first, last;
	struct child *kids;
	size_t n, cap;
	int failed;
};

static void child_seen(const char *path, void *arg)
{
	struct children_scan *c = arg;
	const struct recording *r = c->r;
	struct rhea_file_header h;
	if (c->failed || cli_header_of(path, &h) != 0 || h.ppid != r->hdr.pid || h.pid == r->hdr.pid ||
	    h.start_ns < c->first || h.start_ns > c->last ||
	    !same_boot(r->hdr.start_ns, r->hdr.start_realtime_ns, h.start_ns, h.start_realtime_ns))
		return;
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 16;
		struct child *m = realloc(c->kids, nc * sizeof(*c->kids));
		if (!m) {
			c->failed = 1;
			return;
		}
		c->kids = m;
		c->cap = nc;
	}
	if (!(c->kids[c->n].path = strdup(path))) {
		c->failed = 1;
		return;
	}
	c->kids[c->n].pid = h.pid;
	c->kids[c->n++].start = h.start_ns;
}

int cli_children(const char *path, const struct recording *r, struct report_image **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	char base[PATH_MAX];
	base_of(path, r->hdr.pid, base, sizeof(base));
	struct children_scan c = {r, recording_start(r), r->have_end ? r->end.time_ns : r->last_ns, NULL, 0, 0, 0};
	int stale;
	cli_each_derived(base, NULL, child_seen, &c, &stale);
	if (!c.failed && c.n) {
		vec_sort(c.kids, c.n, sizeof(*c.kids), by_start);
		if (!(*out = calloc(c.n, sizeof(**out))))
			c.failed = 1;
	}
	for (size_t i = 0; i < c.n; i++) {
		if (!c.failed)
			(*out)[i] = (struct report_image){c.kids[i].path, first_cmdline(c.kids[i].path), c.kids[i].pid};
		else
			free(c.kids[i].path);
	}
	free(c.kids);
	if (c.failed)
		return -1;
	*n = c.n;
	return 0;
}

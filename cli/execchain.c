/*
 * execchain.c - one process's recordings across its execs.
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

#include <stdlib.h>

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

/* The header of the recording at path: 0, or -1 when it is none. */
static int header_of(const char *path, struct rhea_file_header *h)
{
	struct rfile_reader *rd;
	if (rfile_open(path, &rd) != 0)
		return -1;
	*h = *rfile_header(rd);
	rfile_close(rd);
	return 0;
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
		if ((st.st_dev == self.st_dev && st.st_ino == self.st_ino) || header_of(name, &h) != 0 ||
		    h.pid != pid || h.start_ns < exec_ns || h.start_ns - exec_ns > EXEC_GAP_MAX_NS)
			continue;
		/* the same boot: its start is as far after the exec by the wall
		 * clock as by the monotonic one (a second's leeway for NTP) */
		uint64_t by_mono = h.start_ns - exec_ns;
		uint64_t by_real = h.start_realtime_ns > exec_real ? h.start_realtime_ns - exec_real : 0;
		uint64_t off = by_real > by_mono ? by_real - by_mono : by_mono - by_real;
		if (off > 1000000000ull || h.start_ns >= best)
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
		more[(*n)++] = (struct report_image){p, c};
		recording_free(r);
		*r = nr;
	}
	return 0;
}

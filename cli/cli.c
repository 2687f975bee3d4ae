/* cli.c - helpers shared by the subcommands (see cli.h). */
#include "cli.h"
#include "model.h"
#include "recording.h"
#include "rfile.h"
#include "symbolize.h"
#include "vec.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <fcntl.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_err(const char *fmt, ...)
{
	va_list ap;
	fputs("rhea: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int64_t cli_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int cli_parse_int(const char *s, long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (end == s || *end || errno || x < lo || x > hi)
		return -1;
	*v = x;
	return 0;
}

int cli_bad_option(const char *cmd, char **argv, const char *shortopts)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	if (optopt && optopt != ':' && strchr(shortopts, optopt) && strncmp(arg, "--", 2) != 0)
		cli_err("%s: -%c wants a value (see rhea %s --help)", cmd, optopt, cmd);
	else if (optopt && strncmp(arg, "--", 2) == 0)
		cli_err("%s: %s wants a value (see rhea %s --help)", cmd, arg, cmd);
	else if (optopt)
		cli_err("%s: unknown option -%c (see rhea %s --help)", cmd, optopt, cmd);
	else
		cli_err("%s: unknown option %s (see rhea %s --help)", cmd, arg, cmd);
	return EXIT_BADINPUT;
}

int cli_parse_choice(const char *option, const char *s, const char *first, const char *second)
{
	if (strcmp(s, first) == 0)
		return 0;
	if (strcmp(s, second) == 0)
		return 1;
	cli_err("%s %s: want %s or %s", option, s, first, second);
	return -1;
}

int64_t cli_parse_duration(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	if (*end == 0 && v != 0)
		return -1; /* a unit, please: `-d 3` meant 3 ns, not 3 s */
	if (*end == 0 || strcmp(end, "ns") == 0)
		mul = 1;
	else if (strcmp(end, "us") == 0)
		mul = 1e3;
	else if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "s") == 0)
		mul = 1e9;
	else
		return -1;
	return (int64_t)(v * mul + 0.5);
}

int64_t cli_parse_size(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1024; break;
	case 'M': mul = 1024 * 1024; break;
	case 'G': mul = 1024.0 * 1024 * 1024; break;
	default: return -1;
	}
	if (*end && end[1] && strcasecmp(end + 1, "b") && strcasecmp(end + 1, "ib"))
		return -1;
	return (int64_t)(v * mul);
}

size_t cli_unique_paths(char **paths, size_t n)
{
	/* (each file looked at once: `rhea report out.*.rhea` of a build's
	 * thousand processes) */
	struct stat *seen = calloc(n ? n : 1, sizeof(*seen));
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = kept; /* (a missing file is kept, as no file: cli_load says so) */
		if (seen && stat(paths[i], &seen[kept]) != 0)
			memset(&seen[kept], 0, sizeof(seen[kept]));
		else if (seen)
			for (k = 0; k < kept; k++)
				if (seen[k].st_ino == seen[kept].st_ino && seen[k].st_dev == seen[kept].st_dev)
					break;
		if (k < kept) {
			cli_err("%s is %s again: read once", paths[i], paths[k]);
			continue;
		}
		paths[kept++] = paths[i];
	}
	free(seen);
	return kept;
}

int cli_load(const char *path, struct recording *r, int salvage)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		cli_err("%s: %s", path, strerror(errno));
		return EXIT_BADINPUT;
	}
	if (S_ISDIR(st.st_mode)) {
		cli_err("%s: is a directory, not a recording", path);
		return EXIT_BADINPUT;
	}
	char err[600];
	int rc = recording_load(path, r, salvage, err, sizeof(err));
	if (rc != 0) {
		if (rc == RFILE_ERR_TRUNCATED || rc == RFILE_ERR_CORRUPT)
			cli_err("%s: %s (--salvage reads what precedes it)", path, err);
		else
			cli_err("%s: %s", path, err);
		recording_free(r);
		return EXIT_BADINPUT;
	}
	return 0;
}

const char *cli_getenv(const char *name)
{
	return getenv(name);
}

/*
 * The hook-site correction (model_correct) for several recordings at once:
 * pooled over the processes of each program (recording_program's name),
 * so that a build's short compiler runs are corrected on the evidence of
 * all of them.  Returns the notes, one per program corrected ("NAME, N
 * processes: ..."), NULL-terminated (free with cli_free_notes), NULL when
 * out of memory.
 */
/* The models in the order of their programs' names (then as given). */
struct by_prog {
	char name[256];
	size_t k;
};

static int cmp_by_prog(const void *a, const void *b)
{
	const struct by_prog *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->k > y->k) - (x->k < y->k);
}

char **cli_correct_programs(struct model *ms, size_t n)
{
	char **notes = calloc(n + 1, sizeof(*notes));
	struct model **group = calloc(n ? n : 1, sizeof(*group));
	struct by_prog *order = calloc(n ? n : 1, sizeof(*order));
	size_t nnotes = 0;
	if (!notes || !group || !order) {
		free(notes);
		notes = NULL;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		recording_program(ms[k].rec, order[k].name, sizeof(order[k].name));
		order[k].k = k;
	}
	vec_sort(order, n, sizeof(*order), cmp_by_prog);
	for (size_t i = 0, j; i < n; i = j) {
		size_t g = 0;
		for (j = i; j < n && strcmp(order[j].name, order[i].name) == 0; j++)
			group[g++] = &ms[order[j].k];
		struct model_cut cuts[4];
		int ncuts = model_correct_pooled(group, g, cuts, 4);
		char note[1024];
		if (model_cut_note(group[0], cuts, ncuts, note, sizeof(note))) {
			size_t len = strlen(order[i].name) + strlen(note) + 64;
			char *s = malloc(len);
			if (s) {
				snprintf(s, len, "%s, %zu process%s: %s", order[i].name, g, g == 1 ? "" : "es", note);
				notes[nnotes++] = s;
			}
		}
	}
out:
	free(group);
	free(order);
	return notes;
}

void cli_free_notes(char **notes)
{
	for (size_t i = 0; notes && notes[i]; i++)
		free(notes[i]);
	free(notes);
}

int cli_copy_file(int in, const char *dst, mode_t mode)
{
	int out = in >= 0 ? open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) : -1, r = -1;
	char buf[65536];
	ssize_t n;
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) >= 0) {
		if (n == 0) {
			r = 0;
			break;
		}
		if (write(out, buf, (size_t)n) != n)
			break;
	}
	int e = errno;
	if (out >= 0 && close(out) != 0 && r == 0)
		r = -1, e = errno;
	if (in >= 0)
		close(in);
	errno = e;
	return r;
}

int cli_sysroot(const char *dir)
{
	int e = sym_set_default_root(dir);
	if (e == 0)
		return 0;
	cli_err("--sysroot %s: %s", dir, strerror(-e));
	return -1;
}

static int fs_uid = -1, fs_gid = -1;

void cli_fs_owner(int uid, int gid)
{
	fs_uid = uid;
	fs_gid = gid;
}

void cli_fs_enter(void)
{
	if (fs_uid >= 0) {
		setfsgid((gid_t)fs_gid);
		setfsuid((uid_t)fs_uid);
	}
}

void cli_fs_leave(void)
{
	if (fs_uid >= 0) {
		setfsuid(geteuid());
		setfsgid(getegid());
	}
}

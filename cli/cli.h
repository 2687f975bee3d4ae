/* cli.h - shared helpers of the rhea command's subcommands. */
#ifndef RHEA_CLI_H
#define RHEA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXIT_BADINPUT 2

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_attach(int argc, char **argv);

/* cmd_record.c, shared with attach: --hooks LIST into a class mask (-1 and
 * a message on error); librhea.so's absolute path; a recording's summary
 * line on stderr ("recorded PATH: ..." or, for a child, "  child PATH"). */
int cli_parse_hooks(const char *s, uint32_t *mask);
int cli_find_agent(char *out, size_t cap);
void cli_summarize(const char *path, int child);
/* "rhea: <whose> last N samples were recovered from <whose> memory" (n > 0;
 * whose: "its" or "their"; the agent's own: "the agent's", "its"). */
void cli_say_recovered(const char *whose, const char *mem, long n);
/* A finished recording rewritten smaller (compact_recording); a failure says
 * one line and leaves the file as it was.  root: NULL, or a process's
 * root when it has its own (compact_recording_root). */
void cli_compact(const char *path, const char *root);
/* The same for many recordings (a program's and its children's): the
 * first COMPACT_SAID failures are said one a line, the rest summed up by
 * cli_compact_said (a full disk fails them all alike). */
#define COMPACT_SAID 3
struct compact_tally {
	int failed;
	char last_err[512];
};
void cli_compact_tallied(const char *path, struct compact_tally *t);
void cli_compact_said(const struct compact_tally *t);
/* A recording is to be written at given: its absolute path in abs, its
 * directory writable, an existing file moved to FILE.old (said unless
 * quiet).  0, or -1 with one line said. */
int cli_output_ready(const char *given, char *abs, size_t cap, int quiet, int *moved);
/* After a run that left no recording at abs: the previous one (moved to
 * abs.old by cli_output_ready) back in its place. */
void cli_output_unkeep(const char *abs, int quiet);

/* A copy of what fd in reads (it is closed) at dst, a new file of that
 * mode (rhea attach: the agent, the recording out of a container, the
 * unwind tables into one).  0, or -1 with errno set. */
int cli_copy_file(int in, const char *dst, mode_t mode);
/* rhea attach, root, to a process in a user namespace of its own (a
 * rootless container): root has no uid there, and a file it makes in the
 * process's /tmp fails (EOVERFLOW).  cli_fs_owner names the process's user
 * (-1: none); between cli_fs_enter and cli_fs_leave the files made are
 * made as that user (setfsuid, setfsgid), and read with its rights. */
void cli_fs_owner(int uid, int gid);
void cli_fs_enter(void);
void cli_fs_leave(void);
/* --sysroot DIR of report and convert: every symbolizer looks for the
 * modules' files under dir first (sym_set_default_root).  0, or -1 (said). */
int cli_sysroot(const char *dir);
/* getenv as the settings getter core/paths.h's rhea_cache_base takes. */
const char *cli_getenv(const char *name);
/* cfiprebuild.c: build the unwind tables the CFI cache lacks for process
 * pid's mapped files, the agent (file agent) and the vDSO, before rhea
 * attach loads the agent (which would build them on a thread of the
 * program); says so when that took half a second or more, unless quiet.
 * export: NULL for a process that sees our files and our cache; for one
 * in another mount namespace, the directory (ours to write, in its /tmp)
 * its agent's cache is, where the tables it needs are copied (given to
 * user export_uid, -1: ours).  The number built. */
int cli_prebuild_cfi(pid_t pid, const char *agent, const char *export, int export_uid, int quiet);
/* cfiprune.c: the cache of compiled CFI tables back under
 * RHEA_CFI_CACHE_MAX (default 1G), least recently used first. */
void cli_prune_cfi_cache(void);

/* "10ms", "500us", "2s", "0" -> ns; -1 on error, or for a number other
 * than 0 without its unit (`-d 3` would have been 3 ns). */
int64_t cli_parse_duration(const char *s);
/* An option's value that is one of two words: 0 for first, 1 for second,
 * -1 with one line said ("--end x: want next or last") for anything else. */
int cli_parse_choice(const char *option, const char *s, const char *first, const char *second);
/* "8M", "64k", "1G", plain bytes -> bytes; -1 on error. */
int64_t cli_parse_size(const char *s);
/* Print "rhea: " + formatted message to stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* CLOCK_MONOTONIC in ns. */
int64_t cli_now_ns(void);
/* A whole number s in lo..hi into *v: 0, or -1 (nothing said). */
int cli_parse_int(const char *s, long lo, long hi, long *v);
/* What getopt_long refused (called with opterr 0, on its '?'): an unknown
 * option, or one without its value, in one line.  EXIT_BADINPUT. */
int cli_bad_option(const char *cmd, char **argv, const char *shortopts);
/* execchain.c: the recordings named <base>.<pid>[.<n>].rhea next to
 * base_path (children's, exec'd images'), each given to fn with arg; with
 * since, those older (earlier runs', compared to the nanosecond: a run that
 * started in the second the one before ended) are only counted in *stale.
 * How many were given. */
struct timespec;
int cli_each_derived(const char *base_path, const struct timespec *since, void (*fn)(const char *path, void *arg),
		     void *arg, int *stale);
/* execchain.c: what `rhea report` takes for every process of the run a
 * recording (of pid) belongs to: "BASE.rhea BASE.*.rhea", BASE without
 * the recording's own ".<pid>[.<n>]" when it has them. */
void cli_all_processes(const char *path, uint32_t pid, char *out, size_t cap);
/* execchain.c: the header of the recording at path: 0, or -1 when it is
 * none. */
struct rhea_file_header;
int cli_header_of(const char *path, struct rhea_file_header *h);
/* execchain.c: r (loaded from path) ended by exec, and the program the
 * process became left a recording: its path into next (cap bytes), 1;
 * else 0. */
struct recording;
int cli_exec_next(const char *path, const struct recording *r, char *next, size_t cap);
/* A recording that ended in an exec: on to the program the process
 * became, and the one that became, to the last one, which replaces *r; the
 * ones before it into *before (*n of them, cli_free_images).  A next
 * recording that cannot be read stops the chain there, said in one line.
 * 0, or -1 out of memory (said). */
struct report_image;
int cli_follow_exec(struct recording *r, struct report_image **before, size_t *n, int salvage);
void cli_free_images(struct report_image *im, size_t n);
/* The recordings of the processes r's process started (execchain.c): path
 * and command line each, by start, into *out (*n, cli_free_images).  0, or
 * -1 out of memory. */
int cli_children(const char *path, const struct recording *r, struct report_image **out, size_t *n);
/* Recordings named twice (`rhea report a.rhea a*.rhea`: one file, by its
 * device and inode) are read once, each later name said in one line and
 * taken out of paths[0..n): the number left. */
size_t cli_unique_paths(char **paths, size_t n);
/* Load a recording or print one line and return EXIT_BADINPUT. */
struct recording;
int cli_load(const char *path, struct recording *r, int salvage);
/* The hook-site correction of several recordings' models, pooled over the
 * processes of each program; its notes (cli.c). */
struct model;
char **cli_correct_programs(struct model *ms, size_t n);
void cli_free_notes(char **notes);

#endif

/*
 * recover.h - rhea record's side of core/salvage.h: after the program died
 * without writing its END, read what its agent had not written yet from the
 * memfd they shared, and append it to the recording.
 */
#ifndef RHEA_CLI_RECOVER_H
#define RHEA_CLI_RECOVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rfile.h"
#include "salvage.h"

struct recover_view {
	const char *map; /* the memfd, mapped read-only */
	size_t size;
	const struct rhea_salvage *h;
};

/* Map and check the region of process pid.  0, or -1 when there is nothing
 * to salvage (never set up, the agent ended the recording itself, another
 * process's, malformed: a program can scribble on it). */
int recover_open(int memfd, pid_t pid, struct recover_view *v);
void recover_close(struct recover_view *v);

/* Whether the region's recording is the file at path. */
int recover_is_for(const struct recover_view *v, const char *path);

/* What the file lacks, appended through w (whose file ends, whole, at byte
 * `at`): the stack nodes past those in the file, the buffered entries, the
 * threads' pending samples.  The number of samples added, or -1 on a write
 * error. */
long recover_append(const struct recover_view *v, struct rfile_writer *w, uint64_t at);

/*
 * Add the END of a process that ended without its agent writing one
 * (RHEA_END_F_OUTSIDE, reason and status as given), after what sv (may be
 * NULL) holds that the file lacks (then also RHEA_END_F_SALVAGED).  Only
 * when no END follows the last image's start (an exec writes END and the
 * new image its META), and only to a file whose chunks all read: a last
 * chunk cut short by SIGKILL in the middle of a write is cut off first
 * (nothing readable is lost), a corrupt file is left alone.  Returns the
 * samples recovered (>= 0), RECOVER_END_NONE when nothing was added, or
 * RECOVER_END_FAILED when writing failed.
 */
#define RECOVER_END_NONE (-1)
#define RECOVER_END_FAILED (-2)
long recover_end(const char *path, unsigned reason, int status, const struct recover_view *sv);
/* The same with the end waitpid reported (wstatus): EXIT with its status, or
 * SIGNAL with its number. */
long recover_end_waited(const char *path, int wstatus, const struct recover_view *sv);

/*
 * rhea record's collector of the other processes' memory: it listens on an
 * abstract unix socket (its name into name, cap >= 64, for the agent's
 * RHEA_SALVAGE_SOCK) and keeps each memfd an agent of the same user sends,
 * letting go of those whose process ended its recording itself.  finish
 * writes only to the recordings of the sender's pid named after base, the
 * recording rhea record named (<base>.<pid>[.<n>].rhea).  recover_collect_finish
 * stops listening and, for every process that is gone without writing its
 * END (SIGKILL), appends what its memory holds and an END: how it ended
 * when its parent reaped it (the parent's agent says so on the socket:
 * core/salvage.h, struct rhea_salvage_reaped) or rhea record did
 * (recover_collect_reaped: an orphan, rhea record being the subreaper),
 * else reason GONE (a parent that was not traced).  Returns the processes
 * so ended; *samples: the samples recovered; *by_record, *by_parent: how
 * many of them ended with the status rhea record or their parent's agent
 * reaped (the rest: GONE).
 * NULL from start: no collector (then finish does nothing).
 */
struct recover_collector;
/* compact: should rhea record die first, the keeper compacts the
 * recordings it ends (cli_compact), as rhea record would have. */
struct recover_collector *recover_collect_start(char *name, size_t cap, int root_memfd, int compact);
/* The keeper's process group (its pid), 0 without a collector: no child of
 * rhea record's, unless rhea record is the init of a pid namespace (a
 * container's first process), where every orphan comes to it. */
pid_t recover_keeper_group(const struct recover_collector *c);
/* The program rhea record started and its recording: should rhea record
 * die before it, the keeper ends that recording too (root_memfd). */
void recover_collect_root(struct recover_collector *c, pid_t pid, const char *path);
void recover_collect_reaped(struct recover_collector *c, pid_t pid, int status);
/* linger (rhea record --no-wait): the keeper stays for the processes still
 * running, and ends and compacts their recordings once they end. */
int recover_collect_finish(struct recover_collector *c, const char *base, int linger, long *samples,
			   int *by_record, int *by_parent);

#endif

/*
 * cmd_record.c - `rhea record [options] -- program [args]`: run a program
 * with librhea.so preloaded and report where its recordings went.
 *
 * The CLI passes the configuration to the agent through RHEA_* environment
 * variables (they survive fork and exec, so children get the same
 * settings).  The program's own LD_PRELOAD is kept, after the agent, so
 * that a preloaded allocator is what the agent's dlsym(RTLD_NEXT) finds.
 * The program's exit status is passed through (128+N when killed by signal
 * N, as shells do).
 */
#include "agentopts.h"
#include "cli.h"
#include "seccomp.h"
#include "hookfn.h"
#include "paths.h"
#include "recording.h"
#include "rfile.h"
#include "recover.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rhea record [options] [--] program [args...]\n"
		"\n"
		"Runs program with the rhea agent and writes a recording (default\n"
		"rhea-<program>-<pid>.rhea).  Children it forks or execs are traced too,\n"
		"each into <output>.<pid>.rhea.\n"
		"\n"
		"  -o, --output FILE    recording to write (an existing one is kept as FILE.old)\n"
		"  -i, --interval DUR   at most one capture per thread per DUR (default 1ms)\n"
		"      --hooks LIST     hook classes: alloc,lock,io,net,wait,mmap,time, 'all',\n"
		"                       or +class/-class to change the default (all but time)\n"
		"      --unwind MODE    dwarf (default: CFI, works without frame pointers) or fp\n"
		"      --depth N        deepest stack kept (default 256; deeper ones are\n"
		"                       truncated at the root and marked)\n"
		"      --min-block DUR  record blocking calls at least this long (default: interval)\n"
		"      --buffer SIZE    agent buffer memory (default 8M)\n"
		"      --sample DUR     sample threads that hit no hook after each DUR of CPU\n"
		"                       they use (default 10ms; 0 turns the sampler off)\n"
		"      --sample-main DUR  the same for the main thread (default: --sample)\n"
		"      --force-after DUR  capture a blocked thread not captured this long, without\n"
		"                       interrupting it (default 1s; 0: never)\n"
		"      --signal N       real-time signal for sampling (default: a free one)\n"
		"      --no-follow      do not trace child processes\n"
		"      --no-wait        return when program exits, even if processes it started\n"
		"                       still run (by default rhea record waits for them)\n"
		"      --no-compact     keep the recordings as the agent wrote them (by default,\n"
		"                       once finished, they are rewritten smaller, with CPU\n"
		"                       times to within 1/16 of each difference)\n"
		"  -q, --quiet          no summary line\n");
}

int cli_parse_hooks(const char *s, uint32_t *mask)
{
	uint32_t def = 0;
	for (int c = RHEA_C_ALLOC; c <= RHEA_C_MMAP; c++)
		def |= 1u << c;
	char *copy = strdup(s), *save = NULL;
	uint32_t m = (s[0] == '+' || s[0] == '-') ? def : 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int add = 1;
		if (*tok == '+' || *tok == '-')
			add = *tok++ == '+';
		uint32_t bits;
		if (strcmp(tok, "all") == 0)
			bits = def | (1u << RHEA_C_TIME);
		else if (strcmp(tok, "none") == 0)
			bits = 0, m = 0;
		else {
			int c = rhea_class_parse(tok);
			if (c < RHEA_C_ALLOC || c > RHEA_C_TIME) {
				cli_err("--hooks: unknown hook class '%s' (alloc, lock, io, net, wait, mmap, time)", tok);
				free(copy);
				return -1;
			}
			bits = 1u << c;
		}
		m = add ? (m | bits) : (m & ~bits);
	}
	free(copy);
	*mask = m;
	return 0;
}

/* librhea.so next to the rhea binary, or in ../lib/rhea/. */
int cli_find_agent(char *out, size_t cap)
{
	const char *env = getenv("RHEA_AGENT");
	if (env && *env) {
		if (realpath(env, out) && access(out, R_OK) == 0)
			return 0;
		cli_err("RHEA_AGENT=%s: %s", env, strerror(errno));
		return -1;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	char *dir = dirname(self);
	const char *cands[] = {"%s/librhea.so", "%s/../lib/rhea/librhea.so"};
	for (size_t i = 0; i < 2; i++) {
		char path[PATH_MAX + 64];
		snprintf(path, sizeof(path), cands[i], dir);
		if (access(path, R_OK) == 0 && realpath(path, out)) {
			(void)cap;
			return 0;
		}
	}
	cli_err("cannot find librhea.so next to %s (set RHEA_AGENT=/path/to/librhea.so)", self);
	return -1;
}

/* Is prog runnable: a path to an executable file, or a name in PATH?  Its
 * path into found. */
static int find_program(const char *prog, char *found, size_t cap, char *why, size_t whylen)
{
	struct stat st;
	if (strchr(prog, '/')) {
		if (stat(prog, &st) != 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			return -1;
		}
		if (S_ISDIR(st.st_mode) || access(prog, X_OK) != 0) {
			snprintf(why, whylen, "not an executable file");
			return -1;
		}
		snprintf(found, cap, "%s", prog);
		return 0;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char *copy = strdup(path), *save = NULL;
	for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
		char full[PATH_MAX];
		snprintf(full, sizeof(full), "%s/%s", *d ? d : ".", prog);
		if (stat(full, &st) == 0 && !S_ISDIR(st.st_mode) && access(full, X_OK) == 0) {
			snprintf(found, cap, "%s", full);
			free(copy);
			return 0;
		}
	}
	free(copy);
	snprintf(why, whylen, "no such program in PATH");
	return -1;
}

/* An ELF file without PT_INTERP and without a SONAME (which the dynamic
 * loader has): a statically linked program, plain or static-pie.  0 for
 * anything else, or what libelf cannot read. */
/* What the program at path asks of its loader: static (no PT_INTERP nor
 * SONAME), its interpreter's path ("" for none), its class and machine.
 * 0, or -1: not an ELF libelf can read. */
struct elf_kind {
	int is_static, elf64, x86_64;
	char interp[256];
};

static int elf_kind_of(const char *path, struct elf_kind *k)
{
	memset(k, 0, sizeof(*k));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph;
	int r = -1, dynamic = 1;
	GElf_Ehdr eh;
	if (e && elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh) && elf_getphdrnum(e, &nph) == 0) {
		r = 0;
		k->elf64 = gelf_getclass(e) == ELFCLASS64;
		k->x86_64 = eh.e_machine == EM_X86_64;
		dynamic = 0;
		for (size_t i = 0; i < nph && !dynamic; i++) {
			GElf_Phdr ph;
			dynamic = gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP;
			size_t len;
			const char *img = dynamic ? elf_rawfile(e, &len) : NULL;
			if (img && ph.p_offset < len && ph.p_filesz > 0 && ph.p_filesz <= len - ph.p_offset &&
			    ph.p_filesz < sizeof(k->interp))
				memcpy(k->interp, img + ph.p_offset, ph.p_filesz); /* (NUL included, or added: zeroed) */
		}
		for (Elf_Scn *scn = NULL; !dynamic && (scn = elf_nextscn(e, scn)) != NULL;) {
			GElf_Shdr sh;
			Elf_Data *d;
			GElf_Dyn dyn;
			if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNAMIC && (d = elf_getdata(scn, NULL)))
				for (int j = 0; !dynamic && gelf_getdyn(d, j, &dyn); j++)
					dynamic = dyn.d_tag == DT_SONAME;
		}
		k->is_static = !dynamic;
	}
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

/*
 * Can the dynamic loader put the agent into the program at path?  Not into
 * a statically linked ELF (no PT_INTERP, and no SONAME: the loader itself,
 * run as `ld.so prog`, has none either and honours LD_PRELOAD), and not
 * into a program the kernel runs in secure-execution mode (set-user-ID or
 * set-group-ID for another user or group, or with file capabilities): the
 * loader then ignores LD_PRELOAD paths with a slash.  Without this check
 * the program ran untraced and rhea could only say afterwards that no
 * recording came.  Scripts (#!) and files libelf cannot read are left to
 * the kernel.  0, or -1 with the reason in why.
 */
static int program_traceable(const char *path, char *why, size_t whylen)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	/* (set-ID bits mean nothing on a nosuid mount, or under no_new_privs) */
	struct statvfs fs;
	int setid_applies = !(statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID)) &&
			    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
	int suid = setid_applies && (st.st_mode & S_ISUID) && st.st_uid != geteuid();
	int sgid = setid_applies && (st.st_mode & S_ISGID) && st.st_gid != getegid();
	if (suid || sgid) {
		snprintf(why, whylen, "it is set-%s-ID, and the dynamic loader ignores LD_PRELOAD for it "
			 "(run rhea as its owner)", suid ? "user" : "group");
		return -1;
	}
	if (setid_applies && geteuid() != 0 && getxattr(path, "security.capability", NULL, 0) > 0) {
		snprintf(why, whylen, "it has file capabilities, and the dynamic loader ignores LD_PRELOAD for it");
		return -1;
	}
	struct elf_kind k;
	if (elf_kind_of(path, &k) != 0)
		return 0;
	if (!k.elf64 || !k.x86_64) {
		snprintf(why, whylen, "it is %s program, and the agent (librhea.so) is an x86-64 one",
			 !k.elf64 ? "a 32-bit" : "not an x86-64");
		return -1;
	}
	if (k.is_static) {
		snprintf(why, whylen, "it is statically linked, and the agent (librhea.so) can only be "
			 "loaded into a dynamically linked program");
		return -1;
	}
	/* glibc's loader is ld-linux-x86-64.so.2 (wherever it lives); musl's
	 * stops at the agent's glibc symbols ("Error relocating") and the
	 * program never runs */
	const char *base = strrchr(k.interp, '/');
	base = base ? base + 1 : k.interp;
	if (k.interp[0] && strncmp(base, "ld-linux-x86-64.so", 18) != 0) {
		snprintf(why, whylen, "its dynamic loader is %.120s, not glibc's, and the agent (librhea.so) is "
			 "built for glibc", k.interp);
		return -1;
	}
	return 0;
}

static void absolute(const char *path, char *out, size_t cap)
{
	if (path[0] == '/') {
		snprintf(out, cap, "%s", path);
		return;
	}
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), ".");
	if (snprintf(out, cap, "%s/%s", cwd, path) >= (int)cap)
		out[cap - 1] = 0;
}

int cli_output_ready(const char *given, char *abs, size_t cap, int quiet, int *moved)
{
	if (moved)
		*moved = 0;
	if (!*given) {
		cli_err("-o: an empty name");
		return -1;
	}
	absolute(given, abs, cap);
	struct stat st, lst;
	const char *shown = given; /* the name said: the link's file, for a link */
	if (lstat(abs, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		/* a link to a recording: the file it names is the one kept as
		 * .old and replaced (as rhea convert does); a dangling link is
		 * no place for one */
		char real[PATH_MAX];
		if (stat(abs, &st) != 0 || !realpath(abs, real)) {
			cli_err("%s: a symbolic link to nothing (%s)", given, strerror(errno));
			return -1;
		}
		snprintf(abs, cap, "%s", real);
		shown = abs;
	}
	char dirbuf[PATH_MAX];
	snprintf(dirbuf, sizeof(dirbuf), "%s", abs);
	const char *dir = dirname(dirbuf);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
		cli_err("%s: cannot write a recording in %s (%s)", given, dir,
			stat(dir, &st) != 0 ? strerror(errno) : "not a writable directory");
		return -1;
	}
	if (stat(abs, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			cli_err("%s: is a directory", given);
			return -1;
		}
		/* A recording is made beside its name and linked in when done,
		 * and what was there is kept as .old: a device or a pipe must not
		 * be moved (as root, -o /dev/full used to rename the device) */
		if (!S_ISREG(st.st_mode)) {
			cli_err("%s: not a regular file (a device, a pipe or a socket): -o names the file a recording "
				"is written to", given);
			return -1;
		}
		char old[PATH_MAX + 8];
		snprintf(old, sizeof(old), "%s.old", abs);
		if (rename(abs, old) != 0) {
			cli_err("%s: exists and cannot be moved to %s: %s", given, old, strerror(errno));
			return -1;
		}
		if (moved)
			*moved = 1;
		if (!quiet)
			fprintf(stderr, "rhea: kept the previous %s as %s.old\n", shown, shown);
	}
	return 0;
}

/* No new recording came: the one kept as .old goes back to its name. */
void cli_output_unkeep(const char *abs, int quiet)
{
	char old[PATH_MAX + 8];
	snprintf(old, sizeof(old), "%s.old", abs);
	if (access(abs, F_OK) != 0 && rename(old, abs) == 0 && !quiet)
		fprintf(stderr, "rhea: %s is the previous recording again\n", abs);
}

/* The recording's path: -o as given (made absolute), or
 * ./rhea-<program>-<pid>.rhea (the child computes it before exec, the
 * parent after fork: the same name). */
static void output_path(char *out, size_t cap, const char *given, const char *prog, pid_t pid)
{
	if (given) {
		snprintf(out, cap, "%s", given);
		return;
	}
	char p0[PATH_MAX], cwd[PATH_MAX];
	snprintf(p0, sizeof(p0), "%s", prog);
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), ".");
	if (snprintf(out, cap, "%s/rhea-%s-%d.rhea", cwd, basename(p0), (int)pid) >= (int)cap)
		out[cap - 1] = 0;
}

static volatile pid_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

/*
 * The agent writes the END entry when the program exits through libc or
 * dies of a signal it can catch.  A program that leaves by a raw
 * exit_group (Go's runtime always does) or is killed with SIGKILL leaves
 * a recording without one, which read as "still running, or killed".  So
 * rhea record adds the end waitpid told it, marked as seen from outside,
 * after what the agent had not written yet, read from the memory they
 * shared (cli/recover.c, recover_end).
 */
static long salvaged_samples; /* samples recover_append added */

/* "rhea: N child process(es) ...", when N > 0. */
static void say_children(int n, const char *one, const char *many)
{
	if (n > 0)
		fprintf(stderr, "rhea: %d child process%s %s\n", n, n == 1 ? "" : "es", n == 1 ? one : many);
}

static void append_outside_end(const char *path, int status, const struct recover_view *sv)
{
	long n = recover_end_waited(path, status, sv && recover_is_for(sv, path) ? sv : NULL);
	if (n > 0)
		salvaged_samples += n;
	else if (n == RECOVER_END_FAILED)
		cli_err("%s: could not add the end of the program to the recording", path);
}

/* The summary line of a loaded recording (counts only), as label says
 * ("recorded ", "  child ", "  exec'd "); child: how it ended may be told
 * by rhea record. */
static void summarize_loaded(const char *path, const struct recording *r, const char *label, int child)
{
	uint64_t captures = r->nsamples + r->nmerged;
	/* how a child ended, when its agent could not say it */
	char how[64] = "";
	if (child && !r->have_end && r->end_outside && r->oend.reason == RHEA_END_SIGNAL)
		snprintf(how, sizeof(how), ", killed by signal %d", (int)r->oend.status);
	else if (child && !r->have_end && r->end_outside && r->oend.reason == RHEA_END_EXIT)
		snprintf(how, sizeof(how), ", exited with %d", (int)r->oend.status);
	/* what the agent dropped, when it could say (its statistics come at
	 * the end: a recording cut short has none) */
	char dropped[48] = "";
	if (r->have_stats)
		snprintf(dropped, sizeof(dropped), ", %llu dropped", (unsigned long long)r->stats.dropped);
	char unwritten[160] = "";
	if (recording_write_error(r))
		snprintf(unwritten, sizeof(unwritten), ", cut short: the agent could not write it (%s)",
			 recording_write_error(r));
	fprintf(stderr, "rhea: %s%s: %llu sample%s (%llu capture%s) from %zu thread%s%s%s%s\n",
		label, path, (unsigned long long)r->nsamples, r->nsamples == 1 ? "" : "s",
		(unsigned long long)captures, captures == 1 ? "" : "s", r->nthreads, r->nthreads == 1 ? "" : "s",
		dropped, how,
		r->have_end		? ""
		: recording_write_error(r) ? unwritten
		: r->end_outside && r->end_recovered ? ", ended by rhea (the agent's unwritten records recovered)"
		: r->end_outside			   ? ", cut short (the agent did not write the end)"
						   : ", cut short");
	if (r->stats.sample_blocked)
		fprintf(stderr, "rhea: %s%s: %llu thread%s blocked the sampling signal: what %s ran between hooks "
			"was not sampled\n", child ? label : "", path, (unsigned long long)r->stats.sample_blocked,
			r->stats.sample_blocked == 1 ? "" : "s", r->stats.sample_blocked == 1 ? "it" : "they");
}

/* One summary line for a recording. */
void cli_say_recovered(const char *whose, const char *mem, long n)
{
	if (n == 1)
		fprintf(stderr, "rhea: %s last sample was recovered from %s memory\n", whose, mem);
	else if (n > 1)
		fprintf(stderr, "rhea: %s last %ld samples were recovered from %s memory\n", whose, n, mem);
}

/* A recording's counts, for its summary line, or why they could not be read. */
struct counted {
	struct recording r;
	int loaded;
	char err[512];
};

static void count_recording(const char *path, struct counted *c)
{
	c->loaded = recording_load_counts(path, &c->r, 1, c->err, sizeof(c->err)) == 0;
	if (!c->loaded)
		recording_free(&c->r);
}

static void summarize_counted(const char *path, struct counted *c, int child)
{
	if (c->loaded)
		summarize_loaded(path, &c->r, child ? "  child " : "recorded ", child);
	else
		cli_err("%s: %s", path, c->err);
}

void cli_summarize(const char *path, int child)
{
	struct counted c;
	count_recording(path, &c);
	summarize_counted(path, &c, child);
	if (c.loaded)
		recording_free(&c.r);
}

/* path relative to the current directory when it is below it (for the
 * commands the summary suggests): a pointer into path. */
static const char *shown_path(const char *path)
{
	char cwd[PATH_MAX];
	size_t cl = getcwd(cwd, sizeof(cwd)) ? strlen(cwd) : 0;
	if (cl && strncmp(path, cwd, cl) == 0 && path[cl] == '/')
		return path + cl + 1;
	return path;
}

/*
 * The program rhea record ran exec'ed (a wrapper: env, a shell script's
 * exec, a version manager's shim): the recordings of the programs the
 * process became, in order, a line each after its own (execchain.c), and
 * which one `rhea report` shows.
 */
static void summarize_execs(const char *path, const struct recording *first)
{
	struct recording r;
	char err[512], cur[PATH_MAX + 64], next[PATH_MAX + 64];
	snprintf(cur, sizeof(cur), "%s", path);
	if (!cli_exec_next(cur, first, next, sizeof(next)))
		return;
	memset(&r, 0, sizeof(r)); /* (nothing to free before the first load) */
	size_t n = 0;
	do {
		recording_free(&r);
		if (recording_load_counts(next, &r, 1, err, sizeof(err)) != 0) {
			cli_err("%s: %s", next, err);
			break;
		}
		summarize_loaded(next, &r, "  exec'd ", 1);
		snprintf(cur, sizeof(cur), "%s", next);
		n++;
	} while (cli_exec_next(cur, &r, next, sizeof(next)));
	recording_free(&r);
	if (n)
		fprintf(stderr, "rhea: the process exec'ed %zu time%s: rhea report %s shows the last program, "
				"--no-follow-exec the first\n", n, n == 1 ? "" : "s", shown_path(path));
}

/* The child recordings summarize_children lists; the root's own (its
 * exec'd images: summarize_execs said them) are left out. */
struct child_list {
	pid_t root;
	int n;
};

static void summarize_child(const char *path, void *arg)
{
	struct child_list *cl = arg;
	struct rhea_file_header h;
	if (cli_header_of(path, &h) == 0 && h.pid == (uint32_t)cl->root)
		return;
	if (cl->n++ <= 20)
		cli_summarize(path, 1);
}

static void summarize_children(const char *base_path, struct timespec since, pid_t root)
{
	struct child_list cl = {root, 0};
	int stale;
	cli_each_derived(base_path, &since, summarize_child, &cl, &stale);
	int n = cl.n;
	if (n > 21)
		fprintf(stderr, "rhea:   ... and %d more child recordings\n", n - 21);
	if (n == 0)
		return;
	/* how to see them all, with paths as short as the current directory allows */
	char all[2 * PATH_MAX + 16];
	cli_all_processes(shown_path(base_path), 0, all, sizeof(all));
	fprintf(stderr, "rhea: all its processes: rhea report %s (rhea convert ... for one trace)%s\n", all,
		stale ? "; that pattern also matches recordings of earlier runs" : "");
}

static struct compact_tally compacted;

static void compact_child(const char *path, void *arg)
{
	(void)arg;
	cli_compact_tallied(path, &compacted);
}

/*
 * The processes the program left running.  rhea record is their subreaper
 * (PR_SET_CHILD_SUBREAPER): a descendant whose parent ends becomes its
 * child, so "the program's descendants still run" is "rhea record still
 * has children".  It waits for them, as strace -f does, so that their
 * recordings are whole when it returns, and finishes the recording of one
 * killed with SIGKILL from its memory, with how it ended (it reaped it:
 * the status is known, where a parent that reaps its own child keeps it
 * to itself).  SIGINT, SIGTERM or SIGHUP stop the waiting: what still runs
 * records on into its own file.  All signals it waits for are blocked but
 * in sigsuspend, so none slips in between a look and the sleep.
 */
static volatile sig_atomic_t stop_signal;

static void note_stop(int sig)
{
	stop_signal = sig;
}

static void note_child(int sig)
{
	(void)sig;
}

/* "pid 12, 34" of up to 8 of rhea record's children (any thread's) but
 * the keeper (process group keeper): how many there are. */
static int children_list(char *out, size_t cap, pid_t keeper)
{
	int n = 0;
	size_t len = 0;
	out[0] = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		FILE *f = fopen(path, "re");
		int pid;
		while (f && fscanf(f, "%d", &pid) == 1) {
			if (keeper > 0 && getpgid(pid) == keeper)
				continue;
			if (n++ < 8 && len < cap)
				len += (size_t)snprintf(out + len, cap - len, "%s%d", n > 1 ? ", " : "pid ", pid);
			else if (n == 9 && len < cap)
				len += (size_t)snprintf(out + len, cap - len, ", ...");
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static void wait_descendants(struct recover_collector *collector, const char *prog, int quiet)
{
	static const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
	sigset_t block, old;
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&block, sigs[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = sigs[i] == SIGCHLD ? note_child : note_stop;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
	sigset_t wait_mask = old;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigdelset(&wait_mask, sigs[i]);
	int said = 0;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			recover_collect_reaped(collector, p, st);
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			break; /* ECHILD: nothing runs any more */
		/* As the init of a pid namespace (a container's first process)
		 * rhea record has the keeper for a child too, which waits for
		 * it: it was waiting for itself. */
		char pids[160];
		pid_t keeper = getpid() == 1 ? recover_keeper_group(collector) : 0;
		if (keeper > 0 && children_list(pids, sizeof(pids), keeper) == 0)
			break;
		if (stop_signal) {
			if (!quiet) {
				children_list(pids, sizeof(pids), keeper);
				fprintf(stderr, "rhea: stopped waiting (%s); still running, recording to their own files: %s\n",
					strsignal(stop_signal), pids);
			}
			break;
		}
		if (!said && !quiet) {
			children_list(pids, sizeof(pids), keeper);
			fprintf(stderr, "rhea: %s has ended; waiting for what it left running (%s%sCtrl-C stops waiting)\n",
				prog, pids, pids[0] ? "; " : "");
		}
		said = 1;
		sigsuspend(&wait_mask);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static void set_env(void *arg, const char *key, const char *val)
{
	(void)arg;
	setenv(key, val, 1);
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"no-follow", no_argument, NULL, 'F'},
		{"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
		{"no-wait", no_argument, NULL, 'W'},       {"no-compact", no_argument, NULL, 'C'},
		AGENT_LONG_OPTIONS,                       {NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	struct agent_opts ao;
	agent_opts_init(&ao);
	int quiet = 0, no_wait = 0, compact = 1, c;
	optind = 1;
	opterr = 0; /* one line of our own (cli_bad_option) */
	static const char shortopts[] = "+o:i:qh";
	while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'F': ao.follow = 0; break;
		case 'q': quiet = 1; break;
		case 'W': no_wait = 1; break;
		case 'C': compact = 0; break;
		case 'h': usage(stdout); return 0;
		default:
			if (agent_opts_other(&ao, c, optarg, "record", argv, shortopts) != 0)
				return EXIT_BADINPUT;
		}
	}
	if (optind >= argc) {
		cli_err("record: no program given (rhea record -- program [args])");
		return EXIT_BADINPUT;
	}
	char **prog = argv + optind;
	char why[256], prog_path[PATH_MAX];
	if (find_program(prog[0], prog_path, sizeof(prog_path), why, sizeof(why)) < 0) {
		cli_err("%s: %s", prog[0], why);
		return EXIT_BADINPUT;
	}
	if (program_traceable(prog_path, why, sizeof(why)) < 0) {
		cli_err("cannot trace %s: %s", prog[0], why);
		return EXIT_BADINPUT;
	}
	char agent[PATH_MAX];
	if (cli_find_agent(agent, sizeof(agent)) < 0)
		return EXIT_BADINPUT;

	char out_abs[PATH_MAX];
	int kept_old = 0;
	if (output) {
		if (cli_output_ready(output, out_abs, sizeof(out_abs), quiet, &kept_old) != 0)
			return EXIT_BADINPUT;
	} else if (access(".", W_OK) != 0) {
		cli_err("cannot write a recording in the current directory (use -o)");
		return EXIT_BADINPUT;
	}

	/* Descriptors: rhea record holds a few of its own (the salvage memfd,
	 * the collector's socket, pipes) beside the program's, which must see
	 * its own limit (ulimit -n 5 made pipe() fail here, "Too many open
	 * files", status 1, the program never run).  Ours is raised as far as
	 * the hard limit lets it; the child gets the one it was given. */
	struct rlimit nofile, given_nofile;
	int have_nofile = getrlimit(RLIMIT_NOFILE, &given_nofile) == 0;
	if (have_nofile) {
		nofile = given_nofile;
		if (nofile.rlim_cur < 4096 && nofile.rlim_cur < nofile.rlim_max) {
			nofile.rlim_cur = nofile.rlim_max < 4096 ? nofile.rlim_max : 4096;
			setrlimit(RLIMIT_NOFILE, &nofile);
		}
		if (nofile.rlim_cur < 16) {
			cli_err("record: %llu open files at most (ulimit -n): rhea record needs 16, the program its own",
				(unsigned long long)nofile.rlim_cur);
			return EXIT_BADINPUT;
		}
	}

	cli_prune_cfi_cache();
	char preload[PATH_MAX * 2];
	const char *old = getenv("LD_PRELOAD");
	snprintf(preload, sizeof(preload), "%s%s%s", agent, old && *old ? ":" : "", old ? old : "");
	char buf[64];
	setenv("LD_PRELOAD", preload, 1);
	agent_opts_each(&ao, set_env, NULL);
	unsetenv("RHEA_DISABLE");
	long filters = seccomp_filters(getpid());
	if (filters >= 0) {
		snprintf(buf, sizeof(buf), "%ld", filters);
		setenv("RHEA_SECCOMP_BASE", buf, 1);
	} else {
		unsetenv("RHEA_SECCOMP_BASE");
	}

	/* The agent keeps its buffers in this memfd, which it opens through
	 * /proc (the program's descriptors are left alone): what a SIGKILL
	 * leaves unwritten is read from it afterwards (core/salvage.h).
	 * Without it, recording works as before. */
	int salvage_fd = memfd_create(RHEA_SALVAGE_NAME, MFD_CLOEXEC);
	char salvage_path[64] = "";
	if (salvage_fd >= 0)
		snprintf(salvage_path, sizeof(salvage_path), "/proc/%d/fd/%d", (int)getpid(), salvage_fd);
	/* and the processes it starts send theirs here */
	char sock_name[64];
	struct recover_collector *collector = recover_collect_start(sock_name, sizeof(sock_name), salvage_fd, compact);

	struct timespec started;
	clock_gettime(CLOCK_REALTIME_COARSE, &started);
	/* the program's orphans become ours: wait_descendants */
	int wait_children = ao.follow && !no_wait && prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
	int sync_pipe[2];
	if (pipe2(sync_pipe, O_CLOEXEC) != 0) {
		cli_err("pipe: %s", strerror(errno));
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		cli_err("fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		char path[PATH_MAX + 64];
		output_path(path, sizeof(path), output ? out_abs : NULL, prog[0], getpid());
		setenv("RHEA_OUTPUT", path, 1);
		/* where it is for us: a process that sees another directory at
		 * that path writes through our root (agent.c, output_home) */
		char dir[PATH_MAX + 64];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');
		struct stat ds;
		if (slash && (slash[slash == dir] = 0, stat(dir, &ds) == 0)) {
			snprintf(buf, sizeof(buf), "%d:%llu:%llu", (int)getppid(), (unsigned long long)ds.st_dev,
				 (unsigned long long)ds.st_ino);
			setenv("RHEA_OUTPUT_HOME", buf, 1);
		} else {
			unsetenv("RHEA_OUTPUT_HOME");
		}
		snprintf(buf, sizeof(buf), "%d", (int)getpid());
		setenv("RHEA_ROOT_PID", buf, 1);
		if (salvage_path[0])
			setenv(RHEA_SALVAGE_ENV, salvage_path, 1);
		else
			unsetenv(RHEA_SALVAGE_ENV);
		if (collector)
			setenv(RHEA_SALVAGE_SOCK_ENV, sock_name, 1);
		else
			unsetenv(RHEA_SALVAGE_SOCK_ENV);
		if (have_nofile)
			setrlimit(RLIMIT_NOFILE, &given_nofile);
		execvp(prog[0], prog);
		int e = errno;
		if (write(sync_pipe[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(sync_pipe[1]);
	child_pid = pid;
	int exec_errno = 0;
	if (read(sync_pipe[0], &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno)) {
		waitpid(pid, NULL, 0);
		cli_err("%s: cannot run: %s", prog[0], strerror(exec_errno));
		return EXIT_BADINPUT;
	}
	close(sync_pipe[0]);
	char path[PATH_MAX + 64];
	output_path(path, sizeof(path), output ? out_abs : NULL, prog[0], pid);
	recover_collect_root(collector, pid, path); /* if we die first, the keeper ends it */
	signal(SIGINT, SIG_IGN); /* the terminal sends it to the program too */
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTERM, forward);
	signal(SIGHUP, forward);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	child_pid = 0; /* reaped: its pid may name another process from now on */
	int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	struct recover_view sv;
	int have_sv = recover_open(salvage_fd, pid, &sv) == 0;
	if (access(path, F_OK) == 0)
		append_outside_end(path, status, have_sv ? &sv : NULL);
	/* the programs it exec'ed into: <base>.<pid>[.<n>].rhea (agent.c,
	 * rhea_derived_name); the last one's end is the process's */
	for (unsigned n = 0; n < 1000; n++) {
		char img[PATH_MAX + 96];
		rhea_derived_name(img, sizeof(img), path, (unsigned long)pid, n);
		struct stat st;
		if (stat(img, &st) != 0)
			break;
		if (st.st_mtim.tv_sec >= started.tv_sec)
			append_outside_end(img, status, have_sv ? &sv : NULL);
	}
	if (have_sv)
		recover_close(&sv);
	if (salvage_fd >= 0)
		close(salvage_fd);
	if (wait_children)
		wait_descendants(collector, prog[0], quiet);
	long child_samples = 0;
	int by_record = 0, by_parent = 0;
	int children_ended =
		recover_collect_finish(collector, path, no_wait && ao.follow, &child_samples, &by_record, &by_parent);
	/* The summary's counts, read before the rewrite, which keeps them (it
	 * checks that its read-back has as many samples and captures): the
	 * agent's file decodes three times faster than the rewritten one (on
	 * bench W2, 1.5 ms against 4.8), and the summary of the exec'd images
	 * starts from the same load. */
	struct counted root = {.loaded = 0};
	int have_root = !quiet && access(path, F_OK) == 0;
	if (have_root)
		count_recording(path, &root);
	if (compact) { /* the finished ones: a recording without its END is left alone */
		int stale;
		if (access(path, F_OK) == 0)
			cli_compact_tallied(path, &compacted);
		if (ao.follow)
			cli_each_derived(path, &started, compact_child, NULL, &stale);
		cli_compact_said(&compacted);
	}
	int none = access(path, F_OK) != 0;
	if (none) {
		/* (said even with -q: the run did not do what it was for; the
		 * status says so when the program's does not).  An agent that
		 * switched itself off said why on the program's stderr, above;
		 * one that never started said nothing. */
		cli_err("no recording was written to %s (the agent switched itself off, as it said above, or never started: "
			"a statically linked interpreter, LD_PRELOAD taken out of the environment)",
			path);
		if (kept_old)
			cli_output_unkeep(path, 0);
		if (rc == 0)
			rc = EXIT_BADINPUT;
	}
	if (!quiet) {
		if (WIFSIGNALED(status))
			fprintf(stderr, "rhea: %s was killed by signal %d (%s)\n", prog[0], WTERMSIG(status),
				strsignal(WTERMSIG(status)));
		if (salvaged_samples > 0)
			cli_say_recovered("the agent's", "its", salvaged_samples);
		if (!none && have_root) {
			summarize_counted(path, &root, 0);
			if (ao.follow && root.loaded)
				summarize_execs(path, &root.r);
		}
		say_children(children_ended - by_record - by_parent, "gone without an end (SIGKILL?)",
			     "gone without an end (SIGKILL?)");
		say_children(by_record, "ended without writing an end (rhea record reaped it)",
			     "ended without writing an end (rhea record reaped them)");
		say_children(by_parent, "ended without writing an end (its parent reaped it)",
			     "ended without writing an end (their parents reaped them)");
		if (child_samples > 0)
			cli_say_recovered(children_ended == 1 ? "its" : "their", children_ended == 1 ? "its" : "their",
					  child_samples);
		if (ao.follow)
			summarize_children(path, started, pid);
	}
	if (root.loaded)
		recording_free(&root.r);
	return rc;
}

/*
 * cmd_attach.c - `rhea attach PID`: record a running process for a while,
 * then leave it as it was (DESIGN.md 1.8).
 *
 * The CLI prepares a directory the agent reads (agent/attach.c says what is
 * in it), has the process load librhea.so from there (inject.c), waits for
 * the agent's "started", lets it record until --duration has passed or
 * Ctrl-C, writes a byte to the control FIFO and waits for "stopped".  If
 * the CLI dies, the FIFO loses its writer and the agent stops by itself.
 */
#include "agentopts.h"
#include "cli.h"
#include "hookfn.h"
#include "inject.h"
#include "paths.h"
#include "recover.h"
#include "symbolize.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rhea attach [options] PID\n"
		"\n"
		"Loads the agent into the running process PID, records it until --duration\n"
		"has passed or Ctrl-C, then stops: the hooks are taken out again and the\n"
		"process goes on as it was.  Needs the right to ptrace PID (same user and\n"
		"kernel.yama.ptrace_scope 0, or root; rhea says what refused it).\n"
		"\n"
		"  -o, --output FILE    recording to write (default rhea-<name>-<pid>.rhea)\n"
		"  -d, --duration DUR   stop after DUR (default: at Ctrl-C, or when PID ends)\n"
		"      --no-compact     keep the recording as the agent wrote it (see rhea record)\n"
		"  -q, --quiet          no messages but errors\n"
		"  -i, --interval, --hooks, --unwind, --depth, --min-block, --buffer, --sample,\n"
		"  --sample-main, --force-after, --signal: as for rhea record\n");
}

static volatile int stop_asked; /* (an int: sig_atomic_t is one) */
static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* Running (a zombie has ended: its parent has not reaped it yet). */
static int alive(pid_t pid)
{
	return (kill(pid, 0) == 0 || errno == EPERM) && !inject_task_gone(pid, pid);
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The agent's status line ("started", "stopped", "failed: ..."). */
static int read_status(const char *dir, char *buf, size_t cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_STATUS, dir);
	FILE *f = fopen(path, "r");
	buf[0] = 0;
	if (!f)
		return -1;
	if (!fgets(buf, (int)cap, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* Wait up to ms for a status starting with one of the words (or the
 * process's end): the status seen, or "" */
static const char *wait_status(const char *dir, pid_t pid, long ms, const char *w1, const char *w2, char *buf,
			       size_t cap)
{
	for (long t = 0; t <= ms; t += 10) {
		if (read_status(dir, buf, cap) == 0 &&
		    ((w1 && strncmp(buf, w1, strlen(w1)) == 0) || (w2 && strncmp(buf, w2, strlen(w2)) == 0)))
			return buf;
		if (!alive(pid))
			break;
		nap_ms(10);
	}
	buf[0] = 0;
	return buf;
}

/* The agent's cache of unwind tables in the attach directory (dirfd, dir
 * its path), for a process in a container: RHEA_ATTACH_CACHE/cfi, given
 * to user uid (-1: ours), its path into export.  0, or -1 (no cache then). */
static int agent_cache(int dirfd, int uid, const char *dir, char *export, size_t cap)
{
	if (dirfd < 0 || mkdirat(dirfd, RHEA_ATTACH_CACHE, 0755) != 0 ||
	    mkdirat(dirfd, RHEA_ATTACH_CACHE "/cfi", 0755) != 0 ||
	    (uid >= 0 && (fchownat(dirfd, RHEA_ATTACH_CACHE, (uid_t)uid, (gid_t)-1, 0) != 0 ||
			  fchownat(dirfd, RHEA_ATTACH_CACHE "/cfi", (uid_t)uid, (gid_t)-1, 0) != 0)) ||
	    (size_t)snprintf(export, cap, "%s/" RHEA_ATTACH_CACHE "/cfi", dir) >= cap) {
		export[0] = 0;
		return -1;
	}
	return 0;
}

/* Remove the attach directory name (in tmpfd, its files in dirfd): by
 * descriptors, which outlive a process whose /proc/PID/root led there.
 * The cache's tables are whatever the prebuild and the agent put there. */
static void cleanup(int tmpfd, int dirfd, const char *name)
{
	const char *files[] = {RHEA_ATTACH_FILES, "out.rhea"};
	for (size_t i = 0; dirfd >= 0 && i < sizeof(files) / sizeof(files[0]); i++)
		unlinkat(dirfd, files[i], 0);
	int cfd = dirfd >= 0 ? openat(dirfd, RHEA_ATTACH_CACHE "/cfi", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
	for (struct dirent *e; d && (e = readdir(d)) != NULL;)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(cfd, e->d_name, 0);
	if (d)
		closedir(d);
	else if (cfd >= 0)
		close(cfd);
	if (dirfd >= 0) {
		unlinkat(dirfd, RHEA_ATTACH_CACHE "/cfi", AT_REMOVEDIR);
		unlinkat(dirfd, RHEA_ATTACH_CACHE, AT_REMOVEDIR);
	}
	if (tmpfd >= 0)
		unlinkat(tmpfd, name, AT_REMOVEDIR);
}

/*
 * A process in another mount namespace (a container) cannot see our /tmp:
 * its attach directory goes into its own /tmp, reached through
 * /proc/PID/root, and the paths written for the agent are its view of
 * them.  Its recording is written there too and copied out at the end.
 * In another PID namespace, the agent knows itself by its pid there.
 */
static int other_ns(pid_t pid, const char *ns)
{
	char path[64], self[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	snprintf(self, sizeof(self), "/proc/self/ns/%s", ns);
	return stat(path, &a) == 0 && stat(self, &b) == 0 && (a.st_ino != b.st_ino || a.st_dev != b.st_dev);
}

static long pid_inside(pid_t pid)
{
	char path[64], line[256];
	long inner = pid;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
				inner = v; /* the last one: the innermost namespace */
		}
	if (f)
		fclose(f);
	return inner;
}


static void put_conf(void *arg, const char *key, const char *val)
{
	fprintf(arg, "%s=%s\n", key, val);
}

/*
 * Is rhea's agent in pid already, and busy?  An attach loads a copy of
 * librhea.so from its own directory, which is removed when it detaches:
 * a copy mapped from /tmp/rhea-attach.* whose file is gone is a finished
 * attach, and the process can be attached again (by that copy, started
 * again: spent_agents).  While such a copy records again, its ticker
 * thread runs.
 */
enum agent_state { AGENT_NONE, AGENT_RECORDED, AGENT_ATTACHED, AGENT_DETACHING };

static int agent_line(const char *line, void *arg)
{
	enum agent_state *st = arg;
	const char *p = strstr(line, "/" RHEA_ATTACH_AGENT);
	if (!p)
		return 0;
	const char *path = strchr(line, '/');
	if (strncmp(path, RHEA_ATTACH_DIR_PREFIX, sizeof(RHEA_ATTACH_DIR_PREFIX) - 1) != 0) {
		*st = AGENT_RECORDED;
		return 1;
	}
	if (!strstr(p, "(deleted)"))
		*st = AGENT_ATTACHED;
	return 0;
}

/* A line of this attach's agent (or an earlier one's), wherever it is. */
static int attach_agent_line(const char *line, void *arg)
{
	(void)arg;
	const char *path = strchr(line, '/');
	return path && strstr(path, "/" RHEA_ATTACH_AGENT) &&
	       strncmp(path, RHEA_ATTACH_DIR_PREFIX, sizeof(RHEA_ATTACH_DIR_PREFIX) - 1) == 0;
}

/* The agent says "exec" before the system call, not after it: the kernel
 * may still be loading the new image, whose name /proc then does not yet
 * show ("now attachwaits" for a process that exec'ed sleep).  The exec is
 * done once the agent is gone from its maps (or the process is: a failed
 * exec's _exit).  At most a second. */
static void wait_exec_done(pid_t pid)
{
	for (int t = 0; t < 50 && inject_maps_each(pid, attach_agent_line, NULL) == 1; t++)
		nap_ms(20);
}

static enum agent_state agent_in(pid_t pid)
{
	enum agent_state st = AGENT_NONE;
	inject_maps_each(pid, agent_line, &st);
	if (st != AGENT_NONE)
		return st;
	char task[64];
	snprintf(task, sizeof(task), "/proc/%d/task", (int)pid);
	DIR *d = opendir(task);
	for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
		char path[360], name[32] = "";
		snprintf(path, sizeof(path), "%s/%s/comm", task, de->d_name);
		FILE *f = de->d_name[0] != '.' ? fopen(path, "r") : NULL;
		if (f) {
			if (!fgets(name, sizeof(name), f))
				name[0] = 0;
			name[strcspn(name, "\n")] = 0;
			fclose(f);
		}
		/* an earlier attach's copy started again records while its
		 * ticker runs (a detach joins it before the writer leaves);
		 * the other threads alone are leaving */
		if (strcmp(name, "rhea-ticker") == 0)
			st = AGENT_ATTACHED;
		else if (strncmp(name, "rhea-", 5) == 0 && st != AGENT_ATTACHED)
			st = AGENT_DETACHING;
	}
	if (d)
		closedir(d);
	return st;
}

/*
 * An earlier attach's copy of the agent, spent, that can record again
 * (agent.c, rhea_attach_restart) rather than a new copy be loaded: each
 * new one takes 192 bytes of the process's static TLS, of which glibc
 * keeps about 1.5 KB for libraries loaded late (the ninth attach to
 * redis-server failed), and leaves its tables behind.  A copy is mapped
 * from a deleted file of an attach directory (agent_line), and can be
 * started again when it is of our build: its build-id, read from the
 * process's memory where our librhea.so has its note, is ours.  Then the
 * address of its rhea_attach_restart in the process; 0 when there is none.
 */
struct agent_elf {
	uint64_t first;        /* the first loadable segment's page (its load bias from there) */
	uint64_t note, entry;  /* the build-id's bytes, rhea_attach_restart */
	unsigned char id[64];
	size_t idlen;
};

static int agent_elf_read(const char *path, struct agent_elf *a)
{
	memset(a, 0, sizeof(*a));
	a->first = UINT64_MAX;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < a->first)
				a->first = ph.p_vaddr & ~(uint64_t)4095;
		}
	a->idlen = sym_elf_build_id(e, a->id, sizeof(a->id), &a->note);
	for (Elf_Scn *scn = NULL; e && (scn = elf_nextscn(e, scn)) != NULL && !a->entry;) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;
			if (gelf_getsym(d, (int)i, &sym) && sym.st_shndx != SHN_UNDEF &&
			    (name = elf_strptr(e, sh.sh_link, sym.st_name)) && strcmp(name, "rhea_attach_restart") == 0) {
				a->entry = sym.st_value;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return a->idlen && a->entry && a->first != UINT64_MAX ? 0 : -1;
}

struct spent {
	uint64_t base[16];
	int n;
};

static int spent_line(const char *line, void *arg)
{
	struct spent *sp = arg;
	unsigned long lo, hi, off;
	char perms[8];
	const char *path = strchr(line, '/');
	if (sp->n < 16 && path && sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) == 4 && off == 0 &&
	    strncmp(path, RHEA_ATTACH_DIR_PREFIX, sizeof(RHEA_ATTACH_DIR_PREFIX) - 1) == 0 &&
	    strstr(path, "/" RHEA_ATTACH_AGENT " (deleted)"))
		sp->base[sp->n++] = lo;
	return 0;
}

/* The entry points of the copies of this build an earlier attach left in
 * the process, into entry[] (at most 16): the lowest mapped first, the
 * most recent as a rule (mappings are placed downwards).  Their number. */
static int spent_agents(pid_t pid, const char *agent, uint64_t *entry)
{
	struct spent sp = {{0}, 0};
	struct agent_elf a;
	int n = 0;
	if (inject_maps_each(pid, spent_line, &sp) < 0 || !sp.n || agent_elf_read(agent, &a) != 0)
		return 0;
	for (int i = 0; i < sp.n; i++) { /* (maps lists them by address) */
		uint64_t bias = sp.base[i] - a.first;
		unsigned char id[64];
		if (inject_read(pid, bias + a.note, id, a.idlen) == 0 && memcmp(id, a.id, a.idlen) == 0)
			entry[n++] = bias + a.entry;
	}
	return n;
}

/*
 * Memory the process may still take before its memory cgroup's limit (the
 * smallest room of its cgroup and every parent), bytes; UINT64_MAX when
 * there is no limit or it cannot be told.  The agent's buffers and tables
 * count against that limit: taking the last of it would get the service
 * OOM-killed.  cgroup v2 (memory.max, memory.current) and v1
 * (memory.limit_in_bytes, memory.usage_in_bytes).
 */
static uint64_t read_u64_file(const char *path, int *ok)
{
	char buf[64] = "";
	FILE *f = fopen(path, "r");
	*ok = f && fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9';
	if (f)
		fclose(f);
	return *ok ? strtoull(buf, NULL, 10) : 0;
}

static uint64_t cgroup_room(pid_t pid)
{
	char path[64], line[1024];
	uint64_t room = UINT64_MAX;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctl = c1 + 1, *cg = c2 + 1;
		int v1 = strcmp(ctl, "memory") == 0 || strstr(ctl, "memory,") || strstr(ctl, ",memory");
		if (!v1 && *ctl)
			continue; /* another v1 controller; v2's line has none ("0::/path") */
		const char *bases[] = {v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup",
				       v1 ? NULL : "/sys/fs/cgroup/unified"};
		for (int b = 0; b < 2 && bases[b]; b++) {
			char dir[1200];
			snprintf(dir, sizeof(dir), "%s%s", bases[b], strcmp(cg, "/") ? cg : "");
			size_t base_len = strlen(bases[b]);
			for (;;) {
				char lim[1300], use[1300];
				snprintf(lim, sizeof(lim), "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
				snprintf(use, sizeof(use), "%s/%s", dir, v1 ? "memory.usage_in_bytes" : "memory.current");
				int ok1, ok2;
				uint64_t l = read_u64_file(lim, &ok1), u = read_u64_file(use, &ok2);
				if (ok1 && ok2 && l < (UINT64_MAX >> 2)) /* v1 writes "unlimited" as ~2^63 */
					room = l > u ? (l - u < room ? l - u : room) : 0;
				char *slash = strrchr(dir, '/');
				if (!slash || (size_t)(slash - dir) < base_len)
					break;
				*slash = 0;
			}
		}
	}
	if (f)
		fclose(f);
	return room;
}

/* The process runs an x86-64 program (the injector calls dlopen with the
 * x86-64 convention; in a 32-bit process that would crash it).  Its
 * executable's ELF header says so; unreadable: assumed, as the ptrace
 * that follows will fail anyway. */
static int x86_64_process(pid_t pid)
{
	char path[64];
	Elf64_Ehdr h; /* e_ident and e_machine sit where they do in a 32-bit header too */
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	ssize_t n = read(fd, &h, sizeof(h));
	close(fd);
	if (n < (ssize_t)offsetof(Elf64_Ehdr, e_version) || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
		return 1;
	return h.e_ident[EI_CLASS] == ELFCLASS64 && h.e_machine == EM_X86_64;
}

/* An empty file name in dir for the agent to write, given to user uid
 * (-1: ours).  0, or -1 (said). */
static int agent_file(const char *dir, const char *name, int uid)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		cli_err("attach: cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (uid >= 0 && fchown(fd, (uid_t)uid, (gid_t)-1) != 0) {
		cli_err("attach: cannot give %s to the process's user: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The agent's warnings (one a line), said as ours. */
static void show_warnings(const char *dir, pid_t pid)
{
	char path[PATH_MAX], line[512];
	snprintf(path, sizeof(path), "%s/" RHEA_ATTACH_WARNINGS, dir);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			fprintf(stderr, "rhea: the agent in process %d: %s\n", (int)pid, line);
	}
	if (f)
		fclose(f);
}

/* A kernel thread (PF_KTHREAD in its stat's flags, field 9)? */
static int kernel_thread(pid_t pid)
{
	char buf[1024];
	const char *f = inject_task_stat(pid, pid, buf, sizeof(buf));
	unsigned long flags = 0;
	return f && sscanf(f, "%*c %*d %*d %*d %*d %*d %lu", &flags) == 1 && (flags & 0x00200000ul);
}

/* May user uid (group gid) do `want` (the S_I?USR bits) to st? */
static int uid_may(const struct stat *st, uid_t uid, gid_t gid, mode_t want)
{
	if (uid == 0)
		return 1;
	mode_t m = st->st_uid == uid ? st->st_mode : st->st_gid == gid ? st->st_mode << 3 : st->st_mode << 6;
	return (m & want) == want;
}

/* May user uid (group gid) create files in path's directory, every
 * directory above it searchable?  By the mode bits alone (no
 * supplementary groups, no ACLs): 0 when unsure. */
static int uid_may_write(const char *path, uid_t uid, gid_t gid)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(dir, real) || stat(real, &st) != 0 || !uid_may(&st, uid, gid, S_IWUSR | S_IXUSR))
		return 0;
	for (char *end = strrchr(real, '/'); end; end = strrchr(real, '/')) {
		end[end == real] = 0; /* the directory above ("/" last) */
		if (stat(real, &st) != 0 || !uid_may(&st, uid, gid, S_IXUSR))
			return 0;
		if (end == real)
			break;
	}
	return 1;
}

/* The process's name (its /proc comm), left as it was when unreadable. */
static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *cf = fopen(path, "r");
	if (cf) {
		if (fgets(comm, (int)len, cf))
			comm[strcspn(comm, "\n")] = 0;
		fclose(cf);
	}
}

int cmd_attach(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'}, {"duration", required_argument, NULL, 'd'},
		{"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
		{"no-compact", no_argument, NULL, 'C'},   AGENT_LONG_OPTIONS,
		{NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	int64_t duration = -1;
	struct agent_opts ao;
	agent_opts_init(&ao);
	ao.follow = 0; /* children of an attached process are not traced */
	int quiet = 0, compact = 1, c;
	optind = 1;
	opterr = 0; /* one line of our own (cli_bad_option) */
	static const char shortopts[] = "o:d:i:qh";
	while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'd':
			if ((duration = cli_parse_duration(optarg)) <= 0) {
				cli_err("--duration %s: want a duration such as 10s or 500ms", optarg);
				return EXIT_BADINPUT;
			}
			break;
		case 'q': quiet = 1; break;
		case 'C': compact = 0; break;
		case 'h': usage(stdout); return 0;
		default:
			if (agent_opts_other(&ao, c, optarg, "attach", argv, shortopts) != 0)
				return EXIT_BADINPUT;
		}
	}
	if (optind != argc - 1) {
		cli_err("attach: want one process id (rhea attach PID)");
		return EXIT_BADINPUT;
	}
	char *end;
	long lp = strtol(argv[optind], &end, 10);
	if (*end || lp <= 0 || lp > INT_MAX) {
		cli_err("attach: %s is not a process id", argv[optind]);
		return EXIT_BADINPUT;
	}
	pid_t pid = (pid_t)lp;
	if (pid == getpid()) {
		cli_err("attach: process %d is this rhea attach itself", (int)pid);
		return EXIT_BADINPUT;
	}
	if (!alive(pid)) {
		int there = kill(pid, 0) == 0 || errno == EPERM;
		if (there && inject_task_state(pid, pid) == 'Z' && inject_other_task_alive(pid))
			cli_err("attach: process %d's main thread has exited (pthread_exit) while others run: "
				"its memory map is gone from /proc and the agent cannot be loaded",
				(int)pid);
		else if (there && inject_task_state(pid, pid) == 'Z')
			cli_err("attach: process %d has exited (a zombie its parent has not reaped yet)", (int)pid);
		else
			cli_err("attach: no process %d", (int)pid);
		return EXIT_BADINPUT;
	}
	if (kernel_thread(pid)) {
		cli_err("attach: process %d is a kernel thread: there is no program in it to trace", (int)pid);
		return EXIT_BADINPUT;
	}
	/* A stopped process runs nothing, so no thread of it can load the
	 * agent: say so now rather than after the safe-point search's 5 s. */
	char state = inject_task_state(pid, pid);
	if (state == 'T') {
		cli_err("attach: process %d is stopped (SIGSTOP or Ctrl-Z): let it go on first (kill -CONT %d)",
			(int)pid, (int)pid);
		return EXIT_BADINPUT;
	}
	if (state == 't') {
		cli_err("attach: process %d is stopped under a debugger or tracer", (int)pid);
		return EXIT_BADINPUT;
	}
	switch (agent_in(pid)) {
	case AGENT_NONE:
		break;
	case AGENT_RECORDED:
		cli_err("attach: process %d already has rhea's agent loaded (rhea record runs it)", (int)pid);
		return EXIT_BADINPUT;
	case AGENT_ATTACHED:
		cli_err("attach: process %d already has rhea's agent loaded (another rhea attach is recording it)",
			(int)pid);
		return EXIT_BADINPUT;
	case AGENT_DETACHING:
		cli_err("attach: process %d is still detaching from an earlier rhea attach: try again in a moment",
			(int)pid);
		return 1;
	}
	/* what the agent may take: its buffers, plus tables and threads */
	uint64_t need = (uint64_t)ao.buffer + (24u << 20), room = cgroup_room(pid);
	if (room < need) {
		cli_err("attach: process %d has %llu MB left under its memory cgroup's limit, and the agent may take "
			"%llu MB: not attached (a smaller --buffer lowers that)", (int)pid,
			(unsigned long long)(room >> 20), (unsigned long long)(need >> 20));
		return EXIT_BADINPUT;
	}
	if (!x86_64_process(pid)) {
		cli_err("attach: process %d is not an x86-64 program (a 32-bit one?): rhea attach loads a 64-bit "
			"agent the x86-64 way", (int)pid);
		return EXIT_BADINPUT;
	}
	char agent[PATH_MAX];
	cli_prune_cfi_cache();
	if (cli_find_agent(agent, sizeof(agent)) < 0)
		return 1;
	char comm[64] = "prog";
	read_comm(pid, comm, sizeof(comm));
	char out[PATH_MAX], given[PATH_MAX];
	if (output)
		snprintf(given, sizeof(given), "%s", output);
	else
		snprintf(given, sizeof(given), "rhea-%s-%d.rhea", comm, (int)pid);
	if (cli_output_ready(given, out, sizeof(out), quiet, NULL) != 0)
		return EXIT_BADINPUT;

	char root[64] = "", dir[128];
	int foreign = other_ns(pid, "mnt");
	if (foreign)
		snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	struct stat pst;
	char p2[PATH_MAX], err[512], st[256], tout[PATH_MAX + 16];
	snprintf(p2, sizeof(p2), "/proc/%d", (int)pid);
	int other_user = stat(p2, &pst) == 0 && pst.st_uid != geteuid();
	/* May we trace it at all?  Opening its memory asks the kernel what
	 * PTRACE_ATTACH would (another user's process, yama's ptrace_scope):
	 * a user's attach to root's process failed later, saying it could not
	 * give a file in /tmp to the process's user. */
	snprintf(p2, sizeof(p2), "/proc/%d/mem", (int)pid);
	int memfd = open(p2, O_RDONLY | O_CLOEXEC);
	if (memfd < 0 && (errno == EACCES || errno == EPERM)) {
		if (other_user)
			cli_err("attach: not permitted to trace process %d: it runs as uid %u (rhea attach must run as "
				"that user, or as root)", (int)pid, (unsigned)pst.st_uid);
		else {
			char why[256];
			inject_ptrace_denied(pid, why, sizeof(why));
			cli_err("attach: not permitted to trace process %d: %s", (int)pid, why);
		}
		return EXIT_BADINPUT;
	}
	if (memfd >= 0)
		close(memfd);
	snprintf(p2, sizeof(p2), "/proc/%d", (int)pid);
	/* A rootless container's /tmp belongs to its user namespace, where
	 * root has no uid: what goes in there is made as the process's user
	 * (from here to the agent's copy, and the tables the prebuild puts in) */
	if (foreign && other_user && geteuid() == 0 && other_ns(pid, "user"))
		cli_fs_owner((int)pst.st_uid, (int)pst.st_gid);
	snprintf(dir, sizeof(dir), "%s" RHEA_ATTACH_DIR_PREFIX "XXXXXX", root);
	cli_fs_enter();
	if (!mkdtemp(dir)) {
		int e = errno;
		cli_fs_leave();
		if (e == EOVERFLOW && other_ns(pid, "user"))
			/* its /tmp belongs to its user namespace, where our uid has
			 * no name: a file of ours cannot be made there */
			cli_err("attach: process %d runs in a user namespace of its own (a rootless container), "
				"whose /tmp our user cannot write in: attach it as its own user (uid %u)",
				(int)pid, (unsigned)pst.st_uid);
		else
			cli_err("attach: cannot create a directory in %s/tmp: %s", root, strerror(e));
		return 1;
	}
	const char *tdir = dir + strlen(root); /* the process's view of it */
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/tmp", root);
	int tmpfd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC), dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* The agent writes the recording as the process's user: into our
	 * directory for it, and copied out at the end, when the output's
	 * directory is not the process's to see (another mount namespace) or
	 * maybe not its to write (root attaching to nginx's worker, nobody,
	 * with the output in root's directory: "Permission denied", and the
	 * process kept the agent's descriptor and memory for nothing). */
	int via_tmp = foreign || (other_user && !uid_may_write(out, pst.st_uid, pst.st_gid));
	chmod(dir, 0755); /* the process may run as another user (root attaching) */
	if (via_tmp && other_user && chown(dir, pst.st_uid, (gid_t)-1) != 0) {
		/* it writes its recording there: then it cannot, and says so */
	}
	snprintf(tout, sizeof(tout), "%s/out.rhea", tdir);
	int rc = 1, ctl = -1;
	snprintf(p2, sizeof(p2), "%s/" RHEA_ATTACH_CONF, dir);
	FILE *conf = fopen(p2, "w");
	if (!conf) {
		cli_err("attach: cannot write %s: %s", p2, strerror(errno));
		goto out;
	}
	fprintf(conf, "RHEA_OUTPUT=%s\nRHEA_ROOT_PID=%ld\nRHEA_AGENT_FILE=%s\n", via_tmp ? tout : out, pid_inside(pid),
		agent);
	/* we trace the process while we load the agent: no debugger to it
	 * (from another pid namespace it sees no tracer at all; a mount
	 * namespace of its own alone, unshare -m, sees us) */
	if (!other_ns(pid, "pid"))
		fprintf(conf, "RHEA_ATTACH_TRACER=%ld\n", (long)getpid());
	/* compiled CFI: our cache (the process's HOME is left alone); in a
	 * container, which cannot see it, a cache of the attach's own that
	 * the prebuild below fills from ours (cfiprebuild.c) */
	char cache[PATH_MAX], export[PATH_MAX] = "";
	int uid = other_user ? (int)pst.st_uid : -1;
	if (rhea_cache_base(cli_getenv, cache, sizeof(cache)) != 0 ||
	    (foreign && agent_cache(dirfd, uid, dir, export, sizeof(export)) != 0))
		fprintf(conf, "RHEA_CFI_CACHE=0\n");
	else if (foreign)
		fprintf(conf, "RHEA_CACHE_DIR=%s/" RHEA_ATTACH_CACHE "\n", tdir);
	else
		fprintf(conf, "RHEA_CACHE_DIR=%s\n", cache);
	agent_opts_each(&ao, put_conf, conf);
	/* -d: when our word to stop is due, which the agent then waits for
	 * closely (agent.c, attach_poll_from) */
	if (duration > 0)
		fprintf(conf, "RHEA_ATTACH_FOR_NS=%lld\n", (long long)duration);
	/* then the RHEA_* environment, as rhea record's agent sees it (the
	 * stack table's size, RHEA_MAX_NODES, say); the agent takes a
	 * setting's first line, so the ones above win */
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "RHEA_", 5) == 0 && strchr(*e, '=') && !strchr(*e, '\n'))
			fprintf(conf, "%s\n", *e);
	if (fclose(conf) != 0) {
		cli_err("attach: cannot write %s", p2);
		goto out;
	}
	/* the unwind tables the cache lacks, built here rather than on a
	 * thread of the program (cfiprebuild.c), into our cache */
	cli_fs_leave();
	if ((!foreign || export[0]) && strcmp(ao.unwind, "fp") != 0)
		cli_prebuild_cfi(pid, agent, export[0] ? export : NULL, uid, quiet);
	cli_fs_enter();
	/* the files the agent writes, as the process's user: root attaching
	 * to another user's process gives them to that user */
	if (agent_file(dir, RHEA_ATTACH_STATUS, uid) != 0 || agent_file(dir, RHEA_ATTACH_WARNINGS, uid) != 0)
		goto out;
	snprintf(p2, sizeof(p2), "%s/" RHEA_ATTACH_CONTROL, dir);
	if (mkfifo(p2, 0644) != 0 || (ctl = open(p2, O_RDWR | O_CLOEXEC)) < 0) {
		cli_err("attach: cannot make the control FIFO %s: %s", p2, strerror(errno));
		goto out;
	}
	cli_fs_leave();
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* the word to stop may meet a FIFO the agent has just closed (it
	 * ended: the process exits, the agent switched itself off): an
	 * error, not our death */
	signal(SIGPIPE, SIG_IGN);

	snprintf(p2, sizeof(p2), "%s/" RHEA_ATTACH_AGENT, tdir);
	char via[200] = "";
	/* a copy an earlier attach left, started again; one that cannot
	 * record again (2: a forked child's, sealed, its stack table three
	 * quarters full; 3) passes to the next; after the last, a copy of its
	 * own is loaded */
	uint64_t spent[16];
	int nspent = spent_agents(pid, agent, spent), said = -1;
	for (int k = 0; k < nspent && said != 0; k++) {
		if (inject_call(pid, spent[k], tdir, 5000, &stop_asked, via, sizeof(via), &said, err, sizeof(err)) != 0) {
			cli_err("attach: %s", err);
			goto out;
		}
		if (said == 1) {
			cli_err("attach: process %d already has rhea's agent loaded (another rhea attach is recording "
				"it)", (int)pid);
			rc = EXIT_BADINPUT;
			goto out;
		}
	}
	if (said != 0) {
		char lib[PATH_MAX];
		snprintf(lib, sizeof(lib), "%s/" RHEA_ATTACH_AGENT, dir);
		int in = open(agent, O_RDONLY | O_CLOEXEC);
		cli_fs_enter();
		int copied = cli_copy_file(in, lib, 0755) == 0;
		cli_fs_leave();
		if (!copied) {
			cli_err("attach: cannot copy the agent to %s: %s", lib, strerror(errno));
			goto out;
		}
		if (inject_dlopen(pid, p2, 5000, &stop_asked, via, sizeof(via), err, sizeof(err)) != 0) {
			cli_err("attach: %s", err);
			goto out;
		}
	}
	wait_status(dir, pid, 5000, "started", "failed", st, sizeof(st));
	if (strncmp(st, "started", 7) != 0) {
		show_warnings(dir, pid);
		cli_err("attach: the agent did not start in process %d: %s", (int)pid,
			st[0] ? st : alive(pid) ? "no word from it within 5 s" : "the process is gone");
		goto out;
	}
	/* The agent's buffers, in a memfd of its own: should the process be
	 * killed while attached, what they hold is read from there. */
	int salvage_fd = -1;
	const char *sv = strstr(st, " salvage=");
	if (sv) {
		snprintf(p2, sizeof(p2), "/proc/%d/fd/%d", (int)pid, atoi(sv + 9));
		salvage_fd = open(p2, O_RDONLY | O_CLOEXEC);
	}
	if (!quiet) {
		char dur[64] = "until Ctrl-C";
		if (duration > 0)
			snprintf(dur, sizeof(dur), "for %.3g s", (double)duration / 1e9);
		read_comm(pid, comm, sizeof(comm)); /* (it may have exec'ed meanwhile) */
		fprintf(stderr, "rhea: attached to %d (%s) through %s, recording to %s %s\n", (int)pid, comm, via,
			out, dur);
	}
	/* (by the clock: naps of 20 ms took 25 on a busy machine, and an
	 * attach for 200 ms recorded 300) */
	int64_t waited = 0, t0 = cli_now_ns();
	int execed = 0, unfinished = 0;
	/* the recording, for an end rhea attach adds (in the process's
	 * /proc/PID/root, which goes with it, it is reached by our descriptor) */
	char file[PATH_MAX + 16];
	if (via_tmp)
		snprintf(file, sizeof(file), "/proc/self/fd/%d/out.rhea", dirfd);
	else
		snprintf(file, sizeof(file), "%s", out);
	while (!stop_asked && alive(pid) && (duration < 0 || waited < duration)) {
		long step = 20;
		if (duration > 0 && duration - waited < step * 1000000)
			step = (long)((duration - waited) / 1000000) + 1;
		nap_ms(step);
		waited = cli_now_ns() - t0;
		/* the process exec'ed: the agent ended the recording, and went
		 * with the old image */
		if (read_status(dir, st, sizeof(st)) == 0 && strncmp(st, "exec", 4) == 0) {
			execed = 1;
			break;
		}
	}
	if (execed) {
		wait_exec_done(pid);
		read_comm(pid, comm, sizeof(comm));
		if (!quiet)
			fprintf(stderr, "rhea: process %d exec'ed another program (now %s): the recording ends there\n",
				(int)pid, comm);
	} else if (alive(pid)) {
		if (write(ctl, "s", 1) != 1) {
			/* closing it below stops the agent all the same */
		}
		close(ctl);
		ctl = -1;
		/* A process stopped (SIGSTOP, Ctrl-Z, a debugger) runs nothing,
		 * the agent's threads neither: its end comes when the process
		 * goes on.  The file is left alone until then (compacted now, it
		 * would be replaced under the agent, which writes on into it). */
		int stopped_for = 0;
		for (int t = 0; t < 100 && stopped_for < 5; t++) {
			if (wait_status(dir, pid, 100, "stopped", NULL, st, sizeof(st))[0])
				break;
			char now = inject_task_state(pid, pid);
			stopped_for = now == 'T' || now == 't' ? stopped_for + 1 : 0;
		}
		if (strncmp(st, "stopped", 7) != 0 && stopped_for >= 5) {
			cli_err("attach: process %d is stopped (SIGSTOP, Ctrl-Z or a debugger): its agent ends the "
				"recording when it goes on; %s is not final until then", (int)pid, out);
			unfinished = 1;
		} else if (strncmp(st, "stopped", 7) != 0 && alive(pid)) {
			cli_err("attach: the agent in process %d did not confirm it stopped within 10 s", (int)pid);
		}
		/* An agent that could not write the file (a full disk) stopped
		 * without its end: the end, and why, from its memory, which is
		 * final now that it stopped (nothing when it wrote its end). */
		struct recover_view v;
		if (strncmp(st, "stopped", 7) == 0 && recover_open(salvage_fd, (pid_t)pid_inside(pid), &v) == 0) {
			if (recover_end(file, RHEA_END_DETACH, 0, &v) == RECOVER_END_FAILED)
				cli_err("attach: %s: could not add the end of the recording", out);
			recover_close(&v);
		}
	} else {
		/* gone without the agent's end (SIGKILL): what it had not written,
		 * and an end saying so; nothing when it wrote its end itself */
		struct recover_view v;
		int readable = recover_open(salvage_fd, (pid_t)pid_inside(pid), &v) == 0;
		long n = recover_end(file, RHEA_END_GONE, 0, readable ? &v : NULL);
		recover_close(&v);
		if (!quiet) {
			fprintf(stderr, "rhea: process %d ended while attached\n", (int)pid);
			if (n > 0)
				cli_say_recovered("the agent's", "its", n);
			else if (n == 0 && readable) /* (killed just after the agent's writer ran) */
				fprintf(stderr, "rhea: the agent had written all it recorded: nothing was left in its "
						"memory\n");
		}
	}
	if (salvage_fd >= 0)
		close(salvage_fd);
	rc = 0;
	show_warnings(dir, pid);
	if (unfinished && via_tmp) {
		cli_err("attach: the recording stays in process %d's %s until then", (int)pid, tout);
		close(dirfd); /* nothing removed */
		dirfd = -1;
	} else if (via_tmp && cli_copy_file(openat(dirfd, "out.rhea", O_RDONLY | O_CLOEXEC), out, 0644) != 0) {
		cli_err("attach: cannot copy the recording to %s (%s): it stays in process %d's %s", out,
			strerror(errno), (int)pid, tout);
		rc = 1;
		close(dirfd); /* nothing removed */
		dirfd = -1;
	} else if (!unfinished) {
		/* (a recording the agent may still write has no END: left alone;
		 * a container's keeps the names of its functions, read in it) */
		if (compact)
			cli_compact(out, foreign ? root : NULL);
		if (!quiet)
			cli_summarize(out, 0);
	}
out:
	cli_fs_leave();
	if (ctl >= 0)
		close(ctl);
	if (dirfd >= 0) {
		cleanup(tmpfd, dirfd, strrchr(dir, '/') + 1);
		close(dirfd);
	}
	if (tmpfd >= 0)
		close(tmpfd);
	return rc;
}

/*
 * agent.c - life cycle of librhea.so inside the traced process.
 *
 * Start (constructor): read the configuration the CLI put in the
 * environment, map the buffers and the call-stack table, open the
 * recording, read the module map (building unwind tables), arm the crash
 * flush, start two threads: the ticker, which advances the global epoch
 * every interval (so that hooks can tell "a capture is due" with a load and
 * a compare instead of a clock read), and the writer, which every 100 ms
 * seals the buffers, appends new call-stack nodes, compresses and writes
 * one chunk.  The program's threads never do I/O for the agent.
 *
 * End: exit (on_exit gives the status), _exit, a fatal signal, or exec.
 * Each path calls agent_finish() once: flush every thread's pending sample,
 * seal, drain, write an END entry.  All of it is async-signal-safe because
 * the fatal-signal path runs it in a handler.  SIGKILL gives no chance: the
 * recording then ends at the writer's last chunk, at most ~100 ms old, and
 * readers report it as cut short.
 *
 * Crash flush and the program's own signal handling: our handler is
 * installed only for signals whose disposition is SIG_DFL (never over
 * SIG_IGN or a handler), and sigaction()/signal() are filtered: the program
 * sees the disposition it believes it set; when it installs a handler of its
 * own we step aside completely, when it sets SIG_DFL again we re-arm.  After
 * flushing, the handler restores SIG_DFL and re-raises (or, for a fault,
 * returns so that the instruction faults again), so the process dies the way
 * it would have without us, with the same status and core dump.
 *
 * fork: the child starts a recording of its own (never writes into its
 * parent's file), created lazily so that a fork that immediately execs
 * leaves no empty file behind.  exec: the recording is flushed and ended
 * before the new image replaces this one (which loads the agent again).
 *
 * On internal failure the agent switches itself off, writes one line to
 * stderr and records why; it never exits or aborts the program.
 */
#include "agent.h"
#include "unwind.h"
#include "paths.h"
#include "nodepack.h"
#include "packed.h"
#include "rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

struct rhea_agent rhea_g __attribute__((aligned(64))) = {
	.fd = -1, .control_fd = -1, .spare_fd = -1, .epoch_end_tsc = UINT64_MAX};
uint64_t rhea_main_stack_lo, rhea_main_stack_hi;

void hooks_resolve(void);
void hooks_env_save(void);
int hooks_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#define FLUSH_PERIOD_NS 100000000ull
#define STAGING_SIZE (1u << 20)

static struct rfile_writer writer;
static char *staging;
static size_t staging_used;
static uint32_t drain_lock;
static int is_root;
static int file_failed;
static pthread_t ticker_th, writer_th;
static volatile int threads_stop;
static char output_base[4096];

/* ---- small helpers that stay async-signal-safe --------------------------- */

size_t u64_to_str(uint64_t v, char *out)
{
	char tmp[24];
	size_t n = 0, i = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		out[i++] = tmp[--n];
	out[i] = 0;
	return i;
}

__thread int rhea_fds_private;

/* A line said on a thread without stderr, for the writer to write: one at
 * a time (0 free, 1 being filled, 2 to write). */
static char deferred[256];
static size_t deferred_len;
static int deferred_state;

static void defer(const char *const *parts, size_t n)
{
	int free_ = 0;
	if (!__atomic_compare_exchange_n(&deferred_state, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return; /* (one waits already: this one is lost) */
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		for (const char *p = parts[i]; p && *p && len < sizeof(deferred) - 1; p++)
			deferred[len++] = *p;
	deferred[len++] = '\n';
	deferred_len = len;
	__atomic_store_n(&deferred_state, 2, __ATOMIC_RELEASE);
}

void agent_say_deferred(void)
{
	if (rhea_fds_private || __atomic_load_n(&deferred_state, __ATOMIC_ACQUIRE) != 2)
		return;
	syscall(SYS_write, 2, deferred, deferred_len);
	__atomic_store_n(&deferred_state, 0, __ATOMIC_RELEASE);
}

/* One line from the agent: on stderr, or under rhea attach to the CLI
 * (attach_note), or from a thread without stderr to the writer (defer). */
static void say(const char *a, const char *b, const char *c, const char *d)
{
	const char *parts[] = {"rhea: ", a, b, c, d};
	if (rhea_attached) {
		attach_note(parts + 1, 4);
		return;
	}
	if (rhea_fds_private) {
		defer(parts, 5);
		return;
	}
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i])
			syscall(SYS_write, 2, parts[i], strlen(parts[i]));
	syscall(SYS_write, 2, "\n", 1);
}

static uint32_t warned; /* agent_warn said its line (once a recording) */

void agent_warn(const char *msg, long value)
{
	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) || rhea_g.cfg.quiet)
		return;
	char num[24];
	u64_to_str((uint64_t)(value < 0 ? -value : value), num);
	say(msg, value ? " (" : NULL, value ? num : NULL, value ? ")" : NULL);
}

void agent_disable(const char *why, int err)
{
	for (int c = 0; c < RHEA_C_COUNT; c++)
		rhea_g.on[c] = 0;
	rhea_g.active = 0;
	/* Switched off, it records no more: rhea record must not claim the
	 * recording whole (what its buffers hold stays unwritten). */
	salvage_set_state(RHEA_SALVAGE_DONE);
	if (!rhea_g.cfg.quiet && why[0]) /* "": a deliberate stop (--no-follow) */
		say("agent switched off: ", why, err ? ": " : NULL, err ? strerror(err) : NULL);
}

/* The recording cannot be written any more (err, an errno): the agent
 * stops, saying why once, and rhea record is told so (it adds the end, and
 * why, to what the agent could not write). */
static void output_failed(const char *why, int err)
{
	file_failed = 1;
	agent_disable(why, err);
	salvage_write_failed(err);
}

/* max_ns UINT64_MAX: no deadline (the sum must not wrap around: the
 * writer's rounds took no lock at all while it did). */
static void lock_drain(uint64_t max_ns)
{
	uint64_t now = rhea_now();
	uint64_t deadline = max_ns > UINT64_MAX - now ? UINT64_MAX : now + max_ns;
	while (__atomic_exchange_n(&drain_lock, 1, __ATOMIC_ACQUIRE)) {
		if (rhea_now() > deadline)
			return; /* proceed anyway: better a torn chunk than a hang */
		rhea_sleep_ns(200000);
	}
}

static void unlock_drain(void)
{
	__atomic_store_n(&drain_lock, 0, __ATOMIC_RELEASE);
}

/* ---- the recording file -------------------------------------------------- */

/* What the recording's descriptor was opened on: checked before each
 * write, so that a descriptor the program closed behind the hooks' back
 * (a raw system call) and reused is never written to. */
static dev_t out_dev;
static ino_t out_ino;

static int fd_is_recording(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_dev == out_dev && st.st_ino == out_ino;
}

int agent_move_fd(int fd)
{
	lock_drain(500000000ull);
	int r = 0;
	int *own = fd < 0 ? NULL
		   : fd == rhea_g.fd ? &rhea_g.fd
		   : fd == rhea_g.control_fd ? &rhea_g.control_fd
		   : fd == rhea_g.spare_fd ? &rhea_g.spare_fd
					   : NULL;
	if (own) {
		int n = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
		if (n < 0)
			r = -errno;
		else
			syscall(SYS_close, fd);
		/* -1: the program's now, never touched again (attach's control
		 * lost: attach.c stops) */
		*own = n;
		if (own == &rhea_g.fd && n >= 0)
			writer.fd = n;
		else if (own == &rhea_g.fd)
			output_failed("the program took the recording's file descriptor", -r);
	}
	unlock_drain();
	return r;
}

static int write_staging(void)
{
	/* (not from a thread with a table of its own, where rhea_g.fd is
	 * nothing: the staged bytes wait for the writer) */
	if (staging_used == 0 || rhea_g.fd < 0 || rhea_fds_private)
		return 0;
	if (!fd_is_recording(rhea_g.fd)) {
		staging_used = 0;
		rhea_g.fd = -1; /* not ours any more: never touch it again */
		if (!file_failed) {
			__atomic_fetch_add(&rhea_g.write_errors, 1, __ATOMIC_RELAXED);
			output_failed("the recording's file descriptor was closed under the agent", EBADF);
		}
		return -EBADF;
	}
	/* A file-size limit or a closed pipe must fail the write, not kill the
	 * program with SIGXFSZ/SIGPIPE (our own threads block every signal;
	 * this also runs on the program's threads at exit, exec and crash). */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGXFSZ);
	sigaddset(&block, SIGPIPE);
	hooks_real_sigmask(SIG_BLOCK, &block, &old);
	int r = rfile_write_chunk(&writer, staging, staging_used, 1);
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
	staging_used = 0;
	if (r == 0)
		salvage_nodes_in_file(rhea_g.st.written); /* every node staged was in it */
	if (r == -EBUSY) {
		/* Another path (the writer thread, interrupted by a crash) is in
		 * the middle of a chunk: this one is lost, the file stays whole. */
		__atomic_fetch_add(&rhea_g.buf.dropped, 1, __ATOMIC_RELAXED);
		return r;
	}
	if (r < 0 && !file_failed) {
		__atomic_fetch_add(&rhea_g.write_errors, 1, __ATOMIC_RELAXED);
		output_failed("cannot write the recording", -r);
	}
	return r;
}

static void *staging_reserve(size_t len)
{
	if (staging_used + len > STAGING_SIZE)
		write_staging();
	if (len > STAGING_SIZE)
		return NULL;
	void *p = staging + staging_used;
	staging_used += len;
	return p;
}

/*
 * Samples of a flush wait here to be packed per thread (packed.c): the
 * buffers interleave threads, the file wants each thread's samples as one
 * run of deltas.  Sized for a whole buffer pool of samples; mmap'ed once.
 */
static struct rhea_sample *hold;
static uint32_t *hold_ix;
static size_t nhold, hold_cap;
static uint8_t *pack_buf;
#define PACK_RUN 4096 /* samples per packed entry at most */
#define PACK_BUF (PACK_RUN * 200u)

static int hold_before(uint32_t a, uint32_t b)
{
	const struct rhea_sample *x = &hold[a], *y = &hold[b];
	if (x->tid != y->tid)
		return x->tid < y->tid;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns;
	return a < b;
}

/* Heap sort of the hold index: no allocation, async-signal-safe (this
 * also runs in the crash handler's flush). */
static void sift(uint32_t *v, size_t i, size_t n)
{
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && hold_before(v[c], v[c + 1]))
			c++;
		if (!hold_before(v[i], v[c]))
			return;
		uint32_t t = v[i];
		v[i] = v[c];
		v[c] = t;
		i = c;
	}
}

static void sort_hold(void)
{
	for (size_t i = 0; i < nhold; i++)
		hold_ix[i] = (uint32_t)i;
	for (size_t i = nhold / 2; i-- > 0;)
		sift(hold_ix, i, nhold);
	for (size_t n = nhold; n > 1; n--) {
		uint32_t t = hold_ix[0];
		hold_ix[0] = hold_ix[n - 1];
		hold_ix[n - 1] = t;
		sift(hold_ix, 0, n - 1);
	}
}

static void stage_raw(const void *e, size_t len)
{
	void *p = staging_reserve(len);
	if (p)
		memcpy(p, e, len);
}

static void flush_hold(void)
{
	if (nhold == 0)
		return;
	sort_hold();
	const struct rhea_sample *run[PACK_RUN];
	size_t i = 0;
	while (i < nhold) {
		uint32_t n = 0, tid = hold[hold_ix[i]].tid;
		while (i < nhold && n < PACK_RUN && hold[hold_ix[i]].tid == tid)
			run[n++] = &hold[hold_ix[i++]];
		size_t len = pack_buf ? packed_encode(run, n, pack_buf, PACK_BUF) : 0;
		if (len) {
			stage_raw(pack_buf, len);
		} else {
			for (uint32_t k = 0; k < n; k++) /* cannot pack: as they are */
				stage_raw(run[k], sizeof(*run[k]));
		}
	}
	nhold = 0;
}

static int drain_cb(void *arg, const void *data, size_t len)
{
	(void)arg;
	size_t off = 0;
	while (off + sizeof(struct rhea_entry) <= len) {
		const struct rhea_entry *e = (const void *)((const char *)data + off);
		if (e->size < sizeof(*e) || off + e->size > len)
			break; /* cannot happen: our own buffers */
		if (e->kind == RHEA_E_SAMPLE && e->size == sizeof(struct rhea_sample) && hold) {
			if (nhold == hold_cap)
				flush_hold();
			memcpy(&hold[nhold++], e, sizeof(struct rhea_sample));
		} else {
			stage_raw(e, e->size);
		}
		off += e->size;
	}
	return 0;
}

/*
 * New stack nodes, coded small (NODES2, core/nodepack.c) in entries of up
 * to NODES_PER_ENTRY: a deep program's recording is mostly nodes, and zstd
 * over them as 16-byte structs was most of the writer's time on W1 (16
 * threads allocating at depths 10 to 60: 720 KB of nodes, 0.6% of the
 * run's CPU).  The coding's work memory is static: the writer runs under
 * the drain lock, also in a crash handler, and allocates nothing.
 */
#define NODES_PER_ENTRY 4096
static struct rhea_node nodes_out[NODES_PER_ENTRY];
static uint64_t nodes_keys[2 * NODES_PER_ENTRY];
static uint32_t nodes_vals[2 * NODES_PER_ENTRY], nodes_index[NODES_PER_ENTRY];

static void stage_nodes(void)
{
	struct stacktab *st = &rhea_g.st;
	uint32_t upto = stacktab_ready_upto(st, st->written);
	struct nodepack_work w = {nodes_keys, nodes_vals, nodes_index, 2 * NODES_PER_ENTRY};
	while (st->written < upto) {
		uint32_t n = upto - st->written;
		if (n > NODES_PER_ENTRY)
			n = NODES_PER_ENTRY;
		for (uint32_t i = 0; i < n; i++) {
			const struct stacktab_node *sn = &st->nodes[st->written + i];
			nodes_out[i] = (struct rhea_node){sn->addr, sn->parent, 0};
		}
		size_t bound = nodepack_bound(n);
		void *e = staging_reserve(bound);
		if (!e)
			return;
		size_t len = nodepack_encode_in(st->written, nodes_out, n, e, bound, &w);
		if (!len) { /* (bound is enough: never, but then as structs) */
			struct rhea_nodes *h = e;
			len = sizeof(*h) + (size_t)n * sizeof(struct rhea_node);
			*h = (struct rhea_nodes){{RHEA_E_NODES, 0, (uint32_t)len}, st->written, n};
			memcpy(h + 1, nodes_out, (size_t)n * sizeof(struct rhea_node));
		}
		staging_used -= bound - len;
		st->written += n;
	}
}

/*
 * The CPU time of the agent's own threads, each as of its last reading:
 * read from their thread CPU clocks when the statistics are staged (once a
 * second), and by each thread itself as it ends.  The ticker's wake-ups are
 * the agent's steady cost on an idle or a busy program (13 us each on the
 * bench VM, read from its schedstat under W2), and a sampling profiler
 * misses most of them: they are a few microseconds long.
 */
static uint64_t agent_cpu[8];

void agent_thread_cpu_note(int i)
{
	uint64_t v;
	if (i >= 0 && i < 8 && rhea_thread_cpu_ns(thread_gettid(), &v) == 0)
		__atomic_store_n(&agent_cpu[i], v, __ATOMIC_RELAXED);
}

static uint64_t agent_cpu_ns(void)
{
	uint64_t sum = 0;
	for (int i = 0; i < 8; i++) {
		uint32_t tid = rhea_agent_tids[i];
		uint64_t v;
		if (tid && rhea_thread_cpu_ns(tid, &v) == 0 && v > __atomic_load_n(&agent_cpu[i], __ATOMIC_RELAXED))
			__atomic_store_n(&agent_cpu[i], v, __ATOMIC_RELAXED);
		sum += __atomic_load_n(&agent_cpu[i], __ATOMIC_RELAXED);
	}
	return sum;
}

/* The ticker's wake-ups and time coasting, for the statistics: written by
 * the ticker, read by the writer. */
static uint64_t ticker_wakes, coast_total_ns, coast_since_ns;

static uint64_t ticker_coast_ns(uint64_t now)
{
	uint64_t since = __atomic_load_n(&coast_since_ns, __ATOMIC_ACQUIRE);
	uint64_t total = __atomic_load_n(&coast_total_ns, __ATOMIC_ACQUIRE);
	return total + (since && now > since ? now - since : 0);
}

static void stage_stats(void)
{
	struct rhea_stats *s = staging_reserve(sizeof(*s));
	if (!s)
		return;
	memset(s, 0, sizeof(*s));
	s->h.kind = RHEA_E_STATS;
	s->h.size = sizeof(*s);
	s->time_ns = rhea_now();
	s->samples = __atomic_load_n(&rhea_g.buf.emitted, __ATOMIC_RELAXED);
	s->captures = __atomic_load_n(&rhea_g.captures, __ATOMIC_RELAXED);
	s->dropped = __atomic_load_n(&rhea_g.buf.dropped, __ATOMIC_RELAXED);
	s->truncated = __atomic_load_n(&rhea_g.truncated, __ATOMIC_RELAXED);
	s->unwind_errors = __atomic_load_n(&rhea_g.unwind_errors, __ATOMIC_RELAXED);
	s->stack_full = __atomic_load_n(&rhea_g.st.full, __ATOMIC_RELAXED);
	s->write_errors = __atomic_load_n(&rhea_g.write_errors, __ATOMIC_RELAXED);
	s->bytes_raw = writer.bytes_raw;
	s->bytes_stored = writer.bytes_stored;
	s->threads = __atomic_load_n(&rhea_g.threads_seen, __ATOMIC_RELAXED);
	s->waits_unattributed = __atomic_load_n(&rhea_waits_missed, __ATOMIC_RELAXED);
	s->agent_cpu_ns = agent_cpu_ns();
	s->ticker_wakes = __atomic_load_n(&ticker_wakes, __ATOMIC_RELAXED);
	s->ticker_coast_ns = ticker_coast_ns(s->time_ns);
	s->sample_blocked = sampler_blocked_threads();
	s->cfi_build_ns = __atomic_load_n(&rhea_g.cfi_build_ns, __ATOMIC_RELAXED);
}

static void stage_meta(const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);
	void *m = staging_reserve(rhea_meta_size(kl, vl));
	if (m)
		rhea_meta_put(m, key, kl, value, vl);
}

/*
 * The command line, as ps shows it: arguments apart by spaces, the padding
 * a retitled process leaves (NULs, spaces) cut off at the end.  Daemons
 * retitle their processes (setproctitle: nginx's "worker process",
 * postgres's "checkpointer"), and a forked child's recording, begun with
 * what its parent had, said "nginx: master process" for every worker.  So
 * the writer looks again with its statistics (every second, and at the
 * end) and adds a META "cmdline" when the title changed; the last one
 * wins.  Raw system calls: the end may run in a fatal signal's handler.
 */
static char cmdline_staged[4096];

/*
 * The file is read once, at the start; then the memory it shows, with
 * the kernel's rules (get_mm_cmdline): the arguments' area, or, when the
 * NUL that ended it was written over (setproctitle), from there into the
 * environment's up to the first NUL.  An open each second took the
 * lowest free descriptor for a moment, one the program may have counted
 * on (sampler.c).  Bounds from stat (fields 48-51: arg_start, arg_end,
 * env_start, env_end); a process that moves them (prctl PR_SET_MM) is
 * shown where they were.
 */
static uint64_t args_at[4];

static void cmdline_bounds(void)
{
	if (thread_stat_fields((uint32_t)syscall(SYS_getpid), 48, 4, args_at) != 0 || args_at[1] <= args_at[0])
		memset(args_at, 0, sizeof(args_at));
	else if (args_at[2] != args_at[1] || args_at[3] < args_at[2])
		args_at[2] = args_at[3] = args_at[1];
}

static ssize_t read_cmdline(char *buf, size_t cap)
{
	if (args_at[1] > args_at[0]) {
		uint64_t lo = args_at[0], hi = args_at[1];
		char last = 0;
		if (rhea_read_own(hi - 1, &last, 1) == 0) {
			int retitled = last != 0;
			if (retitled)
				hi = args_at[3];
			size_t n = hi - lo < cap - 1 ? (size_t)(hi - lo) : cap - 1;
			if (rhea_read_own(lo, buf, n) == 0)
				return retitled ? (ssize_t)strnlen(buf, n) : (ssize_t)n;
		}
	}
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = syscall(SYS_read, fd, buf, cap - 1);
	syscall(SYS_close, fd);
	return n;
}

static void stage_cmdline(int always)
{
	char buf[sizeof(cmdline_staged)];
	ssize_t n = read_cmdline(buf, sizeof(buf));
	while (n > 0 && (buf[n - 1] == 0 || buf[n - 1] == ' '))
		n--;
	if (n <= 0)
		return;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	buf[n] = 0;
	if (!always && strcmp(buf, cmdline_staged) == 0)
		return;
	memcpy(cmdline_staged, buf, (size_t)n + 1);
	stage_meta("cmdline", buf);
}

/*
 * A process rhea record did not start itself (a forked child, an exec'ed
 * image) creates its recording when it has something to say, so that a
 * fork that execs at once leaves no file behind: on the writer thread,
 * while the program runs.  Opened then, the file took the lowest free
 * descriptor for a moment, and a daemon that had just closed every
 * descriptor and opened /dev/null as its stdin got the recording for it
 * (its stderr too, dup'ed from it: its log lines went into the file,
 * which no longer read).  So the file is made before the program runs on,
 * in the fork's child handler or the exec'ed image's constructor, unnamed
 * (O_TMPFILE in the output's directory) and put high at once; it gets its
 * name (linkat) when it is wanted, and an image that ends or execs with
 * nothing to say leaves nothing.  in_place_of: the parent's descriptor of
 * its recording, already high, which the child's takes the number of (no
 * new slot in the table).  Where O_TMPFILE or the naming is refused, the
 * file is opened late, as before.
 */
static dev_t spare_dev;
static ino_t spare_ino;

static void spare_make(int in_place_of)
{
	char dir[sizeof(output_base)];
	const char *slash = strrchr(output_base, '/');
	if (slash && slash > output_base) {
		memcpy(dir, output_base, (size_t)(slash - output_base));
		dir[slash - output_base] = 0;
	} else {
		strcpy(dir, slash ? "/" : ".");
	}
	int fd = (int)syscall(SYS_openat, AT_FDCWD, dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0 && in_place_of >= 0 && syscall(SYS_dup3, fd, in_place_of, O_CLOEXEC) == in_place_of) {
		syscall(SYS_close, fd);
		fd = in_place_of;
	} else {
		if (in_place_of >= 0)
			syscall(SYS_close, in_place_of);
		if (fd >= 0)
			fd = rhea_fd_high(fd);
	}
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) != 0) {
		syscall(SYS_close, fd);
		fd = -1;
	}
	if (fd >= 0) {
		spare_dev = st.st_dev;
		spare_ino = st.st_ino;
	}
	rhea_g.spare_fd = fd;
}

static void spare_drop(void)
{
	if (rhea_g.spare_fd >= 0)
		syscall(SYS_close, rhea_g.spare_fd);
	rhea_g.spare_fd = -1;
}

/* The file at path, new: the spare named so, else opened; -1 and errno.
 * The spare, named, stays rhea_g.spare_fd until open_output hands it to
 * rhea_g.fd, after its header: a daemon closing every descriptor while the
 * writer named its file closed it in between (its recording left empty,
 * 1 run in 15 under make test). */
static int spare_ours(void)
{
	struct stat st;
	int fd = rhea_g.spare_fd;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != spare_dev || st.st_ino != spare_ino))
		rhea_g.spare_fd = -1; /* not ours any more (a raw close): never touched */
	return rhea_g.spare_fd >= 0;
}

/* RHEA_TEST_NAME_SLOW=1 (tests only): the spare pauses 300 ms just after
 * it is named, where a SIGKILL once left a file nobody could end (e2e
 * forkkill, named-slow). */
static int test_name_slow;

static int create_output(const char *path)
{
	int fd = spare_ours() ? rhea_g.spare_fd : -1;
	if (fd >= 0) {
		char proc[40] = "/proc/self/fd/";
		u64_to_str((uint64_t)fd, proc + strlen(proc));
		/* the name in our memory first (core/salvage.h, output_ino) */
		salvage_name(path, spare_dev, spare_ino);
		if (syscall(SYS_linkat, AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 ||
		    (errno != EEXIST && syscall(SYS_linkat, fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)) {
			if (test_name_slow)
				rhea_sleep_ns(300000000);
			return fd;
		}
		if (errno == EEXIST)
			return -1;
		spare_drop(); /* no /proc, no right to name it: opened late */
	}
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == ENOENT || errno == EROFS)) {
		/* A process that gave up root and exec'ed (gosu, setpriv), or
		 * was forked in a jail: rhea record's keeper, which may, makes
		 * it (its own reason stays when the keeper cannot). */
		int e = errno;
		fd = salvage_ask_file(path);
		if (fd < 0 && errno != EEXIST)
			errno = e;
	}
	return fd;
}

/* The file open_output could not set up: closed, the spare it was too. */
static void output_abandon(int fd)
{
	if (fd == rhea_g.spare_fd)
		rhea_g.spare_fd = -1;
	syscall(SYS_close, fd);
}

/* The root directory the output's path was given in (the image's at its
 * start; a fork's child keeps its parent's).  A process jailed since
 * (chroot: hooks.c names the recording first, but a child forked inside
 * the jail has none yet) is told why the path leads nowhere. */
static dev_t root_dev;
static ino_t root_ino;

static void note_root(void)
{
	struct stat st;
	if (stat("/", &st) == 0) {
		root_dev = st.st_dev;
		root_ino = st.st_ino;
	}
}

static int root_moved(void)
{
	struct stat st;
	return root_ino && stat("/", &st) == 0 && (st.st_dev != root_dev || st.st_ino != root_ino);
}

/* The writer on fd, and the file's header written: 0, else -errno and
 * in *why what failed. */
static int file_begin(int fd, const char **why)
{
	/* (a forked child's, or rhea attach's again: the last one's goes) */
	rfile_writer_destroy(&writer);
	int r = rfile_writer_init(&writer, fd, 3, STAGING_SIZE);
	if (r < 0) {
		*why = "cannot set up the writer";
		return r;
	}
	/* A full disk stops the agent's chunks short of the last bytes: the
	 * end rhea record then adds, and why the agent stopped, fit. */
	writer.keep_free = RFILE_END_ROOM;
	struct rhea_file_header h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, RHEA_MAGIC, 8);
	h.version = RHEA_VERSION;
	h.header_size = sizeof(h);
	h.clock = RHEA_CLOCK_MONOTONIC;
	h.pid = (uint32_t)rhea_g.pid;
	h.ppid = (uint32_t)getppid();
	h.start_ns = rhea_g.start_ns;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	h.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec -
			      (rhea_now() - rhea_g.start_ns);
	h.interval_ns = rhea_g.cfg.interval_ns;
	h.max_depth = rhea_g.cfg.max_depth;
	r = rfile_write_header(&writer, &h);
	if (r < 0)
		*why = "cannot write the recording";
	return r;
}

static int open_output(void)
{
	int fd = -1;
	int refused = 0;
	/* The spare (an unnamed file: spare_make) gets its header before it
	 * is named, so that a process killed while it creates its recording
	 * leaves none or one with its header, never an empty file (3 of 10
	 * children that SIGKILLed themselves right after their work, while
	 * the writer named their files, left one; rhea record could only
	 * call it "empty file" twice). */
	const char *why_not = NULL;
	int r0 = 0, begun = -1;
	if (spare_ours() && (r0 = file_begin(rhea_g.spare_fd, &why_not)) == 0)
		begun = rhea_g.spare_fd;
	/* rhea record gets the memory first, the file's name once it has one
	 * (salvage_publish): a failure below switches the agent off, which
	 * tells it there is nothing to finish */
	salvage_publish(&rhea_g.buf, rhea_g.cfg.max_nodes);
	if (r0 < 0) {
		/* No header in the spare (a full disk): it is never named, and
		 * nothing else is tried (children on a full disk each left an
		 * empty file, and rhea record said "empty file" of each) */
		spare_drop();
		agent_disable(why_not, -r0);
		return r0;
	}
	if (is_root) {
		memcpy(rhea_g.path, output_base, sizeof(rhea_g.path));
		fd = create_output(rhea_g.path);
		refused = fd < 0 && errno != EEXIST; /* (the message names the path asked for) */
	}
	for (int n = 0; fd < 0 && !refused && n < 1000; n++) {
		rhea_derived_name(rhea_g.path, sizeof(rhea_g.path), output_base, (unsigned long)rhea_g.pid,
				  (unsigned)n);
		fd = create_output(rhea_g.path);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0 || fd != rhea_g.spare_fd)
		spare_drop(); /* (one that could not be named) */
	if (fd < 0) {
		int e = errno;
		/* strerror(e), and for a refusal who asks and what to do; no
		 * stdio: the end may come here from a fatal signal's handler */
		char why[256];
		const char *se = strerror(e);
		size_t n = strnlen(se, 64);
		memcpy(why, se, n);
		why[n] = 0;
		if (e == EACCES || e == EPERM) {
			/* most often a program exec'ed after its process gave up
			 * root (su's child), which rhea record cannot help */
			static const char a[] = " (the program runs as uid ", b[] = ", who may not write there: run ",
					  c[] = " as that user, or give it a directory it may write to)";
			const char *cmd = rhea_attached ? "rhea attach" : "rhea record";
			memcpy(why + n, a, sizeof(a) - 1);
			n += sizeof(a) - 1;
			n += u64_to_str(geteuid(), why + n);
			memcpy(why + n, b, sizeof(b) - 1);
			n += sizeof(b) - 1;
			memcpy(why + n, cmd, strlen(cmd));
			n += strlen(cmd);
			memcpy(why + n, c, sizeof(c)); /* (its NUL too) */
		} else if (e == ENOENT && root_moved()) {
			static const char a[] = " (the process is in a chroot entered after rhea started, where the path "
						"leads nowhere)";
			memcpy(why + n, a, sizeof(a)); /* (its NUL too) */
		}
		if (!rhea_g.cfg.quiet)
			say("agent switched off: cannot create the recording ", rhea_g.path, ": ", why);
		agent_disable("", e); /* said above, with the path */
		return -e;
	}
	if (fd != rhea_g.spare_fd) /* (the spare was put high when made) */
		fd = rhea_fd_high(fd);
	struct stat st;
	if (fstat(fd, &st) == 0) {
		out_dev = st.st_dev;
		out_ino = st.st_ino;
	}
	/* (the spare named: begun; a file opened instead of it: from here) */
	int r = fd >= 0 && fd == begun && fd == rhea_g.spare_fd ? 0 : file_begin(fd, &why_not);
	if (r < 0) {
		/* the file made here (O_EXCL) with no header in it: it goes, not
		 * left empty under its name, if the name is still it */
		struct stat at;
		if (stat(rhea_g.path, &at) == 0 && at.st_dev == out_dev && at.st_ino == out_ino)
			syscall(SYS_unlinkat, AT_FDCWD, rhea_g.path, 0);
		output_abandon(fd);
		agent_disable(why_not, -r);
		return r;
	}
	/* in this order: agent_owns_fd looks at spare_fd first */
	int spare = rhea_g.spare_fd == fd;
	__atomic_store_n(&rhea_g.fd, fd, __ATOMIC_RELEASE);
	if (spare)
		__atomic_store_n(&rhea_g.spare_fd, -1, __ATOMIC_RELEASE);
	/* from now on rhea record can finish this file from our memory (the
	 * spare was named there before it took the name: create_output) */
	if (!spare)
		salvage_name(rhea_g.path, out_dev, out_ino);
	return 0;
}

/* A merged run of identical captures waits in its thread's slot for the
 * next different capture; one older than a flush period is emitted now, so
 * that a SIGKILL loses at most that much of it.  The pending_busy protocol
 * makes this safe against the owner merging at the same time. */
static void flush_old_pending(struct rhea_tstate *t, void *arg)
{
	uint64_t now = *(uint64_t *)arg;
	if (t->pend->valid && now - t->pend->s.begin_ns > FLUSH_PERIOD_NS)
		capture_flush_pending(t);
}

/* STATS entries, "the last one wins", are written every STATS_PERIOD_NS and
 * with the last chunk (of 144 bytes, ~70 compressed, they were 2% of a
 * server's recording when every 100 ms flush carried one); a recording cut
 * short by SIGKILL has statistics at most that old. */
#define STATS_PERIOD_NS 1000000000ull
static uint64_t stats_staged_ns;

/* One round of the writer: everything buffered goes into one chunk (or a
 * few when more than the staging buffer is waiting).  Drain lock held.
 * seal_spin_ns != 0: the last round (exit, exec, fatal signal). */
/* A forked child's file, opened the first time it is wanted (it has
 * something to say, or the process is about to change its user: see
 * agent_before_setid), tried once.  Drain lock held.  0 when open. */
static int output_wanted(void)
{
	if (rhea_g.fd >= 0)
		return 0;
	if (!file_failed && open_output() < 0)
		file_failed = 1;
	return rhea_g.fd >= 0 ? 0 : -1;
}

static void flush_round(int seal_spin_ns)
{
	if (rhea_g.fd < 0 && (!__atomic_load_n(&rhea_g.captures, __ATOMIC_RELAXED) || output_wanted() < 0))
		return;
	uint64_t now = rhea_now();
	salvage_round(1, writer.offset);
	thread_foreach(flush_old_pending, &now);
	buf_seal_all(&rhea_g.buf, (uint64_t)seal_spin_ns);
	stage_nodes();
	buf_drain(&rhea_g.buf, drain_cb, NULL);
	flush_hold();
	/* Nodes interned while draining: samples drained may refer to them. */
	stage_nodes();
	if (seal_spin_ns || now - stats_staged_ns >= STATS_PERIOD_NS) {
		stats_staged_ns = now;
		stage_stats();
		stage_cmdline(0);
	}
	write_staging();
	buf_release_drained(&rhea_g.buf);
	salvage_round(0, 0);
}

/*
 * rhea attach's stop (attach.c), on the writer thread as it leaves, for any
 * reason (the CLI asked or is gone, the process exits, the agent switched
 * itself off): the import slots back as they were, hooks off, sampling
 * stopped, the recording flushed and ended, the ticker joined; this thread
 * detaches itself.
 */
static int attach_started;
static int attach_spent; /* atomic: its recording over, its threads gone (rhea_attach_restart) */
/* A forked child of an attached process: its copy holds the parent's thread
 * registry and was switched off half way; an attach to the child loads a
 * copy of its own. */
static int attach_forked;

static void attach_detach(void)
{
	attach_unpatch();
	for (int c = 0; c < RHEA_C_COUNT; c++)
		rhea_g.on[c] = 0;
	sampler_stop();
	agent_finish(RHEA_END_DETACH, 0);
	salvage_close_fd(); /* the mapping stays, as the agent's tables do */
	threads_stop = 1;
	ticker_wake_up(TICKER_TICK);
	pthread_join(ticker_th, NULL);
	if (rhea_g.fd >= 0) {
		syscall(SYS_close, rhea_g.fd);
		rhea_g.fd = -1;
	}
	if (attach_started)
		attach_status("stopped\n"); /* else "failed: ..." stays */
	attach_cleanup();
	pthread_detach(pthread_self());
	__atomic_store_n(&attach_spent, 1, __ATOMIC_RELEASE); /* (last: rhea_attach_restart) */
}

/*
 * The main thread died without pthread_exit (a seccomp filter's
 * SECCOMP_RET_KILL_THREAD, a raw exit system call) and no thread of the
 * program is left: only the agent's threads keep the process alive, a
 * zombie its parent waits for forever.  It ends as it would have without
 * them: by the signal that killed the main thread, else with its exit
 * code (its stat's field 52, exit_code, in waitpid's form).
 */
static void end_as_leader(void)
{
	int code = thread_task_exit_code((uint32_t)rhea_g.pid);
	int sig = code & 0x7f;
	if (sig && sig != 0x7f) {
		agent_finish(RHEA_END_SIGNAL, sig);
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		hooks_real_sigaction(sig, &dfl, NULL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		hooks_real_sigmask(SIG_UNBLOCK, &one, NULL);
		syscall(SYS_tgkill, rhea_g.pid, thread_gettid(), sig);
	}
	_exit((code >> 8) & 0xff); /* (the hook ends the recording) */
}

/*
 * rhea attach -d: the CLI's word to stop comes that long after the program
 * goes on, and was read once a writer round (FLUSH_PERIOD_NS): an attach
 * for 200 ms recorded 250-300 (the CLI counted its naps, not the time,
 * too).  From a little before it is due (the program goes on after this
 * thread starts), the writer looks every STOP_POLL_NS, for at most
 * STOP_POLL_FOR_NS (a CLI stopped by a debugger, say); the rounds keep
 * their period.  0: no -d (Ctrl-C ends it, a round's wait is fine).
 */
#define STOP_POLL_EARLY_NS 20000000ull
#define STOP_POLL_NS 5000000ull
#define STOP_POLL_FOR_NS 2000000000ull

static uint64_t attach_poll_from(uint64_t now)
{
	uint64_t d = rhea_g.cfg.attach_for_ns;
	if (!rhea_attached || !d)
		return 0;
	return now + (d > STOP_POLL_EARLY_NS ? d - STOP_POLL_EARLY_NS : 0);
}

/* arg: rhea_g.buf.wake as it was before the thread was created. */
static void *writer_main(void *arg)
{
	uint32_t leader_rounds = 0;
	rhea_guard = 1; /* nothing this thread does is traced */
	rhea_agent_tids[1] = thread_gettid();
	/* A call for a round counts from before this thread existed: a forked
	 * child's first capture may come before it first runs (capture.c). */
	uint32_t seen = (uint32_t)(uintptr_t)arg;
	uint64_t last_round = rhea_now_slow(), poll_from = attach_poll_from(last_round);
	while (!threads_stop) {
		uint32_t w = __atomic_load_n(&rhea_g.buf.wake, __ATOMIC_ACQUIRE);
		int polling = 0;
		if (w == seen) {
			uint64_t ns = FLUSH_PERIOD_NS;
			if (poll_from) {
				uint64_t now = rhea_now_slow();
				if (now >= poll_from + STOP_POLL_FOR_NS)
					poll_from = 0;
				else if (now >= poll_from)
					ns = STOP_POLL_NS, polling = 1;
				else if (poll_from - now < ns)
					ns = poll_from - now;
			}
			struct timespec ts = {0, (long)ns};
			syscall(SYS_futex, &rhea_g.buf.wake, FUTEX_WAIT_PRIVATE, w, &ts, NULL, 0);
		}
		agent_caps_follow();
		/* calls from here on are for the next round */
		seen = __atomic_load_n(&rhea_g.buf.wake, __ATOMIC_ACQUIRE);
		if (threads_stop || rhea_g.finished)
			break;
		uint64_t now = poll_from ? rhea_now_slow() : 0; /* (only -d's looks need it) */
		if (polling && seen == w && now - last_round < FLUSH_PERIOD_NS) {
			if (attach_should_stop())
				break; /* (no round due: only a look at the word to stop) */
			continue;
		}
		last_round = now;
		lock_drain(UINT64_MAX);
		if (!rhea_g.finished)
			flush_round(0);
		unlock_drain();
		if (rhea_g.leader_gone && sampler_program_gone() != 0 && !thread_program_left()) {
			/* What glibc does when a process's last thread exits
			 * (thread.c, thread_program_left); our on_exit handler
			 * then ends the recording. */
			exit(0);
		}
		/* (once a second: a read of the main thread's stat, by the
		 * sampler when it can: sampler.c, check_leader) */
		int dead = sampler_leader_dead();
		if (dead < 0 && !rhea_g.leader_gone && ++leader_rounds % 10 == 0 && !rhea_attached)
			dead = thread_task_state((uint32_t)rhea_g.pid) == 0 && !thread_program_left();
		if (dead > 0)
			end_as_leader();
		agent_say_deferred();
		if (rhea_attached && attach_should_stop())
			break;
		if (rhea_attached && attach_rescan())
			modules_scan(); /* the program loaded something: unwind through it */
	}
	agent_thread_cpu_note(1);
	if (rhea_attached)
		attach_detach();
	return NULL;
}

void ticker_wake_up(uint32_t why)
{
	uint32_t was = __atomic_load_n(&rhea_g.ticker_wake, __ATOMIC_RELAXED);
	do {
		if (was == TICKER_TICK || was == why)
			return; /* told already */
	} while (!__atomic_compare_exchange_n(&rhea_g.ticker_wake, &was, why, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	if (was == 0)
		syscall(SYS_futex, &rhea_g.ticker_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * The ticker keeps the epoch moving for hooks that read no clock (an
 * allocation, an uncontended lock) and come too rarely to read the TSC
 * themselves (once in CLOCK_EVERY calls: agent.h, untimed_note): while it
 * ticks, the epoch moves at every interval's end, and a timed call during
 * which it did not move was shorter than an interval
 * (hooks.c, epoch_says_short).  Each wake-up costs 10-20 us of CPU in the
 * VMs rhea was measured on: at 1 ms, 1-2% of a CPU, which a mostly idle
 * server paid in full (its program used less).  So it ticks only while
 * its ticks are used and worth their cost:
 *
 *  - ticking: it sleeps to the end of each interval of the grid and
 *    advances the epoch if no hook's clock read did so first.  It coasts
 *    when no capture has used an epoch it made for IDLE_AFTER intervals
 *    (nothing captured at all, or only right after clock reads: a server
 *    whose reads, writes and waits keep the epoch current themselves), and
 *    coasting costs less than ticking (epoch_coast_pays: the timed calls a
 *    second, each of which would then read its end clock, against its own
 *    wake-ups, measured on its CPU clock);
 *  - coasting: ticker_coasting is set, so timed calls read their end clock
 *    and releases the time (hooks.c, waits.c): exact without ticks.
 *    Threads whose hooks read no clock still need the epoch to move: the
 *    ticker probes for them.  It advances the epoch itself once at the
 *    end of the interval in which captures began again (the first capture
 *    of an interval ending PROBE_HOLD intervals or more after the last
 *    probe asks for one, epoch_consumed), and when it looks on its own
 *    (every COAST_LOOK intervals, less often while the epoch stands still,
 *    up to COAST_MAX_NS).  A hook that captures in a probe wakes it to
 *    tick again.  A thread whose hooks read no clock therefore waits about
 *    an interval for its next capture after a quiet spell, or at most
 *    PROBE_HOLD intervals when it was the clock reads of others that kept
 *    the epoch moving.  On a look, it ticks again when the timed calls
 *    now make ticking the cheaper.
 *
 * Around coasting the epoch is bumped (going to coast, then leaving it,
 * before ticker_coasting is cleared), so that a blocking call that lies inside
 * the spell sees ticker_coasting at its end and reads the clock instead of
 * trusting an epoch that did not move, and a call that overlaps its edge
 * sees the epoch move.  Those bumps are no ticks: a capture in them does
 * not call the ticker back.
 */
#define IDLE_AFTER 16
#define PROBE_HOLD 32
#define COAST_LOOK 100
#define COAST_MAX_NS 1000000000ull
#define COST_TICKS 64 /* ticks per measurement of a wake-up's cost */

static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* What the ticker knows of the costs (epoch_coast_pays). */
static struct {
	uint64_t wake_ns;          /* CPU per wake-up, as measured */
	uint64_t cpu0, ticks;      /* since the last measurement */
	uint64_t calls0, calls_t0; /* timed calls counted, and when */
	uint64_t calls_per_s;
	int calls_valid;
} cost;

/* The timed calls a second since the last look (at least 10 ms ago);
 * 0 until there is a measurement. */
static int cost_calls(void)
{
	/* (not rhea_now: the ticker's own clock reads must not move the epoch) */
	uint64_t now = rhea_now_slow(), n = __atomic_load_n(&rhea_g.timed_calls, __ATOMIC_RELAXED);
	if (cost.calls_t0 && now - cost.calls_t0 < 10000000ull)
		return cost.calls_valid;
	if (cost.calls_t0 && now > cost.calls_t0) {
		cost.calls_per_s = (uint64_t)((unsigned __int128)(n - cost.calls0) * 1000000000ull / (now - cost.calls_t0));
		cost.calls_valid = 1;
	}
	cost.calls0 = n;
	cost.calls_t0 = now;
	return cost.calls_valid;
}

static void cost_tick(void)
{
	if (++cost.ticks < COST_TICKS)
		return;
	uint64_t cpu = 0;
	rhea_thread_cpu_ns(thread_gettid(), &cpu);
	if (cost.cpu0 && cpu > cost.cpu0)
		cost.wake_ns = (cpu - cost.cpu0) / cost.ticks;
	cost.cpu0 = cpu;
	cost.ticks = 0;
}

/* Until the end of the current interval of the grid (a little past it),
 * or one interval without a grid. */
static void ticker_sleep(void)
{
	uint64_t ns = rhea_g.cfg.interval_ns;
	const struct rhea_cal *c = __atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE);
	uint64_t end = __atomic_load_n(&rhea_g.epoch_end_tsc, __ATOMIC_ACQUIRE);
	if (c && rhea_g.interval_tsc && end != UINT64_MAX) {
		uint64_t now = __builtin_ia32_rdtsc();
		ns = end > now ? (uint64_t)(((unsigned __int128)(end - now) * c->mult) >> 32) : 0;
		if (ns > rhea_g.cfg.interval_ns)
			ns = rhea_g.cfg.interval_ns;
		ns += 20000; /* wake past the end, not just before it */
	}
	struct timespec ts;
	ns_to_ts(ns, &ts);
	syscall(SYS_nanosleep, &ts, NULL);
	__atomic_fetch_add(&ticker_wakes, 1, __ATOMIC_RELAXED);
}

/* One tick: advance the epoch at the interval's end unless a hook did. */
static void tick_once(void)
{
	if (rhea_g.interval_tsc && rhea_cal)
		epoch_cross(__builtin_ia32_rdtsc(), 1);
	else
		epoch_bump(1); /* no grid: the ticker alone moves the epoch */
}

/* Probes may be asked for again from PROBE_HOLD intervals on. */
static void probe_hold(void)
{
	uint64_t it = __atomic_load_n(&rhea_g.interval_tsc, __ATOMIC_RELAXED);
	__atomic_store_n(&rhea_g.probe_after_tsc, __builtin_ia32_rdtsc() + PROBE_HOLD * it, __ATOMIC_RELEASE);
}

/* RHEA_TEST_TICKER (tests only): 1 never coasts, 2 coasts whenever it
 * can, whatever the costs (e2e shortcalls: each way of timing short
 * calls). */
static int test_ticker;

/* Whether coasting costs less than ticking now (coasting: the ticker
 * coasts), by the costs measured (cost); always under RHEA_TEST_TICKER=2. */
static int coast_pays(int coasting)
{
	return test_ticker == 2 ||
	       epoch_coast_pays(cost.calls_per_s, clock_read_ns(), cost.wake_ns, rhea_g.cfg.interval_ns, coasting);
}

/* Whether coasting is possible: not with intervals of a second or more
 * (the looks would come as often as ticks), nor before the TSC's first
 * calibration, which makes the grid.  Without a usable TSC there is no
 * grid at all: then the epoch moves only when the ticker moves it (a probe
 * for every burst of captures, the looks), and timed calls read
 * clock_gettime at their end while it coasts. */
static int can_coast(void)
{
	if (rhea_g.cfg.interval_ns >= 1000000000ull || test_ticker == 1)
		return 0;
	return !clock_tsc_usable() || (__atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE) &&
				       __atomic_load_n(&rhea_g.epoch_end_tsc, __ATOMIC_RELAXED) != UINT64_MAX);
}

static void coast(void)
{
	__atomic_store_n(&rhea_g.probe_after_tsc, UINT64_MAX, __ATOMIC_RELAXED);
	__atomic_store_n(&rhea_g.ticker_wake, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&rhea_g.ticker_coasting, 1, __ATOMIC_SEQ_CST);
	epoch_bump(0);
	probe_hold();
	uint64_t look = COAST_LOOK * rhea_g.cfg.interval_ns;
	uint64_t start = rhea_now_slow(), next_look = start + look;
	__atomic_store_n(&coast_since_ns, start, __ATOMIC_RELEASE);
	uint32_t seen = __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED);
	while (!threads_stop && !rhea_g.finished) {
		uint64_t now = rhea_now_slow();
		if (now < next_look) {
			struct timespec ts;
			ns_to_ts(next_look - now, &ts);
			syscall(SYS_futex, &rhea_g.ticker_wake, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
			__atomic_fetch_add(&ticker_wakes, 1, __ATOMIC_RELAXED);
		}
		agent_caps_follow();
		uint32_t why = __atomic_exchange_n(&rhea_g.ticker_wake, 0, __ATOMIC_ACQ_REL);
		if (why == TICKER_TICK || threads_stop || rhea_g.finished)
			break;
		now = rhea_now_slow();
		if (now >= next_look) { /* a look of its own (probes do not put it off) */
			clock_calibrate();
			cost_calls();
			if (!coast_pays(1))
				break; /* the timed calls now cost more than ticks */
			uint32_t e = __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED);
			/* the hooks moved the epoch since the last look: look as
			 * often as at first, else less and less often */
			look = e != seen ? COAST_LOOK * rhea_g.cfg.interval_ns
					 : look * 2 < COAST_MAX_NS ? look * 2 : COAST_MAX_NS;
			next_look = now + look;
		} else if (why == TICKER_PROBE) {
			ticker_sleep(); /* to the end of the interval captures began in */
		} else {
			continue; /* woken for nothing */
		}
		__atomic_store_n(&rhea_g.probe_after_tsc, UINT64_MAX, __ATOMIC_RELAXED);
		tick_once(); /* the probe, if no clock read ended the interval */
		probe_hold();
		seen = __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&rhea_g.probe_after_tsc, UINT64_MAX, __ATOMIC_RELAXED);
	epoch_bump(0);
	__atomic_store_n(&rhea_g.ticker_coasting, 0, __ATOMIC_SEQ_CST);
	uint64_t end = rhea_now_slow();
	__atomic_store_n(&coast_since_ns, 0, __ATOMIC_RELEASE); /* (a reader in between counts less, never twice) */
	__atomic_store_n(&coast_total_ns, coast_total_ns + (end > start ? end - start : 0), __ATOMIC_RELEASE);
	cost.cpu0 = 0; /* the next measurement from scratch */
	cost.ticks = 0;
}

static void *ticker_main(void *arg)
{
	(void)arg;
	rhea_guard = 1;
	rhea_agent_tids[0] = thread_gettid();
	unsigned unused = 0, ticks = 0;
	memset(&cost, 0, sizeof(cost));
	cost.wake_ns = 5000; /* until measured */
	cost_calls();        /* the first window starts now */
	while (!threads_stop && !rhea_g.finished) {
		ticker_sleep();
		agent_caps_follow();
		tick_once();
		cost_tick();
		if (__atomic_exchange_n(&rhea_g.epoch_used, 0, __ATOMIC_ACQ_REL))
			unused = 0;
		else
			unused++;
		if (!rhea_cal || (++ticks & 15) == 0)
			clock_calibrate(); /* at once until the first calibration */
		if (unused >= IDLE_AFTER && can_coast()) {
			if (cost_calls() && coast_pays(0)) {
				coast();
				cost_calls();
			}
			unused = 0;
		}
	}
	agent_thread_cpu_note(0);
	return NULL;
}

/*
 * The agent's threads get 1 MB stacks, not glibc's 8 MB: nothing they run
 * recurses (zstd, the CFI compiler, /proc reads), and a program under an
 * address-space limit (ulimit -v) lost 24 MB of it to them (a python
 * that fit in 150 MB got MemoryError under rhea).  NULL: the default.
 */
const pthread_attr_t *agent_thread_attr(void)
{
	static pthread_attr_t attr;
	static int state; /* 0 not made, 1 made, -1 failed */
	if (state == 0)
		state = pthread_attr_init(&attr) == 0 && pthread_attr_setstacksize(&attr, 1u << 20) == 0 ? 1 : -1;
	return state > 0 ? &attr : NULL;
}

static int start_threads(void)
{
	sigset_t all, old;
	sigfillset(&all);
	/* Our threads must never take a signal meant for the program. */
	hooks_real_sigmask(SIG_SETMASK, &all, &old);
	threads_stop = 0;
	rhea_g.ticker_coasting = 0; /* a forked child starts with a ticking ticker */
	rhea_g.ticker_wake = 0;
	rhea_g.epoch_used = 0;
	rhea_g.ticker_epoch = 0;
	rhea_g.probe_after_tsc = UINT64_MAX;
	ticker_wakes = coast_total_ns = coast_since_ns = 0; /* a forked child counts its own */
	rhea_guard++;
	const pthread_attr_t *attr = agent_thread_attr();
	uintptr_t wake0 = __atomic_load_n(&rhea_g.buf.wake, __ATOMIC_ACQUIRE);
	int r = pthread_create(&ticker_th, attr, ticker_main, NULL);
	if (r == 0)
		r = pthread_create(&writer_th, attr, writer_main, (void *)wake0);
	rhea_guard--;
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
	if (r == 0) {
		pthread_setname_np(ticker_th, "rhea-ticker");
		pthread_setname_np(writer_th, "rhea-writer");
		r = -sampler_start();
		/* a process started with the signal blocked (a mask survives
		 * exec); a thread rhea attach stops keeps its own */
		if (r == 0 && !rhea_attached)
			sampler_unblock_self();
	}
	return -r;
}

static void write_end(unsigned reason, int status);

/* ---- finishing ------------------------------------------------------------ */

/* arg non-NULL: the end comes from a signal's handler, on this thread,
 * whose mask is then the handler's (every signal): it says nothing of the
 * program's (a program stopped by Ctrl-C was said to have "1 thread
 * blocked the sampling signal"). */
static void flush_thread(struct rhea_tstate *t, void *arg)
{
	thread_refresh_name(t);
	if (!(arg && t == rhea_hot.self))
		sampler_note_blocked(t);
	capture_flush_pending(t);
	capture_emit_counts(t);
}

/*
 * Threads blocked in a hooked call when the recording ends (the program
 * stopped with Ctrl-C or a SIGTERM while they hang in a read, a lock wait
 * or a sleep; it exits while they wait; rhea attach leaves): each gets a
 * BLOCK sample from the call's start to the end, if it waited min_block
 * or more.  The end used to cut them at their last capture: `sleep 10`
 * stopped after a second was "0 ns recorded", its second in nanosleep
 * nowhere.  The stack is walked from the hook's frame (capture.c:
 * its caller's pc, sp and rbp), as the hook's own BLOCK sample would be:
 * the thread is blocked below it, and its stack above stands still.  The
 * ending thread may be one of them: a fatal signal that ends the recording
 * interrupted its call (Ctrl-C on a single threaded program).
 */
struct end_blocked_arg {
	uint64_t now;
	uint32_t self;
};

/* A thread blocked in a system call no hook saw begin, not captured this
 * long: one capture more at the end, from outside (as the sampler's forced
 * ones), so that its span reaches the end.  Under rhea attach, the
 * threads already waiting (redis-server's four background threads, in a
 * condition wait for good) ended up to --force-after (1 s) before it, as
 * if they had exited. */
#define END_FORCE_NS 10000000ull

static void end_blocked(struct rhea_tstate *t, void *arg)
{
	const struct end_blocked_arg *a = arg;
	/* another thread must be blocked in a system call, below the hook */
	uint64_t pc, sp = 0;
	long nr;
	if (!__atomic_load_n(&t->call_since, __ATOMIC_ACQUIRE)) {
		if (t->tid != a->self && a->now - t->last_capture_ns >= END_FORCE_NS &&
		    sampler_blocked(t->tid, &pc, &sp, &nr) == RHEA_ASLEEP_AT)
			capture_forced(t, pc, sp, nr);
		return;
	}
	if (t->tid != a->self && sampler_blocked(t->tid, &pc, &sp, &nr) == RHEA_NOT_ASLEEP)
		return;
	/* The sampler thread may be taking this thread's forced capture right
	 * now (microseconds): let it finish, or the end's wait is lost and the
	 * thread's last seen is that capture's, up to --force-after short
	 * (hangs term: a mutex wait of 304 ms of 404).  Bounded: the thread
	 * itself, interrupted in a capture, holds it for good. */
	if (t->tid != a->self)
		for (int i = 0; i < 200000 && __atomic_load_n(&t->in_capture, __ATOMIC_ACQUIRE); i++)
			__builtin_ia32_pause();
	capture_wait_so_far(t, a->now, sp);
}

static void end_blocked_all(void)
{
	struct end_blocked_arg a = {rhea_now(), thread_gettid()};
	thread_foreach(end_blocked, &a);
}

/* Every thread's last words as the recording (or this image) ends: this
 * thread's last sample first (its counters then hold none of the end's
 * own work), the waits so far of the threads blocked in hooked calls,
 * then each thread's pending sample, sites and name.  from_signal: the
 * end runs in a signal's handler (flush_thread). */
static void end_threads(int from_signal)
{
	if (rhea_hot.self && rhea_g.active)
		capture_at_end(rhea_hot.self);
	end_blocked_all();
	thread_foreach(flush_thread, from_signal ? (void *)1 : NULL);
}

/*
 * Ending the recording takes a few milliseconds (a forked child's first
 * chunk carries every module).  A signal that ends the process must not cut
 * that short: Python's multiprocessing sends SIGTERM to its pool workers
 * as they exit, and their recordings came out empty or header-only.  So
 * the thread that ends the recording holds off the asynchronous signals
 * that kill (they are delivered when it is done, and do what they would
 * have), and a fatal signal taken by another thread meanwhile waits for
 * the end (on_fatal, at most a second) before it goes on.
 */
static const int async_fatal_sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGTERM,  SIGXCPU,
				       SIGXFSZ, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF};
static volatile int finish_done;    /* the recording is ended (or never will be) */
/* RHEA_TEST_FINISH_SLOW=1 (tests only): the end pauses 200 ms just after
 * it is claimed, where a signal once cut it (e2e termexit). */
static int test_finish_slow;
static __thread int finishing_here; /* this thread is ending it */

static void hold_async_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(async_fatal_sigs) / sizeof(async_fatal_sigs[0]); i++)
		sigaddset(&set, async_fatal_sigs[i]);
	hooks_real_sigmask(SIG_BLOCK, &set, old);
}

static void wait_for_finish(void)
{
	for (int i = 0; i < 1000 && !finish_done && !finishing_here; i++)
		rhea_sleep_ns(1000000);
}

/*
 * A thread about to install a seccomp filter of its own (sshd's
 * privilege-separated child, through prctl: hooks.c).  What the filter
 * allows nobody can tell, and a system call it forbids kills the thread:
 * sshd's pre-authentication child died of the agent's getrusage in its
 * next capture, and the agent's threads kept its process alive, a zombie
 * that ssh waited for forever.  So from here the agent makes no system
 * call on this thread: its recursion guard stays up (every hook calls
 * straight through, the sampler's signal does nothing), its sampling
 * timer is deleted now, its exit and the process's end are left to the
 * agent's own threads and to rhea record (which finish it from outside,
 * as after a SIGKILL), and threads it creates or forks inherit this with
 * the filter.  Its work from here is in no sample; the sampler's forced
 * captures still see its waits from outside.
 */
__thread int rhea_sealed;

void agent_seal_thread(void)
{
	if (rhea_sealed)
		return;
	struct rhea_tstate *t = rhea_hot.self;
	if (t && rhea_g.active)
		sampler_disarm(t);
	rhea_sealed = 1;
	rhea_guard++; /* for good */
}

/* The filter was refused (no PR_SET_NO_NEW_PRIVS, a bad program): the
 * thread is traced again, its sampling timer armed again. */
void agent_unseal_thread(void)
{
	if (!rhea_sealed)
		return;
	rhea_sealed = 0;
	rhea_guard--;
	struct rhea_tstate *t = rhea_hot.self;
	if (t && rhea_g.active)
		sampler_arm(t);
}

/*
 * A filter for every thread of the process (seccomp's
 * SECCOMP_FILTER_FLAG_TSYNC, as qemu's -sandbox and libseccomp programs
 * asking for thread sync install it): the agent's own threads come under
 * it too, and any system call of theirs it forbids may kill the process.
 * So tracing ends before it is in force, as when rhea attach leaves: the
 * sampler and its timers stopped, the recording flushed and ended
 * (RHEA_END_SANDBOXED), the ticker and the writer joined (a thread that
 * has been joined makes no more calls), the crash handlers given back
 * (the program's death stays its own), and this thread sealed.  Hooks
 * call straight through from then on, a forked child is not traced
 * (agent_postfork_child: the agent is not active) and an exec'd image
 * starts under the filter, which stops its agent at once (agent_init).
 * If the kernel refuses the filter, tracing stays ended: the recording
 * says where.  A thread already sealed can do none of this (its own filter
 * may forbid it): the agent's threads then stay.
 */
static int process_sealed;
static void disarm_fatal_signals(void);

void agent_seal_process(void)
{
	if (process_sealed || rhea_sealed || agent_in_vfork_child())
		return;
	process_sealed = 1;
	if (rhea_g.active) {
		sampler_stop();
		agent_finish(RHEA_END_SANDBOXED, 0);
		salvage_close_fd();
	}
	threads_stop = 1;
	if (ticker_th) {
		ticker_wake_up(TICKER_TICK);
		pthread_join(ticker_th, NULL);
		ticker_th = 0;
	}
	if (writer_th) {
		buf_wake_writer(&rhea_g.buf);
		pthread_join(writer_th, NULL);
		writer_th = 0;
	}
	if (rhea_g.fd >= 0) {
		syscall(SYS_close, rhea_g.fd);
		rhea_g.fd = -1;
	}
	disarm_fatal_signals();
	agent_seal_thread();
}

/*
 * Only one caller ends the recording: 1 for it (then it must call
 * finish_claimed with *old, the mask to give back), 0 for the others.
 * The signals that kill are held off before the claim, and the thread is
 * marked as the one ending it before the claim too: a SIGTERM taken
 * between the claim and the hold (a pool worker's os._exit as its pool
 * terminates it, on a loaded machine) found the end claimed by nobody
 * else, waited a second for it in on_fatal on the very thread that was to
 * write it, and died without it.
 */
static int finish_claim(sigset_t *old)
{
	if (rhea_g.finished || agent_in_vfork_child() || rhea_sealed)
		return 0;
	hold_async_signals(old);
	int was = finishing_here;
	finishing_here = 1;
	if (!__atomic_exchange_n(&rhea_g.finished, 1, __ATOMIC_ACQ_REL)) {
		if (test_finish_slow)
			rhea_sleep_ns(200000000);
		return 1;
	}
	finishing_here = was;
	hooks_real_sigmask(SIG_SETMASK, old, NULL);
	return 0;
}

static void finish_claimed(unsigned reason, int status, const sigset_t *old)
{
	if (!rhea_g.active && rhea_g.fd < 0) {
		finishing_here = 0;
		finish_done = 1;
		hooks_real_sigmask(SIG_SETMASK, old, NULL);
		return;
	}
	rhea_guard++;
	end_threads(reason == RHEA_END_SIGNAL);
	for (int c = 0; c < RHEA_C_COUNT; c++)
		rhea_g.on[c] = 0;
	lock_drain(500000000ull);
	flush_round(10000000);
	write_end(reason, status);
	unlock_drain();
	rhea_g.active = 0;
	rhea_guard--;
	finishing_here = 0;
	finish_done = 1;
	hooks_real_sigmask(SIG_SETMASK, old, NULL);
}

static void on_finish_stack(void (*fn)(void *), void *arg);

struct finish_call {
	unsigned reason;
	int status;
	sigset_t old; /* finish_claim's */
};

static void finish_call_claimed(void *arg)
{
	const struct finish_call *f = arg;
	finish_claimed(f->reason, f->status, &f->old);
}

void agent_finish(unsigned reason, int status)
{
	agent_say_deferred();
	struct finish_call f = {.reason = reason, .status = status};
	if (finish_claim(&f.old))
		on_finish_stack(finish_call_claimed, &f);
}

/* The END entry, written with whatever is staged.  Drain lock held. */
static void write_end(unsigned reason, int status)
{
	if (rhea_g.fd < 0)
		return;
	struct rhea_end *e = staging_reserve(sizeof(*e));
	if (e) {
		memset(e, 0, sizeof(*e));
		e->h.kind = RHEA_E_END;
		e->h.size = sizeof(*e);
		e->time_ns = rhea_now();
		e->reason = reason;
		e->status = status;
	}
	if (write_staging() == 0 && e)
		salvage_set_state(RHEA_SALVAGE_DONE); /* rhea record has nothing to add */
}

static void on_exit_cb(int status, void *arg)
{
	(void)arg;
	agent_finish(RHEA_END_EXIT, status);
}

/*
 * No destructor finishes the recording: __libc_start_main registers
 * _dl_fini (which runs destructors) after our constructor registered
 * on_exit_cb, so exit handlers run _dl_fini first and on_exit_cb last,
 * with the real exit status, after every other library's destructors had
 * their chance to allocate and lock under the hooks.
 */

/*
 * A child of vfork runs in its parent's memory, on the parent's thread's
 * TLS, until it execs or calls _exit: the agent's state it would change is
 * the parent's.  Python's subprocess and other spawners run hooked
 * functions there (sigaction to reset handlers, execve, _exit after a
 * failed exec): taken as the process's own, they ended the parent's
 * recording and moved its sampling signal to one the parent had no handler
 * for, which then killed it.  So the hooks that act on the whole process
 * ask first; getpid is a system call (glibc does not cache it), paid only
 * by those rare calls.
 */
int agent_in_vfork_child(void)
{
	return rhea_g.pid > 0 && syscall(SYS_getpid) != rhea_g.pid;
}

/* exec replaces the image: end this recording first.  If exec fails the
 * process goes on and so does the recording: the writer keeps appending
 * chunks after this END, and readers take the last END entry. */
static void before_exec(void *arg);

void agent_before_exec(void)
{
	if (!rhea_g.active || rhea_g.finished || agent_in_vfork_child() || rhea_sealed)
		return;
	on_finish_stack(before_exec, NULL);
}

static void before_exec(void *arg)
{
	(void)arg;
	sigset_t old;
	hold_async_signals(&old);
	rhea_guard++;
	end_threads(0);
	lock_drain(500000000ull);
	flush_round(10000000);
	write_end(RHEA_END_EXEC, 0);
	unlock_drain();
	if (rhea_attached)
		attach_status("exec\n"); /* rhea attach: no stop to ask for */
	rhea_guard--;
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * A forked child creates its recording once it has something to say
 * (flush_round).  A server's worker that drops from root to www-data
 * right after its fork (nginx, apache, postfix), or su's child before it
 * runs the user's shell, then had no right left to create it in the
 * output directory: "cannot create the recording: Permission denied", the
 * worker untraced.  Before the process changes its user or groups
 * (hooks.c) the file is created, with the rights it still has; the
 * descriptor stays good after the change.
 */
void agent_before_setid(void)
{
	if (!rhea_g.active || rhea_g.finished || rhea_g.fd >= 0 || file_failed || agent_in_vfork_child() ||
	    rhea_sealed)
		return;
	sigset_t old;
	hold_async_signals(&old);
	rhea_guard++;
	lock_drain(500000000ull);
	output_wanted();
	unlock_drain();
	rhea_guard--;
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * A forked child's first capture (note_capture), on the program's thread
 * that made it, once that capture is over: the recording is created there
 * and then, its memory handed to rhea record (salvage_publish) and its
 * staged metadata written, rather than by the writer's round.  Woken by
 * that capture, the writer came too late for a child killed right after
 * its work: of 10 children that each made 1000 allocations and then
 * SIGKILLed themselves, 5 left no recording, 3 an empty file and 2 a
 * recovered one.  The writer, woken too, may be creating it already: the
 * thread then waits for it to be done (at most 100 ms, once in the
 * process's life), or the child would run on and die before its memory
 * was rhea record's.  Not in a signal handler, a vfork child, a sealed
 * thread or one with a descriptor table of its own: those leave it to the
 * writer.
 */
uint32_t rhea_open_due;

#define OPEN_DUE_WAIT_NS 100000000ull

void agent_open_due(void)
{
	if (!__atomic_exchange_n(&rhea_open_due, 0, __ATOMIC_ACQ_REL))
		return;
	if (!rhea_g.active || rhea_g.finished || rhea_g.fd >= 0 || file_failed || rhea_in_handler ||
	    agent_in_vfork_child() || rhea_sealed || rhea_fds_private)
		return;
	int err = errno;
	sigset_t old;
	hold_async_signals(&old);
	rhea_guard++;
	for (uint64_t t0 = rhea_now(); rhea_now() - t0 < OPEN_DUE_WAIT_NS; rhea_sleep_ns(100000)) {
		if (__atomic_load_n(&rhea_g.fd, __ATOMIC_ACQUIRE) >= 0 || file_failed || rhea_g.finished)
			break;
		if (!__atomic_exchange_n(&drain_lock, 1, __ATOMIC_ACQUIRE)) {
			if (!rhea_g.finished && output_wanted() == 0)
				write_staging();
			unlock_drain();
			break;
		}
	}
	rhea_guard--;
	hooks_real_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
}

/*
 * Capabilities are each thread's own.  A program that keeps its
 * capabilities across a change of user (PR_SET_KEEPCAPS, then capset on
 * its thread: setpriv --reuid, libcap-ng's capng_change_id) changes its
 * ids again with them; glibc has every thread make the same change, the
 * agent's too, and aborts the process when the results differ (nptl's
 * setxid): the agent's threads, which had kept nothing, failed with EPERM,
 * and `rhea record -- setpriv --reuid=N --regid=N prog` died of SIGABRT.
 * So before a change of ids, when the calling thread's capabilities (or
 * its keep-caps bit) are not the agent threads', each of them takes the
 * caller's, on itself (capset changes only its caller): asked, woken, and
 * waited for, 200 ms at most.  They then hold no more than the program's
 * thread either.  Not under a seccomp filter (capget and capset are none
 * of the calls the agent judges filters by).
 */
static struct {
	uint32_t gen;  /* one more per request */
	uint32_t done; /* futex: the agent threads that took the last one */
	int keep;
	struct __user_cap_data_struct data[2];
} caps_req;
static uint32_t caps_lock;
static __thread uint32_t caps_seen;

void agent_caps_follow(void)
{
	uint32_t g = __atomic_load_n(&caps_req.gen, __ATOMIC_ACQUIRE);
	if (__builtin_expect(g == caps_seen, 1))
		return;
	caps_seen = g;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	syscall(SYS_prctl, PR_SET_KEEPCAPS, caps_req.keep, 0, 0, 0);
	syscall(SYS_capset, &h, caps_req.data);
	__atomic_fetch_add(&caps_req.done, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &caps_req.done, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void agent_share_caps(void)
{
	if (!rhea_g.active || threads_stop || agent_in_vfork_child() || rhea_sealed ||
	    syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) != 0)
		return;
	/* the threads there are, once each has said its tid: one just made
	 * (the program changes its ids as it starts) has the old rights and
	 * would meet the change with them */
	int made[3] = {ticker_th != 0, writer_th != 0, sampler_is_running()};
	uint32_t tids[3];
	int n = 0;
	for (int i = 0; i < 3; i++) {
		for (int k = 0; made[i] && !rhea_agent_tids[i] && k < 200; k++)
			rhea_sleep_ns(1000000);
		if (made[i] && (tids[n] = rhea_agent_tids[i]) != 0)
			n++;
	}
	if (n == 0)
		return;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct mine[2], theirs[2];
	if (syscall(SYS_capget, &h, mine) != 0)
		return;
	int keep = (int)syscall(SYS_prctl, PR_GET_KEEPCAPS, 0, 0, 0, 0) > 0, differ = keep;
	for (int i = 0; i < n && !differ; i++) {
		h.version = _LINUX_CAPABILITY_VERSION_3;
		h.pid = (int)tids[i];
		differ = syscall(SYS_capget, &h, theirs) != 0 || memcmp(mine, theirs, sizeof(mine)) != 0;
	}
	if (!differ)
		return;
	for (int i = 0; i < 200 && __atomic_exchange_n(&caps_lock, 1, __ATOMIC_ACQUIRE); i++)
		rhea_sleep_ns(1000000);
	caps_req.keep = keep;
	memcpy(caps_req.data, mine, sizeof(mine));
	__atomic_store_n(&caps_req.done, 0, __ATOMIC_RELAXED);
	__atomic_fetch_add(&caps_req.gen, 1, __ATOMIC_RELEASE);
	ticker_wake_up(TICKER_TICK);
	buf_wake_writer(&rhea_g.buf);
	sampler_wake_up();
	for (int i = 0; i < 20; i++) {
		uint32_t d = __atomic_load_n(&caps_req.done, __ATOMIC_ACQUIRE);
		if ((int)d >= n)
			break;
		struct timespec ts = {0, 10000000};
		syscall(SYS_futex, &caps_req.done, FUTEX_WAIT_PRIVATE, d, &ts, NULL, 0);
	}
	__atomic_store_n(&caps_lock, 0, __ATOMIC_RELEASE);
}

/* ---- fatal signals --------------------------------------------------------- */

static const int fatal_sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
				 SIGBUS,  SIGFPE,  SIGSEGV, SIGPIPE, SIGTERM, SIGXCPU,
				 SIGXFSZ, SIGSYS,  SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM};
static volatile int armed[NSIG];          /* our flush handler is installed */
static struct sigaction believed[NSIG];   /* what the program thinks is set */

static int is_fatal(int sig)
{
	for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++)
		if (fatal_sigs[i] == sig)
			return 1;
	return 0;
}

/*
 * The handler runs on the program's alternate signal stack when it has one
 * (SA_ONSTACK: a stack overflow can only be handled there), and those are
 * small: 8 KB is SIGSTKSZ.  Compressing and writing the last chunk needs
 * more, and a program with such a stack that got SIGTERM died of SIGSEGV
 * in our handler instead, its recording cut.  So the recording is ended on
 * a stack of the agent's own, mapped at start (untouched until used).  Not
 * only from the handler: a program's handler that calls _exit or exit on
 * such a stack, or a thread created with a 16 KB stack that does, died the
 * same way (exit status 139 for 42).  One user at a time (the end is
 * claimed by one thread, but an exec may run in another): a second runs
 * on its own stack, as before.
 */
#define FINISH_STACK_SIZE (256u << 10)
static char *finish_stack; /* base of the mapping, a guard page below */

static void finish_stack_map(void)
{
	if (finish_stack)
		return;
	void *p = mmap(NULL, FINISH_STACK_SIZE + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (p == MAP_FAILED)
		return;
	mprotect(p, 4096, PROT_NONE);
	finish_stack = p;
}

/* fn(arg) with the stack pointer at top (x86-64, 16-byte aligned). */
static void call_on_stack(void (*fn)(void *), void *arg, char *top)
{
	__asm__ volatile("mov %%rsp, %%r12\n\t"
			 "mov %[top], %%rsp\n\t"
			 "call *%[fn]\n\t"
			 "mov %%r12, %%rsp"
			 : [fn] "+r"(fn), [top] "+r"(top), "+D"(arg)
			 :
			 : "r12", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0",
			   "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
			   "xmm12", "xmm13", "xmm14", "xmm15");
}

static int finish_stack_busy;

static void on_finish_stack(void (*fn)(void *), void *arg)
{
	if (finish_stack && !__atomic_exchange_n(&finish_stack_busy, 1, __ATOMIC_ACQUIRE)) {
		call_on_stack(fn, arg, finish_stack + 4096 + FINISH_STACK_SIZE - 64);
		__atomic_store_n(&finish_stack_busy, 0, __ATOMIC_RELEASE);
	} else {
		fn(arg);
	}
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int e = errno;
	int vfork_child = agent_in_vfork_child(); /* its death is not ours */
	if (!vfork_child) {
		struct finish_call f = {.reason = RHEA_END_SIGNAL, .status = sig};
		if (finish_claim(&f.old))
			on_finish_stack(finish_call_claimed, &f);
		wait_for_finish(); /* another thread may be ending it: let it */
	}
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	hooks_real_sigaction(sig, &dfl, NULL);
	if (!vfork_child)
		armed[sig] = 0;
	/* A fault re-executes the instruction on return and dies from it; any
	 * other signal is raised again and delivered once we return. */
	int fault = si && si->si_code > 0 &&
		    (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP);
	if (!fault)
		syscall(SYS_tgkill, getpid(), thread_gettid(), sig);
	errno = e;
}

static void arm(int sig)
{
	struct sigaction act;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = on_fatal;
	act.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	/* Nothing else while it runs: on a 4 KB alternate stack the kernel's
	 * frame for this signal leaves no room for a second one (the sampler's
	 * timer firing then killed the process with SIGSEGV, now and then,
	 * before the handler could move to its own stack). */
	sigfillset(&act.sa_mask);
	if (hooks_real_sigaction(sig, &act, NULL) == 0)
		armed[sig] = 1;
}

static void arm_fatal_signals(void)
{
	for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++) {
		int sig = fatal_sigs[i];
		struct sigaction cur;
		if (hooks_real_sigaction(sig, NULL, &cur) != 0)
			continue;
		if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
			believed[sig] = cur;
			arm(sig);
		}
	}
}

/* The program's own dispositions back where the flush handler stood. */
static void disarm_fatal_signals(void)
{
	for (size_t i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++) {
		int sig = fatal_sigs[i];
		if (armed[sig] && hooks_real_sigaction(sig, &believed[sig], NULL) == 0)
			armed[sig] = 0;
	}
}

/* Called by the sigaction hook; *handled = 1 when it did the job. */
int agent_sigaction_filter(int sig, const struct sigaction *act, struct sigaction *old, int *handled)
{
	*handled = 0;
	if (sig <= 0 || sig >= NSIG || !is_fatal(sig) || rhea_g.finished)
		return 0;
	if (armed[sig]) {
		*handled = 1;
		if (old)
			*old = believed[sig];
		if (!act)
			return 0;
		if (!(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL) {
			believed[sig] = *act;
			return 0;
		}
		armed[sig] = 0; /* the program handles it: step aside */
		return sigwrap_sigaction(sig, act, NULL);
	}
	if (act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL && rhea_g.active) {
		*handled = 1;
		int r = hooks_real_sigaction(sig, NULL, old);
		if (r == 0) {
			sigwrap_translate(sig, old);
			believed[sig] = *act;
			arm(sig);
		}
		return r;
	}
	return 0;
}

static void write_meta(void);

/* ---- fork ---------------------------------------------------------------- */

/* From the prepare handler to the parent's and the child's, the forking
 * thread is not traced: in the child nothing may touch the buffers before
 * they are its own (salvage_after_fork). */
/*
 * What belongs to one recording, for a new one in the same memory (a
 * forked child's, rhea attach's again: agent_restart): the file's state,
 * the statistics, the agent's threads' ids and CPU, the buffers, and the
 * stack table's written mark (every node goes into the new file).
 */
static void recording_reset(void)
{
	drain_lock = 0;
	ticker_th = writer_th = 0;
	file_failed = 0;
	staging_used = 0;
	nhold = 0;
	rhea_g.start_ns = rhea_now();
	rhea_g.captures = rhea_g.truncated = rhea_g.unwind_errors = rhea_g.write_errors = 0;
	rhea_g.cfi_build_ns = 0;
	for (int i = 0; i < 8; i++) {
		rhea_agent_tids[i] = 0;
		agent_cpu[i] = 0;
	}
	/* the child's threads start from its forking thread's rights: none
	 * of the parent's requests for them (agent_share_caps) */
	memset(&caps_req, 0, sizeof(caps_req));
	caps_lock = 0;
	buf_reset(&rhea_g.buf);
	stacktab_after_fork(&rhea_g.st);
}

/* The hook classes the configuration asks for, on. */
static void classes_on(void)
{
	for (int c = 1; c < RHEA_C_COUNT; c++)
		rhea_g.on[c] = (rhea_g.cfg.class_mask >> c) & 1;
}

/* (The drain first: the writer's round may walk the loader's list, and
 * waits for no fork while it holds the drain.) */
void agent_prefork(void)
{
	rhea_guard++;
	if (rhea_g.active && !rhea_sealed)
		lock_drain(UINT64_MAX);
	modules_fork_prepare();
}

void agent_postfork_parent(void)
{
	modules_fork_parent();
	if (rhea_g.active && !rhea_sealed)
		unlock_drain();
	rhea_guard--;
}

void agent_postfork_child(void)
{
	/* agent_prefork's guard is still held: each way out drops it */
	modules_fork_child();
	drain_lock = 0;
	ticker_th = writer_th = 0; /* the parent's: start_threads makes the child's */
	if (rhea_sealed) { /* a filtered thread's child: filtered too, untraced */
		rhea_g.active = 0;
		rhea_g.fd = rhea_g.spare_fd = -1;
		rhea_guard--;
		return;
	}
	spare_drop(); /* the parent's unnamed recording: not the child's */
	if (salvage_after_fork(&rhea_g.buf, rhea_g.st.next_id, rhea_g.active && rhea_g.cfg.follow) < 0) {
		rhea_g.fd = -1; /* the parent's: never written from here */
		agent_disable("cannot copy the buffers in a forked child", errno);
		rhea_guard--;
		return;
	}
	/* the child's memory is its own now, shared with rhea record or not */
	rhea_g.buf.keep_drained = (uint8_t)salvage_shared();
	if (!rhea_g.active) {
		rhea_guard--;
		return;
	}
	is_root = 0;
	if (rhea_g.cfg.follow)
		spare_make(rhea_g.fd); /* the parent's number, its file closed */
	else if (rhea_g.fd >= 0)
		syscall(SYS_close, rhea_g.fd);
	rhea_g.fd = -1;
	rhea_g.pid = getpid();
	recording_reset(); /* (the parent's threads are not the child's) */
	rhea_g.threads_seen = 1;
	if (!rhea_g.cfg.follow) {
		if (rhea_attached) {
			attach_forked = 1; /* (rhea_attach_restart: not this copy) */
			/* rhea attach does not follow children, and its detach
			 * puts back only the parent's imports: the child's go
			 * back now, and the control FIFO is not the child's */
			attach_unpatch_forked();
			if (rhea_g.control_fd >= 0)
				syscall(SYS_close, rhea_g.control_fd);
			rhea_g.control_fd = -1;
		}
		agent_disable("", 0);
		rhea_guard--;
		return;
	}
	sampler_after_fork();
	waits_after_fork();
	thread_after_fork();
	modules_after_fork();
	write_meta();
	struct rhea_tstate *t = thread_self();
	if (t)
		capture_emit_thread(t, RHEA_T_START, 0);
	if (start_threads() < 0)
		agent_disable("cannot start the agent's threads in a forked child", 0);
	else if (t) /* what the child's own work is measured from (capture.c) */
		capture_counters_baseline(t);
	rhea_guard--; /* agent_prefork's, held through here */
}

/* ---- start --------------------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = attach_getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	return *end ? def : (uint64_t)x;
}

/*
 * The directory of the recording as rhea record sees it, from a process
 * that may not (RHEA_OUTPUT_HOME, "CLIPID:DEV:INO", rhea record's pid and
 * the directory's identity).  A program that entered a mount namespace of
 * its own (unshare -m, bwrap, a test's sandbox) and mounted over it (a
 * tmpfs on /tmp) wrote its recording into that mount, where rhea record
 * never saw it: the program's work was simply missing.  It now writes
 * through rhea record's root, /proc/CLIPID/root, when that is the
 * directory; else it says where its recording goes, once.
 */
static void output_home(void)
{
	const char *home = attach_getenv("RHEA_OUTPUT_HOME");
	unsigned long long pid, dev, ino;
	if (!home || sscanf(home, "%llu:%llu:%llu", &pid, &dev, &ino) != 3 || output_base[0] != '/')
		return;
	char dir[sizeof(output_base)], alt[sizeof(output_base)];
	snprintf(dir, sizeof(dir), "%s", output_base);
	char *slash = strrchr(dir, '/');
	slash[slash == dir] = 0; /* (the root itself: "/") */
	struct stat st;
	if (stat(dir, &st) == 0 && st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino)
		return;
	int n = snprintf(alt, sizeof(alt), "/proc/%llu/root%s", pid, dir);
	if (n > 0 && (size_t)n < sizeof(alt) && stat(alt, &st) == 0 && st.st_dev == (dev_t)dev &&
	    st.st_ino == (ino_t)ino &&
	    (size_t)snprintf(alt, sizeof(alt), "/proc/%llu/root%s", pid, output_base) < sizeof(alt)) {
		memcpy(output_base, alt, sizeof(output_base));
		return;
	}
	say("this process does not see rhea record's ", dir,
	    " (another mount namespace): its recording is written to its own ", dir);
}

static void read_config(void)
{
	struct rhea_config *c = &rhea_g.cfg;
	c->interval_ns = env_u64("RHEA_INTERVAL_NS", 1000000);
	test_finish_slow = env_u64("RHEA_TEST_FINISH_SLOW", 0) == 1;
	test_name_slow = env_u64("RHEA_TEST_NAME_SLOW", 0) == 1;
	test_ticker = (int)env_u64("RHEA_TEST_TICKER", 0);
	if (c->interval_ns < 10000)
		c->interval_ns = 10000;
	c->min_block_ns = env_u64("RHEA_MIN_BLOCK_NS", c->interval_ns);
	c->epoch_gate = c->min_block_ns >= c->interval_ns;
	c->max_depth = (uint32_t)env_u64("RHEA_DEPTH", 256);
	if (c->max_depth < 4)
		c->max_depth = 4;
	if (c->max_depth > RHEA_MAX_DEPTH)
		c->max_depth = RHEA_MAX_DEPTH;
	const char *u = attach_getenv("RHEA_UNWIND");
	c->unwind_fp = u && strcmp(u, "fp") == 0;
	c->class_mask = (uint32_t)env_u64("RHEA_HOOKS_MASK",
					  (1u << RHEA_C_ALLOC) | (1u << RHEA_C_LOCK) | (1u << RHEA_C_IO) |
						  (1u << RHEA_C_NET) | (1u << RHEA_C_WAIT) | (1u << RHEA_C_MMAP));
	c->follow = env_u64("RHEA_FOLLOW", 1) != 0;
	c->sample_ns = env_u64("RHEA_SAMPLE_NS", 10000000);
	if (c->sample_ns && c->sample_ns < 100000)
		c->sample_ns = 100000;
	c->sample_main_ns = env_u64("RHEA_SAMPLE_MAIN_NS", c->sample_ns);
	if (c->sample_main_ns && c->sample_main_ns < 100000)
		c->sample_main_ns = 100000;
	c->force_ns = env_u64("RHEA_FORCE_NS", 1000000000);
	c->attach_for_ns = env_u64("RHEA_ATTACH_FOR_NS", 0);
	c->signal = (int)env_u64("RHEA_SIGNAL", 0);
	c->buffer_bytes = env_u64("RHEA_BUFFER", 8u << 20);
	if (c->buffer_bytes < (1u << 20))
		c->buffer_bytes = 1u << 20;
	/* 512k nodes: 8 MiB of nodes touched as used, 4 MiB of hash slots
	 * (pre-faulted).  Real programs use thousands; an allocation storm
	 * through random call chains some 10^5. */
	c->max_nodes = (uint32_t)env_u64("RHEA_MAX_NODES", 1u << 19);
	c->quiet = env_u64("RHEA_QUIET", 0) != 0;
	c->no_tsc = env_u64("RHEA_NO_TSC", 0) != 0;
	const char *out = attach_getenv("RHEA_OUTPUT");
	if (out && *out) {
		strncpy(output_base, out, sizeof(output_base) - 1);
	} else {
		char comm[16] = "prog";
		int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/comm", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = syscall(SYS_read, fd, comm, sizeof(comm) - 1);
			syscall(SYS_close, fd);
			if (n > 0)
				comm[n - (comm[n - 1] == '\n')] = 0;
		}
		char num[24];
		u64_to_str((uint64_t)getpid(), num);
		snprintf(output_base, sizeof(output_base), "rhea-%s-%s.rhea", comm, num);
	}
	is_root = env_u64("RHEA_ROOT_PID", 0) == (uint64_t)getpid() || !(out && *out);
	output_home();
}

/*
 * Bounds of the main thread's stack: its top from /proc/self/maps
 * ([stack]), its bottom as deep as it may grow, not where it reaches now.
 * The kernel maps the main stack as it grows, up to RLIMIT_STACK, and the
 * [stack] line at start is ~132 KB: a recursion deeper than that took
 * every frame below it for a wild pointer, and --unwind fp walks, which
 * stay inside the stack, stopped at the hook (deep.c, 2000 frames at -O0:
 * 144 of 159 captures without a stack, nine tenths of its time in none).
 * The walkers read directly only from the sp they start at up (unwind.c,
 * narrow), which is mapped; below the mapping before [stack] nothing can
 * be the stack.
 */
struct stack_scan {
	unsigned long prev_end; /* the end of the mapping before the line */
};

static int stack_line(const char *line, void *arg)
{
	struct stack_scan *s = arg;
	unsigned long lo, hi;
	if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
		return 0;
	if (!strstr(line, "[stack]")) {
		s->prev_end = hi;
		return 0;
	}
	uint64_t floor = s->prev_end < lo ? s->prev_end : lo;
	struct rlimit rl;
	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < hi &&
	    hi - rl.rlim_cur > floor)
		floor = hi - rl.rlim_cur;
	rhea_main_stack_lo = floor;
	rhea_main_stack_hi = hi;
	return 1;
}

static void main_stack_bounds(void)
{
	struct stack_scan s = {0};
	modules_maps_each(stack_line, &s);
}

static void write_meta(void)
{
	char buf[4096];
	stage_cmdline(1);
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		stage_meta("exe", buf);
	}
	struct utsname u;
	if (uname(&u) == 0) {
		stage_meta("hostname", u.nodename);
		stage_meta("kernel", u.release);
	}
	stage_meta("unwind", rhea_g.cfg.unwind_fp ? "fp" : "dwarf");
	char mask[256] = "";
	for (int c = 1; c < RHEA_C_COUNT; c++)
		if (rhea_g.cfg.class_mask & (1u << c)) {
			if (mask[0])
				strcat(mask, ",");
			strcat(mask, rhea_class_name(c));
		}
	stage_meta("hooks", mask);
	char num[24];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)rhea_g.cfg.min_block_ns);
	stage_meta("min_block_ns", num); /* (a shorter call is a SHORTS count) */
	stage_meta("agent", "librhea " RHEA_VERSION_STRING);
	if (rhea_attached)
		stage_meta("attached", "1"); /* (what an end it did not see can mean: report.c) */
}

/* The calling thread's /proc status in st (NUL-terminated); its
 * Seccomp_filters, or -1 when it cannot be read or the kernel does not
 * say (before Linux 5.9). */
static long thread_filters(char *st, size_t cap)
{
	if (thread_read_task_file(thread_gettid(), "status", st, cap) < 0)
		return -1;
	const char *f = strstr(st, "\nSeccomp_filters:");
	return f ? strtol(f + sizeof("\nSeccomp_filters:") - 1, NULL, 10) : -1;
}

/*
 * A process that starts inside a seccomp filter its own family installed
 * after rhea started: man-db runs col, groff and their helpers so, behind
 * a filter that fails every call it does not list.  The agent's first
 * calls such a filter forbids (memfd_create, timer_create) fail at best;
 * under a filter that kills, they would kill the program.  rhea record
 * says how many filters it ran under itself (RHEA_SECCOMP_BASE: a
 * container's, which every process there runs under alike and the agent
 * has always worked in, and those an agent before it judged harmless:
 * agent_exec_seccomp_base); with more, the agent stays off and says so.
 * The thread's /proc status is read with the calls the loader made to load
 * librhea.so (openat, read, close): a filter that forbade those would not
 * have let it load.  Without RHEA_SECCOMP_BASE (attach, or a hand-set
 * LD_PRELOAD) nothing is known, and nothing checked.
 */
static int born_sandboxed(void)
{
	const char *b = getenv("RHEA_SECCOMP_BASE");
	if (!b || !*b)
		return 0;
	long base = strtol(b, NULL, 10);
	char st[8192];
	long filters = thread_filters(st, sizeof(st));
	if (filters <= base)
		return 0;
	const char *quiet = getenv("RHEA_QUIET"), *pid = strstr(st, "\nPid:");
	if (!quiet || strtoul(quiet, NULL, 10) == 0) {
		char msg[256];
		int n = snprintf(msg, sizeof(msg),
				 "rhea: pid %d (%s) not traced: it starts inside a seccomp sandbox made after rhea "
				 "started (filters: %ld, rhea's: %ld), which a system call of the agent's could "
				 "break\n",
				 pid ? (int)strtol(pid + sizeof("\nPid:") - 1, NULL, 10) : 0, program_invocation_short_name,
				 filters, base);
		if (n > 0)
			syscall(SYS_write, 2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	}
	return 1;
}

/*
 * A filter the agent judged harmless (hooks.c) is no sandbox for the
 * agent of an image this process execs, which starts under it: the image
 * gets the thread's count of filters as its RHEA_SECCOMP_BASE, so that
 * born_sandboxed lets it trace.  Only from an image whose agent runs (it
 * judged every filter since its own start, or it would be off) and a
 * thread not sealed (no harmful filter on it).
 */
int agent_harmless_filter_seen;

long agent_exec_seccomp_base(void)
{
	if (!__atomic_load_n(&agent_harmless_filter_seen, __ATOMIC_RELAXED) || !rhea_g.active || rhea_g.finished ||
	    rhea_sealed || process_sealed)
		return -1;
	char st[4096];
	return thread_filters(st, sizeof(st));
}

/* rhea attach's control FIFO opened and the process's imports hooked,
 * once the threads run: why, or the failure (the recording ended: the
 * writer, leaving, undoes the rest). */
static const char *attach_hook_in(const char *why)
{
	if (attach_open_control() == 0 && attach_patch() == 0)
		return why;
	agent_finish(RHEA_END_DETACH, 0);
	return "failed: cannot hook the process's imports or open the control FIFO\n";
}

/* rhea attach's start, done or failed (why): the status the CLI waits for
 * ("started salvage=N": it opens the memfd through /proc), and the
 * calling thread's sampling timer, held until now. */
static void attach_say_started(const char *why)
{
	attach_started = rhea_g.active;
	if (!attach_started)
		salvage_close_fd(); /* nothing of ours left open in the process */
	if (!attach_started && !writer_th) /* no writer to leave: spent already */
		__atomic_store_n(&attach_spent, 1, __ATOMIC_RELEASE);
	char started[64] = "started";
	int sfd = salvage_fd_number();
	if (sfd >= 0) {
		char num[24];
		u64_to_str((uint64_t)sfd, num);
		strcat(started, " salvage=");
		strcat(started, num);
	}
	strcat(started, "\n");
	attach_status(attach_started ? started : why);
	/* this thread's timer now: what it runs until it is back in its
	 * wait is far less than the first expiry's 1 ms of CPU */
	__atomic_store_n(&sampler_hold_tid, 0, __ATOMIC_RELEASE);
	struct rhea_tstate *me = attach_started ? thread_find(thread_gettid()) : NULL;
	if (me)
		sampler_arm(me);
}

/*
 * rhea attach again, to a process an earlier attach left (rhea_attach_restart):
 * this copy of the agent, its recording ended and its threads gone, records
 * once more, into the new attach's directory and output.  Each attach used
 * to load a fresh copy: 192 bytes of the process's static TLS each (glibc
 * keeps about 1.5 KB of it for libraries loaded late), a real-time signal
 * each (the old copy's left ignored), and its tables again; the ninth attach
 * to redis-server failed.  What the copy knows of the process stays: the
 * thread registry, the stack table (its nodes are written to the new file
 * from the first), the modules and their CFI tables, the wait table.  What
 * belongs to a recording starts again as agent_init and a forked child's
 * agent (agent_postfork_child) start it.  On a program thread stopped at a
 * safe point, as agent_init under dlopen: nothing here sleeps.
 */
static void agent_restart(void)
{
	const char *why = "failed: the agent could not start again (its warnings say why)\n";
	rhea_guard++;
	__atomic_store_n(&sampler_hold_tid, thread_gettid(), __ATOMIC_RELEASE);
	cficache_settings(attach_getenv);
	/* The buffers and the stack table keep the sizes the first attach
	 * mapped them with: a different --buffer is said, not taken. */
	size_t buffer_bytes = rhea_g.cfg.buffer_bytes;
	uint32_t max_nodes = rhea_g.cfg.max_nodes;
	read_config();
	warned = 0;
	if (rhea_g.cfg.buffer_bytes != buffer_bytes) {
		char num[24];
		u64_to_str(buffer_bytes >> 20, num);
		say("--buffer: the agent an earlier attach left in this process keeps its buffers of ", num,
		    " MB", NULL);
	}
	rhea_g.cfg.buffer_bytes = buffer_bytes;
	rhea_g.cfg.max_nodes = max_nodes;
	finish_done = 0;
	stats_staged_ns = 0;
	cmdline_staged[0] = 0;
	rhea_g.fd = rhea_g.spare_fd = rhea_g.control_fd = -1;
	rhea_g.threads_seen = 0;
	rhea_g.leader_gone = 0;
	/* the threads' first hooks capture, and count their allocations into
	 * this recording's site tables (thread_session_begin) */
	__atomic_add_fetch(&rhea_g.session, 1, __ATOMIC_RELEASE);
	epoch_bump(0);
	__atomic_store_n(&rhea_g.finished, 0, __ATOMIC_RELEASE);
	if (salvage_renew(&rhea_g.buf, rhea_g.st.next_id) < 0) {
		agent_disable("cannot map the buffers again", errno);
		goto out;
	}
	recording_reset();
	rhea_g.buf.keep_drained = (uint8_t)salvage_shared();
	sampler_blocked_reset();
	if (open_output() < 0)
		goto out;
	write_meta();
	thread_restart();
	modules_after_fork(); /* every module into the new file */
	rhea_g.active = 1;
	modules_scan();
	if (rhea_g.fd >= 0)
		write_staging();
	if (thread_task_state((uint32_t)rhea_g.pid) == 0)
		rhea_g.leader_gone = 1;
	int r;
	if ((r = start_threads()) < 0) {
		agent_disable("cannot start the agent's threads", -r);
		goto out;
	}
	classes_on();
	why = attach_hook_in(why);
out:
	attach_say_started(why);
	rhea_guard--;
}

/*
 * What rhea attach calls, through the process's thread it stopped, in the
 * copy an earlier attach left (cli/cmd_attach.c), with its new directory.
 * 0: started, or failed and said so in that directory's status; 1: this
 * copy still records, or is still leaving (another rhea attach); 2: it
 * cannot record again (a forked child's copy, forked while attached or
 * after, or a seccomp filter seals
 * it, or its stack table is three quarters full: the CLI loads a copy of
 * its own then, whose table starts empty; so a process whose stacks keep
 * changing gets one more copy per 384k nodes of history, not a full table
 * and recordings without stacks); 3: the directory's configuration cannot
 * be read.
 */
__attribute__((visibility("default"))) int rhea_attach_restart(const char *dir)
{
	/* (a copy forked after the detach, when no hook saw the fork, holds
	 * the parent's pid and threads: the child gets a copy of its own) */
	if (!rhea_attached || rhea_sealed || process_sealed || attach_forked || getpid() != rhea_g.pid)
		return 2;
	if (__atomic_load_n(&rhea_g.st.next_id, __ATOMIC_RELAXED) > rhea_g.st.max_nodes / 4 * 3)
		return 2;
	if (!__atomic_exchange_n(&attach_spent, 0, __ATOMIC_ACQ_REL))
		return 1;
	if (attach_reconfigure(dir) != 0) {
		__atomic_store_n(&attach_spent, 1, __ATOMIC_RELEASE);
		return 3;
	}
	agent_restart();
	return 0;
}

__attribute__((constructor)) static void agent_init(void)
{
	if (rhea_g.active || getenv("RHEA_DISABLE"))
		return;
	if (born_sandboxed())
		return;
	const char *why = "failed: the agent could not start (its warnings say why)\n";
	rhea_guard++;
	/* What the process ran before this constructor: the loader's work and
	 * the constructors of the libraries initialized first (ffmpeg -version:
	 * 140 ms of CPU, 2.3 ms of it recorded).  No hook saw it: the report
	 * says how much it was. */
	struct timespec before_ts;
	uint64_t cpu_before = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &before_ts) == 0
				      ? (uint64_t)before_ts.tv_sec * 1000000000ull + (uint64_t)before_ts.tv_nsec
				      : 0;
	attach_detect();
	/* Under rhea attach this runs on a program thread stopped in a wait
	 * (a sleep, a poll) that the kernel restarts afterwards from the
	 * thread's restart block.  Entering nanosleep resets that block, and
	 * so does returning from a signal handler: then the program's sleep
	 * would end early, as if interrupted.  So nothing here sleeps, and
	 * this thread's sampling timer waits for the end (sampler.c). */
	if (rhea_attached) {
		__atomic_store_n(&sampler_hold_tid, thread_gettid(), __ATOMIC_RELEASE);
		cficache_settings(attach_getenv);
	}
	hooks_resolve();
	read_config();
	if (!rhea_attached)
		hooks_env_save(); /* for an exec that loses it (hooks.c) */
	rhea_g.pid = getpid();
	clock_init();
	if (!rhea_g.cfg.follow && !is_root) {
		rhea_guard--;
		return; /* --no-follow: children are not traced */
	}
	rhea_g.start_ns = rhea_now();
	/* A thread's last_epoch starts at 0 (TLS): the epoch never is, so the
	 * first hook of every thread captures, even before the first tick. */
	rhea_g.epoch = 1;
	main_stack_bounds();
	cmdline_bounds();
	int r;
	staging = mmap(NULL, STAGING_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (staging == MAP_FAILED) {
		staging = NULL;
		agent_disable("cannot map the staging buffer", errno);
		goto out;
	}
	uint32_t chunk = 64u << 10;
	uint32_t nchunks = (uint32_t)(rhea_g.cfg.buffer_bytes / chunk);
	hold_cap = rhea_g.cfg.buffer_bytes / sizeof(struct rhea_sample) + 1;
	size_t hb = hold_cap * (sizeof(*hold) + sizeof(*hold_ix)) + PACK_BUF;
	char *hm = mmap(NULL, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (hm != MAP_FAILED) {
		hold = (struct rhea_sample *)hm;
		hold_ix = (uint32_t *)(hm + hold_cap * sizeof(*hold));
		pack_buf = (uint8_t *)(hold_ix + hold_cap);
	}
	void *bm, *nm;
	struct rhea_salvage_pend *pm;
	struct rhea_salvage_sites *sm;
	size_t node_bytes = (size_t)rhea_g.cfg.max_nodes * sizeof(struct stacktab_node);
	if (!salvage_region(rhea_attached ? SALVAGE_OWN : SALVAGE_INHERITED, buf_bytes(nchunks, chunk), node_bytes,
			    RHEA_MAX_THREADS, RHEA_SALVAGE_SITE_THREADS, &bm, &nm, &pm, &sm)) {
		agent_disable("cannot map the buffers", errno);
		goto out;
	}
	if ((r = buf_init_at(&rhea_g.buf, bm, nchunks, chunk, 8)) < 0) {
		agent_disable("cannot set up the buffers", -r);
		goto out;
	}
	rhea_g.buf.keep_drained = (uint8_t)salvage_shared();
	if ((r = stacktab_init_at(&rhea_g.st, nm, rhea_g.cfg.max_nodes)) < 0) {
		agent_disable("cannot map the stack table", -r);
		goto out;
	}
	rhea_pends = pm; /* RHEA_MAX_THREADS of them: one per registry slot */
	rhea_site_tables = sm; /* for the first RHEA_SALVAGE_SITE_THREADS slots */
	thread_registry_init();
	note_root();
	if (is_root && open_output() < 0)
		goto out;
	if (!is_root && !rhea_attached)
		spare_make(-1); /* before main: agent_postfork_child's comment */
	write_meta();
	if (!rhea_attached && cpu_before) {
		char num[24];
		snprintf(num, sizeof(num), "%llu", (unsigned long long)cpu_before);
		stage_meta("cpu_before_agent_ns", num);
	}
	rhea_g.active = 1;
	modules_scan();
	/* The command, the modules: in the file now, not at the writer's first
	 * round.  A process killed (or leaving by a raw exit_group, as every
	 * Go program does) before it lost them; rhea record recovers the
	 * samples from the agent's memory, but not these. */
	if (rhea_g.fd >= 0)
		write_staging();
	if (!rhea_attached) { /* attach mode leaves the program's signals alone */
		finish_stack_map();
		arm_fatal_signals();
	}
	pthread_atfork(agent_prefork, agent_postfork_parent, agent_postfork_child);
	on_exit(on_exit_cb, NULL);
	if (thread_task_state((uint32_t)rhea_g.pid) == 0)
		rhea_g.leader_gone = 1; /* attached after main's pthread_exit */
	if ((r = start_threads()) < 0) {
		agent_disable("cannot start the agent's threads", -r);
		goto out;
	}
	classes_on();
	if (rhea_attached)
		why = attach_hook_in(why);
out:
	if (rhea_attached)
		attach_say_started(why);
	rhea_guard--;
}

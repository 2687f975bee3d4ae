/*
 * salvage.c - the agent's buffers in memory that outlives a SIGKILL
 * (core/salvage.h says why and what the layout is).
 *
 * One region holds the header, the record buffers' chunks, the call-stack
 * table's nodes, the pending samples and the threads' allocation sites.  Under `rhea record` it is a
 * shared mapping of rhea record's memfd, opened through the /proc path
 * RHEA_SALVAGE names; under `rhea attach` a memfd of the agent's own, which
 * rhea attach opens through /proc while the process lives; anywhere else
 * (a memfd that is not ours, no /proc, no memfd at all) it is private
 * anonymous memory, as the agent always had.  rhea record's memfd is taken
 * only by the process rhea record started (fresh: no header yet) or by a
 * later image of that same process after an exec (the header names its
 * pid).  A forked child gets a private copy of the region at once
 * (salvage_after_fork): it must never write into its parent's buffers.
 */
#include "agent.h"
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "salvage.h"

struct rhea_salvage *rhea_salvage; /* the region's header, NULL before set-up */
static int salvage_fd = -1;        /* the memfd, -1: the region is private */
static dev_t memfd_dev;            /* what salvage_fd was opened on */
static ino_t memfd_ino;
static size_t region_size;
static int region_shared;          /* rhea record holds the memfd the region maps */
static int region_mapped;          /* the region maps a memfd (MAP_SHARED): a
				      forked child must map a copy of its own,
				      whether rhea record holds it or not */
static int send_pending;           /* salvage_fd goes to rhea record once the
				      process has a recording of its own */
static size_t off_nodes;           /* where the nodes begin in it */

/* salvage_fd still names the memfd: a program that closed every
 * descriptor may since have got that number for a file of its own, which
 * the agent must then never touch. */
static int fd_still_ours(void)
{
	struct stat st;
	if (salvage_fd < 0)
		return 0;
	if (fstat(salvage_fd, &st) == 0 && st.st_dev == memfd_dev && st.st_ino == memfd_ino)
		return 1;
	salvage_fd = -1;
	return 0;
}

#define PAGE 4096u
static size_t page_up(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

/* "/proc/self/fd/<fd>" into path (32 bytes). */
static void self_fd_path(char path[32], int fd)
{
	static const char pre[] = "/proc/self/fd/";
	char num[12];
	int n = 0;
	for (int x = fd; x || n == 0; x /= 10)
		num[n++] = (char)('0' + x % 10);
	size_t p = sizeof(pre) - 1;
	memcpy(path, pre, p);
	while (n)
		path[p++] = num[--n];
	path[p] = 0;
}

/*
 * The memfd to map, or -1.  SALVAGE_OWN: a new one.  SALVAGE_INHERITED:
 * rhea record's, opened through /proc/<its pid>/fd/<n> as RHEA_SALVAGE
 * names it (so the program's descriptor table never holds it: nothing to
 * collide with, leak into what it execs, or close), when it is a memfd of
 * ours and not another process's (a child of the program, exec'ed: the
 * header names the process that took it first; an exec'ed image of that
 * process takes it over).
 */
static int salvage_memfd(int mode)
{
	if (mode == SALVAGE_OWN) /* rhea attach: it opens ours through /proc */
		return memfd_create(RHEA_SALVAGE_NAME, MFD_CLOEXEC);
	if (mode != SALVAGE_INHERITED)
		return -1;
	const char *v = getenv(RHEA_SALVAGE_ENV);
	if (!v || strncmp(v, "/proc/", 6) != 0)
		return -1;
	int fd = open(v, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char link[64], path[32];
	self_fd_path(path, fd);
	ssize_t l = readlink(path, link, sizeof(link) - 1);
	static const char want[] = "/memfd:" RHEA_SALVAGE_NAME " ";
	struct rhea_salvage h;
	memset(&h, 0, sizeof(h));
	ssize_t got = -1;
	if (l >= (ssize_t)sizeof(want) - 1 && memcmp(link, want, sizeof(want) - 1) == 0)
		got = pread(fd, &h, sizeof(h), 0);
	if (got < 0 || (got == (ssize_t)sizeof(h) && h.magic == RHEA_SALVAGE_MAGIC && h.pid != getpid()) ||
	    (got == (ssize_t)sizeof(h) && h.magic != RHEA_SALVAGE_MAGIC && h.magic != 0)) {
		syscall(SYS_close, fd);
		return -1;
	}
	return fd;
}

/* rhea record's socket (RHEA_SALVAGE_SOCK), read when the region is set
 * up: a hook that tells it something may run in a signal handler, where
 * the environment may be half-changed by the program. */
static char sock_name[sizeof(((struct sockaddr_un *)0)->sun_path)];

static void sock_name_read(void)
{
	const char *name = getenv(RHEA_SALVAGE_SOCK_ENV);
	size_t n = name ? strlen(name) : 0;
	if (n + 1 >= sizeof(sock_name))
		n = 0;
	memcpy(sock_name, name ? name : "", n);
	sock_name[n] = 0;
}

/* RHEA_TEST_SEND_SLOW=1 (tests only): the memfd's message waits 300 ms
 * with its socket made, as when rhea record's backlog stays full. */
static int test_send_slow = -1;

/*
 * A connected socket to rhea record's keeper, which listens on the
 * abstract socket RHEA_SALVAGE_SOCK names; non-blocking; -1 when there is
 * none to reach.  The keeper's backlog full (many processes starting at
 * once on a loaded machine): EAGAIN, tried again each millisecond, tries
 * times in all (the memfd: 20, on the writer thread; a reaped child's
 * note, in the program's wait: once).  Raw system calls: connect is a
 * hook.
 *
 * The socket is put high at once: it took the lowest free descriptor, and
 * the writer sends the memfd while the program runs on.  A daemon that
 * had just closed every descriptor got 1 for its /dev/null, the socket
 * being 0 while connect waited for the backlog (e2e daemonize/storm, 1
 * run in some 300 under make test; daemonize/send-slow holds it 300 ms).
 */
static int keeper_socket(int tries)
{
	size_t n = strlen(sock_name);
	if (n == 0)
		return -1;
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, sock_name, n); /* abstract: a leading NUL */
	int s = (int)syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	s = rhea_fd_high(s);
	for (int i = 0; i < tries; i++) {
		if (syscall(SYS_connect, s, (struct sockaddr *)&a,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) == 0)
			return s;
		if (errno != EAGAIN || i + 1 == tries)
			break;
		rhea_sleep_ns(1000000);
	}
	syscall(SYS_close, s);
	return -1;
}

/* data (len bytes) and descriptor fd (-1: none) on the connected s:
 * 0, or -1. */
static int send_on(int s, const void *data, size_t len, int fd)
{
	struct iovec iov = {(void *)data, len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union fdpass_buf u;
	fdpass_attach(&msg, &u, fd);
	return syscall(SYS_sendmsg, s, &msg, MSG_NOSIGNAL) == (long)len ? 0 : -1;
}

/* One message to rhea record's keeper, with descriptor fd (-1: none)
 * attached.  A busy or gone rhea record just means no recovery.
 * Async-signal-safe; errno is left alone.  0, or -1. */
static int send_to_record(const void *data, size_t len, int fd, int tries)
{
	int err = errno, ok = -1;
	int s = keeper_socket(tries);
	if (s >= 0 && fd >= 0 && test_send_slow == 1)
		rhea_sleep_ns(300000000);
	if (s >= 0) {
		ok = send_on(s, data, len, fd);
		syscall(SYS_close, s);
	}
	errno = err;
	return ok;
}

/* One request for the file at path and the keeper's answer: the
 * descriptor, or -1 and errno (the keeper's, or ENOENT: no answer). */
static int ask_once(const char *path)
{
	static struct rhea_salvage_open m; /* (4 KB: not on a small stack) */
	memset(&m, 0, sizeof(m));
	m.magic = RHEA_SALVAGE_OPEN_MAGIC;
	m.pid = (int32_t)getpid();
	size_t n = strnlen(path, sizeof(m.path) - 1);
	memcpy(m.path, path, n);
	int s = keeper_socket(20);
	if (s < 0) {
		errno = ENOENT;
		return -1;
	}
	int fd = -1, err = ENOENT;
	struct pollfd p = {s, POLLIN, 0};
	struct timespec wait = {2, 0};
	struct rhea_salvage_opened r;
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union fdpass_buf u;
	fdpass_expect(&msg, &u);
	long ready = -1;
	if (send_on(s, &m, sizeof(m), -1) == 0)
		for (int i = 0; i < 4 && (ready = syscall(SYS_ppoll, &p, 1, &wait, NULL, 0)) < 0 && errno == EINTR; i++)
			; /* (a signal of the program's: the answer comes all the same) */
	long got = ready == 1 ? syscall(SYS_recvmsg, s, &msg, MSG_CMSG_CLOEXEC) : -1;
	if (got >= 0)
		fd = fdpass_take(&msg);
	if (got == (long)sizeof(r) && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && r.magic == RHEA_SALVAGE_OPENED_MAGIC)
		err = r.err;
	syscall(SYS_close, s);
	if (fd >= 0 && err == 0)
		return rhea_fd_high(fd);
	if (fd >= 0)
		syscall(SYS_close, fd);
	errno = err ? err : ENOENT;
	return -1;
}

/* Not under a seccomp filter: recvmsg and ppoll are none of the calls
 * the agent judges filters by (core/seccompbpf.c), and one that forbids
 * them may kill. */
int salvage_ask_file(const char *path)
{
	if (syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) != 0) {
		errno = ENOENT;
		return -1;
	}
	for (int i = 0;; i++) {
		int fd = ask_once(path);
		if (fd >= 0 || errno != EAGAIN || i == 50)
			return fd;
		rhea_sleep_ns(5000000); /* rhea record names its output at once */
	}
}

/* Hand the memfd to rhea record: the processes it did not start itself
 * (forked children, what they exec) keep their buffers in memfds of their
 * own, and rhea record holds on to them so that one killed with SIGKILL is
 * recovered too. */
/* RHEA_TEST_SEND_FAILS=1 (tests only): rhea record never gets a memfd,
 * as when its socket's backlog stays full. */
static int test_send_fails = -1;

static int send_memfd(int fd)
{
	char byte = 'm';
	if (test_send_fails < 0) {
		const char *v = getenv("RHEA_TEST_SEND_FAILS");
		test_send_fails = v && *v == '1';
		v = getenv("RHEA_TEST_SEND_SLOW");
		test_send_slow = v && *v == '1';
	}
	return test_send_fails ? -1 : send_to_record(&byte, 1, fd, 20);
}

void salvage_note_reaped(pid_t pid, int wstatus)
{
	struct rhea_salvage_reaped m = {.magic = RHEA_SALVAGE_REAPED_MAGIC, .pid = pid, .status = wstatus};
	if (pid > 0 && (WIFEXITED(wstatus) || WIFSIGNALED(wstatus)))
		send_to_record(&m, sizeof(m), -1, 1);
}

/* A memfd of this process's own for rhea record, sized, or -1. */
static int memfd_for_record(size_t size)
{
	if (!sock_name[0])
		return -1;
	int fd = memfd_create(RHEA_SALVAGE_NAME, MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
		syscall(SYS_close, fd);
		fd = -1;
	}
	return fd;
}

/* size bytes of *fd, shared, when it maps, else of private anonymous
 * memory (then *fd is closed and -1).  NULL when nothing maps. */
static char *map_region(int *fd, size_t size)
{
	char *m = MAP_FAILED;
	if (*fd >= 0)
		m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, *fd, 0);
	if (m == MAP_FAILED) {
		if (*fd >= 0)
			syscall(SYS_close, *fd);
		*fd = -1;
		m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	return m == MAP_FAILED ? NULL : m;
}

/* The mapped memfd's descriptor: kept (keep: rhea attach opens it, or it
 * is still to be sent), else closed. */
static void keep_fd(int fd, int keep)
{
	struct stat st;
	salvage_fd = -1;
	if (fd >= 0 && keep)
		fd = rhea_fd_high(fd); /* not the 3 a forked child's program opens next */
	if (fd >= 0 && keep && fstat(fd, &st) == 0) {
		salvage_fd = fd;
		memfd_dev = st.st_dev;
		memfd_ino = st.st_ino;
	} else if (fd >= 0) {
		syscall(SYS_close, fd);
	}
}

void *salvage_region(int mode, size_t buf_bytes, size_t node_bytes, uint32_t npend, uint32_t nsites, void **buf,
		     void **nodes, struct rhea_salvage_pend **pend, struct rhea_salvage_sites **sites)
{
	size_t hdr = page_up(sizeof(struct rhea_salvage));
	size_t off_buf = hdr, nodes_at = off_buf + page_up(buf_bytes);
	size_t off_pend = nodes_at + page_up(node_bytes);
	size_t off_sites = off_pend + page_up((size_t)npend * sizeof(struct rhea_salvage_pend));
	size_t size = off_sites + page_up((size_t)nsites * sizeof(struct rhea_salvage_sites));
	sock_name_read();
	int fd = salvage_memfd(mode), own = mode == SALVAGE_OWN;
	/* zeroed: an exec'ed image finds its predecessor's bytes here */
	if (fd >= 0 && (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)size) != 0)) {
		syscall(SYS_close, fd);
		fd = -1;
	}
	if (fd < 0 && mode == SALVAGE_INHERITED && (fd = memfd_for_record(size)) >= 0)
		own = 1; /* not the process rhea record started: a memfd of its own,
			    sent to rhea record when it opens its recording */
	char *m = map_region(&fd, size);
	if (!m)
		return NULL;
	region_shared = region_mapped = fd >= 0;
	send_pending = region_shared && own && mode == SALVAGE_INHERITED;
	keep_fd(fd, own); /* rhea record's own memfd is mapped: not needed */
	region_size = size;
	off_nodes = nodes_at;
	struct rhea_salvage *h = (struct rhea_salvage *)m;
	h->version = RHEA_SALVAGE_VERSION;
	h->header_size = sizeof(*h);
	h->pid = getpid();
	h->base = (uint64_t)(uintptr_t)m;
	h->size = size;
	h->nodes = (uint64_t)(uintptr_t)(m + nodes_at);
	h->pend = (uint64_t)(uintptr_t)(m + off_pend);
	h->npend = npend;
	h->sites = (uint64_t)(uintptr_t)(m + off_sites);
	h->nsites = nsites;
	h->nodes_in_file = 1;
	*buf = m + off_buf;
	*nodes = m + nodes_at;
	*pend = (struct rhea_salvage_pend *)(m + off_pend);
	*sites = (struct rhea_salvage_sites *)(m + off_sites);
	rhea_salvage = h;
	return m;
}

/*
 * Once the buffers and the table are set up in the region, before the file
 * is named: what the reader needs, the magic that makes it count, and for
 * a forked child its memfd to rhea record, with no file named yet
 * (salvage_name names it).  In that order, a process killed at any point
 * while it creates its recording leaves none or one rhea record can end:
 * sent after the naming, a child SIGKILLed in between left a file with
 * its header alone, "cut short" (2 of 40 children killed from outside
 * moments after their first capture).
 */
void salvage_publish(const struct buf *b, uint32_t max_nodes)
{
	struct rhea_salvage *h = rhea_salvage;
	if (!h)
		return;
	/* (an exec'ed image's region still names its last image's file) */
	__atomic_store_n(&h->output[0], 0, __ATOMIC_RELEASE);
	h->chunks = (uint64_t)(uintptr_t)b->chunks;
	h->nchunks = b->nchunks;
	h->chunk_size = b->chunk_size;
	h->max_nodes = max_nodes;
	__atomic_store_n(&h->state, RHEA_SALVAGE_ACTIVE, __ATOMIC_RELEASE);
	__atomic_store_n(&h->magic, RHEA_SALVAGE_MAGIC, __ATOMIC_RELEASE);
	if (send_pending) {
		/* a process that has something to record: now rhea record holds
		 * its memory (a child that only execs never gets here) */
		send_pending = 0;
		if (fd_still_ours()) {
			if (send_memfd(salvage_fd) != 0)
				region_shared = 0; /* shared with nobody */
			syscall(SYS_close, salvage_fd);
		}
		salvage_fd = -1;
	}
}

/* The file, begun, and about to be named output, or named so: its path
 * into the region with its inode, the path's first byte last, so that a
 * process killed halfway names none (the reader takes "" for no file)
 * rather than a prefix of it, which may be another's. */
void salvage_name(const char *output, dev_t dev, ino_t ino)
{
	struct rhea_salvage *h = rhea_salvage;
	size_t n = strlen(output);
	if (!h || n == 0)
		return;
	if (n >= sizeof(h->output))
		n = sizeof(h->output) - 1;
	__atomic_store_n(&h->output[0], 0, __ATOMIC_RELEASE);
	h->output_dev = (uint64_t)dev;
	h->output_ino = (uint64_t)ino;
	memcpy(h->output + 1, output + 1, n - 1);
	h->output[n] = 0;
	__atomic_store_n(&h->output[0], output[0], __ATOMIC_RELEASE);
}

int salvage_shared(void)
{
	return region_shared;
}

int salvage_fd_number(void)
{
	return fd_still_ours() ? salvage_fd : -1;
}

void salvage_close_fd(void)
{
	if (fd_still_ours())
		syscall(SYS_close, salvage_fd);
	salvage_fd = -1;
}

void salvage_set_state(uint32_t state)
{
	if (rhea_salvage)
		__atomic_store_n(&rhea_salvage->state, state, __ATOMIC_RELEASE);
}

void salvage_write_failed(int err)
{
	if (!rhea_salvage)
		return;
	__atomic_store_n(&rhea_salvage->write_errno, err, __ATOMIC_RELAXED);
	__atomic_store_n(&rhea_salvage->state, RHEA_SALVAGE_FAILED, __ATOMIC_RELEASE);
}

void salvage_round(int begin, uint64_t file_offset)
{
	struct rhea_salvage *h = rhea_salvage;
	if (!h)
		return;
	if (begin) {
		__atomic_store_n(&h->round_start, file_offset, __ATOMIC_RELAXED);
		__atomic_store_n(&h->in_round, 1, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&h->in_round, 0, __ATOMIC_RELEASE);
	}
}

void salvage_nodes_in_file(uint32_t written)
{
	if (rhea_salvage)
		__atomic_store_n(&rhea_salvage->nodes_in_file, written, __ATOMIC_RELEASE);
}

/* The region into a new mapping of fd (-1: private memory) at the same
 * address, keeping its header, the chunks' descriptors and the nodes below
 * next_id (the buffers are reset by the caller, the pending samples and
 * site tables start empty).  0, or -1 with the region as it was (fd then
 * closed). */
static int region_move(const struct buf *b, uint32_t next_id, int *fd)
{
	char *old = (char *)rhea_salvage;
	char *m = map_region(fd, region_size);
	if (!m)
		return -1;
	memcpy(m, old, page_up(sizeof(struct rhea_salvage)));
	if (b->chunks) {
		size_t off = (size_t)((char *)b->chunks - old);
		memcpy(m + off, old + off, (size_t)b->nchunks * sizeof(*b->chunks));
	}
	uint64_t nodes_max = (region_size - off_nodes) / sizeof(struct rhea_salvage_node);
	if (next_id > nodes_max)
		next_id = (uint32_t)nodes_max;
	memcpy(m + off_nodes, old + off_nodes, (size_t)next_id * sizeof(struct rhea_salvage_node));
	if (mremap(m, region_size, region_size, MREMAP_MAYMOVE | MREMAP_FIXED, old) == MAP_FAILED) {
		munmap(m, region_size);
		if (*fd >= 0)
			syscall(SYS_close, *fd);
		*fd = -1;
		return -1;
	}
	struct rhea_salvage *h = rhea_salvage;
	/* published again once the new owner opens its file */
	h->magic = 0;
	h->state = RHEA_SALVAGE_UNSET;
	h->pid = getpid();
	h->nodes_in_file = 1;
	h->in_round = 0;
	region_shared = region_mapped = send_pending = *fd >= 0;
	return 0;
}

/*
 * In a forked child, before it writes anything: the shared region becomes
 * the child's own, a memfd for rhea record when it traces (sent once the
 * child has a recording, salvage_publish) or private memory.  The buffers
 * and pending samples are reset by the child anyway, and its site tables
 * start empty (the forking thread's is cleared, thread_after_fork); the header, the
 * chunks' descriptors and the nodes the child keeps (it writes them all to
 * its own file) are copied, nodes up to next_id.  On failure the region
 * is forgotten: it is still the parent's.
 */
int salvage_after_fork(const struct buf *b, uint32_t next_id, int traced)
{
	struct rhea_salvage *h = rhea_salvage;
	/* Not region_shared: a process whose memfd rhea record did not take
	 * (its socket's backlog full, on a loaded machine) still maps it
	 * shared, and its children wrote into its buffers, and it and its
	 * siblings into theirs: every recording held some of the others'
	 * samples (e2e daemonize/storm, two at once: 2 runs in 10). */
	if (!region_mapped || !h)
		return 0; /* private already */
	if (fd_still_ours())
		syscall(SYS_close, salvage_fd);
	salvage_fd = -1;
	int fd = traced ? memfd_for_record(region_size) : -1;
	if (region_move(b, next_id, &fd) != 0) {
		rhea_salvage = NULL;
		return -1; /* the caller stops the agent: never the parent's buffers */
	}
	keep_fd(fd, 1); /* close-on-exec: a child that only execs never sends it */
	return 0;
}

int salvage_renew(const struct buf *b, uint32_t next_id)
{
	if (!rhea_salvage)
		return -1;
	int fd = memfd_create(RHEA_SALVAGE_NAME, MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)region_size) != 0) {
		syscall(SYS_close, fd);
		fd = -1;
	}
	if (region_move(b, next_id, &fd) != 0)
		return -1;
	send_pending = 0; /* rhea attach opens it through /proc */
	keep_fd(fd, 1);
	return 0;
}

/*
 * rfile.c - the chunk layer of .rhea recordings: a writer for the agent and
 * a reader for the CLI (API in rfile.h, format in format.h and
 * doc/format.md).
 *
 * Writer.  The agent writes chunks from its background thread and, once,
 * from the fatal-signal handler that flushes what is left when the program
 * crashes.  So after rfile_writer_init() the writer may only use what is
 * safe in a signal handler: write(), ftruncate(), lseek(), poll(), memcpy,
 * zstd with a context whose memory was handed to it up front
 * (ZSTD_initStaticCCtx: it never allocates) and zlib's crc32 (a pure
 * function over static tables).  The buffers are mmap'ed, not malloc'ed,
 * because init can run while the program's allocator is being interposed.
 *
 * Each chunk is built in one buffer, header then stored bytes, and goes out
 * in a single write() loop: a reader sees either nothing of it or a prefix.
 * A prefix is what a full disk or RLIMIT_FSIZE leaves behind (the kernel
 * writes what fits and fails the next write), and a chunk cut short makes
 * the reader stop with RFILE_ERR_TRUNCATED.  The writer keeps its own file
 * offset and, when a write fails part way, truncates the file back to the
 * start of the chunk so that the recording ends on a chunk boundary and
 * reads cleanly to its last complete chunk.  It cannot do that on a pipe;
 * the reader then reports the cut.  After the first failure the writer is
 * dead (the error is sticky): writing later chunks after a hole would
 * produce a file whose sequence numbers say something was lost, and a full
 * disk rarely gets better while we are crashing.
 *
 * Signals the kernel sends for a failed write, SIGXFSZ (RLIMIT_FSIZE) and
 * SIGPIPE, kill the process by default; they go to the writing thread, so
 * the agent should keep them blocked in its writer thread: the write then
 * just fails with EFBIG or EPIPE.
 *
 * ZSTD_estimateCCtxSize and ZSTD_initStaticCCtx are zstd's "static linking
 * only" API, used here from the shared library.  That is safe in practice:
 * both have existed unchanged since zstd 1.3, and the workspace size is
 * computed by the same library that later uses the workspace, so headers
 * and library of different versions cannot make it too small.
 *
 * The writer is not re-entrant: one call at a time.  A busy flag (an atomic
 * exchange, no lock) turns a second call - a signal handler interrupting the
 * background thread inside rfile_write_chunk - into -EBUSY instead of a
 * scrambled buffer; the agent decides whether to wait or give up.
 *
 * Reader.  It reads untrusted files, so a chunk header's own CRC is checked
 * before any of its fields is trusted, every size is bounded before it is
 * used (header_size <= 64 KiB, raw_size <= RHEA_CHUNK_MAX_RAW, stored_size
 * <= ZSTD_compressBound(raw_size)), the payload CRC is checked before zstd
 * sees the bytes, a zstd frame must declare exactly raw_size bytes of
 * content, and decompression goes into a buffer of raw_size bytes.  It reads
 * sequentially with read() into a buffer that grows to the largest chunk,
 * rather than mmap'ing the file: a recording being written can shrink under
 * the reader (the writer's truncation above), and a shrinking mmap'ed file
 * is a SIGBUS, i.e. a crash of the CLI; read() also works on a pipe.  Memory
 * stays at about two chunks whatever the file size.
 *
 * The order of the checks on a chunk: the header CRC (header_crc, over the
 * 32 header bytes with that field zeroed), then the header's fields (magic,
 * flags, sizes, sequence number), then the payload CRC (crc, over the stored
 * bytes), then the zstd frame.  A damaged header - any of its 32 bytes,
 * type and sizes included - is thus reported as corrupt, never skipped as an
 * unknown type nor taken for a chunk cut short; a file that ends inside a
 * chunk header is still reported as truncated.
 *
 * Limits: little-endian hosts only (the format is little-endian and structs
 * are copied as they are); one reader or writer per object at a time.
 */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_estimateCCtxSize, ZSTD_initStaticCCtx */
#include "rfile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <zstd.h>
#ifdef RHEA_AGENT
#include "crc32.h"
#include "dllib.h"
#else
#include <zlib.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rfile.c copies little-endian structs as they are: port it first"
#endif

_Static_assert(sizeof(struct rhea_chunk_header) == 32, "chunk header size");
_Static_assert(sizeof(struct rhea_entry) == 8, "entry header size");
_Static_assert(sizeof(RHEA_MAGIC) == 8, "magic size");
_Static_assert(sizeof(struct rhea_release) == 40, "RELEASE entry size (doc/format.md)");

#ifdef RHEA_AGENT
/*
 * The agent writes, never reads, and needs neither zlib nor libzstd: it may
 * be loaded into a process that has neither (rhea attach into a container
 * from a minimal image, where a library it needs made its dlopen fail).
 * The CRC is its own (crc32.h); zstd is taken with dlopen when the process
 * can have it, and without it the chunks are written as they are (the
 * reader takes both; rhea's compaction compresses them at the end).
 */
uint32_t rhea_crc32_table[256];
#define crc32(c, p, n) crc32_of((c), (p), (n))
#define ZS_FUNCS(X)                                                                                     \
	X(ZSTD_maxCLevel) X(ZSTD_minCLevel) X(ZSTD_estimateCCtxSize) X(ZSTD_initStaticCCtx)               \
	X(ZSTD_compressBound) X(ZSTD_compressCCtx) X(ZSTD_isError)
/* (zs_load: tried once, so a forked child inherits the answer) */
DL_LIBRARY(zs, "libzstd.so.1", ZS_FUNCS)
#define ZSTD_maxCLevel (*zs.p_ZSTD_maxCLevel)
#define ZSTD_minCLevel (*zs.p_ZSTD_minCLevel)
#define ZSTD_estimateCCtxSize (*zs.p_ZSTD_estimateCCtxSize)
#define ZSTD_initStaticCCtx (*zs.p_ZSTD_initStaticCCtx)
#define ZSTD_compressBound (*zs.p_ZSTD_compressBound)
#define ZSTD_compressCCtx (*zs.p_ZSTD_compressCCtx)
#define ZSTD_isError (*zs.p_ZSTD_isError)
#define Bytef uint8_t
#define uInt size_t
#else
static int zs_load(void)
{
	return 1;
}
#endif

#define RFILE_CHDR sizeof(struct rhea_chunk_header)
/* Largest header_size the reader accepts: room for decades of new fields,
 * small enough that a damaged size is rejected rather than skipped over. */
#define RFILE_HEADER_MAX (64u << 10)
/* How long a write to a full non-blocking pipe may wait for room. */
#define RFILE_POLL_MS 1000

/* CRC of a chunk header computed with its header_crc field zeroed (writer
 * and reader).  A pure function: async-signal-safe. */
static uint32_t rfile_header_crc(const struct rhea_chunk_header *ch)
{
	struct rhea_chunk_header c = *ch;

	c.header_crc = 0;
	return (uint32_t)crc32(0, (const Bytef *)&c, (uInt)sizeof(c));
}

/* ---- writer ---------------------------------------------------------- */

static void *rfile_map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int rfile_writer_init(struct rfile_writer *w, int fd, int level,
		      size_t max_chunk)
{
	int err;
	off_t pos;

	memset(w, 0, sizeof(*w));
	w->fd = fd;
	int zstd = zs_load();
	if (fd < 0 || max_chunk == 0 || max_chunk > RHEA_CHUNK_MAX_RAW ||
	    (zstd && (level > ZSTD_maxCLevel() || level < ZSTD_minCLevel())))
		return -EINVAL;
	w->level = level;
	w->max_chunk = max_chunk;

	/* Our offset must be where write() lands: with O_APPEND, the end. */
	err = fcntl(fd, F_GETFL);
	if (err < 0)
		return -errno;
	pos = lseek(fd, 0, (err & O_APPEND) ? SEEK_END : SEEK_CUR);
	if (pos >= 0) {
		w->seekable = 1;
		w->offset = (uint64_t)pos;
	}

	/* Sized for any input at this level, so the static context never
	 * needs more (ZSTD_compressCCtx fails rather than allocates). */
	if (zstd) {
		w->work_size = ZSTD_estimateCCtxSize(level);
		w->work = rfile_map(w->work_size);
		if (!w->work) {
			err = -ENOMEM;
			goto out;
		}
		w->cctx = ZSTD_initStaticCCtx(w->work, w->work_size);
		if (!w->cctx) {
			err = -ENOMEM;
			goto out;
		}
	}
	w->out_cap = (zstd ? ZSTD_compressBound(max_chunk) : max_chunk) + RFILE_CHDR;
	w->out = rfile_map(w->out_cap);
	if (!w->out) {
		err = -ENOMEM;
		goto out;
	}
	/* The CRC's table filled here, not in a signal handler (zlib built
	 * with DYNAMIC_CRC_TABLE fills its own on first use, the agent's is
	 * crc32.h's). */
#ifdef RHEA_AGENT
	crc32_fill();
#else
	(void)crc32(0, Z_NULL, 0);
#endif
	return 0;
out:
	rfile_writer_destroy(w);
	w->fd = fd;
	return err;
}

void rfile_writer_destroy(struct rfile_writer *w)
{
	if (w->work)
		munmap(w->work, w->work_size);
	if (w->out)
		munmap(w->out, w->out_cap);
	w->work = w->out = w->cctx = NULL;
	w->work_size = w->out_cap = 0;
}

/* Wait (bounded) until a non-blocking fd can take more bytes. */
static int rfile_wait_writable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int tries;

	for (tries = 0; tries < 100; tries++) {
		int k = poll(&p, 1, RFILE_POLL_MS);
		if (k > 0)
			return 0;
		if (k == 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	return -EAGAIN;
}

/*
 * Write buf[0..n) at w->offset, all of it or nothing: on failure cut the
 * file back to where this write started.  Sets the sticky error.
 */
static int rfile_put(struct rfile_writer *w, const uint8_t *buf, size_t n)
{
	size_t done = 0;
	int err = 0;

	while (done < n) {
		ssize_t k = write(w->fd, buf + done, n - done);
		if (k > 0) {
			done += (size_t)k;
			continue;
		}
		if (k == 0) { /* not expected from write(2): do not spin */
			err = -EIO;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			err = rfile_wait_writable(w->fd);
			if (!err)
				continue;
			break;
		}
		err = -errno;
		break;
	}
	if (!err) {
		w->offset += n;
		return 0;
	}
	if (done > 0 && w->seekable) {
		/* Best effort: if this fails too, the reader still stops
		 * cleanly with RFILE_ERR_TRUNCATED at this chunk. */
		if (ftruncate(w->fd, (off_t)w->offset) == 0)
			(void)lseek(w->fd, (off_t)w->offset, SEEK_SET);
	}
	w->error = err;
	return err;
}

/*
 * Would n more bytes at w's offset leave keep_free on the file system?
 * Looked up with fstatfs when the room last seen, less what was written
 * since, may not be enough with 16 MB to spare (one system call for every
 * 16 MB written while the disk has room, one a chunk when it is nearly
 * full).  Blocks free, and the rest of the file's last block, already
 * its own; the superuser's reserved blocks count for root.  A file
 * system that cannot say (or a non-regular file) is not limited.
 */
#define RFILE_ROOM_SLACK (16u << 20)
static int rfile_room_for(struct rfile_writer *w, size_t n)
{
	if (!w->keep_free || !w->seekable)
		return 1;
	/* (room_at 0: not looked yet; chunks come after the header) */
	uint64_t since = w->offset - w->room_at;
	if (w->room_at && w->room >= since && w->room - since >= n + w->keep_free + RFILE_ROOM_SLACK)
		return 1;
	struct statfs sf;
	if (fstatfs(w->fd, &sf) != 0 || sf.f_bsize <= 0 || sf.f_blocks == 0)
		return 1;
	uint64_t bs = (uint64_t)sf.f_bsize;
	uint64_t blocks = geteuid() == 0 ? (uint64_t)sf.f_bfree : (uint64_t)sf.f_bavail;
	w->room = blocks * bs + (bs - w->offset % bs) % bs;
	w->room_at = w->offset;
	return w->room >= n + w->keep_free;
}

static int rfile_enter(struct rfile_writer *w)
{
	if (w->error)
		return w->error;
	if (!w->out)
		return -EINVAL;
	if (__atomic_exchange_n(&w->busy, 1, __ATOMIC_ACQUIRE))
		return -EBUSY;
	if (w->error) { /* set by the call we may have interrupted */
		__atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
		return w->error;
	}
	return 0;
}

static void rfile_leave(struct rfile_writer *w)
{
	__atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
}

int rfile_write_header(struct rfile_writer *w,
		       const struct rhea_file_header *h)
{
	struct rhea_file_header fh = *h;
	int saved = errno;
	int err;

	err = rfile_enter(w);
	if (err)
		return err;
	if (w->seq != 0) {
		err = -EINVAL;
		goto out;
	}
	memcpy(fh.magic, RHEA_MAGIC, sizeof(fh.magic));
	fh.version = RHEA_VERSION;
	fh.header_size = sizeof(fh);
	err = rfile_put(w, (const uint8_t *)&fh, sizeof(fh));
out:
	rfile_leave(w);
	errno = saved;
	return err;
}

int rfile_write_chunk(struct rfile_writer *w, const void *payload,
		      size_t len, int compress)
{
	struct rhea_chunk_header ch = {
		.magic = RHEA_CHUNK_MAGIC,
		.type = RHEA_CHUNK_EVENTS,
	};
	uint8_t *dst;
	size_t stored = len;
	int saved = errno;
	int err;

	err = rfile_enter(w);
	if (err)
		return err;
	if (len > w->max_chunk || (len && !payload)) {
		err = -EINVAL;
		goto out;
	}
	dst = (uint8_t *)w->out + RFILE_CHDR;
	if (compress && len > 1 && w->cctx) {
		/* A capacity of len - 1 makes "did not shrink" a zstd error,
		 * which it reports as soon as the output overflows. */
		size_t k = ZSTD_compressCCtx(w->cctx, dst, len - 1, payload,
					     len, w->level);
		if (!ZSTD_isError(k)) {
			stored = k;
			ch.flags = RHEA_CHUNK_ZSTD;
		}
	}
	if (!ch.flags && len)
		memcpy(dst, payload, len);
	ch.raw_size = (uint32_t)len;
	ch.stored_size = (uint32_t)stored;
	ch.crc = (uint32_t)crc32(0, dst, (uInt)stored);
	ch.seq = w->seq;
	ch.header_crc = rfile_header_crc(&ch);
	memcpy(w->out, &ch, sizeof(ch));

	if (!rfile_room_for(w, RFILE_CHDR + stored)) {
		err = w->error = -ENOSPC;
		goto out;
	}
	err = rfile_put(w, w->out, RFILE_CHDR + stored);
	if (err)
		goto out;
	w->seq++;
	w->bytes_raw += len;
	w->bytes_stored += RFILE_CHDR + stored;
out:
	rfile_leave(w);
	errno = saved;
	return err;
}

int rfile_writer_compresses(const struct rfile_writer *w)
{
	return w->cctx != NULL;
}

#ifndef RHEA_AGENT /* (the agent writes only) */
/* ---- reader ---------------------------------------------------------- */

struct rfile_reader {
	int fd;
	int regular;     /* a regular file: its size is known */
	uint64_t size;   /* its size at the last fstat */
	int status;      /* sticky error, 0 if none */
	struct rhea_file_header hdr;
	uint64_t off;    /* offset of the next chunk */
	uint64_t seq;    /* sequence number expected next */
	uint8_t *in;     /* stored bytes of the current chunk */
	size_t in_cap;
	uint8_t *raw;    /* decompressed payload */
	size_t raw_cap;
	ZSTD_DCtx *dctx;
	char msg[200];
};

__attribute__((format(printf, 3, 4)))
static int rfile_fail(struct rfile_reader *r, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	r->status = status;
	return status;
}

/* Read up to n bytes; fewer only at end of file.  Count or -errno. */
static ssize_t rfile_read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, (uint8_t *)buf + got, n - got);
		if (k > 0)
			got += (size_t)k;
		else if (k == 0)
			break;
		else if (errno != EINTR)
			return -errno;
	}
	return (ssize_t)got;
}

/* Make *buf hold at least n bytes (never 0: malloc(0) may be NULL). */
static int rfile_reserve(uint8_t **buf, size_t *cap, size_t n)
{
	void *p;

	if (n <= *cap && *buf)
		return 0;
	if (n < 4096)
		n = 4096;
	free(*buf); /* contents need not survive: no realloc copy */
	*buf = NULL;
	*cap = 0;
	p = malloc(n);
	if (!p)
		return -1;
	*buf = p;
	*cap = n;
	return 0;
}

static int rfile_io_error(struct rfile_reader *r, int err)
{
	return rfile_fail(r, RFILE_ERR_IO, "read error: %s", strerror(-err));
}

static int rfile_read_header(struct rfile_reader *r)
{
	uint8_t hb[sizeof(struct rhea_file_header)];
	uint32_t version, hsize;
	ssize_t n;

	n = rfile_read_full(r->fd, hb, sizeof(hb));
	if (n < 0)
		return rfile_io_error(r, (int)n);
	if (n == 0)
		return rfile_fail(r, RFILE_ERR_EMPTY, "empty file");
	if (memcmp(hb, RHEA_MAGIC, n < 8 ? (size_t)n : 8) != 0)
		return rfile_fail(r, RFILE_ERR_MAGIC,
				  "not a rhea recording (bad magic)");
	if (n < 16)
		return rfile_fail(r, RFILE_ERR_HEADER,
				  "file header cut short (%zd of %zu bytes)",
				  n, sizeof(hb));
	memcpy(&version, hb + 8, 4);
	memcpy(&hsize, hb + 12, 4);
	if (version == 0)
		return rfile_fail(r, RFILE_ERR_HEADER,
				  "bad file header (format version 0)");
	if (version > RHEA_VERSION)
		return rfile_fail(r, RFILE_ERR_VERSION,
				  "recording format version %u is newer than "
				  "this rhea (%d): upgrade rhea",
				  version, RHEA_VERSION);
	/* No older layout exists yet: version 1 is the first.  A reader for a
	 * later version accepts the sizes of the layouts it knows here. */
	if (hsize < sizeof(hb))
		return rfile_fail(r, RFILE_ERR_HEADER,
				  "bad file header (size %u, expected at "
				  "least %zu)", hsize, sizeof(hb));
	if (hsize > RFILE_HEADER_MAX)
		return rfile_fail(r, RFILE_ERR_HEADER,
				  "bad file header (size %u, at most %u "
				  "expected)", hsize, RFILE_HEADER_MAX);
	if ((size_t)n < sizeof(hb))
		return rfile_fail(r, RFILE_ERR_HEADER,
				  "file header cut short (%zd of %u bytes)",
				  n, hsize);
	memcpy(&r->hdr, hb, sizeof(hb));

	/* Fields a newer writer appended: skip them. */
	for (uint32_t left = hsize - (uint32_t)sizeof(hb); left > 0;) {
		uint8_t skip[512];
		size_t want = left < sizeof(skip) ? left : sizeof(skip);
		n = rfile_read_full(r->fd, skip, want);
		if (n < 0)
			return rfile_io_error(r, (int)n);
		if ((size_t)n < want)
			return rfile_fail(r, RFILE_ERR_HEADER,
					  "file header cut short (%u of %u "
					  "bytes)",
					  hsize - left + (uint32_t)n, hsize);
		left -= (uint32_t)n;
	}
	r->off = hsize;
	return RFILE_OK;
}

int rfile_open(const char *path, struct rfile_reader **out)
{
	struct rfile_reader *r;
	struct stat st;

	*out = r = calloc(1, sizeof(*r));
	if (!r)
		return RFILE_ERR_IO;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return rfile_fail(r, RFILE_ERR_IO, "cannot open: %s",
				  strerror(errno));
	if (fstat(r->fd, &st) < 0)
		return rfile_io_error(r, -errno);
	if (S_ISDIR(st.st_mode))
		return rfile_fail(r, RFILE_ERR_IO, "is a directory");
	if (S_ISREG(st.st_mode)) {
		r->regular = 1;
		r->size = (uint64_t)st.st_size;
	}
	r->dctx = ZSTD_createDCtx();
	if (!r->dctx)
		return rfile_fail(r, RFILE_ERR_IO, "out of memory");
	return rfile_read_header(r);
}

const struct rhea_file_header *rfile_header(const struct rfile_reader *r)
{
	return &r->hdr;
}

const char *rfile_error(const struct rfile_reader *r)
{
	return r ? r->msg : "out of memory";
}

uint64_t rfile_offset(const struct rfile_reader *r)
{
	return r->off;
}

uint64_t rfile_chunk_index(const struct rfile_reader *r)
{
	return r->seq;
}

void rfile_close(struct rfile_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->in);
	free(r->raw);
	free(r);
}

static int rfile_corrupt(struct rfile_reader *r, const char *what)
{
	return rfile_fail(r, RFILE_ERR_CORRUPT,
			  "corrupt: chunk %llu at byte %llu: %s",
			  (unsigned long long)r->seq,
			  (unsigned long long)r->off, what);
}

static int rfile_cut(struct rfile_reader *r, uint64_t have, uint64_t want)
{
	return rfile_fail(r, RFILE_ERR_TRUNCATED,
			  "truncated: chunk %llu at byte %llu is cut short "
			  "(%llu of %llu bytes)",
			  (unsigned long long)r->seq,
			  (unsigned long long)r->off, (unsigned long long)have,
			  (unsigned long long)want);
}

/*
 * Check a chunk header: its own CRC first (no field of a damaged header is
 * trusted, not even its type or sizes), then its fields against each other
 * and the bounds.
 */
static int rfile_check_chunk(struct rfile_reader *r,
			     const struct rhea_chunk_header *ch)
{
	char what[96];

	if (rfile_header_crc(ch) != ch->header_crc) {
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
		/* (as for the payload CRC below: let a fuzzer reach the
		 * field checks) */
		return rfile_corrupt(r, "header checksum mismatch");
#endif
	}
	if (ch->magic != RHEA_CHUNK_MAGIC)
		return rfile_corrupt(r, "bad chunk magic");
	if (ch->flags & ~(unsigned)RHEA_CHUNK_ZSTD) {
		snprintf(what, sizeof(what), "unknown chunk flags 0x%x",
			 ch->flags);
		return rfile_corrupt(r, what);
	}
	if (ch->raw_size > RHEA_CHUNK_MAX_RAW) {
		snprintf(what, sizeof(what), "payload size %u over the %u limit",
			 ch->raw_size, RHEA_CHUNK_MAX_RAW);
		return rfile_corrupt(r, what);
	}
	if (!(ch->flags & RHEA_CHUNK_ZSTD) && ch->stored_size != ch->raw_size) {
		snprintf(what, sizeof(what),
			 "stored size %u differs from payload size %u",
			 ch->stored_size, ch->raw_size);
		return rfile_corrupt(r, what);
	}
	if ((ch->flags & RHEA_CHUNK_ZSTD) &&
	    ch->stored_size > ZSTD_compressBound(ch->raw_size)) {
		snprintf(what, sizeof(what),
			 "stored size %u too big for payload size %u",
			 ch->stored_size, ch->raw_size);
		return rfile_corrupt(r, what);
	}
	if (ch->seq != r->seq) {
		snprintf(what, sizeof(what),
			 "sequence number %llu, expected %llu",
			 (unsigned long long)ch->seq,
			 (unsigned long long)r->seq);
		return rfile_corrupt(r, what);
	}
	return RFILE_OK;
}

/* Decompress the chunk's stored bytes (r->in) into r->raw. */
static int rfile_inflate(struct rfile_reader *r,
			 const struct rhea_chunk_header *ch)
{
	unsigned long long content;
	size_t k;

	content = ZSTD_getFrameContentSize(r->in, ch->stored_size);
	if (content == ZSTD_CONTENTSIZE_ERROR ||
	    content == ZSTD_CONTENTSIZE_UNKNOWN)
		return rfile_corrupt(r, "not a zstd frame with a content size");
	if (content != ch->raw_size)
		return rfile_corrupt(r, "zstd frame size differs from payload "
					"size");
	k = ZSTD_findFrameCompressedSize(r->in, ch->stored_size);
	if (ZSTD_isError(k) || k != ch->stored_size)
		return rfile_corrupt(r, "stored bytes are not one zstd frame");
	if (rfile_reserve(&r->raw, &r->raw_cap, ch->raw_size) < 0)
		return rfile_fail(r, RFILE_ERR_IO, "out of memory");
	k = ZSTD_decompressDCtx(r->dctx, r->raw, ch->raw_size, r->in,
				ch->stored_size);
	if (ZSTD_isError(k) || k != ch->raw_size)
		return rfile_corrupt(r, "zstd decompression failed");
	return RFILE_OK;
}

int rfile_next_chunk(struct rfile_reader *r, const void **payload,
		     size_t *len)
{
	struct rhea_chunk_header ch;
	uint64_t end;
	ssize_t n;
	int st;

	*payload = NULL;
	*len = 0;
again:
	if (r->status)
		return r->status;
	n = rfile_read_full(r->fd, &ch, sizeof(ch));
	if (n < 0)
		return rfile_io_error(r, (int)n);
	if (n == 0)
		return RFILE_END_OF_FILE;
	if ((size_t)n < sizeof(ch))
		return rfile_fail(r, RFILE_ERR_TRUNCATED,
				  "truncated: chunk %llu at byte %llu is cut "
				  "short (%zd of at least %zu bytes)",
				  (unsigned long long)r->seq,
				  (unsigned long long)r->off, n, sizeof(ch));
	st = rfile_check_chunk(r, &ch);
	if (st)
		return st;

	/* Do not allocate for bytes a regular file does not have. */
	end = r->off + sizeof(ch) + ch.stored_size;
	if (r->regular && end > r->size) {
		struct stat sb;
		if (fstat(r->fd, &sb) == 0)
			r->size = (uint64_t)sb.st_size;
		if (end > r->size)
			return rfile_cut(r, r->size > r->off ? r->size - r->off : 0,
					 end - r->off);
	}
	if (rfile_reserve(&r->in, &r->in_cap, ch.stored_size) < 0)
		return rfile_fail(r, RFILE_ERR_IO, "out of memory");
	n = rfile_read_full(r->fd, r->in, ch.stored_size);
	if (n < 0)
		return rfile_io_error(r, (int)n);
	if ((size_t)n < ch.stored_size)
		return rfile_cut(r, sizeof(ch) + (uint64_t)n, end - r->off);
	if ((uint32_t)crc32(0, r->in, ch.stored_size) != ch.crc) {
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
		/* (a fuzzer could never forge the CRC to reach the rest) */
		return rfile_corrupt(r, "CRC mismatch");
#endif
	}

	if (ch.type != RHEA_CHUNK_EVENTS) {
		/* A kind of chunk from a newer writer: skip it whole. */
		r->off = end;
		r->seq++;
		goto again;
	}
	if (ch.flags & RHEA_CHUNK_ZSTD) {
		st = rfile_inflate(r, &ch);
		if (st)
			return st;
		*payload = r->raw;
	} else {
		*payload = r->in;
	}
	*len = ch.raw_size;
	r->off = end;
	r->seq++;
	return RFILE_OK;
}

int rfile_next_entry(const void *payload, size_t len, size_t *off,
		     const struct rhea_entry **e)
{
	const uint8_t *p = (const uint8_t *)payload + *off;
	struct rhea_entry h;

	if (*off == len)
		return 0;
	if (*off > len || len - *off < sizeof(h) || ((uintptr_t)p & 7))
		return -1;
	memcpy(&h, p, sizeof(h));
	if (h.size < sizeof(h) || (h.size & 7) || h.size > len - *off)
		return -1;
	*e = (const struct rhea_entry *)p;
	*off += h.size;
	return 1;
}

/* Does `need` (64-bit, cannot overflow from 32-bit counts) fit in e? */
static int rfile_fits(const struct rhea_entry *e, uint64_t need)
{
	return need <= e->size ? 0 : -1;
}

int rfile_entry_check(const struct rhea_entry *e)
{
	const uint8_t *p = (const uint8_t *)e;

	if (e->size < sizeof(*e))
		return -1;
	switch (e->kind) {
	case RHEA_E_SAMPLE:
		return rfile_fits(e, sizeof(struct rhea_sample));
	case RHEA_E_PACKED:
		return rfile_fits(e, sizeof(struct rhea_packed));
	case RHEA_E_PACKED2:
	case RHEA_E_PACKED3:
	case RHEA_E_PACKED4:
		return rfile_fits(e, sizeof(struct rhea_packed2));
	case RHEA_E_THREAD:
		return rfile_fits(e, sizeof(struct rhea_thread));
	case RHEA_E_MODULE: {
		const struct rhea_module *m = (const void *)e;
		if (rfile_fits(e, sizeof(*m)) < 0 || m->build_id_len > 36 ||
		    m->path_len == 0 ||
		    rfile_fits(e, sizeof(*m) + (uint64_t)m->path_len) < 0)
			return -1;
		return p[sizeof(*m) + m->path_len - 1] == 0 ? 0 : -1;
	}
	case RHEA_E_NODES: {
		const struct rhea_nodes *n = (const void *)e;
		if (rfile_fits(e, sizeof(*n)) < 0)
			return -1;
		return rfile_fits(e, sizeof(*n) + (uint64_t)n->count *
				  sizeof(struct rhea_node));
	}
	case RHEA_E_NODES2: {
		/* (every node takes 2 bytes at least, an address 1) */
		const struct rhea_nodes2 *n = (const void *)e;
		if (rfile_fits(e, sizeof(*n)) < 0 || n->count > n->coded_len / 2 || n->naddrs > n->count)
			return -1;
		return rfile_fits(e, sizeof(*n) + (uint64_t)n->coded_len);
	}
	case RHEA_E_SITES: {
		const struct rhea_sites *s = (const void *)e;
		if (rfile_fits(e, sizeof(*s)) < 0)
			return -1;
		return rfile_fits(e, sizeof(*s) + (uint64_t)s->count *
				  sizeof(struct rhea_site));
	}
	case RHEA_E_SHORTS: {
		const struct rhea_shorts *s = (const void *)e;
		if (rfile_fits(e, sizeof(*s)) < 0)
			return -1;
		return rfile_fits(e, sizeof(*s) + (uint64_t)s->count *
				  sizeof(struct rhea_short));
	}
	case RHEA_E_META:
		return e->size == sizeof(struct rhea_meta) || p[e->size - 1] == 0
			       ? 0 : -1;
	case RHEA_E_END:
		return rfile_fits(e, sizeof(struct rhea_end));
	case RHEA_E_STATS:
		return rfile_fits(e, sizeof(struct rhea_stats));
	case RHEA_E_RELEASE:
		return rfile_fits(e, sizeof(struct rhea_release));
	default:
		return 1;
	}
}
#endif /* RHEA_AGENT */

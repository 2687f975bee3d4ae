/*
 * rfile.h - write and read .rhea recordings chunk by chunk (format.h,
 * doc/format.md).
 *
 * The writer lives in the agent.  It allocates everything in
 * rfile_writer_init() (with mmap, not malloc) and after that only calls
 * write(), memcpy, zstd with a static context and zlib's crc32, so that the
 * crash handler can flush the last buffers from a fatal-signal handler.
 *
 * The reader lives in the CLI and reads untrusted files: every size is
 * checked, every error is a status and a one-line message, never a crash.
 *
 * Conventions: writer functions return 0 or -errno; reader functions return
 * an enum rfile_status.
 */
#ifndef RHEA_RFILE_H
#define RHEA_RFILE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* ---- writer ---------------------------------------------------------- */

struct rfile_writer {
	int fd;             /* not owned: the caller opens and closes it */
	uint64_t seq;       /* sequence number of the next chunk */
	void *cctx;         /* ZSTD_CCtx living in work */
	void *work;         /* mmap'ed zstd workspace */
	size_t work_size;
	void *out;          /* mmap'ed: chunk header + stored bytes */
	size_t out_cap;
	size_t max_chunk;   /* largest payload rfile_write_chunk accepts */
	int level;          /* zstd level */
	uint64_t bytes_raw;    /* payload bytes given to rfile_write_chunk */
	uint64_t bytes_stored; /* bytes chunks added to the file, headers in */
	int error;          /* first -errno, sticky */
	/* Where the next write lands, to cut a half-written chunk off again.
	 * Meaningless when !seekable (pipe, socket, tty). */
	uint64_t offset;
	int seekable;
	int busy; /* a call is in progress: re-entry gets -EBUSY */
	/* Room to leave on the file system after each chunk (0: none asked):
	 * a chunk that would leave less fails with -ENOSPC, unwritten, so
	 * that the end of the recording still fits after it (rfile_write_chunk).
	 * Set by the caller after rfile_writer_init. */
	size_t keep_free;
	uint64_t room;     /* bytes free at the last look (rfile_room_for) */
	uint64_t room_at;  /* offset of that look */
};

/* The keep_free of writers that leave room for an end: an END and a META
 * (why the writing stopped), in a chunk, are well under it. */
#define RFILE_END_ROOM 512

/*
 * Prepare a writer on fd (positioned where the header goes), compressing
 * with zstd level `level` (0 = zstd default, negative = faster), for
 * payloads up to max_chunk bytes (1 .. RHEA_CHUNK_MAX_RAW).  Allocates the
 * zstd workspace and the output buffer with mmap.  0 or -errno.
 */
int rfile_writer_init(struct rfile_writer *w, int fd, int level,
		      size_t max_chunk);

/*
 * Write the file header.  magic, version and header_size are filled in by
 * the writer, the rest comes from *h.  Must come before any chunk
 * (-EINVAL otherwise).  0 or -errno (sticky, like rfile_write_chunk).
 */
int rfile_write_header(struct rfile_writer *w,
		       const struct rhea_file_header *h);

/*
 * Append one RHEA_CHUNK_EVENTS chunk holding payload[0..len) (a sequence of
 * entries; len <= max_chunk, else -EINVAL).  compress != 0 asks for zstd;
 * the chunk is stored as is when compression fails or does not shrink it.
 * Header and stored bytes go out in one write() loop.  On a failed write the
 * file is cut back to the end of the previous chunk (when seekable).
 *
 * With keep_free set, a chunk after which the file system would have
 * less than keep_free bytes left (statfs, counting the room left in the
 * file's last block) is not written: -ENOSPC, sticky like an I/O error.
 * The disk cannot then fill up to the byte under a recording, which had
 * no room left for the end that says why it stopped.
 *
 * 0 or -errno.  The first I/O error is sticky: every later call returns it
 * at once.  -EBUSY (not sticky) when called while another call on the same
 * writer is in progress, e.g. from a signal handler that interrupted it.
 * Async-signal-safe; preserves errno.
 */
int rfile_write_chunk(struct rfile_writer *w, const void *payload,
		      size_t len, int compress);

/* Release the buffers (the fd stays open).  Safe on a zeroed writer. */
void rfile_writer_destroy(struct rfile_writer *w);

/* Whether chunks asked to be compressed are: not in an agent loaded into
 * a process without libzstd (rfile.c), which writes them as they are. */
int rfile_writer_compresses(const struct rfile_writer *w);

/* ---- reader ---------------------------------------------------------- */

enum rfile_status {
	RFILE_OK = 0,
	RFILE_END_OF_FILE = 1,
	RFILE_ERR_IO = -1,        /* open/read failed, or out of memory */
	RFILE_ERR_EMPTY = -2,     /* zero-length file */
	RFILE_ERR_MAGIC = -3,     /* not a rhea recording */
	RFILE_ERR_VERSION = -4,   /* written by a newer rhea */
	RFILE_ERR_HEADER = -5,    /* file header malformed or cut short */
	RFILE_ERR_TRUNCATED = -6, /* file ends inside a chunk */
	RFILE_ERR_CORRUPT = -7,   /* bad chunk magic, crc, sizes, decompression */
};

struct rfile_reader;

/*
 * Open the recording at path (a regular file, or a pipe such as
 * /dev/stdin: the reader only reads sequentially) and read its header.
 * Returns a status.  *out is set even on error, so that rfile_error() can
 * tell what went wrong; the caller always calls rfile_close(*out).  Only
 * when memory runs out is *out NULL (status RFILE_ERR_IO); rfile_error(NULL)
 * and rfile_close(NULL) handle that.
 */
int rfile_open(const char *path, struct rfile_reader **out);

/* The file header as read (header_size is the file's; extra bytes skipped). */
const struct rhea_file_header *rfile_header(const struct rfile_reader *r);

/*
 * Read the next chunk.  RFILE_OK with *payload and *len set to the decompressed
 * payload (8-byte aligned, valid until the next call or rfile_close),
 * RFILE_END_OF_FILE at a clean chunk boundary, or an error status.  Chunks of
 * unknown type are skipped.  Errors are sticky; END_OF_FILE is not (a
 * recording still being written may grow).
 */
int rfile_next_chunk(struct rfile_reader *r, const void **payload,
		     size_t *len);

/*
 * One line for the user about the last error, without the file name, e.g.
 * "truncated: chunk 12 at byte 40960 is cut short (3000 of 8224 bytes)".
 * "" when there was none.
 */
const char *rfile_error(const struct rfile_reader *r);

/* Byte offset of the next chunk: after an error, of the bad chunk. */
uint64_t rfile_offset(const struct rfile_reader *r);

/* Index (= sequence number) of the next chunk. */
uint64_t rfile_chunk_index(const struct rfile_reader *r);

/* Close the file and free the reader.  NULL is fine. */
void rfile_close(struct rfile_reader *r);

/*
 * Iterate the entries of a payload with bounds checks.  Returns 1 and sets
 * *e to the entry at *off (and advances *off past it), 0 at the end, -1 on a
 * malformed entry (size < 8, not a multiple of 8, past the end, or payload
 * + *off not 8-byte aligned); *off is left alone then.
 */
int rfile_next_entry(const void *payload, size_t len, size_t *off,
		     const struct rhea_entry **e);

/*
 * Check that an entry (as returned by rfile_next_entry) of a known kind is big enough for its struct and for
 * the variable part its counts announce (MODULE path NUL-terminated inside
 * the entry, NODES/SITES arrays inside, META ending with a NUL).  Returns 0
 * when the fields can be used, 1 for an unknown kind (skip it), -1 when
 * malformed.  Entries may be larger than their struct (fields appended by
 * newer writers): that is accepted.
 */
int rfile_entry_check(const struct rhea_entry *e);

#endif

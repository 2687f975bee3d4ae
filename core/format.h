/*
 * format.h - the .rhea recording format, shared by the agent (writer) and the
 * CLI (reader).  doc/format.md is the prose version of this file.
 *
 * A recording is a 72-byte file header followed by self-describing chunks.
 * Each chunk has a 32-byte header (magic, type, compression, sizes, CRC32 of
 * the stored bytes, CRC32 of the header itself, sequence number) and a
 * payload that is a sequence of entries.  Every entry starts with an 8-byte header {kind, flags, size}; a
 * reader skips kinds it does not know by their size, so new entry kinds do not
 * need a new major version.  Everything is little-endian, entries are 8-byte
 * aligned.
 *
 * Why fixed-size binary entries and not varints: the agent writes them from
 * hooks and signal handlers, where a memcpy of a struct is the cheapest and
 * simplest thing that can be made async-signal-safe; zstd then removes the
 * redundancy (measured in `make bench`).
 *
 * The chunk stream has no index and no trailer that a reader needs: a
 * recording cut short (SIGKILL, full disk) is readable up to its last whole
 * chunk.  A clean end is marked by an END entry.
 */
#ifndef RHEA_FORMAT_H
#define RHEA_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RHEA_MAGIC "RHEAREC"          /* 8 bytes with the NUL */
#define RHEA_VERSION 1
#define RHEA_CHUNK_MAGIC 0x4b434852u  /* "RHCK" little-endian */
#define RHEA_CLOCK_MONOTONIC 1        /* all timestamps: CLOCK_MONOTONIC ns */

struct rhea_file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size; /* sizeof(struct rhea_file_header) when written */
	uint32_t clock;       /* RHEA_CLOCK_MONOTONIC */
	uint32_t pid;
	uint32_t ppid;
	uint32_t flags;
	uint64_t start_ns;          /* monotonic time the agent started */
	uint64_t start_realtime_ns; /* wall-clock time at start_ns */
	uint64_t interval_ns;       /* capture interval per thread */
	uint32_t max_depth;
	uint32_t reserved[3];
};

enum rhea_chunk_type {
	RHEA_CHUNK_EVENTS = 1, /* payload: entries */
};

enum rhea_chunk_flags {
	RHEA_CHUNK_ZSTD = 1, /* payload stored zstd-compressed */
};

struct rhea_chunk_header {
	uint32_t magic;       /* RHEA_CHUNK_MAGIC */
	uint16_t type;        /* enum rhea_chunk_type */
	uint16_t flags;       /* enum rhea_chunk_flags */
	uint32_t raw_size;    /* payload size once decompressed */
	uint32_t stored_size; /* bytes that follow this header */
	uint32_t crc;         /* zlib crc32 of the stored bytes */
	uint32_t header_crc;  /* zlib crc32 of these 32 bytes, this field 0 */
	uint64_t seq; /* chunk sequence number, from 0 */
};

/* Largest payload a chunk may carry (reader's sanity bound). */
#define RHEA_CHUNK_MAX_RAW (64u << 20)

enum rhea_entry_kind {
	RHEA_E_SAMPLE = 1,  /* struct rhea_sample */
	RHEA_E_THREAD = 2,  /* struct rhea_thread */
	RHEA_E_MODULE = 3,  /* struct rhea_module + path */
	RHEA_E_NODES = 4,   /* struct rhea_nodes + nodes */
	RHEA_E_SITES = 5,   /* struct rhea_sites + sites */
	RHEA_E_META = 6,    /* struct rhea_meta + "key\0value\0" */
	RHEA_E_END = 7,     /* struct rhea_end */
	RHEA_E_STATS = 8,   /* struct rhea_stats (periodic; last one wins) */
	RHEA_E_PACKED = 9,  /* struct rhea_packed: samples of one thread, varint deltas (read only) */
	RHEA_E_PACKED2 = 10, /* struct rhea_packed2: samples of one thread, us times, change bits */
	RHEA_E_PACKED3 = 11, /* struct rhea_packed2, flags = shift: PACKED2 with counters in steps */
	RHEA_E_PACKED4 = 12, /* struct rhea_packed2, flags as PACKED3's: range coded */
	RHEA_E_RELEASE = 13, /* struct rhea_release: a process-shared object released */
	RHEA_E_NODES2 = 14, /* struct rhea_nodes2: NODES coded small */
	RHEA_E_SHORTS = 15, /* struct rhea_shorts + shorts: hooked calls too short for a BLOCK */
};

struct rhea_entry {
	uint16_t kind;  /* enum rhea_entry_kind */
	uint16_t flags; /* kind-specific */
	uint32_t size;  /* whole entry, header included, multiple of 8 */
};

/* Entries of a thread's samples that core/packed.c decodes. */
static inline int rhea_kind_packed(uint16_t kind)
{
	return kind == RHEA_E_PACKED || kind == RHEA_E_PACKED2 || kind == RHEA_E_PACKED3 || kind == RHEA_E_PACKED4;
}

/* Thread counters, cumulative since the thread started. */
struct rhea_counters {
	uint64_t cpu_ns;      /* CLOCK_THREAD_CPUTIME_ID */
	uint64_t alloc_count; /* allocations made (every one counted) */
	uint64_t alloc_bytes; /* bytes requested by those allocations */
	uint32_t minflt, majflt;
	uint32_t nvcsw, nivcsw;
};

enum rhea_sample_flags {
	RHEA_S_BLOCK = 1,      /* a blocking call: begin = call, end = return */
	RHEA_S_TRUNCATED = 2,  /* stack deeper than max_depth, outer frames cut */
	RHEA_S_ASYNC = 4,      /* taken by the sampler, not in a hook */
	RHEA_S_LEAF_EXACT = 8, /* leaf address is an exact pc, not a return-1 */
	RHEA_S_NOSTACK = 16,   /* unwinding failed or stack table full */
	RHEA_S_WAKER = 32,     /* reserved: a release sample (not written by v1) */
	RHEA_S_AT_CALL = 64,   /* BLOCK: c_begin was read when the call began */
	RHEA_S_SHARED = 128,   /* BLOCK: on a process-shared object (its releaser may be another process's) */
};

/*
 * One capture, or several identical consecutive captures of one thread merged
 * (same stack, trigger and message id): then begin/end and the two counter
 * sets are those of the first and the last capture.
 */
struct rhea_sample {
	struct rhea_entry h; /* flags: enum rhea_sample_flags */
	uint32_t tid;
	uint32_t stack;   /* leaf node id in the call-stack table, 0 = none */
	uint16_t trigger; /* enum rhea_fn */
	uint16_t merged;  /* how many captures this entry stands for - 1 (sat.) */
	uint32_t msgid;   /* per-thread event-loop message id */
	uint64_t begin_ns, end_ns;
	uint64_t object;     /* BLOCK, WAKER: lock address, fd, ... (0 if none);
				sampler: CPU periods it stands for; forced: syscall */
	uint32_t waker_tid;  /* BLOCK: thread that released/signalled, 0 unknown */
	uint32_t owner_tid;  /* BLOCK: owner of the lock when the wait began */
	uint32_t waker_stack; /* BLOCK: the releaser's stack (leaf node id) at
				 the release that ended the wait, 0 unknown */
	uint32_t reserved;
	uint64_t release_ns;  /* BLOCK: when that release happened, 0 unknown */
	struct rhea_counters c_begin, c_end;
};

enum rhea_thread_event {
	RHEA_T_START = 1, /* first seen (or created) */
	RHEA_T_NAME = 2,  /* name set */
	RHEA_T_EXIT = 3,
};

struct rhea_thread {
	struct rhea_entry h; /* flags: enum rhea_thread_event */
	uint32_t tid;
	uint32_t parent_tid; /* START: creating thread, 0 unknown */
	uint64_t time_ns;
	char name[16]; /* NUL-terminated, as the kernel's comm */
};

struct rhea_module {
	struct rhea_entry h; /* flags: 1 = loaded, 2 = unloaded */
	uint64_t time_ns;
	uint64_t bias;     /* load bias: runtime address = ELF vaddr + bias */
	uint64_t lo, hi;   /* runtime address range of executable segments */
	uint32_t build_id_len;
	uint8_t build_id[36];
	uint32_t path_len; /* bytes of path that follow, NUL included */
	uint32_t pad;      /* 0 */
	/* char path[path_len], padded to 8 */
};

struct rhea_node {
	uint64_t addr;   /* return address - 1, or exact pc for the leaf */
	uint32_t parent; /* node id, 0 = root */
	uint32_t pad;
};

/* Nodes first_id .. first_id + count - 1 of the call-stack table. */
struct rhea_nodes {
	struct rhea_entry h;
	uint32_t first_id;
	uint32_t count;
	/* struct rhea_node nodes[count] */
};

/* The same nodes coded small (core/nodepack.c, doc/format.md): coded_len
 * bytes of varints follow, padded to 8. */
struct rhea_nodes2 {
	struct rhea_entry h;
	uint32_t first_id;
	uint32_t count;
	uint32_t naddrs;    /* distinct addresses */
	uint32_t coded_len; /* bytes that follow */
};

/*
 * Exact allocation counts by call site (the caller of malloc/new...),
 * cumulative for one thread: a later entry for the same (serial, pc)
 * replaces an earlier one (counts only grow, so a reader may take the max).
 */
struct rhea_site {
	uint64_t pc; /* return address - 1 in the caller */
	uint64_t count, bytes;
	uint32_t tid;
	uint32_t serial; /* unique per thread in the recording (tids recycle) */
};

struct rhea_sites {
	struct rhea_entry h;
	uint32_t count;
	uint32_t pad;
	/* struct rhea_site sites[count] */
};

/*
 * The hooked calls that may block (I/O, waits, contended locks) but
 * returned before min_block, so that no BLOCK sample has them: per thread
 * and function, how many and the time they took (an estimate while the
 * ticker ticks: doc/format.md).  Cumulative like the sites: a later entry
 * for the same (serial, fn) replaces an earlier one.
 */
struct rhea_short {
	uint32_t tid;
	uint32_t serial;
	uint16_t fn; /* enum rhea_fn */
	uint16_t pad16;
	uint32_t pad32;
	uint64_t count; /* calls */
	uint64_t ns;    /* the time in them */
};

struct rhea_shorts {
	struct rhea_entry h;
	uint32_t count;
	uint32_t pad;
	/* struct rhea_short shorts[count] */
};

/*
 * Samples of one thread, encoded by core/packed.c: each field a LEB128
 * varint of its difference to the previous sample's (doc/format.md).
 * Decodes to exactly the struct rhea_sample entries the agent made.
 */
struct rhea_packed {
	struct rhea_entry h;
	uint32_t tid;
	uint32_t count;   /* samples that follow */
	uint64_t base_ns; /* the first sample's begin is relative to this */
	/* uint8_t data[], zero-padded to 8 */
};

/*
 * Samples of one thread, encoded by core/packed.c (what writers write since
 * PACKED, which is still read): times and CPU time in microseconds
 * (floor(ns / 1000)), a control stream (a header byte of what changed, the
 * stack as a move-to-front position, counter masks) then a value stream
 * (time and counter differences to what the samples before predict);
 * doc/format.md has the rules.  Decodes to the struct rhea_sample entries
 * the agent made, times and CPU time rounded down to the microsecond.
 */
struct rhea_packed2 {
	struct rhea_entry h;
	uint32_t tid;
	uint32_t count;   /* samples that follow */
	uint64_t base_us; /* the first sample's begin (us) is relative to this */
	/* varint control_size, uint8_t control[control_size], then the
	 * value stream, zero-padded to 8 */
};

struct rhea_meta {
	struct rhea_entry h;
	/* "key\0value\0" pairs, padded with NULs to 8 */
};

/* The size of a META entry of a key of klen bytes and a value of vlen
 * (their NULs not counted), padded to 8. */
static inline size_t rhea_meta_size(size_t klen, size_t vlen)
{
	return (sizeof(struct rhea_meta) + klen + 1 + vlen + 1 + 7) & ~(size_t)7;
}

/* That entry, written at p (rhea_meta_size bytes): the agent's, rhea
 * record's and the compactor's META entries are all made here. */
static inline void rhea_meta_put(void *p, const char *key, size_t klen, const char *value, size_t vlen)
{
	size_t size = rhea_meta_size(klen, vlen);
	memset(p, 0, size);
	struct rhea_meta *m = p;
	m->h.kind = RHEA_E_META;
	m->h.size = (uint32_t)size;
	memcpy(m + 1, key, klen);
	memcpy((char *)(m + 1) + klen + 1, value, vlen);
}

/* Agent-side statistics: errors are data, not crashes. */
struct rhea_stats {
	struct rhea_entry h;
	uint64_t time_ns;
	uint64_t samples;      /* sample entries emitted */
	uint64_t captures;     /* captures taken (merged ones included) */
	uint64_t dropped;      /* entries lost: buffers full */
	uint64_t truncated;    /* stacks cut at max_depth */
	uint64_t unwind_errors;
	uint64_t stack_full;   /* stack table full */
	uint64_t write_errors; /* failed writes to the recording */
	uint64_t bytes_raw, bytes_stored;
	uint64_t threads;
	uint64_t waits_unattributed; /* waits the wait table could not follow */
	uint64_t agent_cpu_ns; /* CPU time of the agent's own threads (0: unknown) */
	uint64_t ticker_wakes;    /* the ticker thread's wake-ups (0: unknown) */
	uint64_t ticker_coast_ns; /* time the ticker spent coasting */
	uint64_t sample_blocked;  /* threads seen blocking the sampling signal */
	uint64_t cfi_build_ns;    /* program threads' time building unwind tables */
};

enum rhea_end_reason {
	RHEA_END_EXIT = 1,   /* normal exit; status = exit status */
	RHEA_END_SIGNAL = 2, /* fatal signal; status = signal number */
	RHEA_END_EXEC = 3,   /* the process exec'ed another program */
	RHEA_END_DETACH = 4, /* tracing stopped, process goes on */
	RHEA_END_DISABLED = 5, /* agent switched itself off; status = errno */
	RHEA_END_GONE = 6,   /* (OUTSIDE only) the process ended while rhea attach
				recorded it, without the agent seeing it (SIGKILL);
				how, its parent alone could tell: status 0 */
	RHEA_END_SANDBOXED = 7, /* the program put every thread under a seccomp
				   filter: tracing stopped, the process goes on */
};

/* END entry flags */
enum rhea_end_flags {
	/* Written by rhea record, not by the agent: the process ended without
	 * the agent seeing it (a raw exit_group, as Go's runtime makes, or
	 * SIGKILL), so what the agent had not written yet is missing; the
	 * reason and status are what waitpid said. */
	RHEA_END_F_OUTSIDE = 1,
	/* With OUTSIDE: before this END rhea record appended what the agent
	 * had not written yet, read from its buffers' memory after the
	 * process died (core/salvage.h): nothing is missing but what a
	 * thread was writing at that instant. */
	RHEA_END_F_SALVAGED = 2,
};

struct rhea_end {
	struct rhea_entry h;
	uint64_t time_ns;
	uint32_t reason; /* enum rhea_end_reason */
	int32_t status;
};

/* A release of a process-shared object someone may wait on (a sem_post
 * while the semaphore counts waiters, an unlock of a mutex with sleepers, a
 * signal of a condition with waiters): the waiter may be another process,
 * whose SHARED wait a reader of both recordings pairs with it. */
struct rhea_release {
	struct rhea_entry h;
	uint32_t tid;
	uint32_t stack;   /* the releaser's stack, 0 unknown */
	uint64_t object;  /* its address in the releasing process */
	uint64_t time_ns; /* right before the release */
	uint16_t trigger; /* enum rhea_fn: sem_post, pthread_mutex_unlock... */
	uint16_t pad16;
	uint32_t pad32;
};

#endif

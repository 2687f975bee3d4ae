/*
 * buf.h - the agent's record buffers: a pool of fixed-size chunks filled
 * through a few shards, drained by the writer thread.
 */
#ifndef RHEA_BUF_H
#define RHEA_BUF_H

#include <stddef.h>
#include <stdint.h>

/* The states and the chunk's bytes are also core/salvage.h's (rhea record
 * reads them after a SIGKILL).  DRAINED: handed to the drain function but
 * kept until buf_release_drained() (when keep_drained is set): its entries
 * are in the file only once the writer's round has written them. */
enum { BUF_FREE = 0, BUF_FILLING = 1, BUF_FULL = 2, BUF_WRITING = 3, BUF_DRAINED = 4 };

struct buf_chunk {
	uint32_t state; /* atomic, BUF_* */
	uint32_t used;  /* bytes of data filled (owner shard only) */
	uint64_t seq;   /* order in which chunks were sealed */
	char *data;
};

#define BUF_MAX_SHARDS 64

struct buf_shard {
	uint32_t lock; /* atomic; only ever try-locked */
	struct buf_chunk *cur;
	char pad[64 - sizeof(uint32_t) - sizeof(void *)];
};

struct buf {
	struct buf_chunk *chunks;
	uint32_t nchunks;
	uint32_t chunk_size;
	uint32_t nshards;
	uint8_t owned;        /* the mapping is buf_init's */
	uint8_t keep_drained; /* drained chunks wait for buf_release_drained */
	uint16_t pad;
	uint64_t seq;     /* atomic: next seal sequence number */
	uint64_t dropped; /* atomic: entries lost (all shards busy or no chunk) */
	uint64_t emitted; /* atomic: entries stored */
	uint32_t nfull;   /* atomic: chunks waiting for the writer */
	uint32_t wake;    /* futex word the writer sleeps on */
	struct buf_shard shards[BUF_MAX_SHARDS];
};

/* Map nchunks chunks of chunk_size bytes, fed through nshards shards. */
int buf_init(struct buf *b, uint32_t nchunks, uint32_t chunk_size, uint32_t nshards);
/* The same in memory the caller provides (buf_bytes of it, zeroed). */
size_t buf_bytes(uint32_t nchunks, uint32_t chunk_size);
int buf_init_at(struct buf *b, void *mem, uint32_t nchunks, uint32_t chunk_size, uint32_t nshards);
void buf_destroy(struct buf *b);
/* Wake the writer thread for a round now (async-signal-safe). */
void buf_wake_writer(struct buf *b);

/*
 * Store one entry (len <= chunk_size, multiple of 8).  Never blocks: it
 * try-locks the shard of `tid`, then the others; when all are busy or no
 * chunk is free the entry is dropped and counted.  Async-signal-safe.
 * Returns 0 or -1 (dropped).
 */
int buf_emit(struct buf *b, uint32_t tid, const void *entry, size_t len);

/* Seal the chunks being filled so that the writer takes them.  Waits for a
 * busy shard at most spin_ns.  Async-signal-safe. */
void buf_seal_all(struct buf *b, uint64_t spin_ns);

/*
 * Hand every full chunk to fn in seal order, then free it.  Only one thread
 * may drain at a time (the writer, or the exit/crash path that took over).
 * Returns the first non-zero value fn returned, or 0.
 */
int buf_drain(struct buf *b, int (*fn)(void *arg, const void *data, size_t len), void *arg);

/* DRAINED chunks become free (keep_drained: after the writer's round). */
void buf_release_drained(struct buf *b);

/* After fork: drop everything the parent had buffered, unlock all shards. */
void buf_reset(struct buf *b);

#endif

/*
 * salvage.h - the agent's memory that outlives a SIGKILL.
 *
 * The agent's writer thread empties its buffers into the file every 100 ms.
 * A program killed with SIGKILL (kill -9, the OOM killer, a supervisor's
 * timeout) dies between two flushes: its last moments, the part most worth
 * seeing, would be lost with its memory.  So under `rhea record` the
 * buffers that hold them live in a memfd that rhea record created and that
 * the agent maps (opened through /proc/<rhea record's pid>/fd/<n>): the record buffers' chunks, the call-stack table's
 * nodes, every thread's pending (merged) sample and allocation sites.  The memfd's pages
 * belong to the memfd, not to the dying process; rhea record, still holding
 * its descriptor, reads them once the program is gone and appends what the
 * file lacks before the end it adds (cli/cmd_record.c).  The processes it
 * did not start (forked children, what they exec) make memfds of their own
 * and send them to rhea record over the unix socket RHEA_SALVAGE_SOCK
 * names; under rhea attach the agent makes one and rhea attach opens it
 * through /proc (cli/recover.c).
 *
 * Layout: this header at offset 0, then the areas it points to.  Addresses
 * are the agent's (`base` is where the region is mapped in the program); a
 * reader subtracts `base`.  Everything is written by the agent only; the
 * reader reads a frozen region (the program is dead), so torn updates are
 * the only hazard: each area says how to tell a consistent part from the
 * rest (chunk `used` advances after its bytes are written, a pending sample
 * being changed is marked busy, a node is marked ready last).
 */
#ifndef RHEA_SALVAGE_H
#define RHEA_SALVAGE_H

#include <stdint.h>

#include "format.h"

#define RHEA_SALVAGE_MAGIC 0x766c617361656872ull /* "rheasalv", little-endian */
#define RHEA_SALVAGE_VERSION 3 /* 2: the threads' allocation sites; 3: the file's inode */
#define RHEA_SALVAGE_ENV "RHEA_SALVAGE" /* /proc/<rhea record's pid>/fd/<n> */
#define RHEA_SALVAGE_NAME "rhea-salvage" /* the memfd's name */
/* rhea record's abstract unix socket (the name without its leading NUL):
 * the other processes' agents send it their memfds (SCM_RIGHTS, with one
 * byte of data), and how the children they reaped ended (below). */
#define RHEA_SALVAGE_SOCK_ENV "RHEA_SALVAGE_SOCK"

/* A process reaped a child (waitpid, wait, wait3, wait4, waitid): how it
 * ended, which only the parent learns.  If that child was killed before it
 * could write its end (SIGKILL, a raw exit_group), rhea record finishes its
 * recording with this status instead of `gone`.  One SEQPACKET message of
 * exactly this size; sent after the child's memfd, which the child sent
 * before it died, so the collector has the memfd when this arrives. */
#define RHEA_SALVAGE_REAPED_MAGIC 0x50524852u /* "RHRP" */
struct rhea_salvage_reaped {
	uint32_t magic;
	int32_t pid;    /* the child */
	int32_t status; /* as waitpid gives it: exited or killed */
	uint32_t reserved;
};

/* An agent that may not create its recording where asked (its process
 * gave up root and exec'ed: gosu, setpriv, su-exec; or it was forked in a
 * chroot its parent entered) asks the keeper, which runs as rhea record's
 * user outside any jail, to create it: one SEQPACKET message of exactly
 * this size, path NUL-terminated, one of the names that process's
 * recordings take (the keeper refuses any other, and a process that is
 * not rhea record's descendant or not the one it names).  The answer, on
 * the same connection: rhea_salvage_opened, err 0 with the new file's
 * descriptor (opened O_WRONLY, created O_EXCL) attached, else an errno
 * (EAGAIN: rhea record has not named its output yet: ask again). */
#define RHEA_SALVAGE_OPEN_MAGIC 0x504f4852u   /* "RHOP" */
#define RHEA_SALVAGE_OPENED_MAGIC 0x4b4f4852u /* "RHOK" */
struct rhea_salvage_open {
	uint32_t magic;
	int32_t pid; /* the asking process */
	char path[4096];
};
struct rhea_salvage_opened {
	uint32_t magic;
	int32_t err;
};

enum rhea_salvage_state {
	RHEA_SALVAGE_UNSET = 0,  /* not (yet) set up */
	RHEA_SALVAGE_ACTIVE = 1, /* recording: what is here may be missing from the file */
	RHEA_SALVAGE_DONE = 2,   /* the agent wrote the end itself: nothing to add */
	RHEA_SALVAGE_FAILED = 3, /* the agent stopped, unable to write the file
				    (write_errno says why): what is here may be
				    missing from it, and the end is */
};

/* A record buffer chunk (agent/buf.h's struct buf_chunk, the same bytes). */
enum { RHEA_SALVAGE_CHUNK_FREE = 0, RHEA_SALVAGE_CHUNK_FILLING = 1, RHEA_SALVAGE_CHUNK_FULL = 2,
       RHEA_SALVAGE_CHUNK_WRITING = 3, RHEA_SALVAGE_CHUNK_DRAINED = 4 };
struct rhea_salvage_chunk {
	uint32_t state; /* RHEA_SALVAGE_CHUNK_* */
	uint32_t used;  /* bytes of whole entries at data */
	uint64_t seq;
	uint64_t data; /* address */
};

/* A call-stack table node (agent/stacktab.h's struct stacktab_node). */
struct rhea_salvage_node {
	uint64_t addr;
	uint32_t parent;
	uint32_t ready; /* addr and parent are written */
};

/* A thread slot's pending sample: a run of identical captures that waits
 * for the next different one (agent/capture.c). */
struct rhea_salvage_pend {
	uint32_t busy;  /* being changed: the sample may be half-updated */
	uint32_t valid; /* s holds a sample not yet in the buffers */
	struct rhea_sample s;
};

/*
 * A thread slot's allocation sites: the table the thread itself counts in
 * (agent/capture.c, site_add), kept here for the first
 * RHEA_SALVAGE_SITE_THREADS slots of the registry (the rest count in
 * their slot), so that a program killed (the OOM killer above all) leaves
 * its sites as they were, not as the last snapshot the agent wrote, up to
 * a second before.  Only the owning thread writes its table, without
 * marks: a table read after a SIGKILL may have one slot's count ahead of
 * its bytes, or a slot filled that used[] does not list yet (not read).
 * A site's latest run of allocations is counted in the thread's TLS until
 * CLOCK_RUN (128) of them or another site come (agent.h): that much is
 * not here.  tid 0: the slot has no thread.
 */
#define RHEA_SALVAGE_SITES 512 /* slots per table, a power of two */
#define RHEA_SALVAGE_SITE_THREADS 256
struct rhea_salvage_site {
	uint64_t pc, count, bytes; /* pc 0: a free slot */
};
struct rhea_salvage_sites {
	uint32_t tid;    /* the thread counting here, 0 none */
	uint32_t serial; /* its serial (struct rhea_site's) */
	uint32_t nused;  /* slots in use: their indexes are used[0..nused) */
	uint32_t pad;
	uint64_t overflow, overflow_bytes; /* allocations that found no slot */
	struct rhea_salvage_site site[RHEA_SALVAGE_SITES];
	uint16_t used[RHEA_SALVAGE_SITES];
};

struct rhea_salvage {
	uint64_t magic;  /* RHEA_SALVAGE_MAGIC, written last at set-up */
	uint32_t version;
	uint32_t state;  /* enum rhea_salvage_state */
	int32_t pid;     /* the process the region belongs to (kept across exec) */
	uint32_t header_size;
	uint64_t base;   /* the region's address in that process */
	uint64_t size;   /* bytes of the region */
	/* the record buffers: nchunks descriptors at `chunks` */
	uint64_t chunks;
	uint32_t nchunks, chunk_size;
	/* the call-stack table: max_nodes nodes at `nodes`, node 0 unused */
	uint64_t nodes;
	uint32_t max_nodes;
	uint32_t nodes_in_file; /* node ids below this are in the file */
	/* pending samples: npend at `pend` */
	uint64_t pend;
	uint32_t npend;
	/* The writer's rounds: a round drains chunks (WRITING, then DRAINED)
	 * and writes them to the file at its end.  in_round: a round began at
	 * file offset round_start and has not finished: its DRAINED chunks are
	 * in the file only if the file grew past round_start. */
	uint32_t in_round;
	uint64_t round_start;
	/* allocation sites: nsites tables at `sites`, one per registry slot
	 * from slot 0 */
	uint64_t sites;
	uint32_t nsites;
	int32_t write_errno; /* RHEA_SALVAGE_FAILED: the error that stopped it */
	/* The recording these belong to; "" until the file is named (the
	 * memory is published, and a forked child's sent, before it is): its
	 * first byte is stored last, so a reader never sees part of a path.
	 * The name is stored before the file takes it (linkat), so that a
	 * process killed just after leaves one its region names: it may be
	 * one the file never took, or another's (EEXIST, the next name
	 * tried), so a reader takes it only where the file there is
	 * output_dev/output_ino.  (Stored after, a forked child SIGKILLed in
	 * between left a file with its header alone, which nobody could end:
	 * twice in make test on 2026-12-07, once in CI, of 40 children killed
	 * moments after their first capture.) */
	uint64_t output_dev, output_ino;
	char output[4096];
};

#endif

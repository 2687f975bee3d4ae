/*
 * cfi.h - an ELF file's call frame information compiled into a small sorted
 * table that a signal handler can search (x86-64 only).  See cfi.c for the
 * design; unwind.c is the consumer.
 *
 * A row is valid from its pc up to the next row's pc (the last one up to
 * table->hi).  Addresses are ELF virtual addresses as written in the file:
 * subtract the module's load bias before a lookup.  The return address is
 * always at CFA-8 (rows where it is not are CFI_NONE).
 */
#ifndef RHEA_CFI_H
#define RHEA_CFI_H

#include <stddef.h>
#include <stdint.h>

enum cfi_kind {
	CFI_NONE = 0,  /* no usable information for these addresses */
	CFI_RSP,       /* CFA = rsp + cfa_off */
	CFI_RBP,       /* CFA = rbp + cfa_off */
	CFI_PLT,       /* lazy PLT entry: CFA = rsp + 8 + ((rip & 15) >= cfa_off
	                * ? 8 : 0); cfa_off holds the threshold of binutils'
	                * expression: 11 for the classic PLT, 9 with IBT */
	CFI_OUTERMOST, /* return address undefined (_start, thread start): stop */
};

struct cfi_row {
	uint32_t pc;     /* ELF vaddr (before load bias) where this row starts */
	uint8_t kind;    /* enum cfi_kind */
	uint8_t pad;
	int16_t rbp_off; /* 0: rbp unchanged; else rbp saved at CFA + rbp_off */
	int32_t cfa_off;
};

struct cfi_table {
	uint64_t lo, hi;        /* vaddr range covered: [lo, hi) */
	uint32_t n;             /* rows */
	uint32_t mapped_size;   /* bytes of the mapping holding this table */
	uint32_t n_fde;         /* FDEs compiled in */
	uint32_t n_unsupported; /* CFI rows turned into CFI_NONE (expressions,
	                         * return address not at CFA-8, ...) */
	uint32_t idx_shift;     /* bucket k covers [lo + (k << idx_shift), ...) */
	uint32_t idx_n;         /* buckets; idx_n + 1 words follow the rows */
	struct cfi_row rows[];  /* then uint32_t idx[idx_n + 1]: idx[k] = the
	                         * last row starting at or below bucket k's
	                         * start (idx[idx_n] = n - 1) */
};

/* Bytes of a table with its rows and bucket index (what a cache stores). */
static inline size_t cfi_table_bytes(const struct cfi_table *t)
{
	return sizeof(*t) + (size_t)t->n * sizeof(struct cfi_row) +
	       ((size_t)t->idx_n + 1) * sizeof(uint32_t);
}

static inline const uint32_t *cfi_index(const struct cfi_table *t)
{
	return (const uint32_t *)(const void *)&t->rows[t->n];
}

/* Compile the CFI of the ELF file at path (.eh_frame, plus .debug_frame for
 * code the former does not cover).  0 and *out set, or -errno: -ENOENT and
 * friends from open, -ENOEXEC for a non-x86-64-ELF file or one without CFI,
 * -EOVERFLOW for code above 4 GiB, -ENOMEM.  Normal context only. */
int cfi_build(const char *path, struct cfi_table **out);

/* The same from an open descriptor (not closed, offset not used). */
int cfi_build_fd(int fd, struct cfi_table **out);

/* The same for this process's vDSO (its image in memory). */
int cfi_build_vdso(struct cfi_table **out);

/* The row covering vaddr, NULL outside [t->lo, t->hi) or when t is NULL.
 * Bucket index, then a binary search among a few rows; async-signal-safe. */
const struct cfi_row *cfi_lookup(const struct cfi_table *t, uint64_t vaddr);

/* Unmap a table from cfi_build (NULL is fine). */
void cfi_free(struct cfi_table *t);

/* cficache.c: compiled tables on disk, by build-id.  The settings
 * (RHEA_CFI_CACHE, RHEA_CACHE_DIR...) are read through get (default
 * getenv).  A table loaded is mapped read-only for good; cficache_has only
 * says whether a valid one is there (rhea attach: cli/cfiprebuild.c). */
void cficache_settings(const char *(*get)(const char *));
struct cfi_table *cficache_load(const uint8_t *build_id, uint32_t len);
int cficache_has(const uint8_t *build_id, uint32_t len);
int cficache_usable(void); /* a cache directory is there to use */
/* Where the table of build_id is (or would be) kept: 0, or -1 (no cache). */
int cficache_file(const uint8_t *build_id, uint32_t len, char *out, size_t cap);
void cficache_store(const uint8_t *build_id, uint32_t len, const struct cfi_table *t);

/* The [lo, hi) vaddr ranges of the .eh_frame FDEs of an ELF file, sorted:
 * the functions of a stripped binary.  *out is malloc'ed.  0 or -errno. */
struct cfi_range {
	uint64_t lo, hi;
};
int cfi_fde_ranges(const char *path, struct cfi_range **out, size_t *n);

#endif

/*
 * cfi.c - compile an ELF file's call frame information into a lookup table.
 *
 * What.  Debian builds its binaries without frame pointers, so walking a
 * stack needs the DWARF CFI that the compiler leaves in .eh_frame (and, for
 * some hand-built or debug binaries, .debug_frame).  CFI is a byte-code
 * program per function; interpreting it inside a malloc hook or a signal
 * handler would be slow and unsafe.  On x86-64 nearly every row of every
 * program reduces to "CFA = rsp or rbp + constant, return address at CFA-8,
 * rbp unchanged or saved at CFA + constant", so this file turns the CFI of a
 * whole file into a sorted array of such rows, once, in normal context; the
 * unwinder (unwind.c) then does a binary search per frame.  The same idea as
 * the compact tables of the Parca and Elastic eBPF profilers.
 *
 * Design.
 *  - elfutils' libdw does all the DWARF work.  dwarf_next_cfi enumerates the
 *    FDEs, dwarf_cfi_addrframe evaluates the CFA program at an address, and
 *    dwarf_frame_info / dwarf_frame_cfa / dwarf_frame_register describe the
 *    result.  We translate each answer into a struct cfi_row and never run a
 *    CFA program ourselves.  The only bytes decoded here are an FDE's two
 *    pointer-encoded fields (initial location and range, with the CIE's 'R'
 *    encoding), because libdw has no public accessor for an FDE's range.
 *  - Rows are found by stepping: evaluate at the FDE's first address,
 *    dwarf_frame_info says where that row ends, evaluate there, and so on.
 *    Each call re-executes the FDE's program from its start, so the cost is
 *    quadratic in the rows of one FDE; but FDEs are short (glibc 2.36: 25212
 *    rows in 3713 FDEs) and libc compiles in 8-16 ms, python3.11 (61382
 *    rows, 10221 FDEs) in 21-46 ms, on a loaded 2-CPU VM.  Not worth a
 *    CFA-program interpreter of our own.
 *  - What does not fit the row format becomes CFI_NONE and is counted in
 *    n_unsupported: CFA or rbp given by a DWARF expression (except the
 *    standard lazy-PLT expression, kept as CFI_PLT), return address not at
 *    CFA-8, rbp in another register, signal frames ('S' augmentation: the
 *    unwinder recognises the sigreturn trampoline by its code instead).
 *    In glibc 2.36 that is 7 rows: the tails of longjmp/__longjmp_chk and
 *    setcontext (CFA in rdi), vfork (return address in rdi) and
 *    __restore_rt.  Return address undefined (_start, clone's child)
 *    becomes CFI_OUTERMOST.
 *  - .eh_frame wins; .debug_frame only fills FDE ranges the former lacks.
 *    FDEs outside the executable PT_LOAD segments are dropped (.debug_frame
 *    keeps FDEs of discarded COMDAT/gc'ed sections relocated to address 0).
 *    Gaps between FDEs get a CFI_NONE row; equal neighbours are merged.
 *  - The table is one anonymous mapping, made read-only once filled: the
 *    agent reads it from signal handlers, and it must outlive a program that
 *    corrupts its own heap.  Building uses malloc and libdw freely.
 *  - libdw (and libelf, which it brings) is loaded on first use, with
 *    dlopen, not linked into the agent: the tables are cached by build-id
 *    (cficache.c), so a traced process whose libraries were seen before
 *    never needs it, and loading it with its own dependencies (liblzma,
 *    libbz2) at start cost every traced process 0.27 ms (300 runs of
 *    /bin/true under a preloaded library linked with them: 0.30 s, without
 *    them 0.22 s).  Where it cannot be loaded, building fails with
 *    -ELIBACC (the caller says so) and those stacks end early.
 *
 * Limits.  x86-64 ELF64 only.  Row addresses are 32 bits: code above 4 GiB
 * (virtual address as in the file) is refused with -EOVERFLOW.  The file
 * needs section headers (.eh_frame is found by name; sstrip'ed files are
 * refused).  Separate debug files (.gnu_debuglink) are not consulted.  An
 * FDE that libdw cannot evaluate leaves a CFI_NONE gap from that row on.
 */
#include "cfi.h"
#include "dllib.h"
#include "sys.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* libdw and libelf, as dlopen found them (see the top). */
#define DW_FUNCS(X)                                                              \
	X(dwarf_begin_elf) X(dwarf_cfi_addrframe) X(dwarf_cfi_end) X(dwarf_end)  \
	X(dwarf_frame_cfa) X(dwarf_frame_info) X(dwarf_frame_register)           \
	X(dwarf_getcfi) X(dwarf_getcfi_elf) X(dwarf_next_cfi) X(elf_begin)       \
	X(elf_compress) X(elf_end) X(elf_getdata) X(elf_getphdrnum)              \
	X(elf_getshdrstrndx) X(elf_kind) X(elf_nextscn) X(elf_strptr)            \
	X(elf_version) X(gelf_getehdr) X(gelf_getphdr) X(gelf_getshdr)

DL_LIBRARY(dwlib, "libdw.so.1", DW_FUNCS)

/* 0 once libdw's functions are at hand, else -ELIBACC.  Callers are
 * serialized (the agent's module scan, the CLI's one thread). */
static int dw_load(void)
{
	return dwlib_load() ? 0 : -ELIBACC;
}

#define dwarf_begin_elf (*dwlib.p_dwarf_begin_elf)
#define dwarf_cfi_addrframe (*dwlib.p_dwarf_cfi_addrframe)
#define dwarf_cfi_end (*dwlib.p_dwarf_cfi_end)
#define dwarf_end (*dwlib.p_dwarf_end)
#define dwarf_frame_cfa (*dwlib.p_dwarf_frame_cfa)
#define dwarf_frame_info (*dwlib.p_dwarf_frame_info)
#define dwarf_frame_register (*dwlib.p_dwarf_frame_register)
#define dwarf_getcfi (*dwlib.p_dwarf_getcfi)
#define dwarf_getcfi_elf (*dwlib.p_dwarf_getcfi_elf)
#define dwarf_next_cfi (*dwlib.p_dwarf_next_cfi)
#define elf_begin (*dwlib.p_elf_begin)
#define elf_compress (*dwlib.p_elf_compress)
#define elf_end (*dwlib.p_elf_end)
#define elf_getdata (*dwlib.p_elf_getdata)
#define elf_getphdrnum (*dwlib.p_elf_getphdrnum)
#define elf_getshdrstrndx (*dwlib.p_elf_getshdrstrndx)
#define elf_kind (*dwlib.p_elf_kind)
#define elf_nextscn (*dwlib.p_elf_nextscn)
#define elf_strptr (*dwlib.p_elf_strptr)
#define elf_version (*dwlib.p_elf_version)
#define gelf_getehdr (*dwlib.p_gelf_getehdr)
#define gelf_getphdr (*dwlib.p_gelf_getphdr)
#define gelf_getshdr (*dwlib.p_gelf_getshdr)

/* DWARF register numbers of the x86-64 psABI. */
enum { DW_X86_64_RBP = 6, DW_X86_64_RSP = 7, DW_X86_64_RIP = 16 };

struct rule {
	uint8_t kind;
	int16_t rbp_off;
	int32_t cfa_off;
};

/* One CFI row as libdw reported it: [start, end) with its rule. */
struct span {
	uint64_t start, end;
	uint32_t seq; /* insertion order: ties in the sort stay deterministic */
	struct rule r;
};

struct range {
	uint64_t lo, hi;
};

/* FDE pointer encodings already decoded, by CIE offset. */
#define CIE_CACHE 32

struct builder {
	struct range *text; /* executable PT_LOAD segments */
	size_t ntext;
	struct span *v;
	size_t n, cap;
	struct range *eh; /* FDE ranges taken from .eh_frame */
	size_t neh, eh_cap;
	uint32_t n_fde, n_unsupported;
	bool ranges_only; /* cfi_fde_ranges: collect FDE ranges, compile nothing */
	struct {
		Dwarf_Off off;
		int enc; /* -1: unusable CIE */
	} cie[CIE_CACHE];
	unsigned ncie, cie_next;
};

/* One section to enumerate. */
struct cfi_sec {
	Dwarf_CFI *cfi;
	Elf_Data *data;
	uint64_t addr; /* sh_addr, for pc-relative pointers */
	bool eh;
};

static int push_span(struct builder *b, uint64_t start, uint64_t end, const struct rule *r)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		struct span *v = realloc(b->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n] = (struct span){start, end, (uint32_t)b->n, *r};
	b->n++;
	return 0;
}

static int push_eh_range(struct builder *b, uint64_t lo, uint64_t hi)
{
	if (b->neh == b->eh_cap) {
		size_t cap = b->eh_cap ? b->eh_cap * 2 : 1024;
		struct range *v = realloc(b->eh, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		b->eh = v;
		b->eh_cap = cap;
	}
	b->eh[b->neh++] = (struct range){lo, hi};
	return 0;
}

/*
 * Read one DW_EH_PE-encoded value at *p.  field_addr is the vaddr of *p (for
 * DW_EH_PE_pcrel).  Only the forms x86-64 toolchains emit for FDE addresses
 * are accepted; -1 otherwise.
 */
static int read_encoded(int enc, const uint8_t **p, const uint8_t *end, uint64_t field_addr,
			uint64_t *val)
{
	const uint8_t *q = *p;
	uint64_t v;
	size_t size;

	if (enc & DW_EH_PE_indirect)
		return -1;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		size = 8;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		size = 4;
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		size = 2;
		break;
	default:
		return -1;
	}
	if (q > end || (size_t)(end - q) < size)
		return -1;
	if (size == 8) {
		memcpy(&v, q, 8);
	} else if (size == 4) {
		uint32_t u;
		memcpy(&u, q, 4);
		v = (enc & DW_EH_PE_signed) ? (uint64_t)(int64_t)(int32_t)u : u;
	} else {
		uint16_t u;
		memcpy(&u, q, 2);
		v = (enc & DW_EH_PE_signed) ? (uint64_t)(int64_t)(int16_t)u : u;
	}
	switch (enc & 0x70) {
	case DW_EH_PE_absptr:
		break;
	case DW_EH_PE_pcrel:
		v += field_addr;
		break;
	default:
		return -1;
	}
	*p = q + size;
	*val = v;
	return 0;
}

/* The FDE pointer encoding of a CIE ('R' in a "z..." augmentation), or -1. */
static int cie_encoding(const Dwarf_CIE *cie, bool eh)
{
	const char *a = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p ? p + cie->augmentation_data_size : NULL;
	int enc = DW_EH_PE_absptr;

	if (!eh || !a || a[0] == '\0')
		return DW_EH_PE_absptr;
	if (a[0] != 'z' || !p)
		return -1;
	for (a++; *a; a++) {
		switch (*a) {
		case 'R':
			if (p >= end)
				return -1;
			enc = *p++;
			break;
		case 'L':
			p++;
			break;
		case 'P': { /* personality: skip its encoded pointer */
			uint64_t dummy;
			if (p >= end)
				return -1;
			int penc = *p++ & ~DW_EH_PE_indirect;
			if (read_encoded(penc & 0x0f, &p, end, 0, &dummy) < 0)
				return -1;
			break;
		}
		case 'S':
		case 'B':
		case 'G':
			break;
		default: /* unknown: what follows cannot be located */
			return -1;
		}
	}
	return enc;
}

static int fde_encoding(struct builder *b, const struct cfi_sec *s, const unsigned char *ident,
			Dwarf_Off cie_off)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;
	int enc;

	for (unsigned i = 0; i < b->ncie; i++)
		if (b->cie[i].off == cie_off)
			return b->cie[i].enc;
	if (dwarf_next_cfi(ident, s->data, s->eh, cie_off, &next, &e) != 0 || !dwarf_cfi_cie_p(&e))
		enc = -1;
	else
		enc = cie_encoding(&e.cie, s->eh);
	unsigned slot = b->ncie < CIE_CACHE ? b->ncie++ : (b->cie_next++ % CIE_CACHE);
	b->cie[slot].off = cie_off;
	b->cie[slot].enc = enc;
	return enc;
}

/* ops == [DW_OP_call_frame_cfa (, DW_OP_plus_uconst off)]: "at CFA + off". */
static bool at_cfa_plus(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
		*off = 0;
		return true;
	}
	if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/*
 * The CFA expression binutils writes for lazy PLT entries:
 *   DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 *   DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * i.e. rsp + 8, plus 8 once the entry's push has run (binutils' N: 11 for the
 * classic entry, 9 with IBT's endbr64, 10 with IBT and BND, 5 with BND).
 */
static bool plt_expression(const Dwarf_Op *o, size_t n, int32_t *threshold)
{
	if (n != 9 || o[0].atom != DW_OP_breg7 || o[0].number != 8 || o[1].atom != DW_OP_breg16 ||
	    o[1].number != 0 || o[2].atom != DW_OP_lit15 || o[3].atom != DW_OP_and ||
	    o[4].atom < DW_OP_lit0 || o[4].atom > DW_OP_lit15 || o[5].atom != DW_OP_ge ||
	    o[6].atom != DW_OP_lit3 || o[7].atom != DW_OP_shl || o[8].atom != DW_OP_plus)
		return false;
	*threshold = o[4].atom - DW_OP_lit0;
	return true;
}

/* libdw's description of one row -> our rule; false (rule CFI_NONE) if it
 * does not fit. */
static bool translate(Dwarf_Frame *f, int ra_reg, bool signal_frame, struct rule *r)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;

	*r = (struct rule){CFI_NONE, 0, 0};
	if (ra_reg != DW_X86_64_RIP || signal_frame)
		return false;
	if (dwarf_frame_register(f, ra_reg, mem, &ops, &n) != 0)
		return false;
	if (n == 0 && ops == mem) { /* "undefined": the outermost frame */
		r->kind = CFI_OUTERMOST;
		return true;
	}
	if (!at_cfa_plus(ops, n, &off) || off != -8)
		return false;

	if (dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0)
		return false;
	uint64_t base = ~0ull;
	if (n == 1 && ops[0].atom == DW_OP_bregx) {
		base = ops[0].number;
		off = (int64_t)ops[0].number2;
	} else if (n == 1 && (ops[0].atom == DW_OP_breg6 || ops[0].atom == DW_OP_breg7)) {
		base = ops[0].atom - DW_OP_breg0;
		off = (int64_t)ops[0].number;
	}
	if (base == DW_X86_64_RSP || base == DW_X86_64_RBP) {
		if (off < INT32_MIN || off > INT32_MAX)
			return false;
		r->kind = base == DW_X86_64_RSP ? CFI_RSP : CFI_RBP;
		r->cfa_off = (int32_t)off;
	} else if (plt_expression(ops, n, &r->cfa_off)) {
		r->kind = CFI_PLT;
	} else {
		return false;
	}

	if (dwarf_frame_register(f, DW_X86_64_RBP, mem, &ops, &n) != 0)
		goto unsupported;
	if (n == 0 && ops == NULL) /* same value */
		return true;
	if (at_cfa_plus(ops, n, &off) && off != 0 && off >= INT16_MIN && off <= INT16_MAX) {
		r->rbp_off = (int16_t)off;
		return true;
	}
unsupported:
	*r = (struct rule){CFI_NONE, 0, 0};
	return false;
}

/* The executable segment holding [lo, ...), or NULL. */
static const struct range *text_of(const struct builder *b, uint64_t lo)
{
	for (size_t i = 0; i < b->ntext; i++)
		if (lo >= b->text[i].lo && lo < b->text[i].hi)
			return &b->text[i];
	return NULL;
}

static bool overlaps_eh(const struct builder *b, uint64_t lo, uint64_t hi)
{
	size_t l = 0, h = b->neh; /* first eh range with hi > lo */
	while (l < h) {
		size_t m = l + (h - l) / 2;
		if (b->eh[m].hi <= lo)
			l = m + 1;
		else
			h = m;
	}
	for (; l < b->neh && b->eh[l].lo < hi; l++)
		if (b->eh[l].hi > lo)
			return true;
	return false;
}

/* Evaluate the rows of one FDE's range [lo, hi) one after the other. */
static int compile_fde(struct builder *b, Dwarf_CFI *cfi, uint64_t lo, uint64_t hi)
{
	uint64_t pc = lo;

	while (pc < hi) {
		Dwarf_Frame *f;
		Dwarf_Addr start, end;
		bool sig = false;
		struct rule r;

		if (dwarf_cfi_addrframe(cfi, pc, &f) != 0)
			break; /* left as a CFI_NONE gap */
		int ra = dwarf_frame_info(f, &start, &end, &sig);
		if (!translate(f, ra, sig, &r))
			b->n_unsupported++;
		free(f);
		if (end <= pc || end > hi)
			end = hi;
		int err = push_span(b, pc, end, &r);
		if (err)
			return err;
		pc = end;
	}
	return 0;
}

static int compile_section(struct builder *b, const struct cfi_sec *s, const unsigned char *ident)
{
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int err;

	b->ncie = 0;
	while (dwarf_next_cfi(ident, s->data, s->eh, off, &next, &e) == 0) {
		off = next;
		if (dwarf_cfi_cie_p(&e))
			continue;
		int enc = fde_encoding(b, s, ident, e.fde.CIE_pointer);
		if (enc < 0)
			continue;
		const uint8_t *p = e.fde.start;
		const uint8_t *base = s->data->d_buf;
		uint64_t lo, len;
		if (read_encoded(enc, &p, e.fde.end, s->addr + (uint64_t)(p - base), &lo) < 0 ||
		    read_encoded(enc & 0x0f, &p, e.fde.end, 0, &len) < 0)
			continue;
		if (len == 0 || lo + len < lo)
			continue;
		const struct range *text = text_of(b, lo);
		if (!text)
			continue;
		uint64_t hi = lo + len < text->hi ? lo + len : text->hi;
		if (!s->eh && overlaps_eh(b, lo, hi))
			continue;
		if (s->eh && (err = push_eh_range(b, lo, hi)))
			return err;
		b->n_fde++;
		if (!b->ranges_only && (err = compile_fde(b, s->cfi, lo, hi)))
			return err;
	}
	return 0;
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void emit(struct cfi_row *rows, uint32_t *n, uint64_t pc, const struct rule *r)
{
	if (*n) {
		struct cfi_row *last = &rows[*n - 1];
		if (last->kind == r->kind && last->rbp_off == r->rbp_off && last->cfa_off == r->cfa_off)
			return;
		if (last->pc == pc) {
			*last = (struct cfi_row){(uint32_t)pc, r->kind, 0, r->rbp_off, r->cfa_off};
			return;
		}
	}
	rows[(*n)++] = (struct cfi_row){(uint32_t)pc, r->kind, 0, r->rbp_off, r->cfa_off};
}

/* Sorted spans -> table rows in a fresh read-only mapping. */
static int finish(struct builder *b, struct cfi_table **out)
{
	static const struct rule none = {CFI_NONE, 0, 0};
	struct cfi_row *rows;
	uint32_t n = 0;
	uint64_t end = 0;

	if (b->n == 0)
		return -ENOEXEC;
	qsort(b->v, b->n, sizeof(*b->v), cmp_span);
	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].end > end)
			end = b->v[i].end;
	if (end > UINT32_MAX)
		return -EOVERFLOW;
	if (b->n > (UINT32_MAX - 1) / 2)
		return -EOVERFLOW;
	rows = malloc((2 * b->n) * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	end = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct span *s = &b->v[i];
		uint64_t start = s->start;
		if (n && s->end <= end)
			continue; /* overlapped by an earlier FDE */
		if (n && start < end)
			start = end;
		if (n && start > end)
			emit(rows, &n, end, &none);
		emit(rows, &n, start, &s->r);
		end = s->end;
	}

	/* The bucket index: a binary search over all of libc's rows missed
	 * the cache at nearly every step (the first profile line of a capture
	 * on a server workload).  Buckets of about twice the mean row span:
	 * the index adds a sixth to the table and leaves one to three rows to
	 * search, usually in one cache line. */
	uint64_t span = end - b->v[0].start;
	uint32_t shift = 4;
	while (shift < 40 && (span >> shift) > n / 2 + 1)
		shift++;
	uint64_t nb = (span >> shift) + 1;
	size_t bytes = offsetof(struct cfi_table, rows) + (size_t)n * sizeof(struct cfi_row) +
		       (size_t)(nb + 1) * sizeof(uint32_t);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t mapped = (bytes + page - 1) & ~(page - 1);
	if (mapped > UINT32_MAX) {
		free(rows);
		return -EOVERFLOW;
	}
	struct cfi_table *t =
		mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED) {
		free(rows);
		return -ENOMEM;
	}
	t->lo = b->v[0].start;
	t->hi = end;
	t->n = n;
	t->mapped_size = (uint32_t)mapped;
	t->n_fde = b->n_fde;
	t->n_unsupported = b->n_unsupported;
	t->idx_shift = shift;
	t->idx_n = (uint32_t)nb;
	memcpy(t->rows, rows, (size_t)n * sizeof(*rows));
	free(rows);
	uint32_t *idx = (uint32_t *)(void *)&t->rows[n];
	uint32_t r = 0;
	for (uint64_t k = 0; k < nb; k++) {
		uint64_t start = t->lo + (k << shift);
		while (r + 1 < n && (uint64_t)t->rows[r + 1].pc <= start)
			r++;
		idx[k] = r;
	}
	idx[nb] = n - 1;
	mprotect(t, mapped, PROT_READ); /* best effort: stray writes then fault */
	*out = t;
	return 0;
}

static int find_sections(Elf *elf, Elf_Scn **eh, Elf_Scn **debug)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	*eh = *debug = NULL;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (!strcmp(name, ".eh_frame"))
			*eh = scn;
		else if (!strcmp(name, ".debug_frame"))
			*debug = scn;
	}
	return 0;
}

static int text_segments(Elf *elf, struct builder *b)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum) != 0 || phnum == 0)
		return -ENOEXEC;
	b->text = calloc(phnum, sizeof(*b->text));
	if (!b->text)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    ph.p_memsz)
			b->text[b->ntext++] = (struct range){ph.p_vaddr, ph.p_vaddr + ph.p_memsz};
	}
	return b->ntext ? 0 : -ENOEXEC;
}

static int section_data(Elf_Scn *scn, struct cfi_sec *s)
{
	GElf_Shdr sh;

	if (!gelf_getshdr(scn, &sh))
		return -ENOEXEC;
	if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return -ENOEXEC;
	s->data = elf_getdata(scn, NULL);
	s->addr = sh.sh_addr;
	return s->data && s->data->d_buf ? 0 : -ENOEXEC;
}

int cfi_build_fd(int fd, struct cfi_table **out)
{
	struct builder b = {0};
	Dwarf_CFI *eh_cfi = NULL;
	Dwarf *dw = NULL;
	Elf_Scn *eh_scn, *debug_scn;
	GElf_Ehdr eh;
	struct stat st;
	int err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((err = dw_load()) < 0)
		return err;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	err = -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
		goto out;
	if ((err = text_segments(elf, &b)) || (err = find_sections(elf, &eh_scn, &debug_scn)))
		goto out;
	const unsigned char *ident = eh.e_ident;

	if (eh_scn) {
		struct cfi_sec s = {.eh = true};
		if ((err = section_data(eh_scn, &s)))
			goto out;
		s.cfi = eh_cfi = dwarf_getcfi_elf(elf);
		if (s.cfi && (err = compile_section(&b, &s, ident)))
			goto out;
		if (b.neh)
			qsort(b.eh, b.neh, sizeof(*b.eh), cmp_range);
	}
	if (debug_scn) {
		/* Decompressed first (section_data), so libdw sees plain data. */
		struct cfi_sec s = {.eh = false};
		if (section_data(debug_scn, &s) == 0 &&
		    (dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL)) != NULL &&
		    (s.cfi = dwarf_getcfi(dw)) != NULL && (err = compile_section(&b, &s, ident)))
			goto out;
	}
	err = finish(&b, out);
out:
	if (dw)
		dwarf_end(dw);
	if (eh_cfi)
		dwarf_cfi_end(eh_cfi);
	elf_end(elf);
	free(b.v);
	free(b.eh);
	free(b.text);
	return err;
}

int cfi_fde_ranges(const char *path, struct cfi_range **out, size_t *n)
{
	struct builder b = {.ranges_only = true};
	Elf_Scn *eh_scn, *debug_scn;
	GElf_Ehdr eh;
	int err = -ENOEXEC;

	*out = NULL;
	*n = 0;
	if ((err = dw_load()) < 0)
		return err;
	int fd = rhea_open_high(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		close(fd);
		return -ENOEXEC;
	}
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
		goto out;
	if ((err = text_segments(elf, &b)) || (err = find_sections(elf, &eh_scn, &debug_scn)))
		goto out;
	err = -ENOEXEC;
	if (eh_scn) {
		struct cfi_sec s = {.eh = true};
		if ((err = section_data(eh_scn, &s)))
			goto out;
		if ((err = compile_section(&b, &s, eh.e_ident)))
			goto out;
		if (b.neh) /* (none: b.eh is NULL, which qsort must not get) */
			qsort(b.eh, b.neh, sizeof(*b.eh), cmp_range);
		_Static_assert(sizeof(struct range) == sizeof(struct cfi_range), "same layout");
		*out = (struct cfi_range *)b.eh;
		*n = b.neh;
		b.eh = NULL;
		err = 0;
	}
out:
	elf_end(elf);
	close(fd);
	free(b.v);
	free(b.eh);
	free(b.text);
	return err;
}

int cfi_build(const char *path, struct cfi_table **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	int fd = rhea_open_high(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = cfi_build_fd(fd, out);
	close(fd);
	return err;
}

const struct cfi_row *cfi_lookup(const struct cfi_table *t, uint64_t vaddr)
{
	if (!t || vaddr < t->lo || vaddr >= t->hi || t->n == 0)
		return NULL;
	const uint32_t *idx = cfi_index(t);
	uint64_t k = (vaddr - t->lo) >> t->idx_shift;
	if (k >= t->idx_n)
		k = t->idx_n - 1;
	/* last row with row.pc <= pc, among idx[k] .. idx[k + 1] */
	uint32_t pc = (uint32_t)vaddr, l = idx[k], h = idx[k + 1] + 1;
	while (h - l > 1) {
		uint32_t m = l + (h - l) / 2;
		if (t->rows[m].pc <= pc)
			l = m;
		else
			h = m;
	}
	return &t->rows[l];
}

void cfi_free(struct cfi_table *t)
{
	if (t)
		munmap(t, t->mapped_size);
}

/* The vDSO has no file: its in-memory ELF image goes to the compiler
 * through a memfd (samples taken inside clock_gettime & co. then unwind;
 * rhea attach builds it ahead too: the kernel's, the same in every
 * process). */
int cfi_build_vdso(struct cfi_table **out)
{
	*out = NULL;
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return -ENOENT;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	size_t size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (size == 0 || size > (1u << 20))
		return -ENOEXEC;
	int fd = (int)syscall(SYS_memfd_create, "rhea-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -ENOMEM;
	int err = -EIO;
	if (syscall(SYS_write, fd, (const void *)base, size) == (long)size)
		err = cfi_build_fd(fd, out);
	syscall(SYS_close, fd);
	return err;
}

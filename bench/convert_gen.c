/*
 * convert_gen.c - write a synthetic .rhea recording of a chosen size, for
 * bench/convert_bench.sh (`rhea convert` throughput and memory).
 *
 *   convert_gen OUT.rhea RECORDS [THREADS]
 *
 * Why synthetic: a real program recorded at 100 us per capture makes about
 * 10k records per second per busy thread, with drops and merges that vary
 * from run to run; a generator gives the same million-record file every
 * time, in a second.  It is realistic where the converter's cost lies:
 *
 *   - stacks are addresses inside this program's own 256 functions, and the
 *     program itself is the recording's module (its path, load bias,
 *     executable range and GNU build-id), so `rhea convert` symbolizes them
 *     for real;
 *   - each thread's stack changes from record to record the way sampled
 *     stacks do: a few frames popped at the leaf, a few pushed, depth 6..40;
 *     paths repeat, so the stack table stays at tens of thousands of nodes;
 *   - every 50th record is a blocking call (nanosleep, 1 ms), every 7th is a
 *     merge of 4 identical captures; message ids advance every 1000 records;
 *     CPU, allocation and byte counters grow as a busy thread's do.
 *
 * Records are spread over THREADS (default 8) threads at 100 us intervals.
 * Built against build/librhea_core.a (core/rfile.h, the agent's writer).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "hookfn.h"
#include "rfile.h"

#define F1(n) __attribute__((noinline)) void gen_fn_##n(void) { __asm__ volatile("nop; nop; nop; nop"); }
#define F8(n) F1(n##0) F1(n##1) F1(n##2) F1(n##3) F1(n##4) F1(n##5) F1(n##6) F1(n##7)
#define F64(n) F8(n##0) F8(n##1) F8(n##2) F8(n##3) F8(n##4) F8(n##5) F8(n##6) F8(n##7)
F64(1) F64(2) F64(3) F64(4)
#define A1(n) (void *)gen_fn_##n,
#define A8(n) A1(n##0) A1(n##1) A1(n##2) A1(n##3) A1(n##4) A1(n##5) A1(n##6) A1(n##7)
#define A64(n) A8(n##0) A8(n##1) A8(n##2) A8(n##3) A8(n##4) A8(n##5) A8(n##6) A8(n##7)
static void *const fns[] = {A64(1) A64(2) A64(3) A64(4)};
#define NFN (sizeof(fns) / sizeof(fns[0]))

#define MAXDEPTH 40
#define CHUNK (1u << 20)

static struct rfile_writer w;
static uint8_t payload[CHUNK];
static size_t plen;

static void flush(void)
{
	if (plen && rfile_write_chunk(&w, payload, plen, 1) != 0) {
		fprintf(stderr, "convert_gen: write failed\n");
		exit(1);
	}
	plen = 0;
}

static void *entry(size_t size)
{
	size = (size + 7) & ~(size_t)7;
	if (plen + size > CHUNK)
		flush();
	void *p = payload + plen;
	memset(p, 0, size);
	plen += size;
	return p;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ---- stack table: (parent, addr) -> node id ---------------------------- */

static uint32_t *slot_id;
static uint64_t *slot_key;
static uint32_t nslots = 1u << 22, nnodes = 1;
static struct rhea_node *pending;
static uint32_t npending, first_pending = 1;

static void flush_nodes(void)
{
	if (!npending)
		return;
	struct rhea_nodes *e = entry(sizeof(*e) + npending * sizeof(struct rhea_node));
	e->h.kind = RHEA_E_NODES;
	e->h.size = (uint32_t)((sizeof(*e) + npending * sizeof(struct rhea_node) + 7) & ~7u);
	e->first_id = first_pending;
	e->count = npending;
	memcpy(e + 1, pending, npending * sizeof(struct rhea_node));
	first_pending += npending;
	npending = 0;
}

static uint32_t node(uint32_t parent, uint64_t addr)
{
	uint64_t key = (uint64_t)parent << 40 ^ addr;
	uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & (nslots - 1);
	for (; slot_id[i]; i = (i + 1) & (nslots - 1))
		if (slot_key[i] == key)
			return slot_id[i];
	slot_key[i] = key;
	slot_id[i] = nnodes;
	pending[npending].addr = addr;
	pending[npending].parent = parent;
	npending++;
	if (npending == 4096)
		flush_nodes();
	return nnodes++;
}

/* ---- this program as the recording's module ----------------------------- */

static struct rhea_module mod;
static char exe[4096];

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (info->dlpi_name[0])
		return 0; /* the main program comes first, with an empty name */
	mod.bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			mod.lo = info->dlpi_addr + ph->p_vaddr;
			mod.hi = mod.lo + ph->p_memsz;
		}
		if (ph->p_type == PT_NOTE) {
			const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
			while (p + sizeof(ElfW(Nhdr)) <= end) {
				const ElfW(Nhdr) *n = (const void *)p;
				const char *desc = p + sizeof(*n) + ((n->n_namesz + 3) & ~3u);
				if (n->n_type == NT_GNU_BUILD_ID && n->n_descsz <= sizeof(mod.build_id)) {
					mod.build_id_len = n->n_descsz;
					memcpy(mod.build_id, desc, n->n_descsz);
				}
				p = desc + ((n->n_descsz + 3) & ~3u);
			}
		}
	}
	return 1;
}

static void meta(const char *k, const char *v)
{
	size_t kl = strlen(k) + 1, vl = strlen(v) + 1;
	struct rhea_meta *m = entry(sizeof(*m) + kl + vl);
	m->h.kind = RHEA_E_META;
	m->h.size = (uint32_t)((sizeof(*m) + kl + vl + 7) & ~7u);
	memcpy((char *)(m + 1), k, kl);
	memcpy((char *)(m + 1) + kl, v, vl);
}

struct thr {
	uint32_t tid, depth, msgid;
	uint64_t addr[MAXDEPTH];
	uint32_t ids[MAXDEPTH];
	uint64_t t;
	struct rhea_counters c;
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: convert_gen OUT.rhea RECORDS [THREADS]\n");
		return 2;
	}
	uint64_t records = strtoull(argv[2], NULL, 10);
	int nthreads = argc > 3 ? atoi(argv[3]) : 8;
	if (nthreads < 1 || nthreads > 1024)
		nthreads = 8;
	slot_id = calloc(nslots, sizeof(uint32_t));
	slot_key = calloc(nslots, sizeof(uint64_t));
	pending = calloc(4096, sizeof(struct rhea_node));
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0 || !slot_id || !slot_key || !pending)
		return 1;
	exe[n] = 0;
	dl_iterate_phdr(phdr_cb, NULL);

	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || rfile_writer_init(&w, fd, 1, CHUNK) != 0) {
		perror(argv[1]);
		return 1;
	}
	const uint64_t t0 = 1000000000000ull;
	struct rhea_file_header h = {0};
	h.clock = RHEA_CLOCK_MONOTONIC;
	h.pid = 1000;
	h.start_ns = t0;
	h.start_realtime_ns = 1700000000000000000ull;
	h.interval_ns = 100000;
	h.max_depth = 256;
	rfile_write_header(&w, &h);

	meta("cmdline", "convert_gen (synthetic)");
	meta("exe", exe);
	meta("unwind", "dwarf");
	size_t plen_path = strlen(exe) + 1;
	struct rhea_module *m = entry(sizeof(mod) + plen_path);
	*m = mod;
	m->h.kind = RHEA_E_MODULE;
	m->h.flags = 1;
	m->h.size = (uint32_t)((sizeof(mod) + plen_path + 7) & ~7u);
	m->time_ns = t0;
	m->path_len = (uint32_t)plen_path;
	memcpy(m + 1, exe, plen_path);

	struct thr *th = calloc((size_t)nthreads, sizeof(*th));
	for (int i = 0; i < nthreads; i++) {
		th[i].tid = 1000 + (uint32_t)i;
		th[i].t = t0 + 1000;
		struct rhea_thread *e = entry(sizeof(*e));
		e->h.kind = RHEA_E_THREAD;
		e->h.flags = RHEA_T_START;
		e->h.size = sizeof(*e);
		e->tid = th[i].tid;
		e->time_ns = t0;
		snprintf(e->name, sizeof(e->name), i ? "gen-%d" : "convert_gen", i);
		/* roots: _start-like then a per-thread entry function */
		th[i].addr[0] = (uint64_t)(uintptr_t)fns[0] + 2;
		th[i].addr[1] = (uint64_t)(uintptr_t)fns[1 + (unsigned)i % 8] + 2;
		th[i].ids[0] = node(0, th[i].addr[0]);
		th[i].ids[1] = node(th[i].ids[0], th[i].addr[1]);
		th[i].depth = 2;
	}
	for (uint64_t k = 0; k < records; k++) {
		struct thr *t = &th[k % (uint64_t)nthreads];
		/* pop 0..3 frames (keep the two roots), push 0..3 */
		uint32_t pop = (uint32_t)(rnd() % 4), push = (uint32_t)(rnd() % 4);
		while (pop-- && t->depth > 2)
			t->depth--;
		while ((push-- || t->depth < 6) && t->depth < MAXDEPTH) {
			/* A caller calls one of two callees near the root, one
			 * deeper down: paths repeat, the stack table stays at
			 * tens of thousands of nodes as a real program's does. */
			uint64_t caller = t->addr[t->depth - 1];
			uint64_t pick = t->depth < 9 ? rnd() % 2 : 0;
			/* call sites: one of 4 return addresses in each function */
			uint64_t callee = (uint64_t)(uintptr_t)fns[(caller / 16 * 31 + pick) % NFN] + 1 + caller % 4;
			t->addr[t->depth] = callee;
			t->ids[t->depth] = node(t->ids[t->depth - 1], callee);
			t->depth++;
		}
		struct rhea_sample *s = entry(sizeof(*s));
		s->h.kind = RHEA_E_SAMPLE;
		s->h.size = sizeof(*s);
		s->tid = t->tid;
		s->stack = t->ids[t->depth - 1];
		s->trigger = RHEA_FN_MALLOC;
		s->msgid = t->msgid;
		s->begin_ns = t->t;
		s->c_begin = t->c;
		uint64_t span = 0;
		if (k % 50 == 49) {
			s->h.flags = RHEA_S_BLOCK;
			s->trigger = RHEA_FN_NANOSLEEP;
			span = 1000000;
			t->c.nvcsw++;
		} else if (k % 7 == 3) {
			s->merged = 3;
			span = 300000;
			t->c.cpu_ns += 300000;
			t->c.alloc_count += 12;
			t->c.alloc_bytes += 12 * 64;
		}
		t->t += span;
		s->end_ns = t->t;
		s->c_end = t->c;
		t->t += 100000;
		t->c.cpu_ns += 80000;
		uint64_t a = rnd() % 6;
		t->c.alloc_count += a;
		t->c.alloc_bytes += a * 64;
		if (k % 1000 == 999)
			t->msgid++;
	}
	flush_nodes();
	struct rhea_end *e = entry(sizeof(*e));
	e->h.kind = RHEA_E_END;
	e->h.size = sizeof(*e);
	e->reason = RHEA_END_EXIT;
	e->time_ns = th[0].t;
	flush();
	rfile_writer_destroy(&w);
	close(fd);
	printf("%s: %llu records, %u stack nodes, %d threads\n", argv[1], (unsigned long long)records,
	       nnodes - 1, nthreads);
	return 0;
}

/*
 * fuzz_rfile.c - feed arbitrary bytes to the recording reader (core/rfile.c).
 *
 * rfile_fuzz_one() writes the input to a memfd, opens it by its
 * /proc/self/fd path like any recording, reads every chunk, walks and
 * checks every entry, touches each byte the checks allow and decodes the
 * packed samples (PACKED to PACKED4, core/packed.c) and the coded stack
 * nodes (NODES2, core/nodepack.c), so that
 * AddressSanitizer sees any read out of bounds.  The reader must return a
 * status for every input; a crash, a leak or a hang is a bug.
 *
 * libFuzzer (clang; FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION makes the
 * reader ignore CRC mismatches, or the fuzzer would never get past the CRC
 * to the sizes, zstd and the entries):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 \
 *     -D_GNU_SOURCE -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -Icore \
 *     tests/fuzz/fuzz_rfile.c core/rfile.c core/packed.c core/nodepack.c \
 *     -lzstd -lz \
 *     -o build/fuzz_rfile
 *   mkdir -p build/fuzz_corpus && build/fuzz_rfile -seeds build/fuzz_corpus
 *   build/fuzz_rfile -max_total_time=300 build/fuzz_corpus
 *
 * ("-seeds DIR" is handled here, before libFuzzer sees the arguments: it
 * writes a few valid recordings made with the writer as a starting corpus.)
 * tests/unit/test_rfile.c includes this file and runs rfile_fuzz_one over
 * its own inputs, so the entry point is built and exercised by `make test`
 * even where libFuzzer is not installed.
 */
#include "nodepack.h"
#include "packed.h"
#include "rfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int rfile_fuzz_one(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int fuzz_sample(void *arg, const struct rhea_sample *s)
{
	*(uint64_t *)arg += s->begin_ns + s->end_ns + s->stack + s->object + s->release_ns +
			    s->c_begin.cpu_ns + s->c_end.alloc_bytes + s->c_end.nivcsw;
	return 0;
}

/* Read every field the checks vouch for; the sum keeps the reads alive. */
static uint64_t fuzz_touch(const struct rhea_entry *e)
{
	const uint8_t *p = (const uint8_t *)e;
	uint64_t sum = 0;

	if (rfile_entry_check(e) != 0)
		return e->kind;
	for (uint32_t i = 0; i < e->size; i++)
		sum += p[i];
	if (e->kind == RHEA_E_MODULE)
		sum += strlen((const char *)p + sizeof(struct rhea_module));
	if (e->kind == RHEA_E_META && e->size > sizeof(struct rhea_meta))
		for (const char *s = (const char *)p + 8;
		     s < (const char *)p + e->size; s += strlen(s) + 1)
			sum += (uint8_t)*s;
	if (rhea_kind_packed(e->kind))
		sum += (uint64_t)packed_decode(e, fuzz_sample, &sum);
	if (e->kind == RHEA_E_NODES2) {
		uint32_t count = ((const struct rhea_nodes2 *)e)->count;
		struct rhea_node *v = malloc((count ? count : 1) * sizeof(*v));
		if (v && nodepack_decode(e, v) == 0)
			for (uint32_t i = 0; i < count; i++)
				sum += v[i].addr + v[i].parent;
		free(v);
	}
	return sum;
}

int rfile_fuzz_one(const uint8_t *data, size_t len)
{
	struct rfile_reader *r = NULL;
	volatile uint64_t sink = 0;
	char path[64];
	size_t done = 0;
	int fd, st;

	fd = memfd_create("rfile_fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	while (done < len) {
		ssize_t k = write(fd, data + done, len - done);
		if (k <= 0)
			goto out;
		done += (size_t)k;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	st = rfile_open(path, &r);
	if (st == RFILE_OK) {
		const void *payload;
		size_t plen;
		while ((st = rfile_next_chunk(r, &payload, &plen)) == RFILE_OK) {
			const struct rhea_entry *e;
			size_t off = 0;
			while (rfile_next_entry(payload, plen, &off, &e) == 1)
				sink += fuzz_touch(e);
		}
		sink += rfile_offset(r);
	}
	sink += strlen(rfile_error(r));
	if (st != RFILE_OK && st != RFILE_END_OF_FILE && !*rfile_error(r))
		abort(); /* every error must come with a message */
	rfile_close(r);
out:
	close(fd);
	(void)sink;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	return rfile_fuzz_one(data, len);
}

#ifndef RFILE_FUZZ_NO_SEEDS
/* Write a small valid recording of `chunks` chunks to dir/name. */
static void fuzz_seed(const char *dir, const char *name, int chunks,
		      int compress)
{
	struct rhea_file_header h = {.clock = RHEA_CLOCK_MONOTONIC};
	struct rfile_writer w;
	uint64_t buf[256];
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || rfile_writer_init(&w, fd, 3, sizeof(buf)) < 0) {
		perror(path);
		exit(1);
	}
	rfile_write_header(&w, &h);
	for (int c = 0; c < chunks; c++) {
		uint8_t *p = (uint8_t *)buf;
		size_t n = 0;
		struct rhea_sample s = {.h = {RHEA_E_SAMPLE, 0, sizeof(s)},
					.tid = 7, .stack = (uint32_t)c};
		struct rhea_end end = {.h = {RHEA_E_END, 0, sizeof(end)},
				       .reason = RHEA_END_EXIT};
		struct {
			struct rhea_module m;
			char path[8];
		} mod = {.m = {.h = {RHEA_E_MODULE, 1, sizeof(mod)},
			       .path_len = 8},
			 .path = "/lib/x"};
		struct {
			struct rhea_meta m;
			char kv[16];
		} meta = {.m = {.h = {RHEA_E_META, 0, sizeof(meta)}},
			  .kv = "cmd\0./prog"};
		memcpy(p + n, &mod, sizeof(mod)), n += sizeof(mod);
		memcpy(p + n, &meta, sizeof(meta)), n += sizeof(meta);
		memcpy(p + n, &s, sizeof(s)), n += sizeof(s);
		memcpy(p + n, &s, sizeof(s)), n += sizeof(s);
		/* The samples as the agent writes them: one PACKED2 entry. */
		struct rhea_sample run[4];
		const struct rhea_sample *runp[4];
		for (int k = 0; k < 4; k++) {
			run[k] = s;
			run[k].stack = (uint32_t)(k % 2 + 1);
			run[k].trigger = (uint16_t)(k % 2 ? 9 : 2);
			run[k].merged = (uint16_t)(k == 2);
			run[k].begin_ns = 1000000000ull + (uint64_t)k * 1100000;
			run[k].end_ns = run[k].begin_ns + (k == 2 ? 3000000 : 0);
			run[k].c_end.cpu_ns = (uint64_t)k * 400000;
			run[k].c_end.alloc_count = (uint64_t)k * 80;
			run[k].c_end.alloc_bytes = (uint64_t)k * 24000;
			run[k].c_begin = run[k].c_end;
			runp[k] = &run[k];
		}
		n += packed_encode(runp, 4, p + n, sizeof(buf) - 64 - n);
		/* and stack nodes as compaction codes them */
		struct rhea_node nodes[3] = {{0x401000, 0, 0}, {0x401200, 1, 0}, {0x401000, 2, 0}};
		n += nodepack_encode(1, nodes, 3, p + n, sizeof(buf) - 64 - n);
		if (c == chunks - 1)
			memcpy(p + n, &end, sizeof(end)), n += sizeof(end);
		rfile_write_chunk(&w, buf, n, compress);
	}
	rfile_writer_destroy(&w);
	close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	if (*argc == 3 && strcmp((*argv)[1], "-seeds") == 0) {
		fuzz_seed((*argv)[2], "plain", 2, 0);
		fuzz_seed((*argv)[2], "zstd", 3, 1);
		fuzz_seed((*argv)[2], "one", 1, 1);
		exit(0);
	}
	return 0;
}
#endif

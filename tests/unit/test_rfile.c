/*
 * test_rfile.c - the chunk writer and reader (core/rfile.c).
 *
 * What is proved here: chunks come back byte for byte, compressed or not;
 * a recording cut at any byte reads up to its last whole chunk and then says
 * "truncated" (or ends cleanly when cut on a boundary); any single damaged
 * byte is reported as the right error, never a crash and never wrong data;
 * the writer reports a full disk, leaves a file readable to its last chunk
 * when RLIMIT_FSIZE or a closed pipe stops it, does not allocate after init,
 * and survives being called from a signal handler that interrupts it.
 * Randomised tests use a fixed seed: a failure is reproducible.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "crc32.h"
#include "packed.h"
#include "rfile.h"

/* The fuzz entry point, run below over our own inputs. */
#define RFILE_FUZZ_NO_SEEDS
#include "../fuzz/fuzz_rfile.c"

#define HDR sizeof(struct rhea_file_header)
#define CHDR sizeof(struct rhea_chunk_header)
#define MAXC 512

/* ---- helpers --------------------------------------------------------- */

static uint64_t rnd_next(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static int mem_fd(void)
{
	int fd = memfd_create("rfile_test", MFD_CLOEXEC);
	cr_assert(fd >= 0, "memfd_create: %s", strerror(errno));
	return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = write(fd, (const uint8_t *)p + done, n - done);
		cr_assert(k > 0, "write: %s", strerror(errno));
		done += (size_t)k;
	}
}

/* Open bytes as a recording (through a memfd, a regular file). */
static int open_bytes(const void *data, size_t len, struct rfile_reader **r)
{
	char path[64];
	int fd = mem_fd(), st;

	write_all(fd, data, len);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	st = rfile_open(path, r);
	close(fd);
	cr_assert(*r != NULL);
	return st;
}

/* Open bytes as a recording coming through a pipe (not seekable). */
static int open_pipe(const void *data, size_t len, struct rfile_reader **r)
{
	char path[64];
	int p[2], st;
	pid_t pid;

	cr_assert(pipe(p) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		size_t done = 0;
		close(p[0]);
		while (done < len) {
			ssize_t k = write(p[1], (const uint8_t *)data + done,
					  len - done);
			if (k <= 0)
				_exit(1);
			done += (size_t)k;
		}
		_exit(0);
	}
	close(p[1]);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	st = rfile_open(path, r);
	close(p[0]);
	cr_assert(*r != NULL);
	/* The reader has its own descriptor of the pipe: the child finishes
	 * writing as the reader reads; reap it at exit. */
	return st;
}

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Fill p[0..n) in one of four styles, from incompressible to trivial. */
static void gen_payload(uint8_t *p, size_t n, int style, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		switch (style) {
		case 0:
			p[i] = (uint8_t)rnd_next(s);
			break;
		case 1:
			p[i] = 0x5a;
			break;
		case 2:
			p[i] = (uint8_t)("rhea entry "[i % 11] + (i / 64) % 3);
			break;
		default:
			p[i] = (uint8_t)(rnd_next(s) % 4);
			break;
		}
	}
}

/* The header CRC of the chunk header at p, computed as doc/format.md says. */
static uint32_t header_crc_of(const uint8_t *p)
{
	uint8_t h[sizeof(struct rhea_chunk_header)];

	memcpy(h, p, sizeof(h));
	memset(h + offsetof(struct rhea_chunk_header, header_crc), 0, 4);
	return (uint32_t)crc32(0, h, sizeof(h));
}

/* Give the chunk header at p a matching header CRC again (after editing
 * it on purpose, to reach the checks behind the header CRC). */
static void reseal_header(uint8_t *p)
{
	uint32_t c = header_crc_of(p);

	memcpy(p + offsetof(struct rhea_chunk_header, header_crc), &c, 4);
}

/* A recording made with the writer, kept in memory with its chunks. */
struct rec {
	uint8_t *file;
	size_t size;
	size_t n;
	uint64_t off[MAXC + 1]; /* off[i]: chunk i; off[n]: end of file */
	uint8_t *pl[MAXC];
	size_t len[MAXC];
	int zstd[MAXC]; /* stored compressed */
};

/*
 * n chunks of up to max_len bytes; compress: 0 never, 1 always, 2 every
 * other chunk.  Lengths are random, 0 and max_len included.
 */
static void rec_build(struct rec *rc, size_t n, size_t max_len, int compress,
		      uint64_t *s)
{
	struct rhea_file_header h = {
		.clock = RHEA_CLOCK_MONOTONIC,
		.pid = 4242,
		.ppid = 1,
		.start_ns = 123456789,
		.interval_ns = 1000000,
		.max_depth = 256,
	};
	struct rfile_writer w;
	int fd = mem_fd();

	cr_assert(n <= MAXC);
	memset(rc, 0, sizeof(*rc));
	cr_assert_eq(rfile_writer_init(&w, fd, 3, max_len), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	cr_assert_eq(w.offset, HDR);
	for (size_t i = 0; i < n; i++) {
		size_t len = rnd_next(s) % (max_len + 1);
		if (i == 1)
			len = max_len;
		if (i == 2)
			len = 0;
		rc->pl[i] = malloc(len ? len : 1);
		rc->len[i] = len;
		gen_payload(rc->pl[i], len, (int)(rnd_next(s) % 4), s);
		rc->off[i] = w.offset;
		cr_assert_eq(rfile_write_chunk(&w, rc->pl[i], len,
					       compress == 1 ||
						       (compress == 2 && i % 2)),
			     0, "chunk %zu", i);
	}
	rc->off[n] = w.offset;
	rc->n = n;
	cr_assert_eq(w.seq, n);
	cr_assert_eq(w.error, 0);
	rfile_writer_destroy(&w);

	rc->size = rc->off[n];
	cr_assert_eq((uint64_t)lseek(fd, 0, SEEK_END), rc->size);
	rc->file = malloc(rc->size);
	cr_assert_eq(pread(fd, rc->file, rc->size, 0), (ssize_t)rc->size);
	close(fd);
	for (size_t i = 0; i < n; i++) {
		struct rhea_chunk_header ch;
		memcpy(&ch, rc->file + rc->off[i], sizeof(ch));
		rc->zstd[i] = ch.flags & RHEA_CHUNK_ZSTD;
		cr_assert_eq(ch.header_crc, header_crc_of(rc->file + rc->off[i]),
			     "chunk %zu: header CRC", i);
	}
}

static void rec_free(struct rec *rc)
{
	for (size_t i = 0; i < rc->n; i++)
		free(rc->pl[i]);
	free(rc->file);
}

/*
 * Read `nok` chunks from r and check them against rc, skipping chunk
 * `skip` (-1: none); return the status of the read after them.
 */
static int expect_chunks(struct rfile_reader *r, const struct rec *rc,
			 size_t nok, long skip)
{
	const void *p;
	size_t len, i = 0;

	for (size_t k = 0; k < nok; k++, i++) {
		if ((long)i == skip)
			i++;
		cr_assert(i < rc->n);
		int st = rfile_next_chunk(r, &p, &len);
		cr_assert_eq(st, RFILE_OK, "chunk %zu: status %d (%s)", i, st,
			     rfile_error(r));
		cr_assert_eq(len, rc->len[i], "chunk %zu length", i);
		cr_assert(len == 0 || memcmp(p, rc->pl[i], len) == 0,
			  "chunk %zu bytes differ", i);
		cr_assert_eq(((uintptr_t)p) % 8, 0, "payload aligned");
		cr_assert_eq(rfile_offset(r), rc->off[i + 1]);
	}
	return rfile_next_chunk(r, &p, &len);
}

/* ---- round trip ------------------------------------------------------ */

Test(rfile, roundtrip_mixed)
{
	uint64_t s = 0x1234567;
	struct rfile_reader *r;
	struct rec rc;
	int nz = 0, nraw = 0;

	rec_build(&rc, 300, 16384, 2, &s);
	cr_assert_eq(open_bytes(rc.file, rc.size, &r), RFILE_OK, "%s",
		     rfile_error(r));
	const struct rhea_file_header *h = rfile_header(r);
	cr_assert_eq(memcmp(h->magic, RHEA_MAGIC, 8), 0);
	cr_assert_eq(h->version, RHEA_VERSION);
	cr_assert_eq(h->header_size, HDR);
	cr_assert_eq(h->pid, 4242);
	cr_assert_eq(h->start_ns, 123456789);
	cr_assert_eq(h->max_depth, 256);
	cr_assert_eq(rfile_offset(r), HDR);
	cr_assert_eq(expect_chunks(r, &rc, rc.n, -1), RFILE_END_OF_FILE);
	cr_assert_eq(rfile_chunk_index(r), rc.n);
	/* END_OF_FILE is not sticky and not an error. */
	const void *p;
	size_t len;
	cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_END_OF_FILE);
	cr_assert_str_eq(rfile_error(r), "");
	rfile_close(r);

	/* Compressible payloads of compressed chunks are stored with zstd,
	 * incompressible ones fall back to raw; uncompressed ones stay raw. */
	for (size_t i = 0; i < rc.n; i++) {
		if (i % 2 == 0)
			cr_assert_eq(rc.zstd[i], 0, "chunk %zu", i);
		nz += rc.zstd[i];
		nraw += i % 2 && !rc.zstd[i];
	}
	cr_assert_gt(nz, 50);
	cr_assert_gt(nraw, 10, "no fallback to raw seen");
	rec_free(&rc);
}

Test(rfile, roundtrip_through_pipe)
{
	uint64_t s = 99;
	struct rfile_reader *r;
	struct rec rc;

	rec_build(&rc, 60, 100000, 1, &s);
	cr_assert_eq(open_pipe(rc.file, rc.size, &r), RFILE_OK);
	cr_assert_eq(expect_chunks(r, &rc, rc.n, -1), RFILE_END_OF_FILE);
	rfile_close(r);
	reap_children();
	rec_free(&rc);
}

Test(rfile, big_chunks_and_levels)
{
	static const int levels[] = {-5, 0, 1, 9};
	size_t max = 4u << 20;
	uint8_t *a = malloc(max), *b = malloc(max);
	uint64_t s = 7;

	gen_payload(a, max, 2, &s);
	gen_payload(b, max, 0, &s);
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		struct rfile_writer w;
		struct rfile_reader *r;
		struct rhea_file_header h = {0};
		char path[64];
		const void *p;
		size_t len;
		int fd = mem_fd();

		cr_assert_eq(rfile_writer_init(&w, fd, levels[l], max), 0);
		cr_assert_eq(rfile_write_header(&w, &h), 0);
		cr_assert_eq(rfile_write_chunk(&w, a, max, 1), 0);
		cr_assert_eq(rfile_write_chunk(&w, b, max, 1), 0);
		cr_assert_lt(w.bytes_stored, max + max / 10 + 64,
			     "level %d: compressible chunk did not shrink",
			     levels[l]);
		cr_assert_eq(w.bytes_raw, 2 * max);
		rfile_writer_destroy(&w);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		cr_assert_eq(rfile_open(path, &r), RFILE_OK);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
		cr_assert(len == max && memcmp(p, a, max) == 0);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
		cr_assert(len == max && memcmp(p, b, max) == 0);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_END_OF_FILE);
		rfile_close(r);
		close(fd);
	}
	free(a);
	free(b);
}

/* ---- entries --------------------------------------------------------- */

static size_t put(uint8_t *buf, size_t off, const void *e, size_t n)
{
	memcpy(buf + off, e, n);
	return off + n;
}

Test(rfile, entries_iterate_and_check)
{
	uint64_t store[512];
	uint8_t *buf = (uint8_t *)store;
	size_t n = 0, off = 0;
	const struct rhea_entry *e;

	struct rhea_sample smp = {.h = {RHEA_E_SAMPLE, RHEA_S_BLOCK,
					sizeof(smp)},
				  .tid = 11, .stack = 5, .begin_ns = 10,
				  .end_ns = 20};
	struct rhea_thread th = {.h = {RHEA_E_THREAD, RHEA_T_NAME, sizeof(th)},
				 .tid = 11, .name = "worker"};
	struct {
		struct rhea_module m;
		char path[16];
	} mod = {.m = {.h = {RHEA_E_MODULE, 1, sizeof(mod)}, .bias = 0x1000,
		       .build_id_len = 20, .path_len = 12},
		 .path = "/lib/libc.so"};
	struct {
		struct rhea_nodes n;
		struct rhea_node nodes[3];
	} nodes = {.n = {.h = {RHEA_E_NODES, 0, sizeof(nodes)}, .first_id = 1,
			 .count = 3},
		   .nodes = {{0x400000, 0, 0}, {0x400100, 1, 0},
			     {0x400200, 2, 0}}};
	struct {
		struct rhea_meta m;
		char kv[24];
	} meta = {.m = {.h = {RHEA_E_META, 0, sizeof(meta)}},
		  .kv = "cmd\0./a.out\0host\0x"};
	struct rhea_entry unknown[3] = {{999, 0, 24}};
	struct rhea_end end = {.h = {RHEA_E_END, 0, sizeof(end)},
			       .reason = RHEA_END_EXIT, .status = 3};
	/* A sample from a newer writer: 16 more bytes at the end. */
	struct {
		struct rhea_sample s;
		uint64_t more[2];
	} big = {.s = {.h = {RHEA_E_SAMPLE, 0, sizeof(big)}, .tid = 12}};

	mod.path[11] = '\0';
	n = put(buf, n, &smp, sizeof(smp));
	n = put(buf, n, &th, sizeof(th));
	n = put(buf, n, &mod, sizeof(mod));
	n = put(buf, n, &nodes, sizeof(nodes));
	n = put(buf, n, &meta, sizeof(meta));
	n = put(buf, n, unknown, sizeof(unknown));
	n = put(buf, n, &big, sizeof(big));
	n = put(buf, n, &end, sizeof(end));

	static const struct {
		uint16_t kind;
		uint32_t size;
		int check;
	} want[] = {
		{RHEA_E_SAMPLE, sizeof(struct rhea_sample), 0},
		{RHEA_E_THREAD, sizeof(struct rhea_thread), 0},
		{RHEA_E_MODULE, sizeof(struct rhea_module) + 16, 0},
		{RHEA_E_NODES, sizeof(struct rhea_nodes) + 48, 0},
		{RHEA_E_META, 32, 0},
		{999, 24, 1},
		{RHEA_E_SAMPLE, sizeof(struct rhea_sample) + 16, 0},
		{RHEA_E_END, sizeof(struct rhea_end), 0},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cr_assert_eq(rfile_next_entry(buf, n, &off, &e), 1, "entry %zu", i);
		cr_assert_eq(e->kind, want[i].kind, "entry %zu", i);
		cr_assert_eq(e->size, want[i].size, "entry %zu", i);
		cr_assert_eq(rfile_entry_check(e), want[i].check, "entry %zu", i);
	}
	cr_assert_eq(rfile_next_entry(buf, n, &off, &e), 0);
	cr_assert_eq(off, n);
	cr_assert_eq(rfile_next_entry(buf, 0, &(size_t){0}, &e), 0);

	/* The same entries through a file. */
	struct rfile_writer w;
	struct rfile_reader *r;
	struct rhea_file_header h = {0};
	const void *p;
	size_t len, count = 0;
	char path[64];
	int fd = mem_fd();
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 65536), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	cr_assert_eq(rfile_write_chunk(&w, buf, n, 1), 0);
	rfile_writer_destroy(&w);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
	off = 0;
	while (rfile_next_entry(p, len, &off, &e) == 1)
		count++;
	cr_assert_eq(count, 8);
	cr_assert_eq(off, len);
	rfile_close(r);
	close(fd);
}

Test(rfile, entries_malformed)
{
	uint64_t store[64] = {0};
	uint8_t *buf = (uint8_t *)store;
	const struct rhea_entry *e;
	struct rhea_entry h;
	size_t off;

	/* size < 8, not a multiple of 8, past the end, header cut short. */
	static const uint32_t sizes[] = {0, 4, 12, 17, 1u << 31, 0xfffffff8u};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		h = (struct rhea_entry){RHEA_E_SAMPLE, 0, sizes[i]};
		memcpy(buf, &h, sizeof(h));
		off = 0;
		cr_assert_eq(rfile_next_entry(buf, 256, &off, &e), -1,
			     "size %u", sizes[i]);
		cr_assert_eq(off, 0);
	}
	h = (struct rhea_entry){RHEA_E_END, 0, 24};
	memcpy(buf, &h, sizeof(h));
	off = 0;
	cr_assert_eq(rfile_next_entry(buf, 16, &off, &e), -1, "past the end");
	cr_assert_eq(rfile_next_entry(buf, 28, &off, &e), 1);
	cr_assert_eq(rfile_next_entry(buf, 28, &off, &e), -1, "4 bytes left");
	off = 30;
	cr_assert_eq(rfile_next_entry(buf, 28, &off, &e), -1, "off > len");
	off = 0;
	memcpy(buf + 4, &h, sizeof(h));
	cr_assert_eq(rfile_next_entry(buf + 4, 24, &off, &e), -1, "misaligned");

	/* Kind-specific checks. */
	struct {
		struct rhea_module m;
		char path[16];
	} mod = {.m = {.h = {RHEA_E_MODULE, 1, sizeof(mod)}, .path_len = 16}};
	memset(mod.path, 'a', sizeof(mod.path));
	cr_assert_eq(rfile_entry_check(&mod.m.h), -1, "path without NUL");
	mod.path[15] = 0;
	cr_assert_eq(rfile_entry_check(&mod.m.h), 0);
	mod.m.path_len = 17;
	cr_assert_eq(rfile_entry_check(&mod.m.h), -1, "path past the entry");
	mod.m.path_len = 0xffffffffu;
	cr_assert_eq(rfile_entry_check(&mod.m.h), -1, "huge path_len");
	mod.m.path_len = 0;
	cr_assert_eq(rfile_entry_check(&mod.m.h), -1, "no path");
	mod.m.path_len = 16;
	mod.m.build_id_len = 37;
	cr_assert_eq(rfile_entry_check(&mod.m.h), -1, "build-id too long");

	struct {
		struct rhea_nodes n;
		struct rhea_node nodes[2];
	} nodes = {.n = {.h = {RHEA_E_NODES, 0, sizeof(nodes)}, .count = 2}};
	cr_assert_eq(rfile_entry_check(&nodes.n.h), 0);
	nodes.n.count = 3;
	cr_assert_eq(rfile_entry_check(&nodes.n.h), -1);
	nodes.n.count = 0xffffffffu;
	cr_assert_eq(rfile_entry_check(&nodes.n.h), -1, "count overflow");

	struct {
		struct rhea_sites s;
		struct rhea_site sites[1];
	} sites = {.s = {.h = {RHEA_E_SITES, 0, sizeof(sites)}, .count = 1}};
	cr_assert_eq(rfile_entry_check(&sites.s.h), 0);
	sites.s.count = 2;
	cr_assert_eq(rfile_entry_check(&sites.s.h), -1);

	struct {
		struct rhea_shorts s;
		struct rhea_short shorts[2];
	} shorts = {.s = {.h = {RHEA_E_SHORTS, 0, sizeof(shorts)}, .count = 2}};
	cr_assert_eq(rfile_entry_check(&shorts.s.h), 0);
	shorts.s.count = 3;
	cr_assert_eq(rfile_entry_check(&shorts.s.h), -1, "more shorts than the entry holds");
	shorts.s.count = 0xffffffffu;
	cr_assert_eq(rfile_entry_check(&shorts.s.h), -1, "count overflow");

	struct {
		struct rhea_meta m;
		char kv[8];
	} meta = {.m = {.h = {RHEA_E_META, 0, sizeof(meta)}}};
	memcpy(meta.kv, "abcdefgh", 8);
	cr_assert_eq(rfile_entry_check(&meta.m.h), -1, "META without NUL");
	meta.kv[7] = 0;
	cr_assert_eq(rfile_entry_check(&meta.m.h), 0);

	struct rhea_sample smp = {.h = {RHEA_E_SAMPLE, 0, 64}};
	cr_assert_eq(rfile_entry_check(&smp.h), -1, "short sample");
	struct rhea_stats stt = {.h = {RHEA_E_STATS, 0, 136}};
	cr_assert_eq(rfile_entry_check(&stt.h), -1, "short stats");
	struct rhea_end end = {.h = {RHEA_E_END, 0, 16}};
	cr_assert_eq(rfile_entry_check(&end.h), -1, "short end");
	struct rhea_thread th = {.h = {RHEA_E_THREAD, 0, 32}};
	cr_assert_eq(rfile_entry_check(&th.h), -1, "short thread");
}

/* ---- truncation ------------------------------------------------------ */

static void check_cut(const struct rec *rc, size_t cut, int via_pipe)
{
	struct rfile_reader *r;
	size_t whole = 0;
	int st;

	while (whole < rc->n && rc->off[whole + 1] <= cut)
		whole++;
	st = via_pipe ? open_pipe(rc->file, cut, &r)
		      : open_bytes(rc->file, cut, &r);
	if (cut == 0) {
		cr_assert_eq(st, RFILE_ERR_EMPTY);
		goto out;
	}
	if (cut < HDR) {
		cr_assert_eq(st, RFILE_ERR_HEADER, "cut %zu: %s", cut,
			     rfile_error(r));
		goto out;
	}
	cr_assert_eq(st, RFILE_OK, "cut %zu: %s", cut, rfile_error(r));
	st = expect_chunks(r, rc, whole, -1);
	if (cut == rc->off[whole]) {
		cr_assert_eq(st, RFILE_END_OF_FILE, "cut %zu at a boundary",
			     cut);
	} else {
		unsigned long long idx, at, have, want;
		cr_assert_eq(st, RFILE_ERR_TRUNCATED, "cut %zu: %d %s", cut,
			     st, rfile_error(r));
		cr_assert_eq(rfile_offset(r), rc->off[whole]);
		cr_assert_eq(sscanf(rfile_error(r),
				    "truncated: chunk %llu at byte %llu is "
				    "cut short (%llu of",
				    &idx, &at, &have),
			     3, "%s", rfile_error(r));
		cr_assert_eq(idx, whole);
		cr_assert_eq(at, rc->off[whole]);
		cr_assert_eq(have, cut - rc->off[whole]);
		if (have >= CHDR) {
			cr_assert(strstr(rfile_error(r), " of ") != NULL);
			sscanf(strstr(rfile_error(r), " of ") + 4, "%llu",
			       &want);
			cr_assert_eq(want, rc->off[whole + 1] - rc->off[whole]);
		}
		/* Errors are sticky. */
		const void *p;
		size_t len;
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_ERR_TRUNCATED);
	}
out:
	rfile_close(r);
}

Test(rfile, cut_at_every_byte_of_last_chunk)
{
	for (int compress = 0; compress < 2; compress++) {
		uint64_t s = 42 + compress;
		struct rec rc;

		rec_build(&rc, 6, 3000, compress, &s);
		/* Every byte of the last chunk, and every chunk boundary. */
		for (size_t cut = rc.off[rc.n - 1]; cut <= rc.size; cut++)
			check_cut(&rc, cut, 0);
		for (size_t i = 0; i <= rc.n; i++)
			check_cut(&rc, rc.off[i], 0);
		rec_free(&rc);
	}
}

Test(rfile, cut_everywhere_small_file)
{
	uint64_t s = 5;
	struct rec rc;

	/* Small chunks: every byte of the whole file, the header included. */
	rec_build(&rc, 8, 200, 2, &s);
	for (size_t cut = 0; cut <= rc.size; cut++)
		check_cut(&rc, cut, 0);
	/* The pipe path (no file size known) at a sample of cuts. */
	for (size_t cut = 0; cut <= rc.size; cut += 7) {
		check_cut(&rc, cut, 1);
		reap_children();
	}
	rec_free(&rc);
}

/* ---- corruption ------------------------------------------------------ */

/*
 * Damage one byte and check that the reader says the right thing.  Damage
 * anywhere in a chunk header, type and sizes included, fails its header CRC:
 * corrupt.  With `reseal`, a damaged chunk header gets a matching header CRC
 * again, which reaches the field checks behind it: there the type is not
 * checked (an unknown type is skipped) and damage to header_crc is undone by
 * the resealing; every other byte is checked.
 */
static void check_damage(const struct rec *rc, uint8_t *file, size_t pos,
			 uint8_t x, int reseal)
{
	uint8_t saved[CHDR];
	struct rfile_reader *r;
	size_t i = 0, rel = 0;
	int st;

	if (pos >= HDR) {
		for (i = 0; rc->off[i + 1] <= pos; i++)
			;
		rel = pos - rc->off[i];
	}
	reseal = reseal && pos >= HDR && rel < CHDR;
	if (reseal)
		memcpy(saved, file + rc->off[i], CHDR);
	file[pos] ^= x;
	if (reseal)
		reseal_header(file + rc->off[i]);
	st = open_bytes(file, rc->size, &r);
	if (pos < HDR) {
		if (pos < 8) {
			cr_assert_eq(st, RFILE_ERR_MAGIC, "pos %zu", pos);
		} else if (pos < 12) {
			uint32_t v;
			memcpy(&v, file + 8, 4);
			cr_assert_eq(st, v == 0 ? RFILE_ERR_HEADER
						: RFILE_ERR_VERSION,
				     "pos %zu version %u", pos, v);
		} else if (pos < 16) {
			if (st == RFILE_OK) {
				st = expect_chunks(r, rc, 0, -1);
				cr_assert(st == RFILE_ERR_CORRUPT ||
						  st == RFILE_ERR_TRUNCATED ||
						  st == RFILE_END_OF_FILE,
					  "pos %zu: %d", pos, st);
			} else {
				cr_assert_eq(st, RFILE_ERR_HEADER, "pos %zu",
					     pos);
			}
		} else {
			/* Informational fields: not checked. */
			cr_assert_eq(st, RFILE_OK);
			cr_assert_eq(expect_chunks(r, rc, rc->n, -1),
				     RFILE_END_OF_FILE);
		}
		goto out;
	}
	cr_assert_eq(st, RFILE_OK, "pos %zu", pos);
	if (reseal && rel >= 4 && rel < 6) { /* type: the chunk is skipped */
		cr_assert_eq(expect_chunks(r, rc, rc->n - 1, (long)i),
			     RFILE_END_OF_FILE, "pos %zu", pos);
	} else if (reseal && rel >= 20 && rel < 24) { /* header_crc: undone */
		cr_assert_eq(expect_chunks(r, rc, rc->n, -1),
			     RFILE_END_OF_FILE, "pos %zu", pos);
	} else {
		st = expect_chunks(r, rc, i, -1);
		if (reseal && rel >= 12 && rel < 16) /* stored_size: may
							 point past EOF */
			cr_assert(st == RFILE_ERR_CORRUPT ||
					  st == RFILE_ERR_TRUNCATED,
				  "pos %zu: %d %s", pos, st, rfile_error(r));
		else
			cr_assert_eq(st, RFILE_ERR_CORRUPT,
				     "pos %zu (chunk %zu + %zu): %d %s", pos,
				     i, rel, st, rfile_error(r));
		cr_assert_eq(rfile_offset(r), rc->off[i]);
		cr_assert(rfile_error(r)[0] != '\0');
		cr_assert(strchr(rfile_error(r), '\n') == NULL);
		if (rel < CHDR && !reseal) {
			char want[128];
			snprintf(want, sizeof(want),
				 "corrupt: chunk %zu at byte %llu: header "
				 "checksum mismatch",
				 i, (unsigned long long)rc->off[i]);
			cr_assert_str_eq(rfile_error(r), want, "pos %zu", pos);
		} else {
			cr_assert(strstr(rfile_error(r), "header checksum") ==
					  NULL,
				  "pos %zu: %s", pos, rfile_error(r));
		}
	}
out:
	rfile_close(r);
	file[pos] ^= x;
	if (reseal)
		memcpy(file + rc->off[i], saved, CHDR);
}

Test(rfile, single_byte_corruption, .timeout = 120)
{
	uint64_t s = 2024;
	struct rec rc;
	uint8_t *file;

	rec_build(&rc, 6, 1500, 2, &s);
	file = malloc(rc.size);
	memcpy(file, rc.file, rc.size);
	for (int k = 0; k < 2000; k++) {
		size_t pos;
		uint8_t x = (uint8_t)(1 + rnd_next(&s) % 255);
		if (k % 4 == 0) { /* a quarter on headers: few bytes, many
				     checks */
			size_t i = rnd_next(&s) % (rc.n + 1);
			pos = i == rc.n ? rnd_next(&s) % HDR
					: rc.off[i] + rnd_next(&s) % CHDR;
		} else {
			pos = rnd_next(&s) % rc.size;
		}
		check_damage(&rc, file, pos, x, 0);
		if (k % 4 == 0) /* and the field checks behind the CRC */
			check_damage(&rc, file, pos, x, 1);
	}
	/* And every header byte once, each bit. */
	for (size_t pos = 0; pos < HDR; pos++)
		for (int b = 0; b < 8; b++)
			check_damage(&rc, file, pos, (uint8_t)(1u << b), 0);
	for (size_t i = 0; i < rc.n; i++)
		for (size_t rel = 0; rel < CHDR; rel++)
			for (int reseal = 0; reseal < 2; reseal++)
				check_damage(&rc, file, rc.off[i] + rel, 0x80,
					     reseal);
	cr_assert_eq(memcmp(file, rc.file, rc.size), 0);
	free(file);
	rec_free(&rc);
}

/* ---- bad files ------------------------------------------------------- */

/* The agent's CRC (crc32.h: it has no zlib) is zlib's, byte for byte:
 * the reader checks the agent's chunks with zlib's.  Every length up to
 * 64, odd offsets, long buffers, and continued from a CRC so far. */
uint32_t rhea_crc32_table[256];

Test(rfile, agent_crc_is_zlibs)
{
	crc32_fill();
	uint8_t buf[70000];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	cr_assert_eq(crc32_of(0, buf, 0), (uint32_t)crc32(0, buf, 0));
	cr_assert_eq(crc32_of(0, "123456789", 9), 0xcbf43926u, "the check value of CRC-32/ISO-HDLC");
	for (size_t n = 1; n <= 64; n++)
		for (size_t off = 0; off < 3; off++)
			cr_assert_eq(crc32_of(0, buf + off, n), (uint32_t)crc32(0, buf + off, (uInt)n), "%zu bytes at %zu", n,
				     off);
	cr_assert_eq(crc32_of(0, buf, sizeof(buf)), (uint32_t)crc32(0, buf, sizeof(buf)));
	uint32_t part = crc32_of(0, buf, 1000);
	cr_assert_eq(crc32_of(part, buf + 1000, 5000), (uint32_t)crc32(crc32(0, buf, 1000), buf + 1000, 5000));
}

Test(rfile, empty_file)
{
	struct rfile_reader *r;

	cr_assert_eq(open_bytes("", 0, &r), RFILE_ERR_EMPTY);
	cr_assert_str_eq(rfile_error(r), "empty file");
	rfile_close(r);
	cr_assert_eq(open_pipe("", 0, &r), RFILE_ERR_EMPTY);
	rfile_close(r);
	reap_children();
}

Test(rfile, foreign_file)
{
	struct rfile_reader *r;

	cr_assert_eq(rfile_open("/bin/sh", &r), RFILE_ERR_MAGIC);
	cr_assert_str_eq(rfile_error(r), "not a rhea recording (bad magic)");
	rfile_close(r);
	cr_assert_eq(open_bytes("XY", 2, &r), RFILE_ERR_MAGIC);
	rfile_close(r);
	/* A prefix of the magic is a cut-short header, not a foreign file. */
	cr_assert_eq(open_bytes("RHEA", 4, &r), RFILE_ERR_HEADER);
	cr_assert(strstr(rfile_error(r), "cut short") != NULL);
	rfile_close(r);
}

Test(rfile, open_errors)
{
	struct rfile_reader *r;

	cr_assert_eq(rfile_open("/nonexistent/x.rhea", &r), RFILE_ERR_IO);
	cr_assert(strstr(rfile_error(r), "No such file") != NULL, "%s",
		  rfile_error(r));
	rfile_close(r);
	cr_assert_eq(rfile_open("/", &r), RFILE_ERR_IO);
	rfile_close(r);
	rfile_close(NULL);
	cr_assert_str_eq(rfile_error(NULL), "out of memory");
}

static void put_header(uint8_t *buf, uint32_t version, uint32_t size)
{
	struct rhea_file_header h = {.version = version, .header_size = size};
	memcpy(h.magic, RHEA_MAGIC, 8);
	memcpy(buf, &h, sizeof(h));
}

Test(rfile, versions_and_header_sizes)
{
	uint8_t buf[4096];
	struct rfile_reader *r;

	memset(buf, 0xab, sizeof(buf));
	put_header(buf, RHEA_VERSION + 2, HDR);
	cr_assert_eq(open_bytes(buf, HDR, &r), RFILE_ERR_VERSION);
	char want[128];
	snprintf(want, sizeof(want),
		 "recording format version %d is newer than this rhea (%d): "
		 "upgrade rhea",
		 RHEA_VERSION + 2, RHEA_VERSION);
	cr_assert_str_eq(rfile_error(r), want);
	rfile_close(r);

	put_header(buf, 0, HDR);
	cr_assert_eq(open_bytes(buf, HDR, &r), RFILE_ERR_HEADER);
	rfile_close(r);

	put_header(buf, RHEA_VERSION, HDR - 8);
	cr_assert_eq(open_bytes(buf, HDR, &r), RFILE_ERR_HEADER);
	rfile_close(r);

	put_header(buf, RHEA_VERSION, 1u << 30);
	cr_assert_eq(open_bytes(buf, sizeof(buf), &r), RFILE_ERR_HEADER);
	rfile_close(r);

	/* A bigger header than ours, cut short before its end. */
	put_header(buf, RHEA_VERSION, 1000);
	cr_assert_eq(open_bytes(buf, 999, &r), RFILE_ERR_HEADER);
	rfile_close(r);

	/* A bigger header, then chunks: accepted, extra bytes skipped. */
	for (int pipe_ = 0; pipe_ < 2; pipe_++) {
		uint32_t hs = HDR + 1048; /* more than one skip buffer */
		struct rfile_writer w;
		uint8_t payload[100];
		const void *p;
		size_t len;
		int fd = mem_fd();

		memset(buf, 0xab, sizeof(buf));
		put_header(buf, RHEA_VERSION, hs);
		write_all(fd, buf, hs);
		cr_assert_eq(rfile_writer_init(&w, fd, 1, 4096), 0);
		cr_assert_eq(w.offset, hs);
		memset(payload, 1, sizeof(payload));
		cr_assert_eq(rfile_write_chunk(&w, payload, sizeof(payload), 1),
			     0);
		cr_assert_eq(rfile_write_chunk(&w, payload, 8, 0), 0);
		rfile_writer_destroy(&w);
		size_t size = (size_t)lseek(fd, 0, SEEK_END);
		uint8_t *file = malloc(size);
		cr_assert_eq(pread(fd, file, size, 0), (ssize_t)size);
		close(fd);
		int st = pipe_ ? open_pipe(file, size, &r)
			       : open_bytes(file, size, &r);
		cr_assert_eq(st, RFILE_OK, "%s", rfile_error(r));
		cr_assert_eq(rfile_header(r)->header_size, hs);
		cr_assert_eq(rfile_offset(r), hs);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
		cr_assert(len == 100 && memcmp(p, payload, 100) == 0);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
		cr_assert_eq(len, 8);
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_END_OF_FILE);
		rfile_close(r);
		reap_children();
		free(file);
	}
}

Test(rfile, unknown_chunk_type_skipped)
{
	uint64_t s = 3;
	struct rfile_reader *r;
	struct rec rc;
	uint16_t type = 77;

	rec_build(&rc, 4, 500, 2, &s);
	memcpy(rc.file + rc.off[1] + 4, &type, 2);
	/* As a newer writer would write it: with a matching header CRC. */
	reseal_header(rc.file + rc.off[1]);
	cr_assert_eq(open_bytes(rc.file, rc.size, &r), RFILE_OK);
	cr_assert_eq(expect_chunks(r, &rc, 3, 1), RFILE_END_OF_FILE);
	rfile_close(r);
	rec_free(&rc);
}

/* The header CRC does not replace the payload CRC: a chunk whose header is
 * intact (its header CRC matches) but whose stored bytes do not match its
 * crc is still corrupt, with the payload message. */
Test(rfile, payload_crc_behind_good_header_crc)
{
	uint64_t s = 4;
	struct rfile_reader *r;
	struct rec rc;
	char want[128];

	rec_build(&rc, 3, 500, 2, &s); /* chunk 1: 500 bytes, zstd asked */
	snprintf(want, sizeof(want), "corrupt: chunk 1 at byte %llu: CRC "
		 "mismatch", (unsigned long long)rc.off[1]);
	for (int how = 0; how < 2; how++) {
		uint8_t *file = malloc(rc.size);
		uint8_t *h = file + rc.off[1];
		uint32_t crc;

		memcpy(file, rc.file, rc.size);
		if (how == 0) { /* a stored byte damaged, header untouched */
			h[CHDR + 7] ^= 0x10;
		} else { /* crc damaged, header CRC made to match again */
			memcpy(&crc, h + offsetof(struct rhea_chunk_header, crc),
			       4);
			crc ^= 0x00010000u;
			memcpy(h + offsetof(struct rhea_chunk_header, crc), &crc,
			       4);
			reseal_header(h);
		}
		memcpy(&crc,
		       h + offsetof(struct rhea_chunk_header, header_crc), 4);
		cr_assert_eq(crc, header_crc_of(h), "how %d", how);
		cr_assert_eq(open_bytes(file, rc.size, &r), RFILE_OK);
		cr_assert_eq(expect_chunks(r, &rc, 1, -1), RFILE_ERR_CORRUPT,
			     "how %d: %s", how, rfile_error(r));
		cr_assert_str_eq(rfile_error(r), want, "how %d", how);
		cr_assert_eq(rfile_offset(r), rc.off[1]);
		rfile_close(r);
		free(file);
	}
	rec_free(&rc);
}

Test(rfile, header_only_and_sequence_gap)
{
	uint64_t s = 11;
	struct rfile_reader *r;
	struct rec rc;
	const void *p;
	size_t len;

	rec_build(&rc, 3, 300, 0, &s);
	/* Header only: a recording cut before its first chunk. */
	cr_assert_eq(open_bytes(rc.file, HDR, &r), RFILE_OK);
	cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_END_OF_FILE);
	rfile_close(r);
	/* A chunk missing: the next one has the wrong sequence number. */
	uint8_t *gap = malloc(rc.size);
	size_t n = rc.off[1];
	memcpy(gap, rc.file, n);
	memcpy(gap + n, rc.file + rc.off[2], rc.size - rc.off[2]);
	n += rc.size - rc.off[2];
	cr_assert_eq(open_bytes(gap, n, &r), RFILE_OK);
	cr_assert_eq(expect_chunks(r, &rc, 1, -1), RFILE_ERR_CORRUPT);
	cr_assert(strstr(rfile_error(r), "sequence number 2, expected 1"),
		  "%s", rfile_error(r));
	rfile_close(r);
	free(gap);
	rec_free(&rc);
}

/* ---- writer failures ------------------------------------------------- */

Test(rfile, full_disk)
{
	struct rhea_file_header h = {0};
	struct rfile_writer w;
	uint8_t payload[256] = {1};
	int fd = open("/dev/full", O_WRONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 4096), 0);
	errno = 12345;
	cr_assert_eq(rfile_write_header(&w, &h), -ENOSPC);
	cr_assert_eq(errno, 12345, "errno preserved");
	cr_assert_eq(w.error, -ENOSPC);
	cr_assert_eq(rfile_write_chunk(&w, payload, sizeof(payload), 1),
		     -ENOSPC);
	cr_assert_eq(rfile_write_chunk(&w, payload, sizeof(payload), 0),
		     -ENOSPC);
	cr_assert_eq(w.seq, 0);
	rfile_writer_destroy(&w);
	close(fd);

	/* Chunks alone (header written elsewhere) fail the same way. */
	fd = open("/dev/full", O_WRONLY);
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 4096), 0);
	cr_assert_eq(rfile_write_chunk(&w, payload, sizeof(payload), 1),
		     -ENOSPC);
	cr_assert_eq(w.bytes_stored, 0);
	rfile_writer_destroy(&w);
	close(fd);
}

Test(rfile, writer_misuse)
{
	struct rhea_file_header h = {0};
	struct rfile_writer w;
	uint8_t payload[64] = {0};
	int fd = mem_fd();

	cr_assert_eq(rfile_writer_init(&w, fd, 3, 0), -EINVAL);
	rfile_writer_destroy(&w);
	cr_assert_eq(rfile_writer_init(&w, fd, 3, RHEA_CHUNK_MAX_RAW + 1),
		     -EINVAL);
	cr_assert_eq(rfile_writer_init(&w, fd, 1000, 64), -EINVAL);
	cr_assert_eq(rfile_writer_init(&w, -1, 3, 64), -EINVAL);
	cr_assert_eq(rfile_writer_init(&w, fd, 3, 32), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	/* Too long: refused, not sticky. */
	cr_assert_eq(rfile_write_chunk(&w, payload, 40, 0), -EINVAL);
	cr_assert_eq(w.error, 0);
	cr_assert_eq(rfile_write_chunk(&w, payload, 32, 1), 0);
	/* Header after a chunk. */
	cr_assert_eq(rfile_write_header(&w, &h), -EINVAL);
	/* Re-entry. */
	w.busy = 1;
	cr_assert_eq(rfile_write_chunk(&w, payload, 8, 0), -EBUSY);
	w.busy = 0;
	cr_assert_eq(w.error, 0);
	cr_assert_eq(rfile_write_chunk(&w, payload, 8, 0), 0);
	cr_assert_eq(w.seq, 2);
	rfile_writer_destroy(&w);
	rfile_writer_destroy(&w); /* twice is fine */
	close(fd);
}

/* A file on tmpfs when there is one, else in the temp directory. */
static int tmp_file(void)
{
	char path[] = "/dev/shm/rfile_test_XXXXXX";
	char alt[] = "/tmp/rfile_test_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		fd = mkstemp(alt);
		cr_assert(fd >= 0);
		unlink(alt);
	} else {
		unlink(path);
	}
	return fd;
}

Test(rfile, fsize_limit_leaves_readable_file)
{
	const size_t chunk = 3000;
	const off_t limit = HDR + 10 * (CHDR + chunk) + chunk / 2;
	uint8_t *payload = malloc(chunk);
	uint64_t s = 77;
	struct rfile_reader *r;
	struct stat st;
	char path[64];
	int fd = tmp_file(), status;
	pid_t pid;

	gen_payload(payload, chunk, 0, &s); /* incompressible: stays raw */
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {limit, limit};
		struct rhea_file_header h = {0};
		struct rfile_writer w;
		int n = 0, err;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0 ||
		    rfile_writer_init(&w, fd, 3, chunk) < 0 ||
		    rfile_write_header(&w, &h) < 0)
			_exit(200);
		while ((err = rfile_write_chunk(&w, payload, chunk, 1)) == 0 &&
		       n < 100)
			n++;
		if (err != -EFBIG || w.error != -EFBIG)
			_exit(201);
		/* Sticky. */
		if (rfile_write_chunk(&w, payload, 8, 0) != -EFBIG)
			_exit(202);
		_exit(n);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died");
	cr_assert_eq(WEXITSTATUS(status), 10, "child: %d", WEXITSTATUS(status));
	/* The half-written 11th chunk was cut off again. */
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_size, HDR + 10 * (CHDR + chunk));

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	for (int i = 0; i < 10; i++) {
		const void *p;
		size_t len;
		cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_OK);
		cr_assert(len == chunk && memcmp(p, payload, chunk) == 0);
	}
	const void *p;
	size_t len;
	cr_assert_eq(rfile_next_chunk(r, &p, &len), RFILE_END_OF_FILE);
	rfile_close(r);
	close(fd);
	free(payload);
}

Test(rfile, pipe_closed_mid_chunk)
{
	const size_t chunk = 3000, keep = 10000;
	uint8_t *payload = malloc(chunk);
	uint64_t s = 78;
	struct rhea_file_header h = {0};
	struct rfile_writer w;
	struct rfile_reader *r;
	char path[64];
	int p[2], sink = mem_fd(), err = 0, n = 0, status;
	pid_t pid;

	gen_payload(payload, chunk, 0, &s);
	cr_assert(pipe(p) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) { /* the reading end: keeps `keep` bytes, then quits */
		uint8_t buf[4096];
		size_t got = 0;
		close(p[1]);
		while (got < keep) {
			size_t want = keep - got < sizeof(buf) ? keep - got
							       : sizeof(buf);
			ssize_t k = read(p[0], buf, want);
			if (k <= 0)
				_exit(1);
			if (write(sink, buf, (size_t)k) != k)
				_exit(2);
			got += (size_t)k;
		}
		_exit(0);
	}
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(rfile_writer_init(&w, p[1], 3, chunk), 0);
	cr_assert_eq(w.seekable, 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	while (n < 1000 && (err = rfile_write_chunk(&w, payload, chunk, 1)) == 0)
		n++;
	cr_assert_eq(err, -EPIPE);
	rfile_writer_destroy(&w);
	close(p[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* What reached the other end reads up to the cut. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sink);
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	int whole = (int)((keep - HDR) / (CHDR + chunk));
	for (int i = 0; i < whole; i++) {
		const void *pl;
		size_t len;
		cr_assert_eq(rfile_next_chunk(r, &pl, &len), RFILE_OK);
		cr_assert(len == chunk && memcmp(pl, payload, chunk) == 0);
	}
	const void *pl;
	size_t len;
	cr_assert_eq(rfile_next_chunk(r, &pl, &len), RFILE_ERR_TRUNCATED);
	cr_assert_eq(rfile_offset(r), HDR + whole * (CHDR + chunk));
	rfile_close(r);
	close(sink);
	free(payload);
}

Test(rfile, nonblocking_pipe)
{
	const size_t chunk = 200000; /* bigger than a pipe's buffer */
	uint8_t *payload = malloc(chunk);
	uint64_t s = 79;
	struct rhea_file_header h = {0};
	struct rfile_writer w;
	struct rfile_reader *r;
	char path[64];
	int p[2], sink = mem_fd(), status;
	pid_t pid;

	gen_payload(payload, chunk, 0, &s);
	cr_assert(pipe2(p, O_NONBLOCK) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) { /* a slow reader: the writer meets EAGAIN */
		uint8_t buf[4096];
		ssize_t k;
		close(p[1]);
		fcntl(p[0], F_SETFL, 0);
		while ((k = read(p[0], buf, sizeof(buf))) > 0) {
			if (write(sink, buf, (size_t)k) != k)
				_exit(2);
			usleep(100);
		}
		_exit(k == 0 ? 0 : 1);
	}
	close(p[0]);
	cr_assert_eq(rfile_writer_init(&w, p[1], 3, chunk), 0);
	cr_assert_eq(rfile_write_header(&w, &h), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rfile_write_chunk(&w, payload, chunk, 1), 0);
	rfile_writer_destroy(&w);
	close(p[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sink);
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	for (int i = 0; i < 3; i++) {
		const void *pl;
		size_t len;
		cr_assert_eq(rfile_next_chunk(r, &pl, &len), RFILE_OK);
		cr_assert(len == chunk && memcmp(pl, payload, chunk) == 0);
	}
	const void *pl;
	size_t len;
	cr_assert_eq(rfile_next_chunk(r, &pl, &len), RFILE_END_OF_FILE);
	rfile_close(r);
	close(sink);

	/* Nobody reading: the writer gives up after a bounded wait. */
	cr_assert(pipe2(p, O_NONBLOCK) == 0);
	cr_assert_eq(rfile_writer_init(&w, p[1], 3, chunk), 0);
	int err = 0;
	for (int i = 0; i < 3 && !err; i++)
		err = rfile_write_chunk(&w, payload, chunk, 0);
	cr_assert_eq(err, -EAGAIN);
	rfile_writer_destroy(&w);
	close(p[0]);
	close(p[1]);
	free(payload);
}

/* ---- signal safety --------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define RFILE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RFILE_TEST_ASAN 1
#endif
#endif

#ifndef RFILE_TEST_ASAN
/* Count allocations (glibc's allocator does the work). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static volatile int count_allocs, allocs;

void *malloc(size_t n)
{
	allocs += count_allocs;
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	allocs += count_allocs;
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	allocs += count_allocs;
	return __libc_realloc(p, n);
}

Test(rfile, writer_does_not_allocate)
{
	struct rhea_file_header h = {0};
	struct rfile_writer w;
	uint64_t s = 1;
	size_t max = 1 << 20;
	uint8_t *payload = malloc(max);
	int fd = mem_fd(), full = open("/dev/full", O_WRONLY);

	gen_payload(payload, max, 3, &s);
	cr_assert_eq(rfile_writer_init(&w, fd, 3, max), 0);
	/* No assertion inside: Criterion may allocate to report one. */
	int bad = 0;
	count_allocs = 1;
	bad += rfile_write_header(&w, &h) != 0;
	for (size_t len = 1; len <= max; len *= 4) {
		bad += rfile_write_chunk(&w, payload, len, 1) != 0;
		bad += rfile_write_chunk(&w, payload, len, 0) != 0;
	}
	w.fd = full; /* and the error path */
	bad += rfile_write_chunk(&w, payload, 100, 1) != -ENOSPC;
	count_allocs = 0;
	cr_assert_eq(bad, 0);
	cr_assert_eq(allocs, 0, "the writer allocated %d times", allocs);
	rfile_writer_destroy(&w);
	close(fd);
	close(full);
	free(payload);
}
#endif

static struct rfile_writer sig_w;
static volatile int sig_ok, sig_busy, sig_other;
static uint8_t sig_payload[1000];

static void on_alarm(int sig)
{
	int err = rfile_write_chunk(&sig_w, sig_payload, sizeof(sig_payload),
				    1);
	(void)sig;
	if (err == 0)
		sig_ok++;
	else if (err == -EBUSY)
		sig_busy++;
	else
		sig_other++;
}

Test(rfile, writes_from_signal_handler, .timeout = 60)
{
	struct rhea_file_header h = {0};
	struct itimerval it = {{0, 50}, {0, 50}};
	struct sigaction sa = {.sa_handler = on_alarm};
	struct rfile_reader *r;
	uint8_t *main_payload = malloc(60000);
	uint64_t s = 9;
	char path[64];
	int fd = mem_fd(), main_ok = 0, nz = 0;
	const void *p;
	size_t len;

	gen_payload(main_payload, 60000, 2, &s);
	memset(sig_payload, 'S', sizeof(sig_payload));
	cr_assert_eq(rfile_writer_init(&sig_w, fd, 3, 60000), 0);
	cr_assert_eq(rfile_write_header(&sig_w, &h), 0);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	setitimer(ITIMER_REAL, &it, NULL);
	/* Run until the handler got in both while the writer was idle and
	 * while it was busy (or give up after a while: still a valid run). */
	for (int i = 0; i < 20000 && (sig_ok < 20 || sig_busy < 20); i++) {
		int err = rfile_write_chunk(&sig_w, main_payload,
					    1000 + (size_t)i % 59000, 1);
		cr_assert(err == 0 || err == -EBUSY, "%d", err);
		main_ok += err == 0;
		if (i % 64 == 0)
			raise(SIGALRM); /* and surely once with the writer idle */
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	signal(SIGALRM, SIG_IGN);
	cr_assert_eq(sig_other, 0);
	cr_assert_gt(sig_ok, 0, "the handler never wrote");
	cr_log_info("main %d chunks, handler %d written, %d busy", main_ok,
		    sig_ok, sig_busy);
	rfile_writer_destroy(&sig_w);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	cr_assert_eq(rfile_open(path, &r), RFILE_OK);
	int m = 0, k = 0, st;
	while ((st = rfile_next_chunk(r, &p, &len)) == RFILE_OK) {
		if (len == sizeof(sig_payload) &&
		    memcmp(p, sig_payload, len) == 0) {
			k++;
		} else {
			cr_assert(len >= 1000 && len < 60000);
			cr_assert_eq(memcmp(p, main_payload, len), 0);
			m++;
		}
		nz++;
	}
	cr_assert_eq(st, RFILE_END_OF_FILE, "%s", rfile_error(r));
	cr_assert_eq(m, main_ok);
	cr_assert_eq(k, sig_ok);
	rfile_close(r);
	close(fd);
	free(main_payload);
}

/* ---- the fuzz entry point ------------------------------------------- */

Test(rfile, fuzz_entry_on_damaged_files, .timeout = 120)
{
	uint64_t s = 31337;
	struct rec rc;
	uint8_t *file;

	rec_build(&rc, 5, 2000, 2, &s);
	file = malloc(rc.size);
	cr_assert_eq(rfile_fuzz_one(rc.file, rc.size), 0);
	for (size_t cut = 0; cut < rc.size; cut += 13)
		rfile_fuzz_one(rc.file, cut);
	for (int k = 0; k < 1000; k++) {
		int nd = 1 + (int)(rnd_next(&s) % 16);
		memcpy(file, rc.file, rc.size);
		for (int d = 0; d < nd; d++)
			file[rnd_next(&s) % rc.size] = (uint8_t)rnd_next(&s);
		/* Half the time, chunk headers with matching header CRCs, so
		 * that damaged fields get past the header CRC check. */
		for (size_t i = 0; k % 2 && i < rc.n; i++)
			reseal_header(file + rc.off[i]);
		rfile_fuzz_one(file, rc.size);
	}
	for (int k = 0; k < 200; k++) { /* plain noise behind a valid header */
		size_t n = HDR + rnd_next(&s) % 4096;
		memcpy(file, rc.file, HDR);
		for (size_t i = HDR; i < n && i < rc.size; i++)
			file[i] = (uint8_t)rnd_next(&s);
		rfile_fuzz_one(file, n < rc.size ? n : rc.size);
	}
	free(file);
	rec_free(&rc);
}

/*
 * Packed samples through the fuzz entry point: PACKED4, PACKED3, PACKED2 and PACKED entries,
 * whole and damaged, in chunks whose CRCs match, so that the damage
 * reaches the sample decoders and not only the CRC check.
 */
Test(rfile, fuzz_entry_on_packed_samples, .timeout = 120)
{
	enum { N = 64, CAP = N * 200 };
	uint64_t s = 4711;
	struct rhea_sample v[N];
	const struct rhea_sample *vp[N];
	static uint64_t pl[4][CAP / 8], dmg[CAP / 8];
	size_t plen[4];
	struct rhea_counters c = {0};
	uint64_t t = 5000000000ull;

	memset(v, 0, sizeof(v));
	for (int i = 0; i < N; i++) {
		v[i].h = (struct rhea_entry){RHEA_E_SAMPLE, (uint16_t)(i % 9 ? 0 : RHEA_S_BLOCK), sizeof(v[i])};
		v[i].tid = 77;
		v[i].stack = (uint32_t)(1 + rnd_next(&s) % 6);
		v[i].trigger = (uint16_t)(v[i].stack * 7);
		v[i].merged = (uint16_t)(i % 4 ? 0 : rnd_next(&s) % 20);
		v[i].msgid = (uint32_t)(i / 5);
		t += 900000 + rnd_next(&s) % 400000;
		v[i].begin_ns = t;
		t += v[i].merged ? rnd_next(&s) % 9000000 : 0;
		v[i].end_ns = t;
		if (i % 9 == 0) {
			v[i].object = 0x7f00001000ull;
			v[i].waker_tid = 78;
			v[i].waker_stack = 3;
			v[i].release_ns = v[i].end_ns - 20000;
		}
		c.cpu_ns += rnd_next(&s) % 500000;
		c.alloc_count += rnd_next(&s) % 100;
		c.alloc_bytes += rnd_next(&s) % 30000;
		c.nvcsw += (uint32_t)(rnd_next(&s) % 4);
		v[i].c_end = c;
		v[i].c_begin = c;
		if (v[i].merged)
			v[i].c_begin.cpu_ns -= rnd_next(&s) % 1000000;
		vp[i] = &v[i];
	}
	plen[0] = packed_encode(vp, N, pl[0], CAP);
	plen[1] = packed_encode_v1(vp, N, pl[1], CAP);
	plen[2] = packed_encode_steps(vp, N, 4, 0x7f, pl[2], CAP);
	plen[3] = packed_encode_rc(vp, N, 4, 0x7f, 1000, pl[3], CAP);
	cr_assert(plen[0] && plen[1] && plen[2] && plen[3]);

	for (int k = 0; k < 2000; k++) {
		struct rhea_file_header h = {.clock = RHEA_CLOCK_MONOTONIC};
		struct rfile_writer w;
		int which = k % 4, fd = mem_fd();
		size_t len = plen[which];
		uint8_t *d = (uint8_t *)dmg;

		memcpy(d, pl[which], len);
		for (int j = 0, nd = k ? 1 + (int)(rnd_next(&s) % 4) : 0; j < nd; j++)
			d[8 + rnd_next(&s) % (len - 8)] ^= (uint8_t)(1 + rnd_next(&s) % 255);
		cr_assert_eq(rfile_writer_init(&w, fd, 3, CAP), 0);
		cr_assert_eq(rfile_write_header(&w, &h), 0);
		cr_assert_eq(rfile_write_chunk(&w, d, len, k % 3 == 0), 0);
		rfile_writer_destroy(&w);
		size_t size = (size_t)lseek(fd, 0, SEEK_END);
		uint8_t *file = malloc(size);
		cr_assert_eq(pread(fd, file, size, 0), (ssize_t)size);
		close(fd);
		cr_assert_eq(rfile_fuzz_one(file, size), 0);
		free(file);
	}
}

/* ---- doc/format.md matches format.h ------------------------------------ */

/*
 * The offsets and sizes below are the ones doc/format.md documents.  When
 * format.h changes, this test fails until the document (and this list) are
 * brought up to date: a format description that is off by 8 bytes is worse
 * than none.
 */
#define DOC(type, field, off)                                              \
	cr_expect_eq(offsetof(struct type, field), (size_t)(off),          \
		     "doc/format.md: " #type "." #field " is at %zu, not " #off, \
		     offsetof(struct type, field))
#define DOC_SIZE(type, size)                                               \
	cr_expect_eq(sizeof(struct type), (size_t)(size),                  \
		     "doc/format.md: struct " #type " is %zu bytes, not " #size, \
		     sizeof(struct type))

Test(rfile, doc_format_md_layout)
{
	cr_expect_eq(RHEA_VERSION, 1);
	cr_expect_eq(RHEA_CHUNK_MAGIC, 0x4b434852u);
	cr_expect_eq(RHEA_CHUNK_MAX_RAW, 64u << 20);
	cr_expect_eq(RHEA_CLOCK_MONOTONIC, 1);
	cr_expect_eq(RHEA_CHUNK_EVENTS, 1);
	cr_expect_eq(RHEA_CHUNK_ZSTD, 1);

	DOC_SIZE(rhea_file_header, 72);
	DOC(rhea_file_header, version, 8);
	DOC(rhea_file_header, header_size, 12);
	DOC(rhea_file_header, clock, 16);
	DOC(rhea_file_header, pid, 20);
	DOC(rhea_file_header, ppid, 24);
	DOC(rhea_file_header, flags, 28);
	DOC(rhea_file_header, start_ns, 32);
	DOC(rhea_file_header, start_realtime_ns, 40);
	DOC(rhea_file_header, interval_ns, 48);
	DOC(rhea_file_header, max_depth, 56);
	DOC(rhea_file_header, reserved, 60);

	DOC_SIZE(rhea_chunk_header, 32);
	DOC(rhea_chunk_header, type, 4);
	DOC(rhea_chunk_header, flags, 6);
	DOC(rhea_chunk_header, raw_size, 8);
	DOC(rhea_chunk_header, stored_size, 12);
	DOC(rhea_chunk_header, crc, 16);
	DOC(rhea_chunk_header, header_crc, 20);
	DOC(rhea_chunk_header, seq, 24);

	DOC_SIZE(rhea_entry, 8);
	DOC(rhea_entry, flags, 2);
	DOC(rhea_entry, size, 4);
	cr_expect_eq(RHEA_E_SAMPLE, 1);
	cr_expect_eq(RHEA_E_THREAD, 2);
	cr_expect_eq(RHEA_E_MODULE, 3);
	cr_expect_eq(RHEA_E_NODES, 4);
	cr_expect_eq(RHEA_E_SITES, 5);
	cr_expect_eq(RHEA_E_META, 6);
	cr_expect_eq(RHEA_E_END, 7);
	cr_expect_eq(RHEA_E_STATS, 8);
	cr_expect_eq(RHEA_E_PACKED, 9);
	cr_expect_eq(RHEA_E_PACKED2, 10);
	cr_expect_eq(RHEA_E_PACKED3, 11);
	cr_expect_eq(RHEA_E_PACKED4, 12);

	DOC_SIZE(rhea_counters, 40);
	DOC(rhea_counters, alloc_count, 8);
	DOC(rhea_counters, alloc_bytes, 16);
	DOC(rhea_counters, minflt, 24);
	DOC(rhea_counters, majflt, 28);
	DOC(rhea_counters, nvcsw, 32);
	DOC(rhea_counters, nivcsw, 36);

	DOC_SIZE(rhea_sample, 152);
	DOC(rhea_sample, tid, 8);
	DOC(rhea_sample, stack, 12);
	DOC(rhea_sample, trigger, 16);
	DOC(rhea_sample, merged, 18);
	DOC(rhea_sample, msgid, 20);
	DOC(rhea_sample, begin_ns, 24);
	DOC(rhea_sample, end_ns, 32);
	DOC(rhea_sample, object, 40);
	DOC(rhea_sample, waker_tid, 48);
	DOC(rhea_sample, owner_tid, 52);
	DOC(rhea_sample, waker_stack, 56);
	DOC(rhea_sample, reserved, 60);
	DOC(rhea_sample, release_ns, 64);
	DOC(rhea_sample, c_begin, 72);
	DOC(rhea_sample, c_end, 112);
	cr_expect_eq(RHEA_S_BLOCK, 1);
	cr_expect_eq(RHEA_S_TRUNCATED, 2);
	cr_expect_eq(RHEA_S_ASYNC, 4);
	cr_expect_eq(RHEA_S_LEAF_EXACT, 8);
	cr_expect_eq(RHEA_S_NOSTACK, 16);
	cr_expect_eq(RHEA_S_WAKER, 32);

	DOC_SIZE(rhea_thread, 40);
	DOC(rhea_thread, tid, 8);
	DOC(rhea_thread, parent_tid, 12);
	DOC(rhea_thread, time_ns, 16);
	DOC(rhea_thread, name, 24);
	cr_expect_eq(RHEA_T_START, 1);
	cr_expect_eq(RHEA_T_NAME, 2);
	cr_expect_eq(RHEA_T_EXIT, 3);

	DOC_SIZE(rhea_module, 88);
	DOC(rhea_module, time_ns, 8);
	DOC(rhea_module, bias, 16);
	DOC(rhea_module, lo, 24);
	DOC(rhea_module, hi, 32);
	DOC(rhea_module, build_id_len, 40);
	DOC(rhea_module, build_id, 44);
	DOC(rhea_module, path_len, 80);
	DOC(rhea_module, pad, 84);

	DOC_SIZE(rhea_nodes, 16);
	DOC(rhea_nodes, first_id, 8);
	DOC(rhea_nodes, count, 12);
	DOC_SIZE(rhea_node, 16);
	DOC(rhea_node, parent, 8);
	DOC(rhea_node, pad, 12);

	DOC_SIZE(rhea_sites, 16);
	DOC(rhea_sites, count, 8);
	DOC(rhea_sites, pad, 12);
	DOC_SIZE(rhea_site, 32);
	DOC(rhea_site, count, 8);
	DOC(rhea_site, bytes, 16);
	DOC(rhea_site, tid, 24);
	DOC(rhea_site, serial, 28);

	cr_expect_eq(RHEA_E_SHORTS, 15);
	DOC_SIZE(rhea_shorts, 16);
	DOC(rhea_shorts, count, 8);
	DOC(rhea_shorts, pad, 12);
	DOC_SIZE(rhea_short, 32);
	DOC(rhea_short, tid, 0);
	DOC(rhea_short, serial, 4);
	DOC(rhea_short, fn, 8);
	DOC(rhea_short, count, 16);
	DOC(rhea_short, ns, 24);

	DOC_SIZE(rhea_packed, 24);
	DOC(rhea_packed, tid, 8);
	DOC(rhea_packed, count, 12);
	DOC(rhea_packed, base_ns, 16);
	DOC_SIZE(rhea_packed2, 24);
	DOC(rhea_packed2, tid, 8);
	DOC(rhea_packed2, count, 12);
	DOC(rhea_packed2, base_us, 16);

	DOC_SIZE(rhea_meta, 8);

	DOC_SIZE(rhea_end, 24);
	DOC(rhea_end, time_ns, 8);
	DOC(rhea_end, reason, 16);
	DOC(rhea_end, status, 20);
	cr_expect_eq(RHEA_END_EXIT, 1);
	cr_expect_eq(RHEA_END_SIGNAL, 2);
	cr_expect_eq(RHEA_END_EXEC, 3);
	cr_expect_eq(RHEA_END_DETACH, 4);
	cr_expect_eq(RHEA_END_DISABLED, 5);

	DOC_SIZE(rhea_stats, 144);
	DOC(rhea_stats, time_ns, 8);
	DOC(rhea_stats, samples, 16);
	DOC(rhea_stats, captures, 24);
	DOC(rhea_stats, dropped, 32);
	DOC(rhea_stats, truncated, 40);
	DOC(rhea_stats, unwind_errors, 48);
	DOC(rhea_stats, stack_full, 56);
	DOC(rhea_stats, write_errors, 64);
	DOC(rhea_stats, bytes_raw, 72);
	DOC(rhea_stats, bytes_stored, 80);
	DOC(rhea_stats, threads, 88);
	DOC(rhea_stats, waits_unattributed, 96);
	DOC(rhea_stats, agent_cpu_ns, 104);
	DOC(rhea_stats, ticker_wakes, 112);
	DOC(rhea_stats, ticker_coast_ns, 120);
	DOC(rhea_stats, sample_blocked, 128);
	DOC(rhea_stats, cfi_build_ns, 136);
}

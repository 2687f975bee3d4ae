/* Unit tests of agent/cficache.c: a compiled table survives the trip to
 * disk byte for byte, and a damaged, foreign or truncated file is refused. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "cfi.h"

static char dir[] = "/tmp/rhea-cficache-XXXXXX";
static const uint8_t id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	setenv("RHEA_CACHE_DIR", dir, 1);
}

static void teardown(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", dir);
}

TestSuite(cficache, .init = setup, .fini = teardown);

static struct cfi_table *libc_table(void)
{
	struct cfi_table *t = NULL;
	const char *paths[] = {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"};
	for (int i = 0; i < 2 && !t; i++)
		if (cfi_build(paths[i], &t) < 0)
			t = NULL;
	cr_assert_not_null(t, "no libc to build a table from");
	return t;
}

static void cache_path(char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "%s/cfi/", dir);
	for (int i = 0; i < 20; i++)
		o += (size_t)snprintf(out + o, cap - o, "%02x", id[i]);
	snprintf(out + o, cap - o, ".cfi");
}

Test(cficache, round_trip_and_refusals)
{
	struct cfi_table *t = libc_table();
	cr_assert_null(cficache_load(id, 20), "empty cache");
	cficache_store(id, 20, t);
	struct cfi_table *c = cficache_load(id, 20);
	cr_assert_not_null(c);
	cr_assert_eq(c->n, t->n);
	cr_assert_eq(c->lo, t->lo);
	cr_assert_eq(c->hi, t->hi);
	cr_assert_eq(memcmp(c->rows, t->rows, (size_t)t->n * sizeof(t->rows[0])), 0, "rows differ");
	/* Lookups agree. */
	for (uint64_t a = t->lo; a < t->hi; a += 4093)
		cr_assert_eq(cfi_lookup(c, a) - c->rows, cfi_lookup(t, a) - t->rows);
	/* Another build-id: not found. */
	uint8_t other[20];
	memcpy(other, id, 20);
	other[19] ^= 1;
	cr_assert_null(cficache_load(other, 20));

	char path[512], named[512];
	cache_path(path, sizeof(path));
	/* Where it is kept, as rhea attach copies it into a container's cache. */
	cr_assert_eq(cficache_file(id, 20, named, sizeof(named)), 0);
	cr_assert_str_eq(named, path);
	cr_assert_eq(access(named, R_OK), 0);
	cr_assert_neq(cficache_file(id, 20, named, 10), 0, "a name that does not fit");
	/* Truncated: refused. */
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 200), 0);
	close(fd);
	cr_assert_null(cficache_load(id, 20), "a truncated file is refused");
	/* Rewritten, then a damaged magic: refused. */
	cficache_store(id, 20, t);
	cr_assert_not_null(cficache_load(id, 20));
	fd = open(path, O_WRONLY);
	cr_assert_eq(pwrite(fd, "X", 1, 0), 1);
	close(fd);
	cr_assert_null(cficache_load(id, 20), "a damaged header is refused");
	cfi_free(t);
}

Test(cficache, can_be_turned_off)
{
	/* The decision is made once per process: this test runs in its own. */
	setenv("RHEA_CFI_CACHE", "0", 1);
	struct cfi_table *t = libc_table();
	cficache_store(id, 20, t);
	cr_assert_null(cficache_load(id, 20));
	char path[512];
	cache_path(path, sizeof(path));
	cr_assert_neq(access(path, F_OK), 0, "nothing written when off");
	cr_assert_neq(cficache_file(id, 20, path, sizeof(path)), 0, "no file when off");
	cfi_free(t);
}

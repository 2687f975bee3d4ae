/*
 * cficache.c - compiled CFI tables cached on disk by build-id.
 *
 * Compiling a module's CFI with libdw takes 10-50 ms for libc or
 * libpython, and every process the agent starts in pays it again: 20 ms
 * for a tiny program, 80 ms for redis-server, per exec of a shell script's
 * children.  The compiled table depends only on the file, which its GNU
 * build-id names, so it is cached like perf's ~/.debug:
 *
 *   $RHEA_CACHE_DIR, or $XDG_CACHE_HOME/rhea, or $HOME/.cache/rhea
 *     cfi/<build-id>.cfi  =  header + struct cfi_table (rows included)
 *
 * A later process maps the file read-only (shared between processes, no
 * build at all).  Files are written to a temporary name and renamed, so a
 * reader never sees half a file; a file whose header, build-id or size do
 * not match is ignored (and replaced).  RHEA_CFI_CACHE=0 turns it off.
 * Only normal context calls these (module scans), never a signal handler.
 */
#include "agent.h"
#include "cfi.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "RHEACFI3" /* 3: tables carry a bucket index */

struct cache_header {
	char magic[8];
	uint32_t header_size;
	uint32_t build_id_len;
	uint8_t build_id[40];
	uint64_t table_bytes; /* cfi_table_bytes(): header, rows, bucket index */
};

static char dir[1024];
static int state; /* 0 unknown, 1 usable, -1 off */
/* Where the settings come from: the environment, or under rhea attach the
 * attach file (the process's own HOME is not ours to write into). */
static const char *env(const char *name)
{
	return getenv(name);
}
static const char *(*setting)(const char *) = env;

void cficache_settings(const char *(*get)(const char *))
{
	setting = get;
	state = 0;
}

static int cache_dir(void)
{
	if (state)
		return state > 0;
	state = -1;
	const char *off = setting("RHEA_CFI_CACHE");
	if (off && strcmp(off, "0") == 0)
		return 0;
	char tmp[1024];
	if (rhea_cache_base(setting, tmp, sizeof(tmp)) != 0)
		return 0;
	/* mkdir -p for the two or three levels that may be missing. */
	char path[1024];
	if (snprintf(path, sizeof(path), "%s/cfi", tmp) >= (int)sizeof(path))
		return 0;
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(path, 0755);
			*p = '/';
		}
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return 0;
	if (access(path, W_OK | X_OK) != 0)
		return 0;
	snprintf(dir, sizeof(dir), "%s", path);
	state = 1;
	return 1;
}

static int file_name(char *out, size_t cap, const uint8_t *id, uint32_t len)
{
	if (len == 0 || len > 40)
		return -1;
	size_t o = (size_t)snprintf(out, cap, "%s/", dir);
	for (uint32_t i = 0; i < len && o + 3 < cap; i++)
		o += (size_t)snprintf(out + o, cap - o, "%02x", id[i]);
	if (o + 5 >= cap)
		return -1;
	memcpy(out + o, ".cfi", 5);
	return 0;
}

/* A cache file is trusted as much as the table it replaces: the lookup
 * indexes rows by the bucket index without further checks. */
static int cache_index_ok(const struct cfi_table *t)
{
	const uint32_t *idx = cfi_index(t);
	if (t->n == 0 || t->idx_shift > 40 || idx[t->idx_n] != t->n - 1)
		return 0;
	for (uint32_t k = 0; k < t->idx_n; k++)
		if (idx[k] > idx[k + 1])
			return 0;
	return 1;
}

struct cfi_table *cficache_load(const uint8_t *id, uint32_t len)
{
	char path[1200];
	if (!cache_dir() || file_name(path, sizeof(path), id, len) < 0)
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	struct cfi_table *t = NULL;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)(sizeof(struct cache_header) + sizeof(struct cfi_table)))
		goto out;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		goto out;
	const struct cache_header *h = m;
	const struct cfi_table *ct = (const void *)((const char *)m + sizeof(*h));
	if (memcmp(h->magic, CACHE_MAGIC, 8) != 0 || h->header_size != sizeof(*h) ||
	    h->build_id_len != len || memcmp(h->build_id, id, len) != 0 ||
	    h->table_bytes != (uint64_t)st.st_size - sizeof(*h) ||
	    h->table_bytes != cfi_table_bytes(ct) || ct->idx_n == 0 || !cache_index_ok(ct)) {
		munmap(m, (size_t)st.st_size);
		goto out;
	}
	t = (struct cfi_table *)ct; /* read-only: never freed, never written */
out:
	close(fd);
	return t;
}

int cficache_usable(void)
{
	return cache_dir();
}

int cficache_file(const uint8_t *id, uint32_t len, char *out, size_t cap)
{
	return cache_dir() ? file_name(out, cap, id, len) : -1;
}

int cficache_has(const uint8_t *id, uint32_t len)
{
	struct cfi_table *t = cficache_load(id, len);
	if (t)
		munmap((char *)t - sizeof(struct cache_header), sizeof(struct cache_header) + cfi_table_bytes(t));
	return t != NULL;
}

void cficache_store(const uint8_t *id, uint32_t len, const struct cfi_table *t)
{
	char path[1200], tmp[1300];
	if (!t || !cache_dir() || file_name(path, sizeof(path), id, len) < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	struct cache_header h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.header_size = sizeof(h);
	h.build_id_len = len;
	memcpy(h.build_id, id, len);
	h.table_bytes = cfi_table_bytes(t);
	int ok = write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) &&
		 write(fd, t, h.table_bytes) == (ssize_t)h.table_bytes;
	close(fd);
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
}

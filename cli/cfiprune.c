/*
 * cfiprune.c - keep the cache of compiled CFI tables (agent/cficache.c)
 * from growing without end.
 *
 * A table is written once per build-id and never removed by the agent, so
 * every library version a machine ever traced stays there: libLLVM's
 * alone is 33 MB.  rhea record and rhea attach call cli_prune_cfi_cache()
 * before they start a program's agent: when the tables add up to more
 * than RHEA_CFI_CACHE_MAX (default 1G), the least recently used ones (by
 * the later of access and modification time) go until they fill three
 * quarters of it.  A table a running process has mapped stays valid: only
 * its name goes.  Nothing here is an error the user must see: a cache that
 * cannot be read is left as it is.
 *
 * The scan (a stat per table) is skipped while nothing was added since the
 * last one: tables are only ever added by creating files, which moves the
 * directory's modification time, and a stamp file, ".pruned", holding the
 * cap it was kept under, is written after each scan; while it is newer
 * than the directory and names the same cap, the total cannot have grown
 * past it.  (1331 tables cost every rhea record 4-6 ms of stat here.)
 */
#include "cli.h"
#include "paths.h"
#include "vec.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	char name[96];
	uint64_t size;
	int64_t used; /* ns */
};

static int by_use(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->used < y->used ? -1 : x->used > y->used;
}

void cli_prune_cfi_cache(void)
{
	const char *off = getenv("RHEA_CFI_CACHE");
	if (off && strcmp(off, "0") == 0)
		return;
	int64_t max = 1ll << 30;
	const char *m = getenv("RHEA_CFI_CACHE_MAX");
	if (m && *m && (max = cli_parse_size(m)) < 0)
		max = 1ll << 30;
	char dir[4096];
	if (rhea_cache_base(cli_getenv, dir, sizeof(dir) - 8) != 0)
		return;
	strcat(dir, "/cfi");
	char stamp[4096 + 16];
	snprintf(stamp, sizeof(stamp), "%s/.pruned", dir);
	char cap_text[32], had[32] = "";
	snprintf(cap_text, sizeof(cap_text), "%lld\n", (long long)max);
	struct stat sd, ss;
	int sfd = open(stamp, O_RDONLY | O_CLOEXEC);
	if (sfd >= 0) {
		ssize_t k = read(sfd, had, sizeof(had) - 1);
		had[k > 0 ? k : 0] = 0;
		int newer = fstat(sfd, &ss) == 0 && stat(dir, &sd) == 0 &&
			    (ss.st_mtim.tv_sec > sd.st_mtim.tv_sec ||
			     (ss.st_mtim.tv_sec == sd.st_mtim.tv_sec && ss.st_mtim.tv_nsec > sd.st_mtim.tv_nsec));
		close(sfd);
		if (newer && strcmp(had, cap_text) == 0)
			return; /* nothing added since the last scan under this cap */
	}
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	struct entry *e = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;
	while ((de = readdir(dp)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len < 5 || len >= sizeof(e->name) || strcmp(de->d_name + len - 4, ".cfi") != 0)
			continue;
		char path[4096 + 100];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct entry *ne = realloc(e, ncap * sizeof(*e));
			if (!ne)
				break;
			e = ne;
			cap = ncap;
		}
		int64_t a = st.st_atim.tv_sec * 1000000000ll + st.st_atim.tv_nsec;
		int64_t w = st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
		snprintf(e[n].name, sizeof(e[n].name), "%s", de->d_name);
		e[n].size = (uint64_t)st.st_blocks * 512;
		e[n].used = a > w ? a : w;
		total += e[n].size;
		n++;
	}
	closedir(dp);
	if (total > (uint64_t)max) {
		vec_sort(e, n, sizeof(*e), by_use);
		for (size_t i = 0; i < n && total > (uint64_t)max / 4 * 3; i++) {
			char path[4096 + 100];
			snprintf(path, sizeof(path), "%s/%s", dir, e[i].name);
			if (unlink(path) == 0)
				total -= e[i].size;
		}
	}
	free(e);
	/* created (which moves the directory's time), then written after it */
	int fd = open(stamp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		/* a short write leaves a stamp that names no cap: the next scan runs */
		ssize_t w = write(fd, cap_text, strlen(cap_text));
		close(fd);
		if (w == (ssize_t)strlen(cap_text))
			utimensat(AT_FDCWD, stamp, NULL, 0);
	}
}

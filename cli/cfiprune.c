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
 */
#include "cli.h"
#include "paths.h"

#include <dirent.h>
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
		qsort(e, n, sizeof(*e), by_use);
		for (size_t i = 0; i < n && total > (uint64_t)max / 4 * 3; i++) {
			char path[4096 + 100];
			snprintf(path, sizeof(path), "%s/%s", dir, e[i].name);
			if (unlink(path) == 0)
				total -= e[i].size;
		}
	}
	free(e);
}

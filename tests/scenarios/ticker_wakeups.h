/*
 * ticker_wakeups.h - for scenario programs: how often rhea's ticker thread
 * has woken so far (its voluntary context switches, read from /proc).
 * Static, header-only: each scenario is one C file built on its own.
 */
#ifndef TICKER_WAKEUPS_H
#define TICKER_WAKEUPS_H
#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* Voluntary switches of the thread named rhea-ticker, -1 if none. */
static long ticker_wakeups(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	long n = -1;
	struct dirent *e;
	while (n < 0 && (e = readdir(d)) != NULL) {
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int is_ticker = fgets(buf, sizeof(buf), f) && strcmp(buf, "rhea-ticker\n") == 0;
		fclose(f);
		if (!is_ticker)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		while (fgets(buf, sizeof(buf), f))
			if (sscanf(buf, "voluntary_ctxt_switches: %ld", &n) == 1)
				break;
		fclose(f);
	}
	closedir(d);
	return n;
}

#endif

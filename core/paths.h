/*
 * paths.h - names the CLI and the agent must agree on, in one place.
 *
 * rhea attach's directory (cli/cmd_attach.c makes it, agent/attach.c reads
 * and writes in it, either may remove it) and the cache of compiled CFI
 * (agent/cficache.c uses it; rhea attach passes the CLI user's to the
 * agent, whose process's HOME is not its to write into).
 */
#ifndef RHEA_PATHS_H
#define RHEA_PATHS_H

#include <stddef.h>
#include <stdio.h>

/* /tmp/rhea-attach.XXXXXX, as the process sees it */
#define RHEA_ATTACH_DIR_PREFIX "/tmp/rhea-attach."
#define RHEA_ATTACH_AGENT "librhea.so"        /* a copy of the agent: a new file each attach */
#define RHEA_ATTACH_CONF "rhea-attach.conf"   /* KEY=VALUE lines, the RHEA_* settings */
#define RHEA_ATTACH_CONTROL "control"         /* FIFO: a byte, or no writer left, detaches */
#define RHEA_ATTACH_STATUS "status"           /* "started", "stopped", "failed: ..." */
#define RHEA_ATTACH_WARNINGS "warnings"       /* the agent's warnings, one a line */
#define RHEA_ATTACH_CACHE "cache"             /* a container's: its cfi/ of unwind tables */
/* Every file either side may leave there, for removing it. */
#define RHEA_ATTACH_FILES                                                                                 \
	RHEA_ATTACH_AGENT, RHEA_ATTACH_CONF, RHEA_ATTACH_CONTROL, RHEA_ATTACH_STATUS, RHEA_ATTACH_WARNINGS

/* rhea's cache directory from the settings get returns: $RHEA_CACHE_DIR,
 * else $XDG_CACHE_HOME/rhea, else $HOME/.cache/rhea.  0, or -1 when none
 * is set. */
static inline int rhea_cache_base(const char *(*get)(const char *), char *buf, size_t len)
{
	const char *b;
	if ((b = get("RHEA_CACHE_DIR")) && *b)
		snprintf(buf, len, "%s", b);
	else if ((b = get("XDG_CACHE_HOME")) && *b)
		snprintf(buf, len, "%s/rhea", b);
	else if ((b = get("HOME")) && *b)
		snprintf(buf, len, "%s/.cache/rhea", b);
	else
		return -1;
	return 0;
}

/*
 * The recording of a process other than rhea record's own child (a forked
 * child, or the program that child exec'ed into): "<base minus .rhea>.
 * <pid>[.<n>].rhea" into out (cap bytes, at least 64), n > 0 when the name
 * with a smaller n was taken.  The agent creates these, rhea record looks
 * for them.  No stdio: the agent calls it in a forked child.
 */
static inline void rhea_derived_name(char *out, size_t cap, const char *base, unsigned long pid, unsigned n)
{
	size_t bl = 0;
	while (base[bl])
		bl++;
	if (bl > 5 && base[bl - 5] == '.' && base[bl - 4] == 'r' && base[bl - 3] == 'h' && base[bl - 2] == 'e' &&
	    base[bl - 1] == 'a')
		bl -= 5;
	if (bl + 48 > cap)
		bl = cap - 48;
	size_t i = 0;
	for (; i < bl; i++)
		out[i] = base[i];
	unsigned long nums[2] = {pid, n};
	for (int k = 0; k < (n ? 2 : 1); k++) {
		char tmp[24];
		int d = 0;
		unsigned long v = nums[k];
		do
			tmp[d++] = (char)('0' + v % 10);
		while ((v /= 10) != 0);
		out[i++] = '.';
		while (d)
			out[i++] = tmp[--d];
	}
	const char *ext = ".rhea";
	for (int k = 0; k <= 5; k++)
		out[i++] = ext[k];
}

#endif

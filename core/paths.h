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

#endif

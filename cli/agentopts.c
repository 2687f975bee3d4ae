/* agentopts.c - the agent's settings on the command line (see agentopts.h). */
#include "agentopts.h"
#include "cli.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void agent_opts_init(struct agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->interval = 1000000;
	o->min_block = -1; /* the interval */
	o->buffer = 8 << 20;
	o->sample = 10000000;
	o->sample_main = -1; /* --sample */
	o->force_after = 1000000000;
	o->depth = 256;
	o->unwind = "dwarf";
	o->follow = 1;
	cli_parse_hooks("+alloc", &o->mask);
}

static int bad(const char *fmt, const char *arg)
{
	cli_err(fmt, arg);
	return -1;
}

int agent_opts_parse(struct agent_opts *o, int c, const char *arg)
{
	long v;
	switch (c) {
	case 'i':
		if ((o->interval = cli_parse_duration(arg)) < 10000)
			return bad("--interval %s: want a duration of at least 10us, like 1ms or 500us", arg);
		return 1;
	case 'H':
		return cli_parse_hooks(arg, &o->mask) < 0 ? -1 : 1;
	case 'U':
		if (strcmp(arg, "fp") && strcmp(arg, "dwarf"))
			return bad("--unwind %s: want fp or dwarf", arg);
		o->unwind = arg;
		return 1;
	case 'D':
		if (cli_parse_int(arg, 4, 1024, &v) != 0)
			return bad("--depth %s: want a number from 4 to 1024", arg);
		o->depth = v;
		return 1;
	case 'B':
		if ((o->min_block = cli_parse_duration(arg)) < 0)
			return bad("--min-block %s: want a duration like 1ms", arg);
		return 1;
	case 'b':
		if ((o->buffer = cli_parse_size(arg)) < (1 << 20) || o->buffer > (4ll << 30))
			return bad("--buffer %s: want a size from 1M to 4G", arg);
		return 1;
	case 'S':
		o->sample = cli_parse_duration(arg);
		if (o->sample < 0 || (o->sample > 0 && o->sample < 100000))
			return bad("--sample %s: want 0 or a duration of at least 100us, like 10ms", arg);
		return 1;
	case 'M':
		if ((o->sample_main = cli_parse_duration(arg)) < 100000)
			return bad("--sample-main %s: want a duration of at least 100us", arg);
		return 1;
	case 'A':
		if ((o->force_after = cli_parse_duration(arg)) < 0)
			return bad("--force-after %s: want a duration like 1s (0: never)", arg);
		return 1;
	case 'G':
		if (cli_parse_int(arg, SIGRTMIN, SIGRTMAX, &v) != 0) {
			cli_err("--signal %s: want a real-time signal number from %d to %d", arg, SIGRTMIN, SIGRTMAX);
			return -1;
		}
		o->signo = v;
		return 1;
	}
	return 0;
}

int agent_opts_other(struct agent_opts *o, int c, const char *arg, const char *cmd, char **argv,
		     const char *shortopts)
{
	int r = agent_opts_parse(o, c, arg);
	if (r == 0)
		return cli_bad_option(cmd, argv, shortopts);
	return r > 0 ? 0 : EXIT_BADINPUT;
}

void agent_opts_each(const struct agent_opts *o, void (*fn)(void *arg, const char *key, const char *val),
		     void *arg)
{
	char buf[64];
#define PUT(key, fmt, v)                                    \
	do {                                                \
		snprintf(buf, sizeof(buf), fmt, v);         \
		fn(arg, key, buf);                          \
	} while (0)
	PUT("RHEA_INTERVAL_NS", "%lld", (long long)o->interval);
	PUT("RHEA_MIN_BLOCK_NS", "%lld", (long long)(o->min_block >= 0 ? o->min_block : o->interval));
	PUT("RHEA_HOOKS_MASK", "%u", o->mask);
	PUT("RHEA_DEPTH", "%ld", o->depth);
	PUT("RHEA_BUFFER", "%lld", (long long)o->buffer);
	fn(arg, "RHEA_UNWIND", o->unwind);
	PUT("RHEA_SAMPLE_NS", "%lld", (long long)o->sample);
	PUT("RHEA_SAMPLE_MAIN_NS", "%lld", (long long)(o->sample_main >= 0 ? o->sample_main : o->sample));
	PUT("RHEA_FORCE_NS", "%lld", (long long)o->force_after);
	PUT("RHEA_SIGNAL", "%ld", o->signo);
	fn(arg, "RHEA_FOLLOW", o->follow ? "1" : "0");
#undef PUT
}

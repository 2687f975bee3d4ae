/*
 * agentopts.h - the agent's settings as `rhea record` and `rhea attach`
 * take them on their command lines and hand them over (as RHEA_*
 * environment variables, or the attach directory's rhea-attach.conf).
 */
#ifndef RHEA_AGENTOPTS_H
#define RHEA_AGENTOPTS_H

#include <stdint.h>
#include <stdio.h>

struct agent_opts {
	int64_t interval, min_block, buffer, sample, sample_main, force_after;
	long signo, depth;
	uint32_t mask; /* hook classes */
	const char *unwind;
	int follow;
};

/* getopt_long entries (their codes are what agent_opts_parse takes). */
#define AGENT_LONG_OPTIONS                                                                         \
	{"interval", required_argument, NULL, 'i'}, {"hooks", required_argument, NULL, 'H'},      \
	{"unwind", required_argument, NULL, 'U'}, {"depth", required_argument, NULL, 'D'},        \
	{"min-block", required_argument, NULL, 'B'}, {"buffer", required_argument, NULL, 'b'},    \
	{"sample", required_argument, NULL, 'S'}, {"sample-main", required_argument, NULL, 'M'},  \
	{"force-after", required_argument, NULL, 'A'}, {"signal", required_argument, NULL, 'G'}

void agent_opts_init(struct agent_opts *o);
/* Option c with argument arg: 1 taken, 0 not an agent option, -1 a bad
 * value (one line said so). */
int agent_opts_parse(struct agent_opts *o, int c, const char *arg);
/* A command's option switch's default branch: 0 when c was an agent
 * option, else the exit status after a message (one line: cli_bad_option
 * for what is no option of cmd's). */
int agent_opts_other(struct agent_opts *o, int c, const char *arg, const char *cmd, char **argv,
		     const char *shortopts);
/* Every setting as a RHEA_* name and its value. */
void agent_opts_each(const struct agent_opts *o, void (*fn)(void *arg, const char *key, const char *val),
		     void *arg);

#endif

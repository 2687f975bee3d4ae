/*
 * rhea.c - the rhea command: a table of subcommands, as perf does.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{"record", cmd_record, "run a program with the agent and record what its threads do"},
	{"report", cmd_report, "summarize a recording in the terminal (or as JSON)"},
	{"convert", cmd_convert, "write a recording as Perfetto, Chrome JSON, pprof, folded stacks or nanoscope"},
	{"attach", cmd_attach, "record a running process for a while, then leave it as it was"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rhea <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'rhea <command> --help' tells more.  rhea %s\n", RHEA_VERSION_STRING);
}

int main(int argc, char **argv)
{
	/* libdwfl asks debuginfod for every module without local debug info
	 * when DEBUGINFOD_URLS is set; an unanswered server would stall each
	 * report for 90 s per module.  Keep the user's setting, bound the wait. */
	setenv("DEBUGINFOD_TIMEOUT", "5", 0);
	if (argc < 2) {
		usage(stderr);
		return EXIT_BADINPUT;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("rhea %s\n", RHEA_VERSION_STRING);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	cli_err("'%s' is not a rhea command (see 'rhea --help')", argv[1]);
	return EXIT_BADINPUT;
}

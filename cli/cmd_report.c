/*
 * cmd_report.c - `rhea report [--json] FILE`.
 */
#include "cli.h"
#include "model.h"
#include "recording.h"
#include "report.h"
#include "symbolize.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rhea report [options] FILE.rhea [MORE.rhea...]\n"
		"\n"
		"Several recordings (a program and its children): one row per process.\n"
		"\n"
		"  --json          the same data, machine-readable (waits included)\n"
		"  --blocking      who waited on what, for how long, and who woke them\n"
		"  --stalls        every event-loop iteration longer than --stall, where its\n"
		"                  time went and what the other threads did meanwhile\n"
		"  --stall DUR     an iteration this long is a stall (default 50ms)\n"
		"  --top N         rows per table (default 15)\n"
		"  --end next|last when a function's slice ends: at the next sample (default)\n"
		"                  or after the last sample that saw it\n"
		"  --timeline corrected|raw\n"
		"                  corrected (default): a function the hooks' captures find\n"
		"                  far more often than the sampler does loses their time to\n"
		"                  its caller (a note names it); raw: as captured\n"
		"  --salvage       read a damaged recording up to the damage\n"
		"  --sysroot DIR   look for the program's files under DIR first (a container's\n"
		"                  root: /proc/PID/root while it runs; another machine's\n"
		"                  files), used where their build-id is the recorded one\n"
		"  --no-follow-exec\n"
		"                  FILE itself when its process exec'ed (by default the report\n"
		"                  is of the program the process became: a wrapper's exec)\n");
}

/* Several recordings: the processes table (report_processes), every file
 * loaded and checked first. */
static int report_several(char **paths, size_t n, int salvage, int policy, int raw, const struct report_opts *o)
{
	struct recording *recs = calloc(n, sizeof(*recs));
	if (!recs) {
		cli_err("out of memory");
		return 1;
	}
	size_t loaded = 0;
	int rc = 0;
	for (; loaded < n; loaded++)
		if ((rc = cli_load(paths[loaded], &recs[loaded], salvage)) != 0)
			break;
	/* symbolized with one symbolizer: the libraries they share are read once */
	struct symbolizer *sym = rc == 0 ? sym_new() : NULL;
	struct model *models = sym ? calloc(n, sizeof(*models)) : NULL;
	size_t built = 0;
	char **notes = NULL;
	if (rc == 0) {
		recording_sort_by_start(recs, n);
		for (; models && built < n; built++)
			if (model_build_shared(&models[built], &recs[built], policy, sym) < 0) {
				model_free(&models[built]);
				break;
			}
		struct report_opts with = *o;
		if (built == n && !raw)
			with.notes = notes = cli_correct_programs(models, n);
		if (built < n || (!raw && !notes)) {
			cli_err("out of memory");
			rc = 1;
		} else if (report_processes(recs, models, n, stdout, &with) < 0 || fflush(stdout) != 0) {
			cli_err("cannot write the report to standard output");
			rc = 1;
		}
	}
	cli_free_notes(notes);
	for (size_t k = 0; k < built; k++)
		model_free(&models[k]);
	free(models);
	sym_free(sym);
	for (size_t k = 0; k < loaded; k++)
		recording_free(&recs[k]);
	free(recs);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'}, {"top", required_argument, NULL, 't'},
		{"salvage", no_argument, NULL, 's'}, {"end", required_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'}, {"blocking", no_argument, NULL, 'b'},
		{"stalls", no_argument, NULL, 'S'}, {"stall", required_argument, NULL, 'T'},
		{"timeline", required_argument, NULL, 'L'}, {"no-follow-exec", no_argument, NULL, 'X'},
		{"sysroot", required_argument, NULL, 'R'},  {NULL, 0, NULL, 0},
	};
	struct report_opts o = {.top = 15, .width = 80};
	int salvage = 0, policy = MODEL_END_NEXT, raw = 0, follow_exec = 1, c;
	optind = 1;
	opterr = 0; /* one line of our own (cli_bad_option) */
	static const char shortopts[] = "jt:h";
	while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 't': {
			long v;
			if (cli_parse_int(optarg, 1, 1000000, &v) != 0) {
				cli_err("--top %s: want a number of rows from 1", optarg);
				return EXIT_BADINPUT;
			}
			o.top = (int)v;
			break;
		}
		case 's': salvage = 1; break;
		case 'X': follow_exec = 0; break;
		case 'R':
			if (cli_sysroot(optarg) != 0)
				return EXIT_BADINPUT;
			break;
		case 'b': o.blocking = 1; break;
		case 'S': o.stalls = 1; break;
		case 'T': {
			int64_t v = cli_parse_duration(optarg);
			if (v <= 0) {
				cli_err("--stall %s: want a duration such as 50ms or 1s", optarg);
				return EXIT_BADINPUT;
			}
			o.stall_ns = (uint64_t)v;
			break;
		}
		case 'e': /* MODEL_END_NEXT, MODEL_END_LAST */
			if ((policy = cli_parse_choice("--end", optarg, "next", "last")) < 0)
				return EXIT_BADINPUT;
			break;
		case 'L':
			if ((raw = cli_parse_choice("--timeline", optarg, "corrected", "raw")) < 0)
				return EXIT_BADINPUT;
			break;
		case 'h': usage(stdout); return 0;
		default: return cli_bad_option("report", argv, shortopts);
		}
	}
	if (optind >= argc) {
		cli_err("report: want a recording (rhea report FILE.rhea [MORE.rhea...])");
		return EXIT_BADINPUT;
	}
	struct winsize ws;
	if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 60)
		o.width = ws.ws_col;
	argc = optind + (int)cli_unique_paths(argv + optind, (size_t)(argc - optind));
	if (optind < argc - 1) {
		if (o.blocking || o.stalls) {
			cli_err("report: --%s takes one recording", o.blocking ? "blocking" : "stalls");
			return EXIT_BADINPUT;
		}
		return report_several(argv + optind, (size_t)(argc - optind), salvage, policy, raw, &o);
	}
	struct recording r;
	int rc = cli_load(argv[optind], &r, salvage);
	if (rc)
		return rc;
	struct report_image *before = NULL;
	if (follow_exec && cli_follow_exec(&r, &before, &o.nbefore, salvage) < 0) {
		recording_free(&r);
		cli_free_images(before, o.nbefore);
		return 1;
	}
	o.before = before;
	struct report_image *kids = NULL;
	char hint[2 * PATH_MAX + 16];
	if (cli_children(r.path, &r, &kids, &o.nchildren) < 0) {
		cli_err("out of memory");
		recording_free(&r);
		cli_free_images(before, o.nbefore);
		return 1;
	}
	o.children = kids;
	if (o.nchildren) {
		cli_all_processes(r.path, r.hdr.pid, hint, sizeof(hint));
		o.all_hint = hint;
	}
	struct model m;
	if (model_build(&m, &r, policy) < 0) {
		cli_err("out of memory");
		return 1;
	}
	struct model_cut cuts[8];
	if (!raw) {
		o.ncuts = model_correct(&m, cuts, 8);
		o.cuts = cuts;
	}
	rc = report_write(&m, stdout, &o);
	model_free(&m);
	recording_free(&r);
	cli_free_images(before, o.nbefore);
	cli_free_images(kids, o.nchildren);
	if (rc < 0 || fflush(stdout) != 0) {
		cli_err("cannot write the report to standard output");
		return 1;
	}
	return 0;
}

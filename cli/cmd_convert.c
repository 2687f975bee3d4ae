/*
 * cmd_convert.c - `rhea convert [-f FORMAT] [-o OUT] [filters] FILE.rhea`:
 * write a recording as a Perfetto trace (default), Chrome JSON, a pprof
 * profile, folded stacks or a Nanoscope trace (export/convert.h).
 *
 * Order of work: options, then the recording (bad input exits 2 before
 * anything is created), then the output file (an unwritable path exits 2
 * before symbolization, the slow part), then the model and the writer.  A
 * failed write removes the partial output.
 */
#include "cli.h"
#include "report.h"
#include "convert.h"
#include "symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const struct {
	const char *name;
	int format;
	const char *ext;
} formats[] = {
	{"perfetto", CONVERT_PERFETTO, ".pftrace"},
	{"chrome", CONVERT_CHROME, ".json"},
	{"json", CONVERT_CHROME, ".json"},
	{"pprof", CONVERT_PPROF, ".pb.gz"},
	{"folded", CONVERT_FOLDED, ".folded"},
	{"nanoscope", CONVERT_NANOSCOPE, ".nanoscope.txt"},
};

static const char *const weights[CONVERT_NVALUES] = {"wall", "cpu", "alloc-count", "alloc-bytes", "cpu-samples"};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rhea convert [options] FILE.rhea [MORE.rhea...]\n"
		"\n"
		"Several recordings (a program and its children's, one process each) go into\n"
		"one Perfetto or Chrome trace, on one time line, one folded file whose stacks\n"
		"start with the program's name, or one pprof profile labelled by program and pid.\n"
		"\n"
		"  -f, --format FMT   perfetto (default: FILE.pftrace, for ui.perfetto.dev),\n"
		"                     chrome (FILE.json, trace-event JSON), pprof (FILE.pb.gz,\n"
		"                     for go tool pprof / Pyroscope), folded (FILE.folded, for\n"
		"                     flamegraph.pl / speedscope), nanoscope (FILE.nanoscope.txt)\n"
		"  -o, --output OUT   where to write ('-' = standard output)\n"
		"  --weight W         folded: wall (default), cpu, alloc-count, alloc-bytes or\n"
		"                     cpu-samples (the sampler's captures: unbiased CPU)\n"
		"  --end next|last    when a function's slice ends: at the next sample (default)\n"
		"                     or after the last sample that saw it (as in rhea report)\n"
		"  --timeline corrected|raw\n"
		"                     corrected (default): hooked call sites the sampler does\n"
		"                     not confirm lose their time to the caller (rhea report\n"
		"                     names them); raw: every capture's stack as taken\n"
		"  --thread T         only thread T (tid or name); repeat or separate with commas\n"
		"  --from DUR         only samples from DUR after the recording's start (1.5s)\n"
		"  --to DUR           ... up to DUR after the start\n"
		"  --min-dur DUR      drop slices shorter than DUR (their children go too)\n"
		"  --stall DUR        perfetto: event-loop iterations at least DUR long go on a\n"
		"                     \"stalls\" track under their thread (default 50ms)\n"
		"  --samples all|cpu  perfetto: the flame graph's samples are every capture\n"
		"                     (default), or the sampler's alone: an unbiased CPU profile\n"
		"  --salvage          read a damaged recording up to the damage\n"
		"  --sysroot DIR      look for the program's files under DIR first (a\n"
		"                     container's root: /proc/PID/root while it runs)\n"
		"  --no-follow-exec   FILE itself when its process exec'ed (by default the\n"
		"                     program the process became: a wrapper's exec)\n"
		"  --timing           print load, symbolization and conversion times\n"
		"  -v, --verbose      also print the symbolizer's warnings\n"
		"  -q, --quiet        no summary line\n");
}

static double now_s(void)
{
	return (double)cli_now_ns() / 1e9;
}

static int parse_dur(const char *opt, const char *arg, int64_t *out)
{
	int64_t v = cli_parse_duration(arg);
	if (v < 0) {
		cli_err("%s %s: want a duration such as 1.5s, 200ms, 50us or 1000ns", opt, arg);
		return -1;
	}
	*out = v;
	return 0;
}

static char *default_output(const char *in, const char *ext)
{
	size_t n = strlen(in);
	if (n > 5 && strcmp(in + n - 5, ".rhea") == 0)
		n -= 5;
	char *out = malloc(n + strlen(ext) + 1);
	if (!out)
		return NULL;
	memcpy(out, in, n);
	strcpy(out + n, ext);
	return out;
}

/*
 * Where the output is written first.  A regular file (or a new one) is
 * written as a temporary file next to it, renamed over it only once whole:
 * a failed conversion (a full disk, a bad --thread) used to truncate and
 * then remove the file the user already had there.  *tmp gets the
 * temporary's name (free it), NULL when writing in place (standard output,
 * a device, a pipe).  For a symbolic link the file it names is replaced.
 */
static FILE *open_output(const char *outpath, char **tmp, char **final)
{
	*tmp = NULL;
	*final = NULL;
	struct stat st;
	if (stat(outpath, &st) == 0 && !S_ISREG(st.st_mode))
		return fopen(outpath, "wb");
	char *target = realpath(outpath, NULL);
	if (!target)
		target = strdup(outpath); /* a new file */
	size_t n = target ? strlen(target) + 32 : 0;
	char *t = target ? malloc(n) : NULL;
	if (!t) {
		free(target);
		errno = ENOMEM;
		return NULL;
	}
	snprintf(t, n, "%s.tmp.%d", target, (int)getpid());
	int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
	if (!f) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(t);
		}
		free(t);
		free(target);
		errno = e;
		return NULL;
	}
	*tmp = t;
	*final = target;
	return f;
}

/* What one recording's conversion reports for the summary line. */
struct converted {
	size_t threads;
	uint64_t records, samples, nodes;
	double symbolize_s, convert_s;
};

/* Convert one loaded recording into f (part: its place among several). */
static int convert_one(struct model *m, const struct convert_opts *o, FILE *f, struct convert_part *part,
		       struct converted *done)
{
	struct recording *r = m->rec;
	double t2 = now_s();
	struct convert_ctx cx;
	char err[1024];
	int rc = EXIT_BADINPUT;
	if (convert_init(&cx, m, o, err, sizeof(err)) < 0) {
		cli_err("%s", err);
		goto out;
	}
	size_t nsel = 0;
	for (size_t i = 0; i < r->nthreads; i++)
		nsel += cx.selected[i];
	if (o->format == CONVERT_NANOSCOPE && o->nthreads && nsel != 1) {
		cli_err("--thread selects %zu threads: a Nanoscope trace holds one", nsel);
		goto out;
	}
	const char *in = r->path;
	if (!r->salvaged && recording_write_error(r))
		cli_err("warning: %s: the agent could not write it (%s): what came after is missing", in,
			recording_write_error(r));
	else if (!r->have_end && !r->salvaged && r->end_outside && !r->end_recovered)
		cli_err("warning: %s: the agent did not write the end (SIGKILL, a raw exit_group or a full "
			"disk): its last records are missing", in);
	else if (!r->have_end && !r->salvaged && !r->end_outside)
		cli_err("warning: %s was cut short (no end marker: killed, disk full, or still running): "
			"converting what it holds", in);
	else if (r->salvaged)
		cli_err("warning: %s: %s: converting what precedes it", in, r->problem);
	if (cx.windowed && part->count == 1) {
		uint64_t n = 0;
		for (size_t i = 0; i < r->nthreads; i++) {
			size_t lo, hi;
			convert_range(&cx, &r->threads[i], &lo, &hi);
			n += cx.selected[i] ? hi - lo : 0;
		}
		if (n == 0)
			cli_err("warning: no sample begins between --from and --to (the recording spans %.3f s)",
				r->last_ns > cx.origin_ns ? (double)(r->last_ns - cx.origin_ns) / 1e9 : 0.0);
	}
	int wrc;
	switch (o->format) {
	case CONVERT_PERFETTO: wrc = perfetto_write_part(&cx, f, part); break;
	case CONVERT_CHROME: wrc = chrome_write_part(&cx, f, part); break;
	case CONVERT_PPROF: wrc = pprof_write_part(&cx, f, part); break;
	case CONVERT_FOLDED: wrc = folded_write_part(&cx, f, part); break;
	default: wrc = nanoscope_write(&cx, f); break;
	}
	if (wrc < 0) {
		rc = -1;
		goto out;
	}
	rc = 0;
	done->threads += nsel;
	done->records += cx.records;
	done->samples += r->nsamples;
	done->nodes += r->nnodes;
	done->convert_s += now_s() - t2;
out:
	convert_free(&cx);
	return rc;
}

/* The models of recs[0..n), corrected (unless raw): one recording on its
 * own evidence, several pooled by program (cli_correct_programs); the
 * notes said.  NULL when out of memory (said). */
static struct model *build_models(struct recording *recs, size_t n, const struct convert_opts *o, int raw,
				  int quiet, struct symbolizer *sym, struct converted *done)
{
	double t1 = now_s();
	struct model *ms = sym ? calloc(n, sizeof(*ms)) : NULL;
	size_t built = 0;
	for (; ms && built < n; built++)
		if (model_build_shared(&ms[built], &recs[built], o->policy, sym) < 0) {
			model_free(&ms[built]);
			break;
		}
	char **notes = NULL;
	struct model_cut cuts[4];
	int ncuts = 0, oom = !ms || built < n;
	if (!oom && !raw && n == 1)
		ncuts = model_correct(&ms[0], cuts, 4);
	else if (!oom && !raw)
		oom = !(notes = cli_correct_programs(ms, n));
	if (oom) {
		for (size_t k = 0; ms && k < built; k++)
			model_free(&ms[k]);
		free(ms);
		cli_err("out of memory");
		return NULL;
	}
	char note[1024];
	if (!quiet && n == 1 && model_cut_note(&ms[0], cuts, ncuts, note, sizeof(note)))
		cli_err("note: %s", note);
	for (size_t i = 0; !quiet && notes && notes[i]; i++)
		cli_err("note: %s", notes[i]);
	cli_free_notes(notes);
	done->symbolize_s += now_s() - t1;
	return ms;
}

/* Perfetto, several recordings, every thread and the whole time: the flow
 * arrows from releases of process-shared objects to the waits in other
 * processes they ended (recording_xwakes), after the parts. */
static int write_xflows(struct recording *recs, size_t nin, const struct convert_opts *o, FILE *f,
			struct convert_part *part)
{
	if (o->format != CONVERT_PERFETTO || nin < 2 || o->nthreads || o->from_ns > 0 || o->to_ns >= 0)
		return 0;
	struct xwake *w = NULL;
	long nw = recording_xwakes(recs, nin, &w);
	struct perfetto_xflow *v = nw > 0 ? calloc((size_t)nw, sizeof(*v)) : NULL;
	size_t n = 0;
	for (long i = 0; v && i < nw; i++) {
		if (!w[i].rel)
			continue;
		const struct recording *rr = &recs[w[i].rrec];
		size_t rt = 0;
		while (rt < rr->nthreads && rr->threads[rt].tid != w[i].rel->tid)
			rt++;
		if (rt < rr->nthreads)
			v[n++] = (struct perfetto_xflow){w[i].rel->time_ns, w[i].wait->end_ns, (unsigned)w[i].rrec,
							 (unsigned)w[i].wrec, rt, w[i].wthread};
	}
	int rc = nw < 0 || (nw > 0 && !v) ? -1 : perfetto_write_xflows(f, part, v, n);
	free(v);
	free(w);
	return rc;
}

/*
 * Convert the recordings in[0..nin) into one output.  Every recording is
 * loaded (and checked) before the output is created; with several, they
 * share time 0, the earliest start, so that --from/--to and Chrome's
 * relative timestamps mean the same instant in each.
 */
static int convert_files(char **in, size_t nin, const char *output, const char *ext, const char *fmt_name,
			 struct convert_opts *o, int salvage, int timing, int verbose, int quiet, int raw, int follow_exec)
{
	char *outpath = output ? strdup(output) : default_output(in[0], ext);
	if (!outpath) {
		cli_err("out of memory");
		return 1;
	}
	int rc = EXIT_BADINPUT;
	int to_stdout = strcmp(outpath, "-") == 0;
	struct recording *recs = calloc(nin, sizeof(*recs));
	uint8_t *hits = nin > 1 && o->nthreads ? calloc(o->nthreads, 1) : NULL;
	size_t loaded = 0;
	char *tmp = NULL, *final = NULL;
	FILE *f = NULL;
	if (!recs || (nin > 1 && o->nthreads && !hits)) {
		cli_err("out of memory");
		rc = 1;
		goto out;
	}
	for (size_t k = 0; k < nin; k++) {
		struct stat si, so;
		if (!to_stdout && stat(in[k], &si) == 0 && stat(outpath, &so) == 0 && si.st_dev == so.st_dev &&
		    si.st_ino == so.st_ino) {
			cli_err("%s: the output would overwrite the recording (give -o)", outpath);
			goto out;
		}
	}
	double t0 = now_s();
	for (; loaded < nin; loaded++)
		if ((rc = cli_load(in[loaded], &recs[loaded], salvage)) != 0)
			goto out;
	if (nin == 1 && follow_exec) { /* the program the process became (execchain.c) */
		struct report_image *before;
		size_t nbefore;
		if (cli_follow_exec(&recs[0], &before, &nbefore, salvage) < 0) {
			cli_free_images(before, nbefore);
			rc = 1;
			goto out;
		}
		if (nbefore && !quiet)
			fprintf(stderr,
				"rhea: %s exec'ed into %s (%zu program%s later): that is converted (--no-follow-exec: "
				"%s itself)\n",
				in[0], recs[0].path, nbefore, nbefore == 1 ? "" : "s", in[0]);
		cli_free_images(before, nbefore);
	}
	double t1 = now_s();
	if (nin > 1) {
		/* In the order they started: a process that exec'ed has a
		 * recording per image under one pid, and a trace processor
		 * gives a thread's events to the pid's latest process. */
		recording_sort_by_start(recs, nin);
		o->origin_ns = recording_start(&recs[0]);
		o->thread_hits = hits;
	}

	f = to_stdout ? stdout : open_output(outpath, &tmp, &final);
	if (!f) {
		cli_err("%s: cannot write: %s", outpath, strerror(errno));
		rc = 1; /* (the output, not the input: a missing directory, a read-only one) */
		goto out;
	}
	static char iobuf[1 << 16];
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
	struct convert_part part = {0, (unsigned)nin, 0, 0, NULL, NULL};
	struct converted done;
	memset(&done, 0, sizeof(done));
	/* one symbolizer for all: a library the processes share is read once */
	struct symbolizer *sym = sym_new();
	if (!sym) {
		cli_err("out of memory");
		rc = 1;
	}
	struct model *models = rc == 0 ? build_models(recs, nin, o, raw, quiet, sym, &done) : NULL;
	if (!models)
		rc = 1;
	for (size_t k = 0; k < nin && rc == 0; k++)
		rc = convert_one(&models[k], o, f, &part, &done);
	if (rc == 0)
		rc = write_xflows(recs, nin, o, f, &part);
	convert_part_end(&part); /* a writer's state, when a part failed */
	for (size_t k = 0; models && k < nin; k++)
		model_free(&models[k]);
	free(models);
	if (verbose) {
		const char *w;
		for (size_t i = 0; (w = sym_warning(sym, i)) != NULL; i++)
			cli_err("warning: %s", w);
	}
	sym_free(sym);
	for (size_t i = 0; rc == 0 && hits && i < o->nthreads; i++)
		if (!hits[i]) {
			cli_err("--thread %s: no thread with that id or name in any of the recordings", o->threads[i]);
			rc = EXIT_BADINPUT;
		}
	if (rc == 0 && fflush(f) != 0)
		rc = -1;
	if (rc < 0) {
		cli_err("%s: write failed: %s", to_stdout ? "standard output" : outpath,
			errno ? strerror(errno) : "out of memory");
		rc = 1;
	}
	if (rc == 0 && timing) {
		double io = (t1 - t0) + done.convert_s;
		cli_err("timing: load %.3f s, symbolize %.3f s, convert %.3f s; %llu records, "
			"%llu stack nodes, %.0f records/s excluding symbolization",
			t1 - t0, done.symbolize_s, done.convert_s, (unsigned long long)done.samples,
			(unsigned long long)done.nodes, io > 0 ? (double)done.samples / io : 0.0);
	}
	if (rc == 0 && !quiet) {
		char what[64];
		if (nin > 1)
			snprintf(what, sizeof(what), "%zu recordings", nin);
		cli_err("converted %s to %s (%s): %zu thread%s, %llu records", nin > 1 ? what : in[0],
			to_stdout ? "standard output" : outpath, fmt_name, done.threads, done.threads == 1 ? "" : "s",
			(unsigned long long)done.records);
	}
	if (!to_stdout) {
		if (fclose(f) != 0 && rc == 0) {
			cli_err("%s: write failed: %s", outpath, strerror(errno));
			rc = 1;
		}
		if (tmp && rc == 0 && rename(tmp, final) != 0) {
			cli_err("%s: cannot write: %s", outpath, strerror(errno));
			rc = 1;
		}
		if (tmp && rc != 0)
			unlink(tmp); /* what was at outpath stays as it was */
	}
out:
	free(tmp);
	free(final);
	for (size_t k = 0; k < loaded; k++)
		recording_free(&recs[k]);
	free(recs);
	free(hits);
	free(outpath);
	return rc;
}

int cmd_convert(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'}, {"output", required_argument, NULL, 'o'},
		{"weight", required_argument, NULL, 'w'}, {"end", required_argument, NULL, 'e'},
		{"thread", required_argument, NULL, 't'}, {"from", required_argument, NULL, 'F'},
		{"to", required_argument, NULL, 'T'},     {"min-dur", required_argument, NULL, 'm'},
		{"stall", required_argument, NULL, 'L'},     {"samples", required_argument, NULL, 'P'},
		{"salvage", no_argument, NULL, 's'},      {"timing", no_argument, NULL, 'S'},
		{"verbose", no_argument, NULL, 'v'},      {"quiet", no_argument, NULL, 'q'},
		{"timeline", required_argument, NULL, 'l'}, {"help", no_argument, NULL, 'h'},
		{"no-follow-exec", no_argument, NULL, 'X'}, {"sysroot", required_argument, NULL, 'R'},
		{NULL, 0, NULL, 0},
	};
	struct convert_opts o = {CONVERT_PERFETTO, MODEL_END_NEXT, CONVERT_V_WALL, NULL, 0, 0, -1, 0, 0, 0, 0, NULL};
	const char *fmt_name = "perfetto", *ext = ".pftrace", *output = NULL;
	int salvage = 0, timing = 0, verbose = 0, quiet = 0, weight_given = 0, raw = 0, follow_exec = 1, c;
	char **threads = NULL;
	size_t nthreads = 0;
	int rc = EXIT_BADINPUT;
	optind = 1;
	opterr = 0; /* one line of our own instead of getopt's and the usage */
	while ((c = getopt_long(argc, argv, ":f:o:vqh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': {
			size_t i;
			for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
				if (strcmp(optarg, formats[i].name) == 0)
					break;
			if (i == sizeof(formats) / sizeof(formats[0])) {
				cli_err("--format %s: unknown format (want perfetto, chrome, pprof, folded or nanoscope)",
					optarg);
				goto out;
			}
			o.format = formats[i].format;
			fmt_name = formats[i].name;
			ext = formats[i].ext;
			break;
		}
		case 'o': output = optarg; break;
		case 'l':
			if ((raw = cli_parse_choice("--timeline", optarg, "corrected", "raw")) < 0)
				goto out;
			break;
		case 'w': {
			int i;
			for (i = 0; i < CONVERT_NVALUES; i++)
				if (strcmp(optarg, weights[i]) == 0)
					break;
			if (i == CONVERT_NVALUES) {
				cli_err("--weight %s: want wall, cpu, alloc-count, alloc-bytes or cpu-samples", optarg);
				goto out;
			}
			o.weight = i;
			weight_given = 1;
			break;
		}
		case 'e': /* MODEL_END_NEXT, MODEL_END_LAST */
			if ((o.policy = cli_parse_choice("--end", optarg, "next", "last")) < 0)
				goto out;
			break;
		case 't': {
			char *copy = strdup(optarg), *save = NULL;
			for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				char **p = realloc(threads, (nthreads + 1) * sizeof(char *));
				if (!p) {
					free(copy);
					cli_err("out of memory");
					goto out;
				}
				threads = p;
				threads[nthreads++] = strdup(tok);
			}
			free(copy);
			break;
		}
		case 'F':
			if (parse_dur("--from", optarg, &o.from_ns) < 0)
				goto out;
			break;
		case 'T':
			if (parse_dur("--to", optarg, &o.to_ns) < 0)
				goto out;
			break;
		case 'm': {
			int64_t v;
			if (parse_dur("--min-dur", optarg, &v) < 0)
				goto out;
			o.min_dur_ns = (uint64_t)v;
			break;
		}
		case 'L': {
			int64_t v;
			if (parse_dur("--stall", optarg, &v) < 0)
				goto out;
			if (v == 0) {
				cli_err("--stall %s: want a duration above zero, such as 50ms", optarg);
				goto out;
			}
			o.stall_ns = (uint64_t)v;
			break;
		}
		case 'P':
			if ((o.cpu_samples = cli_parse_choice("--samples", optarg, "all", "cpu")) < 0)
				goto out;
			break;
		case 's': salvage = 1; break;
		case 'X': follow_exec = 0; break;
		case 'R':
			if (cli_sysroot(optarg) != 0)
				goto out;
			break;
		case 'S': timing = 1; break;
		case 'v': verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); rc = 0; goto out;
		case ':':
			cli_err("convert: %s needs a value (see rhea convert --help)", argv[optind - 1]);
			goto out;
		default:
			cli_err("convert: unknown option %s (see rhea convert --help)", argv[optind - 1]);
			goto out;
		}
	}
	o.threads = (const char *const *)threads;
	o.nthreads = nthreads;
	int nin = (int)cli_unique_paths(argv + optind, (size_t)(argc - optind));
	if (nin < 1) {
		cli_err("convert: want a recording (rhea convert [-f FORMAT] FILE.rhea [MORE.rhea...])");
		goto out;
	}
	if (nin > 1 && o.format == CONVERT_NANOSCOPE) {
		cli_err("-f nanoscope takes one recording (it holds one thread)");
		goto out;
	}
	if (weight_given && o.format != CONVERT_FOLDED) {
		cli_err("--weight applies to -f folded only (pprof carries every weight)");
		goto out;
	}
	if (o.to_ns >= 0 && o.to_ns <= o.from_ns) {
		cli_err("--from must come before --to");
		goto out;
	}
	rc = convert_files(argv + optind, (size_t)nin, output, ext, fmt_name, &o, salvage, timing, verbose, quiet,
			   raw, follow_exec);
out:
	for (size_t i = 0; i < nthreads; i++)
		free(threads[i]);
	free(threads);
	return rc;
}

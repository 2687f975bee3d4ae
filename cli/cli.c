/* cli.c - helpers shared by the subcommands (see cli.h). */
#include "cli.h"
#include "recording.h"
#include "rfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_err(const char *fmt, ...)
{
	va_list ap;
	fputs("rhea: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_parse_choice(const char *option, const char *s, const char *first, const char *second)
{
	if (strcmp(s, first) == 0)
		return 0;
	if (strcmp(s, second) == 0)
		return 1;
	cli_err("%s %s: want %s or %s", option, s, first, second);
	return -1;
}

int64_t cli_parse_duration(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	if (*end == 0 && v != 0)
		return -1; /* a unit, please: `-d 3` meant 3 ns, not 3 s */
	if (*end == 0 || strcmp(end, "ns") == 0)
		mul = 1;
	else if (strcmp(end, "us") == 0)
		mul = 1e3;
	else if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "s") == 0)
		mul = 1e9;
	else
		return -1;
	return (int64_t)(v * mul + 0.5);
}

int64_t cli_parse_size(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 0: break;
	case 'K': mul = 1024; break;
	case 'M': mul = 1024 * 1024; break;
	case 'G': mul = 1024.0 * 1024 * 1024; break;
	default: return -1;
	}
	if (*end && end[1] && strcasecmp(end + 1, "b") && strcasecmp(end + 1, "ib"))
		return -1;
	return (int64_t)(v * mul);
}

int cli_load(const char *path, struct recording *r, int salvage)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		cli_err("%s: %s", path, strerror(errno));
		return EXIT_BADINPUT;
	}
	if (S_ISDIR(st.st_mode)) {
		cli_err("%s: is a directory, not a recording", path);
		return EXIT_BADINPUT;
	}
	char err[600];
	int rc = recording_load(path, r, salvage, err, sizeof(err));
	if (rc != 0) {
		if (rc == RFILE_ERR_TRUNCATED || rc == RFILE_ERR_CORRUPT)
			cli_err("%s: %s (--salvage reads what precedes it)", path, err);
		else
			cli_err("%s: %s", path, err);
		recording_free(r);
		return EXIT_BADINPUT;
	}
	return 0;
}

const char *cli_getenv(const char *name)
{
	return getenv(name);
}

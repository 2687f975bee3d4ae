/*
 * fdcloser - a daemon-style program that closes every descriptor above 2,
 * then writes a file of its own.
 *
 * Usage: fdcloser MODE FILE.  MODE says how the descriptors are closed:
 * "loop" (close(3) .. close(1023)), "range" (close_range(3, ~0U, 0)),
 * "from" (closefrom(3)), "dup" (dup2 of /dev/null onto 3 .. 1023, then
 * close of each), "raw" (the close_range system call itself, which no
 * hook sees).
 *
 * Ground truth: FILE then holds exactly LINES lines "line <i>\n" (i from
 * 0), nothing else; between lines work() makes ALLOCS_PER_LINE allocations
 * of 100 bytes (LINES x ALLOCS_PER_LINE = 30000 in all) and the program
 * sleeps 1 ms, so that the agent's writer flushes several times after the
 * closing.  Exits 0, or 3 when a write of FILE fails.
 *
 * Expected: FILE is exactly as written (a tracer whose descriptor the
 * program closed and whose number the program's open then reused wrote
 * its recording into FILE); with every mode but "raw" the recording is
 * complete and counts work's 30000 allocations; with "raw" the agent
 * notices before writing and switches itself off.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LINES 300
#define ALLOCS_PER_LINE 100

__attribute__((noinline)) void work(void)
{
	for (int j = 0; j < ALLOCS_PER_LINE; j++) {
		void *p = malloc(100);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fdcloser loop|range|from|dup|raw FILE\n");
		return 2;
	}
	const char *mode = argv[1];
	if (strcmp(mode, "loop") == 0) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	} else if (strcmp(mode, "range") == 0) {
		close_range(3, ~0U, 0);
	} else if (strcmp(mode, "from") == 0) {
		closefrom(3);
	} else if (strcmp(mode, "dup") == 0) {
		int null = open("/dev/null", O_RDONLY);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != null)
				dup2(null, fd);
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
	} else if (strcmp(mode, "raw") == 0) {
		syscall(SYS_close_range, 3, ~0U, 0);
	} else {
		fprintf(stderr, "fdcloser: unknown mode %s\n", mode);
		return 2;
	}
	int f = open(argv[2], O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (f < 0)
		return 3;
	for (int i = 0; i < LINES; i++) {
		char line[32];
		int n = snprintf(line, sizeof(line), "line %d\n", i);
		if (write(f, line, (size_t)n) != n)
			return 3;
		work();
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	close(f);
	return 0;
}

/*
 * runstat.c - run one command and measure what it cost: wall time, CPU time
 * (user + system) and peak RSS of the whole process tree the command waited
 * for, the way bench/run.sh needs it for every cell of its table.
 *
 *   runstat [-o FILE] [-t SECONDS] [-q] -- command [args...]
 *
 * Prints (or appends to FILE) one line:
 *
 *   wall_ns user_ns sys_ns maxrss_kb status csw
 *
 * status is the exit code, 128+N for a fatal signal N, or "timeout" when the
 * command outlived -t and its process group was killed.  csw: the context
 * switches of the tree, voluntary and involuntary (W2's CPU time follows
 * them, ~5 us each here: bench/report.sh compares its runs at equal
 * switches).  -q sends the
 * command's stdout to /dev/null (stderr is kept).
 *
 * Why wait4 and not getrusage(RUSAGE_CHILDREN): wait4 returns the child's
 * own usage plus that of every descendant it reaped (the kernel reports
 * RUSAGE_BOTH for a zombie), so the cost of a wrapper (`rhea record`,
 * `perf record`, heaptrack's interpreter) is counted together with the
 * program it runs, which is the overhead a user pays.  ru_maxrss is the
 * largest single process of that tree, not the sum.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed++;
}

static void usage(void)
{
	fprintf(stderr, "usage: runstat [-o FILE] [-t SECONDS] [-q] -- command [args...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	double timeout = 0;
	int quiet = 0, opt;

	while ((opt = getopt(argc, argv, "+o:t:q")) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 't':
			timeout = atof(optarg);
			break;
		case 'q':
			quiet = 1;
			break;
		default:
			usage();
		}
	}
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (optind >= argc)
		usage();

	uint64_t t0 = now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		perror("runstat: fork");
		return 2;
	}
	if (pid == 0) {
		setpgid(0, 0); /* so that a timeout can kill the whole tree */
		if (quiet) {
			int fd = open("/dev/null", O_WRONLY);
			if (fd >= 0) {
				dup2(fd, 1);
				close(fd);
			}
		}
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "runstat: %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);

	int status = 0, timed_out = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	if (timeout > 0) {
		/* No SA_RESTART: the alarm interrupts wait4 below. */
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigaction(SIGALRM, &sa, NULL);
		struct itimerval it = {{0, 0}, {(time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6)}};
		setitimer(ITIMER_REAL, &it, NULL);
	}
	for (;;) {
		pid_t r = wait4(pid, &status, 0, &ru);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			perror("runstat: wait4");
			return 2;
		}
		if (alarmed == 1) {
			/* Too long: TERM the group, KILL it a second later. */
			timed_out = 1;
			kill(-pid, SIGTERM);
			alarmed = 2;
			struct itimerval it = {{0, 0}, {1, 0}};
			setitimer(ITIMER_REAL, &it, NULL);
		} else if (alarmed == 3) {
			kill(-pid, SIGKILL);
		}
	}
	uint64_t wall = now_ns() - t0;

	char st[32];
	if (timed_out)
		snprintf(st, sizeof(st), "timeout");
	else if (WIFSIGNALED(status))
		snprintf(st, sizeof(st), "%d", 128 + WTERMSIG(status));
	else
		snprintf(st, sizeof(st), "%d", WEXITSTATUS(status));

	FILE *f = stdout;
	if (out && !(f = fopen(out, "a"))) {
		fprintf(stderr, "runstat: %s: %s\n", out, strerror(errno));
		return 2;
	}
	fprintf(f, "%llu %llu %llu %ld %s %ld\n", (unsigned long long)wall,
		(unsigned long long)tv_ns(ru.ru_utime), (unsigned long long)tv_ns(ru.ru_stime),
		ru.ru_maxrss, st, ru.ru_nvcsw + ru.ru_nivcsw);
	if (f != stdout)
		fclose(f);
	return 0;
}

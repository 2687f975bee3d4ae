/*
 * jit - code made at run time, named only by a perf map, as a JIT names it
 * (node --perf-basic-prof, the JVM's perf-map agents, python3.12 -X perf).
 *
 * Ground truth: the program copies a count-down loop (9 bytes of x86-64
 * machine code) into a page it maps executable, writes /tmp/perf-PID.map
 * with three lines: the loop, named "jit_countdown", and two pieces of
 * code nothing runs ("jit_never_run" in the same page, "jit_elsewhere" in
 * no page at all).  It then runs the loop until its thread has used
 * SPIN_MS ms of CPU (or the first argument's ms), and prints "jit at
 * 0xADDR".  With a second argument "thread", for rhea attach: it prints
 * "ready PID" once the map is written, and the loop runs in a second
 * thread while the main one waits for it in pthread_join.
 *
 * Expected: the sampler's captures land in the loop, which no module
 * holds: the report names it "jit_countdown" (module [jit]) from the map.
 * rhea record's compaction keeps in the recording the map's lines that
 * name code on its stacks (the loop's alone), so the name stays once the
 * map is gone; a recording left as the agent wrote it (--no-compact) has
 * only the map in /tmp to go by.  rhea attach, which leaves the process
 * running, keeps the map's line however old the map is.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SPIN_MS 300

/* mov rax, rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char countdown[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t (*jit_fn)(uint64_t);
static uint64_t spin_ms = SPIN_MS;

static void *spin(void *arg)
{
	(void)arg;
	uint64_t t0 = cpu_ns();
	while (cpu_ns() - t0 < spin_ms * 1000000ull)
		jit_fn(1000000);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		spin_ms = strtoull(argv[1], NULL, 10);
	int threaded = argc > 2 && strcmp(argv[2], "thread") == 0;
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *code = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(code, countdown, sizeof(countdown));
	if (mprotect(code, (size_t)page, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		return 1;
	}
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "%lx 10 jit_countdown\n", (unsigned long)(uintptr_t)code);
	fprintf(f, "%lx 40 jit_never_run\n", (unsigned long)(uintptr_t)(code + 0x100));
	fprintf(f, "%lx 40 jit_elsewhere\n", (unsigned long)(uintptr_t)(code + 16 * page));
	fclose(f);
	jit_fn = (uint64_t (*)(uint64_t))(uintptr_t)code;
	if (threaded) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		pthread_t th;
		if (pthread_create(&th, NULL, spin, NULL) != 0 || pthread_join(th, NULL) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	} else {
		spin(NULL);
	}
	printf("jit at %p\n", (void *)code);
	return 0;
}

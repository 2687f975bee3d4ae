/*
 * sigkill - killed without warning, in the middle of everything.
 *
 *   sigkill [threads]
 *
 * Ground truth: the main thread first sleeps 2 ms (a hooked call: the agent
 * registers it under the program's name), then names itself "killme" with
 * prctl(PR_SET_NAME), the way programs usually name their main thread.
 * With an argument, it starts that many threads running worker_loop()
 * (250 us of allocations, 750 us of sleep, until the process dies) and
 * forks a child that runs child_work() (the same) for 400 ms and exits
 * normally, outliving its parent.  Then work_before_kill() computes for 300 ms, calling
 * malloc/free every 256 iterations so that the agent captures it,
 * last_words() does the same for 30 ms, and the process sends itself
 * SIGKILL, which no handler can catch (status 128 + 9 = 137 through rhea
 * record).
 *
 * Expected: rhea record recovers what the agent had not written from its
 * buffers' memory: work_before_kill ~300 ms, last_words ~30 ms (it is
 * always within the agent's last 100 ms, which used to be lost), every
 * worker thread up to the end, no capture twice; the child's own recording
 * is whole and holds child_work only.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

volatile uint64_t sink;

/* progress.bin in the working directory, when it can be made: for each
 * thread (main first, then the workers), its tid, the monotonic time it
 * last came round its loop and the CPU time it had used by then since its
 * first round (read once a millisecond: it is a system call).  The file
 * outlives the kill: it tells the test how far each thread really got, in
 * wall time and, for a machine so loaded that a thread waited long for a
 * core, in its own CPU time. */
static struct progress {
	uint64_t tid, ns, cpu_ns;
} *progress;
static int next_slot = 1;

static void progress_open(int threads)
{
	int fd = open("progress.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)((threads + 1) * sizeof(*progress))) != 0)
		return;
	void *m = mmap(NULL, (size_t)(threads + 1) * sizeof(*progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m != MAP_FAILED)
		progress = m;
}

static __thread int my_slot = -1;
static __thread uint64_t cpu_base, cpu_read_at;

static void progress_note(void)
{
	if (progress && my_slot >= 0) {
		uint64_t now = now_ns();
		if (!cpu_read_at) {
			cpu_base = thread_cpu_ns();
			cpu_read_at = now;
		} else if (now - cpu_read_at >= 1000000u) {
			__atomic_store_n(&progress[my_slot].cpu_ns, thread_cpu_ns() - cpu_base, __ATOMIC_RELAXED);
			cpu_read_at = now;
		}
		progress[my_slot].tid = (uint64_t)gettid();
		__atomic_store_n(&progress[my_slot].ns, now, __ATOMIC_RELAXED);
	}
}

/* Compute for ns of wall time (forever if 0), allocating now and then. */
static void compute(uint64_t ns)
{
	uint64_t t0 = now_ns(), x = sink | 1;
	for (long i = 0;; i++) {
		if (spin_step(&x, i)) {
			progress_note();
			if (ns && now_ns() - t0 > ns)
				break;
		}
	}
	sink = x;
}

__attribute__((noinline)) void work_before_kill(void)
{
	compute(300000000u);
	__asm__ volatile("");
}

__attribute__((noinline)) void last_words(void)
{
	compute(30000000u);
	__asm__ volatile("");
}

/* 400 ms of wall time, a quarter of it computing: the machine's two
 * cores are not for this child alone. */
__attribute__((noinline)) void child_work(void)
{
	uint64_t t0 = now_ns();
	while (now_ns() - t0 < 400000000u) {
		compute(250000u);
		usleep(750);
	}
	__asm__ volatile("");
}

__attribute__((noinline)) static void *worker_loop(void *arg)
{
	my_slot = (int)(intptr_t)arg;
	for (;;) {
		compute(250000u);
		usleep(750);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	usleep(2000); /* a hooked call first: the agent knows the thread by then */
	prctl(PR_SET_NAME, "killme");
	int threads = argc > 1 ? atoi(argv[1]) : 0;
	progress_open(threads);
	my_slot = 0;
	for (int i = 0; i < threads; i++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker_loop, (void *)(intptr_t)next_slot++) != 0)
			return 1;
	}
	if (threads > 0) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			progress = NULL;
			child_work();
			return 0;
		}
	}
	work_before_kill();
	last_words();
	fflush(stdout);
	kill(getpid(), SIGKILL);
	puts("not reached");
	return 0;
}

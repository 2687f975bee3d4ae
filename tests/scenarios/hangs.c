/*
 * hangs - threads hang in blocking calls until the recording ends.
 *
 *   hangs exit|term|kill
 *
 * Ground truth: four threads block for good: sleeper_thread in nanosleep
 * (60 s), reader_thread in read() of a pipe nobody writes, locker_thread in
 * pthread_mutex_lock of a mutex main holds, waiter_thread in
 * pthread_cond_wait of a condition nobody signals.  Each marks itself just
 * before its call; once all four have, the process waits HANG_MS more and
 * ends:
 *   exit: main calls exit(0) (the process exits while they wait);
 *   term: main sleeps in nanosleep (60 s) and a fifth thread, spinning
 *         without a hooked call, sends it SIGTERM after HANG_MS (Ctrl-C on
 *         a hung program: the signal interrupts the main thread's sleep);
 *   kill: main sends itself SIGKILL (nothing in the process sees it end).
 * Prints "hung" once the four are marked, to stdout.
 *
 * Expected: each of the four threads (and in term the main thread, in
 * nanosleep) has a recorded wait of about HANG_MS or more that ends at the
 * end of the recording, in its own function; the recording lasts until the
 * end, not until the last capture.  In kill, the waits as the sampler's
 * forced captures last saw them (rhea record --force-after).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* now_ns: HANG_MS is timed in ns (counted in whole ms, a wait from 12.999
 * to 412.000 ms passed for 400 ms, and the test, which wants the recording
 * to last at least HANG_MS, saw 399.8) */
#include "spin.h"

#define HANG_MS 400

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int pipefd[2];
static int marked; /* atomic */
static pthread_t main_th;

static void mark(void)
{
	__atomic_add_fetch(&marked, 1, __ATOMIC_SEQ_CST);
}


__attribute__((noinline)) static void *sleeper_thread(void *arg)
{
	(void)arg;
	struct timespec ts = {60, 0};
	mark();
	nanosleep(&ts, NULL);
	return NULL;
}

__attribute__((noinline)) static void *reader_thread(void *arg)
{
	(void)arg;
	char c;
	mark();
	ssize_t r = read(pipefd[0], &c, 1);
	(void)r;
	return NULL;
}

__attribute__((noinline)) static void *locker_thread(void *arg)
{
	(void)arg;
	mark();
	pthread_mutex_lock(&held);
	return NULL;
}

__attribute__((noinline)) static void *waiter_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cm);
	mark();
	pthread_cond_wait(&never, &cm);
	return NULL;
}

/* No hooked call: it spins on the clock (clock_gettime is not traced by
 * default) and sends the signal HANG_MS after main's last look at the
 * clock before its nanosleep (from its own start, main's sleep came up to
 * 100 ms short now and then under ASan on a loaded machine: main ran
 * late after it created this thread). */
static uint64_t sleep_from;

static void *killer_thread(void *arg)
{
	(void)arg;
	uint64_t t0;
	while ((t0 = __atomic_load_n(&sleep_from, __ATOMIC_ACQUIRE)) == 0)
		;
	while (now_ns() - t0 < HANG_MS * 1000000ull)
		;
	pthread_kill(main_th, SIGTERM);
	return NULL;
}

int main(int argc, char **argv)
{
	int term = argc > 1 && strcmp(argv[1], "term") == 0;
	int kill_self = argc > 1 && strcmp(argv[1], "kill") == 0;
	if (argc < 2 || (!term && !kill_self && strcmp(argv[1], "exit") != 0)) {
		fprintf(stderr, "usage: hangs exit|term|kill\n");
		return 2;
	}
	if (pipe(pipefd) != 0)
		return 1;
	main_th = pthread_self();
	pthread_mutex_lock(&held);
	void *(*fns[])(void *) = {sleeper_thread, reader_thread, locker_thread, waiter_thread};
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL) != 0)
			return 1;
	while (__atomic_load_n(&marked, __ATOMIC_SEQ_CST) < 4)
		;
	printf("hung\n");
	fflush(stdout);
	if (term) {
		pthread_t k;
		if (pthread_create(&k, NULL, killer_thread, NULL) != 0)
			return 1;
		struct timespec ts = {60, 0};
		__atomic_store_n(&sleep_from, now_ns(), __ATOMIC_RELEASE);
		nanosleep(&ts, NULL);
		return 1; /* not reached: SIGTERM ends the process */
	}
	uint64_t t0 = now_ns();
	while (now_ns() - t0 < HANG_MS * 1000000ull)
		;
	if (kill_self)
		raise(SIGKILL);
	exit(0);
}

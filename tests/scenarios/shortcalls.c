/*
 * shortcalls: many blocking calls, each far shorter than rhea's min_block
 * (1 ms), whose count and time the program knows.
 *
 * Two threads play ping-pong over two pipes ROUNDS times: the main thread
 * writes a byte and reads the answer, the echo thread reads it and writes
 * it back; each read() blocks until the other thread's write (a wake-up,
 * 5-50 us).  Then the main thread and the echo thread do the same with a
 * condition variable (a "turn" flag under a mutex), ROUNDS times more.
 * No read or condition wait here takes min_block unless the machine stalls
 * the other thread, and such a call is a BLOCK sample, which the test adds.
 *
 * Each thread times every read() and pthread_cond_wait() with its own
 * clock (CLOCK_MONOTONIC around the call).
 *
 * stdout:
 *   reads N NS      read() calls made by both threads, their total time
 *   condwaits N NS  pthread_cond_wait() calls, their total time
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 20000

static int ping[2], pong[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: the main thread's, 1: the echo thread's */

struct tally {
	uint64_t reads, read_ns, waits, wait_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void timed_read(int fd, struct tally *t)
{
	char c;
	uint64_t t0 = now_ns();
	if (read(fd, &c, 1) != 1)
		abort();
	t->read_ns += now_ns() - t0;
	t->reads++;
}

/* Wait until it is `mine`'s turn, then give the turn to the other. */
static void take_turn(int mine, struct tally *t)
{
	pthread_mutex_lock(&lock);
	while (turn != mine) {
		uint64_t t0 = now_ns();
		pthread_cond_wait(&cond, &lock);
		t->wait_ns += now_ns() - t0;
		t->waits++;
	}
	turn = !mine;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

static struct tally echo_t;

static void *echo(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		timed_read(ping[0], &echo_t);
		if (write(pong[1], "x", 1) != 1)
			abort();
	}
	for (int i = 0; i < ROUNDS; i++)
		take_turn(1, &echo_t);
	return NULL;
}

int main(void)
{
	struct tally main_t = {0};
	pthread_t th;
	if (pipe(ping) != 0 || pipe(pong) != 0 || pthread_create(&th, NULL, echo, NULL) != 0)
		return 1;
	for (int i = 0; i < ROUNDS; i++) {
		if (write(ping[1], "x", 1) != 1)
			abort();
		timed_read(pong[0], &main_t);
	}
	for (int i = 0; i < ROUNDS; i++)
		take_turn(0, &main_t);
	pthread_join(th, NULL);
	printf("reads %llu %llu\ncondwaits %llu %llu\n", (unsigned long long)(main_t.reads + echo_t.reads),
	       (unsigned long long)(main_t.read_ns + echo_t.read_ns),
	       (unsigned long long)(main_t.waits + echo_t.waits),
	       (unsigned long long)(main_t.wait_ns + echo_t.wait_ns));
	return 0;
}

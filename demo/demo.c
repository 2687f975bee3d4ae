/*
 * demo.c - the program `make demo` records: a small server-like process
 * whose time goes to the usual suspects, so the report has something to
 * show.  Built like distribution binaries are: -O2, no frame pointers.
 *
 *  - an event loop (main thread) that polls a pipe and handles "requests":
 *    each parses (allocates) and renders (computes);
 *  - 4 workers that contend on one mutex-protected queue and hash work;
 *  - a logger thread doing small writes and an fsync now and then;
 *  - a compaction function that only computes (no hook is hit there).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static int queue[1024], qhead, qtail, done;
static volatile unsigned long sink;

NOINLINE static unsigned long hash_block(const char *p, size_t n)
{
	unsigned long h = 1469598103934665603ul;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ul;
	return h;
}

NOINLINE static char *parse_request(int id)
{
	char *tok[64];
	for (int i = 0; i < 64; i++) {
		tok[i] = malloc(32 + (size_t)(i * 7 + id) % 200);
		memset(tok[i], 'a' + i % 26, 16);
	}
	char *out = malloc(4096);
	for (int i = 0; i < 64; i++) {
		memcpy(out + (i * 16) % 4000, tok[i], 16);
		free(tok[i]);
	}
	return out;
}

NOINLINE static void render_response(char *req)
{
	for (int r = 0; r < 400; r++)
		sink += hash_block(req, 4096);
	free(req);
}

NOINLINE static void handle_request(int id)
{
	char *req = parse_request(id);
	render_response(req);
	sink += 1;
}

NOINLINE static void compact_tables(void)
{
	unsigned long x = 0;
	for (long i = 0; i < 60000000; i++)
		x = x * 6364136223846793005ul + (unsigned long)i;
	sink += x;
}

NOINLINE static void *worker(void *arg)
{
	(void)arg;
	char *buf = malloc(1 << 16);
	memset(buf, 7, 1 << 16);
	for (;;) {
		pthread_mutex_lock(&qlock);
		while (qhead == qtail && !done)
			pthread_cond_wait(&qcond, &qlock);
		if (qhead == qtail && done) {
			pthread_mutex_unlock(&qlock);
			break;
		}
		int job = queue[qhead++ % 1024];
		/* Holding the lock while hashing: the contention the report shows. */
		sink += hash_block(buf, 4096 + (size_t)job % 1024);
		pthread_mutex_unlock(&qlock);
		sink += hash_block(buf, 1 << 15);
	}
	free(buf);
	return NULL;
}

NOINLINE static void *logger(void *arg)
{
	(void)arg;
	char path[] = "/tmp/rhea-demo-log-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	unlink(path);
	char line[128];
	for (int i = 0; i < 400 && !done; i++) {
		int n = snprintf(line, sizeof(line), "request %d handled\n", i);
		if (write(fd, line, (size_t)n) < 0)
			break;
		if (i % 50 == 0)
			fsync(fd);
		usleep(2000);
	}
	close(fd);
	return NULL;
}

int main(void)
{
	int p[2];
	if (pipe(p) != 0)
		return 1;
	pthread_t w[4], lg;
	pthread_create(&lg, NULL, logger, NULL);
	pthread_setname_np(lg, "logger");
	for (int i = 0; i < 4; i++) {
		pthread_create(&w[i], NULL, worker, NULL);
		pthread_setname_np(w[i], "worker");
	}
	for (int id = 0; id < 300; id++) {
		char c = 'x';
		if (write(p[1], &c, 1) != 1)
			break;
		struct pollfd pfd = {p[0], POLLIN, 0};
		poll(&pfd, 1, 10);
		if (read(p[0], &c, 1) != 1)
			break;
		handle_request(id);
		pthread_mutex_lock(&qlock);
		queue[qtail++ % 1024] = id;
		pthread_cond_signal(&qcond);
		pthread_mutex_unlock(&qlock);
		if (id % 100 == 99)
			compact_tables();
	}
	pthread_mutex_lock(&qlock);
	done = 1;
	pthread_cond_broadcast(&qcond);
	pthread_mutex_unlock(&qlock);
	for (int i = 0; i < 4; i++)
		pthread_join(w[i], NULL);
	pthread_join(lg, NULL);
	printf("demo: handled 300 requests (checksum %lu)\n", sink % 1000);
	return 0;
}

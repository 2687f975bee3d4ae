/*
 * w2_server.c - workload W2, a server in miniature with a fixed amount of
 * work (a number of requests, not a duration), so that CPU time and wall
 * time can both be compared between runs.
 *
 *   w2_server [-r REQUESTS] [-c CONNECTIONS] [-w WORKERS]
 *
 * Threads and the path of one request:
 *
 *   client threads (2)   write a 64-byte request on a socketpair, then block
 *                        in read() for the answer, REQUESTS in total;
 *   main (event loop)    epoll_wait over the server ends, read() the request,
 *                        malloc a job, push it on the work queue (mutex +
 *                        condition variable);
 *   workers (WORKERS)    pop a job, hash its payload (some CPU), allocation
 *                        churn (a few short-lived blocks of 16..1024 B),
 *                        update a shared statistics table under one global
 *                        mutex (contended), time the job (clock_gettime),
 *                        push it on the reply queue (second condition
 *                        variable stage);
 *   responder            pop, write() a 32-byte reply, free the job.
 *
 * Every connection has at most one request in flight, so the pipeline is
 * kept busy by CONNECTIONS (default 32) outstanding requests.  Default
 * REQUESTS 100000, WORKERS 4.  Prints a checksum.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQ_SIZE 64
#define REPLY_SIZE 32
#define NCLIENTS 2

struct job {
	struct job *next;
	int fd;
	uint32_t seq;
	uint64_t hash;
	size_t size;
	unsigned char payload[]; /* size bytes */
};

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	int closed;
};

static struct queue work_q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};
static struct queue reply_q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stats_hist[64];
static uint64_t stats_jobs, stats_ns;

static int nconn = 32;
static long nrequests = 100000;
static int nworkers = 4;
static int client_fd[1024], server_fd[1024];

static void q_push(struct queue *q, struct job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

static struct job *q_pop(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->closed)
		pthread_cond_wait(&q->cond, &q->lock);
	struct job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
	}
	pthread_mutex_unlock(&q->lock);
	return j;
}

static void q_close(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = 1;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

static int full_write(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int full_read(int fd, void *b, size_t n)
{
	char *p = b;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- clients ------------------------------------------------------------ */

struct client {
	int first, count; /* connections client_fd[first .. first+count) */
	long quota;
	uint64_t sum;
};

static void *client_main(void *arg)
{
	struct client *c = arg;
	unsigned char req[REQ_SIZE], reply[REPLY_SIZE];
	long sent = 0, done = 0;
	int live = c->count;
	memset(req, 'x', sizeof(req));
	/* One request in flight per connection: send on all, then for each
	 * reply received send the next, round robin. */
	for (int i = 0; i < c->count && sent < c->quota; i++, sent++) {
		memcpy(req, &sent, sizeof(sent));
		if (full_write(client_fd[c->first + i], req, sizeof(req)) < 0)
			return NULL;
	}
	live = (int)(sent < c->count ? sent : c->count);
	for (int i = 0; done < sent; i = (i + 1) % live) {
		int fd = client_fd[c->first + i];
		if (full_read(fd, reply, sizeof(reply)) < 0)
			return NULL;
		done++;
		c->sum += reply[0] + reply[REPLY_SIZE - 1];
		if (sent < c->quota) {
			memcpy(req, &sent, sizeof(sent));
			req[8] = (unsigned char)sent;
			if (full_write(fd, req, sizeof(req)) < 0)
				return NULL;
			sent++;
		}
	}
	return NULL;
}

/* ---- workers ------------------------------------------------------------ */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static __attribute__((noinline)) uint64_t hash_payload(const unsigned char *p, size_t n, int rounds)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < n; i++)
			h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static __attribute__((noinline)) uint64_t churn(struct job *j)
{
	uint64_t s = 0;
	void *tmp[6];
	for (int k = 0; k < 6; k++) {
		size_t n = 16u << ((j->seq + (unsigned)k) % 7); /* 16 .. 1024 */
		tmp[k] = malloc(n);
		memset(tmp[k], k, n < 64 ? n : 64);
		s += ((unsigned char *)tmp[k])[0];
	}
	for (int k = 5; k >= 0; k--)
		free(tmp[k]);
	return s;
}

static __attribute__((noinline)) void handle(struct job *j)
{
	uint64_t t0 = now_ns();
	j->hash = hash_payload(j->payload, j->size, 4);
	j->hash += churn(j);
	uint64_t dt = now_ns() - t0;
	pthread_mutex_lock(&stats_lock);
	stats_hist[j->hash & 63]++;
	stats_jobs++;
	stats_ns += dt;
	pthread_mutex_unlock(&stats_lock);
}

static void *worker_main(void *arg)
{
	(void)arg;
	struct job *j;
	while ((j = q_pop(&work_q)) != NULL) {
		handle(j);
		q_push(&reply_q, j);
	}
	return NULL;
}

static void *responder_main(void *arg)
{
	(void)arg;
	struct job *j;
	unsigned char reply[REPLY_SIZE];
	while ((j = q_pop(&reply_q)) != NULL) {
		memset(reply, (int)(j->hash & 0xff), sizeof(reply));
		full_write(j->fd, reply, sizeof(reply));
		free(j);
	}
	return NULL;
}

/* ---- event loop ---------------------------------------------------------- */

static __attribute__((noinline)) void on_readable(int fd)
{
	unsigned char req[REQ_SIZE];
	if (full_read(fd, req, sizeof(req)) < 0)
		return;
	uint32_t seq;
	memcpy(&seq, req, sizeof(seq));
	size_t size = 256 + (seq % 8) * 96; /* 256 .. 928 bytes of payload */
	struct job *j = malloc(sizeof(*j) + size);
	if (!j)
		abort();
	j->fd = fd;
	j->seq = seq;
	j->size = size;
	for (size_t i = 0; i < size; i++)
		j->payload[i] = req[i % REQ_SIZE] ^ (unsigned char)i;
	q_push(&work_q, j);
}

static void event_loop(long total)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		perror("epoll_create1");
		exit(1);
	}
	for (int i = 0; i < nconn; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = server_fd[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, server_fd[i], &ev);
	}
	long seen = 0;
	struct epoll_event evs[64];
	while (seen < total) {
		int n = epoll_wait(ep, evs, 64, 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("epoll_wait");
			exit(1);
		}
		for (int i = 0; i < n; i++) {
			on_readable(evs[i].data.fd);
			seen++;
		}
	}
	close(ep);
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "r:c:w:")) != -1) {
		switch (opt) {
		case 'r':
			nrequests = atol(optarg);
			break;
		case 'c':
			nconn = atoi(optarg);
			break;
		case 'w':
			nworkers = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: w2_server [-r REQUESTS] [-c CONNECTIONS] [-w WORKERS]\n");
			return 2;
		}
	}
	if (nconn < NCLIENTS || nconn > 1024 || nworkers < 1 || nworkers > 256 || nrequests < 1) {
		fprintf(stderr, "w2_server: bad arguments\n");
		return 2;
	}
	for (int i = 0; i < nconn; i++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			perror("socketpair");
			return 1;
		}
		client_fd[i] = sv[0];
		server_fd[i] = sv[1];
	}

	pthread_t workers[256], responder, clients[NCLIENTS];
	struct client cl[NCLIENTS];
	for (int i = 0; i < nworkers; i++)
		pthread_create(&workers[i], NULL, worker_main, NULL);
	pthread_create(&responder, NULL, responder_main, NULL);
	int per = nconn / NCLIENTS;
	for (int i = 0; i < NCLIENTS; i++) {
		cl[i].first = i * per;
		cl[i].count = i == NCLIENTS - 1 ? nconn - i * per : per;
		cl[i].quota = nrequests / NCLIENTS + (i < nrequests % NCLIENTS);
		cl[i].sum = 0;
		pthread_create(&clients[i], NULL, client_main, &cl[i]);
	}

	event_loop(nrequests);

	uint64_t sum = 0;
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(clients[i], NULL);
		sum += cl[i].sum;
	}
	q_close(&work_q);
	for (int i = 0; i < nworkers; i++)
		pthread_join(workers[i], NULL);
	q_close(&reply_q);
	pthread_join(responder, NULL);
	for (int i = 0; i < nconn; i++) {
		close(client_fd[i]);
		close(server_fd[i]);
	}
	printf("w2_server: requests=%ld jobs=%llu checksum=%llu\n", nrequests,
	       (unsigned long long)stats_jobs, (unsigned long long)sum);
	return 0;
}

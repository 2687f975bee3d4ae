/*
 * attachme - a process to attach to (rhea attach, tests/e2e).
 *
 *   attachme SECONDS [dlopen|churn]
 *
 * The main thread ("attachme") is an event loop: poll() with a 2 ms
 * timeout, then attach_work(): 100 x malloc(64)/free, counted.  A worker
 * thread ("worker") takes a mutex, counts, and sleeps 1 ms.  After SECONDS
 * both stop; the program checks its own work (every block it wrote read
 * back) and prints "attachme ok iterations N worker M", exit status 0.
 * It prints "ready PID" once both threads run.  With "dlopen", 0.8 s in, it
 * loads libexpat (which nothing here links) and from then on creates and
 * frees an XML parser per iteration: allocations made inside a library
 * loaded after rhea attached.  With "churn", libexpat is loaded, used for
 * 25 iterations and unloaded (dlclose), again and again: objects that come
 * and go while attached.
 */
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;
static uint64_t worker_count;
static int bad;
static void *volatile keep; /* the blocks escape: no compiler may elide them */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void attach_work(uint64_t it)
{
	for (int i = 0; i < 100; i++) {
		unsigned char *p = malloc(64);
		if (!p) {
			bad = 1;
			return;
		}
		keep = p;
		memset(p, (int)(it + (uint64_t)i) & 0xff, 64);
		if (p[63] != (unsigned char)((it + (uint64_t)i) & 0xff))
			bad = 1;
		free(p);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "worker");
	while (!done) {
		pthread_mutex_lock(&lock);
		worker_count++;
		pthread_mutex_unlock(&lock);
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	int late = argc > 2 && strcmp(argv[2], "dlopen") == 0;
	int churn = argc > 2 && strcmp(argv[2], "churn") == 0;
	void *(*create)(const char *) = NULL;
	void (*destroy)(void *) = NULL;
	uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9), it = 0, parsers = 0;
	while (now_ns() < end) {
		poll(NULL, 0, 2);
		attach_work(it++);
		if (late && !create && now_ns() - start > 800000000u) {
			void *h = dlopen("libexpat.so.1", RTLD_NOW);
			create = h ? (void *(*)(const char *))dlsym(h, "XML_ParserCreate") : NULL;
			destroy = h ? (void (*)(void *))dlsym(h, "XML_ParserFree") : NULL;
			if (!create || !destroy)
				bad = 1, late = 0;
		}
		if (create) {
			destroy(create(NULL));
			parsers++;
		}
		if (churn) {
			static void *h;
			if (!h)
				h = dlopen("libexpat.so.1", RTLD_NOW);
			void *(*c)(const char *) = h ? (void *(*)(const char *))dlsym(h, "XML_ParserCreate") : NULL;
			void (*d)(void *) = h ? (void (*)(void *))dlsym(h, "XML_ParserFree") : NULL;
			if (!c || !d)
				bad = 1;
			else
				d(c(NULL));
			if (h && ++parsers % 25 == 0) { /* unloaded every 50 ms or so */
				dlclose(h);
				h = NULL;
			}
		}
	}
	if (late || churn)
		printf("parsers %llu\n", (unsigned long long)parsers);
	done = 1;
	pthread_join(th, NULL);
	printf("attachme %s iterations %llu worker %llu\n", bad ? "BAD" : "ok", (unsigned long long)it,
	       (unsigned long long)worker_count);
	return bad;
}

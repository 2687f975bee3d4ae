/*
 * attachme - a process to attach to (rhea attach, tests/e2e).
 *
 *   attachme SECONDS [dlopen|churn|futex|sleep|poll|fgets|spin|readloop|seccomp-kill|seccomp-errno|fork|forkstorm|forklater]
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
 * and go while attached.  With "futex", there is neither event loop nor
 * sleeping worker: the main thread waits in pthread_join for two "relay"
 * threads that hand a token to each other through a condition variable,
 * each calling attach_work() on its turn, so that every thread is either
 * computing or waiting on a futex (no poll, sleep or read to stop in).
 * With "sleep" or "poll", the only thread sleeps SECONDS in one nanosleep
 * or one poll, and checks that it was not cut short (the call interrupted
 * to load the agent must be restarted where it was).  With "fgets", the
 * only thread waits for a line on stdin in fgets (holding stdin's lock:
 * no place to load the agent).  With "seccomp-kill" or "seccomp-errno",
 * the process first installs a seccomp filter that kills it (or fails the
 * call with ENOSYS) at timer_create, which the agent's sampler uses, then
 * runs as without a mode.  With "fork", the main thread forks a child
 * every 50 ms that allocates and exits 7 ("forkstorm": one after the
 * other, each walking the loader's list first, the parent loading and
 * unloading libexpat every 16).  With "forklater", the only
 * thread waits in poll() for a line on stdin, then forks one child, which
 * prints "child PID", runs the event loop (poll 2 ms, attach_work) alone
 * for SECONDS and exits 3; the parent waits for it and prints "attachme ok
 * child 3" (a child of a process attached before: the copy of the agent it
 * inherits is the parent's).  With "spin", the only thread computes
 * for SECONDS (two identical chains of multiplications, which must agree),
 * calling attach_work() every 64 rounds: it never waits; errno, set
 * before, must be unchanged after.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

/* "futex" mode: relays pass a token; relay i plays on even/odd turns. */
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t relay_turn = PTHREAD_COND_INITIALIZER;
static uint64_t relay_it, relay_end;

static void *relay(void *arg)
{
	uint64_t me = (uint64_t)(uintptr_t)arg;
	prctl(PR_SET_NAME, "relay");
	pthread_mutex_lock(&relay_lock);
	for (;;) {
		while (relay_it % 2 != me && !done)
			pthread_cond_wait(&relay_turn, &relay_lock);
		if (done)
			break;
		attach_work(relay_it);
		if (now_ns() >= relay_end)
			done = 1;
		relay_it++;
		pthread_cond_signal(&relay_turn);
	}
	pthread_cond_broadcast(&relay_turn);
	pthread_mutex_unlock(&relay_lock);
	return NULL;
}

static int futex_mode(double secs)
{
	pthread_t r[2];
	relay_end = now_ns() + (uint64_t)(secs * 1e9);
	for (uintptr_t i = 0; i < 2; i++)
		if (pthread_create(&r[i], NULL, relay, (void *)i) != 0)
			return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	printf("attachme %s iterations %llu worker 0\n", bad ? "BAD" : "ok", (unsigned long long)relay_it);
	return bad;
}

__attribute__((noinline)) static uint64_t spin_step(uint64_t x)
{
	for (int i = 0; i < 4000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x)); /* no closed form: 4000 real steps */
	}
	return x;
}

/* The same in floating point, its value kept in a vector register: a
 * stop that does not give back the thread's SSE/AVX state shows here. */
__attribute__((noinline)) static double spin_step_fp(double x)
{
	for (int i = 0; i < 12000; i++) { /* most of the loop's time: most stops land here */
		x = x * 0.999999 + 0.5;
		__asm__ volatile("" : "+x"(x));
	}
	return x;
}

static int spin_mode(double secs)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t x = 1, y = 1, it = 0, end = now_ns() + (uint64_t)(secs * 1e9);
	double fx = 1, fy = 1;
	errno = 4242; /* nothing the loop calls may change it: nor may the attach */
	while ((it & 255) || now_ns() < end) {
		x = spin_step(x);
		__asm__ volatile("" : "+r"(y)); /* y is computed again, not copied */
		y = spin_step(y);
		fx = spin_step_fp(fx);
		__asm__ volatile("" : "+x"(fy));
		fy = spin_step_fp(fy);
		if (x != y || fx != fy)
			bad = 1;
		if (++it % 64 == 0)
			attach_work(it);
	}
	if (errno != 4242)
		bad = 1;
	printf("attachme %s iterations %llu worker 0%s\n", bad ? "BAD" : "ok", (unsigned long long)it,
	       errno != 4242 ? " (errno changed)" : "");
	return bad;
}

/* "readloop": the only thread reads a file of its own from the page
 * cache, 4 KB at a time, for SECONDS, and checks every block: it spends
 * its time in pread, which never blocks. */
static int readloop_mode(double secs)
{
	char path[] = "/tmp/attachme-readloop.XXXXXX";
	int fd = mkstemp(path);
	static unsigned char block[4096], got[4096];
	for (int i = 0; fd >= 0 && i < 256; i++) {
		memset(block, i, sizeof(block));
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			bad = 1;
	}
	if (fd < 0)
		return 1;
	unlink(path);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t it = 0, end = now_ns() + (uint64_t)(secs * 1e9);
	while ((it & 1023) || now_ns() < end) {
		int i = (int)(it++ % 256);
		if (pread(fd, got, sizeof(got), (off_t)i * 4096) != (ssize_t)sizeof(got) || got[0] != i || got[4095] != i)
			bad = 1;
	}
	close(fd);
	printf("attachme %s iterations %llu worker 0\n", bad ? "BAD" : "ok", (unsigned long long)it);
	return bad;
}

static int count_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	++*(int *)arg;
	return 0;
}

/* "fork": every 50 ms the main thread forks a child that calls
 * attach_work() (through the hooks it inherits, if attached) and exits 7;
 * every child must.  "forkstorm": one child after the other, each first
 * walking the loader's list (as a C++ exception or a dlopen would): a
 * thread of the parent that held the loader's lock at a fork leaves the
 * child waiting for it for ever; every 16 forks the parent loads libexpat
 * and unloads it, which makes the attached agent's next round walk the
 * list again, to patch it. */
static int fork_mode(double secs, int pause_ms, int walk)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t end = now_ns() + (uint64_t)(secs * 1e9), n = 0;
	while (now_ns() < end) {
		pid_t child = fork();
		if (child == 0) {
			int objects = 0;
			if (walk)
				dl_iterate_phdr(count_object, &objects);
			if (walk && objects == 0)
				_exit(1);
			attach_work(n);
			_exit(bad ? 1 : 7);
		}
		int st = 0;
		if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
			bad = 1;
		n++;
		if (pause_ms)
			poll(NULL, 0, pause_ms);
		/* (and now and then an object loaded, between two forks: the
		 * attached agent's rounds then walk the list longer) */
		void *h = walk && n % 16 == 0 ? dlopen("libexpat.so.1", RTLD_NOW) : NULL;
		if (h)
			dlclose(h);
	}
	printf("attachme %s iterations %llu worker 0\n", bad ? "BAD" : "ok", (unsigned long long)n);
	return bad;
}

/* "forklater": one child, forked at a line on stdin. */
static int forklater_mode(double secs)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	struct pollfd in = {0, POLLIN, 0};
	char line[64];
	while (poll(&in, 1, -1) != 1)
		;
	if (read(0, line, sizeof(line)) <= 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		uint64_t end = now_ns() + (uint64_t)(secs * 1e9), it = 0;
		while (now_ns() < end) {
			poll(NULL, 0, 2);
			attach_work(it++);
		}
		_exit(bad ? 1 : 3);
	}
	int st = 0;
	if (child < 0 || waitpid(child, &st, 0) != child)
		return 1;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("attachme %s child %d\n", code == 3 ? "ok" : "BAD", code);
	return code != 3;
}

/* "sleep", "poll" and "fgets": one thread, one call. */
static int one_call(double secs, const char *how)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t start = now_ns();
	long r;
	char line[64];
	if (strcmp(how, "fgets") == 0) {
		r = fgets(line, sizeof(line), stdin) ? 0 : -1;
	} else if (strcmp(how, "poll") == 0) {
		r = poll(NULL, 0, (int)(secs * 1000));
	} else {
		struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)}, left = {0, 0};
		r = nanosleep(&ts, &left);
	}
	int e = errno;
	double took = (double)(now_ns() - start) / 1e9;
	int ok = r == 0 && (strcmp(how, "fgets") == 0 || took >= secs);
	printf("attachme %s %s returned %ld%s%s after %.3f s\n", ok ? "ok" : "BAD", how, r, r ? " " : "",
	       r ? strerror(e) : "", took);
	return !ok;
}

/* Allow everything but timer_create: kill the process there, or fail it. */
static int install_filter(int kill)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_timer_create, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, kill ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0
		       ? 0
		       : -1;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	if (argc > 2 && strncmp(argv[2], "seccomp-", 8) == 0 && install_filter(strcmp(argv[2], "seccomp-kill") == 0) != 0)
		return 3;
	if (argc > 2 && strcmp(argv[2], "futex") == 0)
		return futex_mode(secs);
	if (argc > 2 && strcmp(argv[2], "spin") == 0)
		return spin_mode(secs);
	if (argc > 2 && strcmp(argv[2], "readloop") == 0)
		return readloop_mode(secs);
	if (argc > 2 && strcmp(argv[2], "fork") == 0)
		return fork_mode(secs, 50, 0);
	if (argc > 2 && strcmp(argv[2], "forkstorm") == 0)
		return fork_mode(secs, 0, 1);
	if (argc > 2 && strcmp(argv[2], "forklater") == 0)
		return forklater_mode(secs);
	if (argc > 2 && (strcmp(argv[2], "sleep") == 0 || strcmp(argv[2], "poll") == 0 ||
			 strcmp(argv[2], "fgets") == 0))
		return one_call(secs, argv[2]);
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

/*
 * timedwaits: the waits with a deadline, on the clock variants glibc 2.30
 * added (C++'s condition_variable::wait_for, timed_mutex::try_lock_for and
 * shared_timed_mutex call them) and the older timed ones.
 *
 * The main thread, each in a function of its own, with a deadline 5 s away
 * unless said:
 *   wait_cond       pthread_cond_clockwait (CLOCK_MONOTONIC): B signals 40 ms later
 *   wait_mutex      pthread_mutex_timedlock: B holds the mutex 30 ms
 *   wait_rwlock     pthread_rwlock_clockwrlock: B holds it to read 30 ms
 *   wait_sem        sem_clockwait: B posts 30 ms later
 *   wait_timeout    pthread_mutex_clocklock with a 20 ms deadline: B holds
 *                   the mutex 60 ms, so it times out (ETIMEDOUT)
 * B does each of its parts in a function named for it (signal_later,
 * hold_mutex, hold_read, post_later, hold_long) once main is about to wait;
 * a lock B holds, main starts waiting for about 5 ms into the hold.
 *
 * Ground truth: one wait of each function, 40, 25, 25, 30 and 20 ms, the
 * first four woken by B from its function, the last by nobody (it times
 * out).  Prints B's tid and the five functions' times as main measured
 * them: 40, 30, 30, 30, 25 ms (the 5 ms before a lock's wait included).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t sem;
static volatile int step, taken, signalled;
static volatile long b_tid;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec deadline(clockid_t clk, long ms)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void wait_step(int s)
{
	while (step != s)
		usleep(200);
}

__attribute__((noinline)) static void signal_later(void)
{
	usleep(40000);
	pthread_mutex_lock(&cm);
	signalled = 1;
	pthread_cond_signal(&c);
	pthread_mutex_unlock(&cm);
	__asm__ volatile("");
}

__attribute__((noinline)) static void hold_mutex(long ms)
{
	pthread_mutex_lock(&m);
	taken = 1;
	usleep(ms * 1000);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

__attribute__((noinline)) static void hold_long(void)
{
	hold_mutex(60);
	__asm__ volatile("");
}

__attribute__((noinline)) static void hold_read(void)
{
	pthread_rwlock_rdlock(&rw);
	taken = 1;
	usleep(30000);
	pthread_rwlock_unlock(&rw);
	__asm__ volatile("");
}

__attribute__((noinline)) static void post_later(void)
{
	usleep(30000);
	sem_post(&sem);
	__asm__ volatile("");
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = syscall(SYS_gettid);
	wait_step(1);
	signal_later();
	wait_step(2);
	hold_mutex(30);
	wait_step(3);
	hold_read();
	wait_step(4);
	post_later();
	wait_step(5);
	hold_long();
	return NULL;
}

__attribute__((noinline)) static void wait_cond(void)
{
	struct timespec ts = deadline(CLOCK_MONOTONIC, 5000);
	pthread_mutex_lock(&cm);
	step = 1;
	while (!signalled)
		pthread_cond_clockwait(&c, &cm, CLOCK_MONOTONIC, &ts);
	pthread_mutex_unlock(&cm);
	__asm__ volatile("");
}

/* B takes the lock first; main waits from about 5 ms into its hold. */
static void after_taken(int s)
{
	taken = 0;
	step = s;
	while (!taken)
		usleep(100);
	usleep(5000);
}

__attribute__((noinline)) static void wait_mutex(void)
{
	after_taken(2);
	struct timespec ts = deadline(CLOCK_REALTIME, 5000);
	pthread_mutex_timedlock(&m, &ts);
	pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

__attribute__((noinline)) static void wait_rwlock(void)
{
	after_taken(3);
	struct timespec ts = deadline(CLOCK_MONOTONIC, 5000);
	pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &ts);
	pthread_rwlock_unlock(&rw);
	__asm__ volatile("");
}

__attribute__((noinline)) static void wait_sem(void)
{
	step = 4;
	struct timespec ts = deadline(CLOCK_MONOTONIC, 5000);
	while (sem_clockwait(&sem, CLOCK_MONOTONIC, &ts) != 0 && errno == EINTR)
		;
	__asm__ volatile("");
}

__attribute__((noinline)) static void wait_timeout(void)
{
	after_taken(5);
	struct timespec ts = deadline(CLOCK_MONOTONIC, 20);
	if (pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts) == 0)
		pthread_mutex_unlock(&m);
	__asm__ volatile("");
}

int main(void)
{
	sem_init(&sem, 0, 0);
	pthread_t b;
	pthread_create(&b, NULL, thread_b, NULL);
	while (!b_tid)
		usleep(100);
	void (*waits[])(void) = {wait_cond, wait_mutex, wait_rwlock, wait_sem, wait_timeout};
	uint64_t took[5];
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = now_ns();
		waits[i]();
		took[i] = now_ns() - t0;
	}
	pthread_join(b, NULL);
	printf("%ld", b_tid);
	for (int i = 0; i < 5; i++)
		printf(" %llu", (unsigned long long)took[i]);
	printf("\n");
	return 0;
}

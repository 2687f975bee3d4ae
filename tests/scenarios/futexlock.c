/*
 * futexlock: locks made of futex(2) calls through syscall(), as Rust's std
 * makes its Mutex and Condvar (and Abseil, QEMU, liburcu theirs).
 *
 * 1. A mutex of one futex word, Rust's way (0 unlocked, 1 locked, 2 locked
 *    with waiters: FUTEX_WAIT_PRIVATE while it is 2, FUTEX_WAKE_PRIVATE on
 *    unlock only when it was 2).  Thread B holds it 50 ms in hold_lock();
 *    the main thread waits for it in wait_for_lock().
 * 2. An event: the main thread waits in wait_for_event() on a word (a
 *    FUTEX_WAIT_BITSET with no timeout, glibc-style bitset) until B, 40 ms
 *    later, sets it and wakes it in post_event() (FUTEX_WAKE_BITSET).
 *
 * Ground truth: two futex waits of the main thread, 50 and 40 ms (within
 * 5 ms), the first's stack in wait_for_lock, the second's in
 * wait_for_event, each woken by B from hold_lock and post_event.  Prints
 * B's tid and the two waits as the main thread measured them (a loaded
 * machine can delay main after it saw the lock taken).
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t lock_word, event_word;
static volatile int held, event_armed;
static volatile long b_tid;

static long futex(uint32_t *w, int op, uint32_t val, uint32_t bits)
{
	return syscall(SYS_futex, w, op, val, NULL, NULL, bits);
}

static void lock(uint32_t *w)
{
	uint32_t c = 0;
	if (__atomic_compare_exchange_n(w, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	while (__atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE) != 0)
		futex(w, FUTEX_WAIT_PRIVATE, 2, 0);
}

static void unlock(uint32_t *w)
{
	if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) == 2)
		futex(w, FUTEX_WAKE_PRIVATE, 1, 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void hold_lock(void)
{
	lock(&lock_word);
	held = 1;
	usleep(50000);
	unlock(&lock_word);
	__asm__ volatile("");
}

__attribute__((noinline)) static void post_event(void)
{
	__atomic_store_n(&event_word, 1, __ATOMIC_RELEASE);
	futex(&event_word, FUTEX_WAKE_BITSET_PRIVATE, 1, FUTEX_BITSET_MATCH_ANY);
	__asm__ volatile("");
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = syscall(SYS_gettid);
	hold_lock();
	while (!event_armed)
		usleep(1000);
	usleep(40000);
	post_event();
	return NULL;
}

__attribute__((noinline)) static void wait_for_lock(void)
{
	lock(&lock_word);
	unlock(&lock_word);
	__asm__ volatile("");
}

__attribute__((noinline)) static void wait_for_event(void)
{
	event_armed = 1;
	while (__atomic_load_n(&event_word, __ATOMIC_ACQUIRE) == 0)
		futex(&event_word, FUTEX_WAIT_BITSET_PRIVATE, 0, FUTEX_BITSET_MATCH_ANY);
	__asm__ volatile("");
}

int main(void)
{
	pthread_t b;
	pthread_create(&b, NULL, thread_b, NULL);
	while (!held)
		;
	uint64_t t0 = now_ns();
	wait_for_lock();
	uint64_t t1 = now_ns();
	wait_for_event();
	uint64_t t2 = now_ns();
	pthread_join(b, NULL);
	printf("%ld %llu %llu\n", b_tid, (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
	return 0;
}

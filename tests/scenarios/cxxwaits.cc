/*
 * cxxwaits: C++'s own waiting primitives (libstdc++, C++20), which reach
 * glibc's clock variants and futex(2) rather than the plain pthread calls.
 *
 * The main thread, each in a function of its own:
 *   wait_cv       std::condition_variable::wait_for (5 s): B notifies 40 ms
 *                 later (pthread_cond_clockwait)
 *   wait_timed    std::timed_mutex::try_lock_for(5 s): B holds it 30 ms
 *                 (pthread_mutex_clocklock)
 *   wait_sem      std::counting_semaphore::acquire: B releases it 40 ms
 *                 later (an atomic wait: futex through syscall())
 * B does its part in notify_later, hold_timed and release_later.  A lock B
 * holds, main waits for from about 5 ms into the hold.
 *
 * Ground truth: three waits, 40, 25 and 40 ms, each ended by B from its
 * function.  Prints B's tid.
 */
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <semaphore>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;

static std::mutex m;
static std::condition_variable cv;
static bool ready;
static std::timed_mutex tm;
static std::counting_semaphore<1> sem(0);
static std::atomic<int> step{0}, taken{0};
static std::atomic<long> b_tid{0};

static void wait_step(int s)
{
	while (step.load() != s)
		std::this_thread::sleep_for(200us);
}

__attribute__((noinline)) static void notify_later()
{
	std::this_thread::sleep_for(40ms);
	{
		std::lock_guard<std::mutex> g(m);
		ready = true;
	}
	cv.notify_one();
	asm volatile("");
}

__attribute__((noinline)) static void hold_timed()
{
	tm.lock();
	taken = 1;
	std::this_thread::sleep_for(30ms);
	tm.unlock();
	asm volatile("");
}

__attribute__((noinline)) static void release_later()
{
	std::this_thread::sleep_for(40ms);
	sem.release();
	asm volatile("");
}

__attribute__((noinline)) static void wait_cv()
{
	std::unique_lock<std::mutex> l(m);
	step = 1;
	cv.wait_for(l, 5s, [] { return ready; });
	asm volatile("");
}

__attribute__((noinline)) static void wait_timed()
{
	step = 2;
	while (!taken.load())
		std::this_thread::sleep_for(100us);
	std::this_thread::sleep_for(5ms);
	if (tm.try_lock_for(5s))
		tm.unlock();
	asm volatile("");
}

__attribute__((noinline)) static void wait_sem()
{
	step = 3;
	sem.acquire();
	asm volatile("");
}

int main()
{
	std::thread b([] {
		b_tid = syscall(SYS_gettid);
		wait_step(1);
		notify_later();
		wait_step(2);
		hold_timed();
		wait_step(3);
		release_later();
	});
	while (!b_tid.load())
		std::this_thread::sleep_for(100us);
	wait_cv();
	wait_timed();
	wait_sem();
	b.join();
	std::printf("%ld\n", b_tid.load());
	return 0;
}

/*
 * clock.c - cheap timestamps for the hooks.
 *
 * A timed hook (read, write, poll, a contended lock...) reads the time twice.
 * clock_gettime(CLOCK_MONOTONIC) goes through the vDSO, but in the VMs rhea
 * was measured on it costs 50 ns, which made a hooked write() 120 ns
 * dearer.  When the kernel itself keeps time with the TSC (clocksource
 * "tsc": the counter is invariant and synchronized across CPUs), rhea
 * reads the TSC directly (about 10 ns) and converts it with a linear
 * calibration against CLOCK_MONOTONIC, so that every timestamp stays on
 * the recording's documented clock:
 *
 *   ns = base_ns + ((tsc - base_tsc) * mult) >> 32
 *
 * Until the first calibration (10 ms after start) and whenever the
 * clocksource is something else, rhea_now() is clock_gettime().  The
 * ticker thread recalibrates every second from the start reference (a
 * longer baseline, a finer slope).  Calibrations are immutable records
 * published with one pointer store; a reader never sees a half-written one
 * (records are reused round-robin, 64 of them, one per second at most).
 * A recalibration can move the clock by a few hundred ns; the analysis
 * treats times of one thread as ordered by clamping.
 *
 * The epoch (DESIGN.md 1.1's rate limit: a hook captures when the global
 * epoch differs from its thread's last) lives on a grid of whole
 * intervals of the TSC.  Every TSC read the agent makes compares it with
 * the end of the current interval (epoch_note, one load), and the first
 * reader past it advances the epoch: a server whose hooks read the clock
 * all the time keeps it current without the ticker thread, whose wake-ups
 * cost 10-20 us of CPU each in the VMs rhea was measured on (agent.c says
 * when the ticker steps in).  One CAS on the interval's end decides who
 * advances, so an epoch is never skipped twice for one interval and two
 * epochs are never less than an interval apart on the grid.
 */
#include "agent.h"

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rhea_cal *volatile rhea_cal;
static struct rhea_cal cals[64];
static unsigned ncal;
static uint64_t ref_tsc, ref_ns;
static int usable;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A (tsc, ns) pair read as close together as possible. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __builtin_ia32_rdtsc();
		uint64_t n = mono_ns();
		uint64_t b = __builtin_ia32_rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

void clock_init(void)
{
	char buf[32] = "";
	int fd = (int)syscall(SYS_openat, AT_FDCWD,
			      "/sys/devices/system/clocksource/clocksource0/current_clocksource",
			      O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
		syscall(SYS_close, fd);
		buf[n > 0 ? n : 0] = 0;
	}
	usable = strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0) && !rhea_g.cfg.no_tsc;
	rhea_cal = NULL;
	ncal = 0;
	rhea_g.interval_tsc = 0;
	rhea_g.epoch_end_tsc = UINT64_MAX;
	if (usable)
		pair(&ref_tsc, &ref_ns);
}

/* From the ticker thread: publish a calibration when one is due. */
void clock_calibrate(void)
{
	if (!usable)
		return;
	uint64_t tsc, ns;
	pair(&tsc, &ns);
	if (tsc <= ref_tsc || ns - ref_ns < 10000000ull)
		return; /* at least 10 ms of baseline */
	const struct rhea_cal *cur = rhea_cal;
	if (cur && ns - cur->base_ns < 1000000000ull)
		return; /* once a second is plenty */
	uint64_t dt = tsc - ref_tsc, dn = ns - ref_ns;
	struct rhea_cal *c = &cals[ncal++ % 64];
	c->mult = (uint64_t)(((unsigned __int128)dn << 32) / dt);
	c->base_tsc = tsc;
	c->base_ns = ns;
	__atomic_store_n(&rhea_cal, c, __ATOMIC_RELEASE);
	/* ticks = ns * 2^32 / mult */
	uint64_t it = (uint64_t)(((unsigned __int128)rhea_g.cfg.interval_ns << 32) / (c->mult ? c->mult : 1));
	int first = __atomic_load_n(&rhea_g.interval_tsc, __ATOMIC_RELAXED) == 0;
	__atomic_store_n(&rhea_g.interval_tsc, it ? it : 1, __ATOMIC_RELAXED);
	uint64_t mb = (uint64_t)(((unsigned __int128)rhea_g.cfg.min_block_ns << 32) / (c->mult ? c->mult : 1));
	__atomic_store_n(&rhea_g.min_block_tsc, mb ? mb : 1, __ATOMIC_RELAXED);
	if (first) /* the grid starts here */
		__atomic_store_n(&rhea_g.epoch_end_tsc, tsc + it, __ATOMIC_RELEASE);
}

uint32_t epoch_bump(int by_ticker)
{
	uint32_t e = __atomic_load_n(&rhea_g.epoch, __ATOMIC_RELAXED), n;
	do {
		n = e + 1 ? e + 1 : 1; /* never 0: see agent_init */
		if (by_ticker) /* before the epoch shows: a capture in it finds it */
			__atomic_store_n(&rhea_g.ticker_epoch, n, __ATOMIC_RELEASE);
	} while (!__atomic_compare_exchange_n(&rhea_g.epoch, &e, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return n;
}

/*
 * The two ways of keeping timed calls exact cost differently: a ticking
 * ticker one wake-up per interval (measured by the ticker on its own CPU
 * clock: 10-20 us in the bench VM, a few on bare metal), a coasting one
 * an end clock read in every timed call and in every release someone
 * waits for (CLOCK_READ_NS: W2 on the bench VM, whose hooks spent 0.6%
 * more CPU coasting, about 15 ns per call, when it was twice as fast;
 * 20 ns let W2 coast half its run on the machine of 2026-11-27, where its
 * hooks then cost ~40 ns more a call than the ticker's wake-ups saved:
 * 6.6-6.9% direct cost against 6.0-6.2% with 40).  A mostly idle
 * server makes a few calls per interval and coasts; W2 makes ~600 a
 * millisecond, where both ways cost about the same, and ticks.  It coasts
 * when that costs less than half as much as ticking, and ticks again when
 * it costs more than 80%: no flapping in between.
 */
#define CLOCK_READ_NS 40
#define CLOCK_GETTIME_NS 60 /* without a usable TSC: clock_gettime, 50 ns here */

uint64_t clock_read_ns(void)
{
	return __atomic_load_n(&rhea_cal, __ATOMIC_ACQUIRE) ? CLOCK_READ_NS : CLOCK_GETTIME_NS;
}

int epoch_coast_pays(uint64_t calls_per_s, uint64_t read_ns, uint64_t wake_ns, uint64_t interval_ns,
		     int coasting)
{
	if (interval_ns == 0)
		return 0;
	unsigned __int128 tick = (unsigned __int128)wake_ns * (1000000000ull / interval_ns + 1);
	unsigned __int128 coast = (unsigned __int128)calls_per_s * read_ns;
	return coasting ? 5 * coast < 4 * tick : 2 * coast < tick;
}

int epoch_cross(uint64_t tsc, int by_ticker)
{
	uint64_t it = __atomic_load_n(&rhea_g.interval_tsc, __ATOMIC_RELAXED);
	uint64_t end = __atomic_load_n(&rhea_g.epoch_end_tsc, __ATOMIC_ACQUIRE);
	if (it == 0 || end == UINT64_MAX)
		return 0; /* no grid (yet) */
	while (tsc >= end) {
		/* the end of the interval that holds tsc */
		uint64_t next = end + it * (1 + (tsc - end) / it);
		if (__atomic_compare_exchange_n(&rhea_g.epoch_end_tsc, &end, next, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			epoch_bump(by_ticker);
			return 1;
		}
	}
	return 0;
}

int clock_tsc_usable(void)
{
	return usable;
}

uint64_t rhea_now_slow(void)
{
	return mono_ns();
}

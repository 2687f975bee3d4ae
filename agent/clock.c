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
	usable = strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
	rhea_cal = NULL;
	ncal = 0;
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
}

uint64_t rhea_now_slow(void)
{
	return mono_ns();
}

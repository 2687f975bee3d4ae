/* Unit tests of agent/clock.c's epoch: it moves once per interval of its
 * grid, whoever crosses the interval's end first, also when threads race
 * on it; the ticker's epochs are marked as its own; it is never 0; and the
 * ticker's choice between ticking and coasting follows the costs, with a
 * band in between where it keeps what it does. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "agent.h"

struct rhea_agent rhea_g;

static void setup(void)
{
	memset(&rhea_g, 0, sizeof(rhea_g));
	rhea_g.epoch = 7;
	rhea_g.cfg.interval_ns = 1000000;
	rhea_g.interval_tsc = 1000;
	rhea_g.epoch_end_tsc = 5000;
}

TestSuite(clock, .init = setup);

Test(clock, without_a_grid_nothing_moves)
{
	rhea_g.interval_tsc = 0;
	cr_assert_eq(epoch_cross(1000000, 0), 0);
	rhea_g.interval_tsc = 1000;
	rhea_g.epoch_end_tsc = UINT64_MAX;
	cr_assert_eq(epoch_cross(UINT64_MAX - 1, 0), 0);
	cr_assert_eq(rhea_g.epoch, 7);
}

Test(clock, the_epoch_moves_once_per_interval_on_the_grid)
{
	cr_assert_eq(epoch_cross(4999, 0), 0);
	cr_assert_eq(rhea_g.epoch, 7);
	cr_assert_eq(epoch_cross(5000, 0), 1);
	cr_assert_eq(rhea_g.epoch, 8);
	cr_assert_eq(rhea_g.epoch_end_tsc, 6000);
	cr_assert_eq(epoch_cross(5999, 0), 0);
	cr_assert_eq(rhea_g.epoch, 8);
	/* three intervals later: one step, and the end stays on the grid */
	cr_assert_eq(epoch_cross(9300, 0), 1);
	cr_assert_eq(rhea_g.epoch, 9);
	cr_assert_eq(rhea_g.epoch_end_tsc, 10000);
	cr_assert_eq(rhea_g.ticker_epoch, 0, "a hook's epoch is not the ticker's");
}

Test(clock, the_tickers_epochs_are_its_own)
{
	cr_assert_eq(epoch_cross(5000, 1), 1);
	cr_assert_eq(rhea_g.ticker_epoch, 8);
	cr_assert_eq(epoch_cross(6000, 0), 1);
	cr_assert_eq(rhea_g.epoch, 9);
	cr_assert_eq(rhea_g.ticker_epoch, 8);
	cr_assert_eq(epoch_bump(1), 10);
	cr_assert_eq(rhea_g.ticker_epoch, 10);
}

Test(clock, the_epoch_is_never_0)
{
	rhea_g.epoch = UINT32_MAX;
	cr_assert_eq(epoch_bump(0), 1);
	cr_assert_eq(rhea_g.epoch, 1);
}

/* Four threads cross the same TSC values, each at its own pace: however
 * they interleave, each interval's end moves the epoch exactly once. */
#define RACE_STEPS 200000
static void *racer(void *arg)
{
	long n = 0;
	for (uint64_t tsc = 5000; tsc < 5000 + RACE_STEPS * 10; tsc += 10)
		n += epoch_cross(tsc, (int)(intptr_t)arg == 0);
	return (void *)n;
}

Test(clock, racing_threads_move_it_once_per_interval)
{
	pthread_t th[4];
	for (intptr_t i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, racer, (void *)i), 0);
	long total = 0;
	for (int i = 0; i < 4; i++) {
		void *n;
		pthread_join(th[i], &n);
		total += (long)n;
	}
	long intervals = RACE_STEPS * 10 / 1000; /* ends at 5000, 6000, ... */
	cr_assert_eq(total, intervals, "%ld advances for %ld interval ends", total, intervals);
	cr_assert_eq(rhea_g.epoch, 7 + (uint32_t)intervals);
	cr_assert_eq(rhea_g.epoch_end_tsc, 5000 + (uint64_t)intervals * 1000);
}

/* A wake-up of 10 us every 1 ms: 10 ms a second.  Timed calls cost 20 ns
 * each while coasting. */
Test(clock, coasting_when_it_costs_less_than_ticking)
{
	uint64_t wake = 10000, interval = 1000000;
	cr_assert(epoch_coast_pays(0, 20, wake, interval, 0), "an idle program coasts");
	cr_assert(epoch_coast_pays(100000, 20, wake, interval, 0), "2 ms a second against 10: coast");
	/* 6 ms against 10: not worth leaving ticking, not worth leaving coasting */
	cr_assert_not(epoch_coast_pays(300000, 20, wake, interval, 0));
	cr_assert(epoch_coast_pays(300000, 20, wake, interval, 1));
	/* 9 ms against 10: ticking again */
	cr_assert_not(epoch_coast_pays(450000, 20, wake, interval, 1));
	/* cheap wake-ups (bare metal): even a few calls tick */
	cr_assert_not(epoch_coast_pays(100000, 20, 1000, interval, 0));
	cr_assert_not(epoch_coast_pays(0, 20, wake, 0, 0), "no interval, no coasting");
}

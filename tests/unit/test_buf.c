/* Unit tests of agent/buf.c: entries in, chunks out in seal order, drops
 * counted when full, concurrent emitters lose nothing they were told was
 * stored. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

struct ent {
	uint32_t tid, seq;
};

struct seen {
	uint64_t count;
	uint32_t last_seq[64];
	int dup;
	uint64_t bytes;
};

static int collect(void *arg, const void *data, size_t len)
{
	struct seen *s = arg;
	cr_assert_eq(len % sizeof(struct ent), 0);
	const struct ent *e = data;
	for (size_t i = 0; i < len / sizeof(*e); i++) {
		s->count++;
		if (e[i].tid < 64 && e[i].seq != 0 && e[i].seq <= s->last_seq[e[i].tid])
			s->dup++;
		if (e[i].tid < 64)
			s->last_seq[e[i].tid] = e[i].seq;
	}
	s->bytes += len;
	return 0;
}

Test(buf, roundtrip_in_order)
{
	struct buf b;
	cr_assert_eq(buf_init(&b, 8, 4096, 1), 0);
	struct seen s = {0};
	for (uint32_t i = 1; i <= 1000; i++) {
		struct ent e = {1, i};
		cr_assert_eq(buf_emit(&b, 1, &e, sizeof(e)), 0);
		if (i % 300 == 0)
			buf_drain(&b, collect, &s);
	}
	buf_seal_all(&b, 1000000);
	buf_drain(&b, collect, &s);
	cr_assert_eq(s.count, 1000);
	cr_assert_eq(s.dup, 0, "one shard keeps one thread's order");
	cr_assert_eq(b.dropped, 0);
	buf_destroy(&b);
}

Test(buf, drops_when_full_and_counts)
{
	struct buf b;
	cr_assert_eq(buf_init(&b, 2, 4096, 1), 0);
	struct ent e = {1, 1};
	int stored = 0;
	for (int i = 0; i < 10000; i++)
		stored += buf_emit(&b, 1, &e, sizeof(e)) == 0;
	cr_assert_eq(stored + (int)b.dropped, 10000);
	cr_assert_leq(stored, 2 * 4096 / (int)sizeof(e));
	cr_assert_gt(b.dropped, 0);
	struct seen s = {0};
	buf_seal_all(&b, 1000000);
	buf_drain(&b, collect, &s);
	cr_assert_eq(s.count, (uint64_t)stored);
	/* After draining there is room again. */
	cr_assert_eq(buf_emit(&b, 1, &e, sizeof(e)), 0);
	buf_destroy(&b);
}

Test(buf, oversized_entry_is_dropped)
{
	struct buf b;
	cr_assert_eq(buf_init(&b, 2, 4096, 1), 0);
	static char big[8192];
	cr_assert_eq(buf_emit(&b, 1, big, sizeof(big)), -1);
	cr_assert_eq(b.dropped, 1);
	buf_destroy(&b);
}

Test(buf, busy_shard_falls_over_to_another)
{
	struct buf b;
	cr_assert_eq(buf_init(&b, 8, 4096, 2), 0);
	b.shards[1].lock = 1; /* as if a signal interrupted its holder */
	struct ent e = {1, 1};
	cr_assert_eq(buf_emit(&b, 1, &e, sizeof(e)), 0, "tid 1 maps to shard 1, which is busy");
	b.shards[0].lock = 1;
	cr_assert_eq(buf_emit(&b, 1, &e, sizeof(e)), -1, "every shard busy: drop, never wait");
	cr_assert_eq(b.dropped, 1);
	b.shards[0].lock = b.shards[1].lock = 0;
	buf_destroy(&b);
}

static struct buf shared;
static volatile int stop_drain;
static struct seen drained;

static void *emitter(void *arg)
{
	uint32_t tid = (uint32_t)(uintptr_t)arg;
	uint64_t ok = 0;
	for (uint32_t i = 1; i <= 200000; i++) {
		struct ent e = {tid, i};
		ok += buf_emit(&shared, tid, &e, sizeof(e)) == 0;
	}
	return (void *)(uintptr_t)ok;
}

static void *drainer(void *arg)
{
	(void)arg;
	while (!stop_drain) {
		buf_seal_all(&shared, 0);
		buf_drain(&shared, collect, &drained);
	}
	return NULL;
}

Test(buf, concurrent_emitters_lose_nothing_stored)
{
	cr_assert_eq(buf_init(&shared, 16, 16384, 4), 0);
	pthread_t d, th[8];
	pthread_create(&d, NULL, drainer, NULL);
	for (uintptr_t i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, emitter, (void *)(i + 1));
	uint64_t stored = 0;
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(th[i], &r);
		stored += (uintptr_t)r;
	}
	stop_drain = 1;
	pthread_join(d, NULL);
	buf_seal_all(&shared, 1000000);
	buf_drain(&shared, collect, &drained);
	cr_assert_eq(drained.count, stored, "every entry emit() accepted comes out once");
	cr_assert_eq(stored + shared.dropped, 8 * 200000ull);
	cr_assert_eq(shared.emitted, stored);
	buf_destroy(&shared);
}

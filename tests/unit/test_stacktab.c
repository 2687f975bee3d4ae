/* Unit tests of agent/stacktab.c: interning, prefix sharing, fullness,
 * concurrent interning from many threads, readiness for the writer. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "stacktab.h"

static struct stacktab t;

static void setup(void)
{
	cr_assert_eq(stacktab_init(&t, 1 << 16), 0);
}

static void teardown(void)
{
	stacktab_destroy(&t);
}

TestSuite(stacktab, .init = setup, .fini = teardown);

Test(stacktab, same_stack_same_id_and_shared_prefix)
{
	uint64_t abc[] = {0xA, 0xB, 0xC};
	uint64_t aec[] = {0xA, 0xE, 0xC};
	uint32_t ids1[3], ids2[3];
	uint32_t s1 = stacktab_intern(&t, 0, abc, 3, ids1);
	cr_assert_neq(s1, 0);
	cr_assert_eq(t.next_id, 4, "A>B>C adds three nodes");
	cr_assert_eq(stacktab_intern(&t, 0, abc, 3, NULL), s1, "the same stack is the same id");
	cr_assert_eq(t.next_id, 4, "and adds nothing");
	uint32_t s2 = stacktab_intern(&t, 0, aec, 3, ids2);
	cr_assert_neq(s2, s1);
	cr_assert_eq(ids2[0], ids1[0], "the root node A is shared");
	cr_assert_eq(t.next_id, 6, "A>E>C adds (A,E) and (E,C) only");
	cr_assert_eq(t.nodes[s2].addr, 0xC);
	cr_assert_eq(t.nodes[s2].parent, ids2[1]);
	cr_assert_eq(t.nodes[ids2[1]].parent, ids1[0]);
}

Test(stacktab, intern_below_a_parent)
{
	uint64_t ab[] = {1, 2};
	uint32_t ids[2];
	stacktab_intern(&t, 0, ab, 2, ids);
	uint64_t c = 3;
	uint32_t leaf = stacktab_intern(&t, ids[1], &c, 1, NULL);
	uint64_t abc[] = {1, 2, 3};
	cr_assert_eq(stacktab_intern(&t, 0, abc, 3, NULL), leaf);
	cr_assert_eq(stacktab_find(&t, ids[1], 3), leaf);
	cr_assert_eq(stacktab_find(&t, ids[1], 4), 0);
}

Test(stacktab, deep_stacks_in_batches_and_pieces)
{
	/* 100 frames: over three of intern's batches of 32; then the same
	 * stack interned in two pieces, and a sibling of its middle frame */
	uint64_t a[100];
	uint32_t ids[100], ids2[100];
	for (int i = 0; i < 100; i++)
		a[i] = 0x400000 + 16 * (uint64_t)(i % 7) + (uint64_t)i * 0x1000;
	uint32_t leaf = stacktab_intern(&t, 0, a, 100, ids);
	cr_assert_neq(leaf, 0);
	cr_assert_eq(t.next_id, 101, "one node per frame");
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(t.nodes[ids[i]].addr, a[i]);
		cr_assert_eq(t.nodes[ids[i]].parent, i ? ids[i - 1] : 0);
		cr_assert_eq(stacktab_find(&t, i ? ids[i - 1] : 0, a[i]), ids[i], "frame %d found", i);
	}
	cr_assert_eq(stacktab_intern(&t, 0, a, 45, ids2), ids[44]);
	cr_assert_eq(stacktab_intern(&t, ids2[44], a + 45, 55, ids2 + 45), leaf);
	cr_assert_arr_eq(ids, ids2, sizeof(ids));
	cr_assert_eq(t.next_id, 101, "nothing new");
	uint64_t other = 0x999;
	uint32_t sib = stacktab_intern(&t, ids[49], &other, 1, NULL);
	cr_assert(sib != 0 && sib != ids[50]);
	cr_assert_eq(stacktab_find(&t, ids[49], 0x999), sib);
}

Test(stacktab, full_table_fails_cleanly)
{
	struct stacktab small;
	cr_assert_eq(stacktab_init(&small, 16), 0);
	uint64_t a[64];
	for (int i = 0; i < 64; i++)
		a[i] = 100 + (uint64_t)i;
	cr_assert_eq(stacktab_intern(&small, 0, a, 64, NULL), 0, "deeper than the table: 0");
	cr_assert_gt(small.full, 0);
	/* What fitted is still found. */
	cr_assert_neq(stacktab_find(&small, 0, 100), 0);
	cr_assert_leq(small.next_id, 16);
	stacktab_destroy(&small);
}

Test(stacktab, ready_upto_stops_at_unready)
{
	uint64_t a[] = {7, 8, 9};
	stacktab_intern(&t, 0, a, 3, NULL);
	cr_assert_eq(stacktab_ready_upto(&t, 1), 4);
	t.nodes[2].ready = 0;
	cr_assert_eq(stacktab_ready_upto(&t, 1), 2);
	stacktab_after_fork(&t);
	cr_assert_eq(stacktab_ready_upto(&t, 1), 4);
	cr_assert_eq(t.written, 1);
}

#define NTHREADS 8
#define NSTACKS 2000

static void *hammer(void *arg)
{
	long seed = (long)arg;
	uint32_t *out = malloc(NSTACKS * sizeof(uint32_t));
	for (int s = 0; s < NSTACKS; s++) {
		uint64_t a[12];
		/* The same NSTACKS stacks in every thread, visited in different orders. */
		int k = (int)((s * 7919 + seed * 104729) % NSTACKS);
		for (int d = 0; d < 12; d++)
			a[d] = 0x400000 + (uint64_t)(d < 6 ? d : (k * 13 + d) % 97) * 16;
		a[11] = (uint64_t)k;
		out[k] = stacktab_intern(&t, 0, a, 12, NULL);
	}
	return out;
}

Test(stacktab, concurrent_interning_agrees)
{
	pthread_t th[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, hammer, (void *)i);
	uint32_t *res[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], (void **)&res[i]);
	for (int k = 0; k < NSTACKS; k++) {
		cr_assert_neq(res[0][k], 0);
		for (int i = 1; i < NTHREADS; i++)
			cr_assert_eq(res[i][k], res[0][k], "stack %d: thread %d got another id", k, i);
		/* The leaf's chain spells the stack. */
		uint32_t id = res[0][k];
		cr_assert_eq(t.nodes[id].addr, (uint64_t)k);
	}
	/* Every node handed out is ready (orphans included). */
	cr_assert_eq(stacktab_ready_upto(&t, 1), t.next_id);
	for (int i = 0; i < NTHREADS; i++)
		free(res[i]);
}

/* Unit tests of core/nodepack.c: any table of nodes comes back exactly
 * (addresses anywhere in 64 bits, parents anywhere below or above the
 * node, the root), a deep table of few addresses codes to a few bytes a
 * node, the encoder never writes past its buffer, and a damaged entry is
 * refused by rfile_entry_check() or the decoder, never read past. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "nodepack.h"
#include "rfile.h"

#define RNG_SEED 0x2545f4914f6cdd1dull
#include "xorshift.h"

enum { N = 50000 };
static struct rhea_node in[N], out[N];
static uint8_t buf[N * 20 + 64] __attribute__((aligned(8)));

/* Stacks as the agent interns them: each new one shares a prefix with an
 * older one and adds frames leaf-last, one node after the other, from a
 * few hundred return addresses of two modules. */
static void deep_table(uint32_t first_id, uint32_t n)
{
	uint64_t addrs[300];
	for (int i = 0; i < 300; i++)
		addrs[i] = (i < 200 ? 0x555555554000ull : 0x7ffff7d80000ull) + rng() % 0x40000;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = first_id + i;
		in[i].addr = addrs[rng() % 300];
		in[i].parent = i == 0 || rng() % 20 == 0 ? (uint32_t)(rng() % (id ? id : 1)) : id - 1;
		in[i].pad = 0;
	}
}

static size_t roundtrip(uint32_t first_id, uint32_t n)
{
	size_t len = nodepack_encode(first_id, in, n, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	cr_assert_eq(len % 8, 0);
	cr_assert_leq(len, nodepack_bound(n));
	const struct rhea_entry *e = (const void *)buf;
	cr_assert_eq(e->kind, RHEA_E_NODES2);
	cr_assert_eq(e->size, len);
	cr_assert_eq(rfile_entry_check(e), 0);
	const struct rhea_nodes2 *h = (const void *)buf;
	cr_assert_eq(h->first_id, first_id);
	cr_assert_eq(h->count, n);
	memset(out, 0xa5, sizeof(out));
	cr_assert_eq(nodepack_decode(e, out), 0);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(out[i].addr, in[i].addr, "node %u", first_id + i);
		cr_assert_eq(out[i].parent, in[i].parent, "node %u", first_id + i);
		cr_assert_eq(out[i].pad, 0);
	}
	return len;
}

Test(nodepack, deep_table_comes_back_small)
{
	deep_table(1, N);
	size_t len = roundtrip(1, N);
	/* 16 bytes a node as structs; here a parent byte, an index of one or
	 * two bytes, 300 addresses of 2-3 bytes */
	cr_assert_lt(len, (size_t)N * 4, "%zu bytes for %d nodes", len, N);
}

Test(nodepack, any_values_come_back)
{
	for (int round = 0; round < 20; round++) {
		uint32_t n = 1 + (uint32_t)(rng() % 2000);
		uint32_t first = round % 3 == 0 ? 0 : round % 3 == 1 ? (1u << 31) - n : (uint32_t)(rng() % 100000);
		for (uint32_t i = 0; i < n; i++) {
			switch (rng() % 4) {
			case 0: in[i].addr = rng(); break;                 /* anywhere */
			case 1: in[i].addr = i ? in[i - 1].addr : 0; break; /* the same again */
			case 2: in[i].addr = 0; break;
			default: in[i].addr = UINT64_MAX - rng() % 16;
			}
			in[i].parent = rng() % 3 == 0 ? (uint32_t)rng() : rng() % 2 ? 0 : first + i - (first + i > 0);
			in[i].pad = 0;
		}
		roundtrip(first, n);
	}
	/* no nodes at all */
	roundtrip(7, 0);
}

Test(nodepack, never_writes_past_its_buffer)
{
	deep_table(1, 3000);
	size_t need = nodepack_encode(1, in, 3000, buf, sizeof(buf));
	cr_assert_gt(need, 0);
	static uint8_t small[1 << 16] __attribute__((aligned(8)));
	for (size_t cap = 0; cap < need; cap += 1 + cap / 7) {
		memset(small, 0x5a, sizeof(small));
		cr_assert_eq(nodepack_encode(1, in, 3000, small, cap), 0, "cap %zu of %zu", cap, need);
		for (size_t i = cap; i < sizeof(small); i++)
			cr_assert_eq(small[i], 0x5a, "cap %zu: byte %zu written", cap, i);
	}
	cr_assert_eq(nodepack_encode(1, in, 3000, small, need), need);
}

/* Whether a damaged copy of the entry is refused whole: by the check or
 * the decoder. */
static int refused(const uint8_t *entry)
{
	const struct rhea_entry *e = (const void *)entry;
	if (rfile_entry_check(e) != 0)
		return 1;
	const struct rhea_nodes2 *h = (const void *)entry;
	struct rhea_node *v = malloc((h->count ? h->count : 1) * sizeof(*v));
	int r = nodepack_decode(e, v);
	free(v);
	return r != 0;
}

Test(nodepack, damage_is_refused)
{
	deep_table(1, 1000);
	size_t len = nodepack_encode(1, in, 1000, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	static uint8_t copy[sizeof(buf)] __attribute__((aligned(8)));
	struct rhea_nodes2 *h = (void *)copy;

	memcpy(copy, buf, len);
	cr_assert_not(refused(copy), "the undamaged entry");
	/* the coded bytes cut short (the entry's size with them) */
	for (uint32_t cut = 1; cut < 64; cut++) {
		memcpy(copy, buf, len);
		h->coded_len -= cut;
		cr_assert(refused(copy), "coded_len %u short", cut);
	}
	/* more nodes or addresses than the bytes can hold, or said */
	memcpy(copy, buf, len);
	h->count = h->coded_len;
	cr_assert(refused(copy));
	memcpy(copy, buf, len);
	h->naddrs = h->count + 1;
	cr_assert(refused(copy));
	memcpy(copy, buf, len);
	h->count--; /* the last indices left over */
	cr_assert(refused(copy));
	/* an index past the addresses: the last byte is the last node's
	 * index, one byte (< 300) or the last of two */
	memcpy(copy, buf, len);
	h->naddrs = 1;
	cr_assert(refused(copy));
	/* a varint that never ends */
	memcpy(copy, buf, len);
	memset(copy + sizeof(*h), 0xff, h->coded_len);
	cr_assert(refused(copy));
	/* an index one past the addresses */
	in[0] = (struct rhea_node){5, 0, 0};
	len = nodepack_encode(1, in, 1, buf, sizeof(buf));
	memcpy(copy, buf, len);
	cr_assert_eq(h->coded_len, 3);
	cr_assert_eq(copy[sizeof(*h) + 2], 0); /* address 5, parent 0, index 0 */
	cr_assert_not(refused(copy));
	copy[sizeof(*h) + 2] = 1;
	cr_assert(refused(copy));
	/* a parent below 0 */
	in[0].parent = 0;
	in[0].addr = 1;
	len = nodepack_encode(0, in, 1, buf, sizeof(buf));
	memcpy(copy, buf, len);
	cr_assert_not(refused(copy));
	copy[sizeof(*h) + 1] = 1; /* zz(id - parent) = 1: the delta -1, parent 1 */
	cr_assert_not(refused(copy));
	copy[sizeof(*h) + 1] = 2; /* delta 1: parent -1 */
	cr_assert(refused(copy));
}

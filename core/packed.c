/*
 * packed.c - the samples of one thread as varint deltas.
 *
 * In memory the agent keeps samples as fixed 152-byte structs: the cheapest
 * thing to fill in a hook or a signal handler.  In the file most of those
 * bytes are zeros or repetitions: begin counters equal to end counters,
 * absolute 64-bit times, stack ids and counters that move by little from one
 * sample to the next.  The writer thread therefore re-encodes each thread's
 * samples of a flush before compressing: every field as a LEB128 varint of
 * its difference to the previous sample of the same thread (zigzag where it
 * can go down), begin counters as their difference to the end counters,
 * rare fields behind a presence byte.  zstd then has little left to do; a
 * sample takes about a tenth of its struct.  The layout is in
 * doc/format.md.
 */
#include "packed.h"

#include <string.h>

enum {
	P_OBJECT = 1,   /* object present */
	P_WAKER = 2,    /* waker_tid, owner_tid, waker_stack, release present */
	P_CBEGIN = 4,   /* c_begin differs from c_end */
	P_OWNER = 8,    /* owner_tid present */
};

struct cursor {
	uint8_t *p, *end;
};

static inline int put(struct cursor *c, uint64_t v)
{
	do {
		if (c->p >= c->end)
			return -1;
		uint8_t b = v & 0x7f;
		v >>= 7;
		*c->p++ = (uint8_t)(b | (v ? 0x80 : 0));
	} while (v);
	return 0;
}

static inline uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static int put_counters_delta(struct cursor *c, const struct rhea_counters *a, const struct rhea_counters *b)
{
	/* a - b, field by field (zigzag: counters of a thread only grow, but a
	 * reader must not trust that). */
	return put(c, zz((int64_t)(a->cpu_ns - b->cpu_ns))) | put(c, zz((int64_t)(a->alloc_count - b->alloc_count))) |
	       put(c, zz((int64_t)(a->alloc_bytes - b->alloc_bytes))) |
	       put(c, zz((int64_t)a->minflt - (int64_t)b->minflt)) |
	       put(c, zz((int64_t)a->majflt - (int64_t)b->majflt)) |
	       put(c, zz((int64_t)a->nvcsw - (int64_t)b->nvcsw)) |
	       put(c, zz((int64_t)a->nivcsw - (int64_t)b->nivcsw));
}

size_t packed_encode(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	if (cap < sizeof(struct rhea_packed) || n == 0)
		return 0;
	struct rhea_packed *h = out;
	struct cursor c = {(uint8_t *)(h + 1), (uint8_t *)out + cap};
	struct rhea_sample prev;
	memset(&prev, 0, sizeof(prev));
	int err = 0;
	for (uint32_t i = 0; i < n && !err; i++) {
		const struct rhea_sample *x = s[i];
		unsigned pres = (x->object ? P_OBJECT : 0) |
				(x->waker_tid || x->waker_stack || x->release_ns ? P_WAKER : 0) |
				(x->owner_tid ? P_OWNER : 0) |
				(memcmp(&x->c_begin, &x->c_end, sizeof(x->c_end)) ? P_CBEGIN : 0);
		err |= put(&c, pres);
		err |= put(&c, x->h.flags);
		err |= put(&c, x->trigger);
		err |= put(&c, x->merged);
		err |= put(&c, zz((int64_t)x->stack - (int64_t)prev.stack));
		err |= put(&c, zz((int64_t)x->msgid - (int64_t)prev.msgid));
		err |= put(&c, zz((int64_t)(x->begin_ns - prev.end_ns)));
		err |= put(&c, zz((int64_t)(x->end_ns - x->begin_ns)));
		if (pres & P_OBJECT)
			err |= put(&c, x->object);
		if (pres & P_WAKER) {
			err |= put(&c, x->waker_tid);
			err |= put(&c, x->waker_stack);
			err |= put(&c, zz((int64_t)(x->release_ns - x->begin_ns)));
		}
		if (pres & P_OWNER)
			err |= put(&c, x->owner_tid);
		err |= put_counters_delta(&c, &x->c_end, &prev.c_end);
		if (pres & P_CBEGIN)
			err |= put_counters_delta(&c, &x->c_end, &x->c_begin);
		prev = *x;
	}
	if (err)
		return 0;
	size_t len = (size_t)(c.p - (uint8_t *)out);
	size_t padded = (len + 7) & ~(size_t)7;
	if (padded > cap || padded > UINT32_MAX)
		return 0;
	memset(c.p, 0, padded - len);
	h->h.kind = RHEA_E_PACKED;
	h->h.flags = 0;
	h->h.size = (uint32_t)padded;
	h->tid = s[0]->tid;
	h->count = n;
	h->base_ns = 0;
	return padded;
}

struct rcursor {
	const uint8_t *p, *end;
	int bad;
};

static inline uint64_t get(struct rcursor *c)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (c->p >= c->end) {
			c->bad = 1;
			return 0;
		}
		uint8_t b = *c->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	c->bad = 1;
	return 0;
}

static void get_counters_delta(struct rcursor *c, struct rhea_counters *out, const struct rhea_counters *ref,
			       int sign)
{
	/* out = ref + sign * delta */
	int64_t d[7];
	for (int i = 0; i < 7; i++)
		d[i] = sign * unzz(get(c));
	out->cpu_ns = ref->cpu_ns + (uint64_t)d[0];
	out->alloc_count = ref->alloc_count + (uint64_t)d[1];
	out->alloc_bytes = ref->alloc_bytes + (uint64_t)d[2];
	out->minflt = (uint32_t)((int64_t)ref->minflt + d[3]);
	out->majflt = (uint32_t)((int64_t)ref->majflt + d[4]);
	out->nvcsw = (uint32_t)((int64_t)ref->nvcsw + d[5]);
	out->nivcsw = (uint32_t)((int64_t)ref->nivcsw + d[6]);
}

int packed_decode(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s), void *arg)
{
	if (e->size < sizeof(struct rhea_packed))
		return -1;
	const struct rhea_packed *h = (const void *)e;
	struct rcursor c = {(const uint8_t *)(h + 1), (const uint8_t *)e + e->size, 0};
	struct rhea_sample prev, x;
	memset(&prev, 0, sizeof(prev));
	prev.end_ns = h->base_ns;
	for (uint32_t i = 0; i < h->count; i++) {
		memset(&x, 0, sizeof(x));
		x.h.kind = RHEA_E_SAMPLE;
		x.h.size = sizeof(x);
		x.tid = h->tid;
		unsigned pres = (unsigned)get(&c);
		x.h.flags = (uint16_t)get(&c);
		x.trigger = (uint16_t)get(&c);
		x.merged = (uint16_t)get(&c);
		x.stack = (uint32_t)((int64_t)prev.stack + unzz(get(&c)));
		x.msgid = (uint32_t)((int64_t)prev.msgid + unzz(get(&c)));
		x.begin_ns = prev.end_ns + (uint64_t)unzz(get(&c));
		x.end_ns = x.begin_ns + (uint64_t)unzz(get(&c));
		if (pres & P_OBJECT)
			x.object = get(&c);
		if (pres & P_WAKER) {
			x.waker_tid = (uint32_t)get(&c);
			x.waker_stack = (uint32_t)get(&c);
			x.release_ns = x.begin_ns + (uint64_t)unzz(get(&c));
		}
		if (pres & P_OWNER)
			x.owner_tid = (uint32_t)get(&c);
		get_counters_delta(&c, &x.c_end, &prev.c_end, 1);
		if (pres & P_CBEGIN)
			get_counters_delta(&c, &x.c_begin, &x.c_end, -1);
		else
			x.c_begin = x.c_end;
		if (c.bad || pres > 15)
			return -1;
		if (fn(arg, &x) != 0)
			return -1;
		prev = x;
	}
	return 0;
}

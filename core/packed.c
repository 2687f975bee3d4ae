/*
 * packed.c - the samples of one thread, compactly.
 *
 * In memory the agent keeps samples as fixed 152-byte structs: the cheapest
 * thing to fill in a hook or a signal handler.  In the file most of those
 * bytes are zeros or repetitions.  The writer thread therefore re-encodes
 * each thread's samples of a flush as one entry before zstd sees them.
 *
 * PACKED (kind 9), the first encoding, wrote every field as a LEB128 varint
 * of its difference to the previous sample: about 26 bytes per sample
 * before zstd, 20 after, on the server-like benchmark W2.  Writers no longer
 * produce it; it is still decoded, so that older recordings stay readable.
 *
 * PACKED2 (kind 10) spends bytes only on what changed and on what cannot
 * be guessed from what came before, each choice measured on W2 and on
 * recordings of real programs (python, perl, git, sort, xz, find); the
 * layout is in doc/format.md:
 *
 *  - times and CPU time at microsecond resolution.  The CPU counter comes
 *    from getrusage and is microsecond-granular anyway; the nanoseconds of
 *    the monotonic clock cost a byte and a half per time and no analysis
 *    needs them.  Quantizing is floor(t / 1000) of the absolute value,
 *    which is monotonic: a.end <= b.begin stays true, so a thread's samples
 *    keep their order and never come to overlap;
 *  - one header byte per sample whose bits say which of the rarely changing
 *    fields follow (trigger, flags, merged, msgid, duration, BLOCK extras,
 *    begin counters): a typical sample pays one byte for all of them;
 *  - the stack as a position in the list of the last 8 stacks (move to
 *    front): threads alternate between a handful of call sites, so it is
 *    almost always 0..3; a stack not in the list is a delta to the previous
 *    one.  The trigger and the flags are guessed from the stack (those last
 *    seen with it: a call site calls one function), the BLOCK extras
 *    (object, waker, owner) from the trigger and flags (a thread waits on
 *    the same lock, woken by the same thread; the sampler's CPU periods are
 *    nearly always 1);
 *  - counters behind a mask byte of which of them differ from their guess,
 *    only those following: most samples do not fault, the CPU time and the
 *    context switches follow the thread's rate, the bytes allocated follow
 *    the allocations made (-1.3 bytes a sample on W2);
 *  - two streams: the control bytes (header, stack, masks...) first, then
 *    the values (times, counters): zstd finds the repetitions of the first
 *    and codes the second apart (-0.4 bytes a sample).
 *
 * W2 (30000 requests): 21.7 bytes a sample in the file -> 14.6, everything
 * included.  The rest is real information: a sample's times and counter
 * differences hold about 10 bytes of entropy (adaptive Rice codes of the
 * same residuals), which a byte-oriented varint wastes some of.
 *
 * PACKED3 (kind 11) is PACKED2 with the differences of chosen counters in
 * steps, what rhea record's compaction wrote (cli/compact.c) with the CPU
 * time in steps of at most 1/16 of the difference expected.  The steps
 * are powers of two that both sides derive from what they already have
 * (the guess, the previous difference), so they cost no byte; rounding
 * down keeps a decoded counter at or below the truth, so that it never
 * goes down and never drifts: its error stays under one step.  Compacted,
 * with each thread's samples in one entry: W2 10.0 bytes a sample exact,
 * 9.35 with the CPU time in steps (order-0 estimates put the values' own
 * entropy some 13% below what zstd makes of them; the times are near
 * theirs).
 *
 * PACKED4 (kind 12), what the compaction writes now, codes the same
 * symbols (no masks) with a range coder (rcoder.h), each field against
 * probabilities of its own, and guesses better where a guess pays:
 *  - times on the capture grid: the agent captures at the first hook
 *    after each point of its interval's grid, so a begin is a few grid
 *    points and a few microseconds past one (begin -0.23 bytes a sample,
 *    a run's end -0.13);
 *  - msgid at the event loop's pace, allocations at the thread's rate per
 *    CPU time, a c_begin as its share by time of the sample's difference.
 * W2 (100000 requests): 9.3 bytes a sample (PACKED3 through zstd, control
 * 1.6, values 7.7) -> 6.7.  What is left is mostly the counters' real
 * noise: allocation bytes 1.1, counts 0.75, CPU time 0.64, context
 * switches 1.2, the times' offsets past the grid 1.2.
 *
 * The decoders read untrusted input: every varint is bounded, every value
 * must fit its field, undefined bits and trailing garbage are errors, and
 * nothing is read past the entry.
 */
#include "packed.h"

#include <string.h>

#include "varint.h"

#ifndef RHEA_AGENT
#include <stdlib.h>

#include "rcoder.h"
#include "vec.h"
#endif

/* ---- PACKED (9) ----------------------------------------------------------- */

enum {
	P_OBJECT = 1,   /* object present */
	P_WAKER = 2,    /* waker_tid, waker_stack, release present */
	P_CBEGIN = 4,   /* c_begin differs from c_end */
	P_OWNER = 8,    /* owner_tid present */
};

#ifndef RHEA_AGENT
/* The agent writes PACKED2 only; the kind 9 encoder stays for the tests of
 * the kind 9 decoder and for tools that convert. */
static void put_counters_delta(struct cursor *c, const struct rhea_counters *a, const struct rhea_counters *b)
{
	/* a - b, field by field (zigzag: counters of a thread only grow, but a
	 * reader must not trust that). */
	put(c, zz((int64_t)(a->cpu_ns - b->cpu_ns)));
	put(c, zz((int64_t)(a->alloc_count - b->alloc_count)));
	put(c, zz((int64_t)(a->alloc_bytes - b->alloc_bytes)));
	put(c, zz((int64_t)a->minflt - (int64_t)b->minflt));
	put(c, zz((int64_t)a->majflt - (int64_t)b->majflt));
	put(c, zz((int64_t)a->nvcsw - (int64_t)b->nvcsw));
	put(c, zz((int64_t)a->nivcsw - (int64_t)b->nivcsw));
}

static size_t finish(struct cursor *c, void *out, size_t cap)
{
	if (c->err)
		return 0;
	size_t len = (size_t)(c->p - (uint8_t *)out);
	size_t padded = (len + 7) & ~(size_t)7;
	if (padded > cap || padded > UINT32_MAX)
		return 0;
	memset(c->p, 0, padded - len);
	return padded;
}

size_t packed_encode_v1(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	if (cap < sizeof(struct rhea_packed) || n == 0)
		return 0;
	struct rhea_packed *h = out;
	struct cursor c = {(uint8_t *)(h + 1), (uint8_t *)out + cap, 0, 0};
	struct rhea_sample prev;
	memset(&prev, 0, sizeof(prev));
	for (uint32_t i = 0; i < n && !c.err; i++) {
		const struct rhea_sample *x = s[i];
		unsigned pres = (x->object ? P_OBJECT : 0) |
				(x->waker_tid || x->waker_stack || x->release_ns ? P_WAKER : 0) |
				(x->owner_tid ? P_OWNER : 0) |
				(memcmp(&x->c_begin, &x->c_end, sizeof(x->c_end)) ? P_CBEGIN : 0);
		put(&c, pres);
		put(&c, x->h.flags);
		put(&c, x->trigger);
		put(&c, x->merged);
		put(&c, zz((int64_t)x->stack - (int64_t)prev.stack));
		put(&c, zz((int64_t)x->msgid - (int64_t)prev.msgid));
		put(&c, zz((int64_t)(x->begin_ns - prev.end_ns)));
		put(&c, zz((int64_t)(x->end_ns - x->begin_ns)));
		if (pres & P_OBJECT)
			put(&c, x->object);
		if (pres & P_WAKER) {
			put(&c, x->waker_tid);
			put(&c, x->waker_stack);
			put(&c, zz((int64_t)(x->release_ns - x->begin_ns)));
		}
		if (pres & P_OWNER)
			put(&c, x->owner_tid);
		put_counters_delta(&c, &x->c_end, &prev.c_end);
		if (pres & P_CBEGIN)
			put_counters_delta(&c, &x->c_end, &x->c_begin);
		prev = *x;
	}
	size_t padded = finish(&c, out, cap);
	if (!padded)
		return 0;
	h->h.kind = RHEA_E_PACKED;
	h->h.flags = 0;
	h->h.size = (uint32_t)padded;
	h->tid = s[0]->tid;
	h->count = n;
	h->base_ns = 0;
	return padded;
}
#endif

/* out = ref + sign * delta, in unsigned arithmetic (a damaged entry may hold
 * any delta; wrapping is what the encoder's subtraction did). */
static void get_counters_delta(struct rcursor *c, struct rhea_counters *out, const struct rhea_counters *ref,
			       int sign)
{
	uint64_t d[7];
	for (int i = 0; i < 7; i++) {
		d[i] = (uint64_t)unzz(get(c));
		if (sign < 0)
			d[i] = 0 - d[i];
	}
	out->cpu_ns = ref->cpu_ns + d[0];
	out->alloc_count = ref->alloc_count + d[1];
	out->alloc_bytes = ref->alloc_bytes + d[2];
	out->minflt = (uint32_t)(ref->minflt + d[3]);
	out->majflt = (uint32_t)(ref->majflt + d[4]);
	out->nvcsw = (uint32_t)(ref->nvcsw + d[5]);
	out->nivcsw = (uint32_t)(ref->nivcsw + d[6]);
}

static int decode_v1(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s), void *arg)
{
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
		x.stack = (uint32_t)(prev.stack + (uint64_t)unzz(get(&c)));
		x.msgid = (uint32_t)(prev.msgid + (uint64_t)unzz(get(&c)));
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

/* ---- PACKED2 (10) ---------------------------------------------------------- */

/* The header byte: what follows the stack code. */
enum {
	H_TRIGGER = 0x01, /* trigger is not the guessed one: varint */
	H_FLAGS = 0x02,   /* flags are not the guessed ones: varint */
	H_MERGED = 0x04,  /* merged != 0: varint merged - 1 */
	H_MSGID = 0x08,   /* msgid changed: z-delta */
	H_DUR = 0x10,     /* end != begin (in us): z(end - begin) */
	H_EXTRA = 0x20,   /* a presence byte (X_*): BLOCK fields follow */
	H_CBEGIN = 0x40,  /* c_begin != c_end: a mask byte and differences */
	H_ALL = 0x7f,
};

/* The presence byte of H_EXTRA: the BLOCK fields that are not their
 * guess (release_ns has none: present when not 0). */
enum {
	X_OBJECT = 0x01,      /* z(object - object_ref()) */
	X_WAKER_TID = 0x02,   /* z(waker_tid - tid) */
	X_WAKER_STACK = 0x04, /* waker_stack */
	X_RELEASE = 0x08,     /* z(end - release), us */
	X_OWNER = 0x10,       /* z(owner_tid - tid) */
	X_ALL = 0x1f,
};

enum { NCOUNTERS = 7 };
#define COUNTERS_ALL ((1u << NCOUNTERS) - 1)

/* Stacks remembered for the stack code.  Codes below RECENT are positions
 * in the list, most recent first; RECENT + z(delta to the previous stack)
 * is a stack not in the list. */
#define RECENT 8

/* The symbols of a sample, in the order they are coded.  PACKED2 and
 * PACKED3 put those before F_BEGIN in the control stream as varints, the
 * others in the value stream; PACKED4 codes each against probabilities of
 * its own. */
enum field {
	F_HB, F_STACK, F_TRIGGER, F_FLAGS, F_MERGED, F_MSGID, F_EXTRA, F_MASK,
	F_BEGIN, F_DUR, F_OBJECT, F_WAKER_TID, F_WAKER_STACK, F_RELEASE, F_OWNER,
	F_CEND,                        /* + counter: c_end's differences */
	F_CBEGIN = F_CEND + NCOUNTERS, /* + counter: c_begin's */
	F_GRID = F_CBEGIN + NCOUNTERS, /* PACKED4: the grid's period and phase */
	F_BEGIN_OFF,                   /* PACKED4 on a grid: begin past its grid point */
	F_DUR_OFF,                     /* PACKED4 on a grid: end past its grid point */
	F_NEAR,                        /* PACKED4 near-exact: bytes of one size coded exactly */
	NFIELDS,
};

#define NCTX 4 /* PACKED4: contexts a field's bit lengths are learnt in */

/*
 * The BLOCK fields are guessed from the last sample with the same trigger
 * and flags: a thread waits on the same lock again and is woken by the same
 * thread; the sampler's CPU periods are nearly always 1; a forced capture
 * finds the same system call; a read that blocked has a file descriptor,
 * one that did not has none.  The samples are remembered in SLOTS slots,
 * (trigger + 37 * flags) % SLOTS; a pair landing in a taken slot replaces
 * the pair there.
 */
#define SLOTS 64

struct extras {
	uint16_t trigger, flags;
	uint32_t waker_tid, waker_stack, owner_tid;
	uint64_t object;
};

/* What encoder and decoder both know after each sample: the previous
 * sample (quantized), the entry's first, the recent stacks, the extras. */
struct state {
	uint32_t stack, msgid;
	uint16_t trigger, flags;
	uint64_t end_us;
	uint64_t object; /* the last non-zero one */
	uint64_t c[NCOUNTERS];
	uint64_t d[NCOUNTERS]; /* its c_end differences (PACKED3's steps) */
	uint64_t first_end_us, first_c[NCOUNTERS];
	uint32_t first_msgid;
	int v4;          /* PACKED4: its guesses */
	uint64_t gap16;  /* PACKED4: 16 x the mean gap from a sample's end to the next one's begin */
	uint64_t per16;  /* PACKED4: 16 x the mean length of a merged run per sample merged */
	uint64_t period, phase; /* PACKED4: the capture grid (us), period 0: none */
	uint32_t n; /* stacks in the recent list */
	uint32_t r_stack[RECENT];
	uint16_t r_trigger[RECENT], r_flags[RECENT];
	struct extras slot[SLOTS];
};

static struct extras *slot_of(struct state *st, uint16_t trigger, uint16_t flags)
{
	return &st->slot[(trigger + 37u * flags) % SLOTS];
}

/* Counters as the file sees them: CPU time in us. */
static void counters_get(uint64_t v[NCOUNTERS], const struct rhea_counters *c)
{
	v[0] = c->cpu_ns / 1000;
	v[1] = c->alloc_count;
	v[2] = c->alloc_bytes;
	v[3] = c->minflt;
	v[4] = c->majflt;
	v[5] = c->nvcsw;
	v[6] = c->nivcsw;
}

/* The counter fields' largest values (in the file's units). */
static const uint64_t counter_max[NCOUNTERS] = {
	UINT64_MAX / 1000, UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
};

static void counters_set(struct rhea_counters *c, const uint64_t v[NCOUNTERS])
{
	c->cpu_ns = v[0] * 1000;
	c->alloc_count = v[1];
	c->alloc_bytes = v[2];
	c->minflt = (uint32_t)v[3];
	c->majflt = (uint32_t)v[4];
	c->nvcsw = (uint32_t)v[5];
	c->nivcsw = (uint32_t)v[6];
}

/* Move position i of the recent list (i == n: a new stack) to the front. */
static void recent_front(struct state *st, uint32_t i, uint32_t stack, uint16_t trigger, uint16_t flags)
{
	if (i == st->n && st->n < RECENT)
		st->n++;
	if (i >= st->n)
		i = st->n - 1; /* full: the oldest drops out */
	memmove(&st->r_stack[1], &st->r_stack[0], i * sizeof(st->r_stack[0]));
	memmove(&st->r_trigger[1], &st->r_trigger[0], i * sizeof(st->r_trigger[0]));
	memmove(&st->r_flags[1], &st->r_flags[0], i * sizeof(st->r_flags[0]));
	st->r_stack[0] = stack;
	st->r_trigger[0] = trigger;
	st->r_flags[0] = flags;
}

/* The BLOCK fields guessed for a sample of `trigger` and `flags`: those
 * of the last one seen with them, else zeros. */
static struct extras extras_guess(struct state *st, uint16_t trigger, uint16_t flags)
{
	const struct extras *s = slot_of(st, trigger, flags);
	struct extras none = {trigger, flags, 0, 0, 0, 0};
	return s->trigger == trigger && s->flags == flags ? *s : none;
}

/* What an object that is not the guessed one is stored relative to: the
 * guess, or when that is 0 the last non-zero object (addresses of a
 * program's locks are close together). */
static uint64_t object_ref(const struct state *st, const struct extras *guess)
{
	return guess->object ? guess->object : st->object;
}

/* PACKED4's means of the gap from a sample's end to the next one's begin
 * and of a merged run's length per sample merged, each bounded (16 x
 * 2^40 us cannot overflow). */
static void learn_times(struct state *st, uint64_t begin_us, uint64_t end_us, uint16_t merged)
{
	const uint64_t most = 1ull << 40;
	uint64_t gap = begin_us > st->end_us ? begin_us - st->end_us : 0;
	gap = gap > most ? most : gap;
	st->gap16 = st->gap16 ? st->gap16 + gap - st->gap16 / 16 : gap * 16;
	if (merged && end_us > begin_us) {
		uint64_t per = (end_us - begin_us) / merged;
		per = per > most ? most : per;
		st->per16 = st->per16 ? st->per16 + per - st->per16 / 16 : per * 16;
	}
}

/* After sample x (at position pos of the recent list, or st->n if new):
 * what both sides remember. */
static void state_next(struct state *st, uint32_t pos, const struct rhea_sample *x, uint64_t end_us,
		       const uint64_t *ce)
{
	int first = st->n == 0;
	if (first) { /* the entry's first sample */
		st->first_end_us = end_us;
		st->first_msgid = x->msgid;
		memcpy(st->first_c, ce, sizeof(st->first_c));
	}
	if (st->v4)
		learn_times(st, x->begin_ns / 1000, end_us, x->merged);
	recent_front(st, pos, x->stack, x->trigger, x->h.flags);
	st->stack = x->stack;
	st->msgid = x->msgid;
	st->trigger = x->trigger;
	st->flags = x->h.flags;
	st->end_us = end_us;
	if (x->object)
		st->object = x->object;
	struct extras *s = slot_of(st, x->trigger, x->h.flags);
	s->trigger = x->trigger;
	s->flags = x->h.flags;
	s->object = x->object;
	s->waker_tid = x->waker_tid;
	s->waker_stack = x->waker_stack;
	s->owner_tid = x->owner_tid;
	/* (the first sample's difference is from 0: its counters whole, no
	 * measure of the next difference; 0 makes the next one exact) */
	for (int i = 0; i < NCOUNTERS; i++)
		st->d[i] = first ? 0 : ce[i] - st->c[i];
	memcpy(st->c, ce, sizeof(st->c));
}

/* What the counters of one set are coded against. */
struct cset {
	int sign;             /* +1: c_end = ref + d; -1: c_begin = ref - d */
	const uint64_t *ref;  /* prev c_end (decoded), or this c_end (decoded) */
	const uint64_t *span; /* c_begin only: this sample's c_end differences */
	uint64_t dt;          /* wall time the differences span (us) */
	uint64_t all;         /* c_begin only: the wall time span covers */
	unsigned shift, mask; /* mask: the counters in steps */
	int exact;            /* the entry's last sample: step 1 */
	int near;             /* PACKED4 near-exact (PACKED_NEAR): a bit says when exact */
	const struct truth *tr; /* the encoder's, with near */
};

/* What the encoder knows that the decoder does not, for near-exact: the
 * true c_end of the previous sample and its difference, and this one's. */
struct truth {
	uint64_t prev[NCOUNTERS], prev_d[NCOUNTERS];
	const uint64_t *ce;
};

/* a * b / c, in 128 bits (wrapped to 64: both sides wrap alike). */
static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c)
{
	return c ? (uint64_t)((unsigned __int128)a * b / c) : 0;
}

/*
 * Counters are stored as differences to a reference (the previous sample's
 * c_end, or for c_begin this sample's c_end) minus a guess: a mask of the
 * non-zero ones first, then those.  The guesses, each from what the decoder
 * already has:
 *   cpu_ns, nvcsw, nivcsw  the counter's rate over the entry so far (from
 *                          the first sample's end to the previous one's)
 *                          times the wall time the difference spans;
 *   alloc_bytes            the alloc_count difference times the thread's
 *                          mean allocation size so far;
 *   others                 0 (allocations and faults come in bursts that
 *                          no rate predicts: guessing them cost bytes on
 *                          real programs).
 * PACKED4 guesses better where PACKED2 guesses 0 or by the wall clock:
 *   alloc_count            (c_end) the CPU time difference times the
 *                          thread's allocations per CPU time so far: a
 *                          thread allocates as it computes;
 *   all but alloc_bytes    (c_begin) this sample's c_end difference shared
 *                          out by time: begin..end's part of it.
 * All of it in unsigned 64-bit arithmetic, wrapping, so that any input
 * round-trips.  On W2 the guesses take about 1.3 bytes off a sample.
 */
static uint64_t counter_guess(const struct state *st, const struct cset *k, int i, const uint64_t *t)
{
	if (st->v4 && k->sign < 0 && i != 2)
		return mul_div(k->span[i], k->dt, k->all);
	uint64_t wall = st->end_us - st->first_end_us;
	switch (i) {
	case 0:
	case 5:
	case 6:
		return wall ? (st->c[i] - st->first_c[i]) * k->dt / wall : 0;
	case 1:
		return st->v4 && k->sign > 0 ? mul_div(t[0], st->c[1] - st->first_c[1], st->c[0] - st->first_c[0]) : 0;
	case 2:
		return st->c[1] ? t[1] * (st->c[2] / st->c[1]) : 0;
	}
	return 0;
}

/*
 * PACKED3 stores each counter difference as a multiple of a step, a power
 * of two that both sides know before the value: 1 at shift 0 (PACKED2:
 * exact), for the entry's last sample, and where the difference is
 * expected below 2 << shift; else the largest power of two at most
 * ref >> shift.  ref is, for c_end, the smaller of the guess and the
 * previous sample's difference (a step is fine only where both expect a
 * large difference: after a thread's idle spell its rate overstates it,
 * after a burst the last difference does); for c_begin, this sample's
 * c_end difference (the span c_begin lies in).  The value is the count of steps
 * minus the guess's (rounded), as a z-value.
 */
static uint64_t qstep(uint64_t ref, unsigned shift, int exact)
{
	uint64_t v = ref >> shift;
	if (shift == 0 || exact || v < 2)
		return 1;
	return 1ull << (63 - __builtin_clzll(v));
}

/* An entry's flags: the shift in bits 0-4, the counters in steps (bit j:
 * counter j) in bits 8-14; the other bits are 0. */
#define STEPS_SHIFT(flags) ((unsigned)(flags) & 0x1f)
#define STEPS_MASK(flags) (((unsigned)(flags) >> 8) & COUNTERS_ALL)
#define STEPS_VALID(flags) (((flags) & ~(0x1fu | (COUNTERS_ALL << 8))) == 0 && STEPS_SHIFT(flags) <= PACKED_SHIFT_MAX)
/* PACKED4 also has bit 5: near-exact (below). */
#define ENTRY_NEAR 0x20u
#define STEPS_VALID4(flags) STEPS_VALID((flags) & ~ENTRY_NEAR)
#define STEPS_NEAR(flags) (((unsigned)(flags) & ENTRY_NEAR) != 0)

static uint64_t cset_step(const struct state *st, const struct cset *k, int i, uint64_t guess)
{
	if (!(k->mask & (1u << i)))
		return 1;
	if (k->sign < 0)
		return qstep(k->span[i], k->shift, k->exact);
	return qstep(guess < st->d[i] ? guess : st->d[i], k->shift, k->exact);
}

/* The guess in steps, rounded. */
static uint64_t guess_steps(uint64_t guess, uint64_t step)
{
	return step == 1 ? guess : guess / step + (guess % step >= step / 2);
}

/*
 * The count of steps that codes the difference `want`.  Exact at shift 0.
 * Else the decoded counters keep an order, whatever the input: c_end
 * never goes down (the difference is rounded down, to at most the truth:
 * a decoded c_end is never above the true one, so the next difference is
 * not negative either), and c_begin lies between the previous c_end and
 * this one (the nearest step within the span, which holds 2^shift steps
 * or more, or steps of 1).
 */
static uint64_t quantize(const struct cset *k, int i, uint64_t want, uint64_t step)
{
	if (k->shift == 0 || !(k->mask & (1u << i)))
		return want;
	if (k->sign > 0)
		return (int64_t)want < 0 ? 0 : want / step;
	if ((int64_t)want < 0)
		return 0;
	uint64_t q = want / step + (want % step >= (step + 1) / 2), top = k->span[i] / step;
	return q > top ? top : q;
}

/* ---- the symbols' coding ------------------------------------------------- */

#ifndef RHEA_AGENT
/*
 * PACKED4 codes each symbol with the range coder (rcoder.h).  A number v:
 * whether it is 0, then its bit length b - 1 (0..63) through a binary tree
 * of 6 adaptive bits, the probabilities of the field (and of a context the
 * caller knows, for the times: whether the sample is a wait, a run); below
 * the leading 1, the next bit against probabilities of the field and b,
 * the rest at 1/2.  The header byte goes through a 7-bit tree of its own.
 * (A field always 0 then learns one bit, not seven: -1.1% on W2.)  Measured on W2 and
 * left out: contexts by the guess's size or by the field's previous bit
 * length, trees shared between fields, the header byte by the previous
 * one.  Each splits what an entry of a few hundred samples has to learn
 * from, and cost as much as it gained.
 */
#define TREE 128 /* nodes of a 7-bit tree, node 0 unused */
#define RC_PROB_RARE ((rc_prob)65400 << 8 | 30)

struct models {
	rc_prob hb[TREE];
	rc_prob len[NFIELDS][NCTX][TREE / 2]; /* [0]: not 0; 1..63: a 6-bit tree */
	rc_prob top[NFIELDS][65];
	uint64_t hash; /* of the symbols so far */
};

/* The entry ends with 32 bits of a hash of its symbols: damage to a range
 * coded stream mostly decodes to other values that look as valid, which
 * only this tells apart (a multiply and a shift per symbol). */
static void hash_symbol(struct models *m, enum field f, uint64_t v)
{
	uint64_t h = (m->hash ^ v ^ (uint64_t)f << 56) * 0x9e3779b97f4a7c15ull;
	m->hash = h ^ h >> 29;
}

static void models_init(struct models *m)
{
	rc_prob *p = m->hb, *end = &m->top[NFIELDS - 1][64];
	while (p <= end)
		*p++ = RC_PROB_INIT;
	/* A bit length above 32, or from 17 to 32, is rare whatever the field:
	 * those bits start as if 30 zeros had been seen (1.1% off W2's file). */
	for (int f = 0; f < NFIELDS; f++)
		for (int c = 0; c < NCTX; c++)
			m->len[f][c][1] = m->len[f][c][2] = RC_PROB_RARE;
	m->hash = 0;
}

static struct models *models_new(void)
{
	struct models *m = malloc(sizeof(*m));
	if (m)
		models_init(m);
	return m;
}

static unsigned bitlen(uint64_t v)
{
	return v ? 64 - (unsigned)__builtin_clzll(v) : 0;
}

static void rc_tree(struct rc_enc *e, rc_prob *probs, unsigned v, int bits)
{
	unsigned node = 1;
	for (int i = bits - 1; i >= 0; i--) {
		unsigned bit = (v >> i) & 1;
		rc_bit(e, &probs[node], bit);
		node = node << 1 | bit;
	}
}

static unsigned rc_dtree(struct rc_dec *d, rc_prob *probs, int bits)
{
	unsigned node = 1;
	while (node < 1u << bits)
		node = node << 1 | rc_dbit(d, &probs[node]);
	return node - (1u << bits);
}

/* Symbol v of field f in context ctx (< NCTX).  The coder's state is
 * copied into a local for the symbol: through the pointer, every store to
 * a probability (or an output byte) could alias it, and the compiler
 * reloaded it at every bit (a third of the compaction's time). */
static void rc_put(struct rc_enc *out, struct models *m, enum field f, unsigned ctx, uint64_t v)
{
	struct rc_enc e = *out;
	hash_symbol(m, f, v);
	if (f == F_HB) {
		rc_tree(&e, m->hb, (unsigned)v, 7);
	} else {
		unsigned b = bitlen(v);
		rc_bit(&e, &m->len[f][ctx][0], b != 0);
		if (b)
			rc_tree(&e, m->len[f][ctx], b - 1, 6);
		if (b >= 2) {
			rc_bit(&e, &m->top[f][b], (unsigned)(v >> (b - 2)) & 1);
			rc_direct(&e, v, b - 2);
		}
	}
	*out = e;
}

/* (A local copy of the state, as rc_put's.  A bit length is at most 64 by
 * construction: damage yields other values, never an impossible one.) */
static uint64_t rc_get(struct rc_dec *in, struct models *m, enum field f, unsigned ctx)
{
	struct rc_dec d = *in;
	uint64_t v;
	if (f == F_HB) {
		v = rc_dtree(&d, m->hb, 7);
	} else {
		unsigned b = rc_dbit(&d, &m->len[f][ctx][0]) ? 1 + rc_dtree(&d, m->len[f][ctx], 6) : 0;
		v = b;
		if (b >= 2) { /* (two statements: the order the bits are read in) */
			v = (uint64_t)(2 | rc_dbit(&d, &m->top[f][b])) << (b - 2);
			v |= rc_ddirect(&d, b - 2);
		}
	}
	*in = d;
	hash_symbol(m, f, v);
	return v;
}
#endif

/* Where the encoder's symbols go: two varint streams, or the range coder. */
struct sink {
	struct cursor *ctl, *val;
#ifndef RHEA_AGENT
	struct rc_enc *rc;
	struct models *m;
#endif
};

/* Symbol v of field f; PACKED4 learns its probabilities in context ctx
 * (< NCTX), what both sides know of how large it is likely to be. */
static void emit_in(struct sink *o, enum field f, unsigned ctx, uint64_t v)
{
#ifndef RHEA_AGENT
	if (o->rc) {
		rc_put(o->rc, o->m, f, ctx, v);
		return;
	}
#endif
	(void)ctx;
	put(f < F_BEGIN ? o->ctl : o->val, v);
}

static void emit(struct sink *o, enum field f, uint64_t v)
{
	emit_in(o, f, 0, v);
}

/*
 * PACKED4 near-exact (entry flag bit 5), for the bytes allocated in steps:
 * a thread that allocates blocks of one size (a phase of it) keeps its
 * exact bytes.  Where the decoder has a size to go by, the mean bytes per
 * allocation of the previous sample's difference (c_end) or of its own
 * c_end's (c_begin), rounded, a bit before the bytes says whether they are
 * coded exactly, as a residual from the allocations' count times that
 * size, rather than in steps.  The encoder says so when the truth is of
 * one size (this difference and the one it goes by, both of the same
 * size): the first such sample pays the residual that brings the bytes
 * back to the truth, the next ones 0.  Sizes that vary stay in steps and
 * pay the bit, which the coder learns to be 0.  0: no bit; else 1 and
 * the count times the size in *same.
 */
static int size_known(const struct state *st, const struct cset *k, int i, const uint64_t *t, uint64_t *same)
{
	if (!k->near || i != 2)
		return 0;
	uint64_t n = k->sign > 0 ? st->d[1] : k->span[1], b = k->sign > 0 ? st->d[2] : k->span[2];
	if (n == 0)
		return 0;
	*same = t[1] * (b / n + (b % n >= n - n / 2));
	return 1;
}

/* The encoder: whether the true bytes of the difference are of one size,
 * the size the decoder goes by in the truth. */
static int of_one_size(const struct cset *k, const uint64_t *truth)
{
	const struct truth *tr = k->tr;
	uint64_t n, b, by_n, by_b;
	if (k->sign > 0) {
		n = truth[1] - tr->prev[1], b = truth[2] - tr->prev[2];
		by_n = tr->prev_d[1], by_b = tr->prev_d[2];
	} else {
		n = tr->ce[1] - truth[1], b = tr->ce[2] - truth[2];
		by_n = tr->ce[1] - tr->prev[1], by_b = tr->ce[2] - tr->prev[2];
	}
	return by_n != 0 && by_b % by_n == 0 && b == n * (by_b / by_n);
}

/* The counters truth[] of one set (the mask, then the values that are not
 * their guess; PACKED4: all values, no mask), and what the decoder will
 * read to out[]. */
static void put_counters(struct sink *o, const struct state *st, const struct cset *k, const uint64_t *truth,
			 uint64_t *out)
{
	uint64_t t[NCOUNTERS], r[NCOUNTERS];
	int near[NCOUNTERS];
	unsigned mask = 0;
	for (int i = 0; i < NCOUNTERS; i++) {
		uint64_t want = k->sign > 0 ? truth[i] - k->ref[i] : k->ref[i] - truth[i];
		uint64_t g = counter_guess(st, k, i, t), step = cset_step(st, k, i, g);
		uint64_t same;
		near[i] = -1;
		if (step > 1 && size_known(st, k, i, t, &same))
			near[i] = (int64_t)want >= 0 && (k->sign > 0 || want <= k->span[i]) && of_one_size(k, truth);
		if (near[i] == 1) {
			t[i] = want;
			r[i] = want - same;
		} else {
			uint64_t q = quantize(k, i, want, step);
			t[i] = q * step;
			r[i] = q - guess_steps(g, step);
		}
		out[i] = k->sign > 0 ? k->ref[i] + t[i] : k->ref[i] - t[i];
		if (r[i])
			mask |= 1u << i;
	}
	enum field base = k->sign > 0 ? F_CEND : F_CBEGIN;
	if (!st->v4)
		emit(o, F_MASK, mask);
	for (int i = 0; i < NCOUNTERS; i++) {
		if (near[i] >= 0)
			emit(o, F_NEAR, (uint64_t)near[i]);
		if (r[i] || st->v4)
			emit(o, base + i, zz((int64_t)r[i]));
	}
}

/* PACKED4's guess of a sample's begin, end - begin (us): a sample comes
 * the mean gap after the previous one; a run of merged samples lasts as
 * many gaps. */
static uint64_t gap_guess(const struct state *st)
{
	return st->v4 ? st->gap16 / 16 : 0;
}

static uint64_t dur_guess(const struct state *st, uint16_t merged)
{
	return st->v4 ? merged * (st->per16 / 16) : 0;
}

/* PACKED4's guess of how far msgid moved by end_us: at its rate so far (an
 * event loop turns at a steady pace).  Coded after the times. */
static uint32_t msgid_guess(const struct state *st, uint64_t end_us)
{
	uint64_t wall = st->end_us - st->first_end_us;
	return (uint32_t)mul_div(st->msgid - st->first_msgid, end_us - st->end_us, wall);
}

/*
 * PACKED4 on a grid.  The agent captures at the first hook after each
 * point of a grid of its interval (the epoch, agent/clock.c), so that most
 * samples begin a few microseconds after a grid point and a run of merged
 * ones ends a few after the point `merged` further on.  A time t is then
 * stored as the grid points k from the first one at or after `from`
 * (minus a guess) and the offset past the k-th, in [0, period): a few bits
 * where a difference to the previous sample takes ten.
 */
#define GRID_MAX (1u << 20) /* the longest period on a grid, us */

static uint64_t grid_next(const struct state *st, uint64_t t)
{
	return t + (st->phase + st->period - t % st->period) % st->period;
}

static void put_on_grid(struct sink *o, const struct state *st, enum field fk, enum field foff, unsigned ctx,
			uint64_t from, uint64_t t, uint64_t kguess)
{
	int64_t d = (int64_t)(t - grid_next(st, from)), p = (int64_t)st->period;
	int64_t k = d / p, off = d % p;
	if (off < 0) {
		off += p;
		k--;
	}
	emit_in(o, fk, ctx, zz((int64_t)((uint64_t)k - kguess)));
	emit_in(o, foff, ctx, (uint64_t)off);
}

/* The samples' symbols, in order. */
static void encode_v2(const struct rhea_sample *const *s, uint32_t n, uint64_t base_us, unsigned eflags, int v4,
		      uint64_t period, uint64_t phase, struct sink *o)
{
	unsigned shift = STEPS_SHIFT(eflags), mask = STEPS_MASK(eflags);
	int near = v4 && STEPS_NEAR(eflags);
	struct truth tr = {{0}, {0}, NULL};
	struct state st;
	memset(&st, 0, sizeof(st));
	st.end_us = base_us;
	st.v4 = v4;
	if (v4) {
		st.period = period;
		st.phase = phase;
		emit(o, F_GRID, period);
		if (period)
			emit(o, F_GRID, phase);
	}
	uint32_t tid = s[0]->tid;
	for (uint32_t i = 0; i < n; i++) {
		const struct rhea_sample *x = s[i];
		uint64_t begin_us = x->begin_ns / 1000, end_us = x->end_ns / 1000;
		uint64_t release_us = x->release_ns / 1000;
		uint64_t ce[NCOUNTERS], cb[NCOUNTERS];
		counters_get(ce, &x->c_end);
		counters_get(cb, &x->c_begin);

		uint32_t pos = 0;
		while (pos < st.n && st.r_stack[pos] != x->stack)
			pos++;
		uint16_t trigger = pos < st.n ? st.r_trigger[pos] : st.trigger;
		uint16_t flags = pos < st.n ? st.r_flags[pos] : st.flags;
		struct extras g = extras_guess(&st, x->trigger, x->h.flags);
		unsigned extra = (x->object != g.object ? X_OBJECT : 0) | (x->waker_tid != g.waker_tid ? X_WAKER_TID : 0) |
				 (x->waker_stack != g.waker_stack ? X_WAKER_STACK : 0) | (release_us ? X_RELEASE : 0) |
				 (x->owner_tid != g.owner_tid ? X_OWNER : 0);
		unsigned hb = (x->trigger != trigger ? H_TRIGGER : 0) | (x->h.flags != flags ? H_FLAGS : 0) |
			      (x->merged ? H_MERGED : 0) | (x->msgid != st.msgid ? H_MSGID : 0) |
			      (end_us != begin_us ? H_DUR : 0) | (extra ? H_EXTRA : 0) |
			      (memcmp(ce, cb, sizeof(ce)) ? H_CBEGIN : 0);

		emit(o, F_HB, hb);
		emit(o, F_STACK, pos < st.n ? pos : RECENT + zz((int64_t)x->stack - (int64_t)st.stack));
		if (hb & H_TRIGGER)
			emit(o, F_TRIGGER, x->trigger);
		if (hb & H_FLAGS)
			emit(o, F_FLAGS, x->h.flags);
		if (hb & H_MERGED)
			emit(o, F_MERGED, x->merged - 1u);
		if ((hb & H_MSGID) && !v4)
			emit(o, F_MSGID, zz((int64_t)x->msgid - (int64_t)st.msgid));
		if (hb & H_EXTRA)
			emit(o, F_EXTRA, extra);
		unsigned tctx = (x->h.flags & RHEA_S_BLOCK ? 1 : 0) | (x->merged ? 2 : 0);
		if (st.period)
			put_on_grid(o, &st, F_BEGIN, F_BEGIN_OFF, tctx, st.end_us, begin_us, 0);
		else
			emit(o, F_BEGIN, zz((int64_t)(begin_us - st.end_us - gap_guess(&st))));
		if ((hb & H_DUR) && st.period)
			put_on_grid(o, &st, F_DUR, F_DUR_OFF, tctx, begin_us, end_us, x->merged ? x->merged - 1u : 0);
		else if (hb & H_DUR)
			emit(o, F_DUR, zz((int64_t)(end_us - begin_us - dur_guess(&st, x->merged))));
		if ((hb & H_MSGID) && v4)
			emit(o, F_MSGID, zz((int32_t)(x->msgid - st.msgid - msgid_guess(&st, end_us))));
		if (extra & X_OBJECT)
			emit(o, F_OBJECT, zz((int64_t)(x->object - object_ref(&st, &g))));
		if (extra & X_WAKER_TID)
			emit(o, F_WAKER_TID, zz((int64_t)x->waker_tid - (int64_t)tid));
		if (extra & X_WAKER_STACK)
			emit(o, F_WAKER_STACK, x->waker_stack);
		if (extra & X_RELEASE)
			emit(o, F_RELEASE, zz((int64_t)(end_us - release_us)));
		if (extra & X_OWNER)
			emit(o, F_OWNER, zz((int64_t)x->owner_tid - (int64_t)tid));
		uint64_t ced[NCOUNTERS], cbd[NCOUNTERS], span[NCOUNTERS];
		tr.ce = ce;
		struct cset ke = {1, st.c, NULL, end_us - st.end_us, 0, shift, mask, i + 1 == n, near, &tr};
		put_counters(o, &st, &ke, ce, ced);
		for (int j = 0; j < NCOUNTERS; j++)
			span[j] = ced[j] - st.c[j];
		struct cset kb = {-1, ced, span, end_us - begin_us, end_us - st.end_us, shift, mask, i + 1 == n, near, &tr};
		if (hb & H_CBEGIN)
			put_counters(o, &st, &kb, cb, cbd);

		state_next(&st, pos, x, end_us, ced);
		for (int j = 0; near && j < NCOUNTERS; j++) {
			tr.prev_d[j] = ce[j] - tr.prev[j];
			tr.prev[j] = ce[j];
		}
	}
}

/* The flags of an entry with counters in steps of 2^-shift (see PACKED3),
 * or -1 when those, n or cap cannot make one. */
static int entry_flags(unsigned shift, unsigned counters, uint32_t n, size_t cap)
{
	if (shift > PACKED_SHIFT_MAX || counters > COUNTERS_ALL || cap < sizeof(struct rhea_packed2) || n == 0)
		return -1;
	return shift && counters ? (int)(shift | counters << 8) : 0;
}

/* The entry at out (cap bytes), whose data ends at end: zero padding to 8
 * and its header.  Its size, or 0 when it does not fit. */
static size_t entry_finish(void *out, uint8_t *end, size_t cap, uint16_t kind, int flags, uint32_t tid,
			   uint32_t n, uint64_t base_us)
{
	size_t len = (size_t)(end - (uint8_t *)out);
	size_t padded = (len + 7) & ~(size_t)7;
	if (padded > cap || padded > UINT32_MAX)
		return 0;
	memset(end, 0, padded - len);
	struct rhea_packed2 *h = out;
	h->h.kind = kind;
	h->h.flags = (uint16_t)flags;
	h->h.size = (uint32_t)padded;
	h->tid = tid;
	h->count = n;
	h->base_us = base_us;
	return padded;
}

size_t packed_encode(const struct rhea_sample *const *s, uint32_t n, void *out, size_t cap)
{
	return packed_encode_steps(s, n, 0, 0, out, cap);
}

size_t packed_encode_steps(const struct rhea_sample *const *s, uint32_t n, unsigned shift, unsigned counters,
			   void *out, size_t cap)
{
	int flags = entry_flags(shift, counters, n, cap);
	if (flags < 0)
		return 0;
	uint8_t *data = (uint8_t *)out + sizeof(struct rhea_packed2), *end = (uint8_t *)out + cap;
	uint64_t base_us = s[0]->begin_ns / 1000;
	/* Twice: the control stream's size first, to know where it ends. */
	struct cursor ctl = {NULL, NULL, 0, 0}, val = {NULL, NULL, 0, 0};
	struct sink o = {.ctl = &ctl, .val = &val};
	encode_v2(s, n, base_us, flags, 0, 0, 0, &o);
	struct cursor size = {data, end, 0, 0};
	put(&size, ctl.len);
	if (size.err)
		return 0;
	if (ctl.len > (size_t)(end - size.p))
		return 0;
	struct cursor ctl2 = {size.p, size.p + ctl.len, 0, 0}, val2 = {size.p + ctl.len, end, 0, 0};
	struct sink o2 = {.ctl = &ctl2, .val = &val2};
	encode_v2(s, n, base_us, flags, 0, 0, 0, &o2);
	if (ctl2.err || val2.err)
		return 0;
	return entry_finish(out, val2.p, cap, flags ? RHEA_E_PACKED3 : RHEA_E_PACKED2, flags, s[0]->tid, n, base_us);
}

#ifndef RHEA_AGENT
/* PACKED4 packs at most this many samples a byte: a decoder refuses
 * entries that claim more, which bounds the work a damaged count makes.
 * (W2's entries hold 0.15 a byte; a run of samples alike enough to pack
 * denser is refused by the encoder, and the compaction splits it.) */
#define RC_DENSITY 32

/* The grid's phase: the start of the window of 1/16 of the period that
 * holds the most of the samples' begins (captures come just after a
 * point), to 1/256 of the period. */
static uint64_t grid_phase(const struct rhea_sample *const *s, uint32_t n, uint64_t period)
{
	enum { BINS = 256, WINDOW = BINS / 16 };
	uint32_t h[BINS] = {0};
	for (uint32_t i = 0; i < n; i++)
		h[s[i]->begin_ns / 1000 % period * BINS / period]++;
	uint32_t in = 0, most = 0, best = 0;
	for (unsigned b = 0; b < WINDOW; b++)
		in += h[b];
	for (unsigned b = 0; b < BINS; b++) { /* window b .. b + WINDOW - 1, round */
		if (in > most) {
			most = in;
			best = b;
		}
		in += h[(b + WINDOW) % BINS] - h[b];
	}
	return best * period / BINS;
}

size_t packed_encode_rc(const struct rhea_sample *const *s, uint32_t n, unsigned shift, unsigned counters,
			uint64_t period_us, void *out, size_t cap)
{
	int flags = entry_flags(shift, counters & ~PACKED_NEAR, n, cap);
	if (flags > 0 && (counters & PACKED_NEAR))
		flags |= ENTRY_NEAR;
	struct models *m = flags < 0 ? NULL : models_new();
	if (!m)
		return 0;
	struct rc_enc rc;
	rc_enc_init(&rc, (uint8_t *)out + sizeof(struct rhea_packed2), (uint8_t *)out + cap);
	uint64_t base_us = s[0]->begin_ns / 1000;
	struct sink o = {.rc = &rc, .m = m};
	if (period_us > GRID_MAX)
		period_us = 0;
	encode_v2(s, n, base_us, flags, 1, period_us, period_us ? grid_phase(s, n, period_us) : 0, &o);
	rc_direct(&rc, m->hash >> 32, 32);
	rc_flush(&rc);
	free(m);
	if (rc.err || n / RC_DENSITY > rc.len)
		return 0;
	return entry_finish(out, rc.p, cap, RHEA_E_PACKED4, flags, s[0]->tid, n, base_us);
}
#endif

/* Where the decoder's symbols come from: the two varint streams, or the
 * range coder.  bad: a symbol or a value out of its range. */
struct source {
	struct rcursor *ctl, *val;
#ifndef RHEA_AGENT
	struct rc_dec *rc;
	struct models *m;
#endif
	int bad;
};

static uint64_t take_in(struct source *in, enum field f, unsigned ctx)
{
#ifndef RHEA_AGENT
	if (in->rc)
		return rc_get(in->rc, in->m, f, ctx);
#endif
	(void)ctx;
	return get(f < F_BEGIN ? in->ctl : in->val);
}

static uint64_t take(struct source *in, enum field f)
{
	return take_in(in, f, 0);
}

/* A symbol that must fit in `max`. */
static uint64_t take_max(struct source *in, enum field f, uint64_t max)
{
	uint64_t v = take(in, f);
	if (v > max)
		in->bad = 1;
	return v;
}

/* ref + d (sign > 0) or ref - d (sign < 0) for a field of at most `max`.
 * Fields of the whole 64-bit range (object, allocation counters) wrap, as
 * the encoder's subtraction did; narrower ones must not leave their range. */
static uint64_t add(struct source *in, uint64_t ref, int64_t d, int sign, uint64_t max)
{
	uint64_t v = sign > 0 ? ref + (uint64_t)d : ref - (uint64_t)d;
	int grows = (sign > 0) == (d > 0);
	int wrapped = d != 0 && (grows ? v < ref : v > ref);
	if (max != UINT64_MAX && (v > max || wrapped))
		in->bad = 1;
	return v;
}

/* A z-delta to ref, for a field of at most `max`. */
static uint64_t take_delta(struct source *in, enum field f, uint64_t ref, uint64_t max)
{
	return add(in, ref, unzz(take(in, f)), 1, max);
}

/* out = k->ref + the differences (sign > 0) or k->ref - them (sign < 0),
 * as put_counters stored them. */
static void get_counters(struct source *in, const struct state *st, const struct cset *k, uint64_t *out)
{
	unsigned mask = st->v4 ? COUNTERS_ALL : (unsigned)take_max(in, F_MASK, COUNTERS_ALL);
	enum field base = k->sign > 0 ? F_CEND : F_CBEGIN;
	uint64_t t[NCOUNTERS];
	for (int i = 0; i < NCOUNTERS; i++) {
		uint64_t g = counter_guess(st, k, i, t), step = cset_step(st, k, i, g), same;
		if (step > 1 && size_known(st, k, i, t, &same) && take_max(in, F_NEAR, 1)) {
			t[i] = same + (uint64_t)unzz(take(in, base + i));
		} else {
			uint64_t r = mask & (1u << i) ? (uint64_t)unzz(take(in, base + i)) : 0;
			t[i] = (r + guess_steps(g, step)) * step;
		}
		out[i] = add(in, k->ref[i], (int64_t)t[i], k->sign, counter_max[i]);
	}
}

/* A time stored by put_on_grid(). */
static uint64_t take_on_grid(struct source *in, const struct state *st, enum field fk, enum field foff, unsigned ctx,
			     uint64_t from, uint64_t kguess)
{
	uint64_t k = (uint64_t)unzz(take_in(in, fk, ctx)) + kguess;
	uint64_t off = take_in(in, foff, ctx);
	if (off >= st->period)
		in->bad = 1;
	uint64_t t = grid_next(st, from) + k * st->period + off;
	if (t > UINT64_MAX / 1000)
		in->bad = 1;
	return t;
}

/* The samples of a PACKED2, 3 or 4 entry, from `in`. */
static int decode_samples(const struct rhea_packed2 *h, unsigned eflags, int v4, struct source *in,
			  int (*fn)(void *arg, const struct rhea_sample *s), void *arg)
{
	unsigned shift = STEPS_SHIFT(eflags), mask = STEPS_MASK(eflags);
	int near = v4 && STEPS_NEAR(eflags);
	struct state st;
	memset(&st, 0, sizeof(st));
	st.end_us = h->base_us;
	st.v4 = v4;
	if (v4) {
		st.period = take_max(in, F_GRID, GRID_MAX);
		if (st.period)
			st.phase = take_max(in, F_GRID, st.period - 1);
	}
	struct rhea_sample x;
	for (uint32_t i = 0; i < h->count; i++) {
		memset(&x, 0, sizeof(x));
		x.h.kind = RHEA_E_SAMPLE;
		x.h.size = sizeof(x);
		x.tid = h->tid;
		unsigned hb = (unsigned)take_max(in, F_HB, H_ALL);
		uint64_t code = take(in, F_STACK);
		uint32_t pos = st.n;
		if (code < st.n) {
			pos = (uint32_t)code;
			x.stack = st.r_stack[pos];
			x.trigger = st.r_trigger[pos];
			x.h.flags = st.r_flags[pos];
		} else if (code >= RECENT) {
			uint64_t v = st.stack + (uint64_t)unzz(code - RECENT);
			if (v > UINT32_MAX)
				in->bad = 1;
			x.stack = (uint32_t)v;
			x.trigger = st.trigger;
			x.h.flags = st.flags;
		} else {
			in->bad = 1; /* a position the list does not have yet */
		}
		if (hb & H_TRIGGER)
			x.trigger = (uint16_t)take_max(in, F_TRIGGER, UINT16_MAX);
		if (hb & H_FLAGS)
			x.h.flags = (uint16_t)take_max(in, F_FLAGS, UINT16_MAX);
		if (hb & H_MERGED)
			x.merged = (uint16_t)(take_max(in, F_MERGED, UINT16_MAX - 1) + 1);
		x.msgid = st.msgid;
		if ((hb & H_MSGID) && !v4)
			x.msgid = (uint32_t)take_delta(in, F_MSGID, st.msgid, UINT32_MAX);
		unsigned extra = hb & H_EXTRA ? (unsigned)take_max(in, F_EXTRA, X_ALL) : 0;
		unsigned tctx = (x.h.flags & RHEA_S_BLOCK ? 1 : 0) | (x.merged ? 2 : 0);
		uint64_t begin_us, end_us;
		if (st.period)
			begin_us = take_on_grid(in, &st, F_BEGIN, F_BEGIN_OFF, tctx, st.end_us, 0);
		else
			begin_us = take_delta(in, F_BEGIN, st.end_us + gap_guess(&st), UINT64_MAX / 1000);
		end_us = begin_us;
		if ((hb & H_DUR) && st.period)
			end_us = take_on_grid(in, &st, F_DUR, F_DUR_OFF, tctx, begin_us, x.merged ? x.merged - 1u : 0);
		else if (hb & H_DUR)
			end_us = take_delta(in, F_DUR, begin_us + dur_guess(&st, x.merged), UINT64_MAX / 1000);
		if ((hb & H_MSGID) && v4)
			x.msgid = (uint32_t)(st.msgid + msgid_guess(&st, end_us) + (uint64_t)unzz(take(in, F_MSGID)));
		x.begin_ns = begin_us * 1000;
		x.end_ns = end_us * 1000;
		struct extras g = extras_guess(&st, x.trigger, x.h.flags);
		x.object = g.object;
		x.waker_tid = g.waker_tid;
		x.waker_stack = g.waker_stack;
		x.owner_tid = g.owner_tid;
		if (extra & X_OBJECT)
			x.object = take_delta(in, F_OBJECT, object_ref(&st, &g), UINT64_MAX);
		if (extra & X_WAKER_TID)
			x.waker_tid = (uint32_t)take_delta(in, F_WAKER_TID, h->tid, UINT32_MAX);
		if (extra & X_WAKER_STACK)
			x.waker_stack = (uint32_t)take_max(in, F_WAKER_STACK, UINT32_MAX);
		if (extra & X_RELEASE)
			x.release_ns = add(in, end_us, unzz(take(in, F_RELEASE)), -1, UINT64_MAX / 1000) * 1000;
		if (extra & X_OWNER)
			x.owner_tid = (uint32_t)take_delta(in, F_OWNER, h->tid, UINT32_MAX);
		uint64_t ce[NCOUNTERS], cb[NCOUNTERS], span[NCOUNTERS];
		int last = i + 1 == h->count;
		struct cset ke = {1, st.c, NULL, end_us - st.end_us, 0, shift, mask, last, near, NULL};
		get_counters(in, &st, &ke, ce);
		for (int j = 0; j < NCOUNTERS; j++)
			span[j] = ce[j] - st.c[j];
		struct cset kb = {-1, ce, span, end_us - begin_us, end_us - st.end_us, shift, mask, last, near, NULL};
		if (hb & H_CBEGIN)
			get_counters(in, &st, &kb, cb);
		else
			memcpy(cb, ce, sizeof(cb));
		if (in->bad || (in->ctl && (in->ctl->bad || in->val->bad)))
			return -1;
#ifndef RHEA_AGENT
		if (in->rc && in->rc->bad)
			return -1;
#endif
		counters_set(&x.c_end, ce);
		counters_set(&x.c_begin, cb);
		if (fn(arg, &x) != 0)
			return -1;

		state_next(&st, pos, &x, end_us, ce);
	}
	return 0;
}

/* Only zero padding from p to end, less than 8 bytes of it. */
static int padding_only(const uint8_t *p, const uint8_t *end)
{
	if (end - p >= 8)
		return -1;
	for (; p < end; p++)
		if (*p)
			return -1;
	return 0;
}

static int decode_v2(const struct rhea_entry *e, unsigned eflags, int (*fn)(void *arg, const struct rhea_sample *s),
		     void *arg)
{
	const struct rhea_packed2 *h = (const void *)e;
	struct rcursor size = {(const uint8_t *)(h + 1), (const uint8_t *)e + e->size, 0};
	uint64_t control_size = get(&size);
	if (size.bad || control_size > (size_t)(size.end - size.p) || h->base_us > UINT64_MAX / 1000)
		return -1;
	struct rcursor ctl = {size.p, size.p + control_size, 0}, val = {size.p + control_size, size.end, 0};
	/* Header byte, stack code and counter mask: 3 control bytes at least
	 * per sample. */
	if (h->count > control_size / 3)
		return -1;
	struct source in = {.ctl = &ctl, .val = &val};
	if (decode_samples(h, eflags, 0, &in, fn, arg) != 0)
		return -1;
	/* The control bytes used up exactly; after the values, only the zero
	 * padding. */
	if (ctl.p != ctl.end)
		return -1;
	return padding_only(val.p, val.end);
}

#ifndef RHEA_AGENT
struct held {
	struct rhea_sample *s;
	size_t n, cap;
	int oom;
};

static int hold(void *arg, const struct rhea_sample *s)
{
	struct held *h = arg;
	if (vec_grow((void **)&h->s, &h->cap, h->n + 1, sizeof(*s)) != 0) {
		h->oom = 1;
		return -1;
	}
	h->s[h->n++] = *s;
	return 0;
}

static int decode_v4(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s), void *arg)
{
	const struct rhea_packed2 *h = (const void *)e;
	const uint8_t *p = (const uint8_t *)(h + 1), *end = (const uint8_t *)e + e->size;
	if (h->base_us > UINT64_MAX / 1000 || h->count / RC_DENSITY > (size_t)(end - p))
		return -1;
	struct rc_dec rc;
	if (rc_dec_init(&rc, p, end) != 0)
		return -1;
	/* The samples are held until the hash at the end says they are whole
	 * (the array grows as they come: count says what the entry claims). */
	struct models *m = models_new();
	struct held held = {NULL, 0, 0, 0};
	int ret = -1;
	if (m) {
		struct source in = {.rc = &rc, .m = m};
		ret = decode_samples(h, e->flags, 1, &in, hold, &held);
		if (held.oom)
			ret = -1;
		if (ret == 0 && (rc_ddirect(&rc, 32) != m->hash >> 32 || rc.bad || padding_only(rc.p, rc.end) != 0))
			ret = -1;
		for (size_t i = 0; i < held.n && ret == 0; i++)
			if (fn(arg, &held.s[i]) != 0)
				ret = -1;
	}
	free(held.s);
	free(m);
	return ret;
}
#endif

int packed_decode(const struct rhea_entry *e, int (*fn)(void *arg, const struct rhea_sample *s), void *arg)
{
	if (e->kind == RHEA_E_PACKED && e->size >= sizeof(struct rhea_packed))
		return decode_v1(e, fn, arg);
	if (e->kind == RHEA_E_PACKED2 && e->size >= sizeof(struct rhea_packed2))
		return decode_v2(e, 0, fn, arg);
	if (e->kind == RHEA_E_PACKED3 && e->size >= sizeof(struct rhea_packed2) && STEPS_VALID(e->flags))
		return decode_v2(e, e->flags, fn, arg);
#ifndef RHEA_AGENT
	if (e->kind == RHEA_E_PACKED4 && e->size >= sizeof(struct rhea_packed2) && STEPS_VALID4(e->flags))
		return decode_v4(e, fn, arg);
#endif
	return -1;
}

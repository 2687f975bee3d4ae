/*
 * pprof.c - `rhea convert -f pprof`: a gzipped profile.proto (google/pprof)
 * for `go tool pprof`, Pyroscope, Speedscope...
 *
 * Sample types: wall (ns), cpu (ns), alloc_objects (count), alloc_space
 * (bytes), and cpu_samples (count).  The first four come from the model,
 * never from counting samples:
 * each slice's self wall time, self CPU time and self allocations go to its
 * call path (convert_trie_build), so that
 *
 *   wall total   = the sum of all slices' self times (= the time the
 *                  threads' outermost slices cover), as `rhea report` sums it;
 *   cpu total    = likewise with CPU time;
 *   alloc totals = exactly the per-thread allocation counts of the report:
 *                  allocations no slice holds go to "[unattributed]";
 *
 * cpu_samples counts the sampler's captures at their own call paths (one
 * per sampling period of a thread's CPU): the unbiased CPU profile, where
 * the model's cpu may credit a short function called often next to a
 * hooked call with the time around it (README, Limits).
 *
 * Each sample carries the thread as labels ("thread" name, "tid" number),
 * so `pprof -tagfocus thread=worker` works.  Functions and locations are
 * the model's functions (one location per function, at the line of the
 * first address seen in it: the model merges lines, so finer locations would
 * invent precision); mappings are the recording's modules with their GNU
 * build-ids in hex, the main executable first as pprof expects.
 *
 * The profile is written as it is encoded, through zlib's deflate in gzip
 * mode; only the call-path trie and the string table are held in memory.
 * Several recordings (a program and its children) make one profile: each
 * one's functions, locations and mappings get ids past the earlier ones',
 * its samples the labels "program" and "pid", and the string table, written
 * last, is shared.
 */
#include "convert.h"
#include "pbwriter.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
	P_SAMPLE_TYPE = 1,
	P_SAMPLE = 2,
	P_MAPPING = 3,
	P_LOCATION = 4,
	P_FUNCTION = 5,
	P_STRING = 6,
	P_TIME = 9,
	P_DURATION = 10,
	P_PERIOD_TYPE = 11,
	P_PERIOD = 12,
	P_COMMENT = 13,
	P_DEFAULT_TYPE = 14,
	VT_TYPE = 1,
	VT_UNIT = 2,
	S_LOCATION = 1,
	S_VALUE = 2,
	S_LABEL = 3,
	L_KEY = 1,
	L_STR = 2,
	L_NUM = 3,
	M_ID = 1,
	M_START = 2,
	M_LIMIT = 3,
	M_OFFSET = 4,
	M_FILENAME = 5,
	M_BUILD_ID = 6,
	M_HAS_FUNCTIONS = 7,
	M_HAS_FILENAMES = 8,
	M_HAS_LINES = 9,
	LOC_ID = 1,
	LOC_MAPPING = 2,
	LOC_ADDRESS = 3,
	LOC_LINE = 4,
	LN_FUNCTION = 1,
	LN_LINE = 2,
	F_ID = 1,
	F_NAME = 2,
	F_SYSTEM_NAME = 3,
	F_FILENAME = 4,
};

/* ---- string table -------------------------------------------------------- */

struct strtab {
	char **s;
	uint32_t n, cap;
	uint32_t *slots, nslots; /* index + 1 */
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int strtab_rehash(struct strtab *t)
{
	uint32_t n = t->nslots ? t->nslots * 2 : 1024;
	uint32_t *slots = calloc(n, sizeof(uint32_t));
	if (!slots)
		return -1;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t j = (uint32_t)hash(t->s[i]) & (n - 1);
		while (slots[j])
			j = (j + 1) & (n - 1);
		slots[j] = i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = n;
	return 0;
}

/* Index of s in the table, added if new; -1 when out of memory. */
static int64_t strtab_id(struct strtab *t, const char *s)
{
	if ((t->n + 1) * 2 > t->nslots && strtab_rehash(t) < 0)
		return -1;
	uint32_t mask = t->nslots - 1;
	uint32_t j = (uint32_t)hash(s) & mask;
	for (; t->slots[j]; j = (j + 1) & mask)
		if (strcmp(t->s[t->slots[j] - 1], s) == 0)
			return t->slots[j] - 1;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		char **p = realloc(t->s, cap * sizeof(char *));
		if (!p)
			return -1;
		t->s = p;
		t->cap = cap;
	}
	char *copy = strdup(s);
	if (!copy)
		return -1;
	t->s[t->n] = copy;
	t->slots[j] = ++t->n;
	return t->n - 1;
}

static void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- gzip output ----------------------------------------------------------- */

struct gz {
	z_stream z;
	FILE *f;
	int err;
	unsigned char out[1 << 16];
};

static void gz_put(struct gz *g, const void *p, size_t n, int finish)
{
	if (g->err)
		return;
	g->z.next_in = (unsigned char *)(uintptr_t)p;
	g->z.avail_in = (uInt)n;
	for (;;) {
		g->z.next_out = g->out;
		g->z.avail_out = sizeof(g->out);
		int rc = deflate(&g->z, finish ? Z_FINISH : Z_NO_FLUSH);
		if (rc == Z_STREAM_ERROR) {
			g->err = 1;
			return;
		}
		size_t have = sizeof(g->out) - g->z.avail_out;
		if (have && fwrite(g->out, 1, have, g->f) != have) {
			g->err = 1;
			return;
		}
		if (finish ? rc == Z_STREAM_END : g->z.avail_in == 0 && g->z.avail_out != 0)
			return;
	}
}

/* ---- the profile ------------------------------------------------------------ */

struct pp {
	struct convert_ctx *c;
	struct pbwriter w;
	struct strtab st;
	struct gz *gz;
	int oom;
	/* several recordings in one profile: this one's function (and
	 * location) ids and mapping ids start past the earlier ones'; each
	 * sample says whose it is ("program", "pid" labels) */
	uint64_t fbase, mbase;
	int several;
	uint64_t first_start, last_ns; /* for time and duration, at the end */
	int64_t realtime0;
	char buf[1024];
};

static int64_t sid(struct pp *p, const char *s)
{
	int64_t id = strtab_id(&p->st, s ? s : "");
	if (id < 0) {
		p->oom = 1;
		return 0;
	}
	return id;
}

static void drain(struct pp *p, int force)
{
	if (p->w.oom)
		p->oom = 1;
	if (p->w.depth == 0 && (force || p->w.len >= (1u << 20))) {
		gz_put(p->gz, p->w.buf, p->w.len, 0);
		pbwriter_reset(&p->w);
	}
}

static void value_type(struct pp *p, uint32_t field, const char *type, const char *unit)
{
	pbwriter_begin(&p->w, field);
	pbwriter_int(&p->w, VT_TYPE, sid(p, type));
	pbwriter_int(&p->w, VT_UNIT, sid(p, unit));
	pbwriter_end(&p->w);
}

static void write_samples(struct pp *p, const struct convert_trie *tr)
{
	struct convert_ctx *c = p->c;
	int64_t k_thread = sid(p, "thread"), k_tid = sid(p, "tid");
	int64_t k_prog = 0, k_pid = 0, prog = 0;
	if (p->several) {
		char name[256];
		recording_program(c->r, name, sizeof(name));
		convert_clean_string(name, p->buf, sizeof(p->buf));
		k_prog = sid(p, "program");
		k_pid = sid(p, "pid");
		prog = sid(p, p->buf);
	}
	for (uint32_t id = 1; id < tr->n; id++) {
		const uint64_t *v = tr->val[id];
		int any = 0;
		for (int i = 0; i < CONVERT_NVALUES; i++)
			any |= v[i] != 0;
		if (!any)
			continue;
		if (tr->func[id] & CONVERT_THREAD_NODE)
			continue;
		pbwriter_begin(&p->w, P_SAMPLE);
		pbwriter_begin(&p->w, S_LOCATION); /* leaf first */
		uint32_t n = id;
		while (n && !(tr->func[n] & CONVERT_THREAD_NODE)) {
			pbwriter_raw_varint(&p->w, p->fbase + tr->func[n] + 1);
			n = tr->parent[n];
		}
		pbwriter_end(&p->w);
		pbwriter_begin(&p->w, S_VALUE);
		for (int i = 0; i < CONVERT_NVALUES; i++)
			pbwriter_raw_varint(&p->w, v[i]);
		pbwriter_end(&p->w);
		if (n) {
			const struct rec_thread *t = &c->r->threads[tr->func[n] & ~CONVERT_THREAD_NODE];
			convert_clean_string(t->name[0] ? t->name : "?", p->buf, sizeof(p->buf));
			pbwriter_begin(&p->w, S_LABEL);
			pbwriter_int(&p->w, L_KEY, k_thread);
			pbwriter_int(&p->w, L_STR, sid(p, p->buf));
			pbwriter_end(&p->w);
			pbwriter_begin(&p->w, S_LABEL);
			pbwriter_int(&p->w, L_KEY, k_tid);
			pbwriter_int(&p->w, L_NUM, t->tid);
			pbwriter_end(&p->w);
		}
		if (p->several) {
			pbwriter_begin(&p->w, S_LABEL);
			pbwriter_int(&p->w, L_KEY, k_prog);
			pbwriter_int(&p->w, L_STR, prog);
			pbwriter_end(&p->w);
			pbwriter_begin(&p->w, S_LABEL);
			pbwriter_int(&p->w, L_KEY, k_pid);
			pbwriter_int(&p->w, L_NUM, c->r->hdr.pid);
			pbwriter_end(&p->w);
		}
		pbwriter_end(&p->w);
		drain(p, 0);
	}
}

static void write_mappings(struct pp *p)
{
	struct recording *r = p->c->r;
	/* pprof takes the first mapping for the main binary. */
	const char *exe = recording_meta(r, "exe");
	size_t main_i = 0;
	for (size_t i = 0; exe && i < r->nmods; i++)
		if (strcmp(r->mods[i].path, exe) == 0) {
			main_i = i;
			break;
		}
	for (size_t k = 0; k < r->nmods; k++) {
		size_t i = k == 0 ? main_i : (k <= main_i ? k - 1 : k);
		const struct rec_module *m = &r->mods[i];
		char hex[80];
		for (uint32_t b = 0; b < m->build_id_len && b < 36; b++)
			sprintf(hex + 2 * b, "%02x", m->build_id[b]);
		hex[2 * (m->build_id_len < 36 ? m->build_id_len : 36)] = 0;
		pbwriter_begin(&p->w, P_MAPPING);
		pbwriter_varint(&p->w, M_ID, p->mbase + i + 1);
		pbwriter_varint(&p->w, M_START, m->lo);
		pbwriter_varint(&p->w, M_LIMIT, m->hi > m->lo ? m->hi : m->lo);
		/* The ELF address of the executable range, which is its file
		 * offset in the usual layouts. */
		pbwriter_varint(&p->w, M_OFFSET, m->lo >= m->bias ? m->lo - m->bias : 0);
		convert_clean_string(m->path, p->buf, sizeof(p->buf));
		pbwriter_int(&p->w, M_FILENAME, sid(p, p->buf));
		if (hex[0])
			pbwriter_int(&p->w, M_BUILD_ID, sid(p, hex));
		pbwriter_varint(&p->w, M_HAS_FUNCTIONS, 1);
		pbwriter_varint(&p->w, M_HAS_FILENAMES, 1);
		pbwriter_varint(&p->w, M_HAS_LINES, 1);
		pbwriter_end(&p->w);
		drain(p, 0);
	}
}

static void write_functions(struct pp *p, const uint8_t *used)
{
	struct convert_ctx *c = p->c;
	for (uint32_t f = 0; f < c->m->nfuncs; f++) {
		if (!used[f])
			continue;
		const struct model_func *mf = &c->m->funcs[f];
		pbwriter_begin(&p->w, P_LOCATION);
		pbwriter_varint(&p->w, LOC_ID, p->fbase + f + 1);
		if (c->func_mod[f] >= 0)
			pbwriter_varint(&p->w, LOC_MAPPING, p->mbase + (uint64_t)c->func_mod[f] + 1);
		if (c->func_addr[f])
			pbwriter_varint(&p->w, LOC_ADDRESS, c->func_addr[f]);
		pbwriter_begin(&p->w, LOC_LINE);
		pbwriter_varint(&p->w, LN_FUNCTION, p->fbase + f + 1);
		if (mf->line > 0)
			pbwriter_int(&p->w, LN_LINE, mf->line);
		pbwriter_end(&p->w);
		pbwriter_end(&p->w);

		int64_t name = sid(p, convert_func_name(c, f));
		pbwriter_begin(&p->w, P_FUNCTION);
		pbwriter_varint(&p->w, F_ID, p->fbase + f + 1);
		pbwriter_int(&p->w, F_NAME, name);
		pbwriter_int(&p->w, F_SYSTEM_NAME, name);
		if (mf->file) {
			convert_clean_string(mf->file, p->buf, sizeof(p->buf));
			pbwriter_int(&p->w, F_FILENAME, sid(p, p->buf));
		}
		pbwriter_end(&p->w);
		drain(p, 0);
	}
}

static void pp_free(void *arg)
{
	struct pp *p = arg;
	if (!p)
		return;
	if (p->gz)
		deflateEnd(&p->gz->z);
	free(p->gz);
	strtab_free(&p->st);
	pbwriter_free(&p->w);
	free(p);
}

int pprof_write(struct convert_ctx *c, FILE *out)
{
	struct convert_part one = {0, 1, 0, 0, NULL, NULL};
	return pprof_write_part(c, out, &one);
}

/* The first part opens the profile (gzip stream, sample types), each part
 * writes its samples, mappings, locations and functions with its ids, the
 * last one closes it (time, duration, the string table). */
int pprof_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part)
{
	struct recording *r = c->r;
	struct pp *p = part->state;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || !(p->gz = calloc(1, sizeof(*p->gz)))) {
			free(p);
			return -1;
		}
		pbwriter_init(&p->w);
		p->gz->f = out;
		if (deflateInit2(&p->gz->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			free(p->gz);
			p->gz = NULL;
			pp_free(p);
			return -1;
		}
		part->state = p;
		part->free_state = pp_free;
		p->several = part->count > 1;
		p->first_start = r->hdr.start_ns;
		p->realtime0 = (int64_t)convert_origin_realtime(c);
		sid(p, ""); /* string 0 must be "" */
		value_type(p, P_SAMPLE_TYPE, "wall", "nanoseconds");
		value_type(p, P_SAMPLE_TYPE, "cpu", "nanoseconds");
		value_type(p, P_SAMPLE_TYPE, "alloc_objects", "count");
		value_type(p, P_SAMPLE_TYPE, "alloc_space", "bytes");
		value_type(p, P_SAMPLE_TYPE, "cpu_samples", "count");
	}
	p->c = c;
	part->index++;
	uint8_t *used = calloc(c->m->nfuncs ? c->m->nfuncs : 1, 1);
	if (!used)
		return -1;
	struct convert_trie tr;
	convert_trie_build(c, &tr, 1);
	for (uint32_t id = 1; id < tr.n; id++)
		if (!(tr.func[id] & CONVERT_THREAD_NODE))
			used[tr.func[id]] = 1;
	write_samples(p, &tr);
	write_mappings(p);
	write_functions(p, used);
	convert_trie_free(&tr);
	free(used);
	p->fbase += c->m->nfuncs;
	p->mbase += r->nmods;
	if (r->last_ns > p->last_ns)
		p->last_ns = r->last_ns;
	if (part->index < part->count)
		return p->oom || p->gz->err ? -1 : 0;

	uint64_t from = c->origin_ns ? c->origin_ns : r->first_ns;
	pbwriter_int(&p->w, P_TIME, p->realtime0);
	pbwriter_int(&p->w, P_DURATION, (int64_t)(p->last_ns > from ? p->last_ns - from : 0));
	value_type(p, P_PERIOD_TYPE, "wall", "nanoseconds");
	pbwriter_int(&p->w, P_PERIOD, (int64_t)r->hdr.interval_ns);
	snprintf(p->buf, sizeof(p->buf), "rhea convert: self values of the slice model (end policy %s); "
		 "cpu_samples: the sampler's captures, one per sampling period of a thread's CPU, unbiased "
		 "(-sample_index=cpu_samples)", c->o->policy == MODEL_END_LAST ? "last" : "next");
	pbwriter_int(&p->w, P_COMMENT, sid(p, p->buf));
	pbwriter_int(&p->w, P_DEFAULT_TYPE, sid(p, "wall"));
	/* Last: every string is known now. */
	for (uint32_t i = 0; i < p->st.n; i++) {
		pbwriter_string(&p->w, P_STRING, p->st.s[i]);
		drain(p, 0);
	}
	drain(p, 1);
	gz_put(p->gz, NULL, 0, 1);
	int rc = p->oom || p->gz->err ? -1 : 0;
	pp_free(p);
	part->state = NULL;
	part->free_state = NULL;
	return rc;
}

/* json.c - minimal streaming JSON writer (see json.h). */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void json_init(struct json *j, FILE *f, int pretty)
{
	j->f = f;
	j->depth = 0;
	j->need_comma[0] = 0;
	j->pretty = pretty;
}

void json_write_string(FILE *f, const char *s)
{
	putc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				putc(*p, f);
		}
	}
	putc('"', f);
}

static void sep(struct json *j, const char *key)
{
	if (j->need_comma[j->depth])
		putc(',', j->f);
	j->need_comma[j->depth] = 1;
	if (j->pretty) {
		putc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	if (key) {
		json_write_string(j->f, key);
		putc(':', j->f);
	}
}

static void open_(struct json *j, const char *key, char c)
{
	if (j->depth > 0 || j->need_comma[0])
		sep(j, key);
	else if (key)
		sep(j, key);
	putc(c, j->f);
	if (j->depth < 63)
		j->depth++;
	j->need_comma[j->depth] = 0;
}

static void close_(struct json *j, char c)
{
	if (j->depth > 0)
		j->depth--;
	if (j->pretty) {
		putc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	putc(c, j->f);
	if (j->depth == 0 && j->pretty)
		putc('\n', j->f);
}

void json_obj_begin(struct json *j, const char *key) { open_(j, key, '{'); }
void json_obj_end(struct json *j) { close_(j, '}'); }
void json_arr_begin(struct json *j, const char *key) { open_(j, key, '['); }
void json_arr_end(struct json *j) { close_(j, ']'); }

void json_str(struct json *j, const char *key, const char *v)
{
	sep(j, key);
	if (v)
		json_write_string(j->f, v);
	else
		fputs("null", j->f);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	sep(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	sep(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_dbl(struct json *j, const char *key, double v)
{
	sep(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void json_bool(struct json *j, const char *key, int v)
{
	sep(j, key);
	fputs(v ? "true" : "false", j->f);
}

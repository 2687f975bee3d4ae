/*
 * json.h - a minimal streaming JSON writer (commas and escaping handled),
 * enough for the report and the Chrome trace format.
 */
#ifndef RHEA_JSON_H
#define RHEA_JSON_H

#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *f;
	int depth;
	int need_comma[64];
	int pretty;
};

void json_init(struct json *j, FILE *f, int pretty);
void json_obj_begin(struct json *j, const char *key); /* key NULL in arrays/top */
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
void json_str(struct json *j, const char *key, const char *v); /* v NULL -> null */
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_dbl(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, int v);
/* Write s as a JSON string literal (quotes included). */
void json_write_string(FILE *f, const char *s);

#endif

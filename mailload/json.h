/* json.h — a small JSON reader (a tree, with limits) and writer helpers for mailload's control
 * protocol, the sink's records and the report file. */
#ifndef HERON_MAILLOAD_JSON_H
#define HERON_MAILLOAD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	bool b;
	double num;
	int64_t i; /* num truncated, exact for integers up to 2^63 */
	char *s;   /* JV_STR, NUL-terminated */
	char *key; /* member name when inside an object */
	struct jv *kid;
	size_t n, cap;
};

/* Parses one JSON value (nesting at most 64 deep); -1 with *error_r on bad input. */
int jv_parse(const char *p, size_t len, struct jv **out, const char **error_r);
void jv_free(struct jv **v);
/* Member of an object, or NULL. */
const struct jv *jv_get(const struct jv *o, const char *key);
double jv_num(const struct jv *o, const char *key, double dflt);
int64_t jv_int(const struct jv *o, const char *key, int64_t dflt);
const char *jv_str(const struct jv *o, const char *key, const char *dflt);

/* Appends s as a quoted JSON string. */
void json_put_str(struct buf *out, const char *s);
void json_put_strn(struct buf *out, const char *s, size_t n);

#endif

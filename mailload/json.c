/* json.c — owns the JSON reader (recursive descent into struct jv, depth-limited) and the
 * string escaping used by every JSON writer in mailload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/json.h"

#define JSON_STR_MAX (64u << 20) /* one string read */

struct jp {
	const char *p, *end;
	const char *err;
	int depth;
};

static int jp_value(struct jp *j, struct jv *v);

static void jp_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n'))
		j->p++;
}

static int jp_fail(struct jp *j, const char *msg)
{
	if (j->err == NULL)
		j->err = msg;
	return -1;
}

/* Four hex digits of a \u escape; -1 when they are not. */
static int jp_hex4(struct jp *j)
{
	unsigned cp = 0;

	if (j->end - j->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = str_hex_digit((unsigned char)*j->p++);

		if (h < 0)
			return -1;
		cp = cp << 4 | (unsigned)h;
	}
	return (int)cp;
}

/* The escape after a backslash, appended to b: 0, -1 bad escape, -2 too long. */
static int jp_escape(struct jp *j, struct buf *b)
{
	char c = *j->p++;
	int cp;

	switch (c) {
	case 'n':
		c = '\n';
		break;
	case 'r':
		c = '\r';
		break;
	case 't':
		c = '\t';
		break;
	case 'b':
		c = '\b';
		break;
	case 'f':
		c = '\f';
		break;
	case '"':
	case '\\':
	case '/':
		break;
	case 'u':
		if ((cp = jp_hex4(j)) < 0)
			return -1;
		return buf_put_utf8(b, (uint32_t)cp) < 0 ? -2 : 0;
	default:
		return -1;
	}
	return buf_putc(b, c) < 0 ? -2 : 0;
}

static int jp_string(struct jp *j, char **out)
{
	struct buf b;
	const char *why = NULL;

	buf_init(&b, 16, JSON_STR_MAX);
	j->p++; /* the quote */
	while (why == NULL && j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		int rc = 0;

		if ((unsigned char)c < 0x20)
			why = "control character in string";
		else if (c != '\\')
			rc = buf_putc(&b, c) < 0 ? -2 : 0;
		else if (j->p < j->end)
			rc = jp_escape(j, &b);
		if (rc < 0)
			why = rc == -1 ? "bad escape in string" : "string too long";
	}
	if (why == NULL && j->p >= j->end)
		why = "unterminated string";
	if (why != NULL) {
		buf_release(&b);
		return jp_fail(j, why);
	}
	j->p++;
	*out = buf_steal(&b, NULL);
	return 0;
}

static struct jv *jv_push(struct jv *v)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 4;
		v->kid = xreallocarray(v->kid, v->cap, sizeof(*v->kid));
	}
	memset(&v->kid[v->n], 0, sizeof(*v->kid));
	return &v->kid[v->n++];
}

static int jp_container(struct jp *j, struct jv *v, bool obj)
{
	char close = obj ? '}' : ']';

	if (++j->depth > 64)
		return jp_fail(j, "nested too deep");
	v->type = obj ? JV_OBJ : JV_ARR;
	j->p++;
	jp_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		struct jv *k = jv_push(v);

		jp_ws(j);
		if (obj) {
			if (j->p >= j->end || *j->p != '"' || jp_string(j, &k->key) < 0)
				return jp_fail(j, "expected member name");
			jp_ws(j);
			if (j->p >= j->end || *j->p != ':')
				return jp_fail(j, "expected ':'");
			j->p++;
		}
		if (jp_value(j, k) < 0)
			return -1;
		jp_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			j->depth--;
			return 0;
		}
		return jp_fail(j, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int jp_word(struct jp *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
		return jp_fail(j, "unexpected word");
	j->p += n;
	return 0;
}

static int jp_value(struct jp *j, struct jv *v)
{
	jp_ws(j);
	if (j->p >= j->end)
		return jp_fail(j, "unexpected end");
	switch (*j->p) {
	case '{':
		return jp_container(j, v, true);
	case '[':
		return jp_container(j, v, false);
	case '"':
		v->type = JV_STR;
		return jp_string(j, &v->s);
	case 't':
		v->type = JV_BOOL;
		v->b = true;
		return jp_word(j, "true");
	case 'f':
		v->type = JV_BOOL;
		return jp_word(j, "false");
	case 'n':
		v->type = JV_NULL;
		return jp_word(j, "null");
	default: {
		char tmp[64];
		size_t n = 0;
		bool integral = true;

		while (j->p + n < j->end && n < sizeof(tmp) - 1 &&
		       strchr("+-0123456789.eE", j->p[n]) != NULL) {
			if (strchr(".eE", j->p[n]) != NULL)
				integral = false;
			n++;
		}
		if (n == 0)
			return jp_fail(j, "unexpected character");
		memcpy(tmp, j->p, n);
		tmp[n] = '\0';
		char *e;
		v->type = JV_NUM;
		v->num = strtod(tmp, &e);
		if (*e != '\0')
			return jp_fail(j, "bad number");
		v->i = integral ? strtoll(tmp, NULL, 10) : (int64_t)v->num;
		j->p += n;
		return 0;
	}
	}
}

static void jv_clear(struct jv *v)
{
	for (size_t i = 0; i < v->n; i++)
		jv_clear(&v->kid[i]);
	free(v->kid);
	free(v->s);
	free(v->key);
}

void jv_free(struct jv **vp)
{
	if (*vp == NULL)
		return;
	jv_clear(*vp);
	free(*vp);
	*vp = NULL;
}

int jv_parse(const char *p, size_t len, struct jv **out, const char **error_r)
{
	struct jp j = { p, p + len, NULL, 0 };
	struct jv *v = xcalloc(1, sizeof(*v));

	if (jp_value(&j, v) == 0) {
		jp_ws(&j);
		if (j.p != j.end)
			jp_fail(&j, "trailing characters");
	}
	if (j.err != NULL) {
		jv_free(&v);
		*error_r = j.err;
		return -1;
	}
	*out = v;
	return 0;
}

const struct jv *jv_get(const struct jv *o, const char *key)
{
	if (o == NULL || o->type != JV_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->kid[i].key, key) == 0)
			return &o->kid[i];
	return NULL;
}

double jv_num(const struct jv *o, const char *key, double dflt)
{
	const struct jv *v = jv_get(o, key);

	return v != NULL && v->type == JV_NUM ? v->num : dflt;
}

int64_t jv_int(const struct jv *o, const char *key, int64_t dflt)
{
	const struct jv *v = jv_get(o, key);

	return v != NULL && v->type == JV_NUM ? v->i : dflt;
}

const char *jv_str(const struct jv *o, const char *key, const char *dflt)
{
	const struct jv *v = jv_get(o, key);

	return v != NULL && v->type == JV_STR ? v->s : dflt;
}

void json_put_strn(struct buf *out, const char *s, size_t n)
{
	buf_putc(out, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			buf_putc(out, '\\');
			buf_putc(out, (char)c);
		} else if (c < 0x20) {
			buf_printf(out, "\\u%04x", c);
		} else {
			buf_putc(out, (char)c);
		}
	}
	buf_putc(out, '"');
}

void json_put_str(struct buf *out, const char *s)
{
	json_put_strn(out, s, strlen(s));
}

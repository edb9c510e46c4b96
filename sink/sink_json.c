/* sink_json.c — owns the control port's JSON: writing strings with correct escaping (ids come
 * from the network) and reading one flat request object. Nothing else of JSON is needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink/sink.h"

/* The length of a valid UTF-8 sequence at p (at most n bytes), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void sink_json_str(struct buf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;

	buf_putc(out, '"');
	while (i < len) {
		size_t n = utf8_seq(p + i, len - i);
		const char *esc = NULL;
		char tmp[8];

		if (n == 1 && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' && p[i] != 0x7f) {
			i++;
			continue;
		}
		if (n > 1) {
			i += n;
			continue;
		}
		buf_append(out, s + run, i - run);
		if (n == 0)
			esc = "\\ufffd";
		else if (p[i] == '"')
			esc = "\\\"";
		else if (p[i] == '\\')
			esc = "\\\\";
		else if (p[i] == '\n')
			esc = "\\n";
		else if (p[i] == '\r')
			esc = "\\r";
		else if (p[i] == '\t')
			esc = "\\t";
		else {
			snprintf(tmp, sizeof(tmp), "\\u%04x", p[i]);
			esc = tmp;
		}
		buf_puts(out, esc);
		run = ++i;
	}
	buf_append(out, s + run, len - run);
	buf_putc(out, '"');
}

static size_t skip_ws(const char *p, size_t len, size_t i)
{
	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return i;
}

/* A string starting at p[i] == '"': sets the raw span; returns the index after the closing
   quote, or 0 on error. *escaped_r tells whether it held a backslash. */
static size_t scan_string(const char *p, size_t len, size_t i, const char **s_r, size_t *n_r,
			  bool *escaped_r)
{
	size_t start = ++i;

	*escaped_r = false;
	while (i < len && p[i] != '"') {
		if ((unsigned char)p[i] < 0x20)
			return 0;
		if (p[i] == '\\') {
			*escaped_r = true;
			if (++i >= len)
				return 0;
		}
		i++;
	}
	if (i >= len)
		return 0;
	*s_r = p + start;
	*n_r = i - start;
	return i + 1;
}

static size_t scan_token(const char *p, size_t len, size_t i, struct sink_json_member *m)
{
	size_t start = i;

	while (i < len &&
	       (p[i] == '-' || p[i] == '+' || p[i] == '.' || (p[i] >= '0' && p[i] <= '9') ||
		(p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z')))
		i++;
	m->val = p + start;
	m->val_len = i - start;
	if (m->val_len == 4 && memcmp(m->val, "true", 4) == 0)
		m->type = JSON_BOOL;
	else if (m->val_len == 5 && memcmp(m->val, "false", 5) == 0)
		m->type = JSON_BOOL;
	else if (m->val_len == 4 && memcmp(m->val, "null", 4) == 0)
		m->type = JSON_NULL;
	else if (m->val_len > 0 && (p[start] == '-' || (p[start] >= '0' && p[start] <= '9')))
		m->type = JSON_NUMBER;
	else
		return 0;
	return i;
}

int sink_json_parse(const char *p, size_t len, struct sink_json_member *m, size_t max,
		    const char **error_r)
{
	size_t i = skip_ws(p, len, 0), n = 0;
	bool esc;

	if (i >= len || p[i] != '{')
		return *error_r = "expected a JSON object", -1;
	i = skip_ws(p, len, i + 1);
	if (i < len && p[i] == '}')
		goto end;
	for (;;) {
		if (n == max)
			return *error_r = "too many members", -1;
		if (i >= len || p[i] != '"' ||
		    (i = scan_string(p, len, i, &m[n].key, &m[n].key_len, &esc)) == 0)
			return *error_r = "expected a member name", -1;
		if (esc)
			return *error_r = "unknown member", -1;
		i = skip_ws(p, len, i);
		if (i >= len || p[i] != ':')
			return *error_r = "expected ':'", -1;
		i = skip_ws(p, len, i + 1);
		if (i < len && p[i] == '"') {
			m[n].type = JSON_STRING;
			i = scan_string(p, len, i, &m[n].val, &m[n].val_len, &esc);
		} else {
			i = scan_token(p, len, i, &m[n]);
		}
		if (i == 0)
			return *error_r = "bad value", -1;
		n++;
		i = skip_ws(p, len, i);
		if (i < len && p[i] == ',') {
			i = skip_ws(p, len, i + 1);
			continue;
		}
		if (i < len && p[i] == '}')
			break;
		return *error_r = "expected ',' or '}'", -1;
	}
end:
	if (skip_ws(p, len, i + 1) != len)
		return *error_r = "trailing characters after the object", -1;
	return (int)n;
}

int sink_json_number(const struct sink_json_member *m, double *v_r)
{
	char tmp[64], *end;

	if (m->type != JSON_NUMBER || m->val_len >= sizeof(tmp))
		return -1;
	memcpy(tmp, m->val, m->val_len);
	tmp[m->val_len] = '\0';
	*v_r = strtod(tmp, &end);
	return *end == '\0' ? 0 : -1;
}

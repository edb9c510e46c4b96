/* authres.c — Authentication-Results (RFC 8601): writing our field, spotting fields that
 * claim our authserv-id. */
#include <string.h>

#include "common/rfc5322.h"
#include "common/str.h"
#include "mailauth/authres.h"

void authres_start(struct buf *out, const char *authserv_id)
{
	buf_printf(out, "Authentication-Results: %s", authserv_id);
}

void authres_add(struct buf *out, const char *method, enum ma_result r, const char *reason,
		 const char *props)
{
	buf_printf(out, ";\r\n\t%s=%s", method, ma_result_str(r));
	if (reason != NULL && reason[0]) {
		buf_puts(out, " (");
		for (const char *p = reason; *p; p++)
			if (*p != '(' && *p != ')' && *p != '\\' && (unsigned char)*p >= ' ')
				buf_putc(out, *p);
		buf_putc(out, ')');
	}
	if (props != NULL && props[0])
		buf_printf(out, " %s", props);
}

void authres_end(struct buf *out, size_t nresults)
{
	if (nresults == 0)
		buf_puts(out, "; none");
	buf_puts(out, "\r\n");
}

static bool token_char(char c)
{
	return (unsigned char)c > ' ' && (unsigned char)c < 0x7f &&
	       strchr("()<>,;:\\\"/[]?=", c) == NULL;
}

void authres_value(const char *v, char *out, size_t size)
{
	bool token = v[0] != '\0';
	size_t k = 0;

	for (const char *p = v; *p && token; p++)
		token = token_char(*p) || *p == '@' || *p == '/' || *p == '=';
	if (token) {
		str_lcpy(out, v, size);
		return;
	}
	if (size < 3) {
		if (size)
			out[0] = '\0';
		return;
	}
	out[k++] = '"';
	for (const char *p = v; *p && k + 2 < size; p++)
		if (*p != '"' && *p != '\\' && (unsigned char)*p >= ' ')
			out[k++] = *p;
	out[k++] = '"';
	out[k] = '\0';
}

bool authres_claims(const char *raw, size_t len, const char *authserv_id)
{
	const char *colon = memchr(raw, ':', len);
	size_t i, nlen;

	if (colon == NULL)
		return false;
	nlen = (size_t)(colon - raw);
	while (nlen > 0 && (raw[nlen - 1] == ' ' || raw[nlen - 1] == '\t'))
		nlen--;
	if (!str_caseeq(raw, nlen, "Authentication-Results", 22))
		return false;
	i = (size_t)(colon - raw) + 1;
	for (;;) {
		while (i < len &&
		       (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n'))
			i++;
		if (i < len && raw[i] == '(') {
			i = rfc5322_skip_comment(raw, len, i);
			continue;
		}
		break;
	}
	size_t s = i;
	while (i < len && raw[i] != ';' && raw[i] != ' ' && raw[i] != '\t' && raw[i] != '(' &&
	       raw[i] != '\r' && raw[i] != '\n')
		i++;
	return str_caseeq(raw + s, i - s, authserv_id, strlen(authserv_id));
}

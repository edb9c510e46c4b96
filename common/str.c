/* str.c — owns the length-aware string and number helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/str.h"

static inline unsigned char lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

size_t str_lcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size > 0) {
		size_t c = n < size - 1 ? n : size - 1;

		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

size_t str_lcat(char *dst, const char *src, size_t size)
{
	size_t d = strnlen(dst, size);

	if (d == size)
		return size + strlen(src);
	return d + str_lcpy(dst + d, src, size - d);
}

int str_fmt(char *dst, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dst, size, fmt, ap);
	va_end(ap);
	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

bool str_caseeq(const char *a, size_t alen, const char *b, size_t blen)
{
	return alen == blen && str_casecmp(a, alen, b, blen) == 0;
}

int str_casecmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;

	for (size_t i = 0; i < n; i++) {
		unsigned char x = lower((unsigned char)a[i]), y = lower((unsigned char)b[i]);

		if (x != y)
			return x < y ? -1 : 1;
	}
	return alen == blen ? 0 : (alen < blen ? -1 : 1);
}

bool str_caseprefix(const char *p, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return n <= len && str_casecmp(p, n, prefix, n) == 0;
}

const char *str_casefind(const char *hay, size_t haylen, const char *needle, size_t nlen)
{
	if (nlen == 0)
		return hay;
	for (size_t i = 0; i + nlen <= haylen; i++)
		if (lower((unsigned char)hay[i]) == lower((unsigned char)needle[0]) &&
		    str_casecmp(hay + i, nlen, needle, nlen) == 0)
			return hay + i;
	return NULL;
}

void str_lower(char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)lower((unsigned char)p[i]);
}

static inline bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

struct str_view str_trim(struct str_view v)
{
	while (v.len > 0 && is_ws(v.p[0])) {
		v.p++;
		v.len--;
	}
	while (v.len > 0 && is_ws(v.p[v.len - 1]))
		v.len--;
	return v;
}

bool str_split_next(struct str_view *rest, char sep, struct str_view *field)
{
	const char *e;

	if (rest->p == NULL)
		return false;
	e = memchr(rest->p, sep, rest->len);
	field->p = rest->p;
	if (e == NULL) {
		field->len = rest->len;
		rest->p = NULL;
		rest->len = 0;
	} else {
		field->len = (size_t)(e - rest->p);
		rest->len -= field->len + 1;
		rest->p = e + 1;
	}
	return true;
}

bool str_split_ws(struct str_view *rest, struct str_view *field)
{
	size_t i = 0;

	if (rest->p == NULL)
		return false;
	while (i < rest->len && (rest->p[i] == ' ' || rest->p[i] == '\t'))
		i++;
	if (i == rest->len) {
		rest->p = NULL;
		rest->len = 0;
		return false;
	}
	field->p = rest->p + i;
	while (i < rest->len && rest->p[i] != ' ' && rest->p[i] != '\t')
		i++;
	field->len = (size_t)(rest->p + i - field->p);
	rest->p += i;
	rest->len -= i;
	return true;
}

bool str_is_safe_line(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] == '\0' || p[i] == '\r' || p[i] == '\n')
			return false;
	return true;
}

int str_to_u64(const char *p, size_t len, uint64_t max, uint64_t *v_r)
{
	uint64_t v = 0;

	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)p[i] - '0';

		if (d > 9 || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*v_r = v;
	return 0;
}

int str_to_i64(const char *p, size_t len, int64_t min, int64_t max, int64_t *v_r)
{
	bool neg = len > 0 && p[0] == '-';
	uint64_t u, lim;

	if (neg || (len > 0 && p[0] == '+')) {
		p++;
		len--;
	}
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (str_to_u64(p, len, lim, &u) < 0)
		return -1;
	int64_t v = neg ? (u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
	if (v < min || v > max)
		return -1;
	*v_r = v;
	return 0;
}

/* Splits "123unit" into the digits and the unit text. */
static size_t digits_len(const char *p, size_t len)
{
	size_t i = 0;

	while (i < len && p[i] >= '0' && p[i] <= '9')
		i++;
	return i;
}

int str_to_size(const char *p, size_t len, uint64_t *v_r)
{
	size_t n = digits_len(p, len);
	uint64_t v, mul = 1;
	const char *u = p + n;
	size_t ulen = len - n;

	if (ulen > 0 && (u[ulen - 1] == 'b' || u[ulen - 1] == 'B'))
		ulen--;
	if (ulen == 1) {
		switch (u[0]) {
		case 'k':
		case 'K':
			mul = 1ULL << 10;
			break;
		case 'm':
		case 'M':
			mul = 1ULL << 20;
			break;
		case 'g':
		case 'G':
			mul = 1ULL << 30;
			break;
		case 't':
		case 'T':
			mul = 1ULL << 40;
			break;
		default:
			return -1;
		}
	} else if (ulen != 0) {
		return -1;
	}
	if (str_to_u64(p, n, UINT64_MAX, &v) < 0 || v > UINT64_MAX / mul)
		return -1;
	*v_r = v * mul;
	return 0;
}

int str_to_duration_ms(const char *p, size_t len, int64_t *ms_r)
{
	size_t n = digits_len(p, len);
	const char *u = p + n;
	size_t ulen = len - n;
	uint64_t v, mul;

	if (ulen == 0 || (ulen == 1 && u[0] == 's'))
		mul = 1000;
	else if (ulen == 2 && u[0] == 'm' && u[1] == 's')
		mul = 1;
	else if (ulen == 1 && u[0] == 'm')
		mul = 60 * 1000;
	else if (ulen == 1 && u[0] == 'h')
		mul = 3600 * 1000;
	else if (ulen == 1 && u[0] == 'd')
		mul = 86400 * 1000;
	else
		return -1;
	if (str_to_u64(p, n, (uint64_t)INT64_MAX / mul, &v) < 0)
		return -1;
	*ms_r = (int64_t)(v * mul);
	return 0;
}

int str_to_bool(const char *p, size_t len, bool *v_r)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (str_caseeq(p, len, yes[i], strlen(yes[i]))) {
			*v_r = true;
			return 0;
		}
		if (str_caseeq(p, len, no[i], strlen(no[i]))) {
			*v_r = false;
			return 0;
		}
	}
	return -1;
}

int str_b64_digit(unsigned char c, unsigned char c63)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	return c == c63 ? 63 : -1;
}

int str_hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (unsigned char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void str_log_name(char *dst, size_t size, const char *name)
{
	size_t n = 0, max = size - 1;

	for (; name[n] != '\0' && n < max; n++) {
		unsigned char ch = (unsigned char)name[n];

		dst[n] = ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' ? '?' : (char)ch;
	}
	dst[n] = '\0';
	if (name[n] != '\0' && max >= 3)
		memcpy(dst + max - 3, "...", 3);
}

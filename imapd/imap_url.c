/* imap_url.c — owns parsing the IMAP URLs of CATENATE (RFC 4469, RFC 5092) and URLAUTH (RFC
 * 4467: ;EXPIRE=, ;URLAUTH=access[:mechanism:token]); see imap_url.h. */
#include <string.h>
#include <strings.h>

#include "common/str.h"
#include "imapd/imap_url.h"


/* Percent-decodes s[0..len) into out (max bytes and a NUL): the length, or -1. A decoded NUL
   is refused. */
static int decode(const char *s, size_t len, char *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= len || (h = str_hex_digit((unsigned char)s[i + 1])) < 0 ||
			    (l = str_hex_digit((unsigned char)s[i + 2])) < 0 || (h == 0 && l == 0))
				return -1;
			c = (char)(h * 16 + l);
			i += 2;
		} else if ((unsigned char)c <= ' ' || c == '"' || (unsigned char)c >= 0x7f) {
			return -1;
		}
		if (n >= max)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return (int)n;
}

/* A nonzero 32-bit number, all of s[0..len): 0 and *v, or -1. */
static int number(const char *s, size_t len, uint32_t *v)
{
	uint64_t x;

	if (str_to_u64(s, len, UINT32_MAX, &x) < 0 || x == 0)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* Whether s[0..len) starts with the key (case-insensitive); advances past it. */
static bool key(const char **s, size_t *len, const char *k)
{
	size_t kl = strlen(k);

	if (*len < kl || strncasecmp(*s, k, kl) != 0)
		return false;
	*s += kl;
	*len -= kl;
	return true;
}

/* Two or four decimal digits at s: their value, or -1. */
static int digits(const char *s, size_t n)
{
	int v = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe - 719468;
}

/* RFC 3339 date-time, all of s[0..len) (percent-escapes decoded first):
   "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)": 0 and *t_r (Unix time, fraction dropped),
   or -1. */
static int parse_datetime(const char *s, size_t len, int64_t *t_r)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	char d[64];
	int n = decode(s, len, d, sizeof(d) - 1);
	int y, mo, dd, h, mi, se, oh = 0, om = 0, sign = 0;
	size_t i = 19;

	if (n < 20 || d[4] != '-' || d[7] != '-' || (d[10] != 'T' && d[10] != 't') ||
	    d[13] != ':' || d[16] != ':')
		return -1;
	if ((y = digits(d, 4)) < 0 || (mo = digits(d + 5, 2)) < 1 || mo > 12 ||
	    (dd = digits(d + 8, 2)) < 1 || dd > mdays[mo - 1] ||
	    (mo == 2 && dd == 29 && (y % 4 != 0 || (y % 100 == 0 && y % 400 != 0))) ||
	    (h = digits(d + 11, 2)) < 0 || h > 23 || (mi = digits(d + 14, 2)) < 0 || mi > 59 ||
	    (se = digits(d + 17, 2)) < 0 || se > 60)
		return -1;
	if (d[i] == '.') {
		size_t f = ++i;

		while (i < (size_t)n && d[i] >= '0' && d[i] <= '9')
			i++;
		if (i == f)
			return -1;
	}
	if (i + 1 == (size_t)n && (d[i] == 'Z' || d[i] == 'z')) {
		sign = 0;
	} else if (i + 6 == (size_t)n && (d[i] == '+' || d[i] == '-') && d[i + 3] == ':') {
		sign = d[i] == '+' ? 1 : -1;
		if ((oh = digits(d + i + 1, 2)) < 0 || oh > 23 ||
		    (om = digits(d + i + 4, 2)) < 0 || om > 59)
			return -1;
	} else {
		return -1;
	}
	*t_r = days_from_civil(y, mo, dd) * 86400 + h * 3600 + mi * 60 + se -
	       sign * (oh * 3600 + om * 60);
	return 0;
}

/* The access identifier of ;URLAUTH=, all of s[0..len) (RFC 4467 3). */
static int parse_access(const char *s, size_t len, struct imap_url *u)
{
	if (key(&s, &len, "submit+"))
		u->access = IMAP_URL_ACCESS_SUBMIT;
	else if (key(&s, &len, "user+"))
		u->access = IMAP_URL_ACCESS_USER;
	else if (str_caseeq(s, len, "authuser", 8))
		u->access = IMAP_URL_ACCESS_AUTHUSER;
	else if (str_caseeq(s, len, "anonymous", 9))
		u->access = IMAP_URL_ACCESS_ANONYMOUS;
	else
		return -1;
	if (u->access == IMAP_URL_ACCESS_SUBMIT || u->access == IMAP_URL_ACCESS_USER)
		if (len == 0 || decode(s, len, u->access_user, IMAP_URL_NAME_MAX) < 0)
			return -1;
	return 0;
}

/* "[;EXPIRE=date-time];URLAUTH=access[:mechanism:token]", all of s[0..len); base is the URL's
   first byte (the rump's length is counted from it). */
static int parse_urlauth(const char *base, const char *s, size_t len, struct imap_url *u)
{
	const char *end = s + len, *p;
	size_t al, ml;

	if (key(&s, &len, ";EXPIRE=")) {
		if ((p = memchr(s, ';', len)) == NULL ||
		    parse_datetime(s, (size_t)(p - s), &u->expire) < 0)
			return -1;
		u->has_expire = true;
		len -= (size_t)(p - s);
		s = p;
	}
	if (!key(&s, &len, ";URLAUTH="))
		return -1;
	p = memchr(s, ':', len);
	al = p != NULL ? (size_t)(p - s) : len;
	if (parse_access(s, al, u) < 0)
		return -1;
	u->rump_len = (size_t)(s + al - base);
	if (p == NULL)
		return 0; /* a rump URL */
	s = p + 1;
	len = (size_t)(end - s);
	if ((p = memchr(s, ':', len)) == NULL || p == s ||
	    (ml = (size_t)(p - s)) > IMAP_URL_MECH_MAX)
		return -1;
	for (size_t i = 0; i < ml; i++) {
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return -1;
		u->mech[i] = c;
	}
	u->mech[ml] = '\0';
	s = p + 1;
	len = (size_t)(end - s);
	if (len < 32 || len > IMAP_URL_TOKEN_MAX)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (str_hex_digit((unsigned char)s[i]) < 0)
			return -1;
		u->token[i] = s[i];
	}
	u->token[len] = '\0';
	return 0;
}

/* Where the URLAUTH part of s[0..len) begins (";EXPIRE=" or ";URLAUTH="), or NULL. */
static const char *urlauth_start(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] == ';' && (str_caseprefix(s + i, len - i, ";EXPIRE=") ||
				    str_caseprefix(s + i, len - i, ";URLAUTH=")))
			return s + i;
	return NULL;
}

/* "o[.l]" of ;PARTIAL=, all of s[0..len): offset any 32-bit number, length nonzero. */
static int parse_partial(const char *s, size_t len, struct imap_url *u)
{
	const char *dot = memchr(s, '.', len);
	size_t ol = dot != NULL ? (size_t)(dot - s) : len;
	uint64_t off;

	if (str_to_u64(s, ol, UINT32_MAX, &off) < 0)
		return -1;
	if (dot != NULL && number(dot + 1, len - ol - 1, &u->partial_len) < 0)
		return -1;
	u->partial_off = (uint32_t)off;
	u->has_partial = true;
	return 0;
}

/* ";UID=n[/;SECTION=s][/;PARTIAL=o[.l]][urlauth]", the whole rest (base: the URL's start). */
static int parse_uid_part(const char *base, const char *s, size_t len, struct imap_url *u)
{
	const char *slash, *ua;
	size_t n;

	if (!key(&s, &len, ";UID="))
		return -1;
	if ((ua = urlauth_start(s, len)) != NULL) {
		if (parse_urlauth(base, ua, len - (size_t)(ua - s), u) < 0)
			return -1;
		len = (size_t)(ua - s);
	}
	slash = memchr(s, '/', len);
	n = slash != NULL ? (size_t)(slash - s) : len;
	if (number(s, n, &u->uid) < 0)
		return -1;
	s += n, len -= n;
	if (len == 0)
		return 0;
	s++, len--; /* the '/' */
	if (key(&s, &len, ";SECTION=")) {
		slash = memchr(s, '/', len);
		n = slash != NULL ? (size_t)(slash - s) : len;
		if (n == 0 || memchr(s, ';', n) != NULL ||
		    decode(s, n, u->section, IMAP_URL_SECTION_MAX) < 0)
			return -1;
		s += n, len -= n;
		if (len == 0)
			return 0;
		s++, len--;
	}
	if (!key(&s, &len, ";PARTIAL="))
		return -1; /* search forms and the rest: not served */
	return parse_partial(s, len, u);
}

/* "mailbox[;UIDVALIDITY=v]/;UID=..." after the path's '/'. */
static int parse_mailbox_part(const char *base, const char *s, size_t len, struct imap_url *u)
{
	const char *end = s + len, *p;
	const char *uidp = NULL;

	/* the mailbox ends at the "/;UID=" (a mailbox name may hold '/') */
	for (p = s; p + 6 <= end; p++)
		if (p[0] == '/' && strncasecmp(p + 1, ";UID=", 5) == 0) {
			uidp = p;
			break;
		}
	if (uidp == NULL || uidp == s)
		return -1;
	size_t ml = (size_t)(uidp - s);
	const char *semi = memchr(s, ';', ml);

	if (semi != NULL) {
		const char *v = semi;
		size_t vl = (size_t)(uidp - semi);

		if (!key(&v, &vl, ";UIDVALIDITY=") || number(v, vl, &u->uidvalidity) < 0)
			return -1;
		ml = (size_t)(semi - s);
	}
	if (ml == 0 || decode(s, ml, u->mailbox, IMAP_URL_MAILBOX_MAX) < 0)
		return -1;
	u->has_mailbox = true;
	return parse_uid_part(base, uidp + 1, (size_t)(end - uidp - 1), u);
}

/* "[user[;AUTH=x]@]host[:port]" */
static int parse_server(const char *s, size_t len, struct imap_url *u)
{
	const char *at = memchr(s, '@', len);

	if (at != NULL) {
		size_t ul = (size_t)(at - s);
		const char *semi = memchr(s, ';', ul);

		if (semi != NULL) {
			const char *a = semi;
			size_t al = (size_t)(at - semi);

			if (!key(&a, &al, ";AUTH=") || al == 0)
				return -1;
			u->has_auth = true;
			ul = (size_t)(semi - s);
		}
		if (ul == 0 || decode(s, ul, u->user, IMAP_URL_NAME_MAX) < 0)
			return -1;
		len -= (size_t)(at + 1 - s);
		s = at + 1;
	}
	const char *colon = memchr(s, ':', len);
	size_t hl = colon != NULL ? (size_t)(colon - s) : len;
	uint32_t port;

	if (colon != NULL && (number(colon + 1, len - hl - 1, &port) < 0 || port > 65535))
		return -1;
	if (hl == 0 || hl > IMAP_URL_NAME_MAX || memchr(s, '%', hl) != NULL ||
	    decode(s, hl, u->host, IMAP_URL_NAME_MAX) < 0)
		return -1;
	return 0;
}

/* Any of the three forms, with its URLAUTH part. */
static int parse_any(const char *s, size_t len, struct imap_url *u)
{
	const char *base = s;

	if (len > 0 && s[0] == ';')
		return parse_uid_part(base, s, len, u);
	if (key(&s, &len, "imap://")) {
		const char *slash = memchr(s, '/', len);

		if (slash == NULL || parse_server(s, (size_t)(slash - s), u) < 0)
			return -1;
		u->has_server = true;
		len -= (size_t)(slash - s);
		s = slash;
	}
	if (len == 0 || s[0] != '/')
		return -1;
	return parse_mailbox_part(base, s + 1, len - 1, u);
}

int imap_url_parse(const char *s, size_t len, struct imap_url *u)
{
	memset(u, 0, sizeof(*u));
	if (memchr(s, '\0', len) != NULL || parse_any(s, len, u) < 0)
		return -1;
	/* URLAUTH only on the full form with a user and no ;AUTH= (RFC 4467 3: the URL carries
	   an authorization instead of asking for an authentication) */
	if (u->access != IMAP_URL_ACCESS_NONE &&
	    (!u->has_server || u->user[0] == '\0' || u->has_auth))
		return -1;
	return 0;
}

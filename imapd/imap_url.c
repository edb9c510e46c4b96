/* imap_url.c — owns parsing the IMAP URLs of CATENATE (RFC 4469, RFC 5092); see imap_url.h. */
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

/* ";UID=n[/;SECTION=s][/;PARTIAL=o[.l]]", the whole rest. */
static int parse_uid_part(const char *s, size_t len, struct imap_url *u)
{
	const char *slash;
	size_t n;

	if (!key(&s, &len, ";UID="))
		return -1;
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
		return -1; /* ;URLAUTH, ;EXPIRE and the rest: not served */
	return parse_partial(s, len, u);
}

/* "mailbox[;UIDVALIDITY=v]/;UID=..." after the path's '/'. */
static int parse_mailbox_part(const char *s, size_t len, struct imap_url *u)
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
	return parse_uid_part(uidp + 1, (size_t)(end - uidp - 1), u);
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

int imap_url_parse(const char *s, size_t len, struct imap_url *u)
{
	memset(u, 0, sizeof(*u));
	if (memchr(s, '\0', len) != NULL)
		return -1;
	if (len > 0 && s[0] == ';')
		return parse_uid_part(s, len, u);
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
	return parse_mailbox_part(s + 1, len - 1, u);
}

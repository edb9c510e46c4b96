/* mailaddr.c — owns RFC 5321 path/address parsing, the MAIL/RCPT parameter syntax, xtext and
 * UTF-8 validation, and the relay-trick classification. Pure functions: no I/O, no allocation. */
#include <arpa/inet.h>
#include <string.h>

#include "common/mailaddr.h"
#include "common/str.h"

/* A cursor over the input: parse functions advance it. */
struct cur {
	const char *p;
	size_t len, i;
	unsigned opts;
	const char *err;
};

static bool cur_more(const struct cur *c)
{
	return c->i < c->len;
}

static unsigned char cur_peek(const struct cur *c)
{
	return cur_more(c) ? (unsigned char)c->p[c->i] : 0;
}

static int cur_fail(struct cur *c, const char *err)
{
	if (c->err == NULL)
		c->err = err;
	return -1;
}

static bool is_alnum(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* RFC 5322 atext, plus UTF-8 bytes under SMTPUTF8 (RFC 6531 3.3). */
static bool is_atext(unsigned char ch, unsigned opts)
{
	if (ch >= 0x80)
		return (opts & MAILADDR_ALLOW_UTF8) != 0;
	return is_alnum(ch) || (ch != '\0' && strchr("!#$%&'*+-/=?^_`{|}~", ch) != NULL);
}

/* qtextSMTP: %d32-33 / %d35-91 / %d93-126, plus UTF-8 under SMTPUTF8. */
static bool is_qtext(unsigned char ch, unsigned opts)
{
	if (ch >= 0x80)
		return (opts & MAILADDR_ALLOW_UTF8) != 0;
	return ch >= 32 && ch <= 126 && ch != '"' && ch != '\\';
}

bool mailaddr_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		unsigned char c = p[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i - 1 < n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

/* Local-part = Dot-string / Quoted-string; copied as written into a->local. */
static int parse_local(struct cur *c, struct mailaddr *a)
{
	size_t start = c->i;

	if (cur_peek(c) == '"') {
		c->i++;
		for (;;) {
			unsigned char ch = cur_peek(c);

			if (!cur_more(c))
				return cur_fail(c, "Unterminated quoted local part");
			if (ch == '"')
				break;
			if (ch == '\\') {
				c->i++;
				ch = cur_peek(c);
				if (!cur_more(c) || ch < 32 || ch > 126)
					return cur_fail(c, "Bad quoted pair in local part");
			} else if (!is_qtext(ch, c->opts)) {
				return cur_fail(c, "Bad character in quoted local part");
			}
			c->i++;
		}
		c->i++;
		a->flags |= MAILADDR_F_QUOTED;
	} else {
		bool want_atom = true;

		while (cur_more(c)) {
			unsigned char ch = cur_peek(c);

			if (is_atext(ch, c->opts))
				want_atom = false;
			else if (ch == '.' && !want_atom)
				want_atom = true;
			else
				break;
			c->i++;
		}
		if (want_atom)
			return cur_fail(c, "Bad local part");
	}
	size_t n = c->i - start;
	if (n > MAILADDR_LOCAL_MAX)
		return cur_fail(c, "Local part too long (64 octets at most)");
	memcpy(a->local, c->p + start, n);
	a->local[n] = '\0';
	return 0;
}

/* address-literal: "[" ( IPv4 / "IPv6:" IPv6 ) "]"; general literals are refused. */
static int parse_literal(struct cur *c, size_t *end_r)
{
	char tmp[64];
	unsigned char addr[16];
	size_t start = ++c->i;

	/* dcontent: %d33-90 / %d94-126 */
	while (cur_more(c) && cur_peek(c) != ']') {
		unsigned char ch = cur_peek(c);

		if (ch < 33 || ch > 126 || ch == '[' || ch == '\\')
			return cur_fail(c, "Bad address literal");
		c->i++;
	}
	if (!cur_more(c))
		return cur_fail(c, "Unterminated address literal");
	size_t n = c->i - start;
	c->i++;
	*end_r = c->i;
	if (n == 0 || n >= sizeof(tmp))
		return cur_fail(c, "Bad address literal");
	memcpy(tmp, c->p + start, n);
	tmp[n] = '\0';
	if (str_caseprefix(tmp, n, "IPv6:"))
		return inet_pton(AF_INET6, tmp + 5, addr) == 1
			       ? 0
			       : cur_fail(c, "Bad IPv6 address literal");
	if (inet_pton(AF_INET, tmp, addr) == 1)
		return 0;
	return cur_fail(c, "Unsupported address literal");
}

/* Domain = sub-domain *("." sub-domain); sub-domain = Let-dig [Ldh-str] (or a U-label). Stops
   before the first byte that cannot continue it. *dot_r: a trailing '.' was skipped. */
static int parse_domain_name(struct cur *c, size_t *end_r, bool *dot_r)
{
	size_t label = 0, start = c->i;
	unsigned char prev = '.';

	*dot_r = false;
	while (cur_more(c)) {
		unsigned char ch = cur_peek(c);

		if (ch == '.') {
			if (prev == '.' || prev == '-')
				return cur_fail(c, "Bad domain");
			label = 0;
		} else if (is_alnum(ch) || (ch >= 0x80 && (c->opts & MAILADDR_ALLOW_UTF8))) {
			if (++label > 63)
				return cur_fail(c, "Domain label too long (63 octets at most)");
		} else if (ch == '-' && prev != '.') {
			label++;
		} else {
			break;
		}
		prev = ch;
		c->i++;
	}
	if (prev == '-')
		return cur_fail(c, "Bad domain");
	*end_r = c->i;
	if (prev == '.' && c->i > start) {
		/* "a.b." : a trailing dot ("." and "a.." were refused above) */
		*end_r = c->i - 1;
		*dot_r = true;
	}
	return 0;
}

static int parse_domain(struct cur *c, struct mailaddr *a)
{
	size_t start = c->i, end;
	bool dot = false;

	if (cur_peek(c) == '[') {
		if (parse_literal(c, &end) < 0)
			return -1;
		a->flags |= MAILADDR_F_LITERAL;
	} else if (parse_domain_name(c, &end, &dot) < 0) {
		return -1;
	}
	if (end == start)
		return cur_fail(c, "Missing domain");
	if (end - start > MAILADDR_DOMAIN_MAX)
		return cur_fail(c, "Domain too long (255 octets at most)");
	if (dot)
		a->flags |= MAILADDR_F_TRAILING_DOT;
	memcpy(a->domain, c->p + start, end - start);
	a->domain[end - start] = '\0';
	return 0;
}

/* Mailbox = Local-part "@" ( Domain / address-literal ); "Postmaster" alone is also valid
   (RFC 5321 4.1.1.3) and yields an empty domain. */
static int parse_mailbox(struct cur *c, struct mailaddr *a)
{
	if (parse_local(c, a) < 0)
		return -1;
	if (cur_peek(c) != '@') {
		if (str_caseeq(a->local, strlen(a->local), "postmaster", 10))
			return 0;
		return cur_fail(c, "Missing @domain");
	}
	c->i++;
	if (parse_domain(c, a) < 0)
		return -1;
	if ((a->flags & MAILADDR_F_UTF8) == 0) {
		for (const char *s = a->local; *s; s++)
			if ((unsigned char)*s >= 0x80)
				a->flags |= MAILADDR_F_UTF8;
		for (const char *s = a->domain; *s; s++)
			if ((unsigned char)*s >= 0x80)
				a->flags |= MAILADDR_F_UTF8;
	}
	if ((a->flags & MAILADDR_F_UTF8) && (!mailaddr_utf8_valid(a->local, strlen(a->local)) ||
					     !mailaddr_utf8_valid(a->domain, strlen(a->domain))))
		return cur_fail(c, "Invalid UTF-8 in address");
	return 0;
}

/* A-d-l = At-domain *( "," At-domain ) ":" — parsed, then ignored (RFC 5321 4.1.1.3). */
static int parse_route(struct cur *c, struct mailaddr *a)
{
	struct mailaddr tmp;

	for (;;) {
		if (cur_peek(c) != '@')
			return cur_fail(c, "Bad source route");
		c->i++;
		memset(&tmp, 0, sizeof(tmp));
		if (parse_domain(c, &tmp) < 0)
			return -1;
		if (cur_peek(c) == ':')
			break;
		if (cur_peek(c) != ',')
			return cur_fail(c, "Bad source route");
		c->i++;
	}
	c->i++;
	a->flags |= MAILADDR_F_ROUTE;
	return 0;
}

int mailaddr_parse_path(const char *p, size_t len, unsigned opts, struct mailaddr *a,
			size_t *used_r, const char **error_r)
{
	struct cur c = { p, len, 0, opts, NULL };

	memset(a, 0, sizeof(*a));
	if (cur_peek(&c) != '<') {
		if ((opts & MAILADDR_ALLOW_BARE) == 0 || !cur_more(&c)) {
			*error_r = "Path must be in angle brackets";
			return -1;
		}
		if (parse_mailbox(&c, a) < 0 ||
		    (cur_more(&c) && cur_peek(&c) != ' ' && cur_fail(&c, "Bad address") < 0)) {
			*error_r = c.err;
			return -1;
		}
		if (c.i + 2 > MAILADDR_PATH_MAX) { /* as if it had its angle brackets */
			*error_r = "Path too long (256 octets at most)";
			return -1;
		}
		*used_r = c.i;
		return 0;
	}
	c.i++;
	if (cur_peek(&c) == '>') {
		if ((opts & MAILADDR_ALLOW_NULL) == 0) {
			*error_r = "Null path not allowed here";
			return -1;
		}
		a->flags |= MAILADDR_F_NULL;
		*used_r = 2;
		return 0;
	}
	if ((cur_peek(&c) == '@' && parse_route(&c, a) < 0) || parse_mailbox(&c, a) < 0 ||
	    (cur_peek(&c) != '>' && cur_fail(&c, "Bad address or missing '>'") < 0)) {
		*error_r = c.err;
		return -1;
	}
	c.i++;
	if (c.i > MAILADDR_PATH_MAX) {
		*error_r = "Path too long (256 octets at most)";
		return -1;
	}
	*used_r = c.i;
	return 0;
}

int mailaddr_parse(const char *p, size_t len, unsigned opts, struct mailaddr *a,
		   const char **error_r)
{
	struct cur c = { p, len, 0, opts, NULL };

	memset(a, 0, sizeof(*a));
	if (parse_mailbox(&c, a) < 0 || (cur_more(&c) && cur_fail(&c, "Bad address") < 0)) {
		*error_r = c.err;
		return -1;
	}
	return 0;
}

int mailaddr_format(const struct mailaddr *a, char *dst, size_t size)
{
	if (a->flags & MAILADDR_F_NULL)
		return str_fmt(dst, size, "%s", "");
	if (a->domain[0] == '\0')
		return str_fmt(dst, size, "%s", a->local);
	return str_fmt(dst, size, "%s@%s", a->local, a->domain);
}

/* The quoted local part without quotes and escapes, when that is a valid dot-string. */
static bool unquote_local(const char *q, char *out, size_t size)
{
	size_t n = 0;
	bool want_atom = true;

	for (const char *s = q + 1; *s != '\0' && *s != '"'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '\\')
			ch = (unsigned char)*++s;
		if (ch == '.' && !want_atom)
			want_atom = true;
		else if (is_atext(ch, MAILADDR_ALLOW_UTF8))
			want_atom = false;
		else
			return false;
		if (n + 1 >= size)
			return false;
		out[n++] = (char)ch;
	}
	out[n] = '\0';
	return !want_atom;
}

int mailaddr_canonical(const struct mailaddr *a, char *dst, size_t size)
{
	char local[MAILADDR_LOCAL_MAX + 1];
	const char *l = a->local;

	if (a->flags & MAILADDR_F_NULL)
		return str_fmt(dst, size, "%s", "");
	if ((a->flags & MAILADDR_F_QUOTED) && unquote_local(a->local, local, sizeof(local)))
		l = local;
	if (str_fmt(dst, size, a->domain[0] ? "%s@%s" : "%s%s", l, a->domain) < 0)
		return -1;
	char *at = strrchr(dst, '@');
	if (at != NULL)
		str_lower(at, strlen(at));
	return 0;
}

unsigned mailaddr_tricks(const struct mailaddr *a)
{
	unsigned t = 0;

	if (a->flags & MAILADDR_F_NULL)
		return 0;
	if (strchr(a->local, '%') != NULL)
		t |= MAILADDR_T_PERCENT;
	if (strchr(a->local, '!') != NULL)
		t |= MAILADDR_T_BANG;
	if ((a->flags & MAILADDR_F_QUOTED) && strchr(a->local, '@') != NULL)
		t |= MAILADDR_T_QUOTED_AT;
	if (a->flags & MAILADDR_F_ROUTE)
		t |= MAILADDR_T_ROUTE;
	if (a->flags & MAILADDR_F_TRAILING_DOT)
		t |= MAILADDR_T_TRAILING_DOT;
	if (a->flags & MAILADDR_F_LITERAL)
		t |= MAILADDR_T_LITERAL;
	return t;
}

bool mailaddr_domain_in(const struct mailaddr *a, char *const *list, size_t n)
{
	size_t dl = strlen(a->domain);

	for (size_t i = 0; i < n; i++)
		if (str_caseeq(a->domain, dl, list[i], strlen(list[i])))
			return true;
	return false;
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1; /* xtext hex digits are upper case only */
}

/* Whether xtext p[0..len) encodes a control character (+00..+1F, +7F). ENVID and ORCPT values
   are copied into DSN header fields (bounce.c): a decoded CR or LF there would inject lines. */
static bool xtext_has_ctl(const char *p, size_t len)
{
	for (size_t i = 0; i + 2 < len; i++) {
		int hi, lo;

		if (p[i] != '+' || (hi = hexval((unsigned char)p[i + 1])) < 0 ||
		    (lo = hexval((unsigned char)p[i + 2])) < 0)
			continue;
		if ((hi << 4 | lo) < 0x20 || (hi << 4 | lo) == 0x7f)
			return true;
	}
	return false;
}

int mailaddr_xtext_decode(const char *p, size_t len, char *dst, size_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '+') {
			int hi, lo;

			if (len - i < 3 || (hi = hexval((unsigned char)p[i + 1])) < 0 ||
			    (lo = hexval((unsigned char)p[i + 2])) < 0)
				return -1;
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		} else if (ch < 33 || ch > 126 || ch == '=') {
			return -1;
		}
		if (n + 1 >= size)
			return -1;
		dst[n++] = (char)ch;
	}
	if (size == 0)
		return -1;
	dst[n] = '\0';
	return 0;
}

int mailaddr_xtext_encode(const char *p, size_t len, char *dst, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)p[i];
		bool plain = ch >= 33 && ch <= 126 && ch != '+' && ch != '=';

		if (n + (plain ? 1 : 3) >= size)
			return -1;
		if (plain) {
			dst[n++] = (char)ch;
		} else {
			dst[n++] = '+';
			dst[n++] = hex[ch >> 4];
			dst[n++] = hex[ch & 15];
		}
	}
	if (size == 0)
		return -1;
	dst[n] = '\0';
	return 0;
}

/* One "KEYWORD[=value]" of the parameter list. */
struct param {
	struct str_view key, val;
	bool has_val;
};

/* esmtp-param = esmtp-keyword ["=" esmtp-value]; keyword = (ALPHA / DIGIT) *(ALPHA / DIGIT /
   "-"); value = 1*(%d33-60 / %d62-126), UTF-8 too under SMTPUTF8 (RFC 6531). */
static int param_split(struct str_view f, bool utf8, struct param *pm, const char **error_r)
{
	size_t i = 0;

	memset(pm, 0, sizeof(*pm));
	while (i < f.len && (is_alnum((unsigned char)f.p[i]) || (i > 0 && f.p[i] == '-')))
		i++;
	if (i == 0 || (i < f.len && f.p[i] != '=')) {
		*error_r = "Bad parameter syntax";
		return -1;
	}
	pm->key = (struct str_view){ f.p, i };
	if (i == f.len)
		return 0;
	pm->has_val = true;
	pm->val = (struct str_view){ f.p + i + 1, f.len - i - 1 };
	for (size_t k = 0; k < pm->val.len; k++) {
		unsigned char ch = (unsigned char)pm->val.p[k];

		if (!((ch >= 33 && ch <= 126 && ch != '=') || (utf8 && ch >= 0x80))) {
			*error_r = "Bad parameter value";
			return -1;
		}
	}
	if (pm->val.len == 0 || (utf8 && !mailaddr_utf8_valid(pm->val.p, pm->val.len))) {
		*error_r = "Bad parameter value";
		return -1;
	}
	return 0;
}

static bool key_is(const struct param *pm, const char *name)
{
	return str_caseeq(pm->key.p, pm->key.len, name, strlen(name));
}

static bool val_is(const struct param *pm, const char *name)
{
	return str_caseeq(pm->val.p, pm->val.len, name, strlen(name));
}

/* Marks keyword bit in *seen; a repeated keyword is an error. */
static int once(unsigned *seen, unsigned bit, const char **error_r)
{
	if (*seen & bit) {
		*error_r = "Duplicate parameter";
		return -1;
	}
	*seen |= bit;
	return 0;
}

static int mail_param(const struct param *pm, unsigned *seen, struct mail_params *mp,
		      const char **error_r)
{
	if (key_is(pm, "SIZE")) {
		if (once(seen, 1, error_r) < 0)
			return -1;
		if (!pm->has_val || str_to_u64(pm->val.p, pm->val.len, UINT64_MAX, &mp->size) < 0)
			return *error_r = "Bad SIZE value", -1;
		mp->has_size = true;
	} else if (key_is(pm, "BODY")) {
		if (once(seen, 2, error_r) < 0)
			return -1;
		if (pm->has_val && val_is(pm, "7BIT"))
			mp->body = MAIL_BODY_7BIT;
		else if (pm->has_val && val_is(pm, "8BITMIME"))
			mp->body = MAIL_BODY_8BITMIME;
		else if (pm->has_val && val_is(pm, "BINARYMIME"))
			return *error_r = "BODY=BINARYMIME not supported", MAILADDR_EUNKNOWN;
		else
			return *error_r = "Bad BODY value", -1;
	} else if (key_is(pm, "SMTPUTF8")) {
		if (once(seen, 4, error_r) < 0)
			return -1;
		if (pm->has_val)
			return *error_r = "SMTPUTF8 takes no value", -1;
		mp->smtputf8 = true;
	} else if (key_is(pm, "REQUIRETLS")) {
		if (once(seen, 64, error_r) < 0)
			return -1;
		if (pm->has_val)
			return *error_r = "REQUIRETLS takes no value", -1;
		mp->requiretls = true;
	} else if (key_is(pm, "RET")) {
		if (once(seen, 8, error_r) < 0)
			return -1;
		if (pm->has_val && val_is(pm, "FULL"))
			mp->ret = MAIL_RET_FULL;
		else if (pm->has_val && val_is(pm, "HDRS"))
			mp->ret = MAIL_RET_HDRS;
		else
			return *error_r = "Bad RET value", -1;
	} else if (key_is(pm, "ENVID")) {
		if (once(seen, 16, error_r) < 0)
			return -1;
		if (!pm->has_val || xtext_has_ctl(pm->val.p, pm->val.len) ||
		    mailaddr_xtext_decode(pm->val.p, pm->val.len, mp->envid, sizeof(mp->envid)) <
			    0)
			return *error_r = "Bad ENVID value", -1;
	} else if (key_is(pm, "AUTH")) {
		/* RFC 4954 5: accepted; Heron does not trust other hosts' AUTH= claims */
		if (once(seen, 32, error_r) < 0)
			return -1;
	} else {
		*error_r = "Unsupported parameter";
		return MAILADDR_EUNKNOWN;
	}
	return 0;
}

int mailaddr_mail_params(const char *p, size_t len, struct mail_params *mp, const char **error_r)
{
	struct str_view rest = { p, len }, f;
	struct param pm;
	unsigned seen = 0;
	int rc;

	memset(mp, 0, sizeof(*mp));
	/* SMTPUTF8 decides whether values may hold UTF-8: look for it first */
	for (struct str_view r = rest; str_split_ws(&r, &f);)
		if (str_caseeq(f.p, f.len, "SMTPUTF8", 8))
			mp->smtputf8 = true;
	while (str_split_ws(&rest, &f)) {
		if (param_split(f, mp->smtputf8, &pm, error_r) < 0)
			return -1;
		if ((rc = mail_param(&pm, &seen, mp, error_r)) < 0)
			return rc;
	}
	return 0;
}

static int parse_notify(const struct param *pm, unsigned *notify, const char **error_r)
{
	struct str_view rest = pm->val, f;

	*notify = 0;
	while (str_split_next(&rest, ',', &f)) {
		if (str_caseeq(f.p, f.len, "NEVER", 5))
			*notify |= RCPT_NOTIFY_NEVER;
		else if (str_caseeq(f.p, f.len, "SUCCESS", 7))
			*notify |= RCPT_NOTIFY_SUCCESS;
		else if (str_caseeq(f.p, f.len, "FAILURE", 7))
			*notify |= RCPT_NOTIFY_FAILURE;
		else if (str_caseeq(f.p, f.len, "DELAY", 5))
			*notify |= RCPT_NOTIFY_DELAY;
		else
			return *error_r = "Bad NOTIFY value", -1;
	}
	if (*notify == 0 || ((*notify & RCPT_NOTIFY_NEVER) && *notify != RCPT_NOTIFY_NEVER))
		return *error_r = "Bad NOTIFY value", -1;
	return 0;
}

/* ORCPT=addr-type ";" xtext; addr-type is an atom. */
static int parse_orcpt(const struct param *pm, struct rcpt_params *rp, const char **error_r)
{
	const char *semi = memchr(pm->val.p, ';', pm->val.len);
	size_t tl = semi ? (size_t)(semi - pm->val.p) : 0;

	if (pm->val.len > RCPT_ORCPT_MAX || tl == 0 || tl >= sizeof(rp->orcpt_type))
		return *error_r = "Bad ORCPT value", -1;
	for (size_t i = 0; i < tl; i++)
		if (!is_atext((unsigned char)pm->val.p[i], 0))
			return *error_r = "Bad ORCPT address type", -1;
	memcpy(rp->orcpt_type, pm->val.p, tl);
	rp->orcpt_type[tl] = '\0';
	if (xtext_has_ctl(semi + 1, pm->val.len - tl - 1) ||
	    mailaddr_xtext_decode(semi + 1, pm->val.len - tl - 1, rp->orcpt, sizeof(rp->orcpt)) <
		    0)
		return *error_r = "Bad ORCPT value", -1;
	return 0;
}

int mailaddr_rcpt_params(const char *p, size_t len, bool utf8, struct rcpt_params *rp,
			 const char **error_r)
{
	struct str_view rest = { p, len }, f;
	struct param pm;
	unsigned seen = 0;

	memset(rp, 0, sizeof(*rp));
	*error_r = NULL;
	while (str_split_ws(&rest, &f)) {
		if (param_split(f, utf8, &pm, error_r) < 0)
			return -1;
		if (key_is(&pm, "NOTIFY")) {
			if (once(&seen, 1, error_r) < 0 || !pm.has_val ||
			    parse_notify(&pm, &rp->notify, error_r) < 0)
				return *error_r = *error_r ? *error_r : "Bad NOTIFY", -1;
		} else if (key_is(&pm, "ORCPT")) {
			if (once(&seen, 2, error_r) < 0 || !pm.has_val ||
			    parse_orcpt(&pm, rp, error_r) < 0)
				return *error_r = *error_r ? *error_r : "Bad ORCPT", -1;
		} else {
			*error_r = "Unsupported parameter";
			return MAILADDR_EUNKNOWN;
		}
	}
	return 0;
}

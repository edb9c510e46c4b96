/* resp.c — owns the SMTP reply parser, the IMAP response parser (literals kept or dropped by
 * size), the IMAP tokenizer and the FETCH item reader. */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/str.h"
#include "mailload/resp.h"

void smtp_reply_reset(struct smtp_reply *r)
{
	memset(r, 0, sizeof(*r));
	line_reader_init(&r->lr, SMTP_LINE_MAX, 0);
}

static void smtp_ext(struct smtp_reply *r, const char *kw, size_t n)
{
	if (str_caseprefix(kw, n, "PIPELINING"))
		r->ext |= SMTP_EXT_PIPELINING;
	else if (str_caseprefix(kw, n, "STARTTLS"))
		r->ext |= SMTP_EXT_STARTTLS;
	else if (str_caseprefix(kw, n, "8BITMIME"))
		r->ext |= SMTP_EXT_8BITMIME;
	else if (str_caseprefix(kw, n, "AUTH") && str_casefind(kw, n, " PLAIN", 6) != NULL)
		r->ext |= SMTP_EXT_AUTH_PLAIN;
	else if (str_caseprefix(kw, n, "AUTH=") && str_casefind(kw, n, "PLAIN", 5) != NULL)
		r->ext |= SMTP_EXT_AUTH_PLAIN;
}

static int smtp_reply_fail(struct smtp_reply *r, const char *why)
{
	str_lcpy(r->text, why, sizeof(r->text));
	return -1;
}

static bool smtp_line_ok(const char *l, size_t n)
{
	return n >= 3 && l[0] >= '2' && l[0] <= '5' && l[1] >= '0' && l[1] <= '9' && l[2] >= '0' &&
	       l[2] <= '9' && (n == 3 || l[3] == ' ' || l[3] == '-');
}

int smtp_reply_parse(struct smtp_reply *r, struct evbuffer *in)
{
	struct line ln;
	int rc;

	while ((rc = line_peek(&r->lr, in, &ln)) == 1) {
		const char *l = ln.p;
		size_t n = ln.len;

		if (!smtp_line_ok(l, n)) {
			snprintf(r->text, sizeof(r->text), "malformed reply: %.*s",
				 (int)(n > 60 ? 60 : n), l);
			return -1;
		}
		int code = (l[0] - '0') * 100 + (l[1] - '0') * 10 + (l[2] - '0');
		if (r->nlines > 0 && code != r->code)
			return smtp_reply_fail(r, "reply code changed within a reply");
		if (++r->nlines > SMTP_LINES_MAX)
			return smtp_reply_fail(r, "too many reply lines");
		const char *t = n > 4 ? l + 4 : "";
		size_t tn = n > 4 ? n - 4 : 0;
		if (r->nlines == 1) {
			r->code = code;
			snprintf(r->text, sizeof(r->text), "%.*s", (int)tn, t);
		} else {
			smtp_ext(r, t, tn);
		}
		bool last = n == 3 || l[3] == ' ';
		line_drain(in, &ln);
		if (last)
			return 1;
	}
	return rc < 0 ? smtp_reply_fail(r, "reply line too long") : 0;
}

void imap_rparser_init(struct imap_rparser *p, size_t line_max, size_t keep_max, uint64_t lit_max)
{
	memset(p, 0, sizeof(*p));
	p->line_max = line_max;
	p->keep_max = keep_max;
	p->lit_max = lit_max;
	line_reader_init(&p->lr, line_max, 0);
	buf_init(&p->line, 1024, line_max * 4 + keep_max * 2 + 64);
}

void imap_rparser_reset_input(struct imap_rparser *p)
{
	line_reader_reset(&p->lr);
}

void imap_rparser_release(struct imap_rparser *p)
{
	buf_release(&p->line);
}

/* The literal size when the line (without CRLF) ends in {n}; -1 otherwise. */
static int64_t line_literal(const char *l, size_t n)
{
	size_t i;
	uint64_t v = 0;

	if (n < 3 || l[n - 1] != '}')
		return -1;
	for (i = n - 2; i > 0 && l[i] >= '0' && l[i] <= '9'; i--)
		;
	if (l[i] != '{' || i == n - 2)
		return -1;
	if (str_to_u64(l + i + 1, n - i - 2, (uint64_t)1 << 40, &v) < 0)
		return -1;
	return (int64_t)v;
}

static int rp_fail(struct imap_rparser *p, const char *why)
{
	p->error = why;
	return -1;
}

int imap_rparser_next(struct imap_rparser *p, struct evbuffer *in)
{
	for (;;) {
		if (p->in_literal) {
			size_t have = evbuffer_get_length(in);
			size_t take = have < p->lit_left ? have : (size_t)p->lit_left;

			if (take == 0)
				return 0;
			if (p->lit_keep) {
				char *dst = buf_reserve(&p->line, take);
				if (dst == NULL)
					return rp_fail(p, "response too long");
				evbuffer_remove(in, dst, take);
				buf_commit(&p->line, take);
			} else {
				evbuffer_drain(in, take);
				p->lit_skipped += take;
			}
			p->lit_left -= take;
			if (p->lit_left > 0)
				return 0;
			p->in_literal = false;
			continue;
		}
		struct line ln;
		int rc = line_peek(&p->lr, in, &ln);
		if (rc <= 0)
			return rc < 0 ? rp_fail(p, "line too long") : 0;
		size_t start = p->line.len, n = ln.len;
		if (buf_append(&p->line, ln.p, n) < 0)
			return rp_fail(p, "response too long");
		line_drain(in, &ln);
		int64_t lit = line_literal(p->line.data + start, n);
		if (lit < 0)
			return 1; /* the response is complete; caller resets line */
		if ((uint64_t)lit > p->lit_max)
			return rp_fail(p, "literal too large");
		p->lit_total += (uint64_t)lit;
		p->lit_left = (uint64_t)lit;
		p->lit_keep = (uint64_t)lit <= p->keep_max;
		p->in_literal = lit > 0;
		if (p->lit_keep && buf_putc(&p->line, '\n') < 0)
			return rp_fail(p, "response too long");
	}
}

void itok_init(struct itok *t, const char *p, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->p = p;
	t->end = p + len;
}

static bool atom_char(char c)
{
	return c != ' ' && c != '(' && c != ')' && c != '{' && c != '"' && c != '\n' &&
	       c != '\r' && (unsigned char)c >= 0x20;
}

/* A quoted string; t->p is past the opening quote. */
static enum itok_type itok_quoted(struct itok *t)
{
	const char *q = t->p;

	while (q < t->end && *q != '"') {
		if (*q == '\\' && q + 1 < t->end)
			q++;
		q++;
	}
	if (q >= t->end)
		return t->type = IT_BAD;
	t->s = t->p;
	t->len = (size_t)(q - t->p);
	t->p = q + 1;
	return t->type = IT_STRING;
}

/* A literal as imap_rparser stores it: "{n}\n" and its bytes, or "{n}" when dropped. */
static enum itok_type itok_literal(struct itok *t)
{
	uint64_t n = 0;
	const char *q = t->p + 1;

	while (q < t->end && *q >= '0' && *q <= '9')
		n = n * 10 + (uint64_t)(*q++ - '0');
	if (q >= t->end || *q != '}')
		return t->type = IT_BAD;
	q++;
	t->literal = true;
	t->litlen = n;
	t->s = q;
	t->len = 0;
	t->p = q;
	if (q < t->end && *q == '\n') { /* kept */
		q++;
		if ((uint64_t)(t->end - q) < n)
			return t->type = IT_BAD;
		t->s = q;
		t->len = (size_t)n;
		t->p = q + n;
	}
	return t->type = IT_STRING;
}

enum itok_type itok_next(struct itok *t)
{
	t->literal = false;
	t->litlen = 0;
	while (t->p < t->end && *t->p == ' ')
		t->p++;
	if (t->p >= t->end)
		return t->type = IT_END;
	char c = *t->p;
	if (c == '(' || c == ')') {
		t->s = t->p++;
		t->len = 1;
		return t->type = c == '(' ? IT_LPAREN : IT_RPAREN;
	}
	if (c == '"') {
		t->p++;
		return itok_quoted(t);
	}
	if (c == '{')
		return itok_literal(t);
	const char *q = t->p;
	int depth = 0;
	while (q < t->end && (atom_char(*q) || (depth > 0 && *q != '\n'))) {
		if (*q == '[')
			depth++;
		else if (*q == ']' && depth > 0)
			depth--;
		q++;
	}
	if (q == t->p)
		return t->type = IT_BAD;
	t->s = t->p;
	t->len = (size_t)(q - t->p);
	t->p = q;
	if (str_caseeq(t->s, t->len, "NIL", 3))
		return t->type = IT_NIL;
	return t->type = IT_ATOM;
}

int itok_skip_value(struct itok *t)
{
	int depth = 0;

	for (;;) {
		switch (t->type) {
		case IT_LPAREN:
			depth++;
			break;
		case IT_RPAREN:
			if (--depth < 0)
				return -1;
			break;
		case IT_END:
		case IT_BAD:
			return -1;
		default:
			break;
		}
		if (depth == 0)
			return 0;
		itok_next(t);
	}
}

bool itok_is(const struct itok *t, const char *atom)
{
	return t->type == IT_ATOM && str_caseeq(t->s, t->len, atom, strlen(atom));
}

bool itok_num(const struct itok *t, uint64_t *v)
{
	return t->type == IT_ATOM && str_to_u64(t->s, t->len, UINT64_MAX, v) == 0;
}

static uint32_t flag_bit(const char *s, size_t n)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} fl[] = { { "\\Seen", FL_SEEN },         { "\\Deleted", FL_DELETED },
		   { "\\Answered", FL_ANSWERED }, { "\\Flagged", FL_FLAGGED },
		   { "\\Draft", FL_DRAFT },       { "\\Recent", FL_RECENT } };

	for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++)
		if (str_caseeq(s, n, fl[i].name, strlen(fl[i].name)))
			return fl[i].bit;
	return 0;
}

static int fetch_item(struct itok *t, struct imap_fetch *f)
{
	if (itok_is(t, "UID")) {
		itok_next(t);
		return itok_num(t, &f->uid) && f->uid > 0 ? 0 : -1;
	}
	if (itok_is(t, "RFC822.SIZE")) {
		itok_next(t);
		f->has_size = true;
		return itok_num(t, &f->size) ? 0 : -1;
	}
	if (itok_is(t, "FLAGS")) {
		if (itok_next(t) != IT_LPAREN)
			return -1;
		f->has_flags = true;
		f->flags = 0;
		while (itok_next(t) == IT_ATOM)
			f->flags |= flag_bit(t->s, t->len);
		return t->type == IT_RPAREN ? 0 : -1;
	}
	if (t->type == IT_ATOM && t->len >= 5 && str_caseprefix(t->s, t->len, "BODY[")) {
		bool header = t->len > 5 && t->s[5] != ']';
		itok_next(t);
		if (t->type == IT_ATOM && t->s[0] == '<') /* origin octet */
			itok_next(t);
		if (t->type == IT_NIL)
			return 0;
		if (t->type != IT_STRING)
			return -1;
		if (header) {
			f->hdr = t->s;
			f->hdrlen = t->len;
		} else {
			f->has_body = true;
			f->bodylen = t->literal ? t->litlen : t->len;
		}
		return 0;
	}
	if (t->type != IT_ATOM)
		return -1;
	itok_next(t); /* ENVELOPE, INTERNALDATE, anything else: skip its value */
	return itok_skip_value(t);
}

int imap_parse_fetch(const char *p, size_t len, struct imap_fetch *f)
{
	struct itok t;

	memset(f, 0, sizeof(*f));
	itok_init(&t, p, len);
	itok_next(&t);
	if (!itok_num(&t, &f->seq))
		return 0;
	itok_next(&t);
	if (!itok_is(&t, "FETCH"))
		return 0;
	if (f->seq == 0 || itok_next(&t) != IT_LPAREN)
		return -1;
	for (;;) {
		itok_next(&t);
		if (t.type == IT_RPAREN)
			return itok_next(&t) == IT_END ? 1 : -1;
		if (fetch_item(&t, f) < 0)
			return -1;
	}
}

size_t hdr_find(const char *hdr, size_t len, const char *name, const char **val_r)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i + nl < len;) {
		const char *l = hdr + i, *e = memchr(l, '\n', len - i);
		size_t ll = e ? (size_t)(e - l) : len - i;

		if (ll > nl && l[nl] == ':' && str_caseeq(l, nl, name, nl)) {
			const char *v = l + nl + 1;
			size_t vl = ll - nl - 1;
			while (vl > 0 && (*v == ' ' || *v == '\t'))
				v++, vl--;
			while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
				vl--;
			*val_r = v;
			return vl;
		}
		i += ll + 1;
	}
	return 0;
}

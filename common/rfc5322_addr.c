/* rfc5322_addr.c — owns address-list parsing (RFC 5322 section 3.4 and the obsolete forms of
 * section 4.4): display names as phrases or quoted strings, angle addresses with obsolete
 * routes, groups, comments (a comment names a bare addr-spec), quoted local parts (unquoted,
 * as ENVELOPE's mailbox name gives them). Garbage yields best-effort entries; text is
 * truncated at ACC_MAX per item. Works on fixed buffers on the stack: no allocation. */
#include <string.h>

#include "common/rfc5322.h"

#define ACC_MAX 1024

struct acc {
	char d[ACC_MAX];
	size_t n;
	bool space; /* a space is due before the next word */
};

struct addr_state {
	const char *p;
	size_t len, i;
	struct acc phrase, local, domain, route, comment;
	bool have_at, in_group, done;
	void (*cb)(void *ctx, const struct rfc5322_addr *a);
	void *ctx;
	size_t count;
};

static void acc_add(struct acc *a, const char *s, size_t n)
{
	if (a->space && a->n > 0 && a->n < ACC_MAX)
		a->d[a->n++] = ' ';
	a->space = false;
	if (n > ACC_MAX - a->n)
		n = ACC_MAX - a->n;
	memcpy(a->d + a->n, s, n);
	a->n += n;
}

static struct str_view acc_view(const struct acc *a)
{
	struct str_view v = { a->d, a->n };

	return v;
}

static bool is_special(char c)
{
	return strchr("()<>[]:;@\\,.\"", c) != NULL || c == ' ' || c == '\t' || c == '\r' ||
	       c == '\n';
}

static void reset_item(struct addr_state *s)
{
	s->phrase.n = s->local.n = s->domain.n = s->route.n = s->comment.n = 0;
	s->phrase.space = s->local.space = s->domain.space = false;
	s->have_at = s->done = false;
}

static void emit(struct addr_state *s, const struct rfc5322_addr *a)
{
	s->count++;
	s->cb(s->ctx, a);
}

static void emit_mailbox(struct addr_state *s, bool angle)
{
	struct rfc5322_addr a = { 0 };

	if (!angle && s->local.n == 0 && s->domain.n == 0)
		return;
	a.name = acc_view(s->phrase.n > 0 && angle ? &s->phrase : &s->comment);
	a.route = acc_view(&s->route);
	a.mailbox = acc_view(&s->local);
	a.domain = acc_view(&s->domain);
	emit(s, &a);
	reset_item(s);
	s->done = true;
}

/* A comment at s->i; its text (nested parentheses kept, escapes resolved) goes to comment. */
static void read_comment(struct addr_state *s)
{
	int depth = 0;

	s->comment.space = s->comment.n > 0;
	for (; s->i < s->len; s->i++) {
		char c = s->p[s->i];

		if (c == '\\' && s->i + 1 < s->len) {
			acc_add(&s->comment, &s->p[++s->i], 1);
			continue;
		}
		if (c == '(' && depth++ == 0)
			continue;
		if (c == ')' && --depth == 0) {
			s->i++;
			break;
		}
		acc_add(&s->comment, &c, 1);
	}
}

/* A quoted string at s->i, unescaped: into the phrase (outside angle brackets) and into the
   local part or domain (unquoted there too: ENVELOPE gives the bare name). */
static void read_quoted(struct addr_state *s, bool in_angle)
{
	struct acc *to = s->have_at ? &s->domain : &s->local;

	for (s->i++; s->i < s->len && s->p[s->i] != '"'; s->i++) {
		if (s->p[s->i] == '\\' && s->i + 1 < s->len)
			s->i++;
		if (s->p[s->i] == '\r' || s->p[s->i] == '\n')
			continue;
		if (!in_angle)
			acc_add(&s->phrase, &s->p[s->i], 1);
		acc_add(to, &s->p[s->i], 1);
	}
	if (s->i < s->len)
		s->i++;
}

static void read_domain_literal(struct addr_state *s)
{
	size_t start = s->i;

	while (s->i < s->len && s->p[s->i] != ']')
		s->i++;
	if (s->i < s->len)
		s->i++;
	acc_add(&s->domain, s->p + start, s->i - start);
}

static void skip_ws(struct addr_state *s)
{
	while (s->i < s->len && strchr(" \t\r\n", s->p[s->i]) != NULL && s->p[s->i] != '\0')
		s->i++;
}

/* '<' [route ':'] local '@' domain '>' */
static void read_angle(struct addr_state *s)
{
	s->i++;
	s->local.n = s->domain.n = 0;
	s->have_at = false;
	skip_ws(s);
	if (s->i < s->len && s->p[s->i] == '@') {
		while (s->i < s->len && s->p[s->i] != ':' && s->p[s->i] != '>') {
			if (strchr(" \t\r\n", s->p[s->i]) == NULL)
				acc_add(&s->route, &s->p[s->i], 1);
			s->i++;
		}
		if (s->i < s->len && s->p[s->i] == ':')
			s->i++;
	}
	while (s->i < s->len && s->p[s->i] != '>') {
		char c = s->p[s->i];

		if (c == '"') {
			read_quoted(s, true);
		} else if (c == '@' && !s->have_at) {
			s->have_at = true;
			s->i++;
		} else if (c == '(') {
			read_comment(s);
		} else if (c == '[' && s->have_at) {
			read_domain_literal(s);
		} else {
			if (strchr(" \t\r\n", c) == NULL)
				acc_add(s->have_at ? &s->domain : &s->local, &c, 1);
			s->i++;
		}
	}
	if (s->i < s->len)
		s->i++;
	emit_mailbox(s, true);
}

static void read_atom(struct addr_state *s)
{
	size_t start = s->i;

	while (s->i < s->len && (!is_special(s->p[s->i]) || s->p[s->i] == '.'))
		s->i++;
	if (s->i == start) { /* a stray special */
		s->i++;
		return;
	}
	if (s->have_at) {
		acc_add(&s->domain, s->p + start, s->i - start);
		return;
	}
	s->phrase.space = s->phrase.n > 0;
	acc_add(&s->phrase, s->p + start, s->i - start);
	acc_add(&s->local, s->p + start, s->i - start);
}

static void end_group(struct addr_state *s)
{
	struct rfc5322_addr a = { 0 };

	a.is_group_end = true;
	emit(s, &a);
	s->in_group = false;
}

static void step(struct addr_state *s)
{
	char c = s->p[s->i];

	if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
		s->i++;
	} else if (c == '(') {
		read_comment(s);
	} else if (s->done && c != ',' && c != ';') {
		s->i++; /* trailing garbage after a complete mailbox */
	} else if (c == '"') {
		s->phrase.space = s->phrase.n > 0;
		read_quoted(s, false);
	} else if (c == '<') {
		read_angle(s);
	} else if (c == ':' && !s->in_group && !s->have_at) {
		struct rfc5322_addr a = { 0 };

		a.name = acc_view(&s->phrase);
		a.is_group_start = true;
		emit(s, &a);
		reset_item(s);
		s->in_group = true;
		s->i++;
	} else if (c == ';' || c == ',') {
		if (!s->done)
			emit_mailbox(s, false);
		if (c == ';' && s->in_group)
			end_group(s);
		reset_item(s);
		s->i++;
	} else if (c == '@' && !s->have_at) {
		s->have_at = true;
		s->i++;
	} else if (c == '[' && s->have_at) {
		read_domain_literal(s);
	} else {
		read_atom(s);
	}
}

size_t rfc5322_addr_parse(const char *p, size_t len,
			  void (*cb)(void *ctx, const struct rfc5322_addr *a), void *ctx)
{
	struct addr_state s;

	memset(&s, 0, sizeof(s));
	s.p = p;
	s.len = len;
	s.cb = cb;
	s.ctx = ctx;
	while (s.i < s.len)
		step(&s);
	if (!s.done)
		emit_mailbox(&s, false);
	if (s.in_group)
		end_group(&s);
	return s.count;
}

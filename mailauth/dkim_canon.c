/* dkim_canon.c — DKIM's canonicalizations (RFC 6376 3.4): header fields simple or relaxed,
 * and the streaming body canonicalizer with its hash, its l= limit and its length count. */
#include <string.h>

#include "mailauth/dkim.h"

static bool wsp(char c)
{
	return c == ' ' || c == '\t';
}

int dkim_canon_header(enum dkim_canon c, const char *raw, size_t len, struct buf *out)
{
	const char *colon;
	size_t nlen, i;
	bool space = false, started = false;

	if (c == DKIM_SIMPLE)
		return buf_append(out, raw, len);
	if ((colon = memchr(raw, ':', len)) == NULL)
		return 0; /* not a field: nothing to sign or verify */
	nlen = (size_t)(colon - raw);
	while (nlen > 0 && wsp(raw[nlen - 1]))
		nlen--;
	char *name = buf_reserve(out, nlen + 1);
	if (name == NULL)
		return -1;
	for (i = 0; i < nlen; i++)
		name[i] = (char)(raw[i] >= 'A' && raw[i] <= 'Z' ? raw[i] + 32 : raw[i]);
	name[nlen] = ':';
	buf_commit(out, nlen + 1);
	for (i = (size_t)(colon - raw) + 1; i < len; i++) {
		char ch = raw[i];

		if (ch == '\r' || ch == '\n')
			continue; /* unfolded */
		if (wsp(ch)) {
			space = started;
			continue;
		}
		if (space && buf_putc(out, ' ') < 0)
			return -1;
		space = false;
		started = true;
		if (buf_putc(out, ch) < 0)
			return -1;
	}
	return buf_append(out, "\r\n", 2);
}

void dkim_body_init(struct dkim_body *b, enum dkim_canon c, EVP_MD_CTX *md, uint64_t limit)
{
	memset(b, 0, sizeof(*b));
	b->canon = c;
	b->md = md;
	b->limit = limit;
}

static void out(struct dkim_body *b, const char *p, size_t n)
{
	b->total += n;
	if (b->md == NULL || b->hashed >= b->limit)
		return;
	if (n > b->limit - b->hashed)
		n = (size_t)(b->limit - b->hashed);
	EVP_DigestUpdate(b->md, p, n);
	b->hashed += n;
}

/* Content on the current line: the empty lines held before it are real after all. */
static void content(struct dkim_body *b)
{
	for (; b->empty_lines > 0; b->empty_lines--)
		out(b, "\r\n", 2);
	if (b->wsp) {
		out(b, " ", 1);
		b->wsp = false;
	}
	b->line = true;
}

static void line_end(struct dkim_body *b)
{
	b->wsp = false; /* relaxed: trailing white space goes */
	if (b->line)
		out(b, "\r\n", 2);
	else
		b->empty_lines++;
	b->line = false;
}

void dkim_body_feed(struct dkim_body *b, const char *p, size_t n)
{
	bool relaxed = b->canon == DKIM_RELAXED;
	size_t i = 0;

	while (i < n) {
		char c = p[i];

		if (b->cr) {
			b->cr = false;
			if (c == '\n') {
				line_end(b);
				i++;
				continue;
			}
			content(b); /* a lone CR is content */
			out(b, "\r", 1);
		}
		if (c == '\r') {
			b->cr = true;
			i++;
			continue;
		}
		if (c == '\n') { /* a bare LF ends a line as well */
			line_end(b);
			i++;
			continue;
		}
		if (relaxed && wsp(c)) {
			b->wsp = true;
			i++;
			continue;
		}
		/* a run of plain bytes goes out at once */
		size_t j = i + 1;
		while (j < n && p[j] != '\r' && p[j] != '\n' && !(relaxed && wsp(p[j])))
			j++;
		content(b);
		out(b, p + i, j - i);
		i = j;
	}
}

void dkim_body_end(struct dkim_body *b)
{
	if (b->cr) {
		b->cr = false;
		content(b);
		out(b, "\r", 1);
	}
	if (b->line)
		line_end(b);
	if (b->canon == DKIM_SIMPLE && b->total == 0)
		out(b, "\r\n", 2);
	b->empty_lines = 0;
}

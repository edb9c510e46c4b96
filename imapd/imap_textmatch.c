/* imap_textmatch.c — owns SEARCH's text comparison on decoded text: a message file is
 * streamed through the MIME parser (rfc5322.h) in fixed chunks, each leaf body decoded from
 * base64 or quoted-printable, its charset (UTF-8, US-ASCII, ISO-8859-1) brought to UTF-8,
 * case-folded and matched with a window of the needle's length across chunks; header fields
 * have their RFC 2047 encoded words decoded. Memory is bounded by the chunk size, the parser's
 * fixed limits and the needle: a body is never held whole. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define TM_CHUNK (64 * 1024)
#define TM_WORD_MAX (64 * 1024) /* one RFC 2047 encoded word, decoded */

struct imap_textmatch {
	struct rfc5322_parser *parser;
	const char *needle;
	size_t nlen;
	bool top;                  /* TEXT: the message's own header fields count too */
	bool found;
	/* the current leaf */
	struct imap_decoder decoder; /* its transfer decoding, across chunks */
	bool latin1;
	char carry[4];             /* an incomplete UTF-8 sequence at a chunk's end */
	unsigned ncarry;
	struct buf win;            /* the window: the last nlen - 1 folded bytes, then new text */
	struct buf dec, tmp;       /* scratch, bounded by the chunk */
	/* PREVIEW (imap_text_preview): the first text/plain or text/html leaf, not attached */
	struct buf *preview;       /* NULL: matching */
	bool pv_leaf;              /* this leaf is the preview's */
	bool pv_attached;          /* its Content-Disposition says attachment */
	bool pv_html, pv_in_tag, pv_space;
	size_t pv_chars;
};

/* ---- case folding: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic capitals, which
   keep their UTF-8 length, so text is folded in place ---- */

static uint32_t fold_cp(uint32_t c)
{
	if (c >= 'A' && c <= 'Z')
		return c + 32;
	if (c < 0xc0)
		return c;
	if (c <= 0xde && c != 0xd7)
		return c + 32;
	if (c >= 0x100 && c <= 0x17f) {
		if ((c <= 0x137 && c != 0x130) || (c >= 0x14a && c <= 0x177))
			return c | 1; /* pairs: even capital, odd small */
		if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e))
			return c & 1 ? c + 1 : c;
		if (c == 0x178)
			return 0xff;
		return c;
	}
	if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2)
		return c + 32;
	if (c >= 0x410 && c <= 0x42f)
		return c + 32;
	if (c >= 0x400 && c <= 0x40f)
		return c + 80;
	return c;
}

/* Length of the UTF-8 sequence led by b (1 for a byte that leads none). */
static unsigned seq_len(unsigned char b)
{
	return b >= 0xf0 && b < 0xf8 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
}

/* Folds s[0..len) in place; returns how many bytes at the end form an incomplete sequence
   (left unfolded). */
static size_t fold_run(char *s, size_t len)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned n = seq_len(p[i]);
		uint32_t c, f;

		if (n == 1) {
			if (p[i] >= 'A' && p[i] <= 'Z')
				p[i] = (unsigned char)(p[i] + 32);
			i++;
			continue;
		}
		if (i + n > len)
			return len - i;
		if (n != 2 && n != 3) {
			i += n;
			continue;
		}
		c = n == 2 ? (uint32_t)(p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f)
			   : (uint32_t)(p[i] & 0x0f) << 12 | (uint32_t)(p[i + 1] & 0x3f) << 6 |
				     (p[i + 2] & 0x3f);
		if ((f = fold_cp(c)) != c) {
			if (n == 2) {
				p[i] = (unsigned char)(0xc0 | f >> 6);
				p[i + 1] = (unsigned char)(0x80 | (f & 0x3f));
			} else {
				p[i] = (unsigned char)(0xe0 | f >> 12);
				p[i + 1] = (unsigned char)(0x80 | ((f >> 6) & 0x3f));
				p[i + 2] = (unsigned char)(0x80 | (f & 0x3f));
			}
		}
		i += n;
	}
	return 0;
}

size_t imap_text_fold(char *s, size_t len)
{
	fold_run(s, len);
	return len;
}

/* ---- charsets ---- */

static bool charset_latin1(const char *cs, size_t len)
{
	return str_caseeq(cs, len, "ISO-8859-1", 10) || str_caseeq(cs, len, "latin1", 6) ||
	       str_caseeq(cs, len, "windows-1252", 12) || str_caseeq(cs, len, "ISO_8859-1", 10);
}

/* Appends text in the charset to out as UTF-8 (Latin-1 converted, anything else as is). */
static void to_utf8(const char *p, size_t len, bool latin1, struct buf *out)
{
	if (!latin1) {
		buf_append(out, p, len);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char b = (unsigned char)p[i];

		if (b < 0x80) {
			buf_putc(out, (char)b);
		} else {
			buf_putc(out, (char)(0xc0 | b >> 6));
			buf_putc(out, (char)(0x80 | (b & 0x3f)));
		}
	}
}

/* ---- transfer decoding ---- */

/* Decodes a chunk onto the end of out (bounded: out's ceiling leaves room for a chunk). */
static void decode_to(struct imap_decoder *d, const char *p, size_t len, struct buf *out)
{
	char *dst = buf_reserve(out, len + IMAP_DECODE_LEAD);

	if (dst != NULL)
		buf_commit(out, imap_decode(d, p, len, dst));
}

/* ---- matching ---- */

/* Feeds UTF-8 text of the current leaf to the window and looks for the needle. */
static void match_feed(struct imap_textmatch *tm, const char *p, size_t len)
{
	struct buf *w = &tm->win;
	size_t start = w->len, keep, inc;

	buf_append(w, tm->carry, tm->ncarry);
	buf_append(w, p, len);
	tm->ncarry = 0;
	inc = fold_run(w->data + start, w->len - start);
	if (inc > 0) {
		memcpy(tm->carry, w->data + w->len - inc, inc);
		tm->ncarry = (unsigned)inc;
		buf_truncate(w, w->len - inc);
	}
	if (w->len >= tm->nlen && memmem(w->data, w->len, tm->needle, tm->nlen) != NULL) {
		tm->found = true;
		return;
	}
	keep = w->len < tm->nlen - 1 ? w->len : tm->nlen - 1;
	buf_consume(w, w->len - keep);
}

/* One encoded word "=?charset?B|Q?text?=" at p (len bytes available): its length, and its
   text decoded to UTF-8 appended to out; 0 when p is not one. */
static size_t encoded_word(const char *p, size_t len, struct buf *out)
{
	const char *cs, *q1, *q2, *end;
	char e;
	struct buf raw;
	struct imap_decoder b64;

	if (len < 8 || p[0] != '=' || p[1] != '?')
		return 0;
	cs = p + 2;
	if ((q1 = memchr(cs, '?', len - 2)) == NULL || q1 + 3 >= p + len || q1[2] != '?')
		return 0;
	e = (char)(q1[1] | 0x20);
	if (e != 'b' && e != 'q')
		return 0;
	if ((end = memmem(q1 + 3, (size_t)(p + len - (q1 + 3)), "?=", 2)) == NULL)
		return 0;
	q2 = q1 + 3;
	buf_init(&raw, 64, TM_WORD_MAX);
	if (e == 'b') {
		imap_decoder_init(&b64, IMAP_CTE_BASE64);
		decode_to(&b64, q2, (size_t)(end - q2), &raw);
	} else {
		for (const char *s = q2; s < end; s++) {
			if (*s == '_')
				buf_putc(&raw, ' ');
			else if (*s == '=' && end - s >= 3 && imap_hex_val(s[1]) >= 0 &&
				 imap_hex_val(s[2]) >= 0) {
				buf_putc(&raw, (char)(imap_hex_val(s[1]) << 4 | imap_hex_val(s[2])));
				s += 2;
			} else
				buf_putc(&raw, *s);
		}
	}
	{
		/* RFC 2231 language suffix: "charset*lang" */
		const char *star = memchr(cs, '*', (size_t)(q1 - cs));
		size_t cslen = (size_t)((star != NULL ? star : q1) - cs);

		to_utf8(raw.data != NULL ? raw.data : "", raw.len, charset_latin1(cs, cslen), out);
	}
	buf_release(&raw);
	return (size_t)(end + 2 - p);
}

void imap_text_decode_words(const char *p, size_t len, struct buf *out)
{
	size_t i = 0, gap_start = 0;
	bool after_word = false;

	while (i < len) {
		size_t n = p[i] == '=' ? encoded_word(p + i, len - i, out) : 0;

		if (n > 0) {
			/* white space between two encoded words is dropped (RFC 2047 6.2) */
			i += n;
			after_word = true;
			gap_start = out->len;
			continue;
		}
		if (after_word && (p[i] == ' ' || p[i] == '\t')) {
			size_t j = i;

			while (j < len && (p[j] == ' ' || p[j] == '\t'))
				j++;
			if (j < len && p[j] == '=' && encoded_word(p + j, len - j, out) > 0) {
				buf_truncate(out, gap_start); /* only probing: undo */
				i = j;
				continue;
			}
		}
		after_word = false;
		buf_putc(out, p[i++]);
	}
}

/* Whether the folded needle is in header text p (unfolded), its RFC 2047 encoded words
   decoded into out (scratch). */
static bool field_matches(const char *p, size_t len, const char *needle, size_t nlen,
			  struct buf *out)
{
	buf_reset(out);
	imap_text_decode_words(p, len, out);
	if (out->len < nlen)
		return nlen == 0;
	fold_run(out->data, out->len);
	return memmem(out->data, out->len, needle, nlen) != NULL;
}

bool imap_text_field_contains(const char *raw, size_t len, const char *needle, size_t nlen)
{
	struct buf out, unfolded;
	bool r;

	if (nlen == 0)
		return true;
	buf_init(&out, 256, IMAP_HEADER_READ_MAX);
	buf_init(&unfolded, 256, IMAP_HEADER_READ_MAX);
	rfc5322_unfold(raw, len, &unfolded);
	r = unfolded.len > 0 &&
	    field_matches(unfolded.data, unfolded.len, needle, nlen, &out);
	buf_release(&out);
	buf_release(&unfolded);
	return r;
}

/* ---- the parser's callbacks ---- */

static void cb_part_begin(void *ctx, const struct rfc5322_part *p)
{
	struct imap_textmatch *tm = ctx;

	(void)p;
	imap_decoder_init(&tm->decoder, IMAP_CTE_IDENTITY);
	tm->latin1 = false;
	tm->pv_attached = false;
	if (tm->preview != NULL && tm->pv_leaf) /* the preview's leaf ended */
		tm->found = true;
}

/* Adds decoded UTF-8 text of the preview's leaf: white space runs as one space, HTML tags
   skipped, up to IMAP_PREVIEW_CHARS characters (RFC 8970 3: at most 256 octets). */
static void preview_feed(struct imap_textmatch *tm, const char *p, size_t len)
{
	struct buf *out = tm->preview;

	for (size_t i = 0; i < len && !tm->found; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (tm->pv_html && (ch == '<' || tm->pv_in_tag)) {
			tm->pv_in_tag = ch != '>';
			continue;
		}
		if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch < 0x20) {
			tm->pv_space = out->len > 0;
			continue;
		}
		if ((ch & 0xc0) != 0x80) { /* a character starts */
			if (tm->pv_chars + tm->pv_space >= IMAP_PREVIEW_CHARS ||
			    out->len + 4 + tm->pv_space > 256) {
				tm->found = true;
				break;
			}
			if (tm->pv_space)
				buf_putc(out, ' ');
			tm->pv_chars += 1u + tm->pv_space;
			tm->pv_space = false;
		}
		buf_putc(out, (char)ch);
	}
}

static void cb_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f)
{
	struct imap_textmatch *tm = ctx;

	if (tm->found)
		return;
	if (tm->preview != NULL) {
		if (str_caseeq(f->name.p, f->name.len, "Content-Disposition", 19) &&
		    str_caseprefix(f->value.p, f->value.len, "attachment"))
			tm->pv_attached = true;
		if (!str_caseeq(f->name.p, f->name.len, "Content-Transfer-Encoding", 25))
			return;
	}
	if (str_caseeq(f->name.p, f->name.len, "Content-Transfer-Encoding", 25)) {
		enum imap_cte cte = imap_cte_parse(f->value.p, f->value.len);

		/* an unknown encoding is searched as it stands */
		imap_decoder_init(&tm->decoder, cte == IMAP_CTE_UNKNOWN ? IMAP_CTE_IDENTITY : cte);
	}
	if (p->index == 0 && !tm->top)
		return;
	if (tm->preview != NULL)
		return;
	/* the header fields of parts and embedded messages are text of the body */
	if (field_matches(f->name.p, f->name.len, tm->needle, tm->nlen, &tm->dec) ||
	    field_matches(f->value.p, f->value.len, tm->needle, tm->nlen, &tm->dec))
		tm->found = true;
}

static void cb_header_end(void *ctx, const struct rfc5322_part *p)
{
	struct imap_textmatch *tm = ctx;
	const struct rfc5322_ctype *ct = p->ctype;

	buf_reset(&tm->win); /* a match does not span parts */
	imap_decoder_init(&tm->decoder, tm->decoder.cte);
	tm->ncarry = 0;
	if (ct == NULL || !p->is_text)
		return;
	if (tm->preview != NULL && !tm->pv_leaf && !tm->pv_attached &&
	    p->kind != RFC5322_MULTIPART &&
	    (str_caseeq(ct->subtype.p, ct->subtype.len, "plain", 5) ||
	     str_caseeq(ct->subtype.p, ct->subtype.len, "html", 4))) {
		tm->pv_leaf = true;
		tm->pv_html = str_caseeq(ct->subtype.p, ct->subtype.len, "html", 4);
	}
	for (unsigned i = 0; i < ct->nparams; i++)
		if (str_caseeq(ct->params[i].name.p, ct->params[i].name.len, "charset", 7))
			tm->latin1 = charset_latin1(ct->params[i].value.p, ct->params[i].value.len);
}

static void cb_body(void *ctx, const struct rfc5322_part *p, const char *data, size_t len,
		    uint64_t off)
{
	struct imap_textmatch *tm = ctx;

	(void)p;
	(void)off;
	if (tm->found || (tm->preview != NULL && !tm->pv_leaf))
		return;
	buf_reset(&tm->dec);
	buf_reset(&tm->tmp);
	decode_to(&tm->decoder, data, len, &tm->dec);
	to_utf8(tm->dec.data != NULL ? tm->dec.data : "", tm->dec.len, tm->latin1, &tm->tmp);
	if (tm->preview != NULL)
		preview_feed(tm, tm->tmp.data != NULL ? tm->tmp.data : "", tm->tmp.len);
	else
		match_feed(tm, tm->tmp.data != NULL ? tm->tmp.data : "", tm->tmp.len);
}

static const struct rfc5322_callbacks tm_callbacks = {
	.part_begin = cb_part_begin,
	.field = cb_field,
	.header_end = cb_header_end,
	.body = cb_body,
};

struct imap_textmatch *imap_textmatch_new(void)
{
	struct imap_textmatch *tm = xcalloc(1, sizeof(*tm));

	tm->parser = rfc5322_parser_new(NULL, &tm_callbacks, tm);
	/* a chunk decodes to at most its size, doubled by Latin-1, plus the window */
	buf_init(&tm->win, 1024, 4 * TM_CHUNK + 64 * 1024);
	buf_init(&tm->dec, 1024, 4 * TM_CHUNK + 64 * 1024);
	buf_init(&tm->tmp, 1024, 4 * TM_CHUNK + 64 * 1024);
	return tm;
}

void imap_textmatch_free(struct imap_textmatch **tmp)
{
	struct imap_textmatch *tm = *tmp;

	if (tm == NULL)
		return;
	rfc5322_parser_free(&tm->parser);
	buf_release(&tm->win);
	buf_release(&tm->dec);
	buf_release(&tm->tmp);
	free(tm);
	*tmp = NULL;
}

/* Streams the file through the parser until tm->found. */
static void textmatch_stream(struct imap_textmatch *tm, int fd, uint64_t size)
{
	char *chunk;
	uint64_t off = 0;

	buf_reset(&tm->win);
	rfc5322_parser_reset(tm->parser);
	chunk = xmalloc(TM_CHUNK);
	while (off < size && !tm->found) {
		size_t want = size - off < TM_CHUNK ? (size_t)(size - off) : TM_CHUNK;
		ssize_t n = pread(fd, chunk, want, (off_t)off);

		if (n <= 0)
			break;
		rfc5322_parser_push(tm->parser, chunk, (size_t)n);
		off += (uint64_t)n;
	}
	if (!tm->found)
		rfc5322_parser_finish(tm->parser);
	free(chunk);
}

bool imap_textmatch_file(struct imap_textmatch *tm, int fd, uint64_t size, const char *needle,
			 size_t nlen, bool top)
{
	if (nlen == 0)
		return true;
	tm->needle = needle;
	tm->nlen = nlen;
	tm->top = top;
	tm->found = false;
	tm->preview = NULL;
	textmatch_stream(tm, fd, size);
	return tm->found;
}

bool imap_text_preview(int fd, uint64_t size, struct buf *out)
{
	struct imap_textmatch *tm = imap_textmatch_new();
	bool any;

	tm->preview = out;
	textmatch_stream(tm, fd, size);
	any = tm->pv_leaf;
	imap_textmatch_free(&tm);
	return any;
}

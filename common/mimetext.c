/* mimetext.c — owns a message's searchable text (mimetext.h): the MIME walk, transfer
 * decoding through cte.c, charsets to UTF-8 (tables for Latin-1 and windows-1252, iconv for
 * the others), case folding, and RFC 2047 encoded words in header fields. */
#include <errno.h>
#include <iconv.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cte.h"
#include "common/mimetext.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"

#define MT_CHUNK (64 * 1024)    /* file reads */
#define MT_PIECE (16 * 1024)    /* body bytes decoded at once */
#define MT_WORD_MAX (64 * 1024) /* one RFC 2047 encoded word, decoded */
#define MT_SCRATCH_MAX (4 * MT_PIECE + 4096)
#define MT_CHARSET_MAX 64

enum mt_charset { CS_UTF8, CS_LATIN1, CS_CP1252, CS_ICONV };

/* A charset converter: state across the pieces of one leaf. */
struct mt_conv {
	enum mt_charset cs;
	iconv_t cd; /* CS_ICONV: for name (kept for the next leaf) */
	char name[MT_CHARSET_MAX];
	char pend[8]; /* a multibyte sequence cut by a piece's end */
	size_t npend;
};

struct mimetext {
	struct mimetext_opts o;
	mimetext_cb *cb;
	void *arg;
	struct rfc5322_parser *parser;
	bool stopped;
	/* the current part */
	struct cte_decoder dec;
	struct mt_conv conv;
	struct mimetext_leaf leaf;
	bool in_text;   /* the current leaf's body is text */
	bool run_start; /* the next body piece starts a run */
	char carry[4];  /* an incomplete UTF-8 sequence at a piece's end */
	unsigned ncarry;
	struct buf raw, utf, field;
	char *chunk; /* mimetext_file's reads */
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

static void fold_seq(unsigned char *p, unsigned n)
{
	uint32_t c, f;

	c = n == 2 ? (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f)
		   : (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
	if ((f = fold_cp(c)) == c)
		return;
	if (n == 2) {
		p[0] = (unsigned char)(0xc0 | f >> 6);
		p[1] = (unsigned char)(0x80 | (f & 0x3f));
	} else {
		p[0] = (unsigned char)(0xe0 | f >> 12);
		p[1] = (unsigned char)(0x80 | ((f >> 6) & 0x3f));
		p[2] = (unsigned char)(0x80 | (f & 0x3f));
	}
}

size_t mimetext_fold(char *s, size_t len)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned n;

		if (p[i] < 0x80) {
			if (p[i] >= 'A' && p[i] <= 'Z')
				p[i] = (unsigned char)(p[i] + 32);
			i++;
			continue;
		}
		n = seq_len(p[i]);
		if (i + n > len)
			return len - i;
		if (n == 2 || n == 3)
			fold_seq(p + i, n);
		i += n;
	}
	return 0;
}

/* ---- charsets ---- */

/* windows-1252's 0x80-0x9f (0: unassigned, kept as U+0080-style Latin-1 would) */
static const uint16_t cp1252_hi[32] = {
	0x20ac, 0,      0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160,
	0x2039, 0x0152, 0,      0x017d, 0,      0,      0x2018, 0x2019, 0x201c, 0x201d, 0x2022,
	0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0,      0x017e, 0x0178,
};

static enum mt_charset charset_kind(const char *cs, size_t len)
{
	if (len == 0 || str_caseeq(cs, len, "UTF-8", 5) || str_caseeq(cs, len, "utf8", 4) ||
	    str_caseeq(cs, len, "US-ASCII", 8) || str_caseeq(cs, len, "ascii", 5))
		return CS_UTF8;
	if (str_caseeq(cs, len, "ISO-8859-1", 10) || str_caseeq(cs, len, "latin1", 6) ||
	    str_caseeq(cs, len, "ISO_8859-1", 10) || str_caseeq(cs, len, "ISO8859-1", 9))
		return CS_LATIN1;
	if (str_caseeq(cs, len, "windows-1252", 12) || str_caseeq(cs, len, "cp1252", 6))
		return CS_CP1252;
	return CS_ICONV;
}

static void conv_close(struct mt_conv *c)
{
	if (c->cd != (iconv_t)-1)
		iconv_close(c->cd);
	c->cd = (iconv_t)-1;
	c->name[0] = '\0';
}

/* Sets the converter for a leaf in charset cs (len bytes); an unknown one is CS_UTF8 (the
   bytes as they are). */
static void conv_set(struct mt_conv *c, const char *cs, size_t len)
{
	c->npend = 0;
	c->cs = charset_kind(cs, len);
	if (c->cs != CS_ICONV)
		return;
	if (len >= sizeof(c->name)) {
		c->cs = CS_UTF8;
		return;
	}
	if (c->cd != (iconv_t)-1 && strlen(c->name) == len && strncasecmp(c->name, cs, len) == 0) {
		iconv(c->cd, NULL, NULL, NULL, NULL); /* initial shift state */
		return;
	}
	conv_close(c);
	memcpy(c->name, cs, len);
	c->name[len] = '\0';
	if ((c->cd = iconv_open("UTF-8", c->name)) == (iconv_t)-1) {
		c->name[0] = '\0';
		c->cs = CS_UTF8;
	}
}

/* Converts through iconv; an invalid byte is skipped, a sequence cut at the end is kept in
   pend for the next piece. */
static void conv_iconv(struct mt_conv *c, const char *p, size_t len, struct buf *out)
{
	char tmp[MT_PIECE + sizeof(c->pend)];
	char *in = tmp;
	size_t inleft;

	if (len > MT_PIECE)
		len = MT_PIECE; /* callers pass pieces of at most MT_PIECE */
	memcpy(tmp, c->pend, c->npend);
	memcpy(tmp + c->npend, p, len);
	inleft = c->npend + len;
	c->npend = 0;
	while (inleft > 0) {
		size_t room = inleft * 4 + 16;
		char *dst = buf_reserve(out, room), *o = dst;
		size_t oleft = room;
		size_t r;

		if (dst == NULL)
			return;
		r = iconv(c->cd, &in, &inleft, &o, &oleft);
		buf_commit(out, (size_t)(o - dst));
		if (r != (size_t)-1)
			break;
		if (errno == EINVAL) { /* incomplete: wait for the rest */
			if (inleft <= sizeof(c->pend)) {
				memcpy(c->pend, in, inleft);
				c->npend = inleft;
			}
			break;
		}
		if (errno == EILSEQ) {
			in++;
			inleft--;
		} else if (errno != E2BIG) {
			break;
		}
	}
}

static void conv_run(struct mt_conv *c, const char *p, size_t len, struct buf *out)
{
	switch (c->cs) {
	case CS_UTF8:
		buf_append(out, p, len);
		return;
	case CS_ICONV:
		conv_iconv(c, p, len, out);
		return;
	case CS_LATIN1:
	case CS_CP1252:
		for (size_t i = 0; i < len; i++) {
			unsigned char b = (unsigned char)p[i];

			if (b < 0x80)
				buf_putc(out, (char)b);
			else if (c->cs == CS_CP1252 && b < 0xa0 && cp1252_hi[b - 0x80] != 0)
				buf_put_utf8(out, cp1252_hi[b - 0x80]);
			else
				buf_put_utf8(out, b);
		}
		return;
	}
}

/* Text in charset cs (a whole string: an encoded word) appended to out as UTF-8. */
static void charset_to_utf8(const char *cs, size_t cslen, const char *p, size_t len,
			    struct buf *out)
{
	struct mt_conv c = { .cd = (iconv_t)-1 };

	conv_set(&c, cs, cslen);
	while (len > 0) {
		size_t n = len < MT_PIECE ? len : MT_PIECE;

		conv_run(&c, p, n, out);
		p += n;
		len -= n;
	}
	conv_close(&c);
}

/* ---- RFC 2047 encoded words ---- */

static void decode_q(const char *s, const char *end, struct buf *raw)
{
	for (; s < end; s++) {
		if (*s == '_')
			buf_putc(raw, ' ');
		else if (*s == '=' && end - s >= 3 && str_hex_digit((unsigned char)s[1]) >= 0 &&
			 str_hex_digit((unsigned char)s[2]) >= 0) {
			buf_putc(raw, (char)(str_hex_digit((unsigned char)s[1]) << 4 |
					     str_hex_digit((unsigned char)s[2])));
			s += 2;
		} else
			buf_putc(raw, *s);
	}
}

static void decode_b(const char *s, const char *end, struct buf *raw)
{
	struct cte_decoder b64;

	cte_decoder_init(&b64, CTE_BASE64);
	while (s < end) {
		size_t n = (size_t)(end - s) < MT_PIECE ? (size_t)(end - s) : MT_PIECE;
		char *dst = buf_reserve(raw, n + CTE_DECODE_LEAD);

		if (dst == NULL)
			return;
		buf_commit(raw, cte_decode(&b64, s, n, dst));
		s += n;
	}
}

/* One encoded word "=?charset?B|Q?text?=" at p (len bytes available): its length, and its
   text decoded to UTF-8 appended to out; 0 when p is not one. */
static size_t encoded_word(const char *p, size_t len, struct buf *out)
{
	const char *cs, *q1, *end, *star;
	char e;
	struct buf raw;
	size_t cslen;

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
	buf_init(&raw, 64, MT_WORD_MAX);
	if (e == 'b')
		decode_b(q1 + 3, end, &raw);
	else
		decode_q(q1 + 3, end, &raw);
	/* RFC 2231 language suffix: "charset*lang" */
	star = memchr(cs, '*', (size_t)(q1 - cs));
	cslen = (size_t)((star != NULL ? star : q1) - cs);
	charset_to_utf8(cs, cslen, raw.data != NULL ? raw.data : "", raw.len, out);
	buf_release(&raw);
	return (size_t)(end + 2 - p);
}

void mimetext_decode_words(const char *p, size_t len, struct buf *out)
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

void mimetext_field_text(const char *raw, size_t len, bool fold, struct buf *out)
{
	struct buf unfolded;

	buf_reset(out);
	buf_init(&unfolded, 256, out->max);
	rfc5322_unfold(raw, len, &unfolded);
	if (unfolded.len > 0)
		mimetext_decode_words(unfolded.data, unfolded.len, out);
	if (fold && out->len > 0)
		mimetext_fold(out->data, out->len);
	buf_release(&unfolded);
}

/* ---- the walk ---- */

static bool emit(struct mimetext *mt, enum mimetext_kind kind, bool start, const char *p,
		 size_t len, const struct mimetext_leaf *leaf)
{
	if (!mt->stopped && mt->cb(mt->arg, kind, start, p, len, leaf))
		mt->stopped = true;
	return mt->stopped;
}

/* A field name or value (unfolded by the parser) as one run. */
static void emit_field(struct mimetext *mt, enum mimetext_kind kind, struct str_view v)
{
	struct buf *b = &mt->field;

	buf_reset(b);
	mimetext_decode_words(v.p, v.len, b);
	if (mt->o.fold && b->len > 0)
		mimetext_fold(b->data, b->len);
	emit(mt, kind, true, b->data != NULL ? b->data : "", b->len, NULL);
}

static void cb_part_begin(void *ctx, const struct rfc5322_part *p)
{
	struct mimetext *mt = ctx;

	cte_decoder_init(&mt->dec, CTE_IDENTITY);
	memset(&mt->leaf, 0, sizeof(mt->leaf));
	mt->leaf.index = p->index;
	mt->in_text = false;
}

static void cb_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f)
{
	struct mimetext *mt = ctx;

	if (mt->stopped)
		return;
	if (str_caseeq(f->name.p, f->name.len, "Content-Transfer-Encoding", 25)) {
		enum cte cte = cte_parse(f->value.p, f->value.len);

		/* an unknown encoding is read as it stands */
		cte_decoder_init(&mt->dec, cte == CTE_UNKNOWN ? CTE_IDENTITY : cte);
	} else if (str_caseeq(f->name.p, f->name.len, "Content-Disposition", 19) &&
		   str_caseprefix(f->value.p, f->value.len, "attachment")) {
		mt->leaf.attachment = true;
	}
	if (!mt->o.fields)
		return;
	emit_field(mt, p->index == 0 ? MIMETEXT_FIELD : MIMETEXT_PART_FIELD, f->name);
	emit_field(mt, p->index == 0 ? MIMETEXT_FIELD : MIMETEXT_PART_FIELD, f->value);
}

static void cb_header_end(void *ctx, const struct rfc5322_part *p)
{
	struct mimetext *mt = ctx;
	const struct rfc5322_ctype *ct = p->ctype;
	const char *cs = "";
	size_t cslen = 0;

	cte_decoder_init(&mt->dec, mt->dec.cte);
	mt->ncarry = 0;
	mt->run_start = true;
	mt->in_text = ct != NULL && p->is_text && p->kind == RFC5322_LEAF;
	if (!mt->in_text)
		return;
	mt->leaf.plain = str_caseeq(ct->subtype.p, ct->subtype.len, "plain", 5);
	mt->leaf.html = str_caseeq(ct->subtype.p, ct->subtype.len, "html", 4);
	for (unsigned i = 0; i < ct->nparams; i++)
		if (str_caseeq(ct->params[i].name.p, ct->params[i].name.len, "charset", 7)) {
			cs = ct->params[i].value.p;
			cslen = ct->params[i].value.len;
		}
	conv_set(&mt->conv, cs, cslen);
}

/* A piece of a text leaf's body: decoded, converted, folded, emitted. */
static void body_piece(struct mimetext *mt, const char *data, size_t len)
{
	struct buf *raw = &mt->raw, *utf = &mt->utf;
	char *dst;
	size_t start, inc;

	buf_reset(raw);
	buf_reset(utf);
	if ((dst = buf_reserve(raw, len + CTE_DECODE_LEAD)) == NULL)
		return;
	buf_commit(raw, cte_decode(&mt->dec, data, len, dst));
	buf_append(utf, mt->carry, mt->ncarry);
	start = mt->ncarry;
	mt->ncarry = 0;
	conv_run(&mt->conv, raw->data, raw->len, utf);
	if (utf->len == 0)
		return;
	if (mt->o.fold) {
		inc = mimetext_fold(utf->data + start, utf->len - start);
	} else {
		/* whole sequences only, as folding would leave them */
		inc = 0;
		for (size_t i = utf->len; i > 0 && utf->len - i < 3; i--) {
			unsigned char b = (unsigned char)utf->data[i - 1];

			if ((b & 0xc0) == 0xc0) {
				if (seq_len(b) > utf->len - (i - 1))
					inc = utf->len - (i - 1);
				break;
			}
			if ((b & 0x80) == 0)
				break;
		}
	}
	if (inc > 0) {
		memcpy(mt->carry, utf->data + utf->len - inc, inc);
		mt->ncarry = (unsigned)inc;
		buf_truncate(utf, utf->len - inc);
	}
	if (utf->len == 0)
		return;
	emit(mt, MIMETEXT_BODY, mt->run_start, utf->data, utf->len, &mt->leaf);
	mt->run_start = false;
}

static void cb_body(void *ctx, const struct rfc5322_part *p, const char *data, size_t len,
		    uint64_t off)
{
	struct mimetext *mt = ctx;

	(void)p;
	(void)off;
	while (len > 0 && mt->in_text && !mt->stopped) {
		size_t n = len < MT_PIECE ? len : MT_PIECE;

		body_piece(mt, data, n);
		data += n;
		len -= n;
	}
}

static void cb_part_end(void *ctx, const struct rfc5322_part *p)
{
	struct mimetext *mt = ctx;
	char tail[8];
	size_t n;

	(void)p;
	if (!mt->in_text || mt->stopped)
		return;
	/* what the decoder still holds ("=" cut by the end) */
	if ((n = cte_decode_finish(&mt->dec, tail)) > 0)
		body_piece(mt, tail, n);
	mt->in_text = false;
}

static const struct rfc5322_callbacks mt_callbacks = {
	.part_begin = cb_part_begin,
	.field = cb_field,
	.header_end = cb_header_end,
	.body = cb_body,
	.part_end = cb_part_end,
};

struct mimetext *mimetext_new(const struct mimetext_opts *o, mimetext_cb *cb, void *arg)
{
	struct mimetext *mt = xcalloc(1, sizeof(*mt));

	mt->o = *o;
	mt->cb = cb;
	mt->arg = arg;
	mt->conv.cd = (iconv_t)-1;
	mt->parser = rfc5322_parser_new(NULL, &mt_callbacks, mt);
	buf_init(&mt->raw, 1024, MT_SCRATCH_MAX);
	buf_init(&mt->utf, 1024, MT_SCRATCH_MAX);
	buf_init(&mt->field, 256, MT_SCRATCH_MAX + MT_WORD_MAX);
	return mt;
}

void mimetext_free(struct mimetext **mtp)
{
	struct mimetext *mt = *mtp;

	if (mt == NULL)
		return;
	rfc5322_parser_free(&mt->parser);
	conv_close(&mt->conv);
	buf_release(&mt->raw);
	buf_release(&mt->utf);
	buf_release(&mt->field);
	free(mt->chunk);
	free(mt);
	*mtp = NULL;
}

void mimetext_begin(struct mimetext *mt)
{
	rfc5322_parser_reset(mt->parser);
	mt->stopped = false;
	mt->in_text = false;
	mt->ncarry = 0;
}

void mimetext_push(struct mimetext *mt, const void *data, size_t len)
{
	const char *p = data;

	/* in chunks, so a body piece never outgrows the scratch buffers */
	while (len > 0 && !mt->stopped) {
		size_t n = len < MT_CHUNK ? len : MT_CHUNK;

		rfc5322_parser_push(mt->parser, p, n);
		p += n;
		len -= n;
	}
}

void mimetext_end(struct mimetext *mt)
{
	if (!mt->stopped)
		rfc5322_parser_finish(mt->parser);
}

bool mimetext_stopped(const struct mimetext *mt)
{
	return mt->stopped;
}

int mimetext_file(struct mimetext *mt, int fd, uint64_t size)
{
	char *chunk;
	uint64_t off = 0;
	int rc = 0;

	if (mt->chunk == NULL)
		mt->chunk = xmalloc(MT_CHUNK);
	chunk = mt->chunk;
	mimetext_begin(mt);
	while (off < size && !mt->stopped) {
		size_t want = size - off < MT_CHUNK ? (size_t)(size - off) : MT_CHUNK;
		ssize_t n = pread(fd, chunk, want, (off_t)off);

		if (n <= 0) {
			rc = -1;
			break;
		}
		rfc5322_parser_push(mt->parser, chunk, (size_t)n);
		off += (uint64_t)n;
	}
	mimetext_end(mt);
	return rc;
}

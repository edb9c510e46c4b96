/* utf7imap.c — owns modified UTF-7 (RFC 3501 5.1.3): encode from UTF-8, strict decode. */
#include <stdint.h>
#include <string.h>

#include "common/str.h"
#include "common/utf7imap.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/* Reads one UTF-8 character at in[*i]; returns its code point or -1 when invalid. */
static int32_t utf8_next(const unsigned char *in, size_t len, size_t *i)
{
	unsigned char c = in[*i];
	size_t n;
	int32_t cp, min;

	if (c < 0x80) {
		(*i)++;
		return c;
	}
	if ((c & 0xe0) == 0xc0)
		n = 1, cp = c & 0x1f, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		n = 2, cp = c & 0x0f, min = 0x800;
	else if ((c & 0xf8) == 0xf0)
		n = 3, cp = c & 0x07, min = 0x10000;
	else
		return -1;
	if (len - *i <= n)
		return -1;
	for (size_t k = 1; k <= n; k++) {
		if ((in[*i + k] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (in[*i + k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*i += n + 1;
	return cp;
}

static void utf8_put(struct buf *out, uint32_t cp, int *err)
{
	if (buf_put_utf8(out, cp) < 0)
		*err = 1;
}

/* Base64 state while encoding one shifted run. */
struct b64_enc {
	uint32_t bits;
	unsigned nbits;
};

static void enc_unit(struct buf *out, struct b64_enc *e, uint16_t u, int *err)
{
	e->bits = (e->bits << 16) | u;
	e->nbits += 16;
	while (e->nbits >= 6) {
		e->nbits -= 6;
		if (buf_putc(out, b64[(e->bits >> e->nbits) & 0x3f]) < 0)
			*err = 1;
	}
	e->bits &= (1u << e->nbits) - 1;
}

static void enc_flush(struct buf *out, struct b64_enc *e, int *err)
{
	if (e->nbits > 0 && buf_putc(out, b64[(e->bits << (6 - e->nbits)) & 0x3f]) < 0)
		*err = 1;
	if (buf_putc(out, '-') < 0)
		*err = 1;
	e->bits = e->nbits = 0;
}

int utf7imap_encode(const char *in, size_t len, struct buf *out)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t start = out->len, i = 0;
	struct b64_enc e = { 0, 0 };
	bool shifted = false;
	int err = 0;

	while (i < len && !err) {
		int32_t cp = utf8_next(s, len, &i);

		if (cp < 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
			err = 1;
			break;
		}
		if (cp < 0x7f) {
			if (shifted)
				enc_flush(out, &e, &err);
			shifted = false;
			if (buf_putc(out, (char)cp) < 0 || (cp == '&' && buf_putc(out, '-') < 0))
				err = 1;
			continue;
		}
		if (!shifted && buf_putc(out, '&') < 0)
			err = 1;
		shifted = true;
		if (cp >= 0x10000) {
			cp -= 0x10000;
			enc_unit(out, &e, (uint16_t)(0xd800 | (cp >> 10)), &err);
			enc_unit(out, &e, (uint16_t)(0xdc00 | (cp & 0x3ff)), &err);
		} else {
			enc_unit(out, &e, (uint16_t)cp, &err);
		}
	}
	if (shifted && !err)
		enc_flush(out, &e, &err);
	if (err) {
		buf_truncate(out, start);
		return -1;
	}
	return 0;
}

/* Decodes the shifted run in[*i..] up to its '-' (consumed). -1 when invalid. */
static int dec_run(const unsigned char *in, size_t len, size_t *i, struct buf *out, int *err)
{
	uint32_t bits = 0, hi = 0;
	unsigned nbits = 0;
	size_t nunits = 0;

	for (;;) {
		int v;

		if (*i >= len)
			return -1; /* unterminated */
		if (in[*i] == '-') {
			(*i)++;
			break;
		}
		if ((v = str_b64_digit(in[*i], ',')) < 0)
			return -1;
		(*i)++;
		bits = (bits << 6) | (uint32_t)v;
		nbits += 6;
		if (nbits < 16)
			continue;
		nbits -= 16;
		uint32_t u = (bits >> nbits) & 0xffff;

		bits &= (1u << nbits) - 1;
		nunits++;
		if (hi != 0) {
			if (u < 0xdc00 || u > 0xdfff)
				return -1;
			utf8_put(out, 0x10000 + ((hi - 0xd800) << 10) + (u - 0xdc00), err);
			hi = 0;
		} else if (u >= 0xd800 && u <= 0xdbff) {
			hi = u;
		} else if (u >= 0xdc00 && u <= 0xdfff) {
			return -1;
		} else if ((u >= 0x20 && u < 0x7f) || u < 0x20 || u == 0x7f ||
			   (u >= 0x80 && u < 0xa0)) {
			return -1; /* ASCII must stand for itself; no controls */
		} else {
			utf8_put(out, u, err);
		}
	}
	/* "&-" is handled by the caller; here the run must be complete and canonical. */
	if (nunits == 0 || hi != 0 || nbits >= 6 || bits != 0)
		return -1;
	return 0;
}

int utf7imap_decode(const char *in, size_t len, struct buf *out)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t start = out->len, i = 0;
	int err = 0;

	while (i < len && !err) {
		unsigned char c = s[i];

		if (c < 0x20 || c >= 0x7f) {
			err = 1;
		} else if (c != '&') {
			if (buf_putc(out, (char)c) < 0)
				err = 1;
			i++;
		} else if (i + 1 < len && s[i + 1] == '-') {
			if (buf_putc(out, '&') < 0)
				err = 1;
			i += 2;
		} else {
			i++;
			if (dec_run(s, len, &i, out, &err) < 0)
				err = 1;
			/* two adjacent runs are one run spelled twice: not canonical */
			else if (i < len && s[i] == '&' && !(i + 1 < len && s[i + 1] == '-'))
				err = 1;
		}
	}
	if (err) {
		buf_truncate(out, start);
		return -1;
	}
	return 0;
}

bool utf7imap_valid(const char *in, size_t len)
{
	struct buf tmp;
	int rc;

	buf_init(&tmp, 0, len * 2 + 16);
	rc = utf7imap_decode(in, len, &tmp);
	buf_release(&tmp);
	return rc == 0;
}

/* sieve_mime.c — owns the decoding the tests need before they compare: RFC 2047 encoded
 * words in header values (header test, RFC 5228 2.7.2) and the content transfer encodings
 * (quoted-printable, base64) of the parts body :text and :content search (RFC 5173 5).
 * UTF-8 and US-ASCII words are taken as they are, ISO-8859-1 and Windows-1252 are converted
 * to UTF-8; words of other charsets are decoded to their bytes unchanged. */
#include <ctype.h>
#include <string.h>

#include "common/str.h"
#include "sieve/sieve_private.h"

#define WORD_MAX 4096 /* one RFC 2047 encoded word, decoded */

void sv_b64_decode(const char *in, size_t len, struct buf *out)
{
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < len; i++) {
		int d = str_b64_digit((unsigned char)in[i], '/');

		if (in[i] == '=')
			break;
		if (d < 0)
			continue; /* line ends and other noise */
		acc = acc << 6 | (uint32_t)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf_putc(out, (char)((acc >> bits) & 0xff));
		}
	}
}

void sv_qp_decode(const char *in, size_t len, bool header, struct buf *out)
{
	for (size_t i = 0; i < len; i++) {
		if (header && in[i] == '_') {
			buf_putc(out, ' ');
		} else if (in[i] == '=' && i + 2 < len + 0 &&
			   str_hex_digit((unsigned char)in[i + 1]) >= 0 &&
			   str_hex_digit((unsigned char)in[i + 2]) >= 0) {
			buf_putc(out, (char)(str_hex_digit((unsigned char)in[i + 1]) * 16 +
					     str_hex_digit((unsigned char)in[i + 2])));
			i += 2;
		} else if (in[i] == '=') { /* a soft line break: "=" blanks line end */
			size_t j = i + 1;

			while (j < len && (in[j] == ' ' || in[j] == '\t'))
				j++;
			if (j < len && in[j] == '\r')
				j++;
			if (j < len && in[j] == '\n') {
				i = j;
				continue;
			}
			buf_putc(out, '=');
		} else {
			buf_putc(out, in[i]);
		}
	}
}

/* one "=?charset?X?text?=" at p: its length, or 0 when it is not one */
static size_t encoded_word(const char *p, size_t len, struct buf *out)
{
	const char *q1, *q2, *end;

	if (len < 8 || p[0] != '=' || p[1] != '?')
		return 0;
	if ((q1 = memchr(p + 2, '?', len - 2)) == NULL || q1 + 3 >= p + len || q1[2] != '?')
		return 0;
	q2 = q1 + 2;
	if ((end = memmem(q2 + 1, (size_t)(p + len - q2 - 1), "?=", 2)) == NULL)
		return 0;
	size_t cslen = (size_t)(q1 - p - 2);
	const char *cs = p + 2, *star = memchr(cs, '*', cslen); /* RFC 2231 language */
	if (star)
		cslen = (size_t)(star - cs);
	bool latin1 = str_caseeq(cs, cslen, "iso-8859-1", 10) ||
		      str_caseeq(cs, cslen, "windows-1252", 12) ||
		      str_caseeq(cs, cslen, "latin1", 6);
	char enc = (char)toupper((unsigned char)q1[1]);
	struct buf tmp;

	if (enc != 'B' && enc != 'Q')
		return 0;
	buf_init(&tmp, 64, WORD_MAX);
	if (enc == 'B')
		sv_b64_decode(q2 + 1, (size_t)(end - q2 - 1), &tmp);
	else
		sv_qp_decode(q2 + 1, (size_t)(end - q2 - 1), true, &tmp);
	for (size_t i = 0; i < tmp.len; i++)
		if (latin1)
			buf_put_utf8(out,
				     (unsigned char)tmp.data[i]); /* Latin-1: the code point */
		else
			buf_putc(out, tmp.data[i]);
	buf_release(&tmp);
	return (size_t)(end + 2 - p);
}

void sv_rfc2047_decode(const char *in, size_t len, struct buf *out)
{
	bool last_word = false;

	for (size_t i = 0; i < len;) {
		size_t n = in[i] == '=' ? encoded_word(in + i, len - i, out) : 0;

		if (n > 0) {
			i += n;
			last_word = true;
			continue;
		}
		if (last_word && (in[i] == ' ' || in[i] == '\t')) {
			/* blanks between two encoded words are dropped (RFC 2047 6.2) */
			size_t j = i;
			struct buf probe;

			while (j < len && (in[j] == ' ' || in[j] == '\t'))
				j++;
			buf_init(&probe, 16, WORD_MAX);
			bool next_word = j < len && encoded_word(in + j, len - j, &probe) > 0;
			buf_release(&probe);
			if (next_word) {
				i = j;
				continue;
			}
		}
		last_word = false;
		buf_putc(out, in[i++]);
	}
}

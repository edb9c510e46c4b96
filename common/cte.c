/* cte.c — owns content-transfer-encoding decoding: the CTE names it knows (RFC 2045: 7bit,
 * 8bit, binary, base64, quoted-printable), and an incremental base64 / quoted-printable
 * decoder whose state crosses chunk boundaries, so a body is decoded while it is streamed
 * (imapd's FETCH BINARY, the searchable text of mimetext.c) and never held whole. */
#include <string.h>
#include <unistd.h>

#include "common/str.h"
#include "common/cte.h"

enum cte cte_parse(const char *v, size_t len)
{
	size_t n = 0;

	/* the token before any comment or parameter: "base64 (encoded)" */
	while (n < len && v[n] != ' ' && v[n] != '\t' && v[n] != '(' && v[n] != ';')
		n++;
	if (n == 0 || str_caseeq(v, n, "7bit", 4) || str_caseeq(v, n, "8bit", 4) ||
	    str_caseeq(v, n, "binary", 6))
		return CTE_IDENTITY;
	if (str_caseeq(v, n, "base64", 6))
		return CTE_BASE64;
	if (str_caseeq(v, n, "quoted-printable", 16))
		return CTE_QP;
	return CTE_UNKNOWN;
}

void cte_decoder_init(struct cte_decoder *d, enum cte cte)
{
	memset(d, 0, sizeof(*d));
	d->cte = cte;
}

/* Characters outside the alphabet (line ends, padding) are skipped. */
static size_t b64_decode(struct cte_decoder *d, const char *p, size_t len, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int v = str_b64_digit((unsigned char)p[i], '/');

		if (v < 0)
			continue;
		d->acc = (d->acc << 6) | (uint32_t)v;
		d->bits += 6;
		if (d->bits >= 8) {
			d->bits -= 8;
			out[o++] = (char)((d->acc >> d->bits) & 0xff);
		}
	}
	return o;
}

/* One byte after a pending '=': the escape completes, waits, or is kept as written. */
static size_t qp_escape(struct cte_decoder *d, char c, char *out)
{
	int hi, lo;

	d->qp[d->nqp++] = c;
	if (d->nqp == 2 && (c == '\n' || c == '\r')) {
		if (c == '\n')
			d->nqp = 0; /* soft line break "=\n" */
		return 0;           /* "=\r": the '\n' ends it */
	}
	if (d->nqp == 3 && d->qp[1] == '\r') {
		d->nqp = 0;
		if (c == '\n')
			return 0;
		out[0] = c;
		return 1;
	}
	if (d->nqp < 3)
		return 0;
	d->nqp = 0;
	hi = str_hex_digit((unsigned char)d->qp[1]);
	lo = str_hex_digit((unsigned char)d->qp[2]);
	if (hi >= 0 && lo >= 0) {
		out[0] = (char)(hi << 4 | lo);
		return 1;
	}
	memcpy(out, d->qp, 3); /* not an escape: kept as written */
	return 3;
}

/* Writes the held white space (it was not trailing); returns its length. */
static size_t qp_ws_flush(struct cte_decoder *d, char *out)
{
	size_t n = d->nws;

	memcpy(out, d->ws, n);
	d->nws = 0;
	return n;
}

/* A '=' followed by white space: a soft line break if only white space is left before the
   line end (RFC 2045 6.7 rule 3: it is transport padding), else kept as written. Returns
   whether c was taken. */
static bool qp_eq_ws(struct cte_decoder *d, char c, char *out, size_t *o)
{
	if (c == ' ' || c == '\t') {
		if (d->nws < CTE_QP_WS_MAX) {
			d->ws[d->nws++] = c;
			return true;
		}
	} else if (c == '\r' || c == '\n') {
		d->nws = 0; /* "= \r\n": the padding goes, the escape takes the line end */
		return false;
	}
	out[(*o)++] = '='; /* "=  x" (or padding past the limit): not an escape */
	*o += qp_ws_flush(d, out + *o);
	d->nqp = 0;
	return false;
}

static size_t qp_decode(struct cte_decoder *d, const char *p, size_t len, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = p[i];

		if (d->nqp == 1 && (d->nws > 0 || c == ' ' || c == '\t') &&
		    qp_eq_ws(d, c, out, &o))
			continue;
		if (d->nqp > 0) {
			o += qp_escape(d, c, out + o);
		} else if (c == ' ' || c == '\t') {
			if (d->nws == CTE_QP_WS_MAX)
				o += qp_ws_flush(d, out + o);
			d->ws[d->nws++] = c;
		} else if (c == '\r' || c == '\n') {
			d->nws = 0; /* trailing white space: transport padding */
			out[o++] = c;
		} else {
			o += qp_ws_flush(d, out + o);
			if (c == '=')
				d->qp[d->nqp++] = '=';
			else
				out[o++] = c;
		}
	}
	return o;
}

size_t cte_decode(struct cte_decoder *d, const char *in, size_t len, char *out)
{
	switch (d->cte) {
	case CTE_BASE64:
		return b64_decode(d, in, len, out);
	case CTE_QP:
		return qp_decode(d, in, len, out);
	default:
		memmove(out, in, len); /* the stream decodes in place */
		return len;
	}
}

size_t cte_decode_finish(struct cte_decoder *d, char *out)
{
	size_t n = 0;

	if (d->cte == CTE_QP && d->nqp > 0 && (d->nqp == 1 || d->qp[1] != '\r')) {
		n = d->nqp; /* "=" or "=X" cut by the end: kept as written */
		memcpy(out, d->qp, n);
	}
	d->nqp = 0;
	d->nws = 0; /* white space at the very end is trailing too */
	return n;
}

int cte_decode_measure(int fd, uint64_t off, uint64_t len, enum cte cte, char *scratch,
		       uint64_t *size_r, bool *nul_r)
{
	struct cte_decoder d;
	size_t k;

	cte_decoder_init(&d, cte);
	*size_r = 0;
	*nul_r = false;
	while (len > 0) {
		size_t want = len < CTE_CHUNK ? (size_t)len : CTE_CHUNK;
		ssize_t n = pread(fd, scratch + CTE_DECODE_LEAD, want, (off_t)off);

		if (n <= 0)
			return -1;
		off += (uint64_t)n;
		len -= (uint64_t)n;
		k = cte_decode(&d, scratch + CTE_DECODE_LEAD, (size_t)n, scratch);
		*size_r += k;
		*nul_r = *nul_r || memchr(scratch, '\0', k) != NULL;
	}
	k = cte_decode_finish(&d, scratch);
	*size_r += k;
	*nul_r = *nul_r || memchr(scratch, '\0', k) != NULL;
	return 0;
}

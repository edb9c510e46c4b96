/* sasl.c — owns the strict base64 decoder and the SASL PLAIN message split (sasl.h). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/sasl.h"
#include "common/str.h"

enum sasl_result sasl_b64_decode(const char *in, size_t len, unsigned char *out, size_t size,
				 size_t *n_r)
{
	size_t n = 0, pad = 0;

	*n_r = 0;
	if (len % 4 != 0)
		return SASL_EBASE64;
	if (len > 0 && in[len - 1] == '=')
		pad = len > 1 && in[len - 2] == '=' ? 2 : 1;
	if (len / 4 * 3 - pad + 1 > size)
		return SASL_EBASE64;
	for (size_t i = 0; i < len; i += 4) {
		int d[4];
		unsigned quad = i + 4 == len ? 4 - (unsigned)pad : 4;
		uint32_t v = 0;

		for (unsigned k = 0; k < 4; k++) {
			d[k] = k < quad ? str_b64_digit((unsigned char)in[i + k], '/') : 0;
			if (d[k] < 0)
				return SASL_EBASE64; /* '=' inside, white space, other alphabets */
			v = v << 6 | (uint32_t)d[k];
		}
		/* the bits a short group leaves unused must be zero (RFC 4648 3.5) */
		if ((quad == 2 && (v & 0xffff)) || (quad == 3 && (v & 0xff)))
			return SASL_EBASE64;
		out[n++] = (unsigned char)(v >> 16);
		if (quad > 2)
			out[n++] = (unsigned char)(v >> 8);
		if (quad > 3)
			out[n++] = (unsigned char)v;
	}
	out[n] = '\0';
	*n_r = n;
	return SASL_OK;
}

/* The field of raw starting at *off and ending before the next NUL (or at the end); *off is
   moved past that NUL. */
static size_t plain_field(const unsigned char *raw, size_t n, size_t *off, bool *nul_r)
{
	const unsigned char *nul = memchr(raw + *off, '\0', n - *off);
	size_t len = nul != NULL ? (size_t)(nul - (raw + *off)) : n - *off;

	*nul_r = nul != NULL;
	*off += len + (nul != NULL);
	return len;
}

static enum sasl_result plain_decode(const char *b64, size_t len, struct sasl_plain *out,
				     char *authzid)
{
	unsigned char raw[2 * SASL_NAME_MAX + SASL_PASSWORD_MAX + 3];
	size_t n, off = 0, zlen, clen, plen, zoff, coff, poff;
	bool nul1, nul2, nul3;
	enum sasl_result rc;

	memset(out, 0, sizeof(*out));
	if ((rc = sasl_b64_decode(b64, len, raw, sizeof(raw), &n)) != SASL_OK)
		return rc;
	zoff = off;
	zlen = plain_field(raw, n, &off, &nul1);
	coff = off;
	clen = nul1 ? plain_field(raw, n, &off, &nul2) : 0;
	poff = off;
	plen = nul1 && nul2 ? plain_field(raw, n, &off, &nul3) : 0;
	rc = SASL_OK;
	if (!nul1 || !nul2 || nul3 || clen == 0 || plen == 0 || zlen > SASL_NAME_MAX ||
	    clen > SASL_NAME_MAX || plen > SASL_PASSWORD_MAX)
		rc = SASL_EFORMAT;
	else if (zlen > 0 && (zlen != clen || memcmp(raw + zoff, raw + coff, clen) != 0)) {
		if (authzid == NULL)
			rc = SASL_EAUTHZ;
		else if (memchr(raw + zoff, '\0', zlen) == NULL)
			memcpy(authzid, raw + zoff, zlen); /* the caller decides */
	}
	if (rc == SASL_OK) {
		memcpy(out->authcid, raw + coff, clen);
		memcpy(out->passwd, raw + poff, plen);
	}
	explicit_bzero(raw, sizeof(raw));
	return rc;
}

enum sasl_result sasl_plain_decode(const char *b64, size_t len, struct sasl_plain *out)
{
	return plain_decode(b64, len, out, NULL);
}

enum sasl_result sasl_plain_decode_authz(const char *b64, size_t len, struct sasl_plain *out,
					 char authzid[SASL_NAME_MAX + 1])
{
	memset(authzid, 0, SASL_NAME_MAX + 1);
	return plain_decode(b64, len, out, authzid);
}

void sasl_plain_wipe(struct sasl_plain *p)
{
	explicit_bzero(p, sizeof(*p));
}

const char *sasl_strerror(enum sasl_result r)
{
	switch (r) {
	case SASL_OK:
		return "ok";
	case SASL_EBASE64:
		return "invalid base64";
	case SASL_EFORMAT:
		return "malformed PLAIN response";
	case SASL_EAUTHZ:
		return "authorization identity differs from the user";
	case SASL_ESCRAM:
		return "malformed SCRAM message";
	case SASL_EEXT:
		return "SCRAM extension not supported";
	case SASL_ECBIND:
		return "channel binding refused";
	case SASL_ENONCE:
		return "SCRAM nonce does not match";
	case SASL_EPROOF:
		return "SCRAM proof does not match";
	case SASL_ESTATE:
		return "SCRAM step out of order";
	}
	return "?";
}

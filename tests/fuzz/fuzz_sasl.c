/* fuzz_sasl.c — libFuzzer target: the SASL decoder mtad and imapd share (common/sasl.h). The
 * input is taken twice: as the base64 text a client sends (what decodes must agree with
 * OpenSSL's decoder and encode back to the same text: the decoder is strict, so there is one
 * text per value), and as a raw PLAIN message that is encoded and decoded (the result must be
 * what a plain reading of "authzid NUL authcid NUL passwd" gives; the proxy login's decoder
 * gives the authzid instead of refusing it). Built only with
 * -Dfuzz=true. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/sasl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t encode(const uint8_t *raw, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, raw, (int)n);
}

static void check_text(const uint8_t *data, size_t size)
{
	static unsigned char out[4096], ref[4096];
	static char again[8192];
	size_t n;

	if (size > 3000)
		return;
	if (sasl_b64_decode((const char *)data, size, out, sizeof(out), &n) != SASL_OK)
		return;
	assert(n <= size / 4 * 3 && out[n] == '\0');
	/* one text per value: encoding gives back the input */
	assert(encode(out, n, again) == size && memcmp(again, data, size) == 0);
	if (size > 0) {
		int m = EVP_DecodeBlock(ref, data, (int)size);

		assert(m >= 0 && (size_t)m >= n && memcmp(ref, out, n) == 0);
	}
}

/* What "[authzid] NUL authcid NUL passwd" means, read the obvious way. */
static enum sasl_result reference(const uint8_t *m, size_t n, size_t *c_off, size_t *c_len,
				  size_t *p_off, size_t *p_len)
{
	size_t nuls = 0, at[3] = { 0, 0, 0 };

	for (size_t i = 0; i < n; i++)
		if (m[i] == 0 && nuls++ < 3)
			at[nuls - 1] = i;
	if (nuls != 2)
		return SASL_EFORMAT;
	*c_off = at[0] + 1;
	*c_len = at[1] - at[0] - 1;
	*p_off = at[1] + 1;
	*p_len = n - at[1] - 1;
	if (*c_len == 0 || *p_len == 0 || at[0] > SASL_NAME_MAX || *c_len > SASL_NAME_MAX ||
	    *p_len > SASL_PASSWORD_MAX)
		return SASL_EFORMAT;
	if (at[0] > 0 && (at[0] != *c_len || memcmp(m, m + *c_off, *c_len) != 0))
		return SASL_EAUTHZ;
	return SASL_OK;
}

/* sasl_plain_decode_authz agrees, and hands out the authzid it does not refuse. */
static void check_authz(const uint8_t *m, size_t n, const char *text, size_t tlen,
			enum sasl_result want)
{
	char authz[SASL_NAME_MAX + 1];
	struct sasl_plain p;
	enum sasl_result got = sasl_plain_decode_authz(text, tlen, &p, authz);
	const uint8_t *nul = memchr(m, 0, n);

	assert(got == (want == SASL_EAUTHZ ? SASL_OK : want));
	if (want == SASL_EAUTHZ)
		assert(nul != NULL && strlen(authz) == (size_t)(nul - m) &&
		       memcmp(authz, m, strlen(authz)) == 0);
	else
		assert(authz[0] == '\0');
	sasl_plain_wipe(&p);
}

static void check_message(const uint8_t *data, size_t size)
{
	static char text[8192];
	struct sasl_plain p;
	size_t c_off = 0, c_len = 0, p_off = 0, p_len = 0;
	enum sasl_result want, got;

	if (size > 2000)
		return;
	want = reference(data, size, &c_off, &c_len, &p_off, &p_len);
	got = sasl_plain_decode(text, encode(data, size, text), &p);
	if (size > 2 * SASL_NAME_MAX + SASL_PASSWORD_MAX + 2) {
		assert(got != SASL_OK);
		return;
	}
	assert(got == want);
	check_authz(data, size, text, strlen(text), want);
	if (got != SASL_OK) {
		assert(p.authcid[0] == '\0' && p.passwd[0] == '\0');
		return;
	}
	assert(strlen(p.authcid) == c_len && memcmp(p.authcid, data + c_off, c_len) == 0);
	assert(strlen(p.passwd) == p_len && memcmp(p.passwd, data + p_off, p_len) == 0);
	sasl_plain_wipe(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sasl_plain p;

	check_text(data, size);
	(void)sasl_plain_decode((const char *)data, size, &p);
	check_message(data, size);
	return 0;
}

/* fuzz_scram.c — libFuzzer target: the SCRAM-SHA-256 server's message parsers (common/sasl.h,
 * sasl_scram.c). The first byte chooses the mechanism (-PLUS or not), whether -PLUS was
 * advertised and whether the user has a secret; the rest is client-first, a newline, then
 * client-final (both raw, encoded here as a client would). Checked: every server message is
 * strict base64 of at most SASL_SCRAM_OUT_MAX bytes; a user name comes out only when
 * client-first passes, and SASLprep leaves it as it is (it was prepared); an exchange without
 * a secret never succeeds. Built only with
 * -Dfuzz=true. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/sasl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* RFC 7677's user: password "pencil". */
static const char secret[] = "4096,W22ZaJ0SNY7soEsUEjb6gQ==,WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmt"
			     "bsT4qY=,wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";

static void check_out(const char *out)
{
	static unsigned char raw[SASL_SCRAM_OUT_MAX];
	size_t len = strlen(out), n;

	assert(len < SASL_SCRAM_OUT_MAX);
	assert(sasl_b64_decode(out, len, raw, sizeof(raw), &n) == SASL_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char enc[2 * SASL_SCRAM_B64_MAX + 8], out[SASL_SCRAM_OUT_MAX];
	static char prep[SASL_NAME_MAX + 1];
	static const unsigned char cb[32] = { 1, 2, 3 };
	const uint8_t *nl, *second;
	size_t n1, n2, e;
	struct sasl_scram *s;
	bool has_secret;
	enum sasl_result rc;

	if (size < 1 || size > 2 * SASL_SCRAM_MSG_MAX)
		return 0;
	s = sasl_scram_new(data[0] & 1, data[0] & 2);
	has_secret = data[0] & 4;
	data++;
	size--;
	nl = memchr(data, '\n', size);
	n1 = nl != NULL ? (size_t)(nl - data) : size;
	second = nl != NULL ? nl + 1 : data + size;
	n2 = nl != NULL ? size - n1 - 1 : 0;
	e = (size_t)EVP_EncodeBlock((unsigned char *)enc, data, (int)n1);
	rc = sasl_scram_client_first(s, enc, e);
	if (rc != SASL_OK) {
		assert(sasl_scram_server_first(s, secret, NULL, out, sizeof(out)) == SASL_ESTATE);
		sasl_scram_free(&s);
		return 0;
	}
	assert(sasl_scram_user(s)[0] != '\0');
	/* the name came out SASLprep'd (RFC 4013): preparing it again changes nothing */
	assert(sasl_saslprep(sasl_scram_user(s), false, prep, sizeof(prep)) == 0 &&
	       strcmp(prep, sasl_scram_user(s)) == 0);
	rc = sasl_scram_server_first(s, has_secret ? secret : NULL, NULL, out, sizeof(out));
	if (rc == SASL_OK) {
		check_out(out);
		e = (size_t)EVP_EncodeBlock((unsigned char *)enc, second, (int)n2);
		rc = sasl_scram_client_final(s, cb, sizeof(cb), enc, e, out, sizeof(out));
		check_out(out);
		/* the server nonce is random: no input can know it, a fortiori without a secret */
		assert(rc != SASL_OK);
	}
	sasl_scram_free(&s);
	return 0;
}

/* fuzz_dkim_canon.c — libFuzzer target: any bytes as a message body through both DKIM body
 * canonicalizations (RFC 6376 3.4), fed whole and in pieces cut at every offset the first
 * byte chooses; the hash and the canonical length must not depend on the cuts, and relaxed
 * output is never longer than simple's plus the CRLFs a bare last line gains. Also each
 * line as a header field through both header canonicalizations. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/buf.h"
#include "mailauth/dkim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The canonical body's SHA-256 and length, fed in pieces of step bytes (0: whole). */
static uint64_t body_hash(enum dkim_canon c, const char *p, size_t size, size_t step,
			  uint64_t limit, unsigned char md[32])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	struct dkim_body b;
	unsigned len = 0;

	assert(ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1);
	dkim_body_init(&b, c, ctx, limit);
	if (step == 0) {
		dkim_body_feed(&b, p, size);
	} else {
		for (size_t off = 0; off < size; off += step)
			dkim_body_feed(&b, p + off, size - off < step ? size - off : step);
	}
	dkim_body_end(&b);
	assert(EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32);
	EVP_MD_CTX_free(ctx);
	assert(b.hashed <= b.total && b.hashed <= limit);
	return b.total;
}

static void check_headers(const char *p, size_t size)
{
	struct buf out;

	buf_init(&out, 0, 4 * size + 64);
	for (size_t off = 0; off < size;) {
		const char *nl = memchr(p + off, '\n', size - off);
		size_t len = nl != NULL ? (size_t)(nl - (p + off)) + 1 : size - off;

		buf_reset(&out);
		if (dkim_canon_header(DKIM_RELAXED, p + off, len, &out) == 0)
			assert(out.len <= len + 2);
		buf_reset(&out);
		(void)dkim_canon_header(DKIM_SIMPLE, p + off, len, &out);
		off += len;
	}
	buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	size_t step = size > 0 ? (size_t)data[0] % 17 + 1 : 1;
	unsigned char a[32], b[32];

	for (int c = DKIM_SIMPLE; c <= DKIM_RELAXED; c++) {
		uint64_t whole = body_hash((enum dkim_canon)c, p, size, 0, UINT64_MAX, a);
		uint64_t cut = body_hash((enum dkim_canon)c, p, size, step, UINT64_MAX, b);

		assert(whole == cut && memcmp(a, b, sizeof(a)) == 0);
		(void)body_hash((enum dkim_canon)c, p, size, step, size / 2, b);
	}
	check_headers(p, size);
	return 0;
}

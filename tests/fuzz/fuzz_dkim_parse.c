/* fuzz_dkim_parse.c — libFuzzer target: any bytes as a DKIM tag list, as a DKIM-Signature
 * field (libheron_mailauth's dkim_sig_parse) and as a key record (dkim_key_parse, both
 * algorithms). Checks the parsed tags lie inside the input, a parsed signature keeps its
 * limits (domain, selector, h= count, b= and bh= sizes) and that nothing leaks or reads past
 * the input (ASan). Built only with -Dfuzz=true. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mailauth/dkim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tags(const char *p, size_t size)
{
	struct dkim_tag tags[DKIM_TAGS_MAX];
	const char *err = NULL;
	size_t n = 0;

	if (dkim_tags_parse(p, size, tags, DKIM_TAGS_MAX, &n, &err) < 0) {
		assert(err != NULL);
		return;
	}
	assert(n <= DKIM_TAGS_MAX);
	for (size_t i = 0; i < n; i++) {
		assert(tags[i].name >= p && tags[i].name + tags[i].nlen <= p + size);
		assert(tags[i].val >= p && tags[i].val + tags[i].vlen <= p + size);
		assert(dkim_tag_find(tags, n, "v") == NULL ||
		       dkim_tag_find(tags, n, "v")->nlen == 1);
	}
}

static void check_sig(const char *p, size_t size)
{
	static const char name[] = "DKIM-Signature:";
	char field[8192];
	struct dkim_sig sig;
	const char *err = NULL;
	size_t len = size < sizeof(field) - sizeof(name) - 2 ? size
							     : sizeof(field) - sizeof(name) - 2;

	memcpy(field, name, sizeof(name) - 1);
	memcpy(field + sizeof(name) - 1, p, len);
	memcpy(field + sizeof(name) - 1 + len, "\r\n", 2);
	len += sizeof(name) - 1 + 2;
	memset(&sig, 0, sizeof(sig));
	if (dkim_sig_parse(field, len, &sig, &err) == 0) {
		assert(strlen(sig.d) <= DKIM_DOMAIN_MAX && strlen(sig.s) <= DKIM_SELECTOR_MAX);
		assert(sig.nh >= 1 && sig.nh <= DKIM_H_MAX);
		assert(sig.blen <= DKIM_SIG_MAX && sig.bhlen <= EVP_MAX_MD_SIZE);
		assert(sig.stripped != NULL && sig.stripped_len <= len);
		assert(strlen(sig.b_prefix) <= 8);
	} else {
		assert(err != NULL);
	}
	dkim_sig_release(&sig);
}

static void check_key(const char *p, size_t size, enum dkim_alg alg)
{
	struct dkim_key k;
	const char *err = NULL;

	memset(&k, 0, sizeof(k));
	if (dkim_key_parse(p, size, alg, &k, &err) == 0)
		assert(k.revoked == (k.pkey == NULL));
	else
		assert(err != NULL);
	dkim_key_release(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;

	check_tags(p, size);
	check_sig(p, size);
	check_key(p, size, DKIM_RSA_SHA256);
	check_key(p, size, DKIM_ED25519_SHA256);
	return 0;
}

/* passwd.c — owns local verification of stored password hashes (lookup mode and the users
 * file): {SSHA} {SSHA256} {SSHA512} and their unsalted forms with OpenSSL digests, {CRYPT}
 * through crypt(3). Comparisons run in constant time. Cleartext values are never accepted. */
#include <crypt.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"

struct scheme {
	const char *name; /* with braces */
	const char *md;   /* OpenSSL digest name; NULL: crypt(3) */
	bool salted;
};

static const struct scheme schemes[] = {
	{ "{SSHA}", "SHA1", true },
	{ "{SSHA256}", "SHA256", true },
	{ "{SSHA512}", "SHA512", true },
	{ "{SHA}", "SHA1", false },
	{ "{SHA256}", "SHA256", false },
	{ "{SHA512}", "SHA512", false },
	{ "{CRYPT}", NULL, false },
};

static int verify_digest(const struct scheme *s, const char *b64, size_t len,
			 const char *password);
static int verify_crypt(const char *hash, size_t len, const char *password);

static int verify_digest(const struct scheme *s, const char *b64, size_t len,
			 const char *password)
{
	unsigned char raw[256], dig[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	int n, pad = 0, rc = -1;
	const EVP_MD *md = EVP_get_digestbyname(s->md);
	size_t mdlen = md != NULL ? (size_t)EVP_MD_get_size(md) : 0;
	EVP_MD_CTX *ctx;

	if (md == NULL || len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof(raw))
		return -1;
	n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)len);
	if (n < 0)
		return -1;
	pad = (b64[len - 1] == '=') + (len > 1 && b64[len - 2] == '=');
	n -= pad;
	if ((size_t)n < mdlen || (!s->salted && (size_t)n != mdlen))
		return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx != NULL && EVP_DigestInit_ex(ctx, md, NULL) == 1 &&
	    EVP_DigestUpdate(ctx, password, strlen(password)) == 1 &&
	    EVP_DigestUpdate(ctx, raw + mdlen, (size_t)n - mdlen) == 1 &&
	    EVP_DigestFinal_ex(ctx, dig, &dlen) == 1 && dlen == mdlen)
		rc = CRYPTO_memcmp(dig, raw, mdlen) == 0;
	EVP_MD_CTX_free(ctx);
	OPENSSL_cleanse(dig, sizeof(dig));
	return rc;
}

static int verify_crypt(const char *hash, size_t len, const char *password)
{
	struct crypt_data *cd = xcalloc(1, sizeof(*cd));
	char *h = xmemdup0(hash, len);
	/* crypt_rn: libxcrypt's crypt_r that returns NULL on failure (and, unlike crypt_r, is
	   not replaced by the sanitizers' interceptor, which cannot find libxcrypt's) */
	const char *out = crypt_rn(password, h, cd, (int)sizeof(*cd));
	int rc = -1;

	if (out != NULL && out[0] != '*' && strlen(out) == len)
		rc = CRYPTO_memcmp(out, h, len) == 0;
	OPENSSL_cleanse(cd, sizeof(*cd));
	free(cd);
	free(h);
	return rc;
}

int ldapauth_passwd_verify(const char *stored, size_t slen, const char *password)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		const struct scheme *s = &schemes[i];
		size_t nl = strlen(s->name);

		if (slen <= nl || !str_caseprefix(stored, slen, s->name))
			continue;
		if (s->md == NULL)
			return verify_crypt(stored + nl, slen - nl, password);
		return verify_digest(s, stored + nl, slen - nl, password);
	}
	return -1;
}

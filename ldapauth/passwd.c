/* passwd.c — owns stored password hashes: their local verification (lookup mode and the
 * users file) and their making (`mailctl pw`, `mailctl user add --password`). Schemes:
 * {SSHA} {SSHA256} {SSHA512} and their unsalted forms with OpenSSL digests; {CRYPT} through
 * crypt(3) (libxcrypt: yescrypt, sha512-crypt...); {ARGON2} as slapd's argon2 module keeps it
 * (the encoded "$argon2id$v=19$m=...,t=...,p=...$salt$hash", libargon2); {SCRAM-SHA-256} as
 * "ITERATIONS,SALT,STOREDKEY,SERVERKEY" (base64, RFC 5802/7677, of the SASLprep'd password),
 * which also lets a SCRAM server answer without the password. Comparisons run in constant time.
 * Cleartext values are never accepted. */
#include <argon2.h>
#include <crypt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/buf.h"
#include "common/sasl.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "ldapauth/ldapauth_private.h"

/* Costs of what is made here: OpenLDAP argon2.so's defaults, RFC 7677's minimum for SCRAM
   (4096 iterations). */
#define ARGON2_T 3
#define ARGON2_M_KIB 4096
#define ARGON2_P 1
#define SCRAM_ITER 4096
#define SCRAM_ITER_MAX 10000000
#define SALT_LEN 16

enum kind { K_DIGEST, K_CRYPT, K_ARGON2, K_SCRAM };

struct scheme {
	const char *name; /* with braces */
	enum kind kind;
	const char *md; /* K_DIGEST: the OpenSSL digest */
	bool salted;
};

static const struct scheme schemes[] = {
	{ "{SSHA}", K_DIGEST, "SHA1", true },
	{ "{SSHA256}", K_DIGEST, "SHA256", true },
	{ "{SSHA512}", K_DIGEST, "SHA512", true },
	{ "{SHA}", K_DIGEST, "SHA1", false },
	{ "{SHA256}", K_DIGEST, "SHA256", false },
	{ "{SHA512}", K_DIGEST, "SHA512", false },
	{ "{CRYPT}", K_CRYPT, NULL, false },
	{ "{ARGON2}", K_ARGON2, NULL, false },
	{ "{SCRAM-SHA-256}", K_SCRAM, "SHA256", false },
};

const char *const ldapauth_passwd_schemes[] = { "SSHA",   "SSHA256",       "SSHA512", "CRYPT",
						"ARGON2", "SCRAM-SHA-256", NULL };

/* base64 of p[0..n) into out (NUL-terminated); the length. */
static size_t b64(const unsigned char *p, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* Decodes base64 b[0..len) into raw (at most size bytes): the length, -1 when malformed. */
static int unb64(const char *b, size_t len, unsigned char *raw, size_t size)
{
	int n, pad;

	if (len == 0 || len % 4 != 0 || len / 4 * 3 > size)
		return -1;
	n = EVP_DecodeBlock(raw, (const unsigned char *)b, (int)len);
	if (n < 0)
		return -1;
	pad = (b[len - 1] == '=') + (len > 1 && b[len - 2] == '=');
	return n - pad;
}

static int verify_digest(const struct scheme *s, const char *b64s, size_t len,
			 const char *password)
{
	unsigned char raw[256], dig[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	int n, rc = -1;
	const EVP_MD *md = EVP_get_digestbyname(s->md);
	size_t mdlen = md != NULL ? (size_t)EVP_MD_get_size(md) : 0;
	EVP_MD_CTX *ctx;

	if (md == NULL || (n = unb64(b64s, len, raw, sizeof(raw))) < 0)
		return -1;
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

static int verify_argon2(const char *enc, size_t len, const char *password)
{
	char *e = xmemdup0(enc, len);
	argon2_type t = strncmp(e, "$argon2id$", 10) == 0 ? Argon2_id
			: strncmp(e, "$argon2i$", 9) == 0 ? Argon2_i
			: strncmp(e, "$argon2d$", 9) == 0 ? Argon2_d
							  : (argon2_type)-1;
	int rc = -1, r;

	if ((int)t != -1) {
		r = argon2_verify(e, password, strlen(password), t);
		rc = r == ARGON2_OK ? 1 : r == ARGON2_VERIFY_MISMATCH ? 0 : -1;
	}
	free(e);
	return rc;
}

/* SCRAM's StoredKey and ServerKey of password (RFC 5802 3: Hi(Normalize(password)), the
   normalization SASLprep as a stored string, common/sasl_prep.c). A password SASLprep refuses
   is used as given when a secret is checked (one made before Heron prepared passwords, or by
   a tool that does not); a secret is never made of one (ldapauth_passwd_hash). */
static int scram_keys(const char *password, const unsigned char *salt, size_t slen, unsigned iter,
		      unsigned char stored[32], unsigned char server[32])
{
	unsigned char salted[32], client[32];
	char prep[SASL_PREP_MAX + 1];
	unsigned int n = 0;
	int ok;

	if (sasl_saslprep(password, true, prep, sizeof(prep)) == 0)
		password = prep;
	ok = PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)slen, (int)iter,
			       EVP_sha256(), 32, salted) == 1 &&
	     HMAC(EVP_sha256(), salted, 32, (const unsigned char *)"Client Key", 10, client, &n) !=
		     NULL &&
	     n == 32 && EVP_Digest(client, 32, stored, &n, EVP_sha256(), NULL) == 1 && n == 32 &&
	     HMAC(EVP_sha256(), salted, 32, (const unsigned char *)"Server Key", 10, server, &n) !=
		     NULL &&
	     n == 32;
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(client, sizeof(client));
	OPENSSL_cleanse(prep, sizeof(prep));
	return ok ? 0 : -1;
}

static int verify_scram(const char *v, size_t len, const char *password)
{
	struct str_view rest = { v, len }, f[4];
	unsigned char salt[256], want[64], stored[32], server[32];
	uint64_t iter;
	int slen, n = 0, rc;

	while (n < 4 && str_split_next(&rest, ',', &f[n]))
		n++;
	if (n != 4 || rest.len != 0 || str_to_u64(f[0].p, f[0].len, SCRAM_ITER_MAX, &iter) < 0 ||
	    iter == 0 || (slen = unb64(f[1].p, f[1].len, salt, sizeof(salt))) <= 0 ||
	    unb64(f[2].p, f[2].len, want, sizeof(want)) != 32 ||
	    scram_keys(password, salt, (size_t)slen, (unsigned)iter, stored, server) < 0)
		return -1;
	rc = CRYPTO_memcmp(stored, want, 32) == 0;
	OPENSSL_cleanse(stored, sizeof(stored));
	OPENSSL_cleanse(server, sizeof(server));
	return rc;
}

int ldapauth_passwd_verify(const char *stored, size_t slen, const char *password)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		const struct scheme *s = &schemes[i];
		size_t nl = strlen(s->name);

		if (slen <= nl || !str_caseprefix(stored, slen, s->name))
			continue;
		switch (s->kind) {
		case K_CRYPT:
			return verify_crypt(stored + nl, slen - nl, password);
		case K_ARGON2:
			return verify_argon2(stored + nl, slen - nl, password);
		case K_SCRAM:
			return verify_scram(stored + nl, slen - nl, password);
		case K_DIGEST:
			return verify_digest(s, stored + nl, slen - nl, password);
		}
	}
	return -1;
}

/* ---- making hashes ---- */

static char *hash_digest(const struct scheme *s, const char *password)
{
	unsigned char raw[EVP_MAX_MD_SIZE + SALT_LEN];
	unsigned int dlen = 0;
	const EVP_MD *md = EVP_get_digestbyname(s->md);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char out[2 * sizeof(raw) + 32];
	char *r = NULL;

	if (md != NULL && ctx != NULL && RAND_bytes(raw + EVP_MAX_MD_SIZE, SALT_LEN) == 1 &&
	    EVP_DigestInit_ex(ctx, md, NULL) == 1 &&
	    EVP_DigestUpdate(ctx, password, strlen(password)) == 1 &&
	    EVP_DigestUpdate(ctx, raw + EVP_MAX_MD_SIZE, SALT_LEN) == 1 &&
	    EVP_DigestFinal_ex(ctx, raw, &dlen) == 1) {
		memmove(raw + dlen, raw + EVP_MAX_MD_SIZE, SALT_LEN);
		b64(raw, dlen + SALT_LEN, out);
		r = xasprintf("%s%s", s->name, out);
	}
	EVP_MD_CTX_free(ctx);
	OPENSSL_cleanse(raw, sizeof(raw));
	return r;
}

static char *hash_crypt(const char *password)
{
	struct crypt_data *cd = xcalloc(1, sizeof(*cd));
	char setting[CRYPT_GENSALT_OUTPUT_SIZE];
	const char *out = NULL;
	char *r = NULL;

	/* libxcrypt's preferred method (yescrypt on Debian 12), the one crypt(3) checks */
	if (crypt_gensalt_rn(NULL, 0, NULL, 0, setting, sizeof(setting)) != NULL)
		out = crypt_rn(password, setting, cd, (int)sizeof(*cd));
	if (out != NULL && out[0] != '*')
		r = xasprintf("{CRYPT}%s", out);
	OPENSSL_cleanse(cd, sizeof(*cd));
	free(cd);
	return r;
}

static char *hash_argon2(const char *password)
{
	unsigned char salt[SALT_LEN];
	size_t elen = argon2_encodedlen(ARGON2_T, ARGON2_M_KIB, ARGON2_P, SALT_LEN, 32, Argon2_id);
	char *enc = xmalloc(elen + 1), *r = NULL;

	if (RAND_bytes(salt, sizeof(salt)) == 1 &&
	    argon2_hash(ARGON2_T, ARGON2_M_KIB, ARGON2_P, password, strlen(password), salt,
			sizeof(salt), NULL, 32, enc, elen, Argon2_id,
			ARGON2_VERSION_13) == ARGON2_OK)
		r = xasprintf("{ARGON2}%s", enc);
	free(enc);
	return r;
}

static char *hash_scram(const char *password)
{
	unsigned char salt[SALT_LEN], stored[32], server[32];
	char s64[32], st64[48], sv64[48], *r = NULL;

	if (RAND_bytes(salt, sizeof(salt)) == 1 &&
	    scram_keys(password, salt, sizeof(salt), SCRAM_ITER, stored, server) == 0) {
		b64(salt, sizeof(salt), s64);
		b64(stored, 32, st64);
		b64(server, 32, sv64);
		r = xasprintf("{SCRAM-SHA-256}%d,%s,%s,%s", SCRAM_ITER, s64, st64, sv64);
	}
	OPENSSL_cleanse(stored, sizeof(stored));
	OPENSSL_cleanse(server, sizeof(server));
	return r;
}

char *ldapauth_passwd_hash(const char *scheme, const char *password, const char **error_r)
{
	char name[32];
	char *r = NULL;

	*error_r = NULL;
	if (strlen(scheme) + 3 > sizeof(name) || strchr(scheme, '{') != NULL) {
		*error_r = "unknown scheme";
		return NULL;
	}
	snprintf(name, sizeof(name), "{%s}", scheme);
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		const struct scheme *s = &schemes[i];

		if (strcasecmp(s->name, name) != 0)
			continue;
		if (s->kind == K_DIGEST && !s->salted) {
			*error_r = "unsalted hashes are not made (use the salted form)";
			return NULL;
		}
		if (s->kind == K_SCRAM && !sasl_saslprep_ok(password, true)) {
			*error_r = "the password is not valid for SCRAM (SASLprep, RFC 4013: "
				   "UTF-8 without control or unassigned characters)";
			return NULL;
		}
		r = s->kind == K_DIGEST   ? hash_digest(s, password)
		    : s->kind == K_CRYPT  ? hash_crypt(password)
		    : s->kind == K_ARGON2 ? hash_argon2(password)
					  : hash_scram(password);
		if (r == NULL)
			*error_r = "the hash could not be made";
		return r;
	}
	*error_r = "unknown scheme";
	return NULL;
}

/* dkim_sign.c — DKIM signing (RFC 6376 5, RFC 8463): signing keys from PEM files, the
 * DKIM-Signature field (relaxed/relaxed, the header list with From oversigned), the key record
 * to publish, and the signature primitives verification shares (dkim_pkey_sign/verify). */
#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/dkim.h"
#include "mailauth/dkim_private.h"

#define SIG_FIELD_MAX (64 * 1024) /* the DKIM-Signature field written */

const char *const dkim_default_headers[] = {
	"from",
	"reply-to",
	"subject",
	"date",
	"to",
	"cc",
	"message-id",
	"in-reply-to",
	"references",
	"mime-version",
	"content-type",
	"content-transfer-encoding",
	"content-language",
	"list-id",
	"list-unsubscribe",
	"list-unsubscribe-post",
	"sender",
	"resent-from",
	"resent-date",
	"resent-to",
	"resent-cc",
};
const size_t dkim_ndefault_headers = sizeof(dkim_default_headers) /
				     sizeof(dkim_default_headers[0]);
static const char *const default_oversign[] = { "from" };

int dkim_signkey_load(const char *domain, const char *selector, const char *path,
		      struct dkim_signkey **k_r, char **error_r)
{
	FILE *f = fopen(path, "r");
	EVP_PKEY *pkey;
	enum dkim_alg alg;

	if (f == NULL) {
		*error_r = xasprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (pkey == NULL) {
		*error_r = xasprintf("%s: not a PEM private key", path);
		return -1;
	}
	if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519) {
		alg = DKIM_ED25519_SHA256;
	} else if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA && EVP_PKEY_get_bits(pkey) >= 1024) {
		alg = DKIM_RSA_SHA256;
	} else {
		EVP_PKEY_free(pkey);
		*error_r = xasprintf("%s: neither an RSA key of 1024 bits or more nor Ed25519",
				     path);
		return -1;
	}
	if (!dns_name_valid(domain) || !dns_name_valid(selector)) {
		EVP_PKEY_free(pkey);
		*error_r = xasprintf("%s:%s: not a domain and selector", domain, selector);
		return -1;
	}
	struct dkim_signkey *k = xcalloc(1, sizeof(*k));
	k->domain = xstrdup(domain);
	str_lower(k->domain, strlen(k->domain));
	k->selector = xstrdup(selector);
	k->pkey = pkey;
	k->alg = alg;
	*k_r = k;
	return 0;
}

void dkim_signkey_free(struct dkim_signkey **kp)
{
	struct dkim_signkey *k = *kp;

	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k->domain);
	free(k->selector);
	free(k);
	*kp = NULL;
}

int dkim_pkey_sign(EVP_PKEY *pkey, enum dkim_alg alg, const unsigned char digest[32],
		   unsigned char *sig, size_t *siglen)
{
	int ok;

	if (alg == DKIM_ED25519_SHA256) {
		EVP_MD_CTX *md = EVP_MD_CTX_new();

		ok = md != NULL && EVP_DigestSignInit(md, NULL, NULL, NULL, pkey) == 1 &&
		     EVP_DigestSign(md, sig, siglen, digest, 32) == 1;
		EVP_MD_CTX_free(md);
		return ok ? 0 : -1;
	}
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(pkey, NULL);
	ok = c != NULL && EVP_PKEY_sign_init(c) == 1 &&
	     EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_PADDING) == 1 &&
	     EVP_PKEY_CTX_set_signature_md(c, EVP_sha256()) == 1 &&
	     EVP_PKEY_sign(c, sig, siglen, digest, 32) == 1;
	EVP_PKEY_CTX_free(c);
	return ok ? 0 : -1;
}

int dkim_pkey_verify(EVP_PKEY *pkey, enum dkim_alg alg, const unsigned char digest[32],
		     const unsigned char *sig, size_t siglen)
{
	int ok;

	if (alg == DKIM_ED25519_SHA256) {
		EVP_MD_CTX *md = EVP_MD_CTX_new();

		ok = md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pkey) == 1 &&
		     EVP_DigestVerify(md, sig, siglen, digest, 32) == 1;
		EVP_MD_CTX_free(md);
		return ok ? 0 : -1;
	}
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new(pkey, NULL);
	ok = c != NULL && EVP_PKEY_verify_init(c) == 1 &&
	     EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_PADDING) == 1 &&
	     EVP_PKEY_CTX_set_signature_md(c, EVP_sha256()) == 1 &&
	     EVP_PKEY_verify(c, sig, siglen, digest, 32) == 1;
	EVP_PKEY_CTX_free(c);
	return ok ? 0 : -1;
}

static size_t count_fields(const struct ma_header *f, size_t nf, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < nf; i++)
		n += ma_header_is(&f[i], name);
	return n;
}

static bool listed(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(names[i], name) == 0)
			return true;
	return false;
}

/* h=: each name as often as it is present, once more when oversigned. */
static void pick_headers(struct dkim_sig *sig, const struct ma_header *f, size_t nf,
			 const struct dkim_sign_opts *o)
{
	const char *const *names = o->headers ? o->headers : dkim_default_headers;
	size_t nnames = o->headers ? o->nheaders : dkim_ndefault_headers;
	const char *const *over = o->oversign ? o->oversign : default_oversign;
	size_t nover = o->oversign ? o->noversign : 1;

	for (size_t i = 0; i < nnames; i++) {
		size_t k = count_fields(f, nf, names[i]) + listed(over, nover, names[i]);

		for (; k > 0 && sig->nh < DKIM_H_MAX; k--) {
			sig->h[sig->nh] = xstrdup(names[i]);
			str_lower(sig->h[sig->nh], strlen(names[i]));
			sig->nh++;
		}
	}
}

/* Appends text to out folding before it when the line would pass 76 columns. */
static void put_folded(struct buf *out, size_t *col, const char *text)
{
	size_t n = strlen(text);

	if (*col + n > 76 && *col > 1) {
		buf_puts(out, "\r\n\t");
		*col = 8;
	}
	buf_puts(out, text);
	*col += n;
}

/* " name=value;" */
static void put_tag(struct buf *out, size_t *col, const char *name, const char *v)
{
	char tmp[600];

	snprintf(tmp, sizeof(tmp), "%s=%s;", name, v);
	if (*col + 1 + strlen(tmp) > 76) {
		buf_puts(out, "\r\n\t");
		*col = 8;
	} else {
		buf_putc(out, ' ');
		(*col)++;
	}
	put_folded(out, col, tmp);
}

int dkim_sign(const struct dkim_signkey *k, const struct ma_header *f, size_t nf,
	      const unsigned char bh[32], const struct dkim_sign_opts *o, struct buf *out,
	      const char **err)
{
	struct dkim_sig sig = { .hc = DKIM_RELAXED, .bc = DKIM_RELAXED };
	struct buf field, input;
	char num[32], bh64[64], b64[2 * DKIM_SIG_MAX];
	unsigned char digest[32], sigbytes[DKIM_SIG_MAX];
	size_t col = 15, siglen = sizeof(sigbytes);
	int rc = -1;

	buf_init(&field, 1024, SIG_FIELD_MAX);
	buf_init(&input, 4096, MA_HEADER_MAX + SIG_FIELD_MAX);
	pick_headers(&sig, f, nf, o);
	buf_puts(&field, "DKIM-Signature: v=1;");
	put_tag(&field, &col, "a", dkim_alg_name(k->alg));
	put_tag(&field, &col, "c", "relaxed/relaxed");
	put_tag(&field, &col, "d", k->domain);
	put_tag(&field, &col, "s", k->selector);
	snprintf(num, sizeof(num), "%lld", (long long)o->now);
	put_tag(&field, &col, "t", num);
	if (o->expire_s > 0) {
		snprintf(num, sizeof(num), "%lld", (long long)(o->now + o->expire_s));
		put_tag(&field, &col, "x", num);
	}
	buf_puts(&field, "\r\n\t");
	col = 8;
	for (size_t i = 0; i < sig.nh; i++) {
		char name[300];

		snprintf(name, sizeof(name), "%s%s%s", i == 0 ? "h=" : "", sig.h[i],
			 i + 1 < sig.nh ? ":" : ";");
		put_folded(&field, &col, name);
	}
	ma_b64_encode(bh, 32, bh64);
	put_tag(&field, &col, "bh", bh64);
	buf_puts(&field, "\r\n\tb=");
	buf_cstr(&field);
	sig.stripped = field.data;
	sig.stripped_len = field.len;
	if (dkim_header_input(&sig, f, nf, &input) < 0) {
		*err = "header too large to sign";
		goto done;
	}
	sig.stripped = NULL;
	EVP_Digest(input.data, input.len, digest, NULL, EVP_sha256(), NULL);
	if (dkim_pkey_sign(k->pkey, k->alg, digest, sigbytes, &siglen) < 0) {
		*err = "signing failed";
		goto done;
	}
	size_t n = ma_b64_encode(sigbytes, siglen, b64);
	for (size_t i = 0; i < n; i += 72) {
		if (i > 0)
			buf_puts(&field, "\r\n\t ");
		buf_append(&field, b64 + i, n - i < 72 ? n - i : 72);
	}
	buf_puts(&field, "\r\n");
	rc = buf_append(out, field.data, field.len);
	if (rc < 0)
		*err = "no room for the signature";
done:
	sig.stripped = NULL;
	dkim_sig_release(&sig);
	buf_release(&field);
	buf_release(&input);
	return rc;
}

char *dkim_txt_record_pkey(EVP_PKEY *pkey)
{
	unsigned char raw[32], *der = NULL;
	char *b64, *txt;
	size_t len = sizeof(raw);
	int dl;

	if (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519) {
		if (EVP_PKEY_get_raw_public_key(pkey, raw, &len) != 1)
			return NULL;
		b64 = xmalloc(64);
		ma_b64_encode(raw, len, b64);
		txt = xasprintf("v=DKIM1; k=ed25519; p=%s", b64);
		free(b64);
		return txt;
	}
	if ((dl = i2d_PUBKEY(pkey, &der)) <= 0)
		return NULL;
	b64 = xmalloc(4 * ((size_t)dl + 2) / 3 + 4);
	ma_b64_encode(der, (size_t)dl, b64);
	OPENSSL_free(der);
	txt = xasprintf("v=DKIM1; k=rsa; p=%s", b64);
	free(b64);
	return txt;
}

char *dkim_txt_record(const struct dkim_signkey *k)
{
	return dkim_txt_record_pkey(k->pkey);
}

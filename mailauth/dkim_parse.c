/* dkim_parse.c — DKIM's texts: the tag=value list (RFC 6376 3.2), the DKIM-Signature field
 * (3.5) and the key record (3.6.1), and the header hash input a signature covers (5.4). Every
 * reader is bounded by its input; nothing here does I/O. */
#include <string.h>

#include <openssl/x509.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/dkim.h"

static bool fws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

int dkim_tags_parse(const char *p, size_t len, struct dkim_tag *tags, size_t max, size_t *n_r,
		    const char **err)
{
	size_t i = 0, n = 0;

	*n_r = 0;
	for (;;) {
		while (i < len && fws(p[i]))
			i++;
		if (i == len)
			break;
		if (!alpha(p[i])) {
			*err = "bad tag name";
			return -1;
		}
		size_t ns = i;
		while (i < len && (alpha(p[i]) || digit(p[i]) || p[i] == '_'))
			i++;
		size_t nl = i - ns;
		while (i < len && fws(p[i]))
			i++;
		if (i == len || p[i] != '=') {
			*err = "tag without =";
			return -1;
		}
		i++;
		while (i < len && fws(p[i]))
			i++;
		size_t vs = i;
		while (i < len && p[i] != ';') {
			unsigned char c = (unsigned char)p[i];

			if (c < 0x20 && !fws((char)c)) {
				*err = "control character in a tag value";
				return -1;
			}
			i++;
		}
		size_t ve = i;
		while (ve > vs && fws(p[ve - 1]))
			ve--;
		for (size_t k = 0; k < n; k++) {
			if (tags[k].nlen == nl && memcmp(tags[k].name, p + ns, nl) == 0) {
				*err = "duplicate tag";
				return -1;
			}
		}
		if (n == max) {
			*err = "too many tags";
			return -1;
		}
		tags[n].name = p + ns;
		tags[n].nlen = nl;
		tags[n].val = p + vs;
		tags[n].vlen = ve - vs;
		n++;
		if (i == len)
			break;
		i++; /* the ';' */
	}
	*n_r = n;
	return 0;
}

const struct dkim_tag *dkim_tag_find(const struct dkim_tag *tags, size_t n, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < n; i++)
		if (tags[i].nlen == nl && memcmp(tags[i].name, name, nl) == 0)
			return &tags[i];
	return NULL;
}

static bool tag_is(const struct dkim_tag *t, const char *v)
{
	return t != NULL && str_caseeq(t->val, t->vlen, v, strlen(v));
}

/* A value without FWS into out (lower case when lower): -1 when it has FWS or is too long. */
static int tag_copy(const struct dkim_tag *t, char *out, size_t size, bool lower)
{
	if (t->vlen == 0 || t->vlen >= size)
		return -1;
	for (size_t i = 0; i < t->vlen; i++) {
		char c = t->val[i];

		if (fws(c))
			return -1;
		out[i] = lower && c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
	}
	out[t->vlen] = '\0';
	return 0;
}

static int tag_number(const struct dkim_tag *t, uint64_t max, uint64_t *v_r)
{
	if (t->vlen == 0 || t->vlen > 20)
		return -1;
	for (size_t i = 0; i < t->vlen; i++)
		if (!digit(t->val[i]))
			return -1;
	return str_to_u64(t->val, t->vlen, max, v_r);
}

const char *dkim_alg_name(enum dkim_alg a)
{
	return a == DKIM_ED25519_SHA256 ? "ed25519-sha256" : "rsa-sha256";
}

static int canon_of(const char *p, size_t len, enum dkim_canon *c)
{
	if (str_caseeq(p, len, "relaxed", 7))
		*c = DKIM_RELAXED;
	else if (str_caseeq(p, len, "simple", 6))
		*c = DKIM_SIMPLE;
	else
		return -1;
	return 0;
}

/* c=header[/body], each simple (the default) or relaxed. */
static int parse_canon(const struct dkim_tag *t, struct dkim_sig *sig)
{
	sig->hc = sig->bc = DKIM_SIMPLE;
	if (t == NULL)
		return 0;
	const char *slash = memchr(t->val, '/', t->vlen);
	size_t hl = slash != NULL ? (size_t)(slash - t->val) : t->vlen;

	if (canon_of(t->val, hl, &sig->hc) < 0)
		return -1;
	return slash == NULL ? 0 : canon_of(slash + 1, t->vlen - hl - 1, &sig->bc);
}

/* h=: colon-separated names, FWS around them. */
static int parse_h(const struct dkim_tag *t, struct dkim_sig *sig)
{
	struct str_view v = { t->val, t->vlen }, f;
	bool from = false;

	while (str_split_next(&v, ':', &f)) {
		while (f.len > 0 && fws(f.p[0])) {
			f.p++;
			f.len--;
		}
		while (f.len > 0 && fws(f.p[f.len - 1]))
			f.len--;
		if (f.len == 0 || sig->nh == DKIM_H_MAX)
			return -1;
		for (size_t i = 0; i < f.len; i++)
			if ((unsigned char)f.p[i] <= ' ' || f.p[i] == ':' || f.p[i] > '~')
				return -1;
		char *name = xmemdup0(f.p, f.len);
		str_lower(name, f.len);
		from |= strcmp(name, "from") == 0;
		sig->h[sig->nh++] = name;
	}
	return from ? 0 : -2;
}

/* The field with b='s value (from after "b=" to the value's end) taken out, without its
   final CRLF. */
static void strip_b(struct dkim_sig *sig, const char *raw, size_t len, const struct dkim_tag *b)
{
	const char *eq = b->name + b->nlen;
	size_t end = len;

	while (*eq != '=')
		eq++;
	eq++;
	if (end >= 1 && raw[end - 1] == '\n')
		end--;
	if (end >= 1 && raw[end - 1] == '\r')
		end--;
	size_t head = (size_t)(eq - raw), tail = (size_t)(b->val + b->vlen - raw);
	sig->stripped_len = head + (end - tail);
	sig->stripped = xmalloc(sig->stripped_len + 1);
	memcpy(sig->stripped, raw, head);
	memcpy(sig->stripped + head, raw + tail, end - tail);
	sig->stripped[sig->stripped_len] = '\0';
}

static int sig_fail(const char **err, const char *why)
{
	*err = why;
	return -1;
}

int dkim_sig_parse(const char *raw, size_t len, struct dkim_sig *sig, const char **err)
{
	struct dkim_tag tags[DKIM_TAGS_MAX];
	const struct dkim_tag *t;
	const char *colon = memchr(raw, ':', len);
	size_t n;
	uint64_t u;
	int rc;

	memset(sig, 0, sizeof(*sig));
	if (colon == NULL)
		return sig_fail(err, "not a header field");
	size_t off = (size_t)(colon - raw) + 1;
	if (dkim_tags_parse(raw + off, len - off, tags, DKIM_TAGS_MAX, &n, err) < 0)
		return -1;
#define REQ(name) ((t = dkim_tag_find(tags, n, name)) != NULL)
	if (!REQ("v") || !tag_is(t, "1"))
		return sig_fail(err, "v= is not 1");
	if (!REQ("a"))
		return sig_fail(err, "a= missing");
	if (tag_is(t, "rsa-sha256"))
		sig->alg = DKIM_RSA_SHA256;
	else if (tag_is(t, "ed25519-sha256"))
		sig->alg = DKIM_ED25519_SHA256;
	else if (tag_is(t, "rsa-sha1"))
		return sig_fail(err, "rsa-sha1 is not accepted (RFC 8301)");
	else
		return sig_fail(err, "unknown algorithm");
	if (parse_canon(dkim_tag_find(tags, n, "c"), sig) < 0)
		return sig_fail(err, "bad c=");
	if (!REQ("d") || tag_copy(t, sig->d, sizeof(sig->d), true) < 0 ||
	    !dns_name_valid(sig->d) || strchr(sig->d, '.') == NULL)
		return sig_fail(err, "bad d=");
	if (!REQ("s") || tag_copy(t, sig->s, sizeof(sig->s), true) < 0 || !dns_name_valid(sig->s))
		return sig_fail(err, "bad s=");
	if (!REQ("h") || (rc = parse_h(t, sig)) < 0)
		return sig_fail(err, t != NULL && rc == -2 ? "From is not signed" : "bad h=");
	if ((t = dkim_tag_find(tags, n, "i")) != NULL) {
		const char *at;

		if (tag_copy(t, sig->i, sizeof(sig->i), false) < 0 ||
		    (at = strrchr(sig->i, '@')) == NULL || !ma_domain_under(at + 1, sig->d))
			return sig_fail(err, "i= is not in d=");
	}
	if ((t = dkim_tag_find(tags, n, "l")) != NULL) {
		if (t->vlen == 0 || strspn(t->val, "0123456789") < t->vlen)
			return sig_fail(err, "bad l=");
		sig->has_l = true;
		/* more digits than fit: longer than any body */
		if (t->vlen > 18 || str_to_u64(t->val, t->vlen, UINT64_MAX / 2, &sig->l) < 0)
			sig->l = UINT64_MAX / 2;
	}
	if ((t = dkim_tag_find(tags, n, "q")) != NULL &&
	    str_casefind(t->val, t->vlen, "dns/txt", 7) == NULL)
		return sig_fail(err, "q= has no dns/txt");
	if ((t = dkim_tag_find(tags, n, "t")) != NULL) {
		if (tag_number(t, INT64_MAX / 2, &u) < 0)
			return sig_fail(err, "bad t=");
		sig->has_t = true;
		sig->t = (int64_t)u;
	}
	if ((t = dkim_tag_find(tags, n, "x")) != NULL) {
		if (tag_number(t, INT64_MAX / 2, &u) < 0)
			return sig_fail(err, "bad x=");
		sig->has_x = true;
		sig->x = (int64_t)u;
		if (sig->has_t && sig->x < sig->t)
			return sig_fail(err, "x= before t=");
	}
	if (!REQ("bh"))
		return sig_fail(err, "bh= missing");
	if ((rc = ma_b64_decode_fws(t->val, t->vlen, sig->bh, sizeof(sig->bh))) != 32)
		return sig_fail(err, "bad bh=");
	sig->bhlen = (size_t)rc;
	if (!REQ("b"))
		return sig_fail(err, "b= missing");
	if ((rc = ma_b64_decode_fws(t->val, t->vlen, sig->b, sizeof(sig->b))) <= 0)
		return sig_fail(err, "bad b=");
	sig->blen = (size_t)rc;
	size_t k = 0;
	for (size_t j = 0; j < t->vlen && k < 8; j++)
		if (!fws(t->val[j]))
			sig->b_prefix[k++] = t->val[j];
	sig->b_prefix[k] = '\0';
	strip_b(sig, raw, len, t);
#undef REQ
	return 0;
}

void dkim_sig_release(struct dkim_sig *sig)
{
	for (size_t i = 0; i < sig->nh; i++)
		free(sig->h[i]);
	sig->nh = 0;
	free(sig->stripped);
	sig->stripped = NULL;
}

static int key_fail(const char **err, const char *why)
{
	*err = why;
	return -1;
}

/* k=rsa: SubjectPublicKeyInfo as published by `openssl rsa -pubout` (RFC 6376 appendix C),
   or a bare RSAPublicKey (3.6.1's wording). */
static EVP_PKEY *rsa_key(const unsigned char *der, size_t len)
{
	const unsigned char *p = der;
	EVP_PKEY *k = d2i_PUBKEY(NULL, &p, (long)len);

	if (k != NULL && (p != der + len || EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA)) {
		EVP_PKEY_free(k);
		return NULL;
	}
	if (k == NULL) {
		p = der;
		k = d2i_PublicKey(EVP_PKEY_RSA, NULL, &p, (long)len);
		if (k != NULL && p != der + len) {
			EVP_PKEY_free(k);
			k = NULL;
		}
	}
	return k;
}

int dkim_key_parse(const char *txt, size_t len, enum dkim_alg alg, struct dkim_key *k,
		   const char **err)
{
	struct dkim_tag tags[DKIM_TAGS_MAX];
	const struct dkim_tag *t;
	unsigned char der[2048];
	size_t n;
	int dl;

	memset(k, 0, sizeof(*k));
	if (dkim_tags_parse(txt, len, tags, DKIM_TAGS_MAX, &n, err) < 0)
		return -1;
	if ((t = dkim_tag_find(tags, n, "v")) != NULL && (t != &tags[0] || !tag_is(t, "DKIM1")))
		return key_fail(err, "key record v= is not DKIM1");
	if ((t = dkim_tag_find(tags, n, "h")) != NULL &&
	    str_casefind(t->val, t->vlen, "sha256", 6) == NULL)
		return key_fail(err, "key does not allow sha256");
	t = dkim_tag_find(tags, n, "k");
	enum dkim_alg kalg = t == NULL || tag_is(t, "rsa") ? DKIM_RSA_SHA256
			     : tag_is(t, "ed25519")        ? DKIM_ED25519_SHA256
							   : (enum dkim_alg) - 1;
	if ((int)kalg == -1)
		return key_fail(err, "unknown key type");
	if (kalg != alg)
		return key_fail(err, "key type does not match the algorithm");
	if ((t = dkim_tag_find(tags, n, "s")) != NULL && !tag_is(t, "*") &&
	    str_casefind(t->val, t->vlen, "email", 5) == NULL)
		return key_fail(err, "key not for email");
	if ((t = dkim_tag_find(tags, n, "t")) != NULL) {
		struct str_view v = { t->val, t->vlen }, f;

		while (str_split_next(&v, ':', &f)) {
			f = str_trim(f);
			k->testing |= str_caseeq(f.p, f.len, "y", 1);
			k->strict |= str_caseeq(f.p, f.len, "s", 1);
		}
	}
	if ((t = dkim_tag_find(tags, n, "p")) == NULL)
		return key_fail(err, "key record without p=");
	k->alg = alg;
	if (t->vlen == 0) {
		k->revoked = true;
		return key_fail(err, "key revoked");
	}
	if ((dl = ma_b64_decode_fws(t->val, t->vlen, der, sizeof(der))) <= 0)
		return key_fail(err, "bad p=");
	if (alg == DKIM_ED25519_SHA256) {
		if (dl != 32)
			return key_fail(err, "ed25519 key is not 32 bytes");
		k->pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, der, 32);
	} else {
		k->pkey = rsa_key(der, (size_t)dl);
	}
	if (k->pkey == NULL)
		return key_fail(err, "unusable public key");
	k->bits = (unsigned)EVP_PKEY_get_bits(k->pkey);
	return 0;
}

void dkim_key_release(struct dkim_key *k)
{
	EVP_PKEY_free(k->pkey);
	k->pkey = NULL;
}

int dkim_header_input(const struct dkim_sig *sig, const struct ma_header *f, size_t nf,
		      struct buf *out)
{
	bool *used = xcalloc(nf ? nf : 1, sizeof(*used));
	int rc = 0;

	for (size_t i = 0; i < sig->nh && rc == 0; i++) {
		for (size_t j = nf; j-- > 0;) {
			if (!used[j] && ma_header_is(&f[j], sig->h[i])) {
				used[j] = true;
				rc = dkim_canon_header(sig->hc, f[j].raw, f[j].len, out);
				break;
			}
		}
	}
	free(used);
	if (rc < 0)
		return -1;
	size_t before = out->len;
	if (dkim_canon_header(sig->hc, sig->stripped, sig->stripped_len, out) < 0)
		return -1;
	if (sig->hc == DKIM_RELAXED && out->len >= before + 2)
		buf_truncate(out, out->len - 2); /* the signature's own field: no CRLF */
	return 0;
}

/* dkim_verify.c — DKIM verification (RFC 6376 6): every DKIM-Signature field of a message
 * (up to DKIM_VERIFY_MAX) gets its own body hash as the body streams by, then its key is
 * looked up (selector._domainkey.domain TXT) and the header hash checked. Results: pass,
 * fail (hashes differ), policy (valid, but l= leaves part of the body unsigned), permerror
 * (unusable signature or key: syntax, rsa-sha1, RSA key below the minimum, expired, revoked,
 * no key), temperror (the key lookup failed for now). */
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/dkim.h"
#include "mailauth/dkim_private.h"

struct vsig {
	struct dkim_verifier *v;
	struct dkim_sig sig;
	struct dkim_result *res;
	EVP_MD_CTX *md;
	struct dkim_body body;
	void *query;
	bool open; /* parsed, its body being hashed, result to come */
};

struct dkim_verifier {
	struct dkim_verify_opts o;
	const struct ma_header *f;
	size_t nf;
	struct vsig *s;
	struct dkim_result *res;
	size_t n;
	struct ma_resolver r;
	void (*done)(void *arg);
	void *arg;
	size_t pending;
};

static void set_result(struct dkim_result *res, enum ma_result r, const char *why)
{
	res->result = r;
	res->reason = why;
}

struct dkim_verifier *dkim_verifier_new(const struct dkim_verify_opts *o,
					const struct ma_header *fields, size_t nfields,
					bool header_overflow)
{
	struct dkim_verifier *v = xcalloc(1, sizeof(*v));
	size_t nsig = 0;

	v->o = *o;
	v->f = fields;
	v->nf = nfields;
	for (size_t i = 0; i < nfields; i++)
		nsig += ma_header_is(&fields[i], "DKIM-Signature");
	if (nsig > DKIM_VERIFY_MAX)
		nsig = DKIM_VERIFY_MAX;
	v->s = xcalloc(nsig ? nsig : 1, sizeof(*v->s));
	v->res = xcalloc(nsig ? nsig : 1, sizeof(*v->res));
	for (size_t i = 0; i < nfields && v->n < nsig; i++) {
		struct vsig *s;
		const char *err;

		if (!ma_header_is(&fields[i], "DKIM-Signature"))
			continue;
		s = &v->s[v->n];
		s->v = v;
		s->res = &v->res[v->n++];
		if (header_overflow) {
			set_result(s->res, MA_PERMERROR, "header section too large");
			continue;
		}
		if (dkim_sig_parse(fields[i].raw, fields[i].len, &s->sig, &err) < 0) {
			set_result(s->res, MA_PERMERROR, err);
			/* what could be read is reported */
			str_lcpy(s->res->d, s->sig.d, sizeof(s->res->d));
			str_lcpy(s->res->s, s->sig.s, sizeof(s->res->s));
			dkim_sig_release(&s->sig);
			continue;
		}
		str_lcpy(s->res->d, s->sig.d, sizeof(s->res->d));
		str_lcpy(s->res->s, s->sig.s, sizeof(s->res->s));
		if (s->sig.i[0])
			str_lcpy(s->res->i, s->sig.i, sizeof(s->res->i));
		else
			str_fmt(s->res->i, sizeof(s->res->i), "@%s", s->sig.d);
		memcpy(s->res->b_prefix, s->sig.b_prefix, sizeof(s->res->b_prefix));
		s->res->alg = s->sig.alg;
		s->md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(s->md, EVP_sha256(), NULL);
		dkim_body_init(&s->body, s->sig.bc, s->md, s->sig.has_l ? s->sig.l : UINT64_MAX);
		s->open = true;
	}
	return v;
}

void dkim_verifier_body(struct dkim_verifier *v, const char *p, size_t n)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->s[i].open)
			dkim_body_feed(&v->s[i].body, p, n);
}

static void close_sig(struct vsig *s)
{
	s->open = false;
	dkim_sig_release(&s->sig);
	EVP_MD_CTX_free(s->md);
	s->md = NULL;
}

/* The key answer for s: the header hash checked. */
static void check_key(struct vsig *s, const struct dns_answer *a)
{
	struct dkim_key key = { 0 };
	const char *err = "no key record";
	struct buf input;
	unsigned char digest[32];
	bool parsed = false;

	if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
		set_result(s->res, MA_TEMPERROR, "key lookup failed");
		return;
	}
	for (size_t i = 0; a->status == DNS_OK && i < a->n && !parsed; i++)
		if (a->rr[i].type == DNS_T_TXT &&
		    dkim_key_parse(a->rr[i].u.txt.text, a->rr[i].u.txt.len, s->sig.alg, &key,
				   &err) == 0)
			parsed = true;
	if (!parsed) {
		set_result(s->res, MA_PERMERROR, err);
		return;
	}
	s->res->bits = key.bits;
	s->res->testing = key.testing;
	if (key.alg == DKIM_RSA_SHA256 && key.bits < s->v->o.min_rsa_bits) {
		set_result(s->res, MA_PERMERROR, "key too small");
	} else if (key.strict && s->sig.i[0] && strcmp(strrchr(s->sig.i, '@') + 1, s->sig.d)) {
		set_result(s->res, MA_PERMERROR, "key is t=s and i= is a subdomain");
	} else {
		buf_init(&input, 4096, MA_HEADER_MAX + 64 * 1024);
		if (dkim_header_input(&s->sig, s->v->f, s->v->nf, &input) < 0) {
			set_result(s->res, MA_PERMERROR, "header too large");
		} else {
			EVP_Digest(input.data, input.len, digest, NULL, EVP_sha256(), NULL);
			if (dkim_pkey_verify(key.pkey, s->sig.alg, digest, s->sig.b, s->sig.blen) <
			    0)
				set_result(s->res, MA_FAIL, "signature did not verify");
			else if (s->sig.has_l && s->body.total > s->sig.l)
				set_result(s->res, MA_POLICY, "unsigned content after l=");
			else
				set_result(s->res, MA_PASS, NULL);
		}
		buf_release(&input);
	}
	dkim_key_release(&key);
}

static void key_cb(const struct dns_answer *a, void *arg)
{
	struct vsig *s = arg;
	struct dkim_verifier *v = s->v;

	s->query = NULL;
	check_key(s, a);
	close_sig(s);
	if (--v->pending == 0 && v->done != NULL)
		v->done(v->arg);
}

/* The body ended for s: its body hash and times checked; true when its key is needed. */
static bool body_checked(struct vsig *s)
{
	unsigned char bh[EVP_MAX_MD_SIZE];
	unsigned len = 0;

	dkim_body_end(&s->body);
	EVP_DigestFinal_ex(s->md, bh, &len);
	if (s->sig.has_l && s->sig.l > s->body.total)
		set_result(s->res, MA_FAIL, "l= is longer than the body");
	else if (len != s->sig.bhlen || memcmp(bh, s->sig.bh, len) != 0)
		set_result(s->res, MA_FAIL, "body hash did not verify");
	else if (s->sig.has_x && s->sig.x < s->v->o.now)
		set_result(s->res, MA_PERMERROR, "signature expired");
	else
		return true;
	return false;
}

int dkim_verifier_finish(struct dkim_verifier *v, const struct ma_resolver *r,
			 void (*done)(void *arg), void *arg)
{
	char name[DKIM_SELECTOR_MAX + DKIM_DOMAIN_MAX + 16];

	v->r = *r;
	v->done = NULL;
	v->pending = 1; /* held while the lookups start */
	for (size_t i = 0; i < v->n; i++) {
		struct vsig *s = &v->s[i];

		if (!s->open)
			continue;
		if (!body_checked(s)) {
			close_sig(s);
			continue;
		}
		str_fmt(name, sizeof(name), "%s._domainkey.%s", s->sig.s, s->sig.d);
		v->pending++;
		s->query = v->r.lookup(v->r.ctx, name, DNS_T_TXT, key_cb, s);
	}
	if (--v->pending == 0)
		return 1;
	v->done = done;
	v->arg = arg;
	return 0;
}

size_t dkim_verifier_results(const struct dkim_verifier *v, const struct dkim_result **r)
{
	*r = v->res;
	return v->n;
}

void dkim_verifier_free(struct dkim_verifier **vp)
{
	struct dkim_verifier *v = *vp;

	if (v == NULL)
		return;
	for (size_t i = 0; i < v->n; i++) {
		if (v->s[i].query != NULL)
			v->r.cancel(v->r.ctx, v->s[i].query);
		if (v->s[i].open)
			close_sig(&v->s[i]);
	}
	free(v->s);
	free(v->res);
	free(v);
	*vp = NULL;
}

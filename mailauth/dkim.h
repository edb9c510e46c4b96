/* dkim.h — DKIM (RFC 6376, RFC 8463 ed25519-sha256, RFC 8301: no rsa-sha1, RSA keys of at
 * least 1024 bits): the tag=value parser, the canonicalizations, signing with RSA and Ed25519
 * keys, and a verifier that streams the body through one hash per signature and looks the
 * keys up asynchronously.
 *
 * Body length (l=): a signature whose l= covers less than the whole body is never "pass" for
 * what follows it: it is reported as "policy" (unsigned content after l=) and DMARC does not
 * count it; an l= longer than the body fails. */
#ifndef HERON_DKIM_H
#define HERON_DKIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "common/buf.h"
#include "mailauth/mailauth.h"

/* ---- tag lists (RFC 6376 3.2) ---- */
#define DKIM_TAGS_MAX 64
struct dkim_tag {
	const char *name; /* points into the parsed text */
	size_t nlen;
	const char *val; /* trimmed of FWS at both ends; FWS inside kept */
	size_t vlen;
};
/* Parses "a=b; c=d;" text: 0 and the tags (at most max), or -1 and *err for bad syntax, a
   duplicate tag or more than max tags. */
int dkim_tags_parse(const char *p, size_t len, struct dkim_tag *tags, size_t max, size_t *n_r,
		    const char **err);
/* The tag called name, or NULL. */
const struct dkim_tag *dkim_tag_find(const struct dkim_tag *tags, size_t n, const char *name);

/* ---- canonicalization (RFC 6376 3.4) ---- */
enum dkim_canon { DKIM_SIMPLE, DKIM_RELAXED };
/* Appends the canonical form of one raw header field (name ":" value CRLF) to out; -1 when
   out's ceiling was reached. */
int dkim_canon_header(enum dkim_canon c, const char *raw, size_t len, struct buf *out);

/* A body canonicalizer feeding a hash: bytes in any pieces; stops hashing after limit bytes
   of canonical body (UINT64_MAX: no limit), and counts the canonical length anyway. */
struct dkim_body {
	enum dkim_canon canon;
	EVP_MD_CTX *md; /* NULL: count only (no hash) */
	uint64_t limit, hashed, total;
	uint64_t empty_lines; /* CRLFs held back (trailing empty lines are dropped) */
	bool wsp;             /* relaxed: white space held back */
	bool cr;              /* a CR whose LF may follow */
	bool line;            /* the current line has content */
};
void dkim_body_init(struct dkim_body *b, enum dkim_canon c, EVP_MD_CTX *md, uint64_t limit);
void dkim_body_feed(struct dkim_body *b, const char *p, size_t n);
/* The body ended: what was held back is settled (an unterminated last line gets its CRLF;
   an empty simple body is one CRLF). */
void dkim_body_end(struct dkim_body *b);

/* ---- keys and signatures ---- */
enum dkim_alg { DKIM_RSA_SHA256, DKIM_ED25519_SHA256 };
const char *dkim_alg_name(enum dkim_alg a);

#define DKIM_DOMAIN_MAX 253
#define DKIM_SELECTOR_MAX 253
#define DKIM_SIG_MAX 1024 /* bytes of a decoded b= (RSA 8192 bits) */
#define DKIM_H_MAX 128    /* names in h= */

struct dkim_sig {
	enum dkim_alg alg;
	enum dkim_canon hc, bc;
	char d[DKIM_DOMAIN_MAX + 1]; /* lower case */
	char s[DKIM_SELECTOR_MAX + 1];
	char i[DKIM_DOMAIN_MAX + 68]; /* "" when absent (then "@" d) */
	char *h[DKIM_H_MAX];          /* lower case, malloc'd */
	size_t nh;
	bool has_l, has_t, has_x;
	uint64_t l;
	int64_t t, x;
	unsigned char b[DKIM_SIG_MAX];
	size_t blen;
	unsigned char bh[EVP_MAX_MD_SIZE];
	size_t bhlen;
	char *stripped; /* the field with b='s value removed (for the hash) */
	size_t stripped_len;
	char b_prefix[9]; /* header.b (RFC 6008): the first 8 characters of b= */
};
/* Parses a raw DKIM-Signature field: 0, or -1 with *err (permerror). Free with
   dkim_sig_release even after -1. */
int dkim_sig_parse(const char *raw, size_t len, struct dkim_sig *sig, const char **err);
void dkim_sig_release(struct dkim_sig *sig);

/* A key record (RFC 6376 3.6.1): the public key (NULL and revoked for an empty p=), t=y
   (testing) and t=s (i= must be d= exactly). */
struct dkim_key {
	EVP_PKEY *pkey;
	enum dkim_alg alg;
	unsigned bits;
	bool revoked, testing, strict;
};
/* Parses a TXT record: 0, or -1 with *err. alg is the signature's (k= must agree). */
int dkim_key_parse(const char *txt, size_t len, enum dkim_alg alg, struct dkim_key *k,
		   const char **err);
void dkim_key_release(struct dkim_key *k);

/* The signature's header hash input for the fields of a message (h= selected bottom-up, then
   the signature field without b= and without its final CRLF), into out. */
int dkim_header_input(const struct dkim_sig *sig, const struct ma_header *f, size_t nf,
		      struct buf *out);

/* ---- signing ---- */
struct dkim_signkey {
	char *domain, *selector;
	EVP_PKEY *pkey;
	enum dkim_alg alg;
};
/* Loads a PEM private key (RSA of at least 1024 bits, or Ed25519) for domain:selector.
   -1 with a malloc'd *error_r. */
int dkim_signkey_load(const char *domain, const char *selector, const char *path,
		      struct dkim_signkey **k_r, char **error_r);
void dkim_signkey_free(struct dkim_signkey **kp);

/* The header fields signed by default: each present one, and From once more than present
   (oversigned, so another From cannot be added). */
extern const char *const dkim_default_headers[];
extern const size_t dkim_ndefault_headers;

struct dkim_sign_opts {
	const char *const *headers; /* names to sign when present (NULL: the default) */
	size_t nheaders;
	const char *const *oversign; /* names listed once more than present (NULL: "from") */
	size_t noversign;
	int64_t now;      /* t= */
	int64_t expire_s; /* x = t + expire_s; 0: no x= */
};
/* A DKIM-Signature field (relaxed/relaxed, folded, ending in CRLF) by key k over the fields
   f and the body hash bh (SHA-256 of the relaxed body): appended to out. -1 with *err. */
int dkim_sign(const struct dkim_signkey *k, const struct ma_header *f, size_t nf,
	      const unsigned char bh[32], const struct dkim_sign_opts *o, struct buf *out,
	      const char **err);

/* The public key record to publish for k ("v=DKIM1; k=...; p=..."), malloc'd. */
char *dkim_txt_record(const struct dkim_signkey *k);
/* Same for a public or private key alone. */
char *dkim_txt_record_pkey(EVP_PKEY *pkey);

/* ---- verifying ---- */
#define DKIM_VERIFY_MAX 16 /* signatures checked per message; later ones are not */

struct dkim_result {
	enum ma_result result;
	const char *reason; /* for the A-R comment / log, or NULL */
	char d[DKIM_DOMAIN_MAX + 1];
	char s[DKIM_SELECTOR_MAX + 1];
	char i[DKIM_DOMAIN_MAX + 68];
	char b_prefix[9];
	enum dkim_alg alg;
	unsigned bits;
	bool testing; /* the key is t=y */
};

struct dkim_verify_opts {
	unsigned min_rsa_bits; /* smaller RSA keys: permerror (RFC 8301: 1024) */
	int64_t now;           /* for x= */
};

struct dkim_verifier;
/* fields: the message's header (kept by the caller until finish's callback ran). */
struct dkim_verifier *dkim_verifier_new(const struct dkim_verify_opts *o,
					const struct ma_header *fields, size_t nfields,
					bool header_overflow);
void dkim_verifier_body(struct dkim_verifier *v, const char *p, size_t n);
/* The body ended: the keys are looked up through r. 1 when every result is known at once
   (done does not run); else 0, and done(arg) runs from the loop once they are. */
int dkim_verifier_finish(struct dkim_verifier *v, const struct ma_resolver *r,
			 void (*done)(void *arg), void *arg);
/* The results, one per signature, in the order of the fields (valid until free). */
size_t dkim_verifier_results(const struct dkim_verifier *v, const struct dkim_result **r);
/* Pending lookups are cancelled (no callback). *vp = NULL. */
void dkim_verifier_free(struct dkim_verifier **vp);

#endif

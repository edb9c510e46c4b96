/* sasl_scram.c — owns the SCRAM-SHA-256 and SCRAM-SHA-256-PLUS server exchange (RFC 5802,
 * RFC 7677; channel binding RFC 9266 tls-exporter and RFC 5929 tls-server-end-point, the data
 * given by the caller): strict parsing of client-first and client-final (attribute order,
 * saslname escapes, printable nonces, strict base64, SASL_SCRAM_MSG_MAX), the gs2 downgrade
 * rule, the proof checked against StoredKey and the server signature made with ServerKey, all
 * compares in constant time. The secret is ldapauth's "ITERATIONS,SALT,STOREDKEY,SERVERKEY";
 * the password is never seen here.
 *
 * The user name (and authzid) is SASLprep'd (RFC 4013, common/sasl_prep.c) as a query string,
 * as RFC 5802 5.1 asks of the client (SASLprep is idempotent: a prepared name stays as it is):
 * the directory is asked for the prepared name. Printable ASCII names are left as they are. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/mailaddr.h"
#include "common/sasl.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"

#define CNONCE_MAX 512
#define SNONCE_MAX 64
#define SALT_MAX 256
#define ITER_MAX 10000000u
#define FAKE_ITER 4096u
#define KEY_LEN 32 /* SHA-256 */
#define GS2_MAX (5 + 22 + 2 + 3 * SASL_NAME_MAX)

enum step { S_FIRST, S_SECRET, S_FINAL, S_DONE };

struct sasl_scram {
	enum step step;
	bool plus, plus_offered;
	enum sasl_cb_type cb;
	char gs2[GS2_MAX + 1]; /* the gs2 header as sent (c= repeats it) */
	size_t gs2_len;
	char user[SASL_NAME_MAX + 1];
	char authzid[SASL_NAME_MAX + 1];
	char bare[SASL_SCRAM_MSG_MAX + 1]; /* client-first-message-bare */
	size_t bare_len;
	char nonce[CNONCE_MAX + SNONCE_MAX + 1]; /* client nonce, then the server's */
	size_t cnonce_len, nonce_len;
	char sfirst[SASL_SCRAM_MSG_MAX + 1]; /* server-first-message */
	size_t sfirst_len;
	unsigned char stored[KEY_LEN], server[KEY_LEN];
	bool fake; /* no usable secret: the proof fails whatever it is */
};

struct sasl_scram *sasl_scram_new(bool plus, bool plus_offered)
{
	struct sasl_scram *s = xcalloc(1, sizeof(*s));

	s->plus = plus;
	s->plus_offered = plus_offered;
	return s;
}

void sasl_scram_free(struct sasl_scram **sp)
{
	if (*sp == NULL)
		return;
	OPENSSL_cleanse(*sp, sizeof(**sp));
	free(*sp);
	*sp = NULL;
}

const char *sasl_scram_user(const struct sasl_scram *s)
{
	return s->user;
}

const char *sasl_scram_authzid(const struct sasl_scram *s)
{
	return s->authzid;
}

enum sasl_cb_type sasl_scram_cb_type(const struct sasl_scram *s)
{
	return s->cb;
}

/* ---- parsing helpers over a decoded message ---- */

struct cur {
	const char *p, *end;
};

static bool eat(struct cur *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
		return false;
	c->p += n;
	return true;
}

/* The bytes up to the next ',' (or the end); c is left on the ','. */
static struct str_view field(struct cur *c)
{
	const char *comma = memchr(c->p, ',', (size_t)(c->end - c->p));
	struct str_view v = { c->p, (size_t)((comma != NULL ? comma : c->end) - c->p) };

	c->p += v.len;
	return v;
}

/* saslname (RFC 5802 section 7): UTF-8, ',' and '=' written =2C and =3D, no NUL; Heron also
   refuses control characters (SASLprep prohibits them). Decoded, then SASLprep'd (a query
   string), into out (max bytes). */
static bool saslname(struct str_view v, char *out, size_t max)
{
	char raw[SASL_NAME_MAX + 1];
	size_t o = 0;

	if (max > SASL_NAME_MAX)
		return false;

	if (v.len == 0 || !mailaddr_utf8_valid(v.p, v.len))
		return false;
	for (size_t i = 0; i < v.len; i++) {
		unsigned char ch = (unsigned char)v.p[i];

		if (ch == '=') {
			if (i + 3 <= v.len && memcmp(v.p + i, "=2C", 3) == 0)
				ch = ',';
			else if (i + 3 <= v.len && memcmp(v.p + i, "=3D", 3) == 0)
				ch = '=';
			else
				return false;
			i += 2;
		} else if (ch < 0x20 || ch == 0x7f) {
			return false;
		}
		if (o + 1 > max)
			return false;
		raw[o++] = (char)ch;
	}
	raw[o] = '\0';
	return sasl_saslprep(raw, false, out, max + 1) == 0;
}

/* printable (RFC 5802 section 7): %x21-2B / %x2D-7E, at least one. */
static bool printable(struct str_view v)
{
	if (v.len == 0)
		return false;
	for (size_t i = 0; i < v.len; i++)
		if (v.p[i] < 0x21 || v.p[i] > 0x7e || v.p[i] == ',')
			return false;
	return true;
}

/* extensions: "," ALPHA "=" 1*value-char each, up to the end or (until_proof) a ",p=";
   ignored. */
static bool extensions(struct cur *c, bool until_proof)
{
	while (c->p < c->end) {
		struct str_view v;

		if (until_proof && c->end - c->p >= 3 && memcmp(c->p, ",p=", 3) == 0)
			return true;
		if (!eat(c, ",") || c->end - c->p < 3 || c->p[1] != '=' ||
		    !((c->p[0] >= 'a' && c->p[0] <= 'z') || (c->p[0] >= 'A' && c->p[0] <= 'Z')))
			return false;
		c->p += 2;
		v = field(c);
		if (v.len == 0)
			return false;
	}
	return true;
}

/* Decodes base64 b64 (strict, sasl_b64_decode) of len into out; refuses NUL bytes in the
   result (SCRAM messages are text). */
static enum sasl_result msg_decode(const char *b64, size_t len, char *out, size_t *n_r)
{
	enum sasl_result rc;

	if (len > SASL_SCRAM_B64_MAX)
		return SASL_ESCRAM;
	if ((rc = sasl_b64_decode(b64, len, (unsigned char *)out, SASL_SCRAM_MSG_MAX + 1, n_r)) !=
	    SASL_OK)
		return rc;
	if (*n_r == 0 || memchr(out, '\0', *n_r) != NULL)
		return SASL_ESCRAM;
	return SASL_OK;
}

static void b64_out(const void *p, size_t n, char *out, size_t size)
{
	if ((n + 2) / 3 * 4 + 1 > size) {
		if (size > 0)
			out[0] = '\0';
		return;
	}
	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* ---- client-first ---- */

enum sasl_result sasl_scram_client_first(struct sasl_scram *s, const char *b64, size_t len)
{
	char msg[SASL_SCRAM_MSG_MAX + 1];
	struct cur c;
	struct str_view v;
	size_t n;
	enum sasl_result rc;

	if (s->step != S_FIRST)
		return SASL_ESTATE;
	s->step = S_DONE; /* any failure ends the exchange */
	if ((rc = msg_decode(b64, len, msg, &n)) != SASL_OK)
		return rc;
	c = (struct cur){ msg, msg + n };
	/* gs2-cbind-flag */
	if (eat(&c, "p=")) {
		v = field(&c);
		if (!s->plus)
			return SASL_ECBIND; /* a binding asked of the plain mechanism */
		if (v.len == 12 && memcmp(v.p, "tls-exporter", 12) == 0)
			s->cb = SASL_CB_TLS_EXPORTER;
		else if (v.len == 20 && memcmp(v.p, "tls-server-end-point", 20) == 0)
			s->cb = SASL_CB_TLS_SERVER_END_POINT;
		else
			return SASL_ECBIND; /* tls-unique and others: not offered */
	} else if (eat(&c, "n") || eat(&c, "y")) {
		/* -PLUS without a binding is a contradiction; "y" says the client could bind
		   but thinks the server cannot: with -PLUS advertised, someone removed it */
		if (s->plus || (c.p[-1] == 'y' && s->plus_offered))
			return SASL_ECBIND;
	} else {
		return SASL_ESCRAM;
	}
	if (!eat(&c, ","))
		return SASL_ESCRAM;
	if (eat(&c, "a=")) {
		if (!saslname(field(&c), s->authzid, SASL_NAME_MAX))
			return SASL_ESCRAM;
	}
	if (!eat(&c, ","))
		return SASL_ESCRAM;
	s->gs2_len = (size_t)(c.p - msg);
	if (s->gs2_len > GS2_MAX)
		return SASL_ESCRAM;
	memcpy(s->gs2, msg, s->gs2_len);
	/* client-first-message-bare */
	s->bare_len = (size_t)(c.end - c.p);
	memcpy(s->bare, c.p, s->bare_len);
	s->bare[s->bare_len] = '\0';
	if (eat(&c, "m="))
		return SASL_EEXT;
	if (!eat(&c, "n=") || !saslname(field(&c), s->user, SASL_NAME_MAX))
		return SASL_ESCRAM;
	if (!eat(&c, ",r="))
		return SASL_ESCRAM;
	v = field(&c);
	if (!printable(v) || v.len > CNONCE_MAX)
		return SASL_ESCRAM;
	memcpy(s->nonce, v.p, v.len);
	s->cnonce_len = v.len;
	if (!extensions(&c, false))
		return SASL_ESCRAM;
	s->step = S_SECRET;
	return SASL_OK;
}

/* ---- server-first ---- */

/* The salt, iteration count and keys of secret "ITER,SALT,STORED,SERVER"; false when it is not
   one. *salt_b64 points into secret. */
static bool secret_parse(struct sasl_scram *s, const char *secret, struct str_view *salt_b64,
			 uint64_t *iter_r)
{
	struct str_view rest = str_view_of(secret), f[4];
	unsigned char raw[SALT_MAX + 1];
	size_t n = 0, len;

	while (n < 4 && str_split_next(&rest, ',', &f[n]))
		n++;
	if (n != 4 || rest.len != 0 || str_to_u64(f[0].p, f[0].len, ITER_MAX, iter_r) < 0 ||
	    *iter_r == 0 || f[1].len == 0 ||
	    sasl_b64_decode(f[1].p, f[1].len, raw, sizeof(raw), &len) != SASL_OK || len == 0 ||
	    sasl_b64_decode(f[2].p, f[2].len, raw, sizeof(raw), &len) != SASL_OK || len != KEY_LEN)
		return false;
	memcpy(s->stored, raw, KEY_LEN);
	if (sasl_b64_decode(f[3].p, f[3].len, raw, sizeof(raw), &len) != SASL_OK || len != KEY_LEN)
		return false;
	memcpy(s->server, raw, KEY_LEN);
	OPENSSL_cleanse(raw, sizeof(raw));
	*salt_b64 = f[1];
	return true;
}

/* The key of the made-up salts: drawn when the program starts, before a daemon's master forks
   its workers, so every worker of a daemon (and a restarted one) makes the same salt for the
   same name: which worker answers tells nothing. Another daemon draws its own. */
static unsigned char fake_key[KEY_LEN];
static bool fake_keyed;

__attribute__((constructor)) static void fake_key_init(void)
{
	fake_keyed = getrandom(fake_key, sizeof(fake_key), 0) == (ssize_t)sizeof(fake_key);
}

/* A salt for a user without a secret: the same for the same name, so asking twice tells
   nothing. */
static void fake_salt(const char *user, char out[32])
{
	unsigned char mac[KEY_LEN];
	unsigned int n = 0;

	if (!fake_keyed)
		fake_keyed = RAND_bytes(fake_key, sizeof(fake_key)) == 1;
	HMAC(EVP_sha256(), fake_key, sizeof(fake_key), (const unsigned char *)user, strlen(user),
	     mac, &n);
	b64_out(mac, 16, out, 32);
}

enum sasl_result sasl_scram_server_first(struct sasl_scram *s, const char *secret,
					 const char *snonce, char *out, size_t size)
{
	unsigned char rnd[18];
	char fsalt[32], rb64[32];
	struct str_view salt;
	uint64_t iter = 0;
	size_t sn;
	int len;

	if (size > 0)
		out[0] = '\0';
	if (s->step != S_SECRET)
		return SASL_ESTATE;
	s->step = S_DONE;
	if (secret == NULL || !secret_parse(s, secret, &salt, &iter)) {
		s->fake = true;
		fake_salt(s->user, fsalt);
		salt = str_view_of(fsalt);
		iter = FAKE_ITER;
		RAND_bytes(s->stored, KEY_LEN);
		RAND_bytes(s->server, KEY_LEN);
	}
	if (snonce == NULL) {
		if (RAND_bytes(rnd, sizeof(rnd)) != 1)
			return SASL_ESTATE;
		b64_out(rnd, sizeof(rnd), rb64, sizeof(rb64)); /* base64 has no ',' */
		snonce = rb64;
	}
	sn = strlen(snonce);
	if (!printable((struct str_view){ snonce, sn }) || sn > SNONCE_MAX)
		return SASL_ESTATE;
	memcpy(s->nonce + s->cnonce_len, snonce, sn);
	s->nonce_len = s->cnonce_len + sn;
	s->nonce[s->nonce_len] = '\0';
	len = snprintf(s->sfirst, sizeof(s->sfirst), "r=%s,s=%.*s,i=%llu", s->nonce, (int)salt.len,
		       salt.p, (unsigned long long)iter);
	if (len < 0 || (size_t)len >= sizeof(s->sfirst) || (size_t)len / 3 * 4 + 5 > size)
		return SASL_ESCRAM;
	s->sfirst_len = (size_t)len;
	b64_out(s->sfirst, s->sfirst_len, out, size);
	s->step = S_FINAL;
	return SASL_OK;
}

/* ---- client-final ---- */

static void server_error(const char *e, char *out, size_t size)
{
	char msg[64];
	int n = snprintf(msg, sizeof(msg), "e=%s", e);

	b64_out(msg, (size_t)n, out, size);
}

/* HMAC-SHA-256 of key over the AuthMessage (client-first-bare "," server-first ","
   client-final-without-proof). */
static bool auth_hmac(const struct sasl_scram *s, const unsigned char key[KEY_LEN],
		      const char *cfwp, size_t cfwp_len, unsigned char mac[KEY_LEN])
{
	char am[3 * (SASL_SCRAM_MSG_MAX + 1)];
	size_t n = 0;
	unsigned int len = 0;

	memcpy(am, s->bare, s->bare_len);
	n += s->bare_len;
	am[n++] = ',';
	memcpy(am + n, s->sfirst, s->sfirst_len);
	n += s->sfirst_len;
	am[n++] = ',';
	memcpy(am + n, cfwp, cfwp_len);
	n += cfwp_len;
	return HMAC(EVP_sha256(), key, KEY_LEN, (const unsigned char *)am, n, mac, &len) != NULL &&
	       len == KEY_LEN;
}

/* The c= value against the gs2 header and (for -PLUS) the channel's data. */
static bool cbind_ok(const struct sasl_scram *s, struct str_view c64, const unsigned char *cbdata,
		     size_t cblen)
{
	unsigned char got[GS2_MAX + 256 + 1];
	unsigned char want[GS2_MAX + 256];
	size_t n, wn = s->gs2_len;

	if (sasl_b64_decode(c64.p, c64.len, got, sizeof(got), &n) != SASL_OK)
		return false;
	memcpy(want, s->gs2, s->gs2_len);
	if (s->cb != SASL_CB_NONE) {
		if (cbdata == NULL || cblen == 0 || cblen > 256)
			return false;
		memcpy(want + wn, cbdata, cblen);
		wn += cblen;
	}
	return n == wn && CRYPTO_memcmp(got, want, wn) == 0;
}

enum sasl_result sasl_scram_client_final(struct sasl_scram *s, const unsigned char *cbdata,
					 size_t cblen, const char *b64, size_t len, char *out,
					 size_t size)
{
	char msg[SASL_SCRAM_MSG_MAX + 1];
	unsigned char proof[KEY_LEN + 1], sig[KEY_LEN], key[KEY_LEN], h[KEY_LEN];
	struct cur c;
	struct str_view cb64, nonce, p64;
	size_t n, plen, cfwp_len;
	unsigned int hn = 0;
	enum sasl_result rc;
	bool match;

	server_error("other-error", out, size);
	if (s->step != S_FINAL)
		return SASL_ESTATE;
	s->step = S_DONE;
	if ((rc = msg_decode(b64, len, msg, &n)) != SASL_OK) {
		server_error("invalid-encoding", out, size);
		return rc;
	}
	c = (struct cur){ msg, msg + n };
	if (!eat(&c, "c=")) {
		server_error("invalid-encoding", out, size);
		return SASL_ESCRAM;
	}
	cb64 = field(&c);
	if (!eat(&c, ",r=")) {
		server_error("invalid-encoding", out, size);
		return SASL_ESCRAM;
	}
	nonce = field(&c);
	if (!extensions(&c, true) || !eat(&c, ",p=")) {
		server_error("invalid-encoding", out, size);
		return SASL_ESCRAM;
	}
	cfwp_len = (size_t)(c.p - 3 - msg);
	p64 = field(&c);
	if (c.p != c.end ||
	    sasl_b64_decode(p64.p, p64.len, proof, sizeof(proof), &plen) != SASL_OK ||
	    plen != KEY_LEN) {
		server_error("invalid-encoding", out, size);
		return SASL_ESCRAM;
	}
	if (!cbind_ok(s, cb64, cbdata, cblen)) {
		server_error("channel-bindings-dont-match", out, size);
		return SASL_ECBIND;
	}
	if (nonce.len != s->nonce_len || CRYPTO_memcmp(nonce.p, s->nonce, s->nonce_len) != 0) {
		server_error("other-error", out, size);
		return SASL_ENONCE;
	}
	/* ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) = StoredKey */
	if (!auth_hmac(s, s->stored, msg, cfwp_len, sig))
		return SASL_ESTATE;
	for (size_t i = 0; i < KEY_LEN; i++)
		key[i] = proof[i] ^ sig[i];
	match = EVP_Digest(key, KEY_LEN, h, &hn, EVP_sha256(), NULL) == 1 && hn == KEY_LEN &&
		CRYPTO_memcmp(h, s->stored, KEY_LEN) == 0 && !s->fake;
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(proof, sizeof(proof));
	if (!match) {
		server_error("invalid-proof", out, size);
		return SASL_EPROOF;
	}
	if (!auth_hmac(s, s->server, msg, cfwp_len, sig))
		return SASL_ESTATE;
	memcpy(msg, "v=", 2);
	b64_out(sig, KEY_LEN, msg + 2, sizeof(msg) - 2);
	b64_out(msg, strlen(msg), out, size);
	return SASL_OK;
}

enum sasl_result sasl_scram_client_final_tls(struct sasl_scram *s, struct bufferevent *bev,
					     const char *b64, size_t len, char *out, size_t size)
{
	unsigned char cb[EVP_MAX_MD_SIZE];
	size_t n = 0;

	if (s->cb != SASL_CB_NONE &&
	    !tls_channel_binding(bev,
				 s->cb == SASL_CB_TLS_EXPORTER ? TLS_CB_EXPORTER
							       : TLS_CB_SERVER_END_POINT,
				 cb, sizeof(cb), &n))
		n = 0;
	return sasl_scram_client_final(s, cb, n, b64, len, out, size);
}

/* sasl.h — the one decoder of SASL client responses that mtad (AUTH, RFC 4954), imapd
 * (AUTHENTICATE, RFC 3501 / 4959) and managesieved (RFC 5804) share: strict base64 (RFC 4648 section 4: the alphabet only,
 * padding only at the end, length a multiple of 4, unused bits zero, no white space) and the
 * PLAIN message (RFC 4616): [authzid] NUL authcid NUL passwd, exactly two NULs, authcid and
 * passwd not empty, each field within its limit. An authzid other than the authcid is refused:
 * Heron lets no user act as another. Both servers answer the same bytes the same way.
 *
 * The SCRAM-SHA-256 and SCRAM-SHA-256-PLUS server (RFC 5802, RFC 7677) is sasl_scram.c's,
 * SASLprep (RFC 4013) sasl_prep.c's.
 *
 * Pure functions: no I/O (PLAIN allocates nothing). Callers wipe the decoded password after use
 * (sasl_plain_wipe). */
#ifndef HERON_SASL_H
#define HERON_SASL_H

#include <stdbool.h>
#include <stddef.h>

#define SASL_NAME_MAX 320      /* authcid and authzid, bytes (as ldapauth's names) */
#define SASL_PASSWORD_MAX 1024 /* passwd, bytes (as ldapauth's passwords) */
/* The longest base64 PLAIN response that can decode within the limits. */
#define SASL_PLAIN_B64_MAX ((2 * SASL_NAME_MAX + SASL_PASSWORD_MAX + 2 + 2) / 3 * 4)

enum sasl_result {
	SASL_OK = 0,
	SASL_EBASE64, /* not strict base64, or decodes to more than fits */
	SASL_EFORMAT, /* not authzid NUL authcid NUL passwd within the limits */
	SASL_EAUTHZ,  /* well formed, but the authzid names another identity */
	/* SCRAM */
	SASL_ESCRAM, /* not a SCRAM message within the limits (attribute order, syntax) */
	SASL_EEXT,   /* a mandatory extension ("m=") Heron does not know */
	SASL_ECBIND, /* channel binding refused: a type not offered, "y" while -PLUS is
			 advertised, a flag the mechanism does not allow, data not matching */
	SASL_ENONCE, /* client-final names another nonce */
	SASL_EPROOF, /* the proof does not match: wrong password (or no such user) */
	SASL_ESTATE, /* a step out of order */
};

struct sasl_plain {
	char authcid[SASL_NAME_MAX + 1];    /* NUL-terminated, 1..SASL_NAME_MAX bytes */
	char passwd[SASL_PASSWORD_MAX + 1]; /* NUL-terminated, 1..SASL_PASSWORD_MAX bytes */
};

/* Decodes strict base64 of len bytes into out (size bytes; a NUL is added after the data, so
   the data may be size - 1 bytes at most); sets *n_r. The empty string decodes to nothing. */
enum sasl_result sasl_b64_decode(const char *in, size_t len, unsigned char *out, size_t size,
				 size_t *n_r);

/* Decodes a PLAIN response given in base64 (as sent on the wire; "=" for an empty initial
   response is the caller's to map to len 0). On any result other than SASL_OK *out holds no
   secret. */
enum sasl_result sasl_plain_decode(const char *b64, size_t len, struct sasl_plain *out);

/* As sasl_plain_decode, but an authzid other than the authcid is not refused: it is copied to
   authzid ("" when there is none or it is the authcid). Only for a server that then checks
   that authcid may act as authzid (imapd's proxy login from a front host). */
enum sasl_result sasl_plain_decode_authz(const char *b64, size_t len, struct sasl_plain *out,
					 char authzid[SASL_NAME_MAX + 1]);

/* Wipes the password (and the name) of a decoded response. */
void sasl_plain_wipe(struct sasl_plain *p);

/* ---- SASLprep (RFC 4013, sasl_prep.c) ----
   SCRAM's Normalize(): the user name as a query string (unassigned code points allowed), the
   password a secret is made from as a stored string (stored: refused). NFKC may lengthen a
   string: SASL_PREP_MAX bounds the result of a name or a password. */
#define SASL_PREP_MAX (4 * SASL_PASSWORD_MAX)

/* SASLprep of the NUL-terminated UTF-8 string in into out (size bytes, NUL-terminated).
   0, or -1: not UTF-8, a prohibited character (controls, non-characters...), the bidi rule
   broken, an unassigned code point when stored, an empty result, or no room in out. */
int sasl_saslprep(const char *in, bool stored, char *out, size_t size);
/* Whether sasl_saslprep accepts in (the result is wiped). */
bool sasl_saslprep_ok(const char *in, bool stored);

/* ---- SCRAM-SHA-256[-PLUS] (sasl_scram.c) ----
   A server exchange, one per AUTHENTICATE/AUTH: client-first (the user name comes out), the
   caller fetches the user's secret (ldapauth) and makes server-first, then client-final is
   checked against the secret and the channel (server-final comes out). Messages in and out
   are base64 as on the wire. Every failure is final: the caller answers it and frees the
   exchange. The decoded messages are held to at most SASL_SCRAM_MSG_MAX bytes. */
#define SASL_SCRAM_MSG_MAX 2048
#define SASL_SCRAM_B64_MAX ((SASL_SCRAM_MSG_MAX + 2) / 3 * 4)
/* The longest base64 server message (server-first with a long client nonce, or "e=..."). */
#define SASL_SCRAM_OUT_MAX (SASL_SCRAM_B64_MAX + 1)

enum sasl_cb_type {
	SASL_CB_NONE,                 /* gs2 flag n or y: no channel binding */
	SASL_CB_TLS_EXPORTER,         /* RFC 9266 (TLS 1.3) */
	SASL_CB_TLS_SERVER_END_POINT, /* RFC 5929 section 4 */
};

struct sasl_scram;

/* A new exchange. plus: the client chose SCRAM-SHA-256-PLUS; plus_offered: the server
   advertised -PLUS on this connection (it is TLS with channel binding data to give). */
struct sasl_scram *sasl_scram_new(bool plus, bool plus_offered);
/* Wipes the keys and frees; *sp = NULL. */
void sasl_scram_free(struct sasl_scram **sp);

/* client-first-message (RFC 5802 section 7): gs2 header (n, y or p=tls-exporter /
   p=tls-server-end-point, per the mechanism chosen), an optional authzid, n=user, r=nonce.
   SASL_OK: sasl_scram_user() and sasl_scram_authzid() are set and the caller fetches the
   user's secret. SASL_ECBIND for "y" with -PLUS offered (a downgrade), p= on the plain
   mechanism, n/y on -PLUS or an unknown binding type; SASL_EEXT for "m=". */
enum sasl_result sasl_scram_client_first(struct sasl_scram *s, const char *b64, size_t len);
/* The user name (=2C and =3D decoded, then SASLprep'd as a query string) and the authzid
   (the same; "" when none). */
const char *sasl_scram_user(const struct sasl_scram *s);
const char *sasl_scram_authzid(const struct sasl_scram *s);
/* The channel binding type the client asked for (the caller fetches its data). */
enum sasl_cb_type sasl_scram_cb_type(const struct sasl_scram *s);

/* Makes server-first-message into out (base64, NUL-terminated; size >= SASL_SCRAM_OUT_MAX)
   from the user's secret "ITERATIONS,SALT,STOREDKEY,SERVERKEY" (ldapauth's {SCRAM-SHA-256}
   value without the scheme). secret NULL (no such user, no SCRAM secret) or malformed: a
   salt derived from the user name and a process key, so the exchange looks the same and
   fails at the proof. snonce: the server nonce (printable, no ','), NULL for a random one
   (only tests pass one). */
enum sasl_result sasl_scram_server_first(struct sasl_scram *s, const char *secret,
					 const char *snonce, char *out, size_t size);

/* client-final-message: channel binding (c=: the gs2 header again, plus cbdata for -PLUS,
   compared in constant time), the nonce, the proof checked against StoredKey. SASL_OK: out
   holds server-final-message "v=ServerSignature" (base64) for the client to check. On a
   failure out holds the "e=..." server-final-message of RFC 5802 (base64), which a server
   may send (the exchange failed either way). */
enum sasl_result sasl_scram_client_final(struct sasl_scram *s, const unsigned char *cbdata,
					 size_t cblen, const char *b64, size_t len, char *out,
					 size_t size);

/* sasl_scram_client_final with the binding data of the server-side TLS session bev
   (common/tls.h's tls_channel_binding for the type the client named; none available: the
   binding cannot match). What imapd, mtad and managesieved call. */
struct bufferevent;
enum sasl_result sasl_scram_client_final_tls(struct sasl_scram *s, struct bufferevent *bev,
					     const char *b64, size_t len, char *out, size_t size);

/* A short text for logs and replies. */
const char *sasl_strerror(enum sasl_result r);

#endif

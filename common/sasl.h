/* sasl.h — the one decoder of SASL client responses that mtad (AUTH, RFC 4954) and imapd
 * (AUTHENTICATE, RFC 3501 / 4959) share: strict base64 (RFC 4648 section 4: the alphabet only,
 * padding only at the end, length a multiple of 4, unused bits zero, no white space) and the
 * PLAIN message (RFC 4616): [authzid] NUL authcid NUL passwd, exactly two NULs, authcid and
 * passwd not empty, each field within its limit. An authzid other than the authcid is refused:
 * Heron lets no user act as another. Both servers answer the same bytes the same way.
 *
 * Pure functions: no allocation, no I/O. Callers wipe the decoded password after use
 * (sasl_plain_wipe). */
#ifndef HERON_SASL_H
#define HERON_SASL_H

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

/* A short text for logs and replies. */
const char *sasl_strerror(enum sasl_result r);

#endif

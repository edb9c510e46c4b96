/* sasl_drive.h — one SCRAM-SHA-256[-PLUS] exchange as a server protocol drives it: the one
 * driver that imapd (AUTHENTICATE), mtad (AUTH) and managesieved (AUTHENTICATE) share over
 * common/sasl.h's exchange. It owns the order of the messages (client-first, the secret,
 * client-final, the client's empty answer to server-final), the initial response ("=" is the
 * empty one), the abort ("*"), the binding data of the TLS session, whether server-final goes
 * out as a challenge or with the success, and what each failure means (struct sasl_step's
 * fail). The daemon keeps what is its own: the wire framing of a challenge, the login
 * throttle, the directory request, the replies' text and the log line.
 *
 * Each call fills a struct sasl_step that says what the daemon does next. No I/O; the
 * secret's fetch is the caller's (SASL_DO_SECRET, then sasl_drive_secret). */
#ifndef HERON_SASL_DRIVE_H
#define HERON_SASL_DRIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/sasl.h"

struct bufferevent;

enum sasl_do {
	SASL_DO_SEND, /* send out as a challenge; the next response goes to sasl_drive_response */
	SASL_DO_SECRET, /* client-first taken: begin the throttle for sasl_drive_user(), fetch
			   the user's secret, then call sasl_drive_secret (no response is due) */
	SASL_DO_OK,     /* authenticated: out holds server-final when the daemon sends it with
			   its success (final_with_ok), "" otherwise */
	SASL_DO_FAIL,   /* the exchange failed: fail says how to answer, reason what to log */
	SASL_DO_CANCEL, /* the client answered "*": the exchange is given up, no outcome */
};

enum sasl_fail {
	SASL_FAIL_SYNTAX, /* client-first not base64, or a response out of turn (rc says which):
			     a syntax error; the throttle has not begun */
	SASL_FAIL_FIRST,  /* client-first refused (rc): nothing was checked, no throttle */
	SASL_FAIL_AUTHZ,  /* client-first asks to act as another user: no throttle */
	SASL_FAIL_CRED,   /* the check failed (a wrong proof, a binding that does not match,
			     no usable secret, data after server-final): the throttle counts it */
};

struct sasl_step {
	enum sasl_do act;
	enum sasl_fail fail; /* SASL_DO_FAIL only */
	enum sasl_result rc; /* the exchange's result behind a failure (SASL_OK otherwise) */
	const char *reason;  /* SASL_DO_FAIL, SASL_DO_OK: a constant for the log */
	char out[SASL_SCRAM_OUT_MAX]; /* SASL_DO_SEND, SASL_DO_OK: base64, NUL-terminated */
};

struct sasl_drive;

/* A new exchange for the mechanism the client named: plus for SCRAM-SHA-256-PLUS;
   plus_offered: -PLUS was advertised on this connection; final_with_ok: server-final goes
   out with the success (RFC 5804's OK (SASL ...)), not as a challenge the client answers
   with an empty response (IMAP, SMTP). */
struct sasl_drive *sasl_drive_new(bool plus, bool plus_offered, bool final_with_ok);
/* Wipes and frees; *dp = NULL; safe on NULL. */
void sasl_drive_free(struct sasl_drive **dp);

/* The command's initial response: NULL when none was given (SASL_DO_SEND with an empty
   challenge), "=" for the empty one, "*" cancels, else client-first in base64. */
void sasl_drive_start(struct sasl_drive *d, const char *ir, size_t len, struct sasl_step *st);
/* A response line to the last challenge. bev: the connection's (TLS) bufferevent, whose
   channel binding data client-final is checked against. */
void sasl_drive_response(struct sasl_drive *d, struct bufferevent *bev, const char *line,
			 size_t len, struct sasl_step *st);
/* After SASL_DO_SECRET: the directory's answer. found: the user exists with a SCRAM secret
   (secret is its value); otherwise why (a constant) is logged as the reason of the failure
   the exchange then ends in at the proof. SASL_DO_SEND (server-first) or SASL_DO_FAIL. */
void sasl_drive_secret(struct sasl_drive *d, bool found, const char *secret, const char *why,
		       struct sasl_step *st);

/* The user named in client-first (valid from SASL_DO_SECRET on). */
const char *sasl_drive_user(const struct sasl_drive *d);

#endif

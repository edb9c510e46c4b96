/* imap_url.h — the IMAP URLs that name a message or a part of one (RFC 5092 syntax), for
 * CATENATE (RFC 4469 URL parts) and URLAUTH (RFC 4467): relative
 * ";UID=n[/;SECTION=s][/;PARTIAL=o[.l]]", absolute path "/mailbox[;UIDVALIDITY=v]/;UID=n[...]"
 * and the full form "imap://[user[;AUTH=x]@]host[:port]/mailbox[;UIDVALIDITY=v]/;UID=n[...]",
 * which may end in the URLAUTH part "[;EXPIRE=date-time];URLAUTH=access[:mechanism:token]"
 * (access: "submit+user", "user+user", "authuser" or "anonymous"; only after the full form
 * with a user and no ;AUTH=, RFC 4467 3). Without ":mechanism:token" it is a rump URL
 * (GENURLAUTH's argument); the rump is the URL's first rump_len bytes, what the token signs.
 *
 * Only the syntax: the caller resolves the mailbox (";UID=n": the selected one, RFC 4469 5),
 * checks the user, host and authorization against the session and answers [BADURL url] (or
 * NIL) for anything it cannot serve. Percent-escapes in the mailbox, section and users are
 * decoded; search forms are refused (not served). Every field is bounded. */
#ifndef HERON_IMAP_URL_H
#define HERON_IMAP_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMAP_URL_MAILBOX_MAX 1024 /* decoded bytes, as imapd's mailbox names */
#define IMAP_URL_SECTION_MAX 128
#define IMAP_URL_NAME_MAX 256  /* user and host */
#define IMAP_URL_MECH_MAX 32   /* a URLAUTH mechanism name */
#define IMAP_URL_TOKEN_MAX 128 /* hex digits of a URLAUTH token (RFC 5092: 32 or more) */

/* Who may use a URLAUTH URL (RFC 4467 3). */
enum imap_url_access {
	IMAP_URL_ACCESS_NONE,      /* no ;URLAUTH= */
	IMAP_URL_ACCESS_SUBMIT,    /* "submit+user": a submission server for that user */
	IMAP_URL_ACCESS_USER,      /* "user+user": that user only */
	IMAP_URL_ACCESS_AUTHUSER,  /* any user logged in to this server */
	IMAP_URL_ACCESS_ANONYMOUS, /* anyone */
};

struct imap_url {
	bool has_server;                  /* imap://... */
	bool has_mailbox;                 /* false: relative to the mailbox of the command */
	char user[IMAP_URL_NAME_MAX + 1]; /* "" when none was given */
	char host[IMAP_URL_NAME_MAX + 1];
	char mailbox[IMAP_URL_MAILBOX_MAX + 1];
	uint32_t uidvalidity; /* 0: not given */
	uint32_t uid;
	char section[IMAP_URL_SECTION_MAX + 1]; /* "" for the whole message */
	bool has_partial;                       /* ;PARTIAL=partial_off[.partial_len] */
	uint32_t partial_off, partial_len;      /* partial_len 0: to the end */
	bool has_auth;                          /* ";AUTH=x" in the server part */
	/* URLAUTH (RFC 4467): access NONE when the URL has no ;URLAUTH= */
	enum imap_url_access access;
	char access_user[IMAP_URL_NAME_MAX + 1]; /* of SUBMIT and USER, decoded */
	bool has_expire;
	int64_t expire;                     /* ;EXPIRE=, Unix time (UTC) */
	size_t rump_len;                    /* bytes of the rump URL (up to the access) */
	char mech[IMAP_URL_MECH_MAX + 1];   /* "" in a rump URL */
	char token[IMAP_URL_TOKEN_MAX + 1]; /* hex digits as written ("" in a rump URL) */
};

/* Parses s[0..len): 0 and *u, or -1 (not a message or part URL, a URLAUTH part where the
   form allows none, or a field too long). */
int imap_url_parse(const char *s, size_t len, struct imap_url *u);

#endif

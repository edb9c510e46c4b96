/* imap_url.h — the IMAP URLs of CATENATE (RFC 4469 URL parts, RFC 5092 syntax) that name a
 * message or a part of one: relative ";UID=n[/;SECTION=s][/;PARTIAL=o[.l]]", absolute path
 * "/mailbox[;UIDVALIDITY=v]/;UID=n[...]" and the full form
 * "imap://[user[;AUTH=x]@]host[:port]/mailbox[;UIDVALIDITY=v]/;UID=n[...]".
 *
 * Only the syntax: the caller resolves the mailbox (";UID=n": the selected one, RFC 4469 5),
 * checks the user and host against the session and answers [BADURL url] for anything it
 * cannot serve. Percent-escapes in the mailbox and section are decoded; ;URLAUTH, ;EXPIRE
 * and search forms are refused (not served). Every field is bounded. */
#ifndef HERON_IMAP_URL_H
#define HERON_IMAP_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMAP_URL_MAILBOX_MAX 1024 /* decoded bytes, as imapd's mailbox names */
#define IMAP_URL_SECTION_MAX 128
#define IMAP_URL_NAME_MAX 256 /* user and host */

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
};

/* Parses s[0..len): 0 and *u, or -1 (not a message or part URL, or a field too long). */
int imap_url_parse(const char *s, size_t len, struct imap_url *u);

#endif

/* mailaddr.h — RFC 5321 paths and addresses, the MAIL/RCPT parameters (RFC 1870, 3461, 6152,
 * 6531) and xtext, with the length limits of RFC 5321 4.5.3.1: local part 64 octets, domain 255,
 * path 256 (angle brackets included).
 *
 * Parsing is pure: no I/O, no allocation, fixed-size results. Functions return 0 on success and
 * -1 on bad input with *error_r set to a static text fit for a 501/553/555 reply.
 *
 * The parser accepts a few forms that are syntactically valid (or tolerated) but are the classic
 * relay tricks: source routes, '%' and '!' in local parts, '@' inside a quoted local part, a
 * trailing dot on the domain, address literals. It records them; mailaddr_tricks() lists them so
 * the relay check can refuse them by policy rather than by accident. */
#ifndef HERON_MAILADDR_H
#define HERON_MAILADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAILADDR_LOCAL_MAX 64
#define MAILADDR_DOMAIN_MAX 255
#define MAILADDR_PATH_MAX 256
/* local + '@' + domain */
#define MAILADDR_TEXT_MAX (MAILADDR_LOCAL_MAX + 1 + MAILADDR_DOMAIN_MAX)

/* Parse options. */
#define MAILADDR_ALLOW_NULL 0x01 /* "<>" is a valid path (MAIL FROM) */
#define MAILADDR_ALLOW_UTF8 0x02 /* SMTPUTF8: UTF-8 in local part and domain */
#define MAILADDR_ALLOW_BARE 0x04 /* tolerate a path without angle brackets */

/* Properties found by the parser (struct mailaddr.flags). */
#define MAILADDR_F_NULL 0x01         /* the null path "<>" */
#define MAILADDR_F_QUOTED 0x02       /* the local part is a quoted string */
#define MAILADDR_F_LITERAL 0x04      /* the domain is an address literal [..] */
#define MAILADDR_F_UTF8 0x08         /* bytes >= 0x80 appear */
#define MAILADDR_F_ROUTE 0x10        /* a source route "@a,@b:" preceded the mailbox */
#define MAILADDR_F_TRAILING_DOT 0x20 /* the domain ended with '.' (stripped) */

/* Relay tricks (mailaddr_tricks). */
#define MAILADDR_T_PERCENT 0x01   /* user%remote@local */
#define MAILADDR_T_BANG 0x02      /* remote!user@local */
#define MAILADDR_T_QUOTED_AT 0x04 /* "user@remote"@local */
#define MAILADDR_T_ROUTE 0x08     /* <@local:user@remote> */
#define MAILADDR_T_TRAILING_DOT 0x10
#define MAILADDR_T_LITERAL 0x20 /* user@[192.0.2.1] */

struct mailaddr {
	char local[MAILADDR_LOCAL_MAX + 1];   /* as written, quotes included */
	char domain[MAILADDR_DOMAIN_MAX + 1]; /* as written, minus a trailing dot */
	unsigned flags;                       /* MAILADDR_F_* */
};

/* Parses a path "<local@domain>" (or "<>" with ALLOW_NULL) at the start of p[0..len). *used_r
   gets the number of bytes consumed (what follows may be parameters). */
int mailaddr_parse_path(const char *p, size_t len, unsigned opts, struct mailaddr *a,
			size_t *used_r, const char **error_r);
/* Parses an entire bare address "local@domain" (no brackets, nothing after). */
int mailaddr_parse(const char *p, size_t len, unsigned opts, struct mailaddr *a,
		   const char **error_r);
/* Writes "local@domain" ("" for the null path) to dst; -1 when size is too small. */
int mailaddr_format(const struct mailaddr *a, char *dst, size_t size);
/* Writes the lookup key: the local part unquoted when quoting was not needed, the domain in
   lower case. -1 when size is too small. */
int mailaddr_canonical(const struct mailaddr *a, char *dst, size_t size);
/* MAILADDR_T_* found in a. */
unsigned mailaddr_tricks(const struct mailaddr *a);
/* Whether the domain is one of list[0..n), ignoring case. */
bool mailaddr_domain_in(const struct mailaddr *a, char *const *list, size_t n);

/* Whether p[0..len) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool mailaddr_utf8_valid(const char *p, size_t len);

/* xtext (RFC 3461 4): decodes into dst (NUL-terminated); -1 on bad syntax or no room. */
int mailaddr_xtext_decode(const char *p, size_t len, char *dst, size_t size);
/* Encodes into dst (NUL-terminated); -1 when size is too small. */
int mailaddr_xtext_encode(const char *p, size_t len, char *dst, size_t size);

/* MAIL FROM parameters. */
enum mail_body { MAIL_BODY_NONE, MAIL_BODY_7BIT, MAIL_BODY_8BITMIME, MAIL_BODY_BINARYMIME };
enum mail_ret { MAIL_RET_NONE, MAIL_RET_FULL, MAIL_RET_HDRS };
#define MAIL_ENVID_MAX 100
struct mail_params {
	uint64_t size; /* 0 when not given */
	bool has_size;
	enum mail_body body;
	bool smtputf8;
	bool requiretls; /* REQUIRETLS (RFC 8689) */
	enum mail_ret ret;
	char envid[MAIL_ENVID_MAX + 1]; /* decoded; "" when not given */
};

/* RCPT TO parameters. */
#define RCPT_NOTIFY_NEVER 0x01
#define RCPT_NOTIFY_SUCCESS 0x02
#define RCPT_NOTIFY_FAILURE 0x04
#define RCPT_NOTIFY_DELAY 0x08
#define RCPT_ORCPT_MAX 500
struct rcpt_params {
	unsigned notify;                /* 0 when not given (= FAILURE,DELAY) */
	char orcpt_type[32];            /* "rfc822", "utf-8"; "" when not given */
	char orcpt[RCPT_ORCPT_MAX + 1]; /* decoded */
};

/* Parameter errors: -1 malformed value (501 5.5.4), MAILADDR_EUNKNOWN an unknown or
   unsupported keyword (555 5.5.4). utf8: SMTPUTF8 was given (values may hold UTF-8). */
#define MAILADDR_EUNKNOWN (-2)
int mailaddr_mail_params(const char *p, size_t len, struct mail_params *mp, const char **error_r);
int mailaddr_rcpt_params(const char *p, size_t len, bool utf8, struct rcpt_params *rp,
			 const char **error_r);

#endif

/* mailauth.h — libheron_mailauth: sender authentication of mail, with no I/O of its own: DKIM
 * signing and verification (dkim.h, RFC 6376 and RFC 8463), SPF (spf.h, RFC 7208), DMARC
 * (dmarc.h, RFC 7489) with the organizational domain from the Public Suffix List (psl.h),
 * Authentication-Results (authres.h, RFC 8601), and the milter protocol's codec (milter.h).
 *
 * DNS goes through a struct ma_resolver: mtad gives its worker's asynchronous resolver
 * (dns/dns.h, ma_resolver_dns), the tests a table. Answers always come back from the loop,
 * never from inside the call that asked, so a worker never blocks on a lookup.
 *
 * This header also has what the parts share: verdicts, the header section of a message split
 * into fields (struct ma_header), and the stream that separates a message's header from its
 * body as it arrives (struct ma_msg). */
#ifndef HERON_MAILAUTH_H
#define HERON_MAILAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "dns/dns.h"

/* A resolver: lookup starts one query whose answer cb gets (from the loop, once) and returns
   a handle for cancel, which drops it without the callback. */
struct ma_resolver {
	void *(*lookup)(void *ctx, const char *name, enum dns_type type, dns_cb *cb, void *arg);
	void (*cancel)(void *ctx, void *query);
	void *ctx;
};

/* r through dns_lookup/dns_cancel on d. */
void ma_resolver_dns(struct ma_resolver *r, struct dns *d);

/* Verdicts, named as Authentication-Results names them (RFC 8601 2.7). */
enum ma_result {
	MA_NONE,
	MA_PASS,
	MA_FAIL,
	MA_SOFTFAIL, /* SPF only */
	MA_NEUTRAL,
	MA_TEMPERROR,
	MA_PERMERROR,
	MA_POLICY, /* DKIM: valid, but not acceptable here (unsigned content after l=) */
};
const char *ma_result_str(enum ma_result r);

/* The most header bytes and fields of a message that are looked at; a bigger header section
   gets permerror from DKIM and DMARC rather than being read without bound. */
#define MA_HEADER_MAX (512 * 1024)
#define MA_FIELDS_MAX 4096

/* One header field of a header section: name (no colon, not trimmed of trailing WSP), and
   raw: the whole field from its name to its final CRLF (folds included). */
struct ma_header {
	const char *name;
	size_t nlen;
	const char *raw;
	size_t len;
};

/* The header section of a message as it streams in: feed bytes in any pieces; the header is
   kept (up to MA_HEADER_MAX) and its end found (the empty line); what follows is the body. */
struct ma_msg {
	struct buf hdr;           /* the header section, without the empty line */
	struct ma_header *fields; /* after the end: the fields of hdr */
	size_t nfields;
	bool done;        /* the empty line was seen (or ma_msg_end) */
	bool overflow;    /* the header section went past the limits */
	bool bol, bol_cr; /* at the start of a line; and a CR seen there */
};
void ma_msg_init(struct ma_msg *m);
void ma_msg_release(struct ma_msg *m);
/* Takes bytes of the header section from p; returns how many were header (the rest, n minus
   that, is body: m->done is then true). */
size_t ma_msg_feed(struct ma_msg *m, const char *p, size_t n);
/* The message ended (a header without body): the fields are split if not yet. */
void ma_msg_end(struct ma_msg *m);

/* Splits a header section (without the empty line) into fields: the number found, at most
   max (a section with more sets *more_r). */
size_t ma_headers_split(const char *hdr, size_t len, struct ma_header *out, size_t max,
			bool *more_r);
/* Whether field h is named name (case-insensitive; WSP before the colon ignored). */
bool ma_header_is(const struct ma_header *h, const char *name);
/* The raw value of h: after the colon, up to (not including) the final CRLF. */
void ma_header_value(const struct ma_header *h, const char **v_r, size_t *len_r);

/* Base64 with folding white space in it (DKIM's b=, bh= and p=): decodes into out (size
   bytes) skipping SP, HTAB, CR and LF; the length, or -1 for anything else not base64, bad
   padding, or more than size bytes. */
int ma_b64_decode_fws(const char *p, size_t len, unsigned char *out, size_t size);
/* Plain base64 of n bytes into out (4 * ((n + 2) / 3) + 1 bytes): the length. */
size_t ma_b64_encode(const unsigned char *p, size_t n, char *out);

/* Domain names as SPF and DMARC compare them: lower case, no trailing dot. Whether d equals
   parent or lies below it. */
bool ma_domain_under(const char *d, const char *parent);

#endif

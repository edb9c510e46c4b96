/* resp.h — incremental parsers for what servers send mailload: SMTP replies (multi-line, EHLO
 * keywords) and IMAP responses (lines with literals), plus a tokenizer for IMAP data and a
 * FETCH item reader. They keep state, do no I/O and enforce limits (STYLE 7, 8). */
#ifndef HERON_MAILLOAD_RESP_H
#define HERON_MAILLOAD_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/line.h"

struct evbuffer;

#define SMTP_LINE_MAX 2048
#define SMTP_LINES_MAX 64

enum {
	SMTP_EXT_PIPELINING = 1,
	SMTP_EXT_STARTTLS = 2,
	SMTP_EXT_AUTH_PLAIN = 4,
	SMTP_EXT_8BITMIME = 8
};

struct smtp_reply {
	struct line_reader lr; /* CRLF lines of at most SMTP_LINE_MAX */
	int code;              /* 0 until the first line */
	uint32_t nlines;
	uint32_t ext;   /* SMTP_EXT_* seen in this reply's lines (EHLO) */
	char text[256]; /* the first line, without the code (truncated) */
};

/* Reads lines of one reply from in. 1: complete reply in r (reset r before the next one),
   0: need more, -1: malformed or over a limit (the text in r->text says which). */
int smtp_reply_parse(struct smtp_reply *r, struct evbuffer *in);
void smtp_reply_reset(struct smtp_reply *r);

/* IMAP responses. A complete response is one logical line with its literals: a literal whose
   size is <= keep_max is stored as "{n}\n" followed by its n bytes; a bigger one as "{n}" only
   (its bytes are counted in lit_skipped and dropped). */
struct imap_rparser {
	struct line_reader lr;
	struct buf line;
	size_t line_max;  /* per text line */
	size_t keep_max;  /* literal bytes kept */
	uint64_t lit_max; /* largest literal accepted */
	uint64_t lit_left;
	bool lit_keep;
	bool in_literal;
	uint64_t lit_skipped; /* bytes of dropped literals in the current response */
	uint64_t lit_total;   /* bytes of all literals in the current response */
	const char *error;
};

void imap_rparser_init(struct imap_rparser *p, size_t line_max, size_t keep_max, uint64_t lit_max);
void imap_rparser_release(struct imap_rparser *p);
/* 1: a complete response in p->line; 0: need more; -1: error (p->error). */
int imap_rparser_next(struct imap_rparser *p, struct evbuffer *in);
/* The input changed under the parser (STARTTLS): forget what was searched. */
void imap_rparser_reset_input(struct imap_rparser *p);

/* Tokens of a response. */
enum itok_type { IT_END, IT_ATOM, IT_STRING, IT_LPAREN, IT_RPAREN, IT_NIL, IT_BAD };
struct itok {
	const char *p, *end;
	enum itok_type type;
	const char *s; /* token text (IT_ATOM, IT_STRING: a quoted string's inside, raw) */
	size_t len;
	uint64_t litlen; /* literal: its size (len may be 0 if it was dropped) */
	bool literal;
};
void itok_init(struct itok *t, const char *p, size_t len);
enum itok_type itok_next(struct itok *t);
/* Skips one value (a token or a whole parenthesized list) whose first token is current. */
int itok_skip_value(struct itok *t);
bool itok_is(const struct itok *t, const char *atom);
bool itok_num(const struct itok *t, uint64_t *v);

/* Flags as bits. */
enum {
	FL_SEEN = 1,
	FL_DELETED = 2,
	FL_ANSWERED = 4,
	FL_FLAGGED = 8,
	FL_DRAFT = 16,
	FL_RECENT = 32
};

/* What mailload reads out of "* n FETCH (...)". */
struct imap_fetch {
	uint64_t seq;
	uint64_t uid; /* 0: absent */
	bool has_flags;
	uint32_t flags;
	uint64_t size; /* RFC822.SIZE, 0 absent */
	bool has_size;
	const char *hdr; /* BODY[HEADER.FIELDS ...] text, NULL when absent */
	size_t hdrlen;
	bool has_body;
	uint64_t bodylen; /* BODY[] literal size */
};
/* Parses the part after "* ": 1 when it is a FETCH, 0 if another response, -1 malformed. */
int imap_parse_fetch(const char *p, size_t len, struct imap_fetch *f);
/* Finds a header field's value in a header block; returns its length (0 if absent). */
size_t hdr_find(const char *hdr, size_t len, const char *name, const char **val_r);

#endif

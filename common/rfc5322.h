/* rfc5322.h — incremental RFC 5322 + MIME parser (STYLE 8: keeps state, does no I/O) and the
 * header helpers imapd, the store and mailload share: HEADER.FIELDS extraction, one field's
 * unfolded value, Date: parsing, address lists, Content-Type parameters.
 *
 * The parser takes the raw message in chunks of any size and calls back with events in message
 * order: part begin, each header field (name, unfolded value, raw offsets), end of the part's
 * header (with its parsed Content-Type), body bytes of leaf parts, boundary lines, part end (with
 * sizes and line counts). Any callback may be NULL. Entities nest: a multipart's children follow its header; a message/rfc822 part's
 * single child is the embedded message. Line ends may be CRLF or bare LF; offsets are of the
 * bytes as pushed. Memory is fixed at creation: a line is kept only up to a limit (offsets and
 * counts stay exact), a field value up to field_max (longer values are truncated, flagged). */
#ifndef HERON_RFC5322_H
#define HERON_RFC5322_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/buf.h"
#include "common/str.h"

#define RFC5322_BOUNDARY_MAX 200 /* RFC 2046 says 70; be lenient */
#define RFC5322_PARAMS_MAX 32    /* Content-Type parameters kept per part */

enum rfc5322_kind {
	RFC5322_LEAF = 0,      /* a body: text, image, ... (or a container past a limit) */
	RFC5322_MULTIPART = 1, /* children separated by boundaries */
	RFC5322_MESSAGE = 2,   /* message/rfc822: one child, the embedded message */
};

struct rfc5322_param {
	struct str_view name;  /* as written; RFC 2231 continuations merged ("name*" if encoded) */
	struct str_view value; /* unquoted */
};

/* A parsed Content-Type (or Content-Disposition: type only, subtype empty). */
struct rfc5322_ctype {
	struct str_view type, subtype; /* as written */
	struct rfc5322_param params[RFC5322_PARAMS_MAX];
	unsigned nparams;
	bool valid; /* type/subtype were well formed */
};

/* One entity (the message, a MIME part, or an embedded message) as the callbacks see it. */
struct rfc5322_part {
	uint32_t index;         /* preorder number, 0 = the message */
	uint32_t parent;        /* index of the parent (UINT32_MAX for the message) */
	unsigned depth;         /* 0 = the message */
	enum rfc5322_kind kind; /* known from header_end on */
	bool is_text;           /* text/ * (explicit or default) */
	bool is_root;           /* the message or an embedded message (has an ENVELOPE) */
	bool has_ctype;         /* a Content-Type field was present */
	uint64_t header_off, header_size;  /* header block, including its empty line if any */
	uint64_t body_off, body_size;      /* known at part_end */
	uint64_t body_lines;               /* LF count of the body */
	const struct rfc5322_ctype *ctype; /* valid during header_end only; defaults applied */
};

struct rfc5322_field {
	struct str_view name; /* as written, without the colon */
	struct str_view
		value;      /* unfolded (CR/LF of folds removed), leading/trailing WSP trimmed */
	uint64_t off, size; /* the raw field in the message, folds and line end included */
	bool truncated;     /* value was longer than field_max */
};

struct rfc5322_callbacks {
	void (*part_begin)(void *ctx, const struct rfc5322_part *p);
	void (*field)(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f);
	void (*header_end)(void *ctx, const struct rfc5322_part *p);
	/* Body bytes of a leaf part (may come in many pieces), off = message offset of data. */
	void (*body)(void *ctx, const struct rfc5322_part *p, const char *data, size_t len,
		     uint64_t off);
	void (*part_end)(void *ctx, const struct rfc5322_part *p);
	/* A delimiter line of multipart mp at off (size: the line with its end; the CRLF before
	   it belongs to it too, RFC 2046); close for the final "--boundary--". */
	void (*boundary)(void *ctx, const struct rfc5322_part *mp, uint64_t off, uint64_t size,
			 bool close);
};

struct rfc5322_limits {
	size_t field_max;   /* bytes of an unfolded field value kept (default 64 KiB) */
	unsigned depth_max; /* nesting beyond this is a leaf (default 32, at most 64) */
	unsigned parts_max; /* entities beyond this are not split further (default 1000) */
};

struct rfc5322_parser;

/* limits may be NULL (defaults); zero members take their defaults. */
struct rfc5322_parser *rfc5322_parser_new(const struct rfc5322_limits *lim,
					  const struct rfc5322_callbacks *cb, void *ctx);
void rfc5322_parser_push(struct rfc5322_parser *p, const void *data, size_t len);
/* Ends the message: closes every open part (a missing closing boundary is not an error). */
void rfc5322_parser_finish(struct rfc5322_parser *p);
/* Ready for a new message with the same callbacks. */
void rfc5322_parser_reset(struct rfc5322_parser *p);
void rfc5322_parser_free(struct rfc5322_parser **pp);

/* Parses a Content-Type (or Content-Disposition when subtype is not wanted) value. Strings
   point into value or into scratch (merged continuations); scratch must live as long as ct. */
void rfc5322_ctype_parse(const char *value, size_t len, bool want_subtype, struct buf *scratch,
			 struct rfc5322_ctype *ct);

/* Appends to out the fields of the raw header block hdr whose names are (not, if exclude) in
   names (case-insensitive), each with its original folding, then the empty line ("\r\n").
   0, or -1 when out's ceiling was reached. */
int rfc5322_header_fields(const char *hdr, size_t len, const struct str_view *names, size_t nnames,
			  bool exclude, struct buf *out);
/* The unfolded, trimmed value of the first field called name, appended to out: 1 found,
   0 absent, -1 ceiling. */
int rfc5322_header_value(const char *hdr, size_t len, const char *name, struct buf *out);
/* Iterates the raw fields of a header block: 1 and *name, *raw (the whole field, folds and line
   end included) set, 0 at the end of the block. *pos starts at 0. */
int rfc5322_header_next(const char *hdr, size_t len, size_t *pos, struct str_view *name,
			struct str_view *raw);
/* Appends a raw field value unfolded: CR and LF removed, WSP trimmed at both ends. 0, or -1
   when out's ceiling was reached (out then holds a prefix). */
int rfc5322_unfold(const char *p, size_t len, struct buf *out);

/* The end of the comment "(...)" that starts at p[i] (nested comments and quoted-pairs
   inside it); len for one left open. */
size_t rfc5322_skip_comment(const char *p, size_t len, size_t i);

/* RFC 5322 date-time (obsolete forms: 2-digit years, named zones, missing seconds or
   weekday, comments) to a Unix time: 0, or -1 when it cannot be read. */
int rfc5322_date_parse(const char *p, size_t len, int64_t *t_r);
/* The same, also giving the zone as minutes east of UTC (-0600 = -360; named zones mapped,
   none or unknown = 0), so t + tz * 60 is the wall-clock time written (SENTON and friends). */
int rfc5322_date_parse_tz(const char *p, size_t len, int64_t *t_r, int *tz_r);

/* Addresses: a callback per mailbox, and for groups one with is_group_start (name = the group
   display name) and one with is_group_end. Strings are unquoted/unescaped into a scratch buffer
   owned by the iterator and valid during the callback. */
struct rfc5322_addr {
	struct str_view name;    /* display name (or comment), may be empty */
	struct str_view route;   /* obsolete route "@a,@b", may be empty */
	struct str_view mailbox; /* local part */
	struct str_view domain;  /* may be empty */
	bool is_group_start, is_group_end;
};
/* Returns the number of callbacks made. Never fails: garbage yields best-effort entries. */
size_t rfc5322_addr_parse(const char *p, size_t len,
			  void (*cb)(void *ctx, const struct rfc5322_addr *a), void *ctx);

#endif

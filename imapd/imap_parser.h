/* imap_parser.h — incremental IMAP command parser (STYLE 8: keeps state, does no I/O,
 * executes nothing).
 *
 * The caller feeds whatever bytes arrived; the parser consumes them and stops at:
 *   IMAP_PARSE_DONE     a whole command line: imap_parser_tag() and imap_parser_args();
 *   IMAP_PARSE_LITERAL  a literal {n} or {n+} was announced: the caller decides with
 *                       imap_parser_literal_accept() (the parser reads it inline; for a
 *                       synchronizing literal the caller then sends "+ ..."), or
 *                       imap_parser_literal_streamed() after reading the n bytes itself (APPEND
 *                       streams message data to the store), or imap_parser_literal_reject();
 *   IMAP_PARSE_ERROR    bad syntax or a limit: imap_parser_error() names the problem for a
 *                       tagged BAD (imap_parser_tag() is NULL when no tag was read: "* BAD");
 *                       the parser then drops the rest of the line by itself, and with it
 *                       the data of every non-synchronizing literal {n+} the dropped part
 *                       announces, so that no literal byte is ever taken for a command;
 *                       when that cannot be done (a {n+} whose size cannot be read, or one
 *                       larger than skip_max) imap_parser_lost() is true and the caller
 *                       must close the connection after the BAD (RFC 7888 section 4);
 *   IMAP_PARSE_MORE     everything was consumed and the command is not complete.
 * Limits are checked before anything is stored: line bytes (literal data excluded), inline
 * literal size, list nesting depth, number of arguments, tag length.
 *
 * Syntax accepted: a tag, then arguments separated by spaces: atoms (printable ASCII except
 * ( ) { " and SP; an atom holding '[' runs to its matching ']' and may contain spaces and
 * parentheses there, as in BODY[HEADER.FIELDS (From To)]<0.100>), quoted strings with \" and
 * \\ escapes (8-bit bytes kept as they are; CR, LF and NUL refused), literals (and literal8
 * "~{n}", RFC 3516: reported like a literal, imap_parser_literal_binary()), and lists in
 * parentheses. Lines end in CRLF (a bare LF is tolerated). Empty lines are ignored. */
#ifndef HERON_IMAP_PARSER_H
#define HERON_IMAP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum imap_parse_result {
	IMAP_PARSE_ERROR = -1,
	IMAP_PARSE_MORE = 0,
	IMAP_PARSE_DONE = 1,
	IMAP_PARSE_LITERAL = 2,
};

/* imapd's structural limits of a command (the byte limits are [imapd] line_max and
   literal_max): lists nested this deep, this many arguments in all. */
#define IMAP_DEPTH_MAX 32
#define IMAP_ARGS_MAX 4096

struct imap_parser_limits {
	size_t line_max;    /* bytes of a command line, literal data excluded */
	size_t literal_max; /* largest literal accepted inline */
	unsigned depth_max; /* nesting of parenthesized lists */
	unsigned items_max; /* arguments in all (lists and their members count) */
	uint64_t skip_max;  /* largest refused non-synchronizing literal read and dropped;
			       a larger one ends the connection (0: literal_max) */
};

enum imap_arg_type {
	IMAP_ARG_ATOM,
	IMAP_ARG_QUOTED,
	IMAP_ARG_LITERAL,
	IMAP_ARG_LIST,
	IMAP_ARG_STREAMED, /* a literal the caller read itself; len = its size */
};

/* Arguments are a flat array in document order: a LIST is followed by its members. */
struct imap_arg {
	enum imap_arg_type type;
	uint32_t span; /* LIST: slots after this one that belong to it */
	uint32_t n;    /* LIST: direct members */
	size_t len;    /* strings: bytes (a literal may hold NUL); STREAMED: size */
	const char *s; /* strings: NUL-terminated; NULL for LIST/STREAMED */
	size_t off;    /* private */
};

struct imap_parser;

struct imap_parser *imap_parser_new(const struct imap_parser_limits *lim);
void imap_parser_free(struct imap_parser **pp);
/* Consumes bytes of data[0..len) and sets *used_r to how many; returns as described above.
   Never called while a LITERAL result waits for the caller's decision. */
int imap_parser_feed(struct imap_parser *p, const char *data, size_t len, size_t *used_r);
/* Starts over at a new command line (after the command was answered). Called implicitly by
   the feed that follows a DONE. */
void imap_parser_reset(struct imap_parser *p);

/* After DONE, LITERAL or ERROR: the tag, or NULL when none was read yet. */
const char *imap_parser_tag(const struct imap_parser *p);
/* After DONE (or LITERAL: the arguments so far): the arguments, the command name first. Valid
   until the next feed or reset. */
const struct imap_arg *imap_parser_args(const struct imap_parser *p, size_t *n_r);
/* After ERROR: what was wrong, for the BAD reply. */
const char *imap_parser_error(const struct imap_parser *p);
/* After ERROR or imap_parser_literal_reject(): whether the input can no longer be split into
   commands (a non-synchronizing literal was announced whose data cannot be skipped). The
   caller answers and closes the connection; feeding more is a bug. */
bool imap_parser_lost(const struct imap_parser *p);

/* After LITERAL: the announced size, whether it is synchronizing ({n}) and the list depth at
   which it appears (0: a top-level argument). */
void imap_parser_literal(const struct imap_parser *p, uint64_t *size_r, bool *sync_r,
			 unsigned *depth_r);
/* After LITERAL (and while its data is streamed by the caller): whether it is a literal8
   "~{n}" (RFC 3516), which may hold NUL bytes. */
bool imap_parser_literal_binary(const struct imap_parser *p);
/* Reads the literal inline. 0, or -1 when it passes literal_max (the parser then behaves as
   after imap_parser_literal_reject() and imap_parser_error() says why). */
int imap_parser_literal_accept(struct imap_parser *p);
/* The caller consumed the literal's bytes itself; a STREAMED argument takes its place. */
void imap_parser_literal_streamed(struct imap_parser *p);
/* Refuses the literal (the caller answers the command). A synchronizing literal was not sent,
   so the next byte starts a new command; a non-synchronizing one is skipped with the rest of
   its line, unless it is larger than skip_max: then imap_parser_lost() is true. */
void imap_parser_literal_reject(struct imap_parser *p, const char *why);

/* The argument after a (skipping a list's members). */
static inline const struct imap_arg *imap_arg_next(const struct imap_arg *a)
{
	return a + 1 + (a->type == IMAP_ARG_LIST ? a->span : 0);
}
static inline bool imap_arg_is_string(const struct imap_arg *a)
{
	return a->type == IMAP_ARG_QUOTED || a->type == IMAP_ARG_LITERAL;
}
/* An atom, quoted string or literal (RFC 3501 astring). */
static inline bool imap_arg_is_astring(const struct imap_arg *a)
{
	return a->type == IMAP_ARG_ATOM || imap_arg_is_string(a);
}
bool imap_arg_is_nil(const struct imap_arg *a);
/* Whether a is an atom equal to word, ignoring ASCII case. */
bool imap_arg_atom_is(const struct imap_arg *a, const char *word);

#endif

/* line.h — CRLF line extraction from an evbuffer with a maximum length (STYLE 7, 8).
 *
 * A line_reader holds no data, only the limit, the mode and whether it is skipping the rest of
 * an overlong line; the bytes stay in the caller's evbuffer. Only the first max + 2 bytes of
 * the buffer are ever searched, so each call is bounded whatever the client sends.
 *
 * Line ends. Strict mode (flags 0): a line ends only at CRLF; a lone LF or CR is data inside the
 * line (SMTP and IMAP commands: the caller may reject lines holding them). Tolerant mode
 * (LINE_LF): a line ends at LF, and a CR just before it is removed too; line.bare_lf says
 * whether the end was a bare LF.
 *
 * Overlong lines. A line longer than max (not counting its line end) is never returned: the
 * reader answers -1 once, as soon as it knows (possibly before the end of the line arrived),
 * then drains the rest of that line up to and including its line end, over as many calls as
 * it takes, returning 0 meanwhile. So a session answers "line too long" on -1 and carries on
 * with the next line; the buffer never holds more than max + 2 bytes of it.
 *
 * Between calls the caller may append to the evbuffer but removes bytes only through these
 * functions (or calls line_reader_reset first): the reader remembers how far it searched. */
#ifndef HERON_LINE_H
#define HERON_LINE_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>

#include "common/buf.h"

enum line_flags {
	LINE_LF = 1 << 0, /* tolerant: LF alone ends a line too */
};

struct line_reader {
	size_t max;      /* longest line accepted, line end excluded */
	unsigned flags;  /* enum line_flags */
	bool discarding; /* skipping the rest of an overlong line */
	bool skip_cr;    /* strict discard: the last byte drained was a CR */
	size_t scanned;  /* bytes at the head of the buffer known to hold no line end */
};

struct line {
	const char *p; /* the line's bytes, line end removed; see line_read/line_peek */
	size_t len;
	size_t total; /* len plus the line end: what line_drain removes */
	bool bare_lf; /* LINE_LF mode: the line ended with LF without CR */
};

void line_reader_init(struct line_reader *r, size_t max, unsigned flags);
/* Forgets an overlong line being skipped (the connection changed, e.g. after STARTTLS). */
void line_reader_reset(struct line_reader *r);

/* Takes the next line out of in and copies it into out (emptied first; out->max >= r->max).
   Returns 1 with *line_r set (p points into out's data, NUL-terminated), 0 when more input is
   needed, -1 when the line is too long (see above). */
int line_read(struct line_reader *r, struct evbuffer *in, struct buf *out, struct line *line_r);

/* Zero-copy form: finds the next line and linearizes it in place (evbuffer_pullup) without
   removing it: p points into in and is valid until in changes; it is not NUL-terminated. Same
   returns as line_read. After 1 the caller must call line_drain() before the next peek. */
int line_peek(struct line_reader *r, struct evbuffer *in, struct line *line_r);
/* Removes a peeked line (line->total bytes) from in. */
void line_drain(struct evbuffer *in, const struct line *line);

#endif

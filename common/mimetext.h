/* mimetext.h — the searchable text of a message, as IMAP SEARCH BODY/TEXT and the store's
 * full-text index both read it (so the index holds exactly what SEARCH compares).
 *
 * A message is streamed through the MIME parser (rfc5322.h) and comes out as runs of UTF-8
 * text: each header field's name and value (unfolded, RFC 2047 encoded words decoded), and
 * the body of each text leaf (text/ *, attached or not, and those of embedded messages),
 * decoded from base64 or quoted-printable and brought from its charset to UTF-8 (UTF-8 and
 * US-ASCII as they are; ISO-8859-1 and windows-1252 by table; any other charset iconv knows
 * through iconv; an unknown one as it stands). Leaves of other types (images, PDF, ...) give
 * no text, only their MIME header fields. A string matches a message when it is inside one
 * run: a match never spans two fields, two parts, or a field and a body. With fold the text
 * is case-folded (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic: mimetext_fold). Memory
 * is bounded by the chunk and the parser's fixed limits: a body is never held whole. */
#ifndef HERON_MIMETEXT_H
#define HERON_MIMETEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum mimetext_kind {
	MIMETEXT_FIELD,      /* a header field (name or value) of the message itself */
	MIMETEXT_PART_FIELD, /* of a MIME part or an embedded message */
	MIMETEXT_BODY,       /* decoded text of a text leaf */
};

/* What a body run is part of (PREVIEW picks its leaf by these). */
struct mimetext_leaf {
	bool plain, html; /* text/plain, text/html */
	bool attachment;  /* Content-Disposition: attachment */
	uint32_t index;   /* the parser's part number */
};

/* One piece of a run: start is true for the first piece of each run (a field is one piece;
   a body comes in pieces, each holding whole UTF-8 sequences). Returning true stops the
   walk. leaf is set for MIMETEXT_BODY. */
typedef bool mimetext_cb(void *arg, enum mimetext_kind kind, bool start, const char *p, size_t len,
			 const struct mimetext_leaf *leaf);

struct mimetext_opts {
	bool fold;   /* case-fold the text */
	bool fields; /* header field runs too (else bodies only) */
};

struct mimetext;
struct mimetext *mimetext_new(const struct mimetext_opts *o, mimetext_cb *cb, void *arg);
void mimetext_free(struct mimetext **mtp);
/* A message in pieces: begin, push the raw bytes in any chunks, end. */
void mimetext_begin(struct mimetext *mt);
void mimetext_push(struct mimetext *mt, const void *data, size_t len);
void mimetext_end(struct mimetext *mt);
/* Whether the callback stopped the walk. */
bool mimetext_stopped(const struct mimetext *mt);
/* The whole message file fd (size bytes, read with pread in 64 KiB chunks) until the end or
   the callback stops: 0, or -1 on a read error. */
int mimetext_file(struct mimetext *mt, int fd, uint64_t size);

/* Folds UTF-8 s[0..len) in place (the folded characters keep their length); returns how
   many bytes at the end form an incomplete sequence (left as they are). */
size_t mimetext_fold(char *s, size_t len);
/* Appends unfolded header text p with its RFC 2047 encoded words decoded to UTF-8 (white
   space between two words dropped) to out. */
void mimetext_decode_words(const char *p, size_t len, struct buf *out);
/* A raw header field value (after the colon, folds included) as a run: unfolded, encoded
   words decoded, folded when fold; out is reset first. */
void mimetext_field_text(const char *raw, size_t len, bool fold, struct buf *out);

#endif

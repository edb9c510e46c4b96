/* msgcache.h — what imapd needs of a message without opening its file, computed once at
 * delivery/append by streaming the message through the RFC 5322/MIME parser (rfc5322.[ch]).
 *
 * The builder takes the raw message in chunks of any size (as it is spooled) and produces one
 * serialized blob that the store keeps in its index beside the message row. Readers parse the
 * blob in place (no alignment needed, no allocation). The blob holds:
 *   - RFC822.SIZE, header and body sizes, body line count;
 *   - the IMAP ENVELOPE, BODY and BODYSTRUCTURE (with extension data) strings, exactly as a
 *     FETCH response writes them;
 *   - the raw header block (for HEADER, HEADER.FIELDS[.NOT], and SEARCH on headers);
 *   - the Date: header as a time (for SENTBEFORE/SENTON/SENTSINCE);
 *   - a part table: for every MIME part, its section number and the offsets/sizes of its
 *     header and body in the message, so BODY[1.2.MIME] or BODY[2.TEXT] is one pread.
 * Malformed input never fails the build: it yields a best-effort structure (RFC 3501 defaults:
 * text/plain us-ascii), never a crash. Limits (nesting depth, parts, header size kept) are
 * fixed inside and documented in msgcache.c: up to 1000 parts, depth 32, 256 KiB of raw header.
 *
 * The blob starts with a version byte; msgcache_parse refuses other versions, so a store that
 * finds -1 rebuilds the entry from the message file. Strings are valid IMAP as they stand
 * (quoted, or a {n}CRLF literal for 8-bit or CR/LF text, NIL when absent): the bytes imapd
 * sends in a FETCH answer for the message. Building costs one pass over the bytes and no allocation
 * per byte or line; keep one builder per process or session and reset it between messages
 * (msgcache_build makes a new one each call). */
#ifndef HERON_MSGCACHE_H
#define HERON_MSGCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/buf.h"
#include "common/str.h"

/* The largest serialized cache msgcache_builder_finish writes (three rendered strings of at
   most 4 MiB, 256 KiB of header, 1000 part records: msgcache.c checks it): an out buffer with
   this ceiling never fails, so every message has a cache. */
#define MSGCACHE_BLOB_MAX (13u << 20)

struct msgcache_builder;

struct msgcache_builder *msgcache_builder_new(void);
/* Feeds the next bytes of the raw message (CRLF line ends as stored; bare LF tolerated). */
void msgcache_builder_push(struct msgcache_builder *b, const void *data, size_t len);
/* Ends the message and appends the serialized cache to out: 0, or -1 when out's ceiling was
   reached (out is then unchanged). The builder can be freed or reused after reset. */
int msgcache_builder_finish(struct msgcache_builder *b, struct buf *out);
void msgcache_builder_reset(struct msgcache_builder *b);
void msgcache_builder_free(struct msgcache_builder **bp);
/* Convenience: builds the cache of a whole message in memory. */
int msgcache_build(const void *msg, size_t len, struct buf *out);

struct msgcache_view {
	uint64_t size;        /* RFC822.SIZE: every byte of the message */
	uint64_t header_size; /* the header block including the empty line that ends it */
	uint64_t body_size;   /* size - header_size */
	uint64_t body_lines;  /* lines of the body (the line count of a text body) */
	int64_t date;         /* Date: header as a Unix time; INT64_MIN when absent/unparsable */
	struct str_view envelope;      /* "(date subject from sender reply-to to cc bcc ...)" */
	struct str_view body;          /* BODY: BODYSTRUCTURE without extension data */
	struct str_view bodystructure; /* BODYSTRUCTURE with extension data */
	struct str_view header;        /* raw header block, including the final empty line; when
					  header.len < header_size it was cut at the limit: read
					  the header from the message file instead */
	uint32_t nparts;               /* entries of the part table */
	int32_t date_tz;               /* zone of the Date: header, minutes east of UTC (0 when
					  absent): date + date_tz * 60 is the time as written,
					  whose calendar day SENTON/SENTBEFORE/SENTSINCE compare */
};

struct msgcache_part {
	uint64_t header_off, header_size; /* the part's MIME header (for .MIME) */
	uint64_t body_off, body_size;     /* the part's body (BODY[n]) */
	bool is_message;                  /* message/rfc822: n.HEADER and n.TEXT address the
					     embedded message, whose header/body are sub_* */
	uint64_t sub_header_off, sub_header_size, sub_body_off, sub_body_size;
	bool is_multipart;
};

/* Parses a serialized cache; -1 if blob is not one (wrong version, truncated). */
int msgcache_parse(const void *blob, size_t len, struct msgcache_view *v);
/* Finds a part by IMAP section number ("1", "2.1.3"; the caller strips .MIME/.HEADER/.TEXT).
   Section "" is the whole message (header_off 0). -1 if there is no such part. For a
   non-multipart message (or embedded message), "1" is its body. BODY[n.MIME] is header_*,
   BODY[n] is body_*, BODY[n.HEADER]/[n.TEXT] of a message/rfc822 part are sub_header_* and
   sub_body_*; for the message itself ("" + HEADER/TEXT) use header_* and body_*. */
int msgcache_part(const void *blob, size_t len, const char *section, struct msgcache_part *p);

#endif

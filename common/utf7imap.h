/* utf7imap.h — modified UTF-7 (RFC 3501 section 5.1.3), the encoding of IMAP mailbox names.
 *
 * Printable US-ASCII (0x20..0x7e) stands for itself, except '&', written "&-". Every other
 * character is written as '&', the modified BASE64 (',' instead of '/', no '=' padding) of its
 * UTF-16BE form, and '-'. The decoder is strict: it refuses what a conforming encoder never
 * produces (a printable ASCII character inside a shifted run, non-zero or excess padding bits,
 * an unterminated run, a broken surrogate pair, raw 8-bit or control bytes), so every valid
 * name has exactly one spelling and a decoded name always re-encodes to the same bytes. */
#ifndef HERON_UTF7IMAP_H
#define HERON_UTF7IMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

/* Appends the modified UTF-7 form of the UTF-8 text in[0..len) to out. 0, or -1 when in is not
   valid UTF-8 (overlong forms, surrogates and code points past U+10FFFF are invalid) or holds
   a control character, or out's ceiling was reached; out is then unchanged. */
int utf7imap_encode(const char *in, size_t len, struct buf *out);
/* Appends the UTF-8 form of the modified UTF-7 text in[0..len) to out. 0, or -1 when in is not
   strictly valid modified UTF-7 (see above) or out's ceiling was reached; out is then
   unchanged. */
int utf7imap_decode(const char *in, size_t len, struct buf *out);
/* Whether in[0..len) is strictly valid modified UTF-7 (what utf7imap_decode accepts). */
bool utf7imap_valid(const char *in, size_t len);

#endif

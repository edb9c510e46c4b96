/* buf.h — growable byte buffer with a hard ceiling (STYLE 10).
 *
 * A buf grows as needed but never past max: an append that would pass it fails with -1 and
 * leaves the buffer unchanged, so a reader can keep consuming input and answer at the end. The
 * data is always followed by a NUL byte (not counted in len), so text can be used as a C string.
 * A buf can live inside another struct (buf_init/buf_release) or on the heap (buf_new/buf_free). */
#ifndef HERON_BUF_H
#define HERON_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	char *data; /* len bytes, then a NUL; NULL until the first append */
	size_t len;
	size_t cap; /* allocated, including the NUL */
	size_t max; /* the ceiling for len */
};

/* The max of a buf whose size its input already bounds (the UIDs of a mailbox, a reply
   built from bounded parts); the caller says by what. */
#define BUF_INPUT_BOUNDED (SIZE_MAX / 2)

void buf_init(struct buf *b, size_t initial, size_t max);
struct buf *buf_new(size_t initial, size_t max);
/* Frees the data; the buf can be used again after buf_init. */
void buf_release(struct buf *b);
/* Frees a buf_new'd buf and sets *bp to NULL; safe on NULL. */
void buf_free(struct buf **bp);
/* Empties the buf, keeping its memory. */
void buf_reset(struct buf *b);

/* 0, or -1 when len would pass max (the buf is then unchanged). */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
/* The UTF-8 form of code point cp (1 to 4 bytes; cp <= 0x10FFFF, the caller keeps out
   surrogates); 0, or -1 as for buf_append (nothing appended). */
int buf_put_utf8(struct buf *b, uint32_t cp);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Makes room for n more bytes and returns where they go; -1 as for buf_append (NULL). The
   caller writes, then calls buf_commit(b, written). */
char *buf_reserve(struct buf *b, size_t n);
void buf_commit(struct buf *b, size_t n);
/* Drops the first n bytes (all when n >= len). */
void buf_consume(struct buf *b, size_t n);
/* Shortens to n bytes (n <= len). */
void buf_truncate(struct buf *b, size_t n);
/* The content as a NUL-terminated string ("" when empty; never NULL). */
const char *buf_cstr(const struct buf *b);
/* Hands the data to the caller (free() it) and empties the buf; never NULL. */
char *buf_steal(struct buf *b, size_t *len_r);

#endif

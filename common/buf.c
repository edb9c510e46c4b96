/* buf.c — owns the growable, bounded byte buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xmalloc.h"

void buf_init(struct buf *b, size_t initial, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
	if (initial > 0) {
		b->cap = (initial < max ? initial : max) + 1;
		b->data = xmalloc(b->cap);
		b->data[0] = '\0';
	}
}

struct buf *buf_new(size_t initial, size_t max)
{
	struct buf *b = xmalloc(sizeof(*b));

	buf_init(b, initial, max);
	return b;
}

void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_free(struct buf **bp)
{
	if (*bp == NULL)
		return;
	buf_release(*bp);
	free(*bp);
	*bp = NULL;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

char *buf_reserve(struct buf *b, size_t n)
{
	size_t need;

	if (n > b->max - b->len)
		return NULL;
	need = b->len + n + 1;
	if (need > b->cap) {
		size_t cap = b->cap < 64 ? 64 : b->cap;

		while (cap < need)
			cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
		if (cap > b->max + 1)
			cap = b->max + 1;
		b->data = xreallocarray(b->data, cap, 1);
		b->cap = cap;
	}
	return b->data + b->len;
}

void buf_commit(struct buf *b, size_t n)
{
	b->len += n;
	b->data[b->len] = '\0';
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	char *dst = buf_reserve(b, n);

	if (dst == NULL)
		return -1;
	if (n > 0)
		memcpy(dst, p, n);
	buf_commit(b, n);
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_put_utf8(struct buf *b, uint32_t cp)
{
	char t[4];
	size_t n;

	if (cp < 0x80) {
		t[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		t[0] = (char)(0xc0 | (cp >> 6));
		t[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		t[0] = (char)(0xe0 | (cp >> 12));
		t[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		t[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		t[0] = (char)(0xf0 | (cp >> 18));
		t[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		t[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		t[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return buf_append(b, t, n);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	char *dst;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || (dst = buf_reserve(b, (size_t)n)) == NULL)
		return -1;
	vsnprintf(dst, (size_t)n + 1, fmt, ap);
	buf_commit(b, (size_t)n);
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void buf_truncate(struct buf *b, size_t n)
{
	if (n < b->len) {
		b->len = n;
		b->data[n] = '\0';
	}
}

const char *buf_cstr(const struct buf *b)
{
	return b->data != NULL ? b->data : "";
}

char *buf_steal(struct buf *b, size_t *len_r)
{
	char *d = b->data != NULL ? b->data : xstrdup("");

	if (len_r != NULL)
		*len_r = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

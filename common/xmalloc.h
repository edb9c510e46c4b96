/* xmalloc.h — allocation that never returns NULL: running out of memory is fatal. */
#ifndef HERON_XMALLOC_H
#define HERON_XMALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t nmemb, size_t size);
/* Resizes; nmemb * size overflowing is fatal like running out of memory. */
void *xreallocarray(void *ptr, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Duplicates n bytes of p and appends a NUL (p may hold NULs). */
char *xmemdup0(const void *p, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

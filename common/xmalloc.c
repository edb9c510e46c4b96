/* xmalloc.c — owns the abort-on-OOM allocation wrappers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xmalloc.h"

void *xmalloc(size_t size)
{
	void *p = malloc(size == 0 ? 1 : size);

	if (p == NULL)
		fatal("malloc %zu", size);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb == 0 ? 1 : nmemb, size == 0 ? 1 : size);

	if (p == NULL)
		fatal("calloc %zu x %zu", nmemb, size);
	return p;
}

void *xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void *p;

	if (size != 0 && nmemb > ((size_t)-1) / size)
		fatalx("xreallocarray: %zu x %zu overflows", nmemb, size);
	p = realloc(ptr, nmemb * size == 0 ? 1 : nmemb * size);
	if (p == NULL)
		fatal("realloc %zu x %zu", nmemb, size);
	return p;
}

char *xstrdup(const char *s)
{
	return xmemdup0(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	return xmemdup0(s, strnlen(s, n));
}

char *xmemdup0(const void *p, size_t n)
{
	char *r = xmalloc(n + 1);

	if (n > 0)
		memcpy(r, p, n);
	r[n] = '\0';
	return r;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *r;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&r, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("vasprintf");
	return r;
}

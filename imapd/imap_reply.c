/* imap_reply.c — owns response text: formatted lines and astring/nstring quoting (atom,
 * quoted string or literal, whichever the bytes allow). */
#include <string.h>

#include "imapd/imapd.h"

void imap_printf(struct imap_client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(imap_out(c), fmt, ap);
	va_end(ap);
}

void imap_write(struct imap_client *c, const void *p, size_t len)
{
	evbuffer_add(imap_out(c), p, len);
}

void imap_write_text(struct imap_client *c, const void *p, size_t len)
{
	const char *s = p, *nul;

	while (len > 0 && (nul = memchr(s, '\0', len)) != NULL) {
		evbuffer_add(imap_out(c), s, (size_t)(nul - s));
		evbuffer_add(imap_out(c), "\x80", 1);
		len -= (size_t)(nul - s) + 1;
		s = nul + 1;
	}
	evbuffer_add(imap_out(c), s, len);
}

/* 0: atom-safe, 1: needs quotes, 2: needs a literal. */
static int string_kind(const char *s, size_t len)
{
	int kind = len == 0 ? 1 : 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '\0' || ch == '\r' || ch == '\n' || ch >= 0x80)
			return 2;
		if (ch <= 0x20 || ch == 0x7f || strchr("(){%*\"\\]", ch) != NULL)
			kind = 1;
	}
	return kind;
}

/* "s" with '"' and '\\' escaped. */
static void write_quoted(struct evbuffer *out, const char *s, size_t len)
{
	evbuffer_add(out, "\"", 1);
	for (size_t i = 0, run = 0; i <= len; i++) {
		if (i == len || s[i] == '"' || s[i] == '\\') {
			evbuffer_add(out, s + run, i - run);
			if (i < len)
				evbuffer_add(out, "\\", 1);
			run = i;
		}
	}
	evbuffer_add(out, "\"", 1);
}

void imap_write_string(struct imap_client *c, const char *s, size_t len)
{
	struct evbuffer *out = imap_out(c);

	if (string_kind(s, len) == 2) {
		evbuffer_add_printf(out, "{%zu}\r\n", len);
		imap_write_text(c, s, len);
		return;
	}
	write_quoted(out, s, len);
}

void imap_write_astring(struct imap_client *c, const char *s, size_t len)
{
	if (string_kind(s, len) == 0 && !(len == 3 && strncasecmp(s, "NIL", 3) == 0))
		imap_write(c, s, len);
	else
		imap_write_string(c, s, len);
}

void imap_write_utf8(struct imap_client *c, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\0' || s[i] == '\r' || s[i] == '\n') {
			imap_write_string(c, s, len);
			return;
		}
	/* IMAP4rev2 and UTF8=ACCEPT quoted strings carry UTF-8 (RFC 9051 QUOTED-CHAR) */
	write_quoted(imap_out(c), s, len);
}

/* fuzz_imap_url.c — libFuzzer target: CATENATE's IMAP URL parser (imapd/imap_url). Any bytes
 * are parsed; a URL taken has a UID, a server only with a mailbox, fields within their bounds,
 * and, written back with every byte the parser treats specially percent-escaped, parses again
 * to the same fields. Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "imapd/imap_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Appends s percent-escaped where the parser would stop or split (out has room). */
static size_t put_escaped(char *out, size_t n, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c <= ' ' || c >= 0x7f || strchr("%\";/@:", c) != NULL) {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		} else {
			out[n++] = (char)c;
		}
	}
	return n;
}

static size_t put_raw(char *out, size_t n, const char *s)
{
	size_t l = strlen(s);

	memcpy(out + n, s, l);
	return n + l;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char url[3 * (2 * IMAP_URL_NAME_MAX + IMAP_URL_MAILBOX_MAX + IMAP_URL_SECTION_MAX) +
			256];
	struct imap_url u, v;
	size_t n = 0;
	char num[32];

	if (imap_url_parse((const char *)data, size, &u) != 0)
		return 0;
	assert(u.uid != 0);
	assert(!u.has_server || u.has_mailbox);
	assert(u.user[0] == '\0' || u.has_server);
	assert(strlen(u.user) <= IMAP_URL_NAME_MAX && strlen(u.host) <= IMAP_URL_NAME_MAX);
	assert(strlen(u.mailbox) <= IMAP_URL_MAILBOX_MAX);
	assert(strlen(u.section) <= IMAP_URL_SECTION_MAX);
	assert(u.has_mailbox == (u.mailbox[0] != '\0'));
	assert(u.has_partial || (u.partial_off == 0 && u.partial_len == 0));
	/* written back in the same form, it reads the same */
	if (u.has_server) {
		n = put_raw(url, n, "imap://");
		if (u.user[0] != '\0') {
			n = put_escaped(url, n, u.user);
			n = put_raw(url, n, "@");
		}
		n = put_raw(url, n, u.host); /* the host is taken only without escapes */
	}
	if (u.has_mailbox) {
		n = put_raw(url, n, "/");
		n = put_escaped(url, n, u.mailbox);
		if (u.uidvalidity != 0) {
			snprintf(num, sizeof(num), ";UIDVALIDITY=%u", u.uidvalidity);
			n = put_raw(url, n, num);
		}
		n = put_raw(url, n, "/");
	}
	snprintf(num, sizeof(num), ";UID=%u", u.uid);
	n = put_raw(url, n, num);
	if (u.section[0] != '\0') {
		n = put_raw(url, n, "/;SECTION=");
		n = put_escaped(url, n, u.section);
	}
	if (u.has_partial) {
		snprintf(num, sizeof(num), "/;PARTIAL=%u", u.partial_off);
		n = put_raw(url, n, num);
		if (u.partial_len != 0) {
			snprintf(num, sizeof(num), ".%u", u.partial_len);
			n = put_raw(url, n, num);
		}
	}
	assert(n < sizeof(url));
	assert(imap_url_parse(url, n, &v) == 0);
	assert(memcmp(&u, &v, sizeof(u)) == 0);
	return 0;
}

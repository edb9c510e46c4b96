/* fuzz_mailaddr.c — libFuzzer target: RFC 5321 paths, addresses, MAIL/RCPT parameters and
 * xtext (common/mailaddr). The first byte picks the options; the rest is the argument. A parsed
 * path stays within the RFC 5321 limits, formats and canonicalizes without overflow, and
 * re-parses to the same address; xtext round-trips; ENVID and ORCPT never decode to a control
 * character (they are copied into DSN header fields). Built only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/mailaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_ctl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static void check_addr(const struct mailaddr *a, unsigned opts)
{
	char text[MAILADDR_TEXT_MAX + 3], canon[MAILADDR_TEXT_MAX + 3], path[MAILADDR_TEXT_MAX + 8];
	struct mailaddr b;
	const char *err;
	size_t used;

	assert(strlen(a->local) <= MAILADDR_LOCAL_MAX);
	assert(strlen(a->domain) <= MAILADDR_DOMAIN_MAX);
	assert(mailaddr_format(a, text, sizeof(text)) == 0);
	assert(mailaddr_canonical(a, canon, sizeof(canon)) == 0);
	(void)mailaddr_tricks(a);
	static char d1[] = "example.org", d2[] = "EXAMPLE.net";
	char *const doms[] = { d1, d2 };

	(void)mailaddr_domain_in(a, doms, 2);
	if (a->flags & (MAILADDR_F_NULL | MAILADDR_F_ROUTE | MAILADDR_F_TRAILING_DOT))
		return;
	/* What we print we read back as the same address. */
	snprintf(path, sizeof(path), "<%s>", text);
	if (mailaddr_parse_path(path, strlen(path), opts, &b, &used, &err) == 0) {
		assert(used == strlen(path));
		assert(strcmp(a->local, b.local) == 0 && strcmp(a->domain, b.domain) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned opts = size > 0 ? data[0] & 7 : 0;
	const char *p = size > 0 ? (const char *)data + 1 : "";
	size_t len = size > 0 ? size - 1 : 0;
	struct mailaddr a;
	struct mail_params mp;
	struct rcpt_params rp;
	const char *err = NULL;
	char x[1024], y[1024];
	size_t used = 0;

	if (mailaddr_parse_path(p, len, opts, &a, &used, &err) == 0) {
		assert(used <= len);
		check_addr(&a, opts);
		(void)mailaddr_mail_params(p + used, len - used, &mp, &err);
		(void)mailaddr_rcpt_params(p + used, len - used, opts & MAILADDR_ALLOW_UTF8, &rp,
					   &err);
	} else {
		assert(err != NULL);
	}
	if (mailaddr_parse(p, len, opts, &a, &err) == 0)
		check_addr(&a, opts);
	/* ENVID and ORCPT end up in DSN header fields: never a control character */
	if (mailaddr_mail_params(p, len, &mp, &err) == 0) {
		assert(strlen(mp.envid) <= MAIL_ENVID_MAX);
		assert(!has_ctl(mp.envid));
	}
	if (mailaddr_rcpt_params(p, len, true, &rp, &err) == 0) {
		assert(strlen(rp.orcpt) <= RCPT_ORCPT_MAX);
		assert(!has_ctl(rp.orcpt));
	}
	(void)mailaddr_utf8_valid(p, len);
	if (mailaddr_xtext_decode(p, len, x, sizeof(x)) == 0 &&
	    mailaddr_xtext_encode(x, strlen(x), y, sizeof(y)) == 0) {
		char z[1024];

		assert(mailaddr_xtext_decode(y, strlen(y), z, sizeof(z)) == 0);
		assert(strcmp(x, z) == 0);
	}
	return 0;
}

/* fuzz_mailaddr.c — libFuzzer target: any bytes as an RFC 5321 path (every option set), as
 * MAIL/RCPT parameters and as xtext. Checks the limits hold, that a parsed address formats and
 * parses again to the same thing, and that xtext round-trips; ENVID and ORCPT never decode to a
 * control character (they are copied into DSN header fields). Built only with -Dfuzz=true. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

static void check_path(const char *p, size_t size, unsigned opts)
{
	struct mailaddr a, b;
	const char *err;
	char text[MAILADDR_TEXT_MAX + 1], key[MAILADDR_TEXT_MAX + 1];
	size_t used;

	if (mailaddr_parse_path(p, size, opts, &a, &used, &err) < 0) {
		assert(err != NULL);
		return;
	}
	assert(used <= size && used <= MAILADDR_PATH_MAX);
	assert(strlen(a.local) <= MAILADDR_LOCAL_MAX && strlen(a.domain) <= MAILADDR_DOMAIN_MAX);
	assert(mailaddr_format(&a, text, sizeof(text)) == 0);
	assert(mailaddr_canonical(&a, key, sizeof(key)) == 0);
	(void)mailaddr_tricks(&a);
	if ((a.flags & MAILADDR_F_NULL) || a.domain[0] == '\0')
		return;
	/* what we print, we read back (the route and a trailing dot are dropped on the way) */
	assert(mailaddr_parse(text, strlen(text), opts | MAILADDR_ALLOW_UTF8, &b, &err) == 0);
	assert(strcmp(a.local, b.local) == 0 && strcmp(a.domain, b.domain) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct mail_params mp;
	struct rcpt_params rp;
	const char *err;
	char dec[1024], enc[3 * 1024 + 1], dec2[1024];

	for (unsigned opts = 0; opts < 8; opts++)
		check_path(p, size, opts);
	if (mailaddr_mail_params(p, size, &mp, &err) == 0)
		assert(!has_ctl(mp.envid));
	if (mailaddr_rcpt_params(p, size, size > 0 && data[0] & 1, &rp, &err) == 0)
		assert(!has_ctl(rp.orcpt));
	(void)mailaddr_utf8_valid(p, size);
	if (mailaddr_xtext_decode(p, size, dec, sizeof(dec)) == 0) {
		size_t n = strlen(dec);

		if (memchr(p, '\0', size) == NULL &&
		    mailaddr_xtext_encode(dec, n, enc, sizeof(enc)) == 0) {
			assert(mailaddr_xtext_decode(enc, strlen(enc), dec2, sizeof(dec2)) == 0);
			assert(strcmp(dec, dec2) == 0);
		}
	}
	return 0;
}

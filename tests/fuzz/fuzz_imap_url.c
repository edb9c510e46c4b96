/* fuzz_imap_url.c — libFuzzer target: the IMAP URL parser of CATENATE and URLAUTH
 * (imapd/imap_url). Any bytes are parsed; a URL taken has a UID, a server only with a
 * mailbox, fields within their bounds, a URLAUTH part only on the full form with a user (its
 * rump a prefix of the URL, a token only with a mechanism), and, written back with every byte
 * the parser treats specially percent-escaped (;EXPIRE= in UTC), parses again to the same
 * fields, the rump ending where the access identifier was written. Built only with
 * -Dfuzz=true (clang). */
#include <assert.h>
#include <stdbool.h>
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

/* Unix time t as an RFC 3339 UTC date-time into out (32 bytes): false when its year has not
   four digits. */
static bool put_time(char *out, int64_t t)
{
	int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
	int64_t sec = t - days * 86400;
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	int64_t y = yoe + era * 400 + (m <= 2);

	if (y < 0 || y > 9999)
		return false;
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, (int)m, (int)d,
		 (int)(sec / 3600), (int)(sec / 60 % 60), (int)(sec % 60));
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char url[3 * (3 * IMAP_URL_NAME_MAX + IMAP_URL_MAILBOX_MAX + IMAP_URL_SECTION_MAX) +
			IMAP_URL_MECH_MAX + IMAP_URL_TOKEN_MAX + 256];
	struct imap_url u, v;
	size_t n = 0, rump = 0;
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
	if (u.access == IMAP_URL_ACCESS_NONE) {
		assert(!u.has_expire && u.rump_len == 0 && u.mech[0] == '\0' &&
		       u.token[0] == '\0');
	} else {
		assert(u.has_server && u.user[0] != '\0' && !u.has_auth);
		assert(u.rump_len > 0 && u.rump_len <= size);
		assert((u.mech[0] == '\0') == (u.token[0] == '\0'));
		assert(u.token[0] == '\0' || strlen(u.token) >= 32);
		assert(strlen(u.token) <= IMAP_URL_TOKEN_MAX &&
		       strlen(u.mech) <= IMAP_URL_MECH_MAX);
		assert((u.access_user[0] != '\0') ==
		       (u.access == IMAP_URL_ACCESS_SUBMIT || u.access == IMAP_URL_ACCESS_USER));
		assert(u.token[0] != '\0' || u.rump_len == size);
	}
	/* written back in the same form, it reads the same */
	if (u.has_server) {
		n = put_raw(url, n, "imap://");
		if (u.user[0] != '\0') {
			n = put_escaped(url, n, u.user);
			if (u.has_auth)
				n = put_raw(url, n, ";AUTH=*");
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
	if (u.has_expire) {
		if (!put_time(num, u.expire))
			return 0; /* an offset took it out of the years a date-time writes */
		n = put_raw(url, n, ";EXPIRE=");
		n = put_raw(url, n, num);
	}
	if (u.access != IMAP_URL_ACCESS_NONE) {
		static const char *const names[] = { "", "submit+", "user+", "authuser",
						     "anonymous" };

		n = put_raw(url, n, ";URLAUTH=");
		n = put_raw(url, n, names[u.access]);
		n = put_escaped(url, n, u.access_user);
		rump = n;
		if (u.mech[0] != '\0') {
			n = put_raw(url, n, ":");
			n = put_raw(url, n, u.mech);
			n = put_raw(url, n, ":");
			n = put_raw(url, n, u.token);
		}
	}
	assert(n < sizeof(url));
	assert(imap_url_parse(url, n, &v) == 0);
	assert(v.rump_len == rump);
	u.rump_len = v.rump_len = 0;
	assert(memcmp(&u, &v, sizeof(u)) == 0);
	return 0;
}

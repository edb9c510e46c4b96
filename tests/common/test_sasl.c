/* test_sasl.c — the strict base64 decoder and the PLAIN message split that mtad and imapd
 * share: what is accepted, and every way a response is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/sasl.h"

/* base64 of n bytes of raw (RFC 4648, with padding) into out. */
static void b64(const void *raw, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = raw;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? a[v & 63] : '=';
	}
	out[o] = '\0';
}

static enum sasl_result plain(const void *raw, size_t n, struct sasl_plain *p)
{
	char enc[4096];

	b64(raw, n, enc);
	return sasl_plain_decode(enc, strlen(enc), p);
}

static void test_b64_strict(void **state)
{
	unsigned char out[16];
	size_t n;

	assert_int_equal(sasl_b64_decode("aGk=", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 2);
	assert_memory_equal(out, "hi", 3);
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(sasl_b64_decode("aA==", 4, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 1);
	assert_int_equal(sasl_b64_decode("", 0, out, sizeof(out), &n), SASL_OK);
	assert_int_equal(n, 0);
	/* not a multiple of 4, padding inside, white space, other alphabets, stray bits */
	const char *bad[] = { "aGk",  "aG=k", "a===", "====", "aGk=aGk=", " aGk=", "aGk=\n",
			      "aG k", "aGk-", "aGk_", "aGl=", "aB==",     "aGk*" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sasl_b64_decode(bad[i], strlen(bad[i]), out, sizeof(out), &n) != SASL_EBASE64)
			fail_msg("accepted '%s'", bad[i]);
	/* room for the data and a NUL */
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, 3, &n), SASL_EBASE64);
	assert_int_equal(sasl_b64_decode("aGV5", 4, out, 4, &n), SASL_OK);
}

static void test_plain_accepted(void **state)
{
	struct sasl_plain p;

	assert_int_equal(plain("\0user1\0pw", 9, &p), SASL_OK);
	assert_string_equal(p.authcid, "user1");
	assert_string_equal(p.passwd, "pw");
	assert_int_equal(plain("user1\0user1\0pw", 14, &p), SASL_OK);
	assert_string_equal(p.authcid, "user1");
	/* the password may hold any byte but NUL */
	assert_int_equal(plain("\0u\0p w\xff\x01", 8, &p), SASL_OK);
	assert_string_equal(p.passwd, "p w\xff\x01");
	sasl_plain_wipe(&p);
	assert_string_equal(p.passwd, "");
}

static void test_plain_refused(void **state)
{
	struct sasl_plain p;
	char big[2 * SASL_PASSWORD_MAX];

	/* a fourth field (mtad took it once), too few fields, empty ones */
	assert_int_equal(plain("\0user1\0user1\0x", 15, &p), SASL_EFORMAT);
	assert_string_equal(p.passwd, "");
	assert_int_equal(plain("\0user1\0pw\0", 10, &p), SASL_EFORMAT);
	assert_int_equal(plain("user1\0pw", 8, &p), SASL_EFORMAT);
	assert_int_equal(plain("user1", 5, &p), SASL_EFORMAT);
	assert_int_equal(plain("\0\0pw", 4, &p), SASL_EFORMAT);
	assert_int_equal(plain("\0user1\0", 7, &p), SASL_EFORMAT);
	assert_int_equal(plain("", 0, &p), SASL_EFORMAT);
	assert_int_equal(sasl_plain_decode("", 0, &p), SASL_EFORMAT);
	/* another identity */
	assert_int_equal(plain("admin\0user1\0pw", 14, &p), SASL_EAUTHZ);
	assert_string_equal(p.authcid, "");
	assert_int_equal(plain("user\0user1\0pw", 13, &p), SASL_EAUTHZ);
	assert_int_equal(plain("user12\0user1\0pw", 15, &p), SASL_EAUTHZ);
	/* limits: a name of SASL_NAME_MAX bytes is taken, one more is not */
	memset(big, 'n', sizeof(big));
	big[0] = '\0';
	big[SASL_NAME_MAX + 1] = '\0';
	big[SASL_NAME_MAX + 2] = 'p';
	assert_int_equal(plain(big, SASL_NAME_MAX + 3, &p), SASL_OK);
	assert_int_equal(strlen(p.authcid), SASL_NAME_MAX);
	big[SASL_NAME_MAX + 1] = 'n';
	big[SASL_NAME_MAX + 2] = '\0';
	big[SASL_NAME_MAX + 3] = 'p';
	assert_int_equal(plain(big, SASL_NAME_MAX + 4, &p), SASL_EFORMAT);
	/* a password of SASL_PASSWORD_MAX bytes, and one more */
	memset(big, 'p', sizeof(big));
	memcpy(big, "\0u\0", 3);
	assert_int_equal(plain(big, 3 + SASL_PASSWORD_MAX, &p), SASL_OK);
	assert_int_equal(strlen(p.passwd), SASL_PASSWORD_MAX);
	assert_int_not_equal(plain(big, 4 + SASL_PASSWORD_MAX, &p), SASL_OK);
	/* base64 errors come first */
	assert_int_equal(sasl_plain_decode("AHVzZXIxAHB3", 11, &p), SASL_EBASE64);
	assert_true(SASL_PLAIN_B64_MAX >= 4 * ((2 * SASL_NAME_MAX + SASL_PASSWORD_MAX + 2) / 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_strict),
		cmocka_unit_test(test_plain_accepted),
		cmocka_unit_test(test_plain_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

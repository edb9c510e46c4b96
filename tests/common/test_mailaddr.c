/* test_mailaddr.c — RFC 5321 paths: syntax, length limits, quoting, literals, SMTPUTF8, the
 * MAIL/RCPT parameters and xtext, and the relay-trick classification. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/mailaddr.h"

static int path(const char *s, unsigned opts, struct mailaddr *a, size_t *used)
{
	const char *err = NULL;
	size_t u = 0;
	int rc = mailaddr_parse_path(s, strlen(s), opts, a, &u, &err);

	if (rc < 0)
		assert_non_null(err);
	if (used != NULL)
		*used = u;
	return rc;
}

static void test_simple(void **state)
{
	struct mailaddr a;
	size_t used;
	char out[MAILADDR_TEXT_MAX + 1];

	assert_int_equal(path("<alice@example.org> SIZE=10", 0, &a, &used), 0);
	assert_int_equal(used, 19);
	assert_string_equal(a.local, "alice");
	assert_string_equal(a.domain, "example.org");
	assert_int_equal(a.flags, 0);
	assert_int_equal(mailaddr_format(&a, out, sizeof(out)), 0);
	assert_string_equal(out, "alice@example.org");
	assert_int_equal(mailaddr_tricks(&a), 0);

	assert_int_equal(path("<>", MAILADDR_ALLOW_NULL, &a, &used), 0);
	assert_true(a.flags & MAILADDR_F_NULL);
	assert_int_equal(used, 2);
	assert_int_equal(path("<>", 0, &a, NULL), -1);

	assert_int_equal(path("<Postmaster>", 0, &a, NULL), 0);
	assert_string_equal(a.domain, "");
	assert_int_equal(path("<bob>", 0, &a, NULL), -1);
}

static void test_bad_syntax(void **state)
{
	static const char *bad[] = {
		"alice@example.org",
		"<alice@example.org",
		"<alice@@example.org>",
		"<alice@example..org>",
		"<.alice@example.org>",
		"<alice.@example.org>",
		"<al..ice@example.org>",
		"<alice@-example.org>",
		"<alice@example-.org>",
		"<alice@>",
		"<@example.org>",
		"<alice example@example.org>",
		"<\"unterminated@example.org>",
		"<alice@exa_mple.org>",
		"<alice@[300.1.1.1]>",
		"<alice@[IPv6:zz::1]>",
		"<alice@[tag:stuff]>",
		"<a\x01@example.org>",
		"<user@remote@example.org>",
		"<alice@.>",
		"<caf\xc3\xa9@example.org>",
		"<a@[1.2.3.4 ]>",
		"<a@[IPv6:::1\x01]>",
	};
	struct mailaddr a;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (path(bad[i], MAILADDR_ALLOW_NULL, &a, NULL) != -1)
			fail_msg("accepted %s", bad[i]);
}

static void test_limits(void **state)
{
	char s[600], local[70], label[70];
	struct mailaddr a;

	memset(local, 'l', 64);
	local[64] = '\0';
	snprintf(s, sizeof(s), "<%s@example.org>", local);
	assert_int_equal(path(s, 0, &a, NULL), 0);
	local[64] = 'l';
	local[65] = '\0';
	snprintf(s, sizeof(s), "<%s@example.org>", local);
	assert_int_equal(path(s, 0, &a, NULL), -1);

	memset(label, 'd', 63);
	label[63] = '\0';
	snprintf(s, sizeof(s), "<a@%s.org>", label);
	assert_int_equal(path(s, 0, &a, NULL), 0);
	snprintf(s, sizeof(s), "<a@%sd.org>", label);
	assert_int_equal(path(s, 0, &a, NULL), -1);

	/* domain of 4 x 63 + 3 dots = 255: fine; one more label: too long */
	const char *err;
	snprintf(s, sizeof(s), "a@%s.%s.%s.%s", label, label, label, label);
	assert_int_equal(mailaddr_parse(s, strlen(s), 0, &a, &err), 0);
	assert_int_equal(strlen(a.domain), 255);
	snprintf(s, sizeof(s), "a@%s.%s.%s.%s.x", label, label, label, label);
	assert_int_equal(mailaddr_parse(s, strlen(s), 0, &a, &err), -1);
	/* as a path the same 255-octet domain passes the 256-octet path limit */
	snprintf(s, sizeof(s), "<a@%s.%s.%s.%s>", label, label, label, label);
	assert_int_equal(path(s, 0, &a, NULL), -1);

	/* path: 64 + 1 + 255 + 2 > 256 */
	local[64] = '\0';
	snprintf(s, sizeof(s), "<%s@%s.%s.%s.%s>", local, label, label, label, label);
	assert_int_equal(path(s, 0, &a, NULL), -1);
}

static void test_quoted(void **state)
{
	struct mailaddr a;
	char key[MAILADDR_TEXT_MAX + 1];

	assert_int_equal(path("<\"john smith\"@Example.ORG>", 0, &a, NULL), 0);
	assert_string_equal(a.local, "\"john smith\"");
	assert_true(a.flags & MAILADDR_F_QUOTED);
	assert_int_equal(mailaddr_canonical(&a, key, sizeof(key)), 0);
	assert_string_equal(key, "\"john smith\"@example.org");

	/* needless quoting is dropped in the lookup key */
	assert_int_equal(path("<\"john.smith\"@example.org>", 0, &a, NULL), 0);
	assert_int_equal(mailaddr_canonical(&a, key, sizeof(key)), 0);
	assert_string_equal(key, "john.smith@example.org");

	assert_int_equal(path("<\"a\\\"b\"@example.org>", 0, &a, NULL), 0);
	assert_string_equal(a.local, "\"a\\\"b\"");
}

static void test_literals(void **state)
{
	struct mailaddr a;

	assert_int_equal(path("<a@[192.0.2.1]>", 0, &a, NULL), 0);
	assert_true(a.flags & MAILADDR_F_LITERAL);
	assert_string_equal(a.domain, "[192.0.2.1]");
	assert_int_equal(mailaddr_tricks(&a), MAILADDR_T_LITERAL);
	assert_int_equal(path("<a@[IPv6:2001:db8::1]>", 0, &a, NULL), 0);
	assert_true(a.flags & MAILADDR_F_LITERAL);
}

static void test_utf8(void **state)
{
	struct mailaddr a;

	assert_int_equal(path("<caf\xc3\xa9@\xc3\xa9xample.org>", MAILADDR_ALLOW_UTF8, &a, NULL),
			 0);
	assert_true(a.flags & MAILADDR_F_UTF8);
	/* overlong, surrogate, truncated sequence */
	assert_int_equal(path("<caf\xc0\xa9@example.org>", MAILADDR_ALLOW_UTF8, &a, NULL), -1);
	assert_int_equal(path("<x\xed\xa0\x80@example.org>", MAILADDR_ALLOW_UTF8, &a, NULL), -1);
	assert_int_equal(path("<x\xe2\x82@example.org>", MAILADDR_ALLOW_UTF8, &a, NULL), -1);
	assert_true(mailaddr_utf8_valid("\xf0\x9f\x98\x80", 4));
	assert_false(mailaddr_utf8_valid("\xf4\x90\x80\x80", 4));
}

static void test_tricks(void **state)
{
	static const struct {
		const char *path;
		unsigned trick;
	} cases[] = {
		{ "<user%remote.example@local.test>", MAILADDR_T_PERCENT },
		{ "<remote.example!user@local.test>", MAILADDR_T_BANG },
		{ "<\"user@remote.example\"@local.test>", MAILADDR_T_QUOTED_AT },
		{ "<@local.test:user@remote.example>", MAILADDR_T_ROUTE },
		{ "<@a.test,@b.test:user@remote.example>", MAILADDR_T_ROUTE },
		{ "<user@remote.example.>", MAILADDR_T_TRAILING_DOT },
		{ "<user@[127.0.0.1]>", MAILADDR_T_LITERAL },
	};
	struct mailaddr a;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (path(cases[i].path, 0, &a, NULL) != 0)
			fail_msg("refused %s", cases[i].path);
		assert_int_equal(mailaddr_tricks(&a), cases[i].trick);
	}
	assert_int_equal(path("<@local.test:user@remote.example>", 0, &a, NULL), 0);
	assert_string_equal(a.domain, "remote.example");
	assert_int_equal(path("<user@remote.example.>", 0, &a, NULL), 0);
	assert_string_equal(a.domain, "remote.example");

	char l1[] = "local.test", l2[] = "other.test";
	char *locals[] = { l1, l2 };
	assert_int_equal(path("<u@LOCAL.test>", 0, &a, NULL), 0);
	assert_true(mailaddr_domain_in(&a, locals, 2));
	assert_int_equal(path("<u@local.test.evil>", 0, &a, NULL), 0);
	assert_false(mailaddr_domain_in(&a, locals, 2));
}

static int path_n(const char *p, size_t len, struct mailaddr *a, size_t *used)
{
	const char *err;

	return mailaddr_parse_path(p, len, MAILADDR_ALLOW_BARE, a, used, &err);
}

static void test_bare(void **state)
{
	struct mailaddr a;
	const char *err;
	size_t used;

	assert_int_equal(path("alice@example.org SIZE=1", MAILADDR_ALLOW_BARE, &a, &used), 0);
	assert_int_equal(used, 17);
	assert_int_equal(mailaddr_parse("bob@example.org", 15, 0, &a, &err), 0);
	assert_int_equal(mailaddr_parse("bob@example.org>", 16, 0, &a, &err), -1);
	/* the 256-octet path limit holds without brackets too (found by fuzz_mailaddr) */
	char longp[300];
	memset(longp, 'a', 60);
	longp[60] = '@';
	for (size_t i = 61; i < 300; i++)
		longp[i] = i % 50 == 0 ? '.' : 'b';
	assert_int_equal(path_n(longp, 255, &a, &used), -1);
	assert_int_equal(path_n(longp, 254, &a, &used), 0);
	assert_int_equal(used, 254);
}

static void test_xtext(void **state)
{
	char out[64];

	assert_int_equal(mailaddr_xtext_decode("a+2Bb+3Dc", 9, out, sizeof(out)), 0);
	assert_string_equal(out, "a+b=c");
	assert_int_equal(mailaddr_xtext_decode("a+2b", 4, out, sizeof(out)), -1);
	assert_int_equal(mailaddr_xtext_decode("a+2", 3, out, sizeof(out)), -1);
	assert_int_equal(mailaddr_xtext_decode("a=b", 3, out, sizeof(out)), -1);
	assert_int_equal(mailaddr_xtext_decode("abcdef", 6, out, 4), -1);
	assert_int_equal(mailaddr_xtext_encode("a+b c", 5, out, sizeof(out)), 0);
	assert_string_equal(out, "a+2Bb+20c");
	assert_int_equal(mailaddr_xtext_encode("++", 2, out, 6), -1);
}

static void test_mail_params(void **state)
{
	struct mail_params mp;
	const char *err;
	const char *s = "SIZE=4096 BODY=8BITMIME RET=HDRS ENVID=QQ+2B1 SMTPUTF8";

	assert_int_equal(mailaddr_mail_params(s, strlen(s), &mp, &err), 0);
	assert_true(mp.has_size);
	assert_int_equal(mp.size, 4096);
	assert_int_equal(mp.body, MAIL_BODY_8BITMIME);
	assert_int_equal(mp.ret, MAIL_RET_HDRS);
	assert_string_equal(mp.envid, "QQ+1");
	assert_true(mp.smtputf8);
	assert_false(mp.requiretls);
	assert_int_equal(mailaddr_mail_params("REQUIRETLS", 10, &mp, &err), 0);
	assert_true(mp.requiretls);
	assert_int_equal(mailaddr_mail_params("", 0, &mp, &err), 0);
	assert_false(mp.has_size);
	/* control characters in ENVID or ORCPT would reach DSN header fields (bounce.c) */
	static const char *ctl[] = { "ENVID=a+0D+0AX-Evil:+20yes", "ENVID=a+00b", "ENVID=+7F" };
	for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
		assert_int_equal(mailaddr_mail_params(ctl[i], strlen(ctl[i]), &mp, &err), -1);
	static const char *rctl[] = { "ORCPT=rfc822;a+0D+0AX-Evil:+20yes", "ORCPT=rfc822;a+0Ab",
				      "ORCPT=utf-8;a+09b" };
	struct rcpt_params rp;
	for (size_t i = 0; i < sizeof(rctl) / sizeof(rctl[0]); i++)
		assert_int_equal(mailaddr_rcpt_params(rctl[i], strlen(rctl[i]), true, &rp, &err),
				 -1);
	assert_int_equal(mailaddr_rcpt_params("ORCPT=rfc822;a+2Bb", 18, false, &rp, &err), 0);
	assert_string_equal(rp.orcpt, "a+b");

	static const char *bad[] = { "SIZE=",
				     "SIZE=12x",
				     "SIZE=1 SIZE=2",
				     "BODY=9BIT",
				     "RET=ALL",
				     "SMTPUTF8=yes",
				     "=x",
				     "SIZE=99999999999999999999",
				     "REQUIRETLS=yes",
				     "REQUIRETLS REQUIRETLS" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (mailaddr_mail_params(bad[i], strlen(bad[i]), &mp, &err) != -1)
			fail_msg("accepted %s", bad[i]);
	assert_int_equal(mailaddr_mail_params("FOO=1", 5, &mp, &err), MAILADDR_EUNKNOWN);
	assert_int_equal(mailaddr_mail_params("BODY=BINARYMIME", 15, &mp, &err),
			 MAILADDR_EUNKNOWN);
}

static void test_rcpt_params(void **state)
{
	struct rcpt_params rp;
	const char *err;
	const char *s = "NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;bob+40example.org";

	assert_int_equal(mailaddr_rcpt_params(s, strlen(s), false, &rp, &err), 0);
	assert_int_equal(rp.notify, RCPT_NOTIFY_SUCCESS | RCPT_NOTIFY_FAILURE);
	assert_string_equal(rp.orcpt_type, "rfc822");
	assert_string_equal(rp.orcpt, "bob@example.org");

	static const char *bad[] = { "NOTIFY=NEVER,DELAY", "NOTIFY=",
				     "NOTIFY=SOMETIMES",   "ORCPT=bob@example.org",
				     "ORCPT=;x",           "NOTIFY=NEVER NOTIFY=NEVER",
				     "ORCPT=rfc822;a+zz" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (mailaddr_rcpt_params(bad[i], strlen(bad[i]), false, &rp, &err) != -1)
			fail_msg("accepted %s", bad[i]);
	assert_int_equal(mailaddr_rcpt_params("XFOO", 4, false, &rp, &err), MAILADDR_EUNKNOWN);
}

/* A path split at any point must never be read past its length. */
static void test_truncated_anywhere(void **state)
{
	const char *full = "<@a.test:\"x y\"@[IPv6:2001:db8::1]>";
	struct mailaddr a;
	const char *err;
	size_t used;

	assert_int_equal(mailaddr_parse_path(full, strlen(full), 0, &a, &used, &err), 0);
	for (size_t cut = 0; cut < strlen(full); cut++) {
		char *copy = strndup(full, cut);
		assert_int_equal(mailaddr_parse_path(copy, cut, 0, &a, &used, &err), -1);
		free(copy);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple),      cmocka_unit_test(test_bad_syntax),
		cmocka_unit_test(test_limits),      cmocka_unit_test(test_quoted),
		cmocka_unit_test(test_literals),    cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_tricks),      cmocka_unit_test(test_bare),
		cmocka_unit_test(test_xtext),       cmocka_unit_test(test_mail_params),
		cmocka_unit_test(test_rcpt_params), cmocka_unit_test(test_truncated_anywhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

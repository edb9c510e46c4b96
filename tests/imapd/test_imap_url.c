/* test_imap_url.c — CATENATE's IMAP URLs (RFC 4469 section 5's, RFC 5092 forms): relative,
 * absolute path and imap:// forms, percent-escapes, and the URLs refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "imapd/imap_url.h"

static int parse(const char *s, struct imap_url *u)
{
	return imap_url_parse(s, strlen(s), u);
}

static void test_rfc4469_examples(void **state)
{
	struct imap_url u;

	(void)state;
	assert_int_equal(parse("/Drafts;UIDVALIDITY=385759045/;UID=20/;section=HEADER", &u), 0);
	assert_true(u.has_mailbox);
	assert_false(u.has_server);
	assert_string_equal(u.mailbox, "Drafts");
	assert_int_equal(u.uidvalidity, 385759045);
	assert_int_equal(u.uid, 20);
	assert_string_equal(u.section, "HEADER");
	assert_int_equal(parse("/Drafts;UIDVALIDITY=385759045/;UID=20/;section=1.MIME", &u), 0);
	assert_string_equal(u.section, "1.MIME");
	assert_int_equal(parse("/Drafts;UIDVALIDITY=385759045/;UID=30", &u), 0);
	assert_int_equal(u.uid, 30);
	assert_string_equal(u.section, "");
	assert_int_equal(parse(";UID=20/;SECTION=1", &u), 0);
	assert_false(u.has_mailbox);
	assert_int_equal(u.uid, 20);
	assert_string_equal(u.section, "1");
}

static void test_full_form(void **state)
{
	struct imap_url u;

	(void)state;
	assert_int_equal(parse("imap://joe@example.com/INBOX;UIDVALIDITY=7/;UID=3/;SECTION=1.2",
			       &u),
			 0);
	assert_true(u.has_server);
	assert_string_equal(u.user, "joe");
	assert_string_equal(u.host, "example.com");
	assert_string_equal(u.mailbox, "INBOX");
	assert_int_equal(u.uidvalidity, 7);
	assert_int_equal(u.uid, 3);
	assert_string_equal(u.section, "1.2");
	assert_int_equal(parse("imap://a;AUTH=*@h:143/x/y/;UID=1", &u), 0);
	assert_string_equal(u.user, "a");
	assert_string_equal(u.mailbox, "x/y");
	assert_int_equal(u.uidvalidity, 0);
	assert_int_equal(parse("imap://h/M%20a%2fb/;uid=9", &u), 0);
	assert_string_equal(u.user, "");
	assert_string_equal(u.mailbox, "M a/b");
	assert_int_equal(u.uid, 9);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
		"",
		";UID=",
		";UID=0",
		";UID=4294967296",
		";UID=1x",
		";UID=1/",
		";UID=1/;SECTION=",
		";UID=1/;PARTIAL=",
		";UID=1/;PARTIAL=1.0",
		";UID=1/;PARTIAL=1.",
		";UID=1/;PARTIAL=x",
		";UID=1/;PARTIAL=4294967296",
		";UID=1/;PARTIAL=1.2/",
		";UID=1/;SECTION=1/;PARTIAL=1/;PARTIAL=2",
		";UID=1/;PARTIAL=1/;SECTION=1",
		";UID=1;URLAUTH=anonymous",
		"/INBOX",
		"//;UID=1",
		"/INBOX;UIDVALIDITY=/;UID=1",
		"/INBOX;FOO=1/;UID=1",
		"/IN%2/;UID=1",
		"/IN%00/;UID=1",
		"/IN BOX/;UID=1",
		"imap://",
		"imap:///INBOX/;UID=1",
		"imap://@h/INBOX/;UID=1",
		"imap://h:99999/INBOX/;UID=1",
		"imap://h:/INBOX/;UID=1",
		"http://h/INBOX/;UID=1",
		"INBOX/;UID=1",
	};
	struct imap_url u;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &u) != -1)
			fail_msg("accepted: %s", bad[i]);
}

static void test_partial(void **state)
{
	struct imap_url u;

	(void)state;
	assert_int_equal(parse(";UID=1/;SECTION=1/;PARTIAL=0.10", &u), 0);
	assert_string_equal(u.section, "1");
	assert_true(u.has_partial);
	assert_int_equal(u.partial_off, 0);
	assert_int_equal(u.partial_len, 10);
	assert_int_equal(parse("/INBOX/;UID=7/;partial=4294967295", &u), 0);
	assert_string_equal(u.section, "");
	assert_true(u.has_partial);
	assert_int_equal(u.partial_off, 4294967295u);
	assert_int_equal(u.partial_len, 0);
	assert_int_equal(parse("/INBOX/;UID=7", &u), 0);
	assert_false(u.has_partial);
}

static void test_bounds(void **state)
{
	char s[IMAP_URL_MAILBOX_MAX + 32];
	struct imap_url u;

	(void)state;
	s[0] = '/';
	memset(s + 1, 'a', IMAP_URL_MAILBOX_MAX);
	strcpy(s + 1 + IMAP_URL_MAILBOX_MAX, "/;UID=1");
	assert_int_equal(parse(s, &u), 0);
	assert_int_equal(strlen(u.mailbox), IMAP_URL_MAILBOX_MAX);
	s[0] = '/';
	memset(s + 1, 'a', IMAP_URL_MAILBOX_MAX + 1);
	strcpy(s + 2 + IMAP_URL_MAILBOX_MAX, "/;UID=1");
	assert_int_equal(parse(s, &u), -1);
	/* not NUL-terminated: only len bytes are read */
	assert_int_equal(imap_url_parse(";UID=12345", 6, &u), 0);
	assert_int_equal(u.uid, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4469_examples), cmocka_unit_test(test_full_form),
		cmocka_unit_test(test_refused),          cmocka_unit_test(test_partial),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

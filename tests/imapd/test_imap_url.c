/* test_imap_url.c — the IMAP URLs of CATENATE (RFC 4469 section 5's, RFC 5092 forms): relative,
 * absolute path and imap:// forms, percent-escapes, and the URLs refused; URLAUTH's (RFC 4467
 * section 9's examples): rump and full URLs, ;EXPIRE= date-times, access identifiers, every
 * prefix of a URL parsed byte by byte. */
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

static void test_urlauth_rfc4467(void **state)
{
	static const char rump[] =
		"imap://joe@example.com/INBOX/;uid=20/;section=1.2;urlauth=submit+fred";
	static const char full[] = "imap://joe@example.com/INBOX/;uid=20/;section=1.2;urlauth="
				   "submit+fred:internal:91354a473744909de610943775f92038";
	struct imap_url u;

	(void)state;
	assert_int_equal(parse(rump, &u), 0);
	assert_string_equal(u.user, "joe");
	assert_string_equal(u.mailbox, "INBOX");
	assert_int_equal(u.uid, 20);
	assert_string_equal(u.section, "1.2");
	assert_int_equal(u.access, IMAP_URL_ACCESS_SUBMIT);
	assert_string_equal(u.access_user, "fred");
	assert_int_equal(u.rump_len, strlen(rump));
	assert_string_equal(u.mech, "");
	assert_string_equal(u.token, "");
	assert_false(u.has_expire);
	assert_int_equal(parse(full, &u), 0);
	assert_int_equal(u.rump_len, strlen(rump));
	assert_string_equal(u.mech, "internal");
	assert_string_equal(u.token, "91354a473744909de610943775f92038");
	assert_string_equal(u.section, "1.2");
	assert_int_equal(parse("imap://joe@example.com/INBOX/;uid=20/;section=1.2;urlauth="
			       "anonymous:internal:91354a473744909de610943775f92038",
			       &u),
			 0);
	assert_int_equal(u.access, IMAP_URL_ACCESS_ANONYMOUS);
	assert_int_equal(
		parse("imap://joe@example.com/INBOX;UIDVALIDITY=9/;UID=3;URLAUTH=authuser", &u),
		0);
	assert_int_equal(u.access, IMAP_URL_ACCESS_AUTHUSER);
	assert_int_equal(u.uid, 3);
	assert_int_equal(u.uidvalidity, 9);
	assert_int_equal(parse("imap://j%40x@h/INBOX/;UID=3/;PARTIAL=1.5;URLAUTH=user+f%40y", &u),
			 0);
	assert_string_equal(u.user, "j@x");
	assert_int_equal(u.access, IMAP_URL_ACCESS_USER);
	assert_string_equal(u.access_user, "f@y");
	assert_true(u.has_partial);
	assert_int_equal(u.partial_off, 1);
	assert_int_equal(u.partial_len, 5);
	/* an ordinary URL has no access */
	assert_int_equal(parse("imap://joe@h/INBOX/;UID=3", &u), 0);
	assert_int_equal(u.access, IMAP_URL_ACCESS_NONE);
	assert_int_equal(u.rump_len, 0);
}

static void test_urlauth_expire(void **state)
{
	struct imap_url u;

	(void)state;
	assert_int_equal(
		parse("imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T12:00:00Z;URLAUTH=authuser", &u),
		0);
	assert_true(u.has_expire);
	assert_int_equal(u.expire, 1147262400);
	assert_int_equal(
		parse("imap://j@h/INBOX/;UID=1;expire=2006-05-10T14:00:00.25+02:00;urlauth=authuser",
		      &u),
		0);
	assert_int_equal(u.expire, 1147262400);
	assert_int_equal(parse("imap://j@h/I/;UID=1;EXPIRE=1970-01-01T00%3A00%3A00-01:30;URLAUTH="
			       "anonymous",
			       &u),
			 0);
	assert_int_equal(u.expire, 5400);
	assert_int_equal(parse("imap://j@h/I/;UID=1;EXPIRE=2024-02-29T23:59:60Z;URLAUTH=anonymous",
			       &u),
			 0);
	assert_int_equal(u.expire, 1709251200);
}

static void test_urlauth_refused(void **state)
{
	static const char *const bad[] = {
		";UID=1;URLAUTH=authuser",                /* relative */
		"/INBOX/;UID=1;URLAUTH=authuser",         /* a path */
		"imap://h/INBOX/;UID=1;URLAUTH=authuser", /* no user */
		"imap://j;AUTH=*@h/INBOX/;UID=1;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;URLAUTH=",
		"imap://j@h/INBOX/;UID=1;URLAUTH=user+",
		"imap://j@h/INBOX/;UID=1;URLAUTH=submit+",
		"imap://j@h/INBOX/;UID=1;URLAUTH=someone",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuserx",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T12:00:00Z",
		"imap://j@h/INBOX/;UID=1;EXPIRE=;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-13-10T12:00:00Z;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-02-29T12:00:00Z;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T24:00:00Z;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T12:00:00;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T12:00:00.Z;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;EXPIRE=2006-05-10T12:00:00+0200;URLAUTH=authuser",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser;EXPIRE=2006-05-10T12:00:00Z",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:internal",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:internal:",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser::91354a473744909de610943775f92038",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:in/t:91354a473744909de610943775f92038",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:internal:91354a473744909de610943775f9203",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:internal:91354a473744909de610943775f9203g",
		"imap://j@h/INBOX/;UID=1;URLAUTH=authuser:internal:91354a473744909de610943775f92038:",
		"imap://j@h/INBOX/;UID=1/;URLAUTH=authuser",
	};
	char tok[IMAP_URL_TOKEN_MAX + 80];
	struct imap_url u;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &u) != -1)
			fail_msg("accepted: %s", bad[i]);
	/* the token's bound */
	strcpy(tok, "imap://j@h/I/;UID=1;URLAUTH=anonymous:m:");
	memset(tok + strlen(tok), 'a', IMAP_URL_TOKEN_MAX);
	tok[40 + IMAP_URL_TOKEN_MAX] = '\0';
	assert_int_equal(parse(tok, &u), 0);
	strcat(tok, "a");
	assert_int_equal(parse(tok, &u), -1);
}

/* Every prefix of a full URLAUTH URL, given byte by byte as a length: the ones read as
   URLAUTH URLs are rumps ending in the access user ("submit+f", ..., the rump itself) and
   the URL with a token cut to 32 hex digits or more (which then fails verification), with
   the whole one's fields. */
static void test_urlauth_prefixes(void **state)
{
	static const char full[] =
		"imap://joe@example.com/INBOX;UIDVALIDITY=7/;uid=20/;section=1.2"
		";EXPIRE=2030-01-01T00:00:00Z;urlauth=submit+fred:INTERNAL:"
		"91354a473744909de610943775f9203891354a473744909de610943775f92038";
	struct imap_url whole, u;
	size_t n = strlen(full);
	unsigned rumps = 0;

	(void)state;
	assert_int_equal(imap_url_parse(full, n, &whole), 0);
	for (size_t i = 0; i < n; i++) {
		int rc = imap_url_parse(full, i, &u);

		if (rc == 0 && u.token[0] != '\0') {
			assert_int_equal(u.rump_len, whole.rump_len);
			assert_true(strlen(u.token) >= 32);
			assert_memory_equal(u.token, whole.token, strlen(u.token));
		} else if (rc == 0 && u.access != IMAP_URL_ACCESS_NONE) {
			assert_true(i <= whole.rump_len && i > whole.rump_len - strlen("fred"));
			assert_int_equal(u.rump_len, i);
			assert_string_equal(u.token, "");
			assert_int_equal(u.expire, whole.expire);
			assert_int_equal(u.uid, whole.uid);
			assert_string_equal(u.section, whole.section);
			assert_memory_equal(u.access_user, whole.access_user,
					    strlen(u.access_user));
			rumps++;
		}
	}
	assert_int_equal(rumps, strlen("fred"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4469_examples), cmocka_unit_test(test_full_form),
		cmocka_unit_test(test_refused),          cmocka_unit_test(test_partial),
		cmocka_unit_test(test_bounds),           cmocka_unit_test(test_urlauth_rfc4467),
		cmocka_unit_test(test_urlauth_expire),   cmocka_unit_test(test_urlauth_refused),
		cmocka_unit_test(test_urlauth_prefixes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

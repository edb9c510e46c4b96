/* test_ml_resp.c — mailload's SMTP reply and IMAP response parsers fed one byte at a time and
 * split at every position, literals kept and dropped, limits, the FETCH item reader. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "mailload/resp.h"

static void test_smtp_bytewise(void **state)
{
	const char *in = "250-mx.heron.test hello\r\n250-PIPELINING\r\n250-SIZE 1000\r\n"
			 "250-AUTH LOGIN PLAIN\r\n250 STARTTLS\r\n220 next\r\n";
	struct evbuffer *eb = evbuffer_new();
	struct smtp_reply r;
	int done = 0;

	smtp_reply_reset(&r);
	for (size_t i = 0; in[i] != '\0'; i++) {
		evbuffer_add(eb, in + i, 1);
		int rc = smtp_reply_parse(&r, eb);
		assert_int_not_equal(rc, -1);
		if (rc == 1) {
			done++;
			if (done == 1) {
				assert_int_equal(r.code, 250);
				assert_int_equal(r.nlines, 5);
				assert_string_equal(r.text, "mx.heron.test hello");
				assert_true(r.ext & SMTP_EXT_PIPELINING);
				assert_true(r.ext & SMTP_EXT_AUTH_PLAIN);
				assert_true(r.ext & SMTP_EXT_STARTTLS);
				assert_false(r.ext & SMTP_EXT_8BITMIME);
			} else {
				assert_int_equal(r.code, 220);
				assert_string_equal(r.text, "next");
			}
			smtp_reply_reset(&r);
		}
	}
	assert_int_equal(done, 2);
	evbuffer_free(eb);
}

static void test_smtp_errors(void **state)
{
	static const char *const bad[] = { "25\r\n", "250-a\r\n251 b\r\n", "xyz hello\r\n",
					   "250_x\r\n" };
	struct evbuffer *eb = evbuffer_new();
	struct smtp_reply r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		smtp_reply_reset(&r);
		evbuffer_drain(eb, evbuffer_get_length(eb));
		evbuffer_add(eb, bad[i], strlen(bad[i]));
		int rc;
		while ((rc = smtp_reply_parse(&r, eb)) == 0 && evbuffer_get_length(eb) > 0)
			;
		assert_int_equal(rc, -1);
	}
	/* an endless line is refused once it passes the limit, without a newline */
	smtp_reply_reset(&r);
	evbuffer_drain(eb, evbuffer_get_length(eb));
	for (int i = 0; i < SMTP_LINE_MAX + 10; i++)
		evbuffer_add(eb, "2", 1);
	assert_int_equal(smtp_reply_parse(&r, eb), -1);
	evbuffer_free(eb);
}

/* Feeds text in two parts cut at `cut`; returns the responses in order joined by '|'. */
static void imap_feed(const char *in, size_t len, size_t cut, size_t keep, char *out, size_t n)
{
	struct evbuffer *eb = evbuffer_new();
	struct imap_rparser p;
	size_t parts[2] = { cut, len - cut };
	const char *at = in;

	imap_rparser_init(&p, 1000, keep, 1u << 20);
	out[0] = '\0';
	for (int k = 0; k < 2; k++) {
		evbuffer_add(eb, at, parts[k]);
		at += parts[k];
		int rc;
		while ((rc = imap_rparser_next(&p, eb)) == 1) {
			strncat(out, p.line.data, n - strlen(out) - 2);
			strcat(out, "|");
			buf_reset(&p.line);
		}
		assert_int_equal(rc, 0);
	}
	imap_rparser_release(&p);
	evbuffer_free(eb);
}

static void test_imap_split_anywhere(void **state)
{
	const char *in = "* 3 EXISTS\r\n* 1 FETCH (UID 7 BODY[HEADER.FIELDS (Message-ID)] {12}\r\n"
			 "Subject: x\r\n FLAGS (\\Seen))\r\na1 OK done\r\n";
	char first[512], out[512];

	imap_feed(in, strlen(in), strlen(in), 64, first, sizeof(first));
	assert_string_equal(first, "* 3 EXISTS|* 1 FETCH (UID 7 BODY[HEADER.FIELDS (Message-ID)] "
				   "{12}\nSubject: x\r\n FLAGS (\\Seen))|a1 OK done|");
	for (size_t cut = 0; cut <= strlen(in); cut++) {
		imap_feed(in, strlen(in), cut, 64, out, sizeof(out));
		assert_string_equal(out, first);
	}
	/* a literal over keep_max is dropped but the response is still whole */
	imap_feed(in, strlen(in), 5, 4, out, sizeof(out));
	assert_string_equal(out, "* 3 EXISTS|* 1 FETCH (UID 7 BODY[HEADER.FIELDS (Message-ID)] "
				 "{12} FLAGS (\\Seen))|a1 OK done|");
}

static void test_imap_limits(void **state)
{
	struct evbuffer *eb = evbuffer_new();
	struct imap_rparser p;

	imap_rparser_init(&p, 100, 64, 1000);
	evbuffer_add_printf(eb, "* 1 FETCH (BODY[] {5000}\r\n");
	assert_int_equal(imap_rparser_next(&p, eb), -1);
	assert_string_equal(p.error, "literal too large");
	imap_rparser_release(&p);
	imap_rparser_init(&p, 100, 64, 1000);
	evbuffer_drain(eb, evbuffer_get_length(eb));
	for (int i = 0; i < 200; i++)
		evbuffer_add(eb, "x", 1);
	assert_int_equal(imap_rparser_next(&p, eb), -1);
	imap_rparser_release(&p);
	evbuffer_free(eb);
}

static void test_fetch_items(void **state)
{
	const char *r =
		"12 FETCH (UID 40 RFC822.SIZE 1234 FLAGS (\\Seen \\Deleted $Junk) "
		"ENVELOPE (\"date\" \"UID 99 subject\" ((NIL NIL \"a\" \"b\")) NIL NIL NIL NIL "
		"NIL NIL \"<x@y>\") INTERNALDATE \"01-Jan-2026 00:00:00 +0000\" "
		"BODY[HEADER.FIELDS (FROM MESSAGE-ID)] {31}\nMessage-ID: <5.77@mailload>\r\n\r\n)";
	struct imap_fetch f;
	const char *v;

	assert_int_equal(imap_parse_fetch(r, strlen(r), &f), 1);
	assert_int_equal(f.seq, 12);
	assert_int_equal(f.uid, 40);
	assert_int_equal(f.size, 1234);
	assert_true(f.has_flags);
	assert_int_equal(f.flags, FL_SEEN | FL_DELETED);
	assert_non_null(f.hdr);
	size_t n = hdr_find(f.hdr, f.hdrlen, "message-id", &v);
	assert_int_equal(n, strlen("<5.77@mailload>"));
	assert_memory_equal(v, "<5.77@mailload>", n);
	/* a body literal that was dropped still gives its length */
	const char *b = "3 FETCH (BODY[] {70000})";
	assert_int_equal(imap_parse_fetch(b, strlen(b), &f), 1);
	assert_true(f.has_body);
	assert_int_equal(f.bodylen, 70000);
	/* not a FETCH, and broken ones */
	assert_int_equal(imap_parse_fetch("4 EXISTS", 8, &f), 0);
	assert_int_equal(imap_parse_fetch("4 FETCH (UID)", 13, &f), -1);
	assert_int_equal(imap_parse_fetch("4 FETCH (FLAGS (\\Seen)", 22, &f), -1);
	assert_int_equal(imap_parse_fetch("0 FETCH (UID 1)", 15, &f), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smtp_bytewise),       cmocka_unit_test(test_smtp_errors),
		cmocka_unit_test(test_imap_split_anywhere), cmocka_unit_test(test_imap_limits),
		cmocka_unit_test(test_fetch_items),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

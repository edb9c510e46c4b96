/* test_sink_data.c — the sink's DATA scanners: the end of DATA and dot-unstuffing cut at every
 * byte, bare LF/CR never ending a message, and the header watch for Message-ID and
 * X-Mailload-Sent however folded, placed or split. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "sink/sink.h"

static void collect(void *ctx, const char *p, size_t n)
{
	assert_int_equal(buf_append(ctx, p, n), 0);
}

/* Feeds in in pieces cut at cut (and the rest byte by byte when bytewise); returns the bytes
   consumed when the end was found (-1 if never) and the content in out. */
static long feed_dot(const char *in, size_t len, size_t cut, bool bytewise, struct buf *out)
{
	struct sink_dot d;
	size_t off = 0;
	bool done = false;

	sink_dot_init(&d);
	buf_reset(out);
	while (off < len) {
		size_t n = off == 0 ? cut : (bytewise ? 1 : len - off);

		if (n > len - off)
			n = len - off;
		size_t used = sink_dot_feed(&d, in + off, n, &done, collect, out);

		off += used;
		if (done)
			return (long)off;
		assert_int_equal(used, n);
	}
	return -1;
}

static void check_dot(const char *in, const char *content, long end)
{
	struct buf out;
	size_t len = strlen(in);

	buf_init(&out, 64, 1 << 20);
	for (size_t cut = 1; cut <= len; cut++) {
		for (int bytewise = 0; bytewise < 2; bytewise++) {
			long got = feed_dot(in, len, cut, bytewise, &out);

			assert_int_equal(got, end);
			if (end >= 0)
				assert_string_equal(buf_cstr(&out), content);
		}
	}
	buf_release(&out);
}

static void test_dot_end_and_unstuff(void **state)
{
	check_dot(".\r\n", "", 3);
	check_dot("a\r\n.\r\n", "a\r\n", 6);
	check_dot("a\r\n..b\r\n.\r\nNEXT", "a\r\n.b\r\n", 11);
	check_dot("..\r\n.\r\n", ".\r\n", 7);
	check_dot(".x\r\n.\r\n", "x\r\n", 7);
	/* ".\r" not followed by LF is content (the dot still unstuffed) */
	check_dot("a\r\n.\rb\r\n.\r\n", "a\r\n\rb\r\n", 11);
	check_dot("\r\n\r\n.\r\n", "\r\n\r\n", 7);
}

static void test_dot_bare_lf_never_ends(void **state)
{
	check_dot("a\n.\nb\r\n.\r\n", "a\n.\nb\r\n", 10);
	check_dot("a\r.\r\nb\r\n.\r\n", "a\r.\r\nb\r\n", 11);
	check_dot("a\n.\r\nb\r\n.\r\n", "a\n.\r\nb\r\n", 11);
	check_dot("x\r\n.\n", "", -1);
}

static void feed_hdr(struct sink_hdr *h, const char *msg, size_t cut)
{
	size_t len = strlen(msg);

	sink_hdr_init(h);
	sink_hdr_feed(h, msg, cut < len ? cut : len);
	for (size_t off = cut; off < len; off++)
		sink_hdr_feed(h, msg + off, 1);
	sink_hdr_finish(h);
}

static void check_hdr(const char *msg, const char *id, bool stamped, int64_t sent)
{
	struct sink_hdr h;

	for (size_t cut = 0; cut <= strlen(msg); cut++) {
		size_t idlen;
		const char *got;
		int64_t ms = -1;

		feed_hdr(&h, msg, cut);
		got = sink_hdr_id(&h, &idlen);
		assert_int_equal(idlen, strlen(id));
		assert_memory_equal(got, id, idlen);
		assert_int_equal(sink_hdr_sent(&h, &ms), stamped);
		if (stamped)
			assert_int_equal(ms, sent);
	}
}

static void test_hdr_plain(void **state)
{
	check_hdr(
		"Subject: x\r\nMessage-ID: <run.1@mailload>\r\nX-Mailload-Sent: 1700000000123\r\n"
		"\r\nbody\r\n",
		"<run.1@mailload>", true, 1700000000123);
}

static void test_hdr_folded_and_cased(void **state)
{
	check_hdr("message-id:\r\n <run.2@mailload>\r\nSubject: a\r\n b\r\n"
		  "x-mailload-sent:\r\n\t 1700000000999 \r\n\r\n",
		  "<run.2@mailload>", true, 1700000000999);
	/* folded inside the brackets: the white space came from folding */
	check_hdr("Message-ID: <run.3\r\n @mailload>\r\n\r\n", "<run.3@mailload>", false, 0);
	check_hdr("Message-Id: (comment) <a@b>\r\n\r\n", "<a@b>", false, 0);
}

static void test_hdr_only_in_header_block(void **state)
{
	/* after the blank line it is body text */
	check_hdr("Subject: x\r\n\r\nMessage-ID: <no@body>\r\nX-Mailload-Sent: 5\r\n", "", false,
		  0);
	/* the first occurrence wins */
	check_hdr("X-Mailload-Sent: 7\r\nX-Mailload-Sent: 8\r\n\r\n", "", true, 7);
	/* a header block that runs to the end of the message */
	check_hdr("Message-ID: <x@y>", "<x@y>", false, 0);
}

static void test_hdr_bad_values(void **state)
{
	check_hdr("X-Mailload-Sent: 12ab\r\n\r\n", "", false, 0);
	check_hdr("X-Mailload-Sent: -5\r\n\r\n", "", false, 0);
	check_hdr("X-Mailload-Sent:\r\n\r\n", "", false, 0);
	check_hdr("X-Mailload-Sent: 99999999999999999999999\r\n\r\n", "", false, 0);
}

static void test_hdr_long_lines(void **state)
{
	static char msg[8192];
	struct sink_hdr h;
	size_t idlen;

	/* a very long unrelated header, then the ones we want */
	strcpy(msg, "References: ");
	memset(msg + strlen(msg), 'r', 5000);
	msg[12 + 5000] = '\0';
	strcat(msg, "\r\nMessage-ID: <ok@x>\r\nX-Mailload-Sent: 42\r\n\r\n");
	check_hdr(msg, "<ok@x>", true, 42);
	/* a Message-ID longer than we keep is not reported at all */
	strcpy(msg, "Message-ID: <");
	memset(msg + strlen(msg), 'i', 2000);
	msg[13 + 2000] = '\0';
	strcat(msg, ">\r\n\r\n");
	feed_hdr(&h, msg, strlen(msg));
	sink_hdr_id(&h, &idlen);
	assert_int_equal(idlen, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dot_end_and_unstuff),
		cmocka_unit_test(test_dot_bare_lf_never_ends),
		cmocka_unit_test(test_hdr_plain),
		cmocka_unit_test(test_hdr_folded_and_cased),
		cmocka_unit_test(test_hdr_only_in_header_block),
		cmocka_unit_test(test_hdr_bad_values),
		cmocka_unit_test(test_hdr_long_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

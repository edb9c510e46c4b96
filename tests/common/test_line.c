/* test_line.c — line extraction: line ends in both modes, the limit, skipping overlong lines,
 * with the input cut at every byte (STYLE 17) and fed one byte at a time. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "common/buf.h"
#include "common/line.h"

/* Pulls every available line, appending "L<text>|" (with "~" after a bare-LF line) or "E|"
   for too long to out. Checks the reader never leaves more than max + 2 bytes behind. */
static void drain_lines(struct line_reader *r, struct evbuffer *in, bool peek, struct buf *line,
			struct buf *out)
{
	struct line l;
	int rc;

	for (;;) {
		rc = peek ? line_peek(r, in, &l) : line_read(r, in, line, &l);
		if (rc == 0)
			break;
		if (rc < 0) {
			assert_int_equal(buf_puts(out, "E|"), 0);
			continue;
		}
		assert_int_equal(rc, 1);
		assert_true(l.len <= r->max);
		assert_int_equal(buf_putc(out, 'L'), 0);
		assert_int_equal(buf_append(out, l.p, l.len), 0);
		assert_int_equal(buf_puts(out, l.bare_lf ? "~|" : "|"), 0);
		if (peek)
			line_drain(in, &l);
	}
	assert_true(evbuffer_get_length(in) <= r->max + 2);
}

/* Feeds in[0..len) in pieces ending at the given cut positions (ascending), then the rest. */
static char *feed(const char *in, size_t max, unsigned flags, bool peek, const size_t *cuts,
		  size_t ncuts)
{
	struct line_reader r;
	struct evbuffer *eb = evbuffer_new();
	struct buf line, out;
	size_t len = strlen(in), at = 0;

	line_reader_init(&r, max, flags);
	buf_init(&line, 16, max);
	buf_init(&out, 64, 1 << 20);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;

		evbuffer_add(eb, in + at, end - at);
		at = end;
		drain_lines(&r, eb, peek, &line, &out);
	}
	evbuffer_free(eb);
	buf_release(&line);
	return buf_steal(&out, NULL);
}

/* Checks that in gives expect however it is cut: whole, at every single byte, one byte at a
   time; through line_read and line_peek. */
static void check_all_cuts(const char *in, size_t max, unsigned flags, const char *expect)
{
	size_t len = strlen(in);
	size_t *each = calloc(len + 1, sizeof(*each));
	char *got;

	assert_non_null(each);
	for (size_t i = 0; i < len; i++)
		each[i] = i + 1;
	for (int peek = 0; peek < 2; peek++) {
		got = feed(in, max, flags, peek, NULL, 0);
		assert_string_equal(got, expect);
		free(got);
		for (size_t cut = 1; cut < len; cut++) {
			got = feed(in, max, flags, peek, &cut, 1);
			if (strcmp(got, expect) != 0)
				fail_msg("cut at %zu: got \"%s\" want \"%s\"", cut, got, expect);
			free(got);
		}
		got = feed(in, max, flags, peek, each, len);
		assert_string_equal(got, expect);
		free(got);
	}
	free(each);
}

static void test_strict_lines(void **state)
{
	check_all_cuts("EHLO client.example\r\nMAIL FROM:<a@b>\r\n\r\nQUIT\r\n", 64, 0,
		       "LEHLO client.example|LMAIL FROM:<a@b>|L|LQUIT|");
	/* Incomplete last line: nothing yet. */
	check_all_cuts("NOOP\r\nQUI", 64, 0, "LNOOP|");
}

static void test_strict_bare_lf_and_cr_are_data(void **state)
{
	check_all_cuts("a\nb\r\nc\rd\r\n", 64, 0, "La\nb|Lc\rd|");
	check_all_cuts("\n\r\n", 64, 0, "L\n|");
}

static void test_tolerant_lines(void **state)
{
	check_all_cuts("a\nb\r\n\nc\r\r\n", 64, LINE_LF, "La~|Lb|L~|Lc\r|");
}

static void test_limit_exact(void **state)
{
	/* max 8: eight bytes pass, nine do not; the next line is read normally. */
	check_all_cuts("12345678\r\n123456789\r\nok\r\n", 8, 0, "L12345678|E|Lok|");
	check_all_cuts("12345678\n123456789\nok\n", 8, LINE_LF, "L12345678~|E|Lok~|");
	check_all_cuts("12345678\r\n123456789\r\nok\r\n", 8, LINE_LF, "L12345678|E|Lok|");
}

static void test_overlong_skipped(void **state)
{
	/* Far past the limit, with bare LFs and CRs inside the overlong line (strict mode skips
	   to its CRLF), and a CR just before a cut. */
	check_all_cuts("0123456789abcdef\nxyz\r0123456789\r\nnext\r\n", 6, 0, "E|Lnext|");
	check_all_cuts("0123456789abcdef\nxyz\r\nnext\r\n", 6, LINE_LF, "E|Lxyz|Lnext|");
	/* Two overlong lines in a row give two errors. */
	check_all_cuts("aaaaaaaaaa\r\nbbbbbbbbbb\r\nc\r\n", 4, 0, "E|E|Lc|");
}

static void test_flood_stays_bounded(void **state)
{
	struct line_reader r;
	struct evbuffer *in = evbuffer_new();
	struct buf line, out;
	char chunk[4096];
	char *got;

	memset(chunk, 'x', sizeof(chunk));
	line_reader_init(&r, 100, 0);
	buf_init(&line, 16, 100);
	buf_init(&out, 64, 4096);
	for (int i = 0; i < 256; i++) { /* 1 MiB without a line end */
		evbuffer_add(in, chunk, sizeof(chunk));
		drain_lines(&r, in, false, &line, &out);
	}
	evbuffer_add(in, "\r\nafter\r\n", 9);
	drain_lines(&r, in, false, &line, &out);
	got = buf_steal(&out, NULL);
	assert_string_equal(got, "E|Lafter|");
	assert_int_equal(evbuffer_get_length(in), 0);
	free(got);
	buf_release(&line);
	evbuffer_free(in);
}

static void test_reset_forgets_skip(void **state)
{
	struct line_reader r;
	struct evbuffer *in = evbuffer_new();
	struct buf line;
	struct line l;

	line_reader_init(&r, 4, 0);
	buf_init(&line, 16, 4);
	evbuffer_add(in, "toolongline", 11);
	assert_int_equal(line_read(&r, in, &line, &l), -1);
	assert_true(r.discarding);
	/* The connection changed (STARTTLS): the caller drops its input and resets. */
	evbuffer_drain(in, evbuffer_get_length(in));
	line_reader_reset(&r);
	evbuffer_add(in, "ok\r\n", 4);
	assert_int_equal(line_read(&r, in, &line, &l), 1);
	assert_int_equal(l.len, 2);
	assert_memory_equal(l.p, "ok", 2);
	assert_int_equal(l.total, 4);
	buf_release(&line);
	evbuffer_free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strict_lines),
		cmocka_unit_test(test_strict_bare_lf_and_cr_are_data),
		cmocka_unit_test(test_tolerant_lines),
		cmocka_unit_test(test_limit_exact),
		cmocka_unit_test(test_overlong_skipped),
		cmocka_unit_test(test_flood_stays_bounded),
		cmocka_unit_test(test_reset_forgets_skip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_utf7imap.c — modified UTF-7: RFC 3501 examples, round trips, strict rejection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/utf7imap.h"

static void check_pair(const char *utf8, const char *utf7)
{
	struct buf b;

	buf_init(&b, 0, 1024);
	assert_int_equal(utf7imap_encode(utf8, strlen(utf8), &b), 0);
	assert_string_equal(buf_cstr(&b), utf7);
	buf_reset(&b);
	assert_int_equal(utf7imap_decode(utf7, strlen(utf7), &b), 0);
	assert_string_equal(buf_cstr(&b), utf8);
	assert_true(utf7imap_valid(utf7, strlen(utf7)));
	buf_release(&b);
}

static void test_examples(void **state)
{
	check_pair("INBOX", "INBOX");
	check_pair("", "");
	check_pair("A&B", "A&-B");
	check_pair("&", "&-");
	/* RFC 3501 5.1.3: ~peter/mail/台北/日本語 */
	check_pair("~peter/mail/\xe5\x8f\xb0\xe5\x8c\x97/\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
		   "~peter/mail/&U,BTFw-/&ZeVnLIqe-");
	check_pair("Entw\xc3\xbcrfe", "Entw&APw-rfe");
	check_pair("\xc3\xa9t\xc3\xa9", "&AOk-t&AOk-");
	/* a character beyond the BMP (U+1F600) goes as a surrogate pair */
	check_pair("x\xf0\x9f\x98\x80y", "x&2D3eAA-y");
	/* '/' in base64 is ',' in modified BASE64 */
	check_pair("\xef\xbf\xbd", "&,,0-");
}

static void check_bad_decode(const char *utf7)
{
	struct buf b;

	buf_init(&b, 0, 1024);
	buf_puts(&b, "keep");
	assert_int_equal(utf7imap_decode(utf7, strlen(utf7), &b), -1);
	assert_string_equal(buf_cstr(&b), "keep"); /* out unchanged on error */
	assert_false(utf7imap_valid(utf7, strlen(utf7)));
	buf_release(&b);
}

static void test_strict_decode(void **state)
{
	check_bad_decode("&");          /* unterminated */
	check_bad_decode("a&U,BTFw");   /* unterminated run */
	check_bad_decode("&AGE-");      /* 'a' must stand for itself */
	check_bad_decode("&ACY-");      /* '&' must be "&-" */
	check_bad_decode("&U/BTFw-");   /* '/' is not modified BASE64 */
	check_bad_decode("&U,BTFw=-");  /* no padding */
	check_bad_decode("&AOk");       /* no '-' */
	check_bad_decode("&AOl-");      /* non-zero padding bits */
	check_bad_decode("&AOkA-");     /* a whole extra base64 char */
	check_bad_decode("&2D0-");      /* lone high surrogate */
	check_bad_decode("&3gA-");      /* lone low surrogate */
	check_bad_decode("&2D3YPQ-");   /* high surrogate followed by high */
	check_bad_decode("&AOk-&AOk-"); /* two adjacent runs: not canonical */
	check_bad_decode("\xc3\xa9");   /* raw 8-bit */
	check_bad_decode("a\tb");       /* control */
	check_bad_decode("a\x7f");
	check_bad_decode("&AAA-"); /* NUL in a run */
	check_bad_decode("&AAo-"); /* LF in a run */
	check_bad_decode("&AIU-"); /* C1 control in a run */
}

static void check_bad_encode(const char *utf8, size_t len)
{
	struct buf b;

	buf_init(&b, 0, 1024);
	assert_int_equal(utf7imap_encode(utf8, len, &b), -1);
	assert_int_equal(b.len, 0);
	buf_release(&b);
}

static void test_bad_utf8(void **state)
{
	check_bad_encode("\xc0\xaf", 2);         /* overlong '/' */
	check_bad_encode("\xe0\x80\xaf", 3);     /* overlong */
	check_bad_encode("\xed\xa0\x80", 3);     /* surrogate */
	check_bad_encode("\xf4\x90\x80\x80", 4); /* past U+10FFFF */
	check_bad_encode("\xc3", 1);             /* truncated */
	check_bad_encode("\xe6\x97", 2);
	check_bad_encode("\x80", 1); /* stray continuation */
	check_bad_encode("\xff", 1);
	check_bad_encode("a\nb", 3); /* control */
	check_bad_encode("a\0b", 3);
}

static void test_ceiling(void **state)
{
	struct buf b;

	buf_init(&b, 0, 5);
	assert_int_equal(utf7imap_encode("\xc3\xa9t\xc3\xa9", 6, &b), -1);
	assert_int_equal(b.len, 0);
	assert_int_equal(utf7imap_decode("abcdef", 6, &b), -1);
	assert_int_equal(b.len, 0);
	assert_int_equal(utf7imap_decode("abcde", 5, &b), 0);
	buf_release(&b);
}

/* Every BMP character (and a sample beyond) survives encode → decode. */
static void test_round_trip(void **state)
{
	struct buf u8, u7, back;

	buf_init(&u8, 0, 64);
	buf_init(&u7, 0, 64);
	buf_init(&back, 0, 64);
	for (uint32_t cp = 0xa0; cp < 0x110000; cp += (cp < 0x10000 ? 1 : 97)) {
		if (cp >= 0xd800 && cp <= 0xdfff)
			continue;
		buf_reset(&u8);
		buf_reset(&u7);
		buf_reset(&back);
		buf_put_utf8(&u8, cp);
		buf_putc(&u8, 'z');
		assert_int_equal(utf7imap_encode(u8.data, u8.len, &u7), 0);
		assert_int_equal(utf7imap_decode(u7.data, u7.len, &back), 0);
		assert_int_equal(back.len, u8.len);
		assert_memory_equal(back.data, u8.data, u8.len);
	}
	buf_release(&u8);
	buf_release(&u7);
	buf_release(&back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_examples),   cmocka_unit_test(test_strict_decode),
		cmocka_unit_test(test_bad_utf8),   cmocka_unit_test(test_ceiling),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

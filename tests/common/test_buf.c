/* test_buf.c — the bounded buffer: growth, the ceiling, consume, steal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"

static void test_append_grows(void **state)
{
	struct buf *b = buf_new(0, 1 << 20);

	assert_string_equal(buf_cstr(b), "");
	for (int i = 0; i < 1000; i++)
		assert_int_equal(buf_append(b, "abcdefghij", 10), 0);
	assert_int_equal(b->len, 10000);
	assert_int_equal(b->data[b->len], '\0');
	assert_memory_equal(b->data + 9990, "abcdefghij", 10);
	buf_free(&b);
	assert_null(b);
	buf_free(&b); /* twice is safe */
}

static void test_ceiling(void **state)
{
	struct buf b;

	buf_init(&b, 4, 10);
	assert_int_equal(buf_append(&b, "0123456789", 10), 0);
	assert_int_equal(buf_putc(&b, 'x'), -1); /* one past the max */
	assert_int_equal(b.len, 10);             /* unchanged */
	assert_string_equal(buf_cstr(&b), "0123456789");
	assert_true(b.cap <= 11); /* never allocates past max + NUL */
	buf_reset(&b);
	assert_int_equal(buf_printf(&b, "%s", "this is longer than ten"), -1);
	assert_int_equal(b.len, 0);
	assert_int_equal(buf_printf(&b, "%d-%s", 42, "ok"), 0);
	assert_string_equal(buf_cstr(&b), "42-ok");
	buf_release(&b);
}

static void test_consume_truncate(void **state)
{
	struct buf b;

	buf_init(&b, 0, 100);
	buf_puts(&b, "hello world");
	buf_consume(&b, 6);
	assert_string_equal(buf_cstr(&b), "world");
	buf_truncate(&b, 3);
	assert_string_equal(buf_cstr(&b), "wor");
	buf_consume(&b, 50);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_cstr(&b), "");
	buf_release(&b);
}

static void test_reserve_commit_steal(void **state)
{
	struct buf b;
	size_t len;
	char *p, *s;

	buf_init(&b, 0, 16);
	p = buf_reserve(&b, 5);
	assert_non_null(p);
	memcpy(p, "abcde", 5);
	buf_commit(&b, 5);
	assert_null(buf_reserve(&b, 12));
	s = buf_steal(&b, &len);
	assert_int_equal(len, 5);
	assert_string_equal(s, "abcde");
	assert_null(b.data);
	free(s);
	s = buf_steal(&b, &len); /* empty: still a string */
	assert_string_equal(s, "");
	free(s);
}

/* The one UTF-8 writer: each length's first and last code point, and a full buf refusing a
   whole character (nothing of it appended). */
static void test_put_utf8(void **state)
{
	struct buf b;

	buf_init(&b, 0, 24);
	assert_int_equal(buf_put_utf8(&b, 0x41), 0);
	assert_int_equal(buf_put_utf8(&b, 0x7f), 0);
	assert_int_equal(buf_put_utf8(&b, 0x80), 0);
	assert_int_equal(buf_put_utf8(&b, 0x7ff), 0);
	assert_int_equal(buf_put_utf8(&b, 0x800), 0);
	assert_int_equal(buf_put_utf8(&b, 0xe9), 0);
	assert_int_equal(buf_put_utf8(&b, 0xffff), 0);
	assert_int_equal(buf_put_utf8(&b, 0x10000), 0);
	assert_int_equal(buf_put_utf8(&b, 0x10ffff), 0);
	assert_int_equal(b.len, 22);
	assert_memory_equal(b.data,
			    "A\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xc3\xa9\xef\xbf\xbf"
			    "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",
			    22);
	assert_int_equal(buf_put_utf8(&b, 0x20ac), -1); /* 3 bytes, 2 left */
	assert_int_equal(b.len, 22);
	assert_int_equal(buf_put_utf8(&b, 0xe9), 0);
	assert_int_equal(b.len, 24);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_grows),
		cmocka_unit_test(test_ceiling),
		cmocka_unit_test(test_consume_truncate),
		cmocka_unit_test(test_reserve_commit_steal),
		cmocka_unit_test(test_put_utf8),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

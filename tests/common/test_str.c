/* test_str.c — string helpers and the number/size/duration parsers, limits included. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/str.h"

static void test_copy(void **state)
{
	char d[6];

	assert_int_equal(str_lcpy(d, "abc", sizeof(d)), 3);
	assert_string_equal(d, "abc");
	assert_int_equal(str_lcpy(d, "abcdefgh", sizeof(d)), 8); /* truncated */
	assert_string_equal(d, "abcde");
	str_lcpy(d, "ab", sizeof(d));
	assert_int_equal(str_lcat(d, "cdefg", sizeof(d)), 7);
	assert_string_equal(d, "abcde");
	assert_int_equal(str_fmt(d, sizeof(d), "%d", 12345), 0);
	assert_int_equal(str_fmt(d, sizeof(d), "%d", 123456), -1);
}

static void test_case(void **state)
{
	assert_true(str_caseeq("InBoX", 5, "INBOX", 5));
	assert_false(str_caseeq("INBOX", 5, "INBOX2", 6));
	assert_true(str_casecmp("abc", 3, "ABD", 3) < 0);
	assert_true(str_casecmp("abc", 3, "ab", 2) > 0);
	assert_true(str_caseprefix("MAIL FROM:<a>", 13, "mail from:"));
	assert_false(str_caseprefix("MAIL", 4, "mail from:"));
	const char *h = "Subject: Hello World";
	assert_ptr_equal(str_casefind(h, strlen(h), "WORLD", 5), h + 15);
	assert_null(str_casefind(h, strlen(h), "worlds", 6));
	/* bytes past len are never looked at */
	assert_null(str_casefind(h, 10, "Hello", 5));
	char lo[] = "MiXeD";
	str_lower(lo, 5);
	assert_string_equal(lo, "mixed");
}

static void test_trim_split(void **state)
{
	struct str_view v = str_trim(str_view_of(" \t a b \r\n")), f, rest;

	assert_int_equal(v.len, 3);
	assert_memory_equal(v.p, "a b", 3);
	rest = str_view_of("a,,b");
	assert_true(str_split_next(&rest, ',', &f));
	assert_int_equal(f.len, 1);
	assert_true(str_split_next(&rest, ',', &f));
	assert_int_equal(f.len, 0);
	assert_true(str_split_next(&rest, ',', &f));
	assert_memory_equal(f.p, "b", 1);
	assert_false(str_split_next(&rest, ',', &f));
	rest = str_view_of("  one\t two  ");
	assert_true(str_split_ws(&rest, &f));
	assert_memory_equal(f.p, "one", 3);
	assert_true(str_split_ws(&rest, &f));
	assert_int_equal(f.len, 3);
	assert_false(str_split_ws(&rest, &f));
	assert_true(str_is_safe_line("abc", 3));
	assert_false(str_is_safe_line("a\rb", 3));
	assert_false(str_is_safe_line("a\0b", 3));
}

static void test_numbers(void **state)
{
	uint64_t u;
	int64_t i;

	assert_int_equal(str_to_u64("18446744073709551615", 20, UINT64_MAX, &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(str_to_u64("18446744073709551616", 20, UINT64_MAX, &u), -1);
	assert_int_equal(str_to_u64("", 0, 10, &u), -1);
	assert_int_equal(str_to_u64("11", 2, 10, &u), -1);
	assert_int_equal(str_to_u64("1x", 2, 100, &u), -1);
	assert_int_equal(str_to_u64("12", 1, 100, &u), 0); /* only len bytes */
	assert_int_equal(u, 1);
	assert_int_equal(str_to_i64("-5", 2, -10, 10, &i), 0);
	assert_int_equal(i, -5);
	assert_int_equal(str_to_i64("-11", 3, -10, 10, &i), -1);
	assert_int_equal(str_to_i64("-9223372036854775808", 20, INT64_MIN, INT64_MAX, &i), 0);
	assert_true(i == INT64_MIN);
}

static void test_size_duration_bool(void **state)
{
	uint64_t u;
	int64_t ms;
	bool b;

	assert_int_equal(str_to_size("4k", 2, &u), 0);
	assert_int_equal(u, 4096);
	assert_int_equal(str_to_size("50M", 3, &u), 0);
	assert_int_equal(u, 50u << 20);
	assert_int_equal(str_to_size("2GB", 3, &u), 0);
	assert_true(u == (2ULL << 30));
	assert_int_equal(str_to_size("12", 2, &u), 0);
	assert_int_equal(u, 12);
	assert_int_equal(str_to_size("1x", 2, &u), -1);
	assert_int_equal(str_to_size("k", 1, &u), -1);
	assert_int_equal(str_to_size("99999999999999999999k", 21, &u), -1);
	assert_int_equal(str_to_duration_ms("30", 2, &ms), 0);
	assert_int_equal(ms, 30000);
	assert_int_equal(str_to_duration_ms("250ms", 5, &ms), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(str_to_duration_ms("5m", 2, &ms), 0);
	assert_int_equal(ms, 300000);
	assert_int_equal(str_to_duration_ms("2h", 2, &ms), 0);
	assert_int_equal(ms, 7200000);
	assert_int_equal(str_to_duration_ms("5d", 2, &ms), 0);
	assert_int_equal(ms, 432000000);
	assert_int_equal(str_to_duration_ms("5w", 2, &ms), -1);
	assert_int_equal(str_to_duration_ms("-5s", 3, &ms), -1);
	assert_int_equal(str_to_bool("Yes", 3, &b), 0);
	assert_true(b);
	assert_int_equal(str_to_bool("off", 3, &b), 0);
	assert_false(b);
	assert_int_equal(str_to_bool("maybe", 5, &b), -1);
}

static void test_b64_digit(void **state)
{
	(void)state;
	assert_int_equal(str_b64_digit('A', '/'), 0);
	assert_int_equal(str_b64_digit('z', '/'), 51);
	assert_int_equal(str_b64_digit('9', '/'), 61);
	assert_int_equal(str_b64_digit('+', ','), 62);
	assert_int_equal(str_b64_digit('/', '/'), 63);
	assert_int_equal(str_b64_digit(',', ','), 63);
	assert_int_equal(str_b64_digit('/', ','), -1);
	assert_int_equal(str_b64_digit('=', '/'), -1);
	assert_int_equal(str_b64_digit(0x80, '/'), -1);
}

static void test_hex_digit(void **state)
{
	assert_int_equal(str_hex_digit('0'), 0);
	assert_int_equal(str_hex_digit('9'), 9);
	assert_int_equal(str_hex_digit('a'), 10);
	assert_int_equal(str_hex_digit('F'), 15);
	assert_int_equal(str_hex_digit('f'), 15);
	assert_int_equal(str_hex_digit('g'), -1);
	assert_int_equal(str_hex_digit('G'), -1);
	assert_int_equal(str_hex_digit('/'), -1);
	assert_int_equal(str_hex_digit(':'), -1);
	assert_int_equal(str_hex_digit('@'), -1);
	assert_int_equal(str_hex_digit('`'), -1);
	assert_int_equal(str_hex_digit(0xc1), -1); /* 0xc1 | 0x20 is 0xe1, not 'a' */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_case),
		cmocka_unit_test(test_trim_split),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_size_duration_bool),
		cmocka_unit_test(test_b64_digit),
		cmocka_unit_test(test_hex_digit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

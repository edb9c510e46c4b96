/* test_sink_json.c — the control port's JSON: string escaping of network bytes (quotes,
 * control characters, invalid UTF-8), the flat request parser and its errors, and the fault
 * settings' names, bounds and JSON form. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/buf.h"
#include "sink/sink.h"

static void check_str(const char *in, size_t len, const char *want)
{
	struct buf b;

	buf_init(&b, 16, 1 << 16);
	sink_json_str(&b, in, len);
	assert_string_equal(buf_cstr(&b), want);
	buf_release(&b);
}

static void test_escape(void **state)
{
	check_str("<a.1@x>", 7, "\"<a.1@x>\"");
	check_str("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
	check_str("\r\n\t\x01\x7f", 5, "\"\\r\\n\\t\\u0001\\u007f\"");
	check_str("a\0b", 3, "\"a\\u0000b\"");
	/* valid UTF-8 passes, invalid bytes become U+FFFD */
	check_str("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");
	check_str("x\xff y", 4, "\"x\\ufffd y\"");
	check_str("\xc3", 1, "\"\\ufffd\"");
	check_str("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
	check_str("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");            /* overlong */
}

static void test_parse(void **state)
{
	struct sink_json_member m[8];
	const char *err = NULL;
	const char *req = " {\"cmd\" : \"faults\", \"mail_4xx\":0.25,\"delay_ms\":10 ,\"x\":true,"
			  "\"y\":null} \r\n";
	int n = sink_json_parse(req, strlen(req), m, 8, &err);
	double v;

	assert_int_equal(n, 5);
	assert_int_equal(m[0].type, JSON_STRING);
	assert_int_equal(m[0].val_len, 6);
	assert_memory_equal(m[0].val, "faults", 6);
	assert_int_equal(sink_json_number(&m[1], &v), 0);
	assert_true(v == 0.25);
	assert_int_equal(m[3].type, JSON_BOOL);
	assert_int_equal(m[4].type, JSON_NULL);
	assert_int_equal(sink_json_number(&m[0], &v), -1);
	assert_int_equal(sink_json_parse("{}", 2, m, 8, &err), 0);
}

static void test_parse_errors(void **state)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{",
		"{\"a\"}",
		"{\"a\":}",
		"{\"a\":1,}",
		"{\"a\":1} x",
		"{a:1}",
		"{\"a\":\"unterminated}",
		"{\"a\":{\"b\":1}}",
		"{\"a\":[1]}",
		"{\"a\":nope}",
		"{\"a\":1 \"b\":2}",
		"{\"a\\u0062\":1}",
		"{\"a\":\"x\x01\"}",
	};
	struct sink_json_member m[4];
	const char *err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = NULL;
		assert_int_equal(sink_json_parse(bad[i], strlen(bad[i]), m, 4, &err), -1);
		assert_non_null(err);
	}
	err = NULL;
	assert_int_equal(sink_json_parse("{\"a\":1,\"b\":2,\"c\":3}", 19, m, 2, &err), -1);
	assert_non_null(err);
}

static void test_faults(void **state)
{
	struct sink_faults f;
	struct buf b;

	memset(&f, 0, sizeof(f));
	assert_int_equal(sink_fault_lookup("rcpt_5xx", 8), FAULT_RCPT_5XX);
	assert_int_equal(sink_fault_lookup("nope", 4), -1);
	assert_int_equal(sink_fault_set(&f, FAULT_MAIL_4XX, 0.5), 0);
	assert_int_equal(sink_fault_set(&f, FAULT_MAIL_4XX, 1.5), -1);
	assert_int_equal(sink_fault_set(&f, FAULT_MAIL_5XX, -0.1), -1);
	assert_int_equal(sink_fault_set(&f, FAULT_DELAY_MS, 2.5), -1);
	assert_int_equal(sink_fault_set(&f, FAULT_DELAY_MS, 250), 0);
	assert_int_equal(sink_fault_get(&f, FAULT_MAIL_4XX), 500000);
	buf_init(&b, 64, 1 << 16);
	sink_faults_json(&f, &b);
	assert_string_equal(buf_cstr(&b),
			    "{\"mail_4xx\":0.5,\"mail_5xx\":0,\"rcpt_4xx\":0,\"rcpt_5xx\":0,"
			    "\"data_4xx\":0,\"data_5xx\":0,\"drop_in_data\":0,\"delay_ms\":250,"
			    "\"greeting_delay_ms\":0}");
	buf_release(&b);
	/* share 1 always hits, share 0 never */
	sink_fault_set(&f, FAULT_DATA_5XX, 1.0);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(sink_fault_draw(&f, FAULT_DATA_4XX, FAULT_DATA_5XX), VERDICT_5XX);
		assert_int_equal(sink_fault_draw(&f, FAULT_RCPT_4XX, FAULT_RCPT_5XX), VERDICT_OK);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_faults),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_ml_report.c — the text and HTML reports rendered from a fixed report.json: the summary
 * lists WORKLOAD.md's functions in its order, the verdict follows the JSON, the HTML is
 * self-contained (inline SVG, no script, no external reference). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mailload/json.h"
#include "mailload/mailload.h"
#include "mailload/report.h"

static char *fixture(size_t *len)
{
	FILE *fp = fopen(HERON_SOURCE_ROOT "/tests/mailload/report_fixture.json", "r");
	static char data[1 << 20];

	assert_non_null(fp);
	*len = fread(data, 1, sizeof(data) - 1, fp);
	data[*len] = '\0';
	fclose(fp);
	return data;
}

static const char *const order[] = {
	"SMTP Connect",
	"SMTP Data",
	"IMAP APPEND",
	"IMAP Connect",
	"IMAP EXPUNGE",
	"IMAP FETCH_NUM_BODYALL",
	"IMAP FETCH_RANGE_ENVELOPE_BODYPEEK_HEADERFIELDS_FLAGS_INTERNALDATE_RFC822SIZE_UID",
	"IMAP LIST",
	"IMAP LSUB_NULL_WILDCARD",
	"IMAP SELECT_FOLDER",
	"IMAP SELECT_INBOX",
	"IMAP STORE_NUM_SET_FLAGS_DELETED",
	"IMAP UID_STORE_NUM_SET_FLAGS_DELETED",
	"IMAP UID_FETCH_RANGE_UID_BODYPEEK_HEADERFIELDS_FLAGS_RFC822SIZE",
	"IMAP UID_STORE_NUM_SET_FLAGS_SEEN",
	"Delivery Time",
	"Error Rate",
};

static void test_text(void **state)
{
	size_t len;
	char *in = fixture(&len);
	struct jv *r;
	const char *err;
	struct buf o;

	assert_int_equal(jv_parse(in, len, &r, &err), 0);
	buf_init(&o, 8192, 1 << 24);
	report_text(r, &o);
	const char *t = buf_cstr(&o), *sum = strstr(t, "\nSummary:");
	assert_non_null(strstr(t, "PASS"));
	assert_non_null(strstr(t, "short phases"));
	assert_non_null(sum);
	/* each function starts a line of the summary, in WORKLOAD.md's order */
	const char *at = sum;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		char needle[160];
		snprintf(needle, sizeof(needle), "\n%s", order[i]);
		const char *p = strstr(at, needle);
		assert_non_null(p);
		at = p + 1;
	}
	/* and the summary table's first entry is the first function */
	assert_true(strstr(sum, "\nSMTP Connect") < strstr(sum, "\nSMTP Data"));
	assert_non_null(strstr(t, "Server under test"));
	assert_non_null(
		strstr(t, "Client machines\n  manager: testhost, CPU Test CPU, 2 cores, 8.0 GiB"));
	assert_non_null(strstr(t, "clock offset"));
	assert_non_null(strstr(t, "command: mailload run --rate 0.02"));
	assert_non_null(strstr(t, "mailload 0.1.0 (git 0123456789ab)"));
	assert_non_null(strstr(t, " unchecked, 0 lost, 0 duplicated\n"));
	assert_non_null(strstr(t, "Not certified: PASS")); /* short phases are never certified */
	assert_non_null(strstr(t, " 120%  "));
	/* the report cites the specification the project ships */
	assert_non_null(
		strstr(t, "The workload and its rules: docs/workload.md in the Heron sources"));
	for (size_t i = 0; i < ml_cfg_nkeys; i++)
		if (ml_cfg_keys[i].profile && strcmp(ml_cfg_keys[i].name, "profile") != 0) {
			char k[80];
			snprintf(k, sizeof(k), " %s=", ml_cfg_keys[i].name);
			assert_non_null(strstr(t, k));
		}
	buf_release(&o);
	jv_free(&r);
}

static void test_fail_verdict(void **state)
{
	size_t len;
	char *in = strdup(fixture(&len)), *p;
	struct jv *r;
	const char *err;
	struct buf o;

	while ((p = strstr(in, "\"pass\":true")) != NULL)
		memcpy(p, "\"pass\":0   ", 11);
	while ((p = strstr(in, "\"verdict\":\"PASS\"")) != NULL)
		memcpy(p, "\"verdict\":\"FAIL\"", 16);
	assert_int_equal(jv_parse(in, len, &r, &err), 0);
	buf_init(&o, 8192, 1 << 24);
	report_text(r, &o);
	assert_non_null(strstr(buf_cstr(&o), "FAIL"));
	assert_null(strstr(buf_cstr(&o), "PASS"));
	buf_release(&o);
	jv_free(&r);
	free(in);
}

static void test_html(void **state)
{
	size_t len, svgs = 0;
	char *in = fixture(&len);
	struct jv *r;
	const char *err, *p;
	struct buf o;

	assert_int_equal(jv_parse(in, len, &r, &err), 0);
	buf_init(&o, 8192, 1 << 26);
	report_html(r, &o);
	const char *h = buf_cstr(&o);
	assert_true(strncmp(h, "<!DOCTYPE html>", 15) == 0);
	assert_null(strstr(h, "<script"));
	assert_null(strstr(h, "<link"));
	assert_null(strstr(h, "src="));
	for (p = h; (p = strstr(p, "http")) != NULL; p++) /* only the SVG namespace */
		assert_true(strncmp(p, "http://www.w3.org/2000/svg", 26) == 0);
	for (p = h; (p = strstr(p, "<svg")) != NULL; p++)
		svgs++;
	/* throughput, p99 over time, delivery CDF and histogram, one histogram per summary
	   function */
	assert_int_equal(svgs, 4 + FN_NSUMMARY);
	assert_non_null(strstr(h, "data-phase=\"ramp-up\""));
	assert_non_null(strstr(h, "class=\"limit\""));
	assert_non_null(strstr(h, "class=\"xtick\""));
	assert_null(strstr(h, "2097152"));
	assert_non_null(strstr(h, "</html>"));
	buf_release(&o);
	jv_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_fail_verdict),
		cmocka_unit_test(test_html),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_mta_sts.c — the MTA-STS readers (mtad/mta_sts.c): TXT records (id, version first,
 * extensions, malformed ones), policy files (CRLF or LF, every key, bounds, what is missing),
 * cut at every byte, and MX pattern matching (one left-most label for "*."). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mtad/mta_sts.h"

static int txt(const char *s, char *id)
{
	return sts_txt_parse(s, strlen(s), id);
}

static void test_txt(void **state)
{
	char id[STS_ID_MAX + 1];

	assert_int_equal(txt("v=STSv1; id=20160831085700Z;", id), 1);
	assert_string_equal(id, "20160831085700Z");
	assert_int_equal(txt("v=STSv1;id=abc", id), 1);
	assert_string_equal(id, "abc");
	assert_int_equal(txt("v=STSv1; id=abc; ext=1", id), 1);
	assert_int_equal(txt("v=spf1 -all", id), 0);
	assert_int_equal(txt("", id), 0);
	assert_int_equal(txt("v=STSv1", id), -1); /* no id */
	assert_int_equal(txt("v=STSv1; id=", id), -1);
	assert_int_equal(txt("v=STSv1; id=a-b", id), -1); /* not alphanumeric */
	assert_int_equal(txt("v=STSv1; id=a; id=b", id), -1);
	assert_int_equal(txt("v=STSv1x; id=a", id), -1);
	assert_int_equal(txt("v=STSv1;; id=a", id), -1);
	assert_int_equal(txt("v=STSv1; id=012345678901234567890123456789012", id), -1); /* 33 */
}

static int policy(const char *s, struct sts_policy *p)
{
	const char *err;
	int rc = sts_policy_parse(s, strlen(s), p, &err);

	assert_true(rc == 0 ? err == NULL : err != NULL);
	return rc;
}

static void test_policy(void **state)
{
	static const char good[] = "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\n"
				   "mx: *.example.net\r\nmx: backupmx.example.com\r\n"
				   "max_age: 604800\r\n";
	struct sts_policy p;

	assert_int_equal(policy(good, &p), 0);
	assert_int_equal(p.mode, STS_ENFORCE);
	assert_int_equal(p.max_age, 604800);
	assert_int_equal(p.nmx, 3);
	assert_string_equal(p.mx[1], "*.example.net");
	/* cut anywhere before the last key is complete: never a crash, never success early */
	for (size_t cut = 0; cut < sizeof(good) - 1; cut++) {
		const char *err;
		int rc = sts_policy_parse(good, cut, &p, &err);

		/* complete once max_age has its first digit ("max_age: 6" is a valid policy) */
		if (cut <= (size_t)(strstr(good, "604800") - good))
			assert_int_equal(rc, -1);
		else
			assert_int_equal(rc, 0);
	}
	assert_int_equal(policy("version: STSv1\nmode: testing\nmx: a.test\nmax_age: 1\n", &p), 0);
	assert_int_equal(p.mode, STS_TESTING);
	assert_int_equal(policy("version: STSv1\nmode: none\nmax_age: 1\n", &p), 0);
	assert_int_equal(policy("version: STSv1\nmode: enforce\nmax_age: 1\n", &p), -1);
	assert_int_equal(policy("version: STSv2\nmode: none\nmax_age: 1\n", &p), -1);
	assert_int_equal(policy("version: STSv1\nmode: strict\nmx: a.test\nmax_age: 1\n", &p), -1);
	assert_int_equal(policy("version: STSv1\nmode: none\nmax_age: 31557601\n", &p), -1);
	assert_int_equal(policy("version: STSv1\nmode: none\nmax_age: -1\n", &p), -1);
	assert_int_equal(policy("version: STSv1\nmode: none\n", &p), -1);
	assert_int_equal(policy("version: STSv1\nmode: enforce\nmx: a..b\nmax_age: 1\n", &p), -1);
	assert_int_equal(policy("version STSv1\n", &p), -1);
	/* unknown keys are extensions */
	assert_int_equal(policy("version: STSv1\nfoo: bar\nmode: none\nmax_age: 5\n", &p), 0);
	/* more mx lines than kept: the first STS_MX_MAX */
	char big[8192] = "version: STSv1\nmode: enforce\nmax_age: 5\n";
	for (int i = 0; i < 100; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "mx: m%d.test\n", i);
	assert_int_equal(policy(big, &p), 0);
	assert_int_equal(p.nmx, STS_MX_MAX);
}

static void test_match(void **state)
{
	struct sts_policy p;

	assert_int_equal(policy("version: STSv1\nmode: enforce\nmx: mail.example.com\n"
				"mx: *.example.net\nmax_age: 5\n",
				&p),
			 0);
	assert_true(sts_mx_match(&p, "mail.example.com"));
	assert_true(sts_mx_match(&p, "MAIL.Example.COM"));
	assert_true(sts_mx_match(&p, "mx1.example.net"));
	assert_false(sts_mx_match(&p, "a.b.example.net")); /* one label only */
	assert_false(sts_mx_match(&p, "example.net"));
	assert_false(sts_mx_match(&p, "mail.example.com.evil.test"));
	assert_false(sts_mx_match(&p, "xmail.example.com"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_txt),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

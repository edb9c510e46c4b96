/* test_tls_policy.c — outbound TLS policy decisions (mtad/tls_policy.c): DANE only when the
 * MX and address answers and the TLSA records all validated; a failed TLSA lookup of a
 * signed exchanger defers; unusable records still require TLS; overrides win; tls=dane without
 * validated records defers; which TLSA records are usable (RFC 7672 3.1); level names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mtad/tls_policy.h"

static enum tls_level decide(enum tls_level over, bool mx, bool addr, enum dns_status st, bool sec,
			     size_t usable, bool *deferred)
{
	struct tls_facts f = { over, mx, addr, st, sec, usable };
	const char *why;
	enum tls_level l = tls_policy_decide(&f, &why);

	*deferred = why != NULL;
	return l;
}

static void test_decisions(void **state)
{
	bool d;

	assert_int_equal(decide(TLSL_DEFAULT, true, true, DNS_OK, true, 1, &d), TLSL_DANE);
	assert_false(d);
	assert_int_equal(decide(TLSL_DEFAULT, true, true, DNS_OK, true, 0, &d), TLSL_ENCRYPT);
	/* anything insecure on the way: opportunistic */
	assert_int_equal(decide(TLSL_DEFAULT, false, true, DNS_OK, true, 1, &d), TLSL_MAY);
	assert_int_equal(decide(TLSL_DEFAULT, true, false, DNS_OK, true, 1, &d), TLSL_MAY);
	assert_int_equal(decide(TLSL_DEFAULT, true, true, DNS_OK, false, 1, &d), TLSL_MAY);
	assert_int_equal(decide(TLSL_DEFAULT, true, true, DNS_NXDOMAIN, true, 0, &d), TLSL_MAY);
	assert_int_equal(decide(TLSL_DEFAULT, true, true, DNS_NODATA, true, 0, &d), TLSL_MAY);
	assert_false(d);
	/* a signed exchanger whose TLSA lookup failed: wait (no downgrade) */
	decide(TLSL_DEFAULT, true, true, DNS_ETEMP, false, 0, &d);
	assert_true(d);
	decide(TLSL_DEFAULT, true, true, DNS_EBOGUS, false, 0, &d);
	assert_true(d);
	decide(TLSL_DEFAULT, false, true, DNS_ETEMP, false, 0, &d);
	assert_false(d); /* an unsigned one: no DANE to lose */
	/* overrides */
	assert_int_equal(decide(TLSL_NONE, true, true, DNS_OK, true, 1, &d), TLSL_NONE);
	assert_int_equal(decide(TLSL_VERIFY, false, false, DNS_NODATA, false, 0, &d), TLSL_VERIFY);
	assert_int_equal(decide(TLSL_MAY, true, true, DNS_OK, true, 1, &d), TLSL_MAY);
	assert_int_equal(decide(TLSL_DANE, true, true, DNS_OK, true, 2, &d), TLSL_DANE);
	decide(TLSL_DANE, false, true, DNS_OK, true, 2, &d);
	assert_true(d);
}

static void test_usable(void **state)
{
	assert_true(tls_tlsa_usable(3, 1, 1, 32));
	assert_true(tls_tlsa_usable(2, 0, 2, 64));
	assert_true(tls_tlsa_usable(3, 0, 0, 700));
	assert_false(tls_tlsa_usable(1, 1, 1, 32)); /* PKIX-EE: not for SMTP */
	assert_false(tls_tlsa_usable(0, 0, 1, 32));
	assert_false(tls_tlsa_usable(3, 1, 1, 31));
	assert_false(tls_tlsa_usable(3, 1, 2, 32));
	assert_false(tls_tlsa_usable(3, 2, 1, 32));
	assert_false(tls_tlsa_usable(3, 1, 3, 32));
	assert_false(tls_tlsa_usable(3, 0, 0, 0));
	assert_false(tls_tlsa_usable(3, 0, 0, TLSA_DATA_MAX + 1));
}

static void test_names(void **state)
{
	assert_int_equal(tls_level_parse("dane", 4), TLSL_DANE);
	assert_int_equal(tls_level_parse("verify", 6), TLSL_VERIFY);
	assert_int_equal(tls_level_parse("none", 4), TLSL_NONE);
	assert_int_equal(tls_level_parse("may", 3), TLSL_MAY);
	assert_int_equal(tls_level_parse("", 0), TLSL_DEFAULT);
	assert_int_equal(tls_level_parse("secure", 6), -1);
	assert_int_equal(tls_level_parse("dan", 3), -1);
	assert_string_equal(tls_level_name(TLSL_DANE), "dane");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decisions),
		cmocka_unit_test(test_usable),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

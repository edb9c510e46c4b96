/* test_mx_order.c — the order of mail exchangers (mtad/mx.c): by preference, every order of
 * equal preferences reachable, duplicates kept at their best preference, the null MX, address
 * literals dropped, the cap on hosts, and IPv6/IPv4 addresses taken in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mtad/mx.h"

static uint32_t seq;
static uint32_t next_rnd(void)
{
	seq = seq * 1103515245u + 12345u;
	return seq >> 8;
}

static struct dns_mx mx(uint16_t pref, const char *host)
{
	struct dns_mx m = { .pref = pref };

	strcpy(m.host, host);
	return m;
}

static void test_by_preference(void **state)
{
	struct dns_mx in[] = { mx(30, "c.test"), mx(10, "a.test"), mx(20, "b.test") };
	struct mx_host out[MX_HOSTS_MAX];
	size_t n;

	assert_int_equal(mx_order(in, 3, out, MX_HOSTS_MAX, &n, next_rnd), MX_HOSTS);
	assert_int_equal(n, 3);
	assert_string_equal(out[0].name, "a.test");
	assert_string_equal(out[1].name, "b.test");
	assert_string_equal(out[2].name, "c.test");
}

static void test_equal_random(void **state)
{
	struct dns_mx in[] = { mx(10, "x.test"), mx(10, "y.test"), mx(10, "z.test"),
			       mx(5, "best.test"), mx(50, "last.test") };
	struct mx_host out[MX_HOSTS_MAX];
	bool seen[3] = { false };
	size_t n;

	for (int round = 0; round < 200; round++) {
		assert_int_equal(mx_order(in, 5, out, MX_HOSTS_MAX, &n, next_rnd), MX_HOSTS);
		assert_int_equal(n, 5);
		assert_string_equal(out[0].name, "best.test");
		assert_string_equal(out[4].name, "last.test");
		seen[out[1].name[0] - 'x'] = true;
	}
	assert_true(seen[0] && seen[1] && seen[2]); /* each of the equals came first */
}

static void test_null_literal_dup_cap(void **state)
{
	struct dns_mx null[] = { mx(0, "") };
	struct dns_mx lit[] = { mx(10, "127.0.0.2"), mx(20, "[192.0.2.1]"), mx(30, "::1") };
	struct dns_mx mixed[] = { mx(10, "127.0.0.2"), mx(20, "ok.test"), mx(0, "") };
	struct dns_mx dup[] = { mx(30, "a.test"), mx(10, "a.test"), mx(20, "b.test") };
	struct dns_mx many[100];
	struct mx_host out[MX_HOSTS_MAX];
	size_t n;

	assert_int_equal(mx_order(null, 1, out, MX_HOSTS_MAX, &n, next_rnd), MX_NULL);
	assert_int_equal(mx_order(lit, 3, out, MX_HOSTS_MAX, &n, next_rnd), MX_INVALID);
	assert_int_equal(mx_order(mixed, 3, out, MX_HOSTS_MAX, &n, next_rnd), MX_HOSTS);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].name, "ok.test");
	assert_int_equal(mx_order(dup, 3, out, MX_HOSTS_MAX, &n, next_rnd), MX_HOSTS);
	assert_int_equal(n, 2);
	assert_string_equal(out[0].name, "a.test");
	assert_int_equal(out[0].pref, 10);
	for (int i = 0; i < 100; i++) {
		many[i].pref = (uint16_t)(100 - i);
		snprintf(many[i].host, sizeof(many[i].host), "m%d.test", i);
	}
	assert_int_equal(mx_order(many, 100, out, 8, &n, next_rnd), MX_HOSTS);
	assert_int_equal(n, 8);
	assert_string_equal(out[0].name, "m99.test"); /* the best ones are kept */
	assert_int_equal(out[7].pref, 8);
}

static void test_literal(void **state)
{
	assert_true(mx_is_literal("127.0.0.1"));
	assert_true(mx_is_literal("[127.0.0.1]"));
	assert_true(mx_is_literal("[IPv6:::1]"));
	assert_true(mx_is_literal("2001:db8::1"));
	assert_false(mx_is_literal("mx.test"));
	assert_false(mx_is_literal("127.0.0.1.test"));
}

static void test_interleave(void **state)
{
	char v6[2][46] = { "::1", "::2" }, v4[3][46] = { "1.1.1.1", "2.2.2.2", "3.3.3.3" };
	char out[8][46];

	assert_int_equal(mx_interleave(v6, 2, v4, 3, out, 8), 5);
	assert_string_equal(out[0], "::1");
	assert_string_equal(out[1], "1.1.1.1");
	assert_string_equal(out[2], "::2");
	assert_string_equal(out[3], "2.2.2.2");
	assert_string_equal(out[4], "3.3.3.3");
	assert_int_equal(mx_interleave(v6, 0, v4, 3, out, 2), 2);
	assert_string_equal(out[1], "2.2.2.2");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_by_preference),        cmocka_unit_test(test_equal_random),
		cmocka_unit_test(test_null_literal_dup_cap), cmocka_unit_test(test_literal),
		cmocka_unit_test(test_interleave),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

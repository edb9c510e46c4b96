/* test_dns_rr.c — the record-data readers of libheron_dns: wire names (bounds, compression
 * pointers refused, case folded), MX/A/AAAA/CNAME/TXT/TLSA rdata, truncation at every byte,
 * and name validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dns/dns.h"

static void test_name_wire(void **state)
{
	static const uint8_t mx1[] = "\x03Mx1\x05Plain\x04test";
	char out[DNS_NAME_MAX + 1];
	size_t used;

	assert_int_equal(dns_name_from_wire(mx1, sizeof(mx1), out, &used), 0);
	assert_string_equal(out, "mx1.plain.test");
	assert_int_equal(used, sizeof(mx1));
	assert_int_equal(dns_name_from_wire((const uint8_t *)"", 1, out, &used), 0);
	assert_string_equal(out, "");
	/* a compression pointer, truncation anywhere, a dot inside a label */
	assert_int_equal(dns_name_from_wire((const uint8_t *)"\xc0\x0c", 2, out, &used), -1);
	for (size_t cut = 0; cut < sizeof(mx1); cut++)
		assert_int_equal(dns_name_from_wire(mx1, cut, out, &used), -1);
	assert_int_equal(dns_name_from_wire((const uint8_t *)"\x03"
							     "a.b\x00",
					    5, out, &used),
			 -1);
	assert_int_equal(dns_name_from_wire((const uint8_t *)"\x02"
							     "a\x01\x00",
					    4, out, &used),
			 -1);
}

static void test_name_too_long(void **state)
{
	uint8_t w[300];
	char out[DNS_NAME_MAX + 1];
	size_t used, n = 0;

	/* 4 labels of 63 = 255 text bytes with dots: one over DNS_NAME_MAX */
	for (int l = 0; l < 4; l++) {
		w[n++] = 63;
		memset(w + n, 'a', 63);
		n += 63;
	}
	w[n++] = 0;
	assert_int_equal(dns_name_from_wire(w, n, out, &used), -1);
	w[0] = 64;
	assert_int_equal(dns_name_from_wire(w, n, out, &used), -1);
}

static void test_rdata(void **state)
{
	static const uint8_t mx[] = "\x00\x0a\x02mx\x04test";
	static const uint8_t nullmx[] = { 0, 0, 0 };
	static const uint8_t txt[] = "\x05v=STS\x0av1; id=123";
	static const uint8_t tlsa[] = { 3, 1, 1, 0xab, 0xcd };
	struct dns_rr rr;
	char buf[64];

	assert_int_equal(dns_rr_parse(DNS_T_MX, mx, sizeof(mx), &rr, NULL, 0), 0);
	assert_int_equal(rr.u.mx.pref, 10);
	assert_string_equal(rr.u.mx.host, "mx.test");
	for (size_t cut = 0; cut < sizeof(mx); cut++)
		assert_int_equal(dns_rr_parse(DNS_T_MX, mx, cut, &rr, NULL, 0), -1);
	assert_int_equal(dns_rr_parse(DNS_T_MX, nullmx, 3, &rr, NULL, 0), 0);
	assert_string_equal(rr.u.mx.host, "");
	/* bytes after the exchange name */
	uint8_t longer[sizeof(mx) + 1];
	memcpy(longer, mx, sizeof(mx));
	longer[sizeof(mx)] = 7;
	assert_int_equal(dns_rr_parse(DNS_T_MX, longer, sizeof(longer), &rr, NULL, 0), -1);
	assert_int_equal(dns_rr_parse(DNS_T_A, (const uint8_t *)"\x7f\0\0\x02", 4, &rr, NULL, 0),
			 0);
	assert_int_equal(dns_rr_parse(DNS_T_A, (const uint8_t *)"\x7f\0\0", 3, &rr, NULL, 0), -1);
	assert_int_equal(dns_rr_parse(DNS_T_AAAA, mx, 15, &rr, NULL, 0), -1);
	assert_int_equal(dns_rr_parse(DNS_T_TXT, txt, sizeof(txt) - 1, &rr, buf, sizeof(buf)), 0);
	assert_int_equal(rr.u.txt.len, 15);
	assert_string_equal(rr.u.txt.text, "v=STSv1; id=123");
	/* a string longer than what is left, and a buffer too small */
	assert_int_equal(dns_rr_parse(DNS_T_TXT, txt, 4, &rr, buf, sizeof(buf)), -1);
	assert_int_equal(dns_rr_parse(DNS_T_TXT, txt, sizeof(txt) - 1, &rr, buf, 10), -1);
	assert_int_equal(dns_rr_parse(DNS_T_TXT,
				      (const uint8_t *)"\x02"
						       "a\0",
				      3, &rr, buf, sizeof(buf)),
			 0);
	assert_int_equal(rr.u.txt.len, 2); /* NUL shown as '?', the text stays one string */
	assert_string_equal(rr.u.txt.text, "a?");
	assert_int_equal(dns_rr_parse(DNS_T_TLSA, tlsa, sizeof(tlsa), &rr, NULL, 0), 0);
	assert_int_equal(rr.u.tlsa.usage, 3);
	assert_int_equal(rr.u.tlsa.len, 2);
	assert_int_equal(rr.u.tlsa.data[1], 0xcd);
	assert_int_equal(dns_rr_parse(DNS_T_TLSA, tlsa, 2, &rr, NULL, 0), -1);
}

static void test_name_valid(void **state)
{
	assert_true(dns_name_valid("mx1.plain.test"));
	assert_true(dns_name_valid("_25._tcp.mx.example.com."));
	assert_true(dns_name_valid("a-b.c"));
	assert_false(dns_name_valid(""));
	assert_false(dns_name_valid("."));
	assert_false(dns_name_valid("a..b"));
	assert_false(dns_name_valid("-a.b"));
	assert_false(dns_name_valid("a-.b"));
	assert_false(dns_name_valid("a b.c"));
	assert_false(dns_name_valid("[127.0.0.1]"));
	char big[300];
	memset(big, 'a', 64);
	strcpy(big + 64, ".test");
	assert_false(dns_name_valid(big));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (size_t i = 60; i < sizeof(big) - 1; i += 61)
		big[i] = '.';
	assert_false(dns_name_valid(big));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_wire),
		cmocka_unit_test(test_name_too_long),
		cmocka_unit_test(test_rdata),
		cmocka_unit_test(test_name_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

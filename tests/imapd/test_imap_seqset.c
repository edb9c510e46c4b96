/* test_imap_seqset.c — sequence sets: syntax, '*', reversed ranges, merging, membership. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "imapd/imap_seqset.h"

static const char *resolved(const char *in, uint32_t star)
{
	static struct buf out;
	struct imap_seqset set = { 0 };

	buf_release(&out);
	buf_init(&out, 0, 1024);
	if (imap_seqset_parse(&set, in, strlen(in), 100) < 0) {
		imap_seqset_release(&set);
		return "BAD";
	}
	imap_seqset_resolve(&set, star);
	imap_seqset_format(&set, &out);
	imap_seqset_release(&set);
	return buf_cstr(&out);
}

static void test_parse(void **state)
{
	assert_string_equal(resolved("1", 10), "1");
	assert_string_equal(resolved("1:3", 10), "1:3");
	assert_string_equal(resolved("3:1", 10), "1:3");
	assert_string_equal(resolved("*", 10), "10");
	assert_string_equal(resolved("5:*", 10), "5:10");
	assert_string_equal(resolved("*:5", 10), "5:10");
	assert_string_equal(resolved("20:*", 10), "10:20"); /* UID n:* includes the last */
	assert_string_equal(resolved("1,3,2,7:9,4", 10), "1:4,7:9");
	assert_string_equal(resolved("1:5,2:3,9,10", 10), "1:5,9:10");
	assert_string_equal(resolved("4294967295", 10), "4294967295");
	assert_string_equal(resolved("1:*", 0), "0:1");
	const char *bad[] = { "",    "0",          "1:0", "01", ",1", "1,", "1,,2",  "1::2", "a",
			      "1:a", "4294967296", "1 2", "-1", "*:", ":3", "1:2:3", "**" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strcmp(resolved(bad[i], 10), "BAD") != 0)
			fail_msg("accepted '%s'", bad[i]);
}

static void test_limits_and_membership(void **state)
{
	struct imap_seqset set = { 0 };

	assert_int_equal(imap_seqset_parse(&set, "1,2,3", 5, 2), -1);
	assert_int_equal(imap_seqset_parse(&set, "9:7,1,4:5,*", 11, 10), 0);
	assert_true(set.has_star);
	imap_seqset_resolve(&set, 20);
	assert_true(imap_seqset_has(&set, 1));
	assert_false(imap_seqset_has(&set, 2));
	assert_true(imap_seqset_has(&set, 4));
	assert_true(imap_seqset_has(&set, 8));
	assert_false(imap_seqset_has(&set, 10));
	assert_true(imap_seqset_has(&set, 20));
	assert_false(imap_seqset_has(&set, 0));
	assert_int_equal(imap_seqset_max(&set), 20);
	imap_seqset_release(&set);
	/* byte by byte: every prefix of a valid set is either valid or rejected, never a crash */
	const char *s = "1:3,17,*:40,4294967295";
	for (size_t n = 0; n <= strlen(s); n++) {
		int rc = imap_seqset_parse(&set, s, n, 100);

		assert_true(rc == 0 || rc == -1);
	}
	assert_int_equal(imap_seqset_parse(&set, s, strlen(s), 100), 0);
	imap_seqset_release(&set);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_limits_and_membership),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	resolved("1", 1); /* leaves the static buffer allocated: free it */
	return rc;
}

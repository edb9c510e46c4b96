/* test_histo.c — bucket bounds and error, percentiles, exact merge, text round trip. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/histo.h"

static void test_buckets(void **state)
{
	/* every value falls in a bucket whose bounds hold it, at most 1% wide */
	for (uint64_t v = 0; v < 4000000000ULL; v = v < 1000 ? v + 1 : v + v / 97) {
		size_t i = histo_index(v);

		assert_true(i < HISTO_NBUCKETS);
		assert_true(histo_bucket_low(i) <= v);
		assert_true(histo_bucket_high(i) >= v);
		if (v >= HISTO_SUB)
			assert_true((double)(histo_bucket_high(i) - histo_bucket_low(i)) <=
				    0.01 * (double)histo_bucket_low(i));
		else
			assert_int_equal(histo_bucket_low(i), v);
	}
	/* consecutive buckets tile the range */
	for (size_t i = 0; i + 2 < HISTO_NBUCKETS; i++)
		assert_true(histo_bucket_high(i) + 1 == histo_bucket_low(i + 1));
	/* one hour is inside the range */
	assert_true(histo_index(3600ULL * 1000000) < HISTO_NBUCKETS - 1);
	assert_int_equal(histo_index(UINT64_MAX), HISTO_NBUCKETS - 1);
}

static void test_percentiles(void **state)
{
	struct histo *h = malloc(sizeof(*h));

	histo_init(h);
	assert_int_equal(histo_percentile(h, 50), 0);
	for (uint64_t v = 1; v <= 10000; v++)
		histo_add(h, v * 1000); /* 1 ms .. 10 s */
	assert_int_equal(h->count, 10000);
	assert_int_equal(h->min, 1000);
	assert_int_equal(h->max, 10000000);
	uint64_t p50 = histo_percentile(h, 50), p99 = histo_percentile(h, 99);
	assert_true(p50 >= 5000000 && p50 <= 5000000 * 1.01);
	assert_true(p99 >= 9900000 && p99 <= 9900000 * 1.01);
	assert_int_equal(histo_percentile(h, 100), 10000000);
	/* count_le never overstates */
	uint64_t le = histo_count_le(h, 5000000);
	assert_true(le <= 5000 && le >= 4950);
	assert_int_equal(histo_count_le(h, 20000000), 10000);
	assert_int_equal(histo_mean(h), 5000500);
	free(h);
}

static void test_merge_roundtrip(void **state)
{
	struct histo *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *c = malloc(sizeof(*c));
	struct buf out;

	histo_init(a);
	histo_init(b);
	histo_init(c);
	for (uint64_t v = 0; v < 5000; v++) {
		histo_add(v % 2 ? a : b, v * 37);
		histo_add(c, v * 37);
	}
	histo_merge(a, b);
	assert_memory_equal(a, c, sizeof(*a)); /* exact */
	buf_init(&out, 0, 1 << 20);
	assert_int_equal(histo_serialize(a, &out), 0);
	assert_int_equal(histo_deserialize(b, out.data, out.len), 0);
	assert_memory_equal(a, b, sizeof(*a));
	/* malformed input is refused */
	assert_int_equal(histo_deserialize(b, "1 2 3", 5), -1);
	assert_int_equal(histo_deserialize(b, "2 5 1 4 1:1", 11), -1);      /* counts disagree */
	assert_int_equal(histo_deserialize(b, "1 1 1 1 999999:1", 16), -1); /* bad index */
	assert_int_equal(histo_deserialize(b, "0 0 0 0", 7), 0);
	assert_int_equal(b->count, 0);
	buf_release(&out);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_percentiles),
		cmocka_unit_test(test_merge_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* histo.c — owns the log-linear latency histogram. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/histo.h"
#include "common/str.h"

void histo_init(struct histo *h)
{
	memset(h, 0, sizeof(*h));
}

size_t histo_index(uint64_t us)
{
	unsigned msb;

	if (us < HISTO_SUB)
		return (size_t)us;
	msb = 63u - (unsigned)__builtin_clzll(us);
	if (msb >= HISTO_TOP_BITS)
		return HISTO_NBUCKETS - 1;
	/* octave (msb - SUB_BITS + 1), then the SUB_BITS bits below the leading one */
	size_t octave = msb - HISTO_SUB_BITS + 1;
	size_t sub = (size_t)(us >> (msb - HISTO_SUB_BITS)) & (HISTO_SUB - 1);
	return octave * HISTO_SUB + sub;
}

uint64_t histo_bucket_low(size_t idx)
{
	size_t octave = idx / HISTO_SUB, sub = idx % HISTO_SUB;

	if (octave == 0)
		return sub;
	unsigned shift = (unsigned)octave - 1;
	return ((uint64_t)HISTO_SUB + sub) << shift;
}

uint64_t histo_bucket_high(size_t idx)
{
	if (idx + 1 >= HISTO_NBUCKETS)
		return UINT64_MAX;
	return histo_bucket_low(idx + 1) - 1;
}

void histo_add_n(struct histo *h, uint64_t us, uint64_t n)
{
	if (n == 0)
		return;
	if (h->count == 0 || us < h->min)
		h->min = us;
	if (us > h->max)
		h->max = us;
	h->count += n;
	h->sum += us * n;
	h->b[histo_index(us)] += n;
}

void histo_add(struct histo *h, uint64_t us)
{
	histo_add_n(h, us, 1);
}

void histo_merge(struct histo *dst, const struct histo *src)
{
	if (src->count == 0)
		return;
	if (dst->count == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
	for (size_t i = 0; i < HISTO_NBUCKETS; i++)
		dst->b[i] += src->b[i];
}

uint64_t histo_percentile(const struct histo *h, double p)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return 0;
	if (p <= 0)
		return h->min;
	rank = (uint64_t)((p / 100.0) * (double)h->count + 0.999999);
	if (rank == 0)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (size_t i = 0; i < HISTO_NBUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			uint64_t v = histo_bucket_high(i);

			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;
}

uint64_t histo_count_le(const struct histo *h, uint64_t us)
{
	uint64_t n = 0;

	if (h->count == 0)
		return 0;
	if (us >= h->max)
		return h->count;
	for (size_t i = 0; i < HISTO_NBUCKETS && histo_bucket_high(i) <= us; i++)
		n += h->b[i];
	return n;
}

uint64_t histo_mean(const struct histo *h)
{
	return h->count == 0 ? 0 : h->sum / h->count;
}

int histo_serialize(const struct histo *h, struct buf *out)
{
	bool first = true;

	if (buf_printf(out, "%llu %llu %llu %llu ", (unsigned long long)h->count,
		       (unsigned long long)h->sum, (unsigned long long)h->min,
		       (unsigned long long)h->max) < 0)
		return -1;
	for (size_t i = 0; i < HISTO_NBUCKETS; i++) {
		if (h->b[i] == 0)
			continue;
		if (buf_printf(out, "%s%zu:%llu", first ? "" : ",", i,
			       (unsigned long long)h->b[i]) < 0)
			return -1;
		first = false;
	}
	return 0;
}

int histo_deserialize(struct histo *h, const char *p, size_t len)
{
	struct str_view rest = { p, len }, f, item;
	uint64_t head[4], total = 0;

	histo_init(h);
	for (int i = 0; i < 4; i++)
		if (!str_split_ws(&rest, &f) || str_to_u64(f.p, f.len, UINT64_MAX, &head[i]) < 0)
			return -1;
	if (str_split_ws(&rest, &f)) {
		struct str_view items = f;

		while (str_split_next(&items, ',', &item)) {
			const char *colon = memchr(item.p, ':', item.len);
			uint64_t idx, n;

			if (colon == NULL ||
			    str_to_u64(item.p, (size_t)(colon - item.p), HISTO_NBUCKETS - 1,
				       &idx) < 0 ||
			    str_to_u64(colon + 1, (size_t)(item.p + item.len - colon - 1),
				       UINT64_MAX, &n) < 0)
				return -1;
			h->b[idx] += n;
			total += n;
		}
		if (str_split_ws(&rest, &f))
			return -1;
	}
	if (total != head[0])
		return -1;
	h->count = head[0];
	h->sum = head[1];
	h->min = head[2];
	h->max = head[3];
	return 0;
}

/* histo.h — latency histograms: log-linear buckets from 1 µs to 1 h with at most 1% relative
 * error, mergeable exactly by adding counts, with percentiles and a compact text form.
 *
 * Values are microseconds. Each power of two is split into HISTO_SUB linear buckets, so a
 * bucket is at most 1/HISTO_SUB (0.78%) of its value wide; values below HISTO_SUB µs are
 * exact. Values above the top (about 1.2 h) land in the last bucket; max stays exact. A histo
 * is a plain struct (about 40 KiB): no allocation, safe to memcpy, zero-initialised = empty. */
#ifndef HERON_HISTO_H
#define HERON_HISTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define HISTO_SUB_BITS 7
#define HISTO_SUB (1u << HISTO_SUB_BITS)
#define HISTO_TOP_BITS 33 /* 2^32 us ~ 71.6 min is the top of the range */
#define HISTO_NBUCKETS ((HISTO_TOP_BITS - HISTO_SUB_BITS + 1) * HISTO_SUB)

struct histo {
	uint64_t count;
	uint64_t sum; /* of the values, µs */
	uint64_t min, max;
	uint64_t b[HISTO_NBUCKETS];
};

void histo_init(struct histo *h);
void histo_add(struct histo *h, uint64_t us);
void histo_add_n(struct histo *h, uint64_t us, uint64_t n);
/* dst += src, exactly. */
void histo_merge(struct histo *dst, const struct histo *src);
/* The value at percentile p (0..100]: the upper bound of the bucket holding that rank, capped
   at max. 0 when empty. */
uint64_t histo_percentile(const struct histo *h, double p);
/* How many samples are <= us (exact below HISTO_SUB µs, else to one bucket's width: a bucket
   straddling us counts as above it, so compliance is never overstated). */
uint64_t histo_count_le(const struct histo *h, uint64_t us);
uint64_t histo_mean(const struct histo *h);

size_t histo_index(uint64_t us);
uint64_t histo_bucket_low(size_t idx);
uint64_t histo_bucket_high(size_t idx); /* inclusive */

/* Appends "count sum min max idx:n,idx:n,..." (only non-empty buckets) to out. */
int histo_serialize(const struct histo *h, struct buf *out);
/* Parses the form above into h (replacing it); -1 on malformed input. */
int histo_deserialize(struct histo *h, const char *p, size_t len);

#endif

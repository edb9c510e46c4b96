/* imap_seqset.c — owns sequence-set parsing, '*' resolution, membership and formatting. */
#include <stdlib.h>

#include "common/xmalloc.h"
#include "imapd/imap_seqset.h"

void imap_seqset_add(struct imap_seqset *set, uint32_t lo, uint32_t hi)
{
	if (set->n == set->cap) {
		set->cap = set->cap == 0 ? 8 : set->cap * 2;
		set->v = xreallocarray(set->v, set->cap, sizeof(*set->v));
	}
	set->v[set->n].lo = lo;
	set->v[set->n].hi = hi;
	set->n++;
}

/* One seq-number at s[*i]: a nz-number or '*' (0). -1 when neither. */
static int parse_number(const char *s, size_t len, size_t *i, uint32_t *v_r, bool *star)
{
	uint64_t v = 0;
	size_t start = *i;

	if (*i < len && s[*i] == '*') {
		(*i)++;
		*v_r = 0;
		*star = true;
		return 0;
	}
	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		v = v * 10 + (uint64_t)(s[*i] - '0');
		if (v > UINT32_MAX)
			return -1;
		(*i)++;
	}
	if (*i == start || v == 0 || s[start] == '0')
		return -1;
	*v_r = (uint32_t)v;
	return 0;
}

int imap_seqset_parse(struct imap_seqset *set, const char *s, size_t len, size_t max_ranges)
{
	size_t i = 0;

	imap_seqset_clear(set);
	for (;;) {
		uint32_t lo, hi;

		if (set->n >= max_ranges || parse_number(s, len, &i, &lo, &set->has_star) < 0)
			return -1;
		hi = lo;
		if (i < len && s[i] == ':') {
			i++;
			if (parse_number(s, len, &i, &hi, &set->has_star) < 0)
				return -1;
		}
		imap_seqset_add(set, lo, hi);
		if (i == len)
			return 0;
		if (s[i++] != ',')
			return -1;
	}
}

static int range_cmp(const void *a, const void *b)
{
	const struct imap_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void imap_seqset_resolve(struct imap_seqset *set, uint32_t star)
{
	size_t out = 0;

	for (size_t i = 0; i < set->n; i++) {
		struct imap_range *r = &set->v[i];
		uint32_t t;

		if (r->lo == 0)
			r->lo = star;
		if (r->hi == 0)
			r->hi = star;
		if (r->lo > r->hi) {
			t = r->lo;
			r->lo = r->hi;
			r->hi = t;
		}
	}
	if (set->n > 1)
		qsort(set->v, set->n, sizeof(*set->v), range_cmp);
	for (size_t i = 0; i < set->n; i++) {
		if (out > 0 && (uint64_t)set->v[i].lo <= (uint64_t)set->v[out - 1].hi + 1) {
			if (set->v[i].hi > set->v[out - 1].hi)
				set->v[out - 1].hi = set->v[i].hi;
			continue;
		}
		set->v[out++] = set->v[i];
	}
	set->n = out;
}

bool imap_seqset_has(const struct imap_seqset *set, uint32_t n)
{
	size_t lo = 0, hi = set->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (n < set->v[mid].lo)
			hi = mid;
		else if (n > set->v[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

uint32_t imap_seqset_max(const struct imap_seqset *set)
{
	return set->n == 0 ? 0 : set->v[set->n - 1].hi;
}

int imap_seqset_format(const struct imap_seqset *set, struct buf *out)
{
	size_t start = out->len;

	for (size_t i = 0; i < set->n; i++) {
		const struct imap_range *r = &set->v[i];
		int rc = r->lo == r->hi ? buf_printf(out, "%s%u", i ? "," : "", r->lo)
					: buf_printf(out, "%s%u:%u", i ? "," : "", r->lo, r->hi);

		if (rc < 0) {
			buf_truncate(out, start);
			return -1;
		}
	}
	return 0;
}

void imap_seqset_clear(struct imap_seqset *set)
{
	set->n = 0;
	set->has_star = false;
}

void imap_seqset_release(struct imap_seqset *set)
{
	free(set->v);
	set->v = NULL;
	set->n = set->cap = 0;
	set->has_star = false;
}

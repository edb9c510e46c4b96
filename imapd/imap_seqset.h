/* imap_seqset.h — IMAP sequence sets (RFC 3501 sequence-set): "1,3:5,7:*", ranges in either
 * order, '*' as the largest number in use, for message sequence numbers and UIDs alike.
 *
 * Parse, then resolve '*' against the mailbox (the highest sequence number or UID), which
 * also sorts and merges the ranges; after that a set answers membership in O(log n) and
 * iterates in ascending order. */
#ifndef HERON_IMAP_SEQSET_H
#define HERON_IMAP_SEQSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The ranges a client's sequence set may hold (SELECT QRESYNC, FETCH, STORE, SEARCH, ...):
   more is refused with BAD, the parsed set never grows past it. */
#define IMAP_SEQSET_RANGES_MAX 4096

struct imap_range {
	uint32_t lo, hi; /* lo <= hi after resolve; 0 stands for '*' before it */
};

struct imap_seqset {
	struct imap_range *v;
	size_t n, cap;
	bool has_star;
};

/* Parses s[0..len) into set (emptied first): 0, or -1 when it is not a sequence set (empty
   element, 0, a number past 4294967295, stray characters) or has more than max_ranges
   ranges. */
int imap_seqset_parse(struct imap_seqset *set, const char *s, size_t len, size_t max_ranges);
/* Replaces '*' by star, orders each range, sorts and merges. With star 0 (an empty mailbox)
   '*' stays 0, which matches no message. */
void imap_seqset_resolve(struct imap_seqset *set, uint32_t star);
/* After resolve: whether n is in the set; its largest member (0 when empty). */
bool imap_seqset_has(const struct imap_seqset *set, uint32_t n);
uint32_t imap_seqset_max(const struct imap_seqset *set);
/* Adds the range lo..hi (lo <= hi) at the end; call resolve before has()/max(). */
void imap_seqset_add(struct imap_seqset *set, uint32_t lo, uint32_t hi);
/* Appends the set in IMAP syntax ("1:3,7") to out; -1 at out's ceiling. */
int imap_seqset_format(const struct imap_seqset *set, struct buf *out);
void imap_seqset_clear(struct imap_seqset *set);
void imap_seqset_release(struct imap_seqset *set);

#endif

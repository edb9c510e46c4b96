/* sieve_unicode.c — owns the i;unicode-casemap comparator (RFC 5051): a string's canonical
 * form is its characters each replaced by their simple titlecase mapping (UnicodeData.txt),
 * then decomposed for compatibility (NFKD: the full decompositions, Hangul syllables
 * arithmetically, then the canonical ordering of combining marks); two strings compare as
 * the octets of their canonical forms (equality, ordering, substring). The tables are
 * sieve_unicode_data.h, generated from the Unicode database by gen_unicode_data.py. Bytes
 * that are not valid UTF-8 are kept as they are (each compares as itself). :matches folds
 * the subject and the pattern's literal runs, keeps the wildcards, and reports the captures
 * as the subject's own text. Work is linear in the input: the decompositions at most 18
 * characters each, the reordering a counting sort per run of combining marks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xmalloc.h"
#include "sieve/sieve_private.h"
#include "sieve/sieve_unicode_data.h"

#define UC_RAW 0x110000u /* an invalid UTF-8 byte b is carried as UC_RAW + b */

struct uc_seq { /* code points, each with the offset in the input it came from */
	uint32_t *cp;
	size_t *src;
	size_t n, cap;
};

static void seq_push(struct uc_seq *q, uint32_t cp, size_t src)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->cp = xreallocarray(q->cp, q->cap, sizeof(*q->cp));
		q->src = xreallocarray(q->src, q->cap, sizeof(*q->src));
	}
	q->cp[q->n] = cp;
	q->src[q->n++] = src;
}

static void seq_free(struct uc_seq *q)
{
	free(q->cp);
	free(q->src);
}

/* the value paired with cp in a sorted { key, value } table, or dflt */
static uint32_t pair_find(const uint32_t (*t)[2], size_t n, uint32_t cp, uint32_t dflt)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t[mid][0] == cp)
			return t[mid][1];
		if (t[mid][0] < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return dflt;
}

static const struct uc_decomp *decomp_find(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(uc_decomp) / sizeof(uc_decomp[0]);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (uc_decomp[mid].cp == cp)
			return &uc_decomp[mid];
		if (uc_decomp[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static unsigned ccc_of(uint32_t cp)
{
	if (cp < 0x300 || cp >= UC_RAW)
		return 0;
	return pair_find(uc_ccc, sizeof(uc_ccc) / sizeof(uc_ccc[0]), cp, 0);
}

/* one character of strict UTF-8 (no overlong forms, surrogates or values past U+10FFFF) at
   s[0..left), its length in *n_r; an invalid byte is UC_RAW + byte, length 1 */
static uint32_t utf8_next(const unsigned char *s, size_t left, size_t *n_r)
{
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	unsigned char c = s[0];
	size_t n = c < 0x80             ? 1
		   : (c & 0xe0) == 0xc0 ? 2
		   : (c & 0xf0) == 0xe0 ? 3
		   : (c & 0xf8) == 0xf0 ? 4
					: 0;
	uint32_t cp;

	*n_r = 1;
	if (n == 1)
		return c;
	if (n == 0 || n > left)
		return UC_RAW + c;
	cp = c & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return UC_RAW + c;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return UC_RAW + c;
	*n_r = n;
	return cp;
}

static void decompose(struct uc_seq *q, uint32_t cp, size_t src)
{
	const struct uc_decomp *d;

	if (cp >= 0xac00 && cp <= 0xd7a3) { /* Hangul syllable: L V (T) */
		uint32_t s = cp - 0xac00;

		seq_push(q, 0x1100 + s / 588, src);
		seq_push(q, 0x1161 + (s % 588) / 28, src);
		if (s % 28 != 0)
			seq_push(q, 0x11a7 + s % 28, src);
		return;
	}
	if (cp < UC_RAW && (d = decomp_find(cp)) != NULL) {
		for (size_t i = 0; i < d->len; i++)
			seq_push(q, uc_pool[d->off + i], src);
		return;
	}
	seq_push(q, cp, src);
}

/* the canonical ordering: each run of combining marks stably sorted by class (counting sort,
   so a long run costs its length) */
static void reorder(struct uc_seq *q)
{
	size_t i = 0;

	while (i < q->n) {
		size_t a = i;

		while (i < q->n && ccc_of(q->cp[i]) != 0)
			i++;
		if (i - a >= 2) {
			size_t count[257] = { 0 }, n = i - a;
			uint32_t *cp = xreallocarray(NULL, n, sizeof(*cp));
			size_t *src = xreallocarray(NULL, n, sizeof(*src));

			for (size_t k = a; k < i; k++)
				count[ccc_of(q->cp[k]) + 1]++;
			for (size_t c = 1; c < 257; c++)
				count[c] += count[c - 1];
			for (size_t k = a; k < i; k++) {
				size_t at = count[ccc_of(q->cp[k])]++;

				cp[at] = q->cp[k];
				src[at] = q->src[k];
			}
			memcpy(q->cp + a, cp, n * sizeof(*cp));
			memcpy(q->src + a, src, n * sizeof(*src));
			free(cp);
			free(src);
		}
		if (i == a)
			i++;
	}
}

void sv_ucasemap(const char *s, size_t len, struct buf *out, size_t **map_r)
{
	const unsigned char *p = (const unsigned char *)s;
	struct uc_seq q = { 0 };
	size_t *map = NULL, nmap = 0;

	for (size_t i = 0, n; i < len; i += n) {
		uint32_t cp = utf8_next(p + i, len - i, &n);

		if (cp < UC_RAW)
			cp = pair_find(uc_title, sizeof(uc_title) / sizeof(uc_title[0]), cp, cp);
		decompose(&q, cp, i);
	}
	reorder(&q);
	buf_init(out, len + 16, BUF_INPUT_BOUNDED);
	if (map_r != NULL)
		map = xreallocarray(NULL, q.n * 4 + 1, sizeof(*map));
	for (size_t k = 0; k < q.n; k++) {
		size_t before = out->len;

		if (q.cp[k] >= UC_RAW)
			buf_putc(out, (char)(q.cp[k] - UC_RAW));
		else
			buf_put_utf8(out, q.cp[k]);
		for (size_t b = before; map != NULL && b < out->len; b++)
			map[nmap++] = q.src[k];
	}
	if (map != NULL) {
		map[nmap] = len;
		*map_r = map;
	}
	seq_free(&q);
}

int sv_ucmp(const char *a, size_t alen, const char *b, size_t blen)
{
	struct buf fa, fb;
	int c;

	sv_ucasemap(a, alen, &fa, NULL);
	sv_ucasemap(b, blen, &fb, NULL);
	size_t n = fa.len < fb.len ? fa.len : fb.len;
	c = n ? memcmp(fa.data, fb.data, n) : 0;
	if (c == 0)
		c = fa.len == fb.len ? 0 : fa.len < fb.len ? -1 : 1;
	buf_release(&fa);
	buf_release(&fb);
	return c < 0 ? -1 : c > 0;
}

bool sv_ucontains(const char *hay, size_t hlen, const char *n, size_t nlen)
{
	struct buf fh, fn;
	bool found;

	if (nlen == 0)
		return true;
	sv_ucasemap(hay, hlen, &fh, NULL);
	sv_ucasemap(n, nlen, &fn, NULL);
	found = fn.len == 0 || (fh.len > 0 && memmem(fh.data, fh.len, fn.data, fn.len) != NULL);
	buf_release(&fh);
	buf_release(&fn);
	return found;
}

/* appends lit[0..len) folded, with the wildcard characters a fold can make ('*' and '?' of
   the fullwidth forms, say) and '\' escaped so they stay literal */
static void put_literal(struct buf *pat, const char *lit, size_t len)
{
	struct buf f;

	if (len == 0)
		return;
	sv_ucasemap(lit, len, &f, NULL);
	for (size_t i = 0; i < f.len; i++) {
		if (f.data[i] == '*' || f.data[i] == '?' || f.data[i] == '\\')
			buf_putc(pat, '\\');
		buf_putc(pat, f.data[i]);
	}
	buf_release(&f);
}

bool sv_uglob(const char *pat, size_t plen, const char *s, size_t slen, struct sv_str *caps,
	      size_t ncaps, size_t *nset_r)
{
	struct buf fp, lit, fs;
	size_t *map = NULL, nset = 0;
	bool ok;

	buf_init(&fp, plen + 16, BUF_INPUT_BOUNDED);
	buf_init(&lit, plen + 1, BUF_INPUT_BOUNDED);
	for (size_t i = 0; i < plen; i++) {
		if (pat[i] == '*' || pat[i] == '?') {
			put_literal(&fp, lit.data, lit.len);
			buf_reset(&lit);
			buf_putc(&fp, pat[i]);
		} else if (pat[i] == '\\' && i + 1 < plen) {
			size_t n;

			(void)utf8_next((const unsigned char *)pat + i + 1, plen - i - 1, &n);
			buf_append(&lit, pat + i + 1, n); /* the escaped character, literal */
			i += n;
		} else {
			buf_putc(&lit, pat[i]);
		}
	}
	put_literal(&fp, lit.data, lit.len);
	buf_release(&lit);
	sv_ucasemap(s, slen, &fs, &map);
	const char *fsd = buf_cstr(&fs);
	ok = sv_glob(buf_cstr(&fp), fp.len, fsd, fs.len, false, caps, ncaps, &nset);
	if (ok && caps != NULL) {
		/* the captures as the subject's own characters (a reordered combining mark can
		   put a later character's offset first: then the capture is empty) */
		for (size_t k = 1; k < nset && k < ncaps; k++) {
			size_t a = caps[k].p ? (size_t)(caps[k].p - fsd) : 0, b = a + caps[k].len;
			size_t from = map[a], to = map[b] > from ? map[b] : from;

			caps[k] = (struct sv_str){ s + from, to - from };
		}
		caps[0] = (struct sv_str){ s, slen };
		*nset_r = nset;
	}
	free(map);
	buf_release(&fs);
	buf_release(&fp);
	return ok;
}

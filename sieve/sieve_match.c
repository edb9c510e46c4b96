/* sieve_match.c — owns comparators (i;octet, i;ascii-casemap, i;ascii-numeric: RFC 4790;
 * i;unicode-casemap is sieve_unicode.c's),
 * :contains, the :matches glob with its wildcard captures (RFC 5228 2.7.1, RFC 5229 3.2), and
 * relational operators (RFC 5231). The glob backtracks only to the last '*', so it is
 * O(pattern x subject) for any input. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "sieve/sieve_private.h"

static int fold(int c, bool icase)
{
	return icase && c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* i;ascii-numeric: the leading digits' value; no digit = positive infinity */
static int numeric_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0, j = 0;
	bool ainf = alen == 0 || !isdigit((unsigned char)a[0]);
	bool binf = blen == 0 || !isdigit((unsigned char)b[0]);

	if (ainf || binf)
		return ainf && binf ? 0 : ainf ? 1 : -1;
	while (i < alen && a[i] == '0' && i + 1 < alen && isdigit((unsigned char)a[i + 1]))
		i++;
	while (j < blen && b[j] == '0' && j + 1 < blen && isdigit((unsigned char)b[j + 1]))
		j++;
	size_t ai = i, bj = j;
	while (ai < alen && isdigit((unsigned char)a[ai]))
		ai++;
	while (bj < blen && isdigit((unsigned char)b[bj]))
		bj++;
	if (ai - i != bj - j)
		return ai - i < bj - j ? -1 : 1;
	int c = memcmp(a + i, b + j, ai - i);
	return c < 0 ? -1 : c > 0;
}

int sv_cmp_values(enum sv_cmp cmp, const char *a, size_t alen, const char *b, size_t blen)
{
	if (cmp == CMP_NUMERIC)
		return numeric_cmp(a, alen, b, blen);
	if (cmp == CMP_UNICODE_CASEMAP)
		return sv_ucmp(a, alen, b, blen);
	bool icase = cmp != CMP_OCTET;
	size_t n = alen < blen ? alen : blen;

	for (size_t i = 0; i < n; i++) {
		int x = fold((unsigned char)a[i], icase), y = fold((unsigned char)b[i], icase);

		if (x != y)
			return x < y ? -1 : 1;
	}
	return alen == blen ? 0 : alen < blen ? -1 : 1;
}

bool sv_contains(enum sv_cmp cmp, const char *hay, size_t hlen, const char *n, size_t nlen)
{
	if (nlen == 0)
		return true;
	if (cmp == CMP_OCTET)
		return memmem(hay, hlen, n, nlen) != NULL;
	if (cmp == CMP_UNICODE_CASEMAP)
		return sv_ucontains(hay, hlen, n, nlen);
	return str_casefind(hay, hlen, n, nlen) != NULL;
}

bool sv_relop_ok(enum sv_relop r, int c)
{
	switch (r) {
	case R_GT:
		return c > 0;
	case R_GE:
		return c >= 0;
	case R_LT:
		return c < 0;
	case R_LE:
		return c <= 0;
	case R_EQ:
		return c == 0;
	case R_NE:
		return c != 0;
	}
	return false;
}

static size_t utf8_len(const char *s, size_t left)
{
	unsigned char c = (unsigned char)s[0];
	size_t n = c < 0x80             ? 1
		   : (c & 0xe0) == 0xc0 ? 2
		   : (c & 0xf0) == 0xe0 ? 3
		   : (c & 0xf8) == 0xf0 ? 4
					: 1;

	return n > left ? left : n;
}

#define GLOB_MAX_WILD 64

/* pattern tokens: literal byte (>= 0), '?' (-1), '*' (-2) */
bool sv_glob(const char *pat, size_t plen, const char *s, size_t slen, bool icase,
	     struct sv_str *caps, size_t ncaps, size_t *nset_r)
{
	int tok[1024];
	size_t ntok = 0, nwild = 0;
	size_t wstart[GLOB_MAX_WILD], wlen[GLOB_MAX_WILD];
	unsigned wof[1024]; /* token -> wildcard number */

	for (size_t i = 0; i < plen; i++) {
		if (ntok == sizeof(tok) / sizeof(tok[0]))
			return false; /* a longer pattern matches nothing (bounded work) */
		if (pat[i] == '\\' && i + 1 < plen) {
			tok[ntok++] = (unsigned char)pat[++i];
		} else if (pat[i] == '*' || pat[i] == '?') {
			wof[ntok] = (unsigned)nwild;
			if (nwild < GLOB_MAX_WILD)
				nwild++;
			tok[ntok++] = pat[i] == '*' ? -2 : -1;
		} else {
			tok[ntok++] = (unsigned char)pat[i];
		}
	}
	size_t i = 0, j = 0, star = SIZE_MAX, star_j = 0;

	while (j < slen || i < ntok) {
		if (i < ntok && tok[i] == -2) {
			unsigned w = wof[i];

			if (w < GLOB_MAX_WILD) {
				wstart[w] = j;
				wlen[w] = 0;
			}
			star = i++;
			star_j = j;
			continue;
		}
		if (i < ntok && j < slen) {
			if (tok[i] == -1) {
				unsigned w = wof[i];
				size_t n = utf8_len(s + j, slen - j);

				if (w < GLOB_MAX_WILD) {
					wstart[w] = j;
					wlen[w] = n;
				}
				i++;
				j += n;
				continue;
			}
			if (fold(tok[i], icase) == fold((unsigned char)s[j], icase)) {
				i++;
				j++;
				continue;
			}
		}
		if (star == SIZE_MAX || star_j >= slen)
			return false;
		star_j += utf8_len(s + star_j, slen - star_j);
		j = star_j;
		i = star + 1;
		if (wof[star] < GLOB_MAX_WILD)
			wlen[wof[star]] = j - wstart[wof[star]];
	}
	if (caps != NULL) {
		size_t k;

		for (k = 0; k < nwild && k + 1 < ncaps; k++)
			caps[k + 1] = (struct sv_str){ s + wstart[k], wlen[k] };
		caps[0] = (struct sv_str){ s, slen };
		*nset_r = k + 1;
	}
	return true;
}

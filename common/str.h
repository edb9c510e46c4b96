/* str.h — length-aware string helpers: bounded copy and format, case-insensitive compare,
 * trimming, splitting, and range-checked parsing of numbers, sizes, durations and booleans.
 *
 * Parsers take (p, len) and return 0 on success, -1 on bad input or overflow; they never read
 * past len and never accept trailing garbage. */
#ifndef HERON_STR_H
#define HERON_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A view of len bytes at p; not NUL-terminated. */
struct str_view {
	const char *p;
	size_t len;
};

/* Copies src into dst (size bytes, always NUL-terminated when size > 0). Returns strlen(src):
   truncation happened when the result >= size. */
size_t str_lcpy(char *dst, const char *src, size_t size);
/* Appends like strlcat; returns the length it tried to make. */
size_t str_lcat(char *dst, const char *src, size_t size);
/* snprintf that reports truncation: 0, or -1 when the result did not fit. */
int str_fmt(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ASCII case-insensitive equality and order of two counted strings. */
bool str_caseeq(const char *a, size_t alen, const char *b, size_t blen);
int str_casecmp(const char *a, size_t alen, const char *b, size_t blen);
/* Whether p[0..len) starts with the NUL-terminated prefix, ignoring ASCII case. */
bool str_caseprefix(const char *p, size_t len, const char *prefix);
/* Finds needle in hay ignoring ASCII case; NULL when absent. */
const char *str_casefind(const char *hay, size_t haylen, const char *needle, size_t nlen);
/* Lower-cases ASCII letters in place. */
void str_lower(char *p, size_t len);

/* Trims ASCII white space (space, tab, CR, LF) from both ends of a view. */
struct str_view str_trim(struct str_view v);
/* Splits off the next field of *rest at sep: returns true and sets *field, advancing *rest past
   the separator; false when *rest is exhausted. Empty fields are returned (a,,b = 3 fields). */
bool str_split_next(struct str_view *rest, char sep, struct str_view *field);
/* Splits on runs of spaces/tabs, skipping empty fields. */
bool str_split_ws(struct str_view *rest, struct str_view *field);
static inline struct str_view str_view_of(const char *s);
/* Whether the view has no bytes 0x00, CR or LF (safe to put in a line-based protocol). */
bool str_is_safe_line(const char *p, size_t len);

/* A client-given name made fit for a log line: printable ASCII other than '"' and '\\' kept,
   every other byte '?', at most size - 1 bytes (a longer name ends in "..."). */
void str_log_name(char *dst, size_t size, const char *name);

/* Unsigned decimal, no sign, no spaces, <= max. */
int str_to_u64(const char *p, size_t len, uint64_t max, uint64_t *v_r);
/* Signed decimal in [min, max]. */
int str_to_i64(const char *p, size_t len, int64_t min, int64_t max, int64_t *v_r);
/* A byte count with an optional unit k/K, m/M, g/G (powers of 1024), optional trailing B. */
int str_to_size(const char *p, size_t len, uint64_t *v_r);
/* A duration with unit ms, s, m, h or d (no unit = seconds); result in milliseconds. */
int str_to_duration_ms(const char *p, size_t len, int64_t *ms_r);
/* yes/no, true/false, on/off, 1/0 (case-insensitive). */
int str_to_bool(const char *p, size_t len, bool *v_r);
/* The value 0..63 of a base64 digit, or -1: A-Z a-z 0-9 + then c63 ('/' in RFC 4648 base64,
   ',' in IMAP's modified UTF-7). */
int str_b64_digit(unsigned char c, unsigned char c63);
/* The value 0..15 of a hexadecimal digit (0-9, a-f, A-F), or -1. */
int str_hex_digit(unsigned char c);

static inline struct str_view str_view_of(const char *s)
{
	struct str_view v = { s, 0 };

	while (s[v.len] != '\0')
		v.len++;
	return v;
}

#endif

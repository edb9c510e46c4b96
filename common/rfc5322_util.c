/* rfc5322_util.c — owns the helpers over a raw header block (field iteration, HEADER.FIELDS
 * extraction, one field's value), RFC 5322 date parsing and address-list parsing. None of them
 * allocates except into the caller's buf. */
#include <string.h>

#include "common/rfc5322.h"

static bool is_wsp(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_lower_eq(const char *p, size_t n, const char *s)
{
	return str_caseeq(p, n, s, strlen(s));
}

int rfc5322_header_next(const char *hdr, size_t len, size_t *pos, struct str_view *name,
			struct str_view *raw)
{
	size_t i = *pos, start = i;
	const char *nl;

	if (i >= len || hdr[i] == '\n' || (hdr[i] == '\r' && (i + 1 >= len || hdr[i + 1] == '\n')))
		return 0;
	for (;;) {
		nl = memchr(hdr + i, '\n', len - i);
		i = nl != NULL ? (size_t)(nl - hdr) + 1 : len;
		if (i >= len || !is_wsp(hdr[i]))
			break;
	}
	raw->p = hdr + start;
	raw->len = i - start;
	const char *colon = memchr(raw->p, ':', raw->len);
	const char *eol = memchr(raw->p, '\n', raw->len);

	name->p = raw->p;
	name->len = 0;
	if (colon != NULL && (eol == NULL || colon < eol)) {
		name->len = (size_t)(colon - raw->p);
		while (name->len > 0 && is_wsp(name->p[name->len - 1]))
			name->len--;
	}
	*pos = i;
	return 1;
}

static bool name_listed(struct str_view n, const struct str_view *names, size_t nnames)
{
	for (size_t i = 0; i < nnames; i++)
		if (str_caseeq(n.p, n.len, names[i].p, names[i].len))
			return true;
	return false;
}

int rfc5322_header_fields(const char *hdr, size_t len, const struct str_view *names, size_t nnames,
			  bool exclude, struct buf *out)
{
	size_t start = out->len, pos = 0;
	struct str_view name, raw;

	while (rfc5322_header_next(hdr, len, &pos, &name, &raw) == 1) {
		if (name.len == 0 || name_listed(name, names, nnames) == exclude)
			continue;
		if (buf_append(out, raw.p, raw.len) < 0 ||
		    (raw.p[raw.len - 1] != '\n' && buf_append(out, "\r\n", 2) < 0))
			goto full;
	}
	if (buf_append(out, "\r\n", 2) == 0)
		return 0;
full:
	buf_truncate(out, start);
	return -1;
}

int rfc5322_unfold(const char *p, size_t len, struct buf *out)
{
	size_t s = 0, e = len;

	while (s < e && (is_wsp(p[s]) || p[s] == '\r' || p[s] == '\n'))
		s++;
	while (e > s && (is_wsp(p[e - 1]) || p[e - 1] == '\r' || p[e - 1] == '\n'))
		e--;
	for (size_t i = s; i < e;) {
		size_t j = i;

		while (j < e && p[j] != '\r' && p[j] != '\n')
			j++;
		if (buf_append(out, p + i, j - i) < 0)
			return -1;
		i = j + 1;
	}
	return 0;
}

int rfc5322_header_value(const char *hdr, size_t len, const char *name, struct buf *out)
{
	size_t pos = 0, nlen = strlen(name);
	struct str_view n, raw;

	while (rfc5322_header_next(hdr, len, &pos, &n, &raw) == 1) {
		if (n.len == 0 || !str_caseeq(n.p, n.len, name, nlen))
			continue;
		const char *colon = memchr(raw.p, ':', raw.len);
		size_t before = out->len;

		if (rfc5322_unfold(colon + 1, raw.len - (size_t)(colon + 1 - raw.p), out) < 0) {
			buf_truncate(out, before);
			return -1;
		}
		return 1;
	}
	return 0;
}

/* ---- dates ---- */

static const char *const months[] = { "jan", "feb", "mar", "apr", "may", "jun",
				      "jul", "aug", "sep", "oct", "nov", "dec" };

static const struct {
	const char *name;
	int minutes;
} zones[] = {
	{ "ut", 0 },     { "gmt", 0 },    { "utc", 0 },    { "z", 0 },
	{ "est", -300 }, { "edt", -240 }, { "cst", -360 }, { "cdt", -300 },
	{ "mst", -420 }, { "mdt", -360 }, { "pst", -480 }, { "pdt", -420 },
};

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	const int64_t era = (y >= 0 ? y : y - 399) / 400;
	const unsigned yoe = (unsigned)(y - era * 400);
	const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + (int64_t)doe - 719468;
}

struct date_parts {
	int day, month, year, hour, min, sec, zone;
	bool have_time, have_zone;
};

static void date_word(struct date_parts *dp, const char *w, size_t n)
{
	for (unsigned i = 0; i < 12; i++)
		if (n >= 3 && str_caseprefix(w, n, months[i])) {
			dp->month = (int)i + 1;
			return;
		}
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++)
		if (is_lower_eq(w, n, zones[i].name)) {
			dp->zone = zones[i].minutes;
			dp->have_zone = true;
			return;
		}
	/* weekday names, military zones (treated as +0000) and other words are ignored */
}

static size_t date_number(struct date_parts *dp, const char *p, size_t len, size_t i)
{
	int v[3] = { 0, 0, 0 }, nv = 0;
	size_t digits = 0;

	for (;;) {
		size_t d0 = i;

		while (i < len && p[i] >= '0' && p[i] <= '9' && i - d0 < 6)
			v[nv] = v[nv] * 10 + (p[i++] - '0');
		digits = i - d0;
		nv++;
		if (nv < 3 && i + 1 < len && p[i] == ':' && p[i + 1] >= '0' && p[i + 1] <= '9')
			i++;
		else
			break;
	}
	if (nv >= 2) {
		dp->hour = v[0];
		dp->min = v[1];
		dp->sec = nv == 3 ? v[2] : 0;
		dp->have_time = true;
	} else if (dp->day == 0 && digits <= 2) {
		dp->day = v[0];
	} else if (dp->year < 0) {
		dp->year = v[0] < 50 && digits <= 2 ? v[0] + 2000
			   : v[0] < 1000            ? v[0] + 1900
						    : v[0];
	}
	return i;
}

static bool digits4(const char *p, size_t len, size_t i)
{
	if (i + 4 > len)
		return false;
	for (size_t k = i; k < i + 4; k++)
		if (p[k] < '0' || p[k] > '9')
			return false;
	return true;
}

size_t rfc5322_skip_comment(const char *p, size_t len, size_t i)
{
	int depth = 0;

	for (; i < len; i++) {
		if (p[i] == '\\' && i + 1 < len)
			i++;
		else if (p[i] == '(')
			depth++;
		else if (p[i] == ')' && --depth == 0)
			return i + 1;
	}
	return i;
}

int rfc5322_date_parse_tz(const char *p, size_t len, int64_t *t_r, int *tz_r)
{
	struct date_parts dp = { .year = -1 };
	size_t i = 0;

	while (i < len) {
		char c = p[i];

		if (c == '(') {
			i = rfc5322_skip_comment(p, len, i);
		} else if (c >= '0' && c <= '9') {
			i = date_number(&dp, p, len, i);
		} else if ((c == '+' || c == '-') && dp.have_time && digits4(p, len, i + 1)) {
			int hh = (p[i + 1] - '0') * 10 + (p[i + 2] - '0');
			int mm = (p[i + 3] - '0') * 10 + (p[i + 4] - '0');

			dp.zone = (c == '-' ? -1 : 1) * (hh * 60 + mm);
			dp.have_zone = true;
			i += 5;
		} else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') {
			size_t s = i;

			while (i < len && (((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z')))
				i++;
			date_word(&dp, p + s, i - s);
		} else {
			i++;
		}
	}
	if (dp.day < 1 || dp.day > 31 || dp.month == 0 || dp.year < 1900 || dp.year > 9999 ||
	    !dp.have_time || dp.hour > 23 || dp.min > 59 || dp.sec > 60)
		return -1;
	*t_r = days_from_civil(dp.year, (unsigned)dp.month, (unsigned)dp.day) * 86400 +
	       dp.hour * 3600 + dp.min * 60 + dp.sec - (int64_t)dp.zone * 60;
	*tz_r = dp.zone;
	return 0;
}

int rfc5322_date_parse(const char *p, size_t len, int64_t *t_r)
{
	int tz;

	return rfc5322_date_parse_tz(p, len, t_r, &tz);
}

/* mta_sts.c — owns reading MTA-STS text (RFC 8461): the TXT record, the policy file, MX
 * pattern matching. No I/O; every read is bounded by the length given. The fetching cache is
 * mta_sts_fetch.c. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/str.h"
#include "mtad/mta_sts.h"

const char *sts_mode_name(enum sts_mode m)
{
	return m == STS_ENFORCE ? "enforce" : m == STS_TESTING ? "testing" : "none";
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

int sts_txt_parse(const char *txt, size_t len, char id[STS_ID_MAX + 1])
{
	struct str_view rest = { txt, len }, field;
	bool first = true, have_id = false;

	if (len < 7 || memcmp(txt, "v=STSv1", 7) != 0)
		return 0;
	/* sts-text-record = sts-version 1*(*WSP ";" *WSP sts-field) [";"] */
	while (str_split_next(&rest, ';', &field)) {
		field = str_trim(field);
		if (first) {
			if (field.len != 7) /* "v=STSv1" exactly */
				return -1;
			first = false;
			continue;
		}
		if (field.len == 0) {
			if (rest.len == 0)
				break; /* a trailing ";" */
			return -1;
		}
		if (field.len > 3 && memcmp(field.p, "id=", 3) == 0) {
			if (have_id || field.len - 3 > STS_ID_MAX)
				return -1;
			for (size_t i = 3; i < field.len; i++)
				if (!((field.p[i] >= 'a' && field.p[i] <= 'z') ||
				      (field.p[i] >= 'A' && field.p[i] <= 'Z') ||
				      (field.p[i] >= '0' && field.p[i] <= '9')))
					return -1;
			memcpy(id, field.p + 3, field.len - 3);
			id[field.len - 3] = '\0';
			have_id = true;
		}
		/* other fields (sts-ext) are ignored */
	}
	return have_id ? 1 : -1;
}

/* A pattern of an mx: line: a host name, or "*." and one. */
static bool mx_pattern_ok(const char *v, size_t len)
{
	char name[DNS_NAME_MAX + 3];

	if (len >= 2 && v[0] == '*' && v[1] == '.') {
		v += 2;
		len -= 2;
	}
	if (len == 0 || len > DNS_NAME_MAX)
		return false;
	memcpy(name, v, len);
	name[len] = '\0';
	return dns_name_valid(name);
}

int sts_policy_parse(const char *text, size_t len, struct sts_policy *p, const char **error_r)
{
	bool version = false, mode = false, age = false;
	size_t i = 0;

	memset(p, 0, sizeof(*p));
	*error_r = "policy too large";
	if (len > STS_POLICY_MAX)
		return -1;
	while (i < len) {
		size_t eol = i;

		while (eol < len && text[eol] != '\n')
			eol++;
		size_t end = eol > i && text[eol - 1] == '\r' ? eol - 1 : eol;
		const char *line = text + i, *colon = memchr(line, ':', end - i);
		i = eol + 1;
		if (end == (size_t)(line - text))
			continue; /* an empty line */
		*error_r = "a line without a colon";
		if (colon == NULL)
			return -1;
		struct str_view k = str_trim((struct str_view){ line, (size_t)(colon - line) });
		struct str_view v = str_trim(
			(struct str_view){ colon + 1, (size_t)(text + end - colon - 1) });
		while (v.len > 0 && is_ws(v.p[v.len - 1]))
			v.len--;
		if (str_caseeq(k.p, k.len, "version", 7)) {
			*error_r = "version is not STSv1";
			if (version || !str_caseeq(v.p, v.len, "STSv1", 5) || v.len != 5)
				return -1;
			version = true;
		} else if (str_caseeq(k.p, k.len, "mode", 4)) {
			*error_r = "bad mode";
			if (mode)
				return -1;
			if (v.len == 7 && memcmp(v.p, "enforce", 7) == 0)
				p->mode = STS_ENFORCE;
			else if (v.len == 7 && memcmp(v.p, "testing", 7) == 0)
				p->mode = STS_TESTING;
			else if (v.len == 4 && memcmp(v.p, "none", 4) == 0)
				p->mode = STS_NONE;
			else
				return -1;
			mode = true;
		} else if (str_caseeq(k.p, k.len, "max_age", 7)) {
			uint64_t a;

			*error_r = "bad max_age";
			if (age || v.len > 10 || str_to_u64(v.p, v.len, STS_MAX_AGE_MAX, &a) < 0)
				return -1;
			p->max_age = (int64_t)a;
			age = true;
		} else if (str_caseeq(k.p, k.len, "mx", 2)) {
			*error_r = "bad mx pattern";
			if (!mx_pattern_ok(v.p, v.len))
				return -1;
			if (p->nmx < STS_MX_MAX) {
				for (size_t j = 0; j < v.len; j++)
					p->mx[p->nmx][j] = (char)(v.p[j] >= 'A' && v.p[j] <= 'Z'
									  ? v.p[j] + 32
									  : v.p[j]);
				p->mx[p->nmx][v.len] = '\0';
				p->nmx++;
			}
		}
		/* other keys are extensions: ignored (RFC 8461 3.2) */
	}
	*error_r = !version ? "no version"
		   : !mode  ? "no mode"
		   : !age   ? "no max_age"
			    : "no mx with mode enforce or testing";
	if (!version || !mode || !age || (p->mode != STS_NONE && p->nmx == 0))
		return -1;
	*error_r = NULL;
	return 0;
}

bool sts_mx_match(const struct sts_policy *p, const char *host)
{
	size_t hl = strlen(host);

	for (size_t i = 0; i < p->nmx; i++) {
		const char *pat = p->mx[i];

		if (pat[0] == '*' && pat[1] == '.') {
			/* one left-most label: "*.example.com" matches "mx.example.com" only */
			const char *dot = strchr(host, '.');

			if (dot != NULL && dot > host && strcasecmp(dot + 1, pat + 2) == 0)
				return true;
		} else if (strlen(pat) == hl && strcasecmp(pat, host) == 0) {
			return true;
		}
	}
	return false;
}

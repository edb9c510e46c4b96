/* spf_parse.c — SPF's texts (RFC 7208 4.5, 5, 6, 7, 12): record selection, the term grammar
 * with CIDR lengths and domain-spec endings, and macro expansion. No I/O. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/spf.h"

int spf_ip_parse(const char *text, struct spf_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	if (inet_pton(AF_INET, text, ip->a) == 1) {
		ip->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, text, ip->a) != 1)
		return -1;
	ip->family = AF_INET6;
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(ip->a, mapped, 12) == 0) {
		memmove(ip->a, ip->a + 12, 4);
		memset(ip->a + 4, 0, 12);
		ip->family = AF_INET;
	}
	return 0;
}

bool spf_is_record(const char *txt, size_t len)
{
	return len >= 6 && str_caseprefix(txt, len, "v=spf1") && (len == 6 || txt[6] == ' ');
}

static bool alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool alnum(char c)
{
	return alpha(c) || (c >= '0' && c <= '9');
}

/* A macro-string (7.1): 0 when valid; letters c r t only when exp. */
static int macro_check(const char *p, size_t len, bool exp)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if ((c < 0x21 && !(exp && c == ' ')) || c > 0x7e)
			return -1;
		if (c != '%')
			continue;
		if (++i == len)
			return -1;
		if (p[i] == '%' || p[i] == '_' || p[i] == '-')
			continue;
		if (p[i] != '{' || ++i == len)
			return -1;
		char l = (char)(p[i] | 0x20);
		if (strchr(exp ? "slodiphcrtv" : "slodiphv", l) == NULL || !alpha(p[i]))
			return -1;
		i++;
		while (i < len && p[i] >= '0' && p[i] <= '9')
			i++;
		if (i < len && (p[i] == 'r' || p[i] == 'R'))
			i++;
		while (i < len && strchr(".-+,/_=", p[i]) != NULL && p[i] != '\0')
			i++;
		if (i == len || p[i] != '}')
			return -1;
	}
	return 0;
}

/* domain-end (12): a macro-expand, or a toplabel after a dot (optional final dot). */
static bool domain_end_ok(const char *p, size_t len)
{
	if (len > 0 && p[len - 1] == '}')
		return true;
	if (len > 0 && p[len - 1] == '.')
		len--;
	size_t s = len;
	while (s > 0 && p[s - 1] != '.')
		s--;
	if (s == 0 || s == len)
		return false; /* no dot, or an empty label */
	bool has_alpha = false;
	for (size_t i = s; i < len; i++) {
		if (!alnum(p[i]) && p[i] != '-')
			return false;
		has_alpha |= alpha(p[i]);
	}
	return has_alpha && p[s] != '-' && p[len - 1] != '-';
}

static int domain_spec(const char *p, size_t len, char **out)
{
	if (len == 0 || macro_check(p, len, false) < 0 || !domain_end_ok(p, len))
		return -1;
	*out = xmemdup0(p, len);
	return 0;
}

static bool all_digits(const char *p, size_t len);

static int cidr_len(const char *p, size_t len, int max, int *v)
{
	uint64_t n;

	if (len == 0 || len > 3 || (len > 1 && p[0] == '0') || !all_digits(p, len) ||
	    str_to_u64(p, len, (uint64_t)max, &n) < 0)
		return -1;
	*v = (int)n;
	return 0;
}

/* p is not NUL-terminated (a record's text): only len bytes are looked at. */
static bool all_digits(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return len > 0;
}

/* "/4" "//6" "/4//6" at the end of p[0..*len) (only digits after a slash make a length):
   cut off and parsed. dual: a and mx; else the single length of ip4 (v4) or ip6. */
static int dual_cidr(const char *p, size_t *len, struct spf_term *t, bool v4, bool v6)
{
	const char *sl = NULL;
	bool dual = v4 && v6;

	for (size_t i = *len; i-- > 0;)
		if (p[i] == '/') {
			sl = p + i;
			break;
		}
	if (sl == NULL || !all_digits(sl + 1, (size_t)(p + *len - sl - 1)))
		return 0;
	size_t dlen = (size_t)(p + *len - sl - 1);
	if (sl > p && sl[-1] == '/') {
		/* "//6" */
		if (!dual || cidr_len(sl + 1, dlen, 128, &t->cidr6) < 0)
			return -1;
		*len = (size_t)(sl - 1 - p);
		for (size_t i = *len; i-- > 0;)
			if (p[i] == '/') {
				if (!all_digits(p + i + 1, *len - i - 1))
					return 0;
				if (cidr_len(p + i + 1, *len - i - 1, 32, &t->cidr4) < 0)
					return -1;
				*len = i;
				return 0;
			}
		return 0;
	}
	if (cidr_len(sl + 1, dlen, dual || v4 ? 32 : 128, v4 ? &t->cidr4 : &t->cidr6) < 0)
		return -1;
	*len = (size_t)(sl - p);
	return 0;
}

static const struct {
	const char *name;
	enum spf_mech mech;
} mechs[] = {
	{ "all", SPF_ALL }, { "include", SPF_INCLUDE }, { "a", SPF_A },
	{ "mx", SPF_MX },   { "ptr", SPF_PTR },         { "ip4", SPF_IP4 },
	{ "ip6", SPF_IP6 }, { "exists", SPF_EXISTS },
};

static int parse_directive(const char *p, size_t len, struct spf_term *t)
{
	size_t nl = 0;
	char ip[64];

	t->qual = MA_PASS;
	if (len > 0 && strchr("+-~?", p[0]) != NULL) {
		t->qual = p[0] == '-'   ? MA_FAIL
			  : p[0] == '~' ? MA_SOFTFAIL
			  : p[0] == '?' ? MA_NEUTRAL
					: MA_PASS;
		p++;
		len--;
	}
	while (nl < len && p[nl] != ':' && p[nl] != '/')
		nl++;
	size_t k;
	for (k = 0; k < sizeof(mechs) / sizeof(mechs[0]); k++)
		if (str_caseeq(p, nl, mechs[k].name, strlen(mechs[k].name)))
			break;
	if (k == sizeof(mechs) / sizeof(mechs[0]))
		return -1;
	t->mech = mechs[k].mech;
	t->cidr4 = 32;
	t->cidr6 = 128;
	const char *arg = p + nl;
	size_t alen = len - nl;
	bool colon = alen > 0 && arg[0] == ':';
	switch (t->mech) {
	case SPF_ALL:
		return alen == 0 ? 0 : -1;
	case SPF_INCLUDE:
	case SPF_EXISTS:
		return colon ? domain_spec(arg + 1, alen - 1, &t->domain) : -1;
	case SPF_A:
	case SPF_MX:
		if (dual_cidr(arg, &alen, t, true, true) < 0)
			return -1;
		if (alen == 0)
			return 0;
		return colon ? domain_spec(arg + 1, alen - 1, &t->domain) : -1;
	case SPF_PTR:
		if (alen == 0)
			return 0;
		return colon ? domain_spec(arg + 1, alen - 1, &t->domain) : -1;
	case SPF_IP4:
	case SPF_IP6:
		if (!colon)
			return -1;
		arg++;
		alen--;
		if (dual_cidr(arg, &alen, t, t->mech == SPF_IP4, t->mech == SPF_IP6) < 0 ||
		    alen == 0 || alen >= sizeof(ip))
			return -1;
		memcpy(ip, arg, alen);
		ip[alen] = '\0';
		memset(&t->ip, 0, sizeof(t->ip));
		t->ip.family = t->mech == SPF_IP4 ? AF_INET : AF_INET6;
		return inet_pton(t->ip.family, ip, t->ip.a) == 1 ? 0 : -1;
	}
	return -1;
}

static void add_term(struct spf_record *r, const struct spf_term *t)
{
	r->t = xreallocarray(r->t, r->n + 1, sizeof(*r->t));
	r->t[r->n++] = *t;
}

int spf_record_parse(const char *txt, size_t len, struct spf_record *r, const char **err)
{
	struct str_view rest, term;

	memset(r, 0, sizeof(*r));
	if (!spf_is_record(txt, len)) {
		*err = "not an SPF record";
		return -1;
	}
	rest.p = txt + 6;
	rest.len = len - 6;
	while (rest.len > 0) {
		size_t i = 0;

		while (i < rest.len && rest.p[i] == ' ')
			i++;
		rest.p += i;
		rest.len -= i;
		if (rest.len == 0)
			break;
		term.p = rest.p;
		term.len = 0;
		while (term.len < rest.len && rest.p[term.len] != ' ')
			term.len++;
		rest.p += term.len;
		rest.len -= term.len;
		/* a modifier: name "=" (the name has no ':' or '/' before the '=') */
		size_t nl = 0;
		while (nl < term.len && (alnum(term.p[nl]) || strchr("-_.", term.p[nl])))
			nl++;
		if (nl > 0 && nl < term.len && term.p[nl] == '=' && alpha(term.p[0])) {
			const char *v = term.p + nl + 1;
			size_t vl = term.len - nl - 1;

			if (str_caseeq(term.p, nl, "redirect", 8)) {
				if (r->redirect != NULL || domain_spec(v, vl, &r->redirect) < 0) {
					*err = "bad or repeated redirect=";
					return -1;
				}
			} else if (str_caseeq(term.p, nl, "exp", 3)) {
				if (r->exp != NULL || domain_spec(v, vl, &r->exp) < 0) {
					*err = "bad or repeated exp=";
					return -1;
				}
			} else if (macro_check(v, vl, true) < 0) {
				*err = "bad modifier";
				return -1;
			}
			continue;
		}
		struct spf_term t = { 0 };
		if (parse_directive(term.p, term.len, &t) < 0) {
			free(t.domain);
			*err = "bad term";
			return -1;
		}
		add_term(r, &t);
	}
	return 0;
}

void spf_record_release(struct spf_record *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->t[i].domain);
	free(r->t);
	free(r->redirect);
	free(r->exp);
	memset(r, 0, sizeof(*r));
}

/* The value of macro letter l. */
static void macro_value(char l, const struct spf_request *rq, const char *d, const char *ptr_name,
			char *v, size_t size)
{
	const char *sender = rq->sender[0] ? rq->sender : NULL;
	const char *at = sender ? strrchr(sender, '@') : NULL;

	switch (l) {
	case 's':
		if (sender && at && at != sender)
			snprintf(v, size, "%s", sender);
		else
			snprintf(v, size, "postmaster@%s", sender && at ? at + 1 : rq->helo);
		break;
	case 'l':
		if (sender && at && at != sender)
			snprintf(v, size, "%.*s", (int)(at - sender), sender);
		else
			snprintf(v, size, "postmaster");
		break;
	case 'o':
		snprintf(v, size, "%s", sender && at ? at + 1 : rq->helo);
		break;
	case 'd':
		snprintf(v, size, "%s", d);
		break;
	case 'i': /* IPv6 in nibbles, upper case as RFC 7208 7.4 writes them */
		if (rq->ip.family == AF_INET) {
			snprintf(v, size, "%u.%u.%u.%u", rq->ip.a[0], rq->ip.a[1], rq->ip.a[2],
				 rq->ip.a[3]);
		} else {
			size_t k = 0;
			for (int b = 0; b < 16 && k + 4 < size; b++) {
				k += (size_t)snprintf(v + k, size - k, "%s%X.%X", b ? "." : "",
						      rq->ip.a[b] >> 4, rq->ip.a[b] & 15);
			}
		}
		break;
	case 'c':
		inet_ntop(rq->ip.family, rq->ip.a, v, (socklen_t)size);
		break;
	case 'p':
		snprintf(v, size, "%s", ptr_name ? ptr_name : "unknown");
		break;
	case 'v':
		snprintf(v, size, "%s", rq->ip.family == AF_INET ? "in-addr" : "ip6");
		break;
	case 'h':
		snprintf(v, size, "%s", rq->helo);
		break;
	case 'r':
		snprintf(v, size, "%s",
			 rq->receiver && rq->receiver[0] ? rq->receiver : "unknown");
		break;
	case 't':
		snprintf(v, size, "%lld", (long long)rq->now);
		break;
	default:
		v[0] = '\0';
	}
}

/* Splits v on the delimiters, reverses when rev, keeps the rightmost keep parts (0: all),
   joined by '.'. */
static void transform(char *v, size_t size, unsigned keep, bool rev, const char *delims)
{
	char *parts[256], tmp[1024];
	size_t n = 0;

	snprintf(tmp, sizeof(tmp), "%s", v);
	char *p = tmp;
	parts[n++] = p;
	for (; *p && n < 256; p++) {
		if (strchr(delims, *p) != NULL) {
			*p = '\0';
			parts[n++] = p + 1;
		}
	}
	if (rev)
		for (size_t i = 0; i < n / 2; i++) {
			char *t = parts[i];
			parts[i] = parts[n - 1 - i];
			parts[n - 1 - i] = t;
		}
	size_t first = keep > 0 && keep < n ? n - keep : 0, k = 0;
	v[0] = '\0';
	for (size_t i = first; i < n; i++)
		k += (size_t)snprintf(v + k, k < size ? size - k : 0, "%s%s", i > first ? "." : "",
				      parts[i]);
}

static void url_escape(char *v, size_t size)
{
	char tmp[1024];
	size_t k = 0;

	snprintf(tmp, sizeof(tmp), "%s", v);
	for (const char *p = tmp; *p && k + 4 < size; p++) {
		if (alnum(*p) || strchr("-._~", *p))
			v[k++] = *p;
		else
			k += (size_t)snprintf(v + k, size - k, "%%%02X", (unsigned char)*p);
	}
	v[k] = '\0';
}

int spf_expand(const char *spec, const struct spf_request *rq, const char *d, const char *ptr_name,
	       bool exp, char *out, size_t size)
{
	size_t len = strlen(spec), k = 0;

	if (macro_check(spec, len, exp) < 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		char v[1024];

		if (spec[i] != '%') {
			if (k + 1 < size)
				out[k++] = spec[i];
			continue;
		}
		i++;
		if (spec[i] == '%' || spec[i] == '_' || spec[i] == '-') {
			const char *lit = spec[i] == '%' ? "%" : spec[i] == '_' ? " " : "%20";
			for (; *lit && k + 1 < size; lit++)
				out[k++] = *lit;
			continue;
		}
		i++; /* '{' */
		char letter = spec[i++];
		unsigned keep = 0;
		bool rev = false;
		char delims[16] = "";
		size_t nd = 0;
		while (spec[i] >= '0' && spec[i] <= '9') {
			keep = keep * 10 + (unsigned)(spec[i++] - '0');
			if (keep > 1000)
				keep = 1000;
		}
		if (spec[i] == 'r' || spec[i] == 'R') {
			rev = true;
			i++;
		}
		while (spec[i] != '}') {
			if (nd + 1 < sizeof(delims) && strchr(delims, spec[i]) == NULL)
				delims[nd++] = spec[i];
			i++;
		}
		delims[nd] = '\0';
		macro_value((char)(letter | 0x20), rq, d, ptr_name, v, sizeof(v));
		transform(v, sizeof(v), keep, rev, nd ? delims : ".");
		if (letter >= 'A' && letter <= 'Z')
			url_escape(v, sizeof(v));
		for (const char *p = v; *p && k + 1 < size; p++)
			out[k++] = *p;
	}
	out[k] = '\0';
	return 0;
}

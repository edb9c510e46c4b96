/* sieve_tests.c — owns the tests that read the message and the envelope: address, envelope,
 * header, exists, size (RFC 5228 5), body (RFC 5173), string (RFC 5229), date/currentdate and
 * :index (RFC 5260), mailboxexists (RFC 5490), duplicate (RFC 7352), spamtest/virustest
 * (RFC 5235, on the scanner's header fields), hasflag (RFC 5232). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "sieve/sieve_run.h"

void sv_dup_mark(struct sv_run *rn, const char *key, int64_t seconds);

struct vals {
	struct sv_run *rn;
	struct sv_str *v;
	size_t n, cap;
	unsigned part;
	char sep;
};

static void vals_add(struct vals *vs, const char *p, size_t len)
{
	if (vs->n == vs->cap) {
		struct sv_str *nv;

		vs->cap = vs->cap ? vs->cap * 2 : 8;
		nv = sv_alloc(&vs->rn->tmp, vs->cap * sizeof(*nv));
		if (vs->n)
			memcpy(nv, vs->v, vs->n * sizeof(*nv));
		vs->v = nv;
	}
	vs->v[vs->n++] = (struct sv_str){ p, len };
}

/* the address part asked for of local@domain */
static void add_addr_part(struct vals *vs, const char *local, size_t llen, const char *dom,
			  size_t dlen, bool null_ok)
{
	struct sv_arena *a = &vs->rn->tmp;
	const char *sep = memchr(local, vs->sep, llen);

	switch (vs->part) {
	case P_ALL:
		if (llen == 0 && dlen == 0) {
			if (null_ok)
				vals_add(vs, "", 0);
			return;
		}
		{
			char *s = sv_alloc(a, llen + dlen + 2);

			memcpy(s, local, llen);
			if (dlen) {
				s[llen] = '@';
				memcpy(s + llen + 1, dom, dlen);
			}
			vals_add(vs, s, llen + (dlen ? dlen + 1 : 0));
		}
		return;
	case P_LOCAL:
		vals_add(vs, local, llen);
		return;
	case P_DOMAIN:
		vals_add(vs, dom, dlen);
		return;
	case P_USER:
		vals_add(vs, local, sep ? (size_t)(sep - local) : llen);
		return;
	case P_DETAIL:
		if (sep != NULL) /* no separator: the test fails (RFC 5233 4) */
			vals_add(vs, sep + 1, llen - (size_t)(sep - local) - 1);
		return;
	}
}

static void addr_cb(void *ctx, const struct rfc5322_addr *a)
{
	struct vals *vs = ctx;

	if (a->is_group_start || a->is_group_end)
		return;
	if (a->mailbox.len == 0 && a->domain.len == 0)
		return;
	add_addr_part(vs, sv_strndup(&vs->rn->tmp, a->mailbox.p, a->mailbox.len), a->mailbox.len,
		      sv_strndup(&vs->rn->tmp, a->domain.p, a->domain.len), a->domain.len, false);
}

/* the header fields called by any name of list sl, honouring :index/:last; calls fn for each */
static int for_headers(struct sv_run *rn, const struct sv_ins *in, const struct sv_sl *sl,
		       void (*fn)(struct sv_run *rn, size_t i, void *arg), void *arg)
{
	struct sv_sl_iter it;

	sv_sl_begin(sl, &it);
	for (struct sv_str name; sv_sl_next_exp(rn, &it, &name);) {
		size_t count = 0, k = 0;

		if (in->flags & I_HAS_INDEX)
			for (size_t i = 0; i < rn->nh; i++)
				count += !rn->h[i].deleted && rn->h[i].nlen == name.len &&
					 strncasecmp(rn->h[i].name, name.p, name.len) == 0;
		for (size_t i = 0; i < rn->nh; i++) {
			if (rn->h[i].deleted || rn->h[i].nlen != name.len ||
			    strncasecmp(rn->h[i].name, name.p, name.len) != 0)
				continue;
			k++;
			if (in->flags & I_HAS_INDEX) {
				size_t want = (size_t)in->index;

				if (want > count ||
				    k != ((in->flags & I_LAST) ? count - want + 1 : want))
					continue;
			}
			if (sv_charge(rn, false, rn->h[i].rawlen) < 0)
				return -1;
			fn(rn, i, arg);
		}
	}
	return 0;
}

static void hdr_value_cb(struct sv_run *rn, size_t i, void *arg)
{
	struct sv_str v = sv_hdr_decoded(rn, i);

	vals_add(arg, v.p, v.len);
}

static void hdr_addr_cb(struct sv_run *rn, size_t i, void *arg)
{
	struct sv_str v = sv_hdr_value(rn, i);

	rfc5322_addr_parse(v.p, v.len, addr_cb, arg);
}

static void split_addr(struct vals *vs, const char *a)
{
	const char *at = strrchr(a, '@');

	if (at == NULL)
		add_addr_part(vs, a, strlen(a), "", 0, true);
	else
		add_addr_part(vs, a, (size_t)(at - a), at + 1, strlen(at + 1), true);
}

static int test_envelope(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	struct sv_sl_iter it;

	sv_sl_begin(&in->f[F_SL0], &it);
	for (struct sv_str part; sv_sl_next_exp(rn, &it, &part);) {
		if (part.len == 4 && strncasecmp(part.p, "from", 4) == 0)
			split_addr(vs, rn->env->env_from ? rn->env->env_from : "");
		else if (part.len == 2 && strncasecmp(part.p, "to", 2) == 0 && rn->env->env_to)
			split_addr(vs, rn->env->env_to);
		else if (part.len == 4 && strncasecmp(part.p, "auth", 4) == 0 && rn->env->auth)
			split_addr(vs, rn->env->auth);
		else if (part.len == 4 && strncasecmp(part.p, "orig", 4) == 0 && rn->env->orig_to)
			split_addr(vs, rn->env->orig_to);
	}
	return sv_match_values(rn, in, F_SL1, vs->v, vs->n);
}

static int test_exists(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_sl_iter it;

	sv_sl_begin(&in->f[F_SL0], &it);
	for (struct sv_str name; sv_sl_next_exp(rn, &it, &name);) {
		bool found = false;

		for (size_t i = 0; i < rn->nh && !found; i++)
			found = !rn->h[i].deleted && rn->h[i].nlen == name.len &&
				strncasecmp(rn->h[i].name, name.p, name.len) == 0;
		if (!found)
			return 0;
	}
	return 1;
}

static int test_string(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	struct sv_sl_iter it;

	sv_sl_begin(&in->f[F_SL0], &it);
	for (struct sv_str v; sv_sl_next_exp(rn, &it, &v);) {
		/* RFC 5229 5: for :count, empty strings are not counted */
		if (in->match != M_COUNT || v.len > 0)
			vals_add(vs, v.p, v.len);
	}
	return sv_match_values(rn, in, F_SL1, vs->v, vs->n);
}

/* ---- body ------------------------------------------------------------------------------- */

struct body_scan {
	struct sv_run *rn;
	const struct sv_ins *in;
	bool want_text;
	struct vals *vs;
	const char *msg;
	bool take; /* the current leaf's content type is wanted */
	int cte;   /* of the current part: 0 none, 'Q' quoted-printable, 'B' base64 */
	int failed;
};

static bool ctype_wanted(struct body_scan *bs, const struct rfc5322_part *p)
{
	struct sv_sl_iter it;
	const char *s;
	size_t len;
	unsigned fl;

	if (bs->want_text)
		return p->is_text;
	sv_sl_begin(&bs->in->f[F_CONTENT], &it);
	while (sv_sl_next(&it, &s, &len, &fl)) {
		struct sv_str w = sv_expand(bs->rn, s, len, fl);
		const char *slash = memchr(w.p, '/', w.len);
		size_t tlen = slash ? (size_t)(slash - w.p) : w.len;

		if (w.len == 0)
			return true;
		if (p->ctype == NULL)
			continue;
		if (tlen != p->ctype->type.len || strncasecmp(w.p, p->ctype->type.p, tlen) != 0)
			continue;
		if (slash == NULL)
			return true;
		size_t sl = w.len - tlen - 1;
		if (sl == p->ctype->subtype.len &&
		    strncasecmp(slash + 1, p->ctype->subtype.p, sl) == 0)
			return true;
	}
	return false;
}

static void body_part_begin(void *ctx, const struct rfc5322_part *p)
{
	((struct body_scan *)ctx)->cte = 0;
}

static void body_field(void *ctx, const struct rfc5322_part *p, const struct rfc5322_field *f)
{
	struct body_scan *bs = ctx;

	if (!str_caseeq(f->name.p, f->name.len, "Content-Transfer-Encoding", 25))
		return;
	if (str_caseprefix(f->value.p, f->value.len, "quoted-printable"))
		bs->cte = 'Q';
	else if (str_caseprefix(f->value.p, f->value.len, "base64"))
		bs->cte = 'B';
}

static void body_header_end(void *ctx, const struct rfc5322_part *p)
{
	struct body_scan *bs = ctx;

	bs->take = p->kind == RFC5322_LEAF && ctype_wanted(bs, p);
}

static void body_part_end(void *ctx, const struct rfc5322_part *p)
{
	struct body_scan *bs = ctx;

	if (p->kind == RFC5322_LEAF && bs->take && !bs->failed) {
		if (sv_charge(bs->rn, true, p->body_size) < 0) {
			bs->failed = 1;
			return;
		}
		const char *body = bs->msg + p->body_off;
		size_t len = (size_t)p->body_size;

		if (bs->cte) { /* searched decoded (RFC 5173 5) */
			struct buf b;

			buf_init(&b, len + 1, len + 16);
			if (bs->cte == 'Q')
				sv_qp_decode(body, len, false, &b);
			else
				sv_b64_decode(body, len, &b);
			body = sv_strndup(&bs->rn->tmp, b.data ? b.data : "", b.len);
			len = b.len;
			buf_release(&b);
		}
		vals_add(bs->vs, body, len);
	}
	bs->take = false;
}

static int test_body(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	if (in->bodyt == B_RAW) {
		if (sv_charge(rn, true, rn->body_len) < 0)
			return -1;
		vals_add(vs, rn->body ? rn->body : "", rn->body_len);
	} else {
		struct body_scan bs = { rn, in, in->bodyt == B_TEXT, vs, rn->env->msg, false, 0 };
		struct rfc5322_callbacks cb = { .part_begin = body_part_begin,
						.field = body_field,
						.header_end = body_header_end,
						.part_end = body_part_end };
		struct rfc5322_parser *p = rfc5322_parser_new(NULL, &cb, &bs);

		rfc5322_parser_push(p, rn->env->msg, rn->env->msg_len);
		rfc5322_parser_finish(p);
		rfc5322_parser_free(&p);
		if (bs.failed)
			return -1;
	}
	/* body tests only make sense with substring/pattern matches; :count is refused */
	return sv_match_values(rn, in, F_SL0, vs->v, vs->n);
}

/* ---- date ------------------------------------------------------------------------------- */

static bool zone_parse(const char *p, size_t len, int *min_r)
{
	if (len != 5 || (p[0] != '+' && p[0] != '-'))
		return false;
	for (size_t i = 1; i < 5; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	int m = ((p[1] - '0') * 10 + (p[2] - '0')) * 60 + (p[3] - '0') * 10 + (p[4] - '0');
	*min_r = p[0] == '-' ? -m : m;
	return true;
}

static void date_part(struct sv_run *rn, struct vals *vs, int64_t t, int zone, const char *part,
		      size_t plen)
{
	static const char *const wd[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char *const mo[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t lt = (time_t)(t + (int64_t)zone * 60);
	struct tm tm;
	char *s = sv_alloc(&rn->tmp, 64);
	int az = zone < 0 ? -zone : zone;
	char sign = zone < 0 ? '-' : '+';

	gmtime_r(&lt, &tm);
#define P(name) (plen == strlen(name) && strncasecmp(part, name, plen) == 0)
	if (P("year"))
		snprintf(s, 64, "%04d", tm.tm_year + 1900);
	else if (P("month"))
		snprintf(s, 64, "%02d", tm.tm_mon + 1);
	else if (P("day"))
		snprintf(s, 64, "%02d", tm.tm_mday);
	else if (P("date"))
		snprintf(s, 64, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	else if (P("julian")) /* Modified Julian Day: days since 1858-11-17 */
		snprintf(s, 64, "%lld", (long long)((lt >= 0 ? lt : lt - 86399) / 86400 + 40587));
	else if (P("hour"))
		snprintf(s, 64, "%02d", tm.tm_hour);
	else if (P("minute"))
		snprintf(s, 64, "%02d", tm.tm_min);
	else if (P("second"))
		snprintf(s, 64, "%02d", tm.tm_sec);
	else if (P("time"))
		snprintf(s, 64, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
	else if (P("iso8601"))
		snprintf(s, 64, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, sign,
			 az / 60, az % 60);
	else if (P("std11"))
		snprintf(s, 64, "%s, %02d %s %04d %02d:%02d:%02d %c%02d%02d", wd[tm.tm_wday],
			 tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, sign, az / 60, az % 60);
	else if (P("zone"))
		snprintf(s, 64, "%c%02d%02d", sign, az / 60, az % 60);
	else if (P("weekday"))
		snprintf(s, 64, "%d", tm.tm_wday);
	else
		return;
#undef P
	vals_add(vs, s, strlen(s));
}

struct date_ctx {
	struct vals *vs;
	const struct sv_ins *in;
	struct sv_str part;
	int zone;
	bool zone_given;
};

static void hdr_date_cb(struct sv_run *rn, size_t i, void *arg)
{
	struct date_ctx *dc = arg;
	struct sv_str v = sv_hdr_value(rn, i);
	const char *semi = memrchr(v.p, ';', v.len); /* Received: ...; date */
	int64_t t;
	int tz;

	if (semi != NULL && rn->h[i].nlen == 8 && strncasecmp(rn->h[i].name, "Received", 8) == 0)
		v = (struct sv_str){ semi + 1, v.len - (size_t)(semi - v.p) - 1 };
	if (rfc5322_date_parse_tz(v.p, v.len, &t, &tz) < 0)
		return;
	date_part(rn, dc->vs, t, dc->in->zonekind == Z_ORIGINAL ? tz : dc->zone, dc->part.p,
		  dc->part.len);
}

static int test_date(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	struct date_ctx dc = { vs, in, { NULL, 0 }, rn->env->zone_min, false };
	bool current = in->op == OP_CURRENTDATE;

	if (in->zonekind == Z_ZONE) {
		struct sv_str z = (struct sv_str){ NULL, 0 };
		struct sv_sl_iter it;
		const char *s;
		size_t len;
		unsigned fl;

		sv_sl_begin(&in->f[F_ZONE], &it);
		if (sv_sl_next(&it, &s, &len, &fl))
			z = sv_expand(rn, s, len, fl);
		if (!zone_parse(z.p, z.len, &dc.zone))
			return 0; /* RFC 5260 4: an invalid zone makes the test false */
	}
	struct sv_sl_iter it;
	const char *s;
	size_t len;
	unsigned fl;

	sv_sl_begin(&in->f[current ? F_SL0 : F_SL1], &it);
	sv_sl_next(&it, &s, &len, &fl);
	dc.part = sv_expand(rn, s, len, fl);
	if (current)
		date_part(rn, vs, rn->env->now, dc.zone, dc.part.p, dc.part.len);
	else if (for_headers(rn, in, &in->f[F_SL0], hdr_date_cb, &dc) < 0)
		return -1;
	return sv_match_values(rn, in, current ? F_SL1 : F_SL2, vs->v, vs->n);
}

/* ---- the rest ------------------------------------------------------------------------------ */

static int test_mailboxexists(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_sl_iter it;

	sv_sl_begin(&in->f[F_SL0], &it);
	for (struct sv_str name; sv_sl_next_exp(rn, &it, &name);) {
		char *n = sv_strndup(&rn->tmp, name.p, name.len);

		if (rn->env->mailbox_exists == NULL || !rn->env->mailbox_exists(rn->env->ctx, n))
			return 0;
	}
	return 1;
}

static int test_duplicate(struct sv_run *rn, const struct sv_ins *in)
{
	struct sv_str id = { NULL, 0 }, handle = { "", 0 };
	struct sv_sl_iter it;
	const char *s;
	size_t len;
	unsigned fl;
	char *key;
	bool seen;

	if (in->f[F_UNIQUEID].p != NULL) {
		sv_sl_begin(&in->f[F_UNIQUEID], &it);
		sv_sl_next(&it, &s, &len, &fl);
		id = sv_expand(rn, s, len, fl);
	} else {
		struct sv_str name = { "Message-ID", 10 };

		if (in->f[F_HEADER].p != NULL) {
			sv_sl_begin(&in->f[F_HEADER], &it);
			sv_sl_next(&it, &s, &len, &fl);
			name = sv_expand(rn, s, len, fl);
		}
		for (size_t i = 0; i < rn->nh && id.p == NULL; i++)
			if (!rn->h[i].deleted && rn->h[i].nlen == name.len &&
			    strncasecmp(rn->h[i].name, name.p, name.len) == 0)
				id = sv_hdr_value(rn, i);
		if (id.p == NULL)
			return 0; /* RFC 7352 3.1: no header, no duplicate */
	}
	if (in->f[F_HANDLE].p != NULL) {
		sv_sl_begin(&in->f[F_HANDLE], &it);
		sv_sl_next(&it, &s, &len, &fl);
		handle = sv_expand(rn, s, len, fl);
	}
	key = xasprintf("%.*s\x1f%.*s", (int)(handle.len > 200 ? 200 : handle.len), handle.p,
			(int)(id.len > 1000 ? 1000 : id.len), id.p);
	seen = rn->env->duplicate_seen != NULL && rn->env->duplicate_seen(rn->env->ctx, key);
	/* the id is remembered once the message is delivered; :last refreshes the period */
	if (!seen || (in->flags & I_LAST))
		sv_dup_mark(rn, key, (in->flags & I_SECONDS) ? in->num : 7 * 86400);
	free(key);
	return seen ? 1 : 0;
}

static int test_spam(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	bool virus = in->op == OP_VIRUSTEST;
	const char *hname = virus ? rn->env->virus_header : rn->env->spam_header;
	char *out = sv_alloc(&rn->tmp, 16);
	struct sv_str v = { NULL, 0 };

	for (int pass = 0; pass < 2 && v.p == NULL; pass++) {
		/* no spam_header: rspamd's field first, as the milter removes a sender's copy of
		   it, so a forged "X-Spam-Score: 0" cannot speak for a message rspamd scored */
		const char *name = hname != NULL ? hname
				   : virus       ? "X-Virus-Scan"
				   : pass == 0   ? "X-Spamd-Result"
						 : "X-Spam-Score";

		for (size_t i = 0; i < rn->nh && v.p == NULL; i++)
			if (!rn->h[i].deleted && rn->h[i].nlen == strlen(name) &&
			    strncasecmp(rn->h[i].name, name, rn->h[i].nlen) == 0)
				v = sv_hdr_value(rn, i);
		if (hname != NULL || virus)
			break;
	}
	if (v.p == NULL) {
		strcpy(out, "0"); /* not tested */
	} else if (virus) {
		bool clean = v.len >= 5 && strncasecmp(v.p, "clean", 5) == 0;
		bool infected = str_casefind(v.p, v.len, "infected", 8) != NULL;

		strcpy(out, clean ? "1" : infected ? "5" : "2");
	} else {
		char num[32];
		size_t n = v.len < sizeof(num) - 1 ? v.len : sizeof(num) - 1;
		double max = rn->env->spam_max > 0 ? rn->env->spam_max : 15.0, score;

		/* a bare score (X-Spam-Score: 9.5) or rspamd's "default: True [9.50 / 15.00]"
		   (X-Spamd-Result), whose second figure is the reject threshold */
		const char *lb = memchr(v.p, '[', v.len);

		if (lb != NULL) {
			size_t off = (size_t)(lb - v.p) + 1;

			n = v.len - off < sizeof(num) - 1 ? v.len - off : sizeof(num) - 1;
			memcpy(num, v.p + off, n);
		} else {
			memcpy(num, v.p, n);
		}
		num[n] = '\0';
		char *end;
		score = strtod(num, &end);
		const char *slash = lb != NULL ? strchr(end, '/') : NULL;
		if (slash != NULL && strtod(slash + 1, NULL) > 0)
			max = strtod(slash + 1, NULL);
		if (in->flags & I_PERCENT) {
			double pct = score <= 0 ? 0 : score >= max ? 100 : 100.0 * score / max;

			snprintf(out, 16, "%d", (int)lround(pct));
		} else {
			int lvl = score <= 0     ? 1
				  : score >= max ? 10
						 : 1 + (int)lround(9.0 * score / max);
			snprintf(out, 16, "%d", lvl);
		}
	}
	vals_add(vs, out, strlen(out));
	return sv_match_values(rn, in, F_SL0, vs->v, vs->n);
}

static int test_hasflag(struct sv_run *rn, const struct sv_ins *in, struct vals *vs)
{
	size_t cap = 0;

	if (in->f[F_SL0].p == NULL) {
		if (rn->flags)
			sv_flag_words(rn, rn->flags, strlen(rn->flags), &vs->v, &vs->n, &cap);
	} else {
		struct sv_sl_iter it;
		const char *s;
		size_t len;
		unsigned fl;

		sv_sl_begin(&in->f[F_SL0], &it);
		while (sv_sl_next(&it, &s, &len, &fl)) {
			char *ref = xasprintf("${%.*s}", (int)len, s);
			struct sv_str v = sv_expand(rn, ref, strlen(ref), SV_STR_VARS);

			free(ref);
			sv_flag_words(rn, v.p, v.len, &vs->v, &vs->n, &cap);
		}
	}
	vs->cap = cap;
	return sv_match_values(rn, in, F_SL1, vs->v, vs->n);
}

int sv_test(struct sv_run *rn, const struct sv_ins *in)
{
	struct vals vs = { .rn = rn,
			   .part = in->part,
			   .sep = rn->env->subaddress_sep ? rn->env->subaddress_sep : '+' };

	switch (in->op) {
	case OP_TRUE:
		return 1;
	case OP_FALSE:
		return 0;
	case OP_HEADER:
		if (for_headers(rn, in, &in->f[F_SL0], hdr_value_cb, &vs) < 0)
			return -1;
		return sv_match_values(rn, in, F_SL1, vs.v, vs.n);
	case OP_ADDRESS:
		if (for_headers(rn, in, &in->f[F_SL0], hdr_addr_cb, &vs) < 0)
			return -1;
		return sv_match_values(rn, in, F_SL1, vs.v, vs.n);
	case OP_ENVELOPE:
		return test_envelope(rn, in, &vs);
	case OP_EXISTS:
		return test_exists(rn, in);
	case OP_SIZE:
		return (in->flags & I_OVER) ? rn->env->msg_len > (uint64_t)in->num
					    : rn->env->msg_len < (uint64_t)in->num;
	case OP_BODY:
		return test_body(rn, in, &vs);
	case OP_STRING:
		return test_string(rn, in, &vs);
	case OP_DATE:
	case OP_CURRENTDATE:
		return test_date(rn, in, &vs);
	case OP_MAILBOXEXISTS:
		return test_mailboxexists(rn, in);
	case OP_DUPLICATE:
		return test_duplicate(rn, in);
	case OP_SPAMTEST:
	case OP_VIRUSTEST:
		return test_spam(rn, in, &vs);
	case OP_HASFLAG:
		return test_hasflag(rn, in, &vs);
	}
	return sv_run_fail(rn, "corrupt program (test %u)", in->op);
}

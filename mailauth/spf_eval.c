/* spf_eval.c — check_host() (RFC 7208 4) as a state machine over asynchronous lookups: a
 * stack of frames (the checked domain, then each include or redirect), one DNS query out at
 * a time, the lookup, void and name limits counted across the whole evaluation. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/spf.h"

enum wait {
	W_NONE,
	W_TXT,      /* the frame's record */
	W_ADDR,     /* a/exists: addresses of a name */
	W_MX,       /* mx: the MX names */
	W_MX_ADDR,  /* mx: addresses of names[ni] */
	W_PTR,      /* ptr: the client's names */
	W_PTR_ADDR, /* ptr: addresses of names[ni] */
	W_EXP,      /* the explanation's TXT */
	W_P,        /* %{p}: the client's names */
	W_P_ADDR,   /* %{p}: addresses of names[ni] */
};

struct frame {
	char domain[DNS_NAME_MAX + 1];
	struct spf_record rec;
	bool have_rec;
	bool in_include;               /* an include's (its fail is a non-match, no explanation) */
	bool redirecting;              /* waiting for the redirect target's result */
	size_t idx;                    /* the term being evaluated */
	char target[DNS_NAME_MAX + 1]; /* the current term's domain, expanded */
	char names[SPF_NAMES_MAX][DNS_NAME_MAX + 1];
	size_t nnames, ni;
};

struct spf {
	struct ma_resolver r;
	struct spf_request rq;
	char sender[DNS_NAME_MAX + 70], helo[DNS_NAME_MAX + 1], receiver[DNS_NAME_MAX + 1];
	struct frame f[SPF_DEPTH_MAX];
	size_t depth;
	enum wait wait;
	void *q;
	char p_name[DNS_NAME_MAX + 1];
	bool p_done;
	enum wait p_resume; /* what asked for %{p}: the term (W_NONE, W_PTR) or the exp */
	char *exp_text;     /* an explanation TXT waiting for %{p} */
	struct spf_verdict v;
	bool finished;
	void (*done)(const struct spf_verdict *v, void *arg);
	void *arg;
};

static void frame_done(struct spf *s, enum ma_result r);
static void exp_text_done(struct spf *s);

static struct frame *top(struct spf *s)
{
	return &s->f[s->depth - 1];
}

static void finish(struct spf *s, enum ma_result r, const char *problem)
{
	s->v.result = r;
	if (problem != NULL && s->v.problem == NULL)
		s->v.problem = problem;
	s->finished = true;
	while (s->depth > 0) {
		spf_record_release(&top(s)->rec);
		s->depth--;
	}
}

static void answer_cb(const struct dns_answer *a, void *arg);

static void lookup(struct spf *s, enum wait w, const char *name, enum dns_type type)
{
	if (++s->v.queries > SPF_QUERY_MAX) {
		finish(s, MA_PERMERROR, "too many DNS queries");
		return;
	}
	s->wait = w;
	s->q = s->r.lookup(s->r.ctx, name, type, answer_cb, s);
}

static enum dns_type addr_type(const struct spf *s)
{
	return s->rq.ip.family == AF_INET ? DNS_T_A : DNS_T_AAAA;
}

/* A domain name valid for a query after expansion: the left labels dropped past 253 bytes
   (7.3). -1 for an empty label or one over 63 bytes. */
static int fit_name(char *name)
{
	size_t len = strlen(name);

	while (len > 0 && name[len - 1] == '.')
		name[--len] = '\0';
	while (len > DNS_NAME_MAX) {
		char *dot = strchr(name, '.');
		if (dot == NULL)
			return -1;
		memmove(name, dot + 1, strlen(dot + 1) + 1);
		len = strlen(name);
	}
	size_t lab = 0;
	for (size_t i = 0; i <= len; i++) {
		if (name[i] == '.' || name[i] == '\0') {
			if (lab == 0 || lab > 63)
				return -1;
			lab = 0;
		} else {
			lab++;
		}
	}
	return 0;
}

static bool needs_p(const char *spec)
{
	for (const char *p = spec; p && (p = strchr(p, '%')) != NULL; p += 2) {
		if (p[1] == '%') {
			p++;
			continue;
		}
		if (p[1] == '{' && (p[2] == 'p' || p[2] == 'P'))
			return true;
		if (p[1] == '\0')
			break;
	}
	return false;
}

static void start_p(struct spf *s, enum wait resume)
{
	char name[80];
	const unsigned char *a = s->rq.ip.a;
	size_t k = 0;

	s->p_resume = resume;
	if (s->rq.ip.family == AF_INET) {
		snprintf(name, sizeof(name), "%u.%u.%u.%u.in-addr.arpa", a[3], a[2], a[1], a[0]);
	} else {
		for (int b = 15; b >= 0; b--)
			k += (size_t)snprintf(name + k, sizeof(name) - k, "%x.%x.", a[b] & 15,
					      a[b] >> 4);
		snprintf(name + k, sizeof(name) - k, "ip6.arpa");
	}
	top(s)->nnames = top(s)->ni = 0;
	lookup(s, W_P, name, DNS_T_PTR);
}

/* Expands spec (NULL: the current domain) into the frame's target: 1 ready, 0 waiting for
   %{p}, -1 finished with an error. */
static int expand_target(struct spf *s, const char *spec, enum wait resume)
{
	struct frame *f = top(s);

	if (spec == NULL) {
		str_lcpy(f->target, f->domain, sizeof(f->target));
		return 1;
	}
	if (needs_p(spec) && !s->p_done) {
		start_p(s, resume);
		return 0;
	}
	char out[2048];
	if (spf_expand(spec, &s->rq, f->domain, s->p_name, false, out, sizeof(out)) < 0) {
		finish(s, MA_PERMERROR, "bad macro");
		return -1;
	}
	if (fit_name(out) < 0) {
		/* an expansion that is no domain name matches nothing (like NXDOMAIN) */
		f->target[0] = '\0';
		return 1;
	}
	str_lcpy(f->target, out, sizeof(f->target));
	return 1;
}

static bool ip_in(const struct spf_ip *ip, const unsigned char *net, int family, int bits)
{
	if (ip->family != family)
		return false;
	int full = bits / 8, rest = bits % 8;
	if (memcmp(ip->a, net, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (ip->a[full] & mask) == (net[full] & mask);
}

static bool answer_matches(const struct spf *s, const struct dns_answer *a, int c4, int c6)
{
	for (size_t i = 0; a->status == DNS_OK && i < a->n; i++) {
		if (a->rr[i].type == DNS_T_A &&
		    ip_in(&s->rq.ip, (const void *)&a->rr[i].u.a, AF_INET, c4))
			return true;
		if (a->rr[i].type == DNS_T_AAAA &&
		    ip_in(&s->rq.ip, (const void *)&a->rr[i].u.aaaa, AF_INET6, c6))
			return true;
	}
	return false;
}

static bool count_lookup(struct spf *s)
{
	if (++s->v.lookups > SPF_LOOKUP_MAX) {
		finish(s, MA_PERMERROR, "too many DNS lookups");
		return false;
	}
	return true;
}

/* A void lookup (4.6.4): false when that was one too many (finished). */
static bool count_void(struct spf *s, const struct dns_answer *a)
{
	if ((a->status == DNS_NXDOMAIN || a->status == DNS_NODATA) &&
	    ++s->v.voids > SPF_VOID_MAX) {
		finish(s, MA_PERMERROR, "too many void lookups");
		return false;
	}
	return true;
}

static void term_name(struct spf *s, const struct spf_term *t)
{
	static const char *const names[] = { "all", "include", "a",   "mx",
					     "ptr", "ip4",     "ip6", "exists" };
	const char q = t->qual == MA_FAIL       ? '-'
		       : t->qual == MA_SOFTFAIL ? '~'
		       : t->qual == MA_NEUTRAL  ? '?'
						: '+';

	snprintf(s->v.mechanism, sizeof(s->v.mechanism), "%c%s%s%.80s", q, names[t->mech],
		 t->domain ? ":" : "", t->domain ? t->domain : "");
}

static void matched(struct spf *s)
{
	struct frame *f = top(s);

	term_name(s, &f->rec.t[f->idx]);
	frame_done(s, f->rec.t[f->idx].qual);
}

static void next_term(struct spf *s)
{
	top(s)->idx++;
	s->wait = W_NONE;
}

static void push(struct spf *s, const char *domain, bool in_include)
{
	if (s->depth == SPF_DEPTH_MAX) {
		finish(s, MA_PERMERROR, "too deeply nested");
		return;
	}
	struct frame *f = &s->f[s->depth++];
	memset(f, 0, sizeof(*f));
	str_lcpy(f->domain, domain, sizeof(f->domain));
	f->in_include = in_include;
	if (domain[0] == '\0') {
		frame_done(s, MA_NONE); /* not a domain name: no record */
		return;
	}
	lookup(s, W_TXT, domain, DNS_T_TXT);
}

/* Evaluates the top frame's terms until one needs a lookup or the frame ends. */
static void eval(struct spf *s)
{
	while (!s->finished && s->wait == W_NONE) {
		struct frame *f = top(s);

		if (f->idx == f->rec.n) {
			if (f->rec.redirect == NULL) {
				frame_done(s, MA_NEUTRAL);
				return;
			}
			if (f->redirecting)
				return;
			if (expand_target(s, f->rec.redirect, W_NONE) <= 0 || !count_lookup(s))
				return;
			f->redirecting = true;
			push(s, f->target, f->in_include);
			return;
		}
		const struct spf_term *t = &f->rec.t[f->idx];
		switch (t->mech) {
		case SPF_ALL:
			matched(s);
			return;
		case SPF_IP4:
		case SPF_IP6:
			if (ip_in(&s->rq.ip, t->ip.a, t->ip.family,
				  t->mech == SPF_IP4 ? t->cidr4 : t->cidr6)) {
				matched(s);
				return;
			}
			f->idx++;
			continue;
		default:
			break;
		}
		if (expand_target(s, t->domain, W_NONE) <= 0 || !count_lookup(s))
			return;
		if (f->target[0] == '\0') {
			/* an expansion that is no name: a void lookup that asked nothing */
			struct dns_answer none = { .status = DNS_NXDOMAIN };
			if (t->mech == SPF_INCLUDE) {
				finish(s, MA_PERMERROR, "include of no domain");
				return;
			}
			if (!count_void(s, &none))
				return;
			f->idx++;
			continue;
		}
		switch (t->mech) {
		case SPF_INCLUDE:
			push(s, f->target, true);
			return;
		case SPF_A:
			lookup(s, W_ADDR, f->target, addr_type(s));
			return;
		case SPF_EXISTS:
			lookup(s, W_ADDR, f->target, DNS_T_A);
			return;
		case SPF_MX:
			lookup(s, W_MX, f->target, DNS_T_MX);
			return;
		case SPF_PTR:
			start_p(s, W_PTR);
			return;
		default:
			return;
		}
	}
}

/* Looks the addresses of names[ni] up, or ends the term without a match. */
static void next_name(struct spf *s, enum wait w)
{
	struct frame *f = top(s);

	if (f->ni < f->nnames) {
		lookup(s, w, f->names[f->ni], addr_type(s));
		return;
	}
	if (w == W_P_ADDR) {
		s->p_done = true;
		if (s->p_name[0] == '\0')
			str_lcpy(s->p_name, "unknown", sizeof(s->p_name));
		s->wait = W_NONE;
		if (s->p_resume == W_EXP && s->exp_text != NULL)
			exp_text_done(s);
		else if (s->p_resume == W_EXP)
			frame_done(s, MA_FAIL);
		else
			eval(s);
		return;
	}
	next_term(s);
	eval(s);
}

static void on_txt(struct spf *s, const struct dns_answer *a)
{
	struct frame *f = top(s);
	const char *err = NULL;
	size_t found = 0, which = 0;

	if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
		finish(s, MA_TEMPERROR, "DNS lookup failed");
		return;
	}
	for (size_t i = 0; a->status == DNS_OK && i < a->n; i++) {
		if (a->rr[i].type == DNS_T_TXT &&
		    spf_is_record(a->rr[i].u.txt.text, a->rr[i].u.txt.len)) {
			found++;
			which = i;
		}
	}
	if (found > 1) {
		finish(s, MA_PERMERROR, "more than one SPF record");
		return;
	}
	if (found == 0) {
		frame_done(s, MA_NONE);
		return;
	}
	if (spf_record_parse(a->rr[which].u.txt.text, a->rr[which].u.txt.len, &f->rec, &err) < 0) {
		spf_record_release(&f->rec);
		finish(s, MA_PERMERROR, err);
		return;
	}
	f->have_rec = true;
	s->wait = W_NONE;
	eval(s);
}

static void on_names(struct spf *s, const struct dns_answer *a, bool mx)
{
	struct frame *f = top(s);

	f->nnames = f->ni = 0;
	for (size_t i = 0; a->status == DNS_OK && i < a->n; i++) {
		const char *n = mx ? (a->rr[i].type == DNS_T_MX ? a->rr[i].u.mx.host : NULL)
				   : (a->rr[i].type == DNS_T_PTR ? a->rr[i].u.ptr : NULL);

		if (n == NULL || n[0] == '\0')
			continue;
		if (f->nnames == SPF_NAMES_MAX) {
			if (mx) {
				finish(s, MA_PERMERROR, "more than 10 MX names");
				return;
			}
			break; /* ptr, %{p}: the rest ignored */
		}
		str_lcpy(f->names[f->nnames++], n, sizeof(f->names[0]));
	}
}

static void on_addr_of_name(struct spf *s, const struct dns_answer *a, enum wait w)
{
	struct frame *f = top(s);
	const struct spf_term *t = w == W_MX_ADDR ? &f->rec.t[f->idx] : NULL;
	bool hit = answer_matches(s, a, t ? t->cidr4 : 32, t ? t->cidr6 : 128);

	if (a->status == DNS_ETEMP && w == W_MX_ADDR) {
		finish(s, MA_TEMPERROR, "DNS lookup failed");
		return;
	}
	if (hit && w == W_MX_ADDR) {
		matched(s);
		return;
	}
	if (hit && w == W_PTR_ADDR && ma_domain_under(f->names[f->ni], f->target)) {
		matched(s);
		return;
	}
	if (hit && w == W_P_ADDR && s->p_name[0] == '\0')
		str_lcpy(s->p_name, f->names[f->ni], sizeof(s->p_name));
	f->ni++;
	next_name(s, w);
}

/* The explanation text (s->exp_text) expanded; the frame's fail goes on. */
static void exp_text_done(struct spf *s)
{
	struct frame *f = top(s);
	char text[SPF_EXP_MAX];

	if (spf_expand(s->exp_text, &s->rq, f->domain, s->p_name, true, text, sizeof(text)) == 0)
		str_lcpy(s->v.explanation, text, sizeof(s->v.explanation));
	free(s->exp_text);
	s->exp_text = NULL;
	free(f->rec.exp); /* looked at: done */
	f->rec.exp = NULL;
	s->wait = W_NONE;
	frame_done(s, MA_FAIL);
}

static void on_exp(struct spf *s, const struct dns_answer *a)
{
	struct frame *f = top(s);

	if (a->status == DNS_OK && a->n == 1 && a->rr[0].type == DNS_T_TXT &&
	    memchr(a->rr[0].u.txt.text, '\0', a->rr[0].u.txt.len) == NULL) {
		s->exp_text = xstrdup(a->rr[0].u.txt.text);
		if (needs_p(s->exp_text) && !s->p_done) {
			start_p(s, W_EXP);
			return;
		}
		exp_text_done(s);
		return;
	}
	free(f->rec.exp);
	f->rec.exp = NULL;
	s->wait = W_NONE;
	frame_done(s, MA_FAIL);
}

static void answer_cb(const struct dns_answer *a, void *arg)
{
	struct spf *s = arg;
	enum wait w = s->wait;
	struct frame *f = top(s);

	s->q = NULL;
	s->wait = W_NONE;
	switch (w) {
	case W_TXT:
		on_txt(s, a);
		break;
	case W_ADDR:
		if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
			finish(s, MA_TEMPERROR, "DNS lookup failed");
			break;
		}
		if (!count_void(s, a))
			break;
		if (f->rec.t[f->idx].mech == SPF_EXISTS
			    ? a->status == DNS_OK && a->n > 0
			    : answer_matches(s, a, f->rec.t[f->idx].cidr4,
					     f->rec.t[f->idx].cidr6)) {
			matched(s);
			break;
		}
		next_term(s);
		eval(s);
		break;
	case W_MX:
		if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
			finish(s, MA_TEMPERROR, "DNS lookup failed");
			break;
		}
		if (!count_void(s, a))
			break;
		on_names(s, a, true);
		if (!s->finished)
			next_name(s, W_MX_ADDR);
		break;
	case W_P:
		if (s->p_resume == W_PTR) {
			if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
				finish(s, MA_TEMPERROR, "DNS lookup failed");
				break;
			}
			if (!count_void(s, a))
				break;
			on_names(s, a, false);
			next_name(s, W_PTR_ADDR);
			break;
		}
		on_names(s, a, false);
		next_name(s, W_P_ADDR);
		break;
	case W_MX_ADDR:
	case W_PTR_ADDR:
	case W_P_ADDR:
		on_addr_of_name(s, a, w);
		break;
	case W_EXP:
		on_exp(s, a);
		break;
	default:
		break;
	}
	if (s->finished && s->done != NULL) {
		void (*done)(const struct spf_verdict *, void *) = s->done;
		s->done = NULL;
		done(&s->v, s->arg);
	}
}

/* The top frame ended with r: an explanation fetched for a fail, then the parent goes on. */
static void frame_done(struct spf *s, enum ma_result r)
{
	struct frame *f = top(s);

	if (r == MA_FAIL && !f->in_include && !f->redirecting && f->rec.exp != NULL &&
	    s->v.explanation[0] == '\0') {
		char out[2048];

		if (needs_p(f->rec.exp) && !s->p_done) {
			start_p(s, W_EXP);
			return;
		}
		if (spf_expand(f->rec.exp, &s->rq, f->domain, s->p_name, false, out,
			       sizeof(out)) == 0 &&
		    fit_name(out) == 0) {
			lookup(s, W_EXP, out, DNS_T_TXT);
			return;
		}
	}
	spf_record_release(&f->rec);
	s->depth--;
	if (s->depth == 0) {
		finish(s, r, NULL);
		return;
	}
	struct frame *p = top(s);
	s->wait = W_NONE;
	if (p->redirecting) {
		/* the redirect target's result is the frame's; no record there: permerror */
		if (r == MA_NONE) {
			finish(s, MA_PERMERROR, "redirect to a domain without SPF record");
			return;
		}
		frame_done(s, r);
		return;
	}
	/* an include (5.2) */
	switch (r) {
	case MA_PASS:
		matched(s);
		return;
	case MA_TEMPERROR:
		finish(s, MA_TEMPERROR, NULL);
		return;
	case MA_PERMERROR:
	case MA_NONE:
		finish(s, MA_PERMERROR,
		       r == MA_NONE ? "include of a domain without SPF record" : NULL);
		return;
	default:
		s->v.explanation[0] = '\0';
		next_term(s);
		eval(s);
	}
}

int spf_check(const struct ma_resolver *r, const struct spf_request *rq,
	      void (*done)(const struct spf_verdict *v, void *arg), void *arg, struct spf **sp,
	      struct spf_verdict *v)
{
	struct spf *s = xcalloc(1, sizeof(*s));
	char domain[DNS_NAME_MAX + 2];

	*sp = NULL;
	s->r = *r;
	s->rq = *rq;
	str_lcpy(s->sender, rq->sender ? rq->sender : "", sizeof(s->sender));
	str_lcpy(s->helo, rq->helo ? rq->helo : "", sizeof(s->helo));
	str_lcpy(s->receiver, rq->receiver ? rq->receiver : "", sizeof(s->receiver));
	s->rq.sender = s->sender;
	s->rq.helo = s->helo;
	s->rq.receiver = s->receiver;
	/* 4.3: a malformed or single-label domain has no SPF */
	if (rq->domain == NULL || strlen(rq->domain) > DNS_NAME_MAX ||
	    str_lcpy(domain, rq->domain, sizeof(domain)) >= sizeof(domain) ||
	    fit_name(domain) < 0 || strchr(domain, '.') == NULL || !dns_name_valid(domain)) {
		memset(v, 0, sizeof(*v));
		v->result = MA_NONE;
		free(s);
		return 1;
	}
	str_lower(domain, strlen(domain));
	push(s, domain, false);
	if (s->finished) {
		*v = s->v;
		free(s);
		return 1;
	}
	s->done = done;
	s->arg = arg;
	*sp = s;
	return 0;
}

void spf_free(struct spf **sp)
{
	struct spf *s = *sp;

	if (s == NULL)
		return;
	if (s->q != NULL)
		s->r.cancel(s->r.ctx, s->q);
	free(s->exp_text);
	while (s->depth > 0) {
		spf_record_release(&top(s)->rec);
		s->depth--;
	}
	free(s);
	*sp = NULL;
}

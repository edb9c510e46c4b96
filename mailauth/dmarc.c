/* dmarc.c — DMARC policy discovery and evaluation (RFC 7489 6.6): at most two TXT lookups,
 * alignment of the results the caller already has, pct applied by the caller's sample. */
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/dmarc.h"

struct dmarc {
	struct ma_resolver r;
	struct dmarc_input in;
	struct dkim_result *dkim;
	char from[DNS_NAME_MAX + 1], org[DNS_NAME_MAX + 1], spf_domain[DNS_NAME_MAX + 1];
	bool at_org;
	void *q;
	struct dmarc_verdict v;
	void (*done)(const struct dmarc_verdict *v, void *arg);
	void *arg;
};

const char *dmarc_policy_str(enum dmarc_policy p)
{
	return p == DMARC_P_REJECT ? "reject" : p == DMARC_P_QUARANTINE ? "quarantine" : "none";
}

static int policy_of(const struct dkim_tag *t, enum dmarc_policy *p)
{
	if (str_caseeq(t->val, t->vlen, "none", 4))
		*p = DMARC_P_NONE;
	else if (str_caseeq(t->val, t->vlen, "quarantine", 10))
		*p = DMARC_P_QUARANTINE;
	else if (str_caseeq(t->val, t->vlen, "reject", 6))
		*p = DMARC_P_REJECT;
	else
		return -1;
	return 0;
}

int dmarc_record_parse(const char *txt, size_t len, struct dmarc_record *r, const char **err)
{
	struct dkim_tag tags[DKIM_TAGS_MAX];
	const struct dkim_tag *t;
	size_t n;
	uint64_t pct;

	memset(r, 0, sizeof(*r));
	r->pct = 100;
	if (len < 8 || !str_caseprefix(txt, len, "v=DMARC1")) {
		*err = "not a DMARC record";
		return -1;
	}
	if (dkim_tags_parse(txt, len, tags, DKIM_TAGS_MAX, &n, err) < 0)
		return -1;
	if (n == 0 || !str_caseeq(tags[0].val, tags[0].vlen, "DMARC1", 6)) {
		*err = "not a DMARC record";
		return -1;
	}
	if ((t = dkim_tag_find(tags, n, "p")) == NULL) {
		/* 6.6.3: without p=, a record with rua= means p=none; else it is not valid */
		if (dkim_tag_find(tags, n, "rua") == NULL) {
			*err = "no p=";
			return -1;
		}
	} else if (policy_of(t, &r->p) < 0) {
		*err = "bad p=";
		return -1;
	}
	r->sp = r->p;
	if ((t = dkim_tag_find(tags, n, "sp")) != NULL && policy_of(t, &r->sp) == 0)
		r->has_sp = true;
	if ((t = dkim_tag_find(tags, n, "adkim")) != NULL)
		r->adkim_strict = str_caseeq(t->val, t->vlen, "s", 1);
	if ((t = dkim_tag_find(tags, n, "aspf")) != NULL)
		r->aspf_strict = str_caseeq(t->val, t->vlen, "s", 1);
	if ((t = dkim_tag_find(tags, n, "pct")) != NULL && t->vlen > 0 && t->vlen <= 3 &&
	    strspn(t->val, "0123456789") >= t->vlen && str_to_u64(t->val, t->vlen, 100, &pct) == 0)
		r->pct = (unsigned)pct;
	return 0;
}

static bool aligned(const struct dmarc *d, const char *domain, bool strict)
{
	char org[DNS_NAME_MAX + 1];

	if (domain == NULL || domain[0] == '\0')
		return false;
	if (strcasecmp(domain, d->from) == 0)
		return true;
	if (strict)
		return false;
	psl_org_domain(d->in.psl, domain, org, sizeof(org));
	return strcasecmp(org, d->org) == 0;
}

static void evaluate(struct dmarc *d, const struct dmarc_record *rec)
{
	struct dmarc_verdict *v = &d->v;

	v->spf_aligned = d->in.spf == MA_PASS && aligned(d, d->spf_domain, rec->aspf_strict);
	for (size_t i = 0; i < d->in.ndkim && !v->dkim_aligned; i++)
		v->dkim_aligned = d->dkim[i].result == MA_PASS &&
				  aligned(d, d->dkim[i].d, rec->adkim_strict);
	v->policy = d->at_org ? rec->sp : rec->p;
	if (v->spf_aligned || v->dkim_aligned) {
		v->result = MA_PASS;
		v->action = DMARC_P_NONE;
		return;
	}
	v->result = MA_FAIL;
	v->action = v->policy;
	if (d->in.sample >= rec->pct && v->action != DMARC_P_NONE)
		v->action = v->action == DMARC_P_REJECT ? DMARC_P_QUARANTINE : DMARC_P_NONE;
}

static void lookup(struct dmarc *d, const char *domain);

/* 1 when the verdict is set (a record found, or none anywhere), 0 when a lookup went out. */
static int on_answer(struct dmarc *d, const struct dns_answer *a)
{
	struct dmarc_record rec, found;
	size_t valid = 0;
	const char *err;

	if (a->status == DNS_ETEMP || a->status == DNS_EBOGUS) {
		d->v.result = MA_TEMPERROR;
		d->v.reason = "DNS lookup failed";
		return 1;
	}
	for (size_t i = 0; a->status == DNS_OK && i < a->n; i++)
		if (a->rr[i].type == DNS_T_TXT &&
		    dmarc_record_parse(a->rr[i].u.txt.text, a->rr[i].u.txt.len, &rec, &err) == 0) {
			found = rec;
			valid++;
		}
	if (valid == 1) {
		evaluate(d, &found);
		return 1;
	}
	/* none or several valid records here: the organizational domain's, once */
	if (!d->at_org && strcmp(d->org, d->from) != 0) {
		d->at_org = true;
		lookup(d, d->org);
		return 0;
	}
	d->v.result = MA_NONE;
	d->v.reason = valid > 1 ? "more than one DMARC record" : NULL;
	return 1;
}

static void answer_cb(const struct dns_answer *a, void *arg)
{
	struct dmarc *d = arg;

	d->q = NULL;
	if (on_answer(d, a) == 1 && d->done != NULL) {
		void (*done)(const struct dmarc_verdict *, void *) = d->done;
		d->done = NULL;
		done(&d->v, d->arg);
	}
}

static void lookup(struct dmarc *d, const char *domain)
{
	char name[DNS_NAME_MAX + 16];

	str_fmt(name, sizeof(name), "_dmarc.%s", domain);
	d->q = d->r.lookup(d->r.ctx, name, DNS_T_TXT, answer_cb, d);
}

int dmarc_check(const struct ma_resolver *r, const struct dmarc_input *in,
		void (*done)(const struct dmarc_verdict *v, void *arg), void *arg,
		struct dmarc **dp, struct dmarc_verdict *v)
{
	struct dmarc *d;

	*dp = NULL;
	memset(v, 0, sizeof(*v));
	if (in->from_domain == NULL || strlen(in->from_domain) > DNS_NAME_MAX - 7 ||
	    !dns_name_valid(in->from_domain) || strchr(in->from_domain, '.') == NULL) {
		v->result = MA_NONE;
		v->reason = "no usable From domain";
		return 1;
	}
	d = xcalloc(1, sizeof(*d));
	d->r = *r;
	d->in = *in;
	str_lcpy(d->from, in->from_domain, sizeof(d->from));
	str_lower(d->from, strlen(d->from));
	str_lcpy(d->spf_domain, in->spf_domain ? in->spf_domain : "", sizeof(d->spf_domain));
	d->in.spf_domain = d->spf_domain;
	d->dkim = xcalloc(in->ndkim ? in->ndkim : 1, sizeof(*d->dkim));
	if (in->ndkim)
		memcpy(d->dkim, in->dkim, in->ndkim * sizeof(*d->dkim));
	d->in.dkim = d->dkim;
	psl_org_domain(in->psl, d->from, d->org, sizeof(d->org));
	str_lcpy(d->v.domain, d->from, sizeof(d->v.domain));
	d->done = done;
	d->arg = arg;
	lookup(d, d->from);
	*dp = d;
	return 0;
}

void dmarc_free(struct dmarc **dp)
{
	struct dmarc *d = *dp;

	if (d == NULL)
		return;
	if (d->q != NULL)
		d->r.cancel(d->r.ctx, d->q);
	free(d->dkim);
	free(d);
	*dp = NULL;
}

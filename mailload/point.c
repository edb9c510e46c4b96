/* point.c — owns one load point's results: the exact merge of the agents' results (histograms
 * per bucket, errors, time series, messages sent and sightings), the reconciliation's
 * findings, the delivery accounting of every recipient copy (delivered, late, unchecked,
 * lost, duplicated), the verdict with its validity and confidence intervals, and the point's
 * object in report.json (schema: docs/mailload-report.md). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/histo.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/json.h"
#include "mailload/manager.h"

struct mgr_seen {
	uint64_t seq;
	uint32_t user, uidv, uid;
	int64_t ms;
	bool recon, below; /* found by the reconciliation; under a UID covered before */
};

struct mgr_sent {
	uint64_t seq;
	int64_t sent_ms, ack_ms;
	bool submitted;
	uint32_t off, n;
};

struct mgr_err {
	int fn;
	char *msg;
	uint64_t n;
};

struct mgr_recon_user {
	uint32_t user;
	char *why; /* NULL: its INBOX was read */
};

struct mgr_point {
	struct histo h[FN_COUNT];
	uint64_t err[FN_COUNT];
	struct mgr_err *errs;
	size_t nerrs;
	uint32_t ts_step_s, nts;
	uint64_t (*ts)[4]; /* smtp steps, smtp errors, imap steps, imap errors */
	uint64_t (*tslb)[2][TS_LB];
	struct mgr_sent *sent;
	size_t nsent, capsent;
	int64_t *rcpt;
	size_t nrcpt, caprcpt;
	struct mgr_seen *seen;
	size_t nseen, capseen;
	bool sorted;
	struct mgr_recon_user *recon;
	size_t nrecon;
	bool recon_tried;
	struct ml_server_info server; /* merged: handshakes over the whole run */
	uint64_t refused;
	struct { /* the agents' probe pools, added up */
		uint64_t started, refused, expired_unprobed, idle_missed;
		uint64_t cap_min, cap_max, window_s;
		bool limited;
	} probes;
	struct histo delivery;
	double sut_cpu_s; /* < 0: not measured */
	char sut_pids[128];
	int64_t offset_ms; /* of the agent being merged: its times are moved to our clock */
	struct buf agents; /* JSON array members: each agent's machine and clock */
};

struct mgr_point *mgr_point_new(void)
{
	struct mgr_point *p = xcalloc(1, sizeof(*p));

	for (int i = 0; i < FN_COUNT; i++)
		histo_init(&p->h[i]);
	histo_init(&p->delivery);
	buf_init(&p->agents, 256, ML_DOC_MAX);
	p->sut_cpu_s = -1;
	return p;
}

void mgr_point_free(struct mgr_point **pp)
{
	struct mgr_point *p = *pp;

	if (p == NULL)
		return;
	for (size_t i = 0; i < p->nerrs; i++)
		free(p->errs[i].msg);
	for (size_t i = 0; i < p->nrecon; i++)
		free(p->recon[i].why);
	free(p->recon);
	free(p->errs);
	free(p->ts);
	free(p->tslb);
	free(p->sent);
	free(p->rcpt);
	free(p->seen);
	buf_release(&p->agents);
	free(p);
	*pp = NULL;
}

const struct histo *mgr_point_histo(const struct mgr_point *p, int fn)
{
	return fn < 0 ? &p->delivery : &p->h[fn];
}

const struct ml_server_info *mgr_point_server(const struct mgr_point *p)
{
	return &p->server;
}

void mgr_point_sut_cpu(struct mgr_point *p, double cpu_s, const char *pids)
{
	p->sut_cpu_s = cpu_s;
	str_lcpy(p->sut_pids, pids, sizeof(p->sut_pids));
}

void mgr_point_agent(struct mgr_point *p, const char *name, int64_t offset_ms, int64_t rtt_ms,
		     const struct jv *results)
{
	const struct jv *h = jv_get(results, "host");

	p->offset_ms = offset_ms;
	buf_printf(&p->agents, "%s{\"name\":", p->agents.len ? "," : "");
	json_put_str(&p->agents, name);
	buf_puts(&p->agents, ",\"host\":");
	json_put_str(&p->agents, jv_str(h, "name", "?"));
	buf_puts(&p->agents, ",\"cpu\":");
	json_put_str(&p->agents, jv_str(h, "cpu", "?"));
	buf_printf(&p->agents, ",\"cores\":%" PRId64 ",\"mem_kb\":%" PRId64 ",\"kernel\":",
		   jv_int(h, "cores", 0), jv_int(h, "mem_kb", 0));
	json_put_str(&p->agents, jv_str(h, "kernel", "?"));
	buf_printf(&p->agents, ",\"clock_offset_ms\":%" PRId64 ",\"rtt_ms\":%" PRId64 "}",
		   offset_ms, rtt_ms);
}

/* ---- the merge ---- */
static void add_err(struct mgr_point *p, int fn, const char *msg, uint64_t n)
{
	for (size_t i = 0; i < p->nerrs; i++)
		if (p->errs[i].fn == fn && strcmp(p->errs[i].msg, msg) == 0) {
			p->errs[i].n += n;
			return;
		}
	p->errs = xreallocarray(p->errs, p->nerrs + 1, sizeof(*p->errs));
	p->errs[p->nerrs++] = (struct mgr_err){ fn, xstrdup(msg), n };
}

static int merge_ts(struct mgr_point *p, const struct jv *r)
{
	const struct jv *ts = jv_get(r, "ts");
	uint32_t step = (uint32_t)jv_int(r, "ts_step_s", 1);

	if (ts == NULL || ts->type != JV_ARR)
		return -1;
	if (p->ts == NULL) {
		p->nts = (uint32_t)ts->n;
		p->ts_step_s = step;
		p->ts = xcalloc(p->nts ? p->nts : 1, sizeof(*p->ts));
		p->tslb = xcalloc(p->nts ? p->nts : 1, sizeof(*p->tslb));
	}
	if (step != p->ts_step_s || ts->n != p->nts)
		return -1;
	for (size_t i = 0; i < ts->n; i++) {
		const struct jv *e = &ts->kid[i];
		if (e->type != JV_ARR || e->n != 5 || e->kid[4].n != 2 * TS_LB)
			return -1;
		for (int k = 0; k < 4; k++)
			p->ts[i][k] += (uint64_t)e->kid[k].i;
		for (int k = 0; k < 2 * TS_LB; k++)
			p->tslb[i][k / TS_LB][k % TS_LB] += (uint64_t)e->kid[4].kid[k].i;
	}
	return 0;
}

static void seen_push(struct mgr_point *p, struct mgr_seen s)
{
	if (p->nseen == p->capseen) {
		p->capseen = p->capseen ? p->capseen * 2 : 1024;
		p->seen = xreallocarray(p->seen, p->capseen, sizeof(*p->seen));
	}
	p->seen[p->nseen++] = s;
	p->sorted = false;
}

static int merge_sent(struct mgr_point *p, const struct jv *sent)
{
	for (size_t i = 0; i < sent->n; i++) {
		const struct jv *e = &sent->kid[i];
		if (e->type != JV_ARR || e->n != 5 || e->kid[4].type != JV_ARR)
			return -1;
		if (p->nsent == p->capsent) {
			p->capsent = p->capsent ? p->capsent * 2 : 1024;
			p->sent = xreallocarray(p->sent, p->capsent, sizeof(*p->sent));
		}
		const struct jv *rc = &e->kid[4];
		while (p->nrcpt + rc->n > p->caprcpt) {
			p->caprcpt = p->caprcpt ? p->caprcpt * 2 : 4096;
			p->rcpt = xreallocarray(p->rcpt, p->caprcpt, sizeof(*p->rcpt));
		}
		p->sent[p->nsent++] = (struct mgr_sent){
			(uint64_t)e->kid[0].i,      e->kid[1].i - p->offset_ms,
			e->kid[2].i - p->offset_ms, e->kid[3].i != 0,
			(uint32_t)p->nrcpt,         (uint32_t)rc->n
		};
		for (size_t k = 0; k < rc->n; k++)
			p->rcpt[p->nrcpt++] = rc->kid[k].i;
	}
	return 0;
}

static int merge_delivery(struct mgr_point *p, const struct jv *r)
{
	const struct jv *sent = jv_get(r, "sent"), *seen = jv_get(r, "seen");

	if (sent == NULL || seen == NULL || sent->type != JV_ARR || seen->type != JV_ARR ||
	    merge_sent(p, sent) < 0)
		return -1;
	for (size_t i = 0; i < seen->n; i++) {
		const struct jv *e = &seen->kid[i];
		if (e->type != JV_ARR || e->n != 5)
			return -1;
		seen_push(p, (struct mgr_seen){ (uint64_t)e->kid[0].i, (uint32_t)e->kid[1].i,
						(uint32_t)e->kid[2].i, (uint32_t)e->kid[3].i,
						e->kid[4].i - p->offset_ms, false, false });
	}
	return 0;
}

static void merge_probes(struct mgr_point *p, const struct jv *pr)
{
	uint64_t cap = (uint64_t)jv_int(pr, "cap", 0);

	if (pr == NULL)
		return;
	p->probes.started += (uint64_t)jv_int(pr, "started", 0);
	p->probes.refused += (uint64_t)jv_int(pr, "refused", 0);
	p->probes.expired_unprobed += (uint64_t)jv_int(pr, "expired_unprobed", 0);
	p->probes.idle_missed += (uint64_t)jv_int(pr, "idle_missed", 0);
	p->probes.cap_max += (uint64_t)jv_int(pr, "cap_max", 0);
	p->probes.cap_min += cap;
	p->probes.window_s = (uint64_t)jv_int(pr, "window_s", 0);
	const struct jv *l = jv_get(pr, "limited");
	p->probes.limited |= l != NULL && l->type == JV_BOOL && l->b;
}

int mgr_point_merge(struct mgr_point *p, const struct jv *r)
{
	const struct jv *fns = jv_get(r, "functions"), *top = jv_get(r, "errtop");

	if (fns == NULL || fns->type != JV_OBJ)
		return -1;
	for (size_t i = 0; i < fns->n; i++) {
		int fn = ml_fn_by_key(fns->kid[i].key);
		struct histo h;
		const char *hs = jv_str(&fns->kid[i], "histo", NULL);

		if (fn < 0 || hs == NULL || histo_deserialize(&h, hs, strlen(hs)) < 0)
			return -1;
		histo_merge(&p->h[fn], &h); /* exact: counts per bucket add */
		p->err[fn] += (uint64_t)jv_int(&fns->kid[i], "errors", 0);
	}
	for (size_t i = 0; top != NULL && i < top->n; i++) {
		const struct jv *e = &top->kid[i];
		if (e->type == JV_ARR && e->n == 3 && e->kid[0].type == JV_STR &&
		    e->kid[1].type == JV_STR)
			add_err(p, ml_fn_by_key(e->kid[0].s), e->kid[1].s, (uint64_t)e->kid[2].i);
	}
	if (merge_ts(p, r) < 0 || merge_delivery(p, r) < 0)
		return -1;
	ml_server_info_merge(&p->server, r);
	merge_probes(p, jv_get(r, "probes"));
	p->refused += (uint64_t)jv_int(r, "sessions_refused", 0);
	return 0;
}

/* ---- which recipients the reconciliation must read ---- */
static int cmp_seen(const void *a, const void *b)
{
	const struct mgr_seen *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->user != y->user)
		return x->user < y->user ? -1 : 1;
	if (x->uidv != y->uidv)
		return x->uidv < y->uidv ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	return x->ms < y->ms ? -1 : x->ms > y->ms;
}

static void sort_seen(struct mgr_point *p)
{
	if (!p->sorted && p->nseen > 1)
		qsort(p->seen, p->nseen, sizeof(*p->seen), cmp_seen);
	p->sorted = true;
}

/* What was seen of message seq at local recipient r: distinct copies (UIDVALIDITY/UID), the
   first sighting during the run and the first by the reconciliation, and whether a copy the
   reconciliation found sat under a UID covered before. */
struct sightings {
	uint64_t copies;
	int64_t first_run, first_recon;
	bool below;
};

static void local_sightings(const struct mgr_point *p, uint64_t seq, uint32_t r,
			    struct sightings *s)
{
	struct mgr_seen key = { seq, r, 0, 0, INT64_MIN, false, false };
	size_t lo = 0, hi = p->nseen;

	*s = (struct sightings){ 0, INT64_MAX, INT64_MAX, false };
	while (lo < hi) { /* first entry >= (seq, user) */
		size_t mid = (lo + hi) / 2;
		if (cmp_seen(&p->seen[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j < p->nseen && p->seen[j].seq == seq && p->seen[j].user == r; j++) {
		const struct mgr_seen *e = &p->seen[j];
		bool same = j > lo && p->seen[j - 1].uidv == e->uidv &&
			    p->seen[j - 1].uid == e->uid;

		s->copies += !same;
		if (e->recon) {
			if (e->ms < s->first_recon)
				s->first_recon = e->ms;
			s->below |= e->below;
		} else if (e->ms < s->first_run) {
			s->first_run = e->ms;
		}
	}
}

size_t mgr_point_missing_users(struct mgr_point *p, uint32_t **users_r)
{
	uint32_t *u = NULL;
	size_t n = 0, cap = 0;

	sort_seen(p);
	for (size_t i = 0; i < p->nsent; i++) {
		const struct mgr_sent *s = &p->sent[i];
		for (uint32_t k = 0; k < s->n; k++) {
			int64_t r = p->rcpt[s->off + k];
			struct sightings si;

			if (r <= 0)
				continue;
			local_sightings(p, s->seq, (uint32_t)r, &si);
			if (si.copies > 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				u = xreallocarray(u, cap, sizeof(*u));
			}
			u[n++] = (uint32_t)r;
		}
	}
	/* sorted, each once */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && u[j - 1] > u[j]; j--) {
			uint32_t t = u[j];
			u[j] = u[j - 1];
			u[j - 1] = t;
		}
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (m == 0 || u[m - 1] != u[i])
			u[m++] = u[i];
	*users_r = u;
	return m;
}

static int cmp_recon(const void *a, const void *b)
{
	const struct mgr_recon_user *x = a, *y = b;

	return x->user < y->user ? -1 : x->user > y->user;
}

int mgr_point_merge_recon(struct mgr_point *p, const struct jv *r, int64_t offset_ms)
{
	const struct jv *ok = jv_get(r, "users_ok"), *bad = jv_get(r, "users_failed");
	const struct jv *seen = jv_get(r, "seen");

	p->recon_tried = true;
	if (ok == NULL || bad == NULL || seen == NULL || ok->type != JV_ARR ||
	    bad->type != JV_ARR || seen->type != JV_ARR)
		return -1;
	p->recon = xreallocarray(p->recon, p->nrecon + ok->n + bad->n, sizeof(*p->recon));
	for (size_t i = 0; i < ok->n; i++)
		p->recon[p->nrecon++] = (struct mgr_recon_user){ (uint32_t)ok->kid[i].i, NULL };
	for (size_t i = 0; i < bad->n; i++) {
		const struct jv *e = &bad->kid[i];
		if (e->type != JV_ARR || e->n != 2 || e->kid[1].type != JV_STR)
			return -1;
		p->recon[p->nrecon++] = (struct mgr_recon_user){ (uint32_t)e->kid[0].i,
								 xstrdup(e->kid[1].s) };
	}
	for (size_t i = 0; i < seen->n; i++) {
		const struct jv *e = &seen->kid[i];
		if (e->type != JV_ARR || e->n != 6)
			return -1;
		seen_push(p, (struct mgr_seen){ (uint64_t)e->kid[0].i, (uint32_t)e->kid[1].i,
						(uint32_t)e->kid[2].i, (uint32_t)e->kid[3].i,
						e->kid[4].i - offset_ms, true, e->kid[5].i != 0 });
	}
	if (p->nrecon > 1)
		qsort(p->recon, p->nrecon, sizeof(*p->recon), cmp_recon);
	return 0;
}

void mgr_point_recon_failed(struct mgr_point *p, const uint32_t *users, size_t n, const char *why)
{
	p->recon_tried = true;
	p->recon = xreallocarray(p->recon, p->nrecon + n, sizeof(*p->recon));
	for (size_t i = 0; i < n; i++)
		p->recon[p->nrecon++] = (struct mgr_recon_user){ users[i], xstrdup(why) };
	if (p->nrecon > 1)
		qsort(p->recon, p->nrecon, sizeof(*p->recon), cmp_recon);
}

/* The reconciliation's outcome for user r: NULL when not tried. */
static const struct mgr_recon_user *recon_of(const struct mgr_point *p, uint32_t r)
{
	struct mgr_recon_user key = { r, NULL };

	return p->nrecon ? bsearch(&key, p->recon, p->nrecon, sizeof(*p->recon), cmp_recon) : NULL;
}

/* ---- remote copies: the sink's records ---- */
struct remote_rec {
	uint64_t seq;
	int64_t rcpt;
	int64_t ms;
	bool recon; /* recorded only after the first read of the records */
};

static int cmp_remote(const void *a, const void *b)
{
	const struct remote_rec *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->rcpt != y->rcpt)
		return x->rcpt < y->rcpt ? -1 : 1;
	return x->ms < y->ms ? -1 : x->ms > y->ms;
}

/* rN@ext_domain: -N, else 0 */
static int64_t remote_id(const char *a, const struct ml_cfg *c)
{
	const char *at = strchr(a, '@');
	uint64_t id;

	if (a[0] != 'r' || at == NULL || strcasecmp(at + 1, c->ext_domain) != 0 ||
	    str_to_u64(a + 1, (size_t)(at - a - 1), UINT32_MAX, &id) < 0 || id == 0)
		return 0;
	return -(int64_t)id;
}

static size_t sink_remote(const struct mgr_sink *sk, const struct ml_cfg *c,
			  struct remote_rec **out)
{
	const struct jv *recs = sk != NULL ? sk->records : NULL;
	size_t n = 0, cap = 0;
	struct remote_rec *r = NULL;

	for (size_t i = 0; recs != NULL && i < recs->n; i++) {
		const struct jv *e = &recs->kid[i], *rc = jv_get(e, "rcpts");
		uint64_t run, seq;

		if (sscanf(jv_str(e, "id", ""), "<%" SCNu64 ".%" SCNu64 "@mailload>", &run,
			   &seq) != 2 ||
		    run != c->run_id || rc == NULL)
			continue;
		for (size_t k = 0; k < rc->n; k++) {
			int64_t id = remote_id(rc->kid[k].s != NULL ? rc->kid[k].s : "", c);
			if (id == 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 1024;
				r = xreallocarray(r, cap, sizeof(*r));
			}
			r[n++] = (struct remote_rec){ seq, id, jv_int(e, "arrival_ms", 0),
						      (uint64_t)jv_int(e, "seq", 0) >
							      sk->first_next };
		}
	}
	if (n > 1)
		qsort(r, n, sizeof(*r), cmp_remote);
	*out = r;
	return n;
}

static void remote_sightings(const struct remote_rec *rr, size_t nrr, uint64_t seq, int64_t r,
			     struct sightings *s)
{
	struct remote_rec key = { seq, r, INT64_MIN, false };
	size_t lo = 0, hi = nrr;

	*s = (struct sightings){ 0, INT64_MAX, INT64_MAX, false };
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_remote(&rr[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j < nrr && rr[j].seq == seq && rr[j].rcpt == r; j++) {
		s->copies++;
		int64_t *first = rr[j].recon ? &s->first_recon : &s->first_run;
		if (rr[j].ms < *first)
			*first = rr[j].ms;
	}
}

uint64_t mgr_point_remote_missing(struct mgr_point *p, const struct ml_cfg *c,
				  const struct mgr_sink *sk)
{
	struct remote_rec *rr = NULL;
	size_t nrr = sink_remote(sk, c, &rr);
	uint64_t missing = 0;

	for (size_t i = 0; i < p->nsent; i++)
		for (uint32_t k = 0; k < p->sent[i].n; k++) {
			int64_t r = p->rcpt[p->sent[i].off + k];
			struct sightings si;
			if (r >= 0)
				continue;
			remote_sightings(rr, nrr, p->sent[i].seq, r, &si);
			missing += si.copies == 0;
		}
	free(rr);
	return missing;
}

/* ---- the delivery accounting ---- */
#define COPY_LIST_MAX 20 /* copies named per outcome (the first the accounting meets) */
struct copy_ref {
	const struct mgr_sent *sent;
	int64_t rcpt; /* a user number (> 0) or a remote recipient (< 0) */
	int64_t found_ms;
	const char *how; /* late: how it was found; unchecked: why */
};

struct copy_list {
	struct copy_ref c[COPY_LIST_MAX];
	uint32_t n;
};

struct deliv {
	uint64_t checked, delivered, late, unchecked, lost, dup, local, remote;
	uint64_t late_recon, below;
	uint64_t measured, measured_found;
	uint64_t submitted, incoming, submitted_steady;
	struct copy_list lost_l, late_l, unch_l;
};

static void name_copy(struct copy_list *l, const struct mgr_sent *s, int64_t r, int64_t ms,
		      const char *how)
{
	if (l->n < COPY_LIST_MAX)
		l->c[l->n++] = (struct copy_ref){ s, r, ms, how };
}

/* One copy: its outcome, and its delivery time into the histogram when it was found. */
static void account_copy(struct mgr_point *p, const struct ml_cfg *c, const struct mgr_sink *sk,
			 const struct sightings *si, const struct mgr_sent *s, int64_t r,
			 bool measured, struct deliv *d)
{
	int64_t window = (int64_t)c->probe_window_s * 1000;
	int64_t first = si->first_run;
	const char *how = "seen after the probe's window";

	if (si->copies == 0) {
		const struct mgr_recon_user *ru = r > 0 ? recon_of(p, (uint32_t)r) : NULL;
		const char *why = r > 0 ? (ru == NULL ? "no reconciliation" : ru->why)
					: (sk == NULL || sk->records == NULL ? "no sink records"
					   : sk->dropped > 0 ? "the sink evicted records"
							     : NULL);
		if (why != NULL) {
			d->unchecked++;
			name_copy(&d->unch_l, s, r, 0, why);
		} else {
			d->lost++;
			name_copy(&d->lost_l, s, r, 0, NULL);
		}
		return;
	}
	d->dup += si->copies > 1;
	bool by_recon = first == INT64_MAX;
	if (by_recon) { /* found only by the reconciliation */
		first = si->first_recon;
		how = r > 0 ? "found by the reconciliation"
			    : "recorded by the sink after the drain";
		d->late_recon++;
		if (si->below) {
			d->below++;
			how = "found by the reconciliation under a UID already covered";
		}
	}
	if (by_recon || first - s->ack_ms > window) {
		d->late++;
		name_copy(&d->late_l, s, r, first, how);
	} else {
		d->delivered++;
	}
	if (measured) {
		d->measured_found++;
		histo_add(&p->delivery,
			  (uint64_t)(first > s->ack_ms ? first - s->ack_ms : 0) * 1000);
	}
}

static void account(struct mgr_point *p, const struct ml_cfg *c, const struct mgr_sink *sk,
		    struct deliv *d)
{
	struct remote_rec *rr = NULL;
	size_t nrr = sink_remote(sk, c, &rr);
	int64_t ramp_end = (int64_t)c->t0_ms + (int64_t)c->ramp_s * 1000;
	int64_t steady_end = ramp_end + (int64_t)c->steady_s * 1000;

	memset(d, 0, sizeof(*d));
	sort_seen(p);
	for (size_t i = 0; i < p->nsent; i++) {
		const struct mgr_sent *s = &p->sent[i];
		bool measured = s->ack_ms >= ramp_end && s->ack_ms < steady_end;

		d->submitted += s->submitted;
		d->submitted_steady += s->submitted && measured;
		d->incoming += !s->submitted;
		for (uint32_t k = 0; k < s->n; k++) {
			int64_t r = p->rcpt[s->off + k];
			struct sightings si;

			if (r > 0) {
				d->local++;
				local_sightings(p, s->seq, (uint32_t)r, &si);
			} else {
				d->remote++;
				remote_sightings(rr, nrr, s->seq, r, &si);
			}
			d->checked++;
			d->measured += measured;
			account_copy(p, c, sk, &si, s, r, measured, d);
		}
	}
	free(rr);
}

/* ---- the point's JSON ---- */
static void put_histogram(struct buf *o, const struct histo *h)
{
	bool first = true;

	buf_printf(o,
		   "\"histogram\":{\"unit\":\"us\",\"count\":%" PRIu64 ",\"sum_us\":%" PRIu64
		   ",\"min_us\":%" PRIu64 ",\"max_us\":%" PRIu64 ",\"buckets\":[",
		   h->count, h->sum, h->count ? h->min : 0, h->max);
	for (size_t i = 0; i < HISTO_NBUCKETS; i++) {
		if (h->b[i] == 0)
			continue;
		buf_printf(o,
			   "%s{\"lo_us\":%" PRIu64 ",\"hi_us\":%" PRIu64 ",\"count\":%" PRIu64 "}",
			   first ? "" : ",", histo_bucket_low(i), histo_bucket_high(i), h->b[i]);
		first = false;
	}
	buf_puts(o, "]}");
}

/* count, errors, within, pct with its Wilson interval, percentiles, the histogram */
static void put_compliance(struct buf *o, const struct histo *h, uint64_t errors,
			   uint32_t limit_ms, bool judged, uint64_t min_samples)
{
	uint64_t within = histo_count_le(h, (uint64_t)limit_ms * 1000);
	uint64_t all = h->count + errors;
	double lo, hi, pct = all ? 100.0 * (double)within / (double)all : 0.0;

	ml_wilson(within, all, &lo, &hi);
	buf_printf(o,
		   "\"count\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"within\":%" PRIu64
		   ",\"pct\":%.3f,\"ci_low_pct\":%.3f,\"ci_high_pct\":%.3f",
		   h->count, errors, within, pct, lo, hi);
	if (judged)
		buf_printf(o,
			   ",\"samples_required\":%" PRIu64 ",\"enough_samples\":%s"
			   ",\"straddles\":%s",
			   min_samples, all >= min_samples ? "true" : "false",
			   all > 0 && lo <= ML_REQUIRED_PCT && hi > ML_REQUIRED_PCT ? "true"
										    : "false");
	buf_printf(o,
		   ",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f"
		   ",\"mean_ms\":%.3f,",
		   (double)histo_percentile(h, 50) / 1000.0,
		   (double)histo_percentile(h, 90) / 1000.0,
		   (double)histo_percentile(h, 99) / 1000.0, (double)h->max / 1000.0,
		   (double)histo_mean(h) / 1000.0);
	put_histogram(o, h);
}

static void put_ts(struct buf *o, const struct mgr_point *p)
{
	buf_printf(o, "\"timeseries\":{\"step_s\":%u,\"rows\":[", p->ts_step_s);
	for (uint32_t i = 0; i < p->nts; i++) {
		double p99[2];
		for (int k = 0; k < 2; k++) {
			uint64_t tot = 0, acc = 0;
			for (int b = 0; b < TS_LB; b++)
				tot += p->tslb[i][k][b];
			p99[k] = 0;
			for (int b = 0; b < TS_LB && tot > 0; b++) {
				acc += p->tslb[i][k][b];
				if ((double)acc >=
				    0.99 * (double)tot) { /* bucket b holds < 2^b us */
					p99[k] = (double)((uint64_t)1 << b) / 1000.0;
					break;
				}
			}
		}
		buf_printf(o,
			   "%s{\"t_s\":%u,\"smtp_steps\":%" PRIu64 ",\"smtp_errors\":%" PRIu64
			   ",\"imap_steps\":%" PRIu64 ",\"imap_errors\":%" PRIu64
			   ",\"smtp_p99_ms\":%.3f,\"imap_p99_ms\":%.3f}",
			   i ? "," : "", i * p->ts_step_s, p->ts[i][0], p->ts[i][1], p->ts[i][2],
			   p->ts[i][3], p99[0], p99[1]);
	}
	buf_puts(o, "]}");
}

static int cmp_err(const void *a, const void *b)
{
	const struct mgr_err *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/* What the rules found: failures, reasons the point is invalid, uncertain functions. */
struct verdict {
	struct buf fail, invalid, uncertain;
	bool too_short;
};

static void why_add(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why_add(struct buf *b, const char *fmt, ...)
{
	char tmp[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (b->len)
		buf_putc(b, ',');
	json_put_str(b, tmp);
}

/* One function's rules: enough samples, more than 95% inside the limit, interval. */
static void judge(struct verdict *v, const char *name, const struct histo *h, uint64_t errors,
		  uint32_t limit_ms, uint64_t min_samples)
{
	uint64_t all = h->count + errors, within = histo_count_le(h, (uint64_t)limit_ms * 1000);
	double pct = all ? 100.0 * (double)within / (double)all : 0, lo, hi;

	ml_wilson(within, all, &lo, &hi);
	if (all < min_samples) {
		v->too_short = true;
		why_add(&v->invalid, "%s: %" PRIu64 " samples, %" PRIu64 " required (too short)",
			name, all, min_samples);
	} else if (pct <= ML_REQUIRED_PCT) {
		why_add(&v->fail, "%s: %.2f%% inside %.0f s, not more than 95%%", name, pct,
			limit_ms / 1000.0);
	}
	if (all > 0 && lo <= ML_REQUIRED_PCT && hi > ML_REQUIRED_PCT)
		why_add(&v->uncertain, "%s: %.2f%% (95%% interval %.2f%%..%.2f%%) straddles 95%%",
			name, pct, lo, hi);
}

/* The functions array; adds up the workload's steps and failures and judges the summary. */
static void put_point_functions(const struct mgr_point *p, const struct ml_cfg *c, struct buf *o,
				uint64_t *steps, uint64_t *failed, struct verdict *v)
{
	static const char *const cls[] = { "summary", "other", "probe" };

	buf_puts(o, "\"functions\":[");
	for (int f = 0; f < FN_DELIVERY; f++) {
		const struct histo *h = &p->h[f];
		enum ml_fn_class k = ml_fn_class(f);

		if (k != FC_PROBE) {
			*steps += h->count + p->err[f];
			*failed += p->err[f];
		}
		if (k == FC_SUMMARY)
			judge(v, ml_fns[f].name, h, p->err[f], ml_fns[f].limit_ms, c->min_samples);
		buf_printf(o, "%s{\"key\":\"%s\",\"name\":", f ? "," : "", ml_fns[f].key);
		json_put_str(o, ml_fns[f].name);
		buf_printf(o, ",\"class\":\"%s\",\"summary\":%s,\"limit_ms\":%u,", cls[k],
			   k == FC_SUMMARY ? "true" : "false", ml_fns[f].limit_ms);
		put_compliance(o, h, p->err[f], ml_fns[f].limit_ms, k == FC_SUMMARY,
			       c->min_samples);
		buf_putc(o, '}');
	}
	buf_putc(o, ']');
}

/* The copies named in one outcome's list. */
static void put_copies(struct buf *o, const char *key, const struct ml_cfg *c,
		       const struct copy_list *l)
{
	buf_printf(o, ",\"%s\":[", key);
	for (uint32_t i = 0; i < l->n; i++) {
		const struct copy_ref *r = &l->c[i];
		char addr[2 * ML_STR];

		ml_rcpt_addr(c, r->rcpt, addr, sizeof(addr));
		buf_printf(o, "%s{\"message_id\":\"<%" PRIu64 ".%" PRIu64 "@mailload>\",\"rcpt\":",
			   i ? "," : "", c->run_id, r->sent->seq);
		json_put_str(o, addr);
		buf_printf(o,
			   ",\"local\":%s,\"submitted\":%s,\"ack_ms\":%" PRId64
			   ",\"sent_s\":%.3f,\"ack_s\":%.3f",
			   r->rcpt > 0 ? "true" : "false", r->sent->submitted ? "true" : "false",
			   r->sent->ack_ms,
			   (double)(r->sent->sent_ms - (int64_t)c->t0_ms) / 1000.0,
			   (double)(r->sent->ack_ms - (int64_t)c->t0_ms) / 1000.0);
		if (r->found_ms != 0)
			buf_printf(o, ",\"found_ms\":%" PRId64 ",\"delivery_s\":%.3f", r->found_ms,
				   (double)(r->found_ms - r->sent->ack_ms) / 1000.0);
		if (r->how != NULL) {
			buf_puts(o, ",\"how\":");
			json_put_str(o, r->how);
		}
		buf_putc(o, '}');
	}
	buf_putc(o, ']');
}

static void put_probes(const struct mgr_point *p, struct buf *o)
{
	buf_printf(o,
		   ",\"probes\":{\"window_s\":%" PRIu64 ",\"sessions\":%" PRIu64
		   ",\"refused\":%" PRIu64 ",\"connections_allowed\":%" PRIu64
		   ",\"connections_max\":%" PRIu64 ",\"limited_by_server\":%s"
		   ",\"expired_unprobed\":%" PRIu64 ",\"idle_missed\":%" PRIu64 ",",
		   p->probes.window_s, p->probes.started, p->probes.refused, p->probes.cap_min,
		   p->probes.cap_max, p->probes.limited ? "true" : "false",
		   p->probes.expired_unprobed, p->probes.idle_missed);
	buf_puts(o, "\"queue\":{");
	put_compliance(o, &p->h[FN_PROBE_QUEUE], 0, ML_DELIVERY_LIMIT_MS, false, 0);
	buf_puts(o, "},\"first_look\":{");
	put_compliance(o, &p->h[FN_PROBE_READY], 0, ML_DELIVERY_LIMIT_MS, false, 0);
	buf_puts(o, "}}");
}

static void put_point_delivery(const struct mgr_point *p, const struct ml_cfg *c,
			       const struct deliv *d, const struct mgr_sink *sk, struct buf *o)
{
	uint64_t rok = 0, rfail = 0;

	for (size_t i = 0; i < p->nrecon; i++)
		p->recon[i].why == NULL ? rok++ : rfail++;
	buf_printf(o,
		   ",\"delivery\":{\"limit_ms\":%d,\"window_ms\":%" PRIu64 ",\"checked\":%" PRIu64
		   ",\"delivered\":%" PRIu64 ",\"late\":%" PRIu64 ",\"unchecked\":%" PRIu64
		   ",\"lost\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"local\":%" PRIu64
		   ",\"remote\":%" PRIu64 ",\"measured\":%" PRIu64 ",\"measured_found\":%" PRIu64
		   ",\"reconciliation\":{\"tried\":%s,\"users\":%zu,\"read\":%" PRIu64
		   ",\"failed\":%" PRIu64 ",\"found\":%" PRIu64 ",\"below_covered_uid\":%" PRIu64
		   "},\"remote_note\":",
		   ML_DELIVERY_LIMIT_MS, c->probe_window_s * 1000, d->checked, d->delivered,
		   d->late, d->unchecked, d->lost, d->dup, d->local, d->remote, d->measured,
		   d->measured_found, p->recon_tried ? "true" : "false", p->nrecon, rok, rfail,
		   d->late_recon, d->below);
	json_put_str(o, sk != NULL && sk->note != NULL ? sk->note : "");
	put_copies(o, "lost_copies", c, &d->lost_l);
	put_copies(o, "late_copies", c, &d->late_l);
	put_copies(o, "unchecked_copies", c, &d->unch_l);
	put_probes(p, o);
	buf_putc(o, ',');
	put_compliance(o, &p->delivery, 0, ML_DELIVERY_LIMIT_MS, true, c->min_samples);
	buf_printf(o,
		   "},\"messages\":{\"submitted\":%" PRIu64 ",\"submitted_steady\":%" PRIu64
		   ",\"incoming\":%" PRIu64 ",\"measured_rate\":%.3f}",
		   d->submitted, d->submitted_steady, d->incoming,
		   c->steady_s ? (double)d->submitted_steady * 60.0 / (double)c->steady_s : 0.0);
}

/* The delivery rules: time within the limit, nothing lost or duplicated, every copy checked,
   no copy under a covered UID, the error rate. */
static void delivery_rules(const struct mgr_point *p, const struct ml_cfg *c,
			   const struct deliv *d, double erate, double elo, double ehi,
			   struct verdict *v)
{
	judge(v, "Delivery Time", &p->delivery, 0, ML_DELIVERY_LIMIT_MS, c->min_samples);
	if (erate >= ML_ERROR_RATE_MAX)
		why_add(&v->fail, "Error Rate: %.2f%% (limit < 1%%)", erate);
	if (elo < ML_ERROR_RATE_MAX && ehi >= ML_ERROR_RATE_MAX)
		why_add(&v->uncertain,
			"Error Rate: %.3f%% (95%% interval %.3f%%..%.3f%%) straddles 1%%", erate,
			elo, ehi);
	if (d->lost > 0 || d->dup > 0)
		why_add(&v->fail,
			"%" PRIu64 " lost, %" PRIu64 " duplicated (after the reconciliation)",
			d->lost, d->dup);
	if (d->below > 0)
		why_add(&v->fail, "%" PRIu64 " copies appeared under a UID already covered",
			d->below);
	if (d->unchecked > 0)
		why_add(&v->invalid, "%" PRIu64 " recipient copies could not be checked",
			d->unchecked);
}

static void put_errors(struct mgr_point *p, struct buf *o, uint64_t steps, uint64_t failed,
		       double erate, double elo, double ehi)
{
	uint64_t probe_failed = 0;

	for (int f = FN_PROBE_FIRST; f < FN_DELIVERY; f++)
		probe_failed += p->err[f];
	if (p->nerrs > 1)
		qsort(p->errs, p->nerrs, sizeof(*p->errs), cmp_err);
	buf_printf(o,
		   ",\"errors\":{\"steps\":%" PRIu64 ",\"failed\":%" PRIu64
		   ",\"rate_pct\":%.4f,\"ci_low_pct\":%.4f,\"ci_high_pct\":%.4f"
		   ",\"sessions_refused\":%" PRIu64 ",\"probe_failed\":%" PRIu64 ",\"top\":[",
		   steps, failed, erate, elo, ehi, p->refused, probe_failed);
	for (size_t i = 0; i < p->nerrs && i < 12; i++) {
		buf_printf(o, "%s{\"function\":\"%s\",\"probe\":%s,\"message\":", i ? "," : "",
			   p->errs[i].fn >= 0 ? ml_fns[p->errs[i].fn].key : "?",
			   p->errs[i].fn >= 0 && ml_fn_class(p->errs[i].fn) == FC_PROBE ? "true"
											: "false");
		json_put_str(o, p->errs[i].msg);
		buf_printf(o, ",\"count\":%" PRIu64 "}", p->errs[i].n);
	}
	buf_puts(o, "]}");
}

enum ml_verdict mgr_point_finish(struct mgr_point *p, const struct ml_cfg *c, double pct,
				 const struct mgr_sink *sk, struct buf *o, bool *uncertain_r,
				 bool *too_short_r)
{
	static const char *const names[] = { "PASS", "FAIL", "INVALID" };
	struct deliv d;
	struct verdict v;
	uint64_t steps = 0, failed = 0;
	double elo, ehi;

	buf_init(&v.fail, 256, ML_TEXT_MAX);
	buf_init(&v.invalid, 256, ML_TEXT_MAX);
	buf_init(&v.uncertain, 256, ML_TEXT_MAX);
	v.too_short = false;
	account(p, c, sk, &d);
	buf_printf(o,
		   "{\"pct\":%.0f,\"rate\":%.3f,\"users\":%" PRIu64 ",\"run_id\":%" PRIu64
		   ",\"t0_ms\":%" PRIu64 ",\"phases\":{\"ramp_s\":%" PRIu64
		   ",\"steady_s\":%" PRIu64 ",\"down_s\":%" PRIu64 ",\"drain_s\":%" PRIu64 "},",
		   pct, c->rate, c->users, c->run_id, c->t0_ms, c->ramp_s, c->steady_s, c->down_s,
		   c->drain_s);
	put_point_functions(p, c, o, &steps, &failed, &v);
	/* lost and duplicated copies, and copies under a covered UID, are failed steps too */
	failed += d.lost + d.dup + d.below;
	steps += d.checked;
	double erate = steps ? 100.0 * (double)failed / (double)steps : 0;
	ml_wilson(failed, steps, &elo, &ehi);
	delivery_rules(p, c, &d, erate, elo, ehi, &v);
	put_point_delivery(p, c, &d, sk, o);
	put_errors(p, o, steps, failed, erate, elo, ehi);
	buf_putc(o, ',');
	ml_server_info_json(&p->server, o);
	buf_putc(o, ',');
	put_ts(o, p);
	buf_printf(o, ",\"agents\":[%s]", buf_cstr(&p->agents));
	if (p->sut_cpu_s >= 0) {
		uint64_t msgs = d.submitted + d.incoming;
		buf_printf(o,
			   ",\"sut_cpu\":{\"cpu_s\":%.3f,\"messages\":%" PRIu64
			   ",\"s_per_1000_messages\":%.3f,\"pids\":",
			   p->sut_cpu_s, msgs, msgs ? p->sut_cpu_s * 1000.0 / (double)msgs : 0.0);
		json_put_str(o, p->sut_pids);
		buf_putc(o, '}');
	}
	/* too few samples decide before anything: such a point is neither a pass nor a fail;
	   then a broken rule fails it; then copies nobody could check leave it invalid */
	enum ml_verdict verdict = v.too_short     ? MV_INVALID
				  : v.fail.len    ? MV_FAIL
				  : v.invalid.len ? MV_INVALID
						  : MV_PASS;
	buf_printf(o, ",\"verdict\":\"%s\",\"pass\":%s,\"valid\":%s,\"uncertain\":%s",
		   names[verdict], verdict == MV_PASS ? "true" : "false",
		   verdict == MV_INVALID ? "false" : "true", v.uncertain.len ? "true" : "false");
	buf_printf(o, ",\"reasons\":[%s],\"invalid_reasons\":[%s],\"uncertain_reasons\":[%s]}",
		   buf_cstr(&v.fail), buf_cstr(&v.invalid), buf_cstr(&v.uncertain));
	if (uncertain_r != NULL)
		*uncertain_r = v.uncertain.len > 0;
	if (too_short_r != NULL)
		*too_short_r = v.too_short;
	buf_release(&v.fail);
	buf_release(&v.invalid);
	buf_release(&v.uncertain);
	return verdict;
}

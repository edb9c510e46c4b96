/* dns.c — owns the resolver: the libunbound context and its result pipe in the loop, the
 * configuration ([dns]), the cache of parsed answers (hash table + LRU, TTL expiry, lookups in
 * flight shared), per-attempt timeouts with retries, DNSSEC status, counters. Record data is
 * read by dns_rr.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <unbound.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "dns/dns.h"
#include "dns/dns_private.h"

#define DNS_BUCKETS_MIN 64
#define DNS_NEG_TTL_MAX 3600 /* negative answers at most this long (seconds) */
#define DNS_TTL_MAX 86400    /* and positive ones */

struct dns_entry {
	struct dns *d;
	enum dns_type type;
	char name[DNS_NAME_MAX + 1];
	uint32_t hash;
	bool done, in_table, in_lru;
	unsigned refs;         /* queries holding it (waiting, or a hit not yet delivered) */
	struct dns_answer ans; /* when done */
	struct dns_rr *rr;
	void **own; /* per record: its TXT text or TLSA data (or NULL) */
	char canon[DNS_NAME_MAX + 1];
	char why[160];
	int64_t expires_ms;
	int ub_id;           /* the libunbound query out, or 0 */
	struct dns_adq *adq; /* trust-ad: the AD check out */
	unsigned attempts_left;
	struct event *timer;
	TAILQ_HEAD(, dns_query) waiters;
	TAILQ_ENTRY(dns_entry) chain; /* hash bucket */
	TAILQ_ENTRY(dns_entry) lru;   /* done entries in the table, oldest use first */
};
TAILQ_HEAD(dns_entry_list, dns_entry);

struct dns_query {
	struct dns *d;
	struct dns_entry *e; /* NULL: an invalid name */
	dns_cb *cb;
	void *arg;
	bool waiting; /* on e->waiters (else: a hit delivered by ev) */
	struct event *ev;
	char name[DNS_NAME_MAX + 1];
	enum dns_type type;
	TAILQ_ENTRY(dns_query) entry; /* e->waiters */
	TAILQ_ENTRY(dns_query) all;   /* d->queries */
};

struct dns {
	struct event_base *base;
	struct ub_ctx *ub;
	struct event *ub_ev;
	enum dns_dnssec dnssec;
	struct sockaddr_storage ad_server; /* trust-ad: the resolver whose AD bit counts */
	socklen_t ad_len;
	int64_t timeout_ms;
	unsigned attempts;
	size_t cache_size, ncached, nbuckets;
	struct dns_entry_list *buckets;
	struct dns_entry_list lru;
	TAILQ_HEAD(, dns_query) queries;
	struct dns_stats stats;
};

static void entry_start(struct dns_entry *e);

const char *dns_status_str(enum dns_status st)
{
	static const char *const names[] = { "ok",           "nodata",
					     "nxdomain",     "temporary failure",
					     "dnssec bogus", "invalid name" };

	return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

void dns_opts_from_conf(struct dns_opts *o, const struct conf *c)
{
	const struct dns_conf *dc = &conf_values(c)->dns;

	memset(o, 0, sizeof(*o));
	o->resolv_conf = dc->resolv_conf;
	o->nameservers = (const char *const *)dc->nameservers->v;
	o->nnameservers = dc->nameservers->n;
	o->timeout_ms = dc->timeout_ms;
	o->attempts = (unsigned)dc->attempts;
	o->dnssec = dc->dnssec;
	o->trust_anchor_file = dc->trust_anchor_file;
	o->cache_size = (size_t)dc->cache_size;
}

/* "1.2.3.4", "1.2.3.4@53", "1.2.3.4:53", "::1", "[::1]:53", "::1@53" into libunbound's
   "addr@port". */
int dns_ns_addr(const char *in, char *out, size_t size)
{
	const char *colon = strchr(in, ':'), *end;

	if (in[0] == '[') {
		if ((end = strchr(in, ']')) == NULL)
			return -1;
		if (end[1] == '\0')
			return snprintf(out, size, "%.*s", (int)(end - in - 1), in + 1) < (int)size
				       ? 0
				       : -1;
		if (end[1] != ':')
			return -1;
		return snprintf(out, size, "%.*s@%s", (int)(end - in - 1), in + 1, end + 2) <
				       (int)size
			       ? 0
			       : -1;
	}
	if (colon != NULL && strchr(colon + 1, ':') == NULL) /* v4:port */
		return snprintf(out, size, "%.*s@%s", (int)(colon - in), in, colon + 1) < (int)size
			       ? 0
			       : -1;
	return snprintf(out, size, "%s", in) < (int)size ? 0 : -1;
}

static int ub_setup(struct dns *d, const struct dns_opts *o, char **error_r)
{
	char addr[128];
	int rc = 0;

	if ((rc = ub_ctx_async(d->ub, 1)) != 0)
		goto fail;
	if (getenv("HERON_DNS_DEBUG") != NULL)
		ub_ctx_debuglevel(d->ub, atoi(getenv("HERON_DNS_DEBUG")));
	for (size_t i = 0; i < o->nnameservers; i++) {
		if (dns_ns_addr(o->nameservers[i], addr, sizeof(addr)) < 0) {
			*error_r = xasprintf("[dns] nameservers: bad address %s",
					     o->nameservers[i]);
			return -1;
		}
		if ((rc = ub_ctx_set_fwd(d->ub, addr)) != 0) {
			*error_r = xasprintf("[dns] nameservers %s: %s", o->nameservers[i],
					     ub_strerror(rc));
			return -1;
		}
	}
	if (o->nnameservers == 0 && o->resolv_conf != NULL && o->resolv_conf[0] != '\0' &&
	    (rc = ub_ctx_resolvconf(d->ub, o->resolv_conf)) != 0) {
		*error_r = xasprintf("[dns] resolv_conf %s: %s", o->resolv_conf, ub_strerror(rc));
		return -1;
	}
	/* forwarders on loopback (a local unbound, systemd-resolved) are the common case */
	if ((rc = ub_ctx_set_option(d->ub, "do-not-query-localhost:", "no")) != 0)
		goto fail;
	/* libunbound answers names under test. (RFC 6761) NXDOMAIN itself; the nameservers
	   decide instead (a private test world serves such zones) */
	if ((rc = ub_ctx_set_option(d->ub, "local-zone:", "test. transparent")) != 0)
		goto fail;
	if (o->dnssec == DNS_DNSSEC_VALIDATE) {
		if (o->trust_anchor_file == NULL || o->trust_anchor_file[0] == '\0') {
			*error_r = xasprintf("[dns] dnssec = validate needs trust_anchor_file");
			return -1;
		}
		if ((rc = ub_ctx_add_ta_file(d->ub, o->trust_anchor_file)) != 0) {
			*error_r = xasprintf("[dns] trust_anchor_file %s: %s",
					     o->trust_anchor_file, ub_strerror(rc));
			return -1;
		}
	} else if ((rc = ub_ctx_set_option(d->ub, "module-config:", "iterator")) != 0) {
		goto fail;
	}
	return 0;
fail:
	*error_r = xasprintf("libunbound: %s", ub_strerror(rc));
	return -1;
}

static void ub_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;
	int rc = ub_process(d->ub);

	if (rc != 0)
		log_warnx("dns: ub_process: %s", ub_strerror(rc));
}

int dns_new(struct event_base *base, const struct dns_opts *o, struct dns **dns_r, char **error_r)
{
	struct dns *d = xcalloc(1, sizeof(*d));

	d->base = base;
	d->dnssec = o->dnssec;
	d->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
	d->attempts = o->attempts > 0 ? o->attempts : 1;
	d->cache_size = o->cache_size;
	for (d->nbuckets = DNS_BUCKETS_MIN;
	     d->nbuckets < o->cache_size / 2 && d->nbuckets < (1u << 20); d->nbuckets *= 2)
		;
	d->buckets = xcalloc(d->nbuckets, sizeof(*d->buckets));
	for (size_t i = 0; i < d->nbuckets; i++)
		TAILQ_INIT(&d->buckets[i]);
	TAILQ_INIT(&d->lru);
	TAILQ_INIT(&d->queries);
	if ((d->ub = ub_ctx_create()) == NULL) {
		*error_r = xasprintf("libunbound: cannot create a context");
		dns_free(&d);
		return -1;
	}
	if (ub_setup(d, o, error_r) < 0) {
		dns_free(&d);
		return -1;
	}
	if (d->dnssec == DNS_DNSSEC_TRUST_AD && dns_ad_server(o, &d->ad_server, &d->ad_len) < 0) {
		*error_r = xasprintf("[dns] dnssec = trust-ad needs a nameserver address");
		dns_free(&d);
		return -1;
	}
	d->ub_ev = event_new(base, ub_fd(d->ub), EV_READ | EV_PERSIST, ub_read_cb, d);
	event_add(d->ub_ev, NULL);
	*dns_r = d;
	return 0;
}

static uint32_t name_hash(const char *name, enum dns_type type)
{
	uint32_t h = 2166136261u ^ (uint32_t)type;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h;
}

static void entry_unlink(struct dns_entry *e)
{
	struct dns *d = e->d;

	if (e->in_table) {
		TAILQ_REMOVE(&d->buckets[e->hash & (d->nbuckets - 1)], e, chain);
		e->in_table = false;
	}
	if (e->in_lru) {
		TAILQ_REMOVE(&d->lru, e, lru);
		e->in_lru = false;
		d->ncached--;
	}
}

static void entry_free(struct dns_entry *e)
{
	for (size_t i = 0; e->own != NULL && i < e->ans.n; i++)
		free(e->own[i]);
	free(e->own);
	free(e->rr);
	if (e->timer != NULL)
		event_free(e->timer);
	dns_ad_cancel(&e->adq);
	free(e);
}

/* A query let go of e: free e when nothing holds it any more. */
static void entry_release(struct dns_entry *e)
{
	if (--e->refs == 0 && !e->in_table && e->ub_id == 0 && e->done)
		entry_free(e);
}

static void deliver(struct dns_query *q, bool cached)
{
	struct dns_entry *e = q->e;
	struct dns_answer a;

	if (e == NULL) {
		a = (struct dns_answer){ .status = DNS_EINVAL,
					 .type = q->type,
					 .name = q->name,
					 .canon = q->name,
					 .why = "invalid domain name" };
		q->cb(&a, q->arg);
		return;
	}
	a = e->ans;
	a.cached = cached;
	if (e->in_lru) {
		int64_t left = (e->expires_ms - clock_mono_ms()) / 1000;

		a.ttl = left > 0 ? (uint32_t)left : 0;
	}
	q->cb(&a, q->arg);
}

static void query_free(struct dns_query *q)
{
	TAILQ_REMOVE(&q->d->queries, q, all);
	if (q->ev != NULL)
		event_free(q->ev);
	free(q);
}

static void hit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_query *q = arg;
	struct dns_entry *e = q->e;

	deliver(q, true);
	if (e != NULL)
		entry_release(e);
	query_free(q);
}

/* The answer of libunbound into e->ans. */
static void entry_fill(struct dns_entry *e, int err, struct ub_result *r)
{
	struct dns *d = e->d;
	size_t n = 0, bad = 0;

	e->ans.type = e->type;
	e->ans.name = e->name;
	e->ans.canon = e->canon;
	e->ans.why = e->why;
	snprintf(e->canon, sizeof(e->canon), "%s", e->name);
	if (err != 0) {
		e->ans.status = DNS_ETEMP;
		snprintf(e->why, sizeof(e->why), "resolver: %s", ub_strerror(err));
		return;
	}
	if (r->bogus && d->dnssec == DNS_DNSSEC_VALIDATE) {
		e->ans.status = DNS_EBOGUS;
		snprintf(e->why, sizeof(e->why), "dnssec: %s",
			 r->why_bogus ? r->why_bogus : "bogus");
		return;
	}
	if (r->rcode != 0 && r->rcode != 3) {
		e->ans.status = DNS_ETEMP;
		snprintf(e->why, sizeof(e->why), "%s",
			 r->rcode == 2   ? "SERVFAIL"
			 : r->rcode == 5 ? "REFUSED"
					 : "error answer");
		return;
	}
	if (r->canonname != NULL) {
		size_t used;
		char canon[DNS_NAME_MAX + 2];

		snprintf(canon, sizeof(canon), "%s", r->canonname);
		used = strlen(canon);
		if (used > 0 && canon[used - 1] == '.')
			canon[used - 1] = '\0';
		if (dns_name_valid(canon) || canon[0] == '\0')
			for (size_t i = 0; (e->canon[i] = (char)(canon[i] >= 'A' && canon[i] <= 'Z'
									 ? canon[i] + 32
									 : canon[i])) != '\0';
			     i++)
				;
	}
	if (d->dnssec == DNS_DNSSEC_VALIDATE)
		e->ans.secure = r->secure != 0; /* trust-ad: dns_ad.c asks after this */
	e->ans.ttl = r->ttl > 0 ? (uint32_t)r->ttl : 0;
	if (r->nxdomain || r->rcode == 3) {
		e->ans.status = DNS_NXDOMAIN;
		if (e->ans.ttl > DNS_NEG_TTL_MAX)
			e->ans.ttl = DNS_NEG_TTL_MAX;
		return;
	}
	for (size_t i = 0; r->havedata && r->data[i] != NULL; i++)
		n++;
	if (n > DNS_RR_MAX) {
		log_warnx("dns: %s: %zu records, the first %d kept", e->name, n, DNS_RR_MAX);
		n = DNS_RR_MAX;
	}
	e->rr = n ? xcalloc(n, sizeof(*e->rr)) : NULL;
	e->own = n ? xcalloc(n, sizeof(*e->own)) : NULL;
	for (size_t i = 0; i < n; i++) {
		struct dns_rr *rr = &e->rr[e->ans.n];
		size_t len = (size_t)r->len[i];
		char *txt = e->type == DNS_T_TXT ? xmalloc(len + 1) : NULL;

		if (len > DNS_TXT_MAX + 256 || dns_rr_parse(e->type, (const uint8_t *)r->data[i],
							    len, rr, txt, len + 1) < 0) {
			free(txt);
			bad++;
			continue;
		}
		if (e->type == DNS_T_TLSA) {
			uint8_t *copy = xmalloc(rr->u.tlsa.len + 1);

			memcpy(copy, rr->u.tlsa.data, rr->u.tlsa.len);
			rr->u.tlsa.data = copy;
			e->own[e->ans.n] = copy;
		} else {
			e->own[e->ans.n] = txt;
		}
		e->ans.n++;
	}
	e->ans.rr = e->rr;
	if (e->ans.n == 0 && bad > 0) {
		e->ans.status = DNS_ETEMP;
		snprintf(e->why, sizeof(e->why), "malformed %s records", n ? "all" : "no");
	} else {
		e->ans.status = e->ans.n > 0 ? DNS_OK : DNS_NODATA;
		if (e->ans.status == DNS_NODATA && e->ans.ttl > DNS_NEG_TTL_MAX)
			e->ans.ttl = DNS_NEG_TTL_MAX;
		if (e->ans.ttl > DNS_TTL_MAX)
			e->ans.ttl = DNS_TTL_MAX;
	}
}

/* Keeps a finished entry in the cache when its answer may be reused, evicting the oldest. */
static void entry_cache(struct dns_entry *e)
{
	struct dns *d = e->d;
	enum dns_status st = e->ans.status;

	if (d->cache_size == 0 || e->ans.ttl == 0 ||
	    (st != DNS_OK && st != DNS_NODATA && st != DNS_NXDOMAIN)) {
		entry_unlink(e);
		return;
	}
	e->expires_ms = clock_mono_ms() + (int64_t)e->ans.ttl * 1000;
	while (d->ncached >= d->cache_size) {
		struct dns_entry *old = TAILQ_FIRST(&d->lru);

		entry_unlink(old);
		if (old->refs == 0)
			entry_free(old);
	}
	TAILQ_INSERT_TAIL(&d->lru, e, lru);
	e->in_lru = true;
	d->ncached++;
}

static void entry_complete(struct dns_entry *e);

static void ad_cb(bool ad, void *arg)
{
	struct dns_entry *e = arg;

	e->adq = NULL;
	e->ans.secure = ad;
	entry_complete(e);
}

static void entry_finish(struct dns_entry *e, int err, struct ub_result *r, const char *why)
{
	struct dns *d = e->d;
	enum dns_status st;

	e->ub_id = 0;
	event_del(e->timer);
	entry_fill(e, err, r);
	if (why != NULL)
		snprintf(e->why, sizeof(e->why), "%s", why);
	st = e->ans.status;
	if (d->dnssec == DNS_DNSSEC_TRUST_AD &&
	    (st == DNS_OK || st == DNS_NODATA || st == DNS_NXDOMAIN)) {
		/* the trusted resolver's verdict on the same question (its cache answers) */
		e->adq = dns_ad_ask(d->base, (struct sockaddr *)&d->ad_server, d->ad_len, e->name,
				    (uint16_t)e->type, d->timeout_ms, ad_cb, e);
		return;
	}
	entry_complete(e);
}

/* The answer is final: cached when it may be, handed to every waiter. */
static void entry_complete(struct dns_entry *e)
{
	struct dns_query *q;

	e->done = true;
	entry_cache(e);
	e->refs++; /* the loop below may drop the last waiter */
	while ((q = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, q, entry);
		q->waiting = false;
		deliver(q, false);
		e->refs--;
		query_free(q);
	}
	entry_release(e);
}

static void ub_cb(void *arg, int err, struct ub_result *r)
{
	entry_finish(arg, err, r, NULL);
	if (r != NULL)
		ub_resolve_free(r);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_entry *e = arg;

	ub_cancel(e->d->ub, e->ub_id);
	e->ub_id = 0;
	if (e->attempts_left > 0) {
		entry_start(e);
		return;
	}
	entry_finish(e, 0, &(struct ub_result){ .rcode = 2 }, "no answer in time");
}

static void entry_start(struct dns_entry *e)
{
	struct dns *d = e->d;
	struct timeval tv = { d->timeout_ms / 1000, (d->timeout_ms % 1000) * 1000 };
	int rc;

	e->attempts_left--;
	d->stats.queries++;
	rc = ub_resolve_async(d->ub, e->name, (int)e->type, 1 /* IN */, e, ub_cb, &e->ub_id);
	if (rc != 0) {
		e->ub_id = 0;
		entry_finish(e, rc, NULL, NULL);
		return;
	}
	evtimer_add(e->timer, &tv);
}

static struct dns_entry *entry_find(struct dns *d, const char *name, enum dns_type type,
				    uint32_t h)
{
	struct dns_entry *e;

	TAILQ_FOREACH(e, &d->buckets[h & (d->nbuckets - 1)], chain)
	if (e->type == type && e->hash == h && strcmp(e->name, name) == 0)
		return e;
	return NULL;
}

struct dns_query *dns_lookup(struct dns *d, const char *name, enum dns_type type, dns_cb *cb,
			     void *arg)
{
	struct dns_query *q = xcalloc(1, sizeof(*q));
	struct dns_entry *e;
	size_t len = strlen(name);
	uint32_t h;

	q->d = d;
	TAILQ_INSERT_TAIL(&d->queries, q, all);
	q->cb = cb;
	q->arg = arg;
	q->type = type;
	d->stats.lookups++;
	if (!dns_name_valid(name)) {
		snprintf(q->name, sizeof(q->name), "%.*s", DNS_NAME_MAX, name);
		goto later;
	}
	if (name[len - 1] == '.')
		len--;
	for (size_t i = 0; i < len; i++)
		q->name[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
	q->name[len] = '\0';
	h = name_hash(q->name, type);
	e = entry_find(d, q->name, type, h);
	if (e != NULL && e->done && e->expires_ms <= clock_mono_ms()) {
		entry_unlink(e);
		if (e->refs == 0)
			entry_free(e);
		e = NULL;
	}
	if (e != NULL) {
		d->stats.hits++;
		q->e = e;
		e->refs++;
		if (e->done) {
			TAILQ_REMOVE(&d->lru, e, lru);
			TAILQ_INSERT_TAIL(&d->lru, e, lru);
			goto later;
		}
		q->waiting = true;
		TAILQ_INSERT_TAIL(&e->waiters, q, entry);
		return q;
	}
	e = xcalloc(1, sizeof(*e));
	e->d = d;
	e->type = type;
	e->hash = h;
	snprintf(e->name, sizeof(e->name), "%s", q->name);
	TAILQ_INIT(&e->waiters);
	TAILQ_INSERT_HEAD(&d->buckets[h & (d->nbuckets - 1)], e, chain);
	e->in_table = true;
	e->timer = evtimer_new(d->base, timeout_cb, e);
	e->attempts_left = d->attempts;
	e->refs = 1;
	q->e = e;
	q->waiting = true;
	TAILQ_INSERT_TAIL(&e->waiters, q, entry);
	entry_start(e);
	return q;
later:
	q->ev = evtimer_new(d->base, hit_cb, q);
	event_active(q->ev, EV_TIMEOUT, 0);
	return q;
}

void dns_cancel(struct dns_query **qp)
{
	struct dns_query *q = *qp;
	struct dns_entry *e;

	if (q == NULL)
		return;
	*qp = NULL;
	e = q->e;
	if (q->waiting)
		TAILQ_REMOVE(&e->waiters, q, entry);
	/* a lookup in flight goes on without waiters: its answer fills the cache */
	if (e != NULL)
		entry_release(e);
	query_free(q);
}

void dns_stats(const struct dns *d, struct dns_stats *s)
{
	*s = d->stats;
}

void dns_free(struct dns **dp)
{
	struct dns *d = *dp;

	if (d == NULL)
		return;
	*dp = NULL;
	while (!TAILQ_EMPTY(&d->queries)) {
		struct dns_query *q = TAILQ_FIRST(&d->queries);

		dns_cancel(&q);
	}
	for (size_t i = 0; d->buckets != NULL && i < d->nbuckets; i++) {
		struct dns_entry *e;

		while ((e = TAILQ_FIRST(&d->buckets[i])) != NULL) {
			entry_unlink(e);
			if (e->ub_id != 0)
				ub_cancel(d->ub, e->ub_id);
			entry_free(e);
		}
	}
	if (d->ub_ev != NULL)
		event_free(d->ub_ev);
	if (d->ub != NULL)
		ub_ctx_delete(d->ub);
	free(d->buckets);
	free(d);
}

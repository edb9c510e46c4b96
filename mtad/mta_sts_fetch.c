/* mta_sts_fetch.c — owns the MTA-STS policy cache of a process (mta_sts.h): the `_mta-sts`
 * TXT lookup, the HTTPS fetch of the policy from the event loop (address lookup, connect,
 * TLS verified for mta-sts.DOMAIN, an HTTP/1.0 GET without redirects, at most
 * STS_POLICY_MAX bytes of body, text/plain only), requests for one domain sharing one fetch,
 * and the policies kept for their max_age. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mtad/mta_sts.h"

#define STS_CACHE_MAX 10000
#define STS_HEAD_MAX 8192

struct sts_entry {
	struct sts_cache *c;
	char domain[DNS_NAME_MAX + 1];
	bool have; /* policy holds a fetched policy */
	struct sts_policy policy;
	char id[STS_ID_MAX + 1]; /* of the policy held */
	int64_t expires;         /* wall clock, seconds */
	/* the lookup in progress */
	bool busy;
	char want_id[STS_ID_MAX + 1];
	struct dns_query *q;
	struct net_connect *nc;
	struct bufferevent *bev;
	struct evbuffer *resp;
	struct event *timer;
	TAILQ_HEAD(, sts_req) waiters;
	TAILQ_ENTRY(sts_entry) entry;
};

struct sts_req {
	struct sts_entry *e;
	sts_cb *cb;
	void *arg;
	TAILQ_ENTRY(sts_req) entry;
};

struct sts_cache {
	struct event_base *base;
	struct dns *dns;
	SSL_CTX *ctx;
	char port[8];
	int64_t timeout_ms;
	size_t n;
	TAILQ_HEAD(, sts_entry) entries; /* most recently used last */
};

static void fetch_start(struct sts_entry *e);

struct sts_cache *sts_cache_new(struct event_base *base, struct dns *dns, SSL_CTX *verify_ctx,
				const char *port, int64_t timeout_ms)
{
	struct sts_cache *c = xcalloc(1, sizeof(*c));

	c->base = base;
	c->dns = dns;
	c->ctx = verify_ctx;
	snprintf(c->port, sizeof(c->port), "%s", port);
	c->timeout_ms = timeout_ms;
	TAILQ_INIT(&c->entries);
	return c;
}

/* Ends the lookup in progress: every waiter gets the policy held (if still valid). */
static void entry_done(struct sts_entry *e)
{
	struct sts_req *r;
	bool valid = e->have && e->expires > clock_wall_s();

	dns_cancel(&e->q);
	net_connect_cancel(&e->nc);
	if (e->bev != NULL)
		bufferevent_free(e->bev);
	e->bev = NULL;
	if (e->resp != NULL)
		evbuffer_free(e->resp);
	e->resp = NULL;
	if (e->timer != NULL)
		evtimer_del(e->timer);
	e->busy = false;
	while ((r = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, r, entry);
		r->cb(valid ? &e->policy : NULL, r->arg);
		free(r);
	}
}

static void fetch_fail(struct sts_entry *e, const char *why)
{
	log_warnx("mta-sts %s: policy fetch failed: %s%s", e->domain, why,
		  e->have && e->expires > clock_wall_s() ? " (the cached policy stays in force)"
							 : "");
	entry_done(e);
}

/* The whole response is in e->resp. */
static void fetch_parse(struct sts_entry *e)
{
	size_t len = evbuffer_get_length(e->resp);
	char *p = (char *)evbuffer_pullup(e->resp, -1), *body;
	const char *err;
	struct sts_policy pol;

	if (p == NULL || len < 12 ||
	    (strncmp(p, "HTTP/1.0 ", 9) != 0 && strncmp(p, "HTTP/1.1 ", 9) != 0)) {
		fetch_fail(e, "not an HTTP response");
		return;
	}
	if (strncmp(p + 9, "200", 3) != 0) { /* redirects are not followed (RFC 8461 3.3) */
		fetch_fail(e, "HTTP status is not 200");
		return;
	}
	body = memmem(p, len, "\r\n\r\n", 4);
	if (body == NULL || body - p > STS_HEAD_MAX) {
		fetch_fail(e, "no end of the HTTP header");
		return;
	}
	bool plain = false;
	for (char *h = memchr(p, '\n', (size_t)(body - p)); h != NULL && h < body;
	     h = memchr(h + 1, '\n', (size_t)(body - h - 1))) {
		if (strncasecmp(h + 1, "Content-Type:", 13) == 0) {
			char *v = h + 14;

			while (*v == ' ' || *v == '\t')
				v++;
			plain = strncasecmp(v, "text/plain", 10) == 0 &&
				(v[10] == '\r' || v[10] == ';' || v[10] == ' ');
		}
	}
	if (!plain) {
		fetch_fail(e, "the policy is not served as text/plain");
		return;
	}
	body += 4;
	if (sts_policy_parse(body, len - (size_t)(body - p), &pol, &err) < 0) {
		fetch_fail(e, err);
		return;
	}
	e->policy = pol;
	e->have = true;
	snprintf(e->id, sizeof(e->id), "%s", e->want_id);
	e->expires = clock_wall_s() + pol.max_age;
	log_info("mta-sts %s: policy id=%s mode=%s max_age=%" PRId64 " mx=%zu", e->domain, e->id,
		 sts_mode_name(pol.mode), pol.max_age, pol.nmx);
	entry_done(e);
}

static void http_read_cb(struct bufferevent *bev, void *arg)
{
	struct sts_entry *e = arg;

	evbuffer_add_buffer(e->resp, bufferevent_get_input(bev));
	if (evbuffer_get_length(e->resp) > STS_POLICY_MAX + STS_HEAD_MAX)
		fetch_fail(e, "response too large");
}

static void http_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct sts_entry *e = arg;
	char host[DNS_NAME_MAX + 16], err[256];

	if (what & BEV_EVENT_CONNECTED) {
		snprintf(host, sizeof(host), "mta-sts.%s", e->domain);
		evbuffer_add_printf(bufferevent_get_output(bev),
				    "GET /.well-known/mta-sts.txt HTTP/1.0\r\nHost: %s\r\n"
				    "User-Agent: Heron mtad\r\nConnection: close\r\n\r\n",
				    host);
		return;
	}
	if ((what & BEV_EVENT_EOF) && evbuffer_get_length(e->resp) > 0) {
		evbuffer_add_buffer(e->resp, bufferevent_get_input(bev));
		fetch_parse(e);
		return;
	}
	fetch_fail(e, (what & BEV_EVENT_TIMEOUT)            ? "timed out"
		      : tls_error(bev, err, sizeof(err))[0] ? err
							    : "connection failed");
}

static void connect_cb(struct bufferevent *plain, const char *error, void *arg)
{
	struct sts_entry *e = arg;
	char host[DNS_NAME_MAX + 16];
	struct timeval tv = { e->c->timeout_ms / 1000, (e->c->timeout_ms % 1000) * 1000 };
	SSL *ssl;

	e->nc = NULL;
	if (plain == NULL) {
		fetch_fail(e, error);
		return;
	}
	snprintf(host, sizeof(host), "mta-sts.%s", e->domain);
	/* the certificate must verify for mta-sts.DOMAIN (RFC 8461 3.3) */
	if ((ssl = SSL_new(e->c->ctx)) == NULL || SSL_set_tlsext_host_name(ssl, host) != 1 ||
	    SSL_set1_host(ssl, host) != 1) {
		SSL_free(ssl);
		bufferevent_free(plain);
		fetch_fail(e, "TLS setup failed");
		return;
	}
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	e->bev = tls_starttls_client_ssl(plain, ssl, NULL);
	e->resp = evbuffer_new();
	bufferevent_setcb(e->bev, http_read_cb, NULL, http_event_cb, e);
	bufferevent_set_timeouts(e->bev, &tv, &tv);
	bufferevent_enable(e->bev, EV_READ | EV_WRITE);
}

static void addr_cb(const struct dns_answer *a, void *arg)
{
	struct sts_entry *e = arg;
	char addr[INET6_ADDRSTRLEN];

	e->q = NULL;
	if (a->status != DNS_OK) {
		fetch_fail(e, "mta-sts host has no address");
		return;
	}
	inet_ntop(AF_INET, &a->rr[0].u.a, addr, sizeof(addr));
	e->nc = net_connect(e->c->base, NULL, addr, e->c->port, (int)e->c->timeout_ms, connect_cb,
			    e);
}

static void fetch_start(struct sts_entry *e)
{
	char host[DNS_NAME_MAX + 16];

	snprintf(host, sizeof(host), "mta-sts.%s", e->domain);
	e->q = dns_lookup(e->c->dns, host, DNS_T_A, addr_cb, e);
}

static void txt_cb(const struct dns_answer *a, void *arg)
{
	struct sts_entry *e = arg;
	char id[STS_ID_MAX + 1];
	int found = 0;

	e->q = NULL;
	for (size_t i = 0; a->status == DNS_OK && i < a->n; i++) {
		int rc = sts_txt_parse(a->rr[i].u.txt.text, a->rr[i].u.txt.len, id);

		if (rc != 0 && found != 0) { /* more than one STS record: none (RFC 8461 3.1) */
			found = -1;
			break;
		}
		if (rc != 0) {
			found = rc;
			snprintf(e->want_id, sizeof(e->want_id), "%s", id);
		}
	}
	/* no (valid) record: an unexpired cached policy stays in force (RFC 8461 5.1) */
	if (found <= 0 ||
	    (e->have && strcmp(e->id, e->want_id) == 0 && e->expires > clock_wall_s())) {
		entry_done(e);
		return;
	}
	fetch_start(e);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	fetch_fail(arg, "timed out");
}

static struct sts_entry *entry_get(struct sts_cache *c, const char *domain)
{
	struct sts_entry *e;

	TAILQ_FOREACH(e, &c->entries, entry)
	if (strcasecmp(e->domain, domain) == 0) {
		TAILQ_REMOVE(&c->entries, e, entry);
		TAILQ_INSERT_TAIL(&c->entries, e, entry);
		return e;
	}
	if (c->n >= STS_CACHE_MAX) {
		TAILQ_FOREACH(e, &c->entries, entry)
		if (!e->busy)
			break;
		if (e != NULL) {
			TAILQ_REMOVE(&c->entries, e, entry);
			event_free(e->timer);
			free(e);
			c->n--;
		}
	}
	e = xcalloc(1, sizeof(*e));
	e->c = c;
	snprintf(e->domain, sizeof(e->domain), "%s", domain);
	TAILQ_INIT(&e->waiters);
	e->timer = evtimer_new(c->base, timeout_cb, e);
	TAILQ_INSERT_TAIL(&c->entries, e, entry);
	c->n++;
	return e;
}

struct sts_req *sts_lookup(struct sts_cache *c, const char *domain, sts_cb *cb, void *arg)
{
	struct sts_entry *e = entry_get(c, domain);
	struct sts_req *r = xcalloc(1, sizeof(*r));
	char name[DNS_NAME_MAX + 16];
	struct timeval tv = { 2 * c->timeout_ms / 1000, (2 * c->timeout_ms % 1000) * 1000 };

	r->e = e;
	r->cb = cb;
	r->arg = arg;
	TAILQ_INSERT_TAIL(&e->waiters, r, entry);
	if (e->busy)
		return r;
	e->busy = true;
	evtimer_add(e->timer, &tv);
	/* the TXT answer is cached by the resolver for its TTL: one query per TTL */
	snprintf(name, sizeof(name), "_mta-sts.%s", domain);
	e->q = dns_lookup(c->dns, name, DNS_T_TXT, txt_cb, e);
	return r;
}

void sts_cancel(struct sts_req **rp)
{
	struct sts_req *r = *rp;

	if (r == NULL)
		return;
	*rp = NULL;
	TAILQ_REMOVE(&r->e->waiters, r, entry);
	free(r);
}

void sts_cache_free(struct sts_cache **cp)
{
	struct sts_cache *c = *cp;
	struct sts_entry *e;

	if (c == NULL)
		return;
	*cp = NULL;
	while ((e = TAILQ_FIRST(&c->entries)) != NULL) {
		struct sts_req *r;

		TAILQ_REMOVE(&c->entries, e, entry);
		while ((r = TAILQ_FIRST(&e->waiters)) != NULL) {
			TAILQ_REMOVE(&e->waiters, r, entry);
			free(r);
		}
		dns_cancel(&e->q);
		net_connect_cancel(&e->nc);
		if (e->bev != NULL)
			bufferevent_free(e->bev);
		if (e->resp != NULL)
			evbuffer_free(e->resp);
		event_free(e->timer);
		free(e);
	}
	free(c);
}

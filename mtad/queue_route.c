/* queue_route.c — owns finding where a work goes through DNS (RFC 5321 5.1): the MX lookup of
 * the next hop (null MX, NXDOMAIN and bad records answered at once, SERVFAIL deferred, no MX:
 * the domain itself), the A and AAAA lookups of each MX host in order, mail loops to our own
 * addresses (RFC 5321 5.1: only exchangers better than us are tried; none: bounce), and moving a
 * work to the next address or host when a try fails before any recipient was taken. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mtad/relay.h"

static void host_lookup(struct queue_runner *qr, struct qwork *w);
static void route_ready(struct queue_runner *qr, struct qwork *w);
static void go_addr(struct queue_runner *qr, struct qwork *w);

static uint32_t mx_random(void)
{
	return (uint32_t)random();
}

/* Every recipient of w gets code/text; w ends. */
static void fail_all(struct qwork *w, int code, const char *text)
{
	sts_cancel(&w->sts);
	for (size_t k = 0; k < w->n; k++)
		queue_rcpt_outcome(w, k, code, text, "none");
	queue_work_done(w);
}

/* No hop is left: the last try's answer (with the tries before it), or why there was none. */
static void fail_out(struct qwork *w)
{
	char text[1024];

	if (w->tries == 0 && w->last_code == 0) {
		if (w->host_temp)
			snprintf(text, sizeof(text),
				 "4.4.3 no address of the mail exchangers of %s "
				 "could be found now: %s",
				 w->nh.name, buf_cstr(&w->trylog));
		else
			snprintf(text, sizeof(text),
				 "5.4.4 the mail exchangers of %s have no "
				 "address: %s",
				 w->nh.name, buf_cstr(&w->trylog));
		fail_all(w, w->host_temp ? 451 : 554, text);
		return;
	}
	snprintf(text, sizeof(text), "%s%s%s", w->last_text, w->tries > 1 ? "; tries: " : "",
		 w->tries > 1 ? buf_cstr(&w->trylog) : "");
	for (size_t k = 0; k < w->n; k++)
		queue_rcpt_outcome(w, k, w->last_code, text, w->dest_relay);
	queue_work_done(w);
}

static void trylog_add(struct qwork *w, const char *who, const char *what)
{
	if (w->trylog.len > 0)
		buf_puts(&w->trylog, "; ");
	buf_printf(&w->trylog, "%s: %s", who, what);
}

static void mx_cb(const struct dns_answer *a, void *arg)
{
	struct qwork *w = arg;
	struct queue_runner *qr = w->job->qr;
	struct dns_mx *mx;
	char text[600];

	w->q[0] = NULL;
	w->mx_secure = a->secure;
	switch (a->status) {
	case DNS_NXDOMAIN:
	case DNS_EINVAL:
		snprintf(text, sizeof(text), "5.1.2 the recipient domain %s does not exist (%s)",
			 w->nh.name, dns_status_str(a->status));
		fail_all(w, 550, text);
		return;
	case DNS_ETEMP:
	case DNS_EBOGUS:
		snprintf(text, sizeof(text), "4.4.3 MX lookup of %s failed: %s", w->nh.name,
			 a->why);
		fail_all(w, 451, text);
		return;
	case DNS_NODATA: /* RFC 5321 5.1: the domain is its own exchanger */
		w->nmx = 1;
		w->mx[0].pref = 0;
		snprintf(w->mx[0].name, sizeof(w->mx[0].name), "%.*s", DNS_NAME_MAX, w->nh.name);
		break;
	case DNS_OK:
		mx = xcalloc(a->n, sizeof(*mx));
		for (size_t i = 0; i < a->n; i++)
			mx[i] = a->rr[i].u.mx;
		enum mx_verdict v = mx_order(mx, a->n, w->mx, MX_HOSTS_MAX, &w->nmx, mx_random);
		free(mx);
		if (v == MX_NULL) {
			snprintf(text, sizeof(text),
				 "5.1.10 the recipient domain %s accepts no mail "
				 "(null MX)",
				 w->nh.name);
			fail_all(w, 556, text);
			return;
		}
		if (v == MX_INVALID) {
			snprintf(text, sizeof(text),
				 "5.4.4 the MX records of %s name no usable host", w->nh.name);
			fail_all(w, 554, text);
			return;
		}
		break;
	}
	w->mx_ready = true;
	route_ready(qr, w);
}

static bool is_own(const struct queue_runner *qr, const char *addr)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		return false;
	return conf_cidrs_match(qr->own, (struct sockaddr *)&ss);
}

/* The TLS level for the host in hand (tls_policy_decide); -1 when it cannot be used now. */
static int host_tls(struct qwork *w)
{
	struct tls_facts f = { .override = w->nh.tls,
			       .mx_secure = w->mx_secure,
			       .addr_secure = w->ans[0].secure || w->ans[1].secure,
			       .tlsa_status = w->ans[2].status,
			       .tlsa_secure = w->ans[2].secure };
	const char *defer;

	if (!w->ans[2].done)
		f.tlsa_status = DNS_NODATA;
	for (size_t i = 0; i < w->ans[2].n; i++)
		f.tlsa_usable += tls_tlsa_usable(w->tlsa[i].usage, w->tlsa[i].selector,
						 w->tlsa[i].mtype, w->tlsa[i].len);
	w->tls = tls_policy_decide(&f, &defer);
	/* MTA-STS applies where DANE does not (RFC 8461 2) */
	if (defer == NULL && w->tls == TLSL_MAY && w->sts_pol != NULL &&
	    w->sts_pol->mode == STS_ENFORCE)
		w->tls = TLSL_STS;
	if (defer == NULL && w->job->qm.requiretls && w->tls != TLSL_DANE && w->tls != TLSL_STS &&
	    w->tls != TLSL_VERIFY) {
		/* RFC 8689 4.2.1: the exchanger's name from a validated answer (or our config),
		   its certificate verified for that name; else no path for this message */
		if (w->mx_secure && w->tls != TLSL_NONE && !mx_is_literal(w->mx[w->mxi].name))
			w->tls = TLSL_VERIFY;
		else
			defer = "5.7.30 REQUIRETLS support required: no authenticated TLS path to the "
				"exchanger";
	}
	if (defer != NULL) {
		bool perm = defer[0] == '5';

		trylog_add(w, w->mx[w->mxi].name, defer);
		w->last_code = perm ? 550 : 451;
		snprintf(w->last_text, sizeof(w->last_text), "%s (%s)", defer, w->mx[w->mxi].name);
		snprintf(w->dest_relay, sizeof(w->dest_relay), "%s", w->mx[w->mxi].name);
		return -1;
	}
	return 0;
}

/* The address (and TLSA) lookups of the current host are in. */
static void host_addrs(struct queue_runner *qr, struct qwork *w)
{
	const char *host = w->mx[w->mxi].name;
	char text[600];

	w->naddr = mx_interleave(w->ans[0].addr, w->ans[0].n, w->ans[1].addr, w->ans[1].n, w->addr,
				 QUEUE_MX_ADDRS);
	if (w->naddr == 0) {
		enum dns_status s6 = w->ans[0].status, s4 = w->ans[1].status;
		bool temp = s6 == DNS_ETEMP || s6 == DNS_EBOGUS || s4 == DNS_ETEMP ||
			    s4 == DNS_EBOGUS;

		w->host_temp |= temp;
		snprintf(text, sizeof(text), "address lookup: %s",
			 temp ? "temporary failure" : dns_status_str(s4 == DNS_OK ? s6 : s4));
		trylog_add(w, host, text);
		w->mxi++;
		host_lookup(qr, w);
		return;
	}
	for (size_t i = 0; i < w->naddr; i++) {
		if (!is_own(qr, w->addr[i]))
			continue;
		/* we are this exchanger: only better ones may be tried (RFC 5321 5.1) */
		size_t keep = 0;
		while (keep < w->mxi && w->mx[keep].pref < w->mx[w->mxi].pref)
			keep++;
		log_info("%016" PRIx64 ": MX %s of %s is this host (%s)", w->job->qm.id, host,
			 w->nh.name, w->addr[i]);
		if (keep == 0) {
			snprintf(text, sizeof(text),
				 "5.4.6 mail for %s loops back to myself (MX %s "
				 "is %s)",
				 w->nh.name, host, w->addr[i]);
			fail_all(w, 554, text);
			return;
		}
		w->nmx = w->mxi;
		host_lookup(qr, w);
		return;
	}
	if (host_tls(w) < 0) {
		w->mxi++;
		host_lookup(qr, w);
		return;
	}
	w->ai = 0;
	go_addr(qr, w);
}

static void tlsa_cb(const struct dns_answer *a, void *arg)
{
	struct qwork *w = arg;

	w->q[2] = NULL;
	w->ans[2].done = true;
	w->ans[2].status = a->status;
	w->ans[2].secure = a->secure;
	w->ans[2].n = 0;
	w->tlsa = a->n ? xcalloc(a->n < TLSA_MAX ? a->n : TLSA_MAX, sizeof(*w->tlsa)) : NULL;
	for (size_t i = 0; a->status == DNS_OK && i < a->n && w->ans[2].n < TLSA_MAX; i++) {
		const struct dns_tlsa *t = &a->rr[i].u.tlsa;
		struct tlsa_rec *r = &w->tlsa[w->ans[2].n];

		if (t->len > TLSA_DATA_MAX)
			continue;
		r->usage = t->usage;
		r->selector = t->selector;
		r->mtype = t->mtype;
		r->len = t->len;
		r->data = xmalloc(t->len + 1);
		memcpy(r->data, t->data, t->len);
		w->ans[2].n++;
	}
	if (w->ans[0].done && w->ans[1].done)
		host_addrs(w->job->qr, w);
}

static void addr_cb(const struct dns_answer *a, void *arg)
{
	struct qwork *w = arg;
	int k = a->type == DNS_T_AAAA ? 0 : 1;

	w->q[k] = NULL;
	w->ans[k].done = true;
	w->ans[k].status = a->status;
	w->ans[k].secure = a->secure && a->status == DNS_OK;
	w->ans[k].n = 0;
	for (size_t i = 0; a->status == DNS_OK && i < a->n && w->ans[k].n < QUEUE_MX_ADDRS; i++)
		inet_ntop(k == 0 ? AF_INET6 : AF_INET,
			  k == 0 ? (const void *)&a->rr[i].u.aaaa : (const void *)&a->rr[i].u.a,
			  w->ans[k].addr[w->ans[k].n++], 46);
	if (w->ans[0].done && w->ans[1].done && (w->ans[2].done || w->q[2] == NULL))
		host_addrs(w->job->qr, w);
}

static void host_lookup(struct queue_runner *qr, struct qwork *w)
{
	if (w->mxi >= w->nmx || w->tries >= QUEUE_TRIES_MAX) {
		fail_out(w);
		return;
	}
	for (size_t i = 0; w->tlsa != NULL && i < w->ans[2].n; i++)
		free(w->tlsa[i].data);
	free(w->tlsa);
	w->tlsa = NULL;
	memset(w->ans, 0, sizeof(w->ans));
	w->q[0] = dns_lookup(qr->dns, w->mx[w->mxi].name, DNS_T_AAAA, addr_cb, w);
	w->q[1] = dns_lookup(qr->dns, w->mx[w->mxi].name, DNS_T_A, addr_cb, w);
	/* DANE (RFC 7672): the exchanger's TLSA records, when its name came from a secure
	   answer (or the configuration); tls=none/may/verify overrides need none */
	if ((w->mx_secure && w->nh.tls == TLSL_DEFAULT) || w->nh.tls == TLSL_DANE) {
		char name[DNS_NAME_MAX + 16];

		snprintf(name, sizeof(name), "_%s._tcp.%s", w->nh.port, w->mx[w->mxi].name);
		w->q[2] = dns_lookup(qr->dns, name, DNS_T_TLSA, tlsa_cb, w);
	}
}

static void go_addr(struct queue_runner *qr, struct qwork *w)
{
	if (w->tries >= QUEUE_TRIES_MAX) {
		fail_out(w);
		return;
	}
	if (w->ai >= w->naddr) {
		w->mxi++;
		host_lookup(qr, w);
		return;
	}
	w->dest = queue_dest_get(qr, w->mx[w->mxi].name, w->addr[w->ai], w->nh.port, w->tls,
				 w->tlsa, w->tls == TLSL_DANE ? w->ans[2].n : 0,
				 w->sts_pol != NULL && w->sts_pol->mode == STS_TESTING &&
					 w->tls == TLSL_MAY,
				 w->nh.lmtp);
	TAILQ_INSERT_TAIL(&w->dest->waiting, w, entry);
	queue_dest_pump(qr, w->dest);
}

static void policy_cb(const struct sts_policy *p, void *arg)
{
	struct qwork *w = arg;

	w->sts = NULL;
	if (p != NULL && p->mode != STS_NONE) {
		w->sts_pol = xmalloc(sizeof(*w->sts_pol));
		*w->sts_pol = *p;
	}
	if (w->mx_ready)
		route_ready(w->job->qr, w);
}

/* The MX hosts and the MTA-STS policy are in: an enforced policy keeps only the hosts it
   names (none: the mail waits, RFC 8461 4.1); a policy in testing mode logs them. */
static void route_ready(struct queue_runner *qr, struct qwork *w)
{
	const struct sts_policy *p = w->sts_pol;
	size_t keep = 0;
	char text[600];

	if (w->sts != NULL)
		return;
	for (size_t i = 0; p != NULL && i < w->nmx; i++) {
		if (sts_mx_match(p, w->mx[i].name)) {
			w->mx[keep++] = w->mx[i];
			continue;
		}
		log_info("%016" PRIx64 ": mta-sts %s: MX %s is not in the policy (mode %s)%s",
			 w->job->qm.id, w->nh.name, w->mx[i].name, sts_mode_name(p->mode),
			 p->mode == STS_ENFORCE ? ", skipped" : "");
		if (p->mode != STS_ENFORCE)
			w->mx[keep++] = w->mx[i];
	}
	if (p != NULL)
		w->nmx = keep;
	if (p != NULL && keep == 0) {
		snprintf(text, sizeof(text), "4.7.5 no MX host of %s matches its MTA-STS policy",
			 w->nh.name);
		fail_all(w, 451, text);
		return;
	}
	host_lookup(qr, w);
}

void queue_route_start(struct queue_runner *qr, struct qwork *w)
{
	char lit[DNS_NAME_MAX + 3];
	size_t len = strlen(w->nh.name);

	if (mx_is_literal(w->nh.name)) {
		snprintf(lit, sizeof(lit), "%.*s", (int)(w->nh.name[0] == '[' ? len - 2 : len),
			 w->nh.name + (w->nh.name[0] == '['));
		w->nmx = 1;
		/* a store host at a configured address keeps its name (logs, SNI) */
		snprintf(w->mx[0].name, sizeof(w->mx[0].name), "%.*s", DNS_NAME_MAX,
			 w->nh.host[0] != '\0' ? w->nh.host : lit);
		snprintf(w->addr[0], sizeof(w->addr[0]), "%.45s", lit);
		w->naddr = 1;
		if (host_tls(w) < 0) {
			fail_out(w);
			return;
		}
		go_addr(qr, w);
		return;
	}
	if (w->nh.mx) {
		if (w->nh.sts && w->nh.tls == TLSL_DEFAULT && qr->sts != NULL)
			w->sts = sts_lookup(qr->sts, w->nh.name, policy_cb, w);
		w->q[0] = dns_lookup(qr->dns, w->nh.name, DNS_T_MX, mx_cb, w);
		return;
	}
	w->mx_secure = true; /* a host name from the configuration */
	w->nmx = 1;
	snprintf(w->mx[0].name, sizeof(w->mx[0].name), "%.*s", DNS_NAME_MAX, w->nh.name);
	host_lookup(qr, w);
}

void queue_work_failover(struct qwork *w, int code, const char *text, const char *relay)
{
	struct queue_runner *qr = w->job->qr;

	trylog_add(w, relay, text);
	w->last_code = code;
	snprintf(w->last_text, sizeof(w->last_text), "%s", text);
	snprintf(w->dest_relay, sizeof(w->dest_relay), "%s", relay);
	w->tries++;
	w->ai++;
	w->dest = NULL;
	if (qr->stopping) {
		fail_out(w);
		return;
	}
	go_addr(qr, w);
}

static void own_add(struct conf_cidrs *own, const char *text)
{
	struct conf_cidr c;

	if (conf_cidr_parse(text, &c) < 0)
		return;
	own->v = xreallocarray(own->v, own->n + 1, sizeof(*own->v));
	own->v[own->n++] = c;
}

struct conf_cidrs *queue_own_addrs(const struct conf *c)
{
	const struct mtad_conf *mc = &conf_values(c)->mtad;
	const struct conf_addrs *const lists[] = { mc->listen, mc->submission, mc->submissions };
	struct conf_cidrs *own = xcalloc(1, sizeof(*own));
	bool wildcard = false;

	for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
		const struct conf_addrs *a = lists[k];

		for (size_t i = 0; i < a->n; i++) {
			if (a->v[i].unix_path)
				continue;
			if (a->v[i].host[0] == '\0' || strcmp(a->v[i].host, "*") == 0)
				wildcard = true;
			else
				own_add(own, a->v[i].host);
		}
	}
	struct ifaddrs *ifs, *ifa;
	if (wildcard && getifaddrs(&ifs) == 0) {
		for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
			char text[INET6_ADDRSTRLEN];

			if (ifa->ifa_addr == NULL)
				continue;
			if (ifa->ifa_addr->sa_family == AF_INET)
				inet_ntop(AF_INET,
					  &((struct sockaddr_in *)(void *)ifa->ifa_addr)->sin_addr,
					  text, sizeof(text));
			else if (ifa->ifa_addr->sa_family == AF_INET6)
				inet_ntop(AF_INET6,
					  &((struct sockaddr_in6 *)(void *)ifa->ifa_addr)
						   ->sin6_addr,
					  text, sizeof(text));
			else
				continue;
			own_add(own, text);
		}
		freeifaddrs(ifs);
	}
	return own;
}

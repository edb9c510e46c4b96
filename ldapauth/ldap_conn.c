/* ldap_conn.c — owns the LDAP connection pools: a fixed number of connections per pool, each
 * set up without blocking the loop (our own non-blocking TCP connect, then ldap_init_fd on the
 * connected socket, ldaps:// or StartTLS with the CA checked, the service bind sent
 * asynchronously), its descriptor watched by the event loop, replies matched to requests by
 * message id. A wait queue holds requests until a connection has room; a search connection
 * carries up to LPOOL_INFLIGHT operations, a user-bind connection one (a bind changes the
 * connection's identity). When no connection can be made, waiting requests fail at once as
 * temporary failures and the pool probes again with exponential backoff.
 *
 * The socket is non-blocking for its whole life (lconn_nonblock: libldap changes it behind our
 * back, see there). Reads: ldap_result reads only when poll says the socket is readable, and
 * liblber reads once per call, keeping a message (or TLS record) that has arrived in part in
 * the handle, reported as EWOULDBLOCK, until a later call completes it; so a partial reply
 * never holds the loop (test_partial_replies). Writes: a request that does not fit in the
 * socket buffer is kept by libldap and flushed by a later ldap_result; requests are small and
 * at most LPOOL_INFLIGHT are outstanding per connection, so in practice every write completes
 * at once, and one that did not would end in the operation timeout, never in a blocked loop.
 *
 * Known limit: the TLS handshake itself (ldap_install_tls) is synchronous in libldap. With
 * LDAP_OPT_CONNECT_ASYNC set for its duration, libldap polls between handshake steps,
 * bounded by LDAP_OPT_NETWORK_TIMEOUT (set to the operation timeout), so a directory that
 * accepts the connection and then stalls holds the loop for at most that long, once per
 * connection attempt (test_silent_tls_server). Without that option libldap retries the
 * handshake at once on the non-blocking socket, spinning for as long as the server is
 * silent. The option does not make the handshake return early: its "connecting" state only
 * covers connections libldap opens itself, and ldap_init_fd is given ours connected. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <ldap.h>
#include <openldap.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"

#define LPOOL_INFLIGHT 64
#define LPOOL_BACKOFF_MIN_MS 100
#define LPOOL_BACKOFF_MAX_MS 2000

enum lconn_state { LC_DOWN, LC_CONNECTING, LC_STARTTLS, LC_BINDING, LC_READY };

struct lurl {
	char *url, *host, *port;
	bool ldaps;
};

struct lconn {
	struct lpool *pool;
	enum lconn_state state;
	int fd;
	LDAP *ld;
	struct event io, setup_timer;
	bool io_set;
	int setup_msgid;
	struct ldapauth_req **ops;
	unsigned nops;
	const struct lurl *url;
};

struct lpool {
	struct ldapauth *la;
	struct event_base *base;
	enum lpool_kind kind;
	struct lurl *urls;
	size_t nurls, next_url;
	bool starttls;
	char *ca, *bind_dn, *bind_pw;
	int64_t timeout_ms;
	unsigned size, max_ops;
	struct lconn *conns;
	struct req_queue waitq;
	struct event backoff;
	int64_t backoff_ms;
	bool backoff_pending, down;
	unsigned open, open_max, inflight, inflight_max;
	uint64_t connects, failures;
};

static void lconn_start(struct lconn *c);
static void lconn_fail(struct lconn *c, const char *reason, bool setup);
static void lconn_connected_cb(evutil_socket_t fd, short what, void *arg);
static void lconn_read_cb(evutil_socket_t fd, short what, void *arg);
static void lconn_setup_timeout_cb(evutil_socket_t fd, short what, void *arg);
static int lconn_ldap_init(struct lconn *c);
static void lconn_after_tls(struct lconn *c);
static void lconn_ready(struct lconn *c);
static void lconn_setup_result(struct lconn *c, LDAPMessage *msg);
static void lconn_set_state(struct lconn *c, enum lconn_state st);
static void lpool_dispatch(struct lpool *p);
static void lpool_backoff_cb(evutil_socket_t fd, short what, void *arg);
static void lpool_fail_waiting(struct lpool *p, const char *reason);

static const char *const lc_names[] = { "down", "connecting", "starttls", "binding", "ready" };

static int parse_url(const char *text, struct lurl *u, char **error_r)
{
	LDAPURLDesc *lud = NULL;

	if (ldap_url_parse(text, &lud) != LDAP_URL_SUCCESS) {
		*error_r = xasprintf("bad LDAP URI \"%s\"", text);
		return -1;
	}
	if (strcmp(lud->lud_scheme, "ldap") != 0 && strcmp(lud->lud_scheme, "ldaps") != 0) {
		*error_r = xasprintf("LDAP URI \"%s\": only ldap:// and ldaps://", text);
		ldap_free_urldesc(lud);
		return -1;
	}
	u->ldaps = strcmp(lud->lud_scheme, "ldaps") == 0;
	u->url = xstrdup(text);
	u->host = xstrdup(lud->lud_host != NULL && lud->lud_host[0] != '\0' ? lud->lud_host
									    : "127.0.0.1");
	u->port = xasprintf("%d", lud->lud_port != 0 ? lud->lud_port : u->ldaps ? 636 : 389);
	ldap_free_urldesc(lud);
	return 0;
}

int lpool_new(struct ldapauth *la, struct event_base *base, enum lpool_kind kind,
	      const struct lpool_opts *o, struct lpool **p_r, char **error_r)
{
	struct lpool *p = xcalloc(1, sizeof(*p));

	*p_r = NULL;
	p->la = la;
	p->base = base;
	p->kind = kind;
	p->urls = xcalloc(o->nuris, sizeof(*p->urls));
	for (size_t i = 0; i < o->nuris; i++, p->nurls++)
		if (parse_url(o->uris[i], &p->urls[i], error_r) < 0) {
			lpool_free(&p);
			return -1;
		}
	if (p->nurls == 0) {
		*error_r = xstrdup("no LDAP URI");
		lpool_free(&p);
		return -1;
	}
	p->starttls = o->starttls;
	p->ca = xstrdup(o->ca != NULL ? o->ca : "");
	p->bind_dn = xstrdup(kind == LPOOL_SEARCH && o->bind_dn != NULL ? o->bind_dn : "");
	p->bind_pw = xstrdup(kind == LPOOL_SEARCH && o->bind_pw != NULL ? o->bind_pw : "");
	p->timeout_ms = o->timeout_ms;
	p->size = o->size;
	p->max_ops = kind == LPOOL_SEARCH ? LPOOL_INFLIGHT : 1;
	p->conns = xcalloc(p->size, sizeof(*p->conns));
	for (unsigned i = 0; i < p->size; i++) {
		p->conns[i].pool = p;
		p->conns[i].fd = -1;
		p->conns[i].ops = xcalloc(p->max_ops, sizeof(*p->conns[i].ops));
		evtimer_assign(&p->conns[i].setup_timer, base, lconn_setup_timeout_cb,
			       &p->conns[i]);
	}
	TAILQ_INIT(&p->waitq);
	evtimer_assign(&p->backoff, base, lpool_backoff_cb, p);
	p->backoff_ms = LPOOL_BACKOFF_MIN_MS;
	*p_r = p;
	return 0;
}

void lpool_free(struct lpool **pp)
{
	struct lpool *p = *pp;

	if (p == NULL)
		return;
	for (unsigned i = 0; p->conns != NULL && i < p->size; i++) {
		struct lconn *c = &p->conns[i];

		c->nops = 0; /* the requests are the caller's to drop */
		if (c->state != LC_DOWN)
			lconn_fail(c, "shutting down", false);
		free(c->ops);
	}
	if (p->backoff_pending)
		evtimer_del(&p->backoff);
	for (size_t i = 0; i < p->nurls; i++) {
		free(p->urls[i].url);
		free(p->urls[i].host);
		free(p->urls[i].port);
	}
	free(p->urls);
	free(p->conns);
	free(p->ca);
	free(p->bind_dn);
	if (p->bind_pw != NULL)
		memset(p->bind_pw, 0, strlen(p->bind_pw));
	free(p->bind_pw);
	free(p);
	*pp = NULL;
}

void lpool_stats(const struct lpool *p, unsigned *open_r, unsigned *open_max_r,
		 unsigned *inflight_max_r, uint64_t *connects_r, uint64_t *failures_r)
{
	*open_r += p->open;
	*open_max_r += p->open_max;
	if (p->inflight_max > *inflight_max_r)
		*inflight_max_r = p->inflight_max;
	*connects_r += p->connects;
	*failures_r += p->failures;
}

static void lconn_set_state(struct lconn *c, enum lconn_state st)
{
	struct lpool *p = c->pool;

	log_debug("ldap conn %p %s -> %s", (void *)c, lc_names[c->state], lc_names[st]);
	if (c->state == LC_DOWN && st != LC_DOWN && ++p->open > p->open_max)
		p->open_max = p->open;
	else if (c->state != LC_DOWN && st == LC_DOWN)
		p->open--;
	c->state = st;
}

void lpool_submit(struct lpool *p, struct ldapauth_req *req)
{
	if (p->down) {
		ldapauth_op_failed(req, "directory unavailable");
		return;
	}
	TAILQ_INSERT_TAIL(&p->waitq, req, q);
	req->queued = true;
	lpool_dispatch(p);
}

void lpool_withdraw(struct lpool *p, struct ldapauth_req *req)
{
	struct lconn *c = req->conn;

	if (req->queued) {
		TAILQ_REMOVE(&p->waitq, req, q);
		req->queued = false;
	}
	if (c == NULL)
		return;
	for (unsigned i = 0; i < c->nops; i++) {
		if (c->ops[i] != req)
			continue;
		c->ops[i] = c->ops[--c->nops];
		p->inflight--;
		break;
	}
	if (c->ld != NULL)
		(void)ldap_abandon_ext(c->ld, req->msgid, NULL, NULL);
	req->conn = NULL;
	lpool_dispatch(p);
}

/* Starts waiting requests on ready connections (the least loaded first); opens connections
   when there is demand and no backoff is pending. */
static void lpool_dispatch(struct lpool *p)
{
	while (!TAILQ_EMPTY(&p->waitq)) {
		struct lconn *best = NULL;
		struct ldapauth_req *req;
		int rc;

		for (unsigned i = 0; i < p->size; i++) {
			struct lconn *c = &p->conns[i];

			if (c->state == LC_READY && c->nops < p->max_ops &&
			    (best == NULL || c->nops < best->nops))
				best = c;
		}
		if (best == NULL)
			break;
		req = TAILQ_FIRST(&p->waitq);
		TAILQ_REMOVE(&p->waitq, req, q);
		req->queued = false;
		rc = ldapauth_op_send(req, best->ld, &req->msgid);
		if (rc == LDAP_SUCCESS) {
			req->conn = best;
			best->ops[best->nops++] = req;
			if (++p->inflight > p->inflight_max)
				p->inflight_max = p->inflight;
		} else if (rc == LDAP_SERVER_DOWN) {
			TAILQ_INSERT_HEAD(&p->waitq, req, q); /* try it on another */
			req->queued = true;
			lconn_fail(best, "connection lost", false);
		} else {
			ldapauth_op_failed(req, ldap_err2string(rc));
		}
	}
	for (unsigned i = 0; i < p->size; i++)
		if (!TAILQ_EMPTY(&p->waitq) && !p->backoff_pending && p->conns[i].state == LC_DOWN)
			lconn_start(&p->conns[i]);
}

static void lpool_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lpool *p = arg;

	p->backoff_pending = false;
	for (unsigned i = 0; i < p->size; i++)
		if (p->conns[i].state == LC_DOWN) {
			lconn_start(&p->conns[i]); /* a probe, demand or not */
			break;
		}
	lpool_dispatch(p);
}

static void lpool_fail_waiting(struct lpool *p, const char *reason)
{
	struct ldapauth_req *req;

	while ((req = TAILQ_FIRST(&p->waitq)) != NULL) {
		TAILQ_REMOVE(&p->waitq, req, q);
		req->queued = false;
		ldapauth_op_failed(req, reason);
	}
}

static void lconn_start(struct lconn *c)
{
	struct lpool *p = c->pool;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	struct timeval tv = { p->timeout_ms / 1000, (p->timeout_ms % 1000) * 1000 };
	int rc;

	c->url = &p->urls[p->next_url++ % p->nurls];
	p->connects++;
	lconn_set_state(c, LC_CONNECTING);
	/* numeric hosts and /etc/hosts names resolve without waiting on the network */
	if ((rc = getaddrinfo(c->url->host, c->url->port, &hints, &ai)) != 0) {
		log_warnx("ldap %s: %s", c->url->url, gai_strerror(rc));
		lconn_fail(c, "cannot resolve the directory host", true);
		return;
	}
	c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd == -1 ||
	    (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == -1 && errno != EINPROGRESS)) {
		log_warn("ldap %s: connect", c->url->url);
		freeaddrinfo(ai);
		lconn_fail(c, "cannot connect to the directory", true);
		return;
	}
	freeaddrinfo(ai);
	event_assign(&c->io, p->base, c->fd, EV_WRITE, lconn_connected_cb, c);
	c->io_set = true;
	event_add(&c->io, NULL);
	evtimer_add(&c->setup_timer, &tv);
}

static void lconn_setup_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lconn *c = arg;

	log_warnx("ldap %s: %s timed out", c->url->url, lc_names[c->state]);
	lconn_fail(c, "directory set-up timed out", true);
}

static void lconn_connected_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lconn *c = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	c->io_set = false;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0) {
		errno = err;
		log_warn("ldap %s: connect", c->url->url);
		lconn_fail(c, "cannot connect to the directory", true);
		return;
	}
	if (lconn_ldap_init(c) < 0)
		return;
	event_assign(&c->io, c->pool->base, c->fd, EV_READ | EV_PERSIST, lconn_read_cb, c);
	c->io_set = true;
	event_add(&c->io, NULL);
	if (c->pool->starttls && !c->url->ldaps) {
		int rc = ldap_start_tls(c->ld, NULL, NULL, &c->setup_msgid);

		if (rc != LDAP_SUCCESS) {
			log_warnx("ldap %s: StartTLS: %s", c->url->url, ldap_err2string(rc));
			lconn_fail(c, "StartTLS failed", true);
			return;
		}
		lconn_set_state(c, LC_STARTTLS);
		return;
	}
	lconn_after_tls(c);
}

/* Makes c's socket non-blocking through liblber. Needed twice: ldap_init_fd leaves the socket
   blocking (the TLS handshake must not be), and libldap makes it blocking again after an
   asynchronous-mode handshake (a partial reply must not hold the loop). */
static int lconn_nonblock(struct lconn *c)
{
	Sockbuf *sb = NULL;

	if (ldap_get_option(c->ld, LDAP_OPT_SOCKBUF, &sb) != LDAP_OPT_SUCCESS ||
	    ber_sockbuf_ctrl(sb, LBER_SB_OPT_SET_NONBLOCK, (void *)1) != 1) {
		lconn_fail(c, "LDAP library error", true);
		return -1;
	}
	return 0;
}

/* Wraps the connected socket in an LDAP handle; ldaps:// does its TLS handshake here. */
static int lconn_ldap_init(struct lconn *c)
{
	struct lpool *p = c->pool;
	int v3 = LDAP_VERSION3, hard = LDAP_OPT_X_TLS_HARD, zero = 0, rc;
	struct timeval tv = { p->timeout_ms / 1000, (p->timeout_ms % 1000) * 1000 };

	if ((rc = ldap_init_fd(c->fd, LDAP_PROTO_TCP, c->url->url, &c->ld)) != LDAP_SUCCESS) {
		log_warnx("ldap %s: %s", c->url->url, ldap_err2string(rc));
		lconn_fail(c, "LDAP library error", true);
		return -1;
	}
	c->fd = -1; /* the handle owns it now */
	if (lconn_nonblock(c) < 0)
		return -1;
	ldap_set_option(c->ld, LDAP_OPT_PROTOCOL_VERSION, &v3);
	ldap_set_option(c->ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
	ldap_set_option(c->ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
	/* libldap runs the TLS handshake on a non-blocking socket when a network timeout is set,
	   but polls (bounded by that timeout) between its steps only in async mode: without it,
	   it retries at once, spinning until the server answers, for ever if it never does.
	   Async mode is for the handshake only: lconn_after_tls turns it off again. */
	ldap_set_option(c->ld, LDAP_OPT_CONNECT_ASYNC, LDAP_OPT_ON);
	if (c->url->ldaps || p->starttls) {
		ldap_set_option(c->ld, LDAP_OPT_X_TLS_REQUIRE_CERT, &hard);
		if (p->ca[0] != '\0')
			ldap_set_option(c->ld, LDAP_OPT_X_TLS_CACERTFILE, p->ca);
		ldap_set_option(c->ld, LDAP_OPT_X_TLS_NEWCTX, &zero);
	}
	ldap_get_option(c->ld, LDAP_OPT_DESC, &c->fd);
	if (c->url->ldaps && (rc = ldap_install_tls(c->ld)) != LDAP_SUCCESS) {
		log_warnx("ldap %s: TLS: %s", c->url->url, ldap_err2string(rc));
		lconn_fail(c, "TLS with the directory failed", true);
		return -1;
	}
	return 0;
}

static void lconn_after_tls(struct lconn *c)
{
	struct lpool *p = c->pool;
	struct berval cred = { strlen(p->bind_pw), p->bind_pw };
	int rc;

	ldap_set_option(c->ld, LDAP_OPT_CONNECT_ASYNC, LDAP_OPT_OFF);
	if (lconn_nonblock(c) < 0)
		return;
	if (p->bind_dn[0] == '\0') {
		lconn_ready(c);
		return;
	}
	rc = ldap_sasl_bind(c->ld, p->bind_dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL,
			    &c->setup_msgid);
	if (rc != LDAP_SUCCESS) {
		log_warnx("ldap %s: service bind: %s", c->url->url, ldap_err2string(rc));
		lconn_fail(c, "service bind failed", true);
		return;
	}
	lconn_set_state(c, LC_BINDING);
}

static void lconn_ready(struct lconn *c)
{
	struct lpool *p = c->pool;

	evtimer_del(&c->setup_timer);
	lconn_set_state(c, LC_READY);
	p->down = false;
	p->backoff_ms = LPOOL_BACKOFF_MIN_MS;
	if (p->backoff_pending) {
		evtimer_del(&p->backoff);
		p->backoff_pending = false;
	}
	lpool_dispatch(p);
}

static void lconn_setup_result(struct lconn *c, LDAPMessage *msg)
{
	int err = LDAP_OTHER, rc;

	rc = ldap_parse_result(c->ld, msg, &err, NULL, NULL, NULL, NULL, 0);
	if (rc != LDAP_SUCCESS || err != LDAP_SUCCESS) {
		log_warnx("ldap %s: %s: %s", c->url->url, lc_names[c->state],
			  ldap_err2string(rc != LDAP_SUCCESS ? rc : err));
		lconn_fail(c,
			   c->state == LC_STARTTLS ? "StartTLS refused" : "service bind refused",
			   true);
		return;
	}
	if (c->state == LC_STARTTLS) {
		if ((rc = ldap_install_tls(c->ld)) != LDAP_SUCCESS) {
			log_warnx("ldap %s: TLS: %s", c->url->url, ldap_err2string(rc));
			lconn_fail(c, "TLS with the directory failed", true);
			return;
		}
		lconn_after_tls(c);
		return;
	}
	lconn_ready(c);
}

static void lconn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lconn *c = arg;
	struct timeval zero = { 0, 0 };
	LDAPMessage *msg = NULL;
	int rc;

	while (c->ld != NULL &&
	       (rc = ldap_result(c->ld, LDAP_RES_ANY, LDAP_MSG_ALL, &zero, &msg)) != 0) {
		int id;

		if (rc < 0) {
			lconn_fail(c, "connection to the directory lost", c->state != LC_READY);
			return;
		}
		id = ldap_msgid(msg);
		if (c->state != LC_READY && id == c->setup_msgid) {
			lconn_setup_result(c, msg);
		} else {
			for (unsigned i = 0; i < c->nops; i++) {
				struct ldapauth_req *req = c->ops[i];

				if (req->msgid != id)
					continue;
				c->ops[i] = c->ops[--c->nops];
				c->pool->inflight--;
				req->conn = NULL;
				ldapauth_op_result(req, c->ld, msg);
				break;
			}
		}
		ldap_msgfree(msg);
		msg = NULL;
	}
	lpool_dispatch(c->pool);
}

/* Closes c; its operations fail as temporary. setup: it never got ready, so the directory
   counts as down when no other connection is up (waiting requests fail, backoff starts). */
static void lconn_fail(struct lconn *c, const char *reason, bool setup)
{
	struct lpool *p = c->pool;
	bool any_setting_up = false;

	if (c->io_set)
		event_del(&c->io);
	c->io_set = false;
	evtimer_del(&c->setup_timer);
	if (c->ld != NULL)
		ldap_unbind_ext(c->ld, NULL, NULL); /* closes the socket */
	else if (c->fd != -1)
		close(c->fd);
	c->ld = NULL;
	c->fd = -1;
	lconn_set_state(c, LC_DOWN);
	while (c->nops > 0) {
		struct ldapauth_req *req = c->ops[--c->nops];

		p->inflight--;
		req->conn = NULL;
		ldapauth_op_failed(req, reason);
	}
	if (!setup)
		return;
	p->failures++;
	for (unsigned i = 0; i < p->size; i++)
		if (p->conns[i].state == LC_READY)
			return; /* the directory answers on another connection */
		else if (p->conns[i].state != LC_DOWN)
			any_setting_up = true;
	if (!p->backoff_pending) {
		struct timeval tv = { p->backoff_ms / 1000, (p->backoff_ms % 1000) * 1000 };

		evtimer_add(&p->backoff, &tv);
		p->backoff_pending = true;
		p->backoff_ms = p->backoff_ms * 2 > LPOOL_BACKOFF_MAX_MS ? LPOOL_BACKOFF_MAX_MS
									 : p->backoff_ms * 2;
	}
	if (any_setting_up)
		return;
	p->down = true;
	lpool_fail_waiting(p, reason);
}

/* ms_proxy.c — owns managesieved's two sides of the proxy login between hosts (the same
 * scheme as imapd's, docs/scale-out.md). Front ([sieve] proxy = yes): a user the directory
 * homes on another store host, once authenticated here, is authenticated at that host's
 * managesieved with SASL PLAIN (authorization identity: the user's address; authentication
 * identity and password: [sieve] proxy_user and the shared secret; or SASL EXTERNAL with
 * that authorization identity and the front's TLS client certificate, [sieve]
 * proxy_cert_file and proxy_key_file), after STARTTLS with
 * the store host's certificate verified ([sieve] proxy_tls, proxy_ca_file, read at the
 * worker's start and SIGHUP; the store host's last TLS session offered again,
 * common/proxy.c; a failed handshake or verification is a store host not reachable); then the bytes go both
 * ways unparsed until either side closes. A store host that does not answer, refuses or
 * answers garbage gives NO (TRYLATER) at AUTHENTICATE.
 * Store host: the proxy credential is accepted only from [sieve] proxy_trusted addresses (the
 * secret only over TLS with proxy_require_tls; EXTERNAL only over TLS with a certificate that
 * chains to proxy_client_ca_file, ms_session.c). */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <openssl/crypto.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/net.h"
#include "common/proxy.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "managesieve/managesieved.h"

#define PROXY_OUT_HIGH (256 * 1024) /* relay: reading pauses while the other side has this */

enum px_state { PX_CONNECT, PX_GREETING, PX_STARTTLS, PX_LOGIN, PX_DONE, PX_RELAY };

struct ms_proxy {
	struct ms_session *s;
	enum px_state st;
	struct proxy_dial d; /* the store host's connection (d.be), the deadline */
	char *authz;
	bool want_tls; /* [sieve] proxy_tls = starttls (the dial's config) */
};

static void px_fail(struct ms_proxy *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

int ms_proxy_init(struct ms_server *srv, char **error_r)
{
	const struct sieve_conf *sc = &conf_values(srv->conf)->sieve;

	ms_proxy_reload(srv);
	return proxy_secret_read(sc->proxy_secret_file, &srv->proxy_secret, error_r);
}

void ms_proxy_reload(struct ms_server *srv)
{
	const struct sieve_conf *sc = &conf_values(srv->proxy_conf)->sieve;

	proxy_tls_configure(sc->proxy && sc->proxy_tls == CONF_PROXY_TLS_STARTTLS,
			    sc->proxy_ca_file, sc->proxy_cert_file, sc->proxy_key_file,
			    "managesieved worker");
	proxy_fronts_configure(sc->proxy_client_ca_file, "managesieved worker");
}

/* Front: whether the proxy login is by the front's TLS client certificate. */
static bool px_cert(const struct sieve_conf *sc)
{
	return sc->proxy_cert_file[0] != '\0' && sc->proxy_key_file[0] != '\0';
}

void ms_proxy_server_free(struct ms_server *srv)
{
	proxy_secret_free(&srv->proxy_secret);
	proxy_tls_unload();
	if (srv->proxy_dns != NULL)
		evdns_base_free(srv->proxy_dns, 0);
	srv->proxy_dns = NULL;
}

bool ms_proxy_from_front(const struct ms_session *s)
{
	return (s->srv->proxy_secret != NULL || proxy_fronts_enabled()) &&
	       conf_cidrs_match(conf_values(s->srv->conf)->sieve.proxy_trusted,
				(const struct sockaddr *)&s->sa);
}

bool ms_proxy_credential_ok(const struct ms_session *s, const char *authcid, const char *passwd,
			    const char **why_r)
{
	const struct sieve_conf *sc = &conf_values(s->srv->conf)->sieve;

	*why_r = "not a proxy credential from a trusted address";
	if (!proxy_credential_ok(s->srv->proxy_secret, sc->proxy_user, sc->proxy_trusted,
				 (const struct sockaddr *)&s->sa, authcid, passwd))
		return false;
	*why_r = "the shared secret in clear (proxy_require_tls = yes)";
	return !conf_values(s->srv->proxy_conf)->sieve.proxy_require_tls || s->tls;
}

void ms_proxy_free(struct ms_session *s)
{
	struct ms_proxy *p = s->proxy;

	if (p == NULL)
		return;
	proxy_dial_free(&p->d);
	free(p->authz);
	free(p);
	s->proxy = NULL;
}

/* The login at the store host ended: the session answers the client's AUTHENTICATE. */
static void px_done(struct ms_proxy *p, const char *why)
{
	p->st = PX_DONE;
	proxy_dial_stop(&p->d);
	if (why != NULL && p->d.be != NULL) {
		bufferevent_free(p->d.be);
		p->d.be = NULL;
	}
	if (p->d.be != NULL)
		bufferevent_disable(p->d.be, EV_READ); /* the relay reads from now on */
	ms_session_proxied(p->s, why);
}

static void px_fail(struct ms_proxy *p, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_info("%016" PRIx64 " managesieve proxy user=%s host=%s result=fail reason=\"%s\"",
		 p->s->id, p->s->user, p->d.host, why);
	px_done(p, why);
}

/* The start of a response line: OK, NO or BYE followed by a space or the end. */
static bool px_is(const char *line, const char *word)
{
	size_t n = strlen(word);

	return strncasecmp(line, word, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

/* One line from the store host during the login: false when the login ended (the session
   may be gone: p is not to be touched). */
static bool px_line(struct ms_proxy *p, const char *line)
{
	const struct sieve_conf *sc = &conf_values(p->s->srv->conf)->sieve;

	if (p->st == PX_GREETING) {
		if (line[0] == '"')
			return true; /* a capability */
		if (!px_is(line, "OK")) {
			px_fail(p, "unexpected greeting from %s", p->d.where);
			return false;
		}
		if (p->want_tls && !p->d.tls) {
			evbuffer_add_printf(bufferevent_get_output(p->d.be), "STARTTLS\r\n");
			p->st = PX_STARTTLS;
			return true;
		}
		const struct sieve_conf *dc = &conf_values(p->s->srv->proxy_conf)->sieve;
		const char *why = NULL, *mech;
		char *b64 = NULL;

		if ((mech = proxy_login_sasl(&p->d, px_cert(dc), p->authz, sc->proxy_user,
					     p->s->srv->proxy_secret, &b64, &why)) == NULL) {
			px_fail(p, "%s", why);
			return false;
		}
		evbuffer_add_printf(bufferevent_get_output(p->d.be),
				    "AUTHENTICATE \"%s\" \"%s\"\r\n", mech, b64);
		OPENSSL_cleanse(b64, strlen(b64));
		free(b64);
		p->st = PX_LOGIN;
		return true;
	}
	if (p->st == PX_STARTTLS) {
		char why[512];

		if (!px_is(line, "OK")) {
			px_fail(p, "%s refused STARTTLS: %.200s", p->d.where, line);
			return false;
		}
		if (!proxy_dial_starttls(&p->d, why, sizeof(why))) {
			px_fail(p, "%s", why);
			return false;
		}
		p->st = PX_GREETING; /* the capabilities again, in TLS (RFC 5804 2.2) */
		return true;
	}
	if (px_is(line, "OK")) {
		char tls[64];

		log_info("%016" PRIx64 " managesieve proxy user=%s host=%s addr=%s %s result=ok",
			 p->s->id, p->s->user, p->d.host, p->d.where,
			 proxy_dial_tls_log(&p->d, tls, sizeof(tls)));
		px_done(p, NULL);
	} else if (px_is(line, "NO") || px_is(line, "BYE")) {
		px_fail(p, "%s refused the proxy login: %.200s", p->d.where, line);
	} else {
		px_fail(p, "unexpected reply from %s", p->d.where);
	}
	return false;
}

static void px_login_read(struct bufferevent *bev, void *arg)
{
	struct ms_proxy *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why;
	char *line;
	bool go = true;
	int rc;

	while (go) { /* px_line's false: p may be gone */
		if ((rc = proxy_readln(in, &line, &why)) <= 0) {
			if (rc < 0)
				px_fail(p, "%s sent %s", p->d.where, why);
			return;
		}
		go = px_line(p, line);
		free(line);
		if (go && bev != p->d.be)
			return; /* STARTTLS: the TLS bufferevent reads from now on */
	}
}

/* Relay: the store host's bytes to the client, paused while the client's output is full. */
static void px_to_client(struct ms_proxy *p)
{
	struct evbuffer *out = bufferevent_get_output(p->s->bev);

	evbuffer_add_buffer(out, bufferevent_get_input(p->d.be));
	if (evbuffer_get_length(out) >= PROXY_OUT_HIGH || p->s->closing)
		bufferevent_disable(p->d.be, EV_READ);
	else
		bufferevent_enable(p->d.be, EV_READ);
}

/* Relay: the client's bytes to the store host, paused while that output is full. */
static void px_from_client(struct ms_proxy *p)
{
	struct evbuffer *out = bufferevent_get_output(p->d.be);

	evbuffer_add_buffer(out, bufferevent_get_input(p->s->bev));
	if (evbuffer_get_length(out) >= PROXY_OUT_HIGH)
		bufferevent_disable(p->s->bev, EV_READ);
	else if (!p->s->closing)
		bufferevent_enable(p->s->bev, EV_READ);
}

static void px_event(struct bufferevent *bev, short what, void *arg)
{
	struct ms_proxy *p = arg;
	char why[512];

	if (proxy_dial_event(&p->d, what, why, sizeof(why)))
		return; /* TLS's handshake is done */
	if (p->st == PX_RELAY) {
		/* what the store host sent before it closed goes to the client first */
		log_info("%016" PRIx64
			 " managesieve proxy user=%s host=%s closed by the store host",
			 p->s->id, p->s->user, p->d.host);
		evbuffer_add_buffer(bufferevent_get_output(p->s->bev), bufferevent_get_input(bev));
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		ms_session_close(p->s);
		return;
	}
	px_fail(p, "%s", why);
}

/* The connection to the store host is made (why NULL) or failed. */
static void px_dialled(void *arg, const char *why)
{
	struct ms_proxy *p = arg;

	if (why != NULL)
		px_fail(p, "%s", why);
	else
		p->st = PX_GREETING;
}

void ms_proxy_start(struct ms_session *s, const char *authz, const char *host)
{
	struct ms_server *srv = s->srv;
	/* where the store hosts are: the last SIGHUP's config */
	const struct sieve_conf *sc = &conf_values(srv->proxy_conf)->sieve;
	struct ms_proxy *p = xcalloc(1, sizeof(*p));

	assert(s->proxy == NULL);
	s->proxy = p;
	p->s = s;
	p->authz = xstrdup(authz != NULL ? authz : "");
	p->want_tls = sc->proxy_tls == CONF_PROXY_TLS_STARTTLS;
	proxy_dial_init(&p->d, srv->base, host, px_dialled, px_login_read, px_event, p);
	/* an early failure is said from the loop: the caller may be the session's reader */
	if (srv->proxy_secret == NULL && !px_cert(sc))
		proxy_dial_fail_soon(&p->d, "no [sieve] proxy_secret_file nor proxy_cert_file");
	else if (p->authz[0] == '\0')
		proxy_dial_fail_soon(&p->d,
				     "the user has no address to log in with at the store host");
	else
		proxy_dial_start(&p->d, srv->base, &srv->proxy_dns, sc->proxy_hosts,
				 (long long)sc->proxy_port, sc->proxy_timeout_ms);
}

static void px_client_read(struct bufferevent *bev, void *arg)
{
	px_from_client(arg);
}

static void px_client_write(struct bufferevent *bev, void *arg)
{
	struct ms_proxy *p = arg;

	if (p->s->closing)
		ms_session_close(p->s);
	else
		px_to_client(p);
}

static void px_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct ms_proxy *p = arg;

	if ((what & BEV_EVENT_CONNECTED) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)))
		return; /* a TLS filter's late handshake report: not an end */
	log_info("%016" PRIx64 " managesieve proxy user=%s host=%s closed by the client", p->s->id,
		 p->s->user, p->d.host);
	ms_session_free(p->s);
}

static void px_be_write(struct bufferevent *bev, void *arg)
{
	px_from_client(arg);
}

static void px_be_read(struct bufferevent *bev, void *arg)
{
	px_to_client(arg);
}

void ms_proxy_relay(struct ms_session *s)
{
	struct ms_proxy *p = s->proxy;

	assert(p != NULL && p->st == PX_DONE && p->d.be != NULL);
	p->st = PX_RELAY;
	bufferevent_set_timeouts(s->bev, NULL, NULL); /* the store host keeps the idle time */
	bufferevent_setcb(s->bev, px_client_read, px_client_write, px_client_event, p);
	bufferevent_setwatermark(s->bev, EV_WRITE, PROXY_OUT_HIGH / 4, 0);
	bufferevent_setcb(p->d.be, px_be_read, px_be_write, px_event, p);
	bufferevent_setwatermark(p->d.be, EV_WRITE, PROXY_OUT_HIGH / 4, 0);
	bufferevent_enable(p->d.be, EV_READ | EV_WRITE);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
	px_from_client(p); /* what the client sent after its AUTHENTICATE */
	px_to_client(p);   /* and what the store host sent after its OK */
}

bool ms_proxy_relaying(const struct ms_session *s)
{
	return s->proxy != NULL && s->proxy->st == PX_RELAY;
}

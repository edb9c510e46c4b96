/* proxy.c — owns the protocol-independent parts of the front/store host proxy login: the
 * secret file, the PLAIN response, the proxy_hosts map, the connection with the login's
 * deadline, STARTTLS's TLS on it (the process's client context, read at start and SIGHUP, and
 * the last TLS session of each store host, offered again on the next connection) and the
 * store host's checks of the credential: the shared secret, or SASL EXTERNAL with a front's
 * TLS client certificate (RFC 4422 appendix A). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/proxy.h"
#include "common/sasl.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"

int proxy_secret_read(const char *path, char **secret_r, char **error_r)
{
	char buf[1025];
	ssize_t n;
	int fd;

	*secret_r = NULL;
	if (path[0] == '\0')
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*error_r = xasprintf("proxy_secret_file %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || n >= (ssize_t)sizeof(buf) - 1) {
		*error_r = xasprintf("proxy_secret_file %s: empty, unreadable or too long", path);
		return -1;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (buf[0] == '\0') {
		*error_r = xasprintf("proxy_secret_file %s: the first line is empty", path);
		return -1;
	}
	*secret_r = xstrdup(buf);
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

void proxy_secret_free(char **secretp)
{
	if (*secretp != NULL) {
		OPENSSL_cleanse(*secretp, strlen(*secretp));
		free(*secretp);
	}
	*secretp = NULL;
}

char *proxy_plain_b64(const char *authz, const char *user, const char *secret)
{
	size_t za = strlen(authz), zu = strlen(user), zs = strlen(secret), n = za + zu + zs + 2;
	unsigned char *raw = xmalloc(n);
	char *out = xmalloc(4 * ((n + 2) / 3) + 1);

	memcpy(raw, authz, za);
	raw[za] = '\0';
	memcpy(raw + za + 1, user, zu);
	raw[za + 1 + zu] = '\0';
	memcpy(raw + za + zu + 2, secret, zs);
	EVP_EncodeBlock((unsigned char *)out, raw, (int)n);
	OPENSSL_cleanse(raw, n);
	free(raw);
	return out;
}

void proxy_target(const struct conf_list *map, long long default_port, const char *host,
		  char *addr, size_t asz, char *port, size_t psz)
{
	size_t hl = strlen(host);

	snprintf(addr, asz, "%s", host);
	snprintf(port, psz, "%lld", default_port);
	for (size_t i = 0; i < map->n; i++) {
		const char *eq = strchr(map->v[i], '=');
		const char *v, *colon, *end;

		if (eq == NULL || !str_caseeq(map->v[i], (size_t)(eq - map->v[i]), host, hl))
			continue;
		v = eq + 1;
		end = v[0] == '[' ? strchr(v, ']') : NULL;
		colon = strrchr(end != NULL ? end : v, ':');
		if (end != NULL)
			snprintf(addr, asz, "%.*s", (int)(end - v - 1), v + 1);
		else
			snprintf(addr, asz, "%.*s",
				 (int)(colon != NULL ? colon - v : (long)strlen(v)), v);
		if (colon != NULL)
			snprintf(port, psz, "%s", colon + 1);
		return;
	}
}

bool proxy_host_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || h[i] == '.' || h[i] == '-' || h[i] == ':'))
			return false;
	return true;
}

bool proxy_numeric_host(const char *h)
{
	unsigned char a[16];

	return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

struct net_connect *proxy_connect(struct event_base *base, struct evdns_base **dns,
				  const struct conf_list *map, long long default_port,
				  const char *host, int64_t timeout_ms, char *where, size_t wsz,
				  net_connect_cb *cb, void *arg)
{
	char addr[256], port[16];
	bool numeric;

	proxy_target(map, default_port, host, addr, sizeof(addr), port, sizeof(port));
	snprintf(where, wsz, "%s:%s", addr, port);
	numeric = proxy_numeric_host(addr);
	if (!numeric && *dns == NULL)
		*dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	return net_connect(base, numeric ? NULL : *dns, addr, port, (int)timeout_ms, cb, arg);
}

static void dial_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_dial *d = arg;
	char why[400];

	if (d->early != NULL)
		snprintf(why, sizeof(why), "%s", d->early);
	else
		snprintf(why, sizeof(why), "%s did not log in in time",
			 d->where[0] ? d->where : d->host);
	d->done(d->arg, why);
}

static void dial_connected(struct bufferevent *bev, const char *error, void *arg)
{
	struct proxy_dial *d = arg;

	d->nc = NULL;
	if (bev == NULL) {
		d->done(d->arg, error);
		return;
	}
	d->be = bev;
	bufferevent_setcb(bev, d->readcb, NULL, d->eventcb, d->arg);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	d->done(d->arg, NULL);
}

void proxy_dial_init(struct proxy_dial *d, struct event_base *base, const char *host,
		     proxy_dial_done_cb *done, bufferevent_data_cb readcb,
		     bufferevent_event_cb eventcb, void *arg)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->host, sizeof(d->host), "%s", host);
	d->done = done;
	d->readcb = readcb;
	d->eventcb = eventcb;
	d->arg = arg;
	d->timer = evtimer_new(base, dial_timeout, d);
}

void proxy_dial_start(struct proxy_dial *d, struct event_base *base, struct evdns_base **dns,
		      const struct conf_list *map, long long default_port, int64_t timeout_ms)
{
	struct timeval tv = { (time_t)(timeout_ms / 1000),
			      (suseconds_t)(timeout_ms % 1000) * 1000 };

	evtimer_add(d->timer, &tv);
	/* its proxy_hosts entry, else host:default_port */
	d->nc = proxy_connect(base, dns, map, default_port, d->host, timeout_ms, d->where,
			      sizeof(d->where), dial_connected, d);
}

void proxy_dial_fail_soon(struct proxy_dial *d, const char *why)
{
	struct timeval now = { 0, 0 };

	d->early = why;
	evtimer_add(d->timer, &now);
}

void proxy_dial_stop(struct proxy_dial *d)
{
	net_connect_cancel(&d->nc);
	if (d->timer != NULL)
		evtimer_del(d->timer);
}

void proxy_dial_free(struct proxy_dial *d)
{
	net_connect_cancel(&d->nc);
	if (d->be != NULL)
		bufferevent_free(d->be);
	d->be = NULL;
	if (d->timer != NULL)
		event_free(d->timer);
	d->timer = NULL;
}

/* ---- the front's TLS client context and its sessions ---- */

/* The sessions kept (PROXY_TLS_SESSIONS): one per store host (its name and address), the
   least recently stored one replaced when all are taken. */
struct dial_session {
	char *key;      /* "host address:port" (xmalloc'd), NULL when free */
	SSL_SESSION *s; /* one reference, ours */
	uint64_t at;    /* when stored (dial_tls.clock) */
};

static struct {
	SSL_CTX *ctx;  /* NULL: not made (error says why) */
	char *error;   /* why the last proxy_tls_load failed while ctx is NULL */
	int key_index; /* the SSL's ex_data slot holding its session key */
	uint64_t clock;
	struct dial_session sess[PROXY_TLS_SESSIONS];
} dial_tls = { .key_index = -1 };

static void dial_session_clear(struct dial_session *e)
{
	free(e->key);
	SSL_SESSION_free(e->s);
	e->key = NULL;
	e->s = NULL;
}

static struct dial_session *dial_session_find(const char *key)
{
	for (size_t i = 0; i < PROXY_TLS_SESSIONS; i++)
		if (dial_tls.sess[i].key != NULL && strcmp(dial_tls.sess[i].key, key) == 0)
			return &dial_tls.sess[i];
	return NULL;
}

static void dial_sessions_flush(void)
{
	for (size_t i = 0; i < PROXY_TLS_SESSIONS; i++)
		dial_session_clear(&dial_tls.sess[i]);
}

/* The ex_data slot's free function: the key goes with its SSL. */
static void dial_key_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
			  void *argp)
{
	free(ptr);
}

/* OpenSSL's new session of a connection to a store host (after a full handshake, or a
   ticket the store host sent after it, TLS 1.3): a copy kept for its key, replacing the one
   there (or the oldest). A copy, because OpenSSL marks the connection's own session not
   resumable when the connection is freed without a close_notify sent, which is how a
   relayed session ends (the client or the store host closes). Returns 0: OpenSSL keeps its
   reference to sess. */
static int dial_session_new(SSL *ssl, SSL_SESSION *sess)
{
	const char *key = SSL_get_ex_data(ssl, dial_tls.key_index);
	struct dial_session *e;
	SSL_SESSION *copy;

	if (key == NULL || SSL_get_SSL_CTX(ssl) != dial_tls.ctx ||
	    !SSL_SESSION_is_resumable(sess) || SSL_get_verify_result(ssl) != X509_V_OK ||
	    (copy = SSL_SESSION_dup(sess)) == NULL)
		return 0;
	if ((e = dial_session_find(key)) == NULL) {
		e = &dial_tls.sess[0];
		for (size_t i = 0; i < PROXY_TLS_SESSIONS && e->key != NULL; i++)
			if (dial_tls.sess[i].key == NULL || dial_tls.sess[i].at < e->at)
				e = &dial_tls.sess[i];
		dial_session_clear(e);
		e->key = xstrdup(key);
	}
	SSL_SESSION_free(e->s);
	e->s = copy;
	e->at = ++dial_tls.clock;
	return 0;
}

/* The session kept for key, if it may still be offered (else it is dropped). */
static SSL_SESSION *dial_session_get(const char *key)
{
	struct dial_session *e = dial_session_find(key);
	time_t now = time(NULL);

	if (e == NULL)
		return NULL;
	if (!SSL_SESSION_is_resumable(e->s) ||
	    (time_t)(SSL_SESSION_get_time(e->s) + SSL_SESSION_get_timeout(e->s)) <= now) {
		dial_session_clear(e);
		return NULL;
	}
	return e->s;
}

int proxy_tls_load(const char *ca_file, const char *cert_file, const char *key_file,
		   char **error_r)
{
	struct tls_conf t;
	SSL_CTX *ctx;

	memset(&t, 0, sizeof(t));
	t.ca = ca_file;
	t.cert = cert_file;
	t.key = key_file;
	if ((ctx = tls_client_ctx_new(&t, TLS_VERIFY_PEER, error_r)) == NULL) {
		if (dial_tls.ctx == NULL) {
			free(dial_tls.error);
			dial_tls.error = xstrdup(*error_r);
		}
		return -1;
	}
	if (dial_tls.key_index < 0 &&
	    (dial_tls.key_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, dial_key_free)) < 0)
		fatalx("SSL_get_ex_new_index failed");
	/* the sessions are this context's alone: kept here, not in OpenSSL's cache */
	SSL_CTX_set_session_cache_mode(ctx,
				       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, dial_session_new);
	dial_sessions_flush(); /* made with the CAs of before */
	tls_ctx_free(&dial_tls.ctx);
	dial_tls.ctx = ctx;
	free(dial_tls.error);
	dial_tls.error = NULL;
	return 0;
}

void proxy_tls_configure(bool want, const char *ca_file, const char *cert_file,
			 const char *key_file, const char *who)
{
	char *err = NULL;

	if (!want) {
		proxy_tls_unload();
		return;
	}
	if (proxy_tls_load(ca_file, cert_file, key_file, &err) == 0)
		return;
	log_warnx("%s: the TLS client context for the store hosts cannot be made%s: %s", who,
		  dial_tls.ctx != NULL ? " (the one before stays)" : "", err);
	free(err);
}

void proxy_tls_unload(void)
{
	dial_sessions_flush();
	tls_ctx_free(&dial_tls.ctx);
	free(dial_tls.error);
	dial_tls.error = NULL;
}

bool proxy_dial_starttls(struct proxy_dial *d, char *why, size_t wsz)
{
	struct bufferevent *tls;
	SSL_SESSION *sess;
	char *key;
	SSL *ssl;

	if (dial_tls.ctx == NULL) {
		snprintf(why, wsz, "no TLS client context: %s",
			 dial_tls.error != NULL ? dial_tls.error : "not loaded");
		return false;
	}
	if ((ssl = tls_client_ssl_new(dial_tls.ctx, d->host)) == NULL) {
		snprintf(why, wsz, "TLS with %s cannot start for the name %s", d->where, d->host);
		return false;
	}
	/* a session is offered only to the name and address it was verified with */
	key = xasprintf("%s %s", d->host, d->where);
	d->offered = (sess = dial_session_get(key)) != NULL && SSL_set_session(ssl, sess) == 1;
	if (SSL_set_ex_data(ssl, dial_tls.key_index, key) != 1) {
		free(key);
		SSL_free(ssl);
		snprintf(why, wsz, "TLS with %s cannot start: no memory", d->where);
		return false;
	}
	tls = tls_starttls_client_ssl(d->be, ssl, NULL);
	d->be = tls; /* it owns the TCP connection */
	d->tls = true;
	bufferevent_setcb(tls, d->readcb, NULL, d->eventcb, d->arg);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
	return true;
}

/* The handshake on d->be failed or the connection closed in it: a session offered is not
   offered again (the store host may have a new key, or refuse it). */
static void dial_session_failed(struct proxy_dial *d)
{
	SSL *ssl = bufferevent_openssl_get_ssl(d->be);
	const char *key = ssl != NULL ? SSL_get_ex_data(ssl, dial_tls.key_index) : NULL;
	struct dial_session *e;

	if (d->offered && key != NULL && (e = dial_session_find(key)) != NULL)
		dial_session_clear(e);
}

bool proxy_dial_event(struct proxy_dial *d, short what, char *why, size_t wsz)
{
	const char *proto = NULL;
	char err[256];

	if (d->be != NULL)
		tls_peer_info(d->be, &proto, NULL,
			      NULL); /* NULL: no TLS or its handshake unfinished */
	if ((what & BEV_EVENT_CONNECTED) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_EOF))) {
		SSL *ssl = bufferevent_openssl_get_ssl(d->be);

		d->resumed = ssl != NULL && SSL_session_reused(ssl) == 1;
		metrics_inc(MS_PROXY_TLS, d->resumed ? 1 : 0, 0);
		log_debug("proxy: TLS with %s (%s) made: %s, %s", d->where, d->host,
			  proto != NULL ? proto : "?",
			  d->resumed ? "session resumed" : "full handshake");
		return true;
	}
	if (d->tls && d->be != NULL && proto == NULL)
		dial_session_failed(d);
	if (what & BEV_EVENT_TIMEOUT)
		snprintf(why, wsz, "%s timed out", d->where);
	else if (d->tls && d->be != NULL && (what & BEV_EVENT_ERROR) &&
		 tls_error(d->be, err, sizeof(err))[0] != '\0')
		snprintf(why, wsz, "TLS with %s (%s) failed: %s", d->where, d->host, err);
	else if (d->tls && d->be != NULL && proto == NULL)
		snprintf(why, wsz,
			 "TLS with %s (%s) failed: the connection closed in the handshake",
			 d->where, d->host);
	else
		snprintf(why, wsz, "%s closed", d->where);
	return false;
}

const char *proxy_dial_tls_log(const struct proxy_dial *d, char *buf, size_t size)
{
	const char *proto = NULL;

	if (d->be != NULL)
		tls_peer_info(d->be, &proto, NULL, NULL);
	if (proto == NULL)
		snprintf(buf, size, "tls=no");
	else
		snprintf(buf, size, "tls=%s tls_session=%s", proto,
			 d->resumed ? "resumed" : "full");
	return buf;
}

const char *proxy_login_sasl(const struct proxy_dial *d, bool cert, const char *authz,
			     const char *user, const char *secret, char **b64_r,
			     const char **why_r)
{
	size_t n = strlen(authz);

	if (cert && d->tls) {
		*b64_r = xmalloc(4 * ((n + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)*b64_r, (const unsigned char *)authz, (int)n);
		return "EXTERNAL";
	}
	if (secret == NULL) {
		*why_r = cert ? "proxy_cert_file needs proxy_tls = starttls (no secret either)"
			      : "no proxy_secret_file nor proxy_cert_file";
		return NULL;
	}
	*b64_r = proxy_plain_b64(authz, user, secret);
	return "PLAIN";
}

int proxy_readln(struct evbuffer *in, char **line_r, const char **why_r)
{
	size_t len;
	char *line;

	if ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF)) == NULL) {
		if (evbuffer_get_length(in) <= PROXY_LINE_MAX)
			return 0;
		*why_r = "a line too long";
		return -1;
	}
	if (len >= PROXY_LINE_MAX || strlen(line) != len) {
		free(line);
		*why_r = "a line too long or with a NUL";
		return -1;
	}
	*line_r = line;
	return 1;
}

/* ---- the store host's check of a front's TLS client certificate ---- */

/* The CAs of proxy_client_ca_file (NULL: none, no certificate asked for or accepted). */
static X509_STORE *fronts;

/* The handshake goes on whatever the front's certificate is: proxy_external_check says
   why one is refused, at the login, against the CAs of that moment. */
static int fronts_verify_any(int ok, X509_STORE_CTX *x)
{
	return 1;
}

int proxy_fronts_load(const char *ca_file, char **error_r)
{
	X509_STORE *st;

	if (ca_file == NULL || ca_file[0] == '\0') {
		X509_STORE_free(fronts);
		fronts = NULL;
		return 0;
	}
	if ((st = X509_STORE_new()) == NULL || X509_STORE_load_file(st, ca_file) != 1) {
		unsigned long e = ERR_get_error();
		char reason[256] = "no certificate in it";

		if (e != 0)
			ERR_error_string_n(e, reason, sizeof(reason));
		ERR_clear_error();
		X509_STORE_free(st);
		*error_r = xasprintf("proxy_client_ca_file %s: %s", ca_file, reason);
		return -1;
	}
	X509_STORE_free(fronts);
	fronts = st;
	return 0;
}

void proxy_fronts_configure(const char *ca_file, const char *who)
{
	char *err = NULL;

	if (proxy_fronts_load(ca_file, &err) == 0)
		return;
	log_warnx("%s: %s%s", who, err,
		  fronts != NULL ? " (the CA file read before stays)"
				 : " (no front certificate is accepted)");
	free(err);
}

bool proxy_fronts_enabled(void)
{
	return fronts != NULL;
}

void proxy_fronts_ask_cert(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (fronts == NULL || ssl == NULL)
		return;
	SSL_set_verify(ssl, SSL_VERIFY_PEER, fronts_verify_any);
	SSL_set1_verify_cert_store(ssl, fronts);
}

const char *proxy_external_check(struct bufferevent *bev, bool from_front, char *why, size_t wsz)
{
	SSL *ssl = bev != NULL ? bufferevent_openssl_get_ssl(bev) : NULL;
	X509 *cert = ssl != NULL ? SSL_get0_peer_certificate(ssl) : NULL;
	X509_STORE_CTX *x;
	int ok, err;

	if (!from_front)
		snprintf(why, wsz, "not from a proxy_trusted address");
	else if (fronts == NULL)
		snprintf(why, wsz, "no proxy_client_ca_file");
	else if (ssl == NULL || !SSL_is_init_finished(ssl))
		snprintf(why, wsz, "EXTERNAL without TLS");
	else if (cert == NULL)
		snprintf(why, wsz, "no client certificate");
	else
		why[0] = '\0';
	if (why[0] != '\0')
		return why;
	/* verified now, against the CAs read last (a session resumed from before a SIGHUP too) */
	if ((x = X509_STORE_CTX_new()) == NULL ||
	    X509_STORE_CTX_init(x, fronts, cert, SSL_get_peer_cert_chain(ssl)) != 1) {
		X509_STORE_CTX_free(x);
		snprintf(why, wsz, "the client certificate cannot be checked: no memory");
		return why;
	}
	X509_STORE_CTX_set_purpose(x, X509_PURPOSE_SSL_CLIENT);
	ok = X509_verify_cert(x);
	err = X509_STORE_CTX_get_error(x);
	X509_STORE_CTX_free(x);
	ERR_clear_error();
	if (ok == 1)
		return NULL;
	snprintf(why, wsz, "client certificate not verified: %s",
		 X509_verify_cert_error_string(err));
	return why;
}

int proxy_external_decode(const char *b64, size_t len, char *authz)
{
	size_t n = 0;

	if (len == 1 && b64[0] == '=') /* an empty initial response (RFC 4959) */
		len = 0;
	if (sasl_b64_decode(b64, len, (unsigned char *)authz, SASL_NAME_MAX + 1, &n) != SASL_OK ||
	    strlen(authz) != n)
		return -1;
	return 0;
}

bool proxy_credential_ok(const char *secret, const char *proxy_user,
			 const struct conf_cidrs *trusted, const struct sockaddr *sa,
			 const char *authcid, const char *passwd)
{
	size_t n = strlen(passwd);

	if (secret == NULL || strcmp(authcid, proxy_user) != 0 || !conf_cidrs_match(trusted, sa))
		return false;
	return n == strlen(secret) && CRYPTO_memcmp(passwd, secret, n) == 0;
}

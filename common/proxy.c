/* proxy.c — owns the protocol-independent parts of the front/store host proxy login: the
 * secret file, the PLAIN response, the proxy_hosts map, the connection with the login's
 * deadline, STARTTLS's TLS on it and the credential check. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/proxy.h"
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

/* The client context the store hosts' certificates are verified with: one per process, made
   again when ca_file changes (a SIGHUP's config), or the file under that name does (a CA
   bundle replaced or rewritten: its device, inode, size or mtime). NULL with *error_r when it
   cannot be made. */
static SSL_CTX *dial_tls_ctx(const char *ca_file, char **error_r)
{
	static SSL_CTX *ctx;
	static char *ctx_ca;
	static struct stat ctx_st;
	struct tls_conf t;
	struct stat st;
	bool same = ctx != NULL && strcmp(ctx_ca, ca_file) == 0;

	if (stat(ca_file, &st) != 0) {
		if (same) /* gone for now (being replaced?): the one read before */
			return ctx;
		memset(&st, 0, sizeof(st)); /* tls_client_ctx_new says what is wrong */
	}
	if (same && st.st_dev == ctx_st.st_dev && st.st_ino == ctx_st.st_ino &&
	    st.st_size == ctx_st.st_size && st.st_mtim.tv_sec == ctx_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == ctx_st.st_mtim.tv_nsec)
		return ctx;
	tls_ctx_free(&ctx);
	free(ctx_ca);
	ctx_ca = xstrdup(ca_file);
	ctx_st = st;
	memset(&t, 0, sizeof(t));
	t.ca = ca_file;
	ctx = tls_client_ctx_new(&t, TLS_VERIFY_PEER, error_r);
	return ctx;
}

bool proxy_dial_starttls(struct proxy_dial *d, const char *ca_file, char *why, size_t wsz)
{
	struct bufferevent *tls;
	char *err = NULL;
	SSL_CTX *ctx;

	if ((ctx = dial_tls_ctx(ca_file, &err)) == NULL) {
		snprintf(why, wsz, "no TLS client context: %s", err);
		free(err);
		return false;
	}
	if ((tls = tls_starttls_client(d->be, ctx, d->host, NULL)) == NULL) {
		snprintf(why, wsz, "TLS with %s cannot start for the name %s", d->where, d->host);
		return false;
	}
	d->be = tls; /* it owns the TCP connection */
	d->tls = true;
	bufferevent_setcb(tls, d->readcb, NULL, d->eventcb, d->arg);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
	return true;
}

bool proxy_dial_event(struct proxy_dial *d, short what, char *why, size_t wsz)
{
	const char *proto = NULL;
	char err[256];

	if (d->be != NULL)
		tls_peer_info(d->be, &proto, NULL,
			      NULL); /* NULL: no TLS or its handshake unfinished */
	if ((what & BEV_EVENT_CONNECTED) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_EOF))) {
		log_debug("proxy: TLS with %s (%s) made: %s", d->where, d->host,
			  proto != NULL ? proto : "?");
		return true;
	}
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

bool proxy_credential_ok(const char *secret, const char *proxy_user,
			 const struct conf_cidrs *trusted, const struct sockaddr *sa,
			 const char *authcid, const char *passwd)
{
	size_t n = strlen(passwd);

	if (secret == NULL || strcmp(authcid, proxy_user) != 0 || !conf_cidrs_match(trusted, sa))
		return false;
	return n == strlen(secret) && CRYPTO_memcmp(passwd, secret, n) == 0;
}

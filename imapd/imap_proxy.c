/* imap_proxy.c — owns imapd's two sides of the proxy login between hosts.
 * Front ([imapd] proxy = yes): a user the directory homes on another store host, once the
 * password checked out here, is logged in at that host's imapd with SASL PLAIN (authorization
 * identity: the user's address; authentication identity and password: [imapd] proxy_user and
 * the shared secret); the store host's tagged OK is the client's, and from then on the bytes
 * go both ways unparsed (IDLE, literals, COMPRESS included) until either side closes. A store
 * host that does not answer, refuses, or answers garbage gives NO [UNAVAILABLE].
 * Store host: the proxy credential is accepted only from [imapd] proxy_trusted addresses. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define PROXY_LINE_MAX 8192 /* the store host's greeting and login replies */
#define PROXY_TAG "P1"

enum px_state { PX_CONNECT, PX_GREETING, PX_LOGIN, PX_READY, PX_FAILED, PX_RELAY };

struct imap_proxy {
	struct imap_client *c;
	enum px_state st;
	struct net_connect *nc;
	struct bufferevent *be;     /* the store host's connection */
	struct event *timer;        /* the login's deadline */
	char host[256];             /* the store host (mailHost), for logs */
	char where[320];            /* address:port connected to */
	char reply[PROXY_LINE_MAX]; /* the store host's tagged OK text, or why it failed */
	char *authz, *login;
};

static void px_fail(struct imap_proxy *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void px_fail(struct imap_proxy *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->reply, sizeof(p->reply), fmt, ap);
	va_end(ap);
	log_info("%016" PRIx64 " imap proxy user=%s host=%s result=fail reason=\"%s\"", p->c->id,
		 p->login, p->host, p->reply);
	p->st = PX_FAILED;
	if (p->be != NULL) {
		bufferevent_free(p->be);
		p->be = NULL;
	}
	net_connect_cancel(&p->nc);
	evtimer_del(p->timer);
	imap_client_resume(p->c);
}

/* The secret of [imapd] proxy_secret_file (first line), read once per worker. */
int imap_proxy_init(struct imap_server *srv, char **error_r)
{
	const char *path = conf_values(srv->conf)->imapd.proxy_secret_file;
	char buf[1025];
	ssize_t n;
	int fd;

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
	srv->proxy_secret = xstrdup(buf);
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

void imap_proxy_server_free(struct imap_server *srv)
{
	if (srv->proxy_secret != NULL) {
		OPENSSL_cleanse(srv->proxy_secret, strlen(srv->proxy_secret));
		free(srv->proxy_secret);
		srv->proxy_secret = NULL;
	}
	if (srv->proxy_dns != NULL)
		evdns_base_free(srv->proxy_dns, 0);
	srv->proxy_dns = NULL;
}

bool imap_proxy_from_front(const struct imap_client *c)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;

	return c->srv->proxy_secret != NULL &&
	       conf_cidrs_match(ic->proxy_trusted, (const struct sockaddr *)&c->sa);
}

bool imap_proxy_credential_ok(struct imap_client *c, const char *authcid, const char *passwd)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;
	const char *secret = c->srv->proxy_secret;
	size_t n = strlen(passwd);

	if (secret == NULL || strcmp(authcid, ic->proxy_user) != 0 ||
	    !conf_cidrs_match(ic->proxy_trusted, (const struct sockaddr *)&c->sa))
		return false;
	return n == strlen(secret) && CRYPTO_memcmp(passwd, secret, n) == 0;
}

static void px_free(struct imap_proxy *p)
{
	net_connect_cancel(&p->nc);
	if (p->be != NULL)
		bufferevent_free(p->be);
	if (p->timer != NULL)
		event_free(p->timer);
	free(p->authz);
	free(p->login);
	free(p);
}

void imap_proxy_free(struct imap_client *c)
{
	if (c->proxy != NULL)
		px_free(c->proxy);
	c->proxy = NULL;
}

/* base64 of authz NUL user NUL secret (RFC 4616). */
static char *plain_b64(const char *authz, const char *user, const char *secret)
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

/* One line from the store host during the login. */
static void px_line(struct imap_proxy *p, const char *line)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;

	if (p->st == PX_GREETING) {
		if (strncmp(line, "* OK", 4) != 0) {
			px_fail(p, "unexpected greeting from %s", p->where);
			return;
		}
		char *b64 = plain_b64(p->authz, ic->proxy_user, p->c->srv->proxy_secret);

		evbuffer_add_printf(bufferevent_get_output(p->be),
				    PROXY_TAG " AUTHENTICATE PLAIN %s\r\n", b64);
		OPENSSL_cleanse(b64, strlen(b64));
		free(b64);
		p->st = PX_LOGIN;
		return;
	}
	if (strncmp(line, "* ", 2) == 0)
		return; /* untagged data during the login (CAPABILITY): the client gets the OK's */
	if (strncmp(line, PROXY_TAG " OK", 5) == 0 && (line[5] == ' ' || line[5] == '\0')) {
		snprintf(p->reply, sizeof(p->reply), "%s", line[5] ? line + 6 : "Logged in");
		p->st = PX_READY;
		evtimer_del(p->timer);
		bufferevent_disable(p->be, EV_READ); /* the relay reads from now on */
		log_info("%016" PRIx64 " imap proxy user=%s host=%s addr=%s result=ok", p->c->id,
			 p->login, p->host, p->where);
		imap_client_resume(p->c);
		return;
	}
	if (strncmp(line, PROXY_TAG " ", 3) == 0) {
		px_fail(p, "%s refused the proxy login: %.200s", p->where, line + 3);
		return;
	}
	px_fail(p, "unexpected reply from %s", p->where);
}

static void px_login_read(struct bufferevent *bev, void *arg)
{
	struct imap_proxy *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line;

	while (p->st == PX_GREETING || p->st == PX_LOGIN) {
		if ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF)) == NULL) {
			if (evbuffer_get_length(in) > PROXY_LINE_MAX)
				px_fail(p, "%s sent a line too long", p->where);
			return;
		}
		if (len >= PROXY_LINE_MAX || strlen(line) != len)
			px_fail(p, "%s sent a line too long or with a NUL", p->where);
		else
			px_line(p, line);
		free(line);
	}
}

static void px_event(struct bufferevent *bev, short what, void *arg)
{
	struct imap_proxy *p = arg;

	if (p->st == PX_RELAY) {
		/* what the store host sent before it closed goes to the client first */
		log_info("%016" PRIx64 " imap proxy user=%s host=%s closed by the store host",
			 p->c->id, p->login, p->host);
		imap_proxy_to_client(p->c);
		bufferevent_disable(p->be, EV_READ | EV_WRITE);
		imap_client_close(p->c, "store host closed");
		return;
	}
	px_fail(p, "%s %s", p->where, (what & BEV_EVENT_TIMEOUT) ? "timed out" : "closed");
}

static void px_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct imap_proxy *p = arg;

	px_fail(p, "%s did not log in in time", p->where[0] ? p->where : p->host);
}

static void px_connected(struct bufferevent *bev, const char *error, void *arg)
{
	struct imap_proxy *p = arg;

	p->nc = NULL;
	if (bev == NULL) {
		px_fail(p, "%s", error);
		return;
	}
	p->be = bev;
	p->st = PX_GREETING;
	bufferevent_setcb(bev, px_login_read, NULL, px_event, p);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* Where store host host's imapd listens: its proxy_hosts entry, else host:proxy_port. */
static void px_target(const struct imapd_conf *ic, const char *host, char *addr, size_t asz,
		      char *port, size_t psz)
{
	const struct conf_list *map = ic->proxy_hosts;
	size_t hl = strlen(host);

	snprintf(addr, asz, "%s", host);
	snprintf(port, psz, "%lld", (long long)ic->proxy_port);
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

static bool is_numeric_host(const char *h)
{
	unsigned char a[16];

	return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

void imap_proxy_start(struct imap_client *c, const char *login, const char *authz,
		      const char *host)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;
	struct imap_proxy *p = xcalloc(1, sizeof(*p));
	struct timeval tv = { (time_t)(ic->proxy_timeout_ms / 1000),
			      (suseconds_t)(ic->proxy_timeout_ms % 1000) * 1000 };
	char addr[256], port[16];

	assert(c->proxy == NULL);
	c->proxy = p;
	p->c = c;
	p->login = xstrdup(login);
	p->authz = xstrdup(authz != NULL ? authz : "");
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->timer = evtimer_new(c->srv->base, px_timeout, p);
	evtimer_add(p->timer, &tv);
	if (c->srv->proxy_secret == NULL) {
		px_fail(p, "no [imapd] proxy_secret_file");
		return;
	}
	if (p->authz[0] == '\0') {
		px_fail(p, "the user has no address to log in with at the store host");
		return;
	}
	px_target(ic, host, addr, sizeof(addr), port, sizeof(port));
	snprintf(p->where, sizeof(p->where), "%s:%s", addr, port);
	if (!is_numeric_host(addr) && c->srv->proxy_dns == NULL)
		c->srv->proxy_dns = evdns_base_new(c->srv->base,
						   EVDNS_BASE_INITIALIZE_NAMESERVERS);
	p->nc = net_connect(c->srv->base, is_numeric_host(addr) ? NULL : c->srv->proxy_dns, addr,
			    port, (int)ic->proxy_timeout_ms, px_connected, p);
}

bool imap_proxy_login_reply(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct imap_proxy *p = c->proxy;

	if (p->st != PX_READY && p->st != PX_FAILED)
		return false;
	if (p->st == PX_FAILED) {
		imap_proxy_free(c);
		return imap_cmd_no(cmd, "[UNAVAILABLE] Your mailbox is not reachable now; try "
					"again later");
	}
	/* the store host's capabilities and text are the client's from now on */
	imap_cmd_reply(cmd, "OK", "%s", p->reply);
	c->user = xstrdup(p->login);
	imap_client_set_state(c, IMAP_ST_AUTH);
	c->flags |= IMAP_CF_PROXY;
	evtimer_del(c->timer); /* the store host keeps the idle time */
	p->st = PX_RELAY;
	bufferevent_setcb(p->be, imap_proxy_be_read, imap_proxy_be_write, px_event, p);
	bufferevent_setwatermark(p->be, EV_WRITE, IMAP_OUT_LOW, 0);
	bufferevent_enable(p->be, EV_READ | EV_WRITE);
	imap_proxy_to_client(c); /* anything that came after the OK */
	return true;
}

/* Relay: the store host's bytes to the client, paused while the client's output is full. */
void imap_proxy_to_client(struct imap_client *c)
{
	struct imap_proxy *p = c->proxy;

	if (p == NULL || p->be == NULL)
		return;
	evbuffer_add_buffer(imap_out(c), bufferevent_get_input(p->be));
	if (imap_out_full(c))
		bufferevent_disable(p->be, EV_READ);
	else if (p->st == PX_RELAY && !(c->flags & IMAP_CF_CLOSING))
		bufferevent_enable(p->be, EV_READ);
}

void imap_proxy_be_read(struct bufferevent *bev, void *arg)
{
	struct imap_proxy *p = arg;

	imap_proxy_to_client(p->c);
}

/* The store host took the client's bytes: read the client again. */
void imap_proxy_be_write(struct bufferevent *bev, void *arg)
{
	struct imap_proxy *p = arg;

	if (!(p->c->flags & IMAP_CF_CLOSING))
		bufferevent_enable(p->c->bev, EV_READ);
	imap_proxy_from_client(p->c);
}

/* Relay: the client's bytes to the store host, paused while that output is full. */
void imap_proxy_from_client(struct imap_client *c)
{
	struct imap_proxy *p = c->proxy;
	struct evbuffer *out;

	if (p == NULL || p->be == NULL || p->st != PX_RELAY)
		return;
	out = bufferevent_get_output(p->be);
	evbuffer_add_buffer(out, bufferevent_get_input(c->bev));
	if (evbuffer_get_length(out) >= IMAP_OUT_HIGH)
		bufferevent_disable(c->bev, EV_READ);
}

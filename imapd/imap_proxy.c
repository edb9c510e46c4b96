/* imap_proxy.c — owns imapd's two sides of the proxy login between hosts.
 * Front ([imapd] proxy = yes): a user the directory homes on another store host, once the
 * password checked out here, is logged in at that host's imapd with SASL PLAIN (authorization
 * identity: the user's address; authentication identity and password: [imapd] proxy_user and
 * the shared secret), or SASL EXTERNAL with the same authorization identity when the front
 * has a TLS client certificate (proxy_cert_file, proxy_key_file), after STARTTLS with the store host's certificate verified ([imapd]
 * proxy_tls, proxy_ca_file, read at the worker's start and SIGHUP; the store host's last TLS
 * session offered again, common/proxy.c; a failed handshake or verification is a store host
 * not reachable); the store host's tagged OK is the client's, and from then on the bytes
 * go both ways unparsed (IDLE, literals, COMPRESS included) until either side closes. A store
 * host that does not answer, refuses, or answers garbage gives NO [UNAVAILABLE]. While
 * relaying, the front follows the store host's responses (line ends and literals only) so
 * that, when the store host closes or breaks the connection or sends what no IMAP server
 * sends, the client gets * BYE [UNAVAILABLE] after the last whole response (RFC 9051 7.1.5);
 * none when the store host said BYE itself, when a response was cut off (a BYE would end it),
 * or after COMPRESS or STARTTLS (the bytes are no longer readable here).
 * The front replays the client's ID: the pairs of an ID the client sent before login (RFC 2971
 * limits) go to the store host just ahead of the proxy login (after STARTTLS), with
 * x-originating-ip/port naming the client, and that ID's replies are dropped; an ID after the
 * login is relayed.
 * Store host: the proxy credential is accepted only from [imapd] proxy_trusted addresses
 * (the secret only over TLS with proxy_require_tls; EXTERNAL only over TLS with a certificate
 * that chains to proxy_client_ca_file, cmd_auth.c), and so is a client's address in
 * x-originating-ip (then in its log lines instead of the
 * front's).
 * No splice(2): the relay moves evbuffer chains through the loop (a read and a write per
 * chunk, nothing copied in between), for two reasons. The store host's bytes are scanned on
 * purpose (for the BYE above, until COMPRESS or STARTTLS ends the scan). And TLS ends here in
 * user space (OpenSSL through libevent, no kernel TLS), so a TLS client's bytes are in clear
 * only in this process. splice would need both legs to be sockets carrying the same bytes:
 * a plain-text client leg or kTLS on it (SSL_OP_ENABLE_KTLS, a kernel and an OpenSSL built
 * for it), the front-to-store leg plain text (proxy_tls = none) or kTLS too, and the
 * relay to splice only where the scan has ended (after COMPRESS) or to give up the added BYE.
 * What it could save is bounded: the front's whole imapd cost of a proxied session, login
 * and relay together, is 510-590 µs (bench/cluster/README.md, part 1).
 * The pool (per worker): a client's LOGOUT at a command boundary with nothing in flight (the
 * client's commands followed by line ends and counted against the store host's tagged
 * responses; IDLE's DONE is no command; a session with a literal is not followed further: a
 * literal the store host refuses would make real commands look like literal bytes) and
 * nothing the store host's UNAUTHENTICATE cannot undo (COMPRESS, STARTTLS, a login or
 * UNAUTHENTICATE relayed; a login by certificate, which the store host takes only as a
 * connection's first) is answered here (BYE, tagged OK); the store host gets UNAUTHENTICATE,
 * tagged with 16 random hex digits no client line can have answered, and on its tagged OK the
 * connection, TLS kept, is parked for the next login of one of its users: the proxy login and
 * the ID replay run on it as on a new one, the front's tags carrying the connection's use
 * count (nothing sent for an earlier session passes for an answer). A parked connection that
 * closes, sends anything (BYE included) or outlives proxy_pool_idle is closed; one that fails
 * in the login that took it is replaced by a fresh dial, unseen by the client. A SIGHUP and a
 * drain empty the pool. The store host's half (what UNAUTHENTICATE resets) is cmd_auth.c's.
 * Default on (proxy_pool_max 64 per worker, 16 per store host, 30 s idle): a login through
 * the front costs a connect, a TLS handshake (resumed when the store host's session is
 * kept, common/proxy.c: still a key exchange on both hosts) and a greeting on top of the
 * login itself, which is what made the proxied run cost 3.05 times the direct one's
 * server CPU with full handshakes (bench/cluster/README.md); a parked connection costs a
 * store host one unauthenticated session and a TLS state until proxy_pool_idle, which stays
 * below the store hosts' login_timeout (60 s) so that the front, not the store host,
 * normally ends it. The bounds hold a front's idle connections to 16 per store host and 64
 * in all per worker, and 30 s idle keeps the pool to the login rate the front actually sees
 * (a parked connection is reused only if a login comes within it). */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/net.h"
#include "common/proxy.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define PROXY_TAG "P1"
#define PROXY_TLS_TAG "P0"
#define PROXY_ID_TAG "P2"
#define PROXY_UNAUTH_TAG "P3"
#define PARK_LINES_MAX 64 /* untagged lines before UNAUTHENTICATE's OK (the last EXISTS...) */
#define CMD_TAG_MAX 64    /* a LOGOUT's tag the front answers itself, at most */
#define ID_PAIRS_MAX 30   /* RFC 2971 3.3: MUST NOT send more */
#define ID_FWD_PAIRS (ID_PAIRS_MAX - 2)       /* the client's; x-originating-ip/port follow */
#define ID_FIELD_MAX 30                       /* bytes of a field name */
#define ID_VALUE_MAX 1024                     /* bytes of a value */
#define ID_FWD_MAX 16384                      /* bytes of the pairs kept, quoted */
#define PROXY_LITERAL_MAX (UINT64_C(1) << 40) /* a larger {N} is not a store host's */
#define PROXY_BYE "* BYE [UNAVAILABLE] Your mailbox is not reachable now; try again later\r\n"
#define TAG_MAX 24 /* PROXY_TAG "." and a use count */

/* The tag of one of the front's own commands on a connection's use-th login (0: the first):
   base, with ".use" after it from the second on, so that nothing a store host sent for an
   earlier session can pass for an answer to this one. */
static void px_tag(char out[TAG_MAX], const char *base, unsigned use)
{
	if (use == 0)
		snprintf(out, TAG_MAX, "%s", base);
	else
		snprintf(out, TAG_MAX, "%s.%u", base, use);
}

/* Whether line is tag's tagged response ("TAG " ...), and then with what (OK: *ok_r). */
static bool px_tagged(const char *line, const char *tag, bool *ok_r)
{
	size_t n = strlen(tag);

	if (strncmp(line, tag, n) != 0 || line[n] != ' ')
		return false;
	*ok_r = strncmp(line + n + 1, "OK", 2) == 0 && (line[n + 3] == ' ' || line[n + 3] == '\0');
	return true;
}

enum px_state {
	PX_CONNECT,
	PX_GREETING,
	PX_STARTTLS,
	PX_LOGIN,
	PX_READY,
	PX_FAILED,
	PX_RELAY,
	PX_ENDED
};

/* Where a literal's bytes start and end in a stream of IMAP lines (px_lit_byte). */
struct px_lit {
	uint64_t left; /* bytes of a literal still to come */
	uint64_t num;  /* the N of a {N} being read */
	uint8_t brace; /* 0; 1 after {, 4 in N, 5 after N's + or -; 2 after }; 3 after }CR */
};

struct imap_proxy {
	struct imap_client *c;
	enum px_state st;
	struct proxy_dial d;        /* the store host's connection (d.be), the deadline */
	char reply[PROXY_LINE_MAX]; /* the store host's tagged OK text, or why it failed */
	char *authz, *login;
	struct px_scan {           /* where the store host's responses end (relay) */
		struct px_lit lit; /* the literal being followed */
		bool bol;          /* the next byte starts a response */
		bool opaque;       /* after COMPRESS or STARTTLS: not followed any more */
		bool bye_seen;     /* the store host said BYE */
		char first;        /* the current line's first byte */
		bool in_tag;       /* still in the line's first word (a tag: any length) */
		size_t taglen;     /* bytes of that word */
		uint8_t rlen;      /* bytes of rest[] */
		char rest[24];     /* what follows the first word's space, outside literals */
		uint64_t tagged;   /* tagged responses (for the pool's count) */
		uint64_t conts;    /* continuation requests ("+") */
	} scan;
	struct px_cscan { /* the client's commands (relay), for the pool */
		struct px_lit lit;
		bool bol;       /* the next byte starts a line */
		bool multi;     /* the command has a literal (more than one line) */
		uint8_t word;   /* 0 in the tag, 1 in the name, 2 after it */
		uint8_t nlen;   /* bytes of name[] */
		uint8_t taglen; /* bytes of tag[]; CMD_TAG_MAX + 1: longer */
		char name[16];  /* the command's name, upper case (cut) */
		char tag[CMD_TAG_MAX + 1];
		uint64_t sent;       /* commands the client sent */
		bool idle;           /* after IDLE: the next line is DONE once "+" came */
		uint64_t idle_conts; /* scan.conts when IDLE was sent */
		bool tainted;        /* state a parked connection cannot shed (COMPRESS, ...) */
	} cs;
	bool reused;   /* d.be was parked (imap_proxy_pool): a failure dials afresh */
	unsigned use;  /* logins on d.be before this one (px_tag) */
	bool no_retry; /* the login's deadline passed: no fresh dial */
};

/* A store host connection parked after UNAUTHENTICATE (or waiting for its OK). */
struct imap_proxy_parked {
	struct imap_proxy_parked *next, *prev;
	struct imap_server *srv;
	struct bufferevent *be;
	struct event *timer; /* UNAUTHENTICATE's answer due (proxy_timeout), then idle time */
	bool ready;          /* UNAUTHENTICATE's OK came: a login may take it */
	bool tls;
	bool resumed;       /* its TLS handshake resumed a session (for the log) */
	unsigned use;       /* the login it was parked after (px_tag) */
	unsigned lines;     /* untagged lines before the OK */
	char utag[TAG_MAX]; /* UNAUTHENTICATE's tag: PROXY_UNAUTH_TAG "." 16 random hex digits,
			       so that no line a client had sent before can answer it */
	char host[256];     /* the store host (mailHost) */
	char where[320];    /* address:port */
};

static void px_fail(struct imap_proxy *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void px_login_read(struct bufferevent *bev, void *arg);
static void px_event(struct bufferevent *bev, short what, void *arg);

/* Connects to the store host afresh (its login follows px_dialled). */
static void px_dial(struct imap_proxy *p)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;

	p->st = PX_CONNECT;
	proxy_dial_start(&p->d, p->c->srv->base, &p->c->srv->proxy_dns, ic->proxy_hosts,
			 ic->proxy_port, ic->proxy_timeout_ms);
}

/* The login at the store host failed: the client gets NO [UNAVAILABLE], but when the
   connection was a parked one (closed by the store host meanwhile, or answering what it
   should not), which a fresh dial replaces without the client seeing it. */
static void px_fail(struct imap_proxy *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->reply, sizeof(p->reply), fmt, ap);
	va_end(ap);
	if (p->d.be != NULL) {
		bufferevent_free(p->d.be);
		p->d.be = NULL;
	}
	if (p->reused && !p->no_retry) {
		log_info("%016" PRIx64 " imap proxy user=%s host=%s parked connection dropped "
			 "reason=\"%s\"; dialing",
			 p->c->id, p->login, p->d.host, p->reply);
		p->reused = false;
		p->d.tls = p->d.offered = p->d.resumed = false;
		px_dial(p);
		return;
	}
	log_info("%016" PRIx64 " imap proxy user=%s host=%s result=fail reason=\"%s\"", p->c->id,
		 p->login, p->d.host, p->reply);
	p->st = PX_FAILED;
	proxy_dial_stop(&p->d);
	imap_client_resume(p->c);
}

static struct timeval px_tv(int64_t ms)
{
	return (struct timeval){ (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
}

/* The pool: store host connections parked after a client's LOGOUT, per worker, newest
   first (a login takes the newest: the oldest age out when fewer are needed). */

/* Parked (or being parked) connections to host. */
static unsigned pool_count(const struct imap_server *srv, const char *host)
{
	unsigned n = 0;

	for (const struct imap_proxy_parked *k = srv->proxy_pool; k != NULL; k = k->next)
		n += strcasecmp(k->host, host) == 0;
	return n;
}

/* Whether the pool takes another connection to host. */
static bool pool_room(const struct imap_server *srv, const char *host)
{
	const struct imapd_conf *ic = &conf_values(srv->conf)->imapd;

	return !srv->draining && srv->proxy_npooled < (unsigned)ic->proxy_pool_max &&
	       pool_count(srv, host) < (unsigned)ic->proxy_pool_max_per_host;
}

static void pool_unlink(struct imap_proxy_parked *k)
{
	if (k->prev != NULL)
		k->prev->next = k->next;
	else
		k->srv->proxy_pool = k->next;
	if (k->next != NULL)
		k->next->prev = k->prev;
	k->srv->proxy_npooled--;
	event_free(k->timer);
}

/* Closes parked connection k (why logged). */
static void pool_drop(struct imap_proxy_parked *k, const char *why)
{
	log_info("imap proxy pool host=%s addr=%s closed reason=\"%s\"", k->host, k->where, why);
	pool_unlink(k);
	bufferevent_free(k->be);
	free(k);
}

void imap_proxy_pool_flush(struct imap_server *srv, const char *why)
{
	while (srv->proxy_pool != NULL)
		pool_drop(srv->proxy_pool, why);
}

/* The store host's bytes on a parked connection: before UNAUTHENTICATE's tagged OK,
   untagged responses (a few, dropped) but BYE; after it, nothing at all. */
static void pool_read(struct bufferevent *bev, void *arg)
{
	struct imap_proxy_parked *k = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	char tag[TAG_MAX];
	char *line;
	int rc = 0;

	snprintf(tag, sizeof(tag), "%s", k->utag);
	while (!k->ready && (rc = proxy_readln(in, &line, &why)) > 0) {
		bool ok = false;
		bool untagged = strncmp(line, "* ", 2) == 0 &&
				strncasecmp(line + 2, "BYE", 3) != 0;

		if (!px_tagged(line, tag, &ok))
			ok = false;
		free(line);
		if (ok) {
			struct timeval tv = px_tv(
				conf_values(k->srv->conf)->imapd.proxy_pool_idle_ms);

			k->ready = true;
			evtimer_add(k->timer, &tv);
			log_info("imap proxy pool host=%s addr=%s parked", k->host, k->where);
		} else if (!untagged || ++k->lines > PARK_LINES_MAX) {
			pool_drop(k, "unexpected answer to UNAUTHENTICATE");
			return;
		}
	}
	if (rc < 0)
		pool_drop(k, why);
	else if (k->ready && evbuffer_get_length(in) > 0)
		pool_drop(k, "the store host sent data to a parked connection");
}

static void pool_event(struct bufferevent *bev, short what, void *arg)
{
	pool_drop(arg, (what & BEV_EVENT_ERROR) ? "connection error" : "closed by the store host");
}

static void pool_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct imap_proxy_parked *k = arg;

	pool_drop(k, k->ready ? "idle" : "no answer to UNAUTHENTICATE");
}

/* Whether k's connection still looks open and silent: nothing buffered in any layer, and
   the socket neither readable nor at its end (a close the loop has not seen yet). */
static bool pool_alive(struct imap_proxy_parked *k)
{
	struct bufferevent *u = k->be, *last = k->be;
	unsigned char b;
	ssize_t n;
	int fd;

	for (; u != NULL; u = bufferevent_get_underlying(u)) {
		if (evbuffer_get_length(bufferevent_get_input(u)) > 0)
			return false;
		last = u;
	}
	if ((fd = bufferevent_getfd(last)) < 0)
		return false;
	n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The newest live parked connection to host, taken out of the pool (its bufferevent with
   p's callbacks), or false; dead ones met on the way are closed. */
static bool pool_take(struct imap_proxy *p, const char *host)
{
	struct imap_server *srv = p->c->srv;
	struct imap_proxy_parked *k = srv->proxy_pool, *next;

	for (; k != NULL; k = next) {
		next = k->next;
		if (!k->ready || strcasecmp(k->host, host) != 0)
			continue;
		if (!pool_alive(k)) {
			pool_drop(k, "closed or spoken while parked");
			continue;
		}
		pool_unlink(k);
		p->d.be = k->be;
		p->d.tls = k->tls;
		p->d.resumed = k->resumed;
		p->use = k->use + 1;
		snprintf(p->d.where, sizeof(p->d.where), "%s", k->where);
		free(k);
		bufferevent_setcb(p->d.be, px_login_read, NULL, px_event, p);
		bufferevent_enable(p->d.be, EV_READ | EV_WRITE);
		return true;
	}
	return false;
}

/* The secret of [imapd] proxy_secret_file (first line), read once per worker; the front's
   TLS client context (again at SIGHUP: imap_proxy_reload). */
int imap_proxy_init(struct imap_server *srv, char **error_r)
{
	imap_proxy_reload(srv);
	return proxy_secret_read(conf_values(srv->conf)->imapd.proxy_secret_file,
				 &srv->proxy_secret, error_r);
}

void imap_proxy_reload(struct imap_server *srv)
{
	const struct imapd_conf *ic = &conf_values(srv->conf)->imapd;

	proxy_tls_configure(ic->proxy && ic->proxy_tls == CONF_PROXY_TLS_STARTTLS,
			    ic->proxy_ca_file, ic->proxy_cert_file, ic->proxy_key_file,
			    "imapd worker");
	proxy_fronts_configure(ic->proxy_client_ca_file, "imapd worker");
}

/* Front: whether the proxy login is by the front's TLS client certificate. */
static bool px_cert(const struct imapd_conf *ic)
{
	return ic->proxy_cert_file[0] != '\0' && ic->proxy_key_file[0] != '\0';
}

void imap_proxy_server_free(struct imap_server *srv)
{
	imap_proxy_pool_flush(srv, "worker exit");
	proxy_secret_free(&srv->proxy_secret);
	proxy_tls_unload();
	if (srv->proxy_dns != NULL)
		evdns_base_free(srv->proxy_dns, 0);
	srv->proxy_dns = NULL;
}

bool imap_proxy_from_front(const struct imap_client *c)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;

	return (c->srv->proxy_secret != NULL || proxy_fronts_enabled()) &&
	       conf_cidrs_match(ic->proxy_trusted, (const struct sockaddr *)&c->sa);
}

bool imap_proxy_credential_ok(struct imap_client *c, const char *authcid, const char *passwd,
			      const char **why_r)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;

	*why_r = "not a proxy credential from a trusted address";
	if (!proxy_credential_ok(c->srv->proxy_secret, ic->proxy_user, ic->proxy_trusted,
				 (const struct sockaddr *)&c->sa, authcid, passwd))
		return false;
	*why_r = "the shared secret in clear (proxy_require_tls = yes)";
	return !ic->proxy_require_tls || (c->flags & IMAP_CF_TLS);
}

static void px_free(struct imap_proxy *p)
{
	proxy_dial_free(&p->d);
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

/* s as a quoted string: '"' and '\\' escaped, bytes outside printable ASCII as '?'; 0, or
   -1 when b is full. */
static int id_quote(struct buf *b, const char *s, size_t len)
{
	int rc = buf_putc(b, '"');

	for (size_t i = 0; i < len && rc == 0; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			rc = buf_putc(b, '\\');
		if (rc == 0)
			rc = buf_putc(b, ch >= 0x20 && ch < 0x7f ? (char)ch : '?');
	}
	return rc == 0 ? buf_putc(b, '"') : rc;
}

static bool id_string(const struct imap_arg *a, size_t max)
{
	return imap_arg_is_string(a) && a->len <= max;
}

/* A field the front sets itself (never the client's). */
static bool id_originating_field(const struct imap_arg *f)
{
	return f->len >= 14 && strncasecmp(f->s, "x-originating-", 14) == 0;
}

/* Store host: a front's ID names the client (x-originating-ip, -port), taken once before
   login when the address is numeric. */
static void id_originating(struct imap_client *c, const struct imap_arg *list)
{
	const struct imap_arg *f = list + 1, *end = list + 1 + list->span;
	const char *ip = NULL, *port = "", *name = "";
	unsigned char bin[sizeof(struct in6_addr)];
	char lname[65];

	for (uint32_t i = 0; i + 1 < list->n && f < end; i += 2) {
		const struct imap_arg *v = imap_arg_next(f);

		if (v >= end)
			break;
		if (id_string(f, ID_FIELD_MAX) && id_string(v, INET6_ADDRSTRLEN)) {
			if (strcasecmp(f->s, "x-originating-ip") == 0)
				ip = v->s;
			else if (strcasecmp(f->s, "x-originating-port") == 0)
				port = v->s;
		}
		if (id_string(f, ID_FIELD_MAX) && id_string(v, ID_VALUE_MAX) &&
		    strcasecmp(f->s, "name") == 0)
			name = v->s;
		f = imap_arg_next(v);
	}
	if (ip == NULL)
		return;
	if (inet_pton(AF_INET, ip, bin) != 1 && inet_pton(AF_INET6, ip, bin) != 1) {
		log_info("%016" PRIx64 " imap id from=%s reason=\"x-originating-ip is not an "
			 "address\"",
			 c->id, c->addr);
		return;
	}
	if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
		port = "";
	str_log_name(lname, sizeof(lname), name);
	log_info("%016" PRIx64 " imap id from=%s originating=%s port=%s name=\"%s\"", c->id,
		 c->addr, ip, port[0] != '\0' ? port : "-", lname);
	snprintf(c->addr, sizeof(c->addr), "%s", ip);
	c->id_originated = true;
}

void imap_proxy_id(struct imap_client *c, const struct imap_arg *list)
{
	const struct imap_arg *f = list + 1, *end = list + 1 + list->span;
	struct buf b;
	unsigned pairs = 0;

	if (c->state != IMAP_ST_NOTAUTH || list->type != IMAP_ARG_LIST || c->id_originated)
		return;
	if (imap_proxy_from_front(c)) {
		id_originating(c, list);
		return;
	}
	if (!conf_values(c->srv->conf)->imapd.proxy)
		return;
	buf_init(&b, 256, ID_FWD_MAX);
	for (uint32_t i = 0; i + 1 < list->n && f < end && pairs < ID_FWD_PAIRS; i += 2) {
		const struct imap_arg *v = imap_arg_next(f);
		size_t mark = b.len;

		if (v >= end)
			break;
		if (id_string(f, ID_FIELD_MAX) && !id_originating_field(f) &&
		    (imap_arg_is_nil(v) || id_string(v, ID_VALUE_MAX))) {
			int rc = b.len > 0 ? buf_putc(&b, ' ') : 0;

			rc |= id_quote(&b, f->s, f->len) | buf_putc(&b, ' ');
			rc |= imap_arg_is_nil(v) ? buf_puts(&b, "NIL")
						 : id_quote(&b, v->s, v->len);
			if (rc != 0) { /* full: the pairs before this one */
				buf_truncate(&b, mark);
				break;
			}
			pairs++;
		}
		f = imap_arg_next(v);
	}
	free(c->id_fwd);
	c->id_fwd = buf_steal(&b, NULL);
}

/* The client's port (0 when not IP). */
static unsigned sa_port(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

/* The proxy login: SASL EXTERNAL (a client certificate) or PLAIN (the shared secret) with
   the user as the authorization identity. */
static void px_login(struct imap_proxy *p)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;
	const char *pairs = p->c->id_fwd != NULL ? p->c->id_fwd : "", *why = NULL, *mech;
	char idtag[TAG_MAX], tag[TAG_MAX];
	char *b64 = NULL;

	if ((mech = proxy_login_sasl(&p->d, px_cert(ic), p->authz, ic->proxy_user,
				     p->c->srv->proxy_secret, &b64, &why)) == NULL) {
		px_fail(p, "%s", why);
		return;
	}

	px_tag(idtag, PROXY_ID_TAG, p->use);
	px_tag(tag, PROXY_TAG, p->use);
	/* the client's ID first, so that the login's log line names the client */
	evbuffer_add_printf(bufferevent_get_output(p->d.be),
			    "%s ID (%s%s\"x-originating-ip\" \"%s\" \"x-originating-port\" "
			    "\"%u\")\r\n%s AUTHENTICATE %s %s\r\n",
			    idtag, pairs, pairs[0] != '\0' ? " " : "", p->c->addr,
			    sa_port(&p->c->sa), tag, mech, b64[0] != '\0' ? b64 : "=");
	OPENSSL_cleanse(b64, strlen(b64));
	free(b64);
	p->st = PX_LOGIN;
}

/* One line from the store host during the login. */
static void px_line(struct imap_proxy *p, const char *line)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;
	char tag[TAG_MAX];
	bool ok;

	if (p->st == PX_GREETING) {
		if (strncmp(line, "* OK", 4) != 0) {
			px_fail(p, "unexpected greeting from %s", p->d.where);
			return;
		}
		if (ic->proxy_tls == CONF_PROXY_TLS_STARTTLS) {
			evbuffer_add_printf(bufferevent_get_output(p->d.be),
					    PROXY_TLS_TAG " STARTTLS\r\n");
			p->st = PX_STARTTLS;
			return;
		}
		px_login(p);
		return;
	}
	if (strncmp(line, "* ", 2) == 0)
		return; /* untagged data during the login (CAPABILITY, ID): the client gets the OK's */
	px_tag(tag, PROXY_ID_TAG, p->use);
	if (p->st == PX_LOGIN && px_tagged(line, tag, &ok))
		return; /* the ID's tagged reply: a NO or BAD to it changes nothing */
	px_tag(tag, PROXY_TAG, p->use);
	if (p->st == PX_STARTTLS) {
		char why[512];

		if (strncmp(line, PROXY_TLS_TAG " OK", 5) != 0 ||
		    (line[5] != ' ' && line[5] != '\0'))
			px_fail(p, "%s refused STARTTLS: %.200s", p->d.where, line);
		else if (!proxy_dial_starttls(&p->d, why, sizeof(why)))
			px_fail(p, "%s", why);
		else
			px_login(p); /* sent once the handshake is done */
		return;
	}
	if (p->st == PX_LOGIN && px_tagged(line, tag, &ok) && ok) {
		const char *text = line + strlen(tag) + 3;

		snprintf(p->reply, sizeof(p->reply), "%s", text[0] ? text + 1 : "Logged in");
		p->st = PX_READY;
		evtimer_del(p->d.timer);
		bufferevent_disable(p->d.be, EV_READ); /* the relay reads from now on */
		char tls[64];

		log_info("%016" PRIx64 " imap proxy user=%s host=%s addr=%s %s leg=%s result=ok",
			 p->c->id, p->login, p->d.host, p->d.where,
			 proxy_dial_tls_log(&p->d, tls, sizeof(tls)),
			 p->reused ? "reused" : "dialed");
		metrics_inc(IM_PROXY_LEGS, p->reused, 0);
		imap_client_resume(p->c);
		return;
	}
	if (p->st == PX_LOGIN && px_tagged(line, tag, &ok)) {
		px_fail(p, "%s refused the proxy login: %.200s", p->d.where,
			line + strlen(tag) + 1);
		return;
	}
	px_fail(p, "unexpected reply from %s", p->d.where);
}

static void px_login_read(struct bufferevent *bev, void *arg)
{
	struct imap_proxy *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why;
	char *line;
	int rc;

	while ((p->st == PX_GREETING || p->st == PX_STARTTLS || p->st == PX_LOGIN) &&
	       bev == p->d.be) { /* after STARTTLS the TLS bufferevent reads */
		if ((rc = proxy_readln(in, &line, &why)) <= 0) {
			if (rc < 0)
				px_fail(p, "%s sent %s", p->d.where, why);
			return;
		}
		px_line(p, line);
		free(line);
	}
}

/* Ends the relay: the client gets * BYE [UNAVAILABLE] when bye_ok (at a response's end) and
   the store host neither said BYE nor made the stream unreadable, then is closed. */
static void px_relay_end(struct imap_proxy *p, bool bye_ok, const char *why)
{
	struct imap_client *c = p->c;

	p->st = PX_ENDED;
	bufferevent_disable(p->d.be, EV_READ | EV_WRITE);
	if (bye_ok && !p->scan.bye_seen && !p->scan.opaque && !(c->flags & IMAP_CF_CLOSING))
		imap_write(c, PROXY_BYE, sizeof(PROXY_BYE) - 1);
	imap_client_close(c, why);
}

/* A tag's characters: ASTRING-CHAR but "+" (RFC 9051 9). */
static bool tag_char(unsigned char ch)
{
	return ch > 0x20 && ch < 0x7f && strchr("(){%*\"\\+", ch) == NULL;
}

/* A whole response line's start (its first word, only its first byte and length kept, and
   the start of the rest): BYE, or the tagged OK after which the bytes are compressed or TLS
   (Heron's texts: cmd_compress, cmd_starttls), whatever the tag's length. */
static void px_scan_line(struct px_scan *s)
{
	size_t n = s->rlen;

	if (s->first == '*' && s->taglen == 1 && !s->in_tag && n >= 4 &&
	    strncasecmp(s->rest, "BYE ", 4) == 0)
		s->bye_seen = true;
	if (s->first == '+') {
		s->conts++;
		return;
	}
	if (s->in_tag || s->first == '*')
		return;
	s->tagged++;
	if ((n >= 17 && strncmp(s->rest, "OK DEFLATE active", 17) == 0) ||
	    (n >= 12 && strncmp(s->rest, "OK Begin TLS", 12) == 0))
		s->opaque = true;
}

/* One byte of a line outside literals, for px_scan_line. */
static void px_scan_byte(struct px_scan *s, unsigned char ch, bool bol)
{
	if (bol) {
		s->first = (char)ch;
		s->in_tag = true;
		s->taglen = 0;
		s->rlen = 0;
	}
	if (s->in_tag) {
		if (ch == ' ')
			s->in_tag = false;
		else
			s->taglen++;
	} else if (s->rlen < sizeof(s->rest)) {
		s->rest[s->rlen++] = (char)ch;
	}
}

/* Bytes of the n at hand that belong to the literal being skipped (0: none). */
static size_t px_lit_skip(struct px_lit *l, size_t n)
{
	size_t k = l->left < n ? (size_t)l->left : n;

	l->left -= k;
	return k;
}

/* One byte outside a literal: 1 when a literal's bytes follow it (the line goes on after
   them), -1 when that literal's N is past PROXY_LITERAL_MAX, else 0 (then a '\n' ends the
   line). nonsync: {N+} and {N-} too (a client's LITERAL+, LITERAL-). */
static int px_lit_byte(struct px_lit *l, unsigned char ch, bool nonsync)
{
	if (ch == '{') {
		l->brace = 1;
		l->num = 0;
	} else if ((l->brace == 1 || l->brace == 4) && isdigit(ch)) {
		l->brace = 4;
		l->num = l->num * 10 + (uint64_t)(ch - '0');
		if (l->num > PROXY_LITERAL_MAX)
			return -1;
	} else if (nonsync && l->brace == 4 && (ch == '+' || ch == '-')) {
		l->brace = 5;
	} else if ((l->brace == 4 || l->brace == 5) && ch == '}') {
		l->brace = 2;
	} else if (l->brace == 2 && ch == '\r') {
		l->brace = 3;
	} else if (l->brace == 3 && ch == '\n') {
		l->brace = 0;
		l->left = l->num;
		return 1;
	} else {
		l->brace = 0;
	}
	return 0;
}

/* Follows n bytes of the store host's (at offset base of what is relayed): returns the
   offset of the first byte no IMAP server sends (a NUL outside a literal, a line that starts
   with neither "*", "+" nor a tag character), or UINT64_MAX; *last_r is set to the offset
   after each whole response. */
static uint64_t px_scan(struct px_scan *s, const unsigned char *b, size_t n, uint64_t base,
			int64_t *last_r)
{
	for (size_t i = 0; i < n && !s->opaque; i++) {
		unsigned char ch = b[i];
		size_t k = px_lit_skip(&s->lit, n - i);
		int rc;

		if (k > 0) {
			i += k - 1;
			continue;
		}
		if (ch == '\0' || (s->bol && ch != '*' && ch != '+' && !tag_char(ch)))
			return base + i;
		px_scan_byte(s, ch, s->bol);
		s->bol = false;
		if ((rc = px_lit_byte(&s->lit, ch, false)) < 0)
			return base + i;
		if (rc == 0 && ch == '\n') {
			px_scan_line(s);
			s->bol = true;
			*last_r = (int64_t)(base + i + 1);
		}
	}
	return UINT64_MAX;
}

/* Follows what the store host sent (its input buffer): 0, or -1 when it was not IMAP, and
   then only the whole responses before that went to the client, which is closed. */
static int px_relay_check(struct imap_proxy *p)
{
	struct evbuffer *in = bufferevent_get_input(p->d.be);
	struct evbuffer_iovec v[16];
	int64_t last = p->scan.bol ? 0 : -1;
	uint64_t base = 0, bad = UINT64_MAX;
	struct evbuffer_ptr at;

	if (p->scan.opaque)
		return 0;
	evbuffer_ptr_set(in, &at, 0, EVBUFFER_PTR_SET);
	while (bad == UINT64_MAX && !p->scan.opaque) {
		int nv = evbuffer_peek(in, -1, &at, v, 16);

		if (nv <= 0)
			break;
		for (int i = 0; i < nv && i < 16 && bad == UINT64_MAX; i++) {
			bad = px_scan(&p->scan, v[i].iov_base, v[i].iov_len, base, &last);
			base += v[i].iov_len;
		}
		if (nv <= 16 || evbuffer_ptr_set(in, &at, base, EVBUFFER_PTR_SET) != 0)
			break;
	}
	if (bad == UINT64_MAX)
		return 0;
	log_info("%016" PRIx64 " imap proxy user=%s host=%s result=fail reason=\"the store host "
		 "sent what is not IMAP\"",
		 p->c->id, p->login, p->d.host);
	if (last > 0)
		evbuffer_remove_buffer(in, imap_out(p->c), (size_t)last);
	evbuffer_drain(in, evbuffer_get_length(in));
	px_relay_end(p, last >= 0, "store host sent garbage");
	return -1;
}

static void px_event(struct bufferevent *bev, short what, void *arg)
{
	struct imap_proxy *p = arg;
	char why[512];

	if (proxy_dial_event(&p->d, what, why, sizeof(why)))
		return; /* TLS's handshake is done */
	if (p->st == PX_RELAY) {
		/* what the store host sent before it closed goes to the client first */
		log_info("%016" PRIx64 " imap proxy user=%s host=%s closed by the store host%s",
			 p->c->id, p->login, p->d.host,
			 (what & BEV_EVENT_ERROR) ? " (connection error)" : "");
		imap_proxy_to_client(p->c);
		if (p->st == PX_RELAY)
			px_relay_end(p, p->scan.bol, "store host closed");
		return;
	}
	if (p->st == PX_ENDED)
		return; /* the client is being closed */
	px_fail(p, "%s", why);
}

/* The connection to the store host is made (why NULL) or failed. */
static void px_dialled(void *arg, const char *why)
{
	struct imap_proxy *p = arg;

	if (why != NULL) {
		p->no_retry = true; /* the deadline, or a failed connect */
		px_fail(p, "%s", why);
	} else {
		p->st = PX_GREETING;
	}
}

void imap_proxy_start(struct imap_client *c, const char *login, const char *authz,
		      const char *host)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;
	struct imap_proxy *p = xcalloc(1, sizeof(*p));

	assert(c->proxy == NULL);
	c->proxy = p;
	p->c = c;
	p->login = xstrdup(login);
	p->authz = xstrdup(authz != NULL ? authz : "");
	proxy_dial_init(&p->d, c->srv->base, host, px_dialled, px_login_read, px_event, p);
	if (c->srv->proxy_secret == NULL && !px_cert(ic)) {
		px_fail(p, "no [imapd] proxy_secret_file nor proxy_cert_file");
		return;
	}
	if (p->authz[0] == '\0') {
		px_fail(p, "the user has no address to log in with at the store host");
		return;
	}
	if (pool_take(p, host)) { /* logged out there: the proxy login and ID as on a new one */
		struct timeval tv = px_tv(ic->proxy_timeout_ms);

		p->reused = true;
		evtimer_add(p->d.timer, &tv);
		px_login(p);
		return;
	}
	px_dial(p);
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
	p->scan.bol = true; /* the login's reader stopped after the OK's line */
	p->cs.bol = true;   /* and the client's next byte starts a command */
	bufferevent_setcb(p->d.be, imap_proxy_be_read, imap_proxy_be_write, px_event, p);
	bufferevent_setwatermark(p->d.be, EV_WRITE, IMAP_OUT_LOW, 0);
	bufferevent_enable(p->d.be, EV_READ | EV_WRITE);
	imap_proxy_to_client(c); /* anything that came after the OK */
	return true;
}

/* Relay: the store host's bytes to the client, paused while the client's output is full. */
void imap_proxy_to_client(struct imap_client *c)
{
	struct imap_proxy *p = c->proxy;

	if (p == NULL || p->d.be == NULL)
		return;
	if (p->st == PX_RELAY && px_relay_check(p) < 0)
		return;
	evbuffer_add_buffer(imap_out(c), bufferevent_get_input(p->d.be));
	if (imap_out_full(c))
		bufferevent_disable(p->d.be, EV_READ);
	else if (p->st == PX_RELAY && !(c->flags & IMAP_CF_CLOSING))
		bufferevent_enable(p->d.be, EV_READ);
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

/* The end of one of the client's commands (its last line): whether it is a LOGOUT the
   front answers itself, the connection parked (nothing in flight: every command answered
   by a tagged response, none left in IDLE, nothing the store host's UNAUTHENTICATE cannot
   undo, room in the pool); else counted. */
static bool px_client_command(struct imap_proxy *p)
{
	struct px_cscan *s = &p->cs;

	if (s->idle) {
		s->idle = false;
		if (p->scan.conts > s->idle_conts)
			return false; /* DONE */
		if (p->scan.tagged < s->sent) {
			s->tainted = true; /* DONE before "+", or a command: the count is lost */
			return false;
		}
	} /* else IDLE was refused: this is a command */
	if (s->nlen == 6 && memcmp(s->name, "LOGOUT", 6) == 0 && s->word == 1 && !s->multi &&
	    s->taglen > 0 && s->taglen <= CMD_TAG_MAX && !s->tainted &&
	    p->scan.tagged == s->sent && p->scan.bol && p->scan.lit.left == 0 && !p->scan.opaque &&
	    !p->scan.bye_seen && pool_room(p->c->srv, p->d.host))
		return true;
	s->sent++;
	if (s->nlen == 4 && memcmp(s->name, "IDLE", 4) == 0) {
		s->idle = true;
		s->idle_conts = p->scan.conts;
	}
	/* what changes the connection itself, or the login */
	if ((s->nlen == 8 && memcmp(s->name, "COMPRESS", 8) == 0) ||
	    (s->nlen == 8 && memcmp(s->name, "STARTTLS", 8) == 0) ||
	    (s->nlen == 5 && memcmp(s->name, "LOGIN", 5) == 0) ||
	    (s->nlen >= 12 && memcmp(s->name, "AUTHENTICATE", 12) == 0) ||
	    (s->nlen >= 14 && memcmp(s->name, "UNAUTHENTICATE", 14) == 0))
		s->tainted = true;
	return false;
}

/* One byte of a command's first line outside literals: its tag and name. */
static void px_cscan_word(struct px_cscan *s, unsigned char ch)
{
	if (ch == '\r' || ch == '\n')
		return;
	if (s->word == 0) {
		if (ch == ' ')
			s->word = 1;
		else if (s->taglen < CMD_TAG_MAX)
			s->tag[s->taglen++] = (char)ch;
		else
			s->taglen = CMD_TAG_MAX + 1;
	} else if (s->word == 1) {
		if (ch == ' ')
			s->word = 2;
		else if (s->nlen < sizeof(s->name) - 1)
			s->name[s->nlen++] = (char)toupper(ch);
	}
}

/* Follows n of the client's bytes (at offset base of its input): 1 with *at_r the offset
   of a LOGOUT the front answers (px_client_command), else 0. */
static int px_cscan(struct imap_proxy *p, const unsigned char *b, size_t n, uint64_t base,
		    uint64_t *at_r)
{
	struct px_cscan *s = &p->cs;

	for (size_t i = 0; i < n && !s->tainted; i++) {
		unsigned char ch = b[i];
		size_t k = px_lit_skip(&s->lit, n - i);
		int rc;

		if (k > 0) {
			i += k - 1;
			continue;
		}
		if (s->bol && !s->multi) { /* a command starts */
			s->word = s->nlen = s->taglen = 0;
			*at_r = base + i;
		}
		s->bol = false;
		if (!s->multi)
			px_cscan_word(s, ch);
		if ((rc = px_lit_byte(&s->lit, ch, true)) < 0) {
			s->tainted = true; /* the store host refuses it: not followed */
		} else if (rc > 0) {
			/* not followed further: a literal's bytes come only if the store host
			   takes the command (a synchronizing one after its "+"), and bytes taken
			   for a literal it refused could hide commands, tags included */
			s->multi = true;
			s->tainted = true;
		} else if (ch == '\n') {
			s->bol = true;
			s->multi = false;
			if (px_client_command(p))
				return 1;
		}
	}
	return 0;
}

/* The client's LOGOUT (tag in p->cs) answered here as the store host would, and the
   connection to it parked (UNAUTHENTICATE, then the pool); the client is closed. */
static void px_logout(struct imap_proxy *p)
{
	struct imap_client *c = p->c;
	struct imap_server *srv = c->srv;
	struct imap_proxy_parked *k = xcalloc(1, sizeof(*k));
	struct timeval tv = px_tv(conf_values(srv->conf)->imapd.proxy_timeout_ms);
	unsigned char rnd[8];

	imap_printf(c, "* BYE Logging out\r\n%.*s OK Logout completed\r\n", (int)p->cs.taglen,
		    p->cs.tag);
	k->srv = srv;
	k->be = p->d.be;
	k->tls = p->d.tls;
	k->resumed = p->d.resumed;
	k->use = p->use;
	snprintf(k->host, sizeof(k->host), "%s", p->d.host);
	snprintf(k->where, sizeof(k->where), "%s", p->d.where);
	k->timer = evtimer_new(srv->base, pool_timeout, k);
	p->d.be = NULL;
	p->st = PX_ENDED;
	k->next = srv->proxy_pool;
	if (k->next != NULL)
		k->next->prev = k;
	srv->proxy_pool = k;
	srv->proxy_npooled++;
	bufferevent_setcb(k->be, pool_read, NULL, pool_event, k);
	bufferevent_enable(k->be, EV_READ | EV_WRITE);
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) { /* no tag a client cannot guess: no pool */
		imap_client_set_state(c, IMAP_ST_LOGOUT);
		imap_client_close(c, "logout");
		pool_drop(k, "no random bytes for UNAUTHENTICATE's tag");
		return;
	}
	snprintf(k->utag, sizeof(k->utag), "%s.%02x%02x%02x%02x%02x%02x%02x%02x", PROXY_UNAUTH_TAG,
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	evbuffer_add_printf(bufferevent_get_output(k->be), "%s UNAUTHENTICATE\r\n", k->utag);
	evtimer_add(k->timer, &tv);
	imap_client_set_state(c, IMAP_ST_LOGOUT);
	imap_client_close(c, "logout");
	if (evbuffer_get_length(bufferevent_get_input(k->be)) > 0)
		pool_read(k->be, k); /* what came before the LOGOUT, not yet relayed */
}

/* Follows the client's input for px_cscan: 1 with *at_r as px_cscan's, else 0. */
static int px_client_check(struct imap_proxy *p, struct evbuffer *in, uint64_t *at_r)
{
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr at;
	uint64_t base = 0;

	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;

	/* a login by certificate is not pooled: the store host takes EXTERNAL only as a
	   connection's first login (cmd_auth.c) */
	if (p->cs.tainted || ic->proxy_pool_max == 0 || px_cert(ic))
		return 0;
	evbuffer_ptr_set(in, &at, 0, EVBUFFER_PTR_SET);
	for (;;) {
		int nv = evbuffer_peek(in, -1, &at, v, 16);

		if (nv <= 0)
			return 0;
		for (int i = 0; i < nv && i < 16; i++) {
			if (px_cscan(p, v[i].iov_base, v[i].iov_len, base, at_r) == 1)
				return 1;
			base += v[i].iov_len;
		}
		if (nv <= 16 || evbuffer_ptr_set(in, &at, base, EVBUFFER_PTR_SET) != 0)
			return 0;
	}
}

/* Relay: the client's bytes to the store host, paused while that output is full; a LOGOUT
   that can be answered here ends the session (px_logout) after the bytes before it. */
void imap_proxy_from_client(struct imap_client *c)
{
	struct imap_proxy *p = c->proxy;
	struct evbuffer *out, *in;
	uint64_t at = 0;

	if (p == NULL || p->d.be == NULL || p->st != PX_RELAY)
		return;
	out = bufferevent_get_output(p->d.be);
	in = bufferevent_get_input(c->bev);
	if (px_client_check(p, in, &at) == 1) {
		evbuffer_remove_buffer(in, out, (size_t)at);
		evbuffer_drain(in, evbuffer_get_length(in)); /* nothing follows a LOGOUT */
		px_logout(p);
		return;
	}
	evbuffer_add_buffer(out, in);
	if (evbuffer_get_length(out) >= IMAP_OUT_HIGH)
		bufferevent_disable(c->bev, EV_READ);
}

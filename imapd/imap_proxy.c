/* imap_proxy.c — owns imapd's two sides of the proxy login between hosts.
 * Front ([imapd] proxy = yes): a user the directory homes on another store host, once the
 * password checked out here, is logged in at that host's imapd with SASL PLAIN (authorization
 * identity: the user's address; authentication identity and password: [imapd] proxy_user and
 * the shared secret), after STARTTLS with the store host's certificate verified ([imapd]
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
 * Store host: the proxy credential is accepted only from [imapd] proxy_trusted addresses, and
 * so is a client's address in x-originating-ip (then in its log lines instead of the
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
 * and relay together, is 510-590 µs (bench/cluster/README.md, part 1). */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <openssl/crypto.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/proxy.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define PROXY_TAG "P1"
#define PROXY_TLS_TAG "P0"
#define PROXY_ID_TAG "P2"
#define ID_PAIRS_MAX 30                       /* RFC 2971 3.3: MUST NOT send more */
#define ID_FWD_PAIRS (ID_PAIRS_MAX - 2)       /* the client's; x-originating-ip/port follow */
#define ID_FIELD_MAX 30                       /* bytes of a field name */
#define ID_VALUE_MAX 1024                     /* bytes of a value */
#define ID_FWD_MAX 16384                      /* bytes of the pairs kept, quoted */
#define PROXY_LITERAL_MAX (UINT64_C(1) << 40) /* a larger {N} is not a store host's */
#define PROXY_BYE "* BYE [UNAVAILABLE] Your mailbox is not reachable now; try again later\r\n"

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

struct imap_proxy {
	struct imap_client *c;
	enum px_state st;
	struct proxy_dial d;        /* the store host's connection (d.be), the deadline */
	char reply[PROXY_LINE_MAX]; /* the store host's tagged OK text, or why it failed */
	char *authz, *login;
	struct px_scan {           /* where the store host's responses end (relay) */
		uint64_t lit_left; /* bytes of a literal still to come */
		uint64_t lit_num;  /* the N of a {N} being read */
		uint8_t brace;     /* 0; 1 after {, 4 in N; 2 after }; 3 after }CR */
		bool bol;          /* the next byte starts a response */
		bool opaque;       /* after COMPRESS or STARTTLS: not followed any more */
		bool bye_seen;     /* the store host said BYE */
		char first;        /* the current line's first byte */
		bool in_tag;       /* still in the line's first word (a tag: any length) */
		size_t taglen;     /* bytes of that word */
		uint8_t rlen;      /* bytes of rest[] */
		char rest[24];     /* what follows the first word's space, outside literals */
	} scan;
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
		 p->login, p->d.host, p->reply);
	p->st = PX_FAILED;
	if (p->d.be != NULL) {
		bufferevent_free(p->d.be);
		p->d.be = NULL;
	}
	proxy_dial_stop(&p->d);
	imap_client_resume(p->c);
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
			    ic->proxy_ca_file, NULL, NULL, "imapd worker");
}

void imap_proxy_server_free(struct imap_server *srv)
{
	proxy_secret_free(&srv->proxy_secret);
	proxy_tls_unload();
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

	return proxy_credential_ok(c->srv->proxy_secret, ic->proxy_user, ic->proxy_trusted,
				   (const struct sockaddr *)&c->sa, authcid, passwd);
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

/* The proxy login: SASL PLAIN with the user as the authorization identity. */
static void px_login(struct imap_proxy *p)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;
	char *b64 = proxy_plain_b64(p->authz, ic->proxy_user, p->c->srv->proxy_secret);
	const char *pairs = p->c->id_fwd != NULL ? p->c->id_fwd : "";

	/* the client's ID first, so that the login's log line names the client */
	evbuffer_add_printf(bufferevent_get_output(p->d.be),
			    PROXY_ID_TAG " ID (%s%s\"x-originating-ip\" \"%s\" "
					 "\"x-originating-port\" \"%u\")\r\n" PROXY_TAG
					 " AUTHENTICATE PLAIN %s\r\n",
			    pairs, pairs[0] != '\0' ? " " : "", p->c->addr, sa_port(&p->c->sa),
			    b64);
	OPENSSL_cleanse(b64, strlen(b64));
	free(b64);
	p->st = PX_LOGIN;
}

/* One line from the store host during the login. */
static void px_line(struct imap_proxy *p, const char *line)
{
	const struct imapd_conf *ic = &conf_values(p->c->srv->conf)->imapd;

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
	if (p->st == PX_LOGIN && strncmp(line, PROXY_ID_TAG " ", 3) == 0)
		return; /* the ID's tagged reply: a NO or BAD to it changes nothing */
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
	if (strncmp(line, PROXY_TAG " OK", 5) == 0 && (line[5] == ' ' || line[5] == '\0')) {
		snprintf(p->reply, sizeof(p->reply), "%s", line[5] ? line + 6 : "Logged in");
		p->st = PX_READY;
		evtimer_del(p->d.timer);
		bufferevent_disable(p->d.be, EV_READ); /* the relay reads from now on */
		char tls[64];

		log_info("%016" PRIx64 " imap proxy user=%s host=%s addr=%s %s result=ok",
			 p->c->id, p->login, p->d.host, p->d.where,
			 proxy_dial_tls_log(&p->d, tls, sizeof(tls)));
		imap_client_resume(p->c);
		return;
	}
	if (strncmp(line, PROXY_TAG " ", 3) == 0) {
		px_fail(p, "%s refused the proxy login: %.200s", p->d.where, line + 3);
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
	if (s->in_tag || s->first == '*' || s->first == '+')
		return;
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

/* Follows n bytes of the store host's (at offset base of what is relayed): returns the
   offset of the first byte no IMAP server sends (a NUL outside a literal, a line that starts
   with neither "*", "+" nor a tag character), or UINT64_MAX; *last_r is set to the offset
   after each whole response. */
static uint64_t px_scan(struct px_scan *s, const unsigned char *b, size_t n, uint64_t base,
			int64_t *last_r)
{
	for (size_t i = 0; i < n && !s->opaque; i++) {
		unsigned char ch = b[i];

		if (s->lit_left > 0) {
			size_t k = s->lit_left < n - i ? (size_t)s->lit_left : n - i;

			s->lit_left -= k;
			i += k - 1;
			continue;
		}
		if (ch == '\0' || (s->bol && ch != '*' && ch != '+' && !tag_char(ch)))
			return base + i;
		px_scan_byte(s, ch, s->bol);
		s->bol = false;
		if (ch == '{') {
			s->brace = 1;
			s->lit_num = 0;
		} else if ((s->brace == 1 || s->brace == 4) && isdigit(ch)) {
			s->brace = 4;
			s->lit_num = s->lit_num * 10 + (uint64_t)(ch - '0');
			if (s->lit_num > PROXY_LITERAL_MAX)
				return base + i;
		} else if (s->brace == 4 && ch == '}') {
			s->brace = 2;
		} else if (s->brace == 2 && ch == '\r') {
			s->brace = 3;
		} else if (s->brace == 3 && ch == '\n') {
			s->brace = 0; /* the line goes on after the literal */
			s->lit_left = s->lit_num;
		} else {
			s->brace = 0;
			if (ch == '\n') {
				px_scan_line(s);
				s->bol = true;
				*last_r = (int64_t)(base + i + 1);
			}
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

	if (why != NULL)
		px_fail(p, "%s", why);
	else
		p->st = PX_GREETING;
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
	if (c->srv->proxy_secret == NULL) {
		px_fail(p, "no [imapd] proxy_secret_file");
		return;
	}
	if (p->authz[0] == '\0') {
		px_fail(p, "the user has no address to log in with at the store host");
		return;
	}
	proxy_dial_start(&p->d, c->srv->base, &c->srv->proxy_dns, ic->proxy_hosts,
			 (long long)ic->proxy_port, ic->proxy_timeout_ms);
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

/* Relay: the client's bytes to the store host, paused while that output is full. */
void imap_proxy_from_client(struct imap_client *c)
{
	struct imap_proxy *p = c->proxy;
	struct evbuffer *out;

	if (p == NULL || p->d.be == NULL || p->st != PX_RELAY)
		return;
	out = bufferevent_get_output(p->d.be);
	evbuffer_add_buffer(out, bufferevent_get_input(c->bev));
	if (evbuffer_get_length(out) >= IMAP_OUT_HIGH)
		bufferevent_disable(c->bev, EV_READ);
}

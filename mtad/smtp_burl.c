/* smtp_burl.c — owns BURL (RFC 4468) on the submission listeners: "BURL imap-url [LAST]"
 * after AUTH appends the bytes an IMAP URLAUTH URL names to the message, fetched from
 * imapd ([mtad] burl_imap) by a small IMAP client on the worker's event loop (one
 * bufferevent per BURL: connect, greeting, LOGIN with [mtad] burl_user and the first line of
 * burl_password_file, URLFETCH, LOGOUT), the session waiting in ST_WAIT meanwhile. The
 * bytes stream into the message as a BDAT chunk's do (smtp_data_append): never held whole.
 * BDAT and BURL mix in one message (RFC 4468 3); DATA does not.
 *
 * Replies: a URL not authorized for the session ("submit+USER" with USER the
 * authenticated login, RFC 4468 3.5) 554 5.7.0 before anything is fetched; imapd refusing
 * the login 554 5.7.8; URLFETCH answering NIL (the URL may not be fetched: bad token,
 * expired, reset key, gone) 554 5.6.6; imapd unreachable, timing out ([mtad] burl_timeout)
 * or talking nonsense 451 4.4.1. A BURL refused before it fetched anything (syntax, the
 * access) leaves the transaction as it was; one whose fetch failed ends it, as a failed BDAT
 * does.
 * The IMAP connection is plain TCP (imapd on loopback or a trusted network) or, with [mtad]
 * burl_tls, TLS: STARTTLS after the greeting, or implicit TLS from the connect. TLS verifies
 * imapd's certificate against [tls] ca (empty: the system's CAs) for burl_tls_name (empty:
 * burl_imap's address); a handshake that fails, or a STARTTLS refused, ends the BURL with
 * 451 4.4.1 before any password is sent. The worker's client context is made once (again
 * when the CA path changes).
 *
 * One imapd: BURL fetches every URL from burl_imap. A URL whose user lives on another store
 * host (docs/scale-out.md) is not fetched there: imapd at burl_imap answers NIL (554 5.6.6);
 * the front imapd's proxy logs a client in at the client's own store host, not at the
 * URL's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"

#define BURL_URL_MAX 8192         /* bytes of an IMAP URL (as imapd takes) */
#define BURL_LINE_MAX (64 * 1024) /* an IMAP response line from imapd */
#define BURL_CHUNK (64 * 1024)

enum burl_step { B_GREETING, B_STARTTLS, B_LOGIN, B_FETCH, B_LITERAL, B_AFTER, B_DONE };

struct burl {
	struct smtp_session *s;
	struct bufferevent *bev;
	enum burl_step step;
	bool last;
	uint64_t left; /* literal bytes still to come */
	char *url;     /* as the client sent it */
	bool tls;      /* bev is the TLS filter */
};

static void burl_read_cb(struct bufferevent *bev, void *arg);
static void burl_event_cb(struct bufferevent *bev, short what, void *arg);

/* The password of [mtad] burl_password_file: its first line, read once per worker (again
   when the path changes). NULL when it cannot be read. */
static const char *burl_password(const char *path)
{
	static char *cached_path, *cached;
	char line[512];
	FILE *f;

	if (cached_path != NULL && strcmp(cached_path, path) == 0)
		return cached;
	free(cached_path);
	free(cached);
	cached_path = xstrdup(path);
	cached = NULL;
	if ((f = fopen(path, "r")) == NULL) {
		log_warn("burl: %s", path);
		return NULL;
	}
	if (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		cached = xstrdup(line);
	}
	fclose(f);
	return cached;
}

/* The client context BURL's TLS verifies imapd with, made once per worker (again when [tls]
   ca changes). NULL, logged, when it cannot be made. */
static SSL_CTX *burl_tls_ctx(const struct conf *conf)
{
	static SSL_CTX *ctx;
	static char *ctx_ca;
	const struct tls_conf *t = &conf_values(conf)->tls;
	const char *ca = t->ca != NULL ? t->ca : "";
	char *err = NULL;

	if (ctx != NULL && strcmp(ctx_ca, ca) == 0)
		return ctx;
	tls_ctx_free(&ctx);
	free(ctx_ca);
	ctx_ca = xstrdup(ca);
	if ((ctx = tls_client_ctx_new(t, TLS_VERIFY_PEER, &err)) == NULL) {
		log_warnx("burl: TLS client context: %s", err);
		free(err);
	}
	return ctx;
}

/* The name imapd's certificate must carry: burl_tls_name, else burl_imap's address without
   its port (and brackets). False when it does not fit. */
static bool burl_tls_host(const struct mtad_conf *mc, char *out, size_t size)
{
	const char *a = mc->burl_imap, *end;
	size_t n;

	if (mc->burl_tls_name[0] != '\0')
		return str_fmt(out, size, "%s", mc->burl_tls_name) == 0;
	if (a[0] == '[')
		end = strchr(++a, ']');
	else
		end = strrchr(a, ':');
	n = end != NULL ? (size_t)(end - a) : strlen(a);
	if (n == 0 || n >= size)
		return false;
	memcpy(out, a, n);
	out[n] = '\0';
	return true;
}

/* Callbacks and the idle timeout on bev, BURL's connection now. */
static void burl_arm(struct burl *b, struct bufferevent *bev)
{
	const struct mtad_conf *mc = &conf_values(b->s->m->conf)->mtad;
	struct timeval tv = { mc->burl_timeout_ms / 1000, (mc->burl_timeout_ms % 1000) * 1000 };

	b->bev = bev;
	bufferevent_setcb(bev, burl_read_cb, NULL, burl_event_cb, b);
	bufferevent_set_timeouts(bev, &tv, &tv);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* TLS over BURL's TCP connection (the handshake runs before anything written from now on):
   false when it cannot start. */
static bool burl_tls_start(struct burl *b)
{
	const struct mtad_conf *mc = &conf_values(b->s->m->conf)->mtad;
	SSL_CTX *ctx = burl_tls_ctx(b->s->m->conf);
	struct bufferevent *tls;
	char host[256];

	if (ctx == NULL || !burl_tls_host(mc, host, sizeof(host)) ||
	    (tls = tls_starttls_client(b->bev, ctx, host, NULL)) == NULL)
		return false;
	b->tls = true;
	burl_arm(b, tls); /* the filter owns the TCP bufferevent */
	return true;
}

bool smtp_burl_offered(const struct smtp_session *s)
{
	const struct mtad_conf *mc = &conf_values(s->m->conf)->mtad;

	return mc->burl_imap[0] != '\0' && !(s->flags & SF_LOCAL) &&
	       (s->kind == L_SUBMISSION || s->kind == L_SUBMISSIONS);
}

/* Whether the URL's access is "submit+USER" (RFC 4467 3) with USER the session's login,
   percent-escapes decoded, ASCII case ignored. */
static bool burl_url_for(const struct smtp_session *s, const char *url, size_t len)
{
	static const char key[] = ";URLAUTH=submit+";
	const size_t kl = sizeof(key) - 1;
	char user[256];
	size_t n = 0;

	for (size_t i = 0; i + kl <= len; i++) {
		if (!str_caseprefix(url + i, len - i, key))
			continue;
		for (i += kl; i < len && url[i] != ':' && n < sizeof(user) - 1; i++) {
			int h, l;

			if (url[i] != '%') {
				user[n++] = url[i];
			} else if (i + 2 < len &&
				   (h = str_hex_digit((unsigned char)url[i + 1])) >= 0 &&
				   (l = str_hex_digit((unsigned char)url[i + 2])) >= 0) {
				user[n++] = (char)(h * 16 + l);
				i += 2;
			} else {
				return false;
			}
		}
		user[n] = '\0';
		return i < len && url[i] == ':' && n > 0 && strcasecmp(user, s->user) == 0;
	}
	return false;
}

static void burl_free(struct burl *b)
{
	if (b->bev != NULL)
		bufferevent_free(b->bev);
	free(b->url);
	free(b);
}

/* The BURL is over: reply (NULL: it worked), then the session goes on. */
static void burl_finish(struct burl *b, const char *fail)
{
	struct smtp_session *s = b->s;
	bool last = b->last;

	/* the IMAP session ends with its connection (imapd takes an EOF as a LOGOUT) */
	log_info("%016" PRIx64 " smtp burl user=%s result=%s%s%s%s", s->id, s->user,
		 fail == NULL ? "ok" : "fail", fail != NULL ? " reply=\"" : "",
		 fail != NULL ? fail : "", fail != NULL ? "\"" : "");
	burl_free(b);
	if (s->dead) {
		smtp_resume(s); /* frees it */
		return;
	}
	smtp_set_state(s, ST_BDAT);
	if (fail != NULL) {
		smtp_tx_free(&s->tx);
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "%s", fail);
	} else {
		smtp_chunk_done(s, last);
	}
	smtp_resume(s);
}

/* Sends an IMAP quoted string (the caller checked it holds no CR, LF or NUL). */
static void burl_quoted(struct evbuffer *out, const char *v)
{
	evbuffer_add(out, "\"", 1);
	for (; *v != '\0'; v++) {
		if (*v == '"' || *v == '\\')
			evbuffer_add(out, "\\", 1);
		evbuffer_add(out, v, 1);
	}
	evbuffer_add(out, "\"", 1);
}

/* LOGIN burl_user with burl_password_file's password into out: NULL, or the reply that ends
   the BURL. */
static const char *burl_login(struct burl *b, struct evbuffer *out)
{
	const struct mtad_conf *mc = &conf_values(b->s->m->conf)->mtad;
	const char *pass;

	if ((pass = burl_password(mc->burl_password_file)) == NULL ||
	    strpbrk(mc->burl_user, "\r\n") != NULL)
		return "451 4.4.1 IMAP server unavailable (no BURL credential)";
	evbuffer_add_printf(out, "A LOGIN ");
	burl_quoted(out, mc->burl_user);
	evbuffer_add(out, " ", 1);
	burl_quoted(out, pass);
	evbuffer_add(out, "\r\n", 2);
	b->step = B_LOGIN;
	return NULL;
}

/* One line from imapd, by step: NULL to go on, or the SMTP reply that ends the BURL. */
static const char *burl_line(struct burl *b, const char *l, size_t len)
{
	const struct mtad_conf *mc = &conf_values(b->s->m->conf)->mtad;
	struct evbuffer *out = bufferevent_get_output(b->bev);

	switch (b->step) {
	case B_GREETING:
		if (!str_caseprefix(l, len, "* OK"))
			return "451 4.4.1 IMAP server unavailable";
		if (mc->burl_tls == MTAD_BURL_TLS_STARTTLS) {
			evbuffer_add_printf(out, "S STARTTLS\r\n");
			b->step = B_STARTTLS;
			return NULL;
		}
		return burl_login(b, out);
	case B_STARTTLS:
		if (l[0] == '*')
			return NULL;
		if (!str_caseprefix(l, len, "S OK") || !burl_tls_start(b))
			return "451 4.4.1 IMAP server unavailable (no TLS)";
		return burl_login(b, bufferevent_get_output(b->bev));
	case B_LOGIN:
		if (l[0] == '*')
			return NULL;
		if (!str_caseprefix(l, len, "A OK"))
			return "554 5.7.8 URL resolution requires trust relationship";
		evbuffer_add_printf(out, "B URLFETCH ");
		burl_quoted(out, b->url);
		evbuffer_add(out, "\r\n", 2);
		b->step = B_FETCH;
		return NULL;
	case B_FETCH:
		if (str_caseprefix(l, len, "* URLFETCH ")) {
			uint64_t n;
			const char *open = len > 0 && l[len - 1] == '}' ? memrchr(l, '{', len)
									: NULL;

			if (open == NULL)
				return NULL; /* NIL: B OK follows without the bytes */
			if (str_to_u64(open + 1, (size_t)(l + len - 1 - open - 1), UINT64_MAX / 2,
				       &n) < 0)
				return "451 4.4.1 IMAP server sent nonsense";
			if (b->s->tx->size + n > b->s->m->lim.max_message_size)
				return "552 5.3.4 Message size exceeds fixed limit";
			b->left = n;
			b->step = B_LITERAL;
			return NULL;
		}
		if (l[0] == '*')
			return NULL;
		/* the tagged reply before any bytes: NIL, or URLFETCH refused */
		return "554 5.6.6 IMAP URL resolution failed";
	case B_AFTER:
		if (l[0] == '*' || len == 0)
			return NULL;
		if (!str_caseprefix(l, len, "B OK"))
			return "451 4.4.1 IMAP server failed the URLFETCH";
		b->step = B_DONE;
		return NULL;
	case B_LITERAL:
	case B_DONE:
		break;
	}
	return NULL;
}

static void burl_read_cb(struct bufferevent *bev, void *arg)
{
	struct burl *b = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *fail = NULL;

	while (fail == NULL && b->step != B_DONE) {
		if (b->step == B_LITERAL) {
			size_t avail = evbuffer_get_length(in);
			size_t n = avail < BURL_CHUNK ? avail : BURL_CHUNK;

			if (n > b->left)
				n = (size_t)b->left;
			if (n == 0 && b->left > 0)
				return;
			if (n > 0) {
				smtp_data_append(b->s,
						 (const char *)evbuffer_pullup(in, (ssize_t)n), n);
				evbuffer_drain(in, n);
				b->left -= n;
			}
			if (b->left == 0)
				b->step = B_AFTER; /* the rest of the response line, then B OK */
			continue;
		}
		size_t len;
		char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF_STRICT);

		if (line == NULL) {
			if (evbuffer_get_length(in) > BURL_LINE_MAX)
				fail = "451 4.4.1 IMAP server sent nonsense";
			break;
		}
		fail = burl_line(b, line, len);
		free(line);
		if (fail == NULL && b->bev != bev)
			return; /* STARTTLS: the TLS filter reads from now on */
	}
	if (fail != NULL || b->step == B_DONE)
		burl_finish(b, fail);
}

static void burl_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct burl *b = arg;
	const struct mtad_conf *mc = &conf_values(b->s->m->conf)->mtad;
	char err[256];

	if (what & BEV_EVENT_CONNECTED) {
		/* TCP up: implicit TLS starts now; the TLS filter's own CONNECTED (handshake
		   done) needs nothing */
		if (mc->burl_tls == MTAD_BURL_TLS_IMPLICIT && !b->tls && !burl_tls_start(b))
			burl_finish(b, "451 4.4.1 IMAP server unavailable (no TLS)");
		return;
	}
	log_info("%016" PRIx64 " smtp burl imap=%s %s%s%s", b->s->id, mc->burl_imap,
		 (what & BEV_EVENT_TIMEOUT) ? "timeout" : "connection failed or closed",
		 b->tls ? " tls=" : "", b->tls ? tls_error(bev, err, sizeof(err)) : "");
	burl_finish(b, "451 4.4.1 IMAP server unavailable");
}

void smtp_cmd_burl(struct smtp_session *s, const char *arg, size_t len)
{
	const struct mtad_conf *mc = &conf_values(s->m->conf)->mtad;
	struct str_view rest = { arg, len }, url, f;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	bool last = false;
	struct burl *b;

	if (!smtp_burl_offered(s)) {
		smtp_error(s, "502 5.5.1 BURL not available here");
		return;
	}
	if (!(s->flags & SF_AUTH)) {
		smtp_error(s, "530 5.7.0 Authentication required");
		return;
	}
	if (!str_split_ws(&rest, &url) || url.len > BURL_URL_MAX) {
		smtp_error(s, "501 5.5.4 Syntax: BURL imap-url [LAST]");
		return;
	}
	if (str_split_ws(&rest, &f)) {
		if (!str_caseeq(f.p, f.len, "LAST", 4) || str_split_ws(&rest, &f)) {
			smtp_error(s, "501 5.5.4 Syntax: BURL imap-url [LAST]");
			return;
		}
		last = true;
	}
	if (s->tx == NULL || s->tx->nrcpt == 0) {
		smtp_error(s, s->tx == NULL ? "503 5.5.1 MAIL first"
					    : "554 5.5.1 No valid recipients");
		return;
	}
	for (size_t i = 0; i < url.len; i++)
		if ((unsigned char)url.p[i] <= ' ' || (unsigned char)url.p[i] >= 0x7f ||
		    url.p[i] == '"' || url.p[i] == '\\') {
			smtp_error(s, "501 5.5.4 Syntax: BURL imap-url [LAST]");
			return;
		}
	if (!str_caseprefix(url.p, url.len, "imap://") || !burl_url_for(s, url.p, url.len)) {
		smtp_error(s, "554 5.7.0 BURL: the URL is not authorized for submit+%s", s->user);
		return;
	}
	if (evutil_parse_sockaddr_port(mc->burl_imap, (struct sockaddr *)&ss, &sslen) < 0) {
		log_warnx("burl: [mtad] burl_imap %s is no address:port", mc->burl_imap);
		smtp_reply(s, "451 4.4.1 IMAP server unavailable");
		return;
	}
	if (s->state != ST_BDAT) {
		if (smtp_data_start(s) < 0)
			return;
		smtp_set_state(s, ST_BDAT);
	}
	b = xcalloc(1, sizeof(*b));
	b->s = s;
	b->last = last;
	b->url = xmemdup0(url.p, url.len);
	/* deferred callbacks: a connect that fails at once reports from the loop, not from
	   inside this command */
	burl_arm(b, bufferevent_socket_new(s->m->base, -1,
					   BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS));
	if (bufferevent_socket_connect(b->bev, (struct sockaddr *)&ss, sslen) < 0) {
		burl_free(b);
		smtp_tx_free(&s->tx);
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "451 4.4.1 IMAP server unavailable");
		return;
	}
	smtp_set_state(s, ST_WAIT);
}

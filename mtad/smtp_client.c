/* smtp_client.c — owns outbound SMTP connections: connect, greeting, EHLO (HELO fallback),
 * STARTTLS when offered, then transactions for queue works: MAIL/RCPT/DATA pipelined when the
 * server offers PIPELINING (one command at a time otherwise), the body streamed from the queue
 * file with dot-stuffing, per-recipient outcomes, and reuse of the connection for the next work
 * of the same destination (idle connections close after a few seconds). LMTP (RFC 2033) to a
 * store host: LHLO, and one reply after the data for each recipient accepted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/buf.h"
#include "common/line.h"
#include "common/log.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mtad/relay.h"

#define CAP_PIPELINING 0x01
#define CAP_STARTTLS 0x02
#define CAP_SIZE 0x04
#define CAP_8BITMIME 0x08
#define CAP_DSN 0x10
#define CAP_SMTPUTF8 0x20
#define CAP_REQUIRETLS 0x40

#define REPLY_LINE_MAX 2048
#define BODY_CHUNK (16 * 1024)
#define BODY_HIGH (128 * 1024)
#define IDLE_SECONDS 5

enum cstate {
	C_CONNECT,
	C_GREETING,
	C_EHLO,
	C_HELO,
	C_STARTTLS,
	C_TLS,
	C_IDLE,
	C_TX,
	C_BODY,
	C_DOT,
	C_RSET,
	C_QUIT
};

struct smtp_client {
	struct queue_runner *qr;
	struct qdest *d;
	struct bufferevent *bev;
	struct net_connect *nc;
	enum cstate st;
	unsigned caps;
	bool tls;
	struct line_reader lr;
	struct buf line;
	struct qwork *w;
	size_t expect, sent; /* replies awaited / commands sent in this transaction */
	int mail_code;
	char mail_text[REPLY_LINE_MAX + 8]; /* a 4xx reply to MAIL, kept for the failover */
	int *rcode;                         /* per recipient of w: RCPT reply code */
	char **rtext;
	bool *rdone;  /* per recipient of w: its outcome is recorded */
	size_t dot_k; /* LMTP: the recipient the next reply after the data is for */
	size_t naccepted;
	int fd;                   /* queue file while the body streams */
	bool body_bol, body_crlf; /* at a line start; the last bytes sent were CRLF */
	bool body_cr;             /* the last byte sent was CR */
	bool dead;                /* freed from the loop soon: ignore everything */
	char tlsdesc[128];        /* "tls=LEVEL PROTOCOL CIPHER" of this connection */
	char relay[300];
	struct event *idle;
	TAILQ_ENTRY(smtp_client) entry;
	TAILQ_ENTRY(smtp_client) aentry; /* in d->all */
};

static void client_read_cb(struct bufferevent *bev, void *arg);
static void client_write_cb(struct bufferevent *bev, void *arg);
static void client_event_cb(struct bufferevent *bev, short what, void *arg);
static void client_free(struct smtp_client *c);
static void tx_start(struct smtp_client *c, struct qwork *w);

static void client_send(struct smtp_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void client_fail(struct smtp_client *c, int code, const char *text);

static void client_send(struct smtp_client *c, const char *fmt, ...)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(out, fmt, ap);
	va_end(ap);
	evbuffer_add(out, "\r\n", 2);
}

static void set_callbacks(struct smtp_client *c)
{
	struct timeval tv = { c->qr->timeout_ms / 1000, (c->qr->timeout_ms % 1000) * 1000 };

	bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb, c);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_setwatermark(c->bev, EV_WRITE, BODY_HIGH / 2, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void rcpt_outcome(struct smtp_client *c, size_t k, int code, const char *text)
{
	c->rdone[k] = true;
	queue_rcpt_outcome(c->w, k, code, text, c->relay);
}

/* Every recipient of the current work without an outcome gets code/text. */
static void work_outcome_all(struct smtp_client *c, int code, const char *text)
{
	for (size_t k = 0; k < c->w->n; k++)
		if (c->rdone == NULL || !c->rdone[k])
			queue_rcpt_outcome(c->w, k, code, text, c->relay);
}

/* Lets go of the current work; returns it. */
static struct qwork *work_release(struct smtp_client *c)
{
	struct qwork *w = c->w;

	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	for (size_t k = 0; c->rtext != NULL && k < w->n; k++)
		free(c->rtext[k]);
	free(c->rtext);
	free(c->rcode);
	free(c->rdone);
	c->rtext = NULL;
	c->rcode = NULL;
	c->rdone = NULL;
	c->w = NULL;
	return w;
}

static void work_end(struct smtp_client *c)
{
	queue_work_done(work_release(c));
}

/* This host failed the work before taking any recipient: the next address or MX gets it. */
static void work_failover(struct smtp_client *c, int code, const char *text)
{
	queue_work_failover(work_release(c), code, text, c->relay);
}

/* Whether a failure now leaves every recipient of the work untouched (nothing answered in the
   transaction yet), so that another exchanger may be tried. */
static bool can_failover(const struct smtp_client *c)
{
	return c->st == C_CONNECT || c->st == C_GREETING || c->st == C_EHLO || c->st == C_HELO ||
	       c->st == C_STARTTLS || c->st == C_TLS || (c->st == C_TX && c->expect == 0);
}

static void free_cb(evutil_socket_t fd, short what, void *arg)
{
	client_free(arg);
}

/* Ends the connection: outcomes for the work in hand, then the client is freed from the loop
   (callers up the stack may still look at c->dead). */
static void client_fail(struct smtp_client *c, int code, const char *text)
{
	struct timeval zero = { 0, 0 };

	if (c->dead)
		return;
	c->dead = true;
	if (c->w != NULL && can_failover(c)) {
		work_failover(c, code, text);
	} else if (c->w != NULL) {
		work_outcome_all(c, code, text);
		work_end(c);
	}
	if (c->st == C_IDLE)
		TAILQ_REMOVE(&c->d->idle, c, entry);
	if (c->bev != NULL)
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	event_base_once(c->qr->m->base, -1, EV_TIMEOUT, free_cb, c, &zero);
}

static void connect_cb(struct bufferevent *bev, const char *error, void *arg)
{
	struct smtp_client *c = arg;

	c->nc = NULL;
	if (bev == NULL) {
		char text[300];

		snprintf(text, sizeof(text), "4.4.1 %s", error);
		work_failover(c, 0, text);
		client_free(c);
		return;
	}
	c->bev = bev;
	c->st = C_GREETING;
	set_callbacks(c);
}

void smtp_client_run(struct queue_runner *qr, struct qwork *w)
{
	struct qdest *d = w->dest;
	struct smtp_client *c = TAILQ_FIRST(&d->idle);

	if (c != NULL) {
		TAILQ_REMOVE(&d->idle, c, entry);
		evtimer_del(c->idle);
		tx_start(c, w);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->qr = qr;
	c->d = d;
	c->w = w;
	c->fd = -1;
	c->st = C_CONNECT;
	d->active++;
	TAILQ_INSERT_TAIL(&d->all, c, aentry);
	line_reader_init(&c->lr, REPLY_LINE_MAX, 0);
	buf_init(&c->line, 256, REPLY_LINE_MAX + 2);
	snprintf(c->relay, sizeof(c->relay), "%s[%s]:%s", d->host, d->addr, d->port);
	c->nc = net_connect(qr->m->base, NULL, d->addr, d->port, (int)qr->timeout_ms, connect_cb,
			    c);
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_client *c = arg;

	TAILQ_REMOVE(&c->d->idle, c, entry);
	client_send(c, "QUIT");
	c->st = C_QUIT; /* the server's close ends it */
}

/* The work is finished: take the next one for this destination, or wait idle. */
static void client_next(struct smtp_client *c)
{
	struct qwork *w = TAILQ_FIRST(&c->d->waiting);
	struct timeval tv = { IDLE_SECONDS, 0 };

	if (w != NULL && !c->qr->stopping) {
		TAILQ_REMOVE(&c->d->waiting, w, entry);
		tx_start(c, w);
		return;
	}
	c->st = C_IDLE;
	if (c->idle == NULL)
		c->idle = evtimer_new(c->qr->m->base, idle_cb, c);
	evtimer_add(c->idle, &tv);
	TAILQ_INSERT_TAIL(&c->d->idle, c, entry);
}

static bool needs_utf8(const struct qjob *job)
{
	for (const char *p = job->qm.sender; *p; p++)
		if ((unsigned char)*p >= 0x80)
			return true;
	for (size_t i = 0; i < job->qm.nrcpt; i++)
		for (const char *p = job->qm.rcpt[i].addr; *p; p++)
			if ((unsigned char)*p >= 0x80)
				return true;
	return false;
}

static void send_mail(struct smtp_client *c)
{
	const struct qjob *job = c->w->job;
	char size[40] = "", envid[3 * MAIL_ENVID_MAX + 16] = "", xt[3 * MAIL_ENVID_MAX + 1];

	if (c->caps & CAP_SIZE)
		snprintf(size, sizeof(size), " SIZE=%" PRIu64, job->qm.size);
	if ((c->caps & CAP_DSN) && job->qm.envid != NULL &&
	    mailaddr_xtext_encode(job->qm.envid, strlen(job->qm.envid), xt, sizeof(xt)) == 0)
		snprintf(envid, sizeof(envid), " ENVID=%s", xt);
	client_send(c, "MAIL FROM:<%s>%s%s%s%s%s%s", job->qm.sender, size,
		    (c->caps & CAP_8BITMIME) ? " BODY=8BITMIME" : "",
		    needs_utf8(job) ? " SMTPUTF8" : "",
		    !(c->caps & CAP_DSN) || job->qm.ret == STORE_RET_NONE ? ""
		    : job->qm.ret == STORE_RET_FULL                       ? " RET=FULL"
									  : " RET=HDRS",
		    envid, job->qm.requiretls ? " REQUIRETLS" : "");
}

static void send_rcpt(struct smtp_client *c, size_t k)
{
	const struct store_queue_rcpt *r = &c->w->job->qm.rcpt[c->w->idx[k]];
	char notify[48] = "", orcpt[RCPT_ORCPT_MAX + 16] = "";

	if ((c->caps & CAP_DSN) && r->notify != 0)
		snprintf(notify, sizeof(notify), " NOTIFY=%s",
			 (r->notify & STORE_NOTIFY_NEVER) ? "NEVER"
			 : (r->notify & STORE_NOTIFY_SUCCESS)
				 ? ((r->notify & STORE_NOTIFY_FAILURE) ? "SUCCESS,FAILURE"
								       : "SUCCESS")
				 : ((r->notify & STORE_NOTIFY_DELAY) ? "FAILURE,DELAY"
								     : "FAILURE"));
	if ((c->caps & CAP_DSN) && r->orcpt != NULL)
		snprintf(orcpt, sizeof(orcpt), " ORCPT=%s", r->orcpt);
	client_send(c, "RCPT TO:<%s>%s%s", r->addr, notify, orcpt);
}

/* Sends the command for reply number i of the transaction (0 MAIL, 1..n RCPT, n+1 DATA). */
static void send_cmd(struct smtp_client *c, size_t i)
{
	if (i == 0)
		send_mail(c);
	else if (i <= c->w->n)
		send_rcpt(c, i - 1);
	else
		client_send(c, "DATA");
	c->sent = i + 1;
}

static void tx_start(struct smtp_client *c, struct qwork *w)
{
	c->w = w;
	snprintf(w->tlsdesc, sizeof(w->tlsdesc), "%s", c->tlsdesc);
	if (needs_utf8(w->job) && !(c->caps & CAP_SMTPUTF8)) {
		/* RFC 6531 3.5: no downgrade; the sender learns it by a DSN */
		work_outcome_all(c, 553, "5.6.7 the next hop does not support SMTPUTF8");
		work_end(c);
		client_next(c);
		return;
	}
	if (w->job->qm.requiretls && (!c->tls || !(c->caps & CAP_REQUIRETLS))) {
		/* RFC 8689 4.2.1: the next hop must offer REQUIRETLS; another exchanger may */
		work_failover(c, 550,
			      "5.7.30 REQUIRETLS support required: the server does not "
			      "offer REQUIRETLS");
		client_next(c);
		return;
	}
	c->st = C_TX;
	c->expect = 0;
	c->naccepted = 0;
	c->mail_code = 0;
	c->rcode = xcalloc(w->n, sizeof(*c->rcode));
	c->rtext = xcalloc(w->n, sizeof(*c->rtext));
	c->rdone = xcalloc(w->n, sizeof(*c->rdone));
	c->dot_k = 0;
	if (c->caps & CAP_PIPELINING) {
		for (size_t i = 0; i <= w->n + 1; i++)
			send_cmd(c, i);
	} else {
		send_cmd(c, 0);
	}
}

/* Streams the queue file, dot-stuffed, until the output is full or the file ends. */
static void body_pump(struct smtp_client *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	char in[BODY_CHUNK];

	while (c->st == C_BODY && evbuffer_get_length(out) < BODY_HIGH) {
		ssize_t n = read(c->fd, in, sizeof(in));

		if (n < 0) {
			log_warn("%016" PRIx64 ": queue file read", c->w->job->qm.id);
			client_fail(c, 0, "4.3.0 queue file read error");
			return;
		}
		if (n == 0) {
			if (!c->body_crlf)
				evbuffer_add(out, "\r\n", 2);
			evbuffer_add(out, ".\r\n", 3);
			c->st = C_DOT;
			return;
		}
		size_t start = 0;
		for (size_t i = 0; i < (size_t)n; i++) {
			if (c->body_bol && in[i] == '.') {
				evbuffer_add(out, in + start, i - start);
				evbuffer_add(out, ".", 1);
				start = i;
			}
			c->body_bol = in[i] == '\n';
		}
		evbuffer_add(out, in + start, (size_t)n - start);
		c->body_crlf = in[n - 1] == '\n' && (n >= 2 ? in[n - 2] == '\r' : c->body_cr);
		c->body_cr = in[n - 1] == '\r';
	}
}

static void body_start(struct smtp_client *c)
{
	uint64_t size;
	int rc = store_queue_open(c->qr->m->store, c->w->job->qm.id, &c->fd, &size);

	if (rc != 0) {
		/* DATA was accepted: an empty body would deliver junk; drop the connection
		   instead and retry later */
		client_fail(c, 0, store_strerror(rc));
		return;
	}
	c->st = C_BODY;
	c->body_bol = true;
	c->body_crlf = true;
	body_pump(c);
}

/* A reply in a transaction; i is its number (0 MAIL, 1..n RCPT, n+1 DATA). */
static void tx_reply(struct smtp_client *c, int code, const char *text)
{
	size_t i = c->expect++, n = c->w->n;

	if (i == 0) {
		c->mail_code = code;
		if (code / 100 == 4) {
			/* 4xx to MAIL: another exchanger may take it (RFC 5321 5.1) */
			snprintf(c->mail_text, sizeof(c->mail_text), "%s", text);
			if (!(c->caps & CAP_PIPELINING)) {
				work_failover(c, code, text);
				client_send(c, "RSET");
				c->st = C_RSET;
			}
		} else if (code / 100 != 2) {
			work_outcome_all(c, code, text);
			if (!(c->caps & CAP_PIPELINING)) {
				work_end(c);
				client_send(c, "RSET");
				c->st = C_RSET;
			}
		} else if (!(c->caps & CAP_PIPELINING)) {
			send_cmd(c, 1);
		}
	} else if (i <= n) {
		c->rcode[i - 1] = code;
		c->rtext[i - 1] = xstrdup(text);
		if (code / 100 == 2)
			c->naccepted++;
		else if (c->mail_code / 100 == 2)
			rcpt_outcome(c, i - 1, code, text);
		if (!(c->caps & CAP_PIPELINING)) {
			if (i < n || c->naccepted > 0) {
				send_cmd(c, i + 1);
			} else {
				work_end(c);
				client_send(c, "RSET");
				c->st = C_RSET;
			}
		}
	} else if (code == 354 && c->naccepted > 0 && c->mail_code / 100 == 2) {
		body_start(c);
	} else {
		if (code == 354)
			evbuffer_add(bufferevent_get_output(c->bev), ".\r\n", 3);
		for (size_t k = 0; k < n; k++)
			if (c->rcode[k] / 100 == 2 && c->mail_code / 100 == 2)
				rcpt_outcome(c, k, code, text);
		if (c->mail_code / 100 == 4)
			work_failover(c, c->mail_code, c->mail_text);
		else
			work_end(c);
		if (code != 354)
			client_send(c, "RSET");
		c->st = code == 354 ? C_DOT : C_RSET;
	}
}

static void parse_cap(struct smtp_client *c, const char *t)
{
	static const struct {
		const char *name;
		unsigned bit;
	} caps[] = {
		{ "PIPELINING", CAP_PIPELINING },
		{ "STARTTLS", CAP_STARTTLS },
		{ "SIZE", CAP_SIZE },
		{ "8BITMIME", CAP_8BITMIME },
		{ "DSN", CAP_DSN },
		{ "SMTPUTF8", CAP_SMTPUTF8 },
		{ "REQUIRETLS", CAP_REQUIRETLS },
	};
	size_t len = strcspn(t, " ");

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (str_caseeq(t, len, caps[i].name, strlen(caps[i].name)))
			c->caps |= caps[i].bit;
}

static void session_ready(struct smtp_client *c)
{
	enum tls_level l = c->d->tls;

	if ((c->caps & CAP_STARTTLS) && !c->tls && c->qr->tls != NULL && l != TLSL_NONE) {
		client_send(c, "STARTTLS");
		c->st = C_STARTTLS;
		return;
	}
	if (!c->tls && l >= TLSL_ENCRYPT) {
		/* never plaintext where TLS is required (RFC 7672 2.2) */
		client_fail(
			c, 0,
			c->qr->tls == NULL
				? "4.7.4 TLS is required and not available here"
				: "4.7.4 TLS is required and the server does not offer STARTTLS");
		return;
	}
	if (!c->tls)
		snprintf(c->tlsdesc, sizeof(c->tlsdesc), "tls=none");
	if (c->w != NULL)
		tx_start(c, c->w);
	else
		client_next(c);
}


static void start_tls(struct smtp_client *c)
{
	const char *why;
	enum tls_level l = c->d->tls == TLSL_DEFAULT ? TLSL_MAY : c->d->tls;
	SSL *ssl = tls_policy_ssl(c->qr->tls, l, c->d->host, c->d->tlsa, c->d->ntlsa, &why);
	struct bufferevent *tls = ssl ? tls_starttls_client_ssl(c->bev, ssl, NULL) : NULL;

	if (tls == NULL) {
		SSL_free(ssl);
		client_fail(c, 0, why);
		return;
	}
	c->bev = tls;
	c->tls = true;
	c->st = C_TLS;
	line_reader_reset(&c->lr);
	set_callbacks(c);
}

/* LMTP (RFC 2033 4.2): after the data, one reply for each recipient whose RCPT was accepted,
   in their order. Whether every one has its reply now. */
static bool lmtp_dot_reply(struct smtp_client *c, int code, const char *text)
{
	size_t n = c->w->n;

	while (c->dot_k < n && c->rcode[c->dot_k] / 100 != 2)
		c->dot_k++;
	if (c->dot_k < n)
		rcpt_outcome(c, c->dot_k++, code, text);
	while (c->dot_k < n && c->rcode[c->dot_k] / 100 != 2)
		c->dot_k++;
	return c->dot_k >= n;
}

static const char *hello_verb(const struct smtp_client *c)
{
	return c->d->lmtp ? "LHLO" : "EHLO";
}

/* The final line of a reply. */
static void on_reply(struct smtp_client *c, int code, const char *text)
{
	switch (c->st) {
	case C_GREETING:
		if (code / 100 != 2) {
			client_fail(c, code, text);
			return;
		}
		client_send(c, "%s %s", hello_verb(c), c->qr->m->hostname);
		c->st = C_EHLO;
		break;
	case C_EHLO:
		if (code / 100 == 2) {
			session_ready(c);
			return;
		}
		if (c->d->lmtp) { /* LMTP has no HELO */
			client_fail(c, code, text);
			return;
		}
		client_send(c, "HELO %s", c->qr->m->hostname);
		c->st = C_HELO;
		break;
	case C_HELO:
		if (code / 100 != 2) {
			client_fail(c, code, text);
			return;
		}
		c->caps = 0;
		session_ready(c);
		break;
	case C_STARTTLS:
		if (code == 220) {
			start_tls(c);
			return;
		}
		c->caps &= ~CAP_STARTTLS;
		if (c->d->tls >= TLSL_ENCRYPT) {
			char why[REPLY_LINE_MAX + 64];

			snprintf(why, sizeof(why), "4.7.4 TLS is required and STARTTLS failed: %s",
				 text);
			client_fail(c, code, why);
			return;
		}
		session_ready(c);
		break;
	case C_TX:
		tx_reply(c, code, text);
		break;
	case C_DOT:
		if (c->w != NULL && c->d->lmtp && !lmtp_dot_reply(c, code, text))
			return; /* more recipients' replies to come */
		if (c->w != NULL) {
			for (size_t k = 0; k < c->w->n; k++)
				if (c->rcode[k] / 100 == 2 && !c->rdone[k])
					rcpt_outcome(c, k, code, text);
			work_end(c);
		}
		client_next(c);
		break;
	case C_RSET:
		client_next(c);
		break;
	default:
		break;
	}
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	struct smtp_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct line l;
	int rc;

	while (!c->dead && (rc = line_read(&c->lr, in, &c->line, &l)) != 0) {
		if (rc < 0 || l.len < 3 || (l.len > 3 && l.p[3] != ' ' && l.p[3] != '-') ||
		    l.p[0] < '2' || l.p[0] > '5') {
			client_fail(c, 0, "4.5.0 bad reply from the remote server");
			return;
		}
		int code = (l.p[0] - '0') * 100 + (l.p[1] - '0') * 10 + (l.p[2] - '0');
		const char *text = l.len > 4 ? l.p + 4 : "";
		if (c->st == C_EHLO && code == 250)
			parse_cap(c, text);
		if (l.len > 3 && l.p[3] == '-')
			continue;
		char msg[REPLY_LINE_MAX + 8];
		snprintf(msg, sizeof(msg), "%d %s", code, text);
		/* The text goes into logs and DSNs (bounce.c): a bare CR or LF inside the line
		   (data to the strict line reader) would start a line there. */
		for (char *q = msg; *q != '\0'; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = '?';
		on_reply(c, code, c->st == C_TX || c->st == C_DOT ? msg + 4 : msg);
		if (c->st == C_TLS || c->st == C_BODY)
			return; /* the bufferevent changed, or the body is being written */
	}
}

static void client_write_cb(struct bufferevent *bev, void *arg)
{
	struct smtp_client *c = arg;

	if (c->st == C_BODY)
		body_pump(c);
}

/* The handshake is done: a verified level must have verified; the log names the level. */
static int tls_connected(struct smtp_client *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
	enum tls_level l = c->d->tls == TLSL_DEFAULT ? TLSL_MAY : c->d->tls;
	const char *proto, *cipher;

	bool verified = ssl != NULL && SSL_get_verify_result(ssl) == X509_V_OK;

	if (c->d->sts_testing && !verified)
		log_info("%s mta-sts testing: the certificate does not verify (%s); an enforced "
			 "policy would defer",
			 c->relay,
			 ssl ? X509_verify_cert_error_string(SSL_get_verify_result(ssl))
			     : "no TLS");
	if ((l == TLSL_DANE || l == TLSL_VERIFY || l == TLSL_STS) &&
	    (ssl == NULL || SSL_get_verify_result(ssl) != X509_V_OK ||
	     (l == TLSL_DANE && SSL_get0_dane_authority(ssl, NULL, NULL) < 0))) {
		client_fail(c, 0,
			    l == TLSL_DANE  ? "4.7.5 the certificate matches no TLSA record"
			    : l == TLSL_STS ? "4.7.5 the certificate does not verify (MTA-STS)"
					    : "4.7.5 the certificate does not verify");
		return -1;
	}
	tls_peer_info(c->bev, &proto, &cipher, NULL);
	snprintf(c->tlsdesc, sizeof(c->tlsdesc), "tls=%s %s %s", tls_level_name(l),
		 proto ? proto : "?", cipher ? cipher : "?");
	log_info("%s %s TLS connection established: %s with cipher %s", c->relay,
		 l == TLSL_DANE     ? "Verified (DANE)"
		 : l == TLSL_STS    ? "Verified (MTA-STS)"
		 : l == TLSL_VERIFY ? "Verified"
		 : verified         ? "Trusted"
				    : "Untrusted",
		 proto ? proto : "?", cipher ? cipher : "?");
	return 0;
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct smtp_client *c = arg;

	if ((what & BEV_EVENT_CONNECTED) && c->st == C_TLS) {
		if (tls_connected(c) < 0)
			return;
		c->caps = 0;
		client_send(c, "%s %s", hello_verb(c), c->qr->m->hostname);
		c->st = C_EHLO;
		return;
	}
	if (c->st == C_TLS && !(what & BEV_EVENT_TIMEOUT)) {
		char err[256], text[400];

		snprintf(text, sizeof(text), "4.7.5 TLS handshake failed (%s): %s",
			 c->d->tls == TLSL_DANE
				 ? "dane"
				 : tls_level_name(c->d->tls == TLSL_DEFAULT ? TLSL_MAY
									    : c->d->tls),
			 tls_error(bev, err, sizeof(err)));
		client_fail(c, 0, text);
		return;
	}
	client_fail(c, 0,
		    (what & BEV_EVENT_TIMEOUT) ? "4.4.2 timeout talking to the remote server"
					       : "4.4.2 connection lost");
}

static void client_free(struct smtp_client *c)
{
	struct qdest *d = c->d;
	struct queue_runner *qr = c->qr;

	if (c->w != NULL) /* shutdown with the work in flight: the queue runner frees it */
		work_release(c);
	TAILQ_REMOVE(&d->all, c, aentry);
	if (c->nc != NULL)
		net_connect_cancel(&c->nc);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	if (c->idle != NULL)
		event_free(c->idle);
	if (c->fd >= 0)
		close(c->fd);
	buf_release(&c->line);
	free(c);
	d->active--;
	shmtable_put(qr->m->shared, SHM_RELAY_DEST, d->key, qr->m->worker);
	if (!qr->stopping)
		queue_dest_released(qr, d);
}

void smtp_client_close_idle(struct qdest *d)
{
	struct smtp_client *c;

	while ((c = TAILQ_FIRST(&d->idle)) != NULL) {
		TAILQ_REMOVE(&d->idle, c, entry);
		client_free(c);
	}
}

void smtp_client_close_all(struct qdest *d)
{
	struct smtp_client *c;

	smtp_client_close_idle(d);
	while ((c = TAILQ_FIRST(&d->all)) != NULL)
		client_free(c);
}

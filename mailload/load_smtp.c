/* load_smtp.c — owns the SMTP client state machine: greeting, EHLO, STARTTLS, AUTH PLAIN,
 * pipelined MAIL/RCPT/DATA when the server offers PIPELINING, the body streamed from the
 * message pools, QUIT. Three kinds: a user's submission, an outside MTA delivering to local
 * users, and init (many messages into one user's INBOX). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/evp.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/resp.h"

#define SMTP_MAX_RCPT 20
#define SMTP_MAX_PEND (SMTP_MAX_RCPT + 4)

enum ss_state { SS_GREETING, SS_EHLO, SS_STARTTLS, SS_AUTH, SS_TX, SS_BODY, SS_QUIT, SS_DONE };
enum pend_op { P_MAIL, P_RCPT, P_DATA };

struct smtp_sess {
	struct agent *ag;
	struct bufferevent *bev;
	struct net_connect *nc; /* while connecting */
	struct event *timer;
	enum smtp_kind kind;
	int conn; /* CONN_SMTP or CONN_SUBMIT */
	enum ss_state st;
	uint32_t user;
	uint32_t ext;
	bool tls_done;
	struct smtp_reply r;
	int64_t t0; /* start of the step awaiting a reply (us) */
	enum ml_fn fn;
	/* the transaction */
	uint64_t seq;
	int64_t sent_ms;
	uint32_t nrcpt, nok;
	int64_t rcpt[SMTP_MAX_RCPT];
	bool rcpt_ok[SMTP_MAX_RCPT];
	struct {
		uint8_t op;
		uint8_t idx;
	} pend[SMTP_MAX_PEND];
	uint32_t npend, pend_head;
	int64_t pend_t0;
	/* init: messages left */
	uint32_t left, idx;
	bool dead;
};

static void ss_read_cb(struct bufferevent *bev, void *arg);
static void ss_event_cb(struct bufferevent *bev, short what, void *arg);

static void ss_set_state(struct smtp_sess *s, enum ss_state st)
{
	log_debug("smtp user=%u state %d -> %d", s->user, s->st, st);
	s->st = st;
}

static void ss_reap(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_sess *s = arg;

	if (s->bev != NULL)
		bufferevent_free(s->bev);
	event_free(s->timer);
	free(s);
}

/* Ends the session; the memory goes after the current callback, so callers may still look
   at s->dead. */
static void ss_free(struct smtp_sess *s)
{
	static const struct timeval zero = { 0, 0 };

	if (s->dead)
		return;
	s->dead = true;
	event_del(s->timer);
	net_connect_cancel(&s->nc);
	if (s->bev != NULL)
		bufferevent_disable(s->bev, EV_READ | EV_WRITE);
	s->ag->open_smtp--;
	if (s->kind == SK_INIT)
		ag_init_user_done(s->ag);
	event_base_once(s->ag->base, -1, EV_TIMEOUT, ss_reap, s, &zero);
}

static void ss_fail(struct smtp_sess *s, enum ml_fn fn, const char *why)
{
	ag_step(s->ag, fn, s->t0, false, why);
	ss_free(s);
}

static void ss_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_sess *s = arg;

	ss_fail(s, s->fn, "timeout");
}

static void ss_send(struct smtp_sess *s, enum ml_fn fn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ss_send(struct smtp_sess *s, enum ml_fn fn, const char *fmt, ...)
{
	va_list ap;
	struct timeval tv = { (time_t)s->ag->cfg.timeout_s, 0 };

	if (fmt != NULL) {
		va_start(ap, fmt);
		evbuffer_add_vprintf(bufferevent_get_output(s->bev), fmt, ap);
		va_end(ap);
	}
	s->fn = fn;
	s->t0 = clock_wall_us();
	event_add(s->timer, &tv);
}

static void ss_pick_rcpts(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	uint32_t n = ml_pick_rcpt_count(&ag->rng), tries = 0;

	s->nrcpt = 0;
	if (s->kind != SK_SUBMIT)
		s->rcpt[s->nrcpt++] = s->user;    /* the user this delivery was drawn for */
	while (s->nrcpt < n && tries++ < 8 * n) { /* distinct; a small population may run out */
		bool local = s->kind != SK_SUBMIT || ml_rng_unit(&ag->rng) < ag->cfg.rcpt_local;
		int64_t id = local ? (int64_t)ml_rng_range(&ag->rng, 1, ag->cfg.users)
				   : -(int64_t)ml_rng_range(&ag->rng, 1, 1000000);
		bool dup = false;

		for (uint32_t i = 0; i < s->nrcpt; i++)
			dup |= s->rcpt[i] == id;
		if (!dup)
			s->rcpt[s->nrcpt++] = id;
	}
}

static void ss_begin_tx(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	struct evbuffer *out = bufferevent_get_output(s->bev);
	char from[160], to[160];
	bool pipe = (s->ext & SMTP_EXT_PIPELINING) != 0;

	if (s->kind == SK_INIT) {
		s->seq = ag_init_seq(s->user, 0, s->idx);
		s->nrcpt = 1;
		s->rcpt[0] = s->user;
		s->sent_ms = 1735689600000LL +
			     (int64_t)s->seq % 86400000; /* fixed: deterministic */
	} else {
		s->seq = ag->seq++;
		s->sent_ms = clock_wall_ms();
		ss_pick_rcpts(s);
	}
	if (s->kind == SK_SUBMIT)
		ml_rcpt_addr(&ag->cfg, s->user, from, sizeof(from));
	else
		snprintf(from, sizeof(from), "sender%u@%s", s->user, ag->cfg.ext_domain);
	s->nok = 0;
	s->npend = s->pend_head = 0;
	evbuffer_add_printf(out, "MAIL FROM:<%s>\r\n", from);
	s->pend[s->npend++].op = P_MAIL;
	for (uint32_t i = 0; i < s->nrcpt; i++) {
		ml_rcpt_addr(&ag->cfg, s->rcpt[i], to, sizeof(to));
		s->rcpt_ok[i] = false;
		if (pipe)
			evbuffer_add_printf(out, "RCPT TO:<%s>\r\n", to);
		s->pend[s->npend].op = P_RCPT;
		s->pend[s->npend++].idx = (uint8_t)i;
	}
	if (pipe)
		evbuffer_add_printf(out, "DATA\r\n");
	s->pend[s->npend++].op = P_DATA;
	ss_set_state(s, SS_TX);
	ss_send(s, FN_SMTP_MAIL, NULL);
	s->pend_t0 = s->t0;
}

/* Without PIPELINING the commands after MAIL go out one by one, as each reply arrives. */
static void ss_send_next_unpiped(struct smtp_sess *s)
{
	char to[160];
	uint32_t k = s->pend_head;

	if (s->ext & SMTP_EXT_PIPELINING || k >= s->npend)
		return;
	if (s->pend[k].op == P_RCPT) {
		ml_rcpt_addr(&s->ag->cfg, s->rcpt[s->pend[k].idx], to, sizeof(to));
		evbuffer_add_printf(bufferevent_get_output(s->bev), "RCPT TO:<%s>\r\n", to);
	} else if (s->pend[k].op == P_DATA) {
		evbuffer_add_printf(bufferevent_get_output(s->bev), "DATA\r\n");
	}
	s->pend_t0 = clock_wall_us();
}

static void ss_send_body(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	struct ml_msg_spec spec;
	const char *to[SMTP_MAX_RCPT];
	char addr[SMTP_MAX_RCPT][128], from[128];
	uint32_t n = 0;

	ag_msg_spec(ag, &spec, s->seq, s->sent_ms);
	if (s->kind == SK_SUBMIT)
		ml_rcpt_addr(&ag->cfg, s->user, from, sizeof(from));
	else
		snprintf(from, sizeof(from), "sender%u@%s", s->user, ag->cfg.ext_domain);
	for (uint32_t i = 0; i < s->nrcpt; i++) {
		ml_rcpt_addr(&ag->cfg, s->rcpt[i], addr[n], sizeof(addr[n]));
		to[n] = addr[n];
		n++;
	}
	spec.from = from;
	spec.to = to;
	spec.nto = n;
	if (s->kind == SK_INIT)
		spec.sent_ms = 0;
	ml_msg_build(&ag->msg, &spec);
	ml_msg_emit(&ag->msg, bufferevent_get_output(s->bev));
	evbuffer_add(bufferevent_get_output(s->bev), ".\r\n", 3);
	ss_set_state(s, SS_BODY);
	ss_send(s, FN_SMTP_DATA, NULL);
}

static void ss_quit(struct smtp_sess *s)
{
	ss_set_state(s, SS_QUIT);
	ss_send(s, FN_SMTP_QUIT, "QUIT\r\n");
}

static void ss_after_ehlo(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	char pw[128];

	if (ag->srv[s->conn].starttls && !s->tls_done) {
		if (!(s->ext & SMTP_EXT_STARTTLS))
			return ss_fail(s, FN_SMTP_STARTTLS, "STARTTLS not offered");
		ss_set_state(s, SS_STARTTLS);
		ss_send(s, FN_SMTP_STARTTLS, "STARTTLS\r\n");
		return;
	}
	if (s->kind == SK_SUBMIT && (s->ext & SMTP_EXT_AUTH_PLAIN)) {
		char raw[300], b64[420], login[128];
		const char *user_pw = ag_password(ag, s->user, pw, sizeof(pw));
		ml_user_login(&ag->cfg, s->user, login, sizeof(login));
		int n = snprintf(raw, sizeof(raw), "%c%s%c%s", 0, login, 0, user_pw);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)raw, n);
		ss_set_state(s, SS_AUTH);
		ss_send(s, FN_SMTP_AUTH, "AUTH PLAIN %s\r\n", b64);
		return;
	}
	ss_begin_tx(s);
}

static void ss_starttls(struct smtp_sess *s)
{
	struct bufferevent *tb = ag_starttls(s->ag, s->conn, s->bev);

	if (tb == NULL)
		return ss_fail(s, FN_SMTP_STARTTLS, "TLS set-up failed");
	s->bev = tb;
	s->tls_done = true;
	line_reader_reset(&s->r.lr);
	bufferevent_setcb(tb, ss_read_cb, NULL, ss_event_cb, s);
	bufferevent_enable(tb, EV_READ | EV_WRITE);
	ss_set_state(s, SS_EHLO);
	ss_send(s, FN_SMTP_EHLO, "EHLO mailload.%s\r\n", s->ag->cfg.ext_domain);
}

/* One reply of the pipelined transaction. */
static void ss_tx_reply(struct smtp_sess *s)
{
	uint32_t k = s->pend_head++;
	bool ok = s->r.code / 100 == 2;
	char why[300];

	snprintf(why, sizeof(why), "%d %s", s->r.code, s->r.text);
	switch (s->pend[k].op) {
	case P_MAIL:
		ag_step(s->ag, FN_SMTP_MAIL, s->pend_t0, ok, why);
		break;
	case P_RCPT:
		ag_step(s->ag, FN_SMTP_RCPT, s->pend_t0, ok, why);
		s->rcpt_ok[s->pend[k].idx] = ok;
		s->nok += ok;
		break;
	case P_DATA:
		if (s->r.code != 354) {
			if (s->nok > 0)
				ag_step(s->ag, FN_SMTP_DATA_CMD, s->pend_t0, false, why);
			s->npend = s->pend_head = 0;
			ss_quit(s);
			return;
		}
		ag_step(s->ag, FN_SMTP_DATA_CMD, s->pend_t0, true, NULL);
		ss_send_body(s);
		return;
	}
	ss_send_next_unpiped(s);
}

static void ss_body_done(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	char why[300];
	int64_t ok_rcpt[SMTP_MAX_RCPT];
	uint32_t n = 0;

	if (s->r.code / 100 != 2) {
		snprintf(why, sizeof(why), "%d %s", s->r.code, s->r.text);
		ag_step(ag, FN_SMTP_DATA, s->t0, false, why);
	} else {
		ag_step(ag, FN_SMTP_DATA, s->t0, true, NULL);
		for (uint32_t i = 0; i < s->nrcpt; i++)
			if (s->rcpt_ok[i])
				ok_rcpt[n++] = s->rcpt[i];
		if (s->kind == SK_INIT)
			ag->init_msgs++;
		else
			ag_sent_ack(ag, s->seq, s->sent_ms, ok_rcpt, n, s->kind == SK_SUBMIT);
		if (s->kind == SK_SUBMIT)
			ag_after_submit(ag, s->user, s->seq, s->sent_ms);
	}
	if (s->kind == SK_INIT && --s->left > 0) {
		s->idx++;
		ss_begin_tx(s);
		return;
	}
	ss_quit(s);
}

static void ss_reply(struct smtp_sess *s)
{
	struct agent *ag = s->ag;
	char why[300];
	bool ok = s->r.code / 100 == 2;

	snprintf(why, sizeof(why), "%d %s", s->r.code, s->r.text);
	switch (s->st) {
	case SS_GREETING:
		if (s->r.code != 220)
			return ss_fail(s, FN_SMTP_CONNECT, why);
		if (ag->server.smtp_greeting[0] == '\0')
			str_lcpy(ag->server.smtp_greeting, s->r.text,
				 sizeof(ag->server.smtp_greeting));
		ag_step(ag, FN_SMTP_CONNECT, s->t0, true, NULL);
		ss_set_state(s, SS_EHLO);
		ss_send(s, FN_SMTP_EHLO, "EHLO mailload.%s\r\n", ag->cfg.ext_domain);
		return;
	case SS_EHLO:
		if (!ok)
			return ss_fail(s, FN_SMTP_EHLO, why);
		ag_step(ag, FN_SMTP_EHLO, s->t0, true, NULL);
		s->ext = s->r.ext;
		ss_after_ehlo(s);
		return;
	case SS_STARTTLS:
		if (s->r.code != 220)
			return ss_fail(s, FN_SMTP_STARTTLS, why);
		ag_step(ag, FN_SMTP_STARTTLS, s->t0, true, NULL);
		ss_starttls(s);
		return;
	case SS_AUTH:
		if (s->r.code != 235)
			return ss_fail(s, FN_SMTP_AUTH, why);
		ag_step(ag, FN_SMTP_AUTH, s->t0, true, NULL);
		ss_begin_tx(s);
		return;
	case SS_TX:
		ss_tx_reply(s);
		return;
	case SS_BODY:
		ss_body_done(s);
		return;
	case SS_QUIT:
		ag_step(ag, FN_SMTP_QUIT, s->t0, s->r.code == 221, why);
		ss_set_state(s, SS_DONE);
		ss_free(s);
		return;
	case SS_DONE:
		return;
	}
}

static void ss_read_cb(struct bufferevent *bev, void *arg)
{
	struct smtp_sess *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (s->ag->phase == PH_DONE && s->kind != SK_INIT) /* the results are taken */
		return ss_free(s);
	for (;;) {
		int rc = smtp_reply_parse(&s->r, in);

		if (rc == 0)
			return;
		if (rc < 0)
			return ss_fail(s, s->fn, s->r.text);
		event_del(s->timer);
		ss_reply(s);
		if (s->dead)
			return;
		smtp_reply_reset(&s->r);
	}
}

static void ss_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct smtp_sess *s = arg;
	char why[200] = "";

	if (s->dead || ag_tls_event(s->ag, bev, what, 0, why, sizeof(why)))
		return;
	if (why[0] != '\0')
		return ss_fail(s, s->fn, why);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		ss_fail(s, s->fn,
			s->st == SS_GREETING ? "connection closed before the greeting"
					     : "connection closed by server");
}

static void ss_connected(struct bufferevent *bev, const char *error, void *arg)
{
	struct smtp_sess *s = arg;

	s->nc = NULL;
	if (bev == NULL)
		return ss_fail(s, FN_SMTP_CONNECT, error);
	if ((s->bev = ag_connected(s->ag, s->conn, bev)) == NULL)
		return ss_fail(s, FN_SMTP_CONNECT, "TLS set-up failed");
	s->tls_done = s->ag->srv[s->conn].implicit;
	bufferevent_setcb(s->bev, ss_read_cb, NULL, ss_event_cb, s);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

void smtp_start(struct agent *ag, enum smtp_kind kind, uint32_t user, uint32_t count)
{
	smtp_start_at(ag, kind, user, 0, count);
}

void smtp_start_at(struct agent *ag, enum smtp_kind kind, uint32_t user, uint32_t first,
		   uint32_t count)
{
	struct smtp_sess *s = xcalloc(1, sizeof(*s));

	s->idx = first;
	s->ag = ag;
	s->kind = kind;
	s->conn = kind == SK_SUBMIT ? CONN_SUBMIT : CONN_SMTP;
	s->user = user;
	s->left = count;
	s->fn = FN_SMTP_CONNECT;
	ag->open_smtp++;
	s->timer = evtimer_new(ag->base, ss_timeout_cb, s);
	smtp_reply_reset(&s->r);
	ss_set_state(s, SS_GREETING);
	ss_send(s, FN_SMTP_CONNECT, NULL);
	s->nc = ag_connect(ag, s->conn, ss_connected, s);
}

/* smtp_session.c — owns one SMTP/LMTP connection: its state (changed only in smtp_set_state),
 * the input loop that takes pipelined commands one at a time and pauses while the directory or
 * the store works, timeouts, the greeting (with its optional delay, and after the milters'
 * answer to the connect), STARTTLS and the close.
 * Commands are in smtp_cmd.c, message data in smtp_data.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"

/* Input kept while a command waits (bounded: reading pauses above it). */
#define INPUT_HIGH (256 * 1024)

static void session_read_cb(struct bufferevent *bev, void *arg);
static void session_write_cb(struct bufferevent *bev, void *arg);
static void session_event_cb(struct bufferevent *bev, short what, void *arg);
static void session_free(struct smtp_session *s);
static void set_timeouts(struct smtp_session *s);

static const char *st_name(unsigned st)
{
	switch (st) {
	case ST_GREETING:
		return "greeting";
	case ST_CONNECTED:
		return "connected";
	case ST_READY:
		return "ready";
	case ST_MAIL:
		return "mail";
	case ST_RCPT:
		return "rcpt";
	case ST_DATA:
		return "data";
	case ST_BDAT:
		return "bdat";
	case ST_WAIT:
		return "wait";
	case ST_TLS:
		return "tls";
	case ST_QUIT:
		return "quit";
	}
	return "?";
}

void smtp_set_state(struct smtp_session *s, enum smtp_state next)
{
	log_debug("%016" PRIx64 " state %s -> %s", s->id, st_name(s->state), st_name(next));
	s->state = next;
}

/* The earliest deadline in force and what it is for; 0 when none. */
static int64_t deadline_next(const struct smtp_session *s, const char **what_r)
{
	int64_t d = 0;

	*what_r = NULL;
	if (s->login_deadline != 0 && !(s->flags & SF_AUTH)) {
		d = s->login_deadline;
		*what_r = "login timeout";
	}
	if (s->tx != NULL && s->tx->deadline != 0 && (d == 0 || s->tx->deadline < d)) {
		d = s->tx->deadline;
		*what_r = "transaction took too long";
	}
	if (s->tx != NULL && s->tx->data_deadline != 0 && (d == 0 || s->tx->data_deadline < d)) {
		d = s->tx->data_deadline;
		*what_r = "message data took too long";
	}
	return d;
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_session *s = arg;
	const char *why;
	int64_t d = deadline_next(s, &why);

	/* the directory or the store is working for it: judged when that returns */
	if (s->closing || s->state == ST_WAIT || d == 0)
		return;
	if (d > clock_mono_ms()) { /* moved later since it was armed */
		set_timeouts(s);
		return;
	}
	log_info("%016" PRIx64 " smtp close addr=%s reason=\"%s\" state=%s", s->id, s->addr, why,
		 st_name(s->state));
	smtp_reply(s, "421 4.4.2 %s Timeout: %s, closing connection", s->m->hostname, why);
	smtp_close(s);
}

/* The idle timeouts of the bufferevent, and the session's absolute deadlines (login,
   transaction, data), which no amount of input moves. */
static void set_timeouts(struct smtp_session *s)
{
	int64_t ms = (s->state & (ST_DATA | ST_BDAT)) ? s->m->lim.data_timeout_ms
						      : s->m->lim.command_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	const char *why;
	int64_t d = deadline_next(s, &why);

	bufferevent_set_timeouts(s->bev, &tv, &tv);
	if (d == 0) {
		if (s->deadline != NULL)
			evtimer_del(s->deadline);
		return;
	}
	if (s->deadline == NULL)
		s->deadline = evtimer_new(s->m->base, deadline_cb, s);
	ms = d - clock_mono_ms();
	ms = ms > 0 ? ms : 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(s->deadline, &tv);
}

static void setup_bev(struct smtp_session *s)
{
	bufferevent_setcb(s->bev, session_read_cb, session_write_cb, session_event_cb, s);
	bufferevent_setwatermark(s->bev, EV_READ, 0, INPUT_HIGH);
	bufferevent_setwatermark(s->bev, EV_WRITE, 0, 0);
	set_timeouts(s);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

static void greet(struct smtp_session *s)
{
	smtp_set_state(s, ST_CONNECTED);
	smtp_reply(s, "220 %s %s Heron", s->m->hostname, s->kind == L_LMTP ? "LMTP" : "ESMTP");
}

/* The milters answered the connect: the greeting (a refusal of theirs is the reply to every
   command from now on, milter_refused), or, as Postfix does, a 421 of theirs in its place and
   the session closed. */
static void connect_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	if (refusal != NULL && strncmp(refusal, "421", 3) == 0) {
		log_info("%016" PRIx64 " smtp close addr=%s reason=\"milter 421 at connect\"",
			 s->id, s->addr);
		smtp_set_state(s, ST_CONNECTED);
		milter_reply(s, refusal);
	} else {
		greet(s);
	}
	if (resume)
		smtp_resume(s);
}

/* The milters are asked about the connection before the greeting. */
static void send_greeting(struct smtp_session *s)
{
	milter_ask(s, MILTER_CONNECT, NULL, false, connect_answer, false);
}

static void greeting_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_session *s = arg;

	if (evbuffer_get_length(bufferevent_get_input(s->bev)) > 0) {
		/* a client that talks before the greeting is not an SMTP client */
		log_info("%016" PRIx64 " smtp close addr=%s reason=\"talked before greeting\"",
			 s->id, s->addr);
		smtp_reply(s, "554 5.5.0 %s Protocol error: talked before greeting",
			   s->m->hostname);
		smtp_close(s);
		return;
	}
	send_greeting(s);
}

struct smtp_session *smtp_session_new(struct mtad *m, enum mtad_listener kind, int fd,
				      const struct sockaddr *sa, socklen_t salen)
{
	struct smtp_session *s = xcalloc(1, sizeof(*s));
	const struct conf_cidrs *trusted = conf_values(m->conf)->mtad.trusted_networks;

	s->id = log_new_id();
	s->m = m;
	s->kind = kind;
	s->connected = (int64_t)time(NULL);
	s->connected_us = clock_mono_us();
	metrics_inc(MS_CONN_ACCEPTED, kind, 0);
	memcpy(&s->ss, sa, salen);
	s->sslen = salen;
	net_addr_str(sa, salen, s->addr, sizeof(s->addr));
	if (sa->sa_family != AF_UNIX && conf_cidrs_match(trusted, sa))
		s->flags |= SF_TRUSTED;
	if (kind == L_LMTP)
		s->flags |= SF_LMTP;
	s->peer_uid = -1;
	if (kind == L_SUBMISSION && sa->sa_family == AF_UNIX) {
		/* a local process (heron-sendmail): the socket's permissions let it in; who it is
		   is logged and goes into the Received: header */
		struct ucred uc;
		socklen_t ul = sizeof(uc);

		s->flags |= SF_LOCAL;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
			s->peer_uid = (long)uc.uid;
	}
	s->flags |= SF_IPCOUNTED; /* the accept callback counted it */
	if (sa->sa_family != AF_UNIX) {
		int one = 1;

		/* replies go out at once: no delayed-ACK wait on a pipelined client */
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1)
			log_warn("%016" PRIx64 " TCP_NODELAY", s->id);
	}
	if ((kind == L_SUBMISSION || kind == L_SUBMISSIONS) && !(s->flags & SF_LOCAL))
		s->login_deadline = clock_mono_ms() + m->lim.login_timeout_ms;
	line_reader_init(&s->lr, m->lim.line_max, 0);
	buf_init(&s->line, 256, m->lim.line_max + 2);
	m->nsessions++;
	TAILQ_INSERT_TAIL(&m->sessions, s, entry);
	char uid[32] = "";

	if (s->flags & SF_LOCAL)
		snprintf(uid, sizeof(uid), " uid=%ld", s->peer_uid);
	log_info("%016" PRIx64 " smtp connect addr=%s listener=%s%s%s", s->id, s->addr,
		 (s->flags & SF_LOCAL)   ? "local"
		 : kind == L_SMTP        ? "smtp"
		 : kind == L_SUBMISSION  ? "submission"
		 : kind == L_SUBMISSIONS ? "submissions"
					 : "lmtp",
		 (s->flags & SF_TRUSTED) ? " trusted=yes" : "", uid);
	if (kind == L_SUBMISSIONS) {
		s->bev = tls_server_accept(m->base, m->tls, fd);
		if (s->bev == NULL) {
			session_free(s);
			return NULL;
		}
		smtp_set_state(s, ST_TLS);
		setup_bev(s);
		return s;
	}
	s->bev = bufferevent_socket_new(m->base, fd, BEV_OPT_CLOSE_ON_FREE);
	setup_bev(s);
	if (m->lim.greeting_delay_ms > 0 && kind != L_LMTP) {
		struct timeval tv = { m->lim.greeting_delay_ms / 1000,
				      (m->lim.greeting_delay_ms % 1000) * 1000 };

		s->state = ST_GREETING;
		s->timer = evtimer_new(m->base, greeting_cb, s);
		evtimer_add(s->timer, &tv);
	} else {
		send_greeting(s);
	}
	return s;
}

/* One step of the input loop; false when it must stop (need input, waiting, closing). */
static bool session_step(struct smtp_session *s, struct evbuffer *in)
{
	struct line l;
	int rc;

	if (s->closing || (s->state & (ST_WAIT | ST_TLS | ST_QUIT | ST_GREETING)))
		return false;
	/* replies not read by the client: stop taking commands until they drain */
	if (evbuffer_get_length(bufferevent_get_output(s->bev)) > INPUT_HIGH)
		return false;
	if (s->state == ST_DATA) {
		if (smtp_data_feed(s, in) == 0)
			return false;
		mtad_metrics_command(s, "DATA_END");
		smtp_data_done(s);
		return true;
	}
	if (s->discard_left > 0) {
		size_t n = evbuffer_get_length(in);

		if (n == 0)
			return false;
		n = n < s->discard_left ? n : (size_t)s->discard_left;
		evbuffer_drain(in, n);
		s->discard_left -= n;
		return true;
	}
	if (s->tx != NULL && s->tx->chunk_left > 0) {
		if (smtp_bdat_feed(s, in) == 0)
			return false;
		return true;
	}
	rc = line_read(&s->lr, in, &s->line, &l);
	if (rc == 0)
		return false;
	if (rc < 0) {
		smtp_error(s, "500 5.5.2 Line too long");
		return true;
	}
	if (s->auth_step > 0)
		smtp_auth_line(s, l.p, l.len);
	else
		smtp_dispatch(s, l.p, l.len);
	return true;
}

static void session_input(struct smtp_session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);

	while (session_step(s, in))
		;
	if (s->m->draining || (s->flags & SF_KICKED))
		smtp_session_drain(s);
	if (!s->closing)
		set_timeouts(s);
}

void smtp_resume(struct smtp_session *s)
{
	if (s->dead) {
		session_free(s);
		return;
	}
	if (s->closing) {
		if (s->state == ST_WAIT)
			smtp_set_state(s, ST_QUIT);
		bufferevent_trigger(s->bev, EV_WRITE,
				    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
		return;
	}
	session_input(s);
}

static void session_read_cb(struct bufferevent *bev, void *arg)
{
	struct smtp_session *s = arg;

	if (s->state == ST_GREETING) {
		/* wait for the timer; it refuses a client that talked first */
		return;
	}
	session_input(s);
}

/* Closing over STARTTLS: the filter's output is drained but the encrypted bytes may still
   sit in the socket bufferevent below it; free only when those are written too. */
static void lower_write_cb(struct bufferevent *bev, void *arg)
{
	session_free(arg);
}

static void lower_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_free(arg);
}

static void session_write_cb(struct bufferevent *bev, void *arg)
{
	struct smtp_session *s = arg;

	if (s->closing) {
		struct bufferevent *lower = bufferevent_get_underlying(bev);

		/* a triggered call (smtp_resume) may come before the last reply is written:
		   the drain calls again */
		if (s->state == ST_WAIT || evbuffer_get_length(bufferevent_get_output(bev)) > 0)
			return;
		if (lower != NULL && evbuffer_get_length(bufferevent_get_output(lower)) > 0) {
			bufferevent_setcb(lower, NULL, lower_write_cb, lower_event_cb, s);
			bufferevent_setwatermark(lower, EV_WRITE, 0, 0);
			bufferevent_enable(lower, EV_WRITE);
			return;
		}
		session_free(s);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		session_input(s);
}

static void session_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct smtp_session *s = arg;

	if (what & BEV_EVENT_CONNECTED) {
		/* TLS handshake done: implicit TLS greets now; STARTTLS starts over (RFC 3207) */
		const char *proto = NULL, *cipher = NULL;

		tls_peer_info(bev, &proto, &cipher, NULL);
		metrics_tls_handshake(bev);
		log_info("%016" PRIx64 " smtp tls addr=%s proto=%s cipher=%s", s->id, s->addr,
			 proto ? proto : "?", cipher ? cipher : "?");
		s->flags |= SF_TLS;
		line_reader_reset(&s->lr);
		if (s->kind == L_SUBMISSIONS && s->helo[0] == '\0' && s->ntx == 0 &&
		    !(s->flags & SF_ESMTP))
			send_greeting(s);
		else
			smtp_set_state(s, ST_CONNECTED);
		session_input(s);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		log_info("%016" PRIx64 " smtp close addr=%s reason=timeout state=%s", s->id,
			 s->addr, st_name(s->state));
		if (s->state != ST_TLS) {
			smtp_reply(s, "421 4.4.2 %s Timeout, closing connection", s->m->hostname);
			smtp_close(s);
			return;
		}
	} else if (what & BEV_EVENT_ERROR) {
		char err[256];

		if (s->state == ST_TLS)
			metrics_tls_failed();
		log_info("%016" PRIx64 " smtp close addr=%s reason=\"%s\"", s->id, s->addr,
			 s->state == ST_TLS ? tls_error(bev, err, sizeof(err))
					    : "connection error");
	} else {
		log_info("%016" PRIx64 " smtp close addr=%s reason=eof", s->id, s->addr);
	}
	s->closing = true;
	if (s->state == ST_WAIT) {
		/* the directory or store callback frees the session when it returns */
		s->dead = true;
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		return;
	}
	session_free(s);
}

void smtp_close(struct smtp_session *s)
{
	if (s->closing)
		return;
	s->closing = true;
	if (s->state != ST_WAIT)
		smtp_set_state(s, ST_QUIT);
	bufferevent_disable(s->bev, EV_READ);
	bufferevent_enable(s->bev, EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
		/* nothing to flush: let the write callback run once from the loop */
		bufferevent_trigger(s->bev, EV_WRITE,
				    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
	}
}

void smtp_session_drain(struct smtp_session *s)
{
	if (s->closing || !(s->state & (ST_GREETING | ST_CONNECTED | ST_READY)))
		return;
	if (s->flags & SF_KICKED) {
		log_info("%016" PRIx64 " smtp close addr=%s user=%s reason=kicked", s->id, s->addr,
			 s->user);
		smtp_reply(s, "421 4.7.0 %s Disconnected by the administrator", s->m->hostname);
	} else {
		smtp_reply(s, "421 4.3.2 %s Service shutting down", s->m->hostname);
	}
	smtp_close(s);
}

void smtp_starttls(struct smtp_session *s)
{
	size_t dropped = 0;
	struct bufferevent *tls;

	tls = tls_starttls_server(s->bev, s->m->tls, &dropped);
	if (tls == NULL) {
		smtp_reply(s, "454 4.7.0 TLS not available");
		return;
	}
	if (dropped > 0)
		log_info("%016" PRIx64 " smtp starttls addr=%s dropped=%zu "
			 "reason=\"pipelined after STARTTLS\"",
			 s->id, s->addr, dropped);
	s->bev = tls;
	/* RFC 3207 4.2: forget everything learnt before the handshake */
	s->flags &= ~(SF_ESMTP | SF_AUTH);
	s->helo[0] = '\0';
	s->user[0] = '\0';
	sender_own_set(s, NULL);
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_TLS);
	setup_bev(s);
}

static void session_free(struct smtp_session *s)
{
	struct mtad *m = s->m;

	if (s->timer != NULL)
		event_free(s->timer);
	if (s->deadline != NULL)
		event_free(s->deadline);
	sender_own_set(s, NULL);
	smtp_scram_free(s);
	smtp_tx_free(&s->tx);
	milter_session_free(s);
	if (s->bev != NULL)
		bufferevent_free(s->bev);
	buf_release(&s->line);
	free(s->drop_key);
	smtp_drop_refused_free(s);
	explicit_bzero(s->auth_login, sizeof(s->auth_login));
	TAILQ_REMOVE(&m->sessions, s, entry);
	mtad_session_ended(m, s);
	free(s);
}

/* sink_session.c — owns one SMTP connection of the sink: the command table and state machine
 * (EHLO, MAIL, RCPT, DATA, BDAT, RSET, NOOP, QUIT, STARTTLS), pipelining, the streamed
 * message (counted, scanned for its stamp and discarded, or kept in a Maildir), fault
 * injection at each step, and the arrival record of every accepted message. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/line.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/mailaddr.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "sink/sink.h"

#define SESS_INPUT_MAX (256 * 1024)  /* read pauses when this much input waits */
#define SESS_OUTPUT_MAX (256 * 1024) /* commands wait while the peer does not read replies */
#define SESS_IOV 16
#define SESS_REPLY_FLUSH (16 * 1024) /* replies gathered before a forced flush */

enum sess_state {
	ST_FRESH, /* greeted, no EHLO/HELO yet */
	ST_READY, /* EHLO done, no transaction */
	ST_MAIL,  /* MAIL accepted */
	ST_RCPT,  /* at least one RCPT accepted */
	ST_DATA,  /* reading a DATA body */
	ST_BDAT,  /* reading a BDAT chunk */
};

enum sess_flag {
	F_TLS = 1 << 0,
	F_CLOSING = 1 << 1, /* free once the output is flushed */
	F_PAUSED = 1 << 2,  /* a delayed reply or the greeting is pending */
	F_GREETED = 1 << 3,
	F_FLUSHWAIT = 1 << 4, /* closing: waiting for TLS records to leave */
};

enum cmd_arg { ARG_NONE, ARG_NEED, ARG_ANY };

struct sink_session {
	struct sink_worker *w;
	struct bufferevent *bev;
	struct event *timer;
	uint64_t id;
	enum sess_state state;
	unsigned flags;
	unsigned flush_tries;
	struct line_reader lr;
	struct buf reply;   /* replies not yet written (flushed after each batch of input) */
	struct buf pending; /* replies held back by delay_ms */
	/* the transaction */
	struct buf rcpts; /* NUL-terminated addresses back to back */
	unsigned nrcpts;
	uint64_t size;
	uint64_t bdat_left;
	bool bdat_last, bdat_used, too_big, drop;
	const char *bdat_err; /* a BDAT out of sequence: the reply once its chunk is read */
	enum sess_state bdat_prev;
	struct sink_dot dot;
	struct sink_hdr hdr;
	int keep_fd;
	char *keep_path; /* the Maildir tmp/ file while a copy is kept */
	char from[MAILADDR_TEXT_MAX + 1];
};

struct sess_cmd {
	const char *verb;
	enum cmd_arg arg;
	void (*fn)(struct sink_session *s, const char *arg, size_t len);
};

static void sess_read_cb(struct bufferevent *bev, void *ctx);
static void sess_write_cb(struct bufferevent *bev, void *ctx);
static void sess_event_cb(struct bufferevent *bev, short what, void *ctx);
static void sess_timer_cb(evutil_socket_t fd, short what, void *ctx);
static bool sess_process(struct sink_session *s);
static void sess_free(struct sink_session *s);
static void sess_flush(struct sink_session *s);
static void sess_reply(struct sink_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void cmd_ehlo(struct sink_session *s, const char *arg, size_t len);
static void cmd_helo(struct sink_session *s, const char *arg, size_t len);
static void cmd_mail(struct sink_session *s, const char *arg, size_t len);
static void cmd_rcpt(struct sink_session *s, const char *arg, size_t len);
static void cmd_data(struct sink_session *s, const char *arg, size_t len);
static void cmd_bdat(struct sink_session *s, const char *arg, size_t len);
static void cmd_rset(struct sink_session *s, const char *arg, size_t len);
static void cmd_noop(struct sink_session *s, const char *arg, size_t len);
static void cmd_quit(struct sink_session *s, const char *arg, size_t len);
static void cmd_vrfy(struct sink_session *s, const char *arg, size_t len);
static void cmd_starttls(struct sink_session *s, const char *arg, size_t len);

static const struct sess_cmd sess_cmds[] = {
	/* verb        arg       handler */
	{ "EHLO", ARG_NEED, cmd_ehlo },         { "HELO", ARG_NEED, cmd_helo },
	{ "MAIL", ARG_NEED, cmd_mail },         { "RCPT", ARG_NEED, cmd_rcpt },
	{ "DATA", ARG_NONE, cmd_data },         { "BDAT", ARG_NEED, cmd_bdat },
	{ "RSET", ARG_NONE, cmd_rset },         { "NOOP", ARG_ANY, cmd_noop },
	{ "QUIT", ARG_NONE, cmd_quit },         { "VRFY", ARG_ANY, cmd_vrfy },
	{ "STARTTLS", ARG_NONE, cmd_starttls },
};

static const struct sink_faults *sess_faults(const struct sink_session *s)
{
	return sink_shared_faults(s->w->sh);
}

static void sess_set_state(struct sink_session *s, enum sess_state next)
{
	s->state = next;
}

static void sess_arm_timer(struct sink_session *s, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	s->flags |= F_PAUSED;
	evtimer_add(s->timer, &tv);
}

static void sess_bev_setup(struct sink_session *s)
{
	struct timeval tmo = { s->w->o->timeout_ms / 1000, (s->w->o->timeout_ms % 1000) * 1000 };

	bufferevent_setcb(s->bev, sess_read_cb, sess_write_cb, sess_event_cb, s);
	bufferevent_setwatermark(s->bev, EV_READ, 0, SESS_INPUT_MAX);
	bufferevent_set_timeouts(s->bev, &tmo, &tmo);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

void sink_session_start(struct sink_worker *w, int fd)
{
	struct sink_session *s = xcalloc(1, sizeof(*s));
	uint32_t delay = sink_fault_get(sink_shared_faults(w->sh), FAULT_GREETING_DELAY_MS);

	s->w = w;
	s->id = log_new_id();
	s->keep_fd = -1;
	line_reader_init(&s->lr, SINK_LINE_MAX, LINE_LF);
	buf_init(&s->reply, 0, SESS_OUTPUT_MAX);
	buf_init(&s->pending, 0, SESS_OUTPUT_MAX);
	buf_init(&s->rcpts, 0, (size_t)w->o->max_recipients * (MAILADDR_TEXT_MAX + 1));
	s->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (s->bev == NULL) {
		log_warnx("%016" PRIx64 " sink cannot set up the connection", s->id);
		close(fd);
		buf_release(&s->reply);
		buf_release(&s->pending);
		buf_release(&s->rcpts);
		free(s);
		sink_worker_session_done(w);
		return;
	}
	s->timer = evtimer_new(w->base, sess_timer_cb, s);
	sess_bev_setup(s);
	sink_stats_connection(w->sh, w->index);
	metrics_inc(MS_CONN_ACCEPTED, 0, 0);
	log_debug("%016" PRIx64 " sink connect fd=%d", s->id, fd);
	if (delay > 0) {
		sess_arm_timer(s, delay); /* the greeting goes out when it fires */
		return;
	}
	s->flags |= F_GREETED;
	sess_reply(s, "220 %s ESMTP Heron sink", w->o->hostname);
	sess_flush(s);
}

/* ---- the transaction ---- */

static void keep_close(struct sink_session *s, bool remove)
{
	if (s->keep_fd < 0)
		return;
	close(s->keep_fd);
	s->keep_fd = -1;
	if (remove && unlink(s->keep_path) < 0 && errno != ENOENT)
		log_warn("%016" PRIx64 " sink keep unlink %s", s->id, s->keep_path);
	free(s->keep_path);
	s->keep_path = NULL;
}

static void keep_discard(struct sink_session *s)
{
	keep_close(s, true);
}

static void tx_reset(struct sink_session *s)
{
	keep_discard(s);
	buf_reset(&s->rcpts);
	s->nrcpts = 0;
	s->size = 0;
	s->bdat_left = 0;
	s->bdat_last = s->bdat_used = s->too_big = s->drop = false;
	s->bdat_err = NULL;
	s->from[0] = '\0';
	if (s->state > ST_READY)
		sess_set_state(s, ST_READY);
}

static void keep_write(struct sink_session *s, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(s->keep_fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			log_warn("%016" PRIx64 " sink keep write %s", s->id, s->keep_path);
			keep_discard(s);
			return;
		}
		p += k;
		n -= (size_t)k;
	}
}

/* Opens DIR/tmp/NAME for a Maildir copy and writes the envelope as header fields. */
static void keep_open(struct sink_session *s)
{
	struct sink_worker *w = s->w;
	struct buf env;

	if (w->o->keep_dir == NULL)
		return;
	s->keep_path = xasprintf("%s/tmp/%" PRId64 ".%d_%u_%" PRIu64 ".heron-sink", w->o->keep_dir,
				 clock_wall_ms() / 1000, (int)getpid(), w->index, ++w->keep_seq);
	s->keep_fd = open(s->keep_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->keep_fd < 0) {
		log_warn("%016" PRIx64 " sink keep open %s", s->id, s->keep_path);
		free(s->keep_path);
		s->keep_path = NULL;
		return;
	}
	buf_init(&env, 256, BUF_INPUT_BOUNDED); /* the envelope: max_recipients addresses */
	buf_printf(&env, "Return-Path: <%s>\r\n", s->from);
	for (size_t off = 0; off < s->rcpts.len; off += strlen(s->rcpts.data + off) + 1)
		buf_printf(&env, "Delivered-To: %s\r\n", s->rcpts.data + off);
	keep_write(s, env.data, env.len);
	buf_release(&env);
}

/* Moves the kept copy from tmp/ to new/. */
static void keep_deliver(struct sink_session *s)
{
	char *dst;

	if (s->keep_fd < 0)
		return;
	dst = xasprintf("%s/new/%s", s->w->o->keep_dir, strrchr(s->keep_path, '/') + 1);
	if (rename(s->keep_path, dst) < 0) {
		log_warn("%016" PRIx64 " sink keep rename %s", s->id, dst);
		keep_close(s, true);
	} else {
		keep_close(s, false);
	}
	free(dst);
}

static void tx_content(void *ctx, const char *p, size_t n)
{
	struct sink_session *s = ctx;

	s->size += n;
	if (s->size > s->w->o->max_message_size) {
		s->too_big = true;
		keep_discard(s);
		return;
	}
	if (s->hdr.in_headers)
		sink_hdr_feed(&s->hdr, p, n);
	if (s->keep_fd >= 0)
		keep_write(s, p, n);
}

/* Starts the content of a message (DATA, or the first BDAT). */
static void tx_content_start(struct sink_session *s)
{
	s->size = 0;
	s->too_big = false;
	sink_dot_init(&s->dot);
	sink_hdr_init(&s->hdr);
	s->drop = sink_fault_hit(sess_faults(s), FAULT_DROP_IN_DATA);
	keep_open(s);
}

/* The whole message is in: refuse it, or count it, record it and say 250. */
static void tx_finish(struct sink_session *s)
{
	struct sink_worker *w = s->w;
	enum sink_verdict v;
	struct sink_record r = { 0 };
	bool stamped;

	sink_hdr_finish(&s->hdr);
	if (s->too_big) {
		sess_reply(s, "552 5.3.4 Message too big (over %" PRIu64 " bytes)",
			   w->o->max_message_size);
		tx_reset(s);
		return;
	}
	v = sink_fault_draw(sess_faults(s), FAULT_DATA_4XX, FAULT_DATA_5XX);
	if (v != VERDICT_OK) {
		sink_stats_event(w->sh, w->index, SINK_COUNTER(rejected));
		if (v == VERDICT_4XX)
			sess_reply(s, "451 4.3.0 Fault injected: message deferred");
		else
			sess_reply(s, "554 5.6.0 Fault injected: message refused");
		tx_reset(s);
		return;
	}
	r.arrival_ms = clock_wall_ms();
	stamped = sink_hdr_sent(&s->hdr, &r.sent_ms);
	if (!stamped)
		r.sent_ms = 0;
	r.id = sink_hdr_id(&s->hdr, &r.id_len);
	r.rcpts = s->rcpts.data;
	r.rcpts_len = s->rcpts.len;
	r.nrcpts = s->nrcpts;
	keep_deliver(s);
	sink_stats_message(w->sh, w->index, s->size, stamped, &r);
	log_debug("%016" PRIx64 " sink message size=%" PRIu64 " rcpts=%u stamped=%d", s->id,
		  s->size, s->nrcpts, stamped);
	sess_reply(s, "250 2.0.0 Ok: queued as %016" PRIx64 "%08" PRIx64, s->id, r.seq);
	tx_reset(s);
}

/* ---- replies ---- */

static void sess_reply(struct sink_session *s, const char *fmt, ...)
{
	uint32_t delay = sink_fault_get(sess_faults(s), FAULT_DELAY_MS);
	va_list ap;

	va_start(ap, fmt);
	if (delay == 0) {
		buf_vprintf(&s->reply, fmt, ap);
		buf_puts(&s->reply, "\r\n");
		if (s->reply.len > SESS_REPLY_FLUSH)
			sess_flush(s);
	} else {
		/* held back; the next command waits for it (latency per reply) */
		buf_vprintf(&s->pending, fmt, ap);
		buf_puts(&s->pending, "\r\n");
		if (!(s->flags & F_PAUSED))
			sess_arm_timer(s, delay);
	}
	va_end(ap);
}

/* Whether everything written has left for the socket (TLS: the layer below too). */
static bool sess_flushed(struct sink_session *s)
{
	struct bufferevent *under = bufferevent_get_underlying(s->bev);

	return evbuffer_get_length(bufferevent_get_output(s->bev)) == 0 && s->pending.len == 0 &&
	       s->reply.len == 0 &&
	       (under == NULL || evbuffer_get_length(bufferevent_get_output(under)) == 0);
}

/* Frees a closing session once its last reply is out; false when it is gone. */
static bool sess_close_if_flushed(struct sink_session *s)
{
	struct timeval tv = { 0, 10000 };

	if (s->flags & F_PAUSED)
		return true;
	if (sess_flushed(s) || s->flush_tries > 200) {
		sess_free(s);
		return false;
	}
	if (evbuffer_get_length(bufferevent_get_output(s->bev)) == 0) {
		/* only TLS records below are left: look again shortly */
		s->flags |= F_FLUSHWAIT;
		s->flush_tries++;
		evtimer_add(s->timer, &tv);
	}
	return true;
}

/* Writes the gathered replies: straight to the socket when nothing is queued before them
   (no write event to arm and disarm per reply), else behind the queue. */
static void sess_flush(struct sink_session *s)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);

	if (s->reply.len == 0)
		return;
	if (!(s->flags & F_TLS) && evbuffer_get_length(out) == 0) {
		ssize_t n = send(bufferevent_getfd(s->bev), s->reply.data, s->reply.len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0)
			buf_consume(&s->reply, (size_t)n);
	}
	/* a partial write or an error: the bufferevent finishes it or reports the error */
	if (s->reply.len > 0)
		evbuffer_add(out, s->reply.data, s->reply.len);
	buf_reset(&s->reply);
}

static void sess_timer_cb(evutil_socket_t fd, short what, void *ctx)
{
	struct sink_session *s = ctx;

	if (s->flags & F_FLUSHWAIT) {
		s->flags &= ~F_FLUSHWAIT;
		sess_close_if_flushed(s);
		return;
	}
	s->flags &= ~F_PAUSED;
	if (!(s->flags & F_GREETED)) {
		s->flags |= F_GREETED;
		sess_reply(s, "220 %s ESMTP Heron sink", s->w->o->hostname);
		if (s->flags & F_PAUSED)
			return;
	}
	if (s->pending.len > 0) {
		buf_append(&s->reply, s->pending.data, s->pending.len);
		buf_reset(&s->pending);
	}
	if (!(s->flags & F_CLOSING) && !sess_process(s))
		return;
	sess_flush(s);
	if (s->flags & F_CLOSING)
		sess_close_if_flushed(s);
}

/* ---- commands ---- */

static void cmd_ehlo(struct sink_session *s, const char *arg, size_t len)
{
	const struct sink_opts *o = s->w->o;
	bool tls = s->w->tls != NULL && !(s->flags & F_TLS);

	tx_reset(s);
	sess_set_state(s, ST_READY);
	sess_reply(s,
		   "250-%s\r\n250-PIPELINING\r\n250-SIZE %" PRIu64 "\r\n250-8BITMIME\r\n"
		   "250-CHUNKING\r\n%s250-ENHANCEDSTATUSCODES\r\n250 SMTPUTF8",
		   o->hostname, o->max_message_size, tls ? "250-STARTTLS\r\n" : "");
}

static void cmd_helo(struct sink_session *s, const char *arg, size_t len)
{
	tx_reset(s);
	sess_set_state(s, ST_READY);
	sess_reply(s, "250 %s", s->w->o->hostname);
}

/* Parses the "<path>" at the start of p (common/mailaddr: RFC 5321 syntax and limits) into
   addr as "local@domain" ("" for "<>"). Returns the bytes used, or 0 when malformed. */
static size_t parse_path(const char *p, size_t len, unsigned opts, char *addr, size_t size)
{
	struct mailaddr a;
	const char *why;
	size_t used;

	if (mailaddr_parse_path(p, len, opts | MAILADDR_ALLOW_UTF8, &a, &used, &why) < 0 ||
	    mailaddr_format(&a, addr, size) < 0)
		return 0;
	return used;
}

/* Whether *arg starts with prefix (any case); then *arg moves past it and the spaces after. */
static bool after_prefix(const char **arg, size_t *len, const char *prefix)
{
	size_t n = strlen(prefix);

	if (!str_caseprefix(*arg, *len, prefix))
		return false;
	*arg += n, *len -= n;
	while (*len > 0 && **arg == ' ')
		(*arg)++, (*len)--;
	return true;
}

/* Checks the ESMTP parameters after a path; NULL when all are fine, else the reply. */
static const char *check_params(struct sink_session *s, const char *p, size_t len, bool mail)
{
	struct str_view rest = { p, len }, f;
	uint64_t size;

	while (str_split_ws(&rest, &f)) {
		if (mail && str_caseprefix(f.p, f.len, "SIZE=")) {
			if (str_to_u64(f.p + 5, f.len - 5, UINT64_MAX, &size) < 0)
				return "501 5.5.4 Bad SIZE parameter";
			if (size > s->w->o->max_message_size)
				return "552 5.3.4 Message size exceeds the limit";
		} else if (mail && str_caseprefix(f.p, f.len, "BODY=")) {
			if (!str_caseeq(f.p + 5, f.len - 5, "7BIT", 4) &&
			    !str_caseeq(f.p + 5, f.len - 5, "8BITMIME", 8))
				return "501 5.5.4 Unknown BODY type";
		} else if (mail && str_caseeq(f.p, f.len, "SMTPUTF8", 8)) {
			continue;
		} else {
			return "555 5.5.4 Unsupported parameter";
		}
	}
	return NULL;
}

static void cmd_mail(struct sink_session *s, const char *arg, size_t len)
{
	size_t used;
	const char *err;
	enum sink_verdict v;

	if (s->state == ST_FRESH)
		return sess_reply(s, "503 5.5.1 Say EHLO first");
	if (s->state != ST_READY)
		return sess_reply(s, "503 5.5.1 Nested MAIL command");
	if (!after_prefix(&arg, &len, "FROM:"))
		return sess_reply(s, "501 5.5.4 Syntax: MAIL FROM:<address>");
	if ((used = parse_path(arg, len, MAILADDR_ALLOW_NULL, s->from, sizeof(s->from))) == 0)
		return sess_reply(s, "501 5.1.7 Bad sender address syntax");
	if ((err = check_params(s, arg + used, len - used, true)) != NULL)
		return sess_reply(s, "%s", err);
	v = sink_fault_draw(sess_faults(s), FAULT_MAIL_4XX, FAULT_MAIL_5XX);
	if (v != VERDICT_OK) {
		sink_stats_event(s->w->sh, s->w->index, SINK_COUNTER(rejected));
		s->from[0] = '\0';
		if (v == VERDICT_4XX)
			return sess_reply(s, "451 4.3.0 Fault injected: try again later");
		return sess_reply(s, "550 5.7.1 Fault injected: sender refused");
	}
	sess_set_state(s, ST_MAIL);
	sess_reply(s, "250 2.1.0 Ok");
}

static void cmd_rcpt(struct sink_session *s, const char *arg, size_t len)
{
	char addr[MAILADDR_TEXT_MAX + 1];
	size_t used;
	enum sink_verdict v;

	if (s->state != ST_MAIL && s->state != ST_RCPT)
		return sess_reply(s, "503 5.5.1 Need MAIL command");
	if (!after_prefix(&arg, &len, "TO:"))
		return sess_reply(s, "501 5.5.4 Syntax: RCPT TO:<address>");
	if ((used = parse_path(arg, len, 0, addr, sizeof(addr))) == 0)
		return sess_reply(s, "501 5.1.3 Bad recipient address syntax");
	if (check_params(s, arg + used, len - used, false) != NULL)
		return sess_reply(s, "555 5.5.4 Unsupported parameter");
	if (s->nrcpts >= s->w->o->max_recipients)
		return sess_reply(s, "452 4.5.3 Too many recipients");
	v = sink_fault_draw(sess_faults(s), FAULT_RCPT_4XX, FAULT_RCPT_5XX);
	if (v != VERDICT_OK) {
		sink_stats_event(s->w->sh, s->w->index, SINK_COUNTER(rejected));
		if (v == VERDICT_4XX)
			return sess_reply(s, "451 4.3.0 Fault injected: try again later");
		return sess_reply(s, "550 5.1.1 Fault injected: recipient refused");
	}
	buf_append(&s->rcpts, addr, strlen(addr) + 1);
	s->nrcpts++;
	sess_set_state(s, ST_RCPT);
	sess_reply(s, "250 2.1.5 Ok");
}

static void cmd_data(struct sink_session *s, const char *arg, size_t len)
{
	if (s->state == ST_MAIL)
		return sess_reply(s, "554 5.5.1 No valid recipients");
	if (s->state != ST_RCPT || s->bdat_used)
		return sess_reply(s, "503 5.5.1 Need MAIL and RCPT commands");
	tx_content_start(s);
	sess_set_state(s, ST_DATA);
	sess_reply(s, "354 End data with <CR><LF>.<CR><LF>");
}

static void cmd_bdat(struct sink_session *s, const char *arg, size_t len)
{
	struct str_view rest = { arg, len }, f;
	uint64_t n;

	if (!str_split_ws(&rest, &f) || str_to_u64(f.p, f.len, UINT64_MAX, &n) < 0) {
		/* the chunk that follows cannot be delimited: give up on the connection */
		sess_reply(s, "501 5.5.4 Syntax: BDAT size [LAST]; closing");
		s->flags |= F_CLOSING;
		return;
	}
	s->bdat_last = str_split_ws(&rest, &f);
	if ((s->bdat_last && !str_caseeq(f.p, f.len, "LAST", 4)) || str_split_ws(&rest, &f)) {
		sess_reply(s, "501 5.5.4 Syntax: BDAT size [LAST]; closing");
		s->flags |= F_CLOSING;
		return;
	}
	/* out of sequence: read the chunk, then refuse it */
	if (s->state == ST_MAIL)
		s->bdat_err = "554 5.5.1 No valid recipients";
	else if (s->state != ST_RCPT)
		s->bdat_err = "503 5.5.1 Need MAIL and RCPT commands";
	else if (!s->bdat_used)
		tx_content_start(s);
	if (s->bdat_err == NULL)
		s->bdat_used = true;
	s->bdat_prev = s->state;
	s->bdat_left = n;
	sess_set_state(s, ST_BDAT);
}

/* A BDAT chunk has been read completely. */
static void bdat_chunk_done(struct sink_session *s)
{
	if (s->bdat_err != NULL) {
		const char *err = s->bdat_err;

		s->bdat_err = NULL;
		sess_set_state(s, s->bdat_prev);
		return sess_reply(s, "%s", err);
	}
	sess_set_state(s, ST_RCPT);
	if (s->bdat_last)
		return tx_finish(s);
	if (s->too_big) {
		sess_reply(s, "552 5.3.4 Message too big (over %" PRIu64 " bytes)",
			   s->w->o->max_message_size);
		return tx_reset(s);
	}
	sess_reply(s, "250 2.0.0 %" PRIu64 " bytes received", s->size);
}

static void cmd_rset(struct sink_session *s, const char *arg, size_t len)
{
	tx_reset(s);
	sess_reply(s, "250 2.0.0 Ok");
}

static void cmd_noop(struct sink_session *s, const char *arg, size_t len)
{
	sess_reply(s, "250 2.0.0 Ok");
}

static void cmd_vrfy(struct sink_session *s, const char *arg, size_t len)
{
	sess_reply(s, "252 2.5.0 Cannot VRFY, but will accept the message");
}

static void cmd_quit(struct sink_session *s, const char *arg, size_t len)
{
	sess_reply(s, "221 2.0.0 Bye");
	s->flags |= F_CLOSING;
}

static void cmd_starttls(struct sink_session *s, const char *arg, size_t len)
{
	struct bufferevent *tls;

	if (s->w->tls == NULL)
		return sess_reply(s, "454 4.7.0 TLS not available");
	if (s->flags & F_TLS)
		return sess_reply(s, "503 5.5.1 TLS already active");
	/* the reply goes out in the clear before the handshake, never delayed; anything
	   pipelined after STARTTLS came in the clear and is thrown away */
	buf_puts(&s->reply, "220 2.0.0 Ready to start TLS\r\n");
	sess_flush(s);
	tls = tls_starttls_server(s->bev, s->w->tls, NULL);
	if (tls == NULL) {
		log_warnx("%016" PRIx64 " sink starttls setup failed", s->id);
		s->flags |= F_CLOSING;
		return;
	}
	s->bev = tls;
	s->flags |= F_TLS;
	line_reader_reset(&s->lr);
	tx_reset(s);
	sess_set_state(s, ST_FRESH);
	sess_bev_setup(s);
	sink_stats_event(s->w->sh, s->w->index, SINK_COUNTER(tls));
	metrics_tls_handshake(s->bev);
}

/* ---- input ---- */

static void sess_dispatch(struct sink_session *s, const char *line, size_t len)
{
	struct str_view rest = { line, len }, verb;

	if (!str_split_ws(&rest, &verb))
		return sess_reply(s, "500 5.5.2 Empty command");
	rest = str_trim(rest);
	for (size_t i = 0; i < sizeof(sess_cmds) / sizeof(sess_cmds[0]); i++) {
		const struct sess_cmd *c = &sess_cmds[i];

		if (!str_caseeq(verb.p, verb.len, c->verb, strlen(c->verb)))
			continue;
		if (c->arg == ARG_NONE && rest.len > 0)
			return sess_reply(s, "501 5.5.4 %s takes no arguments", c->verb);
		if (c->arg == ARG_NEED && rest.len == 0)
			return sess_reply(s, "501 5.5.4 %s needs an argument", c->verb);
		return c->fn(s, rest.p, rest.len);
	}
	sess_reply(s, "500 5.5.1 Unknown command");
}

/* Handles one command line if a whole one is buffered; false when more input is needed. */
static bool sess_command(struct sink_session *s, struct evbuffer *in)
{
	char line[SINK_LINE_MAX + 1];
	struct line l;
	int rc = line_peek(&s->lr, in, &l);

	if (rc == 0)
		return false;
	if (rc < 0) {
		sess_reply(s, "500 5.5.2 Line too long");
		return true;
	}
	/* a copy: a handler (STARTTLS) may replace the connection's buffers */
	memcpy(line, l.p, l.len);
	line_drain(in, &l);
	if (!str_is_safe_line(line, l.len))
		sess_reply(s, "500 5.5.2 Bad characters in command");
	else
		sess_dispatch(s, line, l.len);
	return true;
}

/* Passes buffered message content through fn (DATA or BDAT); returns bytes consumed. */
static size_t sess_body(struct sink_session *s, struct evbuffer *in, bool *done_r)
{
	struct evbuffer_iovec v[SESS_IOV];
	int nv = evbuffer_peek(in, -1, NULL, v, SESS_IOV);
	size_t used = 0;

	*done_r = false;
	for (int i = 0; i < nv && !*done_r; i++) {
		size_t len = v[i].iov_len;

		if (s->state == ST_DATA) {
			used += sink_dot_feed(&s->dot, v[i].iov_base, len, done_r, tx_content, s);
			continue;
		}
		if (len > s->bdat_left)
			len = (size_t)s->bdat_left;
		if (s->bdat_err == NULL)
			tx_content(s, v[i].iov_base, len);
		s->bdat_left -= len;
		used += len;
		*done_r = s->bdat_left == 0;
	}
	if (nv == 0 && s->state == ST_BDAT && s->bdat_left == 0)
		*done_r = true;
	evbuffer_drain(in, used);
	line_reader_reset(&s->lr);
	return used;
}

/* Reads as much buffered input as the state allows; false when the session is gone. */
static bool sess_process(struct sink_session *s)
{
	for (;;) {
		struct evbuffer *in = bufferevent_get_input(s->bev);
		bool done;

		if (s->flags & (F_PAUSED | F_CLOSING) || !(s->flags & F_GREETED))
			return true;
		if (evbuffer_get_length(bufferevent_get_output(s->bev)) > SESS_OUTPUT_MAX)
			return true; /* resumed by the write callback */
		if (s->state == ST_DATA || s->state == ST_BDAT) {
			if (s->drop && evbuffer_get_length(in) > 0) {
				sink_stats_event(s->w->sh, s->w->index, SINK_COUNTER(dropped));
				log_debug("%016" PRIx64 " sink fault drop in data", s->id);
				sess_free(s);
				return false;
			}
			sess_body(s, in, &done);
			if (!done)
				return true;
			if (s->state == ST_DATA) {
				sess_set_state(s, ST_RCPT);
				tx_finish(s);
			} else {
				bdat_chunk_done(s);
			}
			continue;
		}
		if (!sess_command(s, in))
			return true;
	}
}

/* Processes what came in, sends the replies, closes when the session ended. */
static void sess_run(struct sink_session *s)
{
	if (!sess_process(s))
		return;
	sess_flush(s);
	if (s->flags & F_CLOSING)
		sess_close_if_flushed(s);
}

static void sess_read_cb(struct bufferevent *bev, void *ctx)
{
	struct sink_session *s = ctx;

	if (s->flags & (F_PAUSED | F_CLOSING) || !(s->flags & F_GREETED))
		return;
	sess_run(s);
}

static void sess_write_cb(struct bufferevent *bev, void *ctx)
{
	struct sink_session *s = ctx;

	if (s->flags & F_CLOSING) {
		if (!(s->flags & F_FLUSHWAIT))
			sess_close_if_flushed(s);
		return;
	}
	sess_run(s);
}

static void sess_event_cb(struct bufferevent *bev, short what, void *ctx)
{
	struct sink_session *s = ctx;

	if (what & BEV_EVENT_TIMEOUT && what & BEV_EVENT_READING && !(s->flags & F_CLOSING)) {
		bufferevent_write(s->bev, "421 4.4.2 Timeout, closing\r\n", 28);
		s->flags |= F_CLOSING;
		bufferevent_disable(s->bev, EV_READ);
		return;
	}
	if (what & BEV_EVENT_CONNECTED)
		return;
	log_debug("%016" PRIx64 " sink disconnect events=0x%x", s->id, (unsigned)what);
	sess_free(s);
}

static void sess_free(struct sink_session *s)
{
	struct sink_worker *w = s->w;

	keep_discard(s);
	if (s->timer != NULL)
		event_free(s->timer);
	bufferevent_free(s->bev);
	buf_release(&s->reply);
	buf_release(&s->pending);
	buf_release(&s->rcpts);
	free(s);
	sink_worker_session_done(w);
}

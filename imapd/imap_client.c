/* imap_client.c — owns a connection: input fed to the parser, literals (inline or streamed to
 * an APPEND blob), output with back-pressure (commands and body streams pause above
 * IMAP_OUT_HIGH and resume below IMAP_OUT_LOW) written once per loop pass (flush_cb), states,
 * timeouts, STARTTLS, close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

static void client_process(struct imap_client *c);
static void client_continue(struct imap_client *c);
static void client_free(struct imap_client *c);
static void client_set_callbacks(struct imap_client *c);
static void timer_arm(struct imap_client *c);

static const char *state_name(enum imap_state s)
{
	switch (s) {
	case IMAP_ST_NOTAUTH:
		return "notauth";
	case IMAP_ST_AUTH:
		return "auth";
	case IMAP_ST_SELECTED:
		return "selected";
	default:
		return "logout";
	}
}

void imap_unauth_put(struct imap_client *c)
{
	if (!c->unauth_counted)
		return;
	c->unauth_counted = false;
	net_ipcount_dec(c->srv->unauth, (struct sockaddr *)&c->sa);
}

void imap_client_set_state(struct imap_client *c, enum imap_state next)
{
	bool logged_in = c->state == IMAP_ST_NOTAUTH && next != IMAP_ST_NOTAUTH;
	bool logged_out = c->state != IMAP_ST_NOTAUTH && next == IMAP_ST_NOTAUTH;

	if (next != IMAP_ST_NOTAUTH)
		imap_unauth_put(c);
	log_debug("%016" PRIx64 " imap state %s -> %s", c->id, state_name(c->state),
		  state_name(next));
	c->state = next;
	if (logged_out) /* UNAUTHENTICATE: a new login_timeout from now */
		c->login_deadline = clock_mono_ms() + c->srv->login_timeout_ms;
	if ((logged_in || logged_out) && !(c->flags & IMAP_CF_CLOSING))
		timer_arm(c); /* idle time from now, or the new login deadline */
}

struct evbuffer *imap_out(struct imap_client *c)
{
	return bufferevent_get_output(c->bev);
}

bool imap_out_full(struct imap_client *c)
{
	return evbuffer_get_length(imap_out(c)) >= IMAP_OUT_HIGH;
}

/* Before login the timeout is a deadline from the connect (input does not move it: a
   client sending a byte a second is still out at login_timeout); after it, idle time. */
static void timer_arm(struct imap_client *c)
{
	int64_t ms = c->srv->idle_timeout_ms;
	struct timeval tv;

	if (c->flags & IMAP_CF_PROXY)
		return; /* the store host keeps the session's idle time */
	if (c->state == IMAP_ST_NOTAUTH) {
		ms = c->login_deadline - clock_mono_ms();
		ms = ms > 0 ? ms : 0;
	}
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_client *c = arg;

	if (c->flags & IMAP_CF_CLOSING) {
		if (++c->close_ticks > 200) /* 10 s for the last bytes to leave */
			client_free(c);
		else
			client_continue(c);
		return;
	}
	if (c->state == IMAP_ST_NOTAUTH) {
		imap_printf(c, "* BYE Autologout; not logged in in time\r\n");
		imap_client_close(c, "login timeout");
		return;
	}
	imap_printf(c, "* BYE Autologout; idle for too long\r\n");
	imap_client_close(c, "timeout");
}

void imap_client_resume(struct imap_client *c)
{
	event_active(c->defer, EV_TIMEOUT, 0);
}

void imap_client_close(struct imap_client *c, const char *why)
{
	if (c->flags & IMAP_CF_CLOSING)
		return;
	log_info("%016" PRIx64 " imap close user=%s reason=\"%s\"", c->id,
		 c->user != NULL ? c->user : "-", why);
	c->flags |= IMAP_CF_CLOSING;
	imap_user_put(c); /* before the last reply leaves: a new login may follow it at once */
	bufferevent_disable(c->bev, EV_READ);
	imap_client_resume(c);
}

/* The stream cannot go on (the file shrank or failed): the literal size was promised, so the
   connection cannot stay in sync. */
static void stream_broken(struct imap_client *c)
{
	log_warn("%016" PRIx64 " imap stream read", c->id);
	imap_client_close(c, "message file read error");
	c->stream.left = 0;
	c->stream.emit = 0;
}

/* Reads up to want file bytes to dst; the number read, 0 after stream_broken. */
static size_t stream_read(struct imap_client *c, char *dst, size_t want)
{
	struct imap_stream *s = &c->stream;
	ssize_t n = pread(s->fd, dst, want, (off_t)s->off);

	if (n <= 0) {
		stream_broken(c);
		return 0;
	}
	s->off += (uint64_t)n;
	s->left -= (uint64_t)n;
	return (size_t)n;
}

/* Keeps the decoded bytes of p[0..n) that fall in [skip, skip + emit); returns how many,
   moved to the front of p. */
static size_t stream_window(struct imap_stream *s, char *p, size_t n)
{
	size_t drop = s->skip < n ? (size_t)s->skip : n;

	s->skip -= drop;
	memmove(p, p + drop, n - drop);
	n -= drop;
	if (n > s->emit)
		n = (size_t)s->emit;
	s->emit -= n;
	return n;
}

/* One chunk of a decoded stream. The file bytes are read CTE_DECODE_LEAD bytes into the
   reserved space and decoded to its start: a decoder writes at most that many bytes more
   than it has read (held quoted-printable escapes and white space), so the output never
   overtakes unread input. */
static void stream_decode_chunk(struct imap_client *c)
{
	struct imap_stream *s = &c->stream;
	struct evbuffer_iovec v;
	size_t want = s->left < IMAP_STREAM_CHUNK ? (size_t)s->left : IMAP_STREAM_CHUNK;
	size_t n = 0;
	char *p;

	if (evbuffer_reserve_space(imap_out(c), (ev_ssize_t)(want + CTE_DECODE_LEAD), &v, 1) < 1)
		fatalx("evbuffer_reserve_space");
	p = v.iov_base;
	if (want > 0 && (n = stream_read(c, p + CTE_DECODE_LEAD, want)) == 0)
		return;
	n = cte_decode(&s->dec, p + CTE_DECODE_LEAD, n, p);
	if (s->left == 0)
		n += cte_decode_finish(&s->dec, p + n);
	v.iov_len = stream_window(s, p, n);
	evbuffer_commit_space(imap_out(c), &v, 1);
	if (s->left == 0 && s->emit > 0)
		stream_broken(c); /* fewer decoded bytes than the size pass counted */
}

/* Writes body chunks while there is room; true when the stream is done. */
static bool stream_pump(struct imap_client *c)
{
	struct imap_stream *s = &c->stream;

	while (s->decode && s->emit > 0 && !imap_out_full(c))
		stream_decode_chunk(c);
	while (!s->decode && s->left > 0 && !imap_out_full(c)) {
		struct evbuffer_iovec v;
		size_t want = s->left < IMAP_STREAM_CHUNK ? (size_t)s->left : IMAP_STREAM_CHUNK;

		if (evbuffer_reserve_space(imap_out(c), (ev_ssize_t)want, &v, 1) < 1)
			fatalx("evbuffer_reserve_space");
		v.iov_len = stream_read(c, v.iov_base, want);
		if (s->text) {
			char *p = v.iov_base, *end = p + v.iov_len;

			while ((p = memchr(p, '\0', (size_t)(end - p))) != NULL)
				*p++ = (char)0x80;
		}
		evbuffer_commit_space(imap_out(c), &v, 1);
	}
	if (s->decode ? s->emit > 0 : s->left > 0)
		return false;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->decode = false;
	return true;
}

static void stream_raw(struct imap_client *c, int fd, uint64_t off, uint64_t len, bool text)
{
	if (c->stream.fd >= 0)
		fatalx("imap: two streams at once");
	c->stream.fd = fd;
	c->stream.off = off;
	c->stream.left = len;
	c->stream.decode = false;
	c->stream.text = text;
	stream_pump(c);
}

void imap_client_stream(struct imap_client *c, int fd, uint64_t off, uint64_t len)
{
	stream_raw(c, fd, off, len, false);
}

void imap_client_stream_text(struct imap_client *c, int fd, uint64_t off, uint64_t len)
{
	stream_raw(c, fd, off, len, true);
}

void imap_client_stream_decoded(struct imap_client *c, int fd, uint64_t off, uint64_t len,
				enum cte cte, uint64_t skip, uint64_t emit)
{
	if (c->stream.fd >= 0)
		fatalx("imap: two streams at once");
	c->stream.fd = fd;
	c->stream.off = off;
	c->stream.left = len;
	c->stream.decode = true;
	c->stream.text = false;
	cte_decoder_init(&c->stream.dec, cte);
	c->stream.skip = skip;
	c->stream.emit = emit;
	stream_pump(c);
}

/* Output drained below IMAP_OUT_LOW (or a deferred run): go on with what waits. */
static void client_continue(struct imap_client *c)
{
	if (c->flags & IMAP_CF_CLOSING) {
		size_t pending;
		struct timeval tick = { 0, 50000 };

		if (c->flags & IMAP_CF_COMPRESS) /* what zlib holds goes out before the close */
			bufferevent_flush(c->bev, EV_WRITE, BEV_FLUSH);
		/* every layer's (COMPRESS over TLS: deflate, TLS, then the socket) */
		pending = evbuffer_get_length(imap_out(c));
		for (struct bufferevent *u = bufferevent_get_underlying(c->bev); u != NULL;
		     u = bufferevent_get_underlying(u))
			pending += evbuffer_get_length(bufferevent_get_output(u));

		if (pending == 0)
			client_free(c);
		else /* a TLS filter's socket may still hold bytes: look again soon */
			evtimer_add(c->timer, &tick);
		return;
	}
	if (c->flags & IMAP_CF_PROXY) {
		imap_proxy_to_client(c);
		return;
	}
	if (c->stream.fd >= 0 && !stream_pump(c))
		return;
	if (c->cmd_active && !imap_out_full(c) && c->stream.fd < 0)
		imap_cmd_run(c);
	else if (c->notify != NULL)
		imap_notify_drained(c);
	client_process(c);
}

static void defer_cb(evutil_socket_t fd, short what, void *arg)
{
	client_continue(arg);
}

/* The output of a loop pass leaves in one write. The socket's bufferevent (c->sock, the bottom
   one under the COMPRESS and STARTTLS filters) keeps EV_WRITE off while it has nothing
   waiting, so queueing a response arms nothing; sock_out_cb schedules this right after the
   callback that wrote, which writes everything queued at once (one writev) and goes on as the
   write callback would. Only bytes the kernel does not take, a write error (libevent's writer
   reports it), or a back-pressure batch (IMAP_OUT_HIGH and more: such a writer resumes on the
   write callback, never in this pass) arm EV_WRITE, as before. A response then costs no
   epoll_ctl pair (arm, disarm) and no write-ready wake-up. imaps (TLS on the socket's own
   bufferevent, no c->sock) writes through libevent as before. */
static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_client *c = arg;
	struct evbuffer *out;
	size_t len;
	int n;

	c->flush_due = false;
	if (c->sock == NULL || (c->flags & IMAP_CF_DEFUNCT))
		return;
	out = bufferevent_get_output(c->sock);
	len = evbuffer_get_length(out);
	if (len == 0)
		return;
	if (len >= IMAP_OUT_HIGH) {
		bufferevent_enable(c->sock, EV_WRITE);
		return;
	}
	/* the socket bufferevent keeps its output's front frozen outside its own writer */
	evbuffer_unfreeze(out, 1);
	n = evbuffer_write(out, bufferevent_getfd(c->sock));
	evbuffer_freeze(out, 1);
	if (n <= 0 || evbuffer_get_length(out) > 0) {
		bufferevent_enable(c->sock, EV_WRITE); /* the rest as the socket takes it */
		return;
	}
	if (bufferevent_get_enabled(c->sock) & EV_WRITE) /* left on by a filter or a backlog */
		bufferevent_disable(c->sock, EV_WRITE);
	/* drained: what the write callback does (a filter runs its own; closing looks again) */
	if (c->sock == c->bev || (c->flags & IMAP_CF_CLOSING))
		client_continue(c);
}

static void sock_out_cb(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
	struct imap_client *c = arg;

	if (info->n_added > 0 && !c->flush_due) {
		c->flush_due = true;
		event_active(c->flush, EV_TIMEOUT, 0);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct imap_client *c = arg;

	if (c->state != IMAP_ST_NOTAUTH && evbuffer_get_length(imap_out(c)) > 0)
		timer_arm(c); /* a slow reader making progress is not idle */
	client_continue(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct imap_client *c = arg;

	timer_arm(c);
	client_process(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct imap_client *c = arg;

	if (what & BEV_EVENT_CONNECTED)
		metrics_tls_handshake(bev);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		const char *proto = NULL;

		if (c->flags & IMAP_CF_TLS) {
			tls_peer_info(bev, &proto, NULL, NULL);
			if (proto == NULL)
				metrics_tls_failed();
		}
		log_info("%016" PRIx64 " imap disconnect user=%s", c->id,
			 c->user != NULL ? c->user : "-");
		client_free(c);
	}
}

static void client_set_callbacks(struct imap_client *c)
{
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, IMAP_OUT_LOW, 0);
	/* pipelined input waiting behind a running command stays bounded */
	bufferevent_setwatermark(c->bev, EV_READ, 0, c->srv->lim.line_max + 65536);
	/* the socket arms EV_WRITE in flush_cb (a new bufferevent has it on, not yet added: off
	   now, it costs no epoll_ctl); a filter needs it to pass its output down */
	if (c->bev == c->sock && evbuffer_get_length(bufferevent_get_output(c->sock)) == 0) {
		bufferevent_disable(c->sock, EV_WRITE);
		bufferevent_enable(c->sock, EV_READ);
	} else {
		bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	}
}

void imap_client_new(struct imap_server *srv, struct net_server *ns, int fd,
		     const struct sockaddr *sa, socklen_t salen, bool tls)
{
	struct imap_client *c = xcalloc(1, sizeof(*c));

	c->srv = srv;
	c->ns = ns;
	memcpy(&c->sa, sa, salen < sizeof(c->sa) ? salen : sizeof(c->sa));
	c->id = log_new_id();
	c->state = IMAP_ST_NOTAUTH;
	c->login_deadline = clock_mono_ms() + srv->login_timeout_ms;
	c->connected = (int64_t)time(NULL);
	c->connected_us = clock_mono_us();
	metrics_inc(MS_CONN_ACCEPTED, tls, 0);
	c->unauth_counted = srv->unauth != NULL; /* the accept callback counted it */
	c->stream.fd = -1;
	net_addr_host(sa, c->addr, sizeof(c->addr));
	if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
		int one = 1;

		/* responses leave in whole writes; Nagle would hold the tail of one until the
		   client's delayed ACK (40 ms) */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (tls) {
		c->bev = tls_server_accept(srv->base, srv->tls_ctx, fd);
		c->flags |= IMAP_CF_TLS;
	} else {
		c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	}
	if (c->bev == NULL)
		fatalx("bufferevent_socket_new failed");
	c->parser = imap_parser_new(&srv->lim);
	c->timer = evtimer_new(srv->base, timer_cb, c);
	c->defer = event_new(srv->base, -1, 0, defer_cb, c);
	c->flush = event_new(srv->base, -1, 0, flush_cb, c);
	if (!tls) {
		c->sock = c->bev;
		c->sock_cb = evbuffer_add_cb(bufferevent_get_output(c->sock), sock_out_cb, c);
		if (c->sock_cb == NULL)
			fatalx("evbuffer_add_cb failed");
	}
	c->next = srv->clients;
	if (srv->clients != NULL)
		srv->clients->prev = c;
	srv->clients = c;
	srv->nclients++;
	client_set_callbacks(c);
	timer_arm(c);
	log_info("%016" PRIx64 " imap connect from=%s tls=%s", c->id, c->addr, tls ? "yes" : "no");
	{
		struct buf caps;

		buf_init(&caps, 256, IMAP_CAPS_MAX);
		imap_capability(c, &caps);
		imap_printf(c, "* OK [CAPABILITY %s] Heron IMAP ready\r\n", buf_cstr(&caps));
		buf_release(&caps);
	}
}

int imap_client_starttls(struct imap_client *c)
{
	struct bufferevent *tlsbev;

	if (c->srv->tls_ctx == NULL)
		return -1;
	/* bytes pipelined after STARTTLS were sent in clear: tls_starttls_server drops them */
	imap_parser_reset(c->parser);
	tlsbev = tls_starttls_server(c->bev, c->srv->tls_ctx, NULL);
	if (tlsbev == NULL)
		return -1;
	c->bev = tlsbev;
	c->flags |= IMAP_CF_TLS;
	client_set_callbacks(c);
	return 0;
}

void imap_client_rewrap(struct imap_client *c)
{
	client_set_callbacks(c);
}

void imap_server_free_client(struct imap_client *c)
{
	client_free(c);
}

static void client_free(struct imap_client *c)
{
	struct imap_server *srv = c->srv;

	if (c->ncommits > 0) {
		/* the group commit's thread reads this client: imap_commit.c frees it after */
		if (!(c->flags & IMAP_CF_DEFUNCT))
			log_info("%016" PRIx64
				 " imap client left with a write in the group commit",
				 c->id);
		c->flags |= IMAP_CF_DEFUNCT;
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
		evtimer_del(c->timer);
		event_del(c->defer);
		event_del(c->flush);
		return;
	}
	if (c->cmd_active && c->cmd.ctx_free != NULL)
		c->cmd.ctx_free(&c->cmd);
	imap_proxy_free(c);
	if (c->stream.fd >= 0)
		close(c->stream.fd);
	imap_client_append_reset(c);
	imap_view_close(c);
	imap_notify_free(c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	srv->nclients--;
	event_free(c->timer);
	event_free(c->defer);
	if (c->sock_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(c->sock), c->sock_cb);
	event_free(c->flush);
	bufferevent_free(c->bev);
	imap_parser_free(&c->parser);
	if (srv->ipcount != NULL)
		net_ipcount_dec(srv->ipcount, (struct sockaddr *)&c->sa);
	imap_unauth_put(c);
	net_server_conn_done(c->ns);
	imap_user_put(c);
	free(c->user);
	free(c->id_fwd);
	free(c);
	imap_server_client_left(srv);
}

/* A tagged (or untagged) reply to a line that never became a command. When the parser
   can no longer tell the client's commands from literal data, the connection ends. */
static void client_reject(struct imap_client *c, const char *status, const char *text)
{
	const char *tag = imap_parser_tag(c->parser);

	imap_printf(c, "%s %s %s\r\n", tag != NULL ? tag : "*", status, text);
	if (imap_parser_lost(c->parser)) {
		imap_printf(c, "* BYE Cannot skip the literal data\r\n");
		imap_client_close(c, "unskippable literal");
		return;
	}
	imap_client_count_bad(c);
}

void imap_client_count_bad(struct imap_client *c)
{
	if (++c->nbad >= c->srv->max_bad) {
		imap_printf(c, "* BYE Too many invalid commands\r\n");
		imap_client_close(c, "too many invalid commands");
	}
}

void imap_client_append_reset(struct imap_client *c)
{
	while (c->nappend > 0)
		store_blob_free(&c->append_blobs[--c->nappend]);
	c->append_nul = false;
	c->append_cat = 0;
}

/* APPEND's message literal (one of several with MULTIAPPEND): streamed into a new blob, or,
   join, onto the end of the last one (the next TEXT part of a CATENATE message). */
static void client_append_literal(struct imap_client *c, uint64_t size, bool sync, bool join)
{
	struct imap_parser *p = c->parser;
	const char *why = NULL;
	uint64_t have = join ? store_blob_size(c->append_blobs[c->nappend - 1]) : 0;

	if (c->state == IMAP_ST_NOTAUTH)
		why = "Log in first";
	else if (size > c->srv->max_append || have + size > c->srv->max_append)
		why = "[TOOBIG] Message too large";
	else if (!join && c->nappend >= IMAP_APPEND_MAX)
		why = "[LIMIT] Too many messages in one APPEND";
	else if (!join &&
		 store_blob_new(c->srv->store, c->part, &c->append_blobs[c->nappend]) != 0)
		why = "[UNAVAILABLE] Cannot store the message now";
	if (why != NULL) {
		imap_parser_literal_reject(p, why);
		imap_client_append_reset(c); /* all or none: the earlier messages go too */
		return client_reject(c, "NO", why);
	}
	if (!join)
		c->nappend++;
	c->append_left = size;
	if (c->nappend == 1)
		c->append_failed = false;
	if (sync)
		imap_printf(c, "+ Ready for literal data\r\n");
	if (size == 0)
		imap_parser_literal_streamed(p);
}

/* APPEND at a literal in a CATENATE list (RFC 4469), "... CATENATE (... TEXT {n}": the
   index of that open list in a[0..n), or 0 when the literal is not such a TEXT part. The open
   list has no span yet; its members so far are a[li + 1 .. n), all plain (no lists). */
static size_t catenate_list(const struct imap_arg *a, size_t n)
{
	size_t li, i;

	if (n < 5 || !imap_arg_atom_is(&a[0], "APPEND") || !imap_arg_atom_is(&a[n - 1], "TEXT"))
		return 0;
	for (li = n - 2; li >= 3; li--) {
		if (a[li].type == IMAP_ARG_LIST)
			break;
	}
	if (li < 3 || a[li].span != 0 || li + a[li].n != n - 1 ||
	    !imap_arg_atom_is(&a[li - 1], "CATENATE"))
		return 0;
	for (i = 2; i < li; i = (size_t)(imap_arg_next(&a[i]) - a))
		; /* the arguments before it are closed: it is at the top level */
	return i == li ? li : 0;
}

/* Whether the literal being announced is an APPEND message: a top-level argument of APPEND
   after the mailbox (of REPLACE and UID REPLACE after the message and the mailbox, RFC 8508),
   the one member of UTF8 (~{n}) (RFC 6855), or a TEXT part of CATENATE (RFC 4469; then *cat_r
   is its list's index, else 0). */
static bool literal_is_message(const struct imap_arg *a, size_t n, unsigned depth, size_t *cat_r)
{
	size_t skip = 0;

	*cat_r = depth == 1 ? catenate_list(a, n) : 0;
	if (*cat_r != 0)
		return true;

	if (n == 0) /* a literal in the command name's place (a may be NULL): not APPEND */
		return false;
	if (n >= 2 && imap_arg_atom_is(&a[0], "UID") && imap_arg_atom_is(&a[1], "REPLACE"))
		skip = 2;
	else if (n >= 1 && imap_arg_atom_is(&a[0], "REPLACE"))
		skip = 1;
	a += skip;
	n -= skip;
	if (n < 2 || (skip == 0 && !imap_arg_atom_is(&a[0], "APPEND")))
		return false;
	if (depth == 0)
		return true;
	return depth == 1 && n >= 4 && a[n - 1].type == IMAP_ARG_LIST && a[n - 1].n == 0 &&
	       imap_arg_atom_is(&a[n - 2], "UTF8");
}

/* A literal was announced: APPEND's messages are streamed into blobs, others read inline. */
static void client_literal(struct imap_client *c)
{
	struct imap_parser *p = c->parser;
	uint64_t size;
	bool sync;
	unsigned depth;
	size_t n, cat;
	const struct imap_arg *a = imap_parser_args(p, &n);

	imap_parser_literal(p, &size, &sync, &depth);
	if (literal_is_message(a, n, depth, &cat)) {
		/* the TEXT parts of one CATENATE message go into one blob, in order */
		bool join = cat != 0 && cat == c->append_cat && c->nappend > 0;

		c->append_cat = cat;
		return client_append_literal(c, size, sync, join);
	}
	/* and a SETMETADATA value (RFC 5464: value = nstring / literal8) */
	if (imap_parser_literal_binary(p) &&
	    !(depth == 1 && n >= 1 && imap_arg_atom_is(&a[0], "SETMETADATA"))) {
		imap_parser_literal_reject(p, "literal8 only for APPEND messages and annotations");
		return client_reject(
			c, "BAD",
			"literal8 (~{n}) only for APPEND messages and SETMETADATA values");
	}
	if (imap_parser_literal_accept(p) < 0)
		return client_reject(c, "BAD", imap_parser_error(p));
	if (sync)
		imap_printf(c, "+ Ready for literal data\r\n");
}

/* Moves APPEND literal bytes from the input to the blob; true when the literal is complete. */
static bool client_append_data(struct imap_client *c, struct evbuffer *in)
{
	struct store_blob *blob = c->append_blobs[c->nappend - 1];

	while (c->append_left > 0 && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		size_t n;

		evbuffer_peek(in, -1, NULL, &v, 1);
		n = v.iov_len < c->append_left ? v.iov_len : (size_t)c->append_left;
		if (!c->append_failed && store_blob_write(blob, v.iov_base, n) != 0)
			c->append_failed = true; /* keep reading; APPEND answers NO */
		if (!c->append_nul && memchr(v.iov_base, '\0', n) != NULL &&
		    !imap_parser_literal_binary(c->parser))
			c->append_nul = true;
		evbuffer_drain(in, n);
		c->append_left -= n;
	}
	if (c->append_left > 0)
		return false;
	imap_parser_literal_streamed(c->parser);
	return true;
}

/* IDLE: the only input allowed is "DONE". False when no whole line has arrived yet (the
   caller must wait for more input, not loop). */
static bool client_idle_input(struct imap_client *c, struct evbuffer *in)
{
	size_t len;
	char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);

	if (line == NULL) {
		if (evbuffer_get_length(in) > 64)
			imap_client_close(c, "IDLE: garbage");
		return false;
	}
	imap_idle_done(c, len == 4 && strncasecmp(line, "DONE", 4) == 0);
	free(line);
	return true;
}

/* AUTHENTICATE: one base64 line. False when it has not arrived yet. */
static bool client_sasl_input(struct imap_client *c, struct evbuffer *in)
{
	size_t len;
	char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);

	if (line == NULL) {
		if (evbuffer_get_length(in) > 8192)
			imap_client_close(c, "AUTHENTICATE: line too long");
		return false;
	}
	imap_auth_line(c, line, len);
	explicit_bzero(line, len);
	free(line);
	return true;
}

static void client_process(struct imap_client *c)
{
	if (c->flags & IMAP_CF_PROXY) {
		imap_proxy_from_client(c);
		return;
	}
	while (!(c->flags & IMAP_CF_CLOSING) && !imap_out_full(c)) {
		/* looked up each time: COMPRESS puts a filter in front of the connection */
		struct evbuffer *in = bufferevent_get_input(c->bev);
		struct evbuffer_iovec v;
		size_t used;
		int rc;

		if (c->append_left > 0 && !client_append_data(c, in))
			return;
		if (c->flags & IMAP_CF_SASL) {
			if (!client_sasl_input(c, in))
				return;
			continue;
		}
		if (c->flags & IMAP_CF_IDLE) {
			if (!client_idle_input(c, in))
				return;
			continue;
		}
		if (c->cmd_active || evbuffer_get_length(in) == 0)
			return;
		evbuffer_peek(in, -1, NULL, &v, 1);
		rc = imap_parser_feed(c->parser, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		switch (rc) {
		case IMAP_PARSE_DONE:
			imap_cmd_run(c);
			break;
		case IMAP_PARSE_LITERAL:
			client_literal(c);
			break;
		case IMAP_PARSE_ERROR:
			imap_client_append_reset(c);
			client_reject(c, "BAD", imap_parser_error(c->parser));
			break;
		}
	}
}

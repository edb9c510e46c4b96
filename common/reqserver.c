/* reqserver.c — owns the one-request connections of a daemon's side doors: the cap (through
 * net_server), the absolute deadline, the bounded request read, the answer and the close. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/reqserver.h"
#include "common/xmalloc.h"

struct rs_conn {
	struct reqserver *rs;
	struct rs_conn *next, *prev;
	struct bufferevent *bev;
	struct event *deadline;
	bool answered;
	bool shut; /* answered and half-closed: waiting for the client's close */
};

struct reqserver {
	struct event_base *base;
	struct net_server *ns;
	struct reqserver_opts o;
	reqserver_handler *fn;
	void *arg;
	struct rs_conn *conns;
	size_t nconns;
};

static void conn_free(struct rs_conn *k)
{
	struct reqserver *rs = k->rs;

	if (k->prev != NULL)
		k->prev->next = k->next;
	else
		rs->conns = k->next;
	if (k->next != NULL)
		k->next->prev = k->prev;
	rs->nconns--;
	event_free(k->deadline);
	bufferevent_free(k->bev);
	free(k);
	net_server_conn_done(rs->ns);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_free(arg);
}

/* The answer is out: half-close and wait for the client's close (or the deadline), reading
   and dropping what it still sends, so that a close with unread input cannot reset the
   connection before the client has read the answer. */
static void write_cb(struct bufferevent *bev, void *arg)
{
	struct rs_conn *k = arg;

	if (!k->answered || k->shut || evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return;
	k->shut = true;
	if (shutdown(bufferevent_getfd(bev), SHUT_WR) == -1)
		conn_free(k);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		conn_free(arg);
}

/* The length of the request in in (terminator included), 0 while it is incomplete. */
static size_t request_len(struct evbuffer *in, enum reqserver_end end)
{
	struct evbuffer_ptr p;

	if (end == REQSERVER_END_LINE) {
		p = evbuffer_search(in, "\n", 1, NULL);
		return p.pos < 0 ? 0 : (size_t)p.pos + 1;
	}
	/* HTTP: the header ends at an empty line (CRLF CRLF, or LF LF from lenient clients) */
	p = evbuffer_search(in, "\n", 1, NULL);
	while (p.pos >= 0) {
		char next[2];
		struct evbuffer_ptr q = p;
		ssize_t n;

		if (evbuffer_ptr_set(in, &q, 1, EVBUFFER_PTR_ADD) < 0)
			return 0;
		n = evbuffer_copyout_from(in, &q, next, 2);
		if (n >= 1 && next[0] == '\n')
			return (size_t)p.pos + 2;
		if (n == 2 && next[0] == '\r' && next[1] == '\n')
			return (size_t)p.pos + 3;
		p = evbuffer_search(in, "\n", 1, &q);
	}
	return 0;
}

static void answer(struct rs_conn *k, const char *text, size_t len)
{
	k->answered = true;
	/* read on, to drop what follows (the watermark would stop the reads) */
	bufferevent_setwatermark(k->bev, EV_READ, 0, 0);
	if (len == 0) {
		conn_free(k);
		return;
	}
	bufferevent_write(k->bev, text, len);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct rs_conn *k = arg;
	struct reqserver *rs = k->rs;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = request_len(in, rs->o.end);
	struct buf out;
	char *req;

	if (k->answered) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (len == 0 || len > rs->o.request_max) {
		if (len > 0 || evbuffer_get_length(in) >= rs->o.request_max)
			answer(k, rs->o.too_long, rs->o.too_long ? strlen(rs->o.too_long) : 0);
		return;
	}
	req = xmalloc(len + 1);
	evbuffer_remove(in, req, len);
	req[len] = '\0';
	buf_init(&out, 4096, BUF_INPUT_BOUNDED);
	rs->fn(req, len, &out, rs->arg);
	free(req);
	answer(k, out.data, out.len);
	buf_release(&out);
}

static void accept_cb(struct net_server *ns, int fd, const struct sockaddr *sa, socklen_t salen,
		      void *arg)
{
	struct reqserver *rs = arg;
	struct timeval tv = { rs->o.timeout_ms / 1000, (rs->o.timeout_ms % 1000) * 1000 };
	struct rs_conn *k;

	if (rs->o.allow != NULL && rs->o.allow->n > 0 && sa->sa_family != AF_UNIX &&
	    !conf_cidrs_match(rs->o.allow, sa)) {
		char addr[NET_ADDRSTRLEN];

		log_info("%s refuse addr=%s reason=\"not in allow\"", rs->o.name,
			 net_addr_str(sa, salen, addr, sizeof(addr)));
		net_refuse(fd, "");
		net_server_conn_done(ns);
		return;
	}
	k = xcalloc(1, sizeof(*k));
	k->rs = rs;
	k->bev = bufferevent_socket_new(rs->base, fd, BEV_OPT_CLOSE_ON_FREE);
	k->deadline = evtimer_new(rs->base, deadline_cb, k);
	if (k->bev == NULL || k->deadline == NULL)
		fatalx("%s: out of memory for a connection", rs->o.name);
	k->next = rs->conns;
	if (rs->conns != NULL)
		rs->conns->prev = k;
	rs->conns = k;
	rs->nconns++;
	evtimer_add(k->deadline, &tv);
	/* read no more than a request can be, plus one byte to tell an overlong one */
	bufferevent_setwatermark(k->bev, EV_READ, 0, rs->o.request_max + 1);
	bufferevent_setcb(k->bev, read_cb, write_cb, event_cb, k);
	bufferevent_enable(k->bev, EV_READ | EV_WRITE);
}

struct reqserver *reqserver_new(struct event_base *base, const struct net_fds *fds,
				const struct reqserver_opts *o, reqserver_handler *fn, void *arg)
{
	struct reqserver *rs = xcalloc(1, sizeof(*rs));

	rs->base = base;
	rs->o = *o;
	rs->fn = fn;
	rs->arg = arg;
	rs->ns = net_server_new(base, fds, o->max_conns, accept_cb, rs);
	return rs;
}

void reqserver_stop(struct reqserver *rs)
{
	net_server_stop(rs->ns);
}

size_t reqserver_nconns(const struct reqserver *rs)
{
	return rs->nconns;
}

void reqserver_free(struct reqserver **rsp)
{
	struct reqserver *rs = *rsp;

	if (rs == NULL)
		return;
	while (rs->conns != NULL)
		conn_free(rs->conns);
	net_server_free(&rs->ns);
	free(rs);
	*rsp = NULL;
}

/* reqserver.c — owns the one-request connections of a daemon's side doors: the cap (through
 * net_server), the absolute deadline, the bounded request read, the answer (at once or
 * deferred: answers done in other threads come back to the loop through a pipe) and the
 * close. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/reqserver.h"
#include "common/xmalloc.h"

/* The way back of deferred answers, shared by the server and the laters not yet done: the
   last of them frees it, so that a thread answering late never writes to a closed pipe. */
struct rs_chan {
	pthread_mutex_t mu;
	unsigned refs;
	bool closed; /* the server is gone: answers done now are dropped */
	int fd[2];   /* the pointers of done laters, read by the loop */
};

/* Who frees a later: the thread (reqserver_later_done) when its connection ended first or
   the server is gone; else the loop, when it reads the later from the pipe (chan_cb) or, when
   the answer could not be put in the pipe (dropped), when the connection ends (conn_free).
   k and dropped change under the chan's mutex. */
struct reqserver_later {
	struct rs_chan *chan;
	struct rs_conn *k; /* the connection awaiting it: NULL once that ended */
	bool dropped;      /* done, but not in the pipe: the connection's to free */
	char *ans;         /* the thread's, until the pointer is in the pipe */
	size_t len;
};

struct rs_conn {
	struct reqserver *rs;
	struct rs_conn *next, *prev;
	struct bufferevent *bev;
	struct event *deadline;
	struct reqserver_later *later; /* the deferred answer awaited */
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
	struct rs_conn *cur; /* whose handler runs */
	struct rs_chan *chan;
	struct event *chan_ev;
};

static void answer(struct rs_conn *k, const char *text, size_t len);
static void later_free(struct reqserver_later *l);

/* The connection ends before its later's answer was written: the later forgets it, or is
   freed here when its answer was dropped (the thread left it to the connection). */
static void conn_forget_later(struct rs_conn *k)
{
	struct reqserver_later *l = k->later;
	struct rs_chan *c = l->chan; /* rs->chan: the server's reference keeps it */
	bool dropped;

	k->later = NULL;
	pthread_mutex_lock(&c->mu);
	dropped = l->dropped;
	l->k = NULL;
	pthread_mutex_unlock(&c->mu);
	if (dropped)
		later_free(l);
}

static void conn_free(struct rs_conn *k)
{
	struct reqserver *rs = k->rs;

	if (k->later != NULL)
		conn_forget_later(k);

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

static void later_free(struct reqserver_later *l)
{
	free(l->ans);
	free(l);
}

/* Drops a reference to c; the last one frees it. */
static void chan_unref(struct rs_chan *c)
{
	bool last;

	pthread_mutex_lock(&c->mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (last) {
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
}

/* The laters done since the last call: their answers go out on their connections. */
static void chan_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reqserver_later *v[64];
	ssize_t n;

	while ((n = read(fd, v, sizeof(v))) > 0) {
		for (size_t i = 0; i < (size_t)n / sizeof(v[0]); i++) {
			struct rs_conn *k = v[i]->k;

			if (k != NULL) {
				k->later = NULL;
				answer(k, v[i]->ans, v[i]->len);
			}
			later_free(v[i]);
		}
	}
}

static void chan_open(struct reqserver *rs)
{
	struct rs_chan *c = xcalloc(1, sizeof(*c));

	if (pipe2(c->fd, O_NONBLOCK | O_CLOEXEC) == -1)
		fatal("%s: pipe for deferred answers", rs->o.name);
	pthread_mutex_init(&c->mu, NULL);
	c->refs = 1;
	rs->chan = c;
	rs->chan_ev = event_new(rs->base, c->fd[0], EV_READ | EV_PERSIST, chan_cb, rs);
	if (rs->chan_ev == NULL)
		fatalx("%s: out of memory for deferred answers", rs->o.name);
	event_add(rs->chan_ev, NULL);
}

/* The server's end: laters in the pipe are freed, the ones not done yet will drop theirs. */
static void chan_close(struct reqserver *rs)
{
	struct rs_chan *c = rs->chan;
	struct reqserver_later *l;

	if (c == NULL)
		return;
	event_free(rs->chan_ev);
	rs->chan_ev = NULL;
	pthread_mutex_lock(&c->mu);
	c->closed = true;
	while (read(c->fd[0], &l, sizeof(l)) == (ssize_t)sizeof(l))
		later_free(l);
	close(c->fd[0]);
	close(c->fd[1]);
	pthread_mutex_unlock(&c->mu);
	rs->chan = NULL;
	chan_unref(c);
}

struct reqserver_later *reqserver_defer(struct reqserver *rs)
{
	struct reqserver_later *l;

	assert(rs->cur != NULL && rs->cur->later == NULL);
	if (rs->chan == NULL)
		chan_open(rs);
	l = xcalloc(1, sizeof(*l));
	l->chan = rs->chan;
	l->k = rs->cur;
	rs->cur->later = l;
	pthread_mutex_lock(&l->chan->mu);
	l->chan->refs++;
	pthread_mutex_unlock(&l->chan->mu);
	return l;
}

void reqserver_later_done(struct reqserver_later *l, struct buf *ans)
{
	struct rs_chan *c = l->chan;
	bool sent = false, mine;

	l->ans = buf_steal(ans, &l->len);
	pthread_mutex_lock(&c->mu);
	/* a pointer is less than PIPE_BUF: written whole or not at all; the pipe holds
	   thousands, more than the connections that can wait */
	if (!c->closed)
		sent = write(c->fd[1], &l, sizeof(l)) == (ssize_t)sizeof(l);
	/* not sent with its connection still there: the connection frees it when it ends (its
	   deadline at the latest), as it still points to it */
	mine = !sent && l->k == NULL;
	if (!sent && !mine)
		l->dropped = true;
	pthread_mutex_unlock(&c->mu);
	if (mine)
		later_free(l);
	chan_unref(c);
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

	if (k->answered || k->later != NULL) {
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
	rs->cur = k;
	rs->fn(req, len, &out, rs->arg);
	rs->cur = NULL;
	free(req);
	if (k->later != NULL) /* deferred: read on, to drop what follows, as answer does */
		bufferevent_setwatermark(k->bev, EV_READ, 0, 0);
	else
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
	chan_close(rs);
	net_server_free(&rs->ns);
	free(rs);
	*rsp = NULL;
}

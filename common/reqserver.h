/* reqserver.h — a small server of one request per connection, for the side doors of a daemon
 * (the metrics endpoint, the control socket): read one request, answer it from the loop,
 * close. Everything is bounded so that a flood of slow or hostile clients costs the daemon a
 * few descriptors and nothing else:
 *   - at most max_conns connections per process: at the cap the listeners are disabled (new
 *     clients wait in the kernel's backlog, STYLE 7) and re-enabled when one ends;
 *   - the whole exchange (the request arriving, the answer leaving) has one absolute deadline,
 *     timeout_ms after the accept: a client sending a byte now and then is cut at the deadline
 *     like a silent one;
 *   - the request is at most request_max bytes up to its end (an empty line for HTTP, the
 *     first newline for a line protocol): longer ones are answered by too_long and closed;
 *   - clients outside allow (when given) are closed at once, unread.
 * The handler runs once per connection with the request's bytes and appends the whole answer
 * to out, or defers it (reqserver_defer: a long walk answered from a thread of its own);
 * nothing a client sends after its request is read. */
#ifndef HERON_REQSERVER_H
#define HERON_REQSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "common/buf.h"

struct conf_cidrs;
struct net_fds;

/* Where a request ends. */
enum reqserver_end {
	REQSERVER_END_LINE,  /* at the first LF */
	REQSERVER_END_BLANK, /* at the first empty line (LF LF or LF CR LF): an HTTP header */
};

struct reqserver_opts {
	size_t max_conns;   /* >= 1 */
	int64_t timeout_ms; /* > 0 */
	size_t request_max; /* bytes, terminator included */
	enum reqserver_end end;
	const struct conf_cidrs *allow; /* NULL or empty: every client */
	const char *too_long;           /* the answer to an overlong request (may be NULL: none) */
	const char *name;               /* for logs ("metrics", "control") */
};

/* The request is req[0..len) (the terminator included), NUL-terminated for convenience;
   append the answer to out (its ceiling is BUF_INPUT_BOUNDED: the handler bounds it). */
typedef void reqserver_handler(const char *req, size_t len, struct buf *out, void *arg);

struct reqserver;
/* A deferred answer. */
struct reqserver_later;

/* Accepts on fds (not owned). */
struct reqserver *reqserver_new(struct event_base *base, const struct net_fds *fds,
				const struct reqserver_opts *o, reqserver_handler *fn, void *arg);
/* In a handler only (on the loop): its answer comes later, by reqserver_later_done; what it
   appended to out is dropped. The connection keeps its deadline: when it closes first (the
   deadline, the client gone, reqserver_free), the answer is dropped when it comes. */
struct reqserver_later *reqserver_defer(struct reqserver *rs);
/* From any thread, once per later (which it consumes): ans is the answer (its data taken,
   *ans empty afterwards), written by the loop. May outlive the server: the answer is then
   dropped. An empty answer closes the connection unanswered. */
void reqserver_later_done(struct reqserver_later *l, struct buf *ans);
/* Stops accepting; connections in progress finish. */
void reqserver_stop(struct reqserver *rs);
/* Connections open now (tests). */
size_t reqserver_nconns(const struct reqserver *rs);
/* Closes every connection and the listeners (not the descriptors); *rsp = NULL. Deferred
   answers not yet done are dropped when they are. */
void reqserver_free(struct reqserver **rsp);

#endif

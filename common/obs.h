/* obs.h — a daemon worker's observability, wired once for every daemon: the Prometheus
 * endpoint ([metrics] IDENT_listen, bound by the master, answered by whichever worker accepts:
 * every worker renders the sum of all), the worker's control socket (control.h: who, kick,
 * metrics), and a one-second tick that copies counts kept elsewhere in the process into the
 * worker's metrics column (metrics.h).
 *
 * Both doors are reqserver.h servers, bounded in connections ([metrics] max_connections per
 * worker), time ([metrics] timeout for a whole exchange) and request size, so a flood of slow
 * clients on them never reaches the daemon's mail service: they share only the loop, and
 * the loop never waits for them.
 *
 *      master:  metrics_init(ident, defs, n, workers);
 *               obs_listen(conf_values(c)->metrics.imapd_listen, c, &fds, &err);
 *      worker:  metrics_worker_start(index);
 *               obs = obs_start(base, c, "imapd", index, &fds, &ops, srv);  ...  obs_free(&obs); */
#ifndef HERON_OBS_H
#define HERON_OBS_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>

#include "common/buf.h"
#include "common/metrics.h"

struct conf;
struct conf_addrs;
struct net_fds;
struct reqserver;

struct obs_ops {
	metrics_live_fn *live;      /* values read at scrape time; NULL: none */
	void (*publish)(void *arg); /* each second: counts kept elsewhere into the column */
	/* who: appends this worker's sessions (control_who_line with ident, worker, getpid) */
	void (*who)(struct buf *out, const char *ident, unsigned worker, void *arg);
	/* kick: closes user's sessions in this worker; returns how many */
	unsigned (*kick)(const char *user, void *arg);
	/* the daemon's own requests (mtad: queue): req[0..n) without its LF; true when it was
	   one (its answer appended to out, or to come: reqserver_defer(ctl)) */
	bool (*request)(const char *req, size_t n, struct buf *out, struct reqserver *ctl,
			void *arg);
};

/* Master: when [metrics] enabled and addrs is not empty, binds addrs into fds for the
   workers (else fds stays empty). -1 with *error_r (malloc'd) when a bind fails. */
int obs_listen(const struct conf *c, const struct conf_addrs *addrs, struct net_fds *fds,
	       char **error_r);

struct obs;
/* Worker, after metrics_worker_start: serves the metrics on fds (may be NULL or empty), the
   control socket [control] dir/IDENT.WORKER.sock when dir is set (a failure to bind it is
   logged and the worker goes on without one), and ticks ops->publish. ops is kept (a
   daemon's static table); arg is passed to each of its functions. */
struct obs *obs_start(struct event_base *base, const struct conf *c, const char *ident,
		      unsigned worker, const struct net_fds *fds, const struct obs_ops *ops,
		      void *arg);
/* The control socket's path, or NULL when the worker has none. */
const char *obs_control_path(const struct obs *o);
/* Closes both doors (the control socket's file is removed); *op = NULL; safe on NULL. */
void obs_free(struct obs **op);

/* The answers, also for programs that serve them their own way (mailload): an HTTP request
   req[0..len) for the metrics into out (status line, headers, body; HEAD, 404, 405, 400
   handled), and one control request line. */
void obs_http_answer(const char *req, size_t len, struct buf *out, metrics_live_fn *live,
		     void *arg);

#endif

/* imap_server.c — owns a worker: its set-up and tear-down (imapd_worker_init / _free, also
 * used by the fuzz harness: event base, the store handle, group committer and change watcher,
 * the directory client, TLS context), the accept callbacks (total and per-address caps,
 * counted over all workers in the shared table and refused with BYE), the drain on SIGTERM and
 * the reload on SIGHUP (config file, TLS certificate, users file). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/authguard.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "imapd/imap_server.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"
#include "store/store_event.h"

static void accept_cb(struct net_server *ns, int fd, const struct sockaddr *sa, socklen_t salen,
		      void *arg, bool tls)
{
	struct imap_server *srv = arg;

	if (srv->ipcount != NULL && !net_ipcount_inc(srv->ipcount, sa, srv->max_per_ip)) {
		char addr[NET_ADDRSTRLEN];

		log_info("imap refuse addr=%s reason=\"too many connections from address\"",
			 net_addr_str(sa, salen, addr, sizeof(addr)));
		net_refuse(fd, "* BYE Too many connections from your address\r\n");
		metrics_inc(MS_CONN_REFUSED, tls, MS_REFUSE_PER_IP);
		net_server_conn_done(ns);
		return;
	}
	if (srv->unauth != NULL && !net_ipcount_inc(srv->unauth, sa, srv->max_unauth_per_ip)) {
		char addr[NET_ADDRSTRLEN];

		log_info("imap refuse addr=%s reason=\"too many connections not logged in from "
			 "address\"",
			 net_addr_str(sa, salen, addr, sizeof(addr)));
		net_refuse(fd, "* BYE Too many connections not logged in from your address\r\n");
		metrics_inc(MS_CONN_REFUSED, tls, MS_REFUSE_UNAUTH);
		if (srv->ipcount != NULL)
			net_ipcount_dec(srv->ipcount, sa);
		net_server_conn_done(ns);
		return;
	}
	imap_client_new(srv, ns, fd, sa, salen, tls);
}

void imap_server_accept_plain(struct net_server *ns, int fd, const struct sockaddr *sa,
			      socklen_t salen, void *arg)
{
	accept_cb(ns, fd, sa, salen, arg, false);
}

static void accept_tls(struct net_server *ns, int fd, const struct sockaddr *sa, socklen_t salen,
		       void *arg)
{
	accept_cb(ns, fd, sa, salen, arg, true);
}

void imap_server_client_left(struct imap_server *srv)
{
	if (srv->draining && srv->clients == NULL)
		event_base_loopexit(srv->base, NULL);
}

static void watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_server *srv = arg;

	if (srv->watch == NULL) {
		imap_server_changed(srv, NULL); /* polling: every partition may have changed */
		return;
	}
	store_watch_drain(srv->watch, srv->watch_changed);
	imap_server_changed(srv, srv->watch_changed);
}

static void on_drain(void *arg)
{
	struct imap_server *srv = arg;

	srv->draining = true;
	imap_proxy_pool_flush(srv, "shutdown");
	if (srv->plain != NULL)
		net_server_stop(srv->plain);
	if (srv->tls != NULL)
		net_server_stop(srv->tls);
	for (struct imap_client *c = srv->clients; c != NULL; c = c->next)
		if (!c->cmd_active || (c->flags & IMAP_CF_IDLE)) {
			imap_printf(c, "* BYE Server shutting down\r\n");
			imap_client_close(c, "shutdown");
		}
	imap_server_client_left(srv);
}

/* The [imapd] limits and timeouts. */
static void server_limits(struct imap_server *srv, const struct conf *conf)
{
	const struct imapd_conf *ic = &conf_values(conf)->imapd;

	srv->allow_plaintext = ic->allow_plaintext_auth;
	srv->lim.line_max = (size_t)ic->line_max;
	srv->lim.literal_max = (size_t)ic->literal_max;
	srv->lim.depth_max = IMAP_DEPTH_MAX;
	srv->lim.items_max = IMAP_ARGS_MAX;
	srv->max_append = ic->max_append_size;
	srv->max_mailboxes = (uint64_t)ic->max_mailboxes_per_user;
	srv->max_depth = (unsigned)ic->max_mailbox_depth;
	/* a refused {n+} APPEND of any size the server would take is read and dropped */
	srv->lim.skip_max = srv->max_append > srv->lim.literal_max ? srv->max_append
								   : srv->lim.literal_max;
	srv->login_timeout_ms = ic->login_timeout_ms;
	srv->idle_timeout_ms = ic->idle_timeout_ms;
	srv->max_bad = (unsigned)ic->max_bad_commands;
	srv->max_per_ip = (unsigned)ic->max_connections_per_ip;
	srv->max_unauth_per_ip = (unsigned)ic->max_unauth_connections_per_ip;
	srv->max_per_user = (unsigned)ic->max_connections_per_user;
	if (ic->hostname != NULL && ic->hostname[0] != '\0')
		str_lcpy(srv->hostname, ic->hostname, sizeof(srv->hostname));
	else if (gethostname(srv->hostname, sizeof(srv->hostname) - 1) != 0)
		srv->hostname[0] = '\0';
}

/* SIGHUP: the config file again (the [imapd] limits, timeouts and allow_plaintext_auth for
   the sessions from now on; the TLS certificate for new connections; the proxy's TLS client
   context, its CA file read again, for the proxy logins from now on; the master reports what
   waits for a restart), then the users file. A file with an error changes nothing. */
static void on_reload(void *arg)
{
	struct imap_server *srv = arg;
	struct conf *c = srv->conf_path != NULL
				 ? daemon_conf_reload(srv->conf_path, "imapd worker")
				 : NULL;
	char *error = NULL;

	if (c != NULL) {
		SSL_CTX *ctx = srv->tls_ctx;

		if (tls_server_ctx_reload(&ctx, c, "imapd worker")) {
			srv->tls_ctx = ctx;
			srv->tls_ctx_owned = true;
		}
		server_limits(srv, c);
		if (srv->auth != NULL)
			ldapauth_reload_ttls(srv->auth, c);
		imap_proxy_pool_flush(srv, "config reloaded"); /* dialed under the old one */
		srv->conf = c;
		imap_proxy_reload(srv);
		conf_free(&srv->reloaded);
		srv->reloaded = c;
		log_info("imapd worker %u config reloaded", srv->worker);
	}
	if (srv->auth != NULL && ldapauth_reload(srv->auth, &error) < 0) {
		log_warnx("imapd: reload users: %s", error);
		free(error);
	}
}

static void server_watch_setup(struct imap_server *srv)
{
	struct timeval one = { 1, 0 };

	srv->notify_seq = xcalloc(store_partitions(srv->store), sizeof(*srv->notify_seq));
	srv->notify_known = xcalloc(store_partitions(srv->store), sizeof(*srv->notify_known));
	if (store_watch_new(srv->store, &srv->watch) == 0) {
		srv->watch_changed = xcalloc(store_partitions(srv->store), sizeof(bool));
		for (unsigned p = 0; p < store_partitions(srv->store); p++)
			store_watch_partition(srv->watch, p);
		srv->watch_ev = event_new(srv->base, store_watch_fd(srv->watch),
					  EV_READ | EV_PERSIST, watch_cb, srv);
		event_add(srv->watch_ev, NULL);
		return;
	}
	log_warnx("imapd: store change notification unavailable; polling each second");
	srv->poll_ev = event_new(srv->base, -1, EV_PERSIST, watch_cb, srv);
	event_add(srv->poll_ev, &one);
}

/* A listener set whose cap (of all workers) is refused with BYE. */
static struct net_server *server_net_new(struct imap_server *srv, const struct net_fds *fds,
					 size_t cap, net_accept_cb *cb)
{
	struct net_server *ns = net_server_new(srv->base, fds, cap, cb, srv);

	net_server_set_refusal(ns, "imap", "* BYE Too many connections\r\n");
	net_server_share(ns, srv->shared, srv->worker);
	return ns;
}

/* Flushes the group committer (nothing is left in it: imapd_worker_free), logs how
   many writes shared how many commits, and frees it. */
static void server_gc_close(struct imap_server *srv)
{
	uint64_t ops, commits;

	store_gc_flush(srv->gc);
	store_gc_stats(srv->gc, &ops, &commits);
	log_info("imapd: group commit writes=%" PRIu64 " commits=%" PRIu64, ops, commits);
	store_gc_free(&srv->gc);
	if (srv->gc_ev != NULL)
		event_free(srv->gc_ev);
	srv->gc_ev = NULL;
}

void imapd_worker_free(struct imap_server *srv)
{
	for (struct imap_client *c = srv->clients; c != NULL; c = c->next) {
		imap_client_close(c, "exit");
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	}
	/* the writes in the group commit come back first: their clients are then free to go */
	for (int i = 0; i < 16 && srv->clients != NULL; i++)
		store_gc_flush(srv->gc);
	while (srv->clients != NULL) {
		struct imap_client *c = srv->clients;

		if (c->ncommits > 0)
			fatalx("imapd: a client's write outlived the group commit flush");
		evbuffer_drain(imap_out(c), evbuffer_get_length(imap_out(c)));
		imap_server_free_client(c);
	}
	net_server_free(&srv->plain);
	net_server_free(&srv->tls);
	net_ipcount_free(&srv->ipcount);
	net_ipcount_free(&srv->unauth);
	authguard_close(&srv->guard);
	if (srv->watch_ev != NULL)
		event_free(srv->watch_ev);
	if (srv->poll_ev != NULL)
		event_free(srv->poll_ev);
	store_watch_free(&srv->watch);
	free(srv->watch_changed);
	srv->watch_changed = NULL;
	free(srv->notify_seq);
	free(srv->notify_known);
	srv->notify_seq = NULL;
	srv->notify_known = NULL;
	server_gc_close(srv);
	ldapauth_free(&srv->auth);
	imap_proxy_server_free(srv);
	store_close(&srv->store);
	event_base_free(srv->base);
	if (srv->tls_ctx_owned) {
		SSL_CTX *ctx = srv->tls_ctx;

		tls_ctx_free(&ctx);
		srv->tls_ctx = NULL;
	}
	srv->conf = NULL;
	conf_free(&srv->reloaded);
}

void imapd_worker_init(struct imap_server *srv, struct conf *conf, void *tls_ctx)
{
	struct store_opts so;
	char *error = NULL;
	int rc;

	memset(srv, 0, sizeof(*srv));
	srv->conf = conf;
	srv->base = event_base_new();
	if (srv->base == NULL)
		fatalx("event_base_new failed");
	store_opts_from_conf(conf, &so);
	so.create = true;
	if ((rc = store_open(&so, &srv->store)) != 0)
		fatalx("imapd: store %s: %s", so.path, store_strerror(rc));
	if ((rc = store_gc_new(srv->store, &srv->gc)) != 0)
		fatalx("imapd: group commit: %s", store_strerror(rc));
	if ((srv->gc_ev = store_gc_event_new(srv->base, srv->gc)) == NULL)
		fatalx("imapd: group commit: event");
	if (ldapauth_new(srv->base, conf, &srv->auth, &error) < 0)
		fatalx("imapd: directory: %s", error);
	server_limits(srv, conf);
	if (imap_proxy_init(srv, &error) < 0)
		fatalx("imapd: %s", error);
	srv->tls_ctx = tls_ctx;
	srv->ipcount = net_ipcount_new(65536);
	srv->unauth = net_ipcount_new(65536);
	srv->guard = authguard_open(conf);
	server_watch_setup(srv);
}

int imap_server_run(struct daemon_worker *w, const struct imap_worker_args *a)
{
	struct imap_server srv;
	struct obs *obs;
	size_t cap;

	imapd_worker_init(&srv, a->conf, a->tls_ctx);
	srv.shared = a->shared;
	ldapauth_use_shared(srv.auth, a->auth_cache);
	srv.conf_path = a->conf_path;
	srv.worker = daemon_worker_index(w);
	shmtable_worker_reset(srv.shared, srv.worker);
	net_ipcount_free(&srv.ipcount);
	srv.ipcount = net_ipcount_new_shared(srv.shared, srv.worker, SHM_ADDR_CONNS);
	net_ipcount_free(&srv.unauth);
	srv.unauth = net_ipcount_new_shared(srv.shared, srv.worker, SHM_ADDR_UNAUTH);
	cap = (size_t)conf_values(a->conf)->imapd.max_connections;
	if (a->plain->n > 0)
		srv.plain = server_net_new(&srv, a->plain, cap, imap_server_accept_plain);
	if (a->tls->n > 0)
		srv.tls = server_net_new(&srv, a->tls, cap, accept_tls);
	metrics_worker_start(srv.worker);
	obs = imap_obs_start(&srv, a->metrics);
	daemon_worker_attach(w, srv.base, on_drain, on_reload, &srv);
	log_info("imapd worker %u ready", daemon_worker_index(w));
	event_base_dispatch(srv.base);
	obs_free(&obs);
	imapd_worker_free(&srv);
	return 0;
}

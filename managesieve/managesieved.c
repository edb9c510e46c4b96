/* managesieved.c — owns main and the worker's world of `managesieved -c heron.conf [-f] [-t]`,
 * Heron's ManageSieve server (RFC 5804, port 4190): the master reads the config, binds
 * [sieve] listen, builds the TLS context and runs [sieve] workers (common/daemon.c); each
 * worker opens the store with its group committer and the directory (ldapauth: the same
 * [directory] backend, auth_mode and cache settings as imapd) and serves sessions
 * (ms_session.c). A small daemon of its own rather than a listener of imapd: a different
 * protocol and parser, rare writes that should not share imapd's workers, and it can run
 * (or not) and be restricted on its own. SIGHUP reads the config again for the directory's
 * cache TTLs and [sieve]'s proxy_hosts, proxy_port, proxy_timeout, proxy_tls, proxy_ca_file,
 * proxy_cert_file, proxy_key_file (a front's), proxy_client_ca_file and proxy_require_tls (a
 * store host's) only (the rest waits for a restart, the master says which keys). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/authguard.h"
#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/str.h"
#include "common/tls.h"
#include "ldapauth/ldapauth.h"
#include "managesieve/managesieved.h"
#include "store/store.h"
#include "store/store_event.h"

static void accept_cb(struct net_server *ns, int fd, const struct sockaddr *sa, socklen_t salen,
		      void *arg)
{
	struct ms_server *srv = arg;
	char addr[128], host[128];

	if (srv->draining) {
		net_refuse(fd, "BYE \"Server shutting down\"\r\n");
		net_server_conn_done(ns);
		return;
	}
	ms_session_new(srv, fd, sa, salen, net_addr_str(sa, salen, addr, sizeof(addr)),
		       net_addr_host(sa, host, sizeof(host)));
}

static void on_drain(void *arg)
{
	struct ms_server *srv = arg;
	struct ms_session *s, *next;

	srv->draining = true;
	net_server_stop(srv->ns);
	for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		ms_session_drain(s);
	}
	if (srv->nsessions == 0)
		event_base_loopexit(srv->base, NULL);
}

/* Worker, SIGHUP: the [directory] auth_cache_ttl and negative_cache_ttl of the file for the
   answers cached from now on, and [sieve] proxy_hosts, proxy_port, proxy_timeout, proxy_tls,
   proxy_ca_file, proxy_cert_file, proxy_key_file, proxy_client_ca_file and proxy_require_tls
   for the proxy logins from now on (the config is kept for those), then the
   directory reloads (both caches emptied, the users file read again). Nothing else of the new config is applied. */
static void on_reload(void *arg)
{
	struct ms_server *srv = arg;
	struct conf *c = srv->conf_path != NULL
				 ? daemon_conf_reload(srv->conf_path, "managesieved worker")
				 : NULL;
	char *err = NULL;

	if (c != NULL) {
		ldapauth_reload_ttls(srv->auth, c);
		srv->proxy_conf = c;
		ms_proxy_reload(srv); /* proxy_ca_file, proxy_client_ca_file read again */
		conf_free(&srv->reloaded);
		srv->reloaded = c;
		log_info("managesieved worker %u config reloaded", srv->worker);
	}
	if (ldapauth_reload(srv->auth, &err) < 0) {
		log_warnx("managesieved: reload users: %s", err);
		free(err);
	}
}

int ms_server_run(struct daemon_worker *w, const struct ms_worker_args *wa)
{
	static struct ms_server srv;
	struct store_opts so;
	char *err = NULL;
	int rc;

	struct event *gc_ev;
	struct obs *obs;
	const struct imapd_conf *ic;

	memset(&srv, 0, sizeof(srv));
	TAILQ_INIT(&srv.sessions);
	srv.conf = wa->conf;
	srv.conf_path = wa->conf_path;
	srv.worker = daemon_worker_index(w);
	srv.tls_ctx = wa->tls_ctx;
	const struct sieve_conf *sc = &conf_values(wa->conf)->sieve;

	srv.allow_plaintext = sc->allow_plaintext_auth;
	srv.timeout_ms = sc->timeout_ms;
	sieve_admin_limits_from_conf(wa->conf, &srv.lim);
	if ((srv.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	store_opts_from_conf(wa->conf, &so);
	so.create = true;
	if ((rc = store_open(&so, &srv.store)) != 0)
		fatalx("store %s: %s", so.path, store_strerror(rc));
	if ((rc = store_gc_new(srv.store, &srv.gc)) != 0)
		fatalx("store group commit: %s", store_strerror(rc));
	if ((gc_ev = store_gc_event_new(srv.base, srv.gc)) == NULL)
		fatalx("store group commit: event");
	if (ldapauth_new(srv.base, wa->conf, &srv.auth, &err) < 0)
		fatalx("directory: %s", err);
	ldapauth_use_shared(srv.auth, wa->auth_cache);
	srv.proxy_conf = wa->conf;
	if (wa->reloaded != NULL) { /* a worker started after a SIGHUP: its TTLs, proxy_hosts */
		ldapauth_reload_ttls(srv.auth, wa->reloaded);
		srv.proxy_conf = wa->reloaded;
	}
	srv.guard = authguard_open(wa->conf);
	ic = &conf_values(wa->conf)->imapd;
	if (ic->hostname != NULL && ic->hostname[0] != '\0')
		str_lcpy(srv.hostname, ic->hostname, sizeof(srv.hostname));
	else if (gethostname(srv.hostname, sizeof(srv.hostname) - 1) != 0)
		srv.hostname[0] = '\0';
	if (ms_proxy_init(&srv, &err) < 0)
		fatalx("%s", err);
	srv.ns = net_server_new(srv.base, wa->fds, (size_t)sc->max_connections, accept_cb, &srv);
	net_server_set_refusal(srv.ns, "managesieve", "BYE \"Too many connections\"\r\n");
	metrics_worker_start(daemon_worker_index(w));
	obs = ms_obs_start(&srv, daemon_worker_index(w), wa->metrics);
	daemon_worker_attach(w, srv.base, on_drain, on_reload, &srv);
	log_info("managesieved worker %u ready", daemon_worker_index(w));
	event_base_dispatch(srv.base);
	obs_free(&obs);
	net_server_free(&srv.ns);
	event_free(gc_ev);
	store_gc_free(&srv.gc);
	ldapauth_free(&srv.auth);
	authguard_close(&srv.guard);
	ms_proxy_server_free(&srv);
	conf_free(&srv.reloaded);
	store_close(&srv.store);
	event_base_free(srv.base);
	return 0;
}

struct ms_main {
	struct ms_worker_args wa;
	struct conf *reloaded; /* the last config a SIGHUP read, NULL before */
};

static const char *const reload_sections[] = { "store",   "directory", "tls", "sieve",
					       "metrics", "control",   "log", NULL };

/* [directory]: the directory reloads what it can (the cache TTLs); [sieve] proxy_hosts,
   proxy_port, proxy_timeout, proxy_tls, proxy_ca_file, proxy_cert_file, proxy_key_file,
   proxy_client_ca_file and proxy_require_tls apply to the proxy logins from now on; the rest, [tls] too
   (the context is the master's of the start), waits for a restart. */
static enum daemon_reload ms_reload_how(const char *section, const char *key)
{
	if (strcmp(section, "directory") == 0)
		return DAEMON_RELOAD_PARTLY;
	if (strcmp(section, "sieve") == 0 &&
	    (strcmp(key, "proxy_hosts") == 0 || strcmp(key, "proxy_port") == 0 ||
	     strcmp(key, "proxy_timeout") == 0 || strcmp(key, "proxy_tls") == 0 ||
	     strcmp(key, "proxy_ca_file") == 0 || strcmp(key, "proxy_cert_file") == 0 ||
	     strcmp(key, "proxy_key_file") == 0 || strcmp(key, "proxy_client_ca_file") == 0 ||
	     strcmp(key, "proxy_require_tls") == 0))
		return DAEMON_RELOAD_APPLIED;
	return DAEMON_RELOAD_RESTART;
}

/* Master, SIGHUP: the changed keys are reported (against the config read last); workers
   started later take the new directory TTLs too, the rest of the start's config. */
static void master_reload(void *arg)
{
	struct ms_main *m = arg;
	struct conf *c = daemon_conf_reload(m->wa.conf_path, "managesieved master");

	if (c == NULL)
		return;
	daemon_conf_report("managesieved", m->reloaded != NULL ? m->reloaded : m->wa.conf, c,
			   reload_sections, ms_reload_how);
	conf_free(&m->reloaded);
	m->reloaded = c;
	m->wa.reloaded = c;
}

static int worker_main(struct daemon_worker *w, void *arg)
{
	struct ms_main *m = arg;

	return ms_server_run(w, &m->wa);
}

int main(int argc, char **argv)
{
	struct daemon_args args;
	struct conf *conf;
	struct net_fds fds = { 0 }, metrics = { 0 };
	struct net_listen_opts lo = { .reuseport = false };
	static struct ms_main m;
	struct daemon_ops ops;
	const struct tls_conf *tc;
	char *error = NULL;
	int rc;

	daemon_args_parse(argc, argv, "managesieved", &args);
	args.sections = reload_sections;
	conf = daemon_conf_load(&args);
	const struct sieve_conf *sc = &conf_values(conf)->sieve;

	daemon_nofile_ensure("sieve", (uint64_t)sc->max_connections);
	tc = &conf_values(conf)->tls;
	if (tc->cert[0] != '\0' && (m.wa.tls_ctx = tls_server_ctx_new(tc, &error)) == NULL)
		fatalx("managesieved: tls: %s", error);
	if (net_listen(sc->listen, &lo, &fds, &error) < 0 ||
	    obs_listen(conf, conf_values(conf)->metrics.managesieved_listen, &metrics, &error) < 0)
		fatalx("managesieved: %s", error);
	for (size_t i = 0; i < fds.n; i++)
		log_info("managesieved listening on %s%s", fds.name[i],
			 m.wa.tls_ctx ? " (STARTTLS)" : "");
	m.wa.conf = conf;
	m.wa.conf_path = args.conf_path;
	m.wa.fds = &fds;
	m.wa.metrics = &metrics;
	m.wa.auth_cache = ldapauth_shared_new(conf);
	ms_metrics_init((unsigned)sc->workers);
	memset(&ops, 0, sizeof(ops));
	ops.ident = "managesieved";
	ops.workers = (unsigned)sc->workers;
	ops.pidfile = sc->pidfile;
	ops.user = sc->user;
	ops.allow_root = sc->allow_root;
	ops.detach = !args.foreground && !args.supervised;
	ops.worker_main = worker_main;
	ops.reload = master_reload;
	ops.arg = &m;
	rc = daemon_run(&ops);
	net_fds_close(&fds);
	net_fds_close(&metrics);
	tls_ctx_free(&m.wa.tls_ctx);
	ldapauth_shared_free(&m.wa.auth_cache);
	conf_free(&m.reloaded);
	conf_free(&conf);
	return rc;
}

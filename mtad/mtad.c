/* mtad.c — owns mtad's start: the command line, the config, binding the listeners in the
 * master, and running each worker (its set-up is worker.c's; here its servers, queue runner,
 * reload and drain). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/shmtable.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "dns/dns.h"
#include "ldapauth/ldapauth.h"
#include "mtad/aliases.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"
#include "store/store.h"

struct mtad_main {
	struct conf *conf;     /* for workers started from now on */
	struct conf *reloaded; /* owned: the last config SIGHUP loaded (conf), or NULL */
	const char *conf_path;
	struct net_fds fds[L_NKINDS];
	struct net_fds metrics; /* [metrics] mtad_listen */
	char hostname[256];
	struct shmtable *shared, *conns;
	struct ldapauth_shared *auth_cache; /* the workers' login and lookup cache, or NULL */
};

/* Entries of the relay table without counts are forgotten after this. */
#define SHARED_FORGET_MS (15 * 60 * 1000)

static const char *const listener_keys[L_NKINDS] = { "listen", "submission", "submissions",
						     "lmtp" };

static void on_drain(void *arg)
{
	mtad_servers_stop(arg);
}

/* [mtad] keys a SIGHUP applies (read per use, or into mtad_limits / the queue runner), and
   [tls] cert, key, min_version and ciphers (the server certificate, read again); every other
   key (listeners, workers, user, pidfile, hostname, max_connections, [store], [tls] ca...)
   takes effect at the next restart. */
static const char *const reloadable_keys[] = {
	"local_domains",
	"trusted_networks",
	"relay_host",
	"transport_map",
	"max_connections_per_ip",
	"max_message_size",
	"line_max",
	"max_recipients_per_transaction",
	"reject_recipients_per_transaction",
	"max_transactions_per_session",
	"max_errors",
	"greeting_delay",
	"command_timeout",
	"data_timeout",
	"login_timeout",
	"max_transaction_time",
	"max_data_time",
	"max_unauth_connections_per_ip",
	"auth_require_tls",
	"bare_lf",
	"sender_login_check",
	"sender_login_exempt",
	"sender_login_map",
	"reject_unauth_local_sender",
	"received_auth",
	"retry_schedule",
	"max_queue_lifetime",
	"relay_concurrency",
	"relay_timeout",
	"delay_warning",
	"relay_port",
	"postmaster",
	"recipient_delimiter",
	"subaddress_folder",
	"aliases",
};

/* What a SIGHUP does with a changed key of the sections mtad reads. */
static enum daemon_reload mtad_reload_how(const char *section, const char *key)
{
	enum daemon_reload how;

	if (daemon_reload_shared(section, key, &how))
		return how;
	if (strcmp(section, "sieve") == 0) /* the scripts and limits of delivery */
		return DAEMON_RELOAD_APPLIED;
	if (strcmp(section, "mtad") != 0)
		return DAEMON_RELOAD_RESTART;
	for (size_t i = 0; i < sizeof(reloadable_keys) / sizeof(reloadable_keys[0]); i++)
		if (strcmp(key, reloadable_keys[i]) == 0)
			return DAEMON_RELOAD_APPLIED;
	for (size_t i = 0; i < L_NKINDS; i++)
		if (strcmp(key, listener_keys[i]) == 0)
			return DAEMON_RELOAD_LISTEN;
	return DAEMON_RELOAD_RESTART;
}

static const char *const reload_sections[] = {
	"mtad", "store", "tls", "directory", "sieve", NULL
};

/* Master, SIGHUP: the new config is reported and kept for workers started later. The
   config of the start stays allocated (the daemon's pidfile and user point into it). */
static void master_reload(void *arg)
{
	struct mtad_main *mm = arg;
	struct conf *c = daemon_conf_reload(mm->conf_path, "mtad master");

	if (c == NULL)
		return;
	daemon_conf_report("mtad", mm->conf, c, reload_sections, mtad_reload_how);
	mm->conf = c;
	conf_free(&mm->reloaded);
	mm->reloaded = c;
}

/* Worker, SIGHUP: the policy keys of the new config apply to what starts from now on
   (sessions, transactions, relay connections); the server certificate is read again for new
   connections and STARTTLS (sessions in TLS keep theirs); the directory reloads its users
   file. */
static void on_reload(void *arg)
{
	struct mtad *m = arg;
	struct conf *c = daemon_conf_reload(m->conf_path, "mtad worker");
	char *err = NULL;

	if (c != NULL) {
		tls_server_ctx_reload(&m->tls, c, "mtad worker");
		m->conf = c;
		conf_free(&m->reloaded);
		m->reloaded = c;
		mtad_limits_from_conf(c, &m->lim);
		if (m->qr != NULL)
			queue_runner_reload(m);
		if (deliver_sieve_init(c, &err) < 0) {
			log_warnx("sieve: %s (the previous [sieve] scripts stay in force)", err);
			free(err);
			err = NULL;
		}
		sender_map_reload(m, c);
		mtad_auth_reload(m, c);
		milter_reload(m, c);
		rcpt_aliases_load(m, c, false);
		rcpt_srs_load(m, c, false);
		if (m->la != NULL)
			ldapauth_reload_ttls(m->la, c);
		log_info("mtad worker %u config reloaded", m->worker);
	}
	if (m->la != NULL && ldapauth_reload(m->la, &err) < 0) {
		log_warnx("directory reload failed: %s", err);
		free(err);
	}
}

/* One line at exit for benchmarks: fsyncs and group-commit batching of this worker. */
static void worker_stats(struct mtad *m, unsigned idx)
{
	uint64_t ops = 0, commits = 0;

	struct dns_stats ds = { 0 };

	store_gc_stats(m->gc, &ops, &commits);
	if (m->dns != NULL)
		dns_stats(m->dns, &ds);
	log_info("mtad worker %u stats fsyncs=%" PRIu64 " gc_ops=%" PRIu64 " gc_commits=%" PRIu64
		 " dns_lookups=%" PRIu64 " dns_hits=%" PRIu64 " dns_queries=%" PRIu64,
		 idx, store_fsync_count(m->store), ops, commits, ds.lookups, ds.hits, ds.queries);
}

static int worker_main(struct daemon_worker *w, void *arg)
{
	struct mtad_main *mm = arg;
	struct mtad m = { 0 };
	struct dns_opts dopts;
	struct obs *obs;
	char *err = NULL;
	int64_t maxc = conf_values(mm->conf)->mtad.max_connections;

	mtad_worker_init(&m, mm->conf, daemon_worker_index(w), mm->hostname);
	m.conf_path = mm->conf_path;
	m.shared = mm->shared;
	m.conns = mm->conns;
	if (m.la != NULL)
		ldapauth_use_shared(m.la, mm->auth_cache);
	shmtable_worker_reset(m.shared, m.worker);
	shmtable_worker_reset(m.conns, m.worker);
	if (mtad_servers_start(&m, mm->fds, (size_t)maxc) < 0)
		fatalx("cannot start listeners");
	dns_opts_from_conf(&dopts, mm->conf);
	if (dns_new(m.base, &dopts, &m.dns, &err) < 0)
		fatalx("%s", err);
	if (mtad_auth_init(&m, mm->conf, &err) < 0)
		fatalx("%s", err);
	queue_runner_start(&m, daemon_worker_index(w));
	pickup_start(&m);
	metrics_worker_start(m.worker);
	obs = mtad_obs_start(&m, &mm->metrics);
	daemon_worker_attach(w, m.base, on_drain, on_reload, &m);
	log_info("mtad worker %u ready", daemon_worker_index(w));
	event_base_dispatch(m.base);
	mtad_obs_free(&obs);
	pickup_stop(&m);
	queue_runner_stop(&m);
	worker_stats(&m, daemon_worker_index(w));
	mtad_auth_free(&m);
	dns_free(&m.dns);
	mtad_worker_free(&m);
	return 0;
}

static void bind_listeners(struct mtad_main *mm)
{
	struct net_listen_opts lo = { .reuseport = false, .backlog = 0, .unix_mode = 0660 };
	const struct heron_conf *v = conf_values(mm->conf);
	const struct conf_addrs *const lists[L_NKINDS] = {
		[L_SMTP] = v->mtad.listen,
		[L_SUBMISSION] = v->mtad.submission,
		[L_SUBMISSIONS] = v->mtad.submissions,
		[L_LMTP] = v->mtad.lmtp,
	};
	const char *cert = v->tls.cert;
	struct net_listen_opts local = lo;

	for (int k = 0; k < L_NKINDS; k++) {
		const struct conf_addrs *a = lists[k];
		char *err = NULL;

		if (a->n == 0)
			continue;
		if (k == L_SUBMISSIONS && cert[0] == '\0')
			fatalx("[mtad] submissions needs [tls] cert");
		if (net_listen(a, &lo, &mm->fds[k], &err) < 0)
			fatalx("%s", err);
		for (size_t i = 0; i < mm->fds[k].n; i++)
			log_info("mtad listening %s=%s", listener_keys[k], mm->fds[k].name[i]);
	}
	/* local submission: unix sockets any local process may use (a submission listener's
	   unix peers need no AUTH: smtp_session.c) */
	local.unix_mode = 0666;
	for (size_t i = 0; i < v->mtad.local_submission->n; i++)
		if (!v->mtad.local_submission->v[i].unix_path)
			fatalx("[mtad] local_submission: only unix sockets (/path)");
	if (v->mtad.local_submission->n > 0) {
		size_t before = mm->fds[L_SUBMISSION].n;
		char *err = NULL;

		if (net_listen(v->mtad.local_submission, &local, &mm->fds[L_SUBMISSION], &err) < 0)
			fatalx("%s", err);
		for (size_t i = before; i < mm->fds[L_SUBMISSION].n; i++)
			log_info("mtad listening local_submission=%s",
				 mm->fds[L_SUBMISSION].name[i]);
	}
	{
		char *err = NULL;

		if (obs_listen(mm->conf, v->metrics.mtad_listen, &mm->metrics, &err) < 0)
			fatalx("%s", err);
	}
}

int main(int argc, char **argv)
{
	struct daemon_args args;
	struct mtad_main mm = { 0 };
	struct daemon_ops ops = { 0 };
	const struct mtad_conf *mc;

	static const char *const sections[] = { "store", "directory", "tls",     "mtad",
						"dns",   "dkim",      "spf",     "dmarc",
						"sieve", "metrics",   "control", "log",
						NULL };

	daemon_args_parse(argc, argv, "mtad", &args);
	args.sections = sections;
	mm.conf = daemon_conf_load(&args);
	mm.conf_path = args.conf_path;
	struct conf *first = mm.conf;
	mc = &conf_values(mm.conf)->mtad;
	if (mc->hostname[0] != '\0')
		snprintf(mm.hostname, sizeof(mm.hostname), "%s", mc->hostname);
	else if (gethostname(mm.hostname, sizeof(mm.hostname) - 1) < 0)
		snprintf(mm.hostname, sizeof(mm.hostname), "localhost");
	daemon_nofile_ensure("mtad", (uint64_t)mc->max_connections);
	{
		/* a bad map stops the start here, not in each worker */
		struct sender_map *sm = NULL;
		char *err = NULL;

		if (sender_map_load(mc->sender_login_map, &sm, &err) < 0)
			fatalx("%s", err);
		sender_map_free(&sm);
		/* and so do bad [dkim] keys or a missing PSL */
		struct mtad tm = { 0 };

		if (mtad_auth_init(&tm, mm.conf, &err) < 0)
			fatalx("%s", err);
		mtad_auth_free(&tm);
		struct milter_set *ms = NULL;
		if (milter_set_load(mm.conf, &ms, &err) < 0)
			fatalx("%s", err);
		milter_set_free(&ms);
		struct aliases *al = NULL;

		if (mc->aliases[0] != '\0' && aliases_load(mc->aliases, &al, &err) < 0)
			fatalx("%s", err);
		aliases_free(&al);
		if (strlen(mc->recipient_delimiter) > 8 ||
		    strspn(mc->recipient_delimiter, "+-_=.#%~") != strlen(mc->recipient_delimiter))
			fatalx("[mtad] recipient_delimiter: at most 8 of + - _ = . # %% ~");
	}
	bind_listeners(&mm);
	ops.workers = (unsigned)mc->workers;
	mtad_metrics_init(ops.workers);
	mm.shared = shmtable_new(MTAD_SHARED_SLOTS, ops.workers, MTAD_SHARED_KEY_MAX,
				 SHARED_FORGET_MS);
	mm.conns = shmtable_new(net_shm_slots((size_t)mc->max_connections), ops.workers,
				NET_SHM_KEY_MAX, 0);
	mm.auth_cache = ldapauth_shared_new(mm.conf);
	ops.ident = "mtad";
	ops.pidfile = mc->pidfile;
	ops.user = mc->user;
	ops.allow_root = mc->allow_root;
	ops.detach = !args.foreground && !args.supervised;
	ops.worker_main = worker_main;
	ops.reload = master_reload;
	ops.arg = &mm;
	int rc = daemon_run(&ops);
	for (int k = 0; k < L_NKINDS; k++)
		net_fds_close(&mm.fds[k]);
	net_fds_close(&mm.metrics);
	shmtable_free(&mm.shared);
	shmtable_free(&mm.conns);
	ldapauth_shared_free(&mm.auth_cache);
	conf_free(&first);
	conf_free(&mm.reloaded);
	return rc;
}

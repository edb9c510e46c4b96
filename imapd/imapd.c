/* imapd.c — owns main: `imapd -c heron.conf [-f] [-t]`. The master reads the config, binds the
 * imap (STARTTLS) and imaps (implicit TLS) listeners, builds the TLS context, maps the table
 * the workers share (connections, sessions per user) and runs the workers
 * (imap_server.c). On SIGHUP it reads the config again, logs what changed (applied, or
 * waiting for a restart) and keeps it, with a new TLS context if [tls] changed, for workers
 * started later; each running worker reloads itself (imap_server.c). */
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/shmtable.h"
#include "common/tls.h"
#include "imapd/imap_server.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"

/* The master's state: what workers get, and the configs it loaded. */
struct imapd_main {
	struct imap_worker_args wa;
	struct conf *first;    /* the config of the start (the pidfile and user point into it) */
	struct conf *reloaded; /* owned: the last config SIGHUP loaded (wa->conf), or NULL */
};

static int worker_main(struct daemon_worker *w, void *arg)
{
	struct imapd_main *m = arg;

	return imap_server_run(w, &m->wa);
}

/* [imapd] keys a SIGHUP applies to the sessions from now on (imap_server.c server_limits). */
static const char *const reloadable_keys[] = {
	"allow_plaintext_auth",
	"line_max",
	"literal_max",
	"max_append_size",
	"login_timeout",
	"idle_timeout",
	"max_bad_commands",
	"max_connections_per_ip",
	"max_connections_per_user",
	"max_mailboxes_per_user",
	"max_mailbox_depth",
	"metadata_max_size",
	"metadata_max_entries",
	"metadata_private",
	"metadata_admin",
	"metadata_comment",
	"proxy_hosts", /* the front's proxy logins from now on (imap_proxy.c reads srv->conf) */
	"proxy_port",
	"proxy_timeout",
	"proxy_tls",
	"proxy_ca_file", /* read again by the worker's SIGHUP (imap_proxy_reload) */
	"proxy_cert_file",
	"proxy_key_file",
	"proxy_client_ca_file",
	"proxy_require_tls",
	"proxy_pool_max", /* the front's pool is emptied at each reload (imap_proxy.c) */
	"proxy_pool_max_per_host",
	"proxy_pool_idle",
};

/* What a SIGHUP does with a changed key of the sections imapd reads. */
static enum daemon_reload imapd_reload_how(const char *section, const char *key)
{
	enum daemon_reload how;

	if (daemon_reload_shared(section, key, &how))
		return how;
	if (strcmp(section, "imapd") != 0)
		return DAEMON_RELOAD_RESTART;
	if (strcmp(key, "listen") == 0 || strcmp(key, "listen_tls") == 0)
		return DAEMON_RELOAD_LISTEN;
	for (size_t i = 0; i < sizeof(reloadable_keys) / sizeof(reloadable_keys[0]); i++)
		if (strcmp(key, reloadable_keys[i]) == 0)
			return DAEMON_RELOAD_APPLIED;
	return DAEMON_RELOAD_RESTART;
}

/* Master, SIGHUP: the new config is reported and kept, with a new TLS context when [tls]
   changed, for the workers started from now on (the running ones reload themselves). */
static void master_reload(void *arg)
{
	static const char *const sections[] = { "imapd", "store", "tls", "directory", NULL };
	struct imapd_main *m = arg;
	struct conf *c = daemon_conf_reload(m->wa.conf_path, "imapd master");

	if (c == NULL)
		return;
	daemon_conf_report("imapd", m->wa.conf, c, sections, imapd_reload_how);
	tls_server_ctx_reload(&m->wa.tls_ctx, c, "imapd master");
	m->wa.conf = c;
	conf_free(&m->reloaded);
	m->reloaded = c;
}

int main(int argc, char **argv)
{
	struct daemon_args args;
	struct conf *conf;
	struct net_fds plain = { 0 }, tls = { 0 }, metrics = { 0 };
	struct net_listen_opts lo = { .reuseport = false };
	static struct imapd_main m;
	struct imap_worker_args *wa = &m.wa;
	struct daemon_ops ops;
	const struct imapd_conf *ic;
	const struct tls_conf *tc;
	char *error = NULL;
	int rc;

	static const char *const sections[] = { "store",   "directory", "tls", "imapd",
						"metrics", "control",   "log", NULL };

	daemon_args_parse(argc, argv, "imapd", &args);
	args.sections = sections;
	conf = daemon_conf_load(&args);
	m.first = conf;
	ic = &conf_values(conf)->imapd;
	tc = &conf_values(conf)->tls;
	daemon_nofile_ensure("imapd", (uint64_t)ic->max_connections);
	if (tc->cert[0] != '\0' && (wa->tls_ctx = tls_server_ctx_new(tc, &error)) == NULL)
		fatalx("imapd: tls: %s", error);
	if (ic->listen_tls->n > 0 && wa->tls_ctx == NULL)
		fatalx("imapd: listen_tls needs [tls] cert and key");
	if (net_listen(ic->listen, &lo, &plain, &error) < 0 ||
	    net_listen(ic->listen_tls, &lo, &tls, &error) < 0 ||
	    obs_listen(conf, conf_values(conf)->metrics.imapd_listen, &metrics, &error) < 0)
		fatalx("imapd: %s", error);
	for (size_t i = 0; i < plain.n; i++)
		log_info("imapd listening on %s", plain.name[i]);
	for (size_t i = 0; i < tls.n; i++)
		log_info("imapd listening on %s (TLS)", tls.name[i]);
	wa->conf = conf;
	wa->conf_path = args.conf_path;
	wa->plain = &plain;
	wa->tls = &tls;
	wa->metrics = &metrics;
	wa->workers = (unsigned)ic->workers;
	imap_metrics_init(wa->workers);
	/* room for the addresses and the users of max_connections sessions */
	wa->shared = shmtable_new(2 * net_shm_slots((size_t)ic->max_connections), wa->workers,
				  NET_SHM_KEY_MAX, IMAP_PENALTY_FORGET_MS);
	wa->auth_cache = ldapauth_shared_new(conf);
	memset(&ops, 0, sizeof(ops));
	ops.ident = "imapd";
	ops.workers = wa->workers;
	ops.pidfile = ic->pidfile;
	ops.user = ic->user;
	ops.allow_root = ic->allow_root;
	ops.detach = !args.foreground && !args.supervised;
	ops.worker_main = worker_main;
	ops.reload = master_reload;
	ops.arg = &m;
	rc = daemon_run(&ops);
	net_fds_close(&plain);
	net_fds_close(&tls);
	net_fds_close(&metrics);
	shmtable_free(&wa->shared);
	ldapauth_shared_free(&wa->auth_cache);
	tls_ctx_free(&wa->tls_ctx);
	conf_free(&m.first);
	conf_free(&m.reloaded);
	return rc;
}

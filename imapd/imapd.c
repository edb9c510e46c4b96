/* imapd.c — owns main: `imapd -c heron.conf [-f] [-t]`. The master reads the config, binds the
 * imap (STARTTLS) and imaps (implicit TLS) listeners, builds the TLS context, maps the table
 * the workers share (connections, failed logins) and runs the workers (imap_server.c). */
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/shmtable.h"
#include "common/tls.h"
#include "imapd/imap_server.h"

static int worker_main(struct daemon_worker *w, void *arg)
{
	return imap_server_run(w, arg);
}

int main(int argc, char **argv)
{
	struct daemon_args args;
	struct conf *conf;
	struct net_fds plain = { 0 }, tls = { 0 };
	struct net_listen_opts lo = { .reuseport = false };
	struct imap_worker_args wa;
	struct daemon_ops ops;
	struct tls_conf tc;
	char *error = NULL;
	int rc;

	daemon_args_parse(argc, argv, "imapd", &args);
	conf = daemon_conf_load(&args);
	memset(&wa, 0, sizeof(wa));
	tls_conf_from(&tc, conf);
	if (tc.cert != NULL && tc.cert[0] != '\0' &&
	    (wa.tls_ctx = tls_server_ctx_new(&tc, &error)) == NULL)
		fatalx("imapd: tls: %s", error);
	if (conf_addrs(conf, "imapd", "listen_tls")->n > 0 && wa.tls_ctx == NULL)
		fatalx("imapd: listen_tls needs [tls] cert and key");
	if (net_listen(conf_addrs(conf, "imapd", "listen"), &lo, &plain, &error) < 0 ||
	    net_listen(conf_addrs(conf, "imapd", "listen_tls"), &lo, &tls, &error) < 0)
		fatalx("imapd: %s", error);
	for (size_t i = 0; i < plain.n; i++)
		log_info("imapd listening on %s", plain.name[i]);
	for (size_t i = 0; i < tls.n; i++)
		log_info("imapd listening on %s (TLS)", tls.name[i]);
	wa.conf = conf;
	wa.plain = &plain;
	wa.tls = &tls;
	wa.workers = (unsigned)conf_int(conf, "imapd", "workers");
	wa.shared = shmtable_new(net_shm_slots((size_t)conf_int(conf, "imapd", "max_connections")),
				 wa.workers, NET_SHM_KEY_MAX, IMAP_PENALTY_FORGET_MS);
	memset(&ops, 0, sizeof(ops));
	ops.ident = "imapd";
	ops.workers = wa.workers;
	ops.pidfile = conf_str(conf, "imapd", "pidfile");
	ops.user = conf_str(conf, "imapd", "user");
	ops.detach = !args.foreground;
	ops.worker_main = worker_main;
	ops.arg = &wa;
	rc = daemon_run(&ops);
	net_fds_close(&plain);
	net_fds_close(&tls);
	shmtable_free(&wa.shared);
	tls_ctx_free(&wa.tls_ctx);
	conf_free(&conf);
	return rc;
}

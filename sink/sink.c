/* sink.c — owns the sink's main: the command line (-c, -f, -t and the sink's own options),
 * [sink] settings, listeners, the STARTTLS certificate (configured or generated), the
 * shared statistics segment, the connection cap of all workers (refused with 421), the
 * SIGUSR1 and exit summaries, and each worker's loop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/conf.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "sink/sink.h"

#define CONTROL_MAX_CONNS 64
#define SINK_DRAIN_MS 2000

struct sink_main {
	struct conf *conf;
	struct sink_opts o;
	struct sink_shared *sh;
	struct shmtable *conns; /* the SMTP connections of all workers */
	struct net_fds smtp_fds, control_fds, metrics_fds;
	struct tls_conf tls;
	bool starttls;
	SSL_CTX *tls_ctx;                   /* built before fork, shared by the workers */
	char *gen_dir, *gen_cert, *gen_key; /* a generated certificate, removed at exit */
	char hostname[256];
};

/* The sink's own options: name, [sink] key it overrides (NULL: a fault), has a value. */
static const struct {
	const char *opt;
	const char *key;
} sink_opts_table[] = {
	{ "listen", "listen" },   { "control", "control" }, { "keep", "keep" },
	{ "workers", "workers" }, { "metrics", NULL }, /* [metrics] sink_listen, with [metrics] enabled */
};

static noreturn void usage(void)
{
	fprintf(stderr,
		"usage: sink [-c heron.conf] [-f] [-t] [--listen ADDR] [--control ADDR]\n"
		"            [--keep DIR] [--workers N] [--mail-4xx SHARE] [--mail-5xx SHARE]\n"
		"            [--rcpt-4xx SHARE] [--rcpt-5xx SHARE] [--data-4xx SHARE]\n"
		"            [--data-5xx SHARE] [--drop-in-data SHARE] [--delay-ms MS]\n"
		"            [--greeting-delay-ms MS] [--metrics ADDR]\n");
	exit(2);
}

struct sink_cmdline {
	const char *set[sizeof(sink_opts_table) / sizeof(sink_opts_table[0])];
	double fault[FAULT_NKEYS];
	bool fault_set[FAULT_NKEYS];
};

/* Takes "--name value" or "--name=value" at argv[*i]; false when it is not one of ours. */
static bool parse_long(int argc, char **argv, int *i, struct sink_cmdline *cl)
{
	char name[64], *val, *end;
	char *arg = argv[*i] + 2;
	size_t nlen = strcspn(arg, "=");
	int k;

	if (strncmp(argv[*i], "--", 2) != 0 || nlen >= sizeof(name))
		return false;
	memcpy(name, arg, nlen);
	name[nlen] = '\0';
	if (arg[nlen] == '=')
		val = arg + nlen + 1;
	else if (*i + 1 < argc)
		val = argv[++*i];
	else
		usage();
	for (size_t o = 0; o < sizeof(sink_opts_table) / sizeof(sink_opts_table[0]); o++)
		if (strcmp(name, sink_opts_table[o].opt) == 0)
			return cl->set[o] = val, true;
	for (char *p = name; *p != '\0'; p++)
		if (*p == '-')
			*p = '_';
	if ((k = sink_fault_lookup(name, strlen(name))) < 0)
		usage();
	cl->fault[k] = strtod(val, &end);
	if (*val == '\0' || *end != '\0') {
		fprintf(stderr, "sink: --%s: not a number: %s\n", arg, val);
		exit(2);
	}
	cl->fault_set[k] = true;
	return true;
}

/* Splits argv into the sink's options and the daemon's (-c, -f, -t). */
static void parse_cmdline(int argc, char **argv, struct sink_cmdline *cl, struct daemon_args *a)
{
	char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
	int nrest = 0;

	memset(cl, 0, sizeof(*cl));
	rest[nrest++] = argv[0];
	for (int i = 1; i < argc; i++)
		if (!parse_long(argc, argv, &i, cl))
			rest[nrest++] = argv[i];
	static const char *const sections[] = { "sink", "tls", "metrics", "control", "log", NULL };

	daemon_args_parse(nrest, rest, "sink", a);
	a->sections = sections;
	/* a's strings point into argv, not into rest */
	free(rest);
}

/* --listen, --control, --keep, --workers override [sink]. */
static void apply_overrides(struct sink_main *m, const struct sink_cmdline *cl)
{
	char *err = NULL;

	for (size_t o = 0; o < sizeof(sink_opts_table) / sizeof(sink_opts_table[0]); o++) {
		if (cl->set[o] == NULL)
			continue;
		if (sink_opts_table[o].key == NULL) {
			if (conf_set(m->conf, "metrics", "sink_listen", cl->set[o], &err) < 0 ||
			    conf_set(m->conf, "metrics", "enabled", "yes", &err) < 0) {
				fprintf(stderr, "sink: --%s: %s\n", sink_opts_table[o].opt, err);
				exit(2);
			}
			continue;
		}
		if (conf_set(m->conf, "sink", sink_opts_table[o].key, cl->set[o], &err) < 0) {
			fprintf(stderr, "sink: --%s: %s\n", sink_opts_table[o].opt, err);
			exit(2);
		}
	}
}

static void apply_faults(struct sink_main *m, const struct sink_cmdline *cl)
{
	for (int k = 0; k < FAULT_NKEYS; k++) {
		if (cl->fault_set[k] && sink_fault_set(sink_shared_faults(m->sh),
						       (enum sink_fault_key)k, cl->fault[k]) < 0) {
			fprintf(stderr, "sink: --%s: out of range\n", sink_fault_name(k));
			exit(2);
		}
	}
}

static void mkdir_or_die(const char *path)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		fatal("mkdir %s", path);
}

/* Hands a directory made as root to the user the workers will run as. */
static void chown_for_workers(const char *path, const char *user)
{
	struct passwd *pw;

	if (getuid() != 0 || user[0] == '\0')
		return;
	if ((pw = getpwnam(user)) == NULL)
		fatalx("sink: unknown user %s", user);
	if (chown(path, pw->pw_uid, pw->pw_gid) < 0)
		fatal("chown %s", path);
}

/* --keep DIR: a Maildir (tmp, new, cur) the workers can write. */
static void keep_setup(const char *dir, const char *user)
{
	static const char *const sub[] = { "tmp", "new", "cur" };

	mkdir_or_die(dir);
	chown_for_workers(dir, user);
	for (size_t i = 0; i < 3; i++) {
		char *p = xasprintf("%s/%s", dir, sub[i]);

		mkdir_or_die(p);
		chown_for_workers(p, user);
		free(p);
	}
}

/* The [tls] certificate, or a self-signed one for hostname in a private directory. */
static void tls_setup(struct sink_main *m)
{
	char tmpl[] = "/tmp/heron-sink-XXXXXX", *err = NULL;

	m->tls = conf_values(m->conf)->tls;
	if (!m->starttls || (m->tls.cert != NULL && m->tls.cert[0] != '\0'))
		return;
	if (mkdtemp(tmpl) == NULL)
		fatal("mkdtemp %s", tmpl);
	m->gen_dir = xstrdup(tmpl);
	m->gen_cert = xasprintf("%s/cert.pem", tmpl);
	m->gen_key = xasprintf("%s/key.pem", tmpl);
	if (tls_selfsigned_write(m->gen_cert, m->gen_key, m->hostname, 30, &err) < 0)
		fatalx("generating a certificate for STARTTLS: %s", err);
	m->tls.cert = m->gen_cert;
	m->tls.key = m->gen_key;
	log_info("sink starttls certificate=generated cn=%s", m->hostname);
}

static void tls_ctx_setup(struct sink_main *m)
{
	char *err = NULL;

	tls_setup(m);
	if (m->starttls && (m->tls_ctx = tls_server_ctx_new(&m->tls, &err)) == NULL)
		fatalx("sink starttls: %s", err);
}

static void tls_cleanup(struct sink_main *m)
{
	if (m->gen_dir == NULL)
		return;
	unlink(m->gen_cert);
	unlink(m->gen_key);
	rmdir(m->gen_dir);
	free(m->gen_cert);
	free(m->gen_key);
	free(m->gen_dir);
}

static void load_opts(struct sink_main *m)
{
	const struct sink_conf *sc = &conf_values(m->conf)->sink;

	if (sc->hostname[0] != '\0')
		str_lcpy(m->hostname, sc->hostname, sizeof(m->hostname));
	else if (gethostname(m->hostname, sizeof(m->hostname) - 1) < 0 || m->hostname[0] == '\0')
		str_lcpy(m->hostname, "localhost", sizeof(m->hostname));
	m->o.hostname = m->hostname;
	m->o.keep_dir = sc->keep[0] != '\0' ? sc->keep : NULL;
	m->o.max_message_size = sc->max_message_size;
	m->o.max_recipients = (unsigned)sc->max_recipients;
	m->o.max_connections = (unsigned)sc->max_connections;
	m->o.timeout_ms = sc->timeout_ms;
	m->starttls = sc->starttls;
}

/* SIGUSR1 (the master's, after every process reopened its log): the summary line. */
static void master_usr1(void *arg)
{
	struct sink_main *m = arg;

	sink_stats_log_summary(m->sh, "SIGUSR1");
}

/* ---- workers ---- */

static void smtp_accept_cb(struct net_server *srv, int fd, const struct sockaddr *sa,
			   socklen_t salen, void *arg)
{
	sink_session_start(arg, fd);
}

static void control_accept_cb(struct net_server *srv, int fd, const struct sockaddr *sa,
			      socklen_t salen, void *arg)
{
	sink_control_start(arg, fd);
}

static void worker_maybe_exit(struct sink_worker *w)
{
	if (daemon_worker_draining(w->dw) && net_server_nconns(w->smtp) == 0 &&
	    net_server_nconns(w->control) == 0)
		event_base_loopexit(w->base, NULL);
}

void sink_worker_session_done(struct sink_worker *w)
{
	net_server_conn_done(w->smtp);
	worker_maybe_exit(w);
}

void sink_worker_control_done(struct sink_worker *w)
{
	net_server_conn_done(w->control);
	worker_maybe_exit(w);
}

static void worker_drain(void *arg)
{
	struct sink_worker *w = arg;

	net_server_stop(w->smtp);
	net_server_stop(w->control);
	worker_maybe_exit(w);
}

static int worker_main(struct daemon_worker *dw, void *arg)
{
	struct sink_main *m = arg;
	struct sink_worker w = { .sh = m->sh, .o = &m->o, .dw = dw };
	struct obs *obs;
	char *refusal;

	w.index = daemon_worker_index(dw);
	w.tls = m->tls_ctx;
	w.base = event_base_new();
	if (w.base == NULL)
		fatalx("event_base_new failed");
	sink_fault_seed(log_new_id() ^ ((uint64_t)getpid() << 32));
	w.smtp = net_server_new(w.base, &m->smtp_fds, m->o.max_connections, smtp_accept_cb, &w);
	refusal = xasprintf("421 4.7.0 %s Too many connections, try again later\r\n", m->hostname);
	net_server_set_refusal(w.smtp, "sink", refusal);
	free(refusal);
	shmtable_worker_reset(m->conns, w.index);
	net_server_share(w.smtp, m->conns, w.index);
	w.control = net_server_new(w.base, &m->control_fds, CONTROL_MAX_CONNS, control_accept_cb,
				   &w);
	metrics_worker_start(w.index);
	obs = sink_obs_start(&w, m->conf, &m->metrics_fds);
	daemon_worker_attach(dw, w.base, worker_drain, NULL, &w);
	event_base_dispatch(w.base);
	obs_free(&obs);
	net_server_free(&w.smtp);
	net_server_free(&w.control);
	event_base_free(w.base);
	return 0;
}

static void listen_or_die(const struct conf_addrs *addrs, const char *key, struct net_fds *fds)
{
	struct net_listen_opts lo = { .backlog = 4096 };
	char *err = NULL;

	if (net_listen(addrs, &lo, fds, &err) < 0)
		fatalx("sink %s: %s", key, err);
	for (size_t i = 0; i < fds->n; i++)
		log_info("sink %s on %s", key, fds->name[i]);
}

int main(int argc, char **argv)
{
	static struct sink_main m;
	const struct sink_conf *sc;
	struct sink_cmdline cl;
	struct daemon_args a;
	struct daemon_ops ops = { .ident = "sink", .drain_ms = SINK_DRAIN_MS };
	bool test, changed;
	int rc;

	parse_cmdline(argc, argv, &cl, &a);
	test = a.test;
	changed = a.changed;
	a.test = a.changed = false; /* -t and -n show the values after the command line's */
	a.foreground |= test || changed;
	a.conf_optional = true; /* --listen and --control may be all it needs */
	m.conf = daemon_conf_load(&a);
	apply_overrides(&m, &cl);
	if (test || changed) {
		if (changed)
			conf_dump_changed(m.conf, a.sections, stdout);
		else
			conf_dump(m.conf, stdout);
		conf_free(&m.conf);
		return 0;
	}
	sc = &conf_values(m.conf)->sink;
	m.sh = sink_shared_create((unsigned)sc->workers, (size_t)sc->record_memory,
				  sc->records == SINK_RECORDS_ALL);
	apply_faults(&m, &cl);
	load_opts(&m);
	if (m.o.keep_dir != NULL)
		keep_setup(m.o.keep_dir, sc->user);
	daemon_nofile_ensure("sink", m.o.max_connections);
	listen_or_die(sc->listen, "listen", &m.smtp_fds);
	listen_or_die(sc->control, "control", &m.control_fds);
	tls_ctx_setup(&m);
	{
		char *err = NULL;

		if (obs_listen(m.conf, conf_values(m.conf)->metrics.sink_listen, &m.metrics_fds,
			       &err) < 0)
			fatalx("sink metrics: %s", err);
	}
	ops.workers = (unsigned)sc->workers;
	sink_metrics_init(ops.workers);
	m.conns = shmtable_new(SHMTABLE_PROBE, ops.workers, NET_SHM_KEY_MAX, 0);
	ops.pidfile = sc->pidfile;
	ops.user = sc->user;
	ops.allow_root = true; /* a benchmark's tool: it warns when it keeps root */
	ops.detach = !a.foreground && !a.supervised;
	ops.worker_main = worker_main;
	ops.usr1 = master_usr1;
	ops.arg = &m;
	rc = daemon_run(&ops);
	sink_stats_log_summary(m.sh, "exit");
	tls_ctx_free(&m.tls_ctx);
	tls_cleanup(&m);
	net_fds_close(&m.smtp_fds);
	net_fds_close(&m.control_fds);
	net_fds_close(&m.metrics_fds);
	sink_shared_destroy(&m.sh);
	shmtable_free(&m.conns);
	conf_free(&m.conf);
	return rc;
}

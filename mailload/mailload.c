/* mailload.c — owns the command line: ldif, init, run, search, agent and report. Everything
 * else is the manager's (manager.c), an agent's (agent.c), the LDIF writer's (ldif.c) or, for
 * the fast paths of init (a bulk stream, Maildir++ trees), init_stream.c's and
 * init_maildir.c's. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/str.h"
#include "mailload/agent.h"
#include "mailload/ctlauth.h"
#include "mailload/init.h"
#include "mailload/json.h"
#include "mailload/manager.h"
#include "mailload/report.h"

/* Each subcommand's synopsis and options, for `mailload CMD --help` (mailload(1) has
   the details). */
struct subcmd {
	const char *name, *text;
};

#define TARGET_OPTS                                                                           \
	"server:\n"                                                                           \
	"  --target HOST            SMTP, submission and IMAP host (127.0.0.1)\n"             \
	"  --smtp-host H, --submission-host H, --imap-host H   one host per role\n"           \
	"  --smtp-port P, --submission-port P, --imap-port P   ports (25, 587, 143)\n"        \
	"  --tls none|starttls|implicit   TLS for every connection (none)\n"                  \
	"  --tls-verify             verify the server's certificate and name\n"               \
	"  --ca-file FILE           trust these CAs (with --tls-verify; else the system's)\n" \
	"users:\n"                                                                            \
	"  --domain D, --ext-domain D   local (heron.test) and remote (ext.heron.test)\n"     \
	"  --user-format FMT        login of user N, printf-style (user%d)\n"                 \
	"  --password PW            every user's password (default: the login)\n"             \
	"  --users-file FILE        login, password and address of each user, one a line\n"   \
	"workload:\n"                                                                         \
	"  --users N                population (200 x rate)\n"                                \
	"  --profile tiny|small|corporate|FILE   workload profile (small)\n"                  \
	"  --seed S                 random seed (1)\n"                                        \
	"  --set KEY=VALUE          any configuration key (mailload(1))\n"

#define RUN_OPTS                                                                                  \
	"run:\n"                                                                                  \
	"  --rate R                 messages per minute submitted by the users\n"                 \
	"  --phases A/B/C           ramp-up/steady/ramp-down seconds (300/1800/120)\n"            \
	"  --load-points L          percentages of R (80,100,120)\n"                              \
	"  --report DIR             where report.json, .txt and .html go\n"                       \
	"  --sink HOST:PORT         the sink's control port (remote delivery records)\n"          \
	"  --agents HOST:PORT,...   remote agents (with --secret-file), else local ones\n"        \
	"  --local-agents N         local agents (one per core)\n"                                \
	"  --secret-file FILE       the remote agents' shared secret\n"                           \
	"  --drain S                wait for delivery checks after ramp-down (60)\n"              \
	"  --timeout S              per-step timeout (60)\n"                                      \
	"  --probes N               probe connections per agent (0: as many as needed)\n"         \
	"  --probe-window S         how long a probe watches for a copy (120)\n"                  \
	"  --no-delivery-check      no probes, no reconciliation (local copies unchecked)\n"      \
	"  --min-samples N          samples a summary function needs (73)\n"                      \
	"  --fill-record FILE       the record a fast-path init wrote (else user1's over IMAP)\n" \
	"  --force                  run even when the fill does not match\n"                      \
	"  --sut-config FILE        disclose the server's configuration (a heron.conf)\n"         \
	"  --sut-pid PID            measure the CPU of this process tree (repeatable)\n"          \
	"  --notes FILE             tuning notes for the report\n"                                \
	"  --sut-version TEXT       the server's version, for the disclosure\n"                   \
	"  --metrics ADDR           serve Prometheus metrics of the run on ADDR (host:port)\n"    \
	"  -q                       no live status line and no summary on stdout\n"               \
	"  -v                       log every step\n"

static const struct subcmd subcmds[] = {
	{ "ldif",
	  "usage: mailload ldif --users N [--domain D] [--base DN] [--ou] [--password PW]\n"
	  "                    [--hosts H1,H2,...]\n"
	  "Writes LDIF for user1..userN (uid, mail, {SSHA} userPassword) to stdout;\n"
	  "--hosts spreads them over store hosts (mailHost: user1 on H1, user2 on H2...).\n" },
	{ "init",
	  "usage: mailload init --users N [--profile P] [--seed S] [server options]\n"
	  "       mailload init --stream --users N [--slice K/N | --record-only] [--profile P]\n"
	  "                     [--seed S]\n"
	  "       mailload init --maildir ROOT --users N [--profile P] [--seed S] [--jobs J]\n"
	  "Fills every mailbox (over SMTP and IMAP, as Maildir++ trees, or as a bulk stream\n"
	  "on stdout for a store's bulk import: mailctl import --bulk -) and records the\n"
	  "seed, profile and users in the target.\n" TARGET_OPTS },
	{ "run",
	  "usage: mailload run --rate R --report DIR [options]\n"
	  "Runs each load point and writes the report. Exit status: 0 pass, 1 fail,\n"
	  "2 error, 3 invalid (too few samples, or copies that could not be checked).\n" TARGET_OPTS
		  RUN_OPTS },
	{ "search",
	  "usage: mailload search --from R0 [--to R1] [--steps N] --report DIR [options]\n"
	  "Finds the highest valid passing rate: doubles from R0, then bisects, skips\n"
	  "invalid points and runs a point again when its interval straddles a limit.\n"
	  "Exit status: 0 when a rate passed, 1 when none did, 2 error.\n"
	  "  --from R0, --to R1       the range (R1: 100000)\n"
	  "  --steps N                runs at most (8)\n" TARGET_OPTS RUN_OPTS },
	{ "agent",
	  "usage: mailload agent --listen HOST:PORT --secret-file FILE [--metrics ADDR]\n"
	  "A load agent for a remote manager; the control port is authenticated with the\n"
	  "shared secret of FILE (owner-only, at least 16 bytes).\n" },
	{ "report", "usage: mailload report DIR\n"
		    "Renders DIR/report.txt and DIR/report.html again from DIR/report.json.\n" },
	{ "compare",
	  "usage: mailload compare A/report.json B/report.json [--html FILE]\n"
	  "Two results side by side (verdicts, rates, server CPU, per function the\n"
	  "compliance, p50 and p99 with the ratio B/A); --html also writes the page.\n" },
};

static void usage(FILE *fp)
{
	fputs("usage: mailload COMMAND [options]; mailload COMMAND --help for its options\n"
	      "commands:\n"
	      "  ldif      LDIF of the users, for the server's directory\n"
	      "  init      fill every mailbox\n"
	      "  run       run the load points and write the report\n"
	      "  search    find the highest passing rate\n"
	      "  agent     a load agent for a remote manager\n"
	      "  report    render a report again from its report.json\n"
	      "  compare   two reports side by side\n"
	      "see mailload(1)\n",
	      fp);
}

static int subcmd_help(const char *cmd, FILE *fp)
{
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++)
		if (strcmp(subcmds[i].name, cmd) == 0) {
			fputs(subcmds[i].text, fp);
			fputs("see mailload(1)\n", fp);
			return 0;
		}
	usage(fp);
	return -1;
}

static int cmd_ldif(uint64_t users, const char *domain, const char *base, bool ou,
		    const char *password, const char *hosts)
{
	if (users == 0) {
		fputs("mailload ldif: --users N is needed\n", stderr);
		return 2;
	}
	if (hosts != NULL && (hosts[0] == '\0' || strstr(hosts, ",,") != NULL ||
			      hosts[strlen(hosts) - 1] == ',' || hosts[0] == ',')) {
		fputs("mailload ldif: --hosts H1,H2,... names the store hosts\n", stderr);
		return 2;
	}
	return ml_ldif_write(stdout, users, domain, base, ou, password, hosts) == 0 ? 0 : 1;
}

static int parse_phases(const char *s, struct ml_cfg *c)
{
	return sscanf(s, "%" SCNu64 "/%" SCNu64 "/%" SCNu64, &c->ramp_s, &c->steady_s,
		      &c->down_s) == 3
		       ? 0
		       : -1;
}

static int parse_points(const char *s, struct mgr_opts *o)
{
	char *dup = strdup(s), *save = NULL;

	o->npoints = 0;
	for (char *t = strtok_r(dup, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (o->npoints == 8 || (o->points[o->npoints++] = atof(t)) <= 0) {
			free(dup);
			return -1;
		}
	}
	free(dup);
	return o->npoints > 0 ? 0 : -1;
}

static int set_profile(struct ml_cfg *c, const char *p)
{
	char err[300];
	struct ml_cfg keep = *c;

	if (ml_cfg_defaults(c, p) == 0) {
		/* a profile sets the workload; the run settings given so far stay */
		for (size_t i = 0; i < ml_cfg_nkeys; i++) {
			const struct ml_cfg_key *k = &ml_cfg_keys[i];
			if (k->profile)
				continue;
			memcpy((char *)c + k->off, (const char *)&keep + k->off,
			       k->type == CFGT_STR ? ML_STR : 8);
		}
		return 0;
	}
	*c = keep;
	if (ml_cfg_load(c, p, err, sizeof(err)) < 0) {
		fprintf(stderr, "mailload: profile: %s\n", err);
		return -1;
	}
	return 0;
}

enum {
	O_USERS = 256,
	O_DOMAIN,
	O_EXT,
	O_BASE,
	O_OU,
	O_HOSTS,
	O_TARGET,
	O_SMTP_PORT,
	O_SUB_PORT,
	O_IMAP_PORT,
	O_PASSWORD,
	O_PROFILE,
	O_SEED,
	O_RATE,
	O_PHASES,
	O_POINTS,
	O_AGENTS,
	O_LOCAL,
	O_TLS,
	O_SINK,
	O_REPORT,
	O_TIMEOUT,
	O_PROBES,
	O_SET,
	O_DRAIN,
	O_LISTEN,
	O_FROM,
	O_TO,
	O_STEPS,
	O_SECRET,
	O_STREAM,
	O_SLICE,
	O_RECORD_ONLY,
	O_MAILDIR,
	O_JOBS,
	O_PROBE_WINDOW,
	O_MIN_SAMPLES,
	O_HTML,
	O_METRICS,
	O_FILL_RECORD,
	O_FORCE,
	O_SUT_CONFIG,
	O_SUT_VERSION,
	O_SUT_PID,
	O_NOTES,
	O_SMTP_HOST,
	O_SUB_HOST,
	O_IMAP_HOST,
	O_USER_FORMAT,
	O_USERS_FILE,
	O_TLS_VERIFY,
	O_CA_FILE,
	O_NO_CHECK,
};

static const struct option longopts[] = {
	{ "users", required_argument, NULL, O_USERS },
	{ "domain", required_argument, NULL, O_DOMAIN },
	{ "ext-domain", required_argument, NULL, O_EXT },
	{ "base", required_argument, NULL, O_BASE },
	{ "ou", no_argument, NULL, O_OU },
	{ "hosts", required_argument, NULL, O_HOSTS },
	{ "target", required_argument, NULL, O_TARGET },
	{ "smtp-port", required_argument, NULL, O_SMTP_PORT },
	{ "submission-port", required_argument, NULL, O_SUB_PORT },
	{ "imap-port", required_argument, NULL, O_IMAP_PORT },
	{ "password", required_argument, NULL, O_PASSWORD },
	{ "profile", required_argument, NULL, O_PROFILE },
	{ "seed", required_argument, NULL, O_SEED },
	{ "rate", required_argument, NULL, O_RATE },
	{ "phases", required_argument, NULL, O_PHASES },
	{ "load-points", required_argument, NULL, O_POINTS },
	{ "agents", required_argument, NULL, O_AGENTS },
	{ "local-agents", required_argument, NULL, O_LOCAL },
	{ "tls", required_argument, NULL, O_TLS },
	{ "sink", required_argument, NULL, O_SINK },
	{ "report", required_argument, NULL, O_REPORT },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "probes", required_argument, NULL, O_PROBES },
	{ "set", required_argument, NULL, O_SET },
	{ "drain", required_argument, NULL, O_DRAIN },
	{ "listen", required_argument, NULL, O_LISTEN },
	{ "from", required_argument, NULL, O_FROM },
	{ "to", required_argument, NULL, O_TO },
	{ "steps", required_argument, NULL, O_STEPS },
	{ "secret-file", required_argument, NULL, O_SECRET },
	{ "stream", no_argument, NULL, O_STREAM },
	{ "slice", required_argument, NULL, O_SLICE },
	{ "record-only", no_argument, NULL, O_RECORD_ONLY },
	{ "maildir", required_argument, NULL, O_MAILDIR },
	{ "jobs", required_argument, NULL, O_JOBS },
	{ "probe-window", required_argument, NULL, O_PROBE_WINDOW },
	{ "min-samples", required_argument, NULL, O_MIN_SAMPLES },
	{ "html", required_argument, NULL, O_HTML },
	{ "fill-record", required_argument, NULL, O_FILL_RECORD },
	{ "force", no_argument, NULL, O_FORCE },
	{ "sut-config", required_argument, NULL, O_SUT_CONFIG },
	{ "sut-version", required_argument, NULL, O_SUT_VERSION },
	{ "sut-pid", required_argument, NULL, O_SUT_PID },
	{ "metrics", required_argument, NULL, O_METRICS },
	{ "notes", required_argument, NULL, O_NOTES },
	{ "smtp-host", required_argument, NULL, O_SMTP_HOST },
	{ "submission-host", required_argument, NULL, O_SUB_HOST },
	{ "imap-host", required_argument, NULL, O_IMAP_HOST },
	{ "user-format", required_argument, NULL, O_USER_FORMAT },
	{ "users-file", required_argument, NULL, O_USERS_FILE },
	{ "tls-verify", no_argument, NULL, O_TLS_VERIFY },
	{ "ca-file", required_argument, NULL, O_CA_FILE },
	{ "no-delivery-check", no_argument, NULL, O_NO_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int num(const char *s, uint64_t *v)
{
	return str_to_u64(s, strlen(s), UINT64_MAX, v);
}

/* Everything the command line gives besides the manager's options. */
struct cli {
	struct mgr_opts o;
	const char *base, *listen;
	const char *hosts; /* ldif --hosts: mailHost values, round robin */
	bool stream;       /* init as a bulk stream on stdout */
	struct ml_init_stream so;
	const char *maildir; /* init straight into Maildir++ trees under this root */
	const char *html;    /* compare: the HTML page's path */
	bool ou;
	double from, to;
	uint64_t steps, jobs;
};

/* --set KEY=VALUE or --set KEY VALUE; false on a bad one. */
static bool opt_set(struct cli *cl, char *arg, int argc, char **argv)
{
	char *eq = strchr(arg, '=');
	const char *val, *err;

	if (eq != NULL) {
		*eq = '\0';
		val = eq + 1;
	} else if (optind < argc) {
		val = argv[optind++];
	} else {
		return false;
	}
	if (ml_cfg_set(&cl->o.cfg, arg, val, &err) < 0) {
		fprintf(stderr, "mailload: --set %s: %s\n", arg, err);
		return false;
	}
	return true;
}

/* The options that set the workload and its servers; false on a bad value. */
static bool opt_cfg(struct cli *cl, int c, const char *arg)
{
	struct ml_cfg *cfg = &cl->o.cfg;
	const char *err;

	switch (c) {
	case O_DOMAIN:
		return ml_cfg_set(cfg, "domain", arg, &err) == 0;
	case O_EXT:
		return ml_cfg_set(cfg, "ext_domain", arg, &err) == 0;
	case O_TARGET:
		return ml_cfg_set(cfg, "smtp_host", arg, &err) == 0 &&
		       ml_cfg_set(cfg, "submit_host", arg, &err) == 0 &&
		       ml_cfg_set(cfg, "imap_host", arg, &err) == 0;
	case O_SMTP_HOST:
		return ml_cfg_set(cfg, "smtp_host", arg, &err) == 0;
	case O_SUB_HOST:
		return ml_cfg_set(cfg, "submit_host", arg, &err) == 0;
	case O_IMAP_HOST:
		return ml_cfg_set(cfg, "imap_host", arg, &err) == 0;
	case O_USER_FORMAT:
		return ml_cfg_set(cfg, "user_format", arg, &err) == 0 && ml_user_format_ok(arg);
	case O_USERS_FILE:
		return ml_cfg_set(cfg, "users_file", arg, &err) == 0;
	case O_TLS_VERIFY:
		cfg->tls_verify = 1;
		return true;
	case O_CA_FILE:
		return ml_cfg_set(cfg, "ca_file", arg, &err) == 0;
	case O_NO_CHECK:
		cfg->delivery_check = 0;
		return true;
	case O_SMTP_PORT:
		return num(arg, &cfg->smtp_port) == 0;
	case O_SUB_PORT:
		return num(arg, &cfg->submit_port) == 0;
	case O_IMAP_PORT:
		return num(arg, &cfg->imap_port) == 0;
	case O_PASSWORD:
		return ml_cfg_set(cfg, "password", arg, &err) == 0;
	case O_PROFILE:
		return set_profile(cfg, arg) == 0;
	case O_SEED:
		return num(arg, &cfg->seed) == 0;
	case O_RATE:
		return (cfg->rate = atof(arg)) > 0;
	case O_PHASES:
		return parse_phases(arg, cfg) == 0;
	case O_TLS:
		return (strcmp(arg, "none") == 0 || strcmp(arg, "starttls") == 0 ||
			strcmp(arg, "implicit") == 0) &&
		       ml_cfg_set(cfg, "tls", arg, &err) == 0;
	case O_TIMEOUT:
		return num(arg, &cfg->timeout_s) == 0;
	case O_PROBES:
		return num(arg, &cfg->probe_max) == 0;
	case O_PROBE_WINDOW:
		return num(arg, &cfg->probe_window_s) == 0 && cfg->probe_window_s > 0;
	case O_MIN_SAMPLES:
		return num(arg, &cfg->min_samples) == 0;
	case O_DRAIN:
		return num(arg, &cfg->drain_s) == 0;
	}
	return false;
}

/* One option; false on a bad one. */
static bool opt_one(struct cli *cl, int c, int argc, char **argv)
{
	uint64_t v;

	switch (c) {
	case O_USERS:
		cl->o.users_given = true;
		return num(optarg, &cl->o.cfg.users) == 0;
	case O_BASE:
		cl->base = optarg;
		return true;
	case O_OU:
		cl->ou = true;
		return true;
	case O_HOSTS:
		cl->hosts = optarg;
		return true;
	case O_POINTS:
		return parse_points(optarg, &cl->o) == 0;
	case O_AGENTS:
		cl->o.agents = optarg;
		return true;
	case O_LOCAL:
		if (num(optarg, &v) < 0 || v == 0 || v > 1024)
			return false;
		cl->o.local_agents = (uint32_t)v;
		return true;
	case O_SINK:
		cl->o.sink = optarg;
		return true;
	case O_REPORT:
		cl->o.report_dir = optarg;
		return true;
	case O_SET:
		return opt_set(cl, optarg, argc, argv);
	case O_LISTEN:
		cl->listen = optarg;
		return true;
	case O_SECRET:
		cl->o.secret_file = optarg;
		return true;
	case O_METRICS:
		cl->o.metrics = optarg;
		return true;
	case O_FROM:
		cl->from = atof(optarg);
		return true;
	case O_TO:
		cl->to = atof(optarg);
		return true;
	case O_STEPS:
		return num(optarg, &cl->steps) == 0;
	case O_STREAM:
		cl->stream = true;
		return true;
	case O_SLICE: {
		unsigned k, n;
		char end;

		if (sscanf(optarg, "%u/%u%c", &k, &n, &end) != 2 || n == 0 || k >= n)
			return false;
		cl->so.slice = k;
		cl->so.nslices = n;
		return true;
	}
	case O_RECORD_ONLY:
		cl->so.record = true;
		return true;
	case O_MAILDIR:
		cl->maildir = optarg;
		return true;
	case O_JOBS:
		return num(optarg, &cl->jobs) == 0 && cl->jobs <= 64;
	case O_HTML:
		cl->html = optarg;
		return true;
	case O_FILL_RECORD:
		cl->o.fill_record = optarg;
		return true;
	case O_FORCE:
		cl->o.force = true;
		return true;
	case O_SUT_CONFIG:
		cl->o.sut_config = optarg;
		return true;
	case O_SUT_VERSION:
		cl->o.sut_version = optarg;
		return true;
	case O_NOTES:
		cl->o.notes = optarg;
		return true;
	case O_SUT_PID:
		if (num(optarg, &v) < 0 || v == 0 || v > INT32_MAX || cl->o.nsut_pids == 16)
			return false;
		cl->o.sut_pids[cl->o.nsut_pids++] = (pid_t)v;
		return true;
	case 'q':
		cl->o.quiet = true;
		return true;
	case 'v':
		log_set_level(LOG_LVL_DEBUG);
		return true;
	}
	return opt_cfg(cl, c, optarg);
}

static void cli_init(struct cli *cl)
{
	memset(cl, 0, sizeof(*cl));
	ml_cfg_defaults(&cl->o.cfg, "small");
	cl->o.points[0] = 80;
	cl->o.points[1] = 100;
	cl->o.points[2] = 120;
	cl->o.npoints = 3;
	cl->base = "ou=people,dc=heron,dc=test";
	cl->to = 100000;
	cl->steps = 8;
}

/* mailload agent: a secret file is required, so no unauthenticated manager drives it. */
static int cmd_agent(const struct cli *cl)
{
	struct ctlauth_secret secret;
	char err[300];

	if (cl->listen == NULL || cl->o.secret_file == NULL) {
		fputs("mailload agent: --listen HOST:PORT and --secret-file FILE are needed\n",
		      stderr);
		return 2;
	}
	if (ctlauth_load(&secret, cl->o.secret_file, err, sizeof(err)) < 0) {
		fprintf(stderr, "mailload agent: %s\n", err);
		return 2;
	}
	if (cl->o.metrics != NULL && ml_metrics_listen(cl->o.metrics, 1) < 0)
		return 2;
	return agent_listen(cl->listen, &secret) < 0 ? 1 : 0;
}

/* The fill record of a fast path, next to what it filled (mailload run --fill-record). */
static int fill_file_write(const struct ml_cfg *c, const char *path)
{
	struct ml_fill f;
	char rec[400];
	FILE *fp = fopen(path, "w");

	ml_fill_of(c, &f);
	f.when_ms = clock_wall_ms();
	ml_fill_format(&f, rec, sizeof(rec));
	if (fp == NULL || fprintf(fp, "%s\n", rec) < 0 || fclose(fp) != 0) {
		fprintf(stderr, "mailload init: cannot write the fill record %s\n", path);
		return -1;
	}
	fprintf(stderr, "init: fill record in %s (mailload run --fill-record %s)\n", path, path);
	return 0;
}

/* The commands that drive agents. */
static int cmd_manager(const char *cmd, struct cli *cl)
{
	struct mgr_opts *o = &cl->o;
	char err[300];

	if (o->cfg.users_file[0] != '\0') { /* the users file is the population */
		if (!o->users_given)
			o->cfg.users = 0;
		if (ml_users_load(&o->cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "mailload %s: --users-file %s\n", cmd, err);
			return 2;
		}
		o->users_given = true;
	}
	if (!o->users_given)
		o->cfg.users = (uint64_t)(200.0 * o->cfg.rate + 0.5);
	if (strcmp(cmd, "init") == 0) {
		if (!o->users_given) {
			fputs("mailload init: --users N is needed\n", stderr);
			return 2;
		}
		if (cl->stream) {
			if (cl->so.nslices == 0)
				cl->so.nslices = 1;
			return init_stream_run(&o->cfg, &cl->so, o->quiet) < 0 ? 1 : 0;
		}
		if (cl->maildir != NULL) {
			if (init_maildir_run(&o->cfg, cl->maildir, (unsigned)cl->jobs, o->quiet) <
			    0)
				return 1;
			char path[4096];
			snprintf(path, sizeof(path), "%s/" ML_FILL_FILE, cl->maildir);
			return fill_file_write(&o->cfg, path) < 0 ? 1 : 0;
		}
		return mgr_init(o) < 0 ? 1 : 0;
	}
	if (strcmp(cmd, "run") == 0) {
		if (o->report_dir == NULL) {
			fputs("mailload run: --report DIR is needed\n", stderr);
			return 2;
		}
		int rc = mgr_run(o);
		return rc < 0 ? 2 : rc;
	}
	if (strcmp(cmd, "search") == 0) {
		if (cl->from <= 0 || o->report_dir == NULL) {
			fputs("mailload search: --from R0 and --report DIR are needed\n", stderr);
			return 2;
		}
		int rc = mgr_search(o, cl->from, cl->to, (uint32_t)cl->steps);
		return rc < 0 ? 2 : rc;
	}
	usage(stderr);
	return 2;
}

/* mailload compare A B: text on stdout, the page to --html FILE. */
static int cmd_compare(const struct cli *cl, int argc, char **argv)
{
	struct jv *a, *b;
	struct buf o;
	int rc = 0;

	if (argc - optind != 2) {
		subcmd_help("compare", stderr);
		return 2;
	}
	if ((a = report_load(argv[optind])) == NULL)
		return 2;
	if ((b = report_load(argv[optind + 1])) == NULL) {
		jv_free(&a);
		return 2;
	}
	buf_init(&o, 1 << 14, ML_REPORT_TEXT_MAX);
	report_compare_text(a, b, argv[optind], argv[optind + 1], &o);
	fwrite(o.data, 1, o.len, stdout);
	if (cl->html != NULL) {
		FILE *fp = fopen(cl->html, "w");
		buf_reset(&o);
		report_compare_html(a, b, argv[optind], argv[optind + 1], &o);
		if (fp == NULL || fwrite(o.data, 1, o.len, fp) != o.len || fclose(fp) != 0) {
			fprintf(stderr, "mailload compare: cannot write %s\n", cl->html);
			rc = 2;
		}
	}
	buf_release(&o);
	jv_free(&a);
	jv_free(&b);
	return rc;
}

/* The command line as typed, shell-quoted where needed, for the report; kept until exit (the
   options point at it from every return path of main). */
static char *ml_command_line;

static void command_line_free(void)
{
	free(ml_command_line);
	ml_command_line = NULL;
}

static char *command_line(int argc, char **argv)
{
	struct buf b;

	buf_init(&b, 256, ML_TEXT_MAX);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool plain = a[0] != '\0' &&
			     strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				       "0123456789-_.,/:=@%+") == strlen(a);
		if (i > 0)
			buf_putc(&b, ' ');
		if (plain) {
			buf_puts(&b, a);
			continue;
		}
		buf_putc(&b, '\'');
		for (; *a != '\0'; a++)
			*a == '\'' ? buf_puts(&b, "'\\''") : buf_putc(&b, *a);
		buf_putc(&b, '\'');
	}
	return buf_steal(&b, NULL);
}

int main(int argc, char **argv)
{
	struct cli cl;
	const char *cmd;
	bool bad = false;
	int c;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return 0;
	}
	log_init("mailload", true, 0);
	log_set_level(LOG_LVL_WARN);
	signal(SIGPIPE, SIG_IGN);
	cli_init(&cl);
	/* before getopt: --set edits argv */
	cl.o.command_line = ml_command_line = command_line(argc, argv);
	atexit(command_line_free);
	optind = 2;
	while ((c = getopt_long(argc, argv, "qvh", longopts, NULL)) != -1) {
		if (c == 'h')
			return subcmd_help(cmd, stdout) < 0 ? 2 : 0;
		bad |= !opt_one(&cl, c, argc, argv);
	}
	if (bad) {
		fprintf(stderr, "mailload %s: bad option (mailload %s --help)\n", cmd, cmd);
		return 2;
	}
	if (strcmp(cmd, "compare") == 0)
		return cmd_compare(&cl, argc, argv);
	if (strcmp(cmd, "ldif") == 0)
		return cmd_ldif(cl.o.cfg.users, cl.o.cfg.domain, cl.base, cl.ou, cl.o.cfg.password,
				cl.hosts);
	if (strcmp(cmd, "agent") == 0)
		return cmd_agent(&cl);
	if (strcmp(cmd, "report") == 0) {
		if (optind >= argc) {
			fputs("mailload report: DIR is needed\n", stderr);
			return 2;
		}
		return report_render_dir(argv[optind], true) < 0 ? 1 : 0;
	}
	return cmd_manager(cmd, &cl);
}

/* mailload.c — owns the command line: ldif, init, run, search, agent and report. Everything
 * else is the manager's (manager.c), an agent's (agent.c), the LDIF writer's (ldif.c) or, for
 * init straight into a Heron store or a Dovecot Maildir root, init_store.c's and
 * init_maildir.c's. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/str.h"
#include "mailload/agent.h"
#include "mailload/ctlauth.h"
#include "mailload/init_store.h"
#include "mailload/manager.h"
#include "mailload/report.h"

static void usage(FILE *fp)
{
	fputs("usage: mailload ldif --users N [--domain D] [--base DN] [--ou]\n"
	      "       mailload init --target HOST --users N [--profile P] [--seed S] [options]\n"
	      "       mailload init --heron-conf FILE --users N [--profile P] [--seed S] [--jobs J]\n"
	      "       mailload init --maildir ROOT --users N [--profile P] [--seed S] [--jobs J]\n"
	      "       mailload run --rate R [--users N] [--phases 300/1800/120]\n"
	      "                    [--load-points 80,100,120] [--agents host:port,...] [--tls MODE]\n"
	      "                    [--sink HOST:PORT] --report DIR [options]\n"
	      "       mailload search --from R0 [--to R1] [--steps N] --report DIR [options]\n"
	      "       mailload agent --listen HOST:PORT --secret-file FILE\n"
	      "       mailload report DIR\n"
	      "options: --target HOST --smtp-port P --submission-port P --imap-port P\n"
	      "         --domain D --ext-domain D --password PW --profile tiny|small|corporate|FILE\n"
	      "         --seed S --drain S --timeout S --probes N --local-agents N\n"
	      "         --secret-file FILE (remote agents' shared secret)\n"
	      "         --set KEY=VALUE -q (no live line) -v (debug log)\n"
	      "see mailload(1)\n",
	      fp);
}

static int cmd_ldif(uint64_t users, const char *domain, const char *base, bool ou,
		    const char *password)
{
	if (users == 0) {
		fputs("mailload ldif: --users N is needed\n", stderr);
		return 2;
	}
	return ml_ldif_write(stdout, users, domain, base, ou, password) == 0 ? 0 : 1;
}

static int parse_phases(const char *s, struct ml_cfg *c)
{
	return sscanf(s, "%" SCNu64 "/%" SCNu64 "/%" SCNu64, &c->ramp_s, &c->steady_s, &c->down_s) ==
			       3
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
	O_USERS = 256, O_DOMAIN, O_EXT, O_BASE, O_OU, O_TARGET, O_SMTP_PORT, O_SUB_PORT, O_IMAP_PORT,
	O_PASSWORD, O_PROFILE, O_SEED, O_RATE, O_PHASES, O_POINTS, O_AGENTS, O_LOCAL, O_TLS, O_SINK,
	O_REPORT, O_TIMEOUT, O_PROBES, O_SET, O_DRAIN, O_LISTEN, O_FROM, O_TO, O_STEPS,
	O_SECRET, O_HERON_CONF, O_MAILDIR, O_JOBS,
};

static const struct option longopts[] = {
	{ "users", required_argument, NULL, O_USERS },
	{ "domain", required_argument, NULL, O_DOMAIN },
	{ "ext-domain", required_argument, NULL, O_EXT },
	{ "base", required_argument, NULL, O_BASE },
	{ "ou", no_argument, NULL, O_OU },
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
	{ "heron-conf", required_argument, NULL, O_HERON_CONF },
	{ "maildir", required_argument, NULL, O_MAILDIR },
	{ "jobs", required_argument, NULL, O_JOBS },
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
	const char *heron_conf; /* init straight into this Heron configuration's store */
	const char *maildir;    /* init straight into Maildir++ trees under this root */
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
	case O_DOMAIN: return ml_cfg_set(cfg, "domain", arg, &err) == 0;
	case O_EXT: return ml_cfg_set(cfg, "ext_domain", arg, &err) == 0;
	case O_TARGET:
		return ml_cfg_set(cfg, "smtp_host", arg, &err) == 0 &&
		       ml_cfg_set(cfg, "submit_host", arg, &err) == 0 &&
		       ml_cfg_set(cfg, "imap_host", arg, &err) == 0;
	case O_SMTP_PORT: return num(arg, &cfg->smtp_port) == 0;
	case O_SUB_PORT: return num(arg, &cfg->submit_port) == 0;
	case O_IMAP_PORT: return num(arg, &cfg->imap_port) == 0;
	case O_PASSWORD: return ml_cfg_set(cfg, "password", arg, &err) == 0;
	case O_PROFILE: return set_profile(cfg, arg) == 0;
	case O_SEED: return num(arg, &cfg->seed) == 0;
	case O_RATE: return (cfg->rate = atof(arg)) > 0;
	case O_PHASES: return parse_phases(arg, cfg) == 0;
	case O_TLS:
		return (strcmp(arg, "none") == 0 || strcmp(arg, "starttls") == 0 ||
			strcmp(arg, "implicit") == 0) &&
		       ml_cfg_set(cfg, "tls", arg, &err) == 0;
	case O_TIMEOUT: return num(arg, &cfg->timeout_s) == 0;
	case O_PROBES: return num(arg, &cfg->probe_max) == 0;
	case O_DRAIN: return num(arg, &cfg->drain_s) == 0;
	}
	return false;
}

/* One option; false on a bad one. */
static bool opt_one(struct cli *cl, int c, int argc, char **argv)
{
	uint64_t v;

	switch (c) {
	case O_USERS: cl->o.users_given = true; return num(optarg, &cl->o.cfg.users) == 0;
	case O_BASE: cl->base = optarg; return true;
	case O_OU: cl->ou = true; return true;
	case O_POINTS: return parse_points(optarg, &cl->o) == 0;
	case O_AGENTS: cl->o.agents = optarg; return true;
	case O_LOCAL:
		if (num(optarg, &v) < 0 || v == 0 || v > 1024)
			return false;
		cl->o.local_agents = (uint32_t)v;
		return true;
	case O_SINK: cl->o.sink = optarg; return true;
	case O_REPORT: cl->o.report_dir = optarg; return true;
	case O_SET: return opt_set(cl, optarg, argc, argv);
	case O_LISTEN: cl->listen = optarg; return true;
	case O_SECRET: cl->o.secret_file = optarg; return true;
	case O_FROM: cl->from = atof(optarg); return true;
	case O_TO: cl->to = atof(optarg); return true;
	case O_STEPS: return num(optarg, &cl->steps) == 0;
	case O_HERON_CONF: cl->heron_conf = optarg; return true;
	case O_MAILDIR: cl->maildir = optarg; return true;
	case O_JOBS: return num(optarg, &cl->jobs) == 0 && cl->jobs <= 64;
	case 'q': cl->o.quiet = true; return true;
	case 'v': log_set_level(LOG_LVL_DEBUG); return true;
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
	return agent_listen(cl->listen, &secret) < 0 ? 1 : 0;
}

/* The commands that drive agents. */
static int cmd_manager(const char *cmd, struct cli *cl)
{
	struct mgr_opts *o = &cl->o;

	if (!o->users_given)
		o->cfg.users = (uint64_t)(200.0 * o->cfg.rate + 0.5);
	if (strcmp(cmd, "init") == 0) {
		if (!o->users_given) {
			fputs("mailload init: --users N is needed\n", stderr);
			return 2;
		}
		if (cl->heron_conf != NULL)
			return init_store_run(&o->cfg, cl->heron_conf, (unsigned)cl->jobs, o->quiet) < 0
				       ? 1
				       : 0;
		if (cl->maildir != NULL)
			return init_maildir_run(&o->cfg, cl->maildir, (unsigned)cl->jobs, o->quiet) < 0
				       ? 1
				       : 0;
		return mgr_init(o) < 0 ? 1 : 0;
	}
	if (strcmp(cmd, "run") == 0) {
		int rc = mgr_run(o);
		return rc < 0 ? 2 : rc;
	}
	if (strcmp(cmd, "search") == 0) {
		if (cl->from <= 0 || o->report_dir == NULL) {
			fputs("mailload search: --from R0 and --report DIR are needed\n", stderr);
			return 2;
		}
		return mgr_search(o, cl->from, cl->to, (uint32_t)cl->steps) < 0 ? 2 : 0;
	}
	usage(stderr);
	return 2;
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
	optind = 2;
	while ((c = getopt_long(argc, argv, "qvh", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		bad |= !opt_one(&cl, c, argc, argv);
	}
	if (bad) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "ldif") == 0)
		return cmd_ldif(cl.o.cfg.users, cl.o.cfg.domain, cl.base, cl.ou, cl.o.cfg.password);
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

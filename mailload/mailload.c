/* mailload.c — owns the command line: ldif, init, run, search, agent and report, and the LDIF
 * writer. Everything else is the manager's (manager.c), an agent's (agent.c) or, for init
 * straight into a Heron store or a Dovecot Maildir root, init_store.c's and init_maildir.c's. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "common/log.h"
#include "common/str.h"
#include "mailload/agent.h"
#include "mailload/init_store.h"
#include "mailload/manager.h"
#include "mailload/report.h"

static void usage(FILE *fp)
{
	fputs("usage: mailload ldif --users N [--domain D] [--base DN] [--ou] [--hashed]\n"
	      "       mailload init --target HOST --users N [--profile P] [--seed S] [options]\n"
	      "       mailload init --heron-conf FILE --users N [--profile P] [--seed S] [--jobs J]\n"
	      "       mailload init --maildir ROOT --users N [--profile P] [--seed S] [--jobs J]\n"
	      "       mailload run --rate R [--users N] [--phases 300/1800/120]\n"
	      "                    [--load-points 80,100,120] [--agents host:port,...] [--tls MODE]\n"
	      "                    [--sink HOST:PORT] --report DIR [options]\n"
	      "       mailload search --from R0 [--to R1] [--steps N] --report DIR [options]\n"
	      "       mailload agent --listen HOST:PORT\n"
	      "       mailload report DIR\n"
	      "options: --target HOST --smtp-port P --submission-port P --imap-port P\n"
	      "         --domain D --ext-domain D --password PW --profile tiny|small|corporate|FILE\n"
	      "         --seed S --drain S --timeout S --probes N --local-agents N\n"
	      "         --set KEY=VALUE -q (no live line) -v (debug log)\n"
	      "see mailload(1)\n",
	      fp);
}

/* {SSHA} of pw (RFC 2307 style: base64 of SHA-1(pw || salt) || salt), the salt made from n so
   the LDIF stays deterministic. out: at least 48 bytes. */
static void ssha(const char *pw, uint64_t n, char *out)
{
	unsigned char d[20 + 8];
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	for (int i = 0; i < 8; i++)
		d[20 + i] = (unsigned char)((n >> (8 * i)) ^ 0x5a);
	if (c == NULL || EVP_DigestInit_ex(c, EVP_sha1(), NULL) != 1 ||
	    EVP_DigestUpdate(c, pw, strlen(pw)) != 1 || EVP_DigestUpdate(c, d + 20, 8) != 1 ||
	    EVP_DigestFinal_ex(c, d, NULL) != 1)
		fatalx("sha1");
	EVP_MD_CTX_free(c);
	memcpy(out, "{SSHA}", 6);
	EVP_EncodeBlock((unsigned char *)out + 6, d, (int)sizeof(d));
}

static int cmd_ldif(uint64_t users, const char *domain, const char *base, bool ou, bool hashed)
{
	char pw[32], hash[64];

	if (users == 0) {
		fputs("mailload ldif: --users N is needed\n", stderr);
		return 2;
	}
	if (ou)
		printf("dn: %s\nobjectClass: organizationalUnit\nou: people\n\n", base);
	for (uint64_t i = 1; i <= users; i++) {
		snprintf(pw, sizeof(pw), "user%" PRIu64, i);
		if (hashed)
			ssha(pw, i, hash);
		printf("dn: uid=user%" PRIu64 ",%s\nobjectClass: inetOrgPerson\nuid: user%" PRIu64
		       "\ncn: User %" PRIu64 "\nsn: User%" PRIu64 "\nmail: user%" PRIu64
		       "@%s\nuserPassword: %s\n\n",
		       i, base, i, i, i, i, domain, hashed ? hash : pw);
	}
	return fflush(stdout) == 0 ? 0 : 1;
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
	O_HERON_CONF, O_MAILDIR, O_JOBS, O_HASHED,
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
	{ "heron-conf", required_argument, NULL, O_HERON_CONF },
	{ "maildir", required_argument, NULL, O_MAILDIR },
	{ "jobs", required_argument, NULL, O_JOBS },
	{ "hashed", no_argument, NULL, O_HASHED },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int num(const char *s, uint64_t *v)
{
	return str_to_u64(s, strlen(s), UINT64_MAX, v);
}

int main(int argc, char **argv)
{
	struct mgr_opts o;
	const char *cmd, *base = "ou=people,dc=heron,dc=test", *listen = NULL, *err;
	const char *heron_conf = NULL, *maildir = NULL;
	bool ou = false, hashed = false, bad = false;
	double from = 0, to = 100000;
	uint64_t steps = 8, jobs = 0, v;
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
	memset(&o, 0, sizeof(o));
	ml_cfg_defaults(&o.cfg, "small");
	o.points[0] = 80;
	o.points[1] = 100;
	o.points[2] = 120;
	o.npoints = 3;
	optind = 2;
	while ((c = getopt_long(argc, argv, "qvh", longopts, NULL)) != -1) {
		switch (c) {
		case O_USERS: bad |= num(optarg, &o.cfg.users) < 0; o.users_given = true; break;
		case O_DOMAIN: bad |= ml_cfg_set(&o.cfg, "domain", optarg, &err) < 0; break;
		case O_EXT: bad |= ml_cfg_set(&o.cfg, "ext_domain", optarg, &err) < 0; break;
		case O_BASE: base = optarg; break;
		case O_OU: ou = true; break;
		case O_TARGET:
			bad |= ml_cfg_set(&o.cfg, "smtp_host", optarg, &err) < 0 ||
			       ml_cfg_set(&o.cfg, "submit_host", optarg, &err) < 0 ||
			       ml_cfg_set(&o.cfg, "imap_host", optarg, &err) < 0;
			break;
		case O_SMTP_PORT: bad |= num(optarg, &o.cfg.smtp_port) < 0; break;
		case O_SUB_PORT: bad |= num(optarg, &o.cfg.submit_port) < 0; break;
		case O_IMAP_PORT: bad |= num(optarg, &o.cfg.imap_port) < 0; break;
		case O_PASSWORD: bad |= ml_cfg_set(&o.cfg, "password", optarg, &err) < 0; break;
		case O_PROFILE: bad |= set_profile(&o.cfg, optarg) < 0; break;
		case O_SEED: bad |= num(optarg, &o.cfg.seed) < 0; break;
		case O_RATE: o.cfg.rate = atof(optarg); bad |= o.cfg.rate <= 0; break;
		case O_PHASES: bad |= parse_phases(optarg, &o.cfg) < 0; break;
		case O_POINTS: bad |= parse_points(optarg, &o) < 0; break;
		case O_AGENTS: o.agents = optarg; break;
		case O_LOCAL: bad |= num(optarg, &v) < 0; o.local_agents = (uint32_t)v; break;
		case O_TLS:
			bad |= strcmp(optarg, "none") != 0 && strcmp(optarg, "starttls") != 0 &&
			       strcmp(optarg, "implicit") != 0;
			bad |= ml_cfg_set(&o.cfg, "tls", optarg, &err) < 0;
			break;
		case O_SINK: o.sink = optarg; break;
		case O_REPORT: o.report_dir = optarg; break;
		case O_TIMEOUT: bad |= num(optarg, &o.cfg.timeout_s) < 0; break;
		case O_PROBES: bad |= num(optarg, &o.cfg.probe_max) < 0; break;
		case O_DRAIN: bad |= num(optarg, &o.cfg.drain_s) < 0; break;
		case O_SET: {
			char *eq = strchr(optarg, '=');
			const char *val;
			if (eq != NULL) {
				*eq = '\0';
				val = eq + 1;
			} else if (optind < argc) { /* --set KEY VALUE */
				val = argv[optind++];
			} else {
				bad = true;
				break;
			}
			if (ml_cfg_set(&o.cfg, optarg, val, &err) < 0) {
				fprintf(stderr, "mailload: --set %s: %s\n", optarg, err);
				bad = true;
			}
			break;
		}
		case O_LISTEN: listen = optarg; break;
		case O_FROM: from = atof(optarg); break;
		case O_TO: to = atof(optarg); break;
		case O_STEPS: bad |= num(optarg, &steps) < 0; break;
		case O_HERON_CONF: heron_conf = optarg; break;
		case O_MAILDIR: maildir = optarg; break;
		case O_JOBS: bad |= num(optarg, &jobs) < 0 || jobs > 64; break;
		case O_HASHED: hashed = true; break;
		case 'q': o.quiet = true; break;
		case 'v': log_set_level(LOG_LVL_DEBUG); break;
		case 'h': usage(stdout); return 0;
		default: bad = true;
		}
	}
	if (bad) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "ldif") == 0)
		return cmd_ldif(o.cfg.users, o.cfg.domain, base, ou, hashed);
	if (strcmp(cmd, "agent") == 0) {
		if (listen == NULL) {
			fputs("mailload agent: --listen HOST:PORT is needed\n", stderr);
			return 2;
		}
		return agent_listen(listen) < 0 ? 1 : 0;
	}
	if (strcmp(cmd, "report") == 0) {
		if (optind >= argc) {
			fputs("mailload report: DIR is needed\n", stderr);
			return 2;
		}
		return report_render_dir(argv[optind], true) < 0 ? 1 : 0;
	}
	if (!o.users_given)
		o.cfg.users = (uint64_t)(200.0 * o.cfg.rate + 0.5);
	if (strcmp(cmd, "init") == 0) {
		if (!o.users_given) {
			fputs("mailload init: --users N is needed\n", stderr);
			return 2;
		}
		if (heron_conf != NULL)
			return init_store_run(&o.cfg, heron_conf, (unsigned)jobs, o.quiet) < 0 ? 1 : 0;
		if (maildir != NULL)
			return init_maildir_run(&o.cfg, maildir, (unsigned)jobs, o.quiet) < 0 ? 1 : 0;
		return mgr_init(&o) < 0 ? 1 : 0;
	}
	if (strcmp(cmd, "run") == 0) {
		int rc = mgr_run(&o);
		return rc < 0 ? 2 : rc;
	}
	if (strcmp(cmd, "search") == 0) {
		if (from <= 0 || o.report_dir == NULL) {
			fputs("mailload search: --from R0 and --report DIR are needed\n", stderr);
			return 2;
		}
		return mgr_search(&o, from, to, (uint32_t)steps) < 0 ? 2 : 0;
	}
	usage(stderr);
	return 2;
}

/* manager.c — owns the manager: agents (forked locally over socketpairs, or remote over TCP),
 * the phases and the live status line, the exact merge of agent results, the delivery
 * accounting (delivered, lost, duplicated per recipient), the sink client, init, search. */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/histo.h"
#include "common/log.h"
#include "common/str.h"
#include "common/version.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/ctlauth.h"
#include "mailload/json.h"
#include "mailload/manager.h"
#include "mailload/report.h"

#define MGR_LINE_MAX ((size_t)1 << 30)
#define MGR_AGENTS_MAX 64

struct mgr_agent {
	FILE *r, *w;
	pid_t pid;
	char name[80];
	int64_t offset_ms; /* the agent's clock minus ours */
	int64_t rtt_ms;
};

/* ---- agents ---- */
/* Reads one reply line of a into *resp_r. */
static int agent_read(struct mgr_agent *a, struct jv **resp_r)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, a->r);
	const char *err;
	int rc = -1;

	if (n > 0 && (size_t)n <= MGR_LINE_MAX)
		rc = jv_parse(line, (size_t)n, resp_r, &err);
	free(line);
	return rc < 0 ? -1 : 0;
}

static int agent_request(struct mgr_agent *a, const char *req, struct jv **resp_r)
{
	if (fputs(req, a->w) == EOF || fputc('\n', a->w) == EOF || fflush(a->w) == EOF)
		return -1;
	if (agent_read(a, resp_r) < 0)
		return -1;
	if (jv_get(*resp_r, "ok") == NULL || !jv_get(*resp_r, "ok")->b) {
		log_warnx("agent %s: %s", a->name, jv_str(*resp_r, "error", "error"));
		jv_free(resp_r);
		return -1;
	}
	return 0;
}

/* The challenge-response of ctlauth.h, manager side: we answer the agent's challenge, and the
   agent must answer ours. */
static int agent_auth(struct mgr_agent *a, const struct ctlauth_secret *secret)
{
	struct jv *hello = NULL, *resp = NULL;
	char nonce[CTLAUTH_NONCE_HEX], mac[CTLAUTH_MAC_HEX], req[256];
	int rc = -1;

	if (agent_read(a, &hello) < 0 ||
	    strcmp(jv_str(hello, "hello", ""), "mailload-agent") != 0 ||
	    strlen(jv_str(hello, "nonce", "")) != CTLAUTH_NONCE_HEX - 1) {
		log_warnx("agent %s: no mailload agent greeting", a->name);
		goto out;
	}
	ctlauth_nonce(nonce);
	ctlauth_mac(secret, "manager", jv_str(hello, "nonce", ""), mac);
	snprintf(req, sizeof(req), "{\"cmd\":\"auth\",\"nonce\":\"%s\",\"mac\":\"%s\"}", nonce,
		 mac);
	if (agent_request(a, req, &resp) < 0) {
		log_warnx("agent %s refused our secret", a->name);
		goto out;
	}
	if (!ctlauth_check(secret, "agent", nonce, jv_str(resp, "mac", ""))) {
		log_warnx("agent %s does not know the secret", a->name);
		goto out;
	}
	rc = 0;
out:
	jv_free(&hello);
	jv_free(&resp);
	return rc;
}

static int tcp_connect(const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = { 0 }, *res, *ai;
	int fd = -1;

	if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host))
		return -1;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static int agent_open_fd(struct mgr_agent *a, int fd)
{
	int fd2 = dup(fd);

	a->r = fdopen(fd, "r");
	a->w = fdopen(fd2, "w");
	return a->r != NULL && a->w != NULL ? 0 : -1;
}

static void agents_stop(struct mgr_agent *as, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		fputs("{\"cmd\":\"quit\"}\n", as[i].w);
		fflush(as[i].w);
		char *line = NULL;
		size_t cap = 0;
		if (getline(&line, &cap, as[i].r) < 0)
			log_debug("agent %s: no reply to quit", as[i].name);
		free(line);
		fclose(as[i].r);
		fclose(as[i].w);
		if (as[i].pid > 0)
			waitpid(as[i].pid, NULL, 0);
	}
	free(as);
}

/* Connects to the agents of o->agents; n_r counts those connected, also on failure. */
static int agents_connect(const char *list_text, struct mgr_agent *as, uint32_t *n_r)
{
	char *list = xstrdup(list_text), *save = NULL;
	int rc = 0;

	for (char *tok = strtok_r(list, ",", &save); tok != NULL && *n_r < MGR_AGENTS_MAX;
	     tok = strtok_r(NULL, ",", &save)) {
		int fd = tcp_connect(tok);
		if (fd < 0) {
			log_warnx("cannot connect to agent %s", tok);
			rc = -1;
			break;
		}
		str_lcpy(as[*n_r].name, tok, sizeof(as[*n_r].name));
		agent_open_fd(&as[(*n_r)++], fd);
	}
	free(list);
	return rc;
}

/* Forks n local agents, each on a socketpair, knowing secret. */
static void agents_fork(struct mgr_agent *as, uint32_t n, const struct ctlauth_secret *secret)
{
	fflush(NULL);
	for (uint32_t i = 0; i < n; i++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			fatal("socketpair");
		pid_t pid = fork();
		if (pid < 0)
			fatal("fork");
		if (pid == 0) {
			ml_metrics_set_index(i);
			close(sv[0]);
			for (uint32_t j = 0; j < i; j++) { /* siblings' control ends */
				fclose(as[j].r);
				fclose(as[j].w);
			}
			agent_serve_fd(sv[1], secret);
			_exit(0);
		}
		close(sv[1]);
		as[i].pid = pid;
		snprintf(as[i].name, sizeof(as[i].name), "local%u(pid %d)", i, (int)pid);
		agent_open_fd(&as[i], sv[0]);
	}
}

/* Remote agents (o->agents) need the secret they were started with (o->secret_file); local
   ones get a fresh random secret. Every agent must pass the challenge-response. */
static int agents_start(struct mgr_opts *o, struct mgr_agent **as_r, uint32_t *n_r)
{
	struct ctlauth_secret secret;
	struct mgr_agent *as;
	uint32_t n = 0;
	char err[300];
	int rc = 0;

	if (o->secret_file != NULL) {
		if (ctlauth_load(&secret, o->secret_file, err, sizeof(err)) < 0) {
			log_warnx("%s", err);
			return -1;
		}
	} else if (o->agents != NULL) {
		log_warnx("remote agents need --secret-file (the one they were started with)");
		return -1;
	} else {
		ctlauth_generate(&secret);
	}
	if (o->agents != NULL) {
		if (o->metrics != NULL)
			log_warnx(
				"--metrics serves local agents only: start each remote agent with "
				"--metrics");
		as = xcalloc(MGR_AGENTS_MAX, sizeof(*as));
		rc = agents_connect(o->agents, as, &n);
	} else {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		n = o->local_agents ? o->local_agents : (uint32_t)(cores > 0 ? cores : 1);
		if (o->metrics != NULL && ml_metrics_listen(o->metrics, n) < 0) {
			OPENSSL_cleanse(&secret, sizeof(secret));
			return -1;
		}
		as = xcalloc(n, sizeof(*as));
		agents_fork(as, n, &secret);
	}
	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = agent_auth(&as[i], &secret);
	OPENSSL_cleanse(&secret, sizeof(secret));
	if (rc < 0) {
		agents_stop(as, n);
		return -1;
	}
	*as_r = as;
	*n_r = n;
	return 0;
}

/* Sends each agent its configuration with its share of the users. */
static int agents_setup(struct mgr_agent *as, uint32_t n, const struct ml_cfg *base)
{
	for (uint32_t i = 0; i < n; i++) {
		struct ml_cfg c = *base;
		struct buf req;
		struct jv *resp = NULL;
		int rc;

		c.agent = i;
		c.nagents = n;
		c.user_lo = 1 + base->users * i / n;
		c.user_hi = 1 + base->users * (i + 1) / n;
		if (c.user_hi <= c.user_lo) { /* more agents than users: give it one anyway */
			log_warnx("agent %s has no users; use fewer agents", as[i].name);
			return -1;
		}
		buf_init(&req, 4096, ML_DOC_MAX);
		buf_puts(&req, "{\"cmd\":\"setup\",\"cfg\":{");
		ml_cfg_json(&c, &req);
		buf_puts(&req, "}}");
		rc = agent_request(&as[i], buf_cstr(&req), &resp);
		buf_release(&req);
		jv_free(&resp);
		if (rc < 0) {
			log_warnx("agent %s refused the set-up", as[i].name);
			return -1;
		}
	}
	return 0;
}

/* Measures each agent's clock offset (its clock minus ours, from the midpoint of a status
   round trip), then starts every agent at the same instant t0 in its own clock. */
static int agents_start_phases(struct mgr_agent *as, uint32_t n, int64_t t0)
{
	char req[96];

	for (uint32_t i = 0; i < n; i++) {
		struct jv *resp = NULL;
		int64_t before = clock_wall_ms();
		if (agent_request(&as[i], "{\"cmd\":\"status\"}", &resp) < 0)
			return -1;
		int64_t after = clock_wall_ms();
		as[i].rtt_ms = after - before;
		as[i].offset_ms = jv_int(resp, "now_ms", before) - (before + after) / 2;
		jv_free(&resp);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct jv *resp = NULL;
		snprintf(req, sizeof(req), "{\"cmd\":\"start\",\"t0_ms\":%" PRId64 "}",
			 t0 + as[i].offset_ms);
		if (agent_request(&as[i], req, &resp) < 0)
			return -1;
		jv_free(&resp);
	}
	return 0;
}

/* ---- the sink ---- */
static int sink_cmd(FILE *r, FILE *w, const char *req, struct jv **resp)
{
	char *line = NULL;
	size_t cap = 0;
	const char *err;
	ssize_t n;

	fprintf(w, "%s\n", req);
	fflush(w);
	n = getline(&line, &cap, r);
	if (n <= 0 || jv_parse(line, (size_t)n, resp, &err) < 0) {
		free(line);
		return -1;
	}
	free(line);
	return 0;
}

/* Collects every record of the sink into an array (jv built by hand); *next_r gets the
   highest sink sequence number it covered. */
static struct jv *sink_records(const char *hostport, uint64_t *next_r, char *note, size_t notelen)
{
	int fd = tcp_connect(hostport);
	FILE *r, *w;
	struct jv *arr = NULL, *fin = NULL;
	struct buf all;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	const char *err;

	if (fd < 0) {
		snprintf(note, notelen, "sink control %s unreachable: remote copies unchecked",
			 hostport);
		return NULL;
	}
	r = fdopen(fd, "r");
	w = fdopen(dup(fd), "w");
	buf_init(&all, 4096, MGR_LINE_MAX);
	buf_putc(&all, '[');
	fprintf(w, "{\"cmd\":\"records\",\"since\":0}\n");
	fflush(w);
	bool first = true, ok = false;
	while ((n = getline(&line, &cap, r)) > 0) {
		if (strstr(line, "\"seq\"") == NULL) {
			ok = jv_parse(line, (size_t)n, &fin, &err) == 0 &&
			     jv_get(fin, "ok") != NULL && jv_get(fin, "ok")->b;
			*next_r = (uint64_t)jv_int(fin, "next", 0);
			jv_free(&fin);
			break;
		}
		if (!first)
			buf_putc(&all, ',');
		buf_append(&all, line, (size_t)n);
		first = false;
	}
	buf_putc(&all, ']');
	free(line);
	fclose(r);
	fclose(w);
	if (!ok || jv_parse(all.data, all.len, &arr, &err) < 0) {
		snprintf(note, notelen, "sink %s gave no valid records: remote copies unchecked",
			 hostport);
		arr = NULL;
	} else {
		snprintf(note, notelen, "sink %s: %zu records", hostport, arr->n);
	}
	buf_release(&all);
	return arr;
}

/* One request to the sink's control port; the reply, or NULL. */
static struct jv *sink_request(const char *hostport, const char *req)
{
	int fd = tcp_connect(hostport);
	struct jv *resp = NULL;

	if (fd < 0)
		return NULL;
	FILE *r = fdopen(fd, "r"), *w = fdopen(dup(fd), "w");
	if (sink_cmd(r, w, req, &resp) < 0)
		resp = NULL;
	fclose(r);
	fclose(w);
	return resp;
}

static void sink_reset(const char *hostport)
{
	struct jv *resp = sink_request(hostport, "{\"cmd\":\"reset\"}");

	jv_free(&resp);
}

/* ---- running ---- */
static void status_line(struct mgr_agent *as, uint32_t n, const struct ml_cfg *c, int64_t t0,
			bool init, bool quiet, bool *done_r)
{
	uint64_t steps = 0, errors = 0, open = 0, init_done = 0, init_msgs = 0;
	const char *phase = "done", *worst = NULL;
	double worst_pct = 101;
	bool done = true;
	static uint64_t last_steps;
	static int64_t last_ms;
	int64_t now = clock_wall_ms();

	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		if (agent_request(&as[i], "{\"cmd\":\"status\"}", &r) < 0) {
			log_warnx("agent %s stopped answering", as[i].name);
			*done_r = true;
			return;
		}
		static char phbuf[16];
		const char *ph = jv_str(r, "phase", "?");
		if (strcmp(ph, "done") != 0) {
			done = false;
			if (strcmp(phase, "done") == 0) { /* the first agent not done names it */
				str_lcpy(phbuf, ph, sizeof(phbuf));
				phase = phbuf;
			}
		}
		steps += (uint64_t)jv_int(r, "steps", 0);
		errors += (uint64_t)jv_int(r, "errors", 0);
		open += (uint64_t)(jv_int(r, "open_smtp", 0) + jv_int(r, "open_imap", 0));
		init_done += (uint64_t)jv_int(r, "init_done", 0);
		init_msgs += (uint64_t)jv_int(r, "init_msgs", 0);
		double wp = jv_num(r, "worst_pct", 101);
		if (wp < worst_pct && jv_str(r, "worst", NULL) != NULL) {
			worst_pct = wp;
			static char wbuf[64];
			str_lcpy(wbuf, jv_str(r, "worst", ""), sizeof(wbuf));
			worst = wbuf;
		}
		jv_free(&r);
	}
	*done_r = done;
	if (quiet)
		return;
	if (init) {
		int w = 40,
		    fill = (int)(40.0 * (double)init_done / (double)(c->users ? c->users : 1));
		fprintf(stderr,
			"\r[%.*s%*s] %" PRIu64 "/%" PRIu64 " users, %" PRIu64 " messages  ", fill,
			"########################################", w - fill, "", init_done,
			c->users, init_msgs);
		return;
	}
	int64_t end = t0 + (int64_t)(c->ramp_s + c->steady_s + c->down_s) * 1000;
	double sps = last_ms && now > last_ms
			     ? (double)(steps - last_steps) * 1000.0 / (double)(now - last_ms)
			     : 0;
	last_steps = steps;
	last_ms = now;
	fprintf(stderr,
		"\r%-9s %5" PRId64 "s left  open %5" PRIu64 "  steps/s %7.1f  errors %" PRIu64
		"  worst %s %.1f%%    ",
		phase, end > now ? (end - now) / 1000 : 0, open, sps, errors,
		worst != NULL ? worst : "-", worst != NULL ? worst_pct : 100.0);
}

static int run_agents_until_done(struct mgr_agent *as, uint32_t n, const struct ml_cfg *c,
				 int64_t t0, bool init, bool quiet)
{
	bool done = false;
	int64_t limit = t0 +
			(int64_t)(c->ramp_s + c->steady_s + c->down_s + c->drain_s + 120) * 1000;

	while (!done) {
		sleep(1);
		status_line(as, n, c, t0, init, quiet, &done);
		if (!init && clock_wall_ms() > limit) {
			log_warnx("agents did not finish in time; collecting what they have");
			break;
		}
	}
	if (!quiet)
		fputc('\n', stderr);
	return 0;
}

/* Asks agent a for user1's fill record (record NULL) or to write it; waits up to 60 s. The
   record found goes to found (empty: none). 0, or -1 with why. */
static int agent_fillrec(struct mgr_agent *a, const char *record, char *found, size_t nfound,
			 char *why, size_t nwhy)
{
	struct buf req;
	struct jv *r = NULL;
	int rc = -1;

	buf_init(&req, 512, 2 * ML_LINE_MAX);
	buf_puts(&req, "{\"cmd\":\"fillrec\"");
	if (record != NULL) {
		buf_puts(&req, ",\"record\":");
		json_put_str(&req, record);
	}
	buf_putc(&req, '}');
	snprintf(why, nwhy, "the agent did not answer");
	if (agent_request(a, buf_cstr(&req), &r) < 0)
		goto out;
	for (int i = 0; i < 600; i++) {
		jv_free(&r);
		if (agent_request(a, "{\"cmd\":\"status\"}", &r) < 0)
			goto out;
		const char *st = jv_str(r, "fill_state", "running");
		if (strcmp(st, "running") == 0) {
			usleep(100000);
			continue;
		}
		if (strcmp(st, "done") == 0) {
			str_lcpy(found, jv_str(r, "fill_found", ""), nfound);
			rc = 0;
		} else {
			snprintf(why, nwhy, "%s", jv_str(r, "fill_error", "failed"));
		}
		goto out;
	}
	snprintf(why, nwhy, "no answer from the server in 60 s");
out:
	jv_free(&r);
	buf_release(&req);
	return rc;
}

int mgr_init(struct mgr_opts *o)
{
	struct mgr_agent *as;
	uint32_t n;
	struct ml_cfg c = o->cfg;

	str_lcpy(c.mode, "init", ML_STR);
	if (agents_start(o, &as, &n) < 0)
		return -1;
	if (n > c.users)
		n = (uint32_t)c.users; /* extra local agents just idle */
	if (agents_setup(as, n, &c) < 0 || agents_start_phases(as, n, clock_wall_ms()) < 0) {
		agents_stop(as, n);
		return -1;
	}
	run_agents_until_done(as, n, &c, clock_wall_ms(), true, o->quiet);
	uint64_t errors = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		if (agent_request(&as[i], "{\"cmd\":\"status\"}", &r) == 0)
			errors += (uint64_t)jv_int(r, "errors", 0);
		jv_free(&r);
	}
	if (errors == 0) { /* the record run checks: in user1's MailloadFill folder */
		struct ml_fill f;
		char rec[400], found[400], why[160];

		ml_fill_of(&c, &f);
		f.when_ms = clock_wall_ms();
		ml_fill_format(&f, rec, sizeof(rec));
		if (agent_fillrec(&as[0], rec, found, sizeof(found), why, sizeof(why)) < 0) {
			fprintf(stderr,
				"init: could not write the fill record into user1's %s folder: "
				"%s\n",
				ML_FILL_FOLDER, why);
			errors++;
		}
	}
	agents_stop(as, n);
	fprintf(stderr, "init: %" PRIu64 " users, %s\n", c.users,
		errors ? "with errors (run it again: it resumes)" : "done");
	return errors ? -1 : 0;
}

/* The init command that would fill what this run needs. */
static void fill_command(const struct ml_cfg *c, char *out, size_t n)
{
	snprintf(out, n,
		 "mailload init --target %s --smtp-port %" PRIu64 " --submission-port %" PRIu64
		 " --imap-port %" PRIu64 " --users %" PRIu64 " --profile %s --seed %" PRIu64
		 "%s%s",
		 c->smtp_host, c->smtp_port, c->submit_port, c->imap_port, c->users, c->profile,
		 c->seed, strcmp(c->domain, "heron.test") != 0 ? " --domain " : "",
		 strcmp(c->domain, "heron.test") != 0 ? c->domain : "");
}

/* The fill record (the fast path's file, else user1's over IMAP) against this run: the
   "fill" member of the report into out; -1 (with the fix on stderr) on a mismatch that
   --force does not override, or when the check could not be made. */
static int fill_check(struct mgr_opts *o, struct buf *out)
{
	char found[400] = "", why[300], fix[600];
	const char *status = "verified";
	struct ml_fill f;
	struct ml_cfg c = o->cfg;

	if (!o->users_given)
		c.users = (uint64_t)(200.0 * c.rate + 0.5);
	if (o->fill_record != NULL) {
		FILE *fp = fopen(o->fill_record, "r");
		if (fp == NULL || fgets(found, sizeof(found), fp) == NULL) {
			fprintf(stderr, "mailload run: cannot read the fill record %s\n",
				o->fill_record);
			if (fp != NULL)
				fclose(fp);
			return -1;
		}
		fclose(fp);
	} else {
		struct mgr_agent *as;
		uint32_t n;
		int rc = -1;

		if (agents_start(o, &as, &n) < 0)
			return -1;
		if (agents_setup(as, n, &c) == 0)
			rc = agent_fillrec(&as[0], NULL, found, sizeof(found), why, sizeof(why));
		agents_stop(as, n);
		if (rc < 0 && !o->force) {
			fprintf(stderr,
				"mailload run: cannot check the fill record in user1's %s folder: "
				"%s (--force runs anyway)\n",
				ML_FILL_FOLDER, why);
			return -1;
		}
	}
	if (found[0] == '\0') {
		status = o->force ? "forced" : "none";
		snprintf(why, sizeof(why),
			 "no fill record found (not filled by mailload init, or by a "
			 "fast path without --fill-record): not verified");
		fprintf(stderr, "mailload run: warning: %s\n", why);
	} else if (ml_fill_parse(found, &f) < 0) {
		fprintf(stderr, "mailload run: the fill record \"%s\" is malformed\n", found);
		return -1;
	} else if (!ml_fill_matches(&f, &c, why, sizeof(why))) {
		fill_command(&c, fix, sizeof(fix));
		if (!o->force) {
			fprintf(stderr,
				"mailload run: the mailboxes do not match this run: %s.\n"
				"  filled: %s\n  fill them again for this run: %s\n"
				"  or run with the fill's --seed %" PRIu64
				" --profile %s (and at most "
				"--users %" PRIu64 "), or add --force\n",
				why, found, fix, f.seed, f.profile, f.users);
			return -1;
		}
		status = "forced";
		char tmp[sizeof(why)];
		snprintf(tmp, sizeof(tmp), "do NOT match (%.200s), run with --force", why);
		str_lcpy(why, tmp, sizeof(why));
	} else {
		snprintf(why, sizeof(why),
			 "filled by mailload init with seed %" PRIu64 ", profile %s, "
			 "%" PRIu64 " users: verified",
			 f.seed, f.profile, f.users);
	}
	buf_printf(out, "\"fill\":{\"status\":\"%s\",\"text\":", status);
	json_put_str(out, why);
	buf_puts(out, ",\"record\":");
	json_put_str(out, found);
	buf_putc(out, '}');
	return 0;
}

/* The reconciliation after the drain: each agent reads the INBOX of its own users among the
   recipients with a copy nobody saw, within reconcile_s. */
static void reconcile(struct mgr_agent *as, uint32_t n, const struct ml_cfg *c,
		      struct mgr_point *p, bool quiet)
{
	uint32_t *users = NULL;
	size_t nu = mgr_point_missing_users(p, &users), *lo = xcalloc(n + 1, sizeof(size_t));

	if (!c->delivery_check && nu > 0) { /* --no-delivery-check: said, not guessed */
		mgr_point_recon_failed(p, users, nu, "no delivery check (--no-delivery-check)");
		nu = 0;
	}
	bool *asked = xcalloc(n, sizeof(bool));
	struct buf req;

	buf_init(&req, 4096, MGR_LINE_MAX);
	if (nu > 0 && !quiet)
		fprintf(stderr,
			"reconciliation: reading the INBOX of %zu recipients with copies "
			"not seen yet\n",
			nu);
	for (uint32_t i = 0, k = 0; i < n && nu > 0;
	     i++) { /* users[lo[i]..lo[i+1]) are agent i's */
		uint64_t hi = 1 + c->users * (i + 1) / n;
		struct jv *resp = NULL;

		lo[i] = k;
		while (k < nu && users[k] < hi)
			k++;
		lo[i + 1] = k;
		if (lo[i + 1] == lo[i])
			continue;
		buf_reset(&req);
		buf_puts(&req, "{\"cmd\":\"reconcile\",\"users\":[");
		for (size_t j = lo[i]; j < lo[i + 1]; j++)
			buf_printf(&req, "%s%u", j > lo[i] ? "," : "", users[j]);
		buf_puts(&req, "]}");
		if (agent_request(&as[i], buf_cstr(&req), &resp) == 0)
			asked[i] = true;
		else
			mgr_point_recon_failed(p, users + lo[i], lo[i + 1] - lo[i],
					       "the agent could not start the reconciliation");
		jv_free(&resp);
	}
	for (int64_t end = clock_wall_ms() + (int64_t)c->reconcile_s * 1000;
	     clock_wall_ms() < end;) {
		bool running = false;
		for (uint32_t i = 0; i < n; i++) {
			struct jv *r = NULL;
			if (asked[i] && agent_request(&as[i], "{\"cmd\":\"status\"}", &r) == 0)
				running |= jv_int(r, "recon_left", 0) > 0;
			jv_free(&r);
		}
		if (!running)
			break;
		sleep(1);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		if (!asked[i])
			continue;
		if (agent_request(&as[i], "{\"cmd\":\"reconciled\",\"stop\":true}", &r) < 0 ||
		    mgr_point_merge_recon(p, r, as[i].offset_ms) < 0)
			mgr_point_recon_failed(p, users + lo[i], lo[i + 1] - lo[i],
					       "no reconciliation results from the agent");
		jv_free(&r);
	}
	buf_release(&req);
	free(asked);
	free(lo);
	free(users);
}

/* The sink's records after the drain; remote copies not recorded yet get up to
   reconcile_s more (read again every 2 s): those that come then are late. */
static struct jv *collect_sink(const char *hostport, struct mgr_point *p, const struct ml_cfg *c,
			       struct mgr_sink *sk, char *note, size_t notelen)
{
	struct jv *recs = sink_records(hostport, &sk->first_next, note, notelen);
	struct jv *st = sink_request(hostport, "{\"cmd\":\"stats\"}");

	sk->records = recs;
	sk->note = note;
	sk->dropped = (uint64_t)jv_int(st, "records_dropped", 0);
	jv_free(&st);
	int64_t end = clock_wall_ms() + (int64_t)c->reconcile_s * 1000;
	while (recs != NULL && mgr_point_remote_missing(p, c, sk) > 0 && clock_wall_ms() < end) {
		uint64_t next;
		sleep(2);
		struct jv *again = sink_records(hostport, &next, note, notelen);
		if (again == NULL)
			break;
		jv_free(&recs);
		sk->records = recs = again;
	}
	return recs;
}

/* The point's verdict and delivery accounting, one line on stderr (also with -q). */
static void point_line(const char *json, size_t len, double pct)
{
	struct jv *pt = NULL;
	const char *err;
	struct buf line;

	if (jv_parse(json, len, &pt, &err) < 0)
		return;
	buf_init(&line, 256, ML_LINE_MAX);
	report_accounting_line(pt, &line);
	fprintf(stderr, "load point %.0f%%: %s; %s", pct, jv_str(pt, "verdict", "?"),
		buf_cstr(&line));
	buf_release(&line);
	jv_free(&pt);
}

/* Runs one load point; its JSON object goes to out. The verdict, or -1 on a set-up error. */
static int run_point(struct mgr_opts *o, double pct, struct buf *out, bool *uncertain_r,
		     bool *too_short_r)
{
	struct ml_cfg c = o->cfg;
	struct mgr_agent *as;
	uint32_t n;
	struct mgr_point *p;
	struct mgr_sink sk = { 0 };
	char note[200] = "no sink control given: remote copies unchecked";

	/* The population is the one initialised: 200 users per message per minute of the
	   rate, or --users. A load point or a population given apart from the rate changes
	   how busy each user is (by 200 R / N), never who the users are. */
	c.rate = o->cfg.rate * pct / 100.0;
	if (!o->users_given)
		c.users = (uint64_t)(200.0 * o->cfg.rate + 0.5);
	if (c.users > 0) {
		double f = 200.0 * c.rate / (double)c.users;
		c.send_per_hour *= f;
		c.recv_per_hour *= f;
		c.imap_per_hour *= f;
	}
	c.run_id = (uint64_t)clock_wall_ms();
	str_lcpy(c.mode, "run", ML_STR);
	if (agents_start(o, &as, &n) < 0)
		return -1;
	if (o->sink != NULL)
		sink_reset(o->sink);
	int64_t t0 = clock_wall_ms() + 1000;
	c.t0_ms = (uint64_t)t0;
	double cpu0 = sut_cpu_seconds(o->sut_pids, o->nsut_pids);
	fprintf(stderr,
		"load point %.0f%%: %.2f msgs/min, %" PRIu64 " users, %u agents, phases %" PRIu64
		"/%" PRIu64 "/%" PRIu64 " s\n",
		pct, c.rate, c.users, n, c.ramp_s, c.steady_s, c.down_s);
	if (agents_setup(as, n, &c) < 0 || agents_start_phases(as, n, t0) < 0) {
		agents_stop(as, n);
		return -1;
	}
	run_agents_until_done(as, n, &c, t0, false, o->quiet);
	double cpu1 = sut_cpu_seconds(o->sut_pids, o->nsut_pids);
	p = mgr_point_new();
	if (o->nsut_pids > 0) {
		char pids[128] = "";
		for (size_t i = 0; i < o->nsut_pids; i++)
			snprintf(pids + strlen(pids), sizeof(pids) - strlen(pids), "%s%d",
				 i ? "," : "", (int)o->sut_pids[i]);
		mgr_point_sut_cpu(p, cpu1 - cpu0, pids);
	}
	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		if (agent_request(&as[i], "{\"cmd\":\"results\"}", &r) < 0) {
			log_warnx("agent %s: no results", as[i].name);
			continue;
		}
		mgr_point_agent(p, as[i].name, as[i].offset_ms, as[i].rtt_ms, r);
		if (mgr_point_merge(p, r) < 0)
			log_warnx("agent %s: no usable results", as[i].name);
		jv_free(&r);
	}
	reconcile(as, n, &c, p, o->quiet);
	struct jv *recs = o->sink != NULL ? collect_sink(o->sink, p, &c, &sk, note, sizeof(note))
					  : NULL;
	sk.note = note;
	agents_stop(as, n);
	if (o->server_id[0] == '\0')
		str_lcpy(o->server_id, mgr_point_server(p)->imap_id, sizeof(o->server_id));
	size_t at = out->len;
	enum ml_verdict v = mgr_point_finish(p, &c, pct, &sk, out, uncertain_r, too_short_r);
	point_line(out->data + at, out->len - at, pct);
	jv_free(&recs);
	mgr_point_free(&p);
	return (int)v;
}

static int write_file(const char *dir, const char *name, const char *data, size_t len)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "w")) == NULL) {
		log_warn("open %s", path);
		return -1;
	}
	fwrite(data, 1, len, fp);
	return fclose(fp) == 0 ? 0 : -1;
}

/* The run's head: schema, versions, the exact command, the configuration, the machines. */
static void put_head(const struct mgr_opts *o, struct buf *out, int64_t started)
{
	char date[40];
	time_t t = (time_t)(started / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_printf(out,
		   "{\"schema\":\"heron-mailload-report\",\"schema_version\":%d,"
		   "\"mailload\":{\"version\":\"%s\",\"git\":\"%s\"},\"run\":{\"id\":%" PRId64
		   ",\"started_ms\":%" PRId64 ",\"date\":\"%s\",\"command_line\":",
		   ML_REPORT_SCHEMA, heron_version, heron_git_revision, started, started, date);
	json_put_str(out, o->command_line != NULL ? o->command_line : "");
	buf_puts(out, "},\"agents_spec\":");
	json_put_str(out, o->agents != NULL ? o->agents : "local");
	buf_printf(out, ",\"sink\":");
	json_put_str(out, o->sink != NULL ? o->sink : "");
	buf_puts(out, ",\"config\":{");
	ml_cfg_json(&o->cfg, out);
	buf_puts(out, "},\"manager\":{");
	ml_host_json(out);
	buf_putc(out, '}');
	if (o->disclosure != NULL)
		buf_printf(out, ",%s", o->disclosure);
}

int mgr_run(struct mgr_opts *o)
{
	static const char *const names[] = { "PASS", "FAIL", "INVALID" };
	struct buf out;
	enum ml_verdict verdict = MV_PASS;
	bool uncertain = false, too_short = false;
	int rc = 0;
	int64_t started = clock_wall_ms();

	if (o->report_dir == NULL || (mkdir(o->report_dir, 0755) < 0 && errno != EEXIST)) {
		log_warnx("run: --report DIR is needed and must be creatable");
		return -1;
	}
	buf_init(&out, 1 << 16, MGR_LINE_MAX);
	struct buf fill;
	buf_init(&fill, 512, ML_TEXT_MAX);
	struct buf sut;
	buf_init(&sut, 4096, MGR_LINE_MAX);
	o->server_id[0] = '\0';
	int sut_rc = sut_disclose(o, &sut); /* the files it names are readable before the run */
	buf_release(&sut);
	if (sut_rc < 0 || fill_check(o, &fill) < 0) {
		buf_release(&fill);
		buf_release(&out);
		return -1;
	}
	put_head(o, &out, started);
	buf_printf(&out, ",%s", buf_cstr(&fill));
	buf_release(&fill);
	buf_puts(&out, ",\"points\":[");
	for (uint32_t i = 0; i < o->npoints; i++) {
		bool unc = false, short_run = false;

		if (i > 0)
			buf_putc(&out, ',');
		int v = run_point(o, o->points[i], &out, &unc, &short_run);
		if (v < 0) {
			rc = -1;
			break;
		}
		if (o->points[i] > 100) /* headroom: reported, not judged */
			continue;
		uncertain |= unc;
		too_short |= short_run;
		if (v == MV_INVALID || (v == MV_FAIL && verdict == MV_PASS))
			verdict = verdict == MV_INVALID ? MV_INVALID : (enum ml_verdict)v;
	}
	buf_puts(&out, "],"); /* the server's disclosure: its version may come from the run */
	if (sut_disclose(o, &out) < 0)
		rc = -1;
	buf_printf(&out,
		   ",\"finished_ms\":%" PRId64 ",\"verdict\":\"%s\",\"pass\":%s,"
		   "\"uncertain\":%s",
		   clock_wall_ms(), names[verdict],
		   verdict == MV_PASS && rc == 0 ? "true" : "false", uncertain ? "true" : "false");
	/* certified: a pass with the workload's full phases and no interval in doubt */
	bool full = o->cfg.ramp_s >= 300 && o->cfg.steady_s >= 1800 && o->cfg.down_s >= 120;
	if (verdict == MV_PASS && full && !uncertain && rc == 0)
		buf_printf(&out, ",\"certified\":{\"rate\":%.3f,\"users\":%" PRIu64 "}",
			   o->cfg.rate,
			   o->users_given ? o->cfg.users : (uint64_t)(200.0 * o->cfg.rate + 0.5));
	else
		buf_puts(&out, ",\"certified\":null");
	buf_puts(&out, "}\n");
	if (rc == 0 && write_file(o->report_dir, "report.json", out.data, out.len) == 0)
		rc = report_render_dir(o->report_dir, !o->quiet);
	buf_release(&out);
	o->uncertain = uncertain;
	o->too_short = too_short;
	if (rc < 0)
		return -1;
	return verdict == MV_PASS ? 0 : verdict == MV_FAIL ? 1 : 3;
}

/* One search step: the run at rate r (again while a result straddles 95% and repeats are
   left, up to three runs: the majority of the valid ones decides). */
static int search_point(struct mgr_opts *o, const char *base, double r, bool *too_short_r)
{
	static const char *const names[] = { "PASS", "FAIL", "?", "INVALID" };
	char dir[4096];
	int pass = 0, fail = 0, invalid = 0, last = 0;

	for (int k = 0; k < 3; k++) {
		if (k == 0)
			snprintf(dir, sizeof(dir), "%s/rate-%.1f", base, r);
		else
			snprintf(dir, sizeof(dir), "%s/rate-%.1f-run%d", base, r, k + 1);
		o->report_dir = dir;
		o->cfg.rate = r;
		last = mgr_run(o);
		if (last < 0)
			return -1;
		pass += last == 0;
		fail += last == 1;
		invalid += last == 3;
		*too_short_r = o->too_short;
		fprintf(stderr, "search: %.2f msgs/min %s%s (%s)\n", r, names[last],
			o->uncertain ? ", its interval straddles the limit" : "", dir);
		if (!o->uncertain || last == 3 || pass == 2 || fail == 2)
			break;
		if (k == 0)
			fprintf(stderr, "search: running %.2f msgs/min again before deciding\n",
				r);
	}
	if (pass > fail)
		return 0;
	if (fail > pass || (fail > 0 && fail == pass)) /* a tie: not shown to pass */
		return 1;
	return invalid ? 3 : last;
}

int mgr_search(struct mgr_opts *o, double from, double to, uint32_t steps)
{
	double best = 0, lo = 0, hi = to, r = from;
	const char *base = o->report_dir;
	bool found_fail = false;
	uint32_t nfail = 0, ninvalid = 0, runs = 0;

	mkdir(base, 0755);
	o->npoints = 1;
	o->points[0] = 100;
	/* double until a rate fails (or the top), then bisect; an invalid point moves neither
	   bound: too short goes up (more samples), unchecked deliveries go down */
	while (runs++ < steps) {
		bool too_short = false;
		int rc = search_point(o, base, r, &too_short);
		double next;

		if (rc < 0) {
			o->report_dir = base;
			return -1;
		}
		if (rc == 0) {
			best = r > best ? r : best;
			lo = r;
			if (!found_fail && r >= to)
				break; /* passes at the top of the range */
			next = found_fail ? (lo + hi) / 2 : (r * 2 < to ? r * 2 : to);
		} else if (rc == 1) {
			nfail++;
			found_fail = true;
			hi = r;
			next = (lo + hi) / 2;
		} else {
			ninvalid++;
			next = too_short ? (found_fail ? (r + hi) / 2 : (r * 2 < to ? r * 2 : to))
					 : (lo + r) / 2;
		}
		if ((found_fail && lo > 0 && hi - lo < lo * 0.05) || next == r || next <= 0)
			break;
		r = next;
	}
	o->report_dir = base;
	if (best <= 0) {
		fprintf(stderr,
			"mailload search: no rate passed: %u runs between %.2f and %.2f "
			"msgs/min, %u failed, %u invalid; the reports are in %s/rate-*\n",
			runs > steps ? steps : runs, from, to, nfail, ninvalid, base);
		return 1;
	}
	printf("highest valid passing rate: %.2f msgs/min (%.0f users%s)\n", best,
	       o->users_given ? (double)o->cfg.users : best * 200,
	       o->users_given ? ", fixed population" : "");
	return 0;
}

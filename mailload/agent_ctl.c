/* agent_ctl.c — owns an agent's control connection: the listener for remote managers, the
 * challenge-response that a manager must pass first (ctlauth.h), the JSON-lines commands
 * (setup, start, status, results, quit) and the status and results replies. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/ctlauth.h"
#include "mailload/json.h"

#define CTL_LINE_MAX (1u << 20)

static const char *phase_name(enum ag_phase p)
{
	static const char *const n[] = {
		"idle", "ramp-up", "steady", "ramp-down", "drain", "done"
	};
	return n[p];
}

/* The summary function with the lowest compliance so far, or -1. */
static int worst_fn(const struct agent *ag, double *pct_r)
{
	double worst = 101;
	int wf = -1;

	for (int f = 0; f < FN_NSUMMARY; f++) {
		uint64_t n = ag->h[f].count + ag->err[f];
		if (n == 0)
			continue;
		double pct = 100.0 *
			     (double)histo_count_le(&ag->h[f], ml_fns[f].limit_ms * 1000ULL) /
			     (double)n;
		if (pct < worst) {
			worst = pct;
			wf = f;
		}
	}
	*pct_r = worst;
	return wf;
}

void ag_put_status(struct agent *ag, struct buf *o)
{
	double pct;
	int wf = worst_fn(ag, &pct);

	buf_printf(o,
		   "{\"ok\":true,\"phase\":\"%s\",\"open_smtp\":%u,\"open_imap\":%u,"
		   "\"probes\":%u,\"steps\":%" PRIu64 ",\"errors\":%" PRIu64
		   ",\"sent\":%zu,\"waiting\":%zu,\"init_done\":%u,\"init_msgs\":%" PRIu64
		   ",\"users\":%u,\"now_ms\":%" PRId64 ",\"recon_left\":%zu",
		   phase_name(ag->phase), ag->open_smtp, ag->open_imap, ag->pr.open, ag->steps_all,
		   ag->errors_all, ag->nsent, probe_waiting(ag), ag->init_done, ag->init_msgs,
		   ag->nusers, clock_wall_ms(), ag->pr.recon_n - ag->pr.recon_done);
	if (wf >= 0)
		buf_printf(o, ",\"worst\":\"%s\",\"worst_pct\":%.2f", ml_fns[wf].key, pct);
	if (ag->fill_state != 0) {
		static const char *const st[] = { "idle", "running", "done", "failed" };
		buf_printf(o, ",\"fill_state\":\"%s\",\"fill_found\":", st[ag->fill_state]);
		json_put_str(o, ag->fill_found);
		buf_puts(o, ",\"fill_error\":");
		json_put_str(o, ag->fill_error);
	}
	buf_puts(o, "}\n");
}

static void put_functions(const struct agent *ag, struct buf *o)
{
	struct buf h;

	buf_init(&h, 256, ML_DOC_MAX);
	buf_puts(o, "\"functions\":{");
	for (int f = 0; f < FN_COUNT; f++) {
		buf_printf(o, "%s\"%s\":{\"errors\":%" PRIu64 ",\"histo\":", f ? "," : "",
			   ml_fns[f].key, ag->err[f]);
		buf_reset(&h);
		histo_serialize(&ag->h[f], &h);
		json_put_str(o, buf_cstr(&h));
		buf_putc(o, '}');
	}
	buf_release(&h);
	buf_puts(o, "},\"errtop\":[");
	bool first = true;
	for (int i = 0; i < ERRTOP_MAX; i++) {
		if (ag->errtop[i].n == 0)
			continue;
		buf_printf(o, "%s[\"%s\",", first ? "" : ",", ml_fns[ag->errtop[i].fn].key);
		json_put_str(o, ag->errtop[i].msg);
		buf_printf(o, ",%" PRIu64 "]", ag->errtop[i].n);
		first = false;
	}
	buf_putc(o, ']');
}

static void put_series(const struct agent *ag, struct buf *o)
{
	buf_printf(o, ",\"ts_step_s\":%u,\"ts\":[", ag->ts_step_s);
	for (uint32_t i = 0; i < ag->nts; i++) {
		const struct ag_ts *t = &ag->ts[i];
		buf_printf(o, "%s[%u,%u,%u,%u,[", i ? "," : "", t->steps[0], t->errors[0],
			   t->steps[1], t->errors[1]);
		for (int p = 0; p < 2; p++)
			for (int b = 0; b < TS_LB; b++)
				buf_printf(o, "%s%u", p + b ? "," : "", t->lb[p][b]);
		buf_puts(o, "]]");
	}
	buf_putc(o, ']');
}

static void put_delivery(const struct agent *ag, struct buf *o)
{
	buf_puts(o, ",\"sent\":[");
	for (size_t i = 0; i < ag->nsent; i++) {
		const struct ag_sent *s = &ag->sent[i];
		buf_printf(o, "%s[%" PRIu64 ",%" PRId64 ",%" PRId64 ",%d,[", i ? "," : "", s->seq,
			   s->sent_ms, s->ack_ms, s->submitted ? 1 : 0);
		for (uint32_t r = 0; r < s->nrcpt; r++)
			buf_printf(o, "%s%" PRId64, r ? "," : "", ag->rcpts[s->rcpt_off + r]);
		buf_puts(o, "]]");
	}
	buf_puts(o, "],\"seen\":[");
	for (size_t i = 0; i < ag->nseen; i++) {
		const struct ag_seen *s = &ag->seen[i];
		buf_printf(o, "%s[%" PRIu64 ",%u,%u,%u,%" PRId64 "]", i ? "," : "", s->seq,
			   s->user, s->uidvalidity, s->uid, s->ms);
	}
	buf_putc(o, ']');
}

void ag_put_results(struct agent *ag, struct buf *o)
{
	buf_printf(o, "{\"ok\":true,\"agent\":%" PRIu64 ",", ag->cfg.agent);
	put_functions(ag, o);
	put_series(ag, o);
	put_delivery(ag, o);
	buf_putc(o, ',');
	ml_server_info_json(&ag->server, o);
	buf_printf(o, ",\"sessions_refused\":%" PRIu64 ",", ag->sessions_refused);
	probe_put_stats(ag, o);
	buf_puts(o, ",\"host\":{");
	ml_host_json(o);
	buf_puts(o, "}}\n");
}

/* {"cmd":"reconcile","users":[...]}: the users must be this agent's or any in the run. */
static const char *ctl_reconcile(struct agent *ag, const struct jv *req)
{
	const struct jv *u = jv_get(req, "users");
	uint32_t *users;

	if (ag->users == NULL || ag->phase != PH_DONE)
		return "not done with the run";
	if (recon_running(ag))
		return "a reconciliation is running";
	if (u == NULL || u->type != JV_ARR)
		return "users missing";
	users = xcalloc(u->n ? u->n : 1, sizeof(*users));
	for (size_t i = 0; i < u->n; i++) {
		if (u->kid[i].type != JV_NUM || u->kid[i].i < 1 ||
		    (uint64_t)u->kid[i].i > ag->cfg.users) {
			free(users);
			return "bad user";
		}
		users[i] = (uint32_t)u->kid[i].i;
	}
	recon_start(ag, users, u->n);
	free(users);
	return NULL;
}

/* ---- commands ---- */
static void ctl_reply(struct agent *ag, struct buf *o)
{
	bufferevent_write(ag->ctl, o->data, o->len);
}

static void put_error(struct buf *o, const char *err)
{
	buf_puts(o, "{\"ok\":false,\"error\":");
	json_put_str(o, err);
	buf_puts(o, "}\n");
}

/* The manager's answer to our challenge; false closes the connection. */
static bool ctl_auth(struct agent *ag, const struct jv *req, struct buf *o)
{
	const char *nonce = jv_str(req, "nonce", ""), *mac = jv_str(req, "mac", "");
	char mine[CTLAUTH_MAC_HEX];

	if (strcmp(jv_str(req, "cmd", ""), "auth") != 0 ||
	    strlen(nonce) != CTLAUTH_NONCE_HEX - 1 ||
	    !ctlauth_check(ag->secret, "manager", ag->nonce, mac)) {
		log_warnx("agent: a manager failed to authenticate; closing");
		put_error(o, "authentication failed");
		return false;
	}
	ag->authed = true;
	ctlauth_mac(ag->secret, "agent", nonce, mine);
	buf_printf(o, "{\"ok\":true,\"mac\":\"%s\"}\n", mine);
	return true;
}

/* One command after authentication; NULL or an error text. */
static const char *ctl_do(struct agent *ag, const struct jv *req, struct buf *o)
{
	const char *cmd = jv_str(req, "cmd", ""), *err = NULL;

	if (strcmp(cmd, "setup") == 0) {
		struct ml_cfg c;
		ml_cfg_defaults(&c, "small");
		if (ag->users != NULL)
			err = "already set up";
		else if (ml_cfg_from_json(&c, jv_get(req, "cfg")) < 0)
			err = "bad cfg";
		else
			agent_setup(ag, &c, &err);
	} else if (strcmp(cmd, "start") == 0) {
		if (ag->users == NULL || ag->phase != PH_IDLE)
			err = "not set up, or started already";
		else
			ag_start(ag, jv_int(req, "t0_ms", clock_wall_ms()));
	} else if (strcmp(cmd, "status") == 0) {
		ag_put_status(ag, o);
	} else if (strcmp(cmd, "results") == 0) {
		ag_put_results(ag, o);
	} else if (strcmp(cmd, "fillrec") == 0) {
		if (ag->users == NULL || ag->fill_state == 1)
			err = "not set up, or a fill record session is running";
		else
			fillrec_start(ag, jv_str(req, "record", NULL));
	} else if (strcmp(cmd, "reconcile") == 0) {
		err = ctl_reconcile(ag, req);
	} else if (strcmp(cmd, "reconciled") == 0) {
		const struct jv *stop = jv_get(req, "stop");
		if (recon_running(ag) && (stop == NULL || stop->type != JV_BOOL || !stop->b)) {
			err = "the reconciliation is still running";
		} else {
			buf_puts(o, "{\"ok\":true,");
			recon_put(ag, o);
			buf_puts(o, "}\n");
		}
	} else if (strcmp(cmd, "quit") == 0) {
		ag->quit = true; /* the loop ends once the reply is out */
	} else {
		err = "unknown command";
	}
	if (err == NULL && o->len == 0)
		buf_puts(o, "{\"ok\":true}\n");
	return err;
}

/* false: the connection must close (after the reply is flushed). */
static bool ctl_command(struct agent *ag, const char *line, size_t len)
{
	struct jv *req = NULL;
	const char *err = NULL;
	struct buf o;
	bool keep = true;

	buf_init(&o, 256, ML_AGENT_REPLY_MAX);
	if (jv_parse(line, len, &req, &err) < 0) {
		put_error(&o, err);
		keep = ag->authed;
	} else if (!ag->authed) {
		keep = ctl_auth(ag, req, &o);
	} else if ((err = ctl_do(ag, req, &o)) != NULL) {
		buf_reset(&o);
		put_error(&o, err);
	}
	ctl_reply(ag, &o);
	buf_release(&o);
	jv_free(&req);
	return keep;
}

static void ctl_event_cb(struct bufferevent *bev, short what, void *arg);

static void ctl_close_cb(struct bufferevent *bev, void *arg)
{
	struct agent *ag = arg;

	event_base_loopexit(ag->base, NULL);
}

static void ctl_read_cb(struct bufferevent *bev, void *arg)
{
	struct agent *ag = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct line ln;
	int rc;

	while ((rc = line_peek(&ag->ctl_lr, in, &ln)) != 0) {
		bool keep = rc > 0 && ctl_command(ag, ln.p, ln.len) && !ag->quit;

		if (rc < 0)
			log_warnx("agent: control line too long; closing");
		if (!keep) { /* close once the reply is out */
			bufferevent_disable(bev, EV_READ);
			bufferevent_setcb(bev, NULL, ctl_close_cb, ctl_event_cb, ag);
			return;
		}
		line_drain(in, &ln);
	}
}

static void ctl_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct agent *ag = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		log_info("agent%" PRIu64 " manager went away; stopping", ag->cfg.agent);
		event_base_loopexit(ag->base, NULL);
	}
}

int agent_serve_fd(int fd, const struct ctlauth_secret *secret)
{
	struct agent ag;
	struct buf hello;

	memset(&ag, 0, sizeof(ag));
	ag.base = event_base_new();
	ag.secret = secret;
	line_reader_init(&ag.ctl_lr, CTL_LINE_MAX, LINE_LF);
	ctlauth_nonce(ag.nonce);
	evutil_make_socket_nonblocking(fd);
	ag.ctl = bufferevent_socket_new(ag.base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(ag.ctl, ctl_read_cb, NULL, ctl_event_cb, &ag);
	bufferevent_enable(ag.ctl, EV_READ);
	buf_init(&hello, 128, ML_LINE_MAX);
	buf_printf(&hello, "{\"hello\":\"mailload-agent\",\"nonce\":\"%s\"}\n", ag.nonce);
	ctl_reply(&ag, &hello);
	buf_release(&hello);
	ml_metrics_agent_start(ag.base);
	event_base_dispatch(ag.base);
	ml_metrics_agent_stop();
	bufferevent_free(ag.ctl);
	agent_free(&ag);
	event_base_free(ag.base);
	return 0;
}

int agent_listen(const char *hostport, const struct ctlauth_secret *secret)
{
	struct conf_addr a = { 0 };
	struct conf_addrs addrs = { 1, &a };
	struct net_fds fds = { 0 };
	char host[256], port[16], *err = NULL;
	const char *colon = strrchr(hostport, ':');

	if (colon == NULL || colon == hostport || (size_t)(colon - hostport) >= sizeof(host)) {
		log_warnx("agent: --listen wants host:port, got %s", hostport);
		return -1;
	}
	size_t hl = (size_t)(colon - hostport);
	if (hostport[0] == '[' && hl >= 2 && hostport[hl - 1] == ']') { /* [::1]:1200 */
		hostport++;
		hl -= 2;
	}
	memcpy(host, hostport, hl);
	host[hl] = '\0';
	a.host = host;
	str_lcpy(port, colon + 1, sizeof(port));
	a.port = port;
	if (net_listen(&addrs, NULL, &fds, &err) < 0) {
		log_warnx("agent: %s", err);
		free(err);
		return -1;
	}
	int lfd = fds.fd[0];
	/* one manager at a time, each with a new agent state: a blocking accept is enough */
	fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) & ~O_NONBLOCK);
	log_info("agent listening on %s", fds.name[0]);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			agent_serve_fd(fd, secret);
		else
			sleep(1); /* out of descriptors or memory: do not spin */
	}
}

/* agent.c — owns a load agent: set-up from the manager's configuration, the per-user arrival
 * timers and phases, step accounting (histograms, errors, time series), delivery bookkeeping
 * and probes, and the JSON-lines control connection. Sessions live in load_smtp.c and
 * load_imap.c. */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/json.h"

static void ag_tick_cb(evutil_socket_t fd, short what, void *arg);

/* The server's address as numeric text, resolved once here so that no connection waits
   for a resolver. */
static int server_set(struct ag_server *sv, const char *host, uint64_t port)
{
	struct addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return -1;
	int rc = getnameinfo(res->ai_addr, res->ai_addrlen, sv->host, sizeof(sv->host), NULL, 0,
			     NI_NUMERICHOST);
	str_lcpy(sv->name, host, sizeof(sv->name));
	freeaddrinfo(res);
	snprintf(sv->port, sizeof(sv->port), "%" PRIu64, port);
	return rc == 0 && port > 0 && port <= 65535 ? 0 : -1;
}

/* TLS per server: "starttls" upgrades every connection; "implicit" speaks TLS from the first
   byte on submission and IMAP (ports 465, 993) while port 25, which has no implicit form,
   keeps STARTTLS. */
static int agent_setup_servers(struct agent *ag, const struct ml_cfg *c, const char **error_r)
{
	char *err = NULL;

	ag->tls = strcmp(c->tls, "implicit") == 0   ? AG_TLS_IMPLICIT
		  : strcmp(c->tls, "starttls") == 0 ? AG_TLS_STARTTLS
						    : AG_TLS_NONE;
	if (server_set(&ag->srv[CONN_SMTP], c->smtp_host, c->smtp_port) < 0 ||
	    server_set(&ag->srv[CONN_SUBMIT], c->submit_host, c->submit_port) < 0 ||
	    server_set(&ag->srv[CONN_IMAP], c->imap_host, c->imap_port) < 0) {
		*error_r = "cannot resolve a server address";
		return -1;
	}
	for (int i = 0; i < CONN_COUNT; i++) {
		ag->srv[i].implicit = ag->tls == AG_TLS_IMPLICIT && i != CONN_SMTP;
		ag->srv[i].starttls = ag->tls != AG_TLS_NONE && !ag->srv[i].implicit;
	}
	if (ag->tls == AG_TLS_NONE)
		return 0;
	struct tls_conf tc = { 0 };
	tc.ca = c->ca_file[0] != '\0' ? c->ca_file : NULL;
	ag->ssl = tls_client_ctx_new(&tc, c->tls_verify ? TLS_VERIFY_PEER : TLS_VERIFY_NONE, &err);
	if (ag->ssl == NULL) {
		log_warnx("agent: TLS client context: %s", err);
		free(err);
		*error_r = "cannot make a TLS client context";
		return -1;
	}
	return 0;
}

/* The descriptors the agent may open: its sessions (max_sessions), a delivery probe per
   recipient with mail in flight (up to one per user) and a few of its own. Raises the soft
   limit to the hard one, and both (when privileged) up to fs.nr_open; when the limit stays
   below the sessions' need the session cap shrinks to fit, with a warning, so a connect never
   fails with EMFILE and is counted as the server's error. */
static void ag_fd_budget(struct agent *ag)
{
	uint64_t want = ag->cfg.max_sessions + ag->cfg.users + 256;
	struct rlimit rl = { 1024, 1024 };
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		uint64_t top = want;
		FILE *f = fopen("/proc/sys/fs/nr_open", "r");
		unsigned long long nr = 0;
		if (f != NULL) {
			if (fscanf(f, "%llu", &nr) == 1 && nr < top)
				top = nr;
			fclose(f);
		}
		struct rlimit up = { (rlim_t)top, rl.rlim_max > top ? rl.rlim_max : (rlim_t)top };
		if (setrlimit(RLIMIT_NOFILE, &up) < 0) {
			up.rlim_cur = rl.rlim_max < top ? rl.rlim_max : (rlim_t)top;
			up.rlim_max = rl.rlim_max;
			(void)setrlimit(RLIMIT_NOFILE, &up);
		}
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	ag->fd_limit = rl.rlim_cur;
	if (ag->cfg.max_sessions + 128 > ag->fd_limit) {
		uint64_t cap = ag->fd_limit > 256 ? ag->fd_limit - 128 : ag->fd_limit / 2 + 1;
		log_warnx("agent%" PRIu64 ": %" PRIu64
			  " descriptors (ulimit -n): session cap %" PRIu64
			  " instead of max_sessions %" PRIu64,
			  ag->cfg.agent, ag->fd_limit, cap, ag->cfg.max_sessions);
		ag->cfg.max_sessions = cap;
	}
}

int agent_setup(struct agent *ag, const struct ml_cfg *c, const char **error_r)
{
	ag->cfg = *c;
	if (c->user_hi <= c->user_lo || c->user_hi > c->users + 1 || c->user_lo == 0) {
		*error_r = "bad user range";
		return -1;
	}
	static char uerr[300];
	if (ml_users_load(&ag->cfg, uerr, sizeof(uerr)) < 0) {
		*error_r = uerr;
		return -1;
	}
	if (agent_setup_servers(ag, c, error_r) < 0)
		return -1;
	ml_msggen_init();
	ml_msg_init(&ag->msg);
	ml_rng_seed(&ag->rng, c->seed, 1000003 + c->agent);
	ag->nusers = (uint32_t)(c->user_hi - c->user_lo);
	ag->users = xcalloc(ag->nusers, sizeof(*ag->users));
	for (uint32_t i = 0; i < ag->nusers; i++)
		ag->users[i].m.id = (uint32_t)c->user_lo + i;
	ag_fd_budget(ag);
	probe_setup(ag);
	uint64_t total = c->ramp_s + c->steady_s + c->down_s + c->drain_s + 60;
	ag->ts_step_s = (uint32_t)(total / 600 + 1);
	ag->nts = (uint32_t)(total / ag->ts_step_s + 1);
	ag->ts = xcalloc(ag->nts, sizeof(*ag->ts));
	for (int i = 0; i < FN_COUNT; i++)
		histo_init(&ag->h[i]);
	ag->seq = (c->agent + 1) * 1000000000ULL;
	return 0;
}

void agent_free(struct agent *ag)
{
	free(ag->users);
	probe_free(ag);
	buf_release(&ag->fill_msg);
	free(ag->ts);
	free(ag->sent);
	free(ag->rcpts);
	free(ag->seen);
	free(ag->seen_set);
	ml_msg_release(&ag->msg);
	tls_ctx_free(&ag->ssl);
	if (ag->tick != NULL)
		event_free(ag->tick);
}

struct ag_user *ag_user(struct agent *ag, uint32_t user)
{
	if (user < ag->cfg.user_lo || user >= ag->cfg.user_hi)
		return NULL;
	return &ag->users[user - ag->cfg.user_lo];
}

const char *ag_password(const struct agent *ag, uint32_t user, char *tmp, size_t n)
{
	return ml_user_password(&ag->cfg, user, tmp, n);
}

uint64_t ag_init_seq(uint32_t user, uint32_t folder, uint32_t idx)
{
	return ((uint64_t)user << 20) | ((uint64_t)folder << 12) | idx;
}

/* ---- connections ---- */
struct net_connect *ag_connect(struct agent *ag, int which,
			       void (*cb)(struct bufferevent *bev, const char *error, void *arg),
			       void *arg)
{
	const struct ag_server *sv = &ag->srv[which];

	return net_connect(ag->base, NULL, sv->host, sv->port, (int)ag->cfg.timeout_s * 1000, cb,
			   arg);
}

struct bufferevent *ag_connected(struct agent *ag, int which, struct bufferevent *bev)
{
	struct bufferevent *tb;

	if (!ag->srv[which].implicit)
		return bev;
	if ((tb = tls_starttls_client(bev, ag->ssl,
				      ag->cfg.tls_verify ? ag->srv[which].name : NULL, NULL)) ==
	    NULL) {
		bufferevent_free(bev);
		ag->server.tls_fail[which == CONN_IMAP]++;
	}
	return tb;
}

struct bufferevent *ag_starttls(struct agent *ag, int which, struct bufferevent *plain)
{
	return tls_starttls_client(plain, ag->ssl, ag->cfg.tls_verify ? ag->srv[which].name : NULL,
				   NULL);
}

bool ag_tls_event(struct agent *ag, struct bufferevent *bev, short what, int imap, char *why,
		  size_t n)
{
	if (!tls_is_tls(bev))
		return (what & BEV_EVENT_CONNECTED) != 0;
	if (what & BEV_EVENT_CONNECTED) {
		ag->server.tls_ok[imap]++;
		if (ag->server.tls_proto[0] == '\0') {
			struct ml_server_info *si = &ag->server;
			const char *proto, *cipher;

			tls_peer_info(bev, &proto, &cipher, NULL);
			str_lcpy(si->tls_proto, proto != NULL ? proto : "", sizeof(si->tls_proto));
			str_lcpy(si->tls_cipher, cipher != NULL ? cipher : "",
				 sizeof(si->tls_cipher));
		}
		return true;
	}
	if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) &&
	    !SSL_is_init_finished(bufferevent_openssl_get_ssl(bev))) {
		char e[160];

		ag->server.tls_fail[imap]++;
		snprintf(why, n, "TLS handshake failed: %s", tls_error(bev, e, sizeof(e)));
	}
	return false;
}

/* ---- accounting ---- */
bool ag_measured(const struct agent *ag, int64_t t_us)
{
	int64_t ms = t_us / 1000;

	return ms >= ag->ramp_end && ms < ag->steady_end;
}

static void ts_add(struct agent *ag, enum ml_fn fn, int64_t t0_us, uint64_t us, bool ok)
{
	int64_t off = t0_us / 1000 - (int64_t)ag->cfg.t0_ms;
	int p = ml_fns[fn].smtp ? 0 : 1;

	if (off < 0 || ag->nts == 0)
		return;
	uint64_t slot = (uint64_t)off / 1000 / ag->ts_step_s;
	if (slot >= ag->nts)
		return;
	struct ag_ts *t = &ag->ts[slot];
	t->steps[p]++;
	if (!ok) {
		t->errors[p]++;
		return;
	}
	unsigned lb = us == 0 ? 0 : 64u - (unsigned)__builtin_clzll(us);
	t->lb[p][lb >= TS_LB ? TS_LB - 1 : lb]++;
}

void ag_error(struct agent *ag, enum ml_fn fn, const char *why)
{
	struct ag_err *e, *min = NULL;

	ag->err[fn]++;
	ag->errors_all += ml_fn_class(fn) != FC_PROBE;
	for (int i = 0; i < ERRTOP_MAX; i++) {
		e = &ag->errtop[i];
		if (e->n > 0 && e->fn == fn && strncmp(e->msg, why, sizeof(e->msg) - 1) == 0) {
			e->n++;
			return;
		}
		if (min == NULL || e->n < min->n)
			min = e;
	}
	/* a full table replaces its rarest entry (space-saving count) */
	min->fn = (uint8_t)fn;
	str_lcpy(min->msg, why, sizeof(min->msg));
	min->n = min->n + 1;
}

void ag_step(struct agent *ag, enum ml_fn fn, int64_t t0_us, bool ok, const char *why)
{
	int64_t now = clock_wall_us();
	uint64_t us = now > t0_us ? (uint64_t)(now - t0_us) : 0;
	bool init = ag->cfg.mode[0] == 'i';

	if (ok)
		log_debug("agent%" PRIu64 " step=%s us=%" PRIu64, ag->cfg.agent, ml_fns[fn].key,
			  us);
	else if (init)
		log_warnx("agent%" PRIu64 " init step=%s result=fail reason=\"%s\"", ag->cfg.agent,
			  ml_fns[fn].key, why);
	else
		log_debug("agent%" PRIu64 " step=%s result=fail reason=\"%s\"", ag->cfg.agent,
			  ml_fns[fn].key, why);
	if (ml_fn_class(fn) == FC_PROBE) { /* measurement: the whole run, apart from the steps */
		if (ag->phase == PH_IDLE)
			return; /* the fill check before the run */
		ml_metrics_step(fn, ok, us);
		if (ok)
			histo_add(&ag->h[fn], us);
		else
			ag_error(ag, fn, why);
		return;
	}
	ts_add(ag, fn, t0_us, us, ok);
	ml_metrics_step(fn, ok, us);
	if (!init && !ag_measured(ag, t0_us))
		return;
	ag->steps_all++;
	if (ok)
		histo_add(&ag->h[fn], us);
	else
		ag_error(ag, fn, why);
}

void ag_sample(struct agent *ag, enum ml_fn fn, uint64_t us)
{
	histo_add(&ag->h[fn], us);
}

/* ---- delivery bookkeeping ---- */
void ag_sent_ack(struct agent *ag, uint64_t seq, int64_t sent_ms, const int64_t *rcpt, uint32_t n,
		 bool submitted)
{
	int64_t now = clock_wall_ms();

	ml_metrics_sent();
	if (ag->nsent == ag->capsent) {
		ag->capsent = ag->capsent ? ag->capsent * 2 : 256;
		ag->sent = xreallocarray(ag->sent, ag->capsent, sizeof(*ag->sent));
	}
	if (ag->nrcpts + n > ag->caprcpts) {
		while (ag->nrcpts + n > ag->caprcpts)
			ag->caprcpts = ag->caprcpts ? ag->caprcpts * 2 : 1024;
		ag->rcpts = xreallocarray(ag->rcpts, ag->caprcpts, sizeof(*ag->rcpts));
	}
	ag->sent[ag->nsent++] = (struct ag_sent){ seq, sent_ms,  now, (uint32_t)ag->nrcpts,
						  n,   submitted };
	if (n > 0)
		memcpy(ag->rcpts + ag->nrcpts, rcpt, n * sizeof(*rcpt));
	ag->nrcpts += n;
	for (uint32_t i = 0; i < n; i++)
		if (rcpt[i] > 0)
			probe_wait_add(ag, seq, (uint32_t)rcpt[i], now);
}

static bool seen_set_add(struct agent *ag, uint64_t key)
{
	if (key == 0)
		key = 1;
	if (ag->seen_set_n * 2 >= ag->seen_set_cap) {
		size_t ocap = ag->seen_set_cap;
		uint64_t *old = ag->seen_set;

		ag->seen_set_cap = ocap ? ocap * 2 : 1024;
		ag->seen_set = xcalloc(ag->seen_set_cap, sizeof(uint64_t));
		ag->seen_set_n = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i] != 0)
				seen_set_add(ag, old[i]);
		free(old);
	}
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ULL) & (ag->seen_set_cap - 1);
	while (ag->seen_set[i] != 0) {
		if (ag->seen_set[i] == key)
			return false;
		i = (i + 1) & (ag->seen_set_cap - 1);
	}
	ag->seen_set[i] = key;
	ag->seen_set_n++;
	return true;
}

bool ag_seen(struct agent *ag, uint32_t user, uint64_t seq, uint32_t uidvalidity, uint32_t uid)
{
	uint64_t key = seq * 0x100000001b3ULL ^
		       ((uint64_t)user << 32 | uid) * 0xc2b2ae3d27d4eb4fULL;
	bool awaited = probe_wait_seen(ag, seq, user);

	if (!seen_set_add(ag, key))
		return awaited;
	if (ag->nseen == ag->capseen) {
		ag->capseen = ag->capseen ? ag->capseen * 2 : 256;
		ag->seen = xreallocarray(ag->seen, ag->capseen, sizeof(*ag->seen));
	}
	ag->seen[ag->nseen++] = (struct ag_seen){ seq, user, uidvalidity, uid, clock_wall_ms() };
	return awaited;
}

uint64_t ag_msgid_seq(const struct agent *ag, const char *hdr, size_t len)
{
	const char *v;
	size_t n = hdr_find(hdr, len, "Message-ID", &v);
	uint64_t run, seq;
	char tmp[80];

	if (n == 0 || n >= sizeof(tmp))
		return 0;
	memcpy(tmp, v, n);
	tmp[n] = '\0';
	if (sscanf(tmp, "<%" SCNu64 ".%" SCNu64 "@mailload>", &run, &seq) != 2 ||
	    run != ag->cfg.run_id)
		return 0;
	return seq;
}

void ag_msg_spec(const struct agent *ag, struct ml_msg_spec *s, uint64_t seq, int64_t date_ms)
{
	memset(s, 0, sizeof(*s));
	s->seed = ag->cfg.seed;
	s->run_id = ag->cfg.run_id;
	s->seq = seq;
	s->date_ms = date_ms;
	s->sent_ms = date_ms;
	s->size_scale = ag->cfg.size_scale;
}

/* ---- arrivals ---- */
static bool ag_can_start(struct agent *ag)
{
	if (ag->open_smtp + ag->open_imap >= ag->cfg.max_sessions) {
		ag->sessions_refused++;
		ag_error(ag, FN_SMTP_CONNECT, "agent session cap reached (client overloaded)");
		return false;
	}
	return ag->phase == PH_RAMP || ag->phase == PH_STEADY;
}

static void arm(struct agent *ag, struct wtimer *t, double per_hour)
{
	double mean_ms = 3600000.0 / per_hour;

	if (per_hour <= 0)
		return; /* this activity is switched off */
	wheel_add(&ag->wheel, t, clock_wall_ms() + (int64_t)ml_rng_exp(&ag->rng, mean_ms) + 1);
}

#define USER_OF(t, field) ((struct ag_user *)(void *)((char *)(t)-offsetof(struct ag_user, field)))

static void on_send(struct agent *ag, struct wtimer *t)
{
	struct ag_user *u = USER_OF(t, t_send);

	if (ag_can_start(ag))
		smtp_start(ag, SK_SUBMIT, u->m.id, 1);
	arm(ag, t, ag->cfg.send_per_hour);
}

static void on_recv(struct agent *ag, struct wtimer *t)
{
	struct ag_user *u = USER_OF(t, t_recv);

	if (ag_can_start(ag))
		smtp_start(ag, SK_MTA, u->m.id, 1);
	arm(ag, t, ag->cfg.recv_per_hour);
}

static void queue_imap(struct agent *ag, struct ag_user *u, enum ml_session kind, uint64_t seq,
		       int64_t date_ms)
{
	if (!u->imap_busy) {
		u->imap_busy = true;
		imap_start(ag, u, kind, seq, date_ms);
		return;
	}
	if (u->queued >= 4) {
		ag_error(ag, kind == SESS_APPEND ? FN_IMAP_APPEND : FN_IMAP_CONNECT,
			 "user's IMAP sessions backed up (previous still open)");
		return;
	}
	u->queued_kind[u->queued] = (uint8_t)kind;
	u->append_seq[u->queued] = seq;
	u->append_date[u->queued] = date_ms;
	u->queued++;
}

static void on_imap(struct agent *ag, struct wtimer *t)
{
	struct ag_user *u = USER_OF(t, t_imap);

	if (ag_can_start(ag))
		queue_imap(ag, u, ml_pick_session(&ag->rng, &ag->cfg), 0, 0);
	arm(ag, t, ag->cfg.imap_per_hour);
}

void ag_imap_done(struct agent *ag, struct ag_user *u)
{
	u->imap_busy = false;
	if (u->queued > 0 && ag->phase != PH_DONE) {
		enum ml_session k = (enum ml_session)u->queued_kind[0];
		uint64_t seq = u->append_seq[0];
		int64_t date = u->append_date[0];

		u->queued--;
		memmove(u->queued_kind, u->queued_kind + 1, u->queued);
		memmove(u->append_seq, u->append_seq + 1, u->queued * sizeof(uint64_t));
		memmove(u->append_date, u->append_date + 1, u->queued * sizeof(int64_t));
		u->imap_busy = true;
		imap_start(ag, u, k, seq, date);
	}
}

/* The SMTP side calls this after a submission: the user files the message in Sent. */
void ag_after_submit(struct agent *ag, uint32_t user, uint64_t seq, int64_t date_ms)
{
	struct ag_user *u = ag_user(ag, user);

	if (u != NULL)
		queue_imap(ag, u, SESS_APPEND, seq, date_ms);
}

static void start_users(struct agent *ag)
{
	const struct ml_cfg *c = &ag->cfg;

	for (uint32_t i = 0; i < ag->nusers; i++) {
		struct ag_user *u = &ag->users[i];
		/* users start evenly spread over the ramp, by global number */
		int64_t start = (int64_t)c->t0_ms +
				(int64_t)((double)c->ramp_s * 1000.0 * (double)(u->m.id - 1) /
					  (double)c->users);
		u->t_send.cb = on_send;
		u->t_recv.cb = on_recv;
		u->t_imap.cb = on_imap;
		if (c->send_per_hour > 0)
			wheel_add(&ag->wheel, &u->t_send,
				  start + (int64_t)ml_rng_exp(&ag->rng,
							      3600000.0 / c->send_per_hour));
		if (c->recv_per_hour > 0)
			wheel_add(&ag->wheel, &u->t_recv,
				  start + (int64_t)ml_rng_exp(&ag->rng,
							      3600000.0 / c->recv_per_hour));
		if (c->imap_per_hour > 0)
			wheel_add(&ag->wheel, &u->t_imap,
				  start + (int64_t)ml_rng_exp(&ag->rng,
							      3600000.0 / c->imap_per_hour));
	}
}

/* ---- the fill record ---- */
void fillrec_start(struct agent *ag, const char *record)
{
	struct ml_fill f;

	ag->fill_found[0] = ag->fill_error[0] = '\0';
	ag->fill_state = 1;
	if (record != NULL) {
		if (ml_fill_parse(record, &f) < 0) {
			str_lcpy(ag->fill_error, "bad record", sizeof(ag->fill_error));
			ag->fill_state = 3;
			return;
		}
		buf_release(&ag->fill_msg);
		buf_init(&ag->fill_msg, 1024, ML_TEXT_MAX);
		ml_fill_message(&f, &ag->fill_msg);
	}
	imap_start_fillrec(ag, record != NULL);
}

void fillrec_done(struct agent *ag, bool ok, const char *why)
{
	ag->fill_state = ok ? 2 : 3;
	if (!ok)
		str_lcpy(ag->fill_error, why, sizeof(ag->fill_error));
}

/* ---- init mode: users one after another, a window of them at a time ---- */
#define INIT_WINDOW 16
static void init_pump(struct agent *ag)
{
	while (ag->init_active < INIT_WINDOW && ag->init_next < ag->nusers) {
		uint32_t user = ag->users[ag->init_next++].m.id;

		ag->init_active++;
		imap_start_init(ag, user);
	}
}

void ag_init_user_done(struct agent *ag)
{
	ag->init_active--;
	ag->init_done++;
	init_pump(ag);
}

void ag_start(struct agent *ag, int64_t t0_ms)
{
	const struct ml_cfg *c = &ag->cfg;

	ag->cfg.t0_ms = (uint64_t)t0_ms;
	ag->ramp_end = t0_ms + (int64_t)c->ramp_s * 1000;
	ag->steady_end = ag->ramp_end + (int64_t)c->steady_s * 1000;
	ag->down_end = ag->steady_end + (int64_t)c->down_s * 1000;
	ag->drain_end = ag->down_end + (int64_t)c->drain_s * 1000;
	wheel_init(&ag->wheel, clock_wall_ms());
	ag->phase = PH_RAMP;
	if (strcmp(c->mode, "init") == 0)
		init_pump(ag);
	else
		start_users(ag);
	struct timeval tv = { 0, WHEEL_TICK_MS * 1000 };
	ag->tick = event_new(ag->base, -1, EV_PERSIST, ag_tick_cb, ag);
	event_add(ag->tick, &tv);
}

static void ag_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *ag = arg;
	int64_t now = clock_wall_ms();

	ml_metrics_tick(ag);
	if (strcmp(ag->cfg.mode, "init") == 0) {
		if (ag->init_done == ag->nusers)
			ag->phase = PH_DONE;
		return;
	}
	if (now < ag->ramp_end)
		ag->phase = PH_RAMP;
	else if (now < ag->steady_end)
		ag->phase = PH_STEADY;
	else if (now < ag->down_end)
		ag->phase = PH_DOWN;
	else if (ag->phase != PH_DONE)
		ag->phase = (ag->open_smtp + ag->open_imap > ag->pr.open ||
			     probe_waiting(ag) > 0) &&
					    now < ag->drain_end
				    ? PH_DRAIN
				    : PH_DONE;
	wheel_run(&ag->wheel, ag, now);
	if (now - ag->last_probe_tick >= 100) {
		ag->last_probe_tick = now;
		probe_tick(ag, now);
	}
}

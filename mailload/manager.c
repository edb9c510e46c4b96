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
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/histo.h"
#include "common/log.h"
#include "common/str.h"
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

struct mgr_seen {
	uint64_t seq;
	uint32_t user, uidv, uid;
	int64_t ms;
};

struct mgr_sent {
	uint64_t seq;
	int64_t sent_ms, ack_ms;
	bool submitted;
	uint32_t off, n;
};

struct mgr_err {
	int fn;
	char *msg;
	uint64_t n;
};

struct mgr_point {
	struct histo h[FN_COUNT];
	uint64_t err[FN_COUNT];
	struct mgr_err *errs;
	size_t nerrs;
	uint32_t ts_step_s, nts;
	uint64_t (*ts)[4];   /* smtp steps, smtp errors, imap steps, imap errors */
	uint64_t (*tslb)[2][TS_LB];
	struct mgr_sent *sent;
	size_t nsent, capsent;
	int64_t *rcpt;
	size_t nrcpt, caprcpt;
	struct mgr_seen *seen;
	size_t nseen, capseen;
	struct ml_server_info server; /* merged: handshakes over the whole run */
	uint64_t refused;
	struct histo delivery;
	int64_t offset_ms; /* of the agent being merged: its times are moved to our clock */
	struct buf clocks;  /* JSON array members: each agent's offset and round trip */
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
		(void)getline(&line, &cap, as[i].r);
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
		as = xcalloc(MGR_AGENTS_MAX, sizeof(*as));
		rc = agents_connect(o->agents, as, &n);
	} else {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		n = o->local_agents ? o->local_agents : (uint32_t)(cores > 0 ? cores : 1);
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
		buf_init(&req, 4096, 1u << 20);
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
		int64_t before = ml_now_ms();
		if (agent_request(&as[i], "{\"cmd\":\"status\"}", &resp) < 0)
			return -1;
		int64_t after = ml_now_ms();
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

/* ---- the merge ---- */
struct mgr_point *mgr_point_new(void)
{
	struct mgr_point *p = xcalloc(1, sizeof(*p));

	for (int i = 0; i < FN_COUNT; i++)
		histo_init(&p->h[i]);
	histo_init(&p->delivery);
	buf_init(&p->clocks, 256, 1u << 20);
	return p;
}

void mgr_point_free(struct mgr_point **pp)
{
	struct mgr_point *p = *pp;

	if (p == NULL)
		return;
	for (size_t i = 0; i < p->nerrs; i++)
		free(p->errs[i].msg);
	free(p->errs);
	free(p->ts);
	free(p->tslb);
	free(p->sent);
	free(p->rcpt);
	free(p->seen);
	buf_release(&p->clocks);
	free(p);
	*pp = NULL;
}

const struct histo *mgr_point_histo(const struct mgr_point *p, int fn)
{
	return fn < 0 ? &p->delivery : &p->h[fn];
}

static void add_err(struct mgr_point *p, int fn, const char *msg, uint64_t n)
{
	for (size_t i = 0; i < p->nerrs; i++)
		if (p->errs[i].fn == fn && strcmp(p->errs[i].msg, msg) == 0) {
			p->errs[i].n += n;
			return;
		}
	p->errs = xreallocarray(p->errs, p->nerrs + 1, sizeof(*p->errs));
	p->errs[p->nerrs++] = (struct mgr_err){ fn, xstrdup(msg), n };
}

static int merge_ts(struct mgr_point *p, const struct jv *r)
{
	const struct jv *ts = jv_get(r, "ts");
	uint32_t step = (uint32_t)jv_int(r, "ts_step_s", 1);

	if (ts == NULL || ts->type != JV_ARR)
		return -1;
	if (p->ts == NULL) {
		p->nts = (uint32_t)ts->n;
		p->ts_step_s = step;
		p->ts = xcalloc(p->nts ? p->nts : 1, sizeof(*p->ts));
		p->tslb = xcalloc(p->nts ? p->nts : 1, sizeof(*p->tslb));
	}
	if (step != p->ts_step_s || ts->n != p->nts)
		return -1;
	for (size_t i = 0; i < ts->n; i++) {
		const struct jv *e = &ts->kid[i];
		if (e->type != JV_ARR || e->n != 5 || e->kid[4].n != 2 * TS_LB)
			return -1;
		for (int k = 0; k < 4; k++)
			p->ts[i][k] += (uint64_t)e->kid[k].i;
		for (int k = 0; k < 2 * TS_LB; k++)
			p->tslb[i][k / TS_LB][k % TS_LB] += (uint64_t)e->kid[4].kid[k].i;
	}
	return 0;
}

static int merge_delivery(struct mgr_point *p, const struct jv *r)
{
	const struct jv *sent = jv_get(r, "sent"), *seen = jv_get(r, "seen");

	if (sent == NULL || seen == NULL || sent->type != JV_ARR || seen->type != JV_ARR)
		return -1;
	for (size_t i = 0; i < sent->n; i++) {
		const struct jv *e = &sent->kid[i];
		if (e->type != JV_ARR || e->n != 5 || e->kid[4].type != JV_ARR)
			return -1;
		if (p->nsent == p->capsent) {
			p->capsent = p->capsent ? p->capsent * 2 : 1024;
			p->sent = xreallocarray(p->sent, p->capsent, sizeof(*p->sent));
		}
		const struct jv *rc = &e->kid[4];
		while (p->nrcpt + rc->n > p->caprcpt) {
			p->caprcpt = p->caprcpt ? p->caprcpt * 2 : 4096;
			p->rcpt = xreallocarray(p->rcpt, p->caprcpt, sizeof(*p->rcpt));
		}
		p->sent[p->nsent++] = (struct mgr_sent){ (uint64_t)e->kid[0].i,
							 e->kid[1].i - p->offset_ms,
							 e->kid[2].i - p->offset_ms, e->kid[3].i != 0,
							 (uint32_t)p->nrcpt, (uint32_t)rc->n };
		for (size_t k = 0; k < rc->n; k++)
			p->rcpt[p->nrcpt++] = rc->kid[k].i;
	}
	for (size_t i = 0; i < seen->n; i++) {
		const struct jv *e = &seen->kid[i];
		if (e->type != JV_ARR || e->n != 5)
			return -1;
		if (p->nseen == p->capseen) {
			p->capseen = p->capseen ? p->capseen * 2 : 1024;
			p->seen = xreallocarray(p->seen, p->capseen, sizeof(*p->seen));
		}
		p->seen[p->nseen++] = (struct mgr_seen){ (uint64_t)e->kid[0].i, (uint32_t)e->kid[1].i,
							 (uint32_t)e->kid[2].i, (uint32_t)e->kid[3].i,
							 e->kid[4].i - p->offset_ms };
	}
	return 0;
}

int mgr_point_merge(struct mgr_point *p, const struct jv *r)
{
	const struct jv *fns = jv_get(r, "functions"), *top = jv_get(r, "errtop");

	if (fns == NULL || fns->type != JV_OBJ)
		return -1;
	for (size_t i = 0; i < fns->n; i++) {
		int fn = ml_fn_by_key(fns->kid[i].key);
		struct histo h;
		const char *hs = jv_str(&fns->kid[i], "histo", NULL);

		if (fn < 0 || hs == NULL || histo_deserialize(&h, hs, strlen(hs)) < 0)
			return -1;
		histo_merge(&p->h[fn], &h); /* exact: counts per bucket add */
		p->err[fn] += (uint64_t)jv_int(&fns->kid[i], "errors", 0);
	}
	for (size_t i = 0; top != NULL && i < top->n; i++) {
		const struct jv *e = &top->kid[i];
		if (e->type == JV_ARR && e->n == 3 && e->kid[0].type == JV_STR &&
		    e->kid[1].type == JV_STR)
			add_err(p, ml_fn_by_key(e->kid[0].s), e->kid[1].s, (uint64_t)e->kid[2].i);
	}
	if (merge_ts(p, r) < 0 || merge_delivery(p, r) < 0)
		return -1;
	ml_server_info_merge(&p->server, r);
	p->refused += (uint64_t)jv_int(r, "sessions_refused", 0);
	return 0;
}

/* ---- delivery accounting ---- */
static int cmp_seen(const void *a, const void *b)
{
	const struct mgr_seen *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->user != y->user)
		return x->user < y->user ? -1 : 1;
	if (x->uidv != y->uidv)
		return x->uidv < y->uidv ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	return x->ms < y->ms ? -1 : x->ms > y->ms;
}

/* Remote arrivals from the sink, one per (message, recipient address) copy. */
struct remote_rec {
	uint64_t seq;
	int64_t rcpt;
	int64_t ms;
};

static int cmp_remote(const void *a, const void *b)
{
	const struct remote_rec *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->rcpt != y->rcpt)
		return x->rcpt < y->rcpt ? -1 : 1;
	return x->ms < y->ms ? -1 : x->ms > y->ms;
}

static size_t sink_remote(const struct jv *recs, const struct ml_cfg *c, struct remote_rec **out)
{
	size_t n = 0, cap = 0;
	struct remote_rec *r = NULL;

	for (size_t i = 0; recs != NULL && i < recs->n; i++) {
		const struct jv *e = &recs->kid[i], *rc = jv_get(e, "rcpts");
		uint64_t run, seq;
		char ext[ML_STR + 8];

		if (sscanf(jv_str(e, "id", ""), "<%" SCNu64 ".%" SCNu64 "@mailload>", &run, &seq) != 2 ||
		    run != c->run_id || rc == NULL)
			continue;
		for (size_t k = 0; k < rc->n; k++) {
			uint64_t id;
			const char *a = rc->kid[k].s != NULL ? rc->kid[k].s : "";
			snprintf(ext, sizeof(ext), "@%s", c->ext_domain);
			const char *at = strchr(a, '@');
			if (a[0] != 'r' || at == NULL || strcasecmp(at, ext) != 0 ||
			    str_to_u64(a + 1, (size_t)(at - a - 1), UINT32_MAX, &id) < 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 1024;
				r = xreallocarray(r, cap, sizeof(*r));
			}
			r[n++] = (struct remote_rec){ seq, -(int64_t)id, jv_int(e, "arrival_ms", 0) };
		}
	}
	if (n > 1) /* qsort wants a non-null base even for nothing */
		qsort(r, n, sizeof(*r), cmp_remote);
	*out = r;
	return n;
}

#define LOST_LIST_MAX 20 /* lost copies named in the report (the first the accounting meets) */
struct lost_copy {
	const struct mgr_sent *sent;
	int64_t rcpt; /* a user number (> 0) or a remote recipient (< 0) */
};

struct deliv {
	uint64_t checked, delivered, lost, dup, unchecked, local, remote;
	uint64_t submitted, incoming, submitted_steady;
	struct lost_copy lost_list[LOST_LIST_MAX];
	uint32_t nlost_list;
};

/* Copies of message seq that local user r saw (distinct UIDVALIDITY/UID), the first at
   *first. */
static uint64_t local_copies(const struct mgr_point *p, uint64_t seq, uint32_t r, int64_t *first)
{
	struct mgr_seen key = { seq, r, 0, 0, 0 };
	size_t lo = 0, hi = p->nseen;
	uint64_t copies = 0;

	while (lo < hi) { /* first entry >= (seq, user) */
		size_t mid = (lo + hi) / 2;
		if (cmp_seen(&p->seen[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j < p->nseen && p->seen[j].seq == seq && p->seen[j].user == r; j++) {
		bool same = j > lo && p->seen[j - 1].uidv == p->seen[j].uidv &&
			    p->seen[j - 1].uid == p->seen[j].uid;
		copies += !same;
		if (p->seen[j].ms < *first)
			*first = p->seen[j].ms;
	}
	return copies;
}

/* Copies of message seq the sink recorded for remote recipient r, the first at *first. */
static uint64_t remote_copies(const struct remote_rec *rr, size_t nrr, uint64_t seq, int64_t r,
			      int64_t *first)
{
	struct remote_rec key = { seq, r, INT64_MIN };
	size_t lo = 0, hi = nrr;
	uint64_t copies = 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cmp_remote(&rr[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo; j < nrr && rr[j].seq == seq && rr[j].rcpt == r; j++) {
		copies++;
		if (rr[j].ms < *first)
			*first = rr[j].ms;
	}
	return copies;
}

static void account(struct mgr_point *p, const struct ml_cfg *c, const struct jv *sink,
		    struct deliv *d)
{
	struct remote_rec *rr = NULL;
	size_t nrr = sink != NULL ? sink_remote(sink, c, &rr) : 0;
	int64_t ramp_end = (int64_t)c->t0_ms + (int64_t)c->ramp_s * 1000;
	int64_t steady_end = ramp_end + (int64_t)c->steady_s * 1000;

	memset(d, 0, sizeof(*d));
	if (p->nseen > 1)
		qsort(p->seen, p->nseen, sizeof(*p->seen), cmp_seen);
	for (size_t i = 0; i < p->nsent; i++) {
		const struct mgr_sent *s = &p->sent[i];
		bool measured = s->ack_ms >= ramp_end && s->ack_ms < steady_end;

		d->submitted += s->submitted;
		d->submitted_steady += s->submitted && measured;
		d->incoming += !s->submitted;
		for (uint32_t k = 0; k < s->n; k++) {
			int64_t r = p->rcpt[s->off + k], first = INT64_MAX;
			uint64_t copies;

			if (r > 0) {
				d->local++;
				copies = local_copies(p, s->seq, (uint32_t)r, &first);
			} else {
				d->remote++;
				if (sink == NULL) {
					d->unchecked++;
					continue;
				}
				copies = remote_copies(rr, nrr, s->seq, r, &first);
			}
			d->checked++;
			if (copies == 0) {
				if (d->nlost_list < LOST_LIST_MAX)
					d->lost_list[d->nlost_list++] = (struct lost_copy){ s, r };
				d->lost++;
				continue;
			}
			d->delivered++;
			d->dup += copies > 1;
			if (measured)
				histo_add(&p->delivery,
					  (uint64_t)(first > s->ack_ms ? first - s->ack_ms : 0) * 1000);
		}
	}
	free(rr);
}

static void put_histo_fields(struct buf *o, const struct histo *h, uint64_t errors,
			     uint32_t limit_ms)
{
	uint64_t within = histo_count_le(h, (uint64_t)limit_ms * 1000);
	uint64_t all = h->count + errors;
	struct buf hs;

	buf_printf(o, "\"count\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"within\":%" PRIu64
		      ",\"pct\":%.3f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f"
		      ",\"mean_ms\":%.3f,\"histo\":",
		   h->count, errors, within, all ? 100.0 * (double)within / (double)all : 0.0,
		   (double)histo_percentile(h, 50) / 1000.0, (double)histo_percentile(h, 90) / 1000.0,
		   (double)histo_percentile(h, 99) / 1000.0, (double)h->max / 1000.0,
		   (double)histo_mean(h) / 1000.0);
	buf_init(&hs, 256, 1u << 22);
	histo_serialize(h, &hs);
	json_put_str(o, buf_cstr(&hs));
	buf_release(&hs);
}

static void put_ts(struct buf *o, const struct mgr_point *p)
{
	buf_printf(o, "\"ts\":{\"step_s\":%u,\"rows\":[", p->ts_step_s);
	for (uint32_t i = 0; i < p->nts; i++) {
		double p99[2];
		for (int k = 0; k < 2; k++) {
			uint64_t tot = 0, acc = 0;
			for (int b = 0; b < TS_LB; b++)
				tot += p->tslb[i][k][b];
			p99[k] = 0;
			for (int b = 0; b < TS_LB && tot > 0; b++) {
				acc += p->tslb[i][k][b];
				if ((double)acc >= 0.99 * (double)tot) { /* bucket b holds < 2^b us */
					p99[k] = (double)((uint64_t)1 << b) / 1000.0;
					break;
				}
			}
		}
		buf_printf(o, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f,%.3f]",
			   i ? "," : "", p->ts[i][0], p->ts[i][1], p->ts[i][2], p->ts[i][3], p99[0],
			   p99[1]);
	}
	buf_puts(o, "]}");
}

static int cmp_err(const void *a, const void *b)
{
	const struct mgr_err *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/* The functions array; adds up steps and failures, and the summary rules broken to why. */
static bool put_point_functions(const struct mgr_point *p, struct buf *o, uint64_t *steps,
				uint64_t *failed, struct buf *why)
{
	bool pass = true;

	buf_puts(o, "\"functions\":[");
	for (int f = 0; f < FN_DELIVERY; f++) {
		const struct histo *h = &p->h[f];
		uint64_t all = h->count + p->err[f];
		double share = all ? 100.0 * (double)histo_count_le(h, ml_fns[f].limit_ms * 1000ULL) /
					     (double)all
				   : 0;

		*steps += all;
		*failed += p->err[f];
		if (f < FN_NSUMMARY && (all == 0 || share <= ML_REQUIRED_PCT)) {
			pass = false;
			buf_printf(why, "%s\"%s: %s\"", why->len ? "," : "", ml_fns[f].name,
				   all == 0 ? "no samples" : "not more than 95% inside the limit");
		}
		buf_printf(o, "%s{\"key\":\"%s\",\"name\":\"%s\",\"summary\":%s,\"limit_ms\":%u,",
			   f ? "," : "", ml_fns[f].key, ml_fns[f].name,
			   f < FN_NSUMMARY ? "true" : "false", ml_fns[f].limit_ms);
		put_histo_fields(o, h, p->err[f], ml_fns[f].limit_ms);
		buf_putc(o, '}');
	}
	buf_putc(o, ']');
	return pass;
}

/* The delivery rules: time within the limit, nothing lost or duplicated, error rate. */
static bool point_rules(const struct mgr_point *p, const struct deliv *d, double erate,
			struct buf *why)
{
	uint64_t dall = p->delivery.count;
	uint64_t dwithin = histo_count_le(&p->delivery, ML_DELIVERY_LIMIT_MS * 1000ULL);
	double dpct = dall ? 100.0 * (double)dwithin / (double)dall : 0;
	bool pass = true;

	if (dall == 0 || dpct <= ML_REQUIRED_PCT) {
		pass = false;
		buf_printf(why, "%s\"Delivery Time: %s\"", why->len ? "," : "",
			   dall == 0 ? "no deliveries checked" : "not more than 95% within 60 s");
	}
	if (erate >= ML_ERROR_RATE_MAX) {
		pass = false;
		buf_printf(why, "%s\"Error Rate: %.2f%% (limit < 1%%)\"", why->len ? "," : "", erate);
	}
	if (d->lost > 0 || d->dup > 0) {
		pass = false;
		buf_printf(why, "%s\"%" PRIu64 " lost, %" PRIu64 " duplicated\"", why->len ? "," : "",
			   d->lost, d->dup);
	}
	return pass;
}

/* The lost copies named: the Message-ID, the recipient, local or remote, user submission or
   inbound mail, and when the server acknowledged it (wall-clock ms, and seconds into the run)
   so that they can be found in the servers' logs. */
static void put_lost_copies(struct buf *o, const struct ml_cfg *c, const struct deliv *d)
{
	buf_puts(o, ",\"lost_copies\":[");
	for (uint32_t i = 0; i < d->nlost_list; i++) {
		const struct lost_copy *l = &d->lost_list[i];
		char addr[2 * ML_STR];

		ml_rcpt_addr(c, l->rcpt, addr, sizeof(addr));
		buf_printf(o, "%s{\"message_id\":\"<%" PRIu64 ".%" PRIu64 "@mailload>\",\"rcpt\":",
			   i ? "," : "", c->run_id, l->sent->seq);
		json_put_str(o, addr);
		buf_printf(o, ",\"local\":%s,\"submitted\":%s,\"ack_ms\":%" PRId64
			      ",\"sent_s\":%.3f,\"ack_s\":%.3f}",
			   l->rcpt > 0 ? "true" : "false", l->sent->submitted ? "true" : "false",
			   l->sent->ack_ms, (double)(l->sent->sent_ms - (int64_t)c->t0_ms) / 1000.0,
			   (double)(l->sent->ack_ms - (int64_t)c->t0_ms) / 1000.0);
	}
	buf_putc(o, ']');
}

static void put_point_delivery(const struct mgr_point *p, const struct ml_cfg *c,
			       const struct deliv *d, const char *sink_note, struct buf *o)
{
	buf_printf(o, ",\"delivery\":{\"limit_ms\":%d,\"checked\":%" PRIu64 ",\"delivered\":%" PRIu64
		      ",\"lost\":%" PRIu64 ",\"duplicated\":%" PRIu64 ",\"local\":%" PRIu64
		      ",\"remote\":%" PRIu64 ",\"remote_unchecked\":%" PRIu64 ",\"remote_note\":",
		   ML_DELIVERY_LIMIT_MS, d->checked, d->delivered, d->lost, d->dup, d->local,
		   d->remote, d->unchecked);
	json_put_str(o, sink_note != NULL ? sink_note : "");
	put_lost_copies(o, c, d);
	buf_putc(o, ',');
	put_histo_fields(o, &p->delivery, 0, ML_DELIVERY_LIMIT_MS);
	buf_printf(o, "},\"messages\":{\"submitted\":%" PRIu64 ",\"submitted_steady\":%" PRIu64
		      ",\"incoming\":%" PRIu64 ",\"measured_rate\":%.3f}",
		   d->submitted, d->submitted_steady, d->incoming,
		   c->steady_s ? (double)d->submitted_steady * 60.0 / (double)c->steady_s : 0.0);
}

bool mgr_point_finish(struct mgr_point *p, const struct ml_cfg *c, double pct,
		      const struct jv *sink, const char *sink_note, struct buf *o)
{
	struct deliv d;
	uint64_t steps = 0, failed = 0;
	struct buf why;

	buf_init(&why, 256, 1u << 16);
	account(p, c, sink, &d);
	buf_printf(o, "{\"pct\":%.0f,\"rate\":%.3f,\"users\":%" PRIu64 ",\"run_id\":%" PRIu64
		      ",\"t0_ms\":%" PRIu64 ",",
		   pct, c->rate, c->users, c->run_id, c->t0_ms);
	bool pass = put_point_functions(p, o, &steps, &failed, &why);
	/* lost and duplicated deliveries are failed steps too */
	failed += d.lost + d.dup;
	steps += d.checked;
	double erate = steps ? 100.0 * (double)failed / (double)steps : 0;
	pass &= point_rules(p, &d, erate, &why);
	put_point_delivery(p, c, &d, sink_note, o);
	if (p->nerrs > 1)
		qsort(p->errs, p->nerrs, sizeof(*p->errs), cmp_err);
	buf_printf(o, ",\"errors\":{\"steps\":%" PRIu64 ",\"failed\":%" PRIu64
		      ",\"rate_pct\":%.4f,\"sessions_refused\":%" PRIu64 ",\"top\":[",
		   steps, failed, erate, p->refused);
	for (size_t i = 0; i < p->nerrs && i < 10; i++) {
		buf_printf(o, "%s[\"%s\",", i ? "," : "",
			   p->errs[i].fn >= 0 ? ml_fns[p->errs[i].fn].key : "?");
		json_put_str(o, p->errs[i].msg);
		buf_printf(o, ",%" PRIu64 "]", p->errs[i].n);
	}
	buf_puts(o, "]}");
	buf_putc(o, ',');
	ml_server_info_json(&p->server, o);
	buf_putc(o, ',');
	put_ts(o, p);
	buf_printf(o, ",\"agent_clocks\":[%s]", buf_cstr(&p->clocks));
	buf_printf(o, ",\"pass\":%s,\"reasons\":[%s]}", pass ? "true" : "false", buf_cstr(&why));
	buf_release(&why);
	return pass;
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

/* Collects every record of the sink into an array (jv built by hand). */
static struct jv *sink_records(const char *hostport, char *note, size_t notelen)
{
	int fd = tcp_connect(hostport);
	FILE *r, *w;
	struct jv *arr = xcalloc(1, sizeof(*arr));
	struct buf all;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (fd < 0) {
		snprintf(note, notelen, "sink control %s unreachable: remote delivery unchecked",
			 hostport);
		free(arr);
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
			ok = strstr(line, "\"ok\":true") != NULL;
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
	const char *err;
	free(arr);
	arr = NULL;
	if (!ok || jv_parse(all.data, all.len, &arr, &err) < 0) {
		snprintf(note, notelen, "sink %s gave no valid records: remote delivery unchecked",
			 hostport);
		arr = NULL;
	} else {
		snprintf(note, notelen, "sink %s: %zu records", hostport, arr->n);
	}
	buf_release(&all);
	return arr;
}

static void sink_reset(const char *hostport)
{
	int fd = tcp_connect(hostport);
	struct jv *resp = NULL;

	if (fd < 0)
		return;
	FILE *r = fdopen(fd, "r"), *w = fdopen(dup(fd), "w");
	if (sink_cmd(r, w, "{\"cmd\":\"reset\"}", &resp) == 0)
		jv_free(&resp);
	fclose(r);
	fclose(w);
}

/* ---- the client machine ---- */
static void put_client(struct buf *o)
{
	char model[160] = "unknown", line[256];
	uint64_t mem_kb = 0;
	struct utsname u;
	FILE *fp;

	if ((fp = fopen("/proc/cpuinfo", "r")) != NULL) {
		while (fgets(line, sizeof(line), fp) != NULL)
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');
				if (c != NULL) {
					str_lcpy(model, c + 2, sizeof(model));
					model[strcspn(model, "\n")] = '\0';
				}
				break;
			}
		fclose(fp);
	}
	if ((fp = fopen("/proc/meminfo", "r")) != NULL) {
		if (fscanf(fp, "MemTotal: %" SCNu64, &mem_kb) != 1)
			mem_kb = 0;
		fclose(fp);
	}
	uname(&u);
	buf_puts(o, "\"client\":{\"cpu\":");
	json_put_str(o, model);
	buf_printf(o, ",\"cores\":%ld,\"mem_kb\":%" PRIu64 ",\"kernel\":", sysconf(_SC_NPROCESSORS_ONLN),
		   mem_kb);
	char k[400];
	snprintf(k, sizeof(k), "%s %s %s", u.sysname, u.release, u.machine);
	json_put_str(o, k);
	buf_puts(o, "}");
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
	int64_t now = ml_now_ms();

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
		int w = 40, fill = (int)(40.0 * (double)init_done / (double)(c->users ? c->users : 1));
		fprintf(stderr, "\r[%.*s%*s] %" PRIu64 "/%" PRIu64 " users, %" PRIu64 " messages  ",
			fill, "########################################", w - fill, "", init_done,
			c->users, init_msgs);
		return;
	}
	int64_t end = t0 + (int64_t)(c->ramp_s + c->steady_s + c->down_s) * 1000;
	double sps = last_ms && now > last_ms ? (double)(steps - last_steps) * 1000.0 /
							(double)(now - last_ms)
					     : 0;
	last_steps = steps;
	last_ms = now;
	fprintf(stderr, "\r%-9s %5" PRId64 "s left  open %5" PRIu64 "  steps/s %7.1f  errors %" PRIu64
			"  worst %s %.1f%%    ",
		phase, end > now ? (end - now) / 1000 : 0, open, sps, errors,
		worst != NULL ? worst : "-", worst != NULL ? worst_pct : 100.0);
}

static int run_agents_until_done(struct mgr_agent *as, uint32_t n, const struct ml_cfg *c,
				 int64_t t0, bool init, bool quiet)
{
	bool done = false;
	int64_t limit = t0 + (int64_t)(c->ramp_s + c->steady_s + c->down_s + c->drain_s + 120) * 1000;

	while (!done) {
		sleep(1);
		status_line(as, n, c, t0, init, quiet, &done);
		if (!init && ml_now_ms() > limit) {
			log_warnx("agents did not finish in time; collecting what they have");
			break;
		}
	}
	if (!quiet)
		fputc('\n', stderr);
	return 0;
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
	if (agents_setup(as, n, &c) < 0 || agents_start_phases(as, n, ml_now_ms()) < 0) {
		agents_stop(as, n);
		return -1;
	}
	run_agents_until_done(as, n, &c, ml_now_ms(), true, o->quiet);
	uint64_t errors = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		if (agent_request(&as[i], "{\"cmd\":\"status\"}", &r) == 0)
			errors += (uint64_t)jv_int(r, "errors", 0);
		jv_free(&r);
	}
	agents_stop(as, n);
	fprintf(stderr, "init: %" PRIu64 " users, %s\n", c.users,
		errors ? "with errors (run it again: it resumes)" : "done");
	return errors ? -1 : 0;
}

static bool run_point(struct mgr_opts *o, double pct, struct buf *out, int *rc)
{
	struct ml_cfg c = o->cfg;
	struct mgr_agent *as;
	uint32_t n;
	struct mgr_point *p = mgr_point_new();
	char note[200] = "no sink control given: remote delivery unchecked (unavailable)";

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
	c.run_id = (uint64_t)ml_now_ms();
	str_lcpy(c.mode, "run", ML_STR);
	if (agents_start(o, &as, &n) < 0) {
		*rc = -1;
		mgr_point_free(&p);
		return false;
	}
	if (o->sink != NULL)
		sink_reset(o->sink);
	int64_t t0 = ml_now_ms() + 1000;
	c.t0_ms = (uint64_t)t0;
	fprintf(stderr, "load point %.0f%%: %.2f msgs/min, %" PRIu64 " users, %u agents, phases %" PRIu64
			"/%" PRIu64 "/%" PRIu64 " s\n",
		pct, c.rate, c.users, n, c.ramp_s, c.steady_s, c.down_s);
	if (agents_setup(as, n, &c) < 0 || agents_start_phases(as, n, t0) < 0) {
		agents_stop(as, n);
		mgr_point_free(&p);
		*rc = -1;
		return false;
	}
	run_agents_until_done(as, n, &c, t0, false, o->quiet);
	for (uint32_t i = 0; i < n; i++) {
		struct jv *r = NULL;
		p->offset_ms = as[i].offset_ms;
		buf_printf(&p->clocks, "%s{\"agent\":", i ? "," : "");
		json_put_str(&p->clocks, as[i].name);
		buf_printf(&p->clocks, ",\"offset_ms\":%" PRId64 ",\"rtt_ms\":%" PRId64 "}",
			   as[i].offset_ms, as[i].rtt_ms);
		if (agent_request(&as[i], "{\"cmd\":\"results\"}", &r) < 0 ||
		    mgr_point_merge(p, r) < 0)
			log_warnx("agent %s: no usable results", as[i].name);
		jv_free(&r);
	}
	agents_stop(as, n);
	struct jv *sink = o->sink != NULL ? sink_records(o->sink, note, sizeof(note)) : NULL;
	bool pass = mgr_point_finish(p, &c, pct, sink, note, out);
	jv_free(&sink);
	mgr_point_free(&p);
	return pass;
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

int mgr_run(struct mgr_opts *o)
{
	struct buf out;
	bool pass = true;
	int rc = 0;

	if (o->report_dir == NULL || (mkdir(o->report_dir, 0755) < 0 && errno != EEXIST)) {
		log_warnx("run: --report DIR is needed and must be creatable");
		return -1;
	}
	buf_init(&out, 1 << 16, MGR_LINE_MAX);
	buf_printf(&out, "{\"mailload\":\"0.1.0\",\"generated_ms\":%" PRId64 ",\"agents\":", ml_now_ms());
	json_put_str(&out, o->agents != NULL ? o->agents : "local");
	buf_printf(&out, ",\"sink\":");
	json_put_str(&out, o->sink != NULL ? o->sink : "");
	buf_puts(&out, ",\"config\":{");
	ml_cfg_json(&o->cfg, &out);
	buf_puts(&out, "},");
	put_client(&out);
	buf_puts(&out, ",\"points\":[");
	for (uint32_t i = 0; i < o->npoints; i++) {
		if (i > 0)
			buf_putc(&out, ',');
		bool pp = run_point(o, o->points[i], &out, &rc);
		if (rc < 0)
			break;
		if (o->points[i] <= 100)
			pass &= pp;
	}
	buf_printf(&out, "],\"pass\":%s}\n", pass && rc == 0 ? "true" : "false");
	if (rc == 0 && write_file(o->report_dir, "report.json", out.data, out.len) == 0)
		rc = report_render_dir(o->report_dir, !o->quiet);
	buf_release(&out);
	if (rc < 0)
		return -1;
	return pass ? 0 : 1;
}

int mgr_search(struct mgr_opts *o, double lo, double hi, uint32_t steps)
{
	double best = 0, r = lo;
	char dir[4096];
	const char *base = o->report_dir;
	bool found_fail = false;

	lo = 0; /* the highest rate known to pass */

	/* double until a rate fails (or hi), then bisect */
	o->npoints = 1;
	o->points[0] = 100;
	for (uint32_t i = 0; i < steps; i++) {
		snprintf(dir, sizeof(dir), "%s/rate-%.1f", base, r);
		mkdir(base, 0755);
		o->report_dir = dir;
		o->cfg.rate = r;
		int rc = mgr_run(o);
		if (rc < 0)
			return -1;
		fprintf(stderr, "search: %.2f msgs/min %s\n", r, rc == 0 ? "PASS" : "FAIL");
		if (rc == 0) {
			best = r;
			lo = r;
			if (!found_fail && r >= hi)
				break; /* passes at the top of the range */
			r = found_fail ? (lo + hi) / 2 : (r * 2 < hi ? r * 2 : hi);
		} else {
			found_fail = true;
			hi = r;
			r = (lo + hi) / 2;
		}
		if (found_fail && hi - lo < lo * 0.05)
			break;
	}
	o->report_dir = base;
	printf("highest passing rate: %.2f msgs/min (%.0f users%s)\n", best,
	       o->users_given ? (double)o->cfg.users : best * 200,
	       o->users_given ? ", fixed population" : "");
	return best > 0 ? 0 : 1;
}

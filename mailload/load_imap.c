/* load_imap.c — owns the IMAP client state machine: greeting, CAPABILITY, STARTTLS, LOGIN, then
 * one script per session kind (check, sync, cleanup, append, delivery probe, init), pipelined
 * STOREs, synchronizing literals for APPEND, every response checked against the user model. */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/agent.h"
#include "mailload/resp.h"

#define HDR_FIELDS                                                                        \
	"(From To Cc Subject Date Message-ID Priority X-Priority References In-Reply-To " \
	"Content-Type)"
#define MAX_PEND 32
#define CHECK_READ_MAX 10

enum is_state { IS_GREETING, IS_CAPA, IS_STARTTLS, IS_ID, IS_LOGIN, IS_RUN, IS_LOGOUT };

struct imap_sess {
	struct agent *ag;
	struct bufferevent *bev;
	struct net_connect *nc; /* while connecting */
	struct event *timer, *poll;
	struct ag_user *u; /* NULL for probes */
	uint32_t user;
	enum ml_session kind;
	enum is_state st;
	int step;
	bool dead, tls_done, in_inbox;
	int64_t t0;
	enum ml_fn fn;
	struct imap_rparser rp;
	struct um_view view;
	struct um_folder scratch; /* probes and init: not the user's record */
	uint32_t tagn;
	struct {
		uint32_t tag;
		uint8_t fn;
		uint8_t bits; /* STORE +FLAGS: the flags seq must show once it is done */
		uint32_t seq;
		int64_t t0;
	} pend[MAX_PEND];
	uint32_t npend;
	struct ml_folders folders;
	/* check */
	uint32_t nnew, readi, lastuid;
	bool body_pending;
	struct {
		uint32_t uid;
		uint64_t size;
	} newm[CHECK_READ_MAX];
	/* sync / cleanup */
	uint32_t pick[2], npick, picki;
	/* append / probe */
	uint64_t seq;
	int64_t date_ms, deadline_ms;
	bool literal_wait, app_init;
	bool has_idle, idle_wait, idling; /* probes: IDLE offered, asked, in progress */
	bool has_id;                      /* the server offers ID (RFC 2971) */
	uint32_t id_tag;                  /* the tag of this session's ID NIL, 0 none */
	bool grew;    /* probes: EXISTS went up since the last look (after any EXPUNGE) */
	bool watched; /* probes: the first look completed */
	bool recheck; /* probes: this look was not asked for by an EXISTS */
	int64_t last_look_ms;
	bool recon_ok; /* reconciliation: the INBOX was read */
	size_t recon_idx;
	bool fill_write, fill_ok, fill_absent; /* the fill record: write it, done, no folder */
	char why[96];                          /* the failure that ended the session */
	uint64_t app_seq;
	int64_t app_date;
	/* init */
	bool present[ML_MAX_FOLDERS];
	uint32_t have[ML_MAX_FOLDERS];
	uint32_t fi, ai;
	char delim;
};

static void is_read_cb(struct bufferevent *bev, void *arg);
static void is_event_cb(struct bufferevent *bev, short what, void *arg);
static void is_next(struct imap_sess *s);
static void build_append(struct imap_sess *s);
static void is_idle_done(struct imap_sess *s);
static bool is_over(struct imap_sess *s);

/* Probes and the reconciliation are measurement: their steps go to the probe functions. */
static bool is_probe_kind(const struct imap_sess *s)
{
	return s->kind == SESS_PROBE || s->kind == SESS_RECON || s->kind == SESS_FILLREC;
}

static enum ml_fn sfn(const struct imap_sess *s, enum ml_fn fn)
{
	if (!is_probe_kind(s))
		return fn;
	switch (fn) {
	case FN_IMAP_CONNECT:
		return FN_PROBE_CONNECT;
	case FN_IMAP_CAPABILITY:
	case FN_IMAP_STARTTLS:
	case FN_IMAP_LOGIN:
		return FN_PROBE_LOGIN;
	case FN_IMAP_LOGOUT:
		return FN_PROBE_LOGOUT;
	default:
		return fn;
	}
}

static bool is_logout_fn(enum ml_fn fn)
{
	return fn == FN_IMAP_LOGOUT || fn == FN_PROBE_LOGOUT;
}

static void is_reap(evutil_socket_t fd, short what, void *arg)
{
	struct imap_sess *s = arg;

	if (s->bev != NULL)
		bufferevent_free(s->bev);
	event_free(s->timer);
	event_free(s->poll);
	imap_rparser_release(&s->rp);
	um_view_release(&s->view);
	free(s);
}

static void is_end(struct imap_sess *s)
{
	static const struct timeval zero = { 0, 0 };
	struct agent *ag = s->ag;

	if (s->dead)
		return;
	s->dead = true;
	event_del(s->timer);
	event_del(s->poll);
	net_connect_cancel(&s->nc);
	if (s->bev != NULL)
		bufferevent_disable(s->bev, EV_READ | EV_WRITE);
	if (s->u != NULL && s->view.f != NULL && s->kind != SESS_INIT)
		um_view_end(&s->view);
	ag->open_imap--;
	switch (s->kind) {
	case SESS_PROBE:
		probe_done(ag, s->user, !s->watched);
		break;
	case SESS_RECON:
		recon_done(ag, s->recon_idx, s->recon_ok, s->why[0] ? s->why : "session ended");
		break;
	case SESS_FILLREC:
		fillrec_done(ag, s->fill_ok || s->fill_absent,
			     s->why[0] ? s->why : "session ended");
		break;

	case SESS_INIT: {
		uint32_t want = s->folders.msgs[0], have = s->have[0];
		if (s->st == IS_LOGOUT && want > have)
			smtp_start_at(ag, SK_INIT, s->user, have, want - have);
		else
			ag_init_user_done(ag);
		break;
	}
	default:
		ag_imap_done(ag, s->u);
		break;
	}
	event_base_once(ag->base, -1, EV_TIMEOUT, is_reap, s, &zero);
}

static void is_fail(struct imap_sess *s, enum ml_fn fn, const char *why)
{
	if (s->why[0] == '\0')
		snprintf(s->why, sizeof(s->why), "%s: %.60s", ml_fns[sfn(s, fn)].key, why);
	ag_step(s->ag, sfn(s, fn), s->t0, false, why);
	is_end(s);
}

static void is_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_sess *s = arg;

	if (is_over(s))
		return;
	is_fail(s, s->fn, "timeout");
}

static void is_arm(struct imap_sess *s)
{
	struct timeval tv = { (time_t)s->ag->cfg.timeout_s, 0 };

	event_add(s->timer, &tv);
}

/* Sends a tagged command (format after the tag) and queues its completion. */
static void is_cmd(struct imap_sess *s, enum ml_fn fn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void is_cmd(struct imap_sess *s, enum ml_fn fn, const char *fmt, ...)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);
	va_list ap;

	assert(s->npend < MAX_PEND);
	fn = sfn(s, fn);
	s->tagn++;
	evbuffer_add_printf(out, "a%u ", s->tagn);
	va_start(ap, fmt);
	evbuffer_add_vprintf(out, fmt, ap);
	va_end(ap);
	evbuffer_add(out, "\r\n", 2);
	s->pend[s->npend].tag = s->tagn;
	s->pend[s->npend].fn = (uint8_t)fn;
	s->pend[s->npend].bits = 0;
	s->pend[s->npend].t0 = clock_wall_us();
	s->npend++;
	s->fn = fn;
	s->t0 = clock_wall_us();
	is_arm(s);
}

/* The command just queued stores bits on seq: from its OK on, replies must show them. */
static void is_cmd_stores(struct imap_sess *s, uint32_t seq, uint8_t bits)
{
	s->pend[s->npend - 1].seq = seq;
	s->pend[s->npend - 1].bits = bits;
}

static void is_logout(struct imap_sess *s)
{
	s->st = IS_LOGOUT;
	is_cmd(s, FN_IMAP_LOGOUT, "LOGOUT");
}

/* The folder name as the server spells it (hierarchy delimiter learned from LIST). */
static const char *fname(struct imap_sess *s, uint32_t i, char *tmp, size_t n)
{
	str_lcpy(tmp, s->folders.name[i], n);
	for (char *p = tmp; *p != '\0'; p++)
		if (*p == '/' && s->delim != '\0')
			*p = s->delim;
	return tmp;
}

static void is_select(struct imap_sess *s, uint32_t fi, enum ml_fn fn, bool examine)
{
	char tmp[ML_FOLDER_NAME_MAX];
	struct um_folder *f = s->u != NULL && s->kind != SESS_INIT && fi < ML_MAX_FOLDERS
				      ? &s->u->m.f[fi]
				      : &s->scratch;

	if (s->view.f != NULL && s->u != NULL && s->kind != SESS_INIT)
		um_view_end(&s->view);
	um_view_begin(&s->view, f, fi == 0 || fi == 1);
	s->in_inbox = fi == 0;
	is_cmd(s, fn, "%s \"%s\"", examine ? "EXAMINE" : "SELECT", fname(s, fi, tmp, sizeof(tmp)));
}

/* ---- responses ---- */
static void is_contradiction(struct imap_sess *s, const char *why)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "contradiction: %s", why);
	log_info("imap user=%u %s", s->user, msg);
	ag_error(s->ag, s->fn, msg);
}

static void is_fetch(struct imap_sess *s, const struct imap_fetch *f)
{
	if (s->view.f == NULL)
		return ag_error(s->ag, s->fn, "FETCH response with no folder selected");
	const char *why = um_view_fetch(&s->view, f);

	if (why != NULL)
		is_contradiction(s, why);
	if (f->hdr != NULL && s->in_inbox && f->uid != 0) {
		uint64_t seq = ag_msgid_seq(s->ag, f->hdr, f->hdrlen);
		if (seq != 0 && s->kind == SESS_RECON)
			recon_seen(s->ag, s->user, seq, s->view.uidvalidity, (uint32_t)f->uid);
		else if (seq != 0 &&
			 ag_seen(s->ag, s->user, seq, s->view.uidvalidity, (uint32_t)f->uid) &&
			 s->recheck)
			s->ag->pr.idle_missed++; /* IDLE had not announced it */
	}
	if (s->kind == SESS_FILLREC && f->hdr != NULL) {
		const char *v;
		size_t n = hdr_find(f->hdr, f->hdrlen, "X-Mailload-Fill", &v);
		if (n > 0 && n < sizeof(s->ag->fill_found))
			snprintf(s->ag->fill_found, sizeof(s->ag->fill_found), "%.*s", (int)n, v);
	}
	if (s->kind == SESS_PROBE && f->uid > s->ag->pr.lastuid[s->user - 1])
		s->ag->pr.lastuid[s->user - 1] = (uint32_t)f->uid;
	if (s->kind == SESS_CHECK && s->step == 2 && f->uid > s->lastuid &&
	    s->nnew < CHECK_READ_MAX) {
		s->newm[s->nnew].uid = (uint32_t)f->uid;
		s->newm[s->nnew].size = f->size;
		s->nnew++;
	}
	if (f->has_body && s->kind == SESS_CHECK && s->readi < s->nnew &&
	    s->newm[s->readi].size != 0 && f->bodylen != s->newm[s->readi].size)
		is_contradiction(s, "BODY[] length differs from RFC822.SIZE");
}

static void is_list(struct imap_sess *s, struct itok *t)
{
	char name[ML_FOLDER_NAME_MAX * 2];

	if (itok_next(t) != IT_LPAREN || itok_skip_value(t) < 0)
		return;
	itok_next(t); /* delimiter */
	if (t->type == IT_STRING && t->len == 1 && t->s[0] != '\\' && t->s[0] != '"')
		s->delim = s->ag->imap_delim = t->s[0];
	if (itok_next(t) != IT_STRING && t->type != IT_ATOM)
		return;
	if (t->len >= sizeof(name))
		return;
	memcpy(name, t->s, t->len);
	name[t->len] = '\0';
	for (uint32_t i = 0; i < s->folders.n; i++) {
		char tmp[ML_FOLDER_NAME_MAX];
		if (strcasecmp(fname(s, i, tmp, sizeof(tmp)), name) == 0)
			s->present[i] = true;
	}
}

static void is_status(struct imap_sess *s, struct itok *t)
{
	char name[ML_FOLDER_NAME_MAX * 2];
	uint64_t v;

	itok_next(t);
	if ((t->type != IT_STRING && t->type != IT_ATOM) || t->len >= sizeof(name))
		return;
	memcpy(name, t->s, t->len);
	name[t->len] = '\0';
	if (itok_next(t) != IT_LPAREN)
		return;
	while (itok_next(t) == IT_ATOM) {
		bool msgs = itok_is(t, "MESSAGES");
		itok_next(t);
		if (msgs && itok_num(t, &v))
			for (uint32_t i = 0; i < s->folders.n; i++) {
				char tmp[ML_FOLDER_NAME_MAX];
				if (strcasecmp(fname(s, i, tmp, sizeof(tmp)), name) == 0)
					s->have[i] = (uint32_t)v;
			}
	}
}

/* "[NAME n]" as one bracketed atom: n when it matches. */
static bool resp_code_num(const struct itok *t, const char *name, uint64_t *n)
{
	size_t nl = strlen(name);

	if (t->type != IT_ATOM || t->len < nl + 2 || !str_caseprefix(t->s, t->len, name))
		return false;
	const char *e = memchr(t->s + nl, ']', t->len - nl);
	return e != NULL &&
	       str_to_u64(t->s + nl, (size_t)(e - t->s - (ptrdiff_t)nl), UINT32_MAX, n) == 0;
}

/* "* n EXISTS" and "* n EXPUNGE" (t is past the number). */
static void is_untagged_num(struct imap_sess *s, struct itok *t, uint64_t n)
{
	const char *why = NULL;

	itok_next(t);
	if (s->view.f == NULL)
		return;
	if (itok_is(t, "EXISTS")) {
		s->grew |= n > s->view.exists;
		why = um_view_exists(&s->view, (uint32_t)n);
		if (s->idling) /* new mail: leave IDLE to read it */
			is_idle_done(s);
	} else if (itok_is(t, "EXPUNGE")) {
		why = um_view_expunge(&s->view, (uint32_t)n);
	}
	if (why != NULL)
		is_contradiction(s, why);
}

/* "* OK": the greeting, or a response code about the selected mailbox. */
static void is_untagged_ok(struct imap_sess *s, struct itok *t, const char *p, size_t len)
{
	const char *why = NULL;
	uint64_t n;

	if (s->st == IS_GREETING) {
		char *greeting = s->ag->server.imap_greeting;

		ag_step(s->ag, sfn(s, FN_IMAP_CONNECT), s->t0, true, NULL);
		if (greeting[0] == '\0')
			snprintf(greeting, sizeof(s->ag->server.imap_greeting), "%.*s",
				 (int)(len > 150 ? 150 : len), p);
		s->st = IS_CAPA;
		is_cmd(s, FN_IMAP_CAPABILITY, "CAPABILITY");
		return;
	}
	itok_next(t);
	if (s->view.f == NULL)
		return;
	if (resp_code_num(t, "[UIDVALIDITY ", &n))
		why = um_view_uidvalidity(&s->view, (uint32_t)n);
	else if (resp_code_num(t, "[UIDNEXT ", &n))
		why = um_view_uidnext(&s->view, (uint32_t)n);
	if (why != NULL)
		is_contradiction(s, why);
}

static void is_untagged(struct imap_sess *s, const char *p, size_t len)
{
	struct itok t;
	struct imap_fetch f;
	uint64_t n;
	int rc;

	if ((rc = imap_parse_fetch(p, len, &f)) != 0) {
		if (rc < 0)
			return ag_error(s->ag, s->fn, "malformed FETCH response");
		return is_fetch(s, &f);
	}
	itok_init(&t, p, len);
	itok_next(&t);
	if (itok_num(&t, &n))
		return is_untagged_num(s, &t, n);
	if (itok_is(&t, "OK"))
		return is_untagged_ok(s, &t, p, len);
	if (itok_is(&t, "CAPABILITY")) {
		while (itok_next(&t) == IT_ATOM) {
			if (itok_is(&t, "IDLE"))
				s->has_idle = true;
			else if (itok_is(&t, "ID"))
				s->has_id = true;
		}
		if (s->ag->server.imap_caps[0] == '\0')
			snprintf(s->ag->server.imap_caps, sizeof(s->ag->server.imap_caps), "%.*s",
				 (int)(len > 300 ? 300 : len), p);
		return;
	}
	if (itok_is(&t, "ID")) {
		char *id = s->ag->server.imap_id;
		if (id[0] == '\0' && len > 3)
			snprintf(id, sizeof(s->ag->server.imap_id), "%.*s",
				 (int)(len - 3 > 230 ? 230 : len - 3), p + 3);
		return;
	}
	if (itok_is(&t, "LIST") || itok_is(&t, "LSUB"))
		return is_list(s, &t);
	if (itok_is(&t, "STATUS"))
		return is_status(s, &t);
	if (itok_is(&t, "BYE") && s->st != IS_LOGOUT) {
		if (s->st == IS_GREETING)
			return is_fail(s, FN_IMAP_CONNECT, "greeted with BYE");
		return is_fail(s, s->fn, "server said BYE");
	}
}

static void is_tagged(struct imap_sess *s, const char *p, size_t len)
{
	struct itok t;
	uint64_t tag;
	uint32_t k;
	char why[160];

	itok_init(&t, p, len);
	itok_next(&t);
	if (t.type != IT_ATOM || t.len < 2 || t.s[0] != 'a' ||
	    str_to_u64(t.s + 1, t.len - 1, UINT32_MAX, &tag) < 0)
		return is_fail(s, s->fn, "unexpected tag");
	for (k = 0; k < s->npend && s->pend[k].tag != tag; k++)
		;
	if (k == s->npend)
		return is_fail(s, s->fn, "reply to a command never sent");
	enum ml_fn fn = (enum ml_fn)s->pend[k].fn;
	int64_t t0 = s->pend[k].t0;
	uint32_t st_seq = s->pend[k].seq;
	uint8_t st_bits = s->pend[k].bits;
	memmove(s->pend + k, s->pend + k + 1, (s->npend - k - 1) * sizeof(s->pend[0]));
	s->npend--;
	itok_next(&t);
	bool ok = itok_is(&t, "OK");
	snprintf(why, sizeof(why), "%.*s", (int)(len > 150 ? 150 : len), p);
	if (!ok && fn == FN_IMAP_CREATE) { /* init: "already exists" is fine */
		ag_step(s->ag, fn, t0, true, NULL);
	} else if (!ok && tag == s->id_tag) { /* no ID: nothing to disclose, the session goes on */
		ag_step(s->ag, fn, t0, false, why);
	} else {
		ag_step(s->ag, fn, t0, ok, why);
		if (!ok && s->kind == SESS_FILLREC && fn == FN_PROBE_EXAMINE)
			s->fill_absent = true; /* no MailloadFill folder: no record */
		if (!ok && !is_logout_fn(fn)) {
			if (s->why[0] == '\0')
				snprintf(s->why, sizeof(s->why), "%s: %.60s", ml_fns[fn].key, why);
			if (s->st != IS_LOGOUT && s->npend == 0)
				is_logout(s);
			s->step = -1; /* nothing more after a failure but LOGOUT */
			return;
		}
	}
	if (st_bits != 0)
		um_view_want(&s->view, st_seq, st_bits);
	if (fn == FN_IMAP_SELECT_INBOX || fn == FN_IMAP_SELECT_FOLDER || fn == FN_PROBE_EXAMINE) {
		const char *c = um_view_selected(&s->view);
		if (c != NULL && !is_probe_kind(s) && s->kind != SESS_INIT)
			is_contradiction(s, c);
	}
	if (fn == FN_IMAP_EXPUNGE) {
		const char *c = um_view_expunged(&s->view);
		if (c != NULL)
			is_contradiction(s, c);
	}
	if (s->npend > 0)
		return;
	event_del(s->timer);
	if (is_logout_fn(fn))
		return is_end(s);
	is_next(s);
}

static void is_starttls(struct imap_sess *s)
{
	struct bufferevent *tb = ag_starttls(s->ag, CONN_IMAP, s->bev);

	if (tb == NULL)
		return is_fail(s, FN_IMAP_STARTTLS, "TLS set-up failed");
	s->bev = tb;
	s->tls_done = true;
	imap_rparser_reset_input(&s->rp);
	bufferevent_setcb(tb, is_read_cb, NULL, is_event_cb, s);
	bufferevent_enable(tb, EV_READ | EV_WRITE);
}

static void is_append_literal(struct imap_sess *s)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);

	if (s->kind == SESS_FILLREC) {
		evbuffer_add(out, s->ag->fill_msg.data, s->ag->fill_msg.len);
		evbuffer_add(out, "\r\n", 2);
		s->literal_wait = false;
		return;
	}
	build_append(s);
	ml_msg_emit(&s->ag->msg, out);
	evbuffer_add(out, "\r\n", 2);
	s->literal_wait = false;
}

static void is_response(struct imap_sess *s, const char *p, size_t len)
{
	if (len >= 2 && p[0] == '*' && p[1] == ' ')
		return is_untagged(s, p + 2, len - 2);
	if (len >= 1 && p[0] == '+') {
		if (s->idle_wait) { /* idling: wake up now and then to check the deadline */
			static const struct timeval two = { 2, 0 };
			s->idle_wait = false;
			s->idling = true;
			if (s->grew) /* an EXISTS came before the "+": the news is here already */
				return is_idle_done(s);
			event_add(s->poll, &two);
			return;
		}
		if (!s->literal_wait)
			return is_fail(s, s->fn, "unexpected continuation request");
		return is_append_literal(s);
	}
	is_tagged(s, p, len);
}

/* After the run (the agent done, its results taken), only the reconciliation and the fill
   record may still read a mailbox: a user's session or a probe that went on would see, and
   expunge, copies the results no longer hear of. */
static bool is_over(struct imap_sess *s)
{
	if (s->ag->phase != PH_DONE || s->kind == SESS_RECON || s->kind == SESS_FILLREC ||
	    s->kind == SESS_INIT)
		return false;
	is_end(s);
	return true;
}

static void is_read_cb(struct bufferevent *bev, void *arg)
{
	struct imap_sess *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (is_over(s))
		return;
	while (!s->dead) {
		int rc = imap_rparser_next(&s->rp, in);

		if (rc == 0)
			return;
		if (rc < 0)
			return is_fail(s, s->fn, s->rp.error);
		is_response(s, s->rp.line.data, s->rp.line.len);
		buf_reset(&s->rp.line);
		s->rp.lit_skipped = s->rp.lit_total = 0;
	}
}

static void is_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct imap_sess *s = arg;
	char why[200] = "";

	if (s->dead || ag_tls_event(s->ag, bev, what, 1, why, sizeof(why)))
		return;
	if (why[0] != '\0')
		return is_fail(s, s->fn, why);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		if (s->st == IS_LOGOUT)
			return is_end(s); /* closed right after BYE: fine */
		is_fail(s, s->fn,
			s->st == IS_GREETING ? "connection closed before the greeting"
					     : "connection closed by server");
	}
}

static void is_connected(struct bufferevent *bev, const char *error, void *arg)
{
	struct imap_sess *s = arg;

	s->nc = NULL;
	if (bev == NULL)
		return is_fail(s, FN_IMAP_CONNECT, error);
	if ((s->bev = ag_connected(s->ag, CONN_IMAP, bev)) == NULL)
		return is_fail(s, FN_IMAP_CONNECT, "TLS set-up failed");
	s->tls_done = s->ag->srv[CONN_IMAP].implicit;
	bufferevent_setcb(s->bev, is_read_cb, NULL, is_event_cb, s);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

/* ---- session scripts ---- */
static uint32_t pick_folder(struct imap_sess *s)
{
	return s->folders.n > 1 ? (uint32_t)ml_rng_range(&s->ag->rng, 1, s->folders.n - 1) : 0;
}

/* Check, step 4: marks the new messages \Seen (and some \Deleted), pipelined; false when
   there was nothing to store. */
static bool check_store(struct imap_sess *s)
{
	bool any = false;

	s->view.deleted = 0;
	for (uint32_t i = 0; i < s->nnew; i++) {
		uint32_t seq = um_view_seq_of_uid(&s->view, s->newm[i].uid);
		if (seq == 0)
			continue;
		is_cmd(s, FN_IMAP_UID_STORE_SEEN, "UID STORE %u +FLAGS (\\Seen)", s->newm[i].uid);
		is_cmd_stores(s, seq, FL_SEEN);
		any = true;
		if (ml_rng_unit(&s->ag->rng) < s->ag->cfg.check_delete) {
			is_cmd(s, FN_IMAP_UID_STORE_DELETED, "UID STORE %u +FLAGS (\\Deleted)",
			       s->newm[i].uid);
			is_cmd_stores(s, seq, FL_DELETED);
		}
	}
	return any;
}

/* Check, step 3: fetches the next new message's body; false when all were read. */
static bool check_read_next(struct imap_sess *s)
{
	if (s->body_pending) {
		s->readi++;
		s->body_pending = false;
	}
	while (s->readi < s->nnew) {
		uint32_t seq = um_view_seq_of_uid(&s->view, s->newm[s->readi].uid);
		if (seq == 0) {
			s->readi++;
			continue;
		}
		s->body_pending = true;
		is_cmd(s, FN_IMAP_FETCH_BODY, "FETCH %u BODY[]", seq);
		return true;
	}
	return false;
}

static void step_check(struct imap_sess *s)
{
	struct ag_user *u = s->u;

	switch (s->step++) {
	case 0:
		return is_select(s, 0, FN_IMAP_SELECT_INBOX, false);
	case 1:
		s->lastuid = u->inbox_lastuid;
		s->nnew = 0;
		return is_cmd(s, FN_IMAP_UID_FETCH_HDR,
			      "UID FETCH %u:* (UID BODY.PEEK[HEADER.FIELDS " HDR_FIELDS
			      "] FLAGS RFC822.SIZE)",
			      s->lastuid + 1);
	case 2:
		for (uint32_t i = 0; i < s->nnew; i++)
			if (s->newm[i].uid > u->inbox_lastuid)
				u->inbox_lastuid = s->newm[i].uid;
		s->readi = 0;
		__attribute__((fallthrough)); /* read the first */
	case 3:
		s->step = 3;
		if (check_read_next(s))
			return;
		__attribute__((fallthrough));
	case 4:
		s->step = 5;
		if (check_store(s))
			return;
		__attribute__((fallthrough));
	case 5:
		s->step = 6;
		if (s->view.deleted > 0)
			return is_cmd(s, FN_IMAP_EXPUNGE, "EXPUNGE");
		__attribute__((fallthrough));
	default:
		return is_logout(s);
	}
}

static void cmd_fetch_headers(struct imap_sess *s)
{
	uint32_t n = s->view.exists, lo = n > 200 ? n - 199 : 1;

	is_cmd(s, FN_IMAP_FETCH_HDR,
	       "FETCH %u:* (ENVELOPE BODY.PEEK[HEADER.FIELDS " HDR_FIELDS
	       "] FLAGS INTERNALDATE RFC822.SIZE UID)",
	       lo);
}

static void step_sync(struct imap_sess *s)
{
	switch (s->step++) {
	case 0:
		return is_cmd(s, FN_IMAP_LIST, "LIST \"\" \"*\"");
	case 1:
		return is_cmd(s, FN_IMAP_LSUB, "LSUB \"\" \"*\"");
	case 2:
		return is_select(s, 0, FN_IMAP_SELECT_INBOX, false);
	case 3:
		if (s->view.exists > 0)
			return cmd_fetch_headers(s);
		s->step++;
		__attribute__((fallthrough));
	case 4:
	case 6:
		if (s->picki < s->npick)
			return is_select(s, s->pick[s->picki++], FN_IMAP_SELECT_FOLDER, false);
		s->step = 8;
		return is_logout(s);
	case 5:
	case 7:
		if (s->view.exists > 0)
			return cmd_fetch_headers(s);
		return step_sync(s);
	default:
		return is_logout(s);
	}
}

static void step_cleanup(struct imap_sess *s)
{
	switch (s->step++) {
	case 0:
		return is_select(s, s->pick[0], FN_IMAP_SELECT_FOLDER, false);
	case 1: {
		uint32_t k = (uint32_t)ml_rng_range(&s->ag->rng, 1, 3);
		if (k > s->view.exists)
			k = s->view.exists;
		s->view.deleted = 0;
		for (uint32_t seq = 1; seq <= k; seq++) {
			is_cmd(s, FN_IMAP_STORE_DELETED, "STORE %u +FLAGS (\\Deleted)", seq);
			is_cmd_stores(s, seq, FL_DELETED);
		}
		if (k > 0)
			return;
		return is_logout(s);
	}
	case 2:
		return is_cmd(s, FN_IMAP_EXPUNGE, "EXPUNGE");
	default:
		return is_logout(s);
	}
}

/* Builds the message to APPEND into the agent's scratch message. It is built again when the
   server asks for the literal: other sessions use the scratch in between, and the build is
   deterministic, so the size announced is the size sent. */
static void build_append(struct imap_sess *s)
{
	struct agent *ag = s->ag;
	struct ml_msg_spec spec;
	char from[128], addr[20][128];
	const char *tov[20];
	const struct ag_sent *sent = NULL;

	ag_msg_spec(ag, &spec, s->app_seq, s->app_date);
	ml_rcpt_addr(&ag->cfg, s->user, from, sizeof(from));
	spec.from = from;
	spec.to = tov;
	if (s->app_init) {
		spec.run_id = 0;
		spec.sent_ms = 0;
	} else { /* the copy filed in Sent is the message submitted: same recipients */
		for (size_t i = ag->nsent, n = 0; i-- > 0 && n < 4096; n++)
			if (ag->sent[i].seq == s->app_seq) {
				sent = &ag->sent[i];
				break;
			}
	}
	if (sent != NULL && sent->nrcpt > 0) {
		for (uint32_t i = 0; i < sent->nrcpt && i < 20; i++) {
			ml_rcpt_addr(&ag->cfg, ag->rcpts[sent->rcpt_off + i], addr[i],
				     sizeof(addr[i]));
			tov[spec.nto++] = addr[i];
		}
	} else {
		snprintf(addr[0], sizeof(addr[0]), "colleague%" PRIu64 "@%s", s->app_seq % 997,
			 ag->cfg.domain);
		tov[spec.nto++] = addr[0];
	}
	ml_msg_build(&ag->msg, &spec);
}

static void cmd_append(struct imap_sess *s, const char *folder, uint64_t seq, int64_t date,
		       bool init, bool seen)
{
	s->app_seq = seq;
	s->app_date = date;
	s->app_init = init;
	build_append(s);
	s->literal_wait = true;
	is_cmd(s, FN_IMAP_APPEND, "APPEND \"%s\" (%s) {%zu}", folder, seen ? "\\Seen" : "",
	       s->ag->msg.size);
}

static void step_append(struct imap_sess *s)
{
	if (s->step++ == 0)
		return cmd_append(s, "Sent", s->seq, s->date_ms, false, true);
	is_logout(s);
}

static void is_idle_done(struct imap_sess *s)
{
	s->idling = false;
	event_del(s->poll);
	evbuffer_add(bufferevent_get_output(s->bev), "DONE\r\n", 6);
}

static void is_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_sess *s = arg;

	if (is_over(s))
		return;
	if (s->idling)
		return is_idle_done(s);
	is_cmd(s, FN_PROBE_FETCH, "NOOP");
}

#define PROBE_FETCH "(UID BODY.PEEK[HEADER.FIELDS (Message-ID)])"
#define PROBE_RECHECK_MS 10000

/* A look: the Message-IDs of the UIDs above the highest seen. */
static void probe_look(struct imap_sess *s, bool asked)
{
	s->grew = false;
	s->recheck = !asked;
	s->last_look_ms = clock_wall_ms();
	is_cmd(s, FN_PROBE_FETCH, "UID FETCH %u:* " PROBE_FETCH,
	       s->ag->pr.lastuid[s->user - 1] + 1);
}

/* The delivery probe: EXAMINE INBOX, then the Message-IDs of what is new, again each time
   EXISTS grows, until nothing is awaited. The first look at a mailbox (no UID known for its
   UIDVALIDITY) reads every message: a new message is not necessarily the last one, since a
   server numbers what it had never numbered (a Maildir filled behind its back) when it first
   opens it, possibly after the message it is saving (which may then get UID 1).
   After that, UIDs only grow (RFC 3501 2.3.1.1), so the UIDs above the highest seen. An
   EXPUNGE from another session lowers EXISTS, so growth is what the probe watches, not the
   count it saw last. In IDLE it also looks every 10 s unasked, and counts what only such a
   look found (a server whose IDLE missed new mail). */
static void step_probe(struct imap_sess *s)
{
	struct agent *ag = s->ag;
	struct ag_probes *pr = &ag->pr;
	uint32_t u = s->user - 1;
	static const struct timeval sec = { 1, 0 };

	switch (s->step) {
	case 0:
		s->step = 1;
		return is_select(s, 0, FN_PROBE_EXAMINE, true);
	case 1:
		s->step = 2;
		if (pr->uidv[u] != s->view.uidvalidity || pr->lastuid[u] == 0) {
			pr->uidv[u] = s->view.uidvalidity;
			pr->lastuid[u] = 0;
			if (s->view.exists == 0)
				return step_probe(s);
			s->grew = false;
			s->last_look_ms = clock_wall_ms();
			return is_cmd(s, FN_PROBE_FETCH, "FETCH 1:* " PROBE_FETCH);
		}
		return probe_look(s, true);
	case 2:
		s->step = 3;
		s->watched = true;
		probe_watching(ag, s->user);
		__attribute__((fallthrough));
	default:
		if (s->grew) /* new mail since the last look */
			return probe_look(s, true);
		if (!ag_wants(ag, s->user) || clock_wall_ms() > ag->drain_end)
			return is_logout(s);
		if (s->has_idle && clock_wall_ms() - s->last_look_ms >= PROBE_RECHECK_MS)
			return probe_look(s, false);
		if (s->has_idle) { /* RFC 2177 where offered, else NOOP every second */
			s->idle_wait = true;
			return is_cmd(s, FN_PROBE_IDLE, "IDLE");
		}
		event_add(s->poll, &sec);
		return;
	}
}

/* The reconciliation after the drain: every Message-ID in the INBOX, whatever its UID. */
static void step_recon(struct imap_sess *s)
{
	switch (s->step++) {
	case 0:
		return is_select(s, 0, FN_PROBE_EXAMINE, true);
	case 1:
		if (s->view.exists > 0)
			return is_cmd(s, FN_PROBE_FETCH, "FETCH 1:* " PROBE_FETCH);
		s->step++;
		__attribute__((fallthrough));
	case 2:
		s->recon_ok = true;
		__attribute__((fallthrough));
	default:
		return is_logout(s);
	}
}

/* The fill record in user1's MailloadFill folder: read its X-Mailload-Fill header, or
   replace the folder's content with the record message. */
static void step_fillrec(struct imap_sess *s)
{
	struct agent *ag = s->ag;

	switch (s->step++) {
	case 0:
		if (s->fill_write)
			return is_cmd(s, FN_IMAP_CREATE, "CREATE \"" ML_FILL_FOLDER "\"");
		s->step++;
		__attribute__((fallthrough));
	case 1:
		um_view_begin(&s->view, &s->scratch, false);
		return is_cmd(s, FN_PROBE_EXAMINE, "%s \"" ML_FILL_FOLDER "\"",
			      s->fill_write ? "SELECT" : "EXAMINE");
	case 2:
		if (s->view.exists == 0)
			return step_fillrec(s); /* on to the APPEND (write) or the end (read) */
		if (!s->fill_write)
			return is_cmd(s, FN_PROBE_FETCH,
				      "FETCH 1:* (BODY.PEEK[HEADER.FIELDS (X-Mailload-Fill)])");
		is_cmd(s, FN_PROBE_FETCH, "STORE 1:* +FLAGS.SILENT (\\Deleted)");
		return is_cmd(s, FN_PROBE_FETCH, "EXPUNGE");
	case 3:
		if (s->fill_write) {
			s->literal_wait = true;
			return is_cmd(s, FN_PROBE_FETCH,
				      "APPEND \"" ML_FILL_FOLDER "\" (\\Seen) {%zu}",
				      ag->fill_msg.len);
		}
		__attribute__((fallthrough));
	default:
		s->fill_ok = true;
		return is_logout(s);
	}
}

static void step_init(struct imap_sess *s)
{
	char tmp[ML_FOLDER_NAME_MAX];

	switch (s->step) {
	case 0:
		s->step = 1;
		return is_cmd(s, FN_IMAP_LIST, "LIST \"\" \"*\"");
	case 1: /* create the missing folders, one at a time (parents first: list order) */
		while (s->fi < s->folders.n && (s->fi == 0 || s->present[s->fi]))
			s->fi++;
		if (s->fi < s->folders.n) {
			s->present[s->fi] = true;
			return is_cmd(s, FN_IMAP_CREATE, "CREATE \"%s\"",
				      fname(s, s->fi, tmp, sizeof(tmp)));
		}
		s->step = 2;
		for (uint32_t i = 0; i < s->folders.n; i++)
			if (s->folders.subscribed[i])
				is_cmd(s, FN_IMAP_SUBSCRIBE, "SUBSCRIBE \"%s\"",
				       fname(s, i, tmp, sizeof(tmp)));
		return;
	case 2:
		s->step = 3;
		for (uint32_t i = 0; i < s->folders.n; i++)
			is_cmd(s, FN_IMAP_STATUS, "STATUS \"%s\" (MESSAGES)",
			       fname(s, i, tmp, sizeof(tmp)));
		s->fi = 1;
		return;
	case 3: /* APPEND what each other folder lacks, deterministic by index */
		while (s->fi < s->folders.n && s->have[s->fi] >= s->folders.msgs[s->fi])
			s->fi++;
		if (s->fi < s->folders.n) {
			uint32_t idx = s->have[s->fi]++;
			uint64_t seq = ag_init_seq(s->user, s->fi, idx);
			s->ag->init_msgs++;
			return cmd_append(s, fname(s, s->fi, tmp, sizeof(tmp)), seq,
					  1735689600000LL + (int64_t)(seq % 86400000), true,
					  idx % 10 < 7);
		}
		s->step = 4;
		__attribute__((fallthrough));
	default:
		return is_logout(s);
	}
}

static void is_next(struct imap_sess *s)
{
	if (s->st == IS_CAPA && s->ag->srv[CONN_IMAP].starttls && !s->tls_done) {
		s->st = IS_STARTTLS;
		return is_cmd(s, FN_IMAP_STARTTLS, "STARTTLS");
	}
	if (s->st == IS_STARTTLS) {
		is_starttls(s);
		s->st = IS_CAPA;
		if (s->dead)
			return;
	}
	/* one session per agent asks the server's ID for the report's disclosure (a measurement
	   step, as a probe's login is) */
	if (s->st == IS_CAPA && s->has_id && !s->ag->imap_id_asked) {
		s->ag->imap_id_asked = true;
		s->st = IS_ID;
		is_cmd(s, FN_PROBE_LOGIN, "ID NIL");
		s->id_tag = s->tagn;
		return;
	}
	if (s->st == IS_ID)
		s->st = IS_CAPA;
	if (s->st == IS_CAPA) {
		char pw[128], login[128];
		s->st = IS_LOGIN;
		ml_user_login(&s->ag->cfg, s->user, login, sizeof(login));
		return is_cmd(s, FN_IMAP_LOGIN, "LOGIN \"%s\" \"%s\"", login,
			      ag_password(s->ag, s->user, pw, sizeof(pw)));
	}
	if (s->st == IS_LOGIN)
		s->st = IS_RUN;
	if (s->step < 0)
		return is_logout(s);
	switch (s->kind) {
	case SESS_CHECK:
		return step_check(s);
	case SESS_SYNC:
		return step_sync(s);
	case SESS_CLEANUP:
		return step_cleanup(s);
	case SESS_APPEND:
		return step_append(s);
	case SESS_PROBE:
		return step_probe(s);
	case SESS_INIT:
		return step_init(s);
	case SESS_RECON:
		return step_recon(s);
	case SESS_FILLREC:
		return step_fillrec(s);
	}
}

static struct imap_sess *is_start(struct agent *ag, struct ag_user *u, uint32_t user,
				  enum ml_session kind, uint64_t seq, int64_t date_ms)
{
	struct imap_sess *s = xcalloc(1, sizeof(*s));

	s->ag = ag;
	s->u = u;
	s->user = user;
	s->kind = kind;
	s->seq = seq;
	s->date_ms = date_ms;
	s->delim = ag->imap_delim != '\0' ? ag->imap_delim : '/';
	s->fn = FN_IMAP_CONNECT;
	imap_rparser_init(&s->rp, 65536, 65536, 64u << 20);
	um_view_init(&s->view);
	s->timer = evtimer_new(ag->base, is_timeout_cb, s);
	s->poll = evtimer_new(ag->base, is_poll_cb, s);
	ml_user_folders(&ag->cfg, user, &s->folders);
	if (kind == SESS_SYNC || kind == SESS_CLEANUP) {
		s->npick = kind == SESS_SYNC ? (uint32_t)ml_rng_range(&ag->rng, 1, 2) : 1;
		s->pick[0] = pick_folder(s);
		s->pick[1] = pick_folder(s);
		if (s->npick == 2 && s->pick[1] == s->pick[0])
			s->npick = 1;
	}
	ag->open_imap++;
	ag->sessions_started++;
	s->t0 = clock_wall_us();
	s->st = IS_GREETING;
	is_arm(s);
	s->nc = ag_connect(ag, CONN_IMAP, is_connected, s);
	return s;
}

void imap_start(struct agent *ag, struct ag_user *u, enum ml_session kind, uint64_t seq,
		int64_t date_ms)
{
	is_start(ag, u, u->m.id, kind, seq, date_ms);
}

void imap_start_probe(struct agent *ag, uint32_t user)
{
	is_start(ag, NULL, user, SESS_PROBE, 0, 0);
}

void imap_start_init(struct agent *ag, uint32_t user)
{
	is_start(ag, NULL, user, SESS_INIT, 0, 0);
}

void imap_start_fillrec(struct agent *ag, bool write)
{
	struct imap_sess *s = is_start(ag, NULL, 1, SESS_FILLREC, 0, 0);

	s->fill_write = write;
}

void imap_start_recon(struct agent *ag, uint32_t user, size_t idx)
{
	struct imap_sess *s = is_start(ag, NULL, user, SESS_RECON, 0, 0);

	s->recon_idx = idx;
}

/* milter.c — owns the conversation with milters, one per SMTP session and milter of the
 * session's list (smtpd_milters; LMTP: non_smtpd_milters): a connection (inet or unix,
 * bufferevent on the worker's loop) opened before the greeting with option negotiation and
 * SMFIC_CONNECT; then SMFIC_HELO at EHLO/HELO, SMFIC_MAIL at MAIL, SMFIC_RCPT per RCPT,
 * SMFIC_DATA at DATA (or the first BDAT), each with the macros milters read, each answered by
 * every milter in turn before mtad answers the client; the header fields, the body in chunks
 * read back from the message file and the end of the message at the end of data, whose
 * answer ends that milter's part: its changes are made then, so the next milter of the list
 * sees the message and envelope as changed by the ones before it. SMFIC_ABORT ends a
 * transaction a milter did not see to its end, SMFIC_QUIT the session.
 *
 * What the answers do: reject/tempfail refuse the command (at CONNECT or HELO: every later
 * command of the session but QUIT; at RCPT: that recipient), accept leaves this milter out
 * for the transaction (at CONNECT or HELO: for the session), discard at an envelope step
 * accepts the message and drops it. Every wait has its timeout (connect, command, content);
 * a milter that is down, slow, closes or answers garbage gets its default action at that
 * step and at every later one of the session (accept: it is left out), and a log line.
 * Replies are parsed by milter_proto.c, changes applied by milter_apply.c. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "mtad/milter.h"
#include "mtad/milter_private.h"
#include "mtad/mtad.h"
#include "store/store.h"

/* Output queued to a milter before the next body chunk waits for it to drain. */
#define OUT_HIGH (256 * 1024)
#define REPLY_MAX 1024

struct milter_set {
	struct milter_spec *list[2]; /* 0: smtpd_milters, 1: non_smtpd_milters */
	size_t n[2];
	unsigned refs; /* the worker's, and each session's that talks to milters */
};

enum step {
	MS_OPTNEG,
	MS_CONNECT,
	MS_HELO,
	MS_MAIL,
	MS_RCPT,
	MS_DATA,
	MS_HEADER,
	MS_EOH,
	MS_BODY,
	MS_EOB,
	MS_END,
};

/* What the session asks its milters, one thing at a time. */
enum op { OP_NONE, OP_CONNECT, OP_HELO, OP_MAIL, OP_RCPT, OP_RCPT_REJ, OP_DATA, OP_EOD };

enum outcome { OUT_CONTINUE, OUT_REJECT, OUT_TEMPFAIL, OUT_DISCARD };

/* One milter of the session. */
struct milter_conn {
	struct milter_sess *ms;
	const struct milter_spec *sp;
	struct bufferevent *bev;
	struct event *timer;
	enum step step, last; /* the steps of the current command still to send */
	enum step asked;      /* the step whose answer is due */
	size_t idx;           /* MS_HEADER: which */
	uint64_t body_at;     /* MS_BODY: the next byte to send */
	bool waiting;         /* an answer is due */
	bool draining;        /* body output waits to drain */
	bool busy;            /* the current command waits for this one */
	bool gone;            /* left out for the session (accepted, or failed with accept) */
	bool failed;          /* down, slow, garbage: its default action from now on */
	bool in_tx;           /* sent MAIL, not yet the end of that message: SMFIC_ABORT due */
	bool tx_skip;         /* accepted the transaction */
	uint32_t actions, proto;
	char *syms[MILTER_NSTAGES];
	unsigned gen; /* bumped when the connection closes */
};

struct milter_sess {
	struct smtp_session *s;
	struct milter_set *set;
	size_t n, cur;
	struct milter_conn *c;
	struct buf pkt;
	enum op op;
	milter_cont *cont;
	struct event *end_ev; /* the command's end, from the loop (never inside a callback of
				 a connection it may close) */
	enum outcome out;
	char reply[REPLY_MAX];   /* OUT_REJECT, OUT_TEMPFAIL: SMTP reply lines */
	char refusal[REPLY_MAX]; /* refused at CONNECT or HELO: every later command's reply */
	bool tx_discard;         /* a milter discarded the transaction at an envelope step */
	/* OP_RCPT, OP_RCPT_REJ */
	char rcpt[MAILADDR_TEXT_MAX + 1];
	const char *rcpt_mailer; /* "local", "smtp", "error" */
	char rcpt_why[REPLY_MAX];
	/* OP_EOD */
	struct milter_msg msg;
	struct milter_mods mine; /* of the current milter, until its end */
};

static bool advance(struct milter_conn *c);
static bool op_run(struct milter_sess *ms);

/* ---- the lists ---- */

int milter_set_load(const struct conf *c, struct milter_set **set_r, char **error_r)
{
	const struct milter_conf *mc = &conf_values(c)->milter;
	struct milter_defaults d = {
		mc->connect_timeout_ms,
		mc->command_timeout_ms,
		mc->content_timeout_ms,
		(enum milter_action)mc->default_action,
	};
	struct milter_set *set = xcalloc(1, sizeof(*set));
	const char *text[2] = { mc->smtpd_milters, mc->non_smtpd_milters };

	*set_r = NULL;
	for (int k = 0; k < 2; k++) {
		if (milter_specs_parse(text[k], &d, &set->list[k], &set->n[k], error_r) < 0) {
			char *e = xasprintf("[milter] %s: %s",
					    k ? "non_smtpd_milters" : "smtpd_milters", *error_r);

			free(*error_r);
			*error_r = e;
			set->refs = 1;
			milter_set_free(&set);
			return -1;
		}
	}
	set->refs = 1;
	if (set->n[0] + set->n[1] == 0)
		milter_set_free(&set);
	*set_r = set;
	return 0;
}

void milter_set_free(struct milter_set **setp)
{
	struct milter_set *set = *setp;

	*setp = NULL;
	if (set == NULL || --set->refs > 0)
		return;
	for (int k = 0; k < 2; k++)
		milter_specs_free(&set->list[k], set->n[k]);
	free(set);
}

void milter_reload(struct mtad *m, const struct conf *c)
{
	struct milter_set *set;
	char *err = NULL;

	if (milter_set_load(c, &set, &err) < 0) {
		log_warnx("%s (the previous milters stay in force)", err);
		free(err);
		return;
	}
	milter_set_free(&m->milters);
	m->milters = set;
}

/* ---- packets ---- */

static void send_pkt(struct milter_conn *c)
{
	struct buf *pkt = &c->ms->pkt;

	if (pkt->len > 0)
		bufferevent_write(c->bev, pkt->data, pkt->len);
	buf_reset(pkt);
}

static void arm(struct milter_conn *c, int64_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

/* Macros of a stage (those the milter asked for, when it gave a list for the stage). */
static void put_macros(struct milter_conn *c, enum milter_stage st, char cmd,
		       const char *const *names, const char *const *values, size_t n)
{
	const char *nv[16], *vv[16];
	size_t k = 0;

	for (size_t i = 0; i < n && k < 16; i++) {
		if (values[i] == NULL ||
		    (c->syms[st] != NULL && !milter_symlist_has(c->syms[st], names[i])))
			continue;
		nv[k] = names[i];
		vv[k++] = values[i];
	}
	if (k > 0)
		milter_put_macros(&c->ms->pkt, cmd, nv, vv, k);
}

static void split_addr(const struct smtp_session *s, char *addr, size_t asz, char *port,
		       size_t psz, char *family)
{
	const struct sockaddr *sa = (const struct sockaddr *)&s->ss;

	*family = 'U';
	addr[0] = port[0] = '\0';
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, addr, (socklen_t)asz);
		snprintf(port, psz, "%u", ntohs(in->sin_port));
		*family = '4';
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, (socklen_t)asz);
		snprintf(port, psz, "%u", ntohs(in6->sin6_port));
		*family = '6';
	} else if (sa->sa_family == AF_UNIX) {
		snprintf(addr, asz, "%s", s->addr);
		*family = 'L';
	}
}

static void send_connect(struct milter_conn *c)
{
	struct smtp_session *s = c->ms->s;
	char addr[sizeof(s->addr)], port[8], family, under[sizeof(s->addr) + 16];

	split_addr(s, addr, sizeof(addr), port, sizeof(port), &family);
	snprintf(under, sizeof(under), "unknown [%s]", addr);
	const char *names[] = {
		"j", "{daemon_name}", "v", "_", "{client_addr}", "{client_name}", "{client_port}"
	};
	const char *values[] = {
		s->m->hostname, s->m->hostname,       "Heron", under, family == 'U' ? NULL : addr,
		"unknown",      port[0] ? port : NULL
	};
	put_macros(c, MILTER_ST_CONNECT, SMFIC_CONNECT, names, values, 7);
	milter_put_connect(&c->ms->pkt, "unknown", family,
			   port[0] ? (uint16_t)strtoul(port, NULL, 10) : 0, addr);
}

static void send_helo(struct milter_conn *c)
{
	struct smtp_session *s = c->ms->s;
	const char *proto = NULL, *cipher = NULL;
	const char *helo = s->helo[0] ? s->helo : "unknown";

	if (s->flags & SF_TLS)
		tls_peer_info(s->bev, &proto, &cipher, NULL);
	const char *names[] = { "{tls_version}", "{cipher}" };
	const char *values[] = { proto, cipher };
	put_macros(c, MILTER_ST_HELO, SMFIC_HELO, names, values, 2);
	milter_put_strs(&c->ms->pkt, SMFIC_HELO, &helo, 1);
}

static void send_mail(struct milter_conn *c)
{
	struct smtp_session *s = c->ms->s;
	char qid[20], from[MAILADDR_TEXT_MAX + 3];

	snprintf(qid, sizeof(qid), "%016" PRIx64, s->tx->qid);
	snprintf(from, sizeof(from), "<%s>", s->tx->from);
	const char *names[] = { "i", "{auth_authen}", "{mail_addr}", "{mail_mailer}" };
	const char *values[] = { qid, (s->flags & SF_AUTH) ? s->user : NULL, s->tx->from,
				 (s->flags & SF_LMTP) ? "lmtp" : "smtp" };
	const char *arg = from;
	put_macros(c, MILTER_ST_MAIL, SMFIC_MAIL, names, values, 4);
	milter_put_strs(&c->ms->pkt, SMFIC_MAIL, &arg, 1);
}

/* The recipient of the RCPT being asked about; a refused one (SMFIP_RCPT_REJ) has
   {rcpt_mailer} "error", the reply's enhanced code in {rcpt_host}, its text in
   {rcpt_addr}. */
static void send_rcpt(struct milter_conn *c)
{
	struct milter_sess *ms = c->ms;
	char qid[20], to[MAILADDR_TEXT_MAX + 3], esc[16] = "";
	const char *at = strrchr(ms->rcpt, '@');
	bool refused = ms->op == OP_RCPT_REJ;

	if (refused)
		sscanf(ms->rcpt_why, "%*d %15s", esc);
	snprintf(qid, sizeof(qid), "%016" PRIx64, ms->s->tx->qid);
	snprintf(to, sizeof(to), "<%s>", ms->rcpt);
	const char *names[] = { "i", "{rcpt_addr}", "{rcpt_host}", "{rcpt_mailer}" };
	const char *values[] = { qid, refused ? ms->rcpt_why : ms->rcpt,
				 refused      ? esc
				 : at != NULL ? at + 1
					      : NULL,
				 ms->rcpt_mailer };
	const char *arg = to;
	put_macros(c, MILTER_ST_RCPT, SMFIC_RCPT, names, values, 4);
	milter_put_strs(&ms->pkt, SMFIC_RCPT, &arg, 1);
}

/* The macro {i} before DATA, EOH and the end of the message. */
static void put_qid(struct milter_conn *c, enum milter_stage st, char cmd)
{
	char qid[20];
	const char *names[] = { "i" }, *values[] = { qid };

	snprintf(qid, sizeof(qid), "%016" PRIx64, c->ms->s->tx->qid);
	put_macros(c, st, cmd, names, values, 1);
}

/* ---- the steps ---- */

static bool step_skipped(const struct milter_conn *c, enum step st)
{
	static const uint32_t no[] = { [MS_CONNECT] = SMFIP_NOCONNECT, [MS_HELO] = SMFIP_NOHELO,
				       [MS_MAIL] = SMFIP_NOMAIL,       [MS_RCPT] = SMFIP_NORCPT,
				       [MS_DATA] = SMFIP_NODATA,       [MS_HEADER] = SMFIP_NOHDRS,
				       [MS_EOH] = SMFIP_NOEOH,         [MS_BODY] = SMFIP_NOBODY };

	return st < MS_EOB && st > MS_OPTNEG && (c->proto & no[st]) != 0;
}

static bool step_answered(const struct milter_conn *c, enum step st)
{
	static const uint32_t nr[] = { [MS_CONNECT] = SMFIP_NR_CONN, [MS_HELO] = SMFIP_NR_HELO,
				       [MS_MAIL] = SMFIP_NR_MAIL,    [MS_RCPT] = SMFIP_NR_RCPT,
				       [MS_DATA] = SMFIP_NR_DATA,    [MS_HEADER] = SMFIP_NR_HDR,
				       [MS_EOH] = SMFIP_NR_EOH,      [MS_BODY] = SMFIP_NR_BODY };

	return st >= MS_EOB || st == MS_OPTNEG || (c->proto & nr[st]) == 0;
}

/* Sends the packets of the current step (one item of it for HEADER, BODY); false when the
   step has nothing (more) to send. */
static bool send_step(struct milter_conn *c)
{
	struct milter_sess *ms = c->ms;
	const struct milter_field *f;
	char chunk[MILTER_CHUNK];

	switch (c->step) {
	case MS_CONNECT:
		send_connect(c);
		break;
	case MS_HELO:
		send_helo(c);
		break;
	case MS_MAIL:
		send_mail(c);
		break;
	case MS_RCPT:
		send_rcpt(c);
		break;
	case MS_DATA:
		put_qid(c, MILTER_ST_DATA, SMFIC_DATA);
		milter_put(&ms->pkt, SMFIC_DATA, NULL, 0);
		break;
	case MS_HEADER:
		if (c->idx >= ms->msg.nf)
			return false;
		f = &ms->msg.f[c->idx];
		const char *nv[2] = { f->name, f->value };
		char *lead = NULL;
		if (c->proto & SMFIP_HDR_LEADSPC)
			nv[1] = lead = xasprintf(" %s", f->value);
		milter_put_strs(&ms->pkt, SMFIC_HEADER, nv, 2);
		free(lead);
		break;
	case MS_EOH:
		put_qid(c, MILTER_ST_EOH, SMFIC_EOH);
		milter_put(&ms->pkt, SMFIC_EOH, NULL, 0);
		break;
	case MS_BODY: {
		uint64_t left = ms->msg.size - c->body_at;
		size_t want = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
		ssize_t n = want > 0 ? pread(ms->msg.fd, chunk, want, (off_t)c->body_at) : 0;

		if (n <= 0)
			return false;
		c->body_at += (uint64_t)n;
		milter_put(&ms->pkt, SMFIC_BODY, chunk, (size_t)n);
		break;
	}
	case MS_EOB:
		put_qid(c, MILTER_ST_EOB, SMFIC_BODYEOB);
		milter_put(&ms->pkt, SMFIC_BODYEOB, NULL, 0);
		break;
	default:
		return false;
	}
	send_pkt(c);
	return true;
}

static int64_t step_timeout(const struct milter_conn *c)
{
	return c->asked == MS_OPTNEG ? c->sp->connect_ms
	       : c->asked >= MS_BODY ? c->sp->content_ms
				     : c->sp->command_ms;
}

/* Sends the steps of the current command until one needs an answer (or the output must
   drain): true then; false when they are all sent. */
static bool advance(struct milter_conn *c)
{
	while (c->step <= c->last) {
		bool multi = c->step == MS_HEADER || c->step == MS_BODY;
		enum step sent = c->step;

		if (step_skipped(c, c->step) || !send_step(c)) {
			c->step++;
			c->idx = 0;
			continue;
		}
		if (multi)
			c->idx++;
		else
			c->step++;
		if (step_answered(c, sent)) {
			c->asked = sent;
			c->waiting = true;
			arm(c, step_timeout(c));
			return true;
		}
		if (sent == MS_BODY &&
		    evbuffer_get_length(bufferevent_get_output(c->bev)) > OUT_HIGH) {
			c->asked = sent;
			c->draining = true;
			arm(c, step_timeout(c));
			return true;
		}
	}
	return false;
}

/* ---- one milter ---- */

static void close_conn(struct milter_conn *c, bool quit)
{
	if (c->bev != NULL) {
		int fd = bufferevent_getfd(c->bev);
		struct evbuffer *out = bufferevent_get_output(c->bev);

		size_t queued = evbuffer_get_length(out);

		if (quit && queued <= 64) {
			/* best effort on an idle socket: what is queued (an abort), then the quit */
			struct buf *pkt = &c->ms->pkt;

			buf_reset(pkt);
			if (queued > 0)
				buf_append(pkt, evbuffer_pullup(out, -1), queued);
			milter_put(pkt, SMFIC_QUIT, NULL, 0);
			(void)send(fd, pkt->data, pkt->len, MSG_NOSIGNAL | MSG_DONTWAIT);
			buf_reset(pkt);
		}
		bufferevent_free(c->bev);
		c->bev = NULL;
		c->gen++;
	}
	if (c->timer != NULL)
		evtimer_del(c->timer);
	c->waiting = c->draining = false;
	for (int i = 0; i < MILTER_NSTAGES; i++) {
		free(c->syms[i]);
		c->syms[i] = NULL;
	}
}

static void set_reply(struct milter_sess *ms, enum outcome out, const char *text)
{
	ms->out = out;
	snprintf(ms->reply, sizeof(ms->reply), "%s", text);
}

static const char *act_name(enum milter_action a)
{
	static const char *const act[] = { "tempfail", "accept", "reject" };

	return act[a];
}

/* The default action of a failed milter c, for the command being asked. */
static void default_action(struct milter_sess *ms, struct milter_conn *c)
{
	switch (c->sp->default_action) {
	case MILTER_TEMPFAIL:
		set_reply(ms, OUT_TEMPFAIL, "451 4.7.1 Service unavailable - try again later");
		break;
	case MILTER_REJECT:
		set_reply(ms, OUT_REJECT,
			  ms->op == OP_EOD ? "554 5.7.1 Message rejected by a filter"
					   : "554 5.7.1 Command rejected by a filter");
		break;
	case MILTER_ACCEPT:
		c->gone = true;
		break;
	}
}

static void log_result(struct milter_sess *ms, const struct milter_conn *c, const char *what,
		       const char *reply)
{
	static const char *const step[] = {
		[OP_CONNECT] = "connect", [OP_HELO] = "helo",     [OP_MAIL] = "mail",
		[OP_RCPT] = "rcpt",       [OP_RCPT_REJ] = "rcpt", [OP_DATA] = "data",
		[OP_EOD] = "eom"
	};
	struct smtp_session *s = ms->s;
	char qid[32] = "";

	if (s->tx != NULL)
		snprintf(qid, sizeof(qid), " qid=%016" PRIx64, s->tx->qid);
	log_info("%016" PRIx64 " milter %s%s step=%s result=%s%s%.200s%s", s->id, c->sp->text, qid,
		 ms->op != OP_NONE ? step[ms->op] : "idle", what, reply ? " reply=\"" : "",
		 reply ? reply : "", reply ? "\"" : "");
}

/* The command goes on to the next milter, or ends (the answer from the loop). */
static void conn_done(struct milter_conn *c)
{
	struct milter_sess *ms = c->ms;

	c->busy = false;
	if (ms->op == OP_NONE)
		return;
	ms->cur++;
	if (!op_run(ms))
		event_active(ms->end_ev, EV_TIMEOUT, 1);
}

/* A milter failed: logged; its default action now when a command waits for it, and at
   every later command. */
static void fail(struct milter_conn *c, const char *why)
{
	struct milter_sess *ms = c->ms;
	struct smtp_session *s = ms->s;
	bool busy = c->busy;
	char qid[32] = "";

	if (s->tx != NULL)
		snprintf(qid, sizeof(qid), " qid=%016" PRIx64, s->tx->qid);
	log_warnx("%016" PRIx64 " milter %s%s result=fail reason=\"%s\" action=%s", s->id,
		  c->sp->text, qid, why, act_name(c->sp->default_action));
	close_conn(c, false);
	c->failed = true;
	c->in_tx = false;
	if (ms->op == OP_EOD && busy)
		milter_mods_release(&ms->mine);
	if (!busy)
		return;
	if (ms->op == OP_RCPT_REJ)
		c->gone = c->sp->default_action == MILTER_ACCEPT;
	else
		default_action(ms, c);
	conn_done(c);
}

static bool action_allowed(const struct milter_conn *c, char cmd)
{
	switch (cmd) {
	case SMFIR_ADDHEADER:
		return c->actions & SMFIF_ADDHDRS;
	case SMFIR_INSHEADER:
	case SMFIR_CHGHEADER:
		return c->actions & SMFIF_CHGHDRS;
	case SMFIR_REPLBODY:
		return c->actions & SMFIF_CHGBODY;
	case SMFIR_ADDRCPT:
		return c->actions & SMFIF_ADDRCPT;
	case SMFIR_ADDRCPT_PAR:
		return c->actions & SMFIF_ADDRCPT_PAR;
	case SMFIR_DELRCPT:
		return c->actions & SMFIF_DELRCPT;
	case SMFIR_CHGFROM:
		return c->actions & SMFIF_CHGFROM;
	case SMFIR_QUARANTINE:
		return c->actions & SMFIF_QUARANTINE;
	default:
		return false;
	}
}

/* What milters may do: not change the recipients of LMTP (one reply per recipient). */
static uint32_t offered_actions(const struct smtp_session *s)
{
	return (s->flags & SF_LMTP)
		       ? MILTER_ACTIONS & ~(SMFIF_ADDRCPT | SMFIF_ADDRCPT_PAR | SMFIF_DELRCPT)
		       : MILTER_ACTIONS;
}

/* The milter's answer to option negotiation. What it asks for beyond the offer is not
   granted (as libmilter's MTAs do): a change it then sends is a protocol error. */
static void on_optneg(struct milter_conn *c, const struct milter_reply *rp)
{
	if (rp->cmd != SMFIC_OPTNEG || rp->version < 2 || rp->version > MILTER_VERSION)
		return fail(c, rp->cmd != SMFIC_OPTNEG ? "no option negotiation"
						       : "unsupported protocol version");
	c->actions = rp->actions & offered_actions(c->ms->s);
	c->proto = rp->protocol & MILTER_PROTOCOL;
	for (int i = 0; i < MILTER_NSTAGES; i++)
		if ((c->actions & SMFIF_SETSYMLIST) && rp->symlist[i] != NULL)
			c->syms[i] = xstrdup(rp->symlist[i]);
	c->waiting = false;
	evtimer_del(c->timer);
	c->step = c->last = MS_CONNECT;
	if (!advance(c))
		conn_done(c);
}

/* The message file of s's transaction, read back into ms->msg: 0, or -1 with *err_r (NULL:
   the file could not be opened). */
static int msg_open(struct milter_sess *ms, const char **err_r)
{
	struct smtp_tx *tx = ms->s->tx;
	int fd = -1;

	*err_r = NULL;
	if (ms->msg.fd >= 0)
		close(ms->msg.fd);
	milter_msg_release(&ms->msg);
	ms->msg.fd = -1;
	if (deliver_flush(ms->s) < 0 || store_blob_reader(tx->blob, &fd) != 0 ||
	    milter_msg_read(&ms->msg, fd, store_blob_size(tx->blob), err_r) < 0) {
		if (fd >= 0)
			close(fd);
		ms->msg.fd = -1;
		return -1;
	}
	return 0;
}

static void msg_close(struct milter_sess *ms)
{
	if (ms->msg.fd >= 0)
		close(ms->msg.fd);
	milter_msg_release(&ms->msg);
	ms->msg.fd = -1;
	milter_mods_release(&ms->mine);
}

/* The end of this milter's part of the message. Its changes are made at once (a new
   message file, the envelope edited), so the next milter is sent the message as this one
   left it. */
static void eod_done(struct milter_conn *c, bool keep)
{
	struct milter_sess *ms = c->ms;
	const char *err;

	c->in_tx = false;
	if (keep && milter_mods_apply(ms->s, &ms->msg, &ms->mine) < 0) {
		set_reply(ms, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
	} else if (keep && ms->cur + 1 < ms->n && msg_open(ms, &err) < 0) {
		log_warnx("%016" PRIx64 " milter qid=%016" PRIx64 " result=fail reason=\"%s\"",
			  ms->s->id, ms->s->tx->qid,
			  err != NULL ? err : "cannot read the changed message file");
		set_reply(ms, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
	}
	milter_mods_release(&ms->mine);
	conn_done(c);
}

/* A final answer (not continue) to the command being asked. */
static void on_verdict(struct milter_conn *c, const struct milter_reply *rp)
{
	struct milter_sess *ms = c->ms;
	bool session = ms->op == OP_CONNECT || ms->op == OP_HELO;

	switch (rp->cmd) {
	case SMFIR_ACCEPT:
		log_result(ms, c, "accept", NULL);
		if (ms->op == OP_EOD)
			return eod_done(c, c->asked == MS_EOB);
		if (session) {
			c->gone = true;
			close_conn(c, true);
		} else {
			c->tx_skip = true;
		}
		return conn_done(c);
	case SMFIR_DISCARD:
		if (session)
			return fail(c, "discard at connect or HELO");
		ms->out = OUT_DISCARD;
		break;
	case SMFIR_REJECT:
		set_reply(ms, OUT_REJECT,
			  ms->op == OP_EOD ? "550 5.7.1 Message rejected"
			  : session        ? "554 5.7.1 Access denied"
					   : "550 5.7.1 Command rejected");
		break;
	case SMFIR_TEMPFAIL:
		set_reply(ms, OUT_TEMPFAIL, "451 4.7.1 Service unavailable - try again later");
		break;
	case SMFIR_SHUTDOWN:
	case SMFIR_CONN_FAIL:
		/* as Postfix's shutdown: the session ends (milter_reply closes after a 421);
		   libmilter's mfdef.h defines CONN_FAIL as "cause a connection failure", so it
		   ends the session too, not one command with a 451 */
		set_reply(ms, OUT_TEMPFAIL, "421 4.7.0 Server closing connection");
		break;
	case SMFIR_REPLYCODE:
		milter_reply_lines(rp->code, rp->text, ms->reply, sizeof(ms->reply));
		ms->out = rp->code >= 500 ? OUT_REJECT : OUT_TEMPFAIL;
		break;
	default:
		return fail(c, "unexpected reply");
	}
	log_result(ms, c,
		   ms->out == OUT_DISCARD  ? "discard"
		   : ms->out == OUT_REJECT ? "reject"
					   : "tempfail",
		   ms->out == OUT_DISCARD ? NULL : ms->reply);
	if (ms->op == OP_EOD) {
		c->in_tx = false;
		milter_mods_release(&ms->mine);
	}
	if (ms->op == OP_RCPT_REJ) /* told, not asked: mtad's refusal stands */
		ms->out = OUT_CONTINUE;
	conn_done(c);
}

static void on_reply(struct milter_conn *c, const struct milter_reply *rp)
{
	struct milter_sess *ms = c->ms;

	if (c->asked == MS_OPTNEG)
		return on_optneg(c, rp);
	if (rp->cmd == SMFIR_PROGRESS) {
		arm(c, step_timeout(c));
		return;
	}
	if (c->asked == MS_EOB && action_allowed(c, rp->cmd)) {
		if (milter_mods_add(&ms->mine, rp, (c->proto & SMFIP_HDR_LEADSPC) != 0,
				    ms->s->m->lim.max_message_size) < 0)
			return fail(c, "replacement body too big");
		return;
	}
	c->waiting = false;
	evtimer_del(c->timer);
	switch (rp->cmd) {
	case SMFIR_CONTINUE:
		if (advance(c))
			return;
		if (ms->op == OP_EOD)
			return eod_done(c, true);
		return conn_done(c);
	case SMFIR_SKIP:
		if (c->asked != MS_BODY)
			return fail(c, "skip outside the body");
		c->step = c->last = MS_EOB;
		if (!advance(c))
			eod_done(c, true);
		return;
	default:
		return on_verdict(c, rp);
	}
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct milter_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct milter_reply rp;
	const char *err = NULL;
	size_t used;
	unsigned gen = c->gen;

	while (c->gen == gen) {
		size_t avail = evbuffer_get_length(in);
		unsigned char h[4];

		if (avail < 4)
			return;
		evbuffer_copyout(in, h, 4);
		size_t want = 4 + (size_t)((uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
					   (uint32_t)h[2] << 8 | h[3]);
		if (want > MILTER_REPLY_MAX)
			return fail(c, "reply packet too long");
		if (avail < want)
			return;
		const unsigned char *p = evbuffer_pullup(in, (ssize_t)want);
		int rc = milter_reply_parse(p, want, &rp, &used, &err);
		if (rc < 0)
			return fail(c, err);
		if (!c->waiting)
			return fail(c, "reply nobody asked for");
		on_reply(c, &rp);
		if (c->gen == gen)
			evbuffer_drain(in, used);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct milter_conn *c = arg;

	if (!c->draining)
		return;
	c->draining = false;
	evtimer_del(c->timer);
	if (!advance(c))
		eod_done(c, true);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct milter_conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		milter_put_optneg(&c->ms->pkt, MILTER_VERSION, offered_actions(c->ms->s),
				  MILTER_PROTOCOL);
		send_pkt(c);
		c->asked = MS_OPTNEG;
		c->waiting = true;
		return;
	}
	fail(c, (what & BEV_EVENT_EOF)  ? "connection closed"
		: c->asked == MS_OPTNEG ? "cannot connect"
					: "connection error");
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct milter_conn *c = arg;

	fail(c, c->asked == MS_OPTNEG ? "connect or negotiation timed out" : "timed out");
}

static int milter_addr(const struct milter_spec *sp, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (sp->unix_path) {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;

		if (strlen(sp->host) >= sizeof(un->sun_path))
			return -1;
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, sp->host, strlen(sp->host) + 1);
		*len = sizeof(*un);
		return 0;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	const char *host = strcmp(sp->host, "localhost") == 0 ? "127.0.0.1" : sp->host;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(sp->port);
		*len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(sp->port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

/* The connection to c's milter (CONNECT): true when it is under way; false when it
   could not start (c failed, the command has its default action). */
static bool conn_open(struct milter_conn *c)
{
	struct smtp_session *s = c->ms->s;
	struct sockaddr_storage ss;
	socklen_t len;

	c->asked = MS_OPTNEG;
	c->waiting = false;
	if (milter_addr(c->sp, &ss, &len) < 0) {
		fail(c, "not a numeric address or a usable path");
		return false;
	}
	c->bev = bufferevent_socket_new(s->m->base, -1,
					BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, MILTER_REPLY_MAX);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	arm(c, c->sp->connect_ms);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&ss, (int)len) < 0) {
		fail(c, "cannot connect");
		return false;
	}
	return true;
}

/* ---- the commands ---- */

static bool op_tx(enum op op)
{
	return op >= OP_MAIL;
}

/* Starts the current command for milter c: true when it waits for c. */
static bool conn_begin(struct milter_sess *ms, struct milter_conn *c)
{
	c->idx = 0;
	switch (ms->op) {
	case OP_CONNECT:
		c->busy = conn_open(c);
		return c->busy;
	case OP_HELO:
		c->step = c->last = MS_HELO;
		break;
	case OP_MAIL:
		c->step = c->last = MS_MAIL;
		c->in_tx = true;
		break;
	case OP_RCPT:
	case OP_RCPT_REJ:
		c->step = c->last = MS_RCPT;
		break;
	case OP_DATA:
		c->step = c->last = MS_DATA;
		break;
	case OP_EOD:
		c->step = MS_HEADER;
		c->last = MS_EOB;
		c->body_at = ms->msg.body_off;
		milter_mods_release(&ms->mine);
		break;
	default:
		return false;
	}
	if (advance(c)) {
		c->busy = true;
		return true;
	}
	if (ms->op == OP_EOD) /* nothing answered: NR and NO flags all through */
		c->in_tx = false;
	return false;
}

/* Whether milter c negotiated to be sent nothing of command op. */
static bool op_left_out(const struct milter_conn *c, enum op op)
{
	switch (op) {
	case OP_HELO:
		return step_skipped(c, MS_HELO);
	case OP_MAIL:
		return step_skipped(c, MS_MAIL);
	case OP_RCPT:
	case OP_RCPT_REJ:
		return step_skipped(c, MS_RCPT);
	case OP_DATA:
		return step_skipped(c, MS_DATA);
	default:
		return false;
	}
}

/* Takes the current command to the milters from ms->cur on: true when it waits for one. */
static bool op_run(struct milter_sess *ms)
{
	for (; ms->cur < ms->n && ms->out == OUT_CONTINUE; ms->cur++) {
		struct milter_conn *c = &ms->c[ms->cur];

		if (c->gone || (op_tx(ms->op) && c->tx_skip) || op_left_out(c, ms->op))
			continue;
		if (ms->op == OP_RCPT_REJ && (c->failed || !(c->proto & SMFIP_RCPT_REJ)))
			continue;
		if (ms->op == OP_EOD && ms->s->tx->nrcpt == 0)
			break; /* every recipient removed: nothing to ask about */
		if (c->failed) {
			default_action(ms, c);
			continue;
		}
		if (conn_begin(ms, c))
			return true;
		if (c->failed) /* could not even start */
			default_action(ms, c);
	}
	return false;
}

/* The answer of a command that has ended: NULL to go on, or the refusal's reply lines. */
static const char *op_answer(struct milter_sess *ms, enum op op)
{
	switch (ms->out) {
	case OUT_CONTINUE:
		return NULL;
	case OUT_DISCARD:
		ms->tx_discard = true;
		return NULL;
	default:
		if (op == OP_CONNECT || op == OP_HELO)
			snprintf(ms->refusal, sizeof(ms->refusal), "%s", ms->reply);
		return ms->reply;
	}
}

static void eod_end(struct milter_sess *ms);

static void end_cb(evutil_socket_t fd, short what, void *arg)
{
	struct milter_sess *ms = arg;
	enum op op = ms->op;

	ms->op = OP_NONE;
	if (op == OP_EOD)
		return eod_end(ms);
	ms->cont(ms->s, op_answer(ms, op), true);
}

static struct milter_sess *sess_new(struct smtp_session *s)
{
	struct milter_set *set = s->m->milters;
	int k = (s->flags & SF_LMTP) ? 1 : 0;
	struct milter_sess *ms;

	if (set == NULL || set->n[k] == 0)
		return NULL;
	ms = xcalloc(1, sizeof(*ms));
	ms->s = s;
	ms->set = set;
	set->refs++;
	ms->n = set->n[k];
	ms->c = xcalloc(ms->n, sizeof(*ms->c));
	for (size_t i = 0; i < ms->n; i++) {
		ms->c[i].ms = ms;
		ms->c[i].sp = &set->list[k][i];
		ms->c[i].timer = evtimer_new(s->m->base, timer_cb, &ms->c[i]);
	}
	ms->msg.fd = -1;
	buf_init(&ms->pkt, 256, MILTER_REPLY_MAX);
	ms->end_ev = evtimer_new(s->m->base, end_cb, ms);
	return ms;
}

/* Starts command op: false when it is answered at once (*refusal_r), true when the
   session waits for cont. */
static bool op_start(struct milter_sess *ms, enum op op, milter_cont *cont, const char **refusal_r)
{
	ms->op = op;
	ms->cont = cont;
	ms->cur = 0;
	ms->out = OUT_CONTINUE;
	ms->reply[0] = '\0';
	if (op_run(ms)) {
		smtp_set_state(ms->s, ST_WAIT);
		return true;
	}
	ms->op = OP_NONE;
	*refusal_r = op_answer(ms, op);
	return false;
}

void milter_ask(struct smtp_session *s, enum milter_cmd cmd, const char *addr, bool local,
		milter_cont *cont, bool resume)
{
	static const enum op ops[] = { [MILTER_CONNECT] = OP_CONNECT,
				       [MILTER_HELO] = OP_HELO,
				       [MILTER_MAIL] = OP_MAIL,
				       [MILTER_RCPT] = OP_RCPT,
				       [MILTER_DATA] = OP_DATA };
	struct milter_sess *ms;
	const char *refusal = NULL;

	if (cmd == MILTER_CONNECT && s->milter == NULL)
		s->milter = sess_new(s);
	if ((ms = s->milter) == NULL) {
		cont(s, NULL, resume);
		return;
	}
	if (ms->refusal[0] != '\0') {
		cont(s, ms->refusal, resume);
		return;
	}
	if (cmd >= MILTER_MAIL && s->tx != NULL)
		s->tx->milter = ms;
	if (cmd >= MILTER_MAIL && ms->tx_discard) {
		cont(s, NULL, resume); /* the message is dropped: nothing more to ask */
		return;
	}
	if (cmd == MILTER_RCPT) {
		str_lcpy(ms->rcpt, addr, sizeof(ms->rcpt));
		ms->rcpt_mailer = local ? "local" : "smtp";
	}
	if (!op_start(ms, ops[cmd], cont, &refusal))
		cont(s, refusal, resume);
}

bool milter_rcpt_refused(struct smtp_session *s, const char *addr, const char *why,
			 milter_cont *cont)
{
	struct milter_sess *ms = s->milter;
	const char *ignored;

	if (ms == NULL || ms->refusal[0] != '\0' || ms->tx_discard || s->tx == NULL)
		return false;
	str_lcpy(ms->rcpt, addr, sizeof(ms->rcpt));
	str_lcpy(ms->rcpt_why, why, sizeof(ms->rcpt_why));
	ms->rcpt_mailer = "error";
	return op_start(ms, OP_RCPT_REJ, cont, &ignored);
}

void milter_reply(struct smtp_session *s, const char *refusal)
{
	char copy[REPLY_MAX];
	char *line = copy, *nl;

	snprintf(copy, sizeof(copy), "%s", refusal);
	while ((nl = strchr(line, '\n')) != NULL) {
		*nl = '\0';
		smtp_reply(s, "%s", line);
		line = nl + 1;
	}
	smtp_error(s, "%s", line);
	if (strncmp(copy, "421", 3) == 0)
		smtp_close(s);
}

bool milter_refused(struct smtp_session *s)
{
	if (s->milter == NULL || s->milter->refusal[0] == '\0')
		return false;
	milter_reply(s, s->milter->refusal);
	return true;
}

/* ---- the end of the message ---- */

/* The refusal of a message (once per recipient over LMTP); a 421 closes the session. */
static void reply_lines(struct smtp_session *s, const char *text)
{
	size_t n = (s->flags & SF_LMTP) ? s->tx->nrcpt : 1;

	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	for (size_t i = 0; i < n; i++) {
		const char *line = text, *nl;

		while ((nl = strchr(line, '\n')) != NULL) {
			smtp_reply(s, "%.*s", (int)(nl - line), line);
			line = nl + 1;
		}
		smtp_reply(s, "%s", line);
	}
	if (strncmp(text, "421", 3) == 0)
		smtp_close(s);
	smtp_resume(s);
}

static void discard(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;

	log_info("%016" PRIx64 ": from=<%s>, nrcpt=%zu, status=discarded (by a milter)", tx->qid,
		 tx->from, tx->nrcpt);
	if (s->flags & SF_LMTP) {
		for (size_t i = 0; i < tx->nrcpt; i++)
			smtp_reply(s, "250 2.1.5 <%s> Ok: discarded", tx->rcpt[i].addr);
	} else {
		smtp_reply(s, "250 2.0.0 Ok: queued as %016" PRIx64, tx->qid);
	}
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	smtp_resume(s);
}

/* Every milter had its say on the message (or one decided): the transaction goes on or
   ends. */
static void eod_end(struct milter_sess *ms)
{
	struct smtp_session *s = ms->s;
	struct smtp_tx *tx = s->tx;

	msg_close(ms);
	if (s->dead) {
		/* nobody to answer: not acknowledged, so not kept (the client sends it again) */
		smtp_tx_free(&s->tx);
		smtp_resume(s);
		return;
	}
	if (ms->out == OUT_REJECT || ms->out == OUT_TEMPFAIL) {
		char text[REPLY_MAX];

		snprintf(text, sizeof(text), "%s", ms->reply);
		reply_lines(s, text);
		return;
	}
	if (ms->out == OUT_DISCARD || ms->tx_discard || tx->nrcpt == 0) {
		discard(s);
		return;
	}
	deliver_commit(s);
}

void milter_run(struct smtp_session *s)
{
	struct milter_sess *ms = s->milter;
	const char *err = NULL;

	ms->op = OP_EOD;
	ms->cur = 0;
	ms->out = OUT_CONTINUE;
	ms->reply[0] = '\0';
	s->tx->milter = ms;
	if (ms->tx_discard) {
		event_active(ms->end_ev, EV_TIMEOUT, 1);
		return;
	}
	if (msg_open(ms, &err) < 0) {
		log_warnx("%016" PRIx64 " milter qid=%016" PRIx64 " result=fail reason=\"%s\"",
			  s->id, s->tx->qid, err != NULL ? err : "cannot read the message file");
		set_reply(ms, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
		event_active(ms->end_ev, EV_TIMEOUT, 1);
		return;
	}
	if (!op_run(ms))
		event_active(ms->end_ev, EV_TIMEOUT, 1);
}

void milter_then_commit(struct smtp_session *s)
{
	if (s->milter != NULL)
		milter_run(s);
	else
		deliver_commit(s);
}

/* A command in progress is given up (its transaction or session ends under it): the milter
   it waits for cannot be talked to any more in step, so it is closed. */
static void op_cancel(struct milter_sess *ms)
{
	if (ms->op == OP_NONE)
		return;
	for (size_t i = 0; i < ms->n; i++) {
		struct milter_conn *c = &ms->c[i];

		if (c->busy) {
			close_conn(c, false);
			c->busy = false;
			c->failed = true;
		}
	}
	event_del(ms->end_ev);
	ms->op = OP_NONE;
	msg_close(ms);
}

void milter_tx_free(struct smtp_tx *tx)
{
	struct milter_sess *ms = tx->milter;

	if (ms == NULL)
		return;
	tx->milter = NULL;
	if (op_tx(ms->op))
		op_cancel(ms);
	for (size_t i = 0; i < ms->n; i++) {
		struct milter_conn *c = &ms->c[i];

		if (c->in_tx && c->bev != NULL) {
			milter_put(&ms->pkt, SMFIC_ABORT, NULL, 0);
			send_pkt(c);
		}
		c->in_tx = c->tx_skip = false;
	}
	ms->tx_discard = false;
}

void milter_session_free(struct smtp_session *s)
{
	struct milter_sess *ms = s->milter;

	if (ms == NULL)
		return;
	s->milter = NULL;
	if (s->tx != NULL && s->tx->milter == ms)
		milter_tx_free(s->tx);
	op_cancel(ms);
	for (size_t i = 0; i < ms->n; i++) {
		close_conn(&ms->c[i], true);
		event_free(ms->c[i].timer);
	}
	free(ms->c);
	event_free(ms->end_ev);
	msg_close(ms);
	buf_release(&ms->pkt);
	milter_set_free(&ms->set);
	free(ms);
}

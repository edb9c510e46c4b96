/* milter.c — owns the conversation with milters at the end of a message: for each milter of
 * the session's list in turn, a connection (inet or unix, bufferevent on the worker's loop),
 * option negotiation, then the transaction replayed (connect, HELO, MAIL, RCPT, DATA with
 * the macros milters read), the header fields, the body in chunks read back from the message file,
 * and the end of the message, whose answer ends that milter's part: its changes are made
 * then, so the next milter of the list sees the message and envelope as changed by the ones
 * before it (header fields, body, sender, recipients). Every wait has its
 * timeout (connect, command, content); a milter that is down, slow, closes or answers
 * garbage gets its default action and a log line; nothing is answered to the client before
 * the last milter finished. Replies are parsed by milter_proto.c, changes applied by
 * milter_apply.c. */
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

struct milter_set {
	struct milter_spec *list[2]; /* 0: smtpd_milters, 1: non_smtpd_milters */
	size_t n[2];
	unsigned refs; /* the worker's, and each running transaction's */
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

enum outcome { OUT_CONTINUE, OUT_REJECT, OUT_TEMPFAIL, OUT_DISCARD };

struct milter_run {
	struct smtp_session *s;
	struct milter_set *set;
	const struct milter_spec *list;
	size_t n, cur;
	struct milter_msg msg;
	struct milter_mods mine; /* of the current one, until its end */
	enum outcome out;
	char reply[1024]; /* OUT_REJECT, OUT_TEMPFAIL: SMTP reply lines */
	/* the current milter */
	struct bufferevent *bev;
	struct event *timer;
	struct buf pkt;
	enum step step;
	size_t idx;       /* MS_RCPT, MS_HEADER: which */
	uint64_t body_at; /* MS_BODY: the next byte to send */
	bool waiting;     /* a reply is due */
	bool draining;    /* body output waits to drain */
	uint32_t actions, proto;
	char *syms[MILTER_NSTAGES];
	unsigned gen;         /* bumped when a milter's connection closes */
	struct event *end_ev; /* run_end, from the loop (never inside a callback
					   of the connection it closes) */
};

static void next_milter(struct milter_run *r);
static void advance(struct milter_run *r);

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

bool milter_wanted(const struct smtp_session *s)
{
	const struct milter_set *set = s->m->milters;

	return set != NULL && set->n[(s->flags & SF_LMTP) ? 1 : 0] > 0;
}

/* ---- packets ---- */

static void send_pkt(struct milter_run *r)
{
	if (r->pkt.len > 0)
		bufferevent_write(r->bev, r->pkt.data, r->pkt.len);
	buf_reset(&r->pkt);
}

static void arm(struct milter_run *r, int64_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(r->timer, &tv);
}

/* Macros of a stage (those the milter asked for, when it gave a list for the stage). */
static void put_macros(struct milter_run *r, enum milter_stage st, char cmd,
		       const char *const *names, const char *const *values, size_t n)
{
	const char *nv[16], *vv[16];
	size_t k = 0;

	for (size_t i = 0; i < n && k < 16; i++) {
		if (values[i] == NULL ||
		    (r->syms[st] != NULL && !milter_symlist_has(r->syms[st], names[i])))
			continue;
		nv[k] = names[i];
		vv[k++] = values[i];
	}
	if (k > 0)
		milter_put_macros(&r->pkt, cmd, nv, vv, k);
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

static void send_connect(struct milter_run *r)
{
	struct smtp_session *s = r->s;
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
	put_macros(r, MILTER_ST_CONNECT, SMFIC_CONNECT, names, values, 7);
	milter_put_connect(&r->pkt, "unknown", family,
			   port[0] ? (uint16_t)strtoul(port, NULL, 10) : 0, addr);
}

static void send_helo(struct milter_run *r)
{
	struct smtp_session *s = r->s;
	const char *proto = NULL, *cipher = NULL;
	const char *helo = s->helo[0] ? s->helo : "unknown";

	if (s->flags & SF_TLS)
		tls_peer_info(s->bev, &proto, &cipher, NULL);
	const char *names[] = { "{tls_version}", "{cipher}" };
	const char *values[] = { proto, cipher };
	put_macros(r, MILTER_ST_HELO, SMFIC_HELO, names, values, 2);
	milter_put_strs(&r->pkt, SMFIC_HELO, &helo, 1);
}

static void send_mail(struct milter_run *r)
{
	struct smtp_session *s = r->s;
	char qid[20], from[MAILADDR_TEXT_MAX + 3];

	snprintf(qid, sizeof(qid), "%016" PRIx64, s->tx->qid);
	snprintf(from, sizeof(from), "<%s>", s->tx->from);
	const char *names[] = { "i", "{auth_authen}", "{mail_addr}", "{mail_mailer}" };
	const char *values[] = { qid, (s->flags & SF_AUTH) ? s->user : NULL, s->tx->from,
				 (s->flags & SF_LMTP) ? "lmtp" : "smtp" };
	const char *arg = from;
	put_macros(r, MILTER_ST_MAIL, SMFIC_MAIL, names, values, 4);
	milter_put_strs(&r->pkt, SMFIC_MAIL, &arg, 1);
}

static void send_rcpt(struct milter_run *r)
{
	const struct smtp_rcpt *rc = &r->s->tx->rcpt[r->idx];
	char qid[20], to[MAILADDR_TEXT_MAX + 3];
	const char *at = strrchr(rc->addr, '@');

	snprintf(qid, sizeof(qid), "%016" PRIx64, r->s->tx->qid);
	snprintf(to, sizeof(to), "<%s>", rc->addr);
	const char *names[] = { "i", "{rcpt_addr}", "{rcpt_host}", "{rcpt_mailer}" };
	const char *values[] = { qid, rc->addr, at != NULL ? at + 1 : NULL,
				 rc->local ? "local" : "smtp" };
	const char *arg = to;
	put_macros(r, MILTER_ST_RCPT, SMFIC_RCPT, names, values, 4);
	milter_put_strs(&r->pkt, SMFIC_RCPT, &arg, 1);
}

/* The macro {i} before DATA, EOH and the end of the message. */
static void put_qid(struct milter_run *r, enum milter_stage st, char cmd)
{
	char qid[20];
	const char *names[] = { "i" }, *values[] = { qid };

	snprintf(qid, sizeof(qid), "%016" PRIx64, r->s->tx->qid);
	put_macros(r, st, cmd, names, values, 1);
}

/* ---- the steps ---- */

static bool step_skipped(const struct milter_run *r, enum step st)
{
	static const uint32_t no[] = { [MS_CONNECT] = SMFIP_NOCONNECT, [MS_HELO] = SMFIP_NOHELO,
				       [MS_MAIL] = SMFIP_NOMAIL,       [MS_RCPT] = SMFIP_NORCPT,
				       [MS_DATA] = SMFIP_NODATA,       [MS_HEADER] = SMFIP_NOHDRS,
				       [MS_EOH] = SMFIP_NOEOH,         [MS_BODY] = SMFIP_NOBODY };

	return st < MS_EOB && st > MS_OPTNEG && (r->proto & no[st]) != 0;
}

static bool step_answered(const struct milter_run *r, enum step st)
{
	static const uint32_t nr[] = { [MS_CONNECT] = SMFIP_NR_CONN, [MS_HELO] = SMFIP_NR_HELO,
				       [MS_MAIL] = SMFIP_NR_MAIL,    [MS_RCPT] = SMFIP_NR_RCPT,
				       [MS_DATA] = SMFIP_NR_DATA,    [MS_HEADER] = SMFIP_NR_HDR,
				       [MS_EOH] = SMFIP_NR_EOH,      [MS_BODY] = SMFIP_NR_BODY };

	return st >= MS_EOB || st == MS_OPTNEG || (r->proto & nr[st]) == 0;
}

/* Sends the packets of the current step (one item of it for RCPT, HEADER, BODY); false
   when the step has nothing (more) to send. */
static bool send_step(struct milter_run *r)
{
	const struct milter_field *f;
	char chunk[MILTER_CHUNK];

	switch (r->step) {
	case MS_CONNECT:
		send_connect(r);
		break;
	case MS_HELO:
		send_helo(r);
		break;
	case MS_MAIL:
		send_mail(r);
		break;
	case MS_RCPT:
		if (r->idx >= r->s->tx->nrcpt)
			return false;
		send_rcpt(r);
		break;
	case MS_DATA:
		put_qid(r, MILTER_ST_DATA, SMFIC_DATA);
		milter_put(&r->pkt, SMFIC_DATA, NULL, 0);
		break;
	case MS_HEADER:
		if (r->idx >= r->msg.nf)
			return false;
		f = &r->msg.f[r->idx];
		const char *nv[2] = { f->name, f->value };
		char *lead = NULL;
		if (r->proto & SMFIP_HDR_LEADSPC)
			nv[1] = lead = xasprintf(" %s", f->value);
		milter_put_strs(&r->pkt, SMFIC_HEADER, nv, 2);
		free(lead);
		break;
	case MS_EOH:
		put_qid(r, MILTER_ST_EOH, SMFIC_EOH);
		milter_put(&r->pkt, SMFIC_EOH, NULL, 0);
		break;
	case MS_BODY: {
		uint64_t left = r->msg.size - r->body_at;
		size_t want = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
		ssize_t n = want > 0 ? pread(r->msg.fd, chunk, want, (off_t)r->body_at) : 0;

		if (n <= 0)
			return false;
		r->body_at += (uint64_t)n;
		milter_put(&r->pkt, SMFIC_BODY, chunk, (size_t)n);
		break;
	}
	case MS_EOB:
		put_qid(r, MILTER_ST_EOB, SMFIC_BODYEOB);
		milter_put(&r->pkt, SMFIC_BODYEOB, NULL, 0);
		break;
	default:
		return false;
	}
	send_pkt(r);
	return true;
}

static int64_t step_timeout(const struct milter_run *r)
{
	const struct milter_spec *sp = &r->list[r->cur];

	return r->step == MS_OPTNEG ? sp->connect_ms
	       : r->step >= MS_BODY ? sp->content_ms
				    : sp->command_ms;
}

/* Sends steps until one needs an answer (or the output must drain). */
static void advance(struct milter_run *r)
{
	for (;;) {
		bool multi = r->step == MS_RCPT || r->step == MS_HEADER || r->step == MS_BODY;

		if (r->step == MS_END)
			return next_milter(r);
		if (step_skipped(r, r->step) || !send_step(r)) {
			r->step++;
			r->idx = 0;
			continue;
		}
		if (multi)
			r->idx++;
		if (!multi)
			r->step++;
		if (step_answered(r, multi ? r->step : r->step - 1)) {
			r->waiting = true;
			arm(r, step_timeout(r));
			return;
		}
		if (r->step == MS_BODY &&
		    evbuffer_get_length(bufferevent_get_output(r->bev)) > OUT_HIGH) {
			r->draining = true;
			arm(r, step_timeout(r));
			return;
		}
	}
}

/* ---- one milter ---- */

static void close_milter(struct milter_run *r, bool quit)
{
	if (r->bev != NULL) {
		if (quit && evbuffer_get_length(bufferevent_get_output(r->bev)) == 0) {
			/* best effort, five bytes on an idle socket: it closes right after */
			milter_put(&r->pkt, SMFIC_QUIT, NULL, 0);
			(void)send(bufferevent_getfd(r->bev), r->pkt.data, r->pkt.len,
				   MSG_NOSIGNAL | MSG_DONTWAIT);
			buf_reset(&r->pkt);
		}
		bufferevent_free(r->bev);
		r->bev = NULL;
		r->gen++;
	}
	if (r->timer != NULL)
		evtimer_del(r->timer);
	for (int i = 0; i < MILTER_NSTAGES; i++) {
		free(r->syms[i]);
		r->syms[i] = NULL;
	}
	milter_mods_release(&r->mine);
}

static void set_reply(struct milter_run *r, enum outcome out, const char *text)
{
	r->out = out;
	snprintf(r->reply, sizeof(r->reply), "%s", text);
}

/* A milter failed: its default action, logged. */
static void fail(struct milter_run *r, const char *why)
{
	const struct milter_spec *sp = &r->list[r->cur];
	static const char *const act[] = { "tempfail", "accept", "reject" };

	log_warnx("%016" PRIx64 " milter %s qid=%016" PRIx64 " result=fail reason=\"%s\" "
		  "action=%s",
		  r->s->id, sp->text, r->s->tx->qid, why, act[sp->default_action]);
	close_milter(r, false);
	if (sp->default_action == MILTER_TEMPFAIL)
		set_reply(r, OUT_TEMPFAIL, "451 4.7.1 Service unavailable - try again later");
	else if (sp->default_action == MILTER_REJECT)
		set_reply(r, OUT_REJECT, "554 5.7.1 Message rejected by a filter");
	next_milter(r);
}

/* The reply code text of a milter as SMTP reply lines ("550 5.7.1 text", a multi-line
   one with its dashes, LF between the lines); an enhanced code is added where the milter
   gave none. */
static void reply_code(struct milter_run *r, const struct milter_reply *rp)
{
	const char *t = rp->text + 3;
	size_t off = 0;

	r->out = rp->code >= 500 ? OUT_REJECT : OUT_TEMPFAIL;
	r->reply[0] = '\0';
	for (;;) {
		t += strspn(t, " -");
		size_t n = strcspn(t, "\r\n");
		const char *next = t + n + strspn(t + n, "\r\n");
		bool esc = n >= 5 && t[0] == rp->text[0] && t[1] == '.';
		bool last = *next == '\0';
		int w = snprintf(r->reply + off, sizeof(r->reply) - off, "%d%c%s%.*s%s", rp->code,
				 last ? ' ' : '-',
				 esc               ? ""
				 : rp->code >= 500 ? "5.7.1 "
						   : "4.7.1 ",
				 (int)n, t, last ? "" : "\n");

		if (w < 0 || (size_t)w >= sizeof(r->reply) - off) {
			/* too long: the lines that fit, the last of them made final */
			r->reply[off > 0 ? off - 1 : 0] = '\0';
			char *l = strrchr(r->reply, '\n');
			l = l != NULL ? l + 1 : r->reply;
			if (strlen(l) > 3)
				l[3] = ' ';
			return;
		}
		if (last)
			return;
		off += (size_t)w;
		t = next;
		if (strncmp(t, rp->text, 3) == 0) /* the next line repeats the code */
			t += 3;
	}
}

static bool action_allowed(const struct milter_run *r, char cmd)
{
	switch (cmd) {
	case SMFIR_ADDHEADER:
		return r->actions & SMFIF_ADDHDRS;
	case SMFIR_INSHEADER:
	case SMFIR_CHGHEADER:
		return r->actions & SMFIF_CHGHDRS;
	case SMFIR_REPLBODY:
		return r->actions & SMFIF_CHGBODY;
	case SMFIR_ADDRCPT:
		return r->actions & SMFIF_ADDRCPT;
	case SMFIR_ADDRCPT_PAR:
		return r->actions & SMFIF_ADDRCPT_PAR;
	case SMFIR_DELRCPT:
		return r->actions & SMFIF_DELRCPT;
	case SMFIR_CHGFROM:
		return r->actions & SMFIF_CHGFROM;
	case SMFIR_QUARANTINE:
		return r->actions & SMFIF_QUARANTINE;
	default:
		return false;
	}
}

/* What milters may do: not change the recipients of LMTP (one reply per recipient). */
static uint32_t offered_actions(const struct milter_run *r)
{
	return (r->s->flags & SF_LMTP)
		       ? MILTER_ACTIONS & ~(SMFIF_ADDRCPT | SMFIF_ADDRCPT_PAR | SMFIF_DELRCPT)
		       : MILTER_ACTIONS;
}

/* The milter's answer to option negotiation. What it asks for beyond the offer is not
   granted (as libmilter's MTAs do): a change it then sends is a protocol error. */
static void on_optneg(struct milter_run *r, const struct milter_reply *rp)
{
	if (rp->cmd != SMFIC_OPTNEG || rp->version < 2 || rp->version > MILTER_VERSION)
		return fail(r, rp->cmd != SMFIC_OPTNEG ? "no option negotiation"
						       : "unsupported protocol version");
	r->actions = rp->actions & offered_actions(r);
	r->proto = rp->protocol & MILTER_PROTOCOL;
	for (int i = 0; i < MILTER_NSTAGES; i++)
		if ((r->actions & SMFIF_SETSYMLIST) && rp->symlist[i] != NULL)
			r->syms[i] = xstrdup(rp->symlist[i]);
	r->waiting = false;
	evtimer_del(r->timer);
	r->step = MS_CONNECT;
	advance(r);
}

/* The message file of s's transaction, read back into r->msg: 0, or -1 with *err_r (NULL:
   the file could not be opened). */
static int msg_open(struct milter_run *r, const char **err_r)
{
	struct smtp_tx *tx = r->s->tx;
	int fd = -1;

	*err_r = NULL;
	if (r->msg.fd >= 0)
		close(r->msg.fd);
	milter_msg_release(&r->msg);
	r->msg.fd = -1;
	if (deliver_flush(r->s) < 0 || store_blob_reader(tx->blob, &fd) != 0 ||
	    milter_msg_read(&r->msg, fd, store_blob_size(tx->blob), err_r) < 0) {
		if (fd >= 0)
			close(fd);
		r->msg.fd = -1;
		return -1;
	}
	return 0;
}

/* The end of this milter's part. Its changes are made at once (a new message file, the
   envelope edited), so the next milter is sent the message as this one left it. */
static void milter_done(struct milter_run *r, bool keep)
{
	const char *err;

	if (keep && milter_mods_apply(r->s, &r->msg, &r->mine) < 0) {
		set_reply(r, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
	} else if (keep && r->cur + 1 < r->n && msg_open(r, &err) < 0) {
		log_warnx("%016" PRIx64 " milter qid=%016" PRIx64 " result=fail reason=\"%s\"",
			  r->s->id, r->s->tx->qid,
			  err != NULL ? err : "cannot read the changed message file");
		set_reply(r, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
	}
	close_milter(r, true);
	next_milter(r);
}

static void on_reply(struct milter_run *r, const struct milter_reply *rp)
{
	const struct milter_spec *sp = &r->list[r->cur];

	if (r->step == MS_OPTNEG)
		return on_optneg(r, rp);
	if (rp->cmd == SMFIR_PROGRESS) {
		arm(r, step_timeout(r));
		return;
	}
	if (r->step == MS_END && action_allowed(r, rp->cmd)) {
		if (milter_mods_add(&r->mine, rp, (r->proto & SMFIP_HDR_LEADSPC) != 0,
				    r->s->m->lim.max_message_size) < 0)
			return fail(r, "replacement body too big");
		return;
	}
	r->waiting = false;
	evtimer_del(r->timer);
	switch (rp->cmd) {
	case SMFIR_CONTINUE:
		if (r->step == MS_END)
			return milter_done(r, true);
		return advance(r);
	case SMFIR_SKIP:
		if (r->step != MS_BODY && r->step != MS_EOB)
			return fail(r, "skip outside the body");
		r->step = MS_EOB;
		return advance(r);
	case SMFIR_ACCEPT:
		log_info("%016" PRIx64 " milter %s qid=%016" PRIx64 " result=accept", r->s->id,
			 sp->text, r->s->tx->qid);
		return milter_done(r, r->step == MS_END);
	case SMFIR_DISCARD:
		r->out = OUT_DISCARD;
		break;
	case SMFIR_REJECT:
		set_reply(r, OUT_REJECT, "550 5.7.1 Message rejected");
		break;
	case SMFIR_TEMPFAIL:
	case SMFIR_CONN_FAIL:
	case SMFIR_SHUTDOWN:
		set_reply(r, OUT_TEMPFAIL, "451 4.7.1 Service unavailable - try again later");
		break;
	case SMFIR_REPLYCODE:
		reply_code(r, rp);
		break;
	default:
		return fail(r, "unexpected reply");
	}
	log_info("%016" PRIx64 " milter %s qid=%016" PRIx64 " result=%s reply=\"%.200s\"",
		 r->s->id, sp->text, r->s->tx->qid,
		 r->out == OUT_DISCARD  ? "discard"
		 : r->out == OUT_REJECT ? "reject"
					: "tempfail",
		 r->out == OUT_DISCARD ? "" : r->reply);
	close_milter(r, true);
	next_milter(r);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct milter_run *r = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct milter_reply rp;
	const char *err = NULL;
	size_t used;

	unsigned gen = r->gen;

	while (r->gen == gen) {
		size_t avail = evbuffer_get_length(in);
		unsigned char h[4];

		if (avail < 4)
			return;
		evbuffer_copyout(in, h, 4);
		size_t want = 4 + (size_t)((uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
					   (uint32_t)h[2] << 8 | h[3]);
		if (want > MILTER_REPLY_MAX)
			return fail(r, "reply packet too long");
		if (avail < want)
			return;
		const unsigned char *p = evbuffer_pullup(in, (ssize_t)want);
		int rc = milter_reply_parse(p, want, &rp, &used, &err);
		if (rc < 0)
			return fail(r, err);
		if (!r->waiting && r->step != MS_END)
			return fail(r, "reply nobody asked for");
		on_reply(r, &rp);
		if (r->gen == gen)
			evbuffer_drain(in, used);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct milter_run *r = arg;

	if (!r->draining)
		return;
	r->draining = false;
	evtimer_del(r->timer);
	advance(r);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct milter_run *r = arg;

	if (what & BEV_EVENT_CONNECTED) {
		milter_put_optneg(&r->pkt, MILTER_VERSION, offered_actions(r), MILTER_PROTOCOL);
		send_pkt(r);
		r->waiting = true;
		return;
	}
	fail(r, (what & BEV_EVENT_EOF) ? "connection closed"
		: r->step == MS_OPTNEG ? "cannot connect"
				       : "connection error");
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct milter_run *r = arg;

	fail(r, r->step == MS_OPTNEG ? "connect or negotiation timed out" : "timed out");
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

static void start_milter(struct milter_run *r)
{
	const struct milter_spec *sp = &r->list[r->cur];
	struct sockaddr_storage ss;
	socklen_t len;

	r->step = MS_OPTNEG;
	r->idx = 0;
	r->body_at = r->msg.body_off;
	r->waiting = r->draining = false;
	r->actions = r->proto = 0;
	if (milter_addr(sp, &ss, &len) < 0)
		return fail(r, "not a numeric address or a usable path");
	r->bev = bufferevent_socket_new(r->s->m->base, -1,
					BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	bufferevent_setcb(r->bev, read_cb, write_cb, event_cb, r);
	bufferevent_setwatermark(r->bev, EV_READ, 0, MILTER_REPLY_MAX);
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	arm(r, sp->connect_ms);
	if (bufferevent_socket_connect(r->bev, (struct sockaddr *)&ss, (int)len) < 0)
		fail(r, "cannot connect");
}

/* ---- the whole run ---- */

static void run_free(struct milter_run *r)
{
	close_milter(r, false);
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->end_ev != NULL)
		event_free(r->end_ev);
	if (r->msg.fd >= 0)
		close(r->msg.fd);
	milter_msg_release(&r->msg);
	buf_release(&r->pkt);
	milter_set_free(&r->set);
	free(r);
}

static void reply_lines(struct smtp_session *s, const char *text)
{
	size_t n = (s->flags & SF_LMTP) ? s->tx->nrcpt : 1;
	char copy[sizeof(((struct milter_run *)0)->reply)];

	snprintf(copy, sizeof(copy), "%s", text);
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	for (size_t i = 0; i < n; i++) {
		for (char *line = copy, *nl; line != NULL; line = nl) {
			if ((nl = strchr(line, '\n')) != NULL)
				*nl = '\0';
			smtp_reply(s, "%s", line);
			if (nl != NULL)
				*nl++ = '\n';
		}
	}
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

/* Every milter had its say (or one decided): the transaction goes on or ends. */
static void run_end(struct milter_run *r)
{
	struct smtp_session *s = r->s;
	struct smtp_tx *tx = s->tx;

	tx->milter = NULL;
	if (s->dead) {
		/* nobody to answer: not acknowledged, so not kept (the client sends it again) */
		run_free(r);
		smtp_tx_free(&s->tx);
		smtp_resume(s);
		return;
	}
	if (r->out == OUT_REJECT || r->out == OUT_TEMPFAIL) {
		char text[sizeof(r->reply)];

		snprintf(text, sizeof(text), "%s", r->reply);
		run_free(r);
		reply_lines(s, text);
		return;
	}
	if (r->out == OUT_DISCARD || tx->nrcpt == 0) {
		run_free(r);
		discard(s);
		return;
	}
	run_free(r);
	deliver_commit(s);
}

static void end_cb(evutil_socket_t fd, short what, void *arg)
{
	run_end(arg);
}

static void next_milter(struct milter_run *r)
{
	if (r->out != OUT_CONTINUE || ++r->cur >= r->n || r->s->dead || r->s->tx->nrcpt == 0) {
		close_milter(r, false);
		event_active(r->end_ev, EV_TIMEOUT, 1);
		return;
	}
	start_milter(r);
}

void milter_run(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	struct milter_run *r = xcalloc(1, sizeof(*r));
	const char *err = NULL;
	int k = (s->flags & SF_LMTP) ? 1 : 0;

	r->s = s;
	r->set = s->m->milters;
	r->set->refs++;
	r->list = r->set->list[k];
	r->n = r->set->n[k];
	r->msg.fd = -1;
	buf_init(&r->pkt, 256, MILTER_REPLY_MAX);
	r->timer = evtimer_new(s->m->base, timer_cb, r);
	r->end_ev = evtimer_new(s->m->base, end_cb, r);
	tx->milter = r;
	if (msg_open(r, &err) < 0) {
		log_warnx("%016" PRIx64 " milter qid=%016" PRIx64 " result=fail reason=\"%s\"",
			  s->id, tx->qid, err != NULL ? err : "cannot read the message file");
		set_reply(r, OUT_TEMPFAIL, "451 4.3.0 Local error, try again later");
		event_active(r->end_ev, EV_TIMEOUT, 1);
		return;
	}
	r->cur = 0;
	start_milter(r);
}

void milter_then_commit(struct smtp_session *s)
{
	if (milter_wanted(s))
		milter_run(s);
	else
		deliver_commit(s);
}

void milter_tx_free(struct smtp_tx *tx)
{
	if (tx->milter != NULL) {
		struct milter_run *r = tx->milter;

		tx->milter = NULL;
		run_free(r);
	}
}

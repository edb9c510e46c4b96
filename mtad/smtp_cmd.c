/* smtp_cmd.c — owns the command table and dispatcher (verb, states where it is allowed,
 * argument rule, handler) and the envelope commands: EHLO/HELO/LHLO, MAIL, RCPT with the relay
 * policy, RSET, NOOP, QUIT, VRFY, HELP, STARTTLS, XUID (the maildrop pickup's), and the
 * DATA/BDAT entry points. EHLO/HELO, MAIL, RCPT, DATA and the first BDAT, once mtad's own
 * checks let them through, wait for the milters' answer (milter_ask) before theirs. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"
#include "mtad/srs.h"
#include "store/store.h"

enum arg_rule { ARG_NONE, ARG_NEED, ARG_ANY };

struct smtp_cmd {
	const char *verb;
	unsigned states; /* where it is allowed; elsewhere 503 */
	enum arg_rule arg;
	void (*fn)(struct smtp_session *s, const char *arg, size_t len);
	unsigned flags;
};

#define CMD_SMTP 0x01 /* not in LMTP */
#define CMD_LMTP 0x02 /* LMTP only */

#define ST_SESSION (ST_CONNECTED | ST_READY | ST_MAIL | ST_RCPT | ST_BDAT)

static void cmd_ehlo(struct smtp_session *s, const char *arg, size_t len);
static void cmd_helo(struct smtp_session *s, const char *arg, size_t len);
static void cmd_mail(struct smtp_session *s, const char *arg, size_t len);
static void cmd_rcpt(struct smtp_session *s, const char *arg, size_t len);
static void cmd_data(struct smtp_session *s, const char *arg, size_t len);
static void cmd_bdat(struct smtp_session *s, const char *arg, size_t len);
static void cmd_rset(struct smtp_session *s, const char *arg, size_t len);
static void cmd_noop(struct smtp_session *s, const char *arg, size_t len);
static void cmd_quit(struct smtp_session *s, const char *arg, size_t len);
static void cmd_vrfy(struct smtp_session *s, const char *arg, size_t len);
static void cmd_help(struct smtp_session *s, const char *arg, size_t len);
static void cmd_starttls(struct smtp_session *s, const char *arg, size_t len);
static void cmd_auth(struct smtp_session *s, const char *arg, size_t len);
static void cmd_xuid(struct smtp_session *s, const char *arg, size_t len);
static void cmd_xrefused(struct smtp_session *s, const char *arg, size_t len);

static const struct smtp_cmd smtp_cmds[] = {
	/* verb        allowed in                  arg       handler       flags */
	{ "EHLO", ST_SESSION, ARG_NEED, cmd_ehlo, CMD_SMTP },
	{ "HELO", ST_SESSION, ARG_NEED, cmd_helo, CMD_SMTP },
	{ "LHLO", ST_SESSION, ARG_NEED, cmd_ehlo, CMD_LMTP },
	{ "MAIL", ST_READY, ARG_NEED, cmd_mail, 0 },
	{ "RCPT", ST_MAIL | ST_RCPT, ARG_NEED, cmd_rcpt, 0 },
	{ "DATA", ST_MAIL | ST_RCPT, ARG_NONE, cmd_data, 0 },
	{ "BDAT", ST_SESSION, ARG_NEED, cmd_bdat, 0 },
	{ "BURL", ST_SESSION, ARG_NEED, smtp_cmd_burl, CMD_SMTP }, /* smtp_burl.c */
	{ "RSET", ST_SESSION, ARG_NONE, cmd_rset, 0 },
	{ "NOOP", ST_SESSION, ARG_ANY, cmd_noop, 0 },
	{ "QUIT", ST_SESSION, ARG_NONE, cmd_quit, 0 },
	{ "VRFY", ST_SESSION, ARG_NEED, cmd_vrfy, 0 },
	{ "HELP", ST_SESSION, ARG_ANY, cmd_help, 0 },
	{ "STARTTLS", ST_CONNECTED | ST_READY, ARG_NONE, cmd_starttls, 0 },
	{ "AUTH", ST_READY, ARG_NEED, cmd_auth, CMD_SMTP },
	{ "XUID", ST_READY, ARG_NEED, cmd_xuid, CMD_SMTP },
	{ "XREFUSED", ST_RCPT, ARG_NEED, cmd_xrefused, CMD_SMTP },
};

void smtp_dispatch(struct smtp_session *s, const char *line, size_t len)
{
	const struct smtp_cmd *c = NULL;
	size_t vlen = 0;

	mtad_metrics_command(s, NULL);
	if (!str_is_safe_line(line, len)) {
		smtp_error(s, "500 5.5.2 Invalid characters in command");
		return;
	}
	while (vlen < len && line[vlen] != ' ')
		vlen++;
	for (size_t i = 0; i < sizeof(smtp_cmds) / sizeof(smtp_cmds[0]); i++)
		if (str_caseeq(line, vlen, smtp_cmds[i].verb, strlen(smtp_cmds[i].verb)))
			c = &smtp_cmds[i];
	if (c != NULL)
		mtad_metrics_command(s, c->verb);
	if (c == NULL || ((c->flags & CMD_SMTP) && (s->flags & SF_LMTP)) ||
	    ((c->flags & CMD_LMTP) && !(s->flags & SF_LMTP))) {
		log_debug("%016" PRIx64 " smtp unknown command addr=%s", s->id, s->addr);
		smtp_error(s, "500 5.5.2 Command unrecognized");
		return;
	}
	if (c->fn != cmd_quit && milter_refused(s))
		return; /* a milter refused the session at CONNECT or HELO */
	const char *arg = line + vlen;
	size_t alen = len - vlen;
	while (alen > 0 && *arg == ' ') {
		arg++;
		alen--;
	}
	if ((c->arg == ARG_NEED && alen == 0) || (c->arg == ARG_NONE && alen > 0)) {
		smtp_error(s, "501 5.5.4 Syntax: %s%s", c->verb,
			   c->arg == ARG_NEED ? " argument" : " takes no argument");
		return;
	}
	if (!(c->states & s->state)) {
		if (s->state == ST_CONNECTED)
			smtp_error(s, "503 5.5.1 Send %s first",
				   (s->flags & SF_LMTP) ? "LHLO" : "EHLO/HELO");
		else
			smtp_error(s, "503 5.5.1 Bad sequence of commands");
		return;
	}
	c->fn(s, arg, alen);
}

static void set_helo(struct smtp_session *s, const char *arg, size_t len)
{
	if (len >= sizeof(s->helo))
		len = sizeof(s->helo) - 1;
	memcpy(s->helo, arg, len);
	s->helo[len] = '\0';
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
}

static bool auth_offered(const struct smtp_session *s)
{
	return s->m->la != NULL && !(s->flags & (SF_LMTP | SF_AUTH)) &&
	       ((s->flags & SF_TLS) || !s->m->lim.auth_require_tls);
}

void smtp_ehlo_reply(struct smtp_session *s, bool esmtp)
{
	smtp_reply(s, "250-%s Hello %s [%s]", s->m->hostname, s->helo, s->addr);
	smtp_reply(s, "250-PIPELINING");
	smtp_reply(s, "250-SIZE %" PRIu64, s->m->lim.max_message_size);
	smtp_reply(s, "250-8BITMIME");
	smtp_reply(s, "250-SMTPUTF8");
	smtp_reply(s, "250-CHUNKING");
	smtp_reply(s, "250-DSN");
	if (s->flags & SF_TLS) /* RFC 8689 4.1: only over TLS */
		smtp_reply(s, "250-REQUIRETLS");
	if (s->m->tls != NULL && !(s->flags & SF_TLS))
		smtp_reply(s, "250-STARTTLS");
	if (auth_offered(s))
		smtp_reply(s, "250-AUTH %s", smtp_auth_mechs(s));
	if (smtp_burl_offered(s))
		smtp_reply(s, "250-BURL imap");
	smtp_reply(s, "250 ENHANCEDSTATUSCODES");
}

/* The reply to EHLO/HELO/LHLO once the milters answered (SF_ESMTP: which one). */
static void helo_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	smtp_set_state(s, ST_READY);
	if (refusal != NULL)
		milter_reply(s, refusal);
	else if (s->flags & SF_ESMTP)
		smtp_ehlo_reply(s, true);
	else
		smtp_reply(s, "250 %s", s->m->hostname);
	if (resume)
		smtp_resume(s);
}

static void helo_ask(struct smtp_session *s)
{
	milter_ask(s, MILTER_HELO, NULL, false, helo_answer, false);
}

static void cmd_ehlo(struct smtp_session *s, const char *arg, size_t len)
{
	set_helo(s, arg, len);
	s->flags |= SF_ESMTP;
	helo_ask(s);
}

static void cmd_helo(struct smtp_session *s, const char *arg, size_t len)
{
	set_helo(s, arg, len);
	s->flags &= ~SF_ESMTP;
	helo_ask(s);
}

/* "FROM:" / "TO:" then optional spaces; returns the rest or NULL. */
static const char *after_prefix(const char *arg, size_t *len, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (*len < pl || !str_caseprefix(arg, *len, prefix))
		return NULL;
	arg += pl;
	*len -= pl;
	while (*len > 0 && *arg == ' ') {
		arg++;
		(*len)--;
	}
	return arg;
}

static bool needs_auth(const struct smtp_session *s)
{
	return (s->kind == L_SUBMISSION || s->kind == L_SUBMISSIONS) &&
	       !(s->flags & (SF_AUTH | SF_LOCAL));
}

static void cmd_mail(struct smtp_session *s, const char *arg, size_t len)
{
	struct mailaddr a;
	struct mail_params mp;
	const char *err, *p = after_prefix(arg, &len, "FROM:");
	size_t used;
	int rc;

	if (p == NULL) {
		smtp_error(s, "501 5.5.4 Syntax: MAIL FROM:<address>");
		return;
	}
	if (needs_auth(s)) {
		smtp_error(s, "530 5.7.0 Authentication required");
		return;
	}
	if (s->ntx >= s->m->lim.max_tx) {
		smtp_reply(s, "421 4.7.0 %s Too many transactions, closing", s->m->hostname);
		smtp_close(s);
		return;
	}
	if (mailaddr_parse_path(p, len, MAILADDR_ALLOW_NULL | MAILADDR_ALLOW_UTF8, &a, &used,
				&err) < 0) {
		smtp_error(s, "553 5.1.7 %s", err);
		return;
	}
	if ((rc = mailaddr_mail_params(p + used, len - used, &mp, &err)) < 0) {
		smtp_error(s, rc == MAILADDR_EUNKNOWN ? "555 5.5.4 %s" : "501 5.5.4 %s", err);
		return;
	}
	if ((a.flags & MAILADDR_F_UTF8) && !mp.smtputf8) {
		smtp_error(s, "553 5.6.7 Address needs SMTPUTF8");
		return;
	}
	if (mp.requiretls && !(s->flags & SF_TLS)) {
		smtp_error(s, "530 5.7.10 REQUIRETLS needs a TLS session");
		return;
	}
	if (mp.has_size && mp.size > s->m->lim.max_message_size) {
		smtp_error(s, "552 5.3.4 Message size exceeds fixed limit");
		return;
	}
	char from[MAILADDR_TEXT_MAX + 1];
	const char *refused;

	mailaddr_format(&a, from, sizeof(from));
	if ((refused = sender_refusal(s, &a, from)) != NULL) {
		smtp_error(s, "553 5.7.1 <%s>: Sender address rejected: %s", from, refused);
		return;
	}

	struct smtp_tx *tx = xcalloc(1, sizeof(*tx));
	tx->qid = log_new_id();
	tx->mp = mp;
	tx->started_ms = clock_wall_ms();
	tx->deadline = clock_mono_ms() + s->m->lim.max_tx_ms;
	mailaddr_format(&a, tx->from, sizeof(tx->from));
	buf_init(&tx->out, 0, DELIVER_BUF_MAX);
	s->tx = tx;
	s->ntx++;
	smtp_set_state(s, ST_MAIL);
	log_info("%016" PRIx64 " smtp mail qid=%016" PRIx64 " from=<%s> size=%" PRIu64, s->id,
		 tx->qid, tx->from, mp.size);
	if (mtad_auth_mail(s)) /* the reply waits for SPF */
		return;
	smtp_mail_accepted(s, false);
}

static void mail_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	if (refusal != NULL) {
		log_info("%016" PRIx64 " smtp mail qid=%016" PRIx64 " from=<%s> result=fail "
			 "reason=\"milter\"",
			 s->id, s->tx->qid, s->tx->from);
		smtp_tx_free(&s->tx);
		s->ntx--;
		smtp_set_state(s, ST_READY);
		milter_reply(s, refusal);
	} else {
		smtp_set_state(s, ST_MAIL);
		smtp_reply(s, "250 2.1.0 Ok");
	}
	if (resume)
		smtp_resume(s);
}

void smtp_mail_accepted(struct smtp_session *s, bool resume)
{
	milter_ask(s, MILTER_MAIL, NULL, false, mail_answer, resume);
}

struct smtp_rcpt *smtp_rcpt_add(struct smtp_tx *tx)
{
	if (tx->nrcpt == tx->rcpt_cap) {
		tx->rcpt_cap = tx->rcpt_cap ? tx->rcpt_cap * 2 : 4;
		tx->rcpt = xreallocarray(tx->rcpt, tx->rcpt_cap, sizeof(*tx->rcpt));
	}
	struct smtp_rcpt *r = &tx->rcpt[tx->nrcpt];
	memset(r, 0, sizeof(*r));
	return r;
}

static void rcpt_accepted(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;

	log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> local=%s result=ok", s->id,
		 tx->qid, tx->rcpt[tx->nrcpt].addr, tx->rcpt[tx->nrcpt].local ? "yes" : "no");
	tx->nrcpt++;
	if (tx->rcpt[tx->nrcpt - 1].local)
		tx->nlocal++;
	const struct smtp_rcpt *r = &tx->rcpt[tx->nrcpt - 1];

	smtp_rcpt_accepted(s, r->orig[0] ? r->orig : r->addr, tx->nrcpt - 1, false);
}

static void rcpt_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	struct smtp_tx *tx = s->tx;

	if (refusal != NULL) {
		/* nothing of the RCPT stays */
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> result=fail "
			 "reason=\"milter\"",
			 s->id, tx->qid, tx->rcpt_asked);
		for (size_t i = tx->rcpt_first; i < tx->nrcpt; i++)
			tx->nlocal -= tx->rcpt[i].local;
		tx->nrcpt = tx->rcpt_first;
		smtp_set_state(s, tx->nrcpt > 0 ? ST_RCPT : ST_MAIL);
		milter_reply(s, refusal);
	} else {
		tx->rcpt_accepted++;
		smtp_set_state(s, tx->nrcpt > 0 ? ST_RCPT : ST_MAIL);
		smtp_reply(s, "250 2.1.5 Ok");
	}
	if (resume)
		smtp_resume(s);
}

void smtp_rcpt_accepted(struct smtp_session *s, const char *addr, size_t first, bool resume)
{
	struct smtp_tx *tx = s->tx;

	tx->rcpt_first = first;
	str_lcpy(tx->rcpt_asked, addr, sizeof(tx->rcpt_asked));
	milter_ask(s, MILTER_RCPT, addr, first >= tx->nrcpt || tx->rcpt[first].local, rcpt_answer,
		   resume);
}

static void rcpt_refused_cb(struct smtp_session *s, const char *ignored, bool resume)
{
	smtp_set_state(s, s->tx->nrcpt > 0 ? ST_RCPT : ST_MAIL);
	smtp_error(s, "%s", s->tx->rcpt_refusal);
	smtp_resume(s);
}

void smtp_rcpt_refuse(struct smtp_session *s, const char *addr, bool resume, const char *fmt, ...)
{
	struct smtp_tx *tx = s->tx;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tx->rcpt_refusal, sizeof(tx->rcpt_refusal), fmt, ap);
	va_end(ap);
	if (milter_rcpt_refused(s, addr, tx->rcpt_refusal, rcpt_refused_cb))
		return;
	smtp_error(s, "%s", tx->rcpt_refusal);
	if (resume)
		smtp_resume(s);
}

static bool may_relay(const struct smtp_session *s)
{
	return !(s->flags & SF_LMTP) && (s->flags & (SF_AUTH | SF_TRUSTED | SF_LOCAL));
}

static void relay_refused(struct smtp_session *s, const char *addr, const char *why)
{
	log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> addr=%s result=fail "
		 "reason=\"%s\"",
		 s->id, s->tx->qid, addr, s->addr, why);
	smtp_rcpt_refuse(s, addr, false, "554 5.7.1 <%s>: Relay access denied", addr);
}

/* A RCPT to an SRS address of ours (a bounce of a forwarded copy): to the address it stands
   for once its hash and age check out, from anyone (it is where our forwarded mail's bounces
   go); a forged, damaged or expired one is no user. */
static void rcpt_srs(struct smtp_session *s, struct smtp_rcpt *r)
{
	const struct conf_list *locals = conf_values(s->m->conf)->mtad.local_domains;
	char orig[MAILADDR_TEXT_MAX + 1], key[MAILADDR_TEXT_MAX + 1];
	struct mailaddr a;
	const char *why = NULL;

	if (srs_reverse(s->m->srs, r->addr, clock_wall_s(), orig, sizeof(orig), &why) < 0 ||
	    mailaddr_parse(orig, strlen(orig), 0, &a, &why) < 0 || a.domain[0] == '\0' ||
	    mailaddr_tricks(&a) != 0) {
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> srs=yes result=fail "
			 "reason=\"%s\"",
			 s->id, s->tx->qid, r->addr, why != NULL ? why : "relay trick");
		smtp_rcpt_refuse(s, r->addr, false,
				 "550 5.1.1 <%s>: Recipient address rejected: User unknown",
				 r->addr);
		return;
	}
	log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> srs=yes orig_to=<%s>", s->id,
		 s->tx->qid, orig, r->addr);
	str_lcpy(r->orig, r->addr, sizeof(r->orig));
	mailaddr_format(&a, r->addr, sizeof(r->addr));
	rcpt_orcpt_orig(r);
	r->local = mailaddr_domain_in(&a, locals->v, locals->n);
	if (!r->local) {
		rcpt_accepted(s);
		return;
	}
	mailaddr_canonical(&a, key, sizeof(key));
	rcpt_resolve(s, key);
}

/* The relay policy for a parsed recipient: remote ones only for AUTH or trusted clients,
   no relay tricks from anyone else, local ones checked against the directory (async). */
static void rcpt_route(struct smtp_session *s, struct smtp_rcpt *r, const struct mailaddr *a)
{
	const struct conf_list *locals = conf_values(s->m->conf)->mtad.local_domains;
	unsigned tricks = mailaddr_tricks(a);
	char key[MAILADDR_TEXT_MAX + 1];

	if (!(s->flags & SF_LMTP) && tricks == 0 && rcpt_srs_ours(s->m, r->addr)) {
		rcpt_srs(s, r);
		return;
	}
	r->local = a->domain[0] == '\0' || mailaddr_domain_in(a, locals->v, locals->n);
	if (tricks != 0 && !may_relay(s)) {
		relay_refused(s, r->addr, "relay trick");
		return;
	}
	if (!r->local) {
		if (may_relay(s))
			rcpt_accepted(s);
		else
			relay_refused(s, r->addr, "relay denied");
		return;
	}
	if (tricks != 0) {
		smtp_rcpt_refuse(s, r->addr, false,
				 "550 5.1.1 <%s>: Recipient address rejected: User unknown",
				 r->addr);
		return;
	}
	if (a->domain[0] == '\0')
		snprintf(key, sizeof(key), "postmaster@%s",
			 locals->n ? locals->v[0] : "localhost");
	else
		mailaddr_canonical(a, key, sizeof(key));
	rcpt_resolve(s, key); /* aliases, postmaster, subaddress, directory (async) */
}

static void cmd_rcpt(struct smtp_session *s, const char *arg, size_t len)
{
	struct smtp_tx *tx = s->tx;
	struct mailaddr a;
	const char *err, *p = after_prefix(arg, &len, "TO:");
	size_t used;
	int rc;

	if (p == NULL) {
		smtp_error(s, "501 5.5.4 Syntax: RCPT TO:<address>");
		return;
	}
	if (++tx->rcpt_attempts > s->m->lim.reject_rcpt) {
		log_info("%016" PRIx64 " smtp tx qid=%016" PRIx64 " result=fail "
			 "reason=\"too many recipients\"",
			 s->id, tx->qid);
		smtp_tx_free(&s->tx);
		smtp_set_state(s, ST_READY);
		smtp_error(s, "554 5.5.3 Too many recipients, transaction refused");
		return;
	}
	if (tx->nrcpt >= s->m->lim.max_rcpt || tx->rcpt_accepted >= s->m->lim.max_rcpt) {
		smtp_reply(s, "452 4.5.3 Too many recipients");
		return;
	}
	const char *refused = sender_rcpt_refusal(s);
	if (refused != NULL) {
		smtp_error(s, "550 5.7.1 Recipient refused: %s", refused);
		return;
	}
	if (mailaddr_parse_path(p, len, tx->mp.smtputf8 ? MAILADDR_ALLOW_UTF8 : 0, &a, &used,
				&err) < 0) {
		smtp_error(s, "553 5.1.3 %s", err);
		return;
	}
	struct smtp_rcpt *r = smtp_rcpt_add(tx);
	if ((rc = mailaddr_rcpt_params(p + used, len - used, tx->mp.smtputf8, &r->params, &err)) <
	    0) {
		smtp_error(s, rc == MAILADDR_EUNKNOWN ? "555 5.5.4 %s" : "501 5.5.4 %s", err);
		return;
	}
	mailaddr_format(&a, r->addr, sizeof(r->addr));
	if (r->params.orcpt_type[0] != '\0') {
		/* kept as received (addr-type;xtext) for the relay and the DSN */
		size_t tl = strlen(r->params.orcpt_type);

		snprintf(r->orcpt_raw, sizeof(r->orcpt_raw), "%s;", r->params.orcpt_type);
		if (mailaddr_xtext_encode(r->params.orcpt, strlen(r->params.orcpt),
					  r->orcpt_raw + tl + 1,
					  sizeof(r->orcpt_raw) - tl - 1) < 0)
			r->orcpt_raw[0] = '\0';
	}
	rcpt_route(s, r, &a);
}

static void data_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	if (refusal != NULL) {
		smtp_tx_free(&s->tx);
		smtp_set_state(s, ST_READY);
		milter_reply(s, refusal);
	} else if (smtp_data_start(s) < 0) {
		smtp_set_state(s, ST_RCPT);
	} else {
		smtp_set_state(s, ST_DATA);
		smtp_reply(s, "354 End data with <CR><LF>.<CR><LF>");
	}
	if (resume)
		smtp_resume(s);
}

static void cmd_data(struct smtp_session *s, const char *arg, size_t len)
{
	if (s->tx->nrcpt == 0) {
		smtp_error(s, "554 5.5.1 No valid recipients");
		return;
	}
	milter_ask(s, MILTER_DATA, NULL, false, data_answer, false);
}

/* The first BDAT (its size and LAST in s->tx's chunk_left and chunk_last) once the milters
   answered: its chunk is read, or dropped when refused. */
static void bdat_answer(struct smtp_session *s, const char *refusal, bool resume)
{
	struct smtp_tx *tx = s->tx;
	uint64_t size = tx->chunk_left;

	if (refusal != NULL || smtp_data_start(s) < 0) {
		tx->chunk_left = 0;
		s->discard_left = size;
		if (refusal != NULL) {
			smtp_tx_free(&s->tx);
			smtp_set_state(s, ST_READY);
			milter_reply(s, refusal);
		} else {
			smtp_set_state(s, ST_RCPT);
		}
	} else {
		smtp_set_state(s, ST_BDAT);
		if (size == 0)
			smtp_bdat_feed(s, NULL);
	}
	if (resume)
		smtp_resume(s);
}

/* BDAT size [LAST] (RFC 3030). A refused BDAT still has its chunk read and dropped. */
static void cmd_bdat(struct smtp_session *s, const char *arg, size_t len)
{
	struct str_view rest = { arg, len }, f;
	uint64_t size;
	bool last = false;

	if (!str_split_ws(&rest, &f) || str_to_u64(f.p, f.len, UINT64_MAX / 2, &size) < 0) {
		smtp_error(s, "501 5.5.4 Syntax: BDAT size [LAST]");
		return;
	}
	if (str_split_ws(&rest, &f)) {
		if (!str_caseeq(f.p, f.len, "LAST", 4) || str_split_ws(&rest, &f)) {
			s->discard_left = size;
			smtp_error(s, "501 5.5.4 Syntax: BDAT size [LAST]");
			return;
		}
		last = true;
	}
	if (s->tx == NULL || (s->tx->nrcpt == 0)) {
		s->discard_left = size;
		smtp_error(s, s->tx == NULL ? "503 5.5.1 MAIL first"
					    : "554 5.5.1 No valid recipients");
		return;
	}
	s->tx->chunk_left = size;
	s->tx->chunk_last = last;
	if (s->state != ST_BDAT) {
		milter_ask(s, MILTER_DATA, NULL, false, bdat_answer, false);
		return;
	}
	if (size == 0)
		smtp_bdat_feed(s, NULL);
}

static void cmd_rset(struct smtp_session *s, const char *arg, size_t len)
{
	smtp_tx_free(&s->tx);
	if (s->state != ST_CONNECTED)
		smtp_set_state(s, ST_READY);
	smtp_reply(s, "250 2.0.0 Ok");
}

/* XUID N [KEY]: the maildrop pickup (pickup.c) names the owner of the file it submits, for
   the log and the Received: header, and the file's identity KEY: the message then goes whole
   to the queue, its entries and KEY's record in one commit (store_drop.c), so that the
   pickup never submits the file again. Only on a local submission session whose peer runs
   as mtad's own uid (the pickup itself), once, before MAIL; to anyone else it is no
   command. */
static void cmd_xuid(struct smtp_session *s, const char *arg, size_t len)
{
	const char *sp = memchr(arg, ' ', len);
	size_t ulen = sp != NULL ? (size_t)(sp - arg) : len;
	const char *key = sp != NULL ? sp + 1 : NULL;
	size_t klen = sp != NULL ? len - ulen - 1 : 0;
	uint64_t v;

	if (!(s->flags & SF_LOCAL) || s->peer_uid != (long)geteuid() || s->drop_key != NULL) {
		smtp_error(s, "500 5.5.2 Command unrecognized");
		return;
	}
	if (str_to_u64(arg, ulen, UINT32_MAX - 1, &v) < 0 ||
	    (key != NULL && (klen == 0 || klen > STORE_DROP_KEY_MAX))) {
		smtp_error(s, "501 5.5.4 Syntax: XUID uid [key]");
		return;
	}
	for (size_t i = 0; i < klen; i++) {
		if ((unsigned char)key[i] <= ' ' || key[i] == 0x7f) {
			smtp_error(s, "501 5.5.4 Syntax: XUID uid [key]");
			return;
		}
	}
	if (key != NULL)
		s->drop_key = xmemdup0(key, klen);
	log_info("%016" PRIx64 " smtp maildrop uid=%" PRIu64 "%s%.*s", s->id, v,
		 key != NULL ? " file=" : "", (int)klen, key != NULL ? key : "");
	s->peer_uid = (long)v;
	smtp_reply(s, "250 2.0.0 Ok");
}

/* XREFUSED ADDR TEXT: the maildrop pickup names a recipient this transaction refused
   with a 5xx (TEXT: the refusal without its code), for the DSN that the commit of the
   message and the file's record queues to the sender (deliver.c). Only after XUID with a
   key (the pickup's session); to anyone else it is no command. */
static void cmd_xrefused(struct smtp_session *s, const char *arg, size_t len)
{
	const char *sp = memchr(arg, ' ', len);
	size_t n = s->ndrop_refused;

	if (s->drop_key == NULL) {
		smtp_error(s, "500 5.5.2 Command unrecognized");
		return;
	}
	if (sp == NULL || sp == arg || (size_t)(sp - arg) > MAILADDR_TEXT_MAX ||
	    len - (size_t)(sp - arg) - 1 > 512) {
		smtp_error(s, "501 5.5.4 Syntax: XREFUSED address text");
		return;
	}
	if (n >= DROP_REFUSED_MAX) {
		smtp_error(s, "452 4.5.3 Too many refused recipients");
		return;
	}
	s->drop_refused = xreallocarray(s->drop_refused, 2 * (n + 1), sizeof(char *));
	s->drop_refused[2 * n] = xmemdup0(arg, (size_t)(sp - arg));
	s->drop_refused[2 * n + 1] = xmemdup0(sp + 1, len - (size_t)(sp - arg) - 1);
	s->ndrop_refused++;
	smtp_reply(s, "250 2.0.0 Ok");
}

void smtp_drop_refused_free(struct smtp_session *s)
{
	for (size_t i = 0; i < 2 * s->ndrop_refused; i++)
		free(s->drop_refused[i]);
	free(s->drop_refused);
	s->drop_refused = NULL;
	s->ndrop_refused = 0;
}

static void cmd_noop(struct smtp_session *s, const char *arg, size_t len)
{
	smtp_reply(s, "250 2.0.0 Ok");
}

static void cmd_quit(struct smtp_session *s, const char *arg, size_t len)
{
	smtp_reply(s, "221 2.0.0 Bye");
	smtp_close(s);
}

static void cmd_vrfy(struct smtp_session *s, const char *arg, size_t len)
{
	smtp_reply(s, "252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery");
}

static void cmd_help(struct smtp_session *s, const char *arg, size_t len)
{
	smtp_reply(s, "214 2.0.0 Heron mtad: see RFC 5321");
}

static void cmd_starttls(struct smtp_session *s, const char *arg, size_t len)
{
	if (s->m->tls == NULL || (s->flags & SF_TLS)) {
		smtp_error(s, "502 5.5.1 STARTTLS not available");
		return;
	}
	smtp_reply(s, "220 2.0.0 Ready to start TLS");
	smtp_starttls(s);
}

static void cmd_auth(struct smtp_session *s, const char *arg, size_t len)
{
	if (!auth_offered(s)) {
		smtp_error(
			s,
			(s->flags & SF_AUTH)
				? "503 5.5.1 Already authenticated"
				: "538 5.7.11 Encryption required for requested authentication mechanism");
		return;
	}
	smtp_cmd_auth(s, arg, len);
}

void smtp_tx_free(struct smtp_tx **txp)
{
	struct smtp_tx *tx = *txp;

	if (tx == NULL)
		return;
	milter_tx_free(tx);
	deliver_abort(tx);
	mtad_auth_tx_free(tx);
	buf_release(&tx->out);
	free(tx->rcpt);
	free(tx->srcpt);
	free(tx->qrcpt);
	free(tx->qrcpt_fwd);
	free(tx);
	*txp = NULL;
}

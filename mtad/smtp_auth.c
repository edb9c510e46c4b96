/* smtp_auth.c — owns AUTH PLAIN and LOGIN (RFC 4954, 4616) and SCRAM-SHA-256[-PLUS] (RFC 5802,
 * 7677: common/sasl_drive.h's exchange over ldapauth_scram's secret and the TLS session's channel
 * binding): the exchange, the decoding (the SASL decoder imapd uses too, common/sasl.h),
 * the check through ldapauth, and the login
 * throttle around it (common/authguard.h, shared with imapd): a check may be held or
 * refused before it starts, a failure's 535 is held, and a port 25 session that starts AUTH
 * counts as unauthenticated for max_unauth_connections_per_ip. Passwords are never logged
 * and are wiped after use. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/authguard.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/sasl.h"
#include "common/sasl_drive.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mtad/mtad.h"

#define AUTH_STEP_PLAIN 1
#define AUTH_STEP_USER 2
#define AUTH_STEP_PASS 3
#define AUTH_STEP_SCRAM 4 /* a SCRAM message is due (struct smtp_scram says which) */

struct smtp_scram {
	struct sasl_drive *x; /* the exchange (common/sasl_drive.h) */
	char *login;          /* the directory's name of the user, once the secret is found */
	bool charged;         /* the throttle counts this exchange: its outcome is due */
};

/* The client's address without its port, as imapd names it: the throttle's key. */
static void client_host(const struct smtp_session *s, char *host, size_t size)
{
	net_addr_host((const struct sockaddr *)&s->ss, host, size);
}

static void pass_wipe(struct smtp_session *s)
{
	if (s->auth_pass == NULL)
		return;
	explicit_bzero(s->auth_pass, strlen(s->auth_pass));
	free(s->auth_pass);
	s->auth_pass = NULL;
}

void smtp_unauth_put(struct smtp_session *s)
{
	pass_wipe(s);
	if (!(s->flags & SF_UNAUTH_COUNTED))
		return;
	s->flags &= ~SF_UNAUTH_COUNTED;
	net_ipcount_dec(s->m->unauth, (const struct sockaddr *)&s->ss);
}

/* A port 25 session that starts AUTH counts as unauthenticated from now on (submission
   sessions are counted from their accept); false when its address has too many. */
static bool unauth_take(struct smtp_session *s)
{
	if (s->kind != L_SMTP || (s->flags & SF_UNAUTH_COUNTED))
		return true;
	if (!net_ipcount_inc(s->m->unauth, (const struct sockaddr *)&s->ss,
			     s->m->lim.max_unauth_per_ip)) {
		log_info("%016" PRIx64 " smtp refuse addr=%s reason=\"too many unauthenticated "
			 "sessions from address\"",
			 s->id, s->addr);
		return false;
	}
	s->flags |= SF_UNAUTH_COUNTED;
	return true;
}

static void timer_set(struct smtp_session *s, int64_t ms, event_callback_fn fn)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	if (s->timer != NULL)
		event_free(s->timer);
	s->timer = evtimer_new(s->m->base, fn, s);
	evtimer_add(s->timer, &tv);
}

static void auth_reply_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_session *s = arg;

	smtp_set_state(s, ST_READY);
	if (!s->dead)
		smtp_error(s, "535 5.7.8 Authentication credentials invalid");
	smtp_resume(s);
}

/* A check's outcome (a password's or a SCRAM exchange's): the throttle learns it, the log says
   it, a failure's 535 is held. login: the directory's name (success); user: its record, for the
   sender addresses (NULL: already set). */
static void auth_outcome(struct smtp_session *s, enum ldapauth_result result, const char *reason,
			 const char *login, const struct ldapauth_user *user, bool nested)
{
	char host[NET_ADDRSTRLEN], name[65];
	bool failed = result != LDAPAUTH_OK && result != LDAPAUTH_ETEMP;
	int64_t hold = 0;

	client_host(s, host, sizeof(host));
	ldapauth_metrics_login(result);
	if (result == LDAPAUTH_OK)
		authguard_ok(s->m->guard, host, s->auth_login);
	else if (result == LDAPAUTH_ETEMP)
		authguard_temp(s->m->guard, host, s->auth_login);
	else
		hold = authguard_failed(s->m->guard, host, s->auth_login);
	str_log_name(name, sizeof(name), s->auth_login);
	log_info("%016" PRIx64 " smtp auth addr=%s user=%s result=%s failures=%" PRIu32
		 " delay_ms=%" PRId64 " user_failures=%" PRIu32 " addr_failures=%" PRIu32
		 " reason=\"%s\"",
		 s->id, s->addr, name, result == LDAPAUTH_OK ? "ok" : "fail",
		 failed ? s->auth_chk.pair + 1 : 0, hold, s->auth_chk.user + failed,
		 s->auth_chk.addr + failed, reason ? reason : ldapauth_strerror(result));
	if (result == LDAPAUTH_OK) {
		s->flags |= SF_AUTH;
		str_lcpy(s->user, login, sizeof(s->user));
		if (user != NULL)
			sender_own_set(s, user);
		smtp_unauth_put(s);
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "235 2.7.0 Authentication successful");
	} else if (result == LDAPAUTH_ETEMP) {
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "454 4.7.0 Temporary authentication failure");
	} else {
		/* the answer is held (the throttle says how long): no faster guessing here */
		smtp_set_state(s, ST_WAIT);
		timer_set(s, hold, auth_reply_cb);
		return;
	}
	if (!nested) /* called from the session's own input loop: it reads on by itself */
		smtp_resume(s);
}

static void auth_done(const struct ldapauth_reply *r, void *arg)
{
	struct smtp_session *s = arg;

	auth_outcome(s, r->result, r->reason, r->result == LDAPAUTH_OK ? r->user->login : NULL,
		     r->user, false);
}

static void scram_secret_done(const struct ldapauth_reply *r, void *arg);

/* The throttle's hold is over: the check starts. */
static void auth_held_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_session *s = arg;
	char host[NET_ADDRSTRLEN];

	if (s->dead) {
		client_host(s, host, sizeof(host));
		authguard_temp(s->m->guard, host, s->auth_login); /* never checked */
		if (s->scram != NULL)
			s->scram->charged = false; /* said just above */
		pass_wipe(s);
		smtp_resume(s);
		return;
	}
	if (s->scram != NULL) {
		ldapauth_scram(s->m->la, s->auth_login, scram_secret_done, s);
		return;
	}
	ldapauth_auth(s->m->la, s->auth_login, s->auth_pass, auth_done, s);
	pass_wipe(s);
}

static void auth_check(struct smtp_session *s, const char *user, const char *pass)
{
	char host[NET_ADDRSTRLEN];

	str_lcpy(s->auth_login, user, sizeof(s->auth_login));
	client_host(s, host, sizeof(host));
	authguard_begin(s->m->guard, s->id, "smtp", host, user, &s->auth_chk);
	if (s->auth_chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		smtp_reply(s, "454 4.7.0 Too many failed logins, try again later");
		return;
	}
	smtp_set_state(s, ST_WAIT);
	if (s->auth_chk.wait_ms > 0) {
		s->auth_pass = xstrdup(pass);
		timer_set(s, s->auth_chk.wait_ms, auth_held_cb);
		return;
	}
	ldapauth_auth(s->m->la, user, pass, auth_done, s);
}

/* PLAIN (common/sasl.h decides, as for imapd): [authzid] NUL authcid NUL passwd, the
   authzid empty or the same user. */
static void auth_plain(struct smtp_session *s, const char *b64, size_t len)
{
	struct sasl_plain p;

	switch (sasl_plain_decode(b64, len, &p)) {
	case SASL_OK:
		auth_check(s, p.authcid, p.passwd);
		sasl_plain_wipe(&p);
		return;
	case SASL_EBASE64:
		smtp_error(s, "501 5.5.2 Invalid base64 data");
		return;
	case SASL_EFORMAT:
	default: /* the SCRAM results: not from PLAIN */
		smtp_error(s, "501 5.5.2 Invalid PLAIN response");
		return;
	case SASL_EAUTHZ:
		smtp_error(s, "535 5.7.8 Cannot act as another user");
		return;
	}
}

/* ---- SCRAM-SHA-256[-PLUS] ---- */

static bool scram_offered(const struct smtp_session *s, bool plus)
{
	return ldapauth_scram_capable(s->m->la) && (!plus || (s->flags & SF_TLS));
}

const char *smtp_auth_mechs(const struct smtp_session *s)
{
	return scram_offered(s, true)    ? "PLAIN LOGIN SCRAM-SHA-256 SCRAM-SHA-256-PLUS"
	       : scram_offered(s, false) ? "PLAIN LOGIN SCRAM-SHA-256"
					 : "PLAIN LOGIN";
}

void smtp_scram_free(struct smtp_session *s)
{
	struct smtp_scram *x = s->scram;
	char host[NET_ADDRSTRLEN];

	if (x == NULL)
		return;
	if (x->charged) { /* given up before the outcome: not a failure */
		client_host(s, host, sizeof(host));
		authguard_temp(s->m->guard, host, s->auth_login);
	}
	sasl_drive_free(&x->x);
	free(x->login);
	free(x);
	s->scram = NULL;
}

/* The exchange ended (the outcome is said by auth_outcome or the caller's reply). */
static void scram_end(struct smtp_session *s)
{
	s->scram->charged = false;
	smtp_scram_free(s);
}

static void scram_step(struct smtp_session *s, const struct sasl_step *st, bool nested);

/* The secret (or its absence) is known: server-first goes out. */
static void scram_secret_done(const struct ldapauth_reply *r, void *arg)
{
	struct smtp_session *s = arg;
	struct smtp_scram *x = s->scram;
	struct sasl_step st;

	if (s->dead) {
		smtp_scram_free(s); /* the throttle hears "temporary" */
		smtp_resume(s);
		return;
	}
	if (r->result == LDAPAUTH_ETEMP) {
		scram_end(s);
		auth_outcome(s, LDAPAUTH_ETEMP, r->reason, NULL, NULL, false);
		return;
	}
	if (r->result == LDAPAUTH_OK) {
		x->login = xstrdup(r->user->login);
		sender_own_set(s, r->user); /* used only once SF_AUTH is set */
	}
	sasl_drive_secret(x->x, r->result == LDAPAUTH_OK, r->scram, r->reason, &st);
	smtp_set_state(s, ST_READY);
	scram_step(s, &st, false);
}

/* client-first was taken: the throttle begins with its user, then the secret is fetched. */
static void scram_begin(struct smtp_session *s)
{
	struct smtp_scram *x = s->scram;
	char host[NET_ADDRSTRLEN];

	str_lcpy(s->auth_login, sasl_drive_user(x->x), sizeof(s->auth_login));
	client_host(s, host, sizeof(host));
	authguard_begin(s->m->guard, s->id, "smtp", host, s->auth_login, &s->auth_chk);
	if (s->auth_chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		smtp_scram_free(s);
		smtp_reply(s, "454 4.7.0 Too many failed logins, try again later");
		return;
	}
	x->charged = true;
	smtp_set_state(s, ST_WAIT);
	if (s->auth_chk.wait_ms > 0) {
		timer_set(s, s->auth_chk.wait_ms, auth_held_cb);
		return;
	}
	ldapauth_scram(s->m->la, s->auth_login, scram_secret_done, s);
}

/* What the driver said to do next. nested: called from the session's input loop (a line
   or the AUTH command), not from a directory callback. */
static void scram_step(struct smtp_session *s, const struct sasl_step *st, bool nested)
{
	struct smtp_scram *x = s->scram;
	char *login;

	switch (st->act) {
	case SASL_DO_SEND:
		s->auth_step = AUTH_STEP_SCRAM;
		smtp_reply(s, "334 %s", st->out);
		if (!nested)
			smtp_resume(s);
		return;
	case SASL_DO_SECRET:
		scram_begin(s);
		return;
	case SASL_DO_OK:
		login = x->login != NULL ? xstrdup(x->login) : NULL;
		scram_end(s);
		auth_outcome(s, LDAPAUTH_OK, st->reason, login, NULL, nested);
		free(login);
		return;
	case SASL_DO_CANCEL:
		smtp_scram_free(s);
		smtp_error(s, "501 5.7.0 Authentication canceled");
		return;
	case SASL_DO_FAIL:
		break;
	}
	switch (st->fail) {
	case SASL_FAIL_SYNTAX:
	case SASL_FAIL_FIRST:
		log_info("%016" PRIx64 " smtp auth addr=%s mech=scram result=fail reason=\"%s\"",
			 s->id, s->addr, st->reason);
		smtp_scram_free(s);
		smtp_error(s, st->rc == SASL_EBASE64
				      ? "501 5.5.2 Invalid base64 data"
				      : "535 5.7.8 Authentication credentials invalid");
		return;
	case SASL_FAIL_AUTHZ:
		smtp_scram_free(s);
		smtp_error(s, "535 5.7.8 Cannot act as another user");
		return;
	case SASL_FAIL_CRED:
		break;
	}
	scram_end(s);
	sender_own_set(s, NULL);
	auth_outcome(s, LDAPAUTH_EBADCRED, st->reason, NULL, NULL, nested);
}

static void scram_start(struct smtp_session *s, bool plus, struct str_view init)
{
	struct sasl_step st;

	if (!scram_offered(s, plus)) {
		smtp_error(s,
			   plus && !(s->flags & SF_TLS)
				   ? "538 5.7.11 Encryption required for requested authentication "
				     "mechanism"
				   : "504 5.5.4 Unrecognized authentication type");
		return;
	}
	s->scram = xcalloc(1, sizeof(*s->scram));
	s->scram->x = sasl_drive_new(plus, scram_offered(s, true), false);
	sasl_drive_start(s->scram->x, init.p, init.len, &st);
	scram_step(s, &st, true);
}

void smtp_cmd_auth(struct smtp_session *s, const char *arg, size_t len)
{
	struct str_view rest = { arg, len }, mech, init = { NULL, 0 };

	str_split_ws(&rest, &mech);
	if (str_split_ws(&rest, &init) && str_split_ws(&rest, &mech)) {
		smtp_error(s, "501 5.5.4 Syntax: AUTH mechanism [initial-response]");
		return;
	}
	bool has_init = init.p != NULL && !(init.len == 1 && init.p[0] == '=');
	if (!unauth_take(s)) {
		smtp_reply(s, "454 4.7.0 Too many unauthenticated sessions from your address");
		return;
	}
	if (str_caseeq(mech.p, mech.len, "PLAIN", 5)) {
		if (has_init) {
			auth_plain(s, init.p, init.len);
			return;
		}
		if (init.p != NULL) {
			auth_plain(s, "", 0);
			return;
		}
		s->auth_step = AUTH_STEP_PLAIN;
		smtp_reply(s, "334 ");
	} else if (str_caseeq(mech.p, mech.len, "SCRAM-SHA-256", 13) ||
		   str_caseeq(mech.p, mech.len, "SCRAM-SHA-256-PLUS", 18)) {
		scram_start(s, mech.len == 18, init);
	} else if (str_caseeq(mech.p, mech.len, "LOGIN", 5)) {
		if (has_init) {
			s->auth_step = AUTH_STEP_USER;
			smtp_auth_line(s, init.p, init.len);
			return;
		}
		s->auth_step = AUTH_STEP_USER;
		smtp_reply(s, "334 VXNlcm5hbWU6");
	} else {
		smtp_error(s, "504 5.5.4 Unrecognized authentication type");
	}
}

void smtp_auth_line(struct smtp_session *s, const char *line, size_t len)
{
	int step = s->auth_step;
	unsigned char raw[LDAPAUTH_PASSWORD_MAX + 1];
	size_t n;

	s->auth_step = 0;
	if (step == AUTH_STEP_SCRAM) {
		struct sasl_step st;

		sasl_drive_response(s->scram->x, s->bev, line, len, &st);
		scram_step(s, &st, true);
		return;
	}
	if (len == 1 && line[0] == '*') {
		smtp_error(s, "501 5.7.0 Authentication canceled");
		return;
	}
	if (step == AUTH_STEP_PLAIN) {
		auth_plain(s, line, len);
		return;
	}
	if (sasl_b64_decode(line, len, raw, sizeof(raw), &n) != SASL_OK ||
	    memchr(raw, '\0', n) != NULL) {
		smtp_error(s, "501 5.5.2 Invalid base64 data");
		return;
	}
	if (step == AUTH_STEP_USER) {
		str_lcpy(s->auth_login, (const char *)raw, sizeof(s->auth_login));
		s->auth_step = AUTH_STEP_PASS;
		smtp_reply(s, "334 UGFzc3dvcmQ6");
		return;
	}
	char user[sizeof(s->auth_login)];
	str_lcpy(user, s->auth_login, sizeof(user));
	auth_check(s, user, (const char *)raw);
	explicit_bzero(raw, sizeof(raw));
}

/* smtp_auth.c — owns AUTH PLAIN and LOGIN (RFC 4954, 4616): the exchange, base64, the check
 * through ldapauth, and the penalty for failures: each failure from a client address waits
 * longer before its 535 (doubling, capped), counted per address across the sessions of
 * every worker (the master's shared table, common/shmtable.h); forgotten 15 minutes after
 * the last failure. Passwords are never logged and are wiped after use. */
#include <inttypes.h>
#include <string.h>

#include "common/log.h"
#include "common/sasl.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "ldapauth/ldapauth.h"
#include "mtad/mtad.h"

#define AUTH_STEP_PLAIN 1
#define AUTH_STEP_USER 2
#define AUTH_STEP_PASS 3

#define PENALTY_BASE_MS 500
#define PENALTY_MAX_MS 8000

/* The client's address without its port: failures count per address. */
static void client_host(const struct smtp_session *s, char *host, size_t size)
{
	const char *colon = strrchr(s->addr, ':');
	size_t n = colon ? (size_t)(colon - s->addr) : strlen(s->addr);

	n = n < size - 1 ? n : size - 1;
	memcpy(host, s->addr, n);
	host[n] = '\0';
}

static void auth_reply_cb(evutil_socket_t fd, short what, void *arg)
{
	struct smtp_session *s = arg;

	smtp_set_state(s, ST_READY);
	if (!s->dead)
		smtp_error(s, "535 5.7.8 Authentication credentials invalid");
	smtp_resume(s);
}

static void auth_done(const struct ldapauth_reply *r, void *arg)
{
	struct smtp_session *s = arg;
	char host[64];
	uint32_t fails = 0;

	client_host(s, host, sizeof(host));
	if (r->result != LDAPAUTH_OK && r->result != LDAPAUTH_ETEMP)
		fails = shmtable_fail(s->m->shared, SHM_AUTH_FAILS, host) + 1;
	log_info("%016" PRIx64 " smtp auth addr=%s user=%s result=%s failures=%" PRIu32
		 " reason=\"%s\"", s->id, s->addr, s->auth_login,
		 r->result == LDAPAUTH_OK ? "ok" : "fail", fails,
		 r->reason ? r->reason : ldapauth_strerror(r->result));
	if (r->result == LDAPAUTH_OK) {
		s->flags |= SF_AUTH;
		str_lcpy(s->user, r->user->login, sizeof(s->user));
		shmtable_fail_clear(s->m->shared, SHM_AUTH_FAILS, host);
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "235 2.7.0 Authentication successful");
	} else if (r->result == LDAPAUTH_ETEMP) {
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "454 4.7.0 Temporary authentication failure");
	} else {
		/* delay the answer: doubling per failure from this address (in any worker),
		   capped */
		int64_t ms = PENALTY_BASE_MS << (fails - 1 < 5 ? fails - 1 : 5);
		struct timeval tv;

		ms = ms > PENALTY_MAX_MS ? PENALTY_MAX_MS : ms;
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		if (s->timer != NULL)
			event_free(s->timer);
		s->timer = evtimer_new(s->m->base, auth_reply_cb, s);
		evtimer_add(s->timer, &tv);
		return;
	}
	smtp_resume(s);
}

static void auth_check(struct smtp_session *s, const char *user, const char *pass)
{
	str_lcpy(s->auth_login, user, sizeof(s->auth_login));
	smtp_set_state(s, ST_WAIT);
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
		smtp_error(s, "501 5.5.2 Invalid PLAIN response");
		return;
	case SASL_EAUTHZ:
		smtp_error(s, "535 5.7.8 Cannot act as another user");
		return;
	}
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

/* sasl_drive.c — owns the steps of a server's SCRAM exchange (sasl_drive.h): which message is
 * due, the initial response and the abort, the channel binding of the TLS session, and the
 * failure each result maps to. The messages themselves are sasl_scram.c's. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/sasl.h"
#include "common/sasl_drive.h"
#include "common/xmalloc.h"

enum drive_state { D_FIRST, D_SECRET, D_FINAL, D_ACK, D_DONE };

struct sasl_drive {
	struct sasl_scram *x;
	enum drive_state state;
	bool final_with_ok;
	bool found;      /* the directory gave the user's secret */
	const char *why; /* the directory's reason there was none (a constant) */
};

static void step_set(struct sasl_step *st, enum sasl_do act, const char *out)
{
	st->act = act;
	st->fail = SASL_FAIL_CRED;
	st->rc = SASL_OK;
	st->reason = NULL;
	if (out != NULL)
		memcpy(st->out, out,
		       strlen(out) + 1); /* callers give SASL_SCRAM_OUT_MAX at most */
	else
		st->out[0] = '\0';
}

static void step_fail(struct sasl_drive *d, struct sasl_step *st, enum sasl_fail fail,
		      enum sasl_result rc, const char *reason)
{
	step_set(st, SASL_DO_FAIL, NULL);
	st->fail = fail;
	st->rc = rc;
	st->reason = reason;
	d->state = D_DONE;
}

struct sasl_drive *sasl_drive_new(bool plus, bool plus_offered, bool final_with_ok)
{
	struct sasl_drive *d = xcalloc(1, sizeof(*d));

	d->x = sasl_scram_new(plus, plus_offered);
	d->final_with_ok = final_with_ok;
	return d;
}

void sasl_drive_free(struct sasl_drive **dp)
{
	if (*dp == NULL)
		return;
	sasl_scram_free(&(*dp)->x);
	free(*dp);
	*dp = NULL;
}

const char *sasl_drive_user(const struct sasl_drive *d)
{
	return sasl_scram_user(d->x);
}

static void drive_first(struct sasl_drive *d, const char *b64, size_t len, struct sasl_step *st)
{
	enum sasl_result rc = sasl_scram_client_first(d->x, b64, len);
	const char *authz;

	if (rc != SASL_OK) {
		step_fail(d, st, rc == SASL_EBASE64 ? SASL_FAIL_SYNTAX : SASL_FAIL_FIRST, rc,
			  sasl_strerror(rc));
		return;
	}
	authz = sasl_scram_authzid(d->x);
	if (authz[0] != '\0' && strcmp(authz, sasl_scram_user(d->x)) != 0) {
		step_fail(d, st, SASL_FAIL_AUTHZ, SASL_EAUTHZ, sasl_strerror(SASL_EAUTHZ));
		return;
	}
	d->state = D_SECRET;
	step_set(st, SASL_DO_SECRET, NULL);
}

void sasl_drive_start(struct sasl_drive *d, const char *ir, size_t len, struct sasl_step *st)
{
	if (ir == NULL) {
		step_set(st, SASL_DO_SEND, "");
		return;
	}
	if (len == 1 && ir[0] == '=')
		len = 0;
	sasl_drive_response(d, NULL, ir, len, st); /* "*" cancels here too */
}

void sasl_drive_secret(struct sasl_drive *d, bool found, const char *secret, const char *why,
		       struct sasl_step *st)
{
	if (d->state != D_SECRET) {
		step_fail(d, st, SASL_FAIL_CRED, SASL_ESTATE, sasl_strerror(SASL_ESTATE));
		return;
	}
	d->found = found;
	d->why = found ? NULL : why;
	step_set(st, SASL_DO_SEND, NULL);
	if (sasl_scram_server_first(d->x, found ? secret : NULL, NULL, st->out, sizeof(st->out)) !=
	    SASL_OK) {
		step_fail(d, st, SASL_FAIL_CRED, SASL_ESCRAM, "scram: server-first too long");
		return;
	}
	d->state = D_FINAL;
}

/* client-final, checked against this connection's binding data: server-final goes out as a
   challenge or with the success. */
static void drive_final(struct sasl_drive *d, struct bufferevent *bev, const char *b64, size_t len,
			struct sasl_step *st)
{
	enum sasl_result rc;

	step_set(st, SASL_DO_SEND, NULL);
	rc = sasl_scram_client_final_tls(d->x, bev, b64, len, st->out, sizeof(st->out));
	if (rc != SASL_OK || !d->found) {
		step_fail(d, st, SASL_FAIL_CRED, rc == SASL_OK ? SASL_EPROOF : rc,
			  d->why != NULL && (rc == SASL_EPROOF || rc == SASL_OK)
				  ? d->why
				  : sasl_strerror(rc == SASL_OK ? SASL_EPROOF : rc));
		return;
	}
	if (d->final_with_ok) {
		st->act = SASL_DO_OK;
		st->reason = "scram";
		d->state = D_DONE;
		return;
	}
	d->state = D_ACK;
}

void sasl_drive_response(struct sasl_drive *d, struct bufferevent *bev, const char *line,
			 size_t len, struct sasl_step *st)
{
	if (len == 1 && line[0] == '*') {
		step_set(st, SASL_DO_CANCEL, NULL);
		d->state = D_DONE;
		return;
	}
	switch (d->state) {
	case D_FIRST:
		drive_first(d, line, len, st);
		return;
	case D_FINAL:
		drive_final(d, bev, line, len, st);
		return;
	case D_ACK: /* the client checked v=; its answer is empty */
		if (len != 0) {
			step_fail(d, st, SASL_FAIL_CRED, SASL_ESCRAM,
				  "scram: data after server-final");
			return;
		}
		step_set(st, SASL_DO_OK, NULL);
		st->reason = "scram";
		d->state = D_DONE;
		return;
	case D_SECRET:
	case D_DONE:
		break;
	}
	step_fail(d, st, SASL_FAIL_SYNTAX, SASL_ESTATE, sasl_strerror(SASL_ESTATE));
}

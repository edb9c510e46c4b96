/* cmd_auth.c — owns the commands of any state and of login: CAPABILITY, NOOP/CHECK, LOGOUT,
 * ID, ENABLE, STARTTLS, LOGIN and AUTHENTICATE PLAIN (with SASL-IR) through ldapauth, and
 * AUTHENTICATE SCRAM-SHA-256[-PLUS] (common/sasl_drive.h's exchange over the secret
 * ldapauth_scram gives, bound to the TLS session). After a
 * successful authentication the user's store record is found (or created with its INBOX).
 * Each check goes through the login throttle mtad shares (common/authguard.h): it may be
 * held before it starts or refused (NO [UNAVAILABLE]), and a failure is answered late: the
 * tagged NO waits on a timer (the worker goes on serving others, the session reads no
 * further command). The sessions of one user are counted in the workers' table
 * (max_connections_per_user holds over all workers). The log names the user tried
 * (sanitized), never the password. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/authguard.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/net.h"
#include "common/proxy.h"
#include "common/sasl.h"
#include "common/sasl_drive.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/version.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"

/* The state of LOGIN/AUTHENTICATE while the directory answers. */
struct user_setup {
	const char *name;
	uint64_t id;
	uint64_t quota;
};

struct auth_ctx {
	struct ldapauth_req *req;
	bool waiting_line; /* AUTHENTICATE: "+ " sent, the response line is due */
	bool done;
	enum ldapauth_result result;
	char *login;        /* as the directory names the user */
	char *mailhost;     /* the user's home host when the directory names one */
	char *address;      /* the user's primary address (the proxy login's authzid) */
	bool proxied_in;    /* a front's proxy login (never proxied on again) */
	bool external;      /* AUTHENTICATE EXTERNAL: its response is due or was taken */
	bool proxy_started; /* front: the login at the store host is running */
	int partition;
	uint64_t quota;           /* bytes, from the directory; 0: none */
	char tried[65];           /* the user name given, sanitized for the log */
	char *user;               /* the user name given (the throttle's key) */
	char *pass;               /* held while the throttle delays the check */
	struct sasl_drive *scram; /* SCRAM: the exchange (common/sasl_drive.h) */
	struct authguard_check chk;
	bool charged;        /* the throttle counts this check: its outcome is due */
	bool throttled;      /* refused by the throttle: no check made */
	struct event *held;  /* the throttle's delay before the check */
	struct event *delay; /* holds the NO of a failure */
	/* the user's store record being made or fixed in the group commit (first login) */
	struct user_setup setup;
	unsigned part;
	bool creating, created;
	int create_rc;
};

/* The key of user in the shared table (long names hashed). */
static const char *user_key(const char *user, char out[NET_SHM_KEY_MAX])
{
	return shmtable_key(user, out, NET_SHM_KEY_MAX);
}

/* One more session of user, over all workers: false at max_connections_per_user. */
static bool user_take(struct imap_client *c, const char *user)
{
	char key[NET_SHM_KEY_MAX];

	c->user_counted = shmtable_take(c->srv->shared, SHM_USER_SESSIONS, user_key(user, key),
					c->srv->worker, c->srv->max_per_user);
	return c->user_counted;
}

void imap_user_put(struct imap_client *c)
{
	char key[NET_SHM_KEY_MAX];

	if (!c->user_counted)
		return;
	c->user_counted = false;
	shmtable_put(c->srv->shared, SHM_USER_SESSIONS, user_key(c->user, key), c->srv->worker);
}

/* The user name for the log (sanitized, capped). */
static void tried_set(struct auth_ctx *a, const char *user)
{
	str_log_name(a->tried, sizeof(a->tried), user);
}

static void auth_ctx_free(struct imap_cmd *cmd)
{
	struct auth_ctx *a = cmd->ctx;

	if (a == NULL)
		return;
	ldapauth_cancel(&a->req);
	free(a->mailhost);
	free(a->address);
	if (a->charged) /* the client left before the outcome: not a failure */
		authguard_temp(cmd->c->srv->guard, cmd->c->addr, a->user);
	if (a->delay != NULL)
		event_free(a->delay);
	if (a->held != NULL)
		event_free(a->held);
	if (a->pass != NULL) {
		explicit_bzero(a->pass, strlen(a->pass));
		free(a->pass);
	}
	sasl_drive_free(&a->scram);
	free(a->user);
	free(a->login);
	free(a);
	cmd->ctx = NULL;
	cmd->c->flags &= ~IMAP_CF_SASL;
}

bool cmd_capability(struct imap_cmd *cmd)
{
	struct buf caps;

	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "CAPABILITY takes no arguments");
	buf_init(&caps, 256, IMAP_CAPS_MAX);
	imap_capability(cmd->c, &caps);
	imap_printf(cmd->c, "* CAPABILITY %s\r\n", buf_cstr(&caps));
	buf_release(&caps);
	return imap_cmd_ok(cmd, "Capability completed");
}

bool cmd_noop(struct imap_cmd *cmd)
{
	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "No arguments expected");
	return imap_cmd_ok(cmd, "Completed");
}

bool cmd_logout(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "LOGOUT takes no arguments");
	imap_printf(c, "* BYE Logging out\r\n");
	imap_client_set_state(c, IMAP_ST_LOGOUT);
	imap_cmd_ok(cmd, "Logout completed");
	imap_client_close(c, "logout");
	return true;
}

bool cmd_id(struct imap_cmd *cmd)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);

	if (a == NULL || imap_cmd_arg(cmd, 1) != NULL ||
	    (a->type != IMAP_ARG_LIST && !imap_arg_is_nil(a)))
		return imap_cmd_bad(cmd, "Expected: ID (params) or ID NIL");
	if (a->type == IMAP_ARG_LIST)
		imap_proxy_id(cmd->c, a);
	imap_printf(cmd->c,
		    "* ID (\"name\" \"Heron\" \"vendor\" \"Heron\" \"version\" \"%s\")\r\n",
		    heron_version);
	return imap_cmd_ok(cmd, "ID completed");
}

bool cmd_enable(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool condstore = false;

	if (cmd->nargs == 0)
		return imap_cmd_bad(cmd, "Expected: ENABLE capability...");
	for (const struct imap_arg *a = cmd->args; a < cmd->args + cmd->nargs; a++)
		if (a->type != IMAP_ARG_ATOM)
			return imap_cmd_bad(cmd, "Capabilities are atoms");
	/* only what is implemented is enabled (RFC 5161); the others are ignored */
	imap_printf(c, "* ENABLED");
	for (const struct imap_arg *a = cmd->args; a < cmd->args + cmd->nargs; a++)
		if (imap_arg_atom_is(a, "CONDSTORE") && !c->enabled_condstore && !condstore) {
			condstore = true;
			imap_printf(c, " CONDSTORE");
		} else if (imap_arg_atom_is(a, "IMAP4rev2") && !c->rev2) {
			c->rev2 = c->utf8 = true;
			imap_printf(c, " IMAP4rev2");
		} else if (imap_arg_atom_is(a, "UTF8=ACCEPT") && !c->enabled_utf8) {
			c->enabled_utf8 = c->utf8 = true;
			imap_printf(c, " UTF8=ACCEPT");
		} else if (imap_arg_atom_is(a, "QRESYNC") && !c->enabled_qresync) {
			/* QRESYNC implies CONDSTORE (RFC 7162 3.2.3) */
			c->enabled_qresync = condstore = true;
			imap_printf(c, " QRESYNC");
		}
	imap_printf(c, "\r\n");
	if (condstore)
		imap_view_enable_condstore(c);
	return imap_cmd_ok(cmd, "Enabled");
}

/* UNAUTHENTICATE (RFC 8437): back to the state after the greeting, TLS and COMPRESS kept: the
   mailbox closed without expunging, NOTIFY's registration dropped, the user's session given
   back, everything ENABLEd off, the address a front's ID named forgotten (the next session's
   ID names its own client), and a new login_timeout from now (imap_client_set_state). A front
   parks the connection after it for another user's login (imap_proxy.c): nothing of this
   session may reach that one. On a front's connection only a proxy login may follow (the
   front's own; its client, had the front relayed its UNAUTHENTICATE, could otherwise name
   any address in an ID and try passwords under it). The connection is not counted again
   among the address's unauthenticated ones: it logged in once, and login_timeout bounds
   it. */
bool cmd_unauthenticate(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "UNAUTHENTICATE takes no arguments");
	log_info("%016" PRIx64 " imap unauthenticate user=%s", c->id, c->user);
	imap_view_close(c);
	imap_notify_free(c);
	imap_user_put(c);
	free(c->user);
	c->user = NULL;
	c->user_id = 0;
	c->part = 0;
	c->nbad = 0;
	c->enabled_condstore = c->enabled_qresync = false;
	c->rev2 = c->enabled_utf8 = c->utf8 = false;
	if (c->id_originated) { /* the connection's own peer again */
		net_addr_host((const struct sockaddr *)&c->sa, c->addr, sizeof(c->addr));
		c->id_originated = false;
	}
	free(c->id_fwd);
	c->id_fwd = NULL;
	c->front_unauth = c->front_unauth || imap_proxy_from_front(c);
	imap_client_set_state(c, IMAP_ST_NOTAUTH);
	return imap_cmd_ok(cmd, "Unauthenticated");
}

/* COMPRESS DEFLATE (RFC 4978): the OK is the last uncompressed byte. */
bool cmd_compress(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *alg = imap_cmd_arg(cmd, 0);

	if (alg == NULL || imap_cmd_arg(cmd, 1) != NULL || !imap_arg_atom_is(alg, "DEFLATE"))
		return imap_cmd_bad(cmd, "Expected: COMPRESS DEFLATE");
	if (c->flags & IMAP_CF_COMPRESS)
		return imap_cmd_no(cmd, "[COMPRESSIONACTIVE] DEFLATE is already active");
	imap_cmd_ok(cmd, "DEFLATE active");
	if (imap_compress_start(c) < 0)
		imap_client_close(c, "compression failed to start"); /* the OK was said */
	return true;
}

bool cmd_starttls(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "STARTTLS takes no arguments");
	if (c->flags & IMAP_CF_TLS)
		return imap_cmd_bad(cmd, "TLS is active already");
	if (c->srv->tls_ctx == NULL)
		return imap_cmd_no(cmd, "TLS is not available");
	imap_cmd_ok(cmd, "Begin TLS negotiation now");
	if (imap_client_starttls(c) < 0)
		imap_client_close(c, "STARTTLS failed");
	else if (imap_proxy_from_front(c))
		proxy_fronts_ask_cert(c->bev); /* a front may log in by its certificate */
	return true;
}

static bool plaintext_refused(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	return !(c->flags & IMAP_CF_TLS) && !c->srv->allow_plaintext && !imap_proxy_from_front(c);
}

static void auth_delay_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;

	(void)fd;
	(void)what;
	a->done = true;
	imap_client_resume(c);
}

/* What the session keeps of the directory's user (the callback's strings go away). */
static void auth_take_user(struct auth_ctx *a, const struct ldapauth_user *u)
{
	a->login = xstrdup(u->login);
	if (u->mailhost != NULL && u->mailhost[0] != '\0')
		a->mailhost = xstrdup(u->mailhost);
	if (u->address != NULL)
		a->address = xstrdup(u->address);
	a->partition = u->partition;
	a->quota = u->quota;
}

/* Store host: the user a front's proxy login names (its authzid), looked up by address. */
static void proxy_lookup_done(const struct ldapauth_reply *r, void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;

	a->req = NULL;
	a->result = r->result == LDAPAUTH_ENOUSER ? LDAPAUTH_EBADCRED : r->result;
	if (r->result == LDAPAUTH_OK)
		auth_take_user(a, r->user);
	log_info("%016" PRIx64 " imap login addr=%s user=%s via=proxy result=%s reason=\"%s\" "
		 "credential=%s",
		 c->id, c->addr, r->result == LDAPAUTH_OK ? r->user->login : a->tried,
		 ldapauth_strerror(r->result), r->reason != NULL ? r->reason : "",
		 a->external ? "certificate" : "secret");
	a->done = true;
	imap_client_resume(c);
}

/* A check's outcome (a password's or a SCRAM exchange's): the throttle learns it, the log
   says it, a failure's NO waits for the throttle's delay. a->login is set on success. */
static void auth_outcome(struct imap_client *c, struct auth_ctx *a, enum ldapauth_result result,
			 bool cached, const char *reason)
{
	bool failed = result != LDAPAUTH_OK && result != LDAPAUTH_ETEMP;
	int64_t ms = 0;

	a->result = result;
	a->charged = false;
	ldapauth_metrics_login(result);
	if (result == LDAPAUTH_OK)
		authguard_ok(c->srv->guard, c->addr, a->user);
	else if (result == LDAPAUTH_ETEMP)
		authguard_temp(c->srv->guard, c->addr, a->user);
	else
		ms = authguard_failed(c->srv->guard, c->addr, a->user);
	log_info("%016" PRIx64 " imap login addr=%s user=%s mech=%s result=%s cached=%s "
		 "failures=%" PRIu32 " delay_ms=%" PRId64 " user_failures=%" PRIu32
		 " addr_failures=%" PRIu32 " reason=\"%s\"",
		 c->id, c->addr, result == LDAPAUTH_OK ? a->login : a->tried,
		 a->scram != NULL ? "scram" : "password", ldapauth_strerror(result),
		 cached ? "yes" : "no", failed ? a->chk.pair + 1 : 0, ms, a->chk.user + failed,
		 a->chk.addr + failed, reason != NULL ? reason : "");
	if (ms > 0) {
		struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

		a->delay = evtimer_new(c->srv->base, auth_delay_cb, c);
		evtimer_add(a->delay, &tv);
		return;
	}
	a->done = true;
	imap_client_resume(c);
}

static void auth_done(const struct ldapauth_reply *r, void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;

	a->req = NULL;
	if (r->result == LDAPAUTH_OK)
		auth_take_user(a, r->user);
	auth_outcome(c, a, r->result, r->cached, r->reason);
}

static void scram_secret_done(const struct ldapauth_reply *r, void *arg);

/* The throttle's delay is over: the check starts. */
static void auth_held_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;

	(void)fd;
	(void)what;
	if (a->scram != NULL) {
		a->req = ldapauth_scram(c->srv->auth, a->user, scram_secret_done, c);
		return;
	}
	a->req = ldapauth_auth(c->srv->auth, a->user, a->pass, auth_done, c);
	explicit_bzero(a->pass, strlen(a->pass));
	free(a->pass);
	a->pass = NULL;
}

static void auth_start(struct imap_cmd *cmd, const char *user, const char *pass)
{
	struct imap_client *c = cmd->c;
	struct auth_ctx *a = cmd->ctx;

	tried_set(a, user);
	a->user = xstrdup(user);
	authguard_begin(c->srv->guard, c->id, "imap", c->addr, user, &a->chk);
	if (a->chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		a->throttled = a->done = true;
		imap_client_resume(c);
		return;
	}
	a->charged = true;
	if (a->chk.wait_ms > 0) {
		struct timeval tv = { (time_t)(a->chk.wait_ms / 1000),
				      (suseconds_t)(a->chk.wait_ms % 1000) * 1000 };

		a->pass = xstrdup(pass);
		a->held = evtimer_new(c->srv->base, auth_held_cb, c);
		evtimer_add(a->held, &tv);
		return;
	}
	a->req = ldapauth_auth(c->srv->auth, user, pass, auth_done, c);
}

static int user_create_fn(struct store_txn *t, void *arg)
{
	struct user_setup *u = arg;
	struct store_user su;
	int rc = store_user_get(t, u->name, &su);

	if (rc == 0) {
		u->id = su.id;
		/* a quota the directory gives is the truth (the store enforces it); without
		   one, whatever mailctl set stays */
		if (u->quota != 0 && su.quota_bytes != u->quota)
			return store_user_set_quota(t, u->name, u->quota, su.quota_msgs);
		return 0;
	}
	if (rc != STORE_ENOUSER)
		return rc;
	if ((rc = store_user_create(t, u->name, &u->id)) != 0 || u->quota == 0)
		return rc;
	return store_user_set_quota(t, u->name, u->quota, 0);
}

/* The user's record as it should be (the common case at LOGIN): its id from a read txn,
   without the partition's write lock and a commit. False: user_create_fn must run. */
static bool user_ready(struct store *st, unsigned part, struct user_setup *u)
{
	struct store_txn *t = NULL;
	struct store_user su;
	bool ready = false;

	if (store_txn_begin(st, part, STORE_TXN_READ, &t) == 0 &&
	    store_user_get(t, u->name, &su) == 0 &&
	    (u->quota == 0 || su.quota_bytes == u->quota)) {
		u->id = su.id;
		ready = true;
	}
	store_txn_abort(&t);
	return ready;
}

/* The user's store record is made (or fixed): LOGIN goes on, or the client left. */
static void user_created(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			 void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;

	(void)rcpts;
	(void)n;
	(void)value;
	a->creating = false;
	a->created = true;
	a->create_rc = result;
	imap_client_commit_back(c);
}

/* The user's mailbox lives on another host (the directory's mailHost, or the tombstone's
   of a move away from here): a login referral there (RFC 2221 LOGIN-REFERRALS, URL as RFC
   5092), no session here. */
static bool auth_refer(struct imap_cmd *cmd, struct auth_ctx *a, const char *host)
{
	struct imap_client *c = cmd->c;
	struct buf user;

	log_info("%016" PRIx64 " imap refer user=%s host=%s", c->id, a->tried, host);
	buf_init(&user, 64, 3 * STORE_MAX_NAME);        /* the login, %-escaped */
	for (const char *p = a->login; *p != '\0'; p++) /* RFC 3986 userinfo, escaped */
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL)
			buf_putc(&user, *p);
		else
			buf_printf(&user, "%%%02X", (unsigned char)*p);
	imap_cmd_reply(cmd, "NO", "[REFERRAL imap://%s;AUTH=*@%s/] Your mailbox is on %s",
		       buf_cstr(&user), host, host);
	buf_release(&user);
	return true;
}

/* The user was moved away from this store (a tombstone, store_tomb.c) and the directory
   (a stale replica or cache) still homes it here: a referral to the new host when this
   imapd refers, else try later (the front's next lookup finds the new host); never an
   empty account made here. */
static bool auth_moved(struct imap_cmd *cmd, struct auth_ctx *a, const char *host)
{
	struct imap_client *c = cmd->c;

	if (!conf_values(c->srv->conf)->imapd.proxy || a->proxied_in)
		return auth_refer(cmd, a, host);
	log_info("%016" PRIx64 " imap refuse user=%s reason=\"moved to %s\"", c->id, a->tried,
		 host);
	return imap_cmd_no(cmd, "[UNAVAILABLE] Your mailbox has moved; try again later");
}

/* The directory said yes: find the user's store record, or have it made through the group
   commit (the first login; LOGIN resumes here once it is back). */
static bool auth_finish(struct imap_cmd *cmd, struct auth_ctx *a)
{
	struct imap_client *c = cmd->c;
	struct store *st = c->srv->store;
	unsigned part;
	int rc;

	if (a->mailhost != NULL && strcasecmp(a->mailhost, c->srv->hostname) != 0 &&
	    proxy_host_ok(a->mailhost)) {
		if (!conf_values(c->srv->conf)->imapd.proxy || a->proxied_in)
			return auth_refer(cmd, a, a->mailhost);
		if (a->proxy_started)
			return imap_proxy_login_reply(cmd);
		a->proxy_started = true;
		imap_proxy_start(c, a->login, a->address, a->mailhost);
		return false;
	}
	if (a->created) {
		part = a->part;
		rc = a->create_rc;
	} else {
		bool found = store_user_locate(st, a->login, &part) == 0;
		struct store_tomb tb;

		if (!found && store_tomb_find(st, a->login, &tb) == 0)
			return auth_moved(cmd, a, tb.host);
		if (!user_take(c, a->login)) {
			log_info("%016" PRIx64 " imap refuse user=%s reason=\"too many sessions\"",
				 c->id, a->tried);
			return imap_cmd_no(cmd, "[LIMIT] Too many sessions for this user");
		}
		if (!found)
			part = a->partition >= 0 && (unsigned)a->partition < store_partitions(st)
				       ? (unsigned)a->partition
				       : store_partition_for(st, a->login);
		c->user = xstrdup(a->login);
		a->setup = (struct user_setup){ a->login, 0, a->quota };
		rc = 0;
		if (!user_ready(st, part, &a->setup)) {
			a->part = part;
			a->creating = true;
			c->ncommits++;
			store_gc_submit(c->srv->gc, part, NULL, user_create_fn, &a->setup,
					user_created, c);
			return false;
		}
	}
	if (rc != 0) {
		struct store_tomb tb;

		imap_user_put(c);
		free(c->user);
		c->user = NULL;
		/* the move's tombstone came between store_tomb_find and the create's commit
		   (store_user_create refuses a tombstoned name): the same answer as above */
		if (rc == STORE_EMOVED) {
			if (store_tomb_find(st, a->login, &tb) == 0)
				return auth_moved(cmd, a, tb.host);
			log_info("%016" PRIx64 " imap refuse user=%s reason=\"moved\"", c->id,
				 a->tried);
			return imap_cmd_no(
				cmd, "[UNAVAILABLE] Your mailbox has moved; try again later");
		}
		return imap_cmd_store_error(cmd, rc, "mailbox store");
	}
	c->user_id = a->setup.id;
	c->part = part;
	imap_client_set_state(c, IMAP_ST_AUTH);
	{
		struct buf caps;

		buf_init(&caps, 256, IMAP_CAPS_MAX);
		imap_capability(c, &caps);
		imap_cmd_reply(cmd, "OK", "[CAPABILITY %s] Logged in", buf_cstr(&caps));
		buf_release(&caps);
	}
	return true;
}

/* Resumption of LOGIN/AUTHENTICATE once the directory answered. */
static bool auth_resume(struct imap_cmd *cmd)
{
	struct auth_ctx *a = cmd->ctx;

	if (!a->done || a->creating)
		return false;
	if (a->throttled)
		return imap_cmd_no(cmd, "[UNAVAILABLE] Too many failed logins; try again later");
	switch (a->result) {
	case LDAPAUTH_OK:
		return auth_finish(cmd, a);
	case LDAPAUTH_ETEMP:
		return imap_cmd_no(cmd, "[UNAVAILABLE] Authentication is unavailable now");
	default:
		return imap_cmd_no(cmd, "[AUTHENTICATIONFAILED] Authentication failed");
	}
}

/* A password login on a front's connection after UNAUTHENTICATE (front_unauth): refused,
   logged. */
static bool front_unauth_refused(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	if (!c->front_unauth)
		return false;
	log_info("%016" PRIx64 " imap login addr=%s result=fail reason=\"a password login on a "
		 "front's connection after UNAUTHENTICATE\"",
		 c->id, c->addr);
	imap_cmd_no(cmd, "[AUTHORIZATIONFAILED] Only a proxy login may follow on this "
			 "connection");
	return true;
}

bool cmd_login(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	char *user, *pass;

	if (cmd->ctx != NULL)
		return auth_resume(cmd);
	if (imap_cmd_argc(cmd) != 2 || cmd->nargs != 2)
		return imap_cmd_bad(cmd, "Expected: LOGIN user password");
	if (front_unauth_refused(cmd))
		return true;
	if (plaintext_refused(cmd))
		return imap_cmd_no(cmd, "[PRIVACYREQUIRED] Plaintext login is disabled; use "
					"STARTTLS");
	user = imap_arg_dup(&cmd->args[0]);
	pass = imap_arg_dup(&cmd->args[1]);
	if (user == NULL || pass == NULL) {
		free(user);
		free(pass);
		return imap_cmd_bad(cmd, "Expected: LOGIN user password");
	}
	cmd->ctx = xcalloc(1, sizeof(struct auth_ctx));
	cmd->ctx_free = auth_ctx_free;
	auth_start(cmd, user, pass);
	explicit_bzero(pass, strlen(pass));
	free(user);
	free(pass);
	(void)c;
	return false;
}

static bool proxy_login_in(struct imap_cmd *cmd, const char *authz, const char *why);

/* Decodes a SASL PLAIN response (common/sasl.h decides, as for mtad) and starts the check:
   a handler's result (true: the reply was sent; false: the check resumes the command). */
static bool sasl_plain(struct imap_cmd *cmd, const char *b64, size_t len)
{
	struct imap_client *c = cmd->c;
	char authz[SASL_NAME_MAX + 1];
	struct sasl_plain p;

	if (len == 1 && b64[0] == '*')
		return imap_cmd_bad(cmd, "Authentication cancelled");
	switch (sasl_plain_decode_authz(b64, len, &p, authz)) {
	case SASL_OK:
		break;
	case SASL_EBASE64:
		return imap_cmd_bad(cmd, "Invalid base64");
	case SASL_EFORMAT:
	default: /* the SCRAM results: not from PLAIN */
		return imap_cmd_no(cmd, "[AUTHENTICATIONFAILED] Malformed PLAIN response");
	case SASL_EAUTHZ:
		return imap_cmd_no(cmd, "[AUTHORIZATIONFAILED] Cannot act as another user");
	}
	if (authz[0] != '\0') {
		/* acting as another user: only a front host's proxy login may */
		const char *why;
		bool ok = imap_proxy_credential_ok(c, p.authcid, p.passwd, &why);

		sasl_plain_wipe(&p);
		return proxy_login_in(cmd, authz, ok ? NULL : why);
	}
	if (front_unauth_refused(cmd)) {
		sasl_plain_wipe(&p);
		return true;
	}
	auth_start(cmd, p.authcid, p.passwd);
	sasl_plain_wipe(&p);
	return false;
}

/* Store host: a front's proxy login as authz (its credential checked: why NULL), or its
   refusal (why). */
static bool proxy_login_in(struct imap_cmd *cmd, const char *authz, const char *why)
{
	struct imap_client *c = cmd->c;
	struct auth_ctx *a = cmd->ctx;

	tried_set(a, authz);
	if (why != NULL) {
		log_info("%016" PRIx64 " imap login addr=%s user=%s via=proxy result=fail "
			 "reason=\"%s\" credential=%s",
			 c->id, c->addr, a->tried, why, a->external ? "certificate" : "secret");
		return imap_cmd_no(cmd, "[AUTHORIZATIONFAILED] Cannot act as another user");
	}
	a->proxied_in = true;
	a->user = xstrdup(authz);
	a->req = ldapauth_lookup(c->srv->auth, authz, proxy_lookup_done, c);
	return false;
}

/* Store host: SASL EXTERNAL (RFC 4422 appendix A), a front's proxy login by its TLS client
   certificate: the authorization identity is the user (an empty one, the certificate's own
   identity, is no user here). */
static bool sasl_external(struct imap_cmd *cmd, const char *b64, size_t len)
{
	struct imap_client *c = cmd->c;
	char authz[SASL_NAME_MAX + 1], why[256];

	if (len == 1 && b64[0] == '*')
		return imap_cmd_bad(cmd, "Authentication cancelled");
	if (proxy_external_decode(b64, len, authz) < 0)
		return imap_cmd_bad(cmd, "Invalid base64");
	if (authz[0] == '\0')
		return imap_cmd_no(cmd, "[AUTHENTICATIONFAILED] EXTERNAL needs an authorization "
					"identity here");
	/* the certificate is the connection's, not one login's: after an UNAUTHENTICATE
	   (which may be a client's, relayed by the front) it would log anybody in as anyone */
	if (c->front_unauth)
		return imap_cmd_no(cmd, "[AUTHENTICATIONFAILED] EXTERNAL only as a connection's "
					"first login");
	return proxy_login_in(cmd, authz,
			      proxy_external_check(c->bev, imap_proxy_from_front(c), why,
						   sizeof(why)));
}

/* ---- SCRAM-SHA-256[-PLUS] ---- */

bool imap_scram_offered(const struct imap_client *c, bool plus)
{
	bool tls = c->flags & IMAP_CF_TLS;

	return c->srv->auth != NULL && ldapauth_scram_capable(c->srv->auth) &&
	       (tls || c->srv->allow_plaintext) && (tls || !plus);
}

void imap_scram_caps(const struct imap_client *c, struct buf *out)
{
	if (imap_scram_offered(c, false))
		buf_puts(out, " AUTH=SCRAM-SHA-256");
	if (imap_scram_offered(c, true))
		buf_puts(out, " AUTH=SCRAM-SHA-256-PLUS");
}

/* Sends a SCRAM server message as a continuation; the response line is due. */
static void scram_send(struct imap_client *c, struct auth_ctx *a, const char *b64)
{
	a->waiting_line = true;
	c->flags |= IMAP_CF_SASL;
	imap_printf(c, "+ %s\r\n", b64);
}

static bool scram_step(struct imap_cmd *cmd, struct auth_ctx *a, const struct sasl_step *st);

/* The secret (or its absence) is known: server-first goes out. A user without one gets the
   same exchange and fails at the proof (common/sasl_drive.h). */
static void scram_secret_done(const struct ldapauth_reply *r, void *arg)
{
	struct imap_client *c = arg;
	struct auth_ctx *a = c->cmd.ctx;
	struct sasl_step st;

	a->req = NULL;
	if (r->result == LDAPAUTH_ETEMP) {
		auth_outcome(c, a, LDAPAUTH_ETEMP, false, r->reason);
		return;
	}
	if (r->result == LDAPAUTH_OK)
		auth_take_user(a, r->user);
	sasl_drive_secret(a->scram, r->result == LDAPAUTH_OK, r->scram, r->reason, &st);
	scram_step(&c->cmd, a, &st);
}

/* client-first was taken: the user is known; the throttle counts from here as for a
   password. */
static bool scram_begin(struct imap_cmd *cmd, struct auth_ctx *a)
{
	struct imap_client *c = cmd->c;
	const char *user = sasl_drive_user(a->scram);

	tried_set(a, user);
	a->user = xstrdup(user);
	authguard_begin(c->srv->guard, c->id, "imap", c->addr, user, &a->chk);
	if (a->chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		return imap_cmd_no(cmd, "[UNAVAILABLE] Too many failed logins; try again later");
	}
	a->charged = true;
	if (a->chk.wait_ms > 0) {
		struct timeval tv = { (time_t)(a->chk.wait_ms / 1000),
				      (suseconds_t)(a->chk.wait_ms % 1000) * 1000 };

		a->held = evtimer_new(c->srv->base, auth_held_cb, c);
		evtimer_add(a->held, &tv);
		return false;
	}
	a->req = ldapauth_scram(c->srv->auth, user, scram_secret_done, c);
	return false;
}

/* What the driver said to do next: a handler's result (true: the reply was sent). */
static bool scram_step(struct imap_cmd *cmd, struct auth_ctx *a, const struct sasl_step *st)
{
	struct imap_client *c = cmd->c;

	switch (st->act) {
	case SASL_DO_SEND:
		scram_send(c, a, st->out);
		return false;
	case SASL_DO_SECRET:
		return scram_begin(cmd, a);
	case SASL_DO_OK:
		auth_outcome(c, a, LDAPAUTH_OK, false, st->reason);
		return false;
	case SASL_DO_CANCEL:
		if (a->charged) /* given up before the outcome: not a failure */
			authguard_temp(c->srv->guard, c->addr, a->user);
		a->charged = false;
		return imap_cmd_bad(cmd, "Authentication cancelled");
	case SASL_DO_FAIL:
		break;
	}
	switch (st->fail) {
	case SASL_FAIL_SYNTAX:
		return imap_cmd_bad(cmd, st->rc == SASL_EBASE64 ? "Invalid base64"
								: "Unexpected response");
	case SASL_FAIL_FIRST:
		log_info("%016" PRIx64 " imap login addr=%s mech=scram result=fail reason=\"%s\"",
			 c->id, c->addr, st->reason);
		return imap_cmd_no(cmd, "[AUTHENTICATIONFAILED] Authentication failed");
	case SASL_FAIL_AUTHZ:
		return imap_cmd_no(cmd, "[AUTHORIZATIONFAILED] Cannot act as another user");
	case SASL_FAIL_CRED:
		break;
	}
	auth_outcome(c, a, LDAPAUTH_EBADCRED, false, st->reason);
	return false;
}

static bool scram_start(struct imap_cmd *cmd, bool plus, const struct imap_arg *ir)
{
	struct imap_client *c = cmd->c;
	struct auth_ctx *a;
	struct sasl_step st;

	if (!imap_scram_offered(c, plus))
		return imap_cmd_no(cmd, plus && (c->flags & IMAP_CF_TLS) == 0
						? "SCRAM-SHA-256-PLUS needs TLS"
						: "Unsupported authentication mechanism");
	cmd->ctx = a = xcalloc(1, sizeof(*a));
	cmd->ctx_free = auth_ctx_free;
	a->scram = sasl_drive_new(plus, imap_scram_offered(c, true), false);
	sasl_drive_start(a->scram, ir != NULL ? ir->s : NULL, ir != NULL ? ir->len : 0, &st);
	return scram_step(cmd, a, &st);
}

bool cmd_authenticate(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *mech = imap_cmd_arg(cmd, 0), *ir = imap_cmd_arg(cmd, 1);
	struct auth_ctx *a = cmd->ctx;

	if (a != NULL)
		return a->waiting_line ? false : auth_resume(cmd);
	if (mech == NULL || mech->type != IMAP_ARG_ATOM || imap_cmd_arg(cmd, 2) != NULL ||
	    (ir != NULL && ir->type != IMAP_ARG_ATOM))
		return imap_cmd_bad(cmd, "Expected: AUTHENTICATE mechanism [initial-response]");
	if ((imap_arg_atom_is(mech, "SCRAM-SHA-256") ||
	     imap_arg_atom_is(mech, "SCRAM-SHA-256-PLUS")) &&
	    front_unauth_refused(cmd))
		return true;
	if (imap_arg_atom_is(mech, "SCRAM-SHA-256") ||
	    imap_arg_atom_is(mech, "SCRAM-SHA-256-PLUS"))
		return scram_start(cmd, imap_arg_atom_is(mech, "SCRAM-SHA-256-PLUS"), ir);
	if (!imap_arg_atom_is(mech, "PLAIN") && !imap_arg_atom_is(mech, "EXTERNAL"))
		return imap_cmd_no(cmd, "Unsupported authentication mechanism");
	if (plaintext_refused(cmd))
		return imap_cmd_no(cmd, "[PRIVACYREQUIRED] Plaintext authentication is disabled; "
					"use STARTTLS");
	cmd->ctx = a = xcalloc(1, sizeof(*a));
	cmd->ctx_free = auth_ctx_free;
	a->external = imap_arg_atom_is(mech, "EXTERNAL");
	if (ir == NULL) {
		a->waiting_line = true;
		c->flags |= IMAP_CF_SASL;
		imap_printf(c, "+ \r\n");
		return false;
	}
	if (a->external)
		return sasl_external(cmd, ir->s, ir->len);
	if (ir->len == 1 && ir->s[0] == '=')
		return sasl_plain(cmd, "", 0);
	return sasl_plain(cmd, ir->s, ir->len);
}

void imap_auth_line(struct imap_client *c, const char *line, size_t len)
{
	struct imap_cmd *cmd = &c->cmd;
	struct auth_ctx *a = cmd->ctx;

	c->flags &= ~IMAP_CF_SASL;
	a->waiting_line = false;
	if (a->scram != NULL) {
		struct sasl_step st;

		sasl_drive_response(a->scram, c->bev, line, len, &st);
		scram_step(cmd, a, &st);
	} else if (a->external)
		sasl_external(cmd, line, len);
	else
		sasl_plain(cmd, line, len);
}

/* ldapauth.c — owns the request lifecycle: input checks, cache use, the choice of backend
 * (LDAP bind mode, LDAP lookup mode, users file), the directory operations a request needs
 * (search, then a user bind in bind mode or a local hash check in lookup mode; for SCRAM the
 * search that finds the user's {SCRAM-SHA-256} value), turning LDAP
 * results into user records, per-operation timeouts and the deferred callbacks. Connections:
 * ldap_conn.c; cache: authcache.c; filters: ldap_filter.c; hashes: passwd.c; file:
 * static_backend.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <ldap.h>
#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"

enum la_backend { BACKEND_LDAP, BACKEND_FILE };
enum la_mode { MODE_BIND, MODE_LOOKUP };
enum la_attr { AT_LOGIN, AT_MAIL, AT_HOST, AT_PARTITION, AT_QUOTA, AT_PASSWORD, AT_FIXED };

struct ldapauth {
	struct event_base *base;
	enum la_backend backend;
	enum la_mode mode;
	bool scram; /* [directory] scram: the admin says users hold SCRAM secrets */
	char *base_dn, *user_filter, *address_filter, *users_file;
	int scope;
	int64_t timeout_ms;
	char *attr[AT_FIXED]; /* "" when not read */
	char **alias_attrs;
	size_t nalias;
	char **search_attrs; /* NULL-terminated: what a search asks for */
	char **auth_attrs;   /* the same plus the password in lookup mode */
	struct lpool *search, *bind;
	struct authcache *cache;
	struct ldapauth_shared *shared; /* the daemon's workers' cache, or NULL */
	struct static_users *users;
	struct stat users_st; /* the users file as loaded: a change is loaded again */
	int64_t users_checked_ms;
	struct req_queue done; /* completed, callbacks pending */
	struct req_queue live; /* every request not yet freed */
	struct event *done_ev;
	struct ldapauth_stats st;
};

static void req_complete(struct ldapauth_req *req, enum ldapauth_result r, const char *reason);
static void req_free(struct ldapauth_req *req);
static void done_cb(evutil_socket_t fd, short what, void *arg);
static void timeout_cb(evutil_socket_t fd, short what, void *arg);
static void req_to_directory(struct ldapauth_req *req, enum req_op op);
static void req_file(struct ldapauth_req *req);
static void users_maybe_reload(struct ldapauth *la);
static void search_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg);
static void bind_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg);
static struct ldapauth_rec *entry_to_rec(struct ldapauth *la, LDAP *ld, LDAPMessage *e,
					 const char *asked);
static int entry_check_password(struct ldapauth *la, LDAP *ld, LDAPMessage *e,
				const char *password);
static char *entry_scram_secret(struct ldapauth *la, LDAP *ld, LDAPMessage *e);
static int setup_ldap(struct ldapauth *la, const struct conf *c, char **error_r);
static char **make_attrs(const struct ldapauth *la, bool with_password);

const char *ldapauth_strerror(enum ldapauth_result r)
{
	switch (r) {
	case LDAPAUTH_OK:
		return "ok";
	case LDAPAUTH_EBADCRED:
		return "wrong credentials";
	case LDAPAUTH_ENOUSER:
		return "no such user";
	case LDAPAUTH_ETEMP:
		return "temporary failure";
	}
	return "unknown result";
}

const char *ldapauth_mode(const struct ldapauth *la)
{
	if (la->backend == BACKEND_FILE)
		return "file";
	return la->mode == MODE_BIND ? "bind" : "lookup";
}

/* ---- user records ---- */

struct ldapauth_rec *ldapauth_rec_new(void)
{
	struct ldapauth_rec *r = xcalloc(1, sizeof(*r));

	r->refs = 1;
	r->u.partition = -1;
	return r;
}

struct ldapauth_rec *ldapauth_rec_ref(struct ldapauth_rec *r)
{
	r->refs++;
	return r;
}

static void user_release(struct ldapauth_user *u)
{
	free(u->login);
	free(u->address);
	for (size_t i = 0; i < u->naliases; i++)
		free(u->aliases[i]);
	free(u->aliases);
	free(u->mailhost);
	free(u->dn);
}

void ldapauth_rec_unref(struct ldapauth_rec **rp)
{
	struct ldapauth_rec *r = *rp;

	*rp = NULL;
	if (r == NULL || --r->refs > 0)
		return;
	user_release(&r->u);
	free(r);
}

void ldapauth_rec_add_alias(struct ldapauth_rec *r, const char *addr, size_t len)
{
	struct ldapauth_user *u = &r->u;

	if (u->address != NULL && str_caseeq(u->address, strlen(u->address), addr, len))
		return;
	for (size_t i = 0; i < u->naliases; i++)
		if (str_caseeq(u->aliases[i], strlen(u->aliases[i]), addr, len))
			return;
	u->aliases = xreallocarray(u->aliases, u->naliases + 1, sizeof(*u->aliases));
	u->aliases[u->naliases++] = xmemdup0(addr, len);
}

/* ---- set-up ---- */

int ldapauth_read_secret(const char *path, char **out_r, char **error_r)
{
	char buf[1025];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd == -1) {
		*error_r = xasprintf("bind_password_file %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n >= (ssize_t)sizeof(buf)) {
		*error_r = xasprintf("bind_password_file %s: unreadable or too long", path);
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	*out_r = xmemdup0(buf, (size_t)n);
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

static char **make_attrs(const struct ldapauth *la, bool with_password)
{
	char **v = xcalloc(AT_FIXED + la->nalias + 1, sizeof(*v));
	size_t n = 0;

	for (int i = 0; i < AT_FIXED; i++)
		if (la->attr[i][0] != '\0' && (i != AT_PASSWORD || with_password))
			v[n++] = la->attr[i];
	for (size_t i = 0; i < la->nalias; i++)
		v[n++] = la->alias_attrs[i];
	if (n == 0)
		v[n++] = (char *)(uintptr_t)LDAP_NO_ATTRS;
	return v;
}

static int setup_ldap(struct ldapauth *la, const struct conf *c, char **error_r)
{
	const struct directory_conf *d = &conf_values(c)->directory;
	struct lpool_opts o = { 0 };
	char *pw = NULL, *uris = xstrdup(d->uri);
	struct str_view rest = str_view_of(uris), f;
	int rc = 0;

	while (str_split_ws(&rest, &f)) {
		o.uris = xreallocarray(o.uris, o.nuris + 1, sizeof(*o.uris));
		o.uris[o.nuris++] = xmemdup0(f.p, f.len);
	}
	if (d->bind_password_file[0] != '\0')
		rc = ldapauth_read_secret(d->bind_password_file, &pw, error_r);
	o.starttls = d->starttls;
	o.ca = conf_values(c)->tls.ca;
	o.bind_dn = d->bind_dn;
	o.bind_pw = pw != NULL ? pw : "";
	o.size = (unsigned)d->pool_size;
	o.timeout_ms = la->timeout_ms;
	if (rc == 0)
		rc = lpool_new(la, la->base, LPOOL_SEARCH, &o, &la->search, error_r);
	if (rc == 0 && la->mode == MODE_BIND) {
		/* binds cannot share a connection (one in flight each): a pool of their own */
		o.size = (unsigned)d->bind_pool_size;
		rc = lpool_new(la, la->base, LPOOL_BIND, &o, &la->bind, error_r);
	}
	for (size_t i = 0; i < o.nuris; i++)
		free(o.uris[i]);
	free(o.uris);
	free(uris);
	if (pw != NULL)
		OPENSSL_cleanse(pw, strlen(pw));
	free(pw);
	return rc;
}

int ldapauth_new(struct event_base *base, const struct conf *c, struct ldapauth **la_r,
		 char **error_r)
{
	struct ldapauth *la = xcalloc(1, sizeof(*la));
	const struct directory_conf *d = &conf_values(c)->directory;
	const struct conf_list *al = d->alias_attributes;
	int rc = 0;

	*la_r = NULL;
	la->base = base;
	la->backend = d->backend == DIRECTORY_BACKEND_FILE ? BACKEND_FILE : BACKEND_LDAP;
	la->mode = d->auth_mode == DIRECTORY_AUTH_LOOKUP ? MODE_LOOKUP : MODE_BIND;
	la->scram = d->scram;
	la->base_dn = xstrdup(d->base);
	la->user_filter = xstrdup(d->user_filter);
	la->address_filter = xstrdup(d->address_filter);
	la->users_file = xstrdup(d->users_file);
	la->scope = d->scope == DIRECTORY_SCOPE_BASE  ? LDAP_SCOPE_BASE
		    : d->scope == DIRECTORY_SCOPE_ONE ? LDAP_SCOPE_ONELEVEL
						      : LDAP_SCOPE_SUBTREE;
	la->timeout_ms = d->timeout_ms;
	la->attr[AT_LOGIN] = xstrdup(d->login_attribute);
	la->attr[AT_MAIL] = xstrdup(d->address_attribute);
	la->attr[AT_HOST] = xstrdup(d->mailhost_attribute);
	la->attr[AT_PARTITION] = xstrdup(d->partition_attribute);
	la->attr[AT_QUOTA] = xstrdup(d->quota_attribute);
	la->attr[AT_PASSWORD] = xstrdup(d->password_attribute);
	la->alias_attrs = xcalloc(al->n + 1, sizeof(*la->alias_attrs));
	for (size_t i = 0; i < al->n; i++)
		la->alias_attrs[la->nalias++] = xstrdup(al->v[i]);
	la->search_attrs = make_attrs(la, false);
	la->auth_attrs = make_attrs(la, la->mode == MODE_LOOKUP);
	la->cache = authcache_new((size_t)d->auth_cache_size, d->auth_cache_ttl_ms,
				  d->negative_cache_ttl_ms, (size_t)d->negative_cache_memory);
	TAILQ_INIT(&la->done);
	TAILQ_INIT(&la->live);
	la->done_ev = event_new(base, -1, 0, done_cb, la);
	if (!ldapauth_filter_valid(la->user_filter) ||
	    !ldapauth_filter_valid(la->address_filter)) {
		*error_r = xstrdup("user_filter/address_filter: only %s %u %d %% may be used");
		rc = -1;
	} else if (la->mode == MODE_LOOKUP && la->attr[AT_PASSWORD][0] == '\0') {
		*error_r = xstrdup("auth_mode = lookup needs password_attribute");
		rc = -1;
	} else if (la->backend == BACKEND_FILE) {
		rc = static_users_load(la->users_file, &la->users, error_r);
		if (rc == 0 && stat(la->users_file, &la->users_st) == -1)
			memset(&la->users_st, 0, sizeof(la->users_st));
	} else {
		rc = setup_ldap(la, c, error_r);
	}
	if (rc < 0) {
		ldapauth_free(&la);
		return -1;
	}
	*la_r = la;
	return 0;
}

void ldapauth_free(struct ldapauth **lap)
{
	struct ldapauth *la = *lap;
	struct ldapauth_req *req;

	if (la == NULL)
		return;
	lpool_free(&la->search);
	lpool_free(&la->bind);
	/* requests still waiting or running are dropped without callbacks */
	while ((req = TAILQ_FIRST(&la->live)) != NULL)
		req_free(req);
	if (la->done_ev != NULL)
		event_free(la->done_ev);
	authcache_free(&la->cache);
	static_users_free(&la->users);
	for (int i = 0; i < AT_FIXED; i++)
		free(la->attr[i]);
	for (size_t i = 0; i < la->nalias; i++)
		free(la->alias_attrs[i]);
	free(la->alias_attrs);
	free(la->search_attrs);
	free(la->auth_attrs);
	free(la->base_dn);
	free(la->user_filter);
	free(la->address_filter);
	free(la->users_file);
	free(la);
	*lap = NULL;
}

int ldapauth_reload(struct ldapauth *la, char **error_r)
{
	struct static_users *su = NULL;

	authcache_clear(la->cache);
	if (la->shared != NULL)
		authshm_clear(la->shared);
	if (la->backend != BACKEND_FILE)
		return 0;
	if (static_users_load(la->users_file, &su, error_r) < 0)
		return -1;
	static_users_free(&la->users);
	la->users = su;
	return 0;
}

void ldapauth_get_stats(const struct ldapauth *la, struct ldapauth_stats *st)
{
	*st = la->st;
	st->conns_open = st->conns_open_max = st->inflight_max = 0;
	st->connects = st->connect_failures = 0;
	if (la->search != NULL)
		lpool_stats(la->search, &st->conns_open, &st->conns_open_max, &st->inflight_max,
			    &st->connects, &st->connect_failures);
	if (la->bind != NULL)
		lpool_stats(la->bind, &st->conns_open, &st->conns_open_max, &st->inflight_max,
			    &st->connects, &st->connect_failures);
	/* the shared table's count is every worker's: summed over them it would mislead */
	st->cache_entries = authcache_count(la->cache);
}

/* ---- requests ---- */

static bool name_ok(const char *s)
{
	size_t len = strlen(s);

	return len > 0 && len <= LDAPAUTH_NAME_MAX && str_is_safe_line(s, len);
}

static struct ldapauth_req *req_new(struct ldapauth *la, enum req_kind kind, const char *name,
				    ldapauth_cb *cb, void *arg)
{
	struct ldapauth_req *req = xcalloc(1, sizeof(*req));
	size_t len = strnlen(name, LDAPAUTH_NAME_MAX + 1);

	req->la = la;
	req->kind = kind;
	req->name = xstrndup(name, len);
	req->key = xasprintf("%c:%s",
			     kind == REQ_AUTH    ? 'a'
			     : kind == REQ_SCRAM ? 's'
			     : kind == REQ_USER  ? 'u'
						 : 'l',
			     req->name);
	str_lower(req->key, strlen(req->key));
	req->cb = cb;
	req->arg = arg;
	evtimer_assign(&req->timer, la->base, timeout_cb, req);
	TAILQ_INSERT_TAIL(&la->live, req, live);
	la->st.requests++;
	return req;
}

static void req_free(struct ldapauth_req *req)
{
	TAILQ_REMOVE(&req->la->live, req, live);
	if (req->timer_set)
		evtimer_del(&req->timer);
	if (req->password != NULL) {
		OPENSSL_cleanse(req->password, strlen(req->password));
		free(req->password);
	}
	if (req->scram != NULL) {
		OPENSSL_cleanse(req->scram, strlen(req->scram));
		free(req->scram);
	}
	ldapauth_rec_unref(&req->rec);
	free(req->name);
	free(req->key);
	free(req);
}

static void req_refuse(struct ldapauth_req *req, enum ldapauth_result r, const char *why)
{
	req->refused = true;
	req->la->st.refused++;
	req_complete(req, r, why);
}

void ldapauth_use_shared(struct ldapauth *la, struct ldapauth_shared *sh)
{
	la->shared = sh;
	if (sh != NULL)
		authcache_limit(la->cache, LDAPAUTH_PRIVATE_CACHE_MAX);
}

void ldapauth_reload_ttls(struct ldapauth *la, const struct conf *c)
{
	const struct directory_conf *d = &conf_values(c)->directory;

	authcache_set_ttls(la->cache, d->auth_cache_ttl_ms, d->negative_cache_ttl_ms);
	if (la->shared != NULL)
		authshm_set_ttls(la->shared, d->auth_cache_ttl_ms, d->negative_cache_ttl_ms);
}

/* The shared cache first (a record too big for it is in the worker's own). */
static enum ac_res cache_get(struct ldapauth *la, const char *key, const char *password,
			     struct ldapauth_rec **rec_r)
{
	int64_t now = clock_mono_ms();
	enum ac_res r = AC_MISS;

	if (la->shared != NULL)
		r = authshm_get(la->shared, key, password, now, rec_r);
	return r != AC_MISS ? r : authcache_get(la->cache, key, password, now, rec_r);
}

static void cache_put(struct ldapauth *la, const char *key, struct ldapauth_rec *rec,
		      const char *password, int64_t now_ms)
{
	if (la->shared != NULL && authshm_put(la->shared, key, rec, password, now_ms)) {
		authcache_remove(la->cache, key); /* an older answer there would come next */
		return;
	}
	if (la->shared != NULL)
		authshm_remove(la->shared, key); /* an older answer there would come first */
	authcache_put(la->cache, key, rec, password, now_ms);
}

/* Answers from the cache when it can; true when it did. */
static bool req_from_cache(struct ldapauth_req *req)
{
	struct ldapauth *la = req->la;
	struct ldapauth_rec *rec = NULL;
	enum ac_res r = cache_get(la, req->key, req->password, &rec);

	if (r == AC_MISS) {
		la->st.cache_misses++;
		return false;
	}
	la->st.cache_hits++;
	req->cached = true;
	req->rec = rec;
	req_complete(req, r == AC_HIT ? LDAPAUTH_OK : LDAPAUTH_ENOUSER,
		     r == AC_HIT ? "cached" : "cached: no such user");
	return true;
}

static void req_start(struct ldapauth_req *req)
{
	if (req->la->backend == BACKEND_FILE)
		users_maybe_reload(
			req->la); /* before the cache: it may answer for a removed user */
	/* SCRAM asks for a secret, not a check: the cache has none to give */
	if (req->kind != REQ_SCRAM && req_from_cache(req))
		return;
	if (req->la->backend == BACKEND_FILE)
		req_file(req);
	else
		req_to_directory(req, OP_SEARCH);
}

struct ldapauth_req *ldapauth_auth(struct ldapauth *la, const char *user, const char *password,
				   ldapauth_cb *cb, void *arg)
{
	struct ldapauth_req *req = req_new(la, REQ_AUTH, user, cb, arg);
	size_t plen = strnlen(password, LDAPAUTH_PASSWORD_MAX + 1);

	if (!name_ok(user))
		req_refuse(req, LDAPAUTH_ENOUSER, "refused: bad user name");
	else if (plen == 0) /* an empty simple bind would succeed anonymously */
		req_refuse(req, LDAPAUTH_EBADCRED, "refused: empty password");
	else if (plen > LDAPAUTH_PASSWORD_MAX || !str_is_safe_line(password, plen))
		req_refuse(req, LDAPAUTH_EBADCRED, "refused: bad password");
	else {
		req->password = xstrdup(password);
		req_start(req);
	}
	return req;
}

bool ldapauth_scram_capable(const struct ldapauth *la)
{
	return la->scram && (la->backend == BACKEND_FILE || la->mode == MODE_LOOKUP);
}

struct ldapauth_req *ldapauth_scram(struct ldapauth *la, const char *user, ldapauth_cb *cb,
				    void *arg)
{
	struct ldapauth_req *req = req_new(la, REQ_SCRAM, user, cb, arg);

	if (!name_ok(user))
		req_refuse(req, LDAPAUTH_ENOUSER, "refused: bad user name");
	else if (!ldapauth_scram_capable(la))
		req_refuse(req, LDAPAUTH_EBADCRED,
			   "SCRAM is not offered (directory scram = no, or bind mode)");
	else
		req_start(req);
	return req;
}

/* The secret of a {SCRAM-SHA-256} value (the scheme's case ignored), or NULL. */
static char *scram_secret(const char *v, size_t len)
{
	static const char scheme[] = "{SCRAM-SHA-256}";
	size_t n = sizeof(scheme) - 1;

	if (len <= n || !str_caseprefix(v, len, scheme) || !str_is_safe_line(v, len))
		return NULL;
	return xmemdup0(v + n, len - n);
}

struct ldapauth_req *ldapauth_user(struct ldapauth *la, const char *login, ldapauth_cb *cb,
				   void *arg)
{
	struct ldapauth_req *req = req_new(la, REQ_USER, login, cb, arg);

	if (!name_ok(login))
		req_refuse(req, LDAPAUTH_ENOUSER, "refused: bad user name");
	else
		req_start(req);
	return req;
}

struct ldapauth_req *ldapauth_lookup(struct ldapauth *la, const char *address, ldapauth_cb *cb,
				     void *arg)
{
	struct ldapauth_req *req = req_new(la, REQ_LOOKUP, address, cb, arg);

	if (!name_ok(address))
		req_refuse(req, LDAPAUTH_ENOUSER, "refused: bad address");
	else
		req_start(req);
	return req;
}

void ldapauth_cancel(struct ldapauth_req **reqp)
{
	if (*reqp != NULL)
		(*reqp)->cb = NULL; /* it finishes quietly; the cache still learns from it */
	*reqp = NULL;
}

static void req_complete(struct ldapauth_req *req, enum ldapauth_result r, const char *reason)
{
	struct ldapauth *la = req->la;

	if (req->timer_set) {
		evtimer_del(&req->timer);
		req->timer_set = false;
	}
	req->op = OP_NONE;
	req->result = r;
	req->reason = reason;
	la->st.ok += r == LDAPAUTH_OK;
	la->st.badcred += r == LDAPAUTH_EBADCRED;
	la->st.nouser += r == LDAPAUTH_ENOUSER;
	la->st.temp += r == LDAPAUTH_ETEMP;
	TAILQ_INSERT_TAIL(&la->done, req, q);
	event_active(la->done_ev, 0, 0);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ldapauth *la = arg;
	struct req_queue batch = TAILQ_HEAD_INITIALIZER(batch);
	struct ldapauth_req *req;

	/* callbacks may start requests that complete at once: those run on the next pass */
	TAILQ_CONCAT(&batch, &la->done, q);
	while ((req = TAILQ_FIRST(&batch)) != NULL) {
		struct ldapauth_reply rep = {
			.result = req->result,
			.user = req->result == LDAPAUTH_OK && req->rec != NULL ? &req->rec->u
									       : NULL,
			.cached = req->cached,
			.refused = req->refused,
			.reason = req->reason,
			.scram = req->result == LDAPAUTH_OK ? req->scram : NULL,
		};

		TAILQ_REMOVE(&batch, req, q);
		if (req->cb != NULL)
			req->cb(&rep, req->arg);
		req_free(req);
	}
}

/* ---- users file ---- */

/* A users file changed since it was loaded (mailctl user add, an editor's rename) is loaded
   again before a request; looked at once a second at most. A file with an error keeps the
   users already loaded (logged once per change). */
static void users_maybe_reload(struct ldapauth *la)
{
	int64_t now = clock_mono_ms();
	struct stat st;
	char *err = NULL;

	if (now - la->users_checked_ms < 1000)
		return;
	la->users_checked_ms = now;
	if (stat(la->users_file, &st) == -1 ||
	    (st.st_ino == la->users_st.st_ino && st.st_size == la->users_st.st_size &&
	     st.st_mtim.tv_sec == la->users_st.st_mtim.tv_sec &&
	     st.st_mtim.tv_nsec == la->users_st.st_mtim.tv_nsec))
		return;
	la->users_st = st;
	if (ldapauth_reload(la, &err) < 0) {
		log_warnx(
			"directory: %s changed but does not load, the users loaded before stay: %s",
			la->users_file, err);
		free(err);
		return;
	}
	log_info("directory: %s changed: loaded again", la->users_file);
}

static void req_file(struct ldapauth_req *req)
{
	struct ldapauth *la = req->la;
	const char *hash = NULL;
	int ok;

	if (req->kind == REQ_LOOKUP) {
		req->rec = static_users_find_address(la->users, req->name);
		if (req->rec == NULL)
			cache_put(la, req->key, NULL, NULL, clock_mono_ms());
		req_complete(req, req->rec != NULL ? LDAPAUTH_OK : LDAPAUTH_ENOUSER, "file");
		return;
	}
	req->rec = static_users_find_login(la->users, req->name, &hash);
	if (req->rec == NULL) {
		req_complete(req, LDAPAUTH_ENOUSER, "file: no such user");
		return;
	}
	if (req->kind == REQ_USER) {
		req_complete(req, LDAPAUTH_OK, "file");
		return;
	}
	if (req->kind == REQ_SCRAM) {
		req->scram = scram_secret(hash, strlen(hash));
		req_complete(req, req->scram != NULL ? LDAPAUTH_OK : LDAPAUTH_EBADCRED,
			     req->scram != NULL ? "file" : "file: no SCRAM secret");
		return;
	}
	ok = ldapauth_passwd_verify(hash, strlen(hash), req->password);
	if (ok == 1)
		req_complete(req, LDAPAUTH_OK, "file");
	else
		req_complete(req, LDAPAUTH_EBADCRED,
			     ok == 0 ? "file: wrong password" : "file: unknown hash scheme");
}

/* ---- directory ---- */

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ldapauth_req *req = arg;
	struct ldapauth *la = req->la;

	req->timer_set = false;
	la->st.timeouts++;
	lpool_withdraw(req->op == OP_BIND ? la->bind : la->search, req);
	req_complete(req, LDAPAUTH_ETEMP, "directory timeout");
}

static void req_to_directory(struct ldapauth_req *req, enum req_op op)
{
	struct ldapauth *la = req->la;
	struct timeval tv = { la->timeout_ms / 1000, (la->timeout_ms % 1000) * 1000 };

	req->op = op;
	if (req->timer_set)
		evtimer_del(&req->timer);
	evtimer_add(&req->timer, &tv);
	req->timer_set = true;
	lpool_submit(op == OP_BIND ? la->bind : la->search, req);
}

int ldapauth_op_send(struct ldapauth_req *req, LDAP *ld, int *msgid_r)
{
	struct ldapauth *la = req->la;
	struct timeval tl = { (la->timeout_ms + 999) / 1000, 0 };
	char *filter;
	int rc;

	la->st.directory_calls++;
	req->sent_us = clock_mono_us();
	if (req->op == OP_BIND) {
		struct berval cred = { strlen(req->password), req->password };

		return ldap_sasl_bind(ld, req->rec->u.dn, LDAP_SASL_SIMPLE, &cred, NULL, NULL,
				      msgid_r);
	}
	filter = ldapauth_filter_expand(req->kind != REQ_LOOKUP ? la->user_filter
								: la->address_filter,
					req->name);
	if (filter == NULL)
		return LDAP_FILTER_ERROR;
	/* size limit 2: one entry is the answer, a second means the filter is ambiguous */
	rc = ldap_search_ext(ld, la->base_dn, la->scope, filter,
			     req->kind != REQ_LOOKUP ? la->auth_attrs : la->search_attrs, 0, NULL,
			     NULL, &tl, 2, msgid_r);
	free(filter);
	return rc;
}

void ldapauth_op_failed(struct ldapauth_req *req, const char *reason)
{
	req_complete(req, LDAPAUTH_ETEMP, reason);
}

void ldapauth_op_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg)
{
	struct ldapauth_stats *st = &req->la->st;
	uint64_t us = (uint64_t)(clock_mono_us() - req->sent_us);

	st->rtt[metrics_bucket(us)]++;
	st->rtt_sum_us += us;
	if (req->op == OP_BIND)
		bind_result(req, ld, msg);
	else
		search_result(req, ld, msg);
}

/* An LDAP result code that says "the directory could not answer now". */
static bool ldap_rc_temporary(int rc)
{
	return rc != LDAP_SUCCESS && rc != LDAP_NO_SUCH_OBJECT && rc != LDAP_SIZELIMIT_EXCEEDED &&
	       rc != LDAP_INVALID_CREDENTIALS && rc != LDAP_INAPPROPRIATE_AUTH;
}

static void search_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg)
{
	struct ldapauth *la = req->la;
	LDAPMessage *e, *res = ldap_first_message(ld, msg);
	int err = LDAP_OTHER, n = ldap_count_entries(ld, msg), ok;

	while (res != NULL && ldap_msgtype(res) != LDAP_RES_SEARCH_RESULT)
		res = ldap_next_message(ld, res);
	if (res == NULL || ldap_parse_result(ld, res, &err, NULL, NULL, NULL, NULL, 0) != 0 ||
	    ldap_rc_temporary(err)) {
		log_warnx("ldap search for \"%s\": %s", req->name, ldap_err2string(err));
		req_complete(req, LDAPAUTH_ETEMP, "directory error");
		return;
	}
	if (n > 1 || err == LDAP_SIZELIMIT_EXCEEDED) {
		log_warnx("ldap search for \"%s\": more than one entry; check the filter",
			  req->name);
		req_complete(req, LDAPAUTH_ENOUSER, "ambiguous: several entries");
		return;
	}
	if (n <= 0) {
		if (req->kind != REQ_SCRAM) /* SCRAM reads no cache */
			cache_put(la, req->key, NULL, NULL, clock_mono_ms());
		req_complete(req, LDAPAUTH_ENOUSER, "no such entry");
		return;
	}
	e = ldap_first_entry(ld, msg);
	req->rec = entry_to_rec(la, ld, e, req->name);
	if (req->kind == REQ_LOOKUP || req->kind == REQ_USER) {
		cache_put(la, req->key, req->rec, NULL, clock_mono_ms());
		req_complete(req, LDAPAUTH_OK, "directory");
	} else if (req->kind == REQ_SCRAM) {
		req->scram = entry_scram_secret(la, ld, e);
		req_complete(req, req->scram != NULL ? LDAPAUTH_OK : LDAPAUTH_EBADCRED,
			     req->scram != NULL ? "directory" : "no SCRAM secret");
	} else if (la->mode == MODE_BIND && req->rec->u.dn[0] == '\0') {
		/* binding with an empty DN would be anonymous: never a success */
		req_complete(req, LDAPAUTH_ETEMP, "entry without a DN");
	} else if (la->mode == MODE_BIND) {
		req_to_directory(req, OP_BIND);
	} else if ((ok = entry_check_password(la, ld, e, req->password)) == 1) {
		cache_put(la, req->key, req->rec, req->password, clock_mono_ms());
		req_complete(req, LDAPAUTH_OK, "directory");
	} else {
		req_complete(req, LDAPAUTH_EBADCRED,
			     ok == 0 ? "wrong password" : "no usable password hash");
	}
}

static void bind_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg)
{
	struct ldapauth *la = req->la;
	int err = LDAP_OTHER;

	if (ldap_parse_result(ld, msg, &err, NULL, NULL, NULL, NULL, 0) != 0)
		err = LDAP_OTHER;
	if (err == LDAP_SUCCESS) {
		cache_put(la, req->key, req->rec, req->password, clock_mono_ms());
		req_complete(req, LDAPAUTH_OK, "directory");
	} else if (!ldap_rc_temporary(err)) {
		req_complete(req, LDAPAUTH_EBADCRED, "wrong password");
	} else {
		log_warnx("ldap bind as \"%s\": %s", req->rec->u.dn, ldap_err2string(err));
		req_complete(req, LDAPAUTH_ETEMP, "directory error");
	}
}

/* The first usable value of attr, or NULL. */
static char *first_value(LDAP *ld, LDAPMessage *e, const char *attr)
{
	struct berval **v;
	char *out = NULL;

	if (attr[0] == '\0' || (v = ldap_get_values_len(ld, e, attr)) == NULL)
		return NULL;
	for (size_t i = 0; v[i] != NULL && out == NULL; i++)
		if (v[i]->bv_len > 0 && v[i]->bv_len <= LDAPAUTH_NAME_MAX &&
		    str_is_safe_line(v[i]->bv_val, v[i]->bv_len))
			out = xmemdup0(v[i]->bv_val, v[i]->bv_len);
	ldap_value_free_len(v);
	return out;
}

static void add_aliases(struct ldapauth_rec *r, LDAP *ld, LDAPMessage *e, const char *attr)
{
	struct berval **v = ldap_get_values_len(ld, e, attr);

	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		if (v[i]->bv_len > 0 && v[i]->bv_len <= LDAPAUTH_NAME_MAX &&
		    str_is_safe_line(v[i]->bv_val, v[i]->bv_len))
			ldapauth_rec_add_alias(r, v[i]->bv_val, v[i]->bv_len);
	ldap_value_free_len(v);
}

static struct ldapauth_rec *entry_to_rec(struct ldapauth *la, LDAP *ld, LDAPMessage *e,
					 const char *asked)
{
	struct ldapauth_rec *r = ldapauth_rec_new();
	char *dn = ldap_get_dn(ld, e), *s;
	uint64_t v;

	r->u.dn = xstrdup(dn != NULL ? dn : "");
	ldap_memfree(dn);
	r->u.login = first_value(ld, e, la->attr[AT_LOGIN]);
	if (r->u.login == NULL)
		r->u.login = xstrdup(asked);
	r->u.address = first_value(ld, e, la->attr[AT_MAIL]);
	if (la->attr[AT_MAIL][0] != '\0')
		add_aliases(r, ld, e, la->attr[AT_MAIL]);
	for (size_t i = 0; i < la->nalias; i++)
		add_aliases(r, ld, e, la->alias_attrs[i]);
	r->u.mailhost = first_value(ld, e, la->attr[AT_HOST]);
	if ((s = first_value(ld, e, la->attr[AT_PARTITION])) != NULL &&
	    str_to_u64(s, strlen(s), 1 << 20, &v) == 0)
		r->u.partition = (int)v;
	free(s);
	if ((s = first_value(ld, e, la->attr[AT_QUOTA])) != NULL &&
	    str_to_u64(s, strlen(s), UINT64_MAX, &v) == 0)
		r->u.quota = v;
	free(s);
	return r;
}

/* 1 when one of the entry's password hashes matches, 0 when none does, -1 when it has none
   that can be checked. */
static int entry_check_password(struct ldapauth *la, LDAP *ld, LDAPMessage *e,
				const char *password)
{
	struct berval **v = ldap_get_values_len(ld, e, la->attr[AT_PASSWORD]);
	int best = -1;

	for (size_t i = 0; v != NULL && v[i] != NULL && best != 1; i++) {
		int r = ldapauth_passwd_verify(v[i]->bv_val, v[i]->bv_len, password);

		if (r > best)
			best = r;
	}
	ldap_value_free_len(v);
	return best;
}

/* The entry's first {SCRAM-SHA-256} password value, its secret part (malloc'd), or NULL. */
static char *entry_scram_secret(struct ldapauth *la, LDAP *ld, LDAPMessage *e)
{
	struct berval **v = ldap_get_values_len(ld, e, la->attr[AT_PASSWORD]);
	char *out = NULL;

	for (size_t i = 0; v != NULL && v[i] != NULL && out == NULL; i++)
		if (v[i]->bv_len <= LDAPAUTH_PASSWORD_MAX)
			out = scram_secret(v[i]->bv_val, v[i]->bv_len);
	ldap_value_free_len(v);
	return out;
}

/* ldapauth_private.h — layouts shared by the files of libheron_ldapauth: requests, user
 * records, the cache, the connection pool, filters, password schemes and the users file. */
#ifndef HERON_LDAPAUTH_PRIVATE_H
#define HERON_LDAPAUTH_PRIVATE_H

#include <sys/queue.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <ldap.h>

#include "ldapauth/ldapauth.h"

/* A user record shared by the cache and the requests that answer with it. */
struct ldapauth_rec {
	unsigned refs;
	struct ldapauth_user u;
};
struct ldapauth_rec *ldapauth_rec_new(void);
struct ldapauth_rec *ldapauth_rec_ref(struct ldapauth_rec *r);
void ldapauth_rec_unref(struct ldapauth_rec **rp);
void ldapauth_rec_add_alias(struct ldapauth_rec *r, const char *addr, size_t len);

enum req_kind { REQ_AUTH, REQ_LOOKUP, REQ_SCRAM, REQ_USER };
enum req_op { OP_NONE, OP_SEARCH, OP_BIND };

struct ldapauth_req {
	struct ldapauth *la;
	enum req_kind kind;
	enum req_op op;  /* the directory operation waiting or running */
	char *name;      /* login name or address */
	char *password;  /* auth only; wiped when freed */
	char *scram;     /* REQ_SCRAM: the secret found (after "{SCRAM-SHA-256}"); wiped */
	char *key;       /* cache key: kind letter + lower-cased name */
	ldapauth_cb *cb; /* NULL once cancelled */
	void *arg;
	struct event timer; /* per-operation timeout */
	bool timer_set;
	TAILQ_ENTRY(ldapauth_req) q; /* a pool's wait queue or the done queue */
	bool queued;
	TAILQ_ENTRY(ldapauth_req) live; /* every request of its ldapauth */
	struct lconn *conn;             /* the connection running op */
	int msgid;
	int64_t sent_us; /* when op went to the directory (its round trip) */
	struct ldapauth_rec *rec;
	enum ldapauth_result result;
	bool cached, refused;
	const char *reason;
};
TAILQ_HEAD(req_queue, ldapauth_req);

/* authcache.c: positive/negative cache bounded in entries (LRU) and time; the negative
   entries also in bytes (neg_max_bytes: the oldest go first). */
enum ac_res { AC_MISS, AC_HIT, AC_NEGATIVE };
struct authcache;
struct authcache *authcache_new(size_t max_entries, int64_t ttl_ms, int64_t neg_ttl_ms,
				size_t neg_max_bytes);
void authcache_free(struct authcache **cp);
/* For auth, password must match the stored digest (a mismatch is a miss); for lookup pass
   NULL. On AC_HIT *rec_r holds a new reference. */
enum ac_res authcache_get(struct authcache *c, const char *key, const char *password,
			  int64_t now_ms, struct ldapauth_rec **rec_r);
/* rec NULL stores a negative entry. password (auth) is kept only as a salted digest. */
void authcache_put(struct authcache *c, const char *key, struct ldapauth_rec *rec,
		   const char *password, int64_t now_ms);
void authcache_clear(struct authcache *c);
void authcache_remove(struct authcache *c, const char *key);
/* The TTLs of entries put from now on (a SIGHUP; the entries kept so far keep theirs). */
void authcache_set_ttls(struct authcache *c, int64_t ttl_ms, int64_t neg_ttl_ms);
/* Lowers the entry bound to max_entries (never raises it); the least recently used entries
   past it go now. */
void authcache_limit(struct authcache *c, size_t max_entries);
size_t authcache_count(const struct authcache *c);
/* Bytes the negative entries hold (as authcache counts them); *count_r (may be NULL) gets how
   many there are. */
size_t authcache_negative_bytes(const struct authcache *c, size_t *count_r);
/* SHA-256(salt || password): what a positive auth entry keeps of the password that passed. */
#define AC_SALT 16
#define AC_DIGEST 32
void authcache_digest(const unsigned char *salt, const char *password, unsigned char *out);

/* authshm.c: the same cache shared by every worker of a daemon (ldapauth_shared_new): fixed
   slots in a region the master maps before it forks. authshm_put returns false when the
   entry is not kept there (a record too big for a slot, or no room for a negative entry
   among the users'): the worker's own authcache keeps it then. */
struct ldapauth_shared;
/* The entry bound of a worker's own cache beside the shared one: it keeps only what the
   shared one refuses (long alias lists, negatives with no room), not auth_cache_size. */
#define LDAPAUTH_PRIVATE_CACHE_MAX 1024
enum ac_res authshm_get(struct ldapauth_shared *s, const char *key, const char *password,
			int64_t now_ms, struct ldapauth_rec **rec_r);
bool authshm_put(struct ldapauth_shared *s, const char *key, struct ldapauth_rec *rec,
		 const char *password, int64_t now_ms);
void authshm_remove(struct ldapauth_shared *s, const char *key);
void authshm_clear(struct ldapauth_shared *s);
size_t authshm_count(struct ldapauth_shared *s);
/* The TTLs of entries any worker puts from now on (each worker's SIGHUP sets the same). */
void authshm_set_ttls(struct ldapauth_shared *s, int64_t ttl_ms, int64_t neg_ttl_ms);
/* Takes the lock and keeps it (tests: a child that exits holding it, as a worker killed). */
void authshm_lock(struct ldapauth_shared *s);

/* ldap_filter.c: RFC 4515 filter templates. %s whole name, %u part before '@' (all of it
   without one), %d part after '@' (empty), %% a '%'. Returns a malloc'd filter, or NULL when
   the template is bad. */
char *ldapauth_filter_expand(const char *tmpl, const char *name);
/* Whether a template is well formed (only %s %u %d %%). */
bool ldapauth_filter_valid(const char *tmpl);

/* passwd.c: userPassword schemes. 1 match, 0 mismatch, -1 unknown scheme or malformed. */
int ldapauth_passwd_verify(const char *stored, size_t slen, const char *password);

/* static_backend.c: the users file. */
struct static_users;
int static_users_load(const char *path, struct static_users **su_r, char **error_r);
void static_users_free(struct static_users **sup);
/* By login name (auth) or by any address (lookup); NULL when absent. The stored hash of a
   login is returned in *hash_r. */
struct ldapauth_rec *static_users_find_login(const struct static_users *su, const char *name,
					     const char **hash_r);
struct ldapauth_rec *static_users_find_address(const struct static_users *su, const char *addr);
/* Every user, in login order. */
void static_users_each(const struct static_users *su,
		       void (*cb)(const struct ldapauth_user *u, void *arg), void *arg);
/* ldapauth.c: the first line of a secret file (bind_password_file); -1 with *error_r. */
int ldapauth_read_secret(const char *path, char **out_r, char **error_r);

/* ldap_conn.c: a pool of LDAP connections of one kind. */
enum lpool_kind { LPOOL_SEARCH, LPOOL_BIND };
struct lpool_opts {
	char **uris; /* tried in turn */
	size_t nuris;
	bool starttls;
	const char *ca;      /* "" = the system's */
	const char *bind_dn; /* search pool: service account ("" anonymous) */
	const char *bind_pw;
	unsigned size;
	int64_t timeout_ms;
};
struct lpool;
/* -1 with *error_r (free it) when a URI is bad. */
int lpool_new(struct ldapauth *la, struct event_base *base, enum lpool_kind kind,
	      const struct lpool_opts *o, struct lpool **p_r, char **error_r);
void lpool_free(struct lpool **pp);
/* Queues req->op; the pool starts it when a connection is free and reports through
   ldapauth_op_* below. */
void lpool_submit(struct lpool *p, struct ldapauth_req *req);
/* Withdraws req (timeout, cancel): dequeued or abandoned. */
void lpool_withdraw(struct lpool *p, struct ldapauth_req *req);
void lpool_stats(const struct lpool *p, unsigned *open_r, unsigned *open_max_r,
		 unsigned *inflight_max_r, uint64_t *connects_r, uint64_t *failures_r);

/* ldapauth.c, called by the pool. */
/* Starts req's operation on ld; returns an LDAP result code (LDAP_SUCCESS: *msgid_r set). */
int ldapauth_op_send(struct ldapauth_req *req, LDAP *ld, int *msgid_r);
/* The operation's complete answer (a search chain or a bind result); msg stays the caller's. */
void ldapauth_op_result(struct ldapauth_req *req, LDAP *ld, LDAPMessage *msg);
/* The operation cannot complete (connection lost or refused). */
void ldapauth_op_failed(struct ldapauth_req *req, const char *reason);


#endif

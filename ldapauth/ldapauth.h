/* ldapauth.h — authentication and recipient lookup for a libevent base, against OpenLDAP (bind
 * or lookup mode) or a users file, with a positive/negative cache.
 *
 * Every call is asynchronous: ldapauth_auth() and ldapauth_lookup() return at once and the
 * callback runs later from the event loop (never from inside the call, even for a cache hit or a
 * refused input). The callback receives exactly one of four results; a temporary failure
 * (directory down, timeout, busy) is never reported as wrong credentials. The directory is
 * reached through libldap's asynchronous calls with its descriptor in the event loop, over a
 * pool of [directory] pool_size search connections and [directory] bind_pool_size user-bind
 * connections (auth_mode = bind).
 *
 * Inputs are checked before anything is asked: an empty password, a NUL, CR or LF in a name or
 * password, or a name longer than LDAPAUTH_NAME_MAX is refused (wrong credentials for auth, no
 * such user for lookup) without a directory call. Every value put in a filter is escaped
 * (RFC 4515).
 *
 * One ldapauth per event base: a daemon creates it in each worker after fork (connections open
 * on first use). The process must ignore SIGPIPE (Heron's daemons do): libldap writes to
 * sockets the directory may have closed. Not thread-safe; do not free it from a callback. */
#ifndef HERON_LDAPAUTH_H
#define HERON_LDAPAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/metrics_std.h"

struct conf;
struct event_base;

#define LDAPAUTH_NAME_MAX 320      /* login names and addresses, bytes */
#define LDAPAUTH_PASSWORD_MAX 1024 /* bytes */

enum ldapauth_result {
	LDAPAUTH_OK = 0,   /* authenticated / address exists; reply->user is set */
	LDAPAUTH_EBADCRED, /* wrong password (or a refused one) */
	LDAPAUTH_ENOUSER,  /* no such user or address (or a refused name) */
	LDAPAUTH_ETEMP,    /* temporary: directory down, timeout, busy; try again later */
};

/* A user as the directory describes it. Strings are NUL-terminated; optional ones are NULL when
   absent. Valid only during the callback: copy what you keep. */
struct ldapauth_user {
	char *login;    /* login name (the uid attribute; the file's name) */
	char *address;  /* primary address (mail) */
	char **aliases; /* other addresses (mail, mailLocalAddress, mailAlternateAddress) */
	size_t naliases;
	char *mailhost; /* home host (mailHost), NULL: this host */
	int partition;  /* store partition, -1: by hash */
	uint64_t quota; /* bytes, 0: none */
	char *dn;       /* entry DN; NULL for the file backend */
};

struct ldapauth_reply {
	enum ldapauth_result result;
	const struct ldapauth_user *user; /* LDAPAUTH_OK only */
	bool cached;                      /* answered by the cache, no directory call */
	bool refused;                     /* refused by the input checks, no directory call */
	const char *reason;               /* short text for logs (never a secret) */
	/* ldapauth_scram only: the user's SCRAM-SHA-256 secret "ITERATIONS,SALT,STOREDKEY,
	   SERVERKEY" (set exactly when result is LDAPAUTH_OK) */
	const char *scram;
};

typedef void ldapauth_cb(const struct ldapauth_reply *reply, void *arg);

struct ldapauth;
struct ldapauth_req;

/* Counters since ldapauth_new(). directory_calls counts searches and binds sent. */
struct ldapauth_stats {
	uint64_t requests, cache_hits, cache_misses, directory_calls, refused;
	uint64_t ok, badcred, nouser, temp, timeouts;
	uint64_t connects, connect_failures;
	unsigned conns_open, conns_open_max; /* search + bind connections */
	unsigned inflight_max;               /* most directory operations at once */
	size_t cache_entries; /* in this process's own cache (not the shared table's) */
	/* round trips of directory operations answered (search or bind sent to the result),
	   in the metrics' buckets (common/metrics.h), and their sum */
	uint64_t rtt[METRICS_NLE + 1];
	uint64_t rtt_sum_us;
};

/* Sets up from the [directory] (and [tls] ca) section of c. Connections are opened on first
   use. Errors (a bad URI, an unreadable password or users file): -1 with *error_r (free it). */
int ldapauth_new(struct event_base *base, const struct conf *c, struct ldapauth **la_r,
		 char **error_r);
/* Fails nothing: pending requests are dropped without their callbacks. Sets *lap = NULL. */
void ldapauth_free(struct ldapauth **lap);

/* Authenticates user with password. The returned handle is valid until the callback runs or
   ldapauth_cancel(); it may be ignored. */
struct ldapauth_req *ldapauth_auth(struct ldapauth *la, const char *user, const char *password,
				   ldapauth_cb *cb, void *arg);
/* SCRAM (RFC 5802): the user's {SCRAM-SHA-256} secret, for a server that then runs the
   exchange itself (common/sasl.h). LDAPAUTH_OK here is NOT an authentication: it says the
   user exists and has a secret (reply->scram); LDAPAUTH_EBADCRED: the user has no SCRAM
   secret (reply->user NULL); LDAPAUTH_ENOUSER, LDAPAUTH_ETEMP as for ldapauth_auth. Never
   answered from the cache and never stored in it (the cache's entries are password checks).
   Only where Heron reads the password values: auth_mode = lookup and the users file
   (ldapauth_scram_capable); in bind mode every request ends in LDAPAUTH_EBADCRED. */
struct ldapauth_req *ldapauth_scram(struct ldapauth *la, const char *user, ldapauth_cb *cb,
				    void *arg);
/* Whether ldapauth_scram can find secrets with this directory (lookup mode or the users
   file): the daemons advertise SCRAM only then. */
bool ldapauth_scram_capable(const struct ldapauth *la);
/* Finds the user whose login name is login (as a login finds it: the file's name, or LDAP's
   user_filter), without a password: whether the directory has such a user (imapd's SETACL
   giving rights to a user who has not logged in yet). LDAPAUTH_OK with reply->user,
   LDAPAUTH_ENOUSER, LDAPAUTH_ETEMP; cached as lookups are. */
struct ldapauth_req *ldapauth_user(struct ldapauth *la, const char *login, ldapauth_cb *cb,
				   void *arg);
/* Finds the user that receives mail for address. */
struct ldapauth_req *ldapauth_lookup(struct ldapauth *la, const char *address, ldapauth_cb *cb,
				     void *arg);
/* The callback of *reqp will not run (a session closed). Sets *reqp = NULL. */
void ldapauth_cancel(struct ldapauth_req **reqp);

/* The cache shared by every worker of a daemon: made by the master before it forks (NULL
   when [directory] auth_cache_size is 0), given to each worker's ldapauth with
   ldapauth_use_shared, freed by the master after the workers. Same TTLs and rules as the
   worker's own cache, whose place it takes (a record too big for its slots stays there); a
   login that one worker checked is a hit in the others. */
struct ldapauth_shared;
struct ldapauth_shared *ldapauth_shared_new(const struct conf *c);
void ldapauth_shared_free(struct ldapauth_shared **sp);
void ldapauth_use_shared(struct ldapauth *la, struct ldapauth_shared *sh);
/* A reloaded config's auth_cache_ttl and negative_cache_ttl, for the entries put from now on
   in this process's cache and in the shared one (call it on SIGHUP, then ldapauth_reload,
   which empties both). auth_cache_size and negative_cache_memory stay as at start. */
void ldapauth_reload_ttls(struct ldapauth *la, const struct conf *c);

/* Re-reads the users file (backend = file; call it on SIGHUP) and empties the cache. On error
   keeps the old users and returns -1 with *error_r. No-op for LDAP except the cache flush. */
int ldapauth_reload(struct ldapauth *la, char **error_r);

void ldapauth_get_stats(const struct ldapauth *la, struct ldapauth_stats *st);
/* Copies the counts into the directory families of common/metrics_std.h (a daemon's
   once-a-second tick); last keeps what the previous call saw (zeroed at the worker's start).
   Nothing without metrics_init or with la NULL. */
struct ldapauth_metrics_last {
	uint64_t requests, hits, misses, ok, badcred, nouser, temp, timeouts, connect_failures;
	struct metrics_hist_last rtt;
};
void ldapauth_metrics_publish(const struct ldapauth *la, struct ldapauth_metrics_last *last);
/* Counts one login's answer in MS_LOGINS: ok, temporary failure, or failure. */
void ldapauth_metrics_login(enum ldapauth_result result);
/* Every user of the directory of c ([directory]): the users file's, or an LDAP search of
   user_filter for any login (paged, so a server's size limit does not cut it short), each
   given to cb with its login and primary address (NULL when it has none). Blocks: for
   admin tools, never a daemon's loop. 0, or -1 with *error_r (malloc'd). */
int ldapauth_list_users(const struct conf *c,
			void (*cb)(const char *login, const char *address, void *arg), void *arg,
			char **error_r);

/* One user's home host in the LDAP directory of c (mailctl user move): the entry of login
   (user_filter under base) on uri (NULL: the first of [directory] uri; writes go to the
   provider), bound as bind_dn. *dn_r gets its DN and *old_r its mailhost_attribute value
   before (NULL when none), both malloc'd; with host not NULL the attribute is then replaced
   by host. Blocks: for admin tools. 0, or -1 with *error_r (malloc'd): no ldap backend, no
   such user, the server's refusal. */
int ldapauth_mailhost(const struct conf *c, const char *uri, const char *login, const char *host,
		      char **dn_r, char **old_r, char **error_r);

/* Password hashes (passwd.c) for userPassword and the users file: the schemes made
   (names without braces, NULL-terminated: SSHA SSHA256 SSHA512 CRYPT ARGON2 SCRAM-SHA-256),
   and the stored form "{SCHEME}..." of password in one of them (malloc'd; random salt), or
   NULL with *error_r (a constant) for an unknown scheme or a failure. Every scheme made is
   also verified locally (lookup mode, the users file). */
extern const char *const ldapauth_passwd_schemes[];
char *ldapauth_passwd_hash(const char *scheme, const char *password, const char **error_r);

/* "bind", "lookup" or "file". */
const char *ldapauth_mode(const struct ldapauth *la);
const char *ldapauth_strerror(enum ldapauth_result r);

#endif

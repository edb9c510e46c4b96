/* managesieved.h — types shared by the ManageSieve server's files: the worker's world and
 * one client session. */
#ifndef HERON_MANAGESIEVED_H
#define HERON_MANAGESIEVED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "common/buf.h"
#include "sieve/sieve_admin.h"

struct conf;
struct net_fds;
struct net_server;
struct store;
struct store_gc;
struct ldapauth;
struct ldapauth_req;
struct daemon_worker;
struct authguard;
struct sasl_plain;

struct ldapauth_shared;
struct ms_proxy;
struct evdns_base;

struct ms_worker_args {
	const struct conf *conf;
	const char *conf_path;       /* read again on SIGHUP */
	const struct conf *reloaded; /* the last SIGHUP's (its [directory] TTLs), NULL before */
	const struct net_fds *fds;
	const struct net_fds *metrics; /* [metrics] managesieved_listen (may be empty) */
	SSL_CTX *tls_ctx;
	struct ldapauth_shared *auth_cache; /* the workers' login cache (NULL: each its own) */
};

struct ms_server {
	struct event_base *base;
	const struct conf *conf;
	const char *conf_path;
	unsigned worker;
	SSL_CTX *tls_ctx;
	struct net_server *ns;
	struct store *store;
	struct store_gc *gc;
	struct ldapauth *auth;
	struct authguard *guard; /* the login throttle mtad and imapd share */
	struct sieve_admin_limits lim;
	bool allow_plaintext;
	int64_t timeout_ms;
	size_t nsessions;
	bool draining;
	char hostname[256]; /* [imapd] hostname: mailHost values naming this host */
	char *proxy_secret; /* [sieve] proxy_secret_file's secret, or NULL */
	/* whose [sieve] proxy_hosts, proxy_port and proxy_timeout the front uses: the last
	   SIGHUP's (or the master's last, for a worker started after one), else conf */
	const struct conf *proxy_conf;
	struct conf *reloaded; /* owned: the config this worker's last SIGHUP read, or NULL */
	struct evdns_base *proxy_dns; /* resolves store host names (made on first use) */
	TAILQ_HEAD(, ms_session) sessions;
};

#define MS_MAX_ARGS 6
#define MS_LINE_MAX 8192

struct ms_arg {
	const char *p; /* into the session's cmd buffer, NUL-terminated */
	size_t len;
	bool atom;
};

struct ms_session {
	uint64_t id;
	struct ms_server *srv;
	struct bufferevent *bev;
	char addr[128];
	char host[128];             /* the address without the port (the throttle's key) */
	struct sockaddr_storage sa; /* the peer (proxy_trusted) */
	char auth_user[321];        /* the name of the check in progress */
	struct sasl_plain *plain;   /* held by the throttle before its check */
	struct sasl_drive *scram;   /* AUTHENTICATE SCRAM-SHA-256[-PLUS] under way */
	bool scram_charged;         /* the throttle counts this exchange: its outcome is due */
	char scram_login[321];      /* the directory's name of the user, once the secret came */
	int scram_partition;
	struct event *hold;
	int hold_kind;
	char user[321]; /* the authenticated (store) user, "" before */
	unsigned part;
	char *mailhost;         /* the directory's home host of the user being authenticated */
	char *address;          /* its address (the proxy login's authorization identity) */
	char *sasl_final;       /* SCRAM's server-final, said once the proxy login is done */
	bool proxied_in;        /* store host: authenticated by a front's proxy credential */
	struct ms_proxy *proxy; /* front: the store host's connection, or NULL */
	bool tls, authed, closing, busy, dead, auth_cont;
	bool auth_external; /* AUTHENTICATE "EXTERNAL": a front's certificate (ms_session.c) */
	bool kicked;        /* mailctl kick: BYE once the step in progress is done */
	int64_t connected;  /* Unix time of the connect (mailctl who) */
	int64_t connected_us, cmd_us; /* monotonic µs: the connect, the last command */
	unsigned cmd_idx;             /* its metrics label (ms_metrics.c) */
	bool cmd_open;                /* waiting for its response */
	unsigned auth_failures;
	size_t need;           /* bytes the input must hold before it is parsed again */
	uint64_t discard_left; /* bytes of a refused literal still to drop */
	bool discard_line;     /* then the rest of its line */
	struct buf cmd;        /* the current command's argument bytes */
	size_t lit_bytes;      /* of which in literals (not counted against the line) */
	size_t pending_lit;    /* the literal being waited for, bytes */
	struct ms_arg arg[MS_MAX_ARGS];
	int narg;
	struct ldapauth_req *req;
	struct event *timer; /* closing: waits for a TLS socket to flush */
	TAILQ_ENTRY(ms_session) entry;
};

/* ms_session.c */
enum { HOLD_START = 1, HOLD_FAIL };
void ms_session_new(struct ms_server *srv, int fd, const struct sockaddr *sa, socklen_t salen,
		    const char *addr, const char *host);
/* Front: the login at the store host ended (why: NULL when it succeeded): the AUTHENTICATE's
   answer, then the relay or the session's next command. */
void ms_session_proxied(struct ms_session *s, const char *why);
/* Closes after the output has flushed / at once. */
void ms_session_close(struct ms_session *s);
void ms_session_free(struct ms_session *s);
void ms_session_drain(struct ms_session *s);
/* mailctl kick: BYE and close now, or after the step in progress. */
void ms_session_kick(struct ms_session *s);

/* ms_proxy.c: the proxy login between a front and a store host (docs/scale-out.md). */
/* Reads [sieve] proxy_secret_file (each worker at start): 0, or -1 with *error_r. */
int ms_proxy_init(struct ms_server *srv, char **error_r);
/* SIGHUP (srv->proxy_conf the new config): the front's TLS client context made again. */
void ms_proxy_reload(struct ms_server *srv);
void ms_proxy_server_free(struct ms_server *srv);
/* Store host: whether the client is a front (a proxy_trusted address, a secret set). */
bool ms_proxy_from_front(const struct ms_session *s);
/* Store host: whether authcid/passwd is the proxy credential, from a proxy_trusted address. */
bool ms_proxy_credential_ok(const struct ms_session *s, const char *authcid, const char *passwd,
			    const char **why_r);
/* Front: authenticates s->user (authorization identity authz) at store host host's
   managesieved; ends with ms_session_proxied(), never from inside this call. */
void ms_proxy_start(struct ms_session *s, const char *authz, const char *host);
/* Front: the client's OK went out: the bytes are relayed both ways from now on. */
void ms_proxy_relay(struct ms_session *s);
bool ms_proxy_relaying(const struct ms_session *s);
void ms_proxy_free(struct ms_session *s);

/* ms_metrics.c: managesieved's metrics (common/metrics.h) and control socket. */
void ms_metrics_init(unsigned workers);
/* A command line was parsed (its verb, NULL when none) / a response line starts. */
void ms_metrics_command(struct ms_session *s, const char *verb);
void ms_metrics_response(struct ms_session *s, const char *text);
struct obs;
struct obs *ms_obs_start(struct ms_server *srv, unsigned worker, const struct net_fds *fds);
int ms_server_run(struct daemon_worker *w, const struct ms_worker_args *wa);

#endif

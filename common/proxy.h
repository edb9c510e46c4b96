/* proxy.h — the pieces of the proxy login between a front and a store host that do not
 * depend on the protocol (imapd/imap_proxy.c, managesieve/ms_proxy.c): the shared secret's
 * file, the SASL PLAIN response the front sends, the store host's address from a
 * "host=addr:port" map, the front's connection to it with the login's deadline, and the store
 * host's check of the credential, and TLS (STARTTLS) on that connection. */
#ifndef HERON_PROXY_H
#define HERON_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/socket.h>

#include <event2/bufferevent.h>

#include "common/net.h"

struct conf_list;
struct conf_cidrs;
struct evbuffer;
struct evdns_base;
struct event;
struct event_base;

#define PROXY_LINE_MAX 8192 /* a store host's greeting and login reply lines */
/* Store hosts whose last TLS session a front keeps: a front dials a few; this bounds what a
   directory with many mailHost names could make it keep (about 2 KB each). */
#define PROXY_TLS_SESSIONS 128

/* The first line of path into *secret_r (xmalloc'd; free with proxy_secret_free); an empty
   path gives 0 and *secret_r = NULL. -1 with *error_r (xmalloc'd) when the file cannot be
   read, is empty or longer than 1 KiB. */
int proxy_secret_read(const char *path, char **secret_r, char **error_r);
/* Wipes and frees *secretp; *secretp = NULL; safe on NULL. */
void proxy_secret_free(char **secretp);

/* base64 of authz NUL user NUL secret (RFC 4616), xmalloc'd; the caller wipes it. */
char *proxy_plain_b64(const char *authz, const char *user, const char *secret);

/* Where store host host listens: its entry in map ("name=addr:port", "name=[v6]:port",
   "name=addr"; names compared without case), else host on default_port. */
void proxy_target(const struct conf_list *map, long long default_port, const char *host,
		  char *addr, size_t asz, char *port, size_t psz);

/* Whether h may be put in a referral URL as a host: letters, digits, '.', '-', ':' (a
   port), 1..253 bytes. */
bool proxy_host_ok(const char *h);

/* Whether h is an IPv4 or IPv6 address (no name to resolve). */
bool proxy_numeric_host(const char *h);

/* Front: connects to store host host (proxy_target of map and default_port; a name is
   resolved with *dns, made on first use); where (wsz bytes) gets "address:port" for logs.
   cb runs as net_connect's. */
struct net_connect *proxy_connect(struct event_base *base, struct evdns_base **dns,
				  const struct conf_list *map, long long default_port,
				  const char *host, int64_t timeout_ms, char *where, size_t wsz,
				  net_connect_cb *cb, void *arg);

/* Front: the connection to a store host during the login and the login's deadline, the part
   the IMAP and ManageSieve fronts share. done(arg, NULL) when the connection is made (be
   then reads with the readcb and eventcb given, arg theirs); done(arg, why) when it failed,
   the deadline passed or proxy_dial_fail_soon's time came. */
typedef void proxy_dial_done_cb(void *arg, const char *why);

struct proxy_dial {
	struct net_connect *nc;
	struct bufferevent *be; /* the store host's connection, once made */
	struct event *timer;    /* the login's deadline */
	char host[256];         /* the store host (mailHost), for logs */
	char where[320];        /* address:port connected to */
	const char *early;      /* a failure known at the start, said from the timer */
	bool tls;               /* be is TLS (proxy_dial_starttls), its handshake maybe running */
	bool offered;           /* a session of an earlier connection was offered */
	bool resumed;           /* the handshake resumed it (after proxy_dial_event's "done") */
	proxy_dial_done_cb *done;
	bufferevent_data_cb readcb;
	bufferevent_event_cb eventcb;
	void *arg;
};

/* Fills d for store host host (its timer made on base, not armed). */
void proxy_dial_init(struct proxy_dial *d, struct event_base *base, const char *host,
		     proxy_dial_done_cb *done, bufferevent_data_cb readcb,
		     bufferevent_event_cb eventcb, void *arg);
/* Arms the deadline (timeout_ms) and connects (proxy_connect's map, default_port, dns). */
void proxy_dial_start(struct proxy_dial *d, struct event_base *base, struct evdns_base **dns,
		      const struct conf_list *map, long long default_port, int64_t timeout_ms);
/* done(arg, why) from the loop, not from the caller (that may be the session's reader). */
void proxy_dial_fail_soon(struct proxy_dial *d, const char *why);
/* Stops connecting and the deadline (be stays). */
void proxy_dial_stop(struct proxy_dial *d);
/* Stops, frees be and the timer. */
void proxy_dial_free(struct proxy_dial *d);

/* Front: the process's TLS client context for the store hosts, made at a worker's start and
   again at SIGHUP (never per login): their certificates must chain to ca_file (empty: the
   system's CAs); cert_file and key_file, when both are set, are the front's client
   certificate. The sessions kept from the context before are dropped. -1 with *error_r
   (xmalloc'd) when it cannot be made: the context before stays, and with none the logins say
   why. */
int proxy_tls_load(const char *ca_file, const char *cert_file, const char *key_file,
		   char **error_r);
/* Frees the context and the sessions (proxy_tls = none, or the worker's end). */
void proxy_tls_unload(void);
/* proxy_tls_load when want (proxy = yes with proxy_tls = starttls), else proxy_tls_unload;
   a failure is logged (who: the process) and is not fatal. */
void proxy_tls_configure(bool want, const char *ca_file, const char *cert_file,
			 const char *key_file, const char *who);

/* Front: TLS on d->be once the store host answered STARTTLS's "ready" (the bytes after it
   are dropped), with proxy_tls_load's context: the store host's certificate must carry
   d->host (its mailHost name, or the address it is). The last session of this store host
   (its name and address), if one is kept and still valid, is offered: a store host that
   takes it skips the full handshake (d->resumed); one that does not (restarted, a new key)
   makes a full one, its certificate verified. The session is kept per process (at most
   PROXY_TLS_SESSIONS store hosts, the oldest dropped first); one whose handshake failed is
   dropped. d->be is the TLS bufferevent from now on, with d's callbacks; what is written to
   it goes after the handshake. False with why (wsz bytes) when TLS cannot start (d->be is
   then unchanged). */
bool proxy_dial_starttls(struct proxy_dial *d, char *why, size_t wsz);
/* Front: what eventcb's what on d->be says: true when it only reports TLS's finished
   handshake (nothing to do; logged with who at debug level); else why (wsz bytes) tells what
   ended the connection, TLS's reason included when the handshake or the verification of the
   store host's certificate failed. */
bool proxy_dial_event(struct proxy_dial *d, short what, char *why, size_t wsz);

/* Front: "tls=TLSv1.3 tls_session=resumed" (or full), or "tls=no" without TLS, into buf
   (64 bytes are enough), for the login's log line; returns buf. */
const char *proxy_dial_tls_log(const struct proxy_dial *d, char *buf, size_t size);

/* Front: the proxy login's SASL mechanism, its initial response in *b64_r (xmalloc'd; the
   caller wipes and frees it): "EXTERNAL" with authz when the front has a client certificate
   (cert: proxy_cert_file and proxy_key_file set) and d's leg is TLS, else "PLAIN" with
   authz, user and secret. NULL with *why_r when neither can be used. */
const char *proxy_login_sasl(const struct proxy_dial *d, bool cert, const char *authz,
			     const char *user, const char *secret, char **b64_r,
			     const char **why_r);

/* Front: one line of the store host's login dialogue from in: 1 with *line_r (xmalloc'd,
   without its CRLF), 0 when the line is not complete, -1 when it is longer than
   PROXY_LINE_MAX or holds a NUL (*why_r says which). */
int proxy_readln(struct evbuffer *in, char **line_r, const char **why_r);

/* Store host: the CAs front certificates must chain to (proxy_client_ca_file), read at a
   worker's start and SIGHUP; empty: none (EXTERNAL refused, no certificate asked for). -1
   with *error_r (xmalloc'd) when the file cannot be read (the CAs before stay). */
int proxy_fronts_load(const char *ca_file, char **error_r);
/* proxy_fronts_load, a failure logged (who: the process). */
void proxy_fronts_configure(const char *ca_file, const char *who);
/* Whether proxy_client_ca_file's CAs are loaded. */
bool proxy_fronts_enabled(void);
/* Store host, STARTTLS from a proxy_trusted address: the TLS bufferevent bev (just made,
   before its handshake) asks for a client certificate (not required: a front without one
   uses the shared secret). Nothing when no proxy_client_ca_file is loaded. */
void proxy_fronts_ask_cert(struct bufferevent *bev);
/* Store host, AUTHENTICATE EXTERNAL: NULL when the client (from_front: from a proxy_trusted
   address) is in TLS with a client certificate that chains to proxy_client_ca_file's CAs
   now (checked at this login, a resumed session's too, as a TLS client, X509_PURPOSE_SSL_CLIENT);
   else why (wsz bytes), returned. */
const char *proxy_external_check(struct bufferevent *bev, bool from_front, char *why, size_t wsz);
/* Store host: the authorization identity of an EXTERNAL response in base64 ("=" or "" for
   the empty one) into authz (SASL_NAME_MAX + 1 bytes); -1 when it is not base64, too long or holds a NUL. */
int proxy_external_decode(const char *b64, size_t len, char *authz);

/* Store host: whether authcid/passwd is the proxy credential (proxy_user and the secret,
   compared in constant time) presented from a trusted address. */
bool proxy_credential_ok(const char *secret, const char *proxy_user,
			 const struct conf_cidrs *trusted, const struct sockaddr *sa,
			 const char *authcid, const char *passwd);

#endif

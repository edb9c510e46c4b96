/* tls.h — OpenSSL 3 glue: server and client contexts from [tls], implicit TLS on an accepted
 * socket, STARTTLS on an existing bufferevent, peer info, and a self-signed certificate maker.
 *
 * Contexts are built once per process (after fork is fine) and shared by its connections.
 * TLS 1.2 is the floor whatever the config says; compression and renegotiation are off.
 * Server contexts accept resumption (a session id context set; their ticket keys kept over
 * a reload). 
 * Errors are NULL or -1 with a malloc'd *error_r holding OpenSSL's reason; free it. */
#ifndef HERON_TLS_H
#define HERON_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "common/conf_keys.h"

struct conf;

/* The [tls] settings are a struct tls_conf (common/conf_keys.h): conf_values(c)->tls, or one
   the caller fills. Strings are not owned; empty strings and NULL mean "not set". */

/* A server context with t->cert and t->key (both required, the key must match). */
SSL_CTX *tls_server_ctx_new(const struct tls_conf *t, char **error_r);

enum tls_verify {
	TLS_VERIFY_NONE, /* opportunistic: encrypt, accept any certificate */
	TLS_VERIFY_PEER, /* chain must verify against t->ca (or the system store) and the name */
};
/* A client context (cert and key are used as a client certificate when both are set). */
SSL_CTX *tls_client_ctx_new(const struct tls_conf *t, enum tls_verify verify, char **error_r);
void tls_ctx_free(SSL_CTX **ctxp);
/* SIGHUP: builds a server context from new's [tls] (the files read again, so a certificate
   renewed under the same path is picked up) for the connections from now on, frees *ctxp
   (sessions still using it keep it alive: OpenSSL counts its references), stores the new
   one and returns true. False, logged and *ctxp unchanged, when new has no cert (TLS stays
   as it is until a restart) or its context cannot be built. who: for the log. */
bool tls_server_ctx_reload(SSL_CTX **ctxp, const struct conf *new, const char *who);

/* Implicit TLS (IMAPS 993, SMTPS 465): a bufferevent over the accepted socket fd that runs the
   server handshake first; it owns fd (closed on free, also when this returns NULL). The event
   callback sees BEV_EVENT_CONNECTED when the handshake completes and BEV_EVENT_ERROR when it
   fails (see tls_error); the same holds for the STARTTLS forms below. */
struct bufferevent *tls_server_accept(struct event_base *base, SSL_CTX *ctx, int fd);

/* STARTTLS, server side: call after queueing the plaintext "ready" reply on plain. Every byte
   still in plain's input buffer is discarded first (a client may not pipeline past STARTTLS:
   such bytes are an injection attempt, RFC 3207 section 4.2 / RFC 3501 6.2.1) and their count
   stored in *dropped_r (may be NULL). Returns a TLS filter bufferevent over plain that owns it
   (freeing it frees plain, and plain's socket when plain was made with BEV_OPT_CLOSE_ON_FREE);
   the pending reply is sent in plaintext before the handshake. A line_reader reading plain
   must be reset (line_reader_reset). The
   caller moves its callbacks, timeouts and watermarks to the returned bufferevent and must not
   use plain again. NULL on failure (plain is then untouched and still the caller's). */
struct bufferevent *tls_starttls_server(struct bufferevent *plain, SSL_CTX *ctx,
					size_t *dropped_r);
/* Client side, for STARTTLS after the server's "ready" reply and for implicit TLS after
   net_connect: wraps plain like tls_starttls_server (same ownership, input discarded). host
   goes into SNI and, with TLS_VERIFY_PEER, must match the certificate (a DNS name or an IP
   address); NULL skips both. */
struct bufferevent *tls_starttls_client(struct bufferevent *plain, SSL_CTX *ctx, const char *host,
					size_t *dropped_r);

/* The SSL tls_starttls_client makes (SNI and the name check for host, as there), for a
   caller that sets more on it (a session to resume) before tls_starttls_client_ssl; NULL
   when it cannot be made. */
SSL *tls_client_ssl_new(SSL_CTX *ctx, const char *host);

/* As tls_starttls_client with an SSL the caller made and set up (SNI, DANE, verification),
   which the returned bufferevent owns; NULL leaves ssl to the caller. */
struct bufferevent *tls_starttls_client_ssl(struct bufferevent *plain, SSL *ssl,
					    size_t *dropped_r);

/* After the handshake: protocol ("TLSv1.3"), cipher ("TLS_AES_256_GCM_SHA384") and secret bits;
   NULLs and 0 for a bufferevent without TLS or before the handshake. Outputs may be NULL. */
void tls_peer_info(struct bufferevent *bev, const char **proto_r, const char **cipher_r,
		   int *bits_r);
/* Whether the peer presented a certificate that verified (client side: the server's). */
bool tls_peer_verified(struct bufferevent *bev);
/* Channel binding data of a server-side session after the handshake, into out (size >= 64;
   *len_r set): tls-exporter (RFC 9266: 32 bytes of the exporter "EXPORTER-Channel-Binding",
   TLS 1.3 only) or tls-server-end-point (RFC 5929 section 4.1: the hash of our certificate
   with its signature's digest, SHA-256 in place of MD5 and SHA-1). false when bev has no
   finished TLS session or the type is not available on it. */
enum tls_cb_type { TLS_CB_EXPORTER, TLS_CB_SERVER_END_POINT };
bool tls_channel_binding(struct bufferevent *bev, enum tls_cb_type type, unsigned char *out,
			 size_t size, size_t *len_r);
/* Whether tls-exporter is available on bev (a finished TLS 1.3 session). */
bool tls_has_exporter(struct bufferevent *bev);
/* Whether bev is a TLS bufferevent made here. */
bool tls_is_tls(struct bufferevent *bev);
/* Text for the last TLS error of bev (after BEV_EVENT_ERROR), written into out; returns out
   ("" when there is none). */
const char *tls_error(struct bufferevent *bev, char *out, size_t size);

/* Writes a new self-signed certificate (EC P-256, SHA-256, valid from now for days days) for
   common name cn with subjectAltName DNS:cn, IP:127.0.0.1 and IP:::1 into cert_path, and its
   key into key_path (mode 0600). Each file is written to a temporary name and renamed. */
int tls_selfsigned_write(const char *cert_path, const char *key_path, const char *cn, int days,
			 char **error_r);

#endif

/* imap_server.h — what imapd.c (the master) hands to each worker. */
#ifndef HERON_IMAP_SERVER_H
#define HERON_IMAP_SERVER_H

#include <stdbool.h>

#include <openssl/ssl.h>

#include "common/conf.h"
#include "common/net.h"

struct daemon_worker;
struct shmtable;
struct ldapauth_shared;

struct imap_worker_args {
	struct conf *conf;           /* for workers started from now on (SIGHUP replaces it) */
	const char *conf_path;       /* the file SIGHUP reads again */
	struct net_fds *plain, *tls; /* bound by the master */
	struct net_fds *metrics;     /* [metrics] imapd_listen, bound by the master (or empty) */
	SSL_CTX *tls_ctx;            /* NULL when [tls] cert is not set; SIGHUP may replace it */
	unsigned workers;
	struct shmtable *shared; /* connections per address and in total, sessions per user */
	struct ldapauth_shared *auth_cache; /* the workers' login cache (NULL: each its own) */
};

/* Failed logins of an address are forgotten this long after its last one (cmd_auth.c). */
#define IMAP_PENALTY_FORGET_MS (15 * 60 * 1000)

/* Runs one worker until it has drained; returns its exit status. */
int imap_server_run(struct daemon_worker *w, const struct imap_worker_args *a);

#endif

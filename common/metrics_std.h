/* metrics_std.h — the metric families every Heron daemon shares (connections, TLS, logins,
 * the directory, the store), so that one dashboard reads them all alike. A daemon's table
 * starts with these (metrics_std_defs fills its first MS_NSTD rows) and goes on with its own
 * families numbered from MS_NSTD. Families a daemon never counts (the sink's directory) are
 * sparse: left out of its output while they are 0. */
#ifndef HERON_METRICS_STD_H
#define HERON_METRICS_STD_H

#include <event2/bufferevent.h>

#include "common/metrics.h"

enum metrics_std {
	MS_CONN_OPEN,        /* gauge {service} */
	MS_CONN_ACCEPTED,    /* counter {service} */
	MS_CONN_REFUSED,     /* counter {service, reason} */
	MS_TLS,              /* counter {protocol}: handshakes completed */
	MS_TLS_FAIL,         /* counter: handshakes that failed */
	MS_LOGINS,           /* counter {result} */
	MS_DIR_REQUESTS,     /* counter: logins and lookups asked of the directory client */
	MS_DIR_CACHE,        /* counter {result}: hit, miss */
	MS_DIR_RESULTS,      /* counter {result}: ok, badcred, nouser, temp, timeout */
	MS_DIR_RTT,          /* histogram: directory round trips */
	MS_DIR_CONNS,        /* gauge: directory connections open */
	MS_DIR_CONNECT_FAIL, /* counter */
	MS_DIR_CACHE_OWN,    /* gauge: entries in the workers' own login caches */
	MS_STORE_COMMITS,    /* counter: index write commits of the group committer */
	MS_STORE_OPS,        /* counter: writes they carried (batch size = ops / commits) */
	MS_STORE_FSYNCS,     /* counter: fsync calls of libstore (files, directories, index) */
	MS_PROXY_TLS,        /* counter {handshake}: a front's TLS handshakes with store hosts */
	MS_NSTD
};

/* Label values (index = the enum below each). */
extern const char *const metrics_refuse_reasons[];
enum { MS_REFUSE_MAX, MS_REFUSE_PER_IP, MS_REFUSE_UNAUTH };
extern const char *const metrics_login_results[];
enum { MS_LOGIN_OK, MS_LOGIN_FAIL, MS_LOGIN_TEMP, MS_LOGIN_THROTTLED };
extern const char *const metrics_dir_results[];
enum { MS_DIR_OK, MS_DIR_BADCRED, MS_DIR_NOUSER, MS_DIR_TEMP, MS_DIR_TIMEOUT };

/* Fills defs[0 .. MS_NSTD) for a daemon whose listeners are services (NULL-terminated,
   e.g. { "imap", "imaps", NULL }: the service label's values). */
void metrics_std_defs(struct metric_def *defs, const char *const *services);

/* A TLS handshake of bev completed: counted by its protocol. */
void metrics_tls_handshake(struct bufferevent *bev);
#define metrics_tls_failed() metrics_inc(MS_TLS_FAIL, 0, 0)

/* The last values a histogram kept elsewhere was published with (metrics_hist_add_since). */
struct metrics_hist_last {
	uint64_t b[METRICS_NLE + 1];
	uint64_t sum_us;
};
/* Adds to histogram id's series (a, b) what buckets b_now[] and sum_now grew by. */
void metrics_hist_add_since(unsigned id, unsigned a, unsigned b, const uint64_t *b_now,
			    uint64_t sum_now, struct metrics_hist_last *last);

#endif

/* metrics_std.c — owns the families every daemon shares (their names, help and labels) and
 * the helpers that count into them. */
#include <string.h>

#include "common/metrics_std.h"
#include "common/tls.h"

const char *const metrics_refuse_reasons[] = { "max_connections", "per_ip", "unauth_per_ip",
					       NULL };
const char *const metrics_login_results[] = { "ok", "fail", "temp", "throttled", NULL };
const char *const metrics_dir_results[] = { "ok", "badcred", "nouser", "temp", "timeout", NULL };
static const char *const tls_protocols[] = { "TLSv1.2", "TLSv1.3", "other", NULL };
static const char *const proxy_handshakes[] = { "full", "resumed", NULL };
static const char *const cache_results[] = { "hit", "miss", NULL };

void metrics_std_defs(struct metric_def *defs, const char *const *services)
{
	const struct metric_def std[MS_NSTD] = {
		[MS_CONN_OPEN] = { "heron_connections_open",
				   METRIC_GAUGE,
				   "client connections open",
				   { "service" },
				   { services } },
		[MS_CONN_ACCEPTED] = { "heron_connections_accepted_total",
				       METRIC_COUNTER,
				       "client connections accepted",
				       { "service" },
				       { services } },
		[MS_CONN_REFUSED] = { "heron_connections_refused_total",
				      METRIC_COUNTER,
				      "client connections refused by a cap",
				      { "service", "reason" },
				      { services, metrics_refuse_reasons } },
		[MS_TLS] = { "heron_tls_handshakes_total",
			     METRIC_COUNTER,
			     "TLS handshakes completed, by protocol version",
			     { "protocol" },
			     { tls_protocols },
			     .sparse = true },
		[MS_TLS_FAIL] = { "heron_tls_handshake_failures_total", METRIC_COUNTER,
				  "TLS handshakes that failed", .sparse = true },
		[MS_LOGINS] = { "heron_logins_total",
				METRIC_COUNTER,
				"logins (LOGIN, AUTHENTICATE, AUTH) by result: ok, fail (bad "
				"credentials or no such user), temp (directory unavailable), "
				"throttled (refused by the login throttle)",
				{ "result" },
				{ metrics_login_results },
				.sparse = true },
		[MS_DIR_REQUESTS] = { "heron_directory_requests_total", METRIC_COUNTER,
				      "logins and recipient lookups asked of the directory client",
				      .sparse = true },
		[MS_DIR_CACHE] = { "heron_directory_cache_total",
				   METRIC_COUNTER,
				   "directory requests answered by the auth cache (hit) or not "
				   "(miss)",
				   { "result" },
				   { cache_results },
				   .sparse = true },
		[MS_DIR_RESULTS] = { "heron_directory_results_total",
				     METRIC_COUNTER,
				     "directory requests by outcome",
				     { "result" },
				     { metrics_dir_results },
				     .sparse = true },
		[MS_DIR_RTT] = { "heron_directory_round_trip_seconds", METRIC_HISTOGRAM,
				 "LDAP operations (search, bind) from sending to the result",
				 .sparse = true },
		[MS_DIR_CONNS] = { "heron_directory_connections_open", METRIC_GAUGE,
				   "LDAP connections open (search and bind pools)",
				   .sparse = true },
		[MS_DIR_CONNECT_FAIL] = { "heron_directory_connect_failures_total", METRIC_COUNTER,
					  "LDAP connections that failed to open", .sparse = true },
		[MS_DIR_CACHE_OWN] = { "heron_directory_cache_worker_entries", METRIC_GAUGE,
				       "login cache entries the workers keep beside the shared "
				       "table (records too big for a slot, negatives with no room)",
				       .sparse = true },
		[MS_STORE_COMMITS] = { "heron_store_commits_total", METRIC_COUNTER,
				       "index write commits of the group committer",
				       .sparse = true },
		[MS_STORE_OPS] = { "heron_store_commit_operations_total", METRIC_COUNTER,
				   "writes the group commits carried (batch size = rate of this / "
				   "rate of heron_store_commits_total)",
				   .sparse = true },
		[MS_STORE_FSYNCS] = { "heron_store_fsyncs_total", METRIC_COUNTER,
				      "fsync, fdatasync and syncfs calls of the store (message files, "
				      "directories, two per index commit)",
				      .sparse = true },
		[MS_PROXY_TLS] = { "heron_proxy_tls_handshakes_total",
				   METRIC_COUNTER,
				   "a front's TLS handshakes with store hosts: full, or resumed "
				   "(the store host took the session kept from before)",
				   { "handshake" },
				   { proxy_handshakes },
				   .sparse = true },
	};

	memcpy(defs, std, sizeof(std));
}

void metrics_tls_handshake(struct bufferevent *bev)
{
	const char *proto = NULL;
	int i;

	tls_peer_info(bev, &proto, NULL, NULL);
	i = proto != NULL ? metrics_label_index(MS_TLS, 0, proto) : -1;
	metrics_inc(MS_TLS, i >= 0 ? (unsigned)i : 2, 0);
}

void metrics_hist_add_since(unsigned id, unsigned a, unsigned b, const uint64_t *b_now,
			    uint64_t sum_now, struct metrics_hist_last *last)
{
	for (unsigned k = 0; k <= METRICS_NLE; k++)
		if (b_now[k] > last->b[k]) {
			metrics_hist_add_bucket(id, a, b, k, b_now[k] - last->b[k]);
			last->b[k] = b_now[k];
		}
	if (sum_now > last->sum_us) {
		metrics_hist_add_sum(id, a, b, sum_now - last->sum_us);
		last->sum_us = sum_now;
	}
}

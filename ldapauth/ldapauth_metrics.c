/* ldapauth_metrics.c — owns the copy of the directory client's counts (ldapauth_get_stats)
 * into the shared families of common/metrics_std.h, for the daemons' once-a-second tick. */
#include "common/metrics_std.h"
#include "ldapauth/ldapauth.h"

void ldapauth_metrics_publish(const struct ldapauth *la, struct ldapauth_metrics_last *last)
{
	struct ldapauth_stats st;

	if (la == NULL || !metrics_enabled())
		return;
	ldapauth_get_stats(la, &st);
	metrics_add_since(MS_DIR_REQUESTS, 0, 0, st.requests, &last->requests);
	metrics_add_since(MS_DIR_CACHE, 0, 0, st.cache_hits, &last->hits);
	metrics_add_since(MS_DIR_CACHE, 1, 0, st.cache_misses, &last->misses);
	metrics_add_since(MS_DIR_RESULTS, MS_DIR_OK, 0, st.ok, &last->ok);
	metrics_add_since(MS_DIR_RESULTS, MS_DIR_BADCRED, 0, st.badcred, &last->badcred);
	metrics_add_since(MS_DIR_RESULTS, MS_DIR_NOUSER, 0, st.nouser, &last->nouser);
	/* a timeout is a temporary failure too: temp counts the others */
	metrics_add_since(MS_DIR_RESULTS, MS_DIR_TEMP, 0,
			  st.temp > st.timeouts ? st.temp - st.timeouts : 0, &last->temp);
	metrics_add_since(MS_DIR_RESULTS, MS_DIR_TIMEOUT, 0, st.timeouts, &last->timeouts);
	metrics_add_since(MS_DIR_CONNECT_FAIL, 0, 0, st.connect_failures, &last->connect_failures);
	metrics_set(MS_DIR_CONNS, 0, 0, st.conns_open);
	metrics_set(MS_DIR_CACHE_OWN, 0, 0, st.cache_entries);
	metrics_hist_add_since(MS_DIR_RTT, 0, 0, st.rtt, st.rtt_sum_us, &last->rtt);
}

void ldapauth_metrics_login(enum ldapauth_result result)
{
	metrics_inc(MS_LOGINS,
		    result == LDAPAUTH_OK      ? MS_LOGIN_OK
		    : result == LDAPAUTH_ETEMP ? MS_LOGIN_TEMP
					       : MS_LOGIN_FAIL,
		    0);
}

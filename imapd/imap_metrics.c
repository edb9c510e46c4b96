/* imap_metrics.c — owns imapd's metrics and control socket: its families (after the shared
 * ones of common/metrics_std.h), the count of each command with its latency, the gauges
 * taken from the worker's clients each second, `who` and `kick`. */
#include <inttypes.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/control.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/obs.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"

static const char *const services[] = { "imap", "imaps", NULL };
static const char *const results[] = { "ok", "no", "bad", NULL };
static const char *const states[] = { "notauth", "auth", "selected", NULL };
static const char *const proxy_legs[] = { "dialed", "reused", NULL };

static struct metric_def defs[IM_NFAMILIES];

/* What the worker last copied from elsewhere (metrics_add_since). */
static struct {
	struct ldapauth_metrics_last dir;
	struct store_metrics_last store;
	uint64_t refused[2];
} last;

void imap_metrics_init(unsigned workers)
{
	metrics_std_defs(defs, services);
	defs[IM_COMMANDS] = (struct metric_def){
		"heron_imap_commands_total",
		METRIC_COUNTER,
		"IMAP commands by name and tagged result (ok, no, bad)",
		{ "command", "result" },
		{ imap_cmd_metric_names(), results },
		.sparse = true
	};
	defs[IM_COMMAND_SECONDS] = (struct metric_def){
		"heron_imap_command_duration_seconds",
		METRIC_HISTOGRAM,
		"IMAP commands from their line to the tagged reply (IDLE: how long it idled)",
		{ "command" },
		{ imap_cmd_metric_names() },
		.sparse = true
	};
	defs[IM_SESSIONS] = (struct metric_def){
		"heron_imap_sessions",
		METRIC_GAUGE,
		"IMAP connections by state: notauth (not logged in), auth, selected",
		{ "state" },
		{ states }
	};
	defs[IM_IDLE] = (struct metric_def){ "heron_imap_idle_sessions", METRIC_GAUGE,
					     "IMAP sessions in IDLE" };
	defs[IM_PROXY_LEGS] = (struct metric_def){
		"heron_imap_proxy_logins_total",
		METRIC_COUNTER,
		"front: proxy logins at a store host by the connection they ran on (dialed: a new "
		"one; reused: one parked after an earlier session's LOGOUT)",
		{ "leg" },
		{ proxy_legs }
	};
	defs[IM_PROXY_PARKED] = (struct metric_def){
		"heron_imap_proxy_parked_connections", METRIC_GAUGE,
		"front: store host connections parked for reuse"
	};
	metrics_init("imapd", defs, IM_NFAMILIES, workers);
}

void imap_metrics_command(const struct imap_cmd *cmd, const char *status)
{
	unsigned r = status[0] == 'O' ? 0 : status[0] == 'N' ? 1 : 2;
	unsigned i = imap_cmd_metric_index(cmd);

	if (!metrics_enabled())
		return;
	metrics_inc(IM_COMMANDS, i, r);
	metrics_observe(IM_COMMAND_SECONDS, i, 0, (uint64_t)(clock_mono_us() - cmd->start_us));
}

static unsigned service_of(const struct imap_client *c)
{
	return c->ns != NULL && c->ns == c->srv->tls;
}

/* Once a second: the gauges of this worker's clients and the counts kept elsewhere. */
static void publish(void *arg)
{
	struct imap_server *srv = arg;
	uint64_t open[2] = { 0, 0 }, st[3] = { 0, 0, 0 }, idle = 0;

	for (const struct imap_client *c = srv->clients; c != NULL; c = c->next) {
		if (c->flags & IMAP_CF_DEFUNCT)
			continue;
		open[service_of(c)]++;
		st[c->state == IMAP_ST_NOTAUTH ? 0
		   : c->state == IMAP_ST_AUTH  ? 1
					       : 2] += c->state != IMAP_ST_LOGOUT;
		idle += (c->flags & IMAP_CF_IDLE) != 0;
	}
	for (unsigned k = 0; k < 2; k++)
		metrics_set(MS_CONN_OPEN, k, 0, open[k]);
	for (unsigned k = 0; k < 3; k++)
		metrics_set(IM_SESSIONS, k, 0, st[k]);
	metrics_set(IM_IDLE, 0, 0, idle);
	metrics_set(IM_PROXY_PARKED, 0, 0, srv->proxy_npooled);
	if (srv->plain != NULL)
		metrics_add_since(MS_CONN_REFUSED, 0, MS_REFUSE_MAX,
				  net_server_nrefused(srv->plain), &last.refused[0]);
	if (srv->tls != NULL)
		metrics_add_since(MS_CONN_REFUSED, 1, MS_REFUSE_MAX, net_server_nrefused(srv->tls),
				  &last.refused[1]);
	ldapauth_metrics_publish(srv->auth, &last.dir);
	store_metrics_publish(srv->store, srv->gc, &last.store);
}

static void live(struct buf *out, void *arg)
{
	struct imap_server *srv = arg;

	store_metrics_live(srv->store, false, out);
}

static void who(struct buf *out, const char *ident, unsigned worker, void *arg)
{
	struct imap_server *srv = arg;
	int64_t now_us = clock_mono_us();

	for (const struct imap_client *c = srv->clients; c != NULL; c = c->next) {
		char addr[NET_ADDRSTRLEN];
		int64_t cmd_us = (int64_t)c->cmd.start_us;
		int64_t last_us = cmd_us > c->connected_us ? cmd_us : c->connected_us;
		struct control_session s = {
			.id = c->id,
			.user = c->user,
			.addr = net_addr_str((const struct sockaddr *)&c->sa, sizeof(c->sa), addr,
					     sizeof(addr)),
			.service = services[service_of(c)],
			.state = (c->flags & IMAP_CF_IDLE)      ? "idle"
				 : c->state == IMAP_ST_NOTAUTH  ? "notauth"
				 : c->state == IMAP_ST_AUTH     ? "auth"
				 : c->state == IMAP_ST_SELECTED ? "selected"
								: "logout",
			.since = c->connected,
			.idle_ms = (now_us - last_us) / 1000,
			.detail = c->view != NULL ? c->view->name
				  : c->cmd_active && c->cmd.def != NULL
					  ? imap_cmd_metric_names()[imap_cmd_metric_index(&c->cmd)]
					  : NULL,
		};

		if (c->flags & (IMAP_CF_DEFUNCT | IMAP_CF_CLOSING))
			continue;
		control_who_line(out, ident, worker, (long)getpid(), &s);
	}
}

/* Closes user's sessions: at once when no command runs (or it is IDLE), else after its
   tagged reply (imap_cmd_reply), as a drain does. */
static unsigned kick(const char *user, void *arg)
{
	struct imap_server *srv = arg;
	struct imap_client *c, *next;
	unsigned n = 0;

	for (c = srv->clients; c != NULL; c = next) {
		next = c->next;
		if (c->user == NULL || strcasecmp(c->user, user) != 0 ||
		    (c->flags & (IMAP_CF_DEFUNCT | IMAP_CF_CLOSING | IMAP_CF_KICKED)))
			continue;
		n++;
		c->flags |= IMAP_CF_KICKED;
		if (!c->cmd_active || (c->flags & IMAP_CF_IDLE)) {
			imap_printf(c, "* BYE Disconnected by the administrator\r\n");
			imap_client_close(c, "kicked");
		}
	}
	return n;
}

static const struct obs_ops ops = { .live = live, .publish = publish, .who = who, .kick = kick };

struct obs *imap_obs_start(struct imap_server *srv, const struct net_fds *fds)
{
	memset(&last, 0, sizeof(last));
	return obs_start(srv->base, srv->conf, "imapd", srv->worker, fds, &ops, srv);
}

/* ms_metrics.c — owns managesieved's metrics and control socket: its families (after the
 * shared ones of common/metrics_std.h), each command counted by its response (OK, NO, BYE)
 * with its latency, the gauges of the worker's sessions, `who` and `kick`. */
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/control.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/obs.h"
#include "ldapauth/ldapauth.h"
#include "managesieve/managesieved.h"
#include "store/store.h"

enum { MM_COMMANDS = MS_NSTD, MM_COMMAND_SECONDS, MM_NFAMILIES };

static const char *const services[] = { "sieve", NULL };
static const char *const commands[] = { "AUTHENTICATE", "STARTTLS",  "LOGOUT",    "CAPABILITY",
					"NOOP",         "HAVESPACE", "PUTSCRIPT", "CHECKSCRIPT",
					"LISTSCRIPTS",  "GETSCRIPT", "SETACTIVE", "DELETESCRIPT",
					"RENAMESCRIPT", "unknown",   NULL };
#define CMD_UNKNOWN 13
static const char *const results[] = { "ok", "no", "bye", NULL };

static struct metric_def defs[MM_NFAMILIES];

static struct {
	struct ldapauth_metrics_last dir;
	struct store_metrics_last store;
	uint64_t refused;
} last;

void ms_metrics_init(unsigned workers)
{
	metrics_std_defs(defs, services);
	defs[MM_COMMANDS] = (struct metric_def){
		"heron_managesieve_commands_total",
		METRIC_COUNTER,
		"ManageSieve commands by name and response (ok, no, bye)",
		{ "command", "result" },
		{ commands, results },
		.sparse = true
	};
	defs[MM_COMMAND_SECONDS] = (struct metric_def){
		"heron_managesieve_command_duration_seconds",
		METRIC_HISTOGRAM,
		"ManageSieve commands from their line to the response",
		{ "command" },
		{ commands },
		.sparse = true
	};
	metrics_init("managesieved", defs, MM_NFAMILIES, workers);
}

void ms_metrics_command(struct ms_session *s, const char *verb)
{
	int i = verb != NULL ? metrics_label_index(MM_COMMANDS, 0, verb) : -1;

	if (i < 0 && verb != NULL) { /* names are case-insensitive */
		for (int k = 0; commands[k] != NULL; k++)
			if (strcasecmp(commands[k], verb) == 0)
				i = k;
	}
	s->cmd_idx = i >= 0 ? (unsigned)i : CMD_UNKNOWN;
	s->cmd_us = clock_mono_us();
	s->cmd_open = true;
}

void ms_metrics_response(struct ms_session *s, const char *text)
{
	unsigned r;

	if (!s->cmd_open)
		return;
	if (strncmp(text, "OK", 2) == 0)
		r = 0;
	else if (strncmp(text, "NO", 2) == 0)
		r = 1;
	else if (strncmp(text, "BYE", 3) == 0)
		r = 2;
	else
		return; /* a line of data, or AUTHENTICATE's continuation */
	s->cmd_open = false;
	metrics_inc(MM_COMMANDS, s->cmd_idx, r);
	metrics_observe(MM_COMMAND_SECONDS, s->cmd_idx, 0,
			(uint64_t)(clock_mono_us() - s->cmd_us));
}

static void publish(void *arg)
{
	struct ms_server *srv = arg;

	metrics_set(MS_CONN_OPEN, 0, 0, srv->nsessions);
	metrics_add_since(MS_CONN_REFUSED, 0, MS_REFUSE_MAX, net_server_nrefused(srv->ns),
			  &last.refused);
	ldapauth_metrics_publish(srv->auth, &last.dir);
	store_metrics_publish(srv->store, srv->gc, &last.store);
}

static void live(struct buf *out, void *arg)
{
	struct ms_server *srv = arg;

	store_metrics_live(srv->store, false, out);
}

static void who(struct buf *out, const char *ident, unsigned worker, void *arg)
{
	struct ms_server *srv = arg;
	struct ms_session *s;
	int64_t now_us = clock_mono_us();

	TAILQ_FOREACH(s, &srv->sessions, entry)
	{
		int64_t last_us = s->cmd_us > s->connected_us ? s->cmd_us : s->connected_us;
		struct control_session cs = {
			.id = s->id,
			.user = s->authed ? s->user : NULL,
			.addr = s->addr,
			.service = "sieve",
			.state = s->authed ? "auth" : "notauth",
			.since = s->connected,
			.idle_ms = (now_us - last_us) / 1000,
		};

		if (s->closing || s->dead)
			continue;
		control_who_line(out, ident, worker, (long)getpid(), &cs);
	}
}

static unsigned kick(const char *user, void *arg)
{
	struct ms_server *srv = arg;
	struct ms_session *s, *next;
	unsigned n = 0;

	for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (!s->authed || s->closing || s->dead || s->kicked ||
		    strcasecmp(s->user, user) != 0)
			continue;
		s->kicked = true;
		n++;
		ms_session_kick(s);
	}
	return n;
}

static const struct obs_ops ops = { .live = live, .publish = publish, .who = who, .kick = kick };

struct obs *ms_obs_start(struct ms_server *srv, unsigned worker, const struct net_fds *fds)
{
	memset(&last, 0, sizeof(last));
	return obs_start(srv->base, srv->conf, "managesieved", worker, fds, &ops, srv);
}

/* ml_metrics.c — owns mailload's Prometheus metrics (heron-metrics(7), MAILLOAD): every
 * step by function and result with its response time in the daemons' buckets, sessions,
 * messages sent and the phase. As in Heron's daemons, the manager maps one region before it
 * forks its local agents (a column each) and binds --metrics; every agent's loop answers a
 * scrape with the sums. An agent started on its own (mailload agent --metrics) serves
 * itself. */
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/reqserver.h"
#include "mailload/agent.h"
#include "mailload/mailload.h"

enum { ML_STEPS, ML_STEP_SECONDS, ML_SESSIONS, ML_SENT, ML_PHASE, ML_NFAMILIES };

static const char *fn_names[FN_COUNT + 1];
static const char *const results[] = { "ok", "fail", NULL };
static struct metric_def defs[ML_NFAMILIES];
static struct net_fds fds;
static unsigned my_index;
static struct reqserver *srv;

int ml_metrics_listen(const char *addr, unsigned agents)
{
	static unsigned mapped; /* agents of the region in force (each load point starts its
				   agents anew: the listener stays, the region too when it fits) */
	struct conf *c;
	char *err = NULL;

	if (fds.n > 0) {
		if (mapped != agents)
			metrics_init("mailload", defs, ML_NFAMILIES, agents);
		mapped = agents;
		return 0;
	}
	c = conf_defaults(); /* its address parser; kept for the process */
	if (conf_set(c, "metrics", "sink_listen", addr, &err) < 0 ||
	    net_listen(conf_values(c)->metrics.sink_listen, NULL, &fds, &err) < 0) {
		log_warnx("mailload: --metrics %s: %s", addr, err);
		free(err);
		return -1;
	}
	for (unsigned i = 0; i < FN_COUNT; i++)
		fn_names[i] = ml_fns[i].key;
	defs[ML_STEPS] = (struct metric_def){ "mailload_steps_total",
					      METRIC_COUNTER,
					      "workload steps by function and result",
					      { "function", "result" },
					      { fn_names, results },
					      .sparse = true };
	defs[ML_STEP_SECONDS] = (struct metric_def){ "mailload_step_duration_seconds",
						     METRIC_HISTOGRAM,
						     "response time of the steps that succeeded",
						     { "function" },
						     { fn_names },
						     .sparse = true };
	defs[ML_SESSIONS] = (struct metric_def){ "mailload_sessions_open", METRIC_GAUGE,
						 "SMTP and IMAP sessions open" };
	defs[ML_SENT] = (struct metric_def){ "mailload_messages_sent_total", METRIC_COUNTER,
					     "messages the server acknowledged" };
	defs[ML_PHASE] = (struct metric_def){
		"mailload_phase", METRIC_GAUGE,
		"phase of the first agent: 0 idle, 1 ramp-up, 2 steady state, 3 ramp-down, "
		"4 drain, 5 done"
	};
	metrics_init("mailload", defs, ML_NFAMILIES, agents);
	mapped = agents;
	for (size_t i = 0; i < fds.n; i++)
		log_info("mailload metrics on %s", fds.name[i]);
	return 0;
}

void ml_metrics_set_index(unsigned agent)
{
	my_index = agent;
}

static void http_cb(const char *req, size_t len, struct buf *out, void *arg)
{
	obs_http_answer(req, len, out, NULL, NULL);
}

void ml_metrics_agent_start(struct event_base *base)
{
	struct reqserver_opts o = {
		.max_conns = 8,
		.timeout_ms = 10000,
		.request_max = 8192,
		.end = REQSERVER_END_BLANK,
		.name = "metrics",
		.too_long = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
			    "Connection: close\r\n\r\n",
	};

	if (!metrics_enabled())
		return;
	metrics_worker_start(my_index);
	srv = reqserver_new(base, &fds, &o, http_cb, NULL);
}

void ml_metrics_agent_stop(void)
{
	reqserver_free(&srv);
}

void ml_metrics_step(unsigned fn, bool ok, uint64_t us)
{
	metrics_inc(ML_STEPS, fn, ok ? 0 : 1);
	if (ok)
		metrics_observe(ML_STEP_SECONDS, fn, 0, us);
}

void ml_metrics_sent(void)
{
	metrics_inc(ML_SENT, 0, 0);
}

void ml_metrics_tick(const struct agent *ag)
{
	metrics_set(ML_SESSIONS, 0, 0, (uint64_t)ag->open_smtp + ag->open_imap);
	if (my_index == 0)
		metrics_set(ML_PHASE, 0, 0, (uint64_t)ag->phase);
}

/* sink_metrics.c — owns the sink's Prometheus metrics: the shared connection families
 * (common/metrics_std.h) counted in each worker's column, and at scrape time the sink's own
 * statistics (sink_stats.c: already summed over the workers in its shared segment) with the
 * delivery-time histogram in the metrics' buckets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/histo.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/xmalloc.h"
#include "sink/sink.h"

static const char *const services[] = { "smtp", NULL };
static struct metric_def defs[MS_NSTD];
static uint64_t last_refused;

void sink_metrics_init(unsigned workers)
{
	metrics_std_defs(defs, services);
	metrics_init("sink", defs, MS_NSTD, workers);
}

static void publish(void *arg)
{
	struct sink_worker *w = arg;

	metrics_set(MS_CONN_OPEN, 0, 0, net_server_nconns(w->smtp));
	metrics_add_since(MS_CONN_REFUSED, 0, MS_REFUSE_MAX, net_server_nrefused(w->smtp),
			  &last_refused);
}

static void counter(struct buf *out, const char *name, const char *help, uint64_t v)
{
	metrics_out_header(out, name, "counter", help);
	metrics_out_sample(out, name, NULL, (double)v);
}

static void live(struct buf *out, void *arg)
{
	struct sink_worker *w = arg;
	struct sink_counters c;
	struct histo *h = xmalloc(sizeof(*h));
	uint64_t dropped_records;
	char labels[32];

	sink_stats_snapshot(w->sh, &c, h, &dropped_records);
	counter(out, "heron_sink_messages_total", "messages accepted (250 after the data)",
		c.messages);
	counter(out, "heron_sink_recipients_total", "recipients of the messages accepted",
		c.recipients);
	counter(out, "heron_sink_bytes_total", "content bytes of the messages accepted", c.bytes);
	counter(out, "heron_sink_stamped_messages_total",
		"accepted messages carrying X-Mailload-Sent (timed)", c.stamped);
	counter(out, "heron_sink_fault_replies_total", "replies made 4xx/5xx by fault injection",
		c.rejected);
	counter(out, "heron_sink_fault_drops_total",
		"connections dropped in DATA by fault injection", c.dropped);
	counter(out, "heron_sink_starttls_total", "successful STARTTLS", c.tls);
	counter(out, "heron_sink_records_dropped_total",
		"arrival records lost to a full record memory", dropped_records);
	metrics_out_header(out, "heron_sink_delivery_seconds", "histogram",
			   "X-Mailload-Sent to arrival at the sink (mailload's Delivery Time)");
	for (unsigned k = 0; k < METRICS_NLE; k++) {
		snprintf(labels, sizeof(labels), "le=\"%g\"", (double)metrics_le_us[k] / 1e6);
		metrics_out_sample(out, "heron_sink_delivery_seconds_bucket", labels,
				   (double)histo_count_le(h, metrics_le_us[k]));
	}
	metrics_out_sample(out, "heron_sink_delivery_seconds_bucket", "le=\"+Inf\"",
			   (double)h->count);
	metrics_out_sample(out, "heron_sink_delivery_seconds_sum", NULL, (double)h->sum / 1e6);
	metrics_out_sample(out, "heron_sink_delivery_seconds_count", NULL, (double)h->count);
	free(h);
}

static const struct obs_ops ops = { .live = live, .publish = publish };

struct obs *sink_obs_start(struct sink_worker *w, const struct conf *c, const struct net_fds *fds)
{
	last_refused = 0;
	return obs_start(w->base, c, "sink", w->index, fds, &ops, w);
}

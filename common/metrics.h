/* metrics.h — a daemon's counters, gauges and latency histograms, counted by every worker and
 * read by any of them: the numbers behind the Prometheus endpoint (metrics_http.h), the
 * control socket's `metrics` command and `mailctl stats --live`.
 *
 * Aggregation over workers: the master maps one shared region (MAP_SHARED | MAP_ANONYMOUS)
 * before it forks, with one column per worker. A worker writes only its own column, from its
 * loop thread, with plain relaxed atomic stores (no lock, no contention: one cache line per
 * counter change); whoever renders sums the columns. A restarted worker keeps its column's
 * counters (they never go back, as Prometheus wants) and zeroes its gauges (what it held died
 * with it). Counts a process keeps elsewhere (libstore's commits, the directory cache, DNS)
 * are copied into the column by the worker once a second (obs.h).
 *
 * Families are a daemon's static table (struct metric_def, indexed by the daemon's own enum),
 * each with at most two labels whose values are fixed lists; a series is a pair of label
 * indexes. Histograms have the buckets METRICS_LE (seconds; the last is +Inf): a sample of
 * v µs falls in the first bucket whose bound is at or above the top of v's common/histo
 * bucket, the rule histo_count_le (and so mailload's report) uses, so a share inside 5 s
 * here and there is computed alike.
 *
 * Nothing here fails after metrics_init; before it (a program or test that never calls it)
 * every call is a no-op. */
#ifndef HERON_METRICS_H
#define HERON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Histogram bucket bounds in µs: 100 µs .. 60 s, the workload's 5 s and 60 s limits
   among them, then +Inf. */
#define METRICS_NLE 18
extern const uint64_t metrics_le_us[METRICS_NLE];

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

#define METRIC_LABELS_MAX 2

struct metric_def {
	const char *name; /* "heron_imap_commands_total" */
	enum metric_type type;
	const char *help; /* one line, for # HELP */
	/* Label names (NULL: fewer labels) and their values, each list NULL-terminated. */
	const char *label[METRIC_LABELS_MAX];
	const char *const *values[METRIC_LABELS_MAX];
	bool sparse; /* leave out series that are still 0 (large label sets) */
};

/* Master, before fork (or a single-process program): maps the region for workers columns
   of defs (kept: the table must outlive the process's use of it). daemon names the program
   in heron_info. Calling it again replaces the region (tests). */
void metrics_init(const char *daemon, const struct metric_def *defs, size_t ndefs,
		  unsigned workers);
/* Whether metrics_init ran in this process. */
bool metrics_enabled(void);
/* Unmaps (tests; daemons keep it to exit). */
void metrics_free(void);
/* A worker starts writing column worker: its gauges are zeroed, its start counted. */
void metrics_worker_start(unsigned worker);

/* The index of value in label l of family id, or -1 (for values known by name at run time,
   such as TLS protocol names). */
int metrics_label_index(unsigned id, unsigned l, const char *value);

/* Counter (or gauge) += n for series (a, b) of family id (unused labels: 0). */
void metrics_add(unsigned id, unsigned a, unsigned b, uint64_t n);
#define metrics_inc(id, a, b) metrics_add((id), (a), (b), 1)
/* Gauge += delta (this worker's share; the rendered value is the sum over workers). */
void metrics_gauge_add(unsigned id, unsigned a, unsigned b, int64_t delta);
/* Gauge = v in this worker's column (a value read from elsewhere: open connections of a
   library). */
void metrics_set(unsigned id, unsigned a, unsigned b, uint64_t v);
/* A counter kept elsewhere in this process (libstore's commits...): adds what it grew by
   since *last (the value the previous call saw; 0 at the worker's start, when the process's
   own count starts at 0 too) and keeps now in *last, so the column, which a restarted worker
   keeps, never goes back. */
void metrics_add_since(unsigned id, unsigned a, unsigned b, uint64_t now, uint64_t *last);
/* Histogram: one sample of us microseconds. */
void metrics_observe(unsigned id, unsigned a, unsigned b, uint64_t us);
/* Histogram counts made elsewhere: n more samples in bucket (0..METRICS_NLE), and us more
   in the sum. */
void metrics_hist_add_bucket(unsigned id, unsigned a, unsigned b, unsigned bucket, uint64_t n);
void metrics_hist_add_sum(unsigned id, unsigned a, unsigned b, uint64_t us);
/* The bucket index (0..METRICS_NLE, the last = +Inf) a sample of us falls in. */
unsigned metrics_bucket(uint64_t us);

/* Rendering, in the Prometheus text exposition format 0.0.4 (`# HELP`, `# TYPE`, samples):
   heron_info and every family summed over the workers, then what live appends (values read
   at scrape time: the store's sizes, the queue) through the metrics_out_* helpers. Its size
   is bounded by the families (their label lists are fixed at metrics_init) and what live
   adds: give out a ceiling of BUF_INPUT_BOUNDED. */
typedef void metrics_live_fn(struct buf *out, void *arg);
void metrics_render(struct buf *out, metrics_live_fn *live, void *arg);
/* The same in OpenMetrics 1.0 when openmetrics (counter families named without _total,
   # EOF at the end), for a scraper that asks for it. */
void metrics_render_format(struct buf *out, bool openmetrics, metrics_live_fn *live, void *arg);

/* Helpers for live families: the header once, then a sample per series; labels is the
   inside of {} ("partition=\"0\"") or NULL. */
void metrics_out_header(struct buf *out, const char *name, const char *type, const char *help);
void metrics_out_sample(struct buf *out, const char *name, const char *labels, double v);
/* A label value escaped for the format (\\, \", \n) appended to out. */
void metrics_out_escape(struct buf *out, const char *s);

#endif

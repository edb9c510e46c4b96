/* metrics.c — owns the shared region of a daemon's metrics (one column per worker), the
 * writes into this worker's column and the Prometheus text rendering of their sums. */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/histo.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/version.h"


const uint64_t metrics_le_us[METRICS_NLE] = {
	100,    250,    500,    1000,    2500,    5000,    10000,    25000,    50000,
	100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000,
};

/* Slots of a histogram series: the buckets, +Inf, then the sum of the samples in µs. */
#define HSLOTS (METRICS_NLE + 2)
#define LABELS_TEXT_MAX 4096 /* one series' labels, as rendered */

static struct {
	const char *daemon;
	const struct metric_def *defs;
	size_t ndefs;
	unsigned workers;
	size_t *off;      /* per family: its first slot in a column */
	size_t nslots;    /* slots of one column; slot 0 counts the worker's starts */
	uint64_t *region; /* workers * nslots, shared */
	size_t region_len;
	uint64_t *col; /* this worker's column, NULL until metrics_worker_start */
	int64_t start_time;
} M;

static size_t nvalues(const struct metric_def *d, unsigned l)
{
	size_t n = 0;

	if (d->label[l] == NULL || d->values[l] == NULL)
		return 1;
	while (d->values[l][n] != NULL)
		n++;
	return n > 0 ? n : 1;
}

static size_t series_slots(const struct metric_def *d)
{
	return d->type == METRIC_HISTOGRAM ? HSLOTS : 1;
}

void metrics_free(void)
{
	if (M.region != NULL)
		munmap(M.region, M.region_len);
	free(M.off);
	memset(&M, 0, sizeof(M));
}

void metrics_init(const char *daemon, const struct metric_def *defs, size_t ndefs,
		  unsigned workers)
{
	size_t slots = 1;

	assert(workers >= 1);
	metrics_free();
	M.daemon = daemon;
	M.defs = defs;
	M.ndefs = ndefs;
	M.workers = workers;
	M.off = calloc(ndefs > 0 ? ndefs : 1, sizeof(*M.off));
	if (M.off == NULL)
		fatal("metrics: calloc");
	for (size_t i = 0; i < ndefs; i++) {
		M.off[i] = slots;
		slots += nvalues(&defs[i], 0) * nvalues(&defs[i], 1) * series_slots(&defs[i]);
	}
	M.nslots = slots;
	M.region_len = workers * slots * sizeof(uint64_t);
	M.region = mmap(NULL, M.region_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
			0);
	if (M.region == MAP_FAILED)
		fatal("metrics: mmap %zu bytes", M.region_len);
	M.start_time = (int64_t)time(NULL);
}

bool metrics_enabled(void)
{
	return M.region != NULL;
}

static uint64_t load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void store(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

void metrics_worker_start(unsigned worker)
{
	uint64_t *col;

	if (M.region == NULL)
		return;
	assert(worker < M.workers);
	col = M.region + (size_t)worker * M.nslots;
	for (size_t i = 0; i < M.ndefs; i++) {
		size_t n = nvalues(&M.defs[i], 0) * nvalues(&M.defs[i], 1);

		if (M.defs[i].type == METRIC_GAUGE)
			for (size_t k = 0; k < n; k++)
				store(&col[M.off[i] + k], 0);
	}
	store(&col[0], load(&col[0]) + 1);
	M.col = col;
}

int metrics_label_index(unsigned id, unsigned l, const char *value)
{
	const struct metric_def *d;

	if (M.region == NULL || id >= M.ndefs || l >= METRIC_LABELS_MAX)
		return -1;
	d = &M.defs[id];
	if (d->values[l] == NULL)
		return -1;
	for (int k = 0; d->values[l][k] != NULL; k++)
		if (strcmp(d->values[l][k], value) == 0)
			return k;
	return -1;
}

/* The first slot of series (a, b) of family id in this worker's column, or NULL. */
static uint64_t *slot(unsigned id, unsigned a, unsigned b)
{
	const struct metric_def *d;
	size_t na, nb;

	if (M.col == NULL)
		return NULL;
	assert(id < M.ndefs);
	d = &M.defs[id];
	na = nvalues(d, 0);
	nb = nvalues(d, 1);
	assert(a < na && b < nb);
	return &M.col[M.off[id] + ((size_t)a * nb + b) * series_slots(d)];
}

void metrics_add(unsigned id, unsigned a, unsigned b, uint64_t n)
{
	uint64_t *p = slot(id, a, b);

	if (p != NULL)
		store(p, load(p) + n);
}

void metrics_gauge_add(unsigned id, unsigned a, unsigned b, int64_t delta)
{
	metrics_add(id, a, b, (uint64_t)delta);
}

void metrics_set(unsigned id, unsigned a, unsigned b, uint64_t v)
{
	uint64_t *p = slot(id, a, b);

	if (p != NULL)
		store(p, v);
}

void metrics_add_since(unsigned id, unsigned a, unsigned b, uint64_t now, uint64_t *last)
{
	if (now > *last)
		metrics_add(id, a, b, now - *last);
	*last = now;
}

unsigned metrics_bucket(uint64_t us)
{
	uint64_t top = histo_bucket_high(histo_index(us));
	unsigned j = 0;

	while (j < METRICS_NLE && top > metrics_le_us[j])
		j++;
	return j;
}

void metrics_observe(unsigned id, unsigned a, unsigned b, uint64_t us)
{
	uint64_t *p = slot(id, a, b);

	if (p == NULL)
		return;
	assert(M.defs[id].type == METRIC_HISTOGRAM);
	p += metrics_bucket(us);
	store(p, load(p) + 1);
	p = slot(id, a, b) + METRICS_NLE + 1;
	store(p, load(p) + us);
}

void metrics_hist_add_bucket(unsigned id, unsigned a, unsigned b, unsigned bucket, uint64_t n)
{
	uint64_t *p = slot(id, a, b);

	if (p == NULL)
		return;
	assert(M.defs[id].type == METRIC_HISTOGRAM && bucket <= METRICS_NLE);
	store(p + bucket, load(p + bucket) + n);
}

void metrics_hist_add_sum(unsigned id, unsigned a, unsigned b, uint64_t us)
{
	uint64_t *p = slot(id, a, b);

	if (p != NULL)
		store(p + METRICS_NLE + 1, load(p + METRICS_NLE + 1) + us);
}

/* ---- rendering ---- */

void metrics_out_escape(struct buf *out, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			buf_putc(out, '\\');
		if (*s == '\n') {
			buf_puts(out, "\\n");
			continue;
		}
		buf_putc(out, *s);
	}
}

/* OpenMetrics while rendering for a client that asked for it: a counter's family is named
   without its _total (its samples keep it), and the text ends with # EOF. */
static bool om;

void metrics_out_header(struct buf *out, const char *name, const char *type, const char *help)
{
	size_t n = strlen(name);

	if (om && strcmp(type, "counter") == 0 && n > 6 && strcmp(name + n - 6, "_total") == 0)
		n -= 6;
	buf_printf(out, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)n, name, help, (int)n, name,
		   type);
}

static void out_value(struct buf *out, double v)
{
	if (isnan(v))
		buf_puts(out, "NaN");
	else if (v == (double)(int64_t)v && fabs(v) < 9e15)
		buf_printf(out, "%" PRId64, (int64_t)v);
	else
		buf_printf(out, "%.9g", v);
}

void metrics_out_sample(struct buf *out, const char *name, const char *labels, double v)
{
	buf_puts(out, name);
	if (labels != NULL && labels[0] != '\0')
		buf_printf(out, "{%s}", labels);
	buf_putc(out, ' ');
	out_value(out, v);
	buf_putc(out, '\n');
}

/* The sum over workers of slot k of every column. */
static uint64_t sum_slot(size_t k)
{
	uint64_t s = 0;

	for (unsigned w = 0; w < M.workers; w++)
		s += load(&M.region[(size_t)w * M.nslots + k]);
	return s;
}

/* `name{l0="v",l1="w"` (without the closing brace) into lb. */
static void series_labels(struct buf *lb, const struct metric_def *d, size_t a, size_t b)
{
	size_t idx[METRIC_LABELS_MAX] = { a, b };

	buf_reset(lb);
	for (unsigned l = 0; l < METRIC_LABELS_MAX; l++) {
		if (d->label[l] == NULL || d->values[l] == NULL)
			continue;
		buf_printf(lb, "%s%s=\"", lb->len > 0 ? "," : "", d->label[l]);
		metrics_out_escape(lb, d->values[l][idx[l]]);
		buf_putc(lb, '"');
	}
}

static void render_histogram(struct buf *out, struct buf *lb, const struct metric_def *d,
			     size_t base)
{
	uint64_t v[HSLOTS], cum = 0;

	for (size_t k = 0; k < HSLOTS; k++)
		v[k] = sum_slot(base + k);
	for (size_t k = 0; k <= METRICS_NLE; k++)
		cum += v[k];
	if (cum == 0 && d->sparse)
		return;
	cum = 0;
	for (size_t k = 0; k <= METRICS_NLE; k++) {
		cum += v[k];
		buf_printf(out, "%s_bucket{%s%sle=\"", d->name, buf_cstr(lb), lb->len ? "," : "");
		if (k == METRICS_NLE)
			buf_puts(out, "+Inf");
		else
			buf_printf(out, "%g", (double)metrics_le_us[k] / 1e6);
		buf_printf(out, "\"} %" PRIu64 "\n", cum);
	}
	buf_printf(out, "%s_sum%s%s%s %.6f\n", d->name, lb->len ? "{" : "", buf_cstr(lb),
		   lb->len ? "}" : "", (double)v[METRICS_NLE + 1] / 1e6);
	buf_printf(out, "%s_count%s%s%s %" PRIu64 "\n", d->name, lb->len ? "{" : "", buf_cstr(lb),
		   lb->len ? "}" : "", cum);
}

static void render_family(struct buf *out, struct buf *lb, size_t i)
{
	const struct metric_def *d = &M.defs[i];
	size_t na = nvalues(d, 0), nb = nvalues(d, 1);
	static const char *const types[] = { "counter", "gauge", "histogram" };

	size_t start = out->len, body;

	metrics_out_header(out, d->name, types[d->type], d->help);
	body = out->len;
	for (size_t a = 0; a < na; a++)
		for (size_t b = 0; b < nb; b++) {
			size_t base = M.off[i] + (a * nb + b) * series_slots(d);
			uint64_t v;

			series_labels(lb, d, a, b);
			if (d->type == METRIC_HISTOGRAM) {
				render_histogram(out, lb, d, base);
				continue;
			}
			v = sum_slot(base);
			if (v == 0 && d->sparse)
				continue;
			metrics_out_sample(out, d->name, buf_cstr(lb),
					   d->type == METRIC_GAUGE ? (double)(int64_t)v
								   : (double)v);
		}
	if (out->len == body && d->sparse)
		buf_truncate(out, start); /* nothing counted yet: not even the header */
}

void metrics_render(struct buf *out, metrics_live_fn *live, void *arg)
{
	metrics_render_format(out, false, live, arg);
}

void metrics_render_format(struct buf *out, bool openmetrics, metrics_live_fn *live, void *arg)
{
	struct buf lb;
	char labels[160];

	if (M.region == NULL)
		return;
	om = openmetrics;
	buf_init(&lb, 128, LABELS_TEXT_MAX);
	metrics_out_header(out, "heron_info", "gauge", "the program and its version");
	snprintf(labels, sizeof(labels), "daemon=\"%s\",version=\"%s\"", M.daemon, heron_version);
	metrics_out_sample(out, "heron_info", labels, 1);
	metrics_out_header(out, "heron_start_time_seconds", "gauge",
			   "when the daemon started (Unix time)");
	metrics_out_sample(out, "heron_start_time_seconds", NULL, (double)M.start_time);
	metrics_out_header(out, "heron_workers", "gauge", "worker processes configured");
	metrics_out_sample(out, "heron_workers", NULL, M.workers);
	metrics_out_header(out, "heron_worker_starts_total", "counter",
			   "worker processes started (restarts = this - heron_workers)");
	metrics_out_sample(out, "heron_worker_starts_total", NULL, (double)sum_slot(0));
	for (size_t i = 0; i < M.ndefs; i++)
		render_family(out, &lb, i);
	buf_release(&lb);
	om = openmetrics;
	if (live != NULL)
		live(out, arg);
	if (om)
		buf_puts(out, "# EOF\n");
	om = false;
}

/* test_metrics.c — the metrics region and its text: sums over worker columns, gauges zeroed
 * at a worker's restart and counters kept, histogram buckets that agree with histo_count_le
 * (mailload's rule), the exposition format (labels escaped, sparse families left out,
 * OpenMetrics naming), the HTTP answers of the endpoint and the control socket's who lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/control.h"
#include "common/histo.h"
#include "common/metrics.h"
#include "common/obs.h"

enum { F_REQ, F_OPEN, F_LAT, F_SPARSE, F_N };

static const char *const methods[] = { "get", "say \"hi\"\\", NULL };
static const char *const codes[] = { "2xx", "5xx", NULL };

static const struct metric_def defs[F_N] = {
	[F_REQ] = { "t_requests_total",
		    METRIC_COUNTER,
		    "requests",
		    { "method", "code" },
		    { methods, codes } },
	[F_OPEN] = { "t_open", METRIC_GAUGE, "open things" },
	[F_LAT] = { "t_latency_seconds", METRIC_HISTOGRAM, "latency", { "method" }, { methods } },
	[F_SPARSE] = { "t_rare_total", METRIC_COUNTER, "rare", .sparse = true },
};

static char *render(bool om)
{
	struct buf b;

	buf_init(&b, 4096, BUF_INPUT_BOUNDED);
	metrics_render_format(&b, om, NULL, NULL);
	return buf_steal(&b, NULL);
}

/* The value of the sample line starting with "name{labels} " (or "name "), or -1. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static void test_disabled_is_noop(void **state)
{
	struct buf b;

	metrics_free();
	assert_false(metrics_enabled());
	metrics_inc(F_REQ, 0, 0); /* no region: nothing happens, nothing crashes */
	metrics_observe(F_LAT, 0, 0, 10);
	buf_init(&b, 64, BUF_INPUT_BOUNDED);
	metrics_render(&b, NULL, NULL);
	assert_int_equal(b.len, 0);
	buf_release(&b);
}

static void test_sum_over_workers(void **state)
{
	char *t;

	metrics_init("testd", defs, F_N, 3);
	metrics_worker_start(0);
	metrics_add(F_REQ, 0, 0, 5);
	metrics_gauge_add(F_OPEN, 0, 0, 2);
	metrics_worker_start(1);
	metrics_add(F_REQ, 0, 0, 7);
	metrics_inc(F_REQ, 1, 1);
	metrics_gauge_add(F_OPEN, 0, 0, -3);
	t = render(false);
	assert_int_equal(sample(t, "t_requests_total{method=\"get\",code=\"2xx\"}"), 12);
	assert_int_equal(sample(t, "t_requests_total{method=\"say \\\"hi\\\"\\\\\",code=\"5xx\"}"),
			 1);
	assert_int_equal(sample(t, "t_requests_total{method=\"get\",code=\"5xx\"}"), 0);
	assert_int_equal(sample(t, "t_open"), -1); /* 2 - 3: a gauge may be negative */
	assert_non_null(strstr(t, "t_open -1\n"));
	assert_int_equal(sample(t, "heron_worker_starts_total"), 2);
	assert_int_equal(sample(t, "heron_workers"), 3);
	assert_non_null(strstr(t, "heron_info{daemon=\"testd\""));
	/* sparse and never counted: not even its header */
	assert_null(strstr(t, "t_rare_total"));
	free(t);

	/* worker 0 restarts: its gauge is gone, its counters stay */
	metrics_worker_start(0);
	t = render(false);
	assert_int_equal(sample(t, "t_requests_total{method=\"get\",code=\"2xx\"}"), 12);
	assert_non_null(strstr(t, "t_open -3\n"));
	assert_int_equal(sample(t, "heron_worker_starts_total"), 3);
	free(t);
	metrics_free();
}

static void test_add_since(void **state)
{
	uint64_t last = 0;
	char *t;

	metrics_init("testd", defs, F_N, 1);
	metrics_worker_start(0);
	metrics_add_since(F_SPARSE, 0, 0, 10, &last);
	metrics_add_since(F_SPARSE, 0, 0, 15, &last);
	/* the process restarted its own count (a new worker): the column only grows */
	last = 0;
	metrics_add_since(F_SPARSE, 0, 0, 4, &last);
	t = render(false);
	assert_int_equal(sample(t, "t_rare_total"), 19);
	free(t);
	metrics_free();
}

/* A sample falls in the first bucket at or above its histo bucket's top: the cumulative
   count at each bound is exactly histo_count_le at that bound. */
static void test_buckets_agree_with_histo(void **state)
{
	struct histo *h = calloc(1, sizeof(*h));
	uint64_t vals[4000], x = 12345;
	char *t, series[128];

	metrics_init("testd", defs, F_N, 2);
	for (size_t i = 0; i < 4000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		vals[i] = (x >> 33) % 80000000; /* up to 80 s: past the last bound */
		if (i % 7 == 0)
			vals[i] = metrics_le_us[i % METRICS_NLE]; /* right on a bound */
		metrics_worker_start(i % 2);
		metrics_observe(F_LAT, 0, 0, vals[i]);
		histo_add(h, vals[i]);
	}
	t = render(false);
	for (unsigned k = 0; k < METRICS_NLE; k++) {
		snprintf(series, sizeof(series),
			 "t_latency_seconds_bucket{method=\"get\",le=\"%g\"}",
			 (double)metrics_le_us[k] / 1e6);
		assert_int_equal((uint64_t)sample(t, series), histo_count_le(h, metrics_le_us[k]));
	}
	assert_int_equal(sample(t, "t_latency_seconds_bucket{method=\"get\",le=\"+Inf\"}"), 4000);
	assert_int_equal(sample(t, "t_latency_seconds_count{method=\"get\"}"), 4000);
	assert_true(sample(t, "t_latency_seconds_sum{method=\"get\"}") >
		    (double)h->sum / 1e6 - 0.001);
	assert_true(sample(t, "t_latency_seconds_sum{method=\"get\"}") <
		    (double)h->sum / 1e6 + 0.001);
	/* the 5 s and 60 s limits of the workload are bounds */
	assert_non_null(strstr(t, "le=\"5\""));
	assert_non_null(strstr(t, "le=\"60\""));
	free(t);
	free(h);
	metrics_free();
}

static void test_openmetrics(void **state)
{
	char *t;

	metrics_init("testd", defs, F_N, 1);
	metrics_worker_start(0);
	metrics_inc(F_REQ, 0, 0);
	t = render(true);
	/* the family is named without _total, its samples with it; # EOF ends the text */
	assert_non_null(strstr(t, "# TYPE t_requests counter\n"));
	assert_non_null(strstr(t, "\nt_requests_total{method=\"get\",code=\"2xx\"} 1\n"));
	assert_true(strlen(t) > 6 && strcmp(t + strlen(t) - 6, "# EOF\n") == 0);
	free(t);
	t = render(false);
	assert_non_null(strstr(t, "# TYPE t_requests_total counter\n"));
	assert_null(strstr(t, "# EOF"));
	free(t);
	metrics_free();
}

static char *http(const char *req)
{
	struct buf b;

	buf_init(&b, 4096, BUF_INPUT_BOUNDED);
	obs_http_answer(req, strlen(req), &b, NULL, NULL);
	return buf_steal(&b, NULL);
}

static void test_http_answers(void **state)
{
	char *t;

	metrics_init("testd", defs, F_N, 1);
	metrics_worker_start(0);
	t = http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(t, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(t, "\r\n\r\n# HELP heron_info"));
	free(t);
	t = http("GET /metrics?x=1 HTTP/1.0\r\nAccept: application/openmetrics-text; "
		 "version=1.0.0\r\n\r\n");
	assert_non_null(strstr(t, "application/openmetrics-text"));
	assert_non_null(strstr(t, "# EOF\n"));
	free(t);
	t = http("HEAD /metrics HTTP/1.1\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_null(strstr(t, "heron_info")); /* no body */
	free(t);
	t = http("GET /other HTTP/1.1\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 404", 12) == 0);
	free(t);
	t = http("POST /metrics HTTP/1.1\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 405", 12) == 0);
	free(t);
	t = http("garbage\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 400", 12) == 0);
	free(t);
	t = http("GET /metrics SMTP/1.0\r\n\r\n");
	assert_true(strncmp(t, "HTTP/1.1 400", 12) == 0);
	free(t);
	metrics_free();
}

static void test_who_line(void **state)
{
	struct control_session s = {
		.id = 0x1234abcd,
		.user = "al\tice",
		.addr = "127.0.0.1:5",
		.service = "imap",
		.state = "selected",
		.since = 1700000000,
		.idle_ms = 42,
		.detail = "INBOX\nx",
	};
	struct control_who w;
	struct buf b;

	buf_init(&b, 256, 4096);
	control_who_line(&b, "imapd", 1, 99, &s);
	s.user = NULL;
	s.detail = NULL;
	control_who_line(&b, "imapd", 1, 99, &s);
	char *second = strchr(b.data, '\n') + 1;

	second[-1] = '\0';
	assert_int_equal(control_who_parse(b.data, &w), 0);
	assert_string_equal(w.ident, "imapd");
	assert_int_equal(w.worker, 1);
	assert_int_equal(w.pid, 99);
	assert_int_equal(w.id, 0x1234abcd);
	assert_string_equal(w.user, "al?ice"); /* a TAB cannot forge a field */
	assert_string_equal(w.state, "selected");
	assert_int_equal(w.since, 1700000000);
	assert_int_equal(w.idle_ms, 42);
	assert_string_equal(w.detail, "INBOX?x");
	assert_int_equal(control_who_parse(second, &w), 0);
	assert_null(w.user);
	assert_null(w.detail);
	char bad[] = "imapd\t1\tx";

	assert_int_equal(control_who_parse(bad, &w), -1);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disabled_is_noop),
		cmocka_unit_test(test_sum_over_workers),
		cmocka_unit_test(test_add_since),
		cmocka_unit_test(test_buckets_agree_with_histo),
		cmocka_unit_test(test_openmetrics),
		cmocka_unit_test(test_http_answers),
		cmocka_unit_test(test_who_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* report.c — owns the report renderers: text shaped like a SPECmail2009 result page and HTML
 * with inline SVG charts (throughput and p99 over time, per-function histograms, delivery
 * CDF), both from the parsed report.json so `mailload report DIR` re-renders exactly. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/histo.h"
#include "common/log.h"
#include "mailload/json.h"
#include "mailload/mailload.h"
#include "mailload/report.h"

#define RULE "================================================================================\n"

static const struct jv *headline_point(const struct jv *r)
{
	const struct jv *pts = jv_get(r, "points");

	if (pts == NULL || pts->type != JV_ARR || pts->n == 0)
		return NULL;
	for (size_t i = 0; i < pts->n; i++)
		if (jv_num(&pts->kid[i], "pct", 0) == 100)
			return &pts->kid[i];
	return &pts->kid[0];
}

static bool jv_true(const struct jv *o, const char *k)
{
	const struct jv *v = jv_get(o, k);

	return v != NULL && v->type == JV_BOOL && v->b;
}

static void text_summary(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	const struct jv *e = jv_get(pt, "errors");

	buf_printf(o, "\nSummary: load point %.0f%% (%.2f messages per minute, %" PRId64
		      " users): %s\n",
		   jv_num(pt, "pct", 0), jv_num(pt, "rate", 0), jv_int(pt, "users", 0),
		   jv_true(pt, "pass") ? "PASS" : "FAIL");
	buf_printf(o, "%-50s %8s %9s %10s\n", "Function", "Limit", "Required", "Compliant");
	for (size_t i = 0; fns != NULL && i < fns->n; i++) {
		const struct jv *f = &fns->kid[i];
		const char *name = jv_str(f, "name", "?");
		bool none = jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0;

		if (!jv_true(f, "summary"))
			continue;
		if (strlen(name) > 50)
			buf_printf(o, "%s\n%-50s", name, "");
		else
			buf_printf(o, "%-50s", name);
		buf_printf(o, " %7.0fs %8.2f%% ", jv_num(f, "limit_ms", 0) / 1000, ML_REQUIRED_PCT);
		if (none)
			buf_printf(o, "%10s\n", "no samples");
		else
			buf_printf(o, "%9.2f%%\n", jv_num(f, "pct", 0));
	}
	buf_printf(o, "%-50s %7.0fs %8.2f%% ", "Delivery Time", jv_num(d, "limit_ms", 0) / 1000,
		   ML_REQUIRED_PCT);
	if (jv_int(d, "count", 0) == 0)
		buf_printf(o, "%10s\n", "no samples");
	else
		buf_printf(o, "%9.2f%%\n", jv_num(d, "pct", 0));
	buf_printf(o, "%-50s %8s %9s %9.3f%%\n", "Error Rate", "< 1%", "", jv_num(e, "rate_pct", 0));
	const struct jv *why = jv_get(pt, "reasons");
	for (size_t i = 0; why != NULL && i < why->n; i++)
		buf_printf(o, "  fails: %s\n", why->kid[i].s != NULL ? why->kid[i].s : "?");
}

/* The lost copies the report names (delivery.lost_copies), one a line. */
static void text_lost_copies(struct buf *o, const struct jv *d)
{
	const struct jv *l = jv_get(d, "lost_copies");

	for (size_t i = 0; l != NULL && i < l->n; i++) {
		const struct jv *c = &l->kid[i];
		buf_printf(o, "  lost: %s to %s (%s, %s), acknowledged %.3f s into the run\n",
			   jv_str(c, "message_id", "?"), jv_str(c, "rcpt", "?"),
			   jv_true(c, "local") ? "local" : "remote",
			   jv_true(c, "submitted") ? "user submission" : "inbound",
			   jv_num(c, "ack_s", 0));
	}
	if (l != NULL && (int64_t)l->n < jv_int(d, "lost", 0))
		buf_printf(o, "  (the first %zu lost copies named)\n", l->n);
}

static void text_detail(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	const struct jv *e = jv_get(pt, "errors"), *m = jv_get(pt, "messages");

	buf_printf(o, "\nResponse times (ms), steady state\n%-44s %9s %7s %9s %9s %9s %9s\n",
		   "Function", "count", "errors", "p50", "p90", "p99", "max");
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			buf_puts(o, "Other functions (not part of pass/fail):\n");
		for (size_t i = 0; fns != NULL && i < fns->n; i++) {
			const struct jv *f = &fns->kid[i];
			const char *name = jv_str(f, "name", "?");
			if (jv_true(f, "summary") != (pass == 0))
				continue;
			if (pass == 1 && jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0)
				continue;
			if (strlen(name) > 44)
				buf_printf(o, "%s\n%-44s", name, "");
			else
				buf_printf(o, "%-44s", name);
			buf_printf(o, " %9" PRId64 " %7" PRId64 " %9.2f %9.2f %9.2f %9.2f\n",
				   jv_int(f, "count", 0), jv_int(f, "errors", 0), jv_num(f, "p50_ms", 0),
				   jv_num(f, "p90_ms", 0), jv_num(f, "p99_ms", 0), jv_num(f, "max_ms", 0));
		}
	}
	buf_printf(o, "\nMessages: %" PRId64 " submitted by users (%" PRId64
		      " in steady state = %.2f per minute), %" PRId64 " from remote servers\n",
		   jv_int(m, "submitted", 0), jv_int(m, "submitted_steady", 0),
		   jv_num(m, "measured_rate", 0), jv_int(m, "incoming", 0));
	buf_printf(o, "Delivery: %" PRId64 " recipient copies checked (%" PRId64 " local, %" PRId64
		      " remote), %" PRId64 " delivered, %" PRId64 " lost, %" PRId64
		      " duplicated; time p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		   jv_int(d, "checked", 0), jv_int(d, "local", 0), jv_int(d, "remote", 0),
		   jv_int(d, "delivered", 0), jv_int(d, "lost", 0), jv_int(d, "duplicated", 0),
		   jv_num(d, "p50_ms", 0), jv_num(d, "p99_ms", 0), jv_num(d, "max_ms", 0));
	if (jv_int(d, "remote_unchecked", 0) > 0)
		buf_printf(o, "  %" PRId64 " remote recipient copies unchecked\n",
			   jv_int(d, "remote_unchecked", 0));
	buf_printf(o, "  remote check: %s\n", jv_str(d, "remote_note", ""));
	text_lost_copies(o, d);
	buf_printf(o, "Errors: %" PRId64 " of %" PRId64 " steps (%.3f%%)",
		   jv_int(e, "failed", 0), jv_int(e, "steps", 0), jv_num(e, "rate_pct", 0));
	if (jv_int(e, "sessions_refused", 0) > 0)
		buf_printf(o, "; %" PRId64 " sessions refused by the agent's cap (client overloaded)",
			   jv_int(e, "sessions_refused", 0));
	buf_putc(o, '\n');
	const struct jv *top = jv_get(e, "top");
	for (size_t i = 0; top != NULL && i < top->n; i++) {
		const struct jv *t = &top->kid[i];
		if (t->n == 3)
			buf_printf(o, "  %8" PRId64 "  %-22s %s\n", t->kid[2].i,
				   t->kid[0].s ? t->kid[0].s : "", t->kid[1].s ? t->kid[1].s : "");
	}
}

static void text_tls(const struct jv *t, struct buf *o)
{
	if (t == NULL || jv_int(t, "smtp", 0) + jv_int(t, "imap", 0) + jv_int(t, "smtp_failed", 0) +
				 jv_int(t, "imap_failed", 0) == 0)
		return;
	buf_printf(o, "  TLS handshakes (whole run): SMTP %" PRId64 " (%" PRId64 " failed), IMAP %" PRId64
		      " (%" PRId64 " failed); %s %s\n",
		   jv_int(t, "smtp", 0), jv_int(t, "smtp_failed", 0), jv_int(t, "imap", 0),
		   jv_int(t, "imap_failed", 0), jv_str(t, "protocol", ""), jv_str(t, "cipher", ""));
}

static void text_config(const struct jv *r, struct buf *o)
{
	const struct jv *c = jv_get(r, "config"), *pt = headline_point(r), *cl = jv_get(r, "client");
	const struct jv *srv = jv_get(pt, "server");

	buf_printf(o, "\nConfiguration\n  profile %s; phases ramp-up %" PRId64 " s, steady %" PRId64
		      " s, ramp-down %" PRId64 " s, drain up to %" PRId64 " s\n",
		   jv_str(c, "profile", "?"), jv_int(c, "ramp_s", 0), jv_int(c, "steady_s", 0),
		   jv_int(c, "down_s", 0), jv_int(c, "drain_s", 0));
	buf_printf(o, "  agents %s; sink %s; TLS %s; seed %" PRId64 "\n", jv_str(r, "agents", "?"),
		   jv_str(r, "sink", "")[0] ? jv_str(r, "sink", "") : "(none)", jv_str(c, "tls", "?"),
		   jv_int(c, "seed", 0));
	const struct jv *clk = jv_get(pt, "agent_clocks");
	for (size_t i = 0; clk != NULL && i < clk->n; i++)
		buf_printf(o, "  agent %s: clock offset %+" PRId64 " ms (round trip %" PRId64 " ms)\n",
			   jv_str(&clk->kid[i], "agent", "?"), jv_int(&clk->kid[i], "offset_ms", 0),
			   jv_int(&clk->kid[i], "rtt_ms", 0));
	buf_printf(o, "  SMTP %s:%" PRId64 ", submission %s:%" PRId64 ", IMAP %s:%" PRId64
		      "; domains %s, %s\n",
		   jv_str(c, "smtp_host", ""), jv_int(c, "smtp_port", 0), jv_str(c, "submit_host", ""),
		   jv_int(c, "submit_port", 0), jv_str(c, "imap_host", ""), jv_int(c, "imap_port", 0),
		   jv_str(c, "domain", ""), jv_str(c, "ext_domain", ""));
	buf_puts(o, "  workload profile:");
	for (size_t i = 0; i < ml_cfg_nkeys; i++) {
		const struct jv *v = jv_get(c, ml_cfg_keys[i].name);
		if (!ml_cfg_keys[i].profile || v == NULL || v->type != JV_NUM)
			continue;
		buf_printf(o, "%s %s=%g", (i % 4 == 0) ? "\n   " : "", ml_cfg_keys[i].name, v->num);
	}
	buf_printf(o, "\n\nServer under test\n  SMTP greeting: %s\n  IMAP greeting: %s\n"
		      "  IMAP capability: %s\n",
		   jv_str(srv, "smtp_greeting", "?"), jv_str(srv, "imap_greeting", "?"),
		   jv_str(srv, "imap_capability", "?"));
	text_tls(jv_get(pt, "tls"), o);
	buf_printf(o, "\nClient machine\n  CPU %s, %" PRId64 " cores, %.1f GiB memory, %s\n",
		   jv_str(cl, "cpu", "?"), jv_int(cl, "cores", 0),
		   (double)jv_int(cl, "mem_kb", 0) / 1048576.0, jv_str(cl, "kernel", "?"));
}

void report_text(const struct jv *r, struct buf *o)
{
	const struct jv *pt = headline_point(r), *pts = jv_get(r, "points");
	const struct jv *c = jv_get(r, "config");
	bool pass = jv_true(r, "pass");

	buf_puts(o, RULE);
	buf_printf(o, " Heron mailload result (SPECmail2009 style)%*s%s\n", 32, "",
		   pass ? "PASS" : "FAIL");
	buf_puts(o, RULE);
	if (pt == NULL) {
		buf_puts(o, " no load point completed\n");
		return;
	}
	buf_printf(o, " %.2f messages per minute, %" PRId64 " users: %s\n", jv_num(pt, "rate", 0),
		   jv_int(pt, "users", 0), pass ? "PASS" : "FAIL");
	buf_puts(o, " load points:");
	for (size_t i = 0; pts != NULL && i < pts->n; i++)
		buf_printf(o, "  %.0f%% (%.2f/min) %s%s", jv_num(&pts->kid[i], "pct", 0),
			   jv_num(&pts->kid[i], "rate", 0), jv_true(&pts->kid[i], "pass") ? "PASS" : "FAIL",
			   jv_num(&pts->kid[i], "pct", 0) > 100 ? " (headroom)" : "");
	buf_putc(o, '\n');
	if (jv_int(c, "steady_s", 0) < 1800 || jv_int(c, "ramp_s", 0) < 300)
		buf_printf(o, " NOTE: short phases (%" PRId64 "/%" PRId64 "/%" PRId64
			      " s), not the 300/1800/120 s of a full run\n",
			   jv_int(c, "ramp_s", 0), jv_int(c, "steady_s", 0), jv_int(c, "down_s", 0));
	for (size_t i = 0; pts != NULL && i < pts->n; i++)
		text_summary(&pts->kid[i], o);
	text_detail(pt, o);
	text_config(r, o);
	buf_puts(o, "\nNotes\n  Compliance counts failed steps as outside the limit. Only steps that"
		    " start in\n  steady state are measured. Delivery time is from the SMTP 250 to"
		    " the first\n  sighting (IMAP probe poll every second, or the sink's arrival"
		    " stamp).\n  The workload and its rules: " ML_WORKLOAD_SPEC "\n");
}

/* ---- HTML ---- */
static void html_esc(struct buf *o, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		switch (*s) {
		case '<': buf_puts(o, "&lt;"); break;
		case '>': buf_puts(o, "&gt;"); break;
		case '&': buf_puts(o, "&amp;"); break;
		case '"': buf_puts(o, "&quot;"); break;
		default: buf_putc(o, *s);
		}
	}
}

#define SVG_W 640
#define SVG_H 220
#define PAD 44

/* A line chart of up to two series over x = index; ymax 0: computed. */
static void svg_lines(struct buf *o, const char *title, const char *ylabel, const double *a,
		      const double *b, size_t n, double xstep, const char *la, const char *lb)
{
	double ymax = 0;

	for (size_t i = 0; i < n; i++) {
		if (a[i] > ymax)
			ymax = a[i];
		if (b != NULL && b[i] > ymax)
			ymax = b[i];
	}
	if (ymax <= 0)
		ymax = 1;
	buf_printf(o, "<figure><figcaption>");
	html_esc(o, title);
	buf_printf(o, "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		      "height=\"%d\" role=\"img\"><rect width=\"100%%\" height=\"100%%\" "
		      "fill=\"#fff\" stroke=\"#ccc\"/>",
		   SVG_W, SVG_H);
	buf_printf(o, "<text x=\"4\" y=\"14\" font-size=\"11\">%s (max %.3g)</text>", ylabel, ymax);
	buf_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"11\">time (s), 0 .. %.0f</text>",
		   SVG_W - 170, SVG_H - 4, (double)n * xstep);
	for (int s = 0; s < 2; s++) {
		const double *v = s == 0 ? a : b;
		if (v == NULL)
			continue;
		buf_printf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
			   s == 0 ? "#1f5fa8" : "#c0392b");
		for (size_t i = 0; i < n; i++)
			buf_printf(o, "%.1f,%.1f ",
				   PAD + (double)i * (SVG_W - 2 * PAD) / (double)(n > 1 ? n - 1 : 1),
				   SVG_H - PAD - v[i] / ymax * (SVG_H - 2 * PAD));
		buf_puts(o, "\"/>");
		buf_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">%s</text>",
			   SVG_W - 170, 14 + 14 * s, s == 0 ? "#1f5fa8" : "#c0392b", s == 0 ? la : lb);
	}
	buf_puts(o, "</svg></figure>\n");
}

/* Bars of a histogram in power-of-two millisecond bins. */
static void svg_histo(struct buf *o, const char *title, const struct histo *h)
{
	uint64_t bins[24] = { 0 }, maxc = 0;

	for (size_t i = 0; i < HISTO_NBUCKETS; i++) {
		if (h->b[i] == 0)
			continue;
		uint64_t ms = histo_bucket_low(i) / 1000;
		unsigned k = ms == 0 ? 0 : 64u - (unsigned)__builtin_clzll(ms);
		bins[k > 23 ? 23 : k] += h->b[i];
	}
	for (int k = 0; k < 24; k++)
		if (bins[k] > maxc)
			maxc = bins[k];
	buf_puts(o, "<figure><figcaption>");
	html_esc(o, title);
	buf_printf(o, "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		      "height=\"120\"><rect width=\"100%%\" height=\"100%%\" fill=\"#fff\" "
		      "stroke=\"#ccc\"/>",
		   SVG_W);
	for (int k = 0; k < 24 && maxc > 0; k++) {
		double hgt = (double)bins[k] / (double)maxc * 80;
		buf_printf(o, "<rect x=\"%d\" y=\"%.1f\" width=\"20\" height=\"%.1f\" fill=\"#1f5fa8\">"
			      "<title>&lt;%u ms: %" PRIu64 "</title></rect>",
			   10 + k * 25, 95 - hgt, hgt, 1u << k, bins[k]);
		if (k % 3 == 0)
			buf_printf(o, "<text x=\"%d\" y=\"112\" font-size=\"9\">&lt;%u</text>", 10 + k * 25,
				   1u << k);
	}
	buf_puts(o, "<text x=\"500\" y=\"14\" font-size=\"11\">bins: ms, powers of two</text>");
	buf_puts(o, "</svg></figure>\n");
}

static void html_cdf(struct buf *o, const struct histo *h)
{
	double v[120];
	size_t n = 120;

	for (size_t i = 0; i < n; i++) { /* share delivered within i/2 s */
		uint64_t us = (uint64_t)i * 500000;
		v[i] = h->count ? 100.0 * (double)histo_count_le(h, us) / (double)h->count : 0;
	}
	svg_lines(o, "Delivery time CDF (% delivered within t, t = 0 .. 60 s)", "% delivered", v,
		  NULL, n, 0.5, "delivered", "");
}

static void html_table(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	const struct jv *e = jv_get(pt, "errors");

	buf_printf(o, "<h2>Load point %.0f%%: %.2f messages/min, %" PRId64 " users: %s</h2>\n",
		   jv_num(pt, "pct", 0), jv_num(pt, "rate", 0), jv_int(pt, "users", 0),
		   jv_true(pt, "pass") ? "<span class=pass>PASS</span>" : "<span class=fail>FAIL</span>");
	buf_puts(o, "<table><tr><th>Function</th><th>Limit (s)</th><th>Required</th>"
		    "<th>Compliant</th><th>count</th><th>errors</th><th>p50 ms</th><th>p90 ms</th>"
		    "<th>p99 ms</th><th>max ms</th></tr>\n");
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; fns != NULL && i < fns->n; i++) {
			const struct jv *f = &fns->kid[i];
			if (jv_true(f, "summary") != (pass == 0))
				continue;
			if (pass == 1 && jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0)
				continue;
			buf_puts(o, pass ? "<tr class=other><td>" : "<tr><td>");
			html_esc(o, jv_str(f, "name", "?"));
			buf_printf(o, "</td><td>%.0f</td><td>%s</td><td>%.2f%%</td><td>%" PRId64
				      "</td><td>%" PRId64 "</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
				      "<td>%.2f</td></tr>\n",
				   jv_num(f, "limit_ms", 0) / 1000, pass ? "" : "95%", jv_num(f, "pct", 0),
				   jv_int(f, "count", 0), jv_int(f, "errors", 0), jv_num(f, "p50_ms", 0),
				   jv_num(f, "p90_ms", 0), jv_num(f, "p99_ms", 0), jv_num(f, "max_ms", 0));
		}
		if (pass == 0)
			buf_printf(o, "<tr><td>Delivery Time</td><td>60</td><td>95%%</td><td>%.2f%%</td>"
				      "<td>%" PRId64 "</td><td>%" PRId64 " lost, %" PRId64 " dup</td>"
				      "<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n"
				      "<tr><td>Error Rate</td><td></td><td>&lt; 1%%</td><td>%.3f%%</td>"
				      "<td>%" PRId64 "</td><td>%" PRId64 "</td><td colspan=4></td></tr>\n",
				   jv_num(d, "pct", 0), jv_int(d, "count", 0), jv_int(d, "lost", 0),
				   jv_int(d, "duplicated", 0), jv_num(d, "p50_ms", 0), jv_num(d, "p90_ms", 0),
				   jv_num(d, "p99_ms", 0), jv_num(d, "max_ms", 0), jv_num(e, "rate_pct", 0),
				   jv_int(e, "steps", 0), jv_int(e, "failed", 0));
	}
	buf_puts(o, "</table>\n");
	const struct jv *why = jv_get(pt, "reasons");
	for (size_t i = 0; why != NULL && i < why->n; i++) {
		buf_puts(o, "<p class=fail>fails: ");
		html_esc(o, why->kid[i].s);
		buf_puts(o, "</p>\n");
	}
	buf_puts(o, "<p>remote delivery check: ");
	html_esc(o, jv_str(d, "remote_note", ""));
	buf_puts(o, "</p>\n");
}

static void html_charts(const struct jv *pt, struct buf *o)
{
	const struct jv *ts = jv_get(pt, "ts"), *rows = jv_get(ts, "rows");
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	double step = jv_num(ts, "step_s", 1);
	size_t n = rows != NULL ? rows->n : 0;
	struct histo h;

	if (n > 0) {
		double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
		double *c = calloc(n, sizeof(double)), *e = calloc(n, sizeof(double));
		for (size_t i = 0; i < n; i++) {
			const struct jv *r = &rows->kid[i];
			if (r->n != 6)
				continue;
			a[i] = r->kid[0].num / step;
			b[i] = r->kid[2].num / step;
			c[i] = r->kid[4].num;
			e[i] = r->kid[5].num;
		}
		svg_lines(o, "Throughput: steps per second", "steps/s", a, b, n, step, "SMTP", "IMAP");
		svg_lines(o, "p99 latency over time (ms, power-of-two resolution)", "ms", c, e, n, step,
			  "SMTP", "IMAP");
		free(a);
		free(b);
		free(c);
		free(e);
	}
	const char *dh = jv_str(d, "histo", NULL);
	if (dh != NULL && histo_deserialize(&h, dh, strlen(dh)) == 0)
		html_cdf(o, &h);
	buf_puts(o, "<h3>Latency histograms</h3>\n");
	for (size_t i = 0; fns != NULL && i < fns->n; i++) {
		const char *hs = jv_str(&fns->kid[i], "histo", NULL);
		if (!jv_true(&fns->kid[i], "summary") || hs == NULL ||
		    histo_deserialize(&h, hs, strlen(hs)) < 0)
			continue;
		svg_histo(o, jv_str(&fns->kid[i], "name", "?"), &h);
	}
}

void report_html(const struct jv *r, struct buf *o)
{
	const struct jv *pts = jv_get(r, "points"), *pt = headline_point(r);
	struct buf txt;

	buf_puts(o, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mailload report"
		    "</title><style>body{font-family:sans-serif;margin:2em;max-width:70em}"
		    "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 6px;"
		    "font-size:13px}td:nth-child(n+2){text-align:right}tr.other{color:#555}"
		    ".pass{color:#17802d;font-weight:bold}.fail{color:#b00;font-weight:bold}"
		    "figure{margin:1em 0}pre{font-size:12px;background:#f6f6f6;padding:1em}"
		    "</style></head><body>\n<h1>Heron mailload result: ");
	buf_puts(o, jv_true(r, "pass") ? "<span class=pass>PASS</span>" : "<span class=fail>FAIL</span>");
	buf_puts(o, "</h1>\n");
	if (pt != NULL)
		buf_printf(o, "<p><b>%.2f messages per minute, %" PRId64 " users</b></p>\n",
			   jv_num(pt, "rate", 0), jv_int(pt, "users", 0));
	for (size_t i = 0; pts != NULL && i < pts->n; i++)
		html_table(&pts->kid[i], o);
	if (pt != NULL)
		html_charts(pt, o);
	buf_init(&txt, 8192, 1u << 24);
	report_text(r, &txt);
	buf_puts(o, "<h2>Full text report</h2><pre>");
	html_esc(o, buf_cstr(&txt));
	buf_puts(o, "</pre>\n</body></html>\n");
	buf_release(&txt);
}

static int slurp(const char *path, struct buf *b)
{
	FILE *fp = fopen(path, "r");
	char tmp[65536];
	size_t n;

	if (fp == NULL)
		return -1;
	while ((n = fread(tmp, 1, sizeof(tmp), fp)) > 0)
		if (buf_append(b, tmp, n) < 0) {
			fclose(fp);
			return -1;
		}
	fclose(fp);
	return 0;
}

static int spill(const char *path, const struct buf *b)
{
	FILE *fp = fopen(path, "w");

	if (fp == NULL)
		return -1;
	fwrite(b->data, 1, b->len, fp);
	return fclose(fp) == 0 ? 0 : -1;
}

int report_render_dir(const char *dir, bool print)
{
	char path[4096];
	struct buf in, txt, html;
	struct jv *r = NULL;
	const char *err;
	int rc = -1;

	buf_init(&in, 1 << 16, (size_t)1 << 31);
	buf_init(&txt, 1 << 14, 1u << 26);
	buf_init(&html, 1 << 16, 1u << 28);
	snprintf(path, sizeof(path), "%s/report.json", dir);
	if (slurp(path, &in) < 0) {
		log_warnx("report: cannot read %s", path);
		goto out;
	}
	if (jv_parse(in.data, in.len, &r, &err) < 0) {
		log_warnx("report: %s: %s", path, err);
		goto out;
	}
	report_text(r, &txt);
	report_html(r, &html);
	snprintf(path, sizeof(path), "%s/report.txt", dir);
	if (spill(path, &txt) < 0)
		goto out;
	snprintf(path, sizeof(path), "%s/report.html", dir);
	if (spill(path, &html) < 0)
		goto out;
	if (print)
		fwrite(txt.data, 1, txt.len, stdout);
	rc = 0;
out:
	jv_free(&r);
	buf_release(&in);
	buf_release(&txt);
	buf_release(&html);
	return rc;
}

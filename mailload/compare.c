/* compare.c — owns `mailload compare A B`: two reports' headline points side by side, as text
 * and as HTML: verdicts, rates and users, the delivery accounting, server CPU where the
 * reports measured it, and per function the compliance, p50 and p99 with the ratio B/A. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mailload/json.h"
#include "mailload/mailload.h"
#include "mailload/report.h"

static const char *vd(const struct jv *r)
{
	return jv_str(r, "verdict", "?");
}

static void ratio(char *out, size_t n, double a, double b)
{
	if (a > 0 && b >= 0)
		snprintf(out, n, "%.2f", b / a);
	else
		snprintf(out, n, "-");
}

/* The server CPU seconds per 1,000 messages of a point, or a negative value. */
static double cpu_per_k(const struct jv *pt)
{
	const struct jv *s = jv_get(pt, "sut_cpu");

	return s != NULL ? jv_num(s, "s_per_1000_messages", -1) : -1;
}

/* The function f of point pt (by key), or NULL. */
static const struct jv *fn_of(const struct jv *pt, const char *key)
{
	const struct jv *fns = jv_get(pt, "functions");

	for (size_t i = 0; fns != NULL && i < fns->n; i++)
		if (strcmp(jv_str(&fns->kid[i], "key", ""), key) == 0)
			return &fns->kid[i];
	return NULL;
}

struct cmp_row {
	const char *name;
	const struct jv *a, *b;
};

/* The rows: the summary functions in order, then Delivery Time. */
static size_t cmp_rows(const struct jv *pa, const struct jv *pb, struct cmp_row *rows, size_t max)
{
	size_t n = 0;

	for (int f = 0; f < FN_NSUMMARY && n < max; f++)
		rows[n++] = (struct cmp_row){ ml_fns[f].name, fn_of(pa, ml_fns[f].key),
					      fn_of(pb, ml_fns[f].key) };
	if (n < max)
		rows[n++] = (struct cmp_row){ "Delivery Time", jv_get(pa, "delivery"),
					      jv_get(pb, "delivery") };
	return n;
}

void report_compare_text(const struct jv *a, const struct jv *b, const char *na, const char *nb,
			 struct buf *o)
{
	const struct jv *pa = report_headline(a), *pb = report_headline(b);
	struct cmp_row rows[FN_NSUMMARY + 1];
	char r1[16], r2[16];
	struct buf la, lb;

	buf_printf(o, "mailload compare: A = %s, B = %s (headline load points)\n", na, nb);
	buf_printf(o, "%-34s %-20s %-20s %8s\n", "", "A", "B", "B/A");
	buf_printf(o, "%-34s %-20s %-20s\n", "verdict", vd(a), vd(b));
	ratio(r1, sizeof(r1), jv_num(pa, "rate", 0), jv_num(pb, "rate", 0));
	buf_printf(o, "%-34s %-20.2f %-20.2f %8s\n", "messages per minute", jv_num(pa, "rate", 0),
		   jv_num(pb, "rate", 0), r1);
	ratio(r1, sizeof(r1), (double)jv_int(pa, "users", 0), (double)jv_int(pb, "users", 0));
	buf_printf(o, "%-34s %-20" PRId64 " %-20" PRId64 " %8s\n", "users", jv_int(pa, "users", 0),
		   jv_int(pb, "users", 0), r1);
	double ca = cpu_per_k(pa), cb = cpu_per_k(pb);
	char sa[24] = "not measured", sb[24] = "not measured";
	if (ca >= 0)
		snprintf(sa, sizeof(sa), "%.2f", ca);
	if (cb >= 0)
		snprintf(sb, sizeof(sb), "%.2f", cb);
	ratio(r1, sizeof(r1), ca, cb);
	buf_printf(o, "%-34s %-20s %-20s %8s\n", "server CPU s per 1,000 messages", sa, sb,
		   ca >= 0 && cb >= 0 ? r1 : "-");
	buf_init(&la, 256, ML_LINE_MAX);
	buf_init(&lb, 256, ML_LINE_MAX);
	report_accounting_line(pa, &la);
	report_accounting_line(pb, &lb);
	buf_printf(o, "A %sB %s", buf_cstr(&la), buf_cstr(&lb));
	buf_release(&la);
	buf_release(&lb);
	buf_printf(o, "\n%-44s %8s %9s %9s %8s %9s %9s %7s %7s\n", "Function", "A %", "A p50 ms",
		   "A p99 ms", "B %", "B p50 ms", "B p99 ms", "p50 B/A", "p99 B/A");
	size_t n = cmp_rows(pa, pb, rows, FN_NSUMMARY + 1);
	for (size_t i = 0; i < n; i++) {
		const struct cmp_row *r = &rows[i];
		ratio(r1, sizeof(r1), jv_num(r->a, "p50_ms", 0), jv_num(r->b, "p50_ms", 0));
		ratio(r2, sizeof(r2), jv_num(r->a, "p99_ms", 0), jv_num(r->b, "p99_ms", 0));
		if (strlen(r->name) > 44)
			buf_printf(o, "%s\n%-44s", r->name, "");
		else
			buf_printf(o, "%-44s", r->name);
		buf_printf(o, " %7.2f%% %9.2f %9.2f %7.2f%% %9.2f %9.2f %7s %7s\n",
			   jv_num(r->a, "pct", 0), jv_num(r->a, "p50_ms", 0),
			   jv_num(r->a, "p99_ms", 0), jv_num(r->b, "pct", 0),
			   jv_num(r->b, "p50_ms", 0), jv_num(r->b, "p99_ms", 0), r1, r2);
	}
	const struct jv *ea = jv_get(pa, "errors"), *eb = jv_get(pb, "errors");
	buf_printf(o, "%-44s %7.3f%% %29.3f%%\n", "Error Rate", jv_num(ea, "rate_pct", 0),
		   jv_num(eb, "rate_pct", 0));
}

void report_compare_html(const struct jv *a, const struct jv *b, const char *na, const char *nb,
			 struct buf *o)
{
	const struct jv *pa = report_headline(a), *pb = report_headline(b);
	struct cmp_row rows[FN_NSUMMARY + 1];
	char r1[16], r2[16];
	struct buf t;

	buf_puts(
		o,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mailload "
		"compare</title><style>body{font-family:sans-serif;margin:2em}table{"
		"border-collapse:collapse}td,th{border:1px solid #bbb;padding:2px 6px;"
		"font-size:13px}td:nth-child(n+2){text-align:right}pre{font-size:12px;"
		"background:#f6f6f6;padding:1em}</style></head><body>\n<h1>mailload compare</h1>"
		"\n<table class=\"compare\"><tr><th></th><th>A: ");
	svg_esc(o, na);
	buf_puts(o, "</th><th>B: ");
	svg_esc(o, nb);
	buf_printf(o,
		   "</th><th>B/A</th></tr>\n<tr><td>verdict</td><td>%s</td><td>%s</td><td></td>"
		   "</tr>\n",
		   vd(a), vd(b));
	ratio(r1, sizeof(r1), jv_num(pa, "rate", 0), jv_num(pb, "rate", 0));
	buf_printf(o,
		   "<tr><td>messages per minute</td><td>%.2f</td><td>%.2f</td><td>%s</td></tr>\n",
		   jv_num(pa, "rate", 0), jv_num(pb, "rate", 0), r1);
	ratio(r1, sizeof(r1), cpu_per_k(pa), cpu_per_k(pb));
	buf_printf(o,
		   "<tr><td>server CPU s per 1,000 messages</td><td>%.2f</td><td>%.2f</td>"
		   "<td>%s</td></tr>\n</table>\n",
		   cpu_per_k(pa), cpu_per_k(pb),
		   cpu_per_k(pa) >= 0 && cpu_per_k(pb) >= 0 ? r1 : "-");
	buf_puts(o, "<table class=\"functions\"><tr><th>Function</th><th>A %</th><th>A p50 ms</th>"
		    "<th>A p99 ms</th><th>B %</th><th>B p50 ms</th><th>B p99 ms</th>"
		    "<th>p50 B/A</th><th>p99 B/A</th></tr>\n");
	size_t n = cmp_rows(pa, pb, rows, FN_NSUMMARY + 1);
	for (size_t i = 0; i < n; i++) {
		const struct cmp_row *r = &rows[i];
		ratio(r1, sizeof(r1), jv_num(r->a, "p50_ms", 0), jv_num(r->b, "p50_ms", 0));
		ratio(r2, sizeof(r2), jv_num(r->a, "p99_ms", 0), jv_num(r->b, "p99_ms", 0));
		buf_puts(o, "<tr><td>");
		svg_esc(o, r->name);
		buf_printf(o,
			   "</td><td>%.2f%%</td><td>%.2f</td><td>%.2f</td><td>%.2f%%</td>"
			   "<td>%.2f</td><td>%.2f</td><td>%s</td><td>%s</td></tr>\n",
			   jv_num(r->a, "pct", 0), jv_num(r->a, "p50_ms", 0),
			   jv_num(r->a, "p99_ms", 0), jv_num(r->b, "pct", 0),
			   jv_num(r->b, "p50_ms", 0), jv_num(r->b, "p99_ms", 0), r1, r2);
	}
	buf_puts(o, "</table>\n<h2>As text</h2><pre>");
	buf_init(&t, 4096, ML_DOC_MAX);
	report_compare_text(a, b, na, nb, &t);
	svg_esc(o, buf_cstr(&t));
	buf_release(&t);
	buf_puts(o, "</pre></body></html>\n");
}

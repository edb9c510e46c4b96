/* report.c — owns the report renderers: text shaped like a SPECmail2009 result page (headline
 * with the certified users, the load points in one table, each point's summary with its
 * confidence intervals and delivery accounting, the details, the full disclosure) and the
 * HTML page with the same content and charts (report_svg.c), both from the parsed
 * report.json, so `mailload report DIR` re-renders exactly. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/histo.h"
#include "common/log.h"
#include "mailload/json.h"
#include "mailload/mailload.h"
#include "mailload/report.h"

#define RULE "================================================================================\n"

const struct jv *report_headline(const struct jv *r)
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

int report_histo(const struct jv *o, struct histo *h)
{
	const struct jv *hj = jv_get(o, "histogram"), *b = jv_get(hj, "buckets");

	histo_init(h);
	if (hj == NULL || b == NULL || b->type != JV_ARR)
		return -1;
	for (size_t i = 0; i < b->n; i++) {
		int64_t lo = jv_int(&b->kid[i], "lo_us", -1), n = jv_int(&b->kid[i], "count", 0);
		if (lo < 0 || n < 0)
			return -1;
		h->b[histo_index((uint64_t)lo)] += (uint64_t)n;
	}
	h->count = (uint64_t)jv_int(hj, "count", 0);
	h->sum = (uint64_t)jv_int(hj, "sum_us", 0);
	h->min = (uint64_t)jv_int(hj, "min_us", 0);
	h->max = (uint64_t)jv_int(hj, "max_us", 0);
	return 0;
}

void report_accounting_line(const struct jv *pt, struct buf *o)
{
	const struct jv *d = jv_get(pt, "delivery");

	buf_printf(o,
		   "Delivery accounting: %" PRId64 " copies checked, %" PRId64
		   " delivered, %" PRId64 " late, %" PRId64 " unchecked, %" PRId64
		   " lost, %" PRId64 " duplicated\n",
		   jv_int(d, "checked", 0), jv_int(d, "delivered", 0), jv_int(d, "late", 0),
		   jv_int(d, "unchecked", 0), jv_int(d, "lost", 0), jv_int(d, "duplicated", 0));
}

static const char *verdict_of(const struct jv *o)
{
	return jv_str(o, "verdict", jv_true(o, "pass") ? "PASS" : "FAIL");
}

static bool short_phases(const struct jv *c)
{
	return jv_int(c, "steady_s", 0) < 1800 || jv_int(c, "ramp_s", 0) < 300 ||
	       jv_int(c, "down_s", 0) < 120;
}

/* ---- text ---- */
static void text_reasons(const struct jv *pt, struct buf *o)
{
	static const char *const keys[] = { "reasons", "invalid_reasons", "uncertain_reasons" };
	static const char *const tags[] = { "fails", "invalid", "uncertain" };

	for (int k = 0; k < 3; k++) {
		const struct jv *why = jv_get(pt, keys[k]);
		for (size_t i = 0; why != NULL && i < why->n; i++)
			buf_printf(o, "  %s: %s\n", tags[k],
				   why->kid[i].s != NULL ? why->kid[i].s : "?");
	}
}

static void text_row(struct buf *o, const char *name, const struct jv *f, bool none_ok)
{
	bool none = jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0;

	if (strlen(name) > 44)
		buf_printf(o, "%s\n%-44s", name, "");
	else
		buf_printf(o, "%-44s", name);
	buf_printf(o, " %4.0fs %7.2f%% ", jv_num(f, "limit_ms", 0) / 1000, ML_REQUIRED_PCT);
	if (none && !none_ok)
		buf_printf(o, "%10s %17s %9d\n", "no samples", "", 0);
	else
		buf_printf(o, "%9.2f%% %7.2f..%6.2f%%%s %9" PRId64 "\n", jv_num(f, "pct", 0),
			   jv_num(f, "ci_low_pct", 0), jv_num(f, "ci_high_pct", 0),
			   jv_true(f, "straddles") ? "?" : " ",
			   jv_int(f, "count", 0) + jv_int(f, "errors", 0));
}

static void text_summary(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	const struct jv *e = jv_get(pt, "errors");

	buf_printf(o,
		   "\nSummary: load point %.0f%% (%.2f messages per minute, %" PRId64
		   " users): %s%s\n",
		   jv_num(pt, "pct", 0), jv_num(pt, "rate", 0), jv_int(pt, "users", 0),
		   verdict_of(pt),
		   jv_true(pt, "uncertain") ? " (uncertain: an interval straddles)" : "");
	buf_printf(o, "%-44s %5s %8s %10s %17s %9s\n", "Function", "Limit", "Required",
		   "Compliant", "95% interval", "samples");
	for (size_t i = 0; fns != NULL && i < fns->n; i++)
		if (jv_true(&fns->kid[i], "summary"))
			text_row(o, jv_str(&fns->kid[i], "name", "?"), &fns->kid[i], false);
	text_row(o, "Delivery Time", d, false);
	buf_printf(o, "%-44s %5s %8s %9.3f%% %7.3f..%6.3f%%  %9" PRId64 "\n", "Error Rate", "",
		   "< 1%", jv_num(e, "rate_pct", 0), jv_num(e, "ci_low_pct", 0),
		   jv_num(e, "ci_high_pct", 0), jv_int(e, "steps", 0));
	text_reasons(pt, o);
	report_accounting_line(pt, o);
}

/* The copies named in one of delivery's lists, one a line. */
static void text_copies(struct buf *o, const struct jv *d, const char *key, const char *tag,
			const char *count_key)
{
	const struct jv *l = jv_get(d, key);

	for (size_t i = 0; l != NULL && i < l->n; i++) {
		const struct jv *c = &l->kid[i];
		buf_printf(o, "  %s: %s to %s (%s, %s), acknowledged %.3f s into the run", tag,
			   jv_str(c, "message_id", "?"), jv_str(c, "rcpt", "?"),
			   jv_true(c, "local") ? "local" : "remote",
			   jv_true(c, "submitted") ? "user submission" : "inbound",
			   jv_num(c, "ack_s", 0));
		if (jv_get(c, "delivery_s") != NULL)
			buf_printf(o, ", found after %.1f s", jv_num(c, "delivery_s", 0));
		if (jv_get(c, "how") != NULL)
			buf_printf(o, " (%s)", jv_str(c, "how", ""));
		buf_putc(o, '\n');
	}
	if (l != NULL && (int64_t)l->n < jv_int(d, count_key, 0))
		buf_printf(o, "  (the first %zu named)\n", l->n);
}

static void text_functions(const struct jv *fns, struct buf *o)
{
	static const char *const heads[] = {
		NULL, "Other functions (not part of pass/fail):\n",
		"Delivery probes and reconciliation (measurement: in no "
		"rule and not in the error rate):\n"
	};
	static const char *const cls[] = { "summary", "other", "probe" };

	buf_printf(o, "\nResponse times (ms), steady state\n%-44s %9s %7s %9s %9s %9s %9s\n",
		   "Function", "count", "errors", "p50", "p90", "p99", "max");
	for (int k = 0; k < 3; k++) {
		if (heads[k] != NULL)
			buf_puts(o, heads[k]);
		for (size_t i = 0; fns != NULL && i < fns->n; i++) {
			const struct jv *f = &fns->kid[i];
			const char *name = jv_str(f, "name", "?");
			if (strcmp(jv_str(f, "class", jv_true(f, "summary") ? "summary" : "other"),
				   cls[k]) != 0)
				continue;
			if (k > 0 && jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0)
				continue;
			if (strlen(name) > 44)
				buf_printf(o, "%s\n%-44s", name, "");
			else
				buf_printf(o, "%-44s", name);
			buf_printf(o, " %9" PRId64 " %7" PRId64 " %9.2f %9.2f %9.2f %9.2f\n",
				   jv_int(f, "count", 0), jv_int(f, "errors", 0),
				   jv_num(f, "p50_ms", 0), jv_num(f, "p90_ms", 0),
				   jv_num(f, "p99_ms", 0), jv_num(f, "max_ms", 0));
		}
	}
}

static void text_delivery(const struct jv *d, struct buf *o)
{
	const struct jv *pr = jv_get(d, "probes"), *rc = jv_get(d, "reconciliation");
	const struct jv *q = jv_get(pr, "queue"), *fl = jv_get(pr, "first_look");

	buf_printf(o,
		   "Delivery: %" PRId64 " recipient copies (%" PRId64 " local, %" PRId64
		   " remote); Delivery Time counts the %" PRId64 " found of the %" PRId64
		   " acknowledged in steady state: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		   jv_int(d, "checked", 0), jv_int(d, "local", 0), jv_int(d, "remote", 0),
		   jv_int(d, "measured_found", 0), jv_int(d, "measured", 0),
		   jv_num(d, "p50_ms", 0), jv_num(d, "p99_ms", 0), jv_num(d, "max_ms", 0));
	buf_printf(o,
		   "  delivered: seen within the probe's window (%.0f s after the 250); late: "
		   "seen after it, or found only by the reconciliation\n",
		   jv_num(d, "window_ms", 0) / 1000);
	buf_printf(o,
		   "  probes: %" PRId64 " sessions, up to %" PRId64 " connections%s; queueing "
		   "delay p50 %.0f ms, p99 %.0f ms, max %.0f ms; first look p99 %.0f ms; %" PRId64
		   " copies never looked at in their window, %" PRId64 " found only by an unasked "
		   "look in IDLE\n",
		   jv_int(pr, "sessions", 0), jv_int(pr, "connections_allowed", 0),
		   jv_true(pr, "limited_by_server") ? " (limited: the server refused more)" : "",
		   jv_num(q, "p50_ms", 0), jv_num(q, "p99_ms", 0), jv_num(q, "max_ms", 0),
		   jv_num(fl, "p99_ms", 0), jv_int(pr, "expired_unprobed", 0),
		   jv_int(pr, "idle_missed", 0));
	if (jv_true(rc, "tried"))
		buf_printf(o,
			   "  reconciliation: %" PRId64 " INBOXes read, %" PRId64
			   " could not be, %" PRId64 " copies found there (%" PRId64
			   " under a UID already covered)\n",
			   jv_int(rc, "read", 0), jv_int(rc, "failed", 0), jv_int(rc, "found", 0),
			   jv_int(rc, "below_covered_uid", 0));
	else
		buf_puts(o, "  reconciliation: not needed (every local copy was seen)\n");
	buf_printf(o, "  remote check: %s\n", jv_str(d, "remote_note", ""));
	text_copies(o, d, "lost_copies", "lost", "lost");
	text_copies(o, d, "late_copies", "late", "late");
	text_copies(o, d, "unchecked_copies", "unchecked", "unchecked");
}

static void text_detail(const struct jv *pt, struct buf *o)
{
	const struct jv *e = jv_get(pt, "errors"), *m = jv_get(pt, "messages");

	text_functions(jv_get(pt, "functions"), o);
	buf_printf(o,
		   "\nMessages: %" PRId64 " submitted by users (%" PRId64
		   " in steady state = %.2f per minute), %" PRId64 " from remote servers\n",
		   jv_int(m, "submitted", 0), jv_int(m, "submitted_steady", 0),
		   jv_num(m, "measured_rate", 0), jv_int(m, "incoming", 0));
	text_delivery(jv_get(pt, "delivery"), o);
	buf_printf(o, "Errors: %" PRId64 " of %" PRId64 " workload steps (%.3f%%)",
		   jv_int(e, "failed", 0), jv_int(e, "steps", 0), jv_num(e, "rate_pct", 0));
	if (jv_int(e, "sessions_refused", 0) > 0)
		buf_printf(o,
			   "; %" PRId64 " sessions refused by the agent's cap (client overloaded)",
			   jv_int(e, "sessions_refused", 0));
	if (jv_int(e, "probe_failed", 0) > 0)
		buf_printf(o, "; %" PRId64 " probe steps failed (not counted)",
			   jv_int(e, "probe_failed", 0));
	buf_putc(o, '\n');
	const struct jv *top = jv_get(e, "top");
	for (size_t i = 0; top != NULL && i < top->n; i++) {
		const struct jv *t = &top->kid[i];
		buf_printf(o, "  %8" PRId64 "  %-22s %s%s\n", jv_int(t, "count", 0),
			   jv_str(t, "function", ""), jv_str(t, "message", ""),
			   jv_true(t, "probe") ? " (probe)" : "");
	}
}

static void text_tls(const struct jv *t, struct buf *o)
{
	if (t == NULL || jv_int(t, "smtp", 0) + jv_int(t, "imap", 0) +
					 jv_int(t, "smtp_failed", 0) +
					 jv_int(t, "imap_failed", 0) ==
				 0)
		return;
	buf_printf(o,
		   "  TLS handshakes (whole run): SMTP %" PRId64 " (%" PRId64
		   " failed), IMAP %" PRId64 " (%" PRId64 " failed); %s %s\n",
		   jv_int(t, "smtp", 0), jv_int(t, "smtp_failed", 0), jv_int(t, "imap", 0),
		   jv_int(t, "imap_failed", 0), jv_str(t, "protocol", ""),
		   jv_str(t, "cipher", ""));
}

static void text_machine(struct buf *o, const char *what, const struct jv *m)
{
	buf_printf(o, "  %s: %s, CPU %s, %" PRId64 " cores, %.1f GiB, %s", what,
		   jv_str(m, jv_get(m, "host") ? "host" : "name", "?"), jv_str(m, "cpu", "?"),
		   jv_int(m, "cores", 0), (double)jv_int(m, "mem_kb", 0) / 1048576.0,
		   jv_str(m, "kernel", "?"));
	if (jv_get(m, "clock_offset_ms") != NULL)
		buf_printf(o, ", clock offset %+" PRId64 " ms (round trip %" PRId64 " ms)",
			   jv_int(m, "clock_offset_ms", 0), jv_int(m, "rtt_ms", 0));
	buf_putc(o, '\n');
}

static void text_sut(const struct jv *r, const struct jv *pt, struct buf *o)
{
	const struct jv *srv = jv_get(pt, "server"), *sut = jv_get(r, "sut");
	const struct jv *sc = jv_get(sut, "config");

	buf_printf(o,
		   "\nServer under test\n  SMTP greeting: %s\n  IMAP greeting: %s\n"
		   "  IMAP capability: %s\n",
		   jv_str(srv, "smtp_greeting", "?"), jv_str(srv, "imap_greeting", "?"),
		   jv_str(srv, "imap_capability", "?"));
	if (jv_str(srv, "imap_id", "")[0] != '\0')
		buf_printf(o, "  IMAP ID: %s\n", jv_str(srv, "imap_id", ""));
	if (jv_get(sut, "version") != NULL)
		buf_printf(o, "  version: %s%s%s%s\n", jv_str(sut, "version", "?"),
			   strcmp(jv_str(sut, "version_from", "none"), "none") ? " (from " : "",
			   strcmp(jv_str(sut, "version_from", "none"), "none")
				   ? jv_str(sut, "version_from", "")
				   : "",
			   strcmp(jv_str(sut, "version_from", "none"), "none") ? ")" : "");
	text_tls(jv_get(pt, "tls"), o);
	if (sc == NULL) {
		buf_puts(o, "  configuration: not disclosed (mailload run --sut-config FILE)\n");
		return;
	}
	buf_printf(o,
		   "  %s: %s\n  workers: mtad %" PRId64 ", imapd %" PRId64
		   "; CPU pinning: %s\n  non-default keys:\n",
		   jv_str(sc, "kind", "configuration"), jv_str(sc, "path", "?"),
		   jv_int(sc, "mtad_workers", 0), jv_int(sc, "imapd_workers", 0),
		   jv_str(sc, "cpu_pinning", "?"));
	const struct jv *nd = jv_get(sc, "non_default");
	for (size_t i = 0; nd != NULL && i < nd->n; i++)
		buf_printf(o, "    %s = %s\n", nd->kid[i].key, nd->kid[i].s ? nd->kid[i].s : "");
	if (nd == NULL || nd->n == 0)
		buf_puts(o, "    (none)\n");
}

static void text_disclosure(const struct jv *r, struct buf *o)
{
	const struct jv *c = jv_get(r, "config"), *pt = report_headline(r),
			*run = jv_get(r, "run");
	const struct jv *ml = jv_get(r, "mailload"), *ags = jv_get(pt, "agents");
	const struct jv *fill = jv_get(r, "fill");

	buf_printf(o,
		   "\nDisclosure\n  mailload %s (git %s); run %" PRId64 " on %s\n  command: %s\n",
		   jv_str(ml, "version", "?"), jv_str(ml, "git", "?"), jv_int(run, "id", 0),
		   jv_str(run, "date", "?"), jv_str(run, "command_line", "?"));
	buf_printf(o,
		   "  profile %s; phases ramp-up %" PRId64 " s, steady %" PRId64
		   " s, ramp-down %" PRId64 " s, drain up to %" PRId64 " s; seed %" PRId64 "\n",
		   jv_str(c, "profile", "?"), jv_int(c, "ramp_s", 0), jv_int(c, "steady_s", 0),
		   jv_int(c, "down_s", 0), jv_int(c, "drain_s", 0), jv_int(c, "seed", 0));
	buf_printf(o, "  mailboxes: %s\n", jv_str(fill, "text", "fill not checked"));
	buf_printf(o, "  agents %s; sink %s; TLS %s\n", jv_str(r, "agents_spec", "?"),
		   jv_str(r, "sink", "")[0] ? jv_str(r, "sink", "") : "(none)",
		   jv_str(c, "tls", "?"));
	buf_printf(o,
		   "  SMTP %s:%" PRId64 ", submission %s:%" PRId64 ", IMAP %s:%" PRId64
		   "; domains %s, %s\n",
		   jv_str(c, "smtp_host", ""), jv_int(c, "smtp_port", 0),
		   jv_str(c, "submit_host", ""), jv_int(c, "submit_port", 0),
		   jv_str(c, "imap_host", ""), jv_int(c, "imap_port", 0), jv_str(c, "domain", ""),
		   jv_str(c, "ext_domain", ""));
	buf_puts(o, "  workload profile:");
	int k = 0;
	for (size_t i = 0; i < ml_cfg_nkeys; i++) {
		const struct jv *v = jv_get(c, ml_cfg_keys[i].name);
		if (!ml_cfg_keys[i].profile || v == NULL || v->type != JV_NUM)
			continue;
		buf_printf(o, "%s %s=%g", (k++ % 4 == 0) ? "\n   " : "", ml_cfg_keys[i].name,
			   v->num);
	}
	buf_puts(o, "\n");
	text_sut(r, pt, o);
	buf_puts(o, "\nClient machines\n");
	text_machine(o, "manager", jv_get(r, "manager"));
	for (size_t i = 0; ags != NULL && i < ags->n; i++)
		text_machine(o, jv_str(&ags->kid[i], "name", "agent"), &ags->kid[i]);
}

static void text_points(const struct jv *pts, struct buf *o)
{
	buf_printf(o, " %-6s %10s %9s %-8s %9s %9s %6s %6s %6s %6s\n", "point", "msgs/min",
		   "users", "verdict", "checked", "delivered", "late", "unchk", "lost", "dup");
	for (size_t i = 0; pts != NULL && i < pts->n; i++) {
		const struct jv *p = &pts->kid[i], *d = jv_get(p, "delivery");
		char pct[16];
		snprintf(pct, sizeof(pct), "%.0f%%", jv_num(p, "pct", 0));
		buf_printf(o,
			   " %-6s %10.2f %9" PRId64 " %-8s %9" PRId64 " %9" PRId64 " %6" PRId64
			   " %6" PRId64 " %6" PRId64 " %6" PRId64 "%s\n",
			   pct, jv_num(p, "rate", 0), jv_int(p, "users", 0), verdict_of(p),
			   jv_int(d, "checked", 0), jv_int(d, "delivered", 0),
			   jv_int(d, "late", 0), jv_int(d, "unchecked", 0), jv_int(d, "lost", 0),
			   jv_int(d, "duplicated", 0),
			   jv_num(p, "pct", 0) > 100 ? "  (headroom)" : "");
	}
}

/* The headline (certified, or why not) and the notes that qualify it, as text or HTML. */
static void headline(const struct jv *r, const struct jv *pt, bool html, struct buf *o)
{
	const struct jv *c = jv_get(r, "config"), *cert = jv_get(r, "certified");
	const char *v = verdict_of(r);
	char line[400];

	if (cert != NULL && cert->type == JV_OBJ)
		snprintf(line, sizeof(line),
			 "Certified: %" PRId64 " users at %.2f messages per minute",
			 jv_int(cert, "users", 0), jv_num(cert, "rate", 0));
	else
		snprintf(line, sizeof(line),
			 "Not certified: %s at %.2f messages per minute, %" PRId64 " users%s", v,
			 jv_num(pt, "rate", 0), jv_int(pt, "users", 0),
			 strcmp(v, "PASS") == 0 ? " (short phases or an uncertain interval)" : "");
	buf_printf(o, html ? "<p class=\"headline\"><b>%s</b></p>\n" : " %s\n", line);
	if (short_phases(c)) {
		snprintf(line, sizeof(line),
			 "short phases (%" PRId64 "/%" PRId64 "/%" PRId64
			 " s), not the 300/1800/120 s of a full run: not a "
			 "compliant result",
			 jv_int(c, "ramp_s", 0), jv_int(c, "steady_s", 0), jv_int(c, "down_s", 0));
		buf_printf(o, html ? "<p class=\"note\">NOTE: %s</p>\n" : " NOTE: %s\n", line);
	}
	if (jv_true(r, "uncertain"))
		buf_printf(
			o, html ? "<p class=\"note\">NOTE: %s</p>\n" : " NOTE: %s\n",
			"a 95% confidence interval straddles its limit: run it again or longer");
}

void report_text(const struct jv *r, struct buf *o)
{
	const struct jv *pt = report_headline(r), *pts = jv_get(r, "points");
	const struct jv *c = jv_get(r, "config");
	const char *v = verdict_of(r);

	buf_puts(o, RULE);
	buf_printf(o, " Heron mailload result (SPECmail2009 style)%*s%s\n", (int)(37 - strlen(v)),
		   "", v);
	buf_puts(o, RULE);
	if (pt == NULL) {
		buf_puts(o, " no load point completed\n");
		return;
	}
	headline(r, pt, false, o);
	text_points(pts, o);
	for (size_t i = 0; pts != NULL && i < pts->n; i++)
		text_summary(&pts->kid[i], o);
	text_detail(pt, o);
	text_disclosure(r, o);
	const char *notes = jv_str(r, "notes", NULL);
	buf_puts(o, "\nNotes\n");
	if (notes != NULL && notes[0] != '\0') {
		buf_puts(o, notes);
		if (notes[strlen(notes) - 1] != '\n')
			buf_putc(o, '\n');
	}
	buf_printf(o,
		   "  Compliance counts failed steps as outside the limit; the interval is "
		   "Wilson's at 95%%.\n  Only steps that start in steady state are measured; a "
		   "summary function needs %" PRId64 "\n  samples, else the run is invalid (too "
		   "short). Delivery time is from the SMTP 250\n  to the first sighting (a probe "
		   "in IDLE or polling, a user's session, the sink's\n  arrival stamp; a copy "
		   "found only by the reconciliation counts at the time found).\n  The workload "
		   "and its rules: " ML_WORKLOAD_SPEC "\n",
		   jv_int(c, "min_samples", ML_MIN_SAMPLES));
}

/* ---- HTML ---- */
static void html_verdict(struct buf *o, const char *v)
{
	buf_printf(o, "<span class=\"verdict %s\">%s</span>",
		   strcmp(v, "PASS") == 0   ? "pass"
		   : strcmp(v, "FAIL") == 0 ? "fail"
					    : "invalid",
		   v);
}

static void html_points(const struct jv *pts, struct buf *o)
{
	buf_puts(o,
		 "<table class=\"points\"><tr><th>Load point</th><th>msgs/min</th><th>users</th>"
		 "<th>verdict</th><th>checked</th><th>delivered</th><th>late</th>"
		 "<th>unchecked</th><th>lost</th><th>duplicated</th><th>Delivery Time p99</th>"
		 "</tr>\n");
	for (size_t i = 0; pts != NULL && i < pts->n; i++) {
		const struct jv *p = &pts->kid[i], *d = jv_get(p, "delivery");
		buf_printf(o, "<tr><td>%.0f%%%s</td><td>%.2f</td><td>%" PRId64 "</td><td>",
			   jv_num(p, "pct", 0), jv_num(p, "pct", 0) > 100 ? " (headroom)" : "",
			   jv_num(p, "rate", 0), jv_int(p, "users", 0));
		html_verdict(o, verdict_of(p));
		buf_printf(o,
			   "</td><td>%" PRId64 "</td><td>%" PRId64 "</td><td>%" PRId64
			   "</td><td>%" PRId64 "</td><td>%" PRId64 "</td><td>%" PRId64
			   "</td><td>%.0f ms</td></tr>\n",
			   jv_int(d, "checked", 0), jv_int(d, "delivered", 0),
			   jv_int(d, "late", 0), jv_int(d, "unchecked", 0), jv_int(d, "lost", 0),
			   jv_int(d, "duplicated", 0), jv_num(d, "p99_ms", 0));
	}
	buf_puts(o, "</table>\n");
}

static void html_row(struct buf *o, const char *name, const struct jv *f, bool other)
{
	buf_puts(o, other ? "<tr class=\"other\"><td>" : "<tr><td>");
	svg_esc(o, name);
	buf_printf(o, "</td><td>%.0f</td><td>%s</td>", jv_num(f, "limit_ms", 0) / 1000,
		   other ? "" : "95%");
	if (!other && jv_int(f, "count", 0) + jv_int(f, "errors", 0) == 0)
		buf_puts(o, "<td>no samples</td><td></td>");
	else
		buf_printf(o, "<td>%.2f%%</td><td%s>%.2f..%.2f%%</td>", jv_num(f, "pct", 0),
			   jv_true(f, "straddles") ? " class=\"straddles\"" : "",
			   jv_num(f, "ci_low_pct", 0), jv_num(f, "ci_high_pct", 0));
	buf_printf(o,
		   "<td>%" PRId64 "</td><td>%" PRId64 "</td><td>%.2f</td><td>%.2f</td>"
		   "<td>%.2f</td><td>%.2f</td></tr>\n",
		   jv_int(f, "count", 0), jv_int(f, "errors", 0), jv_num(f, "p50_ms", 0),
		   jv_num(f, "p90_ms", 0), jv_num(f, "p99_ms", 0), jv_num(f, "max_ms", 0));
}

static void html_table(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *e = jv_get(pt, "errors");
	static const char *const keys[] = { "reasons", "invalid_reasons", "uncertain_reasons" };
	static const char *const tags[] = { "fails", "invalid", "uncertain" };
	struct buf line;

	buf_printf(o, "<h2>Load point %.0f%%: %.2f messages/min, %" PRId64 " users: ",
		   jv_num(pt, "pct", 0), jv_num(pt, "rate", 0), jv_int(pt, "users", 0));
	html_verdict(o, verdict_of(pt));
	buf_puts(o, "</h2>\n<table class=\"summary\"><tr><th>Function</th><th>Limit (s)</th>"
		    "<th>Required</th><th>Compliant</th><th>95% interval</th><th>count</th>"
		    "<th>errors</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th>"
		    "</tr>\n");
	for (size_t i = 0; fns != NULL && i < fns->n; i++)
		if (jv_true(&fns->kid[i], "summary"))
			html_row(o, jv_str(&fns->kid[i], "name", "?"), &fns->kid[i], false);
	html_row(o, "Delivery Time (copies acknowledged in steady state)", jv_get(pt, "delivery"),
		 false);
	buf_printf(o,
		   "<tr><td>Error Rate</td><td></td><td>&lt; 1%%</td><td>%.3f%%</td>"
		   "<td>%.3f..%.3f%%</td><td>%" PRId64 "</td><td>%" PRId64 "</td>"
		   "<td colspan=4></td></tr>\n",
		   jv_num(e, "rate_pct", 0), jv_num(e, "ci_low_pct", 0),
		   jv_num(e, "ci_high_pct", 0), jv_int(e, "steps", 0), jv_int(e, "failed", 0));
	for (size_t i = 0; fns != NULL && i < fns->n; i++)
		if (!jv_true(&fns->kid[i], "summary") &&
		    jv_int(&fns->kid[i], "count", 0) + jv_int(&fns->kid[i], "errors", 0) > 0)
			html_row(o, jv_str(&fns->kid[i], "name", "?"), &fns->kid[i], true);
	buf_puts(o, "</table>\n");
	for (int k = 0; k < 3; k++) {
		const struct jv *why = jv_get(pt, keys[k]);
		for (size_t i = 0; why != NULL && i < why->n; i++) {
			buf_printf(o, "<p class=\"%s\">%s: ", tags[k], tags[k]);
			svg_esc(o, why->kid[i].s);
			buf_puts(o, "</p>\n");
		}
	}
	buf_init(&line, 256, ML_LINE_MAX);
	report_accounting_line(pt, &line);
	buf_puts(o, "<p class=\"accounting\">");
	svg_esc(o, buf_cstr(&line));
	buf_puts(o, "</p>\n");
	buf_release(&line);
}

/* Throughput and p99 over time, with the phases shaded. */
static void html_timecharts(const struct jv *pt, struct buf *o)
{
	const struct jv *ts = jv_get(pt, "timeseries"), *rows = jv_get(ts, "rows");
	const struct jv *ph = jv_get(pt, "phases");
	double step = jv_num(ts, "step_s", 1), ramp = jv_num(ph, "ramp_s", 0);
	double steady = jv_num(ph, "steady_s", 0), down = jv_num(ph, "down_s", 0);
	size_t n = rows != NULL ? rows->n : 0;
	struct svg_plot p;

	if (n == 0)
		return;
	double *x = calloc(n, sizeof(double)), *s[4];
	double ymax = 0, lmax = 1;
	for (int k = 0; k < 4; k++)
		s[k] = calloc(n, sizeof(double));
	size_t m = 0; /* rows up to the end of ramp-down plus a drain step */
	for (size_t i = 0; i < n; i++) {
		const struct jv *r = &rows->kid[i];
		x[i] = jv_num(r, "t_s", (double)i * step) + step / 2;
		s[0][i] = jv_num(r, "smtp_steps", 0) / step;
		s[1][i] = jv_num(r, "imap_steps", 0) / step;
		s[2][i] = jv_num(r, "smtp_p99_ms", 0);
		s[3][i] = jv_num(r, "imap_p99_ms", 0);
		if (s[0][i] + s[1][i] > 0 || x[i] < ramp + steady + down)
			m = i + 1;
		for (int k = 0; k < 2; k++) {
			ymax = s[k][i] > ymax ? s[k][i] : ymax;
			lmax = s[k + 2][i] > lmax ? s[k + 2][i] : lmax;
		}
	}
	double xmax = m > 0 ? x[m - 1] + step / 2 : ramp + steady + down;
	p.x = (struct svg_axis){ 0, xmax, false, "time since the start of ramp-up (s)" };
	p.y = (struct svg_axis){ 0, ymax > 0 ? ymax * 1.15 : 1, false, "steps per second" };
	for (int chart = 0; chart < 2; chart++) {
		svg_begin(o, &p, chart == 0 ? "throughput" : "latency",
			  chart == 0 ? "Throughput: workload steps per second (SMTP, IMAP)"
				     : "p99 response time over time (ms, log scale; power-of-two "
				       "resolution)");
		svg_phase(o, &p, 0, ramp, "ramp-up", "#eef2f7");
		svg_phase(o, &p, ramp, ramp + steady, "steady state (measured)", "#e8f5e9");
		svg_phase(o, &p, ramp + steady, ramp + steady + down, "ramp-down", "#f7eeee");
		svg_axes(o, &p);
		svg_series(o, &p, x, s[chart * 2], m, 0, "SMTP");
		svg_series(o, &p, x, s[chart * 2 + 1], m, 1, "IMAP");
		if (chart == 1)
			svg_limit(o, &p, false, 5000, "limit 5 s");
		svg_end(o);
		p.y = (struct svg_axis){ 0.1, lmax < 5000 ? 10000 : pow(10, ceil(log10(lmax))),
					 true, "p99 (ms)" };
	}
	free(x);
	for (int k = 0; k < 4; k++)
		free(s[k]);
}

static void html_charts(const struct jv *pt, struct buf *o)
{
	const struct jv *fns = jv_get(pt, "functions"), *d = jv_get(pt, "delivery");
	struct histo *h = malloc(sizeof(*h));

	buf_puts(o, "<h2>Charts (headline load point)</h2>\n");
	html_timecharts(pt, o);
	if (report_histo(d, h) == 0) {
		svg_cdf(o,
			"Delivery time: share of copies delivered within t (copies acknowledged "
			"in steady state)",
			h, ML_DELIVERY_LIMIT_MS * 1000ULL);
		svg_histogram(o, "Delivery Time histogram", h, ML_DELIVERY_LIMIT_MS * 1000ULL);
	}
	buf_puts(o, "<h3>Response-time histograms (steady state)</h3>\n");
	for (size_t i = 0; fns != NULL && i < fns->n; i++) {
		const struct jv *f = &fns->kid[i];
		if (!jv_true(f, "summary") || report_histo(f, h) < 0)
			continue;
		svg_histogram(o, jv_str(f, "name", "?"), h,
			      (uint64_t)jv_int(f, "limit_ms", 5000) * 1000);
	}
	free(h);
}

void report_html(const struct jv *r, struct buf *o)
{
	const struct jv *pts = jv_get(r, "points"), *pt = report_headline(r);
	struct buf txt;

	buf_puts(
		o,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mailload "
		"report</title><style>body{font-family:sans-serif;margin:2em;max-width:74em}"
		"table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;"
		"padding:2px 6px;font-size:13px}td:nth-child(n+2){text-align:right}"
		"td:first-child{overflow-wrap:anywhere;max-width:26em}"
		"tr.other{color:#555}.pass{color:#17802d;font-weight:bold}.fail{color:#b00;"
		"font-weight:bold}.invalid{color:#a66300;font-weight:bold}.straddles{"
		"background:#fff3cd}p.note{background:#fff3cd;padding:.4em}figure{margin:1em 0}"
		"pre{font-size:12px;background:#f6f6f6;padding:1em;white-space:pre-wrap}"
		"</style></head><body>\n<h1>Heron mailload result: ");
	html_verdict(o, verdict_of(r));
	buf_puts(o, "</h1>\n");
	if (pt != NULL)
		headline(r, pt, true, o);
	html_points(pts, o);
	for (size_t i = 0; pts != NULL && i < pts->n; i++)
		html_table(&pts->kid[i], o);
	if (pt != NULL)
		html_charts(pt, o);
	buf_init(&txt, 8192, ML_REPORT_TEXT_MAX);
	report_text(r, &txt);
	buf_puts(o, "<h2>Full text report (details and disclosure)</h2><pre>");
	svg_esc(o, buf_cstr(&txt));
	buf_puts(o, "</pre>\n</body></html>\n");
	buf_release(&txt);
}

/* ---- files ---- */
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

struct jv *report_load(const char *path)
{
	char p[4096];
	struct buf in;
	struct jv *r = NULL;
	const char *err;
	struct stat st;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(p, sizeof(p), "%s/report.json", path);
	else
		snprintf(p, sizeof(p), "%s", path);
	buf_init(&in, 1 << 16, ML_REPORT_JSON_MAX);
	if (slurp(p, &in) < 0) {
		fprintf(stderr, "mailload: cannot read %s: %s\n", p, strerror(errno));
	} else if (jv_parse(in.data, in.len, &r, &err) < 0) {
		fprintf(stderr, "mailload: %s: %s\n", p, err);
	} else if (jv_int(r, "schema_version", 1) != ML_REPORT_SCHEMA) {
		fprintf(stderr,
			"mailload: %s has report schema version %" PRId64 ", this mailload "
			"reads version %d (docs/mailload-report.md)\n",
			p, jv_int(r, "schema_version", 1), ML_REPORT_SCHEMA);
		jv_free(&r);
	}
	buf_release(&in);
	return r;
}

int report_render_dir(const char *dir, bool print)
{
	char path[4096];
	struct buf txt, html;
	struct jv *r = report_load(dir);
	int rc = -1;

	if (r == NULL)
		return -1;
	buf_init(&txt, 1 << 14, ML_REPORT_TEXT_MAX);
	buf_init(&html, 1 << 16, ML_REPORT_HTML_MAX);
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
	buf_release(&txt);
	buf_release(&html);
	return rc;
}

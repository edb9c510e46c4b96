/* report.h — renders a run's report.json (schema: docs/mailload-report.md) as text (the layout
 * of a SPECmail2009 result page) and as HTML with inline SVG charts (no JavaScript, no
 * network), and compares two reports side by side. */
#ifndef HERON_MAILLOAD_REPORT_H
#define HERON_MAILLOAD_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"

struct jv;
struct histo;

/* Appends the text report for a parsed report.json. */
void report_text(const struct jv *r, struct buf *out);
/* Appends the HTML report. */
void report_html(const struct jv *r, struct buf *out);
/* Reads DIR/report.json, writes DIR/report.txt and DIR/report.html; print: the summary to
   stdout too. 0 or -1. */
int report_render_dir(const char *dir, bool print);
/* Reads and parses a report.json (path, or a directory holding one); NULL with a message on
   stderr when unreadable or of another schema version. */
struct jv *report_load(const char *path);
/* The histogram of a report object ({"histogram":{...}} member of o) into h; -1 if absent. */
int report_histo(const struct jv *o, struct histo *h);
/* The headline point (100%, else the first); NULL when there is none. */
const struct jv *report_headline(const struct jv *r);
/* The one-line delivery accounting of a point: "Delivery accounting: N checked, ...". */
void report_accounting_line(const struct jv *pt, struct buf *out);

/* mailload compare: A and B side by side, as text and as HTML. */
void report_compare_text(const struct jv *a, const struct jv *b, const char *na, const char *nb,
			 struct buf *out);
void report_compare_html(const struct jv *a, const struct jv *b, const char *na, const char *nb,
			 struct buf *out);

/* ---- SVG charts (report_svg.c) ---- */
struct svg_axis {
	double min, max;
	bool log;
	const char *label; /* with its unit */
};
struct svg_plot {
	struct svg_axis x, y;
};
void svg_esc(struct buf *o, const char *s);
/* A figure: caption, then an <svg data-chart="kind"> with a title; axes draw the frame,
   ticks and unit labels; end closes both. */
void svg_begin(struct buf *o, const struct svg_plot *p, const char *kind, const char *title);
void svg_axes(struct buf *o, const struct svg_plot *p);
void svg_end(struct buf *o);
/* A shaded band over x0..x1 named by phase. */
void svg_phase(struct buf *o, const struct svg_plot *p, double x0, double x1, const char *name,
	       const char *fill);
/* A dashed limit line at v (vertical: an x value). */
void svg_limit(struct buf *o, const struct svg_plot *p, bool vertical, double v,
	       const char *label);
/* A line series k (its colour and legend slot). */
void svg_series(struct buf *o, const struct svg_plot *p, const double *x, const double *y,
		size_t n, int k, const char *name);
/* A bar chart of h in 1-2-5 millisecond bins up to limit_us and one bin folding the rest. */
void svg_histogram(struct buf *o, const char *title, const struct histo *h, uint64_t limit_us);
/* The share delivered within t, with the limit line. */
void svg_cdf(struct buf *o, const char *title, const struct histo *h, uint64_t limit_us);

#endif

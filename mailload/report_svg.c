/* report_svg.c — owns the report's inline SVG charts: a plot frame with labelled axes (ticks
 * at 1-2-5 steps, units, linear or logarithmic), phase bands, limit lines, line series, bar
 * histograms with the tail folded past the limit, and a CDF. Every element a reader needs
 * carries a class (xtick, ytick, xunit, yunit, phase, limit, series, bar, legend) so tests
 * can check the rendered page. No script, no external reference. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/histo.h"
#include "mailload/report.h"

#define W 680
#define H 260
#define ML 64 /* margins: left (y labels), right, top, bottom (x labels) */
#define MR 16
#define MT 28
#define MB 44
#define PW (W - ML - MR)
#define PH (H - MT - MB)

static const char *const colors[] = { "#1f5fa8", "#c0392b", "#27864a", "#8e44ad" };

void svg_esc(struct buf *o, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		switch (*s) {
		case '<':
			buf_puts(o, "&lt;");
			break;
		case '>':
			buf_puts(o, "&gt;");
			break;
		case '&':
			buf_puts(o, "&amp;");
			break;
		case '"':
			buf_puts(o, "&quot;");
			break;
		default:
			buf_putc(o, *s);
		}
	}
}

/* A tick step of 1, 2 or 5 times a power of ten giving about n ticks over span. */
static double nice_step(double span, int n)
{
	double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;

	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void fmt_num(char *out, size_t n, double v)
{
	if (fabs(v) >= 10000 && fmod(v, 1000) == 0)
		snprintf(out, n, "%.0fk", v / 1000);
	else if (fabs(v) >= 1 || v == 0)
		snprintf(out, n, "%.6g", v);
	else
		snprintf(out, n, "%.3g", v);
}

/* x or y on the plot, in pixels */
static double px(const struct svg_plot *p, double x)
{
	double f = p->x.log ? (log10(x > p->x.min ? x : p->x.min) - log10(p->x.min)) /
				      (log10(p->x.max) - log10(p->x.min))
			    : (x - p->x.min) / (p->x.max - p->x.min);
	return ML + (f < 0 ? 0 : f > 1 ? 1 : f) * PW;
}

static double py(const struct svg_plot *p, double y)
{
	double f = p->y.log ? (log10(y > p->y.min ? y : p->y.min) - log10(p->y.min)) /
				      (log10(p->y.max) - log10(p->y.min))
			    : (y - p->y.min) / (p->y.max - p->y.min);
	return MT + PH - (f < 0 ? 0 : f > 1 ? 1 : f) * PH;
}

/* One tick at v: its grid line and its label. */
static void tick(struct buf *o, const struct svg_plot *p, bool xaxis, double v)
{
	char lab[32];

	fmt_num(lab, sizeof(lab), v);
	if (xaxis)
		buf_printf(o,
			   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
			   "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
			   "font-size=\"11\">%s</text>",
			   px(p, v), MT, px(p, v), MT + PH, px(p, v), MT + PH + 15, lab);
	else
		buf_printf(o,
			   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			   "<text class=\"ytick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
			   "font-size=\"11\">%s</text>",
			   ML, py(p, v), ML + PW, py(p, v), ML - 6, py(p, v) + 4, lab);
}

static void ticks(struct buf *o, const struct svg_plot *p, bool xaxis)
{
	const struct svg_axis *a = xaxis ? &p->x : &p->y;

	if (a->log) { /* decades */
		for (double v = pow(10, ceil(log10(a->min) - 1e-9)); v <= a->max * 1.0001; v *= 10)
			tick(o, p, xaxis, v);
		return;
	}
	double step = nice_step(a->max - a->min, xaxis ? 8 : 5);
	for (double v = ceil(a->min / step) * step; v <= a->max + step * 1e-6; v += step)
		tick(o, p, xaxis, fabs(v) < step * 1e-6 ? 0 : v);
}

void svg_begin(struct buf *o, const struct svg_plot *p, const char *kind, const char *title)
{
	buf_puts(o, "<figure><figcaption>");
	svg_esc(o, title);
	buf_printf(o,
		   "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		   "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" data-chart=\"%s\">"
		   "<title>",
		   W, H, W, H, kind);
	svg_esc(o, title);
	buf_printf(o, "</title><rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>", W, H);
}

void svg_axes(struct buf *o, const struct svg_plot *p)
{
	ticks(o, p, true);
	ticks(o, p, false);
	buf_printf(o,
		   "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		   "stroke=\"#555\"/>",
		   ML, MT, PW, PH);
	buf_printf(o,
		   "<text class=\"xunit\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
		   "font-size=\"12\">",
		   ML + PW / 2, H - 8);
	svg_esc(o, p->x.label);
	buf_printf(o,
		   "</text><text class=\"yunit\" x=\"14\" y=\"%d\" text-anchor=\"middle\" "
		   "font-size=\"12\" transform=\"rotate(-90 14 %d)\">",
		   MT + PH / 2, MT + PH / 2);
	svg_esc(o, p->y.label);
	buf_puts(o, "</text>");
}

void svg_end(struct buf *o)
{
	buf_puts(o, "</svg></figure>\n");
}

void svg_phase(struct buf *o, const struct svg_plot *p, double x0, double x1, const char *name,
	       const char *fill)
{
	if (x1 <= x0)
		return;
	buf_printf(o,
		   "<rect class=\"phase\" data-phase=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
		   "height=\"%d\" fill=\"%s\"/><text class=\"phasename\" x=\"%.1f\" y=\"%d\" "
		   "text-anchor=\"middle\" font-size=\"10\" fill=\"#555\">%s</text>",
		   name, px(p, x0), MT, px(p, x1) - px(p, x0), PH, fill,
		   (px(p, x0) + px(p, x1)) / 2, MT - 4, name);
}

void svg_limit(struct buf *o, const struct svg_plot *p, bool vertical, double v, const char *label)
{
	double x1, y1, x2, y2;

	if (vertical) {
		x1 = x2 = px(p, v);
		y1 = MT;
		y2 = MT + PH;
	} else {
		x1 = ML;
		x2 = ML + PW;
		y1 = y2 = py(p, v);
	}
	buf_printf(o,
		   "<line class=\"limit\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		   "stroke=\"#d35400\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>"
		   "<text class=\"limitlabel\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
		   "fill=\"#d35400\" text-anchor=\"%s\">",
		   x1, y1, x2, y2, vertical ? x1 - 4 : x2 - 4, vertical ? (double)MT + 12 : y1 - 4,
		   "end");
	svg_esc(o, label);
	buf_puts(o, "</text>");
}

void svg_series(struct buf *o, const struct svg_plot *p, const double *x, const double *y,
		size_t n, int k, const char *name)
{
	buf_printf(o,
		   "<polyline class=\"series\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" "
		   "stroke-width=\"1.6\" points=\"",
		   name, colors[k % 4]);
	for (size_t i = 0; i < n; i++)
		buf_printf(o, "%.1f,%.1f ", px(p, x[i]), py(p, y[i]));
	buf_printf(o,
		   "\"/><rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" "
		   "fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">",
		   ML + 8 + k * 110, MT + 8, colors[k % 4], ML + 24 + k * 110, MT + 12);
	svg_esc(o, name);
	buf_puts(o, "</text>");
}

/* Bins of a latency histogram for a limit: 1-2-5 steps up to the limit, then one bin that
   folds everything above it. Edges in us; returns the number of bins. */
static size_t bins_for(uint64_t limit_us, uint64_t *edge, size_t max)
{
	static const uint64_t base[] = { 1, 2, 5 };
	size_t n = 0;

	edge[n++] = 0;
	for (uint64_t p10 = 1000; n + 2 < max; p10 *= 10) /* from 1 ms */
		for (int i = 0; i < 3 && n + 2 < max; i++) {
			uint64_t e = base[i] * p10;
			if (e >= limit_us)
				goto done;
			if (e >= limit_us / 5000) /* at most about 12 bins below the limit */
				edge[n++] = e;
		}
done:
	edge[n++] = limit_us;
	return n; /* bins: [edge[i], edge[i+1]) for i < n-1, and the fold: >= limit */
}

static void fmt_ms(char *out, size_t n, uint64_t us)
{
	if (us >= 1000000 && us % 1000000 == 0)
		snprintf(out, n, "%" PRIu64 " s", us / 1000000);
	else
		snprintf(out, n, "%g ms", (double)us / 1000.0);
}

void svg_histogram(struct buf *o, const char *title, const struct histo *h, uint64_t limit_us)
{
	uint64_t edge[24], count[24] = { 0 }, maxc = 0;
	size_t ne = bins_for(limit_us, edge, 24), nb = ne; /* ne - 1 bins below, one above */
	struct svg_plot p;
	char lab[32], lab2[48];

	for (size_t i = 0; i < HISTO_NBUCKETS; i++) {
		if (h->b[i] == 0)
			continue;
		uint64_t v = histo_bucket_low(i);
		size_t k = 0;
		while (k + 1 < ne && v >= edge[k + 1])
			k++;
		count[v >= limit_us ? nb - 1 : k] += h->b[i];
	}
	for (size_t k = 0; k < nb; k++)
		maxc = count[k] > maxc ? count[k] : maxc;
	p.x = (struct svg_axis){ 0, (double)nb, false,
				 "response time bins (ms; the last folds "
				 "everything over the limit)" };
	p.y = (struct svg_axis){ 0, maxc > 0 ? (double)maxc * 1.1 : 1, false, "steps" };
	svg_begin(o, &p, "histogram", title);
	/* y ticks only: the x axis is labelled per bin */
	struct svg_plot q = p;
	ticks(o, &q, false);
	buf_printf(o,
		   "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		   "stroke=\"#555\"/>",
		   ML, MT, PW, PH);
	double bw = (double)PW / (double)nb;
	for (size_t k = 0; k < nb; k++) {
		double top = py(&p, (double)count[k]), x = ML + (double)k * bw;
		bool fold = k == nb - 1;

		fmt_ms(lab, sizeof(lab), fold ? limit_us : edge[k + 1]);
		snprintf(lab2, sizeof(lab2), "%s%s", fold ? "&gt;" : "&#8804;", lab);
		buf_printf(o,
			   "<rect class=\"bar%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			   "height=\"%.1f\" fill=\"%s\"><title>%s: %" PRIu64
			   " steps</title></rect>",
			   fold ? " fold" : "", x + 2, top, bw - 4, (double)(MT + PH) - top,
			   fold ? "#c0392b" : "#1f5fa8", lab2, count[k]);
		buf_printf(o,
			   "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" "
			   "font-size=\"10\">%s</text>",
			   x + bw / 2, MT + PH + 14, lab2);
	}
	buf_printf(o,
		   "<text class=\"xunit\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
		   "font-size=\"12\">",
		   ML + PW / 2, H - 8);
	svg_esc(o, "upper edge of each bin (the red bar: over the limit)");
	buf_printf(o,
		   "</text><text class=\"yunit\" x=\"14\" y=\"%d\" text-anchor=\"middle\" "
		   "font-size=\"12\" transform=\"rotate(-90 14 %d)\">steps</text>",
		   MT + PH / 2, MT + PH / 2);
	svg_end(o);
}

void svg_cdf(struct buf *o, const char *title, const struct histo *h, uint64_t limit_us)
{
	struct svg_plot p;
	double xmax = (double)limit_us / 1e6 * 1.5, x[201], y[201];
	char lab[40];

	if (h->count > 0 && (double)histo_percentile(h, 99.9) / 1e6 > xmax)
		xmax = (double)histo_percentile(h, 99.9) / 1e6 * 1.1;
	p.x = (struct svg_axis){ 0, xmax, false, "delivery time (s)" };
	p.y = (struct svg_axis){ 0, 100, false, "% of copies delivered within" };
	svg_begin(o, &p, "cdf", title);
	svg_axes(o, &p);
	for (int i = 0; i <= 200; i++) {
		x[i] = xmax * i / 200;
		y[i] = h->count ? 100.0 * (double)histo_count_le(h, (uint64_t)(x[i] * 1e6)) /
					  (double)h->count
				: 0;
	}
	svg_series(o, &p, x, y, 201, 0, "delivered");
	snprintf(lab, sizeof(lab), "limit %g s", (double)limit_us / 1e6);
	svg_limit(o, &p, true, (double)limit_us / 1e6, lab);
	svg_limit(o, &p, false, 95, "95%");
	svg_end(o);
}

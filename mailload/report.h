/* report.h — renders a run's report.json as text (the layout of a SPECmail2009 result page)
 * and as HTML with inline SVG charts (no JavaScript, no network). */
#ifndef HERON_MAILLOAD_REPORT_H
#define HERON_MAILLOAD_REPORT_H

#include <stdbool.h>

#include "common/buf.h"

struct jv;

/* Appends the text report for a parsed report.json. */
void report_text(const struct jv *r, struct buf *out);
/* Appends the HTML report. */
void report_html(const struct jv *r, struct buf *out);
/* Reads DIR/report.json, writes DIR/report.txt and DIR/report.html; print: the summary to
   stdout too. 0 or -1. */
int report_render_dir(const char *dir, bool print);

#endif

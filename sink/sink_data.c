/* sink_data.c — owns scanning of message content as it streams: the end of DATA (CRLF.CRLF)
 * with dot-unstuffing, and the header watch for Message-ID and X-Mailload-Sent. Neither keeps
 * more than a line: bodies pass through and are discarded by the caller. */
#include <string.h>

#include "common/str.h"
#include "sink/sink.h"

enum dot_state {
	DOT_BOL,   /* at the start of a line (after CRLF) */
	DOT_MID,   /* inside a line */
	DOT_DOT,   /* a line started with '.', which was dropped */
	DOT_DOTCR, /* ".\r" at the start of a line: the end if LF follows */
};

static void hdr_line(struct sink_hdr *h);
static void hdr_capture_add(struct sink_hdr *h, const char *p, size_t n);

void sink_dot_init(struct sink_dot *d)
{
	d->st = DOT_BOL;
	d->last = '\n';
	d->cr_pending = false;
}

static void dot_flush(const char *p, size_t from, size_t to, sink_out_fn *out, void *ctx)
{
	if (to > from)
		out(ctx, p + from, to - from);
}

/* Inside a line: jumps to the next LF (memchr, the fast path for bodies); a line ends only
   when a CR came right before it. Returns the new position. */
static size_t dot_mid(struct sink_dot *d, const char *p, size_t i, size_t n)
{
	const char *nl = memchr(p + i, '\n', n - i);
	size_t k;
	char prev;

	if (nl == NULL) {
		d->last = p[n - 1];
		return n;
	}
	k = (size_t)(nl - p);
	prev = k > i ? p[k - 1] : d->last;
	d->last = '\n';
	if (prev == '\r')
		d->st = DOT_BOL;
	return k + 1;
}

size_t sink_dot_feed(struct sink_dot *d, const char *p, size_t n, bool *done_r, sink_out_fn *out,
		     void *ctx)
{
	size_t i = 0, seg = 0;

	*done_r = false;
	while (i < n) {
		switch (d->st) {
		case DOT_MID:
			i = dot_mid(d, p, i, n);
			break;
		case DOT_BOL:
			if (p[i] == '.') {
				dot_flush(p, seg, i, out, ctx);
				seg = ++i;
				d->st = DOT_DOT;
			} else {
				d->st = DOT_MID;
			}
			break;
		case DOT_DOT:
			if (p[i] == '\r') {
				d->st = DOT_DOTCR;
				i++;
			} else {
				d->st = DOT_MID;
			}
			break;
		case DOT_DOTCR:
			if (p[i] == '\n') {
				/* the CR before it is part of the terminator, not content */
				if (!d->cr_pending)
					dot_flush(p, seg, i - 1, out, ctx);
				d->cr_pending = false;
				sink_dot_init(d);
				*done_r = true;
				return i + 1;
			}
			if (d->cr_pending) {
				out(ctx, "\r", 1);
				d->cr_pending = false;
			}
			d->last = '\r';
			d->st = DOT_MID;
			break;
		}
	}
	if (d->st == DOT_DOTCR && !d->cr_pending) {
		/* hold the CR back until we know whether LF follows */
		dot_flush(p, seg, n - 1, out, ctx);
		d->cr_pending = true;
	} else {
		dot_flush(p, seg, n, out, ctx);
	}
	return n;
}

void sink_hdr_init(struct sink_hdr *h)
{
	h->in_headers = true;
	h->line_over = false;
	h->capture = 0;
	h->line_len = 0;
	h->id_len = h->sent_len = 0;
	h->id_seen = h->sent_seen = h->id_over = h->sent_over = false;
}

void sink_hdr_feed(struct sink_hdr *h, const char *p, size_t n)
{
	while (h->in_headers && n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl != NULL ? (size_t)(nl - p) + 1 : n;
		size_t room = sizeof(h->line) - h->line_len;

		if (take > room) {
			memcpy(h->line + h->line_len, p, room);
			h->line_len += room;
			h->line_over = true;
		} else {
			memcpy(h->line + h->line_len, p, take);
			h->line_len += take;
		}
		p += take;
		n -= take;
		if (nl != NULL)
			hdr_line(h);
	}
}

void sink_hdr_finish(struct sink_hdr *h)
{
	if (h->in_headers && h->line_len > 0)
		hdr_line(h);
	h->in_headers = false;
	h->capture = 0;
}

/* One physical line (LF included unless it is the last of the message) is in h->line. */
static void hdr_line(struct sink_hdr *h)
{
	size_t len = h->line_len;
	bool over = h->line_over;
	const char *colon;

	h->line_len = 0;
	h->line_over = false;
	while (len > 0 && (h->line[len - 1] == '\n' || h->line[len - 1] == '\r'))
		len--;
	if (len == 0 && !over) {
		h->in_headers = false; /* the blank line: the body starts */
		h->capture = 0;
		return;
	}
	if (h->line[0] == ' ' || h->line[0] == '\t') {
		if (h->capture != 0)
			hdr_capture_add(h, over ? NULL : h->line, len);
		return;
	}
	h->capture = 0;
	colon = memchr(h->line, ':', len);
	if (colon == NULL) {
		h->in_headers = false; /* not a header field: the header block has ended */
		return;
	}
	struct str_view name = str_trim((struct str_view){ h->line, (size_t)(colon - h->line) });
	size_t vstart = (size_t)(colon - h->line) + 1;

	if (!h->id_seen && str_caseeq(name.p, name.len, "Message-ID", 10)) {
		h->id_seen = true;
		h->capture = 1;
	} else if (!h->sent_seen && str_caseeq(name.p, name.len, "X-Mailload-Sent", 15)) {
		h->sent_seen = true;
		h->capture = 2;
	} else {
		return;
	}
	hdr_capture_add(h, over ? NULL : h->line + vstart, len - vstart);
}

/* Appends a piece of the current field's value (unfolding: the CRLF is already gone);
   p == NULL marks the value as too long. */
static void hdr_capture_add(struct sink_hdr *h, const char *p, size_t n)
{
	char *dst = h->capture == 1 ? h->id : h->sent;
	size_t *len = h->capture == 1 ? &h->id_len : &h->sent_len;
	bool *over = h->capture == 1 ? &h->id_over : &h->sent_over;
	size_t cap = h->capture == 1 ? sizeof(h->id) : sizeof(h->sent);

	if (p == NULL || n > cap - *len) {
		*over = true;
		return;
	}
	memcpy(dst + *len, p, n);
	*len += n;
}

const char *sink_hdr_id(struct sink_hdr *h, size_t *len_r)
{
	struct str_view v;
	const char *lt, *gt;

	*len_r = 0;
	if (!h->id_seen || h->id_over)
		return "";
	v = str_trim((struct str_view){ h->id, h->id_len });
	lt = memchr(v.p, '<', v.len);
	gt = lt != NULL ? memchr(lt, '>', v.len - (size_t)(lt - v.p)) : NULL;
	if (gt == NULL) {
		*len_r = v.len;
		return v.p;
	}
	/* <...> as written; white space inside can only come from folding */
	size_t n = 0;

	for (const char *q = lt; q <= gt; q++)
		if (*q != ' ' && *q != '\t')
			h->id[n++] = *q;
	h->id_len = n;
	*len_r = n;
	return h->id;
}

bool sink_hdr_sent(const struct sink_hdr *h, int64_t *ms_r)
{
	struct str_view v;
	uint64_t ms;

	if (!h->sent_seen || h->sent_over)
		return false;
	v = str_trim((struct str_view){ h->sent, h->sent_len });
	if (str_to_u64(v.p, v.len, INT64_MAX, &ms) < 0)
		return false;
	*ms_r = (int64_t)ms;
	return true;
}

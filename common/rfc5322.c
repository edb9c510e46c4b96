/* rfc5322.c — owns the incremental RFC 5322/MIME entity parser: line splitting over arbitrary
 * chunks, header fields with unfolding, boundaries, the entity stack and its sizes and line
 * counts. Content-Type parameters: rfc5322_param.c; header block helpers, dates and addresses:
 * rfc5322_util.c.
 *
 * Limits: a line is kept up to LINE_KEEP bytes (enough to recognise any boundary); a header
 * line up to field_max; nesting up to depth_max (<= STACK_MAX); entities up to parts_max. Past a
 * limit the input is still consumed and every offset stays exact. */
#include <stdlib.h>
#include <string.h>

#include "common/rfc5322.h"
#include "common/xmalloc.h"

#define LINE_KEEP (RFC5322_BOUNDARY_MAX + 64)
#define STACK_MAX 64
#define NAME_MAX_KEPT 256
#define CTYPE_MAX 8192
#define CTE_MAX 256 /* a Content-Transfer-Encoding value */

enum pstate { ST_HEADER, ST_BODY };

struct frame {
	struct rfc5322_part part;
	enum pstate state;
	uint64_t lines_at_body; /* LFs before body_off */
	char boundary[RFC5322_BOUNDARY_MAX];
	size_t blen;
	bool bactive; /* boundary still open (no close delimiter seen) */
	bool digest;  /* multipart/digest: children default to message/rfc822 */
};

struct rfc5322_parser {
	struct rfc5322_callbacks cb;
	void *ctx;
	struct rfc5322_limits lim;
	bool started; /* the message's frame has begun */

	struct frame stack[STACK_MAX];
	unsigned nframes;
	uint32_t nparts;
	uint64_t off;    /* offset of the next byte pushed */
	uint64_t nlines; /* LFs so far */

	/* the current line */
	char line[LINE_KEEP];
	size_t kept;
	uint64_t line_off, line_len;
	char last;        /* last byte of the line so far */
	bool streaming;   /* body line too long for a boundary: bytes already delivered */
	bool held_cr;     /* streaming: a trailing CR not yet delivered */
	struct buf hline; /* header line (header state only), capped */
	/* the previous line */
	unsigned prev_eol;
	bool prev_boundary;    /* its line end is not a delimiter's CRLF */
	uint64_t pend_eol_off; /* body eol held back until the next line is no boundary */
	unsigned pend_eol;
	char pend_eol_bytes[2];

	/* the field being unfolded */
	bool field_open, field_trunc;
	char fname[NAME_MAX_KEPT];
	size_t fname_len;
	struct buf fval;
	uint64_t field_off;
	/* Content-Type and Content-Transfer-Encoding of the current header */
	struct buf ctype_val, cte_val;
	bool have_ctype, have_cte;
	struct buf scratch;
	struct rfc5322_ctype ct;
};

static void parser_init(struct rfc5322_parser *p);
static void add_bytes(struct rfc5322_parser *p, const char *d, size_t n);
static void process_line(struct rfc5322_parser *p, unsigned eol);
static bool match_boundary(struct rfc5322_parser *p, unsigned *k_r, bool *close_r);
static void on_boundary(struct rfc5322_parser *p, unsigned k, bool close);
static void header_line(struct rfc5322_parser *p, unsigned eol);
static void body_line(struct rfc5322_parser *p, unsigned eol);
static void field_flush(struct rfc5322_parser *p, struct frame *f, uint64_t end);
static void header_done(struct rfc5322_parser *p, uint64_t end, uint64_t field_end, bool forced);
static void end_frame(struct rfc5322_parser *p, uint64_t end, uint64_t lines_before);
static void begin_frame(struct rfc5322_parser *p, uint64_t off);
static void deliver(struct rfc5322_parser *p, const char *d, size_t n, uint64_t off);
static void deliver_pending(struct rfc5322_parser *p);

struct rfc5322_parser *rfc5322_parser_new(const struct rfc5322_limits *lim,
					  const struct rfc5322_callbacks *cb, void *ctx)
{
	struct rfc5322_parser *p = xcalloc(1, sizeof(*p));

	if (lim != NULL)
		p->lim = *lim;
	if (p->lim.field_max == 0)
		p->lim.field_max = 64 * 1024;
	if (p->lim.depth_max == 0 || p->lim.depth_max > STACK_MAX - 2)
		p->lim.depth_max = p->lim.depth_max == 0 ? 32 : STACK_MAX - 2;
	if (p->lim.parts_max == 0)
		p->lim.parts_max = 1000;
	p->cb = *cb;
	p->ctx = ctx;
	buf_init(&p->hline, 0, p->lim.field_max + 2);
	buf_init(&p->fval, 0, p->lim.field_max);
	buf_init(&p->ctype_val, 0, CTYPE_MAX);
	buf_init(&p->cte_val, 0, CTE_MAX);
	buf_init(&p->scratch, 0, CTYPE_MAX * 4 + 1024);
	parser_init(p);
	return p;
}

void rfc5322_parser_free(struct rfc5322_parser **pp)
{
	struct rfc5322_parser *p = *pp;

	if (p == NULL)
		return;
	buf_release(&p->hline);
	buf_release(&p->fval);
	buf_release(&p->ctype_val);
	buf_release(&p->cte_val);
	buf_release(&p->scratch);
	free(p);
	*pp = NULL;
}

static void parser_init(struct rfc5322_parser *p)
{
	p->nframes = 0;
	p->nparts = 0;
	p->off = 0;
	p->nlines = 0;
	p->kept = 0;
	p->line_off = 0;
	p->line_len = 0;
	p->last = 0;
	p->streaming = false;
	p->held_cr = false;
	p->prev_eol = 0;
	p->prev_boundary = false;
	p->pend_eol = 0;
	p->field_open = false;
	buf_reset(&p->hline);
	buf_reset(&p->fval);
	buf_reset(&p->ctype_val);
	buf_reset(&p->cte_val);
	p->have_ctype = p->have_cte = false;
	p->started = false;
}

void rfc5322_parser_reset(struct rfc5322_parser *p)
{
	parser_init(p);
}

void rfc5322_parser_push(struct rfc5322_parser *p, const void *data, size_t len)
{
	const char *d = data;

	if (!p->started && len > 0) {
		p->started = true;
		begin_frame(p, 0);
	}
	while (len > 0) {
		const char *nl = memchr(d, '\n', len);
		size_t n = nl != NULL ? (size_t)(nl - d) + 1 : len;

		add_bytes(p, d, n);
		d += n;
		len -= n;
		if (nl != NULL) {
			bool cr = p->line_len >= 2 && p->last == '\r';

			process_line(p, cr ? 2 : 1);
		}
	}
}

void rfc5322_parser_finish(struct rfc5322_parser *p)
{
	if (!p->started) {
		p->started = true;
		begin_frame(p, 0);
	}
	if (p->line_len > 0) {
		if (p->held_cr)
			deliver(p, "\r", 1, p->off - 1);
		p->held_cr = false;
		p->last = 0;
		process_line(p, 0);
	}
	while (p->nframes > 0)
		end_frame(p, p->off, p->nlines);
}

static struct frame *top(struct rfc5322_parser *p)
{
	return &p->stack[p->nframes - 1];
}

/* Adds n bytes of the current line (the LF, if any, is the last of them). */
static void add_bytes(struct rfc5322_parser *p, const char *d, size_t n)
{
	struct frame *f = top(p);
	size_t keep = 0;

	if (p->line_len == 0)
		p->line_off = p->off;
	if (p->kept < LINE_KEEP) {
		keep = n < LINE_KEEP - p->kept ? n : LINE_KEEP - p->kept;
		memcpy(p->line + p->kept, d, keep);
		p->kept += keep;
	}
	if (f->state == ST_HEADER) {
		size_t room = p->hline.max - p->hline.len;

		(void)buf_append(&p->hline, d, n < room ? n : room);
	} else if (p->cb.body != NULL && f->part.kind == RFC5322_LEAF) {
		if (!p->streaming && p->kept == LINE_KEEP && p->line_len + n > LINE_KEEP) {
			/* too long to be a boundary: deliver what was held */
			deliver_pending(p);
			deliver(p, p->line, LINE_KEEP, p->line_off);
			p->streaming = true;
			d += keep;
			n -= keep;
			p->line_len += keep;
			p->off += keep;
			keep = 0;
		}
		if (p->streaming && n > 0) {
			size_t out = n;

			if (p->held_cr && d[0] != '\n')
				deliver(p, "\r", 1, p->off - 1); /* not a line end after all */
			p->held_cr = false;
			if (d[n - 1] == '\n')
				out -= n >= 2 && d[n - 2] == '\r' ? 2 : 1;
			else if (d[n - 1] == '\r') {
				out--;
				p->held_cr = true;
			}
			deliver(p, d, out, p->off);
		}
	}
	p->line_len += n;
	p->off += n;
	if (n > 0 && d[n - 1] != '\n')
		p->last = d[n - 1];
	else if (n >= 2)
		p->last = d[n - 2]; /* the byte before the LF */
}

static void process_line(struct rfc5322_parser *p, unsigned eol)
{
	unsigned k;
	bool close;

	if (match_boundary(p, &k, &close)) {
		p->pend_eol = 0;
		on_boundary(p, k, close);
		p->nlines += eol > 0;
		p->prev_boundary = true;
	} else {
		p->prev_boundary = false;
		p->nlines += eol > 0;
		if (top(p)->state == ST_HEADER)
			header_line(p, eol);
		else
			body_line(p, eol);
	}
	p->prev_eol = eol;
	p->kept = 0;
	p->line_len = 0;
	p->last = 0;
	p->streaming = false;
	p->held_cr = false;
	buf_reset(&p->hline);
}

/* Whether the line is a delimiter of an open multipart. The line needs only to start with
   "--boundary" (RFC 2046 forbids that prefix inside parts, so what follows it does not matter); when
   several open boundaries match, the longest wins, innermost first on a tie. */
static bool match_boundary(struct rfc5322_parser *p, unsigned *k_r, bool *close_r)
{
	size_t n = p->kept;
	const struct frame *best = NULL;

	if (n < 3 || p->line[0] != '-' || p->line[1] != '-' || p->line_len > LINE_KEEP)
		return false;
	while (n > 2 && (p->line[n - 1] == '\n' || p->line[n - 1] == '\r' ||
			 p->line[n - 1] == ' ' || p->line[n - 1] == '\t'))
		n--;
	for (unsigned i = p->nframes; i-- > 0;) {
		const struct frame *f = &p->stack[i];

		if (f->part.kind != RFC5322_MULTIPART || !f->bactive || f->state != ST_BODY ||
		    f->blen + 2 > n || memcmp(p->line + 2, f->boundary, f->blen) != 0 ||
		    (best != NULL && best->blen >= f->blen))
			continue;
		best = f;
		*k_r = i;
		if (f->blen + 2 == n)
			break; /* exact: nothing can match better */
	}
	if (best == NULL)
		return false;
	*close_r = n >= best->blen + 4 && p->line[best->blen + 2] == '-' &&
		   p->line[best->blen + 3] == '-';
	return true;
}

/* A boundary line of frame k: the [CR]LF before it belongs to it, so the parts above k end
   there; then k's next child begins after the line, or k's epilogue. */
static void on_boundary(struct rfc5322_parser *p, unsigned k, bool close)
{
	unsigned strip = p->prev_boundary ? 0 : p->prev_eol;
	uint64_t end = p->line_off - strip;
	uint64_t lines_before = p->nlines - (strip > 0 ? 1 : 0);
	struct frame *f;

	while (p->nframes > k + 1)
		end_frame(p, end, lines_before);
	f = top(p);
	if (p->cb.boundary != NULL)
		p->cb.boundary(p->ctx, &f->part, p->line_off, p->line_len, close);
	if (close) {
		f->bactive = false;
		return;
	}
	if (p->nparts >= p->lim.parts_max)
		return; /* children past the limit are not split: the content stays k's body */
	begin_frame(p, p->line_off + p->line_len);
}

static void begin_frame(struct rfc5322_parser *p, uint64_t off)
{
	struct frame *f = &p->stack[p->nframes];
	const struct frame *parent = p->nframes > 0 ? &p->stack[p->nframes - 1] : NULL;

	memset(f, 0, sizeof(*f));
	f->state = ST_HEADER;
	f->part.index = p->nparts++;
	f->part.parent = parent != NULL ? parent->part.index : UINT32_MAX;
	f->part.depth = p->nframes;
	f->part.is_root = parent == NULL || parent->part.kind == RFC5322_MESSAGE;
	f->part.header_off = off;
	f->digest = false;
	p->nframes++;
	p->field_open = false;
	buf_reset(&p->ctype_val);
	buf_reset(&p->cte_val);
	p->have_ctype = p->have_cte = false;
	if (p->cb.part_begin != NULL)
		p->cb.part_begin(p->ctx, &f->part);
}

static bool is_wsp(char c)
{
	return c == ' ' || c == '\t';
}

static void header_line(struct rfc5322_parser *p, unsigned eol)
{
	struct frame *f = top(p);
	const char *s = p->hline.data != NULL ? p->hline.data : "";
	size_t n = p->hline.len;
	size_t content = p->line_len - eol < n ? (size_t)(p->line_len - eol) : n;

	if (p->line_len == eol) { /* the empty line ends the header */
		header_done(p, p->line_off + p->line_len, p->line_off, false);
		return;
	}
	if (is_wsp(s[0]) && p->field_open) {
		size_t room = p->fval.max - p->fval.len;
		size_t take = content < room ? content : room;

		(void)buf_append(&p->fval, s, take);
		if (take < content)
			p->field_trunc = true;
		return;
	}
	field_flush(p, f, p->line_off);
	const char *colon = memchr(s, ':', content);

	if (colon == NULL)
		return; /* not a field: kept in the raw header, otherwise ignored */
	size_t nl = (size_t)(colon - s);

	while (nl > 0 && is_wsp(s[nl - 1]))
		nl--;
	p->fname_len = nl < NAME_MAX_KEPT ? nl : NAME_MAX_KEPT;
	memcpy(p->fname, s, p->fname_len);
	buf_reset(&p->fval);
	size_t vlen = content - (size_t)(colon + 1 - s);
	size_t take = vlen < p->fval.max ? vlen : p->fval.max;

	(void)buf_append(&p->fval, colon + 1, take);
	p->field_trunc = take < vlen || p->line_len - eol > n;
	p->field_open = true;
	p->field_off = p->line_off;
}

/* Emits the open field; its raw text ends at end. */
static void field_flush(struct rfc5322_parser *p, struct frame *f, uint64_t end)
{
	struct rfc5322_field fl;
	char *v = p->fval.data;
	size_t w = 0;

	if (!p->field_open)
		return;
	p->field_open = false;
	/* unfold: drop CR and LF, trim white space at both ends */
	for (size_t i = 0; i < p->fval.len; i++)
		if (v[i] != '\r' && v[i] != '\n')
			v[w++] = v[i];
	while (w > 0 && is_wsp(v[w - 1]))
		w--;
	size_t st = 0;

	while (st < w && is_wsp(v[st]))
		st++;
	fl.name.p = p->fname;
	fl.name.len = p->fname_len;
	fl.value.p = v != NULL ? v + st : "";
	fl.value.len = w - st;
	fl.off = p->field_off;
	fl.size = end > p->field_off ? end - p->field_off : 0;
	fl.truncated = p->field_trunc;
	if (str_caseeq(fl.name.p, fl.name.len, "Content-Type", 12) && !p->have_ctype) {
		p->have_ctype = true;
		(void)buf_append(&p->ctype_val, fl.value.p,
				 fl.value.len < CTYPE_MAX ? fl.value.len : CTYPE_MAX);
	} else if (str_caseeq(fl.name.p, fl.name.len, "Content-Transfer-Encoding", 25) &&
		   !p->have_cte) {
		p->have_cte = true;
		(void)buf_append(&p->cte_val, fl.value.p, fl.value.len < 255 ? fl.value.len : 255);
	}
	if (p->cb.field != NULL)
		p->cb.field(p->ctx, &f->part, &fl);
}

static bool view_is(struct str_view v, const char *s)
{
	return str_caseeq(v.p, v.len, s, strlen(s));
}

static void set_default_ctype(struct rfc5322_parser *p, bool digest_child)
{
	struct rfc5322_ctype *ct = &p->ct;

	memset(ct, 0, sizeof(*ct));
	if (digest_child) {
		ct->type = str_view_of("message");
		ct->subtype = str_view_of("rfc822");
	} else {
		ct->type = str_view_of("text");
		ct->subtype = str_view_of("plain");
		ct->params[0].name = str_view_of("charset");
		ct->params[0].value = str_view_of("us-ascii");
		ct->nparams = 1;
	}
}

static void choose_kind(struct rfc5322_parser *p, struct frame *f, bool forced)
{
	const struct rfc5322_ctype *ct = &p->ct;
	bool room = f->part.depth < p->lim.depth_max && p->nparts < p->lim.parts_max && !forced;

	f->part.kind = RFC5322_LEAF;
	f->part.is_text = view_is(ct->type, "text");
	if (room && view_is(ct->type, "multipart")) {
		for (unsigned i = 0; i < ct->nparams; i++) {
			const struct rfc5322_param *pa = &ct->params[i];

			if (view_is(pa->name, "boundary") && pa->value.len > 0 &&
			    pa->value.len <= RFC5322_BOUNDARY_MAX) {
				memcpy(f->boundary, pa->value.p, pa->value.len);
				f->blen = pa->value.len;
				f->bactive = true;
				f->part.kind = RFC5322_MULTIPART;
				f->digest = view_is(ct->subtype, "digest");
			}
		}
	} else if (room && view_is(ct->type, "message") && view_is(ct->subtype, "rfc822")) {
		struct str_view cte = { p->cte_val.data, p->cte_val.len };

		cte = str_trim(cte);
		if (!p->have_cte || view_is(cte, "7bit") || view_is(cte, "8bit") ||
		    view_is(cte, "binary"))
			f->part.kind = RFC5322_MESSAGE;
	}
}

/* The header of the top frame ends at end, its last field at field_end (forced: by a boundary
   or the end of input). */
static void header_done(struct rfc5322_parser *p, uint64_t end, uint64_t field_end, bool forced)
{
	struct frame *f = top(p);
	bool digest_child = p->nframes >= 2 && p->stack[p->nframes - 2].digest;

	field_flush(p, f, field_end);
	if (end < f->part.header_off)
		end = f->part.header_off;
	f->part.header_size = end - f->part.header_off;
	f->part.body_off = end;
	buf_reset(&p->scratch);
	if (p->have_ctype)
		rfc5322_ctype_parse(p->ctype_val.data, p->ctype_val.len, true, &p->scratch,
				    &p->ct);
	f->part.has_ctype = p->have_ctype && p->ct.valid;
	if (!f->part.has_ctype)
		set_default_ctype(p, digest_child);
	choose_kind(p, f, forced);
	f->part.ctype = &p->ct;
	f->state = ST_BODY;
	f->lines_at_body = p->nlines;
	if (p->cb.header_end != NULL)
		p->cb.header_end(p->ctx, &f->part);
	f->part.ctype = NULL;
	if (f->part.kind == RFC5322_MESSAGE)
		begin_frame(p, end);
}

static void body_line(struct rfc5322_parser *p, unsigned eol)
{
	struct frame *f = top(p);
	uint64_t content = p->line_len - eol;

	if (p->cb.body == NULL || f->part.kind != RFC5322_LEAF)
		return;
	if (!p->streaming) {
		deliver_pending(p);
		deliver(p, p->line, (size_t)content, p->line_off);
	}
	p->pend_eol = eol;
	p->pend_eol_off = p->line_off + content;
	if (eol == 2)
		memcpy(p->pend_eol_bytes, "\r\n", 2);
	else if (eol == 1)
		p->pend_eol_bytes[0] = '\n';
}

static void deliver_pending(struct rfc5322_parser *p)
{
	if (p->pend_eol > 0)
		deliver(p, p->pend_eol_bytes, p->pend_eol, p->pend_eol_off);
	p->pend_eol = 0;
}

static void deliver(struct rfc5322_parser *p, const char *d, size_t n, uint64_t off)
{
	if (n > 0)
		p->cb.body(p->ctx, &top(p)->part, d, n, off);
}

/* Ends the top frame at end; lines_before = LFs before end. */
static void end_frame(struct rfc5322_parser *p, uint64_t end, uint64_t lines_before)
{
	struct frame *f = top(p);

	if (f->state == ST_HEADER) {
		header_done(p, end, end, true);
		f = top(p);
	}
	if (end < f->part.body_off)
		end = f->part.body_off;
	f->part.body_size = end - f->part.body_off;
	f->part.body_lines = lines_before > f->lines_at_body ? lines_before - f->lines_at_body : 0;
	if (f->part.body_size == 0)
		f->part.body_lines = 0;
	if (p->cb.part_end != NULL)
		p->cb.part_end(p->ctx, &f->part);
	p->pend_eol = 0;
	p->nframes--;
}

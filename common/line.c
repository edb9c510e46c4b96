/* line.c — owns line extraction from evbuffers: line ends, the length limit and the skipping
 * of overlong lines. The bytes themselves stay in the caller's evbuffer or buf. */
#include <assert.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/line.h"

static int line_find(struct line_reader *r, struct evbuffer *in, struct line *line_r);
static bool line_discard(struct line_reader *r, struct evbuffer *in);

void line_reader_init(struct line_reader *r, size_t max, unsigned flags)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
	r->flags = flags;
}

void line_reader_reset(struct line_reader *r)
{
	r->discarding = false;
	r->skip_cr = false;
	r->scanned = 0;
}

static char byte_at(struct evbuffer *in, size_t pos)
{
	struct evbuffer_ptr p;
	char c = 0;

	if (evbuffer_ptr_set(in, &p, pos, EVBUFFER_PTR_SET) == 0)
		(void)evbuffer_copyout_from(in, &p, &c, 1);
	return c;
}

/* The position of the first LF at or after start and before end, or -1. */
static ssize_t find_lf(struct evbuffer *in, size_t start, size_t end)
{
	struct evbuffer_ptr s, e;

	if (start >= end || evbuffer_ptr_set(in, &s, start, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_ptr_set(in, &e, end, EVBUFFER_PTR_SET) != 0)
		return -1;
	return evbuffer_search_range(in, "\n", 1, &s, &e).pos;
}

/* Skips the rest of an overlong line; true once its line end has been removed. */
static bool line_discard(struct line_reader *r, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in), from = 0;
	ssize_t lf;

	while ((lf = find_lf(in, from, len)) >= 0) {
		bool cr = lf > 0 ? byte_at(in, (size_t)lf - 1) == '\r' : r->skip_cr;

		if ((r->flags & LINE_LF) || cr) {
			evbuffer_drain(in, (size_t)lf + 1);
			r->discarding = r->skip_cr = false;
			return true;
		}
		from = (size_t)lf + 1;
	}
	if (len > 0) {
		r->skip_cr = byte_at(in, len - 1) == '\r';
		evbuffer_drain(in, len);
	}
	return false;
}

/* Finds the next line; 1 with line_r->len/total/bare_lf, 0 need more, -1 too long. */
static int line_find(struct line_reader *r, struct evbuffer *in, struct line *line_r)
{
	for (;;) {
		if (r->discarding && !line_discard(r, in))
			return 0;
		size_t len = evbuffer_get_length(in);
		size_t limit = len < r->max + 2 ? len : r->max + 2;
		ssize_t lf;

		/* Bytes before scanned are known to hold no line end: resume after them. */
		for (lf = find_lf(in, r->scanned, limit); lf >= 0;
		     lf = find_lf(in, (size_t)lf + 1, limit)) {
			bool cr = lf > 0 && byte_at(in, (size_t)lf - 1) == '\r';

			if (!cr && !(r->flags & LINE_LF))
				continue; /* strict: a bare LF is data */
			r->scanned = 0;
			line_r->len = (size_t)lf - (cr ? 1 : 0);
			line_r->total = (size_t)lf + 1;
			line_r->bare_lf = !cr;
			if (line_r->len > r->max) {
				evbuffer_drain(in, line_r->total);
				return -1;
			}
			return 1;
		}
		if (len < r->max + 2) {
			r->scanned = limit;
			return 0;
		}
		/* max + 2 bytes and no line end: too long whatever follows. */
		r->scanned = 0;
		r->discarding = true;
		line_discard(r, in);
		return -1;
	}
}

int line_peek(struct line_reader *r, struct evbuffer *in, struct line *line_r)
{
	int rc = line_find(r, in, line_r);

	if (rc == 1)
		line_r->p = (const char *)evbuffer_pullup(in, (ssize_t)line_r->total);
	return rc;
}

void line_drain(struct evbuffer *in, const struct line *line)
{
	evbuffer_drain(in, line->total);
}

int line_read(struct line_reader *r, struct evbuffer *in, struct buf *out, struct line *line_r)
{
	int rc = line_find(r, in, line_r);

	if (rc != 1)
		return rc;
	assert(out->max >= r->max);
	buf_reset(out);
	if (line_r->len > 0) {
		char *dst = buf_reserve(out, line_r->len);

		assert(dst != NULL);
		evbuffer_remove(in, dst, line_r->len);
		buf_commit(out, line_r->len);
	}
	evbuffer_drain(in, line_r->total - line_r->len);
	line_r->p = buf_cstr(out);
	return 1;
}

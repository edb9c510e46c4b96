/* imap_compress.c — owns COMPRESS=DEFLATE (RFC 4978): after the tagged OK both directions are
 * raw deflate (RFC 1951, zlib with no header), done by a libevent filter over the connection
 * (over TLS when there is TLS). Output is flushed (Z_SYNC_FLUSH) whenever the pending
 * responses are written, so the client never waits on a half-compressed response; input
 * inflates only up to the reader's watermark, so a small compressed line cannot blow up in
 * memory. A stream that does not inflate ends the connection. zlib (Debian's zlib1g): the
 * reference implementation of deflate, kept by its authors since 1995. */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <zlib.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"

#define DEFLATE_LEVEL 6 /* zlib's default: most of the gain for little CPU */
#define DEFLATE_CHUNK 16384

struct imap_deflate {
	z_stream in, out;
	struct imap_client *c;   /* owns the filter, so it outlives this */
	struct bufferevent *bev; /* the filter */
	struct event *flush;     /* ends a batch of responses with a sync flush */
	bool unflushed;          /* deflated bytes wait in zlib for the flush */
	bool broken;             /* the client's stream did not inflate: close */
};

static void deflate_free(void *arg)
{
	struct imap_deflate *d = arg;

	if (d->flush != NULL)
		event_free(d->flush);
	inflateEnd(&d->in);
	deflateEnd(&d->out);
	free(d);
}

/* The client's compressed bytes in src, inflated into dst (up to limit bytes of it). */
static enum bufferevent_filter_result inflate_cb(struct evbuffer *src, struct evbuffer *dst,
						 ev_ssize_t limit,
						 enum bufferevent_flush_mode mode, void *arg)
{
	struct imap_deflate *d = arg;

	(void)mode;
	while (evbuffer_get_length(src) > 0 &&
	       (limit <= 0 || evbuffer_get_length(dst) < (size_t)limit)) {
		struct evbuffer_iovec in, out;
		int rc;

		evbuffer_peek(src, -1, NULL, &in, 1);
		if (evbuffer_reserve_space(dst, DEFLATE_CHUNK, &out, 1) < 1)
			return BEV_ERROR;
		d->in.next_in = in.iov_base;
		d->in.avail_in = (uInt)in.iov_len;
		d->in.next_out = out.iov_base;
		d->in.avail_out = (uInt)out.iov_len;
		rc = inflate(&d->in, Z_SYNC_FLUSH);
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			/* not deflate, or a stream that ended: no way on (libevent does not report
			   a filter's error, so the flush event closes the connection) */
			evbuffer_drain(src, evbuffer_get_length(src));
			d->broken = true;
			event_active(d->flush, EV_TIMEOUT, 1);
			return BEV_ERROR;
		}
		out.iov_len -= d->in.avail_out;
		evbuffer_commit_space(dst, &out, 1);
		evbuffer_drain(src, in.iov_len - d->in.avail_in);
		if (rc == Z_BUF_ERROR && out.iov_len == 0)
			break; /* needs more input than there is */
	}
	return evbuffer_get_length(dst) > 0 ? BEV_OK : BEV_NEED_MORE;
}

/* After the loop's turn that wrote responses: one sync flush for all of them. */
static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct imap_deflate *d = arg;

	(void)fd;
	(void)what;
	if (d->broken) {
		d->broken = false;
		imap_client_close(d->c, "compressed input does not inflate");
	}
	bufferevent_flush(d->bev, EV_WRITE, BEV_FLUSH);
}

/* Our responses in src, deflated into dst (the bytes are taken out of src first: the filter
   owns them from then on). Writes only compress; the flush at the end of the loop's turn
   (BEV_FLUSH) emits everything, so the client never waits on a half-sent response. */
static enum bufferevent_filter_result deflate_cb(struct evbuffer *src, struct evbuffer *dst,
						 ev_ssize_t limit,
						 enum bufferevent_flush_mode mode, void *arg)
{
	struct imap_deflate *d = arg;
	unsigned char in[DEFLATE_CHUNK];
	bool flush = mode != BEV_NORMAL;

	(void)limit;
	if (evbuffer_get_length(src) == 0 && !(flush && d->unflushed))
		return BEV_NEED_MORE;
	do {
		int n = evbuffer_remove(src, in, sizeof(in));
		int z = flush && evbuffer_get_length(src) == 0 ? Z_SYNC_FLUSH : Z_NO_FLUSH;

		if (n < 0)
			return BEV_ERROR;
		d->out.next_in = in;
		d->out.avail_in = (uInt)n;
		do {
			struct evbuffer_iovec out;
			int rc;

			if (evbuffer_reserve_space(dst, DEFLATE_CHUNK, &out, 1) < 1)
				return BEV_ERROR;
			d->out.next_out = out.iov_base;
			d->out.avail_out = (uInt)out.iov_len;
			rc = deflate(&d->out, z);
			if (rc != Z_OK && rc != Z_BUF_ERROR)
				return BEV_ERROR;
			out.iov_len -= d->out.avail_out;
			evbuffer_commit_space(dst, &out, 1);
			/* done with this piece when zlib took it all and, for the flush, had room */
		} while (d->out.avail_in > 0 || (z == Z_SYNC_FLUSH && d->out.avail_out == 0));
	} while (evbuffer_get_length(src) > 0);
	d->unflushed = !flush;
	if (d->unflushed)
		event_active(d->flush, EV_TIMEOUT, 1);
	return BEV_OK;
}

int imap_compress_start(struct imap_client *c)
{
	struct imap_deflate *d = xcalloc(1, sizeof(*d));
	struct bufferevent *under = c->bev, *bev;

	if (inflateInit2(&d->in, -15) != Z_OK) {
		free(d);
		return -1;
	}
	if (deflateInit2(&d->out, DEFLATE_LEVEL, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		inflateEnd(&d->in);
		free(d);
		return -1;
	}
	/* deferred callbacks: the filter drains the output as it is written, and an immediate
	   write callback would re-enter the command that is writing */
	bev = bufferevent_filter_new(under, inflate_cb, deflate_cb,
				     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS, deflate_free,
				     d);
	if (bev == NULL) {
		deflate_free(d);
		return -1;
	}
	d->c = c;
	d->bev = bev;
	d->flush = event_new(c->srv->base, -1, 0, flush_cb, d);
	c->bev = bev;
	c->flags |= IMAP_CF_COMPRESS;
	imap_client_rewrap(c);
	/* compressed bytes the client sent right after the command are already read */
	if (evbuffer_get_length(bufferevent_get_input(under)) > 0)
		bufferevent_trigger(under, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
	return 0;
}

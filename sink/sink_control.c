/* sink_control.c — owns the control port: JSON lines over TCP, one request per line
 * (stats, records, reset, faults), answered from the shared segment so any worker can serve
 * any control connection. `records` replies are streamed in batches as the client reads. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/buf.h"
#include "common/line.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "sink/sink.h"

#define CTL_MEMBERS 16
#define CTL_BATCH 256                /* records per shared-memory visit */
#define CTL_OUTPUT_HIGH (256 * 1024) /* stop producing records above this */
#define CTL_OUTPUT_LOW (64 * 1024)   /* and resume below this */
#define CTL_WRITE_TIMEOUT_S 60

struct ctl_conn {
	struct sink_worker *w;
	struct bufferevent *bev;
	struct line_reader lr;
	struct buf line;
	struct buf out;        /* one reply being built */
	bool streaming;        /* a records reply is in progress */
	uint64_t since, until; /* its range: (since, until] */
};

struct ctl_req {
	const char *name;
	void (*fn)(struct ctl_conn *c, const struct sink_json_member *m, int n);
};

static void ctl_read_cb(struct bufferevent *bev, void *ctx);
static void ctl_write_cb(struct bufferevent *bev, void *ctx);
static void ctl_event_cb(struct bufferevent *bev, short what, void *ctx);
static void ctl_stats(struct ctl_conn *c, const struct sink_json_member *m, int n);
static void ctl_records(struct ctl_conn *c, const struct sink_json_member *m, int n);
static void ctl_reset(struct ctl_conn *c, const struct sink_json_member *m, int n);
static void ctl_faults(struct ctl_conn *c, const struct sink_json_member *m, int n);

static const struct ctl_req ctl_reqs[] = {
	{ "stats", ctl_stats },
	{ "records", ctl_records },
	{ "reset", ctl_reset },
	{ "faults", ctl_faults },
};

void sink_control_start(struct sink_worker *w, int fd)
{
	struct ctl_conn *c = xcalloc(1, sizeof(*c));
	struct timeval wt = { CTL_WRITE_TIMEOUT_S, 0 };

	c->w = w;
	line_reader_init(&c->lr, SINK_CONTROL_LINE_MAX, LINE_LF);
	buf_init(&c->line, 256, SINK_CONTROL_LINE_MAX);
	buf_init(&c->out, 256, BUF_INPUT_BOUNDED); /* the replies to one client's lines */
	c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		close(fd);
		buf_release(&c->line);
		buf_release(&c->out);
		free(c);
		sink_worker_control_done(w);
		return;
	}
	bufferevent_setcb(c->bev, ctl_read_cb, ctl_write_cb, ctl_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, 4 * SINK_CONTROL_LINE_MAX);
	bufferevent_setwatermark(c->bev, EV_WRITE, CTL_OUTPUT_LOW, 0);
	bufferevent_set_timeouts(c->bev, NULL, &wt);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void ctl_free(struct ctl_conn *c)
{
	struct sink_worker *w = c->w;

	bufferevent_free(c->bev);
	buf_release(&c->line);
	buf_release(&c->out);
	free(c);
	sink_worker_control_done(w);
}

/* Sends c->out plus a newline and empties it. */
static void ctl_send(struct ctl_conn *c)
{
	buf_putc(&c->out, '\n');
	bufferevent_write(c->bev, c->out.data, c->out.len);
	buf_reset(&c->out);
}

static void ctl_error(struct ctl_conn *c, const char *what, const char *detail)
{
	buf_reset(&c->out);
	buf_puts(&c->out, "{\"ok\":false,\"error\":");
	if (detail != NULL) {
		char *msg = xasprintf("%s: %s", what, detail);

		sink_json_str(&c->out, msg, strlen(msg));
		free(msg);
	} else {
		sink_json_str(&c->out, what, strlen(what));
	}
	buf_putc(&c->out, '}');
	ctl_send(c);
}

static bool member_is(const struct sink_json_member *m, const char *name)
{
	return m->key_len == strlen(name) && memcmp(m->key, name, m->key_len) == 0;
}

static void ctl_stats(struct ctl_conn *c, const struct sink_json_member *m, int n)
{
	static struct histo h; /* 40 KiB: kept off the stack */
	struct sink_counters s;
	uint64_t dropped;
	struct buf hs;

	if (n > 1)
		return ctl_error(c, "stats takes no arguments", NULL);
	sink_stats_snapshot(c->w->sh, &s, &h, &dropped);
	buf_init(&hs, 256, BUF_INPUT_BOUNDED); /* one histogram, a fixed number of buckets */
	histo_serialize(&h, &hs);
	buf_printf(&c->out,
		   "{\"ok\":true,\"connections\":%" PRIu64 ",\"messages\":%" PRIu64
		   ",\"recipients\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"stamped\":%" PRIu64
		   ",\"records_dropped\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"dropped\":%" PRIu64
		   ",\"tls\":%" PRIu64 ",\"delivery_histo\":",
		   s.connections, s.messages, s.recipients, s.bytes, s.stamped, dropped,
		   s.rejected, s.dropped, s.tls);
	sink_json_str(&c->out, hs.data != NULL ? hs.data : "", hs.len);
	buf_release(&hs);
	buf_puts(&c->out, ",\"faults\":");
	sink_faults_json(sink_shared_faults(c->w->sh), &c->out);
	buf_putc(&c->out, '}');
	ctl_send(c);
}

static void ctl_reset(struct ctl_conn *c, const struct sink_json_member *m, int n)
{
	if (n > 1)
		return ctl_error(c, "reset takes no arguments", NULL);
	sink_stats_reset(c->w->sh);
	log_info("sink control reset");
	buf_puts(&c->out, "{\"ok\":true}");
	ctl_send(c);
}

static void ctl_faults(struct ctl_conn *c, const struct sink_json_member *m, int n)
{
	struct sink_faults *f = sink_shared_faults(c->w->sh);
	double v[CTL_MEMBERS];
	int k[CTL_MEMBERS];

	/* check every member first: a bad request changes nothing */
	for (int i = 0; i < n; i++) {
		if (member_is(&m[i], "cmd"))
			continue;
		k[i] = sink_fault_lookup(m[i].key, m[i].key_len);
		if (k[i] < 0) {
			char name[64];

			str_lcpy(name, "", sizeof(name));
			if (m[i].key_len < sizeof(name))
				memcpy(name, m[i].key, m[i].key_len), name[m[i].key_len] = '\0';
			return ctl_error(c, "unknown fault", name);
		}
		if (sink_json_number(&m[i], &v[i]) < 0 ||
		    !(k[i] < FAULT_NSHARES ? v[i] >= 0 && v[i] <= 1
					   : v[i] >= 0 && v[i] <= SINK_FAULT_MS_MAX &&
						     v[i] == (double)(int64_t)v[i]))
			return ctl_error(c, "bad value for", sink_fault_name(k[i]));
	}
	for (int i = 0; i < n; i++)
		if (!member_is(&m[i], "cmd"))
			sink_fault_set(f, (enum sink_fault_key)k[i], v[i]);
	buf_puts(&c->out, "{\"ok\":true,\"faults\":");
	sink_faults_json(f, &c->out);
	buf_putc(&c->out, '}');
	log_info("sink control faults %s", c->out.data);
	ctl_send(c);
}

static void ctl_record_json(void *ctx, const struct sink_record *r)
{
	struct ctl_conn *c = ctx;

	buf_printf(&c->out, "{\"seq\":%" PRIu64 ",\"id\":", r->seq);
	sink_json_str(&c->out, r->id, r->id_len);
	buf_printf(&c->out, ",\"sent_ms\":%" PRId64 ",\"arrival_ms\":%" PRId64 ",\"rcpts\":[",
		   r->sent_ms, r->arrival_ms);
	for (size_t off = 0, i = 0; off < r->rcpts_len; i++) {
		size_t len = strlen(r->rcpts + off);

		if (i > 0)
			buf_putc(&c->out, ',');
		sink_json_str(&c->out, r->rcpts + off, len);
		off += len + 1;
	}
	buf_puts(&c->out, "]}");
	ctl_send(c);
	c->since = r->seq;
}

/* Produces records until the output is full or the range is done. */
static void ctl_records_pump(struct ctl_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	while (c->streaming && evbuffer_get_length(out) < CTL_OUTPUT_HIGH) {
		if (sink_records_read(c->w->sh, c->since, c->until, CTL_BATCH, ctl_record_json,
				      c) > 0)
			continue;
		buf_printf(&c->out, "{\"ok\":true,\"next\":%" PRIu64 "}", c->since);
		ctl_send(c);
		c->streaming = false;
	}
}

static void ctl_records(struct ctl_conn *c, const struct sink_json_member *m, int n)
{
	uint64_t since = 0;

	for (int i = 0; i < n; i++) {
		if (member_is(&m[i], "cmd"))
			continue;
		if (!member_is(&m[i], "since"))
			return ctl_error(c, "records takes only since", NULL);
		if (m[i].type != JSON_NUMBER ||
		    str_to_u64(m[i].val, m[i].val_len, UINT64_MAX, &since) < 0)
			return ctl_error(c, "since must be a whole number", NULL);
	}
	c->since = since;
	c->until = sink_records_last_seq(c->w->sh);
	c->streaming = true;
	ctl_records_pump(c);
}

static void ctl_request(struct ctl_conn *c, const char *p, size_t len)
{
	struct sink_json_member m[CTL_MEMBERS];
	const char *err;
	int n = sink_json_parse(p, len, m, CTL_MEMBERS, &err);

	if (n < 0)
		return ctl_error(c, "bad JSON", err);
	for (int i = 0; i < n; i++) {
		if (!member_is(&m[i], "cmd"))
			continue;
		if (m[i].type != JSON_STRING)
			return ctl_error(c, "cmd must be a string", NULL);
		for (size_t r = 0; r < sizeof(ctl_reqs) / sizeof(ctl_reqs[0]); r++)
			if (m[i].val_len == strlen(ctl_reqs[r].name) &&
			    memcmp(m[i].val, ctl_reqs[r].name, m[i].val_len) == 0)
				return ctl_reqs[r].fn(c, m, n);
		return ctl_error(c, "unknown cmd", NULL);
	}
	ctl_error(c, "missing cmd", NULL);
}

static void ctl_read_cb(struct bufferevent *bev, void *ctx)
{
	struct ctl_conn *c = ctx;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct line l;
	int rc;

	while (!c->streaming && (rc = line_read(&c->lr, in, &c->line, &l)) != 0) {
		if (rc < 0) {
			ctl_error(c, "request line too long", NULL);
			continue;
		}
		if (str_trim((struct str_view){ l.p, l.len }).len == 0)
			continue;
		ctl_request(c, l.p, l.len);
	}
}

static void ctl_write_cb(struct bufferevent *bev, void *ctx)
{
	struct ctl_conn *c = ctx;

	if (!c->streaming)
		return;
	ctl_records_pump(c);
	if (!c->streaming)
		ctl_read_cb(bev, c); /* requests that waited behind the stream */
}

static void ctl_event_cb(struct bufferevent *bev, short what, void *ctx)
{
	ctl_free(ctx);
}

/* obs.c — owns a daemon worker's side doors: the metrics HTTP endpoint (request parsing and
 * the answer), the control socket (bind, the who/kick/metrics requests) and the publish
 * tick. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/control.h"
#include "common/log.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/reqserver.h"
#include "common/xmalloc.h"

#define HTTP_REQUEST_MAX 8192

struct obs {
	const struct obs_ops *ops;
	void *arg;
	const char *ident;
	unsigned worker;
	struct reqserver *http;
	struct reqserver *ctl;
	struct net_fds ctl_fds;
	char ctl_path[256];
	struct event *tick;
};

int obs_listen(const struct conf *c, const struct conf_addrs *addrs, struct net_fds *fds,
	       char **error_r)
{
	struct net_listen_opts lo = { .reuseport = false };

	*error_r = NULL;
	if (!conf_values(c)->metrics.enabled || addrs == NULL || addrs->n == 0)
		return 0;
	if (net_listen(addrs, &lo, fds, error_r) < 0)
		return -1;
	for (size_t i = 0; i < fds->n; i++)
		log_info("metrics listening on %s", fds->name[i]);
	return 0;
}

/* ---- HTTP ---- */

static void http_status(struct buf *out, const char *status, const char *text)
{
	buf_printf(out,
		   "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
		   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		   status, strlen(text), text);
}

/* Whether the request's headers (after the request line) ask for OpenMetrics. */
static bool wants_openmetrics(const char *hdrs)
{
	for (const char *p = hdrs; p != NULL && *p != '\0';) {
		const char *eol = strchr(p, '\n');
		size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);

		if (len > 7 && strncasecmp(p, "accept:", 7) == 0 &&
		    memmem(p, len, "application/openmetrics-text", 28) != NULL)
			return true;
		p = eol != NULL ? eol + 1 : NULL;
	}
	return false;
}

void obs_http_answer(const char *req, size_t len, struct buf *out, metrics_live_fn *live,
		     void *arg)
{
	const char *sp1 = memchr(req, ' ', len), *sp2, *eol = memchr(req, '\n', len);
	struct buf body;
	bool head, om;
	size_t plen;

	if (sp1 == NULL || eol == NULL || sp1 > eol ||
	    (sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1))) == NULL ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
		http_status(out, "400 Bad Request", "bad request\n");
		return;
	}
	head = sp1 - req == 4 && memcmp(req, "HEAD", 4) == 0;
	if (!head && !(sp1 - req == 3 && memcmp(req, "GET", 3) == 0)) {
		http_status(out, "405 Method Not Allowed", "only GET and HEAD\n");
		return;
	}
	plen = strcspn(sp1 + 1, "? ");
	if (!((plen == 8 && memcmp(sp1 + 1, "/metrics", 8) == 0) ||
	      (plen == 1 && sp1[1] == '/'))) {
		http_status(out, "404 Not Found", "the metrics are at /metrics\n");
		return;
	}
	om = wants_openmetrics(eol + 1);
	buf_init(&body, 65536, BUF_INPUT_BOUNDED);
	metrics_render_format(&body, om, live, arg);
	buf_printf(out,
		   "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		   "Connection: close\r\n\r\n",
		   om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
		      : "text/plain; version=0.0.4; charset=utf-8",
		   body.len);
	if (!head)
		buf_append(out, body.data, body.len);
	buf_release(&body);
}

static void http_cb(const char *req, size_t len, struct buf *out, void *arg)
{
	struct obs *o = arg;

	obs_http_answer(req, len, out, o->ops->live, o->arg);
}

/* ---- control socket ---- */

static void ctl_cb(const char *req, size_t len, struct buf *out, void *arg)
{
	struct obs *o = arg;
	size_t n = strcspn(req, "\r\n");

	if (n == 3 && memcmp(req, "who", 3) == 0) {
		if (o->ops->who != NULL)
			o->ops->who(out, o->ident, o->worker, o->arg);
		buf_puts(out, ".\n");
	} else if (n > 5 && memcmp(req, "kick ", 5) == 0) {
		char *user = xmemdup0(req + 5, n - 5);
		unsigned k = o->ops->kick != NULL ? o->ops->kick(user, o->arg) : 0;

		if (k > 0)
			log_info("%s worker %u kick user=%s sessions=%u", o->ident, o->worker,
				 user, k);
		buf_printf(out, "OK %u\n", k);
		free(user);
	} else if (n == 7 && memcmp(req, "metrics", 7) == 0) {
		metrics_render(out, o->ops->live, o->arg);
		buf_puts(out, "# EOF\n");
	} else if (o->ops->request == NULL || !o->ops->request(req, n, out, o->ctl, o->arg)) {
		buf_puts(out, "ERR unknown request (who, kick USER, metrics)\n");
	}
}

static void ctl_start(struct obs *o, struct event_base *base, const struct conf *c,
		      const struct reqserver_opts *ro)
{
	const char *dir = conf_values(c)->control.dir;
	struct net_listen_opts lo = { .unix_mode = 0660 };
	struct conf_addr a = { .unix_path = true };
	struct conf_addrs addrs = { 1, &a };
	struct reqserver_opts co = *ro;
	char *error = NULL;

	if (dir == NULL || dir[0] == '\0')
		return;
	if (control_path(dir, o->ident, o->worker, o->ctl_path, sizeof(o->ctl_path)) < 0) {
		log_warnx("%s worker %u: [control] dir %s: path too long for a socket; no control "
			  "socket",
			  o->ident, o->worker, dir);
		o->ctl_path[0] = '\0';
		return;
	}
	a.host = o->ctl_path;
	if (net_listen(&addrs, &lo, &o->ctl_fds, &error) < 0) {
		log_warnx(
			"%s worker %u: control socket: %s ([control] dir); mailctl who/kick will "
			"not reach this worker",
			o->ident, o->worker, error);
		free(error);
		o->ctl_path[0] = '\0';
		return;
	}
	co.end = REQSERVER_END_LINE;
	co.request_max = CONTROL_REQUEST_MAX;
	co.allow = NULL;
	co.too_long = "ERR request too long\n";
	co.name = "control";
	o->ctl = reqserver_new(base, &o->ctl_fds, &co, ctl_cb, o);
}

/* ---- the worker's side ---- */

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct obs *o = arg;

	o->ops->publish(o->arg);
}

struct obs *obs_start(struct event_base *base, const struct conf *c, const char *ident,
		      unsigned worker, const struct net_fds *fds, const struct obs_ops *ops,
		      void *arg)
{
	const struct metrics_conf *mc = &conf_values(c)->metrics;
	struct obs *o = xcalloc(1, sizeof(*o));
	struct reqserver_opts ro = {
		.max_conns = (size_t)mc->max_connections,
		.timeout_ms = mc->timeout_ms,
		.request_max = HTTP_REQUEST_MAX,
		.end = REQSERVER_END_BLANK,
		.allow = mc->allow,
		.too_long = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
			    "Connection: close\r\n\r\n",
		.name = "metrics",
	};
	struct timeval one = { 1, 0 };

	o->ops = ops;
	o->arg = arg;
	o->ident = ident;
	o->worker = worker;
	if (fds != NULL && fds->n > 0)
		o->http = reqserver_new(base, fds, &ro, http_cb, o);
	ctl_start(o, base, c, &ro);
	if (ops->publish != NULL) {
		o->tick = event_new(base, -1, EV_PERSIST, tick_cb, o);
		event_add(o->tick, &one);
		ops->publish(arg);
	}
	return o;
}

const char *obs_control_path(const struct obs *o)
{
	return o != NULL && o->ctl_path[0] != '\0' ? o->ctl_path : NULL;
}

void obs_free(struct obs **op)
{
	struct obs *o = *op;

	if (o == NULL)
		return;
	reqserver_free(&o->http);
	reqserver_free(&o->ctl);
	if (o->ctl_fds.n > 0) {
		net_fds_close(&o->ctl_fds);
		(void)unlink(o->ctl_path);
	}
	if (o->tick != NULL)
		event_free(o->tick);
	free(o);
	*op = NULL;
}

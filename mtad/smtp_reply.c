/* smtp_reply.c — owns replies to the client: formatting (every reply carries an enhanced
 * status code, RFC 2034), the error counter and the 421 close past max_errors. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include <event2/buffer.h>

#include "common/log.h"
#include "mtad/mtad.h"

static void reply_v(struct smtp_session *s, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void reply_v(struct smtp_session *s, const char *fmt, va_list ap)
{
	struct evbuffer *out = bufferevent_get_output(s->bev);
	va_list aq;
	size_t start;

	if (s->closing)
		return;
	va_copy(aq, ap);
	if (log_get_level() >= LOG_LVL_DEBUG) {
		char line[512];

		vsnprintf(line, sizeof(line), fmt, aq);
		log_debug("%016" PRIx64 " smtp reply \"%s\"", s->id, line);
	}
	va_end(aq);
	start = evbuffer_get_length(out);
	evbuffer_add_vprintf(out, fmt, ap);
	evbuffer_add(out, "\r\n", 2);
	mtad_metrics_reply(s, start);
}

void smtp_reply(struct smtp_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_v(s, fmt, ap);
	va_end(ap);
}

void smtp_error(struct smtp_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_v(s, fmt, ap);
	va_end(ap);
	if (++s->errors >= s->m->lim.max_errors) {
		log_info("%016" PRIx64 " smtp close addr=%s reason=\"too many errors\"", s->id,
			 s->addr);
		smtp_reply(s, "421 4.7.0 %s Too many errors, closing connection", s->m->hostname);
		smtp_close(s);
	}
}

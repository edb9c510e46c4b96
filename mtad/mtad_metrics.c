/* mtad_metrics.c — owns mtad's metrics and control socket: its families (after the shared
 * ones of common/metrics_std.h), each SMTP/LMTP command counted by the class of its final
 * reply with its latency, the recipients' outcomes, the gauges taken from the worker's
 * sessions each second, the queue read at scrape time, `who`, `kick` and `queue` (the
 * undelivered entries for heron-sendmail -bp, mailq, walked in a thread of its own). */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "common/clock.h"
#include "common/control.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/obs.h"
#include "common/reqserver.h"
#include "dns/dns.h"
#include "ldapauth/ldapauth.h"
#include "mtad/mtad.h"
#include "store/store.h"

enum {
	MT_COMMANDS = MS_NSTD, /* counter {command, result} */
	MT_COMMAND_SECONDS,    /* histogram {command} */
	MT_DELIVERIES,         /* counter {status} */
	MT_MESSAGES,           /* counter {service}: messages accepted */
	MT_MESSAGE_BYTES,      /* counter {service} */
	MT_DNS_LOOKUPS,
	MT_DNS_HITS,
	MT_DNS_QUERIES,
	MT_NFAMILIES
};

static const char *const services[] = { "smtp", "submission", "submissions", "lmtp", NULL };
/* smtp_cmd.c's verbs, then the end of a message's data, then a line naming no command */
static const char *const commands[] = { "EHLO",     "HELO", "LHLO",     "MAIL",    "RCPT", "DATA",
					"BDAT",     "RSET", "NOOP",     "QUIT",    "VRFY", "HELP",
					"STARTTLS", "AUTH", "DATA_END", "unknown", NULL };
static const char *const classes[] = { "2xx", "3xx", "4xx", "5xx", NULL };
static const char *const statuses[] = { "local",   "queued",  "relayed",  "deferred",
					"bounced", "expired", "rejected", NULL };

static struct metric_def defs[MT_NFAMILIES];

static struct {
	struct ldapauth_metrics_last dir;
	struct store_metrics_last store;
	uint64_t refused[L_NKINDS];
	uint64_t dns_lookups, dns_hits, dns_queries;
} last;

void mtad_metrics_init(unsigned workers)
{
	metrics_std_defs(defs, services);
	defs[MT_COMMANDS] = (struct metric_def){
		"heron_smtp_commands_total",
		METRIC_COUNTER,
		"SMTP and LMTP commands by verb and the class of their final reply (DATA_END: "
		"the message's end of data)",
		{ "command", "result" },
		{ commands, classes },
		.sparse = true
	};
	defs[MT_COMMAND_SECONDS] = (struct metric_def){
		"heron_smtp_command_duration_seconds",
		METRIC_HISTOGRAM,
		"SMTP and LMTP commands from their line to the final reply (DATA: to 354; "
		"DATA_END: from the end of data to the reply, as mailload's SMTP Data)",
		{ "command" },
		{ commands },
		.sparse = true
	};
	defs[MT_DELIVERIES] = (struct metric_def){
		"heron_deliveries_total",
		METRIC_COUNTER,
		"recipients by outcome: local (into a mailbox), queued (for relay), relayed "
		"(accepted by the next hop), deferred (to retry), bounced (permanent failure), "
		"expired (past max_queue_lifetime), rejected (by Sieve)",
		{ "status" },
		{ statuses }
	};
	defs[MT_MESSAGES] = (struct metric_def){ "heron_messages_received_total",
						 METRIC_COUNTER,
						 "messages accepted (at least one recipient)",
						 { "service" },
						 { services } };
	defs[MT_MESSAGE_BYTES] = (struct metric_def){ "heron_message_received_bytes_total",
						      METRIC_COUNTER,
						      "bytes of the messages accepted",
						      { "service" },
						      { services } };
	defs[MT_DNS_LOOKUPS] = (struct metric_def){ "heron_dns_lookups_total", METRIC_COUNTER,
						    "DNS lookups asked of the resolver" };
	defs[MT_DNS_HITS] = (struct metric_def){ "heron_dns_cache_hits_total", METRIC_COUNTER,
						 "DNS lookups answered from the cache" };
	defs[MT_DNS_QUERIES] = (struct metric_def){ "heron_dns_queries_total", METRIC_COUNTER,
						    "DNS queries sent to the resolver library" };
	metrics_init("mtad", defs, MT_NFAMILIES, workers);
}

void mtad_metrics_command(struct smtp_session *s, const char *verb)
{
	int i = verb != NULL ? metrics_label_index(MT_COMMANDS, 0, verb) : -1;

	if (!metrics_enabled())
		return;
	s->cmd_idx = i >= 0 ? (unsigned)i : MTAD_CMD_UNKNOWN;
	s->cmd_us = clock_mono_us();
	s->cmd_open = true;
}

/* The first 4 bytes at offset start of out (a bufferevent's output is frozen at its start
   for copyout: peek instead). */
static bool reply_head(struct evbuffer *out, size_t start, char head[4])
{
	struct evbuffer_ptr p;
	struct evbuffer_iovec v[4];
	size_t got = 0;
	int n;

	if (evbuffer_ptr_set(out, &p, start, EVBUFFER_PTR_SET) < 0 ||
	    (n = evbuffer_peek(out, 4, &p, v, 4)) <= 0)
		return false;
	for (int i = 0; i < n && i < 4 && got < 4; i++) {
		size_t k = v[i].iov_len < 4 - got ? v[i].iov_len : 4 - got;

		memcpy(head + got, v[i].iov_base, k);
		got += k;
	}
	return got == 4;
}

void mtad_metrics_reply(struct smtp_session *s, size_t start)
{
	char head[4];

	if (!s->cmd_open || !reply_head(bufferevent_get_output(s->bev), start, head) ||
	    head[0] < '2' || head[0] > '5' || head[3] != ' ')
		return; /* a line of a multi-line reply, or no command waits for one */
	if (memcmp(head, "334", 3) == 0)
		return; /* AUTH goes on */
	s->cmd_open = false;
	metrics_inc(MT_COMMANDS, s->cmd_idx, (unsigned)(head[0] - '2'));
	metrics_observe(MT_COMMAND_SECONDS, s->cmd_idx, 0,
			(uint64_t)(clock_mono_us() - s->cmd_us));
}

void mtad_metrics_delivery(enum mtad_delivery status)
{
	metrics_inc(MT_DELIVERIES, status, 0);
}

void mtad_metrics_message(const struct smtp_session *s, uint64_t size)
{
	metrics_inc(MT_MESSAGES, s->kind, 0);
	metrics_add(MT_MESSAGE_BYTES, s->kind, 0, size);
}

static void publish(void *arg)
{
	struct mtad *m = arg;
	uint64_t open[L_NKINDS] = { 0 };
	struct smtp_session *s;
	struct dns_stats ds = { 0 };

	TAILQ_FOREACH(s, &m->sessions, entry)
	open[s->kind]++;
	for (unsigned k = 0; k < L_NKINDS; k++) {
		metrics_set(MS_CONN_OPEN, k, 0, open[k]);
		if (m->srv[k] != NULL)
			metrics_add_since(MS_CONN_REFUSED, k, MS_REFUSE_MAX,
					  net_server_nrefused(m->srv[k]), &last.refused[k]);
	}
	if (m->dns != NULL) {
		dns_stats(m->dns, &ds);
		metrics_add_since(MT_DNS_LOOKUPS, 0, 0, ds.lookups, &last.dns_lookups);
		metrics_add_since(MT_DNS_HITS, 0, 0, ds.hits, &last.dns_hits);
		metrics_add_since(MT_DNS_QUERIES, 0, 0, ds.queries, &last.dns_queries);
	}
	ldapauth_metrics_publish(m->la, &last.dir);
	store_metrics_publish(m->store, m->gc, &last.store);
}

static void live(struct buf *out, void *arg)
{
	struct mtad *m = arg;

	store_metrics_live(m->store, true, out);
}

static const char *state_text(const struct smtp_session *s)
{
	switch (s->state) {
	case ST_GREETING:
	case ST_CONNECTED:
		return "connected";
	case ST_READY:
		return "ready";
	case ST_MAIL:
	case ST_RCPT:
		return "envelope";
	case ST_DATA:
	case ST_BDAT:
		return "data";
	case ST_WAIT:
		return "waiting";
	case ST_TLS:
		return "tls";
	default:
		return "quit";
	}
}

static void who(struct buf *out, const char *ident, unsigned worker, void *arg)
{
	struct mtad *m = arg;
	struct smtp_session *s;
	int64_t now_us = clock_mono_us();

	TAILQ_FOREACH(s, &m->sessions, entry)
	{
		int64_t last_us = s->cmd_us > s->connected_us ? s->cmd_us : s->connected_us;
		struct control_session cs = {
			.id = s->id,
			.user = s->user,
			.addr = s->addr,
			.service = services[s->kind],
			.state = state_text(s),
			.since = s->connected,
			.idle_ms = (now_us - last_us) / 1000,
			.detail = s->helo[0] != '\0' ? s->helo : NULL,
		};

		if (s->closing)
			continue;
		control_who_line(out, ident, worker, (long)getpid(), &cs);
	}
}

/* Closes user's sessions: at once between transactions, else when the transaction ends
   (smtp_session_drain), so that nothing acknowledged is cut short. */
static unsigned kick(const char *user, void *arg)
{
	struct mtad *m = arg;
	struct smtp_session *s, *next;
	unsigned n = 0;

	for (s = TAILQ_FIRST(&m->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->closing || !(s->flags & SF_AUTH) || strcasecmp(s->user, user) != 0 ||
		    (s->flags & SF_KICKED))
			continue;
		s->flags |= SF_KICKED;
		n++;
		smtp_session_drain(s);
	}
	return n;
}

/* ---- queue: the control request heron-sendmail -bp (mailq) asks (control.h's form) ---- */

#define QUEUE_ANSWER_MAX (CONTROL_ANSWER_MAX / 2) /* past it entries are only counted */
#define QUEUE_REASON_MAX 400                      /* bytes of a recipient's last reason */

struct qans {
	struct buf *out;
	int64_t now;
	uint64_t unlisted;
};

/* s (at most max bytes) as a field: TAB, CR, LF and other controls as '?'. */
static void queue_field(struct buf *out, const char *s, size_t max)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n && i < max; i++) {
		char c = (unsigned char)s[i] < ' ' || s[i] == 0x7f ? '?' : s[i];

		buf_append(out, &c, 1);
	}
}

static int queue_entry(const struct store_queue_msg *qm, void *arg)
{
	struct qans *q = arg;
	size_t pending = 0;

	for (size_t i = 0; i < qm->nrcpt; i++)
		pending += qm->rcpt[i].state == STORE_Q_PENDING;
	if (pending == 0)
		return 0; /* every recipient done: the entry is on its way out */
	if (q->out->len >= QUEUE_ANSWER_MAX) {
		q->unlisted++;
		return 0;
	}
	buf_printf(q->out, "Q\t%016" PRIx64 "\t%" PRIu64 "\t%" PRId64 "\t%s\t", qm->id, qm->size,
		   qm->created,
		   qm->lease_until > q->now ? "*"
		   : qm->held               ? "!"
					    : "-");
	queue_field(q->out, qm->sender[0] != '\0' ? qm->sender : "<>", SIZE_MAX);
	buf_puts(q->out, "\n");
	for (size_t i = 0; i < qm->nrcpt; i++) {
		const struct store_queue_rcpt *r = &qm->rcpt[i];

		if (r->state != STORE_Q_PENDING)
			continue;
		buf_puts(q->out, "R\t");
		queue_field(q->out, r->addr, SIZE_MAX);
		buf_puts(q->out, "\t");
		queue_field(q->out,
			    r->last_error != NULL && r->last_error[0] != '\0' ? r->last_error
									      : "-",
			    QUEUE_REASON_MAX);
		buf_puts(q->out, "\n");
	}
	return 0;
}

/* One read transaction over the queue (a queue of 100,000 entries takes a fraction of a
   second, an answer of up to 32 MiB), into out. */
static void queue_answer(struct store *st, struct buf *out)
{
	struct qans q = { .out = out, .now = time(NULL) };
	int rc;

	if ((rc = store_queue_list(st, queue_entry, &q)) != 0) {
		buf_reset(out);
		buf_printf(out, "ERR the queue cannot be read: %s\n", store_strerror(rc));
		return;
	}
	buf_printf(out, "T\t%" PRIu64 "\n.\n", q.unlisted);
}

/* The walks answered off the loop, a thread each; more at once are refused (ERR busy). */
#define QUEUE_WALKS 4

struct qwalk {
	pthread_t th;
	bool running;      /* the loop's: th is to be joined */
	atomic_bool ended; /* set by the thread once its answer is done */
	struct store *st;
	struct reqserver_later *later;
};

static struct qwalk qwalks[QUEUE_WALKS];

static void *queue_walk(void *arg)
{
	struct qwalk *w = arg;
	struct buf out;

	buf_init(&out, 4096, BUF_INPUT_BOUNDED); /* bounded by QUEUE_ANSWER_MAX */
	queue_answer(w->st, &out);
	reqserver_later_done(w->later, &out);
	buf_release(&out);
	atomic_store(&w->ended, true);
	return NULL;
}

/* Joins the walks that ended (all of them when wait_all); returns a free slot or NULL. */
static struct qwalk *queue_walks_reap(bool wait_all)
{
	struct qwalk *free_w = NULL;

	for (size_t i = 0; i < QUEUE_WALKS; i++) {
		struct qwalk *w = &qwalks[i];

		if (w->running && (wait_all || atomic_load(&w->ended))) {
			pthread_join(w->th, NULL);
			w->running = false;
		}
		if (!w->running && free_w == NULL)
			free_w = w;
	}
	return free_w;
}

/* The walk runs in a thread, not in the worker's loop, whose sessions would wait for it.
   Whoever may open the control socket may ask: root, the daemon's user and group. */
static bool request(const char *req, size_t n, struct buf *out, struct reqserver *ctl, void *arg)
{
	struct mtad *m = arg;
	struct qwalk *w;
	sigset_t all, old;
	int rc;

	if (n != 5 || memcmp(req, "queue", 5) != 0)
		return false;
	if ((w = queue_walks_reap(false)) == NULL) {
		buf_puts(out, "ERR busy: other queue requests are being answered; try again\n");
		return true;
	}
	w->st = m->store;
	w->later = reqserver_defer(ctl);
	atomic_store(&w->ended, false);
	sigfillset(&all); /* signals stay the loop's */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->th, NULL, queue_walk, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		struct buf ans;

		log_warnx("mtad worker %u: queue request: no thread: %s", m->worker, strerror(rc));
		buf_init(&ans, 128, BUF_INPUT_BOUNDED);
		buf_puts(&ans, "ERR busy: no thread for the queue walk; try again\n");
		reqserver_later_done(w->later, &ans);
		buf_release(&ans);
		return true;
	}
	w->running = true;
	return true;
}

static const struct obs_ops ops = {
	.live = live,
	.publish = publish,
	.who = who,
	.kick = kick,
	.request = request,
};

struct obs *mtad_obs_start(struct mtad *m, const struct net_fds *fds)
{
	memset(&last, 0, sizeof(last));
	return obs_start(m->base, m->conf, "mtad", m->worker, fds, &ops, m);
}

void mtad_obs_free(struct obs **op)
{
	(void)queue_walks_reap(true); /* before the store closes; their answers are dropped */
	obs_free(op);
}

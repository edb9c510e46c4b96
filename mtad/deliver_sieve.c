/* deliver_sieve.c — owns Sieve at local delivery: for each local recipient it runs the admin's
 * before script, the user's active script (compiled, read from the store in the same read txn
 * as the user) and the admin's after script, then turns the actions into the existing
 * machinery: keep/fileinto become the recipients of the one group-commit delivery of the
 * message (same single copy; :create mailboxes made in the same batch first; keywords set
 * right after), redirect and vacation replies are queued for relay (RFC 5228 4.2: redirect
 * keeps the envelope sender; a redirect loop, found by the recipient's Delivered-To mark on
 * the copy, keeps the message in INBOX; a vacation reply goes from the null sender, RFC 5230 4.3),
 * reject/ereject become the recipient's 550 (LMTP, or SMTP with one recipient) or a
 * rejection notice to the sender. Vacation's "once per sender per :days" is checked and
 * remembered inside one write txn of the user's partition, so two workers cannot both reply.
 * Everything completes before the reply to the client (deliver.c counts tx->pending). A
 * recipient whose scripts redirect or reply is left to the queue (to_queue), whose runner's
 * delivery (deliver_sieve_queued) queues each copy and reply exactly once across kill -9 and
 * transient failures (451, tried again: never a reply owed dropped, never a second copy). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/str.h"
#include "common/utf7imap.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"
#include "sieve/sieve.h"
#include "store/store.h"
#include "store/store_sieve.h"

#define ADMIN_SCRIPT_MAX (16u << 20) /* the before/after script files */
#define FOLDER_MUTF7_MAX 4096        /* a fileinto folder name in modified UTF-7 */
#define TRACE_HEADER_MAX 4096        /* the loop mark a redirect adds */
#define NOTICE_MAX (1 << 20)         /* a rejection notice or a vacation reply */

struct sv_dest {
	size_t rcpt;    /* index in tx->rcpt */
	char *mailbox;  /* store name (modified UTF-7) or NULL = INBOX */
	unsigned flags; /* system flags */
	char **kw;      /* keywords to set after the delivery */
	size_t nkw;
};

struct sv_vac {
	struct smtp_session *s;
	size_t rcpt; /* index in tx->rcpt */
	char *user;
	unsigned part;
	char *key; /* handle + sender */
	int64_t until;
	bool send;      /* out of the write: not answered within the period */
	struct buf msg; /* the reply */
	struct store_blob *blob;
};

struct sv_out { /* a queued message: redirect copy, vacation reply, notice */
	struct smtp_session *s;
	size_t rcpt_i; /* for whom (index in tx->rcpt) */
	struct store_blob *blob;
	char *sender, *rcpt;
};

struct sv_group;
struct sv_state { /* the store deliveries and how many are out */
	struct sv_group **g;
	size_t ng, left;
};

struct sieve_tx {
	struct sv_state st;
	void *map;
	size_t maplen;
	struct sv_dest *d;
	size_t nd;
	struct sv_vac **vac;
	size_t nvac;
	struct sv_out **out;
	size_t nout;
	int *failed; /* per recipient: what queue_msg's commit gave (0 unless it failed) */
};

struct sieve_setup {
	uint8_t *before, *after;
	size_t before_len, after_len;
	struct sieve_limits lim;
	int64_t vacation_min;
};

static struct sieve_setup gconf;
static bool gconf_loaded;

/* ---- configuration -------------------------------------------------------------------- */

static int load_admin(const char *path, uint8_t **prog_r, size_t *len_r, char **error_r)
{
	FILE *f;
	struct buf b;
	char chunk[8192];
	size_t n;
	char *err;

	*prog_r = NULL;
	*len_r = 0;
	if (path == NULL || *path == '\0')
		return 0;
	if ((f = fopen(path, "r")) == NULL) {
		*error_r = xasprintf("%s: cannot open", path);
		return -1;
	}
	buf_init(&b, 4096, ADMIN_SCRIPT_MAX);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (buf_append(&b, chunk, n) < 0)
			break;
	fclose(f);
	if (sieve_compile(b.data ? b.data : "", b.len, NULL, prog_r, len_r, &err) < 0) {
		*error_r = xasprintf("%s: %s", path, err);
		free(err);
		buf_release(&b);
		return -1;
	}
	buf_release(&b);
	return 0;
}

int deliver_sieve_init(const struct conf *c, char **error_r)
{
	struct sieve_setup sc = { 0 };

	const struct sieve_conf *cf = &conf_values(c)->sieve;

	if (load_admin(cf->before, &sc.before, &sc.before_len, error_r) < 0 ||
	    load_admin(cf->after, &sc.after, &sc.after_len, error_r) < 0) {
		free(sc.before);
		return -1;
	}
	sc.lim.max_instructions = (uint64_t)cf->max_instructions;
	sc.lim.max_redirects = (unsigned)cf->max_redirects;
	sc.lim.max_actions = (unsigned)cf->max_actions;
	sc.lim.max_header_bytes = cf->max_header_bytes;
	sc.lim.max_body_bytes = cf->max_body_bytes;
	sc.vacation_min = cf->vacation_min_days * 86400;
	if (gconf_loaded) {
		free(gconf.before);
		free(gconf.after);
	}
	gconf = sc;
	gconf_loaded = true;
	return 0;
}

/* ---- running the scripts ---------------------------------------------------------------- */

/* The answers of a run's duplicate tests (RFC 7352), in the order the tests ran: bit k says
   the k-th answered "seen". The run that delivers records them and the delivery's commit keeps
   them with an owed reply, so that the run after a kill (replay) answers the same: by then
   that commit has remembered the message, and the store would say "seen" to its own keys.
   Tests past the 64th ask the store. */
#define DUP_ANSWERS_MAX 64

struct dup_answers {
	bool replay;   /* in: answer from seen, not from the store */
	uint64_t seen; /* out (a first run) or in (replay) */
	unsigned n;    /* tests asked so far */
};

struct env_ctx {
	struct store_txn *t;
	const char *user;
	uint64_t uid;
	int64_t now;
	struct dup_answers *dup; /* NULL: the store answers every test, nothing recorded */
};

static bool cb_mailbox_exists(void *ctx, const char *name)
{
	struct env_ctx *ec = ctx;
	struct buf b;
	uint64_t id;
	bool ok;

	buf_init(&b, 64, FOLDER_MUTF7_MAX);
	ok = utf7imap_encode(name, strlen(name), &b) == 0 &&
	     store_mbox_find(ec->t, ec->uid, b.data, &id) == 0;
	buf_release(&b);
	return ok;
}

static bool cb_duplicate(void *ctx, const char *key)
{
	struct env_ctx *ec = ctx;
	struct dup_answers *da = ec->dup;
	unsigned k = da != NULL ? da->n++ : DUP_ANSWERS_MAX;
	bool seen = false;

	if (da != NULL && da->replay && k < DUP_ANSWERS_MAX)
		return (da->seen >> k & 1) != 0;
	(void)store_sieve_seen(ec->t, ec->user, STORE_SIEVE_DUPLICATE, key, ec->now, &seen);
	if (da != NULL && !da->replay && seen && k < DUP_ANSWERS_MAX)
		da->seen |= (uint64_t)1 << k;
	return seen;
}

static const uint8_t *cb_include(void *ctx, bool global, const char *name, size_t *len_r)
{
	struct env_ctx *ec = ctx;
	struct store_sieve_script sc;

	if (global || store_sieve_get(ec->t, ec->user, name, &sc) != 0)
		return NULL;
	*len_r = sc.prog_len;
	return sc.prog;
}

/* runs the chain for recipient r inside a read txn of its partition; 0 or -1 (store) */
/* what one recipient's run needs to know */
struct sv_who {
	uint64_t qid;
	const char *from; /* envelope sender */
	const char *addr; /* the recipient address */
	const char *user; /* its store user */
	unsigned part;
};

/* map NULL: get_map(mctx, &map, &len) gives the message once a script is to run (so a
   recipient without one costs no read of the message); -1 from it fails the run. dup: NULL,
   or the duplicate tests' answers to record (a first run) or to give (replay). 1: no script,
   -1: the store could not say (nothing known about the scripts) */
static int run_who(struct mtad *m, const struct sv_who *r, const void *map, size_t maplen,
		   int (*get_map)(void *mctx, const void **map_r, size_t *len_r), void *mctx,
		   struct dup_answers *dup, struct sieve_result *res)
{
	const struct sieve_conf *cf = &conf_values(m->conf)->sieve;
	struct store_txn *t;
	struct store_user u;
	struct store_sieve_script sc;
	const uint8_t *progs[3] = { gconf.before, NULL, gconf.after };
	size_t lens[3] = { gconf.before_len, 0, gconf.after_len };
	struct env_ctx ec = { .user = r->user, .now = time(NULL), .dup = dup };
	struct sieve_env env = {
		.msg = map,
		.msg_len = maplen,
		.env_from = r->from,
		.env_to = r->addr,
		.orig_to = NULL,
		.user = r->user,
		.domain = m->hostname,
		.subaddress_sep = conf_values(m->conf)->mtad.recipient_delimiter[0] != '\0'
					  ? conf_values(m->conf)->mtad.recipient_delimiter[0]
					  : '+',
		.now = ec.now,
		.spam_header = *cf->spam_header ? cf->spam_header : NULL,
		.spam_max = (double)cf->spam_max,
		.virus_header = cf->virus_header,
		.ctx = &ec,
		.mailbox_exists = cb_mailbox_exists,
		.duplicate_seen = cb_duplicate,
		.include = cb_include,
	};
	struct tm tm;
	time_t now = (time_t)ec.now;
	int rc;

	localtime_r(&now, &tm);
	env.zone_min = (int)(tm.tm_gmtoff / 60);
	memset(res, 0, sizeof(*res));
	if ((rc = store_txn_begin(m->store, r->part, STORE_TXN_READ, &t)) != 0)
		return -1;
	ec.t = t;
	if (store_user_get(t, r->user, &u) == 0) {
		ec.uid = u.id;
		if (store_sieve_active(t, r->user, &sc) == 0) {
			progs[1] = sc.prog;
			lens[1] = sc.prog_len;
		}
	}
	if (progs[0] == NULL && progs[1] == NULL && progs[2] == NULL) {
		store_txn_abort(&t);
		return 1; /* no script: plain delivery to INBOX */
	}
	if (map == NULL && (get_map == NULL || get_map(mctx, &map, &maplen) < 0)) {
		store_txn_abort(&t);
		return -1;
	}
	env.msg = map;
	env.msg_len = maplen;
	sieve_run_chain(progs, lens, 3, &env, &gconf.lim, res);
	store_txn_abort(&t);
	if (res->error)
		log_warnx("%016" PRIx64 ": to=<%s>, sieve error=\"%s\" (kept in INBOX)", r->qid,
			  r->addr, res->error);
	return 0;
}

static int map_message(struct smtp_session *s, struct sieve_tx *sv);

struct map_ctx {
	struct smtp_session *s;
	struct sieve_tx *sv;
};

static int get_map(void *mctx, const void **map_r, size_t *len_r)
{
	struct map_ctx *mc = mctx;

	if (mc->sv->map == NULL && map_message(mc->s, mc->sv) < 0)
		return -1;
	*map_r = mc->sv->map;
	*len_r = mc->sv->maplen;
	return 0;
}

static int run_for(struct smtp_session *s, struct sieve_tx *sv, const struct smtp_rcpt *r,
		   struct sieve_result *res)
{
	struct sv_who w = { s->tx->qid, s->tx->from, r->addr, r->user, r->part };
	struct map_ctx mc = { s, sv };

	return run_who(s->m, &w, sv->map, sv->maplen, get_map, &mc, NULL, res);
}

/* The test hooks of the queued delivery's windows and failures (HERON_MTAD_CRASH_AT,
   HERON_MTAD_FAIL_AT: crash_point below) */
static bool point_armed(const char *env, const char *point)
{
	const char *v = getenv(env);
	size_t n = strlen(point);

	return v != NULL && strncmp(v, point, n) == 0 && v[n] == ':' && unlink(v + n + 1) == 0;
}

/* true once per armed file: the caller fails there (any thread) */
static bool fail_point(const char *point)
{
	if (point == NULL || !point_armed("HERON_MTAD_FAIL_AT", point))
		return false;
	log_warnx("fail point %s: a transient error (HERON_MTAD_FAIL_AT)", point);
	return true;
}

/* ---- actions to deliveries ---------------------------------------------------------------- */

struct sv_group { /* one store delivery of one message file */
	struct sieve_tx *sv;
	struct smtp_session *s;
	struct store_blob *blob;
	bool own; /* a copy with an edited header (editheader) */
	struct store_rcpt *srcpt;
	size_t *dest; /* srcpt[i] delivers sv->d[dest[i]] */
	size_t n;
};

static unsigned sys_flag(const char *f)
{
	static const struct {
		const char *name;
		unsigned bit;
	} sys[] = { { "\\Seen", STORE_SEEN },
		    { "\\Answered", STORE_ANSWERED },
		    { "\\Flagged", STORE_FLAGGED },
		    { "\\Deleted", STORE_DELETED },
		    { "\\Draft", STORE_DRAFT } };

	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		if (strcasecmp(f, sys[i].name) == 0)
			return sys[i].bit;
	return 0;
}

static bool keyword_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > STORE_MAX_KEYWORD || k[0] == '\\')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)k[i] <= ' ' || (unsigned char)k[i] >= 0x7f ||
		    strchr("(){%*\"\\]", k[i]) != NULL)
			return false;
	return true;
}

static void add_dest(struct sieve_tx *sv, size_t rcpt, const struct sieve_action *a)
{
	struct sv_dest *d;

	sv->d = xreallocarray(sv->d, sv->nd + 1, sizeof(*sv->d));
	d = &sv->d[sv->nd++];
	memset(d, 0, sizeof(*d));
	d->rcpt = rcpt;
	if (a->type == SIEVE_FILEINTO && a->mailbox != NULL) {
		struct buf b;

		buf_init(&b, 64, STORE_MAX_NAME);
		if (utf7imap_encode(a->mailbox, strlen(a->mailbox), &b) == 0 && b.len > 0)
			d->mailbox = buf_steal(&b, NULL);
		buf_release(&b);
	}
	for (size_t i = 0; i < a->nflags; i++) {
		unsigned bit = sys_flag(a->flags[i]);

		d->flags |= bit;
		if (bit == 0 && keyword_ok(a->flags[i])) {
			d->kw = xreallocarray(d->kw, d->nkw + 1, sizeof(char *));
			d->kw[d->nkw++] = xstrdup(a->flags[i]);
		}
	}
}

/* a one-line, printable reason for an SMTP reply */
static void reply_text(const char *in, char *out, size_t size)
{
	size_t k = 0;

	for (; *in && k + 1 < size; in++)
		out[k++] = (unsigned char)*in < ' ' || *in == 0x7f ? ' ' : *in;
	out[k] = '\0';
	while (k > 0 && out[k - 1] == ' ')
		out[--k] = '\0';
	if (k == 0)
		str_lcpy(out, "Rejected by the recipient's filter", size);
}

static void fmt_date(char *out, size_t size)
{
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(out, size, "%a, %d %b %Y %H:%M:%S %z", &tm);
}

/* appends text with bare LF made CRLF */
static void put_crlf(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\n' && (b->len == 0 || b->data[b->len - 1] != '\r'))
			buf_putc(b, '\r');
		buf_putc(b, *s);
	}
	if (b->len < 2 || memcmp(b->data + b->len - 2, "\r\n", 2) != 0)
		buf_puts(b, "\r\n");
}

/* a header field value from script text: CR and LF become blanks */
static void put_field(struct buf *b, const char *s)
{
	for (; *s; s++)
		buf_putc(b, *s == '\r' || *s == '\n' ? ' ' : *s);
}

/* what recipient i's scripts send could not be queued: the recipient fails (4.3.0, tried
   again by the client or the queue), rather than lose it */
static void out_failed(struct smtp_session *s, size_t i, int rc)
{
	struct sieve_tx *sv = s->tx->sieve;

	if (sv->failed == NULL)
		sv->failed = xcalloc(s->tx->nrcpt, sizeof(*sv->failed));
	sv->failed[i] = store_err_temporary(rc) ? rc : STORE_EIO;
	s->tx->rcpt[i].result = sv->failed[i];
}

static void out_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		     void *arg)
{
	struct sv_out *o = arg;
	struct smtp_session *s = o->s;

	log_info("%016" PRIx64 ": sieve queued from=<%s> to=<%s> id=%016" PRIx64 " result=%s",
		 s->tx->qid, o->sender, o->rcpt, value, result ? store_strerror(result) : "ok");
	if (result == 0)
		queue_runner_kick(s->m);
	else
		out_failed(s, o->rcpt_i, result);
	deliver_step_done(s);
}

/* queues pre + body (a message) from sender to rcpt for recipient ri; one more pending step */
static void queue_msg(struct smtp_session *s, struct sieve_tx *sv, size_t ri, const char *sender,
		      const char *rcpt, const struct buf *pre, const void *body, size_t blen)
{
	struct sv_out *o = xcalloc(1, sizeof(*o));
	struct store_queue_rcpt qr = { .addr = rcpt };
	struct store_queue_msg qm = { .sender = sender, .nrcpt = 1, .rcpt = &qr };
	int rc;

	o->s = s;
	o->rcpt_i = ri;
	o->sender = xstrdup(sender);
	o->rcpt = xstrdup(rcpt);
	sv->out = xreallocarray(sv->out, sv->nout + 1, sizeof(*sv->out));
	sv->out[sv->nout++] = o;
	if ((rc = store_blob_new(s->m->store, STORE_QUEUE_PART, &o->blob)) != 0 ||
	    (rc = store_blob_write(o->blob, pre->data, pre->len)) != 0 ||
	    (blen > 0 && (rc = store_blob_write(o->blob, body, blen)) != 0) ||
	    (rc = store_blob_finish_deferred(o->blob)) != 0) {
		log_warnx("%016" PRIx64 ": sieve to=<%s> result=fail reason=\"%s\"", s->tx->qid,
			  rcpt, store_strerror(rc));
		out_failed(s, ri, rc);
		return;
	}
	qm.size = store_blob_size(o->blob);
	s->tx->pending++;
	store_gc_enqueue(s->m->gc, &qm, o->blob, out_done, o);
}

static bool header_has(const char *msg, size_t len, const char *line)
{
	size_t n = strlen(line);

	for (size_t i = 0; i + n <= len; i++) {
		if (i > 0 && msg[i - 1] != '\n')
			continue;
		if (msg[i] == '\r' || msg[i] == '\n')
			return false; /* end of the header */
		if (strncasecmp(msg + i, line, n) == 0)
			return true;
	}
	return false;
}

/* A redirect of a message that already carries addr's Delivered-To mark is a loop: RFC 5228
   4.2 makes it an error, and an error keeps the message (2.10.6), so the caller keeps it in
   INBOX (keep_looped) instead of sending it round again; logged here. */
static bool redirect_looped(const void *msg, size_t len, uint64_t qid, const char *addr,
			    const char *to)
{
	char *mark = xasprintf("Delivered-To: %s\r\n", addr);
	bool looped = header_has(msg, len, mark);

	free(mark);
	if (looped)
		log_warnx("%016" PRIx64
			  ": to=<%s>, sieve redirect to=<%s> refused: the message was "
			  "already delivered to this recipient (a loop), kept in INBOX",
			  qid, addr, to);
	return looped;
}

/* after a looped redirect: recipient rcpt's dests from first on get INBOX unless they have it */
static void keep_looped(struct sieve_tx *sv, size_t first, size_t rcpt)
{
	const struct sieve_action keep = { .type = SIEVE_KEEP };

	for (size_t k = first; k < sv->nd; k++)
		if (sv->d[k].mailbox == NULL)
			return;
	add_dest(sv, rcpt, &keep);
}

/* false: not sent, a loop (redirect_looped) */
static bool do_redirect(struct smtp_session *s, struct sieve_tx *sv, const struct smtp_rcpt *r,
			const char *to)
{
	struct buf pre;
	char *mark;

	if (redirect_looped(sv->map, sv->maplen, s->tx->qid, r->addr, to))
		return false;
	if (fail_point("sieve-redirect-queue")) { /* as the copy's commit failing would */
		out_failed(s, (size_t)(r - s->tx->rcpt), STORE_EIO);
		return true;
	}
	mark = xasprintf("Delivered-To: %s\r\n", r->addr);
	buf_init(&pre, 128, TRACE_HEADER_MAX);
	buf_puts(&pre, mark);
	free(mark);
	char from[MAILADDR_TEXT_MAX + 1];

	rcpt_srs_sender(s->m, s->tx->from, to, from, sizeof(from)); /* off-site: an SRS form */
	queue_msg(s, sv, (size_t)(r - s->tx->rcpt), from, to, &pre, sv->map, sv->maplen);
	buf_release(&pre);
	return true;
}

/* a reject for one recipient of several in SMTP: a DSN (RFC 3464) to the sender, with the
   reason, the recipient's status 5.7.1 and the returned header */
static void reject_notice(struct smtp_session *s, struct sieve_tx *sv, const struct smtp_rcpt *r,
			  const char *reason)
{
	struct buf b;
	char date[64], why[400], boundary[64];
	const char *m = sv->map, *hend = NULL;

	if (s->tx->from[0] == '\0')
		return; /* nobody to tell */
	fmt_date(date, sizeof(date));
	reply_text(reason, why, sizeof(why));
	snprintf(boundary, sizeof(boundary), "%016" PRIx64 "/%s", s->tx->qid, s->m->hostname);
	buf_init(&b, 4096, NOTICE_MAX);
	buf_printf(&b,
		   "From: Mail Delivery System <MAILER-DAEMON@%s>\r\nTo: <%s>\r\n"
		   "Subject: Undelivered Mail Returned to Sender (rejected by the recipient's "
		   "filter)\r\nDate: %s\r\nMessage-ID: <%016" PRIx64 ".reject.%lx@%s>\r\n"
		   "Auto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n"
		   "Content-Type: multipart/report; report-type=delivery-status;\r\n"
		   "\tboundary=\"%s\"\r\n\r\n--%s\r\n"
		   "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit"
		   "\r\n\r\nYour message to <%s> was rejected by the recipient's mail filter:"
		   "\r\n\r\n",
		   s->m->hostname, s->tx->from, date, s->tx->qid, (long)random(), s->m->hostname,
		   boundary, boundary, r->addr);
	put_crlf(&b, reason);
	buf_printf(&b,
		   "\r\n--%s\r\nContent-Type: message/delivery-status\r\n\r\n"
		   "Reporting-MTA: dns; %s\r\nArrival-Date: %s\r\n\r\n"
		   "Final-Recipient: rfc822; %s\r\nAction: failed\r\nStatus: 5.7.1\r\n"
		   "Diagnostic-Code: smtp; 550 5.7.1 %s\r\n\r\n--%s\r\n"
		   "Content-Type: text/rfc822-headers\r\n\r\n",
		   boundary, s->m->hostname, date, r->addr, why, boundary);
	for (size_t i = 0; i + 1 < sv->maplen && hend == NULL; i++)
		if (m[i] == '\n' && (m[i + 1] == '\n' || m[i + 1] == '\r'))
			hend = m + i + 1;
	size_t hlen = hend ? (size_t)(hend - m) : sv->maplen;
	buf_append(&b, m, hlen < 64 * 1024 ? hlen : 64 * 1024);
	buf_printf(&b, "\r\n--%s--\r\n", boundary);
	queue_msg(s, sv, (size_t)(r - s->tx->rcpt), "", s->tx->from, &b, NULL, 0);
	buf_release(&b);
}

/* ---- vacation ---------------------------------------------------------------------------- */

static void vacation_text(struct buf *b, struct mtad *m, uint64_t qid, const char *rcpt,
			  const struct sieve_vacation *va);

/* in the committer's thread: answered within the period? if not, remember now */
static int vac_fn(struct store_txn *t, void *arg)
{
	struct sv_vac *v = arg;
	int64_t now = time(NULL);
	bool seen = false;
	int rc;

	v->send = false;
	if ((rc = store_sieve_seen(t, v->user, STORE_SIEVE_VACATION, v->key, now, &seen)) != 0)
		return rc;
	if (seen)
		return 0;
	if ((rc = store_sieve_remember(t, v->user, STORE_SIEVE_VACATION, v->key, now, v->until)) ==
	    0)
		v->send = true;
	return rc;
}

static void vac_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		     void *arg)
{
	struct sv_vac *v = arg;
	struct smtp_session *s = v->s;

	if (result != 0 || !v->send) {
		log_info("%016" PRIx64 ": sieve vacation user=%s to=<%s> result=%s", s->tx->qid,
			 v->user, strchr(v->key, '\x1f') + 1,
			 result ? store_strerror(result)
				: "skipped (already answered within the period)");
	} else {
		queue_msg(s, s->tx->sieve, v->rcpt, "", strchr(v->key, '\x1f') + 1, &v->msg, NULL,
			  0);
	}
	deliver_step_done(s);
}

static void do_vacation(struct smtp_session *s, struct sieve_tx *sv, const struct smtp_rcpt *r,
			const struct sieve_vacation *va)
{
	struct sv_vac *v = xcalloc(1, sizeof(*v));
	int64_t secs = va->seconds < gconf.vacation_min ? gconf.vacation_min : va->seconds;

	v->s = s;
	v->rcpt = (size_t)(r - s->tx->rcpt);
	v->user = xstrdup(r->user);
	v->part = r->part;
	v->key = xasprintf("%s\x1f%s", va->handle, va->to);
	v->until = time(NULL) + (secs > 0 ? secs : 1);
	vacation_text(&v->msg, s->m, s->tx->qid, r->addr, va);
	sv->vac = xreallocarray(sv->vac, sv->nvac + 1, sizeof(*sv->vac));
	sv->vac[sv->nvac++] = v;
	s->tx->pending++;
	store_gc_submit(s->m->gc, r->part, NULL, vac_fn, v, vac_done, v);
}

/* the reply of va for the recipient address rcpt */
static void vacation_text(struct buf *b, struct mtad *m, uint64_t qid, const char *rcpt,
			  const struct sieve_vacation *va)
{
	char date[64];
	const char *from = va->from ? va->from : rcpt;

	fmt_date(date, sizeof(date));
	buf_init(b, 1024, NOTICE_MAX);

	/* script text goes into header fields: no line ends in them */
	buf_puts(b, strchr(from, '<') ? "From: " : "From: <");
	put_field(b, from);
	buf_printf(b, "%s\r\nTo: <%s>\r\nSubject: ", strchr(from, '<') ? "" : ">", va->to);
	put_field(b, va->subject);
	buf_printf(b, "\r\nDate: %s\r\nMessage-ID: <%016" PRIx64 ".vacation.%lx@%s>\r\n", date,
		   qid, (long)random(), m->hostname);
	if (va->in_reply_to)
		buf_printf(b, "In-Reply-To: %s\r\n", va->in_reply_to);
	if (va->references)
		buf_printf(b, "References: %s\r\n", va->references);
	buf_puts(b, "Auto-Submitted: auto-replied (vacation)\r\nPrecedence: bulk\r\n"
		    "X-Heron-Vacation: yes\r\nMIME-Version: 1.0\r\n");
	if (!va->mime)
		buf_puts(b, "Content-Type: text/plain; charset=utf-8\r\n"
			    "Content-Transfer-Encoding: 8bit\r\n\r\n");
	put_crlf(b, va->reason ? va->reason : "");
}

/* ---- :create, duplicate marks, keywords ------------------------------------------------- */

struct sv_write {
	struct smtp_session *s;
	char *user, *mailbox, *key;
	int64_t until;
	const struct store_rcpt *sr; /* keywords: the delivered message */
	char **kw;
	size_t nkw;
};

static int create_fn(struct store_txn *t, void *arg)
{
	struct sv_write *w = arg;
	struct store_user u;
	uint64_t id;
	int rc;

	if ((rc = store_user_get(t, w->user, &u)) != 0)
		return rc;
	rc = store_mbox_create(t, u.id, w->mailbox, 0, &id);
	return rc == STORE_EEXIST ? 0 : rc;
}

static int dup_fn(struct store_txn *t, void *arg)
{
	struct sv_write *w = arg;

	return store_sieve_remember(t, w->user, STORE_SIEVE_DUPLICATE, w->key, time(NULL),
				    w->until);
}

static int kw_fn(struct store_txn *t, void *arg)
{
	struct sv_write *w = arg;
	uint64_t bits = 0;
	unsigned idx;

	for (size_t i = 0; i < w->nkw; i++)
		if (store_mbox_keyword(t, w->sr->mbox, w->kw[i], true, &idx) == 0)
			bits |= (uint64_t)1 << idx;
	if (bits == 0)
		return 0;
	return store_msg_flags(t, w->sr->mbox, w->sr->uid, STORE_FLAGS_ADD, 0, bits, 0, NULL);
}

static void write_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct sv_write *w = arg;
	struct smtp_session *s = w->s;

	if (result != 0)
		log_warnx("%016" PRIx64 ": sieve user=%s %s result=fail reason=\"%s\"", s->tx->qid,
			  w->user,
			  w->mailbox ? "create mailbox"
			  : w->key   ? "duplicate"
				     : "keywords",
			  store_strerror(result));
	free(w->user);
	free(w->mailbox);
	free(w->key);
	free(w);
	deliver_step_done(s);
}

static void submit_write(struct smtp_session *s, unsigned part,
			 int (*fn)(struct store_txn *, void *), struct sv_write *w)
{
	w->s = s;
	s->tx->pending++;
	store_gc_submit(s->m->gc, part, NULL, fn, w, write_done, w);
}

/* ---- the deliveries --------------------------------------------------------------------- */

static struct sv_state *state_of(struct sieve_tx *sv);

static void groups_done(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	struct sieve_tx *sv = tx->sieve;
	struct sv_state *st = state_of(sv);

	for (size_t i = 0; i < tx->nrcpt; i++)
		if (tx->rcpt[i].local)
			tx->rcpt[i].result = 0;
	for (size_t k = 0; k < st->ng; k++) {
		const struct sv_group *g = st->g[k];

		for (size_t i = 0; i < g->n; i++) {
			const struct sv_dest *d = &sv->d[g->dest[i]];
			struct smtp_rcpt *r = &tx->rcpt[d->rcpt];

			if (g->srcpt[i].result != 0 && r->result == 0)
				r->result = g->srcpt[i].result;
			if (g->srcpt[i].result == 0 && d->nkw > 0) {
				struct sv_write *w = xcalloc(1, sizeof(*w));

				w->user = xstrdup(r->user);
				w->sr = &g->srcpt[i];
				w->kw = d->kw;
				w->nkw = d->nkw;
				submit_write(s, r->part, kw_fn, w);
			}
		}
	}
	for (size_t i = 0; sv->failed != NULL && i < tx->nrcpt; i++)
		if (sv->failed[i] != 0)
			tx->rcpt[i].result = sv->failed[i];
}

static void group_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct sv_group *g = arg;
	struct smtp_session *s = g->s;
	struct sv_state *st = state_of(g->sv);

	if (--st->left == 0)
		groups_done(s);
	deliver_step_done(s);
}

static struct sv_group *group_new(struct smtp_session *s, struct sieve_tx *sv,
				  struct store_blob *b, bool own)
{
	struct sv_state *st = state_of(sv);
	struct sv_group *g = xcalloc(1, sizeof(*g));

	g->sv = sv;
	g->s = s;
	g->blob = b;
	g->own = own;
	st->g = xreallocarray(st->g, st->ng + 1, sizeof(*st->g));
	st->g[st->ng++] = g;
	return g;
}

/* junk: DMARC quarantine; what would go to INBOX goes to the \Junk mailbox. Otherwise a keep
   (implicit or explicit) goes where delivery without a script would: user+detail@ into the
   folder detail with [mtad] subaddress_folder (the store: INBOX when there is none). */
static void group_add(struct sv_group *g, size_t dest, const struct sv_dest *d,
		      const struct smtp_rcpt *r, bool junk, bool folders)
{
	g->srcpt = xreallocarray(g->srcpt, g->n + 1, sizeof(*g->srcpt));
	g->dest = xreallocarray(g->dest, g->n + 1, sizeof(*g->dest));
	memset(&g->srcpt[g->n], 0, sizeof(g->srcpt[0]));
	g->srcpt[g->n].user = r->user;
	g->srcpt[g->n].mailbox = d->mailbox;
	if (junk && d->mailbox == NULL) {
		g->srcpt[g->n].mailbox = "Junk";
		g->srcpt[g->n].special = STORE_USE_JUNK;
	} else if (folders && d->mailbox == NULL && r->detail[0] != '\0') {
		g->srcpt[g->n].mailbox = r->detail;
	}
	g->srcpt[g->n].flags = d->flags;
	g->dest[g->n++] = dest;
}

/* A copy in partition part of the message (map, len) with the header editheader made
   (res->header), for one recipient's deliveries, made durable by the commit that stores it:
   the one way both the SMTP/LMTP path (apply) and the queue runner's (deliver_sieve_queued)
   apply RFC 5293. NULL when the store failed (logged): the caller stores the message as it
   came. */
static struct store_blob *edited_copy(struct mtad *mt, uint64_t qid, const char *addr,
				      unsigned part, const char *m, size_t len,
				      const struct sieve_result *res)
{
	const char *body = NULL;
	struct store_blob *b = NULL;
	int rc;

	for (size_t i = 0; i + 1 < len && body == NULL; i++)
		if (m[i] == '\n' &&
		    (m[i + 1] == '\n' || (i + 2 < len && m[i + 1] == '\r' && m[i + 2] == '\n')))
			body = m + i + (m[i + 1] == '\n' ? 2 : 3);
	if (body == NULL)
		body = m + len;
	if ((rc = store_blob_new(mt->store, part, &b)) != 0 ||
	    (rc = store_blob_write(b, res->header, res->header_len)) != 0 ||
	    (rc = store_blob_write(b, body, (size_t)(m + len - body))) != 0 ||
	    (rc = store_blob_finish_deferred(b)) != 0) {
		log_warnx("%016" PRIx64 ": to=<%s>, sieve editheader not applied (stored "
			  "unchanged): %s",
			  qid, addr, store_strerror(rc));
		store_blob_free(&b);
		return NULL;
	}
	return b;
}

/* the actions of recipient i */
static void apply(struct smtp_session *s, struct sieve_tx *sv, size_t i,
		  const struct sieve_result *res, struct sv_group *g0)
{
	struct smtp_tx *tx = s->tx;
	struct smtp_rcpt *r = &tx->rcpt[i];
	struct sv_group *g = g0;
	size_t first = sv->nd;
	bool looped = false;

	for (size_t k = 0; k < res->nact; k++) {
		const struct sieve_action *a = &res->act[k];

		switch (a->type) {
		case SIEVE_KEEP:
		case SIEVE_FILEINTO:
			add_dest(sv, i, a);
			if (a->type == SIEVE_FILEINTO && a->create && sv->d[sv->nd - 1].mailbox) {
				struct sv_write *w = xcalloc(1, sizeof(*w));

				w->user = xstrdup(r->user);
				w->mailbox = xstrdup(sv->d[sv->nd - 1].mailbox);
				submit_write(s, r->part, create_fn, w);
			}
			break;
		case SIEVE_REDIRECT:
			if (!do_redirect(s, sv, r, a->addr))
				looped = true;
			break;
		case SIEVE_REJECT:
		case SIEVE_EREJECT:
			if ((s->flags & SF_LMTP) || tx->nrcpt == 1) {
				reply_text(a->reason, r->sieve_reject, sizeof(r->sieve_reject));
			} else {
				reject_notice(s, sv, r, a->reason);
			}
			str_lcpy(r->sieve_note, "rejected by sieve", sizeof(r->sieve_note));
			break;
		case SIEVE_VACATION:
			do_vacation(s, sv, r, &a->vac);
			break;
		}
	}
	if (looped)
		keep_looped(sv, first, i);
	for (size_t k = 0; k < res->ndup; k++) {
		struct sv_write *w = xcalloc(1, sizeof(*w));

		w->user = xstrdup(r->user);
		w->key = xstrdup(res->dup[k].key);
		w->until = time(NULL) + res->dup[k].seconds;
		submit_write(s, r->part, dup_fn, w);
	}
	if (sv->nd == first && r->sieve_note[0] == '\0')
		str_lcpy(r->sieve_note, "discarded by sieve", sizeof(r->sieve_note));
	else if (sv->nd > first && !(sv->nd == first + 1 && sv->d[first].mailbox == NULL))
		snprintf(r->sieve_note, sizeof(r->sieve_note), "filed by sieve into %s%s",
			 sv->d[first].mailbox ? sv->d[first].mailbox : "INBOX",
			 sv->nd > first + 1 ? " and more" : "");
	if (res->header != NULL && sv->nd > first) {
		struct store_blob *b = edited_copy(s->m, tx->qid, r->addr, r->part, sv->map,
						   sv->maplen, res);

		if (b != NULL)
			g = group_new(s, sv, b, true);
	}
	bool folders = conf_values(s->m->conf)->mtad.subaddress_folder;

	for (size_t k = first; k < sv->nd; k++)
		group_add(g, k, &sv->d[k], r, s->tx->quarantine, folders);
}

static void nothing_cb(evutil_socket_t fd, short what, void *arg)
{
	deliver_step_done(arg);
}

static int map_message(struct smtp_session *s, struct sieve_tx *sv)
{
	uint64_t size;
	int fd, rc;

	if ((rc = store_blob_open_blob(s->tx->blob, &fd, &size)) != 0)
		return -1;
	sv->maplen = (size_t)size;
	sv->map = size ? mmap(NULL, sv->maplen, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (size && sv->map == MAP_FAILED) {
		sv->map = NULL;
		return -1;
	}
	if (sv->map == NULL) {
		static char empty[1];

		sv->map = empty;
		sv->maplen = 0;
	}
	return 0;
}

/* A recipient whose scripts redirect or reply (vacation) is left to the queue runner
   (deliver_sieve_queued), which queues the copies and the reply exactly once across kill -9
   and retries; here a copy could go out and the keep then fail (a 452 the client or a
   requeue tries again: the copy again), or a kill -9 fall between the reply's memory and the
   reply. user+detail@ goes there too (the runner keeps into its folder as here). Not when
   this delivery does what the runner's does not: DMARC quarantine into Junk (the queue entry
   does not say it). A reject never comes with a redirect or a vacation (sieve_run.c refuses
   the mix: the scripts' error keeps the message), so its 550 or its notice is all that
   recipient's scripts send and no 4xx can follow a stored copy. */
static bool to_queue(const struct smtp_session *s, const struct sieve_result *res)
{
	bool sends = false;

	if (s->tx->quarantine)
		return false;
	for (size_t k = 0; k < res->nact; k++)
		sends |= res->act[k].type == SIEVE_REDIRECT || res->act[k].type == SIEVE_VACATION;
	return sends;
}

bool deliver_sieve(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	struct sieve_tx *sv;
	struct sieve_result *res;
	struct sv_group *g0;
	bool any = false;

	if (!gconf_loaded)
		return false;
	sv = xcalloc(1, sizeof(*sv));
	res = xcalloc(tx->nrcpt, sizeof(*res));
	tx->sieve = sv;
	for (size_t i = 0; i < tx->nrcpt; i++) {
		int rc;

		if (!tx->rcpt[i].local)
			continue;
		rc = run_for(s, sv, &tx->rcpt[i], &res[i]);
		if (rc == 0 && to_queue(s, &res[i])) {
			sieve_result_clear(&res[i]);
			memset(&res[i], 0, sizeof(res[i]));
			tx->rcpt[i].local = false; /* deliver.c queues it with the remote ones */
			tx->rcpt[i].forwarded = false;
			tx->nlocal--;
			log_info("%016" PRIx64
				 ": to=<%s>, sieve redirect or vacation: delivered by "
				 "the queue runner",
				 tx->qid, tx->rcpt[i].addr);
			continue;
		}
		if (rc == 0)
			any = true;
		if (rc != 0) { /* no script (or the store failed): keep */
			memset(&res[i], 0, sizeof(res[i]));
			res[i].act = xcalloc(1, sizeof(*res[i].act));
			res[i].act[0].type = SIEVE_KEEP;
			res[i].nact = 1;
		}
	}
	if (!any) {
		for (size_t i = 0; i < tx->nrcpt; i++)
			sieve_result_clear(&res[i]);
		free(res);
		return false; /* deliver.c's plain path; deliver_sieve_free unmaps */
	}
	g0 = group_new(s, sv, tx->blob, false);
	for (size_t i = 0; i < tx->nrcpt; i++)
		if (tx->rcpt[i].local)
			apply(s, sv, i, &res[i], g0);
	for (size_t i = 0; i < tx->nrcpt; i++)
		sieve_result_clear(&res[i]);
	free(res);
	struct sv_state *st = state_of(sv);
	for (size_t k = 0; k < st->ng; k++)
		if (st->g[k]->n > 0)
			st->left++;
	for (size_t k = 0; k < st->ng; k++) {
		struct sv_group *g = st->g[k];

		if (g->n == 0)
			continue;
		tx->pending++;
		store_gc_deliver(s->m->gc, g->blob, 0, g->srcpt, g->n, group_done, g);
	}
	if (st->left == 0) { /* nothing stored: finish from the loop all the same */
		const struct timeval zero = { 0, 0 };

		groups_done(s);
		tx->pending++;
		event_base_once(s->m->base, -1, EV_TIMEOUT, nothing_cb, s, &zero);
	}
	return true;
}

void deliver_sieve_free(struct smtp_tx *tx)
{
	struct sieve_tx *sv = tx->sieve;

	if (sv == NULL)
		return;
	if (sv->map != NULL && sv->maplen > 0)
		munmap(sv->map, sv->maplen);
	for (size_t i = 0; i < sv->nd; i++) {
		free(sv->d[i].mailbox);
		for (size_t k = 0; k < sv->d[i].nkw; k++)
			free(sv->d[i].kw[k]);
		free(sv->d[i].kw);
	}
	free(sv->d);
	for (size_t i = 0; i < sv->nvac; i++) {
		free(sv->vac[i]->user);
		free(sv->vac[i]->key);
		buf_release(&sv->vac[i]->msg);
		free(sv->vac[i]);
	}
	free(sv->vac);
	for (size_t i = 0; i < sv->nout; i++) {
		store_blob_free(&sv->out[i]->blob);
		free(sv->out[i]->sender);
		free(sv->out[i]->rcpt);
		free(sv->out[i]);
	}
	free(sv->out);
	free(sv->failed);
	struct sv_state *st = state_of(sv);
	for (size_t k = 0; k < st->ng; k++) {
		if (st->g[k]->own)
			store_blob_free(&st->g[k]->blob);
		free(st->g[k]->srcpt);
		free(st->g[k]->dest);
		free(st->g[k]);
	}
	free(st->g);
	free(sv);
	tx->sieve = NULL;
}

static struct sv_state *state_of(struct sieve_tx *sv)
{
	return &sv->st;
}

/* ---- queued local recipients (the queue runner) -------------------------------------------- */

/* One queued message to one local recipient, exactly once across kill -9 (mtad.h,
   deliver_queued): first the redirect copies go into the queue with the recipient's 'r'
   record (one queue txn, which queues nothing when it finds the record: a retry); then one
   write of the user's partition does everything else the store must do (mailboxes made,
   duplicate and vacation memories, the deliveries with flags and keywords, of editheader's
   copy when the scripts edited the header, and the queue runner's 'q' mark, which says
   whether a vacation reply is owed); then the reply goes into the queue with its 'v'
   record. A copy or a reply the queue refuses makes the recipient 451 (the runner tries
   again; nothing is lost). */
struct q_sent { /* messages queued with a record, in one queue txn */
	char key[QUEUE_RECORD_KEY_MAX];
	struct store_blob *blob;
	struct store_queue_msg *qm;
	struct store_queue_rcpt *to;
	char **sender, **addr; /* per entry: its sender and recipient */
	uint64_t *ids;
	size_t n;
	bool skipped;     /* out: the record was there (queued before) */
	const char *fail; /* its fail_point */
};

struct qdlv {
	struct mtad *m;
	char *user;
	unsigned part;
	uint64_t qid;
	struct store_blob *blob;   /* what q_fn stores: the caller's copy in part (lives until
				      done), or edited */
	struct store_blob *edited; /* editheader's copy (ours), or NULL */
	char *mark;                /* the queue's record written with the delivery, or NULL */
	char *folder;              /* a keep's mailbox (dq->folder), or NULL: INBOX */
	struct sieve_tx d;         /* dests only (d.d, d.nd) */
	bool *create;              /* per dest */
	char **dup;
	int64_t *dup_until;
	size_t ndup;
	struct sv_vac vac;
	bool has_vac;
	uint64_t dup_seen; /* the run's duplicate answers, kept with an owed reply */
	char *vac_to;
	struct q_sent redir, reply;
	unsigned pending;
	int code;
	char text[512];
	void (*done)(int code, const char *text, void *arg);
	void *arg;
};

/* Tests of the windows between the commits above (tests/mtad/test_sieve_redirect.py): with
   HERON_MTAD_CRASH_AT=POINT:FILE in the environment, the worker kills mtad (SIGKILL, as
   kill -9: its master, when the parent runs the same program, then itself, so that no
   other worker goes on and no restart comes) at POINT when it can remove FILE, so once per
   file; with HERON_MTAD_FAIL_AT=POINT:FILE, POINT fails as a transient store error would,
   once per file (fail_point). */
static void crash_point(const char *point)
{
	char self[512], parent[512], path[64];
	ssize_t a, b;

	if (!point_armed("HERON_MTAD_CRASH_AT", point))
		return;
	log_warnx("crash point %s: killed (HERON_MTAD_CRASH_AT)", point);
	snprintf(path, sizeof(path), "/proc/%ld/exe", (long)getppid());
	a = readlink("/proc/self/exe", self, sizeof(self));
	b = readlink(path, parent, sizeof(parent));
	if (a > 0 && a == b && memcmp(self, parent, (size_t)a) == 0)
		kill(getppid(), SIGKILL);
	raise(SIGKILL);
}

static int q_mbox(struct store_txn *t, uint64_t uid, const char *name, bool create,
		  uint64_t *mbox_r)
{
	int rc;

	if (name == NULL)
		return store_mbox_find(t, uid, "INBOX", mbox_r);
	if ((rc = store_mbox_find(t, uid, name, mbox_r)) != STORE_ENOMBOX)
		return rc;
	if (create && (rc = store_mbox_create(t, uid, name, 0, mbox_r)) != STORE_EEXIST)
		return rc;
	return store_mbox_find(t, uid, create ? name : "INBOX", mbox_r);
}

/* in the committer's thread */
static int q_fn(struct store_txn *t, void *arg)
{
	struct qdlv *q = arg;
	struct store_user u;
	int64_t now = time(NULL);
	int rc;

	q->vac.send = false;
	if ((rc = store_user_get(t, q->user, &u)) != 0)
		return rc;
	for (size_t i = 0; i < q->ndup; i++)
		if ((rc = store_sieve_remember(t, q->user, STORE_SIEVE_DUPLICATE, q->dup[i], now,
					       q->dup_until[i])) != 0)
			return rc;
	if (q->has_vac && (rc = vac_fn(t, &q->vac)) != 0)
		return rc;
	/* a reply decided here is owed until it is queued (a run after a kill or a 451 queues
	   it, its duplicate tests answered as here: the record's qid holds the answers) */
	if (q->mark != NULL &&
	    (rc = store_drop_put_txn(t, q->mark, q->vac.send ? q->dup_seen : q->qid,
				     q->vac.send ? STORE_DROP_REPLY_OWED
						 : STORE_DROP_DELIVERED)) != 0)
		return rc;
	for (size_t i = 0; i < q->d.nd; i++) {
		const struct sv_dest *d = &q->d.d[i];
		uint64_t mbox, bits = 0;
		uint32_t uid;
		unsigned idx;

		if ((rc = q_mbox(t, u.id, d->mailbox != NULL ? d->mailbox : q->folder,
				 d->mailbox != NULL && q->create[i], &mbox)) != 0)
			return rc;
		for (size_t k = 0; k < d->nkw; k++)
			if (store_mbox_keyword(t, mbox, d->kw[k], true, &idx) == 0)
				bits |= (uint64_t)1 << idx;
		if ((rc = store_msg_append(t, mbox, q->blob, d->flags, bits, 0, &uid)) != 0)
			return rc;
	}
	return 0;
}

/* in the queue's txn (the committer's thread): the messages and their record, or nothing
   when the record is there */
static int sent_fn(struct store_txn *t, void *arg)
{
	struct q_sent *qs = arg;
	struct store_drop d;
	int rc;

	qs->skipped = false;
	if (fail_point(qs->fail))
		return STORE_EIO;
	if ((rc = store_drop_get_txn(t, qs->key, &d)) == 0) {
		qs->skipped = true;
		return 0;
	}
	if (rc != STORE_ENOMSG)
		return rc;
	return store_drop_enqueue_txn(t, qs->qm, qs->n, qs->blob, qs->key, STORE_DROP_SENT,
				      qs->ids);
}

static void sent_add(struct q_sent *qs, const char *sender, const char *to)
{
	qs->sender = xreallocarray(qs->sender, qs->n + 1, sizeof(*qs->sender));
	qs->addr = xreallocarray(qs->addr, qs->n + 1, sizeof(*qs->addr));
	qs->sender[qs->n] = xstrdup(sender);
	qs->addr[qs->n] = xstrdup(to);
	qs->n++;
}

/* the file pre + body in the queue's blobs, and an entry of it per recipient: 0 or a
   store_err (logged by the caller) */
static int sent_prepare(struct mtad *m, struct q_sent *qs, const struct buf *pre, const void *body,
			size_t blen)
{
	int rc;

	if ((rc = store_blob_new(m->store, STORE_QUEUE_PART, &qs->blob)) != 0 ||
	    (rc = store_blob_write(qs->blob, pre->data, pre->len)) != 0 ||
	    (blen > 0 && (rc = store_blob_write(qs->blob, body, blen)) != 0) ||
	    (rc = store_blob_finish_deferred(qs->blob)) != 0)
		return rc;
	qs->qm = xcalloc(qs->n, sizeof(*qs->qm));
	qs->to = xcalloc(qs->n, sizeof(*qs->to));
	qs->ids = xcalloc(qs->n, sizeof(*qs->ids));
	for (size_t i = 0; i < qs->n; i++) {
		qs->to[i].addr = qs->addr[i];
		qs->qm[i].sender = qs->sender[i];
		qs->qm[i].nrcpt = 1;
		qs->qm[i].rcpt = &qs->to[i];
		qs->qm[i].size = store_blob_size(qs->blob);
	}
	return 0;
}

static void sent_free(struct q_sent *qs)
{
	store_blob_free(&qs->blob);
	for (size_t i = 0; i < qs->n; i++) {
		free(qs->sender[i]);
		free(qs->addr[i]);
	}
	free(qs->sender);
	free(qs->addr);
	free(qs->to);
	free(qs->qm);
	free(qs->ids);
}

static void sent_log(const struct qdlv *q, const struct q_sent *qs, const char *what, int result)
{
	for (size_t i = 0; i < qs->n; i++)
		log_info("%016" PRIx64 ": sieve %s queued from=<%s> to=<%s> id=%016" PRIx64
			 " result=%s",
			 q->qid, what, qs->sender[i], qs->addr[i], qs->skipped ? 0 : qs->ids[i],
			 result        ? store_strerror(result)
			 : qs->skipped ? "ok (queued before a restart or a retry; not again)"
				       : "ok");
}

static void q_free(struct qdlv *q)
{
	for (size_t i = 0; i < q->d.nd; i++) {
		free(q->d.d[i].mailbox);
		for (size_t k = 0; k < q->d.d[i].nkw; k++)
			free(q->d.d[i].kw[k]);
		free(q->d.d[i].kw);
	}
	free(q->d.d);
	sent_free(&q->redir);
	sent_free(&q->reply);
	for (size_t i = 0; i < q->ndup; i++)
		free(q->dup[i]);
	free(q->dup);
	free(q->dup_until);
	free(q->create);
	store_blob_free(&q->edited); /* after the commit: done() ran */
	free(q->mark);
	free(q->folder);
	free(q->user);
	free(q->vac.key);
	free(q->vac_to);
	buf_release(&q->vac.msg);
	free(q);
}

static void q_step_done(struct qdlv *q)
{
	if (--q->pending > 0)
		return;
	q->done(q->code, q->text, q->arg);
	q_free(q);
}

/* the queue refused what the scripts send: the recipient waits (the runner tries again) */
static void q_tempfail(struct qdlv *q, const char *what, int rc)
{
	log_warnx("%016" PRIx64 ": sieve %s user=%s result=fail reason=\"%s\" (tried again)",
		  q->qid, what, q->user, store_strerror(rc));
	q->code = 451;
	snprintf(q->text, sizeof(q->text), "4.3.0 sieve %s not queued: %s", what,
		 store_strerror(rc));
}

static void reply_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct qdlv *q = arg;

	sent_log(q, &q->reply, "vacation reply", result);
	if (result != 0)
		q_tempfail(q, "vacation reply", result);
	else
		queue_runner_kick(q->m);
	if (result == 0)
		crash_point("sieve-reply-queued");
	q_step_done(q);
}

/* the vacation reply into the queue with its record; one more step */
static void q_reply(struct qdlv *q)
{
	int rc;

	sent_add(&q->reply, "", q->vac_to);
	if ((rc = sent_prepare(q->m, &q->reply, &q->vac.msg, NULL, 0)) != 0) {
		q_tempfail(q, "vacation reply", rc);
		return;
	}
	q->pending++;
	store_gc_submit(q->m->gc, STORE_QUEUE_PART, q->reply.blob, sent_fn, &q->reply, reply_done,
			q);
}

static void q_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value, void *arg)
{
	struct qdlv *q = arg;

	if (result != 0) {
		q->code = result == STORE_EQUOTA ? 452 : store_err_temporary(result) ? 451 : 550;
		snprintf(q->text, sizeof(q->text), "%s",
			 result == STORE_EQUOTA ? "4.2.2 mailbox full" : store_strerror(result));
	} else if (q->has_vac && q->vac.send) {
		crash_point("sieve-delivered-reply-owed");
		q_reply(q);
	} else {
		crash_point("sieve-delivered");
	}
	if (result == 0)
		queue_runner_kick(q->m);
	q_step_done(q);
}

static void q_store(struct qdlv *q)
{
	store_gc_submit(q->m->gc, q->part, q->blob, q_fn, q, q_done, q);
}

static void redir_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct qdlv *q = arg;

	sent_log(q, &q->redir, "redirect", result);
	if (result != 0) { /* nothing stored: the whole delivery again later */
		q_tempfail(q, "redirect", result);
		q_step_done(q);
		return;
	}
	queue_runner_kick(q->m);
	crash_point("sieve-redirect-queued");
	q_store(q);
}

/* the vacation action of the scripts' result into q (the reply's text, its memory) */
static void q_vacation(struct qdlv *q, const struct deliver_queued *dq,
		       const struct sieve_action *a)
{
	int64_t secs = a->vac.seconds < gconf.vacation_min ? gconf.vacation_min : a->vac.seconds;

	q->has_vac = true;
	q->vac.user = q->user;
	q->vac.key = xasprintf("%s\x1f%s", a->vac.handle, a->vac.to);
	q->vac.until = time(NULL) + (secs > 0 ? secs : 1);
	q->vac_to = xstrdup(a->vac.to);
	vacation_text(&q->vac.msg, q->m, dq->qid, dq->addr, &a->vac);
}

static struct qdlv *q_new(struct mtad *m, const struct deliver_queued *dq,
			  void (*done)(int code, const char *text, void *arg), void *arg)
{
	struct qdlv *q = xcalloc(1, sizeof(*q));

	q->m = m;
	q->user = xstrdup(dq->user);
	q->part = dq->part;
	q->qid = dq->qid;
	q->blob = dq->blob;
	q->folder = dq->folder != NULL ? xstrdup(dq->folder) : NULL;
	q->done = done;
	q->arg = arg;
	q->code = 250;
	q->pending = 1; /* the chain: redirects, the store write */
	queue_record_key('r', dq->qid, dq->idx, q->redir.key, sizeof(q->redir.key));
	queue_record_key('v', dq->qid, dq->idx, q->reply.key, sizeof(q->reply.key));
	q->redir.fail = "sieve-redirect-queue";
	q->reply.fail = "sieve-reply-queue";
	return q;
}

/* The scripts could not be run now (the message not mapped, the store could not say what
   they are): the recipient waits, 451 (the runner tries again); a plain delivery instead
   would ignore the scripts, and an owed reply would be lost. done runs before the return. */
static void q_later(const struct deliver_queued *dq, const char *why,
		    void (*done)(int code, const char *text, void *arg), void *arg)
{
	char text[256];

	log_warnx("%016" PRIx64 ": to=<%s>, sieve scripts not run: %s%s (tried again)", dq->qid,
		  dq->addr, why, dq->reply_owed ? ", the vacation reply still owed" : "");
	snprintf(text, sizeof(text), "4.3.0 sieve scripts not run: %s", why);
	done(451, text, arg);
}

/* dq's message mapped, or NULL (done ran: 451) */
static void *q_map(const struct deliver_queued *dq,
		   void (*done)(int code, const char *text, void *arg), void *arg)
{
	void *map = mmap(NULL, (size_t)dq->size, PROT_READ, MAP_PRIVATE, dq->fd, 0);

	if (map != MAP_FAILED)
		return map;
	q_later(dq, "the message file not mapped", done, arg);
	return NULL;
}

/* run_who for dq (the store failing at the fail point named point): on other than 0, map is
   unmapped, and for -1 done ran (451) */
static int q_run(struct mtad *m, const struct deliver_queued *dq, void *map, const char *point,
		 struct dup_answers *da, struct sieve_result *res,
		 void (*done)(int code, const char *text, void *arg), void *arg)
{
	struct sv_who who = { dq->qid, dq->from, dq->addr, dq->user, dq->part };
	int rc = fail_point(point) ? -1
				   : run_who(m, &who, map, (size_t)dq->size, NULL, NULL, da, res);

	if (rc != 0)
		munmap(map, (size_t)dq->size);
	if (rc < 0)
		q_later(dq, "the store could not say what they are", done, arg);
	return rc;
}

/* A run after a kill (or a 451) between the delivery's commit and its reply's: the reply
   alone (the memory says answered already: not asked again), the duplicate tests answered as
   the delivering run's were. 0 (done runs: the reply queued, or 451 when the scripts could
   not be run now), 1 when the scripts give no reply now (no script, or no vacation action:
   the reply is not owed any more, logged). */
static int q_replay(struct mtad *m, const struct deliver_queued *dq,
		    void (*done)(int code, const char *text, void *arg), void *arg)
{
	struct dup_answers da = { .replay = true, .seen = dq->dup_seen };
	struct sieve_result res;
	struct qdlv *q;
	void *map;
	int rc;

	if ((map = q_map(dq, done, arg)) == NULL)
		return 0;
	if ((rc = q_run(m, dq, map, "sieve-replay", &da, &res, done, arg)) < 0)
		return 0;
	if (rc > 0) {
		log_warnx("%016" PRIx64 ": to=<%s>, sieve vacation reply owed but the recipient "
			  "has no script now (not sent)",
			  dq->qid, dq->addr);
		return 1;
	}
	for (size_t k = 0; k < res.nact; k++) {
		if (res.act[k].type != SIEVE_VACATION)
			continue;
		q = q_new(m, dq, done, arg);
		snprintf(q->text, sizeof(q->text),
			 "2.0.0 delivered before a restart, its vacation reply queued");
		q_vacation(q, dq, &res.act[k]);
		sieve_result_clear(&res);
		munmap(map, (size_t)dq->size);
		q->vac.send = true;
		q_reply(q);
		q_step_done(q);
		return 0;
	}
	sieve_result_clear(&res);
	munmap(map, (size_t)dq->size);
	log_warnx("%016" PRIx64 ": to=<%s>, sieve vacation reply owed but the scripts give none "
		  "now (not sent)",
		  dq->qid, dq->addr);
	return 1;
}

int deliver_sieve_queued(struct mtad *m, const struct deliver_queued *dq,
			 void (*done)(int code, const char *text, void *arg), void *arg)
{
	struct dup_answers da = { 0 };
	struct sieve_result res;
	struct qdlv *q;
	void *map;
	int rc;

	if (!gconf_loaded || dq->size == 0 || dq->size > SIZE_MAX)
		return 1;
	if (dq->reply_owed)
		return q_replay(m, dq, done, arg);
	if ((map = q_map(dq, done, arg)) == NULL)
		return 0;
	if ((rc = q_run(m, dq, map, "sieve-run", &da, &res, done, arg)) != 0)
		return rc > 0 ? 1 : 0; /* 1: no script, plain delivery */
	q = q_new(m, dq, done, arg);
	q->dup_seen = da.seen;
	snprintf(q->text, sizeof(q->text), "2.0.0 discarded by sieve");
	q->create = xcalloc(res.nact + 1, sizeof(bool)); /* a dest per action at most */
	bool looped = false;

	for (size_t k = 0; k < res.nact; k++) {
		const struct sieve_action *a = &res.act[k];

		if (a->type == SIEVE_KEEP || a->type == SIEVE_FILEINTO) {
			q->create[q->d.nd] = a->type == SIEVE_FILEINTO && a->create;
			add_dest(&q->d, 0, a);
			snprintf(q->text, sizeof(q->text), "2.0.0 delivered by sieve into %s",
				 q->d.d[0].mailbox ? q->d.d[0].mailbox : "INBOX");
		} else if (a->type == SIEVE_REDIRECT) {
			if (!redirect_looped(map, (size_t)dq->size, dq->qid, dq->addr, a->addr)) {
				char from[MAILADDR_TEXT_MAX + 1];

				rcpt_srs_sender(q->m, dq->from, a->addr, from, sizeof(from));
				sent_add(&q->redir, from, a->addr);
				if (q->d.nd == 0)
					snprintf(q->text, sizeof(q->text),
						 "2.0.0 redirected by sieve");
			} else {
				looped = true;
			}
		} else if (a->type == SIEVE_REJECT || a->type == SIEVE_EREJECT) {
			char why[400];

			reply_text(a->reason, why, sizeof(why));
			q->code = 550; /* the queue runner bounces it to the sender (RFC 5429) */
			snprintf(q->text, sizeof(q->text), "5.7.1 %s", why);
		} else if (a->type == SIEVE_VACATION && !q->has_vac) {
			q_vacation(q, dq, a);
		}
	}
	if (looped && q->d.nd == 0)
		snprintf(q->text, sizeof(q->text), "2.0.0 delivered into INBOX (a redirect loop)");
	if (looped)
		keep_looped(&q->d, 0, 0);
	q->dup = xcalloc(res.ndup + 1, sizeof(char *));
	q->dup_until = xcalloc(res.ndup + 1, sizeof(int64_t));
	for (size_t k = 0; k < res.ndup; k++) {
		q->dup[q->ndup] = xstrdup(res.dup[k].key);
		q->dup_until[q->ndup++] = time(NULL) + res.dup[k].seconds;
	}
	/* editheader: every dest of this recipient gets the edited copy (as in apply); the
	   commit that stores it makes it durable before done() ends the queue entry */
	if (res.header != NULL && q->d.nd > 0 &&
	    (q->edited = edited_copy(m, dq->qid, dq->addr, dq->part, map, (size_t)dq->size,
				     &res)) != NULL)
		q->blob = q->edited;
	sieve_result_clear(&res);
	/* recorded with the delivery, so that a restart does not run the scripts again, unless
	   they refused the message (the bounce is the queue's) */
	if (dq->mark != NULL && q->code == 250)
		q->mark = xstrdup(dq->mark);
	if (q->redir.n == 0) {
		munmap(map, (size_t)dq->size);
		q_store(q);
		return 0;
	}
	/* the copies carry the recipient's loop mark (redirect_looped) */
	char *mark = xasprintf("Delivered-To: %s\r\n", dq->addr);
	struct buf pre;

	buf_init(&pre, 128, TRACE_HEADER_MAX);
	buf_puts(&pre, mark);
	free(mark);
	rc = sent_prepare(m, &q->redir, &pre, map, (size_t)dq->size);
	buf_release(&pre);
	munmap(map, (size_t)dq->size);
	if (rc != 0) {
		q_tempfail(q, "redirect", rc);
		q_step_done(q);
		return 0;
	}
	store_gc_submit(m->gc, STORE_QUEUE_PART, q->redir.blob, sent_fn, &q->redir, redir_done, q);
	return 0;
}

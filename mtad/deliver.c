/* deliver.c — owns the path from the DATA stream to durable storage: the message streams into
 * a store blob (one file, in the first local recipient's partition, or the queue's), and at the
 * end one group commit makes it durable with the other messages of the batch (deferred fsync),
 * delivers it to every local INBOX and enqueues it for the remote recipients. The reply (250, or per recipient in LMTP) is sent only from the commit callback,
 * so nothing is acknowledged before it is durable. Also the log line of each recipient's
 * outcome (to=, status=). */
#include <ctype.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mtad/mtad.h"
#include "mtad/relay.h"
#include "store/store.h"

struct user_create {
	char *name;
	uint64_t quota;
	unsigned part;
	void (*done)(int rc, unsigned part, void *arg);
	void *arg;
};

static int create_fn(struct store_txn *t, void *arg)
{
	struct user_create *uc = arg;
	uint64_t id;
	int rc = store_user_create(t, uc->name, &id);

	if (rc == 0 && uc->quota > 0)
		rc = store_user_set_quota(t, uc->name, uc->quota, 0);
	return rc == STORE_EEXIST ? 0 : rc;
}

static void create_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct user_create *uc = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	if (result == 0)
		log_info("store user created user=%s part=%u", uc->name, uc->part);
	uc->done(result, uc->part, uc->arg);
	free(uc->name);
	free(uc);
}

int deliver_user_ensure(struct mtad *m, const char *user, int partition, uint64_t quota,
			unsigned *part_r, void (*done)(int rc, unsigned part, void *arg),
			void *arg)
{
	struct user_create *uc;
	struct store_tomb tb;
	int rc = store_user_locate(m->store, user, part_r);

	if (rc != STORE_ENOUSER)
		return rc;
	/* moved away from here (a tombstone): no account; the sender retries and its next
	   lookup finds the new host (the create refuses it too, should one come meanwhile) */
	if (store_tomb_find(m->store, user, &tb) == 0)
		return STORE_EMOVED;
	/* the directory knows the user, the store not yet: provision on first mail */
	uc = xcalloc(1, sizeof(*uc));
	uc->name = xstrdup(user);
	uc->quota = quota;
	uc->part = partition >= 0 ? (unsigned)partition % store_partitions(m->store)
				  : store_partition_for(m->store, user);
	uc->done = done;
	uc->arg = arg;
	store_gc_submit(m->gc, uc->part, NULL, create_fn, uc, create_done, uc);
	return DELIVER_PENDING;
}

bool mtad_mailhost_elsewhere(const struct mtad *m, const char *mailhost)
{
	const char *self = conf_values(m->conf)->mtad.mailhost;
	size_t n = mailhost != NULL ? strlen(mailhost) : 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)mailhost[i]) && strchr(".-_", mailhost[i]) == NULL)
			return false;
	return strcasecmp(mailhost, self[0] != '\0' ? self : m->hostname) != 0;
}

int deliver_open(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	unsigned part = STORE_QUEUE_PART;
	int rc;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		if (tx->rcpt[i].local) {
			part = tx->rcpt[i].part;
			break;
		}
	}
	tx->blob_part = part;
	if ((rc = store_blob_new(s->m->store, part, &tx->blob)) != 0) {
		log_warnx("%016" PRIx64 " smtp data qid=%016" PRIx64 " result=fail reason=\"%s\"",
			  s->id, tx->qid, store_strerror(rc));
		return -1;
	}
	return 0;
}

static int flush_out(struct smtp_tx *tx)
{
	int rc = 0;

	if (tx->out.len > 0)
		rc = store_blob_write(tx->blob, tx->out.data, tx->out.len);
	buf_reset(&tx->out);
	return rc == 0 ? 0 : -1;
}

int deliver_write(struct smtp_session *s, const void *p, size_t n)
{
	struct smtp_tx *tx = s->tx;

	if (buf_append(&tx->out, p, n) == 0)
		return 0;
	if (flush_out(tx) < 0)
		return -1;
	if (buf_append(&tx->out, p, n) == 0)
		return 0;
	return store_blob_write(tx->blob, p, n) == 0 ? 0 : -1;
}

uint64_t deliver_written(const struct smtp_tx *tx)
{
	return store_blob_size(tx->blob) + tx->out.len;
}

int deliver_replace_head(struct smtp_session *s, const char *head, size_t hlen, uint64_t skip)
{
	struct smtp_tx *tx = s->tx;
	int rc;

	if (store_blob_size(tx->blob) == 0 && skip <= tx->out.len &&
	    hlen + tx->out.len - skip <= tx->out.max) {
		/* the message is still all in memory: no file to rewrite */
		struct buf nb;

		buf_init(&nb, hlen + tx->out.len - skip, tx->out.max);
		if (buf_append(&nb, head, hlen) < 0 ||
		    buf_append(&nb, tx->out.data + skip, tx->out.len - skip) < 0) {
			buf_release(&nb);
			return -1;
		}
		buf_release(&tx->out);
		tx->out = nb;
		return 0;
	}
	if (flush_out(tx) < 0)
		return -1;
	if ((rc = store_blob_replace_head(&tx->blob, head, hlen, skip)) != 0) {
		log_warnx("%016" PRIx64 " smtp data qid=%016" PRIx64 " result=fail "
			  "reason=\"rewrite message head: %s\"",
			  s->id, tx->qid, store_strerror(rc));
		return -1;
	}
	return 0;
}

int deliver_flush(struct smtp_session *s)
{
	return flush_out(s->tx);
}

void deliver_abort(struct smtp_tx *tx)
{
	deliver_sieve_free(tx);
	if (tx->blob != NULL)
		store_blob_free(&tx->blob);
}

/* dsn and status of one recipient after the commit. */
static const char *rcpt_dsn(int rc, const char **status_r)
{
	if (rc == 0) {
		*status_r = "sent";
		return "2.0.0";
	}
	if (rc == STORE_EQUOTA) {
		*status_r = "deferred";
		return "4.2.2";
	}
	*status_r = store_err_temporary(rc) ? "deferred" : "bounced";
	return store_err_temporary(rc) ? "4.3.0" : "5.1.1";
}

static void log_outcomes(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	double delay = (double)(clock_wall_ms() - tx->started_ms) / 1000.0;
	bool accepted = false;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		const struct smtp_rcpt *r = &tx->rcpt[i];
		const char *status, *dsn = rcpt_dsn(r->result, &status);

		accepted |= r->result == 0;
		mtad_metrics_delivery(r->sieve_reject[0] ? MTAD_DLV_REJECTED
				      : r->result == 0
					      ? (r->local ? MTAD_DLV_LOCAL : MTAD_DLV_QUEUED)
				      : status[0] == 'd' ? MTAD_DLV_DEFERRED
							 : MTAD_DLV_BOUNCED);
		if (!r->local && r->result == 0)
			status = "queued";
		log_info("%016" PRIx64 ": from=<%s>, to=<%s>,%s%s%s relay=%s, delay=%.2f, dsn=%s, "
			 "status=%s (%s)",
			 tx->qid, tx->from, r->addr, r->orig[0] ? " orig_to=<" : "", r->orig,
			 r->orig[0] ? ">," : "", r->local ? "local" : "queue", delay, dsn,
			 r->sieve_reject[0] ? "rejected" : status,
			 r->result          ? store_strerror(r->result)
			 : r->sieve_note[0] ? r->sieve_note
			 : r->local ? (tx->quarantine ? "delivered to Junk (DMARC quarantine)"
						      : "delivered to INBOX")
				    : "queued for relay");
	}
	if (accepted)
		mtad_metrics_message(s, tx->size);
}

static void reply_lmtp(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		int rc = tx->rcpt[i].result;

		if (tx->rcpt[i].extra)
			continue; /* one reply per RCPT: an alias's first target answers */
		if (tx->rcpt[i].sieve_reject[0])
			smtp_reply(s, "550 5.7.1 <%s> %s", tx->rcpt[i].addr,
				   tx->rcpt[i].sieve_reject);
		else if (rc == 0)
			smtp_reply(s, "250 2.1.5 <%s> Ok: delivered as %016" PRIx64,
				   tx->rcpt[i].addr, tx->qid);
		else if (rc == STORE_EQUOTA)
			smtp_reply(s, "452 4.2.2 <%s> Mailbox full", tx->rcpt[i].addr);
		else
			smtp_reply(s, "451 4.3.0 <%s> Local error, try again later",
				   tx->rcpt[i].addr);
	}
}

/* One reply for the message: 250 only when every recipient's part is durable. */
static void reply_smtp(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	size_t ok = 0, quota = 0;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		ok += tx->rcpt[i].result == 0;
		quota += tx->rcpt[i].result == STORE_EQUOTA;
	}
	if (tx->nrcpt == 1 && tx->rcpt[0].sieve_reject[0])
		smtp_reply(s, "550 5.7.1 %s", tx->rcpt[0].sieve_reject);
	else if (ok == tx->nrcpt)
		smtp_reply(s, "250 2.0.0 Ok: queued as %016" PRIx64, tx->qid);
	else if (quota == tx->nrcpt)
		smtp_reply(s, "552 5.2.2 Mailbox full");
	else
		smtp_reply(s, "451 4.3.0 Local error, try again later");
}

static unsigned store_notify_of(unsigned notify)
{
	return ((notify & RCPT_NOTIFY_NEVER) ? STORE_NOTIFY_NEVER : 0) |
	       ((notify & RCPT_NOTIFY_SUCCESS) ? STORE_NOTIFY_SUCCESS : 0) |
	       ((notify & RCPT_NOTIFY_FAILURE) ? STORE_NOTIFY_FAILURE : 0) |
	       ((notify & RCPT_NOTIFY_DELAY) ? STORE_NOTIFY_DELAY : 0);
}

static bool rcpt_remote(const struct smtp_rcpt *r)
{
	return !r->local && !r->forwarded;
}

static bool rcpt_forwarded(const struct smtp_rcpt *r)
{
	return !r->local && r->forwarded;
}

static bool rcpt_failed(const struct smtp_rcpt *r)
{
	return r->result != 0;
}

/* The queue entry of the recipients pick() chooses, into qm (its recipients in tx). */
static void queue_msg_of(struct smtp_session *s, bool (*pick)(const struct smtp_rcpt *r),
			 const char *sender, struct store_queue_msg *qm)
{
	struct smtp_tx *tx = s->tx;
	struct store_queue_rcpt **qrcpt = pick == rcpt_forwarded ? &tx->qrcpt_fwd : &tx->qrcpt;
	size_t k = 0;

	free(*qrcpt);
	*qrcpt = xcalloc(tx->nrcpt, sizeof(**qrcpt));
	for (size_t i = 0; i < tx->nrcpt; i++) {
		const struct smtp_rcpt *r = &tx->rcpt[i];

		if (!pick(r))
			continue;
		(*qrcpt)[k].addr = r->addr;
		(*qrcpt)[k].orcpt = r->orcpt_raw[0] ? r->orcpt_raw : NULL;
		(*qrcpt)[k].notify = store_notify_of(r->params.notify);
		k++;
	}
	memset(qm, 0, sizeof(*qm));
	qm->sender = sender;
	qm->envid = tx->mp.envid[0] ? tx->mp.envid : NULL;
	qm->requiretls = tx->mp.requiretls;
	qm->held = tx->held;
	qm->ret = tx->mp.ret == MAIL_RET_FULL   ? STORE_RET_FULL
		  : tx->mp.ret == MAIL_RET_HDRS ? STORE_RET_HDRS
						: STORE_RET_NONE;
	qm->size = store_blob_size(tx->blob);
	qm->nrcpt = k;
	qm->rcpt = *qrcpt;
}

/* Queues the message for the recipients pick() chooses (one queue entry, one group commit);
   cb runs after the commit. */
static void enqueue_some(struct smtp_session *s, bool (*pick)(const struct smtp_rcpt *r),
			 const char *sender, store_done_cb *cb)
{
	struct store_queue_msg qm;

	queue_msg_of(s, pick, sender, &qm);
	store_gc_enqueue(s->m->gc, &qm, s->tx->blob, cb, s);
}

static void requeue_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			 void *arg);

/* SMTP has one reply per message: when some local recipients failed and the others are done,
   the failed ones go to the queue (the runner delivers local recipients too) so the message
   can be acknowledged once, without the client sending it again to everyone. */
static bool requeue_failed(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	size_t ok = 0;

	for (size_t i = 0; i < tx->nrcpt; i++)
		ok += tx->rcpt[i].result == 0;
	if ((s->flags & SF_LMTP) || tx->requeued || ok == 0 || ok == tx->nrcpt)
		return false;
	tx->requeued = true;
	for (size_t i = 0; i < tx->nrcpt; i++)
		if (tx->rcpt[i].result != 0)
			log_info("%016" PRIx64
				 ": to=<%s>, relay=local, dsn=4.3.0, status=deferred "
				 "(%s; requeued)",
				 tx->qid, tx->rcpt[i].addr, store_strerror(tx->rcpt[i].result));
	enqueue_some(s, rcpt_failed, tx->from, requeue_done);
	return true;
}

static void commit_finished(struct smtp_session *s)
{
	if (requeue_failed(s))
		return;
	free(s->drop_key); /* a maildrop file's: one transaction */
	s->drop_key = NULL;
	log_outcomes(s);
	if (s->flags & SF_LMTP)
		reply_lmtp(s);
	else
		reply_smtp(s);
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	smtp_resume(s);
}

static void requeue_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			 void *arg)
{
	struct smtp_session *s = arg;
	struct smtp_tx *tx = s->tx;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		if (tx->rcpt[i].result != 0) {
			tx->rcpt[i].local = false; /* now a queue entry */
			tx->rcpt[i].result = result;
		}
	}
	if (result == 0) {
		log_info("%016" PRIx64 " smtp queue qid=%016" PRIx64 " queue_id=%016" PRIx64
			 " requeued=yes",
			 s->id, tx->qid, value);
		queue_runner_kick(s->m);
	}
	commit_finished(s);
}

void deliver_step_done(struct smtp_session *s)
{
	if (--s->tx->pending == 0)
		commit_finished(s);
}

static void local_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct smtp_session *s = arg;
	struct smtp_tx *tx = s->tx;
	size_t k = 0;

	for (size_t i = 0; i < tx->nrcpt; i++)
		if (tx->rcpt[i].local)
			tx->rcpt[i].result = tx->srcpt[k++].result;
	if (--tx->pending == 0)
		commit_finished(s);
}

static void queued(struct smtp_session *s, bool (*pick)(const struct smtp_rcpt *r), int result,
		   uint64_t value)
{
	struct smtp_tx *tx = s->tx;
	size_t n = 0;

	for (size_t i = 0; i < tx->nrcpt; i++) {
		if (pick(&tx->rcpt[i])) {
			tx->rcpt[i].result = result;
			n++;
		}
	}
	if (result == 0) {
		/* the queue entry's id is the one its relay lines carry: linked here */
		log_info("%016" PRIx64 " smtp queue qid=%016" PRIx64 " queue_id=%016" PRIx64
			 " nrcpt=%zu%s%s%s",
			 s->id, tx->qid, value, n, pick == rcpt_forwarded ? " srs_from=<" : "",
			 pick == rcpt_forwarded ? tx->srs_from : "",
			 pick == rcpt_forwarded ? ">" : "");
		queue_runner_kick(s->m);
	}
	if (--tx->pending == 0)
		commit_finished(s);
}

static void queue_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	queued(arg, rcpt_remote, result, value);
}

static void queue_fwd_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			   void *arg)
{
	queued(arg, rcpt_forwarded, result, value);
}

/* How many remote recipients go from the sender (*direct) and from its SRS form (*fwd: those
   forwarded off-site, when the sender has an SRS form; else they count as direct). */
static void split_remote(struct smtp_session *s, size_t *direct, size_t *fwd)
{
	struct smtp_tx *tx = s->tx;

	*direct = *fwd = 0;
	for (size_t i = 0; i < tx->nrcpt; i++) {
		*direct += rcpt_remote(&tx->rcpt[i]);
		*fwd += rcpt_forwarded(&tx->rcpt[i]);
	}
	if (*fwd > 0)
		rcpt_srs_sender(s->m, tx->from, NULL, tx->srs_from, sizeof(tx->srs_from));
	if (*fwd > 0 && strcmp(tx->srs_from, tx->from) == 0) {
		/* no SRS form: one entry for all */
		for (size_t i = 0; i < tx->nrcpt; i++)
			tx->rcpt[i].forwarded = false;
		*direct += *fwd;
		*fwd = 0;
	}
}

/* The remote recipients: those forwarded off-site in an entry of their own, from the SRS form
   of the sender (when it has one), the others from the sender. */
static void enqueue_remote(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	size_t direct, fwd;

	split_remote(s, &direct, &fwd);
	if (direct > 0) {
		tx->pending++;
		enqueue_some(s, rcpt_remote, tx->from, queue_done);
	}
	if (fwd > 0) {
		tx->pending++;
		enqueue_some(s, rcpt_forwarded, tx->srs_from, queue_fwd_done);
	}
}

/* A maildrop file's message (XUID with a key: pickup.c): every recipient goes to the queue
   (whose runner delivers the local ones, each exactly once: queue_runner.c), its entries
   (the direct one, the one forwarded off-site) and the file's record in one commit, so that
   no crash separates the 250 from the record the pickup consults before it submits a file
   again. A local delivery here could not always be recorded in one commit: one that Sieve
   scripts take over commits in several steps, and one that fails for some recipients
   requeues them in another environment's commit. */
struct drop_enq {
	struct smtp_session *s;
	struct store_queue_msg qm[2];
	bool (*pick[2])(const struct smtp_rcpt *r);
	uint64_t id[2];
	size_t n;
	char *key;
	struct store_blob *blob;
	/* the DSN of the recipients the pickup says were refused (XREFUSED), written before the
	   submission: what it says (f: the sender, pairs of "addr" and its refusal's text), then
	   its file, which drop_fn only references */
	bool want_dsn;
	struct bounce_refused f;
	char *from;
	char **refused;
	struct bounce_dsn dsn;
};

/* The DSN (RFC 3464, bounce.c's), which returns the message's header fields as its file has
   them (finished: a milter may have rewritten the head), on the loop before the submission
   (its file written as the message's was, made durable by the commit that references it),
   so that the queue's write txn does no reading or writing of files for it. */
static int drop_dsn(struct mtad *m, struct drop_enq *d)
{
	uint64_t size;
	int fd, rc;

	if (!d->want_dsn)
		return 0;
	if ((rc = store_blob_open_blob(d->blob, &fd, &size)) != 0)
		return rc;
	rc = bounce_prepare_refused(m, &d->f, fd, &d->dsn);
	close(fd);
	return rc;
}

static int drop_fn(struct store_txn *t, void *arg)
{
	struct drop_enq *d = arg;
	int rc = store_drop_enqueue_txn(t, d->qm, d->n, d->blob, d->key, STORE_DROP_QUEUED, d->id);

	/* the reference makes the DSN's file durable first (here, the committer's thread) */
	if (rc == 0 && d->dsn.blob != NULL)
		rc = store_queue_add_txn(t, &d->dsn.qm, d->dsn.blob, &d->dsn.id);
	return rc;
}

/* What the DSN of the XREFUSED recipients says, its own copy (nothing when none was refused
   or the sender is null). */
static void drop_dsn_of(struct smtp_session *s, struct drop_enq *d)
{
	struct smtp_tx *tx = s->tx;

	if (s->ndrop_refused == 0 || tx->from[0] == '\0')
		return;
	d->want_dsn = true;
	d->from = xstrdup(tx->from);
	d->refused = xcalloc(2 * s->ndrop_refused, sizeof(*d->refused));
	for (size_t i = 0; i < 2 * s->ndrop_refused; i++)
		d->refused[i] = xstrdup(s->drop_refused[i]);
	d->f.id = tx->qid;
	d->f.sender = d->from;
	d->f.created = (int64_t)clock_wall_s();
	d->f.n = s->ndrop_refused;
	d->f.stride = 2; /* "addr" then its refusal's text */
	d->f.addr = d->refused;
	d->f.error = d->refused + 1;
}

static void drop_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		      void *arg)
{
	struct drop_enq *d = arg;
	struct smtp_session *s = d->s;
	size_t k = d->n;

	if (result == 0)
		log_info("%016" PRIx64 " smtp maildrop qid=%016" PRIx64 " recorded file=%s", s->id,
			 s->tx->qid, d->key);
	if (result == 0 && d->dsn.blob != NULL) {
		log_info("%016" PRIx64 " smtp maildrop qid=%016" PRIx64 " refused recipients: "
			 "delivery status notification %016" PRIx64 " to <%s> queued",
			 s->id, s->tx->qid, d->dsn.id, s->tx->from);
		queue_runner_kick(s->m);
	}
	store_blob_free(&d->dsn.blob);
	for (size_t i = 0; i < k; i++)
		queued(s, d->pick[i], result, d->id[i]);
	for (size_t i = 0; d->refused != NULL && i < 2 * d->f.n; i++)
		free(d->refused[i]);
	free(d->refused);
	free(d->from);
	free(d->key);
	free(d);
}

static void enqueue_drop(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;
	struct drop_enq *d = xcalloc(1, sizeof(*d));
	size_t direct, fwd;
	int rc;

	split_remote(s, &direct, &fwd);
	d->s = s;
	d->key = xstrdup(s->drop_key);
	d->blob = tx->blob;
	if (direct > 0) {
		d->pick[d->n] = rcpt_remote;
		queue_msg_of(s, rcpt_remote, tx->from, &d->qm[d->n++]);
	}
	if (fwd > 0) {
		d->pick[d->n] = rcpt_forwarded;
		queue_msg_of(s, rcpt_forwarded, tx->srs_from, &d->qm[d->n++]);
	}
	tx->pending += d->n;
	drop_dsn_of(s, d);
	if ((rc = drop_dsn(s->m, d)) != 0) {
		/* nothing committed: the file stays, the pickup submits it again later */
		log_warnx("%016" PRIx64 " smtp maildrop qid=%016" PRIx64 " result=fail "
			  "reason=\"delivery status notification: %s\"",
			  s->id, tx->qid, store_strerror(rc));
		drop_done(rc, NULL, 0, 0, d);
		return;
	}
	store_gc_submit(s->m->gc, STORE_QUEUE_PART, tx->blob, drop_fn, d, drop_done, d);
}

/* The message file is complete (or failed): deliver and enqueue in one group commit, which
   makes the file durable first. */
static void blob_finished(int rc, void *arg)
{
	struct smtp_session *s = arg;
	struct smtp_tx *tx = s->tx;

	if (rc != 0) {
		log_warnx("%016" PRIx64 " smtp data qid=%016" PRIx64 " result=fail "
			  "reason=\"message file: %s\"",
			  s->id, tx->qid, store_strerror(rc));
		for (size_t i = 0; i < tx->nrcpt; i++)
			tx->rcpt[i].result = STORE_EIO;
		commit_finished(s);
		return;
	}
	if (tx->held || s->drop_key != NULL) {
		/* quarantined by a milter: every recipient waits in the queue, held, until
		   `mailctl queue release`; a maildrop file's: enqueue_drop */
		for (size_t i = 0; i < tx->nrcpt; i++)
			tx->rcpt[i].local = false;
		tx->nlocal = 0;
	}
	if (s->drop_key != NULL && tx->nlocal == 0) {
		enqueue_drop(s);
		return;
	}
	if (tx->nlocal > 0 && deliver_sieve(s)) {
		if (tx->nlocal < tx->nrcpt)
			enqueue_remote(s);
		return;
	}
	if (tx->nlocal > 0) {
		size_t k = 0;

		tx->srcpt = xcalloc(tx->nlocal, sizeof(*tx->srcpt));
		bool folders = conf_values(s->m->conf)->mtad.subaddress_folder;

		for (size_t i = 0; i < tx->nrcpt; i++) {
			if (!tx->rcpt[i].local)
				continue;
			tx->srcpt[k].user = tx->rcpt[i].user;
			if (tx->quarantine) {
				/* DMARC quarantine (mtad_auth.c) */
				tx->srcpt[k].mailbox = "Junk";
				tx->srcpt[k].special = STORE_USE_JUNK;
			} else if (folders && tx->rcpt[i].detail[0] != '\0') {
				/* user+tag@ into the folder tag when it exists (the store: else INBOX) */
				tx->srcpt[k].mailbox = tx->rcpt[i].detail;
			}
			k++;
		}
		tx->pending++;
	}
	if (tx->nlocal < tx->nrcpt)
		enqueue_remote(s);
	if (tx->nlocal > 0)
		store_gc_deliver(s->m->gc, tx->blob, 0, tx->srcpt, tx->nlocal, local_done, s);
}

void deliver_commit(struct smtp_session *s)
{
	struct smtp_tx *tx = s->tx;

	if (flush_out(tx) < 0) {
		blob_finished(STORE_EIO, s);
		return;
	}
	/* renamed now, fsynced by the group commit with the other messages of its batch, before
	   the index commit that references it (and so before any reply) */
	blob_finished(store_blob_finish_deferred(tx->blob), s);
}

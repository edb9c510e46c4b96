/* store_batch.c — owns group commit: batches of deliveries, appends, flag changes and queue
 * additions run in one write txn per partition (so one index fsync covers them all), the
 * group committer shared by the producers of a process (libevent timer or threads), and
 * store_deliver() built on them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

enum bop_type { BOP_DELIVER, BOP_APPEND, BOP_FLAGS, BOP_ENQUEUE, BOP_WRITE };

struct bop {
	enum bop_type type;
	store_done_cb *cb;
	void *arg;
	int result;
	uint64_t value;
	struct store_blob *blob;
	int64_t internaldate;
	struct store_rcpt *rcpts;  /* BOP_DELIVER */
	size_t n;
	unsigned *rcpt_part;       /* partition of each recipient (NO_PART: unknown user or a
				      duplicate, whose result is copied from dup[i]) */
	size_t *dup;               /* the first identical recipient, or SIZE_MAX */
	uint64_t mbox;             /* APPEND, FLAGS */
	uint32_t uid;
	enum store_flag_op op;
	unsigned flags;
	uint64_t keywords;
	struct store_queue_msg qm; /* ENQUEUE: a deep copy, freed with the batch */
	unsigned part;             /* WRITE */
	int (*fn)(struct store_txn *t, void *arg);
	void *fn_arg;
};

struct store_batch {
	struct store *st;
	struct bop *ops;
	size_t n, cap;
};

struct store_batch *store_batch_new(struct store *st)
{
	struct store_batch *bt = xcalloc(1, sizeof(*bt));

	bt->st = st;
	return bt;
}

static struct bop *bop_add(struct store_batch *bt, enum bop_type type, store_done_cb *cb,
			   void *arg)
{
	struct bop *o;

	if (bt->n == bt->cap)
		bt->ops = xreallocarray(bt->ops, bt->cap = bt->cap * 2 + 16, sizeof(*bt->ops));
	o = &bt->ops[bt->n++];
	memset(o, 0, sizeof(*o));
	o->type = type;
	o->cb = cb;
	o->arg = arg;
	return o;
}

void store_batch_deliver(struct store_batch *bt, struct store_blob *b, int64_t internaldate,
			 struct store_rcpt *rcpts, size_t n, store_done_cb *cb, void *arg)
{
	struct bop *o = bop_add(bt, BOP_DELIVER, cb, arg);

	o->blob = b;
	o->internaldate = internaldate;
	o->rcpts = rcpts;
	o->n = n;
}

void store_batch_append(struct store_batch *bt, uint64_t mbox, struct store_blob *b,
			unsigned flags, uint64_t keywords, int64_t internaldate,
			store_done_cb *cb, void *arg)
{
	struct bop *o = bop_add(bt, BOP_APPEND, cb, arg);

	o->mbox = mbox;
	o->blob = b;
	o->flags = flags;
	o->keywords = keywords;
	o->internaldate = internaldate;
}

void store_batch_flags(struct store_batch *bt, uint64_t mbox, uint32_t uid,
		       enum store_flag_op op, unsigned flags, uint64_t keywords,
		       store_done_cb *cb, void *arg)
{
	struct bop *o = bop_add(bt, BOP_FLAGS, cb, arg);

	o->mbox = mbox;
	o->uid = uid;
	o->op = op;
	o->flags = flags;
	o->keywords = keywords;
}

void store_batch_enqueue(struct store_batch *bt, const struct store_queue_msg *qm,
			 struct store_blob *b, store_done_cb *cb, void *arg)
{
	struct bop *o = bop_add(bt, BOP_ENQUEUE, cb, arg);
	struct store_queue_rcpt *r = xcalloc(qm->nrcpt + 1, sizeof(*r));

	o->qm = *qm;
	o->qm.sender = xstrdup(qm->sender != NULL ? qm->sender : "");
	o->qm.envid = qm->envid != NULL ? xstrdup(qm->envid) : NULL;
	for (size_t i = 0; i < qm->nrcpt; i++) {
		r[i] = qm->rcpt[i];
		r[i].addr = xstrdup(qm->rcpt[i].addr != NULL ? qm->rcpt[i].addr : "");
		r[i].orcpt = qm->rcpt[i].orcpt != NULL ? xstrdup(qm->rcpt[i].orcpt) : NULL;
		r[i].last_error = NULL;
	}
	o->qm.rcpt = r;
	o->blob = b;
}

void store_batch_write(struct store_batch *bt, unsigned part, struct store_blob *b,
		       int (*fn)(struct store_txn *t, void *arg), void *fn_arg,
		       store_done_cb *cb, void *arg)
{
	struct bop *o = bop_add(bt, BOP_WRITE, cb, arg);

	o->part = part;
	o->blob = b;
	o->fn = fn;
	o->fn_arg = fn_arg;
}

size_t store_batch_count(const struct store_batch *bt)
{
	return bt->n;
}

void store_batch_free(struct store_batch **btp)
{
	struct store_batch *bt = *btp;

	if (bt == NULL)
		return;
	for (size_t i = 0; i < bt->n; i++) {
		free(bt->ops[i].rcpt_part);
		free(bt->ops[i].dup);
		if (bt->ops[i].type == BOP_ENQUEUE)
			store_queue_msg_clear(&bt->ops[i].qm);
	}
	free(bt->ops);
	free(bt);
	*btp = NULL;
}

/* ------------------------------------------------------------------------------------- */

struct part_run {
	struct store_batch *bt;
	unsigned part;
	int rc;
};

#define NO_PART UINT32_MAX

/* Same user and same mailbox (NULL = INBOX, INBOX in any case): one delivery. */
static bool rcpt_same(const struct store_rcpt *a, const struct store_rcpt *b)
{
	const char *ma = a->mailbox != NULL ? a->mailbox : "INBOX";
	const char *mb = b->mailbox != NULL ? b->mailbox : "INBOX";

	if (strcmp(a->user, b->user) != 0)
		return false;
	if (strcasecmp(ma, "INBOX") == 0 && strcasecmp(mb, "INBOX") == 0)
		return true;
	return strcmp(ma, mb) == 0;
}

static int deliver_one(struct store_txn *t, struct bop *o, struct store_rcpt *r)
{
	struct store_user u;
	struct mbox_rec rec;
	uint64_t mbox;
	int rc;

	if ((rc = store_user_get(t, r->user, &u)) != 0)
		return rc;
	rc = r->mailbox != NULL ? store_mbox_find(t, u.id, r->mailbox, &mbox) : STORE_ENOMBOX;
	if (rc == STORE_ENOMBOX)
		rc = store_mbox_find(t, u.id, "INBOX", &mbox);
	if (rc != 0)
		return rc;
	if ((rc = mbox_rec_load(t, mbox, &rec)) != 0)
		return rc;
	if ((rc = store_msg_add_ref(t, &rec, mbox, store_blob_id(o->blob),
				    store_blob_size(o->blob), r->flags, 0, o->internaldate, true,
				    &r->uid)) != 0)
		return rc;
	if ((rc = store_blob_ref(t, o->blob)) != 0 || (rc = mbox_rec_store(t, mbox, &rec)) != 0)
		return rc;
	r->mbox = mbox;
	return 0;
}

/* An error that leaves the txn unusable: the whole partition's work is redone or failed. */
static bool txn_fatal(struct store_txn *t, int rc)
{
	return t->failed || rc == STORE_EAGAIN || rc == STORE_EIO || rc == STORE_ENOSPC ||
	       rc == STORE_EFULL;
}

/* A caller's function in a nested txn of the partition's: when it fails alone its writes
   (and the blobs it referenced) are dropped and the others' stay. */
static int run_nested(struct store_txn *t, struct bop *o)
{
	MDB_txn *parent = t->txn, *child;
	size_t nrefd = t->nrefd, ndead = t->ndead;
	int rc, mrc;

	if ((mrc = mdb_txn_begin(t->e->env, parent, 0, &child)) != 0)
		return store_mdb_err(t, mrc, "begin nested");
	t->txn = child;
	rc = o->fn(t, o->fn_arg);
	t->txn = parent;
	if (rc == 0 && !t->failed) {
		if ((mrc = mdb_txn_commit(child)) != 0)
			return store_mdb_err(t, mrc, "commit nested");
		return 0;
	}
	mdb_txn_abort(child);
	t->nrefd = nrefd;
	t->ndead = ndead; /* files it freed stay: their rows came back */
	return rc != 0 ? rc : t->err;
}

static int run_op(struct store_txn *t, struct bop *o, unsigned part)
{
	struct store_msg m;
	int rc;

	switch (o->type) {
	case BOP_DELIVER:
		for (size_t i = 0; i < o->n; i++) {
			if (o->rcpt_part[i] != part)
				continue;
			rc = deliver_one(t, o, &o->rcpts[i]);
			o->rcpts[i].result = rc;
			if (txn_fatal(t, rc))
				return rc;
		}
		return 0;
	case BOP_APPEND:
		if (STORE_ID_PART(o->mbox) != part)
			return 0;
		rc = store_msg_append(t, o->mbox, o->blob, o->flags, o->keywords,
				      o->internaldate, &o->uid);
		o->result = rc;
		o->value = o->uid;
		break;
	case BOP_FLAGS:
		if (STORE_ID_PART(o->mbox) != part)
			return 0;
		rc = store_msg_flags(t, o->mbox, o->uid, o->op, o->flags, o->keywords, 0, &m);
		o->result = rc;
		o->value = m.modseq;
		break;
	case BOP_ENQUEUE:
		if (part != STORE_QUEUE_PART)
			return 0;
		rc = store_queue_add_txn(t, &o->qm, o->blob, &o->value);
		o->result = rc;
		break;
	case BOP_WRITE:
		if (o->part != part)
			return 0;
		o->result = run_nested(t, o);
		break;
	}
	return txn_fatal(t, o->result) ? o->result : 0;
}

static bool op_touches(const struct bop *o, unsigned part)
{
	switch (o->type) {
	case BOP_DELIVER:
		for (size_t i = 0; i < o->n; i++)
			if (o->rcpt_part[i] == part)
				return true;
		return false;
	case BOP_APPEND:
	case BOP_FLAGS:
		return STORE_ID_PART(o->mbox) == part;
	case BOP_ENQUEUE:
		return part == STORE_QUEUE_PART;
	case BOP_WRITE:
		return o->part == part;
	}
	return false;
}

/* One write txn for every operation of the batch in partition pr->part. Every per-op
   result is set again on a retry. An operation that fails alone (no such user, quota) has
   written nothing: the functions check before they write. */
static int part_fn(struct store_txn *t, void *arg)
{
	struct part_run *pr = arg;
	int rc;

	for (size_t i = 0; i < pr->bt->n; i++) {
		struct bop *o = &pr->bt->ops[i];

		if (op_touches(o, pr->part) && (rc = run_op(t, o, pr->part)) != 0)
			return rc;
	}
	return 0;
}

/* Sets every result of partition part to err (its commit failed). */
static void part_failed(struct store_batch *bt, unsigned part, int err)
{
	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (!op_touches(o, part))
			continue;
		if (o->type == BOP_DELIVER) {
			for (size_t j = 0; j < o->n; j++)
				if (o->rcpt_part[j] == part)
					o->rcpts[j].result = err;
		} else
			o->result = err;
	}
}

/* Finds each recipient's partition; an unknown user fails now (ENOUSER). */
static void locate_rcpts(struct store_batch *bt, bool *parts)
{
	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		switch (o->type) {
		case BOP_DELIVER:
			o->rcpt_part = xcalloc(o->n + 1, sizeof(*o->rcpt_part));
			o->dup = xcalloc(o->n + 1, sizeof(*o->dup));
			for (size_t j = 0; j < o->n; j++) {
				unsigned p;
				int rc;

				o->dup[j] = SIZE_MAX;
				for (size_t k = 0; k < j && o->dup[j] == SIZE_MAX; k++)
					if (o->dup[k] == SIZE_MAX &&
					    rcpt_same(&o->rcpts[k], &o->rcpts[j]))
						o->dup[j] = k;
				o->rcpts[j].uid = 0;
				if (o->dup[j] != SIZE_MAX) {
					o->rcpt_part[j] = NO_PART;
					continue;
				}
				rc = store_user_locate(bt->st, o->rcpts[j].user, &p);
				o->rcpts[j].result = rc;
				o->rcpt_part[j] = rc == 0 ? p : NO_PART;
				if (rc == 0)
					parts[p] = true;
			}
			break;
		case BOP_APPEND:
		case BOP_FLAGS:
			if (STORE_ID_PART(o->mbox) < bt->st->nparts)
				parts[STORE_ID_PART(o->mbox)] = true;
			else
				o->result = STORE_ENOMBOX;
			break;
		case BOP_ENQUEUE:
			parts[bt->st->nparts] = true;
			break;
		case BOP_WRITE:
			if (o->part < bt->st->nparts)
				parts[o->part] = true;
			else
				o->result = STORE_EINVAL;
			break;
		}
	}
}

/* Before the partitions commit (in parallel): the batch's blobs become durable together
   (bytes of deferred blobs, renames, hard links into every partition that will reference
   them, one fsync per directory). An error here is met again (and reported) by
   store_blob_ref in the partition's txn. */
static void prepare_blobs(struct store_batch *bt)
{
	size_t n = 0, cap = 0;
	struct store_blob **v = NULL;
	unsigned *parts = NULL;

	for (size_t i = 0; i < bt->n; i++)
		cap += bt->ops[i].type == BOP_DELIVER ? bt->ops[i].n : 1;
	v = xcalloc(cap + 1, sizeof(*v));
	parts = xcalloc(cap + 1, sizeof(*parts));
	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (o->type == BOP_DELIVER) {
			for (size_t j = 0; j < o->n; j++)
				if (o->rcpt_part[j] != NO_PART) {
					v[n] = o->blob;
					parts[n++] = o->rcpt_part[j];
				}
		} else if (o->type == BOP_APPEND && o->result == 0) {
			v[n] = o->blob;
			parts[n++] = STORE_ID_PART(o->mbox);
		} else if (o->type == BOP_ENQUEUE) {
			v[n] = o->blob;
			parts[n++] = STORE_QUEUE_PART;
		} else if (o->type == BOP_WRITE && o->blob != NULL && o->result == 0) {
			v[n] = o->blob;
			parts[n++] = o->part;
		}
	}
	(void)store_blob_sync_batch(v, parts, n);
	free(parts);
	free(v);
}

static void *part_thread(void *arg)
{
	struct part_run *pr = arg;

	pr->rc = store_write(pr->bt->st, pr->part, part_fn, pr);
	return NULL;
}

/* One write txn per partition touched, the partitions in parallel (their environments are
   independent, so their fsyncs overlap); a single partition commits in this thread. */
static void commit_parts(struct store_batch *bt, const bool *parts)
{
	struct store *st = bt->st;
	struct part_run *pr = xcalloc(st->nparts + 1, sizeof(*pr));
	pthread_t *th = xcalloc(st->nparts + 1, sizeof(*th));
	bool *started = xcalloc(st->nparts + 1, sizeof(*started));
	unsigned n = 0;

	for (unsigned p = 0; p <= st->nparts; p++)
		n += parts[p];
	for (unsigned p = 0; p <= st->nparts; p++) {
		if (!parts[p])
			continue;
		pr[p].bt = bt;
		pr[p].part = p == st->nparts ? STORE_QUEUE_PART : p;
		if (n > 1 && pthread_create(&th[p], NULL, part_thread, &pr[p]) == 0)
			started[p] = true;
		else
			part_thread(&pr[p]);
	}
	for (unsigned p = 0; p <= st->nparts; p++) {
		if (!parts[p])
			continue;
		if (started[p])
			pthread_join(th[p], NULL);
		if (pr[p].rc != 0)
			part_failed(bt, pr[p].part, pr[p].rc);
	}
	free(started);
	free(th);
	free(pr);
}

/* The commit itself: LMDB and fsyncs, no callback (the group committer's thread runs it). */
static void batch_run(struct store_batch *bt)
{
	struct store *st = bt->st;
	bool *parts = xcalloc(st->nparts + 1, sizeof(*parts));

	locate_rcpts(bt, parts);
	prepare_blobs(bt);
	commit_parts(bt, parts);
	free(parts);
}

/* The results of a run batch to its producers, in queue order; frees it. */
static size_t batch_finish(struct store_batch **btp)
{
	struct store_batch *bt = *btp;
	size_t failed = 0;

	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (o->type == BOP_DELIVER) {
			for (size_t j = 0; j < o->n; j++)
				if (o->dup[j] != SIZE_MAX) {
					o->rcpts[j].result = o->rcpts[o->dup[j]].result;
					o->rcpts[j].mbox = o->rcpts[o->dup[j]].mbox;
					o->rcpts[j].uid = o->rcpts[o->dup[j]].uid;
				}
			o->result = o->n > 0 ? o->rcpts[0].result : STORE_EINVAL;
			for (size_t j = 0; j < o->n; j++)
				if (o->rcpts[j].result == 0)
					o->result = 0;
		}
		if (o->result != 0)
			failed++;
		if (o->cb != NULL)
			o->cb(o->result, o->rcpts, o->n, o->value, o->arg);
	}
	store_batch_free(btp);
	return failed;
}

size_t store_batch_commit(struct store_batch **btp)
{
	batch_run(*btp);
	return batch_finish(btp);
}

int store_deliver(struct store *st, int fd, int64_t internaldate, struct store_rcpt *rcpts,
		  size_t n)
{
	struct store_batch *bt;
	struct store_blob *b;
	unsigned part = 0;
	int rc;

	if (n == 0)
		return STORE_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (store_user_locate(st, rcpts[i].user, &part) == 0)
			break;
	if (lseek(fd, 0, SEEK_SET) == -1 && errno != ESPIPE)
		return STORE_EIO;
	if ((rc = store_blob_from_fd(st, part, fd, &b)) != 0) {
		for (size_t i = 0; i < n; i++)
			rcpts[i].result = rc;
		return rc;
	}
	bt = store_batch_new(st);
	store_batch_deliver(bt, b, internaldate, rcpts, n, NULL, NULL);
	store_batch_commit(&bt);
	store_blob_free(&b);
	rc = rcpts[0].result;
	for (size_t i = 0; i < n; i++)
		if (rcpts[i].result == 0)
			rc = 0;
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* The group committer: one lane of pending operations (a batch commits its partitions in
   parallel, so one lane loses nothing and lets a message for several partitions share the
   commits of the others). */

struct gc_lane {
	pthread_mutex_t mu;        /* pending, leader */
	pthread_mutex_t commit_mu; /* one commit at a time per lane */
	pthread_cond_t cv;         /* a commit ended */
	pthread_cond_t arrive;     /* an operation was queued (the leader gathers) */
	struct store_batch *pending;
	size_t expect;             /* producers seen at the end of the previous commit: its
				      operations + those pending then (the next gather's aim) */
	bool leader;
	struct store_batch *inflight; /* libevent: handed to the committer thread */
	bool inflight_done;        /* libevent: committed, its callbacks not run yet */
};

struct store_gc {
	struct store *st;
	unsigned nlanes;
	struct gc_lane *lanes;
	struct event *ev;          /* libevent flush timer */
	atomic_bool armed;
	atomic_uint_fast64_t ops, commits;
	/* libevent: a committer thread runs each batch (LMDB and the fsyncs) so the loop never
	   waits for the disk or for another process's write lock; the loop hands it one batch
	   at a time and runs the callbacks when the pipe says the batch is done. What queues
	   meanwhile is the next batch (the classic group commit). */
	bool threaded;
	bool stop;                 /* under lanes[0].mu */
	pthread_t thread;
	pthread_cond_t work;       /* under lanes[0].mu: a batch to commit, or stop */
	int done_pipe[2];
	struct event *done_ev;
};

int store_gc_new(struct store *st, struct store_gc **gc_r)
{
	struct store_gc *gc = xcalloc(1, sizeof(*gc));

	gc->st = st;
	gc->nlanes = 1;
	gc->lanes = xcalloc(gc->nlanes, sizeof(*gc->lanes));
	for (unsigned i = 0; i < gc->nlanes; i++) {
		pthread_mutex_init(&gc->lanes[i].mu, NULL);
		pthread_mutex_init(&gc->lanes[i].commit_mu, NULL);
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&gc->lanes[i].arrive, &ca);
		pthread_condattr_destroy(&ca);
		pthread_cond_init(&gc->lanes[i].cv, NULL);
	}
	*gc_r = gc;
	return 0;
}

/* libevent: hands the pending batch to the committer thread unless one is in flight (its
   end starts the next). */
static void gc_async_start(struct store_gc *gc)
{
	evtimer_del(gc->ev);
	atomic_store(&gc->armed, false);
	for (unsigned i = 0; i < gc->nlanes; i++) {
		struct gc_lane *l = &gc->lanes[i];

		pthread_mutex_lock(&l->mu);
		if (l->inflight == NULL && l->pending != NULL) {
			l->inflight = l->pending;
			l->pending = NULL;
			pthread_cond_signal(&gc->work);
			/* armed only while a batch is out: an idle committer keeps no loop alive */
			event_add(gc->done_ev, NULL);
		}
		pthread_mutex_unlock(&l->mu);
	}
}

/* libevent: runs the callbacks of the batch the thread finished, if any (the loop's
   thread). */
static bool gc_async_reap(struct store_gc *gc, struct gc_lane *l)
{
	struct store_batch *bt;

	pthread_mutex_lock(&l->mu);
	if (l->inflight == NULL || !l->inflight_done) {
		pthread_mutex_unlock(&l->mu);
		return false;
	}
	bt = l->inflight;
	l->inflight = NULL;
	l->inflight_done = false;
	l->expect = store_batch_count(bt) + (l->pending != NULL ? store_batch_count(l->pending)
								: 0);
	pthread_mutex_unlock(&l->mu);
	batch_finish(&bt);
	return true;
}

static void *gc_thread(void *arg)
{
	struct store_gc *gc = arg;
	struct gc_lane *l = &gc->lanes[0];

	pthread_mutex_lock(&l->mu);
	for (;;) {
		struct store_batch *bt;
		size_t n;

		while (!gc->stop && (l->inflight == NULL || l->inflight_done))
			pthread_cond_wait(&gc->work, &l->mu);
		if (l->inflight == NULL || l->inflight_done)
			break; /* stop, nothing left */
		bt = l->inflight;
		pthread_mutex_unlock(&l->mu);
		n = store_batch_count(bt);
		batch_run(bt);
		atomic_fetch_add(&gc->ops, n);
		atomic_fetch_add(&gc->commits, 1);
		pthread_mutex_lock(&l->mu);
		l->inflight_done = true;
		pthread_cond_broadcast(&l->cv);
		if (write(gc->done_pipe[1], "x", 1) == -1 && errno != EAGAIN)
			log_warn("store: group commit notify");
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void gc_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store_gc *gc = arg;
	char b[64];
	bool any = false;

	(void)what;
	while (read(fd, b, sizeof(b)) > 0)
		;
	for (unsigned i = 0; i < gc->nlanes; i++)
		any |= gc_async_reap(gc, &gc->lanes[i]);
	if (any) { /* what queued during the commit (and its callbacks) goes now */
		gc_async_start(gc);
		return;
	}
	/* a stale wake-up (store_gc_flush reaped that batch itself): keep watching for the
	   batch still out, if any */
	for (unsigned i = 0; i < gc->nlanes; i++) {
		pthread_mutex_lock(&gc->lanes[i].mu);
		any |= gc->lanes[i].inflight != NULL;
		pthread_mutex_unlock(&gc->lanes[i].mu);
	}
	if (any)
		event_add(gc->done_ev, NULL);
}

static void gc_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store_gc *gc = arg;

	(void)fd;
	(void)what;
	if (gc->threaded)
		gc_async_start(gc);
	else
		store_gc_flush(gc);
}

/* The committer thread takes no signal: the daemons' handlers run in the loop. */
static bool gc_thread_start(struct store_gc *gc, struct event_base *base)
{
	sigset_t all, old;
	int rc;

	if (pipe2(gc->done_pipe, O_NONBLOCK | O_CLOEXEC) == -1) {
		log_warn("store: group commit pipe");
		return false;
	}
	gc->done_ev = event_new(base, gc->done_pipe[0], EV_READ, gc_done_cb, gc);
	if (gc->done_ev == NULL)
		fatalx("store: event_new");
	pthread_cond_init(&gc->work, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&gc->thread, NULL, gc_thread, gc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_warnx("store: group commit thread: %s (commits run in the loop)",
			  strerror(rc));
		event_free(gc->done_ev);
		gc->done_ev = NULL;
		close(gc->done_pipe[0]);
		close(gc->done_pipe[1]);
		pthread_cond_destroy(&gc->work);
		return false;
	}
	return true;
}

void store_gc_attach(struct store_gc *gc, struct event_base *base)
{
	gc->ev = evtimer_new(base, gc_timer_cb, gc);
	if (gc->ev == NULL)
		fatalx("store: evtimer_new");
	gc->threaded = gc_thread_start(gc, base);
}

static struct gc_lane *gc_lane(struct store_gc *gc, unsigned part)
{
	(void)part; /* one lane today; lanes per partition were measured to batch worse */
	return &gc->lanes[0];
}

/* Called with the lane's mu held after an operation was queued. libevent: the commit runs
   at the end of this loop pass (what the pass still queues joins it) when the previous
   commit held a single operation (a low load: nothing to wait for) or group_commit_max are
   pending; else the timer (group_commit_ms after the first) flushes, gathering the others.
   A lone writer so does not wait for a timer with nothing to batch; once two operations meet
   in a commit the timer gathers again. */
static void gc_queued(struct store_gc *gc, struct gc_lane *l)
{
	size_t n;

	pthread_cond_signal(&l->arrive);
	if (gc->ev == NULL || l->inflight != NULL)
		return; /* threads gather themselves; the end of the commit in flight starts this */
	n = store_batch_count(l->pending);
	if (n >= gc->st->gc_max || l->expect <= 1) {
		event_active(gc->ev, EV_TIMEOUT, 0);
		atomic_store(&gc->armed, true);
	} else if (!atomic_exchange(&gc->armed, true)) {
		struct timeval tv = { gc->st->gc_ms / 1000, (gc->st->gc_ms % 1000) * 1000 };

		evtimer_add(gc->ev, &tv);
	}
}

static struct store_batch *gc_pending(struct store_gc *gc, struct gc_lane *l)
{
	if (l->pending == NULL)
		l->pending = store_batch_new(gc->st);
	return l->pending;
}

void store_gc_deliver(struct store_gc *gc, struct store_blob *b, int64_t internaldate,
		      struct store_rcpt *rcpts, size_t n, store_done_cb *cb, void *arg)
{
	struct gc_lane *l = gc_lane(gc, b->part);

	pthread_mutex_lock(&l->mu);
	store_batch_deliver(gc_pending(gc, l), b, internaldate, rcpts, n, cb, arg);
	gc_queued(gc, l);
	pthread_mutex_unlock(&l->mu);
}

void store_gc_flags(struct store_gc *gc, uint64_t mbox, uint32_t uid, enum store_flag_op op,
		    unsigned flags, uint64_t keywords, store_done_cb *cb, void *arg)
{
	struct gc_lane *l = gc_lane(gc, STORE_ID_PART(mbox));

	pthread_mutex_lock(&l->mu);
	store_batch_flags(gc_pending(gc, l), mbox, uid, op, flags, keywords, cb, arg);
	gc_queued(gc, l);
	pthread_mutex_unlock(&l->mu);
}

void store_gc_enqueue(struct store_gc *gc, const struct store_queue_msg *qm,
		      struct store_blob *b, store_done_cb *cb, void *arg)
{
	struct gc_lane *l = gc_lane(gc, STORE_QUEUE_PART);

	pthread_mutex_lock(&l->mu);
	store_batch_enqueue(gc_pending(gc, l), qm, b, cb, arg);
	gc_queued(gc, l);
	pthread_mutex_unlock(&l->mu);
}

void store_gc_write(struct store_gc *gc, unsigned part, struct store_blob *b,
		    int (*fn)(struct store_txn *t, void *arg), void *fn_arg, store_done_cb *cb,
		    void *arg)
{
	struct gc_lane *l = gc_lane(gc, part);

	pthread_mutex_lock(&l->mu);
	store_batch_write(gc_pending(gc, l), part, b, fn, fn_arg, cb, arg);
	gc_queued(gc, l);
	pthread_mutex_unlock(&l->mu);
}

static void gc_gather(struct store_gc *gc, struct gc_lane *l);

/* Takes the lane's pending batch (after gathering: see store_gc_deliver_wait) and commits
   it; callbacks run in this thread. */
static void gc_commit_lane(struct store_gc *gc, struct gc_lane *l, bool gather)
{
	struct store_batch *bt;
	size_t n;

	pthread_mutex_lock(&l->commit_mu);
	if (gather && gc->st->gc_ms > 0)
		gc_gather(gc, l);
	pthread_mutex_lock(&l->mu);
	bt = l->pending;
	l->pending = NULL;
	l->leader = false;
	pthread_mutex_unlock(&l->mu);
	if (bt != NULL) {
		n = store_batch_count(bt);
		store_batch_commit(&bt);
		atomic_fetch_add(&gc->ops, n);
		atomic_fetch_add(&gc->commits, 1);
		pthread_mutex_lock(&l->mu);
		l->expect = n + (l->pending != NULL ? store_batch_count(l->pending) : 0);
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
	}
	pthread_mutex_unlock(&l->commit_mu);
}

void store_gc_flush(struct store_gc *gc)
{
	for (unsigned i = 0; gc->threaded && i < gc->nlanes; i++) {
		struct gc_lane *l = &gc->lanes[i];

		pthread_mutex_lock(&l->mu);
		while (l->inflight != NULL && !l->inflight_done)
			pthread_cond_wait(&l->cv, &l->mu);
		pthread_mutex_unlock(&l->mu);
		gc_async_reap(gc, l);
	}
	if (gc->ev != NULL)
		evtimer_del(gc->ev);
	atomic_store(&gc->armed, false);
	for (unsigned i = 0; i < gc->nlanes; i++)
		gc_commit_lane(gc, &gc->lanes[i], false);
}

struct gc_wait {
	atomic_bool done;
	int result;
};

static void gc_wait_cb(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct gc_wait *w = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	w->result = result;
	atomic_store(&w->done, true); /* waiters re-check after the broadcast */
}

/* The leader's wait for company (see store_gc_deliver_wait). */
static void gc_gather(struct store_gc *gc, struct gc_lane *l)
{
	struct timespec until;
	size_t want;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(gc->st->gc_ms % 1000) * 1000000;
	until.tv_sec += gc->st->gc_ms / 1000 + until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	pthread_mutex_lock(&l->mu);
	want = l->expect < gc->st->gc_max ? l->expect : gc->st->gc_max;
	while (l->pending != NULL && store_batch_count(l->pending) < want)
		if (pthread_cond_timedwait(&l->arrive, &l->mu, &until) != 0)
			break;
	pthread_mutex_unlock(&l->mu);
}

int store_gc_deliver_wait(struct store_gc *gc, struct store_blob *b, int64_t internaldate,
			  struct store_rcpt *rcpts, size_t n)
{
	struct gc_lane *l = gc_lane(gc, b->part);
	struct gc_wait w = { false, 0 };
	bool lead;

	pthread_mutex_lock(&l->mu);
	store_batch_deliver(gc_pending(gc, l), b, internaldate, rcpts, n, gc_wait_cb, &w);
	pthread_cond_signal(&l->arrive);
	lead = !l->leader || store_batch_count(l->pending) >= gc->st->gc_max;
	l->leader = true;
	pthread_mutex_unlock(&l->mu);
	/* The leader commits once no commit is running (the classic group commit: what
	   queued during a commit goes in the next one), after gathering: it waits until as
	   many operations are pending as there were producers at the end of the previous
	   commit (its own operations, which come back, plus those that queued during it), or
	   group_commit_ms passed, whichever is first. So a lone producer never waits, and a
	   steady crowd commits together instead of splitting into two alternating halves. */
	if (lead)
		gc_commit_lane(gc, l, true);
	pthread_mutex_lock(&l->mu);
	while (!atomic_load(&w.done)) {
		if (l->pending != NULL && !l->leader) {
			/* our operation is still pending and nobody leads: lead */
			l->leader = true;
			pthread_mutex_unlock(&l->mu);
			gc_commit_lane(gc, l, true);
			pthread_mutex_lock(&l->mu);
			continue;
		}
		pthread_cond_wait(&l->cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return w.result;
}

void store_gc_stats(const struct store_gc *gc, uint64_t *ops_r, uint64_t *commits_r)
{
	*ops_r = atomic_load(&((struct store_gc *)(uintptr_t)gc)->ops);
	*commits_r = atomic_load(&((struct store_gc *)(uintptr_t)gc)->commits);
}

void store_gc_free(struct store_gc **gcp)
{
	struct store_gc *gc = *gcp;

	if (gc == NULL)
		return;
	store_gc_flush(gc);
	if (gc->threaded) {
		pthread_mutex_lock(&gc->lanes[0].mu);
		gc->stop = true;
		pthread_cond_signal(&gc->work);
		pthread_mutex_unlock(&gc->lanes[0].mu);
		pthread_join(gc->thread, NULL);
		event_free(gc->done_ev);
		close(gc->done_pipe[0]);
		close(gc->done_pipe[1]);
		pthread_cond_destroy(&gc->work);
	}
	if (gc->ev != NULL)
		event_free(gc->ev);
	for (unsigned i = 0; i < gc->nlanes; i++) {
		pthread_mutex_destroy(&gc->lanes[i].mu);
		pthread_mutex_destroy(&gc->lanes[i].commit_mu);
		pthread_cond_destroy(&gc->lanes[i].cv);
		pthread_cond_destroy(&gc->lanes[i].arrive);
	}
	free(gc->lanes);
	free(gc);
	*gcp = NULL;
}

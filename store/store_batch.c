/* store_batch.c — owns group commit: batches of writes (a caller's function on a partition,
 * deliveries, queue additions) run in one write txn per partition (so one index fsync covers
 * them all); the group committer of a process (its committer thread, the persistent pool of
 * partition threads, the descriptor and dispatch call that hand results back to the caller's
 * loop); and store_deliver() built on them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
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

enum bop_type { BOP_DELIVER, BOP_ENQUEUE, BOP_WRITE };

struct bop {
	enum bop_type type;
	store_done_cb *cb;
	void *arg;
	int result;
	uint64_t value;
	struct store_blob *blob;
	int64_t internaldate;
	struct store_rcpt *rcpts; /* BOP_DELIVER */
	size_t n;
	unsigned *rcpt_part;       /* partition of each recipient (NO_PART: unknown user or a
				      duplicate, whose result is copied from dup[i]) */
	size_t *dup;               /* the first identical recipient, or SIZE_MAX */
	struct store_queue_msg qm; /* ENQUEUE: a deep copy, freed with the batch */
	unsigned part;             /* WRITE */
	int (*fn)(struct store_txn *t, void *arg);
	void *fn_arg;
	bool lazy; /* answered once committed, before the sync */
	bool called;
};

struct store_batch {
	struct store *st;
	struct bop *ops;
	size_t n, cap;
	/* the group committer's: the environments the batch wrote and the commit (gc_seq) of
	   each that must be durable before its callbacks run; lazy operations (flag changes)
	   may be answered before */
	bool *parts;
	uint64_t *seq;
	unsigned waited; /* batches committed after it while it waited */
	bool lazy_done;
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
		       int (*fn)(struct store_txn *t, void *arg), void *fn_arg, store_done_cb *cb,
		       void *arg)
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
	free(bt->parts);
	free(bt->seq);
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

struct special_find {
	unsigned use;
	uint64_t id;
};

static int special_cb(const struct store_mbox_info *mi, void *arg)
{
	struct special_find *f = arg;

	if (!(mi->special & f->use) ||
	    (mi->attrs & (STORE_MBOX_NONEXISTENT | STORE_MBOX_NOSELECT)))
		return 0;
	f->id = mi->id;
	return 1;
}

/* The user's mailbox of special use `use`, or a new one called name with that use (mtad's
   DMARC quarantine into \Junk). */
static int special_mbox(struct store_txn *t, uint64_t user, unsigned use, const char *name,
			uint64_t *id_r)
{
	struct special_find f = { use, 0 };
	int rc = store_mbox_list(t, user, "*", false, special_cb, &f);

	if (rc == 1) {
		*id_r = f.id;
		return 0;
	}
	if (rc != 0)
		return rc;
	if ((rc = store_mbox_find(t, user, name, id_r)) == 0)
		return 0; /* a mailbox of that name without the use: used as is */
	rc = store_mbox_create(t, user, name, use, id_r);
	return rc == STORE_EINVAL ? STORE_ENOMBOX : rc;
}

static int deliver_one(struct store_txn *t, struct bop *o, struct store_rcpt *r)
{
	struct store_user u;
	struct mbox_rec rec;
	uint64_t mbox;
	int rc;

	if ((rc = store_user_get(t, r->user, &u)) != 0)
		return rc;
	if (r->special != 0 && r->mailbox != NULL)
		rc = special_mbox(t, u.id, r->special, r->mailbox, &mbox);
	else
		rc = r->mailbox != NULL ? store_mbox_find(t, u.id, r->mailbox, &mbox)
					: STORE_ENOMBOX;
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
	if ((rc = store_blob_ref(t, o->blob)) != 0 ||
	    (rc = mbox_rec_store_what(t, mbox, &rec, STORE_WHAT_NEW)) != 0 ||
	    (rc = store_fts_add(t, mbox, r->uid, o->blob, rec.messages == 1)) != 0)
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

/* alone: o is the only operation of the batch in this partition; a function's failure then
   fails the partition's txn (nothing else is in it) instead of a nested one, which LMDB
   makes with about 3 MB of page lists, allocated and freed per txn. */
static int run_op(struct store_txn *t, struct bop *o, unsigned part, bool alone)
{
	int rc;

	switch (o->type) {
	case BOP_DELIVER: {
		const char *drop = NULL; /* a maildrop file's record (store_drop.c) */
		bool all = true;

		for (size_t i = 0; i < o->n; i++) {
			if (o->rcpt_part[i] != part)
				continue;
			rc = deliver_one(t, o, &o->rcpts[i]);
			o->rcpts[i].result = rc;
			if (txn_fatal(t, rc))
				return rc;
			all &= rc == 0;
			drop = o->rcpts[i].drop_key != NULL ? o->rcpts[i].drop_key : drop;
		}
		/* with the deliveries it stands for, or not at all */
		if (drop != NULL && all &&
		    (rc = store_drop_put_txn(t, drop, 0, STORE_DROP_DELIVERED)))
			return rc;
		return 0;
	}
	case BOP_ENQUEUE:
		if (part != STORE_QUEUE_PART)
			return 0;
		rc = store_queue_add_txn(t, &o->qm, o->blob, &o->value);
		o->result = rc;
		break;
	case BOP_WRITE:
		if (o->part != part)
			return 0;
		if (alone) {
			rc = o->fn(t, o->fn_arg);
			o->result = rc != 0 ? rc : t->failed ? t->err : 0;
			return o->result;
		}
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
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < pr->bt->n && n < 2; i++)
		n += op_touches(&pr->bt->ops[i], pr->part);
	for (size_t i = 0; i < pr->bt->n; i++) {
		struct bop *o = &pr->bt->ops[i];

		if (op_touches(o, pr->part) && (rc = run_op(t, o, pr->part, n == 1)) != 0)
			return rc;
	}
	return 0;
}

/* Sets every result of partition part to err (its commit failed); lazy_too: the lazy
   operations' too (else they are answered already: their sync failed after). */
static void part_failed_ops(struct store_batch *bt, unsigned part, int err, bool lazy_too)
{
	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (!op_touches(o, part) || (o->lazy && !lazy_too))
			continue;
		if (o->type == BOP_DELIVER) {
			for (size_t j = 0; j < o->n; j++)
				if (o->rcpt_part[j] == part)
					o->rcpts[j].result = err;
		} else
			o->result = err;
	}
}

static void part_failed(struct store_batch *bt, unsigned part, int err)
{
	part_failed_ops(bt, part, err, true);
}

static void part_failed_durable(struct store_batch *bt, unsigned part, int err)
{
	part_failed_ops(bt, part, err, false);
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
		case BOP_ENQUEUE:
			parts[bt->st->nparts] = true;
			break;
		case BOP_WRITE:
			if (o->part < bt->st->nparts)
				parts[o->part] = true;
			else if (o->part == STORE_QUEUE_PART) /* the queue's txn */
				parts[bt->st->nparts] = true;
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

static void fts_job(void *arg, size_t i)
{
	store_fts_prepare(((struct store_blob **)arg)[i]);
}

/* The full-text index's work that needs no txn: each new message's trigrams, read from its
   file on the pool's threads before the partitions' txns take their write locks. */
static void prepare_fts(struct store_batch *bt)
{
	struct store_blob **v;
	size_t n = 0;

	if (!bt->st->fts)
		return;
	v = xcalloc(bt->n + 1, sizeof(*v));
	for (size_t i = 0; i < bt->n; i++) {
		struct store_blob *b = bt->ops[i].blob;
		bool seen = false;

		if (b == NULL || bt->ops[i].type == BOP_ENQUEUE || b->fts != NULL)
			continue;
		for (size_t j = 0; j < n && !seen; j++)
			seen = v[j] == b;
		if (!seen)
			v[n++] = b;
	}
	store_pool_run(bt->st->pool, fts_job, v, n);
	free(v);
}

static void part_job(void *arg, size_t i)
{
	struct part_run *pr = (struct part_run *)arg + i;

	pr->rc = pr->bt->parts != NULL ? store_write_deferred(pr->bt->st, pr->part, part_fn, pr)
				       : store_write(pr->bt->st, pr->part, part_fn, pr);
}

/* One write txn per partition touched, the partitions in parallel on the store's pool of
   persistent threads when it has one (their environments are independent, so their fsyncs
   overlap), else one after the other in this thread. */
static void commit_parts(struct store_batch *bt, const bool *parts)
{
	struct store *st = bt->st;
	struct part_run *pr = xcalloc(st->nparts + 1, sizeof(*pr));
	size_t n = 0;

	for (unsigned p = 0; p <= st->nparts; p++) {
		if (!parts[p])
			continue;
		pr[n].bt = bt;
		pr[n++].part = p == st->nparts ? STORE_QUEUE_PART : p;
	}
	store_pool_run(st->pool, part_job, pr, n);
	for (size_t i = 0; i < n; i++)
		if (pr[i].rc != 0)
			part_failed(bt, pr[i].part, pr[i].rc);
	free(pr);
}

/* The commit itself: LMDB and fsyncs, no callback (the group committer's thread runs it). */
/* The commit itself. deferred: the group committer's (bt->parts kept, the meta pages left
   to gc_sync). */
static void batch_run(struct store_batch *bt, bool deferred)
{
	struct store *st = bt->st;
	bool *parts = xcalloc(st->nparts + 1, sizeof(*parts));

	locate_rcpts(bt, parts);
	prepare_blobs(bt);
	prepare_fts(bt);
	if (deferred)
		bt->parts = parts;
	commit_parts(bt, parts);
	if (!deferred)
		free(parts);
}

/* The lazy operations' callbacks (they are committed; their sync may be to come). */
static void batch_lazy(struct store_batch *bt)
{
	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (o->lazy && !o->called) {
			o->called = true;
			if (o->cb != NULL)
				o->cb(o->result, o->rcpts, o->n, o->value, o->arg);
		}
	}
}

/* The results of a run batch to its producers, in queue order; frees it. */
static size_t batch_finish(struct store_batch **btp)
{
	struct store_batch *bt = *btp;
	size_t failed = 0;

	for (size_t i = 0; i < bt->n; i++) {
		struct bop *o = &bt->ops[i];

		if (o->called) {
			failed += o->result != 0;
			continue;
		}

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
	batch_run(*btp, false);
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
/* The pool: persistent threads that run the partitions of a batch (and the fsyncs of its
   message files) in parallel, so no thread is created per batch. One job at a time: only
   the committer thread uses it. */

struct store_pool {
	pthread_mutex_t mu;
	pthread_cond_t job, idle;
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n, next, running;
	uint64_t gen; /* bumped for each job */
	bool stop;
	bool serial; /* store_gc_inline: every job in the caller's thread */
	unsigned nthreads;
	pthread_t *threads;
};

/* Takes items of the current job until none is left. Called with mu held. */
static void pool_work(struct store_pool *p)
{
	while (p->next < p->n) {
		size_t i = p->next++;

		p->running++;
		pthread_mutex_unlock(&p->mu);
		p->fn(p->arg, i);
		pthread_mutex_lock(&p->mu);
		if (--p->running == 0 && p->next >= p->n)
			pthread_cond_broadcast(&p->idle);
	}
}

static void *pool_thread(void *arg)
{
	struct store_pool *p = arg;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->gen == seen)
			pthread_cond_wait(&p->job, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		pool_work(p);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Threads take no signal: the daemons' handlers run in their loops. */
static struct store_pool *pool_new(unsigned nthreads)
{
	struct store_pool *p = xcalloc(1, sizeof(*p));
	sigset_t all, old;

	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->job, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->threads = xcalloc(nthreads + 1, sizeof(*p->threads));
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < nthreads; i++) {
		if (pthread_create(&p->threads[p->nthreads], NULL, pool_thread, p) != 0)
			break; /* fewer threads: the caller's takes the rest */
		p->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p;
}

static void pool_free(struct store_pool **pp)
{
	struct store_pool *p = *pp;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->job);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->job);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
	*pp = NULL;
}

void store_pool_run(struct store_pool *p, void (*fn)(void *arg, size_t i), void *arg, size_t n)
{
	if (p == NULL || p->nthreads == 0 || p->serial || n < 2) {
		for (size_t i = 0; i < n; i++)
			fn(arg, i);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	p->next = 0;
	p->gen++;
	pthread_cond_broadcast(&p->job);
	pool_work(p); /* this thread works too */
	while (p->running > 0 || p->next < p->n)
		pthread_cond_wait(&p->idle, &p->mu);
	p->n = 0;
	pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------------------------------- */
/* The group committer. Producers (the daemon's loop) queue operations; the committer
   thread takes what is pending as one batch, runs it (LMDB and every fsync), and puts it on
   the done list; the eventfd says so, and store_gc_dispatch (in the loop) runs the
   callbacks. What queues while a commit runs is the next batch (the classic group commit).
   An idle committer that gets an operation commits at once when the previous batch held
   one (a lone producer waits for nothing), else it waits up to group_commit_ms for as many
   operations as the previous batch and those queued during it held (or
   group_commit_max). */

struct store_gc {
	struct store *st;
	pthread_mutex_t mu;
	pthread_cond_t work; /* an operation was queued, or stop */
	pthread_cond_t idle; /* a batch is done */
	struct store_batch *pending;
	struct gc_done {
		struct store_batch *bt;
		bool final; /* else only its lazy operations are ready */
	} * done;           /* committed, callbacks not run yet */
	size_t ndone, capdone;
	size_t expect; /* operations of the previous batch and its followers */
	bool busy, stop, threaded;
	bool inline_commit; /* store_gc_inline */
	pthread_t thread;
	int efd; /* eventfd: readable while done batches wait */
	struct store_pool *pool;
	atomic_uint_fast64_t ops, commits;
};

/* Waits (mu held) for company when the committer is idle and the last batch was shared. */
static void gc_gather(struct store_gc *gc)
{
	struct timespec until;
	size_t want = gc->expect < gc->st->gc_max ? gc->expect : gc->st->gc_max;

	if (want <= 1 || gc->st->gc_ms <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(gc->st->gc_ms % 1000) * 1000000;
	until.tv_sec += gc->st->gc_ms / 1000 + until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	while (!gc->stop && store_batch_count(gc->pending) < want)
		if (pthread_cond_timedwait(&gc->work, &gc->mu, &until) != 0)
			break;
}

/* A batch for store_gc_dispatch: its lazy operations' callbacks (final false), or all the
   others' and the batch freed (final). Called with mu held. */
static void gc_done_push(struct store_gc *gc, struct store_batch *bt, bool final)
{
	uint64_t one = 1;

	if (gc->ndone == gc->capdone)
		gc->done = xreallocarray(gc->done, gc->capdone = gc->capdone * 2 + 4,
					 sizeof(*gc->done));
	gc->done[gc->ndone].bt = bt;
	gc->done[gc->ndone++].final = final;
	if (write(gc->efd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		log_warn("store: group commit notify");
}

static unsigned env_index_part(const struct store *st, unsigned i)
{
	return i == st->nparts ? STORE_QUEUE_PART : i;
}

/* Every environment the batch wrote has its commit's meta page durable. */
static bool batch_durable(const struct store_batch *bt)
{
	struct store *st = bt->st;

	for (unsigned i = 0; i <= st->nparts; i++) {
		struct store_env *e = store_env_of((struct store *)(uintptr_t)st,
						   env_index_part(st, i));

		if (bt->parts[i] && atomic_load(&e->gc_durable) < bt->seq[i])
			return false;
	}
	return true;
}

struct env_sync {
	struct store *st;
	unsigned part;
	int rc;
};

static void env_sync_job(void *arg, size_t i)
{
	struct env_sync *es = (struct env_sync *)arg + i;

	es->rc = store_env_sync(es->st, es->part);
}

/* Syncs (in parallel) the environments the waiting batches still need: all of them when no
   batch follows (all), else those of batches that waited through one already (the next
   commit's data sync covers the environments it writes, for free). A failed sync fails the
   operations of that environment. */
static void gc_sync(struct store_gc *gc, struct store_batch **w, size_t nw, bool all)
{
	struct store *st = gc->st;
	struct env_sync *es = xcalloc(st->nparts + 1, sizeof(*es));
	size_t n = 0;

	for (unsigned i = 0; i <= st->nparts; i++) {
		struct store_env *e = store_env_of(st, env_index_part(st, i));
		bool need = false;

		for (size_t k = 0; k < nw && !need; k++)
			need = (all || w[k]->waited > 0) && w[k]->parts[i] &&
			       atomic_load(&e->gc_durable) < w[k]->seq[i];
		if (need)
			es[n++] = (struct env_sync){ st, env_index_part(st, i), 0 };
	}
	store_pool_run(gc->pool, env_sync_job, es, n);
	for (size_t j = 0; j < n; j++) {
		if (es[j].rc == 0)
			continue;
		for (size_t k = 0; k < nw; k++) /* their commit may not be durable: not OK */
			part_failed_durable(w[k], es[j].part, es[j].rc);
		/* counted as synced so that they are answered (with the error) */
		struct store_env *e = store_env_of(st, es[j].part);

		atomic_store(&e->gc_durable, atomic_load(&e->gc_seq));
	}
	free(es);
}

/* After batch_run: what each environment's commit number was (bt->seq). */
static void batch_seqs(struct store_batch *bt)
{
	struct store *st = bt->st;

	bt->seq = xcalloc(st->nparts + 1, sizeof(*bt->seq));
	for (unsigned i = 0; i <= st->nparts; i++)
		if (bt->parts[i])
			bt->seq[i] = atomic_load(&store_env_of(st, env_index_part(st, i))->gc_seq);
}

static bool batch_has_lazy(const struct store_batch *bt)
{
	for (size_t i = 0; i < bt->n; i++)
		if (bt->ops[i].lazy)
			return true;
	return false;
}

static void *gc_thread(void *arg)
{
	struct store_gc *gc = arg;
	struct store_batch **w = NULL; /* committed, waiting for their sync */
	size_t nw = 0, capw = 0;

	pthread_mutex_lock(&gc->mu);
	for (;;) {
		struct store_batch *bt;
		size_t n, k = 0;
		bool more;

		while (!gc->stop && gc->pending == NULL)
			pthread_cond_wait(&gc->work, &gc->mu);
		if (gc->pending == NULL)
			break; /* stop, nothing left (nothing waits: see below) */
		gc_gather(gc);
		bt = gc->pending;
		gc->pending = NULL;
		gc->busy = true;
		pthread_mutex_unlock(&gc->mu);
		n = store_batch_count(bt);
		batch_run(bt, true);
		batch_seqs(bt);
		atomic_fetch_add(&gc->ops, n);
		atomic_fetch_add(&gc->commits, 1);
		for (size_t i = 0; i < nw; i++)
			w[i]->waited++;
		if (nw == capw)
			w = xreallocarray(w, capw = capw * 2 + 4, sizeof(*w));
		w[nw++] = bt;
		pthread_mutex_lock(&gc->mu);
		more = gc->pending != NULL;
		if (batch_has_lazy(bt))
			gc_done_push(gc, bt, false);
		pthread_mutex_unlock(&gc->mu);
		gc_sync(gc, w, nw, !more);
		pthread_mutex_lock(&gc->mu);
		for (size_t i = 0; i < nw; i++) {
			if (batch_durable(w[i]))
				gc_done_push(gc, w[i], true);
			else
				w[k++] = w[i];
		}
		nw = k;
		gc->busy = nw > 0;
		gc->expect = n + (gc->pending != NULL ? store_batch_count(gc->pending) : 0);
		pthread_cond_broadcast(&gc->idle);
	}
	pthread_mutex_unlock(&gc->mu);
	free(w);
	return NULL;
}

int store_gc_new(struct store *st, struct store_gc **gc_r)
{
	struct store_gc *gc = xcalloc(1, sizeof(*gc));
	pthread_condattr_t ca;
	sigset_t all, old;
	int rc;

	*gc_r = NULL;
	gc->st = st;
	if ((gc->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		log_warn("store: eventfd");
		free(gc);
		return STORE_EIO;
	}
	pthread_mutex_init(&gc->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gc->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&gc->idle, NULL);
	/* one thread per environment a batch may touch (partitions and the queue), up to 8:
	   their fsyncs overlap */
	gc->pool = pool_new(st->nparts + 1 < 8 ? st->nparts + 1 : 8);
	if (st->pool == NULL)
		st->pool = gc->pool;
	/* the committer syncs the meta pages itself (gc_sync): a batch written right after
	   another makes the other durable with its own data sync */
	for (unsigned i = 0; i <= st->nparts; i++)
		store_env_nometasync(st, env_index_part(st, i), true);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&gc->thread, NULL, gc_thread, gc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_warnx("store: group commit thread: %s", strerror(rc));
		store_gc_free(&gc); /* no thread to join (threaded is false) */
		return STORE_EIO;
	}
	gc->threaded = true;
	*gc_r = gc;
	return 0;
}

int store_gc_fd(const struct store_gc *gc)
{
	return gc->efd;
}

/* Runs the callbacks of every batch the committer finished (the caller's thread). */
static size_t gc_reap(struct store_gc *gc)
{
	struct gc_done *v;
	size_t n;
	uint64_t cnt;

	if (read(gc->efd, &cnt, sizeof(cnt)) == -1 && errno != EAGAIN)
		log_warn("store: group commit eventfd");
	pthread_mutex_lock(&gc->mu);
	v = gc->done;
	n = gc->ndone;
	gc->done = NULL;
	gc->ndone = gc->capdone = 0;
	pthread_mutex_unlock(&gc->mu);
	for (size_t i = 0; i < n; i++) {
		if (v[i].final)
			batch_finish(&v[i].bt);
		else
			batch_lazy(v[i].bt);
	}
	free(v);
	return n;
}

void store_gc_dispatch(struct store_gc *gc)
{
	(void)gc_reap(gc);
}

static struct store_batch *gc_pending(struct store_gc *gc)
{
	if (gc->pending == NULL)
		gc->pending = store_batch_new(gc->st);
	return gc->pending;
}

/* store_gc_inline: what gc_thread does with one batch, in the submitting thread (mu held on
   entry, released). The committer thread never sees a pending batch. */
static void gc_commit_here(struct store_gc *gc)
{
	struct store_batch *bt = gc->pending;
	size_t n = store_batch_count(bt);

	gc->pending = NULL;
	pthread_mutex_unlock(&gc->mu);
	batch_run(bt, true);
	batch_seqs(bt);
	atomic_fetch_add(&gc->ops, n);
	atomic_fetch_add(&gc->commits, 1);
	if (batch_has_lazy(bt)) {
		pthread_mutex_lock(&gc->mu);
		gc_done_push(gc, bt, false);
		pthread_mutex_unlock(&gc->mu);
	}
	gc_sync(gc, &bt, 1, true); /* a failed sync counts as synced: durable either way */
	pthread_mutex_lock(&gc->mu);
	gc_done_push(gc, bt, true);
	pthread_mutex_unlock(&gc->mu);
}

static void gc_queued(struct store_gc *gc)
{
	if (gc->inline_commit) {
		gc_commit_here(gc);
		return;
	}
	pthread_cond_signal(&gc->work);
	pthread_mutex_unlock(&gc->mu);
}

void store_gc_inline(struct store_gc *gc)
{
	store_gc_flush(gc);
	pthread_mutex_lock(&gc->mu);
	gc->inline_commit = true;
	gc->pool->serial = true;
	if (gc->st->pool != NULL)
		gc->st->pool->serial = true; /* batch_run's */
	pthread_mutex_unlock(&gc->mu);
}

void store_gc_submit(struct store_gc *gc, unsigned part, struct store_blob *b,
		     int (*fn)(struct store_txn *t, void *arg), void *fn_arg, store_done_cb *cb,
		     void *arg)
{
	pthread_mutex_lock(&gc->mu);
	store_batch_write(gc_pending(gc), part, b, fn, fn_arg, cb, arg);
	gc_queued(gc);
}

void store_gc_submit_flags(struct store_gc *gc, unsigned part,
			   int (*fn)(struct store_txn *t, void *arg), void *fn_arg,
			   store_done_cb *cb, void *arg)
{
	struct store_batch *bt;

	pthread_mutex_lock(&gc->mu);
	bt = gc_pending(gc);
	store_batch_write(bt, part, NULL, fn, fn_arg, cb, arg);
	bt->ops[bt->n - 1].lazy = !gc->st->fsync_flags;
	gc_queued(gc);
}

void store_gc_deliver(struct store_gc *gc, struct store_blob *b, int64_t internaldate,
		      struct store_rcpt *rcpts, size_t n, store_done_cb *cb, void *arg)
{
	pthread_mutex_lock(&gc->mu);
	store_batch_deliver(gc_pending(gc), b, internaldate, rcpts, n, cb, arg);
	gc_queued(gc);
}

void store_gc_enqueue(struct store_gc *gc, const struct store_queue_msg *qm, struct store_blob *b,
		      store_done_cb *cb, void *arg)
{
	pthread_mutex_lock(&gc->mu);
	store_batch_enqueue(gc_pending(gc), qm, b, cb, arg);
	gc_queued(gc);
}

void store_gc_flush(struct store_gc *gc)
{
	for (;;) {
		pthread_mutex_lock(&gc->mu);
		while (gc->pending != NULL || gc->busy)
			pthread_cond_wait(&gc->idle, &gc->mu);
		pthread_mutex_unlock(&gc->mu);
		/* callbacks may queue more: until nothing is left */
		if (gc_reap(gc) == 0)
			break;
	}
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
	pthread_mutex_lock(&gc->mu);
	gc->stop = true;
	pthread_cond_signal(&gc->work);
	pthread_mutex_unlock(&gc->mu);
	if (gc->threaded)
		pthread_join(gc->thread, NULL);
	if (gc->st->pool == gc->pool)
		gc->st->pool = NULL;
	pool_free(&gc->pool);
	for (unsigned i = 0; i <= gc->st->nparts; i++)
		store_env_nometasync(gc->st, env_index_part(gc->st, i), false);
	close(gc->efd);
	pthread_cond_destroy(&gc->work);
	pthread_cond_destroy(&gc->idle);
	pthread_mutex_destroy(&gc->mu);
	free(gc->done);
	free(gc);
	*gcp = NULL;
}

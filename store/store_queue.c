/* store_queue.c — owns the outbound queue (mtad's relay): entries with sender, DSN parameters
 * and per-recipient state in queue/index.mdb, a due index (time, id) for leasing, and the
 * entry's message file in queue/blobs (one blob reference per entry). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define QREC_FIXED 46 /* created 8, size 8, blob 8, flags 1, ret 1, lease 8, due 8, nrcpt 4 */
#define QREC_HELD 0x01
#define QREC_REQUIRETLS 0x02 /* a binary without it reads the entry as held: never sent */
#define QREC_MAX (16u << 20)
#define QSTR_MAX 4096
/* After the recipients, optional trailers: 'O' and the lease owner (be32); then 'T', a be16
   count and the tries (rcpt be32, when be64, state 1, reason string), oldest first. A binary
   that does not know one reads the record without it (and writes it back without). */
#define QREC_OWNER_TAG 'O'
#define QREC_TRIES_TAG 'T'
#define QTRY_MAX 32         /* the most recent tries kept per entry */
#define QTRY_REASON_MAX 512 /* bytes of a try's reason kept */

struct qrec {
	struct store_queue_msg m;
	int64_t due; /* the due row's time, 0 = none */
	struct store_queue_try *tries;
	size_t ntries;
};

static int qput_str(struct buf *b, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	uint8_t l[2];

	if (n > QSTR_MAX)
		n = QSTR_MAX;
	put_be16(l, s != NULL ? (uint16_t)(n + 1) : 0); /* 0 = NULL, else length + 1 */
	if (buf_append(b, l, 2) < 0 || (n > 0 && buf_append(b, s, n) < 0))
		return -1;
	return 0;
}

static int qtries_encode(const struct qrec *q, struct buf *b)
{
	uint8_t h[3] = { QREC_TRIES_TAG };

	put_be16(h + 1, (uint16_t)q->ntries);
	if (buf_append(b, h, sizeof(h)) < 0)
		return -1;
	for (size_t i = 0; i < q->ntries; i++) {
		const struct store_queue_try *t = &q->tries[i];
		uint8_t f[13];

		put_be32(f, (uint32_t)t->rcpt);
		put_be64(f + 4, (uint64_t)t->when);
		f[12] = (uint8_t)t->state;
		if (buf_append(b, f, sizeof(f)) < 0 || qput_str(b, t->reason) < 0)
			return -1;
	}
	return 0;
}

static int qrec_encode(const struct qrec *q, struct buf *b)
{
	uint8_t f[QREC_FIXED];
	const struct store_queue_msg *m = &q->m;

	put_be64(f, (uint64_t)m->created);
	put_be64(f + 8, m->size);
	put_be64(f + 16, m->blob);
	f[24] = (uint8_t)((m->held ? QREC_HELD : 0) | (m->requiretls ? QREC_REQUIRETLS : 0));
	f[25] = (uint8_t)m->ret;
	put_be64(f + 26, (uint64_t)m->lease_until);
	put_be64(f + 34, (uint64_t)q->due);
	put_be32(f + 42, (uint32_t)m->nrcpt);
	if (buf_append(b, f, sizeof(f)) < 0 || qput_str(b, m->sender) < 0 ||
	    qput_str(b, m->envid) < 0)
		return -1;
	for (size_t i = 0; i < m->nrcpt; i++) {
		const struct store_queue_rcpt *r = &m->rcpt[i];
		uint8_t rf[14];

		rf[0] = (uint8_t)r->state;
		rf[1] = (uint8_t)r->notify;
		put_be32(rf + 2, r->attempts);
		put_be64(rf + 6, (uint64_t)r->next_attempt);
		if (buf_append(b, rf, sizeof(rf)) < 0 || qput_str(b, r->addr) < 0 ||
		    qput_str(b, r->orcpt) < 0 || qput_str(b, r->last_error) < 0)
			return -1;
	}
	if (m->lease_until != 0 && m->lease_owner != 0) {
		uint8_t o[5] = { QREC_OWNER_TAG };

		put_be32(o + 1, m->lease_owner);
		if (buf_append(b, o, sizeof(o)) < 0)
			return -1;
	}
	return q->ntries > 0 ? qtries_encode(q, b) : 0;
}

static int qget_str(const uint8_t **p, const uint8_t *end, char **out)
{
	uint16_t l;

	if (end - *p < 2)
		return -1;
	l = get_be16(*p);
	*p += 2;
	if (l == 0) {
		*out = NULL;
		return 0;
	}
	if (end - *p < l - 1)
		return -1;
	*out = xmemdup0(*p, l - 1u);
	*p += l - 1;
	return 0;
}

void store_queue_tries_free(struct store_queue_try **vp, size_t n)
{
	for (size_t i = 0; i < n && *vp != NULL; i++)
		free((char *)(uintptr_t)(*vp)[i].reason);
	free(*vp);
	*vp = NULL;
}

static void qrec_clear(struct qrec *q)
{
	store_queue_msg_clear(&q->m);
	store_queue_tries_free(&q->tries, q->ntries);
	q->ntries = 0;
}

/* The 'T' trailer at *p; a damaged one is dropped (the tries are a record, not state). */
static void qtries_decode(const uint8_t *p, const uint8_t *end, struct qrec *q)
{
	size_t n;

	if (end - p < 3 || p[0] != QREC_TRIES_TAG)
		return;
	n = get_be16(p + 1);
	p += 3;
	if (n > QTRY_MAX * 2)
		return;
	q->tries = xcalloc(n + 1, sizeof(*q->tries));
	for (q->ntries = 0; q->ntries < n; q->ntries++) {
		struct store_queue_try *t = &q->tries[q->ntries];
		char *r;

		if (end - p < 13)
			break;
		t->rcpt = get_be32(p);
		t->when = (int64_t)get_be64(p + 4);
		t->state = (enum store_rcpt_state)p[12];
		p += 13;
		if (qget_str(&p, end, &r) < 0)
			break;
		t->reason = r;
	}
}

void store_queue_msg_clear(struct store_queue_msg *m)
{
	free((char *)(uintptr_t)m->sender);
	free((char *)(uintptr_t)m->envid);
	for (size_t i = 0; i < m->nrcpt && m->rcpt != NULL; i++) {
		free((char *)(uintptr_t)m->rcpt[i].addr);
		free((char *)(uintptr_t)m->rcpt[i].orcpt);
		free((char *)(uintptr_t)m->rcpt[i].last_error);
	}
	free(m->rcpt);
	memset(m, 0, sizeof(*m));
}

static int qrec_decode(uint64_t id, const MDB_val *v, struct qrec *q)
{
	const uint8_t *p = v->mv_data, *end = p + v->mv_size;
	struct store_queue_msg *m = &q->m;
	char *s1 = NULL, *s2 = NULL;

	memset(q, 0, sizeof(*q));
	if (v->mv_size < QREC_FIXED)
		return STORE_ECORRUPT;
	m->id = id;
	m->created = (int64_t)get_be64(p);
	m->size = get_be64(p + 8);
	m->blob = get_be64(p + 16);
	m->held = (p[24] & QREC_HELD) != 0;
	m->requiretls = (p[24] & QREC_REQUIRETLS) != 0;
	m->ret = (enum store_ret)p[25];
	m->lease_until = (int64_t)get_be64(p + 26);
	q->due = (int64_t)get_be64(p + 34);
	size_t n = get_be32(p + 42);
	p += QREC_FIXED;
	if (n > v->mv_size / 14 || qget_str(&p, end, &s1) < 0 || qget_str(&p, end, &s2) < 0)
		goto bad;
	m->sender = s1 != NULL ? s1 : xstrdup("");
	m->envid = s2;
	m->rcpt = xcalloc(n + 1, sizeof(*m->rcpt));
	for (m->nrcpt = 0; m->nrcpt < n; m->nrcpt++) {
		struct store_queue_rcpt *r = &m->rcpt[m->nrcpt];
		char *a, *o, *e;

		if (end - p < 14)
			goto bad;
		r->state = (enum store_rcpt_state)p[0];
		r->notify = p[1];
		r->attempts = get_be32(p + 2);
		r->next_attempt = (int64_t)get_be64(p + 6);
		p += 14;
		a = o = e = NULL;
		if (qget_str(&p, end, &a) < 0 || qget_str(&p, end, &o) < 0 ||
		    qget_str(&p, end, &e) < 0) {
			free(a);
			free(o);
			goto bad;
		}
		r->addr = a != NULL ? a : xstrdup("");
		r->orcpt = o;
		r->last_error = e;
	}
	if (end - p >= 5 && p[0] == QREC_OWNER_TAG) {
		m->lease_owner = get_be32(p + 1);
		p += 5;
	}
	qtries_decode(p, end, q);
	return 0;
bad:
	if (m->sender == NULL)
		free(s1);
	if (m->envid == NULL)
		free(s2);
	store_queue_msg_clear(m);
	return STORE_ECORRUPT;
}

static void due_key(uint8_t k[16], int64_t when, uint64_t id)
{
	put_be64(k, (uint64_t)when);
	put_be64(k + 8, id);
}

static int qrec_load(struct store_txn *t, uint64_t id, struct qrec *q)
{
	uint8_t k[8];
	MDB_val v;
	int rc;

	put_be64(k, id);
	if ((rc = store_get(t, DBI_QUEUE, k, 8, &v)) != 0)
		return rc == STORE_ENOMSG ? STORE_ENOQUEUE : rc;
	return qrec_decode(id, &v, q);
}

/* Writes the record, moving its due row to `due` (0 = none). */
static int qrec_store(struct store_txn *t, struct qrec *q, int64_t due)
{
	struct buf b;
	uint8_t k[16];
	int rc;

	if (q->due != 0) {
		due_key(k, q->due, q->m.id);
		rc = store_del(t, DBI_DUE, k, 16);
		if (rc != 0 && rc != STORE_ENOMSG)
			return rc;
	}
	q->due = due;
	if (due != 0) {
		due_key(k, due, q->m.id);
		if ((rc = store_put(t, DBI_DUE, k, 16, "", 0)) != 0)
			return rc;
	}
	buf_init(&b, 256, QREC_MAX);
	if (qrec_encode(q, &b) < 0) {
		buf_release(&b);
		return STORE_EINVAL;
	}
	put_be64(k, q->m.id);
	rc = store_put(t, DBI_QUEUE, k, 8, b.data, b.len);
	buf_release(&b);
	return rc;
}

/* When the entry is due: the earliest attempt of a pending recipient; 0 when none/held. */
static int64_t qrec_next_due(const struct qrec *q)
{
	int64_t due = 0;

	if (q->m.held)
		return 0;
	for (size_t i = 0; i < q->m.nrcpt; i++) {
		const struct store_queue_rcpt *r = &q->m.rcpt[i];
		int64_t when = r->next_attempt > 0 ? r->next_attempt : 1;

		if (r->state == STORE_Q_PENDING && (due == 0 || when < due))
			due = when;
	}
	return due;
}

int store_queue_add_txn(struct store_txn *t, const struct store_queue_msg *qm,
			const struct store_blob *b, uint64_t *id_r)
{
	struct qrec q = { 0 };
	int64_t now = time(NULL);
	int rc;

	if (qm->nrcpt == 0 || qm->rcpt == NULL || t->e->part != STORE_QUEUE_PART)
		return STORE_EINVAL;
	if ((rc = store_next_id(t, &q.m.id)) != 0 || (rc = store_blob_ref(t, b)) != 0)
		return rc;
	q.m.sender = qm->sender != NULL ? qm->sender : "";
	q.m.envid = qm->envid;
	q.m.ret = qm->ret;
	q.m.requiretls = qm->requiretls;
	q.m.held = qm->held;
	q.m.created = qm->created != 0 ? qm->created : now;
	q.m.size = store_blob_size(b);
	q.m.blob = store_blob_id(b);
	q.m.nrcpt = qm->nrcpt;
	q.m.rcpt = xcalloc(qm->nrcpt, sizeof(*q.m.rcpt));
	for (size_t i = 0; i < qm->nrcpt; i++) {
		q.m.rcpt[i].addr = qm->rcpt[i].addr;
		q.m.rcpt[i].orcpt = qm->rcpt[i].orcpt;
		q.m.rcpt[i].notify = qm->rcpt[i].notify;
		q.m.rcpt[i].next_attempt = now;
	}
	rc = qrec_store(t, &q, q.m.held ? 0 : now);
	free(q.m.rcpt);
	if (rc == 0 && id_r != NULL)
		*id_r = q.m.id;
	return rc;
}

struct qadd {
	const struct store_queue_msg *qm;
	const struct store_blob *b;
	uint64_t id;
};

static int qadd_fn(struct store_txn *t, void *arg)
{
	struct qadd *a = arg;

	return store_queue_add_txn(t, a->qm, a->b, &a->id);
}

int store_queue_add(struct store *st, const struct store_queue_msg *qm, const struct store_blob *b,
		    uint64_t *id_r)
{
	struct qadd a = { qm, b, 0 };
	int rc = store_write(st, STORE_QUEUE_PART, qadd_fn, &a);

	if (rc == 0 && id_r != NULL)
		*id_r = a.id;
	return rc;
}

struct store_queue_lease {
	int64_t now, lease_s;
	size_t max;
	struct qrec *got;
	size_t n;
	uint32_t owner;
};

static void qlease_reset(struct store_queue_lease *l)
{
	for (size_t i = 0; i < l->n; i++)
		qrec_clear(&l->got[i]);
	l->n = 0;
}

struct store_queue_lease *store_queue_lease_new(uint32_t owner, int64_t now, int64_t lease_s,
						size_t max)
{
	struct store_queue_lease *l = xcalloc(1, sizeof(*l));

	l->owner = owner;
	l->now = now;
	l->lease_s = lease_s;
	l->max = max < 256 ? max : 256;
	l->got = xcalloc(l->max + 1, sizeof(*l->got));
	return l;
}

size_t store_queue_lease_count(const struct store_queue_lease *l)
{
	return l->n;
}

const struct store_queue_msg *store_queue_lease_msg(const struct store_queue_lease *l, size_t i)
{
	return i < l->n ? &l->got[i].m : NULL;
}

void store_queue_lease_free(struct store_queue_lease **lp)
{
	if (*lp == NULL)
		return;
	qlease_reset(*lp);
	free((*lp)->got);
	free(*lp);
	*lp = NULL;
}

int store_queue_lease_fn(struct store_txn *t, void *arg)
{
	struct store_queue_lease *l = arg;
	uint64_t ids[256];
	size_t nids = 0;
	MDB_cursor *c;
	MDB_val k, v;
	int rc, op = MDB_FIRST;

	qlease_reset(l);
	if (t->e->part != STORE_QUEUE_PART)
		return STORE_EINVAL;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_DUE], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while (nids < l->max && nids < 256 && mdb_cursor_get(c, &k, &v, op) == 0) {
		op = MDB_NEXT;
		if (k.mv_size != 16 || (int64_t)get_be64(k.mv_data) > l->now)
			break;
		ids[nids++] = get_be64((uint8_t *)k.mv_data + 8);
	}
	mdb_cursor_close(c);
	for (size_t i = 0; i < nids; i++) {
		struct qrec *q = &l->got[l->n];

		if ((rc = qrec_load(t, ids[i], q)) != 0)
			return rc == STORE_ECORRUPT ? 0 : rc;
		q->m.lease_until = l->now + l->lease_s;
		q->m.lease_owner = l->owner;
		if ((rc = qrec_store(t, q, q->m.lease_until)) != 0) {
			qrec_clear(q);
			return rc;
		}
		l->n++;
	}
	return 0;
}

bool store_queue_any_due(struct store *st, int64_t now)
{
	struct store_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	bool due = true; /* when in doubt, the lease's write txn decides */
	int rc;

	if (store_txn_begin(st, STORE_QUEUE_PART, STORE_TXN_READ, &t) != 0)
		return true;
	if (mdb_cursor_open(t->txn, t->e->dbi[DBI_DUE], &c) == 0) {
		rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		if (rc == MDB_NOTFOUND)
			due = false;
		else if (rc == 0 && k.mv_size == 16)
			due = (int64_t)get_be64(k.mv_data) <= now;
		mdb_cursor_close(c);
	}
	store_txn_abort(&t);
	return due;
}

int store_queue_lease(struct store *st, int64_t now, int64_t lease_s, size_t max,
		      void (*cb)(const struct store_queue_msg *qm, void *arg), void *arg,
		      size_t *n_r)
{
	return store_queue_lease_as(st, 0, now, lease_s, max, cb, arg, n_r);
}

int store_queue_lease_as(struct store *st, uint32_t owner, int64_t now, int64_t lease_s,
			 size_t max, void (*cb)(const struct store_queue_msg *qm, void *arg),
			 void *arg, size_t *n_r)
{
	struct store_queue_lease *l = store_queue_lease_new(owner, now, lease_s, max);
	int rc = store_write(st, STORE_QUEUE_PART, store_queue_lease_fn, l);

	*n_r = 0;
	if (rc == 0) {
		for (size_t i = 0; i < l->n; i++)
			cb(&l->got[i].m, arg);
		*n_r = l->n;
	}
	store_queue_lease_free(&l);
	return rc;
}

struct qupdate {
	uint64_t id;
	size_t idx;
	enum store_rcpt_state state;
	int64_t next_attempt;
	const char *error;
	int what;                                                  /* enum qop */
	int (*match)(const struct store_queue_msg *qm, void *arg); /* id 0: which entries */
	void *arg;
	size_t n; /* entries changed */
};

enum qop { Q_RCPT, Q_UNLEASE, Q_HOLD, Q_RELEASE, Q_FLUSH, Q_DELETE, Q_REQUEUE };

/* Records a try of recipient idx (the QTRY_MAX most recent are kept). */
static void qtry_add(struct qrec *q, size_t idx, int64_t now, enum store_rcpt_state state,
		     const char *reason)
{
	struct store_queue_try *t;

	if (q->ntries == QTRY_MAX) {
		free((char *)(uintptr_t)q->tries[0].reason);
		memmove(q->tries, q->tries + 1, (QTRY_MAX - 1) * sizeof(*q->tries));
		q->ntries--;
	}
	q->tries = xreallocarray(q->tries, q->ntries + 1, sizeof(*q->tries));
	t = &q->tries[q->ntries++];
	t->rcpt = idx;
	t->when = now;
	t->state = state;
	t->reason = reason != NULL ? xstrndup(reason, QTRY_REASON_MAX) : NULL;
}

/* Pending recipients due now; requeue: as if new (attempts and backoff start again). A
   leased entry keeps its lease: its runner is delivering it and records the outcome, and
   no other runner may take it meanwhile (nothing is sent twice). */
static void qrec_due_now(struct qrec *q, int64_t now, bool requeue)
{
	for (size_t i = 0; i < q->m.nrcpt; i++) {
		struct store_queue_rcpt *r = &q->m.rcpt[i];

		if (r->state != STORE_Q_PENDING)
			continue;
		r->next_attempt = now;
		if (requeue)
			r->attempts = 0;
	}
}

static int qrec_delete(struct store_txn *t, struct qrec *q)
{
	uint8_t k[8];
	int rc;

	if ((rc = qrec_store(t, q, 0)) != 0)
		return rc;
	put_be64(k, q->m.id);
	if ((rc = store_del(t, DBI_QUEUE, k, 8)) != 0)
		return rc;
	return store_blob_ref_id(t, q->m.blob, -1);
}

static int qupdate_apply(struct store_txn *t, struct qupdate *u, struct qrec *q)
{
	int64_t now = time(NULL);
	bool leased = q->m.lease_until > now;
	struct store_queue_rcpt *r;
	char *olderr;

	switch (u->what) {
	case Q_RCPT:
		if (u->idx >= q->m.nrcpt)
			return STORE_EINVAL;
		r = &q->m.rcpt[u->idx];
		r->state = u->state;
		r->attempts++;
		r->next_attempt = u->state == STORE_Q_PENDING ? u->next_attempt : 0;
		olderr = (char *)(uintptr_t)r->last_error;
		r->last_error = u->error != NULL ? xstrdup(u->error) : NULL;
		free(olderr);
		qtry_add(q, u->idx, now, u->state, u->error);
		return qrec_store(t, q, leased ? q->due : qrec_next_due(q));
	case Q_UNLEASE:
		q->m.lease_until = 0;
		q->m.lease_owner = 0;
		return qrec_store(t, q, qrec_next_due(q));
	case Q_HOLD:
		q->m.held = true; /* no due row: a lease that runs out does not make it due */
		return qrec_store(t, q, 0);
	case Q_RELEASE:
	case Q_REQUEUE:
		q->m.held = false;
		__attribute__((fallthrough));
	case Q_FLUSH:
		if (!q->m.held)
			qrec_due_now(q, now, u->what == Q_REQUEUE);
		/* leased: due when the lease runs out (its runner died), as leasing set it */
		return qrec_store(t, q, leased ? q->m.lease_until : qrec_next_due(q));
	default:
		return qrec_delete(t, q);
	}
}

/* Every entry (u->match selects, NULL: all): ids first, then each updated; u->n counts. */
static int qupdate_all(struct store_txn *t, struct qupdate *u)
{
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	MDB_cursor *c;
	MDB_val k, v;
	struct qrec q;
	int rc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_QUEUE], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &v, op) == 0) {
		bool take = true;

		op = MDB_NEXT;
		if (k.mv_size != 8)
			continue;
		if (u->match != NULL) {
			if (qrec_decode(get_be64(k.mv_data), &v, &q) != 0)
				continue;
			take = u->match(&q.m, u->arg) != 0;
			qrec_clear(&q);
		}
		if (!take)
			continue;
		if (n == cap)
			ids = xreallocarray(ids, cap = cap * 2 + 64, sizeof(*ids));
		ids[n++] = get_be64(k.mv_data);
	}
	mdb_cursor_close(c);
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if ((rc = qrec_load(t, ids[i], &q)) != 0)
			break;
		if ((rc = qupdate_apply(t, u, &q)) == 0)
			u->n++;
		qrec_clear(&q);
	}
	free(ids);
	return rc;
}

static int qupdate_fn(struct store_txn *t, void *arg)
{
	struct qupdate *u = arg;
	struct qrec q;
	int rc;

	u->n = 0;
	if (u->id == 0 && u->what != Q_RCPT && u->what != Q_UNLEASE)
		return qupdate_all(t, u);
	if ((rc = qrec_load(t, u->id, &q)) != 0)
		return rc;
	if ((rc = qupdate_apply(t, u, &q)) == 0)
		u->n = 1;
	qrec_clear(&q);
	return rc;
}

int store_queue_rcpt_set(struct store *st, uint64_t id, size_t idx, enum store_rcpt_state state,
			 int64_t next_attempt, const char *error)
{
	struct qupdate u = { id, idx, state, next_attempt, error, 0 };

	return store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
}

int store_queue_rcpt_set_txn(struct store_txn *t, uint64_t id, size_t idx,
			     enum store_rcpt_state state, int64_t next_attempt, const char *error)
{
	struct qupdate u = { id, idx, state, next_attempt, error, 0 };
	struct qrec q;
	bool done = true;
	int rc;

	if (t->e->part != STORE_QUEUE_PART)
		return STORE_EINVAL;
	if ((rc = qupdate_fn(t, &u)) != 0 || (rc = qrec_load(t, id, &q)) != 0)
		return rc;
	for (size_t i = 0; i < q.m.nrcpt; i++)
		done &= q.m.rcpt[i].state == STORE_Q_DELIVERED;
	if (done) { /* every copy delivered: nothing is left to do for it */
		u.what = Q_DELETE;
		rc = qupdate_apply(t, &u, &q);
	}
	qrec_clear(&q);
	return rc;
}

struct qowners {
	uint32_t lo, hi;
	size_t n;
};

static int qowners_fn(struct store_txn *t, void *arg)
{
	struct qowners *o = arg;
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	MDB_cursor *c;
	MDB_val k, v;
	int rc, op = MDB_FIRST;

	o->n = 0;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_QUEUE], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &v, op) == 0) {
		struct qrec q;

		op = MDB_NEXT;
		if (k.mv_size != 8 || qrec_decode(get_be64(k.mv_data), &v, &q) != 0)
			continue;
		if (q.m.lease_until != 0 && q.m.lease_owner >= o->lo && q.m.lease_owner <= o->hi) {
			if (n == cap)
				ids = xreallocarray(ids, cap = cap * 2 + 64, sizeof(*ids));
			ids[n++] = q.m.id;
		}
		qrec_clear(&q);
	}
	mdb_cursor_close(c);
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct qupdate u = { .id = ids[i], .what = Q_UNLEASE };

		if ((rc = qupdate_fn(t, &u)) == 0)
			o->n++;
	}
	free(ids);
	return rc;
}

int store_queue_release_owners(struct store *st, uint32_t lo, uint32_t hi, size_t *n_r)
{
	struct qowners o = { lo, hi, 0 };
	int rc = store_write(st, STORE_QUEUE_PART, qowners_fn, &o);

	if (n_r != NULL)
		*n_r = rc == 0 ? o.n : 0;
	return rc;
}

int store_queue_release_owners_txn(struct store_txn *t, uint32_t lo, uint32_t hi, size_t *n_r)
{
	struct qowners o = { lo, hi, 0 };
	int rc = t->e->part == STORE_QUEUE_PART ? qowners_fn(t, &o) : STORE_EINVAL;

	if (n_r != NULL)
		*n_r = rc == 0 ? o.n : 0;
	return rc;
}

int store_queue_release_lease(struct store *st, uint64_t id)
{
	struct qupdate u = { .id = id, .what = Q_UNLEASE };

	return store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
}

int store_queue_release_lease_txn(struct store_txn *t, uint64_t id)
{
	struct qupdate u = { .id = id, .what = Q_UNLEASE };

	return t->e->part == STORE_QUEUE_PART ? qupdate_fn(t, &u) : STORE_EINVAL;
}

int store_queue_hold(struct store *st, uint64_t id, bool hold)
{
	struct qupdate u = { .id = id, .what = hold ? Q_HOLD : Q_RELEASE };

	return store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
}

int store_queue_flush(struct store *st, uint64_t id)
{
	struct qupdate u = { .id = id, .what = Q_FLUSH };

	return store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
}

int store_queue_delete(struct store *st, uint64_t id)
{
	struct qupdate u = { .id = id, .what = Q_DELETE };

	return store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
}

int store_queue_delete_txn(struct store_txn *t, uint64_t id)
{
	struct qupdate u = { .id = id, .what = Q_DELETE };

	return t->e->part == STORE_QUEUE_PART && id != 0 ? qupdate_fn(t, &u) : STORE_EINVAL;
}

int store_queue_apply(struct store *st, enum store_queue_action act, uint64_t id,
		      int (*match)(const struct store_queue_msg *qm, void *arg), void *arg,
		      size_t *n_r)
{
	static const int what[] = { [STORE_QA_FLUSH] = Q_FLUSH,
				    [STORE_QA_HOLD] = Q_HOLD,
				    [STORE_QA_RELEASE] = Q_RELEASE,
				    [STORE_QA_DELETE] = Q_DELETE,
				    [STORE_QA_REQUEUE] = Q_REQUEUE };
	struct qupdate u = { .id = id, .match = match, .arg = arg };
	int rc;

	if ((unsigned)act >= sizeof(what) / sizeof(what[0]) || (id != 0 && match != NULL))
		return STORE_EINVAL;
	u.what = what[act];
	rc = store_write(st, STORE_QUEUE_PART, qupdate_fn, &u);
	if (n_r != NULL)
		*n_r = rc == 0 ? u.n : 0;
	return rc;
}

int store_queue_tries(struct store *st, uint64_t id, struct store_queue_try **v_r, size_t *n_r)
{
	struct store_txn *t;
	struct qrec q;
	int rc;

	*v_r = NULL;
	*n_r = 0;
	if ((rc = store_txn_begin(st, STORE_QUEUE_PART, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = qrec_load(t, id, &q);
	store_txn_abort(&t);
	if (rc != 0)
		return rc;
	*v_r = q.tries;
	*n_r = q.ntries;
	q.tries = NULL;
	q.ntries = 0;
	qrec_clear(&q);
	return 0;
}

int store_queue_get(struct store *st, uint64_t id, struct store_queue_msg *qm_r)
{
	struct store_txn *t;
	struct qrec q;
	int rc;

	memset(qm_r, 0, sizeof(*qm_r));
	if ((rc = store_txn_begin(st, STORE_QUEUE_PART, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = qrec_load(t, id, &q);
	store_txn_abort(&t);
	if (rc == 0) {
		*qm_r = q.m;
		store_queue_tries_free(&q.tries, q.ntries);
	}
	return rc;
}

int store_queue_list(struct store *st, int (*cb)(const struct store_queue_msg *qm, void *arg),
		     void *arg)
{
	struct store_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	struct qrec q;
	int rc, op = MDB_FIRST;

	if ((rc = store_txn_begin(st, STORE_QUEUE_PART, STORE_TXN_READ, &t)) != 0)
		return rc;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_QUEUE], &c)) != 0) {
		store_txn_abort(&t);
		return STORE_EIO;
	}
	while ((rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (k.mv_size != 8 || qrec_decode(get_be64(k.mv_data), &v, &q) != 0)
			continue;
		rc = cb(&q.m, arg);
		qrec_clear(&q);
		if (rc != 0)
			break;
	}
	mdb_cursor_close(c);
	store_txn_abort(&t);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_queue_open(struct store *st, uint64_t id, int *fd_r, uint64_t *size_r)
{
	struct store_queue_msg m;
	int rc;

	if ((rc = store_queue_get(st, id, &m)) != 0)
		return rc;
	rc = store_blob_open(st, STORE_QUEUE_PART, m.blob, fd_r, size_r);
	store_queue_msg_clear(&m);
	return rc == STORE_ENOMSG ? STORE_EIO : rc;
}

int store_queue_bytes(struct store_txn *t, uint64_t *bytes_r)
{
	MDB_cursor *c;
	MDB_val k, v;
	int op = MDB_FIRST;

	*bytes_r = 0;
	if (mdb_cursor_open(t->txn, t->e->dbi[DBI_QUEUE], &c) != 0)
		return STORE_EIO;
	while (mdb_cursor_get(c, &k, &v, op) == 0) {
		op = MDB_NEXT;
		if (v.mv_size >= QREC_FIXED)
			*bytes_r += get_be64((uint8_t *)v.mv_data + 8);
	}
	mdb_cursor_close(c);
	return 0;
}

/* store_msg.c — owns message rows: append, lookup, iteration by UID and by sequence, flags and
 * keywords with modseq, expunge with its QRESYNC history, copy and move without body copies.
 * Counters live in the mailbox record (store_mbox.c) and change here with every row. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

struct store_iter {
	struct store_txn *t;
	MDB_cursor *c;
	uint64_t mbox;
	uint32_t hi;
	uint64_t changedsince;
	bool started, done;
	uint8_t k[12];
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void msg_key(uint8_t k[12], uint64_t mbox, uint32_t uid)
{
	put_be64(k, mbox);
	put_be32(k + 8, uid);
}

static void msg_encode(const struct store_msg *m, uint8_t b[MSG_REC_SAVED_LEN])
{
	put_be64(b, m->blob);
	put_be64(b + 8, m->modseq);
	put_be64(b + 16, (uint64_t)m->internaldate);
	put_be64(b + 24, m->size);
	put_be32(b + 32, m->flags);
	put_be64(b + 36, m->keywords);
	put_be64(b + 44, (uint64_t)m->savedate);
}

void msg_decode(const MDB_val *v, uint32_t uid, struct store_msg *m)
{
	const uint8_t *b = v->mv_data;

	memset(m, 0, sizeof(*m));
	m->uid = uid;
	if (v->mv_size < MSG_REC_LEN)
		return;
	m->blob = get_be64(b);
	m->modseq = get_be64(b + 8);
	m->internaldate = (int64_t)get_be64(b + 16);
	m->size = get_be64(b + 24);
	m->flags = get_be32(b + 32);
	m->keywords = get_be64(b + 36);
	m->savedate = v->mv_size >= MSG_REC_SAVED_LEN ? (int64_t)get_be64(b + 44)
						      : m->internaldate;
}

int msg_put(struct store_txn *t, uint64_t mbox, uint32_t uid, const struct store_msg *m)
{
	uint8_t k[12], b[MSG_REC_SAVED_LEN];

	msg_key(k, mbox, uid);
	msg_encode(m, b);
	return store_put(t, DBI_MSGS, k, 12, b, MSG_REC_SAVED_LEN);
}

static void msg_cache(struct store_txn *t, struct store_msg *m)
{
	uint8_t k[8];
	MDB_val v;

	put_be64(k, m->blob);
	if (store_get(t, DBI_CACHE, k, 8, &v) == 0) {
		m->cache = v.mv_data;
		m->cache_len = v.mv_size;
	}
}

/* Counter bookkeeping of one message entering (sign 1) or leaving (-1) a mailbox. */
static void count_msg(struct mbox_rec *r, const struct store_msg *m, int sign)
{
	r->messages += (uint32_t)sign;
	r->size += (uint64_t)(int64_t)sign * m->size;
	if (!(m->flags & STORE_SEEN))
		r->unseen += (uint32_t)sign;
	if (m->flags & STORE_DELETED)
		r->deleted += (uint32_t)sign;
	if (m->uid >= r->first_recent)
		r->recent += (uint32_t)sign;
}

int store_msg_add_ref(struct store_txn *t, struct mbox_rec *r, uint64_t mbox, uint64_t blob,
		      uint64_t size, unsigned flags, uint64_t kws, int64_t internaldate,
		      bool check_quota, uint32_t *uid_r)
{
	struct store_msg m = { 0 };
	int rc;

	if (r->attrs & STORE_MBOX_NOSELECT)
		return STORE_ENOMBOX;
	if (r->uidnext == UINT32_MAX)
		return STORE_EFULL; /* RFC 3501: a new UIDVALIDITY would be needed */
	if ((rc = store_user_charge(t, r->user, (int64_t)size, 1, check_quota)) != 0)
		return rc;
	m.uid = r->uidnext++;
	m.modseq = ++r->highestmodseq;
	m.blob = blob;
	m.size = size;
	m.flags = flags & STORE_FLAGS_ALL;
	m.keywords = kws;
	m.savedate = time(NULL); /* RFC 8514: a copy or move is saved anew */
	m.internaldate = internaldate != 0 ? internaldate : m.savedate;
	count_msg(r, &m, 1);
	if ((rc = msg_put(t, mbox, m.uid, &m)) != 0)
		return rc;
	*uid_r = m.uid;
	return 0;
}

int store_msg_append(struct store_txn *t, uint64_t mbox, const struct store_blob *b,
		     unsigned flags, uint64_t keywords, int64_t internaldate, uint32_t *uid_r)
{
	struct mbox_rec r;
	uint32_t uid;
	int rc;

	if (!t->write || STORE_ID_PART(mbox) != t->e->part)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (r.nkw < 64 && (keywords >> r.nkw) != 0)
		return STORE_EINVAL;
	if ((rc = store_msg_add_ref(t, &r, mbox, store_blob_id(b), store_blob_size(b), flags,
				    keywords, internaldate, true, &uid)) != 0)
		return rc;
	if ((rc = store_blob_ref(t, b)) != 0 ||
	    (rc = mbox_rec_store_what(t, mbox, &r, STORE_WHAT_NEW)) != 0 ||
	    (rc = store_fts_add(t, mbox, uid, b, r.messages == 1)) != 0)
		return rc;
	if (uid_r != NULL)
		*uid_r = uid;
	return 0;
}

int store_msg_get(struct store_txn *t, uint64_t mbox, uint32_t uid, struct store_msg *m_r)
{
	uint8_t k[12];
	MDB_val v;
	int rc;

	msg_key(k, mbox, uid);
	rc = store_get(t, DBI_MSGS, k, 12, &v);
	if (rc == STORE_ENOMSG) {
		struct mbox_rec r;

		return mbox_rec_load(t, mbox, &r) == STORE_ENOMBOX ? STORE_ENOMBOX : STORE_ENOMSG;
	}
	if (rc != 0)
		return rc;
	msg_decode(&v, uid, m_r);
	msg_cache(t, m_r);
	return 0;
}

int store_msg_iter(struct store_txn *t, uint64_t mbox, uint32_t lo, uint32_t hi,
		   uint64_t changedsince, struct store_iter **it_r)
{
	struct store_iter *it;
	struct mbox_rec r;
	int rc;

	*it_r = NULL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	it = xcalloc(1, sizeof(*it));
	it->t = t;
	it->mbox = mbox;
	it->hi = hi;
	it->changedsince = changedsince;
	msg_key(it->k, mbox, lo);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_MSGS], &it->c)) != 0) {
		free(it);
		return store_mdb_err(t, rc, "cursor");
	}
	*it_r = it;
	return 0;
}

int store_iter_next(struct store_iter *it, struct store_msg *m_r)
{
	MDB_val k, v;
	int rc;

	while (!it->done) {
		if (!it->started) {
			k.mv_data = it->k;
			k.mv_size = 12;
			rc = mdb_cursor_get(it->c, &k, &v, MDB_SET_RANGE);
			it->started = true;
		} else
			rc = mdb_cursor_get(it->c, &k, &v, MDB_NEXT);
		if (rc == MDB_NOTFOUND ||
		    (rc == 0 && (k.mv_size != 12 || get_be64(k.mv_data) != it->mbox ||
				 get_be32((uint8_t *)k.mv_data + 8) > it->hi))) {
			it->done = true;
			return 0;
		}
		if (rc != 0)
			return store_mdb_err(it->t, rc, "iterate");
		msg_decode(&v, get_be32((uint8_t *)k.mv_data + 8), m_r);
		if (it->changedsince != 0 && m_r->modseq <= it->changedsince)
			continue;
		msg_cache(it->t, m_r);
		return 1;
	}
	return 0;
}

void store_iter_free(struct store_iter **itp)
{
	struct store_iter *it = *itp;

	if (it == NULL)
		return;
	mdb_cursor_close(it->c);
	free(it);
	*itp = NULL;
}

static uint64_t apply64(enum store_flag_op op, uint64_t cur, uint64_t val)
{
	switch (op) {
	case STORE_FLAGS_SET:
		return val;
	case STORE_FLAGS_ADD:
		return cur | val;
	case STORE_FLAGS_REMOVE:
		return cur & ~val;
	}
	return cur;
}

int store_msg_flags(struct store_txn *t, uint64_t mbox, uint32_t uid, enum store_flag_op op,
		    unsigned flags, uint64_t keywords, uint64_t unchangedsince,
		    struct store_msg *m_r)
{
	struct store_msg m, old;
	struct mbox_rec r;
	uint8_t k[12];
	MDB_val v;
	int rc;

	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (r.nkw < 64 && (keywords >> r.nkw) != 0)
		return STORE_EINVAL; /* a keyword index the mailbox does not have */
	msg_key(k, mbox, uid);
	if ((rc = store_get(t, DBI_MSGS, k, 12, &v)) != 0)
		return rc;
	msg_decode(&v, uid, &old);
	m = old;
	m.flags = (unsigned)apply64(op, old.flags, flags & STORE_FLAGS_ALL);
	m.keywords = apply64(op, old.keywords, keywords);
	if (unchangedsince != 0 && old.modseq > unchangedsince) {
		if (m_r != NULL)
			*m_r = old;
		return STORE_ELOCKED;
	}
	if (m.flags != old.flags || m.keywords != old.keywords) {
		m.modseq = ++r.highestmodseq;
		count_msg(&r, &old, -1);
		count_msg(&r, &m, 1);
		if ((rc = msg_put(t, mbox, uid, &m)) != 0 ||
		    (rc = mbox_rec_store_what(t, mbox, &r, STORE_WHAT_FLAGS)) != 0)
			return rc;
	}
	if (m_r != NULL) {
		*m_r = m;
		msg_cache(t, m_r);
	}
	return 0;
}

int store_msg_restore_modseq(struct store_txn *t, uint64_t mbox, uint32_t uid, uint64_t modseq)
{
	struct store_msg m;
	struct mbox_rec r;
	uint8_t k[12];
	MDB_val v;
	int rc;

	if (!t->write || modseq == 0 || modseq == UINT64_MAX)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	msg_key(k, mbox, uid);
	if ((rc = store_get(t, DBI_MSGS, k, 12, &v)) != 0)
		return rc;
	msg_decode(&v, uid, &m);
	if (m.modseq == r.highestmodseq && modseq < m.modseq) /* its append's: taken back */
		r.highestmodseq = modseq > r.highestmodseq - 1 ? modseq : r.highestmodseq - 1;
	else if (modseq > r.highestmodseq)
		r.highestmodseq = modseq;
	m.modseq = modseq;
	if ((rc = msg_put(t, mbox, uid, &m)) != 0)
		return rc;
	return mbox_rec_store(t, mbox, &r);
}

static void push_uid(uint32_t **v, size_t *n, size_t *cap, uint32_t uid)
{
	if (*n == *cap)
		*v = xreallocarray(*v, *cap = *cap * 2 + 16, sizeof(**v));
	(*v)[(*n)++] = uid;
}

/* The entries of mbox's expunge history, counted (a record of the format before the count). */
static int history_count(struct store_txn *t, MDB_cursor *c, uint64_t mbox, uint32_t *n_r)
{
	uint8_t k[8];
	MDB_val key = { 8, k }, v;
	uint32_t n = 0;
	int rc;

	put_be64(k, mbox);
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
	     rc == 0 && key.mv_size == 20 && get_be64(key.mv_data) == mbox;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT))
		n++;
	*n_r = n;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "history count");
}

int store_msg_count_history(struct store_txn *t, uint64_t mbox, uint32_t *n_r)
{
	MDB_cursor *c;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_EXPUNGED], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	rc = history_count(t, c, mbox, n_r);
	mdb_cursor_close(c);
	return rc;
}

/* Drops the history older than the configured window (at most 1000 entries a call) and the
   oldest entries beyond expunge_history_max (all of them: each entry goes once, so this costs
   what its expunge cost); the floor moves past what was dropped. */
int store_msg_prune_history(struct store_txn *t, uint64_t mbox, struct mbox_rec *r)
{
	int64_t cutoff = time(NULL) - t->st->expunge_history_ms / 1000;
	uint8_t k[20];
	MDB_cursor *c;
	MDB_val key = { 8, k }, v;
	int rc, done = 0;

	put_be64(k, mbox);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_EXPUNGED], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	if (r->hist_n == MBOX_HIST_UNKNOWN && (rc = history_count(t, c, mbox, &r->hist_n)) != 0) {
		mdb_cursor_close(c);
		return rc;
	}
	while ((rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE)) == 0 && key.mv_size == 20 &&
	       get_be64(key.mv_data) == mbox && v.mv_size == 8 &&
	       (r->hist_n > t->st->expunge_history_max ||
		(done < 1000 && (int64_t)get_be64(v.mv_data) < cutoff))) {
		uint64_t ms = get_be64((uint8_t *)key.mv_data + 8);

		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
		if (ms + 1 > r->expunge_floor)
			r->expunge_floor = ms + 1;
		if (r->hist_n > 0)
			r->hist_n--;
		key.mv_data = k;
		key.mv_size = 8;
		done++;
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "prune");
}

static int expunge_one(struct store_txn *t, uint64_t mbox, struct mbox_rec *r,
		       const struct store_msg *m, uint64_t modseq, bool history)
{
	uint8_t k[20], tb[8];
	int rc;

	msg_key(k, mbox, m->uid);
	if ((rc = store_del(t, DBI_MSGS, k, 12)) != 0)
		return rc;
	count_msg(r, m, -1);
	if ((rc = store_user_charge(t, r->user, -(int64_t)m->size, -1, false)) != 0 ||
	    (rc = store_blob_ref_id(t, m->blob, -1)) != 0)
		return rc;
	if (!history)
		return 0; /* the mailbox goes: its index with it (store_msg_purge_mbox) */
	if ((rc = store_fts_remove(t, mbox, m->uid)) != 0 ||
	    (rc = store_seen_expunged(t, mbox, m->uid)) != 0)
		return rc;
	if (r->hist_n != MBOX_HIST_UNKNOWN)
		r->hist_n++;
	put_be64(k, mbox);
	put_be64(k + 8, modseq);
	put_be32(k + 16, m->uid);
	put_be64(tb, (uint64_t)time(NULL));
	return store_put(t, DBI_EXPUNGED, k, 20, tb, 8);
}

/* Collects the messages to expunge first: deleting under a cursor would be fragile. */
static int expunge_collect(struct store_txn *t, uint64_t mbox, const uint32_t *uids, size_t n,
			   struct store_msg **v_r, size_t *n_r)
{
	struct store_msg m, *v = NULL;
	size_t cnt = 0;
	int rc = 0;

	if (uids != NULL) {
		v = xreallocarray(NULL, n + 1, sizeof(*v));
		for (size_t i = 0; i < n; i++) {
			rc = store_msg_get(t, mbox, uids[i], &m);
			if (rc == STORE_ENOMSG) {
				rc = 0;
				continue;
			}
			if (rc != 0)
				break;
			v[cnt++] = m;
		}
	} else {
		struct store_iter *it;
		size_t cap = 0;

		if ((rc = store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it)) != 0)
			return rc;
		while ((rc = store_iter_next(it, &m)) == 1) {
			if (!(m.flags & STORE_DELETED))
				continue;
			if (cnt == cap)
				v = xreallocarray(v, cap = cap * 2 + 16, sizeof(*v));
			v[cnt++] = m;
		}
		store_iter_free(&it);
	}
	*v_r = v;
	*n_r = cnt;
	return rc < 0 ? rc : (rc == 1 ? 0 : rc);
}

static int expunge_msgs(struct store_txn *t, uint64_t mbox, struct mbox_rec *r,
			const uint32_t *uids, size_t n, uint32_t **out, size_t *n_out)
{
	struct store_msg *v = NULL;
	size_t cnt = 0, cap = 0, got = 0;
	uint64_t modseq;
	int rc;

	if ((rc = expunge_collect(t, mbox, uids, n, &v, &cnt)) != 0) {
		free(v);
		return rc;
	}
	if (cnt == 0) {
		free(v);
		return 0;
	}
	modseq = ++r->highestmodseq;
	for (size_t i = 0; i < cnt && rc == 0; i++) {
		if ((rc = expunge_one(t, mbox, r, &v[i], modseq, true)) == 0 && out != NULL)
			push_uid(out, &got, &cap, v[i].uid);
	}
	free(v);
	if (n_out != NULL)
		*n_out = out != NULL ? got : cnt;
	return rc;
}

int store_msg_expunge(struct store_txn *t, uint64_t mbox, const uint32_t *uids, size_t n,
		      uint32_t **out, size_t *n_out)
{
	struct mbox_rec r;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (n_out != NULL)
		*n_out = 0;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if ((rc = expunge_msgs(t, mbox, &r, uids, n, out, n_out)) != 0)
		return rc;
	return mbox_rec_store_what(t, mbox, &r, STORE_WHAT_EXPUNGE);
}

/* Removes every message of a mailbox without history (mailbox deletion). */
int store_msg_purge_mbox(struct store_txn *t, uint64_t mbox, struct mbox_rec *r)
{
	struct store_msg *v = NULL, m;
	struct store_iter *it;
	size_t cnt = 0, cap = 0;
	int rc;

	if ((rc = store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1) {
		if (cnt == cap)
			v = xreallocarray(v, cap = cap * 2 + 16, sizeof(*v));
		v[cnt++] = m;
	}
	store_iter_free(&it);
	for (size_t i = 0; i < cnt && rc == 0; i++)
		rc = expunge_one(t, mbox, r, &v[i], 0, false);
	free(v);
	if (rc != 0)
		return rc;
	/* keywords and history of the mailbox go with it */
	if ((rc = store_del_prefix(t, DBI_KW, mbox)) != 0 ||
	    (rc = store_del_prefix(t, DBI_EXPUNGED, mbox)) != 0 ||
	    (rc = store_fts_purge(t, mbox)) != 0 || (rc = store_seen_drop(t, mbox)) != 0)
		return rc;
	r->nkw = 0;
	r->hist_n = 0;
	return 0;
}

int store_msg_copy(struct store_txn *t, uint64_t src, uint64_t dst, const uint32_t *uids, size_t n,
		   bool move, uint32_t **src_done, uint32_t **dst_uids, size_t *n_r)
{
	return store_msg_copy_keep(t, src, dst, uids, n, move, STORE_FLAGS_ALL, true, src_done,
				   dst_uids, n_r);
}

int store_msg_copy_keep(struct store_txn *t, uint64_t src, uint64_t dst, const uint32_t *uids,
			size_t n, bool move, unsigned keep_flags, bool keep_keywords,
			uint32_t **src_done, uint32_t **dst_uids, size_t *n_r)
{
	struct mbox_rec rs, rd;
	struct store_msg m;
	size_t cap1 = 0, cap2 = 0, n1 = 0;
	uint32_t uid, *done = NULL;
	int rc;

	*src_done = *dst_uids = NULL;
	*n_r = 0;
	if (STORE_ID_PART(src) != t->e->part || STORE_ID_PART(dst) != t->e->part)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, src, &rs)) != 0 || (rc = mbox_rec_load(t, dst, &rd)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		uint64_t kws;

		rc = store_msg_get(t, src, uids[i], &m);
		if (rc == STORE_ENOMSG) {
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		kws = 0; /* keywords not kept: none made in dst either */
		if (keep_keywords && (rc = mbox_kw_remap(t, src, dst, m.keywords, &kws)) != 0)
			break;
		/* keyword creation rewrote dst's record: reload its nkw */
		struct mbox_rec tmp;
		if ((rc = mbox_rec_load(t, dst, &tmp)) != 0)
			break;
		rd.nkw = tmp.nkw;
		/* a move between two users' mailboxes charges another user: within the quota */
		rc = store_msg_add_ref(t, &rd, dst, m.blob, m.size, m.flags & keep_flags, kws,
				       m.internaldate, !move || rs.user != rd.user, &uid);
		if (rc != 0 || (rc = store_blob_ref_id(t, m.blob, 1)) != 0 ||
		    (rc = store_fts_add_id(t, dst, uid, m.blob, rd.messages == 1)) != 0)
			break;
		push_uid(&done, &n1, &cap1, m.uid);
		push_uid(dst_uids, n_r, &cap2, uid);
	}
	if (rc == 0)
		rc = mbox_rec_store_what(t, dst, &rd, STORE_WHAT_NEW);
	if (rc == 0 && move && *n_r > 0) {
		/* src may be dst's keyword table's owner too: reload after the writes */
		if ((rc = mbox_rec_load(t, src, &rs)) == 0 &&
		    (rc = expunge_msgs(t, src, &rs, done, *n_r, NULL, NULL)) == 0)
			rc = mbox_rec_store_what(t, src, &rs, STORE_WHAT_EXPUNGE);
	}
	*src_done = done;
	return rc;
}

int store_msg_vanished(struct store_txn *t, uint64_t mbox, uint64_t since, uint32_t **out,
		       size_t *n_r, bool *exact_r)
{
	struct mbox_rec r;
	uint8_t k[20];
	MDB_cursor *c;
	MDB_val key = { 16, k }, v;
	size_t cap = 0;
	uint64_t cutoff;
	int rc;

	*out = NULL;
	*n_r = 0;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	*exact_r = since + 1 >= r.expunge_floor;
	cutoff = (uint64_t)(time(NULL) - t->st->expunge_history_ms / 1000);
	put_be64(k, mbox);
	put_be64(k + 8, since + 1);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_EXPUNGED], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size != 20 || get_be64(key.mv_data) != mbox)
			break;
		if (v.mv_size == 8 && get_be64(v.mv_data) < cutoff) {
			/* past expunge_history but not pruned yet (no write since): as if gone */
			*exact_r = false;
			continue;
		}
		push_uid(out, n_r, &cap, get_be32((uint8_t *)key.mv_data + 16));
	}
	mdb_cursor_close(c);
	/* history is in modseq order; callers want UID order */
	if (*n_r > 1)
		qsort(*out, *n_r, sizeof(**out), cmp_u32);
	return 0;
}

int store_msg_history(struct store_txn *t, uint64_t mbox,
		      int (*cb)(uint32_t uid, uint64_t modseq, int64_t when, void *arg), void *arg)
{
	struct mbox_rec r;
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { 8, k }, v;
	int rc, stop = 0;

	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	put_be64(k, mbox);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_EXPUNGED], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && stop == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const uint8_t *kb = key.mv_data;

		if (key.mv_size != 20 || get_be64(kb) != mbox)
			break;
		if (v.mv_size == 8)
			stop = cb(get_be32(kb + 16), get_be64(kb + 8),
				  (int64_t)get_be64(v.mv_data), arg);
	}
	mdb_cursor_close(c);
	if (stop != 0)
		return stop;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "history");
}

int store_msg_restore_history(struct store_txn *t, uint64_t mbox, uint64_t floor, uint32_t uid,
			      uint64_t modseq, int64_t when)
{
	struct mbox_rec r;
	uint8_t k[20], tb[8];
	MDB_val v;
	int rc;

	if (!t->write || floor == 0 || (modseq == 0) != (uid == 0))
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (uid == 0) /* the floor alone */
		goto floor;
	if (modseq > r.highestmodseq || uid >= r.uidnext)
		return STORE_EINVAL;
	msg_key(k, mbox, uid);
	if ((rc = store_get(t, DBI_MSGS, k, 12, &v)) == 0)
		return STORE_EINVAL;
	if (rc != STORE_ENOMSG)
		return rc;
	put_be64(k, mbox);
	put_be64(k + 8, modseq);
	put_be32(k + 16, uid);
	put_be64(tb, (uint64_t)when);
	if ((rc = store_put(t, DBI_EXPUNGED, k, 20, tb, 8)) != 0)
		return rc;
	r.hist_n = MBOX_HIST_UNKNOWN; /* counted again when next needed */
floor:
	if (floor < r.expunge_floor)
		r.expunge_floor = floor;
	return mbox_rec_store(t, mbox, &r);
}

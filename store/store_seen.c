/* store_seen.c — owns the `seen` DBI: the private \Seen of a mailbox read by a user other
 * than its owner (a grantee through the other users' or the shared namespace). A row is keyed
 * be64 mailbox id + be32 uid + the viewer's key: the name itself up to SEEN_NAME_INLINE bytes,
 * a longer name (any user name of the store, STORE_MAX_NAME) as its first SEEN_NAME_HEAD bytes,
 * a NUL (never in a name, so the two forms cannot meet) and its SHA-256, so a key stays within
 * LMDB's 511 bytes whatever the name; its value is be64 modseq + u8 seen. No row:
 * the viewer has not seen the message (a new grantee starts with everything unseen, as in
 * Cyrus). The row of uid 0 (no message has it) holds the MODSEQ of the viewer's last change
 * in the mailbox, so a session can tell without a scan that no private change is new. The owner's \Seen stays in the message record. A change takes the mailbox's next
 * MODSEQ (so one sequence orders shared and private changes), without touching the message
 * row: other users see HIGHESTMODSEQ move and no message changed. Rows go with their message
 * (expunge), with their mailbox (delete; a rename keeps the id), with their viewer (user
 * delete) and follow a renamed viewer; they are in the mailbox's partition. */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define SEEN_NAME_INLINE 255 /* a name up to this long is its own key (the rows of old) */
#define SEEN_DIGEST 32       /* SHA-256 */
#define SEEN_NAME_HEAD (SEEN_NAME_INLINE - 1 - SEEN_DIGEST)
#define SEEN_KEY_MAX (12 + SEEN_NAME_INLINE)
#define SEEN_VAL_LEN 9

/* The viewer's part of a key: the name, or head + NUL + SHA-256 of a longer one; its length,
   0 for a name that is no viewer's (empty, longer than a user name). */
static size_t seen_viewer_key(const char *viewer, uint8_t out[SEEN_NAME_INLINE])
{
	size_t len = strlen(viewer);
	unsigned dlen = 0;

	if (len == 0 || len > STORE_SEEN_VIEWER_MAX)
		return 0;
	if (len <= SEEN_NAME_INLINE) {
		memcpy(out, viewer, len);
		return len;
	}
	memcpy(out, viewer, SEEN_NAME_HEAD);
	out[SEEN_NAME_HEAD] = '\0';
	if (EVP_Digest(viewer, len, out + SEEN_NAME_HEAD + 1, &dlen, EVP_sha256(), NULL) != 1 ||
	    dlen != SEEN_DIGEST)
		fatalx("store: SHA-256 failed");
	return SEEN_NAME_INLINE;
}

/* k: mailbox, uid and the viewer's key vk of vlen bytes (seen_viewer_key). */
static size_t seen_key(uint8_t *k, uint64_t mbox, uint32_t uid, const uint8_t *vk, size_t vlen)
{
	put_be64(k, mbox);
	put_be32(k + 8, uid);
	memcpy(k + 12, vk, vlen);
	return 12 + vlen;
}

bool store_seen_viewer_ok(const char *viewer)
{
	size_t len = strlen(viewer);

	return len > 0 && len <= STORE_SEEN_VIEWER_MAX;
}

static void seen_decode(const MDB_val *v, uint32_t uid, struct store_seen *s)
{
	s->uid = uid;
	s->modseq = get_be64(v->mv_data);
	s->seen = ((const uint8_t *)v->mv_data)[8] != 0;
}

int store_seen_get(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid,
		   struct store_seen *s_r)
{
	uint8_t k[SEEN_KEY_MAX], vk[SEEN_NAME_INLINE];
	size_t len = seen_viewer_key(viewer, vk);
	MDB_val v;
	int rc;

	s_r->uid = uid;
	s_r->seen = false;
	s_r->modseq = 0;
	if (len == 0)
		return STORE_ENOMSG;
	if ((rc = store_get(t, DBI_SEEN, k, seen_key(k, mbox, uid, vk, len), &v)) != 0)
		return rc;
	if (v.mv_size != SEEN_VAL_LEN)
		return STORE_ECORRUPT;
	seen_decode(&v, uid, s_r);
	return 0;
}

void store_seen_overlay(struct store_msg *m, const struct store_seen *s)
{
	m->flags = (m->flags & ~(unsigned)STORE_SEEN) | (s->seen ? STORE_SEEN : 0);
	if (s->modseq > m->modseq)
		m->modseq = s->modseq;
}

int store_seen_apply(struct store_txn *t, uint64_t mbox, const char *viewer, struct store_msg *m)
{
	struct store_seen s;
	int rc = store_seen_get(t, mbox, viewer, m->uid, &s);

	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	store_seen_overlay(m, &s);
	return 0;
}

int store_seen_set(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid, bool seen,
		   uint64_t unchangedsince, struct store_msg *m_r)
{
	uint8_t k[SEEN_KEY_MAX], val[SEEN_VAL_LEN], vk[SEEN_NAME_INLINE];
	size_t len = seen_viewer_key(viewer, vk);
	struct store_seen s;
	struct store_msg m;
	struct mbox_rec r;
	int rc;

	if (!t->write || len == 0)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0 || (rc = store_msg_get(t, mbox, uid, &m)) != 0)
		return rc;
	rc = store_seen_get(t, mbox, viewer, uid, &s);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	store_seen_overlay(&m, &s);
	if (unchangedsince != 0 && m.modseq > unchangedsince) {
		if (m_r != NULL)
			*m_r = m;
		return STORE_ELOCKED;
	}
	if (s.seen != seen) {
		m.modseq = ++r.highestmodseq;
		m.flags = (m.flags & ~(unsigned)STORE_SEEN) | (seen ? STORE_SEEN : 0);
		put_be64(val, m.modseq);
		val[8] = seen ? 1 : 0;
		if ((rc = store_put(t, DBI_SEEN, k, seen_key(k, mbox, uid, vk, len), val,
				    sizeof(val))) != 0 ||
		    (rc = store_put(t, DBI_SEEN, k, seen_key(k, mbox, 0, vk, len), val,
				    sizeof(val))) != 0 ||
		    (rc = mbox_rec_store_what(t, mbox, &r, STORE_WHAT_FLAGS)) != 0)
			return rc;
	}
	if (m_r != NULL)
		*m_r = m;
	return 0;
}

int store_seen_flags(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t uid,
		     enum store_flag_op op, unsigned flags, uint64_t keywords,
		     uint64_t unchangedsince, struct store_msg *m_r)
{
	unsigned shared = flags & STORE_FLAGS_ALL & ~(unsigned)STORE_SEEN;
	bool seen_op = op == STORE_FLAGS_SET || (flags & STORE_SEEN) != 0;
	bool want = op != STORE_FLAGS_REMOVE && (flags & STORE_SEEN) != 0;
	struct store_msg rec, m;
	int rc;

	if (!t->write || !store_seen_viewer_ok(viewer))
		return STORE_EINVAL;
	if ((rc = store_msg_get(t, mbox, uid, &rec)) != 0)
		return rc;
	m = rec;
	if ((rc = store_seen_apply(t, mbox, viewer, &m)) != 0)
		return rc;
	if (unchangedsince != 0 && m.modseq > unchangedsince) {
		if (m_r != NULL)
			*m_r = m;
		return STORE_ELOCKED;
	}
	/* the shared flags and keywords; a replacement keeps the owner's \Seen */
	if (op == STORE_FLAGS_SET)
		rc = store_msg_flags(t, mbox, uid, op, shared | (rec.flags & STORE_SEEN), keywords,
				     0, NULL);
	else if (shared != 0 || keywords != 0)
		rc = store_msg_flags(t, mbox, uid, op, shared, keywords, 0, NULL);
	if (rc == 0 && seen_op)
		rc = store_seen_set(t, mbox, viewer, uid, want, 0, NULL);
	if (rc == 0 && m_r != NULL && (rc = store_msg_get(t, mbox, uid, m_r)) == 0)
		rc = store_seen_apply(t, mbox, viewer, m_r);
	return rc;
}

int store_seen_highest(struct store_txn *t, uint64_t mbox, const char *viewer, uint64_t *modseq_r)
{
	struct store_seen s;
	int rc = store_seen_get(t, mbox, viewer, 0, &s);

	*modseq_r = s.modseq;
	return rc == STORE_ENOMSG ? 0 : rc;
}

int store_seen_list(struct store_txn *t, uint64_t mbox, const char *viewer, uint32_t lo,
		    uint64_t changedsince, int (*cb)(const struct store_seen *s, void *arg),
		    void *arg)
{
	uint8_t k[12], vk[SEEN_NAME_INLINE];
	size_t len = seen_viewer_key(viewer, vk);
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	int rc, stop = 0;

	if (len == 0)
		return 0;
	put_be64(k, mbox);
	put_be32(k + 8, lo > 0 ? lo : 1); /* uid 0: the viewer's last change, no message */
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_SEEN], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && stop == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		struct store_seen s;

		if (key.mv_size < 12 || get_be64(key.mv_data) != mbox)
			break;
		if (key.mv_size - 12 != len || memcmp((uint8_t *)key.mv_data + 12, vk, len) != 0 ||
		    v.mv_size != SEEN_VAL_LEN)
			continue;
		seen_decode(&v, get_be32((uint8_t *)key.mv_data + 8), &s);
		if (s.modseq > changedsince)
			stop = cb(&s, arg);
	}
	mdb_cursor_close(c);
	if (stop != 0)
		return stop;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "seen list");
}

struct seen_count {
	struct store_txn *t;
	uint64_t mbox;
	uint32_t n;
	int err;
};

static int seen_count_cb(const struct store_seen *s, void *arg)
{
	struct seen_count *sc = arg;
	struct store_msg m;
	int rc;

	if (!s->seen)
		return 0;
	/* a row an older binary's expunge left (it knows no such table): not counted */
	if ((rc = store_msg_get(sc->t, sc->mbox, s->uid, &m)) == 0)
		sc->n++;
	else if (rc != STORE_ENOMSG)
		return sc->err = rc;
	return 0;
}

int store_seen_status(struct store_txn *t, uint64_t mbox, const char *viewer,
		      struct store_status *st)
{
	struct seen_count sc = { t, mbox, 0, 0 };
	int rc;

	if ((rc = store_mbox_status(t, mbox, st)) != 0 ||
	    (rc = store_seen_list(t, mbox, viewer, 1, 0, seen_count_cb, &sc)) != 0)
		return rc;
	st->unseen = sc.n < st->messages ? st->messages - sc.n : 0;
	return 0;
}

/* The rows of (mbox, uid) or, uid 0, of every message of mbox. */
static int seen_drop_range(struct store_txn *t, uint64_t mbox, uint32_t uid)
{
	uint8_t k[12];

	put_be64(k, mbox);
	put_be32(k + 8, uid);
	return store_del_range(t, DBI_SEEN, k, uid != 0 ? 12 : 8);
}

int store_seen_expunged(struct store_txn *t, uint64_t mbox, uint32_t uid)
{
	return uid == 0 ? STORE_EINVAL : seen_drop_range(t, mbox, uid);
}

int store_seen_drop(struct store_txn *t, uint64_t mbox)
{
	return seen_drop_range(t, mbox, 0);
}

/* A row naming a viewer, to move or drop: its key and value. */
struct seen_row {
	uint8_t k[SEEN_KEY_MAX];
	size_t len;
	uint8_t val[SEEN_VAL_LEN];
};

/* Every row naming viewer in t's partition. */
static int seen_rows_of(struct store_txn *t, const char *viewer, struct seen_row **rows_r,
			size_t *n_r)
{
	uint8_t vk[SEEN_NAME_INLINE];
	size_t len = seen_viewer_key(viewer, vk), n = 0, cap = 0;
	struct seen_row *rows = NULL;
	MDB_cursor *c;
	MDB_val key, v;
	int rc;

	*rows_r = NULL;
	*n_r = 0;
	if (len == 0)
		return 0;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_SEEN], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size != 12 + len || memcmp((uint8_t *)key.mv_data + 12, vk, len) != 0)
			continue;
		if (n == cap)
			rows = xreallocarray(rows, cap = cap * 2 + 16, sizeof(*rows));
		memcpy(rows[n].k, key.mv_data, key.mv_size);
		rows[n].len = key.mv_size;
		memset(rows[n].val, 0, SEEN_VAL_LEN);
		if (v.mv_size == SEEN_VAL_LEN)
			memcpy(rows[n].val, v.mv_data, SEEN_VAL_LEN);
		n++;
	}
	mdb_cursor_close(c);
	*rows_r = rows;
	*n_r = n;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "seen rows");
}

int store_seen_rename_viewer(struct store_txn *t, const char *from, const char *to)
{
	uint8_t tk[SEEN_NAME_INLINE];
	size_t tl = to != NULL ? seen_viewer_key(to, tk) : 0, n = 0;
	struct seen_row *rows = NULL;
	int rc;

	if (!t->write)
		return STORE_EINVAL;
	if (to != NULL && strcmp(from, to) == 0)
		return 0;
	rc = seen_rows_of(t, from, &rows, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint8_t k[SEEN_KEY_MAX];

		if ((rc = store_del(t, DBI_SEEN, rows[i].k, rows[i].len)) != 0)
			break;
		if (tl == 0)
			continue; /* dropped, or a name that can keep none */
		rc = store_put(t, DBI_SEEN, k,
			       seen_key(k, get_be64(rows[i].k), get_be32(rows[i].k + 8), tk, tl),
			       rows[i].val, SEEN_VAL_LEN);
	}
	free(rows);
	return rc;
}

int store_seen_drop_viewer(struct store_txn *t, const char *viewer)
{
	return store_seen_rename_viewer(t, viewer, NULL);
}

int store_seen_check(struct store_txn *t, bool (*mbox_known)(uint64_t mbox, void *arg), void *arg,
		     bool repair, uint64_t *bad_r, uint64_t *fixed_r)
{
	struct seen_row *bad = NULL;
	size_t n = 0, cap = 0;
	MDB_cursor *c;
	MDB_val key, v;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_SEEN], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		uint64_t mbox;
		uint32_t uid;
		struct store_msg m;
		int mrc = 0;

		if (key.mv_size > 12 && key.mv_size <= SEEN_KEY_MAX && v.mv_size == SEEN_VAL_LEN) {
			mbox = get_be64(key.mv_data);
			uid = get_be32((uint8_t *)key.mv_data + 8);
			if (!mbox_known(mbox, arg))
				mrc = STORE_ENOMBOX;
			else if (uid != 0)
				mrc = store_msg_get(t, mbox, uid, &m);
			if (mrc != 0 && mrc != STORE_ENOMSG && mrc != STORE_ENOMBOX) {
				rc = mrc;
				break;
			}
			if (mrc == 0)
				continue; /* a row of a message that is there */
		}
		/* a row of a mailbox or a message gone (an older binary's delete or expunge),
		   or one that does not decode */
		(*bad_r)++;
		if (!repair || key.mv_size > SEEN_KEY_MAX)
			continue;
		if (n == cap)
			bad = xreallocarray(bad, cap = cap * 2 + 16, sizeof(*bad));
		memcpy(bad[n].k, key.mv_data, key.mv_size);
		bad[n++].len = key.mv_size;
	}
	mdb_cursor_close(c);
	rc = rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "seen check");
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((rc = store_del(t, DBI_SEEN, bad[i].k, bad[i].len)) == 0)
			(*fixed_r)++;
	free(bad);
	return rc;
}

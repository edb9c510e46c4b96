/* store_mbox.c — owns mailbox records: create (with parents), delete, rename (with children,
 * INBOX special case), LIST patterns, subscriptions, special use, STATUS counters,
 * uidvalidity, \Recent hand-over, keyword tables. Message rows: store_msg.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define KEY_MAX (8 + STORE_MAX_MBOX_NAME)

static int norm_name(const char *in, char out[STORE_MAX_NAME + 1], size_t *len_r);
static int mbox_lookup(struct store_txn *t, uint64_t user, const char *name, size_t len,
		       uint64_t *id_r);

/* "inbox" and "inbox/x" in any case become "INBOX", "INBOX/x". Rejects empty levels
   (STORE_EINVAL) and names past STORE_MAX_MBOX_NAME (STORE_ELIMIT: no key can hold them). */
static int norm_name(const char *in, char out[STORE_MAX_NAME + 1], size_t *len_r)
{
	size_t n = strlen(in);

	if (n > STORE_MAX_MBOX_NAME)
		return STORE_ELIMIT;
	if (n == 0 || in[0] == STORE_DELIM || in[n - 1] == STORE_DELIM)
		return STORE_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (in[i] == '\r' || in[i] == '\n' ||
		    (in[i] == STORE_DELIM && in[i + 1] == STORE_DELIM))
			return STORE_EINVAL;
	}
	memcpy(out, in, n + 1);
	if (n >= 5 && str_caseeq(in, 5, "INBOX", 5) && (n == 5 || in[5] == STORE_DELIM))
		memcpy(out, "INBOX", 5);
	*len_r = n;
	return 0;
}

static size_t mbox_key(uint8_t *k, uint64_t user, const char *name, size_t len)
{
	put_be64(k, user);
	memcpy(k + 8, name, len);
	return 8 + len;
}

static void mbox_rec_encode(const struct mbox_rec *r, uint8_t *b)
{
	put_be64(b, r->user);
	put_be32(b + 8, r->uidvalidity);
	put_be32(b + 12, r->uidnext);
	put_be64(b + 16, r->highestmodseq);
	put_be32(b + 24, r->messages);
	put_be32(b + 28, r->recent);
	put_be32(b + 32, r->unseen);
	put_be32(b + 36, r->deleted);
	put_be64(b + 40, r->size);
	put_be32(b + 48, r->first_recent);
	put_be32(b + 52, r->attrs);
	put_be32(b + 56, r->special);
	put_be64(b + 60, r->expunge_floor);
	put_be32(b + 68, r->nkw);
	memcpy(b + MBOX_REC_FIXED, r->namebuf, r->name_len + 1);
	put_be32(b + MBOX_REC_FIXED + r->name_len + 1, r->hist_n);
}

static int mbox_rec_decode(const MDB_val *v, struct mbox_rec *r)
{
	const uint8_t *b = v->mv_data;
	size_t len;

	if (v->mv_size < MBOX_REC_FIXED + 1 || v->mv_size > MBOX_REC_MAX)
		return STORE_ECORRUPT;
	len = strnlen((const char *)b + MBOX_REC_FIXED, v->mv_size - MBOX_REC_FIXED);
	if (len > STORE_MAX_NAME)
		return STORE_ECORRUPT;
	if (v->mv_size == MBOX_REC_FIXED + len + 1 + 4)
		r->hist_n = get_be32(b + MBOX_REC_FIXED + len + 1);
	else if (v->mv_size == MBOX_REC_FIXED + len + 1)
		r->hist_n = MBOX_HIST_UNKNOWN; /* the format before the count */
	else
		return STORE_ECORRUPT;
	r->user = get_be64(b);
	r->uidvalidity = get_be32(b + 8);
	r->uidnext = get_be32(b + 12);
	r->highestmodseq = get_be64(b + 16);
	r->messages = get_be32(b + 24);
	r->recent = get_be32(b + 28);
	r->unseen = get_be32(b + 32);
	r->deleted = get_be32(b + 36);
	r->size = get_be64(b + 40);
	r->first_recent = get_be32(b + 48);
	r->attrs = get_be32(b + 52);
	r->special = get_be32(b + 56);
	r->expunge_floor = get_be64(b + 60);
	r->nkw = get_be32(b + 68);
	r->name_len = len;
	memcpy(r->namebuf, b + MBOX_REC_FIXED, r->name_len);
	r->namebuf[r->name_len] = '\0';
	return 0;
}

int mbox_rec_load(struct store_txn *t, uint64_t mbox, struct mbox_rec *r)
{
	uint8_t k[8];
	MDB_val v;
	int rc;

	put_be64(k, mbox);
	if ((rc = store_get(t, DBI_MBOX, k, 8, &v)) != 0)
		return rc == STORE_ENOMSG ? STORE_ENOMBOX : rc;
	return mbox_rec_decode(&v, r);
}

/* mbox_rec_store without its change record: for the writes that note a change of their own
   (create, delete, rename) and the \Recent claim, so a NOTIFY session is not told of
   message changes there are none of. */
static int mbox_rec_put(struct store_txn *t, uint64_t mbox, const struct mbox_rec *r)
{
	uint8_t k[8], b[MBOX_REC_MAX];
	struct mbox_rec pr = *r;
	int rc;

	/* every write of a mailbox ages its expunge history out and holds it to
	   expunge_history_max (one cursor seek when there is nothing to drop), so it stays
	   bounded without new expunges */
	if ((rc = store_msg_prune_history(t, mbox, &pr)) != 0)
		return rc;
	put_be64(k, mbox);
	mbox_rec_encode(&pr, b);
	return store_put(t, DBI_MBOX, k, 8, b, MBOX_REC_FIXED + r->name_len + 1 + 4);
}

int mbox_rec_store_what(struct store_txn *t, uint64_t mbox, const struct mbox_rec *r,
			unsigned what)
{
	int rc;

	if ((rc = mbox_rec_put(t, mbox, r)) != 0)
		return rc;
	return store_change_note_what(t, STORE_CHANGE_MSGS, what, r->user, mbox, r->namebuf,
				      r->name_len, NULL, 0);
}

int mbox_rec_store(struct store_txn *t, uint64_t mbox, const struct mbox_rec *r)
{
	return mbox_rec_store_what(t, mbox, r, STORE_WHAT_ALL);
}

static int mbox_lookup(struct store_txn *t, uint64_t user, const char *name, size_t len,
		       uint64_t *id_r)
{
	uint8_t k[KEY_MAX];
	MDB_val v;
	int rc = store_get(t, DBI_MBOXES, k, mbox_key(k, user, name, len), &v);

	if (rc != 0)
		return rc == STORE_ENOMSG ? STORE_ENOMBOX : rc;
	if (v.mv_size != 8)
		return STORE_ECORRUPT;
	*id_r = get_be64(v.mv_data);
	return 0;
}

/* A fresh UIDVALIDITY: the time, but always above the partition's last one. */
static int next_uidvalidity(struct store_txn *t, uint32_t *v_r)
{
	uint32_t v = (uint32_t)time(NULL);
	uint8_t b[4];
	MDB_val last;
	int rc = store_get(t, DBI_META, "uidvalidity", 11, &last);

	if (rc == 0 && last.mv_size == 4 && get_be32(last.mv_data) >= v)
		v = get_be32(last.mv_data) + 1;
	else if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	put_be32(b, v);
	*v_r = v;
	return store_put(t, DBI_META, "uidvalidity", 11, b, 4);
}

static int mbox_new(struct store_txn *t, uint64_t user, const char *name, size_t len,
		    unsigned special, uint64_t *id_r)
{
	struct mbox_rec r;
	uint8_t k[KEY_MAX], idb[8];
	uint64_t id;
	int rc;

	memset(&r, 0, sizeof(r));
	r.user = user;
	r.uidnext = 1;
	r.first_recent = 1;
	r.highestmodseq = 1;
	r.expunge_floor = 1;
	r.special = special;
	memcpy(r.namebuf, name, len);
	r.name_len = len;
	if ((rc = next_uidvalidity(t, &r.uidvalidity)) != 0 || (rc = store_next_id(t, &id)) != 0)
		return rc;
	put_be64(idb, id);
	if ((rc = mbox_rec_put(t, id, &r)) != 0 ||
	    (rc = store_put(t, DBI_MBOXES, k, mbox_key(k, user, name, len), idb, 8)) != 0 ||
	    (rc = store_change_note(t, STORE_CHANGE_CREATE, user, id, name, len, NULL, 0)) != 0)
		return rc;
	*id_r = id;
	return 0;
}

/* Creates the missing parents of a name (every prefix ending before a delimiter). */
static int make_parents(struct store_txn *t, uint64_t user, const char *to, size_t tlen)
{
	uint64_t id;
	int rc;

	for (size_t i = 1; i < tlen; i++) {
		if (to[i] != STORE_DELIM)
			continue;
		rc = mbox_lookup(t, user, to, i, &id);
		if (rc == STORE_ENOMBOX)
			rc = mbox_new(t, user, to, i, 0, &id);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int store_mbox_create(struct store_txn *t, uint64_t user, const char *name, unsigned special,
		      uint64_t *id_r)
{
	char n[STORE_MAX_NAME + 1];
	struct user_rec u;
	struct mbox_rec r;
	size_t len;
	uint64_t id;
	int rc;

	if ((rc = norm_name(name, n, &len)) != 0)
		return rc;
	if ((rc = user_rec_load_id(t, user, &u)) != 0 || (rc = make_parents(t, user, n, len)) != 0)
		return rc;
	rc = mbox_lookup(t, user, n, len, &id);
	if (rc == STORE_ENOMBOX)
		rc = mbox_new(t, user, n, len, special, &id);
	else if (rc == 0) {
		if ((rc = mbox_rec_load(t, id, &r)) != 0)
			return rc;
		if (!(r.attrs & STORE_MBOX_NOSELECT))
			return STORE_EEXIST;
		r.attrs &= ~(unsigned)STORE_MBOX_NOSELECT;
		r.special = special;
		if ((rc = mbox_rec_put(t, id, &r)) == 0)
			rc = store_change_note(t, STORE_CHANGE_CREATE, user, id, n, len, NULL, 0);
	}
	if (rc == 0 && id_r != NULL)
		*id_r = id;
	return rc;
}

/* A mailbox found by name: its normalized name, id and record. */
struct mbox_named {
	char n[STORE_MAX_NAME + 1];
	size_t len;
	uint64_t id;
	struct mbox_rec r;
};

/* The mailbox named name of user into m. A name that cannot be one is STORE_ENOMBOX. */
static int mbox_named(struct store_txn *t, uint64_t user, const char *name, struct mbox_named *m)
{
	int rc;

	if ((rc = norm_name(name, m->n, &m->len)) != 0)
		return rc == STORE_EINVAL || rc == STORE_ELIMIT ? STORE_ENOMBOX : rc;
	if ((rc = mbox_lookup(t, user, m->n, m->len, &m->id)) != 0)
		return rc;
	return mbox_rec_load(t, m->id, &m->r);
}

static int mbox_find(struct store_txn *t, uint64_t user, const char *name, bool noselect_ok,
		     uint64_t *id_r)
{
	struct mbox_named m;
	int rc;

	if ((rc = mbox_named(t, user, name, &m)) != 0)
		return rc;
	if ((m.r.attrs & STORE_MBOX_NOSELECT) && !noselect_ok)
		return STORE_ENOMBOX;
	*id_r = m.id;
	return 0;
}

int store_mbox_find(struct store_txn *t, uint64_t user, const char *name, uint64_t *id_r)
{
	return mbox_find(t, user, name, false, id_r);
}

int store_mbox_find_any(struct store_txn *t, uint64_t user, const char *name, uint64_t *id_r)
{
	return mbox_find(t, user, name, true, id_r);
}

/* Whether user has a mailbox below name (name + '/' is a key prefix). */
static bool has_children(struct store_txn *t, uint64_t user, const char *name, size_t len)
{
	uint8_t k[KEY_MAX + 1];
	size_t kl = mbox_key(k, user, name, len);
	MDB_cursor *c;
	MDB_val key, v;
	bool yes = false;

	k[kl++] = STORE_DELIM;
	key.mv_data = k;
	key.mv_size = kl;
	if (mdb_cursor_open(t->txn, t->e->dbi[DBI_MBOXES], &c) != 0)
		return false;
	if (mdb_cursor_get(c, &key, &v, MDB_SET_RANGE) == 0)
		yes = key.mv_size > kl && memcmp(key.mv_data, k, kl) == 0;
	mdb_cursor_close(c);
	return yes;
}

static int mbox_drop(struct store_txn *t, uint64_t user, uint64_t id, struct mbox_rec *r)
{
	uint8_t k[KEY_MAX];
	int rc;

	if ((rc = store_msg_purge_mbox(t, id, r)) != 0 || (rc = store_annot_drop(t, id)) != 0 ||
	    (rc = store_acl_drop(t, id)) != 0)
		return rc;
	put_be64(k, id);
	if ((rc = store_del(t, DBI_MBOX, k, 8)) != 0)
		return rc;
	rc = store_del(t, DBI_MBOXES, k, mbox_key(k, user, r->namebuf, r->name_len));
	if (rc != 0)
		return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
	return store_change_note(t, STORE_CHANGE_DELETE, user, id, r->namebuf, r->name_len, NULL,
				 0);
}

/* Drops the \Noselect ancestors of name left without children (such a name only held its
   children's place, and would be listed for nothing): walking up from name's parent, stopping at the first that is selectable or still has children. */
static int prune_noselect_parents(struct store_txn *t, uint64_t user, const char *name, size_t len)
{
	char p[STORE_MAX_NAME + 1];
	struct mbox_rec r;
	uint64_t id;
	int rc;

	memcpy(p, name, len);
	p[len] = '\0';
	for (;;) {
		char *slash = strrchr(p, STORE_DELIM);

		if (slash == NULL)
			return 0;
		*slash = '\0';
		len = (size_t)(slash - p);
		rc = mbox_lookup(t, user, p, len, &id);
		if (rc == STORE_ENOMBOX)
			continue; /* a level that never existed: look further up */
		if (rc != 0 || (rc = mbox_rec_load(t, id, &r)) != 0)
			return rc;
		if (!(r.attrs & STORE_MBOX_NOSELECT) || has_children(t, user, p, len))
			return 0;
		if ((rc = mbox_drop(t, user, id, &r)) != 0)
			return rc;
	}
}

int store_mbox_delete(struct store_txn *t, uint64_t user, const char *name)
{
	struct mbox_named m;
	int rc;

	if ((rc = mbox_named(t, user, name, &m)) != 0)
		return rc;
	if (strcmp(m.n, "INBOX") == 0)
		return STORE_ENOTSUP;
	if (!has_children(t, user, m.n, m.len)) {
		if ((rc = mbox_drop(t, user, m.id, &m.r)) != 0)
			return rc;
		return prune_noselect_parents(t, user, m.n, m.len);
	}
	if (m.r.attrs & STORE_MBOX_NOSELECT)
		return STORE_ENOTSUP;
	/* deleted, if kept for its children: a mailbox made again there starts without the
	   old one's annotations (RFC 5464 4.1) and without its access list */
	if ((rc = store_msg_purge_mbox(t, m.id, &m.r)) != 0 ||
	    (rc = store_annot_drop(t, m.id)) != 0 || (rc = store_acl_drop(t, m.id)) != 0)
		return rc;
	m.r.attrs |= STORE_MBOX_NOSELECT;
	m.r.special = 0;
	if ((rc = mbox_rec_put(t, m.id, &m.r)) != 0)
		return rc;
	return store_change_note(t, STORE_CHANGE_DELETE, user, m.id, m.n, m.len, NULL, 0);
}

struct rename_item {
	uint64_t id;
	char name[STORE_MAX_NAME + 1];
	size_t len;
};

/* Collects from and every mailbox below it. */
static int rename_collect(struct store_txn *t, uint64_t user, const char *from, size_t flen,
			  struct rename_item **items_r, size_t *n_r)
{
	uint8_t k[KEY_MAX];
	size_t kl = mbox_key(k, user, from, flen), n = 0, cap = 0;
	struct rename_item *items = NULL;
	MDB_cursor *c;
	MDB_val key = { kl, k }, v;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_MBOXES], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const char *kn = (const char *)key.mv_data + 8;
		size_t klen = key.mv_size - 8;

		if (key.mv_size < kl || memcmp(key.mv_data, k, kl) != 0)
			break;
		if (flen > 0 && klen != flen && kn[flen] != STORE_DELIM)
			continue; /* "a-b" sorts between "a" and "a/" */
		if (n == cap)
			items = xreallocarray(items, cap = cap * 2 + 8, sizeof(*items));
		items[n].id = get_be64(v.mv_data);
		memcpy(items[n].name, kn, klen);
		items[n].name[klen] = '\0';
		items[n++].len = klen;
	}
	mdb_cursor_close(c);
	*items_r = items;
	*n_r = n;
	return 0;
}

static int rename_one(struct store_txn *t, uint64_t user, const struct rename_item *it,
		      const char *to, size_t tlen, size_t flen)
{
	uint8_t k[KEY_MAX], idb[8];
	struct mbox_rec r;
	int rc;

	if (tlen + it->len - flen > STORE_MAX_MBOX_NAME)
		return STORE_ELIMIT;
	if ((rc = mbox_rec_load(t, it->id, &r)) != 0)
		return rc;
	memcpy(r.namebuf, to, tlen);
	memcpy(r.namebuf + tlen, it->name + flen, it->len - flen + 1);
	r.name_len = tlen + it->len - flen;
	put_be64(idb, it->id);
	if ((rc = store_del(t, DBI_MBOXES, k, mbox_key(k, user, it->name, it->len))) != 0 ||
	    (rc = store_put(t, DBI_MBOXES, k, mbox_key(k, user, r.namebuf, r.name_len), idb, 8)) !=
		    0 ||
	    (rc = mbox_rec_put(t, it->id, &r)) != 0)
		return rc;
	return store_change_note(t, STORE_CHANGE_RENAME, user, it->id, r.namebuf, r.name_len,
				 it->name, it->len);
}

int store_mbox_rename(struct store_txn *t, uint64_t user, const char *from, const char *to)
{
	char f[STORE_MAX_NAME + 1], n[STORE_MAX_NAME + 1];
	struct rename_item *items = NULL;
	size_t flen, tlen, nitems = 0;
	uint64_t id;
	int rc;

	if ((rc = norm_name(from, f, &flen)) != 0)
		return rc == STORE_EINVAL || rc == STORE_ELIMIT ? STORE_ENOMBOX : rc;
	if ((rc = norm_name(to, n, &tlen)) != 0)
		return rc;
	if (tlen > flen && memcmp(n, f, flen) == 0 && n[flen] == STORE_DELIM)
		return STORE_EINVAL;
	if ((rc = mbox_lookup(t, user, f, flen, &id)) != 0)
		return rc;
	rc = mbox_lookup(t, user, n, tlen, &id);
	if (rc == 0)
		return STORE_EEXIST;
	if (rc != STORE_ENOMBOX)
		return rc;
	if ((rc = make_parents(t, user, n, tlen)) != 0)
		return rc;
	if (strcmp(f, "INBOX") == 0) {
		/* the INBOX record becomes `to` with its messages; a new empty INBOX follows.
		   INBOX's children stay where they are (RFC 3501 RENAME). */
		struct rename_item it = { 0 };

		if ((rc = mbox_lookup(t, user, f, flen, &it.id)) != 0)
			return rc;
		memcpy(it.name, f, flen + 1);
		it.len = flen;
		if ((rc = rename_one(t, user, &it, n, tlen, flen)) != 0 ||
		    (rc = mbox_new(t, user, "INBOX", 5, 0, &id)) != 0)
			return rc;
		/* the annotations went with the record; INBOX keeps a copy (RFC 5464 4.1) */
		return store_annot_copy(t, it.id, id);
	}
	if ((rc = rename_collect(t, user, f, flen, &items, &nitems)) != 0)
		return rc;
	for (size_t i = 0; i < nitems && rc == 0; i++)
		rc = rename_one(t, user, &items[i], n, tlen, flen);
	free(items);
	return rc != 0 ? rc : prune_noselect_parents(t, user, f, flen);
}

int store_mbox_limit(struct store_txn *t, uint64_t user, uint64_t max_count, unsigned max_depth,
		     const char **which_r)
{
	uint8_t k[8];
	uint64_t n = 0;
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	int rc;

	if (max_count == 0 && max_depth == 0)
		return 0;
	put_be64(k, user);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_MBOXES], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const char *kn = (const char *)key.mv_data + 8;
		unsigned depth = 1;

		if (key.mv_size < 8 || memcmp(key.mv_data, k, 8) != 0)
			break;
		for (size_t i = 0; i < key.mv_size - 8; i++)
			depth += kn[i] == STORE_DELIM;
		if ((max_count != 0 && ++n > max_count) || (max_depth != 0 && depth > max_depth)) {
			if (which_r != NULL)
				*which_r = max_depth != 0 && depth > max_depth ? "depth"
									       : "mailboxes";
			mdb_cursor_close(c);
			return STORE_ELIMIT;
		}
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "cursor");
}

int store_mbox_subscribe(struct store_txn *t, uint64_t user, const char *name, bool on)
{
	char n[STORE_MAX_NAME + 1];
	uint8_t k[KEY_MAX];
	size_t len;
	int rc;

	if ((rc = norm_name(name, n, &len)) != 0)
		return rc;
	if (on)
		rc = store_put(t, DBI_SUBS, k, mbox_key(k, user, n, len), "", 0);
	else if ((rc = store_del(t, DBI_SUBS, k, mbox_key(k, user, n, len))) == STORE_ENOMSG)
		rc = 0;
	if (rc != 0)
		return rc;
	return store_change_note(t, STORE_CHANGE_SUBSCRIBE, user, 0, n, len, NULL, 0);
}

int store_mbox_set_special(struct store_txn *t, uint64_t mbox, unsigned special)
{
	struct mbox_rec r;
	int rc;

	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	r.special = special;
	return mbox_rec_store(t, mbox, &r);
}

int store_mbox_restore_uids(struct store_txn *t, uint64_t mbox, uint32_t uidvalidity,
			    uint32_t uidnext)
{
	struct mbox_rec r;
	uint8_t b[4];
	MDB_val last;
	int rc;

	if (!t->write || uidnext == UINT32_MAX)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (uidvalidity != 0 && uidvalidity != r.uidvalidity) {
		if (r.uidnext != 1 || r.messages != 0)
			return STORE_EEXIST;
		r.uidvalidity = uidvalidity;
		rc = store_get(t, DBI_META, "uidvalidity", 11, &last);
		if (rc != 0 && rc != STORE_ENOMSG)
			return rc;
		put_be32(b, uidvalidity);
		if ((rc != 0 || last.mv_size != 4 || get_be32(last.mv_data) < uidvalidity) &&
		    (rc = store_put(t, DBI_META, "uidvalidity", 11, b, 4)) != 0)
			return rc;
	}
	if (uidnext > r.uidnext)
		r.uidnext = uidnext;
	return mbox_rec_store(t, mbox, &r);
}

int store_mbox_restore_modseq(struct store_txn *t, uint64_t mbox, uint64_t highestmodseq)
{
	struct mbox_rec r;
	int rc;

	if (!t->write || highestmodseq == 0 || highestmodseq == UINT64_MAX)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (highestmodseq > r.highestmodseq)
		r.highestmodseq = highestmodseq;
	if (r.expunge_floor < r.highestmodseq + 1)
		r.expunge_floor = r.highestmodseq + 1;
	return mbox_rec_store(t, mbox, &r);
}

/* IMAP LIST matching: '*' matches anything, '%' anything but the delimiter. */
static bool match_at(const char *p, const char *n, const char *end)
{
	for (; *p != '\0'; p++, n++) {
		if (*p == '*' || *p == '%') {
			for (const char *s = n;; s++) {
				if (match_at(p + 1, s, end))
					return true;
				if (s == end || (*p == '%' && *s == STORE_DELIM))
					return false;
			}
		}
		if (n == end || *p != *n)
			return false;
	}
	return n == end;
}

bool store_mbox_match(const char *pattern, const char *name, size_t name_len)
{
	char p[2 * STORE_MAX_NAME + 2];
	size_t n = strlen(pattern);

	if (n >= sizeof(p))
		return false;
	memcpy(p, pattern, n + 1);
	if (n >= 5 && str_caseeq(p, 5, "INBOX", 5) &&
	    (n == 5 || p[5] == STORE_DELIM || p[5] == '*' || p[5] == '%'))
		memcpy(p, "INBOX", 5);
	return match_at(p, name, name + name_len);
}

static unsigned list_attrs(struct store_txn *t, uint64_t user, const char *name, size_t len,
			   bool *exists_r, struct store_mbox_info *mi)
{
	uint8_t k[KEY_MAX];
	struct mbox_rec r;
	MDB_val v;
	unsigned attrs = 0;

	*exists_r = mbox_lookup(t, user, name, len, &mi->id) == 0 &&
		    mbox_rec_load(t, mi->id, &r) == 0;
	if (!*exists_r)
		attrs |= STORE_MBOX_NONEXISTENT;
	else {
		attrs |= r.attrs & STORE_MBOX_NOSELECT;
		mi->special = r.special;
	}
	if (store_get(t, DBI_SUBS, k, mbox_key(k, user, name, len), &v) == 0)
		attrs |= STORE_MBOX_SUBSCRIBED;
	if (*exists_r && has_children(t, user, name, len))
		attrs |= STORE_MBOX_HASCHILDREN;
	return attrs;
}

int store_mbox_list(struct store_txn *t, uint64_t user, const char *pattern, bool subscribed_only,
		    int (*cb)(const struct store_mbox_info *mi, void *arg), void *arg)
{
	enum store_dbi d = subscribed_only ? DBI_SUBS : DBI_MBOXES;
	struct store_user u;
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { 8, k }, v;
	int rc;

	if ((rc = store_user_get_id(t, user, &u)) != 0)
		return rc;
	put_be64(k, user);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[d], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		struct store_mbox_info mi = { 0 };
		bool exists;

		if (key.mv_size < 8 || get_be64(key.mv_data) != user) {
			rc = MDB_NOTFOUND;
			break;
		}
		mi.name = (const char *)key.mv_data + 8;
		mi.name_len = key.mv_size - 8;
		if (!store_mbox_match(pattern, mi.name, mi.name_len))
			continue;
		mi.attrs = list_attrs(t, user, mi.name, mi.name_len, &exists, &mi);
		if (!subscribed_only)
			mi.attrs &= ~(unsigned)STORE_MBOX_NONEXISTENT;
		if ((rc = cb(&mi, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_mbox_status(struct store_txn *t, uint64_t mbox, struct store_status *s)
{
	struct mbox_rec r;
	int rc;

	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (r.attrs & STORE_MBOX_NOSELECT)
		return STORE_ENOMBOX;
	memset(s, 0, sizeof(*s));
	s->messages = r.messages;
	s->recent = r.recent;
	s->unseen = r.unseen;
	s->deleted = r.deleted;
	s->uidnext = r.uidnext;
	s->uidvalidity = r.uidvalidity;
	s->highestmodseq = r.highestmodseq;
	s->size = r.size;
	s->first_recent_uid = r.first_recent;
	s->expunge_floor = r.expunge_floor;
	return 0;
}

int store_mbox_info(struct store_txn *t, uint64_t mbox, uint64_t *user_r,
		    struct store_mbox_info *mi)
{
	uint8_t k[8];
	MDB_val v;
	struct mbox_rec r;
	int rc;

	put_be64(k, mbox);
	if ((rc = store_get(t, DBI_MBOX, k, 8, &v)) != 0)
		return rc == STORE_ENOMSG ? STORE_ENOMBOX : rc;
	if ((rc = mbox_rec_decode(&v, &r)) != 0)
		return rc;
	memset(mi, 0, sizeof(*mi));
	mi->id = mbox;
	mi->name = (const char *)v.mv_data + MBOX_REC_FIXED; /* NUL-terminated in the map */
	mi->name_len = r.name_len;
	mi->attrs = r.attrs;
	mi->special = r.special;
	if (user_r != NULL)
		*user_r = r.user;
	return 0;
}

int store_mbox_take_recent(struct store_txn *t, uint64_t mbox, uint32_t *first_recent_r)
{
	struct mbox_rec r;
	int rc;

	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	*first_recent_r = r.first_recent;
	if (r.first_recent == r.uidnext && r.recent == 0)
		return 0;
	r.first_recent = r.uidnext;
	r.recent = 0;
	/* no change record: no NOTIFY event is a claim of \Recent (its STATUS has no RECENT),
	   so a group watching the mailbox is not sent a STATUS for another session's SELECT */
	return mbox_rec_put(t, mbox, &r);
}

int store_mbox_modseq(struct store *st, uint64_t mbox, uint64_t *modseq_r)
{
	struct store_txn *t;
	struct mbox_rec r;
	int rc;

	*modseq_r = 0;
	if ((rc = store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t)) != 0)
		return rc;
	if ((rc = mbox_rec_load(t, mbox, &r)) == 0)
		*modseq_r = r.highestmodseq;
	store_txn_abort(&t);
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* Keywords: per mailbox, index -> name (stored with a NUL). */

int store_mbox_keywords(struct store_txn *t, uint64_t mbox, const char *names[STORE_MAX_KEYWORDS],
			unsigned *n_r)
{
	struct mbox_rec r;
	uint8_t k[9];
	MDB_val v;
	int rc;

	*n_r = 0;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	put_be64(k, mbox);
	for (unsigned i = 0; i < r.nkw && i < STORE_MAX_KEYWORDS; i++) {
		k[8] = (uint8_t)i;
		if ((rc = store_get(t, DBI_KW, k, 9, &v)) != 0)
			return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
		names[i] = v.mv_data;
		*n_r = i + 1;
	}
	return 0;
}

static bool keyword_ok(const char *kw)
{
	size_t n = strlen(kw);

	if (n == 0 || n > STORE_MAX_KEYWORD || kw[0] == '\\')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)kw[i];

		if (ch <= 0x20 || ch >= 0x7f || strchr("(){%*\"\\]", ch) != NULL)
			return false;
	}
	return true;
}

int store_mbox_keyword(struct store_txn *t, uint64_t mbox, const char *kw, bool create,
		       unsigned *idx_r)
{
	struct mbox_rec r;
	uint8_t k[9];
	MDB_val v;
	int rc;

	if (!keyword_ok(kw))
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	put_be64(k, mbox);
	for (unsigned i = 0; i < r.nkw; i++) {
		k[8] = (uint8_t)i;
		if ((rc = store_get(t, DBI_KW, k, 9, &v)) != 0)
			return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
		if (v.mv_size == strlen(kw) + 1 &&
		    str_caseeq(v.mv_data, v.mv_size - 1, kw, v.mv_size - 1)) {
			*idx_r = i;
			return 0;
		}
	}
	if (!create)
		return STORE_ENOMSG;
	if (r.nkw >= STORE_MAX_KEYWORDS)
		return STORE_EKEYWORDS;
	k[8] = (uint8_t)r.nkw;
	if ((rc = store_put(t, DBI_KW, k, 9, kw, strlen(kw) + 1)) != 0)
		return rc;
	*idx_r = r.nkw++;
	/* a new keyword changes the mailbox's FLAGS: FlagChange's, not every kind's */
	return mbox_rec_store_what(t, mbox, &r, STORE_WHAT_FLAGS);
}

/* Maps keyword bits of src to dst's indexes, creating them in dst. */
int mbox_kw_remap(struct store_txn *t, uint64_t src, uint64_t dst, uint64_t kws, uint64_t *out)
{
	uint8_t k[9];
	MDB_val v;
	char name[STORE_MAX_KEYWORD + 1];
	unsigned idx;
	int rc;

	*out = 0;
	put_be64(k, src);
	for (unsigned i = 0; i < STORE_MAX_KEYWORDS && kws != 0; i++) {
		if (!(kws & ((uint64_t)1 << i)))
			continue;
		kws &= ~((uint64_t)1 << i);
		k[8] = (uint8_t)i;
		if ((rc = store_get(t, DBI_KW, k, 9, &v)) != 0)
			return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
		if (v.mv_size == 0 || v.mv_size > sizeof(name))
			return STORE_ECORRUPT;
		memcpy(name, v.mv_data, v.mv_size); /* the put below may move pages */
		if ((rc = store_mbox_keyword(t, dst, name, true, &idx)) != 0)
			return rc;
		*out |= (uint64_t)1 << idx;
	}
	return 0;
}

/* Deletes every mailbox and subscription of user (store_user_delete). */
int store_mbox_remove_all(struct store_txn *t, uint64_t user)
{
	struct rename_item *items = NULL;
	size_t n = 0;
	int rc;

	/* every mailbox: an empty prefix collects them all */
	if ((rc = rename_collect(t, user, "", 0, &items, &n)) != 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct mbox_rec r;

		if ((rc = mbox_rec_load(t, items[i].id, &r)) == 0)
			rc = mbox_drop(t, user, items[i].id, &r);
	}
	free(items);
	if (rc != 0 || (rc = store_del_prefix(t, DBI_SIEVE, user)) != 0 ||
	    (rc = store_annot_drop(t, user)) != 0)
		return rc;
	return store_del_prefix(t, DBI_SUBS, user);
}

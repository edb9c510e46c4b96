/* store_user.c — owns user records: create (with INBOX; refused while a tombstone of
 * store_tomb.c holds the name), lookup, rename, delete with all mail, quota and exact usage,
 * and the user → partition choice. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > STORE_MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] == '\r' || name[i] == '\n')
			return false;
	return true;
}

static void user_rec_encode(const struct user_rec *u, uint8_t b[USER_REC_LEN])
{
	put_be64(b, u->id);
	put_be64(b + 8, u->quota_bytes);
	put_be64(b + 16, u->quota_msgs);
	put_be64(b + 24, u->used_bytes);
	put_be64(b + 32, u->used_msgs);
	put_be64(b + 40, (uint64_t)u->created);
}

void user_rec_decode(const MDB_val *v, struct user_rec *u)
{
	const uint8_t *b = v->mv_data;

	memset(u, 0, sizeof(*u));
	if (v->mv_size < USER_REC_LEN)
		return;
	u->id = get_be64(b);
	u->quota_bytes = get_be64(b + 8);
	u->quota_msgs = get_be64(b + 16);
	u->used_bytes = get_be64(b + 24);
	u->used_msgs = get_be64(b + 32);
	u->created = (int64_t)get_be64(b + 40);
}

static void fill_user(const struct user_rec *r, const char *name, struct store_user *u)
{
	u->id = r->id;
	u->name = name;
	u->quota_bytes = r->quota_bytes;
	u->quota_msgs = r->quota_msgs;
	u->used_bytes = r->used_bytes;
	u->used_msgs = r->used_msgs;
	u->created = r->created;
}

/* The name as stored in userid is not NUL-terminated in the map: return a view. */
static int user_name_of(struct store_txn *t, uint64_t id, MDB_val *name)
{
	uint8_t k[8];
	int rc;

	put_be64(k, id);
	rc = store_get(t, DBI_USERID, k, 8, name);
	if (rc == 0 && name->mv_size > 0 && ((const char *)name->mv_data)[name->mv_size - 1] == 0)
		name->mv_size--; /* stored with its NUL so store_user_get_id can hand it out */
	return rc == STORE_ENOMSG ? STORE_ENOUSER : rc;
}

int user_rec_load_id(struct store_txn *t, uint64_t id, struct user_rec *u)
{
	MDB_val name, v;
	int rc;

	if ((rc = user_name_of(t, id, &name)) != 0)
		return rc;
	if ((rc = store_get(t, DBI_USERS, name.mv_data, name.mv_size, &v)) != 0)
		return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
	user_rec_decode(&v, u);
	return 0;
}

int user_rec_store_id(struct store_txn *t, const struct user_rec *u)
{
	uint8_t b[USER_REC_LEN];
	MDB_val name;
	char key[STORE_MAX_NAME];
	int rc;

	if ((rc = user_name_of(t, u->id, &name)) != 0)
		return rc;
	if (name.mv_size > sizeof(key))
		return STORE_ECORRUPT;
	memcpy(key, name.mv_data, name.mv_size); /* mdb_put may move the page */
	user_rec_encode(u, b);
	return store_put(t, DBI_USERS, key, name.mv_size, b, sizeof(b));
}

/* Adds to the user's usage; with check, refuses growth past the quota (STORE_EQUOTA). */
int store_user_charge(struct store_txn *t, uint64_t user, int64_t bytes, int64_t msgs, bool check)
{
	struct user_rec u;
	int rc;

	if ((rc = user_rec_load_id(t, user, &u)) != 0)
		return rc;
	if (check && bytes > 0 && u.quota_bytes != 0 &&
	    u.used_bytes + (uint64_t)bytes > u.quota_bytes)
		return STORE_EQUOTA;
	if (check && msgs > 0 && u.quota_msgs != 0 && u.used_msgs + (uint64_t)msgs > u.quota_msgs)
		return STORE_EQUOTA;
	u.used_bytes = (uint64_t)((int64_t)u.used_bytes + bytes);
	u.used_msgs = (uint64_t)((int64_t)u.used_msgs + msgs);
	return user_rec_store_id(t, &u);
}

int store_user_locate(struct store *st, const char *name, unsigned *part_r)
{
	unsigned first = store_partition_for(st, name);
	struct store_txn *t;
	MDB_val v;
	int rc;

	for (unsigned i = 0; i < st->nparts; i++) {
		unsigned p = (first + i) % st->nparts;

		if ((rc = store_txn_begin(st, p, STORE_TXN_READ, &t)) != 0)
			return rc;
		rc = store_get(t, DBI_USERS, name, strlen(name), &v);
		store_txn_abort(&t);
		if (rc == 0) {
			*part_r = p;
			return 0;
		}
		if (rc != STORE_ENOMSG)
			return rc;
	}
	return STORE_ENOUSER;
}

int store_user_create(struct store_txn *t, const char *name, uint64_t *id_r)
{
	struct user_rec u = { 0 };
	uint8_t b[USER_REC_LEN], k[8];
	uint64_t inbox;
	MDB_val v;
	int rc;

	if (!name_ok(name))
		return STORE_EINVAL;
	rc = store_get(t, DBI_USERS, name, strlen(name), &v);
	if (rc == 0)
		return STORE_EEXIST;
	if (rc != STORE_ENOMSG)
		return rc;
	/* moved away (store_tomb.c): no account here while the tombstone holds; an expired
	   one goes with the new user */
	struct store_tomb tb;

	rc = store_tomb_get(t, name, &tb);
	if (rc == 0 && !tb.expired)
		return STORE_EMOVED;
	if ((rc == 0 || rc == STORE_ECORRUPT) && (rc = store_tomb_clear(t, name)) != 0)
		return rc;
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	if ((rc = store_next_id(t, &u.id)) != 0)
		return rc;
	u.created = time(NULL);
	user_rec_encode(&u, b);
	put_be64(k, u.id);
	if ((rc = store_put(t, DBI_USERS, name, strlen(name), b, sizeof(b))) != 0 ||
	    (rc = store_put(t, DBI_USERID, k, 8, name, strlen(name) + 1)) != 0)
		return rc;
	if ((rc = store_mbox_create(t, u.id, "INBOX", 0, &inbox)) != 0)
		return rc;
	if ((rc = store_mbox_subscribe(t, u.id, "INBOX", true)) != 0)
		return rc;
	if (id_r != NULL)
		*id_r = u.id;
	return 0;
}

/* The record of the user named name. Errors: STORE_ENOUSER. */
static int user_rec_load_name(struct store_txn *t, const char *name, struct user_rec *r)
{
	MDB_val v;
	int rc = store_get(t, DBI_USERS, name, strlen(name), &v);

	if (rc != 0)
		return rc == STORE_ENOMSG ? STORE_ENOUSER : rc;
	user_rec_decode(&v, r);
	return 0;
}

int store_user_get(struct store_txn *t, const char *name, struct store_user *u_r)
{
	struct user_rec r;
	int rc = user_rec_load_name(t, name, &r);

	if (rc != 0)
		return rc;
	fill_user(&r, name, u_r);
	return 0;
}

int store_user_get_id(struct store_txn *t, uint64_t id, struct store_user *u_r)
{
	struct user_rec r;
	MDB_val name;
	int rc;

	if ((rc = user_name_of(t, id, &name)) != 0)
		return rc;
	if ((rc = user_rec_load_id(t, id, &r)) != 0)
		return rc;
	fill_user(&r, name.mv_data, u_r);
	return 0;
}

int store_user_delete(struct store_txn *t, const char *name)
{
	struct store_user u;
	uint8_t k[8];
	int rc;

	if ((rc = store_user_get(t, name, &u)) != 0)
		return rc;
	if ((rc = store_mbox_remove_all(t, u.id)) != 0)
		return rc;
	/* the rights given to the user on others' mailboxes: a user made later with the name
	   must not inherit them */
	if ((rc = store_acl_drop_id(t, name, NULL)) != 0 ||
	    (rc = store_seen_drop_viewer(t, name)) != 0)
		return rc;
	put_be64(k, u.id);
	if ((rc = store_del(t, DBI_USERID, k, 8)) != 0 ||
	    (rc = store_del(t, DBI_USERS, name, strlen(name))) != 0)
		return rc == STORE_ENOMSG ? STORE_ECORRUPT : rc;
	return 0;
}

int store_user_rename(struct store_txn *t, const char *from, const char *to)
{
	uint8_t b[USER_REC_LEN], k[8];
	struct user_rec r;
	MDB_val v;
	int rc;

	if (!name_ok(to))
		return STORE_EINVAL;
	if ((rc = store_get(t, DBI_USERS, from, strlen(from), &v)) != 0)
		return rc == STORE_ENOMSG ? STORE_ENOUSER : rc;
	user_rec_decode(&v, &r);
	rc = store_get(t, DBI_USERS, to, strlen(to), &v);
	if (rc == 0)
		return STORE_EEXIST;
	if (rc != STORE_ENOMSG)
		return rc;
	user_rec_encode(&r, b);
	put_be64(k, r.id);
	if ((rc = store_del(t, DBI_USERS, from, strlen(from))) != 0 ||
	    (rc = store_put(t, DBI_USERS, to, strlen(to), b, sizeof(b))) != 0 ||
	    (rc = store_put(t, DBI_USERID, k, 8, to, strlen(to) + 1)) != 0)
		return rc;
	/* the rights given to the user on this partition's mailboxes go with the name, and
	   the user's private \Seen on them */
	if ((rc = store_seen_rename_viewer(t, from, to)) != 0)
		return rc;
	return store_acl_rename_id(t, from, to, r.id, NULL);
}

int store_user_set_quota(struct store_txn *t, const char *name, uint64_t bytes, uint64_t msgs)
{
	struct user_rec r;
	int rc = user_rec_load_name(t, name, &r);

	if (rc != 0)
		return rc;
	r.quota_bytes = bytes;
	r.quota_msgs = msgs;
	return user_rec_store_id(t, &r);
}

int store_user_list(struct store_txn *t, int (*cb)(const struct store_user *u, void *arg),
		    void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct user_rec r;
	struct store_user u;
	char name[STORE_MAX_NAME + 1];
	int rc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_USERS], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while ((rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (k.mv_size > STORE_MAX_NAME)
			continue;
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		user_rec_decode(&v, &r);
		fill_user(&r, name, &u);
		if ((rc = cb(&u, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_user_bytes(struct store_txn *t, uint64_t *bytes_r)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct user_rec r;
	int rc, op = MDB_FIRST;

	*bytes_r = 0;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_USERS], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &v, op) == 0) {
		op = MDB_NEXT;
		user_rec_decode(&v, &r);
		*bytes_r += r.used_bytes;
	}
	mdb_cursor_close(c);
	return 0;
}

/* store_user_rename_subs: one partition's subscriptions under from, named under to. */
struct subs_move {
	const char *from, *to;
	size_t fl, tl;
	uint64_t n;
};

static int subs_move_part(struct store_txn *t, void *arg)
{
	struct subs_move *m = arg;
	struct key {
		uint8_t k[8 + STORE_MAX_NAME];
		size_t len;
	} *v = NULL;
	size_t n = 0;
	MDB_cursor *c;
	MDB_val k, val;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_SUBS], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	/* read whole first: the puts and deletes may move the pages a cursor points into */
	for (rc = mdb_cursor_get(c, &k, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &val, MDB_NEXT)) {
		const char *name = (const char *)k.mv_data + 8;
		size_t len = k.mv_size - 8;

		if (k.mv_size < 8 || k.mv_size > 8 + STORE_MAX_NAME || len < m->fl ||
		    memcmp(name, m->from, m->fl) != 0 || (len > m->fl && name[m->fl] != '/') ||
		    len - m->fl + m->tl > STORE_MAX_MBOX_NAME)
			continue; /* (one whose new name is too long keeps the old: it names nothing) */
		if (n % 16 == 0)
			v = xreallocarray(v, n + 16, sizeof(*v));
		memcpy(v[n].k, k.mv_data, k.mv_size);
		v[n++].len = k.mv_size;
	}
	mdb_cursor_close(c);
	rc = rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "subscriptions");
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint8_t nk[8 + STORE_MAX_NAME];
		size_t rest = v[i].len - 8 - m->fl;

		memcpy(nk, v[i].k, 8);
		memcpy(nk + 8, m->to, m->tl);
		memcpy(nk + 8 + m->tl, v[i].k + 8 + m->fl, rest);
		if ((rc = store_del(t, DBI_SUBS, v[i].k, v[i].len)) == 0 &&
		    (rc = store_put(t, DBI_SUBS, nk, 8 + m->tl + rest, "", 0)) == 0)
			rc = store_change_note(t, STORE_CHANGE_SUBSCRIBE, get_be64(nk), 0,
					       (const char *)nk + 8, m->tl + rest, NULL, 0);
		m->n += rc == 0;
	}
	free(v);
	return rc;
}

int store_user_rename_subs(struct store *st, const char *from, const char *to, uint64_t *n_r)
{
	struct subs_move m = { from, to, strlen(from), strlen(to), 0 };
	int rc = 0;

	if (m.fl == 0 || m.tl == 0 || m.fl > STORE_MAX_NAME || m.tl > STORE_MAX_NAME)
		return STORE_EINVAL;
	for (unsigned p = 0; p < st->nparts && rc == 0; p++)
		rc = store_write(st, p, subs_move_part, &m);
	if (n_r != NULL)
		*n_r = m.n;
	return rc;
}

/* store_acl.c — owns the `acl` DBI: the access control lists of mailboxes (IMAP ACL, RFC
 * 4314). A row is keyed be64 mailbox id + the identifier's bytes ("bob", "anyone", or "-bob"
 * for a negative right); its value is be32, a bit per right of STORE_ACL_RIGHTS. The owner
 * is never a row: the owner holds every right (store.h). "anyone" and "authenticated" are
 * the two groups; any other identifier a list is given names a user of the store. Rows go with their mailbox (delete)
 * and follow it (rename keeps the id); they are in the owner's partition, so a backup's
 * index copy holds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define ACL_KEY_MAX (8 + STORE_ACL_ID_MAX)

static size_t acl_key(uint8_t *k, uint64_t mbox, const char *id, size_t len)
{
	put_be64(k, mbox);
	memcpy(k + 8, id, len);
	return 8 + len;
}

bool store_acl_id_valid(const char *id, size_t len)
{
	size_t from = len > 0 && id[0] == '-' ? 1 : 0;

	if (len <= from || len > STORE_ACL_ID_MAX)
		return false;
	for (size_t i = from; i < len; i++) {
		unsigned char ch = (unsigned char)id[i];

		if (ch <= 0x20 || ch == 0x7f)
			return false;
	}
	return true;
}

/* Whether id (its '-' taken off) is one of the groups "anyone" and "authenticated". */
static bool acl_id_group(const char *id, size_t len)
{
	if (len > 0 && id[0] == '-') {
		id++;
		len--;
	}
	return (len == 6 && memcmp(id, "anyone", 6) == 0) ||
	       (len == 13 && memcmp(id, "authenticated", 13) == 0);
}

int store_acl_id_known(struct store *st, const char *id, size_t len)
{
	char name[STORE_ACL_ID_MAX + 1];
	unsigned part;

	if (!store_acl_id_valid(id, len))
		return STORE_ENOUSER;
	if (acl_id_group(id, len))
		return 0;
	if (id[0] == '-') {
		id++;
		len--;
	}
	if (len > STORE_MAX_NAME)
		return STORE_ENOUSER;
	memcpy(name, id, len);
	name[len] = '\0';
	return store_user_locate(st, name, &part);
}

int store_acl_parse(const char *s, size_t len, uint32_t *rights_r)
{
	uint32_t r = 0;

	for (size_t i = 0; i < len; i++) {
		const char *p = s[i] != '\0' ? strchr(STORE_ACL_RIGHTS, s[i]) : NULL;

		if (s[i] == 'c') /* RFC 4314 2.1.1: the obsolete "create" is k and x */
			r |= STORE_ACL_CREATE | STORE_ACL_DELETE_MBOX;
		else if (s[i] == 'd') /* and "delete" is t and e */
			r |= STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE;
		else if (p == NULL)
			return -1;
		else
			r |= 1u << (p - STORE_ACL_RIGHTS);
	}
	*rights_r = r;
	return 0;
}

int store_acl_parse_change(const char *s, size_t len, char *mod_r, uint32_t *rights_r)
{
	*mod_r = 0;
	if (len > 0 && (s[0] == '+' || s[0] == '-')) {
		*mod_r = s[0];
		s++;
		len--;
	}
	return store_acl_parse(s, len, rights_r);
}

uint32_t store_acl_apply(uint32_t had, char mod, uint32_t rights)
{
	return mod == '+' ? had | rights : mod == '-' ? had & ~rights : rights;
}

size_t store_acl_format(uint32_t rights, char out[STORE_ACL_TEXT_MAX])
{
	const uint32_t c = STORE_ACL_CREATE | STORE_ACL_DELETE_MBOX,
		       d = STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE;
	size_t n = 0;

	/* in the order RFC 4314's examples write them: lrswipkxte, then c d, then a */
	for (size_t i = 0; STORE_ACL_RIGHTS[i] != 'a'; i++)
		if (rights & (1u << i))
			out[n++] = STORE_ACL_RIGHTS[i];
	if ((rights & c) == c)
		out[n++] = 'c';
	if ((rights & d) == d)
		out[n++] = 'd';
	if (rights & STORE_ACL_ADMIN)
		out[n++] = 'a';
	out[n] = '\0';
	return n;
}

int store_acl_get(struct store_txn *t, uint64_t mbox, const char *id, size_t len,
		  uint32_t *rights_r)
{
	uint8_t k[ACL_KEY_MAX];
	MDB_val v;
	int rc;

	if (!store_acl_id_valid(id, len))
		return STORE_ENOMSG; /* none can have been stored */
	if ((rc = store_get(t, DBI_ACL, k, acl_key(k, mbox, id, len), &v)) != 0)
		return rc;
	if (v.mv_size != 4)
		return STORE_ECORRUPT;
	*rights_r = get_be32(v.mv_data) & STORE_ACL_ALL;
	return 0;
}

/* The rows of mbox: how many, stopping at stop. */
static int acl_count(struct store_txn *t, uint64_t mbox, uint32_t stop, uint32_t *n_r)
{
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	uint32_t n = 0;
	int rc;

	put_be64(k, mbox);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ACL], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && n < stop;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size < 8 || get_be64(key.mv_data) != mbox)
			break;
		n++;
	}
	mdb_cursor_close(c);
	*n_r = n;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "acl count");
}

int store_acl_set(struct store_txn *t, uint64_t mbox, const char *id, size_t len, uint32_t rights)
{
	uint8_t k[ACL_KEY_MAX], val[4];
	struct mbox_rec r;
	size_t kl;
	MDB_val v;
	uint32_t n = 0;
	int rc;

	if (!t->write || !store_acl_id_valid(id, len) || (rights & ~STORE_ACL_ALL) != 0)
		return STORE_EINVAL;
	if ((rc = mbox_rec_load(t, mbox, &r)) != 0)
		return rc;
	if (r.attrs & STORE_MBOX_NOSELECT)
		return STORE_ENOMBOX;
	kl = acl_key(k, mbox, id, len);
	rc = store_get(t, DBI_ACL, k, kl, &v);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	if (rights == 0) /* no rights: no row (absent: nothing to do) */
		return rc == STORE_ENOMSG ? 0 : store_del(t, DBI_ACL, k, kl);
	if (rc == STORE_ENOMSG) {
		if ((rc = acl_count(t, mbox, STORE_ACL_MAX, &n)) != 0)
			return rc;
		if (n >= STORE_ACL_MAX)
			return STORE_ELIMIT;
	}
	put_be32(val, rights);
	return store_put(t, DBI_ACL, k, kl, val, sizeof(val));
}

int store_acl_list(struct store_txn *t, uint64_t mbox,
		   int (*cb)(const char *id, size_t len, uint32_t rights, void *arg), void *arg)
{
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	int rc, stop = 0;

	put_be64(k, mbox);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ACL], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && stop == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size <= 8 || get_be64(key.mv_data) != mbox)
			break;
		if (v.mv_size != 4)
			continue; /* verify counts it */
		stop = cb((const char *)key.mv_data + 8, key.mv_size - 8,
			  get_be32(v.mv_data) & STORE_ACL_ALL, arg);
	}
	mdb_cursor_close(c);
	if (stop != 0)
		return stop;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "acl list");
}

struct acl_rows {
	struct acl_row_copy {
		uint8_t k[ACL_KEY_MAX];
		size_t len;
		uint32_t rights;
	} * v;
	size_t n;
};

static int acl_copy_cb(const char *id, size_t len, uint32_t rights, void *arg)
{
	struct acl_rows *r = arg;

	if (len > STORE_ACL_ID_MAX)
		return 0;
	if (r->n % 16 == 0)
		r->v = xreallocarray(r->v, r->n + 16, sizeof(*r->v));
	memcpy(r->v[r->n].k, id, len);
	r->v[r->n].len = len;
	r->v[r->n++].rights = rights;
	return 0;
}

int store_acl_copy(struct store_txn *t, uint64_t from, uint64_t to)
{
	struct acl_rows r = { NULL, 0 };
	int rc;

	if (!t->write)
		return STORE_EINVAL;
	/* read whole first: the puts may move the pages a cursor points into */
	rc = store_acl_list(t, from, acl_copy_cb, &r);
	for (size_t i = 0; i < r.n && rc == 0; i++)
		rc = store_acl_set(t, to, (const char *)r.v[i].k, r.v[i].len, r.v[i].rights);
	free(r.v);
	return rc;
}

/* The rights row id holds (0 for none). */
static int acl_row(struct store_txn *t, uint64_t mbox, const char *id, size_t len, uint32_t *r)
{
	int rc = store_acl_get(t, mbox, id, len, r);

	if (rc == STORE_ENOMSG) {
		*r = 0;
		return 0;
	}
	return rc;
}

int store_acl_rights(struct store_txn *t, uint64_t mbox, const char *user, uint32_t *rights_r)
{
	size_t len = strlen(user);
	char neg[STORE_ACL_ID_MAX + 1];
	uint32_t mine, any, auth, nmine = 0, nany, nauth;
	int rc;

	if ((rc = acl_row(t, mbox, user, len, &mine)) != 0 ||
	    (rc = acl_row(t, mbox, "anyone", 6, &any)) != 0 ||
	    (rc = acl_row(t, mbox, "-anyone", 7, &nany)) != 0 ||
	    (rc = acl_row(t, mbox, "authenticated", 13, &auth)) != 0 ||
	    (rc = acl_row(t, mbox, "-authenticated", 14, &nauth)) != 0)
		return rc;
	if (len < STORE_ACL_ID_MAX) {
		neg[0] = '-';
		memcpy(neg + 1, user, len);
		if ((rc = acl_row(t, mbox, neg, len + 1, &nmine)) != 0)
			return rc;
	}
	/* RFC 4314 2: the union of the identifiers' rights, less the union of the negative
	   ones */
	*rights_r = (mine | any | auth) & ~(nmine | nany | nauth);
	return 0;
}

/* Calls fn for every row of t's partition, in key order (fn must not write). */
static int acl_walk(struct store_txn *t, void (*fn)(const MDB_val *k, const MDB_val *v, void *arg),
		    void *arg)
{
	MDB_cursor *c;
	MDB_val key, v;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ACL], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT))
		fn(&key, &v, arg);
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "acl rows");
}

struct acl_ids {
	const char *user;
	size_t len, n, cap;
	uint64_t *ids;
};

static void acl_candidate(const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acl_ids *a = arg;
	const char *id = (const char *)k->mv_data + 8;
	size_t il = k->mv_size > 8 ? k->mv_size - 8 : 0;
	uint64_t mbox;

	(void)v;
	if (il == 0 || !((il == a->len && memcmp(id, a->user, a->len) == 0) ||
			 (id[0] != '-' && acl_id_group(id, il))))
		return;
	mbox = get_be64(k->mv_data);
	if (a->n > 0 && a->ids[a->n - 1] == mbox)
		return;
	if (a->n == a->cap)
		a->ids = xreallocarray(a->ids, a->cap = a->cap * 2 + 16, sizeof(*a->ids));
	a->ids[a->n++] = mbox;
}

/* The mailboxes with a row naming user, anyone or authenticated, each once (rows are in mailbox order). */
static int acl_candidates(struct store_txn *t, const char *user, uint64_t **ids_r, size_t *n_r)
{
	struct acl_ids a = { .user = user, .len = strlen(user) };
	int rc = acl_walk(t, acl_candidate, &a);

	*ids_r = a.ids;
	*n_r = a.n;
	return rc;
}

int store_acl_shared(struct store_txn *t, const char *user, uint32_t want,
		     int (*cb)(const struct store_acl_shared *sh, void *arg), void *arg)
{
	uint64_t *ids = NULL;
	size_t n = 0;
	int rc = acl_candidates(t, user, &ids, &n);

	for (size_t i = 0; i < n && rc == 0; i++) {
		struct store_acl_shared sh = { .mbox = ids[i] };
		struct store_user u;
		struct mbox_rec r;

		if ((rc = store_acl_rights(t, ids[i], user, &sh.rights)) != 0)
			break;
		if ((sh.rights & want) != want || want == 0)
			continue;
		if ((rc = mbox_rec_load(t, ids[i], &r)) == STORE_ENOMBOX) {
			rc = 0; /* a row verify would count */
			continue;
		}
		if (rc != 0 || (r.attrs & STORE_MBOX_NOSELECT))
			continue;
		if ((rc = store_user_get_id(t, r.user, &u)) != 0) {
			rc = rc == STORE_ENOUSER ? 0 : rc;
			continue;
		}
		if (strcmp(u.name, user) == 0)
			continue; /* the user's own: never listed as shared */
		sh.owner = r.user;
		sh.owner_name = u.name;
		sh.name = r.namebuf;
		sh.name_len = r.name_len;
		rc = cb(&sh, arg);
	}
	free(ids);
	return rc;
}

int store_acl_drop(struct store_txn *t, uint64_t mbox)
{
	return store_del_prefix(t, DBI_ACL, mbox);
}

/* Reads every row, deleting after (a delete may move the pages the cursor points into) those
   drop picks when del; *n_r counts the picked rows, *deleted_r the deleted ones. */
static int acl_sweep(struct store_txn *t,
		     bool (*drop)(const MDB_val *k, const MDB_val *v, void *arg), void *arg,
		     bool del, uint64_t *n_r, uint64_t *deleted_r)
{
	MDB_cursor *c;
	MDB_val key, v;
	struct row {
		uint8_t k[ACL_KEY_MAX];
		size_t len;
	} *gone = NULL;
	size_t n = 0, cap = 0;
	int rc;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ACL], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (!drop(&key, &v, arg))
			continue;
		(*n_r)++;
		if (!del || key.mv_size > ACL_KEY_MAX)
			continue;
		if (n == cap)
			gone = xreallocarray(gone, cap = cap * 2 + 8, sizeof(*gone));
		memcpy(gone[n].k, key.mv_data, key.mv_size);
		gone[n++].len = key.mv_size;
	}
	mdb_cursor_close(c);
	rc = rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "acl sweep");
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((rc = store_del(t, DBI_ACL, gone[i].k, gone[i].len)) == 0)
			(*deleted_r)++;
	free(gone);
	return rc;
}

/* The user an identifier names: "bob" and "-bob" name bob; the groups (and their negative
   rows) none. */
static bool acl_id_user(const char *id, size_t len, const char **user_r, size_t *len_r)
{
	if (acl_id_group(id, len))
		return false;
	if (len > 0 && id[0] == '-') {
		id++;
		len--;
	}
	*user_r = id;
	*len_r = len;
	return true;
}

struct acl_name {
	const char *name;
	size_t len;
};

static bool acl_names(const MDB_val *k, const MDB_val *v, void *arg)
{
	const struct acl_name *a = arg;
	const char *u;
	size_t ul;

	(void)v;
	return k->mv_size > 8 &&
	       acl_id_user((const char *)k->mv_data + 8, k->mv_size - 8, &u, &ul) &&
	       ul == a->len && memcmp(u, a->name, ul) == 0;
}

int store_acl_drop_id(struct store_txn *t, const char *user, uint64_t *n_r)
{
	struct acl_name a = { user, strlen(user) };
	uint64_t seen = 0, n = 0;
	int rc;

	if (!t->write)
		return STORE_EINVAL;
	rc = acl_sweep(t, acl_names, &a, true, &seen, &n);
	if (n_r != NULL)
		*n_r = n;
	return rc;
}

/* store_acl_forget and store_acl_carry: in each partition where no user has the name user,
   its rows go (to NULL) or name to. */
struct acl_each {
	const char *user, *to;
	uint64_t n;
};

static int acl_each(struct store *st, const char *user, const char *to, uint64_t *n_r);

int store_acl_forget(struct store *st, const char *user, uint64_t *n_r)
{
	return acl_each(st, user, NULL, n_r);
}

/* A row that store_acl_rename_id rewrites: its key, value, and whether it names from. */
struct acl_move {
	uint8_t k[ACL_KEY_MAX];
	size_t len;
	uint8_t val[4];
	bool neg; /* "-from" (or "-to") */
	bool from;
};

/* Whether the row k names user (as "user" or "-user"): *neg_r then says which. */
static bool acl_row_names(const MDB_val *k, const char *user, size_t len, bool *neg_r)
{
	const char *id = (const char *)k->mv_data + 8, *u;
	size_t ul;

	if (k->mv_size <= 8 || k->mv_size > ACL_KEY_MAX ||
	    !acl_id_user(id, k->mv_size - 8, &u, &ul) || ul != len || memcmp(u, user, len) != 0)
		return false;
	*neg_r = id[0] == '-';
	return true;
}

struct acl_moves {
	const char *from, *to;
	size_t fl, tl;
	uint64_t owner;
	struct acl_move *mv;
	size_t n, cap;
};

static void acl_move_pick(const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acl_moves *a = arg;
	bool neg, isfrom = acl_row_names(k, a->from, a->fl, &neg);

	if (!isfrom && (a->owner == 0 || !acl_row_names(k, a->to, a->tl, &neg)))
		return;
	if (v->mv_size != 4)
		return; /* verify's to count and repair */
	if (a->n == a->cap)
		a->mv = xreallocarray(a->mv, a->cap = a->cap * 2 + 8, sizeof(*a->mv));
	memcpy(a->mv[a->n].k, k->mv_data, k->mv_size);
	a->mv[a->n].len = k->mv_size;
	memcpy(a->mv[a->n].val, v->mv_data, 4);
	a->mv[a->n].neg = neg;
	a->mv[a->n++].from = isfrom;
}

/* The rows naming from, and those naming to on owner's mailboxes, into *mv_r. */
static int acl_rename_rows(struct store_txn *t, const char *from, const char *to, uint64_t owner,
			   struct acl_move **mv_r, size_t *n_r)
{
	struct acl_moves a = { from, to, strlen(from), strlen(to), owner, NULL, 0, 0 };
	int rc = acl_walk(t, acl_move_pick, &a);

	*mv_r = a.mv;
	*n_r = a.n;
	return rc;
}

int store_acl_rename_id(struct store_txn *t, const char *from, const char *to, uint64_t owner,
			uint64_t *n_r)
{
	size_t tl = strlen(to), n = 0;
	struct acl_move *mv = NULL;
	uint64_t moved = 0;
	int rc;

	if (!t->write || strcmp(from, to) == 0)
		return t->write ? 0 : STORE_EINVAL;
	rc = acl_rename_rows(t, from, to, owner, &mv, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t mbox = get_be64(mv[i].k);
		struct mbox_rec r;
		uint8_t k[ACL_KEY_MAX];
		char id[STORE_ACL_ID_MAX + 1];

		bool owned = false;

		if (owner != 0) {
			if ((rc = mbox_rec_load(t, mbox, &r)) == 0)
				owned = r.user == owner;
			else if (rc != STORE_ENOMBOX)
				break;
			rc = 0;
		}
		if (!mv[i].from && !owned)
			continue; /* a row naming to stays, but on the owner's own mailboxes */
		if ((rc = store_del(t, DBI_ACL, mv[i].k, mv[i].len)) != 0)
			break;
		if (owned)
			continue; /* the renamed owner's own mailbox: never a row */
		if (tl + (mv[i].neg ? 1 : 0) > STORE_ACL_ID_MAX) {
			rc = STORE_EINVAL; /* to cannot be an identifier */
			break;
		}
		snprintf(id, sizeof(id), "%s%s", mv[i].neg ? "-" : "", to);
		/* the grant moves: it replaces a row already naming to on that mailbox */
		rc = store_put(t, DBI_ACL, k, acl_key(k, mbox, id, strlen(id)), mv[i].val, 4);
		moved++;
	}
	free(mv);
	if (n_r != NULL)
		*n_r = moved;
	return rc;
}

static int acl_each_part(struct store_txn *t, void *arg)
{
	struct acl_each *e = arg;
	MDB_val v;
	int rc = store_get(t, DBI_USERS, e->user, strlen(e->user), &v);

	/* a user of the name lives here: made again after a delete (the rows are theirs), or
	   the renamed user's partition (store_user_rename carries its rows) */
	if (rc == 0)
		return 0;
	if (rc != STORE_ENOMSG)
		return rc;
	/* the user's private \Seen on this partition's mailboxes (store_seen.c) too */
	if ((rc = store_seen_rename_viewer(t, e->user, e->to)) != 0)
		return rc;
	return e->to == NULL ? store_acl_drop_id(t, e->user, &e->n)
			     : store_acl_rename_id(t, e->user, e->to, 0, &e->n);
}

static int acl_each(struct store *st, const char *user, const char *to, uint64_t *n_r)
{
	struct acl_each e = { .user = user, .to = to };
	uint64_t total = 0;
	int rc = 0;

	for (unsigned p = 0; p < st->nparts && rc == 0; p++) {
		e.n = 0;
		if ((rc = store_write(st, p, acl_each_part, &e)) == 0)
			total += e.n;
	}
	if (n_r != NULL)
		*n_r = total;
	return rc;
}

int store_acl_carry(struct store *st, const char *from, const char *to, uint64_t *n_r)
{
	return acl_each(st, from, to, n_r);
}

struct acl_check {
	bool (*mbox_known)(uint64_t mbox, void *arg);
	bool (*user_known)(const char *user, size_t len, void *arg);
	void *arg;
};

static bool acl_bad(const MDB_val *k, const MDB_val *v, void *arg)
{
	const struct acl_check *a = arg;
	const char *id = (const char *)k->mv_data + 8, *u;
	size_t il = k->mv_size - 8, ul;

	if (k->mv_size <= 8 || k->mv_size > ACL_KEY_MAX || v->mv_size != 4 ||
	    !store_acl_id_valid(id, il) || !a->mbox_known(get_be64(k->mv_data), a->arg))
		return true;
	return a->user_known != NULL && acl_id_user(id, il, &u, &ul) &&
	       !a->user_known(u, ul, a->arg);
}

int store_acl_check(struct store_txn *t, bool (*mbox_known)(uint64_t mbox, void *arg),
		    bool (*user_known)(const char *user, size_t len, void *arg), void *arg,
		    bool repair, uint64_t *bad_r, uint64_t *fixed_r)
{
	struct acl_check a = { mbox_known, user_known, arg };

	return acl_sweep(t, acl_bad, &a, repair, bad_r, fixed_r);
}

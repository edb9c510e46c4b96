/* store_tomb.c — owns tombstones (DBI `tombs`): the record "USER moved to HOST at TIME" that
 * `mailctl user move --finish` leaves in the source store's partition of the user when it
 * deletes the user there, so that a host still routing the user here by a stale mailHost
 * gets a temporary refusal and a pointer to the new host instead of an empty account made
 * on first mail or login. Key: the user name's bytes; value: be64 time (seconds), then the
 * host's bytes. A tombstone older than [store] tombstone_age holds nothing (read as expired)
 * until store_user_create replaces it or `mailctl verify --repair` drops it. The table is
 * new and optional: a store made before it gets it empty at the next open (store.c opens
 * every table with MDB_CREATE), so there is no format change (store/README.md). */
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "store/store_private.h"

#define TOMB_FIXED 8 /* be64 time */

/* A host name as mailHost holds it (letters, digits, '.', '-', '_'): safe to quote in a
   referral of IMAP or ManageSieve as it is. */
static bool host_ok(const char *host, size_t n)
{
	if (n == 0 || n > STORE_TOMB_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_'))
			return false;
	}
	return true;
}

static bool user_ok(const char *user, size_t n)
{
	return n > 0 && n <= STORE_MAX_NAME && memchr(user, '\r', n) == NULL &&
	       memchr(user, '\n', n) == NULL;
}

/* One row as a struct store_tomb: -1 when it does not decode. */
static int tomb_decode(const struct store *st, const void *user, size_t ul, const MDB_val *v,
		       struct store_tomb *r)
{
	size_t hl;

	memset(r, 0, sizeof(*r));
	if (ul == 0 || ul > STORE_MAX_NAME || v->mv_size < TOMB_FIXED)
		return -1;
	hl = v->mv_size - TOMB_FIXED;
	if (!host_ok((const char *)v->mv_data + TOMB_FIXED, hl))
		return -1;
	memcpy(r->user, user, ul);
	memcpy(r->host, (const char *)v->mv_data + TOMB_FIXED, hl);
	r->when = (int64_t)get_be64(v->mv_data);
	r->expired = ((int64_t)time(NULL) - r->when) * 1000 >= st->tomb_age;
	return 0;
}

int store_tomb_add(struct store_txn *t, const char *user, const char *host, int64_t when)
{
	uint8_t v[TOMB_FIXED + STORE_TOMB_HOST_MAX];
	size_t ul = strlen(user), hl = strlen(host);

	if (!t->write || !user_ok(user, ul) || !host_ok(host, hl))
		return STORE_EINVAL;
	put_be64(v, (uint64_t)when);
	memcpy(v + TOMB_FIXED, host, hl);
	return store_put(t, DBI_TOMBS, user, ul, v, TOMB_FIXED + hl);
}

int store_tomb_get(struct store_txn *t, const char *user, struct store_tomb *r)
{
	size_t ul = strlen(user);
	MDB_val v;
	int rc;

	if (!user_ok(user, ul))
		return STORE_ENOMSG;
	if ((rc = store_get(t, DBI_TOMBS, user, ul, &v)) != 0)
		return rc;
	return tomb_decode(t->st, user, ul, &v, r) == 0 ? 0 : STORE_ECORRUPT;
}

int store_tomb_find(struct store *st, const char *user, struct store_tomb *r)
{
	unsigned first = store_partition_for(st, user);
	struct store_txn *t;
	int rc;

	for (unsigned i = 0; i < st->nparts; i++) {
		if (store_txn_begin(st, (first + i) % st->nparts, STORE_TXN_READ, &t) != 0)
			continue; /* a partition that cannot be read holds no answer */
		rc = store_tomb_get(t, user, r);
		store_txn_abort(&t);
		if (rc == 0 && !r->expired)
			return 0;
	}
	return STORE_ENOMSG;
}

int store_tomb_clear(struct store_txn *t, const char *user)
{
	size_t ul = strlen(user);
	int rc;

	if (!t->write)
		return STORE_EINVAL;
	if (!user_ok(user, ul))
		return 0;
	rc = store_del(t, DBI_TOMBS, user, ul);
	return rc == STORE_ENOMSG ? 0 : rc;
}

struct forget {
	const char *user;
	bool found;
};

static int forget_fn(struct store_txn *t, void *arg)
{
	struct forget *f = arg;
	size_t ul = strlen(f->user);
	int rc = store_del(t, DBI_TOMBS, f->user, ul);

	f->found = rc == 0;
	return rc == STORE_ENOMSG ? 0 : rc;
}

int store_tomb_forget(struct store *st, const char *user, unsigned *n_r)
{
	struct store_txn *t;
	struct store_tomb tb;
	unsigned n = 0;
	int rc = 0;

	if (n_r != NULL)
		*n_r = 0;
	if (!user_ok(user, strlen(user)))
		return 0;
	for (unsigned p = 0; p < st->nparts; p++) {
		/* a read first: no write txn (and commit) on the partitions without one */
		if ((rc = store_txn_begin(st, p, STORE_TXN_READ, &t)) != 0)
			return rc;
		rc = store_tomb_get(t, user, &tb);
		store_txn_abort(&t);
		if (rc == STORE_ENOMSG)
			continue;
		struct forget f = { user, false };

		if ((rc = store_write(st, p, forget_fn, &f)) != 0)
			return rc;
		n += f.found;
	}
	if (n_r != NULL)
		*n_r = n;
	return 0;
}

int store_tomb_list(struct store_txn *t, int (*cb)(const struct store_tomb *tb, void *arg),
		    void *arg)
{
	MDB_cursor *c;
	MDB_val k, v;
	struct store_tomb tb;
	int rc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_TOMBS], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	while ((rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (tomb_decode(t->st, k.mv_data, k.mv_size, &v, &tb) != 0)
			continue;
		if ((rc = cb(&tb, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_tomb_expire(struct store_txn *t, int64_t now, uint64_t *n_r)
{
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t n = 0;
	int rc;

	if (n_r != NULL)
		*n_r = 0;
	if (!t->write)
		return STORE_EINVAL;
	if (t->failed)
		return STORE_EAGAIN;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_TOMBS], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		/* a row that does not decode holds nothing either */
		if (v.mv_size >= TOMB_FIXED &&
		    (now - (int64_t)get_be64(v.mv_data)) * 1000 < t->st->tomb_age)
			continue;
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
		n++;
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return store_mdb_err(t, rc, "tombstone delete");
	if (n_r != NULL)
		*n_r = n;
	return 0;
}

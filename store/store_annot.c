/* store_annot.c — owns the `annot` DBI: annotations (IMAP METADATA, RFC 5464) of mailboxes
 * and of a user's server view. A row is keyed be64 owner (a mailbox id, or a user id for
 * that user's server entries) + be64 user (the one a /private entry belongs to; 0 for a
 * /shared one) + the entry name folded to lower case ("/private/comment"); its value is the
 * annotation's bytes. Rows go with their mailbox (delete) and follow it (rename keeps the
 * id); a user's delete drops their server rows. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/endian.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

#define ANNOT_KEY_MAX (16 + STORE_ANNOT_ENTRY_MAX)

/* The row key of entry (already checked); its length. */
static size_t annot_key(uint8_t *k, uint64_t owner, uint64_t user, const char *entry, size_t len)
{
	bool shared = len >= 7 && memcmp(entry, "/shared", 7) == 0;

	put_be64(k, owner);
	put_be64(k + 8, shared ? 0 : user);
	memcpy(k + 16, entry, len);
	return 16 + len;
}

bool store_annot_entry_valid(const char *entry, size_t len)
{
	size_t scope;

	if (len == 0 || entry[len - 1] == '/')
		return false;
	if (len > 8 && strncasecmp(entry, "/shared/", 8) == 0)
		scope = 8;
	else if (len > 9 && strncasecmp(entry, "/private/", 9) == 0)
		scope = 9;
	else
		return false;
	for (size_t i = scope; i < len; i++) {
		unsigned char ch = (unsigned char)entry[i];

		if (ch <= 0x19 || ch >= 0x80 || ch == '*' || ch == '%')
			return false;
		if (ch == '/' && entry[i - 1] == '/')
			return false;
	}
	return true;
}

/* entry folded into out (STORE_ANNOT_ENTRY_MAX bytes); false when it is not valid or too
   long to be kept. */
static bool annot_fold(const char *entry, size_t len, char *out)
{
	if (len > STORE_ANNOT_ENTRY_MAX || !store_annot_entry_valid(entry, len))
		return false;
	for (size_t i = 0; i < len; i++)
		out[i] = entry[i] >= 'A' && entry[i] <= 'Z' ? (char)(entry[i] + 32) : entry[i];
	return true;
}

int store_annot_get(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		    size_t len, const void **value_r, size_t *vlen_r)
{
	uint8_t k[ANNOT_KEY_MAX];
	char name[STORE_ANNOT_ENTRY_MAX];
	MDB_val v;
	int rc;

	if (!annot_fold(entry, len, name))
		return STORE_EINVAL;
	if ((rc = store_get(t, DBI_ANNOT, k, annot_key(k, owner, user, name, len), &v)) != 0)
		return rc;
	*value_r = v.mv_data;
	*vlen_r = v.mv_size;
	return 0;
}

/* The rows of owner (every user's): how many, stopping at stop. */
static int annot_count(struct store_txn *t, uint64_t owner, uint32_t stop, uint32_t *n_r)
{
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	uint32_t n = 0;
	int rc;

	put_be64(k, owner);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ANNOT], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && n < stop;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size < 16 || get_be64(key.mv_data) != owner)
			break;
		n++;
	}
	mdb_cursor_close(c);
	*n_r = n;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "annot count");
}

/* The change log's record of a set (NOTIFY's metadata events): owner is a mailbox, or a
   user for the server entries. An entry set to what it was is recorded too. */
static int annot_note(struct store_txn *t, uint64_t owner, const char *name, size_t len)
{
	struct mbox_rec r;
	int rc = mbox_rec_load(t, owner, &r);

	if (rc == 0)
		return store_change_note(t, STORE_CHANGE_ANNOT, r.user, owner, name, len, NULL, 0);
	if (rc != STORE_ENOMBOX)
		return rc;
	return store_change_note(t, STORE_CHANGE_ANNOT, owner, 0, name, len, NULL, 0);
}

int store_annot_set(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		    size_t len, const void *value, size_t vlen, uint32_t max_entries)
{
	uint8_t k[ANNOT_KEY_MAX];
	char name[STORE_ANNOT_ENTRY_MAX];
	size_t kl;
	MDB_val v;
	uint32_t n = 0;
	int rc;

	if (!t->write || !annot_fold(entry, len, name))
		return STORE_EINVAL;
	kl = annot_key(k, owner, user, name, len);
	rc = store_get(t, DBI_ANNOT, k, kl, &v);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	if (value == NULL) { /* NIL: removes it (absent: nothing to do) */
		if (rc == STORE_ENOMSG)
			return 0;
		if ((rc = store_del(t, DBI_ANNOT, k, kl)) != 0)
			return rc;
		return annot_note(t, owner, name, len);
	}
	if (rc == STORE_ENOMSG && max_entries != 0) {
		if ((rc = annot_count(t, owner, max_entries, &n)) != 0)
			return rc;
		if (n >= max_entries)
			return STORE_ELIMIT;
	}
	if ((rc = store_put(t, DBI_ANNOT, k, kl, value, vlen)) != 0)
		return rc;
	return annot_note(t, owner, name, len);
}

/* Whether the row name (below the entry asked for, len bytes) is within depth levels. */
static bool annot_within(const char *name, size_t nlen, size_t len, unsigned depth)
{
	unsigned levels = 0;

	if (nlen == len)
		return true;
	if (name[len] != '/')
		return false; /* "/private/ab" follows "/private/a" but is not below it */
	for (size_t i = len; i < nlen && levels <= depth; i++)
		levels += name[i] == '/';
	return levels <= depth;
}

/* The rows of one (owner, user) key prefix whose names are entry or below it. */
static int annot_walk(struct store_txn *t, const uint8_t *k, size_t kl, unsigned depth,
		      int (*cb)(const struct store_annot *a, void *arg), void *arg)
{
	MDB_cursor *c;
	MDB_val key = { kl, (void *)(uintptr_t)k }, v;
	int rc, stop = 0;

	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ANNOT], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0 && stop == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		const char *name = (const char *)key.mv_data + 16;
		size_t nlen = key.mv_size - 16;

		if (key.mv_size < kl || memcmp(key.mv_data, k, kl) != 0)
			break;
		if (annot_within(name, nlen, kl - 16, depth)) {
			struct store_annot a = { name, nlen, v.mv_data, v.mv_size };

			stop = cb(&a, arg);
		}
	}
	mdb_cursor_close(c);
	if (stop != 0)
		return stop;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "annot list");
}

int store_annot_list(struct store_txn *t, uint64_t owner, uint64_t user, const char *entry,
		     size_t len, unsigned depth, int (*cb)(const struct store_annot *a, void *arg),
		     void *arg)
{
	uint8_t k[ANNOT_KEY_MAX];
	char name[STORE_ANNOT_ENTRY_MAX];

	if (!annot_fold(entry, len, name))
		return STORE_EINVAL;
	return annot_walk(t, k, annot_key(k, owner, user, name, len), depth, cb, arg);
}

int store_annot_all(struct store_txn *t, uint64_t owner, uint64_t user,
		    int (*cb)(const struct store_annot *a, void *arg), void *arg)
{
	uint8_t k[16];
	int rc = 0;

	put_be64(k, owner);
	put_be64(k + 8, user); /* "/private" sorts before "/shared" */
	if (user != 0)
		rc = annot_walk(t, k, sizeof(k), UINT_MAX, cb, arg);
	put_be64(k + 8, 0);
	return rc != 0 ? rc : annot_walk(t, k, sizeof(k), UINT_MAX, cb, arg);
}

int store_annot_drop(struct store_txn *t, uint64_t owner)
{
	return store_del_prefix(t, DBI_ANNOT, owner);
}

int store_annot_copy(struct store_txn *t, uint64_t from, uint64_t to)
{
	uint8_t k[8];
	MDB_cursor *c;
	MDB_val key = { sizeof(k), k }, v;
	struct row {
		char *key, *val;
		size_t klen, vlen;
	} *rows = NULL;
	size_t n = 0, cap = 0;
	int rc;

	put_be64(k, from);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_ANNOT], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	/* read first, write after: a put may move the pages the cursor points into */
	for (rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size < 16 || get_be64(key.mv_data) != from)
			break;
		if (n == cap)
			rows = xreallocarray(rows, cap = cap * 2 + 8, sizeof(*rows));
		rows[n].key = xmemdup0(key.mv_data, key.mv_size);
		rows[n].klen = key.mv_size;
		rows[n].val = xmemdup0(v.mv_data, v.mv_size);
		rows[n++].vlen = v.mv_size;
	}
	mdb_cursor_close(c);
	rc = rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "annot copy");
	for (size_t i = 0; i < n; i++) {
		put_be64((uint8_t *)rows[i].key, to);
		if (rc == 0)
			rc = store_put(t, DBI_ANNOT, rows[i].key, rows[i].klen, rows[i].val,
				       rows[i].vlen);
		free(rows[i].key);
		free(rows[i].val);
	}
	free(rows);
	return rc;
}

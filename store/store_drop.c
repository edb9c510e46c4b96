/* store_drop.c — owns the maildrop records (DBI `drops`, in the queue and the partitions):
 * the identity of a file of mtad's maildrop (mtad/pickup.c) whose message is durable,
 * written in the transaction that makes it so (the queue's that adds its entries, or the
 * partition's of its local delivery: store_batch.c), so that a file is never submitted
 * twice: the pickup asks before each submission and only removes a file already recorded,
 * then drops its record. Also the record of a refused file whose delivery status
 * notification is queued (the DSN's queue id, added in the same txn), so that a file found
 * recorded so is only renamed, its sender never notified twice. mtad's queue runner keeps
 * records of its own here too (keys "q/ID/INDEX", mtad/queue_runner.c): a local delivery
 * of a queue entry's recipient, written with the delivery, so that it is never made
 * twice, and, in the queue, "r/ID/INDEX" and "v/ID/INDEX": that recipient's Sieve redirect
 * copies or vacation reply, written in the txn that queues them, so that a retry of the
 * recipient never queues them again (mtad/deliver_sieve.c). */
#include <string.h>
#include <time.h>

#include "common/endian.h"
#include "store/store_private.h"

#define DROP_VAL_LEN 17 /* be64 queue id, be64 time, u8 kind */

static int key_ok(const char *key)
{
	size_t n = strlen(key);

	return n > 0 && n <= STORE_DROP_KEY_MAX ? 0 : STORE_EINVAL;
}

int store_drop_put_txn(struct store_txn *t, const char *key, uint64_t qid,
		       enum store_drop_kind kind)
{
	uint8_t v[DROP_VAL_LEN];
	int rc;

	if ((rc = key_ok(key)) != 0)
		return rc;
	put_be64(v, qid);
	put_be64(v + 8, (uint64_t)time(NULL));
	v[16] = (uint8_t)kind;
	return store_put(t, DBI_DROPS, key, strlen(key), v, sizeof(v));
}

int store_drop_enqueue_txn(struct store_txn *t, const struct store_queue_msg *qm, size_t n,
			   const struct store_blob *b, const char *key, enum store_drop_kind kind,
			   uint64_t *ids_r)
{
	int rc = 0;

	if (n == 0 || key_ok(key) != 0)
		return STORE_EINVAL;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = store_queue_add_txn(t, &qm[i], b, &ids_r[i]);
	if (rc == 0)
		rc = store_drop_put_txn(t, key, ids_r[0], kind);
	return rc;
}

int store_drop_del_txn(struct store_txn *t, const char *key)
{
	int rc;

	if (key_ok(key) != 0)
		return STORE_EINVAL;
	rc = store_del(t, DBI_DROPS, key, strlen(key));
	return rc == STORE_ENOMSG ? 0 : rc;
}

static void decode(const MDB_val *v, struct store_drop *d)
{
	const uint8_t *p = v->mv_data;

	memset(d, 0, sizeof(*d));
	if (v->mv_size < DROP_VAL_LEN)
		return;
	d->qid = get_be64(p);
	d->when = (int64_t)get_be64(p + 8);
	d->kind = (enum store_drop_kind)p[16];
}

/* The environments in the order they are read: the queue's, then the partitions'. */
static unsigned env_at(const struct store *st, unsigned i)
{
	return i == 0 ? STORE_QUEUE_PART : i - 1;
}

int store_drop_get_txn(struct store_txn *t, const char *key, struct store_drop *d_r)
{
	MDB_val v;
	int rc;

	if (key_ok(key) != 0)
		return STORE_EINVAL;
	if ((rc = store_get(t, DBI_DROPS, key, strlen(key), &v)) != 0)
		return rc;
	decode(&v, d_r);
	d_r->part = t->e->part;
	return 0;
}

int store_drop_get(struct store *st, const char *key, struct store_drop *d_r)
{
	unsigned n = store_partitions(st) + 1;
	int rc = STORE_ENOMSG;

	if (key_ok(key) != 0)
		return STORE_EINVAL;
	for (unsigned i = 0; i < n && rc == STORE_ENOMSG; i++) {
		struct store_txn *t;
		MDB_val v;

		if ((rc = store_txn_begin(st, env_at(st, i), STORE_TXN_READ, &t)) != 0)
			return rc;
		rc = store_get(t, DBI_DROPS, key, strlen(key), &v);
		if (rc == 0) {
			decode(&v, d_r);
			d_r->part = env_at(st, i);
		}
		store_txn_abort(&t);
	}
	return rc;
}

/* One environment's records for store_drop_list; *left counts down. */
static int list_env(struct store *st, unsigned part, size_t *left,
		    int (*cb)(const struct store_drop *d, void *arg), void *arg)
{
	char key[STORE_DROP_KEY_MAX + 1];
	struct store_txn *t;
	struct store_drop d;
	MDB_cursor *c;
	MDB_val k, v;
	int rc, op = MDB_FIRST;

	if ((rc = store_txn_begin(st, part, STORE_TXN_READ, &t)) != 0)
		return rc;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_DROPS], &c)) != 0) {
		store_txn_abort(&t);
		return STORE_EIO;
	}
	while (*left > 0 && (rc = mdb_cursor_get(c, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		if (k.mv_size == 0 || k.mv_size > STORE_DROP_KEY_MAX)
			continue;
		memcpy(key, k.mv_data, k.mv_size);
		key[k.mv_size] = '\0';
		decode(&v, &d);
		d.key = key;
		d.part = part;
		(*left)--;
		if ((rc = cb(&d, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	store_txn_abort(&t);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_drop_list(struct store *st, size_t max, int (*cb)(const struct store_drop *d, void *arg),
		    void *arg)
{
	unsigned n = store_partitions(st) + 1;
	int rc = 0;

	for (unsigned i = 0; i < n && rc == 0 && max > 0; i++)
		rc = list_env(st, env_at(st, i), &max, cb, arg);
	return rc;
}

/* test_store_tomb.c — the tombstones of store_tomb.c: added, read back with their host and
 * time, found from any partition, listed; while one holds, store_user_create refuses the
 * name (STORE_EMOVED, a temporary error); an expired one (older than the store's
 * tombstone_age) is ignored, replaced by a create and dropped by store_tomb_expire; cleared in
 * one partition or forgotten in all; bad names and hosts refused. */
#include <time.h>

#include "store_test.h"

static int w_add(struct store *st, unsigned part, const char *user, const char *host, int64_t when)
{
	struct store_txn *t;
	int rc;

	assert_int_equal(store_txn_begin(st, part, STORE_TXN_WRITE, &t), 0);
	if ((rc = store_tomb_add(t, user, host, when)) != 0) {
		store_txn_abort(&t);
		return rc;
	}
	return store_txn_commit(&t);
}

static int create(struct store *st, unsigned part, const char *user)
{
	struct store_txn *t;
	uint64_t id;
	int rc;

	assert_int_equal(store_txn_begin(st, part, STORE_TXN_WRITE, &t), 0);
	if ((rc = store_user_create(t, user, &id)) != 0) {
		store_txn_abort(&t);
		return rc;
	}
	return store_txn_commit(&t);
}

static int get(struct store *st, unsigned part, const char *user, struct store_tomb *tb)
{
	struct store_txn *t;
	int rc;

	assert_int_equal(store_txn_begin(st, part, STORE_TXN_READ, &t), 0);
	rc = store_tomb_get(t, user, tb);
	store_txn_abort(&t);
	return rc;
}

static int count_cb(const struct store_tomb *tb, void *arg)
{
	unsigned *n = arg;

	(void)tb;
	(*n)++;
	return 0;
}

static unsigned count(struct store *st, unsigned part)
{
	struct store_txn *t;
	unsigned n = 0;

	assert_int_equal(store_txn_begin(st, part, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_tomb_list(t, count_cb, &n), 0);
	store_txn_abort(&t);
	return n;
}

static void test_add_lookup_refuse(void **state)
{
	struct tstore ts;
	struct store_tomb tb;
	int64_t now = (int64_t)time(NULL);
	unsigned p;

	(void)state;
	tstore_open(&ts, 2);
	p = store_partition_for(ts.st, "alice");
	assert_int_equal(get(ts.st, p, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(store_tomb_find(ts.st, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(w_add(ts.st, p, "alice", "store2.heron.test", now), 0);
	assert_int_equal(get(ts.st, p, "alice", &tb), 0);
	assert_string_equal(tb.user, "alice");
	assert_string_equal(tb.host, "store2.heron.test");
	assert_int_equal(tb.when, now);
	assert_false(tb.expired);
	memset(&tb, 0, sizeof(tb));
	assert_int_equal(store_tomb_find(ts.st, "alice", &tb), 0);
	assert_string_equal(tb.host, "store2.heron.test");
	/* the name is held: no account in its partition, a temporary refusal */
	assert_int_equal(create(ts.st, p, "alice"), STORE_EMOVED);
	assert_true(store_err_temporary(STORE_EMOVED));
	assert_string_equal(store_strerror(STORE_EMOVED), "the user moved to another store host");
	unsigned part;

	assert_int_equal(store_user_locate(ts.st, "alice", &part), STORE_ENOUSER);
	/* a replacement: the newer host and time */
	assert_int_equal(w_add(ts.st, p, "alice", "store3.heron.test", now + 1), 0);
	assert_int_equal(get(ts.st, p, "alice", &tb), 0);
	assert_string_equal(tb.host, "store3.heron.test");
	assert_int_equal(tb.when, now + 1);
	assert_int_equal(count(ts.st, p), 1);
	/* others are not held; the tombstone survives a reopen */
	assert_int_equal(create(ts.st, store_partition_for(ts.st, "bob"), "bob"), 0);
	tstore_reopen(&ts);
	assert_int_equal(store_tomb_find(ts.st, "alice", &tb), 0);
	assert_int_equal(create(ts.st, p, "alice"), STORE_EMOVED);
	/* bad input */
	assert_int_equal(w_add(ts.st, p, "", "h", now), STORE_EINVAL);
	assert_int_equal(w_add(ts.st, p, "a\r\nb", "h", now), STORE_EINVAL);
	assert_int_equal(w_add(ts.st, p, "carol", "", now), STORE_EINVAL);
	assert_int_equal(w_add(ts.st, p, "carol", "a host", now), STORE_EINVAL);
	char host[STORE_TOMB_HOST_MAX + 2];

	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	assert_int_equal(w_add(ts.st, p, "carol", host, now), STORE_EINVAL);
	host[STORE_TOMB_HOST_MAX] = '\0';
	assert_int_equal(w_add(ts.st, p, "carol", host, now), 0);
	assert_int_equal(get(ts.st, p, "carol", &tb), 0);
	assert_int_equal(strlen(tb.host), STORE_TOMB_HOST_MAX);
	struct store_txn *t;

	assert_int_equal(store_txn_begin(ts.st, p, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_tomb_add(t, "dave", "h", now), STORE_EINVAL);
	assert_int_equal(store_tomb_clear(t, "alice"), STORE_EINVAL);
	store_txn_abort(&t);
	tstore_close(&ts, true);
}

static void test_expire(void **state)
{
	struct tstore ts;
	struct store_tomb tb;
	struct store_txn *t;
	int64_t now = (int64_t)time(NULL), old = now - STORE_TOMB_AGE_DEFAULT / 1000 - 60;
	uint64_t n = 99;
	unsigned p, q;

	(void)state;
	tstore_open(&ts, 1);
	p = store_partition_for(ts.st, "old");
	q = store_partition_for(ts.st, "young");
	assert_int_equal(w_add(ts.st, p, "old", "s2", old), 0);
	assert_int_equal(w_add(ts.st, q, "young", "s2", now), 0);
	assert_int_equal(w_add(ts.st, p, "older", "s2", old - 86400), 0);
	/* an expired one is read as such, found by no lookup and holds no name */
	assert_int_equal(get(ts.st, p, "old", &tb), 0);
	assert_true(tb.expired);
	assert_int_equal(store_tomb_find(ts.st, "old", &tb), STORE_ENOMSG);
	assert_int_equal(store_tomb_find(ts.st, "young", &tb), 0);
	assert_int_equal(count(ts.st, p), 3);
	/* expire drops the two old ones, keeps the young */
	assert_int_equal(store_txn_begin(ts.st, p, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_tomb_expire(t, now, &n), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(n, 2);
	assert_int_equal(count(ts.st, p), 1);
	assert_int_equal(get(ts.st, p, "old", &tb), STORE_ENOMSG);
	assert_int_equal(get(ts.st, q, "young", &tb), 0);
	/* the young one expires at a later now */
	assert_int_equal(store_txn_begin(ts.st, p, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_tomb_expire(t, now + STORE_TOMB_AGE_DEFAULT / 1000, &n), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(n, 1);
	assert_int_equal(count(ts.st, p), 0);
	/* a create replaces an expired one (and drops it) */
	assert_int_equal(w_add(ts.st, p, "old", "s2", old), 0);
	assert_int_equal(create(ts.st, p, "old"), 0);
	assert_int_equal(get(ts.st, p, "old", &tb), STORE_ENOMSG);
	tstore_close(&ts, true);

	/* [store] tombstone_age: a shorter age makes a minute-old one expired */
	tstore_open(&ts, 1);
	store_close(&ts.st);
	ts.o.tombstone_age_ms = 30 * 1000;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	assert_int_equal(w_add(ts.st, 0, "u", "s2", now - 60), 0);
	assert_int_equal(w_add(ts.st, 0, "v", "s2", now), 0);
	assert_int_equal(store_tomb_find(ts.st, "u", &tb), STORE_ENOMSG);
	assert_int_equal(store_tomb_find(ts.st, "v", &tb), 0);
	assert_int_equal(create(ts.st, 0, "u"), 0);
	assert_int_equal(create(ts.st, 0, "v"), STORE_EMOVED);
	tstore_close(&ts, true);
}

static void test_clear_forget(void **state)
{
	struct tstore ts;
	struct store_tomb tb;
	struct store_txn *t;
	int64_t now = (int64_t)time(NULL);
	unsigned p, other, n = 99;

	(void)state;
	tstore_open(&ts, 3);
	p = store_partition_for(ts.st, "alice");
	other = (p + 1) % 3;
	assert_int_equal(w_add(ts.st, p, "alice", "s2", now), 0);
	assert_int_equal(w_add(ts.st, other, "alice", "s3", now), 0);
	assert_int_equal(w_add(ts.st, p, "bob", "s2", now), 0);
	/* found in a partition other than the user's too */
	assert_int_equal(w_add(ts.st, other, "carol", "s4", now), 0);
	assert_int_equal(store_tomb_find(ts.st, "carol", &tb), 0);
	assert_string_equal(tb.host, "s4");
	/* clear: that partition's only, also when there is none */
	assert_int_equal(store_txn_begin(ts.st, p, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_tomb_clear(t, "alice"), 0);
	assert_int_equal(store_tomb_clear(t, "nobody"), 0);
	assert_int_equal(store_user_create(t, "alice", NULL), 0); /* the move back's create */
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(get(ts.st, p, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(get(ts.st, other, "alice", &tb), 0);
	assert_int_equal(get(ts.st, p, "bob", &tb), 0);
	/* forget: every partition */
	assert_int_equal(w_add(ts.st, p, "alice", "s2", now), 0);
	assert_int_equal(store_tomb_forget(ts.st, "alice", &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(get(ts.st, p, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(get(ts.st, other, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(store_tomb_find(ts.st, "alice", &tb), STORE_ENOMSG);
	assert_int_equal(store_tomb_forget(ts.st, "alice", &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(get(ts.st, p, "bob", &tb), 0);
	assert_int_equal(create(ts.st, p, "bob"), STORE_EMOVED);
	assert_int_equal(store_tomb_forget(ts.st, "bob", NULL), 0);
	assert_int_equal(create(ts.st, p, "bob"), 0);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_lookup_refuse),
		cmocka_unit_test(test_expire),
		cmocka_unit_test(test_clear_forget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

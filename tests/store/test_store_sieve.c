/* test_store_sieve.c — the Sieve part of the store: scripts with programs, the active one,
 * rename/delete rules, quota usage, the vacation/duplicate memories with expiry, their
 * listing and restoring by hash (export/import), that they follow a renamed user, and the
 * cleanup when the user is deleted. */
#include "tests/store/store_test.h"

#include "store/store_sieve.h"

static int mk_user(struct store_txn *t, void *arg)
{
	uint64_t id;

	return store_user_create(t, arg, &id);
}

static int put_two(struct store_txn *t, void *arg)
{
	int rc = store_sieve_put(t, "bob", "a", "keep;", 5, (const uint8_t *)"P1", 2);

	if (rc == 0)
		rc = store_sieve_put(t, "bob", "b", "discard;", 8, (const uint8_t *)"P22", 3);
	if (rc == 0)
		rc = store_sieve_activate(t, "bob", "a");
	return rc;
}

static int names(const struct store_sieve_script *s, void *arg)
{
	strncat(arg, s->name, s->name_len);
	strcat(arg, s->active ? "* " : " ");
	return 0;
}

static void test_scripts(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_sieve_script s, s2;
	char list[128] = "";
	uint64_t n, bytes;
	bool seen;

	char bob[] = "bob";

	tstore_open(&ts, 2);
	assert_int_equal(store_write(ts.st, 0, mk_user, bob), 0);
	assert_int_equal(store_write(ts.st, 0, put_two, NULL), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_sieve_active(t, "bob", &s), 0);
	assert_int_equal(s.src_len, 5);
	assert_memory_equal(s.prog, "P1", 2);
	assert_true(s.active);
	assert_int_equal(store_sieve_list(t, "bob", names, list), 0);
	assert_string_equal(list, "a* b ");
	assert_int_equal(store_sieve_usage(t, "bob", &n, &bytes), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bytes, 13);
	assert_int_equal(store_sieve_delete(t, "bob", "a"), STORE_ENOTSUP);
	assert_int_equal(store_sieve_rename(t, "bob", "a", "b"), STORE_EEXIST);
	assert_int_equal(store_sieve_rename(t, "bob", "a", "c"), 0);
	assert_int_equal(store_sieve_active(t, "bob", &s), 0);
	assert_int_equal(s.name_len, 1);
	/* the name outlives the call: another lookup (whose key is built where the first one's
	   was) does not change it */
	assert_int_equal(store_sieve_get(t, "bob", "zz", &s2), STORE_ENOMSG);
	assert_memory_equal(s.name, "c", 1);
	assert_int_equal(store_sieve_get(t, "bob", "b", &s), 0);
	assert_int_equal(store_sieve_get(t, "bob", "zz", &s2), STORE_ENOMSG);
	assert_memory_equal(s.name, "b", 1);
	assert_int_equal(store_sieve_get(t, "bob", "a", &s), STORE_ENOMSG);
	assert_int_equal(store_sieve_put(t, "bob", "x/y", "", 0, NULL, 0), STORE_EINVAL);
	assert_int_equal(store_sieve_activate(t, "bob", "nope"), STORE_ENOMSG);
	assert_int_equal(store_sieve_activate(t, "bob", NULL), 0);
	assert_int_equal(store_sieve_active(t, "bob", &s), STORE_ENOMSG);
	assert_int_equal(store_sieve_delete(t, "bob", "c"), 0);
	assert_int_equal(store_sieve_get(t, "nobody", "c", &s), STORE_ENOUSER);
	/* memories expire */
	assert_int_equal(store_sieve_remember(t, "bob", STORE_SIEVE_VACATION, "h\x1fx@y", 1000,
					      2000),
			 0);
	assert_int_equal(store_sieve_seen(t, "bob", STORE_SIEVE_VACATION, "h\x1fx@y", 1500, &seen),
			 0);
	assert_true(seen);
	assert_int_equal(store_sieve_seen(t, "bob", STORE_SIEVE_VACATION, "h\x1fx@y", 2000, &seen),
			 0);
	assert_false(seen);
	assert_int_equal(store_sieve_seen(t, "bob", STORE_SIEVE_DUPLICATE, "h\x1fx@y", 1500,
					  &seen),
			 0);
	assert_false(seen);
	assert_int_equal(store_sieve_remember(t, "bob", STORE_SIEVE_VACATION, "other", 3000, 4000),
			 0); /* prunes the expired one */
	assert_int_equal(store_txn_commit(&t), 0);
	/* deleting the user drops everything */
	assert_int_equal(store_write(ts.st, 0, put_two, NULL), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_delete(t, "bob"), 0);
	assert_int_equal(store_user_create(t, "bob", &n), 0);
	assert_int_equal(store_sieve_usage(t, "bob", &n, &bytes), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_sieve_seen(t, "bob", STORE_SIEVE_VACATION, "other", 3500, &seen),
			 0);
	assert_false(seen);
	assert_int_equal(store_txn_commit(&t), 0);
	tstore_close(&ts, true);
}

struct mems {
	size_t n;
	char kind[8];
	uint64_t hash[8];
	int64_t until[8];
};

static int mem_cb(enum store_sieve_memory kind, uint64_t hash, int64_t until, void *arg)
{
	struct mems *m = arg;

	if (m->n == 8)
		return 1;
	m->kind[m->n] = (char)kind;
	m->hash[m->n] = hash;
	m->until[m->n++] = until;
	return 0;
}

static void test_memories(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct mems m = { 0 }, all = { 0 };
	uint64_t id;
	bool seen;

	(void)state;
	tstore_open(&ts, 1);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, "bob", &id), 0);
	assert_int_equal(store_user_create(t, "carol", &id), 0);
	assert_int_equal(store_sieve_remember(t, "bob", STORE_SIEVE_VACATION, "v1", 1000, 5000),
			 0);
	assert_int_equal(store_sieve_remember(t, "bob", STORE_SIEVE_VACATION, "old", 1000, 1500),
			 0);
	assert_int_equal(store_sieve_remember(t, "bob", STORE_SIEVE_DUPLICATE, "d1", 1000, 6000),
			 0);
	/* at 2000 "old" has expired: not listed; INT64_MIN lists it too */
	assert_int_equal(store_sieve_memories(t, "bob", 2000, mem_cb, &m), 0);
	assert_int_equal(m.n, 2);
	assert_int_equal(m.kind[0], 'D');
	assert_int_equal(m.until[0], 6000);
	assert_int_equal(m.kind[1], 'V');
	assert_int_equal(m.until[1], 5000);
	assert_int_equal(store_sieve_memories(t, "bob", INT64_MIN, mem_cb, &all), 0);
	assert_int_equal(all.n, 3);
	assert_int_equal(store_sieve_memories(t, "nobody", 0, mem_cb, &all), STORE_ENOUSER);
	/* restored by hash into another user: seen by the key, with the expiry kept */
	for (size_t i = 0; i < m.n; i++)
		assert_int_equal(store_sieve_restore(t, "carol",
						     (enum store_sieve_memory)m.kind[i], m.hash[i],
						     m.until[i]),
				 0);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_VACATION, "v1", 4999, &seen), 0);
	assert_true(seen);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_VACATION, "v1", 5000, &seen), 0);
	assert_false(seen);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_DUPLICATE, "d1", 5999, &seen),
			 0);
	assert_true(seen);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_VACATION, "old", 1200, &seen),
			 0);
	assert_false(seen);
	/* a shorter expiry does not shorten one remembered longer; a longer one extends it */
	assert_int_equal(store_sieve_restore(t, "carol", STORE_SIEVE_VACATION, m.hash[1], 3000),
			 0);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_VACATION, "v1", 4000, &seen), 0);
	assert_true(seen);
	assert_int_equal(store_sieve_restore(t, "carol", STORE_SIEVE_VACATION, m.hash[1], 7000),
			 0);
	assert_int_equal(store_sieve_seen(t, "carol", STORE_SIEVE_VACATION, "v1", 6000, &seen), 0);
	assert_true(seen);
	assert_int_equal(store_sieve_restore(t, "carol", (enum store_sieve_memory)'S', 1, 7000),
			 STORE_EINVAL);
	assert_int_equal(store_sieve_restore(t, "nobody", STORE_SIEVE_VACATION, 1, 7000),
			 STORE_ENOUSER);
	/* a renamed user keeps its memories (they are keyed by the user's id) */
	assert_int_equal(store_user_rename(t, "bob", "bert"), 0);
	assert_int_equal(store_sieve_seen(t, "bert", STORE_SIEVE_VACATION, "v1", 2000, &seen), 0);
	assert_true(seen);
	assert_int_equal(store_sieve_seen(t, "bert", STORE_SIEVE_DUPLICATE, "d1", 2000, &seen), 0);
	assert_true(seen);
	assert_int_equal(store_txn_commit(&t), 0);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scripts),
		cmocka_unit_test(test_memories),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

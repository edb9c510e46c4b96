/* test_store_sieve.c — the Sieve part of the store: scripts with programs, the active one,
 * rename/delete rules, quota usage, the vacation/duplicate memories with expiry, and the
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scripts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

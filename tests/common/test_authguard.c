/* test_authguard.c — the login throttle's policy (common/authguard.c) over a table of its own:
 * the delays per key, the charge at the start and what each outcome gives back, parallel
 * checks spaced and then refused, a success forgetting its pair only, a known pair spaced by
 * its own failures alone, user names compared as the directory would. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "common/authguard.h"
#include "common/shmtable.h"

static struct shmtable *table;
static struct authguard *g;

static int setup(void **state)
{
	table = shmtable_new(4096, 1, 128, AUTHGUARD_KNOWN_MS);
	g = authguard_over(table);
	return 0;
}

static int teardown(void **state)
{
	authguard_close(&g);
	shmtable_free(&table);
	return 0;
}

/* One failed check of user from addr, checked at once: the failure's hold. */
static int64_t fail_once(const char *addr, const char *user, struct authguard_check *chk)
{
	authguard_begin(g, 1, "test", addr, user, chk);
	assert_false(chk->refused);
	return authguard_failed(g, addr, user);
}

static void test_pair_delays(void **state)
{
	struct authguard_check chk;
	/* no check here waits for its slot, so each hold reaches the next one's: the sums of
	   0.5, 1, 2 and 4 s */
	const int64_t want[] = { 500, 1500, 3500, 7500 };

	for (int i = 0; i < 4; i++) {
		int64_t hold = fail_once("10.0.0.1", "alice", &chk);

		assert_int_equal(chk.pair, (uint32_t)i);
		if (!(hold <= want[i] && hold >= want[i] - 100))
			fail_msg("check %d: hold %lld, want %lld", i, (long long)hold,
				 (long long)want[i]);
		assert_true(hold <= want[i] && hold >= want[i] - 100);
	}
	/* a success forgets the pair's failures (not the user's, not the address's) */
	authguard_begin(g, 1, "test", "10.0.0.1", "alice", &chk);
	assert_true(chk.wait_ms > 7000); /* the last failure's slot */
	authguard_ok(g, "10.0.0.1", "alice");
	authguard_begin(g, 1, "test", "10.0.0.1", "ALICE@heron.test", &chk);
	assert_int_equal(chk.pair, 0);
	assert_int_equal(chk.user, 4);
	assert_int_equal(chk.addr, 4);
	assert_true(chk.known);
	assert_int_equal(chk.wait_ms, 0);
	authguard_temp(g, "10.0.0.1", "alice"); /* not a failure: given back */
	authguard_begin(g, 1, "test", "10.0.0.1", "alice", &chk);
	assert_int_equal(chk.pair, 0);
	assert_int_equal(chk.user, 4);
	authguard_ok(g, "10.0.0.1", "alice");
}

/* Checks that start together are spaced by the pair's growing delays; past the hold they
   are refused, and a refusal is not counted. */
static void test_parallel_spaced_then_refused(void **state)
{
	struct authguard_check chk[10];
	int refused = 0;
	int64_t last = -1;

	for (int i = 0; i < 10; i++) {
		authguard_begin(g, 1, "test", "10.0.0.2", "bob", &chk[i]);
		if (chk[i].refused) {
			refused++;
			continue;
		}
		assert_true(chk[i].wait_ms > last);
		last = chk[i].wait_ms;
	}
	/* 0, 0.5, 1.5, 3.5, 7.5 s: the sixth would wait 15.5 s */
	assert_int_equal(refused, 5);
	assert_true(chk[4].wait_ms >= 7400 && chk[4].wait_ms <= 7500);
	assert_int_equal(chk[9].pair, 5);
}

/* Guesses at one user from many addresses: each pair is new, the user's count grows and past
   9 failures spaces the checks; the user's own known client is not held by that. */
static void test_user_across_addresses(void **state)
{
	struct authguard_check chk;
	char addr[32];

	authguard_begin(g, 1, "test", "10.9.9.9", "carol", &chk);
	authguard_ok(g, "10.9.9.9", "carol");
	for (int i = 0; i < 14; i++) {
		snprintf(addr, sizeof(addr), "10.1.0.%d", i);
		authguard_begin(g, 1, "test", addr, "carol", &chk);
		assert_int_equal(chk.pair, 0);
		assert_int_equal(chk.user, (uint32_t)i);
		assert_false(chk.known);
		assert_true(i < 10 ? chk.wait_ms == 0 : chk.wait_ms > 0);
	}
	authguard_begin(g, 1, "test", "10.9.9.9", "carol", &chk);
	assert_true(chk.known);
	assert_int_equal(chk.wait_ms, 0);
	authguard_ok(g, "10.9.9.9", "carol");
	/* a new address waits for the user's slot */
	authguard_begin(g, 1, "test", "10.2.0.1", "carol", &chk);
	assert_true(chk.refused || chk.wait_ms > 4000);
}

/* One address trying many users: past 19 failures its checks are spaced; checks of many
   users in flight at once are not failures. */
static void test_address_across_users(void **state)
{
	struct authguard_check chk;
	char user[32];

	for (int i = 0; i < 22; i++) {
		snprintf(user, sizeof(user), "sprayed%d", i);
		(void)fail_once("10.3.0.1", user, &chk);
		assert_int_equal(chk.addr, (uint32_t)i);
		assert_true(i < 20 ? chk.wait_ms == 0 : chk.wait_ms > 0);
	}
	/* checks in flight from one address (many clients behind it) are not failures */
	for (int i = 0; i < 50; i++) {
		snprintf(user, sizeof(user), "busy%d", i);
		authguard_begin(g, 1, "test", "10.4.0.1", user, &chk);
		assert_int_equal(chk.addr, 0);
		assert_int_equal(chk.wait_ms, 0);
	}
}

/* authguard_no_wait (the session fuzzers'): the failures are still counted, but no check is
   held, refused or answered late, where without it the same failures hold and then refuse. */
static void test_no_wait(void **state)
{
	struct authguard_check chk;

	authguard_no_wait(g);
	for (int i = 0; i < 40; i++) {
		int64_t hold = fail_once("10.5.0.1", "alice", &chk);

		assert_int_equal(chk.pair, (uint32_t)i);
		assert_int_equal(chk.wait_ms, 0);
		assert_int_equal(hold, 0);
	}
	authguard_begin(g, 1, "test", "10.5.0.1", "alice", &chk);
	assert_false(chk.refused);
	assert_int_equal(chk.user, 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pair_delays, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parallel_spaced_then_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_user_across_addresses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_address_across_users, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_wait, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

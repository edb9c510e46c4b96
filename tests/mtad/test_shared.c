/* test_shared.c — mtad's shared table (mtad/shared.c) across fork, as the workers use it:
 * relay connections per destination counted over all processes against one limit, a
 * restarted worker's connections cleared, AUTH failures per address seen by every process and
 * cleared by a success, and the bound (many more keys than slots: no crash, limits still
 * answered). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "mtad/mtad.h"

/* mtad's clock lives with the sessions (smtp_session.c); the same clock here. */
int64_t mtad_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs fn in a child process; its exit status. */
static int in_child(int (*fn)(struct mtad_shared *sh), struct mtad_shared *sh)
{
	int st = -1;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(sh));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

#define DEST "relay.heron.test:25"

/* worker 1 opens connections until the limit (3) answers no: how many it got. */
static int child_take(struct mtad_shared *sh)
{
	int n = 0;

	while (n < 10 && mtad_shared_dest_take(sh, 1, DEST, 3))
		n++;
	return n;
}

static void test_dest_limit_across_processes(void **state)
{
	struct mtad_shared *sh = mtad_shared_new(60000);

	assert_true(mtad_shared_dest_take(sh, 0, DEST, 3));
	/* the other process sees the parent's connection: it gets 2, not 3 */
	assert_int_equal(in_child(child_take, sh), 2);
	assert_int_equal(mtad_shared_dest_active(sh, DEST), 3);
	assert_false(mtad_shared_dest_take(sh, 0, DEST, 3));
	/* another destination has its own count */
	assert_true(mtad_shared_dest_take(sh, 0, "other.heron.test:25", 3));
	/* worker 1 died and is restarted: its two connections are gone */
	mtad_shared_worker_reset(sh, 1);
	assert_int_equal(mtad_shared_dest_active(sh, DEST), 1);
	assert_true(mtad_shared_dest_take(sh, 0, DEST, 3));
	mtad_shared_dest_put(sh, 0, DEST);
	mtad_shared_dest_put(sh, 0, DEST);
	assert_int_equal(mtad_shared_dest_active(sh, DEST), 0);
	/* a put with nothing counted for that worker changes nothing */
	mtad_shared_dest_put(sh, 0, DEST);
	assert_int_equal(mtad_shared_dest_active(sh, DEST), 0);
	mtad_shared_free(&sh);
	assert_null(sh);
}

static int child_fail3(struct mtad_shared *sh)
{
	for (int i = 0; i < 3; i++)
		if (mtad_shared_auth_failure(sh, "192.0.2.7") != (uint32_t)i)
			return 1;
	return 0;
}

static void test_auth_failures_across_processes(void **state)
{
	struct mtad_shared *sh = mtad_shared_new(60000);

	assert_int_equal(in_child(child_fail3, sh), 0);
	/* the parent (another worker) sees the child's three failures */
	assert_int_equal(mtad_shared_auth_failure(sh, "192.0.2.7"), 3);
	assert_int_equal(mtad_shared_auth_failure(sh, "192.0.2.8"), 0);
	mtad_shared_auth_clear(sh, "192.0.2.7");
	assert_int_equal(mtad_shared_auth_failure(sh, "192.0.2.7"), 0);
	mtad_shared_free(&sh);
}

static void test_forgotten(void **state)
{
	struct mtad_shared *sh = mtad_shared_new(0); /* forget at once */

	assert_int_equal(mtad_shared_auth_failure(sh, "192.0.2.9"), 0);
	usleep(5000);
	assert_int_equal(mtad_shared_auth_failure(sh, "192.0.2.9"), 0);
	mtad_shared_free(&sh);
}

static void test_bounded(void **state)
{
	struct mtad_shared *sh = mtad_shared_new(60000);
	char key[64];

	/* far more addresses than slots: old ones are evicted, every call answers */
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "198.51.%d.%d", i / 256, i % 256);
		mtad_shared_auth_failure(sh, key);
	}
	/* destinations still find room among the AUTH records, and are limited */
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "d%d.heron.test:25", i);
		assert_true(mtad_shared_dest_take(sh, 0, key, 1));
		assert_false(mtad_shared_dest_take(sh, 0, key, 1));
	}
	mtad_shared_free(&sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dest_limit_across_processes),
		cmocka_unit_test(test_auth_failures_across_processes),
		cmocka_unit_test(test_forgotten),
		cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

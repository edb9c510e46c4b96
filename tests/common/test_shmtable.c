/* test_shmtable.c — the workers' shared table (common/shmtable.c) across fork, as workers use
 * it: counts per key over all processes against one limit, the daemon-wide total, a restarted
 * worker's counts cleared, failures per key seen by every process, forgotten after a while or
 * at a success, and the bound (many more keys than slots: no crash, limits still answered). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/shmtable.h"

/* Runs fn in a child process; its exit status. */
static int in_child(int (*fn)(struct shmtable *t), struct shmtable *t)
{
	int st = -1;
	pid_t pid = fork();

	if (pid == 0)
		_exit(fn(t));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

#define DEST "relay.heron.test:25"

/* worker 1 takes until the limit (3) answers no: how many it got. */
static int child_take(struct shmtable *t)
{
	int n = 0;

	while (n < 10 && shmtable_take(t, SHM_RELAY_DEST, DEST, 1, 3))
		n++;
	return n;
}

static void test_limit_across_processes(void **state)
{
	struct shmtable *t = shmtable_new(64, 2, 272, 60000);

	assert_true(shmtable_take(t, SHM_RELAY_DEST, DEST, 0, 3));
	/* the other process sees the parent's count: it gets 2, not 3 */
	assert_int_equal(in_child(child_take, t), 2);
	assert_int_equal(shmtable_count(t, SHM_RELAY_DEST, DEST), 3);
	assert_false(shmtable_take(t, SHM_RELAY_DEST, DEST, 0, 3));
	/* another key, or the same key of another kind, has its own count */
	assert_true(shmtable_take(t, SHM_RELAY_DEST, "other.heron.test:25", 0, 3));
	assert_true(shmtable_take(t, SHM_ADDR_CONNS, DEST, 0, 1));
	assert_int_equal(shmtable_count(t, SHM_ADDR_CONNS, DEST), 1);
	/* worker 1 died and is restarted: its two are gone */
	shmtable_worker_reset(t, 1);
	assert_int_equal(shmtable_count(t, SHM_RELAY_DEST, DEST), 1);
	assert_true(shmtable_take(t, SHM_RELAY_DEST, DEST, 0, 3));
	shmtable_put(t, SHM_RELAY_DEST, DEST, 0);
	shmtable_put(t, SHM_RELAY_DEST, DEST, 0);
	assert_int_equal(shmtable_count(t, SHM_RELAY_DEST, DEST), 0);
	/* a put with nothing counted for that worker changes nothing */
	shmtable_put(t, SHM_RELAY_DEST, DEST, 0);
	shmtable_put(t, SHM_RELAY_DEST, "never.heron.test:25", 1);
	assert_int_equal(shmtable_count(t, SHM_RELAY_DEST, DEST), 0);
	shmtable_free(&t);
	assert_null(t);
	shmtable_free(&t);
}

static int child_total(struct shmtable *t)
{
	int n = 0;

	while (n < 10 && shmtable_total_take(t, 1, 4))
		n++;
	return n;
}

static void test_total(void **state)
{
	struct shmtable *t = shmtable_new(32, 3, 64, 60000);

	assert_true(shmtable_total_take(t, 0, 4));
	assert_int_equal(in_child(child_total, t), 3);
	assert_int_equal(shmtable_total(t), 4);
	assert_false(shmtable_total_take(t, 2, 4));
	shmtable_total_put(t, 0);
	assert_true(shmtable_total_take(t, 2, 4));
	assert_false(shmtable_total_take(t, 0, 4));
	shmtable_worker_reset(t, 1);
	assert_int_equal(shmtable_total(t), 1);
	shmtable_total_put(t, 1); /* nothing counted: no change */
	assert_int_equal(shmtable_total(t), 1);
	shmtable_free(&t);
}

static int child_fail3(struct shmtable *t)
{
	for (int i = 0; i < 3; i++)
		if (shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.7") != (uint32_t)i)
			return 1;
	return 0;
}

static void test_failures_across_processes(void **state)
{
	struct shmtable *t = shmtable_new(64, 2, 64, 60000);

	assert_int_equal(in_child(child_fail3, t), 0);
	/* the parent (another worker) sees the child's three failures */
	assert_int_equal(shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.7"), 3);
	assert_int_equal(shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.8"), 0);
	shmtable_fail_clear(t, SHM_AUTH_FAILS, "192.0.2.7");
	assert_int_equal(shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.7"), 0);
	shmtable_free(&t);
}

static void test_forgotten(void **state)
{
	struct shmtable *t = shmtable_new(64, 1, 64, 0); /* forget at once */

	assert_int_equal(shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.9"), 0);
	usleep(5000);
	assert_int_equal(shmtable_fail(t, SHM_AUTH_FAILS, "192.0.2.9"), 0);
	shmtable_free(&t);
}

static void test_long_keys_are_cut(void **state)
{
	struct shmtable *t = shmtable_new(64, 1, 8, 60000);

	assert_true(shmtable_take(t, SHM_ADDR_CONNS, "abcdefgh-1", 0, 2));
	/* the same first 7 bytes: the same entry */
	assert_true(shmtable_take(t, SHM_ADDR_CONNS, "abcdefgh-2", 0, 2));
	assert_false(shmtable_take(t, SHM_ADDR_CONNS, "abcdefg", 0, 2));
	assert_int_equal(shmtable_count(t, SHM_ADDR_CONNS, "abcdef"), 0);
	shmtable_free(&t);
}

static void test_bounded(void **state)
{
	struct shmtable *t = shmtable_new(2048, 2, 64, 60000);
	char key[64];
	int admitted = 0;

	/* far more addresses than slots: old failure records are evicted, every call answers */
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "198.51.%d.%d", i / 256, i % 256);
		shmtable_fail(t, SHM_AUTH_FAILS, key);
	}
	/* counted keys still find room among the failure records, and are limited */
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "d%d.heron.test:25", i);
		assert_true(shmtable_take(t, SHM_RELAY_DEST, key, 0, 1));
		assert_false(shmtable_take(t, SHM_RELAY_DEST, key, 0, 1));
	}
	/* counted entries are never evicted: once every slot holds one, more keys are admitted
	   uncounted (the total cap still holds) */
	for (int i = 0; i < 4000; i++) {
		snprintf(key, sizeof(key), "203.0.%d.%d", i / 256, i % 256);
		admitted += shmtable_take(t, SHM_ADDR_CONNS, key, 1, 1);
	}
	assert_int_equal(admitted, 4000);
	assert_int_equal(shmtable_count(t, SHM_RELAY_DEST, "d0.heron.test:25"), 1);
	shmtable_free(&t);
}

static void bump_fn(struct shmtable_rec **recs, size_t n, int64_t now, void *arg)
{
	for (size_t i = 0; i < n; i++)
		if (recs[i] != NULL) {
			recs[i]->fails++;
			recs[i]->ok_ms = now;
		}
	*(uint32_t *)arg = recs[0] != NULL ? recs[0]->fails : 0;
}

/* A table in a file: another process that opens the same path (not a fork's copy) sees the
   same entries; a file that is not a table is made anew. */
static void test_file_shared_by_processes(void **state)
{
	char dir[] = "/tmp/heron-shmtable-XXXXXX", path[64];
	const enum shmtable_kind kinds[2] = { SHM_LOGIN_PAIR, SHM_LOGIN_USER };
	const char *keys[2] = { "127.0.0.1|bob", "bob" };
	struct shmtable *t = NULL;
	char *err = NULL;
	uint32_t got = 0;
	pid_t pid;
	int st, fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/table", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(write(fd, "not a table", 11), 11); /* made anew */
	close(fd);
	assert_int_equal(shmtable_open(path, 64, 1, 128, 60000, &t, &err), 0);
	shmtable_with(t, 2, kinds, keys, bump_fn, &got);
	assert_int_equal(got, 1);
	pid = fork();
	if (pid == 0) {
		struct shmtable *u = NULL;
		uint32_t n = 0;

		shmtable_free(&t); /* not the parent's mapping: its own open */
		if (shmtable_open(path, 4096, 1, 64, 1, &u, &err) != 0)
			_exit(10);
		shmtable_with(u, 2, kinds, keys, bump_fn, &n);
		_exit((int)n);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2); /* it saw ours, and kept the table's geometry */
	shmtable_with(t, 2, kinds, keys, bump_fn, &got);
	assert_int_equal(got, 3);
	shmtable_free(&t);
	/* opened again later (no process maps it): the entries are still there */
	assert_int_equal(shmtable_open(path, 64, 1, 128, 60000, &t, &err), 0);
	shmtable_with(t, 2, kinds, keys, bump_fn, &got);
	assert_int_equal(got, 4);
	shmtable_free(&t);
	assert_int_equal(shmtable_open("/nonexistent/dir/table", 64, 1, 128, 1, &t, &err), -1);
	assert_non_null(strstr(err, "/nonexistent/dir/table"));
	free(err);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_across_processes),    cmocka_unit_test(test_total),
		cmocka_unit_test(test_failures_across_processes), cmocka_unit_test(test_forgotten),
		cmocka_unit_test(test_long_keys_are_cut),         cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_file_shared_by_processes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

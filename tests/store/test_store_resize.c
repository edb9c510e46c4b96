/* test_store_resize.c — a partition's map grown by another process (as mtad grows it while
 * mailctl or imapd read): a child process opens the same store and writes until its map is
 * several times the parent's; the parent then opens the store (the growth lands between
 * LMDB's open and the first transaction, through a wrapped mdb_txn_begin), reads and writes
 * (mailctl stats, a delivery), and a begin while the parent holds a transaction of its own
 * is refused with STORE_EAGAIN instead of moving that transaction's pages, while a begin in
 * a thread holding none waits for another thread's transaction to end (imapd's loop and
 * its group committer). Linked with -Wl,--wrap=mdb_txn_begin. */
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>

#include "store_test.h"

#define GROW_BATCH 500
#define GROW_BYTES (6u << 20) /* the child's map use: six times the parent's first map */

int __real_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned flags, MDB_txn **txn);
int __wrap_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned flags, MDB_txn **txn);

/* Called once, before the next top-level mdb_txn_begin of this process. */
static void (*before_begin)(void);
/* Called once, after the next mdb_txn_begin that answers MDB_MAP_RESIZED. */
static void (*after_resized)(void);

int __wrap_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned flags, MDB_txn **txn)
{
	void (*fn)(void) = before_begin;
	int rc;

	if (fn != NULL && parent == NULL) {
		before_begin = NULL;
		fn();
	}
	rc = __real_mdb_txn_begin(env, parent, flags, txn);
	if (rc == MDB_MAP_RESIZED && (fn = after_resized) != NULL) {
		after_resized = NULL;
		fn();
	}
	return rc;
}

struct grow {
	unsigned first, n;
};

static int grow_fn(struct store_txn *t, void *arg)
{
	const struct grow *g = arg;
	char name[64];
	uint64_t id;
	int rc;

	for (unsigned i = g->first; i < g->first + g->n; i++) {
		snprintf(name, sizeof(name), "grower-with-a-long-name-%08u", i);
		if ((rc = store_user_create(t, name, &id)) != 0)
			return rc;
	}
	return 0;
}

static const struct store_opts *grow_opts;
static unsigned grown_users;

/* In a child process (its own environment, as mtad would have): users in partition 0 until
   its map use passes GROW_BYTES. Sets grown_users to the child's count. */
static void grow_in_child(void)
{
	int fds[2];
	pid_t pid;
	int status;
	unsigned n = 0;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct store *st;
		struct store_stats s;

		close(fds[0]);
		if (store_open(grow_opts, &st) != 0)
			_exit(1);
		for (int b = 0; b < 400; b++) {
			struct grow g = { grown_users + n, GROW_BATCH };

			if (store_write(st, 0, grow_fn, &g) != 0 || store_stats(st, 0, &s) != 0)
				_exit(2);
			n += GROW_BATCH;
			if (s.map_used > GROW_BYTES)
				break;
		}
		store_close(&st);
		if (write(fds[1], &n, sizeof(n)) != (ssize_t)sizeof(n))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &n, sizeof(n)), (ssize_t)sizeof(n));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	grown_users += n;
}

/* One partition with one user, closed; the options stay in ts->o. */
static void setup_store(struct tstore *ts)
{
	tstore_open(ts, 1);
	tuser(ts->st, "first");
	store_close(&ts->st);
	grow_opts = &ts->o;
	grown_users = 0;
}

static void check_users(struct store *st)
{
	struct store_stats s;

	assert_int_equal(store_stats(st, 0, &s), 0);
	assert_int_equal(s.users, 1 + grown_users);
	assert_true(s.map_used > GROW_BYTES);
}

/* mailctl opening the store while mtad grows it: store_open's first transaction. */
static void test_grown_during_open(void **state)
{
	struct tstore ts;

	(void)state;
	setup_store(&ts);
	before_begin = grow_in_child;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	assert_null(before_begin);
	check_users(ts.st);
	tstore_close(&ts, true);
}

/* An open handle (imapd, mailctl stats) reading and writing after the growth. */
static void test_grown_while_open(void **state)
{
	struct tstore ts;
	struct store_user u;
	struct store_txn *t;

	(void)state;
	setup_store(&ts);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	grow_in_child();
	check_users(ts.st);
	grow_in_child();
	tuser(ts.st, "after");
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_user_get(t, "after", &u), 0);
	assert_int_equal(store_user_get(t, "grower-with-a-long-name-00000000", &u), 0);
	store_txn_abort(&t);
	grown_users++; /* "after" */
	check_users(ts.st);
	tstore_close(&ts, true);
}

/* A txn of this process stays valid: a begin that would move the map is refused until it
   ends, then succeeds and sees the growth. */
static void test_grown_under_open_txn(void **state)
{
	struct tstore ts;
	struct store_user u;
	struct store_txn *t, *t2;

	(void)state;
	setup_store(&ts);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	grow_in_child();
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t2), STORE_EAGAIN);
	assert_null(t2);
	assert_int_equal(store_user_get(t, "first", &u), 0);
	assert_int_equal(store_user_get(t, "grower-with-a-long-name-00000000", &u), STORE_ENOUSER);
	store_txn_abort(&t);
	check_users(ts.st);
	tstore_close(&ts, true);
}

/* The other thread's transaction: held until the main thread's begin met the growth. */
static pthread_mutex_t holder_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t holder_cv = PTHREAD_COND_INITIALIZER;
static int holder_state; /* 0 start, 1 txn held, 2 asked to end it, 3 ended */

static void holder_set(int state)
{
	pthread_mutex_lock(&holder_mu);
	holder_state = state;
	pthread_cond_broadcast(&holder_cv);
	pthread_mutex_unlock(&holder_mu);
}

static void holder_wait(int state)
{
	pthread_mutex_lock(&holder_mu);
	while (holder_state < state)
		pthread_cond_wait(&holder_cv, &holder_mu);
	pthread_mutex_unlock(&holder_mu);
}

static void *holder_main(void *arg)
{
	struct store *st = arg;
	struct store_txn *t;

	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	holder_set(1);
	holder_wait(2);
	store_txn_abort(&t);
	holder_set(3);
	return NULL;
}

static void holder_release(void)
{
	holder_set(2);
}

/* imapd's EXAMINE while its group committer holds a txn: the begin of a thread holding none
   waits for the other thread's txn to end, remaps, and reads what the other process wrote
   (before, NO [UNAVAILABLE] store map grown). */
static void test_grown_under_other_thread_txn(void **state)
{
	struct tstore ts;
	struct store_user u;
	struct store_txn *t;
	pthread_t th;

	(void)state;
	setup_store(&ts);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	holder_state = 0;
	assert_int_equal(pthread_create(&th, NULL, holder_main, ts.st), 0);
	holder_wait(1);
	grow_in_child();
	after_resized = holder_release; /* the holder ends its txn only once the begin waits */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_null(after_resized);
	assert_int_equal(store_user_get(t, "grower-with-a-long-name-00000000", &u), 0);
	store_txn_abort(&t);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(holder_state, 3);
	check_users(ts.st);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grown_during_open),
		cmocka_unit_test(test_grown_while_open),
		cmocka_unit_test(test_grown_under_open_txn),
		cmocka_unit_test(test_grown_under_other_thread_txn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_store_flags.c — what a flag change's answer promises ([store] fsync_flags): with the
 * default (no) a flag change queued with store_gc_submit_flags is answered once committed,
 * while the index's sync is still to come, and a delivery of the same batch only after that
 * sync; with fsync_flags both wait for it. The sync is held where the committer makes it
 * (mdb_env_sync, wrapped), so the order is seen, not timed. After the sync every commit of
 * the environment is durable (its meta page too). */
#include <pthread.h>
#include <semaphore.h>

#include "store_test.h"
#include "store/store_private.h"

int __real_mdb_env_sync(MDB_env *env, int force);
int __wrap_mdb_env_sync(MDB_env *env, int force);

static atomic_bool hold; /* the committer's next sync waits for release */
static sem_t release, entered;

int __wrap_mdb_env_sync(MDB_env *env, int force)
{
	if (atomic_exchange(&hold, false)) {
		sem_post(&entered);
		sem_wait(&release);
	}
	return __real_mdb_env_sync(env, force);
}

struct answer {
	int calls, result;
};

static void answered(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		     void *arg)
{
	struct answer *a = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	a->calls++;
	a->result = result;
}

struct flag_arg {
	uint64_t mbox;
};

static int flag_fn(struct store_txn *t, void *arg)
{
	struct flag_arg *fa = arg;

	return store_msg_flags(t, fa->mbox, 1, STORE_FLAGS_ADD, STORE_FLAGGED, 0, 0, NULL);
}

/* Runs a batch of one delivery and one flag change with the sync held; returns whether the
   flag change was answered while the sync was held, and checks the delivery was not. */
static bool flag_answered_before_sync(bool fsync_flags)
{
	struct tstore ts;
	struct store_gc *gc;
	struct store_rcpt r = { .user = "ida" };
	struct answer da = { 0, -1 }, fa_ans = { 0, -1 };
	struct flag_arg fa;
	struct store_blob *b;
	uint64_t u, mb;
	bool early;

	tstore_open(&ts, 1);
	store_close(&ts.st);
	ts.o.fsync_flags = fsync_flags;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	u = tuser(ts.st, "ida");
	mb = tmbox(ts.st, u, "INBOX");
	tappend(ts.st, mb, 300, 0); /* uid 1 */
	fa.mbox = mb;
	b = tblob(ts.st, 0, 400, 2);
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	atomic_store(&hold, true);
	/* the flag change first: its batch (alone, or with the delivery) is committed when the
	   committer waits in that batch's sync */
	store_gc_submit_flags(gc, 0, flag_fn, &fa, answered, &fa_ans);
	store_gc_deliver(gc, b, 0, &r, 1, answered, &da);
	sem_wait(&entered);
	for (int i = 0; i < 200 && fa_ans.calls == 0; i++) {
		store_gc_dispatch(gc);
		if (fa_ans.calls == 0)
			usleep(5000);
	}
	early = fa_ans.calls == 1;
	assert_int_equal(da.calls, 0); /* a delivery is never answered before its sync */
	sem_post(&release);
	store_gc_flush(gc);
	assert_int_equal(da.calls, 1);
	assert_int_equal(da.result, 0);
	assert_int_equal(fa_ans.calls, 1);
	assert_int_equal(fa_ans.result, 0);
	/* both are in the index, and every commit of the environment is durable now */
	struct store_txn *t;
	struct store_msg m;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mb, 1, &m), 0);
	assert_true(m.flags & STORE_FLAGGED);
	assert_int_equal(store_msg_get(t, mb, 2, &m), 0);
	store_txn_abort(&t);
	struct store_env *e = store_env_of(ts.st, 0);

	assert_true(atomic_load(&e->gc_seq) > 0);
	assert_int_equal(atomic_load(&e->gc_durable), atomic_load(&e->gc_seq));
	store_gc_free(&gc);
	store_blob_free(&b);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
	return early;
}

static void test_flags_lazy(void **state)
{
	(void)state;
	assert_true(flag_answered_before_sync(false));
}

static void test_flags_fsync(void **state)
{
	(void)state;
	assert_false(flag_answered_before_sync(true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flags_lazy),
		cmocka_unit_test(test_flags_fsync),
	};

	sem_init(&release, 0, 0);
	sem_init(&entered, 0, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_store_gc.c — the group committer with deferred blobs: the test's thread (a daemon's
 * loop) writes messages with store_blob_finish_deferred and queues their deliveries to
 * recipients in two partitions (the hard-link path) while the committer thread and its pool
 * commit, dispatching results as they come; every acknowledged message is then in the index
 * with its file, counters equal a recount, and verify is clean. Also: a deferred blob used
 * outside a batch (store_msg_append), one dropped before any commit, a batch made durable
 * by one syncfs, and the session fuzzers' inline mode (store_gc_inline). scripts/test runs
 * it under ThreadSanitizer too (build-tsan). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "store_test.h"

#define NTHREADS 8
#define PER_THREAD 12

struct gc_run {
	struct store *st;
	struct store_gc *gc;
	const char *users[2];
	unsigned ok, failed;
};

struct gc_op {
	struct gc_run *g;
	struct store_rcpt r[2];
	struct store_blob *b;
};

static void gc_op_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct gc_op *op = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	if (result != 0 || op->r[0].result != 0 || op->r[1].result != 0)
		op->g->failed++;
	else
		op->g->ok++;
	store_blob_free(&op->b);
}

/* Writes NTHREADS * PER_THREAD message files, then queues their deliveries while the test
   holds the write lock of both partitions, so they are all pending together when the
   committer gets the locks: the deliveries that arrive together must share commits. */
static void producer(struct gc_run *g, struct gc_op *ops)
{
	struct store_txn *lock[2];

	for (unsigned i = 0; i < NTHREADS * PER_THREAD; i++) {
		struct gc_op *op = &ops[i];
		char body[600];
		int n = snprintf(body, sizeof(body), "Subject: gc %u\r\n\r\nbody %u\r\n", i, i);

		op->g = g;
		op->r[0].user = g->users[i % 2];
		op->r[1].user = g->users[(i + 1) % 2];
		if (store_blob_new(g->st, store_partition_for(g->st, op->r[0].user), &op->b) !=
			    0 ||
		    store_blob_write(op->b, body, (size_t)n) != 0 ||
		    store_blob_finish_deferred(op->b) != 0) {
			g->failed++;
			store_blob_free(&op->b);
		}
	}
	for (unsigned p = 0; p < 2; p++)
		assert_int_equal(store_txn_begin(g->st, p, STORE_TXN_WRITE, &lock[p]), 0);
	for (unsigned i = 0; i < NTHREADS * PER_THREAD; i++)
		if (ops[i].b != NULL)
			store_gc_deliver(g->gc, ops[i].b, 0, ops[i].r, 2, gc_op_done, &ops[i]);
	usleep(50 * 1000); /* the committer takes a batch and waits for the locks (or not yet) */
	for (unsigned p = 0; p < 2; p++)
		store_txn_abort(&lock[p]);
	store_gc_flush(g->gc);
}

static void test_gc_threads_deferred(void **state)
{
	struct tstore ts;
	struct gc_run g;
	char n0[32], n1[32];
	uint64_t u[2], mb[2], ops, commits;

	(void)state;
	tstore_open(&ts, 2);
	memset(&g, 0, sizeof(g));
	g.st = ts.st;
	g.users[0] = tuser_name_in(ts.st, 0, "gcuser", n0, sizeof(n0));
	g.users[1] = tuser_name_in(ts.st, 1, "gcuser", n1, sizeof(n1));
	for (int i = 0; i < 2; i++) {
		u[i] = tuser(ts.st, g.users[i]);
		mb[i] = tmbox(ts.st, u[i], "INBOX");
	}
	assert_int_equal(store_gc_new(ts.st, &g.gc), 0);
	struct gc_op *gops = calloc(NTHREADS * PER_THREAD, sizeof(*gops));

	assert_non_null(gops);
	producer(&g, gops);
	free(gops);
	store_gc_stats(g.gc, &ops, &commits);
	store_gc_free(&g.gc);
	assert_int_equal(g.failed, 0);
	assert_int_equal(g.ok, NTHREADS * PER_THREAD);
	assert_int_equal(ops, NTHREADS * PER_THREAD);
	/* at most one batch was taken before the rest queued behind the locks: all the others
	   share commits (two partitions, at most group_commit_max operations a batch) */
	assert_true(commits >= 1);
	assert_true(commits < ops / 4);
	for (int i = 0; i < 2; i++) {
		struct store_txn *t;
		struct store_status s;
		struct store_iter *it;
		struct store_msg m;
		unsigned seen = 0;
		int rc;

		assert_int_equal(store_txn_begin(ts.st, i, STORE_TXN_READ, &t), 0);
		assert_int_equal(store_mbox_status(t, mb[i], &s), 0);
		assert_int_equal(s.messages, NTHREADS * PER_THREAD);
		assert_int_equal(store_msg_iter(t, mb[i], 1, UINT32_MAX, 0, &it), 0);
		while ((rc = store_iter_next(it, &m)) == 1) {
			int fd;
			uint64_t size;

			assert_int_equal(store_blob_open(ts.st, (unsigned)i, m.blob, &fd, &size),
					 0);
			assert_int_equal(size, m.size);
			assert_true(m.cache_len > 0);
			close(fd);
			seen++;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(seen, NTHREADS * PER_THREAD);
		store_iter_free(&it);
		store_txn_abort(&t);
		tcheck_status(ts.st, mb[i]);
	}
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

/* A deferred blob outside any batch: store_msg_append makes it durable itself. One dropped
   before a commit leaves no file (verify finds no orphan). */
static void test_deferred_single(void **state)
{
	struct tstore ts;
	struct store_blob *b;
	struct store_txn *t;
	struct store_verify_report r;
	uint64_t u, mb;
	uint32_t uid;
	const char msg[] = "Subject: deferred\r\n\r\nhello\r\n";

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "dora");
	mb = tmbox(ts.st, u, "INBOX");
	assert_int_equal(store_blob_new(ts.st, 0, &b), 0);
	assert_int_equal(store_blob_write(b, msg, sizeof(msg) - 1), 0);
	assert_int_equal(store_blob_finish_deferred(b), 0);
	assert_int_equal(store_blob_finish_deferred(b), STORE_EINVAL); /* once */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, mb, b, STORE_SEEN, 0, 0, &uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&b);
	assert_int_equal(uid, 1);

	assert_int_equal(store_blob_new(ts.st, 0, &b), 0);
	assert_int_equal(store_blob_write(b, msg, sizeof(msg) - 1), 0);
	assert_int_equal(store_blob_finish_deferred(b), 0);
	store_blob_free(&b);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), 0);
	assert_int_equal(r.orphan_files + r.young_files, 0);
	assert_int_equal(r.messages, 1);
	tcheck_status(ts.st, mb);
	tstore_close(&ts, true);
}

/* With group_commit_syncfs, a batch of deferred blobs to two users in two partitions: the
   files are made durable by one syncfs (both partitions are on one filesystem: one call covers files, renames, links
   and directories), so the batch costs that call and the two partitions' commits (two
   each), not a fsync per file and directory; every message is delivered with its file. */
#define SYNCFS_BATCH 6
static void test_deferred_batch_syncfs(void **state)
{
	struct tstore ts;
	struct store_blob *b[SYNCFS_BATCH];
	struct store_rcpt r[SYNCFS_BATCH][2];
	struct store_batch *bt;
	struct store_verify_report rep;
	char n0[32], n1[32];
	uint64_t before;

	(void)state;
	tstore_open(&ts, 2);
	ts.o.group_commit_syncfs = true;
	tstore_reopen(&ts);
	tuser(ts.st, tuser_name_in(ts.st, 0, "syncfs", n0, sizeof(n0)));
	tuser(ts.st, tuser_name_in(ts.st, 1, "syncfs", n1, sizeof(n1)));
	before = store_fsync_count(ts.st);
	bt = store_batch_new(ts.st);
	for (unsigned i = 0; i < SYNCFS_BATCH; i++) {
		char body[64];
		int n = snprintf(body, sizeof(body), "Subject: batch %u\r\n\r\nbody\r\n", i);

		memset(r[i], 0, sizeof(r[i]));
		r[i][0].user = n0;
		r[i][1].user = n1;
		assert_int_equal(store_blob_new(ts.st, 0, &b[i]), 0);
		assert_int_equal(store_blob_write(b[i], body, (size_t)n), 0);
		assert_int_equal(store_blob_finish_deferred(b[i]), 0);
		store_batch_deliver(bt, b[i], 0, r[i], 2, NULL, NULL);
	}
	assert_int_equal(store_batch_commit(&bt), 0);
	assert_int_equal(store_fsync_count(ts.st) - before, 1 + 2 * 2);
	for (unsigned i = 0; i < SYNCFS_BATCH; i++) {
		assert_int_equal(r[i][0].result, 0);
		assert_int_equal(r[i][1].result, 0);
		store_blob_free(&b[i]);
	}
	assert_int_equal(store_verify(ts.st, NULL, false, &rep), 0);
	assert_int_equal(rep.messages, 2 * SYNCFS_BATCH);
	assert_int_equal(rep.missing_files + rep.orphan_files + rep.young_files, 0);
	tstore_close(&ts, true);
}

/* More deferred blobs open at once than the store keeps fds for (a big import): finishing
   them never fsyncs in the caller (an event loop in the daemons); the ones past the limit are
   closed unsynced and the commit opens them again by name for their fdatasync. Every message
   is delivered with its file, and the commit did the syncs. */
#define PAST_LIMIT 300 /* store_blob.c's DEFERRED_MAX is 256 */
static void test_deferred_past_the_limit(void **state)
{
	struct tstore ts;
	struct store_blob **b = calloc(PAST_LIMIT, sizeof(*b));
	struct store_rcpt *r = calloc(PAST_LIMIT, sizeof(*r));
	struct store_batch *bt;
	struct store_verify_report rep;
	char n0[32];
	uint64_t before;

	(void)state;
	assert_non_null(b);
	assert_non_null(r);
	tstore_open(&ts, 1);
	tuser(ts.st, tuser_name_in(ts.st, 0, "many", n0, sizeof(n0)));
	before = store_fsync_count(ts.st);
	for (unsigned i = 0; i < PAST_LIMIT; i++) {
		char body[128];
		int n = snprintf(body, sizeof(body), "Subject: many %u\r\n\r\n%0100u\r\n", i, i);

		assert_int_equal(store_blob_new(ts.st, 0, &b[i]), 0);
		assert_int_equal(store_blob_write(b[i], body, (size_t)n), 0);
		assert_int_equal(store_blob_finish_deferred(b[i]), 0);
	}
	assert_int_equal(store_fsync_count(ts.st), before); /* none in the caller */
	bt = store_batch_new(ts.st);
	for (unsigned i = 0; i < PAST_LIMIT; i++) {
		r[i].user = n0;
		store_batch_deliver(bt, b[i], 0, &r[i], 1, NULL, NULL);
	}
	assert_int_equal(store_batch_commit(&bt), 0);
	assert_true(store_fsync_count(ts.st) - before >= PAST_LIMIT);
	for (unsigned i = 0; i < PAST_LIMIT; i++) {
		assert_int_equal(r[i].result, 0);
		store_blob_free(&b[i]);
	}
	assert_int_equal(store_verify(ts.st, NULL, false, &rep), 0);
	assert_int_equal(rep.messages, PAST_LIMIT);
	assert_int_equal(rep.missing_files + rep.orphan_files + rep.young_files, 0);
	tstore_close(&ts, true);
	free(b);
	free(r);
}

/* store_gc_inline (the session fuzzers'): a submit runs its operation and commits in the
   caller's thread before it returns, the callback still waits for store_gc_dispatch; a
   delivery to two partitions is committed the same way, its file durable. */
struct inline_op {
	pthread_t ran_in;
	unsigned done;
};

static int inline_fn(struct store_txn *t, void *arg)
{
	(void)t;
	((struct inline_op *)arg)->ran_in = pthread_self();
	return 0;
}

static void inline_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	(void)rcpts;
	(void)n;
	(void)value;
	assert_int_equal(result, 0);
	((struct inline_op *)arg)->done++;
}

static void test_gc_inline(void **state)
{
	struct tstore ts;
	struct store_gc *gc;
	struct inline_op op = { 0 }, del = { 0 };
	struct store_rcpt r[2];
	struct store_blob *b;
	char n0[32], n1[32];
	uint64_t ops, commits;
	const char msg[] = "Subject: inline\r\n\r\nbody\r\n";

	(void)state;
	tstore_open(&ts, 2);
	tmbox(ts.st, tuser(ts.st, tuser_name_in(ts.st, 0, "inl", n0, sizeof(n0))), "INBOX");
	tmbox(ts.st, tuser(ts.st, tuser_name_in(ts.st, 1, "inl", n1, sizeof(n1))), "INBOX");
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	store_gc_inline(gc);
	store_gc_submit(gc, 0, NULL, inline_fn, &op, inline_done, &op);
	assert_true(pthread_equal(op.ran_in, pthread_self()));
	store_gc_stats(gc, &ops, &commits);
	assert_int_equal(ops, 1);
	assert_int_equal(commits, 1);
	assert_int_equal(op.done, 0); /* not from inside the submit */

	memset(r, 0, sizeof(r));
	r[0].user = n0;
	r[1].user = n1;
	assert_int_equal(store_blob_new(ts.st, 0, &b), 0);
	assert_int_equal(store_blob_write(b, msg, sizeof(msg) - 1), 0);
	assert_int_equal(store_blob_finish_deferred(b), 0);
	store_gc_deliver(gc, b, 0, r, 2, inline_done, &del);
	store_gc_stats(gc, &ops, &commits);
	assert_int_equal(commits, 2);
	store_gc_dispatch(gc);
	assert_int_equal(op.done, 1);
	assert_int_equal(del.done, 1);
	assert_int_equal(r[0].result, 0);
	assert_int_equal(r[1].result, 0);
	store_blob_free(&b);
	store_gc_free(&gc);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gc_threads_deferred),
		cmocka_unit_test(test_deferred_single),
		cmocka_unit_test(test_deferred_batch_syncfs),
		cmocka_unit_test(test_deferred_past_the_limit),
		cmocka_unit_test(test_gc_inline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

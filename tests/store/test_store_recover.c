/* test_store_recover.c — crash recovery of message files: a child process that ends without
 * closing the store (as a SIGKILL leaves it) after writing a message file it never
 * committed, one it never finished, and a commit that dropped a file's last reference
 * without the unlink after it; the next opener removes exactly those, keeps every committed
 * message, and leaves the uncommitted file of a process still alive alone (it commits it
 * later). Then verify counts no orphan and no young file, with no age to wait for. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "store_test.h"
#include "store/store_private.h"

static void child_crash(struct tstore *ts, uint64_t mbox, uint64_t *kept_blob)
{
	int pfd[2];
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	if ((pid = fork()) == 0) {
		struct store *st;
		struct store_blob *b1, *b2, *b3;
		struct store_txn *t;
		struct store_msg m;
		uint32_t uid;
		int fd;

		close(pfd[0]);
		if (store_open(&ts->o, &st) != 0)
			_exit(2);
		/* a committed message: stays */
		fd = tmsg_fd_raw(3000, 1);
		if (store_blob_from_fd(st, 0, fd, &b1) != 0 ||
		    store_txn_begin(st, 0, STORE_TXN_WRITE, &t) != 0 ||
		    store_msg_append(t, mbox, b1, 0, 0, 0, &uid) != 0 || store_txn_commit(&t) != 0)
			_exit(3);
		if (write(pfd[1], &b1->id, 8) != 8)
			_exit(4);
		/* a finished file never committed, one never finished */
		lseek(fd, 0, SEEK_SET);
		if (store_blob_from_fd(st, 0, fd, &b2) != 0 || store_blob_new(st, 0, &b3) != 0 ||
		    store_blob_write(b3, "From: x\r\n", 9) != 0)
			_exit(5);
		close(fd);
		/* a second message whose expunge commits without the unlink after it */
		fd = tmsg_fd_raw(2000, 2);
		struct store_blob *b4;

		if (store_blob_from_fd(st, 0, fd, &b4) != 0 ||
		    store_txn_begin(st, 0, STORE_TXN_WRITE, &t) != 0 ||
		    store_msg_append(t, mbox, b4, 0, 0, 0, &uid) != 0 || store_txn_commit(&t) != 0)
			_exit(6);
		close(fd);
		if (store_txn_begin(st, 0, STORE_TXN_WRITE, &t) != 0 ||
		    store_msg_get(t, mbox, uid, &m) != 0 ||
		    store_msg_expunge(t, mbox, &uid, 1, NULL, NULL) != 0 ||
		    mdb_txn_commit(t->txn) != 0) /* committed; store_blob_unlink_dead not run */
			_exit(7);
		_exit(0); /* no store_close, no store_blob_free: as killed */
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], kept_blob, 8), 8);
	close(pfd[0]);
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Files under part0/blobs (any subdirectory). */
static int count_files(const char *dir)
{
	char cmd[256];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "find '%s/part0/blobs' -type f | wc -l", dir);
	assert_non_null(f = popen(cmd, "r"));
	assert_int_equal(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

static void test_crashed_writer(void **state)
{
	struct tstore ts;
	struct store_verify_report r;
	uint64_t user, mbox, kept;

	(void)state;
	tstore_open(&ts, 1);
	ts.o.recover_background = false;
	user = tuser(ts.st, "erin");
	mbox = tmbox(ts.st, user, "INBOX");
	store_close(&ts.st);
	child_crash(&ts, mbox, &kept);
	/* left: the kept message, the uncommitted one, the tmp one, the expunged one */
	assert_int_equal(count_files(ts.dir), 4);

	/* a live process with a finished, not yet committed file */
	int go[2], done[2];
	pid_t live;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	if ((live = fork()) == 0) {
		struct store *st;
		struct store_blob *b;
		struct store_txn *t;
		uint32_t uid;
		char c;
		int fd = tmsg_fd_raw(1000, 3);

		close(go[1]); /* a failing parent ends this child too (EOF) */
		close(done[0]);
		/* the open recovers the crashed child's files (synchronously): then ready */
		if (store_open(&ts.o, &st) != 0 || store_blob_from_fd(st, 0, fd, &b) != 0)
			_exit(2);
		if (write(done[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		if (store_txn_begin(st, 0, STORE_TXN_WRITE, &t) != 0 ||
		    store_msg_append(t, mbox, b, 0, 0, 0, &uid) != 0 || store_txn_commit(&t) != 0)
			_exit(4);
		store_blob_free(&b);
		store_close(&st);
		_exit(0);
	}
	char c;

	close(go[0]);
	close(done[1]);
	assert_int_equal(read(done[0], &c, 1), 1);
	/* the crashed child's three are gone, the kept one and the live one's stay */
	assert_int_equal(count_files(ts.dir), 2);
	assert_int_equal(store_open(&ts.o, &ts.st), 0); /* the live one's file is left alone */
	assert_int_equal(count_files(ts.dir), 2);
	assert_int_equal(write(go[1], "g", 1), 1);
	int status;

	assert_int_equal(waitpid(live, &status, 0), live);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	struct store_txn *t;
	struct store_status s;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mbox, &s), 0);
	store_txn_abort(&t);
	assert_int_equal(s.messages, 2); /* the kept one and the live process's */
	assert_int_equal(store_verify(ts.st, NULL, false, &r), 0);
	assert_int_equal(r.orphan_files, 0);
	assert_int_equal(r.young_files, 0);
	assert_int_equal(r.messages, 2);
	assert_int_equal(r.blobs, 2);
	(void)kept;
	/* the dead table is empty again after a commit */
	tappend(ts.st, mbox, 500, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	MDB_stat ms;

	mdb_stat(t->txn, t->e->dbi[DBI_DEAD], &ms);
	store_txn_abort(&t);
	assert_int_equal(ms.ms_entries, 0);
	close(go[1]);
	close(done[0]);
	tstore_close(&ts, true);
}

/* An expunge unlinks the file after its commit and its dead row goes with the next commit. */
static void test_dead_rows(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	uint64_t user, mbox;
	uint32_t uid;
	MDB_stat ms;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "fred");
	mbox = tmbox(ts.st, user, "INBOX");
	uid = tappend(ts.st, mbox, 800, 0);
	assert_int_equal(count_files(ts.dir), 1);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, mbox, &uid, 1, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(count_files(ts.dir), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	mdb_stat(t->txn, t->e->dbi[DBI_DEAD], &ms);
	store_txn_abort(&t);
	assert_int_equal(ms.ms_entries, 1);
	tmbox(ts.st, user, "Other"); /* any commit */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	mdb_stat(t->txn, t->e->dbi[DBI_DEAD], &ms);
	store_txn_abort(&t);
	assert_int_equal(ms.ms_entries, 0);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crashed_writer),
		cmocka_unit_test(test_dead_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

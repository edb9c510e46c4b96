/* test_store_proc.c — libstore across processes and crashes: one process delivering while
 * another flags and expunges; UID and modseq monotonicity; STATUS counters equal to a full
 * recount after random operation sequences; SIGKILL of a delivering child at random points
 * (20 rounds), after which every acknowledged message is present and verify is clean. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "store_test.h"

struct ack {
	uint64_t mbox;
	uint32_t uid;
	uint32_t seq;
	uint64_t qid; /* the queue entry of the same message (0: none) */
};

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		c += w;
		n -= (size_t)w;
	}
}

/* The delivering child: n messages to both users, each acknowledged on the pipe. */
static void deliverer(const struct store_opts *o, int out, unsigned n, bool group)
{
	struct store *st;
	struct store_gc *gc = NULL;

	if (store_open(o, &st) != 0)
		_exit(1);
	if (group)
		store_gc_new(st, &gc);
	for (unsigned i = 0; i < n; i++) {
		struct store_rcpt r[2] = { { .user = "p1" }, { .user = "p2" } };
		int fd = tmsg_fd_raw(1000 + (i % 7) * 3000, i);
		int rc;

		if (fd < 0)
			_exit(4);
		uint64_t qid = 0;

		if (gc != NULL) {
			struct store_blob *b;
			struct store_queue_rcpt qr = { .addr = "far@remote.test" };
			struct store_queue_msg qm = { .sender = "s@t", .nrcpt = 1, .rcpt = &qr };

			if (store_blob_from_fd(st, 0, fd, &b) != 0)
				_exit(2);
			rc = tgc_deliver(gc, b, r, 2);
			/* the remote part of the same message: queued, acknowledged with it */
			if (rc == 0 && store_queue_add(st, &qm, b, &qid) != 0)
				_exit(2);
			store_blob_free(&b);
		} else
			rc = store_deliver(st, fd, 0, r, 2);
		close(fd);
		if (rc != 0 || r[0].result != 0 || r[1].result != 0)
			_exit(2);
		for (int j = 0; j < 2; j++) {
			struct ack a = { r[j].mbox, r[j].uid, i, qid };

			write_all(out, &a, sizeof(a));
		}
	}
	store_gc_free(&gc);
	store_close(&st);
	_exit(0);
}

/* The other child: flags and expunges in p1's INBOX, reporting modseqs it saw. */
static void flagger(const struct store_opts *o, uint64_t mbox, int out, unsigned rounds)
{
	struct store *st;

	if (store_open(o, &st) != 0)
		_exit(1);
	/* Start once the deliverer has delivered something (bounded: 30 s), so the two really
	   overlap however the scheduler orders the processes. */
	for (int w = 0; w < 3000; w++) {
		struct store_txn *t;
		struct store_status s;

		if (store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t) != 0 ||
		    store_mbox_status(t, mbox, &s) != 0)
			_exit(2);
		store_txn_abort(&t);
		if (s.uidnext > 1)
			break;
		usleep(10000);
	}
	srand(42);
	for (unsigned i = 0; i < rounds; i++) {
		struct store_txn *t;
		struct store_status s;
		struct store_msg m;
		uint32_t uid;
		int rc;

		if (store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_WRITE, &t) != 0)
			_exit(2);
		if (store_mbox_status(t, mbox, &s) != 0)
			_exit(2);
		uid = s.uidnext > 1 ? 1 + (uint32_t)rand() % (s.uidnext - 1) : 1;
		rc = store_msg_flags(t, mbox, uid, STORE_FLAGS_ADD,
				     rand() % 3 ? STORE_SEEN : STORE_DELETED, 0, 0, &m);
		if (rc != 0 && rc != STORE_ENOMSG)
			_exit(2);
		if (i % 5 == 4 && store_msg_expunge(t, mbox, NULL, 0, NULL, NULL) != 0)
			_exit(2);
		if (store_mbox_status(t, mbox, &s) != 0)
			_exit(2);
		if ((rc = store_txn_commit(&t)) != 0 && rc != STORE_EAGAIN)
			_exit(2);
		if (rc == 0)
			write_all(out, &s.highestmodseq, sizeof(s.highestmodseq));
	}
	store_close(&st);
	_exit(0);
}

static size_t read_all(int fd, void *p, size_t max)
{
	size_t got = 0;

	while (got < max) {
		ssize_t r = read(fd, (char *)p + got, max - got);

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static void test_two_processes(void **state)
{
	struct tstore ts;
	int p1[2], p2[2], st1, st2;
	uint64_t mbox;
	pid_t a, b;
	static struct ack acks[1000];
	static uint64_t mods[1000];

	(void)state;
	tstore_open(&ts, 2);
	tuser(ts.st, "p1");
	tuser(ts.st, "p2");
	struct store_txn *t;
	unsigned part;
	assert_int_equal(store_user_locate(ts.st, "p1", &part), 0);
	assert_int_equal(store_txn_begin(ts.st, part, STORE_TXN_READ, &t), 0);
	struct store_user u;
	assert_int_equal(store_user_get(t, "p1", &u), 0);
	assert_int_equal(store_mbox_find(t, u.id, "INBOX", &mbox), 0);
	store_txn_abort(&t);
	assert_int_equal(pipe(p1), 0);
	assert_int_equal(pipe(p2), 0);
	if ((a = fork()) == 0) {
		close(p1[0]);
		deliverer(&ts.o, p1[1], 200, false);
	}
	if ((b = fork()) == 0) {
		close(p2[0]);
		flagger(&ts.o, mbox, p2[1], 300);
	}
	close(p1[1]);
	close(p2[1]);
	size_t na = read_all(p1[0], acks, sizeof(acks)) / sizeof(acks[0]);
	size_t nm = read_all(p2[0], mods, sizeof(mods)) / sizeof(mods[0]);
	assert_int_equal(waitpid(a, &st1, 0), a);
	assert_int_equal(waitpid(b, &st2, 0), b);
	assert_int_equal(st1, 0);
	assert_int_equal(st2, 0);
	assert_int_equal(na, 400);
	/* UIDs strictly increase per mailbox; modseqs strictly increase */
	uint32_t last[2] = { 0, 0 };
	for (size_t i = 0; i < na; i++) {
		assert_true(acks[i].uid > last[i % 2]);
		last[i % 2] = acks[i].uid;
	}
	for (size_t i = 1; i < nm; i++)
		assert_true(mods[i] >= mods[i - 1]);
	assert_true(nm > 100 && mods[nm - 1] > mods[0]);
	tcheck_status(ts.st, acks[0].mbox);
	tcheck_status(ts.st, acks[1].mbox);
	tverify_clean(ts.st);
	close(p1[0]);
	close(p2[0]);
	tstore_close(&ts, true);
}

/* Random operations on two mailboxes; after each, STATUS equals a recount and highestmodseq
   and uidnext never go back. */
static void test_random_ops(void **state)
{
	struct tstore ts;
	uint64_t u, mb[2];
	struct store_status prev[2];

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "rnd");
	mb[0] = tmbox(ts.st, u, "INBOX");
	mb[1] = tmbox(ts.st, u, "Other");
	memset(prev, 0, sizeof(prev));
	for (int i = 0; i < 2; i++) {
		struct store_txn *t;
		unsigned k;

		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
		assert_int_equal(store_mbox_keyword(t, mb[i], i ? "b" : "a", true, &k), 0);
		assert_int_equal(store_mbox_keyword(t, mb[i], "shared", true, &k), 0);
		assert_int_equal(store_txn_commit(&t), 0);
	}
	srand(7);
	for (int step = 0; step < 400; step++) {
		struct store_txn *t;
		int which = rand() % 2, op = rand() % 6;
		uint64_t m = mb[which], other = mb[!which];
		struct store_status s;
		uint32_t uid, *x, *y;
		size_t n;

		if (op == 0) {
			tappend(ts.st, m, 200 + (size_t)(rand() % 5000),
				(unsigned)rand() & STORE_FLAGS_ALL);
		} else {
			assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
			assert_int_equal(store_mbox_status(t, m, &s), 0);
			uid = 1 + (uint32_t)rand() % s.uidnext;
			switch (op) {
			case 1:
			case 2: {
				int rc = store_msg_flags(t, m, uid,
							 (enum store_flag_op)(rand() % 3),
							 (unsigned)rand() & STORE_FLAGS_ALL,
							 (uint64_t)(rand() % 4), 0, NULL);
				assert_true(rc == 0 || rc == STORE_ENOMSG);
				break;
			}
			case 3:
				assert_int_equal(store_msg_expunge(t, m, rand() % 2 ? &uid : NULL,
								   1, &x, &n),
						 0);
				free(x);
				break;
			case 4:
			case 5:
				assert_int_equal(store_msg_copy(t, m, other, &uid, 1, op == 5, &x,
								&y, &n),
						 0);
				free(x);
				free(y);
				break;
			}
			if (step % 50 == 0) {
				uint32_t fr;

				assert_int_equal(store_mbox_take_recent(t, m, &fr), 0);
			}
			assert_int_equal(store_txn_commit(&t), 0);
		}
		for (int i = 0; i < 2; i++) {
			struct store_txn *rt;

			tcheck_status(ts.st, mb[i]);
			assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &rt), 0);
			assert_int_equal(store_mbox_status(rt, mb[i], &s), 0);
			store_txn_abort(&rt);
			assert_true(s.highestmodseq >= prev[i].highestmodseq);
			assert_true(s.uidnext >= prev[i].uidnext);
			prev[i] = s;
		}
	}
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

/* SIGKILL a delivering child at random points; every acknowledged message (and, in the
   group-commit rounds, its queue entry) must be there. */
static void test_crash_safety(void **state)
{
	struct tstore ts;
	static struct ack acks[20000];
	unsigned total = 0;

	(void)state;
	tstore_open(&ts, 2);
	tuser(ts.st, "p1");
	tuser(ts.st, "p2");
	srand((unsigned)time(NULL));
	for (int round = 0; round < 20; round++) {
		int p[2], wst;
		pid_t pid;
		struct timespec delay = { 0, (10 + rand() % 150) * 1000000L };

		assert_int_equal(pipe(p), 0);
		if ((pid = fork()) == 0) {
			close(p[0]);
			deliverer(&ts.o, p[1], 5000, round % 2 == 1);
		}
		close(p[1]);
		nanosleep(&delay, NULL);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &wst, 0), pid);
		/* killed, or done with all its messages; anything else is its own failure */
		assert_true((WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL) ||
			    (WIFEXITED(wst) && WEXITSTATUS(wst) == 0));
		size_t n = read_all(p[0], acks, sizeof(acks)) / sizeof(acks[0]);
		close(p[0]);
		total += (unsigned)n;
		/* reopen (mdb_reader_check clears the dead child's reader slot) */
		tstore_reopen(&ts);
		for (size_t i = 0; i < n; i++) {
			struct store_txn *t;
			struct store_msg m;
			int fd;
			uint64_t size;

			assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(acks[i].mbox),
							 STORE_TXN_READ, &t),
					 0);
			assert_int_equal(store_msg_get(t, acks[i].mbox, acks[i].uid, &m), 0);
			store_txn_abort(&t);
			assert_int_equal(store_blob_open(ts.st, STORE_ID_PART(acks[i].mbox),
							 m.blob, &fd, &size),
					 0);
			assert_int_equal(size, m.size);
			close(fd);
			if (acks[i].qid != 0) {
				struct store_queue_msg qm;

				assert_int_equal(store_queue_get(ts.st, acks[i].qid, &qm), 0);
				assert_int_equal(qm.size, m.size);
				store_queue_msg_clear(&qm);
				assert_int_equal(store_queue_open(ts.st, acks[i].qid, &fd, &size),
						 0);
				close(fd);
			}
		}
		tverify_clean(ts.st);
	}
	print_message("crash rounds: %u acknowledged deliveries checked\n", total);
	tstore_close(&ts, true);
}

/* A full disk (a 4 MiB tmpfs, root only): deliveries fail with the temporary STORE_ENOSPC,
   nothing half-written stays, and after space is freed delivery works again. */
static char enospc_dir[64];

static int enospc_teardown(void **state)
{
	char cmd[256];

	(void)state;
	if (enospc_dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "umount -l '%s' 2>/dev/null; rmdir '%s'", enospc_dir,
			 enospc_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", enospc_dir);
		enospc_dir[0] = '\0';
	}
	return 0;
}

static void test_disk_full(void **state)
{
	char *dir = enospc_dir, cmd[256];
	struct store_opts o = { .partitions = 1,
				.map_size = 1 << 20,
				.map_size_max = 64 << 20,
				.expunge_history_ms = 1000,
				.group_commit_ms = 1,
				.group_commit_max = 16,
				.create = true };
	struct store *st;
	uint64_t mbox = 0;
	int rc = 0, delivered = 0;

	(void)state;
	if (geteuid() != 0)
		skip();
	strcpy(dir, "/tmp/heron-enospc.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=4m tmpfs '%s' 2>/dev/null", dir);
	if (system(cmd) != 0)
		skip(); /* no mount here (a container): the teardown removes dir */
	o.path = dir;
	assert_int_equal(store_open(&o, &st), 0);
	uint64_t user = tuser(st, "full");
	snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s/ballast' bs=64k count=8 2>/dev/null",
		 dir);
	assert_int_equal(system(cmd), 0);
	for (int i = 0; i < 200; i++) {
		struct store_rcpt r = { .user = "full" };
		int fd = tmsg_fd(64 << 10, (unsigned)i);

		rc = store_deliver(st, fd, 0, &r, 1);
		close(fd);
		if (rc != 0)
			break;
		mbox = r.mbox;
		delivered++;
	}
	assert_true(rc == STORE_ENOSPC || rc == STORE_EIO); /* the file, or the index commit */
	assert_true(store_err_temporary(rc));
	assert_true(delivered > 10);
	/* the index may be unable to commit too: either way nothing is half-written */
	for (int i = 0; i < 50; i++) {
		struct store_txn *t;
		char name[32];

		snprintf(name, sizeof(name), "box%d", i);
		assert_int_equal(store_txn_begin(st, 0, STORE_TXN_WRITE, &t), 0);
		rc = store_mbox_create(t, user, name, 0, NULL);
		if (rc == 0)
			rc = store_txn_commit(&t);
		store_txn_abort(&t);
		assert_true(rc == 0 || store_err_temporary(rc));
	}
	tcheck_status(st, mbox);
	tverify_clean(st);
	/* free space (the index itself may need some to commit an expunge: LMDB reports a
	   short write on a full disk as EIO, which is temporary too): drop the ballast, expunge
	   half, then a delivery works again */
	snprintf(cmd, sizeof(cmd), "%s/ballast", dir);
	assert_int_equal(unlink(cmd), 0);
	struct store_txn *t;
	uint32_t *out;
	size_t n;
	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_WRITE, &t), 0);
	uint32_t uids[20];
	for (int i = 0; i < 20; i++)
		uids[i] = (uint32_t)i + 1;
	assert_int_equal(store_msg_expunge(t, mbox, uids, 20, &out, &n), 0);
	free(out);
	assert_int_equal(store_txn_commit(&t), 0);
	struct store_rcpt r = { .user = "full" };
	int fd = tmsg_fd(64 << 10, 999);
	assert_int_equal(store_deliver(st, fd, 0, &r, 1), 0);
	close(fd);
	tcheck_status(st, mbox);
	tverify_clean(st);
	store_close(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_processes),
		cmocka_unit_test(test_random_ops),
		cmocka_unit_test(test_crash_safety),
		cmocka_unit_test_teardown(test_disk_full, enospc_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

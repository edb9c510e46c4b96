/* test_store_format.c — the store's format version: a store of the first format (a fixture
 * written by the Heron before the version was recorded, tests/store/fixtures) is refused
 * without an upgrade and untouched, upgrades in place and reads back; a store of a future
 * format is refused and untouched, even by an upgrade; format 2 (files) and format 3 (inline
 * rows of 24 bytes) upgrade and read back; an upgrade interrupted by a failing
 * commit resumes where it stopped; the store lock keeps an upgrade from a store in use.
 * mdb_txn_commit is wrapped to inject the failure. */
#include <errno.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "tests/store/store_test.h"

#include "common/endian.h"
#include "store/store_private.h"

int __real_mdb_txn_commit(MDB_txn *txn);
int __wrap_mdb_txn_commit(MDB_txn *txn);

static int fail_commit_in = -1; /* commits until one fails (-1: never) */

int __wrap_mdb_txn_commit(MDB_txn *txn)
{
	if (fail_commit_in >= 0 && fail_commit_in-- == 0) {
		mdb_txn_abort(txn);
		return EIO;
	}
	return __real_mdb_txn_commit(txn);
}

/* The fixture unpacked into a fresh directory; ts set up (not opened) for its 2 partitions. */
static void fixture(struct tstore *ts)
{
	char cmd[512];

	memset(ts, 0, sizeof(*ts));
	strcpy(ts->dir, "/tmp/heron-store-fmt.XXXXXX");
	assert_non_null(mkdtemp(ts->dir));
	snprintf(cmd, sizeof(cmd), "tar xzf '%s/store-format1.tar.gz' -C '%s'", STORE_FIXTURES,
		 ts->dir);
	assert_int_equal(system(cmd), 0);
	ts->o.path = ts->dir;
	ts->o.partitions = 2;
	ts->o.map_size = 1 << 20;
	ts->o.map_size_max = (uint64_t)1 << 30;
	ts->o.expunge_history_ms = 30LL * 86400 * 1000;
	ts->o.create = true;
}

/* A checksum of a file's bytes (to see that a refused open wrote nothing). */
static uint64_t file_sum(const char *dir, const char *name)
{
	char p[512];
	uint8_t b[4096];
	uint64_t h = 1469598103934665603ULL;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	assert_true((fd = open(p, O_RDONLY)) >= 0);
	while ((n = read(fd, b, sizeof(b))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ b[i]) * 1099511628211ULL;
	close(fd);
	return h;
}

/* Raw LMDB on one environment of a closed store: sets meta key to a be32 (or deletes it
   when val < 0). */
static void raw_meta(const char *dir, const char *env, const char *key, int64_t val)
{
	MDB_env *e;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint8_t b[4];
	MDB_val k = { strlen(key), (void *)(uintptr_t)key }, v = { 4, b };
	char p[512];

	snprintf(p, sizeof(p), "%s/%s/index.mdb", dir, env);
	assert_int_equal(mdb_env_create(&e), 0);
	mdb_env_set_maxdbs(e, 32);
	assert_int_equal(mdb_env_open(e, p, MDB_NOSUBDIR, 0640), 0);
	assert_int_equal(mdb_txn_begin(e, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
	if (val < 0) {
		int rc = mdb_del(txn, dbi, &k, NULL);

		assert_true(rc == 0 || rc == MDB_NOTFOUND);
	} else {
		put_be32(b, (uint32_t)val);
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	}
	assert_int_equal(__real_mdb_txn_commit(txn), 0);
	mdb_env_close(e);
}

static unsigned env_format(struct store *st, unsigned part)
{
	struct store_txn *t;
	unsigned f;

	assert_int_equal(store_txn_begin(st, part, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_format_read(t, &f), 0);
	store_txn_abort(&t);
	return f;
}

static void check_fixture_mail(struct store *st)
{
	static const uint32_t uids[] = { 1, 2, 4, 5 };
	struct store_txn *t;
	struct store_user u;
	struct store_msg m;
	uint64_t inbox;
	char buf[256];
	uint64_t size;
	unsigned part;
	int fd;

	assert_int_equal(store_user_locate(st, "alice", &part), 0);
	assert_int_equal(part, 0);
	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_user_get(t, "alice", &u), 0);
	assert_int_equal(u.used_msgs, 9);
	assert_int_equal(store_mbox_find(t, u.id, "INBOX", &inbox), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(store_msg_get(t, inbox, uids[i], &m), 0);
		assert_int_equal(!!(m.flags & STORE_SEEN), uids[i] <= 2);
		assert_int_equal(store_blob_open(st, 0, m.blob, &fd, &size), 0);
		assert_int_equal(size, m.size);
		assert_true(pread(fd, buf, sizeof(buf) - 1, 0) > 0);
		buf[sizeof(buf) - 1] = '\0';
		close(fd);
		char want[32];

		snprintf(want, sizeof(want), "Subject: fixture %u", uids[i]);
		assert_non_null(strstr(buf, want));
	}
	assert_int_equal(store_msg_get(t, inbox, 3, &m), STORE_ENOMSG);
	store_txn_abort(&t);
}

/* The first format is refused without a trace, upgraded by an upgrade, and reads back. */
static void test_fixture_upgrades(void **state)
{
	struct tstore ts;
	struct store_verify_report r;
	uint64_t sum0, sum1;

	(void)state;
	fixture(&ts);
	sum0 = file_sum(ts.dir, "part0/index.mdb");
	sum1 = file_sum(ts.dir, "queue/index.mdb");
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_EFORMAT);
	assert_null(ts.st);
	assert_int_equal(file_sum(ts.dir, "part0/index.mdb"), sum0);
	assert_int_equal(file_sum(ts.dir, "queue/index.mdb"), sum1);

	ts.o.upgrade = true;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	for (unsigned p = 0; p < 2; p++)
		assert_int_equal(env_format(ts.st, p), store_format());
	assert_int_equal(env_format(ts.st, STORE_QUEUE_PART), store_format());
	store_close(&ts.st);

	ts.o.upgrade = false;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	check_fixture_mail(ts.st);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), 0);
	assert_int_equal(r.messages, 14);
	/* and it takes new mail */
	uint64_t bob = 0;
	struct store_txn *t;
	struct store_user u;

	assert_int_equal(store_txn_begin(ts.st, 1, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_user_get(t, "bob", &u), 0);
	store_txn_abort(&t);
	assert_int_equal(store_txn_begin(ts.st, 1, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_find(t, u.id, "INBOX", &bob), 0);
	store_txn_abort(&t);
	assert_int_equal(tappend(ts.st, bob, 300, 0), 6);
	tstore_close(&ts, true);
}

/* A future format is refused, by an upgrade too, and nothing is written. */
static void test_future_refused(void **state)
{
	struct tstore ts;
	uint64_t sum;

	(void)state;
	tstore_open(&ts, 2);
	tuser(ts.st, "carol");
	store_close(&ts.st);
	raw_meta(ts.dir, "part1", "format", STORE_FORMAT + 1);
	sum = file_sum(ts.dir, "part1/index.mdb");
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_EFORMAT);
	ts.o.upgrade = true;
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_EFORMAT);
	assert_int_equal(file_sum(ts.dir, "part1/index.mdb"), sum);
	raw_meta(ts.dir, "part1", "format", STORE_FORMAT);
	ts.o.upgrade = false;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	tstore_close(&ts, true);
}

/* Mailbox records without their history count (the first format) in a store marked format
   1; an upgrade whose second commit fails stops with the error, keeps what it did, and the
   next upgrade finishes from there with every count right. */
static void test_upgrade_resumes(void **state)
{
	enum { NMBOX = 2300 };
	struct tstore ts;
	struct store_txn *t;
	uint64_t user, first = 0;
	char name[32];

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "dave");
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	for (unsigned i = 0; i < NMBOX; i++) {
		uint64_t id;

		snprintf(name, sizeof(name), "box%u", i);
		assert_int_equal(store_mbox_create(t, user, name, 0, &id), 0);
		if (i == 0)
			first = id;
	}
	assert_int_equal(store_txn_commit(&t), 0);
	/* two expunges in the first mailbox: a history of 2 */
	tappend(ts.st, first, 200, STORE_DELETED);
	tappend(ts.st, first, 200, STORE_DELETED);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, first, NULL, 0, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_close(&ts.st);

	/* every mailbox record as the first format wrote it, and no format record */
	MDB_env *e;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v;
	char p[512];
	unsigned n = 0;

	snprintf(p, sizeof(p), "%s/part0/index.mdb", ts.dir);
	assert_int_equal(mdb_env_create(&e), 0);
	mdb_env_set_maxdbs(e, 32);
	assert_int_equal(mdb_env_open(e, p, MDB_NOSUBDIR, 0640), 0);
	assert_int_equal(mdb_txn_begin(e, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "mbox", 0, &dbi), 0);
	assert_int_equal(mdb_cursor_open(txn, dbi, &c), 0);
	while (mdb_cursor_get(c, &k, &v, n == 0 ? MDB_FIRST : MDB_NEXT) == 0) {
		uint8_t old[1024], key[8];

		/* both copied: the put may move the page they point into */
		assert_int_equal(k.mv_size, 8);
		memcpy(key, k.mv_data, 8);
		k.mv_data = key;
		memcpy(old, v.mv_data, v.mv_size);
		v.mv_data = old;
		v.mv_size -= 4;
		assert_int_equal(mdb_cursor_put(c, &k, &v, MDB_CURRENT), 0);
		n++;
	}
	mdb_cursor_close(c);
	assert_int_equal(n, NMBOX + 1);
	assert_int_equal(__real_mdb_txn_commit(txn), 0);
	mdb_env_close(e);
	raw_meta(ts.dir, "part0", "format", -1);
	raw_meta(ts.dir, "queue", "format", -1);

	/* commits 0 and 1 open part0 and the queue, 2 is the upgrade's first batch of
	   mailboxes: 3, the second, fails */
	ts.o.upgrade = true;
	fail_commit_in = 3;
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_EIO);
	assert_int_equal(fail_commit_in, -1);
	ts.o.upgrade = false;
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_EFORMAT); /* half done: refused */
	ts.o.upgrade = true;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	assert_int_equal(env_format(ts.st, 0), store_format());
	struct store_txn *rt;
	struct mbox_rec r;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &rt), 0);
	assert_int_equal(mbox_rec_load(rt, first, &r), 0);
	assert_int_equal(r.hist_n, 2);
	n = 0;
	for (uint64_t id = first; id < first + NMBOX; id++)
		if (mbox_rec_load(rt, id, &r) == 0 && r.hist_n != MBOX_HIST_UNKNOWN)
			n++;
	assert_int_equal(n, NMBOX);
	MDB_val pv;

	assert_int_equal(store_get(rt, DBI_META, "upgrade_pos", 11, &pv), STORE_ENOMSG);
	store_txn_abort(&rt);
	tstore_close(&ts, true);
}

/* The open one-partition store ts marked format (its partition and queue), closed: refused,
   upgraded to this format, closed (ts's options as before). */
static void upgrade_from(struct tstore *ts, unsigned format)
{
	store_close(&ts->st);
	raw_meta(ts->dir, "part0", "format", format);
	raw_meta(ts->dir, "queue", "format", format);
	assert_int_equal(store_open(&ts->o, &ts->st), STORE_EFORMAT);
	ts->o.upgrade = true;
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
	assert_int_equal(env_format(ts->st, 0), store_format());
	assert_int_equal(env_format(ts->st, STORE_QUEUE_PART), store_format());
	store_close(&ts->st);
	ts->o.upgrade = false;
}

/* A format-2 store (every body a file) upgrades to 3 (and on); each old message reads back
   byte-exact as a file; new small ones go into the index, without a file. */
static void test_format2_upgrade(void **state)
{
	enum { NOLD = 5 };
	static const size_t sizes[NOLD] = { 200, 3000, 9000, 16384, 40000 };
	struct tstore ts;
	uint64_t user, inbox;
	uint32_t uids[NOLD];

	(void)state;
	tstore_open(&ts, 1); /* inline_max 0: the format-2 layout */
	user = tuser(ts.st, "erin");
	inbox = tmbox(ts.st, user, "INBOX");
	for (unsigned i = 0; i < NOLD; i++) {
		struct store_blob *b = tblob(ts.st, 0, sizes[i], i + 1);
		struct store_txn *t;

		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
		assert_int_equal(store_msg_append(t, inbox, b, 0, 0, 0, &uids[i]), 0);
		assert_int_equal(store_txn_commit(&t), 0);
		store_blob_free(&b);
	}
	upgrade_from(&ts, 2);
	ts.o.inline_max = 16384;
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	for (unsigned i = 0; i < NOLD; i++) {
		struct store_txn *t;
		struct store_msg m;
		uint64_t size;
		int fd, want = tmsg_fd(sizes[i], i + 1);
		char *a = malloc(sizes[i] + 256), *b = malloc(sizes[i] + 256);
		ssize_t na, nb;

		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
		assert_int_equal(store_msg_get(t, inbox, uids[i], &m), 0);
		store_txn_abort(&t);
		assert_int_equal(store_blob_open(ts.st, 0, m.blob, &fd, &size), 0);
		na = pread(fd, a, sizes[i] + 256, 0);
		nb = pread(want, b, sizes[i] + 256, 0);
		assert_true(na > 0);
		assert_int_equal(na, nb);
		assert_int_equal((uint64_t)na, size);
		assert_memory_equal(a, b, (size_t)na);
		close(fd);
		close(want);
		free(a);
		free(b);
	}
	/* a new small message: no file of its own */
	struct store_blob *nb = tblob(ts.st, 0, 500, 99);
	struct store_txn *t;
	struct store_msg m;
	struct store_verify_report r;
	char path[32];
	struct stat sb;
	uint32_t uid;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, inbox, nb, 0, 0, 0, &uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&nb);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, inbox, uid, &m), 0);
	store_txn_abort(&t);
	store_blob_path(path, sizeof(path), m.blob);
	char full[600];

	snprintf(full, sizeof(full), "%s/part0/blobs/%s", ts.dir, path);
	assert_int_equal(stat(full, &sb), -1);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), 0);
	assert_int_equal(r.messages, NOLD + 1);
	assert_int_equal(r.missing_files, 0);
	tstore_close(&ts, true);
}

struct old_append {
	struct store_blob *b;
	uint64_t mbox;
};

/* Appends as format 3 did: the last page's room unknown, the first piece a whole one. */
static int old_append_fn(struct store_txn *t, void *arg)
{
	struct old_append *a = arg;
	int rc = store_del(t, DBI_META, "body_fill", 9);

	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	return store_msg_append(t, a->mbox, a->b, STORE_DELETED, 0, 0, NULL);
}

static int expunge_fn(struct store_txn *t, void *arg)
{
	return store_msg_expunge(t, *(uint64_t *)arg, NULL, 0, NULL, NULL);
}

/* A format-3 store (inline rows of 24 bytes, every first piece a whole one: made here as
   format 4 makes them when it does not know the last page's room, the rows cut to 24 bytes)
   is refused, upgrades to 4, and its bodies read back byte-exact; verify finds nothing
   wrong; an expunge takes their pieces; a new body gets a row of 26 bytes. */
static void test_format3_upgrade(void **state)
{
	enum { NOLD = 4 };
	static const size_t sizes[NOLD] = { 300, 2500, 6000, 16000 };
	struct tstore ts;
	uint64_t user, inbox, blobs[NOLD];
	char *bodies[NOLD];

	(void)state;
	tstore_open(&ts, 1);
	ts.o.inline_max = 16384;
	tstore_reopen(&ts);
	user = tuser(ts.st, "fran");
	inbox = tmbox(ts.st, user, "INBOX");
	for (unsigned i = 0; i < NOLD; i++) {
		struct store_blob *b;
		struct old_append oa = { NULL, inbox };
		struct store_txn *t;
		uint8_t k[8], row[24];
		MDB_val v;

		bodies[i] = malloc(sizes[i]);
		assert_int_equal(getrandom(bodies[i], sizes[i], 0), (ssize_t)sizes[i]);
		assert_int_equal(store_blob_new(ts.st, 0, &b), 0);
		assert_int_equal(store_blob_write(b, bodies[i], sizes[i]), 0);
		assert_int_equal(store_blob_finish(b), 0);
		oa.b = b;
		blobs[i] = store_blob_id(b);
		assert_int_equal(store_write(ts.st, 0, old_append_fn, &oa), 0);
		store_blob_free(&b);
		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
		put_be64(k, blobs[i]);
		assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
		assert_int_equal(v.mv_size, 26);
		assert_int_equal(get_be16((uint8_t *)v.mv_data + 24), 2000);
		memcpy(row, v.mv_data, 24);
		assert_int_equal(store_put(t, DBI_BLOBS, k, 8, row, 24), 0);
		assert_int_equal(store_txn_commit(&t), 0);
	}
	upgrade_from(&ts, 3);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	for (unsigned i = 0; i < NOLD; i++) {
		char *got = malloc(sizes[i] + 1);
		uint64_t size;
		int fd;

		assert_int_equal(store_blob_open(ts.st, 0, blobs[i], &fd, &size), 0);
		assert_int_equal(size, sizes[i]);
		assert_int_equal(pread(fd, got, sizes[i] + 1, 0), (ssize_t)sizes[i]);
		assert_memory_equal(got, bodies[i], sizes[i]);
		close(fd);
		free(got);
		free(bodies[i]);
	}
	struct store_verify_report r;

	assert_int_equal(store_verify(ts.st, NULL, false, &r), 0);
	assert_int_equal(r.messages, NOLD);
	assert_int_equal(r.missing_files, 0);
	assert_int_equal(r.bad_refcounts, 0);

	struct store_txn *t;
	MDB_stat ms;

	assert_int_equal(store_write(ts.st, 0, expunge_fn, &inbox), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(mdb_stat(t->txn, t->e->dbi[DBI_BODIES], &ms), 0);
	assert_int_equal(ms.ms_entries, 0);
	store_txn_abort(&t);

	struct store_blob *nb = tblob(ts.st, 0, 500, 7);
	uint8_t k[8];
	MDB_val v;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, inbox, nb, 0, 0, 0, NULL), 0);
	put_be64(k, store_blob_id(nb));
	assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
	assert_int_equal(v.mv_size, 26);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&nb);
	tstore_close(&ts, true);
}

/* An upgrade needs the store to itself; others wait for it. */
static void test_lock(void **state)
{
	struct tstore ts;
	struct store *st2 = NULL;
	struct store_opts o;

	(void)state;
	tstore_open(&ts, 1);
	o = ts.o;
	o.upgrade = true;
	assert_int_equal(store_open(&o, &st2), STORE_ELOCKED);
	store_close(&ts.st);
	assert_int_equal(store_open(&o, &st2), 0);
	assert_int_equal(store_open(&ts.o, &ts.st), STORE_ELOCKED);
	store_close(&st2);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_upgrades), cmocka_unit_test(test_future_refused),
		cmocka_unit_test(test_upgrade_resumes),  cmocka_unit_test(test_lock),
		cmocka_unit_test(test_format2_upgrade),  cmocka_unit_test(test_format3_upgrade),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_store_more.c — the smaller store rules: expunge history aged out by a later write of
 * the mailbox (no new expunge needed), a \Noselect parent dropped with its last child (delete
 * and rename), store_deliver delivering a repeated recipient once, partitions on different
 * filesystems (a copy where a hard link fails with EXDEV), verify moving orphan files to
 * lost+found and rebuilding a cache entry that does not parse, store_msg_expunge with
 * out == NULL, store_iter_next's answers, and what the change log says of each message
 * write (old records without the byte read as every kind), and a message file whose id
 * meets a file that exists taking another id instead of replacing it (renameat2's
 * RENAME_NOREPLACE, and the hard link it falls back to). */
#include <errno.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <time.h>

#include "store_test.h"
#include "store/store_private.h"

static int list_cb(const struct store_mbox_info *mi, void *arg)
{
	char *out = arg;

	strncat(out, mi->name, mi->name_len);
	strcat(out, (mi->attrs & STORE_MBOX_NOSELECT) ? "(noselect)," : ",");
	return 0;
}

static void mbox_names(struct store *st, uint64_t user, char *out)
{
	struct store_txn *t;

	out[0] = '\0';
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(user), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_list(t, user, "*", false, list_cb, out), 0);
	store_txn_abort(&t);
}

static int w_delete(struct store_txn *t, void *arg)
{
	const char **a = arg;

	return store_mbox_delete(t, *(const uint64_t *)(const void *)a[0], a[1]);
}

static void mbox_delete(struct store *st, uint64_t user, const char *name)
{
	const char *a[2] = { (const char *)&user, name };

	assert_int_equal(store_write(st, STORE_ID_PART(user), w_delete, a), 0);
}

static void test_noselect_parent_goes(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	char names[512];
	uint64_t u;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "nora");
	tmbox(ts.st, u, "a/b/c");
	tmbox(ts.st, u, "a/x");
	mbox_delete(ts.st, u, "a");
	mbox_delete(ts.st, u, "a/b");
	mbox_names(ts.st, u, names);
	assert_string_equal(names, "INBOX,a(noselect),a/b(noselect),a/b/c,a/x,");
	mbox_delete(ts.st, u, "a/b/c"); /* a/b goes; a stays for a/x */
	mbox_names(ts.st, u, names);
	assert_string_equal(names, "INBOX,a(noselect),a/x,");
	/* a rename takes the last child away */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_rename(t, u, "a/x", "y"), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	mbox_names(ts.st, u, names);
	assert_string_equal(names, "INBOX,y,");
	/* a selectable parent stays */
	tmbox(ts.st, u, "p/q");
	mbox_delete(ts.st, u, "p/q");
	mbox_names(ts.st, u, names);
	assert_string_equal(names, "INBOX,p,y,");
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_deliver_dedup(void **state)
{
	struct tstore ts;
	struct store_rcpt r[4];
	struct store_txn *t;
	struct store_status s;
	uint64_t u, inbox, work;
	int fd;

	(void)state;
	tstore_open(&ts, 2);
	u = tuser(ts.st, "otto");
	tuser(ts.st, "pia");
	inbox = tmbox(ts.st, u, "INBOX");
	work = tmbox(ts.st, u, "Work");
	memset(r, 0, sizeof(r));
	r[0].user = "otto";
	r[1].user = "otto";
	r[1].mailbox = "inbox";
	r[2].user = "pia";
	r[3].user = "otto";
	r[3].mailbox = "Work";
	fd = tmsg_fd(500, 1);
	assert_int_equal(store_deliver(ts.st, fd, 0, r, 4), 0);
	close(fd);
	for (int i = 0; i < 4; i++)
		assert_int_equal(r[i].result, 0);
	assert_int_equal(r[1].uid, r[0].uid);
	assert_int_equal(r[1].mbox, inbox);
	assert_int_equal(r[3].mbox, work);
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(u), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, inbox, &s), 0);
	assert_int_equal(s.messages, 1);
	store_txn_abort(&t);
	tcheck_status(ts.st, inbox);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_expunge_out_null_and_iter(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_iter *it;
	struct store_msg m;
	uint64_t u, mb;
	uint32_t uids[3], *out = (uint32_t *)&out;
	size_t n = 99;
	int rc, seen = 0;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "quin");
	mb = tmbox(ts.st, u, "INBOX");
	for (int i = 0; i < 3; i++)
		uids[i] = tappend(ts.st, mb, 200, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, mb, uids, 2, NULL, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(store_msg_expunge(t, mb, uids, 2, NULL, NULL), 0); /* gone: none */
	assert_int_equal(store_msg_expunge(t, mb, uids, 3, &out, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], uids[2]);
	free(out);
	assert_int_equal(store_txn_commit(&t), 0);
	tappend(ts.st, mb, 200, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_iter(t, mb, 1, UINT32_MAX, 0, &it), 0);
	while ((rc = store_iter_next(it, &m)) == STORE_ITER_MSG)
		seen++;
	assert_int_equal(rc, 0);
	assert_int_equal(seen, 1);
	store_iter_free(&it);
	store_txn_abort(&t);
	tcheck_status(ts.st, mb);
	tstore_close(&ts, true);
}

/* History kept 1 s: two seconds later VANISHED no longer reports it (not exact), and the
   next write of the mailbox (an append, no expunge) drops the rows and raises the floor. */
static void test_history_ages_out(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_status s;
	uint64_t u, mb, modseq;
	uint32_t uid, *v;
	size_t n;
	bool exact;

	(void)state;
	tstore_open(&ts, 1);
	ts.o.expunge_history_ms = 1000;
	tstore_reopen(&ts);
	u = tuser(ts.st, "rita");
	mb = tmbox(ts.st, u, "INBOX");
	uid = tappend(ts.st, mb, 200, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	modseq = s.highestmodseq;
	assert_int_equal(store_msg_expunge(t, mb, &uid, 1, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_vanished(t, mb, modseq, &v, &n, &exact), 0);
	assert_int_equal(n, 1);
	assert_true(exact);
	free(v);
	store_txn_abort(&t);
	sleep(2);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_vanished(t, mb, modseq, &v, &n, &exact), 0);
	assert_int_equal(n, 0);
	assert_false(exact);
	free(v);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	assert_true(s.expunge_floor <= modseq + 1);
	store_txn_abort(&t);
	tappend(ts.st, mb, 200, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	assert_true(s.expunge_floor > modseq + 1);
	assert_int_equal(store_msg_vanished(t, mb, modseq, &v, &n, &exact), 0);
	assert_int_equal(n, 0);
	assert_false(exact);
	free(v);
	store_txn_abort(&t);
	tstore_close(&ts, true);
}

/* Expunges uids in one transaction; returns the modseq they got. */
static uint64_t expunge_uids(struct store *st, uint64_t mb, const uint32_t *uids, size_t n)
{
	struct store_txn *t;
	struct store_status s;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, mb, uids, n, NULL, NULL), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	return s.highestmodseq;
}

/* VANISHED since modseq: the UIDs (first..first+n-1 expected) and whether it is exact. */
static void check_vanished(struct store *st, uint64_t mb, uint64_t since, uint32_t first, size_t n,
			   bool exact)
{
	struct store_txn *t;
	uint32_t *v;
	size_t got;
	bool ex;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_vanished(t, mb, since, &v, &got, &ex), 0);
	store_txn_abort(&t);
	assert_int_equal(got, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], first + i);
	assert_int_equal(ex, exact);
	free(v);
}

/* The mailbox record of mb rewritten as the format before the history count wrote it (it
   ended at the name's NUL), with raw LMDB, the store closed meanwhile. */
static void plant_old_mbox_record(struct tstore *ts, uint64_t mb)
{
	MDB_env *env;
	MDB_dbi dbi;
	uint8_t key[8], old[512];
	MDB_val k = { 8, key }, v;
	MDB_txn *txn = traw_begin(ts, (unsigned)STORE_ID_PART(mb), "mbox", &env, &dbi);

	for (int i = 0; i < 8; i++)
		key[i] = (uint8_t)(mb >> (56 - 8 * i));
	assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
	assert_true(v.mv_size > 4 && v.mv_size <= sizeof(old));
	memcpy(old, v.mv_data, v.mv_size);
	assert_int_equal(old[v.mv_size - 5], 0); /* the name's NUL, then the count */
	v.mv_data = old;
	v.mv_size -= 4;
	assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	traw_end(ts, env, txn);
}

/* A store with expunge_history_max = 5 and a mailbox of n messages (UIDs 1..n): its id. */
static uint64_t capped_mbox(struct tstore *ts, uint32_t n)
{
	uint64_t mb;

	tstore_open(ts, 1);
	ts->o.expunge_history_max = 5;
	tstore_reopen(ts);
	mb = tmbox(ts->st, tuser(ts->st, "hilda"), "INBOX");
	for (uint32_t i = 1; i <= n; i++)
		assert_int_equal(tappend(ts->st, mb, 200, 0), i);
	return mb;
}

/* expunge_history_max = 5: the oldest entries go as new ones come, one by one or many in one
   expunge; the floor follows, so VANISHED from before them is not exact (the client falls
   back) and from after them is exact. A record of the format before the count is counted at
   its next write, and the cap holds exactly after it. */
static void test_history_capped(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_status s;
	uint64_t mb, m0, ms[13];
	uint32_t uids[3] = { 10, 11, 12 };

	(void)state;
	mb = capped_mbox(&ts, 12);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	store_txn_abort(&t);
	m0 = s.highestmodseq;
	for (uint32_t i = 1; i <= 3; i++)
		ms[i] = expunge_uids(ts.st, mb, &i, 1);
	check_vanished(ts.st, mb, m0, 1, 3, true);
	for (uint32_t i = 4; i <= 9; i++)
		ms[i] = expunge_uids(ts.st, mb, &i, 1);
	/* 1..4 went: from before them inexact, from after the 4th exact */
	check_vanished(ts.st, mb, m0, 5, 5, false);
	check_vanished(ts.st, mb, ms[3], 5, 5, false);
	check_vanished(ts.st, mb, ms[4], 5, 5, true);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	store_txn_abort(&t);
	assert_int_equal(s.expunge_floor, ms[4] + 1);
	/* three in one expunge: 5..7 make room */
	ms[10] = expunge_uids(ts.st, mb, uids, 3);
	check_vanished(ts.st, mb, ms[6], 8, 5, false);
	check_vanished(ts.st, mb, ms[7], 8, 5, true);
	check_vanished(ts.st, mb, ms[9], 10, 3, true);
	tverify_clean(ts.st);
	tstore_close(&ts, true);

	/* the format before the count: 3 entries, unknown to the record, then 4 expunges */
	mb = capped_mbox(&ts, 7);
	for (uint32_t i = 1; i <= 3; i++)
		ms[i] = expunge_uids(ts.st, mb, &i, 1);
	plant_old_mbox_record(&ts, mb);
	check_vanished(ts.st, mb, m0 = ms[1] - 1, 1, 3, true);
	for (uint32_t i = 4; i <= 7; i++)
		ms[i] = expunge_uids(ts.st, mb, &i, 1);
	check_vanished(ts.st, mb, m0, 3, 5, false);
	check_vanished(ts.st, mb, ms[2], 3, 5, true);
	tcheck_status(ts.st, mb);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

/* part1 on another filesystem (/dev/shm, tmpfs): a message for users in both partitions is
   copied there, and both copies read back whole. */
static void test_exdev_copy(void **state)
{
	struct tstore ts;
	struct store_rcpt r[2];
	struct stat a, b;
	char shm[64], p1[128], cmd[512], n0[32], n1[32];
	int fd;

	(void)state;
	tstore_open(&ts, 2);
	strcpy(shm, "/dev/shm/heron-store-xdev.XXXXXX");
	if (mkdtemp(shm) == NULL || stat("/dev/shm", &a) != 0 || stat(ts.dir, &b) != 0 ||
	    a.st_dev == b.st_dev) {
		tstore_close(&ts, true);
		skip();
	}
	store_close(&ts.st);
	snprintf(p1, sizeof(p1), "%s/part1", ts.dir);
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s/' && ln -s '%s/part1' '%s'", p1, shm, shm, p1);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	memset(r, 0, sizeof(r));
	r[0].user = tuser_name_in(ts.st, 0, "xdev", n0, sizeof(n0));
	r[1].user = tuser_name_in(ts.st, 1, "xdev", n1, sizeof(n1));
	tuser(ts.st, r[0].user);
	tuser(ts.st, r[1].user);
	fd = tmsg_fd(3000, 7);
	assert_int_equal(store_deliver(ts.st, fd, 0, r, 2), 0);
	close(fd);
	assert_int_equal(r[0].result, 0);
	assert_int_equal(r[1].result, 0);
	for (int i = 0; i < 2; i++) {
		struct store_txn *t;
		struct store_msg m;
		uint64_t size;
		int bfd;

		assert_int_equal(store_txn_begin(ts.st, (unsigned)i, STORE_TXN_READ, &t), 0);
		assert_int_equal(store_msg_get(t, r[i].mbox, r[i].uid, &m), 0);
		store_txn_abort(&t);
		assert_int_equal(store_blob_open(ts.st, (unsigned)i, m.blob, &bfd, &size), 0);
		assert_int_equal(size, m.size);
		close(bfd);
	}
	tverify_clean(ts.st);
	tstore_close(&ts, true);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm);
	assert_int_equal(system(cmd), 0);
}

/* Planted: an old orphan file and a cache row that does not parse. Repair moves the orphan
   into lost+found of the named user (byte for byte) and rebuilds the cache. */
static void test_verify_lost_found_and_bad_cache(void **state)
{
	struct tstore ts;
	struct store_verify_report r;
	struct store_txn *t;
	struct store_msg m;
	struct store_user su;
	uint64_t u, mb, lf;
	uint32_t uid;
	char path[512], got[64];
	const char orphan[] = "Subject: lost\r\n\r\nfound\r\n";
	int fd;
	uint64_t size;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "sam");
	mb = tmbox(ts.st, u, "INBOX");
	uid = tappend(ts.st, mb, 300, 0);
	snprintf(path, sizeof(path), "%s/part0/blobs/cd/cdcdcdcdcdcdcdcd", ts.dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(orphan, f);
	fclose(f);
	struct timespec old[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mb, uid, &m), 0);
	store_txn_abort(&t);
	char junk[] = "junk!";
	tplant_cache(&ts, 0, m.blob, junk, 5);

	assert_int_equal(store_verify(ts.st, NULL, false, &r), STORE_ECORRUPT);
	assert_int_equal(r.orphan_files, 1);
	assert_int_equal(r.bad_cache, 1);
	assert_int_equal(r.missing_cache, 0);
	assert_int_equal(store_verify_lost_found(ts.st, NULL, true, "keeper", &r), 0);
	assert_int_equal(r.moved_lost_found, 1);
	tverify_clean(ts.st);
	tcheck_status(ts.st, mb);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mb, uid, &m), 0);
	assert_true(m.cache_len > 5);
	assert_int_equal(store_user_get(t, "keeper", &su), 0);
	assert_int_equal(store_mbox_find(t, su.id, STORE_LOST_FOUND, &lf), 0);
	assert_int_equal(store_msg_get(t, lf, 1, &m), 0);
	store_txn_abort(&t);
	assert_int_equal(store_blob_open(ts.st, 0, m.blob, &fd, &size), 0);
	assert_int_equal(size, sizeof(orphan) - 1);
	assert_int_equal(read(fd, got, sizeof(got)), (ssize_t)size);
	assert_memory_equal(got, orphan, size);
	close(fd);
	tstore_close(&ts, true);
}

/* The change records read after seq `after`: "kind:what," for each, into out. */
struct changes_seen {
	char out[256];
	uint64_t mbox;
};

static int changes_cb(const struct store_change *ch, void *arg)
{
	struct changes_seen *cs = arg;
	char one[32];

	snprintf(one, sizeof(one), "%d:%x%s,", (int)ch->kind, ch->what,
		 ch->mbox == cs->mbox ? "" : "o");
	strcat(cs->out, one);
	return 0;
}

static const char *changes_since(struct store *st, uint64_t mb, uint64_t after,
				 struct changes_seen *cs)
{
	struct store_txn *t;
	uint64_t last;
	bool gap;

	cs->out[0] = '\0';
	cs->mbox = mb;
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_changes_read(t, after, 64, changes_cb, cs, &last, &gap), 0);
	store_txn_abort(&t);
	assert_false(gap);
	return cs->out;
}

static uint64_t changes_last(struct store *st, uint64_t mb)
{
	struct store_txn *t;
	uint64_t seq;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_changes_last(t, &seq), 0);
	store_txn_abort(&t);
	return seq;
}

/* The last change record of the partition rewritten with its value cut by `cut` bytes
   (1: the format before the "what" byte) or grown by -cut zero bytes, with raw LMDB, the
   store closed meanwhile. */
static void plant_change_record(struct tstore *ts, unsigned part, int cut)
{
	MDB_env *env;
	MDB_cursor *c;
	MDB_dbi dbi;
	MDB_val k, v;
	uint8_t key[8], val[1024];
	MDB_txn *txn = traw_begin(ts, part, "changes", &env, &dbi);

	assert_int_equal(mdb_cursor_open(txn, dbi, &c), 0);
	assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_LAST), 0);
	mdb_cursor_close(c);
	assert_true(k.mv_size == 8 && v.mv_size + 8 <= sizeof(val));
	memcpy(key, k.mv_data, 8);
	memset(val, 0, sizeof(val));
	memcpy(val, v.mv_data, v.mv_size);
	k.mv_data = key;
	v.mv_data = val;
	v.mv_size = (size_t)((long)v.mv_size - cut);
	assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	traw_end(ts, env, txn);
}

/* The change log says what each message write did: an append NEW, a flag store FLAGS, an
   expunge EXPUNGE, a move NEW in the target and EXPUNGE in the source, a new keyword
   FLAGS; SELECT's claim of \Recent logs nothing. A record of the
   format before that byte reads as all kinds; one longer than either format is skipped. */
static void test_change_what(void **state)
{
	struct tstore ts;
	struct changes_seen cs;
	struct store_txn *t;
	uint32_t uid = 1, first, *done = NULL, *moved = NULL, *out = NULL;
	size_t n = 0, n_out = 0;
	unsigned kw;
	uint64_t u, mb, other, seq;
	char want[64];

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "ivy");
	mb = tmbox(ts.st, u, "INBOX");
	other = tmbox(ts.st, u, "Other");
	seq = changes_last(ts.st, mb);
	assert_int_equal(tappend(ts.st, mb, 200, 0), 1);
	assert_int_equal(tappend(ts.st, mb, 200, 0), 2);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_take_recent(t, mb, &first), 0); /* SELECT's: no record */
	assert_int_equal(first, 1);
	assert_int_equal(store_mbox_keyword(t, mb, "NewKw", true, &kw), 0);
	assert_int_equal(store_mbox_keyword(t, mb, "NewKw", true, &kw), 0); /* known: none */
	assert_int_equal(store_msg_flags(t, mb, 1, STORE_FLAGS_ADD, STORE_FLAGGED, 0, 0, NULL), 0);
	assert_int_equal(store_msg_expunge(t, mb, &uid, 1, &out, &n_out), 0);
	uid = 2;
	assert_int_equal(store_msg_copy(t, mb, other, &uid, 1, true, &done, &moved, &n), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(n, 1);
	free(done);
	free(moved);
	free(out);
	snprintf(want, sizeof(want), "%d:1,%d:1,%d:4,%d:4,%d:2,%d:1o,%d:2,", STORE_CHANGE_MSGS,
		 STORE_CHANGE_MSGS, STORE_CHANGE_MSGS, STORE_CHANGE_MSGS, STORE_CHANGE_MSGS,
		 STORE_CHANGE_MSGS, STORE_CHANGE_MSGS);
	assert_string_equal(changes_since(ts.st, mb, seq, &cs), want);

	/* the last (the move's expunge) as a binary before the byte wrote it */
	plant_change_record(&ts, 0, 1);
	snprintf(want, sizeof(want), "%d:1o,%d:f,", STORE_CHANGE_MSGS, STORE_CHANGE_MSGS);
	assert_string_equal(changes_since(ts.st, mb, seq + 5, &cs), want);
	/* a record longer than this binary knows: skipped, the others still read */
	plant_change_record(&ts, 0, -2);
	snprintf(want, sizeof(want), "%d:1o,", STORE_CHANGE_MSGS);
	assert_string_equal(changes_since(ts.st, mb, seq + 5, &cs), want);
	tstore_close(&ts, true);
}

/* A file planted at the final name a blob's id gives (another message's file that met the
   same id) is left as it is: the blob finishes under a new id and reads back its own bytes;
   both with RENAME_NOREPLACE and with the link and unlink taken where that is lacking. */
static void test_file_id_taken(void **state)
{
	static const char planted[] = "another message's bytes\r\n";
	static const char mine[] = "Subject: mine\r\n\r\nmine\r\n";

	(void)state;
	for (int by_link = 0; by_link < 2; by_link++) {
		struct tstore ts;
		struct store_blob *b;
		struct store_txn *t;
		struct store_msg m;
		char final[32], path[512], got[64], tmp[64];
		uint64_t user, inbox, old;
		uint32_t uid;
		int fd;
		ssize_t n;

		tstore_open(&ts, 1);
		atomic_store(&store_blob_rename_by_link, by_link != 0);
		user = tuser(ts.st, "taken");
		inbox = tmbox(ts.st, user, "INBOX");
		assert_int_equal(store_blob_new(ts.st, 0, &b), 0);
		assert_int_equal(store_blob_write(b, mine, sizeof(mine) - 1), 0);
		old = store_blob_id(b);
		store_blob_path(final, sizeof(final), old);
		snprintf(tmp, sizeof(tmp), "%s.tmp", final);
		snprintf(path, sizeof(path), "%s/part0/blobs/%s", ts.dir, final);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, planted, sizeof(planted) - 1), sizeof(planted) - 1);
		close(fd);

		assert_int_equal(store_blob_finish(b), 0);
		assert_true(store_blob_id(b) != old);
		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
		assert_int_equal(store_msg_append(t, inbox, b, 0, 0, 0, &uid), 0);
		assert_int_equal(store_txn_commit(&t), 0);
		store_blob_free(&b);

		/* the planted file is untouched, the tmp name gone */
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		n = read(fd, got, sizeof(got));
		close(fd);
		assert_int_equal(n, sizeof(planted) - 1);
		assert_memory_equal(got, planted, sizeof(planted) - 1);
		snprintf(path, sizeof(path), "%s/part0/blobs/%s", ts.dir, tmp);
		assert_int_equal(access(path, F_OK), -1);

		/* the message reads back its own bytes */
		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
		assert_int_equal(store_msg_get(t, inbox, uid, &m), 0);
		store_txn_abort(&t);
		assert_true(m.blob != old);
		{
			uint64_t size;

			assert_int_equal(store_blob_open(ts.st, 0, m.blob, &fd, &size), 0);
			assert_int_equal(size, sizeof(mine) - 1);
			n = read(fd, got, sizeof(got));
			close(fd);
			assert_int_equal(n, sizeof(mine) - 1);
			assert_memory_equal(got, mine, sizeof(mine) - 1);
		}
		atomic_store(&store_blob_rename_by_link, false);
		tstore_close(&ts, true);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_noselect_parent_goes),
		cmocka_unit_test(test_deliver_dedup),
		cmocka_unit_test(test_expunge_out_null_and_iter),
		cmocka_unit_test(test_history_ages_out),
		cmocka_unit_test(test_history_capped),
		cmocka_unit_test(test_exdev_copy),
		cmocka_unit_test(test_verify_lost_found_and_bad_cache),
		cmocka_unit_test(test_change_what),
		cmocka_unit_test(test_file_id_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

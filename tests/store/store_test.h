/* store_test.h — helpers shared by the store tests: a fresh store in a temp directory, a
 * message in a temp file, write-txn wrappers and a full recount of STATUS counters. */
#ifndef HERON_STORE_TEST_H
#define HERON_STORE_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <lmdb.h>

#include "store/store.h"

struct tstore {
	char dir[64];
	struct store *st;
	struct store_opts o;
};

static inline void tstore_open(struct tstore *ts, unsigned parts)
{
	memset(ts, 0, sizeof(*ts));
	strcpy(ts->dir, "/tmp/heron-store-test.XXXXXX");
	assert_non_null(mkdtemp(ts->dir));
	ts->o.path = ts->dir;
	ts->o.partitions = parts;
	ts->o.map_size = 1 << 20; /* small on purpose: growth is exercised */
	ts->o.map_size_max = (uint64_t)1 << 32;
	ts->o.expunge_history_ms = 30LL * 86400 * 1000;
	ts->o.group_commit_ms = 1;
	ts->o.group_commit_max = 64;
	ts->o.create = true;
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
}

static inline void tstore_reopen(struct tstore *ts)
{
	store_close(&ts->st);
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
}

static inline void tstore_close(struct tstore *ts, bool remove)
{
	char cmd[128];

	store_close(&ts->st);
	if (remove) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ts->dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* A row written past the store into DBI table of partition 0 (what a crash of an older
   writer or a bug would leave): the store closed, the index opened with LMDB itself, the
   store opened again. */
static inline void traw_put(struct tstore *ts, const char *table, const void *k, size_t klen,
			    const void *v, size_t vlen)
{
	char path[128];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key = { klen, (void *)(uintptr_t)k }, val = { vlen, (void *)(uintptr_t)v };

	store_close(&ts->st);
	snprintf(path, sizeof(path), "%s/part0/index.mdb", ts->dir);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, 64), 0);
	assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 24), 0);
	assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0640), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, table, 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &key, &val, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
}

/* A temp file holding a message of about size bytes: its fd (offset 0), or -1. Uses no
   cmocka assertion, so forked children can call it (a failed assertion in a child would
   let the child run the rest of the tests). */
static inline int tmsg_fd_raw(size_t size, unsigned seq)
{
	char path[] = "/tmp/heron-msg.XXXXXX";
	/* a file without a name: a child killed here leaves nothing behind */
	int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	char line[128];
	size_t n = 0;

	if (fd < 0 && (fd = mkstemp(path)) >= 0)
		unlink(path);
	if (fd < 0)
		return -1;
	n += (size_t)dprintf(fd,
			     "From: a%u@example.com\r\nTo: b@example.com\r\n"
			     "Subject: test %u\r\nMessage-ID: <%u@t>\r\n\r\n",
			     seq, seq, seq);
	memset(line, 'x', sizeof(line));
	line[sizeof(line) - 2] = '\r';
	line[sizeof(line) - 1] = '\n';
	while (n < size) {
		if (write(fd, line, sizeof(line)) != (ssize_t)sizeof(line)) {
			close(fd);
			return -1;
		}
		n += sizeof(line);
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static inline int tmsg_fd(size_t size, unsigned seq)
{
	int fd = tmsg_fd_raw(size, seq);

	assert_true(fd >= 0);
	return fd;
}

static inline struct store_blob *tblob(struct store *st, unsigned part, size_t size, unsigned seq)
{
	struct store_blob *b;
	int fd = tmsg_fd(size, seq);

	assert_int_equal(store_blob_from_fd(st, part, fd, &b), 0);
	close(fd);
	return b;
}

static inline uint64_t tuser(struct store *st, const char *name)
{
	struct store_txn *t;
	uint64_t id;
	unsigned p = store_partition_for(st, name);

	assert_int_equal(store_txn_begin(st, p, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, name, &id), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	return id;
}

static inline uint64_t tmbox(struct store *st, uint64_t user, const char *name)
{
	struct store_txn *t;
	uint64_t id;
	int rc;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(user), STORE_TXN_WRITE, &t), 0);
	rc = store_mbox_find(t, user, name, &id);
	if (rc == STORE_ENOMBOX)
		rc = store_mbox_create(t, user, name, 0, &id);
	assert_int_equal(rc, 0);
	assert_int_equal(store_txn_commit(&t), 0);
	return id;
}

static inline uint32_t tappend(struct store *st, uint64_t mbox, size_t size, unsigned flags)
{
	struct store_blob *b = tblob(st, STORE_ID_PART(mbox), size, 0);
	struct store_txn *t;
	uint32_t uid;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, mbox, b, flags, 0, 0, &uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&b);
	return uid;
}

/* A delivery through the group committer, waited for (store_gc_flush runs its callback). */
struct tgc_wait {
	int result, calls;
};

static inline void tgc_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			    void *arg)
{
	struct tgc_wait *w = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	w->result = result;
	w->calls++;
}

static inline int tgc_deliver(struct store_gc *gc, struct store_blob *b, struct store_rcpt *r,
			      size_t n)
{
	struct tgc_wait w = { -1, 0 };

	store_gc_deliver(gc, b, 0, r, n, tgc_done, &w);
	store_gc_flush(gc);
	return w.calls == 1 ? w.result : -1;
}

/* Recounts a mailbox from its rows and compares with STATUS. */
static inline void tcheck_status(struct store *st, uint64_t mbox)
{
	struct store_txn *t;
	struct store_status s;
	struct store_iter *it;
	struct store_msg m;
	uint32_t n = 0, unseen = 0, deleted = 0, recent = 0, maxuid = 0;
	uint64_t size = 0, maxmod = 0;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mbox, &s), 0);
	assert_int_equal(store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it), 0);
	while (store_iter_next(it, &m) == 1) {
		n++;
		size += m.size;
		unseen += !(m.flags & STORE_SEEN);
		deleted += !!(m.flags & STORE_DELETED);
		recent += m.uid >= s.first_recent_uid;
		if (m.uid > maxuid)
			maxuid = m.uid;
		if (m.modseq > maxmod)
			maxmod = m.modseq;
	}
	store_iter_free(&it);
	store_txn_abort(&t);
	assert_int_equal(s.messages, n);
	assert_int_equal(s.unseen, unseen);
	assert_int_equal(s.deleted, deleted);
	assert_int_equal(s.recent, recent);
	assert_int_equal(s.size, size);
	assert_true(s.uidnext > maxuid);
	assert_true(s.highestmodseq >= maxmod);
}

/* A user name (prefix + a number) that store_partition_for puts in partition part. */
static inline const char *tuser_name_in(struct store *st, unsigned part, const char *prefix,
					char *buf, size_t len)
{
	for (unsigned i = 0;; i++) {
		snprintf(buf, len, "%s%u", prefix, i);
		if (store_partition_for(st, buf) == part)
			return buf;
	}
}

/* Raw LMDB on partition part's index, the store closed meanwhile: a write txn and the
   table dbname in it. traw_end commits, closes and opens the store again. */
static inline MDB_txn *traw_begin(struct tstore *ts, unsigned part, const char *dbname,
				  MDB_env **env_r, MDB_dbi *dbi_r)
{
	MDB_txn *txn;
	char path[512];

	store_close(&ts->st);
	snprintf(path, sizeof(path), "%s/part%u/index.mdb", ts->dir, part);
	assert_int_equal(mdb_env_create(env_r), 0);
	mdb_env_set_maxdbs(*env_r, 32);
	assert_int_equal(mdb_env_open(*env_r, path, MDB_NOSUBDIR, 0640), 0);
	assert_int_equal(mdb_txn_begin(*env_r, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, dbname, 0, dbi_r), 0);
	return txn;
}

static inline void traw_end(struct tstore *ts, MDB_env *env, MDB_txn *txn)
{
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
}

/* Damage planted with raw LMDB (the store closed meanwhile): the cache row of blob is
   replaced by val (len bytes), or deleted when val is NULL. */
static inline void tplant_cache(struct tstore *ts, unsigned part, uint64_t blob, void *val,
				size_t len)
{
	MDB_env *env;
	MDB_dbi dbi;
	uint8_t key[8];
	MDB_val k = { 8, key }, v = { len, val };
	MDB_txn *txn = traw_begin(ts, part, "cache", &env, &dbi);

	for (int i = 0; i < 8; i++)
		key[i] = (uint8_t)(blob >> (56 - 8 * i));
	if (val != NULL)
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	else
		assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
	traw_end(ts, env, txn);
}

static inline void tverify_clean(struct store *st)
{
	struct store_verify_report r;
	int rc = store_verify(st, NULL, false, &r);

	if (rc != 0)
		fprintf(stderr,
			"verify: rc=%d counters=%llu refs=%llu missing=%llu orphans=%llu "
			"bad=%llu cache=%llu\n",
			rc, (unsigned long long)r.bad_counters,
			(unsigned long long)r.bad_refcounts, (unsigned long long)r.missing_files,
			(unsigned long long)r.orphan_files, (unsigned long long)r.bad_records,
			(unsigned long long)r.missing_cache);
	assert_int_equal(rc, 0);
}

#endif

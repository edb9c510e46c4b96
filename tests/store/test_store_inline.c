/* test_store_inline.c — bodies kept in the index (format 3, store_opts.inline_max): small
 * ones (compressible: zstd; random: raw, one of exactly two pieces) get no file and read back
 * byte-exact through store_blob_open, after a reopen too; one over the threshold is a file;
 * COPY shares an inline body; expunging the last reference removes its pieces in the same txn;
 * verify finds nothing wrong, repairs a wrong refcount of an inline row keeping its body, and
 * finds a damaged inline body; a body grown past the
 * threshold while written becomes a file with every byte; inline bodies' ids grow in the
 * order they are finished and their cache rows fill the table's pages; each body's first
 * piece fills the room left on the bodies' last page (format 4). */
#include <dirent.h>
#include <sys/random.h>

#include "tests/store/store_test.h"

#include "common/endian.h"
#include "store/store_private.h"

#define INLINE_MAX 16384

/* Message files (final names) under every blobs/xx of partition 0. */
static unsigned count_files(const char *dir)
{
	char p[512];
	unsigned n = 0;

	for (unsigned d = 0; d < 256; d++) {
		DIR *dp;
		struct dirent *de;

		snprintf(p, sizeof(p), "%s/part0/blobs/%02x", dir, d);
		if ((dp = opendir(p)) == NULL)
			continue;
		while ((de = readdir(dp)) != NULL)
			n += strlen(de->d_name) == 16;
		closedir(dp);
	}
	return n;
}

/* Rows of a DBI of partition 0. */
static size_t count_rows(struct store *st, enum store_dbi d)
{
	struct store_txn *t;
	MDB_stat ms;

	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(mdb_stat(t->txn, t->e->dbi[d], &ms), 0);
	store_txn_abort(&t);
	return ms.ms_entries;
}

/* How full a DBI of partition 0's leaf pages are: the bytes its rows take as LMDB lays a
   leaf node out (an 8-byte header, key, value, even; a 2-byte slot), the room they leave,
   the largest row's node. */
struct fill {
	size_t leaf, entries, waste, node_max;
};

static struct fill table_fill(struct store *st, enum store_dbi d)
{
	struct store_txn *t;
	struct fill f = { 0, 0, 0, 0 };
	size_t used = 0;
	MDB_stat ms;
	MDB_cursor *c;
	MDB_val k, v;

	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(mdb_stat(t->txn, t->e->dbi[d], &ms), 0);
	assert_int_equal(ms.ms_overflow_pages, 0);
	assert_int_equal(mdb_cursor_open(t->txn, t->e->dbi[d], &c), 0);
	for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
		size_t n = (8 + k.mv_size + v.mv_size + 1) / 2 * 2 + 2;

		used += n;
		f.node_max = n > f.node_max ? n : f.node_max;
	}
	mdb_cursor_close(c);
	store_txn_abort(&t);
	f.leaf = ms.ms_leaf_pages;
	f.entries = ms.ms_entries;
	f.waste = f.leaf * (ms.ms_psize - 16) - used;
	return f;
}

struct tbody {
	char *data;
	size_t len;
	uint32_t uid;
};

/* A message of len bytes: text that compresses, or random bytes that do not. */
static void make_body(struct tbody *m, size_t len, bool random)
{
	m->data = malloc(len + 1);
	m->len = len;
	assert_non_null(m->data);
	if (random) {
		assert_int_equal(getrandom(m->data, len, 0), (ssize_t)len);
		return;
	}
	for (size_t i = 0; i < len; i++)
		m->data[i] = i % 64 == 62 ? '\r' : i % 64 == 63 ? '\n' : (char)('a' + i % 26);
	memcpy(m->data, "Subject: x\r\n\r\n", len < 14 ? len : 14);
}

/* Appends m to mbox, written in chunks of step bytes. */
static void append(struct store *st, uint64_t mbox, struct tbody *m, size_t step, unsigned flags)
{
	struct store_blob *b;
	struct store_txn *t;

	assert_int_equal(store_blob_new(st, 0, &b), 0);
	for (size_t off = 0; off < m->len; off += step)
		assert_int_equal(store_blob_write(b, m->data + off,
						  m->len - off < step ? m->len - off : step),
				 0);
	assert_int_equal(store_blob_finish_deferred(b), 0);
	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, mbox, b, flags, 0, 0, &m->uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&b);
}

/* m reads back byte-exact from mbox (by read and by pread at an offset). */
static void check_body(struct store *st, uint64_t mbox, const struct tbody *m)
{
	struct store_txn *t;
	struct store_msg sm;
	uint64_t size;
	char *got = malloc(m->len + 1);
	ssize_t n;
	size_t have = 0;
	int fd;

	assert_non_null(got);
	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mbox, m->uid, &sm), 0);
	store_txn_abort(&t);
	assert_int_equal(sm.size, m->len);
	assert_int_equal(store_blob_open(st, 0, sm.blob, &fd, &size), 0);
	assert_int_equal(size, m->len);
	while ((n = read(fd, got + have, m->len + 1 - have)) > 0)
		have += (size_t)n;
	assert_int_equal(have, m->len);
	assert_memory_equal(got, m->data, m->len);
	if (m->len > 100) {
		assert_int_equal(pread(fd, got, 50, 77), 50);
		assert_memory_equal(got, m->data + 77, 50);
	}
	close(fd);
	free(got);
}

static void verify_clean(struct store *st)
{
	struct store_verify_report r;

	assert_int_equal(store_verify(st, NULL, false, &r), 0);
	assert_int_equal(r.missing_files, 0);
	assert_int_equal(r.bad_refcounts, 0);
	assert_int_equal(r.orphan_files, 0);
	assert_int_equal(r.missing_cache, 0);
}

/* The pieces of the inline body of uid in mbox, by its row (format 4: the first piece's
   length at 24, then pieces of 2,000 bytes but the last). */
static size_t body_pieces(struct store *st, uint64_t mbox, uint32_t uid)
{
	struct store_txn *t;
	struct store_msg sm;
	uint8_t k[8];
	MDB_val v;
	size_t len, first;

	assert_int_equal(store_txn_begin(st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mbox, uid, &sm), 0);
	put_be64(k, sm.blob);
	assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
	assert_int_equal(v.mv_size, 26);
	len = get_be32((uint8_t *)v.mv_data + 20);
	first = get_be16((uint8_t *)v.mv_data + 24);
	store_txn_abort(&t);
	assert_true(first > 0 && first <= 2000);
	return first >= len ? 1 : 1 + (len - first + 1999) / 2000;
}

/* A fresh one-partition store with bodies up to INLINE_MAX inline. */
static void inline_store_open(struct tstore *ts)
{
	tstore_open(ts, 1);
	ts->o.inline_max = INLINE_MAX;
	tstore_reopen(ts);
}

static void test_inline_roundtrip(void **state)
{
	struct tstore ts;
	struct tbody m[6];
	uint64_t user, inbox, other;

	(void)state;
	inline_store_open(&ts);
	user = tuser(ts.st, "ina");
	inbox = tmbox(ts.st, user, "INBOX");
	other = tmbox(ts.st, user, "Other");

	make_body(&m[0], 300, false);
	make_body(&m[1], 5000, false);
	make_body(&m[2], INLINE_MAX, false); /* exactly the threshold: inline */
	make_body(&m[3], 3999, true);        /* raw: tag + 3999 = two whole pieces or three */
	make_body(&m[4], 1000, true);
	make_body(&m[5], INLINE_MAX + 1, false); /* a file */
	for (size_t i = 0; i < 6; i++)
		append(ts.st, inbox, &m[i], i == 2 ? 4096 : 65536, i < 3 ? STORE_DELETED : 0);
	assert_int_equal(count_files(ts.dir), 1);
	assert_true(count_rows(ts.st, DBI_BODIES) >= 5);
	for (size_t i = 0; i < 6; i++)
		check_body(ts.st, inbox, &m[i]);
	verify_clean(ts.st);

	/* they survive a reopen */
	tstore_reopen(&ts);
	for (size_t i = 0; i < 6; i++)
		check_body(ts.st, inbox, &m[i]);

	/* a copy shares the body: expunging the original keeps it */
	struct store_txn *t;
	uint32_t uid0 = m[0].uid;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	uint32_t *done = NULL, *dst = NULL;
	size_t ncopied = 0;

	assert_int_equal(store_msg_copy(t, inbox, other, &uid0, 1, false, &done, &dst, &ncopied),
			 0);
	assert_int_equal(ncopied, 1);
	free(done);
	free(dst);
	assert_int_equal(store_txn_commit(&t), 0);
	size_t rows = count_rows(ts.st, DBI_BODIES);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, inbox, NULL, 0, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	/* m[1] (1 piece after zstd) and m[2] went, m[0] stays for the copy */
	assert_true(count_rows(ts.st, DBI_BODIES) < rows);
	struct tbody copy = m[0];

	copy.uid = 1;
	check_body(ts.st, other, &copy);
	verify_clean(ts.st);

	/* the copy (\Deleted too: flags are copied) goes with the last pieces of m[0] */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, other, NULL, 0, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	/* left: m[3] and m[4] */
	assert_int_equal(count_rows(ts.st, DBI_BODIES),
			 body_pieces(ts.st, inbox, m[3].uid) +
				 body_pieces(ts.st, inbox, m[4].uid));
	assert_int_equal(count_rows(ts.st, DBI_BLOBS), 3);
	verify_clean(ts.st);

	/* a wrong refcount on an inline row: --repair fixes it and keeps the body */
	struct store_msg sm;
	uint8_t k[8], row[26];
	MDB_val v;
	uint64_t size;
	int fd;
	struct store_verify_report r;

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_get(t, inbox, m[3].uid, &sm), 0);
	put_be64(k, sm.blob);
	assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
	assert_int_equal(v.mv_size, 26);
	memcpy(row, v.mv_data, 26);
	put_be32(row, 5);
	assert_int_equal(store_put(t, DBI_BLOBS, k, 8, row, 26), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), STORE_ECORRUPT);
	assert_int_equal(r.bad_refcounts, 1);
	assert_int_equal(store_verify(ts.st, NULL, true, &r), 0);
	verify_clean(ts.st);
	check_body(ts.st, inbox, &m[3]);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
	assert_int_equal(v.mv_size, 26);
	assert_int_equal(get_be32(v.mv_data), 1);
	store_txn_abort(&t);

	/* a damaged inline body: verify says so, store_blob_open does not hand it out */

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_get(t, inbox, m[4].uid, &sm), 0);
	put_be64(k, sm.blob);
	assert_int_equal(store_get(t, DBI_BLOBS, k, 8, &v), 0);
	assert_int_equal(v.mv_size, 26);
	put_be64(k, get_be64((uint8_t *)v.mv_data + 12));
	assert_int_equal(store_del(t, DBI_BODIES, k, 8), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(store_blob_open(ts.st, 0, sm.blob, &fd, &size), STORE_ECORRUPT);

	assert_int_equal(store_verify(ts.st, NULL, false, &r), STORE_ECORRUPT);
	assert_int_equal(r.missing_files, 1);
	check_body(ts.st, inbox, &m[3]);
	for (size_t i = 0; i < 6; i++)
		free(m[i].data);
	tstore_close(&ts, true);
}

/* Inline bodies' ids grow in the order they are finished (more than 64 in a ms too), so their `cache` rows go in at the end of the table with
   MDB_APPEND: each leaf page wastes less room than one row takes (a plain put's split moves
   a row out of the full page; random ids leave pages a third empty). */
static void test_inline_ids(void **state)
{
	struct tstore ts;
	struct tbody m;
	uint64_t box[2], last = 0;
	(void)state;
	inline_store_open(&ts);
	box[0] = tmbox(ts.st, tuser(ts.st, "ida"), "INBOX");
	box[1] = tmbox(ts.st, tuser(ts.st, "idb"), "INBOX");
	make_body(&m, 700, false);
	/* batches of 100 finished at once (mostly within a ms: past 64 the count moves to
	   the next ms), each appended in one txn */
	for (unsigned i = 0; i < 4; i++) {
		struct store_blob *b[100];
		struct store_txn *t;

		for (unsigned j = 0; j < 100; j++) {
			assert_int_equal(store_blob_new(ts.st, 0, &b[j]), 0);
			assert_int_equal(store_blob_write(b[j], m.data, m.len), 0);
			assert_int_equal(store_blob_finish_deferred(b[j]), 0);
			assert_true(store_blob_id(b[j]) > last);
			last = store_blob_id(b[j]);
		}
		assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
		for (unsigned j = 0; j < 100; j++)
			assert_int_equal(store_msg_append(t, box[j % 2], b[j], 0, 0, 0, NULL), 0);
		assert_int_equal(store_txn_commit(&t), 0);
		for (unsigned j = 0; j < 100; j++)
			store_blob_free(&b[j]);
	}
	assert_int_equal(count_files(ts.dir), 0);
	struct fill f = table_fill(ts.st, DBI_CACHE);

	assert_int_equal(f.entries, 400);
	assert_true(f.leaf > 1);
	assert_true(f.waste < f.leaf * f.node_max);
	verify_clean(ts.st);
	free(m.data);
	tstore_close(&ts, true);
}

/* Format 4: each body's first piece takes the room left on the bodies' last page (kept in
   the index: across a reopen too), so no page is left with more room than the smallest
   first piece's node (64 bytes: store_blob.c BODY_FIRST_MIN) would take, where whole pieces
   of these bodies (two a page) left a third of each page; every body reads back, expunged
   ones take their pieces with them. */
#define FIRST_MIN_NODE (8 + 8 + 64 + 2)

static int expunge_fn(struct store_txn *t, void *arg)
{
	return store_msg_expunge(t, *(uint64_t *)arg, NULL, 0, NULL, NULL);
}

static void test_inline_pages(void **state)
{
	enum { N = 120 };
	struct tstore ts;
	struct tbody m[N];
	uint64_t inbox;
	size_t pieces = 0;

	(void)state;
	inline_store_open(&ts);
	inbox = tmbox(ts.st, tuser(ts.st, "pga"), "INBOX");
	for (unsigned i = 0; i < N; i++) {
		make_body(&m[i], 1300 + i * 7 % 500, true); /* raw: no smaller in zstd */
		append(ts.st, inbox, &m[i], 65536, i % 2 ? STORE_DELETED : 0);
		if (i == N / 2)
			tstore_reopen(&ts);
	}
	for (unsigned i = 0; i < N; i++) {
		check_body(ts.st, inbox, &m[i]);
		pieces += body_pieces(ts.st, inbox, m[i].uid);
	}
	struct fill f = table_fill(ts.st, DBI_BODIES);

	assert_int_equal(f.entries, pieces);
	assert_true(f.leaf > 2);
	assert_true(f.waste < f.leaf * FIRST_MIN_NODE);
	verify_clean(ts.st);

	assert_int_equal(store_write(ts.st, 0, expunge_fn, &inbox), 0);
	pieces = 0;
	for (unsigned i = 0; i < N; i += 2) {
		check_body(ts.st, inbox, &m[i]);
		pieces += body_pieces(ts.st, inbox, m[i].uid);
	}
	assert_int_equal(count_rows(ts.st, DBI_BODIES), pieces);
	verify_clean(ts.st);
	for (unsigned i = 0; i < N; i++)
		free(m[i].data);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inline_roundtrip),
		cmocka_unit_test(test_inline_ids),
		cmocka_unit_test(test_inline_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

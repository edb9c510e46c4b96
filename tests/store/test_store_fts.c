/* test_store_fts.c — the full-text index: candidates are a superset of the messages whose
 * searchable text holds the needle (MIME decoding, charsets, case folding, header fields),
 * through segment building and merging, expunges and the rewrite they cause, COPY, the
 * group committer's delivery path, a mailbox from before the index and its rebuild. */
#include "tests/store/store_test.h"

#include "common/mimetext.h"

static int fd_of(const char *text)
{
	int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	size_t len = strlen(text);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static uint32_t append_text(struct store *st, uint64_t mbox, const char *text)
{
	struct store_blob *b;
	struct store_txn *t;
	uint32_t uid;
	int fd = fd_of(text);

	assert_int_equal(store_blob_from_fd(st, STORE_ID_PART(mbox), fd, &b), 0);
	close(fd);
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, mbox, b, 0, 0, 0, &uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&b);
	return uid;
}

/* The candidates for needle (folded here): 0 and the list, or the error. */
static int cands(struct store *st, uint64_t mbox, const char *needle, uint32_t **v, size_t *n)
{
	struct store_txn *t;
	char f[256];
	int rc;

	snprintf(f, sizeof(f), "%s", needle);
	mimetext_fold(f, strlen(f));
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	rc = store_fts_candidates(t, mbox, f, strlen(f), v, n);
	store_txn_abort(&t);
	return rc;
}

static bool has(const uint32_t *v, size_t n, uint32_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == uid)
			return true;
	return false;
}

static void expect(struct store *st, uint64_t mbox, const char *needle, uint32_t uid, bool in)
{
	uint32_t *v;
	size_t n;

	assert_int_equal(cands(st, mbox, needle, &v, &n), 0);
	if (has(v, n, uid) != in)
		fail_msg("needle \"%s\": uid %u %s the candidates", needle, uid,
			 in ? "missing from" : "unexpectedly in");
	free(v);
}

static void fts_open(struct tstore *ts, bool fts)
{
	memset(ts, 0, sizeof(*ts));
	strcpy(ts->dir, "/tmp/heron-store-test.XXXXXX");
	assert_non_null(mkdtemp(ts->dir));
	ts->o.path = ts->dir;
	ts->o.partitions = 1;
	ts->o.map_size = 1 << 20;
	ts->o.map_size_max = (uint64_t)1 << 32;
	ts->o.expunge_history_ms = 30LL * 86400 * 1000;
	ts->o.group_commit_ms = 1;
	ts->o.group_commit_max = 64;
	ts->o.create = true;
	ts->o.fts = fts;
	assert_int_equal(store_open(&ts->o, &ts->st), 0);
}

static const char *const mime_msg =
	"From: =?ISO-8859-1?Q?J=F6rg?= <j@example.org>\r\n"
	"Subject: Quarterly Zeppelin\r\n"
	"MIME-Version: 1.0\r\n"
	"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n"
	"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n"
	"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
	"Caf=C3=A9 meeting about the soft=\r\nbreak word\r\n"
	"--b1\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\n"
	"Gr\xfc\xdf Gott MAJUSCULE\r\n"
	"--b1\r\nContent-Type: text/csv; name=\"sheet.csv\"\r\n"
	"Content-Disposition: attachment; filename=\"sheet.csv\"\r\n"
	"Content-Transfer-Encoding: base64\r\n\r\n"
	"YXR0YWNoZWQgc3ByZWFkc2hlZXQgdmFsdWVz\r\n" /* "attached spreadsheet values" */
	"--b1\r\nContent-Type: image/jpeg; name=\"photo.jpg\"\r\n"
	"Content-Transfer-Encoding: base64\r\n\r\n"
	"aGlkZGVuaW1hZ2V3b3Jk\r\n" /* "hiddenimageword": not text */
	"--b1\r\nContent-Type: message/rfc822\r\n\r\n"
	"Subject: inner envelope\r\n\r\nembedded body text\r\n"
	"--b1--\r\n";

/* The first message a process indexes has no text at all (no trigram seen yet): indexed as
   empty, found by no needle (the sanitizer build once saw a copy from a missing array). */
static void test_empty_first(void **state)
{
	struct tstore ts;
	uint64_t u, mbox;
	uint32_t uid;

	(void)state;
	fts_open(&ts, true);
	u = tuser(ts.st, "empty");
	mbox = tmbox(ts.st, u, "INBOX");
	uid = append_text(ts.st, mbox, "");
	expect(ts.st, mbox, "abc", uid, false);
	tstore_close(&ts, true);
}

static void test_mime(void **state)
{
	struct tstore ts;
	uint64_t u, mbox;
	uint32_t plain, mime;
	uint32_t *v;
	size_t n;

	(void)state;
	fts_open(&ts, true);
	u = tuser(ts.st, "ann");
	mbox = tmbox(ts.st, u, "INBOX");
	plain = append_text(ts.st, mbox, "Subject: hello\r\n\r\nnothing much\r\n");
	mime = append_text(ts.st, mbox, mime_msg);
	expect(ts.st, mbox, "café", mime, true);      /* QP + UTF-8 */
	expect(ts.st, mbox, "CAFÉ", mime, true);      /* folding */
	expect(ts.st, mbox, "softbreak", mime, true); /* soft line break */
	expect(ts.st, mbox, "grüß", mime, true);      /* ISO-8859-1 */
	expect(ts.st, mbox, "majuscule", mime, true);
	expect(ts.st, mbox, "spreadsheet", mime, true); /* a text attachment, base64 */
	expect(ts.st, mbox, "sheet.csv", mime, true);   /* a part's header field */
	expect(ts.st, mbox, "jörg", mime, true);        /* RFC 2047 in the header */
	expect(ts.st, mbox, "zeppelin", mime, true);
	expect(ts.st, mbox, "inner envelope", mime, true);
	expect(ts.st, mbox, "embedded body", mime, true);
	expect(ts.st, mbox, "hiddenimageword", mime, false); /* images give no text */
	expect(ts.st, mbox, "zeppelin", plain, false);
	expect(ts.st, mbox, "nothing much", plain, true);
	expect(ts.st, mbox, "nothing much", mime, false);
	/* a match never spans two runs */
	expect(ts.st, mbox, "zeppelinmime", mime, false);
	assert_int_equal(cands(ts.st, mbox, "ab", &v, &n), STORE_ENOTSUP);
	tstore_close(&ts, true);
}

/* ---- many messages: segments, merges, expunges ---- */

static void *xcalloc_test(size_t n)
{
	void *p = calloc(n, sizeof(uint32_t));

	assert_non_null(p);
	return p;
}

static uint32_t rng_state = 12345;

static uint32_t rnd(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 8;
}

#define NWORDS 400
static char words[NWORDS][12];

static void make_words(void)
{
	static const char cons[] = "bcdfghjklmnpqrstvwxz", vow[] = "aeiouy";

	for (int i = 0; i < NWORDS; i++) {
		int len = 2 + (int)(rnd() % 3), k = 0;

		for (int j = 0; j < len; j++) {
			words[i][k++] = cons[rnd() % 20];
			words[i][k++] = vow[rnd() % 6];
		}
		words[i][k] = '\0';
	}
}

#define NMSG 700
static char bodies[NMSG][600];

/* A message of random words (Zipf-like: low indexes often), one of them capitalized. */
static void make_body(char *out, size_t size)
{
	size_t n = 0;

	while (n + 14 < size - 3) {
		uint32_t r = rnd() % (NWORDS * 4);
		int w = (int)(r < NWORDS ? r : (r % 40)); /* a tenth of the words are common */

		n += (size_t)snprintf(out + n, size - n, "%s ", words[w]);
	}
	out[n] = '\0';
}

static bool body_has(const char *body, const char *needle)
{
	return strstr(body, needle) != NULL;
}

static void check_all(struct store *st, uint64_t mbox, const uint32_t *uids, const bool *alive,
		      size_t nmsg, size_t *narrow_r)
{
	*narrow_r = 0;
	for (int q = 0; q < 200; q++) {
		char needle[16];
		const char *w = words[rnd() % NWORDS];
		size_t off = rnd() % 3, len = 3 + rnd() % 5;
		uint32_t *v;
		size_t n, truth = 0;

		if (off + 3 > strlen(w))
			off = 0;
		snprintf(needle, sizeof(needle), "%.*s", (int)len, w + off);
		assert_int_equal(cands(st, mbox, needle, &v, &n), 0);
		for (size_t i = 0; i < nmsg; i++) {
			if (!alive[i] || !body_has(bodies[i], needle))
				continue;
			truth++;
			if (!has(v, n, uids[i]))
				fail_msg("needle \"%s\": uid %u holds it, not a candidate", needle,
					 uids[i]);
		}
		for (size_t i = 1; i < n; i++)
			assert_true(v[i - 1] < v[i]); /* sorted, distinct */
		if (n < nmsg / 2)
			(*narrow_r)++;
		(void)truth;
		free(v);
	}
}

static int expunge_fn(struct store_txn *t, void *arg)
{
	const uint32_t *a = arg;
	uint64_t mbox = (uint64_t)a[0] << 32 | a[1];

	return store_msg_expunge(t, mbox, a + 3, a[2], NULL, NULL);
}

static void expunge(struct store *st, uint64_t mbox, const uint32_t *uids, size_t n)
{
	uint32_t *a = xcalloc_test(n + 3);

	a[0] = (uint32_t)(mbox >> 32);
	a[1] = (uint32_t)mbox;
	a[2] = (uint32_t)n;
	memcpy(a + 3, uids, n * sizeof(*uids));
	assert_int_equal(store_write(st, STORE_ID_PART(mbox), expunge_fn, a), 0);
	free(a);
}

static void stats(struct store *st, uint64_t mbox, struct store_fts_stats *s)
{
	struct store_txn *t;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_fts_stats(t, mbox, s), 0);
	store_txn_abort(&t);
}

/* A message with more text than the index takes (16 MiB): head, then filler lines. */
static uint32_t append_huge(struct store *st, uint64_t mbox, const char *head)
{
	static char line[4096];
	struct store_blob *b;
	struct store_txn *t;
	uint32_t uid;
	int fd = fd_of(head);

	memset(line, 'a', sizeof(line) - 2);
	line[sizeof(line) - 2] = '\r';
	line[sizeof(line) - 1] = '\n';
	lseek(fd, 0, SEEK_END);
	for (int i = 0; i < 17 * 256; i++)
		assert_int_equal(write(fd, line, sizeof(line)), (ssize_t)sizeof(line));
	lseek(fd, 0, SEEK_SET);
	assert_int_equal(store_blob_from_fd(st, STORE_ID_PART(mbox), fd, &b), 0);
	close(fd);
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_append(t, mbox, b, 0, 0, 0, &uid), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	store_blob_free(&b);
	return uid;
}

static void expect_only(struct store *st, uint64_t mbox, const char *needle, uint32_t uid)
{
	uint32_t *v;
	size_t n;

	assert_int_equal(cands(st, mbox, needle, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0], uid);
	free(v);
}

static uint32_t uids[NMSG];
static bool alive[NMSG];

static void test_many(void **state)
{
	struct tstore ts;
	struct store_fts_stats s;
	uint64_t u, mbox;
	size_t narrow;
	char msg[800];
	uint32_t gone[NMSG];
	size_t ngone = 0;

	(void)state;
	make_words();
	fts_open(&ts, true);
	u = tuser(ts.st, "bob");
	mbox = tmbox(ts.st, u, "INBOX");
	for (size_t i = 0; i < NMSG; i++) {
		make_body(bodies[i], sizeof(bodies[i]));
		snprintf(msg, sizeof(msg), "Subject: m\r\n\r\n%.599s\r\n", bodies[i]);
		uids[i] = i == 5 ? append_huge(ts.st, mbox, msg) : append_text(ts.st, mbox, msg);
		alive[i] = true;
	}
	expect_only(ts.st, mbox, "qqqqq", uids[5]); /* too much text: always a candidate */
	stats(ts.st, mbox, &s);
	assert_true(s.complete);
	assert_int_equal(s.messages, NMSG);
	assert_int_equal(s.pending, NMSG % 64);
	/* 700 = 2 * 256 + 2 * 64 + 60: two merges of four, two class-0 segments */
	assert_int_equal(s.segments, 4);
	check_all(ts.st, mbox, uids, alive, NMSG, &narrow);
	assert_true(narrow > 100); /* the index narrows most searches down */

	/* expunge every other message of the first 256 (one segment: past half of it, it is
	   written again) and a few of the pending ones */
	for (size_t i = 0; i < 256; i += 2) {
		gone[ngone++] = uids[i];
		alive[i] = false;
	}
	gone[ngone++] = uids[1]; /* the 129th of 256 */
	alive[1] = false;
	for (size_t i = NMSG - 10; i < NMSG; i++) {
		gone[ngone++] = uids[i];
		alive[i] = false;
	}
	expunge(ts.st, mbox, gone, ngone);
	stats(ts.st, mbox, &s);
	assert_int_equal(s.pending, NMSG % 64 - 10);
	assert_true(s.dead < 128); /* the segment was rewritten */
	assert_int_equal(s.messages, NMSG - ngone + s.dead);
	check_all(ts.st, mbox, uids, alive, NMSG, &narrow);
	expect_only(ts.st, mbox, "qqqqq", uids[5]);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

/* ---- COPY, the group committer, a mailbox from before the index ---- */

static int copy_fn(struct store_txn *t, void *arg)
{
	uint64_t *a = arg;
	uint32_t uid = (uint32_t)a[2], *src, *dst;
	size_t n;
	int rc = store_msg_copy(t, a[0], a[1], &uid, 1, false, &src, &dst, &n);

	a[3] = n == 1 ? dst[0] : 0;
	free(src);
	free(dst);
	return rc;
}

static void test_copy_gc(void **state)
{
	struct tstore ts;
	struct store_gc *gc;
	struct store_blob *b;
	struct store_rcpt r = { .user = "cid" };
	uint64_t u, inbox, arch, a[4];
	uint32_t uid;
	int fd;

	(void)state;
	fts_open(&ts, true);
	u = tuser(ts.st, "cid");
	inbox = tmbox(ts.st, u, "INBOX");
	arch = tmbox(ts.st, u, "Archive");
	uid = append_text(ts.st, inbox, "Subject: x\r\n\r\nkumquat harvest\r\n");
	a[0] = inbox;
	a[1] = arch;
	a[2] = uid;
	assert_int_equal(store_write(ts.st, 0, copy_fn, a), 0);
	assert_int_not_equal(a[3], 0);
	expect(ts.st, arch, "kumquat", (uint32_t)a[3], true);
	expect(ts.st, arch, "harvest", (uint32_t)a[3], true);
	expect(ts.st, arch, "orchard", (uint32_t)a[3], false);

	/* a delivery through the group committer: trigrams computed before its txn */
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	fd = fd_of("Subject: y\r\nContent-Type: text/plain; charset=windows-1252\r\n\r\n"
		   "price \x80"
		   "42 quince\r\n");
	assert_int_equal(store_blob_from_fd(ts.st, 0, fd, &b), 0);
	close(fd);
	assert_int_equal(tgc_deliver(gc, b, &r, 1), 0);
	store_blob_free(&b);
	store_gc_free(&gc);
	expect(ts.st, inbox, "quince", r.uid, true);
	expect(ts.st, inbox, "€42", r.uid, true); /* windows-1252 0x80 */
	expect(ts.st, inbox, "kumquat", r.uid, false);
	tstore_close(&ts, true);
}

static void test_rebuild(void **state)
{
	struct tstore ts;
	struct store_fts_stats s;
	uint64_t u, mbox, n;
	uint32_t first, later, *v;
	size_t nv;

	(void)state;
	fts_open(&ts, false); /* messages from before the index */
	u = tuser(ts.st, "dee");
	mbox = tmbox(ts.st, u, "INBOX");
	first = append_text(ts.st, mbox, "Subject: a\r\n\r\nold pomegranate\r\n");
	for (int i = 0; i < 70; i++)
		append_text(ts.st, mbox, "Subject: filler\r\n\r\nnothing here\r\n");
	assert_int_equal(store_fts_rebuild(ts.st, mbox, &n), STORE_ENOTSUP);
	ts.o.fts = true;
	tstore_reopen(&ts);
	later = append_text(ts.st, mbox, "Subject: b\r\n\r\nnew pomegranate\r\n");
	/* not complete: the index cannot say, every message is read */
	assert_int_equal(cands(ts.st, mbox, "pomegranate", &v, &nv), STORE_ENOTSUP);
	stats(ts.st, mbox, &s);
	assert_true(s.indexed);
	assert_false(s.complete);
	assert_int_equal(store_fts_rebuild(ts.st, mbox, &n), 0);
	assert_int_equal(n, 72);
	stats(ts.st, mbox, &s);
	assert_true(s.complete);
	assert_int_equal(s.messages, 72);
	expect(ts.st, mbox, "pomegranate", first, true);
	expect(ts.st, mbox, "pomegranate", later, true);
	assert_int_equal(cands(ts.st, mbox, "pomegranate", &v, &nv), 0);
	assert_int_equal(nv, 2);
	free(v);
	/* turned off again: the mailbox is no longer complete */
	ts.o.fts = false;
	tstore_reopen(&ts);
	append_text(ts.st, mbox, "Subject: c\r\n\r\nunindexed\r\n");
	ts.o.fts = true;
	tstore_reopen(&ts);
	assert_int_equal(cands(ts.st, mbox, "pomegranate", &v, &nv), STORE_ENOTSUP);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_first), /* first: nothing indexed before it */
		cmocka_unit_test(test_mime),        cmocka_unit_test(test_many),
		cmocka_unit_test(test_copy_gc),     cmocka_unit_test(test_rebuild),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

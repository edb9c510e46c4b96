/* test_store_restore.c — the calls that carry a mailbox's state over to another store
 * (mailctl import, user move): store_msg_restore_modseq and store_mbox_restore_modseq keep
 * MODSEQs and never let HIGHESTMODSEQ go back, and store_annot_all lists every annotation of
 * an owner that one user sees (theirs and the shared ones, not another user's);
 * store_msg_history and store_msg_restore_history carry the expunge history (QRESYNC). */
#include <inttypes.h>
#include <limits.h>
#include <time.h>

#include "store_test.h"

static uint64_t msg_modseq(struct store *st, uint64_t mbox, uint32_t uid)
{
	struct store_txn *t;
	struct store_msg m;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mbox, uid, &m), 0);
	store_txn_abort(&t);
	return m.modseq;
}

static struct store_status mbox_status(struct store *st, uint64_t mbox)
{
	struct store_txn *t;
	struct store_status s;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, mbox, &s), 0);
	store_txn_abort(&t);
	return s;
}

static void test_restore_modseq(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_iter *it;
	struct store_msg m;
	uint64_t user, mb;
	uint32_t *uids = NULL;
	size_t n = 0;
	bool exact = true;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "mo");
	mb = tmbox(ts.st, user, "INBOX");
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(tappend(ts.st, mb, 300, 0), i + 1);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 4);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	/* above HIGHESTMODSEQ: it follows; below: it stays */
	assert_int_equal(store_msg_restore_modseq(t, mb, 2, 50), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 1, 7), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 3, 2), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 9, 8), STORE_ENOMSG);
	assert_int_equal(store_msg_restore_modseq(t, mb, 1, 0), STORE_EINVAL);
	assert_int_equal(store_msg_restore_modseq(t, mb + 1000, 1, 5), STORE_ENOMBOX);
	assert_int_equal(store_mbox_restore_modseq(t, mb, 0), STORE_EINVAL);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(msg_modseq(ts.st, mb, 1), 7);
	assert_int_equal(msg_modseq(ts.st, mb, 2), 50);
	assert_int_equal(msg_modseq(ts.st, mb, 3), 2);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 50);

	/* CHANGEDSINCE sees the restored values */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_iter(t, mb, 1, UINT32_MAX, 6, &it), 0);
	assert_int_equal(store_iter_next(it, &m), STORE_ITER_MSG);
	assert_int_equal(m.uid, 1);
	assert_int_equal(store_iter_next(it, &m), STORE_ITER_MSG);
	assert_int_equal(m.uid, 2);
	assert_int_equal(store_iter_next(it, &m), 0);
	store_iter_free(&it);
	assert_int_equal(store_msg_restore_modseq(t, mb, 1, 9), STORE_EINVAL); /* read txn */
	assert_int_equal(store_mbox_restore_modseq(t, mb, 90), STORE_EINVAL);
	store_txn_abort(&t);

	/* the mailbox's: raised, never lowered; the history before it is not exact */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_restore_modseq(t, mb, 40), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 50);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_restore_modseq(t, mb, 70), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 70);
	assert_int_equal(mbox_status(ts.st, mb).expunge_floor, 71);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_vanished(t, mb, 10, &uids, &n, &exact), 0);
	assert_false(exact);
	assert_int_equal(n, 0);
	store_txn_abort(&t);
	free(uids);

	/* the next change goes on from there */
	assert_int_equal(tappend(ts.st, mb, 300, 0), 4);
	assert_int_equal(msg_modseq(ts.st, mb, 4), 71);
	/* the last change (an append) restored lower: HIGHESTMODSEQ back to before it */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 4, 60), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(msg_modseq(ts.st, mb, 4), 60);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 70);
	/* an append restored to the mailbox's counter, then above it */
	assert_int_equal(tappend(ts.st, mb, 300, 0), 5); /* 71 */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 5, 70), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 70);
	assert_int_equal(tappend(ts.st, mb, 300, 0), 6); /* 71 */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_restore_modseq(t, mb, 6, 90), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, mb).highestmodseq, 90);
	tstore_close(&ts, true);
}

struct seen {
	char names[512];
	unsigned n;
};

static int seen_cb(const struct store_annot *a, void *arg)
{
	struct seen *s = arg;

	strncat(s->names, a->entry, a->entry_len);
	strcat(s->names, "=");
	strncat(s->names, a->value, a->value_len);
	strcat(s->names, ",");
	return ++s->n == 100 ? 7 : 0;
}

static void set(struct store_txn *t, uint64_t owner, uint64_t user, const char *e, const char *v)
{
	assert_int_equal(store_annot_set(t, owner, user, e, strlen(e), v, strlen(v), 0), 0);
}

static void test_annot_all(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct seen s = { "", 0 };
	uint64_t user, other, mb, mb2;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "an");
	other = tuser(ts.st, "bo");
	mb = tmbox(ts.st, user, "INBOX");
	mb2 = tmbox(ts.st, user, "Work");
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	set(t, mb, user, "/shared/Comment", "s");
	set(t, mb, user, "/shared/comment/deeper/still", "d");
	set(t, mb, user, "/private/vendor/x", "p");
	set(t, mb, other, "/private/theirs", "o");
	set(t, mb2, user, "/private/work", "w");
	set(t, user, user, "/private/server", "u");
	assert_int_equal(store_txn_commit(&t), 0);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_annot_all(t, mb, user, seen_cb, &s), 0);
	assert_string_equal(s.names, "/private/vendor/x=p,/shared/comment=s,"
				     "/shared/comment/deeper/still=d,");
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_annot_all(t, mb, 0, seen_cb, &s), 0); /* the shared ones */
	assert_string_equal(s.names, "/shared/comment=s,/shared/comment/deeper/still=d,");
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_annot_all(t, user, user, seen_cb, &s), 0); /* the server's */
	assert_string_equal(s.names, "/private/server=u,");
	memset(&s, 0, sizeof(s));
	assert_int_equal(store_annot_all(t, mb + 1000, user, seen_cb, &s), 0);
	assert_int_equal(s.n, 0);
	s.n = 98; /* the callback's non-zero stops the walk */
	assert_int_equal(store_annot_all(t, mb, user, seen_cb, &s), 7);
	assert_int_equal(s.n, 100);
	store_txn_abort(&t);
	tstore_close(&ts, true);
}

struct hist {
	char rows[256];
	unsigned n, stop_at;
};

static int hist_cb(uint32_t uid, uint64_t modseq, int64_t when, void *arg)
{
	struct hist *h = arg;
	size_t len = strlen(h->rows);

	snprintf(h->rows + len, sizeof(h->rows) - len, "%" PRIu32 "@%" PRIu64 "%s,", uid, modseq,
		 when > 0 ? "" : "?");
	return ++h->n == h->stop_at ? 9 : 0;
}

static void expunge_one(struct store *st, uint64_t mbox, uint32_t uid)
{
	struct store_txn *t;
	uint32_t *out = NULL;
	size_t n = 0;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, mbox, &uid, 1, &out, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_txn_commit(&t), 0);
	free(out);
}

/* VANISHED since a MODSEQ: the UIDs as one string, and whether the history was exact. */
static const char *vanished(struct store *st, uint64_t mbox, uint64_t since, bool *exact)
{
	static char s[64];
	struct store_txn *t;
	uint32_t *uids = NULL;
	size_t n = 0;

	s[0] = '\0';
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_vanished(t, mbox, since, &uids, &n, exact), 0);
	store_txn_abort(&t);
	for (size_t i = 0; i < n; i++)
		snprintf(s + strlen(s), sizeof(s) - strlen(s), "%" PRIu32 ",", uids[i]);
	free(uids);
	return s;
}

/* store_msg_history lists what store_msg_restore_history puts back: an import that keeps
   the UIDs and MODSEQs answers QRESYNC's VANISHED exactly as the source did. */
static void test_history(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_status src;
	struct hist h = { "", 0, 0 };
	uint64_t user, mb, dst;
	int64_t now = time(NULL);
	bool exact = false;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "hi");
	mb = tmbox(ts.st, user, "INBOX");
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(tappend(ts.st, mb, 300, 0), i + 1); /* modseq 2..5 */
	expunge_one(ts.st, mb, 4);                                   /* 6 */
	expunge_one(ts.st, mb, 2);                                   /* 7 */
	src = mbox_status(ts.st, mb);
	assert_int_equal(src.highestmodseq, 7);
	assert_int_equal(src.expunge_floor, 1);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_history(t, mb, hist_cb, &h), 0);
	assert_string_equal(h.rows, "4@6,2@7,"); /* MODSEQ order */
	memset(&h, 0, sizeof(h));
	h.stop_at = 1; /* the callback's non-zero stops the walk */
	assert_int_equal(store_msg_history(t, mb, hist_cb, &h), 9);
	assert_string_equal(h.rows, "4@6,");
	assert_int_equal(store_msg_history(t, mb + 1000, hist_cb, &h), STORE_ENOMBOX);
	assert_int_equal(store_msg_restore_history(t, mb, 1, 0, 0, 0), STORE_EINVAL); /* read */
	store_txn_abort(&t);

	/* the copy, as mailctl import makes it: UIDs 1 and 3, UIDNEXT and HIGHESTMODSEQ kept */
	dst = tmbox(ts.st, user, "Copy");
	assert_int_equal(tappend(ts.st, dst, 300, 0), 1);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_restore_uids(t, dst, 0, 3), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(tappend(ts.st, dst, 300, 0), 3);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_restore_uids(t, dst, 0, src.uidnext), 0);
	assert_int_equal(store_mbox_restore_modseq(t, dst, src.highestmodseq), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, dst).expunge_floor, 8);
	assert_string_equal(vanished(ts.st, dst, 6, &exact), ""); /* no history: not exact */
	assert_false(exact);

	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	/* what the mailbox contradicts, or no entry at all */
	/* UID 3 kept, UID 5 not below UIDNEXT, MODSEQ 8 above HIGHESTMODSEQ, floor 0 */
	assert_int_equal(store_msg_restore_history(t, dst, 1, 3, 6, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst, 1, 5, 6, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst, 1, 4, 8, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst, 0, 4, 6, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst, 1, 4, 0, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst, 1, 0, 6, now), STORE_EINVAL);
	assert_int_equal(store_msg_restore_history(t, dst + 1000, 1, 0, 0, 0), STORE_ENOMBOX);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, dst).expunge_floor, 8);

	/* the export's history, as w_history restores it: the floor, then each entry */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_restore_history(t, dst, src.expunge_floor, 0, 0, 0), 0);
	assert_int_equal(store_msg_restore_history(t, dst, src.expunge_floor, 4, 6, now), 0);
	assert_int_equal(store_msg_restore_history(t, dst, src.expunge_floor, 2, 7, now), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, dst).expunge_floor, 1);
	assert_int_equal(mbox_status(ts.st, dst).highestmodseq, 7);
	memset(&h, 0, sizeof(h));
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_history(t, dst, hist_cb, &h), 0);
	store_txn_abort(&t);
	assert_string_equal(h.rows, "4@6,2@7,");

	/* the same answers as the source's, exact */
	for (uint64_t since = 1; since <= 7; since++) {
		char want[64];
		bool src_exact = false;

		snprintf(want, sizeof(want), "%s", vanished(ts.st, mb, since, &src_exact));
		assert_string_equal(vanished(ts.st, dst, since, &exact), want);
		assert_true(exact && src_exact);
	}
	assert_string_equal(vanished(ts.st, dst, 5, &exact), "2,4,");
	assert_string_equal(vanished(ts.st, dst, 6, &exact), "2,");
	assert_string_equal(vanished(ts.st, dst, 7, &exact), "");

	/* the floor is lowered, never raised: a later import of a shorter history keeps it */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_restore_history(t, dst, 5, 0, 0, 0), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(mbox_status(ts.st, dst).expunge_floor, 1);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restore_modseq),
		cmocka_unit_test(test_annot_all),
		cmocka_unit_test(test_history),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

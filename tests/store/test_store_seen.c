/* test_store_seen.c — the private \Seen of store_seen.c: a viewer's \Seen apart from the
 * owner's (STATUS counts per viewer, the message row untouched), the MODSEQ a change takes
 * (the mailbox's next, seen by the viewer only), UNCHANGEDSINCE against it, the rows listed
 * by CHANGEDSINCE, and their life: expunge, mailbox delete, viewer rename and delete; viewer
 * names past 255 bytes (keyed by their SHA-256). */
#include "store_test.h"

struct fixture {
	struct tstore ts;
	uint64_t alice, mb;
	uint32_t uid[3];
};

static void setup(struct fixture *f)
{
	tstore_open(&f->ts, 1);
	f->alice = tuser(f->ts.st, "alice");
	tuser(f->ts.st, "bob");
	tuser(f->ts.st, "carol");
	f->mb = tmbox(f->ts.st, f->alice, "Team");
	f->uid[0] = tappend(f->ts.st, f->mb, 200, STORE_SEEN); /* read by alice */
	f->uid[1] = tappend(f->ts.st, f->mb, 200, 0);
	f->uid[2] = tappend(f->ts.st, f->mb, 200, 0);
}

static uint32_t unseen(struct fixture *f, const char *viewer)
{
	struct store_txn *t;
	struct store_status st;

	assert_int_equal(store_txn_begin(f->ts.st, 0, STORE_TXN_READ, &t), 0);
	if (viewer == NULL)
		assert_int_equal(store_mbox_status(t, f->mb, &st), 0);
	else
		assert_int_equal(store_seen_status(t, f->mb, viewer, &st), 0);
	store_txn_abort(&t);
	return st.unseen;
}

static uint64_t highest(struct fixture *f)
{
	struct store_txn *t;
	struct store_status st;

	assert_int_equal(store_txn_begin(f->ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_status(t, f->mb, &st), 0);
	store_txn_abort(&t);
	return st.highestmodseq;
}

static int set(struct fixture *f, const char *viewer, uint32_t uid, bool seen,
	       uint64_t unchangedsince, struct store_msg *m_r)
{
	struct store_txn *t;
	int rc;

	assert_int_equal(store_txn_begin(f->ts.st, 0, STORE_TXN_WRITE, &t), 0);
	rc = store_seen_set(t, f->mb, viewer, uid, seen, unchangedsince, m_r);
	if (rc == 0)
		assert_int_equal(store_txn_commit(&t), 0);
	else
		store_txn_abort(&t);
	return rc;
}

/* The message uid as viewer sees it (NULL: the record itself, the owner's view). */
static struct store_msg seen_as(struct fixture *f, const char *viewer, uint32_t uid)
{
	struct store_txn *t;
	struct store_msg m;

	assert_int_equal(store_txn_begin(f->ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, f->mb, uid, &m), 0);
	if (viewer != NULL)
		assert_int_equal(store_seen_apply(t, f->mb, viewer, &m), 0);
	store_txn_abort(&t);
	return m;
}

static int add_uid(const struct store_seen *s, void *arg)
{
	char *out = arg;

	snprintf(out + strlen(out), 64 - strlen(out), "%u%s,", s->uid, s->seen ? "" : "-");
	return 0;
}

static const char *rows(struct fixture *f, const char *viewer, uint64_t changedsince)
{
	static char out[64];
	struct store_txn *t;

	out[0] = '\0';
	assert_int_equal(store_txn_begin(f->ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_seen_list(t, f->mb, viewer, 1, changedsince, add_uid, out), 0);
	store_txn_abort(&t);
	return out;
}

static void test_private_seen(void **state)
{
	struct fixture f;
	struct store_msg m, before;
	uint64_t h0, h1;

	(void)state;
	setup(&f);
	/* a new viewer has seen nothing, whatever the owner read */
	assert_int_equal(unseen(&f, NULL), 2);
	assert_int_equal(unseen(&f, "bob"), 3);
	assert_false(seen_as(&f, "bob", f.uid[0]).flags & STORE_SEEN);
	assert_true(seen_as(&f, NULL, f.uid[0]).flags & STORE_SEEN);

	/* bob reads the second: his own, not alice's nor carol's */
	before = seen_as(&f, NULL, f.uid[1]);
	h0 = highest(&f);
	assert_int_equal(set(&f, "bob", f.uid[1], true, 0, &m), 0);
	h1 = highest(&f);
	assert_int_equal(h1, h0 + 1);
	assert_true(m.flags & STORE_SEEN);
	assert_int_equal(m.modseq, h1);
	assert_int_equal(unseen(&f, "bob"), 2);
	assert_int_equal(unseen(&f, "carol"), 3);
	assert_int_equal(unseen(&f, NULL), 2);
	m = seen_as(&f, NULL, f.uid[1]); /* the record: unchanged, MODSEQ too */
	assert_int_equal(m.flags, before.flags);
	assert_int_equal(m.modseq, before.modseq);
	m = seen_as(&f, "bob", f.uid[1]);
	assert_true(m.flags & STORE_SEEN);
	assert_int_equal(m.modseq, h1);
	assert_false(seen_as(&f, "carol", f.uid[1]).flags & STORE_SEEN);

	/* no change: no MODSEQ; UNCHANGEDSINCE below the viewer's MODSEQ: refused */
	assert_int_equal(set(&f, "bob", f.uid[1], true, 0, NULL), 0);
	assert_int_equal(highest(&f), h1);
	assert_int_equal(set(&f, "bob", f.uid[1], false, h1 - 1, &m), STORE_ELOCKED);
	assert_int_equal(m.modseq, h1);
	assert_int_equal(set(&f, "bob", f.uid[1], false, h1, NULL), 0);
	assert_int_equal(unseen(&f, "bob"), 3);
	assert_string_equal(rows(&f, "bob", 0), "2-,");
	assert_int_equal(set(&f, "bob", f.uid[0], true, 0, NULL), 0);
	assert_int_equal(set(&f, "bob", f.uid[2], true, 0, NULL), 0);
	assert_string_equal(rows(&f, "bob", 0), "1,2-,3,");
	assert_string_equal(rows(&f, "bob", h1 + 1), "1,3,");
	assert_int_equal(set(&f, "bob", f.uid[0], false, 0, NULL), 0);
	{
		struct store_txn *t;
		uint64_t last = 1, h = highest(&f);

		assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_READ, &t), 0);
		assert_int_equal(store_seen_highest(t, f.mb, "bob", &last), 0);
		assert_int_equal(last, h);
		assert_int_equal(store_seen_highest(t, f.mb, "carol", &last), 0);
		assert_int_equal(last, 0);
		store_txn_abort(&t);
	}
	assert_string_equal(rows(&f, "carol", 0), "");

	/* store_msg_flags as bob: \Seen his, the rest the message's; a replacement keeps
	   alice's \Seen */
	{
		struct store_txn *t;

		assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_WRITE, &t), 0);
		assert_int_equal(store_seen_flags(t, f.mb, "bob", f.uid[0], STORE_FLAGS_SET,
						  STORE_FLAGGED, 0, 0, &m),
				 0);
		assert_int_equal(m.flags, STORE_FLAGGED);
		assert_int_equal(store_seen_flags(t, f.mb, "bob", f.uid[1], STORE_FLAGS_ADD,
						  STORE_SEEN | STORE_ANSWERED, 0, 0, &m),
				 0);
		assert_int_equal(m.flags, STORE_SEEN | STORE_ANSWERED);
		assert_int_equal(store_seen_flags(t, f.mb, "bob", f.uid[1], STORE_FLAGS_REMOVE,
						  STORE_ANSWERED, 0, 1, &m),
				 STORE_ELOCKED);
		assert_int_equal(store_txn_commit(&t), 0);
		assert_int_equal(seen_as(&f, NULL, f.uid[0]).flags, STORE_SEEN | STORE_FLAGGED);
		assert_int_equal(seen_as(&f, NULL, f.uid[1]).flags, STORE_ANSWERED);
		assert_int_equal(seen_as(&f, "carol", f.uid[1]).flags, STORE_ANSWERED);
	}

	/* bad calls */
	assert_int_equal(set(&f, "bob", 99, true, 0, NULL), STORE_ENOMSG);
	assert_int_equal(set(&f, "", 1, true, 0, NULL), STORE_EINVAL);
	{
		char longname[STORE_SEEN_VIEWER_MAX + 2];

		memset(longname, 'x', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		assert_false(store_seen_viewer_ok(longname));
		assert_int_equal(set(&f, longname, 1, true, 0, NULL), STORE_EINVAL);
		assert_true(store_seen_viewer_ok("bob"));
	}
	tstore_close(&f.ts, true);
}

struct user_op {
	const char *from, *to; /* to NULL: delete from */
};

static int w_user(struct store_txn *t, void *arg)
{
	const struct user_op *u = arg;

	return u->to == NULL ? store_user_delete(t, u->from)
			     : store_user_rename(t, u->from, u->to);
}

/* Rows go with their message, their viewer and their mailbox, and follow a renamed viewer. */
static void test_rows_life(void **state)
{
	struct fixture f;
	struct store_txn *t;
	struct store_seen s;
	struct user_op op;

	(void)state;
	setup(&f);
	assert_int_equal(set(&f, "bob", f.uid[0], true, 0, NULL), 0);
	assert_int_equal(set(&f, "bob", f.uid[1], true, 0, NULL), 0);
	assert_int_equal(set(&f, "carol", f.uid[1], true, 0, NULL), 0);
	assert_int_equal(set(&f, "carol", f.uid[2], true, 0, NULL), 0);

	/* expunge: the message's rows, every viewer's */
	assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_msg_expunge(t, f.mb, &f.uid[1], 1, NULL, NULL), 0);
	assert_int_equal(store_seen_get(t, f.mb, "bob", f.uid[1], &s), STORE_ENOMSG);
	assert_false(s.seen);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(rows(&f, "bob", 0), "1,");
	assert_string_equal(rows(&f, "carol", 0), "3,");
	assert_int_equal(unseen(&f, "bob"), 1);
	assert_int_equal(unseen(&f, "carol"), 1);

	/* a renamed viewer keeps them under the new name; a deleted one loses them, and a
	   user made again with the name starts with none */
	op.from = "bob";
	op.to = "robert";
	assert_int_equal(store_write(f.ts.st, 0, w_user, &op), 0);
	assert_string_equal(rows(&f, "bob", 0), "");
	assert_string_equal(rows(&f, "robert", 0), "1,");
	assert_int_equal(store_acl_carry(f.ts.st, "robert", "bobby", NULL), 0); /* its own part */
	assert_string_equal(rows(&f, "robert", 0), "1,");
	op.from = "carol";
	op.to = NULL;
	assert_int_equal(store_write(f.ts.st, 0, w_user, &op), 0);
	assert_string_equal(rows(&f, "carol", 0), "");
	tuser(f.ts.st, "carol");
	assert_int_equal(unseen(&f, "carol"), 2);

	/* the mailbox deleted: its rows too */
	assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_delete(t, f.alice, "Team"), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(rows(&f, "robert", 0), "");
	tstore_close(&f.ts, true);
}

/* A row written past the store (what an older binary's expunge leaves): the store closed,
   its partition 0 opened with LMDB itself. */
static void put_raw_row(struct tstore *ts, uint64_t mb, uint32_t uid, const char *viewer)
{
	uint8_t k[64], v[9] = { 0, 0, 0, 0, 0, 0, 0, 9, 1 };

	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(mb >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		k[8 + i] = (uint8_t)(uid >> (24 - 8 * i));
	memcpy(k + 12, viewer, strlen(viewer));
	traw_put(ts, "seen", k, 12 + strlen(viewer), v, sizeof(v));
}

/* verify counts the rows of a message or a mailbox gone (and STATUS does not count them);
   --repair drops them and keeps the others. */
/* Viewers with names past 255 bytes (a user name may be up to STORE_MAX_NAME): each keeps
   its own \Seen, two long names with the same first few hundred bytes apart, the owner's
   untouched; a rename carries the rows from a long name to a short one and back, a delete
   drops them. (Before, such a viewer kept nothing: store_seen_set gave STORE_EINVAL.) */
static void test_long_viewer_names(void **state)
{
	struct fixture f;
	char a[STORE_MAX_NAME + 1], b[STORE_MAX_NAME + 1], edge[256];
	struct store_txn *t;

	(void)state;
	setup(&f);
	memset(a, 'v', STORE_MAX_NAME);
	a[STORE_MAX_NAME] = '\0';
	memcpy(b, a, sizeof(b));
	b[STORE_MAX_NAME - 1] = 'w'; /* the same but for the last byte */
	memset(edge, 'e', 255);      /* the longest name that is its own key */
	edge[255] = '\0';
	assert_true(store_seen_viewer_ok(a));
	assert_int_equal(set(&f, a, f.uid[1], true, 0, NULL), 0);
	assert_int_equal(set(&f, edge, f.uid[2], true, 0, NULL), 0);
	assert_true(seen_as(&f, a, f.uid[1]).flags & STORE_SEEN);
	assert_false(seen_as(&f, b, f.uid[1]).flags & STORE_SEEN);
	assert_false(seen_as(&f, NULL, f.uid[1]).flags & STORE_SEEN);
	assert_true(seen_as(&f, edge, f.uid[2]).flags & STORE_SEEN);
	assert_false(seen_as(&f, a, f.uid[2]).flags & STORE_SEEN);
	assert_int_equal(unseen(&f, a), 2);
	assert_int_equal(unseen(&f, b), 3);
	assert_string_equal(rows(&f, a, 0), "2,");
	assert_string_equal(rows(&f, b, 0), "");
	assert_int_equal(set(&f, b, f.uid[0], true, 0, NULL), 0);
	assert_string_equal(rows(&f, b, 0), "1,");
	assert_string_equal(rows(&f, a, 0), "2,");
	/* a rename to a short name and back to another long one */
	assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_seen_rename_viewer(t, a, "dave"), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(rows(&f, "dave", 0), "2,");
	assert_string_equal(rows(&f, a, 0), "");
	a[0] = 'u';
	assert_int_equal(store_txn_begin(f.ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_seen_rename_viewer(t, "dave", a), 0);
	assert_int_equal(store_seen_drop_viewer(t, b), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(rows(&f, a, 0), "2,");
	assert_string_equal(rows(&f, "dave", 0), "");
	assert_string_equal(rows(&f, b, 0), "");
	assert_string_equal(rows(&f, edge, 0), "3,");
	tstore_close(&f.ts, true);
}

static void test_verify_rows_left(void **state)
{
	struct fixture f;
	struct store_verify_report vr;

	(void)state;
	setup(&f);
	assert_int_equal(set(&f, "bob", f.uid[1], true, 0, NULL), 0);
	assert_int_equal(store_verify(f.ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_seen, 0);
	put_raw_row(&f.ts, f.mb, 99, "bob");
	put_raw_row(&f.ts, f.mb + 1000, 1, "bob");
	assert_int_equal(unseen(&f, "bob"), 2); /* uid 99 is no message: not counted */
	assert_int_equal(store_verify(f.ts.st, NULL, false, &vr), STORE_ECORRUPT);
	assert_int_equal(vr.bad_seen, 2);
	assert_int_equal(store_verify(f.ts.st, NULL, true, &vr), 0);
	assert_int_equal(vr.bad_seen, 2);
	assert_int_equal(store_verify(f.ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_seen, 0);
	assert_string_equal(rows(&f, "bob", 0), "2,");
	tstore_close(&f.ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_seen),
		cmocka_unit_test(test_rows_life),
		cmocka_unit_test(test_verify_rows_left),
		cmocka_unit_test(test_long_viewer_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

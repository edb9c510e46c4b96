/* test_ml_model.c — the user model against a consistent server and against servers that
 * contradict themselves (UIDVALIDITY, UIDs, counts, flags, expunges). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mailload/usermodel.h"

static struct imap_fetch fe(uint32_t seq, uint32_t uid, int flags)
{
	struct imap_fetch f;

	memset(&f, 0, sizeof(f));
	f.seq = seq;
	f.uid = uid;
	if (flags >= 0) {
		f.has_flags = true;
		f.flags = (uint32_t)flags;
	}
	return f;
}

/* A first session: SELECT with 3 messages (UIDs 10, 11, 12), delete 11, expunge. */
static void first_session(struct um_view *v, struct um_folder *f, bool grows)
{
	struct imap_fetch x;

	um_view_begin(v, f, grows);
	assert_null(um_view_exists(v, 3));
	assert_null(um_view_uidvalidity(v, 555));
	assert_null(um_view_uidnext(v, 13));
	assert_null(um_view_selected(v));
	for (uint32_t i = 0; i < 3; i++) {
		x = fe(i + 1, 10 + i, 0);
		assert_null(um_view_fetch(v, &x));
	}
	um_view_want(v, 2, FL_DELETED);
	x = fe(2, 0, FL_DELETED);
	assert_null(um_view_fetch(v, &x));
	assert_null(um_view_expunge(v, 2));
	assert_null(um_view_expunged(v));
	um_view_end(v);
	assert_int_equal(f->exists, 2);
	assert_int_equal(f->uidvalidity, 555);
	assert_int_equal(f->expunged[0], 11);
}

static void test_consistent(void **state)
{
	struct um_view v;
	struct um_folder f = { 0 };
	struct imap_fetch x;

	um_view_init(&v);
	first_session(&v, &f, false);
	/* the same state again is fine */
	um_view_begin(&v, &f, false);
	assert_null(um_view_exists(&v, 2));
	assert_null(um_view_uidvalidity(&v, 555));
	assert_null(um_view_uidnext(&v, 13));
	assert_null(um_view_selected(&v));
	x = fe(1, 10, 0);
	assert_null(um_view_fetch(&v, &x));
	x = fe(2, 12, FL_SEEN);
	assert_null(um_view_fetch(&v, &x));
	um_view_end(&v);
	um_view_release(&v);
}

static void test_contradictions(void **state)
{
	struct um_view v;
	struct um_folder f = { 0 };
	struct imap_fetch x;

	um_view_init(&v);
	first_session(&v, &f, false);


	/* the count changed in a folder nobody else touches */
	um_view_begin(&v, &f, false);
	assert_null(um_view_exists(&v, 5));
	assert_null(um_view_uidvalidity(&v, 555));
	assert_non_null(um_view_selected(&v));

	/* UIDNEXT went down */
	um_view_begin(&v, &f, false);
	assert_non_null(um_view_uidnext(&v, 12));

	/* the expunged UID comes back, UIDs out of order, a seq beyond EXISTS */
	um_view_begin(&v, &f, false);
	assert_null(um_view_exists(&v, 2));
	assert_null(um_view_uidvalidity(&v, 555));
	x = fe(1, 11, -1);
	assert_non_null(um_view_fetch(&v, &x));
	x = fe(2, 12, -1);
	assert_null(um_view_fetch(&v, &x));
	x = fe(1, 13, -1);
	assert_non_null(um_view_fetch(&v, &x));
	x = fe(3, 14, -1);
	assert_non_null(um_view_fetch(&v, &x));
	/* a UID that changes for the same message */
	x = fe(2, 15, -1);
	assert_non_null(um_view_fetch(&v, &x));

	/* a flag we stored is missing from the reply */
	um_view_want(&v, 2, FL_SEEN);
	x = fe(2, 12, 0);
	assert_non_null(um_view_fetch(&v, &x));

	/* EXPUNGE done but the deleted message is still there */
	um_view_want(&v, 1, FL_DELETED);
	assert_non_null(um_view_expunged(&v));

	/* EXISTS going down without EXPUNGE */
	assert_non_null(um_view_exists(&v, 1));

	/* UIDVALIDITY changes */
	um_view_begin(&v, &f, false);
	assert_null(um_view_exists(&v, 2));
	assert_non_null(um_view_uidvalidity(&v, 556));
	um_view_release(&v);
}

static void test_growing_folder(void **state)
{
	struct um_view v;
	struct um_folder f = { 0 };

	um_view_init(&v);
	first_session(&v, &f, true);
	/* INBOX: new mail makes it grow, fine; shrinking without our expunge is not */
	um_view_begin(&v, &f, true);
	assert_null(um_view_exists(&v, 9));
	assert_null(um_view_uidvalidity(&v, 555));
	assert_null(um_view_selected(&v));
	um_view_end(&v);
	um_view_begin(&v, &f, true);
	assert_null(um_view_exists(&v, 4));
	assert_null(um_view_uidvalidity(&v, 555));
	assert_non_null(um_view_selected(&v));
	um_view_release(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_consistent),
		cmocka_unit_test(test_contradictions),
		cmocka_unit_test(test_growing_folder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

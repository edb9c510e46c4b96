/* test_store_acl.c — the access lists of store_acl.c: rights parsed and written with the
 * obsolete c and d (RFC 4314 2.1.1), rows set, replaced and removed, a user's rights as the
 * union of their own and anyone's less the negative ones, the per-mailbox limit, the rows'
 * life with their mailbox (rename keeps them, delete drops them, also when the mailbox is
 * kept \Noselect for its children), verify's count and repair of rows left behind, and the
 * rows of a deleted user (dropped) and of a renamed one (carried to the new name). */
#include "store_test.h"

static uint32_t parse(const char *s)
{
	uint32_t r = 0xdead;

	assert_int_equal(store_acl_parse(s, strlen(s), &r), 0);
	return r;
}

static const char *fmt(uint32_t r)
{
	static char out[STORE_ACL_TEXT_MAX];
	size_t n = store_acl_format(r, out);

	assert_int_equal(n, strlen(out));
	return out;
}

static void test_rights_text(void **state)
{
	uint32_t r;

	(void)state;
	assert_string_equal(fmt(parse("lrswipkxtea")), "lrswipkxtecda");
	assert_string_equal(fmt(parse("lrswipkxtecda")), "lrswipkxtecda");
	assert_int_equal(parse("lrswipkxtea"), STORE_ACL_ALL);
	assert_string_equal(fmt(parse("arl")), "lra");
	assert_string_equal(fmt(parse("c")), "kxc");
	assert_string_equal(fmt(parse("d")), "ted");
	assert_string_equal(fmt(parse("k")), "k"); /* c needs both k and x */
	assert_string_equal(fmt(parse("te")), "ted");
	assert_string_equal(fmt(parse("")), "");
	assert_int_equal(store_acl_parse("lZ", 2, &r), -1);
	assert_int_equal(store_acl_parse("+l", 2, &r), -1); /* modifiers are the caller's */
	assert_int_equal(store_acl_parse("l\0r", 3, &r), -1);
	char mod;

	assert_int_equal(store_acl_parse_change("+lr", 3, &mod, &r), 0);
	assert_int_equal(mod, '+');
	assert_string_equal(fmt(store_acl_apply(parse("ws"), mod, r)), "lrsw");
	assert_int_equal(store_acl_parse_change("-c", 2, &mod, &r), 0);
	assert_string_equal(fmt(store_acl_apply(STORE_ACL_ALL, mod, r)), "lrswipteda");
	assert_int_equal(store_acl_parse_change("lr", 2, &mod, &r), 0);
	assert_int_equal(mod, 0);
	assert_string_equal(fmt(store_acl_apply(STORE_ACL_ALL, mod, r)), "lr");
	assert_int_equal(store_acl_parse_change("-", 1, &mod, &r), 0);
	assert_int_equal(store_acl_apply(parse("lr"), mod, r), parse("lr"));
	assert_int_equal(store_acl_parse_change("+-l", 3, &mod, &r), -1);
	assert_true(store_acl_id_valid("bob", 3));
	assert_true(store_acl_id_valid("-bob", 4));
	assert_true(store_acl_id_valid("anyone", 6));
	assert_false(store_acl_id_valid("-", 1));
	assert_false(store_acl_id_valid("", 0));
	assert_false(store_acl_id_valid("a b", 3));
	assert_false(store_acl_id_valid("a\x01", 2));
}

static uint32_t rights(struct store *st, uint64_t mb, const char *user)
{
	struct store_txn *t;
	uint32_t r = 0xdead;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_acl_rights(t, mb, user, &r), 0);
	store_txn_abort(&t);
	return r;
}

static void set(struct store *st, uint64_t mb, const char *id, const char *r)
{
	struct store_txn *t;

	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_acl_set(t, mb, id, strlen(id), parse(r)), 0);
	assert_int_equal(store_txn_commit(&t), 0);
}

static int list_cb(const char *id, size_t len, uint32_t r, void *arg)
{
	char *out = arg;

	strncat(out, id, len);
	strcat(out, "=");
	strcat(out, fmt(r));
	strcat(out, ",");
	return 0;
}

static const char *list(struct store *st, uint64_t mb)
{
	static char out[1024];
	struct store_txn *t;

	out[0] = '\0';
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_acl_list(t, mb, list_cb, out), 0);
	store_txn_abort(&t);
	return out;
}

static void test_set_and_rights(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	uint64_t user, mb;
	uint32_t r;

	(void)state;
	tstore_open(&ts, 2);
	user = tuser(ts.st, "owner");
	mb = tmbox(ts.st, user, "Team");
	assert_int_equal(rights(ts.st, mb, "bob"), 0);
	set(ts.st, mb, "bob", "lrs");
	set(ts.st, mb, "anyone", "lw");
	set(ts.st, mb, "-carol", "l");
	assert_string_equal(list(ts.st, mb), "-carol=l,anyone=lw,bob=lrs,");
	assert_string_equal(fmt(rights(ts.st, mb, "bob")), "lrsw");
	assert_string_equal(fmt(rights(ts.st, mb, "carol")), "w");
	assert_string_equal(fmt(rights(ts.st, mb, "dave")), "lw");
	set(ts.st, mb, "-anyone", "w");
	assert_string_equal(fmt(rights(ts.st, mb, "bob")), "lrs");
	assert_string_equal(fmt(rights(ts.st, mb, "dave")), "l");
	/* replaced, then removed by an empty set */
	set(ts.st, mb, "bob", "lrd");
	assert_string_equal(fmt(rights(ts.st, mb, "bob")), "lrted");
	set(ts.st, mb, "bob", "");
	set(ts.st, mb, "nobody", ""); /* nothing to remove: no error */
	assert_string_equal(list(ts.st, mb), "-anyone=w,-carol=l,anyone=lw,");

	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(mb), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_acl_get(t, mb, "anyone", 6, &r), 0);
	assert_int_equal(r, STORE_ACL_LOOKUP | STORE_ACL_WRITE);
	assert_int_equal(store_acl_get(t, mb, "bob", 3, &r), STORE_ENOMSG);
	assert_int_equal(store_acl_set(t, mb, "a b", 3, 1), STORE_EINVAL);
	assert_int_equal(store_acl_set(t, mb, "bob", 3, 1u << 11), STORE_EINVAL);
	assert_int_equal(store_acl_set(t, mb + 1000, "bob", 3, 1), STORE_ENOMBOX);
	/* the limit counts identifiers; a changed one is not new */
	for (unsigned i = 3; i < STORE_ACL_MAX; i++) {
		char id[16];

		snprintf(id, sizeof(id), "u%u", i);
		assert_int_equal(store_acl_set(t, mb, id, strlen(id), STORE_ACL_READ), 0);
	}
	assert_int_equal(store_acl_set(t, mb, "one-more", 8, 1), STORE_ELIMIT);
	assert_int_equal(store_acl_set(t, mb, "anyone", 6, STORE_ACL_ALL), 0);
	assert_int_equal(store_txn_commit(&t), 0);

	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_acl_set(t, mb, "bob", 3, 1), STORE_EINVAL); /* a read txn */
	store_txn_abort(&t);
	tstore_close(&ts, true);
}

/* authenticated is a group as anyone is (every user who asks has logged in); the names a
   list may give rights to: the groups and users of the store, each also negative. */
static void test_groups_and_known_ids(void **state)
{
	struct tstore ts;
	uint64_t user, mb;

	(void)state;
	tstore_open(&ts, 2);
	user = tuser(ts.st, "owner");
	(void)tuser(ts.st, "bob");
	mb = tmbox(ts.st, user, "Team");
	set(ts.st, mb, "authenticated", "lr");
	set(ts.st, mb, "-authenticated", "s");
	set(ts.st, mb, "anyone", "s");
	assert_string_equal(fmt(rights(ts.st, mb, "dave")), "lr");
	set(ts.st, mb, "-bob", "r");
	assert_string_equal(fmt(rights(ts.st, mb, "bob")), "l");
	assert_int_equal(store_acl_id_known(ts.st, "anyone", 6), 0);
	assert_int_equal(store_acl_id_known(ts.st, "-anyone", 7), 0);
	assert_int_equal(store_acl_id_known(ts.st, "authenticated", 13), 0);
	assert_int_equal(store_acl_id_known(ts.st, "-authenticated", 14), 0);
	assert_int_equal(store_acl_id_known(ts.st, "bob", 3), 0);
	assert_int_equal(store_acl_id_known(ts.st, "-bob", 4), 0);
	assert_int_equal(store_acl_id_known(ts.st, "owner", 5), 0);
	assert_int_equal(store_acl_id_known(ts.st, "bo", 2), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "bobx", 4), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "Bob", 3), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "anyone2", 7), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "-", 1), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "", 0), STORE_ENOUSER);
	assert_int_equal(store_acl_id_known(ts.st, "a b", 3), STORE_ENOUSER);
	tstore_close(&ts, true);
}

static void test_life_with_the_mailbox(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_verify_report vr;
	uint64_t user, mb, child, id2;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "owner");
	tuser(ts.st, "bob"); /* verify drops rows naming no user */
	mb = tmbox(ts.st, user, "Team");
	child = tmbox(ts.st, user, "Team/Sub");
	set(ts.st, mb, "bob", "lr");
	set(ts.st, child, "bob", "lri");

	/* a rename keeps the id, so the list follows */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_rename(t, user, "Team", "Group"), 0);
	assert_int_equal(store_mbox_find(t, user, "Group", &id2), 0);
	assert_int_equal(id2, mb);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(list(ts.st, mb), "bob=lr,");

	/* deleted but kept \Noselect for its child: the list goes; set refuses it */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_delete(t, user, "Group"), 0);
	assert_int_equal(store_acl_set(t, mb, "bob", 3, 1), STORE_ENOMBOX);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(list(ts.st, mb), "");
	assert_string_equal(list(ts.st, child), "bob=lri,");
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_delete(t, user, "Group/Sub"), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_string_equal(list(ts.st, child), "");
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);
	tstore_close(&ts, true);
}

/* A row written past the store (what a crash of an older writer or a bug would leave):
   the store closed, its partition 0 opened with LMDB itself. */
static void put_raw_row(struct tstore *ts, uint64_t mb, const char *id, size_t vlen)
{
	uint8_t k[64], v[8] = { 0, 0, 0, 3, 0, 0, 0, 0 };

	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(mb >> (56 - 8 * i));
	memcpy(k + 8, id, strlen(id));
	traw_put(ts, "acl", k, 8 + strlen(id), v, vlen);
}

static void test_verify_rows_left(void **state)
{
	struct tstore ts;
	struct store_verify_report vr;
	uint64_t user, mb;

	(void)state;
	tstore_open(&ts, 1);
	user = tuser(ts.st, "owner");
	tuser(ts.st, "bob");
	mb = tmbox(ts.st, user, "Team");
	set(ts.st, mb, "bob", "lr");
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);
	put_raw_row(&ts, mb + 1000, "bob", 4); /* no such mailbox */
	put_raw_row(&ts, mb, "carol", 3);      /* does not decode */
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), STORE_ECORRUPT);
	assert_int_equal(vr.bad_acl, 2);
	/* checked for the whole store only: a row names a mailbox, not a user */
	assert_int_equal(store_verify(ts.st, "owner", false, &vr), 0);
	assert_int_equal(store_verify(ts.st, NULL, true, &vr), 0);
	assert_int_equal(vr.bad_acl, 2);
	assert_int_equal(vr.repaired, 2);
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);
	assert_string_equal(list(ts.st, mb), "bob=lr,");
	tstore_close(&ts, true);
}

/* Two partitions; near (its mailbox Team *m1) and bob (his Mine *own) in partition 0, far
   (its Team *m2) in partition 1. near and bob: 32 bytes each. */
static void three_users(struct tstore *ts, char *near, char *bob, uint64_t *m1, uint64_t *m2,
			uint64_t *own)
{
	char far[32];

	tstore_open(ts, 2);
	tuser_name_in(ts->st, 0, "bob", bob, 32);
	*m1 = tmbox(ts->st, tuser(ts->st, tuser_name_in(ts->st, 0, "near", near, 32)), "Team");
	*m2 = tmbox(ts->st, tuser(ts->st, tuser_name_in(ts->st, 1, "far", far, sizeof(far))),
		    "Team");
	*own = tmbox(ts->st, tuser(ts->st, bob), "Mine");
}

static int w_user_delete(struct store_txn *t, void *arg)
{
	return store_user_delete(t, arg);
}

/* A deleted user's rows go: those on mailboxes of its own partition in the delete's txn,
   the others by store_acl_forget; a user made again with the name inherits nothing. Rows
   naming no user (a delete that stopped between the two) are verify's. */
static void test_user_delete_drops_rows(void **state)
{
	struct tstore ts;
	struct store_verify_report vr;
	char near[32], bob[32];
	uint64_t m1, m2, own;
	uint64_t n = 0;

	(void)state;
	three_users(&ts, near, bob, &m1, &m2, &own);
	set(ts.st, m1, bob, "lrw");
	set(ts.st, m1, "anyone", "l");
	set(ts.st, m2, bob, "lri");
	tuser(ts.st, "carol");
	set(ts.st, m2, "-carol", "w"); /* another user's: stays */
	set(ts.st, own, near, "lr");
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);

	assert_int_equal(store_write(ts.st, 0, w_user_delete, bob), 0);
	assert_string_equal(list(ts.st, m1), "anyone=l,");   /* same partition, same txn */
	assert_true(strstr(list(ts.st, m2), "lri") != NULL); /* the other partition: not yet */
	assert_int_equal(store_acl_forget(ts.st, bob, &n), 0);
	assert_int_equal(n, 1);
	assert_false(strstr(list(ts.st, m2), "lri") != NULL);
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);

	tuser(ts.st, bob); /* the name again: only anyone's rights */
	assert_string_equal(fmt(rights(ts.st, m1, bob)), "l");
	assert_int_equal(rights(ts.st, m2, bob), 0);

	/* a grant to a name no store user has yet (a directory user who has not logged in):
	   not a problem for verify, and --repair keeps it */
	set(ts.st, m2, "ghost", "lr");
	set(ts.st, m2, "-ghost", "r");
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);
	assert_int_equal(store_verify(ts.st, NULL, true, &vr), 0);
	assert_int_equal(vr.repaired, 0);
	assert_true(strstr(list(ts.st, m2), "ghost=lr") != NULL);
	assert_true(strstr(list(ts.st, m2), "-carol=w") != NULL);

	tstore_close(&ts, true);
}

struct rename_arg {
	const char *from, *to;
};

static int w_user_rename(struct store_txn *t, void *arg)
{
	const struct rename_arg *r = arg;

	return store_user_rename(t, r->from, r->to);
}

/* A renamed user's rows follow the name: store_acl_carry moves those of the other
   partitions (run again, it finds nothing left), the rename's txn those of its own; a row
   naming the new name on the user's own mailboxes goes (the owner is never a row); a row
   already naming the new name elsewhere is replaced by the grant that moves. */
static void test_user_rename_carries_rows(void **state)
{
	struct tstore ts;
	struct store_verify_report vr;
	char near[32], bob[32], negbob[33];
	uint64_t m1, m2, own, n = 0;
	struct rename_arg ra;
	char longname[STORE_ACL_ID_MAX + 1];

	(void)state;
	three_users(&ts, near, bob, &m1, &m2, &own);
	set(ts.st, m1, bob, "lrw");
	set(ts.st, m1, "robert", "l"); /* replaced by bob's grant */
	set(ts.st, m2, bob, "lri");
	snprintf(negbob, sizeof(negbob), "-%s", bob);
	set(ts.st, m2, negbob, "w");
	set(ts.st, m2, "anyone", "l");
	set(ts.st, own, near, "lr");
	set(ts.st, own, "robert", "lrs"); /* robert will own it */

	/* a new name too long to be an identifier: refused, nothing changed */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(store_acl_carry(ts.st, bob, longname, &n), STORE_EINVAL);
	assert_true(strstr(list(ts.st, m2), "lri") != NULL);

	assert_int_equal(store_acl_carry(ts.st, bob, "robert", &n), 0);
	assert_int_equal(n, 2); /* the other partition's two rows; bob's own is untouched */
	assert_string_equal(list(ts.st, m2), "-robert=w,anyone=l,robert=lri,");
	assert_int_equal(store_acl_carry(ts.st, bob, "robert", &n), 0);
	assert_int_equal(n, 0);
	assert_true(strstr(list(ts.st, m1), "robert=l,") != NULL); /* not yet */

	ra.from = bob;
	ra.to = "robert";
	assert_int_equal(store_write(ts.st, STORE_ID_PART(own), w_user_rename, &ra), 0);
	assert_string_equal(list(ts.st, m1), "robert=lrw,");
	char want[64];

	snprintf(want, sizeof(want), "%s=lr,", near);
	assert_string_equal(list(ts.st, own), want); /* robert's row went: robert owns it */
	assert_int_equal(store_verify(ts.st, NULL, false, &vr), 0);
	assert_int_equal(vr.bad_acl, 0);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rights_text),
		cmocka_unit_test(test_set_and_rights),
		cmocka_unit_test(test_groups_and_known_ids),
		cmocka_unit_test(test_life_with_the_mailbox),
		cmocka_unit_test(test_verify_rows_left),
		cmocka_unit_test(test_user_delete_drops_rows),
		cmocka_unit_test(test_user_rename_carries_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

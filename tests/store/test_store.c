/* test_store.c — every index operation of libstore: users, mailboxes (create with parents,
 * delete, rename with children and INBOX, LIST patterns, subscriptions, special use),
 * messages (append, flags, keywords, modseq, expunge + VANISHED history, copy, move, quota),
 * delivery to many users in many partitions stored once, the queue, batches, the group
 * committer, change notification, map growth, verify with planted damage. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>

#include <event2/event.h>
#include <lmdb.h>

#include "common/msgcache.h"
#include "store_test.h"

static void test_errors(void **state)
{
	(void)state;
	for (int i = 0; i < STORE_NERR; i++)
		assert_non_null(store_strerror(i));
	assert_string_equal(store_strerror(STORE_ENOMBOX), "no such mailbox");
	assert_true(store_err_temporary(STORE_ENOSPC));
	assert_false(store_err_temporary(STORE_ENOUSER));
}

static void test_users(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_user u;
	unsigned p;
	uint64_t id;

	(void)state;
	tstore_open(&ts, 3);
	id = tuser(ts.st, "alice");
	assert_int_equal(STORE_ID_PART(id), store_partition_for(ts.st, "alice"));
	assert_int_equal(store_user_locate(ts.st, "alice", &p), 0);
	assert_int_equal(p, STORE_ID_PART(id));
	assert_int_equal(store_user_locate(ts.st, "nobody", &p), STORE_ENOUSER);
	assert_int_equal(store_txn_begin(ts.st, p, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, "alice", NULL), STORE_EEXIST);
	assert_int_equal(store_user_create(t, "", NULL), STORE_EINVAL);
	assert_int_equal(store_user_create(t, "a\r\nb", NULL), STORE_EINVAL);
	assert_int_equal(store_user_set_quota(t, "alice", 1000, 5), 0);
	assert_int_equal(store_user_get(t, "alice", &u), 0);
	assert_int_equal(u.quota_bytes, 1000);
	assert_int_equal(u.quota_msgs, 5);
	assert_int_equal(store_user_rename(t, "alice", "alice2"), 0);
	assert_int_equal(store_user_get(t, "alice", &u), STORE_ENOUSER);
	assert_int_equal(store_user_get_id(t, id, &u), 0);
	assert_string_equal(u.name, "alice2");
	assert_int_equal(store_txn_commit(&t), 0);
	/* explicit partition: create in another one, locate still finds it */
	unsigned other = (p + 1) % 3;
	assert_int_equal(store_txn_begin(ts.st, other, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, "bob", &id), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	assert_int_equal(store_user_locate(ts.st, "bob", &p), 0);
	assert_int_equal(p, other);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static int collect_cb(const struct store_mbox_info *mi, void *arg)
{
	char *out = arg;

	strncat(out, mi->name, mi->name_len);
	if (mi->attrs & STORE_MBOX_NOSELECT)
		strcat(out, "!");
	if (mi->attrs & STORE_MBOX_HASCHILDREN)
		strcat(out, "+");
	if (mi->attrs & STORE_MBOX_SUBSCRIBED)
		strcat(out, "$");
	if (mi->attrs & STORE_MBOX_NONEXISTENT)
		strcat(out, "?");
	strcat(out, " ");
	return 0;
}

static void list_str(struct store *st, uint64_t user, const char *pat, bool subs, char *out)
{
	struct store_txn *t;

	out[0] = '\0';
	assert_int_equal(store_txn_begin(st, STORE_ID_PART(user), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_list(t, user, pat, subs, collect_cb, out), 0);
	store_txn_abort(&t);
}

static void test_mailboxes(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	uint64_t u, id, id2;
	char out[1024];

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "carol");
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_create(t, u, "a/b/c", 0, &id), 0);
	assert_int_equal(store_mbox_create(t, u, "a/b", 0, NULL), STORE_EEXIST);
	assert_int_equal(store_mbox_create(t, u, "a-b", 0, NULL), 0);
	assert_int_equal(store_mbox_create(t, u, "Sent", STORE_USE_SENT, NULL), 0);
	assert_int_equal(store_mbox_create(t, u, "inbox", 0, NULL), STORE_EEXIST);
	assert_int_equal(store_mbox_create(t, u, "/x", 0, NULL), STORE_EINVAL);
	assert_int_equal(store_mbox_create(t, u, "x//y", 0, NULL), STORE_EINVAL);
	assert_int_equal(store_mbox_create(t, u, "x/", 0, NULL), STORE_EINVAL);
	assert_int_equal(store_mbox_find(t, u, "iNbOx", &id2), 0);
	assert_int_equal(store_mbox_subscribe(t, u, "a/b", true), 0);
	assert_int_equal(store_mbox_subscribe(t, u, "gone", true), 0);
	assert_int_equal(store_txn_commit(&t), 0);

	list_str(ts.st, u, "*", false, out);
	assert_string_equal(out, "INBOX$ Sent a+ a-b a/b+$ a/b/c ");
	list_str(ts.st, u, "%", false, out);
	assert_string_equal(out, "INBOX$ Sent a+ a-b ");
	list_str(ts.st, u, "a/%", false, out);
	assert_string_equal(out, "a/b+$ ");
	list_str(ts.st, u, "inbox", false, out);
	assert_string_equal(out, "INBOX$ ");
	list_str(ts.st, u, "*", true, out);
	assert_string_equal(out, "INBOX$ a/b+$ gone$? ");
	assert_true(store_mbox_match("a*c", "abbc", 4));
	assert_false(store_mbox_match("a%c", "ab/c", 4));
	assert_true(store_mbox_match("a%/c", "ab/c", 4));

	/* delete with children: \Noselect, then create makes it selectable again */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_delete(t, u, "a/b"), 0);
	assert_int_equal(store_mbox_find(t, u, "a/b", &id2), STORE_ENOMBOX);
	assert_int_equal(store_mbox_delete(t, u, "INBOX"), STORE_ENOTSUP);
	assert_int_equal(store_mbox_delete(t, u, "nope"), STORE_ENOMBOX);
	assert_int_equal(store_txn_commit(&t), 0);
	list_str(ts.st, u, "a/*", false, out);
	assert_string_equal(out, "a/b!+$ a/b/c ");

	/* rename with children */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_rename(t, u, "a", "z/y"), 0);
	assert_int_equal(store_mbox_rename(t, u, "Sent", "a-b"), STORE_EEXIST);
	assert_int_equal(store_mbox_rename(t, u, "Sent", "Sent/sub"), STORE_EINVAL);
	assert_int_equal(store_mbox_find(t, u, "z/y/b/c", &id2), 0);
	assert_int_equal(id2, id);
	assert_int_equal(store_txn_commit(&t), 0);
	list_str(ts.st, u, "*", false, out);
	assert_string_equal(out, "INBOX$ Sent a-b z+ z/y+ z/y/b!+ z/y/b/c ");

	/* INBOX rename moves its messages into a new mailbox; INBOX stays, empty */
	uint64_t inbox = tmbox(ts.st, u, "INBOX");
	tappend(ts.st, inbox, 100, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_rename(t, u, "INBOX", "Old"), 0);
	struct store_status s;
	assert_int_equal(store_mbox_find(t, u, "Old", &id2), 0);
	assert_int_equal(store_mbox_status(t, id2, &s), 0);
	assert_int_equal(s.messages, 1);
	assert_int_equal(store_mbox_find(t, u, "INBOX", &id2), 0);
	assert_int_equal(store_mbox_status(t, id2, &s), 0);
	assert_int_equal(s.messages, 0);
	struct store_mbox_info mi;
	assert_int_equal(store_mbox_find(t, u, "Sent", &id2), 0);
	assert_int_equal(store_mbox_info(t, id2, NULL, &mi), 0);
	assert_int_equal(mi.special, STORE_USE_SENT);
	assert_int_equal(store_mbox_set_special(t, id2, STORE_USE_TRASH), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

/* Names against LMDB's key size (STORE_KEY_MAX): a user name of STORE_MAX_NAME bytes and a
   mailbox name of STORE_MAX_MBOX_NAME (the user id is the key's first 8 bytes) are made,
   found, renamed and deleted; one byte more is STORE_EINVAL (user) or STORE_ELIMIT (mailbox:
   create, rename to it or of a parent whose child would pass it, subscribe), a lookup of one
   STORE_ENOMBOX, and nothing is written. Before, both gave STORE_EIO (MDB_BAD_VALSIZE). */
static void test_name_key_limits(void **state)
{
	char user[STORE_MAX_NAME + 2], box[STORE_MAX_NAME + 2], over[STORE_MAX_NAME + 2];
	char child[STORE_MAX_NAME + 2], to[200];
	struct tstore ts;
	struct store_txn *t;
	uint64_t u, id;

	(void)state;
	tstore_open(&ts, 1);
	memset(user, 'u', STORE_MAX_NAME + 1);
	user[STORE_MAX_NAME + 1] = '\0';
	memset(box, 'b', STORE_MAX_MBOX_NAME);
	box[STORE_MAX_MBOX_NAME] = '\0';
	memset(over, 'o', STORE_MAX_MBOX_NAME + 1);
	over[STORE_MAX_MBOX_NAME + 1] = '\0';
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, user, NULL), STORE_EINVAL);
	user[STORE_MAX_NAME] = '\0';
	assert_int_equal(store_user_create(t, user, &u), 0);
	assert_int_equal(store_mbox_create(t, u, box, 0, &id), 0);
	assert_int_equal(store_mbox_find(t, u, box, &id), 0);
	assert_int_equal(store_mbox_create(t, u, over, 0, NULL), STORE_ELIMIT);
	assert_int_equal(store_mbox_find(t, u, over, &id), STORE_ENOMBOX);
	assert_int_equal(store_mbox_rename(t, u, box, over), STORE_ELIMIT);
	assert_int_equal(store_mbox_subscribe(t, u, over, true), STORE_ELIMIT);
	assert_int_equal(store_mbox_subscribe(t, u, box, true), 0);
	/* "p/<400 q>" renamed to "<110 r>": the child would be 511 bytes */
	memset(child, 'q', sizeof(child));
	memcpy(child, "p/", 2);
	child[402] = '\0';
	memset(to, 'r', 110);
	to[110] = '\0';
	assert_int_equal(store_mbox_create(t, u, child, 0, NULL), 0);
	assert_int_equal(store_mbox_rename(t, u, "p", to), STORE_ELIMIT);
	store_txn_abort(&t);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_create(t, user, &u), 0);
	assert_int_equal(store_mbox_create(t, u, child, 0, NULL), 0);
	to[100] = '\0'; /* 100 + 1 + 400 fits */
	assert_int_equal(store_mbox_rename(t, u, "p", to), 0);
	assert_int_equal(store_mbox_create(t, u, box, 0, &id), 0);
	assert_int_equal(store_mbox_delete(t, u, box), 0);
	assert_int_equal(store_user_delete(t, user), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	tstore_close(&ts, true);
}

static void test_messages(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_msg m;
	struct store_status s;
	uint64_t u, mb, ms0;
	uint32_t uid1, uid2, uid3, first;
	unsigned kw;

	(void)state;
	tstore_open(&ts, 2);
	u = tuser(ts.st, "dave");
	mb = tmbox(ts.st, u, "INBOX");
	uid1 = tappend(ts.st, mb, 1000, 0);
	uid2 = tappend(ts.st, mb, 2000, STORE_SEEN);
	uid3 = tappend(ts.st, mb, 3000, STORE_DELETED | STORE_SEEN);
	assert_true(uid1 < uid2 && uid2 < uid3);
	tcheck_status(ts.st, mb);

	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(mb), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	assert_int_equal(s.messages, 3);
	assert_int_equal(s.unseen, 1);
	assert_int_equal(s.recent, 3);
	assert_int_equal(s.uidnext, uid3 + 1);
	ms0 = s.highestmodseq;
	assert_int_equal(store_mbox_take_recent(t, mb, &first), 0);
	assert_int_equal(first, 1);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	assert_int_equal(s.recent, 0);
	/* flags and keywords: only a real change bumps modseq */
	assert_int_equal(store_msg_flags(t, mb, uid1, STORE_FLAGS_ADD, STORE_FLAGGED, 0, 0, &m),
			 0);
	assert_true(m.modseq > ms0);
	uint64_t ms1 = m.modseq;
	assert_int_equal(store_msg_flags(t, mb, uid1, STORE_FLAGS_ADD, STORE_FLAGGED, 0, 0, &m),
			 0);
	assert_int_equal(m.modseq, ms1);
	assert_int_equal(store_mbox_keyword(t, mb, "$Junk", true, &kw), 0);
	assert_int_equal(store_mbox_keyword(t, mb, "$junk", false, &kw), 0);
	assert_int_equal(store_mbox_keyword(t, mb, "bad kw", true, &kw), STORE_EINVAL);
	assert_int_equal(store_msg_flags(t, mb, uid2, STORE_FLAGS_SET, 0, 1ull << kw, 0, &m), 0);
	assert_int_equal(m.flags, 0);
	assert_int_equal(m.keywords, 1ull << kw);
	/* CONDSTORE: UNCHANGEDSINCE below the message's modseq refuses */
	assert_int_equal(store_msg_flags(t, mb, uid2, STORE_FLAGS_ADD, STORE_SEEN, 0, ms1, &m),
			 STORE_ELOCKED);
	assert_int_equal(store_msg_flags(t, mb, 999, STORE_FLAGS_ADD, STORE_SEEN, 0, 0, &m),
			 STORE_ENOMSG);
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nk;
	assert_int_equal(store_mbox_keywords(t, mb, names, &nk), 0);
	assert_int_equal(nk, 1);
	assert_string_equal(names[0], "$Junk");
	assert_int_equal(store_txn_commit(&t), 0);
	tcheck_status(ts.st, mb);

	/* CHANGEDSINCE iteration */
	struct store_iter *it;
	int n = 0;
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(mb), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_iter(t, mb, 1, UINT32_MAX, ms1, &it), 0);
	while (store_iter_next(it, &m) == 1) {
		assert_int_equal(m.uid, uid2);
		n++;
	}
	assert_int_equal(n, 1);
	store_iter_free(&it);
	int fd;
	uint64_t size;
	assert_int_equal(store_msg_get(t, mb, uid3, &m), 0);
	/* the cache was computed while the file was written */
	struct msgcache_view cv;
	assert_true(m.cache_len > 0);
	assert_int_equal(msgcache_parse(m.cache, m.cache_len, &cv), 0);
	assert_int_equal(cv.size, m.size);
	assert_non_null(str_casefind(cv.envelope.p, cv.envelope.len, "test 0", 6));
	assert_int_equal(store_blob_open(ts.st, STORE_ID_PART(mb), m.blob, &fd, &size), 0);
	assert_int_equal(size, m.size);
	assert_true(size >= 3000);
	close(fd);
	store_txn_abort(&t);

	/* expunge \Deleted; VANISHED history */
	uint32_t *out;
	size_t nout;
	bool exact;
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(mb), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_status(t, mb, &s), 0);
	uint64_t before = s.highestmodseq;
	assert_int_equal(store_msg_expunge(t, mb, NULL, 0, &out, &nout), 0);
	assert_int_equal(nout, 1);
	assert_int_equal(out[0], uid3);
	free(out);
	assert_int_equal(store_msg_vanished(t, mb, before, &out, &nout, &exact), 0);
	assert_int_equal(nout, 1);
	assert_true(exact);
	free(out);
	assert_int_equal(store_msg_vanished(t, mb, before + 1, &out, &nout, &exact), 0);
	assert_int_equal(nout, 0);
	free(out);
	assert_int_equal(store_txn_commit(&t), 0);
	tcheck_status(ts.st, mb);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_copy_move_quota(void **state)
{
	struct tstore ts;
	struct store_txn *t;
	struct store_user usr;
	struct store_status s;
	uint64_t u, a, b;
	uint32_t uids[3], *done, *dst;
	size_t n;
	unsigned kw;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "erin");
	a = tmbox(ts.st, u, "INBOX");
	b = tmbox(ts.st, u, "Archive");
	for (int i = 0; i < 3; i++)
		uids[i] = tappend(ts.st, a, 500, 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_mbox_keyword(t, a, "work", true, &kw), 0);
	assert_int_equal(store_msg_flags(t, a, uids[0], STORE_FLAGS_ADD, STORE_SEEN, 1ull << kw, 0,
					 NULL),
			 0);
	assert_int_equal(store_msg_copy(t, a, b, uids, 2, false, &done, &dst, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(done[0], uids[0]);
	assert_int_equal(dst[0], 1);
	struct store_msg m;
	assert_int_equal(store_msg_get(t, b, dst[0], &m), 0);
	assert_int_equal(m.flags, STORE_SEEN);
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nk;
	assert_int_equal(store_mbox_keywords(t, b, names, &nk), 0);
	assert_int_equal(nk, 1);
	assert_string_equal(names[0], "work");
	free(done);
	free(dst);
	assert_int_equal(store_user_get(t, "erin", &usr), 0);
	assert_int_equal(usr.used_msgs, 5);
	/* move: source expunged, usage unchanged */
	assert_int_equal(store_msg_copy(t, a, b, &uids[2], 1, true, &done, &dst, &n), 0);
	assert_int_equal(n, 1);
	free(done);
	free(dst);
	assert_int_equal(store_user_get(t, "erin", &usr), 0);
	assert_int_equal(usr.used_msgs, 5);
	assert_int_equal(store_mbox_status(t, a, &s), 0);
	assert_int_equal(s.messages, 2);
	/* quota */
	assert_int_equal(store_user_set_quota(t, "erin", 0, 5), 0);
	assert_int_equal(store_msg_copy(t, a, b, uids, 1, false, &done, &dst, &n), STORE_EQUOTA);
	free(done);
	free(dst);
	assert_int_equal(store_txn_commit(&t), 0);
	tcheck_status(ts.st, a);
	tcheck_status(ts.st, b);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_deliver_many(void **state)
{
	struct tstore ts;
	const char *users[] = { "u1", "u2", "u3", "u4", "u5", "u6" };
	struct store_rcpt r[7];
	struct store_stats ss;
	int fd;

	(void)state;
	tstore_open(&ts, 3);
	for (int i = 0; i < 6; i++)
		tuser(ts.st, users[i]);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 6; i++)
		r[i].user = users[i];
	r[6].user = "ghost";
	fd = tmsg_fd(5000, 1);
	assert_int_equal(store_deliver(ts.st, fd, 0, r, 7), 0);
	close(fd);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(r[i].result, 0);
		assert_int_equal(r[i].uid, 1);
		tcheck_status(ts.st, r[i].mbox);
	}
	assert_int_equal(r[6].result, STORE_ENOUSER);
	/* stored once per partition: count the files */
	unsigned files = 0, parts = 0;
	for (unsigned p = 0; p < 3; p++) {
		char cmd[256];
		FILE *f;
		unsigned n = 0;

		snprintf(cmd, sizeof(cmd), "find %s/part%u/blobs -type f | wc -l", ts.dir, p);
		f = popen(cmd, "r");
		assert_int_equal(fscanf(f, "%u", &n), 1);
		pclose(f);
		files += n;
		assert_int_equal(store_stats(ts.st, p, &ss), 0);
		parts += ss.messages > 0;
	}
	assert_int_equal(files, parts);
	/* a 1-link file per partition, all the same inode */
	struct store_txn *t;
	struct store_msg m1, m2;
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(r[0].mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, r[0].mbox, 1, &m1), 0);
	store_txn_abort(&t);
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(r[1].mbox), STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, r[1].mbox, 1, &m2), 0);
	store_txn_abort(&t);
	assert_int_equal(m1.blob, m2.blob);
	/* expunging from one user keeps the others' file */
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(r[0].mbox), STORE_TXN_WRITE, &t), 0);
	uint32_t uid = 1;
	assert_int_equal(store_msg_expunge(t, r[0].mbox, &uid, 1, NULL, NULL), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	int bfd;
	uint64_t size;
	assert_int_equal(store_blob_open(ts.st, STORE_ID_PART(r[1].mbox), m2.blob, &bfd, &size),
			 0);
	close(bfd);
	tverify_clean(ts.st);
	/* user delete drops everything */
	assert_int_equal(store_txn_begin(ts.st, STORE_ID_PART(r[1].mbox), STORE_TXN_WRITE, &t), 0);
	assert_int_equal(store_user_delete(t, "u2"), 0);
	assert_int_equal(store_txn_commit(&t), 0);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static int qlist_cb(const struct store_queue_msg *qm, void *arg)
{
	(*(int *)arg)++;
	assert_string_equal(qm->sender, "s@example.com");
	return 0;
}

static void lease_cb(const struct store_queue_msg *qm, void *arg)
{
	*(uint64_t *)arg = qm->id;
	assert_int_equal(qm->nrcpt, 2);
	assert_string_equal(qm->rcpt[1].addr, "y@remote.test");
	assert_string_equal(qm->rcpt[0].orcpt, "rfc822;x@remote.test");
	assert_int_equal(qm->rcpt[0].notify, STORE_NOTIFY_FAILURE | STORE_NOTIFY_DELAY);
}

static void test_queue(void **state)
{
	struct tstore ts;
	struct store_queue_rcpt rc[2] = {
		{ .addr = "x@remote.test",
		  .orcpt = "rfc822;x@remote.test",
		  .notify = STORE_NOTIFY_FAILURE | STORE_NOTIFY_DELAY },
		{ .addr = "y@remote.test" },
	};
	struct store_queue_msg qm = { .sender = "s@example.com",
				      .envid = "E1",
				      .ret = STORE_RET_HDRS,
				      .nrcpt = 2,
				      .rcpt = rc };
	struct store_queue_msg got;
	struct store_queue_try *tries;
	struct store_blob *b;
	uint64_t id, leased = 0;
	size_t n, ntries;
	int64_t now = time(NULL);
	int cnt = 0, fd;
	uint64_t size;

	(void)state;
	tstore_open(&ts, 1);
	b = tblob(ts.st, STORE_QUEUE_PART, 2000, 1);
	assert_int_equal(store_queue_add(ts.st, &qm, b, &id), 0);
	store_blob_free(&b);
	now = time(NULL); /* due from the time of the add */
	assert_int_equal(store_queue_lease(ts.st, now, 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(leased, id);
	/* leased: not leased again */
	assert_int_equal(store_queue_lease(ts.st, now, 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 0);
	/* the lease expires (a crashed runner): due again */
	assert_int_equal(store_queue_lease(ts.st, now + 61, 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_queue_rcpt_set(ts.st, id, 0, STORE_Q_DELIVERED, 0, NULL), 0);
	assert_int_equal(store_queue_rcpt_set(ts.st, id, 1, STORE_Q_PENDING, now + 300,
					      "451 4.3.0 try later"),
			 0);
	assert_int_equal(store_queue_rcpt_set(ts.st, id, 5, STORE_Q_PENDING, 0, NULL),
			 STORE_EINVAL);
	assert_int_equal(store_queue_release_lease(ts.st, id), 0);
	assert_int_equal(store_queue_lease(ts.st, now + 100, 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_queue_get(ts.st, id, &got), 0);
	assert_int_equal(got.rcpt[0].state, STORE_Q_DELIVERED);
	assert_string_equal(got.rcpt[1].last_error, "451 4.3.0 try later");
	/* every try recorded, oldest first, with its reason */
	assert_int_equal(store_queue_tries(ts.st, id, &tries, &ntries), 0);
	assert_int_equal(ntries, 2);
	assert_int_equal(tries[0].rcpt, 0);
	assert_int_equal(tries[0].state, STORE_Q_DELIVERED);
	assert_null(tries[0].reason);
	assert_int_equal(tries[1].rcpt, 1);
	assert_int_equal(tries[1].state, STORE_Q_PENDING);
	assert_string_equal(tries[1].reason, "451 4.3.0 try later");
	assert_true(tries[1].when >= now);
	store_queue_tries_free(&tries, ntries);
	assert_null(tries);
	assert_int_equal(store_queue_tries(ts.st, id + 1000, &tries, &ntries), STORE_ENOQUEUE);
	assert_string_equal(got.envid, "E1");
	assert_int_equal(got.ret, STORE_RET_HDRS);
	store_queue_msg_clear(&got);
	/* hold / release / flush; survives a reopen */
	assert_int_equal(store_queue_hold(ts.st, id, true), 0);
	tstore_reopen(&ts);
	assert_int_equal(store_queue_flush(ts.st, 0), 0);
	assert_int_equal(store_queue_lease(ts.st, now + 1000, 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_queue_hold(ts.st, id, false), 0);
	assert_int_equal(store_queue_lease(ts.st, time(NULL), 60, 10, lease_cb, &leased, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_queue_list(ts.st, qlist_cb, &cnt), 0);
	assert_int_equal(cnt, 1);
	assert_int_equal(store_queue_open(ts.st, id, &fd, &size), 0);
	assert_true(size >= 2000);
	close(fd);
	tverify_clean(ts.st);
	assert_int_equal(store_queue_delete(ts.st, id), 0);
	assert_int_equal(store_queue_get(ts.st, id, &got), STORE_ENOQUEUE);
	assert_int_equal(store_queue_delete(ts.st, id), STORE_ENOQUEUE);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void lease_id_cb(const struct store_queue_msg *qm, void *arg)
{
	*(uint64_t *)arg = qm->id;
}

static int match_to_b(const struct store_queue_msg *qm, void *arg)
{
	(void)arg;
	return strcmp(qm->rcpt[0].addr, "b@remote.test") == 0;
}

/* store_queue_apply: selected entries in one txn; a leased entry keeps its lease; requeue
   restarts attempts; 32 tries kept at most, the newest. */
static void test_queue_apply(void **state)
{
	struct tstore ts;
	const char *addrs[3] = { "a@remote.test", "b@remote.test", "b@remote.test" };
	struct store_queue_try *tries;
	struct store_queue_msg got;
	uint64_t id[3], leased = 0;
	size_t n;
	int64_t now;

	(void)state;
	tstore_open(&ts, 1);
	for (int i = 0; i < 3; i++) {
		struct store_queue_rcpt r = { .addr = addrs[i] };
		struct store_queue_msg qm = { .sender = "s@example.com", .nrcpt = 1, .rcpt = &r };
		struct store_blob *b = tblob(ts.st, STORE_QUEUE_PART, 100, (uint64_t)i + 7);

		assert_int_equal(store_queue_add(ts.st, &qm, b, &id[i]), 0);
		store_blob_free(&b);
	}
	now = time(NULL);
	/* entry 0 leased by runner 3 and deferred 40 times */
	assert_int_equal(store_queue_lease_as(ts.st, 3, now, 600, 1, lease_id_cb, &leased, &n), 0);
	assert_int_equal(leased, id[0]);
	for (int i = 0; i < 40; i++) {
		char why[32];

		snprintf(why, sizeof(why), "451 try %d", i);
		assert_int_equal(store_queue_rcpt_set(ts.st, id[0], 0, STORE_Q_PENDING, now + 3600,
						      why),
				 0);
	}
	assert_int_equal(store_queue_tries(ts.st, id[0], &tries, &n), 0);
	assert_int_equal(n, 32);
	assert_string_equal(tries[0].reason, "451 try 8");
	assert_string_equal(tries[31].reason, "451 try 39");
	store_queue_tries_free(&tries, n);
	/* a flush keeps the lease: no other runner takes it while its runner delivers */
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_FLUSH, id[0], NULL, NULL, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_queue_get(ts.st, id[0], &got), 0);
	assert_int_equal(got.lease_owner, 3);
	assert_true(got.lease_until >= now + 600);
	store_queue_msg_clear(&got);
	/* requeue: the attempts start again (the lease still held) */
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_REQUEUE, id[0], NULL, NULL, &n), 0);
	assert_int_equal(store_queue_get(ts.st, id[0], &got), 0);
	assert_int_equal(got.rcpt[0].attempts, 0);
	assert_int_equal(got.lease_owner, 3);
	store_queue_msg_clear(&got);
	/* hold the two entries for b@ (selected), then delete them; entry 0 untouched */
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_HOLD, 0, match_to_b, NULL, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(store_queue_get(ts.st, id[1], &got), 0);
	assert_true(got.held);
	store_queue_msg_clear(&got);
	assert_int_equal(store_queue_lease(ts.st, now + 10000, 60, 10, lease_id_cb, &leased, &n),
			 0);
	assert_int_equal(n, 1); /* entry 0 (its lease ran out); the held ones are not due */
	assert_int_equal(leased, id[0]);
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_DELETE, 0, match_to_b, NULL, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(store_queue_get(ts.st, id[1], &got), STORE_ENOQUEUE);
	assert_int_equal(store_queue_get(ts.st, id[0], &got), 0);
	store_queue_msg_clear(&got);
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_DELETE, id[2], NULL, NULL, &n),
			 STORE_ENOQUEUE);
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_DELETE, id[0], match_to_b, NULL, &n),
			 STORE_EINVAL);
	/* ALL */
	assert_int_equal(store_queue_apply(ts.st, STORE_QA_DELETE, 0, NULL, NULL, &n), 0);
	assert_int_equal(n, 1);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

struct q_set {
	uint64_t id;
	size_t idx;
};

static int q_delivered_fn(struct store_txn *t, void *arg)
{
	struct q_set *qs = arg;

	return store_queue_rcpt_set_txn(t, qs->id, qs->idx, STORE_Q_DELIVERED, 0, NULL);
}

static void q_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value, void *arg)
{
	(void)rcpts;
	(void)n;
	(void)value;
	*(int *)arg = result;
}

/* Leases carry their runner: a dead runner's come back at once (release_owners), others'
   stay; an outcome recorded through the group commit in the queue's txn. */
static void test_queue_lease_owners(void **state)
{
	struct tstore ts;
	struct store_queue_rcpt rc[2] = { { .addr = "x@remote.test" },
					  { .addr = "y@remote.test" } };
	struct store_queue_msg qm = { .sender = "s@example.com", .nrcpt = 2, .rcpt = rc };
	struct q_set qs;
	struct store_queue_msg got;
	struct store_blob *b;
	struct store_gc *gc;
	uint64_t id1, id2, leased = 0;
	size_t n;
	int64_t now;
	int result = -1;

	(void)state;
	tstore_open(&ts, 1);
	b = tblob(ts.st, STORE_QUEUE_PART, 100, 1);
	assert_int_equal(store_queue_add(ts.st, &qm, b, &id1), 0);
	store_blob_free(&b);
	now = time(NULL);
	assert_int_equal(store_queue_lease_as(ts.st, 3, now, 600, 10, lease_id_cb, &leased, &n),
			 0);
	assert_int_equal(n, 1);
	b = tblob(ts.st, STORE_QUEUE_PART, 100, 2);
	assert_int_equal(store_queue_add(ts.st, &qm, b, &id2), 0);
	store_blob_free(&b);
	/* the entry is due from the second it was added in, which a loaded machine can make
	   the next one */
	now = time(NULL);
	assert_int_equal(store_queue_lease_as(ts.st, 1, now, 600, 10, lease_id_cb, &leased, &n),
			 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_queue_get(ts.st, id1, &got), 0);
	assert_int_equal(got.lease_owner, 3);
	store_queue_msg_clear(&got);
	/* runner 3 died: its entry is due again now, runner 1's is not */
	assert_int_equal(store_queue_release_owners(ts.st, 3, 3, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_queue_lease_as(ts.st, 2, now, 600, 10, lease_id_cb, &leased, &n),
			 0);
	assert_int_equal(n, 1);
	assert_int_equal(leased, id1);
	assert_int_equal(store_queue_release_owners(ts.st, 5, UINT32_MAX, &n), 0);
	assert_int_equal(n, 0);
	/* an outcome through the group commit, in the queue's txn */
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	qs = (struct q_set){ id2, 0 };
	store_gc_submit(gc, STORE_QUEUE_PART, NULL, q_delivered_fn, &qs, q_done, &result);
	store_gc_flush(gc);
	assert_int_equal(result, 0);
	assert_int_equal(store_queue_get(ts.st, id2, &got), 0);
	assert_int_equal(got.rcpt[0].state, STORE_Q_DELIVERED);
	assert_int_equal(got.rcpt[1].state, STORE_Q_PENDING);
	assert_int_equal(got.lease_owner, 1); /* still leased: the owner is kept */
	store_queue_msg_clear(&got);
	/* the last copy delivered: nothing left to do, the entry goes */
	qs.idx = 1;
	store_gc_submit(gc, STORE_QUEUE_PART, NULL, q_delivered_fn, &qs, q_done, &result);
	store_gc_flush(gc);
	store_gc_free(&gc);
	assert_int_equal(result, 0);
	tstore_reopen(&ts);
	assert_int_equal(store_queue_get(ts.st, id2, &got), STORE_ENOQUEUE);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

struct done_rec {
	int calls, result;
	uint64_t value;
	void *ctx;
};

static void done_cb(int result, const struct store_rcpt *r, size_t n, uint64_t value, void *arg)
{
	struct done_rec *d = arg;

	(void)r;
	(void)n;
	d->calls++;
	d->result = result;
	d->value = value;
}

/* A caller's function in the batch: it writes, then fails or succeeds (arg). */
struct write_arg {
	uint64_t user;
	const char *name;
	int fail;
	int runs;
};

static int write_fn(struct store_txn *t, void *arg)
{
	struct write_arg *w = arg;
	uint64_t id;
	int rc;

	w->runs++;
	if ((rc = store_mbox_create(t, w->user, w->name, 0, &id)) != 0)
		return rc;
	return w->fail;
}

/* store_batch_write: a failing function's writes are dropped (nested txn), the others'
   commit with the same partition txn; the group committer runs them too. */
static void test_batch_write(void **state)
{
	struct tstore ts;
	struct store_batch *bt;
	struct store_gc *gc;
	struct done_rec d[5];
	struct write_arg w[5] = { { 0, "Kept", 0, 0 },
				  { 0, "Dropped", STORE_EINVAL, 0 },
				  { 0, "ByGc", 0, 0 },
				  { 0, "AloneDropped", STORE_EINVAL, 0 },
				  { 0, "GcAloneDropped", STORE_EEXIST, 0 } };
	struct store_txn *t = NULL;
	uint64_t u, id, c0;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "hana");
	for (int i = 0; i < 5; i++)
		w[i].user = u;
	memset(d, 0, sizeof(d));
	c0 = store_commit_count(ts.st);
	bt = store_batch_new(ts.st);
	store_batch_write(bt, 0, NULL, write_fn, &w[0], done_cb, &d[0]);
	store_batch_write(bt, 0, NULL, write_fn, &w[1], done_cb, &d[1]);
	assert_int_equal(store_batch_commit(&bt), 1);
	assert_int_equal(store_commit_count(ts.st) - c0, 1);
	assert_int_equal(d[0].calls, 1);
	assert_int_equal(d[0].result, 0);
	assert_int_equal(d[1].calls, 1);
	assert_int_equal(d[1].result, STORE_EINVAL);
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	store_gc_submit(gc, 0, NULL, write_fn, &w[2], done_cb, &d[2]);
	assert_int_equal(d[2].calls, 0); /* nothing acknowledged before the commit */
	store_gc_flush(gc);
	assert_int_equal(d[2].result, 0);
	/* the only operation of its batch (run in the partition's txn, not a nested one): a
	   failure drops its writes and commits nothing */
	c0 = store_commit_count(ts.st);
	bt = store_batch_new(ts.st);
	store_batch_write(bt, 0, NULL, write_fn, &w[3], done_cb, &d[3]);
	assert_int_equal(store_batch_commit(&bt), 1);
	assert_int_equal(d[3].calls, 1);
	assert_int_equal(d[3].result, STORE_EINVAL);
	store_gc_submit(gc, 0, NULL, write_fn, &w[4], done_cb, &d[4]);
	store_gc_flush(gc);
	assert_int_equal(d[4].calls, 1);
	assert_int_equal(d[4].result, STORE_EEXIST);
	assert_int_equal(store_commit_count(ts.st), c0);
	store_gc_free(&gc);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_mbox_find(t, u, "Kept", &id), 0);
	assert_int_equal(store_mbox_find(t, u, "ByGc", &id), 0);
	assert_int_equal(store_mbox_find(t, u, "Dropped", &id), STORE_ENOMBOX);
	assert_int_equal(store_mbox_find(t, u, "AloneDropped", &id), STORE_ENOMBOX);
	assert_int_equal(store_mbox_find(t, u, "GcAloneDropped", &id), STORE_ENOMBOX);
	store_txn_abort(&t);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

struct flag_arg {
	uint64_t mbox;
	uint32_t uid;
	unsigned flags;
};

static int flag_fn(struct store_txn *t, void *arg)
{
	struct flag_arg *fa = arg;

	return store_msg_flags(t, fa->mbox, fa->uid, STORE_FLAGS_ADD, fa->flags, 0, 0, NULL);
}

static void test_batch_and_gc(void **state)
{
	struct tstore ts;
	struct store_batch *bt;
	struct store_gc *gc;
	struct store_blob *b[20];
	struct store_rcpt r[20];
	struct done_rec d[22];
	uint64_t u, mb, f0, f1, ops, commits;

	(void)state;
	tstore_open(&ts, 2);
	u = tuser(ts.st, "frank");
	tuser(ts.st, "gina");
	mb = tmbox(ts.st, u, "INBOX");
	memset(d, 0, sizeof(d));
	memset(r, 0, sizeof(r));
	f0 = store_fsync_count(ts.st);
	assert_true(f0 > 0);
	bt = store_batch_new(ts.st);
	for (int i = 0; i < 20; i++) {
		b[i] = tblob(ts.st, STORE_ID_PART(mb), 300, (unsigned)i);
		r[i].user = i % 2 ? "frank" : "gina";
		store_batch_deliver(bt, b[i], 0, &r[i], 1, done_cb, &d[i]);
	}
	f1 = store_commit_count(ts.st);
	struct flag_arg fa[2] = { { mb, 1, STORE_SEEN }, { mb, 999, STORE_SEEN } };

	store_batch_write(bt, STORE_ID_PART(mb), NULL, flag_fn, &fa[0], done_cb, &d[20]);
	store_batch_write(bt, STORE_ID_PART(mb), NULL, flag_fn, &fa[1], done_cb, &d[21]);
	assert_int_equal(store_batch_commit(&bt), 1);
	assert_null(bt);
	/* one index commit per partition touched: 22 operations, at most 2 commits */
	assert_true(store_commit_count(ts.st) - f1 <= 2);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].result, 0);
		store_blob_free(&b[i]);
	}
	assert_int_equal(d[20].result, 0);
	assert_int_equal(d[21].result, STORE_ENOMSG);
	tcheck_status(ts.st, mb);

	/* the group committer, called by hand */
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	memset(d, 0, sizeof(d));
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 10; i++) {
		b[i] = tblob(ts.st, STORE_ID_PART(mb), 300, (unsigned)i);
		r[i].user = "frank";
		store_gc_deliver(gc, b[i], 0, &r[i], 1, done_cb, &d[i]);
	}
	assert_int_equal(d[0].calls, 0); /* nothing acknowledged before the commit */
	store_gc_flush(gc);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].result, 0);
		store_blob_free(&b[i]);
	}
	store_gc_stats(gc, &ops, &commits);
	assert_int_equal(ops, 10);
	assert_true(commits >= 1 && commits <= 10); /* the committer takes what is there */
	b[0] = tblob(ts.st, STORE_ID_PART(mb), 300, 1);
	r[0].user = "frank";
	assert_int_equal(tgc_deliver(gc, b[0], r, 1), 0);
	store_blob_free(&b[0]);

	/* local and remote parts of one message: a delivery and a queue entry share the flush;
	   the queue entry's strings are copied at once */
	struct store_queue_rcpt *qr = calloc(1, sizeof(*qr));
	struct store_queue_msg qm = { .sender = strdup("from@example.com"),
				      .nrcpt = 1,
				      .rcpt = qr };
	struct store_queue_msg got;
	qr->addr = strdup("far@remote.test");
	memset(d, 0, sizeof(d));
	b[0] = tblob(ts.st, STORE_ID_PART(mb), 300, 2);
	r[0].user = "frank";
	store_gc_deliver(gc, b[0], 0, &r[0], 1, done_cb, &d[0]);
	store_gc_enqueue(gc, &qm, b[0], done_cb, &d[1]);
	free((char *)(uintptr_t)qm.sender);
	free((char *)(uintptr_t)qr->addr);
	free(qr);
	store_gc_flush(gc);
	assert_int_equal(d[0].result, 0);
	assert_int_equal(d[1].result, 0);
	assert_int_equal(store_queue_get(ts.st, d[1].value, &got), 0);
	assert_string_equal(got.sender, "from@example.com");
	assert_string_equal(got.rcpt[0].addr, "far@remote.test");
	store_queue_msg_clear(&got);
	store_blob_free(&b[0]);
	store_gc_free(&gc);
	tcheck_status(ts.st, mb);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

struct loop_ctx {
	struct event_base *base;
	struct done_rec d[5];
	pthread_t loop_thread;
	int calls, other_thread;
};

static void loop_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		      void *arg)
{
	struct done_rec *d = arg;
	struct loop_ctx *lc = d->ctx;

	done_cb(result, rcpts, n, value, arg);
	lc->other_thread += !pthread_equal(pthread_self(), lc->loop_thread);
	if (++lc->calls == 5)
		event_base_loopbreak(lc->base);
}

static void loop_gc_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_gc_dispatch(arg);
}

/* In a loop: operations queued from it commit in the committer's thread and their callbacks
   run in the loop's, from store_gc_dispatch when store_gc_fd is readable. */
static void test_gc_libevent(void **state)
{
	struct tstore ts;
	struct store_gc *gc;
	struct store_blob *b[5];
	struct store_rcpt r[5];
	struct loop_ctx lc;
	struct flag_arg fa;
	struct event *ev;
	uint64_t u, mb, ops, commits;

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "loop");
	mb = tmbox(ts.st, u, "INBOX");
	memset(&lc, 0, sizeof(lc));
	memset(r, 0, sizeof(r));
	lc.base = event_base_new();
	lc.loop_thread = pthread_self();
	assert_non_null(lc.base);
	assert_int_equal(store_gc_new(ts.st, &gc), 0);
	ev = event_new(lc.base, store_gc_fd(gc), EV_READ | EV_PERSIST, loop_gc_cb, gc);
	assert_non_null(ev);
	assert_int_equal(event_add(ev, NULL), 0);
	for (int i = 0; i < 4; i++) {
		b[i] = tblob(ts.st, 0, 500, (unsigned)i);
		r[i].user = "loop";
		lc.d[i].ctx = &lc;
		store_gc_deliver(gc, b[i], 0, &r[i], 1, loop_done, &lc.d[i]);
	}
	/* queued after the deliveries: commits with or after them, so it sees uid 1 */
	fa = (struct flag_arg){ mb, 1, STORE_FLAGGED };
	lc.d[4].ctx = &lc;
	store_gc_submit(gc, 0, NULL, flag_fn, &fa, loop_done, &lc.d[4]);
	assert_int_equal(lc.d[0].calls, 0);
	assert_int_not_equal(event_base_dispatch(lc.base), -1);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(lc.d[i].calls, 1);
		assert_int_equal(lc.d[i].result, 0);
	}
	assert_int_equal(lc.other_thread, 0);
	store_gc_stats(gc, &ops, &commits);
	assert_int_equal(ops, 5);
	assert_true(commits >= 1 && commits <= 5);
	for (int i = 0; i < 4; i++)
		store_blob_free(&b[i]);
	event_free(ev);
	store_gc_free(&gc);
	event_base_free(lc.base);
	tcheck_status(ts.st, mb);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_watch(void **state)
{
	struct tstore ts;
	struct store_watch *w;
	struct pollfd pfd;
	bool changed[2];
	uint64_t u, mb, ms;
	pid_t pid;
	int st;

	(void)state;
	tstore_open(&ts, 2);
	u = tuser(ts.st, "hank");
	mb = tmbox(ts.st, u, "INBOX");
	assert_int_equal(store_watch_new(ts.st, &w), 0);
	assert_int_equal(store_watch_partition(w, STORE_ID_PART(mb)), 0);
	assert_int_equal(store_watch_partition(w, 7), STORE_EINVAL);
	assert_int_equal(store_mbox_modseq(ts.st, mb, &ms), 0);
	pid = fork();
	if (pid == 0) {
		struct store *st2;

		struct store_blob *b;
		struct store_txn *t;
		int fd = tmsg_fd_raw(100, 1);

		/* no cmocka assertions in the child: _exit with a status instead */
		if (fd < 0 || store_open(&ts.o, &st2) != 0 ||
		    store_blob_from_fd(st2, STORE_ID_PART(mb), fd, &b) != 0 ||
		    store_txn_begin(st2, STORE_ID_PART(mb), STORE_TXN_WRITE, &t) != 0 ||
		    store_msg_append(t, mb, b, 0, 0, 0, NULL) != 0 || store_txn_commit(&t) != 0)
			_exit(1);
		store_blob_free(&b);
		store_close(&st2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(st, 0);
	pfd.fd = store_watch_fd(w);
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_true(store_watch_drain(w, changed) >= 1);
	assert_true(changed[STORE_ID_PART(mb)]);
	uint64_t ms2;
	assert_int_equal(store_mbox_modseq(ts.st, mb, &ms2), 0);
	assert_true(ms2 > ms);
	assert_int_equal(store_watch_drain(w, changed), 0);
	store_watch_free(&w);
	tstore_close(&ts, true);
}

struct grow_ctx {
	uint64_t user;
	int base;
};

static int grow_fn(struct store_txn *t, void *arg)
{
	struct grow_ctx *g = arg;
	char name[STORE_MAX_NAME];
	int rc;

	for (int i = 0; i < 200; i++) {
		/* long names fill pages fast */
		snprintf(name, sizeof(name), "box%05d-%0400d", g->base + i, 0);
		if ((rc = store_mbox_create(t, g->user, name, 0, NULL)) != 0)
			return rc;
	}
	return 0;
}

static void test_map_growth(void **state)
{
	struct tstore ts;
	struct store_stats ss;
	struct grow_ctx g;
	uint64_t mb;

	(void)state;
	tstore_open(&ts, 1);
	tstore_close(&ts, true);
	ts.o.map_size = 256 << 10;
	assert_non_null(mkdtemp(strcpy(ts.dir, "/tmp/heron-store-test.XXXXXX")));
	assert_int_equal(store_open(&ts.o, &ts.st), 0);
	g.user = tuser(ts.st, "ivy");
	mb = tmbox(ts.st, g.user, "INBOX");
	/* a 256 KiB map: these rows need several grows, done inside store_write */
	for (g.base = 0; g.base < 800; g.base += 200)
		assert_int_equal(store_write(ts.st, 0, grow_fn, &g), 0);
	assert_int_equal(store_stats(ts.st, 0, &ss), 0);
	assert_true(ss.map_size > (256u << 10));
	tappend(ts.st, mb, 100, 0);
	tverify_clean(ts.st);
	tstore_close(&ts, true);
}

static void test_verify_repair(void **state)
{
	struct tstore ts;
	struct store_verify_report r;
	struct store_txn *t;
	struct store_msg m;
	uint64_t u, mb;
	char path[512];

	(void)state;
	tstore_open(&ts, 1);
	u = tuser(ts.st, "jill");
	mb = tmbox(ts.st, u, "INBOX");
	tappend(ts.st, mb, 100, 0);
	uint32_t uid2 = tappend(ts.st, mb, 100, 0);
	tverify_clean(ts.st);
	/* plant: an old orphan file, and a missing file for uid2 */
	snprintf(path, sizeof(path), "%s/part0/blobs/ab/abababababababab", ts.dir);
	FILE *f = fopen(path, "w");
	fputs("orphan", f);
	fclose(f);
	struct timespec old[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mb, uid2, &m), 0);
	store_txn_abort(&t);
	snprintf(path, sizeof(path), "%s/part0/blobs/%02x/%016llx", ts.dir,
		 (unsigned)(m.blob >> 56), (unsigned long long)m.blob);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), STORE_ECORRUPT);
	assert_int_equal(r.orphan_files, 1);
	assert_int_equal(r.missing_files, 1);
	assert_int_equal(store_verify(ts.st, NULL, true, &r), 0);
	tverify_clean(ts.st);
	tcheck_status(ts.st, mb);
	assert_int_equal(store_verify(ts.st, "jill", false, &r), 0);
	assert_int_equal(r.messages, 1);

	/* plant: the message cache row of the remaining message goes (raw LMDB, store closed) */
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	struct store_iter *it;
	assert_int_equal(store_msg_iter(t, mb, 1, UINT32_MAX, 0, &it), 0);
	assert_int_equal(store_iter_next(it, &m), 1);
	store_iter_free(&it);
	store_txn_abort(&t);
	tplant_cache(&ts, 0, m.blob, NULL, 0);
	assert_int_equal(store_verify(ts.st, NULL, false, &r), STORE_ECORRUPT);
	assert_int_equal(r.missing_cache, 1);
	assert_int_equal(store_verify(ts.st, NULL, true, &r), 0);
	tverify_clean(ts.st);
	assert_int_equal(store_txn_begin(ts.st, 0, STORE_TXN_READ, &t), 0);
	assert_int_equal(store_msg_get(t, mb, m.uid, &m), 0);
	assert_true(m.cache_len > 0);
	store_txn_abort(&t);
	tstore_close(&ts, true);
}

static void test_partition_count_fixed(void **state)
{
	struct tstore ts;
	struct store *st2;

	(void)state;
	tstore_open(&ts, 2);
	store_close(&ts.st);
	ts.o.partitions = 3;
	assert_int_equal(store_open(&ts.o, &st2), STORE_EINVAL);
	ts.o.partitions = 2;
	tstore_reopen(&ts);
	tstore_close(&ts, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_users),
		cmocka_unit_test(test_mailboxes),
		cmocka_unit_test(test_name_key_limits),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_copy_move_quota),
		cmocka_unit_test(test_deliver_many),
		cmocka_unit_test(test_queue),
		cmocka_unit_test(test_queue_apply),
		cmocka_unit_test(test_batch_and_gc),
		cmocka_unit_test(test_batch_write),
		cmocka_unit_test(test_gc_libevent),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_queue_lease_owners),
		cmocka_unit_test(test_map_growth),
		cmocka_unit_test(test_verify_repair),
		cmocka_unit_test(test_partition_count_fixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

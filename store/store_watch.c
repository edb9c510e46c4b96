/* store_watch.c — owns change notification: one inotify descriptor per process watching the
 * `notify` file of each partition a session cares about; every writer touches that file after
 * its commit (store.c), so the descriptor becomes readable within a second (at once, in
 * practice) of a change made by any process. Thousands of IDLE sessions share one fd. Also
 * the change log (DBI `changes`): what each commit changed, mailbox by mailbox, so a reader
 * woken by the descriptor reads the new records instead of every mailbox it watches. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

struct store_watch {
	struct store *st;
	int fd;
	int *wd; /* per partition: the watch descriptor, -1 when not watched */
};

int store_watch_new(struct store *st, struct store_watch **w_r)
{
	struct store_watch *w;
	int fd;

	*w_r = NULL;
	if ((fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		log_warn("store: inotify_init1");
		return STORE_EIO;
	}
	w = xcalloc(1, sizeof(*w));
	w->st = st;
	w->fd = fd;
	w->wd = xcalloc(st->nparts, sizeof(*w->wd));
	for (unsigned i = 0; i < st->nparts; i++)
		w->wd[i] = -1;
	*w_r = w;
	return 0;
}

int store_watch_partition(struct store_watch *w, unsigned part)
{
	char path[PATH_MAX];

	if (part >= w->st->nparts)
		return STORE_EINVAL;
	if (w->wd[part] != -1)
		return 0;
	snprintf(path, sizeof(path), "%s/notify", w->st->parts[part].dir);
	if ((w->wd[part] = inotify_add_watch(w->fd, path, IN_MODIFY)) == -1) {
		log_warn("store: inotify_add_watch %s", path);
		return STORE_EIO;
	}
	return 0;
}

int store_watch_fd(const struct store_watch *w)
{
	return w->fd;
}

int store_watch_drain(struct store_watch *w, bool *changed)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int n = 0;

	if (changed != NULL)
		memset(changed, 0, w->st->nparts * sizeof(*changed));
	for (;;) {
		ssize_t r = read(w->fd, buf, sizeof(buf));

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (char *p = buf; p < buf + r;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;

			for (unsigned i = 0; i < w->st->nparts; i++) {
				if (w->wd[i] != ev->wd)
					continue;
				if (changed == NULL || !changed[i])
					n++;
				if (changed != NULL)
					changed[i] = true;
			}
			p += sizeof(*ev) + ev->len;
		}
		/* a read that left room for one more event of any size emptied the queue: what
		   arrives later wakes the caller's poll again (one read a wake-up, not two) */
		if ((size_t)r + sizeof(struct inotify_event) + NAME_MAX + 1 <= sizeof(buf))
			break;
	}
	return n;
}

void store_watch_free(struct store_watch **wp)
{
	struct store_watch *w = *wp;

	if (w == NULL)
		return;
	close(w->fd);
	free(w->wd);
	free(w);
	*wp = NULL;
}

/* A change record: key be64 seq; value kind(1) user(8) mbox(8) len(2) name olen(2) old
   what(1). Records written before `what` was added end after old: they read as
   STORE_WHAT_ALL. */
#define CHANGE_FIXED 21

int store_change_note(struct store_txn *t, enum store_change_kind kind, uint64_t user,
		      uint64_t mbox, const char *name, size_t len, const char *old, size_t olen)
{
	return store_change_note_what(t, kind, STORE_WHAT_ALL, user, mbox, name, len, old, olen);
}

int store_change_note_what(struct store_txn *t, enum store_change_kind kind, unsigned what,
			   uint64_t user, uint64_t mbox, const char *name, size_t len,
			   const char *old, size_t olen)
{
	uint8_t k[8], v[CHANGE_FIXED + 2 * STORE_MAX_NAME + 1];
	MDB_val key = { 8, k }, val, last;
	MDB_cursor *c;
	uint64_t seq = 1;
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	if (t->e->part == STORE_QUEUE_PART)
		return 0;
	if (len > STORE_MAX_NAME)
		len = STORE_MAX_NAME;
	if (olen > STORE_MAX_NAME)
		olen = STORE_MAX_NAME;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_CHANGES], &c)) != 0)
		return store_mdb_err(t, rc, "changes cursor");
	rc = mdb_cursor_get(c, &last, NULL, MDB_LAST);
	if (rc == 0 && last.mv_size == 8)
		seq = get_be64(last.mv_data) + 1;
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return store_mdb_err(t, rc, "changes last");
	v[0] = (uint8_t)kind;
	put_be64(v + 1, user);
	put_be64(v + 9, mbox);
	put_be16(v + 17, (uint16_t)len);
	if (len > 0)
		memcpy(v + 19, name, len);
	put_be16(v + 19 + len, (uint16_t)olen);
	if (olen > 0)
		memcpy(v + 21 + len, old, olen);
	v[CHANGE_FIXED + len + olen] = (uint8_t)(what & STORE_WHAT_ALL);
	val.mv_size = CHANGE_FIXED + len + olen + 1;
	val.mv_data = v;
	put_be64(k, seq);
	if ((rc = mdb_put(t->txn, t->e->dbi[DBI_CHANGES], &key, &val, MDB_APPEND)) != 0)
		return store_mdb_err(t, rc, "changes put");
	if (seq > STORE_CHANGES_KEEP) { /* the oldest kept goes: one per record, bounded */
		put_be64(k, seq - STORE_CHANGES_KEEP);
		rc = mdb_del(t->txn, t->e->dbi[DBI_CHANGES], &key, NULL);
		if (rc != 0 && rc != MDB_NOTFOUND)
			return store_mdb_err(t, rc, "changes trim");
	}
	return 0;
}

int store_changes_last(struct store_txn *t, uint64_t *seq_r)
{
	MDB_cursor *c;
	MDB_val key;
	int rc;

	*seq_r = 0;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_CHANGES], &c)) != 0)
		return store_mdb_err(t, rc, "changes cursor");
	rc = mdb_cursor_get(c, &key, NULL, MDB_LAST);
	if (rc == 0 && key.mv_size == 8)
		*seq_r = get_be64(key.mv_data);
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "changes last");
}

static bool change_decode(const MDB_val *key, const MDB_val *val, struct store_change *ch)
{
	const uint8_t *v = val->mv_data;
	size_t len, olen;

	if (key->mv_size != 8 || val->mv_size < CHANGE_FIXED)
		return false;
	len = get_be16(v + 17);
	if (CHANGE_FIXED + len > val->mv_size)
		return false;
	olen = get_be16(v + 19 + len);
	if (CHANGE_FIXED + len + olen == val->mv_size)
		ch->what = STORE_WHAT_ALL; /* written before the record said */
	else if (CHANGE_FIXED + len + olen + 1 == val->mv_size)
		ch->what = v[CHANGE_FIXED + len + olen] & STORE_WHAT_ALL;
	else
		return false;
	ch->seq = get_be64(key->mv_data);
	ch->kind = (enum store_change_kind)v[0];
	ch->user = get_be64(v + 1);
	ch->mbox = get_be64(v + 9);
	ch->name = (const char *)v + 19;
	ch->name_len = len;
	ch->old = (const char *)v + 21 + len;
	ch->old_len = olen;
	return true;
}

int store_changes_read(struct store_txn *t, uint64_t after, size_t max,
		       int (*cb)(const struct store_change *ch, void *arg), void *arg,
		       uint64_t *last_r, bool *gap_r)
{
	uint8_t k[8];
	MDB_val key = { 8, k }, val;
	MDB_cursor *c;
	struct store_change ch;
	size_t n = 0;
	int rc, cbrc = 0;

	*last_r = after;
	*gap_r = false;
	put_be64(k, after + 1);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_CHANGES], &c)) != 0)
		return store_mdb_err(t, rc, "changes cursor");
	for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE); rc == 0 && n < max;
	     rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		if (!change_decode(&key, &val, &ch))
			continue; /* a record this binary cannot read: skipped, not fatal */
		if (n == 0 && ch.seq != after + 1)
			*gap_r = true;
		*last_r = ch.seq;
		n++;
		if ((cbrc = cb(&ch, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (cbrc != 0)
		return cbrc;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "changes read");
}

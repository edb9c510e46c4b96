/* store_format.c — owns the store's format version: the `format` and `writer` records of
 * every environment, the refusal of a store this binary cannot read safely, the upgrade steps
 * from older formats (run by `mailctl upgrade`, in bounded batches, each committed with its
 * position so a crash resumes where it stopped), and the store lock that keeps an upgrade
 * and the daemons apart.
 *
 * Formats:
 *   1  stores written before the format was recorded (no `format` record)
 *   2  `format` and `writer` records; the `dead` DBI (message files whose last reference is
 *      gone, unlinked after the commit: what a crash in between leaves is removed at the
 *      next open); every mailbox record carries its expunge history count
 *   3  bodies of up to [store] inline_max bytes may be kept in the index (DBI `bodies`, a
 *      blob row of 24 bytes says where: store_blob.c) instead of a file; a format-2
 *      binary cannot read them, hence the number. The step only records it: the files of
 *      older messages stay files and are read as before.
 *   4  an inline body's first piece is cut to the room left on the bodies' last leaf page
 *      (meta "body_fill"), its length in a blob row of 26 bytes; a format-3 binary cannot
 *      read those rows, hence the number. The step only records it: rows of 24 bytes
 *      (their first piece a whole one) are read as before.
 * Tables added since without a number, because an older binary that ignores them reads and
 * writes the store correctly: `annot`, `changes`, `drops`, `acl`, `seen` (private \Seen:
 * store_seen.c; an older writer's expunges leave rows its readers skip). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/heron_release.h"
#include "common/log.h"
#include "store/store_private.h"


#define UPGRADE_BATCH 1000 /* records per upgrade transaction */

static const char writer_id[] = "heron " HERON_VERSION;

/* An upgrade step: from format `from` to from + 1, one bounded batch per call. */
struct format_step {
	unsigned from;
	const char *what;
	/* Processes up to UPGRADE_BATCH records after *pos (0: from the start); sets *done
	   when nothing is left. */
	int (*run)(struct store_txn *t, uint64_t *pos, bool *done);
};

static int step_history_counts(struct store_txn *t, uint64_t *pos, bool *done);
static int step_record_only(struct store_txn *t, uint64_t *pos, bool *done);

static const struct format_step steps[] = {
	{ 1, "record the format; count each mailbox's expunge history", step_history_counts },
	{ 2, "small message bodies may be kept in the index (existing files stay)",
	  step_record_only },
	{ 3, "inline bodies' first pieces fill the index's pages (existing bodies stay)",
	  step_record_only },
};

unsigned store_format(void)
{
	return STORE_FORMAT;
}

const char *store_writer_id(void)
{
	return writer_id;
}

/* A step that changes nothing already stored: format 3 adds the `bodies` DBI (made by the
   open) and a second blob row layout; format 4 a blob row of 26 bytes and meta "body_fill"
   (written with the next body), the rows of 24 bytes read as they are. */
static int step_record_only(struct store_txn *t, uint64_t *pos, bool *done)
{
	(void)t;
	(void)pos;
	*done = true;
	return 0;
}

/* Mailbox records written before the history count get it (partition environments). */
static int step_history_counts(struct store_txn *t, uint64_t *pos, bool *done)
{
	MDB_cursor *c;
	MDB_val k, v;
	uint8_t kb[8];
	unsigned n = 0;
	int mrc, rc = 0;

	*done = false;
	if (t->e->part == STORE_QUEUE_PART) {
		*done = true;
		return 0;
	}
	if ((mrc = mdb_cursor_open(t->txn, t->e->dbi[DBI_MBOX], &c)) != 0)
		return store_mdb_err(t, mrc, "cursor");
	put_be64(kb, *pos + 1);
	k.mv_data = kb;
	k.mv_size = 8;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0 && n < UPGRADE_BATCH;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++) {
		struct mbox_rec r;
		uint64_t id;

		if (k.mv_size != 8)
			continue;
		id = get_be64(k.mv_data);
		*pos = id;
		if (mbox_rec_load(t, id, &r) != 0 || r.hist_n != MBOX_HIST_UNKNOWN)
			continue;
		if ((rc = store_msg_count_history(t, id, &r.hist_n)) != 0 ||
		    (rc = mbox_rec_store(t, id, &r)) != 0)
			break;
		/* the write may have moved the cursor's page: find the record again */
		put_be64(kb, id);
		k.mv_data = kb;
		k.mv_size = 8;
		if ((mrc = mdb_cursor_get(c, &k, &v, MDB_SET)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (rc != 0)
		return rc;
	if (mrc == MDB_NOTFOUND)
		*done = true;
	else if (mrc != 0)
		return store_mdb_err(t, mrc, "upgrade");
	return 0;
}

static int put_u32(struct store_txn *t, const char *key, uint32_t val)
{
	uint8_t b[4];

	put_be32(b, val);
	return store_put(t, DBI_META, key, strlen(key), b, 4);
}

struct step_run {
	const struct format_step *s;
	bool done;
};

/* One batch of a step in one txn, with its position (so a crash resumes after it); the
   last batch records the step's target format instead. */
static int step_txn(struct store_txn *t, void *arg)
{
	struct step_run *sr = arg;
	uint64_t pos = 0;
	uint8_t b[8];
	MDB_val v;
	int rc = store_get(t, DBI_META, "upgrade_pos", 11, &v);

	if (rc == 0 && v.mv_size == 12 && get_be32(v.mv_data) == sr->s->from)
		pos = get_be64((uint8_t *)v.mv_data + 4);
	else if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	if ((rc = sr->s->run(t, &pos, &sr->done)) != 0)
		return rc;
	if (sr->done) {
		rc = store_del(t, DBI_META, "upgrade_pos", 11);
		if (rc != 0 && rc != STORE_ENOMSG)
			return rc;
		return put_u32(t, "format", sr->s->from + 1);
	}
	uint8_t p[12];

	put_be32(p, sr->s->from);
	put_be64(b, pos);
	memcpy(p + 4, b, 8);
	return store_put(t, DBI_META, "upgrade_pos", 11, p, sizeof(p));
}

int store_format_read(struct store_txn *t, unsigned *format_r)
{
	MDB_val v;
	int rc = store_get(t, DBI_META, "format", 6, &v);

	if (rc == STORE_ENOMSG) {
		*format_r = 1;
		return 0;
	}
	if (rc != 0)
		return rc;
	if (v.mv_size != 4)
		return STORE_ECORRUPT;
	*format_r = get_be32(v.mv_data);
	return 0;
}

/* Runs the steps from env part's format to STORE_FORMAT. */
static int upgrade_env(struct store *st, unsigned part)
{
	struct store_env *e = store_env_of(st, part);
	unsigned format;
	int rc;

	for (;;) {
		struct store_txn *t;
		const struct format_step *s = NULL;

		if ((rc = store_txn_begin(st, part, STORE_TXN_READ, &t)) != 0)
			return rc;
		rc = store_format_read(t, &format);
		store_txn_abort(&t);
		if (rc != 0)
			return rc;
		if (format >= STORE_FORMAT)
			return 0;
		for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
			if (steps[i].from == format)
				s = &steps[i];
		if (s == NULL) {
			log_warnx("store: %s: no upgrade from format %u", e->dir, format);
			return STORE_EFORMAT;
		}
		log_info("store: %s: upgrading format %u -> %u: %s", e->dir, format, format + 1,
			 s->what);
		struct step_run sr = { s, false };
		uint64_t batches = 0;

		while (!sr.done) {
			if ((rc = store_write(st, part, step_txn, &sr)) != 0) {
				log_warnx("store: %s: upgrade to format %u stopped: %s (run "
					  "`mailctl upgrade` again: it resumes)",
					  e->dir, format + 1, store_strerror(rc));
				return rc;
			}
			batches++;
		}
		log_info("store: %s: now format %u (%" PRIu64 " transactions)", e->dir, format + 1,
			 batches);
	}
}

int store_format_upgrade(struct store *st)
{
	int rc = 0;

	for (unsigned p = 0; p < st->nparts && rc == 0; p++)
		rc = upgrade_env(st, p);
	if (rc == 0)
		rc = upgrade_env(st, STORE_QUEUE_PART);
	return rc;
}

/* At open, inside the open's write txn, before any DBI is created: a new environment gets
   the current format; a newer one is refused; an older one is refused unless upgrading.
   The writer record names this binary when it differs. */
int store_format_check(struct store *st, struct store_env *e, MDB_txn *txn, bool fresh,
		       bool upgrade)
{
	MDB_dbi meta;
	MDB_val k = { 6, (void *)(uintptr_t) "format" }, v;
	unsigned format = 1;
	int rc;

	rc = mdb_dbi_open(txn, "meta", fresh ? MDB_CREATE : 0, &meta);
	if (rc == MDB_NOTFOUND && !fresh) {
		log_warnx("store: %s/index.mdb has no meta table: not a Heron store", e->dir);
		return STORE_EFORMAT;
	}
	if (rc != 0)
		return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
	if (fresh) {
		uint8_t b[4];

		put_be32(b, STORE_FORMAT);
		v.mv_size = 4;
		v.mv_data = b;
		if ((rc = mdb_put(txn, meta, &k, &v, 0)) != 0)
			return rc == MDB_MAP_FULL ? STORE_EFULL : STORE_EIO;
		format = STORE_FORMAT;
	} else if ((rc = mdb_get(txn, meta, &k, &v)) == 0) {
		if (v.mv_size != 4) {
			log_warnx("store: %s: format record damaged", e->dir);
			return STORE_ECORRUPT;
		}
		format = get_be32(v.mv_data);
	} else if (rc != MDB_NOTFOUND) {
		return STORE_EIO;
	}
	if (format > STORE_FORMAT) {
		MDB_val wk = { 6, (void *)(uintptr_t) "writer" }, wv = { 0, NULL };

		(void)mdb_get(txn, meta, &wk, &wv);
		log_warnx("store: %s has format %u (last written by %.*s); this %s reads "
			  "formats up to %u: use a Heron at least as new as the store's",
			  e->dir, format, (int)(wv.mv_size < 64 ? wv.mv_size : 64),
			  wv.mv_size > 0 ? (const char *)wv.mv_data : "an unknown version",
			  writer_id, STORE_FORMAT);
		return STORE_EFORMAT;
	}
	if (format < STORE_FORMAT && !upgrade) {
		log_warnx("store: %s has format %u, older than this %s's %u: stop the daemons "
			  "and run `mailctl upgrade` (it upgrades in place and may be "
			  "interrupted and run again)",
			  e->dir, format, writer_id, STORE_FORMAT);
		return STORE_EFORMAT;
	}
	MDB_val wk = { 6, (void *)(uintptr_t) "writer" }, wv;

	if (mdb_get(txn, meta, &wk, &wv) != 0 || wv.mv_size != strlen(writer_id) ||
	    memcmp(wv.mv_data, writer_id, wv.mv_size) != 0) {
		wv.mv_size = strlen(writer_id);
		wv.mv_data = (void *)(uintptr_t)writer_id;
		if ((rc = mdb_put(txn, meta, &wk, &wv, 0)) != 0)
			return rc == MDB_MAP_FULL ? STORE_EFULL : STORE_EIO;
	}
	(void)st;
	return 0;
}

/* <path>/store.lock: every opener holds it shared, `mailctl upgrade` exclusive. */
int store_lock(struct store *st, bool exclusive)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/store.lock", st->path);
	if ((st->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1) {
		log_warn("store: %s", p);
		return store_errno(errno);
	}
	if (flock(st->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK) {
		log_warn("store: lock %s", p);
		return STORE_EIO;
	}
	if (exclusive)
		log_warnx("store: %s is in use (a daemon or mailctl has it open): stop mtad and "
			  "imapd before `mailctl upgrade`",
			  st->path);
	else
		log_warnx("store: %s is being upgraded (`mailctl upgrade`): try again when it "
			  "is done",
			  st->path);
	return STORE_ELOCKED;
}

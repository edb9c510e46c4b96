/* store.c — owns partitions: environment open/close, map size growth, DBI setup,
 * transactions and store_write(), errors, statistics, compacted index copies (backups).
 * Records: store_user.c, store_mbox.c, store_msg.c; files: store_blob.c; queue:
 * store_queue.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

static const char *const store_errs[STORE_NERR] = {
	[STORE_OK] = "success",
	[STORE_EINVAL] = "invalid argument",
	[STORE_ENOUSER] = "no such user",
	[STORE_ENOMBOX] = "no such mailbox",
	[STORE_ENOMSG] = "no such message",
	[STORE_ENOQUEUE] = "no such queue entry",
	[STORE_EEXIST] = "already exists",
	[STORE_EQUOTA] = "quota exceeded",
	[STORE_EKEYWORDS] = "too many keywords in the mailbox",
	[STORE_ENOTSUP] = "operation not permitted on this object",
	[STORE_EFULL] = "store map full (raise [store] map_size_max)",
	[STORE_ENOSPC] = "no space left on the store's disk",
	[STORE_EIO] = "store I/O error (see the log)",
	[STORE_EAGAIN] = "store map grown, transaction must be redone",
	[STORE_ECORRUPT] = "store record damaged (run mailctl verify)",
	[STORE_ELOCKED] = "locked or modified concurrently",
	/* parenthesised: one literal in two pieces, not a missing comma (clang's
	   -Wstring-concatenation) */
	[STORE_EFORMAT] = ("store format not readable by this Heron (see the log: newer, or "
			   "older and `mailctl upgrade` needed)"),
	[STORE_ELIMIT] = "administrative limit reached",
	[STORE_EMOVED] = "the user moved to another store host",
};

static const char *const dbi_names[DBI_COUNT] = {
	"meta",   "users", "userid",  "mboxes", "mbox",  "kw",    "msgs",  "expunged",
	"subs",   "blobs", "queue",   "due",    "cache", "sieve", "fts",   "dead",
	"bodies", "annot", "changes", "drops",  "acl",   "seen",  "tombs",
};

static int env_open(struct store *st, struct store_env *e, const char *dir, unsigned part,
		    uint64_t map_size, bool create, bool upgrade);
static void env_close(struct store_env *e, bool nosync);
static int env_grow(struct store *st, struct store_env *e);
static int check_partitions(struct store *st);
static int env_txn_begin(struct store_env *e, unsigned flags, MDB_txn **txn_r);
static void env_txn_end(struct store_env *e);

const char *store_strerror(int err)
{
	if (err < 0 || err >= STORE_NERR)
		return "unknown store error";
	return store_errs[err];
}

bool store_err_temporary(int err)
{
	return err == STORE_ENOSPC || err == STORE_EIO || err == STORE_EFULL ||
	       err == STORE_EAGAIN || err == STORE_EMOVED;
}

int store_errno(int e)
{
	return e == ENOSPC || e == EDQUOT ? STORE_ENOSPC : STORE_EIO;
}

void store_opts_from_conf(const struct conf *c, struct store_opts *o)
{
	const struct store_conf *s = &conf_values(c)->store;

	memset(o, 0, sizeof(*o));
	o->path = s->path;
	o->partitions = (unsigned)s->partitions;
	o->map_size = s->map_size;
	o->map_size_max = s->map_size_max;
	o->expunge_history_ms = s->expunge_history_ms;
	o->expunge_history_max = (uint32_t)s->expunge_history_max;
	o->group_commit_ms = s->group_commit_delay_ms;
	o->group_commit_max = (unsigned)s->group_commit_max;
	o->group_commit_syncfs = s->group_commit_syncfs;
	o->fsync_flags = s->fsync_flags;
	o->fts = s->fts;
	o->inline_max = s->inline_max;
	o->tombstone_age_ms = s->tombstone_age_ms;
	o->create = true;
	o->recover_background = true;
}

static int mkdir_p(const char *dir)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0750) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, 0750) == -1 && errno != EEXIST ? -1 : 0;
}

static int make_blob_dirs(const char *dir)
{
	char p[PATH_MAX];

	for (unsigned i = 0; i < 256; i++) {
		snprintf(p, sizeof(p), "%s/blobs/%02x", dir, i);
		if (mkdir(p, 0750) == -1 && errno != EEXIST)
			return -1;
	}
	return 0;
}

static int env_open(struct store *st, struct store_env *e, const char *dir, unsigned part,
		    uint64_t map_size, bool create, bool upgrade)
{
	char p[PATH_MAX];
	MDB_txn *txn;
	bool fresh;
	int rc, dead;

	memset(e, 0, sizeof(*e));
	e->part = part;
	e->dir = xstrdup(dir);
	e->blobdir_fd = e->notify_fd = -1;
	pthread_rwlock_init(&e->remap_lock, NULL);
	pthread_mutex_init(&e->gone_mu, NULL);
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	fresh = access(p, F_OK) == -1;
	if (!create && fresh) {
		log_warnx("store: %s missing (create the store first)", p);
		return STORE_EIO;
	}
	snprintf(p, sizeof(p), "%s/blobs", dir);
	if (mkdir_p(p) == -1 || make_blob_dirs(dir) == -1) {
		log_warn("store: mkdir %s", p);
		return store_errno(errno);
	}
	if ((e->blobdir_fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return store_errno(errno);
	snprintf(p, sizeof(p), "%s/notify", dir);
	if ((e->notify_fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return store_errno(errno);
	if ((rc = mdb_env_create(&e->env)) != 0)
		goto fail;
	mdb_env_set_maxdbs(e->env, DBI_COUNT + 2);
	mdb_env_set_maxreaders(e->env, 4096);
	if ((rc = mdb_env_set_mapsize(e->env, map_size)) != 0)
		goto fail;
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	/* NOSUBDIR: index.mdb + index.mdb-lock; NOTLS: read txns are not tied to threads.
	 * NORDAHEAD (madvise MADV_RANDOM on the map): a page fault in the index reads that page,
	 * not the device's read-ahead window around it (read_ahead_kb, 128 KB to 8 MB), which
	 * for B-tree lookups in an index larger than the RAM read mostly pages nobody wanted. */
	rc = mdb_env_open(e->env, p,
			  MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | (st->nosync ? MDB_NOSYNC : 0),
			  0640);
	if (rc != 0)
		goto fail;
	if (mdb_env_get_maxkeysize(e->env) < STORE_KEY_MAX) {
		log_warnx("store: %s: LMDB keys of at most %d bytes, the store needs %d", dir,
			  mdb_env_get_maxkeysize(e->env), STORE_KEY_MAX);
		return STORE_EFORMAT;
	}
	mdb_reader_check(e->env, &dead);
	if (dead > 0)
		log_info("store: %s: cleared %d stale readers", dir, dead);
	MDB_envinfo info;
	mdb_env_info(e->env, &info);
	e->map_size = info.me_mapsize;
	if ((rc = env_txn_begin(e, 0, &txn)) != 0)
		return rc;
	/* the format first: a store this binary cannot read gets no new table */
	if ((rc = store_format_check(st, e, txn, fresh, upgrade)) != 0) {
		mdb_txn_abort(txn);
		env_txn_end(e);
		return rc;
	}
	for (int i = 0; i < DBI_COUNT; i++) {
		if ((rc = mdb_dbi_open(txn, dbi_names[i], MDB_CREATE, &e->dbi[i])) != 0) {
			mdb_txn_abort(txn);
			env_txn_end(e);
			goto fail;
		}
	}
	rc = mdb_txn_commit(txn);
	env_txn_end(e);
	if (rc != 0)
		goto fail;
	return 0;
fail:
	log_warnx("store: open %s: %s", dir, mdb_strerror(rc));
	return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
}

static void env_close(struct store_env *e, bool nosync)
{
	/* a bulk load: the index and every file written through this handle become durable
	   now (syncfs: the message files and directories of the filesystem) */
	if (nosync && e->env != NULL && mdb_env_sync(e->env, 1) != 0)
		log_warnx("store: sync %s failed", e->dir);
	if (nosync && e->blobdir_fd != -1 && syncfs(e->blobdir_fd) == -1)
		log_warn("store: syncfs %s", e->dir);
	if (e->env != NULL)
		mdb_env_close(e->env);
	if (e->blobdir_fd != -1)
		close(e->blobdir_fd);
	if (e->notify_fd != -1)
		close(e->notify_fd);
	if (e->dir != NULL) {
		pthread_rwlock_destroy(&e->remap_lock);
		pthread_mutex_destroy(&e->gone_mu);
	}
	free(e->gone);
	free(e->dir);
	memset(e, 0, sizeof(*e));
	e->blobdir_fd = e->notify_fd = -1;
}

/* Records the partition count in partition 0 and refuses a different one later. */
static int check_partitions(struct store *st)
{
	struct store_txn *t;
	MDB_val v;
	uint8_t b[4];
	int rc;

	if ((rc = store_txn_begin(st, 0, STORE_TXN_WRITE, &t)) != 0)
		return rc;
	rc = store_get(t, DBI_META, "parts", 5, &v);
	if (rc == STORE_ENOMSG) {
		put_be32(b, st->nparts);
		rc = store_put(t, DBI_META, "parts", 5, b, 4);
	} else if (rc == 0 && (v.mv_size != 4 || get_be32(v.mv_data) != st->nparts)) {
		log_warnx("store: %s has %u partitions, config says %u", st->path,
			  v.mv_size == 4 ? get_be32(v.mv_data) : 0, st->nparts);
		rc = STORE_EINVAL;
	}
	if (rc != 0) {
		store_txn_abort(&t);
		return rc;
	}
	return store_txn_commit(&t);
}

int store_open(const struct store_opts *o, struct store **st_r)
{
	struct store *st;
	char dir[PATH_MAX];
	int rc;

	*st_r = NULL;
	if (o->path == NULL || o->path[0] == '\0' || o->partitions == 0 ||
	    o->partitions > STORE_MAX_PARTITIONS || strlen(o->path) > PATH_MAX - 64)
		return STORE_EINVAL;
	st = xcalloc(1, sizeof(*st));
	st->path = xstrdup(o->path);
	st->lock_fd = st->marker_fd = -1;
	st->nparts = o->partitions;
	st->map_size_max = o->map_size_max > o->map_size ? o->map_size_max : o->map_size;
	st->expunge_history_ms = o->expunge_history_ms;
	st->expunge_history_max = o->expunge_history_max > 0 ? o->expunge_history_max
							     : STORE_EXPUNGE_HISTORY_MAX;
	st->gc_ms = o->group_commit_ms;
	st->gc_max = o->group_commit_max > 0 ? o->group_commit_max : 256;
	st->nosync = o->nosync;
	st->gc_syncfs = o->group_commit_syncfs;
	st->fsync_flags = o->fsync_flags;
	st->fts = o->fts;
	st->inline_max = (size_t)o->inline_max;
	st->tomb_age = o->tombstone_age_ms > 0 ? o->tombstone_age_ms : STORE_TOMB_AGE_DEFAULT;
	st->parts = xcalloc(st->nparts, sizeof(*st->parts));
	for (unsigned i = 0; i < st->nparts; i++)
		st->parts[i].blobdir_fd = st->parts[i].notify_fd = -1;
	st->queue.blobdir_fd = st->queue.notify_fd = -1;
	uint64_t map = o->map_size > 0 ? o->map_size : (uint64_t)1 << 30;
	if (o->create && mkdir_p(o->path) == -1) {
		log_warn("store: mkdir %s", o->path);
		rc = store_errno(errno);
		goto fail;
	}
	if ((rc = store_lock(st, o->upgrade)) != 0)
		goto fail;
	for (unsigned i = 0; i < st->nparts; i++) {
		snprintf(dir, sizeof(dir), "%s/part%u", o->path, i);
		if ((rc = env_open(st, &st->parts[i], dir, i, map, o->create, o->upgrade)) != 0)
			goto fail;
	}
	snprintf(dir, sizeof(dir), "%s/queue", o->path);
	if ((rc = env_open(st, &st->queue, dir, STORE_QUEUE_PART, map, o->create, o->upgrade)) !=
	    0)
		goto fail;
	if (o->upgrade && (rc = store_format_upgrade(st)) != 0)
		goto fail;
	if ((rc = check_partitions(st)) != 0)
		goto fail;
	if ((rc = store_recover_start(st, o->recover_background)) != 0)
		goto fail;
	*st_r = st;
	return 0;
fail:
	store_close(&st);
	return rc;
}

void store_close(struct store **stp)
{
	struct store *st = *stp;

	if (st == NULL)
		return;
	store_recover_stop(st);
	for (unsigned i = 0; i < st->nparts; i++)
		env_close(&st->parts[i], st->nosync);
	env_close(&st->queue, st->nosync);
	if (st->lock_fd != -1)
		close(st->lock_fd);
	free(st->parts);
	free(st->path);
	free(st);
	*stp = NULL;
}

unsigned store_partitions(const struct store *st)
{
	return st->nparts;
}

unsigned store_partition_for(const struct store *st, const char *user)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a: stable across versions and hosts */

	for (const unsigned char *p = (const unsigned char *)user; *p != '\0'; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (unsigned)(h % st->nparts);
}

uint64_t store_fsync_count(const struct store *st)
{
	return atomic_load(&((struct store *)(uintptr_t)st)->fsyncs);
}

uint64_t store_commit_count(const struct store *st)
{
	return atomic_load(&((struct store *)(uintptr_t)st)->commits);
}

void store_fsync_note(struct store *st)
{
	atomic_fetch_add(&st->fsyncs, 1);
}

struct store_env *store_env_of(struct store *st, unsigned part)
{
	if (part == STORE_QUEUE_PART)
		return &st->queue;
	if (part >= st->nparts)
		return NULL;
	return &st->parts[part];
}

/* ------------------------------------------------------------------------------------- */

static int env_grow(struct store *st, struct store_env *e)
{
	MDB_envinfo info;
	uint64_t next;
	int rc = 0;

	/* no transaction of this process may be open on e while its map changes (the group
	   committer's thread grows it while the loop's thread reads): new ones wait for the
	   lock, open ones are short and never wait for this thread */
	pthread_rwlock_wrlock(&e->remap_lock);
	for (int i = 0; atomic_load(&e->txns) > 0 && i < 50000; i++)
		usleep(100);
	if (atomic_load(&e->txns) > 0) {
		pthread_rwlock_unlock(&e->remap_lock);
		log_warnx("store: %s: map not grown: a transaction of this process stays open",
			  e->dir);
		return STORE_EFULL;
	}
	mdb_env_info(e->env, &info);
	if (info.me_mapsize > e->map_size)
		e->map_size = info.me_mapsize;
	if (e->map_size >= st->map_size_max) {
		pthread_rwlock_unlock(&e->remap_lock);
		log_warnx("store: %s: map full at map_size_max %" PRIu64, e->dir,
			  st->map_size_max);
		return STORE_EFULL;
	}
	next = e->map_size * 2;
	if (next > st->map_size_max)
		next = st->map_size_max;
	if ((rc = mdb_env_set_mapsize(e->env, next)) == 0) {
		log_info("store: %s: map grown from %" PRIu64 " to %" PRIu64, e->dir, e->map_size,
			 next);
		e->map_size = next;
	}
	pthread_rwlock_unlock(&e->remap_lock);
	if (rc != 0) {
		log_warnx("store: %s: grow map: %s", e->dir, mdb_strerror(rc));
		return STORE_EIO;
	}
	return STORE_EAGAIN;
}

int store_mdb_err(struct store_txn *t, int rc, const char *what)
{
	int err;

	if (rc == 0)
		return 0;
	if (rc == MDB_NOTFOUND)
		return STORE_ENOMSG;
	if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
		err = STORE_EAGAIN;
	else {
		log_warnx("store: %s: %s: %s", t->e->dir, what, mdb_strerror(rc));
		err = rc == ENOSPC || rc == EDQUOT ? STORE_ENOSPC : STORE_EIO;
	}
	if (t->write) {
		t->failed = true;
		t->err = err;
	}
	return err;
}

/* Transactions the calling thread holds, on any env. A thread holding none may wait for the
 * other threads' transactions to end before a remap; one holding some would wait for
 * itself. (Read txns are MDB_NOTLS: one ended on another thread leaves the count high,
 * which only makes a begin refuse where it could have waited.) */
static _Thread_local unsigned thread_txns;

/* Takes e's map again at the size the environment records (mdb_env_set_mapsize 0) once no
 * transaction of this process is open on e, looking tries times, 100 us apart. The wait
 * does not keep other threads' begins out: a transaction of theirs may begin another.
 * Returns 0 when remapped, MDB_MAP_RESIZED when a transaction stayed open, or LMDB's
 * error. */
static int env_remap(struct store_env *e, int tries)
{
	for (int i = 0; i < tries; i++) {
		int rc = MDB_MAP_RESIZED;

		if (i > 0)
			usleep(100);
		if (atomic_load(&e->txns) > 0)
			continue;
		pthread_rwlock_wrlock(&e->remap_lock);
		if (atomic_load(&e->txns) == 0 && (rc = mdb_env_set_mapsize(e->env, 0)) == 0) {
			MDB_envinfo info;

			mdb_env_info(e->env, &info);
			if (info.me_mapsize > e->map_size)
				e->map_size = info.me_mapsize;
		}
		pthread_rwlock_unlock(&e->remap_lock);
		if (rc != MDB_MAP_RESIZED)
			return rc;
	}
	return MDB_MAP_RESIZED;
}

/* Begins a transaction on e: the one place that does. Another process may have grown the
 * map past this process's mapping: LMDB then answers MDB_MAP_RESIZED and the map is taken
 * again at its new size, which LMDB allows only while this process has no transaction on
 * e, since their pages would move. So a remap waits for the begins of other threads
 * (remap_lock). A thread that holds no transaction itself (an imapd command, mailctl)
 * waits for those of other threads (the group committer's, short) up to about 2 s; one
 * that holds a transaction does not wait: STORE_EAGAIN, the caller retries once its
 * transactions ended. A begin inside an open transaction never waits for a remap (the
 * default rwlock prefers readers). End each transaction begun here with env_txn_end. */
static int env_txn_begin(struct store_env *e, unsigned flags, MDB_txn **txn_r)
{
	int rc = MDB_MAP_RESIZED;

	for (int tries = 0; tries < 8 && rc == MDB_MAP_RESIZED; tries++) {
		pthread_rwlock_rdlock(&e->remap_lock);
		atomic_fetch_add(&e->txns, 1);
		rc = mdb_txn_begin(e->env, NULL, flags, txn_r);
		pthread_rwlock_unlock(&e->remap_lock);
		if (rc == 0) {
			thread_txns++;
			return 0;
		}
		atomic_fetch_sub(&e->txns, 1);
		if (rc != MDB_MAP_RESIZED)
			break;
		if ((rc = env_remap(e, thread_txns > 0 ? 1 : 20000)) == 0)
			rc = MDB_MAP_RESIZED; /* begin again */
		else if (rc == MDB_MAP_RESIZED)
			break; /* a transaction of this process stayed open */
	}
	if (rc == MDB_MAP_RESIZED) {
		log_info("store: %s: map grown by another process, transaction to be redone",
			 e->dir);
		return STORE_EAGAIN;
	}
	log_warnx("store: %s: begin txn: %s", e->dir, mdb_strerror(rc));
	return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
}

static void env_txn_end(struct store_env *e)
{
	atomic_fetch_sub(&e->txns, 1);
	if (thread_txns > 0)
		thread_txns--;
}

int store_txn_begin(struct store *st, unsigned part, enum store_txn_mode mode,
		    struct store_txn **t_r)
{
	struct store_env *e = store_env_of(st, part);
	struct store_txn *t;
	int rc;

	*t_r = NULL;
	if (e == NULL)
		return STORE_EINVAL;
	t = xcalloc(1, sizeof(*t));
	t->st = st;
	t->e = e;
	t->write = mode == STORE_TXN_WRITE;
	if ((rc = env_txn_begin(e, t->write ? 0 : MDB_RDONLY, &t->txn)) != 0) {
		free(t);
		return rc;
	}
	*t_r = t;
	return 0;
}

static void txn_notify(struct store_env *e)
{
	/* watchers see IN_MODIFY on this file; the byte itself means nothing */
	if (pwrite(e->notify_fd, "x", 1, 0) == -1)
		log_warn("store: %s: notify", e->dir);
}

/* The `dead` rows of files this process unlinked since its last commit on the env go with
   this commit (a failure leaves them for the next store_open: harmless). */
static void gone_rows(struct store_txn *t)
{
	struct store_env *e = t->e;
	uint64_t *v;
	size_t n;
	uint8_t k[8];

	if (e->ngone == 0) /* racy read: a miss waits for the next commit */
		return;
	pthread_mutex_lock(&e->gone_mu);
	v = e->gone;
	n = e->ngone;
	e->gone = NULL;
	e->ngone = e->capgone = 0;
	pthread_mutex_unlock(&e->gone_mu);
	for (size_t i = 0; i < n; i++) {
		MDB_val key = { 8, k };

		put_be64(k, v[i]);
		(void)mdb_del(t->txn, e->dbi[DBI_DEAD], &key, NULL);
	}
	free(v);
}

/* After a commit in a MDB_NOMETASYNC env: its data sync made every earlier commit's meta
   page durable (commits of an env are serialized); the committer's own meta waits for the
   next one or store_env_sync, any other commit syncs it now. */
static int meta_after_commit(struct store_txn *t)
{
	struct store_env *e = t->e;
	uint64_t before = atomic_load(&e->gc_seq), d = atomic_load(&e->gc_durable);

	while (d < before && !atomic_compare_exchange_weak(&e->gc_durable, &d, before))
		;
	if (t->defer_meta) {
		atomic_fetch_add(&e->gc_seq, 1);
		return 0;
	}
	return store_env_sync(t->st, e->part);
}

int store_env_sync(struct store *st, unsigned part)
{
	struct store_env *e = store_env_of(st, part);
	uint64_t upto = atomic_load(&e->gc_seq), d;
	int rc;

	if ((rc = mdb_env_sync(e->env, 1)) != 0) {
		log_warnx("store: %s: sync: %s", e->dir, mdb_strerror(rc));
		return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
	}
	store_fsync_note(st);
	d = atomic_load(&e->gc_durable);
	while (d < upto && !atomic_compare_exchange_weak(&e->gc_durable, &d, upto))
		;
	return 0;
}

void store_env_nometasync(struct store *st, unsigned part, bool on)
{
	struct store_env *e = store_env_of(st, part);

	if (st->nosync)
		return; /* bulk loading syncs nothing until store_close */
	/* the committer synced what it answered; anything left (a commit it had not answered)
	   is synced here */
	if (!on && e->nometasync && atomic_load(&e->gc_durable) < atomic_load(&e->gc_seq))
		(void)store_env_sync(st, part);
	mdb_env_set_flags(e->env, MDB_NOMETASYNC, on ? 1 : 0);
	e->nometasync = on;
}

int store_txn_commit(struct store_txn **tp)
{
	struct store_txn *t = *tp;
	struct store_env *e;
	MDB_envinfo info;
	size_t id;
	int rc;

	if (t == NULL)
		return STORE_EINVAL;
	*tp = NULL;
	e = t->e;
	if (!t->write) {
		mdb_txn_abort(t->txn);
		env_txn_end(e);
		free(t);
		return 0;
	}
	if (t->failed) {
		mdb_txn_abort(t->txn);
		env_txn_end(e);
		rc = t->err == STORE_EAGAIN ? env_grow(t->st, e) : t->err;
		free(t->dead);
		free(t->refd);
		free(t);
		return rc;
	}
	gone_rows(t);
	id = mdb_txn_id(t->txn);
	rc = mdb_txn_commit(t->txn);
	env_txn_end(e);
	if (rc == 0) {
		store_blob_txn_committed(t);
		store_blob_unlink_dead(t);
		/* a txn that changed nothing commits without a write (LMDB keeps the last txn
		   id): no fsync to count and nothing for the watchers to look at */
		if (mdb_env_info(e->env, &info) != 0 || info.me_last_txnid >= id) {
			atomic_fetch_add(&t->st->commits, 1);
			atomic_fetch_add(&t->st->fsyncs, e->nometasync ? 1 : 2); /* data, meta */
			if (e->nometasync)
				rc = meta_after_commit(t);
			txn_notify(e);
		}
	} else if (rc == MDB_MAP_FULL) {
		rc = env_grow(t->st, e);
	} else {
		log_warnx("store: %s: commit: %s", e->dir, mdb_strerror(rc));
		rc = rc == ENOSPC || rc == EDQUOT ? STORE_ENOSPC : STORE_EIO;
	}
	free(t->dead);
	free(t->refd);
	free(t);
	return rc;
}

void store_txn_abort(struct store_txn **tp)
{
	struct store_txn *t = *tp;

	if (t == NULL)
		return;
	*tp = NULL;
	mdb_txn_abort(t->txn);
	env_txn_end(t->e);
	if (t->write) {
		if (t->failed && t->err == STORE_EAGAIN)
			(void)env_grow(t->st, t->e);
	}
	free(t->dead);
	free(t->refd);
	free(t);
}

static int write_loop(struct store *st, unsigned part, int (*fn)(struct store_txn *t, void *arg),
		      void *arg, bool defer_meta)
{
	struct store_txn *t;
	int rc;

	for (int tries = 0; tries < 64; tries++) {
		if ((rc = store_txn_begin(st, part, STORE_TXN_WRITE, &t)) != 0)
			return rc;
		t->defer_meta = defer_meta;
		rc = fn(t, arg);
		if (t->failed && rc == 0)
			rc = t->err;
		if (rc == STORE_EAGAIN) {
			struct store_env *e = t->e;
			uint64_t before = e->map_size;

			t->failed = true;
			t->err = STORE_EAGAIN;
			store_txn_abort(&t); /* grows the map */
			if (e->map_size == before)
				return STORE_EFULL;
			continue;
		}
		if (rc != 0) {
			store_txn_abort(&t);
			return rc;
		}
		struct store_env *e = t->e;
		uint64_t before = e->map_size;

		if ((rc = store_txn_commit(&t)) != STORE_EAGAIN)
			return rc;
		if (e->map_size == before)
			return STORE_EFULL;
	}
	return STORE_EFULL;
}

int store_write(struct store *st, unsigned part, int (*fn)(struct store_txn *t, void *arg),
		void *arg)
{
	return write_loop(st, part, fn, arg, false);
}

int store_write_deferred(struct store *st, unsigned part,
			 int (*fn)(struct store_txn *t, void *arg), void *arg)
{
	return write_loop(st, part, fn, arg, true);
}

/* ------------------------------------------------------------------------------------- */
/* Small accessors shared by the record files. */

int store_get(struct store_txn *t, enum store_dbi d, const void *k, size_t klen, MDB_val *v)
{
	MDB_val key = { klen, (void *)(uintptr_t)k };
	int rc = mdb_get(t->txn, t->e->dbi[d], &key, v);

	if (rc == MDB_NOTFOUND)
		return STORE_ENOMSG;
	return store_mdb_err(t, rc, "get");
}

int store_put(struct store_txn *t, enum store_dbi d, const void *k, size_t klen, const void *v,
	      size_t vlen)
{
	MDB_val key = { klen, (void *)(uintptr_t)k };
	MDB_val val = { vlen, (void *)(uintptr_t)v };
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	rc = mdb_put(t->txn, t->e->dbi[d], &key, &val, 0);
	return store_mdb_err(t, rc, "put");
}

int store_put_append(struct store_txn *t, enum store_dbi d, const void *k, size_t klen,
		     const void *v, size_t vlen)
{
	MDB_val key = { klen, (void *)(uintptr_t)k };
	MDB_val val = { vlen, (void *)(uintptr_t)v };
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	/* a key not past the last one: MDB_KEYEXIST, nothing written, the txn goes on */
	if ((rc = mdb_put(t->txn, t->e->dbi[d], &key, &val, MDB_APPEND)) == MDB_KEYEXIST)
		rc = mdb_put(t->txn, t->e->dbi[d], &key, &val, 0);
	return store_mdb_err(t, rc, "put");
}

int store_del(struct store_txn *t, enum store_dbi d, const void *k, size_t klen)
{
	MDB_val key = { klen, (void *)(uintptr_t)k };
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	rc = mdb_del(t->txn, t->e->dbi[d], &key, NULL);
	return store_mdb_err(t, rc, "del");
}

/* Deletes every row whose key starts with the big-endian id. */
int store_del_prefix(struct store_txn *t, enum store_dbi d, uint64_t id)
{
	uint8_t k[8];

	put_be64(k, id);
	return store_del_range(t, d, k, sizeof(k));
}

int store_del_range(struct store_txn *t, enum store_dbi d, const void *prefix, size_t len)
{
	uint8_t k[32];
	MDB_cursor *c;
	MDB_val key, v;
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	if (len > sizeof(k))
		return STORE_EINVAL;
	memcpy(k, prefix, len);
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[d], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	for (;;) {
		key.mv_data = k;
		key.mv_size = len;
		rc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
		if (rc != 0 || key.mv_size < len || memcmp(key.mv_data, k, len) != 0)
			break;
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : store_mdb_err(t, rc, "delete range");
}

/* Ids of users and mailboxes: partition in the top 16 bits, a counter below. */
int store_next_id(struct store_txn *t, uint64_t *id_r)
{
	MDB_val v;
	uint64_t n = 1;
	uint8_t b[8];
	int rc = store_get(t, DBI_META, "next_id", 7, &v);

	if (rc == 0 && v.mv_size == 8)
		n = get_be64(v.mv_data);
	else if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	put_be64(b, n + 1);
	if ((rc = store_put(t, DBI_META, "next_id", 7, b, 8)) != 0)
		return rc;
	*id_r = (uint64_t)t->e->part << 48 | n;
	return 0;
}

int store_stats(struct store *st, unsigned part, struct store_stats *s)
{
	struct store_env *e = store_env_of(st, part);
	struct store_txn *t;
	MDB_stat ms;
	MDB_envinfo info;
	int rc;

	memset(s, 0, sizeof(*s));
	if (e == NULL)
		return STORE_EINVAL;
	if ((rc = store_txn_begin(st, part, STORE_TXN_READ, &t)) != 0)
		return rc;
	mdb_env_info(e->env, &info);
	mdb_env_stat(e->env, &ms);
	s->map_size = info.me_mapsize;
	s->map_used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	if (part == STORE_QUEUE_PART) {
		mdb_stat(t->txn, e->dbi[DBI_QUEUE], &ms);
		s->messages = ms.ms_entries;
		rc = store_queue_bytes(t, &s->bytes);
	} else {
		mdb_stat(t->txn, e->dbi[DBI_USERS], &ms);
		s->users = ms.ms_entries;
		mdb_stat(t->txn, e->dbi[DBI_MBOX], &ms);
		s->mailboxes = ms.ms_entries;
		mdb_stat(t->txn, e->dbi[DBI_MSGS], &ms);
		s->messages = ms.ms_entries;
		rc = store_user_bytes(t, &s->bytes);
	}
	store_txn_abort(&t);
	return rc;
}

int store_copy_index(struct store *st, unsigned part, const char *path)
{
	struct store_env *e = store_env_of(st, part);
	int rc;

	if (e == NULL || e->env == NULL)
		return STORE_EINVAL;
	if (access(path, F_OK) == 0)
		return STORE_EEXIST;
	/* the env is MDB_NOSUBDIR: path names the copy's data file itself */
	if ((rc = mdb_env_copy2(e->env, path, MDB_CP_COMPACT)) != 0) {
		log_warnx("store: copy of %s/index.mdb to %s: %s", e->dir, path, mdb_strerror(rc));
		(void)unlink(path);
		return rc == ENOSPC ? STORE_ENOSPC : STORE_EIO;
	}
	return 0;
}

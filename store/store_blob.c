/* store_blob.c — owns message files: write to a tmp name while computing the message cache,
 * fsync, rename, fsync the directory (STYLE 12); hard links into other partitions; reference
 * counts in the index and unlinking after the commit that dropped the last reference; opening
 * for streaming; and (format 3) bodies of up to [store] inline_max bytes kept in the index
 * instead of a file: held in memory while written, encoded once (zstd when smaller), stored
 * by each partition's txn that first references them, in pieces under the page's node size
 * appended in numbered order, the first cut to the room left on the last page (format 4), so
 * LMDB fills its pages (DBI bodies), removed in the txn that drops the last reference, handed
 * to readers as a memfd; an inline body's id grows with time (its rows appended too). */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <zstd.h>

#include "common/clock.h"
#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "common/msgcache.h"
#include "store/store_private.h"

#define BLOB_REC_LEN 12
/* An inline body's row: refs 4, size 8, first piece 8, encoded length 4, and since format 4
   the first piece's length 2 (a format-3 row of 24 bytes: its first piece is a whole one) */
#define BLOB_INLINE3_LEN 24
#define BLOB_INLINE_LEN 26
/* An inline body's pieces: the first of the row's length, the others BODY_PIECE bytes but
   the last, so a piece stays in a leaf page (a 4 KB page's largest node holds about 2,030
   bytes; bigger values take whole overflow pages) and two fill one. */
#define BODY_PIECE 2000
/* The first piece fills the room left on the bodies' last leaf page (meta "body_fill": the
   last piece's key be64 and the bytes its page holds be16), unless that is less than this:
   then it starts a page of its own, a whole piece. */
#define BODY_FIRST_MIN 64
#define BODY_RAW 0  /* encoded body: this tag byte, then the bytes as they are */
#define BODY_ZSTD 1 /* or one zstd frame */
#define BODY_ZSTD_LEVEL 3

static int fsync_subdir(struct store *st, struct store_env *e, uint64_t id);

/* Creates b's tmp file (read and write: store_blob_replace_head reads back what was
   written). */
static int blob_open_tmp(struct store_blob *b, struct store_env *e)
{
	b->fd = openat(e->blobdir_fd, b->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (b->fd == -1) {
		log_warn("store: %s/blobs/%s", e->dir, b->tmp);
		return store_errno(errno);
	}
	return 0;
}
static int blob_link_locked(struct store_blob *b, unsigned part, bool sync);
static int blob_set_refs(struct store_txn *t, uint64_t blob, const MDB_val *v, uint32_t refs);
static int blob_row_drop(struct store_txn *t, uint64_t blob, const MDB_val *v);

/* A batch commits partitions in parallel threads; their view of a blob's links is guarded. */
static pthread_mutex_t links_mu = PTHREAD_MUTEX_INITIALIZER;

void store_blob_path(char *out, size_t size, uint64_t id)
{
	snprintf(out, size, "%02x/%016" PRIx64, (unsigned)(id >> 56), id);
}

static int fsync_subdir(struct store *st, struct store_env *e, uint64_t id)
{
	char sub[4];
	int fd, rc = 0;

	if (st->nosync)
		return 0; /* bulk load: store_close syncs */
	snprintf(sub, sizeof(sub), "%02x", (unsigned)(id >> 56));
	if ((fd = openat(e->blobdir_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return store_errno(errno);
	if (fsync(fd) == -1)
		rc = store_errno(errno);
	store_fsync_note(st);
	close(fd);
	return rc;
}

/* A message file's id: 40 random bits, the process tag, the directory byte. */
static uint64_t file_id(struct store *st)
{
	uint64_t id;

	do {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			fatal("getrandom");
		/* the top byte (the subdirectory) follows the hour: files written together share
		   a directory, so a group commit fsyncs that directory once for all of them; a
		   bulk load (no directory fsync) spreads its millions of files over all 256 */
		if (!st->nosync)
			id = (id & ~(UINT64_C(0xff) << 56)) |
			     (uint64_t)((time(NULL) / 3600) & 0xff) << 56;
		/* the process tag: what a crash of this process leaves is found by it */
		id = (id & ~(UINT64_C(0xffff) << 40)) | (uint64_t)st->tag << 40;
	} while (id == 0);
	return id;
}

int store_blob_new(struct store *st, unsigned part, struct store_blob **b_r)
{
	struct store_env *e = store_env_of(st, part);
	struct store_blob *b;

	*b_r = NULL;
	if (e == NULL)
		return STORE_EINVAL;
	b = xcalloc(1, sizeof(*b));
	b->st = st;
	b->part = part;
	b->fd = -1;
	b->id = file_id(st);
	store_blob_path(b->tmp, sizeof(b->tmp), b->id);
	strcat(b->tmp, ".tmp");
	b->inl = st->inline_max > 0;
	buf_init(&b->body, 0, st->inline_max); /* bounded: past it the body is a file */
	buf_init(&b->enc, 0, 1 + ZSTD_compressBound(st->inline_max));
	if (!b->inl) {
		int err = blob_open_tmp(b, e);

		if (err != 0) {
			free(b);
			return err;
		}
	}
	b->links = xcalloc(1, sizeof(*b->links));
	b->links[0].part = part;
	b->nlinks = 1;
	buf_init(&b->cache, 0, STORE_CACHE_MAX);
	b->mb = msgcache_builder_new();
	*b_r = b;
	return 0;
}

/* Writes all of len bytes at p to fd. */
static int write_all(int fd, const void *p, size_t len)
{
	const char *q = p;

	while (len > 0) {
		ssize_t w = write(fd, q, len);

		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1)
			return store_errno(errno);
		q += w;
		len -= (size_t)w;
	}
	return 0;
}

/* A memfd holding len bytes at p, at offset 0: *fd_r. */
static int mem_fd(const void *p, size_t len, int *fd_r)
{
	int fd = memfd_create("heron-body", MFD_CLOEXEC), rc;

	*fd_r = -1;
	if (fd == -1) {
		log_warn("store: memfd_create");
		return store_errno(errno);
	}
	if ((rc = write_all(fd, p, len)) != 0 || lseek(fd, 0, SEEK_SET) == -1) {
		close(fd);
		return rc != 0 ? rc : STORE_EIO;
	}
	*fd_r = fd;
	return 0;
}

/* The body outgrew inline_max: it becomes a file, with what was written so far. */
static int blob_spill(struct store_blob *b)
{
	int rc = blob_open_tmp(b, store_env_of(b->st, b->part));

	if (rc == 0 && (rc = write_all(b->fd, b->body.data, b->body.len)) != 0)
		log_warn("store: write blob %016" PRIx64, b->id);
	b->inl = false;
	buf_release(&b->body);
	return rc;
}

int store_blob_reader(const struct store_blob *b, int *fd_r)
{
	struct store_env *e = store_env_of(b->st, b->part);

	*fd_r = -1;
	if (e == NULL || b->finished || b->err != 0)
		return STORE_EINVAL;
	if (b->inl)
		return mem_fd(b->body.data, b->body.len, fd_r);
	if ((*fd_r = openat(e->blobdir_fd, b->tmp, O_RDONLY | O_CLOEXEC)) == -1)
		return store_errno(errno);
	return 0;
}

int store_blob_write(struct store_blob *b, const void *data, size_t len)
{
	const char *p = data;

	if (b->err != 0 || b->finished)
		return b->err != 0 ? b->err : STORE_EINVAL;
	msgcache_builder_push(b->mb, data, len);
	if (b->inl && b->body.len + len <= b->st->inline_max) {
		if (buf_append(&b->body, data, len) != 0)
			return b->err = STORE_EIO;
		b->size += len;
		return 0;
	}
	if (b->inl && (b->err = blob_spill(b)) != 0)
		return b->err;
	while (len > 0) {
		ssize_t w = write(b->fd, p, len);

		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1) {
			log_warn("store: write blob %016" PRIx64, b->id);
			return b->err = store_errno(errno);
		}
		p += w;
		len -= (size_t)w;
		b->size += (uint64_t)w;
	}
	return 0;
}

/* The id of a body that stays inline, given when it is finished (it has no file, so no
   directory to name): the wall time in ms (42 bits, up to the year 2109), the process tag
   (16 bits), a count within the ms (6 bits; past 64 the next ms is taken). Ids grow with
   time, so the rows keyed by them (`blobs`, `cache`) go in at the end of their tables,
   where LMDB's split keeps the pages it leaves behind full (random ids left them 63-67%
   full: bench/store/README.md); and a process never gives one id twice, which 40 random
   bits within a process's hour could. */
static uint64_t inline_id(struct store *st)
{
	uint64_t now = (uint64_t)clock_wall_ms() << 6, last, next;

	last = atomic_load(&st->inline_seq);
	do
		next = now > last ? now : last + 1;
	while (!atomic_compare_exchange_weak(&st->inline_seq, &last, next));
	return (next >> 6) << 22 | (uint64_t)st->tag << 6 | (next & 63);
}

/* An inline body's encoding, made once for every partition that stores it: zstd when that
   is smaller, else the bytes as they are. Nothing is left to sync: the index commit that
   references it carries it. */
static int blob_encode(struct store_blob *b)
{
	size_t bound = ZSTD_compressBound(b->body.len), n;
	char *out;

	buf_reset(&b->enc);
	if ((out = buf_reserve(&b->enc, 1 + bound)) == NULL)
		return b->err = STORE_EIO;
	n = ZSTD_compress(out + 1, bound, b->body.data != NULL ? b->body.data : "", b->body.len,
			  BODY_ZSTD_LEVEL);
	if (!ZSTD_isError(n) && n < b->body.len) {
		out[0] = BODY_ZSTD;
		buf_commit(&b->enc, 1 + n);
	} else {
		out[0] = BODY_RAW;
		if (b->body.len > 0)
			memcpy(out + 1, b->body.data, b->body.len);
		buf_commit(&b->enc, 1 + b->body.len);
	}
	b->id = inline_id(b->st);
	b->finished = b->data_synced = b->dir_synced = true;
	return 0;
}

/* Blobs finished without fsync keep their fd open until the committer syncs them; past this
   many at once (a big import batch) the fd is closed unsynced and the committer opens the
   file again by name for its fdatasync (the dirty pages belong to the inode, not the fd; a
   writeback error no fd has seen yet is reported to the new one), so the caller, an event
   loop, never fsyncs. */
#define DEFERRED_MAX 256
static atomic_int deferred_open;

/* Ids tried for a file's final name before giving up (each a 2^-40 chance of meeting a file
   of this process's hour that exists). */
#define FILE_ID_TRIES 8

atomic_bool store_blob_rename_by_link;

/* Renames from to to under directory fd dfd unless to exists (EEXIST then): renameat2 with
   RENAME_NOREPLACE, or where the filesystem or kernel lacks it (EINVAL, ENOSYS; remembered
   in store_blob_rename_by_link) a hard link to the new name and the old name's unlink (a
   link never replaces either; a crash between leaves the old tmp name, an orphan of this
   process). */
static int rename_noreplace(int dfd, const char *from, const char *to)
{
	if (!atomic_load(&store_blob_rename_by_link)) {
		if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EINVAL && errno != ENOSYS)
			return -1;
		atomic_store(&store_blob_rename_by_link, true);
	}
	if (linkat(dfd, from, dfd, to, 0) == -1)
		return -1;
	return unlinkat(dfd, from, 0);
}

/* Moves b's tmp file to its final name, never over a file already there (an id met by
   chance: 40 random bits per process and hour); when the name is taken, b takes a new id
   and tries again. The fsync order stays the rename's: the file's bytes synced before it or
   by the commit, its directory fsynced after it. */
static int blob_rename_final(struct store_blob *b, struct store_env *e)
{
	char final[32];

	for (unsigned i = 0; i < FILE_ID_TRIES; i++) {
		if (i > 0)
			b->id = file_id(b->st);
		store_blob_path(final, sizeof(final), b->id);
		if (rename_noreplace(e->blobdir_fd, b->tmp, final) == 0) {
			if (i > 0) { /* the tmp name follows the id (it names nothing now) */
				store_blob_path(b->tmp, sizeof(b->tmp), b->id);
				strcat(b->tmp, ".tmp");
			}
			return 0;
		}
		if (errno != EEXIST) {
			log_warn("store: rename blob %016" PRIx64, b->id);
			return store_errno(errno);
		}
		log_warnx("store: blob %016" PRIx64 " exists: another id", b->id);
	}
	return STORE_EIO;
}

static int blob_finish(struct store_blob *b, bool defer)
{
	struct store_env *e = store_env_of(b->st, b->part);
	int rc;

	if (b->err != 0 || b->finished)
		return b->err != 0 ? b->err : STORE_EINVAL;
	if (msgcache_builder_finish(b->mb, &b->cache) < 0)
		buf_reset(
			&b->cache); /* cannot happen (STORE_CACHE_MAX); imapd would read the file */
	msgcache_builder_free(&b->mb);
	if (b->inl)
		return blob_encode(b);
	if (b->st->nosync)
		defer = false; /* bulk load: nothing to defer, store_close syncs */
	if (defer && atomic_fetch_add(&deferred_open, 1) >= DEFERRED_MAX) {
		atomic_fetch_sub(&deferred_open, 1);
		b->reopen = true;
	}
	if (b->reopen) {
		if (close(b->fd) == -1) {
			b->fd = -1;
			return b->err = store_errno(errno);
		}
		b->fd = -1;
	} else if (b->st->nosync) {
		if (close(b->fd) == -1) {
			b->fd = -1;
			return b->err = store_errno(errno);
		}
		b->fd = -1;
		b->data_synced = true;
	} else if (!defer) {
		if (fsync(b->fd) == -1 || close(b->fd) == -1) {
			b->fd = -1;
			log_warn("store: fsync blob %016" PRIx64, b->id);
			return b->err = store_errno(errno);
		}
		b->fd = -1;
		b->data_synced = true;
		store_fsync_note(b->st);
	}
	b->deferred = defer;
	/* a crash before the data is durable leaves an unreferenced file: verify's orphan */
	if ((rc = blob_rename_final(b, e)) != 0)
		return b->err = rc;
	b->finished = true;
	/* the directory fsync (the rename's durability) is done before the first index commit
	   that references the blob, once per directory per batch */
	return 0;
}

int store_blob_finish(struct store_blob *b)
{
	return blob_finish(b, false);
}

int store_blob_finish_deferred(struct store_blob *b)
{
	return blob_finish(b, true);
}

/* Closes the deferred fd (after its fsync, or when the blob is dropped). */
static void blob_close_deferred(struct store_blob *b)
{
	if (b->fd != -1)
		close(b->fd);
	b->fd = -1;
	if (b->deferred) {
		b->deferred = false;
		if (!b->reopen)
			atomic_fetch_sub(&deferred_open, 1);
	}
	b->reopen = false;
}

/* Makes a deferred blob's bytes durable; a failed fsync is final for the blob (the page
   cache may have dropped the bytes: a retry could report success falsely). */
static int blob_sync_data(struct store_blob *b)
{
	if (b->err != 0 || b->data_synced)
		return b->err;
	if (b->fd == -1 && b->reopen) {
		char final[32];

		store_blob_path(final, sizeof(final), b->id);
		b->fd = openat(store_env_of(b->st, b->part)->blobdir_fd, final,
			       O_RDONLY | O_CLOEXEC);
	}
	if (b->fd == -1 || fdatasync(b->fd) == -1) {
		log_warn("store: fsync blob %016" PRIx64, b->id);
		b->err = store_errno(errno);
	} else
		b->data_synced = true;
	store_fsync_note(b->st);
	blob_close_deferred(b);
	return b->err;
}

/* A directory to fsync: partition part's blobs/<sub>. */
struct dir_sync {
	unsigned part, sub;
	bool *synced;
};

/* fsyncs each distinct directory of v once; marks the entries of those that succeeded. */
static int sync_dir_set(struct store *st, struct dir_sync *v, size_t n)
{
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		int rc;

		if (*v[i].synced)
			continue;
		rc = fsync_subdir(st, store_env_of(st, v[i].part), (uint64_t)v[i].sub << 56);
		if (rc != 0) {
			log_warn("store: fsync blob dir");
			if (first == 0)
				first = rc;
			continue;
		}
		for (size_t j = i; j < n; j++)
			if (v[j].part == v[i].part && v[j].sub == v[i].sub)
				*v[j].synced = true;
	}
	return first;
}

/* Deferred blobs of a batch fsynced in parallel on the store's pool (the group committer's
   persistent threads): concurrent fsyncs share the filesystem's journal commits (one fsync
   after another would wait for one commit each). */
static void sync_job(void *arg, size_t i)
{
	(void)blob_sync_data(((struct store_blob **)arg)[i]);
}

static void sync_data_parallel(struct store *st, struct store_blob **u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (u[i]->fd != -1)
			(void)sync_file_range(u[i]->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	store_pool_run(st != NULL ? st->pool : NULL, sync_job, u, n);
}

/* With [store] group_commit_syncfs, a batch with at least this many deferred message files
   makes them durable with one syncfs() per filesystem instead of an fdatasync each and a
   fsync per directory: one call writes back every file of the batch and commits the journal
   once (renames and links included), so a loaded commit costs about three sync calls however
   many messages it holds. But syncfs also waits for every other dirty file of the
   filesystem (on a busy shared one, measured: 3x slower), hence the option, for a store with
   a filesystem of its own. syncfs reports writeback errors of any file of the filesystem
   (Linux 5.8 and later); when it fails the per-file calls run and report each file's own. */
#define SYNCFS_MIN 2

/* The filesystem (st_dev) of partition part's blobs/, or 0 when fstat fails. */
static dev_t blob_dev(struct store *st, unsigned part)
{
	struct stat sb;

	return fstat(store_env_of(st, part)->blobdir_fd, &sb) == 0 ? sb.st_dev : 0;
}

/* One syncfs per filesystem holding the directories ds (blobs' own and links'), after
   writeback was started for the deferred files u (their bytes are on ds[]'s filesystems:
   each blob's own partition is in ds). On success the blobs of that filesystem are
   data-synced and its directories synced. Called with links_mu held. */
static void sync_fs_batch(struct store *st, struct store_blob **u, size_t nu, struct dir_sync *ds,
			  size_t nds)
{
	dev_t *dev = xcalloc(nds + 1, sizeof(*dev));
	bool *ok = xcalloc(nds + 1, sizeof(*ok));

	for (size_t i = 0; i < nu; i++)
		if (u[i]->fd != -1)
			(void)sync_file_range(u[i]->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	for (size_t i = 0; i < nds; i++)
		dev[i] = blob_dev(st, ds[i].part);
	for (size_t i = 0; i < nds; i++) {
		bool done = dev[i] == 0;

		for (size_t j = 0; j < i && !done; j++)
			done = dev[j] == dev[i];
		if (done)
			continue;
		if (syncfs(store_env_of(st, ds[i].part)->blobdir_fd) == 0)
			ok[i] = true;
		else
			log_warn("store: syncfs %s (each file is fsynced instead)",
				 store_env_of(st, ds[i].part)->dir);
		store_fsync_note(st);
		for (size_t j = i + 1; j < nds; j++)
			if (dev[j] == dev[i])
				ok[j] = ok[i];
	}
	for (size_t i = 0; i < nds; i++)
		if (ok[i])
			*ds[i].synced = true;
	for (size_t i = 0; i < nu; i++) {
		bool synced = false;
		dev_t d = blob_dev(st, u[i]->part);

		for (size_t j = 0; j < nds && !synced; j++)
			synced = ok[j] && dev[j] == d && d != 0;
		if (synced) {
			u[i]->data_synced = true;
			blob_close_deferred(u[i]);
		}
	}
	free(ok);
	free(dev);
}

/* Makes every blob of a batch durable and present where it is referenced, before the index
   commits: (1) hard links into parts[i] (v[i]'s own partition needs none), first, so the
   journal commit of (2) carries them with the renames; (2) the bytes of deferred blobs:
   SYNCFS_MIN or more at once with one syncfs per filesystem (which also makes (3) needless),
   else writeback started for all, then fsynced in parallel; (3) one fsync per directory
   touched by a rename or a link. v may hold NULLs and repeats. An error is kept in the blob
   (b->err, met again by store_blob_ref) or met again by store_blob_ref's own checks. */
int store_blob_sync_batch(struct store_blob **v, const unsigned *parts, size_t n)
{
	struct store *st = NULL;
	struct store_blob **u = xcalloc(n + 1, sizeof(*u));
	struct dir_sync *ds = NULL;
	size_t nds = 0, cap = 0, nu = 0, k = 0;
	int first = 0, rc;

	pthread_mutex_lock(&links_mu);
	for (size_t i = 0; i < n; i++)
		if (v[i] != NULL && v[i]->err == 0 && v[i]->finished && !v[i]->inl &&
		    parts[i] != v[i]->part &&
		    (rc = blob_link_locked(v[i], parts[i], false)) != 0 && first == 0)
			first = rc;
	for (size_t i = 0; i < n; i++) {
		struct store_blob *b = v[i];

		if (b == NULL || !b->finished || b->inl)
			continue; /* an inline body is in the index commit itself */
		st = b->st;
		if (nds + b->nlinks > cap)
			ds = xreallocarray(ds, cap = (nds + b->nlinks) * 2, sizeof(*ds));
		ds[nds++] = (struct dir_sync){ b->part, (unsigned)(b->id >> 56), &b->dir_synced };
		for (size_t j = 1; j < b->nlinks; j++)
			ds[nds++] = (struct dir_sync){ b->links[j].part, (unsigned)(b->id >> 56),
						       &b->links[j].dir_synced };
	}
	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		if (v[i] == NULL || !v[i]->finished || v[i]->data_synced || v[i]->err != 0)
			continue;
		for (size_t j = 0; j < nu && !seen; j++)
			seen = u[j] == v[i];
		if (!seen)
			u[nu++] = v[i];
	}
	/* links_mu stays held: ds points into the blobs' link arrays */
	if (nu >= SYNCFS_MIN && st->gc_syncfs)
		sync_fs_batch(st, u, nu, ds, nds);
	for (size_t i = 0; i < nu; i++)
		if (!u[i]->data_synced)
			u[k++] = u[i];
	sync_data_parallel(st, u, k);
	for (size_t i = 0; i < k; i++)
		if (u[i]->err != 0 && first == 0)
			first = u[i]->err;
	free(u);
	if (nds > 0 && (rc = sync_dir_set(st, ds, nds)) != 0 && first == 0)
		first = rc;
	pthread_mutex_unlock(&links_mu);
	free(ds);
	return first;
}

int store_blob_from_fd(struct store *st, unsigned part, int fd, struct store_blob **b_r)
{
	struct store_blob *b;
	char chunk[65536];
	ssize_t r;
	int rc;

	if ((rc = store_blob_new(st, part, &b)) != 0)
		return rc;
	for (;;) {
		r = read(fd, chunk, sizeof(chunk));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if ((rc = store_blob_write(b, chunk, (size_t)r)) != 0)
			break;
	}
	if (r < 0) {
		log_warn("store: read spooled message");
		rc = STORE_EIO;
	}
	if (rc == 0)
		rc = store_blob_finish(b);
	if (rc != 0) {
		store_blob_free(&b);
		return rc;
	}
	*b_r = b;
	return 0;
}

int store_blob_replace_head(struct store_blob **bp, const void *head, size_t hlen, uint64_t skip)
{
	struct store_blob *old = *bp, *b;
	char chunk[65536];
	uint64_t off = skip;
	int rc;

	if (old->err != 0 || old->finished || skip > old->size)
		return old->err != 0 ? old->err : STORE_EINVAL;
	if ((rc = store_blob_new(old->st, old->part, &b)) != 0)
		return rc;
	rc = store_blob_write(b, head, hlen);
	if (rc == 0 && old->inl && off < old->size)
		rc = store_blob_write(b, old->body.data + off, (size_t)(old->size - off));
	while (rc == 0 && !old->inl && off < old->size) {
		size_t want = old->size - off < sizeof(chunk) ? (size_t)(old->size - off)
							      : sizeof(chunk);
		ssize_t r = pread(old->fd, chunk, want, (off_t)off);

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			log_warn("store: read back blob %016" PRIx64, old->id);
			rc = STORE_EIO;
			break;
		}
		rc = store_blob_write(b, chunk, (size_t)r);
		off += (uint64_t)r;
	}
	if (rc != 0) {
		store_blob_free(&b);
		return rc;
	}
	store_blob_free(bp);
	*bp = b;
	return 0;
}

uint64_t store_blob_id(const struct store_blob *b)
{
	return b->id;
}

uint64_t store_blob_size(const struct store_blob *b)
{
	return b->size;
}

void store_blob_free(struct store_blob **bp)
{
	struct store_blob *b = *bp;
	char final[32];

	if (b == NULL)
		return;
	*bp = NULL;
	blob_close_deferred(b);
	store_blob_path(final, sizeof(final), b->id);
	for (size_t i = 0; i < b->nlinks && !b->inl; i++) {
		struct store_env *e = store_env_of(b->st, b->links[i].part);

		if (b->links[i].referenced)
			continue;
		if (i == 0 && !b->finished)
			(void)unlinkat(e->blobdir_fd, b->tmp, 0);
		else
			(void)unlinkat(e->blobdir_fd, final, 0);
	}
	msgcache_builder_free(&b->mb);
	buf_release(&b->cache);
	buf_release(&b->body);
	buf_release(&b->enc);
	store_fts_doc_free(&b->fts);
	free(b->links);
	free(b);
}

/* Makes b durable and present in partition part (store_blob_ref outside a batch, or after
   a batch's store_blob_sync_batch met an error): the bytes, its own directory, and a hard
   link into part with its directory; each done once. Called with links_mu held. */
static int blob_durable_locked(struct store_blob *b, unsigned part)
{
	int rc;

	if ((rc = blob_sync_data(b)) != 0)
		return rc;
	if (!b->dir_synced) {
		if ((rc = fsync_subdir(b->st, store_env_of(b->st, b->part), b->id)) != 0) {
			log_warn("store: fsync blob dir");
			return rc;
		}
		b->dir_synced = true;
	}
	return blob_link_locked(b, part, true);
}

/* Partitions on different filesystems (a hard link fails with EXDEV): a copy, written to
   a tmp name, fsynced and renamed like a new blob (its directory is fsynced as a link's). */
static int blob_copy(struct store_blob *b, struct store_env *src, struct store_env *dst,
		     const char *final)
{
	char tmp[48], buf[65536];
	int in, out, rc = 0;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.tmp", final);
	if ((in = openat(src->blobdir_fd, final, O_RDONLY | O_CLOEXEC)) == -1)
		return store_errno(errno);
	out = openat(dst->blobdir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (out == -1) {
		rc = store_errno(errno);
		close(in);
		return rc;
	}
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		for (ssize_t off = 0; rc == 0 && n > 0 && off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));

			if (w == -1 && errno != EINTR)
				rc = store_errno(errno);
			else if (w > 0)
				off += w;
		}
		if (n == -1)
			rc = store_errno(errno);
	}
	close(in);
	if (rc == 0 && fdatasync(out) == -1)
		rc = store_errno(errno);
	store_fsync_note(b->st);
	if (close(out) == -1 && rc == 0)
		rc = store_errno(errno);
	if (rc == 0 && renameat(dst->blobdir_fd, tmp, dst->blobdir_fd, final) == -1)
		rc = store_errno(errno);
	if (rc != 0) {
		log_warnx("store: copy blob %016" PRIx64 " into %s (another filesystem): %s",
			  b->id, dst->dir, store_strerror(rc));
		(void)unlinkat(dst->blobdir_fd, tmp, 0);
		return rc;
	}
	return 0;
}

/* Makes sure b's file exists in partition part (a hard link; with sync its directory is
   fsynced, else the caller fsyncs it: store_blob_sync_batch). */
static int blob_link_locked(struct store_blob *b, unsigned part, bool sync)
{
	struct store_env *src = store_env_of(b->st, b->part), *dst = store_env_of(b->st, part);
	struct blob_link *l = NULL;
	char final[32];
	int rc;

	for (size_t i = 0; i < b->nlinks; i++)
		if (b->links[i].part == dst->part)
			l = &b->links[i];
	if (l == NULL) {
		store_blob_path(final, sizeof(final), b->id);
		if (linkat(src->blobdir_fd, final, dst->blobdir_fd, final, 0) == -1) {
			if (errno == EXDEV) {
				if ((rc = blob_copy(b, src, dst, final)) != 0)
					return rc;
			} else if (errno != EEXIST) {
				log_warn("store: link blob %016" PRIx64 " into %s", b->id,
					 dst->dir);
				return store_errno(errno);
			}
		}
		b->links = xreallocarray(b->links, b->nlinks + 1, sizeof(*b->links));
		l = &b->links[b->nlinks++];
		*l = (struct blob_link){ dst->part, false, false };
	}
	if (!sync || l->dir_synced || l == &b->links[0])
		return 0;
	if ((rc = fsync_subdir(b->st, dst, b->id)) == 0)
		l->dir_synced = true;
	return rc;
}

/* An inline body's place (a blob row of format 3 or 4). */
struct body_at {
	uint64_t piece; /* the first piece's key; 0: not inline */
	uint32_t len;   /* encoded length */
	uint16_t first; /* the first piece's length */
};

/* The row v's inline body: false for a file's row (or one of no known length). */
static bool body_at_of(const MDB_val *v, struct body_at *a)
{
	const uint8_t *p = v->mv_data;

	*a = (struct body_at){ 0, 0, 0 };
	if (v->mv_size != BLOB_INLINE_LEN && v->mv_size != BLOB_INLINE3_LEN)
		return false;
	a->piece = get_be64(p + 12);
	a->len = get_be32(p + 20);
	a->first = v->mv_size == BLOB_INLINE_LEN ? get_be16(p + 24) : BODY_PIECE;
	return true;
}

/* A blob row: refs and size, and for an inline body (a->piece != 0) where it is. */
static int blob_row_put(struct store_txn *t, uint64_t id, uint32_t refs, uint64_t size,
			const struct body_at *a)
{
	uint8_t k[8], v[BLOB_INLINE_LEN];
	uint64_t piece = a != NULL ? a->piece : 0;

	put_be64(k, id);
	put_be32(v, refs);
	put_be64(v + 4, size);
	put_be64(v + 12, piece);
	put_be32(v + 20, piece != 0 ? a->len : 0);
	put_be16(v + 24, piece != 0 ? a->first : 0);
	return store_put_append(t, DBI_BLOBS, k, 8, v,
				piece != 0 ? BLOB_INLINE_LEN : BLOB_REC_LEN);
}

/* The bytes a leaf node of a piece of len bytes takes (LMDB 0.9: an 8-byte header, the
   8-byte key, the value, rounded to even; a 2-byte slot). */
static size_t piece_node(size_t len)
{
	return (16 + len + 1) / 2 * 2 + 2;
}

/* The bodies' leaf pages in t. */
static size_t body_pages(struct store_txn *t)
{
	MDB_stat ms;

	return mdb_stat(t->txn, t->e->dbi[DBI_BODIES], &ms) == 0 ? ms.ms_leaf_pages : 0;
}

/* Appends enc (len bytes) to t's bodies in pieces; *at says where (the first piece's number,
   1 and up, one past the last piece there, and its length). The first piece takes what
   room the last leaf page has left (meta "body_fill", when it names the last piece; else
   the page is taken as full), so pages fill whole: MDB_APPEND puts a piece on the last page
   when it fits, else on a new one, which the leaf page count tells. */
static int body_put(struct store_txn *t, const char *enc, size_t len, struct body_at *at)
{
	MDB_cursor *c;
	MDB_val k, v;
	MDB_stat es;
	uint64_t n = 1;
	uint8_t kb[8], fill[10];
	size_t room = 0, used, page, pages;
	int rc;

	if (t->failed)
		return STORE_EAGAIN;
	mdb_env_stat(t->e->env, &es);
	page = es.ms_psize - 16; /* a page's room: its header is 16 bytes */
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_BODIES], &c)) != 0)
		return store_mdb_err(t, rc, "cursor");
	rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
	if (rc == 0 && k.mv_size == 8)
		n = get_be64(k.mv_data) + 1;
	else if (rc != 0 && rc != MDB_NOTFOUND) {
		mdb_cursor_close(c);
		return store_mdb_err(t, rc, "bodies");
	}
	if (store_get(t, DBI_META, "body_fill", 9, &v) == 0 && v.mv_size == 10 &&
	    get_be64(v.mv_data) == n - 1 && get_be16((uint8_t *)v.mv_data + 8) <= page)
		room = page - get_be16((uint8_t *)v.mv_data + 8);
	used = page - room;
	at->piece = n;
	at->len = (uint32_t)len;
	at->first = BODY_PIECE;
	if (room >= piece_node(BODY_FIRST_MIN) && room - 18 < BODY_PIECE)
		at->first = (uint16_t)((room - 18) & ~(size_t)1); /* piece_node(first) <= room */
	pages = body_pages(t);
	rc = 0;
	for (size_t off = 0, want = at->first; rc == 0; off += want, want = BODY_PIECE, n++) {
		size_t now;

		put_be64(kb, n);
		k.mv_size = 8;
		k.mv_data = kb;
		v.mv_size = len - off < want ? len - off : want;
		v.mv_data = (void *)(uintptr_t)(enc + off);
		if ((rc = mdb_cursor_put(c, &k, &v, MDB_APPEND)) != 0)
			break;
		now = body_pages(t);
		used = now > pages ? piece_node(v.mv_size) : used + piece_node(v.mv_size);
		pages = now;
		if (off + v.mv_size >= len)
			break;
	}
	mdb_cursor_close(c);
	if (rc != 0)
		return store_mdb_err(t, rc, "put body");
	put_be64(fill, n);
	put_be16(fill + 8, (uint16_t)(used < page ? used : page));
	return store_put(t, DBI_META, "body_fill", 9, fill, sizeof(fill));
}

/* Reads (into out) or deletes (del) the pieces of the encoded body at a. */
static int body_walk(struct store_txn *t, const struct body_at *a, struct buf *out, bool del)
{
	size_t first = a->first < a->len ? a->first : a->len;
	size_t n = first == 0 ? 0 : 1 + (a->len - first + BODY_PIECE - 1) / BODY_PIECE;
	int rc = 0;

	if (t->failed)
		return STORE_EAGAIN;
	for (size_t i = 0, off = 0; i < n && rc == 0; i++) {
		size_t want = i == 0 ? first : BODY_PIECE;
		uint8_t kb[8];
		MDB_val k = { 8, kb }, v;

		if (i > 0 && a->len - off < BODY_PIECE)
			want = a->len - off;
		put_be64(kb, a->piece + i);
		if (del)
			rc = mdb_del(t->txn, t->e->dbi[DBI_BODIES], &k, NULL);
		else if ((rc = mdb_get(t->txn, t->e->dbi[DBI_BODIES], &k, &v)) == 0 &&
			 (v.mv_size != want || buf_append(out, v.mv_data, want) != 0))
			rc = MDB_CORRUPTED;
		off += want;
	}
	if (rc == MDB_NOTFOUND || rc == MDB_CORRUPTED || n == 0) {
		log_warnx("store: %s: inline body at piece %" PRIu64 " is damaged (run `mailctl "
			  "verify`)",
			  t->e->dir, a->piece);
		return STORE_ECORRUPT;
	}
	return store_mdb_err(t, rc, del ? "del body" : "get body");
}

/* A new reference to b from t's partition: links the file, counts, stores the cache. */
int store_blob_ref(struct store_txn *t, const struct store_blob *cb)
{
	struct store_blob *b = (struct store_blob *)(uintptr_t)cb;
	uint8_t k[8];
	MDB_val v;
	int rc;

	if (!b->finished)
		return STORE_EINVAL;
	if (!b->inl) {
		pthread_mutex_lock(&links_mu);
		rc = blob_durable_locked(b, t->e->part);
		pthread_mutex_unlock(&links_mu);
		if (rc != 0)
			return rc;
	}
	put_be64(k, b->id);
	rc = store_get(t, DBI_BLOBS, k, 8, &v);
	if (rc == 0 && (v.mv_size == BLOB_REC_LEN || v.mv_size == BLOB_INLINE_LEN ||
			v.mv_size == BLOB_INLINE3_LEN)) {
		struct body_at a;

		(void)body_at_of(&v, &a);
		rc = blob_row_put(t, b->id, get_be32(v.mv_data) + 1, b->size, &a);
	} else if (rc == STORE_ENOMSG) {
		struct body_at a = { 0, 0, 0 };

		rc = 0;
		if (b->inl)
			rc = body_put(t, b->enc.data, b->enc.len, &a);
		if (rc == 0)
			rc = blob_row_put(t, b->id, 1, b->size, &a);
		if (rc == 0 && b->cache.len > 0)
			rc = store_put_append(t, DBI_CACHE, k, 8, b->cache.data, b->cache.len);
	}
	if (rc != 0)
		return rc;
	if (t->nrefd == t->caprefd)
		t->refd = xreallocarray(t->refd, t->caprefd = t->caprefd * 2 + 4,
					sizeof(*t->refd));
	t->refd[t->nrefd++] = b;
	return 0;
}

/* Changes the count of an existing blob; at 0 the row and cache go and the file is unlinked
   after the commit. */
int store_blob_ref_id(struct store_txn *t, uint64_t blob, int delta)
{
	uint8_t k[8];
	MDB_val v;
	uint32_t refs;
	int rc;

	put_be64(k, blob);
	if ((rc = store_get(t, DBI_BLOBS, k, 8, &v)) != 0)
		return rc == STORE_ENOMSG ? 0 : rc; /* verify reports the missing row */
	if (v.mv_size != BLOB_REC_LEN && v.mv_size != BLOB_INLINE_LEN &&
	    v.mv_size != BLOB_INLINE3_LEN)
		return STORE_ECORRUPT;
	refs = get_be32(v.mv_data);
	if (delta > 0 || refs > (uint32_t)-delta)
		return blob_set_refs(t, blob, &v, refs + (uint32_t)delta);
	return blob_row_drop(t, blob, &v);
}

/* Rewrites the row v of blob with refs, keeping the rest. */
static int blob_set_refs(struct store_txn *t, uint64_t blob, const MDB_val *v, uint32_t refs)
{
	struct body_at a;

	(void)body_at_of(v, &a);
	return blob_row_put(t, blob, refs, get_be64((const uint8_t *)v->mv_data + 4), &a);
}

/* The last reference to blob (row v) is gone: the row, its cache and an inline body go in
   t; a file is unlinked after the commit (the `dead` row covers a crash in between). */
static int blob_row_drop(struct store_txn *t, uint64_t blob, const MDB_val *v)
{
	uint8_t k[8];
	int rc = 0;

	struct body_at a;

	put_be64(k, blob);
	/* v points into the txn's pages: read it before any write */
	if (body_at_of(v, &a)) {
		if ((rc = store_del(t, DBI_BLOBS, k, 8)) != 0)
			return rc;
		rc = body_walk(t, &a, NULL, true);
		if (rc == STORE_ECORRUPT)
			rc = 0; /* what is left of it is verify's */
		if (rc != 0)
			return rc;
		rc = store_del(t, DBI_CACHE, k, 8);
		return rc == STORE_ENOMSG ? 0 : rc;
	}
	if ((rc = store_del(t, DBI_BLOBS, k, 8)) != 0)
		return rc;
	rc = store_del(t, DBI_CACHE, k, 8);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	/* a crash between the commit and the unlink: the next open unlinks it */
	if ((rc = store_put(t, DBI_DEAD, k, 8, "", 0)) != 0)
		return rc;
	if (t->ndead == t->capdead)
		t->dead = xreallocarray(t->dead, t->capdead = t->capdead * 2 + 16,
					sizeof(*t->dead));
	t->dead[t->ndead++] = blob;
	return 0;
}

void store_blob_unlink_dead(struct store_txn *t)
{
	struct store_env *e = t->e;
	char path[32];

	for (size_t i = 0; i < t->ndead; i++) {
		store_blob_path(path, sizeof(path), t->dead[i]);
		if (unlinkat(e->blobdir_fd, path, 0) == -1 && errno != ENOENT)
			log_warn("store: unlink %s/blobs/%s", e->dir, path);
	}
	if (t->ndead > 0) { /* their rows go with the next commit (store.c gone_rows) */
		pthread_mutex_lock(&e->gone_mu);
		if (e->ngone + t->ndead > e->capgone)
			e->gone = xreallocarray(e->gone, e->capgone = (e->ngone + t->ndead) * 2,
						sizeof(*e->gone));
		memcpy(e->gone + e->ngone, t->dead, t->ndead * sizeof(*t->dead));
		e->ngone += t->ndead;
		pthread_mutex_unlock(&e->gone_mu);
	}
	t->ndead = 0;
}

/* After t committed: its references keep their files (store_blob_free leaves them). */
void store_blob_txn_committed(struct store_txn *t)
{
	pthread_mutex_lock(&links_mu);
	for (size_t i = 0; i < t->nrefd; i++) {
		struct store_blob *b = t->refd[i];

		for (size_t j = 0; j < b->nlinks; j++)
			if (b->links[j].part == t->e->part)
				b->links[j].referenced = true;
	}
	pthread_mutex_unlock(&links_mu);
}

/* Opens blob's file in e: 0, STORE_ENOMSG (none) or STORE_EIO. */
static int blob_file_open(struct store_env *e, uint64_t blob, int *fd_r, uint64_t *size_r)
{
	char path[32];
	struct stat sb;
	int fd;

	store_blob_path(path, sizeof(path), blob);
	if ((fd = openat(e->blobdir_fd, path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return STORE_ENOMSG;
		log_warn("store: open %s/blobs/%s", e->dir, path);
		return STORE_EIO;
	}
	if (fstat(fd, &sb) == -1) {
		close(fd);
		return STORE_EIO;
	}
	*fd_r = fd;
	*size_r = (uint64_t)sb.st_size;
	return 0;
}

/* Decodes an encoded body (enc, n bytes) of size bytes into out. */
static int body_decode(const char *enc, size_t n, uint64_t size, struct buf *out)
{
	char *p;

	if (n < 1 || size > SIZE_MAX / 2 || (p = buf_reserve(out, (size_t)size)) == NULL)
		return STORE_ECORRUPT;
	if (enc[0] == BODY_RAW && n - 1 == size) {
		if (size > 0)
			memcpy(p, enc + 1, (size_t)size);
	} else if (enc[0] != BODY_ZSTD ||
		   ZSTD_decompress(p, (size_t)size, enc + 1, n - 1) != (size_t)size)
		return STORE_ECORRUPT;
	buf_commit(out, (size_t)size);
	return 0;
}

/* The inline body of blob in t, decoded into out: 0, STORE_ENOMSG (not inline or no
   row), STORE_ECORRUPT. */
static int body_read(struct store_txn *t, uint64_t blob, struct buf *out)
{
	uint8_t k[8];
	MDB_val v;
	struct buf enc;
	struct body_at a;
	uint64_t size;
	int rc;

	put_be64(k, blob);
	if ((rc = store_get(t, DBI_BLOBS, k, 8, &v)) != 0)
		return rc;
	if (!body_at_of(&v, &a))
		return STORE_ENOMSG;
	size = get_be64((uint8_t *)v.mv_data + 4);
	buf_init(&enc, a.len, a.len);
	buf_init(out, 0, size < SIZE_MAX / 2 ? (size_t)size : 0);
	if ((rc = body_walk(t, &a, &enc, false)) == 0 &&
	    (rc = body_decode(enc.data, enc.len, size, out)) != 0)
		log_warnx("store: %s: inline body of %016" PRIx64 " does not decode", t->e->dir,
			  blob);
	buf_release(&enc);
	if (rc != 0)
		buf_release(out);
	return rc;
}

int store_blob_open_txn(struct store_txn *t, uint64_t blob, int *fd_r, uint64_t *size_r)
{
	struct buf body;
	int rc = blob_file_open(t->e, blob, fd_r, size_r);

	if (rc != STORE_ENOMSG)
		return rc;
	if ((rc = body_read(t, blob, &body)) != 0)
		return rc;
	*size_r = body.len;
	rc = mem_fd(body.data, body.len, fd_r);
	buf_release(&body);
	return rc;
}

bool store_blob_inline_ok(struct store_txn *t, uint64_t blob)
{
	struct buf body;

	if (body_read(t, blob, &body) != 0)
		return false;
	buf_release(&body);
	return true;
}

int store_blob_set_refs(struct store_txn *t, uint64_t blob, uint32_t refs, uint64_t file_size)
{
	uint8_t k[8];
	MDB_val v;
	int rc;

	put_be64(k, blob);
	struct body_at a;

	rc = store_get(t, DBI_BLOBS, k, 8, &v);
	if (rc == STORE_ENOMSG || (rc == 0 && !body_at_of(&v, &a))) {
		if (refs > 0)
			return blob_row_put(t, blob, refs, file_size, NULL);
		if (rc == STORE_ENOMSG)
			return 0;
		if ((rc = store_del(t, DBI_BLOBS, k, 8)) != 0)
			return rc;
		rc = store_del(t, DBI_CACHE, k, 8);
		return rc == STORE_ENOMSG ? 0 : rc;
	}
	if (rc != 0)
		return rc;
	return refs > 0 ? blob_set_refs(t, blob, &v, refs) : blob_row_drop(t, blob, &v);
}

int store_blob_open(struct store *st, unsigned part, uint64_t blob, int *fd_r, uint64_t *size_r)
{
	struct store_env *e = store_env_of(st, part);
	struct store_txn *t;
	int rc;

	if (e == NULL)
		return STORE_EINVAL;
	if ((rc = blob_file_open(e, blob, fd_r, size_r)) != STORE_ENOMSG)
		return rc;
	if ((rc = store_txn_begin(st, part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_blob_open_txn(t, blob, fd_r, size_r);
	store_txn_abort(&t);
	return rc;
}

bool store_blob_inline(struct store *st, unsigned part, uint64_t blob)
{
	struct store_txn *t;
	uint8_t k[8];
	MDB_val v;
	bool inl;

	if (store_txn_begin(st, part, STORE_TXN_READ, &t) != 0)
		return false;
	put_be64(k, blob);
	struct body_at a;

	inl = store_get(t, DBI_BLOBS, k, 8, &v) == 0 && body_at_of(&v, &a);
	store_txn_abort(&t);
	return inl;
}

int store_blob_open_blob(const struct store_blob *b, int *fd_r, uint64_t *size_r)
{
	*fd_r = -1;
	if (!b->finished || b->err != 0)
		return STORE_EINVAL;
	*size_r = b->size;
	if (b->inl)
		return mem_fd(b->body.data, b->body.len, fd_r);
	return blob_file_open(store_env_of(b->st, b->part), b->id, fd_r, size_r);
}

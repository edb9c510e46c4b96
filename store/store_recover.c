/* store_recover.c — owns crash recovery of message files: what a write that was never
 * acknowledged (a process killed before its commit) or an unlink cut short (killed between
 * the commit that dropped a file's last reference and the unlink) leaves behind is removed
 * by the next process that opens the store, so a store is clean after any crash without an
 * admin running `mailctl verify --repair`.
 *
 * Each process that opens the store holds an exclusive flock on its own marker file
 * `<path>/run/<tag>`, where tag is a 16-bit number no other marker has; it is put into
 * every message file id the process makes (store_blob_new), with the hour in the top byte.
 * The marker records the hour the process started (and whether it spread its files over
 * every directory: bulk loading). A marker whose lock can be taken belongs to a process
 * that died without store_close: its opener takes the lock and removes every file of that
 * tag nothing references, in the directories of the hours the dead process lived (each
 * partition and the queue), then the marker. No other process can still write such a file,
 * so no age threshold is needed. Files whose last reference went are listed in the `dead`
 * table by the transaction that dropped it; after its commit the file is unlinked and the
 * row goes with the next commit; the rows a crash left are done at open. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "store/store_private.h"

struct dead_marker {
	uint16_t tag;
	long first_hour; /* hours since the epoch when it started */
	bool all_dirs;
	int fd; /* its lock, held while its files are removed */
	char path[PATH_MAX];
};

struct store_recovery {
	struct store *st;
	struct dead_marker *v;
	size_t n;
	pthread_t thread;
	bool threaded;
	atomic_bool stop;
};

static long hour_now(void)
{
	return (long)(time(NULL) / 3600);
}

/* Makes <path>/run/<tag> for this process with a tag no marker has, and locks it. */
static int marker_make(struct store *st)
{
	char dir[PATH_MAX], p[PATH_MAX + 16], text[64];
	int fd = -1, len;

	snprintf(dir, sizeof(dir), "%s/run", st->path);
	if (mkdir(dir, 0750) == -1 && errno != EEXIST) {
		log_warn("store: mkdir %s", dir);
		return store_errno(errno);
	}
	for (int tries = 0; tries < 1000 && fd == -1; tries++) {
		uint16_t tag;

		if (getrandom(&tag, sizeof(tag), 0) != sizeof(tag))
			fatal("getrandom");
		snprintf(p, sizeof(p), "%s/%04x", dir, tag);
		fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
		if (fd == -1 && errno != EEXIST) {
			log_warn("store: %s", p);
			return store_errno(errno);
		}
		if (fd != -1 && flock(fd, LOCK_EX | LOCK_NB) == -1) {
			close(fd); /* another opener claimed the fresh name first: hardly */
			fd = -1;
		}
		st->tag = tag;
	}
	if (fd == -1) {
		log_warnx("store: no free process tag under %s", dir);
		return STORE_EIO;
	}
	len = snprintf(text, sizeof(text), "%ld %d %ld\n", hour_now(), st->nosync ? 1 : 0,
		       (long)getpid());
	if (write(fd, text, (size_t)len) != len)
		log_warn("store: write %s", p);
	st->marker_fd = fd;
	snprintf(st->marker_path, sizeof(st->marker_path), "%s", p);
	return 0;
}

/* The markers of dead processes (their locks taken now). */
static void markers_dead(struct store *st, struct store_recovery *r)
{
	char dir[PATH_MAX - 16];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/run", st->path);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		struct dead_marker m = { 0 };
		char text[64] = "";
		char *end;
		unsigned long tag = strtoul(de->d_name, &end, 16);
		int all = 0;
		ssize_t n;

		if (strlen(de->d_name) != 4 || *end != '\0' || tag == st->tag)
			continue;
		snprintf(m.path, sizeof(m.path), "%s/%s", dir, de->d_name);
		if ((m.fd = open(m.path, O_RDWR | O_CLOEXEC)) == -1)
			continue;
		if (flock(m.fd, LOCK_EX | LOCK_NB) == -1) {
			close(m.fd); /* alive, or being recovered by another opener */
			continue;
		}
		n = read(m.fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = '\0';
		if (sscanf(text, "%ld %d", &m.first_hour, &all) != 2) {
			m.first_hour =
				0; /* unreadable (killed while writing it): every directory */
			all = 1;
		}
		m.tag = (uint16_t)tag;
		m.all_dirs = all != 0 || hour_now() - m.first_hour >= 255;
		r->v = xreallocarray(r->v, r->n + 1, sizeof(*r->v));
		r->v[r->n++] = m;
	}
	closedir(d);
}

/* A file name of blobs/xx: its id, and whether it is a tmp file; false for other names. */
static bool parse_name(const char *name, uint64_t *id_r, bool *tmp_r)
{
	char *end;

	if (strlen(name) < 16)
		return false;
	*id_r = strtoull(name, &end, 16);
	if (end != name + 16)
		return false;
	*tmp_r = strcmp(end, ".tmp") == 0;
	return *end == '\0' || *tmp_r;
}

static bool referenced(struct store *st, unsigned part, uint64_t id)
{
	struct store_txn *t;
	uint8_t k[8];
	MDB_val v;
	int rc;

	if (store_txn_begin(st, part, STORE_TXN_READ, &t) != 0)
		return true; /* cannot tell: keep it */
	put_be64(k, id);
	rc = store_get(t, DBI_BLOBS, k, 8, &v);
	store_txn_abort(&t);
	return rc != STORE_ENOMSG;
}

/* Removes the unreferenced files of tag m in directory sub of env e; returns how many. */
static uint64_t sweep_dir(struct store *st, struct store_env *e, unsigned sub,
			  const struct dead_marker *m)
{
	char name[4];
	struct dirent *de;
	uint64_t removed = 0;
	DIR *d;
	int fd;

	snprintf(name, sizeof(name), "%02x", sub);
	if ((fd = openat(e->blobdir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return 0;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		uint64_t id;
		bool tmp;

		if (!parse_name(de->d_name, &id, &tmp) || STORE_BLOB_TAG(id) != m->tag)
			continue;
		if (!tmp && referenced(st, e->part, id))
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0)
			removed++;
		else if (errno != ENOENT)
			log_warn("store: unlink %s/blobs/%s/%s", e->dir, name, de->d_name);
	}
	closedir(d);
	return removed;
}

static void sweep_marker(struct store_recovery *r, struct dead_marker *m)
{
	struct store *st = r->st;
	uint64_t removed = 0;
	long hours = m->all_dirs ? 256 : hour_now() - m->first_hour + 1;

	for (unsigned p = 0; p <= st->nparts && !atomic_load(&r->stop); p++) {
		struct store_env *e = store_env_of(st, p == st->nparts ? STORE_QUEUE_PART : p);

		for (long h = 0; h < hours && !atomic_load(&r->stop); h++)
			removed += sweep_dir(st, e, (unsigned)((m->first_hour + h) & 0xff), m);
	}
	if (atomic_load(&r->stop)) {
		close(m->fd); /* unlocked: the next opener goes on */
		m->fd = -1;
		return;
	}
	if (removed > 0)
		log_info("store: %" PRIu64 " message files of unfinished writes removed (a "
			 "process with tag %04x ended without closing the store)",
			 removed, m->tag);
	(void)unlink(m->path);
	close(m->fd);
	m->fd = -1;
}

static void *recover_thread(void *arg)
{
	struct store_recovery *r = arg;

	for (size_t i = 0; i < r->n; i++)
		sweep_marker(r, &r->v[i]);
	return NULL;
}

/* The dead table of env part: files whose last reference went; unlinked, then the rows. */
static int dead_rows_env(struct store *st, unsigned part)
{
	struct store_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if ((rc = store_txn_begin(st, part, STORE_TXN_WRITE, &t)) != 0)
		return rc;
	if ((rc = mdb_cursor_open(t->txn, t->e->dbi[DBI_DEAD], &c)) != 0) {
		store_txn_abort(&t);
		return STORE_EIO;
	}
	uint64_t n = 0;

	while (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0) {
		char path[32];

		if (k.mv_size == 8) {
			store_blob_path(path, sizeof(path), get_be64(k.mv_data));
			if (unlinkat(t->e->blobdir_fd, path, 0) == -1 && errno != ENOENT)
				log_warn("store: unlink %s/blobs/%s", t->e->dir, path);
		}
		if (mdb_cursor_del(c, 0) != 0)
			break;
		n++;
	}
	mdb_cursor_close(c);
	if (n == 0) {
		store_txn_abort(&t);
		return 0;
	}
	return store_txn_commit(&t);
}

int store_recover_start(struct store *st, bool background)
{
	struct store_recovery *r;
	int rc;

	if ((rc = marker_make(st)) != 0)
		return rc;
	for (unsigned p = 0; p <= st->nparts; p++)
		if ((rc = dead_rows_env(st, p == st->nparts ? STORE_QUEUE_PART : p)) != 0)
			return rc;
	r = xcalloc(1, sizeof(*r));
	r->st = st;
	atomic_init(&r->stop, false);
	markers_dead(st, r);
	st->recovery = r;
	if (r->n == 0)
		return 0;
	if (background) {
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r->threaded = pthread_create(&r->thread, NULL, recover_thread, r) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!r->threaded)
		recover_thread(r);
	return 0;
}

void store_recover_stop(struct store *st)
{
	struct store_recovery *r = st->recovery;

	if (r != NULL) {
		atomic_store(&r->stop, true);
		if (r->threaded)
			pthread_join(r->thread, NULL);
		for (size_t i = 0; i < r->n; i++)
			if (r->v[i].fd != -1)
				close(r->v[i].fd);
		free(r->v);
		free(r);
		st->recovery = NULL;
	}
	if (st->marker_fd != -1) {
		(void)unlink(st->marker_path); /* a clean end: nothing to recover */
		close(st->marker_fd);
		st->marker_fd = -1;
	}
}

void store_recover_wait(struct store *st)
{
	struct store_recovery *r = st->recovery;

	if (r != NULL && r->threaded) {
		pthread_join(r->thread, NULL);
		r->threaded = false;
	}
}

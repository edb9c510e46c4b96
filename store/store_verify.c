/* store_verify.c — owns the consistency check and repair (`mailctl verify`): mailbox and user
 * counters against a recount of the message rows, blob reference counts against the
 * references, message files missing or orphaned, message caches missing or unparsable.
 * ACL rows of mailboxes that are gone. Repair fixes derived data, drops those ACL rows, rebuilds caches from the files, drops rows whose file is gone
 * (logged), and moves orphan files older than a minute into a lost+found mailbox. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/endian.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "common/msgcache.h"
#include "store/store_private.h"

#define ORPHAN_AGE 60 /* seconds: younger files may belong to a delivery in progress */

struct vmbox {
	uint64_t id, user;
	struct mbox_rec rec; /* as counted */
	bool selected;       /* part of the check (user filter) */
};

struct vuser {
	uint64_t id, bytes, msgs;
};

struct vstate {
	struct store_txn *t;
	struct store_verify_report *r;
	bool repair;
	uint64_t only_user; /* 0 = all */
	struct vmbox *mb;
	size_t nmb;
	struct vuser *us;
	size_t nus;
	uint64_t *refs; /* blob ids referenced, one per reference */
	size_t nrefs, caprefs;
	struct orphan {        /* repair: files to move to lost+found after the commit */
		char path[48]; /* under blobs/ */
		int64_t mtime;
	} * orph;
	size_t norph;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct vmbox *find_mb(struct vstate *v, uint64_t id)
{
	size_t lo = 0, hi = v->nmb;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v->mb[mid].id == id)
			return &v->mb[mid];
		if (v->mb[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct vuser *find_user(struct vstate *v, uint64_t id)
{
	for (size_t i = 0; i < v->nus; i++)
		if (v->us[i].id == id)
			return &v->us[i];
	return NULL;
}

static void add_ref(struct vstate *v, uint64_t blob)
{
	if (v->nrefs == v->caprefs)
		v->refs = xreallocarray(v->refs, v->caprefs = v->caprefs * 2 + 256,
					sizeof(*v->refs));
	v->refs[v->nrefs++] = blob;
}

/* The message's body is there: its file, or (format 3) whole in the index. */
static bool body_exists(struct store_txn *t, uint64_t blob)
{
	char path[32];
	struct stat sb;

	store_blob_path(path, sizeof(path), blob);
	return fstatat(t->e->blobdir_fd, path, &sb, 0) == 0 || store_blob_inline_ok(t, blob);
}

/* Mailboxes (id order) and users. */
static int load_mboxes(struct vstate *v)
{
	MDB_cursor *c;
	MDB_val k, val;
	int rc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(v->t->txn, v->t->e->dbi[DBI_MBOX], &c)) != 0)
		return store_mdb_err(v->t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &val, op) == 0) {
		struct vmbox *m;
		struct mbox_rec rec;

		op = MDB_NEXT;
		if (k.mv_size != 8 || mbox_rec_load(v->t, get_be64(k.mv_data), &rec) != 0) {
			v->r->bad_records++;
			continue;
		}
		v->mb = xreallocarray(v->mb, v->nmb + 1, sizeof(*v->mb));
		m = &v->mb[v->nmb++];
		memset(m, 0, sizeof(*m));
		m->id = get_be64(k.mv_data);
		m->user = rec.user;
		m->rec = rec;
		m->rec.messages = m->rec.recent = m->rec.unseen = m->rec.deleted = 0;
		m->rec.size = 0;
		m->selected = v->only_user == 0 || v->only_user == rec.user;
		if (find_user(v, rec.user) == NULL) {
			v->us = xreallocarray(v->us, v->nus + 1, sizeof(*v->us));
			v->us[v->nus++] = (struct vuser){ rec.user, 0, 0 };
		}
	}
	mdb_cursor_close(c);
	v->r->mailboxes += v->nmb;
	return 0;
}

/* Recount from message rows; with repair, rows whose file is gone are collected. */
static int count_msgs(struct vstate *v, uint64_t **gone, size_t *ngone)
{
	MDB_cursor *c;
	MDB_val k, val;
	int rc, op = MDB_FIRST;

	*gone = NULL;
	*ngone = 0;
	if ((rc = mdb_cursor_open(v->t->txn, v->t->e->dbi[DBI_MSGS], &c)) != 0)
		return store_mdb_err(v->t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &val, op) == 0) {
		struct store_msg m;
		struct vmbox *mb;
		struct vuser *u;

		op = MDB_NEXT;
		if (k.mv_size != 12 || val.mv_size < MSG_REC_LEN ||
		    (mb = find_mb(v, get_be64(k.mv_data))) == NULL) {
			v->r->bad_records++;
			continue;
		}
		msg_decode(&val, get_be32((uint8_t *)k.mv_data + 8), &m);
		bool there = body_exists(v->t, m.blob);

		if (!v->repair || there)
			add_ref(v, m.blob); /* repair drops the row of a missing body */
		if (!there) {
			if (mb->selected)
				v->r->missing_files++;
			*gone = xreallocarray(*gone, *ngone + 2, sizeof(**gone));
			(*gone)[(*ngone)++] = mb->id;
			(*gone)[(*ngone)++] = m.uid;
			continue;
		}
		mb->rec.messages++;
		mb->rec.size += m.size;
		mb->rec.unseen += !(m.flags & STORE_SEEN);
		mb->rec.deleted += !!(m.flags & STORE_DELETED);
		mb->rec.recent += m.uid >= mb->rec.first_recent;
		if (mb->selected)
			v->r->messages++;
		if ((u = find_user(v, mb->user)) != NULL) {
			u->bytes += m.size;
			u->msgs++;
		}
	}
	mdb_cursor_close(c);
	return 0;
}

static int drop_gone(struct vstate *v, const uint64_t *gone, size_t ngone)
{
	uint8_t k[12];
	int rc;

	for (size_t i = 0; i + 1 < ngone; i += 2) {
		log_warnx("store: verify: mailbox %016" PRIx64 " uid %" PRIu64
			  " lost its message file; row dropped",
			  gone[i], gone[i + 1]);
		put_be64(k, gone[i]);
		put_be32(k + 8, (uint32_t)gone[i + 1]);
		if ((rc = store_del(v->t, DBI_MSGS, k, 12)) != 0 && rc != STORE_ENOMSG)
			return rc;
		v->r->repaired++;
	}
	return 0;
}

static bool counters_equal(const struct mbox_rec *a, const struct mbox_rec *b)
{
	return a->messages == b->messages && a->recent == b->recent && a->unseen == b->unseen &&
	       a->deleted == b->deleted && a->size == b->size;
}

static int check_counters(struct vstate *v)
{
	int rc;

	for (size_t i = 0; i < v->nmb; i++) {
		struct vmbox *m = &v->mb[i];
		struct mbox_rec cur;

		if (!m->selected || (rc = mbox_rec_load(v->t, m->id, &cur)) != 0)
			continue;
		if (counters_equal(&cur, &m->rec))
			continue;
		v->r->bad_counters++;
		log_warnx("store: verify: mailbox %s counters differ", cur.namebuf);
		if (!v->repair)
			continue;
		cur.messages = m->rec.messages;
		cur.recent = m->rec.recent;
		cur.unseen = m->rec.unseen;
		cur.deleted = m->rec.deleted;
		cur.size = m->rec.size;
		if ((rc = mbox_rec_store(v->t, m->id, &cur)) != 0)
			return rc;
		v->r->repaired++;
	}
	for (size_t i = 0; i < v->nus; i++) {
		struct user_rec u;

		if ((v->only_user != 0 && v->us[i].id != v->only_user) ||
		    user_rec_load_id(v->t, v->us[i].id, &u) != 0)
			continue;
		if (u.used_bytes == v->us[i].bytes && u.used_msgs == v->us[i].msgs)
			continue;
		v->r->bad_counters++;
		if (!v->repair)
			continue;
		u.used_bytes = v->us[i].bytes;
		u.used_msgs = v->us[i].msgs;
		if ((rc = user_rec_store_id(v->t, &u)) != 0)
			return rc;
		v->r->repaired++;
	}
	return 0;
}

static int rebuild_cache(struct vstate *v, uint64_t blob)
{
	struct msgcache_builder *mb;
	struct buf out;
	char chunk[65536];
	uint64_t size;
	uint8_t k[8];
	ssize_t n;
	int fd, rc;

	if ((rc = store_blob_open_txn(v->t, blob, &fd, &size)) != 0)
		return 0;
	mb = msgcache_builder_new();
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		msgcache_builder_push(mb, chunk, (size_t)n);
	close(fd);
	buf_init(&out, 0, STORE_CACHE_MAX);
	rc = 0;
	if (msgcache_builder_finish(mb, &out) == 0 && out.len > 0) {
		put_be64(k, blob);
		rc = store_put(v->t, DBI_CACHE, k, 8, out.data, out.len);
		v->r->repaired += rc == 0;
	}
	buf_release(&out);
	msgcache_builder_free(&mb);
	return rc;
}

/* Blob rows against the sorted references. */
static int check_blobs(struct vstate *v)
{
	MDB_cursor *c;
	MDB_val k, val;
	size_t i = 0;
	uint64_t *fix = NULL; /* pairs (blob, refs) to rewrite; refs 0 = delete */
	uint64_t *nocache = NULL;
	size_t nfix = 0, nnocache = 0;
	int rc, op = MDB_FIRST;

	if (v->nrefs > 1)
		qsort(v->refs, v->nrefs, sizeof(*v->refs), cmp_u64);
	if ((rc = mdb_cursor_open(v->t->txn, v->t->e->dbi[DBI_BLOBS], &c)) != 0)
		return store_mdb_err(v->t, rc, "cursor");
	rc = mdb_cursor_get(c, &k, &val, op);
	while (rc == 0 || i < v->nrefs) {
		uint64_t id = rc == 0 ? get_be64(k.mv_data) : UINT64_MAX;
		uint64_t ref = i < v->nrefs ? v->refs[i] : UINT64_MAX;
		uint64_t want = 0, id_now = id < ref ? id : ref;
		uint32_t have = id == id_now && val.mv_size >= 4 ? get_be32(val.mv_data) : 0;

		while (i < v->nrefs && v->refs[i] == id_now) {
			want++;
			i++;
		}
		if (id == id_now) {
			MDB_val cv;
			uint8_t ck[8];

			v->r->blobs++;
			put_be64(ck, id);
			struct msgcache_view view;
			bool absent = false, bad = false;

			if (want > 0 && have == want) {
				absent = store_get(v->t, DBI_CACHE, ck, 8, &cv) != 0;
				bad = !absent &&
				      msgcache_parse(cv.mv_data, cv.mv_size, &view) != 0;
			}
			if (absent || bad) {
				if (absent)
					v->r->missing_cache++;
				else
					v->r->bad_cache++;
				nocache = xreallocarray(nocache, nnocache + 1, sizeof(*nocache));
				nocache[nnocache++] = id;
			}
			rc = mdb_cursor_get(c, &k, &val, MDB_NEXT);
		}
		if (have != want) {
			v->r->bad_refcounts++;
			fix = xreallocarray(fix, nfix + 2, sizeof(*fix));
			fix[nfix++] = id_now;
			fix[nfix++] = want;
		}
		if (rc != 0 && rc != MDB_NOTFOUND)
			break;
	}
	mdb_cursor_close(c);
	rc = 0;
	for (size_t j = 0; v->repair && j + 1 < nfix && rc == 0; j += 2) {
		char path[32];
		struct stat sb;

		store_blob_path(path, sizeof(path), fix[j]);
		rc = store_blob_set_refs(v->t, fix[j], (uint32_t)fix[j + 1],
					 fstatat(v->t->e->blobdir_fd, path, &sb, 0) == 0
						 ? (uint64_t)sb.st_size
						 : 0);
		if (rc == 0 && fix[j + 1] != 0)
			rc = rebuild_cache(v, fix[j]);
		v->r->repaired += rc == 0;
	}
	for (size_t j = 0; v->repair && j < nnocache && rc == 0; j++)
		rc = rebuild_cache(v, nocache[j]);
	free(fix);
	free(nocache);
	return rc;
}

static bool is_referenced(struct vstate *v, uint64_t id)
{
	return v->nrefs > 0 && bsearch(&id, v->refs, v->nrefs, sizeof(*v->refs), cmp_u64) != NULL;
}

/* Files under blobs/ that nothing references. */
static void check_orphans(struct vstate *v)
{
	struct store_env *e = v->t->e;
	time_t now = time(NULL);

	for (unsigned d = 0; d < 256; d++) {
		char sub[4];
		struct dirent *de;
		DIR *dir;
		int fd;

		snprintf(sub, sizeof(sub), "%02x", d);
		if ((fd = openat(e->blobdir_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
			continue;
		if ((dir = fdopendir(fd)) == NULL) {
			close(fd);
			continue;
		}
		while ((de = readdir(dir)) != NULL) {
			struct stat sb;
			char *end;
			uint64_t id;

			if (de->d_name[0] == '.')
				continue;
			id = strtoull(de->d_name, &end, 16);
			if (*end == '\0' && strlen(de->d_name) == 16 && is_referenced(v, id))
				continue;
			if (fstatat(fd, de->d_name, &sb, 0) == -1)
				continue;
			if (sb.st_mtime > now - ORPHAN_AGE) {
				v->r->young_files++;
				continue;
			}
			v->r->orphan_files++;
			if (!v->repair || strlen(de->d_name) > 40)
				continue;
			v->orph = xreallocarray(v->orph, v->norph + 1, sizeof(*v->orph));
			snprintf(v->orph[v->norph].path, sizeof(v->orph->path), "%s/%s", sub,
				 de->d_name);
			v->orph[v->norph++].mtime = (int64_t)sb.st_mtime;
		}
		closedir(dir);
	}
}

/* Queue entries reference their blobs like messages do. */
static int queue_refs(struct vstate *v)
{
	MDB_cursor *c;
	MDB_val k, val;
	int rc, op = MDB_FIRST;

	if ((rc = mdb_cursor_open(v->t->txn, v->t->e->dbi[DBI_QUEUE], &c)) != 0)
		return store_mdb_err(v->t, rc, "cursor");
	while (mdb_cursor_get(c, &k, &val, op) == 0) {
		op = MDB_NEXT;
		v->r->queue++;
		if (val.mv_size >= 24)
			add_ref(v, get_be64((uint8_t *)val.mv_data + 16));
		else
			v->r->bad_records++;
	}
	mdb_cursor_close(c);
	return 0;
}

struct lf_append {
	const char *user;
	struct store_blob *b;
	int64_t date;
};

static int lf_append_fn(struct store_txn *t, void *arg)
{
	struct lf_append *a = arg;
	struct store_user u;
	uint64_t mbox;
	uint32_t uid;
	int rc;

	if ((rc = store_user_get(t, a->user, &u)) == STORE_ENOUSER)
		rc = store_user_create(t, a->user, &u.id);
	if (rc != 0)
		return rc;
	if ((rc = store_mbox_find(t, u.id, STORE_LOST_FOUND, &mbox)) == STORE_ENOMBOX)
		rc = store_mbox_create(t, u.id, STORE_LOST_FOUND, 0, &mbox);
	if (rc != 0)
		return rc;
	return store_msg_append(t, mbox, a->b, 0, 0, a->date, &uid);
}

/* Repair, after the partition's txn committed: each orphan becomes a message of
   lost_found's lost+found (a copy in that user's partition), then the file goes. */
static int move_orphans(struct store *st, struct store_env *e, const char *lost_found,
			const struct orphan *o, size_t n, struct store_verify_report *r)
{
	unsigned lp;
	int rc = 0;

	if (n == 0)
		return 0;
	if (store_user_locate(st, lost_found, &lp) != 0)
		lp = store_partition_for(st, lost_found);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct lf_append a = { .user = lost_found, .date = o[i].mtime };
		int fd = openat(e->blobdir_fd, o[i].path, O_RDONLY | O_CLOEXEC);

		if (fd == -1)
			continue; /* gone meanwhile */
		rc = store_blob_from_fd(st, lp, fd, &a.b);
		close(fd);
		if (rc == 0)
			rc = store_write(st, lp, lf_append_fn, &a);
		store_blob_free(&a.b);
		if (rc != 0) {
			log_warnx("store: %s/blobs/%s could not be moved to %s of %s: %s", e->dir,
				  o[i].path, STORE_LOST_FOUND, lost_found, store_strerror(rc));
			break;
		}
		log_info("store: orphan %s/blobs/%s moved to %s of %s", e->dir, o[i].path,
			 STORE_LOST_FOUND, lost_found);
		(void)unlinkat(e->blobdir_fd, o[i].path, 0);
		r->moved_lost_found++;
		r->repaired++;
	}
	return rc;
}

static bool acl_mbox_known(uint64_t mbox, void *arg)
{
	return find_mb(arg, mbox) != NULL;
}

static int verify_env(struct store *st, unsigned part, const char *user, bool repair,
		      const char *lost_found, struct store_verify_report *r)
{
	struct vstate v = { .r = r, .repair = repair };
	uint64_t *gone = NULL;
	size_t ngone = 0;
	int rc;

	if ((rc = store_txn_begin(st, part, repair ? STORE_TXN_WRITE : STORE_TXN_READ, &v.t)) != 0)
		return rc;
	if (user != NULL && part != STORE_QUEUE_PART) {
		struct store_user u;

		if (store_user_get(v.t, user, &u) != 0) {
			store_txn_abort(&v.t);
			return 0;
		}
		v.only_user = u.id;
	}
	if (part == STORE_QUEUE_PART)
		rc = queue_refs(&v);
	else {
		MDB_stat ms;

		mdb_stat(v.t->txn, v.t->e->dbi[DBI_USERS], &ms);
		r->users += user != NULL ? 1 : ms.ms_entries;
		if ((rc = load_mboxes(&v)) == 0 && (rc = count_msgs(&v, &gone, &ngone)) == 0 &&
		    repair)
			rc = drop_gone(&v, gone, ngone);
		if (rc == 0)
			rc = check_counters(&v);
		if (rc == 0 && user == NULL) /* rows name mailboxes, not users: all or none */
			/* rows naming no user of the store stay: a grant may name a directory
			   user who has not logged in yet (store_user_delete drops a user's) */
			rc = store_acl_check(v.t, acl_mbox_known, NULL, &v, repair, &r->bad_acl,
					     &r->repaired);
		if (rc == 0 && user == NULL) /* private \Seen rows (store_seen.c) */
			rc = store_seen_check(v.t, acl_mbox_known, &v, repair, &r->bad_seen,
					      &r->repaired);
	}
	if (rc == 0)
		rc = check_blobs(&v);
	if (rc == 0 && user == NULL)
		check_orphans(&v);
	if (rc == 0 && repair)
		rc = store_txn_commit(&v.t);
	store_txn_abort(&v.t);
	if (rc == 0 && repair)
		rc = move_orphans(st, store_env_of(st, part), lost_found, v.orph, v.norph, r);
	free(v.orph);
	free(gone);
	free(v.mb);
	free(v.us);
	free(v.refs);
	return rc;
}

int store_verify(struct store *st, const char *user, bool repair, struct store_verify_report *r)
{
	return store_verify_lost_found(st, user, repair, "postmaster", r);
}

int store_verify_lost_found(struct store *st, const char *user, bool repair,
			    const char *lost_found, struct store_verify_report *r)
{
	unsigned p;
	int rc;

	memset(r, 0, sizeof(*r));
	if (lost_found == NULL || *lost_found == '\0')
		return STORE_EINVAL;
	if (user != NULL) {
		if ((rc = store_user_locate(st, user, &p)) != 0)
			return rc;
		rc = verify_env(st, p, user, repair, lost_found, r);
	} else {
		rc = 0;
		for (p = 0; p < st->nparts && rc == 0; p++)
			rc = verify_env(st, p, NULL, repair, lost_found, r);
		if (rc == 0)
			rc = verify_env(st, STORE_QUEUE_PART, NULL, repair, lost_found, r);
	}
	if (rc != 0)
		return rc;
	uint64_t problems = r->bad_counters + r->bad_refcounts + r->missing_files +
			    r->orphan_files + r->bad_records + r->missing_cache + r->bad_cache +
			    r->bad_acl + r->bad_seen;
	return problems == 0 || (repair && r->repaired >= problems) ? 0 : STORE_ECORRUPT;
}

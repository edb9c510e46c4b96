/* mailctl_admin.c — owns the whole-store commands of mailctl: verify (with orphan
 * message files moved to a lost+found mailbox), backup and restore, stats.
 *
 * Layout relied on (store.h): <path>/partN/ and <path>/queue/, each with index.mdb and
 * blobs/xx/<16 hex>. A backup directory has the same layout plus a `heron-backup` manifest;
 * its indexes are compacted LMDB copies (store_copy_index), its message files copies
 * with their mtimes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

#define MANIFEST "heron-backup"

/* Referenced blob ids of one environment, sorted. */
struct refs {
	uint64_t *v;
	size_t n, cap;
	struct store_txn *t;
};

/* Called for each message file: dirfd of blobs/xx, its name, its id. */
typedef int blob_fn(void *arg, int dirfd, unsigned sub, const char *name, uint64_t id,
		    const struct stat *sb);

static void refs_add(struct refs *r, uint64_t id)
{
	if (r->n == r->cap)
		r->v = xreallocarray(r->v, r->cap = r->cap * 2 + 256, sizeof(*r->v));
	r->v[r->n++] = id;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool refs_has(const struct refs *r, uint64_t id)
{
	return r->n > 0 && bsearch(&id, r->v, r->n, sizeof(*r->v), u64_cmp) != NULL;
}

static int refs_mbox(const struct store_mbox_info *mi, void *arg)
{
	struct refs *r = arg;
	struct store_iter *it;
	struct store_msg m;
	int rc;

	if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT))
		return 0;
	if ((rc = store_msg_iter(r->t, mi->id, 1, UINT32_MAX, 0, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1)
		refs_add(r, m.blob);
	store_iter_free(&it);
	return rc;
}

static int refs_user(const struct store_user *u, void *arg)
{
	struct refs *r = arg;

	return store_mbox_list(r->t, u->id, "*", false, refs_mbox, r);
}

static int refs_queue(const struct store_queue_msg *qm, void *arg)
{
	refs_add(arg, qm->blob);
	return 0;
}

/* Every message file id the index of part (or the queue) references, in one snapshot. */
static int collect_refs(struct store *st, unsigned part, struct refs *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (part == STORE_QUEUE_PART)
		rc = store_queue_list(st, refs_queue, r);
	else if ((rc = store_txn_begin(st, part, STORE_TXN_READ, &r->t)) == 0) {
		rc = store_user_list(r->t, refs_user, r);
		store_txn_abort(&r->t);
	}
	/* a body kept in the index (format 3) is in the index's copy: no file to wait for */
	size_t k = 0;

	for (size_t i = 0; i < r->n; i++)
		if (!store_blob_inline(st, part, r->v[i]))
			r->v[k++] = r->v[i];
	r->n = k;
	if (r->n > 1)
		qsort(r->v, r->n, sizeof(*r->v), u64_cmp);
	return rc;
}

static void env_dir(char *buf, size_t size, const char *root, unsigned part)
{
	if (part == STORE_QUEUE_PART)
		snprintf(buf, size, "%s/queue", root);
	else
		snprintf(buf, size, "%s/part%u", root, part);
}

/* Calls fn for each final message file (16 hex digits) under <envdir>/blobs. */
static int walk_blobs(const char *envdir, blob_fn *fn, void *arg)
{
	char dir[4200];
	int rc = 0;

	for (unsigned d = 0; d < 256 && rc == 0; d++) {
		struct dirent *de;
		DIR *dh;

		snprintf(dir, sizeof(dir), "%s/blobs/%02x", envdir, d);
		if ((dh = opendir(dir)) == NULL)
			continue;
		while (rc == 0 && (de = readdir(dh)) != NULL) {
			struct stat sb;
			char *end;
			uint64_t id = strtoull(de->d_name, &end, 16);

			if (strlen(de->d_name) != 16 || *end != '\0' ||
			    fstatat(dirfd(dh), de->d_name, &sb, 0) == -1 || !S_ISREG(sb.st_mode))
				continue;
			rc = fn(arg, dirfd(dh), d, de->d_name, id, &sb);
		}
		closedir(dh);
	}
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* verify: the store's repair moves orphan files to a user's lost+found
   (store_verify_lost_found), so mailctl and libstore follow one rule */

static uint64_t problems(const struct store_verify_report *r)
{
	return r->bad_counters + r->bad_refcounts + r->missing_files + r->orphan_files +
	       r->bad_records + r->missing_cache + r->bad_cache + r->bad_acl + r->bad_seen;
}

static void verify_print(struct mc *mc, const struct store_verify_report *r, uint64_t repaired,
			 uint64_t moved, uint64_t remaining, const char *status)
{
	static const char *const cols[] = { "status",
					    "users",
					    "mailboxes",
					    "messages",
					    "blobs",
					    "queue",
					    "bad_counters",
					    "bad_refcounts",
					    "missing_files",
					    "orphan_files",
					    "young_files",
					    "bad_records",
					    "missing_cache",
					    "bad_cache",
					    "bad_acl",
					    "bad_seen",
					    "repaired",
					    "moved_to_lost_found",
					    "remaining_problems",
					    NULL };
	struct mc_table *tab = mc_table_new(cols);
	const uint64_t v[] = {
		r->users,        r->mailboxes,    r->messages,      r->blobs,
		r->queue,        r->bad_counters, r->bad_refcounts, r->missing_files,
		r->orphan_files, r->young_files,  r->bad_records,   r->missing_cache,
		r->bad_cache,    r->bad_acl,      r->bad_seen,      repaired,
		moved,           remaining
	};

	mc_table_row(tab);
	mc_cell_str(tab, status);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		mc_cell_u64(tab, v[i]);
	mc_table_print_record(mc, &tab);
}

static int w_tomb_expire(struct store_txn *t, void *arg)
{
	uint64_t n = 0;
	int rc = store_tomb_expire(t, (int64_t)time(NULL), &n);

	*(uint64_t *)arg += n;
	return rc;
}

int mc_verify(struct mc *mc, const struct mc_args *a)
{
	const char *user = a->npos ? a->pos[0] : NULL;
	struct store_verify_report before, fix, after;
	uint64_t tombs = 0;
	int rc;

	/* --repair of the whole store: the expired tombstones of users moved away go (they
	   hold nothing any more; counted as repaired, not as problems) */
	for (unsigned p = 0; a->set[0] && user == NULL && p < store_partitions(mc->st); p++)
		if ((rc = store_write(mc->st, p, w_tomb_expire, &tombs)) != 0)
			return mc_fail(mc, rc, "the expired tombstones of partition %u", p);
	if ((rc = store_verify(mc->st, user, false, &before)) != 0 && rc != STORE_ECORRUPT)
		return mc_fail(mc, rc, "verify%s%s", user ? " of " : "", user ? user : "");
	if (rc == 0 || !a->set[0]) {
		verify_print(mc, &before, tombs, 0, problems(&before),
			     rc == 0 ? "clean" : "problems");
		if (rc != 0)
			fprintf(stderr,
				"mailctl: the store has %" PRIu64 " problem%s; run `mailctl "
				"verify --repair`\n",
				problems(&before), problems(&before) == 1 ? "" : "s");
		return rc == 0 ? MC_OK : MC_REFUSED;
	}
	if ((rc = store_verify_lost_found(mc->st, user, true, a->set[1] ? a->val[1] : "postmaster",
					  &fix)) != 0 &&
	    rc != STORE_ECORRUPT)
		return mc_fail(mc, rc, "repair (orphan message files go to %s)", STORE_LOST_FOUND);
	if ((rc = store_verify(mc->st, user, false, &after)) != 0 && rc != STORE_ECORRUPT)
		return mc_fail(mc, rc, "verify after the repair");
	verify_print(mc, &before, fix.repaired + tombs, fix.moved_lost_found, problems(&after),
		     problems(&after) == 0 ? "repaired" : "problems");
	if (problems(&after) != 0) {
		fprintf(stderr,
			"mailctl: %" PRIu64 " problems remain after the repair; see the log "
			"lines above\n",
			problems(&after));
		return MC_REFUSED;
	}
	return MC_OK;
}

/* ------------------------------------------------------------------------------------- */
/* backup and restore */

/* Copies src (relative to sdir) to dst (relative to ddir) keeping its mtime. 0 or errno. */
/* Copies src (in sdir) to the new file dst (in ddir) with its times; *at_dst (may be NULL)
   says whether an error was on the destination's side. */
static int copy_file(int sdir, const char *src, int ddir, const char *dst, bool *at_dst)
{
	char buf[65536];
	struct stat sb;
	ssize_t n = 0;
	int in, out, err = 0;
	bool ignored;

	at_dst = at_dst != NULL ? at_dst : &ignored;
	*at_dst = false;
	if ((in = openat(sdir, src, O_RDONLY | O_CLOEXEC)) == -1)
		return errno;
	if (fstat(in, &sb) == -1 ||
	    (out = openat(ddir, dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640)) == -1) {
		err = errno;
		*at_dst = true;
		close(in);
		return err;
	}
	while (err == 0 && ((n = read(in, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)))
		for (ssize_t off = 0; n > 0 && off < n && err == 0;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));

			err = w < 0 && errno != EINTR ? errno : 0;
			*at_dst = err != 0;
			off += w > 0 ? w : 0;
		}
	if (n < 0 && err == 0)
		err = errno;
	struct timespec ts[2] = { sb.st_atim, sb.st_mtim };
	if (err == 0 && futimens(out, ts) == -1) {
		err = errno;
		*at_dst = true;
	}
	if (close(out) == -1 && err == 0) {
		err = errno;
		*at_dst = true;
	}
	close(in);
	return err;
}

struct copy {
	char dst[4200];          /* <dest env dir>/blobs */
	const char *src;         /* restore: <source env dir>, for where */
	const struct refs *only; /* copy only these ids (NULL: every file) */
	uint64_t files, bytes, vanished;
	int err;
	char where[8400]; /* restore: what failed ("reading PATH", "creating PATH") */
};

static int copy_blob(void *arg, int dirfd, unsigned sub, const char *name, uint64_t id,
		     const struct stat *sb)
{
	struct copy *c = arg;
	char rel[64];
	int ddir, err;
	bool at_dst;

	if (c->only != NULL && !refs_has(c->only, id))
		return 0;
	snprintf(rel, sizeof(rel), "%02x/%s", sub, name);
	if ((ddir = open(c->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return c->err = errno;
	if (c->only != NULL && faccessat(ddir, rel, F_OK, 0) == 0) {
		close(ddir);
		return 0;
	}
	err = copy_file(dirfd, name, ddir, rel, &at_dst);
	close(ddir);
	if (err == EEXIST)
		err = 0;
	if (err != 0 && c->src != NULL)
		snprintf(c->where, sizeof(c->where),
			 at_dst ? "writing %s/%s" : "reading %s/blobs/%s",
			 at_dst ? c->dst : c->src, rel);
	c->files += err == 0;
	c->bytes += err == 0 ? (uint64_t)sb->st_size : 0;
	return c->err = err;
}

static int make_env_dirs(const char *envdir)
{
	char p[4200];

	if (mkdir(envdir, 0750) == -1)
		return errno;
	snprintf(p, sizeof(p), "%s/blobs", envdir);
	if (mkdir(p, 0750) == -1)
		return errno;
	for (unsigned d = 0; d < 256; d++) {
		snprintf(p, sizeof(p), "%s/blobs/%02x", envdir, d);
		if (mkdir(p, 0750) == -1)
			return errno;
	}
	return 0;
}

/* Copies the message files of one environment (c->only: just those, when missing). */
static int backup_files(struct mc *mc, const char *dest, unsigned part, struct copy *c,
			const struct refs *only)
{
	char src[4096], dst[4096];

	env_dir(src, sizeof(src), conf_values(mc->conf)->store.path, part);
	env_dir(dst, sizeof(dst), dest, part);
	if (only == NULL && (c->err = make_env_dirs(dst)) != 0)
		return STORE_EIO;
	snprintf(c->dst, sizeof(c->dst), "%s/blobs", dst);
	c->only = only;
	if (walk_blobs(src, copy_blob, c) != 0)
		return STORE_EIO;
	for (size_t i = 0; only != NULL && i < only->n; i++) {
		char rel[4300];

		snprintf(rel, sizeof(rel), "%s/%02x/%016" PRIx64, c->dst,
			 (unsigned)(only->v[i] >> 56), only->v[i]);
		c->vanished += access(rel, F_OK) == -1;
	}
	return 0;
}

/* Files first, then each index snapshot, then the files the snapshots reference that
   appeared meanwhile: every message of the copied indexes has its file. */
static int backup_all(struct mc *mc, const char *dest, struct copy *c)
{
	unsigned n = store_partitions(mc->st);
	struct store *bst = NULL;
	struct store_opts o;
	char idx[4200];
	int rc = 0;

	for (unsigned p = 0; p <= n && rc == 0; p++)
		rc = backup_files(mc, dest, p == n ? STORE_QUEUE_PART : p, c, NULL);
	for (unsigned p = 0; p <= n && rc == 0; p++) {
		unsigned part = p == n ? STORE_QUEUE_PART : p;

		env_dir(idx, sizeof(idx) - 16, dest, part);
		strcat(idx, "/index.mdb");
		rc = store_copy_index(mc->st, part, idx);
	}
	store_opts_from_conf(mc->conf, &o);
	o.path = dest;
	o.create = false;
	if (rc == 0)
		rc = store_open(&o, &bst);
	for (unsigned p = 0; p <= n && rc == 0; p++) {
		unsigned part = p == n ? STORE_QUEUE_PART : p;
		struct refs r;

		if ((rc = collect_refs(bst, part, &r)) == 0)
			rc = backup_files(mc, dest, part, c, &r);
		free(r.v);
	}
	store_close(&bst);
	return rc;
}

static int write_manifest(struct mc *mc, const char *dest)
{
	char p[4200];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dest, MANIFEST);
	if ((f = fopen(p, "wx")) == NULL)
		return errno;
	fprintf(f, "heron-backup 1\npartitions %u\ncreated %lld\nsource %s\n",
		store_partitions(mc->st), (long long)time(NULL),
		conf_values(mc->conf)->store.path);
	return fclose(f) == 0 ? 0 : errno;
}

int mc_backup(struct mc *mc, const struct mc_args *a)
{
	const char *dest = a->pos[0];
	unsigned n = store_partitions(mc->st);
	struct copy *c = xcalloc(1, sizeof(*c));
	int rc = 0, fd;

	if (mkdir(dest, 0750) == -1) {
		int err = errno;

		free(c);
		return mc_refuse(mc, err == EEXIST ? MC_REFUSED : MC_CANTCREAT,
				 "give a directory that does not exist yet", "%s: %s", dest,
				 strerror(err));
	}
	rc = backup_all(mc, dest, c);
	if (rc == 0 && c->vanished > 0) {
		rc = mc_refuse(mc, MC_REFUSED, "remove the directory and run the backup again",
			       "%" PRIu64 " message files were removed while the backup of %s "
			       "ran (expunged meanwhile)",
			       c->vanished, dest);
		free(c);
		return rc;
	}
	if (rc == 0 && (c->err = write_manifest(mc, dest)) != 0)
		rc = STORE_EIO;
	if (rc == 0 && (fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		if (syncfs(fd) == -1)
			rc = STORE_EIO;
		close(fd);
	}
	if (rc != 0) {
		if (c->err != 0)
			fprintf(stderr, "mailctl: backup into %s: %s\n", dest, strerror(c->err));
		free(c);
		return mc_fail(mc, rc, "backup into %s is incomplete; remove it and retry", dest);
	}
	if (mc->json) {
		printf("{\"backup\": ");
		mc_json_str(stdout, dest, strlen(dest));
		printf(", \"partitions\": %u, \"files\": %" PRIu64 ", \"bytes\": %" PRIu64 "}\n",
		       n, c->files, c->bytes);
	} else
		printf("backup of %u partitions and the queue in %s: %" PRIu64
		       " message files, %" PRIu64 " bytes\n",
		       n, dest, c->files, c->bytes);
	free(c);
	return MC_OK;
}

static int read_manifest(const char *dir, unsigned *parts_r)
{
	char p[4200], line[4200];
	FILE *f;
	bool magic = false;

	*parts_r = 0;
	snprintf(p, sizeof(p), "%s/%s", dir, MANIFEST);
	if ((f = fopen(p, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		magic |= strcmp(line, "heron-backup 1\n") == 0;
		if (strncmp(line, "partitions ", 11) == 0)
			*parts_r = (unsigned)strtoul(line + 11, NULL, 10);
	}
	fclose(f);
	return magic && *parts_r > 0 ? 0 : -1;
}

/* Copies one environment of a backup: its index and every message file. */
static int restore_env(const char *from, const char *to, unsigned part, struct copy *c)
{
	char src[4096], dst[4096];
	int sfd, dfd, err;
	bool at_dst;

	env_dir(src, sizeof(src), from, part);
	env_dir(dst, sizeof(dst), to, part);
	if ((err = make_env_dirs(dst)) != 0) {
		snprintf(c->where, sizeof(c->where), "creating %s", dst);
		return err;
	}
	if ((sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		snprintf(c->where, sizeof(c->where), "reading %s", src);
		return errno;
	}
	if ((dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		err = errno;
		snprintf(c->where, sizeof(c->where), "opening %s", dst);
		close(sfd);
		return err;
	}
	if ((err = copy_file(sfd, "index.mdb", dfd, "index.mdb", &at_dst)) != 0)
		snprintf(c->where, sizeof(c->where), "%s %s/index.mdb",
			 at_dst ? "writing" : "reading", at_dst ? dst : src);
	close(sfd);
	close(dfd);
	snprintf(c->dst, sizeof(c->dst), "%s/blobs", dst);
	c->only = NULL;
	c->src = src;
	if (err == 0 && walk_blobs(src, copy_blob, c) != 0) {
		err = c->err ? c->err : EIO;
		if (c->where[0] == '\0')
			snprintf(c->where, sizeof(c->where), "reading %s/blobs", src);
	}
	c->src = NULL;
	return err;
}

static int restore_into(struct mc *mc, const char *from, const char *tmp, unsigned parts,
			struct copy *c)
{
	int err, fd;

	if (mkdir(tmp, 0750) == -1) {
		snprintf(c->where, sizeof(c->where), "creating %s", tmp);
		return errno;
	}
	err = restore_env(from, tmp, STORE_QUEUE_PART, c);
	for (unsigned p = 0; p < parts && err == 0; p++)
		err = restore_env(from, tmp, p, c);
	if (err == 0 && (fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		if ((err = syncfs(fd) == -1 ? errno : 0) != 0)
			snprintf(c->where, sizeof(c->where), "syncing %s", tmp);
		close(fd);
	}
	(void)mc;
	return err;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) == -1 ? errno : 0;
}

/* What stands in the way of making the new store beside path: its nearest ancestor that
   exists, said of err (a file where a directory must be, a read-only filesystem, no
   space, no write permission), into out; empty when nothing more is known. */
static void restore_why(const char *path, int err, char *out, size_t size)
{
	char dir[4200];
	struct stat sb;
	char *slash;

	out[0] = '\0';
	snprintf(dir, sizeof(dir), "%s", path);
	while ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (stat(dir, &sb) == 0)
			break;
	}
	if (slash == dir)
		strcpy(dir, "/");
	if (stat(dir, &sb) != 0)
		return;
	if (!S_ISDIR(sb.st_mode))
		snprintf(out, size, "%s is not a directory", dir);
	else if (err == EROFS)
		snprintf(out, size, "%s is on a read-only filesystem", dir);
	else if (err == ENOSPC || err == EDQUOT)
		snprintf(out, size, "free space on the filesystem of %s and run it again", dir);
	else if (err == EACCES || err == EPERM)
		snprintf(out, size, "%s cannot be written by this user", dir);
	else if (err == ENOENT)
		snprintf(out, size, "make the directories below %s first", dir);
}

/* A failed restore changes nothing: the store set aside is put back, the partial copy
   removed. The refusal names what failed (a real path: the backup's file that could not be
   read, or the one of ours that could not be written, saying when it was in the partial
   copy, now removed), what stands in the way, and where things are now; the exit code says
   which side failed (mailctl(8)). */
static int restore_failed(struct mc *mc, const char *path, const char *tmp, const char *aside,
			  const char *where, int err)
{
	bool reading = strncmp(where, "reading ", 8) == 0, kept, in_tmp;
	char hint[9000], why[4400];
	size_t tl = strlen(tmp);
	int code, n;

	if (aside != NULL && access(path, F_OK) != 0 && access(aside, F_OK) == 0)
		(void)rename(aside, path); /* the new copy did not go in: the old store back */
	kept = access(tmp, F_OK) == 0 && nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0;
	in_tmp = !reading && strstr(where, tmp) != NULL && strstr(where, tmp)[tl] == '/';
	if (!reading)
		restore_why(path, err, why, sizeof(why));
	else
		why[0] = '\0';
	if (aside != NULL && access(aside, F_OK) == 0)
		n = snprintf(hint, sizeof(hint), "the previous store is in %s", aside);
	else if (access(path, F_OK) == 0)
		n = snprintf(hint, sizeof(hint), "the store at %s is unchanged", path);
	else
		n = snprintf(hint, sizeof(hint), "no store was made at %s", path);
	if (kept && n > 0 && (size_t)n < sizeof(hint))
		n += snprintf(hint + n, sizeof(hint) - (size_t)n, "; remove the partial copy %s",
			      tmp);
	else if (in_tmp && n > 0 && (size_t)n < sizeof(hint))
		n += snprintf(hint + n, sizeof(hint) - (size_t)n,
			      " (the partial copy %s is removed)", tmp);
	if (why[0] != '\0' && n > 0 && (size_t)n < sizeof(hint))
		snprintf(hint + n, sizeof(hint) - (size_t)n, "; %s", why);
	if (reading)
		code = err == ENOENT ? MC_DATAERR : MC_IOERR; /* a backup with a file missing */
	else if (err == ENOSPC || err == EDQUOT)
		code = MC_TEMPFAIL;
	else
		code = strncmp(where, "creating ", 9) == 0 ? MC_CANTCREAT : MC_IOERR;
	return mc_refuse(mc, code, hint, "restore: %s: %s", where, strerror(err));
}

int mc_restore(struct mc *mc, const struct mc_args *a)
{
	const struct store_conf *sc = &conf_values(mc->conf)->store;
	const char *path = sc->path;
	unsigned parts, want = (unsigned)sc->partitions;
	struct copy *c;
	char *tmp, *aside = NULL, *real = realpath(a->pos[0], NULL), *from;
	int err, rerr = real == NULL ? errno : 0;

	from = real != NULL ? real : xstrdup(a->pos[0]); /* errors name absolute paths */
	if (real == NULL) {
		err = mc_refuse(mc, MC_NOINPUT, "give the directory `mailctl backup` made",
				"%s: %s", from, strerror(rerr));
	} else if (read_manifest(from, &parts) < 0) {
		err = mc_refuse(mc, MC_DATAERR, "give the directory `mailctl backup` made",
				"%s is not a Heron backup (no %s manifest)", from, MANIFEST);
	} else if (parts != want) {
		err = mc_refuse(mc, MC_REFUSED,
				"set [store] partitions to the backup's to restore it",
				"the backup has %u partitions, %s says %u", parts, mc->conf_path,
				want);
	} else if (access(path, F_OK) == 0 && !a->set[0]) {
		err = mc_refuse(mc, MC_REFUSED,
				"stop the daemons and add --force to set it aside and restore",
				"a store exists at %s", path);
	} else
		err = MC_OK;
	if (err != MC_OK) {
		free(from);
		return err;
	}
	c = xcalloc(1, sizeof(*c));
	tmp = xasprintf("%s.restore-%ld", path, (long)getpid());
	err = restore_into(mc, from, tmp, parts, c);
	if (err == 0 && access(path, F_OK) == 0) {
		aside = xasprintf("%s.replaced-%lld", path, (long long)time(NULL));
		if ((err = rename(path, aside) == -1 ? errno : 0) != 0)
			snprintf(c->where, sizeof(c->where), "moving %s to %s", path, aside);
	}
	if (err == 0 && rename(tmp, path) == -1) {
		err = errno;
		snprintf(c->where, sizeof(c->where), "moving %s to %s", tmp, path);
	}
	if (err != 0)
		err = restore_failed(mc, path, tmp, aside, c->where, err);
	else if (mc->json) {
		printf("{\"restored\": ");
		mc_json_str(stdout, path, strlen(path));
		printf(", \"files\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"replaced\": ",
		       c->files, c->bytes);
		if (aside)
			mc_json_str(stdout, aside, strlen(aside));
		else
			fputs("null", stdout);
		puts("}");
	} else
		printf("restored %s from %s: %" PRIu64 " message files%s%s\n", path, from,
		       c->files, aside ? "; the previous store is in " : "", aside ? aside : "");
	free(aside);
	free(tmp);
	free(c);
	free(from);
	return err; /* MC_OK or restore_failed's exit code */
}

/* ------------------------------------------------------------------------------------- */
/* stats */

/* One row: scope "partition" with its number, or "queue" / "total" (partition null). */
static void stats_row(struct mc_table *tab, const char *scope, int part,
		      const struct store_stats *s)
{
	mc_table_row(tab);
	mc_cell_str(tab, scope);
	if (part >= 0)
		mc_cell_u64(tab, (uint64_t)part);
	else
		mc_cell_null(tab);
	mc_cell_u64(tab, s->users);
	mc_cell_u64(tab, s->mailboxes);
	mc_cell_u64(tab, s->messages);
	mc_cell_u64(tab, s->bytes);
	mc_cell_u64(tab, s->map_used);
	mc_cell_u64(tab, s->map_size);
}

int mc_stats(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "scope",     "partition", "users",
					    "mailboxes", "messages",  "bytes",
					    "map_used",  "map_size",  NULL };
	struct mc_table *tab;
	struct store_stats s, total = { 0 };
	unsigned n;
	int rc = 0;

	if (a->set[0]) /* --live: the daemons' counters (mailctl_live.c) */
		return mc_live(mc, a, 1, 2, 3);
	if (a->set[1] || a->set[2] || a->set[3])
		return mc_usage(mc, "--interval, --count and --daemon go with --live");
	tab = mc_table_new(cols);
	n = store_partitions(mc->st);
	for (unsigned p = 0; p <= n && rc == 0; p++) {
		if ((rc = store_stats(mc->st, p == n ? STORE_QUEUE_PART : p, &s)) != 0)
			break;
		stats_row(tab, p == n ? "queue" : "partition", p == n ? -1 : (int)p, &s);
		if (p == n)
			continue;
		total.users += s.users;
		total.mailboxes += s.mailboxes;
		total.messages += s.messages;
		total.bytes += s.bytes;
		total.map_used += s.map_used;
		total.map_size += s.map_size;
	}
	if (rc != 0) {
		mc_table_free(&tab);
		return mc_fail(mc, rc, "statistics");
	}
	stats_row(tab, "total", -1, &total);
	mc_table_print(mc, &tab);
	return MC_OK;
}

int mc_upgrade(struct mc *mc, const struct mc_args *a)
{
	(void)a;
	/* open_store ran the steps (each logged); the store is at this format now */
	if (mc->json) {
		printf("{\"format\": %u, \"writer\": ", store_format());
		mc_json_str(stdout, store_writer_id(), strlen(store_writer_id()));
		printf("}\n");
	} else
		printf("store at format %u (%s)\n", store_format(), store_writer_id());
	return MC_OK;
}

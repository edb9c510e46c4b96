/* init_maildir.c — owns `mailload init --maildir ROOT`, the fast path of mailbox initialization
 * for servers that read Maildir++: the same folders, subscriptions,
 * messages and \Seen flags as the protocol init (ml_init_render, ml_user_folders), written as
 * Maildir (maildir(5)) with the Maildir++ folders and size, nothing of one server's own:
 *   ROOT/userN/Maildir/{cur,new,tmp}            INBOX
 *   ROOT/userN/Maildir/.A.B/{cur,new,tmp}       folder "A/B", with an empty `maildirfolder`
 *   ROOT/userN/Maildir/courierimapsubscribed    the subscribed folders, one a line: INBOX,
 *                                               INBOX.A.B (Courier-IMAP's Maildir++ file)
 * Messages have LF line ends and are named `<unique>,S=<size>` (Maildir++: the file's size),
 * in new/ when unseen, in cur/ with the `:2,S` info when \Seen; the file time is the message's
 * INTERNALDATE. A server makes its own indexes and UID lists on first access (one that keeps
 * subscriptions in a file of its own makes it from this one: bench/peers does).
 * Everything gets the owner and group of ROOT, directories 0700, files 0600. A user is built
 * under ROOT/.userN.tmp and renamed into place, so a rerun skips the users already there and
 * completes one it was interrupted in. Jobs are forked processes taking users round robin. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "mailload/init.h"

#define MD_PATH 512

struct md_job {
	const struct ml_cfg *c;
	const char *root;
	uid_t uid;
	gid_t gid;
	bool chown;
	struct ml_msg msg;
	struct buf text;
	struct ml_init_stats *stats;
};

static int md_fail(const char *what, const char *path)
{
	log_warnx("init: %s %s: %s", what, path, strerror(errno));
	return -1;
}

static int md_mkdir(const struct md_job *j, const char *path)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return md_fail("mkdir", path);
	if (j->chown && chown(path, j->uid, j->gid) < 0)
		return md_fail("chown", path);
	return 0;
}

/* Writes n bytes to a new file path (replacing a leftover), owned like ROOT, dated mtime_s
   when it is >= 0. */
static int md_write(const struct md_job *j, const char *path, const char *p, size_t n,
		    int64_t mtime_s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int rc = 0;

	if (fd < 0)
		return md_fail("open", path);
	while (rc == 0 && n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = md_fail("write", path);
		else {
			p += w;
			n -= (size_t)w;
		}
	}
	if (rc == 0 && j->chown && fchown(fd, j->uid, j->gid) < 0)
		rc = md_fail("chown", path);
	if (rc == 0 && mtime_s >= 0) {
		struct timespec ts[2] = { { .tv_sec = mtime_s }, { .tv_sec = mtime_s } };
		if (futimens(fd, ts) < 0)
			rc = md_fail("futimens", path);
	}
	if (close(fd) < 0 && rc == 0)
		rc = md_fail("close", path);
	return rc;
}

/* The Maildir++ directory of folder name under maildir ("INBOX" is maildir itself). */
static int md_folder_dir(const char *maildir, const char *name, char *out, size_t cap)
{
	size_t n;

	if (strcmp(name, "INBOX") == 0)
		n = (size_t)snprintf(out, cap, "%s", maildir);
	else if (strchr(name, '.') != NULL)
		return -1; /* '.' is Maildir++'s separator on disk: no such names are generated */
	else {
		n = (size_t)snprintf(out, cap, "%s/.%s", maildir, name);
		for (char *p = out + strlen(maildir) + 2; *p != '\0'; p++)
			if (*p == '/')
				*p = '.';
	}
	return n < cap ? 0 : -1;
}

/* CRLF -> LF in place (Maildir stores LF line ends); returns the new length. */
static size_t md_to_lf(char *p, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++)
		if (!(p[i] == '\r' && i + 1 < n && p[i + 1] == '\n'))
			p[o++] = p[i];
	return o;
}

static int md_messages(struct md_job *j, uint32_t user, uint32_t fi, uint32_t nmsgs,
		       const char *dir)
{
	char path[MD_PATH + 128];

	for (uint32_t idx = 0; idx < nmsgs; idx++) {
		int64_t date_ms = ml_init_render(j->c, user, fi, idx, &j->msg, &j->text);
		size_t lf = md_to_lf(j->text.data, j->text.len);
		bool seen = ml_init_seen(fi, idx);
		/* unique part: a time rising with idx (the order readers give UIDs in), then who */
		int64_t t = 1735689600LL + idx;

		snprintf(path, sizeof(path), "%s/%s/%" PRId64 ".M%uP%uF%u.mailload,S=%zu%s", dir,
			 seen ? "cur" : "new", t, idx, user, fi, lf, seen ? ":2,S" : "");
		if (md_write(j, path, j->text.data, lf, date_ms / 1000) < 0)
			return -1;
		j->stats->msgs++;
		j->stats->bytes += lf;
	}
	return 0;
}

static int md_user(struct md_job *j, uint32_t user)
{
	char final[MD_PATH], tmp[MD_PATH], maildir[MD_PATH], dir[MD_PATH], sub[MD_PATH + 32];
	struct ml_folders f;
	struct buf subs;
	struct stat st;
	int rc = 0;

	if ((size_t)snprintf(final, sizeof(final), "%s/user%u", j->root, user) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.user%u.tmp", j->root, user) >= sizeof(tmp) ||
	    (size_t)snprintf(maildir, sizeof(maildir), "%s/Maildir", tmp) >= sizeof(maildir)) {
		log_warnx("init: %s: path too long", j->root);
		return -1;
	}
	if (lstat(final, &st) == 0) {
		j->stats->skipped++;
		return 0;
	}
	j->stats->users++;
	ml_user_folders(j->c, user, &f);
	if (md_mkdir(j, tmp) < 0 || md_mkdir(j, maildir) < 0)
		return -1;
	buf_init(&subs, 256, ML_TEXT_MAX);
	for (uint32_t fi = 0; rc == 0 && fi < f.n; fi++) {
		static const char *const parts[] = { "cur", "new", "tmp" };

		if (md_folder_dir(maildir, f.name[fi], dir, sizeof(dir)) < 0) {
			log_warnx("init: user%u: folder %s has no Maildir++ name", user,
				  f.name[fi]);
			rc = -1;
			break;
		}
		rc = md_mkdir(j, dir);
		for (size_t k = 0; rc == 0 && k < sizeof(parts) / sizeof(parts[0]); k++) {
			snprintf(sub, sizeof(sub), "%s/%s", dir, parts[k]);
			rc = md_mkdir(j, sub);
		}
		if (rc == 0 && fi > 0) {
			snprintf(sub, sizeof(sub), "%s/maildirfolder", dir);
			rc = md_write(j, sub, "", 0, -1);
		}
		if (rc == 0)
			rc = md_messages(j, user, fi, f.msgs[fi], dir);
		if (f.subscribed[fi]) {
			buf_puts(&subs, "INBOX");
			if (fi > 0) {
				buf_putc(&subs, '.');
				for (const char *p = f.name[fi]; *p != '\0'; p++)
					buf_putc(&subs, *p == '/' ? '.' : *p);
			}
			buf_putc(&subs, '\n');
		}
	}
	if (rc == 0) {
		snprintf(sub, sizeof(sub), "%s/courierimapsubscribed", maildir);
		rc = md_write(j, sub, subs.data, subs.len, -1);
	}
	buf_release(&subs);
	if (rc == 0 && rename(tmp, final) < 0)
		rc = md_fail("rename", tmp);
	return rc;
}

static int md_job_main(const struct ml_cfg *c, void *arg, unsigned k, unsigned jobs,
		       struct ml_init_stats *stats)
{
	struct md_job j = *(const struct md_job *)arg;
	int fd;

	j.stats = stats;
	ml_msggen_init();
	ml_msg_init(&j.msg);
	buf_init(&j.text, 1 << 16, ML_INIT_MSG_MAX);
	for (uint64_t user = 1 + k; user <= c->users; user += jobs) {
		if (md_user(&j, (uint32_t)user) < 0) {
			stats->errors++;
			break;
		}
	}
	/* written without fsync, made durable once at the end */
	if ((fd = open(j.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (syncfs(fd) < 0)
			log_warnx("init: syncfs %s: %s", j.root, strerror(errno));
		close(fd);
	}
	ml_msg_release(&j.msg);
	buf_release(&j.text);
	return stats->errors ? 1 : 0;
}

int init_maildir_run(const struct ml_cfg *c, const char *root, unsigned jobs, bool quiet)
{
	struct md_job j = { .c = c, .root = root };
	char where[MD_PATH + 64];
	struct stat st;

	if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "mailload init: --maildir %s: not a directory\n", root);
		return -1;
	}
	j.uid = st.st_uid;
	j.gid = st.st_gid;
	j.chown = st.st_uid != geteuid() || st.st_gid != getegid();
	snprintf(where, sizeof(where), "Maildirs under %s", root);
	return ml_init_jobs(c, jobs, quiet, where, md_job_main, &j);
}

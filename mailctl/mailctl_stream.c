/* mailctl_stream.c — owns the heron-move stream of `mailctl user move --via CMD`: the
 * source's sender (a user's export, mailbox by mailbox, into CMD's stdin), `mailctl user
 * receive USER` that reads it on the target, and `mailctl user digest USER`, the target's
 * answer to "what do you hold", with the reader of that answer on the source.
 *
 * The stream is text lines ending in LF with file bytes inline (docs/mailctl.8):
 *
 *   heron-move 1                      the first line
 *   user NAME                         the user (receive's USER); created when missing
 *                                     (at the first import)
 *   reset                             the target's copy of the user dropped first (as
 *                                     drop does)
 *   drop                              the target's copy dropped (only done follows),
 *                                     the tombstone its create cleared put back
 *   kept                              the move is done (--finish): the copy stays, the
 *                                     tombstone remembered for drop is forgotten (only
 *                                     done follows)
 *   delete NAME                       a mailbox the source does not hold: deleted
 *   mailbox SUB SPECIAL NAME          a mailbox's export (the Maildir `mailctl export`
 *                                     writes: UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, UIDs,
 *                                     MODSEQs, expunge history, flags, keywords,
 *                                     annotations) follows as file lines up to end; then
 *                                     it is made anew, imported, subscribed (SUB 0|1) and
 *                                     given the special-use attributes SPECIAL (hex)
 *   userdata QUOTA_BYTES QUOTA_MSGS   the export's files of the whole user (subscriptions,
 *                                     server annotations, ...) and its Sieve scripts up to
 *                                     end; then imported, the quota set
 *   file PATH SIZE MTIME              SIZE bytes follow, then a LF (PATH: NAME, cur/NAME,
 *                                     new/NAME; MTIME: Unix seconds, the internal date)
 *   sieve ACTIVE SRCLEN PROGLEN NAME  SRCLEN bytes of source and PROGLEN of compiled
 *                                     program follow (as stored), then a LF
 *   end                               the mailbox or userdata is complete
 *   done                              the last line
 *
 * A mailbox is staged in <[store] path>.recv-USER and imported only after its end line, so
 * a stream cut short never leaves a partial mailbox; a receiver killed inside an import
 * leaves one, which its digest shows as different and the next stream makes anew. The
 * tombstone the create clears (a move back) is kept in <[store] path>.recv-USER.tomb,
 * written before the create; drop and reset put it back as they delete the copy, kept (the
 * source's --finish: the move can no longer be undone) removes the file. Every
 * reader has a limit (a line, a file, files per mailbox, mailboxes, scripts); input past
 * one, or that does not parse, is refused with exit 65 and what was completed kept.
 *
 * The digest (`user digest USER`): "heron-digest 1", "user absent" or "user present", then
 * "mailbox HEX NAME" for each mailbox and "rest HEX" (mc_fingerprint's SHA-256 of each
 * part), with --at T "memories HEX" (of the Sieve memories not expired at T, the source's
 * instant), "count MAILBOXES MESSAGES", "end". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"
#include "store/store_sieve.h"

#define LINE_MAX_ 8192                         /* a line of the stream or digest, LF included */
#define FILE_MAX ((uint64_t)2 << 30)           /* a file of a mailbox's export */
#define FILES_MAX 1000000                      /* files of one mailbox */
#define BOXES_MAX 100000                       /* mailboxes of one user (digest lines too) */
#define SCRIPT_MAX ((uint64_t)16 << 20)        /* a Sieve script's source or program */
#define SCRIPTS_MAX 1000                       /* Sieve scripts of one user */
#define SCRIPTS_BYTES_MAX ((uint64_t)64 << 20) /* all of a user's scripts, held in memory */
#define COPY_BUF 65536

/* A mailbox's own files at the top of its Maildir (the rest of an export's top is the
   whole user's). */
static const char *const box_files[] = { "dovecot-uidlist", "dovecot-keywords", "heron-metadata",
					 "heron-expunged" };

static bool is_box_file(const char *name)
{
	for (size_t i = 0; i < sizeof(box_files) / sizeof(*box_files); i++)
		if (strcmp(name, box_files[i]) == 0)
			return true;
	return false;
}

/* ---- the digest ---- */

int mc_user_digest(struct mc *mc, const struct mc_args *a)
{
	struct mc_digest *v = NULL;
	uint64_t boxes = 0, msgs = 0;
	char *text = NULL, *end = NULL, mem[65] = "";
	int64_t at = 0;
	size_t n = 0;
	int rc;

	if (a->set[0]) {
		errno = 0;
		at = strtoll(a->val[0], &end, 10);
		if (errno != 0 || end == a->val[0] || *end != '\0' || at < 0)
			return mc_usage(mc, "--at is Unix seconds");
	}
	rc = mc_fingerprint(mc, a->pos[0], &text, &v, &n, &boxes, &msgs);
	free(text);
	text = NULL;
	if (rc == 0 && a->set[0] && (rc = mc_memories_text(mc, a->pos[0], at, &text)) == 0 &&
	    mc_sha256_hex(text, strlen(text), mem) != 0)
		rc = STORE_EIO;
	free(text);
	if (rc == STORE_ENOUSER) {
		fputs("heron-digest 1\nuser absent\nend\n", stdout);
		return MC_OK;
	}
	if (rc != 0)
		return mc_fail(mc, rc, "reading '%s'", a->pos[0]);
	fputs("heron-digest 1\nuser present\n", stdout);
	for (size_t i = 0; i < n; i++)
		if (v[i].name != NULL)
			printf("mailbox %s %s\n", v[i].hex, v[i].name);
		else
			printf("rest %s\n", v[i].hex);
	if (a->set[0])
		printf("memories %s\n", mem);
	printf("count %" PRIu64 " %" PRIu64 "\nend\n", boxes, msgs);
	mc_digests_free(v, n);
	return fflush(stdout) == 0 ? MC_OK : MC_IOERR;
}

static bool is_hex64(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* One line of f into line (size LINE_MAX_ + 1), without its LF: 1, 0 at EOF, -1 for a
   line too long or without LF. */
static int read_line(FILE *f, char *line)
{
	size_t len;

	if (fgets(line, LINE_MAX_ + 1, f) == NULL)
		return 0;
	len = strlen(line);
	if (len == 0 || line[len - 1] != '\n')
		return -1;
	line[len - 1] = '\0';
	return 1;
}

int mc_digest_read(struct mc *mc, FILE *f, struct mc_target *t)
{
	char line[LINE_MAX_ + 1], hex[65];
	uint64_t nline = 0;
	bool ended = false;
	int r, off;

	memset(t, 0, sizeof(*t));
	while (!ended && (r = read_line(f, line)) == 1) {
		nline++;
		off = 0;
		if (nline == 1 ? strcmp(line, "heron-digest 1") != 0 : false)
			break;
		if (nline == 1)
			continue;
		if (strcmp(line, "user absent") == 0 || strcmp(line, "user present") == 0)
			t->present = line[5] == 'p';
		else if (strcmp(line, "end") == 0)
			ended = true;
		else if (sscanf(line, "memories %64s%n", hex, &off) == 1 && line[off] == '\0' &&
			 is_hex64(hex))
			memcpy(t->memories, hex, 65);
		else if (sscanf(line, "count %" SCNu64 " %" SCNu64 "%n", &t->boxes, &t->messages,
				&off) == 2 &&
			 line[off] == '\0') {
		} else if ((sscanf(line, "mailbox %64s%n", hex, &off) == 1 ||
			    sscanf(line, "rest %64s%n", hex, &off) == 1) &&
			   off > 0 && is_hex64(hex) && t->n < BOXES_MAX &&
			   (line[0] == 'r' ? line[off] == '\0'
					   : line[off] == ' ' && line[off + 1] != '\0' &&
						     strlen(line + off + 1) <= STORE_MAX_NAME)) {
			/* the name is the rest of the line, spaces and all */
			t->v = xreallocarray(t->v, t->n + 1, sizeof(*t->v));
			t->v[t->n].name = line[0] == 'm' ? xstrdup(line + off + 1) : NULL;
			memcpy(t->v[t->n++].hex, hex, 65);
		} else
			break;
	}
	if (ended && read_line(f, line) == 0)
		return MC_OK;
	mc_digests_free(t->v, t->n);
	memset(t, 0, sizeof(*t));
	return mc_refuse(mc, MC_DATAERR, "is CMD a mailctl of this Heron on the target host?",
			 "the target's digest does not parse (line %" PRIu64 ")", nline + 1);
}

/* ---- the sender ---- */

struct out {
	FILE *f;
	int err; /* errno of the first failed write */
};

static void out_file(struct out *o, int dirfd, const char *sub, const char *name)
{
	char path[600], buf[COPY_BUF];
	struct stat sb;
	ssize_t n;
	int fd;

	if (o->err != 0)
		return;
	snprintf(path, sizeof(path), "%s%s%s", sub, sub[0] ? "/" : "", name);
	if ((fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
	    fstat(fd, &sb) == -1) {
		o->err = errno;
		if (fd != -1)
			close(fd);
		return;
	}
	fprintf(o->f, "file %s %" PRIu64 " %" PRId64 "\n", path, (uint64_t)sb.st_size,
		(int64_t)sb.st_mtime);
	for (off_t left = sb.st_size; left > 0 && o->err == 0; left -= n) {
		n = read(fd, buf, (size_t)left < sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n <= 0) {
			o->err = n < 0 ? errno : EIO; /* the export changed under us */
			break;
		}
		if (fwrite(buf, 1, (size_t)n, o->f) != (size_t)n)
			o->err = errno ? errno : EIO;
	}
	close(fd);
	fputc('\n', o->f);
	if (ferror(o->f) && o->err == 0)
		o->err = errno ? errno : EPIPE;
}

/* The regular files of dir/sub (sub "" : dir itself), those own ones when own is set, the
   others when it is not (top only). */
static void out_dir(struct out *o, int top, const char *sub, int own)
{
	int fd = openat(top, sub[0] ? sub : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	struct stat sb;
	DIR *d;

	if (fd == -1) {
		if (errno != ENOENT)
			o->err = o->err ? o->err : errno;
		return;
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		o->err = o->err ? o->err : errno;
		return;
	}
	while (o->err == 0 && (de = readdir(d)) != NULL) {
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == -1 ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (own >= 0 && (own == 1) != is_box_file(de->d_name))
			continue;
		out_file(o, top, sub, de->d_name);
	}
	closedir(d);
}

static int out_mailbox(struct out *o, const char *dir, const struct mc_stream_box *b)
{
	bool inbox = str_caseeq(b->name, strlen(b->name), "INBOX", 5);
	char *path = inbox ? xstrdup(dir) : mc_folder_path(dir, b->name);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	free(path);
	if (fd == -1)
		return o->err = errno;
	fprintf(o->f, "mailbox %d %x %s\n", b->subscribed ? 1 : 0, b->special, b->name);
	out_dir(o, fd, "", inbox ? 1 : -1);
	out_dir(o, fd, "cur", -1);
	out_dir(o, fd, "new", -1);
	fputs("end\n", o->f);
	close(fd);
	return o->err;
}

static int out_script(const struct store_sieve_script *s, void *arg)
{
	struct out *o = arg;

	fprintf(o->f, "sieve %d %zu %zu %.*s\n", s->active ? 1 : 0, s->src_len, s->prog_len,
		(int)s->name_len, s->name);
	if (fwrite(s->src, 1, s->src_len, o->f) != s->src_len ||
	    fwrite(s->prog, 1, s->prog_len, o->f) != s->prog_len || fputc('\n', o->f) == EOF)
		o->err = o->err ? o->err : errno ? errno : EPIPE;
	return 0;
}

int mc_stream_send(struct mc *mc, FILE *f, const char *user, const char *dir,
		   const struct mc_stream_plan *p)
{
	struct out o = { f, 0 };
	struct store_txn *t;
	unsigned part;
	int rc, fd;

	fprintf(f, "heron-move 1\nuser %s\n", user);
	if (p->drop || p->kept) {
		fputs(p->drop ? "drop\ndone\n" : "kept\ndone\n", f);
		goto flush;
	}
	if (p->reset)
		fputs("reset\n", f);
	for (size_t i = 0; i < p->ndeletes; i++)
		fprintf(f, "delete %s\n", p->deletes[i]);
	for (size_t i = 0; i < p->nboxes && o.err == 0; i++)
		out_mailbox(&o, dir, &p->boxes[i]);
	if (o.err != 0)
		goto flush;
	fprintf(f, "userdata %" PRIu64 " %" PRIu64 "\n", p->quota_bytes, p->quota_msgs);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		o.err = errno;
		goto flush;
	}
	out_dir(&o, fd, "", 0);
	close(fd);
	if ((rc = store_user_locate(mc->st, user, &part)) != 0 ||
	    (rc = store_txn_begin(mc->st, part, STORE_TXN_READ, &t)) != 0)
		return mc_fail(mc, rc, "the Sieve scripts of '%s'", user);
	rc = store_sieve_list(t, user, out_script, &o);
	store_txn_abort(&t);
	if (rc != 0)
		return mc_fail(mc, rc, "the Sieve scripts of '%s'", user);
	fputs("end\ndone\n", f);
flush:
	if (fflush(f) == EOF && o.err == 0)
		o.err = errno ? errno : EPIPE;
	if (o.err != 0)
		return mc_refuse(mc, MC_TEMPFAIL, "run the command again: the move resumes",
				 "sending '%s' to the target: %s", user, strerror(o.err));
	return MC_OK;
}

/* ---- the receiver ---- */

struct rx {
	struct mc *mc;
	const char *user;
	FILE *in;
	uint64_t line;
	char *stage;
	char *tpath; /* <[store] path>.recv-USER.tomb: the tombstone our create cleared */
	struct store_tomb tomb; /* drop's and reset's: restored in its txn (host "" none) */
	char box[STORE_MAX_NAME + 1];
	bool subscribed;
	unsigned special;
	uint64_t files, boxes, messages, quota_bytes, quota_msgs;
	struct mc_script *sv;
	size_t nsv;
	uint64_t sv_bytes; /* sources and programs of sv, declared */
};

static int rx_error(struct rx *rx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rx_error(struct rx *rx, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return mc_refuse(rx->mc, MC_DATAERR,
			 "the heron-move stream is described in mailctl(8), user move",
			 "user receive: line %" PRIu64 ": %s", rx->line, msg);
}

static int rx_line(struct rx *rx, char *line)
{
	int r = read_line(rx->in, line);

	rx->line++;
	if (r == 0)
		return rx_error(rx, "the stream ends early (the sender stopped?)");
	if (r < 0)
		return feof(rx->in) ? rx_error(rx, "the stream ends inside a line")
				    : rx_error(rx, "a line longer than %d bytes", LINE_MAX_ - 1);
	return MC_OK;
}

/* Exactly n bytes of the stream into fd (-1: into buf). */
static int rx_bytes(struct rx *rx, uint64_t n, int fd, char *buf)
{
	char tmp[COPY_BUF];

	while (n > 0) {
		size_t want = n < sizeof(tmp) ? (size_t)n : sizeof(tmp);
		size_t got = fread(fd == -1 ? buf : tmp, 1, want, rx->in);

		if (got == 0)
			return rx_error(rx, "the stream ends inside a file");
		if (fd != -1 && write(fd, tmp, got) != (ssize_t)got)
			return mc_refuse(rx->mc, MC_IOERR, "see the free space there",
					 "writing %s: %s", rx->stage, strerror(errno));
		if (fd == -1)
			buf += got;
		n -= got;
	}
	return MC_OK;
}

static int rx_lf(struct rx *rx)
{
	return fgetc(rx->in) == '\n' ? MC_OK : rx_error(rx, "bytes not followed by a LF");
}

static bool good_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == '/' || *s == 0x7f)
			return false;
	return true;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) == -1 ? errno : 0;
}

int mc_rm_tree(const char *path)
{
	return access(path, F_OK) != 0 ? 0 : nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int rx_stage_new(struct rx *rx)
{
	char p[4200];

	if (mc_rm_tree(rx->stage) != 0 || mkdir(rx->stage, 0700) == -1)
		return mc_refuse(rx->mc, MC_CANTCREAT, "see the permissions there", "%s: %s",
				 rx->stage, strerror(errno));
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", rx->stage,
			 (const char *[]){ "cur", "new", "tmp" }[i]);
		if (mkdir(p, 0700) == -1)
			return mc_refuse(rx->mc, MC_CANTCREAT, "see the permissions there",
					 "%s: %s", p, strerror(errno));
	}
	rx->files = 0;
	return MC_OK;
}

/* "file PATH SIZE MTIME" and its bytes into the stage (top only when !sub). */
static int rx_file(struct rx *rx, const char *arg, bool sub)
{
	char path[600], p[4800];
	uint64_t size;
	int64_t mtime;
	int off = 0, fd, rc;
	const char *name;

	if (sscanf(arg, "%599s %" SCNu64 " %" SCNd64 "%n", path, &size, &mtime, &off) != 3 ||
	    arg[off] != '\0')
		return rx_error(rx, "expected file PATH SIZE MTIME");
	name = path;
	if (sub && (strncmp(path, "cur/", 4) == 0 || strncmp(path, "new/", 4) == 0))
		name = path + 4;
	if (!good_name(name))
		return rx_error(rx, "file name '%s' is not a name of an export", path);
	if (size > FILE_MAX)
		return rx_error(rx, "a file of %" PRIu64 " bytes (at most %" PRIu64 ")", size,
				FILE_MAX);
	if (++rx->files > FILES_MAX)
		return rx_error(rx, "more than %d files in one mailbox", FILES_MAX);
	snprintf(p, sizeof(p), "%s/%s", rx->stage, path);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1)
		return errno == EEXIST
			       ? rx_error(rx, "file %s given twice", path)
			       : mc_refuse(rx->mc, MC_CANTCREAT, "see the free space there",
					   "%s: %s", p, strerror(errno));
	rc = rx_bytes(rx, size, fd, NULL);
	if (rc == MC_OK &&
	    futimens(fd, (const struct timespec[]){ { mtime, 0 }, { mtime, 0 } }) == -1)
		rc = mc_refuse(rx->mc, MC_IOERR, "see the file system", "%s: %s", p,
			       strerror(errno));
	close(fd);
	return rc != MC_OK ? rc : rx_lf(rx);
}

/* The tombstone make is about to clear (or none), remembered beside the stage (which every
   stream empties) for a later drop or reset. While the user is absent here the store holds
   the truth: drop and reset put the tombstone back in the txn that deletes the copy. */
static int rx_tomb_note(struct rx *rx, unsigned part)
{
	struct store_txn *t;
	struct store_tomb tb;
	FILE *f;
	int rc;

	if ((rc = store_txn_begin(rx->mc->st, part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_tomb_get(t, rx->user, &tb);
	store_txn_abort(&t);
	if (rc == STORE_ENOMSG)
		return unlink(rx->tpath) == -1 && errno != ENOENT ? STORE_EIO : 0;
	if (rc != 0)
		return rc;
	if ((f = fopen(rx->tpath, "w")) == NULL)
		return STORE_EIO;
	rc = 0;
	if (fprintf(f, "%s %" PRId64 "\n", tb.host, tb.when) < 0 || fflush(f) == EOF ||
	    fsync(fileno(f)) == -1)
		rc = STORE_EIO;
	if (fclose(f) == EOF)
		rc = STORE_EIO;
	return rc;
}

/* The remembered tombstone into rx->tomb (host "" when none). */
static void rx_tomb_load(struct rx *rx)
{
	FILE *f = fopen(rx->tpath, "r");
	char host[STORE_TOMB_HOST_MAX + 1];
	long long when;

	rx->tomb.host[0] = '\0';
	if (f == NULL)
		return;
	if (fscanf(f, "%253s %lld", host, &when) == 2) {
		str_lcpy(rx->tomb.host, host, sizeof(rx->tomb.host));
		rx->tomb.when = (int64_t)when;
	}
	fclose(f);
}

static int w_user(struct store_txn *t, void *arg)
{
	struct rx *rx = arg;
	struct store_user u;
	uint64_t id;
	int rc = store_user_get(t, rx->user, &u);

	if (rc != STORE_ENOUSER)
		return rc;
	/* a tombstone an earlier move away from here left goes (a move back) */
	return (rc = store_tomb_clear(t, rx->user)) != 0 ? rc
							 : store_user_create(t, rx->user, &id);
}

/* The copy goes, and the tombstone its create cleared comes back with it. */
static int w_user_drop(struct store_txn *t, void *arg)
{
	struct rx *rx = arg;
	int rc = store_user_delete(t, rx->user);

	if (rc != 0 && rc != STORE_ENOUSER)
		return rc;
	return rx->tomb.host[0] == '\0'
		       ? 0
		       : store_tomb_add(t, rx->user, rx->tomb.host, rx->tomb.when);
}

/* The user on the target: dropped (reset, drop); made when missing (make: before the
   first import, so a stream refused before it makes nobody). */
static int rx_user(struct rx *rx, bool drop, bool make)
{
	unsigned part;
	int rc = 0;

	if (drop) {
		rx_tomb_load(rx);
		if (store_user_locate(rx->mc->st, rx->user, &part) == 0 &&
		    (rc = store_write(rx->mc->st, part, w_user_drop, rx)) == 0)
			rc = store_acl_forget(rx->mc->st, rx->user, NULL);
		if (rc == 0 && unlink(rx->tpath) == -1 && errno != ENOENT)
			rc = STORE_EIO;
	}
	if (rc == 0 && make && store_user_locate(rx->mc->st, rx->user, &part) == STORE_ENOUSER) {
		part = store_partition_for(rx->mc->st, rx->user);
		if ((rc = rx_tomb_note(rx, part)) == 0)
			rc = store_write(rx->mc->st, part, w_user, rx);
	}
	return rc != 0 ? mc_fail(rx->mc, rc, "user '%s'", rx->user) : MC_OK;
}

struct box_attrs {
	const char *user, *name, *del;
	bool subscribed;
	unsigned special;
};

static int w_box_attrs(struct store_txn *t, void *arg)
{
	struct box_attrs *b = arg;
	struct store_user u;
	uint64_t id;
	int rc;

	if ((rc = store_user_get(t, b->user, &u)) != 0)
		return rc;
	if (b->del != NULL) {
		rc = store_mbox_delete(t, u.id, b->del);
		return rc == STORE_ENOMBOX ? 0 : rc;
	}
	if ((rc = store_mbox_find(t, u.id, b->name, &id)) == 0 &&
	    (rc = store_mbox_set_special(t, id, b->special)) == 0)
		rc = store_mbox_subscribe(t, u.id, b->name, b->subscribed);
	return rc;
}

static int rx_attrs(struct rx *rx, struct box_attrs *b)
{
	unsigned part;
	int rc;

	b->user = rx->user;
	if ((rc = store_user_locate(rx->mc->st, rx->user, &part)) == 0)
		rc = store_write(rx->mc->st, part, w_box_attrs, b);
	return rc != 0 ? mc_fail(rx->mc, rc, "mailbox '%s' of '%s'", b->del ? b->del : b->name,
				 rx->user)
		       : MC_OK;
}

static int rx_script(struct rx *rx, const char *arg)
{
	unsigned active = 2;
	uint64_t sl, pl;
	struct mc_script *s;
	int off = 0, rc;

	if (sscanf(arg, "%u %" SCNu64 " %" SCNu64 "%n", &active, &sl, &pl, &off) != 3 ||
	    active > 1 || arg[off] != ' ' || !good_name(arg + ++off))
		return rx_error(rx, "expected sieve 0|1 SRCLEN PROGLEN NAME");
	if (sl > SCRIPT_MAX || pl > SCRIPT_MAX)
		return rx_error(rx, "a Sieve script over %" PRIu64 " bytes", SCRIPT_MAX);
	if (rx->nsv >= SCRIPTS_MAX)
		return rx_error(rx, "more than %d Sieve scripts", SCRIPTS_MAX);
	if (sl + pl > SCRIPTS_BYTES_MAX - rx->sv_bytes)
		return rx_error(rx, "Sieve scripts over %" PRIu64 " bytes in all",
				SCRIPTS_BYTES_MAX);
	rx->sv_bytes += sl + pl;
	rx->sv = xreallocarray(rx->sv, rx->nsv + 1, sizeof(*rx->sv));
	s = &rx->sv[rx->nsv++];
	s->name = xstrdup(arg + off);
	s->src = xmalloc(sl + 1);
	s->prog = xmalloc(pl + 1);
	s->src_len = sl;
	s->prog_len = pl;
	s->active = active == 1;
	if ((rc = rx_bytes(rx, sl, -1, s->src)) != MC_OK ||
	    (rc = rx_bytes(rx, pl, -1, (char *)s->prog)) != MC_OK)
		return rc;
	return rx_lf(rx);
}

/* A mailbox's (or userdata's: Sieve scripts too) lines into a new stage, up to its end. */
static int rx_section(struct rx *rx, char *line, bool userdata)
{
	int rc;

	if ((rc = rx_stage_new(rx)) != MC_OK)
		return rc;
	for (;;) {
		if ((rc = rx_line(rx, line)) != MC_OK)
			return rc;
		if (strcmp(line, "end") == 0)
			return MC_OK;
		if (strncmp(line, "file ", 5) == 0)
			rc = rx_file(rx, line + 5, !userdata);
		else if (userdata && strncmp(line, "sieve ", 6) == 0)
			rc = rx_script(rx, line + 6);
		else
			rc = userdata ? rx_error(rx, "expected file, sieve or end in userdata")
				      : rx_error(rx, "expected file or end in mailbox '%s'",
						 rx->box);
		if (rc != MC_OK)
			return rc;
	}
}

/* The lines of a mailbox up to its end, then its import. */
static int rx_mailbox(struct rx *rx, const char *arg, char *line)
{
	struct box_attrs b = { 0 };
	unsigned sub = 2;
	int off = 0, rc;

	if (sscanf(arg, "%u %x%n", &sub, &b.special, &off) != 2 || sub > 1 || arg[off] != ' ' ||
	    arg[++off] == '\0' || strlen(arg + off) > STORE_MAX_NAME)
		return rx_error(rx, "expected mailbox 0|1 SPECIAL NAME");
	if (++rx->boxes > BOXES_MAX)
		return rx_error(rx, "more than %d mailboxes", BOXES_MAX);
	str_lcpy(rx->box, arg + off, sizeof(rx->box));
	b.subscribed = sub == 1;
	if ((rc = rx_section(rx, line, false)) != MC_OK ||
	    (rc = rx_user(rx, false, true)) != MC_OK)
		return rc;
	if ((rc = mc_import_folder(rx->mc, rx->user, rx->box, rx->stage, &rx->messages)) != MC_OK)
		return rc;
	b.name = rx->box;
	return rx_attrs(rx, &b);
}

static int w_userdata(struct store_txn *t, void *arg)
{
	struct rx *rx = arg;
	int rc = mc_scripts_put(t, rx->user, rx->sv, rx->nsv);

	return rc != 0 ? rc : store_user_set_quota(t, rx->user, rx->quota_bytes, rx->quota_msgs);
}

static int rx_userdata(struct rx *rx, const char *arg, char *line)
{
	uint64_t count = 0;
	unsigned part;
	int off = 0, rc;

	if (sscanf(arg, "%" SCNu64 " %" SCNu64 "%n", &rx->quota_bytes, &rx->quota_msgs, &off) !=
		    2 ||
	    arg[off] != '\0')
		return rx_error(rx, "expected userdata QUOTA_BYTES QUOTA_MESSAGES");
	if ((rc = rx_section(rx, line, true)) != MC_OK || (rc = rx_user(rx, false, true)) != MC_OK)
		return rc;
	if ((rc = mc_import_dir(rx->mc, rx->user, rx->stage, &count)) != MC_OK)
		return rc;
	if ((rc = store_user_locate(rx->mc->st, rx->user, &part)) == 0)
		rc = store_write(rx->mc->st, part, w_userdata, rx);
	return rc != 0 ? mc_fail(rx->mc, rc, "the Sieve scripts and quota of '%s'", rx->user)
		       : MC_OK;
}

static int rx_run(struct rx *rx)
{
	char line[LINE_MAX_ + 1];
	bool userdata = false;
	int rc;

	if ((rc = rx_line(rx, line)) != MC_OK)
		return rc;
	if (strcmp(line, "heron-move 1") != 0)
		return rx_error(rx, "not a heron-move 1 stream");
	if ((rc = rx_line(rx, line)) != MC_OK)
		return rc;
	if (strncmp(line, "user ", 5) != 0 || strcmp(line + 5, rx->user) != 0)
		return rx_error(rx, "expected user %s", rx->user);
	if ((rc = rx_line(rx, line)) != MC_OK)
		return rc;
	if (strcmp(line, "drop") == 0) {
		if ((rc = rx_line(rx, line)) != MC_OK)
			return rc;
		return strcmp(line, "done") != 0 ? rx_error(rx, "expected done after drop")
						 : rx_user(rx, true, false);
	}
	if (strcmp(line, "kept") == 0) {
		if ((rc = rx_line(rx, line)) != MC_OK)
			return rc;
		if (strcmp(line, "done") != 0)
			return rx_error(rx, "expected done after kept");
		if (unlink(rx->tpath) == -1 && errno != ENOENT)
			return mc_refuse(rx->mc, MC_IOERR, "see the file system", "%s: %s",
					 rx->tpath, strerror(errno));
		return MC_OK;
	}
	if (strcmp(line, "reset") == 0 && (rc = rx_user(rx, true, false)) != MC_OK)
		return rc;
	if (strcmp(line, "reset") == 0 && (rc = rx_line(rx, line)) != MC_OK)
		return rc;
	for (;; rc = rx_line(rx, line)) {
		if (rc != MC_OK)
			return rc;
		if (strcmp(line, "done") == 0)
			break;
		if (userdata)
			return rx_error(rx, "expected done after userdata");
		if (strncmp(line, "delete ", 7) == 0) {
			struct box_attrs b = { .del = line + 7 };

			rc = strcasecmp(line + 7, "INBOX") == 0
				     ? rx_error(rx, "INBOX is never deleted")
				     : rx_attrs(rx, &b);
		} else if (strncmp(line, "mailbox ", 8) == 0)
			rc = rx_mailbox(rx, line + 8, line);
		else if (strncmp(line, "userdata ", 9) == 0) {
			rc = rx_userdata(rx, line + 9, line);
			userdata = true;
		} else
			rc = rx_error(rx, "unknown line '%.40s'", line);
		if (rc != MC_OK)
			return rc;
	}
	return fgetc(rx->in) == EOF ? MC_OK : rx_error(rx, "bytes after done");
}

int mc_user_receive(struct mc *mc, const struct mc_args *a)
{
	struct rx rx = { .mc = mc, .user = a->pos[0], .in = stdin };
	int rc;

	if (strchr(rx.user, '/') != NULL || rx.user[0] == '.' || rx.user[0] == '\0' ||
	    strlen(rx.user) > STORE_MAX_NAME)
		return mc_usage(mc, "USER is a user name without '/', not starting with '.'");
	rx.stage = xasprintf("%s.recv-%s", conf_values(mc->conf)->store.path, rx.user);
	rx.tpath = xasprintf("%s.tomb", rx.stage);
	rc = rx_run(&rx);
	(void)mc_rm_tree(rx.stage);
	mc_scripts_free(rx.sv, rx.nsv);
	free(rx.stage);
	free(rx.tpath);
	if (rc == MC_OK)
		fprintf(stderr,
			"mailctl: received %" PRIu64 " mailboxes, %" PRIu64 " messages of %s\n",
			rx.boxes, rx.messages, rx.user);
	return rc;
}

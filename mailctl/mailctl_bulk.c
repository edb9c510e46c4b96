/* mailctl_bulk.c — owns `mailctl import --bulk FILE|-`: many users' mailboxes loaded from one
 * stream of users, mailboxes and messages, the store's fast fill (a benchmark's initial
 * mailboxes, a migration). The stream is text lines with the messages' bytes inline:
 *
 *   heron-bulk 1                              the first line
 *   user NAME                                 the user the lines below fill (created when
 *                                             missing)
 *   mailbox subscribed|unsubscribed NAME      one of the user's mailboxes (UTF-8, '/' between
 *                                             levels; created when missing, INBOX always is)
 *   message SIZE DATE [FLAG...]               a message of the last mailbox: SIZE bytes follow
 *                                             the line, then a LF; DATE is the internal date
 *                                             (Unix seconds), FLAGs are \Seen \Answered
 *                                             \Flagged \Deleted \Draft or keywords
 *
 * Lines end with LF; messages are stored as they come (CRLF lines, as on the wire). A user is
 * one index transaction: its message files are written first (no fsync: the store is synced
 * once at the end, store_opts.nosync), then the user, its mailboxes, subscriptions and
 * messages are committed together. Loading a stream again completes what an interrupted load
 * left: a mailbox that holds k messages takes the stream's messages after its first k, so
 * users already complete get nothing. Safe while the daemons run on the same store. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/str.h"
#include "common/utf7imap.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

#define BULK_READ 65536
#define BULK_LINE_MAX 8192               /* a line of the stream, LF included */
#define BULK_MSG_MAX ((uint64_t)2 << 30) /* the largest message taken */
#define BULK_BOXES_MAX 10000             /* mailboxes of one user */
#define BULK_KWS_MAX 32                  /* keywords of one message */

struct bulk_box {
	char *name; /* modified UTF-7, as the store keeps it */
	bool subscribed;
	uint64_t have; /* messages it held when the user began */
	uint64_t seen; /* messages of the stream for it so far */
};

struct bulk_msg {
	struct store_blob *b;
	size_t box;   /* index in boxes */
	uint64_t pos; /* its place in the mailbox: 0 is the first */
	unsigned flags;
	int64_t date;
	char **kws;
	size_t nkws;
};

struct bulk {
	struct mc *mc;
	int fd;
	char rd[BULK_READ];
	size_t rlen, roff;
	uint64_t line; /* the stream's line number, for errors */
	int fail;      /* the exit code of the error bulk_line reported (-1) */
	char user[STORE_MAX_NAME + 1];
	unsigned part;
	bool have_user;
	struct bulk_box *boxes;
	size_t nboxes, cur; /* cur: the box of the last mailbox line */
	struct bulk_msg *msgs;
	size_t nmsgs, capmsgs;
	uint64_t users, complete, messages, bytes;
};

static int bulk_error(struct bulk *bk, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bulk_error(struct bulk *bk, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bk->fail = mc_refuse(
		       bk->mc, MC_DATAERR,
		       "the heron-bulk 1 stream is described in mailctl(8), import --bulk",
		       "import --bulk: line %" PRIu64 ": %s", bk->line, msg);
}

/* 1 when data is buffered, 0 at the end of the stream, -1 on a read error. */
static int bulk_fill(struct bulk *bk)
{
	ssize_t n;

	if (bk->roff < bk->rlen)
		return 1;
	do
		n = read(bk->fd, bk->rd, sizeof(bk->rd));
	while (n == -1 && errno == EINTR);
	if (n < 0)
		return -1;
	bk->roff = 0;
	bk->rlen = (size_t)n;
	return n > 0;
}

/* The next line into line (LF removed). 1, 0 at a clean end, -1 on an error (reported). */
static int bulk_line(struct bulk *bk, char *line, size_t size)
{
	size_t n = 0;
	int r;

	while ((r = bulk_fill(bk)) == 1) {
		char *p = bk->rd + bk->roff, *lf = memchr(p, '\n', bk->rlen - bk->roff);
		size_t take = lf != NULL ? (size_t)(lf - p) : bk->rlen - bk->roff;

		if (n + take >= size) {
			bk->line++;
			bulk_error(bk, "line longer than %zu bytes", size - 1);
			return -1;
		}
		memcpy(line + n, p, take);
		n += take;
		bk->roff += take + (lf != NULL);
		if (lf != NULL) {
			line[n] = '\0';
			bk->line++;
			return 1;
		}
	}
	if (r < 0) {
		bk->fail = mc_refuse(bk->mc, MC_IOERR, "check the input",
				     "import --bulk: reading: %s", strerror(errno));
		return -1;
	}
	if (n > 0) {
		bk->line++;
		bulk_error(bk, "the last line has no LF");
		return -1;
	}
	return 0;
}

/* Passes size bytes of the stream to b (NULL: drops them), then the LF after them. */
static int bulk_body(struct bulk *bk, uint64_t size, struct store_blob *b)
{
	int rc;

	while (size > 0) {
		size_t take;

		if ((rc = bulk_fill(bk)) <= 0)
			return bulk_error(bk, "the stream ends inside a message");
		take = bk->rlen - bk->roff;
		if (take > size)
			take = (size_t)size;
		if (b != NULL && (rc = store_blob_write(b, bk->rd + bk->roff, take)) != 0)
			return mc_fail(bk->mc, rc, "writing a message file");
		bk->roff += take;
		size -= take;
	}
	if (bulk_fill(bk) <= 0 || bk->rd[bk->roff] != '\n')
		return bulk_error(bk, "a message is not followed by a LF");
	bk->roff++;
	return MC_OK;
}

static void bulk_drop_user(struct bulk *bk)
{
	for (size_t i = 0; i < bk->nmsgs; i++) {
		store_blob_free(&bk->msgs[i].b); /* unlinked unless a commit references it */
		for (size_t k = 0; k < bk->msgs[i].nkws; k++)
			free(bk->msgs[i].kws[k]);
		free(bk->msgs[i].kws);
	}
	for (size_t i = 0; i < bk->nboxes; i++)
		free(bk->boxes[i].name);
	bk->nmsgs = 0;
	bk->nboxes = 0;
	bk->have_user = false;
}

/* The user's index transaction (redone whole when the map grows): the user, its mailboxes
   and subscriptions, and each mailbox's messages past what it holds in this snapshot. */
static int bulk_commit_fn(struct store_txn *t, void *arg)
{
	struct bulk *bk = arg;
	uint64_t *mb = xcalloc(bk->nboxes, sizeof(*mb)), *count = xcalloc(bk->nboxes, 8);
	struct store_user u;
	uint64_t uid;
	int rc = store_user_get(t, bk->user, &u);

	if (rc == STORE_ENOUSER)
		rc = store_user_create(t, bk->user, &uid);
	else
		uid = u.id;
	for (size_t i = 0; rc == 0 && i < bk->nboxes; i++) {
		const struct bulk_box *x = &bk->boxes[i];
		struct store_status s = { 0 };

		rc = store_mbox_find(t, uid, x->name, &mb[i]);
		if (rc == STORE_ENOMBOX && strcmp(x->name, "INBOX") != 0)
			rc = store_mbox_create(t, uid, x->name, 0, &mb[i]);
		if (rc == 0 && x->subscribed)
			rc = store_mbox_subscribe(t, uid, x->name, true);
		if (rc == 0 && (rc = store_mbox_status(t, mb[i], &s)) == 0)
			count[i] = s.messages;
	}
	for (size_t i = 0; rc == 0 && i < bk->nmsgs; i++) {
		const struct bulk_msg *m = &bk->msgs[i];
		uint64_t kws = 0;
		unsigned idx;

		if (m->pos < count[m->box])
			continue; /* filled by someone else meanwhile */
		for (size_t k = 0; rc == 0 && k < m->nkws; k++) {
			if ((rc = store_mbox_keyword(t, mb[m->box], m->kws[k], true, &idx)) == 0)
				kws |= (uint64_t)1 << idx;
			else if (rc == STORE_EINVAL || rc == STORE_EKEYWORDS)
				rc = 0; /* a bad or excess keyword is dropped, as `import` does */
		}
		if (rc == 0)
			rc = store_msg_append(t, mb[m->box], m->b, m->flags, kws, m->date, NULL);
		count[m->box]++;
	}
	free(mb);
	free(count);
	return rc;
}

/* The end of a user's lines: one commit, then the counters. */
static int bulk_end_user(struct bulk *bk)
{
	int rc;

	if (!bk->have_user)
		return MC_OK;
	bk->users++;
	if (bk->nmsgs == 0) {
		bool all = true;

		for (size_t i = 0; i < bk->nboxes; i++)
			all &= bk->boxes[i].have != UINT64_MAX;
		if (all) { /* every mailbox there with its messages: nothing to write */
			bk->complete++;
			bulk_drop_user(bk);
			return MC_OK;
		}
	}
	if ((rc = store_write(bk->mc->st, bk->part, bulk_commit_fn, bk)) != 0) {
		bulk_drop_user(bk);
		return mc_fail(bk->mc, rc, "user %s", bk->user);
	}
	for (size_t i = 0; i < bk->nmsgs; i++) {
		bk->messages++;
		bk->bytes += store_blob_size(bk->msgs[i].b);
	}
	bulk_drop_user(bk);
	return MC_OK;
}

static int bulk_user(struct bulk *bk, const char *name)
{
	int rc;

	if (name[0] == '\0' || strlen(name) > STORE_MAX_NAME)
		return bulk_error(bk, "a user name of 1 to %d bytes expected", STORE_MAX_NAME);
	str_lcpy(bk->user, name, sizeof(bk->user));
	rc = store_user_locate(bk->mc->st, bk->user, &bk->part);
	if (rc == STORE_ENOUSER)
		bk->part = store_partition_for(bk->mc->st, bk->user);
	else if (rc != 0)
		return mc_fail(bk->mc, rc, "user %s", bk->user);
	bk->have_user = true;
	return MC_OK;
}

/* How many messages mailbox name of the user holds now; UINT64_MAX when it does not exist. */
static int bulk_have(struct bulk *bk, const char *name, uint64_t *have_r)
{
	struct store_txn *t;
	struct store_user u;
	struct store_status s;
	uint64_t mb;
	int rc;

	*have_r = UINT64_MAX;
	if ((rc = store_txn_begin(bk->mc->st, bk->part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_user_get(t, bk->user, &u);
	if (rc == 0)
		rc = store_mbox_find(t, u.id, name, &mb);
	if (rc == 0 && (rc = store_mbox_status(t, mb, &s)) == 0)
		*have_r = s.messages;
	store_txn_abort(&t);
	return rc == STORE_ENOUSER || rc == STORE_ENOMBOX ? 0 : rc;
}

static int bulk_mailbox(struct bulk *bk, const char *arg)
{
	struct bulk_box *x;
	struct buf name;
	const char *sp = strchr(arg, ' ');
	bool subscribed;
	int rc;

	if (!bk->have_user)
		return bulk_error(bk, "a mailbox line before any user line");
	if (sp == NULL || sp[1] == '\0')
		return bulk_error(bk, "expected: mailbox subscribed|unsubscribed NAME");
	if (sp - arg == 10 && strncmp(arg, "subscribed", 10) == 0)
		subscribed = true;
	else if (sp - arg == 12 && strncmp(arg, "unsubscribed", 12) == 0)
		subscribed = false;
	else
		return bulk_error(bk, "expected: mailbox subscribed|unsubscribed NAME");
	buf_init(&name, 64, STORE_MAX_NAME);
	if (str_caseeq(sp + 1, strlen(sp + 1), "INBOX", 5))
		buf_puts(&name, "INBOX");
	else if (utf7imap_encode(sp + 1, strlen(sp + 1), &name) != 0 || name.len == 0) {
		buf_release(&name);
		return bulk_error(bk, "mailbox name %s: not UTF-8 or longer than %d bytes", sp + 1,
				  STORE_MAX_NAME);
	}
	for (size_t i = 0; i < bk->nboxes; i++)
		if (strcmp(bk->boxes[i].name, buf_cstr(&name)) == 0) { /* its messages go on */
			bk->boxes[i].subscribed |= subscribed;
			bk->cur = i;
			buf_release(&name);
			return MC_OK;
		}
	if (bk->nboxes >= BULK_BOXES_MAX) {
		buf_release(&name);
		return bulk_error(bk, "more than %d mailboxes for user %s", BULK_BOXES_MAX,
				  bk->user);
	}
	bk->boxes = xreallocarray(bk->boxes, bk->nboxes + 1, sizeof(*bk->boxes));
	x = &bk->boxes[bk->nboxes];
	memset(x, 0, sizeof(*x));
	x->name = xstrdup(buf_cstr(&name));
	x->subscribed = subscribed;
	buf_release(&name);
	if ((rc = bulk_have(bk, x->name, &x->have)) != 0) {
		free(x->name);
		return mc_fail(bk->mc, rc, "mailbox %s of %s", sp + 1, bk->user);
	}
	bk->cur = bk->nboxes++;
	return MC_OK;
}

static int bulk_message(struct bulk *bk, char *arg)
{
	struct str_view rest = str_view_of(arg), f;
	struct bulk_box *x;
	struct bulk_msg *m;
	uint64_t size, pos;
	int64_t date;
	int rc;

	if (bk->nboxes == 0)
		return bulk_error(bk, "a message line before any mailbox line");
	x = &bk->boxes[bk->cur];
	if (!str_split_ws(&rest, &f) || str_to_u64(f.p, f.len, BULK_MSG_MAX, &size) < 0 ||
	    !str_split_ws(&rest, &f) || str_to_i64(f.p, f.len, 0, INT64_MAX / 2, &date) < 0)
		return bulk_error(bk,
				  "expected: message SIZE DATE [FLAG...] (SIZE at most %" PRIu64
				  " bytes)",
				  BULK_MSG_MAX);
	pos = x->seen++;
	if (x->have != UINT64_MAX && pos < x->have)
		return bulk_body(bk, size, NULL); /* the mailbox has it already */
	if (bk->nmsgs == bk->capmsgs) {
		bk->capmsgs = bk->capmsgs ? 2 * bk->capmsgs : 64;
		bk->msgs = xreallocarray(bk->msgs, bk->capmsgs, sizeof(*bk->msgs));
	}
	m = &bk->msgs[bk->nmsgs++]; /* freed with the user, also on an error */
	memset(m, 0, sizeof(*m));
	m->box = bk->cur;
	m->pos = pos;
	m->date = date;
	while (str_split_ws(&rest, &f)) {
		char *word = xmemdup0(f.p, f.len);
		unsigned bit;

		if (mc_flag_parse(word, &bit) == 0) {
			m->flags |= bit;
			free(word);
		} else if (word[0] == '\\' || m->nkws >= BULK_KWS_MAX) {
			free(word);
			return bulk_error(bk, "flag %.*s: not a system flag, or past %d keywords",
					  (int)f.len, f.p, BULK_KWS_MAX);
		} else {
			m->kws = xreallocarray(m->kws, m->nkws + 1, sizeof(*m->kws));
			m->kws[m->nkws++] = word;
		}
	}
	if ((rc = store_blob_new(bk->mc->st, bk->part, &m->b)) != 0)
		return mc_fail(bk->mc, rc, "a message file for %s", bk->user);
	if ((rc = bulk_body(bk, size, m->b)) != MC_OK)
		return rc;
	if ((rc = store_blob_finish(m->b)) != 0)
		return mc_fail(bk->mc, rc, "a message file for %s", bk->user);
	return MC_OK;
}

static void bulk_report(const struct bulk *bk, double seconds)
{
	if (bk->mc->json)
		printf("{\"users\": %" PRIu64 ", \"complete\": %" PRIu64 ", \"messages\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"seconds\": %.3f}\n",
		       bk->users, bk->complete, bk->messages, bk->bytes, seconds);
	else
		printf("imported %" PRIu64 " users (%" PRIu64 " already complete), %" PRIu64
		       " messages, %" PRIu64 " bytes in %.1f s\n",
		       bk->users, bk->complete, bk->messages, bk->bytes, seconds);
}

int mc_import_bulk(struct mc *mc, const char *path)
{
	struct bulk *bk = xcalloc(1, sizeof(*bk));
	char line[BULK_LINE_MAX];
	double t0 = clock_mono_seconds();
	int r, rc = MC_OK;

	bk->mc = mc;
	bk->fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (bk->fd == -1) {
		rc = mc_refuse(mc, MC_NOINPUT, "give a readable file, or - for standard input",
			       "import --bulk: %s: %s", path, strerror(errno));
		free(bk);
		return rc;
	}
	if ((r = bulk_line(bk, line, sizeof(line))) <= 0 || strcmp(line, "heron-bulk 1") != 0)
		rc = r < 0 ? bk->fail
			   : bulk_error(bk, "not a bulk stream (it starts with "
					    "\"heron-bulk 1\")");
	while (rc == MC_OK && (r = bulk_line(bk, line, sizeof(line))) == 1) {
		if (strncmp(line, "user ", 5) == 0) {
			if ((rc = bulk_end_user(bk)) == MC_OK)
				rc = bulk_user(bk, line + 5);
		} else if (strncmp(line, "mailbox ", 8) == 0) {
			rc = bulk_mailbox(bk, line + 8);
		} else if (strncmp(line, "message ", 8) == 0) {
			rc = bulk_message(bk, line + 8);
		} else {
			rc = bulk_error(bk, "expected a user, mailbox or message line");
		}
	}
	if (rc == MC_OK && r < 0)
		rc = bk->fail;
	if (rc == MC_OK)
		rc = bulk_end_user(bk);
	bulk_drop_user(bk);
	if (rc == MC_OK)
		bulk_report(bk, clock_mono_seconds() - t0);
	if (bk->fd != STDIN_FILENO)
		close(bk->fd);
	free(bk->boxes);
	free(bk->msgs);
	free(bk);
	return rc;
}

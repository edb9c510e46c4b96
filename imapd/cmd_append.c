/* cmd_append.c — owns APPEND, MULTIAPPEND (RFC 3502), CATENATE (RFC 4469) and REPLACE,
 * UID REPLACE (RFC 8508): each message literal (or literal8 ~{n}, RFC 3516) was streamed into a
 * blob by imap_client.c while it arrived (never held in memory; CATENATE's TEXT parts of one
 * message into one blob); a CATENATE message with URL parts is rebuilt here into a new blob,
 * its TEXT parts and the bytes of the messages (or sections) its URLs name (this user's
 * mailboxes on this server, read-only); then the blobs are made durable and appended with
 * their flags and internal dates in one nested txn of the group commit (all or none; REPLACE's
 * expunge of the message it replaces in the same txn), answered with APPENDUID (UIDPLUS, a
 * UID set for several) after the commit. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/msgcache.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imap_url.h"
#include "imapd/imapd.h"
#include "store/store.h"

/* "dd-Mon-yyyy hh:mm:ss +zzzz" (day may be space-padded): 0 and *t_r, or -1. */
static int parse_date_time(const char *s, size_t len, int64_t *t_r)
{
	static const char mon[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct tm tm = { 0 };
	char m[4];
	int d, y, hh, mm, ss, z, n = 0;
	char sign;
	const char *p;

	if (len != 26 && len != 25)
		return -1;
	if (sscanf(s, "%2d-%3c-%4d %2d:%2d:%2d %c%4d%n", &d, m, &y, &hh, &mm, &ss, &sign, &z,
		   &n) != 8 ||
	    (size_t)n != len || (sign != '+' && sign != '-'))
		return -1;
	m[3] = '\0';
	if ((p = strstr(mon, m)) == NULL || (p - mon) % 3 != 0 || d < 1 || d > 31 || y < 1900 ||
	    hh > 23 || mm > 59 || ss > 60 || z % 100 > 59 || z > 2359)
		return -1;
	tm.tm_mday = d;
	tm.tm_mon = (int)(p - mon) / 3;
	tm.tm_year = y - 1900;
	tm.tm_hour = hh;
	tm.tm_min = mm;
	tm.tm_sec = ss;
	*t_r = (int64_t)timegm(&tm) -
	       (sign == '+' ? 1 : -1) * (int64_t)((z / 100) * 3600 + (z % 100) * 60);
	return 0;
}

static bool cmd_is_replace(const struct imap_cmd *cmd)
{
	return (cmd->def_flags & CMD_ALT) != 0; /* REPLACE, UID REPLACE */
}

static const char *cmd_name(const struct imap_cmd *cmd)
{
	return cmd_is_replace(cmd) ? "REPLACE" : "APPEND";
}

/* One message of the command (MULTIAPPEND, RFC 3502: several, all appended or none). */
struct append_msg {
	const struct imap_arg *flags;
	int64_t date;
	struct store_blob *blob;    /* owned by the op */
	const struct imap_arg *cat; /* CATENATE's list, or NULL */
	unsigned ntext, nurl;       /* CATENATE: its TEXT and URL parts */
	uint32_t uid;
};

struct append_op {
	uint64_t mbox;
	uint32_t rights; /* the client's on mbox: which flags it may give (RFC 4314 4) */
	char *viewer;    /* another user's mailbox: the client, whose \Seen is private there */
	struct append_msg msgs[IMAP_APPEND_MAX];
	unsigned n;
	uint32_t uidvalidity;
	const char *why;
	uint64_t replace_mbox; /* REPLACE: the selected mailbox and the UID replaced */
	uint32_t replace_uid;
};

static void append_op_free(void *arg)
{
	struct append_op *ao = arg;

	for (unsigned i = 0; i < ao->n; i++)
		store_blob_free(&ao->msgs[i].blob);
	free(ao->viewer);
	free(ao);
}

/* In the group commit: every message in the same nested txn, so a failure drops them all. */
static int append_fn(struct store_txn *t, void *arg)
{
	struct append_op *ao = arg;
	struct store_status st;
	int rc;

	if (ao->replace_uid != 0) {
		/* first, so the replaced message's size is off the quota (RFC 8508 3.1) */
		size_t n = 0;

		if ((rc = store_msg_expunge(t, ao->replace_mbox, &ao->replace_uid, 1, NULL, &n)) !=
		    0)
			return rc;
		if (n == 0)
			return STORE_ENOMSG; /* another session expunged it meanwhile */
	}
	for (unsigned i = 0; i < ao->n; i++) {
		struct append_msg *m = &ao->msgs[i];
		unsigned flags = 0;
		uint64_t kw = 0;

		/* without 'w' no keyword is made; the flags a right does not cover are dropped */
		if (m->flags != NULL &&
		    imap_flags_parse(m->flags, t, ao->mbox, (ao->rights & STORE_ACL_WRITE) != 0,
				     &flags, &kw, &ao->why) < 0)
			return STORE_EINVAL;
		flags &= imap_ns_keep_flags(ao->rights);
		if (!(ao->rights & STORE_ACL_WRITE))
			kw = 0;
		/* into another user's mailbox, \Seen is the client's own (store_seen.c) */
		bool seen = ao->viewer != NULL && (flags & STORE_SEEN);

		if (seen)
			flags &= ~(unsigned)STORE_SEEN;
		if ((rc = store_msg_append(t, ao->mbox, m->blob, flags, kw, m->date, &m->uid)) !=
			    0 ||
		    (seen &&
		     (rc = store_seen_set(t, ao->mbox, ao->viewer, m->uid, true, 0, NULL)) != 0))
			return rc;
	}
	if (store_mbox_status(t, ao->mbox, &st) == 0)
		ao->uidvalidity = st.uidvalidity;
	return 0;
}

/* CATENATE's list (RFC 4469): "(" cat-part *(SP cat-part) ")", cat-part "TEXT" literal (its
   data streamed into the message's blob by imap_client.c) or "URL" astring (resolved by
   catenate_build). NULL or the BAD text. */
static const char *catenate_parse(const struct imap_arg *l, struct append_msg *m)
{
	static const char usage[] = "Expected: CATENATE (TEXT literal|URL url ...)";
	const struct imap_arg *a;

	if (l == NULL || l->type != IMAP_ARG_LIST || l->n == 0 || l->n % 2 != 0 || l->span != l->n)
		return usage;
	a = l + 1;
	for (uint32_t k = 0; k < l->n; k += 2, a += 2) {
		if (imap_arg_atom_is(&a[0], "TEXT") && a[1].type == IMAP_ARG_STREAMED)
			m->ntext++;
		else if (imap_arg_atom_is(&a[0], "URL") && imap_arg_is_astring(&a[1]))
			m->nurl++;
		else
			return usage;
	}
	m->cat = l;
	return NULL;
}

#define BADURL_TEXT_MAX 512 /* bytes of a URL quoted in [BADURL] */

/* The URL for "[BADURL url]" (url-resp-text: TEXT-CHARs but "]"): others as '?', cut at the
   buffer's ceiling. */
static void catenate_url_text(const struct imap_arg *a, struct buf *out)
{
	for (size_t i = 0; i < a->len && i < BADURL_TEXT_MAX; i++) {
		unsigned char ch = (unsigned char)a->s[i];

		buf_putc(out, ch < 0x20 || ch == 0x7f || ch == ']' ? '?' : (char)ch);
	}
	if (out->len == 0)
		buf_putc(out, '?');
}

/* The arguments after the mailbox: ([(flags)] [date-time] (literal | UTF8 (literal8)))+.
   NULL or the BAD text. */
static const char *append_parse(struct imap_cmd *cmd, size_t argc, struct append_op *ao)
{
	static const char usage[] =
		"Expected: APPEND mailbox ([(flags)] [date-time] literal|UTF8 (literal8))...";
	static const char replace_usage[] =
		"Expected: REPLACE n mailbox [(flags)] [date-time] literal|UTF8 (literal8)";
	size_t first = cmd_is_replace(cmd) ? 1 : 0, i = first + 1;

	if (argc < first + 2 || !imap_arg_is_astring(imap_cmd_arg(cmd, first)))
		return first ? replace_usage : usage;
	while (i < argc) {
		const struct imap_arg *a = imap_cmd_arg(cmd, i);
		struct append_msg *m = &ao->msgs[ao->n];

		if (ao->n >= IMAP_APPEND_MAX)
			return usage;
		if (a->type == IMAP_ARG_LIST) {
			m->flags = a;
			a = imap_cmd_arg(cmd, ++i);
		}
		if (a != NULL && a->type == IMAP_ARG_QUOTED) {
			if (parse_date_time(a->s, a->len, &m->date) < 0)
				return "Invalid date-time";
			a = imap_cmd_arg(cmd, ++i);
		}
		if (a != NULL && imap_arg_atom_is(a, "UTF8")) {
			/* UTF8 (~{n}): a message with UTF-8 header fields (RFC 6855 4) */
			if (!cmd->c->enabled_utf8)
				return "UTF8 needs ENABLE UTF8=ACCEPT first";
			a = imap_cmd_arg(cmd, ++i);
			if (a == NULL || a->type != IMAP_ARG_LIST || a->n != 1)
				return usage;
			a++;
		}
		if (a != NULL && !first && imap_arg_atom_is(a, "CATENATE")) {
			const char *why = catenate_parse(imap_cmd_arg(cmd, ++i), m);

			if (why != NULL)
				return why;
			ao->n++;
			i++;
			continue;
		}
		if (a == NULL || a->type != IMAP_ARG_STREAMED)
			return first ? replace_usage : usage;
		ao->n++;
		i++;
	}
	return first && ao->n != 1 ? replace_usage : NULL;
}

/* The mailbox named by the client, its own or one it may insert into (imap_ns_target): 0, or
   a reply was sent (-1). */
static int append_mailbox(struct imap_cmd *cmd, struct append_op *ao)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *mb = imap_cmd_arg(cmd, cmd_is_replace(cmd) ? 1 : 0);
	struct imap_ns_box b;
	const char *why;
	char *name;
	int rc;

	if ((name = imap_mailbox_name(c, mb->s, mb->len, &why)) == NULL) {
		imap_cmd_no(cmd, why);
		return -1;
	}
	rc = imap_ns_target(cmd, name, cmd_name(cmd), &b);
	free(name);
	if (rc < 0)
		return -1;
	ao->mbox = b.mbox;
	ao->rights = b.rights;
	if (!b.own && store_seen_viewer_ok(c->user))
		ao->viewer = xstrdup(c->user);
	imap_ns_box_release(&b);
	return 0;
}

/* "a:b" for consecutive UIDs (one commit appends them in order), else "a,b,c". */
static void append_uidset(const struct append_op *ao, struct buf *out)
{
	for (unsigned i = 0; i < ao->n; i++) {
		unsigned j = i;

		while (j + 1 < ao->n && ao->msgs[j + 1].uid == ao->msgs[j].uid + 1)
			j++;
		buf_printf(out, "%s%u", i > 0 ? "," : "", ao->msgs[i].uid);
		if (j > i)
			buf_printf(out, ":%u", ao->msgs[j].uid);
		i = j;
	}
}

/* Resumed after the group commit: the reply, APPENDUID (UIDPLUS) when it succeeded. */
static bool append_finish(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct append_op *ao = imap_commit_result(cmd, &pending, &rc);
	struct buf set;

	if (pending)
		return false;
	if (rc == STORE_ENOMSG && ao->replace_uid != 0)
		return imap_cmd_no(cmd, "[EXPUNGEISSUED] The message to replace was expunged");
	if (rc != 0)
		return ao->why != NULL ? imap_cmd_bad(cmd, ao->why)
				       : imap_cmd_store_error(cmd, rc, cmd_name(cmd));
	buf_init(&set, 64, 16 * IMAP_APPEND_MAX);
	append_uidset(ao, &set);
	if (ao->replace_uid != 0) {
		/* RFC 8508 3.2: APPENDUID untagged, then the replaced message's EXPUNGE */
		imap_printf(cmd->c, "* OK [APPENDUID %u %s] Replacement message ready\r\n",
			    ao->uidvalidity, buf_cstr(&set));
		imap_view_expunged(cmd->c, ao->replace_uid);
		imap_cmd_ok(cmd, "REPLACE completed");
	} else {
		imap_cmd_reply(cmd, "OK", "[APPENDUID %u %s] APPEND completed", ao->uidvalidity,
			       buf_cstr(&set));
	}
	buf_release(&set);
	return true;
}

/* Whether the client streamed a blob for the message (a CATENATE message of URLs only has
   none). */
static bool append_msg_streamed(const struct append_msg *m)
{
	return m->cat == NULL || m->ntext > 0;
}

/* Takes the client's message blobs into ao: 0, or a store error. */
static int append_take_blobs(struct imap_client *c, struct append_op *ao)
{
	unsigned j = 0;

	for (unsigned i = 0; i < ao->n; i++) {
		if (!append_msg_streamed(&ao->msgs[i]))
			continue;
		ao->msgs[i].blob = c->append_blobs[j];
		c->append_blobs[j++] = NULL;
	}
	c->nappend = 0;
	c->append_cat = 0;
	return c->append_failed ? STORE_EIO : 0;
}

/* Finishes the blobs (their commit makes them durable): 0, or a store error. */
static int append_finish_blobs(struct append_op *ao)
{
	int rc = 0;

	/* renamed now; fsynced by the commit that references it, in the group committer's
	   thread (before the index commit, so before the OK) */
	for (unsigned i = 0; i < ao->n && rc == 0; i++)
		rc = store_blob_finish_deferred(ao->msgs[i].blob);
	return rc;
}

/* Copies bytes [off, off+len) of fd to the end of b: 0, or STORE_EIO. */
static int catenate_copy(int fd, uint64_t off, uint64_t len, struct store_blob *b)
{
	char chunk[65536];

	while (len > 0) {
		size_t want = len < sizeof(chunk) ? (size_t)len : sizeof(chunk);
		ssize_t n = pread(fd, chunk, want, (off_t)off);

		if (n <= 0 || store_blob_write(b, chunk, (size_t)n) != 0)
			return STORE_EIO;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* The mailbox a URL names: this user's, by name, or (";UID=n" alone, RFC 4469 5) the
   selected one. 0 and *mbox_r, or -1. */
static int catenate_url_mailbox(struct imap_client *c, struct store_txn *t,
				const struct imap_url *u, uint64_t *mbox_r)
{
	const char *why;
	char *name;
	int rc;

	if (u->has_server && (u->user[0] == '\0' || strcasecmp(u->user, c->user) != 0 ||
			      strcasecmp(u->host, c->srv->hostname) != 0))
		return -1; /* anonymous, another user, or another server */
	if (!u->has_mailbox) {
		if (c->state != IMAP_ST_SELECTED || c->view == NULL || c->view->part != c->part)
			return -1; /* none, or another partition's (read in this one's txn) */
		*mbox_r = c->view->mbox;
		return 0;
	}
	/* a URL's mailbox name is UTF-8, whatever the session enabled */
	if ((name = imap_mailbox_name_utf8(u->mailbox, strlen(u->mailbox), &why)) == NULL)
		return -1;
	rc = store_mbox_find(t, c->user_id, name, mbox_r);
	free(name);
	return rc == 0 ? 0 : -1;
}

/* Opens the bytes a URL part names (RFC 4469 5, RFC 5092): 0 and the range [*off_r, *off_r +
   *len_r) of *fd_r (to close), or, *fd_r -1, of mem (HEADER.FIELDS, made in memory); or -1
   (the URL does not resolve: [BADURL]). A URLAUTH URL (RFC 4469 3) is taken when it is the
   user's own and verifies as URLFETCH would verify it (cmd_urlauth.c). */
static int catenate_url_open(struct imap_client *c, struct store_txn *t, const struct imap_arg *a,
			     int *fd_r, uint64_t *off_r, uint64_t *len_r, struct buf *mem)
{
	struct imap_url u;
	uint64_t mbox;
	char *s;
	bool ok;

	if (imap_url_parse(a->s, a->len, &u) < 0 || catenate_url_mailbox(c, t, &u, &mbox) < 0)
		return -1;
	if (u.access != IMAP_URL_ACCESS_NONE) {
		if ((s = imap_arg_dup(a)) == NULL)
			return -1;
		ok = imap_urlauth_verify(c, t, mbox, &u, s);
		free(s);
		if (!ok)
			return -1;
	}
	return imap_url_bytes(c, t, c->part, mbox, &u, fd_r, off_r, len_r, mem);
}

/* Rebuilds a CATENATE message with URL parts into a new blob: its TEXT parts from the blob
   they were streamed into (m->blob, in order; NULL when none), each URL's bytes from the
   message it names. 0 (m->blob replaced), or the NO text (*bad_r the URL for [BADURL]). */
static const char *catenate_build(struct imap_client *c, struct store_txn *t, struct append_msg *m,
				  const struct imap_arg **bad_r)
{
	const struct imap_arg *a = m->cat + 1;
	struct store_blob *nb = NULL;
	uint64_t off = 0, total = 0;
	const char *why = NULL;
	int in = -1;

	if ((m->blob != NULL && store_blob_reader(m->blob, &in) != 0) ||
	    store_blob_new(c->srv->store, c->part, &nb) != 0) {
		if (in >= 0)
			close(in);
		return "[UNAVAILABLE] Cannot store the message now";
	}
	for (uint32_t k = 0; k < m->cat->n && why == NULL; k += 2, a += 2) {
		uint64_t soff, slen;
		struct buf mem;
		int fd;

		if (a[1].type == IMAP_ARG_STREAMED) {
			if (catenate_copy(in, off, a[1].len, nb) != 0)
				why = "[UNAVAILABLE] Cannot store the message now";
			off += a[1].len;
			total += a[1].len;
			continue;
		}
		buf_init(&mem, 1024, IMAP_HEADER_FILE_MAX + 16);
		if (catenate_url_open(c, t, &a[1], &fd, &soff, &slen, &mem) < 0) {
			buf_release(&mem);
			*bad_r = &a[1];
			why = "URL does not resolve";
			break;
		}
		total += slen;
		if (total > c->srv->max_append)
			why = "[TOOBIG] Message too large";
		else if (fd >= 0 ? catenate_copy(fd, soff, slen, nb) != 0
				 : slen > 0 && store_blob_write(nb, mem.data + soff,
								(size_t)slen) != 0)
			why = "[UNAVAILABLE] Cannot store the message now";
		if (fd >= 0)
			close(fd);
		buf_release(&mem);
	}
	if (in >= 0)
		close(in);
	if (why != NULL) {
		store_blob_free(&nb);
		return why;
	}
	store_blob_free(&m->blob);
	m->blob = nb;
	return NULL;
}

/* Builds every CATENATE message with URL parts (one read txn): 0, or the reply was sent. */
static int catenate_urls(struct imap_cmd *cmd, struct append_op *ao)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *bad = NULL;
	struct store_txn *t = NULL;
	const char *why = NULL;
	struct buf u;
	int rc = 0;

	for (unsigned i = 0; i < ao->n && why == NULL; i++) {
		if (ao->msgs[i].nurl == 0)
			continue;
		if (t == NULL &&
		    (rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) != 0)
			break;
		why = catenate_build(c, t, &ao->msgs[i], &bad);
	}
	store_txn_abort(&t);
	if (rc != 0) {
		imap_cmd_store_error(cmd, rc, cmd_name(cmd));
		return -1;
	}
	if (why == NULL)
		return 0;
	if (bad == NULL) {
		imap_cmd_no(cmd, why);
		return -1;
	}
	buf_init(&u, 128, BADURL_TEXT_MAX);
	catenate_url_text(bad, &u);
	imap_cmd_reply(cmd, "NO", "[BADURL %s] %s", buf_cstr(&u), why);
	buf_release(&u);
	return -1;
}

/* The reasons to refuse before taking the blobs: the BAD text, or NULL. */
static const char *append_check(struct imap_cmd *cmd, struct append_op *ao)
{
	struct imap_client *c = cmd->c;
	const char *why = append_parse(cmd, imap_cmd_argc(cmd), ao);
	unsigned streamed = 0;

	for (unsigned i = 0; why == NULL && i < ao->n; i++)
		streamed += append_msg_streamed(&ao->msgs[i]) ? 1 : 0;
	if (why == NULL && streamed != c->nappend)
		why = "APPEND needs message literals";
	if (why == NULL && c->append_nul)
		why = "NUL in a literal: send binary messages as literal8";
	return why;
}

/* REPLACE's message (seq-number or UID, "*" the last): 0 and ao->replace_uid, or the reply
   was sent (-1): BAD for a sequence number outside the mailbox, NO for a UID not in it. */
static int replace_target(struct imap_cmd *cmd, struct append_op *ao)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);
	struct imap_view *v = cmd->c->view;
	uint64_t n = 0;

	if (a == NULL || a->type != IMAP_ARG_ATOM ||
	    ((a->len != 1 || a->s[0] != '*') && str_to_u64(a->s, a->len, UINT32_MAX, &n) < 0)) {
		imap_cmd_bad(cmd, "Expected: REPLACE n mailbox [(flags)] [date-time] literal");
		return -1;
	}
	if (v->readonly) {
		imap_cmd_no(cmd, "[READ-ONLY] Mailbox is read-only");
		return -1;
	}
	if ((v->rights & (STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE)) !=
	    (STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE)) {
		/* the replaced message is expunged: as MOVE out of the mailbox, t and e */
		imap_cmd_no(cmd, "[NOPERM] REPLACE: no right to remove messages here (t, e)");
		return -1;
	}
	if (a->s[0] == '*')
		n = v->n > 0 ? (cmd->uid ? v->msgs[v->n - 1].uid : v->n) : 0;
	if (!cmd->uid && (n == 0 || n > v->n)) {
		imap_cmd_bad(cmd, "Invalid message sequence number");
		return -1;
	}
	if (cmd->uid && (n == 0 || imap_view_seq(v, (uint32_t)n) == 0)) {
		imap_cmd_no(cmd, "[NONEXISTENT] No message with that UID");
		return -1;
	}
	ao->replace_mbox = v->mbox;
	ao->replace_uid = cmd->uid ? (uint32_t)n : v->msgs[n - 1].uid;
	return 0;
}

bool cmd_append(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct append_op *ao;
	const char *why;
	int rc;

	if (cmd->ctx != NULL)
		return append_finish(cmd);
	ao = xcalloc(1, sizeof(*ao));
	if ((why = append_check(cmd, ao)) != NULL) {
		free(ao);
		imap_client_append_reset(c);
		return imap_cmd_bad(cmd, why);
	}
	if (cmd_is_replace(cmd) && replace_target(cmd, ao) < 0) {
		free(ao); /* the reply reset the client's blobs */
		return true;
	}
	rc = append_take_blobs(c, ao);
	if (rc != 0) {
		append_op_free(ao);
		return imap_cmd_store_error(cmd, rc, cmd_name(cmd));
	}
	if (append_mailbox(cmd, ao) < 0 || catenate_urls(cmd, ao) < 0) {
		append_op_free(ao);
		return true;
	}
	if ((rc = append_finish_blobs(ao)) != 0) {
		append_op_free(ao);
		return imap_cmd_store_error(cmd, rc, cmd_name(cmd));
	}
	if (ao->replace_uid != 0 && STORE_ID_PART(ao->mbox) != STORE_ID_PART(ao->replace_mbox)) {
		append_op_free(ao);
		return imap_cmd_no(cmd, "[CANNOT] REPLACE across partitions");
	}
	imap_commit_start(cmd, STORE_ID_PART(ao->mbox), NULL, append_fn, ao, append_op_free);
	return false;
}

/* cmd_store.c — owns STORE (FLAGS, +FLAGS, -FLAGS, .SILENT; keywords), EXPUNGE and UID
 * EXPUNGE (UIDPLUS). Changes commit before the reply; FETCH responses report the flags after
 * the change. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct store_result {
	uint32_t uid;
	unsigned flags;
	uint64_t kw, modseq;
};

struct store_op {
	struct imap_client *c;
	const struct imap_arg *flags_arg;
	enum store_flag_op op;
	struct imap_seqset *uids;
	struct store_result *res;
	size_t nres;
	const char *why;
	bool noperm;                 /* refused for want of a right (store_permitted) */
	uint64_t unchangedsince;     /* CONDSTORE; 0: none */
	struct imap_seqset modified; /* UIDs refused by UNCHANGEDSINCE */
	bool silent;
};

/* Whether rights let the client change flags and keywords kw by op (RFC 4314 4: \Seen
   needs s, \Deleted t, the others w; replacing the flags changes every one). */
static bool store_permitted(uint32_t rights, enum store_flag_op op, unsigned flags, uint64_t kw)
{
	uint32_t need = 0;

	if (op == STORE_FLAGS_SET)
		return (rights & (STORE_ACL_SEEN | STORE_ACL_WRITE | STORE_ACL_DELETE_MSG)) ==
		       (STORE_ACL_SEEN | STORE_ACL_WRITE | STORE_ACL_DELETE_MSG);
	if (flags & STORE_SEEN)
		need |= STORE_ACL_SEEN;
	if (flags & STORE_DELETED)
		need |= STORE_ACL_DELETE_MSG;
	if ((flags & ~(unsigned)(STORE_SEEN | STORE_DELETED)) != 0 || kw != 0)
		need |= STORE_ACL_WRITE;
	return (rights & need) == need;
}

static int store_fn(struct store_txn *t, void *arg)
{
	struct store_op *so = arg;
	struct imap_view *v = so->c->view;
	unsigned flags;
	uint64_t kw;
	int rc;

	so->nres = 0;
	imap_seqset_clear(&so->modified);
	rc = imap_flags_parse(so->flags_arg, t, v->mbox, so->op != STORE_FLAGS_REMOVE, &flags, &kw,
			      &so->why);
	if (rc < 0)
		return STORE_EINVAL;
	if (!store_permitted(v->rights, so->op, flags, kw)) {
		so->noperm = true;
		return STORE_ENOTSUP;
	}
	for (size_t i = 0; i < v->n; i++) {
		struct store_msg m;

		if (!imap_seqset_has(so->uids, v->msgs[i].uid))
			continue;
		if (v->viewer != NULL) /* another user's mailbox: \Seen is the client's own */
			rc = store_seen_flags(t, v->mbox, v->viewer, v->msgs[i].uid, so->op, flags,
					      kw, so->unchangedsince, &m);
		else
			rc = store_msg_flags(t, v->mbox, v->msgs[i].uid, so->op, flags, kw,
					     so->unchangedsince, &m);
		if (rc == STORE_ENOMSG)
			continue;
		if (rc == STORE_ELOCKED) {
			imap_seqset_add(&so->modified, v->msgs[i].uid, v->msgs[i].uid);
			continue;
		}
		if (rc != 0)
			return rc;
		so->res[so->nres].uid = m.uid;
		so->res[so->nres].flags = m.flags;
		so->res[so->nres].kw = m.keywords;
		so->res[so->nres].modseq = m.modseq;
		so->nres++;
	}
	return 0;
}

/* Reads [(UNCHANGEDSINCE n)] [+|-]FLAGS[.SILENT] flags into so; NULL or the BAD text. */
static const char *store_parse(struct imap_cmd *cmd, struct store_op *so, bool *silent)
{
	const struct imap_arg *what = imap_cmd_arg(cmd, 1);
	size_t argc = imap_cmd_argc(cmd), wl;
	const char *w;

	so->flags_arg = imap_cmd_arg(cmd, 2);
	if (argc == 4 && what != NULL && what->type == IMAP_ARG_LIST) {
		/* (UNCHANGEDSINCE n) — RFC 7162 */
		const struct imap_arg *v = what + 2;

		if (what->n != 2 || !imap_arg_atom_is(what + 1, "UNCHANGEDSINCE") ||
		    v->type != IMAP_ARG_ATOM ||
		    str_to_u64(v->s, v->len, INT64_MAX, &so->unchangedsince) < 0)
			return "Invalid STORE modifier";
		imap_view_enable_condstore(cmd->c);
		what = imap_cmd_arg(cmd, 2);
		so->flags_arg = imap_cmd_arg(cmd, 3);
		argc--;
	}
	if (argc != 3 || imap_cmd_arg(cmd, 0)->type != IMAP_ARG_ATOM ||
	    what->type != IMAP_ARG_ATOM)
		return "Expected: STORE set [+|-]FLAGS[.SILENT] (flags)";
	w = what->s;
	wl = what->len;
	if (wl > 0 && (w[0] == '+' || w[0] == '-')) {
		so->op = w[0] == '+' ? STORE_FLAGS_ADD : STORE_FLAGS_REMOVE;
		w++;
		wl--;
	}
	*silent = str_caseeq(w, wl, "FLAGS.SILENT", 12);
	if (!*silent && !str_caseeq(w, wl, "FLAGS", 5))
		return "Expected FLAGS, +FLAGS or -FLAGS";
	return NULL;
}

/* The FETCH responses of a STORE (after a new keyword's FLAGS announcement). */
static void store_report(struct imap_cmd *cmd, const struct store_op *so, bool silent)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nkw = 0;

	store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t);
	if (t != NULL && store_mbox_keywords(t, c->view->mbox, names, &nkw) == 0 &&
	    nkw > c->view->nkeywords)
		imap_view_send_flags(c, t);
	for (size_t i = 0; i < so->nres; i++) {
		uint32_t seq = imap_view_seq(c->view, so->res[i].uid);

		imap_view_set_flags(c->view, so->res[i].uid, so->res[i].flags, so->res[i].kw);
		if (silent || seq == 0)
			continue;
		imap_printf(c, "* %u FETCH (", seq);
		if (cmd->uid || c->enabled_qresync) /* RFC 7162 3.2.4 */
			imap_printf(c, "UID %u ", so->res[i].uid);
		imap_write(c, "FLAGS ", 6);
		imap_flags_write(c, so->res[i].flags, so->res[i].kw,
				 c->view->msgs[seq - 1].flags & IMAP_VF_RECENT, t);
		if (c->enabled_condstore)
			imap_printf(c, " MODSEQ (%" PRIu64 ")", so->res[i].modseq);
		imap_write(c, ")\r\n", 3);
	}
	store_txn_abort(&t);
}

/* The tagged reply: [MODIFIED set] when UNCHANGEDSINCE refused some messages. */
static bool store_finish(struct imap_cmd *cmd, struct store_op *so)
{
	struct imap_seqset seqs = { 0 };
	struct buf b;

	if (so->modified.n == 0)
		return imap_cmd_ok(cmd, "STORE completed");
	/* UIDs for UID STORE, sequence numbers otherwise */
	for (size_t i = 0; i < so->modified.n; i++) {
		uint32_t n = cmd->uid ? so->modified.v[i].lo
				      : imap_view_seq(cmd->c->view, so->modified.v[i].lo);

		imap_seqset_add(&seqs, n, n);
	}
	imap_seqset_resolve(&seqs, 0);
	buf_init(&b, 64, BUF_INPUT_BOUNDED); /* the mailbox's numbers */
	imap_seqset_format(&seqs, &b);
	imap_seqset_release(&seqs);
	/* the reply ends the command and frees so (imap_commit.c) */
	imap_cmd_reply(cmd, "OK", "[MODIFIED %s] Conditional STORE failed", buf_cstr(&b));
	buf_release(&b);
	return true;
}

static void store_op_free(void *arg)
{
	struct store_op *so = arg;

	imap_seqset_release(so->uids);
	free(so->uids);
	imap_seqset_release(&so->modified);
	free(so->res);
	free(so);
}

/* Resumed after the group commit: FETCH responses and the reply. */
static bool store_resume(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct store_op *so = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc != 0 && so->noperm)
		return imap_cmd_no(cmd, "[NOPERM] STORE: no right to change these flags here");
	if (rc != 0)
		return so->why != NULL ? imap_cmd_bad(cmd, so->why)
				       : imap_cmd_store_error(cmd, rc, "STORE");
	store_report(cmd, so, so->silent);
	return store_finish(cmd, so);
}

bool cmd_store(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *set = imap_cmd_arg(cmd, 0);
	struct store_op *so;
	const char *why;

	if (cmd->ctx != NULL)
		return store_resume(cmd);
	so = xcalloc(1, sizeof(*so));
	so->c = c;
	so->op = STORE_FLAGS_SET;
	so->uids = xcalloc(1, sizeof(*so->uids));
	if ((why = store_parse(cmd, so, &so->silent)) == NULL && c->view->readonly) {
		store_op_free(so);
		return imap_cmd_no(cmd, "[READ-ONLY] Mailbox is read-only");
	}
	if (why != NULL || imap_view_resolve(c, set->s, set->len, cmd->uid, so->uids, &why) < 0) {
		store_op_free(so);
		return imap_cmd_bad(cmd, why);
	}
	so->res = xcalloc(c->view->n + 1, sizeof(*so->res));
	imap_commit_start_flags(cmd, c->view->part, store_fn, so, store_op_free);
	return false;
}

struct expunge_op {
	struct imap_view *v;
	bool by_uid;
	struct imap_seqset uids; /* UID EXPUNGE: only these */
	uint32_t *done;
	size_t ndone;
};

static int expunge_fn(struct store_txn *t, void *arg)
{
	struct expunge_op *eo = arg;
	uint32_t *cand = NULL;
	size_t n = 0;
	int rc;

	free(eo->done);
	eo->done = NULL;
	eo->ndone = 0;
	if (!eo->by_uid)
		return store_msg_expunge(t, eo->v->mbox, NULL, 0, &eo->done, &eo->ndone);
	cand = xcalloc(eo->v->n + 1, sizeof(*cand));
	for (size_t i = 0; i < eo->v->n; i++) {
		struct store_msg m;

		if (imap_seqset_has(&eo->uids, eo->v->msgs[i].uid) &&
		    store_msg_get(t, eo->v->mbox, eo->v->msgs[i].uid, &m) == 0 &&
		    (m.flags & STORE_DELETED))
			cand[n++] = m.uid;
	}
	rc = n == 0 ? 0 : store_msg_expunge(t, eo->v->mbox, cand, n, &eo->done, &eo->ndone);
	free(cand);
	return rc;
}

static void expunge_op_free(void *arg)
{
	struct expunge_op *eo = arg;

	imap_seqset_release(&eo->uids);
	free(eo->done);
	free(eo);
}

/* Resumed after the group commit: EXPUNGE (or VANISHED) responses and the reply. */
static bool expunge_resume(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct expunge_op *eo = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "EXPUNGE");
	for (size_t i = 0; i < eo->ndone; i++)
		imap_view_expunged(cmd->c, eo->done[i]);
	return imap_cmd_ok(cmd, "EXPUNGE completed");
}

bool cmd_expunge(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct expunge_op *eo;
	const char *why;

	if (cmd->ctx != NULL)
		return expunge_resume(cmd);
	if (!cmd->uid && cmd->nargs != 0)
		return imap_cmd_bad(cmd, "EXPUNGE takes no arguments");
	eo = xcalloc(1, sizeof(*eo));
	eo->v = c->view;
	if (cmd->uid) {
		const struct imap_arg *set = imap_cmd_arg(cmd, 0);

		eo->by_uid = true;
		why = "Expected: UID EXPUNGE uid-set";
		if (imap_cmd_argc(cmd) != 1 || set->type != IMAP_ARG_ATOM ||
		    imap_view_resolve(c, set->s, set->len, true, &eo->uids, &why) < 0) {
			expunge_op_free(eo);
			return imap_cmd_bad(cmd, why);
		}
	}
	if (c->view->readonly) {
		expunge_op_free(eo);
		return imap_cmd_no(cmd, "[READ-ONLY] Mailbox is read-only");
	}
	if (!(c->view->rights & STORE_ACL_EXPUNGE)) {
		expunge_op_free(eo);
		return imap_cmd_no(cmd, "[NOPERM] EXPUNGE: no right to expunge here (e)");
	}
	imap_commit_start(cmd, c->view->part, NULL, expunge_fn, eo, expunge_op_free);
	return false;
}

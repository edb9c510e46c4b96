/* cmd_copy.c — owns COPY, MOVE (RFC 6851) and their UID forms, with COPYUID (UIDPLUS). Bodies
 * are never copied: the store adds references. */
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct copy_op {
	uint64_t src, dst;
	uint32_t *uids;
	size_t n;
	bool move;
	uint32_t rights; /* the client's on dst: which flags the copies keep (RFC 4314 4) */
	uint32_t *src_done, *dst_uids;
	size_t ndone;
	/* private \Seen (store_seen.c): the client's name on src, on dst, when another user's */
	char *src_viewer, *dst_viewer;
	bool *seen; /* per uids[i]: the client's \Seen of it before the copy */
};

/* The copies' \Seen is the client's: its private one on src when src is another user's,
   kept (with s) as its private one on dst when dst is another user's, else as the copy's
   own flag. seen[i] was read before the copy (a MOVE drops src's rows). */
static int copy_seen(struct store_txn *t, struct copy_op *co)
{
	size_t j = 0;
	int rc = 0;

	for (size_t i = 0; i < co->ndone && rc == 0; i++) {
		struct store_msg m;
		bool seen;

		while (j < co->n && co->uids[j] != co->src_done[i])
			j++;
		if (j == co->n)
			break;
		if ((rc = store_msg_get(t, co->dst, co->dst_uids[i], &m)) != 0)
			break;
		seen = co->src_viewer != NULL ? co->seen[j] : (m.flags & STORE_SEEN) != 0;
		seen = seen && (co->rights & STORE_ACL_SEEN);
		if (co->dst_viewer != NULL) {
			if ((m.flags & STORE_SEEN) &&
			    (rc = store_msg_flags(t, co->dst, m.uid, STORE_FLAGS_REMOVE,
						  STORE_SEEN, 0, 0, NULL)) != 0)
				break;
			if (seen)
				rc = store_seen_set(t, co->dst, co->dst_viewer, m.uid, true, 0,
						    NULL);
		} else if (seen != ((m.flags & STORE_SEEN) != 0)) {
			rc = store_msg_flags(t, co->dst, m.uid,
					     seen ? STORE_FLAGS_ADD : STORE_FLAGS_REMOVE,
					     STORE_SEEN, 0, 0, NULL);
		}
	}
	return rc;
}

static int copy_fn(struct store_txn *t, void *arg)
{
	struct copy_op *co = arg;

	free(co->src_done);
	free(co->dst_uids);
	co->src_done = co->dst_uids = NULL;
	co->ndone = 0;
	if (co->n == 0)
		return 0;
	for (size_t i = 0; co->src_viewer != NULL && i < co->n; i++) {
		struct store_seen s;
		int rc = store_seen_get(t, co->src, co->src_viewer, co->uids[i], &s);

		if (rc != 0 && rc != STORE_ENOMSG)
			return rc;
		co->seen[i] = s.seen;
	}
	int rc = store_msg_copy_keep(t, co->src, co->dst, co->uids, co->n, co->move,
				     imap_ns_keep_flags(co->rights),
				     (co->rights & STORE_ACL_WRITE) != 0, &co->src_done,
				     &co->dst_uids, &co->ndone);

	if (rc == 0 && (co->src_viewer != NULL || co->dst_viewer != NULL))
		rc = copy_seen(t, co);
	return rc;
}

static void uid_list(struct buf *b, const uint32_t *v, size_t n)
{
	/* both sets of COPYUID must pair up in order: listed one by one */
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "%s%u", i ? "," : "", v[i]);
}

/* [COPYUID ...] on the tagged OK of COPY, or on an untagged OK before MOVE's expunges. */
static void copy_reply(struct imap_cmd *cmd, struct copy_op *co, uint32_t uidvalidity, bool move)
{
	struct imap_client *c = cmd->c;
	struct buf code;

	buf_init(&code, 256, BUF_INPUT_BOUNDED); /* two UID sets of the messages copied */
	if (co->ndone > 0) {
		buf_printf(&code, "[COPYUID %u ", uidvalidity);
		uid_list(&code, co->src_done, co->ndone);
		buf_putc(&code, ' ');
		uid_list(&code, co->dst_uids, co->ndone);
		buf_puts(&code, "] ");
	}
	if (move) {
		if (code.len > 0)
			imap_printf(c, "* OK %sMoved\r\n", buf_cstr(&code));
		for (size_t i = 0; i < co->ndone; i++)
			imap_view_expunged(c, co->src_done[i]);
		buf_reset(&code);
	}
	buf_puts(&code, move ? "MOVE completed" : "COPY completed");
	free(co->src_done);
	free(co->dst_uids);
	co->src_done = co->dst_uids = NULL;
	imap_cmd_ok(cmd, buf_cstr(&code));
	buf_release(&code);
}

static void copy_op_free(void *arg)
{
	struct copy_op *co = arg;

	free(co->uids);
	free(co->src_done);
	free(co->dst_uids);
	free(co->src_viewer);
	free(co->dst_viewer);
	free(co->seen);
	free(co);
}

/* Resumed after the group commit: COPYUID and the reply. */
static bool copy_resume(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	struct store_status st;
	bool pending;
	int rc;
	struct copy_op *co = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc == 0 && (rc = store_txn_begin(c->srv->store, STORE_ID_PART(co->dst), STORE_TXN_READ,
					     &t)) == 0) {
		rc = store_mbox_status(t, co->dst, &st);
		store_txn_abort(&t);
	}
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, co->move ? "MOVE" : "COPY");
	copy_reply(cmd, co, st.uidvalidity, co->move);
	return true;
}

bool cmd_copy(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *set = imap_cmd_arg(cmd, 0), *mb = imap_cmd_arg(cmd, 1);
	bool move = (cmd->def_flags & CMD_MOVE) != 0;
	struct imap_seqset uids = { 0 };
	struct copy_op *co;
	struct imap_ns_box b;
	const char *why;
	char *name;
	int rc;

	if (cmd->ctx != NULL)
		return copy_resume(cmd);
	if (imap_cmd_argc(cmd) != 2 || set->type != IMAP_ARG_ATOM || !imap_arg_is_astring(mb))
		return imap_cmd_bad(cmd, move ? "Expected: MOVE set mailbox"
					      : "Expected: COPY set mailbox");
	if (imap_view_resolve(c, set->s, set->len, cmd->uid, &uids, &why) < 0) {
		imap_seqset_release(&uids);
		return imap_cmd_bad(cmd, why);
	}
	if ((name = imap_mailbox_name(cmd->c, mb->s, mb->len, &why)) == NULL) {
		imap_seqset_release(&uids);
		return imap_cmd_no(cmd, why);
	}
	if (move && c->view->readonly) {
		free(name);
		imap_seqset_release(&uids);
		return imap_cmd_no(cmd, "[READ-ONLY] Mailbox is read-only");
	}
	if (move && (c->view->rights & (STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE)) !=
			    (STORE_ACL_DELETE_MSG | STORE_ACL_EXPUNGE)) {
		free(name);
		imap_seqset_release(&uids);
		return imap_cmd_no(cmd, "[NOPERM] MOVE: no right to remove messages here (t, e)");
	}
	rc = imap_ns_target(cmd, name, move ? "MOVE" : "COPY", &b);
	free(name);
	if (rc < 0) {
		imap_seqset_release(&uids);
		return true;
	}
	imap_ns_box_release(&b);
	bool dst_other = !b.own && store_seen_viewer_ok(c->user);

	if (STORE_ID_PART(b.mbox) != c->view->part) {
		/* the two mailboxes' owners are in two store partitions: the copy would be one
		   write in two environments */
		imap_seqset_release(&uids);
		return imap_cmd_reply(cmd, "NO",
				      "[CANNOT] %s: the two mailboxes are in different store "
				      "partitions; APPEND the messages instead",
				      move ? "MOVE" : "COPY");
	}
	co = xcalloc(1, sizeof(*co));
	co->src = c->view->mbox;
	co->dst = b.mbox;
	co->rights = b.rights;
	co->move = move;
	co->src_viewer = c->view->viewer != NULL ? xstrdup(c->view->viewer) : NULL;
	co->dst_viewer = dst_other ? xstrdup(c->user) : NULL;
	co->seen = xcalloc(c->view->n + 1, sizeof(*co->seen));
	co->uids = xcalloc(c->view->n + 1, sizeof(*co->uids));
	for (size_t i = 0; i < c->view->n; i++)
		if (imap_seqset_has(&uids, c->view->msgs[i].uid))
			co->uids[co->n++] = c->view->msgs[i].uid;
	imap_seqset_release(&uids);
	/* nothing to copy is a write of nothing: the commit is a no-op, the reply the same */
	imap_commit_start(cmd, c->view->part, NULL, copy_fn, co, copy_op_free);
	return false;
}

/* cmd_select.c — owns SELECT, EXAMINE, STATUS, CLOSE and UNSELECT. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

/* Resolves a validated name to a mailbox id (the client's own, or one another user lets it
   read: imap_ns.c); *own_r: whether it is the client's, *rights_r the client's rights. 0, STORE_ENOMBOX, STORE_ENOTSUP
   (visible but no 'r': NOPERM) or a store error. */
static int find_mbox(struct imap_client *c, const char *name, uint64_t *id_r, bool *own_r,
		     uint32_t *rights_r)
{
	struct store_txn *t = NULL;
	struct imap_ns_box b;
	int rc;

	if ((rc = imap_ns_find(c, name, &b)) != 0)
		return rc;
	*own_r = b.own;
	*rights_r = b.rights;
	if (!b.own) {
		*id_r = b.mbox;
		imap_ns_box_release(&b);
		return b.rights & STORE_ACL_READ ? 0 : STORE_ENOTSUP;
	}
	imap_ns_box_release(&b);
	if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_mbox_find(t, c->user_id, name, id_r);
	store_txn_abort(&t);
	return rc;
}

/* find_mbox's error as the reply of verb */
static bool find_error(struct imap_cmd *cmd, int rc, const char *verb)
{
	if (rc == STORE_ENOTSUP)
		return imap_cmd_reply(cmd, "NO", "[NOPERM] %s: no right to read this mailbox",
				      verb);
	return imap_cmd_store_error(cmd, rc, verb);
}

struct qresync {
	bool on;
	uint64_t uidvalidity, modseq;
	struct imap_seqset known;
	bool has_known;
};

/* (QRESYNC (uidvalidity modseq [known-uids [seq-match]])): 0, or -1 (bad syntax). */
static int parse_qresync(const struct imap_arg *q, struct qresync *qr)
{
	const struct imap_arg *uv = q + 1, *ms, *known;

	if (q->type != IMAP_ARG_LIST || q->n < 2 || uv->type != IMAP_ARG_ATOM)
		return -1;
	ms = imap_arg_next(uv);
	if (ms->type != IMAP_ARG_ATOM ||
	    str_to_u64(uv->s, uv->len, UINT32_MAX, &qr->uidvalidity) < 0 ||
	    str_to_u64(ms->s, ms->len, INT64_MAX, &qr->modseq) < 0 || qr->uidvalidity == 0)
		return -1;
	if (q->n >= 3) {
		known = imap_arg_next(ms);
		if (known->type != IMAP_ARG_ATOM ||
		    imap_seqset_parse(&qr->known, known->s, known->len, IMAP_SEQSET_RANGES_MAX) <
			    0 ||
		    qr->known.has_star)
			return -1;
		imap_seqset_resolve(&qr->known, 0);
		qr->has_known = true; /* seq-match data is accepted and not needed */
	}
	qr->on = true;
	return 0;
}

/* The SELECT parameter list: (CONDSTORE) or (QRESYNC (...)). */
static int select_params(struct imap_cmd *cmd, const struct imap_arg *p, struct qresync *qr)
{
	const struct imap_arg *a;

	if (p->type != IMAP_ARG_LIST || p->n == 0)
		return -1;
	for (a = p + 1; a <= p + p->span; a = imap_arg_next(a)) {
		if (imap_arg_atom_is(a, "CONDSTORE")) {
			cmd->c->enabled_condstore = true; /* SELECT says HIGHESTMODSEQ itself */
		} else if (imap_arg_atom_is(a, "QRESYNC") && cmd->c->enabled_qresync) {
			a = imap_arg_next(a);
			if (a > p + p->span || parse_qresync(a, qr) < 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

/* After SELECT (QRESYNC ...): what vanished and what changed since the client's modseq. */
static void qresync_report(struct imap_client *c, const struct qresync *qr)
{
	struct store_txn *t = NULL;
	struct store_iter *it;
	struct store_msg m;

	if (qr->uidvalidity != c->view->uidvalidity ||
	    store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t) != 0)
		return;
	imap_view_vanished(c, t, qr->modseq, qr->has_known ? &qr->known : NULL);
	/* on another user's mailbox a private \Seen change leaves the message's MODSEQ:
	   every message is looked at */
	if (store_msg_iter(t, c->view->mbox, 1, UINT32_MAX,
			   c->view->viewer != NULL ? 0 : qr->modseq, &it) == 0) {
		while (store_iter_next(it, &m) == 1) {
			uint32_t seq = imap_view_seq(c->view, m.uid);

			if (seq == 0 || imap_view_overlay(c->view, t, &m) != 0 ||
			    m.modseq <= qr->modseq)
				continue;
			imap_printf(c, "* %u FETCH (UID %u FLAGS ", seq, m.uid);
			imap_flags_write(c, m.flags, m.keywords,
					 c->view->msgs[seq - 1].flags & IMAP_VF_RECENT, t);
			imap_printf(c, " MODSEQ (%" PRIu64 "))\r\n", m.modseq);
		}
		store_iter_free(&it);
	}
	store_txn_abort(&t);
}

/* A SELECT between its \Recent claim (in the group commit) and the view. */
struct select_op {
	struct qresync qr;
	uint64_t id;
	char *name;
	bool readonly;   /* EXAMINE, or another user's mailbox without s, w, t or e */
	uint32_t rights; /* the client's on it */
	struct imap_recent_claim claim;
};

static void select_op_free(void *arg)
{
	struct select_op *so = arg;

	imap_seqset_release(&so->qr.known);
	free(so->name);
	free(so);
}

static int select_claim_fn(struct store_txn *t, void *arg)
{
	struct select_op *so = arg;

	return imap_view_take_recent_fn(t, &so->claim);
}

/* Opens the view with the claimed \Recent UIDs and replies; frees so. */
static bool select_finish(struct imap_cmd *cmd, struct select_op *so, uint32_t first_recent,
			  bool owned)
{
	struct imap_client *c = cmd->c;
	bool examine = (cmd->def_flags & CMD_READONLY) != 0, readonly = so->readonly;
	int rc = imap_view_open(cmd, so->id, so->name, readonly, first_recent);

	if (rc == 0)
		c->view->rights = so->rights;

	if (rc == 0)
		imap_urlauth_select(c);
	if (rc == 0 && so->qr.on)
		qresync_report(c, &so->qr);
	if (!owned) /* else the command's end frees it (imap_commit.c) */
		select_op_free(so);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, examine ? "EXAMINE" : "SELECT");
	imap_client_set_state(c, IMAP_ST_SELECTED);
	return imap_cmd_reply(cmd, "OK", "[%s] %s completed",
			      readonly ? "READ-ONLY" : "READ-WRITE",
			      examine ? "EXAMINE" : "SELECT");
}

/* SELECT claims the mailbox's \Recent messages for this session: when there are any, the
   claim is a write, which goes through the group commit (the loop does not wait for it);
   the view opens once it is back. */
bool cmd_select(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool readonly = (cmd->def_flags & CMD_READONLY) != 0;
	struct select_op *so;
	uint32_t first = UINT32_MAX;
	bool own = true;
	int rc;

	if (cmd->ctx != NULL) {
		bool pending;

		so = imap_commit_result(cmd, &pending, &rc);
		if (pending)
			return false;
		if (rc != 0)
			return imap_cmd_store_error(cmd, rc, "SELECT");
		return select_finish(cmd, so, so->claim.first, true);
	}
	so = xcalloc(1, sizeof(*so));
	if (imap_cmd_argc(cmd) == 2) {
		if (select_params(cmd, imap_cmd_arg(cmd, 1), &so->qr) < 0) {
			select_op_free(so);
			return imap_cmd_bad(cmd, "Invalid SELECT parameters");
		}
	} else if (imap_cmd_argc(cmd) != 1) {
		select_op_free(so);
		return imap_cmd_bad(cmd, "Expected: SELECT mailbox");
	}
	if (c->view != NULL && c->enabled_qresync)
		imap_printf(c, "* OK [CLOSED] Previous mailbox closed\r\n");
	/* a failed SELECT leaves no mailbox selected (RFC 3501 6.3.1) */
	imap_view_close(c);
	imap_client_set_state(c, IMAP_ST_AUTH);
	if ((so->name = imap_mailbox_arg(cmd, 0)) == NULL) {
		select_op_free(so);
		return true;
	}
	if ((rc = find_mbox(c, so->name, &so->id, &own, &so->rights)) != 0) {
		select_op_free(so);
		return find_error(cmd, rc, readonly ? "EXAMINE" : "SELECT");
	}
	/* another user's mailbox is read-write with a right to change something in it (RFC
	   4314 4: s w t e; STORE and EXPUNGE check each), its \Recent left to its owner */
	readonly |= (so->rights & (STORE_ACL_SEEN | STORE_ACL_WRITE | STORE_ACL_DELETE_MSG |
				   STORE_ACL_EXPUNGE)) == 0;
	so->readonly = readonly;
	if (!readonly && own && imap_view_recent_check(c, so->id, &first)) {
		so->claim.mbox = so->id;
		so->claim.first = UINT32_MAX;
		imap_commit_start_flags(cmd, STORE_ID_PART(so->id), select_claim_fn, so,
					select_op_free);
		return false;
	}
	return select_finish(cmd, so, readonly ? UINT32_MAX : first, false);
}

static const char *const status_names[] = { "MESSAGES",    "RECENT",  "UIDNEXT",
					    "UIDVALIDITY", "UNSEEN",  "HIGHESTMODSEQ",
					    "SIZE",        "DELETED", "MAILBOXID" };

bool imap_status_items_ok(const struct imap_client *c, const struct imap_arg *items)
{
	if (items == NULL || items->type != IMAP_ARG_LIST || items->n == 0)
		return false;
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++) {
		bool known = false;

		for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
			known |= imap_arg_atom_is(a, status_names[i]);
		if (c->rev2 && imap_arg_atom_is(a, "RECENT"))
			known = false; /* IMAP4rev2 has no \Recent */
		if (!known)
			return false;
	}
	return true;
}

void imap_mailboxid(uint64_t mbox, char *out)
{
	snprintf(out, IMAP_OBJECTID_MAX, "F%016" PRIx64, mbox);
}

void imap_emailid(uint64_t blob, char *out)
{
	snprintf(out, IMAP_OBJECTID_MAX, "M%016" PRIx64, blob);
}

void imap_status_write(struct imap_client *c, const char *name, size_t len, uint64_t mbox,
		       const struct store_status *st, const struct imap_arg *items)
{
	bool first = true;

	imap_write(c, "* STATUS ", 9);
	imap_write_mailbox(c, name, len);
	imap_write(c, " (", 2);
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++) {
		if (imap_arg_atom_is(a, "MAILBOXID")) { /* RFC 8474 */
			char id[IMAP_OBJECTID_MAX];

			imap_mailboxid(mbox, id);
			imap_printf(c, "%sMAILBOXID (%s)", first ? "" : " ", id);
			first = false;
			continue;
		}
		uint64_t v = imap_arg_atom_is(a, "MESSAGES")      ? st->messages
			     : imap_arg_atom_is(a, "RECENT")      ? st->recent
			     : imap_arg_atom_is(a, "UIDNEXT")     ? st->uidnext
			     : imap_arg_atom_is(a, "UIDVALIDITY") ? st->uidvalidity
			     : imap_arg_atom_is(a, "UNSEEN")      ? st->unseen
			     : imap_arg_atom_is(a, "SIZE")        ? st->size
			     : imap_arg_atom_is(a, "DELETED")     ? st->deleted
								  : st->highestmodseq;
		char up[16];

		str_lcpy(up, a->s, sizeof(up));
		for (char *p = up; *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		imap_printf(c, "%s%s %" PRIu64, first ? "" : " ", up, v);
		first = false;
	}
	imap_write(c, ")\r\n", 3);
}

bool cmd_status(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *items = imap_cmd_arg(cmd, 1);
	struct store_txn *t = NULL;
	struct store_status st;
	uint64_t id;
	uint32_t rights;
	bool own;
	char *name;
	int rc;

	if (imap_cmd_argc(cmd) != 2 || items->type != IMAP_ARG_LIST || items->n == 0)
		return imap_cmd_bad(cmd, "Expected: STATUS mailbox (items)");
	if (!imap_status_items_ok(c, items))
		return imap_cmd_bad(cmd, "Unknown STATUS item");
	if ((name = imap_mailbox_arg(cmd, 0)) == NULL)
		return true;
	rc = find_mbox(c, name, &id, &own, &rights);
	if (rc == 0 &&
	    (rc = store_txn_begin(c->srv->store, STORE_ID_PART(id), STORE_TXN_READ, &t)) == 0) {
		rc = imap_mbox_status(c, t, id, &st);
		store_txn_abort(&t);
	}
	if (rc != 0) {
		free(name);
		return find_error(cmd, rc, "STATUS");
	}
	imap_status_write(c, name, strlen(name), id, &st, items);
	free(name);
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++)
		if (imap_arg_atom_is(a, "HIGHESTMODSEQ")) /* CONDSTORE enabling (RFC 7162 3.1) */
			imap_view_enable_condstore(c);
	return imap_cmd_ok(cmd, "STATUS completed");
}

static int close_expunge_fn(struct store_txn *t, void *arg)
{
	uint64_t *mbox = arg;

	return store_msg_expunge(t, *mbox, NULL, 0, NULL, NULL);
}

/* CLOSE's silent expunge goes through the group commit; the view closes once it is back
   (RFC 3501 6.4.2: no EXPUNGE responses). */
bool cmd_close(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool unselect = (cmd->def_flags & CMD_ALT) != 0;
	int rc = 0;

	if (cmd->ctx != NULL) {
		bool pending;

		(void)imap_commit_result(cmd, &pending, &rc);
		if (pending)
			return false;
	} else {
		if (cmd->nargs != 0)
			return imap_cmd_bad(cmd, unselect ? "UNSELECT takes no arguments"
							  : "CLOSE takes no arguments");
		if (!unselect && !c->view->readonly && (c->view->rights & STORE_ACL_EXPUNGE)) {
			uint64_t *mbox = xmalloc(sizeof(*mbox));

			*mbox = c->view->mbox;
			imap_commit_start(cmd, c->view->part, NULL, close_expunge_fn, mbox, free);
			return false;
		}
	}
	imap_view_close(c);
	imap_client_set_state(c, IMAP_ST_AUTH);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "CLOSE");
	return imap_cmd_ok(cmd, unselect ? "UNSELECT completed" : "CLOSE completed");
}

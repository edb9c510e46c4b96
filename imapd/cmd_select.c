/* cmd_select.c — owns SELECT, EXAMINE, STATUS, CLOSE and UNSELECT. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "imapd/imapd.h"
#include "store/store.h"

/* Resolves a validated name to a mailbox id; 0 or a store error. */
static int find_mbox(struct imap_client *c, const char *name, uint64_t *id_r)
{
	struct store_txn *t = NULL;
	int rc;

	if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_mbox_find(t, c->user_id, name, id_r);
	store_txn_abort(&t);
	return rc;
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
		    imap_seqset_parse(&qr->known, known->s, known->len, 4096) < 0 ||
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
			cmd->c->enabled_condstore = true;
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
	if (store_msg_iter(t, c->view->mbox, 1, UINT32_MAX, qr->modseq, &it) == 0) {
		while (store_iter_next(it, &m) == 1) {
			uint32_t seq = imap_view_seq(c->view, m.uid);

			if (seq == 0)
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

bool cmd_select(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool readonly = (cmd->def_flags & CMD_READONLY) != 0;
	struct qresync qr = { 0 };
	uint64_t id;
	char *name;
	int rc;

	if (imap_cmd_argc(cmd) == 2) {
		if (select_params(cmd, imap_cmd_arg(cmd, 1), &qr) < 0) {
			imap_seqset_release(&qr.known);
			return imap_cmd_bad(cmd, "Invalid SELECT parameters");
		}
	} else if (imap_cmd_argc(cmd) != 1) {
		return imap_cmd_bad(cmd, "Expected: SELECT mailbox");
	}
	if (c->view != NULL && c->enabled_qresync)
		imap_printf(c, "* OK [CLOSED] Previous mailbox closed\r\n");
	/* a failed SELECT leaves no mailbox selected (RFC 3501 6.3.1) */
	imap_view_close(c);
	imap_client_set_state(c, IMAP_ST_AUTH);
	if ((name = imap_mailbox_arg(cmd, 0)) == NULL) {
		imap_seqset_release(&qr.known);
		return true;
	}
	if ((rc = find_mbox(c, name, &id)) != 0 ||
	    (rc = imap_view_open(cmd, id, name, readonly)) != 0) {
		free(name);
		imap_seqset_release(&qr.known);
		return imap_cmd_store_error(cmd, rc, readonly ? "EXAMINE" : "SELECT");
	}
	free(name);
	if (qr.on)
		qresync_report(c, &qr);
	imap_seqset_release(&qr.known);
	imap_client_set_state(c, IMAP_ST_SELECTED);
	return imap_cmd_reply(cmd, "OK", "[%s] %s completed",
			      readonly ? "READ-ONLY" : "READ-WRITE",
			      readonly ? "EXAMINE" : "SELECT");
}

static const char *const status_names[] = { "MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY",
					    "UNSEEN", "HIGHESTMODSEQ", "SIZE", "DELETED" };

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

void imap_status_write(struct imap_client *c, const char *name, size_t len,
		       const struct store_status *st, const struct imap_arg *items)
{
	bool first = true;

	imap_write(c, "* STATUS ", 9);
	imap_write_mailbox(c, name, len);
	imap_write(c, " (", 2);
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++) {
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
	char *name;
	int rc;

	if (imap_cmd_argc(cmd) != 2 || items->type != IMAP_ARG_LIST || items->n == 0)
		return imap_cmd_bad(cmd, "Expected: STATUS mailbox (items)");
	if (!imap_status_items_ok(c, items))
		return imap_cmd_bad(cmd, "Unknown STATUS item");
	if ((name = imap_mailbox_arg(cmd, 0)) == NULL)
		return true;
	rc = find_mbox(c, name, &id);
	if (rc == 0 && (rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) == 0) {
		rc = store_mbox_status(t, id, &st);
		store_txn_abort(&t);
	}
	if (rc != 0) {
		free(name);
		return imap_cmd_store_error(cmd, rc, "STATUS");
	}
	imap_status_write(c, name, strlen(name), &st, items);
	free(name);
	return imap_cmd_ok(cmd, "STATUS completed");
}

static int close_expunge_fn(struct store_txn *t, void *arg)
{
	uint64_t *mbox = arg;

	return store_msg_expunge(t, *mbox, NULL, 0, NULL, NULL);
}

bool cmd_close(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool unselect = (cmd->def_flags & CMD_ALT) != 0;
	int rc = 0;

	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, unselect ? "UNSELECT takes no arguments"
						  : "CLOSE takes no arguments");
	/* CLOSE expunges silently (no EXPUNGE responses) */
	if (!unselect && !c->view->readonly)
		rc = store_write(c->srv->store, c->view->part, close_expunge_fn, &c->view->mbox);
	imap_view_close(c);
	imap_client_set_state(c, IMAP_ST_AUTH);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "CLOSE");
	return imap_cmd_ok(cmd, unselect ? "UNSELECT completed" : "CLOSE completed");
}

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

static char *mbox_arg(struct imap_cmd *cmd, const struct imap_arg *a)
{
	const char *why;
	char *name;

	if (a == NULL || !imap_arg_is_astring(a)) {
		imap_cmd_bad(cmd, "Mailbox name expected");
		return NULL;
	}
	if ((name = imap_mailbox_name(a->s, a->len, &why)) == NULL)
		imap_cmd_no(cmd, why);
	return name;
}

bool cmd_select(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool readonly = (cmd->def_flags & CMD_READONLY) != 0;
	uint64_t id;
	char *name;
	int rc;

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: SELECT mailbox");
	/* a failed SELECT leaves no mailbox selected (RFC 3501 6.3.1) */
	imap_view_close(c);
	imap_client_set_state(c, IMAP_ST_AUTH);
	if ((name = mbox_arg(cmd, imap_cmd_arg(cmd, 0))) == NULL)
		return true;
	if ((rc = find_mbox(c, name, &id)) != 0 ||
	    (rc = imap_view_open(cmd, id, name, readonly)) != 0) {
		free(name);
		return imap_cmd_store_error(cmd, rc, readonly ? "EXAMINE" : "SELECT");
	}
	free(name);
	imap_client_set_state(c, IMAP_ST_SELECTED);
	return imap_cmd_reply(cmd, "OK", "[%s] %s completed",
			      readonly ? "READ-ONLY" : "READ-WRITE",
			      readonly ? "EXAMINE" : "SELECT");
}

bool cmd_status(struct imap_cmd *cmd)
{
	static const char *const names[] = { "MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY",
					     "UNSEEN", "HIGHESTMODSEQ", "SIZE" };
	struct imap_client *c = cmd->c;
	const struct imap_arg *items = imap_cmd_arg(cmd, 1);
	struct store_txn *t = NULL;
	struct store_status st;
	uint64_t id;
	char *name;
	bool first = true;
	int rc;

	if (imap_cmd_argc(cmd) != 2 || items->type != IMAP_ARG_LIST || items->n == 0)
		return imap_cmd_bad(cmd, "Expected: STATUS mailbox (items)");
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++) {
		bool known = false;

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			known |= imap_arg_atom_is(a, names[i]);
		if (!known)
			return imap_cmd_bad(cmd, "Unknown STATUS item");
	}
	if ((name = mbox_arg(cmd, imap_cmd_arg(cmd, 0))) == NULL)
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
	imap_write(c, "* STATUS ", 9);
	imap_write_astring(c, name, strlen(name));
	imap_write(c, " (", 2);
	for (const struct imap_arg *a = items + 1; a <= items + items->span; a++) {
		uint64_t v = imap_arg_atom_is(a, "MESSAGES")      ? st.messages
			     : imap_arg_atom_is(a, "RECENT")      ? st.recent
			     : imap_arg_atom_is(a, "UIDNEXT")     ? st.uidnext
			     : imap_arg_atom_is(a, "UIDVALIDITY") ? st.uidvalidity
			     : imap_arg_atom_is(a, "UNSEEN")      ? st.unseen
			     : imap_arg_atom_is(a, "SIZE")        ? st.size
								  : st.highestmodseq;
		char up[16];

		str_lcpy(up, a->s, sizeof(up));
		for (char *p = up; *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		imap_printf(c, "%s%s %" PRIu64, first ? "" : " ", up, v);
		first = false;
	}
	imap_write(c, ")\r\n", 3);
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

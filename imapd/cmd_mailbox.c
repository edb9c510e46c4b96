/* cmd_mailbox.c — owns mailbox names (validation, INBOX) and CREATE, DELETE, RENAME,
 * SUBSCRIBE, UNSUBSCRIBE, LIST, LSUB, NAMESPACE. Names are modified UTF-7, checked strictly,
 * delimiter '/'; they are keys in the store's index and never reach the filesystem. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/utf7imap.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

char *imap_mailbox_name(const char *s, size_t len, const char **why_r)
{
	char *name;

	if (len == 0) {
		*why_r = "Empty mailbox name";
		return NULL;
	}
	if (len > STORE_MAX_NAME) {
		*why_r = "Mailbox name too long";
		return NULL;
	}
	if (!utf7imap_valid(s, len)) {
		*why_r = "Mailbox name is not valid modified UTF-7";
		return NULL;
	}
	if (memchr(s, '*', len) != NULL || memchr(s, '%', len) != NULL) {
		*why_r = "Wildcards are not allowed in mailbox names";
		return NULL;
	}
	if (s[0] == '/' || s[len - 1] == '/' || memmem(s, len, "//", 2) != NULL) {
		*why_r = "Empty level in mailbox name";
		return NULL;
	}
	name = xmemdup0(s, len);
	if (str_caseprefix(name, len, "INBOX") && (len == 5 || name[5] == '/'))
		memcpy(name, "INBOX", 5);
	return name;
}

/* The mailbox name argument of cmd (index i), validated; NULL after a reply was sent. */
static char *name_arg(struct imap_cmd *cmd, size_t i)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, i);
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

struct mbox_op {
	uint64_t user;
	char *a, *b;
	bool on;
};

static int create_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;
	uint64_t id;

	return store_mbox_create(t, op->user, op->a, 0, &id);
}

static int delete_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	return store_mbox_delete(t, op->user, op->a);
}

static int rename_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	return store_mbox_rename(t, op->user, op->a, op->b);
}

static int subscribe_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	return store_mbox_subscribe(t, op->user, op->a, op->on);
}

/* Runs a mailbox write and answers it. */
static bool mbox_write(struct imap_cmd *cmd, int (*fn)(struct store_txn *, void *),
		       struct mbox_op *op, const char *what)
{
	int rc = store_write(cmd->c->srv->store, cmd->c->part, fn, op);
	char *done;
	bool r;

	free(op->a);
	free(op->b);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, what);
	done = xasprintf("%s completed", what);
	r = imap_cmd_ok(cmd, done);
	free(done);
	return r;
}

bool cmd_create(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false };
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: CREATE mailbox");
	/* a trailing delimiter says the name will have children: it is not part of the name */
	if (imap_arg_is_astring(a) && a->len > 1 && a->s[a->len - 1] == '/') {
		const char *why;

		if ((op.a = imap_mailbox_name(a->s, a->len - 1, &why)) == NULL)
			return imap_cmd_no(cmd, why);
	} else if ((op.a = name_arg(cmd, 0)) == NULL) {
		return true;
	}
	if (strcmp(op.a, "INBOX") == 0) {
		free(op.a);
		return imap_cmd_no(cmd, "[ALREADYEXISTS] INBOX exists always");
	}
	return mbox_write(cmd, create_fn, &op, "CREATE");
}

bool cmd_delete(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false };

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: DELETE mailbox");
	if ((op.a = name_arg(cmd, 0)) == NULL)
		return true;
	if (strcmp(op.a, "INBOX") == 0) {
		free(op.a);
		return imap_cmd_no(cmd, "[CANNOT] INBOX cannot be deleted");
	}
	if (cmd->c->view != NULL && strcmp(cmd->c->view->name, op.a) == 0) {
		imap_view_close(cmd->c);
		imap_client_set_state(cmd->c, IMAP_ST_AUTH);
	}
	return mbox_write(cmd, delete_fn, &op, "DELETE");
}

bool cmd_rename(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false };

	if (imap_cmd_argc(cmd) != 2)
		return imap_cmd_bad(cmd, "Expected: RENAME from to");
	if ((op.a = name_arg(cmd, 0)) == NULL)
		return true;
	if ((op.b = name_arg(cmd, 1)) == NULL) {
		free(op.a);
		return true;
	}
	return mbox_write(cmd, rename_fn, &op, "RENAME");
}

bool cmd_subscribe(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, !(cmd->def_flags & CMD_ALT) };

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: SUBSCRIBE mailbox");
	if ((op.a = name_arg(cmd, 0)) == NULL)
		return true;
	return mbox_write(cmd, subscribe_fn, &op, op.on ? "SUBSCRIBE" : "UNSUBSCRIBE");
}

struct list_ctx {
	struct imap_client *c;
	bool lsub;
};

static int list_cb(const struct store_mbox_info *mi, void *arg)
{
	static const struct {
		unsigned bit;
		const char *name;
	} uses[] = {
		{ STORE_USE_ALL, "\\All" },       { STORE_USE_ARCHIVE, "\\Archive" },
		{ STORE_USE_DRAFTS, "\\Drafts" }, { STORE_USE_FLAGGED, "\\Flagged" },
		{ STORE_USE_JUNK, "\\Junk" },     { STORE_USE_SENT, "\\Sent" },
		{ STORE_USE_TRASH, "\\Trash" },
	};
	struct list_ctx *l = arg;
	struct imap_client *c = l->c;
	struct buf attrs;

	buf_init(&attrs, 64, 256);
	if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT))
		buf_puts(&attrs, "\\Noselect ");
	if (!l->lsub)
		buf_puts(&attrs, mi->attrs & STORE_MBOX_HASCHILDREN ? "\\HasChildren "
								    : "\\HasNoChildren ");
	for (size_t i = 0; i < sizeof(uses) / sizeof(uses[0]) && !l->lsub; i++)
		if (mi->special & uses[i].bit)
			buf_printf(&attrs, "%s ", uses[i].name);
	if (attrs.len > 0)
		buf_truncate(&attrs, attrs.len - 1);
	imap_printf(c, "* %s (%s) \"/\" ", l->lsub ? "LSUB" : "LIST", buf_cstr(&attrs));
	imap_write_astring(c, mi->name, mi->name_len);
	imap_write(c, "\r\n", 2);
	buf_release(&attrs);
	return 0;
}

bool cmd_list(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *ref = imap_cmd_arg(cmd, 0), *pat = imap_cmd_arg(cmd, 1);
	struct list_ctx l = { c, (cmd->def_flags & CMD_ALT) != 0 };
	struct store_txn *t = NULL;
	char *pattern;
	size_t plen;
	int rc;

	if (ref == NULL || pat == NULL || imap_cmd_arg(cmd, 2) != NULL ||
	    !imap_arg_is_astring(ref) || !imap_arg_is_astring(pat) ||
	    memchr(ref->s, '\0', ref->len) != NULL || memchr(pat->s, '\0', pat->len) != NULL)
		return imap_cmd_bad(cmd, "Expected: LIST reference pattern");
	if (pat->len == 0) {
		if (!l.lsub)
			imap_printf(c, "* LIST (\\Noselect) \"/\" \"\"\r\n");
		return imap_cmd_ok(cmd, "List completed");
	}
	if (ref->len > 0 && pat->s[0] == '/')
		pattern = xmemdup0(pat->s, pat->len); /* an absolute pattern ignores ref */
	else
		pattern = xasprintf("%.*s%.*s", (int)ref->len, ref->s, (int)pat->len, pat->s);
	plen = strlen(pattern);
	if (str_caseprefix(pattern, plen, "INBOX") && (plen == 5 || pattern[5] == '/'))
		memcpy(pattern, "INBOX", 5);
	if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) == 0) {
		rc = store_mbox_list(t, c->user_id, pattern, l.lsub, list_cb, &l);
		store_txn_abort(&t);
	}
	free(pattern);
	if (rc != 0 && rc != STORE_EINVAL)
		return imap_cmd_store_error(cmd, rc, l.lsub ? "LSUB" : "LIST");
	return imap_cmd_ok(cmd, l.lsub ? "Lsub completed" : "List completed");
}

bool cmd_namespace(struct imap_cmd *cmd)
{
	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "NAMESPACE takes no arguments");
	imap_printf(cmd->c, "* NAMESPACE ((\"\" \"/\")) NIL NIL\r\n");
	return imap_cmd_ok(cmd, "Namespace completed");
}

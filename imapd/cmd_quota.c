/* cmd_quota.c — owns QUOTA (RFC 9208): one quota root "" per user holding all mailboxes,
 * STORAGE (KiB) and MESSAGE from the store's exact usage counters. SETQUOTA is refused (the
 * administrator sets quotas with mailctl or the directory). */
#include <stdlib.h>
#include <string.h>

#include "imapd/imapd.h"
#include "store/store.h"

static void quota_line(struct imap_client *c, const struct store_user *u)
{
	imap_printf(c, "* QUOTA \"\" (");
	if (u->quota_bytes != 0)
		imap_printf(c, "STORAGE %" PRIu64 " %" PRIu64, (u->used_bytes + 1023) / 1024,
			    u->quota_bytes / 1024);
	if (u->quota_msgs != 0)
		imap_printf(c, "%sMESSAGE %" PRIu64 " %" PRIu64, u->quota_bytes ? " " : "",
			    u->used_msgs, u->quota_msgs);
	imap_printf(c, ")\r\n");
}

static int user_of(struct imap_client *c, struct store_txn **t, struct store_user *u)
{
	int rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, t);

	if (rc == 0)
		rc = store_user_get_id(*t, c->user_id, u);
	return rc;
}

bool cmd_quota(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);
	struct store_txn *t = NULL;
	struct store_user u;
	bool root = (cmd->def_flags & CMD_ALT) != 0; /* GETQUOTAROOT */
	uint64_t id;
	int rc;

	if (imap_cmd_argc(cmd) != 1 || !imap_arg_is_astring(a))
		return imap_cmd_bad(cmd, root ? "Expected: GETQUOTAROOT mailbox"
					      : "Expected: GETQUOTA root");
	if (!root && a->len != 0) {
		return imap_cmd_no(cmd, "[NONEXISTENT] No such quota root");
	}
	if ((rc = user_of(c, &t, &u)) != 0) {
		store_txn_abort(&t);
		return imap_cmd_store_error(cmd, rc, "GETQUOTA");
	}
	if (root) {
		const char *why;
		char *name = imap_mailbox_name(cmd->c, a->s, a->len, &why);

		if (name == NULL) {
			store_txn_abort(&t);
			return imap_cmd_no(cmd, why);
		}
		rc = store_mbox_find(t, c->user_id, name, &id);
		if (rc != 0) {
			store_txn_abort(&t);
			free(name);
			return imap_cmd_store_error(cmd, rc, "GETQUOTAROOT");
		}
		imap_write(c, "* QUOTAROOT ", 12);
		imap_write_mailbox(c, name, strlen(name));
		imap_write(c, " \"\"\r\n", 5);
		free(name);
	}
	quota_line(c, &u);
	store_txn_abort(&t);
	return imap_cmd_ok(cmd, root ? "GETQUOTAROOT completed" : "GETQUOTA completed");
}

bool cmd_setquota(struct imap_cmd *cmd)
{
	return imap_cmd_no(cmd, "[NOPERM] Quotas are set by the administrator");
}

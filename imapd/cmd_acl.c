/* cmd_acl.c — owns ACL (RFC 4314) as far as the store goes: every mailbox belongs to one user,
 * who holds every right on it, and no other identifier holds any. MYRIGHTS, GETACL and
 * LISTRIGHTS answer that; SETACL and DELETEACL accept what changes nothing and refuse sharing
 * with [CANNOT] (the store has no per-mailbox rights for other users). */
#include <stdlib.h>
#include <string.h>

#include "imapd/imapd.h"
#include "store/store.h"

/* RFC 4314 2.1: the rights, with the obsolete c (k x) and d (e t x) that RFC 2086 clients
   read (2.1.1: a server granting those grants c and d too) */
#define ACL_ALL_RIGHTS "lrswipkxtecda"

/* The mailbox argument 0: its stored name (malloc'd), or NULL after the reply was sent. */
static char *acl_mailbox(struct imap_cmd *cmd, size_t argc, const char *usage)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	uint64_t id;
	char *name;
	int rc;

	bool ok = imap_cmd_argc(cmd) == argc;

	for (size_t i = 0; ok && i < argc; i++)
		ok = imap_arg_is_astring(imap_cmd_arg(cmd, i));
	if (!ok) {
		imap_cmd_bad(cmd, usage);
		return NULL;
	}
	if ((name = imap_mailbox_arg(cmd, 0)) == NULL)
		return NULL;
	rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t);
	if (rc == 0)
		rc = store_mbox_find(t, c->user_id, name, &id);
	store_txn_abort(&t);
	if (rc != 0) {
		free(name);
		imap_cmd_store_error(cmd, rc, "ACL");
		return NULL;
	}
	return name;
}

/* Whether identifier argument i names the mailbox's owner (the logged-in user). */
static bool acl_is_owner(struct imap_cmd *cmd, size_t i)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, i);

	return a->len == strlen(cmd->c->user) && memcmp(a->s, cmd->c->user, a->len) == 0;
}

/* "* VERB mailbox" (the rest of the line is the caller's) */
static void acl_line(struct imap_client *c, const char *verb, const char *name)
{
	imap_printf(c, "* %s ", verb);
	imap_write_mailbox(c, name, strlen(name));
}

/* MYRIGHTS mailbox (RFC 4314 3.8) */
bool cmd_myrights(struct imap_cmd *cmd)
{
	char *name = acl_mailbox(cmd, 1, "Expected: MYRIGHTS mailbox");

	if (name == NULL)
		return true;
	acl_line(cmd->c, "MYRIGHTS", name);
	imap_printf(cmd->c, " %s\r\n", ACL_ALL_RIGHTS);
	free(name);
	return imap_cmd_ok(cmd, "MYRIGHTS completed");
}

/* GETACL mailbox (3.3) and LISTRIGHTS mailbox identifier (3.7, CMD_ALT) */
bool cmd_getacl(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool list = (cmd->def_flags & CMD_ALT) != 0;
	char *name = acl_mailbox(cmd, list ? 2 : 1,
				 list ? "Expected: LISTRIGHTS mailbox identifier"
				      : "Expected: GETACL mailbox");
	const struct imap_arg *id;

	if (name == NULL)
		return true;
	if (!list) {
		acl_line(c, "ACL", name);
		imap_write(c, " ", 1);
		imap_write_astring(c, c->user, strlen(c->user));
		imap_printf(c, " %s\r\n", ACL_ALL_RIGHTS);
	} else {
		/* the owner always holds every right; nobody else can be given any */
		id = imap_cmd_arg(cmd, 1);
		acl_line(c, "LISTRIGHTS", name);
		imap_write(c, " ", 1);
		imap_write_astring(c, id->s, id->len);
		imap_printf(c, " %s\r\n", acl_is_owner(cmd, 1) ? ACL_ALL_RIGHTS : "\"\"");
	}
	free(name);
	return imap_cmd_ok(cmd, list ? "LISTRIGHTS completed" : "GETACL completed");
}

/* The rights a SETACL leaves an identifier holding `had`: 0 and *out (a bit per right of
   ACL_ALL_RIGHTS), or -1 for a character that is no right (RFC 4314 3.1: BAD). */
static int acl_apply(const char *s, size_t len, unsigned had, unsigned *out)
{
	unsigned want = 0;
	char mod = 0;

	if (len > 0 && (s[0] == '+' || s[0] == '-')) {
		mod = s[0];
		s++;
		len--;
	}
	for (size_t i = 0; i < len; i++) {
		const char *p = s[i] != '\0' ? strchr(ACL_ALL_RIGHTS, s[i]) : NULL;

		if (p == NULL)
			return -1;
		want |= 1u << (p - ACL_ALL_RIGHTS);
	}
	*out = mod == '+' ? had | want : mod == '-' ? had & ~want : want;
	return 0;
}

/* SETACL mailbox identifier rights (3.1) and DELETEACL mailbox identifier (3.2, CMD_ALT) */
bool cmd_setacl(struct imap_cmd *cmd)
{
	bool del = (cmd->def_flags & CMD_ALT) != 0;
	unsigned all = (1u << (sizeof(ACL_ALL_RIGHTS) - 1)) - 1, had, now = 0;
	char *name = acl_mailbox(cmd, del ? 2 : 3,
				 del ? "Expected: DELETEACL mailbox identifier"
				     : "Expected: SETACL mailbox identifier rights");
	bool owner;

	if (name == NULL)
		return true;
	free(name);
	owner = acl_is_owner(cmd, 1);
	had = owner ? all : 0;
	if (!del) {
		const struct imap_arg *r = imap_cmd_arg(cmd, 2);

		if (acl_apply(r->s, r->len, had, &now) < 0)
			return imap_cmd_bad(cmd, "Invalid rights");
	}
	if (now == had && !(del && owner))
		return imap_cmd_ok(cmd, del ? "DELETEACL completed" : "SETACL completed");
	if (owner)
		return imap_cmd_no(cmd, "[CANNOT] The owner always holds every right");
	return imap_cmd_no(cmd, "[CANNOT] Mailboxes cannot be shared with other users here");
}

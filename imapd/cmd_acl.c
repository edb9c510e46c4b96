/* cmd_acl.c — owns ACL (RFC 4314): MYRIGHTS, GETACL, LISTRIGHTS, SETACL and DELETEACL on the
 * logged-in user's mailboxes and on those others share with it (imap_ns.c: GETACL, LISTRIGHTS,
 * SETACL and DELETEACL need 'a' there), whose lists the store keeps (store_acl.c). The owner holds every
 * right and is never in a list (SETACL and DELETEACL on the owner answer NO [CANNOT] unless
 * they change nothing); any other identifier ("anyone", "authenticated", a user of the store,
 * each with an optional leading '-' for negative rights, RFC 4314 2) is stored as given, a
 * user the directory knows who is not in the store yet (no login nor mail so far) as the
 * directory names it, and a SETACL that would give rights to a name that is none of these
 * is refused (3.1: the server may refuse an identifier; nobody would get those rights). Taking rights away
 * (DELETEACL, "-rights", "") is allowed for any name, so a stale row can be removed. A
 * SETACL's "+" and "-" are applied inside the write (the group commit), to the rights the
 * row holds then. An identifier past STORE_ACL_ID_MAX bytes (a user name may be longer) is
 * refused with NO [LIMIT], saying the limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "ldapauth/ldapauth.h"
#include "store/store.h"

/* The mailbox of argument 0 after checking that the command has argc astrings, into b (the
   client's own or one shared with it, imap_ns.c), with its name as the client gave it
   (malloc'd) into *name_r: 0, or -1 after the reply was sent. need: the rights the client
   must hold (none for its own mailboxes), else NO [NOPERM]. */
static int acl_mailbox(struct imap_cmd *cmd, size_t argc, const char *usage, uint32_t need,
		       struct imap_ns_box *b, char **name_r)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	char *name;
	int rc;

	bool ok = imap_cmd_argc(cmd) == argc;

	for (size_t i = 0; ok && i < argc; i++)
		ok = imap_arg_is_astring(imap_cmd_arg(cmd, i));
	if (!ok) {
		imap_cmd_bad(cmd, usage);
		return -1;
	}
	if ((name = imap_mailbox_arg(cmd, 0)) == NULL)
		return -1;
	if ((rc = imap_ns_find(c, name, b)) == 0 && b->own) {
		rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t);
		if (rc == 0)
			rc = store_mbox_find(t, c->user_id, name, &b->mbox);
		store_txn_abort(&t);
	}
	if (rc == 0 && (b->rights & need) != need)
		rc = STORE_ENOTSUP;
	if (rc != 0) {
		free(name);
		imap_ns_box_release(b);
		if (rc == STORE_ENOTSUP)
			imap_cmd_no(cmd, "[NOPERM] ACL: the administer right (a) is needed");
		else
			imap_cmd_store_error(cmd, rc, "ACL");
		return -1;
	}
	*name_r = name;
	return 0;
}

/* Whether identifier argument i names the mailbox's owner, as it is or with the '-' of
   negative rights. */
static bool acl_is_owner(struct imap_cmd *cmd, size_t i, const char *owner)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, i);
	const char *s = a->s;
	size_t len = a->len;

	if (len > 0 && s[0] == '-') {
		s++;
		len--;
	}
	return len == strlen(owner) && memcmp(s, owner, len) == 0;
}

/* "* VERB mailbox" (the rest of the line is the caller's) */
static void acl_line(struct imap_client *c, const char *verb, const char *name)
{
	imap_printf(c, "* %s ", verb);
	imap_write_mailbox(c, name, strlen(name));
}

static void acl_rights(struct imap_client *c, uint32_t rights)
{
	char text[STORE_ACL_TEXT_MAX];

	if (store_acl_format(rights, text) == 0)
		imap_write(c, " \"\"", 3);
	else
		imap_printf(c, " %s", text);
}

/* MYRIGHTS mailbox (RFC 4314 3.8) */
bool cmd_myrights(struct imap_cmd *cmd)
{
	struct imap_ns_box b;
	char *name;

	if (acl_mailbox(cmd, 1, "Expected: MYRIGHTS mailbox", 0, &b, &name) < 0)
		return true;
	acl_line(cmd->c, "MYRIGHTS", name);
	acl_rights(cmd->c, b.rights);
	imap_write(cmd->c, "\r\n", 2);
	free(name);
	imap_ns_box_release(&b);
	return imap_cmd_ok(cmd, "MYRIGHTS completed");
}

/* One "identifier rights" pair of a GETACL line. */
static int acl_entry(const char *id, size_t len, uint32_t rights, void *arg)
{
	struct imap_client *c = arg;

	imap_write(c, " ", 1);
	imap_write_astring(c, id, len);
	acl_rights(c, rights);
	return 0;
}

/* GETACL's line: the owner, then the stored identifiers. 0 or a store error (nothing sent). */
static int acl_getacl(struct imap_client *c, const char *name, const struct imap_ns_box *b)
{
	struct store_txn *t = NULL;
	int rc;

	if ((rc = store_txn_begin(c->srv->store, b->part, STORE_TXN_READ, &t)) != 0)
		return rc;
	acl_line(c, "ACL", name);
	acl_entry(b->owner_name, strlen(b->owner_name), STORE_ACL_ALL, c);
	rc = store_acl_list(t, b->mbox, acl_entry, c);
	imap_write(c, "\r\n", 2);
	store_txn_abort(&t);
	return rc;
}

/* GETACL mailbox (3.3) and LISTRIGHTS mailbox identifier (3.7, CMD_ALT); both need 'a' on
   another user's mailbox (4). */
bool cmd_getacl(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	bool list = (cmd->def_flags & CMD_ALT) != 0;
	const struct imap_arg *id;
	struct imap_ns_box b;
	char *name;
	int rc;

	if (acl_mailbox(cmd, list ? 2 : 1,
			list ? "Expected: LISTRIGHTS mailbox identifier"
			     : "Expected: GETACL mailbox",
			STORE_ACL_ADMIN, &b, &name) < 0)
		return true;
	if (!list) {
		rc = acl_getacl(c, name, &b);
		free(name);
		imap_ns_box_release(&b);
		if (rc != 0)
			return imap_cmd_store_error(cmd, rc, "GETACL");
		return imap_cmd_ok(cmd, "GETACL completed");
	}
	id = imap_cmd_arg(cmd, 1);
	acl_line(c, "LISTRIGHTS", name);
	imap_write(c, " ", 1);
	imap_write_astring(c, id->s, id->len);
	/* the owner always holds every right; anyone else may be given each one alone (k x t
	   e apart: RIGHTS=texk), c and d standing for k x and t e */
	if (acl_is_owner(cmd, 1, b.owner_name) && id->s[0] != '-')
		imap_printf(c, " lrswipkxtecda\r\n");
	else
		imap_printf(c, " \"\" l r s w i p k x t e c d a\r\n");
	free(name);
	imap_ns_box_release(&b);
	return imap_cmd_ok(cmd, "LISTRIGHTS completed");
}

/* A SETACL/DELETEACL write (the group commit's thread runs acl_set_fn). */
struct acl_set {
	uint64_t user; /* the owner */
	char *mbox, *id;
	size_t idlen;
	char mod; /* '+', '-' or 0 (replace) */
	uint32_t rights;
};

static void acl_set_free(void *arg)
{
	struct acl_set *op = arg;

	free(op->mbox);
	free(op->id);
	free(op);
}

static int acl_set_fn(struct store_txn *t, void *arg)
{
	struct acl_set *op = arg;
	uint32_t had = 0, now;
	uint64_t mbox;
	int rc;

	if ((rc = store_mbox_find(t, op->user, op->mbox, &mbox)) != 0)
		return rc;
	rc = store_acl_get(t, mbox, op->id, op->idlen, &had);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	now = store_acl_apply(had, op->mod, op->rights);
	return now == had && rc == 0 ? 0 : store_acl_set(t, mbox, op->id, op->idlen, now);
}

static bool acl_set_resume(struct imap_cmd *cmd, bool del)
{
	bool pending;
	int rc;

	(void)imap_commit_result(cmd, &pending, &rc);
	if (pending)
		return false;
	if (rc == STORE_ELIMIT)
		return imap_cmd_reply(cmd, "NO", "[LIMIT] SETACL: at most %d identifiers here",
				      STORE_ACL_MAX);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, del ? "DELETEACL" : "SETACL");
	return imap_cmd_ok(cmd, del ? "DELETEACL completed" : "SETACL completed");
}

/* A SETACL whose identifier is no user of the store (yet): the directory is asked whether it
   knows the login (users are made in the store at their first login or mail), the write
   waits for the answer. */
struct acl_dir {
	struct acl_set *op;
	unsigned part;
	struct ldapauth_req *req;
	bool done, neg;
	enum ldapauth_result result;
	char *login; /* the directory's name for it (its case), on LDAPAUTH_OK */
};

static void acl_dir_free(struct imap_cmd *cmd)
{
	struct acl_dir *d = cmd->ctx;

	ldapauth_cancel(&d->req);
	if (d->op != NULL)
		acl_set_free(d->op);
	free(d->login);
	free(d);
}

static void acl_dir_done(const struct ldapauth_reply *r, void *arg)
{
	struct imap_client *c = arg;
	struct acl_dir *d = c->cmd.ctx;

	d->req = NULL;
	d->done = true;
	d->result = r->result;
	if (r->result == LDAPAUTH_OK && r->user != NULL && r->user->login != NULL)
		d->login = xstrdup(r->user->login);
	imap_client_resume(c);
}

static const char acl_unknown[] = "[CANNOT] Unknown identifier: not a user of this server, "
				  "nor anyone or authenticated";

/* The directory's answer: the write (the identifier as the directory names the user), or
   the NO. */
static bool acl_dir_resume(struct imap_cmd *cmd)
{
	struct acl_dir *d = cmd->ctx;
	struct acl_set *op;
	unsigned part;

	if (!d->done)
		return false;
	if (d->result == LDAPAUTH_ETEMP)
		return imap_cmd_no(cmd, "[UNAVAILABLE] SETACL: the directory does not answer now; "
					"try again later");
	if (d->result != LDAPAUTH_OK || d->login == NULL)
		return imap_cmd_no(cmd, acl_unknown);
	op = d->op;
	part = d->part;
	free(op->id);
	op->id = xasprintf("%s%s", d->neg ? "-" : "", d->login);
	op->idlen = strlen(op->id);
	if (!store_acl_id_valid(op->id, op->idlen))
		return imap_cmd_no(cmd, acl_unknown);
	d->op = NULL;
	acl_dir_free(cmd);
	cmd->ctx = NULL;
	cmd->ctx_free = NULL;
	imap_commit_start(cmd, part, NULL, acl_set_fn, op, acl_set_free);
	return false;
}

/* The rights argument of SETACL into op: false, or true after the BAD was sent. */
static bool acl_rights_arg(struct imap_cmd *cmd, struct acl_set *op)
{
	const struct imap_arg *r = imap_cmd_arg(cmd, 2);

	if (store_acl_parse_change(r->s, r->len, &op->mod, &op->rights) < 0)
		return imap_cmd_bad(cmd, "Invalid rights");
	return false;
}

/* SETACL mailbox identifier rights (3.1) and DELETEACL mailbox identifier (3.2, CMD_ALT):
   the owner's, or of a user holding 'a' (written in the owner's partition) */
bool cmd_setacl(struct imap_cmd *cmd)
{
	bool del = (cmd->def_flags & CMD_ALT) != 0;
	struct acl_set *op;
	const struct imap_arg *id;
	struct imap_ns_box b;
	uint32_t had, now;
	char *name;
	int rc;

	if (cmd->ctx != NULL && !imap_commit_active(cmd))
		return acl_dir_resume(cmd);
	if (cmd->ctx != NULL)
		return acl_set_resume(cmd, del);
	if (acl_mailbox(cmd, del ? 2 : 3,
			del ? "Expected: DELETEACL mailbox identifier"
			    : "Expected: SETACL mailbox identifier rights",
			STORE_ACL_ADMIN, &b, &name) < 0)
		return true;
	free(name);
	op = xcalloc(1, sizeof(*op));
	op->mbox = b.local;
	b.local = NULL;
	op->user = b.owner;
	if (!del && acl_rights_arg(cmd, op)) {
		imap_ns_box_release(&b);
		acl_set_free(op);
		return true;
	}
	id = imap_cmd_arg(cmd, 1);
	if (acl_is_owner(cmd, 1, b.owner_name)) {
		/* the owner's rights are all of them, "-owner" takes none away */
		imap_ns_box_release(&b);
		had = id->s[0] == '-' ? 0 : STORE_ACL_ALL;
		now = del ? 0 : store_acl_apply(had, op->mod, op->rights);
		acl_set_free(op);
		if (now == had)
			return imap_cmd_ok(cmd, del ? "DELETEACL completed" : "SETACL completed");
		return imap_cmd_no(cmd, "[CANNOT] The owner always holds every right");
	}
	if (!store_acl_id_valid(id->s, id->len)) {
		imap_ns_box_release(&b);
		acl_set_free(op);
		if (id->len > STORE_ACL_ID_MAX) { /* a user name may be longer: say why */
			char why[64];

			snprintf(why, sizeof(why), "[LIMIT] An identifier is at most %d bytes",
				 STORE_ACL_ID_MAX);
			return imap_cmd_no(cmd, why);
		}
		return imap_cmd_no(cmd, "[CANNOT] Invalid identifier");
	}
	op->id = xmemdup0(id->s, id->len);
	op->idlen = id->len;
	if (!del && op->mod != '-' && op->rights != 0 &&
	    (rc = store_acl_id_known(cmd->c->srv->store, id->s, id->len)) != 0) {
		struct acl_dir *d;

		if (rc != STORE_ENOUSER || cmd->c->srv->auth == NULL) {
			imap_ns_box_release(&b);
			acl_set_free(op);
			return rc != STORE_ENOUSER ? imap_cmd_store_error(cmd, rc, "SETACL")
						   : imap_cmd_no(cmd, acl_unknown);
		}
		/* not in the store: a user of the directory who never logged in nor got mail? */
		cmd->ctx = d = xcalloc(1, sizeof(*d));
		cmd->ctx_free = acl_dir_free;
		d->op = op;
		d->part = b.part;
		d->neg = op->id[0] == '-';
		imap_ns_box_release(&b);
		d->req = ldapauth_user(cmd->c->srv->auth, op->id + d->neg, acl_dir_done, cmd->c);
		return false;
	}
	imap_commit_start(cmd, b.part, NULL, acl_set_fn, op, acl_set_free);
	imap_ns_box_release(&b);
	return false;
}

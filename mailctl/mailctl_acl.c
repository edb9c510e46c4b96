/* mailctl_acl.c — owns `mailctl acl`: get, set and delete of a mailbox's access control list
 * (IMAP ACL, RFC 4314; store_acl.c), as imapd's GETACL, SETACL and DELETEACL do them. The
 * owner holds every right and is listed first; its rights cannot be changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldapauth/ldapauth.h"
#include "mailctl/mailctl.h"
#include "mailctl/mailctl_dir.h"

static const char *const acl_cols[] = { "identifier", "rights", NULL };

static void acl_row(struct mc_table *tab, const char *id, size_t len, uint32_t rights)
{
	char text[STORE_ACL_TEXT_MAX];

	store_acl_format(rights, text);
	mc_table_row(tab);
	mc_cell_strn(tab, id, len);
	mc_cell_str(tab, text);
}

static int acl_list_cb(const char *id, size_t len, uint32_t rights, void *arg)
{
	acl_row(arg, id, len, rights);
	return 0;
}

int mc_acl_get(struct mc *mc, const struct mc_args *a)
{
	struct store_txn *t;
	struct store_user u;
	struct mc_table *tab;
	uint64_t mbox;
	int rc;

	if ((rc = mc_begin(mc, a->pos[0], a->pos[1], STORE_TXN_READ, &t, &u, &mbox)) != MC_OK)
		return rc;
	tab = mc_table_new(acl_cols);
	acl_row(tab, a->pos[0], strlen(a->pos[0]), STORE_ACL_ALL);
	rc = store_acl_list(t, mbox, acl_list_cb, tab);
	store_txn_abort(&t);
	if (rc != 0) {
		mc_table_free(&tab);
		return mc_fail(mc, rc, "access list of '%s' of '%s'", a->pos[1], a->pos[0]);
	}
	mc_table_print(mc, &tab);
	return MC_OK;
}

/* One set or delete, in a write txn of the owner's partition. */
struct acl_op {
	uint64_t user;
	const char *mailbox, *id;
	char mod; /* '+', '-' or 0 */
	uint32_t rights, now;
};

static int w_acl(struct store_txn *t, void *arg)
{
	struct acl_op *o = arg;
	uint64_t mbox;
	uint32_t had = 0;
	int rc;

	if ((rc = store_mbox_find(t, o->user, o->mailbox, &mbox)) != 0)
		return rc;
	rc = store_acl_get(t, mbox, o->id, strlen(o->id), &had);
	if (rc != 0 && rc != STORE_ENOMSG)
		return rc;
	o->now = store_acl_apply(had, o->mod, o->rights);
	return store_acl_set(t, mbox, o->id, strlen(o->id), o->now);
}

static int acl_write(struct mc *mc, const struct mc_args *a, struct acl_op *o, bool del)
{
	const char *id = a->pos[2], *bare = id[0] == '-' ? id + 1 : id;
	char dirid[STORE_ACL_ID_MAX + 2];
	struct store_txn *t;
	struct store_user u;
	char text[STORE_ACL_TEXT_MAX];
	unsigned part;
	int rc;

	if (!store_acl_id_valid(id, strlen(id)))
		return mc_usage(mc, "'%s' is not an identifier (no spaces or control characters)",
				id);
	if (strcmp(bare, a->pos[0]) == 0)
		return mc_refuse(mc, MC_REFUSED, "the owner of a mailbox holds every right",
				 "'%s' owns '%s'", a->pos[0], a->pos[1]);
	if ((rc = mc_begin(mc, a->pos[0], NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	store_txn_abort(&t);
	/* rights given to a name nobody has would wait for whoever takes it (imapd's SETACL
	   refuses it too); taking rights away is for any name */
	if (!del && o->mod != '-' && o->rights != 0 &&
	    (rc = store_acl_id_known(mc->st, id, strlen(id))) != 0) {
		char *login = NULL;
		enum ldapauth_result dr;

		if (rc != STORE_ENOUSER)
			return mc_fail(mc, rc, "identifier '%s'", id);
		/* not in the store: a user of the directory who never logged in nor got mail
		   (as imapd's SETACL asks), named as the directory names it */
		if ((dr = mc_dir_user(mc, bare, &login)) == LDAPAUTH_ETEMP)
			return mc_refuse(mc, MC_TEMPFAIL, "try again later",
					 "'%s': the directory does not answer", bare);
		if (dr != LDAPAUTH_OK)
			return mc_refuse(mc, MC_NOUSER,
					 "an identifier is a user of this store or the directory, "
					 "anyone or authenticated",
					 "'%s': no such user", bare);
		snprintf(dirid, sizeof(dirid), "%s%s", id[0] == '-' ? "-" : "", login);
		free(login);
		id = dirid;
		if (!store_acl_id_valid(id, strlen(id)))
			return mc_usage(mc, "'%s' is not an identifier", id);
	}
	o->user = u.id;
	o->mailbox = a->pos[1];
	o->id = id;
	if ((rc = store_user_locate(mc->st, a->pos[0], &part)) == 0)
		rc = store_write(mc->st, part, w_acl, o);
	if (rc == STORE_ENOMBOX)
		return mc_refuse(mc, MC_REFUSED, "see `mailctl mailbox list USER`",
				 "'%s' of '%s': no such mailbox", a->pos[1], a->pos[0]);
	if (rc == STORE_ELIMIT)
		return mc_refuse(mc, MC_REFUSED, "delete an identifier first",
				 "'%s' of '%s' has %d identifiers already", a->pos[1], a->pos[0],
				 STORE_ACL_MAX);
	if (rc != 0)
		return mc_fail(mc, rc, "access list of '%s' of '%s'", a->pos[1], a->pos[0]);
	store_acl_format(o->now, text);
	if (!mc->json) {
		if (del)
			printf("%s deleted\n", id);
		else
			printf("%s %s\n", id, text[0] != '\0' ? text : "(none)");
		return MC_OK;
	}
	printf("{\"user\": ");
	mc_json_str(stdout, a->pos[0], strlen(a->pos[0]));
	printf(", \"mailbox\": ");
	mc_json_str(stdout, a->pos[1], strlen(a->pos[1]));
	printf(", \"identifier\": ");
	mc_json_str(stdout, id, strlen(id));
	if (del)
		printf(", \"done\": \"deleted\"}\n");
	else
		printf(", \"rights\": \"%s\"}\n", text);
	return MC_OK;
}

int mc_acl_set(struct mc *mc, const struct mc_args *a)
{
	struct acl_op o = { 0 };

	if (store_acl_parse_change(a->pos[3], strlen(a->pos[3]), &o.mod, &o.rights) < 0)
		return mc_usage(mc,
				"'%s': rights are letters of lrswipkxtecda, after an optional "
				"+ or -",
				a->pos[3]);
	return acl_write(mc, a, &o, false);
}

int mc_acl_delete(struct mc *mc, const struct mc_args *a)
{
	struct acl_op o = { 0 };

	return acl_write(mc, a, &o, true);
}

/* mailctl_user.c — owns the user, quota and mailbox commands of mailctl, and mc_begin (find
 * a user's partition, open a txn there, resolve the user and mailbox). Every write goes
 * through store_write() so a map that grows mid-command is retried transparently. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/conf.h"
#include "common/buf.h"
#include "common/str.h"
#include "common/utf7imap.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mailctl/mailctl.h"

/* The arguments of one write, shared by the small write callbacks below. */
struct op {
	const char *user, *a, *b;
	uint64_t n1, n2, id;
	unsigned special;
	bool on;
	uint64_t max_count; /* mailbox create/rename: [imapd] max_mailboxes_per_user */
	unsigned max_depth; /* and max_mailbox_depth, as imapd applies them */
	bool limit_name;    /* mailbox rename: STORE_ELIMIT was a name past STORE_MAX_MBOX_NAME */
};

static const struct {
	const char *name;
	unsigned bit;
} specials[] = {
	{ "all", STORE_USE_ALL },       { "archive", STORE_USE_ARCHIVE },
	{ "drafts", STORE_USE_DRAFTS }, { "flagged", STORE_USE_FLAGGED },
	{ "junk", STORE_USE_JUNK },     { "sent", STORE_USE_SENT },
	{ "trash", STORE_USE_TRASH },
};

int mc_begin(struct mc *mc, const char *user, const char *mailbox, enum store_txn_mode mode,
	     struct store_txn **t_r, struct store_user *u_r, uint64_t *mbox_r)
{
	unsigned part;
	int rc;

	*t_r = NULL;
	if ((rc = store_user_locate(mc->st, user, &part)) != 0)
		return mc_fail(mc, rc, "user '%s'", user);
	if ((rc = store_txn_begin(mc->st, part, mode, t_r)) != 0)
		return mc_fail(mc, rc, "partition %u", part);
	if ((rc = store_user_get(*t_r, user, u_r)) != 0) {
		store_txn_abort(t_r);
		return mc_fail(mc, rc, "user '%s'", user);
	}
	if (mailbox != NULL && (rc = store_mbox_find(*t_r, u_r->id, mailbox, mbox_r)) != 0) {
		store_txn_abort(t_r);
		return mc_fail(mc, rc, "mailbox '%s' of user '%s'", mailbox, user);
	}
	return MC_OK;
}

/* The user's partition for a write, reporting a missing user. */
static int locate(struct mc *mc, const char *user, unsigned *part_r)
{
	int rc = store_user_locate(mc->st, user, part_r);

	return rc == 0 ? MC_OK : mc_fail(mc, rc, "user '%s'", user);
}

static void special_text(char *buf, size_t size, unsigned special)
{
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		if (special & specials[i].bit) {
			str_lcat(buf, buf[0] ? " \\" : "\\", size);
			str_lcat(buf, specials[i].name, size);
			buf[strlen(buf) - strlen(specials[i].name)] ^= 0x20; /* \Sent */
		}
}

/* ------------------------------------------------------------------------------------- */
/* user */

static int w_user_del(struct store_txn *t, void *arg)
{
	return store_user_delete(t, ((struct op *)arg)->user);
}

static int w_user_add(struct store_txn *t, void *arg)
{
	struct op *o = arg;
	int rc;

	/* an admin's add makes the user here again: a tombstone of a move away goes */
	if ((rc = store_tomb_clear(t, o->user)) != 0)
		return rc;
	if ((rc = store_user_create(t, o->user, &o->id)) == 0 && (o->n1 != 0 || o->n2 != 0))
		rc = store_user_set_quota(t, o->user, o->n1, o->n2);
	return rc;
}

/* --password: the users file line of the new user, prepared in *e_r (not yet in place). */
static int login_prepare(struct mc *mc, const struct mc_args *a, struct users_edit **e_r)
{
	const struct heron_conf *v = conf_values(mc->conf);
	const char *user = a->pos[0], *addr = a->set[4] ? a->val[4] : NULL;
	const struct conf_list *dom = v->mtad.local_domains;
	char *hash = NULL, *line, *def = NULL;
	int rc;

	*e_r = NULL;
	if (v->directory.backend != DIRECTORY_BACKEND_FILE) {
		return mc_refuse(
			mc, MC_CONFIG,
			"add the login in the directory (`mailctl pw` prints its "
			"userPassword)",
			"--password writes the users file, but [directory] backend is ldap "
			"in %s",
			mc->conf_path);
	}
	if (strpbrk(user, ":#") != NULL || user[0] == '\0')
		return mc_usage(mc, "a login of the users file holds no ':' nor '#'");
	if (addr == NULL && dom->n > 0)
		addr = def = xasprintf("%s@%s", user, dom->v[0]);
	if (addr == NULL)
		return mc_usage(mc, "--address is needed ([mtad] local_domains is empty)");
	if (strchr(addr, '@') == NULL || strpbrk(addr, ":, \t\r\n") != NULL) {
		free(def);
		return mc_usage(mc, "--address %s: one address (local@domain)", addr);
	}
	if ((rc = mc_pw_read_hash(mc, a->set[5] ? a->val[5] : NULL, &hash)) == MC_OK) {
		line = a->set[1] ? xasprintf("%s:%s:%s:%s", user, hash, addr, a->val[1])
				 : xasprintf("%s:%s:%s", user, hash, addr);
		rc = mc_users_edit_add(mc, user, line, e_r);
		OPENSSL_cleanse(line, strlen(line));
		free(line);
	}
	free(hash);
	free(def);
	return rc;
}

/* A new user name the store can key (STORE_MAX_NAME); says so when not. */
static bool user_name_fits(struct mc *mc, const char *name)
{
	if (strlen(name) <= STORE_MAX_NAME)
		return true;
	mc_usage(mc, "a user name has at most %d bytes (this one %zu)", STORE_MAX_NAME,
		 strlen(name));
	return false;
}

int mc_user_add(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0] };
	struct users_edit *login = NULL;
	struct store_tomb tb;
	unsigned part;
	uint64_t p;
	bool moved;
	int rc;

	if (!user_name_fits(mc, o.user))
		return MC_USAGE;
	if (store_user_locate(mc->st, o.user, &part) == 0)
		return mc_fail(mc, STORE_EEXIST, "user '%s' (partition %u)", o.user, part);
	moved = store_tomb_find(mc->st, o.user, &tb) == 0;
	part = store_partition_for(mc->st, o.user);
	if (a->set[0] && (str_to_u64(a->val[0], strlen(a->val[0]), UINT32_MAX, &p) < 0 ||
			  p >= store_partitions(mc->st)))
		return mc_usage(mc, "--partition must be 0..%u", store_partitions(mc->st) - 1);
	if (a->set[0])
		part = (unsigned)p;
	if ((a->set[1] && str_to_size(a->val[1], strlen(a->val[1]), &o.n1) < 0) ||
	    (a->set[2] && str_to_u64(a->val[2], strlen(a->val[2]), UINT64_MAX, &o.n2) < 0))
		return mc_usage(mc, "bad quota (bytes take k/M/G; messages a number)");
	if ((a->set[4] || a->set[5]) && !a->set[3])
		return mc_usage(mc, "--address and --scheme go with --password");
	if (a->set[3] && (rc = login_prepare(mc, a, &login)) != MC_OK)
		return rc;
	if ((rc = store_write(mc->st, part, w_user_add, &o)) != 0) {
		mc_users_edit_abort(&login);
		return mc_fail(mc, rc, "cannot create user '%s'", o.user);
	}
	if (login != NULL && (rc = mc_users_edit_commit(mc, &login)) != MC_OK) {
		/* the login could not be written: the store user goes too, nothing changed */
		store_write(mc->st, part, w_user_del, &o);
		return rc;
	}
	/* the tombstones of other partitions (an older partition of the user) too */
	if ((rc = store_tomb_forget(mc->st, o.user, NULL)) != 0)
		return mc_fail(mc, rc, "user '%s' created, but not its tombstone removed", o.user);
	if (mc->json) {
		fputs("{\"user\": ", stdout);
		mc_json_str(stdout, o.user, strlen(o.user));
		printf(", \"id\": \"%016" PRIx64 "\", \"partition\": %u, \"login\": %s, "
		       "\"tombstone_cleared\": %s}\n",
		       o.id, part, a->set[3] ? "true" : "false", moved ? "true" : "false");
	} else {
		printf("user %s created in partition %u%s%s%s%s\n", o.user, part,
		       a->set[3] ? ", with its login in the users file" : "",
		       moved ? "; the tombstone of its move to " : "", moved ? tb.host : "",
		       moved ? " is cleared" : "");
	}
	return MC_OK;
}


int mc_user_del(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0] };
	unsigned part, ntombs = 0;
	int rc;

	if (store_user_locate(mc->st, o.user, &part) != 0) {
		/* no user, but a tombstone of its move away: del removes that */
		if ((rc = store_tomb_forget(mc->st, o.user, &ntombs)) != 0)
			return mc_fail(mc, rc, "the tombstone of '%s'", o.user);
		if (ntombs == 0)
			return locate(mc, o.user, &part);
		if (!mc->json)
			printf("tombstone of %s removed (the user is not in this store)\n",
			       o.user);
		else
			puts("{\"deleted\": false, \"tombstone_cleared\": true}");
		return MC_OK;
	}
	if ((rc = store_write(mc->st, part, w_user_del, &o)) != 0)
		return mc_fail(mc, rc, "cannot delete user '%s'", o.user);
	if ((rc = store_tomb_forget(mc->st, o.user, NULL)) != 0)
		return mc_fail(mc, rc, "user '%s' deleted, but not its tombstone", o.user);
	/* the rights given to the user on mailboxes of the other partitions (its own went in
	   the delete's txn); verify finds any a failure here leaves */
	if ((rc = store_acl_forget(mc->st, o.user, NULL)) != 0)
		return mc_fail(mc, rc, "user '%s' deleted, but not the rights given to it",
			       o.user);
	if (!mc->json)
		printf("user %s deleted with all mail\n", o.user);
	else
		puts("{\"deleted\": true}");
	return MC_OK;
}

static int w_user_rename(struct store_txn *t, void *arg)
{
	struct op *o = arg;

	return store_user_rename(t, o->user, o->a);
}

/* Other users' subscriptions to the renamed user's mailboxes (imapd's [imapd]
   namespace_other, "Other Users/OLD/..."), named with the new name. After the rename: run
   again after a failure here, the rename itself is refused (the new name exists) and the
   subscriptions keep the old name (they then name nothing: LSUB shows them \Noselect). */
static int rename_subs(struct mc *mc, const char *from, const char *to)
{
	const char *p = conf_values(mc->conf)->imapd.namespace_other;
	size_t plen = p != NULL ? strlen(p) : 0;
	struct buf a, b, ea, eb;
	int rc = MC_OK, src;

	if (plen > 0 && p[plen - 1] == '/')
		plen--;
	if (plen == 0)
		return MC_OK; /* no such namespace */
	buf_init(&a, 256, 2 * STORE_MAX_NAME);
	buf_init(&b, 256, 2 * STORE_MAX_NAME);
	buf_init(&ea, 256, 8 * STORE_MAX_NAME);
	buf_init(&eb, 256, 8 * STORE_MAX_NAME);
	buf_printf(&a, "%.*s/%s", (int)plen, p, from);
	buf_printf(&b, "%.*s/%s", (int)plen, p, to);
	if (utf7imap_encode(buf_cstr(&a), a.len, &ea) < 0 ||
	    utf7imap_encode(buf_cstr(&b), b.len, &eb) < 0)
		src = STORE_EINVAL;
	else
		src = store_user_rename_subs(mc->st, buf_cstr(&ea), buf_cstr(&eb), NULL);
	if (src != 0)
		rc = mc_fail(mc, src,
			     "user '%s' renamed to '%s', but not the subscriptions to '%s'", from,
			     to, buf_cstr(&a));
	buf_release(&a);
	buf_release(&b);
	buf_release(&ea);
	buf_release(&eb);
	return rc;
}

int mc_user_rename(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1] };
	unsigned part;
	int rc;

	if (!user_name_fits(mc, o.a))
		return MC_USAGE;
	if (store_user_locate(mc->st, o.a, &part) == 0)
		return mc_fail(mc, STORE_EEXIST, "user '%s'", o.a);
	if ((rc = locate(mc, o.user, &part)) != MC_OK)
		return rc;
	/* the rights given to the user on mailboxes of the other partitions first: after a
	   failure between the two, the user still has the old name and the command is run
	   again (store_acl_carry carries what is left) */
	if ((rc = store_acl_carry(mc->st, o.user, o.a, NULL)) != 0)
		return mc_fail(mc, rc, "cannot carry the rights given to '%s' to '%s'", o.user,
			       o.a);
	if ((rc = store_write(mc->st, part, w_user_rename, &o)) != 0)
		return mc_fail(mc, rc, "cannot rename user '%s' to '%s'", o.user, o.a);
	if ((rc = rename_subs(mc, o.user, o.a)) != MC_OK)
		return rc;
	if (!mc->json)
		printf("user %s renamed to %s\n", o.user, o.a);
	else
		puts("{\"renamed\": true}");
	return MC_OK;
}

/* A user of the directory, for the merge with the store's. */
struct dir_user {
	char *key; /* the login, lower-cased */
	char *login, *address;
	char *moved_to; /* a tombstone's host (the user moved away from this store) */
	bool in_store;
};

struct user_walk {
	struct mc_table *tab;
	const char *pattern;
	unsigned part;
	struct dir_user *dir;
	size_t ndir, capdir;
	int want; /* --source: 0 all, else a bit of SRC_* */
	struct store *st;
};

enum { SRC_STORE = 1, SRC_DIRECTORY = 2, SRC_BOTH = 4 };

static void dir_user_add(const char *login, const char *address, void *arg)
{
	struct user_walk *w = arg;
	struct dir_user *d;

	if (w->ndir == w->capdir) {
		w->capdir = w->capdir ? w->capdir * 2 : 256;
		w->dir = xreallocarray(w->dir, w->capdir, sizeof(*w->dir));
	}
	d = &w->dir[w->ndir++];
	d->login = xstrdup(login);
	d->key = xstrdup(login);
	str_lower(d->key, strlen(d->key));
	d->address = address != NULL ? xstrdup(address) : NULL;
	d->moved_to = NULL;
	d->in_store = false;
}

static int dir_user_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dir_user *)a)->key, ((const struct dir_user *)b)->key);
}

static struct dir_user *dir_find(struct user_walk *w, const char *name)
{
	struct dir_user key = { .key = xstrdup(name) }, *d;

	str_lower(key.key, strlen(key.key));
	d = w->ndir ? bsearch(&key, w->dir, w->ndir, sizeof(*w->dir), dir_user_cmp) : NULL;
	free(key.key);
	return d;
}

static bool wanted(const struct user_walk *w, int source)
{
	return w->want == 0 || (w->want & source) != 0;
}

static int user_row(const struct store_user *u, void *arg)
{
	struct user_walk *w = arg;
	struct dir_user *d = dir_find(w, u->name);

	if (d != NULL)
		d->in_store = true;
	if ((w->pattern != NULL && !store_mbox_match(w->pattern, u->name, strlen(u->name))) ||
	    !wanted(w, d != NULL ? SRC_BOTH : SRC_STORE))
		return 0;
	mc_table_row(w->tab);
	mc_cell_str(w->tab, u->name);
	mc_cell_str(w->tab, d != NULL ? "both" : "store");
	mc_cell_u64(w->tab, w->part);
	mc_cell_u64(w->tab, u->used_msgs);
	mc_cell_u64(w->tab, u->used_bytes);
	mc_cell_u64(w->tab, u->quota_msgs);
	mc_cell_u64(w->tab, u->quota_bytes);
	mc_cell_time(w->tab, u->created);
	mc_cell_str(w->tab, d != NULL ? d->address : NULL);
	mc_cell_null(w->tab);
	return 0;
}

/* A tombstone (store_tomb.c) of a user moved away: the directory's row says where to;
   a name the directory does not list gets a row of its own, source "moved". */
static int tomb_row(const struct store_tomb *tb, void *arg)
{
	struct user_walk *w = arg;
	struct dir_user *d;
	unsigned part;

	if (tb->expired || store_user_locate(w->st, tb->user, &part) == 0)
		return 0; /* holds nothing, or made again here */
	if ((d = dir_find(w, tb->user)) != NULL) {
		if (d->moved_to == NULL)
			d->moved_to = xstrdup(tb->host);
		return 0;
	}
	if ((w->pattern != NULL && !store_mbox_match(w->pattern, tb->user, strlen(tb->user))) ||
	    !wanted(w, SRC_STORE))
		return 0;
	mc_table_row(w->tab);
	mc_cell_str(w->tab, tb->user);
	mc_cell_str(w->tab, "moved");
	mc_cell_u64(w->tab, w->part);
	for (int k = 0; k < 6; k++)
		mc_cell_null(w->tab);
	mc_cell_str(w->tab, tb->host);
	return 0;
}

/* The directory's users not in the store: source "directory", no store columns. */
static void dir_only_rows(struct user_walk *w)
{
	for (size_t i = 0; i < w->ndir; i++) {
		struct dir_user *d = &w->dir[i];

		if (d->in_store || !wanted(w, SRC_DIRECTORY) ||
		    (w->pattern != NULL &&
		     !store_mbox_match(w->pattern, d->login, strlen(d->login))))
			continue;
		mc_table_row(w->tab);
		mc_cell_str(w->tab, d->login);
		mc_cell_str(w->tab, "directory");
		for (int k = 0; k < 6; k++)
			mc_cell_null(w->tab);
		mc_cell_str(w->tab, d->address);
		mc_cell_str(w->tab, d->moved_to);
	}
}

static const char *const user_cols[] = { "user",    "source",         "partition",   "messages",
					 "bytes",   "quota_messages", "quota_bytes", "created",
					 "address", "moved_to",       NULL };

int mc_user_list(struct mc *mc, const struct mc_args *a)
{
	struct user_walk w = { mc_table_new(user_cols), a->pos[0], 0, .st = mc->st };
	struct store_txn *t;
	char *err = NULL;
	int rc = 0, exit_rc = MC_OK;

	if (a->set[0]) {
		const char *s = a->val[0];

		w.want = strcmp(s, "store") == 0       ? SRC_STORE | SRC_BOTH
			 : strcmp(s, "directory") == 0 ? SRC_DIRECTORY | SRC_BOTH
			 : strcmp(s, "both") == 0      ? SRC_BOTH
			 : strcmp(s, "all") == 0       ? 0
						       : -1;
		if (w.want < 0) {
			mc_table_free(&w.tab);
			return mc_usage(mc, "--source store|directory|both|all");
		}
	}
	/* --source store asks no directory */
	if (w.want != (SRC_STORE | SRC_BOTH) &&
	    ldapauth_list_users(mc->conf, dir_user_add, &w, &err) < 0) {
		fprintf(stderr, "mailctl: the directory's users are not listed: %s\n", err);
		free(err);
		exit_rc = MC_TEMPFAIL;
	}
	if (w.ndir > 0)
		qsort(w.dir, w.ndir, sizeof(*w.dir), dir_user_cmp);
	for (w.part = 0; w.part < store_partitions(mc->st) && rc == 0; w.part++) {
		if ((rc = store_txn_begin(mc->st, w.part, STORE_TXN_READ, &t)) != 0)
			break;
		rc = store_user_list(t, user_row, &w);
		if (rc == 0)
			rc = store_tomb_list(t, tomb_row, &w);
		store_txn_abort(&t);
	}
	if (rc == 0)
		dir_only_rows(&w);
	for (size_t i = 0; i < w.ndir; i++) {
		free(w.dir[i].key);
		free(w.dir[i].login);
		free(w.dir[i].address);
		free(w.dir[i].moved_to);
	}
	free(w.dir);
	if (rc != 0) {
		mc_table_free(&w.tab);
		return mc_fail(mc, rc, "cannot list users of partition %u", w.part);
	}
	mc_table_print(mc, &w.tab);
	return exit_rc;
}

static int count_mbox(const struct store_mbox_info *mi, void *arg)
{
	*(uint64_t *)arg += !(mi->attrs & STORE_MBOX_NOSELECT);
	return 0;
}

int mc_user_show(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "user",        "id",        "partition",
					    "messages",    "bytes",     "quota_messages",
					    "quota_bytes", "mailboxes", "created",
					    NULL };
	struct mc_table *tab;
	struct store_txn *t;
	struct store_user u;
	uint64_t nmb = 0;
	struct store_tomb tb;
	unsigned part;
	int rc;

	if (store_user_locate(mc->st, a->pos[0], &part) == STORE_ENOUSER &&
	    store_tomb_find(mc->st, a->pos[0], &tb) == 0) {
		char at[32], until[32];

		mc_fmt_time(at, sizeof(at), tb.when);
		mc_fmt_time(until, sizeof(until),
			    tb.when + conf_values(mc->conf)->store.tombstone_age_ms / 1000);
		return mc_refuse(mc, MC_NOUSER,
				 "its tombstone holds the name here until the [store] "
				 "tombstone_age after that (mail to it here gets 451, logins a "
				 "referral); `mailctl user del` removes it",
				 "user '%s' moved to %s at %s (tombstone until %s)", a->pos[0],
				 tb.host, at, until);
	}
	if ((rc = mc_begin(mc, a->pos[0], NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	if ((rc = store_mbox_list(t, u.id, "*", false, count_mbox, &nmb)) != 0) {
		store_txn_abort(&t);
		return mc_fail(mc, rc, "mailboxes of '%s'", a->pos[0]);
	}
	tab = mc_table_new(cols);
	mc_table_row(tab);
	mc_cell_str(tab, u.name);
	mc_cell_hex(tab, u.id);
	mc_cell_u64(tab, STORE_ID_PART(u.id));
	mc_cell_u64(tab, u.used_msgs);
	mc_cell_u64(tab, u.used_bytes);
	mc_cell_u64(tab, u.quota_msgs);
	mc_cell_u64(tab, u.quota_bytes);
	mc_cell_u64(tab, nmb);
	mc_cell_time(tab, u.created);
	store_txn_abort(&t);
	mc_table_print_record(mc, &tab);
	return MC_OK;
}

/* ------------------------------------------------------------------------------------- */
/* quota */

static void quota_record(struct mc *mc, const struct store_user *u)
{
	static const char *const cols[] = {
		"user",     "bytes",          "quota_bytes",      "bytes_percent",
		"messages", "quota_messages", "messages_percent", NULL
	};
	struct mc_table *tab = mc_table_new(cols);

	mc_table_row(tab);
	mc_cell_str(tab, u->name);
	mc_cell_u64(tab, u->used_bytes);
	mc_cell_u64(tab, u->quota_bytes);
	if (u->quota_bytes)
		mc_cell_u64(tab, u->used_bytes * 100 / u->quota_bytes);
	else
		mc_cell_null(tab);
	mc_cell_u64(tab, u->used_msgs);
	mc_cell_u64(tab, u->quota_msgs);
	if (u->quota_msgs)
		mc_cell_u64(tab, u->used_msgs * 100 / u->quota_msgs);
	else
		mc_cell_null(tab);
	mc_table_print_record(mc, &tab);
}

int mc_quota_get(struct mc *mc, const struct mc_args *a)
{
	struct store_txn *t;
	struct store_user u;
	int rc;

	if ((rc = mc_begin(mc, a->pos[0], NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	quota_record(mc, &u);
	store_txn_abort(&t);
	return MC_OK;
}

static int w_quota(struct store_txn *t, void *arg)
{
	struct op *o = arg;
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, o->user, &u)) != 0)
		return rc;
	return store_user_set_quota(t, o->user, o->on ? o->n1 : u.quota_bytes,
				    o->special ? o->n2 : u.quota_msgs);
}

int mc_quota_set(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .on = a->set[0], .special = a->set[1] };
	unsigned part;
	int rc;

	if (!a->set[0] && !a->set[1])
		return mc_usage(mc, "give --bytes SIZE and/or --messages N");
	if ((a->set[0] && str_to_size(a->val[0], strlen(a->val[0]), &o.n1) < 0) ||
	    (a->set[1] && str_to_u64(a->val[1], strlen(a->val[1]), UINT64_MAX, &o.n2) < 0))
		return mc_usage(mc, "bad quota (bytes take k/M/G; messages a number)");
	if ((rc = locate(mc, o.user, &part)) != MC_OK)
		return rc;
	if ((rc = store_write(mc->st, part, w_quota, &o)) != 0)
		return mc_fail(mc, rc, "cannot set the quota of '%s'", o.user);
	return mc_quota_get(mc, a);
}

/* ------------------------------------------------------------------------------------- */
/* mailbox */

static const char *const mbox_cols[] = { "mailbox",  "special",     "subscribed",    "selectable",
					 "messages", "recent",      "unseen",        "deleted",
					 "uidnext",  "uidvalidity", "highestmodseq", "size",
					 NULL };

struct mbox_walk {
	struct mc_table *tab;
	struct store_txn *t;
};

static void mbox_row(struct mc_table *tab, struct store_txn *t, const struct store_mbox_info *mi)
{
	struct store_status s;
	char sp[128];

	special_text(sp, sizeof(sp), mi->special);
	mc_table_row(tab);
	mc_cell_strn(tab, mi->name, mi->name_len);
	mc_cell_str(tab, sp);
	mc_cell_bool(tab, (mi->attrs & STORE_MBOX_SUBSCRIBED) != 0);
	mc_cell_bool(tab, !(mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT)));
	if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT) ||
	    store_mbox_status(t, mi->id, &s) != 0)
		return; /* the remaining cells stay null */
	mc_cell_u64(tab, s.messages);
	mc_cell_u64(tab, s.recent);
	mc_cell_u64(tab, s.unseen);
	mc_cell_u64(tab, s.deleted);
	mc_cell_u64(tab, s.uidnext);
	mc_cell_u64(tab, s.uidvalidity);
	mc_cell_u64(tab, s.highestmodseq);
	mc_cell_u64(tab, s.size);
}

static int mbox_walk_cb(const struct store_mbox_info *mi, void *arg)
{
	struct mbox_walk *w = arg;

	mbox_row(w->tab, w->t, mi);
	return 0;
}

static int mbox_table(struct mc *mc, const char *user, const char *pattern, bool subscribed,
		      bool record)
{
	struct mbox_walk w;
	struct store_user u;
	int rc;

	if ((rc = mc_begin(mc, user, NULL, STORE_TXN_READ, &w.t, &u, NULL)) != MC_OK)
		return rc;
	w.tab = mc_table_new(mbox_cols);
	rc = store_mbox_list(w.t, u.id, pattern, subscribed, mbox_walk_cb, &w);
	store_txn_abort(&w.t);
	if (rc != 0) {
		mc_table_free(&w.tab);
		return mc_fail(mc, rc, "mailboxes of '%s'", user);
	}
	if (record)
		mc_table_print_record(mc, &w.tab);
	else
		mc_table_print(mc, &w.tab);
	return MC_OK;
}

int mc_mbox_list(struct mc *mc, const struct mc_args *a)
{
	return mbox_table(mc, a->pos[0], a->npos > 1 ? a->pos[1] : "*", a->set[0], false);
}

int mc_mbox_status(struct mc *mc, const struct mc_args *a)
{
	struct store_txn *t;
	struct store_user u;
	uint64_t mbox;
	int rc;

	if (a->npos == 1)
		return mbox_table(mc, a->pos[0], "*", false, false);
	/* one mailbox: resolve it first so a missing one is an error, not an empty table */
	if ((rc = mc_begin(mc, a->pos[0], a->pos[1], STORE_TXN_READ, &t, &u, &mbox)) != MC_OK)
		return rc;
	store_txn_abort(&t);
	if (strpbrk(a->pos[1], "*%") != NULL)
		return mc_usage(mc, "a mailbox name, not a pattern");
	return mbox_table(mc, a->pos[0], a->pos[1], false, true);
}

enum mbox_verb { MB_CREATE, MB_DELETE, MB_RENAME, MB_SUBSCRIBE };

/* Every mailbox write: resolve the user in this txn, then the verb in o->n1. */
static int w_mbox(struct store_txn *t, void *arg)
{
	struct op *o = arg;
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, o->user, &u)) != 0)
		return rc;
	switch ((enum mbox_verb)o->n1) {
	case MB_CREATE:
		if ((rc = store_mbox_create(t, u.id, o->a, o->special, &o->id)) != 0)
			return rc;
		return store_mbox_limit(t, u.id, o->max_count, o->max_depth, NULL);
	case MB_DELETE:
		return store_mbox_delete(t, u.id, o->a);
	case MB_RENAME:
		if ((rc = store_mbox_rename(t, u.id, o->a, o->b)) != 0) {
			o->limit_name = rc == STORE_ELIMIT;
			return rc;
		}
		return store_mbox_limit(t, u.id, o->max_count, o->max_depth, NULL);
	case MB_SUBSCRIBE:
		return store_mbox_subscribe(t, u.id, o->a, o->on);
	}
	return STORE_EINVAL;
}

int mc_mbox_ensure(struct store_txn *t, const char *user, const char *mailbox, bool create_user,
		   uint64_t *mbox_r)
{
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, user, &u)) == STORE_ENOUSER && create_user)
		rc = store_user_create(t, user, &u.id);
	if (rc != 0)
		return rc;
	if (store_mbox_find(t, u.id, mailbox, mbox_r) == 0)
		return 0;
	return store_mbox_create(t, u.id, mailbox, 0, mbox_r);
}

/* Runs one mailbox write for a user and prints what was done. */
static int mbox_write(struct mc *mc, enum mbox_verb verb, struct op *o, const char *done)
{
	unsigned part;
	int rc;

	const char *to = verb == MB_RENAME ? o->b : o->a;

	/* a name the store cannot key (a lookup of one finds nothing: DELETE says so) */
	if (verb != MB_DELETE && strlen(to) > STORE_MAX_MBOX_NAME)
		return mc_usage(mc, "a mailbox name has at most %d bytes (this one %zu)",
				STORE_MAX_MBOX_NAME, strlen(to));
	if ((rc = locate(mc, o->user, &part)) != MC_OK)
		return rc;
	o->n1 = verb;
	o->max_count = (uint64_t)conf_values(mc->conf)->imapd.max_mailboxes_per_user;
	o->max_depth = (unsigned)conf_values(mc->conf)->imapd.max_mailbox_depth;
	if ((rc = store_write(mc->st, part, w_mbox, o)) == STORE_ELIMIT && verb == MB_RENAME &&
	    o->limit_name)
		return mc_refuse(
			mc, MC_REFUSED, "rename a child first or choose a shorter name",
			"mailbox '%s' of user '%s': a child's new name would pass %d bytes", o->a,
			o->user, STORE_MAX_MBOX_NAME);
	if (rc != 0)
		return mc_fail(mc, rc, "mailbox '%s' of user '%s'", o->a, o->user);
	if (mc->json) {
		fputs("{\"mailbox\": ", stdout);
		mc_json_str(stdout, o->b ? o->b : o->a, strlen(o->b ? o->b : o->a));
		printf(", \"done\": \"%s\"}\n", done);
	} else
		printf("mailbox %s %s\n", o->b ? o->b : o->a, done);
	return MC_OK;
}

int mc_mbox_create(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1] };

	if (a->set[0]) {
		size_t i, n = sizeof(specials) / sizeof(specials[0]);
		const char *v = a->val[0] + (a->val[0][0] == '\\');

		for (i = 0; i < n; i++)
			if (str_caseeq(v, strlen(v), specials[i].name, strlen(specials[i].name)))
				break;
		if (i == n)
			return mc_usage(mc, "unknown special use '%s'", a->val[0]);
		o.special = specials[i].bit;
	}
	return mbox_write(mc, MB_CREATE, &o, "created");
}

int mc_mbox_delete(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1] };

	return mbox_write(mc, MB_DELETE, &o, "deleted");
}

int mc_mbox_rename(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1], .b = a->pos[2] };

	return mbox_write(mc, MB_RENAME, &o, "renamed");
}

int mc_mbox_subscribe(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1], .on = true };

	return mbox_write(mc, MB_SUBSCRIBE, &o, "subscribed");
}

int mc_mbox_unsubscribe(struct mc *mc, const struct mc_args *a)
{
	struct op o = { .user = a->pos[0], .a = a->pos[1], .on = false };

	return mbox_write(mc, MB_SUBSCRIBE, &o, "unsubscribed");
}

/* cmd_mailbox.c — owns mailbox names (validation, INBOX) and CREATE, DELETE, RENAME,
 * SUBSCRIBE, UNSUBSCRIBE, LIST, LSUB, NAMESPACE. Names are modified UTF-7, checked strictly,
 * delimiter '/'; they are keys in the store's index and never reach the filesystem. CREATE,
 * DELETE and RENAME of other users' mailboxes (imap_ns.c) check the rights RFC 4314 4 asks
 * for and write in the owner's partition; a new mailbox inherits its parent's ACL. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/str.h"
#include "common/utf7imap.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define LIST_ATTRS_MAX 256 /* the attributes of one LIST reply line */

/* A name in modified UTF-7 (the store's form), validated. */
static char *mailbox_name_mutf7(const char *s, size_t len, const char **why_r)
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

char *imap_mailbox_name(const struct imap_client *c, const char *s, size_t len, const char **why_r)
{
	if (!c->utf8 || len == 0)
		return mailbox_name_mutf7(s, len, why_r);
	return imap_mailbox_name_utf8(s, len, why_r);
}

char *imap_mailbox_name_utf8(const char *s, size_t len, const char **why_r)
{
	struct buf b;
	char *name;

	/* modified UTF-7 takes at least 8 bytes for 9 of UTF-8 (U+0800..U+FFFF), so a name of
	   more than 2 x STORE_MAX_NAME bytes cannot fit; below that the encoding fits the
	   buffer (at most 2 bytes per byte) and fails only on what is not UTF-8 */
	if (len > 2 * STORE_MAX_NAME) {
		*why_r = "Mailbox name too long";
		return NULL;
	}
	buf_init(&b, 64, 4 * STORE_MAX_NAME + 16);
	if (utf7imap_encode(s, len, &b) < 0) {
		buf_release(&b);
		*why_r = "Mailbox name is not valid UTF-8";
		return NULL;
	}
	name = mailbox_name_mutf7(b.data, b.len, why_r);
	buf_release(&b);
	return name;
}

/* The mailbox name argument of cmd (index i), validated; NULL after a reply was sent. */
char *imap_mailbox_arg(struct imap_cmd *cmd, size_t i)
{
	const struct imap_arg *a = imap_cmd_arg(cmd, i);
	const char *why;
	char *name;

	if (a == NULL || !imap_arg_is_astring(a)) {
		imap_cmd_bad(cmd, "Mailbox name expected");
		return NULL;
	}
	if ((name = imap_mailbox_name(cmd->c, a->s, a->len, &why)) == NULL)
		imap_cmd_no(cmd, why);
	return name;
}

struct mbox_op {
	uint64_t user;
	char *a, *b;
	bool on;
	unsigned special;
	const char *what;   /* the command's name, for the reply */
	uint64_t id;        /* CREATE: the new mailbox (its MAILBOXID) */
	uint64_t max_count; /* CREATE, RENAME: [imapd] max_mailboxes_per_user */
	unsigned max_depth; /* and max_mailbox_depth */
	const char *limit;  /* which of them refused it (store_mbox_limit) */
	unsigned part;      /* the owner's partition, where the write goes */
};

static const struct {
	unsigned bit;
	const char *name;
} special_uses[] = {
	{ STORE_USE_ALL, "\\All" },       { STORE_USE_ARCHIVE, "\\Archive" },
	{ STORE_USE_DRAFTS, "\\Drafts" }, { STORE_USE_FLAGGED, "\\Flagged" },
	{ STORE_USE_JUNK, "\\Junk" },     { STORE_USE_SENT, "\\Sent" },
	{ STORE_USE_TRASH, "\\Trash" },
};
#define NUSES (sizeof(special_uses) / sizeof(special_uses[0]))

/* CREATE's (USE (\Sent ...)) parameter (RFC 6154): 0 and *mask_r, or -1. */
static int parse_use(const struct imap_arg *a, unsigned *mask_r)
{
	const struct imap_arg *use, *list;

	*mask_r = 0;
	if (a->type != IMAP_ARG_LIST || a->n != 2 || !imap_arg_atom_is(a + 1, "USE"))
		return -1;
	use = a + 1;
	list = imap_arg_next(use);
	if (list->type != IMAP_ARG_LIST)
		return -1;
	for (const struct imap_arg *f = list + 1; f <= list + list->span; f++) {
		size_t i;

		for (i = 0; i < NUSES && !imap_arg_atom_is(f, special_uses[i].name); i++)
			;
		if (i == NUSES)
			return -1;
		*mask_r |= special_uses[i].bit;
	}
	return 0;
}

/* The nearest existing parent of a new name and how many bytes of the name it is (0: none;
   RFC 4314 4). */
static size_t create_parent(struct store_txn *t, uint64_t user, const char *name, uint64_t *id_r)
{
	char *up = xstrdup(name), *s;
	size_t len = 0;

	while ((s = strrchr(up, '/')) != NULL) {
		*s = '\0';
		if (store_mbox_find_any(t, user, up, id_r) == 0) {
			len = (size_t)(s - up);
			break;
		}
	}
	free(up);
	return len;
}

/* A new mailbox inherits the list of its nearest existing parent (RFC 4314 4: SHOULD), and
   so does each level made for it in between. */
static int create_inherit(struct store_txn *t, const struct mbox_op *op, uint64_t from,
			  size_t plen)
{
	char *name = xstrdup(op->a);
	size_t len = strlen(name);
	uint64_t id;
	int rc = 0;

	/* the levels below the parent: the new name cut at each later '/', and itself */
	for (size_t i = plen + 1; rc == 0 && i <= len; i++) {
		if (i < len && name[i] != '/')
			continue;
		name[i] = '\0';
		if ((rc = store_mbox_find(t, op->user, name, &id)) == 0)
			rc = store_acl_copy(t, from, id);
		if (i < len)
			name[i] = '/';
	}
	free(name);
	return rc;
}

static int create_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;
	uint64_t parent = 0;
	size_t plen = create_parent(t, op->user, op->a, &parent);
	int rc = store_mbox_create(t, op->user, op->a, op->special, &op->id);

	if (rc == STORE_ELIMIT)
		op->limit = "name"; /* STORE_MAX_MBOX_NAME */
	if (rc == 0 && plen > 0)
		rc = create_inherit(t, op, parent, plen);
	return rc != 0 ? rc
		       : store_mbox_limit(t, op->user, op->max_count, op->max_depth, &op->limit);
}

static int delete_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	return store_mbox_delete(t, op->user, op->a);
}

static int rename_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	int rc = store_mbox_rename(t, op->user, op->a, op->b);

	if (rc == STORE_ELIMIT)
		op->limit = "name"; /* the new name or a child's */
	return rc != 0 ? rc
		       : store_mbox_limit(t, op->user, op->max_count, op->max_depth, &op->limit);
}

static int subscribe_fn(struct store_txn *t, void *arg)
{
	struct mbox_op *op = arg;

	int rc = store_mbox_subscribe(t, op->user, op->a, op->on);

	if (rc == STORE_ELIMIT)
		op->limit = "name";
	return rc;
}

static void mbox_op_free(void *arg)
{
	struct mbox_op *op = arg;

	free(op->a);
	free(op->b);
	free(op);
}

/* Whether local names a and b (of one owner) have the same parent. */
static bool same_parent(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	size_t la = sa != NULL ? (size_t)(sa - a) : 0, lb = sb != NULL ? (size_t)(sb - b) : 0;

	return la == lb && memcmp(a, b, la) == 0;
}

/* A refusal: its response code and text. */
struct mbox_no {
	const char *code, *text;
};

static const struct mbox_no no_x = { "NOPERM", "no right to delete or rename this mailbox (x)" },
			    no_owner = { "CANNOT", "a mailbox cannot change owners" },
			    no_top = { "NOPERM", "only the owner creates mailboxes at the top of "
						 "their namespace" },
			    no_k = { "NOPERM", "no right to create mailboxes here (k)" },
			    no_box = { "NONEXISTENT", "no such mailbox" },
			    no_ns = { "NOPERM", "not a mailbox of another user" };

/* CREATE, DELETE and RENAME of names of the other namespaces (imap_ns.c): another user's
   mailboxes, with the rights RFC 4314 4 asks for ('k' on the nearest existing parent of a
   new name, 'x' on the mailbox deleted or renamed; a RENAME within one parent needs no
   'k'), op turned into the owner's write (its user, partition and names). 0, or -1 after
   the NO: a mailbox never moves between owners ([CANNOT]), one the client cannot see is
   [NONEXISTENT], a name with no owner's mailbox above it (a prefix or user level, a name at
   the top of another's namespace) [NOPERM]. */
static int mbox_other(struct imap_cmd *cmd, int (*fn)(struct store_txn *, void *),
		      struct mbox_op *op, const char *what)
{
	struct imap_client *c = cmd->c;
	bool a_other = imap_ns_reserved(c, op->a);
	struct imap_ns_box from = { 0 }, to = { 0 };
	const struct mbox_no *no = NULL;
	int rc;

	if (fn == rename_fn && a_other != imap_ns_reserved(c, op->b)) {
		imap_cmd_reply(cmd, "NO", "[%s] %s: %s", no_owner.code, what, no_owner.text);
		return -1;
	}
	if (fn != create_fn) {
		rc = imap_ns_find(c, op->a, &from);
		if (rc == 0 && !(from.rights & STORE_ACL_DELETE_MBOX))
			no = &no_x;
	} else {
		rc = 0;
	}
	if (rc == 0 && fn != delete_fn &&
	    (rc = imap_ns_parent(c, fn == create_fn ? op->a : op->b, &to)) == 0) {
		if (fn == rename_fn && no == NULL && to.owner != from.owner)
			no = &no_owner;
		else if (no == NULL && !(to.rights & STORE_ACL_CREATE) &&
			 (fn == create_fn || !same_parent(from.local, to.local)))
			no = to.mbox == 0 ? &no_top : &no_k;
	} else if (rc == STORE_ENOMBOX && fn != create_fn && from.local == NULL) {
		no = &no_box;
	} else if (rc == STORE_ENOMBOX) {
		no = &no_ns;
	}
	if (rc != 0 && no == NULL)
		imap_cmd_store_error(cmd, rc, what);
	else if (no != NULL)
		imap_cmd_reply(cmd, "NO", "[%s] %s: %s", no->code, what, no->text);
	if (rc == 0 && no == NULL) {
		op->user = from.local != NULL ? from.owner : to.owner;
		op->part = from.local != NULL ? from.part : to.part;
		free(op->a);
		free(op->b);
		op->a = from.local != NULL ? from.local : to.local;
		op->b = from.local != NULL ? to.local : NULL;
		from.local = to.local = NULL;
	}
	imap_ns_box_release(&from);
	imap_ns_box_release(&to);
	return rc == 0 && no == NULL ? 0 : -1;
}

/* Queues a mailbox write in the group commit; the command resumes in mbox_resume. */
static bool mbox_write(struct imap_cmd *cmd, int (*fn)(struct store_txn *, void *),
		       struct mbox_op *op, const char *what)
{
	struct mbox_op *h;

	op->part = cmd->c->part;
	/* the other namespaces' names are other users' mailboxes (imap_ns.c) */
	if (fn != subscribe_fn &&
	    (imap_ns_reserved(cmd->c, op->a) ||
	     (op->b != NULL && imap_ns_reserved(cmd->c, op->b))) &&
	    mbox_other(cmd, fn, op, what) < 0) {
		free(op->a);
		free(op->b);
		return true;
	}
	h = xmalloc(sizeof(*h));

	*h = *op;
	h->what = what;
	imap_commit_start(cmd, op->part, NULL, fn, h, mbox_op_free);
	return false;
}

/* NO [LIMIT] naming the limit a CREATE or RENAME would have passed (nothing was written). */
static bool mbox_limit_reply(struct imap_cmd *cmd, const struct mbox_op *op)
{
	const struct imap_client *c = cmd->c;

	log_info("%016" PRIx64 " imap %s user=%s result=refused reason=\"%s limit\"", c->id,
		 op->what, c->user ? c->user : "-", op->limit ? op->limit : "mailbox");
	if (op->limit != NULL && strcmp(op->limit, "name") == 0)
		return imap_cmd_reply(cmd, "NO", "[LIMIT] %s: mailbox names have at most %d bytes",
				      op->what, STORE_MAX_MBOX_NAME);
	if (op->limit != NULL && strcmp(op->limit, "depth") == 0)
		return imap_cmd_reply(cmd, "NO",
				      "[LIMIT] %s: mailbox names have at most %u levels", op->what,
				      op->max_depth);
	return imap_cmd_reply(cmd, "NO", "[LIMIT] %s: at most %" PRIu64 " mailboxes per user",
			      op->what, op->max_count);
}

/* Answers a mailbox write once its commit is back. */
static bool mbox_resume(struct imap_cmd *cmd)
{
	bool pending, r;
	int rc;
	struct mbox_op *op = imap_commit_result(cmd, &pending, &rc);
	char *done;

	if (pending)
		return false;
	if (rc == STORE_ELIMIT)
		return mbox_limit_reply(cmd, op);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, op->what);
	if (op->id != 0) { /* CREATE: the new mailbox's MAILBOXID (RFC 8474 4.1) */
		char id[IMAP_OBJECTID_MAX];

		imap_mailboxid(op->id, id);
		done = xasprintf("[MAILBOXID (%s)] %s completed", id, op->what);
	} else {
		done = xasprintf("%s completed", op->what);
	}
	r = imap_cmd_ok(cmd, done);
	free(done);
	return r;
}

bool cmd_create(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false, 0 };
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);
	size_t argc = imap_cmd_argc(cmd);

	if (cmd->ctx != NULL)
		return mbox_resume(cmd);

	if (argc < 1 || argc > 2)
		return imap_cmd_bad(cmd, "Expected: CREATE mailbox [(USE (attributes))]");
	if (argc == 2 && parse_use(imap_cmd_arg(cmd, 1), &op.special) < 0)
		return imap_cmd_no(cmd, "[USEATTR] Unknown special-use attribute");
	/* a trailing delimiter says the name will have children: it is not part of the name */
	if (imap_arg_is_astring(a) && a->len > 1 && a->s[a->len - 1] == '/') {
		const char *why;

		if ((op.a = imap_mailbox_name(cmd->c, a->s, a->len - 1, &why)) == NULL)
			return imap_cmd_no(cmd, why);
	} else if ((op.a = imap_mailbox_arg(cmd, 0)) == NULL) {
		return true;
	}
	if (strcmp(op.a, "INBOX") == 0) {
		free(op.a);
		return imap_cmd_no(cmd, "[ALREADYEXISTS] INBOX exists always");
	}
	op.max_count = cmd->c->srv->max_mailboxes;
	op.max_depth = cmd->c->srv->max_depth;
	return mbox_write(cmd, create_fn, &op, "CREATE");
}

bool cmd_delete(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false, 0 };

	if (cmd->ctx != NULL)
		return mbox_resume(cmd);

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: DELETE mailbox");
	if ((op.a = imap_mailbox_arg(cmd, 0)) == NULL)
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
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, false, 0 };

	if (cmd->ctx != NULL)
		return mbox_resume(cmd);

	if (imap_cmd_argc(cmd) != 2)
		return imap_cmd_bad(cmd, "Expected: RENAME from to");
	if ((op.a = imap_mailbox_arg(cmd, 0)) == NULL)
		return true;
	if ((op.b = imap_mailbox_arg(cmd, 1)) == NULL) {
		free(op.a);
		return true;
	}
	op.max_count = cmd->c->srv->max_mailboxes;
	op.max_depth = cmd->c->srv->max_depth;
	return mbox_write(cmd, rename_fn, &op, "RENAME");
}

bool cmd_subscribe(struct imap_cmd *cmd)
{
	struct mbox_op op = { cmd->c->user_id, NULL, NULL, !(cmd->def_flags & CMD_ALT), 0 };

	if (cmd->ctx != NULL)
		return mbox_resume(cmd);

	if (imap_cmd_argc(cmd) != 1)
		return imap_cmd_bad(cmd, "Expected: SUBSCRIBE mailbox");
	if ((op.a = imap_mailbox_arg(cmd, 0)) == NULL)
		return true;
	return mbox_write(cmd, subscribe_fn, &op, op.on ? "SUBSCRIBE" : "UNSUBSCRIBE");
}

enum { LSEL_SUBSCRIBED = 1, LSEL_SPECIAL = 2, LSEL_RECURSIVE = 4 };
enum {
	LRET_SUBSCRIBED = 1,
	LRET_CHILDREN = 2,
	LRET_SPECIAL = 4,
	LRET_STATUS = 8,
	LRET_METADATA = 16,
};

struct list_ctx {
	struct imap_client *c;
	struct store_txn *t;
	bool lsub;
	unsigned sel, ret;
	const struct imap_arg *status;   /* RETURN (STATUS (items)) */
	const struct imap_arg *metadata; /* RETURN (METADATA (entries)), cmd_metadata.c */
	char **subs;                     /* every subscription, sorted (parents_find) */
	size_t nsubs;
	char **parents; /* this pattern's parents_find result, sorted */
	size_t nparents;
	bool childinfo; /* list_cb: the mailbox is one of parents[] */
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether name[0..len) is in the sorted v. */
static bool name_in(char *const *v, size_t n, const char *name, size_t len)
{
	char buf[STORE_MAX_NAME + 1];
	const char *key = buf;

	if (n == 0 || len > STORE_MAX_NAME)
		return false;
	memcpy(buf, name, len);
	buf[len] = '\0';
	return bsearch(&key, v, n, sizeof(*v), name_cmp) != NULL;
}

/* Whether a subscription with no mailbox of the user's is one of the other namespaces'
   mailboxes the user sees. */
static bool list_ns_shared(struct imap_client *c, const struct store_mbox_info *mi)
{
	char *name = xmemdup0(mi->name, mi->name_len);
	struct imap_ns_box b;
	bool shared = imap_ns_reserved(c, name) && imap_ns_find(c, name, &b) == 0;

	if (shared)
		imap_ns_box_release(&b);
	free(name);
	return shared;
}

static int list_cb(const struct store_mbox_info *mi, void *arg)
{
	struct list_ctx *l = arg;
	struct imap_client *c = l->c;
	bool nonexistent = (mi->attrs & STORE_MBOX_NONEXISTENT) != 0;
	struct store_status st;
	struct buf attrs;

	if ((l->sel & LSEL_SPECIAL) && mi->special == 0)
		return 0;
	if (nonexistent && list_ns_shared(c, mi))
		return 0; /* a subscription to another's mailbox: imap_ns_list has its line */
	if (!l->childinfo && !l->lsub)
		l->childinfo = name_in(l->parents, l->nparents, mi->name, mi->name_len);
	buf_init(&attrs, 64, LIST_ATTRS_MAX);
	if (nonexistent && (l->sel & LSEL_SUBSCRIBED))
		buf_puts(&attrs, "\\NonExistent ");
	else if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT))
		buf_puts(&attrs, "\\Noselect ");
	if (!l->lsub && !nonexistent)
		buf_puts(&attrs, mi->attrs & STORE_MBOX_HASCHILDREN ? "\\HasChildren "
								    : "\\HasNoChildren ");
	if ((l->sel & LSEL_SUBSCRIBED) ||
	    ((l->ret & LRET_SUBSCRIBED) && (mi->attrs & STORE_MBOX_SUBSCRIBED)))
		buf_puts(&attrs, "\\Subscribed ");
	if (!l->lsub && mi->special != 0) {
		imap_special_use_attrs(&attrs, mi->special);
		buf_puts(&attrs, " ");
	}
	if (attrs.len > 0)
		buf_truncate(&attrs, attrs.len - 1);
	imap_printf(c, "* %s (%s) \"/\" ", l->lsub ? "LSUB" : "LIST", buf_cstr(&attrs));
	imap_write_mailbox(c, mi->name, mi->name_len);
	if (l->childinfo)
		imap_printf(c, " (\"CHILDINFO\" (\"SUBSCRIBED\"))");
	imap_write(c, "\r\n", 2);
	l->childinfo = false;
	buf_release(&attrs);
	/* LIST-STATUS: selectable mailboxes only (RFC 5819) */
	if ((l->ret & LRET_STATUS) && !nonexistent && !(mi->attrs & STORE_MBOX_NOSELECT) &&
	    store_mbox_status(l->t, mi->id, &st) == 0)
		imap_status_write(c, mi->name, mi->name_len, mi->id, &st, l->status);
	/* LIST-METADATA: \Noselect mailboxes have entries too */
	if ((l->ret & LRET_METADATA) && !nonexistent)
		imap_list_metadata_write(c, l->t, mi->id, mi->name, mi->name_len, l->metadata);
	return 0;
}

static int collect_sub_cb(const struct store_mbox_info *mi, void *arg)
{
	struct list_ctx *l = arg;

	if (l->nsubs % 16 == 0)
		l->subs = xreallocarray(l->subs, l->nsubs + 16, sizeof(*l->subs));
	l->subs[l->nsubs++] = xmemdup0(mi->name, mi->name_len);
	return 0;
}

/* The parents a subscription speaks for: each name the pattern matches that has a subscribed
   descendant the pattern does not match. LSUB lists them \Noselect when they are not
   subscribed (RFC 3501 6.3.9, "foo/bar" subscribed: LSUB "" % gives foo); LIST (SUBSCRIBED
   RECURSIVEMATCH) gives them CHILDINFO (RFC 5258 3), and a descendant that is itself in the
   result speaks for no parent. */
static void parents_find(struct list_ctx *l, const char *pattern)
{
	for (size_t i = 0; i < l->nsubs; i++) {
		const char *d = l->subs[i];

		if (store_mbox_match(pattern, d, strlen(d)))
			continue;
		for (const char *p = strchr(d, '/'); p != NULL; p = strchr(p + 1, '/')) {
			size_t len = (size_t)(p - d);

			if (!store_mbox_match(pattern, d, len))
				continue;
			if (l->nparents % 16 == 0)
				l->parents = xreallocarray(l->parents, l->nparents + 16,
							   sizeof(*l->parents));
			l->parents[l->nparents++] = xmemdup0(d, len);
		}
	}
	if (l->nparents > 1)
		qsort(l->parents, l->nparents, sizeof(*l->parents), name_cmp);
	if (l->nparents > 1) { /* each once */
		size_t o = 1;

		for (size_t i = 1; i < l->nparents; i++) {
			if (strcmp(l->parents[i], l->parents[o - 1]) == 0)
				free(l->parents[i]);
			else
				l->parents[o++] = l->parents[i];
		}
		l->nparents = o;
	}
}

static void parents_free(struct list_ctx *l)
{
	for (size_t i = 0; i < l->nparents; i++)
		free(l->parents[i]);
	free(l->parents);
	l->parents = NULL;
	l->nparents = 0;
}

/* A parent that is not subscribed itself: LSUB's \Noselect line, or LIST's with CHILDINFO
   (with its attributes when it exists, \NonExistent when only its descendants do). */
static int parent_write(struct list_ctx *l, const char *name)
{
	bool sel = (l->sel & LSEL_SUBSCRIBED) != 0;
	int rc;

	if (l->lsub) {
		imap_printf(l->c, "* LSUB (\\Noselect) \"/\" ");
		imap_write_mailbox(l->c, name, strlen(name));
		imap_write(l->c, "\r\n", 2);
		return 0;
	}
	l->sel &= ~(unsigned)LSEL_SUBSCRIBED;
	l->childinfo = true;
	rc = store_mbox_list(l->t, l->c->user_id, name, false, list_cb, l);
	if (sel)
		l->sel |= LSEL_SUBSCRIBED;
	if (rc == 0 && l->childinfo) { /* list_cb did not run: no such mailbox */
		l->childinfo = false;
		imap_printf(l->c, "* LIST (\\NonExistent) \"/\" ");
		imap_write_mailbox(l->c, name, strlen(name));
		imap_printf(l->c, " (\"CHILDINFO\" (\"SUBSCRIBED\"))\r\n");
	}
	return rc;
}

/* LIST-EXTENDED selection options "(SUBSCRIBED ...)": 0, or -1. */
static int list_selection(const struct imap_arg *a, unsigned *sel)
{
	for (const struct imap_arg *o = a + 1; o <= a + a->span; o = imap_arg_next(o)) {
		if (imap_arg_atom_is(o, "SUBSCRIBED"))
			*sel |= LSEL_SUBSCRIBED;
		else if (imap_arg_atom_is(o, "SPECIAL-USE"))
			*sel |= LSEL_SPECIAL;
		else if (imap_arg_atom_is(o, "RECURSIVEMATCH"))
			*sel |= LSEL_RECURSIVE;
		else if (!imap_arg_atom_is(o, "REMOTE"))
			return -1;
	}
	/* RECURSIVEMATCH alone is an error (RFC 5258 3) */
	return (*sel & LSEL_RECURSIVE) && !(*sel & (LSEL_SUBSCRIBED | LSEL_SPECIAL)) ? -1 : 0;
}

/* RETURN (SUBSCRIBED CHILDREN SPECIAL-USE STATUS (items) METADATA (entries)): 0, or -1. */
static int list_return(const struct imap_arg *a, struct list_ctx *l)
{
	if (a == NULL || a->type != IMAP_ARG_LIST) /* "RETURN" last: nothing after it */
		return -1;
	for (const struct imap_arg *o = a + 1; o <= a + a->span; o = imap_arg_next(o)) {
		if (imap_arg_atom_is(o, "SUBSCRIBED"))
			l->ret |= LRET_SUBSCRIBED;
		else if (imap_arg_atom_is(o, "CHILDREN"))
			l->ret |= LRET_CHILDREN;
		else if (imap_arg_atom_is(o, "SPECIAL-USE"))
			l->ret |= LRET_SPECIAL;
		else if (imap_arg_atom_is(o, "STATUS")) {
			o = imap_arg_next(o);
			if (o > a + a->span || !imap_status_items_ok(l->c, o))
				return -1;
			l->ret |= LRET_STATUS;
			l->status = o;
		} else if (imap_arg_atom_is(o, "METADATA")) {
			o = imap_arg_next(o);
			if (o > a + a->span || !imap_list_metadata_ok(o))
				return -1;
			l->ret |= LRET_METADATA;
			l->metadata = o;
		} else
			return -1;
	}
	return 0;
}

/* The mailboxes (or subscriptions) pattern matches, and the parents that speak for
   subscriptions it does not match (parents_find). */
static int list_matches(struct list_ctx *l, const char *pattern)
{
	bool subscribed = l->lsub || (l->sel & LSEL_SUBSCRIBED);
	bool parents = l->lsub || ((l->sel & LSEL_RECURSIVE) && (l->sel & LSEL_SUBSCRIBED));
	bool want_subs = parents || subscribed || (l->ret & LRET_SUBSCRIBED);
	struct imap_ns_subs subs = { NULL, 0, subscribed, l->lsub };
	struct imap_ns_listopts ns = { NULL, (l->sel & LSEL_SPECIAL) != 0,
				       (l->ret & LRET_STATUS) ? l->status : NULL,
				       (l->ret & LRET_METADATA) ? l->metadata : NULL };
	int rc = 0;

	if (want_subs && l->subs == NULL) {
		rc = store_mbox_list(l->t, l->c->user_id, "*", true, collect_sub_cb, l);
		if (l->nsubs > 1)
			qsort(l->subs, l->nsubs, sizeof(*l->subs), name_cmp);
	}
	if (rc == 0 && parents)
		parents_find(l, pattern);
	if (rc == 0)
		rc = store_mbox_list(l->t, l->c->user_id, pattern, subscribed, list_cb, l);
	subs.v = l->subs;
	subs.n = l->nsubs;
	ns.subs = subscribed || (l->ret & LRET_SUBSCRIBED) ? &subs : NULL;
	if (rc == 0) /* mailboxes others share (imap_ns.c) */
		rc = imap_ns_list(l->c, pattern, &ns);
	for (size_t i = 0; i < l->nparents && rc == 0; i++)
		if (!name_in(l->subs, l->nsubs, l->parents[i], strlen(l->parents[i])))
			rc = parent_write(l, l->parents[i]);
	parents_free(l);
	return rc;
}

/* Lists one pattern (reference already applied); INBOX matched case-insensitively. */
static int list_pattern(struct list_ctx *l, const struct imap_arg *ref, const struct imap_arg *pat)
{
	char *pattern;
	size_t plen;
	int rc;

	if (ref->len > 0 && pat->s[0] == '/')
		pattern = xmemdup0(pat->s, pat->len); /* an absolute pattern ignores ref */
	else
		pattern = xasprintf("%.*s%.*s", (int)ref->len, ref->s, (int)pat->len, pat->s);
	plen = strlen(pattern);
	if (l->c->utf8 && plen > 0) {
		struct buf b;

		buf_init(&b, 64, 8 * STORE_MAX_NAME);
		if (utf7imap_encode(pattern, plen, &b) < 0) {
			buf_release(&b);
			free(pattern);
			return 0; /* not UTF-8: matches nothing */
		}
		free(pattern);
		pattern = xmemdup0(b.data, b.len);
		plen = b.len;
		buf_release(&b);
	}
	if (str_caseprefix(pattern, plen, "INBOX") && (plen == 5 || pattern[5] == '/'))
		memcpy(pattern, "INBOX", 5);
	rc = list_matches(l, pattern);
	free(pattern);
	return rc == STORE_EINVAL ? 0 : rc;
}

static bool string_arg(const struct imap_arg *a)
{
	return a != NULL && imap_arg_is_astring(a) && memchr(a->s, '\0', a->len) == NULL;
}

bool cmd_list(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct list_ctx l = { c, NULL, (cmd->def_flags & CMD_ALT) != 0, 0, 0, NULL, NULL, 0 };
	bool lsub = l.lsub;
	size_t i = 0, argc = imap_cmd_argc(cmd);
	const struct imap_arg *ref, *pat, *a;
	int rc = 0;

	if (!l.lsub && argc > 0 && imap_cmd_arg(cmd, 0)->type == IMAP_ARG_LIST &&
	    list_selection(imap_cmd_arg(cmd, i++), &l.sel) < 0)
		return imap_cmd_bad(cmd, "Invalid LIST selection options");
	ref = imap_cmd_arg(cmd, i++);
	pat = imap_cmd_arg(cmd, i++);
	if ((a = imap_cmd_arg(cmd, i)) != NULL) {
		if (l.lsub || !imap_arg_atom_is(a, "RETURN") ||
		    list_return(imap_cmd_arg(cmd, i + 1), &l) < 0 || i + 2 != argc)
			return imap_cmd_bad(cmd, "Invalid LIST return options");
	}
	if (!string_arg(ref) || pat == NULL ||
	    (!string_arg(pat) && (pat->type != IMAP_ARG_LIST || l.lsub)))
		return imap_cmd_bad(cmd, "Expected: LIST reference pattern");
	if (pat->type == IMAP_ARG_ATOM || imap_arg_is_string(pat)) {
		if (pat->len == 0 && l.sel == 0) {
			if (!l.lsub)
				imap_printf(c, "* LIST (\\Noselect) \"/\" \"\"\r\n");
			return imap_cmd_ok(cmd, l.lsub ? "Lsub completed" : "List completed");
		}
	} else {
		for (a = pat + 1; a <= pat + pat->span; a++)
			if (!string_arg(a))
				return imap_cmd_bad(cmd, "Patterns are strings");
	}
	if (lsub && c->rev2) {
		/* IMAP4rev2 answers LSUB as LIST (SUBSCRIBED) (RFC 9051 appendix E) */
		l.lsub = false;
		l.sel = LSEL_SUBSCRIBED;
	}
	if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &l.t)) == 0) {
		if (pat->type == IMAP_ARG_LIST)
			for (a = pat + 1; a <= pat + pat->span && rc == 0; a++)
				rc = list_pattern(&l, ref, a);
		else
			rc = list_pattern(&l, ref, pat);
		store_txn_abort(&l.t);
	}
	for (size_t k = 0; k < l.nsubs; k++)
		free(l.subs[k]);
	free(l.subs);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, lsub ? "LSUB" : "LIST");
	return imap_cmd_ok(cmd, lsub ? "Lsub completed" : "List completed");
}

int imap_list_one(struct imap_client *c, struct store_txn *t, const char *name)
{
	struct list_ctx l = { c, t, false, 0, 0, NULL, NULL, 0 };

	if (imap_ns_reserved(c, name)) /* another user's mailbox (imap_ns.c) */
		return imap_ns_list(c, name, NULL);
	return store_mbox_list(t, c->user_id, name, false, list_cb, &l);
}

void imap_special_use_attrs(struct buf *b, unsigned special)
{
	for (size_t i = 0; i < NUSES; i++)
		if (special & special_uses[i].bit)
			buf_printf(b, "%s%s", b->len > 0 && b->data[b->len - 1] != ' ' ? " " : "",
				   special_uses[i].name);
}

void imap_write_mailbox(struct imap_client *c, const char *name, size_t len)
{
	struct buf b;

	if (!c->utf8 || memchr(name, '&', len) == NULL) {
		imap_write_astring(c, name, len);
		return;
	}
	buf_init(&b, 64, 8 * STORE_MAX_NAME);
	if (utf7imap_decode(name, len, &b) < 0)
		imap_write_astring(c, name, len);
	else
		imap_write_utf8(c, b.data, b.len);
	buf_release(&b);
}

bool cmd_namespace(struct imap_cmd *cmd)
{
	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "NAMESPACE takes no arguments");
	imap_ns_write(cmd->c);
	return imap_cmd_ok(cmd, "Namespace completed");
}

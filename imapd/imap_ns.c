/* imap_ns.c — owns the namespaces (RFC 2342) and the resolution of a client's mailbox name to
 * a mailbox of some user with the client's rights on it (RFC 4314). The personal namespace
 * "" holds the user's own mailboxes (every right). With [imapd] namespace_other set ("Other
 * Users/"), PREFIX/USER/NAME is USER's mailbox NAME; with namespace_shared ("Shared/"),
 * PREFIX/NAME is the mailbox NAME of the store user shared_owner. Such a mailbox exists for
 * the client only when its ACL gives the client 'l' (else NONEXISTENT, as for no mailbox at
 * all; an owner who moved to another host, by its tombstone, STORE_EMOVED: NO [CANNOT]); a session with such a mailbox selected reads its rights again at each command
 * (imap_ns_recheck); the owner must be a user of this store (any partition): users of other hosts are
 * not reached. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

/* The configured prefix of kind (other: true) without its trailing '/' and its length; 0 when
   the namespace is off. */
static size_t ns_prefix(const struct imap_client *c, bool other, const char **p_r)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;
	const char *p = other ? ic->namespace_other : ic->namespace_shared;
	size_t len = p != NULL ? strlen(p) : 0;

	if (len > 0 && p[len - 1] == '/')
		len--;
	*p_r = p;
	return len;
}

/* Whether name is level prefix itself or below it; *rest_r: what follows "prefix/". */
static bool ns_under(const char *name, const char *p, size_t plen, const char **rest_r)
{
	if (plen == 0 || strncmp(name, p, plen) != 0)
		return false;
	if (name[plen] == '\0') {
		*rest_r = name + plen;
		return true;
	}
	if (name[plen] != '/')
		return false;
	*rest_r = name + plen + 1;
	return true;
}

bool imap_ns_reserved(const struct imap_client *c, const char *name)
{
	const char *p, *rest;
	size_t plen;

	if ((plen = ns_prefix(c, true, &p)) > 0 && ns_under(name, p, plen, &rest))
		return true;
	return (plen = ns_prefix(c, false, &p)) > 0 && ns_under(name, p, plen, &rest);
}

/* The client's rights on mailbox name of owner (a user of this store) into b; with parent,
   on its nearest existing parent instead (b->mbox 0 and no rights when there is none: a
   name at the top of owner's namespace). */
static int ns_find_in(struct imap_client *c, const char *owner, const char *name,
		      struct imap_ns_box *b, bool parent)
{
	struct store_txn *t = NULL;
	struct store_user u;
	char *up = NULL, *s;
	int rc;

	if (strcmp(owner, c->user) == 0)
		return STORE_ENOMBOX; /* one's own mailboxes have their own names */
	if ((rc = store_user_locate(c->srv->store, owner, &b->part)) != 0) {
		struct store_tomb tb;

		/* the owner moved to another store host (mailctl user move's tombstone): not
		   reached from here, and to be told so, not as no mailbox */
		if (rc == STORE_ENOUSER && store_tomb_find(c->srv->store, owner, &tb) == 0)
			return STORE_EMOVED;
		return rc == STORE_ENOUSER ? STORE_ENOMBOX : rc;
	}
	if ((rc = store_txn_begin(c->srv->store, b->part, STORE_TXN_READ, &t)) != 0)
		return rc;
	if ((rc = store_user_get(t, owner, &u)) == 0 && !parent) {
		if ((rc = store_mbox_find(t, u.id, name, &b->mbox)) == 0)
			rc = store_acl_rights(t, b->mbox, c->user, &b->rights);
	} else if (rc == 0) {
		/* RFC 4314 4: CREATE needs 'k' on the nearest existing parent */
		up = xstrdup(name);
		rc = STORE_ENOMBOX;
		while (rc == STORE_ENOMBOX && (s = strrchr(up, '/')) != NULL) {
			*s = '\0';
			rc = store_mbox_find_any(t, u.id, up, &b->mbox);
		}
		if (rc == 0)
			rc = store_acl_rights(t, b->mbox, c->user, &b->rights);
		else if (rc == STORE_ENOMBOX)
			rc = 0, b->mbox = 0, b->rights = 0;
		free(up);
	}
	store_txn_abort(&t);
	if (rc == STORE_ENOUSER || (rc == 0 && !parent && !(b->rights & STORE_ACL_LOOKUP)))
		return STORE_ENOMBOX; /* no 'l': as if there were no such mailbox */
	if (rc != 0)
		return rc;
	b->owner = u.id;
	b->own = false;
	b->local = xstrdup(name);
	b->owner_name = xstrdup(owner);
	return 0;
}

/* imap_ns_find, or with parent imap_ns_parent */
static int ns_find(struct imap_client *c, const char *name, struct imap_ns_box *b, bool parent)
{
	char owner[STORE_MAX_NAME + 1];
	const char *p, *rest, *slash;
	size_t plen;

	memset(b, 0, sizeof(*b));
	if ((plen = ns_prefix(c, true, &p)) > 0 && ns_under(name, p, plen, &rest)) {
		if ((slash = strchr(rest, '/')) == NULL || slash == rest || slash[1] == '\0' ||
		    (size_t)(slash - rest) > STORE_MAX_NAME)
			return STORE_ENOMBOX; /* the prefix and user levels are \Noselect */
		memcpy(owner, rest, (size_t)(slash - rest));
		owner[slash - rest] = '\0';
		return ns_find_in(c, owner, slash + 1, b, parent);
	}
	if ((plen = ns_prefix(c, false, &p)) > 0 && ns_under(name, p, plen, &rest)) {
		if (*rest == '\0')
			return STORE_ENOMBOX;
		return ns_find_in(c, conf_values(c->srv->conf)->imapd.shared_owner, rest, b,
				  parent);
	}
	b->owner = c->user_id;
	b->part = c->part;
	b->rights = STORE_ACL_ALL;
	b->own = true;
	b->local = xstrdup(name);
	b->owner_name = xstrdup(c->user);
	return 0;
}

int imap_ns_find(struct imap_client *c, const char *name, struct imap_ns_box *b)
{
	return ns_find(c, name, b, false);
}

int imap_ns_parent(struct imap_client *c, const char *name, struct imap_ns_box *b)
{
	return ns_find(c, name, b, true);
}

int imap_ns_target(struct imap_cmd *cmd, const char *name, const char *verb, struct imap_ns_box *b)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	int rc = imap_ns_find(c, name, b);

	if (rc == 0 && b->own) {
		if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) == 0)
			rc = store_mbox_find(t, c->user_id, name, &b->mbox);
		store_txn_abort(&t);
		if (rc == STORE_ENOMBOX) {
			imap_ns_box_release(b);
			imap_cmd_no(cmd, "[TRYCREATE] No such mailbox");
			return -1;
		}
	} else if (rc == STORE_ENOMBOX) {
		/* a name of the other namespaces the client cannot see (whether a CREATE could
		   make it is the k of its parent: not said here) */
		imap_cmd_no(cmd, "[NONEXISTENT] No such mailbox");
		return -1;
	} else if (rc == 0 && !(b->rights & STORE_ACL_INSERT)) {
		imap_ns_box_release(b);
		imap_cmd_reply(cmd, "NO", "[NOPERM] %s: no right to insert messages here (i)",
			       verb);
		return -1;
	}
	if (rc != 0) {
		imap_ns_box_release(b);
		imap_cmd_store_error(cmd, rc, verb);
		return -1;
	}
	return 0;
}

bool imap_ns_recheck(struct imap_client *c, bool closing)
{
	struct imap_view *v = c->view;
	const uint32_t change = STORE_ACL_SEEN | STORE_ACL_WRITE | STORE_ACL_DELETE_MSG |
				STORE_ACL_EXPUNGE;
	struct store_txn *t = NULL;
	uint32_t r = 0;
	int rc;

	if (v == NULL || c->state != IMAP_ST_SELECTED || !imap_ns_reserved(c, v->name))
		return false; /* one's own mailbox: every right, always */
	if ((rc = store_txn_begin(c->srv->store, STORE_ID_PART(v->mbox), STORE_TXN_READ, &t)) == 0)
		rc = store_acl_rights(t, v->mbox, c->user, &r);
	if (rc != 0 || r == v->rights) {
		store_txn_abort(&t);
		return false; /* (a store error: the command meets it itself) */
	}
	log_info("%016" PRIx64 " imap rights user=%s mbox=%" PRIu64 " was=%#x now=%#x", c->id,
		 c->user, v->mbox, v->rights, r);
	v->rights = r;
	if (!(r & STORE_ACL_READ) && !closing) {
		/* RFC 4314 5.1.1: a server that checks the rights on each command and finds the
		   read right gone MAY say BYE and close (refusing every selected-state command
		   with NO would leave clients that handle NO badly stuck) */
		store_txn_abort(&t);
		imap_printf(c, "* BYE [NOPERM] Your right to read ");
		imap_write_mailbox(c, v->name, strlen(v->name));
		imap_printf(c, " was taken away\r\n");
		imap_client_close(c, "read right taken away");
		return true;
	}
	/* the same section: FLAGS and PERMANENTFLAGS again when they changed; a session left
	   with no right to change anything is read-only from now (it stays so until it selects
	   the mailbox again, whatever it is given back) */
	if (!v->readonly && !(r & change)) {
		v->readonly = true;
		imap_view_send_flags(c, t);
	}
	store_txn_abort(&t);
	return false;
}

unsigned imap_ns_keep_flags(uint32_t rights)
{
	unsigned keep = 0;

	if (rights & STORE_ACL_SEEN)
		keep |= STORE_SEEN;
	if (rights & STORE_ACL_DELETE_MSG)
		keep |= STORE_DELETED;
	if (rights & STORE_ACL_WRITE)
		keep |= STORE_FLAGS_ALL & ~(unsigned)(STORE_SEEN | STORE_DELETED);
	return keep;
}

void imap_ns_box_release(struct imap_ns_box *b)
{
	free(b->local);
	free(b->owner_name);
	b->local = b->owner_name = NULL;
}

void imap_ns_write(struct imap_client *c)
{
	const char *p;
	size_t plen;

	imap_printf(c, "* NAMESPACE ((\"\" \"/\")) ");
	if ((plen = ns_prefix(c, true, &p)) > 0) {
		imap_write(c, "((", 2);
		imap_write_string(c, p, plen + 1); /* with its '/' */
		imap_write(c, " \"/\")) ", 7);
	} else
		imap_write(c, "NIL ", 4);
	if ((plen = ns_prefix(c, false, &p)) > 0) {
		imap_write(c, "((", 2);
		imap_write_string(c, p, plen + 1);
		imap_write(c, " \"/\"))\r\n", 8);
	} else
		imap_write(c, "NIL\r\n", 5);
}

/* The names LIST may show of the other namespaces: each shared mailbox by its full name,
   and the levels above it (\Noselect). */
struct ns_names {
	struct imap_client *c;
	struct store_txn *t; /* the partition ns_collect reads */
	struct ns_name {
		char *name;
		bool box;         /* a mailbox (not only a level above one) */
		uint64_t mbox;    /* a mailbox's id, its special use, the client's rights */
		unsigned special; /* enum store_special */
		uint32_t rights;
	} * v;
	size_t n;
};

static void ns_add(struct ns_names *nn, char *name, const struct store_acl_shared *sh,
		   unsigned special)
{
	if (nn->n % 32 == 0)
		nn->v = xreallocarray(nn->v, nn->n + 32, sizeof(*nn->v));
	nn->v[nn->n] = (struct ns_name){ name, sh != NULL, sh != NULL ? sh->mbox : 0, special,
					 sh != NULL ? sh->rights : 0 };
	nn->n++;
}

/* name (the mailbox of sh) and each level above it */
static void ns_add_levels(struct ns_names *nn, char *name, const struct store_acl_shared *sh,
			  unsigned special)
{
	ns_add(nn, name, sh, special);
	for (char *s = strrchr(name, '/'); s != NULL; s = strrchr(name, '/')) {
		char *up = xmemdup0(name, (size_t)(s - name));

		ns_add(nn, up, NULL, 0);
		name = up;
	}
}

static int ns_shared_cb(const struct store_acl_shared *sh, void *arg)
{
	struct ns_names *nn = arg;
	const struct imapd_conf *ic = &conf_values(nn->c->srv->conf)->imapd;
	struct store_mbox_info mi = { 0 };
	const char *p;
	uint64_t user;
	size_t plen;

	/* its special use (RFC 6154), as the owner set it */
	if (store_mbox_info(nn->t, sh->mbox, &user, &mi) != 0)
		mi.special = 0;
	if (strcmp(sh->owner_name, ic->shared_owner) == 0 &&
	    (plen = ns_prefix(nn->c, false, &p)) > 0)
		ns_add_levels(nn,
			      xasprintf("%.*s/%.*s", (int)plen, p, (int)sh->name_len, sh->name),
			      sh, mi.special);
	if ((plen = ns_prefix(nn->c, true, &p)) > 0)
		ns_add_levels(nn,
			      xasprintf("%.*s/%s/%.*s", (int)plen, p, sh->owner_name,
					(int)sh->name_len, sh->name),
			      sh, mi.special);
	return 0;
}

static int ns_name_cmp(const void *a, const void *b)
{
	const struct ns_name *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	return d != 0 ? d : (int)y->box - (int)x->box; /* the mailbox before the level */
}

/* Every name of the other namespaces the client may see, sorted, each once. */
static int ns_collect(struct imap_client *c, struct ns_names *nn)
{
	unsigned nparts = store_partitions(c->srv->store);
	int rc = 0;

	for (unsigned p = 0; p < nparts && rc == 0; p++) {
		struct store_txn *t = NULL;

		if ((rc = store_txn_begin(c->srv->store, p, STORE_TXN_READ, &t)) != 0)
			break;
		nn->t = t;
		rc = store_acl_shared(t, c->user, STORE_ACL_LOOKUP, ns_shared_cb, nn);
		nn->t = NULL;
		store_txn_abort(&t);
	}
	if (nn->n > 1)
		qsort(nn->v, nn->n, sizeof(*nn->v), ns_name_cmp);
	size_t o = 0;

	for (size_t i = 0; i < nn->n; i++) {
		if (o > 0 && strcmp(nn->v[o - 1].name, nn->v[i].name) == 0)
			free(nn->v[i].name);
		else
			nn->v[o++] = nn->v[i];
	}
	nn->n = o;
	return rc;
}

static int ns_sub_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether name is one of the sorted subscriptions. */
static bool ns_subscribed(const struct imap_ns_subs *s, const char *name)
{
	return s != NULL && s->n > 0 && bsearch(&name, s->v, s->n, sizeof(*s->v), ns_sub_cmp);
}

/* One name's LIST (or LSUB) line, when o lets it out, then its STATUS and METADATA
   responses when asked for (a mailbox with 'r': what STATUS needs, RFC 4314 4). */
static void ns_list_line(struct imap_client *c, const struct ns_name *nm, bool children,
			 const struct imap_ns_listopts *o)
{
	const struct imap_ns_subs *s = o != NULL ? o->subs : NULL;
	bool sub = ns_subscribed(s, nm->name);
	size_t len = strlen(nm->name);
	struct store_txn *t = NULL;
	struct store_status st;
	struct buf attrs;

	if (s != NULL && s->only && (!sub || !nm->box))
		return; /* a subscribed level: the store's subscription line stands for it */
	if (o != NULL && o->special_only && nm->special == 0)
		return; /* LIST (SPECIAL-USE): a level has none */
	if (s != NULL && s->lsub) {
		imap_printf(c, "* LSUB () \"/\" ");
	} else {
		buf_init(&attrs, 64, 256);
		buf_printf(&attrs, "%s%s%s", nm->box ? "" : "\\Noselect ",
			   children ? "\\HasChildren" : "\\HasNoChildren",
			   sub ? " \\Subscribed" : "");
		imap_special_use_attrs(&attrs, nm->special);
		imap_printf(c, "* LIST (%s) \"/\" ", buf_cstr(&attrs));
		buf_release(&attrs);
	}
	imap_write_mailbox(c, nm->name, len);
	imap_write(c, "\r\n", 2);
	if (o == NULL || (o->status == NULL && o->metadata == NULL) || !nm->box ||
	    (s != NULL && s->lsub) || !(nm->rights & STORE_ACL_READ) ||
	    store_txn_begin(c->srv->store, STORE_ID_PART(nm->mbox), STORE_TXN_READ, &t) != 0)
		return;
	if (o->status != NULL && imap_mbox_status(c, t, nm->mbox, &st) == 0)
		imap_status_write(c, nm->name, len, nm->mbox, &st, o->status);
	if (o->metadata != NULL)
		imap_list_metadata_write(c, t, nm->mbox, nm->name, len, o->metadata);
	store_txn_abort(&t);
}

int imap_ns_list(struct imap_client *c, const char *pattern, const struct imap_ns_listopts *o)
{
	struct ns_names nn = { c, NULL, NULL, 0 };
	const char *p;
	int rc;

	if (ns_prefix(c, true, &p) == 0 && ns_prefix(c, false, &p) == 0)
		return 0;
	rc = ns_collect(c, &nn);
	for (size_t i = 0; i < nn.n; i++) {
		const char *name = nn.v[i].name;
		size_t len = strlen(name);
		bool children = false;

		/* the names that start with name follow it: "a-b" sorts between "a" and "a/x" */
		for (size_t j = i + 1;
		     j < nn.n && !children && strncmp(nn.v[j].name, name, len) == 0; j++)
			children = nn.v[j].name[len] == '/';

		if (rc == 0 && store_mbox_match(pattern, name, len))
			ns_list_line(c, &nn.v[i], children, o);
		free(nn.v[i].name);
	}
	free(nn.v);
	return rc;
}

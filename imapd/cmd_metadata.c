/* cmd_metadata.c — owns METADATA and METADATA-SERVER (RFC 5464): GETMETADATA with its
 * MAXSIZE and DEPTH options, and SETMETADATA, over the store's annotations (store_annot_*,
 * written through the group commit). Mailbox entries belong to the mailbox; server entries
 * (the "" mailbox) are the user's own /private ones, plus the read-only /shared/admin and
 * /shared/comment of [imapd] metadata_admin and metadata_comment: the store keeps no entry
 * that one user writes and every other reads. Each mailbox has one user, who may read and
 * write all of its entries (as cmd_acl.c says of rights). A \Noselect mailbox (a deleted
 * parent kept for its children) has entries too, as RFC 5464 allows: its own, set after the
 * delete dropped the old ones. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define META_SPECS_MAX 256 /* entry specifiers of one GETMETADATA */

/* A GETMETADATA in progress: its options and the METADATA response being written. */
struct meta_get {
	struct imap_client *c;
	bool has_max;
	uint64_t maxsize;
	unsigned depth;   /* 0, 1, UINT_MAX (infinity) */
	uint64_t longest; /* the biggest value MAXSIZE left out */
	const char *mbox; /* the stored name; NULL: the server */
	bool found;       /* the entry asked for exists (store_annot_list's callback) */
	size_t req_len;   /* its length (a row of that length is the entry itself) */
	char **sent;      /* folded names written so far: each once */
	size_t nsent;
};

/* The name folded to lower case (malloc'd). */
static char *meta_fold(const char *s, size_t len)
{
	char *f = xmemdup0(s, len);

	for (size_t i = 0; i < len; i++)
		if (f[i] >= 'A' && f[i] <= 'Z')
			f[i] = (char)(f[i] + 32);
	return f;
}

static void meta_value(struct imap_client *c, const void *v, size_t len)
{
	if (v == NULL) {
		imap_write(c, "NIL", 3);
	} else if (memchr(v, '\0', len) != NULL) { /* value = nstring / literal8 */
		imap_printf(c, "~{%zu}\r\n", len);
		imap_write(c, v, len);
	} else {
		imap_write_string(c, v, len);
	}
}

/* Writes one entry (value NULL: NIL) into the METADATA response, unless it was written
   already or MAXSIZE leaves it out. */
static void meta_emit(struct meta_get *g, const char *entry, size_t len, const void *v,
		      size_t vlen)
{
	char *f = meta_fold(entry, len);

	for (size_t i = 0; i < g->nsent; i++)
		if (strcmp(g->sent[i], f) == 0) {
			free(f);
			return;
		}
	if (v != NULL && g->has_max && vlen > g->maxsize) {
		if (vlen > g->longest)
			g->longest = vlen;
		free(f);
		return;
	}
	if (g->nsent == 0) {
		imap_write(g->c, "* METADATA ", 11);
		if (g->mbox == NULL)
			imap_write(g->c, "\"\"", 2);
		else
			imap_write_mailbox(g->c, g->mbox, strlen(g->mbox));
		imap_write(g->c, " (", 2);
	} else {
		imap_write(g->c, " ", 1);
	}
	imap_write_astring(g->c, f, len);
	imap_write(g->c, " ", 1);
	meta_value(g->c, v, vlen);
	g->sent = xreallocarray(g->sent, g->nsent + 1, sizeof(*g->sent));
	g->sent[g->nsent++] = f;
}

static int meta_row(const struct store_annot *a, void *arg)
{
	struct meta_get *g = arg;

	if (a->entry_len == g->req_len)
		g->found = true;
	meta_emit(g, a->entry, a->entry_len, a->value, a->value_len);
	return 0;
}

/* The server's read-only /shared entries: [imapd] metadata_admin and metadata_comment. */
static const char *meta_server_shared(const struct imap_client *c, const char *entry, size_t len)
{
	const struct imapd_conf *ic = &conf_values(c->srv->conf)->imapd;

	if (str_caseeq(entry, len, "/shared/admin", 13))
		return ic->metadata_admin;
	if (str_caseeq(entry, len, "/shared/comment", 15))
		return ic->metadata_comment;
	return NULL;
}

/* One entry specifier: the entry and what is below it to the depth asked for. */
static int meta_spec(struct meta_get *g, struct store_txn *t, uint64_t owner, const char *e,
		     size_t len)
{
	struct imap_client *c = g->c;
	int rc = 0;

	g->found = false;
	g->req_len = len;
	if (g->mbox == NULL && str_caseprefix(e, len, "/shared/")) {
		const char *v = meta_server_shared(c, e, len);

		if (v != NULL && v[0] != '\0') {
			meta_emit(g, e, len, v, strlen(v));
			g->found = true;
		}
	} else if (len <= STORE_ANNOT_ENTRY_MAX) { /* a longer name cannot exist */
		rc = store_annot_list(t, owner, c->user_id, e, len, g->depth, meta_row, g);
	}
	if (rc == 0 && !g->found && g->depth == 0) /* asked for by name: it has no value */
		meta_emit(g, e, len, NULL, 0);
	return rc;
}

/* GETMETADATA's options (MAXSIZE n, DEPTH 0|1|infinity; RFC 5464 4.2.1, 4.2.2). */
static bool meta_options(const struct imap_arg *l, struct meta_get *g)
{
	const struct imap_arg *o = l + 1;
	bool depth_seen = false;

	if (l->n == 0 || l->n % 2 != 0)
		return false;
	for (uint32_t i = 0; i < l->n; i += 2, o = imap_arg_next(imap_arg_next(o))) {
		const struct imap_arg *v = imap_arg_next(o);

		if (v->type != IMAP_ARG_ATOM)
			return false;
		if (imap_arg_atom_is(o, "MAXSIZE") && !g->has_max) {
			if (str_to_u64(v->s, v->len, UINT32_MAX, &g->maxsize) != 0)
				return false;
			g->has_max = true;
		} else if (imap_arg_atom_is(o, "DEPTH") && !depth_seen) {
			depth_seen = true;
			if (imap_arg_atom_is(v, "0"))
				g->depth = 0;
			else if (imap_arg_atom_is(v, "1"))
				g->depth = 1;
			else if (imap_arg_atom_is(v, "infinity"))
				g->depth = UINT_MAX;
			else
				return false;
		} else {
			return false;
		}
	}
	return true;
}

/* Whether a is a list of options rather than of entries: entries begin with '/'. */
static bool meta_is_options(const struct imap_arg *a)
{
	return a->type == IMAP_ARG_LIST && a->n > 0 && a[1].type == IMAP_ARG_ATOM &&
	       a[1].len > 0 && a[1].s[0] != '/';
}

/* The entry specifiers from argument i on (each an entry or a list of them), checked:
   *first_r and *n_r, or an error text for BAD. */
static const char *meta_entries(struct imap_cmd *cmd, size_t i, const struct imap_arg **first_r,
				size_t *n_r)
{
	size_t argc = imap_cmd_argc(cmd), n = 0;

	*first_r = imap_cmd_arg(cmd, i);
	for (; i < argc; i++) {
		const struct imap_arg *a = imap_cmd_arg(cmd, i);
		const struct imap_arg *e = a->type == IMAP_ARG_LIST ? a + 1 : a;
		uint32_t m = a->type == IMAP_ARG_LIST ? a->n : 1;

		if (m == 0)
			return "Expected: an entry or a list of entries";
		for (uint32_t j = 0; j < m; j++, e = imap_arg_next(e)) {
			if (!imap_arg_is_astring(e) || !store_annot_entry_valid(e->s, e->len))
				return "Invalid entry name (RFC 5464 3.2)";
			n++;
		}
	}
	if (n == 0)
		return "Expected: GETMETADATA [(options)] mailbox entries";
	if (n > META_SPECS_MAX)
		return "Too many entries in one GETMETADATA";
	*n_r = n;
	return NULL;
}

/* Resolves the mailbox argument a in t: *owner_r and *name_r (malloc'd; NULL for the
   server), or false after the reply was sent. */
static bool meta_owner(struct imap_cmd *cmd, struct store_txn *t, const struct imap_arg *a,
		       const char *what, uint64_t *owner_r, char **name_r)
{
	const char *why;
	int rc;

	*name_r = NULL;
	*owner_r = cmd->c->user_id;
	if (a->len == 0)
		return true;
	if ((*name_r = imap_mailbox_name(cmd->c, a->s, a->len, &why)) == NULL) {
		imap_cmd_no(cmd, why);
		return false;
	}
	if ((rc = store_mbox_find_any(t, cmd->c->user_id, *name_r, owner_r)) != 0) {
		free(*name_r);
		*name_r = NULL;
		imap_cmd_store_error(cmd, rc, what);
		return false;
	}
	return true;
}

static bool meta_get_run(struct imap_cmd *cmd, struct meta_get *g, const struct imap_arg *mbox,
			 const struct imap_arg *spec, size_t nspec)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	char *name = NULL;
	uint64_t owner;
	int rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t);

	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "GETMETADATA");
	if (!meta_owner(cmd, t, mbox, "GETMETADATA", &owner, &name)) {
		store_txn_abort(&t);
		return true;
	}
	g->mbox = name;
	for (const struct imap_arg *a = spec; rc == 0 && nspec > 0; a = imap_arg_next(a)) {
		const struct imap_arg *e = a->type == IMAP_ARG_LIST ? a + 1 : a;
		uint32_t m = a->type == IMAP_ARG_LIST ? a->n : 1;

		for (uint32_t j = 0; rc == 0 && j < m; j++, e = imap_arg_next(e), nspec--)
			rc = meta_spec(g, t, owner, e->s, e->len);
	}
	store_txn_abort(&t);
	if (g->nsent > 0)
		imap_write(c, ")\r\n", 3);
	for (size_t i = 0; i < g->nsent; i++)
		free(g->sent[i]);
	free(g->sent);
	free(name);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "GETMETADATA");
	if (g->longest > 0)
		return imap_cmd_reply(cmd, "OK",
				      "[METADATA LONGENTRIES %" PRIu64 "] GETMETADATA completed",
				      g->longest);
	return imap_cmd_ok(cmd, "GETMETADATA completed");
}

/* ------------------------------------------------------------------------------------- */
/* LIST RETURN (METADATA (entry ...)), RFC 9590 */

bool imap_list_metadata_ok(const struct imap_arg *a)
{
	const struct imap_arg *e = a + 1;

	if (a->type != IMAP_ARG_LIST || a->n == 0 || a->n > META_SPECS_MAX)
		return false;
	for (uint32_t i = 0; i < a->n; i++, e = imap_arg_next(e))
		if (!imap_arg_is_astring(e) || !store_annot_entry_valid(e->s, e->len))
			return false;
	return true;
}

void imap_list_metadata_write(struct imap_client *c, struct store_txn *t, uint64_t mbox,
			      const char *name, size_t len, const struct imap_arg *a)
{
	struct meta_get g = { .c = c, .depth = 0 };
	const struct imap_arg *e = a + 1;
	char *n = xmemdup0(name, len);

	g.mbox = n;
	for (uint32_t i = 0; i < a->n && meta_spec(&g, t, mbox, e->s, e->len) == 0;
	     i++, e = imap_arg_next(e))
		;
	if (g.nsent > 0)
		imap_write(c, ")\r\n", 3);
	for (size_t i = 0; i < g.nsent; i++)
		free(g.sent[i]);
	free(g.sent);
	free(n);
}

bool cmd_getmetadata(struct imap_cmd *cmd)
{
	struct meta_get g = { .c = cmd->c };
	size_t argc = imap_cmd_argc(cmd), i = 0, nspec;
	const struct imap_arg *mbox, *spec;
	const char *err;
	bool opts = false;

	if (argc >= 1 && imap_cmd_arg(cmd, 0)->type == IMAP_ARG_LIST) {
		if (!meta_options(imap_cmd_arg(cmd, 0), &g))
			return imap_cmd_bad(cmd,
					    "Expected options: MAXSIZE n, DEPTH 0|1|infinity");
		opts = true;
		i = 1;
	}
	mbox = imap_cmd_arg(cmd, i++);
	if (mbox == NULL || !imap_arg_is_astring(mbox))
		return imap_cmd_bad(cmd, "Expected: GETMETADATA [(options)] mailbox entries");
	/* RFC 5464's examples put the options after the mailbox, its grammar before: both */
	if (!opts && i + 1 < argc && meta_is_options(imap_cmd_arg(cmd, i))) {
		if (!meta_options(imap_cmd_arg(cmd, i), &g))
			return imap_cmd_bad(cmd,
					    "Expected options: MAXSIZE n, DEPTH 0|1|infinity");
		i++;
	}
	if ((err = meta_entries(cmd, i, &spec, &nspec)) != NULL)
		return imap_cmd_bad(cmd, err);
	return meta_get_run(cmd, &g, mbox, spec, nspec);
}

/* A SETMETADATA write (the group commit's thread runs meta_set_fn). */
struct meta_set {
	uint64_t user;
	char *mbox; /* NULL: the server */
	uint32_t max_entries;
	size_t n;
	struct meta_pair {
		char *entry, *value; /* value NULL: NIL, remove */
		size_t len, vlen;
	} * e;
};

static void meta_set_free(void *arg)
{
	struct meta_set *op = arg;

	for (size_t i = 0; i < op->n; i++) {
		free(op->e[i].entry);
		free(op->e[i].value);
	}
	free(op->e);
	free(op->mbox);
	free(op);
}

static int meta_set_fn(struct store_txn *t, void *arg)
{
	struct meta_set *op = arg;
	uint64_t owner = op->user;
	int rc = 0;

	if (op->mbox != NULL && (rc = store_mbox_find_any(t, op->user, op->mbox, &owner)) != 0)
		return rc;
	/* all or nothing (RFC 5464 4.3): an error drops this function's writes */
	for (size_t i = 0; i < op->n && rc == 0; i++)
		rc = store_annot_set(t, owner, op->user, op->e[i].entry, op->e[i].len,
				     op->e[i].value, op->e[i].vlen, op->max_entries);
	return rc;
}

static bool meta_set_resume(struct imap_cmd *cmd)
{
	bool pending;
	int rc;

	(void)imap_commit_result(cmd, &pending, &rc);
	if (pending)
		return false;
	if (rc == STORE_ELIMIT)
		return imap_cmd_reply(cmd, "NO",
				      "[METADATA TOOMANY] SETMETADATA: at most %" PRId64
				      " annotations here",
				      conf_values(cmd->c->srv->conf)->imapd.metadata_max_entries);
	if (rc != 0)
		return imap_cmd_store_error(cmd, rc, "SETMETADATA");
	return imap_cmd_ok(cmd, "SETMETADATA completed");
}

/* One entry-value pair checked and copied into p: false, or true after the reply was
   sent (the command refused). */
static bool meta_pair(struct imap_cmd *cmd, const struct imap_arg *e, const struct imap_arg *v,
		      bool server, struct meta_pair *p)
{
	const struct imapd_conf *ic = &conf_values(cmd->c->srv->conf)->imapd;
	bool private;

	if (!imap_arg_is_astring(e) || !store_annot_entry_valid(e->s, e->len))
		return imap_cmd_bad(cmd, "Invalid entry name (RFC 5464 3.2)");
	private = str_caseprefix(e->s, e->len, "/private/");
	if (!imap_arg_is_string(v) && !imap_arg_is_nil(v))
		return imap_cmd_bad(cmd, "Expected: SETMETADATA mailbox (entry value ...)");
	if (e->len > STORE_ANNOT_ENTRY_MAX)
		return imap_cmd_reply(cmd, "NO",
				      "[LIMIT] SETMETADATA: entry names have at most %d bytes",
				      STORE_ANNOT_ENTRY_MAX);
	if (imap_arg_is_string(v) && v->len > ic->metadata_max_size)
		return imap_cmd_reply(cmd, "NO",
				      "[METADATA MAXSIZE %" PRIu64
				      "] SETMETADATA: value too large",
				      ic->metadata_max_size);
	if (private && !ic->metadata_private)
		return imap_cmd_no(
			cmd, "[METADATA NOPRIVATE] SETMETADATA: no /private annotations here");
	if (server && !private)
		return imap_cmd_no(cmd,
				   "[NOPERM] SETMETADATA: the server's /shared annotations are "
				   "set by the administrator");
	p->entry = xmemdup0(e->s, e->len);
	p->len = e->len;
	p->value = imap_arg_is_nil(v) ? NULL : xmemdup0(v->s, v->len);
	p->vlen = p->value != NULL ? v->len : 0;
	return false;
}

bool cmd_setmetadata(struct imap_cmd *cmd)
{
	const struct imap_arg *mbox = imap_cmd_arg(cmd, 0), *l = imap_cmd_arg(cmd, 1), *e;
	struct meta_set *op;
	const char *why;

	if (cmd->ctx != NULL)
		return meta_set_resume(cmd);
	if (imap_cmd_argc(cmd) != 2 || !imap_arg_is_astring(mbox) || l->type != IMAP_ARG_LIST ||
	    l->n == 0 || l->n % 2 != 0)
		return imap_cmd_bad(cmd, "Expected: SETMETADATA mailbox (entry value ...)");
	op = xcalloc(1, sizeof(*op));
	op->user = cmd->c->user_id;
	op->max_entries = (uint32_t)conf_values(cmd->c->srv->conf)->imapd.metadata_max_entries;
	op->e = xcalloc(l->n / 2, sizeof(*op->e));
	e = l + 1;
	for (uint32_t i = 0; i < l->n; i += 2, e = imap_arg_next(imap_arg_next(e))) {
		if (meta_pair(cmd, e, imap_arg_next(e), mbox->len == 0, &op->e[op->n])) {
			meta_set_free(op);
			return true;
		}
		op->n++;
	}
	if (mbox->len > 0 &&
	    (op->mbox = imap_mailbox_name(cmd->c, mbox->s, mbox->len, &why)) == NULL) {
		meta_set_free(op);
		return imap_cmd_no(cmd, why);
	}
	imap_commit_start(cmd, cmd->c->part, NULL, meta_set_fn, op, meta_set_free);
	return false;
}

/* mailctl_fts.c — owns `mailctl fts`: rebuilding the full-text index of one user's or every
 * user's mailboxes (store_fts_rebuild: bounded transactions, the daemons may run), and its
 * per-mailbox statistics. */
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

struct fts_box {
	char *user, *name;
	uint64_t id;
};

struct fts_walk {
	struct fts_box *v;
	size_t n, cap;
	const char *user; /* of the mailboxes being listed */
	const char *only; /* --mailbox: that one alone */
};

static int box_add(const struct store_mbox_info *mi, void *arg)
{
	struct fts_walk *w = arg;

	if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT))
		return 0;
	if (w->only != NULL &&
	    (strlen(w->only) != mi->name_len || memcmp(w->only, mi->name, mi->name_len) != 0))
		return 0;
	if (w->n == w->cap)
		w->v = xreallocarray(w->v, w->cap = w->cap * 2 + 16, sizeof(*w->v));
	w->v[w->n].user = xstrdup(w->user);
	w->v[w->n].name = xstrndup(mi->name, mi->name_len);
	w->v[w->n++].id = mi->id;
	return 0;
}

struct user_boxes {
	struct fts_walk *w;
	struct store_txn *t;
};

static int user_boxes(const struct store_user *u, void *arg)
{
	struct user_boxes *ub = arg;

	ub->w->user = u->name;
	return store_mbox_list(ub->t, u->id, "*", false, box_add, ub->w);
}

static void walk_free(struct fts_walk *w)
{
	for (size_t i = 0; i < w->n; i++) {
		free(w->v[i].user);
		free(w->v[i].name);
	}
	free(w->v);
}

/* The mailboxes of user (NULL: of every user), or only the one named only. */
static int collect(struct mc *mc, const char *user, const char *only, struct fts_walk *w)
{
	struct store_txn *t;
	struct store_user u;
	int rc = 0;

	memset(w, 0, sizeof(*w));
	w->only = only;
	if (user != NULL) {
		if ((rc = mc_begin(mc, user, NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
			return rc;
		w->user = user;
		rc = store_mbox_list(t, u.id, "*", false, box_add, w);
		store_txn_abort(&t);
		return rc == 0 ? MC_OK : mc_fail(mc, rc, "cannot list the mailboxes of %s", user);
	}
	for (unsigned p = 0; p < store_partitions(mc->st) && rc == 0; p++) {
		struct user_boxes ub = { w, NULL };

		if ((rc = store_txn_begin(mc->st, p, STORE_TXN_READ, &ub.t)) != 0)
			break;
		rc = store_user_list(ub.t, user_boxes, &ub);
		store_txn_abort(&ub.t);
	}
	return rc == 0 ? MC_OK : mc_fail(mc, rc, "cannot list the mailboxes");
}

/* USER | --all (positional "--all" is refused by the parser: the option form) */
static int target(struct mc *mc, const struct mc_args *a, const char **user_r)
{
	bool all = a->set[0];

	if (all == (a->npos == 1))
		return mc_usage(mc, "name a user or --all");
	*user_r = all ? NULL : a->pos[0];
	return MC_OK;
}

int mc_fts_rebuild(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "user", "mailbox", "messages", NULL };
	struct fts_walk w;
	struct mc_table *tab;
	const char *user = NULL;
	int rc;

	if ((rc = target(mc, a, &user)) != MC_OK ||
	    (rc = collect(mc, user, a->set[1] ? a->val[1] : NULL, &w)) != MC_OK)
		return rc;
	if (a->set[1] && w.n == 0) {
		walk_free(&w);
		return mc_fail(mc, STORE_ENOMBOX, "%s", a->val[1]);
	}
	tab = mc_table_new(cols);
	for (size_t i = 0; i < w.n; i++) {
		uint64_t n;

		if ((rc = store_fts_rebuild(mc->st, w.v[i].id, &n)) == STORE_ENOMBOX)
			continue; /* deleted meanwhile */
		if (rc != 0) {
			mc_table_free(&tab);
			rc = mc_fail(mc, rc, "fts rebuild %s %s%s", w.v[i].user, w.v[i].name,
				     rc == STORE_ENOTSUP ? " ([store] fts is off)" : "");
			walk_free(&w);
			return rc;
		}
		mc_table_row(tab);
		mc_cell_str(tab, w.v[i].user);
		mc_cell_str(tab, w.v[i].name);
		mc_cell_u64(tab, n);
	}
	walk_free(&w);
	mc_table_print(mc, &tab);
	return MC_OK;
}

int mc_fts_stats(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "user",    "mailbox",  "complete", "messages",
					    "pending", "segments", "trigrams", "expunged",
					    "bytes",   NULL };
	struct fts_walk w;
	struct mc_table *tab;
	const char *user = NULL;
	int rc = 0;

	if ((rc = target(mc, a, &user)) != MC_OK ||
	    (rc = collect(mc, user, a->set[1] ? a->val[1] : NULL, &w)) != MC_OK)
		return rc;
	tab = mc_table_new(cols);
	for (size_t i = 0; i < w.n && rc == 0; i++) {
		struct store_fts_stats s;
		struct store_txn *t;

		if ((rc = store_txn_begin(mc->st, STORE_ID_PART(w.v[i].id), STORE_TXN_READ, &t)) !=
		    0)
			break;
		rc = store_fts_stats(t, w.v[i].id, &s);
		store_txn_abort(&t);
		if (rc != 0)
			break;
		mc_table_row(tab);
		mc_cell_str(tab, w.v[i].user);
		mc_cell_str(tab, w.v[i].name);
		mc_cell_bool(tab, s.complete);
		mc_cell_u64(tab, s.messages);
		mc_cell_u64(tab, s.pending);
		mc_cell_u64(tab, s.segments);
		mc_cell_u64(tab, s.trigrams);
		mc_cell_u64(tab, s.dead);
		mc_cell_u64(tab, s.bytes);
	}
	walk_free(&w);
	if (rc != 0) {
		mc_table_free(&tab);
		return mc_fail(mc, rc, "fts stats");
	}
	mc_table_print(mc, &tab);
	return MC_OK;
}

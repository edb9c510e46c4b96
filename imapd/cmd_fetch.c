/* cmd_fetch.c — owns FETCH and UID FETCH: the sequence set, the CHANGEDSINCE and VANISHED
 * modifiers (RFC 7162), the implicit \Seen of non-PEEK body fetches (a write through the
 * group commit, imap_commit.c, before any response), and the walk over the view with output
 * back-pressure. The items and their rendering are imap_fetch.c. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct fetch_cmd {
	struct imap_client *c;
	struct imap_fetch *items;
	struct imap_seqset uids;
	size_t next;           /* next view index */
	uint64_t changedsince; /* CONDSTORE: only messages with a higher modseq */
	bool vanished;         /* QRESYNC: UID FETCH (CHANGEDSINCE n VANISHED) */
	bool seen_back;        /* the \Seen write came back (imap_commit) */
};

static void fetch_cmd_free(void *arg)
{
	struct fetch_cmd *f = arg;

	imap_fetch_free(&f->items);
	imap_seqset_release(&f->uids);
	free(f);
}

static void fetch_ctx_free(struct imap_cmd *cmd)
{
	if (cmd->ctx != NULL)
		fetch_cmd_free(cmd->ctx);
	cmd->ctx = NULL;
}

/* The implicit \Seen: runs in the group committer's thread (reads the view, imap_commit.c). */
static int set_seen_fn(struct store_txn *t, void *arg)
{
	struct fetch_cmd *f = arg;
	struct imap_view *v = f->c->view;

	for (size_t i = 0; i < v->n; i++) {
		struct store_msg m;
		int rc;

		if (!imap_seqset_has(&f->uids, v->msgs[i].uid) || (v->msgs[i].flags & STORE_SEEN))
			continue;
		if (v->viewer != NULL) /* another user's mailbox: the client's own \Seen */
			rc = store_seen_set(t, v->mbox, v->viewer, v->msgs[i].uid, true, 0, &m);
		else
			rc = store_msg_flags(t, v->mbox, v->msgs[i].uid, STORE_FLAGS_ADD,
					     STORE_SEEN, 0, 0, &m);
		if (rc == STORE_ENOMSG)
			continue;
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* \Seen is durable (or was already set): the view says so and the FETCH reports FLAGS. */
static void seen_apply(struct imap_client *c, struct fetch_cmd *f)
{
	struct imap_view *v = c->view;

	for (size_t i = 0; i < v->n; i++)
		if (imap_seqset_has(&f->uids, v->msgs[i].uid))
			v->msgs[i].flags |= STORE_SEEN;
	imap_fetch_add(f->items, "FLAGS");
}

/* Whether a message of the set is not \Seen yet (then the FETCH writes first). */
static bool seen_needed(const struct imap_client *c, const struct fetch_cmd *f)
{
	const struct imap_view *v = c->view;

	for (size_t i = 0; i < v->n; i++)
		if (!(v->msgs[i].flags & STORE_SEEN) && imap_seqset_has(&f->uids, v->msgs[i].uid))
			return true;
	return false;
}

/* "(CHANGEDSINCE n [VANISHED])"; -1 when invalid. */
static int fetch_modifiers(struct imap_cmd *cmd, struct fetch_cmd *f, const struct imap_arg *mods)
{
	const struct imap_arg *v = mods + 2;

	if (mods->type != IMAP_ARG_LIST || (mods->n != 2 && mods->n != 3) ||
	    !imap_arg_atom_is(mods + 1, "CHANGEDSINCE") || v->type != IMAP_ARG_ATOM ||
	    str_to_u64(v->s, v->len, INT64_MAX, &f->changedsince) < 0 ||
	    (mods->n == 3 &&
	     (!imap_arg_atom_is(v + 1, "VANISHED") || !cmd->uid || !cmd->c->enabled_qresync)))
		return -1;
	f->vanished = mods->n == 3;
	return 0;
}

/* Parses the command into f (cmd's state from now on); NULL, or the BAD text. */
static const char *fetch_parse(struct imap_cmd *cmd, struct fetch_cmd *f)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *set = imap_cmd_arg(cmd, 0), *items = imap_cmd_arg(cmd, 1);
	const struct imap_arg *mods = imap_cmd_arg(cmd, 2);
	const char *why;

	if (set == NULL || items == NULL || imap_cmd_arg(cmd, 3) != NULL ||
	    set->type != IMAP_ARG_ATOM)
		return "Expected: FETCH sequence-set items";
	if (cmd->uid || c->enabled_qresync) /* RFC 7162 3.2.4: UID in every FETCH */
		imap_fetch_add(f->items, "UID");
	if (imap_fetch_parse(f->items, items) < 0)
		return "Invalid FETCH item";
	if (mods != NULL && fetch_modifiers(cmd, f, mods) < 0)
		return "Invalid FETCH modifier";
	if (mods != NULL || imap_fetch_condstore(f->items))
		imap_view_enable_condstore(c);
	if (f->changedsince != 0 && imap_fetch_add(f->items, "MODSEQ") < 0)
		return "Invalid FETCH item";
	if (imap_view_resolve(c, set->s, set->len, cmd->uid, &f->uids, &why) < 0)
		return why;
	return NULL;
}

/* QRESYNC: the VANISHED (EARLIER) response before the FETCH responses. */
static void fetch_vanished(struct imap_client *c, struct fetch_cmd *f)
{
	struct store_txn *t = NULL;

	if (store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t) == 0)
		imap_view_vanished(c, t, f->changedsince, &f->uids);
	store_txn_abort(&t);
}

/* The command's state: the first call makes it (and may start the \Seen write); NULL when
   the reply was sent or the \Seen write is still out. */
static struct fetch_cmd *fetch_state(struct imap_cmd *cmd, bool *done_r)
{
	struct imap_client *c = cmd->c;
	struct fetch_cmd *f;
	const char *why;
	bool pending;
	int rc;

	*done_r = false;
	if (imap_commit_active(cmd)) {
		f = imap_commit_result(cmd, &pending, &rc);
		if (pending)
			return NULL;
		if (!f->seen_back && rc == 0)
			seen_apply(c, f); /* on a failed write the FETCH goes on without \Seen */
		f->seen_back = true;
		return f;
	}
	if (cmd->ctx != NULL)
		return cmd->ctx;
	f = xcalloc(1, sizeof(*f));
	f->c = c;
	f->items = imap_fetch_new();
	cmd->ctx = f;
	cmd->ctx_free = fetch_ctx_free;
	if ((why = fetch_parse(cmd, f)) != NULL) {
		*done_r = imap_cmd_bad(cmd, why);
		return NULL;
	}
	if (imap_fetch_sets_seen(f->items) && !c->view->readonly &&
	    (c->view->rights & STORE_ACL_SEEN)) {
		if (seen_needed(c, f)) {
			/* the FETCH waits for the write, the loop does not */
			cmd->ctx = NULL;
			cmd->ctx_free = NULL;
			imap_commit_start_flags(cmd, c->view->part, set_seen_fn, f,
						fetch_cmd_free);
			if (f->vanished)
				fetch_vanished(c, f);
			return NULL;
		}
		seen_apply(c, f);
	}
	if (f->vanished)
		fetch_vanished(c, f);
	return f;
}

bool cmd_fetch(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct store_txn *t = NULL;
	struct fetch_cmd *f;
	const char *why = NULL;
	bool done;
	int rc;

	if ((f = fetch_state(cmd, &done)) == NULL)
		return done;
	if ((rc = store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t)) != 0)
		return imap_cmd_store_error(cmd, rc, "fetch");
	while (f->next < c->view->n) {
		if (!imap_fetch_in_message(f->items) &&
		    !imap_seqset_has(&f->uids, c->view->msgs[f->next].uid)) {
			f->next++;
			continue;
		}
		if (imap_out_full(c) || c->stream.fd >= 0) {
			store_txn_abort(&t);
			return false;
		}
		rc = imap_fetch_message(c, f->items, t, f->next, f->changedsince, &why);
		if (rc <= 0) {
			store_txn_abort(&t);
			return rc < 0 ? imap_cmd_no(cmd, why) : false;
		}
		f->next++;
	}
	store_txn_abort(&t);
	if (c->stream.fd >= 0)
		return false;
	return imap_cmd_ok(cmd, "Fetch completed");
}

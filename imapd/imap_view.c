/* imap_view.c — owns the selected view: UID <-> sequence numbers, per-session \Recent, the
 * SELECT/EXAMINE responses, and bringing the view up to date with EXISTS, RECENT, FETCH FLAGS
 * and (only where RFC 3501 allows) EXPUNGE responses. Also flag lists in and out. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

static const struct {
	const char *name;
	unsigned bit;
} sys_flags[] = {
	{ "\\Answered", STORE_ANSWERED }, { "\\Flagged", STORE_FLAGGED },
	{ "\\Deleted", STORE_DELETED },   { "\\Seen", STORE_SEEN },
	{ "\\Draft", STORE_DRAFT },
};
#define NSYS (sizeof(sys_flags) / sizeof(sys_flags[0]))

static void view_push(struct imap_view *v, const struct store_msg *m, bool recent)
{
	if (v->n == v->cap) {
		v->cap = v->cap == 0 ? 64 : v->cap * 2;
		v->msgs = xreallocarray(v->msgs, v->cap, sizeof(*v->msgs));
	}
	v->msgs[v->n].uid = m->uid;
	v->msgs[v->n].flags = (uint8_t)(m->flags | (recent ? IMAP_VF_RECENT : 0));
	v->msgs[v->n].keywords = m->keywords;
	v->n++;
	if (recent)
		v->recent++;
}

uint32_t imap_view_seq(const struct imap_view *v, uint32_t uid)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->msgs[mid].uid == uid)
			return (uint32_t)mid + 1;
		if (v->msgs[mid].uid < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

void imap_flags_write(struct imap_client *c, unsigned flags, uint64_t kw, bool recent,
		      struct store_txn *t)
{
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nkw = 0;
	bool first = true;

	imap_write(c, "(", 1);
	for (size_t i = 0; i < NSYS; i++)
		if (flags & sys_flags[i].bit) {
			imap_printf(c, "%s%s", first ? "" : " ", sys_flags[i].name);
			first = false;
		}
	if (recent && !c->rev2) {
		imap_printf(c, "%s\\Recent", first ? "" : " ");
		first = false;
	}
	if (kw != 0 && t != NULL && c->view != NULL &&
	    store_mbox_keywords(t, c->view->mbox, names, &nkw) == 0)
		for (unsigned i = 0; i < nkw; i++)
			if (kw & ((uint64_t)1 << i)) {
				imap_printf(c, "%s%s", first ? "" : " ", names[i]);
				first = false;
			}
	imap_write(c, ")", 1);
}

static bool keyword_ok(const char *s, size_t len)
{
	if (len == 0 || len > STORE_MAX_KEYWORD)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\\' || s[i] == ']' || (unsigned char)s[i] <= 0x20 ||
		    (unsigned char)s[i] >= 0x7f || strchr("(){%*\"", s[i]) != NULL)
			return false;
	return true;
}

static int flag_one(const struct imap_arg *a, struct store_txn *t, uint64_t mbox, bool create,
		    unsigned *flags, uint64_t *kw, const char **why_r)
{
	unsigned idx;
	int rc;

	if (a->type != IMAP_ARG_ATOM) {
		*why_r = "Flags are atoms";
		return -1;
	}
	if (a->s[0] == '\\') {
		for (size_t i = 0; i < NSYS; i++)
			if (str_caseeq(a->s, a->len, sys_flags[i].name,
				       strlen(sys_flags[i].name))) {
				*flags |= sys_flags[i].bit;
				return 0;
			}
		if (str_caseeq(a->s, a->len, "\\Recent", 7)) {
			*why_r = "\\Recent cannot be changed";
			return -1;
		}
		*why_r = "Unknown system flag";
		return -1;
	}
	if (!keyword_ok(a->s, a->len)) {
		*why_r = "Invalid keyword";
		return -1;
	}
	rc = store_mbox_keyword(t, mbox, a->s, create, &idx);
	if (rc == STORE_ENOMSG)
		return 0; /* an unknown keyword when not creating: matches nothing */
	if (rc != 0) {
		*why_r = rc == STORE_EKEYWORDS ? "[LIMIT] Too many keywords" : store_strerror(rc);
		return -2;
	}
	*kw |= (uint64_t)1 << idx;
	return 0;
}

int imap_flags_parse(const struct imap_arg *a, struct store_txn *t, uint64_t mbox, bool create,
		     unsigned *flags_r, uint64_t *kw_r, const char **why_r)
{
	*flags_r = 0;
	*kw_r = 0;
	if (a->type != IMAP_ARG_LIST)
		return flag_one(a, t, mbox, create, flags_r, kw_r, why_r);
	for (const struct imap_arg *m = a + 1; m <= a + a->span; m = imap_arg_next(m)) {
		int rc = flag_one(m, t, mbox, create, flags_r, kw_r, why_r);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* "* FLAGS (...)" and PERMANENTFLAGS, naming the mailbox's keywords. */
void imap_view_send_flags(struct imap_client *c, struct store_txn *t)
{
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nkw = 0;
	struct buf b;

	store_mbox_keywords(t, c->view->mbox, names, &nkw);
	buf_init(&b, 256, STORE_MAX_KEYWORDS * (STORE_MAX_KEYWORD + 2) + 256);
	buf_puts(&b, "\\Answered \\Flagged \\Deleted \\Seen \\Draft");
	for (unsigned i = 0; i < nkw; i++)
		buf_printf(&b, " %s", names[i]);
	imap_printf(c, "* FLAGS (%s)\r\n", buf_cstr(&b));
	if (!c->view->readonly)
		imap_printf(c, "* OK [PERMANENTFLAGS (%s \\*)] Flags permitted\r\n", buf_cstr(&b));
	else
		imap_printf(c, "* OK [PERMANENTFLAGS ()] Read-only mailbox\r\n");
	buf_release(&b);
	c->view->nkeywords = nkw;
}

int imap_view_take_recent_fn(struct store_txn *t, void *arg)
{
	struct imap_recent_claim *tr = arg;

	return store_mbox_take_recent(t, tr->mbox, &tr->first);
}

bool imap_view_recent_check(struct imap_client *c, uint64_t mbox, uint32_t *first_r)
{
	struct store_txn *t = NULL;
	struct store_status st;
	int rc;

	/* most SELECTs find nothing \Recent: a read tells, without a write txn and its fsync */
	if ((rc = store_txn_begin(c->srv->store, STORE_ID_PART(mbox), STORE_TXN_READ, &t)) == 0)
		rc = store_mbox_status(t, mbox, &st);
	store_txn_abort(&t);
	*first_r = rc != 0 ? UINT32_MAX : st.uidnext;
	return rc == 0 && st.first_recent_uid < st.uidnext;
}

/* A claim of a selected session out in the group commit: the worker's other sessions
   see what it took before it is committed. */
struct imap_recent_pending {
	struct imap_recent_pending *next;
	struct imap_server *srv;
	struct imap_recent_claim claim;
	uint32_t until; /* the uidnext it claimed up to */
};

static void claim_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct imap_recent_pending *p = arg, **pp;

	(void)result;
	(void)rcpts;
	(void)n;
	(void)value;
	for (pp = &p->srv->recent_pending; *pp != NULL; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	free(p);
}

/* Claims the \Recent messages that arrived while selected: the first unclaimed UID read
   now (or past what a claim of this worker still out took) is this session's, and the
   claim goes to the group commit without waiting (the loop never writes). Sessions of two
   workers syncing the same new mail at the same moment may both show it \Recent (IMAP4rev2
   dropped the flag); SELECT's claim waits for its commit. */
static uint32_t view_take_recent(struct imap_client *c, uint64_t mbox)
{
	struct imap_server *srv = c->srv;
	struct store_txn *t = NULL;
	struct store_status st;
	struct imap_recent_pending *p;
	uint32_t first;
	int rc;

	if ((rc = store_txn_begin(srv->store, STORE_ID_PART(mbox), STORE_TXN_READ, &t)) == 0)
		rc = store_mbox_status(t, mbox, &st);
	store_txn_abort(&t);
	if (rc != 0)
		return UINT32_MAX;
	first = st.first_recent_uid;
	for (p = srv->recent_pending; p != NULL; p = p->next)
		if (p->claim.mbox == mbox && p->until > first)
			first = p->until;
	if (first >= st.uidnext)
		return st.uidnext; /* nothing unclaimed */
	p = xcalloc(1, sizeof(*p));
	p->srv = srv;
	p->claim.mbox = mbox;
	p->claim.first = UINT32_MAX;
	p->until = st.uidnext;
	p->next = srv->recent_pending;
	srv->recent_pending = p;
	store_gc_submit_flags(srv->gc, STORE_ID_PART(mbox), imap_view_take_recent_fn, &p->claim,
			      claim_done, p);
	return first;
}

void imap_view_close(struct imap_client *c)
{
	if (c->view == NULL)
		return;
	free(c->view->msgs);
	free(c->view->name);
	free(c->view->viewer);
	imap_seqset_release(&c->view->saved);
	imap_context_free_all(c->view);
	imap_sort_cache_free(&c->view->sort_cache);
	free(c->view);
	c->view = NULL;
}

int imap_view_overlay(const struct imap_view *v, struct store_txn *t, struct store_msg *m)
{
	return v->viewer == NULL ? 0 : store_seen_apply(t, v->mbox, v->viewer, m);
}

const char *imap_viewer_of(const struct imap_client *c, struct store_txn *t, uint64_t mbox)
{
	struct store_mbox_info mi;
	uint64_t owner;

	if (c->user == NULL || !store_seen_viewer_ok(c->user) ||
	    store_mbox_info(t, mbox, &owner, &mi) != 0 || owner == c->user_id)
		return NULL;
	return c->user;
}

int imap_mbox_status(const struct imap_client *c, struct store_txn *t, uint64_t mbox,
		     struct store_status *st)
{
	const char *viewer = imap_viewer_of(c, t, mbox);

	return viewer != NULL ? store_seen_status(t, mbox, viewer, st)
			      : store_mbox_status(t, mbox, st);
}

static int view_load(struct imap_client *c, struct imap_view *v, uint32_t first_recent,
		     struct store_txn *t, struct store_status *st)
{
	struct store_iter *it;
	struct store_msg m;
	const char *viewer;
	int rc;

	if ((rc = store_mbox_status(t, v->mbox, st)) != 0)
		return rc;
	if ((viewer = imap_viewer_of(c, t, v->mbox)) != NULL)
		v->viewer = xstrdup(viewer);
	if (first_recent == UINT32_MAX)
		first_recent = v->readonly ? st->first_recent_uid : st->uidnext;
	v->uidvalidity = st->uidvalidity;
	v->uidnext = st->uidnext;
	v->modseq = st->highestmodseq;
	if ((rc = store_msg_iter(t, v->mbox, 1, UINT32_MAX, 0, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1 && (rc = imap_view_overlay(v, t, &m)) == 0) {
		view_push(v, &m, m.uid >= first_recent);
		if (m.uid >= v->uidnext)
			v->uidnext = m.uid + 1;
	}
	store_iter_free(&it);
	return rc;
}

int imap_view_open(struct imap_cmd *cmd, uint64_t mbox, const char *name, bool readonly,
		   uint32_t first_recent)
{
	struct imap_client *c = cmd->c;
	struct imap_view *v = xcalloc(1, sizeof(*v));
	struct store_txn *t = NULL;
	struct store_status st;
	uint32_t unseen = 0;
	int rc;

	v->mbox = mbox;
	v->part = STORE_ID_PART(mbox);
	v->name = xstrdup(name);
	v->readonly = readonly;
	v->rights = STORE_ACL_ALL; /* another user's mailbox: cmd_select narrows it */
	if ((rc = store_txn_begin(c->srv->store, v->part, STORE_TXN_READ, &t)) != 0 ||
	    (rc = view_load(c, v, first_recent, t, &st)) != 0) {
		store_txn_abort(&t);
		free(v->msgs);
		free(v->name);
		free(v->viewer);
		free(v);
		return rc;
	}
	c->view = v;
	imap_view_send_flags(c, t);
	if (c->rev2)
		imap_list_one(c, t, name); /* RFC 9051 6.3.2: SELECT returns the LIST response */
	store_txn_abort(&t);
	for (size_t i = 0; i < v->n && unseen == 0; i++)
		if (!(v->msgs[i].flags & STORE_SEEN))
			unseen = (uint32_t)i + 1;
	imap_printf(c, "* %zu EXISTS\r\n", v->n);
	if (!c->rev2)
		imap_printf(c, "* %u RECENT\r\n", v->recent);
	if (unseen != 0 && !c->rev2) /* IMAP4rev2 dropped [UNSEEN] */
		imap_printf(c, "* OK [UNSEEN %u] First unseen\r\n", unseen);
	imap_printf(c,
		    "* OK [UIDVALIDITY %u] UIDs valid\r\n* OK [UIDNEXT %u] Predicted next UID\r\n",
		    v->uidvalidity, v->uidnext);
	imap_printf(c, "* OK [HIGHESTMODSEQ %" PRIu64 "] Highest\r\n", v->modseq);
	{
		char id[IMAP_OBJECTID_MAX];

		imap_mailboxid(v->mbox, id);
		imap_printf(c, "* OK [MAILBOXID (%s)] Ok\r\n", id);
	}
	return 0;
}

/* An expunge as the session is to hear it: VANISHED once QRESYNC is enabled (RFC 7162). */
static void say_expunge(struct imap_client *c, size_t seq, uint32_t uid)
{
	if (c->view->contexts != NULL) /* REMOVEFROM first, its numbers still valid */
		imap_context_expunged(c, uid, seq);
	if (c->enabled_qresync)
		imap_printf(c, "* VANISHED %u\r\n", uid);
	else
		imap_printf(c, "* %zu EXPUNGE\r\n", seq);
}

/* Drops messages no longer in the store, sending EXPUNGE for each (ascending sequence
   numbers, each valid after the previous removal). */
static int view_expunge_scan(struct imap_client *c, struct store_txn *t)
{
	struct imap_view *v = c->view;
	struct store_iter *it;
	struct store_msg m;
	size_t i = 0, out = 0;
	int rc;

	if (v->n == 0)
		return 0;
	if ((rc = store_msg_iter(t, v->mbox, 1, v->msgs[v->n - 1].uid, 0, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1) {
		while (i < v->n && v->msgs[i].uid < m.uid) {
			say_expunge(c, out + 1, v->msgs[i].uid);
			if (v->msgs[i].flags & IMAP_VF_RECENT)
				v->recent--;
			i++;
		}
		if (i < v->n && v->msgs[i].uid == m.uid)
			v->msgs[out++] = v->msgs[i++];
	}
	for (; i < v->n; i++) {
		say_expunge(c, out + 1, v->msgs[i].uid);
		if (v->msgs[i].flags & IMAP_VF_RECENT)
			v->recent--;
	}
	v->n = out;
	store_iter_free(&it);
	v->expunge_pending = false;
	return rc;
}

/* One message's FETCH FLAGS when it differs from what the view knows. */
static void view_flag_change(struct imap_client *c, struct store_txn *t, const struct store_msg *m)
{
	struct imap_view *v = c->view;
	uint32_t seq = imap_view_seq(v, m->uid);
	struct imap_view_msg *vm;

	if (seq == 0)
		return;
	vm = &v->msgs[seq - 1];
	if ((vm->flags & ~IMAP_VF_RECENT) == m->flags && vm->keywords == m->keywords)
		return;
	vm->flags = (uint8_t)(m->flags | (vm->flags & IMAP_VF_RECENT));
	vm->keywords = m->keywords;
	if (imap_notify_flag_uid(c) || c->enabled_qresync) /* RFC 7162 3.2.4 */
		imap_printf(c, "* %u FETCH (UID %u FLAGS ", seq, m->uid);
	else
		imap_printf(c, "* %u FETCH (FLAGS ", seq);
	imap_flags_write(c, m->flags, m->keywords, vm->flags & IMAP_VF_RECENT, t);
	if (c->enabled_condstore)
		imap_printf(c, " MODSEQ (%" PRIu64 ")", m->modseq);
	imap_printf(c, ")\r\n");
}

struct pvt_changes {
	struct imap_client *c;
	struct store_txn *t;
};

/* A private \Seen changed (by another session of the viewer) since the view's modseq. */
static int pvt_change_cb(const struct store_seen *s, void *arg)
{
	struct pvt_changes *pc = arg;
	struct store_msg m;
	int rc = store_msg_get(pc->t, pc->c->view->mbox, s->uid, &m);

	if (rc == STORE_ENOMSG)
		return 0;
	if (rc != 0)
		return rc;
	store_seen_overlay(&m, s);
	view_flag_change(pc->c, pc->t, &m);
	return 0;
}

/* Flag changes by others since the view's modseq: FETCH FLAGS for each real difference. On
   another user's mailbox, the viewer's own private \Seen changes too. */
static int view_flag_changes(struct imap_client *c, struct store_txn *t)
{
	struct imap_view *v = c->view;
	struct pvt_changes pc = { c, t };
	struct store_iter *it;
	struct store_msg m;
	int rc;

	if (v->uidnext <= 1)
		return 0;
	if ((rc = store_msg_iter(t, v->mbox, 1, v->uidnext - 1, v->modseq, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1 && (rc = imap_view_overlay(v, t, &m)) == 0)
		view_flag_change(c, t, &m);
	store_iter_free(&it);
	if (rc == 0 && v->viewer != NULL) {
		uint64_t last = 0;

		/* a scan of the mailbox's rows only after a change of the viewer's */
		if ((rc = store_seen_highest(t, v->mbox, v->viewer, &last)) == 0 &&
		    last > v->modseq)
			rc = store_seen_list(t, v->mbox, v->viewer, 1, v->modseq, pvt_change_cb,
					     &pc);
	}
	return rc;
}

static int view_new_messages(struct imap_client *c, struct store_txn *t, uint32_t first_recent)
{
	struct imap_view *v = c->view;
	struct store_iter *it;
	struct store_msg m;
	int rc;

	if ((rc = store_msg_iter(t, v->mbox, v->uidnext, UINT32_MAX, 0, &it)) != 0)
		return rc;
	while ((rc = store_iter_next(it, &m)) == 1 && (rc = imap_view_overlay(v, t, &m)) == 0) {
		view_push(v, &m, m.uid >= first_recent);
		v->uidnext = m.uid + 1;
	}
	store_iter_free(&it);
	return rc;
}

void imap_view_sync(struct imap_client *c, bool allow_expunge)
{
	struct imap_view *v = c->view;
	struct store_txn *t = NULL;
	struct store_status st;
	uint64_t modseq;
	size_t old_n = v->n;
	uint32_t old_recent = v->recent, first_recent = UINT32_MAX;
	int rc;

	rc = store_mbox_modseq(c->srv->store, v->mbox, &modseq);
	if (rc == STORE_ENOMBOX) {
		imap_printf(c, "* BYE Selected mailbox was deleted\r\n");
		imap_client_close(c, "mailbox deleted");
		return;
	}
	if (rc != 0 || (modseq == v->modseq && !(allow_expunge && v->expunge_pending)))
		return;
	if ((rc = store_txn_begin(c->srv->store, v->part, STORE_TXN_READ, &t)) != 0)
		return;
	if ((rc = store_mbox_status(t, v->mbox, &st)) != 0)
		goto out;
	if (st.uidnext > v->uidnext && !v->readonly) {
		store_txn_abort(&t);
		first_recent = view_take_recent(c, v->mbox);
		if ((rc = store_txn_begin(c->srv->store, v->part, STORE_TXN_READ, &t)) != 0 ||
		    (rc = store_mbox_status(t, v->mbox, &st)) != 0)
			goto out;
	}
	if (st.messages < v->n + (st.uidnext - v->uidnext) || v->expunge_pending) {
		if (allow_expunge)
			rc = view_expunge_scan(c, t);
		else
			v->expunge_pending = true;
	}
	{
		const char *names[STORE_MAX_KEYWORDS];
		unsigned nkw = 0;

		if (store_mbox_keywords(t, v->mbox, names, &nkw) == 0 && nkw > v->nkeywords)
			imap_view_send_flags(c, t);
	}
	if (rc == 0)
		rc = view_flag_changes(c, t);
	old_n = v->n; /* after the expunges: EXISTS only announces growth */
	if (rc == 0)
		rc = view_new_messages(c, t, first_recent);
	if (rc == 0)
		v->modseq = st.highestmodseq;
	if (v->n != old_n)
		imap_printf(c, "* %zu EXISTS\r\n", v->n);
	if (v->recent != old_recent && !c->rev2)
		imap_printf(c, "* %u RECENT\r\n", v->recent);
	if (rc == 0 && v->contexts != NULL) /* after EXISTS: new numbers are valid */
		imap_context_update(c, t);
out:
	store_txn_abort(&t);
}

void imap_view_expunged(struct imap_client *c, uint32_t uid)
{
	struct imap_view *v = c->view;
	uint32_t seq = imap_view_seq(v, uid);

	if (seq == 0)
		return;
	if (v->msgs[seq - 1].flags & IMAP_VF_RECENT)
		v->recent--;
	memmove(&v->msgs[seq - 1], &v->msgs[seq], (v->n - seq) * sizeof(*v->msgs));
	v->n--;
	say_expunge(c, seq, uid);
}

void imap_view_set_flags(struct imap_view *v, uint32_t uid, unsigned flags, uint64_t kw)
{
	uint32_t seq = imap_view_seq(v, uid);

	if (seq == 0)
		return;
	v->msgs[seq - 1].flags = (uint8_t)(flags | (v->msgs[seq - 1].flags & IMAP_VF_RECENT));
	v->msgs[seq - 1].keywords = kw;
}

int imap_view_vanished(struct imap_client *c, struct store_txn *t, uint64_t since,
		       const struct imap_seqset *known)
{
	struct imap_view *v = c->view;
	struct imap_seqset gone = { 0 };
	uint32_t *uids = NULL;
	size_t n = 0;
	bool exact = false;
	int rc;

	if ((rc = store_msg_vanished(t, v->mbox, since, &uids, &n, &exact)) != 0)
		return rc;
	if (exact) {
		for (size_t i = 0; i < n; i++)
			if (known == NULL || imap_seqset_has(known, uids[i]))
				imap_seqset_add(&gone, uids[i], uids[i]);
	} else {
		/* history too short: every known UID not in the mailbox (RFC 7162 3.2.5.2) */
		struct imap_seqset all = { 0 };
		const struct imap_seqset *k = known;

		if (k == NULL) {
			imap_seqset_add(&all, 1, v->uidnext > 1 ? v->uidnext - 1 : 1);
			imap_seqset_resolve(&all, 0);
			k = &all;
		}
		for (size_t r = 0; r < k->n; r++)
			for (uint64_t u = k->v[r].lo; u <= k->v[r].hi && u < v->uidnext; u++)
				if (imap_view_seq(v, (uint32_t)u) == 0)
					imap_seqset_add(&gone, (uint32_t)u, (uint32_t)u);
		imap_seqset_release(&all);
	}
	free(uids);
	if (gone.n > 0) {
		struct buf b;

		imap_seqset_resolve(&gone, 0);
		buf_init(&b, 64, BUF_INPUT_BOUNDED); /* the expunged UIDs */
		imap_seqset_format(&gone, &b);
		imap_printf(c, "* VANISHED (EARLIER) %s\r\n", buf_cstr(&b));
		buf_release(&b);
	}
	imap_seqset_release(&gone);
	return 0;
}

void imap_view_enable_condstore(struct imap_client *c)
{
	if (c->enabled_condstore)
		return;
	c->enabled_condstore = true;
	if (c->view != NULL && c->state == IMAP_ST_SELECTED)
		imap_printf(c, "* OK [HIGHESTMODSEQ %" PRIu64 "] Highest\r\n", c->view->modseq);
}

void imap_view_keywords_announce(struct imap_client *c, struct store_txn *t, uint64_t kw)
{
	unsigned n = c->view->nkeywords;

	if (n < 64 && (kw >> n) != 0)
		imap_view_send_flags(c, t);
}

int imap_view_resolve_key(struct imap_client *c, const char *s, size_t len,
			  struct imap_seqset *uids_r)
{
	return imap_view_set_resolve_key(c->view, s, len, uids_r);
}

int imap_view_resolve(struct imap_client *c, const char *s, size_t len, bool uid,
		      struct imap_seqset *uids_r, const char **why_r)
{
	return imap_view_set_resolve(c->view, s, len, uid, uids_r, why_r);
}

/* cmd_notify.c — owns NOTIFY (RFC 5465): the NOTIFY SET/NONE syntax and its checks, a
 * session's event groups, and the notifications themselves: unsolicited EXISTS/EXPUNGE/FETCH
 * for the selected mailbox, STATUS for other mailboxes, LIST for names and subscriptions,
 * METADATA for annotations. Changes come from the store's change log (store_changes_read):
 * the worker reads each changed partition's new records once per wake-up and hands each to
 * the NOTIFY sessions of its user, so a change costs the same whatever the number of
 * mailboxes watched. A MAILBOXES name of another user's (or the shared) namespace that the
 * client may see when NOTIFY SET runs is watched in its owner's partition (struct
 * notify_watch): its message events come as STATUS while the client holds 'l' and 'r' there,
 * read again at each change, so a right taken away stops them and one given back resumes
 * them (SUBTREE and SUBSCRIBED stay the user's own mailboxes; an ACL change itself is no
 * event). A session's pending notifications are bounded (NOTIFY_QUEUE_MAX); one
 * that falls further behind gets [NOTIFICATIONOVERFLOW] and its notifications end (NOTIFY
 * NONE), the session itself goes on. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "imapd/imap_notify.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define NOTIFY_READ_MAX 4096 /* change records read per partition per wake-up */

struct notify_group {
	enum imap_notify_filter filter;
	unsigned events;
	char **names; /* SUBTREE, MAILBOXES: stored names */
	size_t nnames;
};

/* A MAILBOXES name of another user's (or the shared) namespace, found when NOTIFY SET ran:
   its records are in the owner's partition under the owner's user id. */
struct notify_watch {
	uint64_t mbox;
	unsigned part;
	char *name;      /* the client's name for it (points into a group's names) */
	unsigned events; /* of the first group naming it (RFC 5465 6) */
};

struct notify_pending {
	enum store_change_kind kind;
	uint64_t mbox;
	unsigned part;   /* where mbox is: the session's own, or a watch's */
	bool watched;    /* a watch's: told only while the rights allow */
	char *name;      /* the mailbox (MSGS, names), or the entry (ANNOT) */
	char *old;       /* RENAME: the former name */
	char *mbox_name; /* ANNOT: the mailbox's name ("" for server entries) */
};

struct imap_notify {
	struct notify_group groups[IMAP_NOTIFY_GROUPS_MAX];
	size_t ngroups;
	struct notify_watch *watch; /* other users' mailboxes named by MAILBOXES */
	size_t nwatch;
	int selected;             /* index of the selected(-delayed) group, or -1 */
	struct imap_fetch *fetch; /* its MessageNew attributes, or NULL */
	struct notify_pending q[NOTIFY_QUEUE_MAX];
	size_t nq;
	bool selected_pending; /* the selected mailbox changed since the last sync */
	bool overflow;
};

static void group_release(struct notify_group *g)
{
	for (size_t i = 0; i < g->nnames; i++)
		free(g->names[i]);
	free(g->names);
	g->names = NULL;
	g->nnames = 0;
}

static void pending_release(struct notify_pending *p)
{
	free(p->name);
	free(p->old);
	free(p->mbox_name);
	memset(p, 0, sizeof(*p));
}

void imap_notify_free(struct imap_client *c)
{
	struct imap_notify *n = c->notify;

	if (n == NULL)
		return;
	for (size_t i = 0; i < n->ngroups; i++)
		group_release(&n->groups[i]);
	for (size_t i = 0; i < n->nq; i++)
		pending_release(&n->q[i]);
	free(n->watch);
	imap_fetch_free(&n->fetch);
	free(n);
	c->notify = NULL;
}

/* ------------------------------------------------------------------------------------- */
/* Which group a mailbox falls in */

static bool name_is(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && memcmp(a, b, alen) == 0;
}

static bool is_subscribed(struct imap_client *c, struct store_txn *t, const char *name,
			  size_t len);

static bool group_matches(struct imap_client *c, struct store_txn *t, const struct notify_group *g,
			  const char *name, size_t len)
{
	switch (g->filter) {
	case IMAP_NF_SELECTED:
	case IMAP_NF_SELECTED_DELAYED:
		return false; /* the selected mailbox is handled apart */
	case IMAP_NF_INBOXES:
		return name_is(name, len, "INBOX");
	case IMAP_NF_PERSONAL:
		return true; /* every mailbox of the user's (the personal namespace) */
	case IMAP_NF_SUBSCRIBED:
		return is_subscribed(c, t, name, len);
	case IMAP_NF_SUBTREE:
		for (size_t i = 0; i < g->nnames; i++) {
			size_t n = strlen(g->names[i]);

			if (len >= n && memcmp(name, g->names[i], n) == 0 &&
			    (len == n || name[n] == STORE_DELIM))
				return true;
		}
		return false;
	case IMAP_NF_MAILBOXES:
		for (size_t i = 0; i < g->nnames; i++)
			if (name_is(name, len, g->names[i]))
				return true;
		return false;
	}
	return false;
}

/* The events asked for mailbox name (not the selected one): the first group that names it
   decides (RFC 5465 6). */
static unsigned events_for(struct imap_client *c, struct store_txn *t, const char *name,
			   size_t len)
{
	struct imap_notify *n = c->notify;

	for (size_t i = 0; i < n->ngroups; i++)
		if (group_matches(c, t, &n->groups[i], name, len))
			return n->groups[i].events;
	return 0;
}

static unsigned events_any(const struct imap_notify *n)
{
	unsigned ev = 0;

	for (size_t i = 0; i < n->ngroups; i++)
		ev |= n->groups[i].events;
	return ev;
}

/* One mailbox (or subscription) found by its exact name in a store_mbox_list walk. */
struct list_find {
	const char *name;
	size_t len;
	bool found;
	unsigned attrs;
};

static int list_find_cb(const struct store_mbox_info *mi, void *arg)
{
	struct list_find *l = arg;

	if (mi->name_len == l->len && memcmp(mi->name, l->name, l->len) == 0) {
		l->found = true;
		l->attrs = mi->attrs;
		return 1;
	}
	return 0;
}

static bool is_subscribed(struct imap_client *c, struct store_txn *t, const char *name, size_t len)
{
	char pat[STORE_MAX_NAME + 1];
	struct list_find s = { name, len, false, 0 };

	if (len > STORE_MAX_NAME || memchr(name, '*', len) != NULL ||
	    memchr(name, '%', len) != NULL)
		return false;
	memcpy(pat, name, len);
	pat[len] = '\0';
	(void)store_mbox_list(t, c->user_id, pat, true, list_find_cb, &s);
	return s.found;
}

/* ------------------------------------------------------------------------------------- */
/* Responses */

/* A mailbox's STATUS: HIGHESTMODSEQ after CONDSTORE (RFC 5465 5.2), and whenever its group
   asks for FlagChange, whose STATUS carries at least UIDVALIDITY and HIGHESTMODSEQ (5.1): a
   flag change moves nothing else a STATUS shows but UNSEEN. */
static void write_status(struct imap_client *c, struct store_txn *t, uint64_t mbox,
			 const char *name, size_t len)
{
	struct store_status st;

	if (imap_mbox_status(c, t, mbox, &st) != 0)
		return; /* gone since: its LIST (MailboxName) tells */
	imap_write(c, "* STATUS ", 9);
	imap_write_mailbox(c, name, len);
	imap_printf(c, " (MESSAGES %u UIDNEXT %u UIDVALIDITY %u UNSEEN %u", st.messages,
		    st.uidnext, st.uidvalidity, st.unseen);
	if (c->enabled_condstore || (events_for(c, t, name, len) & IMAP_NE_FLAG))
		imap_printf(c, " HIGHESTMODSEQ %" PRIu64, st.highestmodseq);
	imap_write(c, ")\r\n", 3);
}

/* "* LIST (attrs) "/" name" as the mailbox is now (\NonExistent when gone), with OLDNAME
   after a rename (RFC 5465 5.4) and \Subscribed when it is (5.5). */
static void write_list(struct imap_client *c, struct store_txn *t, const char *name,
		       const char *old)
{
	size_t len = strlen(name);
	struct list_find l = { name, len, false, 0 };
	bool sub = is_subscribed(c, t, name, len);
	const char *sep = "";

	if (memchr(name, '*', len) == NULL && memchr(name, '%', len) == NULL)
		(void)store_mbox_list(t, c->user_id, name, false, list_find_cb, &l);
	imap_write(c, "* LIST (", 8);
	if (!l.found) {
		imap_write(c, "\\NonExistent", 12);
		sep = " ";
	} else {
		if (l.attrs & STORE_MBOX_NOSELECT) {
			imap_write(c, "\\Noselect ", 10);
		}
		imap_printf(c, "%s",
			    l.attrs & STORE_MBOX_HASCHILDREN ? "\\HasChildren"
							     : "\\HasNoChildren");
		sep = " ";
	}
	if (sub)
		imap_printf(c, "%s\\Subscribed", sep);
	imap_write(c, ") \"/\" ", 6);
	imap_write_mailbox(c, name, len);
	if (old != NULL) {
		imap_write(c, " (\"OLDNAME\" (", 13);
		imap_write_mailbox(c, old, strlen(old));
		imap_write(c, "))", 2);
	}
	imap_write(c, "\r\n", 2);
}

/* Whether rights let a client hear of a mailbox's messages: it must see it (l) and read it
   (r); one whose right went hears nothing more of it (RFC 4314: without l it is as no
   mailbox at all). */
static bool watch_allowed(uint32_t rights)
{
	return (rights & (STORE_ACL_LOOKUP | STORE_ACL_READ)) ==
	       (STORE_ACL_LOOKUP | STORE_ACL_READ);
}

/* A watched mailbox's STATUS, read in its owner's partition part (in t when one is open
   there, else in a txn of its own), if the client's rights there still allow it. */
static void write_watched(struct imap_client *c, struct store_txn *t, uint64_t mbox, unsigned part,
			  const char *name)
{
	struct store_txn *own = NULL;
	uint32_t r = 0;

	if (t == NULL) {
		if (store_txn_begin(c->srv->store, part, STORE_TXN_READ, &own) != 0)
			return;
		t = own;
	}
	if (store_acl_rights(t, mbox, c->user, &r) == 0 && watch_allowed(r))
		write_status(c, t, mbox, name, strlen(name));
	store_txn_abort(&own);
}

static void write_pending(struct imap_client *c, struct store_txn *t,
			  const struct notify_pending *p)
{
	if (p->watched) {
		write_watched(c, p->part == c->part ? t : NULL, p->mbox, p->part, p->name);
		return;
	}
	switch (p->kind) {
	case STORE_CHANGE_MSGS:
		write_status(c, t, p->mbox, p->name, strlen(p->name));
		break;
	case STORE_CHANGE_CREATE:
	case STORE_CHANGE_DELETE:
	case STORE_CHANGE_SUBSCRIBE:
		write_list(c, t, p->name, NULL);
		break;
	case STORE_CHANGE_RENAME:
		write_list(c, t, p->name, p->old);
		break;
	case STORE_CHANGE_ANNOT: /* RFC 5464 4.4's unsolicited METADATA */
		imap_write(c, "* METADATA ", 11);
		if (p->mbox_name[0] == '\0')
			imap_write(c, "\"\"", 2);
		else
			imap_write_mailbox(c, p->mbox_name, strlen(p->mbox_name));
		imap_write(c, " ", 1);
		imap_write_astring(c, p->name, strlen(p->name));
		imap_write(c, "\r\n", 2);
		break;
	}
}

/* The selected mailbox's changes: EXISTS, EXPUNGE (when allowed), FETCH FLAGS, and the
   MessageNew attributes of each new message. */
static void sync_selected(struct imap_client *c, bool allow_expunge)
{
	struct imap_notify *n = c->notify;
	struct imap_view *v = c->view;
	uint32_t last_uid;
	struct store_txn *t = NULL;
	size_t vi;

	n->selected_pending = false;
	if (v == NULL)
		return;
	last_uid = v->n > 0 ? v->msgs[v->n - 1].uid : 0;
	imap_view_sync(c, allow_expunge);
	if (c->view == NULL || n->fetch == NULL || (c->flags & IMAP_CF_CLOSING))
		return;
	if (c->enabled_qresync && imap_fetch_add(n->fetch, "UID") < 0) /* RFC 7162 3.2.4 */
		return;
	if (store_txn_begin(c->srv->store, v->part, STORE_TXN_READ, &t) != 0)
		return;
	vi = v->n;
	while (vi > 0 && v->msgs[vi - 1].uid > last_uid)
		vi--; /* the first new one */
	for (; vi < v->n; vi++) {
		const char *why = NULL;

		if (imap_fetch_message(c, n->fetch, t, vi, 0, &why) < 0)
			break;
	}
	store_txn_abort(&t);
}

bool imap_notify_flag_uid(const struct imap_client *c)
{
	const struct imap_notify *n = c->notify;

	return n != NULL && n->selected >= 0 && (n->groups[n->selected].events & IMAP_NE_FLAG);
}

/* Whether c may be written to now, outside of a command's replies. */
static bool notify_can_write(struct imap_client *c)
{
	return (!c->cmd_active || (c->flags & IMAP_CF_IDLE)) && !imap_out_full(c) &&
	       !(c->flags & (IMAP_CF_CLOSING | IMAP_CF_DEFUNCT)) && c->stream.fd < 0;
}

bool imap_notify_listening(struct imap_client *c)
{
	return c->notify != NULL && notify_can_write(c);
}

static bool selected_delayed(const struct imap_notify *n)
{
	return n->selected >= 0 && n->groups[n->selected].filter == IMAP_NF_SELECTED_DELAYED;
}

static void read_partition(struct imap_server *srv, unsigned p);

void imap_notify_flush(struct imap_client *c, bool allow_expunge)
{
	struct imap_notify *n = c->notify;
	struct store_txn *t = NULL;
	size_t i;

	if (n == NULL)
		return;
	/* a command's reply (NOOP's, say) tells everything committed before it, whether the
	   watcher's wake-up came yet or not */
	if (c->cmd_active && !(c->flags & IMAP_CF_IDLE)) {
		read_partition(c->srv, c->part);
		if (n->nwatch > 0) { /* each watched partition once */
			bool *done = xcalloc(store_partitions(c->srv->store), sizeof(*done));

			done[c->part] = true;
			for (i = 0; i < n->nwatch; i++)
				if (!done[n->watch[i].part]) {
					done[n->watch[i].part] = true;
					read_partition(c->srv, n->watch[i].part);
				}
			free(done);
		}
	}
	if (n->overflow) {
		imap_printf(c, "* OK [NOTIFICATIONOVERFLOW] Too many changes to tell; "
			       "notifications are off (NOTIFY NONE)\r\n");
		imap_notify_free(c);
		return;
	}
	if (n->nq > 0 && store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t) == 0) {
		for (i = 0; i < n->nq && !imap_out_full(c); i++)
			write_pending(c, t, &n->q[i]);
		store_txn_abort(&t);
		for (size_t j = 0; j < i; j++)
			pending_release(&n->q[j]);
		memmove(n->q, n->q + i, (n->nq - i) * sizeof(n->q[0]));
		n->nq -= i;
	}
	if (n->selected_pending && c->view != NULL && c->state == IMAP_ST_SELECTED) {
		/* outside a command (IDLE is one), EXPUNGE only when MessageExpunge was asked
		   for and not delayed */
		bool asked = (n->groups[n->selected].events & IMAP_NE_EXPUNGE) &&
			     !selected_delayed(n);

		sync_selected(c, allow_expunge && (c->cmd_active || asked));
	}
}

/* A flush outside of any command: the selected-delayed filter keeps expunges for a command
   that allows them (RFC 5465 5.1). */
static void flush_now(struct imap_client *c)
{
	struct imap_notify *n = c->notify;

	imap_notify_flush(c, (c->flags & IMAP_CF_IDLE) || !selected_delayed(n));
}

void imap_notify_drained(struct imap_client *c)
{
	struct imap_notify *n = c->notify;

	if (n != NULL && (n->nq > 0 || n->overflow || n->selected_pending) && notify_can_write(c))
		flush_now(c);
}

/* Queues a notification (a STATUS for a mailbox already queued is not queued again). */
static void enqueue_in(struct imap_client *c, const struct store_change *ch, const char *mbox_name,
		       unsigned part, const char *name)
{
	struct imap_notify *n = c->notify;
	struct notify_pending *p;

	if (n->overflow)
		return;
	if (ch->kind == STORE_CHANGE_MSGS)
		for (size_t i = 0; i < n->nq; i++)
			if (n->q[i].kind == STORE_CHANGE_MSGS && n->q[i].mbox == ch->mbox)
				return;
	if (n->nq >= NOTIFY_QUEUE_MAX) {
		n->overflow = true;
		return;
	}
	p = &n->q[n->nq++];
	p->kind = ch->kind;
	p->mbox = ch->mbox;
	p->part = part;
	p->watched = name != NULL;
	p->name = name != NULL ? xstrdup(name) : xstrndup(ch->name, ch->name_len);
	p->old = ch->kind == STORE_CHANGE_RENAME ? xstrndup(ch->old, ch->old_len) : NULL;
	p->mbox_name = mbox_name != NULL ? xstrdup(mbox_name) : NULL;
}

static void enqueue(struct imap_client *c, const struct store_change *ch, const char *mbox_name)
{
	enqueue_in(c, ch, mbox_name, c->part, NULL);
}

/* The events a STORE_CHANGE_MSGS write of what (enum store_change_what) is: only those of
   the groups asking for one of them hear of it. */
static unsigned msgs_events(unsigned what)
{
	unsigned ev = 0;

	if (what & STORE_WHAT_NEW)
		ev |= IMAP_NE_NEW;
	if (what & STORE_WHAT_EXPUNGE)
		ev |= IMAP_NE_EXPUNGE;
	if (what & STORE_WHAT_FLAGS)
		ev |= IMAP_NE_FLAG;
	if (what & STORE_WHAT_META)
		ev |= IMAP_NE_MESSAGE;
	return ev;
}

/* One change of c's user's partition, read in t. */
static void notify_change(struct imap_client *c, struct store_txn *t,
			  const struct store_change *ch)
{
	struct imap_notify *n = c->notify;
	unsigned ev;

	switch (ch->kind) {
	case STORE_CHANGE_MSGS:
		ev = msgs_events(ch->what);
		if (c->view != NULL && ch->mbox == c->view->mbox) {
			if (n->selected >= 0 && (n->groups[n->selected].events & ev))
				n->selected_pending = true;
			return; /* else at the end of a command, as without NOTIFY */
		}
		if (events_for(c, t, ch->name, ch->name_len) & ev)
			enqueue(c, ch, NULL);
		return;
	case STORE_CHANGE_CREATE:
	case STORE_CHANGE_DELETE:
		if (events_for(c, t, ch->name, ch->name_len) & IMAP_NE_NAME)
			enqueue(c, ch, NULL);
		return;
	case STORE_CHANGE_RENAME:
		if ((events_for(c, t, ch->name, ch->name_len) |
		     events_for(c, t, ch->old, ch->old_len)) &
		    IMAP_NE_NAME)
			enqueue(c, ch, NULL);
		return;
	case STORE_CHANGE_SUBSCRIBE:
		/* the subscribed filter matches either way round (RFC 5465 5.5) */
		ev = events_any(n) & IMAP_NE_SUBSCRIPTION
			     ? events_for(c, t, ch->name, ch->name_len)
			     : 0;
		for (size_t i = 0; i < n->ngroups && !(ev & IMAP_NE_SUBSCRIPTION); i++)
			if (n->groups[i].filter == IMAP_NF_SUBSCRIBED)
				ev |= n->groups[i].events;
		if (ev & IMAP_NE_SUBSCRIPTION)
			enqueue(c, ch, NULL);
		return;
	case STORE_CHANGE_ANNOT:
		if (ch->mbox == 0) {
			if (events_any(n) & IMAP_NE_SERVER_METADATA)
				enqueue(c, ch, "");
			return;
		}
		{
			uint64_t owner;
			struct store_mbox_info mi;
			char *name;

			if (store_mbox_info(t, ch->mbox, &owner, &mi) != 0)
				return;
			if (!(events_for(c, t, mi.name, mi.name_len) & IMAP_NE_MBOX_METADATA))
				return;
			name = xstrndup(mi.name, mi.name_len);
			enqueue(c, ch, name);
			free(name);
		}
		return;
	}
}

/* A session watching mailbox mbox of a partition (one of its struct notify_watch). */
struct notify_watcher {
	uint64_t mbox;
	struct imap_client *c;
	const struct notify_watch *w;
};

/* A partition's NOTIFY sessions, sorted by user: a record goes to its user's sessions
   found by a binary search, not by a pass over every session of the worker. */
struct notify_read {
	struct store_txn *t;
	struct imap_client **by_user;
	size_t n;
	struct notify_watcher *watchers; /* the partition's watched mailboxes, by mbox */
	size_t nw;
};

static int by_user_cmp(const void *a, const void *b)
{
	const struct imap_client *x = *(struct imap_client *const *)a;
	const struct imap_client *y = *(struct imap_client *const *)b;

	return x->user_id < y->user_id ? -1 : x->user_id > y->user_id;
}

static int by_mbox_cmp(const void *a, const void *b)
{
	const struct notify_watcher *x = a, *y = b;

	return x->mbox < y->mbox ? -1 : x->mbox > y->mbox;
}

/* A change of a mailbox that sessions watch as another user's: a STATUS for each whose
   group asks for its events and whose rights (read now, in the owner's partition) still
   let it see and read the mailbox. */
static void watched_change(struct notify_read *r, const struct store_change *ch)
{
	size_t lo = 0, hi = r->nw;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->watchers[mid].mbox < ch->mbox)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < r->nw && r->watchers[lo].mbox == ch->mbox; lo++) {
		struct imap_client *c = r->watchers[lo].c;
		const struct notify_watch *w = r->watchers[lo].w;
		uint32_t rights = 0;

		if ((c->view != NULL && c->view->mbox == ch->mbox) ||
		    !(msgs_events(ch->what) & w->events) ||
		    store_acl_rights(r->t, ch->mbox, c->user, &rights) != 0 ||
		    !watch_allowed(rights))
			continue; /* the selected one is the view's; or not asked, or not allowed */
		enqueue_in(c, ch, NULL, w->part, w->name);
	}
}

static int read_cb(const struct store_change *ch, void *arg)
{
	struct notify_read *r = arg;
	size_t lo = 0, hi = r->n;

	if (ch->kind == STORE_CHANGE_MSGS && r->nw > 0)
		watched_change(r, ch);

	while (lo < hi) { /* the first session of ch->user */
		size_t mid = lo + (hi - lo) / 2;

		if (r->by_user[mid]->user_id < ch->user)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < r->n && r->by_user[lo]->user_id == ch->user; lo++)
		notify_change(r->by_user[lo], r->t, ch);
	return 0;
}

/* The worker's position in partition part's log, taken when a session there first asks. */
static void position_take(struct imap_server *srv, unsigned part)
{
	struct store_txn *t = NULL;

	if (srv->notify_known[part])
		return;
	if (store_txn_begin(srv->store, part, STORE_TXN_READ, &t) != 0)
		return;
	if (store_changes_last(t, &srv->notify_seq[part]) == 0)
		srv->notify_known[part] = true;
	store_txn_abort(&t);
}

/* The watched mailboxes of partition p, of c, into r. */
static void watchers_add(struct notify_read *r, size_t *cap, struct imap_client *c, unsigned p)
{
	for (size_t i = 0; i < c->notify->nwatch; i++) {
		if (c->notify->watch[i].part != p)
			continue;
		if (r->nw == *cap)
			r->watchers = xreallocarray(r->watchers, *cap = *cap * 2 + 16,
						    sizeof(*r->watchers));
		r->watchers[r->nw++] = (struct notify_watcher){ c->notify->watch[i].mbox, c,
								&c->notify->watch[i] };
	}
}

/* The new records of partition p's log, handed to the worker's NOTIFY sessions there and to
   those watching a mailbox there. */
static void read_partition(struct imap_server *srv, unsigned p)
{
	struct notify_read r = { 0 };
	size_t cap = 0, wcap = 0;
	bool gap = false;
	uint64_t last;

	if (!srv->notify_known[p])
		return;
	for (struct imap_client *c = srv->clients; c != NULL; c = c->next) {
		if (c->notify == NULL)
			continue;
		watchers_add(&r, &wcap, c, p);
		if (c->part != p)
			continue;
		if (r.n == cap)
			r.by_user = xreallocarray(r.by_user, cap = cap * 2 + 16,
						  sizeof(*r.by_user));
		r.by_user[r.n++] = c;
	}
	if (r.n == 0 && r.nw == 0) { /* nobody asks here any more: read nothing, start afresh */
		srv->notify_known[p] = false;
		return;
	}
	if (r.n > 1) /* qsort of a NULL array is undefined even for 0 elements */
		qsort(r.by_user, r.n, sizeof(*r.by_user), by_user_cmp);
	if (r.nw > 1)
		qsort(r.watchers, r.nw, sizeof(*r.watchers), by_mbox_cmp);
	if (store_txn_begin(srv->store, p, STORE_TXN_READ, &r.t) == 0) {
		if (store_changes_read(r.t, srv->notify_seq[p], NOTIFY_READ_MAX, read_cb, &r,
				       &last, &gap) == 0)
			srv->notify_seq[p] = last;
		if (gap) { /* records went before this worker read them: nobody here can be told */
			for (size_t i = 0; i < r.n; i++)
				r.by_user[i]->notify->overflow = true;
			for (size_t i = 0; i < r.nw; i++)
				r.watchers[i].c->notify->overflow = true;
		}
		store_txn_abort(&r.t);
	}
	free(r.by_user);
	free(r.watchers);
}

void imap_notify_changed(struct imap_server *srv, const bool *parts)
{
	unsigned nparts = store_partitions(srv->store);

	for (unsigned p = 0; p < nparts; p++)
		if (parts == NULL || parts[p])
			read_partition(srv, p);
	for (struct imap_client *c = srv->clients; c != NULL; c = c->next)
		if (c->notify != NULL && notify_can_write(c))
			imap_notify_drained(c);
}

/* ------------------------------------------------------------------------------------- */
/* The command */

struct initial_status {
	struct imap_client *c;
	struct store_txn *t;
};

static int initial_cb(const struct store_mbox_info *mi, void *arg)
{
	struct initial_status *s = arg;
	struct imap_client *c = s->c;

	if (mi->attrs & (STORE_MBOX_NOSELECT | STORE_MBOX_NONEXISTENT))
		return 0;
	if (c->view != NULL && mi->id == c->view->mbox)
		return 0;
	if (events_for(c, s->t, mi->name, mi->name_len) & IMAP_NE_MESSAGE)
		write_status(c, s->t, mi->id, mi->name, mi->name_len);
	return 0;
}

static bool watched(const struct imap_notify *n, uint64_t mbox)
{
	for (size_t i = 0; i < n->nwatch; i++)
		if (n->watch[i].mbox == mbox)
			return true;
	return false;
}

/* The MAILBOXES names of other users' (and the shared) namespace that c may see now, as
   watches: their owners' partitions are read for them too. SUBTREE, SUBSCRIBED and the
   others stay the user's own mailboxes. */
static void watches_find(struct imap_client *c, struct imap_notify *n)
{
	for (size_t i = 0; i < n->ngroups; i++) {
		const struct notify_group *g = &n->groups[i];

		for (size_t j = 0; g->filter == IMAP_NF_MAILBOXES && j < g->nnames; j++) {
			struct imap_ns_box b = { 0 };
			struct notify_watch *w;
			unsigned ev = 0;
			bool named = false;

			if (!imap_ns_reserved(c, g->names[j]))
				continue;
			if (imap_ns_find(c, g->names[j], &b) != 0 || b.own || b.mbox == 0 ||
			    watched(n, b.mbox)) {
				imap_ns_box_release(&b);
				continue; /* none, one it may not see ('l'), or named before */
			}
			/* the first group naming it decides (RFC 5465 6) */
			for (size_t k = 0; k <= i && !named; k++) {
				const struct notify_group *gk = &n->groups[k];

				named = (gk->filter == IMAP_NF_MAILBOXES ||
					 gk->filter == IMAP_NF_SUBTREE) &&
					group_matches(c, NULL, gk, g->names[j],
						      strlen(g->names[j]));
				ev = named ? gk->events : 0;
			}
			n->watch = xreallocarray(n->watch, n->nwatch + 1, sizeof(*n->watch));
			w = &n->watch[n->nwatch++];
			w->mbox = b.mbox;
			w->part = b.part;
			w->name = g->names[j];
			w->events = ev;
			imap_ns_box_release(&b);
		}
	}
}

/* The spec's groups as c's: names converted (NULL and the BAD text on a bad one). */
static struct imap_notify *notify_from_spec(struct imap_client *c,
					    const struct imap_notify_spec *sp, const char **why_r)
{
	struct imap_notify *n = xcalloc(1, sizeof(*n));
	struct imap_client tmp = { 0 };

	n->selected = sp->selected;
	n->ngroups = sp->ngroups;
	*why_r = NULL;
	for (size_t i = 0; i < sp->ngroups && *why_r == NULL; i++) {
		const struct imap_notify_group_spec *gs = &sp->groups[i];
		struct notify_group *g = &n->groups[i];

		g->filter = gs->filter;
		g->events = gs->events;
		g->names = gs->nnames > 0 ? xcalloc(gs->nnames, sizeof(*g->names)) : NULL;
		for (size_t j = 0; j < gs->nnames && *why_r == NULL; j++) {
			const char *why = NULL;

			if ((g->names[j] = imap_mailbox_name(c, gs->names[j]->s, gs->names[j]->len,
							     &why)) == NULL)
				*why_r = why != NULL ? why : "Bad mailbox name";
			else
				g->nnames++;
		}
		if (gs->fetch == NULL || *why_r != NULL)
			continue;
		n->fetch = imap_fetch_new();
		if (imap_fetch_parse(n->fetch, gs->fetch) < 0)
			*why_r = "Bad MessageNew fetch attributes";
		else if (!imap_fetch_in_memory(n->fetch))
			*why_r =
				"MessageNew fetch attributes: no message text, header fields only "
				"(BODY.PEEK[HEADER.FIELDS (...)])";
	}
	if (*why_r == NULL) {
		watches_find(c, n);
		return n;
	}
	tmp.notify = n;
	imap_notify_free(&tmp);
	return NULL;
}

bool cmd_notify(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct imap_notify_spec *sp = xcalloc(1, sizeof(*sp));
	struct imap_notify *n = NULL;
	const char *why;
	bool status;
	int rc;

	rc = imap_notify_parse(cmd->args, cmd->args + cmd->nargs, sp, &why);
	if (rc == IMAP_NOTIFY_OK && !sp->none)
		n = notify_from_spec(c, sp, &why);
	status = sp->status;
	free(sp);
	if (rc == IMAP_NOTIFY_BADEVENT)
		return imap_cmd_no(cmd, why);
	if (rc != IMAP_NOTIFY_OK || why != NULL)
		return imap_cmd_bad(cmd, why);
	imap_notify_free(c); /* NOTIFY SET replaces what was set before; NONE ends it */
	if (n == NULL)
		return imap_cmd_ok(cmd, "NOTIFY completed");
	c->notify = n;
	position_take(c->srv, c->part);
	for (size_t i = 0; i < n->nwatch; i++)
		position_take(c->srv, n->watch[i].part);
	if (status) { /* RFC 5465 3.1: STATUS of each mailbox of the groups, before the OK */
		struct store_txn *t = NULL;
		struct initial_status s = { c, NULL };

		if (store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t) == 0) {
			s.t = t;
			(void)store_mbox_list(t, c->user_id, "*", false, initial_cb, &s);
			store_txn_abort(&t);
		}
		for (size_t i = 0; i < n->nwatch; i++)
			if ((n->watch[i].events & IMAP_NE_MESSAGE) &&
			    (c->view == NULL || c->view->mbox != n->watch[i].mbox))
				write_watched(c, NULL, n->watch[i].mbox, n->watch[i].part,
					      n->watch[i].name);
	}
	return imap_cmd_ok(cmd, "NOTIFY completed");
}

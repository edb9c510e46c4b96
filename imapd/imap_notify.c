/* imap_notify.c — owns the NOTIFY command's syntax and rules (RFC 5465 section 8): SET
 * [STATUS] event groups, or NONE, into a spec whose strings point into the arguments. */
#include <string.h>

#include "imapd/imap_notify.h"

static const struct {
	const char *name;
	unsigned bit;
	bool supported;
} events[] = {
	{ "MessageNew", IMAP_NE_NEW, true },
	{ "MessageExpunge", IMAP_NE_EXPUNGE, true },
	{ "FlagChange", IMAP_NE_FLAG, true },
	{ "AnnotationChange", IMAP_NE_ANNOTATION, false }, /* no per-message annotations */
	{ "MailboxName", IMAP_NE_NAME, true },
	{ "SubscriptionChange", IMAP_NE_SUBSCRIPTION, true },
	{ "MailboxMetadataChange", IMAP_NE_MBOX_METADATA, true },
	{ "ServerMetadataChange", IMAP_NE_SERVER_METADATA, true },
};
#define NEVENTS (sizeof(events) / sizeof(events[0]))

static const struct {
	const char *name;
	enum imap_notify_filter f;
} filters[] = {
	{ "SELECTED", IMAP_NF_SELECTED },     { "SELECTED-DELAYED", IMAP_NF_SELECTED_DELAYED },
	{ "INBOXES", IMAP_NF_INBOXES },       { "PERSONAL", IMAP_NF_PERSONAL },
	{ "SUBSCRIBED", IMAP_NF_SUBSCRIBED }, { "SUBTREE", IMAP_NF_SUBTREE },
	{ "MAILBOXES", IMAP_NF_MAILBOXES },
};
#define NFILTERS (sizeof(filters) / sizeof(filters[0]))

/* A mailbox argument: an astring holding no NUL (a literal may). */
static bool mailbox_ok(const struct imap_arg *a)
{
	return imap_arg_is_astring(a) && memchr(a->s, '\0', a->len) == NULL;
}

/* one-or-more-mailbox: a mailbox, or a non-empty list of them. */
static const char *parse_names(const struct imap_arg *a, struct imap_notify_group_spec *g)
{
	const struct imap_arg *first = a, *end = a + 1;

	if (a->type == IMAP_ARG_LIST) {
		if (a->n == 0)
			return "Empty mailbox list";
		first = a + 1;
		end = a + 1 + a->span;
	}
	for (const struct imap_arg *m = first; m < end; m = imap_arg_next(m)) {
		if (!mailbox_ok(m))
			return "Expected a mailbox name";
		if (g->nnames >= IMAP_NOTIFY_NAMES_MAX)
			return "Too many mailboxes in one event group";
		g->names[g->nnames++] = m;
	}
	return NULL;
}

/* events: "NONE" or a list of events, MessageNew maybe followed by its attribute list.
   *unsupported_r: an event-ext or one not built was given. */
static const char *parse_events(const struct imap_arg *a, struct imap_notify_group_spec *g,
				bool *unsupported_r)
{
	bool selected = g->filter == IMAP_NF_SELECTED || g->filter == IMAP_NF_SELECTED_DELAYED;

	if (imap_arg_atom_is(a, "NONE"))
		return NULL;
	if (a->type != IMAP_ARG_LIST || a->n == 0)
		return "Expected a list of events or NONE";
	for (const struct imap_arg *m = a + 1; m <= a + a->span; m = imap_arg_next(m)) {
		const struct imap_arg *next = imap_arg_next(m);
		size_t i;

		if (m->type != IMAP_ARG_ATOM)
			return "Expected an event name";
		for (i = 0; i < NEVENTS; i++)
			if (imap_arg_atom_is(m, events[i].name))
				break;
		if (i < NEVENTS && events[i].supported)
			g->events |= events[i].bit;
		else
			*unsupported_r = true;
		if (next <= a + a->span && next->type == IMAP_ARG_LIST) {
			if (i == NEVENTS || events[i].bit != IMAP_NE_NEW)
				return "Only MessageNew takes a list";
			if (!selected)
				return "MessageNew attributes are for the selected mailbox only";
			if (next->n == 0)
				return "Empty MessageNew attribute list";
			g->fetch = next;
			m = next; /* the attributes are not events */
		}
	}
	/* RFC 5465 5.3. MessageNew alone is taken: the RFC's own example (3.1) gives it so */
	if ((g->events & IMAP_NE_FLAG) &&
	    (g->events & (IMAP_NE_NEW | IMAP_NE_EXPUNGE)) != (IMAP_NE_NEW | IMAP_NE_EXPUNGE))
		return "FlagChange needs MessageNew and MessageExpunge";
	return NULL;
}

/* event-group: "(" filter-mailboxes SP events ")". */
static const char *parse_group(const struct imap_arg *a, struct imap_notify_group_spec *g,
			       bool *unsupported_r)
{
	const struct imap_arg *m, *end;
	size_t i;
	const char *why;

	if (a->type != IMAP_ARG_LIST || a->n < 2)
		return "Expected an event group: (filter events)";
	m = a + 1;
	end = a + 1 + a->span;
	for (i = 0; i < NFILTERS; i++)
		if (imap_arg_atom_is(m, filters[i].name))
			break;
	if (i == NFILTERS)
		return "Unknown mailbox filter";
	g->filter = filters[i].f;
	m = imap_arg_next(m);
	if (g->filter == IMAP_NF_SUBTREE || g->filter == IMAP_NF_MAILBOXES) {
		if (m >= end)
			return "Expected mailboxes after SUBTREE or MAILBOXES";
		if ((why = parse_names(m, g)) != NULL)
			return why;
		m = imap_arg_next(m);
	}
	if (m >= end || imap_arg_next(m) != end)
		return "Expected one events list after the filter";
	return parse_events(m, g, unsupported_r);
}

int imap_notify_parse(const struct imap_arg *a, const struct imap_arg *end,
		      struct imap_notify_spec *s, const char **why_r)
{
	bool unsupported = false;

	memset(s, 0, sizeof(*s));
	s->selected = -1;
	*why_r = "Expected NOTIFY SET or NOTIFY NONE";
	if (a >= end)
		return IMAP_NOTIFY_BAD;
	if (imap_arg_atom_is(a, "NONE")) {
		s->none = true;
		if (imap_arg_next(a) != end) {
			*why_r = "NOTIFY NONE takes no arguments";
			return IMAP_NOTIFY_BAD;
		}
		*why_r = NULL;
		return IMAP_NOTIFY_OK;
	}
	if (!imap_arg_atom_is(a, "SET"))
		return IMAP_NOTIFY_BAD;
	a = imap_arg_next(a);
	if (a < end && imap_arg_atom_is(a, "STATUS")) {
		s->status = true;
		a = imap_arg_next(a);
	}
	if (a >= end) {
		*why_r = "Expected one event group or more";
		return IMAP_NOTIFY_BAD;
	}
	for (; a < end; a = imap_arg_next(a)) {
		struct imap_notify_group_spec *g;

		if (s->ngroups >= IMAP_NOTIFY_GROUPS_MAX) {
			*why_r = "Too many event groups";
			return IMAP_NOTIFY_BAD;
		}
		g = &s->groups[s->ngroups++];
		if ((*why_r = parse_group(a, g, &unsupported)) != NULL)
			return IMAP_NOTIFY_BAD;
		if (g->filter == IMAP_NF_SELECTED || g->filter == IMAP_NF_SELECTED_DELAYED) {
			if (s->selected >= 0) {
				*why_r = "SELECTED or SELECTED-DELAYED given twice";
				return IMAP_NOTIFY_BAD;
			}
			s->selected = (int)(s->ngroups - 1);
		}
	}
	*why_r = NULL;
	if (unsupported) {
		*why_r = IMAP_NOTIFY_BADEVENT_CODE " Event not supported";
		return IMAP_NOTIFY_BADEVENT;
	}
	return IMAP_NOTIFY_OK;
}

/* imap_notify.h — the syntax of NOTIFY (RFC 5465 section 8) and its rules, over a parsed
 * command's arguments (imap_parser.h): no session and no store, so the unit tests and the fuzz
 * target run it alone. cmd_notify.c turns the result into a session's event groups (mailbox
 * names converted, MessageNew's fetch attributes parsed by imap_fetch). */
#ifndef HERON_IMAP_NOTIFY_H
#define HERON_IMAP_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "imapd/imap_parser.h"

#define IMAP_NOTIFY_GROUPS_MAX 32 /* event groups in one NOTIFY SET */
#define IMAP_NOTIFY_NAMES_MAX 64  /* mailboxes named in one group */

enum imap_notify_filter {
	IMAP_NF_SELECTED,
	IMAP_NF_SELECTED_DELAYED,
	IMAP_NF_INBOXES,
	IMAP_NF_PERSONAL,
	IMAP_NF_SUBSCRIBED,
	IMAP_NF_SUBTREE,
	IMAP_NF_MAILBOXES,
};

enum imap_notify_event {
	IMAP_NE_NEW = 1u << 0,
	IMAP_NE_EXPUNGE = 1u << 1,
	IMAP_NE_FLAG = 1u << 2,
	IMAP_NE_ANNOTATION = 1u << 3, /* recognized, not supported: BADEVENT */
	IMAP_NE_NAME = 1u << 4,
	IMAP_NE_SUBSCRIPTION = 1u << 5,
	IMAP_NE_MBOX_METADATA = 1u << 6,
	IMAP_NE_SERVER_METADATA = 1u << 7,
};
#define IMAP_NE_MESSAGE (IMAP_NE_NEW | IMAP_NE_EXPUNGE | IMAP_NE_FLAG | IMAP_NE_ANNOTATION)

struct imap_notify_group_spec {
	enum imap_notify_filter filter;
	unsigned events; /* the supported ones given (enum imap_notify_event); 0: NONE */
	const struct imap_arg *names[IMAP_NOTIFY_NAMES_MAX]; /* SUBTREE, MAILBOXES: astrings */
	size_t nnames;
	const struct imap_arg *fetch; /* MessageNew's attribute list (selected only), or NULL */
};

struct imap_notify_spec {
	bool none;   /* NOTIFY NONE */
	bool status; /* NOTIFY SET STATUS */
	struct imap_notify_group_spec groups[IMAP_NOTIFY_GROUPS_MAX];
	size_t ngroups;
	int selected; /* index of the SELECTED or SELECTED-DELAYED group, or -1 */
};

enum {
	IMAP_NOTIFY_OK = 0,
	IMAP_NOTIFY_BAD = -1,      /* syntax or a rule of the RFC: tagged BAD, *why_r */
	IMAP_NOTIFY_BADEVENT = -2, /* an event not supported: NO with IMAP_NOTIFY_BADEVENT */
};

/* The response code of a NO for an event not supported, listing those that are. */
#define IMAP_NOTIFY_BADEVENT_CODE                                                         \
	"[BADEVENT (MessageNew MessageExpunge FlagChange MailboxName SubscriptionChange " \
	"MailboxMetadataChange ServerMetadataChange)]"

/* The arguments [args, end) after the command name into *s (pointers into the arguments).
   Rules checked: one SELECTED or SELECTED-DELAYED group at most; mailboxes after SUBTREE and
   MAILBOXES only; MessageNew's attributes only for the selected mailbox; FlagChange needs
   MessageNew and MessageExpunge (RFC 5465 5.3). A BAD comes before a BADEVENT. */
int imap_notify_parse(const struct imap_arg *args, const struct imap_arg *end,
		      struct imap_notify_spec *s, const char **why_r);

#endif

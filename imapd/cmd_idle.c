/* cmd_idle.c — owns IDLE (RFC 2177): the session waits for "DONE" while changes committed by
 * any process (mtad deliveries, other sessions) are pushed as they happen. One store watcher
 * per worker wakes every idle session of a changed partition (imap_server_changed); no
 * polling per connection; a session whose output is full when a change comes is marked and
 * synced once it drains (IMAP_CF_IDLE_MISSED; it waited for the next change before, #23).
 * The continuation comes first, then what changed since the last command: a client counts
 * an EXISTS as news to leave IDLE for only once it is idling (one that got it before the
 * "+" waited for its own timer, 2 s in mailload's probe). An idler with another user's
 * mailbox selected reads its rights again at each wake-up of that mailbox's partition (an
 * ACL change commits there, so it wakes it too): what a command would be told next
 * (imap_ns_recheck: read-only with FLAGS again, or * BYE [NOPERM] without 'r') is told
 * while it idles, before any of the mailbox's new contents; so is a NOTIFY session between
 * two commands. One read txn per such session and wake-up, as the view's own sync. */
#include "imapd/imapd.h"

bool cmd_idle(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;

	if (c->flags & IMAP_CF_IDLE) { /* resumed while idling: still waiting for DONE */
		if ((c->flags & IMAP_CF_IDLE_MISSED) && c->view != NULL) { /* changed while full */
			c->flags &= ~IMAP_CF_IDLE_MISSED;
			imap_view_sync(c, true);
		}
		return false;
	}
	if (cmd->nargs != 0)
		return imap_cmd_bad(cmd, "IDLE takes no arguments");
	c->flags |= IMAP_CF_IDLE;
	imap_printf(c, "+ idling\r\n");
	if (c->view != NULL)
		imap_view_sync(c, true);
	return false;
}

void imap_idle_done(struct imap_client *c, bool ok)
{
	c->flags &= ~(IMAP_CF_IDLE | IMAP_CF_IDLE_MISSED);
	if (ok)
		imap_cmd_ok(&c->cmd, "IDLE terminated");
	else
		imap_cmd_bad(&c->cmd, "Expected DONE");
}

void imap_server_changed(struct imap_server *srv, const bool *parts)
{
	imap_notify_changed(srv, parts); /* first: NOTIFY's own sync of the selected mailbox */
	for (struct imap_client *c = srv->clients; c != NULL; c = c->next) {
		bool idle = (c->flags & IMAP_CF_IDLE) != 0;

		if (c->view == NULL || (parts != NULL && !parts[c->view->part]) ||
		    (c->flags & (IMAP_CF_CLOSING | IMAP_CF_DEFUNCT)) ||
		    (!idle && !imap_notify_listening(c)))
			continue;
		/* the rights first: nothing more of a mailbox it may no longer read (a NOTIFY
		   session between commands is told too: it may be written to at any time); on
		   after that only an idler not closed by * BYE [NOPERM] (NOTIFY syncs itself) */
		if (imap_ns_recheck(c, false) || !idle)
			continue;
		if (imap_out_full(c)) /* cmd_idle syncs when the output drains */
			c->flags |= IMAP_CF_IDLE_MISSED;
		else
			imap_view_sync(c, true);
	}
}

/* imap_commit.c — owns a command's write through the worker's group committer (store_gc):
 * the write is queued with the other sessions' and the command is resumed after the commit,
 * so nothing is acknowledged before it is durable and the sessions of a worker share index
 * fsyncs. The commit runs in the committer's thread; a client that leaves meanwhile stays
 * allocated (defunct) until its write is back, then is freed (nothing was said OK). */
#include <stdlib.h>

#include "common/log.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct imap_commit {
	struct imap_client *c; /* stays allocated until the write is back (client_free) */
	void *arg;
	void (*arg_free)(void *arg);
	struct store_blob *blob; /* freed after the commit */
	int rc;
	bool pending;
};

static void commit_free(struct imap_commit *cm)
{
	if (cm->arg_free != NULL)
		cm->arg_free(cm->arg);
	store_blob_free(&cm->blob);
	free(cm);
}

static void commit_ctx_free(struct imap_cmd *cmd)
{
	struct imap_commit *cm = cmd->ctx;

	cmd->ctx = NULL;
	if (cm == NULL)
		return;
	if (cm->pending) /* client_free waits for the write (ncommits), the command too */
		fatalx("imapd: a command ended while its write was in the group commit");
	commit_free(cm);
}

static void commit_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct imap_commit *cm = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	cm->pending = false;
	cm->rc = result;
	imap_client_commit_back(cm->c); /* frees cm with the command if the client left */
}

bool imap_client_commit_back(struct imap_client *c)
{
	if (--c->ncommits == 0 && (c->flags & IMAP_CF_DEFUNCT)) {
		imap_server_free_client(c);
		return false;
	}
	imap_client_resume(c);
	return true;
}

static void commit_start(struct imap_cmd *cmd, unsigned part, struct store_blob *blob,
			 int (*fn)(struct store_txn *t, void *arg), void *arg,
			 void (*arg_free)(void *arg), bool flags)
{
	struct imap_commit *cm = xcalloc(1, sizeof(*cm));

	cm->c = cmd->c;
	cm->arg = arg;
	cm->arg_free = arg_free;
	cm->blob = blob;
	cm->pending = true;
	cmd->ctx = cm;
	cmd->ctx_free = commit_ctx_free;
	cmd->c->ncommits++;
	/* fn runs in the group committer's thread while the loop serves the other clients; this
	   client waits for the result and stays allocated until then, even if its connection
	   ends (client_free defers), so fn may read its view and its command */
	if (flags)
		store_gc_submit_flags(cmd->c->srv->gc, part, fn, arg, commit_done, cm);
	else
		store_gc_submit(cmd->c->srv->gc, part, blob, fn, arg, commit_done, cm);
}

void imap_commit_start(struct imap_cmd *cmd, unsigned part, struct store_blob *blob,
		       int (*fn)(struct store_txn *t, void *arg), void *arg,
		       void (*arg_free)(void *arg))
{
	commit_start(cmd, part, blob, fn, arg, arg_free, false);
}

void imap_commit_start_flags(struct imap_cmd *cmd, unsigned part,
			     int (*fn)(struct store_txn *t, void *arg), void *arg,
			     void (*arg_free)(void *arg))
{
	commit_start(cmd, part, NULL, fn, arg, arg_free, true);
}

bool imap_commit_active(const struct imap_cmd *cmd)
{
	return cmd->ctx != NULL && cmd->ctx_free == commit_ctx_free;
}

void *imap_commit_result(struct imap_cmd *cmd, bool *pending_r, int *rc_r)
{
	struct imap_commit *cm = cmd->ctx;

	*pending_r = cm->pending;
	*rc_r = cm->rc;
	return cm->arg;
}

/* cmd_append.c — owns APPEND: the message literal was streamed into a blob by imap_client.c
 * while it arrived (never held in memory); here the blob is made durable and appended with
 * its flags and internal date, answered with APPENDUID (UIDPLUS) after the commit. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

/* "dd-Mon-yyyy hh:mm:ss +zzzz" (day may be space-padded): 0 and *t_r, or -1. */
static int parse_date_time(const char *s, size_t len, int64_t *t_r)
{
	static const char mon[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct tm tm = { 0 };
	char m[4];
	int d, y, hh, mm, ss, z, n = 0;
	char sign;
	const char *p;

	if (len != 26 && len != 25)
		return -1;
	if (sscanf(s, "%2d-%3c-%4d %2d:%2d:%2d %c%4d%n", &d, m, &y, &hh, &mm, &ss, &sign, &z,
		   &n) != 8 ||
	    (size_t)n != len || (sign != '+' && sign != '-'))
		return -1;
	m[3] = '\0';
	if ((p = strstr(mon, m)) == NULL || (p - mon) % 3 != 0 || d < 1 || d > 31 || y < 1900 ||
	    hh > 23 || mm > 59 || ss > 60 || z % 100 > 59 || z > 2359)
		return -1;
	tm.tm_mday = d;
	tm.tm_mon = (int)(p - mon) / 3;
	tm.tm_year = y - 1900;
	tm.tm_hour = hh;
	tm.tm_min = mm;
	tm.tm_sec = ss;
	*t_r = (int64_t)timegm(&tm) -
	       (sign == '+' ? 1 : -1) * (int64_t)((z / 100) * 3600 + (z % 100) * 60);
	return 0;
}

struct append_op {
	uint64_t mbox;
	const struct imap_arg *flags;
	int64_t date;
	struct store_blob *blob;    /* owned by the commit */
	uint32_t uid, uidvalidity;
	const char *why;
};

static int append_fn(struct store_txn *t, void *arg)
{
	struct append_op *ao = arg;
	struct store_status st;
	unsigned flags = 0;
	uint64_t kw = 0;
	int rc;

	if (ao->flags != NULL &&
	    imap_flags_parse(ao->flags, t, ao->mbox, true, &flags, &kw, &ao->why) < 0)
		return STORE_EINVAL;
	if ((rc = store_msg_append(t, ao->mbox, ao->blob, flags, kw, ao->date, &ao->uid)) != 0)
		return rc;
	if (store_mbox_status(t, ao->mbox, &st) == 0)
		ao->uidvalidity = st.uidvalidity;
	return 0;
}

/* The arguments between the mailbox and the literal: [(flags)] [date-time]. NULL or the
   BAD text. */
static const char *append_parse(struct imap_cmd *cmd, size_t argc, struct append_op *ao)
{
	const struct imap_arg *mb = imap_cmd_arg(cmd, 0), *msg = imap_cmd_arg(cmd, argc - 1);
	static const char usage[] = "Expected: APPEND mailbox [(flags)] [date-time] literal";

	if (argc < 2 || argc > 4 || !imap_arg_is_astring(mb) || msg->type != IMAP_ARG_STREAMED)
		return usage;
	for (size_t i = 1; i + 1 < argc; i++) {
		const struct imap_arg *a = imap_cmd_arg(cmd, i);

		if (a->type == IMAP_ARG_LIST && ao->flags == NULL && i == 1)
			ao->flags = a;
		else if (a->type == IMAP_ARG_QUOTED && ao->date == 0) {
			if (parse_date_time(a->s, a->len, &ao->date) < 0)
				return "Invalid date-time";
		} else
			return usage;
	}
	return NULL;
}

/* The mailbox named by the client: 0, or a reply was sent (-1). */
static int append_mailbox(struct imap_cmd *cmd, struct append_op *ao)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *mb = imap_cmd_arg(cmd, 0);
	struct store_txn *t = NULL;
	const char *why;
	char *name;
	int rc;

	if ((name = imap_mailbox_name(c, mb->s, mb->len, &why)) == NULL) {
		imap_cmd_no(cmd, why);
		return -1;
	}
	rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t);
	if (rc == 0)
		rc = store_mbox_find(t, c->user_id, name, &ao->mbox);
	store_txn_abort(&t);
	free(name);
	if (rc == STORE_ENOMBOX)
		imap_cmd_no(cmd, "[TRYCREATE] No such mailbox");
	else if (rc != 0)
		imap_cmd_store_error(cmd, rc, "APPEND");
	return rc == 0 ? 0 : -1;
}

/* Resumed after the group commit: the reply, APPENDUID (UIDPLUS) when it succeeded. */
static bool append_finish(struct imap_cmd *cmd)
{
	bool pending;
	int rc;
	struct append_op *ao = imap_commit_result(cmd, &pending, &rc);

	if (pending)
		return false;
	if (rc != 0)
		return ao->why != NULL ? imap_cmd_bad(cmd, ao->why)
				       : imap_cmd_store_error(cmd, rc, "APPEND");
	return imap_cmd_reply(cmd, "OK", "[APPENDUID %u %u] APPEND completed", ao->uidvalidity,
			      ao->uid);
}

bool cmd_append(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct append_op *ao;
	struct store_blob *blob = c->append_blob;
	const char *why;
	int rc;

	if (cmd->ctx != NULL)
		return append_finish(cmd);
	c->append_blob = NULL;
	ao = xcalloc(1, sizeof(*ao));
	if ((why = append_parse(cmd, imap_cmd_argc(cmd), ao)) != NULL || blob == NULL) {
		store_blob_free(&blob);
		free(ao);
		return imap_cmd_bad(cmd, why != NULL ? why : "APPEND needs a message literal");
	}
	if (append_mailbox(cmd, ao) < 0) {
		store_blob_free(&blob);
		free(ao);
		return true;
	}
	rc = c->append_failed ? STORE_EIO : store_blob_finish(blob);
	if (rc != 0) {
		store_blob_free(&blob);
		free(ao);
		return imap_cmd_store_error(cmd, rc, "APPEND");
	}
	ao->blob = blob;
	imap_commit_start(cmd, STORE_ID_PART(ao->mbox), blob, append_fn, ao, free);
	return false;
}

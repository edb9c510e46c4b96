/* cmd_append.c — owns APPEND: the message literal was streamed into a blob by imap_client.c
 * while it arrived (never held in memory); here the blob is made durable and appended with
 * its flags and internal date, answered with APPENDUID (UIDPLUS) after the commit. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/str.h"
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
	struct store_blob *blob;
	const struct imap_arg *flags;
	int64_t date;
	uint32_t uid;
	const char *why;
};

static int append_fn(struct store_txn *t, void *arg)
{
	struct append_op *ao = arg;
	unsigned flags = 0;
	uint64_t kw = 0;

	if (ao->flags != NULL &&
	    imap_flags_parse(ao->flags, t, ao->mbox, true, &flags, &kw, &ao->why) < 0)
		return STORE_EINVAL;
	return store_msg_append(t, ao->mbox, ao->blob, flags, kw, ao->date, &ao->uid);
}

bool cmd_append(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	size_t argc = imap_cmd_argc(cmd);
	const struct imap_arg *mb = imap_cmd_arg(cmd, 0), *msg = imap_cmd_arg(cmd, argc - 1);
	struct append_op ao = { 0, c->append_blob, NULL, 0, 0, NULL };
	struct store_txn *t = NULL;
	struct store_status st;
	const char *why;
	char *name;
	int rc;

	c->append_blob = NULL;
	if (argc < 2 || argc > 4 || !imap_arg_is_astring(mb) || msg->type != IMAP_ARG_STREAMED ||
	    ao.blob == NULL) {
		store_blob_free(&ao.blob);
		return imap_cmd_bad(cmd, "Expected: APPEND mailbox [(flags)] [date-time] literal");
	}
	for (size_t i = 1; i + 1 < argc; i++) {
		const struct imap_arg *a = imap_cmd_arg(cmd, i);

		if (a->type == IMAP_ARG_LIST && ao.flags == NULL && i == 1) {
			ao.flags = a;
		} else if (a->type == IMAP_ARG_QUOTED && ao.date == 0) {
			if (parse_date_time(a->s, a->len, &ao.date) < 0) {
				store_blob_free(&ao.blob);
				return imap_cmd_bad(cmd, "Invalid date-time");
			}
		} else {
			store_blob_free(&ao.blob);
			return imap_cmd_bad(cmd, "Expected: APPEND mailbox [(flags)] [date-time] "
						 "literal");
		}
	}
	if ((name = imap_mailbox_name(mb->s, mb->len, &why)) == NULL) {
		store_blob_free(&ao.blob);
		return imap_cmd_no(cmd, why);
	}
	rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t);
	if (rc == 0)
		rc = store_mbox_find(t, c->user_id, name, &ao.mbox);
	store_txn_abort(&t);
	free(name);
	if (rc == STORE_ENOMBOX) {
		store_blob_free(&ao.blob);
		return imap_cmd_no(cmd, "[TRYCREATE] No such mailbox");
	}
	if (rc == 0 && c->append_failed)
		rc = STORE_EIO;
	if (rc == 0)
		rc = store_blob_finish(ao.blob);
	if (rc == 0)
		rc = store_write(c->srv->store, c->part, append_fn, &ao);
	store_blob_free(&ao.blob); /* after the commit: the file stays referenced */
	if (rc != 0) {
		if (ao.why != NULL)
			return imap_cmd_bad(cmd, ao.why);
		return imap_cmd_store_error(cmd, rc, "APPEND");
	}
	if ((rc = store_txn_begin(c->srv->store, c->part, STORE_TXN_READ, &t)) == 0) {
		rc = store_mbox_status(t, ao.mbox, &st);
		store_txn_abort(&t);
	}
	if (rc != 0)
		return imap_cmd_ok(cmd, "APPEND completed");
	return imap_cmd_reply(cmd, "OK", "[APPENDUID %u %u] APPEND completed", st.uidvalidity,
			      ao.uid);
}

/* store_peek.c — a test helper that reads what mtad wrote, through libstore:
 *   store_peek CONF inbox USER        one line per INBOX message: "uid blob size"
 *   store_peek CONF folder USER NAME  the same for the mailbox NAME
 *   store_peek CONF body USER UID     the message's bytes
 *   store_peek CONF queue             one line per queue entry: "id sender rcpt:state,... [held]"
 * Exits 1 with a message on stderr when the user or message does not exist. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "store/store.h"

static int die(const char *what, int rc)
{
	fprintf(stderr, "store_peek: %s: %s\n", what, store_strerror(rc));
	return 1;
}

static int open_inbox(struct store *st, const char *user, const char *name, unsigned *part,
		      struct store_txn **t, uint64_t *mbox)
{
	struct store_user u;
	int rc;

	if ((rc = store_user_locate(st, user, part)) != 0 ||
	    (rc = store_txn_begin(st, *part, STORE_TXN_READ, t)) != 0)
		return rc;
	if ((rc = store_user_get(*t, user, &u)) != 0 ||
	    (rc = store_mbox_find(*t, u.id, name, mbox)) != 0)
		store_txn_abort(t);
	return rc;
}

static int cmd_inbox(struct store *st, const char *user, const char *name, long want_uid)
{
	struct store_txn *t;
	struct store_iter *it;
	struct store_msg m;
	unsigned part;
	uint64_t mbox;
	int rc = open_inbox(st, user, name, &part, &t, &mbox);

	if (rc != 0)
		return die(user, rc);
	if ((rc = store_msg_iter(t, mbox, 1, UINT32_MAX, 0, &it)) != 0)
		return die("iter", rc);
	while (store_iter_next(it, &m) == 1) {
		if (want_uid < 0) {
			printf("%u %016" PRIx64 " %" PRIu64 "\n", m.uid, m.blob, m.size);
			continue;
		}
		if (m.uid != (uint32_t)want_uid)
			continue;
		int fd;
		uint64_t size;
		char buf[65536];
		ssize_t n;
		if ((rc = store_blob_open(st, part, m.blob, &fd, &size)) != 0)
			return die("blob", rc);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)n, stdout);
		close(fd);
	}
	store_iter_free(&it);
	store_txn_abort(&t);
	return 0;
}

static int queue_cb(const struct store_queue_msg *qm, void *arg)
{
	printf("%016" PRIx64 " <%s>", qm->id, qm->sender);
	for (size_t i = 0; i < qm->nrcpt; i++)
		printf(" %s:%d:%u", qm->rcpt[i].addr, (int)qm->rcpt[i].state,
		       qm->rcpt[i].attempts);
	printf("%s\n", qm->held ? " held" : "");
	return 0;
}

int main(int argc, char **argv)
{
	struct conf *c;
	struct store_opts o;
	struct store *st;
	char *err;
	int rc;

	if (argc < 3) {
		fprintf(stderr,
			"usage: store_peek CONF inbox USER | folder USER NAME | body USER UID | queue\n");
		return 2;
	}
	if (conf_load(argv[1], &c, &err) < 0) {
		fprintf(stderr, "store_peek: %s\n", err);
		return 1;
	}
	store_opts_from_conf(c, &o);
	o.create = true;
	if ((rc = store_open(&o, &st)) != 0)
		return die("open", rc);
	if (strcmp(argv[2], "inbox") == 0 && argc == 4)
		rc = cmd_inbox(st, argv[3], "INBOX", -1);
	else if (strcmp(argv[2], "folder") == 0 && argc == 5)
		rc = cmd_inbox(st, argv[3], argv[4], -1);
	else if (strcmp(argv[2], "body") == 0 && argc == 5)
		rc = cmd_inbox(st, argv[3], "INBOX", atol(argv[4]));
	else if (strcmp(argv[2], "queue") == 0)
		rc = store_queue_list(st, queue_cb, NULL);
	else
		rc = 2;
	store_close(&st);
	conf_free(&c);
	return rc;
}

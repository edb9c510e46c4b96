/* imap_deliver.c — test helper: delivers a message file into the store the way mtad does
 * (store_deliver from another process), so the end-to-end tests can watch it appear in IMAP
 * sessions. Usage: imap_deliver STORE_DIR PARTITIONS USER [MAILBOX] < message. With
 * --tombstone USER HOST instead it leaves the tombstone `mailctl user move --finish` leaves
 * ("USER moved to HOST", store_tomb_add in partition 0), for the tests of users of other
 * hosts without two hosts and a directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

struct tomb_arg {
	const char *user, *host;
};

static int tomb_fn(struct store_txn *t, void *arg)
{
	const struct tomb_arg *a = arg;

	return store_tomb_add(t, a->user, a->host, (int64_t)time(NULL));
}

int main(int argc, char **argv)
{
	struct store_opts o = { 0 };
	struct store *st;
	struct store_rcpt r = { 0 };
	int rc;

	if (argc < 4) {
		fprintf(stderr, "usage: imap_deliver STORE_DIR PARTITIONS USER [MAILBOX] < msg\n");
		return 2;
	}
	o.path = argv[1];
	o.partitions = (unsigned)atoi(argv[2]);
	o.map_size = 16 << 20;
	o.map_size_max = 1 << 30;
	o.create = true;
	o.fts = true; /* as mtad with the default [store] fts */
	if ((rc = store_open(&o, &st)) != 0) {
		fprintf(stderr, "store_open: %s\n", store_strerror(rc));
		return 1;
	}
	if (strcmp(argv[3], "--tombstone") == 0) {
		struct tomb_arg a = { argc > 5 ? argv[4] : "", argc > 5 ? argv[5] : "" };

		rc = store_write(st, 0, tomb_fn, &a);
		if (rc != 0)
			fprintf(stderr, "store_tomb_add: %s\n", store_strerror(rc));
		store_close(&st);
		return rc == 0 ? 0 : 1;
	}
	r.user = argv[3];
	r.mailbox = argc > 4 ? argv[4] : NULL;
	rc = store_deliver(st, 0, 0, &r, 1);
	if (rc == 0)
		printf("%u\n", r.uid);
	else
		fprintf(stderr, "store_deliver: %s\n", store_strerror(r.result));
	store_close(&st);
	return rc == 0 ? 0 : 1;
}

/* imap_deliver.c — test helper: delivers a message file into the store the way mtad does
 * (store_deliver from another process), so the end-to-end tests can watch it appear in IMAP
 * sessions. Usage: imap_deliver STORE_DIR PARTITIONS USER [MAILBOX] < message */
#include <stdio.h>
#include <stdlib.h>

#include "store/store.h"

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

/* mailctl_plant.c — test helper of test_mailctl.py: does to a store what mailctl must never
 * do, so the test can check that mailctl notices or copes:
 *
 *   mailctl_plant CONF counter USER MAILBOX   adds 5 to the mailbox's message counter and
 *                                             1000 to the user's byte usage (index damage)
 *   mailctl_plant CONF enqueue SENDER RCPT... queues the message on stdin for relay (what
 *                                             mtad does) and prints the queue id in hex
 *   mailctl_plant CONF remember USER V|D KEY UNTIL  remembers KEY as the vacation (V) or
 *                                             duplicate (D) memory until UNTIL (Unix time,
 *                                             also one already past: what mtad does, late)
 *   mailctl_plant CONF memories USER          prints every memory "KIND HASH UNTIL" as
 *                                             stored, the expired ones too
 *
 * It reads store internals (store_private.h) on purpose: no public call corrupts a counter. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "store/store_private.h"
#include "store/store_sieve.h"

static int plant_counter(struct store *st, const char *user, const char *mailbox)
{
	struct store_txn *t;
	struct store_user u;
	struct mbox_rec r;
	struct user_rec ur;
	uint64_t mbox;
	unsigned part;

	if (store_user_locate(st, user, &part) != 0 ||
	    store_txn_begin(st, part, STORE_TXN_WRITE, &t) != 0)
		return 1;
	if (store_user_get(t, user, &u) != 0 || store_mbox_find(t, u.id, mailbox, &mbox) != 0 ||
	    mbox_rec_load(t, mbox, &r) != 0 || user_rec_load_id(t, u.id, &ur) != 0) {
		store_txn_abort(&t);
		return 1;
	}
	r.messages += 5;
	ur.used_bytes += 1000;
	if (mbox_rec_store(t, mbox, &r) != 0 || user_rec_store_id(t, &ur) != 0) {
		store_txn_abort(&t);
		return 1;
	}
	return store_txn_commit(&t) != 0;
}

static int plant_enqueue(struct store *st, const char *sender, char **rcpts, int n)
{
	struct store_queue_rcpt *r = calloc((size_t)n, sizeof(*r));
	struct store_queue_msg qm = { .sender = sender, .nrcpt = (size_t)n, .rcpt = r };
	struct store_blob *b;
	uint64_t id;
	int rc;

	for (int i = 0; i < n; i++)
		r[i].addr = rcpts[i];
	if ((rc = store_blob_from_fd(st, STORE_QUEUE_PART, STDIN_FILENO, &b)) == 0) {
		qm.size = store_blob_size(b);
		rc = store_queue_add(st, &qm, b, &id);
	}
	store_blob_free(&b);
	free(r);
	if (rc == 0)
		printf("%016" PRIx64 "\n", id);
	return rc != 0;
}

static int plant_remember(struct store *st, char **argv)
{
	struct store_txn *t;
	unsigned part;

	if ((argv[1][0] != 'V' && argv[1][0] != 'D') || argv[1][1] != '\0' ||
	    store_user_locate(st, argv[0], &part) != 0 ||
	    store_txn_begin(st, part, STORE_TXN_WRITE, &t) != 0)
		return 1;
	/* now = INT64_MIN: prunes nothing */
	if (store_sieve_remember(t, argv[0], (enum store_sieve_memory)argv[1][0], argv[2],
				 INT64_MIN, strtoll(argv[3], NULL, 10)) != 0) {
		store_txn_abort(&t);
		return 1;
	}
	return store_txn_commit(&t) != 0;
}

static int print_memory(enum store_sieve_memory kind, uint64_t hash, int64_t until, void *arg)
{
	(void)arg;
	printf("%c %016" PRIx64 " %" PRId64 "\n", (char)kind, hash, until);
	return 0;
}

static int plant_memories(struct store *st, const char *user)
{
	struct store_txn *t;
	unsigned part;
	int rc;

	if (store_user_locate(st, user, &part) != 0 ||
	    store_txn_begin(st, part, STORE_TXN_READ, &t) != 0)
		return 1;
	rc = store_sieve_memories(t, user, INT64_MIN, print_memory, NULL);
	store_txn_abort(&t);
	return rc != 0;
}

int main(int argc, char **argv)
{
	struct conf *c;
	struct store_opts o;
	struct store *st;
	char *err;
	int rc = 2;

	if (argc < 4 || conf_load(argv[1], &c, &err) < 0) {
		fprintf(stderr, "usage: mailctl_plant CONF counter USER MAILBOX | "
				"enqueue SENDER RCPT... | remember USER V|D KEY UNTIL | "
				"memories USER\n");
		return 2;
	}
	store_opts_from_conf(c, &o);
	if (store_open(&o, &st) != 0)
		return 2;
	if (strcmp(argv[2], "counter") == 0 && argc == 5)
		rc = plant_counter(st, argv[3], argv[4]);
	else if (strcmp(argv[2], "enqueue") == 0 && argc >= 5)
		rc = plant_enqueue(st, argv[3], argv + 4, argc - 4);
	else if (strcmp(argv[2], "remember") == 0 && argc == 7)
		rc = plant_remember(st, argv + 3);
	else if (strcmp(argv[2], "memories") == 0 && argc == 4)
		rc = plant_memories(st, argv[3]);
	store_close(&st);
	conf_free(&c);
	return rc;
}

/* init_store.h — `mailload init --heron-conf FILE`: Heron's fast path of mailbox
 * initialization, straight into the store, with the content of the protocol init. */
#ifndef HERON_MAILLOAD_INIT_STORE_H
#define HERON_MAILLOAD_INIT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "mailload/mailload.h"

/* The message of the initial set of user's folder fi (0 = INBOX), index idx, as the protocol
   init sends it (SMTP to INBOX, APPEND to the others): seq, date, sender and recipient. The
   addresses are written into from and to (each ML_INIT_ADDR bytes). */
#define ML_INIT_ADDR 128
void ml_init_spec(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		  struct ml_msg_spec *s, char *from, char *to);
/* Whether the protocol init stores the message \Seen (APPENDs to folders other than INBOX:
   7 in 10; mail delivered to INBOX is unseen). */
bool ml_init_seen(uint32_t fi, uint32_t idx);

/* Fills every mailbox of users 1..c->users in the store of the Heron configuration conf_path
   ([store] section), with jobs processes (0: one per core). Resumable: a user's folders,
   subscriptions and the missing messages (by index, as the protocol init) are added in one
   transaction per user, so a rerun completes what an interrupted one left. Safe while mtad
   and imapd run on the same store. Writes without fsync and syncs the store at the end
   (store_opts.nosync). Prints progress to stderr unless quiet. 0 or -1. */
int init_store_run(const struct ml_cfg *c, const char *conf_path, unsigned jobs, bool quiet);

#endif

/* init.h — the fast paths of mailbox initialization with the content of the protocol init:
 * `mailload init --stream`, a bulk stream a store loads itself (init_stream.c; Heron:
 * `mailctl import --bulk`), and `mailload init --maildir ROOT`, Maildir++ trees
 * (init_maildir.c); what they share and their job runner (init.c). */
#ifndef HERON_MAILLOAD_INIT_H
#define HERON_MAILLOAD_INIT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "mailload/mailload.h"

/* The message of the initial set of user's folder fi (0 = INBOX), index idx, as the protocol
   init sends it (SMTP to INBOX, APPEND to the others): seq, date, sender and recipient. The
   addresses are written into from and to (each ML_INIT_ADDR bytes). */
#define ML_INIT_ADDR 128
#define ML_INIT_MSG_MAX (64u << 20) /* the largest initial message rendered */
void ml_init_spec(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		  struct ml_msg_spec *s, char *from, char *to);
/* Whether the protocol init stores the message \Seen (APPENDs to folders other than INBOX:
   7 in 10; mail delivered to INBOX is unseen). */
bool ml_init_seen(uint32_t fi, uint32_t idx);

/* The message of ml_init_spec rendered into out (reset first, CRLF lines); returns its date
   (ms since the epoch, the INTERNALDATE the fast paths give it). */
int64_t ml_init_render(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		       struct ml_msg *m, struct buf *out);

/* Progress of one init job, in memory shared with the parent. */
struct ml_init_stats {
	uint64_t users, skipped, msgs, bytes, errors;
};
/* One job of a fast init: users 1 + k, 1 + k + jobs, ... of c; exit status 0 or 1. */
typedef int (*ml_init_job_fn)(const struct ml_cfg *c, void *arg, unsigned k, unsigned jobs,
			      struct ml_init_stats *stats);
/* Runs fn in jobs forked processes (0: one per core), prints progress (unless quiet) and the
   summary to stderr, where naming the destination. 0 or -1 (some job failed). */
int ml_init_jobs(const struct ml_cfg *c, unsigned jobs, bool quiet, const char *where,
		 ml_init_job_fn fn, void *arg);

/* Writes users 1 + slice, 1 + slice + nslices, ... of c (all: slice 0 of 1) as a bulk
   stream to stdout; with record, only the fill record (user1's MailloadFill folder), for
   when every slice is loaded. Prints progress to stderr unless quiet. 0 or -1. */
struct ml_init_stream {
	unsigned slice, nslices;
	bool record;
};
int init_stream_run(const struct ml_cfg *c, const struct ml_init_stream *o, bool quiet);

/* Fills every mailbox of users 1..c->users as Maildir++ under root (the home of userN
   is root/userN, mail in root/userN/Maildir), with jobs processes (0: one per core); see
   init_maildir.c for the layout. Files get root's owner and group. Resumable: users already in
   place are skipped. Prints progress to stderr unless quiet. 0 or -1. */
int init_maildir_run(const struct ml_cfg *c, const char *root, unsigned jobs, bool quiet);

#endif

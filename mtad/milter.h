/* milter.h — mtad's milter client: the [milter] lists of a worker, and the conversation
 * with each milter at the end of a message's data (after mtad's own checks, before the
 * reply), asynchronous on the worker's event loop. The bytes are milter_proto.h's. */
#ifndef HERON_MTAD_MILTER_H
#define HERON_MTAD_MILTER_H

#include <stdbool.h>

struct conf;
struct mtad;
struct milter_set;
struct smtp_session;
struct smtp_tx;

/* The milter lists of c ([milter] smtpd_milters, non_smtpd_milters, the defaults): 0 with
   *set_r (NULL when no milter is configured), or -1 with *error_r (malloc'd). */
int milter_set_load(const struct conf *c, struct milter_set **set_r, char **error_r);
void milter_set_free(struct milter_set **setp);
/* SIGHUP: c's lists replace m's for the transactions that end from now on (a bad list is
   warned about and the old one kept). Transactions talking to milters keep theirs. */
void milter_reload(struct mtad *m, const struct conf *c);

/* Whether the message of s's transaction goes through milters (SMTP and submission:
   smtpd_milters; LMTP: non_smtpd_milters). */
bool milter_wanted(const struct smtp_session *s);
/* The data of s's transaction ended without error (state ST_WAIT): the milters get the
   message; then the transaction is refused (4xx/5xx, their text), discarded (250, nothing
   kept), or, with their changes applied, goes on to deliver_commit. A milter that fails gets
   its default action. Never blocks, never answers before the milters finished. */
void milter_run(struct smtp_session *s);
/* The end of data once mtad's own checks let the message through (state ST_WAIT): the
   milters when milter_wanted(s) (milter_run), else deliver_commit at once. The one call for
   every end-of-data path. */
void milter_then_commit(struct smtp_session *s);
/* The transaction ends (smtp_tx_free): stops its milter conversation, if any. */
void milter_tx_free(struct smtp_tx *tx);

#endif

/* milter.h — mtad's milter client: the [milter] lists of a worker, and a conversation with
 * each milter of the list per SMTP session, asked at each envelope command (connect,
 * EHLO/HELO, MAIL, RCPT, DATA) before mtad answers it and at the end of a message's data
 * (after mtad's own checks, before the reply), asynchronous on the worker's event loop. The
 * bytes are milter_proto.h's. */
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
/* SIGHUP: c's lists replace m's for the sessions that start from now on (a bad list is
   warned about and the old one kept). Sessions talking to milters keep theirs. */
void milter_reload(struct mtad *m, const struct conf *c);

/* The envelope commands the milters are asked about. */
enum milter_cmd {
	MILTER_CONNECT, /* before the greeting */
	MILTER_HELO,    /* EHLO/HELO, s->helo set */
	MILTER_MAIL,    /* MAIL, s->tx made */
	MILTER_RCPT,    /* RCPT: addr, local */
	MILTER_DATA,    /* DATA, or the first BDAT */
};

/* The milters' answer to a command: refusal NULL lets it through, else it holds the SMTP
   reply lines to send (LF between them; milter_reply sends them). cont answers the client,
   then calls smtp_resume when resume is true. */
typedef void milter_cont(struct smtp_session *s, const char *refusal, bool resume);

/* Asks s's milters about cmd once mtad's own checks let it through (MILTER_CONNECT makes
   the conversation when s's listener has milters), then cont gets their answer: at once,
   with the caller's resume, when nobody is to be asked; else the session waits (state
   ST_WAIT) and cont(s, refusal, true) is called later from the loop. For MILTER_RCPT, addr
   is the recipient as given and local whether it is ours. A refusal at CONNECT or HELO stays
   in force for the session (milter_refused). */
void milter_ask(struct smtp_session *s, enum milter_cmd cmd, const char *addr, bool local,
		milter_cont *cont, bool resume);
/* A recipient mtad refused itself (reply why): the milters that asked for refused
   recipients (SMFIP_RCPT_REJ) are told, their answer not taken. false when nobody is to be
   told (cont is not called), true when cont(s, NULL, true) will be. */
bool milter_rcpt_refused(struct smtp_session *s, const char *addr, const char *why,
			 milter_cont *cont);
/* A refusal from CONNECT or HELO in force: true when it was sent as the reply to the
   command of s now being taken (every command but QUIT gets it). */
bool milter_refused(struct smtp_session *s);
/* Sends a refusal's reply lines, counted as one error; a 421 closes the session. */
void milter_reply(struct smtp_session *s, const char *refusal);

/* The data of s's transaction ended without error (state ST_WAIT): the milters get the
   message; then the transaction is refused (4xx/5xx, their text), discarded (250, nothing
   kept), or, with their changes applied, goes on to deliver_commit. A milter that fails gets
   its default action; a message a milter discarded at an envelope step is dropped (250)
   without asking. Never blocks, never answers before the milters finished. */
void milter_run(struct smtp_session *s);
/* The end of data once mtad's own checks let the message through (state ST_WAIT): the
   milters when the session has any (milter_run), else deliver_commit at once. The one call
   for every end-of-data path. */
void milter_then_commit(struct smtp_session *s);
/* The transaction ends (smtp_tx_free): the milters that saw it begin and not end are sent
   SMFIC_ABORT; what milters decided for it is forgotten. */
void milter_tx_free(struct smtp_tx *tx);
/* The session ends: SMFIC_QUIT to each milter, the connections closed. */
void milter_session_free(struct smtp_session *s);

#endif

/* sendmail.h — heron-sendmail's state, shared by its command line (sendmail.c), its SMTP
 * dialogue with mtad's local submission socket (sendmail_smtp.c) and the queue listing
 * (sendmail_mailq.c). */
#ifndef HERON_SENDMAIL_H
#define HERON_SENDMAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

#define SM_ADDR_MAX 320

struct sm {
	/* the command line */
	bool extract;    /* -t */
	bool dot_ok;     /* -i, -oi: a lone "." is a line of the message */
	bool verbose;    /* -v: the dialogue on stderr */
	bool smtp_stdio; /* -bs */
	bool newaliases; /* -bi, or called as newaliases: check [mtad] aliases */
	bool mailq;      /* -bp, or called as mailq: list the queue */
	const char *from, *fullname, *conf;
	char **rcpt; /* qualified addresses, in order */
	size_t nrcpt;
	bool bad_addr;
	/* from heron.conf and the system */
	char socket[108];
	char maildrop[4096]; /* [mtad] maildrop: where a message waits when mtad is down */
	char domain[256];
	char login[256];
	char *gecos;
	char sender[SM_ADDR_MAX + 1]; /* "" = the null sender */
	/* the message read so far */
	struct buf hdr;   /* the header block, CRLF, Bcc: removed */
	char *first_body; /* the line that ended the header block (as read), or NULL at EOF */
	size_t first_body_len;
	bool blank_sep; /* that line was the empty separator line */
	bool has_from, has_date, has_msgid;
};

/* Submits: connects, MAIL, every RCPT (any refused: nothing is sent, the refusals are
   printed), DATA with added + the header + the rest of stdin. A sysexits.h code. */
int sm_submit(struct sm *sm, const struct buf *added);
/* -bs: stdin and stdout are the SMTP client's; relayed to the socket both ways. */
int sm_smtp_stdio(struct sm *sm);
/* -bp (mailq): the queue from mtad's control socket, printed; a sysexits.h code. */
int sm_mailq(const char *conf_path);

#endif

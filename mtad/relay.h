/* relay.h — types shared by the queue runner (queue_runner.c), the outbound SMTP client
 * (smtp_client.c) and the bounce writer (bounce.c). */
#ifndef HERON_MTAD_RELAY_H
#define HERON_MTAD_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "mtad/mtad.h"
#include "store/store.h"

struct qdest;
struct smtp_client;

/* A leased queue entry; strings are our own copies. */
struct qjob {
	struct queue_runner *qr;
	struct store_queue_msg qm;
	char *sender, *envid, **own;       /* the copies qm's strings point to */
	size_t outstanding;                /* works not finished yet */
	int *result;                       /* per recipient: enum store_rcpt_state after now */
	char **error;                      /* per recipient: last reply, malloc'd or NULL */
	char **remote;                     /* per recipient: the relay that answered */
	bool *delayed;                     /* per recipient: in this run's delay notice */
	bool delay_noticed;                /* a delay notice went out for this message before */
	TAILQ_ENTRY(qjob) entry;
};

/* The recipients of one job that go to one destination. */
struct qwork {
	struct qjob *job;
	struct qdest *dest;
	size_t *idx;                       /* recipient indexes into job->qm.rcpt */
	size_t n;
	TAILQ_ENTRY(qwork) entry;
};
TAILQ_HEAD(qwork_list, qwork);

/* A next hop (host:port) with its connections. */
struct qdest {
	char *host, *port;
	char key[MTAD_SHARED_KEY_MAX];     /* "host:port": its entry in the shared table */
	unsigned active;                   /* connections open (busy or idle) in this worker; each
					      holds a slot of the shared table */
	struct qwork_list waiting;
	TAILQ_HEAD(, smtp_client) idle;
	TAILQ_ENTRY(qdest) entry;
};

struct queue_runner {
	struct mtad *m;
	struct event *tick;
	SSL_CTX *tls;                      /* client context: TLS when offered */
	TAILQ_HEAD(, qjob) jobs;
	TAILQ_HEAD(, qdest) dests;
	size_t njobs;
	unsigned concurrency;
	int64_t timeout_ms;
	bool stopping;
};

/* smtp_client.c: runs w on a connection of its destination (an idle one, or a new one). When
   the work is done each recipient's outcome is in job->result/error and queue_work_done(w)
   is called. */
void smtp_client_run(struct queue_runner *qr, struct qwork *w);
/* Closes the idle connections of d (QUIT). */
void smtp_client_close_idle(struct qdest *d);

/* queue_runner.c */
/* Records one recipient's outcome: code is the SMTP reply code (0: no reply, connection
   trouble), text the reply or reason. */
void queue_rcpt_outcome(struct qwork *w, size_t k, int code, const char *text,
			const char *relay);
void queue_work_done(struct qwork *w);
/* The enhanced status code at the start of text, else one from the reply code ("5.0.0"). */
const char *queue_dsn_of(const char *text, int code, char *buf, size_t size);
/* A connection to d closed; starts waiting works. */
void queue_dest_released(struct queue_runner *qr, struct qdest *d);

/* A deferred recipient's stored last error starts with this once its message had its delay
   notice (the queue keeps no other per-message mark), so the notice goes out once. */
#define QUEUE_DELAY_MARK "[delay notice sent] "

/* bounce.c: writes a DSN (RFC 3464) and queues it to the sender; never for the null sender.
   DSN_FAILED: for the recipients of job marked failed that want it (NOTIFY); DSN_DELAYED:
   for those in job->delayed (still being retried). 0 (also when nobody gets one) or a
   store_err. */
enum dsn_kind { DSN_FAILED, DSN_DELAYED };
int bounce_send(struct queue_runner *qr, const struct qjob *job, enum dsn_kind kind);

#endif

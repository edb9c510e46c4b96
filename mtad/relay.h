/* relay.h — types shared by the queue runner (queue_runner.c), the outbound SMTP client
 * (smtp_client.c) and the bounce writer (bounce.c). */
#ifndef HERON_MTAD_RELAY_H
#define HERON_MTAD_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/buf.h"
#include "dns/dns.h"
#include "mtad/mtad.h"
#include "mtad/mta_sts.h"
#include "mtad/mx.h"
#include "mtad/tls_policy.h"
#include "store/store.h"

struct qdest;
struct smtp_client;
struct qwork;
TAILQ_HEAD(qwork_list, qwork);

/* A leased queue entry; strings are our own copies. */
struct qjob {
	struct queue_runner *qr;
	struct store_queue_msg qm;
	char *sender, *envid, **own; /* the copies qm's strings point to */
	size_t outstanding;          /* works not finished yet */
	int *result;                 /* per recipient: enum store_rcpt_state after now */
	char **error;                /* per recipient: last reply, malloc'd or NULL */
	char **remote;               /* per recipient: the relay that answered */
	bool *delayed;               /* per recipient: in this run's delay notice */
	bool *recorded;              /* per recipient: its outcome is in the queue already */
	unsigned *marked;            /* per recipient: its local delivery's record is in
					partition marked - 1 (0: none; queue_runner.c) */
	bool delay_noticed;          /* a delay notice went out for this message before */
	size_t lookups;              /* directory lookups of local recipients in flight */
	struct qwork_list lmtp;      /* works for store hosts, started when they are in */
	struct qwork_list works;     /* every work not finished (freed at shutdown) */
	TAILQ_ENTRY(qjob) entry;
};

/* Where a recipient goes: a next hop from the transport map or relay_host ("host:port": MX
   lookup of host; "[host]:port": its addresses; a numeric host as is), or the recipient
   domain's MX hosts on relay_port. */
struct qnexthop {
	char name[DNS_NAME_MAX + 3]; /* a domain, a host, or an address */
	char port[8];
	bool mx;                     /* look up MX records of name */
	enum tls_level tls;          /* transport_map tls=, else TLSL_DEFAULT */
	bool sts;                    /* the recipient domain's MX (MTA-STS applies) */
	bool lmtp;                   /* a store host's LMTP listener (a user's mailHost) */
	char host[DNS_NAME_MAX + 1]; /* lmtp: the store host's name (logs, TLS SNI) */
};

#define QUEUE_MX_ADDRS 8  /* addresses of one host tried at most */
#define QUEUE_TRIES_MAX 5 /* connections tried for one work in a run */

/* The recipients of one job that go to one next hop, and the state of routing them: the MX
   hosts in order, the addresses of the current one, what each try gave. */
struct qwork {
	struct qjob *job;
	struct qdest *dest; /* the connection it is on or waits for */
	size_t *idx;        /* recipient indexes into job->qm.rcpt */
	size_t n;
	struct qnexthop nh;
	struct mx_host mx[MX_HOSTS_MAX];
	size_t nmx, mxi; /* hosts; the one being tried */
	char addr[QUEUE_MX_ADDRS][46];
	size_t naddr, ai;       /* its addresses; the one being tried */
	unsigned tries;         /* connections tried */
	bool host_temp;         /* a host lookup failed temporarily */
	bool pm_lookup;         /* a local postmaster@: the lookup of [mtad] postmaster's */
	struct dns_query *q[3]; /* AAAA, A, TLSA of the host in hand (MX in q[0]) */
	struct dns_answer_copy {
		bool done, secure;
		enum dns_status status;
		size_t n;
		char addr[QUEUE_MX_ADDRS][46];
	} ans[3];
	bool mx_secure;             /* the MX answer (or a configured name) validated */
	struct tlsa_rec *tlsa;      /* the host's TLSA records (ans[2].n of them) */
	enum tls_level tls;         /* decided for the host in hand */
	struct sts_req *sts;        /* the MTA-STS policy lookup in flight */
	struct sts_policy *sts_pol; /* the domain's policy (mode testing/enforce) */
	bool mx_ready;              /* the MX answer is in (waiting for sts) */
	char tlsdesc[128];          /* "tls=dane TLSv1.3 TLS_AES_256_GCM_SHA384" */
	int last_code;              /* the last try's reply code (0: none) */
	char last_text[512];
	char dest_relay[300]; /* the last try's "host[addr]:port" */
	struct buf trylog;    /* "host[addr]:port: reason; ..." */
	TAILQ_ENTRY(qwork) entry;
	TAILQ_ENTRY(qwork) jentry; /* in job->works */
};

/* A next hop (host name, address, port) with its connections. */
struct qdest {
	char *host, *addr, *port;      /* host: the MX name (SNI, logs); addr: to connect */
	char key[MTAD_SHARED_KEY_MAX]; /* "host:port": its entry in the shared table (the
					      connection limit is per host, not per address) */
	enum tls_level tls;            /* the level its connections reach */
	bool sts_testing;              /* log what an MTA-STS policy in testing mode sees */
	bool lmtp;                     /* speaks LMTP (RFC 2033): a store host */
	struct tlsa_rec *tlsa;         /* DANE: the records certificates must match */
	size_t ntlsa;
	unsigned active; /* connections open (busy or idle) in this worker; each
					      holds a slot of the shared table */
	struct qwork_list waiting;
	TAILQ_HEAD(, smtp_client) idle;
	TAILQ_HEAD(, smtp_client) all; /* every connection (busy, idle or dying) */
	TAILQ_ENTRY(qdest) entry;
};

struct queue_runner {
	struct mtad *m;
	struct event *tick;     /* every TICK_MS (queue_runner.c) */
	struct event *kick;     /* one pass now: queue_runner_kick */
	SSL_CTX *tls;           /* client context: TLS when offered */
	struct dns *dns;        /* the worker's resolver (m->dns) */
	SSL_CTX *verify_tls;    /* verifying client context (MTA-STS policy fetch) */
	struct sts_cache *sts;  /* MTA-STS policies (NULL: no verifying context) */
	struct conf_cidrs *own; /* our own addresses (mail loops) */
	uint32_t owner;         /* its leases' owner in the queue: worker + 1 */
	char relay_port[8];
	TAILQ_HEAD(, qjob) jobs;
	TAILQ_HEAD(, qdest) dests;
	size_t njobs;
	unsigned concurrency;
	int64_t timeout_ms;
	bool stopping;
	bool leasing;                    /* a lease (or the start's release) in the commit */
	bool full;                       /* MAX_JOBS in flight, entries maybe due: a job's
					    end starts the next pass */
	size_t lease_max;                /* what the lease in the commit asked for */
	struct store_queue_lease *lease; /* the lease in the commit */
};

/* smtp_client.c: runs w on a connection of its destination (an idle one, or a new one). When
   the work is done each recipient's outcome is in job->result/error and queue_work_done(w)
   is called. */
void smtp_client_run(struct queue_runner *qr, struct qwork *w);
/* Closes the idle connections of d (QUIT). */
void smtp_client_close_idle(struct qdest *d);
/* Shutdown: every connection of d closed, busy ones too (their works are not finished). */
void smtp_client_close_all(struct qdest *d);

/* queue_runner.c */
/* Records one recipient's outcome: code is the SMTP reply code (0: no reply, connection
   trouble), text the reply or reason. */
void queue_rcpt_outcome(struct qwork *w, size_t k, int code, const char *text, const char *relay);
void queue_work_done(struct qwork *w);
/* The connection for w failed before any recipient was accepted (connect, greeting, EHLO,
   TLS, MAIL): tries the next address or MX host, or records code/text for every recipient
   and ends w when there is none. */
void queue_work_failover(struct qwork *w, int code, const char *text, const char *relay);
/* The enhanced status code at the start of text, else one from the reply code ("5.0.0"). */
const char *queue_dsn_of(const char *text, int code, char *buf, size_t size);
/* A connection to d closed; starts waiting works. */
void queue_dest_released(struct queue_runner *qr, struct qdest *d);

/* The destination host/addr/port, found or created. */
struct qdest *queue_dest_get(struct queue_runner *qr, const char *host, const char *addr,
			     const char *port, enum tls_level tls, const struct tlsa_rec *tlsa,
			     size_t ntlsa, bool sts_testing, bool lmtp);
/* Starts the works waiting for d as far as the connection limit allows. */
void queue_dest_pump(struct queue_runner *qr, struct qdest *d);

/* queue_route.c: finds the hops of w (MX, addresses) and starts it on the first; outcomes
   for every recipient when there is none. */
void queue_route_start(struct queue_runner *qr, struct qwork *w);
/* Our own addresses ([mtad] listen hosts; every interface's for a wildcard). */
struct conf_cidrs *queue_own_addrs(const struct conf *c);

/* A deferred recipient's stored last error starts with this once its message had its delay
   notice (the queue keeps no other per-message mark), so the notice goes out once. */
#define QUEUE_DELAY_MARK "[delay notice sent] "

/* bounce.c: writes a DSN (RFC 3464) and queues it to the sender; never for the null sender.
   DSN_FAILED: for the recipients of job marked failed that want it (NOTIFY); DSN_DELAYED:
   for those in job->delayed (still being retried). 0 (also when nobody gets one) or a
   store_err. Queued durably before it returns (a store_write and its fsync in the calling thread: not
   for an event loop, which uses bounce_prepare). */
enum dsn_kind { DSN_FAILED, DSN_DELAYED };
int bounce_send(struct queue_runner *qr, const struct qjob *job, enum dsn_kind kind);
/* A DSN as bounce_send would queue it, for the caller's own commit: d->blob (NULL when nobody
   gets one: 0 returned) written and finished deferred (made durable by the commit that
   references it), d->qm its queue entry (pointing into d and to job's sender: both must
   live until the commit), for store_queue_add_txn(t, &d->qm, d->blob, &d->id) in a
   store_gc_submit(gc, STORE_QUEUE_PART, d->blob, ...) function. Then bounce_queued. */
struct bounce_dsn {
	enum dsn_kind kind;
	struct store_blob *blob;
	struct store_queue_msg qm;
	struct store_queue_rcpt to;
	uint64_t id; /* the DSN's queue id, once added */
};
int bounce_prepare(struct queue_runner *qr, const struct qjob *job, enum dsn_kind kind,
		   struct bounce_dsn *d);
/* Recipients of a message that never reached the queue, each failed with its refusal: a
   maildrop file's (pickup.c: mtad refused the file; deliver.c: mtad accepted it for others).
   Recipient i is addr[i * stride], its refusal's text error[i * stride] (error NULL, or that
   entry NULL: why). */
struct bounce_refused {
	uint64_t id;        /* names the DSN only (Message-ID, boundary) */
	const char *sender; /* whom it goes to (the null sender: nobody, 0 returned) */
	int64_t created;    /* the message's arrival (Arrival-Date) */
	size_t n, stride;
	char *const *addr;
	char *const *error;
	char *why;
	const char *header; /* the original's header in memory (bounce_header_len), or NULL */
	size_t header_len;
};
/* A DSN_FAILED as bounce_prepare's naming f's recipients, with RET=HDRS: the original's
   header is f->header, else read from fd, from its offset on. f's strings must live until
   the commit. Writes the DSN's file: callable in the committer's thread (an operation's
   function), which then references it. */
int bounce_prepare_refused(struct mtad *m, const struct bounce_refused *f, int fd,
			   struct bounce_dsn *d);
/* The header of the message read from fd (its offset on) into hdr (reset first, its max at
   least RETURN_MAX: 64 KiB): up to the CRLF that ends its last field (the empty line and
   the body left out, wherever the reads cut them), or its first 64 KiB. 0 or STORE_EIO. */
int bounce_read_header(int fd, struct buf *hdr);
/* The length of the header bounce_read_header would read from the message msg (len bytes). */
size_t bounce_header_len(const char *msg, size_t len);
/* After the commit (rc its result): logs the DSN's id and kicks the runner, or the failure;
   frees d->blob. Nothing when d->blob is NULL. */
void bounce_queued(struct queue_runner *qr, const struct qjob *job, struct bounce_dsn *d, int rc);

#endif

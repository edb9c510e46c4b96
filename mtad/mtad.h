/* mtad.h — types shared inside mtad: the per-worker context, the SMTP session with its
 * transaction, and the functions the mtad files call on each other. */
#ifndef HERON_MTAD_H
#define HERON_MTAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "common/authguard.h"
#include "common/buf.h"
#include "common/line.h"
#include "common/mailaddr.h"

struct conf;
struct net_server;
struct net_fds;
struct net_ipcount;
struct shmtable;
struct store;
struct store_gc;
struct store_blob;
struct store_rcpt;
struct ldapauth;
struct queue_runner;
struct store_queue_rcpt;
struct dns;
struct sieve_tx;
struct mtad_auth;
struct mtad_auth_tx;
struct authguard;
struct sender_map;
struct ldapauth_user;
struct milter_set;
struct milter_sess;
struct aliases;
struct srs;

/* Listener kinds. */
enum mtad_listener {
	L_SMTP,        /* MX: local recipients only unless trusted */
	L_SUBMISSION,  /* AUTH required, may relay */
	L_SUBMISSIONS, /* implicit TLS, AUTH required */
	L_LMTP,        /* LHLO, per-recipient replies after DATA */
	L_NKINDS
};

/* Limits and policy read once from [mtad]. */
struct mtad_limits {
	uint64_t max_message_size;
	size_t line_max;
	size_t max_rcpt, reject_rcpt, max_tx, max_errors;
	int64_t greeting_delay_ms, command_timeout_ms, data_timeout_ms;
	int64_t login_timeout_ms, max_tx_ms, max_data_ms; /* absolute, not idle */
	bool auth_require_tls, bare_lf_normalize;
	uint32_t max_conns_per_ip, max_unauth_per_ip;
};

/* One worker's world. */
struct mtad {
	const struct conf *conf; /* in force: the start's, or the last reload's */
	struct conf *reloaded;   /* owned: the last config SIGHUP loaded, or NULL */
	const char *conf_path;
	struct event_base *base;
	struct mtad_limits lim;
	const char *hostname;
	SSL_CTX *tls; /* NULL: no TLS offered */
	struct net_server *srv[L_NKINDS];
	struct net_ipcount *ipcount;
	struct net_ipcount *unauth;          /* sessions not authenticated per address */
	struct authguard *guard;             /* the login throttle mtad and imapd share */
	struct sender_map *senders;          /* [mtad] sender_login_map */
	struct milter_set *milters;          /* [milter] lists (milter.h), or NULL: none */
	struct aliases *aliases;             /* [mtad] aliases, or NULL (rcpt_resolve.c) */
	struct rcpt_aliases_state *al_state; /* its file's identity and check time */
	struct srs *srs;                     /* [mtad] srs_secret_file's rewriter, or NULL: off */
	struct store *store;
	struct store_gc *gc;
	struct event *gc_ev; /* store_gc_fd readable: store_gc_dispatch */
	struct ldapauth *la; /* NULL: no directory configured */
	size_t nsessions;
	TAILQ_HEAD(, smtp_session) sessions;
	bool draining;
	struct queue_runner *qr;
	struct dns *dns;         /* the worker's resolver and its cache (daemon only) */
	struct shmtable *shared; /* relay counts of all workers */
	struct shmtable *conns;  /* connections of all workers: per address, total */
	unsigned worker;         /* this worker's index */
	struct mtad_auth *auth;  /* signing keys, PSL, resolver (mtad_auth.c) */
	struct pickup *pickup;   /* [mtad] maildrop's pickup (worker 0), or NULL */
};

/* Session states: one bit each, so the command table can list where a verb is allowed. */
enum smtp_state {
	ST_GREETING = 1 << 0,  /* greeting not sent yet (greeting_delay) */
	ST_CONNECTED = 1 << 1, /* greeted, no EHLO yet */
	ST_READY = 1 << 2,     /* EHLO done, no transaction */
	ST_MAIL = 1 << 3,      /* MAIL accepted, no recipient yet */
	ST_RCPT = 1 << 4,      /* at least one recipient */
	ST_DATA = 1 << 5,      /* reading the DATA stream */
	ST_BDAT = 1 << 6,      /* inside BDAT chunks (between or reading) */
	ST_WAIT = 1 << 7,      /* waiting for the directory or the store; input paused */
	ST_TLS = 1 << 8,       /* TLS handshake running */
	ST_QUIT = 1 << 9,      /* closing after the output drains */
};

/* Session flags (separate from the state: STYLE 6). */
enum smtp_flag {
	SF_ESMTP = 1 << 0,
	SF_TLS = 1 << 1,
	SF_AUTH = 1 << 2,
	SF_TRUSTED = 1 << 3,
	SF_LMTP = 1 << 4,
	SF_IPCOUNTED = 1 << 5,
	SF_UNAUTH_COUNTED = 1 << 6, /* counted in m->unauth */
	SF_KICKED = 1 << 7,         /* mailctl kick: 421 and close once between transactions */
	SF_LOCAL = 1 << 8,          /* a local process on a unix submission socket: no AUTH */
};

/* Why a transaction will be refused at its end (keep reading, answer at the dot). */
enum tx_error {
	TX_OK = 0,
	TX_ETOOBIG, /* 552 5.3.4 */
	TX_EBARELF, /* 554 5.6.11 */
	TX_EIO,     /* 451 4.3.0 */
	TX_EHOPS,   /* 554 5.4.6 too many Received: */
	TX_ENUL,    /* 554 5.6.0 a NUL byte (not text, and no IMAP client could read it) */
};

struct smtp_rcpt {
	char addr[MAILADDR_TEXT_MAX + 1]; /* as given, without <> */
	char user[MAILADDR_TEXT_MAX + 1]; /* local: the store user; remote: "" */
	bool local;
	unsigned part; /* local: the user's store partition */
	int result;    /* after the commit: a store_err */
	struct rcpt_params params;
	char orcpt_raw[3 * RCPT_ORCPT_MAX + 40]; /* ORCPT addr-type;xtext, for the queue */
	char sieve_reject[400];                  /* Sieve reject/ereject: the 550's text, or "" */
	char sieve_note[160];                    /* what Sieve did, for the log line, or "" */
	char detail[MAILADDR_LOCAL_MAX + 1];     /* local: the subaddress (user+DETAIL@), or "" */
	char orig[MAILADDR_TEXT_MAX + 1]; /* the RCPT address when an alias led here, or "" */
	bool extra;                       /* an alias's target after its first (LMTP: no reply) */
	bool forwarded; /* remote, reached through an alias or postmaster: SRS applies */
};

struct smtp_tx {
	uint64_t qid;
	char from[MAILADDR_TEXT_MAX + 1];     /* "" = null sender */
	char srs_from[MAILADDR_TEXT_MAX + 1]; /* the sender of copies forwarded off-site */
	struct mail_params mp;
	struct smtp_rcpt *rcpt;
	size_t nrcpt, rcpt_cap;
	size_t rcpt_attempts;
	size_t rcpt_accepted; /* RCPTs answered 250 (max_recipients counts these) */
	size_t rcpt_first;    /* the RCPT the milters are asked about: its first entry */
	char rcpt_asked[MAILADDR_TEXT_MAX + 1]; /* and its address, as given */
	/* a refused RCPT's reply while the milters hear of it */
	char rcpt_refusal[MAILADDR_TEXT_MAX + 200];
	/* the message as it streams in */
	struct store_blob *blob;
	struct buf out; /* bytes waiting for store_blob_write */
	uint64_t size;
	enum tx_error err;
	bool at_bol;    /* the next byte starts a line */
	bool prev_crlf; /* the last line ended with CRLF */
	bool cr;        /* the last byte passed on was a CR */
	bool in_headers;
	unsigned hops;
	char msgid[200];     /* the Message-ID header's value (for the log), or "" */
	bool msgid_next;     /* it was empty: the continuation line holds it */
	uint64_t chunk_left; /* BDAT: bytes of this chunk still to read */
	bool chunk_last;
	/* delivery */
	struct store_rcpt *srcpt;           /* nlocal entries */
	struct store_queue_rcpt *qrcpt;     /* nrcpt - nlocal entries */
	struct store_queue_rcpt *qrcpt_fwd; /* those forwarded off-site (an SRS sender) */
	size_t nlocal, pending;
	bool requeued; /* failed local recipients went to the queue */
	bool held;     /* a milter quarantined it: queued, held */
	/* the session's milters while they see it (milter.c), or NULL */
	struct milter_sess *milter;
	unsigned blob_part;        /* the partition the message file is in */
	struct sieve_tx *sieve;    /* deliver_sieve.c's state, or NULL */
	struct mtad_auth_tx *auth; /* mtad_auth.c's state, or NULL */
	bool quarantine;           /* DMARC quarantine: local copies go to \Junk */
	int64_t started_ms;
	int64_t deadline;      /* monotonic ms: the whole transaction */
	int64_t data_deadline; /* monotonic ms: its data; 0 before DATA/BDAT */
};

struct smtp_session {
	uint64_t id;
	struct mtad *m;
	enum mtad_listener kind;
	struct bufferevent *bev;
	struct sockaddr_storage ss;
	socklen_t sslen;
	char addr[128]; /* peer address, text */
	char helo[256];
	char user[256]; /* authenticated user */
	long peer_uid;  /* SF_LOCAL: the submitting process's uid, or -1 */
	char *drop_key; /* XUID's: the maildrop file this session submits (pickup.c), or NULL */
	char **drop_refused;  /* XREFUSED's: "addr" then its refusal's text, in pairs */
	size_t ndrop_refused; /* pairs */
	char **own;           /* its addresses (directory: primary, aliases) */
	size_t nown;
	unsigned state; /* one enum smtp_state bit */
	unsigned flags; /* enum smtp_flag */
	struct line_reader lr;
	struct buf line;
	size_t errors, ntx;
	struct smtp_tx *tx;
	struct event *timer; /* greeting delay, auth delay */
	unsigned auth_failures;
	int auth_step; /* AUTH LOGIN: 1 = want user, 2 = want password */
	char auth_login[256];
	char *auth_pass;                 /* held while the login throttle delays the check */
	struct smtp_scram *scram;        /* AUTH SCRAM-SHA-256[-PLUS] under way (smtp_auth.c) */
	struct authguard_check auth_chk; /* the login throttle's view of the last AUTH */
	bool closing;
	bool dead;              /* the peer went away during ST_WAIT */
	uint64_t discard_left;  /* BDAT chunk of a refused command */
	int64_t login_deadline; /* monotonic ms: submission must AUTH by then; 0 */
	struct event *deadline; /* the earliest of the session's deadlines */
	int64_t connected;      /* Unix time of the connect (mailctl who) */
	int64_t connected_us;   /* monotonic µs of the connect */
	int64_t cmd_us;         /* the last command's start (monotonic µs) */
	unsigned cmd_idx;       /* its metrics label (mtad_metrics.c) */
	bool cmd_open;          /* waiting for its final reply */
	/* milter.c's conversation with the session's milters, or NULL: none */
	struct milter_sess *milter;
	TAILQ_ENTRY(smtp_session) entry;
};

/* smtp_server.c: fds[L_NKINDS] are the bound listeners of each kind; max_conns caps the
   connections of all kinds, of all workers when m->conns is set (else of this one); more are
   refused with 421. With m->conns, m->ipcount is replaced by counts of all workers. */
int mtad_servers_start(struct mtad *m, const struct net_fds *fds, size_t max_conns);
/* SIGTERM: stop accepting; the loop exits when the last session ended. */
void mtad_servers_stop(struct mtad *m);
void mtad_session_ended(struct mtad *m, struct smtp_session *s);

/* smtp_session.c */
struct smtp_session *smtp_session_new(struct mtad *m, enum mtad_listener kind, int fd,
				      const struct sockaddr *sa, socklen_t salen);
void smtp_set_state(struct smtp_session *s, enum smtp_state next);
/* Resumes reading input after an asynchronous step finished (pipelined commands wait). */
void smtp_resume(struct smtp_session *s);
void smtp_close(struct smtp_session *s);
/* Draining (SIGTERM): a session between transactions gets 421 and is closed; one inside a
   transaction is closed when it ends. */
void smtp_session_drain(struct smtp_session *s);
void smtp_tx_free(struct smtp_tx **txp);
void smtp_starttls(struct smtp_session *s);

/* smtp_reply.c: every reply carries an enhanced status code in its text. */
void smtp_reply(struct smtp_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A 5xx/4xx protocol error: replies and counts; closes with 421 past max_errors. */
void smtp_error(struct smtp_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* smtp_cmd.c */
void smtp_dispatch(struct smtp_session *s, const char *line, size_t len);
void smtp_ehlo_reply(struct smtp_session *s, bool esmtp);

/* smtp_data.c: returns 1 when the data ended, 0 when more input is needed. */
int smtp_data_start(struct smtp_session *s);
int smtp_data_feed(struct smtp_session *s, struct evbuffer *in);
int smtp_bdat_feed(struct smtp_session *s, struct evbuffer *in);
/* The message is complete: commit and reply (async). */
void smtp_data_done(struct smtp_session *s);
/* Message bytes from elsewhere than the client's stream (BURL), checked as BDAT's. */
void smtp_data_append(struct smtp_session *s, const char *p, size_t n);
/* A BDAT chunk or a BURL's bytes are in: with last the message ends (smtp_data_done),
   else 250 (or the transaction's error). */
void smtp_chunk_done(struct smtp_session *s, bool last);

/* smtp_burl.c: BURL (RFC 4468) on the submission listeners, when [mtad] burl_imap is set. */
bool smtp_burl_offered(const struct smtp_session *s);
void smtp_cmd_burl(struct smtp_session *s, const char *arg, size_t len);

/* smtp_auth.c */
void smtp_cmd_auth(struct smtp_session *s, const char *arg, size_t len);
/* The session is no longer unauthenticated (it logged in, or ended): uncounted. */
void smtp_unauth_put(struct smtp_session *s);
void smtp_auth_line(struct smtp_session *s, const char *line, size_t len);
/* The mechanisms AUTH offers s now ("PLAIN LOGIN[ SCRAM-SHA-256[ SCRAM-SHA-256-PLUS]]"). */
const char *smtp_auth_mechs(const struct smtp_session *s);
/* Ends an AUTH SCRAM exchange of s (its keys wiped); nothing when there is none. */
void smtp_scram_free(struct smtp_session *s);

/* sender.c: who may use which envelope sender. */
/* Loads the sender login map (empty path: an empty map). -1 with *error_r ("file:line: ...",
   malloc'd). */
int sender_map_load(const char *path, struct sender_map **map_r, char **error_r);
void sender_map_free(struct sender_map **mp);
/* SIGHUP: the map of c replaces m's; a bad one is warned about and the old one kept. */
void sender_map_reload(struct mtad *m, const struct conf *c);
/* MAIL FROM a (from: as formatted): NULL when allowed, else why not (for a 553 5.7.1;
   logged). */
const char *sender_refusal(struct smtp_session *s, const struct mailaddr *a, const char *from);
/* The addresses of the user who authenticated (u NULL: none any more). */
void sender_own_set(struct smtp_session *s, const struct ldapauth_user *u);
/* One more RCPT for the transaction: NULL, or why not (for a 550 5.7.1). */
const char *sender_rcpt_refusal(const struct smtp_session *s);

/* rcpt_resolve.c: what a local recipient is: aliases, postmaster, subaddress, directory. */
/* Resolves the local recipient r (the entry being added at tx->rcpt[tx->nrcpt], key its
   lookup key: the canonical address) asynchronously: the session waits (ST_WAIT), adds one
   entry per final recipient (an alias may give several, external ones for the queue) and
   answers the RCPT (250, 4xx, 5xx). */
void rcpt_resolve(struct smtp_session *s, const char *key);
/* Sets r's ORCPT to r->orig (the address the sender used) unless the client gave one. */
void rcpt_orcpt_orig(struct smtp_rcpt *r);
/* The directory key of a local address: the detail cut off (user+tag@d -> user@d) into
   key (size bytes); *detail_r (may be NULL) gets the detail or "". */
void rcpt_lookup_key(const struct mtad *m, const char *addr, char *key, size_t size,
		     char *detail_r, size_t dsize);
/* Whether addr's local part is postmaster (any case; no domain, or one of ours). */
bool rcpt_is_postmaster(const struct mtad *m, const char *addr);
/* Loads [mtad] aliases of c into m (start: fatal on error; SIGHUP: the old map stays when
   the new one is bad, with a warning). */
void rcpt_aliases_load(struct mtad *m, const struct conf *c, bool fatal_on_error);
void rcpt_aliases_free(struct mtad *m);
/* Loads [mtad] srs_secret_file of c into m->srs (start: fatal on error; SIGHUP: the old
   secrets stay when the file is bad, with a warning); an empty setting turns SRS off. */
void rcpt_srs_load(struct mtad *m, const struct conf *c, bool fatal_on_error);
/* The envelope sender of a copy of mail from sender forwarded to rcpt (NULL: known to be
   off-site) into out (size bytes): its SRS form, or sender itself (SRS off, <>, a sender of
   local_domains, rcpt of local_domains, or no SRS form fits). */
void rcpt_srs_sender(const struct mtad *m, const char *sender, const char *rcpt, char *out,
		     size_t size);
/* addr (no <>) is an SRS address of ours (SRS on, its domain the SRS domain, SRS0/SRS1). */
bool rcpt_srs_ours(const struct mtad *m, const char *addr);

/* smtp_cmd.c: a new recipient entry at tx->rcpt[tx->nrcpt] (zeroed; not counted yet). */
struct smtp_rcpt *smtp_rcpt_add(struct smtp_tx *tx);
/* MAIL passed mtad's own checks (s->tx made): the milters are asked, then 250 or their
   refusal is sent; resume: the caller is an asynchronous step (smtp_resume follows the
   reply). */
void smtp_mail_accepted(struct smtp_session *s, bool resume);
/* A RCPT passed mtad's own checks: its entries are s->tx->rcpt[first, nrcpt) (none when
   they were there already), addr as given; the milters are asked, then 250, or their
   refusal and the entries dropped. resume as for smtp_mail_accepted. */
void smtp_rcpt_accepted(struct smtp_session *s, const char *addr, size_t first, bool resume);
/* A RCPT mtad refuses (the reply fmt...): the milters that asked for refused recipients hear
   of it first (SMFIP_RCPT_REJ), then the reply is sent. resume as for smtp_mail_accepted. */
void smtp_rcpt_refuse(struct smtp_session *s, const char *addr, bool resume, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* deliver.c */
/* Whether mailhost (a user's mailHost, NULL or "" when it has none) names a store host other
   than this one ([mtad] mailhost, else hostname): its mail is queued and delivered there over
   LMTP. A value that is no host name counts as this host. */
bool mtad_mailhost_elsewhere(const struct mtad *m, const char *mailhost);
int deliver_open(struct smtp_session *s);
int deliver_write(struct smtp_session *s, const void *p, size_t n);
/* Writes what deliver_write gathered into the message file (a milter reads it back). */
int deliver_flush(struct smtp_session *s);
void deliver_commit(struct smtp_session *s);
/* Replaces the first skip bytes of the message written so far (Received: and the header the
   client sent, counted from the start) by head: in memory while the message is, else by
   rewriting the file (store_blob_replace_head). For header fields known only at the end of
   the data (Authentication-Results, DKIM-Signature; a milter's). -1 on failure (451). */
int deliver_replace_head(struct smtp_session *s, const char *head, size_t hlen, uint64_t skip);
/* The bytes of the message written so far. */
uint64_t deliver_written(const struct smtp_tx *tx);
void deliver_abort(struct smtp_tx *tx);
/* One asynchronous step of the delivery ended (deliver_sieve.c counts its steps in
   tx->pending): the reply goes out after the last. */
void deliver_step_done(struct smtp_session *s);

/* deliver_sieve.c: [sieve] before/after compiled and the limits read (each worker at start;
   -1 and *error_r naming the script and line). */
int deliver_sieve_init(const struct conf *c, char **error_r);
/* Runs the recipients' scripts and delivers the local part (true), or returns false when no
   local recipient has a script (deliver.c then delivers to INBOX as usual). */
bool deliver_sieve(struct smtp_session *s);
void deliver_sieve_free(struct smtp_tx *tx);
/* The queue runner's local delivery of a queue entry to one recipient: its file (fd, size,
   read here) and its durable copy blob in the user's partition (alive until done). 1 when
   no script applies (deliver to INBOX as usual); else 0, and done(code, text, arg) runs
   from the loop once the store writes and the messages queued are committed: 250, 4xx, or
   550 for a Sieve reject (the runner bounces it to the sender). Exactly once across kill -9
   with the records of queue_record_key: the redirect copies are queued first, with the
   recipient's 'r' record in the same queue txn (a retry finds it and queues none again:
   after a kill, a 452 or a 451); then the delivery's commit writes the 'q' mark; a vacation
   reply decided in that commit is owed (the mark says so: STORE_DROP_REPLY_OWED) until it
   is queued with its 'v' record, and a run after a kill queues it (reply_owed: the scripts
   run again for the reply alone, their duplicate tests answered as in the delivering run:
   dup_seen, which the mark keeps). A redirect or a reply the queue refuses is 451 4.3.0, and
   so are scripts that cannot be run now (the message not mapped, the store not able to say
   what they are; with reply_owed too: a reply owed is never dropped for that); with
   reply_owed, 1 when the recipient has no script or the scripts no vacation now (logged:
   the reply is not owed any more). */
struct deliver_queued {
	uint64_t qid;
	const char *from, *addr, *user;
	unsigned part;
	int fd;
	uint64_t size;
	struct store_blob *blob; /* NULL with reply_owed */
	const char *mark;        /* NULL, or the 'q' record the delivery's commit writes */
	size_t idx;              /* the recipient's index in the entry */
	bool reply_owed;         /* delivered before, its vacation reply not yet queued */
	uint64_t dup_seen;       /* with reply_owed: the delivering run's duplicate answers */
	const char *folder;      /* NULL, or where a keep goes: user+DETAIL@'s folder when it
				    exists ([mtad] subaddress_folder), else INBOX */
};
int deliver_sieve_queued(struct mtad *m, const struct deliver_queued *dq,
			 void (*done)(int code, const char *text, void *arg), void *arg);

/* Makes sure a directory user has a store account (created with the directory's quota in
   bytes, 0 = none). When it has one: 0 and its partition in *part_r (or a store_err).
   Otherwise the account is made through the group commit and DELIVER_PENDING returned:
   done(rc, part, arg) runs from the commit's callback (the loop never writes). */
#define DELIVER_PENDING (-1)
int deliver_user_ensure(struct mtad *m, const char *user, int partition, uint64_t quota,
			unsigned *part_r, void (*done)(int rc, unsigned part, void *arg),
			void *arg);

/* mtad_auth.c: DKIM signing; SPF, DKIM and DMARC verification with Authentication-Results.
   Hooks, in this order for a transaction (a milter's end-of-data step goes after
   mtad_auth_end's, on the message with our header fields already above it). */
/* Per worker, after m->dns is set (no resolver: no verification): the [dkim] keys and the
   PSL. -1 with a malloc'd *error_r. */
int mtad_auth_init(struct mtad *m, const struct conf *c, char **error_r);
void mtad_auth_free(struct mtad *m);
/* SIGHUP: the [dkim] keys of c replace m's (bad ones are warned about, the old kept). */
void mtad_auth_reload(struct mtad *m, const struct conf *c);
/* MAIL FROM was accepted (s->tx made, its 250 not sent): SPF starts. true when the reply
   waits for it ([spf] reject_fail; the session is in ST_WAIT and mtad_auth replies). */
bool mtad_auth_mail(struct smtp_session *s);
/* Our Received: (the message's first bytes) was written. */
void mtad_auth_data_start(struct smtp_session *s, const char *received, size_t len);
/* Bytes of the client's message as they go to the file. */
void mtad_auth_data(struct smtp_session *s, const char *p, size_t n);
/* The data ended well (ST_WAIT): signs, or verifies and then calls deliver_commit itself
   (true), or refuses the message itself (true: 550 5.7.1 DMARC, 552, 451). false: nothing to
   do, the caller delivers. */
bool mtad_auth_end(struct smtp_session *s);
void mtad_auth_tx_free(struct smtp_tx *tx);

/* worker.c: one worker's world, as mtad's workers and the fuzz harness set it up: zeroes m,
   reads the [mtad] limits of c (kept: m->conf), makes the event base, the TLS context (when
   [tls] cert is set), opens the store ([store] path) with its group committer on the base,
   the directory and the per-address connection counts; fatal on failure. The caller then
   starts the servers (mtad_servers_start) and, for a daemon, sets m->shared and the queue
   runner. mtad_worker_free frees what init made, the servers and m->reloaded. */
void mtad_worker_init(struct mtad *m, const struct conf *c, unsigned worker, const char *hostname);
void mtad_worker_free(struct mtad *m);
/* The [mtad] limits of c (a SIGHUP reads them again). */
void mtad_limits_from_conf(const struct conf *c, struct mtad_limits *l);

/* queue_runner.c: leases due queue entries and relays them (smtp_client.c). Every worker
   runs one; leases keep two workers from taking the same entry. */
void queue_runner_start(struct mtad *m, unsigned worker);
void queue_runner_stop(struct mtad *m);
/* pickup.c: [mtad] maildrop's files submitted over local_submission (worker 0 only). */
void pickup_start(struct mtad *m);
/* smtp_cmd.c: frees what XREFUSED kept (the pickup's refused recipients). */
#define DROP_REFUSED_MAX 1000
void smtp_drop_refused_free(struct smtp_session *s);
void pickup_stop(struct mtad *m);
/* m->conf was replaced (SIGHUP): relay_concurrency and relay_timeout apply to new
   connections. */
void queue_runner_reload(struct mtad *m);
/* New entries were queued: look for due entries now rather than at the next tick. */
void queue_runner_kick(struct mtad *m);
/* The key of a queue entry's recipient's record (store_drop.c's DBI): kind 'q' its local
   delivery (in the user's partition), 'r' its Sieve redirect copies and 'v' its vacation
   reply (in the queue); each goes once the queue has the recipient's outcome. */
#define QUEUE_RECORD_KEY_MAX 48
void queue_record_key(char kind, uint64_t id, size_t i, char *out, size_t size);
/* A key of queue_record_key's, strictly: kind, '/', exactly 16 hex digits, '/', digits, end.
   False for anything else (a maildrop file's record, pickup.c's NAME/dev/ino/mtime). */
bool queue_record_parse(const char *key, char *kind, uint64_t *id, size_t *idx);


/* mtad_metrics.c: mtad's metrics (common/metrics.h) and control socket (common/obs.h). */
enum mtad_delivery {
	MTAD_DLV_LOCAL,
	MTAD_DLV_QUEUED,
	MTAD_DLV_RELAYED,
	MTAD_DLV_DEFERRED,
	MTAD_DLV_BOUNCED,
	MTAD_DLV_EXPIRED,
	MTAD_DLV_REJECTED,
};
#define MTAD_CMD_UNKNOWN 15 /* the "unknown" command label */
/* Master, before fork. */
void mtad_metrics_init(unsigned workers);
/* A command line arrived (verb: its table verb, "DATA_END" for the end of a message's data,
   NULL when it names none): timed until its final reply. */
void mtad_metrics_command(struct smtp_session *s, const char *verb);
/* A reply line was queued at output offset start: the final one ends the command. */
void mtad_metrics_reply(struct smtp_session *s, size_t start);
void mtad_metrics_delivery(enum mtad_delivery status);
/* A message of size bytes was accepted on s. */
void mtad_metrics_message(const struct smtp_session *s, uint64_t size);
struct obs;
struct obs *mtad_obs_start(struct mtad *m, const struct net_fds *fds);
/* Waits for the queue walks in progress, then obs_free. */
void mtad_obs_free(struct obs **op);

/* The workers' common tables (common/shmtable.h), mapped by the master before fork: relay
   connections per destination (SHM_RELAY_DEST) in shared; connections (and unauthenticated
   sessions) per client address and in total in conns. Failed logins are in the login
   throttle's table (common/authguard.h), which imapd shares. */
#define MTAD_SHARED_SLOTS 2048
#define MTAD_SHARED_KEY_MAX 272 /* "host:port" of a 255-byte host */

/* deliver.c: message bytes gathered before a write into the blob file */
#define DELIVER_BUF_MAX (64 * 1024)

#endif

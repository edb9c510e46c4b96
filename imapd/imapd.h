/* imapd.h — types shared inside imapd: the worker's server, a client connection, the command
 * being run, the selected view. Command handlers follow one signature (STYLE 9): they return
 * true when the tagged reply has been sent, false when the command will be resumed (output
 * back-pressure, an asynchronous authentication, a streamed body). */
#ifndef HERON_IMAPD_H
#define HERON_IMAPD_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <sys/socket.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/cte.h"
#include "common/metrics_std.h"
#include "imapd/imap_parser.h"
#include "imapd/imap_seqset.h"

/* Ceilings of imapd's working buffers (the request limits are [imapd] keys). */
#define IMAP_CAPS_MAX 4096 /* the CAPABILITY list */
#define IMAP_HEADER_READ_MAX \
	(1024 * 1024)       /* a message header read from its file: HEADER.FIELDS,
					      BINARY.SIZE, SEARCH; a longer one is not read */
#define IMAP_FIELD_MAX 4096 /* one header field's decoded value (SEARCH, BINARY) */
#define IMAP_HEADER_FILE_MAX \
	(16u << 20) /* a whole message header read from its file where
					     the cache's was cut (HEADER.FIELDS, SEARCH, the
					     CTE of BINARY); a longer one is searched as cut */

struct store;
struct store_txn;
struct store_msg;
struct store_blob;
struct store_watch;
struct store_gc;
struct store_status;
struct net_server;
struct net_ipcount;
struct shmtable;
struct authguard;

/* Output is produced while the client's output buffer is below OUT_HIGH and resumed when it
   drains below OUT_LOW: a slow reader of a big FETCH holds at most about OUT_HIGH + one
   chunk of memory. */
#define IMAP_OUT_HIGH (256 * 1024)
#define IMAP_OUT_LOW (64 * 1024)
#define IMAP_STREAM_CHUNK (64 * 1024)

enum imap_state {
	IMAP_ST_NOTAUTH = 1u << 0,
	IMAP_ST_AUTH = 1u << 1,
	IMAP_ST_SELECTED = 1u << 2,
	IMAP_ST_LOGOUT = 1u << 3,
};
#define IMAP_ST_ANY (IMAP_ST_NOTAUTH | IMAP_ST_AUTH | IMAP_ST_SELECTED)
#define IMAP_ST_LOGGED (IMAP_ST_AUTH | IMAP_ST_SELECTED)

/* Client flags, separate from the state (STYLE 6). */
enum imap_cflag {
	IMAP_CF_TLS = 1u << 0,
	IMAP_CF_CLOSING = 1u << 1, /* close once the output is flushed */
	IMAP_CF_IDLE = 1u << 2,
	IMAP_CF_SASL = 1u << 3,     /* AUTHENTICATE waits for a response line */
	IMAP_CF_DEFUNCT = 1u << 4,  /* gone, freed once its writes leave the group commit */
	IMAP_CF_COMPRESS = 1u << 5, /* COMPRESS=DEFLATE is on (imap_compress.c) */
	IMAP_CF_KICKED = 1u << 6,   /* mailctl kick: BYE and close after the running command */
	IMAP_CF_PROXY = 1u << 7,    /* logged in at a store host: bytes relayed (imap_proxy.c) */
	IMAP_CF_IDLE_MISSED = 1u << 8, /* changed while IDLE's output was full: sync on drain */
};

/* Command flags in the table. */
enum imap_cmdflag {
	CMD_UID = 1u << 0,        /* has a UID form */
	CMD_NO_EXPUNGE = 1u << 1, /* no EXPUNGE responses while it runs (FETCH, STORE, SEARCH) */
	CMD_READONLY = 1u << 2,   /* EXAMINE */
	CMD_MOVE = 1u << 3,       /* COPY that moves */
	CMD_ALT = 1u << 4,        /* the second form of a handler: UNSUBSCRIBE, LSUB, UNSELECT,
				      REPLACE, LISTRIGHTS, DELETEACL */
	CMD_REV1 = 1u << 5,       /* IMAP4rev1 only: unknown after ENABLE IMAP4rev2 (CHECK) */
};

struct imap_recent_pending;

struct imap_server {
	struct imap_recent_pending *recent_pending; /* \Recent claims in the group commit
						       (imap_view.c): what they took */
	struct conf *conf;     /* in force: the master's, or reloaded (then also below) */
	struct conf *reloaded; /* owned: the config the last SIGHUP loaded, or NULL */
	const char *conf_path; /* the file SIGHUP reads again; NULL: no reload */
	struct event_base *base;
	struct store *store;
	struct store_gc *gc; /* group commit: every write of the worker */
	struct event *gc_ev; /* store_gc_fd readable: store_gc_dispatch */
	struct store_watch *watch;
	bool *watch_changed; /* per partition, filled by each drain */
	struct event *watch_ev;
	struct ldapauth *auth;
	void *tls_ctx;      /* SSL_CTX when [tls] cert is set */
	bool tls_ctx_owned; /* built by a SIGHUP here: freed with the worker */
	bool allow_plaintext;
	struct imap_parser_limits lim;
	uint64_t max_append;
	uint64_t max_mailboxes; /* [imapd] max_mailboxes_per_user (0: none) */
	unsigned max_depth;     /* [imapd] max_mailbox_depth (0: none) */
	int64_t login_timeout_ms, idle_timeout_ms;
	unsigned max_bad;
	unsigned nclients, max_clients;
	struct imap_client *clients; /* all connections (list for IDLE wake-ups) */
	struct net_server *plain, *tls;
	struct net_ipcount *ipcount;
	struct net_ipcount *unauth; /* connections not logged in yet, per address */
	struct authguard *guard;    /* the login throttle imapd and mtad share */
	unsigned max_per_ip, max_unauth_per_ip;
	unsigned max_per_user; /* sessions of one user in all workers (shared) */
	struct event *poll_ev; /* 1 s fallback when the store watcher is unavailable */
	bool draining;
	struct shmtable *shared;      /* all workers': connections, sessions per user
				       (cmd_auth.c) */
	unsigned worker;              /* this worker's column in shared */
	char hostname[256];           /* [imapd] hostname: users homed elsewhere are referred */
	char *proxy_secret;           /* [imapd] proxy_secret_file's secret, or NULL */
	struct evdns_base *proxy_dns; /* resolves store host names (made on first use) */
	struct imap_proxy_parked *proxy_pool; /* front: parked store host connections, newest
						 first (imap_proxy.c) */
	unsigned proxy_npooled;               /* in proxy_pool */
	uint64_t *notify_seq; /* per partition: the change log read so far (cmd_notify.c) */
	bool *notify_known;   /* per partition: notify_seq is set */
};

struct imap_view_msg {
	uint32_t uid;
	uint8_t flags; /* store flags, plus IMAP_VF_RECENT */
	uint64_t keywords;
};
#define IMAP_VF_RECENT 0x80u

/* The selected mailbox as this session knows it: seq i is msgs[i - 1]. */
struct imap_view {
	uint64_t mbox;
	unsigned part;
	char *name;
	bool readonly;
	uint32_t rights; /* the client's (STORE_ACL_*): every one on its own mailbox */
	char *viewer;    /* another user's mailbox: the client, whose \Seen is private
			    (store_seen.c); NULL on its own */
	uint32_t uidvalidity, uidnext;
	uint64_t modseq;
	struct imap_view_msg *msgs;
	size_t n, cap;
	unsigned nkeywords;       /* keywords announced in FLAGS */
	uint32_t recent;          /* messages \Recent for this session */
	bool expunge_pending;     /* expunges seen while EXPUNGE responses were not allowed */
	struct imap_seqset saved; /* SEARCHRES: the UIDs "$" stands for */
	struct imap_sort_cache *sort_cache; /* SORT/THREAD keys of its messages (imap_sort.c) */
	struct imap_context *contexts;      /* RETURN (UPDATE) contexts (imap_context.c) */
	unsigned ncontexts;
};

struct imap_cmd_def;

/* Messages in one APPEND (MULTIAPPEND, RFC 3502). */
#define IMAP_APPEND_MAX 64

struct imap_cmd {
	struct imap_client *c;
	const struct imap_cmd_def *def;
	unsigned def_flags; /* def's flags (enum imap_cmdflag) */
	const char *tag;
	bool uid;                    /* UID FETCH, UID STORE, ... */
	const struct imap_arg *args; /* after the command name (and after "UID x") */
	size_t nargs;                /* slots in args (list members included) */
	void *ctx;                   /* state of a resumable command */
	void (*ctx_free)(struct imap_cmd *cmd);
	uint64_t start_us;
};

/* A body streamed from a message file to the client, chunk by chunk; with decode set, the
   file's bytes are decoded and skip decoded bytes dropped before emit are sent (BINARY). */
struct imap_stream {
	int fd;
	uint64_t off, left; /* file bytes still to read */
	bool decode;
	bool text; /* raw bytes in a plain literal: a NUL is sent as 0x80 */
	struct cte_decoder dec;
	uint64_t skip, emit; /* decoded bytes to drop, then to send */
};

struct imap_client {
	struct imap_server *srv;
	struct imap_client *next, *prev;
	uint64_t id;
	struct bufferevent *bev;
	/* the socket's own bufferevent under COMPRESS and STARTTLS filters (NULL for imaps):
	   its output leaves through flush, one write per loop pass (imap_client.c) */
	struct bufferevent *sock;
	struct evbuffer_cb_entry *sock_cb; /* on sock's output: schedules flush */
	struct event *flush;
	bool flush_due; /* flush is active */
	struct event *timer;
	struct event *defer; /* runs queued work from the loop (never re-entrant) */
	char addr[64];
	struct sockaddr_storage sa;
	struct net_server *ns; /* the listener set that counted this connection */
	int64_t connected;     /* Unix time of the connect (mailctl who) */
	int64_t connected_us;  /* monotonic µs of the connect */
	enum imap_state state;
	unsigned flags;       /* enum imap_cflag */
	unsigned nbad;        /* consecutive bad commands */
	unsigned ncommits;    /* writes in the group commit: its thread reads this
				       client's view and command, so the client stays until
				       they are back (imap_commit.c) */
	unsigned close_ticks; /* 50 ms ticks spent flushing before close */
	struct imap_parser *parser;
	bool cmd_active;
	struct imap_cmd cmd;
	struct imap_stream stream; /* fd -1 when none */
	/* APPEND data being streamed from the client: one blob per message (MULTIAPPEND) */
	struct store_blob *append_blobs[IMAP_APPEND_MAX];
	unsigned nappend;
	uint64_t append_left;
	bool append_failed;
	bool append_nul;   /* a NUL arrived in a plain literal (only ~{n} may hold one) */
	size_t append_cat; /* the CATENATE list whose TEXT parts the last blob holds (0: none) */
	/* the user, once authenticated */
	char *user;
	bool user_counted;      /* one of user's sessions in srv->shared (imap_user_put) */
	bool unauth_counted;    /* counted in srv->unauth until it logs in */
	int64_t login_deadline; /* monotonic ms: logged in by then, or closed */
	uint64_t user_id;
	unsigned part;
	struct imap_view *view;
	bool enabled_condstore;
	bool enabled_qresync;
	bool rev2;                /* ENABLE IMAP4rev2: no \Recent, ESEARCH results, UTF-8 names */
	bool enabled_utf8;        /* ENABLE UTF8=ACCEPT (RFC 6855) */
	bool utf8;                /* mailbox names in UTF-8: IMAP4rev2 or UTF8=ACCEPT */
	struct imap_proxy *proxy; /* the store host's connection (front role), or NULL */
	char *id_fwd;             /* front: the client's ID pairs before login, quoted */
	bool id_originated;       /* store host: a front named the client's address (ID) */
	bool front_unauth;        /* store host: a front's connection UNAUTHENTICATEd: only a
				     proxy login may follow (cmd_auth.c) */
	struct imap_notify *notify; /* NOTIFY SET's event groups and pending notifications */
};

/* imap_proxy.c: the proxy login between a front and a store host. */
struct imap_proxy;
/* Reads [imapd] proxy_secret_file (each worker at start): 0, or -1 with *error_r. */
int imap_proxy_init(struct imap_server *srv, char **error_r);
/* SIGHUP (srv->conf the new config): the front's TLS client context made again. */
void imap_proxy_reload(struct imap_server *srv);
void imap_proxy_server_free(struct imap_server *srv);
/* Store host: whether the client is a front (a proxy_trusted address, a secret set or
   proxy_client_ca_file's CAs loaded): its logins need no TLS (the front ends the client's
   TLS), its STARTTLS asks for a client certificate. */
bool imap_proxy_from_front(const struct imap_client *c);
/* Store host: whether authcid/passwd is the proxy credential, from a proxy_trusted address
   (over TLS with proxy_require_tls); else false with *why_r. */
bool imap_proxy_credential_ok(struct imap_client *c, const char *authcid, const char *passwd,
			      const char **why_r);
/* Front: connects to store host host and logs in there as authz (the user's address) with the
   proxy credential; the command is resumed when that is done (imap_proxy_login_reply). */
void imap_proxy_start(struct imap_client *c, const char *login, const char *authz,
		      const char *host);
/* The command's reply once the store host answered: false while it has not. On success the
   client relays from now on (IMAP_CF_PROXY). */
bool imap_proxy_login_reply(struct imap_cmd *cmd);
void imap_proxy_free(struct imap_client *c);
/* Front: closes every parked store host connection (a SIGHUP's config, a drain: proxy_hosts,
   proxy_tls or the CA may have changed; why is logged). */
void imap_proxy_pool_flush(struct imap_server *srv, const char *why);
/* ID's parameter list before login: a front keeps the client's pairs (RFC 2971 limits) to
   send to the store host with x-originating-ip/port; a store host takes the client's address
   from a front's x-originating-ip (once) and logs it instead of the front's. */
void imap_proxy_id(struct imap_client *c, const struct imap_arg *list);
/* The relay's two directions (the client's input, and its output drained). */
void imap_proxy_from_client(struct imap_client *c);
void imap_proxy_to_client(struct imap_client *c);
void imap_proxy_be_read(struct bufferevent *bev, void *arg);
void imap_proxy_be_write(struct bufferevent *bev, void *arg);

/* imap_client.c */
void imap_client_new(struct imap_server *srv, struct net_server *ns, int fd,
		     const struct sockaddr *sa, socklen_t salen, bool tls);
void imap_client_close(struct imap_client *c, const char *why);
/* Frees at once (worker exit). */
void imap_server_free_client(struct imap_client *c);
/* imap_server.c: a new connection on the plain listener (arg = the imap_server), counted
   per address and per address not logged in, or refused with a BYE: imapd's accept path,
   which the fuzz harness uses too. */
void imap_server_accept_plain(struct net_server *ns, int fd, const struct sockaddr *sa,
			      socklen_t salen, void *arg);
/* imap_server.c: one worker's world, as imapd's workers and the fuzz harness set it up:
   zeroes srv, makes the event base, opens the store ([store] path) with its group committer
   on the base and its change watcher, the directory, the [imapd] limits of conf (kept:
   srv->conf) and per-address connection counts; tls_ctx (an SSL_CTX, or NULL) is borrowed.
   Fatal on failure. The caller adds the listeners (srv->plain, srv->tls).
   imapd_worker_free drops the clients left and frees everything, listeners included. */
void imapd_worker_init(struct imap_server *srv, struct conf *conf, void *tls_ctx);
void imapd_worker_free(struct imap_server *srv);
void imap_client_set_state(struct imap_client *c, enum imap_state next);
/* The connection is no longer one not logged in (it logged in, or ends): uncounted. */
void imap_unauth_put(struct imap_client *c);
/* One more invalid command: after [imapd] max_bad_commands in a row, BYE and close. */
void imap_client_count_bad(struct imap_client *c);
/* Starts TLS on the connection (STARTTLS); -1 when TLS is not configured. */
int imap_client_starttls(struct imap_client *c);
/* c->bev was replaced by a filter over the old one (COMPRESS): callbacks and watermarks on
   the new one. */
void imap_client_rewrap(struct imap_client *c);
/* imap_compress.c: from now on the connection is raw deflate both ways (RFC 4978); -1 when
   zlib cannot start (nothing changed). */
int imap_compress_start(struct imap_client *c);
/* A resumable command calls this when it can go on (after an asynchronous event). */
void imap_client_resume(struct imap_client *c);
struct evbuffer *imap_out(struct imap_client *c);
bool imap_out_full(struct imap_client *c);
/* Queues a body range of fd for streaming; the command is resumed when it is written. The
   bytes go as they are (a literal8's data). */
void imap_client_stream(struct imap_client *c, int fd, uint64_t off, uint64_t len);
/* The same for the data of a plain literal, which cannot hold NUL (RFC 3501 CHAR8): a NUL
   of the file (a message APPENDed as literal8) is sent as 0x80, so the size holds. */
void imap_client_stream_text(struct imap_client *c, int fd, uint64_t off, uint64_t len);
/* The same, decoding the range with cte and sending decoded bytes [skip, skip + emit). */
void imap_client_stream_decoded(struct imap_client *c, int fd, uint64_t off, uint64_t len,
				enum cte cte, uint64_t skip, uint64_t emit);
/* Frees the blobs of an APPEND in progress. */
void imap_client_append_reset(struct imap_client *c);
/* imap_server.c: a client left; a draining worker exits after its last one. */
void imap_server_client_left(struct imap_server *srv);
/* Syncs the idle sessions whose mailbox is in a changed partition (parts[p]; NULL: all). */
void imap_server_changed(struct imap_server *srv, const bool *parts);

/* imap_metrics.c: imapd's metric families, after the shared ones (common/metrics_std.h). */
enum {
	IM_COMMANDS = MS_NSTD, /* counter {command, result} */
	IM_COMMAND_SECONDS,    /* histogram {command} */
	IM_SESSIONS,           /* gauge {state} */
	IM_IDLE,               /* gauge */
	IM_PROXY_LEGS,         /* counter {leg}: proxy logins on a dialed or a reused connection */
	IM_PROXY_PARKED,       /* gauge: parked store host connections (front) */
	IM_NFAMILIES
};
/* Master, before fork: the shared region for workers. */
void imap_metrics_init(unsigned workers);
/* A command's tagged reply ("OK", "NO", "BAD") is sent: counted with its latency. */
void imap_metrics_command(const struct imap_cmd *cmd, const char *status);
/* The worker's metrics endpoint (fds from the master, may be empty) and control socket. */
struct obs;
struct net_fds;
struct obs *imap_obs_start(struct imap_server *srv, const struct net_fds *fds);

/* imap_reply.c */
void imap_printf(struct imap_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void imap_write(struct imap_client *c, const void *p, size_t len);
/* The data of a plain literal: as imap_write, a NUL sent as 0x80. */
void imap_write_text(struct imap_client *c, const void *p, size_t len);
/* astring/nstring output: atom when possible, else quoted, else literal. */
void imap_write_astring(struct imap_client *c, const char *s, size_t len);
void imap_write_string(struct imap_client *c, const char *s, size_t len);
/* A quoted string that may hold UTF-8 (IMAP4rev2); a literal when it holds CR, LF or NUL. */
void imap_write_utf8(struct imap_client *c, const char *s, size_t len);

/* imap_cmd.c */
const struct imap_cmd_def *imap_cmd_find(const char *name, size_t len);
/* The command names as the metrics label them: every table name, "UID " and each name with
   a UID form, then "unknown" (a line naming no command); NULL-terminated. And cmd's index in
   that list. */
const char *const *imap_cmd_metric_names(void);
unsigned imap_cmd_metric_index(const struct imap_cmd *cmd);
/* Runs the command in c->cmd (first call or resumption). */
void imap_cmd_run(struct imap_client *c);
/* Sends the untagged updates allowed now and the tagged reply; returns true (STYLE 9). */
bool imap_cmd_reply(struct imap_cmd *cmd, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool imap_cmd_ok(struct imap_cmd *cmd, const char *text);
bool imap_cmd_bad(struct imap_cmd *cmd, const char *text);
bool imap_cmd_no(struct imap_cmd *cmd, const char *text);
/* NO naming a store error ([TRYCREATE], [SERVERBUG], ...). */
bool imap_cmd_store_error(struct imap_cmd *cmd, int err, const char *what);
/* Argument helpers: the i-th top-level argument (NULL past the end) and their count. */
const struct imap_arg *imap_cmd_arg(const struct imap_cmd *cmd, size_t i);
size_t imap_cmd_argc(const struct imap_cmd *cmd);
/* Copies an astring argument as a C string (NULL when not an astring or holds NUL). */
char *imap_arg_dup(const struct imap_arg *a);
void imap_capability(struct imap_client *c, struct buf *out);

/* imap_view.c */
/* Opens the view; first_recent: the first UID this session claimed \Recent (UINT32_MAX:
   none, EXAMINE) from imap_view_recent_check or the claim's write. */
int imap_view_open(struct imap_cmd *cmd, uint64_t mbox, const char *name, bool readonly,
		   uint32_t first_recent);
/* SELECT's \Recent claim: a read tells whether mbox has \Recent messages to claim. False:
   nothing to write, *first_r is the first UID to show \Recent (UINT32_MAX on error). True:
   the claim needs a write, imap_view_take_recent_fn in the group commit. */
struct imap_recent_claim {
	uint64_t mbox;
	uint32_t first;
};
bool imap_view_recent_check(struct imap_client *c, uint64_t mbox, uint32_t *first_r);
int imap_view_take_recent_fn(struct store_txn *t, void *arg); /* arg: imap_recent_claim */
void imap_view_close(struct imap_client *c);
/* m as the view's client sees it: its private \Seen and MODSEQ on another user's mailbox
   (store_seen_apply); nothing on its own. */
int imap_view_overlay(const struct imap_view *v, struct store_txn *t, struct store_msg *m);
/* The client's viewer name for mailbox mbox (store_seen.c): c->user on another user's
   mailbox, NULL on its own (or for a name too long to keep private \Seen). */
const char *imap_viewer_of(const struct imap_client *c, struct store_txn *t, uint64_t mbox);
/* STATUS counters of mbox as c sees them: UNSEEN its own on another user's mailbox. */
int imap_mbox_status(const struct imap_client *c, struct store_txn *t, uint64_t mbox,
		     struct store_status *st);
/* Brings the view up to date and sends EXISTS/RECENT/FETCH (and EXPUNGE when allowed). */
void imap_view_sync(struct imap_client *c, bool allow_expunge);
/* Sequence number of uid (0 when absent). */
uint32_t imap_view_seq(const struct imap_view *v, uint32_t uid);
/* Resolves a sequence-set argument into view indexes: *set_r lists UIDs, sorted. -1 with a
   reason in *why_r for a bad set or a sequence number past EXISTS. */
int imap_view_resolve(struct imap_client *c, const char *s, size_t len, bool uid,
		      struct imap_seqset *uids_r, const char **why_r);
/* imap_view_set.c: the same two resolutions on a view alone (imap_view_resolve and
   imap_view_resolve_key call them with c's view). */
int imap_view_set_resolve(const struct imap_view *v, const char *s, size_t len, bool uid,
			  struct imap_seqset *uids_r, const char **why_r);
int imap_view_set_resolve_key(const struct imap_view *v, const char *s, size_t len,
			      struct imap_seqset *uids_r);
/* A CONDSTORE enabling command (RFC 7162 3.1): the first one in a session with a mailbox
   selected also sends "* OK [HIGHESTMODSEQ n]". */
void imap_view_enable_condstore(struct imap_client *c);
/* Before a response names keywords kw (read in t): "* FLAGS" first when one of them was
   not announced to this session yet (another session made it). */
void imap_view_keywords_announce(struct imap_client *c, struct store_txn *t, uint64_t kw);
/* A sequence set as a SEARCH key: the same, except that numbers past EXISTS match nothing
   (SEARCH answers OK: such a number is no syntax error, it names no message); -1 only when
   it is not a sequence set. */
int imap_view_resolve_key(struct imap_client *c, const char *s, size_t len,
			  struct imap_seqset *uids_r);
/* Sends FLAGS and PERMANENTFLAGS naming the mailbox's keywords now. */
void imap_view_send_flags(struct imap_client *c, struct store_txn *t);
/* QRESYNC: "* VANISHED (EARLIER) ..." for UIDs expunged since modseq since (only those in
   known when given). */
int imap_view_vanished(struct imap_client *c, struct store_txn *t, uint64_t since,
		       const struct imap_seqset *known);
/* Removes uid from the view sending "* n EXPUNGE". */
void imap_view_expunged(struct imap_client *c, uint32_t uid);
void imap_view_set_flags(struct imap_view *v, uint32_t uid, unsigned flags, uint64_t kw);
/* Writes a flag list "(\Seen kw ...)" for flags/keywords (recent adds \Recent). */
void imap_flags_write(struct imap_client *c, unsigned flags, uint64_t kw, bool recent,
		      struct store_txn *t);
/* Parses a flag list argument (a list or one flag) into flags/keywords (creating keywords
   when t is a write txn). -1 with *why_r on a bad flag. */
int imap_flags_parse(const struct imap_arg *a, struct store_txn *t, uint64_t mbox, bool create,
		     unsigned *flags_r, uint64_t *kw_r, const char **why_r);

/* imap_commit.c: runs fn(t, arg) in the worker's group commit on partition part (blob: a
   durable blob fn references, freed after the commit, or NULL) and resumes the command after
   the commit. fn runs in the group committer's thread and may read the client's view and
   command: the client stays allocated until the commit is back, even if it left (then it is
   freed there). arg_free(arg) runs when the command ends. A handler resumed while cmd->ctx
   is set calls imap_commit_result: *pending_r while the commit is queued, else *rc_r is its
   result. */
void imap_commit_start(struct imap_cmd *cmd, unsigned part, struct store_blob *blob,
		       int (*fn)(struct store_txn *t, void *arg), void *arg,
		       void (*arg_free)(void *arg));
/* imap_commit_start for flag changes ([store] fsync_flags: see store_gc_submit_flags). */
void imap_commit_start_flags(struct imap_cmd *cmd, unsigned part,
			     int (*fn)(struct store_txn *t, void *arg), void *arg,
			     void (*arg_free)(void *arg));
void *imap_commit_result(struct imap_cmd *cmd, bool *pending_r, int *rc_r);
/* Whether cmd's state is a write's (imap_commit_start ran for it). */
bool imap_commit_active(const struct imap_cmd *cmd);
/* A write c queued itself (c->ncommits++ before store_gc_*) is back: resumes c, or frees it
   if it left meanwhile (then false). */
bool imap_client_commit_back(struct imap_client *c);

/* imap_textmatch.c: SEARCH text keys on a message's searchable text (common/mimetext.h).
   Needles are folded first with mimetext_fold. */
struct imap_textmatch;
struct imap_textmatch *imap_textmatch_new(void);
void imap_textmatch_free(struct imap_textmatch **tmp);
/* Whether the folded needle occurs in the message file fd of size bytes: in its body (text
   leaves decoded, MIME header fields of its parts), and with top in the message's header
   fields too. The file is streamed in 64 KiB chunks. */
bool imap_textmatch_file(struct imap_textmatch *tm, int fd, uint64_t size, const char *needle,
			 size_t nlen, bool top);
/* Whether the folded needle occurs in a raw header field value (after the colon; folds and
   RFC 2047 encoded words decoded). */
bool imap_text_field_contains(const char *raw, size_t len, const char *needle, size_t nlen);
/* PREVIEW (RFC 8970): up to IMAP_PREVIEW_CHARS characters of the first text/plain or
   text/html part that is not an attachment (decoded, UTF-8, white space runs as one space,
   HTML tags dropped) appended to out; false when the message has no such part. */
#define IMAP_PREVIEW_CHARS 200
bool imap_text_preview(int fd, uint64_t size, struct buf *out);

/* imap_msgfile.c: what the message cache lacks, read from the message file. A command keeps
   one imap_msgfile (zeroed) for the messages it looks at; what it holds is for the last one. */
struct msgcache_view;
struct str_view;
struct imap_msgfile {
	struct buf cache;    /* a cache built from the file (the message has none) */
	uint64_t cache_blob; /* whose (0: none) */
	struct buf header;   /* a whole header read from the file (the cache's is cut) */
	uint64_t header_blob;
};
void imap_msgfile_release(struct imap_msgfile *mf);
/* Parses m's cache into *mv; a message without one (or with a damaged one) gets a cache built
   from its file, kept in mf, and m->cache/cache_len point at it. 0, or -1 when the file is
   unreadable too (*mv then holds RFC 3501 defaults). */
int imap_msgfile_cache(struct store *st, unsigned part, struct store_msg *m,
		       struct imap_msgfile *mf, struct msgcache_view *mv);
/* The message's whole header block in *hdr_r: mv's when it is whole, else read from the file
   (at most IMAP_HEADER_FILE_MAX bytes) into mf. 0, or -1 (then *hdr_r is mv's, cut). */
int imap_msgfile_header(struct store *st, unsigned part, const struct store_msg *m,
			const struct msgcache_view *mv, struct imap_msgfile *mf,
			struct str_view *hdr_r);

/* imap_fetch.c: the items of one FETCH, from a table of every item (name, parser,
   per-message writer), and one message's "* n FETCH (...)" line. */
struct imap_fetch;
struct imap_fetch *imap_fetch_new(void);
void imap_fetch_free(struct imap_fetch **fp);
/* FETCH's items argument: a macro (ALL FAST FULL), one item or a list; -1 when invalid. */
int imap_fetch_parse(struct imap_fetch *f, const struct imap_arg *items);
/* Adds the item name (UID of UID FETCH, MODSEQ of CHANGEDSINCE, FLAGS after the implicit
   \Seen); an item asked twice is answered once. -1 when unknown or too many. */
int imap_fetch_add(struct imap_fetch *f, const char *name);
/* Whether an item sets \Seen (a non-PEEK body), or enables CONDSTORE (MODSEQ). */
bool imap_fetch_sets_seen(const struct imap_fetch *f);
bool imap_fetch_condstore(const struct imap_fetch *f);
/* The bytes of BODY[section] of m, a message of partition part (section as
   inside the brackets: "", "1.2", "TEXT", "2.MIME", "HEADER.FIELDS (From)", ...): 0 and the
   range [*off_r, *off_r + *len_r) of its file, 1 and the bytes appended to out
   (HEADER.FIELDS[.NOT]), or -1 (no such section). For the bytes of IMAP URLs (CATENATE,
   URLFETCH: imap_url_bytes). */
int imap_fetch_section_bytes(struct imap_client *c, unsigned part, const struct store_msg *m,
			     const struct msgcache_view *mv, struct imap_msgfile *mf,
			     const char *section, uint64_t *off_r, uint64_t *len_r,
			     struct buf *out);
/* Whether every item is written from memory, never streamed from the message file, and
   none sets \Seen (headers fields only: NOTIFY's MessageNew attributes). */
bool imap_fetch_in_memory(const struct imap_fetch *f);
/* Whether a message was suspended half-written (imap_fetch_message returned 0). */
bool imap_fetch_in_message(const struct imap_fetch *f);
/* Writes (the rest of) view message vi, skipped when its modseq is not above changedsince
   (0: none) or it is gone: 1 done, 0 suspended inside it (a body is streaming: call again
   once it is out), -1 the FETCH fails with the NO text in *why_r (an unknown CTE before
   anything of the message was written, or a missing message file: connection closed). */
int imap_fetch_message(struct imap_client *c, struct imap_fetch *f, struct store_txn *t, size_t vi,
		       uint64_t changedsince, const char **why_r);

/* imap_search.c: search keys compiled for a view and matched per message. The compiler
   and matcher need no session: mailctl search runs them on a view of its own making
   (libheron_imap_search: imap_search.c, imap_textmatch.c, imap_view_set.c). */
struct imap_search;
/* What keys are compiled for: the view (messages, sequence numbers, \Recent, the saved
   result $), the store its message files are read from, whether the session is
   IMAP4rev2 (no \Recent keys), and an id for debug log lines. */
struct imap_search_scope {
	struct store *store;
	const struct imap_view *view;
	bool rev2;
	uint64_t id;
};
/* The scope of c's selected view. */
#define IMAP_SEARCH_SCOPE(c) \
	((struct imap_search_scope){ (c)->srv->store, (c)->view, (c)->rev2, (c)->id })
/* Compiles the keys [p, end) for sc's view (sc is copied; its view is borrowed until the
   search is freed); t (a read txn, borrowed as long) looks up keywords and later the
   messages. NULL with the BAD text in *why_r. */
struct imap_search *imap_search_compile(const struct imap_search_scope *sc, struct store_txn *t,
					const struct imap_arg *p, const struct imap_arg *end,
					const char **why_r);
void imap_search_free(struct imap_search **sp);
/* Keys kept past their command (RETURN (UPDATE), imap_context.c) match again in a new txn:
   keywords the mailbox did not have at compile time are looked up again, the full-text
   index is asked again. Sequence numbers and "$" keep what they meant at compile time (RFC
   5267 4.3); so does WITHIN's cut-off. */
void imap_search_rebind(struct imap_search *s, struct store_txn *t);
/* Whether the keys are ALL alone: every message matches, none need be read. */
bool imap_search_is_all(const struct imap_search *s);
/* Whether a MODSEQ key is used (the reply then names a modseq, RFC 7162 3.1.5). */
bool imap_search_uses_modseq(const struct imap_search *s);
/* Whether view message vi matches; *m_r is its row (false too when it is gone). */
bool imap_search_match(struct imap_search *s, size_t vi, struct store_msg *m_r);

/* imap_context.c: RETURN (UPDATE) contexts of SEARCH and SORT (RFC 5267 4.3). */
#define IMAP_CONTEXTS_MAX 8 /* per selected mailbox; more get NO [NOUPDATE] */
struct imap_context;
struct imap_sort_crit;
/* Whether a context has that tag (a new UPDATE with it is BAD: RFC 5267 4.3). */
bool imap_context_tag_used(const struct imap_view *v, const char *tag);
/* Keeps the keys (*keys taken: NULL after) and the result, n UIDs in the requested order;
   crit NULL for a SEARCH. false when IMAP_CONTEXTS_MAX are kept (nothing taken). */
bool imap_context_add(struct imap_view *v, const char *tag, bool uid, struct imap_search **keys,
		      const struct imap_sort_crit *crit, size_t ncrit, unsigned need,
		      const uint32_t *uids, size_t n);
/* CANCELUPDATE of one tag; false when no context has it. */
bool imap_context_cancel(struct imap_view *v, const char *tag);
void imap_context_free_all(struct imap_view *v);
/* Before the EXPUNGE (or VANISHED) of uid at sequence number seq: REMOVEFROM of each
   context holding it. */
void imap_context_expunged(struct imap_client *c, uint32_t uid, size_t seq);
/* After a view sync that saw changes (t: its txn): each context's keys run again, and the
   difference is sent as REMOVEFROM and ADDTO. */
void imap_context_update(struct imap_client *c, struct store_txn *t);

/* imap_sort.c: SORT and THREAD keys and algorithms (RFC 5256, RFC 5957). */
enum imap_sort_key {
	SORT_ARRIVAL,
	SORT_CC,
	SORT_DATE,
	SORT_FROM,
	SORT_SIZE,
	SORT_SUBJECT,
	SORT_TO,
	SORT_DISPLAYFROM,
	SORT_DISPLAYTO,
};
#define IMAP_SORT_CRITERIA_MAX 16
struct imap_sort_crit {
	enum imap_sort_key key;
	bool reverse;
};
/* What the keys of a set are read for (the header fields parsed per message). */
enum {
	IMAP_SORT_NEED_SUBJECT = 1u << 0,
	IMAP_SORT_NEED_ADDR = 1u << 1,
	IMAP_SORT_NEED_THREAD = 1u << 2, /* Message-ID, References, In-Reply-To, subject */
};
enum imap_thread_alg { THREAD_ORDEREDSUBJECT, THREAD_REFERENCES, THREAD_REFS };
/* SORT's criteria list into crit (up to IMAP_SORT_CRITERIA_MAX), *need_r |= what they read;
   -1 when invalid. */
int imap_sort_parse(const struct imap_arg *list, struct imap_sort_crit *crit, size_t *n_r,
		    unsigned *need_r);
struct imap_sort_set;
struct imap_sort_cache;
/* A set over cache (the selected mailbox's parsed keys, made at its first use). */
struct imap_sort_set *imap_sort_set_new(struct imap_sort_cache **cache, unsigned need);
void imap_sort_cache_free(struct imap_sort_cache **cp);
void imap_sort_set_free(struct imap_sort_set **sp);
/* Adds message m (sequence number seq); its cache is read now (m valid for its txn only). */
void imap_sort_set_add(struct imap_sort_set *s, uint32_t seq, const struct store_msg *m);
/* Adds message uid from the cache alone when its keys are there (false: not added). */
bool imap_sort_set_add_cached(struct imap_sort_set *s, uint32_t seq, uint32_t uid);
size_t imap_sort_set_count(const struct imap_sort_set *s);
/* Sorts by the criteria, ties in sequence order; then imap_sort_at(i) is the i-th. */
void imap_sort_run(struct imap_sort_set *s, const struct imap_sort_crit *crit, size_t n);
uint32_t imap_sort_at(const struct imap_sort_set *s, size_t i, bool uid);
/* THREAD: the threads as "(1 2 (3)(4))(5)" appended to out (UIDs when uid). */
void imap_thread_run(struct imap_sort_set *s, enum imap_thread_alg alg, bool uid, struct buf *out);

/* cmd_sort.c */
bool cmd_sort(struct imap_cmd *cmd);
bool cmd_thread(struct imap_cmd *cmd);

/* cmd_fetch.c */
bool cmd_fetch(struct imap_cmd *cmd);
/* cmd_search.c */
bool cmd_search(struct imap_cmd *cmd);
/* RETURN (PARTIAL range) of SEARCH and SORT (RFC 9394): "1:100" counts from the first
   result, "-1:-100" from the last. */
struct imap_partial {
	bool from_end;
	uint32_t lo, hi;  /* 1-based, lo <= hi */
	const char *text; /* the range as the client wrote it (echoed in the reply) */
	size_t text_len;
};
int imap_partial_parse(const struct imap_arg *a, struct imap_partial *p);
/* The results [*from_r, *to_r) of n in the range; false when none is. */
bool imap_partial_slice(const struct imap_partial *p, size_t n, size_t *from_r, size_t *to_r);

/* command handlers, by family */
bool cmd_capability(struct imap_cmd *cmd);
bool cmd_noop(struct imap_cmd *cmd);
bool cmd_logout(struct imap_cmd *cmd);
bool cmd_starttls(struct imap_cmd *cmd);
bool cmd_compress(struct imap_cmd *cmd);
bool cmd_unauthenticate(struct imap_cmd *cmd);
bool cmd_login(struct imap_cmd *cmd);
bool cmd_authenticate(struct imap_cmd *cmd);
bool cmd_id(struct imap_cmd *cmd);
bool cmd_enable(struct imap_cmd *cmd);
bool cmd_create(struct imap_cmd *cmd);
bool cmd_delete(struct imap_cmd *cmd);
bool cmd_rename(struct imap_cmd *cmd);
bool cmd_subscribe(struct imap_cmd *cmd);
bool cmd_list(struct imap_cmd *cmd);
bool cmd_namespace(struct imap_cmd *cmd);
bool cmd_select(struct imap_cmd *cmd);
bool cmd_status(struct imap_cmd *cmd);
bool cmd_close(struct imap_cmd *cmd);
bool cmd_store(struct imap_cmd *cmd);
bool cmd_expunge(struct imap_cmd *cmd);
bool cmd_copy(struct imap_cmd *cmd);
bool cmd_append(struct imap_cmd *cmd);
bool cmd_myrights(struct imap_cmd *cmd);
bool cmd_getacl(struct imap_cmd *cmd);
bool cmd_setacl(struct imap_cmd *cmd);
bool cmd_idle(struct imap_cmd *cmd);
bool cmd_quota(struct imap_cmd *cmd);
bool cmd_cancelupdate(struct imap_cmd *cmd);
bool cmd_getmetadata(struct imap_cmd *cmd);
bool cmd_setmetadata(struct imap_cmd *cmd);
bool cmd_setquota(struct imap_cmd *cmd);
/* cmd_auth.c: whether AUTHENTICATE SCRAM-SHA-256 (plus: -PLUS) is offered to c now: the
   directory can give SCRAM secrets, the connection may authenticate (TLS or allow_plaintext),
   and for -PLUS it is TLS. */
bool imap_scram_offered(const struct imap_client *c, bool plus);
/* cmd_auth.c: " AUTH=SCRAM-SHA-256[ AUTH=SCRAM-SHA-256-PLUS]" into out when offered. */
void imap_scram_caps(const struct imap_client *c, struct buf *out);
bool cmd_genurlauth(struct imap_cmd *cmd);
bool cmd_resetkey(struct imap_cmd *cmd);
bool cmd_urlfetch(struct imap_cmd *cmd);

/* cmd_urlauth.c: URLAUTH (RFC 4467). Whether the full URLAUTH URL u (parsed from s) may be
   used by this session on mailbox mbox of t (the URL's user's): mechanism INTERNAL with the
   mailbox key's token, not expired, this host, and an access that admits the session. */
/* cmd_metadata.c: LIST RETURN (METADATA (entry ...)) of RFC 9590. Whether a is such an entry
   list (valid entry names, at most 256); then, after a mailbox's LIST line, its METADATA
   response (mailbox id mbox, stored name[0..len), read in t): each entry's value, NIL when it
   has none, as GETMETADATA with DEPTH 0 answers it. */
bool imap_list_metadata_ok(const struct imap_arg *a);
void imap_list_metadata_write(struct imap_client *c, struct store_txn *t, uint64_t mbox,
			      const char *name, size_t len, const struct imap_arg *a);
struct imap_url;
/* cmd_urlauth.c: the untagged "OK [URLMECH ...]" of a SELECT or EXAMINE (RFC 4467). */
void imap_urlauth_select(struct imap_client *c);
bool imap_urlauth_verify(const struct imap_client *c, struct store_txn *t, uint64_t mbox,
			 const struct imap_url *u, const char *s);
/* The bytes URL u names in mailbox mbox of t (partition part): 0 and the range [*off_r,
   *off_r + *len_r) of *fd_r (to close), or, *fd_r -1, of mem (HEADER.FIELDS, made in
   memory); -1 when it names nothing (UIDVALIDITY, UID, section). ;PARTIAL= applied. */
int imap_url_bytes(struct imap_client *c, struct store_txn *t, unsigned part, uint64_t mbox,
		   const struct imap_url *u, int *fd_r, uint64_t *off_r, uint64_t *len_r,
		   struct buf *mem);
/* cmd_auth.c: the client's line after AUTHENTICATE's "+ ". */
void imap_auth_line(struct imap_client *c, const char *line, size_t len);
/* cmd_auth.c: a session of c->user ends: its count in the shared table goes (if taken). */
void imap_user_put(struct imap_client *c);
/* An IDLE session got "DONE" (or a bad line). */
void imap_idle_done(struct imap_client *c, bool ok);
/* cmd_notify.c: NOTIFY (RFC 5465). At most NOTIFY_QUEUE_MAX notifications wait for a session
   that cannot take them (a command runs, its output is full); one more ends its
   notifications with [NOTIFICATIONOVERFLOW]. */
#define NOTIFY_QUEUE_MAX 256
struct imap_notify;
bool cmd_notify(struct imap_cmd *cmd);
void imap_notify_free(struct imap_client *c);
/* Sends what waits (before a tagged reply, or when c may be written to); allow_expunge as
   imap_view_sync's. */
void imap_notify_flush(struct imap_client *c, bool allow_expunge);
/* c's output drained (or it went idle): what waits goes out if c may be written to now. */
void imap_notify_drained(struct imap_client *c);
/* Whether the selected mailbox's FlagChange was asked for: its FETCH FLAGS then carry the UID
   (RFC 5465 5.1). */
bool imap_notify_flag_uid(const struct imap_client *c);
/* Whether c has NOTIFY set and may be written to now, outside a command's replies (no
   command runs but IDLE, output not full, not closing). */
bool imap_notify_listening(struct imap_client *c);
/* The store watcher saw partitions change (parts[p]; NULL: all): the new change log records
   go to the NOTIFY sessions of their users. */
void imap_notify_changed(struct imap_server *srv, const bool *parts);

/* cmd_select.c: STATUS items (a list of known names), and one "* STATUS" line. */
struct store_status;
bool imap_status_items_ok(const struct imap_client *c, const struct imap_arg *items);
void imap_status_write(struct imap_client *c, const char *name, size_t len, uint64_t mbox,
		       const struct store_status *st, const struct imap_arg *items);
/* OBJECTID (RFC 8474): a mailbox's MAILBOXID and a message's EMAILID (its blob: the same on
   every copy of it, never reused), as objectid text "F..."/"M..." into out (>= 24 bytes). */
#define IMAP_OBJECTID_MAX 24
void imap_mailboxid(uint64_t mbox, char *out);
void imap_emailid(uint64_t blob, char *out);

/* imap_ns.c: namespaces (RFC 2342) and whose mailbox a name is. A name resolved: the owner's
   user id and partition, the mailbox id, the client's rights (every one for its own), and
   the names in the owner's namespace and of the owner (malloc'd: imap_ns_box_release). */
struct imap_ns_box {
	uint64_t owner, mbox;
	unsigned part;
	uint32_t rights; /* STORE_ACL_* */
	bool own;
	char *local;      /* the name in the owner's namespace */
	char *owner_name; /* the owner's user name */
};
/* A validated (stored-form) name: the client's own mailbox name (mbox not looked up: 0), or
   another user's or the shared namespace's mailbox the client may see ('l'). Errors:
   STORE_ENOMBOX (none, or no 'l'), STORE_EMOVED (the owner is no user here and a tombstone
   says it moved to another host: imap_cmd_store_error answers NO [CANNOT]), store errors. */
int imap_ns_find(struct imap_client *c, const char *name, struct imap_ns_box *b);
void imap_ns_box_release(struct imap_ns_box *b);
/* For CREATE and RENAME's new name (RFC 4314 4: 'k' on the nearest existing parent): as
   imap_ns_find, but for a name that need not exist, b->mbox and b->rights being those of
   the nearest existing mailbox above it in the owner's namespace (0 and no rights when
   none is: the top of the namespace); the client's own names as imap_ns_find. Errors:
   STORE_ENOMBOX (a namespace's prefix or user level, no such owner), store errors. */
int imap_ns_parent(struct imap_client *c, const char *name, struct imap_ns_box *b);
/* The mailbox messages are put into by cmd (APPEND, COPY, MOVE; verb names it in replies):
   the client's own by name, or another user's it holds 'i' on (RFC 4314 4). 0 and *b
   (b->mbox looked up; release it), or -1 when the NO was sent: [TRYCREATE] for a name of
   its own that does not exist, [NONEXISTENT] for another namespace's name it cannot see,
   [NOPERM] without 'i', or the store error. */
int imap_ns_target(struct imap_cmd *cmd, const char *name, const char *verb,
		   struct imap_ns_box *b);
/* Before each command of a session that has another user's mailbox selected: the rights
   read again (RFC 4314 5.1.1; rows of the owner's partition, one read txn), so STORE,
   EXPUNGE, FETCH's \Seen, COPY and the others check what the list says now. Rights that
   leave nothing to change make the mailbox read-only (FLAGS and PERMANENTFLAGS again);
   without 'r' the session gets * BYE [NOPERM] and is closed, unless closing (CLOSE and
   UNSELECT run; LOGOUT is not checked). true when the session was closed (no tagged
   reply). */
bool imap_ns_recheck(struct imap_client *c, bool closing);
/* The flags (enum store_flag) a message put into a mailbox keeps with rights: \Seen with
   's', \Deleted with 't', the others with 'w' (keywords too: 'w'). RFC 4314 4. */
unsigned imap_ns_keep_flags(uint32_t rights);
/* Whether name is one of the other namespaces' (the client cannot create such a name). */
bool imap_ns_reserved(const struct imap_client *c, const char *name);
/* The untagged NAMESPACE response. */
void imap_ns_write(struct imap_client *c);
/* The client's subscriptions for imap_ns_list: v sorted (strcmp); only: just the
   subscribed mailboxes (LSUB, LIST (SUBSCRIBED)); lsub: as LSUB lines. */
struct imap_ns_subs {
	char *const *v;
	size_t n;
	bool only, lsub;
};
/* What else a LIST of the other namespaces' names gives: subscriptions (NULL: none said),
   only the mailboxes with a special use (LIST (SPECIAL-USE)), and after each mailbox the
   client may read ('r') its STATUS (RETURN (STATUS (items))) and METADATA (RETURN (METADATA
   (entries))) responses; o NULL: none of these. */
struct imap_ns_listopts {
	const struct imap_ns_subs *subs;
	bool special_only;
	const struct imap_arg *status, *metadata;
};
/* LIST lines of the other namespaces' names matching pattern (with \Subscribed on the
   subscribed ones, and the special use the owner gave a mailbox) as o says: 0 or a store
   error. */
int imap_ns_list(struct imap_client *c, const char *pattern, const struct imap_ns_listopts *o);

/* Mailbox names: validates a client's name (modified UTF-7, no empty levels) and maps INBOX
   case-insensitively. Returns a malloc'd canonical name or NULL with *why_r. After ENABLE
   IMAP4rev2 the client's names are UTF-8 and are first encoded to modified UTF-7 (the form
   the store keeps). */
char *imap_mailbox_name(const struct imap_client *c, const char *s, size_t len,
			const char **why_r);
/* As imap_mailbox_name for a name always in UTF-8 (an IMAP URL's, RFC 5092): the stored name,
   or NULL and *why_r. */
char *imap_mailbox_name_utf8(const char *s, size_t len, const char **why_r);
/* The mailbox name argument i of cmd, validated and converted; NULL after a BAD/NO was sent. */
char *imap_mailbox_arg(struct imap_cmd *cmd, size_t i);
/* Writes a stored (modified UTF-7) mailbox name as the client reads names: as it is, or as
   UTF-8 after ENABLE IMAP4rev2. */
void imap_write_mailbox(struct imap_client *c, const char *name, size_t len);
/* "\Sent" and the others of special (enum store_special, RFC 6154) appended to b, each after
   a space unless b is empty or ends with one. */
void imap_special_use_attrs(struct buf *b, unsigned special);
/* "* LIST" for one mailbox with its attributes (IMAP4rev2 SELECT); 0 or a store error. */
int imap_list_one(struct imap_client *c, struct store_txn *t, const char *name);

#endif

/* agent.h — a load agent: one libevent loop simulating a range of users with SMTP and IMAP
 * client state machines, a timer wheel for Poisson arrivals, per-function histograms, delivery
 * probes, and a JSON-lines control connection to the manager. */
#ifndef HERON_MAILLOAD_AGENT_H
#define HERON_MAILLOAD_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "common/buf.h"
#include "common/histo.h"
#include "common/line.h"
#include "mailload/mailload.h"
#include "mailload/usermodel.h"

struct bufferevent;
struct ctlauth_secret;
struct net_connect;
struct agent;

/* ---- timer wheel: 10 ms ticks, 4096 slots, entries further out wait for their round ---- */
#define WHEEL_TICK_MS 10
#define WHEEL_SLOTS 4096
struct wtimer {
	struct wtimer *next, **pprev;
	uint64_t due; /* tick */
	void (*cb)(struct agent *ag, struct wtimer *t);
};
struct wheel {
	struct wtimer *slot[WHEEL_SLOTS];
	uint64_t now; /* current tick (ms / WHEEL_TICK_MS) */
	uint64_t count;
};
void wheel_init(struct wheel *w, int64_t now_ms);
void wheel_add(struct wheel *w, struct wtimer *t, int64_t due_ms);
void wheel_del(struct wtimer *t);
/* Fires every timer due at or before now_ms. */
void wheel_run(struct wheel *w, struct agent *ag, int64_t now_ms);

/* ---- users ---- */
struct ag_user {
	struct um_user m;
	uint32_t inbox_lastuid; /* highest INBOX UID a check session looked at */
	bool imap_busy;
	uint8_t queued; /* IMAP sessions waiting for the open one to end */
	uint8_t queued_kind[4];
	uint64_t append_seq[4]; /* for queued APPEND sessions: the message sent */
	int64_t append_date[4];
	struct wtimer t_send, t_recv, t_imap;
};

/* A message acknowledged by the server: rcpt ids are user numbers (> 0) or remote (< 0). */
struct ag_sent {
	uint64_t seq;
	int64_t sent_ms, ack_ms;
	uint32_t rcpt_off, nrcpt;
	bool submitted; /* by a local user (counts in R) or by an outside MTA */
};
struct ag_seen {
	uint64_t seq;
	uint32_t user, uidvalidity, uid;
	int64_t ms;
};
struct ag_wait { /* a local delivery the probes look for, in order of the 250s */
	uint64_t seq;
	uint32_t user;
	int64_t ack_ms;
};
/* One key of the set of copies still awaited (open addressing, linear probing). */
struct ag_wkey {
	uint64_t seq; /* 0: empty slot */
	uint32_t user;
};
struct ag_wset {
	struct ag_wkey *a;
	size_t cap, n;
};
/* A copy the reconciliation found: below when its UID is at or under one an earlier look of
   this agent had already covered (the server added it below a UID it had shown). */
struct ag_rseen {
	uint64_t seq;
	uint32_t user, uidvalidity, uid;
	int64_t ms;
	bool below;
};
enum ag_probe_state { PS_IDLE, PS_QUEUED, PS_OPEN, PS_WATCHING };
struct ag_ring { /* a FIFO of fixed-size entries */
	char *a;
	size_t esz, head, len, cap;
};
/* The delivery probes of an agent (probe.c). Per recipient (by global user - 1): the last UID
   looked at and its UIDVALIDITY, the probe's state, the copies awaited, and since when the
   oldest of those has had no probe watching (ms after base_ms, 0 none). */
struct ag_probes {
	uint32_t *lastuid, *uidv, *nwait, *need;
	uint8_t *state;
	int64_t base_ms;
	struct ag_wset awaited; /* the copies probes watch for */
	struct ag_wset expired; /* unseen after their window: the drain still waits for them */
	struct ag_ring fifo;    /* the same copies by 250 time (struct ag_wait): windows end */
	struct ag_ring queue;   /* recipients waiting for a probe connection (uint32_t) */
	struct ag_ring retry;   /* recipients whose probe was refused: queued again in 1 s */
	uint32_t open, cap, cap_max; /* open probes; the cap now and the most it may grow to */
	bool limited;                /* the server refused probes: the cap came down */
	int64_t last_refusal_ms, last_retry_ms;
	uint64_t started, refused, expired_unprobed, idle_missed;
	/* the reconciliation pass */
	uint32_t *recon_users;
	size_t recon_n, recon_next, recon_done;
	uint32_t recon_active;
	uint32_t *recon_ok; /* outcome by recon index: 0 pending, 1 read, 2 failed */
	char (*recon_why)[96];
	uint8_t *recon_tries;
	struct ag_rseen *rseen;
	size_t nrseen, caprseen;
};

#define TS_LB 24 /* log2 buckets of the time series (1 us .. 8 s and above) */
struct ag_ts {
	uint32_t steps[2], errors[2];
	uint32_t lb[2][TS_LB];
};

#define ERRTOP_MAX 32
struct ag_err {
	char msg[96];
	uint8_t fn;
	uint64_t n;
};

enum ag_phase { PH_IDLE, PH_RAMP, PH_STEADY, PH_DOWN, PH_DRAIN, PH_DONE };

enum ag_tls { AG_TLS_NONE, AG_TLS_STARTTLS, AG_TLS_IMPLICIT };
enum { CONN_SMTP, CONN_SUBMIT, CONN_IMAP, CONN_COUNT };

struct ag_server {
	char host[64];     /* numeric, resolved once at set-up */
	char name[ML_STR]; /* as given: SNI and the name verified with --tls-verify */
	char port[8];
	bool implicit; /* TLS from the first byte */
	bool starttls; /* upgrade after the greeting */
};

struct agent {
	struct event_base *base;
	struct ml_cfg cfg;
	enum ag_tls tls;
	SSL_CTX *ssl;      /* client context (no verification: load, not trust) */
	uint64_t fd_limit; /* RLIMIT_NOFILE after ag_fd_budget */
	struct ag_server srv[CONN_COUNT];
	struct ml_server_info server; /* greetings, capabilities, TLS handshakes */
	struct ml_rng rng;
	struct wheel wheel;
	struct event *tick;
	int64_t last_probe_tick;
	enum ag_phase phase;
	int64_t ramp_end, steady_end, down_end, drain_end;
	/* users */
	struct ag_user *users;
	uint32_t nusers;
	struct ag_probes pr;
	/* stats */
	struct histo h[FN_COUNT];
	uint64_t err[FN_COUNT];
	uint64_t steps_all, errors_all;
	struct ag_err errtop[ERRTOP_MAX];
	struct ag_ts *ts;
	uint32_t nts, ts_step_s;
	/* delivery */
	struct ag_sent *sent;
	size_t nsent, capsent;
	int64_t *rcpts;
	size_t nrcpts, caprcpts;
	struct ag_seen *seen;
	size_t nseen, capseen;
	uint64_t *seen_set;
	size_t seen_set_cap, seen_set_n;
	uint64_t seq;
	/* sessions */
	uint32_t open_smtp, open_imap;
	uint64_t sessions_started, sessions_refused;
	struct ml_msg msg;  /* scratch: emitted by reference at once, then reused */
	char imap_delim;    /* hierarchy delimiter, from the first LIST */
	bool imap_id_asked; /* one session asks the server's ID (the disclosure) */
	/* init */
	uint32_t init_next, init_done, init_active;
	uint64_t init_msgs;
	/* the fill record (fillrec): 0 idle, 1 running, 2 done, 3 failed */
	int fill_state;
	char fill_found[400], fill_error[160];
	struct buf fill_msg;
	/* control */
	struct bufferevent *ctl;
	struct line_reader ctl_lr;
	bool authed; /* the manager proved the secret */
	const struct ctlauth_secret *secret;
	char nonce[33]; /* the challenge sent to the manager, hex */
	bool quit;
};

/* agent.c */
int agent_setup(struct agent *ag, const struct ml_cfg *c, const char **error_r);
void agent_free(struct agent *ag);
/* agent_ctl.c: serves the control protocol on fd (a socketpair end or an accepted socket)
   until "quit" or the manager goes; the manager must first prove it knows secret
   (ctlauth.h). */
int agent_serve_fd(int fd, const struct ctlauth_secret *secret);

/* ml_metrics.c: --metrics ADDR (heron-metrics(7)). listen: binds ADDR and maps the region for
   agents columns (the manager before it forks its agents, or an agent of its own); -1 when
   ADDR cannot be bound. set_index: the column of the agent forked next. The agent's loop
   answers scrapes between start and stop; step, sent and tick count. */
int ml_metrics_listen(const char *addr, unsigned agents);
void ml_metrics_set_index(unsigned agent);
void ml_metrics_agent_start(struct event_base *base);
void ml_metrics_agent_stop(void);
void ml_metrics_step(unsigned fn, bool ok, uint64_t us);
void ml_metrics_sent(void);
void ml_metrics_tick(const struct agent *ag);
/* Listens on host:port (net_listen), serves managers one at a time; -1 when it cannot. */
int agent_listen(const char *hostport, const struct ctlauth_secret *secret);
/* The status and results replies of the control protocol. */
void ag_put_status(struct agent *ag, struct buf *o);
void ag_put_results(struct agent *ag, struct buf *o);
void ag_start(struct agent *ag, int64_t t0_ms);
bool ag_measured(const struct agent *ag, int64_t t_us);
/* Records one step of fn that started at t0_us: ok, or failed with why. */
void ag_step(struct agent *ag, enum ml_fn fn, int64_t t0_us, bool ok, const char *why);
void ag_error(struct agent *ag, enum ml_fn fn, const char *why);
struct ag_user *ag_user(struct agent *ag, uint32_t user);
const char *ag_password(const struct agent *ag, uint32_t user, char *tmp, size_t n);
/* A message with rcpts was acknowledged (250 after DATA). */
void ag_sent_ack(struct agent *ag, uint64_t seq, int64_t sent_ms, const int64_t *rcpt, uint32_t n,
		 bool submitted);
/* A user saw a message of this run in INBOX; true when it was a copy this agent awaited. */
bool ag_seen(struct agent *ag, uint32_t user, uint64_t seq, uint32_t uidvalidity, uint32_t uid);
/* Parses "<run.seq@mailload>" from a header block: the seq, or 0. */
uint64_t ag_msgid_seq(const struct agent *ag, const char *hdr, size_t len);
void ag_imap_done(struct agent *ag, struct ag_user *u);
void ag_init_user_done(struct agent *ag);
/* Starts reading (record NULL) or writing user1's fill record. */
void fillrec_start(struct agent *ag, const char *record);
void fillrec_done(struct agent *ag, bool ok, const char *why);
/* Records a sample of a function that is not a timed step (the probe's queueing delays). */
void ag_sample(struct agent *ag, enum ml_fn fn, uint64_t us);

/* probe.c: the copies awaited, the probe pool and the reconciliation pass. */
void probe_setup(struct agent *ag);
void probe_free(struct agent *ag);
/* A local copy was acknowledged: watch for it until ack_ms + the window. */
void probe_wait_add(struct agent *ag, uint64_t seq, uint32_t user, int64_t ack_ms);
/* It was seen (by anyone on this agent); true when it was awaited. */
bool probe_wait_seen(struct agent *ag, uint64_t seq, uint32_t user);
/* Copies awaited for user; copies this agent has not seen, in or after their window. */
bool ag_wants(const struct agent *ag, uint32_t user);
size_t probe_waiting(const struct agent *ag);
/* Once a second and on changes: ends windows, starts probes for queued recipients. */
void probe_tick(struct agent *ag, int64_t now_ms);
/* A probe of user completed its first look: it watches from now on. */
void probe_watching(struct agent *ag, uint32_t user);
/* A probe of user ended; refused: before it could look (connect, greeting or login). */
void probe_done(struct agent *ag, uint32_t user, bool refused);
/* The reconciliation pass: reads the INBOX of each user (the manager's list). */
void recon_start(struct agent *ag, const uint32_t *users, size_t n);
bool recon_running(const struct agent *ag);
/* A reconciliation session of recon index i ended: read (ok) or not (why). */
void recon_done(struct agent *ag, size_t i, bool ok, const char *why);
void recon_seen(struct agent *ag, uint32_t user, uint64_t seq, uint32_t uidvalidity, uint32_t uid);
void recon_put(const struct agent *ag, struct buf *o);
void probe_put_stats(const struct agent *ag, struct buf *o);
/* Starts connecting to server which (CONN_*); cb runs from the loop (common/net.h). */
struct net_connect *ag_connect(struct agent *ag, int which,
			       void (*cb)(struct bufferevent *bev, const char *error, void *arg),
			       void *arg);
/* In that callback: the bufferevent to use, wrapped in TLS when server which speaks implicit
   TLS (the handshake completes later: see ag_tls_event); NULL when TLS set-up failed (bev is
   freed). */
struct bufferevent *ag_connected(struct agent *ag, int which, struct bufferevent *bev);
/* STARTTLS after the server's go-ahead: the TLS bufferevent replacing plain (which it owns),
   or NULL (plain is then still the caller's). */
struct bufferevent *ag_starttls(struct agent *ag, int which, struct bufferevent *plain);
/* For a session's event callback: counts a completed (BEV_EVENT_CONNECTED) or failed TLS
   handshake of protocol imap (0 SMTP, 1 IMAP); returns true when the event was
   BEV_EVENT_CONNECTED. On a failed handshake why gets OpenSSL's reason. */
bool ag_tls_event(struct agent *ag, struct bufferevent *bev, short what, int imap, char *why,
		  size_t n);

/* load_smtp.c */
enum smtp_kind { SK_SUBMIT, SK_MTA, SK_INIT };
/* Starts a session: SUBMIT from user (one message), MTA to user (one message, all local
   recipients), INIT: count messages to user's INBOX from the initial set starting at index. */
void smtp_start(struct agent *ag, enum smtp_kind kind, uint32_t user, uint32_t count);
/* INIT from message index first on. */
void smtp_start_at(struct agent *ag, enum smtp_kind kind, uint32_t user, uint32_t first,
		   uint32_t count);
void ag_after_submit(struct agent *ag, uint32_t user, uint64_t seq, int64_t date_ms);

/* load_imap.c */
void imap_start(struct agent *ag, struct ag_user *u, enum ml_session kind, uint64_t seq,
		int64_t date_ms);
void imap_start_probe(struct agent *ag, uint32_t user);
void imap_start_init(struct agent *ag, uint32_t user);
/* The fill record of user1: read it into ag->fill_found, or write ag->fill_msg; ends with
   fillrec_done(). */
void imap_start_fillrec(struct agent *ag, bool write);
/* Reconciliation: reads user's INBOX; ends with recon_done(ag, idx, ...). */
void imap_start_recon(struct agent *ag, uint32_t user, size_t idx);

/* Message spec for a message sent in this run. */
void ag_msg_spec(const struct agent *ag, struct ml_msg_spec *s, uint64_t seq, int64_t date_ms);
/* Seq numbers of initial (init) messages: user << 20 | folder << 12 | index. */
uint64_t ag_init_seq(uint32_t user, uint32_t folder, uint32_t idx);

#endif

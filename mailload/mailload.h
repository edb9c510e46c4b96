/* mailload.h — types shared inside mailload: the function table (WORKLOAD.md's order), the
 * run configuration (one key table used for profiles, the agent setup message and the report),
 * the deterministic random source and the message generator's interface. */
#ifndef HERON_MAILLOAD_H
#define HERON_MAILLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "common/histo.h"

/* Timed functions. The first FN_NSUMMARY are the summary table, in WORKLOAD.md's order. */
enum ml_fn {
	FN_SMTP_CONNECT,
	FN_SMTP_DATA,
	FN_IMAP_APPEND,
	FN_IMAP_CONNECT,
	FN_IMAP_EXPUNGE,
	FN_IMAP_FETCH_BODY,
	FN_IMAP_FETCH_HDR,
	FN_IMAP_LIST,
	FN_IMAP_LSUB,
	FN_IMAP_SELECT_FOLDER,
	FN_IMAP_SELECT_INBOX,
	FN_IMAP_STORE_DELETED,
	FN_IMAP_UID_STORE_DELETED,
	FN_IMAP_UID_FETCH_HDR,
	FN_IMAP_UID_STORE_SEEN,
	FN_NSUMMARY,
	FN_SMTP_EHLO = FN_NSUMMARY,
	FN_SMTP_STARTTLS,
	FN_SMTP_AUTH,
	FN_SMTP_MAIL,
	FN_SMTP_RCPT,
	FN_SMTP_DATA_CMD,
	FN_SMTP_QUIT,
	FN_IMAP_CAPABILITY,
	FN_IMAP_STARTTLS,
	FN_IMAP_LOGIN,
	FN_IMAP_LOGOUT,
	FN_IMAP_CREATE,
	FN_IMAP_SUBSCRIBE,
	FN_IMAP_STATUS,
	/* The delivery probes' and the reconciliation's own steps: measurement, not workload.
	   They count in no summary function and not in the error rate; a probe that cannot look
	   makes copies late or unchecked, never lost. */
	FN_PROBE_FIRST,
	FN_PROBE_CONNECT = FN_PROBE_FIRST,
	FN_PROBE_LOGIN, /* CAPABILITY, STARTTLS and LOGIN of a probe */
	FN_PROBE_EXAMINE,
	FN_PROBE_FETCH, /* a look: FETCH of Message-IDs, or NOOP */
	FN_PROBE_IDLE,  /* time held in IDLE */
	FN_PROBE_LOGOUT,
	FN_PROBE_QUEUE, /* from the 250 of the oldest copy awaited to the probe's start */
	FN_PROBE_READY, /* from that 250 to the probe's first complete look */
	FN_DELIVERY,    /* not a step: the delivery-check failures (lost, duplicated) count here */
	FN_COUNT,
};

enum ml_fn_class { FC_SUMMARY, FC_OTHER, FC_PROBE };
struct ml_fn_def {
	const char *name;  /* as printed in the report */
	const char *key;   /* short key in JSON */
	uint32_t limit_ms; /* response-time limit (summary functions) */
	bool smtp;         /* protocol, for the time series */
};
extern const struct ml_fn_def ml_fns[FN_COUNT];
int ml_fn_by_key(const char *key);
static inline enum ml_fn_class ml_fn_class(int fn)
{
	return fn < FN_NSUMMARY ? FC_SUMMARY : fn < FN_PROBE_FIRST ? FC_OTHER : FC_PROBE;
}

/* Where the workload is specified, as the reports cite it. */
#define ML_WORKLOAD_SPEC \
	"docs/workload.md in the Heron sources (installed: /usr/share/doc/heron-bench/workload.md)"
#define ML_REQUIRED_PCT 95.0
#define ML_DELIVERY_LIMIT_MS 60000
#define ML_ERROR_RATE_MAX 1.0
/* z of a two-sided 95% confidence interval (Wilson score interval). */
#define ML_CI_Z 1.959963984540054
/* The fewest samples for which an all-compliant function's Wilson lower bound clears 95%:
   n / (n + z^2) > 0.95 from n > 19 z^2 = 72.99. Fewer make a run "invalid (too short)". */
#define ML_MIN_SAMPLES 73

/* Wilson score interval of k successes in n, in percent; n = 0 gives 0..100. */
void ml_wilson(uint64_t k, uint64_t n, double *lo_pct, double *hi_pct);

/* ---- configuration: one table drives profiles, the setup message and the report ---- */
enum ml_cfg_type { CFGT_DBL, CFGT_U64, CFGT_STR };
#define ML_STR 96

/* Ceilings of mailload's working buffers (STYLE 10) */
#define ML_LINE_MAX 4096              /* a line of a report, a profile, a comparison */
#define ML_TEXT_MAX (1u << 16)        /* a short list: reasons, subscriptions, pins, a record */
#define ML_DOC_MAX (1u << 20)         /* a request, a histogram, a generated header */
#define ML_REPORT_TEXT_MAX (1u << 26) /* report.txt */
#define ML_REPORT_HTML_MAX (1u << 28) /* report.html */
#define ML_REPORT_JSON_MAX ((size_t)1 << 31) /* a report.json read back */
#define ML_AGENT_REPLY_MAX ((size_t)1 << 34) /* an agent's result: every histogram and record */

struct ml_cfg {
	/* workload (profile) */
	char profile[ML_STR];
	double send_per_hour, recv_per_hour, imap_per_hour;
	double mix_check, mix_sync, mix_cleanup;
	double rcpt_local;
	double inbox_mean, inbox_max, folder_mean, folder_max, folders_mean, folders_max;
	double subscribed;
	double size_scale;
	double check_delete; /* share of read messages flagged \Deleted in a check session */
	/* run */
	double rate;
	uint64_t users, seed, run_id;
	uint64_t ramp_s, steady_s, down_s, drain_s;
	uint64_t timeout_s, probe_max, max_sessions;
	uint64_t probe_window_s; /* a probe watches a copy this long after its 250 */
	uint64_t min_samples;    /* per summary function, else "invalid (too short)" */
	uint64_t reconcile_s;    /* bound of the reconciliation pass after the drain */
	uint64_t delivery_check; /* 0: no probes and no reconciliation (local copies unchecked) */
	char domain[ML_STR], ext_domain[ML_STR], password[ML_STR];
	char smtp_host[ML_STR], submit_host[ML_STR], imap_host[ML_STR];
	uint64_t smtp_port, submit_port, imap_port;
	char tls[ML_STR]; /* none | starttls | implicit */
	char user_format[ML_STR], users_file[ML_STR], ca_file[ML_STR];
	uint64_t tls_verify;
	char mode[ML_STR]; /* run | init */
	/* per agent (set by the manager) */
	uint64_t agent, nagents, user_lo, user_hi, t0_ms;
};

struct ml_cfg_key {
	const char *name;
	enum ml_cfg_type type;
	size_t off;
	bool profile; /* printed as part of the profile */
	const char *doc;
};
extern const struct ml_cfg_key ml_cfg_keys[];
extern const size_t ml_cfg_nkeys;

/* Fills defaults for a built-in profile ("tiny", "small", "corporate"); -1 if unknown. */
int ml_cfg_defaults(struct ml_cfg *c, const char *profile);
/* Sets one key from text; -1 with *error_r on unknown key or bad value. */
int ml_cfg_set(struct ml_cfg *c, const char *key, const char *val, const char **error_r);
/* Reads "key = value" lines (# comments); -1 with a message in err (size errlen). */
int ml_cfg_load(struct ml_cfg *c, const char *path, char *err, size_t errlen);
/* Appends the config as a JSON object's members (no braces). */
void ml_cfg_json(const struct ml_cfg *c, struct buf *out);
struct jv;
/* Sets every key present in obj; -1 on a bad value. */
int ml_cfg_from_json(struct ml_cfg *c, const struct jv *obj);
/* ---- users (users.c) ---- */
/* The address of recipient id: user N's (id = N > 0: from the users file, else the login
   of --user-format at domain) or rN@ext_domain (id = -N). */
void ml_rcpt_addr(const struct ml_cfg *c, int64_t id, char *out, size_t n);
/* --user-format: one %d (%u, %i, with a width) and nothing else after a %. */
bool ml_user_format_ok(const char *fmt);
/* Loads c->users_file once per process (users 0: as many as it has); 0, or -1 with err. */
int ml_users_load(struct ml_cfg *c, char *err, size_t errlen);
void ml_user_login(const struct ml_cfg *c, uint64_t user, char *out, size_t n);
/* From the users file, else --password, else the login (tmp holds it). */
const char *ml_user_password(const struct ml_cfg *c, uint64_t user, char *tmp, size_t n);

/* ---- what the server showed: each agent's, then the manager's merge of them (cfg.c) ---- */
struct ml_server_info {
	char smtp_greeting[160], imap_greeting[160], imap_caps[320];
	uint64_t tls_ok[2], tls_fail[2]; /* handshakes by protocol: 0 SMTP, 1 IMAP */
	char tls_proto[32], tls_cipher[64];
	char imap_id[240]; /* the server's ID response (RFC 2971), when it offers ID */
};
/* Appends the members "server":{...},"tls":{...} (no comma before or after): the agent's
   results and the report write the same. */
void ml_server_info_json(const struct ml_server_info *s, struct buf *out);
/* Adds the "server" and "tls" members of an agent's results r into s: handshakes add, the
   texts are the first agent's that has them. */
void ml_server_info_merge(struct ml_server_info *s, const struct jv *r);

/* ---- deterministic random numbers (splitmix64) ---- */
struct ml_rng {
	uint64_t s;
};
static inline uint64_t ml_rng_next(struct ml_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static inline void ml_rng_seed(struct ml_rng *r, uint64_t a, uint64_t b)
{
	r->s = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
	(void)ml_rng_next(r);
}
/* Uniform in [0, 1). */
static inline double ml_rng_unit(struct ml_rng *r)
{
	return (double)(ml_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
/* Uniform in [lo, hi]. */
static inline uint64_t ml_rng_range(struct ml_rng *r, uint64_t lo, uint64_t hi)
{
	return lo + ml_rng_next(r) % (hi - lo + 1);
}
/* Exponential with the given mean. */
double ml_rng_exp(struct ml_rng *r, double mean);
/* A count with the given mean, geometric-like, capped at max. */
uint32_t ml_rng_count(struct ml_rng *r, double mean, double max);

/* ---- workload distributions (msggen.c) ---- */
uint32_t ml_pick_rcpt_count(struct ml_rng *r);
enum ml_session {
	SESS_CHECK,
	SESS_SYNC,
	SESS_CLEANUP,
	SESS_APPEND,
	SESS_PROBE,
	SESS_INIT,
	SESS_RECON,
	SESS_FILLREC
};
enum ml_session ml_pick_session(struct ml_rng *r, const struct ml_cfg *c);
/* Body size in bytes for a message (corporate classes times size_scale). */
uint32_t ml_pick_size(struct ml_rng *r, double scale);

/* Folders of a user: INBOX, Sent, Drafts, Trash, then personal ones. */
#define ML_MAX_FOLDERS 17
#define ML_FOLDER_NAME_MAX 40
struct ml_folders {
	uint32_t n;
	char name[ML_MAX_FOLDERS][ML_FOLDER_NAME_MAX];
	bool subscribed[ML_MAX_FOLDERS];
	uint32_t msgs[ML_MAX_FOLDERS]; /* initial message count */
};
void ml_user_folders(const struct ml_cfg *c, uint64_t user, struct ml_folders *f);

/* ---- message generation ---- */
enum ml_mime { MIME_PLAIN, MIME_ALT, MIME_MIXED };
#define ML_MSG_MAXPARTS 48
struct ml_msg {
	struct buf head; /* headers and MIME glue, owned */
	/* the message is: pieces in order; a piece is either a slice of head or of a pool */
	uint32_t npieces;
	struct {
		const char *p; /* NULL: offset into head */
		size_t off, len;
	} piece[ML_MSG_MAXPARTS * 2];
	size_t size;
	enum ml_mime mime;
};
struct ml_msg_spec {
	uint64_t seed, run_id, seq;
	int64_t date_ms;  /* Date: header */
	int64_t sent_ms;  /* X-Mailload-Sent; 0: none */
	const char *from; /* full address */
	const char *const *to;
	uint32_t nto;
	double size_scale;
};
/* Builds the shared text pools (once per process; deterministic). */
void ml_msggen_init(void);
void ml_msg_init(struct ml_msg *m);
void ml_msg_release(struct ml_msg *m);
/* Composes the message for spec into m (reusing its memory). */
void ml_msg_build(struct ml_msg *m, const struct ml_msg_spec *s);
/* Appends the whole message to out (for tests and APPEND of small messages). */
void ml_msg_render(const struct ml_msg *m, struct buf *out);
struct evbuffer;
/* Adds the message to an evbuffer by reference to the pools (no copy of the body). */
void ml_msg_emit(const struct ml_msg *m, struct evbuffer *out);

/* Message-ID local part for a sequence number. */
#define ML_MSGID_FMT "<%" PRIu64 ".%" PRIu64 "@mailload>"

/* ---- LDIF (ldif.c) ---- */
/* "{SSHA}" + base64(SHA-1(password + salt) + salt), a random 8-byte salt; n >= 40. */
void ml_ssha(const char *password, char *out, size_t n);
/* The population user1..userN under base (with the ou entry first when ou), passwords
   "userK" or password when it is set, stored as {SSHA}. hosts (NULL: none) is a comma
   list of store hosts: userK's mailHost is the ((K - 1) mod n)-th. 0, or -1 on a write
   error. */
int ml_ldif_write(FILE *fp, uint64_t users, const char *domain, const char *base, bool ou,
		  const char *password, const char *hosts);

/* Appends this machine's members "name","cpu","cores","mem_kb","kernel" (no braces). */
void ml_host_json(struct buf *o);

/* ---- the fill record (fillrec.c): what init filled, checked by run ---- */
#define ML_FILL_FOLDER "MailloadFill"
#define ML_FILL_FILE ".mailload-fill"
struct ml_fill {
	uint64_t seed, users, digest; /* digest: of the keys that shape the mailboxes */
	char profile[ML_STR], domain[ML_STR];
	int64_t when_ms;
};
/* The record a fill of c makes (when_ms left 0). */
void ml_fill_of(const struct ml_cfg *c, struct ml_fill *f);
/* "seed=S; profile=P; digest=D; users=N; domain=D; when=MS" */
void ml_fill_format(const struct ml_fill *f, char *out, size_t n);
/* Parses that (anywhere in s); 0 or -1. */
int ml_fill_parse(const char *s, struct ml_fill *f);
/* The record as a message (CRLF lines) for user1's MailloadFill folder. */
void ml_fill_message(const struct ml_fill *f, struct buf *out);
/* Whether a run of c may use mailboxes filled as fill; else why names what differs. */
bool ml_fill_matches(const struct ml_fill *fill, const struct ml_cfg *run, char *why, size_t n);

/* report.json's schema version (docs/mailload-report.md) */
#define ML_REPORT_SCHEMA 2

/* ---- time ---- */

#endif

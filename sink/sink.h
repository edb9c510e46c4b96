/* sink.h — types shared inside the sink: the shared-memory statistics and arrival records
 * (sink_stats.c), fault settings (sink_fault.c), the DATA scanners (sink_data.c), sessions
 * (sink_session.c) and the control port (sink_control.c). */
#ifndef HERON_SINK_H
#define HERON_SINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/histo.h"

struct event_base;
struct net_server;
struct daemon_worker;
struct ssl_ctx_st;

/* ---- limits ---- */
#define SINK_LINE_MAX 4096     /* command line, CRLF included */
#define SINK_HDR_VALUE_MAX 998 /* a captured header value (unfolded) */
#define SINK_CONTROL_LINE_MAX 4096

/* ---- fault injection (sink_fault.c) ----
 * Shares are kept in parts per million so workers read them with one atomic load. */
enum sink_fault_key {
	FAULT_MAIL_4XX,
	FAULT_MAIL_5XX,
	FAULT_RCPT_4XX,
	FAULT_RCPT_5XX,
	FAULT_DATA_4XX,
	FAULT_DATA_5XX,
	FAULT_DROP_IN_DATA,
	FAULT_NSHARES, /* the keys above are shares, below are milliseconds */
	FAULT_DELAY_MS = FAULT_NSHARES,
	FAULT_GREETING_DELAY_MS,
	FAULT_NKEYS,
};
#define SINK_FAULT_MS_MAX 3600000 /* an hour */

struct sink_faults {
	_Atomic uint32_t v[FAULT_NKEYS]; /* ppm for shares, ms for delays */
};

/* The JSON name of a key ("mail_4xx", ...); the key of a name, or -1. */
const char *sink_fault_name(enum sink_fault_key k);
int sink_fault_lookup(const char *name, size_t len);
/* Sets a key from a number: a share in [0, 1] or milliseconds in [0, SINK_FAULT_MS_MAX].
   0, or -1 (the setting is unchanged) when out of range. */
int sink_fault_set(struct sink_faults *f, enum sink_fault_key k, double value);
uint32_t sink_fault_get(const struct sink_faults *f, enum sink_fault_key k);
/* Appends {"mail_4xx":0.1,...,"greeting_delay_ms":0} to out. */
void sink_faults_json(const struct sink_faults *f, struct buf *out);

enum sink_verdict { VERDICT_OK, VERDICT_4XX, VERDICT_5XX };
/* Draws a verdict for a step from the 4xx and 5xx shares of k4 and k5 (per-process PRNG). */
enum sink_verdict sink_fault_draw(const struct sink_faults *f, enum sink_fault_key k4,
				  enum sink_fault_key k5);
/* Whether an event with the share of k happens this time. */
bool sink_fault_hit(const struct sink_faults *f, enum sink_fault_key k);
/* Seeds this process's PRNG (call in each worker after fork). */
void sink_fault_seed(uint64_t seed);

/* ---- statistics and records in shared memory (sink_stats.c) ---- */
struct sink_counters {
	uint64_t connections; /* accepted, cumulative */
	uint64_t messages;    /* accepted (250 at the end of data) */
	uint64_t recipients;  /* recipients of accepted messages */
	uint64_t bytes;       /* content bytes of accepted messages */
	uint64_t stamped;     /* accepted messages with a valid X-Mailload-Sent */
	uint64_t rejected;    /* replies turned into 4xx/5xx by fault injection */
	uint64_t dropped;     /* connections dropped mid-DATA by fault injection */
	uint64_t tls;         /* successful STARTTLS */
};

struct sink_shared;

/* One arrival record, as handed to sink_stats_message and read back by the control port. */
struct sink_record {
	uint64_t seq;
	int64_t sent_ms; /* 0 when the message had no X-Mailload-Sent */
	int64_t arrival_ms;
	const char *id; /* Message-ID value, id_len bytes, may be empty */
	size_t id_len;
	const char *rcpts; /* nrcpts addresses, each NUL-terminated, back to back */
	size_t rcpts_len;
	uint32_t nrcpts;
};

/* Maps the segment for nworkers workers and record_mem bytes of records (before fork).
   Fatal on failure. */
struct sink_shared *sink_shared_create(unsigned nworkers, size_t record_mem, bool record_all);
void sink_shared_destroy(struct sink_shared **shp);
struct sink_faults *sink_shared_faults(struct sink_shared *sh);

/* Worker w counts one accepted connection / one successful STARTTLS / a fault reply / a
   dropped connection. */
void sink_stats_connection(struct sink_shared *sh, unsigned w);
void sink_stats_event(struct sink_shared *sh, unsigned w, size_t counter_offset);
#define SINK_COUNTER(field) offsetof(struct sink_counters, field)
/* Worker w accepted a message: counts it, adds its delivery time to the histogram when stamped
   and keeps an arrival record (r->seq is assigned here). */
void sink_stats_message(struct sink_shared *sh, unsigned w, uint64_t bytes, bool stamped,
			struct sink_record *r);

/* A consistent copy of the sums over all workers, the merged histogram and records_dropped. */
void sink_stats_snapshot(struct sink_shared *sh, struct sink_counters *sum, struct histo *h,
			 uint64_t *records_dropped_r);
/* Clears counters, histogram and records (sequence numbers keep growing). */
void sink_stats_reset(struct sink_shared *sh);
/* Calls fn for up to max records with since < seq <= until, in order; returns how many. The
   records point into a copy that lives until the next call in this process. */
size_t sink_records_read(struct sink_shared *sh, uint64_t since, uint64_t until, size_t max,
			 void (*fn)(void *ctx, const struct sink_record *r), void *ctx);
/* The highest sequence number handed out so far. */
uint64_t sink_records_last_seq(struct sink_shared *sh);
/* Logs one summary line (SIGUSR1, exit). */
void sink_stats_log_summary(struct sink_shared *sh, const char *why);

/* ---- DATA stream scanning (sink_data.c) ---- */
typedef void sink_out_fn(void *ctx, const char *p, size_t n);

/* Finds the end of a DATA stream (CRLF "." CRLF) and removes dot-stuffing. Only CRLF ends a
   line: a bare LF or CR never ends the message. */
struct sink_dot {
	uint8_t st;
	char last;
	bool cr_pending;
};
void sink_dot_init(struct sink_dot *d);
/* Scans n bytes, passing the unstuffed content to out. Returns the bytes consumed; *done_r is
   true when the terminating ".CRLF" was among them (nothing after it is consumed). */
size_t sink_dot_feed(struct sink_dot *d, const char *p, size_t n, bool *done_r, sink_out_fn *out,
		     void *ctx);

/* Watches the header block of a message for Message-ID and X-Mailload-Sent, however folded
   or placed; fixed-size, never allocates. */
struct sink_hdr {
	bool in_headers;
	bool line_over; /* the current physical line passed the line buffer */
	int capture;    /* which header the current logical header is: 0 none, 1 id, 2 sent */
	size_t line_len;
	size_t id_len, sent_len;
	bool id_seen, sent_seen, id_over, sent_over;
	char line[SINK_HDR_VALUE_MAX + 2];
	char id[SINK_HDR_VALUE_MAX];
	char sent[32];
};
void sink_hdr_init(struct sink_hdr *h);
void sink_hdr_feed(struct sink_hdr *h, const char *p, size_t n);
/* Ends the scan (a header block without a blank line ends with the message). */
void sink_hdr_finish(struct sink_hdr *h);
/* The Message-ID as written: unfolded, trimmed; the <...> part when there is one. Sets *len_r
   (0 when absent). */
const char *sink_hdr_id(struct sink_hdr *h, size_t *len_r);
/* The X-Mailload-Sent value in unix ms; false when absent or not a number. */
bool sink_hdr_sent(const struct sink_hdr *h, int64_t *ms_r);

/* ---- JSON (sink_json.c) ---- */
/* Appends s as a JSON string (quotes included): control characters escaped, invalid UTF-8
   replaced by U+FFFD so the output is always valid JSON. */
void sink_json_str(struct buf *out, const char *s, size_t len);

enum sink_json_type { JSON_STRING, JSON_NUMBER, JSON_BOOL, JSON_NULL };
struct sink_json_member {
	const char *key; /* raw, between the quotes; keys with escapes are refused */
	size_t key_len;
	enum sink_json_type type;
	const char *val; /* JSON_STRING: raw text between the quotes (escapes not decoded);
			       others: the token */
	size_t val_len;
};
/* Parses one flat JSON object (string/number/true/false/null values) into at most max members.
   Returns the member count, or -1 with *error_r set (a static string). */
int sink_json_parse(const char *p, size_t len, struct sink_json_member *m, size_t max,
		    const char **error_r);
/* A JSON_NUMBER member's value as a double; -1 when it is not a number. */
int sink_json_number(const struct sink_json_member *m, double *v_r);

/* ---- the running sink (sink.c) ---- */
struct sink_opts {
	const char *keep_dir; /* NULL: discard */
	uint64_t max_message_size;
	unsigned max_recipients;
	unsigned max_connections; /* of all workers; more are refused with 421 */
	int64_t timeout_ms;       /* idle time allowed in a session */
	const char *hostname;
};

struct sink_worker {
	struct event_base *base;
	struct sink_shared *sh;
	const struct sink_opts *o;
	struct ssl_ctx_st *tls; /* NULL: no STARTTLS */
	unsigned index;
	struct net_server *smtp, *control;
	struct daemon_worker *dw;
	uint64_t keep_seq;
};

/* sink_metrics.c: the master's metrics_init, and a worker's endpoint ([metrics] sink_listen
   or --metrics) and control socket (metrics only: the sink has no users). */
struct conf;
struct net_fds;
struct obs;
void sink_metrics_init(unsigned workers);
struct obs *sink_obs_start(struct sink_worker *w, const struct conf *c, const struct net_fds *fds);

/* sink_session.c: takes a freshly accepted socket. */
void sink_session_start(struct sink_worker *w, int fd);
/* sink_control.c: takes a freshly accepted control connection. */
void sink_control_start(struct sink_worker *w, int fd);
/* sink.c: a session / a control connection ended (re-enables paused listeners). */
void sink_worker_session_done(struct sink_worker *w);
void sink_worker_control_done(struct sink_worker *w);

#endif

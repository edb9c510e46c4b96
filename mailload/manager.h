/* manager.h — the manager: starts or connects agents, splits users, runs phases, merges the
 * agents' histograms exactly, does the delivery accounting (probe sightings and sink records)
 * and writes the report; also init and search. */
#ifndef HERON_MAILLOAD_MANAGER_H
#define HERON_MAILLOAD_MANAGER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "mailload/mailload.h"

struct jv;

struct mgr_opts {
	struct ml_cfg cfg;
	const char *agents;      /* "host:port,..." or NULL: local agents */
	uint32_t local_agents;   /* 0: one per core */
	const char *secret_file; /* the agents' shared secret (ctlauth.h); NULL: local agents
				    get a generated one, remote agents cannot be used */
	const char *sink;        /* sink control host:port, NULL: none */
	const char *report_dir;
	double points[8]; /* load points, percent of rate */
	uint32_t npoints;
	bool users_given;
	bool quiet;
	const char *command_line; /* as typed, for the report */
	const char *fill_record;  /* run: the fill record file of a fast path; NULL: user1's */
	bool force;               /* run even when the fill does not match */
	const char *sut_config;   /* disclosed: a heron.conf (or any text) */
	const char *sut_version;  /* disclosed as given */
	const char *notes;        /* the report's notes */
	pid_t sut_pids[16];       /* the server's process trees: CPU per load point */
	size_t nsut_pids;
	const char *disclosure; /* JSON members added to the report's head, or NULL */
	const char *metrics;    /* --metrics ADDR: the local agents' Prometheus endpoint */
	/* out: the last run's result */
	bool uncertain, too_short;
	char server_id[240]; /* the server's IMAP ID response seen in the run, or "" */
};

/* mailload init: fills every mailbox. 0 or -1. */
int mgr_init(struct mgr_opts *o);
/* mailload run: each load point, then the report in o->report_dir. 0 when the run passes,
   1 when it fails a rule, 3 when it is invalid (too few samples, copies unchecked), -1 on a
   set-up error. Sets o->uncertain and o->too_short. */
int mgr_run(struct mgr_opts *o);
/* mailload search: doubling then bisection between from and to (msgs/min), at most steps
   points; invalid points are skipped, a straddling result is run again. 0 when some rate
   passed (printed), 1 when none did (said on stderr), -1 on a set-up error. */
int mgr_search(struct mgr_opts *o, double from, double to, uint32_t steps);

/* sut.c: appends "sut":{...} and "notes" (the report's head members); -1 when a file given
   cannot be read. */
int sut_disclose(const struct mgr_opts *o, struct buf *out);
/* CPU seconds (user + system) of the process trees rooted at roots, with what the roots
   reaped. */
double sut_cpu_seconds(const pid_t *roots, size_t n);

/* ---- one load point's results (point.c; exposed for tests) ---- */
enum ml_verdict { MV_PASS, MV_FAIL, MV_INVALID };
struct mgr_point;
/* The sink's records at the end: records NULL when there are none to read (no sink, or it
   did not answer: remote copies unchecked); the records with a sink sequence number above
   first_next came only after the drain (late); dropped: records the sink evicted unread. */
struct mgr_sink {
	const struct jv *records;
	uint64_t first_next, dropped;
	const char *note;
};
struct mgr_point *mgr_point_new(void);
void mgr_point_free(struct mgr_point **pp);
/* Before merging an agent's results: its name, clock offset (its clock minus ours) and
   round trip; its machine comes from results' "host". */
void mgr_point_agent(struct mgr_point *p, const char *name, int64_t offset_ms, int64_t rtt_ms,
		     const struct jv *results);
/* Adds one agent's "results" object into the point's totals. 0 or -1. */
int mgr_point_merge(struct mgr_point *p, const struct jv *agent_results);
/* The local recipients with a copy nobody saw (sorted, each once, malloc'ed): the ones the
   reconciliation reads. */
size_t mgr_point_missing_users(struct mgr_point *p, uint32_t **users_r);
/* Adds an agent's reconciliation reply ({"users_ok","users_failed","seen"}), its times moved
   by the agent's clock offset. 0 or -1. */
int mgr_point_merge_recon(struct mgr_point *p, const struct jv *reply, int64_t offset_ms);
/* Remote copies the sink has no record of yet. */
uint64_t mgr_point_remote_missing(struct mgr_point *p, const struct ml_cfg *c,
				  const struct mgr_sink *sink);
/* These users' INBOXes could not be read at all (why). */
void mgr_point_recon_failed(struct mgr_point *p, const uint32_t *users, size_t n, const char *why);
/* The server's CPU seconds over the point (measured on its process trees, pids as text). */
void mgr_point_sut_cpu(struct mgr_point *p, double cpu_s, const char *pids);
/* Accounts every copy, judges the rules; appends the point's JSON object to out. The
   verdict; *uncertain_r: some interval straddles its limit; *too_short_r: too few samples. */
enum ml_verdict mgr_point_finish(struct mgr_point *p, const struct ml_cfg *c, double pct,
				 const struct mgr_sink *sink, struct buf *out, bool *uncertain_r,
				 bool *too_short_r);
const struct histo *mgr_point_histo(const struct mgr_point *p, int fn);
/* What the server showed in this point (merged over the agents). */
const struct ml_server_info *mgr_point_server(const struct mgr_point *p);

#endif

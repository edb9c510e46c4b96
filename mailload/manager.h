/* manager.h — the manager: starts or connects agents, splits users, runs phases, merges the
 * agents' histograms exactly, does the delivery accounting (probe sightings and sink records)
 * and writes the report; also init and search. */
#ifndef HERON_MAILLOAD_MANAGER_H
#define HERON_MAILLOAD_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

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
	double points[8];        /* load points, percent of rate */
	uint32_t npoints;
	bool users_given;
	bool quiet;
};

/* mailload init: fills every mailbox. 0 or -1. */
int mgr_init(struct mgr_opts *o);
/* mailload run: each load point, then the report in o->report_dir. 0 when the run passes,
   1 when it fails a rule, -1 on a set-up error. */
int mgr_run(struct mgr_opts *o);
/* mailload search: bisection between from and to (msgs/min). */
int mgr_search(struct mgr_opts *o, double from, double to, uint32_t steps);

/* Merging, exposed for tests: adds one agent's "results" object into the point's totals. */
struct mgr_point;
struct mgr_point *mgr_point_new(void);
void mgr_point_free(struct mgr_point **pp);
int mgr_point_merge(struct mgr_point *p, const struct jv *agent_results);
/* Computes delivery, compliance and verdict; appends the point's JSON object to out. sink may be
   NULL (remote deliveries unchecked: unavailable). */
bool mgr_point_finish(struct mgr_point *p, const struct ml_cfg *c, double pct,
		      const struct jv *sink_records, const char *sink_note, struct buf *out);
const struct histo *mgr_point_histo(const struct mgr_point *p, int fn);

#endif

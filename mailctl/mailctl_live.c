/* mailctl_live.c — owns the commands that talk to the running daemons through their control
 * sockets ([control] dir, common/control.h): `who` (sessions), `kick USER` and `stats --live`
 * (`top`): the daemons' metrics read every interval and shown as rates and gauges, the same
 * numbers the Prometheus endpoints serve. */
#include <errno.h>
#include <inttypes.h>
#include <strings.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/control.h"
#include "common/metrics.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

#define CTL_TIMEOUT_MS 5000

/* The daemons whose sockets may be asked (--daemon). */
static const char *const daemons[] = { "mtad", "imapd", "managesieved", "sink", NULL };

/* The control dir, or NULL after saying why there is none (exit code in *rc_r). */
static const char *ctl_dir(struct mc *mc, int *rc_r)
{
	const char *dir = conf_values(mc->conf)->control.dir;

	if (dir[0] == '\0') {
		*rc_r = mc_refuse(mc, MC_CONFIG, "set [control] dir as the daemons have it",
				  "[control] dir is empty in %s: the daemons have no control "
				  "sockets",
				  mc->conf_path);
		return NULL;
	}
	return dir;
}

/* --daemon D: D when it names one, else a usage error (NULL in *ident with -1). */
static int daemon_opt(struct mc *mc, const struct mc_args *a, int k, const char **ident_r)
{
	*ident_r = NULL;
	if (!a->set[k])
		return 0;
	for (size_t i = 0; daemons[i] != NULL; i++)
		if (strcmp(a->val[k], daemons[i]) == 0) {
			*ident_r = daemons[i];
			return 0;
		}
	mc_usage(mc, "--daemon %s: not one of mtad, imapd, managesieved, sink", a->val[k]);
	return -1;
}

/* What a request to every socket gathered. */
struct gather {
	struct mc *mc;
	unsigned found, failed; /* sockets, and those that did not answer */
	void (*each)(struct gather *g, const char *ident, unsigned worker, char *answer,
		     size_t len);
	void *arg;
};

static void gather_cb(const char *ident, unsigned worker, const char *answer, size_t len,
		      const char *error, void *arg)
{
	struct gather *g = arg;

	if (error != NULL && strcmp(error, "not running") == 0)
		return; /* a socket file a stopped worker left: nobody to ask */
	g->found++;
	if (error != NULL) {
		fprintf(stderr, "mailctl: %s worker %u: %s\n", ident, worker, error);
		g->failed++;
		return;
	}
	char *copy = xmemdup0(answer, len);

	g->each(g, ident, worker, copy, len);
	free(copy);
}

/* Asks every socket (of ident, or all); the exit code: 75 when one failed. When none
   answers (g->found == g->failed) the refusal is printed already (the error object with
   --json): the caller prints no result then. */
static int gather(struct mc *mc, const char *ident, const char *line, struct gather *g)
{
	int rc = MC_OK;
	const char *dir = ctl_dir(mc, &rc);

	if (dir == NULL)
		return rc;
	g->mc = mc;
	if (control_request_all(dir, ident, line, CTL_TIMEOUT_MS, gather_cb, g) < 0) {
		g->found = g->failed = 0;
		return mc_refuse(mc, MC_TEMPFAIL, "check [control] dir in heron.conf",
				 "[control] dir %s: %s", dir, strerror(errno));
	}
	if (g->found == 0)
		return mc_refuse(mc, MC_TEMPFAIL, "start it, or check [control] dir in heron.conf",
				 "no %s%srunning: no control socket answers in %s ([control] "
				 "dir)",
				 ident ? ident : "daemon", ident ? " " : " is ", dir);
	if (g->failed == g->found)
		return mc_refuse(mc, MC_TEMPFAIL, "the lines above say why; retry",
				 "no %s answered on its control socket in %s",
				 ident ? ident : "daemon", dir);
	return g->failed > 0 ? MC_TEMPFAIL : MC_OK;
}

/* ---- who ---- */

struct who_ctx {
	struct mc_table *tab;
	const char *user;
	unsigned rows;
};

static void who_each(struct gather *g, const char *ident, unsigned worker, char *answer,
		     size_t len)
{
	struct who_ctx *w = g->arg;
	char *line, *save = NULL;

	for (line = strtok_r(answer, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		struct control_who cw;

		if (strcmp(line, ".") == 0)
			break;
		if (control_who_parse(line, &cw) < 0) {
			fprintf(stderr, "mailctl: %s worker %u: a line that is not a session\n",
				ident, worker);
			g->failed++;
			continue;
		}
		if (w->user != NULL && (cw.user == NULL || strcasecmp(cw.user, w->user) != 0))
			continue;
		mc_table_row(w->tab);
		mc_cell_str(w->tab, cw.ident);
		mc_cell_u64(w->tab, cw.worker);
		mc_cell_u64(w->tab, (uint64_t)cw.pid);
		mc_cell_hex(w->tab, cw.id);
		mc_cell_str(w->tab, cw.user);
		mc_cell_str(w->tab, cw.addr);
		mc_cell_str(w->tab, cw.service);
		mc_cell_str(w->tab, cw.state);
		mc_cell_time(w->tab, cw.since);
		mc_cell_u64(w->tab, cw.idle_ms > 0 ? (uint64_t)cw.idle_ms / 1000 : 0);
		mc_cell_str(w->tab, cw.detail);
		w->rows++;
	}
}

int mc_who(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "daemon",    "worker",       "pid",     "session",
					    "user",      "address",      "service", "state",
					    "connected", "idle_seconds", "detail",  NULL };
	struct who_ctx w = { .tab = mc_table_new(cols), .user = a->npos > 0 ? a->pos[0] : NULL };
	struct gather g = { .each = who_each, .arg = &w };
	const char *ident;
	int rc;

	if (daemon_opt(mc, a, 0, &ident) < 0) {
		mc_table_free(&w.tab);
		return MC_USAGE;
	}
	rc = gather(mc, ident, "who", &g);
	if (g.found == g.failed && rc != MC_OK) { /* refused: no result */
		mc_table_free(&w.tab);
		return rc;
	}
	mc_table_print(mc, &w.tab);
	return rc;
}

/* ---- kick ---- */

struct kick_ctx {
	struct mc_table *tab;
	uint64_t total;
};

static void kick_each(struct gather *g, const char *ident, unsigned worker, char *answer,
		      size_t len)
{
	struct kick_ctx *k = g->arg;
	size_t digits = 3;
	uint64_t n;

	while (digits < len && answer[digits] >= '0' && answer[digits] <= '9')
		digits++;
	if (len < 4 || memcmp(answer, "OK ", 3) != 0 ||
	    str_to_u64(answer + 3, digits - 3, UINT32_MAX, &n) < 0) {
		fprintf(stderr, "mailctl: %s worker %u: %.*s\n", ident, worker,
			(int)strcspn(answer, "\n"), answer);
		g->failed++;
		return;
	}
	mc_table_row(k->tab);
	mc_cell_str(k->tab, ident);
	mc_cell_u64(k->tab, worker);
	mc_cell_u64(k->tab, n);
	k->total += n;
}

int mc_kick(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "daemon", "worker", "kicked", NULL };
	struct kick_ctx k = { .tab = mc_table_new(cols) };
	struct gather g = { .each = kick_each, .arg = &k };
	const char *user = a->pos[0], *ident;
	char *line;
	int rc;

	if (!str_is_safe_line(user, strlen(user)) || strchr(user, '\t') != NULL ||
	    strlen(user) > STORE_MAX_NAME) {
		mc_table_free(&k.tab);
		return mc_usage(mc, "not a user name: '%s'", user);
	}
	if (daemon_opt(mc, a, 0, &ident) < 0) {
		mc_table_free(&k.tab);
		return MC_USAGE;
	}
	line = xasprintf("kick %s", user);
	rc = gather(mc, ident, line, &g);
	free(line);
	if (g.found == g.failed && rc != MC_OK) /* refused: no result */
		mc_table_free(&k.tab);
	else if (mc->json) {
		fputs("{\"user\": ", stdout);
		mc_json_str(stdout, user, strlen(user));
		printf(", \"kicked\": %" PRIu64 ", \"daemons\": ", k.total);
		mc_table_print(mc, &k.tab);
		fputs("}\n", stdout);
	} else {
		mc_table_free(&k.tab);
		printf("kicked %" PRIu64 " session%s of %s\n", k.total, k.total == 1 ? "" : "s",
		       user);
	}
	return rc;
}

/* ---- stats --live ---- */

/* One daemon's metrics at one time: the sample lines, sorted by series. */
struct sample {
	char *series;
	double v;
};
struct snap {
	char ident[32];
	struct sample *s;
	size_t n;
	double t; /* monotonic seconds */
};

static int sample_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sample *)a)->series, ((const struct sample *)b)->series);
}

/* Parses the Prometheus text of a daemon (its comment lines skipped). */
static void snap_parse(struct snap *sn, char *text)
{
	char *line, *save = NULL;
	size_t cap = 0;

	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *end;
		double v;

		if (line[0] == '#' || sp == NULL)
			continue;
		v = strtod(sp + 1, &end);
		if (*end != '\0')
			continue;
		if (sn->n == cap) {
			cap = cap ? cap * 2 : 256;
			sn->s = xreallocarray(sn->s, cap, sizeof(*sn->s));
		}
		sn->s[sn->n].series = xmemdup0(line, (size_t)(sp - line));
		sn->s[sn->n++].v = v;
	}
	qsort(sn->s, sn->n, sizeof(*sn->s), sample_cmp);
}

static void snap_clear(struct snap *sn)
{
	for (size_t i = 0; i < sn->n; i++)
		free(sn->s[i].series);
	free(sn->s);
	memset(sn, 0, sizeof(*sn));
}

/* The value of a series (NAN when absent). */
static double get(const struct snap *sn, const char *series)
{
	struct sample key = { (char *)(uintptr_t)series, 0 };
	const struct sample *s = sn->n ? bsearch(&key, sn->s, sn->n, sizeof(*sn->s), sample_cmp)
				       : NULL;

	return s != NULL ? s->v : (double)NAN;
}

/* The sum of every series of a family whose labels contain match (NULL: all). */
static double sum(const struct snap *sn, const char *name, const char *match)
{
	size_t n = strlen(name);
	double t = 0;

	for (size_t i = 0; i < sn->n; i++) {
		const char *s = sn->s[i].series;

		if (strncmp(s, name, n) == 0 && (s[n] == '\0' || s[n] == '{') &&
		    (match == NULL || strstr(s + n, match) != NULL))
			t += sn->s[i].v;
	}
	return t;
}

/* The per-second rate of sum(name, match) between prev and now; with prev empty (the first
   refresh), since the daemon started. */
static double rate(const struct snap *now, const struct snap *prev, const char *name,
		   const char *match)
{
	double dt, d;

	if (prev->n == 0) {
		dt = (double)time(NULL) - get(now, "heron_start_time_seconds");
		d = sum(now, name, match);
	} else {
		dt = now->t - prev->t;
		d = sum(now, name, match) - sum(prev, name, match);
	}
	return dt > 0 && d > 0 ? d / dt : 0;
}

/* Percentile q (0..1) of a histogram series over the interval (its bucket counts' growth;
   since the start when prev is empty), interpolated inside the bucket as
   histogram_quantile does; NAN without samples. labels: "command=\"FETCH\"," or "". */
static double quantile(const struct snap *now, const struct snap *prev, const char *name,
		       const char *labels, double q)
{
	double cum[METRICS_NLE + 1], total, lo = 0;
	char series[256];

	for (unsigned k = 0; k <= METRICS_NLE; k++) {
		if (k < METRICS_NLE)
			snprintf(series, sizeof(series), "%s_bucket{%sle=\"%g\"}", name, labels,
				 (double)metrics_le_us[k] / 1e6);
		else
			snprintf(series, sizeof(series), "%s_bucket{%sle=\"+Inf\"}", name, labels);
		double a = get(now, series), b = prev->n ? get(prev, series) : 0;

		cum[k] = isnan(a) ? 0 : a - (isnan(b) ? 0 : b);
	}
	total = cum[METRICS_NLE];
	if (total <= 0)
		return (double)NAN;
	for (unsigned k = 0; k < METRICS_NLE; k++) {
		double hi = (double)metrics_le_us[k] / 1e6, below = k ? cum[k - 1] : 0;

		if (cum[k] >= q * total)
			return cum[k] > below
				       ? lo + (hi - lo) * (q * total - below) / (cum[k] - below)
				       : hi;
		lo = hi;
	}
	return lo; /* past the last bound */
}

static void fmt_secs(char *buf, size_t size, double s)
{
	if (isnan(s))
		snprintf(buf, size, "-");
	else if (s < 0.001)
		snprintf(buf, size, "%.0fus", s * 1e6);
	else if (s < 1)
		snprintf(buf, size, "%.1fms", s * 1e3);
	else
		snprintf(buf, size, "%.2fs", s);
}

/* The busiest commands of a family over the interval: "FETCH 12.0/s p99 1.2ms, ...". */
static void top_commands(const struct snap *now, const struct snap *prev, const char *fam,
			 const char *hist)
{
	char names[24][32], labels[64], p99[16];
	double r[24];
	size_t n = 0, flen = strlen(fam);

	for (size_t i = 0; i < now->n && n < 24; i++) {
		const char *s = now->s[i].series, *c;
		size_t k;

		if (strncmp(s, fam, flen) != 0 || s[flen] != '{' ||
		    (c = strstr(s, "command=\"")) == NULL)
			continue;
		c += 9;
		k = strcspn(c, "\"");
		if (k >= sizeof(names[0]))
			continue;
		bool seen = false;

		for (size_t j = 0; j < n; j++)
			seen |= strncmp(names[j], c, k) == 0 && names[j][k] == '\0';
		if (seen)
			continue;
		memcpy(names[n], c, k);
		names[n][k] = '\0';
		snprintf(labels, sizeof(labels), "command=\"%s\"", names[n]);
		r[n] = rate(now, prev, fam, labels);
		n++;
	}
	for (int shown = 0; shown < 5; shown++) {
		size_t best = n;

		for (size_t j = 0; j < n; j++)
			if (r[j] > 0 && (best == n || r[j] > r[best]))
				best = j;
		if (best == n)
			break;
		snprintf(labels, sizeof(labels), "command=\"%s\",", names[best]);
		fmt_secs(p99, sizeof(p99), quantile(now, prev, hist, labels, 0.99));
		printf("%s%s %.1f/s p99 %s", shown ? ", " : "  top: ", names[best], r[best], p99);
		r[best] = 0;
	}
	putchar('\n');
}

static void show_daemon(const struct snap *now, const struct snap *prev)
{
	char p[16], age[32];
	double hits = rate(now, prev, "heron_directory_cache_total", "hit"),
	       miss = rate(now, prev, "heron_directory_cache_total", "miss"),
	       commits = rate(now, prev, "heron_store_commits_total", NULL);
	double q = get(now, "heron_queue_messages"),
	       oldest = get(now, "heron_queue_oldest_age_seconds");

	printf("%s  workers %.0f  started %.0f times\n", now->ident, get(now, "heron_workers"),
	       get(now, "heron_worker_starts_total"));
	printf("  connections  open %.0f  accepted %.1f/s  refused %.1f/s\n",
	       sum(now, "heron_connections_open", NULL),
	       rate(now, prev, "heron_connections_accepted_total", NULL),
	       rate(now, prev, "heron_connections_refused_total", NULL));
	if (!isnan(get(now, "heron_imap_sessions{state=\"auth\"}")))
		printf("  sessions     notauth %.0f  auth %.0f  selected %.0f  idle %.0f\n",
		       get(now, "heron_imap_sessions{state=\"notauth\"}"),
		       get(now, "heron_imap_sessions{state=\"auth\"}"),
		       get(now, "heron_imap_sessions{state=\"selected\"}"),
		       get(now, "heron_imap_idle_sessions"));
	static const char *const fams[][2] = {
		{ "heron_imap_commands_total", "heron_imap_command_duration_seconds" },
		{ "heron_smtp_commands_total", "heron_smtp_command_duration_seconds" },
		{ "heron_managesieve_commands_total",
		  "heron_managesieve_command_duration_seconds" },
	};
	for (size_t i = 0; i < 3; i++)
		if (sum(now, fams[i][0], NULL) > 0) {
			printf("  commands     %.1f/s", rate(now, prev, fams[i][0], NULL));
			top_commands(now, prev, fams[i][0], fams[i][1]);
		}
	if (sum(now, "heron_logins_total", NULL) > 0)
		printf("  logins       ok %.1f/s  fail %.1f/s  temp %.1f/s  throttled %.1f/s\n",
		       rate(now, prev, "heron_logins_total", "\"ok\""),
		       rate(now, prev, "heron_logins_total", "\"fail\""),
		       rate(now, prev, "heron_logins_total", "\"temp\""),
		       rate(now, prev, "heron_logins_total", "\"throttled\""));
	if (sum(now, "heron_directory_requests_total", NULL) > 0) {
		fmt_secs(p, sizeof(p),
			 quantile(now, prev, "heron_directory_round_trip_seconds", "", 0.99));
		printf("  directory    %.1f/s  cache hits %.0f%%  round trip p99 %s\n",
		       rate(now, prev, "heron_directory_requests_total", NULL),
		       hits + miss > 0 ? 100 * hits / (hits + miss) : 0, p);
	}
	if (sum(now, "heron_deliveries_total", NULL) > 0)
		printf("  deliveries   local %.1f/s  queued %.1f/s  relayed %.1f/s  deferred %.1f/s  "
		       "bounced %.1f/s\n",
		       rate(now, prev, "heron_deliveries_total", "\"local\""),
		       rate(now, prev, "heron_deliveries_total", "\"queued\""),
		       rate(now, prev, "heron_deliveries_total", "\"relayed\""),
		       rate(now, prev, "heron_deliveries_total", "\"deferred\""),
		       rate(now, prev, "heron_deliveries_total", "\"bounced\""));
	if (!isnan(q)) {
		snprintf(age, sizeof(age), "%.0fs", isnan(oldest) ? 0 : oldest);
		printf("  queue        %.0f messages (%.0f scheduled)  oldest %s\n", q,
		       get(now, "heron_queue_scheduled_messages"), age);
	}
	if (sum(now, "heron_store_commits_total", NULL) > 0)
		printf("  store        commits %.1f/s  writes/commit %.1f  fsyncs/commit %.1f  "
		       "index %.0f MiB  disk free %.0f GiB\n",
		       commits,
		       commits > 0 ? rate(now, prev, "heron_store_commit_operations_total", NULL) /
					     commits
				   : 0,
		       commits > 0 ? rate(now, prev, "heron_store_fsyncs_total", NULL) / commits
				   : 0,
		       sum(now, "heron_store_index_bytes", NULL) / 1048576.0,
		       get(now, "heron_store_disk_free_bytes") / 1073741824.0);
	if (sum(now, "heron_tls_handshakes_total", NULL) > 0)
		printf("  tls          TLSv1.3 %.1f/s  TLSv1.2 %.1f/s  failed %.1f/s\n",
		       rate(now, prev, "heron_tls_handshakes_total", "TLSv1.3"),
		       rate(now, prev, "heron_tls_handshakes_total", "TLSv1.2"),
		       rate(now, prev, "heron_tls_handshake_failures_total", NULL));
	if (!isnan(get(now, "heron_dns_lookups_total")))
		printf("  dns          lookups %.1f/s  cache hits %.1f/s\n",
		       rate(now, prev, "heron_dns_lookups_total", NULL),
		       rate(now, prev, "heron_dns_cache_hits_total", NULL));
	if (!isnan(get(now, "heron_sink_messages_total")))
		printf("  sink         messages %.1f/s  bytes %.0f/s\n",
		       rate(now, prev, "heron_sink_messages_total", NULL),
		       rate(now, prev, "heron_sink_bytes_total", NULL));
}

/* The snapshots of one refresh: one per daemon (the first of its workers that answers). */
struct live {
	struct snap *now;
	size_t n, cap;
};

static void live_each(struct gather *g, const char *ident, unsigned worker, char *answer,
		      size_t len)
{
	struct live *l = g->arg;

	if (strncmp(answer, "ERR", 3) == 0) { /* not metrics: before an answer is taken */
		fprintf(stderr, "mailctl: %s worker %u: %.*s\n", ident, worker,
			(int)strcspn(answer, "\n"), answer);
		g->failed++;
		return;
	}
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->now[i].ident, ident) == 0)
			return; /* every worker renders the sums of all: one is enough */
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4;
		l->now = xreallocarray(l->now, l->cap, sizeof(*l->now));
	}
	memset(&l->now[l->n], 0, sizeof(l->now[l->n]));
	str_lcpy(l->now[l->n].ident, ident, sizeof(l->now[l->n].ident));
	l->now[l->n].t = clock_mono_seconds();
	snap_parse(&l->now[l->n], answer);
	l->n++;
}

static void live_json(const struct live *l, const struct live *prev)
{
	char when[32];

	mc_fmt_time(when, sizeof(when), (int64_t)time(NULL));
	printf("{\"time\": \"%s\", \"daemons\": [", when);
	for (size_t i = 0; i < l->n; i++) {
		const struct snap *s = &l->now[i], *p = NULL;

		for (size_t j = 0; prev != NULL && j < prev->n; j++)
			if (strcmp(prev->now[j].ident, s->ident) == 0)
				p = &prev->now[j];
		printf("%s{\"daemon\": \"%s\", \"metrics\": {", i ? ", " : "", s->ident);
		for (size_t k = 0; k < s->n; k++) {
			printf("%s", k ? ", " : "");
			mc_json_str(stdout, s->s[k].series, strlen(s->s[k].series));
			printf(": %.17g", s->s[k].v);
		}
		printf("}, \"rates\": {");
		for (size_t k = 0, first = 1; k < s->n; k++) {
			const char *name = s->s[k].series;
			double was = p != NULL ? get(p, name) : (double)NAN;

			if (p == NULL || isnan(was) || s->t <= p->t ||
			    strstr(name, "_total") == NULL)
				continue;
			printf("%s", first ? "" : ", ");
			first = 0;
			mc_json_str(stdout, name, strlen(name));
			printf(": %.6g", (s->s[k].v - was) / (s->t - p->t));
		}
		printf("}}");
	}
	puts("]}");
	fflush(stdout);
}

static void live_clear(struct live *l)
{
	for (size_t i = 0; i < l->n; i++)
		snap_clear(&l->now[i]);
	free(l->now);
	memset(l, 0, sizeof(*l));
}

int mc_top(struct mc *mc, const struct mc_args *a)
{
	return mc_live(mc, a, 0, 1, 2);
}

/* `stats --live [--interval S] [--count N] [--daemon D]` and `top`. */
int mc_live(struct mc *mc, const struct mc_args *a, int k_interval, int k_count, int k_daemon)
{
	struct live prev = { 0 }, now = { 0 };
	static const struct snap empty;
	uint64_t interval = 2, count = 0;
	bool tty = isatty(STDOUT_FILENO) && !mc->json;
	const char *ident;
	int rc = MC_OK;

	if ((a->set[k_interval] &&
	     (str_to_u64(a->val[k_interval], strlen(a->val[k_interval]), 3600, &interval) < 0 ||
	      interval == 0)) ||
	    (a->set[k_count] &&
	     str_to_u64(a->val[k_count], strlen(a->val[k_count]), UINT32_MAX, &count) < 0))
		return mc_usage(mc, "--interval takes 1..3600 seconds, --count a number");
	if (daemon_opt(mc, a, k_daemon, &ident) < 0)
		return MC_USAGE;
	for (uint64_t i = 0; count == 0 || i < count; i++) {
		struct gather g = { .each = live_each, .arg = &now };
		char when[32];

		if (i > 0)
			sleep((unsigned)interval);
		rc = gather(mc, ident, "metrics", &g);
		if (now.n == 0) {
			if (rc == MC_OK || g.found != g.failed) /* not refused yet */
				rc = mc_refuse(mc, MC_TEMPFAIL, "the lines above say why; retry",
					       "no metrics from any daemon");
			break;
		}
		if (mc->json) {
			live_json(&now, i > 0 ? &prev : NULL);
		} else {
			mc_fmt_time(when, sizeof(when), (int64_t)time(NULL));
			if (tty)
				fputs("\033[H\033[2J", stdout);
			printf("Heron  %s  every %" PRIu64 " s (rates over the last interval; the "
			       "first since each daemon started)\n",
			       when, interval);
			for (size_t d = 0; d < now.n; d++) {
				const struct snap *p = &empty;

				for (size_t j = 0; j < prev.n; j++)
					if (strcmp(prev.now[j].ident, now.now[d].ident) == 0)
						p = &prev.now[j];
				show_daemon(&now.now[d], p);
			}
			fflush(stdout);
		}
		live_clear(&prev);
		prev = now;
		memset(&now, 0, sizeof(now));
	}
	live_clear(&prev);
	live_clear(&now);
	return rc;
}

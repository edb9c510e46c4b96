/* mailctl_queue.c — owns mailctl's queue commands (postqueue/postsuper/postcat -q for
 * Heron): list and show (the envelope, every recorded try with its reason, the message),
 * and flush, hold, release, delete and requeue of one entry, ALL, or the entries selected
 * by --from, --to, --domain and --before, each selection changed in one store transaction.
 *
 * An entry a runner holds a lease on is shown "in progress" with the runner's worker; an
 * action keeps the lease (store_queue_apply), so nothing is sent twice. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

/* The options of the selecting commands, in the order of their table entries. */
enum { QO_FROM, QO_TO, QO_BEFORE, QO_DOMAIN };

struct qfilter {
	const char *from, *to, *domain; /* NULL: any */
	int64_t before;                 /* 0: any */
	uint64_t *ids;                  /* what matched (collected by the match) */
	size_t nids;
};

static int parse_qid(struct mc *mc, const char *s, uint64_t *id_r)
{
	char *end;

	errno = 0;
	*id_r = strtoull(s, &end, 16);
	if (errno != 0 || end == s || *end != '\0' || *id_r == 0)
		return mc_usage(mc,
				"bad queue id '%s' (16 hex digits, ALL, or filters; see "
				"`mailctl queue list`)",
				s);
	return MC_OK;
}

static const char *rcpt_state(enum store_rcpt_state s)
{
	return s == STORE_Q_DELIVERED ? "delivered" : s == STORE_Q_FAILED ? "failed" : "pending";
}

/* ------------------------------------------------------------------------------------- */
/* filters */

/* addr matches pat: the same address (case-insensitively), or pat "@domain" and addr in
   that domain; "<>" is the null sender. */
static bool addr_match(const char *addr, const char *pat)
{
	size_t al = strlen(addr), pl = strlen(pat);
	const char *at;

	if (strcmp(pat, "<>") == 0)
		return al == 0;
	if (pat[0] == '@') {
		at = strrchr(addr, '@');
		return at != NULL && str_caseeq(at + 1, strlen(at + 1), pat + 1, pl - 1);
	}
	return str_caseeq(addr, al, pat, pl);
}

/* A recipient not yet delivered matches pat. */
static bool rcpt_match(const struct store_queue_msg *qm, const char *pat)
{
	for (size_t i = 0; i < qm->nrcpt; i++)
		if (qm->rcpt[i].state != STORE_Q_DELIVERED && addr_match(qm->rcpt[i].addr, pat))
			return true;
	return false;
}

static bool qfilter_match(const struct qfilter *f, const struct store_queue_msg *qm)
{
	return (f->from == NULL || addr_match(qm->sender, f->from)) &&
	       (f->to == NULL || rcpt_match(qm, f->to)) &&
	       (f->domain == NULL || rcpt_match(qm, f->domain)) &&
	       (f->before == 0 || qm->created < f->before);
}

static bool qfilter_any(const struct qfilter *f)
{
	return f->from != NULL || f->to != NULL || f->domain != NULL || f->before != 0;
}

/* The filters of a; MC_OK or the usage error. domain_opt: the command has --domain. */
static int qfilter_parse(struct mc *mc, const struct mc_args *a, bool domain_opt,
			 struct qfilter *f)
{
	memset(f, 0, sizeof(*f));
	if (a->set[QO_FROM])
		f->from = a->val[QO_FROM];
	if (a->set[QO_TO])
		f->to = a->val[QO_TO];
	if (domain_opt && a->set[QO_DOMAIN]) {
		const char *d = a->val[QO_DOMAIN];

		if (d[0] == '\0' || strchr(d, '@') != NULL)
			return mc_usage(mc, "--domain takes a domain name (example.com), not '%s'",
					d);
		f->domain = xasprintf("@%s", d);
	}
	if ((f->from != NULL && f->from[0] == '\0') || (f->to != NULL && f->to[0] == '\0'))
		return mc_usage(mc, "--from/--to take an address, @domain, or <> (null sender)");
	if (a->set[QO_BEFORE] &&
	    (mc_parse_date(a->val[QO_BEFORE], &f->before) < 0 || f->before == 0))
		return mc_usage(mc,
				"bad date '%s' (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or an age "
				"like 2d)",
				a->val[QO_BEFORE]);
	return MC_OK;
}

static void qfilter_clear(struct qfilter *f)
{
	free((char *)(uintptr_t)f->domain);
	free(f->ids);
	memset(f, 0, sizeof(*f));
}

/* ------------------------------------------------------------------------------------- */
/* list, show */

/* Pending recipients and the earliest next attempt among them. */
static size_t queue_pending(const struct store_queue_msg *qm, int64_t *next_r)
{
	size_t pending = 0;

	*next_r = 0;
	for (size_t i = 0; i < qm->nrcpt; i++)
		if (qm->rcpt[i].state == STORE_Q_PENDING) {
			pending++;
			if (*next_r == 0 || qm->rcpt[i].next_attempt < *next_r)
				*next_r = qm->rcpt[i].next_attempt;
		}
	return pending;
}

/* The columns of list; show adds envid. */
static void queue_cells(struct mc_table *tab, const struct store_queue_msg *qm, bool envid)
{
	int64_t next, now = time(NULL);
	size_t pending = queue_pending(qm, &next);
	bool leased = qm->lease_until > now;

	mc_table_row(tab);
	mc_cell_hex(tab, qm->id);
	mc_cell_str(tab, qm->sender);
	if (envid)
		mc_cell_str(tab, qm->envid);
	mc_cell_u64(tab, qm->size);
	mc_cell_time(tab, qm->created);
	mc_cell_u64(tab, qm->nrcpt);
	mc_cell_u64(tab, pending);
	mc_cell_bool(tab, qm->held);
	mc_cell_time(tab, next);
	/* a lease not expired: a worker is delivering it now */
	mc_cell_str(tab, leased        ? "in progress"
			 : qm->held    ? "held"
			 : pending > 0 ? "queued"
				       : "done");
	if (leased && qm->lease_owner > 0)
		mc_cell_u64(tab, qm->lease_owner - 1);
	else
		mc_cell_null(tab);
}

struct qlist {
	struct mc_table *tab;
	struct qfilter f;
};

static int queue_row(const struct store_queue_msg *qm, void *arg)
{
	struct qlist *l = arg;

	if (qfilter_match(&l->f, qm))
		queue_cells(l->tab, qm, false);
	return 0;
}

int mc_queue_list(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "id",         "sender",  "size", "created",
					    "recipients", "pending", "held", "next_attempt",
					    "state",      "worker",  NULL };
	struct qlist l;
	int rc;

	if ((rc = qfilter_parse(mc, a, false, &l.f)) != MC_OK)
		return rc;
	l.tab = mc_table_new(cols);
	if ((rc = store_queue_list(mc->st, queue_row, &l)) != 0) {
		mc_table_free(&l.tab);
		qfilter_clear(&l.f);
		return mc_fail(mc, rc, "cannot list the queue");
	}
	mc_table_print(mc, &l.tab);
	qfilter_clear(&l.f);
	return MC_OK;
}

static struct mc_table *tries_table(const struct store_queue_msg *qm,
				    const struct store_queue_try *v, size_t n)
{
	static const char *const cols[] = { "time", "recipient", "state", "reason", NULL };
	struct mc_table *t = mc_table_new(cols);

	for (size_t i = 0; i < n; i++) {
		mc_table_row(t);
		mc_cell_time(t, v[i].when);
		if (v[i].rcpt < qm->nrcpt)
			mc_cell_str(t, qm->rcpt[v[i].rcpt].addr);
		else
			mc_cell_null(t);
		mc_cell_str(t, rcpt_state(v[i].state));
		mc_cell_str(t, v[i].reason);
	}
	return t;
}

static struct mc_table *rcpts_table(const struct store_queue_msg *qm)
{
	static const char *const cols[] = { "recipient",    "orcpt",      "state", "attempts",
					    "next_attempt", "last_error", NULL };
	struct mc_table *t = mc_table_new(cols);

	for (size_t i = 0; i < qm->nrcpt; i++) {
		const struct store_queue_rcpt *r = &qm->rcpt[i];

		mc_table_row(t);
		mc_cell_str(t, r->addr);
		mc_cell_str(t, r->orcpt);
		mc_cell_str(t, rcpt_state(r->state));
		mc_cell_u64(t, r->attempts);
		mc_cell_time(t, r->state == STORE_Q_PENDING ? r->next_attempt : 0);
		mc_cell_str(t, r->last_error);
	}
	return t;
}

/* The message of the entry after the tables (JSON: the "message" member, a string). */
static int show_message(struct mc *mc, uint64_t id)
{
	uint64_t size;
	int fd, rc;

	if ((rc = store_queue_open(mc->st, id, &fd, &size)) != 0) {
		if (mc->json)
			fputs(", \"message\": null}\n", stdout);
		return mc_fail(mc, rc, "the message file of queue entry %016" PRIx64, id);
	}
	fputs(mc->json ? ", \"message\": \"" : "\n*** message ***\n", stdout);
	rc = mc_stream_body(fd, mc->json);
	close(fd);
	if (mc->json)
		fputs("\"", stdout);
	if (rc < 0) {
		fprintf(stderr, "mailctl: reading queue entry %016" PRIx64 ": %s\n", id,
			strerror(errno));
		return MC_ERR;
	}
	return MC_OK;
}

int mc_queue_show(struct mc *mc, const struct mc_args *a)
{
	static const char *const cols[] = { "id",           "sender",     "envid",   "size",
					    "created",      "recipients", "pending", "held",
					    "next_attempt", "state",      "worker",  NULL };
	struct store_queue_try *tries;
	struct store_queue_msg qm;
	struct mc_table *tab, *rt, *tt;
	uint64_t id;
	size_t ntries;
	int rc;

	if ((rc = parse_qid(mc, a->pos[0], &id)) != MC_OK)
		return rc;
	if ((rc = store_queue_get(mc->st, id, &qm)) != 0 ||
	    (rc = store_queue_tries(mc->st, id, &tries, &ntries)) != 0) {
		if (qm.id != 0)
			store_queue_msg_clear(&qm);
		return mc_fail(mc, rc, "queue entry %s", a->pos[0]);
	}
	tab = mc_table_new(cols);
	queue_cells(tab, &qm, true);
	rt = rcpts_table(&qm);
	tt = tries_table(&qm, tries, ntries);
	store_queue_tries_free(&tries, ntries);
	store_queue_msg_clear(&qm);
	fputs(mc->json ? "{\"entry\": " : "", stdout);
	mc_table_print_record(mc, &tab);
	fputs(mc->json ? ", \"recipients\": " : "\n", stdout);
	mc_table_print(mc, &rt);
	fputs(mc->json ? ", \"tries\": " : "\n", stdout);
	mc_table_print(mc, &tt);
	rc = a->set[0] ? show_message(mc, id) : MC_OK;
	if (mc->json)
		puts("}");
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* flush, hold, release, delete, requeue */

static int collect(const struct store_queue_msg *qm, void *arg)
{
	struct qfilter *f = arg;

	if (!qfilter_match(f, qm))
		return 0;
	f->ids = xreallocarray(f->ids, f->nids + 1, sizeof(*f->ids));
	f->ids[f->nids++] = qm->id;
	return 1;
}

static void act_report(struct mc *mc, const char *done, const struct qfilter *f, size_t n)
{
	if (mc->json) {
		printf("{\"done\": \"%s\", \"count\": %zu, \"ids\": [", done, n);
		for (size_t i = 0; i < f->nids; i++)
			printf("%s\"%016" PRIx64 "\"", i ? ", " : "", f->ids[i]);
		puts("]}");
		return;
	}
	if (f->nids == 1 && n == 1)
		printf("queue %016" PRIx64 " %s\n", f->ids[0], done);
	else
		printf("queue: %zu entr%s %s\n", n, n == 1 ? "y" : "ies", done);
}

/* One ID, ALL, or the entries the filters select (none of those: usage; all_default: no
   argument means ALL, as `queue flush` always did). */
static int queue_act(struct mc *mc, const struct mc_args *a, enum store_queue_action act,
		     const char *done, bool all_default)
{
	struct qfilter f;
	uint64_t id = 0;
	size_t n = 0;
	int rc;

	if ((rc = qfilter_parse(mc, a, act == STORE_QA_FLUSH, &f)) != MC_OK) {
		qfilter_clear(&f);
		return rc;
	}
	if (a->npos == 1 && strcmp(a->pos[0], "ALL") != 0) {
		if (qfilter_any(&f))
			rc = mc_usage(mc, "an ID or filters, not both");
		else if ((rc = parse_qid(mc, a->pos[0], &id)) == MC_OK) {
			f.ids = xmalloc(sizeof(*f.ids));
			f.ids[f.nids++] = id;
		}
	} else if (a->npos == 0 && !qfilter_any(&f) && !all_default)
		rc = mc_usage(mc, "say which entries: an ID, ALL, or --from/--to/--before");
	if (rc == MC_OK) {
		rc = store_queue_apply(mc->st, act, id, id != 0 ? NULL : collect, &f, &n);
		if (rc != 0)
			rc = mc_fail(mc, rc, "queue entry %s", id != 0 ? a->pos[0] : "(selected)");
		else
			act_report(mc, done, &f, n);
	}
	qfilter_clear(&f);
	return rc;
}

int mc_queue_flush(struct mc *mc, const struct mc_args *a)
{
	return queue_act(mc, a, STORE_QA_FLUSH, "flushed", true);
}

int mc_queue_hold(struct mc *mc, const struct mc_args *a)
{
	return queue_act(mc, a, STORE_QA_HOLD, "held", false);
}

int mc_queue_release(struct mc *mc, const struct mc_args *a)
{
	return queue_act(mc, a, STORE_QA_RELEASE, "released", false);
}

int mc_queue_delete(struct mc *mc, const struct mc_args *a)
{
	return queue_act(mc, a, STORE_QA_DELETE, "deleted", false);
}

int mc_queue_requeue(struct mc *mc, const struct mc_args *a)
{
	return queue_act(mc, a, STORE_QA_REQUEUE, "requeued", false);
}

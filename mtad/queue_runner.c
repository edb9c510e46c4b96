/* queue_runner.c — owns relay scheduling: leasing due queue entries, routing each recipient
 * (transport_map, then relay_host, then the domain's MX hosts: queue_route.c; local domains go
 * to the store, or over LMTP to the user's store host when its mailHost is another), grouping recipients per next hop, the per-destination connection limit, outcomes with the retry schedule and
 * expiry, bounces, and the log line per recipient outcome (to=, relay=, delay=, status=). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/shmtable.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mtad/relay.h"

#define MAX_JOBS 256
#define TICK_MS 1000
#define TRYLOG_MAX 2048 /* the hosts tried, for the log line and the DSN */

static void job_finish(struct qjob *job);
static void work_free(struct qwork *w);

static char *dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static struct qjob *job_copy(struct queue_runner *qr, const struct store_queue_msg *qm)
{
	struct qjob *job = xcalloc(1, sizeof(*job));

	job->qr = qr;
	job->qm = *qm;
	job->qm.sender = job->sender = xstrdup(qm->sender);
	job->qm.envid = job->envid = dup_or_null(qm->envid);
	job->own = xcalloc(2 * qm->nrcpt, sizeof(*job->own));
	job->qm.rcpt = xcalloc(qm->nrcpt, sizeof(*qm->rcpt));
	job->result = xcalloc(qm->nrcpt, sizeof(*job->result));
	job->error = xcalloc(qm->nrcpt, sizeof(*job->error));
	job->remote = xcalloc(qm->nrcpt, sizeof(*job->remote));
	job->delayed = xcalloc(qm->nrcpt, sizeof(*job->delayed));
	job->recorded = xcalloc(qm->nrcpt, sizeof(*job->recorded));
	job->marked = xcalloc(qm->nrcpt, sizeof(*job->marked));
	TAILQ_INIT(&job->lmtp);
	TAILQ_INIT(&job->works);
	for (size_t i = 0; i < qm->nrcpt; i++) {
		job->qm.rcpt[i] = qm->rcpt[i];
		job->qm.rcpt[i].addr = job->own[2 * i] = xstrdup(qm->rcpt[i].addr);
		job->qm.rcpt[i].orcpt = job->own[2 * i + 1] = dup_or_null(qm->rcpt[i].orcpt);
		job->delay_noticed |= qm->rcpt[i].last_error != NULL &&
				      strncmp(qm->rcpt[i].last_error, QUEUE_DELAY_MARK,
					      strlen(QUEUE_DELAY_MARK)) == 0;
		job->qm.rcpt[i].last_error = NULL;
		job->result[i] = -1; /* not tried this time */
	}
	return job;
}

static void job_free(struct qjob *job)
{
	for (size_t i = 0; i < job->qm.nrcpt; i++) {
		free(job->own[2 * i]);
		free(job->own[2 * i + 1]);
		free(job->error[i]);
		free(job->remote[i]);
	}
	free(job->own);
	free(job->sender);
	free(job->envid);
	free(job->qm.rcpt);
	free(job->result);
	free(job->error);
	free(job->remote);
	free(job->delayed);
	free(job->recorded);
	free(job->marked);
	free(job);
}

static void tlsa_free(struct tlsa_rec *t, size_t n)
{
	for (size_t i = 0; t != NULL && i < n; i++)
		free(t[i].data);
	free(t);
}

static struct tlsa_rec *tlsa_copy(const struct tlsa_rec *t, size_t n)
{
	struct tlsa_rec *c = n ? xcalloc(n, sizeof(*c)) : NULL;

	for (size_t i = 0; i < n; i++) {
		c[i] = t[i];
		c[i].data = xmalloc(t[i].len + 1);
		memcpy(c[i].data, t[i].data, t[i].len);
	}
	return c;
}

struct qdest *queue_dest_get(struct queue_runner *qr, const char *host, const char *addr,
			     const char *port, enum tls_level tls, const struct tlsa_rec *tlsa,
			     size_t ntlsa, bool sts_testing, bool lmtp)
{
	struct qdest *d;

	TAILQ_FOREACH(d, &qr->dests, entry)
	if (strcmp(d->addr, addr) == 0 && strcmp(d->port, port) == 0 &&
	    strcmp(d->host, host) == 0 && d->tls == tls && d->lmtp == lmtp) {
		if (tls == TLSL_DANE) { /* the records as DNS says now */
			tlsa_free(d->tlsa, d->ntlsa);
			d->tlsa = tlsa_copy(tlsa, ntlsa);
			d->ntlsa = ntlsa;
		}
		d->sts_testing |= sts_testing;
		return d;
	}
	d = xcalloc(1, sizeof(*d));
	d->tls = tls;
	d->lmtp = lmtp;
	d->sts_testing = sts_testing;
	d->tlsa = tlsa_copy(tlsa, ntlsa);
	d->ntlsa = ntlsa;
	d->host = xstrdup(host);
	d->addr = xstrdup(addr);
	d->port = xstrdup(port);
	snprintf(d->key, sizeof(d->key), "%s:%s", host, port);
	TAILQ_INIT(&d->waiting);
	TAILQ_INIT(&d->idle);
	TAILQ_INIT(&d->all);
	TAILQ_INSERT_TAIL(&qr->dests, d, entry);
	return d;
}

/* A transport_map or relay_host value: "host:port", "[host]:port", "[v6]:port" or "host"
   (port 25). Brackets: the host as named, no MX lookup. */
static void nexthop_parse(const char *hp, struct qnexthop *nh)
{
	const char *colon = strrchr(hp, ':');

	const char *sp = strchr(hp, ' ');
	char buf[DNS_NAME_MAX + 16];

	memset(nh, 0, sizeof(*nh));
	if (sp != NULL) {
		/* "host:port tls=LEVEL" */
		const char *opt = sp + strspn(sp, " ");
		int l = strncmp(opt, "tls=", 4) == 0 ? tls_level_parse(opt + 4, strlen(opt + 4))
						     : -1;

		if (l < 0)
			log_warnx("transport_map: ignoring \"%s\"", opt);
		nh->tls = l < 0 ? TLSL_DEFAULT : (enum tls_level)l;
		snprintf(buf, sizeof(buf), "%.*s", (int)(sp - hp), hp);
		hp = buf;
		colon = strrchr(hp, ':');
	}
	snprintf(nh->port, sizeof(nh->port), "25");
	if (hp[0] == '[') {
		const char *end = strchr(hp, ']');
		size_t n = end ? (size_t)(end - hp - 1) : 0;

		snprintf(nh->name, sizeof(nh->name), "%.*s", (int)n, hp + 1);
		if (end && end[1] == ':')
			snprintf(nh->port, sizeof(nh->port), "%s", end + 2);
	} else if (colon != NULL && strchr(hp, ':') == colon) {
		snprintf(nh->name, sizeof(nh->name), "%.*s", (int)(colon - hp), hp);
		snprintf(nh->port, sizeof(nh->port), "%s", colon + 1);
		nh->mx = true;
	} else {
		snprintf(nh->name, sizeof(nh->name), "%.*s", (int)sizeof(nh->name) - 1, hp);
		nh->mx = strchr(hp, ':') == NULL;
	}
	if (mx_is_literal(nh->name))
		nh->mx = false;
}

/* The next hop for addr: a transport_map entry for its domain, else relay_host, else the
   domain's MX hosts (*local_r: the domain is ours). */
static void route(struct queue_runner *qr, const char *addr, bool *local_r, struct qnexthop *nh)
{
	const struct mtad_conf *mc = &conf_values(qr->m->conf)->mtad;
	const struct conf_list *map = mc->transport_map, *locals = mc->local_domains;
	const char *at = strrchr(addr, '@');
	const char *dom = at ? at + 1 : "";
	size_t dl = strlen(dom);

	*local_r = at == NULL || conf_list_has(locals, dom, dl);
	if (*local_r)
		return;
	for (size_t i = 0; i < map->n; i++) {
		const char *eq = strchr(map->v[i], '=');

		if (eq != NULL && str_caseeq(map->v[i], (size_t)(eq - map->v[i]), dom, dl)) {
			nexthop_parse(eq + 1, nh);
			return;
		}
	}
	if (mc->relay_host[0] != '\0') {
		nexthop_parse(mc->relay_host, nh);
		return;
	}
	memset(nh, 0, sizeof(*nh));
	snprintf(nh->name, sizeof(nh->name), "%s", dom);
	snprintf(nh->port, sizeof(nh->port), "%s", qr->relay_port);
	nh->mx = true;
	nh->sts = true;
}

/* [mtad] postmaster pm is one of our addresses (a local domain's). */
static bool pm_local(struct queue_runner *qr, const char *pm)
{
	struct qnexthop nh;
	bool local;

	route(qr, pm, &local, &nh);
	return local;
}

/* The LMTP listener of store host host (a user's mailHost): its mailhost_lmtp entry, else
   the host's addresses on mailhost_lmtp_port. Never an MX lookup. */
static void mailhost_nexthop(struct queue_runner *qr, const char *host, struct qnexthop *nh)
{
	const struct mtad_conf *mc = &conf_values(qr->m->conf)->mtad;
	const struct conf_list *map = mc->mailhost_lmtp;
	size_t hl = strlen(host);

	memset(nh, 0, sizeof(*nh));
	snprintf(nh->name, sizeof(nh->name), "%.*s", (int)sizeof(nh->name) - 1, host);
	for (size_t i = 0; i < map->n; i++) {
		const char *eq = strchr(map->v[i], '=');

		if (eq != NULL && str_caseeq(map->v[i], (size_t)(eq - map->v[i]), host, hl)) {
			const char *br = strchr(eq + 1, ']');

			nexthop_parse(eq + 1, nh);
			if (strchr(br != NULL ? br : eq + 1, ':') != NULL)
				goto done;
			break;
		}
	}
	snprintf(nh->port, sizeof(nh->port), "%" PRId64, mc->mailhost_lmtp_port);
done:
	snprintf(nh->host, sizeof(nh->host), "%.*s", (int)sizeof(nh->host) - 1, host);
	nh->mx = false;
	nh->sts = false;
	nh->lmtp = true;
}

static struct qwork *work_new(struct qjob *job, const struct qnexthop *nh)
{
	struct qwork *w = xcalloc(1, sizeof(*w));

	w->job = job;
	if (nh != NULL)
		w->nh = *nh;
	w->idx = xcalloc(job->qm.nrcpt, sizeof(*w->idx));
	buf_init(&w->trylog, 256, TRYLOG_MAX);
	job->outstanding++;
	TAILQ_INSERT_TAIL(&job->works, w, jentry);
	return w;
}

void queue_dest_pump(struct queue_runner *qr, struct qdest *d)
{
	struct qwork *w;

	/* a new connection needs a slot of relay_concurrency, counted over all workers; when
	   other workers hold them all, the work waits for the next tick */
	while ((w = TAILQ_FIRST(&d->waiting)) != NULL &&
	       (!TAILQ_EMPTY(&d->idle) || shmtable_take(qr->m->shared, SHM_RELAY_DEST, d->key,
							qr->m->worker, qr->concurrency))) {
		TAILQ_REMOVE(&d->waiting, w, entry);
		smtp_client_run(qr, w);
	}
}

void queue_dest_released(struct queue_runner *qr, struct qdest *d)
{
	queue_dest_pump(qr, d);
}

/* A local recipient of a queue entry (a bounce to one of our users, a requeued local
   recipient, a maildrop file's): its copy of the message file, delivered through the group
   commit. Exactly once: the delivery's commit in the user's partition also writes a record
   (store_drop.c's DBI, key mark_key) naming the entry and the recipient, so that when mtad
   is killed before the queue records the delivery the entry's next run finds the record and
   does not deliver again; the record goes once the queue has the outcome (unmark). */
struct local_dlv {
	struct qwork *w;
	struct store_rcpt r;
	char user[256];
	char folder[MAILADDR_LOCAL_MAX + 1]; /* user+DETAIL@'s folder (subaddress_folder), or "" */
	char key[48];                        /* mark_key */
	unsigned part;
	struct store_blob *blob;
};

void queue_record_key(char kind, uint64_t id, size_t i, char *out, size_t size)
{
	snprintf(out, size, "%c/%016" PRIx64 "/%zu", kind, id, i);
}

bool queue_record_parse(const char *key, char *kind, uint64_t *id, size_t *idx)
{
	uint64_t v = 0;
	size_t n = 0;
	const char *p;

	if (key[0] == '\0' || strchr("qrv", key[0]) == NULL || key[1] != '/')
		return false;
	for (p = key + 2; p < key + 18; p++) {
		if (!isxdigit((unsigned char)*p))
			return false;
		v = v << 4 | (uint64_t)(isdigit((unsigned char)*p)
						? *p - '0'
						: (tolower((unsigned char)*p) - 'a' + 10));
	}
	if (*p++ != '/' || !isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		if (n > (SIZE_MAX - 9) / 10)
			return false;
		n = n * 10 + (size_t)(*p - '0');
	}
	if (*p != '\0')
		return false;
	*kind = key[0];
	*id = v;
	*idx = n;
	return true;
}

static void mark_key(uint64_t id, size_t i, char *out, size_t size)
{
	queue_record_key('q', id, i, out, size);
}

/* In the queue's txn that records recipient idx's outcome (no longer pending): the records
   of its Sieve redirect copies and vacation reply go with it. */
static int forget_sent_txn(struct store_txn *t, uint64_t id, size_t idx)
{
	char key[QUEUE_RECORD_KEY_MAX];
	int rc;

	queue_record_key('r', id, idx, key, sizeof(key));
	if ((rc = store_drop_del_txn(t, key)) != 0)
		return rc;
	queue_record_key('v', id, idx, key, sizeof(key));
	return store_drop_del_txn(t, key);
}

static int unmark_fn(struct store_txn *t, void *arg)
{
	return store_drop_del_txn(t, arg);
}

static void unmark_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	(void)rcpts;
	(void)n;
	(void)value;
	if (result != 0)
		log_warnx("queue: the delivery record %s not dropped: %s (at the next start)",
			  (char *)arg, store_strerror(result));
	free(arg);
}

/* Recipient i's outcome is in the queue: its delivery's record goes. */
static void unmark(struct qjob *job, size_t i)
{
	char *key;

	if (job->marked[i] == 0 || job->qr->m->gc == NULL)
		return;
	key = xmalloc(48);
	mark_key(job->qm.id, i, key, 48);
	store_gc_submit(job->qr->m->gc, job->marked[i] - 1, NULL, unmark_fn, key, unmark_done,
			key);
	job->marked[i] = 0;
}

static void local_outcome(struct local_dlv *ld, int rc)
{
	/* over quota waits like a temporary failure (until max_queue_lifetime) */
	queue_rcpt_outcome(ld->w, 0,
			   rc == 0                   ? 250
			   : rc == STORE_EQUOTA      ? 452
			   : store_err_temporary(rc) ? 451
						     : 550,
			   rc == 0              ? "2.0.0 delivered to INBOX"
			   : rc == STORE_EQUOTA ? "4.2.2 mailbox full"
						: store_strerror(rc),
			   "local");
	queue_work_done(ld->w);
	store_blob_free(&ld->blob);
	free(ld);
}

static void local_sieved(int code, const char *text, void *arg)
{
	struct local_dlv *ld = arg;

	if (code / 100 == 2) /* its record, if the script's delivery wrote one, goes later */
		ld->w->job->marked[ld->w->idx[0]] = ld->part + 1;
	queue_rcpt_outcome(ld->w, 0, code, text, "local");
	queue_work_done(ld->w);
	store_blob_free(&ld->blob);
	free(ld);
}

static void local_delivered(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			    void *arg)
{
	struct local_dlv *ld = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	if (result == 0 && ld->r.result == 0)
		ld->w->job->marked[ld->w->idx[0]] = ld->part + 1;
	local_outcome(ld, result != 0 ? result : ld->r.result);
}

/* Delivered before mtad was killed (or before a 451), the queue not told: not again; a
   vacation reply the delivery's commit decided on and no queue commit took yet is queued
   now. The reply stays owed (451, tried again) while it cannot be: the message file not
   read, the scripts not run (deliver_sieve_queued); it is given up only when the entry's
   file is gone or the recipient's scripts give no reply now. */
static void local_recorded(struct local_dlv *ld, const struct store_drop *rec)
{
	struct store *st = ld->w->job->qr->m->store;
	struct qjob *job = ld->w->job;
	size_t i = ld->w->idx[0];
	uint64_t size;
	int fd, rc = 0;

	log_info("%016" PRIx64 ": to=<%s> delivered before a restart (recorded in "
		 "partition %u)%s",
		 job->qm.id, job->qm.rcpt[i].addr, rec->part,
		 rec->kind == STORE_DROP_REPLY_OWED ? ", its vacation reply owed" : "");
	if (rec->kind == STORE_DROP_REPLY_OWED &&
	    (rc = store_queue_open(st, job->qm.id, &fd, &size)) == 0) {
		struct deliver_queued dq = {
			.qid = job->qm.id,
			.from = job->qm.sender,
			.addr = job->qm.rcpt[i].addr,
			.user = ld->user,
			.part = rec->part,
			.fd = fd,
			.size = size,
			.idx = i,
			.reply_owed = true,
			.dup_seen = rec->qid,
		};

		ld->part = rec->part;
		rc = deliver_sieve_queued(job->qr->m, &dq, local_sieved, ld);
		close(fd);
		if (rc == 0)
			return; /* local_sieved: the reply queued (or 451) */
	} else if (rec->kind == STORE_DROP_REPLY_OWED && rc != STORE_ENOQUEUE) {
		log_warnx("%016" PRIx64 ": to=<%s> vacation reply owed, the message file not "
			  "read: %s (tried again)",
			  job->qm.id, job->qm.rcpt[i].addr, store_strerror(rc));
		local_outcome(ld, STORE_EIO);
		return;
	} else if (rec->kind == STORE_DROP_REPLY_OWED) {
		log_warnx("%016" PRIx64 ": to=<%s> vacation reply owed, the message file gone: "
			  "not sent",
			  job->qm.id, job->qm.rcpt[i].addr);
	}
	job->marked[i] = rec->part + 1;
	local_outcome(ld, 0);
}

/* Copies the queue's message file into a blob of part (read here; made durable by the
   commit that references it, in the committer's thread) and queues the delivery. */
static void local_deliver(struct local_dlv *ld, unsigned part)
{
	struct store *st = ld->w->job->qr->m->store;
	char chunk[65536];
	struct qjob *job = ld->w->job;
	size_t i = ld->w->idx[0];
	struct store_drop rec;
	uint64_t size;
	ssize_t got;
	int fd, rc;

	ld->part = part;
	mark_key(job->qm.id, i, ld->key, sizeof(ld->key));
	if ((rc = store_drop_get(st, ld->key, &rec)) == 0) {
		local_recorded(ld, &rec);
		return;
	}
	if (rc != STORE_ENOMSG) { /* cannot tell whether it was delivered: not now */
		local_outcome(ld, STORE_EIO);
		return;
	}
	ld->r.drop_key = ld->key; /* written with the delivery (store_batch.c) */
	if ((rc = store_queue_open(st, ld->w->job->qm.id, &fd, &size)) != 0) {
		local_outcome(ld, rc);
		return;
	}
	if ((rc = store_blob_new(st, part, &ld->blob)) == 0) {
		while (rc == 0 && (got = read(fd, chunk, sizeof(chunk))) != 0) {
			if (got < 0 && errno == EINTR)
				continue;
			rc = got < 0 ? STORE_EIO : store_blob_write(ld->blob, chunk, (size_t)got);
		}
	}
	/* the file stays open for the recipient's Sieve scripts, which read it mapped */
	int sieve_fd = fd;

	if (rc == 0)
		rc = store_blob_finish_deferred(ld->blob);
	if (rc != 0) {
		close(sieve_fd);
		local_outcome(ld, rc);
		return;
	}
	{
		struct deliver_queued dq = {
			.qid = job->qm.id,
			.from = job->qm.sender,
			.addr = job->qm.rcpt[i].addr,
			.user = ld->user,
			.part = part,
			.fd = sieve_fd,
			.size = size,
			.blob = ld->blob,
			.mark = ld->key,
			.idx = i,
			.folder = ld->folder[0] ? ld->folder : NULL,
		};

		rc = deliver_sieve_queued(job->qr->m, &dq, local_sieved, ld);
		close(sieve_fd);
		if (rc == 0)
			return; /* the recipient's Sieve scripts deliver it */
	}
	store_gc_deliver(ld->w->job->qr->m->gc, ld->blob, 0, &ld->r, 1, local_delivered, ld);
}

static void local_user_made(int rc, unsigned part, void *arg)
{
	if (rc != 0)
		local_outcome(arg, rc);
	else
		local_deliver(arg, part);
}

/* w's recipient is homed on store host host: it joins the job's work for that host (one LMTP
   transaction for all of them), or starts one. */
static void lmtp_add(struct qjob *job, struct qwork *w, const char *host)
{
	struct qwork *o;

	mailhost_nexthop(job->qr, host, &w->nh);
	TAILQ_FOREACH(o, &job->lmtp, entry)
	if (strcmp(o->nh.port, w->nh.port) == 0 && strcasecmp(o->nh.name, w->nh.name) == 0)
		break;
	if (o == NULL) {
		TAILQ_INSERT_TAIL(&job->lmtp, w, entry);
		return;
	}
	o->idx[o->n++] = w->idx[0];
	work_free(w);       /* off the job's list of works too */
	job->outstanding--; /* o is outstanding still: the job does not end here */
}

/* Every local recipient's lookup is in: the works for store hosts start. */
static void lmtp_start_all(struct qjob *job)
{
	struct qwork *w;

	while ((w = TAILQ_FIRST(&job->lmtp)) != NULL) {
		TAILQ_REMOVE(&job->lmtp, w, entry);
		queue_route_start(job->qr, w);
	}
}

/* Delivers w's recipient to the store user login (its account made when new). */
static void local_user(struct qwork *w, const char *login, int partition, uint64_t quota)
{
	struct local_dlv *ld = xcalloc(1, sizeof(*ld));
	unsigned part;
	int rc;

	ld->w = w;
	str_lcpy(ld->user, login, sizeof(ld->user));
	ld->r.user = ld->user;
	if (conf_values(w->job->qr->m->conf)->mtad.subaddress_folder) {
		/* user+tag@ into the folder tag when it exists (the store: else INBOX), as the
		   session's delivery does */
		char key[MAILADDR_TEXT_MAX + 1];

		rcpt_lookup_key(w->job->qr->m, w->job->qm.rcpt[w->idx[0]].addr, key, sizeof(key),
				ld->folder, sizeof(ld->folder));
		ld->r.mailbox = ld->folder[0] ? ld->folder : NULL;
	}
	rc = deliver_user_ensure(w->job->qr->m, ld->user, partition, quota, &part, local_user_made,
				 ld);
	if (rc != DELIVER_PENDING)
		local_user_made(rc, part, ld);
}

/* Local recipients in the queue: look up, make the account when new, deliver (or, for a user
   homed on another store host, LMTP to it). */
static void local_lookup_cb(const struct ldapauth_reply *reply, void *arg)
{
	struct qwork *w = arg;
	struct qjob *job = w->job;
	bool last = --job->lookups == 0;

	if (reply->result == LDAPAUTH_OK &&
	    mtad_mailhost_elsewhere(job->qr->m, reply->user->mailhost)) {
		lmtp_add(job, w, reply->user->mailhost);
		if (last)
			lmtp_start_all(job);
		return;
	}
	/* before w's own outcome, which may end the job when it is the last work */
	if (last)
		lmtp_start_all(job);
	if (reply->result == LDAPAUTH_ETEMP) {
		queue_rcpt_outcome(w, 0, 451, "4.3.0 directory unavailable", "local");
		queue_work_done(w);
		return;
	}
	const char *pm = conf_values(w->job->qr->m->conf)->mtad.postmaster;
	const char *addr = w->job->qm.rcpt[w->idx[0]].addr;

	if (reply->result == LDAPAUTH_OK) {
		local_user(w, reply->user->login, reply->user->partition, reply->user->quota);
	} else if (!w->pm_lookup && rcpt_is_postmaster(job->qr->m, addr) &&
		   strchr(pm, '@') == NULL) {
		local_user(w, pm, -1, 0); /* postmaster@ is always someone's (rcpt_resolve.c) */
	} else if (!w->pm_lookup && rcpt_is_postmaster(job->qr->m, addr) &&
		   pm_local(job->qr, pm) && job->qr->m->la != NULL) {
		/* [mtad] postmaster a local user's address: delivered to that user, as the
		   session's fallback does (a Sieve recipient, a bounce or a maildrop file queued
		   for postmaster@ by any path) */
		char key[MAILADDR_TEXT_MAX + 1];

		w->pm_lookup = true;
		job->lookups++;
		rcpt_lookup_key(job->qr->m, pm, key, sizeof(key), NULL, 0);
		ldapauth_lookup(job->qr->m->la, key, local_lookup_cb, w);
	} else {
		queue_rcpt_outcome(w, 0, 550, "5.1.1 no such user", "local");
		queue_work_done(w);
	}
}

static void job_dispatch(struct queue_runner *qr, struct qjob *job)
{
	struct qwork_list works = TAILQ_HEAD_INITIALIZER(works);

	TAILQ_INSERT_TAIL(&qr->jobs, job, entry);
	qr->njobs++;
	job->outstanding = 1; /* held until every work is started */
	for (size_t i = 0; i < job->qm.nrcpt; i++) {
		bool local;
		struct qnexthop nh;
		struct qwork *w = NULL;

		if (job->qm.rcpt[i].state != STORE_Q_PENDING)
			continue;
		route(qr, job->qm.rcpt[i].addr, &local, &nh);
		if (local) {
			w = work_new(job, NULL);
			w->idx[w->n++] = i;
			job->lookups++;
			char key[MAILADDR_TEXT_MAX + 1];

			/* user+tag@ is user@'s (rcpt_resolve.c) */
			rcpt_lookup_key(qr->m, job->qm.rcpt[i].addr, key, sizeof(key), NULL, 0);
			if (qr->m->la != NULL)
				ldapauth_lookup(qr->m->la, key, local_lookup_cb, w);
			else
				local_lookup_cb(&(struct ldapauth_reply){ .result =
										  LDAPAUTH_ETEMP },
						w);
			continue;
		}
		TAILQ_FOREACH(w, &works, entry)
		if (w->nh.mx == nh.mx && strcmp(w->nh.port, nh.port) == 0 &&
		    strcasecmp(w->nh.name, nh.name) == 0)
			break;
		if (w == NULL) {
			w = work_new(job, &nh);
			TAILQ_INSERT_TAIL(&works, w, entry);
		}
		w->idx[w->n++] = i;
	}
	struct qwork *w;
	while ((w = TAILQ_FIRST(&works)) != NULL) {
		TAILQ_REMOVE(&works, w, entry);
		queue_route_start(qr, w);
	}
	if (--job->outstanding == 0)
		job_finish(job);
}

/* A (re)started worker: the entries the worker of its slot had leased when it died come back
   now, not when their leases expire; worker 0 also takes back those of slots no longer run
   (fewer workers than before). One mtad per store. Through the group commit; the runner
   leases nothing before it is done. */
struct qrelease {
	struct queue_runner *qr;
	unsigned worker;
	uint32_t nworkers;
	size_t n, more;
};

static int release_fn(struct store_txn *t, void *arg)
{
	struct qrelease *r = arg;
	int rc = store_queue_release_owners_txn(t, r->qr->owner, r->qr->owner, &r->n);

	r->more = 0;
	if (rc == 0 && r->worker == 0)
		rc = store_queue_release_owners_txn(t, r->nworkers + 1, UINT32_MAX, &r->more);
	return rc;
}

static void release_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			 void *arg)
{
	struct qrelease *r = arg;
	struct queue_runner *qr = r->qr;

	(void)rcpts;
	(void)n;
	(void)value;
	if (result != 0)
		log_warnx("queue: leases of a dead worker not released: %s",
			  store_strerror(result));
	else if (r->n + r->more > 0)
		log_info("queue: worker %u released %zu entries leased before it started",
			 r->worker, r->n + r->more);
	free(r);
	qr->leasing = false;
	queue_runner_kick(qr->m);
}

static void release_dead(struct queue_runner *qr, unsigned worker)
{
	struct qrelease *r = xcalloc(1, sizeof(*r));

	r->qr = qr;
	r->worker = worker;
	r->nworkers = (uint32_t)conf_values(qr->m->conf)->mtad.workers;
	qr->leasing = true;
	store_gc_submit(qr->m->gc, STORE_QUEUE_PART, NULL, release_fn, r, release_done, r);
}

/* Remote recipients a work delivered: their 250 goes into the queue at once, through the
   group commit, so that a crash from now on does not send them again (the job's other
   outcomes are written when all of its works end). */
struct qrecord {
	struct qjob *job;
	uint64_t id;
	size_t n;
	size_t idx[];
};

static int record_fn(struct store_txn *t, void *arg)
{
	struct qrecord *r = arg;

	for (size_t k = 0; k < r->n; k++) {
		int rc = store_queue_rcpt_set_txn(t, r->id, r->idx[k], STORE_Q_DELIVERED, 0, NULL);

		if (rc != 0 && rc != STORE_ENOQUEUE)
			return rc;
		if ((rc = forget_sent_txn(t, r->id, r->idx[k])) != 0)
			return rc;
	}
	return 0;
}

static void record_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct qrecord *r = arg;
	struct qjob *job = r->job;

	(void)rcpts;
	(void)n;
	(void)value;
	if (result == 0)
		for (size_t k = 0; k < r->n; k++) {
			job->recorded[r->idx[k]] = true;
			unmark(job, r->idx[k]);
		}
	else
		log_warnx("%016" PRIx64 ": recording delivery failed: %s (kept for the end of the "
			  "run)",
			  r->id, store_strerror(result));
	free(r);
	if (--job->outstanding == 0)
		job_finish(job);
}

static void record_delivered(struct qwork *w)
{
	struct qjob *job = w->job;
	struct qrecord *r = xcalloc(1, sizeof(*r) + w->n * sizeof(r->idx[0]));

	r->job = job;
	r->id = job->qm.id;
	for (size_t k = 0; k < w->n; k++)
		if (job->result[w->idx[k]] == STORE_Q_DELIVERED)
			r->idx[r->n++] = w->idx[k];
	if (r->n == 0 || job->qr->m->gc == NULL) {
		free(r);
		return;
	}
	job->outstanding++; /* the job ends after the record */
	store_gc_submit(job->qr->m->gc, STORE_QUEUE_PART, NULL, record_fn, r, record_done, r);
}

/* MAX_JOBS in flight: the next pass is finish_done's, when a job ends (not the next tick,
   which left the runner up to TICK_MS idle with entries due and a slot free) */
static void runner_full(struct queue_runner *qr)
{
	if (!qr->full)
		log_debug("queue: %d jobs in flight, the most: the next lease when one ends",
			  MAX_JOBS);
	qr->full = true;
}

/* The entries leased are durable: their sends start (none when the runner stops meanwhile:
   their leases run out, or the worker's successor releases them). */
static void lease_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct queue_runner *qr = arg;
	struct store_queue_lease *l = qr->lease;
	bool more;

	(void)rcpts;
	(void)n;
	(void)value;
	qr->lease = NULL;
	qr->leasing = false;
	if (result != 0)
		log_warnx("queue lease failed: %s", store_strerror(result));
	for (size_t i = 0; result == 0 && !qr->stopping && i < store_queue_lease_count(l); i++)
		job_dispatch(qr, job_copy(qr, store_queue_lease_msg(l, i)));
	/* as many as asked: more may be due, leased now (or when a job ends, when full) */
	more = result == 0 && store_queue_lease_count(l) == qr->lease_max;
	store_queue_lease_free(&l);
	if (more && qr->njobs >= MAX_JOBS)
		runner_full(qr);
	else if (more)
		queue_runner_kick(qr->m);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct queue_runner *qr = arg;
	int64_t lease_s = qr->timeout_ms / 1000 * 3 + 5; /* a crashed runner's entries return */

	(void)fd;
	(void)what;
	if (qr->stopping)
		return;
	struct qdest *d;
	TAILQ_FOREACH(d, &qr->dests, entry)
	queue_dest_pump(qr, d);
	if (qr->njobs >= MAX_JOBS) {
		runner_full(qr);
		return;
	}
	if (qr->leasing)
		return;
	/* an idle queue costs one read txn a tick, not a write txn (and its commit) */
	if (!store_queue_any_due(qr->m->store, clock_wall_s()))
		return;
	/* the lease is durable before any send starts (a kill -9 then leaves the entry leased:
	   nothing is sent by two runners) */
	qr->leasing = true;
	qr->lease_max = MAX_JOBS - qr->njobs;
	qr->lease = store_queue_lease_new(qr->owner, clock_wall_s(), lease_s, qr->lease_max);
	store_gc_submit(qr->m->gc, STORE_QUEUE_PART, NULL, store_queue_lease_fn, qr->lease,
			lease_done, qr);
}

/* At worker 0's start: the delivery records (mark_key) whose outcome the queue has (mtad
   was killed between the queue's record and unmark's commit) are dropped, at most
   QUEUE_MARK_SWEEP records read a start. A record whose recipient is still pending stays:
   it is what keeps the next run from delivering again. */
#define QUEUE_MARK_SWEEP 65536

struct mark_sweep {
	struct queue_runner *qr;
	size_t seen, dropped;
};

static int sweep_mark(const struct store_drop *d, void *arg)
{
	struct mark_sweep *sw = arg;
	struct store_queue_msg qm;
	uint64_t id;
	size_t idx;
	bool finished;
	char kind, *key;
	int rc;

	if (!queue_record_parse(d->key, &kind, &id, &idx))
		return 0; /* a maildrop file's (pickup.c: NAME/dev/ino/mtime, NAME may be "r") */
	sw->seen++;
	rc = store_queue_get(sw->qr->m->store, id, &qm);
	if (rc != 0 && rc != STORE_ENOQUEUE)
		return 0; /* cannot say now: kept */
	finished = rc == STORE_ENOQUEUE || idx >= qm.nrcpt ||
		   qm.rcpt[idx].state != STORE_Q_PENDING;
	if (rc == 0)
		store_queue_msg_clear(&qm);
	if (!finished)
		return 0;
	key = xstrdup(d->key);
	store_gc_submit(sw->qr->m->gc, d->part, NULL, unmark_fn, key, unmark_done, key);
	sw->dropped++;
	return 0;
}

static void sweep_marks(struct queue_runner *qr)
{
	struct mark_sweep sw = { qr, 0, 0 };
	int rc;

	if (qr->m->gc == NULL)
		return;
	if ((rc = store_drop_list(qr->m->store, QUEUE_MARK_SWEEP, sweep_mark, &sw)) != 0)
		log_warnx("queue: the local delivery records: %s", store_strerror(rc));
	else
		log_info("queue: %zu local delivery records, %zu of finished entries dropped",
			 sw.seen, sw.dropped);
}

void queue_runner_start(struct mtad *m, unsigned worker)
{
	struct queue_runner *qr = xcalloc(1, sizeof(*qr));
	struct timeval tv = { TICK_MS / 1000, (TICK_MS % 1000) * 1000 };
	char *err = NULL;

	qr->m = m;
	m->qr = qr;
	qr->owner = worker + 1;
	release_dead(qr, worker);
	srandom((unsigned)time(NULL) ^ (unsigned)getpid() << 8); /* equal MX preferences */
	qr->dns = m->dns;
	qr->own = queue_own_addrs(m->conf);
	queue_runner_reload(m);
	TAILQ_INIT(&qr->jobs);
	TAILQ_INIT(&qr->dests);
	if ((qr->tls = tls_client_ctx_new(&conf_values(m->conf)->tls, TLS_VERIFY_NONE, &err)) ==
	    NULL) {
		log_warnx("relay: no client TLS: %s", err);
		free(err);
	} else if (SSL_CTX_dane_enable(qr->tls) <= 0) {
		log_warnx("relay: no DANE support in OpenSSL");
	}
	if ((qr->verify_tls = tls_client_ctx_new(&conf_values(m->conf)->tls, TLS_VERIFY_PEER,
						 &err)) == NULL) {
		log_warnx("relay: no verifying TLS context, MTA-STS off: %s", err);
		free(err);
	} else {
		char port[16];

		snprintf(port, sizeof(port), "%" PRId64, conf_values(m->conf)->mtad.mta_sts_port);
		qr->sts = sts_cache_new(m->base, qr->dns, qr->verify_tls, port,
					qr->timeout_ms < 30000 ? qr->timeout_ms : 30000);
	}
	qr->tick = event_new(m->base, -1, EV_PERSIST, tick_cb, qr);
	qr->kick = event_new(m->base, -1, 0, tick_cb, qr);
	event_add(qr->tick, &tv);
	if (worker == 0)
		sweep_marks(qr);
	event_active(qr->kick, EV_TIMEOUT, 0);
	m->qr = qr;
}

void queue_runner_reload(struct mtad *m)
{
	const struct mtad_conf *mc = &conf_values(m->conf)->mtad;

	m->qr->concurrency = (unsigned)mc->relay_concurrency;
	m->qr->timeout_ms = mc->relay_timeout_ms;
	snprintf(m->qr->relay_port, sizeof(m->qr->relay_port), "%" PRId64, mc->relay_port);
}

void queue_runner_kick(struct mtad *m)
{
	/* the one-shot event: activating the persistent tick would also move its next timeout
	   a TICK_MS on from the last (libevent's EV_PERSIST), so a burst of kicks put the next
	   tick minutes away: retries, a mailctl queue flush and works waiting for another
	   worker's connection slot all waited for it */
	if (m->qr != NULL && !m->qr->stopping)
		event_active(m->qr->kick, EV_TIMEOUT, 0);
}

void queue_runner_stop(struct mtad *m)
{
	struct queue_runner *qr = m->qr;
	struct qdest *d;
	struct qjob *job;

	if (qr == NULL)
		return;
	/* unfinished jobs keep their lease; it expires (or the worker's successor releases it)
	   and another runner retries them; records in the group commit end first */
	qr->stopping = true;
	if (m->gc != NULL)
		store_gc_flush(m->gc);
	TAILQ_FOREACH(d, &qr->dests, entry)
	smtp_client_close_all(d);
	while ((job = TAILQ_FIRST(&qr->jobs)) != NULL) { /* in flight: freed, the lease stays */
		struct qwork *w;

		while ((w = TAILQ_FIRST(&job->works)) != NULL) {
			for (size_t k = 0; k < 3; k++)
				dns_cancel(&w->q[k]);
			work_free(w);
		}
		TAILQ_REMOVE(&qr->jobs, job, entry);
		qr->njobs--;
		job_free(job);
	}
	while ((d = TAILQ_FIRST(&qr->dests)) != NULL) {
		TAILQ_REMOVE(&qr->dests, d, entry);
		free(d->host);
		tlsa_free(d->tlsa, d->ntlsa);
		free(d->addr);
		free(d->port);
		free(d);
	}
	free(qr->own->v);
	free(qr->own);
	sts_cache_free(&qr->sts);
	tls_ctx_free(&qr->verify_tls);
	event_free(qr->tick);
	event_free(qr->kick);
	tls_ctx_free(&qr->tls);
	free(qr);
	m->qr = NULL;
}

const char *queue_dsn_of(const char *text, int code, char *buf, size_t size)
{
	unsigned a, b, c;

	if (text != NULL && sscanf(text, "%1u.%3u.%3u", &a, &b, &c) == 3 && a >= 2 && a <= 5) {
		snprintf(buf, size, "%u.%u.%u", a, b, c);
		return buf;
	}
	snprintf(buf, size, "%d.0.0", code >= 200 && code < 600 ? code / 100 : 4);
	return buf;
}

void queue_rcpt_outcome(struct qwork *w, size_t k, int code, const char *text, const char *relay)
{
	struct qjob *job = w->job;
	size_t i = w->idx[k];
	const struct conf *c = job->qr->m->conf;
	int64_t age_s = clock_wall_s() - job->qm.created;
	const char *status;
	char dsn[16], reply[8] = "";

	if (code >= 200 && code < 300) {
		job->result[i] = STORE_Q_DELIVERED;
		status = "sent";
		mtad_metrics_delivery(relay != NULL && strcmp(relay, "local") == 0
					      ? MTAD_DLV_LOCAL
					      : MTAD_DLV_RELAYED);
	} else if (code >= 500 && code < 600) {
		job->result[i] = STORE_Q_FAILED;
		status = "bounced";
		mtad_metrics_delivery(MTAD_DLV_BOUNCED);
	} else if (age_s * 1000 >= conf_values(c)->mtad.max_queue_lifetime_ms) {
		job->result[i] = STORE_Q_FAILED;
		status = "expired";
		mtad_metrics_delivery(MTAD_DLV_EXPIRED);
	} else {
		job->result[i] = STORE_Q_PENDING;
		status = "deferred";
		mtad_metrics_delivery(MTAD_DLV_DEFERRED);
	}
	free(job->error[i]);
	free(job->remote[i]);
	job->error[i] = xstrdup(text ? text : "");
	job->remote[i] = xstrdup(relay ? relay : "none");
	/* the reply as the server gave it, code first ("250 2.0.0 ..."), quoted whole in the log */
	if (code >= 200 && code < 600)
		snprintf(reply, sizeof(reply), "%d ", code);
	log_info("%016" PRIx64 ": to=<%s>, relay=%s, %s%sdelay=%" PRId64
		 ", dsn=%s, status=%s (%s%s)",
		 job->qm.id, job->qm.rcpt[i].addr, job->remote[i], w->tlsdesc,
		 w->tlsdesc[0] ? ", " : "", age_s,
		 queue_dsn_of(text, code ? code : 400, dsn, sizeof(dsn)), status, reply,
		 job->error[i]);
}

/* a work's own allocations (finished, or in flight at shutdown) */
static void work_free(struct qwork *w)
{
	TAILQ_REMOVE(&w->job->works, w, jentry);
	free(w->idx);
	buf_release(&w->trylog);
	tlsa_free(w->tlsa, w->ans[2].n);
	sts_cancel(&w->sts);
	free(w->sts_pol);
	free(w);
}

void queue_work_done(struct qwork *w)
{
	struct qjob *job = w->job;

	record_delivered(w);
	work_free(w);
	if (--job->outstanding == 0)
		job_finish(job);
}

static int64_t next_attempt(const struct queue_runner *qr, uint32_t attempts)
{
	const struct conf_list *sched = conf_values(qr->m->conf)->mtad.retry_schedule;
	size_t k = attempts < sched->n ? attempts : sched->n - 1;

	return clock_wall_s() + (sched->n ? sched->ms[k] / 1000 : 300);
}

/* Once per message, when it has waited delay_warning: the recipients deferred now that
   asked NOTIFY=DELAY get a delay notice. Whether one is due (job->delayed says for whom). */
static bool delay_due(struct queue_runner *qr, struct qjob *job)
{
	int64_t warn_ms = conf_values(qr->m->conf)->mtad.delay_warning_ms;
	bool any = false;

	if (job->delay_noticed)
		return false;
	if (warn_ms <= 0 || (clock_wall_s() - job->qm.created) * 1000 < warn_ms)
		return false;
	for (size_t i = 0; i < job->qm.nrcpt; i++) {
		unsigned notify = job->qm.rcpt[i].notify;

		job->delayed[i] = job->result[i] == STORE_Q_PENDING &&
				  (notify & STORE_NOTIFY_DELAY) && !(notify & STORE_NOTIFY_NEVER);
		any |= job->delayed[i];
	}
	return any;
}

/* The end of a job, written in one commit of the queue through the group committer: every
   outcome not yet recorded, the bounce (its DSN added), then the entry deleted (nothing
   pending) or its lease ended. The job stays in memory until that commit is durable. A delay
   notice, when one is due, is a commit of its own before (its success marks the deferred
   recipients so that it goes out once). */
struct qset {
	size_t idx;
	enum store_rcpt_state state;
	int64_t next_attempt;
	char *error; /* malloc'd */
};

struct qfinish {
	struct qjob *job;
	struct bounce_dsn dsn; /* the delay notice, then the bounce */
	bool noticed;          /* the deferred recipients get the delay mark */
	bool remove;           /* delete the entry, else end its lease */
	bool gone;             /* out: the entry was no longer there (every copy recorded
				      delivered, or deleted by an admin) */
	struct qset *set;
	size_t nset;
};

static int notice_fn(struct store_txn *t, void *arg)
{
	struct qfinish *f = arg;

	return store_queue_add_txn(t, &f->dsn.qm, f->dsn.blob, &f->dsn.id);
}

static int finish_fn(struct store_txn *t, void *arg)
{
	struct qfinish *f = arg;
	uint64_t id = f->job->qm.id;
	int rc = 0;

	f->gone = false;
	for (size_t k = 0; k < f->nset && !f->gone; k++) {
		const struct qset *q = &f->set[k];

		rc = store_queue_rcpt_set_txn(t, id, q->idx, q->state, q->next_attempt, q->error);
		if (rc == STORE_ENOQUEUE)
			f->gone = true;
		else if (rc != 0)
			return rc;
		if (q->state != STORE_Q_PENDING && (rc = forget_sent_txn(t, id, q->idx)) != 0)
			return rc;
	}
	if (f->dsn.blob != NULL &&
	    (rc = store_queue_add_txn(t, &f->dsn.qm, f->dsn.blob, &f->dsn.id)) != 0)
		return rc;
	if (f->gone)
		return 0;
	rc = f->remove ? store_queue_delete_txn(t, id) : store_queue_release_lease_txn(t, id);
	return rc == STORE_ENOQUEUE ? 0 : rc; /* every copy was recorded delivered: gone */
}

static void finish_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct qfinish *f = arg;
	struct qjob *job = f->job;
	struct queue_runner *qr = job->qr;

	(void)rcpts;
	(void)n;
	(void)value;
	/* failed: the lease runs out and the entry is tried again (its delivered recipients
	   were recorded as each was sent) */
	if (result != 0)
		log_warnx("%016" PRIx64 ": queue finish failed: %s", job->qm.id,
			  store_strerror(result));
	bounce_queued(qr, job, &f->dsn, result);
	for (size_t i = 0; result == 0 && i < job->qm.nrcpt; i++)
		unmark(job, i); /* every outcome is in the queue (or the entry gone) */
	for (size_t k = 0; k < f->nset; k++)
		free(f->set[k].error);
	free(f->set);
	free(f);
	TAILQ_REMOVE(&qr->jobs, job, entry);
	qr->njobs--;
	job_free(job);
	if (qr->full && !qr->stopping) { /* a slot: the entries waiting for one are leased now */
		qr->full = false;
		log_debug("queue: a job ended with %d in flight: leasing again", MAX_JOBS);
		queue_runner_kick(qr->m);
	}
}

static void job_record(struct qfinish *f)
{
	struct qjob *job = f->job;
	struct queue_runner *qr = job->qr;
	bool pending = false, failed = false;
	int rc;

	f->set = xcalloc(job->qm.nrcpt + 1, sizeof(*f->set));
	for (size_t i = 0; i < job->qm.nrcpt; i++) {
		int r = job->result[i];
		struct qset *q;

		if (r < 0) {
			pending |= job->qm.rcpt[i].state == STORE_Q_PENDING;
			continue;
		}
		if (job->recorded[i])
			continue;
		pending |= r == STORE_Q_PENDING;
		failed |= r == STORE_Q_FAILED;
		q = &f->set[f->nset++];
		q->idx = i;
		q->state = (enum store_rcpt_state)r;
		q->next_attempt = r == STORE_Q_PENDING ? next_attempt(qr, job->qm.rcpt[i].attempts)
						       : 0;
		q->error = r == STORE_Q_PENDING && f->noticed
				   ? xasprintf("%s%s", QUEUE_DELAY_MARK,
					       job->error[i] ? job->error[i] : "")
			   : job->error[i] != NULL ? xstrdup(job->error[i])
						   : NULL;
	}
	rc = failed ? bounce_prepare(qr, job, DSN_FAILED, &f->dsn) : 0;
	f->remove = rc == 0 && !pending;
	store_gc_submit(qr->m->gc, STORE_QUEUE_PART, f->dsn.blob, finish_fn, f, finish_done, f);
}

static void notice_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
			void *arg)
{
	struct qfinish *f = arg;

	(void)rcpts;
	(void)n;
	(void)value;
	f->noticed = result == 0;
	bounce_queued(f->job->qr, f->job, &f->dsn, result);
	memset(&f->dsn, 0, sizeof(f->dsn));
	job_record(f);
}

static void job_finish(struct qjob *job)
{
	struct queue_runner *qr = job->qr;
	struct qfinish *f = xcalloc(1, sizeof(*f));

	f->job = job;
	f->noticed = job->delay_noticed;
	if (delay_due(qr, job) && bounce_prepare(qr, job, DSN_DELAYED, &f->dsn) == 0) {
		if (f->dsn.blob != NULL) {
			store_gc_submit(qr->m->gc, STORE_QUEUE_PART, f->dsn.blob, notice_fn, f,
					notice_done, f);
			return;
		}
		f->noticed = true; /* nobody to tell (the null sender): marked, not tried again */
	}
	job_record(f);
}

/* init_store.c — owns `mailload init --heron-conf FILE`, Heron's fast path of mailbox
 * initialization: the same folders, subscriptions and messages as the protocol init (SMTP to
 * INBOX, IMAP APPEND to the other folders; ml_init_spec is the one description of those
 * messages), written straight into the store through libstore. Per user: a read snapshot says
 * what is there, the missing messages are written as message files, then one write
 * transaction creates the user, folders and subscriptions and appends them. Jobs are forked
 * processes, each with its own store handle, taking users round robin. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/xmalloc.h"
#include "mailload/init_store.h"
#include "store/store.h"

/* The fixed day the initial messages are dated in (2025-01-01 UTC), as the protocol init. */
#define INIT_EPOCH_MS 1735689600000LL
#define INIT_MSG_MAX (64u << 20)

/* Seq numbers of initial messages: user << 20 | folder << 12 | index (agent.c's
   ag_init_seq, the protocol init's numbering). */
static uint64_t init_seq(uint32_t user, uint32_t fi, uint32_t idx)
{
	return ((uint64_t)user << 20) | ((uint64_t)fi << 12) | idx;
}

void ml_init_spec(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		  struct ml_msg_spec *s, char *from, char *to)
{
	memset(s, 0, sizeof(*s));
	s->seed = c->seed;
	s->seq = init_seq(user, fi, idx);
	s->date_ms = INIT_EPOCH_MS + (int64_t)(s->seq % 86400000);
	s->size_scale = c->size_scale;
	if (fi == 0) { /* delivered by a remote server */
		snprintf(from, ML_INIT_ADDR, "sender%u@%s", user, c->ext_domain);
		snprintf(to, ML_INIT_ADDR, "user%u@%s", user, c->domain);
	} else { /* filed by the user */
		snprintf(from, ML_INIT_ADDR, "user%u@%s", user, c->domain);
		snprintf(to, ML_INIT_ADDR, "colleague%" PRIu64 "@%s", s->seq % 997, c->domain);
	}
	s->from = from;
}

bool ml_init_seen(uint32_t fi, uint32_t idx)
{
	return fi != 0 && idx % 10 < 7;
}

int64_t ml_init_render(const struct ml_cfg *c, uint32_t user, uint32_t fi, uint32_t idx,
		       struct ml_msg *m, struct buf *out)
{
	char from[ML_INIT_ADDR], to[ML_INIT_ADDR];
	const char *tov[1] = { to };
	struct ml_msg_spec spec;

	ml_init_spec(c, user, fi, idx, &spec, from, to);
	spec.to = tov;
	spec.nto = 1;
	ml_msg_build(m, &spec);
	buf_reset(out);
	ml_msg_render(m, out);
	return spec.date_ms;
}

struct pending {
	struct store_blob *b;
	uint32_t fi, idx;
};

struct job {
	struct store *st;
	const struct ml_cfg *c;
	struct ml_init_stats *stats;
	struct ml_msg msg;
	struct buf text;
	char name[32];
	uint32_t user;
	struct ml_folders f;
	uint32_t have[ML_MAX_FOLDERS];
	struct pending *pend;
	size_t npend, cappend;
};

/* What the store holds of the user now; *complete_r when nothing is missing. */
static int read_have(struct job *j, unsigned part, bool *complete_r)
{
	struct store_txn *t;
	struct store_user u;
	int rc;

	*complete_r = false;
	memset(j->have, 0, sizeof(j->have));
	if ((rc = store_txn_begin(j->st, part, STORE_TXN_READ, &t)) != 0)
		return rc;
	rc = store_user_get(t, j->name, &u);
	if (rc == STORE_ENOUSER) {
		store_txn_abort(&t);
		return 0;
	}
	*complete_r = rc == 0;
	for (uint32_t i = 0; rc == 0 && i < j->f.n; i++) {
		struct store_status s;
		uint64_t mb;
		int r = store_mbox_find(t, u.id, j->f.name[i], &mb);

		if (r == 0 && (r = store_mbox_status(t, mb, &s)) == 0)
			j->have[i] = s.messages;
		else if (r == STORE_ENOMBOX)
			*complete_r = false;
		else
			rc = r;
		*complete_r &= j->have[i] >= j->f.msgs[i];
	}
	store_txn_abort(&t);
	return rc;
}

/* Writes the message files of what is missing, in folder and index order. */
static int write_missing(struct job *j, unsigned part)
{
	int rc;

	for (uint32_t fi = 0; fi < j->f.n; fi++) {
		for (uint32_t idx = j->have[fi]; idx < j->f.msgs[fi]; idx++) {
			struct pending *p;

			ml_init_render(j->c, j->user, fi, idx, &j->msg, &j->text);
			if (j->npend == j->cappend) {
				j->cappend = j->cappend ? 2 * j->cappend : 64;
				j->pend = xreallocarray(j->pend, j->cappend, sizeof(*j->pend));
			}
			p = &j->pend[j->npend];
			p->fi = fi;
			p->idx = idx;
			if ((rc = store_blob_new(j->st, part, &p->b)) != 0)
				return rc;
			j->npend++;
			if ((rc = store_blob_write(p->b, j->text.data, j->text.len)) != 0 ||
			    (rc = store_blob_finish(p->b)) != 0)
				return rc;
		}
	}
	return 0;
}

/* The write transaction (redone whole when the map grows): user, folders, subscriptions,
   and the messages each folder still lacks, counted again in this snapshot. */
static int fill_fn(struct store_txn *t, void *arg)
{
	struct job *j = arg;
	struct store_user u;
	uint64_t uid;
	size_t k = 0;
	int rc = store_user_get(t, j->name, &u);

	if (rc == STORE_ENOUSER)
		rc = store_user_create(t, j->name, &uid);
	else
		uid = u.id;
	for (uint32_t fi = 0; rc == 0 && fi < j->f.n; fi++) {
		struct store_status s = { 0 };
		uint64_t mb = 0;

		rc = store_mbox_find(t, uid, j->f.name[fi], &mb);
		if (rc == STORE_ENOMBOX && fi > 0)
			rc = store_mbox_create(t, uid, j->f.name[fi], 0, &mb);
		if (rc == 0 && j->f.subscribed[fi])
			rc = store_mbox_subscribe(t, uid, j->f.name[fi], true);
		if (rc == 0)
			rc = store_mbox_status(t, mb, &s);
		for (; rc == 0 && k < j->npend && j->pend[k].fi == fi; k++) {
			const struct pending *p = &j->pend[k];
			int64_t date = (INIT_EPOCH_MS + (int64_t)(init_seq(j->user, fi, p->idx) %
								   86400000)) / 1000;

			if (p->idx < s.messages)
				continue; /* someone else filled it meanwhile */
			rc = store_msg_append(t, mb, p->b, ml_init_seen(fi, p->idx) ? STORE_SEEN : 0,
					      0, date, NULL);
			s.messages++;
		}
	}
	return rc;
}

static void drop_pending(struct job *j)
{
	for (size_t i = 0; i < j->npend; i++)
		store_blob_free(&j->pend[i].b); /* unlinked unless a commit references it */
	j->npend = 0;
}

static int fill_user(struct job *j, uint32_t user)
{
	unsigned part;
	bool complete;
	int rc;

	j->user = user;
	snprintf(j->name, sizeof(j->name), "user%u", user);
	ml_user_folders(j->c, user, &j->f);
	rc = store_user_locate(j->st, j->name, &part);
	if (rc == STORE_ENOUSER)
		part = store_partition_for(j->st, j->name);
	else if (rc != 0)
		return rc;
	if ((rc = read_have(j, part, &complete)) != 0)
		return rc;
	if (complete) {
		j->stats->skipped++;
		return 0;
	}
	j->stats->users++;
	rc = write_missing(j, part);
	if (rc == 0)
		rc = store_write(j->st, part, fill_fn, j);
	if (rc == 0) {
		for (size_t i = 0; i < j->npend; i++) {
			j->stats->msgs++;
			j->stats->bytes += store_blob_size(j->pend[i].b);
		}
	}
	drop_pending(j);
	return rc;
}

static int job_main(const struct ml_cfg *c, void *arg, unsigned k, unsigned jobs,
		    struct ml_init_stats *stats)
{
	struct job j = { .c = c, .stats = stats };
	struct store_opts o = *(const struct store_opts *)arg;
	int rc;

	o.create = true;
	o.nosync = true;
	if ((rc = store_open(&o, &j.st)) != 0) {
		log_warnx("init: store %s: %s", o.path, store_strerror(rc));
		return 1;
	}
	ml_msggen_init();
	ml_msg_init(&j.msg);
	buf_init(&j.text, 1 << 16, INIT_MSG_MAX);
	for (uint64_t user = 1 + k; user <= c->users; user += jobs) {
		if ((rc = fill_user(&j, (uint32_t)user)) != 0) {
			log_warnx("init: user%" PRIu64 ": %s", user, store_strerror(rc));
			stats->errors++;
			if (!store_err_temporary(rc) && rc != STORE_EQUOTA)
				break;
		}
	}
	store_close(&j.st); /* syncs what this job wrote */
	ml_msg_release(&j.msg);
	buf_release(&j.text);
	free(j.pend);
	return stats->errors ? 1 : 0;
}

static void sum(const struct ml_init_stats *v, unsigned n, struct ml_init_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < n; i++) {
		s->users += v[i].users;
		s->skipped += v[i].skipped;
		s->msgs += v[i].msgs;
		s->bytes += v[i].bytes;
		s->errors += v[i].errors;
	}
}

int ml_init_jobs(const struct ml_cfg *c, unsigned jobs, bool quiet, const char *where,
		 ml_init_job_fn fn, void *arg)
{
	struct ml_init_stats *stats, s;
	pid_t *pids;
	int failed = 0;
	int64_t t0 = clock_wall_ms();

	if (jobs == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = n > 0 ? (unsigned)n : 1;
	}
	if (jobs > c->users)
		jobs = c->users > 0 ? (unsigned)c->users : 1;
	stats = mmap(NULL, jobs * sizeof(*stats), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED)
		fatal("mmap");
	memset(stats, 0, jobs * sizeof(*stats));
	pids = xcalloc(jobs, sizeof(*pids));
	fprintf(stderr, "init: %" PRIu64 " users into %s, profile %s, seed %" PRIu64
			", %u jobs\n",
		c->users, where, c->profile, c->seed, jobs);
	fflush(stderr);
	for (unsigned k = 0; k < jobs; k++) {
		if ((pids[k] = fork()) == -1)
			fatal("fork");
		if (pids[k] == 0)
			_exit(fn(c, arg, k, jobs, &stats[k]));
	}
	for (unsigned left = jobs; left > 0;) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			left--;
			failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
			continue;
		}
		if (p == -1 && errno != EINTR)
			break;
		if (!quiet) {
			double el = (double)(clock_wall_ms() - t0) / 1000.0;
			sum(stats, jobs, &s);
			fprintf(stderr, "\rinit: %" PRIu64 "/%" PRIu64 " users, %" PRIu64
					" messages, %.0f MB, %.0f s   ",
				s.users + s.skipped, c->users, s.msgs, (double)s.bytes / 1e6, el);
		}
		usleep(p == 0 ? 500000 : 0);
	}
	sum(stats, jobs, &s);
	double el = (double)(clock_wall_ms() - t0) / 1000.0;
	if (!quiet)
		fputc('\n', stderr);
	fprintf(stderr, "init: %" PRIu64 " users (%" PRIu64 " already complete), %" PRIu64
			" messages, %.1f MB in %.1f s: %.0f users/s, %.0f messages/s; %s\n",
		s.users + s.skipped, s.skipped, s.msgs, (double)s.bytes / 1e6, el,
		el > 0 ? (double)(s.users + s.skipped) / el : 0.0,
		el > 0 ? (double)s.msgs / el : 0.0,
		failed || s.errors ? "with errors (run it again: it resumes)" : "done");
	munmap(stats, jobs * sizeof(*stats));
	free(pids);
	return failed || s.errors ? -1 : 0;
}

int init_store_run(const struct ml_cfg *c, const char *conf_path, unsigned jobs, bool quiet)
{
	struct conf *conf;
	struct store_opts so;
	char *err = NULL, where[600];
	int rc;

	if (conf_load(conf_path, &conf, &err) < 0) {
		fprintf(stderr, "mailload init: %s: %s\n", conf_path, err ? err : "unreadable");
		free(err);
		return -1;
	}
	store_opts_from_conf(conf, &so);
	snprintf(where, sizeof(where), "the store %s (%s)", so.path, conf_path);
	rc = ml_init_jobs(c, jobs, quiet, where, job_main, &so);
	conf_free(&conf);
	return rc;
}

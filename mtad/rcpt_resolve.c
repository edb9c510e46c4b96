/* rcpt_resolve.c — owns what a local recipient is, before anything is delivered: the aliases
 * map ([mtad] aliases, reloaded on SIGHUP and when the file changes), postmaster@ every local
 * domain (RFC 5321 4.5.1: always accepted, to [mtad] postmaster when nothing else names it),
 * subaddresses (user+detail@, [mtad] recipient_delimiter) and the directory lookup with the
 * store account made on first mail (none for a user moved away from this store: 451 4.2.0
 * while its tombstone holds). One RCPT may become several recipient entries (an
 * alias's targets; external ones go to the relay queue); each is delivered once. Also the
 * SRS set-up ([mtad] srs_secret_file, mtad/srs.c): which forwarded copies get an SRS sender
 * and which RCPT addresses are SRS addresses of ours. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mtad/aliases.h"
#include "mtad/mtad.h"
#include "mtad/srs.h"
#include "store/store.h"

/* The file behind m->aliases: checked for a change at most once a second. */
struct rcpt_aliases_state {
	char *path;
	struct stat st;
	int64_t checked_ms;
};

/* One RCPT being resolved (the session waits in ST_WAIT). */
struct rr_job {
	struct smtp_session *s;
	size_t first;           /* tx->nrcpt when the RCPT came: its entries follow */
	struct smtp_rcpt proto; /* the entry cmd_rcpt filled (address, parameters) */
	char **t;               /* the addresses to resolve: the RCPT's, or an alias's */
	size_t nt, next;
	bool alias, temp, fallback;
	bool async; /* a callback will run: the end resumes the session */
	size_t dups, unknown;
	const char *why; /* a permanent refusal's reason, or NULL */
	const char *temp_why;
	char target[MAILADDR_TEXT_MAX + 1];
	char key[MAILADDR_TEXT_MAX + 1];
	char detail[MAILADDR_LOCAL_MAX + 1];
	char user[LDAPAUTH_NAME_MAX + 1];
};

static void next_target(struct rr_job *job);

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

void rcpt_aliases_load(struct mtad *m, const struct conf *c, bool fatal_on_error)
{
	const char *path = conf_values(c)->mtad.aliases;
	struct aliases *al = NULL;
	struct stat st = { 0 };
	char *err = NULL;

	if (m->al_state == NULL)
		m->al_state = xcalloc(1, sizeof(*m->al_state));
	if (path[0] != '\0' && (stat(path, &st) == -1 || aliases_load(path, &al, &err) < 0)) {
		if (err == NULL)
			err = xasprintf("aliases %s: %m", path);
		if (fatal_on_error)
			fatalx("%s", err);
		log_warnx("%s (the previous aliases stay in force)", err);
		free(err);
		m->al_state->st = st; /* not read again until it changes */
		m->al_state->checked_ms = clock_mono_ms();
		return;
	}
	aliases_free(&m->aliases);
	m->aliases = al;
	free(m->al_state->path);
	m->al_state->path = xstrdup(path);
	m->al_state->st = st;
	m->al_state->checked_ms = clock_mono_ms();
	if (path[0] != '\0')
		log_info("aliases %s loaded entries=%zu", path, aliases_count(al));
}

void rcpt_aliases_free(struct mtad *m)
{
	aliases_free(&m->aliases);
	if (m->al_state != NULL)
		free(m->al_state->path);
	free(m->al_state);
	m->al_state = NULL;
}

/* The file changed since it was read (a new mtime, size or inode): read it again. */
static void aliases_check(struct mtad *m)
{
	struct rcpt_aliases_state *as = m->al_state;
	int64_t now = clock_mono_ms();
	struct stat st;

	if (as == NULL || as->path == NULL || as->path[0] == '\0' || now - as->checked_ms < 1000)
		return;
	as->checked_ms = now;
	if (stat(as->path, &st) == 0 && !same_stat(&st, &as->st))
		rcpt_aliases_load(m, m->conf, false);
}

static bool addr_local(const struct mtad *m, const char *addr)
{
	const struct conf_list *locals = conf_values(m->conf)->mtad.local_domains;
	const char *at = strrchr(addr, '@');

	return at == NULL || conf_list_has(locals, at + 1, strlen(at + 1));
}

void rcpt_srs_load(struct mtad *m, const struct conf *c, bool fatal_on_error)
{
	const struct mtad_conf *mc = &conf_values(c)->mtad;
	const char *dom = mc->srs_domain[0] != '\0'  ? mc->srs_domain
			  : mc->local_domains->n > 0 ? mc->local_domains->v[0]
						     : "";
	struct srs *srs = NULL;
	char *err = NULL;

	if (mc->srs_secret_file[0] != '\0' &&
	    srs_load(mc->srs_secret_file, dom, (unsigned)mc->srs_max_age, &srs, &err) < 0) {
		if (fatal_on_error)
			fatalx("%s", err);
		log_warnx("%s (the previous SRS secrets stay in force)", err);
		free(err);
		return;
	}
	srs_free(&m->srs);
	m->srs = srs;
}

void rcpt_srs_sender(const struct mtad *m, const char *sender, const char *rcpt, char *out,
		     size_t size)
{
	if (m->srs == NULL || sender[0] == '\0' || addr_local(m, sender) ||
	    (rcpt != NULL && addr_local(m, rcpt)) ||
	    srs_forward(m->srs, sender, clock_wall_s(), out, size) != 1)
		str_lcpy(out, sender, size);
}

bool rcpt_srs_ours(const struct mtad *m, const char *addr)
{
	const char *at = strrchr(addr, '@');

	return m->srs != NULL && at != NULL && strcasecmp(at + 1, srs_domain(m->srs)) == 0 &&
	       srs_is_srs(addr);
}

void rcpt_lookup_key(const struct mtad *m, const char *addr, char *key, size_t size,
		     char *detail_r, size_t dsize)
{
	const char *delim = conf_values(m->conf)->mtad.recipient_delimiter;
	const char *at = strrchr(addr, '@');
	size_t ll = at != NULL ? (size_t)(at - addr) : strlen(addr), cut = 0;

	for (size_t i = 1; delim[0] != '\0' && i < ll && cut == 0; i++)
		if (strchr(delim, addr[i]) != NULL)
			cut = i;
	if (detail_r != NULL && dsize > 0)
		detail_r[0] = '\0';
	if (cut == 0) {
		snprintf(key, size, "%s", addr);
		return;
	}
	snprintf(key, size, "%.*s%s", (int)cut, addr, at != NULL ? at : "");
	if (detail_r != NULL)
		snprintf(detail_r, dsize, "%.*s", (int)(ll - cut - 1), addr + cut + 1);
}

bool rcpt_is_postmaster(const struct mtad *m, const char *addr)
{
	char key[MAILADDR_TEXT_MAX + 1];
	const char *at;

	if (!addr_local(m, addr))
		return false;
	rcpt_lookup_key(m, addr, key, sizeof(key), NULL, 0);
	at = strchr(key, '@');
	return str_caseeq(key, at != NULL ? (size_t)(at - key) : strlen(key), "postmaster", 10);
}

static void job_free(struct rr_job *job)
{
	aliases_strv_free(&job->t, job->nt);
	free(job);
}

/* The session went away while it waited: nothing to answer. */
static bool job_dead(struct rr_job *job)
{
	struct smtp_session *s = job->s;

	if (!s->dead)
		return false;
	smtp_set_state(s, s->tx->nrcpt > 0 ? ST_RCPT : ST_MAIL);
	job_free(job);
	smtp_resume(s);
	return true;
}

/* One final recipient of the RCPT: a new entry, unless the transaction has it already
   (SMTP; LMTP answers each RCPT, so each keeps its entry). */
static void add_entry(struct rr_job *job, bool local, unsigned part)
{
	struct smtp_session *s = job->s;
	struct smtp_tx *tx = s->tx;
	struct smtp_rcpt *r;

	for (size_t i = 0; !(s->flags & SF_LMTP) && i < tx->nrcpt; i++) {
		const struct smtp_rcpt *o = &tx->rcpt[i];

		if (o->local == local &&
		    (local ? strcmp(o->user, job->user) == 0 && strcmp(o->detail, job->detail) == 0
			   : strcasecmp(o->addr, job->target) == 0)) {
			job->dups++;
			return;
		}
	}
	r = smtp_rcpt_add(tx);
	*r = job->proto;
	r->local = local;
	r->part = part;
	r->extra = tx->nrcpt > job->first;
	/* a copy forwarded off-site (not a store host's user): its sender gets an SRS form */
	r->forwarded = !local && (job->alias || job->fallback) && !addr_local(s->m, job->target);
	str_lcpy(r->user, local ? job->user : "", sizeof(r->user));
	str_lcpy(r->detail, local ? job->detail : "", sizeof(r->detail));
	if (job->alias || (job->fallback && !local)) {
		/* delivered to another address than the RCPT's: it is the one relayed to */
		str_lcpy(r->orig, job->proto.addr, sizeof(r->orig));
		str_lcpy(r->addr, job->target, sizeof(r->addr));
		rcpt_orcpt_orig(r);
	}
	log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s>%s%s%s local=%s%s%s%s%s "
		 "result=ok",
		 s->id, tx->qid, r->addr, r->orig[0] ? " orig_to=<" : "", r->orig,
		 r->orig[0] ? ">" : "", local ? "yes" : "no", local ? " user=" : "",
		 local ? r->user : "", r->detail[0] ? " detail=" : "", r->detail);
	tx->nrcpt++;
	if (local)
		tx->nlocal++;
}

/* Every target was tried: the RCPT's one answer. */
static void finish(struct rr_job *job)
{
	struct smtp_session *s = job->s;
	struct smtp_tx *tx = s->tx;
	const char *rcpt = job->proto.addr;
	char addr[MAILADDR_TEXT_MAX + 1];

	if (job->temp) {
		/* nothing of the RCPT stays: the client tries it again, whole */
		for (size_t i = job->first; i < tx->nrcpt; i++)
			tx->nlocal -= tx->rcpt[i].local;
		tx->nrcpt = job->first;
	}
	smtp_set_state(s, tx->nrcpt > 0 ? ST_RCPT : ST_MAIL);
	if (job->temp) {
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> result=defer "
			 "reason=\"%s\"",
			 s->id, tx->qid, rcpt, job->temp_why);
		if (strcmp(job->temp_why, "moved to another store host") ==
		    0) /* 4.2.0: the mailbox's status */
			smtp_reply(s,
				   "451 4.2.0 <%s>: Mailbox moved to another host, try again "
				   "later",
				   rcpt);
		else
			smtp_reply(s, "451 4.3.0 <%s>: %s, try again later", rcpt,
				   strcmp(job->temp_why, "directory unavailable") == 0
					   ? "Directory unavailable"
					   : "Local error");
	} else if (tx->nrcpt > job->first || job->dups > 0) {
		if (job->alias)
			log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> alias=yes "
				 "targets=%zu unknown=%zu result=ok",
				 s->id, tx->qid, rcpt, tx->nrcpt - job->first + job->dups,
				 job->unknown);
		/* the milters have their say, then the 250 */
		bool resume = job->async;
		size_t first = job->first;

		str_lcpy(addr, rcpt, sizeof(addr));
		job_free(job);
		smtp_rcpt_accepted(s, addr, first, resume);
		return;
	} else if (job->why != NULL) {
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> result=fail "
			 "reason=\"%s\"",
			 s->id, tx->qid, rcpt, job->why);
		char why[200];
		bool resume = job->async;

		str_lcpy(why, job->why, sizeof(why));
		str_lcpy(addr, rcpt, sizeof(addr));
		job_free(job);
		smtp_rcpt_refuse(s, addr, resume, "550 5.4.6 <%s>: Recipient address rejected: %s",
				 addr, why);
		return;
	} else {
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> result=fail "
			 "reason=\"%s\"",
			 s->id, tx->qid, rcpt,
			 job->alias ? "alias has no valid target" : "no such user");
		bool resume = job->async;

		str_lcpy(addr, rcpt, sizeof(addr));
		job_free(job);
		smtp_rcpt_refuse(s, addr, resume,
				 "550 5.1.1 <%s>: Recipient address rejected: User unknown", addr);
		return;
	}
	bool resume = job->async;

	job_free(job);
	if (resume)
		smtp_resume(s);
}

static void user_made(int rc, unsigned part, void *arg)
{
	struct rr_job *job = arg;

	if (job_dead(job))
		return;
	if (rc == STORE_EMOVED) {
		/* a tombstone: the user moved to another store host and this host's directory
		   (a stale replica or cache) does not know yet; temporary, never a 550 */
		job->temp = true;
		job->temp_why = "moved to another store host";
	} else if (rc != 0) {
		log_warnx("%016" PRIx64 " smtp rcpt to=<%s> user=%s result=defer reason=\"store: "
			  "%s\"",
			  job->s->id, job->target, job->user, store_strerror(rc));
		job->temp = true;
		job->temp_why = "store error";
	} else {
		add_entry(job, true, part);
	}
	next_target(job);
}

/* A store user (the directory's, or [mtad] postmaster's login): its account, then its
   entry. */
static void use_user(struct rr_job *job, const char *login, int partition, uint64_t quota)
{
	unsigned part = 0;
	int rc;

	str_lcpy(job->user, login, sizeof(job->user));
	rc = deliver_user_ensure(job->s->m, job->user, partition, quota, &part, user_made, job);
	if (rc == DELIVER_PENDING)
		job->async = true;
	else
		user_made(rc, part, job);
}

static void lookup_done(const struct ldapauth_reply *reply, void *arg);

/* Nothing else names a mailbox for postmaster: [mtad] postmaster does. */
static void postmaster_fallback(struct rr_job *job)
{
	const char *pm = conf_values(job->s->m->conf)->mtad.postmaster;

	job->fallback = true;
	if (strchr(pm, '@') == NULL) {
		use_user(job, pm, -1, 0);
		return;
	}
	str_lcpy(job->target, pm, sizeof(job->target));
	if (!addr_local(job->s->m, pm)) {
		add_entry(job, false, 0);
		next_target(job);
		return;
	}
	rcpt_lookup_key(job->s->m, pm, job->key, sizeof(job->key), job->detail,
			sizeof(job->detail));
	if (job->s->m->la == NULL) {
		job->temp = true;
		job->temp_why = "directory unavailable";
		next_target(job);
		return;
	}
	job->async = true;
	ldapauth_lookup(job->s->m->la, job->key, lookup_done, job);
}

static void lookup_done(const struct ldapauth_reply *reply, void *arg)
{
	struct rr_job *job = arg;

	if (job_dead(job))
		return;
	if (reply->result == LDAPAUTH_OK &&
	    mtad_mailhost_elsewhere(job->s->m, reply->user->mailhost)) {
		/* homed on another store host: queued here, delivered there over LMTP */
		log_info("%016" PRIx64 " smtp rcpt qid=%016" PRIx64 " to=<%s> user=%s mailhost=%s",
			 job->s->id, job->s->tx->qid, job->target, reply->user->login,
			 reply->user->mailhost);
		if (!job->alias && !job->fallback)
			str_lcpy(job->target, job->proto.addr, sizeof(job->target));
		add_entry(job, false, 0);
		next_target(job);
		return;
	}
	if (reply->result == LDAPAUTH_OK) {
		use_user(job, reply->user->login, reply->user->partition, reply->user->quota);
		return;
	}
	if (reply->result == LDAPAUTH_ETEMP) {
		job->temp = true;
		job->temp_why = "directory unavailable";
	} else if (!job->fallback && rcpt_is_postmaster(job->s->m, job->target)) {
		postmaster_fallback(job);
		return;
	} else {
		job->unknown++;
		if (job->alias)
			log_info("%016" PRIx64 " smtp rcpt alias=<%s> target=<%s> result=fail "
				 "reason=\"no such user\"",
				 job->s->id, job->proto.addr, job->target);
	}
	next_target(job);
}

static void next_target(struct rr_job *job)
{
	struct mtad *m = job->s->m;

	while (!job->temp && job->next < job->nt) {
		str_lcpy(job->target, job->t[job->next++], sizeof(job->target));
		job->fallback = false;
		if (!addr_local(m, job->target)) {
			add_entry(job, false, 0);
			continue;
		}
		rcpt_lookup_key(m, job->target, job->key, sizeof(job->key), job->detail,
				sizeof(job->detail));
		if (m->la != NULL) {
			job->async = true;
			ldapauth_lookup(m->la, job->key, lookup_done, job);
			return;
		}
		if (rcpt_is_postmaster(m, job->target)) {
			postmaster_fallback(job);
			return;
		}
		job->temp = true;
		job->temp_why = "directory unavailable";
	}
	finish(job);
}

/* Without an ORCPT from the client, r's is the address the sender used, r->orig: a DSN
   names that one (RFC 3461 4.2), not the one delivered to. */
void rcpt_orcpt_orig(struct smtp_rcpt *r)
{
	if (r->orcpt_raw[0] != '\0')
		return;
	memcpy(r->orcpt_raw, "rfc822;", 7);
	if (mailaddr_xtext_encode(r->orig, strlen(r->orig), r->orcpt_raw + 7,
				  sizeof(r->orcpt_raw) - 7) < 0)
		r->orcpt_raw[0] = '\0';
}

void rcpt_resolve(struct smtp_session *s, const char *key)
{
	struct mtad *m = s->m;
	const struct conf_list *locals = conf_values(m->conf)->mtad.local_domains;
	struct aliases_ctx ctx = { locals->v, locals->n, m->lim.max_rcpt };
	struct rr_job *job = xcalloc(1, sizeof(*job));
	const char *err = NULL;
	char base[MAILADDR_TEXT_MAX + 1];
	int rc;

	job->s = s;
	job->first = s->tx->nrcpt;
	job->proto = s->tx->rcpt[s->tx->nrcpt];
	aliases_check(m);
	rc = aliases_expand(m->aliases, &ctx, key, &job->t, &job->nt, &err);
	if (rc == 0) {
		/* user+tag@ is the alias user@'s when user+tag@ is none itself */
		rcpt_lookup_key(m, key, base, sizeof(base), NULL, 0);
		if (strcmp(base, key) != 0)
			rc = aliases_expand(m->aliases, &ctx, base, &job->t, &job->nt, &err);
	}
	smtp_set_state(s, ST_WAIT);
	if (rc < 0) {
		job->alias = true;
		job->why = err;
		finish(job);
		return;
	}
	job->alias = rc == 1;
	if (rc == 0) {
		job->t = xcalloc(1, sizeof(*job->t));
		job->t[0] = xstrdup(key);
		job->nt = 1;
	}
	next_target(job);
}

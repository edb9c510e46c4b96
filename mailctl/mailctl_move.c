/* mailctl_move.c — owns `mailctl user move USER HOST --to TARGET.conf`: moving one user
 * between store hosts with the directory's mailHost as the switch, in steps that each leave
 * the user on one host with all mail (docs/mailctl.8, docs/scale-out.md):
 *
 *   frozen   the source store's quota of USER is 1 byte / 1 message: every delivery to it
 *            is refused 452 4.2.2, so the fronts keep the user's new mail queued; the
 *            sessions on the source are kicked
 *   copied   the user exported (Maildir++, UIDs, UIDVALIDITY, UIDNEXT, MODSEQs, flags,
 *            keywords, subscriptions, annotations, special-use attributes) and
 *            imported into the target store (the Sieve vacation and duplicate memories
 *            with it: heron-sieve-memory), the Sieve scripts copied (the active one
 *            active), the quota restored there, and the two compared message by message
 *   flipped  mailHost replaced on the provider: queued mail now goes to the target
 *   --finish once [directory] auth_cache_ttl has passed (no host routes by the old value),
 *            the source copy, unchanged since the copy, is deleted and a tombstone "USER
 *            moved to HOST" left in its place (store_tomb.c) for a host whose replica or
 *            cache still routes the user here: 451 4.2.0 and login referrals, no empty
 *            account made by first mail or login. A move back clears the target's one.
 *            With --via the target is then told the move is done (a "kept" stream: it
 *            forgets the tombstone it kept for a drop).
 *
 * The journal DIR/journal (default <[store] path>.move-USER) records the step reached and
 * the quota the freeze replaced and the target's tombstone of USER the copy's create clears
 * (a move back); running the command again resumes from it, --abort (before the flip) drops
 * the target copy, in the same txn putting that tombstone back, and unfreezes the source.
 *
 * With --via CMD instead of --to, the target's store is not opened here: the copy is a
 * heron-move stream (mailctl_stream.c) into `CMD user receive USER` on the target host, and
 * the comparisons are with `CMD user digest USER` (a SHA-256 per mailbox of the text below).
 * The journal's "box" lines checkpoint the mailboxes the target holds complete, so a rerun
 * after a dropped pipe or a killed side sends only the others. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/conf.h"
#include "common/control.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mailctl/mailctl.h"
#include "store/store_sieve.h"

enum move_step { MV_NONE, MV_FROZEN, MV_COPIED, MV_FLIPPED };
static const char *const step_names[] = { "none", "frozen", "copied", "flipped" };

struct journal {
	char host[256], from[256]; /* from: mailHost before ("" when none) */
	uint64_t quota_bytes, quota_msgs;
	bool created;   /* the target's user is ours (made by this move) */
	char tomb[256]; /* the target's tombstone the create cleared ("" none), --abort's */
	int64_t tomb_when;
	bool tomb_seen; /* tomb holds what the target had before the first create */
	enum move_step step;
	int64_t flipped_at;
	struct mc_digest *done; /* --via: the mailboxes the target held complete, as copied */
	size_t ndone;
};

struct move {
	struct mc *mc, tgt;
	const char *user, *host, *provider, *via;
	char *dir, *jpath, *mail, *fpath;
	struct journal j;
	uint64_t mailboxes, messages;
};

/* ---- journal ---- */

/* 0 and m->j, 1 when there is no journal, -1 when it does not parse. */
static int journal_read(struct move *m)
{
	char line[1200], key[32], val[1100], hex[65];
	FILE *f = fopen(m->jpath, "r");
	bool magic = false;

	memset(&m->j, 0, sizeof(m->j));
	if (f == NULL)
		return errno == ENOENT ? 1 : -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		val[0] = '\0';
		if (strcmp(line, "heron-move 1\n") == 0)
			magic = true;
		if (sscanf(line, "%31s %1099[^\n]", key, val) < 1)
			continue;
		if (strcmp(key, "host") == 0)
			str_lcpy(m->j.host, val, sizeof(m->j.host));
		else if (strcmp(key, "from") == 0)
			str_lcpy(m->j.from, strcmp(val, "-") == 0 ? "" : val, sizeof(m->j.from));
		else if (strcmp(key, "quota_bytes") == 0)
			m->j.quota_bytes = strtoull(val, NULL, 10);
		else if (strcmp(key, "quota_msgs") == 0)
			m->j.quota_msgs = strtoull(val, NULL, 10);
		else if (strcmp(key, "target_created") == 0)
			m->j.created = strcmp(val, "1") == 0;
		else if (strcmp(key, "target_tomb") == 0) {
			char host[256];
			long long when = 0;

			m->j.tomb_seen = true;
			if (sscanf(val, "%255s %lld", host, &when) == 2 &&
			    strcmp(host, "-") != 0) {
				str_lcpy(m->j.tomb, host, sizeof(m->j.tomb));
				m->j.tomb_when = (int64_t)when;
			}
		} else if (strcmp(key, "box") == 0 && sscanf(val, "%64s", hex) == 1 &&
			   strlen(hex) == 64 && val[64] == ' ' && val[65] != '\0') {
			m->j.done = xreallocarray(m->j.done, m->j.ndone + 1, sizeof(*m->j.done));
			memset(&m->j.done[m->j.ndone], 0, sizeof(*m->j.done));
			memcpy(m->j.done[m->j.ndone].hex, hex, 65);
			m->j.done[m->j.ndone++].name = xstrdup(val + 65);
		} else if (strcmp(key, "flipped_at") == 0)
			m->j.flipped_at = strtoll(val, NULL, 10);
		else if (strcmp(key, "step") == 0)
			for (int s = MV_FROZEN; s <= MV_FLIPPED; s++)
				if (strcmp(val, step_names[s]) == 0)
					m->j.step = s;
	}
	fclose(f);
	return magic && m->j.step != MV_NONE && m->j.host[0] != '\0' ? 0 : -1;
}

/* Writes the journal durably (a new file renamed over the old); 0 or errno. */
static int journal_write(struct move *m)
{
	char *tmp = xasprintf("%s.new", m->jpath);
	FILE *f = fopen(tmp, "w");
	int err = 0, dfd;

	if (f == NULL) {
		err = errno;
		free(tmp);
		return err;
	}
	fprintf(f,
		"heron-move 1\nuser %s\nhost %s\nfrom %s\nquota_bytes %" PRIu64
		"\nquota_msgs %" PRIu64 "\ntarget_created %d\nstep %s\nflipped_at %" PRId64 "\n",
		m->user, m->j.host, m->j.from[0] ? m->j.from : "-", m->j.quota_bytes,
		m->j.quota_msgs, m->j.created ? 1 : 0, step_names[m->j.step], m->j.flipped_at);
	if (m->j.tomb_seen)
		fprintf(f, "target_tomb %s %" PRId64 "\n", m->j.tomb[0] ? m->j.tomb : "-",
			m->j.tomb_when);
	for (size_t i = 0; i < m->j.ndone; i++)
		fprintf(f, "box %s %s\n", m->j.done[i].hex, m->j.done[i].name);
	if (fflush(f) == EOF || fsync(fileno(f)) == -1)
		err = errno;
	if (fclose(f) == EOF && err == 0)
		err = errno;
	if (err == 0 && rename(tmp, m->jpath) == -1)
		err = errno;
	if (err == 0 && (dfd = open(m->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		if (fsync(dfd) == -1)
			err = errno;
		close(dfd);
	}
	free(tmp);
	return err;
}

static int journal_save(struct move *m, enum move_step step)
{
	int err;

	m->j.step = step;
	if ((err = journal_write(m)) != 0)
		return mc_refuse(m->mc, MC_IOERR, "see the free space and permissions there",
				 "writing %s: %s", m->jpath, strerror(err));
	return MC_OK;
}

/* ---- the stores ---- */

struct uop {
	const char *user;
	uint64_t bytes, msgs, id;
};

static int w_quota(struct store_txn *t, void *arg)
{
	struct uop *o = arg;

	return store_user_set_quota(t, o->user, o->bytes, o->msgs);
}

/* On the target: a tombstone an earlier move away from it left goes (a move back). */
static int w_create(struct store_txn *t, void *arg)
{
	struct uop *o = arg;
	int rc = store_tomb_clear(t, o->user);

	return rc != 0 ? rc : store_user_create(t, o->user, &o->id);
}

static int w_delete(struct store_txn *t, void *arg)
{
	struct uop *o = arg;

	return store_user_delete(t, o->user);
}

/* --abort on the target (--to): the copy goes and the tombstone its create cleared comes
   back, in one txn, so a stale route there finds the tombstone again. */
struct unmake_op {
	struct uop o;     /* first: user_write's */
	const char *host; /* NULL: no tombstone to restore */
	int64_t when;
};

static int w_unmake(struct store_txn *t, void *arg)
{
	struct unmake_op *u = arg;
	int rc = store_user_delete(t, u->o.user);

	if (rc != 0 && rc != STORE_ENOUSER)
		return rc;
	return u->host == NULL ? 0 : store_tomb_add(t, u->o.user, u->host, u->when);
}

/* The target's tombstone of the user, into the journal before the first create clears it
   (a rerun finds it cleared already and keeps what the journal has). */
static int note_target_tomb(struct move *m)
{
	struct store_txn *t;
	struct store_tomb tb;
	int rc;

	if (m->j.tomb_seen)
		return MC_OK;
	if ((rc = store_txn_begin(m->tgt.st, store_partition_for(m->tgt.st, m->user),
				  STORE_TXN_READ, &t)) != 0)
		return mc_fail(m->mc, rc, "reading the target's tombstone of '%s'", m->user);
	rc = store_tomb_get(t, m->user, &tb);
	store_txn_abort(&t);
	if (rc != 0 && rc != STORE_ENOMSG)
		return mc_fail(m->mc, rc, "reading the target's tombstone of '%s'", m->user);
	m->j.tomb_seen = true;
	m->j.tomb[0] = '\0';
	if (rc == 0) {
		str_lcpy(m->j.tomb, tb.host, sizeof(m->j.tomb));
		m->j.tomb_when = tb.when;
	}
	return MC_OK;
}

/* --finish on the source: the user goes, its tombstone stays (store_tomb.c), in one txn. */
struct tomb_op {
	struct uop o; /* first: user_write's */
	const char *host;
	int64_t when;
	bool gone; /* no user to delete, the tombstone only */
};

static int w_bury(struct store_txn *t, void *arg)
{
	struct tomb_op *b = arg;
	int rc = b->gone ? 0 : store_user_delete(t, b->o.user);

	return rc != 0 ? rc : store_tomb_add(t, b->o.user, b->host, b->when);
}

/* Runs fn for user in mc's store (the user's partition, or part when not found and part
   is not -1); a store error code. */
static int user_write(struct mc *mc, const char *user, int part,
		      int (*fn)(struct store_txn *t, void *arg), struct uop *o)
{
	unsigned p;
	int rc = store_user_locate(mc->st, user, &p);

	if (rc == STORE_ENOUSER && part >= 0) {
		p = (unsigned)part;
		rc = 0;
	}
	o->user = user;
	return rc != 0 ? rc : store_write(mc->st, p, fn, o);
}

static int user_quota(struct mc *mc, const char *user, uint64_t *bytes, uint64_t *msgs)
{
	struct store_txn *t;
	struct store_user u;
	unsigned p;
	int rc;

	if ((rc = store_user_locate(mc->st, user, &p)) != 0 ||
	    (rc = store_txn_begin(mc->st, p, STORE_TXN_READ, &t)) != 0)
		return rc;
	if ((rc = store_user_get(t, user, &u)) == 0) {
		*bytes = u.quota_bytes;
		*msgs = u.quota_msgs;
	}
	store_txn_abort(&t);
	return rc;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

struct fp {
	struct store_txn *t;
	FILE *f;
	uint64_t user;
	uint64_t mailboxes, messages;
	int rc;
	struct mc_digest *v; /* the parts: v[i] starts at at[i] */
	size_t n;
	long *at;
};

/* A part of the text begins here (name NULL: the user's rest). */
static void fp_part(struct fp *fp, const struct store_mbox_info *mi)
{
	fflush(fp->f);
	fp->v = xreallocarray(fp->v, fp->n + 1, sizeof(*fp->v));
	fp->at = xreallocarray(fp->at, fp->n + 1, sizeof(*fp->at));
	memset(&fp->v[fp->n], 0, sizeof(*fp->v));
	if (mi != NULL) {
		fp->v[fp->n].name = xstrndup(mi->name, mi->name_len);
		fp->v[fp->n].subscribed = (mi->attrs & STORE_MBOX_SUBSCRIBED) != 0;
		fp->v[fp->n].special = mi->special;
	}
	fp->at[fp->n++] = ftell(fp->f);
}

/* One annotation: its entry and value (hex). */
static int fp_annot(const struct store_annot *a, void *arg)
{
	struct fp *fp = arg;

	fprintf(fp->f, "  annotation %.*s ", (int)a->entry_len, a->entry);
	for (size_t i = 0; i < a->value_len; i++)
		fprintf(fp->f, "%02x", ((const unsigned char *)a->value)[i]);
	fputc('\n', fp->f);
	return 0;
}

/* One entry of the expunge history: UID, MODSEQ, time. */
static int fp_history(uint32_t uid, uint64_t modseq, int64_t when, void *arg)
{
	struct fp *fp = arg;

	fprintf(fp->f, "  expunged %" PRIu32 " modseq %" PRIu64 " at %" PRId64 "\n", uid, modseq,
		when);
	return 0;
}

static int fp_mbox(const struct store_mbox_info *mi, void *arg)
{
	struct fp *fp = arg;
	const char *names[STORE_MAX_KEYWORDS], *set[STORE_MAX_KEYWORDS];
	struct store_status st;
	struct store_iter *it;
	struct store_msg msg;
	unsigned nkw = 0;
	int rc;

	if (mi->attrs & STORE_MBOX_NOSELECT)
		return 0; /* made again as an ordinary parent by the import */
	if ((rc = store_mbox_status(fp->t, mi->id, &st)) != 0 ||
	    (rc = store_mbox_keywords(fp->t, mi->id, names, &nkw)) != 0 ||
	    (rc = store_msg_iter(fp->t, mi->id, 1, UINT32_MAX, 0, &it)) != 0)
		return rc;
	fp_part(fp, mi);
	fprintf(fp->f,
		"mailbox %.*s uidvalidity %" PRIu32 " uidnext %" PRIu32 " highestmodseq %" PRIu64
		" subscribed %d special %x expunge_floor %" PRIu64 "\n",
		(int)mi->name_len, mi->name, st.uidvalidity, st.uidnext, st.highestmodseq,
		(mi->attrs & STORE_MBOX_SUBSCRIBED) != 0, mi->special, st.expunge_floor);
	fp->mailboxes++;
	while ((rc = store_iter_next(it, &msg)) == STORE_ITER_MSG) {
		unsigned n = 0;

		for (unsigned k = 0; k < nkw; k++)
			if (msg.keywords & (1ull << k))
				set[n++] = names[k];
		qsort(set, n, sizeof(*set), name_cmp);
		fprintf(fp->f,
			"  %" PRIu32 " size %" PRIu64 " date %" PRId64 " modseq %" PRIu64
			" flags %u",
			msg.uid, msg.size, msg.internaldate, msg.modseq,
			msg.flags & STORE_FLAGS_ALL);
		for (unsigned k = 0; k < n; k++)
			fprintf(fp->f, " %s", set[k]);
		fputc('\n', fp->f);
		fp->messages++;
	}
	store_iter_free(&it);
	if (rc == 0)
		rc = store_msg_history(fp->t, mi->id, fp_history, fp);
	return rc != 0 ? rc : store_annot_all(fp->t, mi->id, fp->user, fp_annot, fp);
}

/* One Sieve script: its name, whether it is active, and its source and program (hex). */
static int fp_sieve(const struct store_sieve_script *s, void *arg)
{
	struct fp *fp = arg;

	fprintf(fp->f, "sieve %.*s active %d\n  src ", (int)s->name_len, s->name, s->active);
	for (size_t i = 0; i < s->src_len; i++)
		fprintf(fp->f, "%02x", (unsigned char)s->src[i]);
	fputs("\n  prog ", fp->f);
	for (size_t i = 0; i < s->prog_len; i++)
		fprintf(fp->f, "%02x", s->prog[i]);
	fputc('\n', fp->f);
	return 0;
}

int mc_sha256_hex(const void *p, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	if (EVP_Digest(p, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	for (unsigned k = 0; k < 32; k++)
		snprintf(hex + 2 * k, 3, "%02x", md[k]);
	return 0;
}

/* What a move must keep of user, as text (*text_r malloc'd): each selectable mailbox with
   its UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, subscription, special use and annotations, each
   message with its UID, size, INTERNALDATE, MODSEQ, flags and keywords, and the user's
   server annotations and Sieve scripts (the active one marked); each mailbox's part and
   the rest with their SHA-256 (v_r may be NULL). A store error code. */
int mc_fingerprint(struct mc *mc, const char *user, char **text_r, struct mc_digest **v_r,
		   size_t *n_r, uint64_t *boxes_r, uint64_t *msgs_r)
{
	struct fp fp = { 0 };
	struct store_user u;
	size_t len = 0;
	unsigned p;
	int rc;

	*text_r = NULL;
	if ((rc = store_user_locate(mc->st, user, &p)) != 0 ||
	    (rc = store_txn_begin(mc->st, p, STORE_TXN_READ, &fp.t)) != 0)
		return rc;
	fp.f = open_memstream(text_r, &len);
	if ((rc = store_user_get(fp.t, user, &u)) == 0) {
		fp.user = u.id;
		rc = store_mbox_list(fp.t, u.id, "*", false, fp_mbox, &fp);
	}
	if (rc == 0) {
		fp_part(&fp, NULL);
		fputs("server\n", fp.f);
		rc = store_annot_all(fp.t, u.id, u.id, fp_annot, &fp);
	}
	if (rc == 0)
		rc = store_sieve_list(fp.t, user, fp_sieve, &fp);
	store_txn_abort(&fp.t);
	fclose(fp.f);
	*boxes_r = fp.mailboxes;
	*msgs_r = fp.messages;
	for (size_t i = 0; i < fp.n && rc == 0; i++) {
		size_t end = i + 1 < fp.n ? (size_t)fp.at[i + 1] : len;
		if (mc_sha256_hex(*text_r + fp.at[i], end - (size_t)fp.at[i], fp.v[i].hex) != 0)
			rc = STORE_EIO;
	}
	free(fp.at);
	if (rc != 0 || v_r == NULL) {
		mc_digests_free(fp.v, fp.n);
		fp.v = NULL;
		fp.n = 0;
	}
	if (v_r != NULL) {
		*v_r = fp.v;
		*n_r = fp.n;
	}
	if (rc != 0) {
		free(*text_r);
		*text_r = NULL;
	}
	return rc;
}

static int fingerprint(struct mc *mc, const char *user, char **text_r, uint64_t *boxes_r,
		       uint64_t *msgs_r)
{
	return mc_fingerprint(mc, user, text_r, NULL, NULL, boxes_r, msgs_r);
}

void mc_digests_free(struct mc_digest *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* The first line where a and b differ, for the refusal. */
static void first_diff(const char *a, const char *b, char *out, size_t size)
{
	for (;;) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

		if (la != lb || memcmp(a, b, la) != 0 || a[la] == '\0' || b[lb] == '\0')
			break;
		a += la + 1;
		b += lb + 1;
	}
	snprintf(out, size, "source '%.*s', target '%.*s'", (int)strcspn(a, "\n"), a,
		 (int)strcspn(b, "\n"), b);
}

static int fp_memory(enum store_sieve_memory kind, uint64_t hash, int64_t until, void *arg)
{
	fprintf(arg, "memory %c %016" PRIx64 " until %" PRId64 "\n", (char)kind, hash, until);
	return 0;
}

/* The user's Sieve vacation and duplicate memories not expired at now, as text (*text_r
   malloc'd). Not part of the fingerprint: they expire while the copy waits for --finish. */
int mc_memories_text(struct mc *mc, const char *user, int64_t now, char **text_r)
{
	struct store_txn *t;
	size_t len;
	unsigned p;
	FILE *f;
	int rc;

	*text_r = NULL;
	if ((rc = store_user_locate(mc->st, user, &p)) != 0 ||
	    (rc = store_txn_begin(mc->st, p, STORE_TXN_READ, &t)) != 0)
		return rc;
	f = open_memstream(text_r, &len);
	rc = store_sieve_memories(t, user, now, fp_memory, f);
	store_txn_abort(&t);
	fclose(f);
	if (rc != 0) {
		free(*text_r);
		*text_r = NULL;
	}
	return rc;
}

/* Source and target hold the same Sieve memories at one instant (those expiring meanwhile
   are not compared); else *differ_r. A store error code. */
static int compare_memories(struct move *m, char *diff, size_t size, bool *differ_r)
{
	int64_t now = (int64_t)time(NULL);
	char *src = NULL, *dst = NULL;
	int rc;

	*differ_r = false;
	if ((rc = mc_memories_text(m->mc, m->user, now, &src)) == 0 &&
	    (rc = mc_memories_text(&m->tgt, m->user, now, &dst)) == 0 && strcmp(src, dst) != 0) {
		*differ_r = true;
		first_diff(src, dst, diff, size);
	}
	free(src);
	free(dst);
	return rc;
}

/* Source and target hold the same mail of the user; else says where they differ. */
static int compare(struct move *m, char **src_r)
{
	char *src = NULL, *dst = NULL, diff[700];
	uint64_t b2, m2;
	bool differ;
	int rc;

	*src_r = NULL;
	if ((rc = fingerprint(m->mc, m->user, &src, &m->mailboxes, &m->messages)) != 0)
		return mc_fail(m->mc, rc, "reading '%s' on the source", m->user);
	if ((rc = fingerprint(&m->tgt, m->user, &dst, &b2, &m2)) != 0) {
		free(src);
		return mc_fail(m->mc, rc, "reading '%s' on the target (%s)", m->user,
			       m->tgt.conf_path);
	}
	rc = strcmp(src, dst) == 0 ? MC_OK : MC_IOERR;
	if (rc != MC_OK)
		first_diff(src, dst, diff, sizeof(diff));
	else if ((rc = compare_memories(m, diff, sizeof(diff), &differ)) != 0) {
		free(src);
		free(dst);
		return mc_fail(m->mc, rc, "the Sieve memories of '%s'", m->user);
	} else if (differ)
		rc = MC_IOERR;
	if (rc != MC_OK) {
		mc_refuse(m->mc, rc,
			  "the source keeps the user (frozen); run the command again to copy "
			  "anew, or --abort",
			  "the copy of '%s' differs: %s", m->user, diff);
		free(src);
	} else
		*src_r = src;
	free(dst);
	return rc;
}

/* The user's Sieve scripts, read from the source and written to the target as stored
   (source and compiled program: both hosts run the same Heron), the active one active. */
struct scripts {
	const char *user;
	size_t n;
	struct mc_script *v;
};

static int scripts_add(const struct store_sieve_script *s, void *arg)
{
	struct scripts *sc = arg;
	struct mc_script *d;

	sc->v = xreallocarray(sc->v, sc->n + 1, sizeof(*sc->v));
	d = &sc->v[sc->n++];
	d->name = xstrndup(s->name, s->name_len);
	d->src = xmalloc(s->src_len + 1);
	memcpy(d->src, s->src, s->src_len);
	d->src[s->src_len] = '\0';
	d->src_len = s->src_len;
	d->prog = xmalloc(s->prog_len + 1);
	memcpy(d->prog, s->prog, s->prog_len);
	d->prog_len = s->prog_len;
	d->active = s->active;
	return 0;
}

int mc_scripts_put(struct store_txn *t, const char *user, const struct mc_script *v, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++)
		rc = store_sieve_put(t, user, v[i].name, v[i].src, v[i].src_len, v[i].prog,
				     v[i].prog_len);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (v[i].active)
			rc = store_sieve_activate(t, user, v[i].name);
	return rc;
}

void mc_scripts_free(struct mc_script *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].src);
		free(v[i].prog);
	}
	free(v);
}

static int w_scripts(struct store_txn *t, void *arg)
{
	struct scripts *sc = arg;

	return mc_scripts_put(t, sc->user, sc->v, sc->n);
}

static int copy_scripts(struct move *m)
{
	struct scripts sc = { m->user, 0, NULL };
	struct store_txn *t;
	unsigned p;
	int rc;

	if ((rc = store_user_locate(m->mc->st, m->user, &p)) != 0 ||
	    (rc = store_txn_begin(m->mc->st, p, STORE_TXN_READ, &t)) != 0)
		return mc_fail(m->mc, rc, "the Sieve scripts of '%s'", m->user);
	rc = store_sieve_list(t, m->user, scripts_add, &sc);
	store_txn_abort(&t);
	if (rc != 0)
		rc = mc_fail(m->mc, rc, "the Sieve scripts of '%s'", m->user);
	else if (sc.n > 0 && ((rc = store_user_locate(m->tgt.st, m->user, &p)) != 0 ||
			      (rc = store_write(m->tgt.st, p, w_scripts, &sc)) != 0))
		rc = mc_fail(m->mc, rc, "the Sieve scripts of '%s' on the target", m->user);
	mc_scripts_free(sc.v, sc.n);
	return rc;
}

/* ---- the daemons and the directory ---- */

static void kick_cb(const char *ident, unsigned worker, const char *answer, size_t len,
		    const char *error, void *arg)
{
	uint64_t *n = arg;

	(void)ident;
	(void)worker;
	if (error == NULL && len > 3 && memcmp(answer, "OK ", 3) == 0)
		*n += strtoull(answer + 3, NULL, 10);
}

/* Closes the user's sessions on the source's daemons (none running: nothing to close). */
static uint64_t kick(struct move *m)
{
	const char *dir = conf_values(m->mc->conf)->control.dir;
	char *line = xasprintf("kick %s", m->user);
	uint64_t n = 0;

	if (dir[0] != '\0')
		(void)control_request_all(dir, NULL, line, 5000, kick_cb, &n);
	free(line);
	return n;
}

/* host as the user's mailHost on the provider (--provider, else [directory] uri); with host
   NULL only reads it, from [directory] uri (the local replica). *old_r: the value before. */
static int set_mailhost(struct move *m, const char *host, char **old_r)
{
	char *dn = NULL, *err = NULL;
	int rc;

	if (ldapauth_mailhost(m->mc->conf, host ? m->provider : NULL, m->user, host, &dn, old_r,
			      &err) == 0) {
		free(dn);
		return MC_OK;
	}
	rc = strstr(err, "no such user") != NULL                                  ? MC_NOUSER
	     : strstr(err, "backend") != NULL || strstr(err, "attribute") != NULL ? MC_CONFIG
										  : MC_TEMPFAIL;
	rc = mc_refuse(m->mc, rc,
		       host ? "the copy is ready and the source frozen: run the command again"
			    : "check [directory] in heron.conf (the provider: --provider)",
		       "the directory: %s", err);
	free(err);
	return rc;
}

/* ---- the target through --via CMD ---- */

/* Runs `sh -c 'CMD "$@"' sh user VERB USER` (CMD runs mailctl on the target host), its
   stdin from in (-1: /dev/null) and its stdout into out (-1: our stderr); its pid or -1. */
static pid_t via_spawn(struct move *m, const char *verb, const char *at, int in, int out)
{
	char *script = xasprintf("%s \"$@\"", m->via);
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		int nul = open("/dev/null", O_RDONLY);

		if (dup2(in != -1 ? in : nul, 0) == -1 || dup2(out != -1 ? out : 2, 1) == -1)
			_exit(127);
		execl("/bin/sh", "sh", "-c", script, "sh", "user", verb, m->user,
		      at != NULL ? "--at" : NULL, at, (char *)NULL);
		_exit(127);
	}
	free(script);
	if (pid == -1)
		mc_refuse(m->mc, MC_IOERR, "see the process limits", "starting --via: %s",
			  strerror(errno));
	return pid;
}

/* The exit of CMD's `user VERB`: MC_OK, else MC_TEMPFAIL (said unless quiet). */
static int via_wait(struct move *m, pid_t pid, const char *verb, bool quiet)
{
	int st = 0;

	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return quiet ? MC_TEMPFAIL
				     : mc_refuse(m->mc, MC_IOERR, "", "waiting for --via: %s",
						 strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return MC_OK;
	if (quiet)
		return MC_TEMPFAIL;
	return mc_refuse(m->mc, MC_TEMPFAIL,
			 "see its error above; run the command again: the move resumes",
			 "the target's `mailctl user %s %s` (--via) %s %d", verb, m->user,
			 WIFEXITED(st) ? "exited with" : "was killed by signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* What the target holds of the user (`user digest` through CMD), its Sieve memories not
   expired now (t->at). */
static int via_digest(struct move *m, struct mc_target *t)
{
	int64_t now = (int64_t)time(NULL);
	char at[24];
	int p[2], rc, wrc;
	pid_t pid;
	FILE *f;

	memset(t, 0, sizeof(*t));
	snprintf(at, sizeof(at), "%" PRId64, now);
	if (pipe2(p, O_CLOEXEC) == -1)
		return mc_refuse(m->mc, MC_IOERR, "", "pipe: %s", strerror(errno));
	pid = via_spawn(m, "digest", at, -1, p[1]);
	close(p[1]);
	if (pid == -1) {
		close(p[0]);
		return MC_IOERR;
	}
	f = fdopen(p[0], "r");
	rc = mc_digest_read(m->mc, f, t);
	fclose(f);
	wrc = via_wait(m, pid, "digest", rc != MC_OK);
	if (rc == MC_OK && wrc != MC_OK) {
		mc_digests_free(t->v, t->n);
		memset(t, 0, sizeof(*t));
		rc = wrc;
	}
	t->at = now;
	return rc;
}

/* The stream of plan into `user receive` through CMD. */
static int via_send(struct move *m, const struct mc_stream_plan *plan)
{
	int p[2], rc, wrc;
	pid_t pid;
	FILE *f;

	if (pipe2(p, O_CLOEXEC) == -1)
		return mc_refuse(m->mc, MC_IOERR, "", "pipe: %s", strerror(errno));
	pid = via_spawn(m, "receive", NULL, p[0], -1);
	close(p[0]);
	if (pid == -1) {
		close(p[1]);
		return MC_IOERR;
	}
	f = fdopen(p[1], "w");
	rc = mc_stream_send(m->mc, f, m->user, m->mail, plan);
	fclose(f);
	wrc = via_wait(m, pid, "receive", false);
	return wrc != MC_OK ? wrc : rc;
}

/* The part of v named name (NULL: the rest), or NULL. */
static const struct mc_digest *part_find(const struct mc_digest *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (name == NULL ? v[i].name == NULL
				 : v[i].name != NULL && strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

static bool part_same(const struct mc_digest *v, size_t n, const struct mc_digest *d)
{
	const struct mc_digest *o = part_find(v, n, d->name);

	return o != NULL && strcmp(o->hex, d->hex) == 0;
}

/* Mailbox d of the source is on the target complete: checkpointed in the journal as the
   same and the target's digest the same (the digest decides: the checkpoints are taken
   from it after each stream, and before it when a sender was killed before that). */
static bool held(const struct move *m, const struct mc_target *t, const struct mc_digest *d)
{
	return t->present && part_same(m->j.done, m->j.ndone, d) && part_same(t->v, t->n, d);
}

/* The journal's checkpoints: the source's mailboxes the target's digest shows the same. */
static void checkpoint(struct move *m, const struct mc_digest *v, size_t n,
		       const struct mc_target *t)
{
	mc_digests_free(m->j.done, m->j.ndone);
	m->j.done = NULL;
	m->j.ndone = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].name == NULL || !part_same(t->v, t->n, &v[i]))
			continue;
		m->j.done = xreallocarray(m->j.done, m->j.ndone + 1, sizeof(*m->j.done));
		m->j.done[m->j.ndone] = v[i];
		m->j.done[m->j.ndone++].name = xstrdup(v[i].name);
	}
}

/* The target holds what v describes; else says the first part that differs. */
static int via_same(struct move *m, const struct mc_digest *v, size_t n, const struct mc_target *t)
{
	const char *bad = NULL;

	for (size_t i = 0; i < n && bad == NULL; i++)
		if (!part_same(t->v, t->n, &v[i]))
			bad = v[i].name != NULL ? v[i].name : "(annotations and Sieve scripts)";
	for (size_t i = 0; i < t->n && bad == NULL; i++)
		if (part_find(v, n, t->v[i].name) == NULL)
			bad = t->v[i].name != NULL ? t->v[i].name : "(the rest)";
	if (bad == NULL && t->present) {
		char *text = NULL, hex[65] = "";
		int rc = mc_memories_text(m->mc, m->user, t->at, &text);

		if (rc != 0 || mc_sha256_hex(text, strlen(text), hex) != 0) {
			free(text);
			return mc_fail(m->mc, rc != 0 ? rc : STORE_EIO,
				       "the Sieve memories of '%s'", m->user);
		}
		free(text);
		if (strcmp(hex, t->memories) != 0)
			bad = "(the Sieve memories)";
	}
	if (bad == NULL && t->present)
		return MC_OK;
	return mc_refuse(m->mc, MC_IOERR,
			 "the source keeps the user (frozen); run the command again to copy "
			 "what differs, or --abort",
			 "the copy of '%s' differs on the target: %s", m->user,
			 t->present ? bad : "the user is missing");
}

/* compare() through CMD: the source's fingerprint and the target's digest. */
static int via_compare(struct move *m, char **src_r)
{
	struct mc_digest *v = NULL;
	struct mc_target t;
	size_t n = 0;
	int rc;

	*src_r = NULL;
	if ((rc = mc_fingerprint(m->mc, m->user, src_r, &v, &n, &m->mailboxes, &m->messages)) != 0)
		return mc_fail(m->mc, rc, "reading '%s' on the source", m->user);
	if ((rc = via_digest(m, &t)) == MC_OK)
		rc = via_same(m, v, n, &t);
	mc_digests_free(v, n);
	mc_digests_free(t.v, t.n);
	if (rc != MC_OK) {
		free(*src_r);
		*src_r = NULL;
	}
	return rc;
}

/* The stream's plan: every mailbox the target does not hold complete, INBOX first (all of
   them when its INBOX is not: INBOX is never deleted, so the copy starts again), the
   target's extra mailboxes deleted. */
static void plan_make(struct move *m, const struct mc_digest *v, size_t n,
		      const struct mc_target *t, struct mc_stream_plan *p,
		      struct mc_stream_box *boxes, const char **dels)
{
	const struct mc_digest *inbox = part_find(v, n, "INBOX");

	memset(p, 0, sizeof(*p));
	p->reset = t->present && (inbox == NULL || !held(m, t, inbox));
	for (int inbox_pass = 1; inbox_pass >= 0; inbox_pass--) /* INBOX first */
		for (size_t i = 0; i < n; i++)
			if (v[i].name != NULL && (&v[i] == inbox) == inbox_pass &&
			    (!t->present || p->reset || !held(m, t, &v[i])))
				boxes[p->nboxes++] = (struct mc_stream_box){ v[i].name,
									     v[i].subscribed,
									     v[i].special };
	for (size_t i = 0; i < t->n && t->present && !p->reset; i++)
		if (t->v[i].name != NULL && part_find(v, n, t->v[i].name) == NULL)
			dels[p->ndeletes++] = t->v[i].name;
	p->boxes = boxes;
	p->deletes = dels;
	p->quota_bytes = m->j.quota_bytes;
	p->quota_msgs = m->j.quota_msgs;
}

/* frozen -> copied through CMD: the source frozen and kicked, exported here, and streamed
   to the target mailbox by mailbox, skipping those a former run left there complete (the
   journal's checkpoints and the target's digest agree); then the two compared. */
static int copy_via(struct move *m)
{
	struct mc_target t = { 0 };
	struct mc_stream_plan plan = { 0 };
	struct mc_digest *v = NULL;
	struct mc_stream_box *boxes = NULL;
	const char **dels = NULL;
	uint64_t count = 0, bytes = 0;
	size_t nboxes = 0, n = 0;
	struct uop o = { 0 };
	char *src = NULL;
	int rc, src_rc;
	FILE *f;

	o.bytes = o.msgs = 1;
	if ((rc = user_write(m->mc, m->user, -1, w_quota, &o)) != 0)
		return mc_fail(m->mc, rc, "freezing '%s' (its quota)", m->user);
	kick(m);
	if ((rc = via_digest(m, &t)) != MC_OK)
		return rc;
	if (t.present && !m->j.created) {
		rc = mc_refuse(m->mc, MC_REFUSED, "remove it there first (`mailctl user del`)",
			       "user '%s' exists in the target's store (--via)", m->user);
		goto out;
	}
	if (mc_rm_tree(m->mail) != 0) {
		rc = mc_refuse(m->mc, MC_IOERR, "remove it by hand", "removing %s: %s", m->mail,
			       strerror(errno));
		goto out;
	}
	if ((rc = mc_export_user(m->mc, m->user, m->mail, &count, &bytes, &nboxes)) != MC_OK)
		goto out;
	if ((rc = mc_fingerprint(m->mc, m->user, &src, &v, &n, &m->mailboxes, &m->messages)) !=
	    0) {
		rc = mc_fail(m->mc, rc, "reading '%s' on the source", m->user);
		goto out;
	}
	m->j.created = true;
	checkpoint(m, v, n, &t); /* what a sender killed before its checkpoints left there */
	if ((rc = journal_save(m, MV_FROZEN)) != MC_OK)
		goto out;
	boxes = xcalloc(n + 1, sizeof(*boxes));
	dels = xcalloc(t.n + 1, sizeof(*dels));
	plan_make(m, v, n, &t, &plan, boxes, dels);
	src_rc = via_send(m, &plan);
	mc_digests_free(t.v, t.n);
	if ((rc = via_digest(m, &t)) == MC_OK) {
		checkpoint(m, v, n, &t);
		rc = journal_save(m, MV_FROZEN);
	}
	if (src_rc != MC_OK || rc != MC_OK) {
		rc = src_rc != MC_OK ? src_rc : rc;
		goto out;
	}
	if ((rc = via_same(m, v, n, &t)) != MC_OK)
		goto out;
	if ((f = fopen(m->fpath, "w")) == NULL || fputs(src, f) == EOF || fflush(f) == EOF ||
	    fsync(fileno(f)) == -1)
		rc = mc_refuse(m->mc, MC_IOERR, "see the free space there", "writing %s: %s",
			       m->fpath, strerror(errno));
	if (f != NULL)
		fclose(f);
	if (rc == MC_OK)
		rc = journal_save(m, MV_COPIED);
out:
	free(boxes);
	free(dels);
	mc_digests_free(v, n);
	mc_digests_free(t.v, t.n);
	free(src);
	return rc;
}

/* ---- the steps ---- */

static int report(struct move *m, const char *step)
{
	char until[32] = "";
	int64_t ttl = conf_values(m->mc->conf)->directory.auth_cache_ttl_ms / 1000;

	if (strcmp(step, "flipped") == 0)
		mc_fmt_time(until, sizeof(until), m->j.flipped_at + ttl);
	if (m->mc->json) {
		fputs("{\"user\": ", stdout);
		mc_json_str(stdout, m->user, strlen(m->user));
		fputs(", \"host\": ", stdout);
		mc_json_str(stdout, m->host, strlen(m->host));
		fputs(", \"from\": ", stdout);
		if (m->j.from[0] != '\0')
			mc_json_str(stdout, m->j.from, strlen(m->j.from));
		else
			fputs("null", stdout);
		printf(", \"step\": \"%s\", \"mailboxes\": %" PRIu64 ", \"messages\": %" PRIu64
		       ", \"finish_after\": ",
		       step, m->mailboxes, m->messages);
		if (until[0] != '\0')
			printf("\"%s\"}\n", until);
		else
			puts("null}");
	} else if (until[0] != '\0')
		printf("moved %s to %s: %" PRIu64 " mailboxes, %" PRIu64
		       " messages; the source copy stays (frozen) until `mailctl user move %s %s "
		       "%s%s%s --finish` after %s\n",
		       m->user, m->host, m->mailboxes, m->messages, m->user, m->host,
		       m->via ? "--via '" : "--to ", m->via ? m->via : m->tgt.conf_path,
		       m->via ? "'" : "", until);
	else
		printf("move of %s to %s: %s\n", m->user, m->host, step);
	return MC_OK;
}

/* frozen -> copied: the source frozen (any delivery 452 4.2.2: the sender keeps it
   queued) and its sessions kicked, then a fresh copy on the target, compared with the
   source. */
static int copy(struct move *m)
{
	struct uop o = { 0 };
	uint64_t count = 0, bytes = 0;
	size_t nboxes = 0;
	char *src = NULL;
	FILE *f;
	int rc;

	o.bytes = o.msgs = 1; /* frozen (again, when a crash came before it held) */
	if ((rc = user_write(m->mc, m->user, -1, w_quota, &o)) != 0)
		return mc_fail(m->mc, rc, "freezing '%s' (its quota)", m->user);
	kick(m);
	if (m->j.created) { /* an earlier copy of ours that did not finish */
		rc = user_write(&m->tgt, m->user, -1, w_delete, &o);
		if (rc != 0 && rc != STORE_ENOUSER)
			return mc_fail(m->mc, rc, "removing the earlier copy on the target");
	}
	if (mc_rm_tree(m->mail) != 0)
		return mc_refuse(m->mc, MC_IOERR, "remove it by hand", "removing %s: %s", m->mail,
				 strerror(errno));
	if ((rc = mc_export_user(m->mc, m->user, m->mail, &count, &bytes, &nboxes)) != MC_OK)
		return rc;
	m->j.created = true;
	if ((rc = note_target_tomb(m)) != MC_OK || (rc = journal_save(m, MV_FROZEN)) != MC_OK)
		return rc;
	if ((rc = user_write(&m->tgt, m->user, (int)store_partition_for(m->tgt.st, m->user),
			     w_create, &o)) != 0)
		return mc_fail(m->mc, rc, "creating '%s' on the target", m->user);
	if ((rc = mc_import_dir(&m->tgt, m->user, m->mail, &count)) != MC_OK)
		return rc;
	if ((rc = copy_scripts(m)) != MC_OK)
		return rc;
	o.bytes = m->j.quota_bytes;
	o.msgs = m->j.quota_msgs;
	if ((rc = user_write(&m->tgt, m->user, -1, w_quota, &o)) != 0)
		return mc_fail(m->mc, rc, "the quota of '%s' on the target", m->user);
	if ((rc = compare(m, &src)) != MC_OK)
		return rc;
	if ((f = fopen(m->fpath, "w")) == NULL || fputs(src, f) == EOF || fflush(f) == EOF ||
	    fsync(fileno(f)) == -1) {
		rc = mc_refuse(m->mc, MC_IOERR, "see the free space there", "writing %s: %s",
			       m->fpath, strerror(errno));
	}
	if (f != NULL)
		fclose(f);
	free(src);
	return rc != MC_OK ? rc : journal_save(m, MV_COPIED);
}

/* copied -> flipped: the same copy still, then mailHost on the provider. */
static int flip(struct move *m)
{
	char *src = NULL, *old = NULL;
	int rc;

	if ((rc = m->via ? via_compare(m, &src) : compare(m, &src)) != MC_OK) {
		journal_save(m, MV_FROZEN); /* copy again next time */
		return rc;
	}
	free(src);
	if ((rc = set_mailhost(m, m->host, &old)) != MC_OK)
		return rc;
	free(old);
	m->j.flipped_at = (int64_t)time(NULL);
	if ((rc = journal_save(m, MV_FLIPPED)) != MC_OK)
		return rc;
	kick(m); /* sessions opened during the copy: their next login goes to the target */
	return MC_OK;
}

/* The start: the user on the source only, homed there; the journal with its quota. */
static int begin(struct move *m)
{
	unsigned p;
	char *old = NULL;
	int rc;

	if ((rc = store_user_locate(m->mc->st, m->user, &p)) != 0)
		return mc_fail(m->mc, rc, "user '%s' on the source", m->user);
	if (m->via != NULL) {
		struct mc_target t;
		bool present;

		if ((rc = via_digest(m, &t)) != MC_OK)
			return rc;
		present = t.present;
		mc_digests_free(t.v, t.n);
		if (present)
			return mc_refuse(
				m->mc, MC_REFUSED,
				"remove it there first (`mailctl user del` on the target)",
				"user '%s' exists in the target's store (--via)", m->user);
	} else if (store_user_locate(m->tgt.st, m->user, &p) == 0)
		return mc_refuse(m->mc, MC_REFUSED,
				 "remove it there first (`mailctl -c TARGET.conf user del`)",
				 "user '%s' exists in the target's store (%s)", m->user,
				 m->tgt.conf_path);
	if ((rc = set_mailhost(m, NULL, &old)) != MC_OK)
		return rc;
	if (old != NULL && strcasecmp(old, m->host) == 0) {
		free(old);
		return mc_refuse(m->mc, MC_REFUSED, "nothing to move",
				 "'%s' is homed on %s already", m->user, m->host);
	}
	str_lcpy(m->j.host, m->host, sizeof(m->j.host));
	str_lcpy(m->j.from, old != NULL ? old : "", sizeof(m->j.from));
	free(old);
	if ((rc = user_quota(m->mc, m->user, &m->j.quota_bytes, &m->j.quota_msgs)) != 0)
		return mc_fail(m->mc, rc, "the quota of '%s'", m->user);
	if (mkdir(m->dir, 0700) == -1)
		return mc_refuse(m->mc, errno == EEXIST ? MC_REFUSED : MC_CANTCREAT,
				 "give another --dir, or remove it",
				 "%s: %s (and it holds no move journal)", m->dir, strerror(errno));
	return journal_save(m, MV_FROZEN); /* the quota kept before copy() freezes it */
}

static int finish(struct move *m)
{
	const struct directory_conf *d = &conf_values(m->mc->conf)->directory;
	int64_t until = m->j.flipped_at + d->auth_cache_ttl_ms / 1000;
	char *src = NULL, *saved = NULL, when[32];
	struct tomb_op b = { .host = m->host, .when = (int64_t)time(NULL) };
	struct store_tomb tb;
	size_t len = 0;
	FILE *f;
	int rc;

	if (m->j.step != MV_FLIPPED)
		return mc_refuse(m->mc, MC_REFUSED, "run it without --finish first",
				 "the move of '%s' is at step %s: mailHost is not flipped yet",
				 m->user, step_names[m->j.step]);
	if ((int64_t)time(NULL) < until) {
		mc_fmt_time(when, sizeof(when), until);
		return mc_refuse(m->mc, MC_TEMPFAIL, "run --finish again then",
				 "until %s ([directory] auth_cache_ttl after the flip) a host may "
				 "still route '%s' to the source",
				 when, m->user);
	}
	rc = fingerprint(m->mc, m->user, &src, &m->mailboxes, &m->messages);
	if (rc == 0) {
		if ((f = fopen(m->fpath, "r")) != NULL) {
			ssize_t n = getdelim(&saved, &len, '\0', f);

			(void)n;
			fclose(f);
		}
		if (saved == NULL || strcmp(saved, src) != 0) {
			rc = mc_refuse(m->mc, MC_REFUSED,
				       "compare it with the target and move what is missing by "
				       "hand; then --finish again after removing the fingerprint",
				       "the source copy of '%s' changed after the copy (%s)",
				       m->user, m->fpath);
			free(src);
			free(saved);
			return rc;
		}
		free(src);
		free(saved);
		/* deleted with its tombstone left in its place: a host that still routes the
		   user here gets 451 and referrals, and makes no empty account */
		if ((rc = user_write(m->mc, m->user, -1, w_bury, &b.o)) != 0)
			return mc_fail(m->mc, rc, "deleting '%s' on the source", m->user);
		if ((rc = store_acl_forget(m->mc->st, m->user, NULL)) != 0)
			return mc_fail(m->mc, rc, "the rights given to '%s' on the source",
				       m->user);
	} else if (rc != STORE_ENOUSER) { /* gone: an earlier --finish did it */
		return mc_fail(m->mc, rc, "reading '%s' on the source", m->user);
	} else if (store_tomb_find(m->mc->st, m->user, &tb) != 0) {
		/* deleted by a Heron without tombstones: one now */
		b.gone = true;
		if ((rc = user_write(m->mc, m->user, (int)store_partition_for(m->mc->st, m->user),
				     w_bury, &b.o)) != 0)
			return mc_fail(m->mc, rc, "the tombstone of '%s' on the source", m->user);
	}
	if (m->via != NULL) {
		/* the target forgets the tombstone it kept for a drop (a move back's): none can
		   come now; a failure leaves the journal, so --finish again sends this again */
		struct mc_stream_plan kept = { .kept = true };

		if ((rc = via_send(m, &kept)) != MC_OK)
			return rc;
	}
	if (mc_rm_tree(m->dir) != 0)
		fprintf(stderr, "mailctl: removing %s: %s (the move is done)\n", m->dir,
			strerror(errno));
	return report(m, "done");
}

static int abort_move(struct move *m)
{
	struct uop o = { 0 };
	int rc;

	if (m->j.step == MV_FLIPPED)
		return mc_refuse(
			m->mc, MC_REFUSED,
			"move it back with `mailctl user move USER SOURCE` from the target",
			"mailHost of '%s' is %s already", m->user, m->host);
	if (m->j.created && m->via != NULL) {
		struct mc_stream_plan drop = { .drop = true };

		if ((rc = via_send(m, &drop)) != MC_OK)
			return rc;
	} else if (m->j.created) {
		struct unmake_op u = { .host = m->j.tomb[0] ? m->j.tomb : NULL,
				       .when = m->j.tomb_when };

		if ((rc = user_write(&m->tgt, m->user,
				     (int)store_partition_for(m->tgt.st, m->user), w_unmake,
				     &u.o)) != 0)
			return mc_fail(m->mc, rc, "removing the copy on the target");
	}
	o.bytes = m->j.quota_bytes;
	o.msgs = m->j.quota_msgs;
	if ((rc = user_write(m->mc, m->user, -1, w_quota, &o)) != 0)
		return mc_fail(m->mc, rc, "unfreezing '%s' (its quota)", m->user);
	if (mc_rm_tree(m->dir) != 0)
		fprintf(stderr, "mailctl: removing %s: %s\n", m->dir, strerror(errno));
	return report(m, "aborted");
}

static int run_move(struct move *m, const struct mc_args *a)
{
	int rc = journal_read(m);

	if (rc < 0 && access(m->jpath, F_OK) == 0)
		return mc_refuse(m->mc, MC_DATAERR, "remove it if no move is under way",
				 "%s is not a move journal", m->jpath);
	if (rc == 0 && strcasecmp(m->j.host, m->host) != 0)
		return mc_refuse(m->mc, MC_REFUSED, "finish it, or --abort it",
				 "a move of '%s' to %s is under way (%s)", m->user, m->j.host,
				 m->jpath);
	if (rc != 0 && (a->set[3] || a->set[4]))
		return mc_refuse(m->mc, MC_REFUSED, "see --dir",
				 "no move of '%s' is under way (%s)", m->user, m->jpath);
	if (a->set[4])
		return abort_move(m);
	if (a->set[3])
		return finish(m);
	if (rc != 0 && (rc = begin(m)) != MC_OK)
		return rc;
	if (m->j.step == MV_FROZEN && (rc = m->via ? copy_via(m) : copy(m)) != MC_OK)
		return rc;
	if (m->j.step == MV_COPIED && (rc = flip(m)) != MC_OK)
		return rc;
	if (m->mailboxes == 0) { /* resumed after the flip: count what moved */
		char *text = NULL;

		if (fingerprint(m->via ? m->mc : &m->tgt, m->user, &text, &m->mailboxes,
				&m->messages) == 0)
			free(text);
	}
	return report(m, "flipped");
}

int mc_user_move(struct mc *mc, const struct mc_args *a)
{
	struct move m = { .mc = mc, .user = a->pos[0], .host = a->pos[1] };
	const char *spath = conf_values(mc->conf)->store.path;
	char *err = NULL, rs[4096], rt[4096];
	int rc;

	if (a->set[0] == a->set[5])
		return mc_usage(mc, "--to TARGET.conf (the heron.conf naming the target's store) "
				    "or --via CMD (mailctl on the target host), one of them");
	if (a->set[3] && a->set[4])
		return mc_usage(mc, "--finish or --abort, not both");
	for (const char *p = m.host; *p != '\0'; p++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_",
			   *p) == NULL)
			return mc_usage(mc, "HOST is a host name as mailHost holds it");
	if (m.host[0] == '\0' || strlen(m.host) > 253)
		return mc_usage(mc, "HOST is a host name as mailHost holds it");
	if (!a->set[1] && (strchr(m.user, '/') != NULL || m.user[0] == '.'))
		return mc_usage(mc, "give --dir for a user name holding '/'");
	m.provider = a->set[2] ? a->val[2] : NULL;
	m.via = a->set[5] ? a->val[5] : NULL;
	m.dir = a->set[1] ? xstrdup(a->val[1]) : xasprintf("%s.move-%s", spath, m.user);
	m.jpath = xasprintf("%s/journal", m.dir);
	m.mail = xasprintf("%s/mail", m.dir);
	m.fpath = xasprintf("%s/fingerprint", m.dir);
	m.tgt.conf_path = a->val[0];
	m.tgt.json = mc->json;
	if (m.via != NULL) {
		signal(SIGPIPE, SIG_IGN); /* a target that stops: EPIPE, said */
		rc = run_move(&m, a);
	} else if (conf_load(a->val[0], &m.tgt.conf, &err) < 0) {
		rc = mc_refuse(mc, MC_CONFIG, "--to names the target's heron.conf", "%s", err);
		free(err);
	} else if (realpath(spath, rs) != NULL &&
		   realpath(conf_values(m.tgt.conf)->store.path, rt) != NULL && !strcmp(rs, rt))
		rc = mc_refuse(mc, MC_USAGE, "--to names the target's heron.conf",
			       "the source and the target are one store (%s)", rs);
	else if ((rc = mc_open_store(&m.tgt, MC_STORE_NEW)) == MC_OK)
		rc = run_move(&m, a);
	mc->error_out |= m.tgt.error_out;
	if (m.tgt.st != NULL)
		store_close(&m.tgt.st);
	if (m.tgt.conf != NULL)
		conf_free(&m.tgt.conf);
	mc_digests_free(m.j.done, m.j.ndone);
	free(m.dir);
	free(m.jpath);
	free(m.mail);
	free(m.fpath);
	return rc;
}

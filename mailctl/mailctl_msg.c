/* mailctl_msg.c — owns the message commands of mailctl (list with From and Subject from the
 * message cache, show, flags, delete) and expunge: UID sets, flag names, selecting messages
 * by flag or date, and streaming a message body from its file to stdout (as is, or inside a
 * JSON string). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/msgcache.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"

#define MAX_RANGES 1024

static const char *const flag_names[] = { "\\Seen", "\\Answered", "\\Flagged", "\\Deleted",
					  "\\Draft" };

struct uidset {
	uint32_t lo[MAX_RANGES], hi[MAX_RANGES];
	size_t n;
};

/* What a message write does; resolved again on every store_write attempt. */
struct msg_op {
	const char *user, *mailbox;
	const struct uidset *set;
	bool only_deleted;
	int64_t before;         /* 0: no date condition */
	enum store_flag_op fop; /* message flags */
	unsigned flags;
	const char *const *kws; /* keyword names to change */
	size_t nkws;
	uint32_t *uids; /* out: the UIDs selected */
	size_t nuids;
	size_t done; /* out: changed or expunged */
};

int mc_flag_parse(const char *s, unsigned *flag_r)
{
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (str_caseeq(s, strlen(s), flag_names[i], strlen(flag_names[i]))) {
			*flag_r = 1u << i;
			return 0;
		}
	return -1;
}

void mc_flags_text(char *buf, size_t size, unsigned flags, uint64_t kws,
		   const char *const *kwnames, unsigned nkw)
{
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (flags & (1u << i)) {
			str_lcat(buf, buf[0] ? " " : "", size);
			str_lcat(buf, flag_names[i], size);
		}
	for (unsigned i = 0; i < nkw && i < 64; i++)
		if (kws & ((uint64_t)1 << i)) {
			str_lcat(buf, buf[0] ? " " : "", size);
			str_lcat(buf, kwnames[i], size);
		}
}

/* Sorts the ranges and merges overlapping or adjacent ones: each UID is visited once, in
   UID order. */
static void uidset_normalize(struct uidset *u)
{
	size_t out = 0;

	for (size_t i = 1; i < u->n; i++) /* insertion sort: sets are short */
		for (size_t j = i; j > 0 && u->lo[j - 1] > u->lo[j]; j--) {
			uint32_t lo = u->lo[j], hi = u->hi[j];

			u->lo[j] = u->lo[j - 1];
			u->hi[j] = u->hi[j - 1];
			u->lo[j - 1] = lo;
			u->hi[j - 1] = hi;
		}
	for (size_t i = 0; i < u->n; i++) {
		if (out > 0 && (uint64_t)u->lo[i] <= (uint64_t)u->hi[out - 1] + 1) {
			if (u->hi[i] > u->hi[out - 1])
				u->hi[out - 1] = u->hi[i];
			continue;
		}
		u->lo[out] = u->lo[i];
		u->hi[out++] = u->hi[i];
	}
	u->n = out;
}

/* "1:5,7,9:*" (also "*" and "all"); ranges may be given either way round. */
static int uidset_parse(const char *s, struct uidset *u)
{
	struct str_view rest = str_view_of(s), f;

	u->n = 0;
	if (strcmp(s, "all") == 0)
		s = "1:*";
	rest = str_view_of(s);
	while (str_split_next(&rest, ',', &f)) {
		const char *colon = memchr(f.p, ':', f.len);
		size_t l1 = colon ? (size_t)(colon - f.p) : f.len;
		uint64_t a, b;

		if (u->n == MAX_RANGES)
			return -1;
		if (l1 == 1 && f.p[0] == '*')
			a = UINT32_MAX;
		else if (str_to_u64(f.p, l1, UINT32_MAX, &a) < 0 || a == 0)
			return -1;
		b = a;
		if (colon != NULL) {
			size_t l2 = f.len - l1 - 1;

			if (l2 == 1 && colon[1] == '*')
				b = UINT32_MAX;
			else if (str_to_u64(colon + 1, l2, UINT32_MAX, &b) < 0 || b == 0)
				return -1;
		}
		u->lo[u->n] = (uint32_t)(a < b ? a : b);
		u->hi[u->n++] = (uint32_t)(a < b ? b : a);
	}
	uidset_normalize(u);
	return u->n > 0 ? 0 : -1;
}

/* Collects into op->uids the UIDs of set (and op's conditions) present in mbox. */
static int select_uids(struct store_txn *t, uint64_t mbox, struct msg_op *op)
{
	struct store_iter *it;
	struct store_msg m;
	size_t cap = 0;
	int rc = 0;

	free(op->uids);
	op->uids = NULL;
	op->nuids = 0;
	for (size_t r = 0; r < op->set->n && rc == 0; r++) {
		if ((rc = store_msg_iter(t, mbox, op->set->lo[r], op->set->hi[r], 0, &it)) != 0)
			break;
		while ((rc = store_iter_next(it, &m)) == 1) {
			if ((op->only_deleted && !(m.flags & STORE_DELETED)) ||
			    (op->before != 0 && m.internaldate >= op->before))
				continue;
			if (op->nuids == cap)
				op->uids = xreallocarray(op->uids, cap = cap * 2 + 64,
							 sizeof(*op->uids));
			op->uids[op->nuids++] = m.uid;
		}
		store_iter_free(&it);
	}
	return rc < 0 ? -rc : rc;
}

static int resolve(struct store_txn *t, const struct msg_op *op, uint64_t *mbox_r)
{
	struct store_user u;
	int rc;

	if ((rc = store_user_get(t, op->user, &u)) != 0)
		return rc;
	return store_mbox_find(t, u.id, op->mailbox, mbox_r);
}

static int w_expunge(struct store_txn *t, void *arg)
{
	struct msg_op *op = arg;
	uint32_t *out = NULL;
	size_t nout = 0;
	uint64_t mbox;
	int rc;

	op->done = 0;
	if ((rc = resolve(t, op, &mbox)) != 0 || (rc = select_uids(t, mbox, op)) != 0)
		return rc;
	if (op->nuids == 0)
		return 0;
	if ((rc = store_msg_expunge(t, mbox, op->uids, op->nuids, &out, &nout)) != 0) {
		free(out);
		return rc;
	}
	free(op->uids);
	op->uids = out; /* what was expunged, for the report */
	op->nuids = op->done = nout;
	return 0;
}

static int w_flags(struct store_txn *t, void *arg)
{
	struct msg_op *op = arg;
	uint64_t mbox, kws = 0;
	unsigned idx;
	int rc;

	op->done = 0;
	if ((rc = resolve(t, op, &mbox)) != 0 || (rc = select_uids(t, mbox, op)) != 0)
		return rc;
	for (size_t i = 0; i < op->nkws; i++) {
		rc = store_mbox_keyword(t, mbox, op->kws[i], op->fop != STORE_FLAGS_REMOVE, &idx);
		if (rc == STORE_ENOMSG)
			continue; /* removing a keyword the mailbox never had */
		if (rc != 0)
			return rc;
		kws |= (uint64_t)1 << idx;
	}
	for (size_t i = 0; i < op->nuids; i++) {
		struct store_msg before, after;

		if ((rc = store_msg_get(t, mbox, op->uids[i], &before)) != 0 ||
		    (rc = store_msg_flags(t, mbox, op->uids[i], op->fop, op->flags, kws, 0,
					  &after)) != 0)
			return rc;
		op->done += before.modseq != after.modseq;
	}
	return 0;
}

static int uid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------------------------- */
/* message list */

static const char *const msg_cols[] = { "uid",  "size", "date",    "flags", "modseq",
					"blob", "from", "subject", NULL };

#define FIELD_MAX 200 /* bytes of a header value shown */

/* The unfolded value of header field name from the cached header block (raw: encoded
   words are shown as they are), NULL when absent. */
static const char *header_field(const struct store_msg *m, const char *name, char *out,
				size_t size)
{
	struct msgcache_view v;
	size_t nlen = strlen(name), n = 0;

	if (m->cache_len == 0 || msgcache_parse(m->cache, m->cache_len, &v) < 0)
		return NULL;
	for (size_t i = 0; i + nlen < v.header.len; i++) {
		const char *p = v.header.p + i;

		if ((i > 0 && p[-1] != '\n') || !str_caseprefix(p, v.header.len - i, name) ||
		    p[nlen] != ':')
			continue;
		for (size_t j = i + nlen + 1; j < v.header.len && n + 1 < size; j++) {
			char c = v.header.p[j];

			if (c == '\n' && (j + 1 >= v.header.len ||
					  (v.header.p[j + 1] != ' ' && v.header.p[j + 1] != '\t')))
				break;
			if (c == '\r' || c == '\n' || (c == ' ' && (n == 0 || out[n - 1] == ' ')))
				continue;
			out[n++] = c == '\t' ? ' ' : c;
		}
		out[n] = '\0';
		return out;
	}
	return NULL;
}

static void msg_row(struct mc_table *tab, const struct store_msg *m, const char *const *names,
		    unsigned nkw)
{
	char fl[4096];

	mc_flags_text(fl, sizeof(fl), m->flags, m->keywords, names, nkw);
	mc_table_row(tab);
	mc_cell_u64(tab, m->uid);
	mc_cell_u64(tab, m->size);
	mc_cell_time(tab, m->internaldate);
	mc_cell_str(tab, fl);
	mc_cell_u64(tab, m->modseq);
	mc_cell_hex(tab, m->blob);
	mc_cell_str(tab, header_field(m, "From", fl, FIELD_MAX));
	mc_cell_str(tab, header_field(m, "Subject", fl, FIELD_MAX));
}

static int list_set(struct mc *mc, const char *user, const char *mailbox, const struct uidset *set)
{
	const char *names[STORE_MAX_KEYWORDS];
	struct mc_table *tab;
	struct store_txn *t;
	struct store_user u;
	struct store_iter *it;
	struct store_msg m;
	uint64_t mbox;
	unsigned nkw;
	int rc;

	if ((rc = mc_begin(mc, user, mailbox, STORE_TXN_READ, &t, &u, &mbox)) != MC_OK)
		return rc;
	if ((rc = store_mbox_keywords(t, mbox, names, &nkw)) != 0) {
		store_txn_abort(&t);
		return mc_fail(mc, rc, "keywords of '%s'", mailbox);
	}
	tab = mc_table_new(msg_cols);
	for (size_t r = 0; r < set->n && rc == 0; r++) {
		if ((rc = store_msg_iter(t, mbox, set->lo[r], set->hi[r], 0, &it)) != 0)
			break;
		while ((rc = store_iter_next(it, &m)) == 1)
			msg_row(tab, &m, names, nkw);
		store_iter_free(&it);
	}
	store_txn_abort(&t);
	if (rc != 0) {
		mc_table_free(&tab);
		return mc_fail(mc, rc < 0 ? -rc : rc, "messages of '%s'", mailbox);
	}
	mc_table_print(mc, &tab);
	return MC_OK;
}

int mc_msg_list(struct mc *mc, const struct mc_args *a)
{
	struct uidset *set = xmalloc(sizeof(*set));
	int rc;

	if (uidset_parse(a->npos > 2 ? a->pos[2] : "1:*", set) < 0)
		rc = mc_usage(mc, "bad UID set '%s' (e.g. 1:5,7,9:*)", a->pos[2]);
	else
		rc = list_set(mc, a->pos[0], a->pos[1], set);
	free(set);
	return rc;
}

/* ------------------------------------------------------------------------------------- */
/* message show */

int mc_stream_body(int fd, bool json)
{
	char buf[65536];
	size_t have = 0;
	ssize_t n;

	while ((n = read(fd, buf + have, sizeof(buf) - have)) > 0 || (n == -1 && errno == EINTR)) {
		size_t used;

		if (n < 0)
			continue;
		have += (size_t)n;
		if (!json) {
			fwrite(buf, 1, have, stdout);
			have = 0;
			continue;
		}
		used = mc_json_chars(stdout, buf, have, false);
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	if (json && have > 0)
		mc_json_chars(stdout, buf, have, true);
	return n < 0 ? -1 : 0;
}

static void show_meta(struct mc *mc, const char *mailbox, const struct store_msg *m,
		      const char *flags)
{
	char date[64];

	mc_fmt_time(date, sizeof(date), m->internaldate);
	if (mc->json) {
		fputs("{\"mailbox\": ", stdout);
		mc_json_str(stdout, mailbox, strlen(mailbox));
		printf(", \"uid\": %" PRIu32 ", \"size\": %" PRIu64 ", \"date\": \"%s\", "
		       "\"modseq\": %" PRIu64 ", \"flags\": ",
		       m->uid, m->size, date, m->modseq);
		mc_json_str(stdout, flags, strlen(flags));
		fputs(", \"message\": \"", stdout);
	} else
		printf("uid: %" PRIu32 "\nsize: %" PRIu64 "\ndate: %s\nflags: %s\nmodseq: %" PRIu64
		       "\n\n",
		       m->uid, m->size, date, flags, m->modseq);
}

int mc_msg_show(struct mc *mc, const struct mc_args *a)
{
	const char *names[STORE_MAX_KEYWORDS];
	char flags[4096];
	struct store_txn *t;
	struct store_user u;
	struct store_msg m;
	uint64_t mbox, uid, size;
	unsigned nkw;
	int fd, rc;

	if (str_to_u64(a->pos[2], strlen(a->pos[2]), UINT32_MAX, &uid) < 0 || uid == 0)
		return mc_usage(mc, "bad UID '%s'", a->pos[2]);
	if ((rc = mc_begin(mc, a->pos[0], a->pos[1], STORE_TXN_READ, &t, &u, &mbox)) != MC_OK)
		return rc;
	if ((rc = store_msg_get(t, mbox, (uint32_t)uid, &m)) != 0 ||
	    (rc = store_mbox_keywords(t, mbox, names, &nkw)) != 0) {
		store_txn_abort(&t);
		return mc_fail(mc, rc, "message %" PRIu64 " in '%s'", uid, a->pos[1]);
	}
	mc_flags_text(flags, sizeof(flags), m.flags, m.keywords, names, nkw);
	store_txn_abort(&t);
	if ((rc = store_blob_open(mc->st, STORE_ID_PART(mbox), m.blob, &fd, &size)) != 0)
		return mc_fail(mc, rc == STORE_ENOMSG ? STORE_ECORRUPT : rc,
			       "the file of message %" PRIu64 " is missing", uid);
	if (!a->set[0] || mc->json)
		show_meta(mc, a->pos[1], &m, flags);
	rc = mc_stream_body(fd, mc->json);
	close(fd);
	if (mc->json)
		puts("\"}");
	if (rc < 0) {
		fprintf(stderr, "mailctl: reading message %" PRIu64 ": %s\n", uid,
			strerror(errno));
		return MC_ERR;
	}
	return MC_OK;
}

/* ------------------------------------------------------------------------------------- */
/* message flags, message delete, expunge */

static int run_write(struct mc *mc, int (*fn)(struct store_txn *, void *), struct msg_op *op)
{
	unsigned part;
	int rc;

	if ((rc = store_user_locate(mc->st, op->user, &part)) != 0)
		return mc_fail(mc, rc, "user '%s'", op->user);
	rc = store_write(mc->st, part, fn, op);
	if (rc != 0)
		rc = mc_fail(mc, rc, "mailbox '%s' of user '%s'", op->mailbox, op->user);
	return rc;
}

int mc_msg_flags(struct mc *mc, const struct mc_args *a)
{
	struct uidset *set = xmalloc(sizeof(*set));
	struct msg_op op = { .user = a->pos[0], .mailbox = a->pos[1], .set = set };
	const char *kws[MC_MAX_POS];
	int rc = MC_OK;

	if (uidset_parse(a->pos[2], set) < 0)
		rc = mc_usage(mc, "bad UID set '%s' (e.g. 1:5,7,9:*)", a->pos[2]);
	else if (a->npos > 3) {
		const char *verb = a->pos[3];

		op.fop = strcmp(verb, "add") == 0      ? STORE_FLAGS_ADD
			 : strcmp(verb, "remove") == 0 ? STORE_FLAGS_REMOVE
						       : STORE_FLAGS_SET;
		if (op.fop == STORE_FLAGS_SET && strcmp(verb, "set") != 0)
			rc = mc_usage(mc, "say add, remove or set before the flags");
		for (int i = 4; i < a->npos && rc == MC_OK; i++) {
			unsigned f;

			if (mc_flag_parse(a->pos[i], &f) == 0)
				op.flags |= f;
			else if (a->pos[i][0] == '\\' ||
				 !str_is_safe_line(a->pos[i], strlen(a->pos[i])))
				rc = mc_usage(mc, "unknown system flag '%s'", a->pos[i]);
			else
				kws[op.nkws++] = a->pos[i];
		}
		op.kws = kws;
		if (rc == MC_OK && a->npos == 4 && op.fop != STORE_FLAGS_SET)
			rc = mc_usage(mc, "name the flags to %s", verb);
		if (rc == MC_OK)
			rc = run_write(mc, w_flags, &op);
	}
	if (rc == MC_OK)
		rc = list_set(mc, a->pos[0], a->pos[1], set);
	free(op.uids);
	free(set);
	return rc;
}

static int expunge_run(struct mc *mc, struct msg_op *op)
{
	int rc = run_write(mc, w_expunge, op);

	if (rc != MC_OK)
		return rc;
	if (op->nuids > 1)
		qsort(op->uids, op->nuids, sizeof(*op->uids), uid_cmp);
	if (mc->json) {
		printf("{\"expunged\": %zu, \"uids\": [", op->done);
		for (size_t i = 0; i < op->nuids; i++)
			printf("%s%" PRIu32, i ? ", " : "", op->uids[i]);
		puts("]}");
	} else
		printf("%zu message%s expunged from %s\n", op->done, op->done == 1 ? "" : "s",
		       op->mailbox);
	return MC_OK;
}

int mc_msg_delete(struct mc *mc, const struct mc_args *a)
{
	struct uidset *set = xmalloc(sizeof(*set));
	struct msg_op op = { .user = a->pos[0], .mailbox = a->pos[1], .set = set };
	int rc;

	if (uidset_parse(a->pos[2], set) < 0)
		rc = mc_usage(mc, "bad UID set '%s' (e.g. 1:5,7,9:*)", a->pos[2]);
	else
		rc = expunge_run(mc, &op);
	free(op.uids);
	free(set);
	return rc;
}

int mc_expunge(struct mc *mc, const struct mc_args *a)
{
	struct uidset *set = xmalloc(sizeof(*set));
	struct msg_op op = {
		.user = a->pos[0], .mailbox = a->pos[1], .set = set, .only_deleted = a->set[0]
	};
	int rc;

	if (a->npos > 2) { /* a query selects them */
		free(set);
		if (a->set[0] || a->set[1] || a->set[2])
			return mc_usage(mc, "a query or --deleted/--before/--all, not both");
		return mc_expunge_query(mc, a);
	}
	(void)uidset_parse("1:*", set);
	if (!a->set[0] && !a->set[1] && !a->set[2])
		rc = mc_usage(mc,
			      "say which messages: a query, --deleted, --before DATE, or --all");
	else if (a->set[2] && (a->set[0] || a->set[1]))
		rc = mc_usage(mc, "--all cannot be combined with --deleted or --before");
	else if (a->set[1] && mc_parse_date(a->val[1], &op.before) < 0)
		rc = mc_usage(mc,
			      "bad date '%s' (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or an age "
			      "like 30d)",
			      a->val[1]);
	else
		rc = expunge_run(mc, &op);
	free(op.uids);
	free(set);
	return rc;
}

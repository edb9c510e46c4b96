/* mailctl_search.c — owns the commands that select messages with an IMAP SEARCH query:
 * search (UIDs out), fetch (named fields of each message), copy, move and expunge. The query is
 * parsed by imapd's command parser and compiled by imapd's search key compiler
 * (libheron_imap_search) against a view of the mailbox made here, so mailctl and a client
 * select exactly the same messages. The writes are one store_write each. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/msgcache.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imap_parser.h"
#include "imapd/imapd.h"
#include "mailctl/mailctl.h"

#define QUERY_MAX 65536

/* A mailbox of a user opened for a query: its view and the matching UIDs. */
struct query {
	struct store_txn *t;
	struct store_user u;
	uint64_t mbox;
	unsigned part;
	struct imap_view view;
	uint32_t *uids; /* matching, UID order */
	size_t nuids;
	uint32_t *seqs; /* their sequence numbers */
};

/* The query words as one IMAP command line: a word holding what an atom cannot hold is
   sent as a quoted string, unless it is already a list, a quoted string or a literal. */
static int query_line(struct mc *mc, const char *const *words, int n, struct buf *out)
{
	buf_puts(out, "q SEARCH");
	for (int i = 0; i < n; i++) {
		const char *w = words[i];

		buf_putc(out, ' ');
		if (w[0] == '\0') {
			buf_puts(out, "\"\"");
			continue;
		}
		if (w[0] == '(' || w[0] == '"' || strpbrk(w, " \t\"\\(){") == NULL) {
			buf_puts(out, w); /* an atom, a set, or the caller's own IMAP syntax */
			continue;
		}
		buf_putc(out, '"');
		for (const char *p = w; *p != '\0'; p++) {
			if (*p == '"' || *p == '\\')
				buf_putc(out, '\\');
			buf_putc(out, *p);
		}
		buf_putc(out, '"');
	}
	if (buf_puts(out, "\r\n") < 0)
		return mc_usage(mc, "the query is longer than %u bytes", QUERY_MAX);
	if (memchr(out->data, '\n', out->len - 1) != NULL || memchr(out->data, '\r', out->len - 2))
		return mc_usage(mc, "a query word holds a line break");
	return MC_OK;
}

static void query_close(struct query *q)
{
	store_txn_abort(&q->t);
	free(q->view.msgs);
	free(q->uids);
	free(q->seqs);
	memset(q, 0, sizeof(*q));
}

/* The view of q's mailbox: every message with its flags, in UID order. */
static int view_load(struct mc *mc, struct query *q, const char *mailbox)
{
	struct store_iter *it;
	struct store_msg m;
	int rc;

	q->view.mbox = q->mbox;
	q->view.part = q->part;
	q->view.name = (char *)(uintptr_t)mailbox;
	if ((rc = store_msg_iter(q->t, q->mbox, 1, UINT32_MAX, 0, &it)) != 0)
		return mc_fail(mc, rc, "mailbox '%s' of user '%s'", mailbox, q->u.name);
	while ((rc = store_iter_next(it, &m)) == STORE_ITER_MSG) {
		if (q->view.n == q->view.cap) {
			q->view.cap = q->view.cap ? q->view.cap * 2 : 256;
			q->view.msgs = xreallocarray(q->view.msgs, q->view.cap,
						     sizeof(*q->view.msgs));
		}
		q->view.msgs[q->view.n++] = (struct imap_view_msg){ m.uid, (uint8_t)m.flags,
								    m.keywords };
	}
	store_iter_free(&it);
	if (rc != 0)
		return mc_fail(mc, rc, "reading mailbox '%s'", mailbox);
	return MC_OK;
}

/* Opens user's mailbox and runs the query words on it: q->uids. */
static int query_run(struct mc *mc, const char *user, const char *mailbox,
		     const char *const *words, int nwords, struct query *q)
{
	struct imap_parser_limits lim = { .line_max = QUERY_MAX,
					  .literal_max = 0,
					  .depth_max = IMAP_DEPTH_MAX,
					  .items_max = IMAP_ARGS_MAX };
	struct imap_parser *p;
	struct imap_search *s = NULL;
	struct imap_search_scope sc;
	struct buf line;
	const struct imap_arg *a;
	const char *why = NULL;
	size_t used, n;
	int rc;

	memset(q, 0, sizeof(*q));
	buf_init(&line, 256, QUERY_MAX);
	if ((rc = query_line(mc, words, nwords, &line)) != MC_OK) {
		buf_release(&line);
		return rc;
	}
	if ((rc = mc_begin(mc, user, mailbox, STORE_TXN_READ, &q->t, &q->u, &q->mbox)) != MC_OK) {
		buf_release(&line);
		return rc;
	}
	q->part = STORE_ID_PART(q->u.id);
	if ((rc = view_load(mc, q, mailbox)) != MC_OK) {
		buf_release(&line);
		query_close(q);
		return rc;
	}
	p = imap_parser_new(&lim);
	rc = imap_parser_feed(p, line.data, line.len, &used);
	buf_release(&line);
	if (rc == IMAP_PARSE_LITERAL)
		why = "literals are not taken here: give the string as one (quoted) word";
	else if (rc != IMAP_PARSE_DONE)
		why = rc == IMAP_PARSE_ERROR ? imap_parser_error(p) : "incomplete query";
	else {
		a = imap_parser_args(p, &n);
		sc = (struct imap_search_scope){ mc->st, &q->view, false, 0 };
		s = imap_search_compile(&sc, q->t, a + 1, a + n, &why);
	}
	if (s == NULL) {
		rc = mc_usage(mc, "query '%s': %s", nwords > 0 ? words[0] : "", why);
		imap_parser_free(&p);
		query_close(q);
		return rc;
	}
	q->uids = xcalloc(q->view.n ? q->view.n : 1, sizeof(*q->uids));
	q->seqs = xcalloc(q->view.n ? q->view.n : 1, sizeof(*q->seqs));
	for (size_t vi = 0; vi < q->view.n; vi++) {
		struct store_msg m;

		if (imap_search_match(s, vi, &m)) {
			q->seqs[q->nuids] = (uint32_t)vi + 1;
			q->uids[q->nuids++] = q->view.msgs[vi].uid;
		}
	}
	imap_search_free(&s);
	imap_parser_free(&p);
	return MC_OK;
}

static void print_uids(struct mc *mc, const struct query *q, const char *user, const char *mailbox)
{
	if (!mc->json) {
		for (size_t i = 0; i < q->nuids; i++)
			printf("%" PRIu32 "\n", q->uids[i]);
		return;
	}
	fputs("{\"user\": ", stdout);
	mc_json_str(stdout, user, strlen(user));
	fputs(", \"mailbox\": ", stdout);
	mc_json_str(stdout, mailbox, strlen(mailbox));
	fputs(", \"uids\": [", stdout);
	for (size_t i = 0; i < q->nuids; i++)
		printf("%s%" PRIu32, i ? ", " : "", q->uids[i]);
	puts("]}");
}

int mc_search(struct mc *mc, const struct mc_args *a)
{
	struct query q;
	int rc = query_run(mc, a->pos[0], a->pos[1], a->pos + 2, a->npos - 2, &q);

	if (rc != MC_OK)
		return rc;
	print_uids(mc, &q, a->pos[0], a->pos[1]);
	query_close(&q);
	return MC_OK;
}

/* ---- copy, move, expunge ---- */

/* The messages the words from a->pos[at] select in a->pos[1], its read txn ended: a write
   follows (it takes the partition's writer lock; UIDs gone meanwhile are skipped). */
static int query_for_write(struct mc *mc, const struct mc_args *a, int at, struct query *q)
{
	int rc = query_run(mc, a->pos[0], a->pos[1], a->pos + at, a->npos - at, q);

	if (rc == MC_OK)
		store_txn_abort(&q->t);
	return rc;
}

struct copy_op {
	const char *user, *dst;
	uint64_t src;
	const uint32_t *uids;
	size_t n;
	bool move, create;
	uint32_t *done, *new_uids;
	size_t ndone;
};

static int w_copy(struct store_txn *t, void *arg)
{
	struct copy_op *o = arg;
	struct store_user u;
	uint64_t dst;
	int rc;

	free(o->done);
	free(o->new_uids);
	o->done = o->new_uids = NULL;
	o->ndone = 0;
	if ((rc = store_user_get(t, o->user, &u)) != 0)
		return rc;
	rc = store_mbox_find(t, u.id, o->dst, &dst);
	if (rc == STORE_ENOMBOX && o->create)
		rc = store_mbox_create(t, u.id, o->dst, 0, &dst);
	if (rc != 0)
		return rc;
	if (dst == o->src)
		return STORE_EINVAL;
	return store_msg_copy(t, o->src, dst, o->uids, o->n, o->move, &o->done, &o->new_uids,
			      &o->ndone);
}

static int copy_or_move(struct mc *mc, const struct mc_args *a, bool move)
{
	struct copy_op o = {
		.user = a->pos[0], .dst = a->pos[2], .move = move, .create = a->set[0]
	};
	struct query q;
	int rc = query_for_write(mc, a, 3, &q);

	if (rc != MC_OK)
		return rc;
	o.src = q.mbox;
	o.uids = q.uids;
	o.n = q.nuids;
	if (o.n > 0 && (rc = store_write(mc->st, q.part, w_copy, &o)) != 0)
		rc = rc == STORE_EINVAL ? mc_usage(mc, "the source and the destination are one "
						       "mailbox")
					: mc_fail(mc, rc, "%s to '%s' of user '%s'",
						  move ? "move" : "copy", o.dst, o.user);
	if (rc == MC_OK && mc->json) {
		printf("{\"%s\": %zu, \"uids\": [", move ? "moved" : "copied", o.ndone);
		for (size_t i = 0; i < o.ndone; i++)
			printf("%s{\"from\": %" PRIu32 ", \"to\": %" PRIu32 "}", i ? ", " : "",
			       o.done[i], o.new_uids[i]);
		puts("]}");
	} else if (rc == MC_OK) {
		printf("%s %zu message%s from %s to %s\n", move ? "moved" : "copied", o.ndone,
		       o.ndone == 1 ? "" : "s", a->pos[1], o.dst);
	}
	free(o.done);
	free(o.new_uids);
	query_close(&q);
	return rc;
}

int mc_copy(struct mc *mc, const struct mc_args *a)
{
	return copy_or_move(mc, a, false);
}

int mc_move(struct mc *mc, const struct mc_args *a)
{
	return copy_or_move(mc, a, true);
}

struct expunge_op {
	uint64_t mbox;
	const uint32_t *uids;
	size_t n, done;
};

static int w_expunge(struct store_txn *t, void *arg)
{
	struct expunge_op *o = arg;

	return store_msg_expunge(t, o->mbox, o->uids, o->n, NULL, &o->done);
}

/* expunge USER MAILBOX QUERY...: the messages the query selects. */
int mc_expunge_query(struct mc *mc, const struct mc_args *a)
{
	struct query q;
	struct expunge_op o = { 0 };
	int rc = query_for_write(mc, a, 2, &q);

	if (rc != MC_OK)
		return rc;
	o.mbox = q.mbox;
	o.uids = q.uids;
	o.n = q.nuids;
	if (o.n > 0 && (rc = store_write(mc->st, q.part, w_expunge, &o)) != 0)
		rc = mc_fail(mc, rc, "expunge in '%s' of user '%s'", a->pos[1], a->pos[0]);
	if (rc == MC_OK && mc->json)
		printf("{\"expunged\": %zu}\n", o.done);
	else if (rc == MC_OK)
		printf("expunged %zu message%s\n", o.done, o.done == 1 ? "" : "s");
	query_close(&q);
	return rc;
}

/* ---- fetch ---- */

/* fetch's fields (and hdr.NAME, date.*.unixtime): what each message prints. */
enum field {
	F_USER,
	F_MAILBOX,
	F_UID,
	F_SEQ,
	F_GUID,
	F_FLAGS,
	F_MODSEQ,
	F_SIZE_PHYSICAL,
	F_SIZE_VIRTUAL,
	F_DATE_RECEIVED,
	F_DATE_RECEIVED_UNIX,
	F_DATE_SENT,
	F_DATE_SENT_UNIX,
	F_HDR,
	F_BODY,
	F_TEXT,
	F_ENVELOPE,
	F_IMAP_BODY,
	F_BODYSTRUCTURE,
	F_SNIPPET,
	F_HDR_NAME,
};

static const struct {
	const char *name;
	enum field f;
	bool number;
} field_defs[] = {
	{ "user", F_USER, false },
	{ "mailbox", F_MAILBOX, false },
	{ "uid", F_UID, true },
	{ "seq", F_SEQ, true },
	{ "guid", F_GUID, false },
	{ "flags", F_FLAGS, false },
	{ "modseq", F_MODSEQ, true },
	{ "size.physical", F_SIZE_PHYSICAL, true },
	{ "size.virtual", F_SIZE_VIRTUAL, true },
	{ "date.received", F_DATE_RECEIVED, false },
	{ "date.received.unixtime", F_DATE_RECEIVED_UNIX, true },
	{ "date.sent", F_DATE_SENT, false },
	{ "date.sent.unixtime", F_DATE_SENT_UNIX, true },
	{ "hdr", F_HDR, false },
	{ "body", F_BODY, false },
	{ "text", F_TEXT, false },
	{ "imap.envelope", F_ENVELOPE, false },
	{ "imap.body", F_IMAP_BODY, false },
	{ "imap.bodystructure", F_BODYSTRUCTURE, false },
	{ "body.snippet", F_SNIPPET, false },
};

#define FIELDS_MAX 32

struct fetch_field {
	enum field f;
	char name[80];   /* as printed: the field's name */
	const char *hdr; /* F_HDR_NAME: the header field's name */
	bool number;
};

/* FIELDS: names separated by spaces or commas. */
static int fields_parse(struct mc *mc, const char *text, struct fetch_field *out, size_t *n_r)
{
	struct str_view rest = { text, strlen(text) }, w;
	size_t n = 0;

	while (str_split_ws(&rest, &w)) {
		struct str_view list = w, f;

		while (str_split_next(&list, ',', &f)) {
			size_t k;

			if (f.len == 0)
				continue;
			if (n == FIELDS_MAX || f.len >= sizeof(out[0].name))
				return mc_usage(mc, "too many or too long fields");
			memset(&out[n], 0, sizeof(out[n]));
			memcpy(out[n].name, f.p, f.len);
			for (k = 0; k < sizeof(field_defs) / sizeof(field_defs[0]); k++)
				if (str_caseeq(f.p, f.len, field_defs[k].name,
					       strlen(field_defs[k].name)))
					break;
			if (k < sizeof(field_defs) / sizeof(field_defs[0])) {
				out[n].f = field_defs[k].f;
				out[n].number = field_defs[k].number;
			} else if (f.len > 4 && str_caseprefix(f.p, f.len, "hdr.")) {
				out[n].f = F_HDR_NAME;
				out[n].hdr = out[n].name + 4;
			} else {
				return mc_usage(
					mc,
					"unknown field '%.*s' (user mailbox uid seq guid "
					"flags modseq size.physical size.virtual "
					"date.received[.unixtime] date.sent[.unixtime] hdr "
					"hdr.NAME body text imap.envelope imap.body "
					"imap.bodystructure body.snippet)",
					(int)f.len, f.p);
			}
			n++;
		}
	}
	if (n == 0)
		return mc_usage(mc, "no fields");
	*n_r = n;
	return MC_OK;
}

/* The bytes [off, off + len) of message m's file into out. */
static int read_range(struct mc *mc, const struct query *q, const struct store_msg *m,
		      uint64_t off, uint64_t len, struct buf *out)
{
	int fd, rc;
	uint64_t size;
	char chunk[65536];

	if ((rc = store_blob_open(mc->st, q->part, m->blob, &fd, &size)) != 0)
		return rc;
	if (off > size)
		off = size;
	if (len > size - off)
		len = size - off;
	while (len > 0) {
		ssize_t n = pread(fd, chunk, len < sizeof(chunk) ? (size_t)len : sizeof(chunk),
				  (off_t)off);

		if (n <= 0) {
			close(fd);
			return STORE_EIO;
		}
		buf_append(out, chunk, (size_t)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	close(fd);
	return 0;
}

/* Every value of header field name in the header block hdr, unfolded, one per line. */
static void header_values(const char *hdr, size_t len, const char *name, struct buf *out)
{
	size_t pos = 0;
	struct str_view fname, raw;
	struct buf val;

	buf_init(&val, 256, IMAP_FIELD_MAX);
	while (rfc5322_header_next(hdr, len, &pos, &fname, &raw) == 1) {
		const char *colon;

		if (!str_caseeq(fname.p, fname.len, name, strlen(name)) ||
		    (colon = memchr(raw.p, ':', raw.len)) == NULL)
			continue;
		buf_reset(&val);
		rfc5322_unfold(colon + 1, raw.len - (size_t)(colon + 1 - raw.p), &val);
		struct str_view v = str_trim(
			(struct str_view){ val.data ? val.data : "", val.len });

		if (out->len > 0)
			buf_putc(out, '\n');
		buf_append(out, v.p, v.len);
	}
	buf_release(&val);
}

/* The text of field ff of message (m, seq) into out, number fields in *num_r: 0, -1 when
   the message has no such value (null), or a store error. */
static int field_value(struct mc *mc, const struct query *q, const struct fetch_field *ff,
		       const struct store_msg *m, uint32_t seq, const char *user,
		       const char *mailbox, struct buf *out, uint64_t *num_r)
{
	struct msgcache_view mv;
	bool cached = m->cache_len > 0 && msgcache_parse(m->cache, m->cache_len, &mv) == 0;
	char tmp[400];
	const char *names[STORE_MAX_KEYWORDS];
	unsigned nkw = 0;

	switch (ff->f) {
	case F_USER:
		buf_puts(out, user);
		return 0;
	case F_MAILBOX:
		buf_puts(out, mailbox);
		return 0;
	case F_UID:
		*num_r = m->uid;
		return 0;
	case F_SEQ:
		*num_r = seq;
		return 0;
	case F_GUID:
		buf_printf(out, "M%016" PRIx64, m->blob); /* imapd's EMAILID (OBJECTID) */
		return 0;
	case F_FLAGS:
		store_mbox_keywords(q->t, q->mbox, names, &nkw);
		mc_flags_text(tmp, sizeof(tmp), m->flags, m->keywords, names, nkw);
		buf_puts(out, tmp);
		return 0;
	case F_MODSEQ:
		*num_r = m->modseq;
		return 0;
	case F_SIZE_PHYSICAL:
	case F_SIZE_VIRTUAL:
		*num_r = m->size;
		return 0;
	case F_DATE_RECEIVED:
		mc_fmt_time(tmp, sizeof(tmp), m->internaldate);
		buf_puts(out, tmp);
		return 0;
	case F_DATE_RECEIVED_UNIX:
		*num_r = (uint64_t)m->internaldate;
		return 0;
	case F_DATE_SENT:
	case F_DATE_SENT_UNIX:
		if (!cached || mv.date == INT64_MIN)
			return -1; /* no Date: header: null */
		if (ff->f == F_DATE_SENT_UNIX) {
			*num_r = (uint64_t)mv.date;
			return 0;
		}
		mc_fmt_time(tmp, sizeof(tmp), mv.date);
		buf_puts(out, tmp);
		return 0;
	case F_ENVELOPE:
	case F_IMAP_BODY:
	case F_BODYSTRUCTURE: {
		const struct str_view *v = ff->f == F_ENVELOPE    ? &mv.envelope
					   : ff->f == F_IMAP_BODY ? &mv.body
								  : &mv.bodystructure;

		if (!cached)
			return -1;
		buf_append(out, v->p, v->len);
		return 0;
	}
	case F_HDR:
	case F_BODY:
	case F_TEXT:
	case F_HDR_NAME: {
		uint64_t hsize = cached ? mv.header_size : m->size;
		struct buf hdr;
		int rc;

		if (ff->f == F_TEXT)
			return read_range(mc, q, m, 0, m->size, out);
		if (ff->f == F_BODY)
			return read_range(mc, q, m, hsize, m->size - hsize, out);
		if (ff->f == F_HDR)
			return read_range(mc, q, m, 0, hsize, out);
		buf_init(&hdr, 4096, IMAP_HEADER_READ_MAX);
		rc = read_range(mc, q, m, 0, hsize, &hdr);
		if (rc == 0)
			header_values(hdr.data ? hdr.data : "", hdr.len, ff->hdr, out);
		buf_release(&hdr);
		return rc;
	}
	case F_SNIPPET: {
		int fd, rc;
		uint64_t size;

		if ((rc = store_blob_open(mc->st, q->part, m->blob, &fd, &size)) != 0)
			return rc;
		imap_text_preview(fd, size, out);
		close(fd);
		return 0;
	}
	}
	return -1;
}

static void fetch_print(struct mc *mc, const struct fetch_field *ff, size_t nf, struct buf *vals,
			const uint64_t *nums, const bool *null, bool first)
{
	if (mc->json) {
		fputs(first ? "[{" : ",\n {", stdout);
		for (size_t i = 0; i < nf; i++) {
			printf("%s", i ? ", " : "");
			mc_json_str(stdout, ff[i].name, strlen(ff[i].name));
			fputs(": ", stdout);
			if (null[i])
				fputs("null", stdout);
			else if (ff[i].number)
				printf("%" PRIu64, nums[i]);
			else
				mc_json_str(stdout, vals[i].data ? vals[i].data : "", vals[i].len);
		}
		putchar('}');
		return;
	}
	if (!first)
		putchar('\n'); /* a blank line between messages */
	for (size_t i = 0; i < nf; i++) {
		bool multi = ff[i].f == F_HDR || ff[i].f == F_BODY || ff[i].f == F_TEXT ||
			     memchr(vals[i].data ? vals[i].data : "", '\n', vals[i].len) != NULL;

		printf("%s:%s", ff[i].name, multi ? "\n" : " ");
		if (null[i])
			fputs("-", stdout);
		else if (ff[i].number)
			printf("%" PRIu64, nums[i]);
		else
			fwrite(vals[i].data ? vals[i].data : "", 1, vals[i].len, stdout);
		if (!multi || vals[i].len == 0 || vals[i].data[vals[i].len - 1] != '\n')
			putchar('\n');
	}
}

int mc_fetch(struct mc *mc, const struct mc_args *a)
{
	struct fetch_field ff[FIELDS_MAX];
	struct buf vals[FIELDS_MAX];
	uint64_t nums[FIELDS_MAX];
	bool null[FIELDS_MAX];
	struct query q;
	size_t nf = 0, shown = 0;
	int rc;

	if ((rc = fields_parse(mc, a->pos[a->npos - 1], ff, &nf)) != MC_OK)
		return rc;
	if ((rc = query_run(mc, a->pos[0], a->pos[1], a->pos + 2, a->npos - 3, &q)) != MC_OK)
		return rc;
	for (size_t i = 0; i < nf; i++)
		buf_init(&vals[i], 256, BUF_INPUT_BOUNDED); /* a message's size bounds it */
	for (size_t k = 0; k < q.nuids && rc == MC_OK; k++) {
		struct store_msg m;
		int err = store_msg_get(q.t, q.mbox, q.uids[k], &m);

		if (err == STORE_ENOMSG)
			continue;
		if (err != 0) {
			rc = mc_fail(mc, err, "message %" PRIu32, q.uids[k]);
			break;
		}
		for (size_t i = 0; i < nf && rc == MC_OK; i++) {
			buf_reset(&vals[i]);
			nums[i] = 0;
			err = field_value(mc, &q, &ff[i], &m, q.seqs[k], a->pos[0], a->pos[1],
					  &vals[i], &nums[i]);
			null[i] = err == -1;
			if (err > 0)
				rc = mc_fail(mc, err, "reading message %" PRIu32, q.uids[k]);
		}
		if (rc == MC_OK)
			fetch_print(mc, ff, nf, vals, nums, null, shown++ == 0);
	}
	if (mc->json && rc == MC_OK)
		puts(shown == 0 ? "[]" : "]");
	for (size_t i = 0; i < nf; i++)
		buf_release(&vals[i]);
	query_close(&q);
	return rc;
}

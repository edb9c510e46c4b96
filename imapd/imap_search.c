/* imap_search.c — owns search keys (RFC 3501 SEARCH-KEY, WITHIN, MODSEQ, SEARCHRES "$"):
 * compiled into a small tree (OR, NOT, parenthesized lists) and evaluated per message against
 * the view (flags, \Recent, sequence numbers), the message row (dates, size, UID) and the
 * cached header block (the file's where the cache cut it: imap_msgfile.c); BODY and TEXT read
 * the message file in bounded chunks. The commands
 * that take keys (SEARCH, UID SEARCH) are cmd_search.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mimetext.h"
#include "common/msgcache.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define SEARCH_DEPTH_MAX 64
#define SEARCH_NODES_MAX 512
#define SK_ADDRESS 1u /* skey flag of FROM TO CC BCC: addresses are matched as parsed */

enum skey_type {
	SK_ALL,
	SK_FLAG,
	SK_NOFLAG,
	SK_KEYWORD,
	SK_NOKEYWORD,
	SK_RECENT,
	SK_NEW,
	SK_OLD,
	SK_BEFORE,
	SK_ON,
	SK_SINCE,
	SK_SENTBEFORE,
	SK_SENTON,
	SK_SENTSINCE,
	SK_LARGER,
	SK_SMALLER,
	SK_HEADER,
	SK_BODY,
	SK_TEXT,
	SK_SEQ,
	SK_UID,
	SK_NOT,
	SK_OR,
	SK_AND,
	SK_MODSEQ,
	SK_OLDER,
	SK_YOUNGER,
	SK_EMAILID,
	SK_NEVER,
	SK_SAVEDBEFORE,
	SK_SAVEDON,
	SK_SAVEDSINCE,
};

struct skey {
	enum skey_type type;
	unsigned flag;
	uint64_t num;
	int64_t day;             /* days since the epoch */
	const char *hname, *str; /* header name; needle (str: while compiling only) */
	char *fold;              /* the needle case-folded (mimetext_fold) */
	char *own;               /* HEADER: the header name; KEYWORD: a name the mailbox did
				    not have yet (looked up again by imap_search_rebind) */
	size_t hlen, slen;
	struct imap_seqset set;
	struct skey *a, *b; /* NOT: a; OR: a, b; AND: a = first child */
	/* BODY/TEXT: the messages the full-text index says may hold the needle (sorted UIDs),
	   asked at the first use; CAND_ALL when it cannot say (every message is read) */
	enum { CAND_UNKNOWN, CAND_SOME, CAND_ALL } cand_state;
	uint32_t *cand;
	size_t ncand;
	struct skey *next; /* sibling in an AND */
};

struct imap_search {
	struct imap_search_scope sc;
	bool modseq_used;    /* a MODSEQ key: the reply names the highest modseq */
	struct store_txn *t; /* borrowed: keywords at compile time, messages at match */
	struct skey nodes[SEARCH_NODES_MAX];
	size_t nnodes;
	struct skey *root;
	const char *why;
	struct imap_textmatch *tm; /* BODY/TEXT: made at the first use */
	struct imap_msgfile mf;    /* the message's cache or header read from its file */
	const struct store_msg *m; /* the message being matched (header_of) */
};

static struct skey *node_new(struct imap_search *s, enum skey_type type)
{
	struct skey *k;

	if (s->nnodes >= SEARCH_NODES_MAX) {
		s->why = "Search too complex";
		return NULL;
	}
	k = &s->nodes[s->nnodes++];
	memset(k, 0, sizeof(*k));
	k->type = type;
	return k;
}

/* "1-Feb-1994" to days since the epoch. */
static int parse_date(const struct imap_arg *a, int64_t *day_r)
{
	static const char mon[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	char m[4], buf[16];
	int d, y, n = 0;
	struct tm tm = { 0 };
	const char *p;

	if (a == NULL || !imap_arg_is_astring(a) || a->len >= sizeof(buf))
		return -1;
	memcpy(buf, a->s, a->len);
	buf[a->len] = '\0';
	if (sscanf(buf, "%2d-%3c-%4d%n", &d, m, &y, &n) != 3 || (size_t)n != a->len)
		return -1;
	m[3] = '\0';
	for (int i = 0; i < 3; i++)
		m[i] = (char)(i == 0 ? (m[i] & ~0x20) : (m[i] | 0x20));
	if ((p = strstr(mon, m)) == NULL || (p - mon) % 3 != 0 || d < 1 || d > 31)
		return -1;
	tm.tm_mday = d;
	tm.tm_mon = (int)(p - mon) / 3;
	tm.tm_year = y - 1900;
	*day_r = (int64_t)timegm(&tm) / 86400;
	return 0;
}

static const struct {
	const char *name;
	enum skey_type type;
	unsigned flag;
} simple_keys[] = {
	{ "ALL", SK_ALL, 0 },
	{ "ANSWERED", SK_FLAG, STORE_ANSWERED },
	{ "UNANSWERED", SK_NOFLAG, STORE_ANSWERED },
	{ "DELETED", SK_FLAG, STORE_DELETED },
	{ "UNDELETED", SK_NOFLAG, STORE_DELETED },
	{ "DRAFT", SK_FLAG, STORE_DRAFT },
	{ "UNDRAFT", SK_NOFLAG, STORE_DRAFT },
	{ "FLAGGED", SK_FLAG, STORE_FLAGGED },
	{ "UNFLAGGED", SK_NOFLAG, STORE_FLAGGED },
	{ "SEEN", SK_FLAG, STORE_SEEN },
	{ "UNSEEN", SK_NOFLAG, STORE_SEEN },
	{ "RECENT", SK_RECENT, 0 },
	{ "NEW", SK_NEW, 0 },
	{ "OLD", SK_OLD, 0 },
	/* RFC 8514 4.3: every mailbox here keeps save dates */
	{ "SAVEDATESUPPORTED", SK_ALL, 0 },
};

static const struct {
	const char *name;
	enum skey_type type;
} date_keys[] = {
	{ "BEFORE", SK_BEFORE },
	{ "ON", SK_ON },
	{ "SINCE", SK_SINCE },
	{ "SENTBEFORE", SK_SENTBEFORE },
	{ "SENTON", SK_SENTON },
	{ "SENTSINCE", SK_SENTSINCE },
	{ "SAVEDBEFORE", SK_SAVEDBEFORE },
	{ "SAVEDON", SK_SAVEDON },
	{ "SAVEDSINCE", SK_SAVEDSINCE },
};

static const char *const header_keys[] = { "FROM", "TO", "CC", "BCC", "SUBJECT" };

static struct skey *parse_key(struct imap_search *s, const struct imap_arg **ap,
			      const struct imap_arg *end, unsigned depth);

static const struct imap_arg *take(const struct imap_arg **ap, const struct imap_arg *end)
{
	const struct imap_arg *a = *ap;

	if (a >= end)
		return NULL;
	*ap = imap_arg_next(a);
	return a;
}

static struct skey *parse_string_key(struct imap_search *s, const struct imap_arg **ap,
				     const struct imap_arg *end, const char *name)
{
	const struct imap_arg *a;
	struct skey *k;

	if (strcmp(name, "HEADER") == 0) {
		const struct imap_arg *h = take(ap, end);

		if (h == NULL || !imap_arg_is_astring(h) || h->len == 0)
			goto bad;
		if ((k = node_new(s, SK_HEADER)) == NULL)
			return NULL;
		k->hname = k->own = xmemdup0(h->s, h->len); /* kept past the command */
		k->hlen = h->len;
	} else {
		if ((k = node_new(s, strcmp(name, "BODY") == 0   ? SK_BODY
				     : strcmp(name, "TEXT") == 0 ? SK_TEXT
								 : SK_HEADER)) == NULL)
			return NULL;
		k->hname = name;
		k->hlen = strlen(name);
		if (strcmp(name, "SUBJECT") != 0 && k->type == SK_HEADER)
			k->flag = SK_ADDRESS;
	}
	if ((a = take(ap, end)) == NULL || !imap_arg_is_astring(a))
		goto bad;
	k->str = a->s;
	k->slen = a->len;
	k->fold = xmemdup0(a->s, a->len);
	mimetext_fold(k->fold, a->len);
	return k;
bad:
	s->why = "Search key needs a string";
	return NULL;
}

static struct skey *parse_list(struct imap_search *s, const struct imap_arg *list, unsigned depth)
{
	const struct imap_arg *p = list + 1, *end = list + 1 + list->span;
	struct skey *and = node_new(s, SK_AND), **tail;

	if (and == NULL)
		return NULL;
	tail = &and->a;
	while (p < end) {
		struct skey *k = parse_key(s, &p, end, depth + 1);

		if (k == NULL)
			return NULL;
		*tail = k;
		tail = &k->next;
	}
	if (and->a == NULL) {
		s->why = "Empty search list";
		return NULL;
	}
	return and;
}

/* A sequence set as a key ("2:4,7"): numbers past EXISTS match nothing. */
static struct skey *parse_seq_key(struct imap_search *s, const struct imap_arg *a)
{
	struct skey *k = node_new(s, SK_SEQ);

	if (k == NULL)
		return NULL;
	if (imap_view_set_resolve_key(s->sc.view, a->s, a->len, &k->set) < 0) {
		s->why = "Invalid sequence set";
		return NULL;
	}
	return k;
}

static const struct {
	const char *name;
	enum skey_type type;
	uint64_t max;
	const char *why;
} number_keys[] = {
	{ "LARGER", SK_LARGER, UINT64_MAX / 2, "Invalid size" },
	{ "SMALLER", SK_SMALLER, UINT64_MAX / 2, "Invalid size" },
	/* WITHIN (RFC 5032): an interval in seconds against the internal date */
	{ "OLDER", SK_OLDER, UINT32_MAX, "Invalid interval" },
	{ "YOUNGER", SK_YOUNGER, UINT32_MAX, "Invalid interval" },
};

static struct skey *parse_number_key(struct imap_search *s, const struct imap_arg *v, size_t i)
{
	struct skey *k = node_new(s, number_keys[i].type);

	if (k == NULL)
		return NULL;
	if (v == NULL || v->type != IMAP_ARG_ATOM ||
	    str_to_u64(v->s, v->len, number_keys[i].max, &k->num) < 0 ||
	    (k->num == 0 && number_keys[i].max == UINT32_MAX)) {
		s->why = number_keys[i].why;
		return NULL;
	}
	if (k->type == SK_OLDER || k->type == SK_YOUNGER)
		k->day = (int64_t)time(NULL) - (int64_t)k->num; /* the cut-off time */
	return k;
}

/* MODSEQ [entry-name entry-type] n (RFC 7162): all flags share one modseq here. */
static struct skey *parse_modseq_key(struct imap_search *s, const struct imap_arg **ap,
				     const struct imap_arg *end)
{
	struct skey *k = node_new(s, SK_MODSEQ);
	const struct imap_arg *v = take(ap, end);

	if (k == NULL)
		return NULL;
	if (v != NULL && imap_arg_is_string(v)) {
		v = take(ap, end); /* entry-type */
		if (v == NULL || !(imap_arg_atom_is(v, "priv") || imap_arg_atom_is(v, "shared") ||
				   imap_arg_atom_is(v, "all"))) {
			s->why = "Invalid MODSEQ entry type";
			return NULL;
		}
		v = take(ap, end);
	}
	if (v == NULL || v->type != IMAP_ARG_ATOM ||
	    str_to_u64(v->s, v->len, INT64_MAX, &k->num) < 0) {
		s->why = "Invalid MODSEQ";
		return NULL;
	}
	s->modseq_used = true;
	return k;
}

/* EMAILID id / THREADID id (RFC 8474 6): an EMAILID names a blob; no message has a THREADID. */
static struct skey *parse_objectid_key(struct imap_search *s, const char *name,
				       const struct imap_arg *v)
{
	struct skey *k = node_new(s, name[0] == 'E' ? SK_EMAILID : SK_NEVER);
	uint64_t blob = 0;

	if (k == NULL)
		return NULL;
	if (v == NULL || v->type != IMAP_ARG_ATOM || v->len > 255) {
		s->why = "Invalid object id";
		return NULL;
	}
	for (size_t i = 0; i < v->len; i++) {
		int h = str_hex_digit((unsigned char)v->s[i]);

		if (!((v->s[i] >= 'A' && v->s[i] <= 'Z') || (v->s[i] >= 'a' && v->s[i] <= 'z') ||
		      (v->s[i] >= '0' && v->s[i] <= '9') || v->s[i] == '_' || v->s[i] == '-')) {
			s->why = "Invalid object id";
			return NULL;
		}
		if (i > 0 && h >= 0)
			blob = blob << 4 | (uint64_t)h;
		else if (i > 0)
			k->type = SK_NEVER;
	}
	/* "M" and 16 hex digits is one of ours; anything else matches nothing */
	if (v->len != 17 || v->s[0] != 'M')
		k->type = SK_NEVER;
	k->num = blob;
	return k;
}

/* KEYWORD kw / UNKEYWORD kw / UID set. */
static struct skey *parse_arg_key(struct imap_search *s, const char *name,
				  const struct imap_arg *v)
{
	struct skey *k;
	const char *why;
	unsigned idx;

	if (strcmp(name, "UID") == 0) {
		if ((k = node_new(s, SK_UID)) == NULL)
			return NULL;
		if (v == NULL || v->type != IMAP_ARG_ATOM ||
		    imap_view_set_resolve(s->sc.view, v->s, v->len, true, &k->set, &why) < 0) {
			s->why = "Invalid UID set";
			return NULL;
		}
		return k;
	}
	if ((k = node_new(s, name[0] == 'K' ? SK_KEYWORD : SK_NOKEYWORD)) == NULL)
		return NULL;
	if (v == NULL || v->type != IMAP_ARG_ATOM) {
		s->why = "KEYWORD needs a flag";
		return NULL;
	}
	if (store_mbox_keyword(s->t, s->sc.view->mbox, v->s, false, &idx) == 0)
		k->num = (uint64_t)1 << idx;
	else
		k->own = xmemdup0(v->s, v->len);
	return k; /* num 0: a keyword the mailbox never had */
}

/* Every key named by an atom except NOT and OR; *known false when the name is not one. */
static struct skey *parse_named_key(struct imap_search *s, const char *name,
				    const struct imap_arg **ap, const struct imap_arg *end,
				    bool *known)
{
	struct skey *k;

	*known = true;
	for (size_t i = 0; i < sizeof(simple_keys) / sizeof(simple_keys[0]); i++)
		if (strcmp(name, simple_keys[i].name) == 0) {
			if ((k = node_new(s, simple_keys[i].type)) != NULL)
				k->flag = simple_keys[i].flag;
			return k;
		}
	for (size_t i = 0; i < sizeof(date_keys) / sizeof(date_keys[0]); i++)
		if (strcmp(name, date_keys[i].name) == 0) {
			if ((k = node_new(s, date_keys[i].type)) != NULL &&
			    parse_date(take(ap, end), &k->day) < 0) {
				s->why = "Invalid search date";
				return NULL;
			}
			return k;
		}
	for (size_t i = 0; i < sizeof(number_keys) / sizeof(number_keys[0]); i++)
		if (strcmp(name, number_keys[i].name) == 0)
			return parse_number_key(s, take(ap, end), i);
	for (size_t i = 0; i < sizeof(header_keys) / sizeof(header_keys[0]); i++)
		if (strcmp(name, header_keys[i]) == 0)
			return parse_string_key(s, ap, end, header_keys[i]);
	if (strcmp(name, "HEADER") == 0)
		return parse_string_key(s, ap, end, "HEADER");
	if (strcmp(name, "BODY") == 0)
		return parse_string_key(s, ap, end, "BODY");
	if (strcmp(name, "TEXT") == 0)
		return parse_string_key(s, ap, end, "TEXT");
	if (strcmp(name, "MODSEQ") == 0)
		return parse_modseq_key(s, ap, end);
	if (strcmp(name, "EMAILID") == 0 || strcmp(name, "THREADID") == 0)
		return parse_objectid_key(s, name, take(ap, end));
	if (strcmp(name, "KEYWORD") == 0 || strcmp(name, "UNKEYWORD") == 0 ||
	    strcmp(name, "UID") == 0)
		return parse_arg_key(s, name, take(ap, end));
	*known = false;
	return NULL;
}

static struct skey *parse_key(struct imap_search *s, const struct imap_arg **ap,
			      const struct imap_arg *end, unsigned depth)
{
	const struct imap_arg *a = take(ap, end);
	struct skey *k;
	char name[24];
	bool known;

	if (a == NULL || depth > SEARCH_DEPTH_MAX) {
		s->why = a == NULL ? "Missing search key" : "Search nested too deeply";
		return NULL;
	}
	if (a->type == IMAP_ARG_LIST)
		return parse_list(s, a, depth);
	if (a->type != IMAP_ARG_ATOM || a->len >= sizeof(name)) {
		s->why = "Unknown search key";
		return NULL;
	}
	if ((a->s[0] >= '0' && a->s[0] <= '9') || a->s[0] == '*')
		return parse_seq_key(s, a);
	if (a->len == 1 && a->s[0] == '$') { /* SEARCHRES: the saved result */
		if ((k = node_new(s, SK_UID)) != NULL)
			imap_view_set_resolve(s->sc.view, "$", 1, true, &k->set, NULL);
		return k;
	}
	memcpy(name, a->s, a->len);
	name[a->len] = '\0';
	for (char *p = name; *p; p++)
		*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	if (s->sc.rev2 && (strcmp(name, "RECENT") == 0 || strcmp(name, "NEW") == 0 ||
			   strcmp(name, "OLD") == 0)) {
		s->why = "IMAP4rev2 has no \\Recent";
		return NULL;
	}
	k = parse_named_key(s, name, ap, end, &known);
	if (known)
		return k;
	if (strcmp(name, "NOT") == 0) {
		if ((k = node_new(s, SK_NOT)) == NULL ||
		    (k->a = parse_key(s, ap, end, depth + 1)) == NULL)
			return NULL;
		return k;
	}
	if (strcmp(name, "OR") == 0) {
		if ((k = node_new(s, SK_OR)) == NULL ||
		    (k->a = parse_key(s, ap, end, depth + 1)) == NULL ||
		    (k->b = parse_key(s, ap, end, depth + 1)) == NULL)
			return NULL;
		return k;
	}
	s->why = "Unknown search key";
	return NULL;
}

/* Whether the full-text index leaves uid possible for BODY/TEXT key k. */
static bool text_candidate(struct imap_search *s, struct skey *k, uint32_t uid)
{
	size_t lo = 0, hi;

	if (k->cand_state == CAND_UNKNOWN) {
		k->cand_state = store_fts_candidates(s->t, s->sc.view->mbox, k->fold, k->slen,
						     &k->cand, &k->ncand) == 0
					? CAND_SOME
					: CAND_ALL;
		log_debug("%016" PRIx64 " imap search fts=%s candidates=%zu of %zu", s->sc.id,
			  k->cand_state == CAND_SOME ? "yes" : "no", k->ncand, s->sc.view->n);
	}
	if (k->cand_state == CAND_ALL)
		return true;
	hi = k->ncand;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->cand[mid] == uid)
			return true;
		if (k->cand[mid] < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* False when the keys surely do not match uid by what the full-text index says (no row or
   file read); true when they may. */
static bool may_match(struct imap_search *s, struct skey *k, uint32_t uid)
{
	switch (k->type) {
	case SK_BODY:
	case SK_TEXT:
		return k->slen == 0 || text_candidate(s, k, uid);
	case SK_AND:
		for (struct skey *c = k->a; c != NULL; c = c->next)
			if (!may_match(s, c, uid))
				return false;
		return true;
	case SK_OR:
		return may_match(s, k->a, uid) || may_match(s, k->b, uid);
	default:
		return true;
	}
}

/* BODY/TEXT: the folded needle in the message's decoded text (imap_textmatch.c), for a
   message the index did not rule out. */
static bool text_contains(struct imap_search *s, const struct store_msg *m, const struct skey *k,
			  bool top)
{
	int fd;
	uint64_t size;
	bool found;

	if (k->slen == 0)
		return true;
	if (!text_candidate(s, (struct skey *)(uintptr_t)k, m->uid))
		return false;
	if (store_blob_open(s->sc.store, s->sc.view->part, m->blob, &fd, &size) != 0)
		return false;
	if (s->tm == NULL)
		s->tm = imap_textmatch_new();
	found = imap_textmatch_file(s->tm, fd, size, k->fold, k->slen, top);
	close(fd);
	return found;
}

struct addr_match {
	const struct skey *k;
	struct buf text;
	bool found;
};

static void addr_match_cb(void *arg, const struct rfc5322_addr *a)
{
	struct addr_match *am = arg;

	if (am->found || a->is_group_start || a->is_group_end)
		return;
	buf_reset(&am->text);
	if (a->name.len > 0)
		buf_printf(&am->text, "%.*s ", (int)a->name.len, a->name.p);
	buf_printf(&am->text, "<%.*s", (int)a->mailbox.len, a->mailbox.p);
	if (a->domain.len > 0)
		buf_printf(&am->text, "@%.*s", (int)a->domain.len, a->domain.p);
	buf_puts(&am->text, ">");
	am->found = imap_text_field_contains(am->text.data, am->text.len, am->k->fold,
					     am->k->slen);
}

/* FROM/TO/CC/BCC also match the addresses as parsed, the way ENVELOPE shows them:
   "Name <local@domain>" without comments, routes or quoting, so
   "<user (comment)@ (comment) domain.org>" matches user@domain.org. */
static bool addresses_contain(const char *value, size_t len, const struct skey *k)
{
	struct addr_match am = { .k = k };
	struct buf unfolded;

	buf_init(&unfolded, 256, IMAP_HEADER_READ_MAX);
	buf_init(&am.text, 128, IMAP_FIELD_MAX);
	if (rfc5322_unfold(value, len, &unfolded) == 0 && unfolded.len > 0)
		rfc5322_addr_parse(unfolded.data, unfolded.len, addr_match_cb, &am);
	buf_release(&am.text);
	buf_release(&unfolded);
	return am.found;
}

/* The whole header of the message being matched: the cache's, or the file's where the
   cache's was cut. */
static struct str_view header_of(struct imap_search *s, const struct msgcache_view *mv)
{
	struct str_view h;

	(void)imap_msgfile_header(s->sc.store, s->sc.view->part, s->m, mv, &s->mf, &h);
	return h;
}

static bool header_contains(struct imap_search *s, const struct msgcache_view *mv,
			    const struct skey *k)
{
	size_t pos = 0;
	struct str_view fname, raw, h = header_of(s, mv);

	while (rfc5322_header_next(h.p, h.len, &pos, &fname, &raw) == 1) {
		const char *colon;
		size_t vlen;

		if (!str_caseeq(fname.p, fname.len, k->hname, k->hlen))
			continue;
		if (k->slen == 0)
			return true;
		colon = memchr(raw.p, ':', raw.len);
		if (colon == NULL)
			continue;
		vlen = raw.len - (size_t)(colon + 1 - raw.p);
		if (imap_text_field_contains(colon + 1, vlen, k->fold, k->slen) ||
		    (k->flag == SK_ADDRESS && addresses_contain(colon + 1, vlen, k)))
			return true;
	}
	return false;
}

/* The day of the Date: header in its own time zone (RFC 3501: SENT* disregard the time and
   the zone), INT64_MIN when there is none. */
static int64_t sent_day(const struct msgcache_view *mv)
{
	int64_t t;

	if (mv->date == INT64_MIN)
		return INT64_MIN;
	t = mv->date + (int64_t)mv->date_tz * 60;
	return t >= 0 ? t / 86400 : (t - 86399) / 86400;
}

/* The date keys: internal date (BEFORE ON SINCE OLDER YOUNGER), Date: header (SENT*) or save
   date (SAVED*, RFC 8514). */
static bool eval_date(const struct skey *k, const struct store_msg *m,
		      const struct msgcache_view *mv)
{
	int64_t iday = m->internaldate >= 0 ? m->internaldate / 86400 : -1;
	int64_t vday = m->savedate >= 0 ? m->savedate / 86400 : -1;
	int64_t sday = sent_day(mv);

	switch (k->type) {
	case SK_OLDER:
		return m->internaldate <= k->day; /* day holds the cut-off time here */
	case SK_YOUNGER:
		return m->internaldate >= k->day;
	case SK_BEFORE:
		return iday < k->day;
	case SK_ON:
		return iday == k->day;
	case SK_SINCE:
		return iday >= k->day;
	case SK_SENTBEFORE:
		return sday != INT64_MIN && sday < k->day;
	case SK_SENTON:
		return sday != INT64_MIN && sday == k->day;
	case SK_SENTSINCE:
		return sday != INT64_MIN && sday >= k->day;
	case SK_SAVEDBEFORE:
		return vday < k->day;
	case SK_SAVEDON:
		return vday == k->day;
	case SK_SAVEDSINCE:
		return vday >= k->day;
	default:
		return false;
	}
}

/* The flag keys: system flags, keywords, \Recent (per session: vflags). */
static bool eval_flag(const struct skey *k, const struct store_msg *m, unsigned vflags)
{
	switch (k->type) {
	case SK_FLAG:
		return (m->flags & k->flag) != 0;
	case SK_NOFLAG:
		return (m->flags & k->flag) == 0;
	case SK_KEYWORD:
		return (m->keywords & k->num) != 0;
	case SK_NOKEYWORD:
		return (m->keywords & k->num) == 0 || k->num == 0;
	case SK_RECENT:
		return (vflags & IMAP_VF_RECENT) != 0;
	case SK_NEW:
		return (vflags & IMAP_VF_RECENT) && !(m->flags & STORE_SEEN);
	case SK_OLD:
		return !(vflags & IMAP_VF_RECENT);
	default:
		return false;
	}
}

static bool eval(struct imap_search *s, const struct skey *k, const struct store_msg *m,
		 const struct msgcache_view *mv, uint32_t seq, unsigned vflags)
{
	switch (k->type) {
	case SK_ALL:
		return true;
	case SK_MODSEQ:
		return m->modseq >= k->num;
	case SK_EMAILID:
		return m->blob == k->num;
	case SK_NEVER:
		return false;
	case SK_FLAG:
	case SK_NOFLAG:
	case SK_KEYWORD:
	case SK_NOKEYWORD:
	case SK_RECENT:
	case SK_NEW:
	case SK_OLD:
		return eval_flag(k, m, vflags);
	case SK_OLDER:
	case SK_YOUNGER:
	case SK_BEFORE:
	case SK_ON:
	case SK_SINCE:
	case SK_SENTBEFORE:
	case SK_SENTON:
	case SK_SENTSINCE:
	case SK_SAVEDBEFORE:
	case SK_SAVEDON:
	case SK_SAVEDSINCE:
		return eval_date(k, m, mv);
	case SK_LARGER:
		return m->size > k->num;
	case SK_SMALLER:
		return m->size < k->num;
	case SK_HEADER:
		return header_contains(s, mv, k);
	case SK_BODY:
		return text_contains(s, m, k, false);
	case SK_TEXT:
		return text_contains(s, m, k, true);
	case SK_SEQ:
		return imap_seqset_has(&k->set, m->uid); /* resolved to UIDs */
	case SK_UID:
		return imap_seqset_has(&k->set, m->uid);
	case SK_NOT:
		return !eval(s, k->a, m, mv, seq, vflags);
	case SK_OR:
		return eval(s, k->a, m, mv, seq, vflags) || eval(s, k->b, m, mv, seq, vflags);
	case SK_AND:
		for (const struct skey *c = k->a; c != NULL; c = c->next)
			if (!eval(s, c, m, mv, seq, vflags))
				return false;
		return true;
	}
	return false;
}

void imap_search_free(struct imap_search **sp)
{
	struct imap_search *s = *sp;

	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nnodes; i++) {
		imap_seqset_release(&s->nodes[i].set);
		free(s->nodes[i].fold);
		free(s->nodes[i].own);
		free(s->nodes[i].cand);
	}
	imap_textmatch_free(&s->tm);
	imap_msgfile_release(&s->mf);
	free(s);
	*sp = NULL;
}

struct imap_search *imap_search_compile(const struct imap_search_scope *sc, struct store_txn *t,
					const struct imap_arg *p, const struct imap_arg *end,
					const char **why_r)
{
	struct imap_search *s = xcalloc(1, sizeof(*s));
	struct skey **tail;

	s->sc = *sc;
	s->t = t;
	s->root = node_new(s, SK_AND);
	tail = &s->root->a;
	if (p >= end)
		s->why = "Missing search key";
	while (p < end && s->why == NULL) {
		struct skey *k = parse_key(s, &p, end, 0);

		if (k == NULL)
			break;
		*tail = k;
		tail = &k->next;
	}
	if (s->why != NULL) {
		*why_r = s->why;
		imap_search_free(&s);
	}
	return s;
}

void imap_search_rebind(struct imap_search *s, struct store_txn *t)
{
	s->t = t;
	for (size_t i = 0; i < s->nnodes; i++) {
		struct skey *k = &s->nodes[i];
		unsigned idx;

		if ((k->type == SK_KEYWORD || k->type == SK_NOKEYWORD) && k->num == 0 &&
		    k->own != NULL &&
		    store_mbox_keyword(t, s->sc.view->mbox, k->own, false, &idx) == 0)
			k->num = (uint64_t)1 << idx;
		if (k->cand_state != CAND_UNKNOWN) { /* messages came since: ask the index again */
			free(k->cand);
			k->cand = NULL;
			k->ncand = 0;
			k->cand_state = CAND_UNKNOWN;
		}
	}
}

bool imap_search_is_all(const struct imap_search *s)
{
	return s->root->a != NULL && s->root->a->type == SK_ALL && s->root->a->next == NULL;
}

bool imap_search_uses_modseq(const struct imap_search *s)
{
	return s->modseq_used;
}

bool imap_search_match(struct imap_search *s, size_t vi, struct store_msg *m_r)
{
	const struct imap_view *v = s->sc.view;
	struct msgcache_view mv;

	if (!may_match(s, s->root, v->msgs[vi].uid)) {
		memset(m_r, 0, sizeof(*m_r));
		m_r->uid = v->msgs[vi].uid;
		return false;
	}
	if (store_msg_get(s->t, v->mbox, v->msgs[vi].uid, m_r) != 0 ||
	    (v->viewer != NULL && store_seen_apply(s->t, v->mbox, v->viewer, m_r) != 0))
		return false;
	/* no cache (an older store's "too big to cache"), or a damaged one: built from the file */
	(void)imap_msgfile_cache(s->sc.store, v->part, m_r, &s->mf, &mv);
	s->m = m_r;
	return eval(s, s->root, m_r, &mv, (uint32_t)vi + 1, v->msgs[vi].flags);
}

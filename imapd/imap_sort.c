/* imap_sort.c — owns SORT and THREAD's message keys and algorithms (RFC 5256, RFC 5957): the
 * base subject extraction, the first address's mailbox and display name, the sent date; the
 * multi-key sort; THREAD=ORDEREDSUBJECT, THREAD=REFERENCES (message-id links, dummy pruning,
 * subject grouping) and THREAD=REFS (the same links, no subject grouping, threads ordered by
 * their latest message); and the THREAD response's nesting. Keys are read from the message
 * cache's header block (no message file is opened). The commands are cmd_sort.c. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/msgcache.h"
#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "common/mimetext.h"
#include "imapd/imapd.h"
#include "store/store.h"

#define SORT_FIELD_MAX (64 * 1024) /* a header value read for a key */

struct sort_msg {
	uint32_t seq, uid;
	int64_t date; /* sent date (Date:, else the internal date), UTC */
	int64_t arrival;
	uint64_t size;
	char *subject;        /* base subject, ASCII upper-cased (i;ascii-casemap) */
	bool reply;           /* the subject said Re:, Fwd:, (fwd) or [fwd: ...] */
	char *from, *to, *cc; /* first address's mailbox, upper-cased */
	char *dfrom, *dto;    /* RFC 5957 display names, case-folded */
	char *msgid;          /* THREAD */
	char **refs;          /* References, else In-Reply-To's first id */
	size_t nrefs;
	unsigned have; /* the IMAP_SORT_NEED_* keys read (and KEY_BASE) */
};

struct imap_sort_set {
	struct sort_msg **v; /* entries of the cache */
	size_t n, cap;
	unsigned need; /* IMAP_SORT_NEED_* */
	struct imap_sort_cache *cache;
};

#define KEY_BASE (1u << 8) /* sort_msg.have: dates and size */

static const struct {
	const char *name;
	enum imap_sort_key key;
	unsigned need;
} sort_keys[] = {
	{ "ARRIVAL", SORT_ARRIVAL, 0 },
	{ "CC", SORT_CC, IMAP_SORT_NEED_ADDR },
	{ "DATE", SORT_DATE, 0 },
	{ "FROM", SORT_FROM, IMAP_SORT_NEED_ADDR },
	{ "SIZE", SORT_SIZE, 0 },
	{ "SUBJECT", SORT_SUBJECT, IMAP_SORT_NEED_SUBJECT },
	{ "TO", SORT_TO, IMAP_SORT_NEED_ADDR },
	{ "DISPLAYFROM", SORT_DISPLAYFROM, IMAP_SORT_NEED_ADDR },
	{ "DISPLAYTO", SORT_DISPLAYTO, IMAP_SORT_NEED_ADDR },
};

int imap_sort_parse(const struct imap_arg *list, struct imap_sort_crit *crit, size_t *n_r,
		    unsigned *need_r)
{
	bool reverse = false;
	size_t n = 0;

	if (list == NULL || list->type != IMAP_ARG_LIST || list->n == 0)
		return -1;
	for (const struct imap_arg *a = list + 1; a <= list + list->span; a++) {
		bool known = false;

		if (a->type != IMAP_ARG_ATOM)
			return -1;
		if (imap_arg_atom_is(a, "REVERSE")) {
			if (reverse)
				return -1;
			reverse = true;
			continue;
		}
		for (size_t i = 0; i < sizeof(sort_keys) / sizeof(sort_keys[0]); i++) {
			if (!imap_arg_atom_is(a, sort_keys[i].name))
				continue;
			if (n >= IMAP_SORT_CRITERIA_MAX)
				return -1;
			crit[n].key = sort_keys[i].key;
			crit[n++].reverse = reverse;
			*need_r |= sort_keys[i].need;
			known = true;
		}
		if (!known)
			return -1;
		reverse = false;
	}
	if (reverse || n == 0) /* REVERSE must precede a key */
		return -1;
	*n_r = n;
	return 0;
}

static void upper_ascii(char *s)
{
	for (; *s != '\0'; s++)
		if (*s >= 'a' && *s <= 'z')
			*s = (char)(*s - 32);
}

/* ---- base subject (RFC 5256 2.1) ---- */

static bool is_wsp(char c)
{
	return c == ' ' || c == '\t';
}

/* subj-blob: "[" *BLOBCHAR "]" *WSP at s; its length, 0 when there is none. */
static size_t subj_blob(const char *s)
{
	size_t i = 1;

	if (s[0] != '[')
		return 0;
	while (s[i] != '\0' && s[i] != '[' && s[i] != ']')
		i++;
	if (s[i] != ']')
		return 0;
	for (i++; is_wsp(s[i]); i++)
		;
	return i;
}

/* subj-refwd: ("re" / ("fw" ["d"])) *WSP [subj-blob] ":" at s; its length or 0. */
static size_t subj_refwd(const char *s)
{
	size_t i;

	if (strncasecmp(s, "re", 2) == 0)
		i = 2;
	else if (strncasecmp(s, "fwd", 3) == 0)
		i = 3;
	else if (strncasecmp(s, "fw", 2) == 0)
		i = 2;
	else
		return 0;
	while (is_wsp(s[i]))
		i++;
	i += subj_blob(s + i);
	return s[i] == ':' ? i + 1 : 0;
}

/* Steps 3 and 4: leading WSP, subj-leaders and a leading blob that is not all there is. */
static bool strip_leaders(char **sp, bool *reply)
{
	char *s = *sp;
	bool changed = false;

	for (;;) {
		size_t n = 0, k;
		char *p = s;

		while (is_wsp(*p))
			p++;
		/* subj-leader: (*subj-blob subj-refwd) / WSP */
		for (char *q = p;;) {
			size_t r = subj_refwd(q);

			if (r > 0) {
				n = (size_t)(q - p) + r;
				*reply = true;
				break;
			}
			if ((k = subj_blob(q)) == 0)
				break;
			q += k;
		}
		if (n == 0 && (k = subj_blob(p)) > 0 && p[k] != '\0')
			n = k; /* a leading blob, if something remains */
		if (n == 0 && p == s)
			break;
		s = p + n;
		changed = true;
	}
	*sp = s;
	return changed;
}

/* Steps 2 to 6 on a string already decoded and with white space runs made single spaces. */
static char *base_subject(char *s, bool *reply)
{
	for (;;) {
		size_t len = strlen(s);
		bool again = true;

		while (again) { /* step 2: trailing "(fwd)" and WSP */
			again = false;
			while (len > 0 && is_wsp(s[len - 1]))
				len--, again = true;
			if (len >= 5 && strncasecmp(s + len - 5, "(fwd)", 5) == 0) {
				len -= 5;
				again = *reply = true;
			}
		}
		s[len] = '\0';
		while (strip_leaders(&s, reply)) /* steps 3 and 4 */
			;
		len = strlen(s);
		if (len >= 6 && strncasecmp(s, "[fwd:", 5) == 0 && s[len - 1] == ']') {
			s[len - 1] = '\0'; /* step 5: [fwd: subject] */
			s += 5;
			*reply = true;
			continue;
		}
		return s;
	}
}

/* The Subject's base subject, upper-cased, for m (*reply set when it was a reply). */
static char *subject_key(const struct msgcache_view *mv, bool *reply)
{
	struct buf raw, dec;
	char *s, *base, *out;
	size_t o = 0;

	buf_init(&raw, 128, SORT_FIELD_MAX);
	buf_init(&dec, 128, 4 * SORT_FIELD_MAX);
	if (rfc5322_header_value(mv->header.p, mv->header.len, "Subject", &raw) > 0)
		mimetext_decode_words(raw.data, raw.len, &dec);
	s = xmemdup0(dec.data != NULL ? dec.data : "", dec.len);
	buf_release(&raw);
	buf_release(&dec);
	for (size_t i = 0; s[i] != '\0'; i++) { /* step 1: white space runs to one space */
		if (is_wsp(s[i]) || s[i] == '\r' || s[i] == '\n') {
			if (o > 0 && s[o - 1] == ' ')
				continue;
			s[o++] = ' ';
		} else {
			s[o++] = s[i];
		}
	}
	s[o] = '\0';
	*reply = false;
	base = base_subject(s, reply);
	out = xstrdup(base);
	free(s);
	upper_ascii(out);
	return out;
}

/* ---- addresses ---- */

struct first_addr {
	struct buf mailbox, display;
	bool done;
};

static void first_addr_cb(void *arg, const struct rfc5322_addr *a)
{
	struct first_addr *fa = arg;

	if (fa->done || a->is_group_start || a->is_group_end)
		return;
	fa->done = true;
	buf_append(&fa->mailbox, a->mailbox.p, a->mailbox.len);
	/* RFC 5957: the display name when there is one, else the addr-spec */
	if (a->name.len > 0) {
		mimetext_decode_words(a->name.p, a->name.len, &fa->display);
	} else {
		buf_append(&fa->display, a->mailbox.p, a->mailbox.len);
		if (a->domain.len > 0) {
			buf_putc(&fa->display, '@');
			buf_append(&fa->display, a->domain.p, a->domain.len);
		}
	}
}

/* The first address of field name: its mailbox upper-cased, and (display_r) its display
   name case-folded. */
static char *addr_key(const struct msgcache_view *mv, const char *name, char **display_r)
{
	struct buf raw;
	struct first_addr fa = { .done = false };
	char *mbox;

	buf_init(&raw, 128, SORT_FIELD_MAX);
	buf_init(&fa.mailbox, 64, IMAP_FIELD_MAX);
	buf_init(&fa.display, 64, IMAP_FIELD_MAX);
	if (rfc5322_header_value(mv->header.p, mv->header.len, name, &raw) > 0)
		rfc5322_addr_parse(raw.data, raw.len, first_addr_cb, &fa);
	mbox = xmemdup0(fa.mailbox.data != NULL ? fa.mailbox.data : "", fa.mailbox.len);
	upper_ascii(mbox);
	if (display_r != NULL) {
		*display_r = xmemdup0(fa.display.data != NULL ? fa.display.data : "",
				      fa.display.len);
		mimetext_fold(*display_r, fa.display.len);
	}
	buf_release(&raw);
	buf_release(&fa.mailbox);
	buf_release(&fa.display);
	return mbox;
}

/* ---- message-ids ---- */

/* The "<...>" ids of text, in order (white space inside removed), appended to *v. */
static void msgids(const char *p, size_t len, char ***v, size_t *n, size_t max)
{
	size_t i = 0;

	while (i < len && *n < max) {
		const char *open = memchr(p + i, '<', len - i), *close;
		char *id;
		size_t k = 0;

		if (open == NULL || (close = memchr(open, '>', (size_t)(p + len - open))) == NULL)
			return;
		id = xmalloc((size_t)(close - open) + 2);
		for (const char *q = open; q <= close; q++)
			if (!is_wsp(*q) && *q != '\r' && *q != '\n')
				id[k++] = *q;
		id[k] = '\0';
		if (k > 2) {
			*v = xreallocarray(*v, *n + 1, sizeof(**v));
			(*v)[(*n)++] = id;
		} else {
			free(id);
		}
		i = (size_t)(close - p) + 1;
	}
}

static void thread_keys(struct sort_msg *sm, const struct msgcache_view *mv)
{
	struct buf raw;
	char **ids = NULL;
	size_t n = 0;

	buf_init(&raw, 128, SORT_FIELD_MAX);
	if (rfc5322_header_value(mv->header.p, mv->header.len, "Message-ID", &raw) > 0)
		msgids(raw.data, raw.len, &ids, &n, 1);
	sm->msgid = n > 0 ? ids[0] : NULL;
	free(ids);
	buf_reset(&raw);
	if (rfc5322_header_value(mv->header.p, mv->header.len, "References", &raw) > 0)
		msgids(raw.data, raw.len, &sm->refs, &sm->nrefs, 256);
	if (sm->nrefs == 0) {
		buf_reset(&raw);
		if (rfc5322_header_value(mv->header.p, mv->header.len, "In-Reply-To", &raw) > 0)
			msgids(raw.data, raw.len, &sm->refs, &sm->nrefs, 1);
	}
	buf_release(&raw);
}

/* ---- the key cache and the set ---- */

/* A message's keys, parsed once per selected mailbox: headers never change, so a SORT or
   THREAD after the first reads no message cache for the messages it has seen. */
struct imap_sort_cache {
	struct sort_msg **slot; /* open addressing by UID */
	size_t cap, n;
};

static void sort_msg_free(struct sort_msg *sm)
{
	free(sm->subject);
	free(sm->from);
	free(sm->to);
	free(sm->cc);
	free(sm->dfrom);
	free(sm->dto);
	free(sm->msgid);
	for (size_t i = 0; i < sm->nrefs; i++)
		free(sm->refs[i]);
	free(sm->refs);
	free(sm);
}

void imap_sort_cache_free(struct imap_sort_cache **cp)
{
	struct imap_sort_cache *c = *cp;

	if (c == NULL)
		return;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slot[i] != NULL)
			sort_msg_free(c->slot[i]);
	free(c->slot);
	free(c);
	*cp = NULL;
}

static size_t slot_of(const struct imap_sort_cache *c, uint32_t uid)
{
	size_t i = (uid * 2654435761u) & (c->cap - 1);

	while (c->slot[i] != NULL && c->slot[i]->uid != uid)
		i = (i + 1) & (c->cap - 1);
	return i;
}

/* The entry of uid, made empty when new (the table grows at 70%). */
static struct sort_msg *cache_entry(struct imap_sort_cache *c, uint32_t uid)
{
	size_t i;

	if ((c->n + 1) * 10 > c->cap * 7) {
		struct sort_msg **old = c->slot;
		size_t ocap = c->cap;

		c->cap = c->cap == 0 ? 256 : c->cap * 2;
		c->slot = xcalloc(c->cap, sizeof(*c->slot));
		for (size_t k = 0; k < ocap; k++)
			if (old[k] != NULL)
				c->slot[slot_of(c, old[k]->uid)] = old[k];
		free(old);
	}
	i = slot_of(c, uid);
	if (c->slot[i] == NULL) {
		c->slot[i] = xcalloc(1, sizeof(**c->slot));
		c->slot[i]->uid = uid;
		c->n++;
	}
	return c->slot[i];
}

struct imap_sort_set *imap_sort_set_new(struct imap_sort_cache **cache, unsigned need)
{
	struct imap_sort_set *s = xcalloc(1, sizeof(*s));

	if (*cache == NULL)
		*cache = xcalloc(1, sizeof(**cache));
	s->cache = *cache;
	s->need = need;
	return s;
}

void imap_sort_set_free(struct imap_sort_set **sp)
{
	struct imap_sort_set *s = *sp;

	if (s == NULL)
		return;
	free(s->v);
	free(s);
	*sp = NULL;
}

size_t imap_sort_set_count(const struct imap_sort_set *s)
{
	return s->n;
}

/* The keys of need that sm does not have yet, from the message cache of m. */
static void keys_load(struct sort_msg *sm, const struct store_msg *m, unsigned need)
{
	struct msgcache_view mv;

	if (m->cache_len == 0 || msgcache_parse(m->cache, m->cache_len, &mv) < 0) {
		memset(&mv, 0, sizeof(mv));
		mv.date = INT64_MIN;
		mv.header = str_view_of("\r\n");
	}
	if (!(sm->have & KEY_BASE)) {
		sm->arrival = m->internaldate;
		sm->size = m->size;
		sm->date = mv.date != INT64_MIN ? mv.date : m->internaldate;
	}
	if ((need & (IMAP_SORT_NEED_SUBJECT | IMAP_SORT_NEED_THREAD)) && sm->subject == NULL)
		sm->subject = subject_key(&mv, &sm->reply);
	if ((need & IMAP_SORT_NEED_ADDR) && !(sm->have & IMAP_SORT_NEED_ADDR)) {
		sm->from = addr_key(&mv, "From", &sm->dfrom);
		sm->to = addr_key(&mv, "To", &sm->dto);
		sm->cc = addr_key(&mv, "Cc", NULL);
	}
	if ((need & IMAP_SORT_NEED_THREAD) && !(sm->have & IMAP_SORT_NEED_THREAD))
		thread_keys(sm, &mv);
	sm->have |= need | KEY_BASE;
}

static void set_push(struct imap_sort_set *s, struct sort_msg *sm, uint32_t seq)
{
	sm->seq = seq; /* this command's numbering */
	if (s->n == s->cap) {
		s->cap = s->cap == 0 ? 64 : s->cap * 2;
		s->v = xreallocarray(s->v, s->cap, sizeof(*s->v));
	}
	s->v[s->n++] = sm;
}

void imap_sort_set_add(struct imap_sort_set *s, uint32_t seq, const struct store_msg *m)
{
	struct sort_msg *sm = cache_entry(s->cache, m->uid);

	if ((sm->have & (s->need | KEY_BASE)) != (s->need | KEY_BASE))
		keys_load(sm, m, s->need);
	set_push(s, sm, seq);
}

bool imap_sort_set_add_cached(struct imap_sort_set *s, uint32_t seq, uint32_t uid)
{
	struct sort_msg *sm;
	size_t i;

	if (s->cache->cap == 0)
		return false;
	i = slot_of(s->cache, uid);
	sm = s->cache->slot[i];
	if (sm == NULL || (sm->have & (s->need | KEY_BASE)) != (s->need | KEY_BASE))
		return false;
	set_push(s, sm, seq);
	return true;
}

/* ---- SORT ---- */

static int cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_key(const struct sort_msg *a, const struct sort_msg *b, enum imap_sort_key k)
{
	switch (k) {
	case SORT_ARRIVAL:
		return cmp_i64(a->arrival, b->arrival);
	case SORT_DATE:
		return cmp_i64(a->date, b->date);
	case SORT_SIZE:
		return a->size < b->size ? -1 : a->size > b->size;
	case SORT_SUBJECT:
		return strcmp(a->subject, b->subject);
	case SORT_FROM:
		return strcmp(a->from, b->from);
	case SORT_TO:
		return strcmp(a->to, b->to);
	case SORT_CC:
		return strcmp(a->cc, b->cc);
	case SORT_DISPLAYFROM:
		return strcmp(a->dfrom, b->dfrom);
	case SORT_DISPLAYTO:
		return strcmp(a->dto, b->dto);
	}
	return 0;
}

static const struct imap_sort_crit *sort_crit;
static size_t sort_ncrit;

/* Criteria in order, then the sequence number (RFC 5256 3: ties in sequence order). */
static int sort_cmp(const void *pa, const void *pb)
{
	const struct sort_msg *a = *(struct sort_msg *const *)pa,
			      *b = *(struct sort_msg *const *)pb;

	for (size_t i = 0; i < sort_ncrit; i++) {
		int r = cmp_key(a, b, sort_crit[i].key);

		if (r != 0)
			return sort_crit[i].reverse ? -r : r;
	}
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void imap_sort_run(struct imap_sort_set *s, const struct imap_sort_crit *crit, size_t n)
{
	/* the loop is single-threaded: the comparator's criteria live for one qsort */
	sort_crit = crit;
	sort_ncrit = n;
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), sort_cmp);
	sort_crit = NULL;
	sort_ncrit = 0;
}

uint32_t imap_sort_at(const struct imap_sort_set *s, size_t i, bool uid)
{
	return uid ? s->v[i]->uid : s->v[i]->seq;
}

/* ---- THREAD ---- */

struct tnode {
	struct sort_msg *msg; /* NULL: a dummy */
	const char *id;
	struct tnode *parent, *child, *next;
};

struct tctx {
	struct tnode *nodes;
	size_t n, cap;
	const char **idx; /* sorted ids, idx_node[i] the node of idx[i] */
	struct tnode **idx_node;
	size_t nidx, idx_cap;
};

static struct tnode *tnode_new(struct tctx *t)
{
	struct tnode *nd = &t->nodes[t->n++];

	memset(nd, 0, sizeof(*nd));
	return nd;
}

/* The node of id (a new dummy if unknown); a binary search over the sorted index, insertion
   keeps it sorted. */
static struct tnode *node_for(struct tctx *t, const char *id)
{
	size_t lo = 0, hi = t->nidx;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = strcmp(t->idx[mid], id);

		if (r == 0)
			return t->idx_node[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (t->nidx == t->idx_cap) {
		t->idx_cap = t->idx_cap == 0 ? 64 : t->idx_cap * 2;
		t->idx = xreallocarray(t->idx, t->idx_cap, sizeof(*t->idx));
		t->idx_node = xreallocarray(t->idx_node, t->idx_cap, sizeof(*t->idx_node));
	}
	memmove(t->idx + lo + 1, t->idx + lo, (t->nidx - lo) * sizeof(*t->idx));
	memmove(t->idx_node + lo + 1, t->idx_node + lo, (t->nidx - lo) * sizeof(*t->idx_node));
	t->idx[lo] = id;
	t->idx_node[lo] = tnode_new(t);
	t->idx_node[lo]->id = id;
	t->nidx++;
	return t->idx_node[lo];
}

static bool is_ancestor(const struct tnode *a, const struct tnode *of)
{
	for (const struct tnode *p = of; p != NULL; p = p->parent)
		if (p == a)
			return true;
	return false;
}

static void unlink_node(struct tnode *c)
{
	struct tnode **pp;

	if (c->parent == NULL)
		return;
	for (pp = &c->parent->child; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->parent = NULL;
	c->next = NULL;
}

static void link_node(struct tnode *parent, struct tnode *c)
{
	struct tnode **pp = &parent->child;

	while (*pp != NULL)
		pp = &(*pp)->next;
	*pp = c;
	c->parent = parent;
	c->next = NULL;
}

/* RFC 5256 REFERENCES step 1: containers linked by References / In-Reply-To. */
static void thread_link(struct tctx *t, struct imap_sort_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct sort_msg *m = s->v[i];
		struct tnode *nd = m->msgid != NULL ? node_for(t, m->msgid) : NULL, *prev = NULL;

		if (nd == NULL || nd->msg != NULL)
			nd = tnode_new(t); /* no Message-ID, or a duplicate: a unique one */
		nd->msg = m;
		for (size_t r = 0; r < m->nrefs; r++) {
			struct tnode *ref = node_for(t, m->refs[r]);

			if (prev != NULL && ref->parent == NULL && ref != prev &&
			    !is_ancestor(ref, prev))
				link_node(prev, ref);
			prev = ref;
		}
		unlink_node(nd); /* the last reference is the parent, whatever was there */
		if (prev != NULL && prev != nd && !is_ancestor(nd, prev))
			link_node(prev, nd);
	}
}

/* The sent date a node sorts by: its message's, a dummy's first child's. */
static int64_t node_date(const struct tnode *nd)
{
	while (nd->msg == NULL && nd->child != NULL)
		nd = nd->child;
	return nd->msg != NULL ? nd->msg->date : 0;
}

static uint32_t node_seq(const struct tnode *nd)
{
	while (nd->msg == NULL && nd->child != NULL)
		nd = nd->child;
	return nd->msg != NULL ? nd->msg->seq : 0;
}

/* The latest sent date in the subtree (THREAD=REFS orders threads by it). */
static int64_t node_latest(const struct tnode *nd)
{
	int64_t max = nd->msg != NULL ? nd->msg->date : INT64_MIN;

	for (const struct tnode *c = nd->child; c != NULL; c = c->next) {
		int64_t d = node_latest(c);

		if (d > max)
			max = d;
	}
	return max;
}

static bool by_latest;

static int node_cmp(const void *pa, const void *pb)
{
	const struct tnode *a = *(struct tnode *const *)pa, *b = *(struct tnode *const *)pb;
	int r = by_latest ? cmp_i64(node_latest(a), node_latest(b))
			  : cmp_i64(node_date(a), node_date(b));
	uint32_t sa, sb;

	if (r != 0)
		return r;
	sa = node_seq(a), sb = node_seq(b);
	return sa < sb ? -1 : sa > sb;
}

/* Sorts a sibling list (children first, so a dummy's date is its first child's). */
static struct tnode *sort_siblings(struct tnode *first, bool recurse, bool latest)
{
	struct tnode **v = NULL, *out = NULL;
	size_t n = 0;

	for (struct tnode *c = first; c != NULL; c = c->next) {
		if (recurse)
			c->child = sort_siblings(c->child, true, false);
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n++] = c;
	}
	by_latest = latest;
	if (n > 1)
		qsort(v, n, sizeof(*v), node_cmp);
	by_latest = false;
	for (size_t i = n; i-- > 0;) {
		v[i]->next = out;
		out = v[i];
	}
	free(v);
	return out;
}

/* Step 3: dummies without children go; a dummy's children move up a level, except for a
   root dummy with more than one child. Returns the new sibling list. */
static struct tnode *prune(struct tnode *first, struct tnode *parent)
{
	struct tnode *out = NULL, **tail = &out, *next;

	for (struct tnode *c = first; c != NULL; c = next) {
		next = c->next;
		c->next = NULL;
		c->child = prune(c->child, c);
		if (c->msg == NULL && c->child == NULL)
			continue;
		if (c->msg == NULL && (parent != NULL || c->child->next == NULL)) {
			*tail = c->child; /* promote the children */
			for (struct tnode *k = c->child; k != NULL; k = k->next) {
				k->parent = parent;
				tail = &k->next;
			}
			continue;
		}
		c->parent = parent;
		*tail = c;
		tail = &c->next;
	}
	return out;
}

static const struct sort_msg *node_msg(const struct tnode *nd)
{
	while (nd->msg == NULL && nd->child != NULL)
		nd = nd->child;
	return nd->msg;
}

/* The base subject a root is grouped by (a dummy's first child's), "" for none. */
static const char *node_subject(const struct tnode *nd)
{
	const struct sort_msg *m = node_msg(nd);

	return m != NULL ? m->subject : "";
}

/* Step 5: roots with the same base subject are grouped. */
static struct tnode *group_subjects(struct tctx *t, struct tnode *roots)
{
	struct tnode **table = NULL, *out = NULL, **tail = &out, *next;
	size_t n = 0;

	for (struct tnode *r = roots; r != NULL; r = r->next) {
		const struct sort_msg *m = node_msg(r);
		size_t i;

		if (m == NULL || m->subject[0] == '\0')
			continue;
		for (i = 0; i < n && strcmp(node_subject(table[i]), m->subject) != 0; i++)
			;
		if (i == n) {
			table = xreallocarray(table, n + 1, sizeof(*table));
			table[n++] = r;
		} else if ((r->msg == NULL && table[i]->msg != NULL) ||
			   (table[i]->msg != NULL && table[i]->msg->reply && r->msg != NULL &&
			    !r->msg->reply)) {
			table[i] = r;
		}
	}
	for (struct tnode *r = roots; r != NULL; r = next) {
		const struct sort_msg *m = node_msg(r);
		struct tnode *e = NULL;

		next = r->next;
		r->next = NULL;
		for (size_t i = 0; m != NULL && m->subject[0] != '\0' && i < n; i++)
			if (strcmp(node_subject(table[i]), m->subject) == 0)
				e = table[i];
		if (e == NULL || e == r) {
			*tail = r;
			tail = &r->next;
			continue;
		}
		if (e->msg == NULL && r->msg == NULL) {
			for (struct tnode *c = r->child, *cn; c != NULL; c = cn) {
				cn = c->next;
				link_node(e, c);
			}
		} else if (e->msg == NULL) {
			link_node(e, r);
		} else if (r->msg != NULL && r->msg->reply && !e->msg->reply) {
			link_node(e, r);
		} else {
			/* neither is a reply of the other: both under a new dummy, in e's place */
			struct tnode *d = tnode_new(t), *e_next = e->next;

			*d = *e;
			memset(e, 0, sizeof(*e));
			e->next = e_next; /* e stays where it is in the result list */
			d->next = NULL;
			d->parent = NULL;
			for (struct tnode *c = d->child; c != NULL; c = c->next)
				c->parent = d;
			link_node(e, d);
			link_node(e, r);
		}
	}
	free(table);
	return out;
}

/* Writes one sibling list: "(a b (c)(d))" nesting (RFC 5256 4). */
static void write_nodes(const struct tnode *first, bool uid, struct buf *out, bool top)
{
	for (const struct tnode *c = first; c != NULL; c = c->next) {
		bool open = top || first->next != NULL;

		if (open)
			buf_putc(out, '(');
		for (const struct tnode *nd = c;;) {
			if (nd->msg != NULL)
				buf_printf(out, "%u", uid ? nd->msg->uid : nd->msg->seq);
			if (nd->child == NULL)
				break;
			if (nd->child->next != NULL) {
				if (nd->msg != NULL)
					buf_putc(out, ' ');
				write_nodes(nd->child, uid, out, false);
				break;
			}
			if (nd->msg != NULL)
				buf_putc(out, ' ');
			nd = nd->child;
		}
		if (open)
			buf_putc(out, ')');
	}
}

/* ORDEREDSUBJECT (RFC 5256 3): by base subject then sent date; the first of each subject is
   the parent of the others; threads by their first message's date. */
static struct tnode *thread_orderedsubject(struct tctx *t, struct imap_sort_set *s)
{
	static const struct imap_sort_crit by[] = { { SORT_SUBJECT, false },
						    { SORT_DATE, false } };
	struct tnode *roots = NULL, *last = NULL;

	imap_sort_run(s, by, 2);
	for (size_t i = 0; i < s->n; i++) {
		struct tnode *nd = tnode_new(t);

		nd->msg = s->v[i];
		if (last != NULL && strcmp(last->msg->subject, nd->msg->subject) == 0) {
			link_node(last, nd);
			continue;
		}
		nd->next = roots;
		roots = nd;
		last = nd;
	}
	return sort_siblings(roots, false, false);
}

static struct tnode *thread_references(struct tctx *t, struct imap_sort_set *s, bool refs)
{
	struct tnode *roots = NULL, **tail = &roots;

	thread_link(t, s);
	for (size_t i = 0; i < t->n; i++)
		if (t->nodes[i].parent == NULL) {
			*tail = &t->nodes[i];
			tail = &t->nodes[i].next;
		}
	roots = prune(roots, NULL);
	roots = sort_siblings(roots, true, false);
	if (!refs) {
		roots = group_subjects(t, roots);
		return sort_siblings(roots, true, false);
	}
	return sort_siblings(roots, false, true); /* REFS: threads by their latest message */
}

void imap_thread_run(struct imap_sort_set *s, enum imap_thread_alg alg, bool uid, struct buf *out)
{
	struct tctx t = { 0 };
	struct tnode *roots;
	size_t refs = 0;

	for (size_t i = 0; i < s->n; i++)
		refs += s->v[i]->nrefs + 1;
	t.cap = s->n + refs + s->n + 1; /* messages, referenced ids, subject dummies */
	t.nodes = xcalloc(t.cap, sizeof(*t.nodes));
	if (alg == THREAD_ORDEREDSUBJECT)
		roots = thread_orderedsubject(&t, s);
	else
		roots = thread_references(&t, s, alg == THREAD_REFS);
	write_nodes(roots, uid, out, true);
	free(t.nodes);
	free(t.idx);
	free(t.idx_node);
}

/* imap_context.c — owns the update contexts of CONTEXT=SEARCH and CONTEXT=SORT (RFC 5267
 * 4.3): a SEARCH or SORT with RETURN (UPDATE) leaves its compiled keys (and criteria) and its
 * result (UIDs in the requested order) with the selected view. An expunge of a result goes
 * out as REMOVEFROM before its EXPUNGE (imap_context_expunged); after every view sync that
 * saw a change the keys run again over the view and the difference goes out as REMOVEFROM,
 * then ADDTO (imap_context_update): SEARCH contexts at position 0 in mailbox order, SORT
 * contexts at their positions (sort keys never change, so the results kept keep their
 * order). CANCELUPDATE ends contexts; closing the view ends them all. */
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

struct imap_context {
	struct imap_context *next;
	char *tag;
	bool uid;  /* UID SEARCH/SORT: UIDs; else sequence numbers */
	bool sort; /* SORT: positions matter */
	struct imap_sort_crit crit[IMAP_SORT_CRITERIA_MAX];
	size_t ncrit;
	unsigned need;
	struct imap_search *keys;
	uint32_t *res; /* UIDs, in the requested order */
	size_t n;
};

static void context_free(struct imap_context *x)
{
	imap_search_free(&x->keys);
	free(x->res);
	free(x->tag);
	free(x);
}

void imap_context_free_all(struct imap_view *v)
{
	while (v->contexts != NULL) {
		struct imap_context *x = v->contexts;

		v->contexts = x->next;
		context_free(x);
	}
	v->ncontexts = 0;
}

bool imap_context_tag_used(const struct imap_view *v, const char *tag)
{
	for (const struct imap_context *x = v->contexts; x != NULL; x = x->next)
		if (strcmp(x->tag, tag) == 0)
			return true;
	return false;
}

bool imap_context_add(struct imap_view *v, const char *tag, bool uid, struct imap_search **keys,
		      const struct imap_sort_crit *crit, size_t ncrit, unsigned need,
		      const uint32_t *uids, size_t n)
{
	struct imap_context *x;

	if (v->ncontexts >= IMAP_CONTEXTS_MAX)
		return false;
	x = xcalloc(1, sizeof(*x));
	x->tag = xstrdup(tag);
	x->uid = uid;
	x->sort = crit != NULL;
	if (crit != NULL)
		memcpy(x->crit, crit, ncrit * sizeof(*crit));
	x->ncrit = ncrit;
	x->need = need;
	x->keys = *keys;
	*keys = NULL;
	x->res = xcalloc(n + 1, sizeof(*x->res));
	memcpy(x->res, uids, n * sizeof(*uids));
	x->n = n;
	x->next = v->contexts;
	v->contexts = x;
	v->ncontexts++;
	return true;
}

bool imap_context_cancel(struct imap_view *v, const char *tag)
{
	for (struct imap_context **xp = &v->contexts; *xp != NULL; xp = &(*xp)->next)
		if (strcmp((*xp)->tag, tag) == 0) {
			struct imap_context *x = *xp;

			*xp = x->next;
			context_free(x);
			v->ncontexts--;
			return true;
		}
	return false;
}

static void context_head(struct imap_client *c, const struct imap_context *x)
{
	imap_printf(c, "* ESEARCH (TAG \"%s\")%s", x->tag, x->uid ? " UID" : "");
}

void imap_context_expunged(struct imap_client *c, uint32_t uid, size_t seq)
{
	for (struct imap_context *x = c->view->contexts; x != NULL; x = x->next)
		for (size_t i = 0; i < x->n; i++) {
			if (x->res[i] != uid)
				continue;
			context_head(c, x);
			imap_printf(c, " REMOVEFROM (%zu %u)\r\n", x->sort ? i + 1 : 0,
				    x->uid ? uid : (uint32_t)seq);
			memmove(&x->res[i], &x->res[i + 1], (x->n - i - 1) * sizeof(*x->res));
			x->n--;
			break;
		}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool in_sorted(const uint32_t *v, size_t n, uint32_t u)
{
	return bsearch(&u, v, n, sizeof(*v), cmp_u32) != NULL;
}

/* The keys' result over the view now, as UIDs in the requested order (*n_r of them). */
static uint32_t *context_run(struct imap_client *c, struct imap_context *x, struct store_txn *t,
			     size_t *n_r)
{
	const struct imap_view *v = c->view;
	uint32_t *out = xcalloc(v->n + 1, sizeof(*out));
	struct imap_sort_set *set = NULL;
	size_t n = 0;

	imap_search_rebind(x->keys, t);
	if (x->sort)
		set = imap_sort_set_new(&c->view->sort_cache, x->need);
	for (size_t i = 0; i < v->n; i++) {
		struct store_msg m;

		if (!imap_search_match(x->keys, i, &m))
			continue;
		if (set != NULL)
			imap_sort_set_add(set, (uint32_t)i + 1, &m);
		else
			out[n++] = m.uid;
	}
	if (set != NULL) {
		imap_sort_run(set, x->crit, x->ncrit);
		n = imap_sort_set_count(set);
		for (size_t i = 0; i < n; i++)
			out[i] = imap_sort_at(set, i, true);
		imap_sort_set_free(&set);
	}
	*n_r = n;
	return out;
}

/* The number a result goes out as: its UID, or its sequence number in the view. */
static uint32_t context_number(const struct imap_client *c, const struct imap_context *x,
			       uint32_t uid)
{
	return x->uid ? uid : imap_view_seq(c->view, uid);
}

/* " NAME (pos a,b pos c ...)": the results of list (n, in its order) whose membership in
   other (sorted, m) is not want, at their positions (0 for a SEARCH context); removing
   positions count the removals before them. Nothing when there is none. */
static void context_items(struct imap_client *c, const struct imap_context *x, const char *name,
			  const uint32_t *list, size_t n, const uint32_t *other, size_t m,
			  bool removing, struct buf *out)
{
	struct imap_seqset set = { 0 };
	size_t done = 0, last = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		uint32_t num;

		if (in_sorted(other, m, list[i]))
			continue;
		num = context_number(c, x, list[i]);
		if (!x->sort) {
			imap_seqset_add(&set, num, num);
		} else if (done > 0 && last + 1 == i) { /* the run goes on: next position */
			buf_printf(out, ",%u", num);
			last = i;
		} else {
			buf_printf(out, "%s%zu %u", out->len > 0 ? " " : "",
				   removing ? i - done + 1 : i + 1, num);
			last = i;
		}
		done++;
	}
	if (!x->sort && done > 0) {
		imap_seqset_resolve(&set, 0);
		buf_puts(out, "0 ");
		imap_seqset_format(&set, out);
	}
	imap_seqset_release(&set);
	if (out->len > 0)
		imap_printf(c, " %s (%s)", name, buf_cstr(out));
	buf_reset(out);
}

void imap_context_update(struct imap_client *c, struct store_txn *t)
{
	struct buf b;

	buf_init(&b, 256, BUF_INPUT_BOUNDED);
	for (struct imap_context *x = c->view->contexts; x != NULL; x = x->next) {
		size_t n;
		uint32_t *now = context_run(c, x, t, &n);
		uint32_t *old_sorted = xcalloc(x->n + 1, sizeof(*old_sorted));
		uint32_t *now_sorted = xcalloc(n + 1, sizeof(*now_sorted));
		bool same = n == x->n && memcmp(now, x->res, n * sizeof(*now)) == 0;

		if (!same) {
			memcpy(old_sorted, x->res, x->n * sizeof(*old_sorted));
			qsort(old_sorted, x->n, sizeof(*old_sorted), cmp_u32);
			memcpy(now_sorted, now, n * sizeof(*now_sorted));
			qsort(now_sorted, n, sizeof(*now_sorted), cmp_u32);
			context_head(c, x);
			context_items(c, x, "REMOVEFROM", x->res, x->n, now_sorted, n, true, &b);
			context_items(c, x, "ADDTO", now, n, old_sorted, x->n, false, &b);
			imap_write(c, "\r\n", 2);
		}
		free(old_sorted);
		free(now_sorted);
		free(x->res);
		x->res = now;
		x->n = n;
	}
	buf_release(&b);
}

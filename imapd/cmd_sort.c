/* cmd_sort.c — owns SORT, UID SORT, THREAD and UID THREAD (RFC 5256, RFC 5957 DISPLAYFROM and
 * DISPLAYTO) and ESORT's RETURN options (RFC 5267: MIN MAX COUNT ALL, answered as ESEARCH;
 * UPDATE and CONTEXT of CONTEXT=SORT, whose contexts are imap_context.c):
 * the criteria, the charset, the search keys (imap_search.c) and the replies. The keys and
 * the algorithms are imap_sort.c. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

enum {
	ESORT_MIN = 1,
	ESORT_MAX = 2,
	ESORT_ALL = 4,
	ESORT_COUNT = 8,
	ESORT_PARTIAL = 16,
	ESORT_UPDATE = 32, /* CONTEXT=SORT (RFC 5267 4.3): imap_context.c */
	ESORT_CONTEXT = 64 /* a hint */
};

/* SORT and THREAD name a charset of their own (no CHARSET keyword): NULL, or the reply's
   text with *no_r for a NO. */
static const char *sort_charset(const struct imap_arg *cs, bool *no_r)
{
	*no_r = false;
	if (cs == NULL || !imap_arg_is_astring(cs))
		return "Expected a charset";
	if (str_caseeq(cs->s, cs->len, "UTF-8", 5) || str_caseeq(cs->s, cs->len, "US-ASCII", 8))
		return NULL;
	*no_r = true;
	return "[BADCHARSET (UTF-8 US-ASCII)] Unsupported charset";
}

/* The messages the keys [p, end) match, with the keys need asks for; NULL after a reply.
   keep (may be NULL) gets the compiled keys instead of their being freed. */
static struct imap_sort_set *sort_select(struct imap_cmd *cmd, const struct imap_arg *p,
					 unsigned need, const char *what,
					 struct imap_search **keep)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *end = cmd->args + cmd->nargs;
	struct imap_sort_set *set;
	struct imap_search_scope scope;
	struct imap_search *s;
	struct store_txn *t = NULL;
	const char *why;
	bool no, all;
	int rc;

	if ((why = sort_charset(p, &no)) != NULL) {
		if (no)
			imap_cmd_no(cmd, why);
		else
			imap_cmd_bad(cmd, why);
		return NULL;
	}
	if ((rc = store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t)) != 0) {
		imap_cmd_store_error(cmd, rc, what);
		return NULL;
	}
	scope = IMAP_SEARCH_SCOPE(c);
	if ((s = imap_search_compile(&scope, t, imap_arg_next(p), end, &why)) == NULL) {
		store_txn_abort(&t);
		imap_cmd_bad(cmd, why);
		return NULL;
	}
	if (imap_search_uses_modseq(s))
		imap_view_enable_condstore(c);
	set = imap_sort_set_new(&c->view->sort_cache, need);
	all = imap_search_is_all(s);
	for (size_t i = 0; i < c->view->n; i++) {
		struct store_msg m;

		/* ALL with the keys known: no message read (one another session expunged
		   meanwhile stays listed: it is in this view until its EXPUNGE is sent) */
		if (all && imap_sort_set_add_cached(set, (uint32_t)i + 1, c->view->msgs[i].uid))
			continue;
		if (imap_search_match(s, i, &m))
			imap_sort_set_add(set, (uint32_t)i + 1, &m);
	}
	if (keep != NULL)
		*keep = s;
	else
		imap_search_free(&s);
	store_txn_abort(&t);
	return set;
}

/* RETURN (MIN MAX COUNT ALL PARTIAL range) of ESORT; -1 when invalid. */
static int esort_return(const struct imap_arg *opts, unsigned *ret, struct imap_partial *part)
{
	if (opts == NULL || opts->type != IMAP_ARG_LIST)
		return -1;
	for (const struct imap_arg *o = opts + 1; o <= opts + opts->span; o++) {
		unsigned bit = imap_arg_atom_is(o, "MIN")       ? ESORT_MIN
			       : imap_arg_atom_is(o, "MAX")     ? ESORT_MAX
			       : imap_arg_atom_is(o, "ALL")     ? ESORT_ALL
			       : imap_arg_atom_is(o, "COUNT")   ? ESORT_COUNT
			       : imap_arg_atom_is(o, "PARTIAL") ? ESORT_PARTIAL
			       : imap_arg_atom_is(o, "UPDATE")  ? ESORT_UPDATE
			       : imap_arg_atom_is(o, "CONTEXT") ? ESORT_CONTEXT
								: 0;

		if (bit == 0 || (*ret & bit))
			return -1;
		if (bit == ESORT_PARTIAL &&
		    (++o > opts + opts->span || imap_partial_parse(o, part) < 0))
			return -1;
		*ret |= bit;
	}
	if ((*ret & ESORT_PARTIAL) && (*ret & ESORT_ALL))
		return -1;
	if (opts->n == 0) /* RETURN (): ALL */
		*ret = ESORT_ALL;
	return 0;
}

/* "* ESEARCH (TAG ...)": MIN and MAX are the first and last in sort order, ALL lists the
   messages in sort order (RFC 5267 3.1). */
static void esort_reply(struct imap_cmd *cmd, const struct imap_sort_set *set, unsigned ret,
			const struct imap_partial *part)
{
	struct imap_client *c = cmd->c;
	size_t n = imap_sort_set_count(set);

	imap_printf(c, "* ESEARCH (TAG \"%s\")%s", cmd->tag, cmd->uid ? " UID" : "");
	if ((ret & ESORT_MIN) && n > 0)
		imap_printf(c, " MIN %u", imap_sort_at(set, 0, cmd->uid));
	if ((ret & ESORT_MAX) && n > 0)
		imap_printf(c, " MAX %u", imap_sort_at(set, n - 1, cmd->uid));
	if (ret & ESORT_COUNT)
		imap_printf(c, " COUNT %zu", n);
	if ((ret & ESORT_ALL) && n > 0) {
		imap_write(c, " ALL ", 5);
		for (size_t i = 0; i < n; i++)
			imap_printf(c, "%s%u", i > 0 ? "," : "", imap_sort_at(set, i, cmd->uid));
	}
	if (ret & ESORT_PARTIAL) { /* RFC 9394: the slice of the sorted list, in sort order */
		size_t from, to;

		imap_printf(c, " PARTIAL (%.*s ", (int)part->text_len, part->text);
		if (imap_partial_slice(part, n, &from, &to)) {
			for (size_t i = from; i < to; i++)
				imap_printf(c, "%s%u", i > from ? "," : "",
					    imap_sort_at(set, i, cmd->uid));
		} else {
			imap_write(c, "NIL", 3);
		}
		imap_write(c, ")", 1);
	}
	imap_write(c, "\r\n", 2);
}

/* RETURN (UPDATE): the keys, criteria and sorted result stay with the view (imap_context.c);
   false, after an untagged NO [NOUPDATE], when it keeps as many as it may. */
static bool sort_keep(struct imap_cmd *cmd, struct imap_search **keys,
		      const struct imap_sort_set *set, const struct imap_sort_crit *crit,
		      size_t ncrit, unsigned need)
{
	size_t n = imap_sort_set_count(set);
	uint32_t *uids = xcalloc(n + 1, sizeof(*uids));
	bool kept;

	for (size_t i = 0; i < n; i++)
		uids[i] = imap_sort_at(set, i, true);
	kept = imap_context_add(cmd->c->view, cmd->tag, cmd->uid, keys, crit, ncrit, need, uids,
				n);
	free(uids);
	if (!kept)
		imap_printf(cmd->c, "* NO [NOUPDATE \"%s\"] Too many update contexts\r\n",
			    cmd->tag);
	return kept;
}

bool cmd_sort(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	const struct imap_arg *p = imap_cmd_arg(cmd, 0);
	struct imap_sort_crit crit[IMAP_SORT_CRITERIA_MAX];
	struct imap_sort_set *set;
	struct imap_partial part = { 0 };
	unsigned need = 0, ret = 0;
	size_t ncrit;
	bool esort = false, refused;
	struct imap_search *keys = NULL;

	if (p != NULL && imap_arg_atom_is(p, "RETURN")) {
		if (esort_return(imap_arg_next(p), &ret, &part) < 0)
			return imap_cmd_bad(cmd, "Invalid RETURN options");
		esort = true;
		p = imap_arg_next(imap_arg_next(p));
	}
	if (p >= cmd->args + cmd->nargs || imap_sort_parse(p, crit, &ncrit, &need) < 0)
		return imap_cmd_bad(cmd, "Expected: SORT (criteria) charset search-keys");
	if ((ret & ESORT_UPDATE) && imap_context_tag_used(c->view, cmd->tag))
		return imap_cmd_bad(cmd, "Tag reuse: an update context has this tag");
	set = sort_select(cmd, imap_arg_next(p), need, "SORT",
			  (ret & ESORT_UPDATE) ? &keys : NULL);
	if (set == NULL)
		return true;
	imap_sort_run(set, crit, ncrit);
	if (esort) {
		esort_reply(cmd, set, ret, &part);
	} else {
		imap_write(c, "* SORT", 6);
		for (size_t i = 0; i < imap_sort_set_count(set); i++)
			imap_printf(c, " %u", imap_sort_at(set, i, cmd->uid));
		imap_write(c, "\r\n", 2);
	}
	refused = keys != NULL && !sort_keep(cmd, &keys, set, crit, ncrit, need);
	imap_search_free(&keys);
	imap_sort_set_free(&set);
	return imap_cmd_ok(cmd, !(ret & ESORT_UPDATE) ? "SORT completed"
				: refused             ? "SORT completed, will not notify"
						      : "SORT completed, will notify");
}

bool cmd_thread(struct imap_cmd *cmd)
{
	static const struct {
		const char *name;
		enum imap_thread_alg alg;
	} algs[] = {
		{ "ORDEREDSUBJECT", THREAD_ORDEREDSUBJECT },
		{ "REFERENCES", THREAD_REFERENCES },
		{ "REFS", THREAD_REFS },
	};
	const struct imap_arg *a = imap_cmd_arg(cmd, 0);
	struct imap_sort_set *set;
	struct buf out;
	size_t i;

	for (i = 0; a != NULL && i < sizeof(algs) / sizeof(algs[0]); i++)
		if (imap_arg_atom_is(a, algs[i].name))
			break;
	if (a == NULL || i == sizeof(algs) / sizeof(algs[0]))
		return imap_cmd_bad(cmd, "Expected: THREAD algorithm charset search-keys");
	if (imap_cmd_arg(cmd, 1) == NULL)
		return imap_cmd_bad(cmd, "Expected: THREAD algorithm charset search-keys");
	set = sort_select(cmd, imap_cmd_arg(cmd, 1),
			  IMAP_SORT_NEED_THREAD | IMAP_SORT_NEED_SUBJECT, "THREAD", NULL);
	if (set == NULL)
		return true;
	buf_init(&out, 256, BUF_INPUT_BOUNDED); /* the threads of the selected messages */
	imap_thread_run(set, algs[i].alg, cmd->uid, &out);
	imap_printf(cmd->c, "* THREAD%s%s\r\n", out.len > 0 ? " " : "", buf_cstr(&out));
	buf_release(&out);
	imap_sort_set_free(&set);
	return imap_cmd_ok(cmd, "THREAD completed");
}

/* cmd_search.c — owns SEARCH and UID SEARCH: CHARSET (US-ASCII, UTF-8), the ESEARCH RETURN
 * options (RFC 4731: MIN MAX COUNT ALL; SAVE of SEARCHRES, RFC 5182; PARTIAL, RFC 9394;
 * UPDATE and CONTEXT, RFC 5267, whose contexts are imap_context.c), IMAP4rev2's ESEARCH
 * default, and the reply with the highest MODSEQ when a MODSEQ key was used (RFC 7162). The
 * keys themselves are imap_search.c. */
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "imapd/imapd.h"
#include "store/store.h"

enum {
	RET_MIN = 1,
	RET_MAX = 2,
	RET_ALL = 4,
	RET_COUNT = 8,
	RET_SAVE = 16,
	RET_PARTIAL = 32,
	RET_UPDATE = 64,  /* RFC 5267 4.3: ADDTO and REMOVEFROM later (imap_context.c) */
	RET_CONTEXT = 128 /* RFC 5267 4.2: a hint, nothing to do */
};
#define RET_DATA (RET_MIN | RET_MAX | RET_ALL | RET_COUNT | RET_PARTIAL)

struct search_cmd {
	unsigned ret; /* ESEARCH RETURN options; 0: a plain SEARCH */
	bool esearch;
	bool modseq;    /* a MODSEQ key was used */
	uint32_t *hits; /* UIDs or sequence numbers, ascending */
	uint64_t *mods; /* the modseq of each hit */
	size_t n;
	struct imap_partial partial; /* RETURN (PARTIAL range), RFC 9394 */
};

int imap_partial_parse(const struct imap_arg *a, struct imap_partial *p)
{
	const char *colon;
	uint64_t x, y;
	bool neg;

	if (a == NULL || a->type != IMAP_ARG_ATOM || (colon = memchr(a->s, ':', a->len)) == NULL)
		return -1;
	neg = a->s[0] == '-';
	if (neg != (colon[1] == '-'))
		return -1; /* both from the start or both from the end */
	if (str_to_u64(a->s + neg, (size_t)(colon - a->s) - neg, UINT32_MAX, &x) < 0 ||
	    str_to_u64(colon + 1 + neg, a->len - (size_t)(colon + 1 - a->s) - neg, UINT32_MAX,
		       &y) < 0 ||
	    x == 0 || y == 0)
		return -1;
	p->from_end = neg;
	p->lo = (uint32_t)(x < y ? x : y);
	p->hi = (uint32_t)(x < y ? y : x);
	p->text = a->s;
	p->text_len = a->len;
	return 0;
}

bool imap_partial_slice(const struct imap_partial *p, size_t n, size_t *from_r, size_t *to_r)
{
	size_t lo = p->lo - 1, hi = p->hi; /* 0-based, [lo, hi) */

	if (lo >= n)
		return false;
	if (hi > n)
		hi = n;
	if (p->from_end) {
		size_t f = n - hi, t = n - lo;

		lo = f, hi = t;
	}
	*from_r = lo;
	*to_r = hi;
	return true;
}

/* With MIN and/or MAX but neither ALL nor COUNT, RETURN returns only the lowest and the
   highest hit: SAVE keeps those (RFC 5182 2.4) and MODSEQ is theirs (RFC 4731 3.2). */
static bool returns_ends(const struct search_cmd *sc)
{
	return (sc->ret & (RET_MIN | RET_MAX)) && !(sc->ret & (RET_ALL | RET_COUNT | RET_PARTIAL));
}

/* Whether hit i is among the returned messages. */
static bool returned(const struct search_cmd *sc, size_t i)
{
	if (!returns_ends(sc))
		return true;
	return ((sc->ret & RET_MIN) && i == 0) || ((sc->ret & RET_MAX) && i == sc->n - 1);
}

/* The MODSEQ of the reply: the highest of the returned messages' (RFC 7162 3.1.5). */
static uint64_t reply_modseq(const struct search_cmd *sc)
{
	uint64_t max = 0;

	for (size_t i = 0; i < sc->n; i++)
		if (returned(sc, i) && sc->mods[i] > max)
			max = sc->mods[i];
	return max;
}

/* SEARCHRES: "$" stands for the hits from now on. */
static void search_save(struct imap_cmd *cmd, const struct search_cmd *sc)
{
	struct imap_view *v = cmd->c->view;

	imap_seqset_clear(&v->saved);
	for (size_t i = 0; i < sc->n; i++) {
		uint32_t uid = cmd->uid ? sc->hits[i] : v->msgs[sc->hits[i] - 1].uid;

		if (returned(sc, i))
			imap_seqset_add(&v->saved, uid, uid);
	}
	imap_seqset_resolve(&v->saved, 0);
}

/* " ALL 1:3,5" of the hits (hits from to to: "1:3,5" alone, for PARTIAL). */
static void write_all(struct imap_client *c, const struct search_cmd *sc, size_t from, size_t to)
{
	struct imap_seqset set = { 0 };
	struct buf b;
	bool all = from == 0 && to == sc->n && !(sc->ret & RET_PARTIAL);

	for (size_t i = from; i < to; i++)
		imap_seqset_add(&set, sc->hits[i], sc->hits[i]);
	imap_seqset_resolve(&set, 0);
	buf_init(&b, 256, BUF_INPUT_BOUNDED); /* the mailbox's numbers */
	imap_seqset_format(&set, &b);
	imap_printf(c, "%s%s", all ? " ALL " : "", buf_cstr(&b));
	buf_release(&b);
	imap_seqset_release(&set);
}

/* Writes "* SEARCH ..." or, with RETURN, "* ESEARCH ..." (RFC 4731). */
static void search_reply(struct imap_cmd *cmd, const struct search_cmd *sc)
{
	struct imap_client *c = cmd->c;
	size_t n = sc->n;

	if (sc->ret & RET_SAVE) {
		search_save(cmd, sc);
		if (!(sc->ret & (RET_DATA | RET_UPDATE)))
			return; /* SAVE alone: no ESEARCH response (RFC 5182 2.1) */
	}
	if (!sc->esearch) {
		imap_write(c, "* SEARCH", 8);
		for (size_t i = 0; i < n; i++)
			imap_printf(c, " %u", sc->hits[i]);
		if (sc->modseq && n > 0)
			imap_printf(c, " (MODSEQ %" PRIu64 ")", reply_modseq(sc));
		imap_write(c, "\r\n", 2);
		return;
	}
	imap_printf(c, "* ESEARCH (TAG \"%s\")%s", cmd->tag, cmd->uid ? " UID" : "");
	if ((sc->ret & RET_MIN) && n > 0)
		imap_printf(c, " MIN %u", sc->hits[0]);
	if ((sc->ret & RET_MAX) && n > 0)
		imap_printf(c, " MAX %u", sc->hits[n - 1]);
	if (sc->ret & RET_COUNT)
		imap_printf(c, " COUNT %zu", n);
	if ((sc->ret & RET_ALL) && n > 0)
		write_all(c, sc, 0, n);
	if (sc->ret & RET_PARTIAL) {
		size_t from, to;

		imap_printf(c, " PARTIAL (%.*s ", (int)sc->partial.text_len, sc->partial.text);
		if (imap_partial_slice(&sc->partial, n, &from, &to))
			write_all(c, sc, from, to);
		else
			imap_write(c, "NIL", 3);
		imap_write(c, ")", 1);
	}
	if (sc->modseq && n > 0)
		imap_printf(c, " MODSEQ %" PRIu64, reply_modseq(sc));
	imap_write(c, "\r\n", 2);
}

/* Every view message against the keys: sc's hits. */
static void search_run(struct imap_cmd *cmd, struct imap_search *s, struct search_cmd *sc)
{
	const struct imap_view *v = cmd->c->view;

	sc->hits = xcalloc(v->n + 1, sizeof(*sc->hits));
	sc->mods = xcalloc(v->n + 1, sizeof(*sc->mods));
	for (size_t i = 0; i < v->n; i++) {
		struct store_msg m;

		if (!imap_search_match(s, i, &m))
			continue;
		sc->mods[sc->n] = m.modseq;
		sc->hits[sc->n++] = cmd->uid ? m.uid : (uint32_t)i + 1;
	}
}

/* RETURN (UPDATE): the keys and the hits stay with the view (imap_context.c); false, after
   an untagged NO [NOUPDATE], when it keeps as many as it may. */
static bool search_keep(struct imap_cmd *cmd, struct imap_search **s, const struct search_cmd *sc)
{
	struct imap_view *v = cmd->c->view;
	uint32_t *uids = xcalloc(sc->n + 1, sizeof(*uids));
	bool kept;

	for (size_t i = 0; i < sc->n; i++)
		uids[i] = cmd->uid ? sc->hits[i] : v->msgs[sc->hits[i] - 1].uid;
	kept = imap_context_add(v, cmd->tag, cmd->uid, s, NULL, 0, 0, uids, sc->n);
	free(uids);
	if (!kept)
		imap_printf(cmd->c, "* NO [NOUPDATE \"%s\"] Too many update contexts\r\n",
			    cmd->tag);
	return kept;
}

/* ESEARCH "RETURN (MIN MAX COUNT ALL SAVE PARTIAL UPDATE CONTEXT)" at *pp; -1 when it is
   not valid. */
static int search_return(struct search_cmd *sc, const struct imap_arg **pp,
			 const struct imap_arg *end)
{
	const struct imap_arg *opts = *pp + 1;

	if (opts >= end || opts->type != IMAP_ARG_LIST)
		return -1;
	sc->esearch = true;
	for (const struct imap_arg *o = opts + 1; o <= opts + opts->span; o++) {
		unsigned bit = imap_arg_atom_is(o, "MIN")       ? RET_MIN
			       : imap_arg_atom_is(o, "MAX")     ? RET_MAX
			       : imap_arg_atom_is(o, "ALL")     ? RET_ALL
			       : imap_arg_atom_is(o, "COUNT")   ? RET_COUNT
			       : imap_arg_atom_is(o, "SAVE")    ? RET_SAVE
			       : imap_arg_atom_is(o, "PARTIAL") ? RET_PARTIAL
			       : imap_arg_atom_is(o, "UPDATE")  ? RET_UPDATE
			       : imap_arg_atom_is(o, "CONTEXT") ? RET_CONTEXT
								: 0;

		if (bit == 0 || (sc->ret & bit))
			return -1;
		if (bit == RET_PARTIAL &&
		    (++o > opts + opts->span || imap_partial_parse(o, &sc->partial) < 0))
			return -1;
		sc->ret |= bit;
	}
	if ((sc->ret & RET_PARTIAL) && (sc->ret & RET_ALL))
		return -1; /* RFC 9394 3.1: PARTIAL replaces ALL */
	if (opts->n == 0)  /* RETURN (): ALL (RFC 4731 3.1) */
		sc->ret = RET_ALL;
	*pp = imap_arg_next(opts);
	return 0;
}

/* "CHARSET name" at *pp (when there): NULL, or the reply's text in *why_r with *no_r for a
   NO (an unknown charset) rather than a BAD. */
static const char *search_charset(struct imap_client *c, const struct imap_arg **pp,
				  const struct imap_arg *end, bool *no_r)
{
	const struct imap_arg *cs = *pp + 1;

	*no_r = false;
	if (*pp >= end || !imap_arg_atom_is(*pp, "CHARSET"))
		return NULL;
	if (cs >= end || !imap_arg_is_astring(cs))
		return "CHARSET needs a name";
	if (c->enabled_utf8) /* RFC 6855 3: strings are UTF-8, a label conflicts */
		return "No CHARSET after ENABLE UTF8=ACCEPT";
	if (!str_caseeq(cs->s, cs->len, "UTF-8", 5) &&
	    !str_caseeq(cs->s, cs->len, "US-ASCII", 8)) {
		*no_r = true;
		return "[BADCHARSET (UTF-8 US-ASCII)] Unsupported charset";
	}
	*pp = cs + 1;
	return NULL;
}

bool cmd_search(struct imap_cmd *cmd)
{
	struct imap_client *c = cmd->c;
	struct search_cmd sc = { 0 };
	const struct imap_arg *p = cmd->args, *end = cmd->args + cmd->nargs;
	struct imap_search_scope scope;
	struct imap_search *s;
	struct store_txn *t = NULL;
	const char *why;
	bool no, refused;
	int rc;

	if (p < end && imap_arg_atom_is(p, "RETURN") && search_return(&sc, &p, end) < 0)
		return imap_cmd_bad(cmd, "Invalid RETURN options");
	if ((sc.ret & RET_UPDATE) && imap_context_tag_used(c->view, cmd->tag))
		return imap_cmd_bad(cmd, "Tag reuse: an update context has this tag");
	if (c->rev2 && !sc.esearch) {
		/* IMAP4rev2 answers every SEARCH with ESEARCH, RETURN (ALL) by default */
		sc.esearch = true;
		sc.ret = RET_ALL;
	}
	if ((why = search_charset(c, &p, end, &no)) != NULL)
		return no ? imap_cmd_no(cmd, why) : imap_cmd_bad(cmd, why);
	if ((rc = store_txn_begin(c->srv->store, c->view->part, STORE_TXN_READ, &t)) != 0)
		return imap_cmd_store_error(cmd, rc, "SEARCH");
	scope = IMAP_SEARCH_SCOPE(c);
	if ((s = imap_search_compile(&scope, t, p, end, &why)) == NULL) {
		store_txn_abort(&t);
		return imap_cmd_bad(cmd, why);
	}
	if ((sc.modseq = imap_search_uses_modseq(s)))
		imap_view_enable_condstore(c); /* a CONDSTORE enabling command (RFC 7162 3.1) */
	search_run(cmd, s, &sc);
	search_reply(cmd, &sc);
	refused = (sc.ret & RET_UPDATE) && !search_keep(cmd, &s, &sc);
	imap_search_free(&s);
	store_txn_abort(&t);
	free(sc.hits);
	free(sc.mods);
	return imap_cmd_ok(cmd, !(sc.ret & RET_UPDATE) ? "SEARCH completed"
				: refused              ? "SEARCH completed, will not notify"
						       : "SEARCH completed, will notify");
}

/* CANCELUPDATE "tag" ... (RFC 5267 4.3.5): every tag named must be an update context's;
   then all of them end. */
bool cmd_cancelupdate(struct imap_cmd *cmd)
{
	struct imap_view *v = cmd->c->view;
	size_t n = imap_cmd_argc(cmd);

	if (n == 0)
		return imap_cmd_bad(cmd, "Expected: CANCELUPDATE \"tag\" ...");
	for (size_t i = 0; i < n; i++) {
		const struct imap_arg *a = imap_cmd_arg(cmd, i);

		if (a->type != IMAP_ARG_QUOTED)
			return imap_cmd_bad(cmd, "Expected: CANCELUPDATE \"tag\" ...");
		if (!imap_context_tag_used(v, a->s))
			return imap_cmd_no(cmd, "No update context has that tag");
	}
	for (size_t i = 0; i < n; i++)
		imap_context_cancel(v, imap_cmd_arg(cmd, i)->s);
	return imap_cmd_ok(cmd, "No further updates");
}

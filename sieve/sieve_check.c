/* sieve_check.c — owns the checker: which commands, tests, tags and extensions exist, what
 * each accepts (RFC 5228 and the extensions in sieve_extensions()), and the validation of
 * one command's arguments into an instruction (sieve_compile.c emits it). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/str.h"
#include "sieve/sieve_check.h"

static const struct sv_cmdspec cmds[] = {
	/* name            kind    op              ext           groups                 pos */
	{ "require", K_CTRL, OP_REQUIRE_NOP, 0, 0, "L" },
	{ "if", K_CTRL, 0, 0, 0, "" },
	{ "elsif", K_CTRL, 0, 0, 0, "" },
	{ "else", K_CTRL, 0, 0, 0, "" },
	{ "stop", K_CMD, OP_STOP, 0, 0, "" },
	{ "keep", K_CMD, OP_KEEP, 0, G_FLAGS, "" },
	{ "discard", K_CMD, OP_DISCARD, 0, 0, "" },
	{ "redirect", K_CMD, OP_REDIRECT, 0, G_COPY, "S" },
	{ "fileinto", K_CMD, OP_FILEINTO, E_FILEINTO, G_COPY | G_CREATE | G_FLAGS, "S" },
	{ "reject", K_CMD, OP_REJECT, E_REJECT, 0, "S" },
	{ "ereject", K_CMD, OP_EREJECT, E_EREJECT, 0, "S" },
	{ "vacation", K_CMD, OP_VACATION, E_VACATION, G_VAC | G_MIME, "S" },
	{ "setflag", K_CMD, OP_SETFLAG, E_IMAP4FLAGS, 0, "sL" },
	{ "addflag", K_CMD, OP_ADDFLAG, E_IMAP4FLAGS, 0, "sL" },
	{ "removeflag", K_CMD, OP_REMOVEFLAG, E_IMAP4FLAGS, 0, "sL" },
	{ "set", K_CMD, OP_SET, E_VARIABLES, G_MODS, "SS" },
	{ "include", K_CMD, OP_INCLUDE, E_INCLUDE, G_INCL, "S" },
	{ "return", K_CMD, OP_RETURN, E_INCLUDE, 0, "" },
	{ "global", K_CMD, OP_GLOBAL, E_INCLUDE, 0, "L" },
	{ "addheader", K_CMD, OP_ADDHEADER, E_EDITHEADER, G_LAST, "SS" },
	{ "deleteheader", K_CMD, OP_DELETEHEADER, E_EDITHEADER, G_INDEX | G_CMP | G_MATCH, "Sl" },
	{ "true", K_TEST, OP_TRUE, 0, 0, "" },
	{ "false", K_TEST, OP_FALSE, 0, 0, "" },
	{ "not", K_TEST, OP_NOT, 0, 0, "" },
	{ "allof", K_TEST, OP_JMPF, 0, 0, "" },
	{ "anyof", K_TEST, OP_JMPT, 0, 0, "" },
	{ "address", K_TEST, OP_ADDRESS, 0, G_CMP | G_MATCH | G_APART | G_INDEX, "LL" },
	{ "envelope", K_TEST, OP_ENVELOPE, E_ENVELOPE, G_CMP | G_MATCH | G_APART, "LL" },
	{ "header", K_TEST, OP_HEADER, 0, G_CMP | G_MATCH | G_INDEX, "LL" },
	{ "exists", K_TEST, OP_EXISTS, 0, 0, "L" },
	{ "size", K_TEST, OP_SIZE, 0, G_SIZE, "N" },
	{ "body", K_TEST, OP_BODY, E_BODY, G_CMP | G_MATCH | G_BODY, "L" },
	{ "string", K_TEST, OP_STRING, E_VARIABLES, G_CMP | G_MATCH, "LL" },
	{ "date", K_TEST, OP_DATE, E_DATE, G_CMP | G_MATCH | G_ZONE | G_INDEX, "SSL" },
	{ "currentdate", K_TEST, OP_CURRENTDATE, E_DATE, G_CMP | G_MATCH | G_ZONE, "SL" },
	{ "mailboxexists", K_TEST, OP_MAILBOXEXISTS, E_MAILBOX, 0, "L" },
	{ "duplicate", K_TEST, OP_DUPLICATE, E_DUPLICATE, G_DUP, "" },
	{ "spamtest", K_TEST, OP_SPAMTEST, E_SPAMTEST, G_CMP | G_MATCH | G_SPAM, "S" },
	{ "virustest", K_TEST, OP_VIRUSTEST, E_VIRUSTEST, G_CMP | G_MATCH, "S" },
	{ "hasflag", K_TEST, OP_HASFLAG, E_IMAP4FLAGS, G_CMP | G_MATCH, "lL" },
	{ NULL, 0, 0, 0, 0, NULL },
};

static const struct {
	const char *name;
	uint32_t bit, implies;
} ext_table[] = {
	{ "fileinto", E_FILEINTO, 0 },
	{ "reject", E_REJECT, 0 },
	{ "ereject", E_EREJECT, 0 },
	{ "envelope", E_ENVELOPE, 0 },
	{ "imap4flags", E_IMAP4FLAGS, 0 },
	{ "copy", E_COPY, 0 },
	{ "body", E_BODY, 0 },
	{ "variables", E_VARIABLES, 0 },
	{ "relational", E_RELATIONAL, 0 },
	{ "subaddress", E_SUBADDRESS, 0 },
	{ "date", E_DATE, 0 },
	{ "index", E_INDEX, 0 },
	{ "vacation", E_VACATION, 0 },
	{ "vacation-seconds", E_VACSECONDS, E_VACATION },
	{ "include", E_INCLUDE, 0 },
	{ "encoded-character", E_ENCCHAR, 0 },
	{ "editheader", E_EDITHEADER, 0 },
	{ "mailbox", E_MAILBOX, 0 },
	{ "duplicate", E_DUPLICATE, 0 },
	{ "spamtest", E_SPAMTEST, 0 },
	{ "spamtestplus", E_SPAMTESTPLUS, E_SPAMTEST },
	{ "virustest", E_VIRUSTEST, 0 },
	{ "regex", E_REGEX, 0 },
	{ "comparator-i;ascii-numeric", E_NUMERIC, 0 },
	{ "comparator-i;octet", E_OCTET, 0 },
	{ "comparator-i;ascii-casemap", E_CASEMAP, 0 },
	{ "comparator-i;unicode-casemap", E_UCASEMAP, 0 },
	{ NULL, 0, 0 },
};

const char *sieve_extensions(void)
{
	return "fileinto reject ereject envelope imap4flags copy body variables relational "
	       "subaddress date index vacation vacation-seconds include encoded-character "
	       "editheader mailbox duplicate spamtest spamtestplus virustest regex "
	       "comparator-i;ascii-numeric comparator-i;octet comparator-i;ascii-casemap "
	       "comparator-i;unicode-casemap";
}

const struct sv_cmdspec *sv_cmd_find(const char *name)
{
	for (size_t i = 0; cmds[i].name != NULL; i++)
		if (strcasecmp(cmds[i].name, name) == 0)
			return &cmds[i];
	return NULL;
}

uint32_t sv_ext_find(const char *name)
{
	for (size_t i = 0; ext_table[i].name != NULL; i++)
		if (strcmp(ext_table[i].name, name) == 0)
			return ext_table[i].bit | ext_table[i].implies;
	return 0;
}

char *sv_errf(struct sv_arena *a, uint32_t line, uint32_t col, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	char *out;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	out = sv_alloc(a, strlen(msg) + 48);
	snprintf(out, strlen(msg) + 48, "line %u, column %u: %s", line, col, msg);
	return out;
}

/* ---- tags ------------------------------------------------------------------------------- */

enum tag_arg { TA_NONE, TA_NUM, TA_STR, TA_STRS };
enum tag_what { W_CMP, W_MATCH, W_PART, W_BODYT, W_ZONEKIND, W_FLAG, W_INDEX, W_NUM, W_SL, W_MOD };

struct tagspec {
	const char *name;
	uint32_t group, ext;
	enum tag_arg arg;
	enum tag_what what;
	unsigned value; /* enum value, flag bit, field id or modifier bit */
	unsigned excl;  /* tags sharing an exclusion class may not be combined */
};

enum {
	X_NONE,
	X_MATCH,
	X_PART,
	X_BODY,
	X_ZONE,
	X_SIZE,
	X_DAYS,
	X_CMP,
	X_INCL,
	X_DUPID,
	X_CASE,
	X_FIRST,
	X_LOCATION
};

static const struct tagspec tags[] = {
	{ "comparator", G_CMP, 0, TA_STR, W_CMP, 0, X_CMP },
	{ "is", G_MATCH, 0, TA_NONE, W_MATCH, M_IS, X_MATCH },
	{ "contains", G_MATCH, 0, TA_NONE, W_MATCH, M_CONTAINS, X_MATCH },
	{ "matches", G_MATCH, 0, TA_NONE, W_MATCH, M_MATCHES, X_MATCH },
	{ "regex", G_MATCH, E_REGEX, TA_NONE, W_MATCH, M_REGEX, X_MATCH },
	{ "value", G_MATCH, E_RELATIONAL, TA_STR, W_MATCH, M_VALUE, X_MATCH },
	{ "count", G_MATCH, E_RELATIONAL, TA_STR, W_MATCH, M_COUNT, X_MATCH },
	{ "all", G_APART, 0, TA_NONE, W_PART, P_ALL, X_PART },
	{ "localpart", G_APART, 0, TA_NONE, W_PART, P_LOCAL, X_PART },
	{ "domain", G_APART, 0, TA_NONE, W_PART, P_DOMAIN, X_PART },
	{ "user", G_APART, E_SUBADDRESS, TA_NONE, W_PART, P_USER, X_PART },
	{ "detail", G_APART, E_SUBADDRESS, TA_NONE, W_PART, P_DETAIL, X_PART },
	{ "raw", G_BODY, 0, TA_NONE, W_BODYT, B_RAW, X_BODY },
	{ "text", G_BODY, 0, TA_NONE, W_BODYT, B_TEXT, X_BODY },
	{ "content", G_BODY, 0, TA_STRS, W_BODYT, B_CONTENT, X_BODY },
	{ "zone", G_ZONE, 0, TA_STR, W_ZONEKIND, Z_ZONE, X_ZONE },
	{ "originalzone", G_ZONE, 0, TA_NONE, W_ZONEKIND, Z_ORIGINAL, X_ZONE },
	{ "index", G_INDEX, E_INDEX, TA_NUM, W_INDEX, 0, X_NONE },
	{ "last", G_INDEX, E_INDEX, TA_NONE, W_FLAG, I_LAST, X_NONE },
	{ "last", G_LAST, 0, TA_NONE, W_FLAG, I_LAST, X_NONE },
	{ "last", G_DUP, 0, TA_NONE, W_FLAG, I_LAST, X_NONE },
	{ "copy", G_COPY, E_COPY, TA_NONE, W_FLAG, I_COPY, X_NONE },
	{ "create", G_CREATE, E_MAILBOX, TA_NONE, W_FLAG, I_CREATE, X_NONE },
	{ "flags", G_FLAGS, E_IMAP4FLAGS, TA_STRS, W_SL, F_FLAGLIST, X_NONE },
	{ "days", G_VAC, 0, TA_NUM, W_NUM, 0, X_DAYS },
	{ "seconds", G_VAC, E_VACSECONDS, TA_NUM, W_NUM, I_SECONDS, X_DAYS },
	{ "subject", G_VAC, 0, TA_STR, W_SL, F_SUBJECT, X_NONE },
	{ "from", G_VAC, 0, TA_STR, W_SL, F_FROM, X_NONE },
	{ "addresses", G_VAC, 0, TA_STRS, W_SL, F_ADDRESSES, X_NONE },
	{ "handle", G_VAC, 0, TA_STR, W_SL, F_HANDLE, X_NONE },
	{ "mime", G_MIME, 0, TA_NONE, W_FLAG, I_MIME, X_NONE },
	{ "over", G_SIZE, 0, TA_NONE, W_FLAG, I_OVER, X_SIZE },
	{ "under", G_SIZE, 0, TA_NONE, W_FLAG, I_UNDER, X_SIZE },
	{ "percent", G_SPAM, E_SPAMTESTPLUS, TA_NONE, W_FLAG, I_PERCENT, X_NONE },
	{ "personal", G_INCL, 0, TA_NONE, W_FLAG, 0, X_INCL },
	{ "global", G_INCL, 0, TA_NONE, W_FLAG, I_GLOBAL, X_INCL },
	{ "once", G_INCL, 0, TA_NONE, W_FLAG, I_ONCE, X_NONE },
	{ "optional", G_INCL, 0, TA_NONE, W_FLAG, I_OPTIONAL, X_NONE },
	{ "lower", G_MODS, 0, TA_NONE, W_MOD, MOD_LOWER, X_CASE },
	{ "upper", G_MODS, 0, TA_NONE, W_MOD, MOD_UPPER, X_CASE },
	{ "lowerfirst", G_MODS, 0, TA_NONE, W_MOD, MOD_LOWERFIRST, X_FIRST },
	{ "upperfirst", G_MODS, 0, TA_NONE, W_MOD, MOD_UPPERFIRST, X_FIRST },
	{ "quotewildcard", G_MODS, 0, TA_NONE, W_MOD, MOD_QUOTEWILDCARD, X_NONE },
	{ "length", G_MODS, 0, TA_NONE, W_MOD, MOD_LENGTH, X_NONE },
	{ "handle", G_DUP, 0, TA_STR, W_SL, F_HANDLE, X_NONE },
	{ "header", G_DUP, 0, TA_STR, W_SL, F_HEADER, X_DUPID },
	{ "uniqueid", G_DUP, 0, TA_STR, W_SL, F_UNIQUEID, X_DUPID },
	{ "seconds", G_DUP, 0, TA_NUM, W_NUM, I_SECONDS, X_NONE },
	{ NULL, 0, 0, 0, 0, 0, 0 },
};

static const struct tagspec *tag_find(const char *name, uint32_t groups, bool *exists_r)
{
	*exists_r = false;
	for (size_t i = 0; tags[i].name != NULL; i++) {
		if (strcasecmp(tags[i].name, name) != 0)
			continue;
		*exists_r = true;
		if (tags[i].group & groups)
			return &tags[i];
	}
	return NULL;
}

static int relop_of(const struct sv_str *s)
{
	static const char *const ops[] = { "gt", "ge", "lt", "le", "eq", "ne" };

	for (int i = 0; i < 6; i++)
		if (s->len == 2 && strncasecmp(s->p, ops[i], 2) == 0)
			return i;
	return -1;
}

static int comparator_of(const struct sv_str *s, uint32_t exts, bool *needs_req)
{
	*needs_req = false;
	if (strcmp(s->p, "i;ascii-casemap") == 0)
		return CMP_CASEMAP;
	if (strcmp(s->p, "i;octet") == 0)
		return CMP_OCTET;
	if (strcmp(s->p, "i;ascii-numeric") == 0) {
		*needs_req = !(exts & E_NUMERIC);
		return CMP_NUMERIC;
	}
	if (strcmp(s->p, "i;unicode-casemap") == 0) {
		*needs_req = !(exts & E_UCASEMAP);
		return CMP_UNICODE_CASEMAP;
	}
	return -1;
}

static const char *const date_parts[] = { "year",  "month",  "day",     "date", "julian",
					  "hour",  "minute", "second",  "time", "iso8601",
					  "std11", "zone",   "weekday", NULL };

static bool date_part_ok(const struct sv_str *s)
{
	for (size_t i = 0; date_parts[i] != NULL; i++)
		if (strcasecmp(s->p, date_parts[i]) == 0)
			return true;
	return false;
}

/* the tag's own argument, which must follow it */
static int tag_value(const struct sv_node *n, size_t *i, const struct tagspec *ts,
		     struct sv_arena *a, struct sv_cins *ci, char **error_r)
{
	const struct sv_arg *tag = &n->args[*i], *v;

	if (ts->arg == TA_NONE)
		return 0;
	if (*i + 1 >= n->nargs)
		goto missing;
	v = &n->args[++*i];
	if (ts->arg == TA_NUM) {
		if (v->type != A_NUM)
			goto missing;
		return 0;
	}
	if (v->type != A_STRS || (ts->arg == TA_STR && (v->list || v->ns != 1)))
		goto missing;
	return 0;
missing:
	*error_r = sv_errf(a, tag->line, tag->col, "tag :%s needs %s after it", ts->name,
			   ts->arg == TA_NUM   ? "a number"
			   : ts->arg == TA_STR ? "a string"
					       : "a string list");
	(void)ci;
	return -1;
}

static int apply_tag(const struct sv_node *n, size_t i, const struct tagspec *ts, uint32_t exts,
		     struct sv_arena *a, struct sv_cins *ci, char **error_r)
{
	const struct sv_arg *tag = &n->args[i], *v = ts->arg != TA_NONE ? &n->args[i + 1] : NULL;
	struct sv_ins *in = &ci->v;
	bool req;
	int x;

	switch (ts->what) {
	case W_CMP:
		if ((x = comparator_of(&v->s[0], exts, &req)) < 0 || req) {
			*error_r = sv_errf(a, v->line, v->col,
					   x < 0 ? "unknown comparator \"%s\""
						 : "comparator \"%s\" needs require "
						   "\"comparator-%s\"",
					   v->s[0].p, v->s[0].p);
			return -1;
		}
		in->cmp = (uint8_t)x;
		break;
	case W_MATCH:
		in->match = (uint8_t)ts->value;
		if (v != NULL) {
			if ((x = relop_of(&v->s[0])) < 0) {
				*error_r = sv_errf(a, v->line, v->col,
						   "unknown relational operator "
						   "\"%s\" (gt, ge, lt, le, eq, ne)",
						   v->s[0].p);
				return -1;
			}
			in->relop = (uint8_t)x;
		}
		break;
	case W_PART:
		in->part = (uint8_t)ts->value;
		break;
	case W_BODYT:
		in->bodyt = (uint8_t)ts->value;
		if (v != NULL)
			ci->sl[F_CONTENT] = v;
		break;
	case W_ZONEKIND:
		in->zonekind = (uint8_t)ts->value;
		if (v != NULL)
			ci->sl[F_ZONE] = v;
		break;
	case W_FLAG:
		in->flags |= ts->value;
		break;
	case W_INDEX:
		if (v->num == 0 || v->num > INT32_MAX) {
			*error_r = sv_errf(a, v->line, v->col, ":index must be 1 or more");
			return -1;
		}
		in->index = (int64_t)v->num;
		in->flags |= I_HAS_INDEX;
		break;
	case W_NUM:
		in->num = v->num > INT64_MAX / 86400 ? INT64_MAX / 86400 : (int64_t)v->num;
		in->flags |= I_HAS_NUM | ts->value;
		break;
	case W_SL:
		ci->sl[ts->value] = v;
		if (ts->value == F_FLAGLIST)
			in->flags |= I_HAS_FLAGS;
		break;
	case W_MOD:
		in->mods |= ts->value;
		break;
	}
	(void)tag;
	return 0;
}

/* the tagged arguments at the front; *first_pos_r = index of the first positional one */
static int check_tags(const struct sv_node *n, const struct sv_cmdspec *cs, uint32_t exts,
		      struct sv_arena *a, struct sv_cins *ci, size_t *first_pos_r, char **error_r)
{
	unsigned seen_excl = 0;
	size_t i;

	for (i = 0; i < n->nargs && n->args[i].type == A_TAG; i++) {
		const struct sv_arg *tag = &n->args[i];
		bool exists;
		const struct tagspec *ts = tag_find(tag->tag, cs->groups, &exists);

		if (ts == NULL) {
			*error_r = sv_errf(a, tag->line, tag->col, "%s tag :%s for '%s'",
					   exists ? "unexpected" : "unknown", tag->tag, cs->name);
			return -1;
		}
		if (ts->ext && !(exts & ts->ext)) {
			*error_r = sv_errf(a, tag->line, tag->col,
					   "tag :%s needs a require of its "
					   "extension",
					   tag->tag);
			return -1;
		}
		if (ts->excl != X_NONE && (seen_excl & (1u << ts->excl))) {
			*error_r = sv_errf(a, tag->line, tag->col,
					   "tag :%s conflicts with an "
					   "earlier tag",
					   tag->tag);
			return -1;
		}
		seen_excl |= 1u << ts->excl;
		if (tag_value(n, &i, ts, a, ci, error_r) < 0 ||
		    apply_tag(n, i - (ts->arg != TA_NONE), ts, exts, a, ci, error_r) < 0)
			return -1;
	}
	*first_pos_r = i;
	return 0;
}

static int check_positional(const struct sv_node *n, const struct sv_cmdspec *cs, size_t first,
			    struct sv_arena *a, struct sv_cins *ci, char **error_r)
{
	size_t npos = n->nargs - first, need = 0, opt = 0, slot = F_SL0;

	for (const char *p = cs->pos; *p; p++)
		*p >= 'a' ? opt++ : need++;
	for (size_t i = first; i < n->nargs; i++)
		if (n->args[i].type == A_TAG) {
			*error_r = sv_errf(a, n->args[i].line, n->args[i].col,
					   "tag :%s must come "
					   "before the other arguments",
					   n->args[i].tag);
			return -1;
		}
	if (npos < need || npos > need + opt) {
		*error_r = sv_errf(a, n->line, n->col, "'%s' takes %zu argument%s%s, not %zu",
				   cs->name, need, need == 1 ? "" : "s",
				   opt ? " (and an optional one)" : "", npos);
		return -1;
	}
	bool skip_opt = npos == need;
	size_t ai = first;

	for (const char *p = cs->pos; *p; p++) {
		char c = *p;

		if (c >= 'a') {
			if (skip_opt) {
				slot++;
				continue;
			}
			c = (char)(c - 'a' + 'A');
		}
		const struct sv_arg *v = &n->args[ai++];
		if (c == 'N') {
			if (v->type != A_NUM)
				goto bad;
			ci->v.num = (int64_t)(v->num > INT64_MAX ? INT64_MAX : v->num);
			ci->v.flags |= I_HAS_NUM;
			continue;
		}
		if (v->type != A_STRS || (c == 'S' && (v->list || v->ns != 1)))
			goto bad;
		ci->sl[slot++] = v;
		continue;
	bad:
		*error_r = sv_errf(a, v->line, v->col, "'%s' expects %s here", cs->name,
				   c == 'N'   ? "a number"
				   : c == 'S' ? "a string"
					      : "a string list");
		return -1;
	}
	return 0;
}

/* checks that are about one command's meaning rather than its shape */
static int check_semantics(const struct sv_node *n, const struct sv_cmdspec *cs,
			   struct sv_arena *a, struct sv_cins *ci, char **error_r)
{
	struct sv_ins *in = &ci->v;

	if (in->match == M_COUNT || in->match == M_VALUE) {
		if (in->match == M_COUNT && cs->op != OP_ADDRESS && cs->op != OP_HEADER &&
		    cs->op != OP_ENVELOPE && cs->op != OP_STRING && cs->op != OP_HASFLAG &&
		    cs->op != OP_DATE && cs->op != OP_CURRENTDATE) {
			*error_r = sv_errf(a, n->line, n->col, ":count is not allowed for '%s'",
					   cs->name);
			return -1;
		}
	}
	if (cs->op == OP_SIZE && !(in->flags & (I_OVER | I_UNDER))) {
		*error_r = sv_errf(a, n->line, n->col, "size needs :over or :under");
		return -1;
	}
	if (cs->op == OP_DATE || cs->op == OP_CURRENTDATE) {
		const struct sv_arg *dp = ci->sl[cs->op == OP_DATE ? F_SL1 : F_SL0];

		if (!date_part_ok(&dp->s[0]) && memchr(dp->s[0].p, '$', dp->s[0].len) == NULL) {
			*error_r = sv_errf(a, dp->line, dp->col, "unknown date part \"%s\"",
					   dp->s[0].p);
			return -1;
		}
	}
	if ((in->flags & I_LAST) && cs->op != OP_ADDHEADER && cs->op != OP_DUPLICATE &&
	    !(in->flags & I_HAS_INDEX)) {
		*error_r = sv_errf(a, n->line, n->col, ":last needs :index");
		return -1;
	}
	if (cs->op == OP_VACATION && (in->flags & I_HAS_NUM) && in->num == 0 &&
	    !(in->flags & I_SECONDS))
		in->num = 1; /* RFC 5230 4.1: :days 0 is treated as 1 */
	if (cs->op == OP_SET) {
		const struct sv_str *name = &ci->sl[F_SL0]->s[0];

		for (size_t i = 0; i < name->len; i++) {
			char c = name->p[i];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			      (i > 0 && c >= '0' && c <= '9'))) {
				*error_r = sv_errf(a, ci->sl[F_SL0]->line, ci->sl[F_SL0]->col,
						   "bad variable name \"%s\"", name->p);
				return -1;
			}
		}
		if (name->len == 0) {
			*error_r = sv_errf(a, n->line, n->col, "empty variable name");
			return -1;
		}
	}
	return 0;
}

int sv_check_args(const struct sv_node *n, const struct sv_cmdspec *cs, uint32_t exts,
		  struct sv_arena *a, struct sv_cins *ci, char **error_r)
{
	size_t first;

	memset(ci, 0, sizeof(*ci));
	ci->v.op = cs->op;
	if (check_tags(n, cs, exts, a, ci, &first, error_r) < 0 ||
	    check_positional(n, cs, first, a, ci, error_r) < 0)
		return -1;
	return check_semantics(n, cs, a, ci, error_r);
}

/* msgcache_imap.c — owns the IMAP text of the cache (RFC 3501 section 7.4.2): strings (quoted or
 * literal), parameter lists, a part's body fields and extension data, and the ENVELOPE with its
 * address lists (groups as start/end markers, sender and reply-to defaulting to from). */
#include <string.h>

#include "common/msgcache_private.h"
#include "common/rfc5322.h"

int mc_put_string(struct buf *o, const char *p, size_t n)
{
	bool literal = false;
	size_t nul = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\0')
			nul++;
		else if (c >= 0x80 || c == '\r' || c == '\n')
			literal = true;
	}
	if (literal) {
		rc = buf_printf(o, "{%zu}\r\n", n - nul);
		for (size_t i = 0; i < n && rc == 0;) {
			size_t j = i;

			while (j < n && p[j] != '\0')
				j++;
			rc = buf_append(o, p + i, j - i);
			i = j + 1;
		}
		return rc;
	}
	rc = buf_putc(o, '"');
	for (size_t i = 0; i < n && rc == 0;) {
		size_t j = i;

		while (j < n && p[j] != '"' && p[j] != '\\' && p[j] != '\0')
			j++;
		rc = buf_append(o, p + i, j - i);
		if (j < n && p[j] != '\0' && rc == 0)
			rc = buf_putc(o, '\\') | buf_putc(o, p[j]);
		i = j + 1;
	}
	return rc | buf_putc(o, '"');
}

static int put_view(struct buf *o, struct str_view v)
{
	return mc_put_string(o, v.p, v.len);
}

int mc_put_nstring(struct buf *o, const struct buf *v, bool present)
{
	if (!present)
		return buf_puts(o, "NIL");
	return mc_put_string(o, v->data != NULL ? v->data : "", v->len);
}

/* A parameter list; add_charset: a text part without one gets charset us-ascii (RFC 2045
   5.2), added after the part's own parameters. */
static int put_params(struct buf *o, const struct rfc5322_ctype *ct, bool add_charset)
{
	int rc;

	for (unsigned i = 0; i < ct->nparams && add_charset; i++)
		if (str_caseeq(ct->params[i].name.p, ct->params[i].name.len, "charset", 7))
			add_charset = false;
	if (ct->nparams == 0 && !add_charset)
		return buf_puts(o, "NIL");
	rc = buf_putc(o, '(');
	for (unsigned i = 0; i < ct->nparams; i++) {
		if (i > 0)
			rc |= buf_putc(o, ' ');
		rc |= put_view(o, ct->params[i].name);
		rc |= buf_putc(o, ' ');
		rc |= put_view(o, ct->params[i].value);
	}
	if (add_charset)
		rc |= buf_puts(o, ct->nparams > 0 ? " \"charset\" \"us-ascii\""
						  : "\"charset\" \"us-ascii\"");
	return rc | buf_putc(o, ')');
}

int mc_render_fields(struct msgcache_builder *b, const struct rfc5322_part *p, bool multi)
{
	const struct rfc5322_ctype *ct = p->ctype;
	struct buf *o = &b->arena;
	int rc;

	if (multi)
		return put_view(o, ct->subtype);
	rc = put_view(o, ct->type);
	rc |= buf_putc(o, ' ');
	rc |= put_view(o, ct->subtype);
	rc |= buf_putc(o, ' ');
	rc |= put_params(o, ct, p->is_text);
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->mime[MC_MIME_ID], b->mime_seen[MC_MIME_ID]);
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->mime[MC_MIME_DESC], b->mime_seen[MC_MIME_DESC]);
	rc |= buf_putc(o, ' ');
	if (b->mime_seen[MC_MIME_CTE] && b->mime[MC_MIME_CTE].len > 0)
		rc |= mc_put_nstring(o, &b->mime[MC_MIME_CTE], true);
	else
		rc |= buf_puts(o, "\"7bit\"");
	return rc;
}

static int put_disposition(struct msgcache_builder *b, struct buf *o)
{
	struct rfc5322_ctype d;
	int rc;

	if (!b->mime_seen[MC_MIME_DISP])
		return buf_puts(o, "NIL");
	buf_reset(&b->scratch);
	rfc5322_ctype_parse(b->mime[MC_MIME_DISP].data, b->mime[MC_MIME_DISP].len, false,
			    &b->scratch, &d);
	if (!d.valid)
		return buf_puts(o, "NIL");
	rc = buf_putc(o, '(');
	rc |= put_view(o, d.type);
	rc |= buf_putc(o, ' ');
	rc |= put_params(o, &d, false);
	return rc | buf_putc(o, ')');
}

/* Content-Language: a list of tags separated by commas, white space and comments. */
static int put_language(struct msgcache_builder *b, struct buf *o)
{
	const char *p = b->mime[MC_MIME_LANG].data;
	size_t n = b->mime[MC_MIME_LANG].len, i = 0, count = 0, mark = o->len;
	int rc = buf_putc(o, '(');

	while (b->mime_seen[MC_MIME_LANG] && i < n) {
		if (p[i] == '(') {
			while (i < n && p[i] != ')')
				i++;
			i++;
			continue;
		}
		size_t s = i;

		while (i < n && strchr(" \t,(", p[i]) == NULL)
			i++;
		if (i > s) {
			rc |= count++ > 0 ? buf_putc(o, ' ') : 0;
			rc |= mc_put_string(o, p + s, i - s);
		} else {
			i++;
		}
	}
	if (count == 0) {
		buf_truncate(o, mark);
		return buf_puts(o, "NIL");
	}
	return rc | buf_putc(o, ')');
}

int mc_render_ext(struct msgcache_builder *b, const struct rfc5322_part *p, bool multi)
{
	struct buf *o = &b->arena;
	int rc;

	if (multi)
		rc = put_params(o, p->ctype, false);
	else
		rc = mc_put_nstring(o, &b->mime[MC_MIME_MD5], b->mime_seen[MC_MIME_MD5]);
	rc |= buf_putc(o, ' ');
	rc |= put_disposition(b, o);
	rc |= buf_putc(o, ' ');
	rc |= put_language(b, o);
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->mime[MC_MIME_LOC], b->mime_seen[MC_MIME_LOC]);
	return rc;
}

/* ---- ENVELOPE ---- */

struct addr_out {
	struct buf *o;
	int rc;
};

static int put_nview(struct buf *o, struct str_view v)
{
	return v.len == 0 ? buf_puts(o, "NIL") : put_view(o, v);
}

static void addr_cb(void *ctx, const struct rfc5322_addr *a)
{
	struct addr_out *ao = ctx;
	struct buf *o = ao->o;

	if (a->is_group_end) {
		ao->rc |= buf_puts(o, "(NIL NIL NIL NIL)");
		return;
	}
	if (a->is_group_start) {
		ao->rc |= buf_puts(o, "(NIL NIL ");
		ao->rc |= put_view(o, a->name);
		ao->rc |= buf_puts(o, " NIL)");
		return;
	}
	ao->rc |= buf_putc(o, '(');
	ao->rc |= put_nview(o, a->name);
	ao->rc |= buf_putc(o, ' ');
	ao->rc |= put_nview(o, a->route);
	ao->rc |= buf_putc(o, ' ');
	ao->rc |= a->mailbox.len > 0 ? put_view(o, a->mailbox)
				     : buf_puts(o, "\"MISSING_MAILBOX\"");
	ao->rc |= buf_putc(o, ' ');
	ao->rc |= a->domain.len > 0 ? put_view(o, a->domain) : buf_puts(o, "\"MISSING_DOMAIN\"");
	ao->rc |= buf_putc(o, ')');
}

/* Renders an address list; 1 when it had addresses, 0 when NIL was written, -1 ceiling. */
static int put_addrs(struct buf *o, const struct buf *v, bool present)
{
	struct addr_out ao = { o, 0 };
	size_t mark = o->len;

	if (present && v->len > 0) {
		ao.rc = buf_putc(o, '(');
		if (rfc5322_addr_parse(v->data, v->len, addr_cb, &ao) > 0)
			return ao.rc < 0 || buf_putc(o, ')') < 0 ? -1 : 1;
		buf_truncate(o, mark);
	}
	return buf_puts(o, "NIL");
}

static int put_addrs_or_from(struct msgcache_builder *b, struct buf *o, enum mc_env which)
{
	size_t mark = o->len;
	int rc = put_addrs(o, &b->env[which], b->env_seen[which]);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	buf_truncate(o, mark);
	return put_addrs(o, &b->env[MC_ENV_FROM], b->env_seen[MC_ENV_FROM]) < 0 ? -1 : 0;
}

int mc_render_envelope(struct msgcache_builder *b, struct buf *o)
{
	int rc = buf_putc(o, '(');

	rc |= mc_put_nstring(o, &b->env[MC_ENV_DATE], b->env_seen[MC_ENV_DATE]);
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->env[MC_ENV_SUBJECT], b->env_seen[MC_ENV_SUBJECT]);
	rc |= buf_putc(o, ' ');
	rc |= put_addrs(o, &b->env[MC_ENV_FROM], b->env_seen[MC_ENV_FROM]) < 0 ? -1 : 0;
	rc |= buf_putc(o, ' ');
	rc |= put_addrs_or_from(b, o, MC_ENV_SENDER);
	rc |= buf_putc(o, ' ');
	rc |= put_addrs_or_from(b, o, MC_ENV_REPLY_TO);
	for (enum mc_env e = MC_ENV_TO; e <= MC_ENV_BCC; e++) {
		rc |= buf_putc(o, ' ');
		rc |= put_addrs(o, &b->env[e], b->env_seen[e]) < 0 ? -1 : 0;
	}
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->env[MC_ENV_IN_REPLY_TO], b->env_seen[MC_ENV_IN_REPLY_TO]);
	rc |= buf_putc(o, ' ');
	rc |= mc_put_nstring(o, &b->env[MC_ENV_MESSAGE_ID], b->env_seen[MC_ENV_MESSAGE_ID]);
	return rc | buf_putc(o, ')');
}

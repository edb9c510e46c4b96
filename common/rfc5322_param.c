/* rfc5322_param.c — owns Content-Type / Content-Disposition parsing: type/subtype tokens,
 * parameters with quoted values and comments, RFC 2231 continuations merged into one parameter
 * ("name" when no piece was encoded, "name*" with charset'lang'value when one was). Names keep
 * their case (BODYSTRUCTURE shows them as the message wrote them); compare them
 * case-insensitively. */
#include <string.h>

#include "common/rfc5322.h"

#define RAW_MAX (RFC5322_PARAMS_MAX * 2)

struct raw_param {
	struct str_view base; /* name without the RFC 2231 suffix, as written */
	struct str_view value;
	int section;   /* -1: no section */
	bool extended; /* ends in '*' */
	bool used;
};

static bool is_tspecial(char c)
{
	return strchr("()<>@,;:\\\"/[]?=", c) != NULL;
}

static size_t skip_cfws(const char *p, size_t len, size_t i)
{
	while (i < len) {
		if (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') {
			i++;
		} else if (p[i] == '(') {
			i = rfc5322_skip_comment(p, len, i);
		} else {
			break;
		}
	}
	return i;
}

static size_t token_end(const char *p, size_t len, size_t i)
{
	while (i < len && (unsigned char)p[i] > ' ' && p[i] != 0x7f && !is_tspecial(p[i]))
		i++;
	return i;
}

/* Copies s into the reserved scratch space (never reallocates: room was reserved). */
static struct str_view scratch_put(struct buf *sc, const char *s, size_t n)
{
	struct str_view v = { sc->data + sc->len, n };

	memcpy(sc->data + sc->len, s, n);
	sc->len += n;
	sc->data[sc->len] = '\0';
	return v;
}

static size_t parse_value(const char *p, size_t len, size_t i, struct buf *sc, struct str_view *v)
{
	if (i < len && p[i] == '"') {
		v->p = sc->data + sc->len;
		v->len = 0;
		for (i++; i < len && p[i] != '"'; i++) {
			if (p[i] == '\\' && i + 1 < len)
				i++;
			sc->data[sc->len++] = p[i];
			v->len++;
		}
		sc->data[sc->len] = '\0';
		return i < len ? i + 1 : i;
	}
	size_t e = i;

	while (e < len && p[e] != ';' && p[e] != ' ' && p[e] != '\t' && p[e] != '"')
		e++;
	v->p = p + i;
	v->len = e - i;
	return e;
}

static void split_2231(struct raw_param *r, struct str_view name)
{
	const char *star = memchr(name.p, '*', name.len);

	r->section = -1;
	r->extended = false;
	r->base = name;
	if (star == NULL)
		return;
	size_t rest = name.len - (size_t)(star - name.p) - 1;
	const char *s = star + 1;
	int sec = 0;
	size_t d = 0;

	while (d < rest && d < 4 && s[d] >= '0' && s[d] <= '9')
		sec = sec * 10 + (s[d++] - '0');
	if (d == rest && d > 0) {
		r->section = sec;
	} else if (d + 1 == rest && s[d] == '*') {
		r->section = d > 0 ? sec : -1;
		r->extended = true;
	} else {
		return; /* not RFC 2231: keep the name as written */
	}
	r->base.len = (size_t)(star - name.p);
}

/* Merges the sections of r[i]'s base name into one parameter appended to ct. */
static void merge_2231(struct raw_param *r, unsigned n, unsigned i, struct buf *sc,
		       struct rfc5322_ctype *ct)
{
	struct rfc5322_param *out = &ct->params[ct->nparams++];
	bool ext = false;
	char *start;

	for (unsigned j = i; j < n; j++)
		if (!r[j].used && r[j].section >= 0 &&
		    str_caseeq(r[j].base.p, r[j].base.len, r[i].base.p, r[i].base.len))
			ext |= r[j].extended && r[j].section == 0;
	start = sc->data + sc->len;
	(void)scratch_put(sc, r[i].base.p, r[i].base.len);
	if (ext)
		(void)scratch_put(sc, "*", 1);
	out->name.p = start;
	out->name.len = (size_t)(sc->data + sc->len - start);
	start = sc->data + sc->len;
	for (int want = 0; want < 1000; want++) {
		bool found = false;

		for (unsigned j = i; j < n; j++) {
			if (r[j].used || r[j].section != want ||
			    !str_caseeq(r[j].base.p, r[j].base.len, r[i].base.p, r[i].base.len))
				continue;
			(void)scratch_put(sc, r[j].value.p, r[j].value.len);
			r[j].used = found = true;
			break;
		}
		if (!found)
			break;
	}
	out->value.p = start;
	out->value.len = (size_t)(sc->data + sc->len - start);
}

static void finish_params(struct raw_param *r, unsigned n, struct buf *sc,
			  struct rfc5322_ctype *ct)
{
	for (unsigned i = 0; i < n && ct->nparams < RFC5322_PARAMS_MAX; i++) {
		if (r[i].used)
			continue;
		if (r[i].section >= 0) {
			merge_2231(r, n, i, sc, ct);
			continue;
		}
		r[i].used = true;
		char *start = sc->data + sc->len;

		(void)scratch_put(sc, r[i].base.p, r[i].base.len);
		if (r[i].extended)
			(void)scratch_put(sc, "*", 1);
		ct->params[ct->nparams].name.p = start;
		ct->params[ct->nparams].name.len = (size_t)(sc->data + sc->len - start);
		ct->params[ct->nparams++].value = r[i].value;
	}
}

void rfc5322_ctype_parse(const char *value, size_t len, bool want_subtype, struct buf *sc,
			 struct rfc5322_ctype *ct)
{
	struct raw_param raw[RAW_MAX];
	unsigned nraw = 0;
	size_t i, e;

	memset(ct, 0, sizeof(*ct));
	/* names twice, values twice (unquoted, merged): 4 * len; reserve so views stay valid */
	if (buf_reserve(sc, 4 * len + 4 * RAW_MAX + 16) == NULL)
		len = 0;
	i = skip_cfws(value, len, 0);
	e = token_end(value, len, i);
	ct->type.p = value + i;
	ct->type.len = e - i;
	i = skip_cfws(value, len, e);
	if (want_subtype) {
		if (i < len && value[i] == '/') {
			i = skip_cfws(value, len, i + 1);
			e = token_end(value, len, i);
			ct->subtype.p = value + i;
			ct->subtype.len = e - i;
			i = skip_cfws(value, len, e);
		}
		ct->valid = ct->type.len > 0 && ct->subtype.len > 0;
	} else {
		ct->valid = ct->type.len > 0;
	}
	while (i < len && nraw < RAW_MAX) {
		struct str_view name;

		if (value[i] != ';') { /* garbage: skip to the next parameter */
			const char *semi = memchr(value + i, ';', len - i);

			if (semi == NULL)
				break;
			i = (size_t)(semi - value);
		}
		i = skip_cfws(value, len, i + 1);
		e = token_end(value, len, i);
		if (e == i)
			continue;
		name.p = value + i;
		name.len = e - i;
		i = skip_cfws(value, len, e);
		if (i >= len || value[i] != '=')
			continue;
		i = skip_cfws(value, len, i + 1);
		struct raw_param *r = &raw[nraw++];

		split_2231(r, name);
		r->used = false;
		i = parse_value(value, len, i, sc, &r->value);
		i = skip_cfws(value, len, i);
	}
	finish_params(raw, nraw, sc, ct);
}

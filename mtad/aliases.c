/* aliases.c — owns the aliases map: the file's parser (logical lines, continuations,
 * comments, name: target lists) and the expansion of an address into its final recipients
 * (nested aliases, a name's own name in its list, loops and fan-out bounded). See aliases.h
 * for the format. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mtad/aliases.h"

struct alias_entry {
	char *name; /* lower case */
	char **t;   /* targets as written */
	size_t nt;
	unsigned line;
};

struct aliases {
	struct alias_entry *e;
	size_t n, cap;
};

struct parse {
	struct aliases *al;
	const char *fname;
	char *err;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct alias_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void entry_free(struct alias_entry *e)
{
	free(e->name);
	aliases_strv_free(&e->t, e->nt);
}

void aliases_strv_free(char ***vp, size_t n)
{
	char **v = *vp;

	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	*vp = NULL;
}

void aliases_free(struct aliases **alp)
{
	struct aliases *al = *alp;

	if (al == NULL)
		return;
	for (size_t i = 0; i < al->n; i++)
		entry_free(&al->e[i]);
	free(al->e);
	free(al);
	*alp = NULL;
}

size_t aliases_count(const struct aliases *al)
{
	return al != NULL ? al->n : 0;
}

static int fail(struct parse *p, unsigned line, const char *why)
{
	if (p->err == NULL)
		p->err = xasprintf("%s:%u: %s", p->fname, line, why);
	return -1;
}

/* A name or target: printable, no spaces, quotes, brackets or commas, at most one '@' and
   not at either end, not too long. */
static const char *addr_refusal(const char *p, size_t len)
{
	const char *at = NULL;

	if (len == 0)
		return "empty address";
	if (len > ALIASES_ADDR_MAX)
		return "address too long";
	if (p[0] == '|')
		return "command targets are not supported";
	if (p[0] == '/')
		return "file targets are not supported";
	if (len >= 9 && str_caseprefix(p, len, ":include:"))
		return ":include: targets are not supported";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c <= ' ' || c == 0x7f || c == '"' || c == '<' || c == '>' || c == ',' ||
		    c == ':' || c == '\\')
			return "invalid character in address";
		if (c == '@') {
			if (at != NULL)
				return "more than one @ in address";
			at = p + i;
		}
	}
	if (at == p || at == p + len - 1)
		return "incomplete address";
	return NULL;
}

static bool is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t';
}

/* One logical line "name: target, ..." (comments and continuations already joined). */
static int parse_entry(struct parse *p, const char *s, size_t len, unsigned line)
{
	const char *colon = memchr(s, ':', len), *why;
	struct alias_entry e = { .line = line };
	struct str_view name;
	size_t i;

	if (colon == NULL)
		return fail(p, line, "expected name: target, ...");
	name = str_trim((struct str_view){ s, (size_t)(colon - s) });
	if ((why = addr_refusal(name.p, name.len)) != NULL)
		return fail(p, line, why);
	i = (size_t)(colon - s) + 1;
	while (i < len) {
		size_t start;

		while (i < len && is_sep(s[i]))
			i++;
		start = i;
		/* ":include:" holds colons: take it whole so it is refused by name */
		while (i < len && !is_sep(s[i]))
			i++;
		if (i == start)
			break;
		if ((why = addr_refusal(s + start, i - start)) != NULL ||
		    (e.nt >= ALIASES_TARGETS_MAX && (why = "too many targets") != NULL)) {
			aliases_strv_free(&e.t, e.nt);
			return fail(p, line, why);
		}
		e.t = xreallocarray(e.t, e.nt + 1, sizeof(*e.t));
		e.t[e.nt++] = xmemdup0(s + start, i - start);
	}
	if (e.nt == 0)
		return fail(p, line, "alias without targets");
	e.name = xmemdup0(name.p, name.len);
	str_lower(e.name, name.len);
	if (p->al->n == p->al->cap) {
		p->al->cap = p->al->cap ? p->al->cap * 2 : 16;
		p->al->e = xreallocarray(p->al->e, p->al->cap, sizeof(*p->al->e));
	}
	p->al->e[p->al->n++] = e;
	return 0;
}

/* Joins physical lines into logical ones and parses each. */
static int parse_lines(struct parse *p, const char *text, size_t len)
{
	struct buf_line {
		char *p;
		size_t len, cap;
		unsigned first;
	} cur = { 0 };
	unsigned lineno = 0;
	size_t off = 0;
	int rc = 0;

	while (rc == 0 && off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t ll = nl != NULL ? (size_t)(nl - (text + off)) : len - off;
		const char *l = text + off;
		struct str_view t;

		off += ll + (nl != NULL);
		lineno++;
		if (ll > 0 && l[ll - 1] == '\r')
			ll--;
		if (memchr(l, '\0', ll) != NULL) {
			rc = fail(p, lineno, "NUL byte");
			break;
		}
		t = str_trim((struct str_view){ l, ll });
		if (t.len == 0 || t.p[0] == '#')
			continue;
		if (l[0] == ' ' || l[0] == '\t') {
			if (cur.len == 0) {
				rc = fail(p, lineno, "continuation line without an entry");
				break;
			}
		} else if (cur.len > 0) {
			rc = parse_entry(p, cur.p, cur.len, cur.first);
			cur.len = 0;
			if (rc < 0)
				break;
		}
		if (cur.len == 0)
			cur.first = lineno;
		if (cur.len + t.len + 1 > ALIASES_LINE_MAX) {
			rc = fail(p, lineno, "entry too long");
			break;
		}
		if (cur.len + t.len + 1 > cur.cap) {
			cur.cap = (cur.len + t.len + 1) * 2;
			cur.p = xreallocarray(cur.p, cur.cap, 1);
		}
		if (cur.len > 0)
			cur.p[cur.len++] = ' ';
		memcpy(cur.p + cur.len, t.p, t.len);
		cur.len += t.len;
	}
	if (rc == 0 && cur.len > 0)
		rc = parse_entry(p, cur.p, cur.len, cur.first);
	free(cur.p);
	return rc;
}

int aliases_parse(const char *text, size_t len, const char *fname, struct aliases **al_r,
		  char **error_r)
{
	struct parse p = { .al = xcalloc(1, sizeof(struct aliases)), .fname = fname };
	int rc;

	*al_r = NULL;
	*error_r = NULL;
	if (len > ALIASES_FILE_MAX)
		rc = fail(&p, 0, "file too large");
	else
		rc = parse_lines(&p, text, len);
	if (rc == 0 && p.al->n > 1) {
		qsort(p.al->e, p.al->n, sizeof(*p.al->e), entry_cmp);
		for (size_t i = 1; i < p.al->n; i++) {
			if (strcmp(p.al->e[i - 1].name, p.al->e[i].name) == 0) {
				char why[ALIASES_ADDR_MAX + 64];

				snprintf(why, sizeof(why), "%s already defined on line %u",
					 p.al->e[i].name,
					 p.al->e[i - 1].line < p.al->e[i].line
						 ? p.al->e[i - 1].line
						 : p.al->e[i].line);
				rc = fail(&p,
					  p.al->e[i - 1].line > p.al->e[i].line
						  ? p.al->e[i - 1].line
						  : p.al->e[i].line,
					  why);
				break;
			}
		}
	}
	if (rc < 0) {
		aliases_free(&p.al);
		*error_r = p.err;
		return -1;
	}
	*al_r = p.al;
	return 0;
}

int aliases_load(const char *path, struct aliases **al_r, char **error_r)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *text;
	size_t got = 0;
	int rc;

	*al_r = NULL;
	if (fd == -1 || fstat(fd, &st) == -1) {
		*error_r = xasprintf("aliases %s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > ALIASES_FILE_MAX) {
		*error_r = xasprintf("aliases %s: not a regular file of at most %u bytes", path,
				     ALIASES_FILE_MAX);
		close(fd);
		return -1;
	}
	text = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	rc = aliases_parse(text, got, path, al_r, error_r);
	free(text);
	return rc;
}

static const struct alias_entry *lookup(const struct aliases *al, const char *name, size_t len)
{
	char key[ALIASES_ADDR_MAX + 1];
	struct alias_entry k = { .name = key };

	if (al == NULL || al->n == 0 || len > ALIASES_ADDR_MAX)
		return NULL;
	memcpy(key, name, len);
	key[len] = '\0';
	str_lower(key, len);
	return bsearch(&k, al->e, al->n, sizeof(*al->e), entry_cmp);
}

static bool domain_local(const struct aliases_ctx *ctx, const char *d)
{
	for (size_t i = 0; i < ctx->ndomains; i++)
		if (strcasecmp(ctx->domains[i], d) == 0)
			return true;
	return false;
}

/* addr's entry: the full address's, else its local part's when the domain is ours. */
static const struct alias_entry *find(const struct aliases *al, const struct aliases_ctx *ctx,
				      const char *addr)
{
	const struct alias_entry *e = lookup(al, addr, strlen(addr));
	const char *at = strrchr(addr, '@');

	if (e == NULL && at != NULL && domain_local(ctx, at + 1))
		e = lookup(al, addr, (size_t)(at - addr));
	return e;
}

struct expansion {
	const struct aliases *al;
	const struct aliases_ctx *ctx;
	const struct alias_entry *path[ALIASES_DEPTH_MAX];
	size_t depth;
	char **v;
	size_t n;
	const char *err;
};

static int emit(struct expansion *x, const char *addr)
{
	for (size_t i = 0; i < x->n; i++)
		if (strcasecmp(x->v[i], addr) == 0)
			return 0; /* delivered once */
	if (x->n >= x->ctx->max_targets) {
		x->err = "alias expands to too many recipients";
		return -1;
	}
	x->v = xreallocarray(x->v, x->n + 1, sizeof(*x->v));
	x->v[x->n++] = xstrdup(addr);
	return 0;
}

static int walk(struct expansion *x, const char *addr)
{
	const struct alias_entry *e = find(x->al, x->ctx, addr);

	if (e == NULL || (x->depth > 0 && x->path[x->depth - 1] == e))
		return emit(x, addr); /* a mailbox, or the alias's own name in its list */
	for (size_t i = 0; i + 1 < x->depth; i++) {
		if (x->path[i] == e) {
			x->err = "alias loop";
			return -1;
		}
	}
	if (x->depth == ALIASES_DEPTH_MAX) {
		x->err = "aliases nested too deep";
		return -1;
	}
	x->path[x->depth++] = e;
	for (size_t i = 0; i < e->nt; i++) {
		char q[2 * ALIASES_ADDR_MAX + 2];

		if (strchr(e->t[i], '@') == NULL && x->ctx->ndomains > 0)
			snprintf(q, sizeof(q), "%s@%s", e->t[i], x->ctx->domains[0]);
		else
			snprintf(q, sizeof(q), "%s", e->t[i]);
		if (walk(x, q) < 0)
			return -1;
	}
	x->depth--;
	return 0;
}

int aliases_expand(const struct aliases *al, const struct aliases_ctx *ctx, const char *addr,
		   char ***v_r, size_t *n_r, const char **error_r)
{
	struct expansion x = { .al = al, .ctx = ctx };

	*v_r = NULL;
	*n_r = 0;
	if (find(al, ctx, addr) == NULL)
		return 0;
	if (walk(&x, addr) < 0) {
		aliases_strv_free(&x.v, x.n);
		*error_r = x.err;
		return -1;
	}
	*v_r = x.v;
	*n_r = x.n;
	return 1;
}

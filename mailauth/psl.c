/* psl.c — the Public Suffix List as a hash set of its rules, and the organizational domain
 * (the longest matching rule, exceptions first, "*" when none matches). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/psl.h"

struct psl {
	char **slot;
	size_t cap, n;
};

static uint64_t hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static void insert(struct psl *p, const char *s, size_t len)
{
	if (2 * (p->n + 1) > p->cap) {
		struct psl big = { xcalloc(p->cap ? 2 * p->cap : 1024, sizeof(char *)),
				   p->cap ? 2 * p->cap : 1024, 0 };
		for (size_t i = 0; i < p->cap; i++)
			if (p->slot[i] != NULL) {
				insert(&big, p->slot[i], strlen(p->slot[i]));
				free(p->slot[i]);
			}
		free(p->slot);
		*p = big;
	}
	size_t i = hash(s, len) & (p->cap - 1);
	for (; p->slot[i] != NULL; i = (i + 1) & (p->cap - 1))
		if (strlen(p->slot[i]) == len && memcmp(p->slot[i], s, len) == 0)
			return;
	p->slot[i] = xmemdup0(s, len);
	str_lower(p->slot[i], len);
	p->n++;
}

static bool has(const struct psl *p, const char *prefix, const char *s)
{
	char key[300];
	size_t len = (size_t)snprintf(key, sizeof(key), "%s%s", prefix, s);

	if (p->cap == 0 || len >= sizeof(key))
		return false;
	for (size_t i = hash(key, len) & (p->cap - 1); p->slot[i] != NULL;
	     i = (i + 1) & (p->cap - 1))
		if (strcmp(p->slot[i], key) == 0)
			return true;
	return false;
}

struct psl *psl_from_text(const char *text, size_t len)
{
	struct psl *p = xcalloc(1, sizeof(*p));
	size_t i = 0;

	while (i < len) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		size_t s = i, t = i;
		while (t < e && text[t] != ' ' && text[t] != '\t' && text[t] != '\r')
			t++;
		if (t > s && !(t - s >= 2 && text[s] == '/' && text[s + 1] == '/'))
			insert(p, text + s, t - s);
		i = e + 1;
	}
	return p;
}

int psl_load(const char *path, struct psl **psl_r, char **error_r)
{
	FILE *f = fopen(path, "r");
	char *text;
	long size;

	if (f == NULL) {
		*error_r = xasprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || size > 64L << 20 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		fclose(f);
		*error_r = xasprintf("%s: cannot read", path);
		return -1;
	}
	text = xmalloc((size_t)size + 1);
	size_t got = fread(text, 1, (size_t)size, f);
	fclose(f);
	*psl_r = psl_from_text(text, got);
	free(text);
	if ((*psl_r)->n == 0) {
		psl_free(psl_r);
		*error_r = xasprintf("%s: no rules", path);
		return -1;
	}
	return 0;
}

void psl_free(struct psl **pp)
{
	struct psl *p = *pp;

	if (p == NULL)
		return;
	for (size_t i = 0; i < p->cap; i++)
		free(p->slot[i]);
	free(p->slot);
	free(p);
	*pp = NULL;
}

void psl_org_domain(const struct psl *psl, const char *domain, char *out, size_t size)
{
	const char *suffix = NULL;

	/* longest first: domain, then without its first label, ... */
	for (const char *s = domain; s != NULL && *s;
	     s = strchr(s, '.') ? strchr(s, '.') + 1 : NULL) {
		const char *parent = strchr(s, '.');

		if (has(psl, "!", s)) {
			suffix = parent ? parent + 1
					: s; /* the exception's parent is the suffix */
			break;
		}
		if (has(psl, "", s) || (parent && has(psl, "*.", parent + 1))) {
			suffix = s;
			break;
		}
	}
	if (suffix == NULL) { /* the default rule "*": the last label */
		suffix = strrchr(domain, '.');
		suffix = suffix ? suffix + 1 : domain;
	}
	if (suffix == domain) {
		str_lcpy(out, domain, size);
		return;
	}
	/* one label more than the suffix */
	const char *org = suffix - 1;
	while (org > domain && org[-1] != '.')
		org--;
	str_lcpy(out, org, size);
}

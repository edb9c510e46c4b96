/* static_backend.c — owns the users file of backend = file: one user a line,
 * `name:{SCHEME}hash:address[,alias...]:quota` (quota optional, with k/M/G units), `#`
 * comments and blank lines ignored. Names and addresses are matched without regard to ASCII
 * case through two sorted indexes. A bad line fails the whole load, naming file:line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth_private.h"

#define SU_LINE_MAX 4096
#define SU_USERS_MAX 10000000

struct su_user {
	char *name; /* lower-cased */
	char *hash;
	struct ldapauth_rec *rec;
};
struct su_addr {
	char *addr;               /* lower-cased */
	struct ldapauth_rec *rec; /* the owning user's */
};
struct static_users {
	struct su_user *users;
	size_t nusers, cap;
	struct su_addr *addrs;
	size_t naddrs, acap;
};

static int su_parse_line(struct static_users *su, char *line, const char **what_r);
static int su_add_addrs(struct static_users *su, struct su_user *u, struct str_view list);
static int su_cmp_user(const void *a, const void *b);
static int su_cmp_addr(const void *a, const void *b);
static int su_index(struct static_users *su, char **dup_r);

static char *lower_dup(const char *p, size_t len)
{
	char *s = xmemdup0(p, len);

	str_lower(s, len);
	return s;
}

static int su_add_addrs(struct static_users *su, struct su_user *u, struct str_view list)
{
	struct str_view f;

	while (str_split_next(&list, ',', &f)) {
		f = str_trim(f);
		if (f.len == 0 || f.len > LDAPAUTH_NAME_MAX || memchr(f.p, '@', f.len) == NULL)
			return -1;
		if (u->rec->u.address == NULL)
			u->rec->u.address = xmemdup0(f.p, f.len);
		else
			ldapauth_rec_add_alias(u->rec, f.p, f.len);
		if (su->naddrs == su->acap) {
			su->acap = su->acap ? su->acap * 2 : 64;
			su->addrs = xreallocarray(su->addrs, su->acap, sizeof(*su->addrs));
		}
		su->addrs[su->naddrs].addr = lower_dup(f.p, f.len);
		su->addrs[su->naddrs++].rec = u->rec;
	}
	return 0;
}

static int su_parse_line(struct static_users *su, char *line, const char **what_r)
{
	struct str_view rest = str_trim(str_view_of(line)), name, hash, addrs, quota = { "", 0 };
	struct su_user *u;
	uint64_t q = 0;

	if (rest.len == 0 || rest.p[0] == '#')
		return 0;
	if (!str_split_next(&rest, ':', &name) || !str_split_next(&rest, ':', &hash) ||
	    !str_split_next(&rest, ':', &addrs))
		return *what_r = "expected name:{SCHEME}hash:addresses[:quota]", -1;
	if (rest.len > 0 && (!str_split_next(&rest, ':', &quota) || rest.len > 0))
		return *what_r = "too many fields", -1;
	name = str_trim(name);
	if (name.len == 0 || name.len > LDAPAUTH_NAME_MAX)
		return *what_r = "bad name", -1;
	if (hash.len < 3 || hash.p[0] != '{')
		return *what_r = "hash must start with {SCHEME}", -1;
	quota = str_trim(quota);
	if (quota.len > 0 && str_to_size(quota.p, quota.len, &q) < 0)
		return *what_r = "bad quota", -1;
	if (su->nusers >= SU_USERS_MAX)
		return *what_r = "too many users", -1;
	if (su->nusers == su->cap) {
		su->cap = su->cap ? su->cap * 2 : 64;
		su->users = xreallocarray(su->users, su->cap, sizeof(*su->users));
	}
	u = &su->users[su->nusers++];
	u->name = lower_dup(name.p, name.len);
	u->hash = xmemdup0(hash.p, hash.len);
	u->rec = ldapauth_rec_new();
	u->rec->u.login = xmemdup0(name.p, name.len);
	u->rec->u.quota = q;
	if (su_add_addrs(su, u, addrs) < 0 || u->rec->u.address == NULL)
		return *what_r = "bad address list", -1;
	return 0;
}

static int su_cmp_user(const void *a, const void *b)
{
	return strcmp(((const struct su_user *)a)->name, ((const struct su_user *)b)->name);
}

static int su_cmp_addr(const void *a, const void *b)
{
	return strcmp(((const struct su_addr *)a)->addr, ((const struct su_addr *)b)->addr);
}

/* Sorts both tables and refuses duplicate names and addresses. */
static int su_index(struct static_users *su, char **dup_r)
{
	qsort(su->users, su->nusers, sizeof(*su->users), su_cmp_user);
	qsort(su->addrs, su->naddrs, sizeof(*su->addrs), su_cmp_addr);
	for (size_t i = 1; i < su->nusers; i++)
		if (strcmp(su->users[i].name, su->users[i - 1].name) == 0)
			return *dup_r = su->users[i].name, -1;
	for (size_t i = 1; i < su->naddrs; i++)
		if (strcmp(su->addrs[i].addr, su->addrs[i - 1].addr) == 0)
			return *dup_r = su->addrs[i].addr, -1;
	return 0;
}

int static_users_load(const char *path, struct static_users **su_r, char **error_r)
{
	struct static_users *su = xcalloc(1, sizeof(*su));
	char line[SU_LINE_MAX + 2], *dup = NULL;
	const char *what = NULL;
	unsigned lineno = 0;
	FILE *f = fopen(path, "re");

	*su_r = NULL;
	if (f == NULL) {
		*error_r = xasprintf("%s: %s", path, strerror(errno));
		static_users_free(&su);
		return -1;
	}
	while (what == NULL && fgets(line, sizeof(line), f) != NULL) {
		size_t len = strlen(line);

		lineno++;
		if (len > SU_LINE_MAX && line[len - 1] != '\n')
			what = "line too long";
		else if (memchr(line, '\0', len) != NULL && strlen(line) != len)
			what = "NUL byte";
		else
			(void)su_parse_line(su, line, &what);
	}
	if (what == NULL && ferror(f))
		what = strerror(errno);
	fclose(f);
	if (what == NULL && su_index(su, &dup) < 0)
		*error_r = xasprintf("%s: %s appears twice", path, dup);
	else if (what != NULL)
		*error_r = xasprintf("%s:%u: %s", path, lineno, what);
	if (what != NULL || dup != NULL) {
		static_users_free(&su);
		return -1;
	}
	*su_r = su;
	return 0;
}

void static_users_free(struct static_users **sup)
{
	struct static_users *su = *sup;

	if (su == NULL)
		return;
	for (size_t i = 0; i < su->nusers; i++) {
		free(su->users[i].name);
		OPENSSL_cleanse(su->users[i].hash, strlen(su->users[i].hash));
		free(su->users[i].hash);
		ldapauth_rec_unref(&su->users[i].rec);
	}
	for (size_t i = 0; i < su->naddrs; i++)
		free(su->addrs[i].addr);
	free(su->users);
	free(su->addrs);
	free(su);
	*sup = NULL;
}

struct ldapauth_rec *static_users_find_login(const struct static_users *su, const char *name,
					     const char **hash_r)
{
	struct su_user key = { .name = lower_dup(name, strlen(name)) }, *u;

	u = bsearch(&key, su->users, su->nusers, sizeof(*su->users), su_cmp_user);
	free(key.name);
	if (u == NULL)
		return NULL;
	*hash_r = u->hash;
	return ldapauth_rec_ref(u->rec);
}

void static_users_each(const struct static_users *su,
		       void (*cb)(const struct ldapauth_user *u, void *arg), void *arg)
{
	for (size_t i = 0; i < su->nusers; i++)
		cb(&su->users[i].rec->u, arg);
}

struct ldapauth_rec *static_users_find_address(const struct static_users *su, const char *addr)
{
	struct su_addr key = { .addr = lower_dup(addr, strlen(addr)) }, *a;

	a = bsearch(&key, su->addrs, su->naddrs, sizeof(*su->addrs), su_cmp_addr);
	free(key.addr);
	return a != NULL ? ldapauth_rec_ref(a->rec) : NULL;
}

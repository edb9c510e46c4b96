/* users.c — owns who the users are: user N's login from --user-format (user%d by default) or,
 * with --users-file, the login, password and address of each user, one a line (so users may
 * live in several domains); the address of any recipient and each user's password. The table
 * is per process, loaded once (agents and the manager each load it). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/str.h"
#include "common/xmalloc.h"
#include "mailload/mailload.h"

#define USERS_LINE_MAX 1024

static struct {
	char *path;
	char **login, **password, **addr;
	uint64_t n;
} db;

bool ml_user_format_ok(const char *fmt)
{
	int convs = 0;

	for (const char *p = fmt; *p != '\0'; p++) {
		if (*p != '%')
			continue;
		p++;
		while (*p >= '0' && *p <= '9') /* a width, zero-padded or not */
			p++;
		if (*p == 'd' || *p == 'u' || *p == 'i')
			convs++;
		else if (*p != '%')
			return false;
	}
	return convs == 1 && strlen(fmt) < 64;
}

/* The format with its conversion as %u (the number is never negative). */
static void user_format(const struct ml_cfg *c, uint64_t user, char *out, size_t n)
{
	char fmt[80];
	const char *f = c->user_format[0] != '\0' ? c->user_format : "user%u";
	size_t k = 0;

	for (const char *p = f; *p != '\0' && k + 2 < sizeof(fmt); p++) {
		fmt[k++] = *p;
		if (*p == '%' && p[1] != '%') {
			while (p[1] >= '0' && p[1] <= '9' && k + 2 < sizeof(fmt))
				fmt[k++] = *++p;
			if (p[1] == 'd' || p[1] == 'i' || p[1] == 'u') {
				fmt[k++] = 'u';
				p++;
			}
		} else if (*p == '%') {
			fmt[k++] = *++p;
		}
	}
	fmt[k] = '\0';
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(out, n, fmt, (unsigned)user); /* checked by ml_user_format_ok */
#pragma GCC diagnostic pop
}

int ml_users_load(struct ml_cfg *c, char *err, size_t errlen)
{
	char line[USERS_LINE_MAX];
	uint64_t cap = 0, lineno = 0;
	FILE *fp;

	if (c->users_file[0] == '\0' || (db.path != NULL && strcmp(db.path, c->users_file) == 0))
		goto check;
	if ((fp = fopen(c->users_file, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", c->users_file, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), fp) != NULL) {
		char l[256], pw[256], a[256];
		lineno++;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		if (sscanf(line, "%255s %255s %255s", l, pw, a) != 3 || strchr(a, '@') == NULL) {
			snprintf(err, errlen, "%s:%" PRIu64 ": expected: login password address",
				 c->users_file, lineno);
			fclose(fp);
			return -1;
		}
		if (db.n == cap) {
			cap = cap ? cap * 2 : 1024;
			db.login = xreallocarray(db.login, cap, sizeof(char *));
			db.password = xreallocarray(db.password, cap, sizeof(char *));
			db.addr = xreallocarray(db.addr, cap, sizeof(char *));
		}
		db.login[db.n] = xstrdup(l);
		db.password[db.n] = xstrdup(pw);
		db.addr[db.n++] = xstrdup(a);
	}
	fclose(fp);
	db.path = xstrdup(c->users_file);
check:
	if (c->users_file[0] == '\0')
		return 0;
	if (c->users == 0)
		c->users = db.n;
	if (c->users > db.n || db.n == 0) {
		snprintf(err, errlen, "%s has %" PRIu64 " users, the run needs %" PRIu64,
			 c->users_file, db.n, c->users);
		return -1;
	}
	return 0;
}

void ml_user_login(const struct ml_cfg *c, uint64_t user, char *out, size_t n)
{
	if (db.path != NULL && user >= 1 && user <= db.n)
		str_lcpy(out, db.login[user - 1], n);
	else
		user_format(c, user, out, n);
}

const char *ml_user_password(const struct ml_cfg *c, uint64_t user, char *tmp, size_t n)
{
	if (db.path != NULL && user >= 1 && user <= db.n)
		return db.password[user - 1];
	if (c->password[0] != '\0')
		return c->password;
	ml_user_login(c, user, tmp, n);
	return tmp;
}

void ml_rcpt_addr(const struct ml_cfg *c, int64_t id, char *out, size_t n)
{
	char login[128];

	if (id <= 0) {
		snprintf(out, n, "r%" PRId64 "@%s", -id, c->ext_domain);
	} else if (db.path != NULL && (uint64_t)id <= db.n) {
		str_lcpy(out, db.addr[id - 1], n);
	} else {
		user_format(c, (uint64_t)id, login, sizeof(login));
		snprintf(out, n, "%s@%s", login, c->domain);
	}
}

/* sender.c — owns who may use which envelope sender (MAIL FROM): an authenticated user only
 * their own addresses (the directory's primary address and aliases, a +detail of them) and
 * those the sender login map grants them (shared mailboxes, role addresses), unless the check
 * is off or the login is exempt ([mtad] sender_login_check, sender_login_exempt,
 * sender_login_map); the null sender only for one recipient (a notification to one address);
 * and no unauthenticated client outside trusted_networks may use one of our own domains on
 * port 25 ([mtad] reject_unauth_local_sender). The map file is read at start and on SIGHUP.
 *
 * The map: one line per address, `address login[,login...]` or `@domain login[,...]` (every
 * address of that domain); `#` starts a comment; addresses compare ignoring case. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mtad/mtad.h"

#define MAP_LINE_MAX 4096

struct sender_grant {
	char *addr;   /* lower case; "@domain" for a whole domain */
	char *logins; /* ",login,login," lower case, for a substring search */
};

struct sender_map {
	struct sender_grant *v;
	size_t n;
};

void sender_map_free(struct sender_map **mp)
{
	struct sender_map *m = *mp;

	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].addr);
		free(m->v[i].logins);
	}
	free(m->v);
	free(m);
	*mp = NULL;
}

/* One line: "address login,login" (spaces around commas allowed). -1 on a bad line. */
static int map_line(struct sender_map *m, char *line)
{
	struct str_view rest = str_trim(str_view_of(line)), addr, who;
	struct buf logins;

	if (rest.len == 0 || rest.p[0] == '#')
		return 0;
	if (!str_split_ws(&rest, &addr) || rest.len == 0 || memchr(addr.p, '@', addr.len) == NULL)
		return -1;
	buf_init(&logins, 64, MAP_LINE_MAX + 2);
	buf_putc(&logins, ',');
	while (str_split_next(&rest, ',', &who)) {
		struct str_view w = str_trim(who);

		if (w.len == 0 || memchr(w.p, ' ', w.len) != NULL) {
			buf_release(&logins);
			return -1;
		}
		buf_append(&logins, w.p, w.len);
		buf_putc(&logins, ',');
	}
	m->v = xreallocarray(m->v, m->n + 1, sizeof(*m->v));
	m->v[m->n].addr = xmemdup0(addr.p, addr.len);
	str_lower(m->v[m->n].addr, addr.len);
	m->v[m->n].logins = xstrdup(buf_cstr(&logins));
	str_lower(m->v[m->n].logins, logins.len);
	m->n++;
	buf_release(&logins);
	return 0;
}

int sender_map_load(const char *path, struct sender_map **map_r, char **error_r)
{
	struct sender_map *m = xcalloc(1, sizeof(*m));
	char line[MAP_LINE_MAX];
	unsigned lineno = 0;
	FILE *f;

	*map_r = NULL;
	if (path == NULL || path[0] == '\0') {
		*map_r = m;
		return 0;
	}
	if ((f = fopen(path, "re")) == NULL) {
		*error_r = xasprintf("sender_login_map %s: %s", path, strerror(errno));
		free(m);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			*error_r = xasprintf("%s:%u: line too long", path, lineno);
			goto fail;
		}
		if (map_line(m, line) < 0) {
			*error_r = xasprintf("%s:%u: expected: address login[,login...]", path,
					     lineno);
			goto fail;
		}
	}
	fclose(f);
	*map_r = m;
	return 0;
fail:
	fclose(f);
	sender_map_free(&m);
	return -1;
}

void sender_map_reload(struct mtad *m, const struct conf *c)
{
	struct sender_map *map = NULL;
	char *err = NULL;

	if (sender_map_load(conf_values(c)->mtad.sender_login_map, &map, &err) < 0) {
		log_warnx("%s (the previous sender login map stays in force)", err);
		free(err);
		return;
	}
	sender_map_free(&m->senders);
	m->senders = map;
}

/* Whether the map lets login use addr (lower case). */
static bool map_grants(const struct sender_map *m, const char *addr, const char *login)
{
	const char *at = strrchr(addr, '@');
	char key[LDAPAUTH_NAME_MAX + 3];

	if (m == NULL || at == NULL)
		return false;
	snprintf(key, sizeof(key), ",%s,", login);
	str_lower(key, strlen(key));
	for (size_t i = 0; i < m->n; i++)
		if ((strcmp(m->v[i].addr, addr) == 0 || strcmp(m->v[i].addr, at) == 0) &&
		    strstr(m->v[i].logins, key) != NULL)
			return true;
	return false;
}

void sender_own_set(struct smtp_session *s, const struct ldapauth_user *u)
{
	for (size_t i = 0; i < s->nown; i++)
		free(s->own[i]);
	free(s->own);
	s->own = NULL;
	s->nown = 0;
	if (u == NULL)
		return;
	s->own = xcalloc(u->naliases + 1, sizeof(*s->own));
	if (u->address != NULL)
		s->own[s->nown++] = xstrdup(u->address);
	for (size_t i = 0; i < u->naliases; i++)
		s->own[s->nown++] = xstrdup(u->aliases[i]);
}

/* Whether addr is one of the user's own: equal ignoring case to its primary address or an
   alias, or such an address with "+detail" added to the local part. */
static bool owns(const struct smtp_session *s, const char *addr)
{
	char base[MAILADDR_TEXT_MAX + 1];
	const char *at = strrchr(addr, '@'), *plus;
	size_t alen = strlen(addr);

	if (at == NULL)
		return false;
	base[0] = '\0';
	if ((plus = memchr(addr, '+', (size_t)(at - addr))) != NULL && plus > addr)
		snprintf(base, sizeof(base), "%.*s%s", (int)(plus - addr), addr, at);
	for (size_t i = 0; i < s->nown; i++) {
		size_t olen = strlen(s->own[i]);

		if (str_caseeq(s->own[i], olen, addr, alen) ||
		    (base[0] != '\0' && str_caseeq(s->own[i], olen, base, strlen(base))))
			return true;
	}
	return false;
}

const char *sender_refusal(struct smtp_session *s, const struct mailaddr *a, const char *from)
{
	const struct mtad_conf *mc = &conf_values(s->m->conf)->mtad;
	char key[MAILADDR_TEXT_MAX + 1];

	if (s->flags & SF_LMTP)
		return NULL;
	if (!(s->flags & SF_AUTH)) {
		if (s->kind != L_SMTP || (s->flags & SF_TRUSTED) ||
		    !mc->reject_unauth_local_sender || (a->flags & MAILADDR_F_NULL) ||
		    !mailaddr_domain_in(a, mc->local_domains->v, mc->local_domains->n))
			return NULL;
		log_info("%016" PRIx64 " smtp mail from=<%s> addr=%s result=fail reason=\"local "
			 "domain sender without authentication\"",
			 s->id, from, s->addr);
		return "one of our domains, and you are not logged in (use submission)";
	}
	if (mc->sender_login_check == MTAD_SENDER_CHECK_OFF ||
	    conf_list_has(mc->sender_login_exempt, s->user, strlen(s->user)) ||
	    (a->flags & MAILADDR_F_NULL))
		return NULL;
	if (mailaddr_canonical(a, key, sizeof(key)) < 0)
		return "not owned by you";
	str_lower(key, strlen(key));
	if (owns(s, key) || map_grants(s->m->senders, key, s->user))
		return NULL;
	log_info("%016" PRIx64 " smtp mail from=<%s> user=%s result=fail reason=\"sender not "
		 "owned by the login\"",
		 s->id, from, s->user);
	return "not owned by you";
}

const char *sender_rcpt_refusal(const struct smtp_session *s)
{
	const struct mtad_conf *mc = &conf_values(s->m->conf)->mtad;

	/* a notification (bounce, receipt) goes to one address; a null sender is not a way to
	   send mail that cannot come back */
	if ((s->flags & SF_AUTH) && !(s->flags & SF_LMTP) && s->tx->from[0] == '\0' &&
	    s->tx->nrcpt >= 1 && mc->sender_login_check != MTAD_SENDER_CHECK_OFF &&
	    !conf_list_has(mc->sender_login_exempt, s->user, strlen(s->user)))
		return "a message with a null sender goes to one recipient";
	return NULL;
}

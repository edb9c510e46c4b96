/* ldapauth_list.c — owns the blocking calls of the admin tools: listing every user of the
 * directory (mailctl user list: the users file through static_backend.c, or a synchronous,
 * paged LDAP search of user_filter with any login), and reading or replacing one user's
 * mailhost_attribute (mailctl user move). */
#include <stdlib.h>
#include <string.h>

#include <ldap.h>
#include <openssl/crypto.h>

#include "common/buf.h"
#include "common/conf.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "ldapauth/ldapauth_private.h"

#define LIST_PAGE 500
#define ANY_FILTER_MAX 4096 /* user_filter with its %-escapes as "*" */

struct file_list {
	void (*cb)(const char *login, const char *address, void *arg);
	void *arg;
};

static void file_each(const struct ldapauth_user *u, void *arg)
{
	struct file_list *fl = arg;

	fl->cb(u->login, u->address, fl->arg);
}

/* user_filter with every %u %d %s as "*" (a wildcard: nothing to escape) and %% as %. */
static char *any_user_filter(const char *tmpl)
{
	struct buf b;

	buf_init(&b, 128, ANY_FILTER_MAX);
	for (const char *p = tmpl; *p != '\0'; p++) {
		if (*p != '%') {
			buf_putc(&b, *p);
			continue;
		}
		if (p[1] == '%')
			buf_putc(&b, '%');
		else if (p[1] == 'u' || p[1] == 'd' || p[1] == 's')
			buf_putc(&b, '*');
		p += p[1] != '\0';
	}
	return buf_steal(&b, NULL);
}

static LDAP *list_connect(const struct directory_conf *d, const struct tls_conf *t,
			  const char *uri_in, char **error_r)
{
	char *uri = xstrdup(uri_in != NULL ? uri_in : d->uri), *sp = strchr(uri, ' '), *pw = NULL;
	int v3 = LDAP_VERSION3, rc;
	struct timeval tv = { d->timeout_ms / 1000, (d->timeout_ms % 1000) * 1000 };
	struct berval cred = { 0, NULL };
	LDAP *ld = NULL;

	if (sp != NULL)
		*sp = '\0'; /* the first URI: an admin tool need not fail over */
	if ((rc = ldap_initialize(&ld, uri)) != LDAP_SUCCESS) {
		*error_r = xasprintf("%s: %s", uri, ldap_err2string(rc));
		free(uri);
		return NULL;
	}
	ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &v3);
	ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
	ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &tv);
	ldap_set_option(ld, LDAP_OPT_TIMEOUT, &tv);
	if (t->ca != NULL && t->ca[0] != '\0')
		ldap_set_option(ld, LDAP_OPT_X_TLS_CACERTFILE, t->ca);
	if (d->starttls && (rc = ldap_start_tls_s(ld, NULL, NULL)) != LDAP_SUCCESS) {
		*error_r = xasprintf("%s: StartTLS: %s", uri, ldap_err2string(rc));
		goto fail;
	}
	if (d->bind_password_file[0] != '\0' &&
	    ldapauth_read_secret(d->bind_password_file, &pw, error_r) < 0)
		goto fail;
	if (pw != NULL) {
		cred.bv_val = pw;
		cred.bv_len = strlen(pw);
	}
	rc = ldap_sasl_bind_s(ld, d->bind_dn[0] ? d->bind_dn : NULL, LDAP_SASL_SIMPLE, &cred, NULL,
			      NULL, NULL);
	if (pw != NULL) {
		OPENSSL_cleanse(pw, strlen(pw));
		free(pw);
	}
	if (rc != LDAP_SUCCESS) {
		*error_r = xasprintf("%s: bind as %s: %s", uri,
				     d->bind_dn[0] ? d->bind_dn : "anonymous",
				     ldap_err2string(rc));
		goto fail;
	}
	free(uri);
	return ld;
fail:
	ldap_unbind_ext_s(ld, NULL, NULL);
	free(uri);
	return NULL;
}

/* The first value of attr in e into out (NULL when absent); *out_r malloc'd. */
static char *first_value(LDAP *ld, LDAPMessage *e, const char *attr)
{
	struct berval **v = ldap_get_values_len(ld, e, attr);
	char *s = v != NULL && v[0] != NULL ? xmemdup0(v[0]->bv_val, v[0]->bv_len) : NULL;

	ldap_value_free_len(v);
	return s;
}

static int list_ldap(const struct conf *c,
		     void (*cb)(const char *login, const char *address, void *arg), void *arg,
		     char **error_r)
{
	const struct directory_conf *d = &conf_values(c)->directory;
	const char *login_at = d->login_attribute, *mail_at = d->address_attribute;
	char *attrs[] = { (char *)(uintptr_t)login_at, (char *)(uintptr_t)mail_at, NULL };
	int scope = d->scope == DIRECTORY_SCOPE_ONE    ? LDAP_SCOPE_ONELEVEL
		    : d->scope == DIRECTORY_SCOPE_BASE ? LDAP_SCOPE_BASE
						       : LDAP_SCOPE_SUBTREE;
	char *filter = any_user_filter(d->user_filter);
	LDAP *ld = list_connect(d, &conf_values(c)->tls, NULL, error_r);
	struct berval cookie = { 0, NULL };
	int rc = 0;

	if (ld == NULL) {
		free(filter);
		return -1;
	}
	do {
		LDAPControl *page = NULL, *ctrls[2] = { NULL, NULL }, **got = NULL;
		LDAPMessage *res = NULL;
		struct berval *next = NULL;
		ber_int_t count;
		int err = 0, lrc;

		if ((lrc = ldap_create_page_control(ld, LIST_PAGE, &cookie, 1, &page)) !=
		    LDAP_SUCCESS) {
			*error_r = xasprintf("paged results: %s", ldap_err2string(lrc));
			rc = -1;
			break;
		}
		ctrls[0] = page;
		lrc = ldap_search_ext_s(ld, d->base, scope, filter, attrs, 0, ctrls, NULL, NULL, 0,
					&res);
		ldap_control_free(page);
		ber_memfree(cookie.bv_val);
		cookie.bv_val = NULL;
		cookie.bv_len = 0;
		if (lrc != LDAP_SUCCESS && lrc != LDAP_SIZELIMIT_EXCEEDED) {
			*error_r = xasprintf("search %s under %s: %s", filter, d->base,
					     ldap_err2string(lrc));
			ldap_msgfree(res);
			rc = -1;
			break;
		}
		for (LDAPMessage *e = ldap_first_entry(ld, res); e != NULL;
		     e = ldap_next_entry(ld, e)) {
			char *login = first_value(ld, e, login_at),
			     *mail = first_value(ld, e, mail_at);

			if (login != NULL)
				cb(login, mail, arg);
			free(login);
			free(mail);
		}
		if (ldap_parse_result(ld, res, &err, NULL, NULL, NULL, &got, 0) == LDAP_SUCCESS &&
		    got != NULL) {
			LDAPControl *pc = ldap_control_find(LDAP_CONTROL_PAGEDRESULTS, got, NULL);

			if (pc != NULL && ldap_parse_pageresponse_control(ld, pc, &count,
									  &cookie) != LDAP_SUCCESS)
				cookie.bv_len = 0;
			(void)next;
		}
		ldap_controls_free(got);
		ldap_msgfree(res);
	} while (cookie.bv_val != NULL && cookie.bv_len > 0);
	ber_memfree(cookie.bv_val);
	ldap_unbind_ext_s(ld, NULL, NULL);
	free(filter);
	return rc;
}

int ldapauth_list_users(const struct conf *c,
			void (*cb)(const char *login, const char *address, void *arg), void *arg,
			char **error_r)
{
	const struct directory_conf *d = &conf_values(c)->directory;
	struct static_users *su = NULL;
	struct file_list fl = { cb, arg };

	*error_r = NULL;
	if (d->backend == DIRECTORY_BACKEND_LDAP)
		return list_ldap(c, cb, arg, error_r);
	if (static_users_load(d->users_file, &su, error_r) < 0)
		return -1;
	static_users_each(su, file_each, &fl);
	static_users_free(&su);
	return 0;
}

int ldapauth_mailhost(const struct conf *c, const char *uri, const char *login, const char *host,
		      char **dn_r, char **old_r, char **error_r)
{
	const struct directory_conf *d = &conf_values(c)->directory;
	const char *at = d->mailhost_attribute;
	char *attrs[] = { (char *)(uintptr_t)at, NULL }, *filter;
	int scope = d->scope == DIRECTORY_SCOPE_ONE    ? LDAP_SCOPE_ONELEVEL
		    : d->scope == DIRECTORY_SCOPE_BASE ? LDAP_SCOPE_BASE
						       : LDAP_SCOPE_SUBTREE;
	LDAPMessage *res = NULL, *e;
	LDAP *ld;
	char *dn;
	int lrc, n = 0;

	*dn_r = *old_r = *error_r = NULL;
	if (d->backend != DIRECTORY_BACKEND_LDAP || at[0] == '\0') {
		*error_r = xstrdup(d->backend != DIRECTORY_BACKEND_LDAP
					   ? "[directory] backend is not ldap: no mailHost to set"
					   : "[directory] mailhost_attribute is empty");
		return -1;
	}
	if ((filter = ldapauth_filter_expand(d->user_filter, login)) == NULL) {
		*error_r = xstrdup("[directory] user_filter is not a filter template");
		return -1;
	}
	if ((ld = list_connect(d, &conf_values(c)->tls, uri, error_r)) == NULL) {
		free(filter);
		return -1;
	}
	lrc = ldap_search_ext_s(ld, d->base, scope, filter, attrs, 0, NULL, NULL, NULL, 2, &res);
	if (lrc != LDAP_SUCCESS || (n = ldap_count_entries(ld, res)) != 1) {
		*error_r = lrc != LDAP_SUCCESS && lrc != LDAP_SIZELIMIT_EXCEEDED
				   ? xasprintf("search %s under %s: %s", filter, d->base,
					       ldap_err2string(lrc))
				   : xasprintf("search %s under %s: %s", filter, d->base,
					       lrc == LDAP_SUCCESS && n == 0
						       ? "no such user"
						       : "more than one entry");
		goto out;
	}
	e = ldap_first_entry(ld, res);
	dn = ldap_get_dn(ld, e);

	*dn_r = xstrdup(dn != NULL ? dn : "");
	ldap_memfree(dn);
	*old_r = first_value(ld, e, at);
	if (host != NULL) {
		char *vals[] = { (char *)(uintptr_t)host, NULL };
		LDAPMod mod = { .mod_op = LDAP_MOD_REPLACE,
				.mod_type = (char *)(uintptr_t)at,
				.mod_values = vals };
		LDAPMod *mods[] = { &mod, NULL };

		if ((lrc = ldap_modify_ext_s(ld, *dn_r, mods, NULL, NULL)) != LDAP_SUCCESS)
			*error_r = xasprintf("replacing %s of %s: %s", at, *dn_r,
					     ldap_err2string(lrc));
	}
out:
	ldap_msgfree(res);
	ldap_unbind_ext_s(ld, NULL, NULL);
	free(filter);
	if (*error_r != NULL) {
		free(*dn_r);
		free(*old_r);
		*dn_r = *old_r = NULL;
		return -1;
	}
	return 0;
}

/* sieve_admin.c — owns storing a script for a user (sieve_admin.h): compile, quota, write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/xmalloc.h"
#include "sieve/sieve.h"
#include "sieve/sieve_admin.h"
#include "store/store.h"
#include "store/store_sieve.h"

void sieve_admin_limits_from_conf(const struct conf *c, struct sieve_admin_limits *l)
{
	const struct sieve_conf *sc = &conf_values(c)->sieve;

	l->max_script_size = sc->max_script_size;
	l->max_scripts = (uint64_t)sc->max_scripts;
	l->max_storage = sc->max_storage;
}

int sieve_admin_compile(struct sieve_admin_op *o, char **error_r)
{
	struct sieve_compile_opts co = { .max_script_size = (size_t)o->l->max_script_size };

	return sieve_compile(o->src, o->len, &co, &o->prog, &o->prog_len, error_r);
}

void sieve_admin_op_clear(struct sieve_admin_op *o)
{
	free(o->prog);
	o->prog = NULL;
}

int sieve_admin_put_fn(struct store_txn *t, void *arg)
{
	struct sieve_admin_op *o = arg;
	struct store_sieve_script old;
	uint64_t n, bytes;
	int rc;

	o->quota = false;
	if ((rc = store_sieve_usage(t, o->user, &n, &bytes)) != 0)
		return rc;
	if (store_sieve_get(t, o->user, o->name, &old) == 0) {
		n--;
		bytes -= old.src_len;
	}
	if (n + 1 > o->l->max_scripts || bytes + o->len > o->l->max_storage) {
		o->quota = true;
		snprintf(o->why, sizeof(o->why),
			 n + 1 > o->l->max_scripts ? "quota: at most %llu scripts"
						   : "quota: at most %llu bytes of scripts",
			 (unsigned long long)(n + 1 > o->l->max_scripts ? o->l->max_scripts
									: o->l->max_storage));
		return STORE_EQUOTA;
	}
	if ((rc = store_sieve_put(t, o->user, o->name, o->src, o->len, o->prog, o->prog_len)) != 0)
		return rc;
	return o->activate ? store_sieve_activate(t, o->user, o->name) : 0;
}

int sieve_admin_put(struct store *st, const struct sieve_admin_limits *l, const char *user,
		    const char *name, const char *src, size_t len, bool check_only, bool activate,
		    char **error_r, int *store_rc_r)
{
	struct sieve_admin_op o = {
		.l = l, .user = user, .name = name, .src = src, .len = len, .activate = activate
	};
	unsigned part;
	int rc;

	*error_r = NULL;
	*store_rc_r = 0;
	if (sieve_admin_compile(&o, error_r) < 0)
		return SIEVE_ADMIN_ESYNTAX;
	if (check_only) {
		sieve_admin_op_clear(&o);
		return SIEVE_ADMIN_OK;
	}
	if ((rc = store_user_locate(st, user, &part)) == 0)
		rc = store_write(st, part, sieve_admin_put_fn, &o);
	sieve_admin_op_clear(&o);
	if (rc == STORE_EQUOTA && o.quota) {
		*error_r = xstrdup(o.why);
		return SIEVE_ADMIN_EQUOTA;
	}
	*store_rc_r = rc;
	return rc == 0 ? SIEVE_ADMIN_OK : SIEVE_ADMIN_ESTORE;
}

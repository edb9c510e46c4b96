/* mailctl_sieve.c — owns `mailctl sieve`: list, get, put (compile, quota, store), activate,
 * deactivate, delete and check of a user's Sieve scripts; a refused script is explained
 * with the line and column of the fault. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/xmalloc.h"
#include "mailctl/mailctl.h"
#include "sieve/sieve_admin.h"
#include "store/store_sieve.h"

static int read_file(struct mc *mc, const char *path, uint64_t max, struct buf *b)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char chunk[8192];
	size_t n;

	if (f == NULL)
		return mc_fail(mc, STORE_EIO, "cannot open %s", path);
	buf_init(b, 4096, (size_t)max + 1);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (buf_append(b, chunk, n) < 0) {
			if (f != stdin)
				fclose(f);
			buf_release(b);
			return mc_refuse(mc, MC_REFUSED,
					 "raise [sieve] max_script_size in heron.conf",
					 "%s: larger than [sieve] max_script_size (%llu bytes)",
					 path, (unsigned long long)max);
		}
	if (f != stdin)
		fclose(f);
	return MC_OK;
}

/* A store error about script name of user (NULL: the active one): the store's "no such
   message" is a missing script here, or no active one. */
static int script_fail(struct mc *mc, int rc, const char *name, const char *user)
{
	if (rc == STORE_ENOMSG && name == NULL)
		return mc_refuse(
			mc, MC_REFUSED,
			"see `mailctl sieve list USER`, `mailctl sieve activate USER NAME`",
			"'%s' has no active script", user);
	if (rc == STORE_ENOMSG)
		return mc_refuse(mc, MC_REFUSED, "see `mailctl sieve list USER`",
				 "script '%s' of '%s': no such script", name, user);
	if (name == NULL)
		return mc_fail(mc, rc, "the active script of '%s'", user);
	return mc_fail(mc, rc, "script '%s' of '%s'", name, user);
}

static const char *const list_cols[] = { "script", "active", "bytes", NULL };

static int list_cb(const struct store_sieve_script *s, void *arg)
{
	struct mc_table *t = arg;

	mc_table_row(t);
	mc_cell_strn(t, s->name, s->name_len);
	mc_cell_bool(t, s->active);
	mc_cell_u64(t, s->src_len);
	return 0;
}

int mc_sieve_list(struct mc *mc, const struct mc_args *a)
{
	struct store_txn *t;
	struct store_user u;
	struct mc_table *tab;
	int rc;

	if ((rc = mc_begin(mc, a->pos[0], NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	tab = mc_table_new(list_cols);
	rc = store_sieve_list(t, a->pos[0], list_cb, tab);
	store_txn_abort(&t);
	if (rc != 0) {
		mc_table_free(&tab);
		return mc_fail(mc, rc, "scripts of '%s'", a->pos[0]);
	}
	mc_table_print(mc, &tab);
	return MC_OK;
}

int mc_sieve_get(struct mc *mc, const struct mc_args *a)
{
	struct store_txn *t;
	struct store_user u;
	struct store_sieve_script s;
	int rc;

	if ((rc = mc_begin(mc, a->pos[0], NULL, STORE_TXN_READ, &t, &u, NULL)) != MC_OK)
		return rc;
	rc = a->npos > 1 ? store_sieve_get(t, a->pos[0], a->pos[1], &s)
			 : store_sieve_active(t, a->pos[0], &s);
	if (rc == 0 && mc->json) {
		printf("{\"user\": ");
		mc_json_str(stdout, a->pos[0], strlen(a->pos[0]));
		printf(", \"script\": ");
		mc_json_str(stdout, s.name, s.name_len);
		printf(", \"active\": %s, \"source\": ", s.active ? "true" : "false");
		mc_json_str(stdout, s.src, s.src_len);
		printf("}\n");
	} else if (rc == 0)
		fwrite(s.src, 1, s.src_len, stdout);
	store_txn_abort(&t);
	if (rc != 0)
		return script_fail(mc, rc, a->npos > 1 ? a->pos[1] : NULL, a->pos[0]);
	return MC_OK;
}

/* Compiles the script in path and, unless check, stores it as name of user: MC_OK, or an exit
   code after saying what failed. */
static int put_file(struct mc *mc, const char *user, const char *name, const char *path,
		    bool check, bool activate)
{
	struct sieve_admin_limits l;
	struct buf b;
	char *err;
	int rc, src;

	sieve_admin_limits_from_conf(mc->conf, &l);
	if ((rc = read_file(mc, path, l.max_script_size, &b)) != MC_OK)
		return rc;
	src = sieve_admin_put(mc->st, &l, user, name, b.data ? b.data : "", b.len, check, activate,
			      &err, &rc);
	buf_release(&b);
	switch (src) {
	case SIEVE_ADMIN_OK:
		return MC_OK;
	case SIEVE_ADMIN_ESYNTAX:
	case SIEVE_ADMIN_EQUOTA:
		rc = mc_refuse(
			mc, MC_REFUSED,
			src == SIEVE_ADMIN_ESYNTAX
				? "fix the script at that line and column (RFC 5228)"
				: "delete a script of the user, or raise [sieve] max_scripts "
				  "or max_storage in heron.conf",
			"%s: %s", path, err);
		free(err);
		return rc;
	}
	return mc_fail(mc, rc, "cannot store script '%s' of '%s'", name, user);
}

static int put_or_check(struct mc *mc, const char *user, const char *name, const char *path,
			bool check, bool activate)
{
	int rc = put_file(mc, user, name, path, check, activate);

	if (rc == MC_OK) {
		if (!mc->json) {
			printf("%s: %s\n", path,
			       check      ? "ok"
			       : activate ? "stored and active"
					  : "stored");
			return MC_OK;
		}
		printf("{\"file\": ");
		mc_json_str(stdout, path, strlen(path));
		if (!check) {
			printf(", \"user\": ");
			mc_json_str(stdout, user, strlen(user));
			printf(", \"script\": ");
			mc_json_str(stdout, name, strlen(name));
			printf(", \"active\": %s", activate ? "true" : "false");
		} else
			printf(", \"ok\": true");
		printf("}\n");
	}
	return rc;
}

int mc_sieve_put(struct mc *mc, const struct mc_args *a)
{
	return put_or_check(mc, a->pos[0], a->pos[1], a->pos[2], false, a->set[0]);
}

int mc_sieve_check(struct mc *mc, const struct mc_args *a)
{
	return put_or_check(mc, a->pos[0], NULL, a->pos[1], true, false);
}

struct sv_op {
	const char *user, *name, *to;
	int verb;
};

static int w_sieve(struct store_txn *t, void *arg)
{
	struct sv_op *o = arg;

	switch (o->verb) {
	case 0:
		return store_sieve_activate(t, o->user, o->name);
	case 1:
		return store_sieve_delete(t, o->user, o->name);
	default:
		return store_sieve_rename(t, o->user, o->name, o->to);
	}
}

static int sieve_write(struct mc *mc, struct sv_op *o, const char *done)
{
	unsigned part;
	int rc = store_user_locate(mc->st, o->user, &part);

	if (rc == 0)
		rc = store_write(mc->st, part, w_sieve, o);
	if (rc == STORE_ENOTSUP)
		return mc_refuse(mc, MC_REFUSED, "see `mailctl sieve deactivate USER`",
				 "'%s' is the active script; deactivate it first", o->name);
	if (rc != 0)
		return script_fail(mc, rc, o->name, o->user);
	if (!mc->json) {
		printf("%s\n", done);
		return MC_OK;
	}
	/* {"user", "script" (not for deactivate), "to" (rename only), "done"} */
	printf("{\"user\": ");
	mc_json_str(stdout, o->user, strlen(o->user));
	if (o->name) {
		printf(", \"script\": ");
		mc_json_str(stdout, o->name, strlen(o->name));
	}
	if (o->to) {
		printf(", \"to\": ");
		mc_json_str(stdout, o->to, strlen(o->to));
	}
	printf(", \"done\": ");
	mc_json_str(stdout, done, strlen(done));
	printf("}\n");
	return MC_OK;
}

int mc_sieve_activate(struct mc *mc, const struct mc_args *a)
{
	struct sv_op o = { a->pos[0], a->pos[1], NULL, 0 };

	return sieve_write(mc, &o, "activated");
}

int mc_sieve_deactivate(struct mc *mc, const struct mc_args *a)
{
	struct sv_op o = { a->pos[0], NULL, NULL, 0 };

	return sieve_write(mc, &o, "no script active");
}

int mc_sieve_delete(struct mc *mc, const struct mc_args *a)
{
	struct sv_op o = { a->pos[0], a->pos[1], NULL, 1 };

	return sieve_write(mc, &o, "deleted");
}

int mc_sieve_rename(struct mc *mc, const struct mc_args *a)
{
	struct sv_op o = { a->pos[0], a->pos[1], a->pos[2], 2 };

	return sieve_write(mc, &o, "renamed");
}

/* ---- put-all: one script for every user (benchmarks, a site-wide default) ---------------- */

struct names {
	char **v;
	size_t n;
};

static int collect_user(const struct store_user *u, void *arg)
{
	struct names *nm = arg;

	nm->v = xreallocarray(nm->v, nm->n + 1, sizeof(char *));
	nm->v[nm->n++] = xstrdup(u->name);
	return 0;
}

struct chunk {
	struct sieve_admin_op *op;
	char **users;
	size_t n;
};

static int w_chunk(struct store_txn *t, void *arg)
{
	struct chunk *c = arg;
	int rc;

	for (size_t i = 0; i < c->n; i++) {
		c->op->user = c->users[i];
		if ((rc = sieve_admin_put_fn(t, c->op)) != 0)
			return rc;
	}
	return 0;
}

int mc_sieve_put_all(struct mc *mc, const struct mc_args *a)
{
	struct sieve_admin_limits l;
	struct sieve_admin_op op = { .l = &l, .name = a->pos[0], .activate = a->set[0] };
	struct buf b;
	char *err;
	uint64_t done = 0;
	int rc;

	sieve_admin_limits_from_conf(mc->conf, &l);
	if ((rc = read_file(mc, a->pos[1], l.max_script_size, &b)) != MC_OK)
		return rc;
	op.src = b.data ? b.data : "";
	op.len = b.len;
	if (sieve_admin_compile(&op, &err) < 0) {
		rc = mc_refuse(mc, MC_REFUSED, "fix the script at that line and column (RFC 5228)",
			       "%s: %s", a->pos[1], err);
		free(err);
		buf_release(&b);
		return rc;
	}
	for (unsigned p = 0; p < store_partitions(mc->st) && rc == 0; p++) {
		struct names nm = { 0 };
		struct store_txn *t;

		if ((rc = store_txn_begin(mc->st, p, STORE_TXN_READ, &t)) == 0) {
			rc = store_user_list(t, collect_user, &nm);
			store_txn_abort(&t);
		}
		for (size_t i = 0; rc == 0 && i < nm.n; i += 1000) {
			struct chunk c = { &op, nm.v + i, nm.n - i < 1000 ? nm.n - i : 1000 };

			if ((rc = store_write(mc->st, p, w_chunk, &c)) == 0)
				done += c.n;
		}
		for (size_t i = 0; i < nm.n; i++)
			free(nm.v[i]);
		free(nm.v);
	}
	sieve_admin_op_clear(&op);
	buf_release(&b);
	if (rc != 0)
		return mc_fail(mc, rc, "put-all stopped after %llu users",
			       (unsigned long long)done);
	if (mc->json) {
		printf("{\"script\": ");
		mc_json_str(stdout, a->pos[0], strlen(a->pos[0]));
		printf(", \"active\": %s, \"users\": %llu}\n", a->set[0] ? "true" : "false",
		       (unsigned long long)done);
		return MC_OK;
	}
	printf("%s stored%s for %llu users\n", a->pos[0], a->set[0] ? " and active" : "",
	       (unsigned long long)done);
	return MC_OK;
}

/* ---- export USER DIR / import USER DIR: the scripts as files ---- */

struct sv_export {
	struct mc *mc;
	const char *dir;
	unsigned n;
	int err; /* errno of the first write that failed */
};

static int write_all(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd == -1)
		return errno;
	while (len > 0) {
		ssize_t w = write(fd, data, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			close(fd);
			return e;
		}
		data += w;
		len -= (size_t)w;
	}
	return close(fd) == 0 ? 0 : errno;
}

static int export_cb(const struct store_sieve_script *s, void *arg)
{
	struct sv_export *x = arg;
	char p[4400];

	snprintf(p, sizeof(p), "%s/heron-sieve", x->dir);
	if (x->n++ == 0 && mkdir(p, 0700) == -1) {
		x->err = errno;
		return STORE_EIO;
	}
	snprintf(p, sizeof(p), "%s/heron-sieve/%.*s.sieve", x->dir, (int)s->name_len, s->name);
	if ((x->err = write_all(p, s->src, s->src_len)) != 0)
		return STORE_EIO;
	if (s->active) {
		char line[STORE_SIEVE_NAME_MAX + 2];
		int n = snprintf(line, sizeof(line), "%.*s\n", (int)s->name_len, s->name);

		snprintf(p, sizeof(p), "%s/heron-sieve-active", x->dir);
		if ((x->err = write_all(p, line, (size_t)n)) != 0)
			return STORE_EIO;
	}
	return 0;
}

int mc_sieve_export(struct mc *mc, const char *user, const char *dir)
{
	struct sv_export x = { mc, dir, 0, 0 };
	struct store_txn *t;
	unsigned part;
	int rc;

	if ((rc = store_user_locate(mc->st, user, &part)) != 0 ||
	    (rc = store_txn_begin(mc->st, part, STORE_TXN_READ, &t)) != 0)
		return script_fail(mc, rc, "", user);
	rc = store_sieve_list(t, user, export_cb, &x);
	store_txn_abort(&t);
	if (x.err != 0)
		return mc_refuse(mc, MC_ERR, "see the free space and permissions there",
				 "writing %s/heron-sieve: %s", dir, strerror(x.err));
	return rc != 0 ? mc_fail(mc, rc, "the Sieve scripts of '%s'", user) : MC_OK;
}

/* DIR/heron-sieve-active's first line, into name (empty when the file is missing). */
static int read_active(struct mc *mc, const char *dir, char *name, size_t size)
{
	char p[4200];
	FILE *f;

	name[0] = '\0';
	snprintf(p, sizeof(p), "%s/heron-sieve-active", dir);
	if ((f = fopen(p, "r")) == NULL)
		return errno == ENOENT ? MC_OK : mc_fail(mc, STORE_EIO, "cannot open %s", p);
	if (fgets(name, (int)size, f) == NULL || name[strcspn(name, "\n")] != '\n') {
		fclose(f);
		return mc_refuse(mc, MC_DATAERR,
				 "write the active script's name on its first line",
				 "%s: not a script name", p);
	}
	fclose(f);
	name[strcspn(name, "\n")] = '\0';
	return MC_OK;
}

int mc_sieve_import(struct mc *mc, const char *user, const char *dir, bool check, unsigned *n_r)
{
	char sub[4200], active[STORE_SIEVE_NAME_MAX + 2];
	struct dirent *de;
	unsigned n = 0;
	bool found = false;
	DIR *d;
	int rc;

	snprintf(sub, sizeof(sub), "%s/heron-sieve", dir);
	if ((d = opendir(sub)) == NULL)
		return errno == ENOENT ? MC_OK : mc_fail(mc, STORE_EIO, "cannot open %s", sub);
	if ((rc = read_active(mc, dir, active, sizeof(active))) != MC_OK) {
		closedir(d);
		return rc;
	}
	while (rc == MC_OK && (de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		char *name, *path;

		if (len <= 6 || strcmp(de->d_name + len - 6, ".sieve") != 0)
			continue; /* ".", "..", anything else */
		name = xstrndup(de->d_name, len - 6);
		path = xasprintf("%s/%s", sub, de->d_name);
		found |= strcmp(name, active) == 0;
		rc = put_file(mc, user, name, path, check, strcmp(name, active) == 0);
		n += rc == MC_OK;
		free(name);
		free(path);
	}
	closedir(d);
	if (rc == MC_OK && active[0] != '\0' && !found)
		rc = mc_refuse(mc, MC_DATAERR,
			       "give the script's file, or remove heron-sieve-active",
			       "%s/heron-sieve-active: no script '%s' in %s", dir, active, sub);
	if (n_r != NULL)
		*n_r = n;
	return rc;
}

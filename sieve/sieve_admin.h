/* sieve_admin.h — storing scripts the way every front end does (ManageSieve PUTSCRIPT,
 * mailctl sieve put): compile, check the per-user quota, write source and program into the
 * user's store partition in one write txn. Links libheron_sieve and libheron_store. */
#ifndef HERON_SIEVE_ADMIN_H
#define HERON_SIEVE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct store;

struct sieve_admin_limits {
	uint64_t max_script_size, max_scripts, max_storage;
};
/* [sieve] max_script_size, max_scripts, max_storage */
void sieve_admin_limits_from_conf(const struct conf *c, struct sieve_admin_limits *l);

enum sieve_admin_err {
	SIEVE_ADMIN_OK = 0,
	SIEVE_ADMIN_ESYNTAX, /* the script does not compile: *error_r says where */
	SIEVE_ADMIN_EQUOTA,  /* too many scripts, or too many bytes: *error_r says which */
	SIEVE_ADMIN_ESTORE,  /* *store_rc_r holds the store error (ENOUSER, temporary...) */
};

/* The pieces, for a caller that writes through the group commit (managesieved): compile
   into op (0, or -1 with *error_r), then run sieve_admin_put_fn(t, op) in a write txn of
   the user's partition: it returns STORE_EQUOTA with op->quota set and op->why filled when
   the quota refuses, else a store error or 0. */
struct sieve_admin_op {
	const struct sieve_admin_limits *l;
	const char *user, *name, *src;
	size_t len;
	uint8_t *prog;
	size_t prog_len;
	bool activate;
	bool quota;
	char why[160];
};
struct store_txn;
int sieve_admin_compile(struct sieve_admin_op *op, char **error_r);
int sieve_admin_put_fn(struct store_txn *t, void *op);
void sieve_admin_op_clear(struct sieve_admin_op *op);

/* Compiles src; unless check_only, stores it as name (replacing a script of that name;
   quota counted without the replaced one) and makes it active when activate. *error_r
   (malloc'd) is set for ESYNTAX and EQUOTA. */
int sieve_admin_put(struct store *st, const struct sieve_admin_limits *l, const char *user,
		    const char *name, const char *src, size_t len, bool check_only, bool activate,
		    char **error_r, int *store_rc_r);

#endif

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
	SIEVE_ADMIN_ESYNTAX,   /* the script does not compile: *error_r says where */
	SIEVE_ADMIN_EQUOTA,    /* too many scripts, or too many bytes: *error_r says which */
	SIEVE_ADMIN_ESTORE,    /* *store_rc_r holds the store error (ENOUSER, temporary...) */
};

/* Compiles src; unless check_only, stores it as name (replacing a script of that name;
   quota counted without the replaced one) and makes it active when activate. *error_r
   (malloc'd) is set for ESYNTAX and EQUOTA. */
int sieve_admin_put(struct store *st, const struct sieve_admin_limits *l, const char *user,
		    const char *name, const char *src, size_t len, bool check_only,
		    bool activate, char **error_r, int *store_rc_r);

#endif

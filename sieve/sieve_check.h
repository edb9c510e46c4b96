/* sieve_check.h — the checker's tables, shared by sieve_check.c (what each command, test and
 * tag accepts) and sieve_compile.c (control flow and code). */
#ifndef HERON_SIEVE_CHECK_H
#define HERON_SIEVE_CHECK_H

#include "sieve/sieve_private.h"

enum sv_kind { K_CMD, K_TEST, K_CTRL };

/* groups of tags a command accepts */
enum sv_group {
	G_CMP = 1 << 0,
	G_MATCH = 1 << 1,
	G_APART = 1 << 2,
	G_BODY = 1 << 3,
	G_ZONE = 1 << 4,
	G_INDEX = 1 << 5,
	G_COPY = 1 << 6,
	G_CREATE = 1 << 7,
	G_FLAGS = 1 << 8,
	G_VAC = 1 << 9,
	G_SIZE = 1 << 10,
	G_SPAM = 1 << 11,
	G_INCL = 1 << 12,
	G_MODS = 1 << 13,
	G_DUP = 1 << 14,
	G_LAST = 1 << 15,
	G_MIME = 1 << 16,
};

/* extensions (bits of the require set) */
enum sv_ext {
	E_FILEINTO = 1 << 0,
	E_REJECT = 1 << 1,
	E_EREJECT = 1 << 2,
	E_ENVELOPE = 1 << 3,
	E_IMAP4FLAGS = 1 << 4,
	E_COPY = 1 << 5,
	E_BODY = 1 << 6,
	E_VARIABLES = 1 << 7,
	E_RELATIONAL = 1 << 8,
	E_SUBADDRESS = 1 << 9,
	E_DATE = 1 << 10,
	E_INDEX = 1 << 11,
	E_VACATION = 1 << 12,
	E_VACSECONDS = 1 << 13,
	E_INCLUDE = 1 << 14,
	E_ENCCHAR = 1 << 15,
	E_EDITHEADER = 1 << 16,
	E_MAILBOX = 1 << 17,
	E_DUPLICATE = 1 << 18,
	E_SPAMTEST = 1 << 19,
	E_SPAMTESTPLUS = 1 << 20,
	E_VIRUSTEST = 1 << 21,
	E_REGEX = 1 << 22,
	E_NUMERIC = 1 << 23,
	E_OCTET = 1 << 24,
	E_CASEMAP = 1 << 25,
	E_UCASEMAP = 1 << 26,
};

struct sv_cmdspec {
	const char *name;
	enum sv_kind kind;
	uint8_t op;
	uint32_t ext;    /* needed extension (0: base) */
	uint32_t groups; /* tag groups accepted */
	const char *pos; /* positional arguments: S string, L string list, N number;
				lower case = optional at the front (imap4flags' variable) */
};

const struct sv_cmdspec *sv_cmd_find(const char *name);
uint32_t sv_ext_find(const char *name);

/* An instruction being compiled: small fields and the tree's string lists by field id. */
struct sv_cins {
	struct sv_ins v;
	const struct sv_arg *sl[F_COUNT];
};

/* Checks the tags and positional arguments of n against its spec (given the required
   extensions) and fills ci. -1 with *error_r set. */
int sv_check_args(const struct sv_node *n, const struct sv_cmdspec *cs, uint32_t exts,
		  struct sv_arena *a, struct sv_cins *ci, char **error_r);
/* "line L, column C: ..." in the arena */
char *sv_errf(struct sv_arena *a, uint32_t line, uint32_t col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif

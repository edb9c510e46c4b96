/* sieve_run.h — the interpreter's state, shared by sieve_run.c (the machine, variables,
 * actions) and sieve_tests.c (the tests that read the message). */
#ifndef HERON_SIEVE_RUN_H
#define HERON_SIEVE_RUN_H

#include "sieve/sieve_private.h"

#define SV_MAX_VARS 128
#define SV_VAR_MAX 4096     /* bytes of one variable's value (RFC 5229: at least 4000) */
#define SV_EXPAND_MAX 65536 /* bytes of one expanded string */
#define SV_NMATCH 10

struct sv_hdr {
	const char *name;
	size_t nlen;
	const char *raw; /* the whole field, folds and line end */
	size_t rawlen;
	char *value; /* unfolded, computed when first needed (run arena) */
	size_t vlen;
	char *dvalue; /* and RFC 2047-decoded, when first needed */
	size_t dlen;
	bool deleted;
};

struct sv_var {
	char *name;
	char *val;
	size_t len;
};

struct sv_frame {
	char **globals; /* names declared global in this script */
	size_t nglobals;
	struct sv_var vars[SV_MAX_VARS];
	size_t nvars;
};

struct sv_run {
	const struct sieve_env *env;
	struct sieve_limits lim;
	struct sieve_result *r;
	struct sv_arena arena; /* lives for the run */
	struct sv_arena tmp;   /* reset after every instruction */
	struct sv_hdr *h;
	size_t nh, caph;
	bool edited;
	const char *body;
	size_t body_len;
	struct sv_frame *frame;
	struct sv_var gvars[SV_MAX_VARS];
	size_t ngvars;
	struct sv_str match[SV_NMATCH]; /* ${0}..${9}, in the run arena */
	size_t nmatch;
	char *flags; /* imap4flags internal variable: space-separated */
	bool implicit_keep, any_keep, rejecting, vacationed, stop;
	unsigned redirects, actions, depth;
	char **included; /* :once */
	size_t nincluded;
	char *error;
};

/* "runtime error" / limit: the run stops; the message is kept */
int sv_run_fail(struct sv_run *rn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a string of the program with variables expanded (tmp arena) */
struct sv_str sv_expand(struct sv_run *rn, const char *s, size_t len, unsigned flags);
/* the next string of a list, variables expanded: 1, or 0 at the end */
int sv_sl_next_exp(struct sv_run *rn, struct sv_sl_iter *it, struct sv_str *out);
/* match one value against the key list of in (field kf): 1, 0, or -1 (failed run) */
int sv_match_keys(struct sv_run *rn, const struct sv_ins *in, unsigned kf, const char *v,
		  size_t vlen);
/* a test over a list of values (handles :count): 1, 0, -1 */
int sv_match_values(struct sv_run *rn, const struct sv_ins *in, unsigned kf,
		    const struct sv_str *vals, size_t n);
/* the unfolded value of header i */
struct sv_str sv_hdr_value(struct sv_run *rn, size_t i);
/* the same with RFC 2047 encoded words decoded (header test) */
struct sv_str sv_hdr_decoded(struct sv_run *rn, size_t i);
/* charges header or body bytes against the limits: 0 or -1 (failed) */
int sv_charge(struct sv_run *rn, bool body, uint64_t n);

/* sieve_tests.c: evaluates a test instruction: 1 true, 0 false, -1 the run failed */
int sv_test(struct sv_run *rn, const struct sv_ins *in);
/* all values of a variable list or the internal flags (hasflag, :flags) */
void sv_flag_words(struct sv_run *rn, const char *s, size_t len, struct sv_str **v, size_t *n,
		   size_t *cap);

#endif

/* srs.h — the Sender Rewriting Scheme (the SRS0/SRS1 "Guarded" scheme of Shevek's SRS paper,
 * the format libsrs2 and Mail::SRS write) for mail forwarded off-site: the envelope sender of a
 * forwarded copy becomes an address of ours that a bounce can come back to, and a bounce to such
 * an address is reversed to the original sender after its hash and timestamp are checked.
 * Pure logic (no I/O but srs_load's read of the secret file).
 *
 *     SRS0=HHHH=TT=orig.domain=orig-local@srs.domain
 *     SRS1=HHHH=first.hop==HHHH=TT=orig.domain=orig-local@srs.domain
 *
 * HHHH: the first 4 characters of base64(HMAC-SHA1(secret, the lower-cased fields)); TT: the
 * day number modulo 1024 in base32. A rewritten local part longer than RFC 5321's 64 octets
 * is not made (the sender stays as it was). */
#ifndef HERON_MTAD_SRS_H
#define HERON_MTAD_SRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRS_SECRETS_MAX 16             /* secrets of one file (the first signs) */
#define SRS_SECRET_FILE_MAX (64 << 10) /* bytes of the secret file */
#define SRS_HASH_LEN 4

struct srs;

/* A rewriter for domain with these secrets (the first signs; all are tried on reversal) and
   addresses valid max_age_days. 0, or -1 with *error_r (a constant). */
int srs_new(const char *domain, const char *const *secrets, size_t nsecrets, unsigned max_age_days,
	    struct srs **srs_r, const char **error_r);
/* Reads the secrets from path (one a line; blank lines and '#' lines skipped). 0, or -1 with
   *error_r malloc'd. */
int srs_load(const char *path, const char *domain, unsigned max_age_days, struct srs **srs_r,
	     char **error_r);
void srs_free(struct srs **srsp);
const char *srs_domain(const struct srs *srs);

/* The local part of addr starts with SRS0 or SRS1 and a separator (= + -). */
bool srs_is_srs(const char *addr);

/* The SRS form of sender ("local@domain", no <>) at Unix time now into out: 1 rewritten; 0
   left as is (the null sender, no domain, a quoted local part, the domain is the SRS domain,
   or the result would be too long). */
int srs_forward(const struct srs *srs, const char *sender, int64_t now, char *out, size_t size);
/* The address an SRS address stands for: 0 with out filled, or -1 with *why_r (a constant:
   "not an SRS address", "bad hash", "expired", ...). */
int srs_reverse(const struct srs *srs, const char *addr, int64_t now, char *out, size_t size,
		const char **why_r);

#endif

/* psl.h — the Public Suffix List (Debian's publicsuffix package,
 * /usr/share/publicsuffix/public_suffix_list.dat) and the organizational domain DMARC
 * aligns on (RFC 7489 3.2): the public suffix plus one label. */
#ifndef HERON_PSL_H
#define HERON_PSL_H

#include <stddef.h>

#define PSL_DEFAULT_PATH "/usr/share/publicsuffix/public_suffix_list.dat"

struct psl;
/* Loads the list (rules, wildcards, exceptions; comments and blank lines skipped). -1 with a
   malloc'd *error_r. */
int psl_load(const char *path, struct psl **psl_r, char **error_r);
/* The same from text in memory (tests). */
struct psl *psl_from_text(const char *text, size_t len);
void psl_free(struct psl **pp);
/* The organizational domain of domain (lower case, no trailing dot) into out: the public
   suffix plus one label, or domain itself when it is a public suffix. */
void psl_org_domain(const struct psl *psl, const char *domain, char *out, size_t size);

#endif

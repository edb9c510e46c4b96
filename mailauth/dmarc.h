/* dmarc.h — DMARC (RFC 7489): the policy record, its discovery (_dmarc.<From domain>, then
 * the organizational domain's, whose sp= then applies), identifier alignment (relaxed: same
 * organizational domain; strict: same domain) of the SPF and DKIM results, and pct. */
#ifndef HERON_DMARC_H
#define HERON_DMARC_H

#include <stdbool.h>

#include "mailauth/dkim.h"
#include "mailauth/mailauth.h"
#include "mailauth/psl.h"

enum dmarc_policy { DMARC_P_NONE, DMARC_P_QUARANTINE, DMARC_P_REJECT };
const char *dmarc_policy_str(enum dmarc_policy p);

struct dmarc_record {
	enum dmarc_policy p, sp;
	bool has_sp, adkim_strict, aspf_strict;
	unsigned pct;
};
/* Parses a TXT record: 0, or -1 with *err (not a valid DMARC record). */
int dmarc_record_parse(const char *txt, size_t len, struct dmarc_record *r, const char **err);

struct dmarc_input {
	const char *from_domain; /* RFC5322.From's domain */
	enum ma_result spf;      /* SPF of spf_domain */
	const char *spf_domain;  /* MAIL FROM's domain (HELO for <>) */
	const struct dkim_result *dkim;
	size_t ndkim;
	const struct psl *psl;
	unsigned sample; /* 0..99: below pct the policy applies */
};

struct dmarc_verdict {
	enum ma_result result;    /* none pass fail temperror permerror */
	enum dmarc_policy policy; /* the published policy for this domain (p or sp) */
	enum dmarc_policy action; /* what to do after pct: none quarantine reject */
	bool spf_aligned, dkim_aligned;
	char domain[DNS_NAME_MAX + 1]; /* header.from */
	const char *reason;
};

struct dmarc;
/* Like spf_check: 1 with *v at once (nothing to free), or 0 and done(v, arg) from the loop,
   then dmarc_free(*dp). */
int dmarc_check(const struct ma_resolver *r, const struct dmarc_input *in,
		void (*done)(const struct dmarc_verdict *v, void *arg), void *arg,
		struct dmarc **dp, struct dmarc_verdict *v);
void dmarc_free(struct dmarc **dp);

#endif

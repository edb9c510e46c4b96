/* tls_policy.h — outbound TLS policy: which level a connection to an exchanger must reach
 * (a transport_map override, else DANE when the exchanger's TLSA records validate (RFC 7672),
 * else opportunistic), and the OpenSSL set-up of a connection at that level (DANE-EE and
 * DANE-TA with SHA-256/SHA-512/full matching through OpenSSL's DANE support; PKIX checks
 * against [tls] ca or the system store). The decision is kept free of I/O for unit tests. */
#ifndef HERON_MTAD_TLS_POLICY_H
#define HERON_MTAD_TLS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "dns/dns.h"

enum tls_level {
	TLSL_DEFAULT = 0, /* no override: decided per exchanger */
	TLSL_NONE,        /* never STARTTLS */
	TLSL_MAY,         /* STARTTLS when offered, any certificate, plaintext otherwise */
	TLSL_ENCRYPT,     /* TLS required, no authentication (TLSA present, none usable) */
	TLSL_VERIFY,      /* TLS required, the certificate verifies (PKIX) for the host name */
	TLSL_STS,         /* as verify, because of the domain's MTA-STS policy (RFC 8461) */
	TLSL_DANE,        /* TLS required, the certificate matches the TLSA records */
};

#define TLSA_MAX 8         /* TLSA records used of one host */
#define TLSA_DATA_MAX 4096 /* bytes of one record's data (a full certificate) */

struct tlsa_rec {
	uint8_t usage, selector, mtype;
	size_t len;
	uint8_t *data;
};

/* What DNS said about an exchanger, for the decision. */
struct tls_facts {
	enum tls_level override; /* transport_map tls=, or TLSL_DEFAULT */
	bool mx_secure;          /* the MX answer (or the nexthop name) validated */
	bool addr_secure;        /* the host's address answer validated */
	enum dns_status tlsa_status;
	bool tlsa_secure;
	size_t tlsa_usable; /* DANE-TA(2)/DANE-EE(3) records with known selector/type */
};

/* The level for a connection, or TLSL_DEFAULT with *defer_r set when the mail must wait
   (a signed host whose TLSA lookup failed; tls=dane without usable validated TLSA). */
enum tls_level tls_policy_decide(const struct tls_facts *f, const char **defer_r);

/* Whether a TLSA record is usable for SMTP (RFC 7672 3.1: DANE-TA or DANE-EE, selector 0/1,
   matching type 0/1/2 with the right length). */
bool tls_tlsa_usable(uint8_t usage, uint8_t selector, uint8_t mtype, size_t len);

/* "none", "may", "encrypt", "verify", "sts", "dane"; parses the same except "sts" (a
   domain's policy, not a setting) ("" and NULL: TLSL_DEFAULT; -1 for anything else). */
const char *tls_level_name(enum tls_level l);
int tls_level_parse(const char *s, size_t len);

/* A client SSL for host at level l (NULL on failure, *error_r set, static text). For DANE the
   context must have had SSL_CTX_dane_enable. */
SSL *tls_policy_ssl(SSL_CTX *ctx, enum tls_level l, const char *host, const struct tlsa_rec *tlsa,
		    size_t ntlsa, const char **error_r);

#endif

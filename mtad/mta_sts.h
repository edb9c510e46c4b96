/* mta_sts.h — SMTP MTA Strict Transport Security (RFC 8461): the `_mta-sts` TXT record and
 * the policy file (parsers that do no I/O, fuzzed), MX matching, and a per-process cache of
 * policies that fetches https://mta-sts.DOMAIN/.well-known/mta-sts.txt from the event loop
 * (the certificate verified against [tls] ca or the system store), keeps each for its
 * max_age, refetches when the TXT id changes, and keeps using an unexpired policy when the
 * TXT record or the fetch fails (RFC 8461 5.1). */
#ifndef HERON_MTAD_MTA_STS_H
#define HERON_MTAD_MTA_STS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "dns/dns.h"

#define STS_ID_MAX 32
#define STS_MX_MAX 32            /* mx: lines kept */
#define STS_POLICY_MAX 65536     /* bytes of a policy file */
#define STS_MAX_AGE_MAX 31557600 /* seconds (RFC 8461 3.2) */

enum sts_mode { STS_NONE, STS_TESTING, STS_ENFORCE };

struct sts_policy {
	enum sts_mode mode;
	int64_t max_age; /* seconds */
	size_t nmx;
	char mx[STS_MX_MAX][DNS_NAME_MAX + 3]; /* "mx.example.com" or "*.example.com" */
};

/* One TXT record: 1 and its id in id when it is an STSv1 record, 0 when it is some other
   record (not starting with v=STSv1), -1 when it starts so but is malformed. */
int sts_txt_parse(const char *txt, size_t len, char id[STS_ID_MAX + 1]);

/* The policy file (RFC 8461 3.2: key: value lines, CRLF or LF). 0, or -1 with *error_r
   (static text): no/bad version, mode or max_age, no mx with mode enforce/testing, too big. */
int sts_policy_parse(const char *text, size_t len, struct sts_policy *p, const char **error_r);

/* Whether MX host name matches one of p's mx patterns ("*." matches one left-most label). */
bool sts_mx_match(const struct sts_policy *p, const char *host);

const char *sts_mode_name(enum sts_mode m);

/* The cache and fetcher. port is the HTTPS port (443; tests use another). */
struct sts_cache;
struct sts_cache *sts_cache_new(struct event_base *base, struct dns *dns, SSL_CTX *verify_ctx,
				const char *port, int64_t timeout_ms);
void sts_cache_free(struct sts_cache **cp);

struct sts_req;
/* The policy in force for domain, or NULL (none, or none could be had: deliver as without
   MTA-STS). cb runs from the loop; p is valid during the call only. */
typedef void sts_cb(const struct sts_policy *p, void *arg);
struct sts_req *sts_lookup(struct sts_cache *c, const char *domain, sts_cb *cb, void *arg);
void sts_cancel(struct sts_req **rp);

#endif

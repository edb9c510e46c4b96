/* dns.h — libheron_dns: an asynchronous DNS resolver for one libevent loop, with DNSSEC status
 * and a TTL-respecting cache of parsed answers shared by everything on that loop (an mtad
 * worker's SMTP sessions and its queue runner).
 *
 * libunbound does the resolving and, with dnssec = validate, the validation (see
 * dns/README.md for why). Its result pipe is watched by the loop: a lookup never blocks.
 * Queries for the same name and type while one is out share it; answers are cached for their
 * TTL (negative ones for the zone's negative TTL), bounded in entries. Temporary failures are
 * never cached. Each attempt is bounded by the timeout and repeated up to attempts times.
 *
 * Callbacks always run from the loop, never from inside the call that started the lookup (also
 * on a cache hit). The answer passed to a callback is valid during the callback only. */
#ifndef HERON_DNS_H
#define HERON_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <event2/event.h>

#include "common/conf_keys.h"

struct conf;

#define DNS_NAME_MAX 253  /* a domain name as text, without the trailing dot */
#define DNS_RR_MAX 1024   /* records kept of one answer; more are dropped (logged) */
#define DNS_TXT_MAX 65535 /* bytes of one TXT record's concatenated strings */

enum dns_type {
	DNS_T_A = 1,
	DNS_T_CNAME = 5,
	DNS_T_PTR = 12,
	DNS_T_MX = 15,
	DNS_T_TXT = 16,
	DNS_T_AAAA = 28,
	DNS_T_TLSA = 52,
};

enum dns_status {
	DNS_OK = 0,   /* n >= 1 records */
	DNS_NODATA,   /* the name exists, without records of that type */
	DNS_NXDOMAIN, /* the name does not exist */
	DNS_ETEMP,    /* SERVFAIL, REFUSED, no answer in time, malformed answer: try later */
	DNS_EBOGUS,   /* DNSSEC validation failed (dnssec = validate): treat as temporary */
	DNS_EINVAL,   /* the name is not a domain name we look up */
};

/* enum dns_dnssec (common/conf_keys.h, [dns] dnssec): DNS_DNSSEC_VALIDATE (libunbound
   validates from trust_anchor_file), DNS_DNSSEC_TRUST_AD (the configured resolvers' AD bit),
   DNS_DNSSEC_OFF (nothing is ever secure). */

struct dns_mx {
	uint16_t pref;
	char host[DNS_NAME_MAX + 1]; /* lower case, no trailing dot; "" for "." (null MX) */
};

struct dns_tlsa {
	uint8_t usage, selector, mtype;
	size_t len;
	const uint8_t *data;
};

struct dns_rr {
	enum dns_type type;
	union {
		struct in_addr a;
		struct in6_addr aaaa;
		struct dns_mx mx;
		struct {
			size_t len;       /* the character-strings joined, no NUL inside */
			const char *text; /* NUL-terminated (len bytes before it) */
		} txt;
		struct dns_tlsa tlsa;
		char cname[DNS_NAME_MAX + 1];
		char ptr[DNS_NAME_MAX + 1]; /* PTR: the name pointed to */
	} u;
};

struct dns_answer {
	enum dns_status status;
	enum dns_type type;
	const char *name;  /* as asked, lower case */
	const char *canon; /* the name after CNAMEs (== name without any) */
	bool secure;       /* DNSSEC-validated: ours, or a trusted resolver's AD */
	bool cached;       /* served from the cache */
	uint32_t ttl;      /* seconds the answer stays valid */
	size_t n;
	const struct dns_rr *rr;
	const char *why; /* for logs: the failure, or "" */
};

typedef void dns_cb(const struct dns_answer *a, void *arg);

struct dns_opts {
	const char *resolv_conf;        /* nameservers from this file when nameservers is empty */
	const char *const *nameservers; /* "127.0.0.1", "127.0.0.1@5353", "[::1]:53" ... */
	size_t nnameservers;
	int64_t timeout_ms; /* per attempt */
	unsigned attempts;
	enum dns_dnssec dnssec;
	const char *trust_anchor_file; /* validate: DS/DNSKEY records in zone-file format */
	size_t cache_size;             /* answers kept (0: no cache) */
};

/* Fills o from [dns] of c (pointers into c, valid while c is). */
void dns_opts_from_conf(struct dns_opts *o, const struct conf *c);

struct dns;
/* A resolver on base. -1 with a malloc'd *error_r (a bad nameserver, an unreadable trust
   anchor or resolv.conf). Create it in the process that uses it (after fork). */
int dns_new(struct event_base *base, const struct dns_opts *o, struct dns **dns_r, char **error_r);
/* Pending lookups are dropped without their callbacks. *dp = NULL; safe on NULL. */
void dns_free(struct dns **dp);

struct dns_query;
/* Looks name up (a trailing dot is allowed; case is ignored). cb runs exactly once unless the
   query is cancelled. An invalid name also answers through cb (DNS_EINVAL). */
struct dns_query *dns_lookup(struct dns *d, const char *name, enum dns_type type, dns_cb *cb,
			     void *arg);
/* cb will not run. *qp = NULL; safe on NULL. */
void dns_cancel(struct dns_query **qp);

/* Counters since dns_new: lookups asked, answered from the cache (or joined to one in
   flight), and queries handed to libunbound (attempts included). */
struct dns_stats {
	uint64_t lookups, hits, queries;
};
void dns_stats(const struct dns *d, struct dns_stats *s);

/* "ok", "nodata", "nxdomain", "temporary failure", "dnssec bogus", "invalid name". */
const char *dns_status_str(enum dns_status st);

/* Whether name is a domain name we look up: LDH labels (and '_' for service names) of 1-63
   bytes, at most DNS_NAME_MAX bytes, an optional trailing dot. */
bool dns_name_valid(const char *name);

/* rdata parsing (dns_rr.c), for libunbound's uncompressed wire rdata; exposed for tests and
   fuzzing. Each returns 0, or -1 for malformed rdata. TXT and TLSA point into rdata. */
int dns_rr_parse(enum dns_type type, const uint8_t *rdata, size_t len, struct dns_rr *rr,
		 char *txtbuf, size_t txtsize);
/* An uncompressed wire name at p (at most len bytes) into text (lower case, no trailing dot,
   "" for the root); the bytes it took in *used_r. -1 on a compression pointer, a label over
   63 bytes, a name over DNS_NAME_MAX, a dot or a control byte inside a label, or truncation. */
int dns_name_from_wire(const uint8_t *p, size_t len, char out[DNS_NAME_MAX + 1], size_t *used_r);

#endif

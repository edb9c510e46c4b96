/* spf.h — SPF (RFC 7208): the record parser (every mechanism and modifier, macro syntax,
 * CIDR lengths) and check_host() as an asynchronous evaluation through a resolver: include
 * and redirect, a/mx/ptr/exists lookups, the limits of 4.6.4 (10 lookup terms, 10 names per
 * mx/ptr, 2 void lookups), macros (7) including %{p} and the explanation's %{c} %{r} %{t}. */
#ifndef HERON_SPF_H
#define HERON_SPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mailauth/mailauth.h"

#define SPF_LOOKUP_MAX 10 /* DNS-querying terms per evaluation */
#define SPF_VOID_MAX 2    /* lookups answering NXDOMAIN or no records */
#define SPF_NAMES_MAX 10  /* MX or PTR names looked at per term */
#define SPF_QUERY_MAX 200 /* every DNS query of one evaluation: a bound for hostile zones */
#define SPF_DEPTH_MAX 12  /* include/redirect nesting (the lookup limit comes first) */
#define SPF_EXP_MAX 512   /* bytes of an explanation kept */

struct spf_ip {
	int family;          /* AF_INET or AF_INET6 */
	unsigned char a[16]; /* IPv4 in the first 4 bytes */
};
/* Text to address (IPv4-mapped IPv6 becomes IPv4): 0 or -1. */
int spf_ip_parse(const char *text, struct spf_ip *ip);

enum spf_mech { SPF_ALL, SPF_INCLUDE, SPF_A, SPF_MX, SPF_PTR, SPF_IP4, SPF_IP6, SPF_EXISTS };
struct spf_term {
	enum spf_mech mech;
	enum ma_result qual; /* pass, fail, softfail or neutral */
	char *domain;        /* the domain-spec (macros unexpanded), or NULL */
	int cidr4, cidr6;    /* prefix lengths (32 / 128 when absent) */
	struct spf_ip ip;    /* ip4/ip6 */
};
struct spf_record {
	struct spf_term *t;
	size_t n;
	char *redirect, *exp; /* domain-specs, or NULL */
};
/* Whether a TXT record is an SPF record ("v=spf1" then a space or the end). */
bool spf_is_record(const char *txt, size_t len);
/* Parses a record: 0, or -1 with *err (a permerror). Release even after -1. */
int spf_record_parse(const char *txt, size_t len, struct spf_record *r, const char **err);
void spf_record_release(struct spf_record *r);

struct spf_request {
	struct spf_ip ip;
	const char *sender; /* MAIL FROM ("" for <>: postmaster@helo is used) */
	const char *helo;
	const char *domain;   /* the identity checked: the sender's domain, or the HELO */
	const char *receiver; /* our host name (%{r}) */
	int64_t now;          /* %{t} */
};

struct spf_verdict {
	enum ma_result result;         /* none pass fail softfail neutral temperror permerror */
	char explanation[SPF_EXP_MAX]; /* a fail's exp= text, or "" */
	const char *problem;           /* why permerror/temperror, or NULL */
	char mechanism[96];            /* the term that matched ("-all", "include:x"), or "" */
	unsigned lookups, voids, queries;
};

struct spf;
/* Starts check_host(ip, domain, sender). 1 when the verdict is known at once (*v filled, done
   does not run, nothing to free); else 0 with *sp set: done(verdict, arg) runs from the loop,
   after which *sp is freed by spf_free (not from inside done's caller's frame: spf_free in
   done is allowed). */
int spf_check(const struct ma_resolver *r, const struct spf_request *rq,
	      void (*done)(const struct spf_verdict *v, void *arg), void *arg, struct spf **sp,
	      struct spf_verdict *v);
/* Cancels a pending evaluation (done does not run). *sp = NULL; safe on NULL. */
void spf_free(struct spf **sp);

/* Expands a macro-string (RFC 7208 7) for the request, current domain d: 0, or -1 (bad
   syntax). exp allows %{c} %{r} %{t}. ptr_name: the validated name for %{p} ("unknown").
   Exposed for tests and fuzzing. */
int spf_expand(const char *spec, const struct spf_request *rq, const char *d, const char *ptr_name,
	       bool exp, char *out, size_t size);

#endif

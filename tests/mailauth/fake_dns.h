/* fake_dns.h — a resolver for libheron_mailauth's tests: answers from a table, from the loop
 * (event_base_once), with the semantics of the SPF test suite's driver (pyspf testspf.py):
 * records of a name in order, TIMEOUT entries, one level of CNAME, "error." names time out. */
#ifndef HERON_FAKE_DNS_H
#define HERON_FAKE_DNS_H

#include <event2/event.h>

#include "mailauth/mailauth.h"

struct fake_dns;
struct fake_dns *fake_dns_new(struct event_base *base);
void fake_dns_free(struct fake_dns **fp);
/* type: A AAAA MX ("10 host") TXT PTR CNAME, or TIMEOUT (data ignored). */
void fake_dns_add(struct fake_dns *f, const char *name, const char *type, const char *data);
/* The same with data of len bytes (a TXT record may hold NUL or control bytes). */
void fake_dns_add_len(struct fake_dns *f, const char *name, const char *type, const char *data,
		      size_t len);
void fake_dns_clear(struct fake_dns *f);
void fake_dns_resolver(struct fake_dns *f, struct ma_resolver *r);
/* Lookups asked since the last clear. */
unsigned fake_dns_queries(const struct fake_dns *f);

#endif

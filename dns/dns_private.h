/* dns_private.h — inside libheron_dns: shared by dns.c and dns_ad.c. */
#ifndef HERON_DNS_PRIVATE_H
#define HERON_DNS_PRIVATE_H

#include <stdbool.h>
#include <sys/socket.h>

#include "dns/dns.h"

/* A [dns] nameservers entry ("1.2.3.4", "1.2.3.4@53", "1.2.3.4:53", "[::1]:53") as
   libunbound's "addr[@port]". */
int dns_ns_addr(const char *in, char *out, size_t size);

/* trust-ad (dns_ad.c): the resolver to ask, the first of o's nameservers or of its
   resolv_conf; -1 when there is none. */
int dns_ad_server(const struct dns_opts *o, struct sockaddr_storage *ss, socklen_t *len_r);
/* Asks the resolver at sa for name/type with AD and DO; cb(ad) runs from the loop: whether
   it set AD (false on no answer within timeout_ms). name must be a checked lower-case name. */
struct dns_adq;
struct dns_adq *dns_ad_ask(struct event_base *base, const struct sockaddr *sa, socklen_t salen,
			   const char *name, uint16_t type, int64_t timeout_ms,
			   void (*cb)(bool ad, void *arg), void *arg);
void dns_ad_cancel(struct dns_adq **ap);

#endif

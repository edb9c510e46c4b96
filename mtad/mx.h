/* mx.h — the order in which mtad tries a domain's mail exchangers (RFC 5321 5.1), kept free
 * of I/O so unit tests can drive it: MX records by preference with a random order among equal
 * preferences, the null MX (RFC 7505), records naming an address literal dropped (an MX
 * names a host, RFC 5321 5.1), and a host's IPv6 and IPv4 addresses taken in turn. */
#ifndef HERON_MTAD_MX_H
#define HERON_MTAD_MX_H

#include <stddef.h>
#include <stdint.h>

#include "dns/dns.h"

#define MX_HOSTS_MAX 32 /* MX hosts kept for one domain (the best ones) */

struct mx_host {
	uint16_t pref;
	char name[DNS_NAME_MAX + 1];
};

enum mx_verdict {
	MX_HOSTS,   /* out[0..n) to try */
	MX_NULL,    /* a null MX: the domain takes no mail (5.1.10) */
	MX_INVALID, /* no usable record (each named an address literal or was empty) */
};

/* Orders the MX records in[0..n): by preference, equal preferences shuffled with rnd (a
   random 32-bit number each call). Writes at most max hosts to out, their count in *n_r. */
enum mx_verdict mx_order(const struct dns_mx *in, size_t n, struct mx_host *out, size_t max,
			 size_t *n_r, uint32_t (*rnd)(void));

/* Whether name is an IPv4 or IPv6 address in text, with or without brackets. */
bool mx_is_literal(const char *name);

/* v6[0..n6) and v4[0..n4) into out, one of each in turn starting with IPv6 (text
   addresses); at most max; returns the count. */
size_t mx_interleave(char (*v6)[46], size_t n6, char (*v4)[46], size_t n4, char (*out)[46],
		     size_t max);

#endif

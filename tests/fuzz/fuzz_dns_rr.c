/* fuzz_dns_rr.c — libFuzzer target: any bytes as the rdata of every record type libheron_dns
 * reads (A, AAAA, MX, CNAME, TXT, TLSA), as a wire name, and as a name to validate. Checks
 * the outputs stay in bounds: names within DNS_NAME_MAX and made of what a name may hold,
 * TXT within the buffer, TLSA data inside the input. Built only with -Dfuzz=true. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *n)
{
	size_t len = strlen(n);

	assert(len <= DNS_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		assert((unsigned char)n[i] > 0x20 && (unsigned char)n[i] < 0x7f &&
		       !(n[i] >= 'A' && n[i] <= 'Z'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum dns_type types[] = { DNS_T_A,     DNS_T_AAAA, DNS_T_MX,
					       DNS_T_CNAME, DNS_T_TXT,  DNS_T_TLSA };
	char name[DNS_NAME_MAX + 1], *txt = malloc(size + 1), *text = malloc(size + 1);
	struct dns_rr rr;
	size_t used;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (dns_rr_parse(types[i], data, size, &rr, txt, size + 1) < 0)
			continue;
		if (types[i] == DNS_T_MX)
			check_name(rr.u.mx.host);
		else if (types[i] == DNS_T_CNAME)
			check_name(rr.u.cname);
		else if (types[i] == DNS_T_TXT)
			assert(rr.u.txt.len < size && strlen(rr.u.txt.text) == rr.u.txt.len);
		else if (types[i] == DNS_T_TLSA)
			assert(rr.u.tlsa.data == data + 3 && rr.u.tlsa.len == size - 3);
	}
	if (dns_name_from_wire(data, size, name, &used) == 0) {
		assert(used <= size);
		check_name(name);
	}
	memcpy(text, data, size);
	text[size] = '\0';
	if (dns_name_valid(text))
		assert(strlen(text) <= DNS_NAME_MAX + 1);
	free(txt);
	free(text);
	return 0;
}

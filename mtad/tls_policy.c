/* tls_policy.c — owns outbound TLS policy decisions and the per-connection OpenSSL set-up
 * (tls_policy.h). */
#include <string.h>

#include <openssl/x509v3.h>

#include "mtad/mx.h"
#include "mtad/tls_policy.h"

static const char *const level_names[] = { "", "none", "may", "encrypt", "verify", "sts", "dane" };

const char *tls_level_name(enum tls_level l)
{
	return (unsigned)l < sizeof(level_names) / sizeof(level_names[0]) ? level_names[l] : "?";
}

int tls_level_parse(const char *s, size_t len)
{
	if (s == NULL || len == 0)
		return TLSL_DEFAULT;
	for (size_t i = 1; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (i != TLSL_STS && strlen(level_names[i]) == len &&
		    memcmp(level_names[i], s, len) == 0)
			return (int)i;
	return -1;
}

bool tls_tlsa_usable(uint8_t usage, uint8_t selector, uint8_t mtype, size_t len)
{
	if ((usage != 2 && usage != 3) || selector > 1)
		return false;
	switch (mtype) {
	case 0:
		return len > 0 && len <= TLSA_DATA_MAX;
	case 1:
		return len == 32;
	case 2:
		return len == 64;
	}
	return false;
}

enum tls_level tls_policy_decide(const struct tls_facts *f, const char **defer_r)
{
	bool signed_host = f->mx_secure && f->addr_secure;

	*defer_r = NULL;
	if (f->override == TLSL_NONE || f->override == TLSL_MAY || f->override == TLSL_VERIFY ||
	    f->override == TLSL_ENCRYPT)
		return f->override;
	/* RFC 7672 2.2: DANE needs the MX (or nexthop) and the host's address answers secure */
	if (signed_host && (f->tlsa_status == DNS_ETEMP || f->tlsa_status == DNS_EBOGUS)) {
		*defer_r = "4.7.5 TLSA lookup of a DNSSEC-signed exchanger failed";
		return TLSL_DEFAULT;
	}
	if (signed_host && f->tlsa_status == DNS_OK && f->tlsa_secure)
		return f->tlsa_usable > 0 ? TLSL_DANE : TLSL_ENCRYPT;
	if (f->override == TLSL_DANE) {
		*defer_r = "4.7.5 tls=dane but the exchanger has no validated TLSA records";
		return TLSL_DEFAULT;
	}
	return TLSL_MAY;
}

SSL *tls_policy_ssl(SSL_CTX *ctx, enum tls_level l, const char *host, const struct tlsa_rec *tlsa,
		    size_t ntlsa, const char **error_r)
{
	SSL *ssl = SSL_new(ctx);
	char sni[DNS_NAME_MAX + 1];
	size_t added = 0;

	*error_r = "4.7.0 TLS setup failed";
	if (ssl == NULL)
		return NULL;
	snprintf(sni, sizeof(sni), "%s", host);
	if (l == TLSL_DANE) {
		/* the TLSA base domain is the SNI name and DANE-TA's reference identifier; DANE-EE
		   checks no name (RFC 7672 3.1.1) */
		if (SSL_dane_enable(ssl, sni) <= 0)
			goto fail;
		SSL_dane_set_flags(ssl, DANE_FLAG_NO_DANE_EE_NAMECHECKS);
		for (size_t i = 0; i < ntlsa; i++)
			if (tls_tlsa_usable(tlsa[i].usage, tlsa[i].selector, tlsa[i].mtype,
					    tlsa[i].len) &&
			    SSL_dane_tlsa_add(ssl, tlsa[i].usage, tlsa[i].selector, tlsa[i].mtype,
					      tlsa[i].data, tlsa[i].len) > 0)
				added++;
		if (added == 0) {
			*error_r = "4.7.5 no usable TLSA record";
			goto fail;
		}
		SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
		return ssl;
	}
	if (!mx_is_literal(sni) && SSL_set_tlsext_host_name(ssl, sni) != 1)
		goto fail;
	/* the name is checked at every level: a mismatch fails verify and sts, and is logged
	   for an MTA-STS policy in testing mode */
	if (!mx_is_literal(sni) && SSL_set1_host(ssl, sni) != 1)
		goto fail;
	if (l == TLSL_VERIFY || l == TLSL_STS)
		SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	return ssl;
fail:
	SSL_free(ssl);
	return NULL;
}

/* dkim_private.h — what dkim_sign.c and dkim_verify.c share inside libheron_mailauth. */
#ifndef HERON_DKIM_PRIVATE_H
#define HERON_DKIM_PRIVATE_H

#include "mailauth/dkim.h"

/* The signature over a SHA-256 digest: RSA PKCS#1 v1.5 (DigestInfo) or Ed25519 (RFC 8463:
   PureEdDSA over the digest). 0 or -1. */
int dkim_pkey_sign(EVP_PKEY *pkey, enum dkim_alg alg, const unsigned char digest[32],
		   unsigned char *sig, size_t *siglen);
int dkim_pkey_verify(EVP_PKEY *pkey, enum dkim_alg alg, const unsigned char digest[32],
		     const unsigned char *sig, size_t siglen);

#endif

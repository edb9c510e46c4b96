/* ctlauth.h — authentication of the manager–agent control connection: a shared secret (from a
 * file, or generated for locally started agents) and a mutual HMAC-SHA256 challenge-response.
 *
 * The dialogue, one JSON line each, before any other command:
 *   agent:   {"hello":"mailload-agent","nonce":"<32 hex>"}
 *   manager: {"cmd":"auth","nonce":"<32 hex>","mac":"<hex HMAC(secret, "manager " + agent nonce)>"}
 *   agent:   {"ok":true,"mac":"<hex HMAC(secret, "agent " + manager nonce)>"}
 *            or {"ok":false,"error":"authentication failed"} and the connection is closed.
 * The agent refuses every other command until the manager has answered; the manager refuses
 * an agent that cannot prove the secret either. MACs are compared in constant time. */
#ifndef HERON_MAILLOAD_CTLAUTH_H
#define HERON_MAILLOAD_CTLAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTLAUTH_SECRET_MIN 16
#define CTLAUTH_SECRET_MAX 4096
#define CTLAUTH_NONCE_HEX 33 /* 16 random bytes in hex, NUL */
#define CTLAUTH_MAC_HEX 65   /* SHA-256 in hex, NUL */

struct ctlauth_secret {
	uint8_t b[CTLAUTH_SECRET_MAX];
	size_t len;
};

/* Reads the secret from path: a regular file readable by its owner only (mode & 077 == 0),
   trailing white space removed, at least CTLAUTH_SECRET_MIN bytes. -1 with a message in
   err (size n). */
int ctlauth_load(struct ctlauth_secret *s, const char *path, char *err, size_t n);
/* A fresh random secret (32 bytes), for agents the manager forks itself. */
void ctlauth_generate(struct ctlauth_secret *s);
/* A fresh random nonce as hex. */
void ctlauth_nonce(char out[CTLAUTH_NONCE_HEX]);
/* HMAC-SHA256(secret, role " " nonce) as hex. */
void ctlauth_mac(const struct ctlauth_secret *s, const char *role, const char *nonce,
		 char out[CTLAUTH_MAC_HEX]);
/* Whether mac is the right answer for role and nonce (constant-time comparison). */
bool ctlauth_check(const struct ctlauth_secret *s, const char *role, const char *nonce,
		   const char *mac);

#endif

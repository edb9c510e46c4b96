/* ldif.c — owns `mailload ldif`: the population as LDIF for slapadd or ldapadd, each user's
 * password ("userK", or the run's --password) stored as {SSHA} (RFC 2307 style: base64 of
 * SHA-1(password + salt) followed by the 8-byte random salt), as scripts/ldap writes it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/log.h"
#include "mailload/mailload.h"

#define SSHA_SALT 8

void ml_ssha(const char *password, char *out, size_t n)
{
	unsigned char raw[SHA_DIGEST_LENGTH + SSHA_SALT], b64[64];
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (c == NULL || RAND_bytes(raw + SHA_DIGEST_LENGTH, SSHA_SALT) != 1 ||
	    EVP_DigestInit_ex(c, EVP_sha1(), NULL) != 1 ||
	    EVP_DigestUpdate(c, password, strlen(password)) != 1 ||
	    EVP_DigestUpdate(c, raw + SHA_DIGEST_LENGTH, SSHA_SALT) != 1 ||
	    EVP_DigestFinal_ex(c, raw, NULL) != 1)
		fatalx("SHA-1 failed");
	EVP_MD_CTX_free(c);
	EVP_EncodeBlock(b64, raw, sizeof(raw));
	snprintf(out, n, "{SSHA}%s", (const char *)b64);
}

/* The k-th (0-based) name of the comma list hosts into out. */
static void host_at(const char *hosts, uint64_t k, char *out, size_t n)
{
	size_t count = 1, len;
	const char *p = hosts;

	for (const char *q = hosts; *q != '\0'; q++)
		count += *q == ',';
	for (k %= count; k > 0; k--)
		p = strchr(p, ',') + 1;
	len = strcspn(p, ",");
	snprintf(out, n, "%.*s", (int)len, p);
}

int ml_ldif_write(FILE *fp, uint64_t users, const char *domain, const char *base, bool ou,
		  const char *password, const char *hosts)
{
	char pw[64], hash[80], host[256];

	if (ou)
		fprintf(fp, "dn: %s\nobjectClass: organizationalUnit\nou: people\n\n", base);
	for (uint64_t i = 1; i <= users; i++) {
		if (password != NULL && password[0] != '\0')
			snprintf(pw, sizeof(pw), "%s", password);
		else
			snprintf(pw, sizeof(pw), "user%" PRIu64, i);
		ml_ssha(pw, hash, sizeof(hash));
		fprintf(fp,
			"dn: uid=user%" PRIu64
			",%s\nobjectClass: inetOrgPerson\n%suid: user%" PRIu64
			"\ncn: User %" PRIu64 "\nsn: User%" PRIu64 "\nmail: user%" PRIu64
			"@%s\nuserPassword: %s\n",
			i, base, hosts != NULL ? "objectClass: inetLocalMailRecipient\n" : "", i,
			i, i, i, domain, hash);
		if (hosts != NULL) {
			host_at(hosts, i - 1, host, sizeof(host));
			fprintf(fp, "mailHost: %s\n", host);
		}
		fputc('\n', fp);
	}
	return fflush(fp) == 0 && !ferror(fp) ? 0 : -1;
}

/* mailctl_dkim.c — owns `mailctl dkim keygen` and `mailctl dkim show`: a DKIM signing key
 * (RSA 2048 bits by default, or Ed25519) written as PEM with mode 0600 and owned by the
 * daemon user ([mtad] user, when run as root), and the TXT record to publish at
 * SELECTOR._domainkey.DOMAIN, with the [dkim] sign entry that uses it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "dns/dns.h"
#include "mailauth/dkim.h"
#include "mailctl/mailctl.h"

static EVP_PKEY *make_key(bool ed25519, unsigned bits)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, ed25519 ? "ED25519" : "RSA", NULL);
	EVP_PKEY *k = NULL;

	if (ctx == NULL || EVP_PKEY_keygen_init(ctx) != 1 ||
	    (!ed25519 && EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, (int)bits) != 1) ||
	    EVP_PKEY_keygen(ctx, &k) != 1)
		k = NULL;
	EVP_PKEY_CTX_free(ctx);
	return k;
}

/* The TXT record split into strings of at most 255 bytes, as a zone file line wants it. */
static void print_record(const char *domain, const char *selector, const char *txt)
{
	size_t len = strlen(txt);

	printf("%s._domainkey.%s. IN TXT (", selector, domain);
	for (size_t off = 0; off < len; off += 255)
		printf(" \"%.*s\"", (int)(len - off < 255 ? len - off : 255), txt + off);
	puts(" )");
}

/* Writes k to path, 0600, owned by the daemon user when we are root. */
static int write_key(struct mc *mc, EVP_PKEY *k, const char *path)
{
	const char *user = conf_values(mc->conf)->mtad.user;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	FILE *f;

	if (fd == -1)
		return mc_fail(mc, errno == EEXIST ? STORE_EEXIST : STORE_EIO, "%s%s%s", path,
			       errno == EEXIST ? "" : ": ",
			       errno == EEXIST ? "" : strerror(errno));
	if (geteuid() == 0 && user[0] != '\0') {
		struct passwd *pw = getpwnam(user);

		if (pw == NULL || fchown(fd, pw->pw_uid, pw->pw_gid) == -1) {
			close(fd);
			unlink(path);
			return mc_fail(mc, STORE_EIO, "%s: cannot give it to user %s", path, user);
		}
	}
	f = fdopen(fd, "w");
	if (f == NULL || PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) != 1 ||
	    fflush(f) != 0 || fsync(fd) != 0) {
		if (f != NULL)
			fclose(f);
		else
			close(fd);
		unlink(path);
		return mc_fail(mc, STORE_EIO, "%s: cannot write the key", path);
	}
	fclose(f);
	return MC_OK;
}

/* keygen DOMAIN SELECTOR [--type rsa|ed25519] [--bits N] [--out FILE] */
int mc_dkim_keygen(struct mc *mc, const struct mc_args *a)
{
	char domain[DNS_NAME_MAX + 1], path[4096];
	const char *selector = a->pos[1], *type = a->set[0] ? a->val[0] : "rsa";
	uint64_t bits = 2048;
	bool ed25519;
	EVP_PKEY *k;
	char *txt;
	int rc;

	str_lcpy(domain, a->pos[0], sizeof(domain));
	str_lower(domain, strlen(domain));
	if (!dns_name_valid(domain) || strchr(domain, '.') == NULL)
		return mc_usage(mc, "%s: not a domain name", a->pos[0]);
	if (!dns_name_valid(selector) || strlen(selector) > 63)
		return mc_usage(mc, "%s: not a selector (letters, digits, '-', '.')", selector);
	if (strcmp(type, "rsa") != 0 && strcmp(type, "ed25519") != 0)
		return mc_usage(mc, "--type %s: rsa or ed25519", type);
	ed25519 = strcmp(type, "ed25519") == 0;
	if (a->set[1] && (ed25519 || str_to_u64(a->val[1], strlen(a->val[1]), 8192, &bits) < 0 ||
			  bits < 2048 || bits % 8 != 0))
		return mc_usage(mc, "--bits %s: 2048 to 8192 for RSA keys", a->val[1]);
	if (a->set[2]) {
		str_lcpy(path, a->val[2], sizeof(path));
	} else {
		char *dir = xstrdup(mc->conf_path);

		snprintf(path, sizeof(path), "%s/dkim/%s.%s.key", dirname(dir), domain, selector);
		free(dir);
		char *parent = xstrdup(path);

		if (mkdir(dirname(parent), 0750) == -1 && errno != EEXIST) {
			rc = mc_fail(mc, STORE_EIO, "%s: %s", parent, strerror(errno));
			free(parent);
			return rc;
		}
		free(parent);
	}
	if ((k = make_key(ed25519, (unsigned)bits)) == NULL)
		return mc_fail(mc, STORE_EIO, "cannot make a %s key", type);
	if ((rc = write_key(mc, k, path)) != MC_OK) {
		EVP_PKEY_free(k);
		return rc;
	}
	txt = dkim_txt_record_pkey(k);
	EVP_PKEY_free(k);
	if (mc->json) {
		printf("{\"domain\": \"%s\", \"selector\": \"%s\", \"type\": \"%s\", \"key\": ",
		       domain, selector, type);
		mc_json_str(stdout, path, strlen(path));
		printf(", \"name\": \"%s._domainkey.%s\", \"txt\": ", selector, domain);
		mc_json_str(stdout, txt, strlen(txt));
		puts("}");
	} else {
		printf("# key written to %s; publish this record, then add to [dkim] sign:\n"
		       "#   %s:%s:%s\n",
		       path, domain, selector, path);
		print_record(domain, selector, txt);
	}
	free(txt);
	return MC_OK;
}

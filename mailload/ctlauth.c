/* ctlauth.c — owns the control connection's shared secret (loading, generating) and its
 * HMAC-SHA256 challenge-response arithmetic. The dialogue itself is in agent_ctl.c (agent side)
 * and manager.c (manager side); see ctlauth.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/log.h"
#include "mailload/ctlauth.h"

static void hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static int load_fail(int fd, char *err, size_t n, const char *path, const char *why)
{
	if (fd >= 0)
		close(fd);
	snprintf(err, n, "secret file %s: %s", path, why);
	return -1;
}

int ctlauth_load(struct ctlauth_secret *s, const char *path, char *err, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	ssize_t r;

	if (fd < 0)
		return load_fail(-1, err, n, path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return load_fail(fd, err, n, path, "not a regular file");
	if (st.st_mode & 077)
		return load_fail(fd, err, n, path, "readable by others (chmod 600 it)");
	s->len = 0;
	while ((r = read(fd, s->b + s->len, sizeof(s->b) - s->len)) > 0)
		s->len += (size_t)r;
	if (r < 0)
		return load_fail(fd, err, n, path, strerror(errno));
	if (s->len == sizeof(s->b))
		return load_fail(fd, err, n, path, "longer than 4095 bytes");
	close(fd);
	while (s->len > 0 && (s->b[s->len - 1] == '\n' || s->b[s->len - 1] == '\r' ||
			      s->b[s->len - 1] == ' ' || s->b[s->len - 1] == '\t'))
		s->len--;
	if (s->len < CTLAUTH_SECRET_MIN)
		return load_fail(-1, err, n, path, "shorter than 16 bytes");
	return 0;
}

void ctlauth_generate(struct ctlauth_secret *s)
{
	s->len = 32;
	if (RAND_bytes(s->b, (int)s->len) != 1)
		fatalx("RAND_bytes failed");
}

void ctlauth_nonce(char out[CTLAUTH_NONCE_HEX])
{
	uint8_t b[16];

	if (RAND_bytes(b, sizeof(b)) != 1)
		fatalx("RAND_bytes failed");
	hex(b, sizeof(b), out);
}

void ctlauth_mac(const struct ctlauth_secret *s, const char *role, const char *nonce,
		 char out[CTLAUTH_MAC_HEX])
{
	uint8_t msg[128], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int len = snprintf((char *)msg, sizeof(msg), "%s %s", role, nonce);

	if (len < 0 || (size_t)len >= sizeof(msg))
		len = 0; /* an oversized nonce never verifies: its MAC covers the role only */
	if (HMAC(EVP_sha256(), s->b, (int)s->len, msg, (size_t)len, md, &mdlen) == NULL)
		fatalx("HMAC-SHA256 failed");
	hex(md, mdlen, out);
}

bool ctlauth_check(const struct ctlauth_secret *s, const char *role, const char *nonce,
		   const char *mac)
{
	char want[CTLAUTH_MAC_HEX];

	if (strlen(nonce) != CTLAUTH_NONCE_HEX - 1 || strlen(mac) != CTLAUTH_MAC_HEX - 1)
		return false;
	ctlauth_mac(s, role, nonce, want);
	return CRYPTO_memcmp(want, mac, CTLAUTH_MAC_HEX - 1) == 0;
}

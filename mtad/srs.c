/* srs.c — owns SRS addresses: making them (srs_forward) and reversing them (srs_reverse) with
 * the secrets of [mtad] srs_secret_file. The format is srs.h's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "common/mailaddr.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mtad/srs.h"

#define SRS_DAY 86400
#define SRS_SLOTS 1024 /* two base32 characters of day numbers */

static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

struct srs {
	char *domain;
	char *secret[SRS_SECRETS_MAX];
	size_t nsecret;
	unsigned max_age;
};

int srs_new(const char *domain, const char *const *secrets, size_t nsecrets, unsigned max_age_days,
	    struct srs **srs_r, const char **error_r)
{
	struct srs *srs;

	*srs_r = NULL;
	if (domain == NULL || domain[0] == '\0' || strlen(domain) > MAILADDR_DOMAIN_MAX) {
		*error_r = "no SRS domain";
		return -1;
	}
	if (nsecrets == 0 || nsecrets > SRS_SECRETS_MAX) {
		*error_r = nsecrets == 0 ? "no secret" : "too many secrets";
		return -1;
	}
	srs = xcalloc(1, sizeof(*srs));
	srs->domain = xstrdup(domain);
	for (size_t i = 0; i < nsecrets; i++)
		srs->secret[i] = xstrdup(secrets[i]);
	srs->nsecret = nsecrets;
	srs->max_age = max_age_days;
	*srs_r = srs;
	return 0;
}

int srs_load(const char *path, const char *domain, unsigned max_age_days, struct srs **srs_r,
	     char **error_r)
{
	char text[SRS_SECRET_FILE_MAX + 1], *line, *save = NULL;
	const char *sec[SRS_SECRETS_MAX], *err;
	size_t n = 0, len;
	FILE *f;

	*srs_r = NULL;
	if ((f = fopen(path, "r")) == NULL) {
		*error_r = xasprintf("srs_secret_file %s: %s", path, strerror(errno));
		return -1;
	}
	len = fread(text, 1, sizeof(text), f);
	fclose(f);
	if (len > SRS_SECRET_FILE_MAX) {
		*error_r = xasprintf("srs_secret_file %s: larger than %d bytes", path,
				     SRS_SECRET_FILE_MAX);
		return -1;
	}
	text[len] = '\0';
	for (line = strtok_r(text, "\r\n", &save); line != NULL;
	     line = strtok_r(NULL, "\r\n", &save)) {
		if (line[0] == '#' || line[strspn(line, " \t")] == '\0')
			continue;
		if (n == SRS_SECRETS_MAX) {
			*error_r = xasprintf("srs_secret_file %s: more than %d secrets", path,
					     SRS_SECRETS_MAX);
			return -1;
		}
		sec[n++] = line;
	}
	if (srs_new(domain, sec, n, max_age_days, srs_r, &err) < 0) {
		*error_r = xasprintf("srs_secret_file %s: %s", path, err);
		return -1;
	}
	return 0;
}

void srs_free(struct srs **srsp)
{
	struct srs *srs = *srsp;

	if (srs == NULL)
		return;
	for (size_t i = 0; i < srs->nsecret; i++) {
		OPENSSL_cleanse(srs->secret[i], strlen(srs->secret[i]));
		free(srs->secret[i]);
	}
	free(srs->domain);
	free(srs);
	*srsp = NULL;
}

const char *srs_domain(const struct srs *srs)
{
	return srs->domain;
}

static bool tag_at(const char *p, char digit)
{
	return strncasecmp(p, "SRS", 3) == 0 && p[3] == digit &&
	       (p[4] == '=' || p[4] == '+' || p[4] == '-');
}

bool srs_is_srs(const char *addr)
{
	return tag_at(addr, '0') || tag_at(addr, '1');
}

/* The hash of fields (NULL-terminated) with secret k: HMAC-SHA1 over the lower-cased fields
   one after another, base64, SRS_HASH_LEN characters. */
static int hash_make(const struct srs *srs, size_t k, const char *const *fields,
		     char out[SRS_HASH_LEN + 1])
{
	char data[2 * MAILADDR_TEXT_MAX + 16];
	unsigned char mac[EVP_MAX_MD_SIZE], b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	size_t dl = 0, ml = 0;

	for (size_t i = 0; fields[i] != NULL; i++) {
		for (const char *p = fields[i]; *p; p++) {
			if (dl == sizeof(data))
				return -1;
			data[dl++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p;
		}
	}
	if (EVP_Q_mac(NULL, "HMAC", NULL, "SHA1", NULL, srs->secret[k], strlen(srs->secret[k]),
		      (unsigned char *)data, dl, mac, sizeof(mac), &ml) == NULL)
		return -1;
	EVP_EncodeBlock(b64, mac, (int)ml);
	memcpy(out, b64, SRS_HASH_LEN);
	out[SRS_HASH_LEN] = '\0';
	return 0;
}

/* hash (as received) is one of fields' under some secret. Compared without case, as a relay
   that smashes the local part's case still gets its bounce back; every byte is compared. */
static bool hash_ok(const struct srs *srs, const char *hash, size_t hlen,
		    const char *const *fields)
{
	char want[SRS_HASH_LEN + 1];
	bool ok = false;

	if (hlen != SRS_HASH_LEN)
		return false;
	for (size_t k = 0; k < srs->nsecret; k++) {
		unsigned diff = 0;

		if (hash_make(srs, k, fields, want) < 0)
			return false;
		for (size_t i = 0; i < SRS_HASH_LEN; i++) {
			unsigned char a = (unsigned char)hash[i], b = (unsigned char)want[i];

			diff |= (unsigned)((a | 0x20) ^ (b | 0x20));
		}
		ok |= diff == 0;
	}
	return ok;
}

static void stamp_make(int64_t now, char out[3])
{
	unsigned day = (unsigned)((now / SRS_DAY) % SRS_SLOTS);

	out[0] = b32[(day >> 5) & 31];
	out[1] = b32[day & 31];
	out[2] = '\0';
}

static bool stamp_ok(const struct srs *srs, const char *ts, size_t len, int64_t now)
{
	unsigned v = 0, today = (unsigned)((now / SRS_DAY) % SRS_SLOTS);

	if (len != 2)
		return false;
	for (size_t i = 0; i < 2; i++) {
		char c = ts[i] >= 'a' && ts[i] <= 'z' ? (char)(ts[i] - 'a' + 'A') : ts[i];
		const char *p = c != '\0' ? strchr(b32, c) : NULL;

		if (p == NULL)
			return false;
		v = v * 32 + (unsigned)(p - b32);
	}
	while (today < v)
		today += SRS_SLOTS; /* the cycle wrapped since it was made */
	return today <= v + srs->max_age;
}

int srs_forward(const struct srs *srs, const char *sender, int64_t now, char *out, size_t size)
{
	const char *at = strrchr(sender, '@');
	char local[MAILADDR_LOCAL_MAX + 1], host[MAILADDR_DOMAIN_MAX + 1], hash[SRS_HASH_LEN + 1];
	char ts[3], res[MAILADDR_TEXT_MAX + 2];
	size_t ll;
	int n;

	if (at == NULL || at == sender || at[1] == '\0' || sender[0] == '"' ||
	    strcasecmp(at + 1, srs->domain) == 0)
		return 0;
	ll = (size_t)(at - sender);
	if (ll > MAILADDR_LOCAL_MAX || strlen(at + 1) > MAILADDR_DOMAIN_MAX)
		return 0;
	memcpy(local, sender, ll);
	local[ll] = '\0';
	str_lcpy(host, at + 1, sizeof(host));
	if (tag_at(local, '1')) {
		/* SRS1=H=firsthop==...: the first hop stays, the hash is ours */
		char *hop = strchr(local + 5, '=');
		char *rest = hop != NULL ? strchr(hop + 1, '=') : NULL;

		if (rest == NULL || rest == hop + 1)
			return 0;
		*rest++ = '\0';
		const char *f[] = { hop + 1, rest, NULL };

		if (hash_make(srs, 0, f, hash) < 0)
			return 0;
		n = snprintf(res, sizeof(res), "SRS1%c%s=%s=%s", local[4], hash, hop + 1, rest);
	} else if (tag_at(local, '0')) {
		/* an SRS0 of another domain: SRS1 keeps it (its host checks it) */
		const char *f[] = { host, local + 4, NULL };

		if (hash_make(srs, 0, f, hash) < 0)
			return 0;
		n = snprintf(res, sizeof(res), "SRS1%c%s=%s=%s", local[4], hash, host, local + 4);
	} else {
		stamp_make(now, ts);
		const char *f[] = { ts, host, local, NULL };

		if (hash_make(srs, 0, f, hash) < 0)
			return 0;
		n = snprintf(res, sizeof(res), "SRS0=%s=%s=%s=%s", hash, ts, host, local);
	}
	if (n < 0 || (size_t)n > MAILADDR_LOCAL_MAX ||
	    (size_t)n + 1 + strlen(srs->domain) + 1 > size)
		return 0;
	snprintf(out, size, "%s@%s", res, srs->domain);
	return 1;
}

int srs_reverse(const struct srs *srs, const char *addr, int64_t now, char *out, size_t size,
		const char **why_r)
{
	const char *at = strrchr(addr, '@');
	char local[MAILADDR_LOCAL_MAX + 1];
	char *f[4], *p;
	size_t ll;
	int n;

	if (at == NULL || !srs_is_srs(addr)) {
		*why_r = "not an SRS address";
		return -1;
	}
	ll = (size_t)(at - addr);
	if (ll > MAILADDR_LOCAL_MAX) {
		*why_r = "local part too long";
		return -1;
	}
	memcpy(local, addr, ll);
	local[ll] = '\0';
	if (tag_at(local, '1')) {
		/* SRS1<sep>HASH=HOST=<rest>: back to SRS0<rest>@HOST */
		f[0] = local + 5;
		if ((p = strchr(f[0], '=')) == NULL)
			goto bad;
		*p = '\0';
		f[1] = p + 1;
		if ((p = strchr(f[1], '=')) == NULL || p == f[1])
			goto bad;
		*p = '\0';
		f[2] = p + 1; /* "=HASH=TT=host=user", its separator kept */
		if (f[2][0] == '\0')
			goto bad;
		const char *hf[] = { f[1], f[2], NULL };

		if (!hash_ok(srs, f[0], strlen(f[0]), hf)) {
			*why_r = "bad hash";
			return -1;
		}
		n = snprintf(out, size, "SRS0%s@%s", f[2], f[1]);
	} else {
		/* SRS0<sep>HASH=TT=HOST=USER */
		f[0] = local + 5;
		for (int i = 1; i < 4; i++) {
			if ((p = strchr(f[i - 1], '=')) == NULL)
				goto bad;
			*p = '\0';
			f[i] = p + 1;
		}
		if (f[2][0] == '\0' || f[3][0] == '\0')
			goto bad;
		const char *hf[] = { f[1], f[2], f[3], NULL };

		if (!hash_ok(srs, f[0], strlen(f[0]), hf)) {
			*why_r = "bad hash";
			return -1;
		}
		if (!stamp_ok(srs, f[1], strlen(f[1]), now)) {
			*why_r = "expired";
			return -1;
		}
		n = snprintf(out, size, "%s@%s", f[3], f[2]);
	}
	if (n < 0 || (size_t)n >= size) {
		*why_r = "address too long";
		return -1;
	}
	return 0;
bad:
	*why_r = "malformed SRS address";
	return -1;
}

/* bench_mailauth.c — DKIM cost per message, by message size, as mtad pays it: signing (the
 * relaxed body's SHA-256 streamed in 64 KB pieces, then one DKIM-Signature with an RSA 2048 or
 * an Ed25519 key) and verification (the header split, one body hash per signature, the key
 * record parsed and the signature checked; the key comes from a table resolver through the
 * event loop, so DNS time is not in the figure). Prints microseconds per message; asserts
 * nothing. Each case runs until 200 messages or 2 s, whichever comes first.
 *
 *   bench_mailauth [SIZE...]      sizes in bytes (default 2k 20k 100k 1M) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "common/buf.h"
#include "common/clock.h"
#include "mailauth/dkim.h"
#include "tests/mailauth/fake_dns.h"

#define MAX_MSGS 200
#define MAX_NS (2LL * 1000 * 1000 * 1000)
#define PIECE (64 * 1024)

static struct event_base *base;
static struct fake_dns *fdns;

static EVP_PKEY *keygen(int type)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(type, NULL);
	EVP_PKEY *k = NULL;

	if (c == NULL || EVP_PKEY_keygen_init(c) != 1 ||
	    (type == EVP_PKEY_RSA && EVP_PKEY_CTX_set_rsa_keygen_bits(c, 2048) != 1) ||
	    EVP_PKEY_keygen(c, &k) != 1) {
		fprintf(stderr, "bench_mailauth: keygen failed\n");
		exit(1);
	}
	EVP_PKEY_CTX_free(c);
	return k;
}

static struct dkim_signkey *signkey(int type, const char *sel)
{
	struct dkim_signkey *k = calloc(1, sizeof(*k));
	char name[128], *txt;

	k->domain = strdup("bench.test");
	k->selector = strdup(sel);
	k->pkey = keygen(type);
	k->alg = type == EVP_PKEY_ED25519 ? DKIM_ED25519_SHA256 : DKIM_RSA_SHA256;
	snprintf(name, sizeof(name), "%s._domainkey.bench.test", sel);
	txt = dkim_txt_record(k);
	fake_dns_add(fdns, name, "TXT", txt);
	free(txt);
	return k;
}

/* A message of about size bytes: a usual header, then text lines of 76 characters. */
static char *make_msg(size_t size, size_t *len_r)
{
	struct buf b;

	buf_init(&b, size + 1024, size + 4096);
	buf_puts(&b, "From: Alice <alice@bench.test>\r\nTo: bob@example.org\r\n"
		     "Subject: a benchmark message\r\nDate: Wed, 02 Dec 2026 06:00:00 +0000\r\n"
		     "Message-ID: <bench@bench.test>\r\nMIME-Version: 1.0\r\n"
		     "Content-Type: text/plain; charset=us-ascii\r\n\r\n");
	while (b.len < size)
		buf_puts(
			&b,
			"The quick brown fox jumps over the lazy dog, again and  again.  \t 12345\r\n");
	return buf_steal(&b, len_r);
}

/* Signs msg with k: the new message (signature + msg), malloc'd. */
static char *sign(const struct dkim_signkey *k, const char *msg, size_t len, size_t *len_r)
{
	struct ma_msg mm;
	struct dkim_body b;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	struct dkim_sign_opts o = { .now = 1700000000 };
	unsigned char bh[32];
	unsigned bl;
	struct buf out;
	const char *err = NULL;
	size_t used;

	ma_msg_init(&mm);
	used = ma_msg_feed(&mm, msg, len);
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	dkim_body_init(&b, DKIM_RELAXED, md, UINT64_MAX);
	for (size_t off = used; off < len; off += PIECE)
		dkim_body_feed(&b, msg + off, len - off < PIECE ? len - off : PIECE);
	dkim_body_end(&b);
	EVP_DigestFinal_ex(md, bh, &bl);
	EVP_MD_CTX_free(md);
	buf_init(&out, len + 1024, len + 8192);
	if (dkim_sign(k, mm.fields, mm.nfields, bh, &o, &out, &err) < 0) {
		fprintf(stderr, "bench_mailauth: sign: %s\n", err ? err : "?");
		exit(1);
	}
	buf_append(&out, msg, len);
	ma_msg_release(&mm);
	return buf_steal(&out, len_r);
}

static void done_cb(void *arg)
{
	*(int *)arg = 1;
}

/* Verifies msg; the first result. */
static enum ma_result verify(const char *msg, size_t len)
{
	struct dkim_verify_opts o = { .min_rsa_bits = 1024, .now = 1700000001 };
	struct ma_resolver r;
	struct ma_msg mm;
	const struct dkim_result *res;
	struct dkim_verifier *v;
	enum ma_result out = MA_NONE;
	int done = 0;
	size_t used;

	fake_dns_resolver(fdns, &r);
	ma_msg_init(&mm);
	used = ma_msg_feed(&mm, msg, len);
	v = dkim_verifier_new(&o, mm.fields, mm.nfields, mm.overflow);
	for (size_t off = used; off < len; off += PIECE)
		dkim_verifier_body(v, msg + off, len - off < PIECE ? len - off : PIECE);
	if (dkim_verifier_finish(v, &r, done_cb, &done) == 0)
		while (!done)
			event_base_loop(base, EVLOOP_ONCE);
	if (dkim_verifier_results(v, &res) > 0)
		out = res[0].result;
	dkim_verifier_free(&v);
	ma_msg_release(&mm);
	return out;
}

static void run(const struct dkim_signkey *k, size_t size)
{
	size_t len, slen;
	char *msg = make_msg(size, &len), *signed_msg = NULL;
	int64_t t0 = clock_mono_ns(), sign_ns, verify_ns;
	int n = 0, bad = 0;

	for (; n < MAX_MSGS && clock_mono_ns() - t0 < MAX_NS; n++) {
		free(signed_msg);
		signed_msg = sign(k, msg, len, &slen);
	}
	sign_ns = (clock_mono_ns() - t0) / n;
	int m = 0;
	t0 = clock_mono_ns();
	for (; m < MAX_MSGS && clock_mono_ns() - t0 < MAX_NS; m++)
		bad += verify(signed_msg, slen) != MA_PASS;
	verify_ns = (clock_mono_ns() - t0) / m;
	printf("%-15s %9zu %10.1f %10.1f %6d %6d%s\n", dkim_alg_name(k->alg), len,
	       (double)sign_ns / 1000.0, (double)verify_ns / 1000.0, n, m,
	       bad ? "  (some did not verify!)" : "");
	free(msg);
	free(signed_msg);
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'k' || *end == 'K')
		v *= 1024;
	else if (*end == 'm' || *end == 'M')
		v *= 1024 * 1024;
	return (size_t)v;
}

int main(int argc, char **argv)
{
	static const char *const defaults[] = { "2k", "20k", "100k", "1M" };
	struct dkim_signkey *keys[2];

	base = event_base_new();
	fdns = fake_dns_new(base);
	keys[0] = signkey(EVP_PKEY_RSA, "rsa");
	keys[1] = signkey(EVP_PKEY_ED25519, "ed");
	printf("%-15s %9s %10s %10s %6s %6s\n", "algorithm", "bytes", "sign_us", "verify_us",
	       "n_sign", "n_ver");
	for (size_t i = 0; i < 2; i++) {
		if (argc > 1)
			for (int a = 1; a < argc; a++)
				run(keys[i], parse_size(argv[a]));
		else
			for (size_t s = 0; s < sizeof(defaults) / sizeof(defaults[0]); s++)
				run(keys[i], parse_size(defaults[s]));
	}
	for (size_t i = 0; i < 2; i++)
		dkim_signkey_free(&keys[i]);
	fake_dns_free(&fdns);
	event_base_free(base);
	return 0;
}

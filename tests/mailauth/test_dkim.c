/* test_dkim.c — DKIM from the RFCs' examples: the tag list grammar (RFC 6376 3.2), the
 * canonicalization example of RFC 6376 3.4.6, RFC 8463 appendix A's message with its
 * ed25519-sha256 and rsa-sha256 signatures verified against its published keys, signing and
 * verifying back with fresh RSA 2048 and Ed25519 keys, and what must not pass: a changed body
 * or header, content after l=, an expired signature, a small key, rsa-sha1, unsigned From,
 * malformed tags and keys, and no key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "mailauth/dkim.h"
#include "tests/mailauth/fake_dns.h"

static struct event_base *base;
static struct fake_dns *fdns;

/* RFC 8463 appendix A (as python3-dkim ships it: simple/simple, its folding kept). */
static const char rfc8463_msg[] =
	"DKIM-Signature: v=1; a=ed25519-sha256; c=simple/simple; \r\n"
	" d=football.example.com; i=@football.example.com; \r\n"
	" q=dns/txt; s=brisbane; t=1518460054; h=from : to : \r\n"
	" subject : date : message-id : from : subject : date; \r\n"
	" bh=4bLNXImK9drULnmePzZNEBleUanJCX5PIsDIFoH4KTQ=; \r\n"
	" b=9/dsDChY0YMTtD5Eyw3wx7x22BlSJP7M5ECbJ7GWrR45nXlTCGb8l0YB\r\n"
	" o0wBLR++X5LqmsxXaOYLLJe46l10AQ==\r\n"
	"DKIM-Signature: v=1; a=rsa-sha256; c=simple/simple; \r\n"
	" d=football.example.com; i=@football.example.com; \r\n"
	" q=dns/txt; s=test; t=1527915362; h=from : to : subject : \r\n"
	" date : message-id : from : subject : date; \r\n"
	" bh=4bLNXImK9drULnmePzZNEBleUanJCX5PIsDIFoH4KTQ=; \r\n"
	" b=icKcLSEZYXJ95flvWE8FT6hl5iqd8MC/LEKYH0QjsqYy6MO/4pgVNCZH\r\n"
	" l/RAXAuADxE/40Fg7uTlxwwD1hjN2Ple6J//cJfslBdDOq6zTVbne1dqtl\r\n"
	" NOat7iamJ1AfRqyG+ja7a2AZsrpUuJ7VA6O+0zRYPqpwMEkEFIzI9i/Xk=\r\n"
	"From: Joe SixPack <joe@football.example.com>\r\n"
	"To: Suzie Q <suzie@shopping.example.net>\r\n"
	"Subject: Is dinner ready?\r\n"
	"Date: Fri, 11 Jul 2003 21:00:37 -0700 (PDT)\r\n"
	"Message-ID: <20030712040037.46341.5F8J@football.example.com>\r\n"
	"\r\n"
	"Hi.\r\n"
	"\r\n"
	"We lost the game.  Are you hungry yet?\r\n"
	"\r\n"
	"Joe.\r\n"
	"\r\n";
static const char rfc8463_ed_key[] =
	"v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
static const char rfc8463_rsa_key[] =
	"v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDkHlOQoBTzWRiGs5V6NpP3idY6Wk08a5qhd"
	"R6wy5bdOKb2jLQiY/J16JYi0Qvx/byYzCNb3W91y3FutACDfzwQ/BC/e/8uBsCR+yz1Lxj+PL6lHvqMKrM3rG4hst"
	"T5QjvHO9PzoxZyVYLzBfO2EeC3Ip3G+2kryOTIKT+l/K4w3QIDAQAB";

struct verified {
	struct ma_msg msg;
	struct dkim_verifier *v;
	const struct dkim_result *r;
	size_t n;
};

static void done_cb(void *arg)
{
	event_base_loopbreak(base);
}

/* Verifies msg (fed in pieces of step bytes) with the table's keys. */
static void verify(struct verified *out, const char *msg, size_t len, size_t step,
		   unsigned min_bits, int64_t now)
{
	struct dkim_verify_opts o = { .min_rsa_bits = min_bits, .now = now };
	struct ma_resolver r;
	size_t off = 0;

	ma_msg_init(&out->msg);
	out->v = NULL;
	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		size_t used = ma_msg_feed(&out->msg, msg + off, n);

		if (out->msg.done && out->v == NULL)
			out->v = dkim_verifier_new(&o, out->msg.fields, out->msg.nfields,
						   out->msg.overflow);
		if (out->v != NULL)
			dkim_verifier_body(out->v, msg + off + used, n - used);
		off += n;
	}
	ma_msg_end(&out->msg);
	if (out->v == NULL)
		out->v = dkim_verifier_new(&o, out->msg.fields, out->msg.nfields,
					   out->msg.overflow);
	fake_dns_resolver(fdns, &r);
	if (dkim_verifier_finish(out->v, &r, done_cb, NULL) == 0)
		event_base_dispatch(base);
	out->n = dkim_verifier_results(out->v, &out->r);
}

static void verified_free(struct verified *vf)
{
	dkim_verifier_free(&vf->v);
	ma_msg_release(&vf->msg);
}

static void test_tags(void **state)
{
	struct dkim_tag t[8];
	size_t n;
	const char *err;
	const char *s = " v=1;\r\n\ta = rsa-sha256 ;  b= ab cd\r\n ef ; e=;";

	assert_int_equal(dkim_tags_parse(s, strlen(s), t, 8, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(t[1].vlen, strlen("rsa-sha256"));
	assert_memory_equal(t[1].val, "rsa-sha256", t[1].vlen);
	assert_int_equal(t[2].vlen, strlen("ab cd\r\n ef"));
	assert_int_equal(t[3].vlen, 0);
	assert_non_null(dkim_tag_find(t, n, "e"));
	assert_null(dkim_tag_find(t, n, "x"));
	const char *bad[] = { "v=1; v=1", "1v=2", "v", "v=1; =3", "a=b\001c" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(dkim_tags_parse(bad[i], strlen(bad[i]), t, 8, &n, &err), -1);
	assert_int_equal(dkim_tags_parse("", 0, t, 8, &n, &err), 0);
	assert_int_equal(n, 0);
}

static void body_of(enum dkim_canon c, const char *in, size_t step, struct buf *out)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	struct dkim_body b;
	unsigned char h[32];
	unsigned hl;

	/* the canonical bytes are rebuilt by hashing each possible cut: compare counts, and
	   the real bytes through a second pass below */
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	dkim_body_init(&b, c, md, UINT64_MAX);
	for (size_t off = 0; off < strlen(in); off += step)
		dkim_body_feed(&b, in + off, strlen(in) - off < step ? strlen(in) - off : step);
	dkim_body_end(&b);
	EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	buf_append(out, h, hl);
}

static void assert_body(enum dkim_canon c, const char *in, const char *want)
{
	unsigned char h[32];
	struct buf got;

	EVP_Digest(want, strlen(want), h, NULL, EVP_sha256(), NULL);
	for (size_t step = 1; step <= strlen(in) + 1; step++) {
		buf_init(&got, 64, 64);
		body_of(c, in, step, &got);
		assert_memory_equal(got.data, h, 32);
		buf_release(&got);
	}
}

/* RFC 6376 3.4.6. */
static void test_canon_example(void **state)
{
	struct buf out;
	const char *a = "A: X\r\n", *b = "B : Y\t\r\n\tZ  \r\n";

	buf_init(&out, 64, 1024);
	dkim_canon_header(DKIM_RELAXED, a, strlen(a), &out);
	dkim_canon_header(DKIM_RELAXED, b, strlen(b), &out);
	assert_string_equal(buf_cstr(&out), "a:X\r\nb:Y Z\r\n");
	buf_reset(&out);
	dkim_canon_header(DKIM_SIMPLE, b, strlen(b), &out);
	assert_string_equal(buf_cstr(&out), b);
	buf_release(&out);
	const char *body = " C \r\nD \t E\r\n\r\n\r\n";
	assert_body(DKIM_RELAXED, body, " C\r\nD E\r\n");
	assert_body(DKIM_SIMPLE, body, " C \r\nD \t E\r\n");
	/* empty bodies (3.4.3, 3.4.4); an unterminated last line gets its CRLF */
	assert_body(DKIM_SIMPLE, "", "\r\n");
	assert_body(DKIM_RELAXED, "", "");
	assert_body(DKIM_SIMPLE, "\r\n\r\n", "\r\n");
	assert_body(DKIM_RELAXED, " \t\r\n\r\n", "");
	assert_body(DKIM_RELAXED, "x  ", "x\r\n");
	assert_body(DKIM_SIMPLE, "a\rb\r\n", "a\rb\r\n");
}

static void rfc8463_zone(void)
{
	fake_dns_clear(fdns);
	fake_dns_add(fdns, "brisbane._domainkey.football.example.com", "TXT", rfc8463_ed_key);
	fake_dns_add(fdns, "test._domainkey.football.example.com", "TXT", rfc8463_rsa_key);
}

static void test_rfc8463(void **state)
{
	size_t steps[] = { 1, 7, 64, sizeof(rfc8463_msg) };

	rfc8463_zone();
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct verified vf;

		verify(&vf, rfc8463_msg, strlen(rfc8463_msg), steps[i], 1024, 1600000000);
		assert_int_equal(vf.n, 2);
		assert_int_equal(vf.r[0].result, MA_PASS);
		assert_int_equal(vf.r[0].alg, DKIM_ED25519_SHA256);
		assert_string_equal(vf.r[0].d, "football.example.com");
		assert_string_equal(vf.r[0].s, "brisbane");
		assert_int_equal(vf.r[1].result, MA_PASS);
		assert_int_equal(vf.r[1].bits, 1024);
		verified_free(&vf);
	}
	/* the RSA key is 1024 bits: below a 2048 minimum it does not count */
	struct verified vf;
	verify(&vf, rfc8463_msg, strlen(rfc8463_msg), 4096, 2048, 1600000000);
	assert_int_equal(vf.r[0].result, MA_PASS);
	assert_int_equal(vf.r[1].result, MA_PERMERROR);
	assert_string_equal(vf.r[1].reason, "key too small");
	verified_free(&vf);
	/* a changed body and a changed signed header fail */
	char *m = strdup(rfc8463_msg);
	*strstr(m, "hungry") = 'H';
	verify(&vf, m, strlen(m), 4096, 1024, 1600000000);
	assert_int_equal(vf.r[0].result, MA_FAIL);
	assert_string_equal(vf.r[0].reason, "body hash did not verify");
	verified_free(&vf);
	strcpy(m, rfc8463_msg);
	*strstr(m, "dinner") = 'D';
	verify(&vf, m, strlen(m), 4096, 1024, 1600000000);
	assert_int_equal(vf.r[0].result, MA_FAIL);
	assert_string_equal(vf.r[0].reason, "signature did not verify");
	assert_int_equal(vf.r[1].result, MA_FAIL);
	verified_free(&vf);
	free(m);
	/* no key published: permerror; a lookup that times out: temperror */
	fake_dns_clear(fdns);
	fake_dns_add(fdns, "test._domainkey.football.example.com", "TIMEOUT", NULL);
	verify(&vf, rfc8463_msg, strlen(rfc8463_msg), 4096, 1024, 1600000000);
	assert_int_equal(vf.r[0].result, MA_PERMERROR);
	assert_int_equal(vf.r[1].result, MA_TEMPERROR);
	verified_free(&vf);
}

static EVP_PKEY *keygen(int type, int bits)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(type, NULL);
	EVP_PKEY *k = NULL;

	assert_non_null(c);
	assert_int_equal(EVP_PKEY_keygen_init(c), 1);
	if (type == EVP_PKEY_RSA)
		assert_int_equal(EVP_PKEY_CTX_set_rsa_keygen_bits(c, bits), 1);
	assert_int_equal(EVP_PKEY_keygen(c, &k), 1);
	EVP_PKEY_CTX_free(c);
	return k;
}

static const char plain_msg[] = "From: Alice <alice@signer.test>\r\n"
				"To: bob@example.org\r\n"
				"Subject:   folded\r\n"
				"  subject  \r\n"
				"Date: Mon, 01 Jan 2024 00:00:00 +0000\r\n"
				"Message-ID: <1@signer.test>\r\n"
				"\r\n"
				"Hello  world \r\n"
				"\r\n"
				"second line\r\n"
				"\r\n\r\n";

/* Signs msg with k (and l= when l) into a new malloc'd message. */
static char *sign_msg(const struct dkim_signkey *k, const char *msg, int64_t expire,
		      const char *extra_body)
{
	struct ma_msg mm;
	struct dkim_body b;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char bh[32];
	unsigned bl;
	struct dkim_sign_opts o = { .now = 1700000000, .expire_s = expire };
	struct buf out;
	const char *err;

	ma_msg_init(&mm);
	size_t used = ma_msg_feed(&mm, msg, strlen(msg));
	assert_true(mm.done);
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	dkim_body_init(&b, DKIM_RELAXED, md, UINT64_MAX);
	dkim_body_feed(&b, msg + used, strlen(msg) - used);
	dkim_body_end(&b);
	EVP_DigestFinal_ex(md, bh, &bl);
	EVP_MD_CTX_free(md);
	buf_init(&out, 1024, 1 << 20);
	assert_int_equal(dkim_sign(k, mm.fields, mm.nfields, bh, &o, &out, &err), 0);
	buf_puts(&out, msg);
	if (extra_body)
		buf_puts(&out, extra_body);
	ma_msg_release(&mm);
	return buf_steal(&out, NULL);
}

static struct dkim_signkey *signkey(EVP_PKEY *pkey, const char *sel)
{
	struct dkim_signkey *k = calloc(1, sizeof(*k));

	k->domain = strdup("signer.test");
	k->selector = strdup(sel);
	k->pkey = pkey;
	k->alg = EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519 ? DKIM_ED25519_SHA256
								: DKIM_RSA_SHA256;
	char name[128];
	snprintf(name, sizeof(name), "%s._domainkey.signer.test", sel);
	char *txt = dkim_txt_record(k);
	fake_dns_add(fdns, name, "TXT", txt);
	free(txt);
	return k;
}

static void test_sign_roundtrip(void **state)
{
	fake_dns_clear(fdns);
	struct dkim_signkey *keys[] = { signkey(keygen(EVP_PKEY_RSA, 2048), "rsa"),
					signkey(keygen(EVP_PKEY_ED25519, 0), "ed") };

	for (size_t i = 0; i < 2; i++) {
		struct verified vf;
		char *m = sign_msg(keys[i], plain_msg, 0, NULL);

		assert_non_null(strstr(m, "h=from:from:subject:date:to:message-id;"));
		assert_non_null(strstr(m, "c=relaxed/relaxed"));
		verify(&vf, m, strlen(m), 13, 1024, 1700000001);
		assert_int_equal(vf.n, 1);
		assert_int_equal(vf.r[0].result, MA_PASS);
		assert_int_equal(vf.r[0].bits, i == 0 ? 2048 : 256);
		verified_free(&vf);
		/* relaxed: white space changes do not matter, content does */
		char *w = calloc(1, strlen(m) + 8);
		assert_non_null(w);
		char *p = strstr(m, "Hello  world");
		memcpy(w, m, (size_t)(p - m));
		strcat(w, "Hello world   ");
		strcat(w, p + strlen("Hello  world "));
		verify(&vf, w, strlen(w), 4096, 1024, 1700000001);
		assert_int_equal(vf.r[0].result, MA_PASS);
		verified_free(&vf);
		/* a second From added after signing (From is oversigned) */
		free(w);
		w = malloc(strlen(m) + 64);
		assert_non_null(w);
		p = strstr(m, "To: bob");
		memcpy(w, m, (size_t)(p - m));
		strcpy(w + (p - m), "From: evil@attacker.test\r\n");
		strcat(w, p);
		verify(&vf, w, strlen(w), 4096, 1024, 1700000001);
		assert_int_equal(vf.r[0].result, MA_FAIL);
		verified_free(&vf);
		free(w);
		free(m);
		/* expired */
		m = sign_msg(keys[i], plain_msg, 60, NULL);
		assert_non_null(strstr(m, "x=1700000060;"));
		verify(&vf, m, strlen(m), 4096, 1024, 1700000100);
		assert_int_equal(vf.r[0].result, MA_PERMERROR);
		assert_string_equal(vf.r[0].reason, "signature expired");
		verified_free(&vf);
		free(m);
	}
	for (size_t i = 0; i < 2; i++)
		dkim_signkey_free(&keys[i]);
}

/* l=: content after the counted part is never passed off as signed. */
static void test_body_length(void **state)
{
	const char *base_msg = "From: a@signer.test\r\nSubject: s\r\n\r\nsigned part\r\n";
	/* a message signed with l= by hand: the DKIM-Signature made over l */
	fake_dns_clear(fdns);
	struct dkim_signkey *k = signkey(keygen(EVP_PKEY_ED25519, 0), "ed");
	struct ma_msg mm;
	ma_msg_init(&mm);
	size_t used = ma_msg_feed(&mm, base_msg, strlen(base_msg));
	struct dkim_body b;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char bh[32];
	unsigned bl;
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	dkim_body_init(&b, DKIM_RELAXED, md, UINT64_MAX);
	dkim_body_feed(&b, base_msg + used, strlen(base_msg) - used);
	dkim_body_end(&b);
	EVP_DigestFinal_ex(md, bh, &bl);
	EVP_MD_CTX_free(md);
	assert_int_equal(b.total, 13);
	/* build "DKIM-Signature: ... l=13; ... b=" and sign it the way dkim_sign does */
	char bh64[64], field[2048];
	ma_b64_encode(bh, 32, bh64);
	snprintf(field, sizeof(field),
		 "DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed/relaxed; d=signer.test; "
		 "s=ed; l=13; h=from:subject; bh=%s; b=",
		 bh64);
	struct dkim_sig sig = { .hc = DKIM_RELAXED, .bc = DKIM_RELAXED, .nh = 2 };
	sig.h[0] = strdup("from");
	sig.h[1] = strdup("subject");
	sig.stripped = field;
	sig.stripped_len = strlen(field);
	struct buf in;
	buf_init(&in, 256, 1 << 20);
	assert_int_equal(dkim_header_input(&sig, mm.fields, mm.nfields, &in), 0);
	sig.stripped = NULL;
	dkim_sig_release(&sig);
	unsigned char digest[32], s[128];
	size_t slen = sizeof(s);
	EVP_Digest(in.data, in.len, digest, NULL, EVP_sha256(), NULL);
	EVP_MD_CTX *sc = EVP_MD_CTX_new();
	assert_int_equal(EVP_DigestSignInit(sc, NULL, NULL, NULL, k->pkey), 1);
	assert_int_equal(EVP_DigestSign(sc, s, &slen, digest, 32), 1);
	EVP_MD_CTX_free(sc);
	char s64[200], full[4096];
	ma_b64_encode(s, slen, s64);
	snprintf(full, sizeof(full), "%s%s\r\n%s", field, s64, base_msg);
	buf_release(&in);
	ma_msg_release(&mm);

	struct verified vf;
	verify(&vf, full, strlen(full), 4096, 1024, 1700000000);
	assert_int_equal(vf.r[0].result, MA_PASS);
	verified_free(&vf);
	char appended[5000];
	snprintf(appended, sizeof(appended), "%sClick here: http://evil.test/\r\n", full);
	verify(&vf, appended, strlen(appended), 4096, 1024, 1700000000);
	assert_int_equal(vf.r[0].result, MA_POLICY);
	assert_string_equal(vf.r[0].reason, "unsigned content after l=");
	verified_free(&vf);
	/* a body shorter than l= */
	char shorter[5000];
	snprintf(shorter, sizeof(shorter), "%s", full);
	strcpy(strstr(shorter, "signed part") + 6, "\r\n");
	verify(&vf, shorter, strlen(shorter), 4096, 1024, 1700000000);
	assert_int_equal(vf.r[0].result, MA_FAIL);
	verified_free(&vf);
	dkim_signkey_free(&k);
}

static void test_malformed(void **state)
{
	static const struct {
		const char *field, *reason;
	} cases[] = {
		{ "DKIM-Signature: v=1; a=rsa-sha1; d=a.test; s=s; h=from; bh=AAAA; b=AAAA\r\n",
		  "rsa-sha1 is not accepted (RFC 8301)" },
		{ "DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=s; h=to; "
		  "bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAA\r\n",
		  "From is not signed" },
		{ "DKIM-Signature: v=2; a=rsa-sha256\r\n", "v= is not 1" },
		{ "DKIM-Signature: v=1; v=1\r\n", "duplicate tag" },
		{ "DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=s; h=from; bh=!!; b=AAAA\r\n",
		  "bad bh=" },
		{ "DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=s; h=from; i=x@b.test; "
		  "bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAA\r\n",
		  "i= is not in d=" },
		{ "DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=s; h=from; c=loose; "
		  "bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAA\r\n",
		  "bad c=" },
		{ "DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=s; h=from; x=5; t=9; "
		  "bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AAAA\r\n",
		  "x= before t=" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dkim_sig sig;
		const char *err = NULL;

		assert_int_equal(dkim_sig_parse(cases[i].field, strlen(cases[i].field), &sig,
						&err),
				 -1);
		assert_string_equal(err, cases[i].reason);
		dkim_sig_release(&sig);
	}
	static const struct {
		const char *txt, *reason;
		enum dkim_alg alg;
	} keys[] = {
		{ "v=DKIM1; k=rsa; p=", "key revoked", DKIM_RSA_SHA256 },
		{ "v=DKIM1; k=rsa; p=AAAA", "unusable public key", DKIM_RSA_SHA256 },
		{ "k=dsa; p=AAAA", "unknown key type", DKIM_RSA_SHA256 },
		{ "k=ed25519; p=AAAA", "ed25519 key is not 32 bytes", DKIM_ED25519_SHA256 },
		{ "k=rsa; p=AAAA", "key type does not match the algorithm", DKIM_ED25519_SHA256 },
		{ "p=AAAA; v=DKIM1", "key record v= is not DKIM1", DKIM_RSA_SHA256 },
		{ "v=DKIM1; h=sha1; p=AAAA", "key does not allow sha256", DKIM_RSA_SHA256 },
		{ "v=DKIM1; s=other; p=AAAA", "key not for email", DKIM_RSA_SHA256 },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct dkim_key k;
		const char *err = NULL;

		assert_int_equal(dkim_key_parse(keys[i].txt, strlen(keys[i].txt), keys[i].alg, &k,
						&err),
				 -1);
		assert_string_equal(err, keys[i].reason);
		dkim_key_release(&k);
	}
	/* a message with a garbage signature and a thousand-fold header still ends */
	struct buf m;
	buf_init(&m, 1024, 1 << 22);
	buf_puts(&m, "DKIM-Signature: v=1; a=rsa-sha256; ;;;; =\r\nSubject: x");
	for (int i = 0; i < 1000; i++)
		buf_puts(&m, "\r\n folded");
	buf_puts(&m, "\r\nFrom: a@b.test\r\n\r\nbody\r\n");
	struct verified vf;
	verify(&vf, m.data, m.len, 100, 1024, 0);
	assert_int_equal(vf.n, 1);
	assert_int_equal(vf.r[0].result, MA_PERMERROR);
	verified_free(&vf);
	buf_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tags),        cmocka_unit_test(test_canon_example),
		cmocka_unit_test(test_rfc8463),     cmocka_unit_test(test_sign_roundtrip),
		cmocka_unit_test(test_body_length), cmocka_unit_test(test_malformed),
	};
	base = event_base_new();
	fdns = fake_dns_new(base);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	fake_dns_free(&fdns);
	event_base_free(base);
	return rc;
}

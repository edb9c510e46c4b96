/* test_dmarc.c — DMARC (RFC 7489) and Authentication-Results (RFC 8601): organizational
 * domains from Debian's Public Suffix List (rules, wildcards, exceptions), record parsing
 * (a 64 KB record, bad p=, missing v=), discovery at the From domain then the organizational
 * domain with sp=, relaxed and strict alignment of SPF and DKIM, pct sampling, temperror;
 * A-R writing and the forged-authserv-id test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mailauth/authres.h"
#include "mailauth/dmarc.h"
#include "tests/mailauth/fake_dns.h"

static struct event_base *base;
static struct fake_dns *fdns;
static struct psl *psl;

static void test_org_domain(void **state)
{
	static const char *const cases[][2] = {
		{ "example.com", "example.com" },
		{ "mail.example.com", "example.com" },
		{ "a.b.c.example.co.uk", "example.co.uk" },
		{ "co.uk", "co.uk" },
		{ "www.city.kawasaki.jp", "city.kawasaki.jp" }, /* !city.kawasaki.jp */
		{ "x.y.kawasaki.jp", "x.y.kawasaki.jp" },       /* *.kawasaki.jp */
		{ "host.unknowntld", "host.unknowntld" },       /* the default rule */
		{ "deep.sub.heron.test", "heron.test" },
	};
	char out[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		psl_org_domain(psl, cases[i][0], out, sizeof(out));
		assert_string_equal(out, cases[i][1]);
	}
}

static void test_record(void **state)
{
	struct dmarc_record r;
	const char *err;
	const char *ok = "v=DMARC1; p=quarantine; sp=reject; adkim=s; pct=25; rua=mailto:x@y.test";

	assert_int_equal(dmarc_record_parse(ok, strlen(ok), &r, &err), 0);
	assert_int_equal(r.p, DMARC_P_QUARANTINE);
	assert_int_equal(r.sp, DMARC_P_REJECT);
	assert_true(r.adkim_strict);
	assert_false(r.aspf_strict);
	assert_int_equal(r.pct, 25);
	const char *bad[] = { "p=reject; v=DMARC1", "v=DMARC1; p=bogus", "v=DMARC1", "v=spf1 -all",
			      "v=DMARC1 p=reject" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(dmarc_record_parse(bad[i], strlen(bad[i]), &r, &err), -1);
	/* 64 KB: one huge tag, and very many tags */
	char *big = malloc(65536);
	snprintf(big, 65536, "v=DMARC1; p=reject; rua=");
	memset(big + strlen(big), 'a', 65535 - strlen(big));
	big[65535] = '\0';
	assert_int_equal(dmarc_record_parse(big, 65535, &r, &err), 0);
	assert_int_equal(r.p, DMARC_P_REJECT);
	size_t k = (size_t)snprintf(big, 65536, "v=DMARC1; p=reject");
	for (int i = 0; k + 8 < 65535; i++)
		k += (size_t)snprintf(big + k, 65536 - k, "; x%d=1", i);
	assert_int_equal(dmarc_record_parse(big, k, &r, &err), -1);
	free(big);
}

struct run {
	struct dmarc_verdict v;
};

static void done_cb(const struct dmarc_verdict *v, void *arg)
{
	((struct run *)arg)->v = *v;
	event_base_loopbreak(base);
}

static struct dmarc_verdict check(const char *from, enum ma_result spf, const char *spf_domain,
				  const char *dkim_d, unsigned sample)
{
	struct dkim_result dk = { .result = MA_PASS };
	struct dmarc_input in = { .from_domain = from,
				  .spf = spf,
				  .spf_domain = spf_domain,
				  .dkim = &dk,
				  .ndkim = dkim_d ? 1 : 0,
				  .psl = psl,
				  .sample = sample };
	struct ma_resolver r;
	struct dmarc *d;
	struct run run = { 0 };

	if (dkim_d)
		snprintf(dk.d, sizeof(dk.d), "%s", dkim_d);
	fake_dns_resolver(fdns, &r);
	if (dmarc_check(&r, &in, done_cb, &run, &d, &run.v) == 0) {
		event_base_dispatch(base);
		dmarc_free(&d);
	}
	return run.v;
}

static void test_policy(void **state)
{
	struct dmarc_verdict v;

	fake_dns_clear(fdns);
	fake_dns_add(fdns, "_dmarc.bank.test", "TXT", "v=DMARC1; p=reject; sp=quarantine");
	fake_dns_add(fdns, "_dmarc.strict.test", "TXT", "v=DMARC1; p=reject; aspf=s; adkim=s");
	fake_dns_add(fdns, "_dmarc.half.test", "TXT", "v=DMARC1; p=reject; pct=50");
	fake_dns_add(fdns, "_dmarc.two.test", "TXT", "v=DMARC1; p=reject");
	fake_dns_add(fdns, "_dmarc.two.test", "TXT", "v=DMARC1; p=none");
	fake_dns_add(fdns, "_dmarc.down.test", "TIMEOUT", NULL);

	v = check("bank.test", MA_PASS, "bank.test", NULL, 0);
	assert_int_equal(v.result, MA_PASS);
	assert_true(v.spf_aligned);
	v = check("bank.test", MA_PASS, "mail.bank.test", NULL, 0); /* relaxed */
	assert_int_equal(v.result, MA_PASS);
	v = check("bank.test", MA_FAIL, "bank.test", "bounce.bank.test", 0);
	assert_int_equal(v.result, MA_PASS);
	assert_true(v.dkim_aligned);
	v = check("bank.test", MA_PASS, "attacker.test", "attacker.test", 0);
	assert_int_equal(v.result, MA_FAIL);
	assert_int_equal(v.action, DMARC_P_REJECT);
	/* a subdomain without its own record: the organizational domain's sp= */
	v = check("www.bank.test", MA_NONE, "attacker.test", NULL, 0);
	assert_int_equal(v.result, MA_FAIL);
	assert_int_equal(v.policy, DMARC_P_QUARANTINE);
	assert_int_equal(v.action, DMARC_P_QUARANTINE);
	/* strict alignment */
	v = check("strict.test", MA_PASS, "mail.strict.test", "sub.strict.test", 0);
	assert_int_equal(v.result, MA_FAIL);
	v = check("strict.test", MA_PASS, "strict.test", NULL, 0);
	assert_int_equal(v.result, MA_PASS);
	/* pct=50: samples at or past 50 are treated one step milder */
	v = check("half.test", MA_FAIL, "x.test", NULL, 10);
	assert_int_equal(v.action, DMARC_P_REJECT);
	v = check("half.test", MA_FAIL, "x.test", NULL, 70);
	assert_int_equal(v.action, DMARC_P_QUARANTINE);
	/* two records: none; no record: none; timeout: temperror */
	assert_int_equal(check("two.test", MA_FAIL, "x.test", NULL, 0).result, MA_NONE);
	assert_int_equal(check("nothing.test", MA_FAIL, "x.test", NULL, 0).result, MA_NONE);
	assert_int_equal(check("down.test", MA_FAIL, "x.test", NULL, 0).result, MA_TEMPERROR);
	assert_int_equal(check("", MA_FAIL, "x.test", NULL, 0).result, MA_NONE);
}

static void test_authres(void **state)
{
	struct buf b;

	buf_init(&b, 256, 4096);
	authres_start(&b, "mx.heron.test");
	authres_add(&b, "dkim", MA_PASS, NULL, "header.d=a.test header.s=s1");
	authres_add(&b, "spf", MA_FAIL, "bad (thing)", "smtp.mailfrom=x@a.test");
	authres_end(&b, 2);
	assert_string_equal(buf_cstr(&b), "Authentication-Results: mx.heron.test;\r\n"
					  "\tdkim=pass header.d=a.test header.s=s1;\r\n"
					  "\tspf=fail (bad thing) smtp.mailfrom=x@a.test\r\n");
	buf_reset(&b);
	authres_start(&b, "mx.heron.test");
	authres_end(&b, 0);
	assert_string_equal(buf_cstr(&b), "Authentication-Results: mx.heron.test; none\r\n");
	buf_release(&b);
	const char *forged[] = {
		"Authentication-Results: mx.heron.test; dkim=pass\r\n",
		"authentication-results :  (c) MX.Heron.Test 1; spf=pass\r\n",
		"Authentication-Results:\r\n\tmx.heron.test;\r\n\tdmarc=pass\r\n"
	};
	for (size_t i = 0; i < 3; i++)
		assert_true(authres_claims(forged[i], strlen(forged[i]), "mx.heron.test"));
	const char *other[] = { "Authentication-Results: mx.other.test; dkim=pass\r\n",
				"Authentication-Results: mx.heron.test.evil; spf=pass\r\n",
				"X-Authentication-Results: mx.heron.test; spf=pass\r\n" };
	for (size_t i = 0; i < 3; i++)
		assert_false(authres_claims(other[i], strlen(other[i]), "mx.heron.test"));
	char v[64];
	authres_value("a@b.test", v, sizeof(v));
	assert_string_equal(v, "a@b.test");
	authres_value("with space", v, sizeof(v));
	assert_string_equal(v, "\"with space\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_org_domain),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_policy),
		cmocka_unit_test(test_authres),
	};
	char *err;

	if (psl_load(PSL_DEFAULT_PATH, &psl, &err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	base = event_base_new();
	fdns = fake_dns_new(base);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	fake_dns_free(&fdns);
	event_base_free(base);
	psl_free(&psl);
	return rc;
}

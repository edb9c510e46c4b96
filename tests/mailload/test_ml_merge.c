/* test_ml_merge.c — the manager merges agents' histograms exactly (per bucket, as if one agent
 * had seen every sample) and accounts every recipient copy as delivered, lost or duplicated,
 * from IMAP sightings and sink records. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mailload/agent.h"
#include "mailload/json.h"
#include "mailload/manager.h"

/* One agent's "results" line, as agent.c writes it, with the given samples for fn 0 (for
   every summary function when all), 2 errors of fn 1 unless all. */
static char *agent_results_for(const uint64_t *us, size_t n, const char *sent, const char *seen,
			       bool all)
{
	struct histo *h = calloc(1, sizeof(*h));
	struct buf o, hs;

	buf_init(&o, 4096, 1 << 24);
	buf_init(&hs, 256, 1 << 20);
	histo_init(h);
	for (size_t i = 0; i < n; i++)
		histo_add(h, us[i]);
	histo_serialize(h, &hs);
	buf_puts(&o, "{\"ok\":true,\"agent\":0,\"functions\":{");
	for (int f = 0; f < FN_COUNT; f++) {
		buf_printf(&o, "%s\"%s\":{\"errors\":%d,\"histo\":", f ? "," : "", ml_fns[f].key,
			   f == 1 && !all ? 2 : 0);
		json_put_str(&o, f == 0 || (all && f < FN_NSUMMARY) ? buf_cstr(&hs) : "0 0 0 0 ");
		buf_putc(&o, '}');
	}
	buf_printf(&o, "},\"errtop\":[[\"smtp_data\",\"451 try later\",2]],\"ts_step_s\":1,"
		       "\"ts\":[[1,0,2,0,[");
	for (int i = 0; i < 2 * TS_LB; i++)
		buf_printf(&o, "%s%d", i ? "," : "", i == 3);
	buf_printf(&o, "]]],\"sent\":%s,\"seen\":%s,\"server\":{},\"sessions_refused\":0}", sent,
		   seen);
	buf_release(&hs);
	free(h);
	return buf_steal(&o, NULL);
}

static char *agent_results(const uint64_t *us, size_t n, const char *sent, const char *seen)
{
	return agent_results_for(us, n, sent, seen, false);
}

static void test_exact_merge(void **state)
{
	uint64_t a[500], b[700];
	struct histo *all = calloc(1, sizeof(*all));
	struct mgr_point *p = mgr_point_new();
	struct jv *ja, *jb;
	const char *err;

	histo_init(all);
	for (int i = 0; i < 500; i++) {
		a[i] = 100 + (uint64_t)i * 37;
		histo_add(all, a[i]);
	}
	for (int i = 0; i < 700; i++) {
		b[i] = 5000 + (uint64_t)i * i * 3;
		histo_add(all, b[i]);
	}
	char *sa = agent_results(a, 500, "[]", "[]"), *sb = agent_results(b, 700, "[]", "[]");
	assert_int_equal(jv_parse(sa, strlen(sa), &ja, &err), 0);
	assert_int_equal(jv_parse(sb, strlen(sb), &jb, &err), 0);
	assert_int_equal(mgr_point_merge(p, ja), 0);
	assert_int_equal(mgr_point_merge(p, jb), 0);
	const struct histo *m = mgr_point_histo(p, 0);
	assert_int_equal(m->count, all->count);
	assert_int_equal(m->sum, all->sum);
	assert_int_equal(m->min, all->min);
	assert_int_equal(m->max, all->max);
	assert_memory_equal(m->b, all->b, sizeof(all->b));
	assert_int_equal(histo_percentile(m, 99), histo_percentile(all, 99));
	/* a malformed histogram is refused, not merged */
	char *bad = strdup(sa);
	char *h = strstr(bad, "\"histo\":\"");
	h[9] = 'x';
	struct jv *jbad;
	assert_int_equal(jv_parse(bad, strlen(bad), &jbad, &err), 0);
	assert_int_equal(mgr_point_merge(p, jbad), -1);
	jv_free(&jbad);
	free(bad);
	jv_free(&ja);
	jv_free(&jb);
	free(sa);
	free(sb);
	free(all);
	mgr_point_free(&p);
}

static struct jv *parse(const char *s)
{
	struct jv *v;
	const char *err;

	assert_int_equal(jv_parse(s, strlen(s), &v, &err), 0);
	return v;
}

/* Copies seen during the run count as delivered (inside the probe's window) or late (after
   it); a copy nobody saw is looked for by the reconciliation: found there it is late, its
   time the time found; not found in an INBOX that was read it is lost; in an INBOX that
   could not be read, unchecked. */
static void test_delivery_accounting(void **state)
{
	struct ml_cfg c;
	struct mgr_point *p = mgr_point_new();
	struct jv *r0, *r1, *sink, *out, *rec;
	struct buf o;
	uint64_t none[1] = { 0 };
	uint32_t *miss;
	bool unc, short_run;

	ml_cfg_defaults(&c, "small");
	c.run_id = 77;
	c.t0_ms = 1000000;
	c.ramp_s = 10;
	c.steady_s = 100;
	/* message 1: users 5 and 6 and remote r9; message 2: user 7 (never seen: lost);
	   message 3: user 8 seen under two UIDs (duplicated); remote r4 arrives twice;
	   4: user 11, found by the reconciliation; 5: user 12, whose INBOX could not be read;
	   6: user 13, seen 200 s after its 250 (after the 120 s window); 7: user 14, found by
	   the reconciliation under a UID an earlier look had covered */
	char *a0 = agent_results(none, 0,
				 "[[1,1020000,1020100,1,[5,6,-9]],[2,1030000,1030050,1,[7]],"
				 "[3,1040000,1040010,0,[8,-4]],[4,1050000,1050000,0,[11]],"
				 "[5,1060000,1060000,1,[12]],[6,1070000,1070000,1,[13]],"
				 "[7,1080000,1080000,0,[14]]]",
				 "[[1,5,1,10,1020600],[1,5,1,10,1020900],[3,8,1,4,1040500],"
				 "[6,13,1,9,1270000]]");
	char *a1 = agent_results(none, 0, "[]", "[[1,6,2,33,1021100],[3,8,1,5,1041000]]");
	const char *recs =
		"[{\"seq\":1,\"id\":\"<77.1@mailload>\",\"sent_ms\":1020000,"
		"\"arrival_ms\":1020300,\"rcpts\":[\"r9@ext.heron.test\"]},"
		"{\"seq\":2,\"id\":\"<77.3@mailload>\",\"sent_ms\":1,\"arrival_ms\":1040200,"
		"\"rcpts\":[\"r4@ext.heron.test\"]},"
		"{\"seq\":3,\"id\":\"<77.3@mailload>\",\"sent_ms\":1,\"arrival_ms\":1040300,"
		"\"rcpts\":[\"r4@ext.heron.test\"]},"
		"{\"seq\":4,\"id\":\"<76.1@mailload>\",\"sent_ms\":1,\"arrival_ms\":1,"
		"\"rcpts\":[\"r9@ext.heron.test\"]}]";
	r0 = parse(a0);
	r1 = parse(a1);
	sink = parse(recs);
	assert_int_equal(mgr_point_merge(p, r0), 0);
	assert_int_equal(mgr_point_merge(p, r1), 0);
	/* the reconciliation reads the INBOXes of 7, 11, 12 and 14 */
	assert_int_equal(mgr_point_missing_users(p, &miss), 4);
	assert_int_equal(miss[0], 7);
	assert_int_equal(miss[1], 11);
	assert_int_equal(miss[2], 12);
	assert_int_equal(miss[3], 14);
	free(miss);
	rec = parse("{\"users_ok\":[7,11,14],\"users_failed\":[[12,\"probe_login: NO\"]],"
		    "\"seen\":[[4,11,1,20,1400000,0],[7,14,1,3,1090000,1]]}");
	assert_int_equal(mgr_point_merge_recon(p, rec, 0), 0);
	buf_init(&o, 4096, 1 << 24);
	struct mgr_sink sk = { sink, 4, 0, "test sink" };
	enum ml_verdict v = mgr_point_finish(p, &c, 100, &sk, &o, &unc, &short_run);
	assert_int_equal(v, MV_INVALID); /* no function has samples: too short */
	assert_true(short_run);
	out = parse(buf_cstr(&o));
	const struct jv *d = jv_get(out, "delivery");
	assert_int_equal(jv_int(d, "checked", -1), 10);
	assert_int_equal(jv_int(d, "local", -1), 8);
	assert_int_equal(jv_int(d, "remote", -1), 2);
	assert_int_equal(jv_int(d, "delivered", -1), 5);
	assert_int_equal(jv_int(d, "late", -1), 3);
	assert_int_equal(jv_int(d, "unchecked", -1), 1);
	assert_int_equal(jv_int(d, "lost", -1), 1);
	assert_int_equal(jv_int(d, "duplicated", -1), 2);
	assert_int_equal(jv_int(jv_get(d, "reconciliation"), "below_covered_uid", -1), 1);
	assert_string_equal(jv_str(&jv_get(d, "lost_copies")->kid[0], "rcpt", ""),
			    "user7@heron.test");
	assert_string_equal(jv_str(&jv_get(d, "unchecked_copies")->kid[0], "how", ""),
			    "probe_login: NO");
	const struct jv *late = jv_get(d, "late_copies");
	assert_int_equal(late->n, 3);
	assert_int_equal(jv_int(&late->kid[0], "found_ms", 0), 1400000);
	/* delivery time: first sighting minus the 250; late ones at the time they were found
	   (user 11: 350 s), in the same histogram, so the rule counts them */
	assert_int_equal(jv_int(d, "count", -1), 8);
	assert_true(jv_num(d, "max_ms", 0) >= 349000 && jv_num(d, "max_ms", 0) <= 351000);
	assert_int_equal(jv_int(d, "within", -1), 6); /* user 14: found 10 s after its 250 */
	const struct jv *m = jv_get(out, "messages");
	assert_int_equal(jv_int(m, "submitted", -1), 4);
	assert_int_equal(jv_int(m, "incoming", -1), 3);
	/* errors: the 2+2 SMTP Data errors, the lost and duplicated copies, the one below */
	assert_int_equal(jv_int(jv_get(out, "errors"), "failed", -1), 4 + 1 + 2 + 1);
	const struct jv *fns = jv_get(out, "functions");
	assert_string_equal(jv_str(&fns->kid[0], "key", ""), "smtp_connect");
	assert_string_equal(jv_str(&fns->kid[14], "key", ""), "imap_uid_store_seen");
	assert_string_equal(jv_str(&fns->kid[0], "class", ""), "summary");
	assert_int_equal(jv_int(&fns->kid[0], "samples_required", 0), ML_MIN_SAMPLES);
	jv_free(&out);
	buf_release(&o);
	jv_free(&rec);

	/* without a sink and without a reconciliation nothing unseen is called lost */
	mgr_point_free(&p);
	p = mgr_point_new();
	assert_int_equal(mgr_point_merge(p, r0), 0);
	assert_int_equal(mgr_point_merge(p, r1), 0);
	buf_init(&o, 4096, 1 << 24);
	struct mgr_sink none_sk = { NULL, 0, 0, "unavailable" };
	mgr_point_finish(p, &c, 100, &none_sk, &o, NULL, NULL);
	out = parse(buf_cstr(&o));
	d = jv_get(out, "delivery");
	assert_int_equal(jv_int(d, "unchecked", -1), 2 + 4);
	assert_int_equal(jv_int(d, "lost", -1), 0);
	assert_string_equal(jv_str(d, "remote_note", ""), "unavailable");
	jv_free(&out);
	buf_release(&o);
	jv_free(&r0);
	jv_free(&r1);
	jv_free(&sink);
	free(a0);
	free(a1);
	mgr_point_free(&p);
}

/* Wilson intervals: known values; an all-compliant function needs ML_MIN_SAMPLES samples
   for its interval to clear 95%. */
static void test_wilson(void **state)
{
	double lo, hi;

	ml_wilson(95, 100, &lo, &hi);
	assert_true(lo > 88.6 && lo < 88.9 && hi > 97.8 && hi < 98.0);
	ml_wilson(ML_MIN_SAMPLES, ML_MIN_SAMPLES, &lo, &hi);
	assert_true(lo > 95.0);
	ml_wilson(ML_MIN_SAMPLES - 1, ML_MIN_SAMPLES - 1, &lo, &hi);
	assert_true(lo <= 95.0);
	ml_wilson(0, 0, &lo, &hi);
	assert_true(lo == 0 && hi == 100);
}

/* A point whose every function has enough samples inside the limit passes; one whose
   compliance sits just above 95% with few samples passes but is flagged uncertain. */
static void test_verdicts(void **state)
{
	struct ml_cfg c;
	uint64_t us[200];
	bool unc, short_run;
	struct buf o;

	ml_cfg_defaults(&c, "small");
	c.run_id = 5;
	c.t0_ms = 1000000;
	c.ramp_s = 10;
	c.steady_s = 100;
	for (int round = 0; round < 2; round++) {
		struct mgr_point *p = mgr_point_new();
		size_t n = round == 0 ? 200 : 80;
		for (size_t i = 0; i < n; i++) /* round 1: 3 of 80 over 5 s: 96.25%, interval
						  88.9%..98.7% */
			us[i] = round == 1 && i < 3 ? 6000000 : 1000 + i;
		char *a = agent_results_for(us, n, "[]", "[]", true);
		struct jv *r = parse(a);
		assert_int_equal(mgr_point_merge(p, r), 0);
		/* 100 remote copies, all arrived in 10 ms */
		struct buf rb;
		buf_init(&rb, 4096, 1 << 20);
		buf_puts(&rb, "[");
		for (int i = 0; i < 100; i++)
			buf_printf(&rb,
				   "%s{\"seq\":%d,\"id\":\"<5.%d@mailload>\",\"arrival_ms\":%d,"
				   "\"rcpts\":[\"r1@ext.heron.test\"]}",
				   i ? "," : "", i + 1, 1000 + i, 1020110);
		buf_puts(&rb, "]");
		struct jv *recs = parse(buf_cstr(&rb));
		struct buf sent;
		buf_init(&sent, 4096, 1 << 20);
		buf_puts(&sent, "{\"functions\":{},\"ts_step_s\":1,\"ts\":[[0,0,0,0,[");
		for (int i = 0; i < 2 * TS_LB; i++)
			buf_printf(&sent, "%s0", i ? "," : "");
		buf_puts(&sent, "]]],\"sent\":[");
		for (int i = 0; i < 100; i++)
			buf_printf(&sent, "%s[%d,1020000,1020100,1,[-1]]", i ? "," : "", 1000 + i);
		buf_puts(&sent, "],\"seen\":[]}");
		struct jv *sj = parse(buf_cstr(&sent));
		assert_int_equal(mgr_point_merge(p, sj), 0);
		struct mgr_sink sk = { recs, 1000, 0, "sink" };
		buf_init(&o, 4096, 1 << 24);
		enum ml_verdict v = mgr_point_finish(p, &c, 100, &sk, &o, &unc, &short_run);
		struct jv *out = parse(buf_cstr(&o));
		assert_false(short_run);
		if (round == 0) {
			assert_int_equal(v, MV_PASS);
			assert_false(unc);
		} else {
			assert_int_equal(v, MV_PASS);
			assert_true(unc);
			assert_true(jv_get(out, "uncertain_reasons")->n > 0);
		}
		jv_free(&out);
		buf_release(&o);
		buf_release(&rb);
		buf_release(&sent);
		jv_free(&recs);
		jv_free(&sj);
		jv_free(&r);
		free(a);
		mgr_point_free(&p);
	}
}

/* The "server" and "tls" members: an agent writes them, the manager adds two agents' up and
   writes the same shape into the report. */
static void test_server_info(void **state)
{
	struct ml_server_info a = { "mx ESMTP", "",        "CAPABILITY IMAP4rev1",  { 3, 1 },
				    { 0, 2 },   "TLSv1.3", "TLS_AES_128_GCM_SHA256" };
	struct ml_server_info b = { "other",  "OK \"imap\"", "X", { 4, 5 },
				    { 1, 0 }, "TLSv1.2",     "x", "(\"name\" \"S\")" };
	struct ml_server_info m = { 0 };
	const struct ml_server_info *agents[2] = { &a, &b };
	struct buf o;
	struct jv *r;
	const char *err;

	buf_init(&o, 1024, 1 << 16);
	for (int i = 0; i < 2; i++) {
		buf_reset(&o);
		buf_putc(&o, '{');
		ml_server_info_json(agents[i], &o);
		buf_putc(&o, '}');
		assert_int_equal(jv_parse(o.data, o.len, &r, &err), 0);
		ml_server_info_merge(&m, r);
		jv_free(&r);
	}
	buf_reset(&o);
	ml_server_info_json(&m, &o);
	assert_string_equal(buf_cstr(&o),
			    "\"server\":{\"smtp_greeting\":\"mx ESMTP\",\"imap_greeting\":"
			    "\"OK \\\"imap\\\"\",\"imap_capability\":\"CAPABILITY IMAP4rev1\","
			    "\"imap_id\":\"(\\\"name\\\" \\\"S\\\")\"},"
			    "\"tls\":{\"smtp\":7,\"imap\":6,\"smtp_failed\":1,\"imap_failed\":2,"
			    "\"protocol\":\"TLSv1.3\",\"cipher\":\"TLS_AES_128_GCM_SHA256\"}");
	buf_release(&o);
}

static void test_json(void **state)
{
	static const char *const bad[] = { "{",   "[1,]",  "{\"a\" 1}",       "\"\\q\"",
					   "tru", "[1] x", "{\"a\":\"\x01\"}" };
	struct jv *v;
	const char *err;
	char deep[200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(jv_parse(bad[i], strlen(bad[i]), &v, &err), -1);
	memset(deep, '[', sizeof(deep));
	assert_int_equal(jv_parse(deep, sizeof(deep), &v, &err), -1);
	const char *ok = "{\"s\":\"a\\u00e9\\\"b\",\"n\":-12,\"f\":1.5,\"t\":true,\"z\":null}";
	assert_int_equal(jv_parse(ok, strlen(ok), &v, &err), 0);
	assert_string_equal(jv_str(v, "s", ""), "a\xc3\xa9\"b");
	assert_int_equal(jv_int(v, "n", 0), -12);
	assert_true(jv_num(v, "f", 0) == 1.5);
	jv_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_merge), cmocka_unit_test(test_delivery_accounting),
		cmocka_unit_test(test_wilson),      cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_server_info), cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
